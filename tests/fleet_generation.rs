//! A2A dev-1.1's `generation` in a fleet: every replica reads the same value, the numbering
//! goes on when another replica revives the task, a follower's updates carry the owner's
//! generations, and a resuming subscriber on another replica misses nothing. Needs
//! `redis-server` (skipped without it, like the other fleet tests).
mod common;

use std::time::Duration;

use a2a_server::call::RESUME_EXTENSION;
use a2a_server::proto::a2a_service_client::A2aServiceClient;
use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{GetTaskRequest, SubscribeToTaskRequest, TaskState};
use common::fleet::{Fleet, eventually};
use common::redis::RedisServer;
use common::*;
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

#[tokio::test]
async fn a_resuming_subscriber_on_another_replica_misses_nothing() {
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(3, &redis.url(), &[]);
    let mut a = fleet[A].client().await;
    let task = send_task(&mut a, send_returning_immediately("stream 20 100")).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut c = fleet[C].client().await;
    let cursor = generation_on(&mut c, &task.id).await;
    assert!(cursor >= 2);

    let mut request =
        tonic::Request::new(SubscribeToTaskRequest { id: task.id.clone(), ..Default::default() });
    request.metadata_mut().insert("a2a-extensions", RESUME_EXTENSION.parse().unwrap());
    request.metadata_mut().insert("a2a-last-generation", cursor.to_string().parse().unwrap());
    let items = collect(c.subscribe_to_task(request).await.expect("subscribe on C").into_inner())
        .await
        .expect("the stream ends normally");
    // The follower answers with exactly the rest, or (the store moved on meanwhile) the Task
    // first: either way, contiguous generations to COMPLETED, the owner's numbers.
    let first = match &items[0].payload {
        Some(Payload::Task(snapshot)) => snapshot.generation,
        _ => {
            assert_eq!(item_generation(&items[0]), cursor + 1, "right after the cursor");
            cursor + 1
        }
    };
    let generations: Vec<i64> = items.iter().map(item_generation).collect();
    assert_eq!(generations, (first..first + items.len() as i64).collect::<Vec<_>>());
    assert_eq!(item_state(items.last().unwrap()), Some(TaskState::Completed));
    assert_eq!(generation_on(&mut a, &task.id).await, *generations.last().unwrap());
    assert_eq!(*generations.last().unwrap(), 1 + 1 + 20 + 1, "creation, WORKING, 20 chunks, COMPLETED");
}
