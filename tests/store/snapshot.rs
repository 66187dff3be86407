//! A task stored as a snapshot some events behind its stream (`task/store/redis/snapshot.rs`):
//! every reader (a join's snapshot, GetTask, ListTasks, a survivor's takeover) gets the Task as
//! of the last event, brought up to it by the owner's rules; and when the events it needs are
//! gone, an error, never an older Task.
use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{
    Artifact, Message, Part, Role, StreamResponse, TaskArtifactUpdateEvent, TaskStatus,
    TaskStatusUpdateEvent, part,
};
use a2a_server::task::store::redis::{Append, Fenced};
use prost::Message as _;

use super::*;

/// Artifact chunks the task streams before it completes.
const CHUNKS: u64 = 12;

/// The owner's updates and its Task after each: `(task, seq, event)`, from seq 2 (a task's
/// first event: generation 1 is its creation).
fn streamed() -> Vec<(Task, u64, Bytes)> {
    let text = |t: &str| Part { content: Some(part::Content::Text(t.into())), ..Default::default() };
    let mut task = Task::clone(&task("snap", "ctx", TaskState::Working, 0));
    let mut written = Vec::new();
    for seq in 2..2 + CHUNKS {
        let chunk = Artifact {
            artifact_id: "a".into(),
            parts: vec![text(&format!("chunk {seq}"))],
            ..Default::default()
        };
        match task.artifacts.first_mut() {
            Some(artifact) => artifact.parts.extend(chunk.parts.clone()),
            None => task.artifacts.push(chunk.clone()),
        }
        task.generation = seq as i64;
        let update = TaskArtifactUpdateEvent {
            task_id: task.id.clone(),
            context_id: task.context_id.clone(),
            artifact: Some(chunk),
            append: seq > 2,
            generation: seq as i64,
            ..Default::default()
        };
        written.push((task.clone(), seq, encoded(Payload::ArtifactUpdate(update))));
    }
    let seq = 2 + CHUNKS;
    let message = Message {
        message_id: "m".into(),
        role: Role::Agent as i32,
        task_id: task.id.clone(),
        context_id: task.context_id.clone(),
        parts: vec![text("done")],
        ..Default::default()
    };
    let status = TaskStatus {
        state: TaskState::Completed as i32,
        message: Some(message.clone()),
        timestamp: Some(pbjson_types::Timestamp { seconds: 1_800_000_000, nanos: 0 }),
    };
    task.history.push(message);
    task.status = Some(status.clone());
    task.generation = seq as i64;
    let update = TaskStatusUpdateEvent {
        task_id: task.id.clone(),
        context_id: task.context_id.clone(),
        status: Some(status),
        generation: seq as i64,
        ..Default::default()
    };
    written.push((task, seq, encoded(Payload::StatusUpdate(update))));
    written
}

fn encoded(payload: Payload) -> Bytes {
    StreamResponse { payload: Some(payload) }.encode_to_vec().into()
}

/// Stores the task as its owner does, event by event, then puts the task hash back to the
/// Task after event `snap`, marked as lagging (as a writer keeping the Task behind leaves it).
async fn stored_behind(store: &RedisStore, url: &str, prefix_of: &str, snap: u64) -> Task {
    let alice = owner("alice");
    let written = streamed();
    for (task, seq, event) in &written {
        let appended = store.append(&alice, task, *seq, event.clone(), BOUNDS, None).await.unwrap();
        assert_eq!(appended, Ok::<(), Fenced>(()));
    }
    let (snapshot, ..) =
        written.iter().find(|(_, seq, _)| *seq == snap).expect("a seq the task went through");
    let mut conn = redis::Client::open(url).unwrap().get_multiplexed_async_connection().await.unwrap();
    let key = task_key(&mut conn, prefix_of).await;
    kept_behind(&mut conn, &key, snapshot).await;
    written.last().map(|(task, ..)| task.clone()).unwrap()
}

/// Puts `task` into the task hash `key`, marked as lagging: what a writer keeping the Task
/// behind its stream leaves.
async fn kept_behind(conn: &mut redis::aio::MultiplexedConnection, key: &str, task: &Task) {
    let fields = [("task", task.encode_to_vec()), ("lag", b"1".to_vec())];
    let _: () = redis::cmd("HSET").arg(key).arg(&fields[..]).query_async(conn).await.unwrap();
}

