//! Push notifications against a real webhook receiver on 127.0.0.1: CRUD on every binding,
//! delivery order and headers, retries, give-up, isolation from streams, and the SSRF guard.
mod common;

use std::time::Duration;

use a2a_server::proto::{
    AuthenticationInfo, DeleteTaskPushNotificationConfigRequest, GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest, SendMessageConfiguration, SendMessageRequest,
    SubscribeToTaskRequest, Task, TaskPushNotificationConfig, TaskState,
};
use a2a_server::push::ssrf::Policy;
use a2a_server::push::{PushEvents, PushStats};
use common::webhook::{Behaviour, Receiver, push_settings};
use common::*;
use serde_json::{Value, json};
use tonic::Code;

async fn push_server() -> TestServer {
    TestServer::builder().settings(push_settings(Policy::with_allowlist(true, &[]))).start().await
}

fn config(task: &Task, url: &str) -> TaskPushNotificationConfig {
    TaskPushNotificationConfig { task_id: task.id.clone(), url: url.to_owned(), ..Default::default() }
}

/// A compact form of a pushed StreamResponse: the state name, or `chunk text`.
fn summary(body: &Value) -> String {
    json_state(body).unwrap_or_else(|| json_chunks(body).join(","))
}

async fn wait_stat(server: &TestServer, what: &str, counter: fn(&PushStats) -> u64, at_least: u64) {
    server.wait_until(what, |core| counter(core.push_stats().unwrap()) >= at_least).await;
}

