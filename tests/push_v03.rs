//! Webhooks in the protocol version they were registered in: a config set through A2A v0.3
//! (JSON-RPC `tasks/pushNotificationConfig/set`, the `/v1/` REST route, the `a2a.v1` gRPC
//! service, or inline in `message/send` / `message/stream`) gets what a2a-sdk 0.3's server
//! POSTs, the whole v0.3 `Task` as `application/json`; one set through v1.0 keeps the v1.0
//! `StreamResponse`. In the memory store, and on Redis across two replicas (the replica that
//! delivers is not the one that recorded the version). A v0.3 body shows the task as it is when
//! it is delivered, once per state: a fast task's webhook may see only its last state.
//!
//! Without `redis-server` the fleet test skips loudly, except under `CI=true`, where it fails.
mod common;

use a2a_server::proto::{Task, TaskPushNotificationConfig};
use a2a_server::proto_v03 as v03;
use a2a_server::proto_v03::a2a_service_client::A2aServiceClient as V03Client;
use a2a_server::push::ssrf::Policy;
use common::fleet::{Fleet, eventually, within};
use common::redis::RedisServer;
use common::webhook::{Behaviour, Receiver, push_settings};
use common::*;
use serde_json::{Value, json};

const V03_STATES: [&str; 9] = [
    "submitted",
    "working",
    "input-required",
    "completed",
    "canceled",
    "failed",
    "rejected",
    "auth-required",
    "unknown",
];

async fn push_server() -> TestServer {
    TestServer::builder().settings(push_settings(Policy::with_allowlist(true, &[]))).start().await
}

fn v03_message(text: &str) -> Value {
    json!({"kind": "message", "messageId": uuid::Uuid::new_v4().to_string(), "role": "user",
           "parts": [{"kind": "text", "text": text}]})
}

/// A v0.3 JSON-RPC call to `base`; its `result`.
async fn v03_rpc(base: &str, method: &str, params: Value) -> Value {
    let response = reqwest::Client::new().post(format!("{base}/")).json(&rpc(1, method, params)).send().await;
    let body: Value = response.unwrap().json().await.unwrap();
    body.get("result").cloned().unwrap_or_else(|| panic!("{method} failed: {body}"))
}

/// Waits until `receiver` got a body whose state (v0.3 or v1.0 spelling) is terminal.
async fn until_finished(receiver: &Receiver) {
    let done = |body: &Value| {
        let state = body.pointer("/status/state").or_else(|| body.pointer("/statusUpdate/status/state"));
        matches!(state.and_then(Value::as_str), Some("completed" | "TASK_STATE_COMPLETED"))
    };
    eventually("the completed task pushed", PATIENCE, || async { receiver.bodies().iter().any(done) }).await;
}

/// Checks every call `receiver` got is a v0.3 Task of `task_id` as a2a-sdk 0.3 sends it, each
/// a newer state than the last, and returns their states.
fn v03_bodies(receiver: &Receiver, task_id: &str, token: Option<&str>) -> Vec<String> {
    let calls = receiver.calls.lock().unwrap();
    let mut states = Vec::new();
    let mut last: Option<&Value> = None;
    for call in calls.iter() {
        let body = &call.body;
        assert_eq!(call.headers["content-type"], "application/json", "{body}");
        assert_eq!(
            call.headers.get("x-a2a-notification-token").map(|v| v.to_str().unwrap()),
            token,
            "the token travels as v0.3 receivers expect"
        );
        assert_eq!(body["kind"], "task", "a whole v0.3 Task: {body}");
        assert_eq!(body["id"], task_id);
        assert!(body["contextId"].as_str().is_some_and(|c| !c.is_empty()), "{body}");
        let state = body["status"]["state"].as_str().unwrap_or_default();
        assert!(V03_STATES.contains(&state), "a v0.3 state: {body}");
        assert!(body.get("generation").is_none(), "no v1.1 fields: {body}");
        for message in body["history"].as_array().into_iter().flatten() {
            assert_eq!(message["kind"], "message", "{body}");
            assert!(matches!(message["role"].as_str(), Some("user" | "agent")), "{body}");
            assert!(message["parts"].as_array().unwrap().iter().all(|p| p["kind"] == "text"), "{body}");
        }
        for artifact in body["artifacts"].as_array().into_iter().flatten() {
            assert!(artifact["parts"].as_array().unwrap().iter().all(|p| p["kind"] == "text"), "{body}");
        }
        assert_ne!(Some(body), last, "each body shows a new state of the task");
        last = Some(body);
        states.push(state.to_owned());
    }
    states
}

/// The summaries of the v1.0 bodies `receiver` got, checking they are v1.0 ones.
fn v1_bodies(receiver: &Receiver) -> Vec<String> {
    let calls = receiver.calls.lock().unwrap();
    calls
        .iter()
        .map(|call| {
            assert_eq!(call.headers["content-type"], "application/a2a+json");
            assert!(call.body.get("kind").is_none(), "{}", call.body);
            json_state(&call.body).unwrap_or_else(|| json_chunks(&call.body).join(","))
        })
        .collect()
}

fn v1_config(task: &Task, url: &str) -> TaskPushNotificationConfig {
    TaskPushNotificationConfig {
        id: "v1".into(),
        task_id: task.id.clone(),
        url: url.to_owned(),
        ..Default::default()
    }
}

const V1_EVENTS: [&str; 4] = ["TASK_STATE_WORKING", "chunk 0", "chunk 1", "TASK_STATE_COMPLETED"];

