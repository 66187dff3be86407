//! The protocol's rules for changing a task, as functions over a [`Task`]: what an agent
//! event may say and what it does to the task, how artifacts merge, how a status is recorded.
//!
//! They decide nothing about time, storage, subscribers or metrics, so they are tested here
//! without an actor; the actor applies them and publishes what they return.
use std::sync::Arc;

use super::{is_interrupted, is_terminal, now, state_of};
use crate::agent::{AgentEvent, text_part};
use crate::error::A2aError;
use crate::proto::{
    Message, Role, Task, TaskArtifactUpdateEvent, TaskState, TaskStatus, TaskStatusUpdateEvent,
    stream_response::Payload,
};

/// What a rule changed in the task: the update to publish, its ids filled in, when it was
/// asked to announce the change (`None` otherwise).
#[derive(Debug, PartialEq)]
pub(crate) enum Change {
    /// A new status; `previous` is the state it replaced (for the gauges).
    Status { previous: TaskState, update: Option<TaskStatusUpdateEvent> },
    /// A whole artifact or a chunk of one.
    Artifact(Option<TaskArtifactUpdateEvent>),
}

impl Change {
    /// The stream payload that announces the change, if it was announced.
    pub fn into_payload(self) -> Option<Payload> {
        match self {
            Self::Status { update, .. } => update.map(Payload::StatusUpdate),
            Self::Artifact(update) => update.map(Payload::ArtifactUpdate),
        }
    }
}

/// Checks an agent event against the protocol and applies it to `task` (copied first if
/// shared); the reason when it breaks the protocol, leaving the task as it was. Unless
/// `announce`, no update is built (nothing would read it): an artifact then moves into the
/// task instead of being copied.
pub(crate) fn apply(task: &mut Arc<Task>, announce: bool, event: AgentEvent) -> Result<Change, String> {
    match event {
        AgentEvent::Message(_) => Err("a direct message is only allowed instead of a task".into()),
        AgentEvent::Status(update) => {
            check_ids(task, &update.task_id, &update.context_id)?;
            let status = update.status.ok_or("a status update without a status")?;
            match TaskState::try_from(status.state) {
                Ok(TaskState::Unspecified) | Err(_) => Err(format!("invalid task state {}", status.state)),
                Ok(_) => Ok(set_status(task, announce, status, update.metadata)),
            }
        }
        AgentEvent::Artifact(update) => {
            check_ids(task, &update.task_id, &update.context_id)?;
            let artifact = update.artifact.as_ref().ok_or("an artifact update without an artifact")?;
            if artifact.artifact_id.is_empty() {
                return Err("an artifact without an artifactId".into());
            }
            if artifact.parts.is_empty() {
                return Err(format!("artifact {} has no parts", artifact.artifact_id));
            }
            if !announce {
                merge_artifact(Arc::make_mut(task), update);
                return Ok(Change::Artifact(None));
            }
            merge_artifact(Arc::make_mut(task), update.clone());
            Ok(Change::Artifact(Some(TaskArtifactUpdateEvent {
                task_id: task.id.clone(),
                context_id: task.context_id.clone(),
                ..update
            })))
        }
    }
}

/// Brings a stored snapshot of a task one update further, as the owner's actor did when it
/// published that update (the same rules, so the same task): a reader in a fleet may find the
/// task stored some events behind its stream (`task/store/redis/snapshot.rs`). `generation` is
/// the update's seq.
pub(crate) fn replay(task: &mut Arc<Task>, generation: u64, payload: Payload) -> Result<(), String> {
    let event = match payload {
        Payload::StatusUpdate(update) => AgentEvent::Status(update),
        Payload::ArtifactUpdate(update) => AgentEvent::Artifact(update),
        Payload::Task(_) | Payload::Message(_) => return Err("a stored event that is no update".into()),
    };
    apply(task, false, event)?;
    stamp_generation(task, None, generation);
    Ok(())
}

/// An event may leave its ids empty (they are filled in), but not name another task.
fn check_ids(task: &Task, task_id: &str, context_id: &str) -> Result<(), String> {
    if !task_id.is_empty() && task_id != task.id {
        return Err(format!("an event for task {task_id} sent to task {}", task.id));
    }
    if !context_id.is_empty() && context_id != task.context_id {
        return Err(format!("an event for context {context_id} sent to task {}", task.id));
    }
    Ok(())
}

/// `append` adds the chunk's parts to the artifact of that id; otherwise the artifact
/// replaces the one of that id, or is added.
fn merge_artifact(task: &mut Task, update: TaskArtifactUpdateEvent) {
    let Some(artifact) = update.artifact else {
        return;
    };
    let artifacts = &mut task.artifacts;
    match artifacts.iter_mut().find(|a| a.artifact_id == artifact.artifact_id) {
        Some(existing) if update.append => existing.parts.extend(artifact.parts),
        Some(existing) => *existing = artifact,
        None => push_lean(artifacts, artifact),
    }
}

