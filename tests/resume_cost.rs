//! What resuming saves (issue 13, item 6): a task holding a 1 MiB artifact, a client that
//! missed 10 updates. Over HTTP+JSON SSE, resuming with the cursor sends the 10 updates;
//! without it the client gets the whole Task again. Prints both (bytes, time) and checks the
//! cursor costs a small fraction of the snapshot.
mod common;

use std::time::{Duration, Instant};

use a2a_server::agent::{AgentExecutor, EventSink, RequestContext, text_artifact};
use a2a_server::call::RESUME_EXTENSION;
use a2a_server::error::A2aError;
use common::*;
use futures::StreamExt;

const MIB: usize = 1 << 20;

/// A 1 MiB artifact, a pause, ten progress updates, a long pause, done.
struct BigThenSmall;

#[async_trait::async_trait]
impl AgentExecutor for BigThenSmall {
    async fn execute(&self, _ctx: RequestContext, events: EventSink) -> Result<(), A2aError> {
        let _ = events.working(None).await;
        let _ = events.artifact(text_artifact("big", "big", "x".repeat(MIB))).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        for i in 0..10 {
            let _ = events.working(Some(&format!("step {i}"))).await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let _ = events.complete(None).await;
        Ok(())
    }
}

async fn generation(server: &TestServer, id: &str) -> i64 {
    let response = reqwest::Client::new()
        .get(format!("{}/tasks/{id}", server.url()))
        .header("A2A-Version", "1.1")
        .send()
        .await
        .unwrap();
    let task: serde_json::Value = response.json().await.unwrap();
    task["generation"].as_str().and_then(|g| g.parse().ok()).unwrap_or(0)
}

/// Bytes and time until `events` SSE events of a subscription with `headers` arrived.
async fn subscribe_cost(
    server: &TestServer,
    id: &str,
    headers: &[(&str, String)],
    events: usize,
) -> (usize, Duration) {
    let started = Instant::now();
    let mut request = reqwest::Client::new()
        .get(format!("{}/tasks/{id}:subscribe", server.url()))
        .header("A2A-Version", "1.1");
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let mut body = request.send().await.unwrap().bytes_stream();
    let (mut bytes, mut text) = (0, String::new());
    while text.matches("\n\n").count() < events {
        let chunk = tokio::time::timeout(PATIENCE, body.next()).await.expect("events").unwrap().unwrap();
        bytes += chunk.len();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    (bytes, started.elapsed())
}

#[tokio::test]
async fn resuming_after_ten_missed_updates_costs_a_fraction_of_a_snapshot() {
    let server = TestServer::builder().agent(BigThenSmall).start().await;
    let body =
        serde_json::json!({"message": json_message("go"), "configuration": {"returnImmediately": true}});
    let request =
        reqwest::Client::new().post(format!("{}/message:send", server.url())).header("A2A-Version", "1.1");
    let reply = json_answer(request.json(&body)).await;
    let id = reply["task"]["id"].as_str().expect("a task").to_owned();
    // A subscriber that reads the Task and leaves: from then on the task's log keeps its
    // events (within its bounds) for resuming.
    let steady = subscribe_cost(&server, &id, &[], 1).await;
    assert!(steady.0 > 0);
    let deadline = Instant::now() + PATIENCE;
    let mut seen = generation(&server, &id).await;
    while seen < 3 {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
        seen = generation(&server, &id).await;
    }
    // The client saw the artifact (generation 3), then missed ten updates.
    while generation(&server, &id).await < seen + 10 {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let resume = [("a2a-extensions", RESUME_EXTENSION.to_owned()), ("a2a-last-generation", seen.to_string())];
    let (cursor_bytes, cursor_time) = subscribe_cost(&server, &id, &resume, 10).await;
    let (snapshot_bytes, snapshot_time) = subscribe_cost(&server, &id, &[], 1).await;
    println!("resume after 10 missed updates of a task with a 1 MiB artifact:");
    println!("  with the cursor: {cursor_bytes} bytes in {cursor_time:?}");
    println!("  fresh snapshot:  {snapshot_bytes} bytes in {snapshot_time:?}");
    assert!(snapshot_bytes > MIB, "the snapshot holds the artifact");
    assert!(cursor_bytes * 100 < snapshot_bytes, "{cursor_bytes} vs {snapshot_bytes}");
}