#[tokio::test]
async fn every_v03_registration_gets_v03_bodies_and_v1_keeps_its_own() {
    let server = push_server().await;
    let (jsonrpc, rest, grpc, v1) = (
        Receiver::start(Behaviour::Accept).await,
        Receiver::start(Behaviour::Accept).await,
        Receiver::start(Behaviour::Accept).await,
        Receiver::start(Behaviour::Accept).await,
    );
    let mut client = server.client().await;
    let task = send_task(&mut client, send("input")).await;

    let set = json!({"taskId": task.id, "pushNotificationConfig": {"id": "rpc", "url": jsonrpc.url, "token": "t03"}});
    v03_rpc(&server.url(), "tasks/pushNotificationConfig/set", set).await;
    let route = format!("{}/v1/tasks/{}/pushNotificationConfigs", server.url(), task.id);
    let body = json!({"pushNotificationConfig": {"id": "rest", "url": rest.url}});
    let created = reqwest::Client::new().post(route).json(&body).send().await.unwrap();
    assert_eq!(created.status(), 200);
    let mut v03_grpc = V03Client::new(server.channel().await);
    let config = v03::TaskPushNotificationConfig {
        name: String::new(),
        push_notification_config: Some(v03::PushNotificationConfig {
            url: grpc.url.clone(),
            ..Default::default()
        }),
    };
    let create = v03::CreateTaskPushNotificationConfigRequest {
        parent: format!("tasks/{}", task.id),
        config_id: "grpc".into(),
        config: Some(config),
    };
    v03_grpc.create_task_push_notification_config(create).await.unwrap();
    client.create_task_push_notification_config(v1_config(&task, &v1.url)).await.unwrap();

    send_task(&mut client, follow_up(&task, "stream 2 0")).await;
    for receiver in [&jsonrpc, &rest, &grpc, &v1] {
        until_finished(receiver).await;
    }
    assert_eq!(v1_bodies(&v1), V1_EVENTS, "v1.0 receivers are unchanged");
    for (receiver, token) in [(&jsonrpc, Some("t03")), (&rest, None), (&grpc, None)] {
        let states = v03_bodies(receiver, &task.id, token);
        assert_eq!(states.last().map(String::as_str), Some("completed"), "{states:?}");
        let last = receiver.bodies().pop().unwrap();
        let chunks: Vec<_> =
            last["artifacts"][0]["parts"].as_array().unwrap().iter().map(|p| &p["text"]).collect();
        assert_eq!(chunks, ["chunk 0", "chunk 1"], "the whole task: {last}");
        assert_eq!(last["history"].as_array().map(Vec::len), Some(3), "question and answers: {last}");
    }
}

#[tokio::test]
async fn an_inline_v03_config_gets_v03_bodies_from_the_first_event() {
    let server = push_server().await;
    let (sent, streamed) =
        (Receiver::start(Behaviour::Accept).await, Receiver::start(Behaviour::Accept).await);
    let params = |url: &str| {
        // Slow enough that the webhook is delivered the working task before it completes.
        json!({"message": v03_message("stream 2 200 200"),
               "configuration": {"pushNotificationConfig": {"url": url, "token": "inline"}}})
    };
    let task = v03_rpc(&server.url(), "message/send", params(&sent.url)).await;
    assert_eq!(task["kind"], "task");
    let response = reqwest::Client::new()
        .post(format!("{}/", server.url()))
        .json(&rpc(2, "message/stream", params(&streamed.url)))
        .send()
        .await
        .unwrap();
    let events = SseReader::new(response).collect().await;
    let streamed_id = events[0].json()["result"]["id"].as_str().unwrap().to_owned();

    for (receiver, id) in [(&sent, task["id"].as_str().unwrap()), (&streamed, streamed_id.as_str())] {
        until_finished(receiver).await;
        let states = v03_bodies(receiver, id, Some("inline"));
        assert_eq!(states.first().map(String::as_str), Some("working"), "from the first event: {states:?}");
        assert_eq!(states.last().map(String::as_str), Some("completed"), "{states:?}");
    }
}

#[tokio::test]
async fn on_redis_a_replica_delivers_in_the_version_another_replica_recorded() {
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(2, &redis.url(), &["--push", "--push-allow-private"]);
    let (v03_hook, v1_hook) =
        (Receiver::start(Behaviour::Accept).await, Receiver::start(Behaviour::Accept).await);
    let mut owner = fleet[0].client().await;
    let task = within("send on the owner", send_task(&mut owner, send("input"))).await;

    // Both registered on the other replica: the owner, which delivers, reads them from Redis.
    let set = json!({"taskId": task.id, "pushNotificationConfig": {"id": "old", "url": v03_hook.url, "token": "t"}});
    within("v0.3 set", v03_rpc(&fleet[1].url(), "tasks/pushNotificationConfig/set", set)).await;
    let mut other = fleet[1].client().await;
    within("v1.0 create", other.create_task_push_notification_config(v1_config(&task, &v1_hook.url)))
        .await
        .unwrap();

    within("follow-up on the owner", send_task(&mut owner, follow_up(&task, "stream 2 0"))).await;
    until_finished(&v03_hook).await;
    until_finished(&v1_hook).await;
    assert_eq!(v1_bodies(&v1_hook), V1_EVENTS);
    let states = v03_bodies(&v03_hook, &task.id, Some("t"));
    assert_eq!(states.last().map(String::as_str), Some("completed"), "{states:?}");
}
