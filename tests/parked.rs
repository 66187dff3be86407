//! Parked tasks expire (issue #33): a task waiting for input or auth longer than the input
//! timeout is canceled with a status message saying why, live or hibernated, and its slot is
//! freed; hibernated tasks count against `--max-parked-tasks[-per-principal]`, not live slots;
//! and every quota refusal that a wait can cure says how long (HTTP `Retry-After`, ErrorInfo
//! `retryAfterSeconds`) on every binding.
#[path = "auth/client.rs"]
mod client;
mod common;

use std::time::Duration;

use a2a_server::core::CoreSettings;
use a2a_server::proto::{CancelTaskRequest, GetTaskRequest, SubscribeToTaskRequest, Task, TaskState};
use client::{BINDINGS, Binding, Caller, Fail, Op};
use common::*;
use serde_json::Value;

/// The status message of `task`, as text.
fn status_text(task: &Task) -> String {
    let message = task.status.as_ref().and_then(|s| s.message.as_ref());
    message.map(|m| texts(&m.parts).concat()).unwrap_or_default()
}

fn caller(server: &TestServer, binding: Binding, channel: &tonic::transport::Channel) -> Caller {
    Caller::new(server.url(), binding, channel.clone())
}

/// The refusal `result` must be: QUOTA_EXCEEDED of `limit`, saying a retry after some seconds
/// (on HTTP+JSON the `Retry-After` header too); those seconds.
fn refused_with_retry(result: Result<Value, Fail>, binding: Binding, limit: &str) -> u64 {
    let fail = result.err().unwrap_or_else(|| panic!("{binding:?}: expected {limit}"));
    assert_eq!(fail.reason, "QUOTA_EXCEEDED", "{binding:?}: {fail:?}");
    assert_eq!(fail.metadata.get("limit").map(String::as_str), Some(limit), "{binding:?}: {fail:?}");
    let secs = fail.metadata.get("retryAfterSeconds").unwrap_or_else(|| panic!("{binding:?}: {fail:?}"));
    let header = (binding == Binding::HttpJson).then_some(secs.as_str());
    assert_eq!(fail.retry_after.as_deref(), header, "{binding:?}: Retry-After");
    secs.parse().expect("whole seconds")
}

#[tokio::test]
async fn a_live_task_waiting_past_the_input_timeout_is_canceled_saying_why() {
    let settings = CoreSettings {
        idle_timeout: None,
        input_timeout: Some(Duration::from_millis(400)),
        ..CoreSettings::default()
    };
    let server = TestServer::builder().settings(settings).start().await;
    let mut client = server.client().await;
    let task = send_task(&mut client, send("input")).await;
    assert_eq!(state(&task), TaskState::InputRequired);
    assert_eq!(server.core.counted_live_tasks(None), 1);

    let request = SubscribeToTaskRequest { id: task.id.clone(), ..Default::default() };
    let stream = client.subscribe_to_task(request).await.expect("subscribe").into_inner();
    let items = collect(stream).await.expect("the stream ends with OK");
    let last = items.last().expect("a terminal update");
    assert_eq!(item_state(last), Some(TaskState::Canceled), "the subscriber sees the cancel");

    let stored = client.get_task(GetTaskRequest { id: task.id.clone(), ..Default::default() }).await;
    let stored = stored.expect("GetTask").into_inner();
    assert_eq!(state(&stored), TaskState::Canceled);
    assert_eq!(status_text(&stored), "canceled: no input arrived within 400ms (--input-timeout-secs)");
    assert_eq!(stored.generation, task.generation + 1, "one event: the cancel");
    server.wait_until("the slot is free", |core| core.counted_live_tasks(None) == 0).await;
}

