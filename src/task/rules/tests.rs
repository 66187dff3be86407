//! The task rules' own checks: transitions, merges and what each state allows.
use super::*;
use crate::agent::text_artifact;
use crate::proto::{Artifact, Part};

fn task() -> Arc<Task> {
    Arc::new(Task {
        id: "t1".into(),
        context_id: "c1".into(),
        status: Some(TaskStatus { state: TaskState::Submitted as i32, ..Default::default() }),
        ..Default::default()
    })
}

fn status(state: TaskState, text: Option<&str>) -> AgentEvent {
    AgentEvent::Status(TaskStatusUpdateEvent {
        status: Some(TaskStatus {
            state: state as i32,
            message: text.map(|t| Message { parts: vec![text_part(t)], ..Default::default() }),
            timestamp: None,
        }),
        ..Default::default()
    })
}

fn chunk(id: &str, text: &str, append: bool, last_chunk: bool) -> AgentEvent {
    AgentEvent::Artifact(TaskArtifactUpdateEvent {
        artifact: Some(text_artifact(id, "out", text)),
        append,
        last_chunk,
        ..Default::default()
    })
}

fn texts(artifact: &Artifact) -> Vec<&str> {
    artifact
        .parts
        .iter()
        .filter_map(|p| match &p.content {
            Some(crate::proto::part::Content::Text(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn append_adds_parts_and_a_plain_update_replaces_the_artifact() {
    let mut task = task();
    apply(&mut task, true, chunk("a", "one", false, false)).unwrap();
    apply(&mut task, true, chunk("a", "two", true, false)).unwrap();
    apply(&mut task, true, chunk("b", "other", false, true)).unwrap();
    assert_eq!(task.artifacts.len(), 2);
    assert_eq!(texts(&task.artifacts[0]), ["one", "two"]);
    assert_eq!(texts(&task.artifacts[1]), ["other"]);
    apply(&mut task, true, chunk("a", "new", false, true)).unwrap();
    assert_eq!(texts(&task.artifacts[0]), ["new"], "without append, the artifact is replaced");
    assert_eq!(task.artifacts.len(), 2);
}

/// Unannounced (nothing reads the update), a change does the same to the task and builds
/// no update: the artifact moves in instead of being copied.
#[test]
fn an_unannounced_change_changes_the_task_alike_and_builds_no_update() {
    let events = || {
        [
            status(TaskState::Working, Some("on it")),
            chunk("a", "one", false, false),
            chunk("a", "two", true, true),
            chunk("b", "x", false, true),
            status(TaskState::Completed, None),
        ]
    };
    let (mut announced, mut quiet) = (task(), task());
    for (loud, silent) in events().into_iter().zip(events()) {
        assert!(apply(&mut announced, true, loud).unwrap().into_payload().is_some());
        assert_eq!(apply(&mut quiet, false, silent).unwrap().into_payload(), None);
    }
    // The status messages' ids and timestamps are fresh per call.
    let strip = |task: &Task| {
        let mut task = task.clone();
        task.history.iter_mut().for_each(|m| m.message_id.clear());
        task.status.iter_mut().for_each(|s| s.timestamp = None);
        task
    };
    assert_eq!(strip(&quiet), strip(&announced));
    assert_eq!(texts(&quiet.artifacts[0]), ["one", "two"]);
}

/// The owner's task after every update, from a snapshot taken after any of them and the
/// updates it published since: exactly the same task, generation and all.
#[test]
fn a_snapshot_and_the_updates_after_it_replay_to_the_owners_task() {
    let events = [
        status(TaskState::Working, Some("on it")),
        chunk("a", "one", false, false),
        chunk("a", "two", true, false),
        status(TaskState::InputRequired, None),
        chunk("b", "x", false, true),
        chunk("a", "three", true, true),
        chunk("b", "y", false, true),
        status(TaskState::Completed, Some("done")),
    ];
    let mut owner = task();
    let (mut snapshots, mut updates) = (vec![owner.clone()], Vec::new());
    for (seq, event) in (2..).zip(events) {
        let mut payload = apply(&mut owner, true, event).unwrap().into_payload();
        stamp_generation(&mut owner, payload.as_mut(), seq);
        updates.push((seq, payload.unwrap()));
        snapshots.push(owner.clone());
    }
    for (at, snapshot) in snapshots.iter().enumerate() {
        let mut replayed = snapshot.clone();
        for (seq, payload) in &updates[at..] {
            replay(&mut replayed, *seq, payload.clone()).unwrap();
        }
        assert_eq!(replayed, owner, "replayed from the snapshot after {at} updates");
    }
    let not_an_update = Payload::Task(Task::default());
    assert!(replay(&mut owner.clone(), 10, not_an_update).is_err(), "only updates replay");
}

#[test]
fn an_artifact_update_is_published_with_the_tasks_ids_and_its_flags() {
    let mut task = task();
    let Change::Artifact(Some(update)) = apply(&mut task, true, chunk("a", "x", true, true)).unwrap() else {
        panic!("an artifact change")
    };
    assert_eq!((update.task_id.as_str(), update.context_id.as_str()), ("t1", "c1"));
    assert!(update.append && update.last_chunk, "append and lastChunk pass through");
    let Change::Artifact(Some(update)) = apply(&mut task, true, chunk("a", "y", false, false)).unwrap()
    else {
        panic!("an artifact change")
    };
    assert!(!update.append && !update.last_chunk);
}

#[test]
fn events_naming_another_task_or_context_are_refused_and_change_nothing() {
    let mut task = task();
    let before = task.clone();
    let foreign = AgentEvent::Artifact(TaskArtifactUpdateEvent {
        task_id: "t2".into(),
        artifact: Some(text_artifact("a", "out", "x")),
        ..Default::default()
    });
    assert_eq!(apply(&mut task, true, foreign).unwrap_err(), "an event for task t2 sent to task t1");
    let AgentEvent::Status(mut update) = status(TaskState::Working, None) else { unreachable!() };
    update.context_id = "c9".into();
    let error = apply(&mut task, true, AgentEvent::Status(update)).unwrap_err();
    assert_eq!(error, "an event for context c9 sent to task t1");
    assert_eq!(task, before);
    assert!(Arc::ptr_eq(&task, &before), "a refused event copies nothing");
}

#[test]
fn malformed_events_are_refused_with_the_reason() {
    let mut task = task();
    let cases = [
        (AgentEvent::Message(Message::default()), "a direct message is only allowed instead of a task"),
        (AgentEvent::Status(TaskStatusUpdateEvent::default()), "a status update without a status"),
        (status(TaskState::Unspecified, None), "invalid task state 0"),
        (AgentEvent::Artifact(TaskArtifactUpdateEvent::default()), "an artifact update without an artifact"),
        (chunk("", "x", false, false), "an artifact without an artifactId"),
        (
            AgentEvent::Artifact(TaskArtifactUpdateEvent {
                artifact: Some(Artifact { artifact_id: "a".into(), ..Default::default() }),
                ..Default::default()
            }),
            "artifact a has no parts",
        ),
    ];
    for (event, reason) in cases {
        assert_eq!(apply(&mut task, true, event).unwrap_err(), reason);
    }
    assert!(task.artifacts.is_empty() && task.history.is_empty());
}

#[test]
fn a_status_moves_the_state_and_its_message_into_the_history() {
    let mut task = task();
    let change = apply(&mut task, true, status(TaskState::Working, None)).unwrap();
    let Change::Status { previous, update: Some(update) } = change else { panic!("a status change") };
    assert_eq!(previous, TaskState::Submitted);
    assert_eq!(state_of(task.status.as_ref()), TaskState::Working);
    assert!(task.status.as_ref().unwrap().timestamp.is_some(), "stamped");
    assert_eq!(update.status, task.status);
    assert_eq!((update.task_id.as_str(), update.context_id.as_str()), ("t1", "c1"));
    assert!(task.history.is_empty(), "a status without a message adds none");

    let Change::Status { previous, .. } =
        apply(&mut task, true, status(TaskState::InputRequired, Some("which?"))).unwrap()
    else {
        panic!("a status change")
    };
    assert_eq!(previous, TaskState::Working);
    let recorded = &task.history[0];
    assert_eq!(recorded.role, Role::Agent as i32);
    assert!(!recorded.message_id.is_empty());
    assert_eq!((recorded.task_id.as_str(), recorded.context_id.as_str()), ("t1", "c1"));
    assert_eq!(task.status.as_ref().unwrap().message.as_ref(), Some(recorded));
}

#[test]
fn a_status_updates_metadata_is_merged_into_the_tasks_key_by_key() {
    let value =
        |text: &str| pbjson_types::Value { kind: Some(pbjson_types::value::Kind::StringValue(text.into())) };
    let with = |pairs: &[(&str, &str)]| pbjson_types::Struct {
        fields: pairs.iter().map(|(k, v)| ((*k).to_owned(), value(v))).collect(),
    };
    let mut task = task();
    let working = || TaskStatus { state: TaskState::Working as i32, message: None, timestamp: None };
    set_status(&mut task, false, working(), Some(with(&[("a", "1"), ("b", "1")])));
    set_status(&mut task, true, working(), Some(with(&[("b", "2")])));
    set_status(&mut task, true, working(), None);
    assert_eq!(task.metadata, Some(with(&[("a", "1"), ("b", "2")])));
}

#[test]
fn a_status_keeps_its_metadata_and_timestamp() {
    let mut task = task();
    let stamp = pbjson_types::Timestamp { seconds: 7, nanos: 0 };
    let metadata = pbjson_types::Struct::default();
    let given = TaskStatus { state: TaskState::Completed as i32, message: None, timestamp: Some(stamp) };
    let Change::Status { update: Some(update), .. } =
        set_status(&mut task, true, given, Some(metadata.clone()))
    else {
        panic!("a status change")
    };
    assert_eq!(update.metadata, Some(metadata));
    assert_eq!(task.status.as_ref().unwrap().timestamp, Some(stamp));
}

#[test]
fn a_failure_says_why_as_an_agent_message() {
    let mut task = task();
    set_status(&mut task, true, failure("the agent failed: boom"), None);
    assert_eq!(state_of(task.status.as_ref()), TaskState::Failed);
    let message = task.status.as_ref().unwrap().message.as_ref().unwrap();
    assert_eq!(message.parts, vec![text_part("the agent failed: boom")]);
    assert_eq!(message.role, Role::Agent as i32);
    assert_eq!(task.history.len(), 1);
}

#[test]
fn a_follow_up_joins_the_history_in_the_tasks_context_or_is_refused() {
    let mut task = task();
    let message = Message { parts: vec![Part::default()], ..Default::default() };
    let recorded = accept_message(&mut task, message.clone()).unwrap();
    assert_eq!(recorded.context_id, "c1");
    assert_eq!(task.history, vec![recorded]);
    let elsewhere = Message { context_id: "c2".into(), ..message };
    let error = accept_message(&mut task, elsewhere).unwrap_err();
    assert!(matches!(error, A2aError::InvalidParams { .. }), "{error:?}");
    assert_eq!(task.history.len(), 1);
}

#[test]
fn a_blocking_send_settles_at_terminal_and_interrupted_states() {
    let settling = [
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Canceled,
        TaskState::Rejected,
        TaskState::InputRequired,
        TaskState::AuthRequired,
    ];
    for state in settling {
        assert!(settles(state), "{state:?}");
    }
    assert!(!settles(TaskState::Submitted) && !settles(TaskState::Working));
}
