//! Push is bounded in total: webhooks that never answer hold at most `--push-max-concurrency`
//! sockets whatever the number of tasks, the server keeps answering, and push configs beyond
//! the per-principal cap are refused with QUOTA_EXCEEDED on every binding.
mod common;

use std::time::Duration;

use a2a_server::proto::{
    GetTaskRequest, SendMessageConfiguration, SendMessageRequest, Task, TaskPushNotificationConfig,
};
use a2a_server::push::PushStats;
use a2a_server::push::ssrf::Policy;
use common::webhook::{Silent, push_settings};
use common::*;
use serde_json::{Value, json};
use tonic::Code;

/// SendMessage whose task pushes to `url` from its first event on.
fn send_with_webhook(text: &str, url: &str) -> SendMessageRequest {
    SendMessageRequest {
        configuration: Some(SendMessageConfiguration {
            task_push_notification_config: Some(TaskPushNotificationConfig {
                url: url.to_owned(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..send(text)
    }
}

/// POSTs `body` as JSON and reads the JSON answer, whatever its status.
async fn post_json(url: String, body: Value) -> Value {
    let response = reqwest::Client::new().post(url).json(&body).send().await.expect("POST");
    response.json().await.expect("a JSON answer")
}

#[tokio::test]
async fn webhooks_that_never_answer_hold_at_most_the_cap_of_sockets() {
    const CAP: usize = 8;
    const TASKS: usize = 300;
    let mut settings = push_settings(Policy::with_allowlist(true, &[]));
    settings.push.max_concurrency = CAP;
    // Nothing times out while the test runs, so every socket it sees is held.
    settings.push.attempt_timeout = Duration::from_secs(300);
    let server = TestServer::builder().settings(settings).start().await;
    let silent = Silent::start().await;
    let mut client = server.client().await;
    for _ in 0..TASKS {
        send_task(&mut client, send_with_webhook("input", &silent.url)).await;
    }
    server
        .wait_until("the cap of requests in flight", |core| {
            PushStats::get(&core.push_stats().unwrap().in_flight) == CAP as u64
        })
        .await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while silent.open() < CAP {
        assert!(tokio::time::Instant::now() < deadline, "only {} sockets reached the webhook", silent.open());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // The server goes on answering on every binding meanwhile.
    let task = send_task(&mut client, send("hello")).await;
    let got = client.get_task(GetTaskRequest { id: task.id.clone(), ..Default::default() }).await.unwrap();
    assert_eq!(artifact_texts(&got.into_inner()), ["hello"]);
    let sent = rpc(1, "SendMessage", json!({"message": json_message("over json-rpc")}));
    let rpc_answer = post_json(format!("{}/", server.url()), sent).await;
    assert!(rpc_answer["result"]["task"]["id"].is_string(), "{rpc_answer}");
    let rest = reqwest::get(format!("{}/tasks/{}", server.url(), task.id)).await.unwrap();
    assert_eq!(rest.status(), 200);
    // More webhooks queue behind the same permits; the sockets stay at the cap.
    for _ in 0..20 {
        send_task(&mut client, send_with_webhook("input", &silent.url)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(silent.peak(), CAP, "never more sockets than the cap, over {TASKS} tasks");
    let stats = server.core.push_stats().unwrap();
    assert_eq!(PushStats::get(&stats.in_flight), CAP as u64);
    assert!(PushStats::get(&stats.queued_bytes) > 0, "the others wait, counted in the byte budget");
}

#[tokio::test]
async fn the_queue_byte_budget_drops_what_does_not_fit_and_counts_it() {
    let mut settings = push_settings(Policy::with_allowlist(true, &[]));
    settings.push.max_concurrency = 1;
    settings.push.max_queued_bytes = 2_000;
    settings.push.attempt_timeout = Duration::from_secs(300);
    let server = TestServer::builder().settings(settings).start().await;
    let silent = Silent::start().await;
    let mut client = server.client().await;
    let task = send_task(&mut client, send_with_webhook("input", &silent.url)).await;
    // 200 chunks of about 100 bytes each cannot all wait behind one hung request.
    send_task(&mut client, follow_up(&task, "stream 200 0")).await;
    server.wait_until("events dropped", |core| PushStats::get(&core.push_stats().unwrap().dropped) > 0).await;
    let stats = server.core.push_stats().unwrap();
    assert!(PushStats::get(&stats.queued_bytes) <= 2_000, "{}", PushStats::get(&stats.queued_bytes));
}

fn push_config(task: &Task) -> TaskPushNotificationConfig {
    TaskPushNotificationConfig {
        task_id: task.id.clone(),
        url: "https://hooks.example.com/a2a".into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn configs_beyond_the_principal_cap_are_refused_on_every_binding() {
    let mut settings = push_settings(Policy::default());
    settings.push.max_configs_per_principal = 3;
    let server = TestServer::builder().settings(settings).start().await;
    let mut client = server.client().await;
    let first = send_task(&mut client, send("input")).await;
    let second = send_task(&mut client, send("input")).await;
    for task in [&first, &first, &second] {
        client.create_task_push_notification_config(push_config(task)).await.expect("within the cap");
    }
    const LIMIT: &str = "max-push-configs-per-principal";

    let refused = client.create_task_push_notification_config(push_config(&second)).await.unwrap_err();
    assert_a2a_error(&refused, Code::ResourceExhausted, "QUOTA_EXCEEDED");
    let refused = client.send_message(send_with_webhook("input", "https://hooks.example.com/a2a")).await;
    assert_a2a_error(&refused.unwrap_err(), Code::ResourceExhausted, "QUOTA_EXCEEDED");

    let http = reqwest::Client::new();
    let base = server.url();
    let create = json!({"taskId": second.id, "url": "https://h.example/"});
    let body = post_json(format!("{base}/"), rpc(1, "CreateTaskPushNotificationConfig", create)).await;
    assert_rpc_error(&body, -31429, "QUOTA_EXCEEDED");
    assert_eq!(body["error"]["data"][0]["metadata"]["limit"], LIMIT, "{body}");

    let rest = http
        .post(format!("{base}/tasks/{}/pushNotificationConfigs", second.id))
        .json(&json!({"url": "https://h.example/"}))
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 429);
    let body: Value = rest.json().await.unwrap();
    assert_eq!(body["error"]["status"], "RESOURCE_EXHAUSTED", "{body}");
    assert_eq!(body["error"]["details"][0]["reason"], "QUOTA_EXCEEDED", "{body}");
    assert_eq!(body["error"]["details"][0]["metadata"]["limit"], LIMIT, "{body}");

    let frame = {
        let message = prost::Message::encode_to_vec(&push_config(&second));
        let mut frame = vec![0];
        frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
        frame.extend_from_slice(&message);
        frame
    };
    let web = http
        .post(format!("{base}/lf.a2a.v1.A2AService/CreateTaskPushNotificationConfig"))
        .header("content-type", "application/grpc-web+proto")
        .header("x-grpc-web", "1")
        .body(frame)
        .send()
        .await
        .unwrap();
    let in_headers = web.headers().get("grpc-status").map(|v| v.to_str().unwrap().to_owned());
    let body = web.bytes().await.unwrap();
    let status = in_headers.unwrap_or_else(|| {
        let text = String::from_utf8_lossy(&body);
        let at = text.find("grpc-status:").expect("a grpc-status trailer");
        text[at + 12..].split("\r\n").next().unwrap().trim().to_owned()
    });
    assert_eq!(status, "8", "grpc-web: RESOURCE_EXHAUSTED");

    let set = json!({"taskId": second.id, "pushNotificationConfig": {"url": "https://h.example/"}});
    let v03 = post_json(format!("{base}/"), rpc(2, "tasks/pushNotificationConfig/set", set)).await;
    assert_eq!(v03["error"]["code"], -31429, "{v03}");
    assert_eq!(v03["error"]["data"]["reason"], "QUOTA_EXCEEDED", "{v03}");

    // Deleting one frees its place.
    let listed = client
        .list_task_push_notification_configs(a2a_server::proto::ListTaskPushNotificationConfigsRequest {
            task_id: first.id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    client
        .delete_task_push_notification_config(a2a_server::proto::DeleteTaskPushNotificationConfigRequest {
            task_id: first.id.clone(),
            id: listed.configs[0].id.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    client.create_task_push_notification_config(push_config(&second)).await.expect("a place was freed");
}