#[tokio::test]
async fn a_hibernated_task_expires_too_and_leaves_the_parked_ledger() {
    let settings = CoreSettings {
        idle_timeout: Some(Duration::from_millis(100)),
        input_timeout: Some(Duration::from_millis(1200)),
        ..CoreSettings::default()
    };
    let server = TestServer::builder().settings(settings).start().await;
    let mut client = server.client().await;
    let task = send_task(&mut client, send("input")).await;
    server.wait_until("the task hibernates", |core| core.live_tasks() == 0).await;
    assert_eq!(server.core.counted_live_tasks(None), 0, "a parked task holds no live slot");
    assert_eq!(server.core.counted_parked_tasks("anonymous").await.unwrap().0, 1, "it is parked");

    let get = GetTaskRequest { id: task.id.clone(), ..Default::default() };
    let mut stored = task.clone();
    for _ in 0..200 {
        stored = client.get_task(get.clone()).await.expect("GetTask").into_inner();
        if state(&stored) != TaskState::InputRequired {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(state(&stored), TaskState::Canceled, "expired while hibernated");
    assert_eq!(status_text(&stored), "canceled: no input arrived within 1200ms (--input-timeout-secs)");
    assert_eq!(stored.generation, task.generation + 1);
    assert_eq!(server.core.counted_parked_tasks("anonymous").await.unwrap(), (0, 0));
    server
        .wait_until("no live task", |core| core.live_tasks() == 0 && core.counted_live_tasks(None) == 0)
        .await;
}

/// A task waiting for input hibernates within 100 ms, and a principal may have one parked.
fn one_parked_task_each() -> CoreSettings {
    CoreSettings {
        idle_timeout: Some(Duration::from_millis(100)),
        input_timeout: Some(Duration::from_secs(60)),
        max_parked_tasks_per_principal: 1,
        ..CoreSettings::default()
    }
}

#[tokio::test]
async fn the_parked_cap_refuses_new_tasks_with_a_retry_after_on_every_binding() {
    let server = TestServer::builder().settings(one_parked_task_each()).start().await;
    let channel = server.channel().await;
    for binding in BINDINGS {
        let caller = caller(&server, binding, &channel);
        let waiting = caller.call(&Op::Send(send("input"))).await.expect("a task");
        let waiting = waiting["task"]["id"].as_str().expect("a task id").to_owned();
        server.wait_until("the task hibernates", |core| core.live_tasks() == 0).await;

        let refused = caller.call(&Op::Send(send("hello"))).await;
        let secs = refused_with_retry(refused, binding, "max-parked-tasks-per-principal");
        // The first parked task expires within the minute; the sweep acts within 15 s of it.
        assert!((60..=75).contains(&secs), "{binding:?}: Retry-After {secs}");

        let cancel = Op::Cancel(CancelTaskRequest { id: waiting, ..Default::default() });
        caller.call(&cancel).await.expect("revived and canceled");
        caller.call(&Op::Send(send("hello"))).await.expect("room once the parked task is gone");
    }
}

/// At the parked cap, a retry of the call whose task fills it gets that task back, not a
/// refusal: a client whose answer was lost must learn which task to answer. A new message is
/// still refused.
#[tokio::test]
async fn at_the_parked_cap_a_retry_of_the_call_that_made_the_parked_task_gets_it_back() {
    let server = TestServer::builder().settings(one_parked_task_each()).start().await;
    let mut client = server.client().await;
    let request = send("input");
    let first = send_task(&mut client, request.clone()).await;
    server.wait_until("the task hibernates", |core| core.live_tasks() == 0).await;

    let again = send_task(&mut client, request).await;
    assert_eq!((again.id.as_str(), state(&again)), (first.id.as_str(), TaskState::InputRequired));
    // The retry revived it to answer; it hibernates once more.
    server.wait_until("the task hibernates again", |core| core.live_tasks() == 0).await;
    let refused = client.send_message(send("hello")).await.expect_err("the cap holds for a new message");
    assert_a2a_error(&refused, tonic::Code::ResourceExhausted, "QUOTA_EXCEEDED");
}

#[tokio::test]
async fn a_live_task_refusal_says_retry_after_a_second_on_every_binding() {
    let settings =
        CoreSettings { idle_timeout: None, max_live_tasks_per_principal: 1, ..CoreSettings::default() };
    let server = TestServer::builder().settings(settings).start().await;
    let channel = server.channel().await;
    let first = caller(&server, Binding::Grpc, &channel).call(&Op::Send(send("input"))).await;
    first.expect("a waiting task");
    for binding in BINDINGS {
        let refused = caller(&server, binding, &channel).call(&Op::Send(send("hello"))).await;
        assert_eq!(refused_with_retry(refused, binding, "max-live-tasks-per-principal"), 1);
    }
}