#[tokio::test]
async fn every_event_is_delivered_in_order_with_the_right_headers() {
    let server = push_server().await;
    let receiver = Receiver::start(Behaviour::Accept).await;
    let mut client = server.client().await;
    let task = send_task(&mut client, send("input")).await;
    let created = client
        .create_task_push_notification_config(TaskPushNotificationConfig {
            token: "tok-1".into(),
            authentication: Some(AuthenticationInfo {
                scheme: "Bearer".into(),
                credentials: "secret".into(),
            }),
            ..config(&task, &receiver.url)
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!created.id.is_empty(), "the server assigns an id");
    send_task(&mut client, follow_up(&task, "stream 5 0")).await;
    receiver.wait_for(7).await;
    let summaries: Vec<_> = receiver.bodies().iter().map(summary).collect();
    assert_eq!(
        summaries,
        ["TASK_STATE_WORKING", "chunk 0", "chunk 1", "chunk 2", "chunk 3", "chunk 4", "TASK_STATE_COMPLETED"]
    );
    let calls = receiver.calls.lock().unwrap();
    for call in calls.iter() {
        assert_eq!(call.headers["content-type"], "application/a2a+json");
        assert_eq!(call.headers["authorization"], "Bearer secret");
        assert_eq!(call.headers["x-a2a-notification-token"], "tok-1");
        assert_eq!(
            call.body["statusUpdate"]["taskId"].as_str().or(call.body["artifactUpdate"]["taskId"].as_str()),
            Some(task.id.as_str())
        );
    }
}

#[tokio::test]
async fn an_inline_config_sees_the_first_event() {
    let server = push_server().await;
    let receiver = Receiver::start(Behaviour::Accept).await;
    let mut client = server.client().await;
    let request = SendMessageRequest {
        message: Some(user_message("stream 2 0")),
        configuration: Some(SendMessageConfiguration {
            task_push_notification_config: Some(TaskPushNotificationConfig {
                url: receiver.url.clone(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let task = send_task(&mut client, request).await;
    receiver.wait_for(4).await;
    let summaries: Vec<_> = receiver.bodies().iter().map(summary).collect();
    assert_eq!(summaries, ["TASK_STATE_WORKING", "chunk 0", "chunk 1", "TASK_STATE_COMPLETED"]);
    let listed = client
        .list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest {
            task_id: task.id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.configs.len(), 1);
    assert_eq!(listed.configs[0].task_id, task.id);
}

#[tokio::test]
async fn state_only_mode_pushes_status_updates_only() {
    let mut settings = push_settings(Policy::with_allowlist(true, &[]));
    settings.push.events = PushEvents::State;
    let server = TestServer::builder().settings(settings).start().await;
    let receiver = Receiver::start(Behaviour::Accept).await;
    let mut client = server.client().await;
    let task = send_task(&mut client, send("input")).await;
    client.create_task_push_notification_config(config(&task, &receiver.url)).await.unwrap();
    send_task(&mut client, follow_up(&task, "stream 3 0")).await;
    receiver.wait_for(2).await;
    wait_stat(&server, "2 deliveries", |s| PushStats::get(&s.delivered), 2).await;
    let summaries: Vec<_> = receiver.bodies().iter().map(summary).collect();
    assert_eq!(summaries, ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]);
}

#[tokio::test]
async fn retries_after_500_and_after_429_with_retry_after() {
    let server = push_server().await;
    let mut client = server.client().await;

    let flaky = Receiver::start(Behaviour::FailFirst(2, 500, None)).await;
    let task = send_task(&mut client, send("input")).await;
    client.create_task_push_notification_config(config(&task, &flaky.url)).await.unwrap();
    send_task(&mut client, follow_up(&task, "done")).await;
    flaky.wait_for(4).await;
    let summaries: Vec<_> = flaky.bodies().iter().map(summary).collect();
    assert_eq!(summaries, ["done", "done", "done", "TASK_STATE_COMPLETED"], "two failures, then in order");

    let throttled = Receiver::start(Behaviour::FailFirst(1, 429, Some("1"))).await;
    let task = send_task(&mut client, send("input")).await;
    client.create_task_push_notification_config(config(&task, &throttled.url)).await.unwrap();
    send_task(&mut client, follow_up(&task, "done")).await;
    throttled.wait_for(2).await;
    let calls = throttled.calls.lock().unwrap();
    let gap = calls[1].at - calls[0].at;
    assert!(gap >= Duration::from_millis(900), "Retry-After: 1 was honoured (waited {gap:?})");
    assert!(PushStats::get(&server.core.push_stats().unwrap().retries) >= 3);
}

#[tokio::test]
async fn a_dead_webhook_is_given_up_after_the_attempt_limit() {
    let server = push_server().await;
    let dead = Receiver::start(Behaviour::Always(503)).await;
    let mut client = server.client().await;
    let task = send_task(&mut client, send("input")).await;
    client.create_task_push_notification_config(config(&task, &dead.url)).await.unwrap();
    send_task(&mut client, follow_up(&task, "done")).await;
    wait_stat(&server, "two events given up", |s| PushStats::get(&s.failed), 2).await;
    assert_eq!(dead.count(), 6, "3 attempts for each of the 2 events, then nothing more");

    let rejecting = Receiver::start(Behaviour::Always(404)).await;
    let task = send_task(&mut client, send("input")).await;
    client.create_task_push_notification_config(config(&task, &rejecting.url)).await.unwrap();
    send_task(&mut client, follow_up(&task, "done")).await;
    wait_stat(&server, "4 events given up", |s| PushStats::get(&s.failed), 4).await;
    assert_eq!(rejecting.count(), 2, "no retry on other 4xx");
}

#[tokio::test]
async fn a_hanging_webhook_does_not_delay_subscribers() {
    let server = push_server().await;
    let hanging = Receiver::start(Behaviour::Hang).await;
    let mut client = server.client().await;
    let task = send_task(&mut client, send("input")).await;
    client.create_task_push_notification_config(config(&task, &hanging.url)).await.unwrap();
    let mut sub_client = server.client().await;
    let stream = sub_client
        .subscribe_to_task(SubscribeToTaskRequest { id: task.id.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    send_task(&mut client, follow_up(&task, "stream 20 0")).await;
    let items = collect(stream).await.expect("the subscriber's stream completes");
    assert_eq!(item_state(items.last().unwrap()), Some(TaskState::Completed));
    assert_eq!(items.iter().flat_map(chunk_texts).count(), 20);
    // Everything reached the subscriber while the webhook still holds its first event.
    assert!(hanging.count() <= 1, "the webhook got {} calls", hanging.count());
}

#[tokio::test]
async fn crud_over_grpc_with_errors() {
    let server = push_server().await;
    let mut client = server.client().await;
    let task = send_task(&mut client, send("input")).await;
    let hook = "https://hooks.example.com/a2a";
    let first = client
        .create_task_push_notification_config(TaskPushNotificationConfig {
            id: "one".into(),
            ..config(&task, hook)
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.id, "one");
    client.create_task_push_notification_config(config(&task, hook)).await.unwrap();
    let get = |id: &str| GetTaskPushNotificationConfigRequest {
        task_id: task.id.clone(),
        id: id.into(),
        ..Default::default()
    };
    assert_eq!(client.get_task_push_notification_config(get("one")).await.unwrap().into_inner(), first);

    let page = |token: &str| ListTaskPushNotificationConfigsRequest {
        task_id: task.id.clone(),
        page_size: 1,
        page_token: token.into(),
        ..Default::default()
    };
    let p1 = client.list_task_push_notification_configs(page("")).await.unwrap().into_inner();
    assert_eq!(p1.configs, std::slice::from_ref(&first));
    let p2 =
        client.list_task_push_notification_configs(page(&p1.next_page_token)).await.unwrap().into_inner();
    assert_eq!(p2.configs.len(), 1);
    assert!(p2.next_page_token.is_empty());

    let delete = DeleteTaskPushNotificationConfigRequest {
        task_id: task.id.clone(),
        id: "one".into(),
        ..Default::default()
    };
    client.delete_task_push_notification_config(delete.clone()).await.unwrap();
    client.delete_task_push_notification_config(delete).await.expect("delete is idempotent");
    let gone = client.get_task_push_notification_config(get("one")).await.unwrap_err();
    assert_a2a_error(&gone, Code::NotFound, "TASK_NOT_FOUND");

    let unknown = Task { id: "no-such-task".into(), ..Default::default() };
    let error = client.create_task_push_notification_config(config(&unknown, hook)).await.unwrap_err();
    assert_a2a_error(&error, Code::NotFound, "TASK_NOT_FOUND");
    for bad in ["", "not a url", "ftp://example.com/x"] {
        let error = client.create_task_push_notification_config(config(&task, bad)).await.unwrap_err();
        assert_a2a_error(&error, Code::InvalidArgument, "INVALID_PARAMS");
    }
    let no_scheme = TaskPushNotificationConfig {
        authentication: Some(AuthenticationInfo { scheme: String::new(), credentials: "x".into() }),
        ..config(&task, hook)
    };
    let error = client.create_task_push_notification_config(no_scheme).await.unwrap_err();
    assert_a2a_error(&error, Code::InvalidArgument, "INVALID_PARAMS");
    for _ in 0..9 {
        client.create_task_push_notification_config(config(&task, hook)).await.unwrap();
    }
    let error = client.create_task_push_notification_config(config(&task, hook)).await.unwrap_err();
    assert_a2a_error(&error, Code::ResourceExhausted, "QUOTA_EXCEEDED");
    assert!(error.message().contains("limit"), "{}", error.message());
    // Another tenant does not see the task, so it cannot attach webhooks to it.
    let foreign = TaskPushNotificationConfig { tenant: "other".into(), ..config(&task, hook) };
    let error = client.create_task_push_notification_config(foreign).await.unwrap_err();
    assert_a2a_error(&error, Code::NotFound, "TASK_NOT_FOUND");
}

#[tokio::test]
async fn crud_over_json_rpc_and_rest() {
    let server = push_server().await;
    let http = reqwest::Client::new();
    let base = server.url();
    let rpc_call = |method: &'static str, params: Value| {
        let http = http.clone();
        let url = format!("{base}/");
        async move {
            http.post(url).json(&rpc(1, method, params)).send().await.unwrap().json::<Value>().await.unwrap()
        }
    };
    let sent = rpc_call("SendMessage", json!({"message": json_message("input")})).await;
    let task_id = sent["result"]["task"]["id"].as_str().unwrap().to_owned();
    let hook = "https://hooks.example.com/x";

    let created =
        rpc_call("CreateTaskPushNotificationConfig", json!({"taskId": task_id, "url": hook, "token": "t"}))
            .await;
    let id = created["result"]["id"].as_str().unwrap().to_owned();
    assert_eq!(created["result"]["url"], hook);
    let got = rpc_call("GetTaskPushNotificationConfig", json!({"taskId": task_id, "id": id})).await;
    assert_eq!(got["result"]["token"], "t");
    let listed = rpc_call("ListTaskPushNotificationConfigs", json!({"taskId": task_id})).await;
    assert_eq!(listed["result"]["configs"].as_array().unwrap().len(), 1);
    let deleted = rpc_call("DeleteTaskPushNotificationConfig", json!({"taskId": task_id, "id": id})).await;
    assert_eq!(deleted["result"], json!({}));
    let missing = rpc_call("GetTaskPushNotificationConfig", json!({"taskId": task_id, "id": id})).await;
    assert_rpc_error(&missing, -32001, "TASK_NOT_FOUND");

    let configs = format!("{base}/tasks/{task_id}/pushNotificationConfigs");
    let created: Value =
        http.post(&configs).json(&json!({"url": hook})).send().await.unwrap().json().await.unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(created["taskId"], task_id.as_str(), "the path fills taskId");
    let got = http.get(format!("{configs}/{id}")).send().await.unwrap();
    assert_eq!(got.status(), 200);
    let listed: Value =
        http.get(format!("{configs}?pageSize=10")).send().await.unwrap().json().await.unwrap();
    assert_eq!(listed["configs"].as_array().unwrap().len(), 1);
    let deleted = http.delete(format!("{configs}/{id}")).send().await.unwrap();
    assert_eq!(deleted.status(), 200);
    assert_eq!(deleted.json::<Value>().await.unwrap(), json!({}));
    assert_http_error(http.get(format!("{configs}/{id}")).send().await.unwrap(), 404, "TASK_NOT_FOUND").await;
    let bad = http.post(&configs).json(&json!({"url": "nope"})).send().await.unwrap();
    assert_http_error(bad, 400, "INVALID_PARAMS").await;

    let card: Value =
        http.get(format!("{base}/.well-known/agent-card.json")).send().await.unwrap().json().await.unwrap();
    assert_eq!(card["capabilities"]["pushNotifications"], true);
}

#[tokio::test]
async fn the_ssrf_guard_refuses_private_addresses_by_default() {
    let server = TestServer::builder().settings(push_settings(Policy::default())).start().await;
    let receiver = Receiver::start(Behaviour::Accept).await;
    let mut client = server.client().await;
    let port = receiver.url.split(':').nth(2).unwrap().split('/').next().unwrap().to_owned();
    for url in [
        receiver.url.clone(),
        format!("http://localhost:{port}/hook"),
        format!("http://[::ffff:127.0.0.1]:{port}/hook"),
    ] {
        let task = send_task(&mut client, send("input")).await;
        // Creating the config does no DNS or reachability check; delivering does.
        client.create_task_push_notification_config(config(&task, &url)).await.expect("accepted at creation");
        send_task(&mut client, follow_up(&task, "done")).await;
    }
    wait_stat(&server, "6 refusals", |s| PushStats::get(&s.refused), 6).await;
    assert_eq!(receiver.count(), 0, "nothing reached the private address");
    assert_eq!(PushStats::get(&server.core.push_stats().unwrap().delivered), 0);
}

#[tokio::test]
async fn redirects_are_not_followed() {
    // 127.0.0.1 is allowed by the allowlist; the redirect target 127.0.0.2 is not.
    let server = TestServer::builder()
        .settings(push_settings(Policy::with_allowlist(false, &["127.0.0.1".into()])))
        .start()
        .await;
    let target = Receiver::start_on("127.0.0.2:0", Behaviour::Accept).await;
    let redirecting = Receiver::start(Behaviour::Redirect(target.url.clone())).await;
    let mut client = server.client().await;
    let task = send_task(&mut client, send("input")).await;
    client.create_task_push_notification_config(config(&task, &redirecting.url)).await.unwrap();
    send_task(&mut client, follow_up(&task, "done")).await;
    wait_stat(&server, "both events failed", |s| PushStats::get(&s.failed), 2).await;
    assert_eq!(redirecting.count(), 2, "the allowed first hop was called, once per event");
    assert_eq!(target.count(), 0, "the redirect was not followed");
}
