//! The push scenario: webhook delivery to a receiver in this process, on 127.0.0.1.
//!
//! Our server only (the baseline has no webhooks), started with push on and the SSRF guard
//! opened for loopback. Three measurements:
//! - latency: a blocking SendMessage (`hi`, which completes at once) with an inline webhook; the
//!   time from the call's answer to the webhook receiving COMPLETED;
//! - throughput: a burst of `stream E 0` events to one webhook, first chunk to last event;
//! - memory: a webhook that accepts connections but never answers, and Q events queued for it:
//!   the server's RSS growth per queued event.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a_server::proto::{SendMessageConfiguration, SendMessageRequest, TaskPushNotificationConfig};
use serde_json::Value;
use tokio::sync::Notify;

use crate::BoxError;
use crate::driver::{Target, fresh_message};
use crate::process::rss_kib;
use crate::report::{Better, Measured, Metric};

/// The server flags the scenario needs.
pub const SERVER_ARGS: &[&str] = &["--push", "--push-allow-private", "--push-queue-capacity", "100000"];

/// Sizes of the push scenario.
pub struct PushParams {
    /// Webhook round trips timed for latency.
    pub samples: usize,
    /// Events in the throughput burst.
    pub events: usize,
    /// Events queued for the dead webhook.
    pub queued: usize,
}

/// What the receiver has seen: per task, arrival times of each event, and whether it ended.
#[derive(Default)]
struct Seen {
    arrivals: HashMap<String, Vec<Instant>>,
    completed: HashMap<String, Instant>,
}

#[derive(Clone)]
struct Receiver {
    base: String,
    seen: Arc<Mutex<Seen>>,
    arrived: Arc<Notify>,
}

impl Receiver {
    async fn start() -> Result<Self, BoxError> {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let arrived = Arc::new(Notify::new());
        let (log, wake) = (seen.clone(), arrived.clone());
        let ok = move |body: axum::body::Bytes| {
            let (log, wake) = (log.clone(), wake.clone());
            async move {
                let now = Instant::now();
                let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let update = value.get("statusUpdate").or_else(|| value.get("artifactUpdate"));
                let task_id = update.and_then(|u| u["taskId"].as_str()).unwrap_or_default().to_owned();
                let state = value.pointer("/statusUpdate/status/state").and_then(Value::as_str);
                {
                    let mut seen = log.lock().unwrap_or_else(|e| e.into_inner());
                    if state == Some("TASK_STATE_COMPLETED") {
                        seen.completed.insert(task_id.clone(), now);
                    }
                    seen.arrivals.entry(task_id).or_default().push(now);
                }
                wake.notify_waiters();
                axum::http::StatusCode::NO_CONTENT
            }
        };
        let hang = || async {
            std::future::pending::<()>().await;
            axum::http::StatusCode::NO_CONTENT
        };
        let app = axum::Router::new()
            .route("/ok", axum::routing::post(ok))
            .route("/hang", axum::routing::post(hang));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(Self { base, seen, arrived })
    }

    /// Waits until `check` holds on what was seen (bounded).
    async fn wait<T>(&self, what: &str, check: impl Fn(&Seen) -> Option<T>) -> Result<T, BoxError> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let notified = self.arrived.notified();
            if let Some(found) = check(&self.seen.lock().unwrap_or_else(|e| e.into_inner())) {
                return Ok(found);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(format!("push: timed out waiting for {what}").into());
            }
        }
    }
}

fn with_webhook(
    text: &str,
    task_id: Option<&str>,
    url: &str,
    return_immediately: bool,
) -> SendMessageRequest {
    SendMessageRequest {
        message: Some(fresh_message(text, task_id)),
        configuration: Some(SendMessageConfiguration {
            task_push_notification_config: Some(TaskPushNotificationConfig {
                url: url.to_owned(),
                ..Default::default()
            }),
            return_immediately,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn percentile_micros(sorted: &[Duration], q: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted.get(index).map(|d| d.as_secs_f64() * 1e6).unwrap_or(0.0)
}

/// Runs the three push measurements against `target` (whose PID gives the memory row).
pub async fn push(target: &Target, pid: Option<u32>, p: &PushParams) -> Result<Measured, BoxError> {
    let receiver = Receiver::start().await?;
    let conn = target.connect().await?;
    let ok_url = format!("{}/ok", receiver.base);
    let mut metrics = Vec::new();

    let mut latencies = Vec::with_capacity(p.samples);
    for _ in 0..p.samples {
        let task = conn.send_for_task(with_webhook("hi", None, &ok_url, false)).await?;
        let answered = Instant::now();
        let delivered = receiver.wait("COMPLETED", |seen| seen.completed.get(&task.id).copied()).await?;
        latencies.push(delivered.saturating_duration_since(answered));
    }
    latencies.sort();
    metrics.push(Metric::new(
        "delivery latency p50",
        "µs",
        percentile_micros(&latencies, 0.5),
        Better::Lower,
    ));
    metrics.push(Metric::new(
        "delivery latency p99",
        "µs",
        percentile_micros(&latencies, 0.99),
        Better::Lower,
    ));

    let idle = conn.send_for_task(with_webhook("input", None, &ok_url, false)).await?;
    let expected = p.events + 2; // WORKING, the chunks, COMPLETED
    let started = Instant::now();
    conn.send_for_task(SendMessageRequest {
        message: Some(fresh_message(&format!("stream {} 0", p.events), Some(&idle.id))),
        ..Default::default()
    })
    .await?;
    let last = receiver
        .wait("the burst", |seen| {
            let arrivals = seen.arrivals.get(&idle.id)?;
            (arrivals.len() > expected).then(|| arrivals.last().copied()).flatten()
        })
        .await?;
    let elapsed = last.saturating_duration_since(started).as_secs_f64().max(1e-9);
    metrics.push(Metric::new("delivered", "events/s", expected as f64 / elapsed, Better::Higher));

    if let Some(pid) = pid {
        let hang_url = format!("{}/hang", receiver.base);
        let before = rss_kib(pid)?;
        let idle = conn.send_for_task(with_webhook("input", None, &hang_url, false)).await?;
        conn.send_for_task(SendMessageRequest {
            message: Some(fresh_message(&format!("stream {} 0", p.queued), Some(&idle.id))),
            ..Default::default()
        })
        .await?;
        // The task is over; give the dispatcher a moment to route the last events.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let after = rss_kib(pid)?;
        let grown = after.saturating_sub(before) as f64;
        metrics.push(Metric::new("dead webhook: RSS growth", "MiB", grown / 1024.0, Better::Info));
        metrics.push(Metric::new(
            "dead webhook: per queued event",
            "B",
            grown * 1024.0 / p.queued as f64,
            Better::Info,
        ));
    }
    Ok(Measured {
        metrics,
        notes: vec![format!(
            "push: latency over {} webhook round trips; burst of {} events; {} events queued for a webhook that never answers",
            p.samples, p.events, p.queued
        )],
    })
}
