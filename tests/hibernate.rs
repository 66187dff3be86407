//! Idle waiting tasks hibernate to the store and come back on demand (DESIGN §4): a task in
//! INPUT_REQUIRED with nothing running and nobody subscribed gives up its actor after the idle
//! timeout; a follow-up message, SubscribeToTask or CancelTask revives it, and GetTask and
//! ListTasks read it from the store meanwhile.
mod common;

use std::time::Duration;

use a2a_server::core::CoreSettings;
use a2a_server::proto::a2a_service_client::A2aServiceClient;
use a2a_server::proto::{CancelTaskRequest, GetTaskRequest, SubscribeToTaskRequest, Task, TaskState};
use common::*;
use tonic::transport::Channel;

async fn server() -> TestServer {
    TestServer::builder()
        .settings(CoreSettings { idle_timeout: Some(Duration::from_millis(100)), ..CoreSettings::default() })
        .start()
        .await
}

/// An INPUT_REQUIRED task whose actor has hibernated.
async fn hibernated_task(server: &TestServer, client: &mut A2aServiceClient<Channel>) -> Task {
    let task = send_task(client, send("input")).await;
    assert_eq!(state(&task), TaskState::InputRequired);
    server.wait_until("the task to hibernate", |core| core.live_tasks() == 0).await;
    task
}

#[tokio::test]
async fn an_idle_task_hibernates_and_a_follow_up_revives_it() {
    let server = server().await;
    let mut client = server.client().await;
    let task = hibernated_task(&server, &mut client).await;

    let stored = client.get_task(GetTaskRequest { id: task.id.clone(), ..Default::default() }).await;
    let stored = stored.expect("GetTask reads a hibernated task").into_inner();
    assert_eq!(state(&stored), TaskState::InputRequired);
    assert_eq!(stored.history, task.history);

    let done = send_task(&mut client, follow_up(&task, "green")).await;
    assert_eq!(state(&done), TaskState::Completed);
    assert_eq!(artifact_texts(&done), ["green"]);
    assert_eq!(done.history.len(), task.history.len() + 1, "the follow-up joined the history");

    // Counted for operators (other tests in this process may add to the counters).
    let metrics = reqwest::get(format!("{}/metrics", server.url())).await.unwrap().text().await.unwrap();
    for counter in ["a2a_tasks_hibernated_total", "a2a_tasks_revived_total"] {
        let value = metrics
            .lines()
            .find_map(|line| line.strip_prefix(counter)?.trim().parse::<f64>().ok())
            .unwrap_or_else(|| panic!("{counter} in /metrics:\n{metrics}"));
        assert!(value >= 1.0, "{counter} = {value}");
    }
}

#[tokio::test]
async fn subscribing_revives_a_hibernated_task_and_sees_its_next_turn() {
    let server = server().await;
    let mut client = server.client().await;
    let task = hibernated_task(&server, &mut client).await;

    let request = SubscribeToTaskRequest { id: task.id.clone(), ..Default::default() };
    let stream = client.subscribe_to_task(request).await.expect("subscribe").into_inner();
    assert_eq!(server.core.live_tasks(), 1, "revived");
    let mut other = server.client().await;
    let done = send_task(&mut other, follow_up(&task, "blue")).await;
    assert_eq!(state(&done), TaskState::Completed);
    let items = collect(stream).await.expect("ends with OK");
    let chunks: Vec<_> = items.iter().flat_map(chunk_texts).collect();
    assert_eq!(chunks, ["blue"]);
    assert_eq!(item_state(items.last().unwrap()), Some(TaskState::Completed));
}

#[tokio::test]
async fn a_subscribed_task_keeps_its_actor_until_the_subscriber_leaves() {
    let server = server().await;
    let mut client = server.client().await;
    let task = send_task(&mut client, send("input")).await;
    let request = SubscribeToTaskRequest { id: task.id.clone(), ..Default::default() };
    let stream = client.subscribe_to_task(request).await.expect("subscribe").into_inner();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(server.core.live_tasks(), 1, "five idle timeouts later, still live");
    drop(stream);
    server.wait_until("the task to hibernate", |core| core.live_tasks() == 0).await;
}

#[tokio::test]
async fn a_hibernated_task_can_be_canceled() {
    let server = server().await;
    let mut client = server.client().await;
    let task = hibernated_task(&server, &mut client).await;
    let request = CancelTaskRequest { id: task.id.clone(), ..Default::default() };
    let canceled = client.cancel_task(request).await.expect("cancel").into_inner();
    assert_eq!(state(&canceled), TaskState::Canceled);
    let stored = client.get_task(GetTaskRequest { id: task.id.clone(), ..Default::default() }).await;
    assert_eq!(state(&stored.unwrap().into_inner()), TaskState::Canceled);
    assert_eq!(server.core.live_tasks(), 0);
}

#[tokio::test]
async fn concurrent_calls_on_a_hibernated_task_revive_one_actor() {
    let server = server().await;
    let mut client = server.client().await;
    let task = hibernated_task(&server, &mut client).await;
    let subscribers: Vec<_> = (0..8)
        .map(|_| {
            let (server_url, id) = (server.url(), task.id.clone());
            tokio::spawn(async move {
                let mut client = A2aServiceClient::connect(server_url).await.expect("connect");
                let request = SubscribeToTaskRequest { id, ..Default::default() };
                client.subscribe_to_task(request).await.expect("subscribe").into_inner()
            })
        })
        .collect();
    let mut streams = Vec::new();
    for subscriber in subscribers {
        streams.push(subscriber.await.expect("subscriber"));
    }
    assert_eq!(server.core.live_tasks(), 1, "one actor for all of them");
    let done = send_task(&mut client, follow_up(&task, "red")).await;
    assert_eq!(state(&done), TaskState::Completed);
    for stream in streams {
        let items = collect(stream).await.expect("ends with OK");
        let chunks: Vec<_> = items.iter().flat_map(chunk_texts).collect();
        assert_eq!(chunks, ["red"], "every subscriber sees the one turn");
    }
}

#[tokio::test]
async fn hibernation_can_be_turned_off() {
    let server = TestServer::builder()
        .settings(CoreSettings { idle_timeout: None, ..CoreSettings::default() })
        .start()
        .await;
    let mut client = server.client().await;
    send_task(&mut client, send("input")).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.core.live_tasks(), 1);
}
