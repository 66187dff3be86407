//! Parked tasks expire in a fleet (issue #33): three real `a2a-server` replicas on one real
//! `redis-server`, each sweeping the shared ledger of parked tasks. A hibernated task whose
//! input timeout passes is canceled exactly once (one event, one cancel message, the next
//! generation), by whichever replica wins its lease; a live waiting task is canceled by its
//! owner and a subscriber on another replica sees the cancel.
//!
//! Without `redis-server` these tests skip loudly, except under `CI=true`, where they fail.
mod common;

use std::time::Duration;

use a2a_server::proto::{GetTaskRequest, Task, TaskState};
use common::fleet::{Fleet, collect_raw, decode, subscribe_raw};
use common::redis::RedisServer;
use common::*;

/// Seconds a task may wait for input here, and how long it takes to hibernate.
const ARGS: [&str; 4] = ["--input-timeout-secs", "2", "--task-idle-secs", "1"];

/// The cancel messages in `task`'s history that say it expired.
fn expiry_messages(task: &Task) -> usize {
    let said =
        |m: &&a2a_server::proto::Message| texts(&m.parts).concat().contains("no input arrived within 2s");
    task.history.iter().filter(said).count()
}

/// `task` as `client` reads it once it no longer waits for input, or as it is after `limit`.
async fn no_longer_waiting(
    client: &mut a2a_server::proto::a2a_service_client::A2aServiceClient<tonic::transport::Channel>,
    task: &Task,
    limit: Duration,
) -> Task {
    let get = GetTaskRequest { id: task.id.clone(), ..Default::default() };
    let start = std::time::Instant::now();
    loop {
        let last = client.get_task(get.clone()).await.expect("GetTask").into_inner();
        if state(&last) != TaskState::InputRequired || start.elapsed() >= limit {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_hibernated_task_in_a_fleet_expires_exactly_once() {
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(3, &redis.url(), &ARGS);
    let mut clients = Vec::new();
    for replica in &fleet.replicas {
        clients.push(replica.client().await);
    }
    let task = send_task(&mut clients[0], send("input")).await;
    assert_eq!(state(&task), TaskState::InputRequired);
    let get = GetTaskRequest { id: task.id.clone(), ..Default::default() };
    let last = no_longer_waiting(&mut clients[1], &task, Duration::from_secs(60)).await;
    assert_eq!(state(&last), TaskState::Canceled, "{last:?}");
    // Every replica swept meanwhile; none canceled it again or forked it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for client in &mut clients {
        let now = client.get_task(get.clone()).await.expect("GetTask").into_inner();
        assert_eq!(now.generation, task.generation + 1, "one event after the wait: the cancel");
        assert_eq!(expiry_messages(&now), 1, "one cancel message");
    }
    let expired = fleet.metric_sum("a2a_tasks_expired_total", &[0, 1, 2]).await;
    assert_eq!(expired, 1.0, "one replica expired it");
}

#[tokio::test]
async fn a_live_waiting_task_in_a_fleet_expires_on_its_owner_and_every_subscriber_sees_it() {
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(2, &redis.url(), &ARGS);
    let mut owner = fleet.replicas[0].client().await;
    let task = send_task(&mut owner, send("input")).await;
    // A subscriber keeps the task live (it does not hibernate) on its owner; another follows
    // it from the other replica.
    let mut here = subscribe_raw(fleet.replicas[0].channel().await, &task.id).await.expect("subscribe");
    let mut there = subscribe_raw(fleet.replicas[1].channel().await, &task.id).await.expect("subscribe");
    for stream in [&mut here, &mut there] {
        let (items, end) = collect_raw(stream).await;
        end.expect("the stream ends with OK");
        let last = decode(items.last().expect("items"));
        assert_eq!(item_state(&last), Some(TaskState::Canceled));
        assert_eq!(item_generation(&last), task.generation + 1);
    }
}

/// A task waiting for input whose owner dies before it hibernated (a subscriber kept it live,
/// or it waited less than the idle time) is left for the next call to revive, as a hibernated
/// one is: the survivor that takes it over parks it, so it still expires on time (and counts
/// toward the parked caps). Before, it was in no ledger: it waited for ever, its keys too.
#[tokio::test]
async fn a_waiting_task_whose_owner_dies_still_expires() {
    let Some(redis) = RedisServer::start() else { return };
    let args = ["--input-timeout-secs", "2", "--task-idle-secs", "600", "--lease-ms", "1000"];
    let mut fleet = Fleet::start(2, &redis.url(), &args);
    let mut owner = fleet.replicas[0].client().await;
    let task = send_task(&mut owner, send("input")).await;
    assert_eq!(state(&task), TaskState::InputRequired);
    fleet.replicas[0].kill9();
    let mut survivor = fleet.replicas[1].client().await;
    let last = no_longer_waiting(&mut survivor, &task, Duration::from_secs(15)).await;
    assert_eq!(state(&last), TaskState::Canceled, "the wait ended by the timeout: {last:?}");
    assert_eq!(expiry_messages(&last), 1, "one cancel message");
    assert_eq!(last.generation, task.generation + 1, "one event after the wait: the cancel");
}
