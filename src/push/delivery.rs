//! One worker per push notification config: POSTs its queued events in order, retrying with
//! exponential backoff and jitter on connection errors, timeouts, 5xx and 429 (honouring
//! `Retry-After`), and giving up after the attempt or age limit.
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use tokio::sync::Notify;

use super::ssrf::GuardedResolver;
use super::{PushSettings, PushStats};
use crate::call::Owner;
use crate::proto::TaskPushNotificationConfig;
use crate::protojson::encode_string_for;
use crate::task::log::TaskEvent;
use crate::task::store::TaskStore;

/// The HTTP client for webhooks: SSRF-guarded DNS, no proxies (they would bypass the guard),
/// no redirects (a redirect could point anywhere).
pub fn client(settings: &PushSettings) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .dns_resolver(Arc::new(GuardedResolver::new(Arc::new(settings.policy.clone()))))
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(settings.attempt_timeout)
        .connect_timeout(settings.attempt_timeout)
        .user_agent(concat!("a2a-server/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("cannot build the webhook HTTP client: {e}"))
}

/// A config's bounded queue of events.
pub struct WorkerQueue {
    capacity: usize,
    events: Mutex<VecDeque<Arc<TaskEvent>>>,
    wake: Notify,
    /// No more events will come (the task ended): drain and stop.
    finished: AtomicBool,
    /// The worker stopped (config deleted): the dispatcher starts a new one if needed.
    closed: AtomicBool,
}

impl WorkerQueue {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            events: Mutex::new(VecDeque::new()),
            wake: Notify::new(),
            finished: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        }
    }

    /// Queues an event; when full, sheds the oldest artifact update (or, if there is none,
    /// the oldest event) first. Returns whether something was shed.
    pub(super) fn push(&self, event: Arc<TaskEvent>) -> bool {
        let shed = {
            let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
            let shed = events.len() >= self.capacity;
            if shed {
                match events.iter().position(|e| e.state().is_none()) {
                    Some(chunk) => events.remove(chunk),
                    None => events.pop_front(),
                };
            }
            events.push_back(event);
            shed
        };
        self.wake.notify_one();
        shed
    }

    pub(super) fn finish(&self) {
        self.finished.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Queued events right now.
    pub fn len(&self) -> usize {
        self.events.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    async fn next(&self) -> Option<Arc<TaskEvent>> {
        loop {
            let notified = self.wake.notified();
            if let Some(event) = self.events.lock().unwrap_or_else(|e| e.into_inner()).pop_front() {
                return Some(event);
            }
            if self.finished.load(Ordering::Acquire) {
                return None;
            }
            notified.await;
        }
    }
}

/// Delivers one config's events.
pub(super) struct Worker {
    pub owner: Owner,
    pub task_id: String,
    pub config_id: String,
    pub queue: Arc<WorkerQueue>,
    pub store: Arc<dyn TaskStore>,
    pub client: reqwest::Client,
    pub settings: Arc<PushSettings>,
    pub stats: Arc<PushStats>,
}

enum Outcome {
    Delivered,
    Retry(Option<Duration>, String),
    Fail(String),
    Refused(String),
}

impl Worker {
    pub(super) async fn run(self) {
        while let Some(event) = self.queue.next().await {
            // Read the config at every delivery: a deleted config gets nothing more, and an
            // updated one is used as it is now.
            let config = match self.store.push_configs(&self.owner, &self.task_id).await {
                Ok(configs) => configs.into_iter().find(|c| c.id == self.config_id),
                Err(_) => None,
            };
            let Some(config) = config else { break };
            self.deliver(&config, &event).await;
        }
        self.queue.closed.store(true, Ordering::Release);
    }

    async fn deliver(&self, config: &TaskPushNotificationConfig, event: &TaskEvent) {
        // Webhook receivers get the v1.0 form: nothing says they read A2A dev-1.1 fields.
        let body = encode_string_for(&event.response, false);
        let started = Instant::now();
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let (delay, reason) = match self.attempt(config, &body).await {
                Outcome::Delivered => {
                    self.stats.delivered.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                Outcome::Refused(reason) => {
                    self.stats.refused.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(task_id = %self.task_id, config_id = %self.config_id, %reason, "webhook refused");
                    return;
                }
                Outcome::Fail(reason) => return self.give_up(event, attempt, &reason),
                Outcome::Retry(delay, reason) => (delay, reason),
            };
            let delay = delay.unwrap_or_else(|| backoff(&self.settings, attempt));
            if attempt >= self.settings.max_attempts || started.elapsed() + delay > self.settings.max_age {
                return self.give_up(event, attempt, &reason);
            }
            self.stats.retries.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(task_id = %self.task_id, config_id = %self.config_id, attempt, %reason, ?delay, "webhook retry");
            tokio::time::sleep(delay).await;
        }
    }

    fn give_up(&self, event: &TaskEvent, attempts: u32, reason: &str) {
        self.stats.failed.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            task_id = %self.task_id, config_id = %self.config_id, seq = event.seq, attempts, reason,
            "webhook delivery given up"
        );
    }

    async fn attempt(&self, config: &TaskPushNotificationConfig, body: &str) -> Outcome {
        let url = match reqwest::Url::parse(&config.url) {
            Ok(url) => url,
            Err(e) => return Outcome::Fail(format!("invalid webhook URL: {e}")),
        };
        if let Err(reason) = self.settings.policy.check_url(&url) {
            return Outcome::Refused(reason);
        }
        let mut request = self
            .client
            .post(url)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/a2a+json"))
            .body(body.to_owned());
        if let Some(auth) = &config.authentication {
            let value = match auth.credentials.as_str() {
                "" => auth.scheme.clone(),
                credentials => format!("{} {credentials}", auth.scheme),
            };
            request = request.header(AUTHORIZATION, value);
        }
        if !config.token.is_empty() {
            request = request.header("X-A2A-Notification-Token", config.token.as_str());
        }
        match request.send().await {
            Ok(response) if response.status().is_success() => Outcome::Delivered,
            Ok(response) => {
                let status = response.status();
                let reason = format!("webhook answered {status}");
                if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
                    Outcome::Retry(retry_after(response.headers()), reason)
                } else {
                    Outcome::Fail(reason)
                }
            }
            Err(error) => {
                let reason = error_chain(&error);
                if reason.contains("refused (see --push-allow)") {
                    Outcome::Refused(reason)
                } else {
                    Outcome::Retry(None, reason)
                }
            }
        }
    }
}

