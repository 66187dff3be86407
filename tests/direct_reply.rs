//! A direct Message reply creates no task: nothing is stored, registered, counted or pushed,
//! even when the request carries an inline webhook (issue 10, item 8). One test, so that the
//! process-wide metrics it reads are moved by nothing else.
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use a2a_server::core::CoreSettings;
use a2a_server::proto::send_message_response::Payload as Reply;
use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{
    ListTasksRequest, SendMessageConfiguration, SendMessageRequest, TaskPushNotificationConfig,
};
use a2a_server::push::PushSettings;
use a2a_server::push::ssrf::Policy;
use common::*;

/// A webhook receiver that only counts what arrives.
async fn webhook() -> (String, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let handler = move || {
        counted.fetch_add(1, Ordering::SeqCst);
        async { "ok" }
    };
    let app = axum::Router::new().route("/hook", axum::routing::post(handler));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, calls)
}

fn with_webhook(text: &str, url: &str) -> SendMessageRequest {
    let webhook = TaskPushNotificationConfig { url: url.to_owned(), ..Default::default() };
    SendMessageRequest {
        configuration: Some(SendMessageConfiguration {
            task_push_notification_config: Some(webhook),
            ..Default::default()
        }),
        ..send(text)
    }
}

/// The value of the sample line that is exactly `name` (with its labels), if there is one.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn a_direct_reply_moves_no_gauge_and_sends_no_webhook() {
    let settings = CoreSettings {
        push_notifications: true,
        push: PushSettings { policy: Policy::with_allowlist(true, &[]), ..Default::default() },
        ..Default::default()
    };
    let server = TestServer::start_with(settings).await;
    let (url, calls) = webhook().await;
    let mut client = server.client().await;
    for text in ["message one", "message two"] {
        let reply = client.send_message(with_webhook(text, &url)).await.unwrap().into_inner();
        assert!(matches!(reply.payload, Some(Reply::Message(_))), "{reply:?}");
    }
    let stream = client.send_streaming_message(with_webhook("message three", &url)).await.unwrap();
    let items = collect(stream.into_inner()).await.unwrap();
    assert!(matches!(items.as_slice(), [item] if matches!(item.payload, Some(Payload::Message(_)))));
    let tck = SendMessageRequest {
        message: Some(a2a_server::proto::Message {
            message_id: format!("tck-message-response-{}", uuid::Uuid::new_v4()),
            ..user_message("hi")
        }),
        ..with_webhook("", &url)
    };
    let reply = client.send_message(tck).await.unwrap().into_inner();
    assert!(matches!(reply.payload, Some(Reply::Message(_))), "{reply:?}");

    // Anything the actors would have pushed is long on its way to the receiver by then.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 0, "no webhook call for a task that does not exist");
    assert_eq!(server.core.live_tasks(), 0);
    let list = client.list_tasks(ListTasksRequest::default()).await.unwrap().into_inner();
    assert_eq!(list.total_size, 0);

    let metrics = reqwest::get(format!("{}/metrics", server.url())).await.unwrap().text().await.unwrap();
    let untouched = [
        r#"a2a_tasks{state="TASK_STATE_SUBMITTED"}"#,
        r#"a2a_tasks_finished_total{state="TASK_STATE_FAILED"}"#,
        "a2a_tasks_started_total",
        "a2a_events_total",
    ];
    for name in untouched {
        assert_eq!(sample(&metrics, name).unwrap_or(0.0), 0.0, "{name} moved:\n{metrics}");
    }
    assert_eq!(sample(&metrics, "a2a_live_tasks"), Some(0.0), "{metrics}");
}
