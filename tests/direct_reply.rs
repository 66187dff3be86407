//! A direct `Message` reply (the agent answers without a task: the demo agent's
//! `message TEXT`, or a `tck-message-response` messageId) leaves nothing behind, on every
//! binding: no task to list or get, no webhook call even when the request carried an inline
//! push config, no task failure logged or counted, and no task gauge moved.
//!
//! Only direct replies run in this file: the task metrics are process-wide, so a test that
//! made real tasks here could hide a gauge that a direct reply moved.
mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a_server::proto::send_message_response::Payload as Reply;
use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{
    GetTaskRequest, ListTasksRequest, Message, Role, SendMessageConfiguration, SendMessageRequest,
    StreamResponse, TaskPushNotificationConfig,
};
use a2a_server::push::ssrf::Policy;
use common::bindings::{Binding, Client};
use common::webhook::{Behaviour, Receiver, push_settings};
use common::*;
use serde_json::Value;

/// What the server logs while a test runs: the tests run on tokio's current-thread runtime, so
/// a thread-local subscriber sees the actors and the push workers too.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Log {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Log {
    /// Captures WARN and worse on this thread until the guard is dropped.
    fn capture(&self) -> tracing::subscriber::DefaultGuard {
        let subscriber = tracing_subscriber::fmt()
            .with_writer({
                let log = self.clone();
                move || log.clone()
            })
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    fn lines(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().unwrap()).lines().map(str::to_owned).collect()
    }
}

/// How long a webhook call is still waited for once no task is live.
const GRACE: Duration = Duration::from_millis(500);

/// `message` sent with an inline push config to `url`.
fn with_webhook(message: Message, url: &str) -> SendMessageRequest {
    SendMessageRequest {
        message: Some(message),
        configuration: Some(SendMessageConfiguration {
            task_push_notification_config: Some(TaskPushNotificationConfig {
                url: url.to_owned(),
                token: "direct-reply".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The demo agent's two ways to answer directly, with the text each answers.
fn direct_messages() -> [(Message, &'static str); 2] {
    let command = user_message("message hi there");
    let mut tck = user_message("anything");
    tck.message_id = format!("tck-message-response-{}", uuid::Uuid::new_v4());
    [(command, "hi there"), (tck, "Direct message response")]
}

/// The task ids a pushed StreamResponse names.
fn pushed_task_ids(body: &Value) -> Vec<String> {
    ["/task/id", "/statusUpdate/taskId", "/artifactUpdate/taskId"]
        .iter()
        .filter_map(|pointer| body.pointer(pointer).and_then(Value::as_str).map(str::to_owned))
        .collect()
}

/// Sends direct-reply messages with an inline webhook over `binding`, then checks that nothing
/// is left behind once the agent is done.
async fn a_direct_reply_leaves_nothing_behind(binding: Binding) {
    let log = Log::default();
    let _capture = log.capture();
    let server =
        TestServer::builder().settings(push_settings(Policy::with_allowlist(true, &[]))).start().await;
    let receiver = Receiver::start(Behaviour::Accept).await;
    let client = Client::connect(&server, binding, "1.0").await;

    for (message, text) in direct_messages() {
        let sent = client.send(with_webhook(message, &receiver.url)).await.expect("SendMessage");
        let Some(Reply::Message(reply)) = sent.payload else {
            panic!("{binding:?}: a direct Message reply, got {sent:?}")
        };
        assert_eq!(texts(&reply.parts), [text]);
        assert_eq!(reply.role, Role::Agent as i32);
        assert_eq!(reply.task_id, "", "a server message names a task only if one exists");
        assert!(!reply.context_id.is_empty(), "a server message carries its context");
    }
    let streamed = client
        .send_streaming(with_webhook(user_message("message hello"), &receiver.url))
        .await
        .expect("SendStreamingMessage");
    let (items, error) = streamed.finish().await;
    assert_eq!(error, None);
    assert!(
        matches!(items.as_slice(), [StreamResponse { payload: Some(Payload::Message(m)) }] if texts(&m.parts) == ["hello"]),
        "{binding:?}: exactly one Message: {items:?}"
    );

    // The agents are done once no task is live; a webhook call would be on its way by then.
    server.wait_until("no live task", |core| core.live_tasks() == 0).await;
    let _ = tokio::time::timeout(GRACE, receiver.wait_for(1)).await;

    // Every trace a phantom task would leave, reported together.
    let mut problems = Vec::new();
    let listed = client.list(ListTasksRequest::default()).await.expect("ListTasks");
    if listed.total_size != 0 || !listed.tasks.is_empty() {
        problems.push(format!("ListTasks shows tasks: {listed:#?}"));
    }
    let pushed = receiver.bodies();
    if !pushed.is_empty() {
        problems.push(format!("the webhook was called {} time(s): {pushed:#?}", pushed.len()));
    }
    for id in pushed.iter().flat_map(pushed_task_ids) {
        match client.get(GetTaskRequest { id: id.clone(), ..Default::default() }).await {
            Err(failure) if failure.reason == "TASK_NOT_FOUND" => {}
            other => problems.push(format!("GetTask {id:?} finds a task: {other:?}")),
        }
    }
    let metrics = reqwest::get(format!("{}/metrics", server.url())).await.unwrap().text().await.unwrap();
    for line in metrics.lines().filter(|line| line.starts_with("a2a_tasks{")) {
        let value: f64 = line.rsplit(' ').next().and_then(|v| v.parse().ok()).expect("a sample value");
        if value < 0.0 {
            problems.push(format!("a task gauge below 0: {line}"));
        }
    }
    for line in log.lines().iter().filter(|line| line.contains("task failed")) {
        problems.push(format!("a task failure was logged: {line}"));
    }
    let failed = r#"a2a_tasks_finished_total{state="TASK_STATE_FAILED"}"#;
    if let Some(line) = metrics.lines().find(|line| line.starts_with(failed) && !line.ends_with(" 0")) {
        problems.push(format!("a task failed: {line}"));
    }
    assert!(problems.is_empty(), "{binding:?}: {} problem(s):\n{}", problems.len(), problems.join("\n"));
}

#[tokio::test]
async fn over_grpc() {
    a_direct_reply_leaves_nothing_behind(Binding::Grpc).await;
}

#[tokio::test]
async fn over_json_rpc() {
    a_direct_reply_leaves_nothing_behind(Binding::JsonRpc).await;
}

#[tokio::test]
async fn over_http_json() {
    a_direct_reply_leaves_nothing_behind(Binding::HttpJson).await;
}