/// The task hash of task `snap` under the store's prefix.
async fn task_key(conn: &mut redis::aio::MultiplexedConnection, prefix: &str) -> String {
    let keys: Vec<String> =
        redis::cmd("KEYS").arg(format!("{prefix}:{{snap}}:task")).query_async(conn).await.unwrap();
    keys.into_iter().next().expect("the task hash")
}

#[tokio::test]
async fn every_reader_gets_the_task_as_of_its_last_event_from_a_snapshot_behind() {
    let Some(server) = RedisServer::start() else { return };
    let alice = owner("alice");
    for snap in [2, 7, 2 + CHUNKS - 1] {
        let prefix = format!("snap-behind-{snap}");
        let store = store_under(&server.url(), &prefix).await;
        let last = stored_behind(&store, &server.url(), &prefix, snap).await;
        let (joined, seq) = store.snapshot(&alice, "snap").await.unwrap().expect("the task");
        assert_eq!((Task::clone(&joined), seq), (last.clone(), 2 + CHUNKS), "a join's snapshot, from {snap}");
        assert_eq!(store.get(&alice, "snap").await.unwrap().as_deref(), Some(&last), "GetTask");
        let query = TaskQuery { page_size: 10, include_artifacts: true, ..Default::default() };
        assert_eq!(store.list(&alice, &query).await.unwrap().tasks, vec![last.clone()], "ListTasks");
        let orphan = store.orphan("snap").await.unwrap().expect("the orphan");
        assert_eq!((Task::clone(&orphan.task), orphan.seq), (last, 2 + CHUNKS), "a takeover");
    }
}

