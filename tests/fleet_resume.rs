//! Resuming from the task's shared stream on any replica (`docs/extensions/resume.md` §4.2,
//! `docs/FLEET.md`): a subscriber that resumes on a replica whose log does not reach back to its
//! cursor — one that does not follow the task yet, or the owner whose log dropped the events —
//! gets exactly the events after the cursor, read from the task's Redis stream, with no Task
//! first, then the live ones, on every binding (`A2A-Last-Generation`, and SSE's
//! `Last-Event-ID`). Only a cursor the stream was trimmed past gets the Task first. Needs
//! `redis-server` (skipped without it, like the other fleet tests).
mod common;

use a2a_server::call::RESUME_EXTENSION;
use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{
    GetTaskRequest, SendMessageResponse, StreamResponse, TaskState, send_message_response,
};
use common::bindings::{BINDINGS, Binding, Client, ItemStream};
use common::fleet::{Fleet, Replica, eventually};
use common::redis::RedisServer;
use common::*;

const A: usize = 0;
const B: usize = 1;
const C: usize = 2;

fn task_id(response: SendMessageResponse) -> String {
    match response.payload {
        Some(send_message_response::Payload::Task(task)) => task.id,
        other => panic!("expected a task, got {other:?}"),
    }
}

/// A client of `replica` over `binding` sending `A2A-Version: version`.
async fn client(replica: &Replica, binding: Binding, version: &str) -> Client {
    Client::to(replica.url(), replica.client().await, binding, version)
}

/// A client of `replica` with the resume extension active.
async fn resumer(replica: &Replica, binding: Binding) -> Client {
    client(replica, binding, "1.0").await.with_header("a2a-extensions", RESUME_EXTENSION)
}

/// Reads `stream` until an item of generation `at` or later; the generation of that item.
async fn read_until(stream: &mut ItemStream, at: i64) -> i64 {
    loop {
        let item = stream.next().await.expect("the stream goes on").expect("an item");
        if item_generation(&item) >= at {
            return item_generation(&item);
        }
    }
}

/// Waits until the store holds the task at generation `at` or later (read on `replica`).
async fn stored_at_least(replica: &Replica, id: &str, at: i64) {
    let grpc = replica.client().await;
    eventually("the store holds the generation", PATIENCE, || {
        let request = GetTaskRequest { id: id.to_owned(), ..Default::default() };
        let mut grpc = grpc.clone();
        async move { grpc.get_task(request).await.expect("GetTask").into_inner().generation >= at }
    })
    .await;
}

/// The value of `a2a_resumes_total{from="<from>"}` on `replica`.
async fn resumes(replica: &Replica, from: &str) -> f64 {
    let sample = format!("a2a_resumes_total{{from=\"{from}\"}} ");
    let text = replica.metrics().await;
    text.lines().find_map(|line| line.strip_prefix(&sample)).map_or(0.0, |v| v.parse().unwrap())
}

/// Asserts that `items` are the updates right after `cut` up to the task's end, without a Task:
/// consecutive generations, each chunk the one its generation stands for.
fn assert_exactly_after(items: &[StreamResponse], cut: i64, last: i64, what: &str) {
    assert!(!matches!(items[0].payload, Some(Payload::Task(_))), "{what}: no snapshot: {:?}", items[0]);
    let generations: Vec<i64> = items.iter().map(item_generation).collect();
    assert_eq!(generations, (cut + 1..=last).collect::<Vec<_>>(), "{what}: gapless, no duplicate");
    for item in items.iter().filter(|item| item_state(item).is_none()) {
        // The demo agent's chunk k is generation k + 3 (creation, WORKING, then chunks from 0).
        let chunk = format!("chunk {}", item_generation(item) - 3);
        assert_eq!(chunk_texts(item), [chunk], "{what}");
    }
    assert_eq!(item_state(items.last().unwrap()), Some(TaskState::Completed), "{what}");
}

/// A task streams on A; a subscriber on A reads part of it; the store moves well past its cursor;
/// it resumes on B, which has never followed the task, with `header: cursor`. The resumed stream
/// must be exactly what the uninterrupted subscriber got next.
async fn resume_on_a_fresh_replica(fleet: &Fleet, on_a: Client, on_b: Client, header: &'static str) {
    let id = task_id(on_a.send(send_returning_immediately("stream 16 100")).await.unwrap());
    let mut whole = on_a.subscribe(&id).await.unwrap();
    let cut = read_until(&mut whole, 6).await;
    // B's follower, started by the resume, starts from the store: well after the cursor.
    stored_at_least(&fleet[C], &id, cut + 3).await;

    let resumed = on_b.with_header(header, cut.to_string()).subscribe(&id).await.unwrap();
    let (rest, failure) = resumed.finish().await;
    assert!(failure.is_none(), "{header}: {failure:?}");
    let (remaining, _) = whole.finish().await;
    assert_exactly_after(&rest, cut, 1 + 1 + 16 + 1, header);
    assert_eq!(rest, remaining, "{header}: what the uninterrupted subscriber saw");
}

#[tokio::test]
async fn a_resume_on_a_replica_that_does_not_follow_the_task_reads_the_missed_events_from_redis() {
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(3, &redis.url(), &[]);
    for binding in BINDINGS {
        let (on_a, on_b) = (resumer(&fleet[A], binding).await, resumer(&fleet[B], binding).await);
        resume_on_a_fresh_replica(&fleet, on_a, on_b, "a2a-last-generation").await;
    }
    assert_eq!(resumes(&fleet[B], "stream").await, 3.0, "every resume on B from the stream");
    assert_eq!(resumes(&fleet[B], "task").await, 0.0);
}