/// Pushes onto one of a task's lists, growing a short one by exactly one slot: a task's
/// history and artifacts hold a few entries, and `Vec`'s first growth (to four) left up to
/// three empty slots of 150–400 bytes each in every live task (a running task with its stream
/// took 1.1 KiB less without them, a2a-bench `running`).
fn push_lean<T>(list: &mut Vec<T>, item: T) {
    if list.len() == list.capacity() && list.len() < 4 {
        list.reserve_exact(1);
    }
    list.push(item);
}

/// Records a new status: stamps it, gives its message an id, the agent's role and the task's
/// ids, and keeps that message in the history (the spec's history holds status messages too).
pub(crate) fn set_status(
    task: &mut Arc<Task>,
    announce: bool,
    mut status: TaskStatus,
    metadata: Option<pbjson_types::Struct>,
) -> Change {
    let task = Arc::make_mut(task);
    if status.timestamp.is_none() {
        status.timestamp = Some(now());
    }
    if let Some(message) = status.message.as_mut() {
        if message.message_id.is_empty() {
            message.message_id = crate::proto::new_id();
        }
        if message.role == Role::Unspecified as i32 {
            message.role = Role::Agent as i32;
        }
        message.task_id = task.id.clone();
        message.context_id = task.context_id.clone();
        push_lean(&mut task.history, message.clone());
    }
    if let Some(metadata) = &metadata {
        merge_metadata(task, metadata);
    }
    let previous = state_of(task.status.as_ref());
    if !announce {
        task.status = Some(status);
        return Change::Status { previous, update: None };
    }
    task.status = Some(status.clone());
    let update = TaskStatusUpdateEvent {
        task_id: task.id.clone(),
        context_id: task.context_id.clone(),
        status: Some(status),
        metadata,
        // Set as the actor publishes it (`stamp_generation`).
        generation: 0,
    };
    Change::Status { previous, update: Some(update) }
}

/// Merges a status update's metadata into the task's, key by key: the update says what changed,
/// the task keeps the latest value of each key.
fn merge_metadata(task: &mut Task, metadata: &pbjson_types::Struct) {
    let fields = &mut task.metadata.get_or_insert_with(Default::default).fields;
    for (key, value) in &metadata.fields {
        fields.insert(key.clone(), value.clone());
    }
}

/// Marks `payload` (an update, if announced) and `task` with the task's new `generation`
/// (A2A dev-1.1): the update carries the value after it, and the task that of its last update.
pub(crate) fn stamp_generation(task: &mut Arc<Task>, payload: Option<&mut Payload>, generation: u64) {
    let generation = generation as i64;
    match payload {
        Some(Payload::StatusUpdate(update)) => update.generation = generation,
        Some(Payload::ArtifactUpdate(update)) => update.generation = generation,
        Some(Payload::Task(_) | Payload::Message(_)) | None => {}
    }
    Arc::make_mut(task).generation = generation;
}

/// `ifGenerationMatch` (A2A dev-1.1) for a follow-up message: the task must be at `expected`.
/// A message accepted since the last update (`pending`) has changed the task without a
/// generation of its own (it has no event), so it fails the match too until the next update:
/// two clients racing on one generation cannot both win.
pub(crate) fn match_generation(task: &Task, expected: Option<i64>, pending: bool) -> Result<(), A2aError> {
    match expected {
        Some(expected) if expected != task.generation || pending => Err(A2aError::TaskGenerationMismatch {
            task_id: task.id.clone(),
            expected,
            current: task.generation,
        }),
        _ => Ok(()),
    }
}

/// A FAILED status whose agent message says why, for the client to read.
pub(crate) fn failure(text: &str) -> TaskStatus {
    let message = Message {
        message_id: crate::proto::new_id(),
        role: Role::Agent as i32,
        parts: vec![text_part(text)],
        ..Default::default()
    };
    TaskStatus { state: TaskState::Failed as i32, message: Some(message), timestamp: None }
}

/// A client's follow-up message joins the history, in the task's context; one naming
/// another context is refused. The message as recorded.
pub(crate) fn accept_message(task: &mut Arc<Task>, mut message: Message) -> Result<Message, A2aError> {
    if !message.context_id.is_empty() && message.context_id != task.context_id {
        return Err(A2aError::invalid_field(
            "message.contextId",
            format!("does not match the context of task {}", task.id),
        ));
    }
    message.context_id = task.context_id.clone();
    push_lean(&mut Arc::make_mut(task).history, message.clone());
    Ok(message)
}

/// Whether a blocking SendMessage returns at this state: terminal or interrupted.
pub(crate) fn settles(state: TaskState) -> bool {
    is_terminal(state) || is_interrupted(state)
}

#[cfg(test)]
mod tests;
