//! A2A dev-1.1's `generation` in a fleet: every replica reads the same value, the numbering
//! goes on when another replica revives the task, a follower's updates carry the owner's
//! generations, and a subscriber resuming on a replica whose follower still holds the events
//! gets exactly the rest (resuming elsewhere reads them from Redis: `tests/fleet_resume.rs`).
//! Needs `redis-server` (skipped without it, like the other fleet tests).
mod common;

use a2a_server::call::RESUME_EXTENSION;
use a2a_server::proto::a2a_service_client::A2aServiceClient;
use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{GetTaskRequest, StreamResponse, SubscribeToTaskRequest, TaskState};
use common::fleet::{Fleet, eventually};
use common::redis::RedisServer;
use common::*;
use tonic::Streaming;
use tonic::transport::Channel;

const A: usize = 0;
const B: usize = 1;
const C: usize = 2;

async fn generation_on(client: &mut A2aServiceClient<Channel>, id: &str) -> i64 {
    let request = GetTaskRequest { id: id.to_owned(), ..Default::default() };
    client.get_task(request).await.expect("GetTask").into_inner().generation
}

#[tokio::test]
async fn the_generation_goes_on_across_hibernation_and_replicas() {
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(3, &redis.url(), &["--task-idle-secs", "1"]);
    let mut a = fleet[A].client().await;
    let task = send_task(&mut a, send("input")).await;
    assert_eq!(task.generation, 2, "created (1), then INPUT_REQUIRED");
    for replica in [A, B, C] {
        let mut client = fleet[replica].client().await;
        assert_eq!(generation_on(&mut client, &task.id).await, 2, "replica {replica}");
    }
    eventually("A hibernates the task", PATIENCE, || async {
        fleet[A].metric("a2a_tasks_hibernated_total").await >= 1.0
    })
    .await;

    // B revives it (or forwards to whoever did): the numbering goes on from the store's 2.
    let mut b = fleet[B].client().await;
    let done = send_task(&mut b, follow_up(&task, "green")).await;
    assert_eq!((state(&done), done.generation), (TaskState::Completed, 4));
    let mut c = fleet[C].client().await;
    assert_eq!(generation_on(&mut c, &task.id).await, 4);
}

/// SubscribeToTask on `channel` with the resume extension and, if given, a cursor.
async fn subscribe(
    client: &mut A2aServiceClient<Channel>,
    id: &str,
    after: Option<i64>,
) -> Streaming<StreamResponse> {
    let mut request = tonic::Request::new(SubscribeToTaskRequest { id: id.to_owned(), ..Default::default() });
    request.metadata_mut().insert("a2a-extensions", RESUME_EXTENSION.parse().unwrap());
    if let Some(after) = after {
        request.metadata_mut().insert("a2a-last-generation", after.to_string().parse().unwrap());
    }
    client.subscribe_to_task(request).await.expect("subscribe").into_inner()
}

#[tokio::test]
async fn a_resuming_subscriber_on_another_replica_gets_exactly_the_rest() {
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(3, &redis.url(), &[]);
    let mut a = fleet[A].client().await;
    let task = send_task(&mut a, send_returning_immediately("stream 20 100")).await;

    // A subscriber on C (C follows A's task from Redis), cut once it has seen generation 6.
    let mut c = fleet[C].client().await;
    let mut steady = subscribe(&mut c, &task.id, None).await;
    let mut seen = Vec::new();
    while seen.last().is_none_or(|item| item_generation(item) < 6) {
        seen.push(next(&mut steady).await.expect("the stream goes on"));
    }
    let cut = item_generation(seen.last().unwrap());

    // It resumes on C: C's follower still holds the events, so no snapshot, exactly the rest.
    let rest = collect(subscribe(&mut c, &task.id, Some(cut)).await).await.expect("ends normally");
    let remaining = collect(steady).await.expect("ends normally");
    assert!(!matches!(rest[0].payload, Some(Payload::Task(_))), "no snapshot: {:?}", rest[0]);
    assert_eq!(item_generation(&rest[0]), cut + 1);
    assert_eq!(rest, remaining, "what the uninterrupted subscriber saw");
    assert_eq!(item_state(rest.last().unwrap()), Some(TaskState::Completed));
    assert_eq!(
        item_generation(rest.last().unwrap()),
        1 + 1 + 20 + 1,
        "creation, WORKING, 20 chunks, COMPLETED"
    );

    // On B, now that the task is over: the updates it missed, read from the task's stream, up
    // to the terminal one (resume.md §4.4), never an error and no Task.
    let mut b = fleet[B].client().await;
    let late = collect(subscribe(&mut b, &task.id, Some(2)).await).await.expect("an old cursor is no error");
    let generations: Vec<i64> = late.iter().map(item_generation).collect();
    assert_eq!(generations, (3..=23).collect::<Vec<_>>(), "exactly the updates after 2: {late:?}");
    assert!(late.iter().all(|item| !matches!(item.payload, Some(Payload::Task(_)))));
    assert_eq!(item_state(late.last().unwrap()), Some(TaskState::Completed));
    assert_eq!(late[late.len() - rest.len()..], rest[..], "the same updates the others saw");
    assert_eq!(generation_on(&mut a, &task.id).await, 23);
}