/// `base × 2^(attempt-1)`, capped, with ±25 % jitter so retries from many tasks spread out.
fn backoff(settings: &PushSettings, attempt: u32) -> Duration {
    let exponential = settings.backoff.saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
    let capped = exponential.min(settings.max_backoff);
    let jitter = (uuid::Uuid::new_v4().as_u128() % 501) as f64 / 1000.0 - 0.25;
    capped.mul_f64(1.0 + jitter)
}

/// `Retry-After` as seconds or an HTTP date.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(std::time::SystemTime::now()).unwrap_or_default())
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{StreamResponse, TaskStatus, TaskStatusUpdateEvent, stream_response::Payload};

    fn event(seq: u64, status: bool) -> Arc<TaskEvent> {
        let payload = if status {
            Payload::StatusUpdate(TaskStatusUpdateEvent {
                status: Some(TaskStatus::default()),
                ..Default::default()
            })
        } else {
            Payload::ArtifactUpdate(Default::default())
        };
        Arc::new(TaskEvent::new(seq, StreamResponse { payload: Some(payload) }))
    }

    #[test]
    fn a_full_queue_sheds_chunks_before_states() {
        let queue = WorkerQueue::new(3);
        assert!(!queue.push(event(1, true)));
        assert!(!queue.push(event(2, false)));
        assert!(!queue.push(event(3, true)));
        assert!(queue.push(event(4, true)), "full: something is shed");
        let seqs: Vec<u64> = queue.events.lock().unwrap().iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 3, 4], "the chunk went first");
        assert!(queue.push(event(5, true)));
        let seqs: Vec<u64> = queue.events.lock().unwrap().iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [3, 4, 5], "then the oldest state; the newest is kept");
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let settings = PushSettings {
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            ..Default::default()
        };
        let first = backoff(&settings, 1);
        assert!(first >= Duration::from_millis(75) && first <= Duration::from_millis(125), "{first:?}");
        let fourth = backoff(&settings, 4);
        assert!(fourth >= Duration::from_millis(600) && fourth <= Duration::from_millis(1000), "{fourth:?}");
        assert!(backoff(&settings, 30) <= Duration::from_millis(1250));
    }

    #[test]
    fn retry_after_forms() {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert(RETRY_AFTER, HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"));
        assert_eq!(retry_after(&headers), Some(Duration::ZERO), "a past date means now");
    }
}