#[tokio::test]
async fn sse_last_event_id_on_a_replica_that_does_not_follow_the_task_resumes_exactly() {
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(3, &redis.url(), &[]);
    for binding in [Binding::JsonRpc, Binding::HttpJson] {
        // No extension: `Last-Event-ID` is honoured alone; 1.1 clients get the generations.
        let on_a = client(&fleet[A], binding, "1.1").await;
        let on_b = client(&fleet[B], binding, "1.1").await;
        resume_on_a_fresh_replica(&fleet, on_a, on_b, "last-event-id").await;
    }
    assert_eq!(resumes(&fleet[B], "stream").await, 2.0);
}

#[tokio::test]
async fn a_resume_on_the_owner_whose_log_dropped_the_events_reads_them_from_redis() {
    let Some(redis) = RedisServer::start() else { return };
    // Every replica's log keeps about its 3 newest events (some 800 bytes each, as counted);
    // the stream keeps them all.
    let fleet = Fleet::start(2, &redis.url(), &["--event-log-bytes", "3000"]);
    let on_a = resumer(&fleet[A], Binding::Grpc).await;
    let id = task_id(on_a.send(send_returning_immediately("stream 16 100")).await.unwrap());
    let mut whole = on_a.subscribe(&id).await.unwrap();
    let cut = read_until(&mut whole, 6).await;
    drop(whole);
    stored_at_least(&fleet[B], &id, cut + 6).await;

    let resumed = on_a.with_header("a2a-last-generation", cut.to_string()).subscribe(&id).await.unwrap();
    let (rest, failure) = resumed.finish().await;
    assert!(failure.is_none(), "{failure:?}");
    assert_exactly_after(&rest, cut, 1 + 1 + 16 + 1, "the owner");
    assert_eq!(resumes(&fleet[A], "stream").await, 1.0);
}

#[tokio::test]
async fn a_cursor_the_stream_was_trimmed_past_gets_the_task_then_every_update() {
    let Some(redis) = RedisServer::start() else { return };
    // Streams keep about 4 events (Redis trims whole nodes of up to 100 entries).
    let fleet = Fleet::start(3, &redis.url(), &["--event-log-capacity", "4"]);
    let on_a = resumer(&fleet[A], Binding::Grpc).await;
    let id = task_id(on_a.send(send_returning_immediately("stream 1000 10")).await.unwrap());
    stored_at_least(&fleet[C], &id, 250).await;

    let on_b = resumer(&fleet[B], Binding::Grpc).await.with_header("a2a-last-generation", "3");
    let mut resumed = on_b.subscribe(&id).await.unwrap();
    let first = resumed.next().await.expect("an item").expect("no error");
    let Some(Payload::Task(task)) = &first.payload else { panic!("the Task first: {first:?}") };
    assert_eq!(state(task), TaskState::Working, "still running: the stream was trimmed, not the task over");
    assert!(task.generation >= 250, "the jump says it was reconciled");
    for expected in task.generation + 1..task.generation + 5 {
        let item = resumed.next().await.expect("an item").expect("no error");
        assert_eq!(item_generation(&item), expected, "then every update");
    }
    assert_eq!(resumes(&fleet[B], "task").await, 1.0);
    assert_eq!(resumes(&fleet[B], "stream").await, 0.0);
}

/// A task finished by its first write (the echo) is stored without its events when nobody
/// could see them (a blocking caller): a resume from before its end gets the final Task. One
/// whose events a streaming caller saw keeps them: a resume on another replica gets exactly
/// the updates after its cursor, from the stream.
#[tokio::test]
async fn a_task_over_by_its_first_write_keeps_its_events_only_when_someone_saw_them() {
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(2, &redis.url(), &[]);
    let on_a = resumer(&fleet[A], Binding::Grpc).await;

    let quiet = on_a.send(send("hello")).await.unwrap();
    let Some(send_message_response::Payload::Task(quiet)) = quiet.payload else { panic!("a task") };
    assert_eq!(state(&quiet), TaskState::Completed);
    let on_b = resumer(&fleet[B], Binding::Grpc).await.with_header("a2a-last-generation", "1");
    let (items, failure) = on_b.subscribe(&quiet.id).await.unwrap().finish().await;
    assert!(failure.is_none(), "{failure:?}");
    let Some(Payload::Task(task)) = &items[0].payload else { panic!("the Task first: {:?}", items[0]) };
    assert_eq!((state(task), task.generation, items.len()), (TaskState::Completed, quiet.generation, 1));
    assert_eq!(resumes(&fleet[B], "task").await, 1.0);

    let (seen, failure) = on_a.send_streaming(send("hello")).await.unwrap().finish().await;
    assert!(failure.is_none(), "{failure:?}");
    let last = seen.last().map(item_generation).expect("items");
    let id = match &seen[0].payload {
        Some(Payload::Task(task)) => task.id.clone(),
        Some(Payload::StatusUpdate(update)) => update.task_id.clone(),
        other => panic!("a first item naming the task: {other:?}"),
    };
    let on_b = resumer(&fleet[B], Binding::Grpc).await.with_header("a2a-last-generation", "1");
    let (rest, failure) = on_b.subscribe(&id).await.unwrap().finish().await;
    assert!(failure.is_none(), "{failure:?}");
    assert!(!matches!(rest[0].payload, Some(Payload::Task(_))), "no Task first: {:?}", rest[0]);
    assert_eq!(rest.iter().map(item_generation).collect::<Vec<_>>(), (2..=last).collect::<Vec<_>>());
    assert_eq!(resumes(&fleet[B], "stream").await, 1.0);
}
