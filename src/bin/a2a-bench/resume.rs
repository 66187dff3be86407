//! The resume scenario (issue 13, item 6): what a client that missed ten updates of a task
//! holding a 1 MiB artifact pays to catch up over HTTP+JSON SSE, resuming with its cursor
//! (`A2A-Last-Generation`) against re-reading a fresh snapshot. The agent is a custom one, so
//! the server runs in this process (a fresh one per round), whatever --url or --spawn-server
//! say. The logic is `tests/resume_cost.rs`'s.
use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_server::agent::demo::DemoAgent;
use a2a_server::agent::{AgentExecutor, EventSink, RequestContext, text_artifact};
use a2a_server::call::RESUME_EXTENSION;
use a2a_server::error::A2aError;
use a2a_server::server::Server;
use futures::StreamExt;

use crate::BoxError;
use crate::report::{Better, Measured, Metric};

const MIB: usize = 1 << 20;

/// The updates the client misses.
const MISSED: usize = 10;

/// How long any one wait (a response, a chunk, the task reaching a generation) may take.
const PATIENCE: Duration = Duration::from_secs(30);

/// A 1 MiB artifact, a pause, ten progress updates, a long pause, done.
struct BigThenSmall;

#[async_trait::async_trait]
impl AgentExecutor for BigThenSmall {
    async fn execute(&self, _ctx: RequestContext, events: EventSink) -> Result<(), A2aError> {
        let _ = events.working(None).await;
        let _ = events.artifact(text_artifact("big", "big", "x".repeat(MIB))).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        for i in 0..MISSED {
            let _ = events.working(Some(&format!("step {i}"))).await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let _ = events.complete(None).await;
        Ok(())
    }
}

/// One round: a fresh in-process server, one task, the cursor and the snapshot measured.
pub async fn resume() -> Result<Measured, BoxError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let running = Server::new(Arc::new(BigThenSmall), DemoAgent::card()).start(listener).await?;
    let url = format!("http://{}", running.http_addr());
    let outcome = measure(&url).await;
    running.stop();
    outcome
}

async fn measure(url: &str) -> Result<Measured, BoxError> {
    let client = reqwest::Client::builder().timeout(PATIENCE).build()?;
    let message_id = format!("bench-resume-{}", std::process::id());
    let reply: serde_json::Value = client
        .post(format!("{url}/message:send"))
        .header("A2A-Version", "1.1")
        .json(&serde_json::json!({
            "message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": "go"}]},
            "configuration": {"returnImmediately": true},
        }))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let id = reply["task"]["id"].as_str().ok_or("SendMessage returned no task")?.to_owned();
    // A subscriber that reads the Task and leaves: from then on the task's log keeps its
    // events (within its bounds) for resuming.
    subscribe_cost(&client, url, &id, &[], 1).await?;
    let deadline = Instant::now() + PATIENCE;
    let mut seen = generation(&client, url, &id).await?;
    // The client saw the artifact (generation 3) ...
    while seen < 3 {
        wait(deadline, "the artifact").await?;
        seen = generation(&client, url, &id).await?;
    }
    // ... then missed ten updates.
    while generation(&client, url, &id).await? < seen + MISSED as i64 {
        wait(deadline, "the ten updates").await?;
    }
    let resume = [("a2a-extensions", RESUME_EXTENSION.to_owned()), ("a2a-last-generation", seen.to_string())];
    let (cursor_bytes, cursor_time) = subscribe_cost(&client, url, &id, &resume, MISSED).await?;
    let (snapshot_bytes, snapshot_time) = subscribe_cost(&client, url, &id, &[], 1).await?;
    let mut notes = Vec::new();
    if snapshot_bytes <= MIB {
        notes.push(format!("the snapshot ({snapshot_bytes} B) is smaller than the artifact"));
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    Ok(Measured {
        metrics: vec![
            Metric::new("bytes (cursor)", "B", cursor_bytes as f64, Better::Lower),
            Metric::new("bytes (snapshot)", "B", snapshot_bytes as f64, Better::Info),
            Metric::new("time (cursor)", "ms", ms(cursor_time), Better::Lower),
            Metric::new("time (snapshot)", "ms", ms(snapshot_time), Better::Info),
            Metric::new(
                "bytes snapshot / cursor",
                "×",
                snapshot_bytes as f64 / cursor_bytes.max(1) as f64,
                Better::Info,
            ),
            Metric::new(
                "time snapshot / cursor",
                "×",
                ms(snapshot_time) / ms(cursor_time).max(1e-6),
                Better::Info,
            ),
        ],
        notes,
    })
}

async fn wait(deadline: Instant, what: &str) -> Result<(), BoxError> {
    if Instant::now() >= deadline {
        return Err(format!("the task did not reach {what} within {PATIENCE:?}").into());
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    Ok(())
}

/// The task's generation, from GetTask (0 when it carries none).
async fn generation(client: &reqwest::Client, url: &str, id: &str) -> Result<i64, BoxError> {
    let task: serde_json::Value =
        client.get(format!("{url}/tasks/{id}")).header("A2A-Version", "1.1").send().await?.json().await?;
    Ok(task["generation"].as_str().and_then(|g| g.parse().ok()).unwrap_or(0))
}

/// Bytes and time until `events` SSE events of a subscription with `headers` arrived.
async fn subscribe_cost(
    client: &reqwest::Client,
    url: &str,
    id: &str,
    headers: &[(&str, String)],
    events: usize,
) -> Result<(usize, Duration), BoxError> {
    let started = Instant::now();
    let mut request = client.get(format!("{url}/tasks/{id}:subscribe")).header("A2A-Version", "1.1");
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response =
        tokio::time::timeout(PATIENCE, request.send()).await.map_err(|_| "subscribe: no answer")??;
    let mut body = response.error_for_status()?.bytes_stream();
    // Events end with a blank line; counted as the bytes come, so that a 1 MiB snapshot is
    // not re-scanned on every chunk (that would be timed too).
    let (mut bytes, mut seen, mut newline) = (0, 0, false);
    while seen < events {
        let chunk = tokio::time::timeout(PATIENCE, body.next())
            .await
            .map_err(|_| "subscribe: no event in time")?
            .ok_or("subscribe: the stream ended early")??;
        bytes += chunk.len();
        for &byte in chunk.iter() {
            if byte != b'\n' {
                newline = false;
            } else if newline {
                (seen, newline) = (seen + 1, false);
            } else {
                newline = true;
            }
        }
    }
    Ok((bytes, started.elapsed()))
}
