//! One worker per push notification config: POSTs its queued events in order, retrying with
//! exponential backoff and jitter on connection errors, timeouts, 5xx and 429 (honouring
//! `Retry-After`), and giving up after the attempt or age limit. Every attempt waits for one
//! of the `--push-max-concurrency` permits shared by all workers, and holds it only while its
//! request is in flight (not while it backs off).
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use tokio::sync::Semaphore;

use super::body::{Subject, WebhookBody, WebhookEncoder};
use super::queue::{WORKER_IDLE, WorkerQueue};
use super::signing::{Delivery, SIGNATURE_HEADER};
use super::ssrf::GuardedResolver;
use super::{PushSettings, PushStats, Tasks};
use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::{Task, TaskPushNotificationConfig};
use crate::task::log::TaskEvent;
use crate::task::store::TaskStore;

/// The HTTP client for webhooks: SSRF-guarded DNS, no proxies (they would bypass the guard),
/// no redirects (a redirect could point anywhere), and no idle connections kept: the pool's
/// bound is per host, so receivers on many hosts (or ports) could otherwise hold any number
/// of idle sockets; without it, open webhook sockets never exceed `--push-max-concurrency`.
pub fn client(settings: &PushSettings) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .dns_resolver(Arc::new(GuardedResolver::new(Arc::new(settings.policy.clone()))))
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0)
        .timeout(settings.attempt_timeout)
        .connect_timeout(settings.attempt_timeout)
        .user_agent(concat!("a2a-server/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("cannot build the webhook HTTP client: {e}"))
}

/// Delivers one config's events.
pub(super) struct Worker {
    pub owner: Owner,
    pub task_id: String,
    pub config_id: String,
    pub queue: Arc<WorkerQueue>,
    pub store: Arc<dyn TaskStore>,
    /// Where a body written from the task reads it.
    pub tasks: Tasks,
    pub client: reqwest::Client,
    pub settings: Arc<PushSettings>,
    pub stats: Arc<PushStats>,
    /// The permits for requests in flight, shared by every worker.
    pub sends: Arc<Semaphore>,
}

enum Outcome {
    Delivered,
    Retry(Option<Duration>, String),
    Fail(String),
    Refused(String),
}

impl Worker {
    pub(super) async fn run(self) {
        // The newest task generation a body written from the task has shown.
        let mut shown = 0;
        while let Some(mut taken) = self.queue.next(WORKER_IDLE).await {
            let event = taken.event.clone();
            // Read the config at every delivery: a deleted config gets nothing more, and an
            // updated one is used as it is now (in the version it was last registered in).
            let registration = match self.store.push_configs(&self.owner, &self.task_id).await {
                Ok(configs) => configs.into_iter().find(|r| r.config.id == self.config_id),
                // The store failed: a durable event stays unsettled (handed out again later).
                Err(_) => break,
            };
            let Some(registration) = registration else {
                taken.settle();
                break;
            };
            let encoder = self.settings.encoders.get(registration.version);
            match self.body(encoder, &event, &mut shown).await {
                Ok(Some((body, generation))) => {
                    self.deliver(&registration.config, &body, generation, event.seq).await
                }
                Ok(None) => {}
                Err(error) => {
                    let host = host_of(&registration.config.url);
                    self.give_up(event.seq, 0, &host, &format!("cannot read the task: {error}"))
                }
            }
            taken.settle();
        }
        let dropped = self.queue.close();
        self.stats.dropped.fetch_add(dropped as u64, Ordering::Relaxed);
    }

    /// The body of `event` in `encoder`'s form, with the generation it shows. A body written
    /// from the task (v0.3's whole Task, as a2a-sdk 0.3 sends "the latest task state") shows
    /// the task as it is now, at or past the event: `None` when an earlier body already
    /// showed that generation, so a webhook that fell behind gets each state once.
    async fn body(
        &self,
        encoder: &dyn WebhookEncoder,
        event: &TaskEvent,
        shown: &mut i64,
    ) -> Result<Option<(WebhookBody, u64)>, A2aError> {
        if !encoder.wants_task() {
            return Ok(Some((encoder.encode(Subject::Event(&event.response)), event.seq)));
        }
        let task = self.current_task().await?;
        if task.generation > 0 && task.generation <= *shown {
            return Ok(None);
        }
        *shown = task.generation;
        let generation = u64::try_from(task.generation).unwrap_or(event.seq).max(event.seq);
        Ok(Some((encoder.encode(Subject::Task(&task)), generation)))
    }

    async fn current_task(&self) -> Result<Arc<Task>, A2aError> {
        let Some(tasks) = self.tasks.get().and_then(std::sync::Weak::upgrade) else {
            return Err(A2aError::Unavailable("the server is stopping".into()));
        };
        crate::task::registry::current_task(&tasks, &self.owner, &self.task_id).await
    }

    /// Delivers `body` (showing `generation`) for the event numbered `seq`, retrying.
    async fn deliver(
        &self,
        config: &TaskPushNotificationConfig,
        body: &WebhookBody,
        generation: u64,
        seq: u64,
    ) {
        let started = Instant::now();
        let host = host_of(&config.url);
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let outcome = {
                let Ok(_permit) = self.sends.acquire().await else { return };
                self.stats.in_flight.fetch_add(1, Ordering::Relaxed);
                let outcome = self.attempt(config, generation, seq, body).await;
                self.stats.in_flight.fetch_sub(1, Ordering::Relaxed);
                outcome
            };
            let (delay, reason) = match outcome {
                Outcome::Delivered => {
                    self.stats.delivered.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                Outcome::Refused(reason) => {
                    self.stats.refused.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(task_id = %self.task_id, config_id = %self.config_id, %reason, "webhook refused");
                    return;
                }
                Outcome::Fail(reason) => return self.give_up(generation, attempt, &host, &reason),
                Outcome::Retry(delay, reason) => (delay, reason),
            };
            let delay = delay.unwrap_or_else(|| backoff(&self.settings, attempt));
            if attempt >= self.settings.max_attempts || started.elapsed() + delay > self.settings.max_age {
                return self.give_up(generation, attempt, &host, &reason);
            }
            self.stats.retries.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(task_id = %self.task_id, config_id = %self.config_id, attempt, %reason, ?delay, "webhook retry");
            tokio::time::sleep(delay).await;
        }
    }

    /// Records a delivery given up for good: counted, and logged with the webhook's host
    /// (never its URL's path or query, nor its token).
    fn give_up(&self, seq: u64, attempts: u32, host: &str, reason: &str) {
        self.stats.failed.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            task_id = %self.task_id, config_id = %self.config_id, seq, attempts, webhook_host = host, reason,
            "webhook delivery given up"
        );
    }

    async fn attempt(
        &self,
        config: &TaskPushNotificationConfig,
        generation: u64,
        seq: u64,
        body: &WebhookBody,
    ) -> Outcome {
        let url = match reqwest::Url::parse(&config.url) {
            Ok(url) => url,
            Err(e) => return Outcome::Fail(format!("invalid webhook URL: {e}")),
        };
        if let Err(reason) = self.settings.policy.check_url(&url) {
            return Outcome::Refused(reason);
        }
        let mut request =
            self.client.post(url).header(CONTENT_TYPE, body.content_type).body(body.text.clone());
        let token = match &self.settings.signing {
            Some(signer) => {
                let delivery = Delivery {
                    issuer: &self.settings.issuer,
                    audience: &config.url,
                    task_id: &self.task_id,
                    config_id: &self.config_id,
                    generation,
                    body: body.text.as_bytes(),
                };
                match signer.sign(&delivery) {
                    Ok(token) => Some(token),
                    Err(reason) => return Outcome::Fail(reason),
                }
            }
            None => None,
        };
        if let Some(value) = authorization(config, token.as_deref()) {
            request = request.header(AUTHORIZATION, value);
        }
        if let Some(token) = token {
            request = request.header(SIGNATURE_HEADER, token);
        }
        if !config.token.is_empty() {
            request = request.header("X-A2A-Notification-Token", config.token.as_str());
        }
        // The same on every retry, from any replica: a receiver drops repeats by it.
        request = request.header(DELIVERY_ID_HEADER, format!("{}/{seq}", self.task_id));
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

/// The `Authorization` header: the config's own credentials when it has some (the spec's
/// MUST); otherwise, when signing, the token as a bearer credential (where the A2A guide and
/// samples look for it), also for a config that asked for `Bearer` without credentials.
fn authorization(config: &TaskPushNotificationConfig, token: Option<&str>) -> Option<String> {
    match (&config.authentication, token) {
        (Some(auth), Some(token))
            if auth.credentials.is_empty() && auth.scheme.eq_ignore_ascii_case("bearer") =>
        {
            Some(format!("Bearer {token}"))
        }
        (Some(auth), _) => Some(match auth.credentials.as_str() {
            "" => auth.scheme.clone(),
            credentials => format!("{} {credentials}", auth.scheme),
        }),
        (None, Some(token)) => Some(format!("Bearer {token}")),
        (None, None) => None,
    }
}

/// The header naming what a POST delivers: `<task id>/<event seq>` (the seq is the generation
/// the event made). At-least-once delivery repeats a POST; this says it is a repeat.
pub const DELIVERY_ID_HEADER: &str = "A2A-Delivery-Id";

/// The host (and port) of a webhook URL, for logs: never its path, query or credentials.
fn host_of(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(url) => match (url.host_str(), url.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            _ => "(no host)".to_owned(),
        },
        Err(_) => "(invalid URL)".to_owned(),
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
    use crate::proto::AuthenticationInfo;
    use reqwest::header::HeaderValue;

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

    #[test]
    fn the_token_takes_authorization_only_when_the_config_leaves_it_free() {
        let with = |scheme: &str, credentials: &str| TaskPushNotificationConfig {
            authentication: Some(AuthenticationInfo {
                scheme: scheme.into(),
                credentials: credentials.into(),
            }),
            ..Default::default()
        };
        let none = TaskPushNotificationConfig::default();
        assert_eq!(authorization(&none, None), None);
        assert_eq!(authorization(&none, Some("t")).as_deref(), Some("Bearer t"));
        assert_eq!(authorization(&with("bearer", ""), Some("t")).as_deref(), Some("Bearer t"));
        assert_eq!(authorization(&with("Bearer", "mine"), Some("t")).as_deref(), Some("Bearer mine"));
        assert_eq!(authorization(&with("Basic", "dTpw"), Some("t")).as_deref(), Some("Basic dTpw"));
        assert_eq!(authorization(&with("Bearer", ""), None).as_deref(), Some("Bearer"));
    }
}