/// The owner's writer keeps the stored Task behind while only artifacts come (its whole
/// encoding is not even sent), and every reader still gets the latest; the finishing write
/// stores the Task again, whatever it was asked, and nothing is replayed onto it twice.
#[tokio::test]
async fn a_writer_keeps_the_task_behind_while_artifacts_come_and_readers_see_the_latest() {
    let Some(server) = RedisServer::start() else { return };
    let alice = owner("alice");
    let prefix = "snap-writer";
    let store = store_under(&server.url(), prefix).await;
    let mut conn =
        redis::Client::open(server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let written = streamed();
    let keep = Append { reindex: false, keep_task: true };
    for (at, (task, seq, event)) in written.iter().enumerate() {
        let how = if at == 0 { Append::with_task(true) } else { keep };
        let appended = store
            .append_batch(&alice, task, *seq, std::slice::from_ref(event), BOUNDS, "", how)
            .await
            .unwrap();
        assert_eq!(appended, Ok(()));
        let key = task_key(&mut conn, prefix).await;
        let (stored, lag, stored_seq): (Vec<u8>, Option<String>, u64) =
            redis::cmd("HMGET").arg(&key).arg(&["task", "lag", "seq"]).query_async(&mut conn).await.unwrap();
        let finished = at == written.len() - 1;
        let expected = if finished { task } else { &written[0].0 };
        assert_eq!(Task::decode(&stored[..]).unwrap(), expected.clone(), "the Task stored after write {seq}");
        // The marker stays once set: the whole Task written again carries its own generation.
        assert_eq!(lag.is_some(), at > 0, "marked as lagging after write {seq}");
        assert_eq!(stored_seq, *seq);
        let (read, read_seq) = store.snapshot(&alice, "snap").await.unwrap().expect("the task");
        assert_eq!((Task::clone(&read), read_seq), (task.clone(), *seq), "what a reader gets after {seq}");
    }
}

#[tokio::test]
async fn a_snapshot_whose_events_are_gone_is_an_error_not_an_older_task() {
    let Some(server) = RedisServer::start() else { return };
    let alice = owner("alice");
    let prefix = "snap-events-gone";
    let store = store_under(&server.url(), prefix).await;
    stored_behind(&store, &server.url(), prefix, 4).await;
    let mut conn =
        redis::Client::open(server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let events = task_key(&mut conn, prefix).await.replace(":task", ":events");
    let _: i64 = redis::cmd("XTRIM").arg(&events).arg("MAXLEN").arg(3).query_async(&mut conn).await.unwrap();
    let read = tokio::time::timeout(BOUND, store.snapshot(&alice, "snap")).await.unwrap();
    let error = read.expect_err("the events after the snapshot are gone");
    assert!(error.to_string().contains("kept changing"), "{error}");
    assert!(tokio::time::timeout(BOUND, store.orphan("snap")).await.unwrap().is_err(), "a takeover too");
}

/// A store under `prefix`, which the test then reads keys under.
async fn store_under(url: &str, prefix: &str) -> RedisStore {
    let StoreUrl::Redis(target) = StoreUrl::parse(url).unwrap() else { panic!("{url} is not Redis") };
    let options = RedisOptions { prefix: prefix.into(), ..RedisOptions::default() };
    RedisStore::connect(target, options).await.unwrap()
}

/// A retried append whose first try landed with the Task kept behind (its reply lost), while the
/// Task changed meanwhile without an event (a follow-up's message): the retry finds its events
/// stored and stores the Task alone, so readers get the follow-up too.
#[tokio::test]
async fn a_retry_that_finds_its_events_landed_stores_the_task_it_carries() {
    let Some(server) = RedisServer::start() else { return };
    let store = Arc::new(store_under(&server.url(), "snap-retry").await);
    let fleet = RedisFleet::new(store.clone(), FleetSettings::new("r".into(), Duration::from_secs(10)));
    let alice = owner("alice");
    let written = streamed();
    let full = WriteHints { reindex: true, first_try: true, unwatched: false, task_may_lag: false };
    let (task, seq, event) = &written[0];
    assert!(fleet.append(&alice, task, *seq, vec![event.clone()], full).await.unwrap());
    let (task, seq, event) = &written[1];
    let kept = WriteHints { reindex: false, task_may_lag: true, ..full };
    assert!(fleet.append(&alice, task, *seq, vec![event.clone()], kept).await.unwrap());
    // The follow-up joins the history; the retry of the same event carries that Task whole.
    let mut followed = task.clone();
    let message = Message { message_id: "follow-up".into(), role: Role::User as i32, ..Default::default() };
    followed.history.push(message);
    let retry = WriteHints { first_try: false, ..full };
    assert!(fleet.append(&alice, &followed, *seq, vec![event.clone()], retry).await.unwrap());
    let (read, read_seq) = store.snapshot(&alice, "snap").await.unwrap().expect("the task");
    assert_eq!((Task::clone(&read), read_seq), (followed, *seq), "the follow-up is stored");
}

/// A task whose events after its stored Task do not replay (not updates: a store written by
/// something else, or damaged) is an error for GetTask, and ListTasks skips it rather than
/// fail the page.
#[tokio::test]
async fn a_task_whose_events_do_not_replay_is_skipped_by_listtasks() {
    let Some(server) = RedisServer::start() else { return };
    let alice = owner("alice");
    let prefix = "snap-garbage";
    let store = store_under(&server.url(), prefix).await;
    let mut damaged = Task::clone(&task("snap", "ctx", TaskState::Working, 5));
    for seq in 2..=4 {
        damaged.generation = seq;
        let appended =
            store.append(&alice, &damaged, seq as u64, Bytes::from_static(b"no update"), BOUNDS, None);
        assert_eq!(appended.await.unwrap(), Ok(()));
    }
    let fine = task("fine", "ctx", TaskState::Working, 1);
    assert_eq!(store.append(&alice, &fine, 2, Bytes::from_static(b"e"), BOUNDS, None).await.unwrap(), Ok(()));
    let mut conn =
        redis::Client::open(server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    damaged.generation = 2;
    let key = task_key(&mut conn, prefix).await;
    kept_behind(&mut conn, &key, &damaged).await;
    let error = store.get(&alice, "snap").await.expect_err("its events do not replay");
    assert!(error.to_string().contains("foreign entry"), "{error}");
    let page = store.list(&alice, &TaskQuery { page_size: 10, ..Default::default() }).await.unwrap();
    assert_eq!(page.tasks.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(), ["fine"]);
}
