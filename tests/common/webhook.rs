//! A webhook receiver on a loopback address that records every push, and the push settings
//! that let a test server deliver to it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a_server::core::CoreSettings;
use a2a_server::push::PushSettings;
use a2a_server::push::ssrf::Policy;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use serde_json::Value;
use tokio::sync::Notify;

use super::PATIENCE;

/// How the receiver answers.
#[derive(Clone)]
pub enum Behaviour {
    Accept,
    /// Answer `status` (with an optional Retry-After) this many times, then accept.
    FailFirst(usize, u16, Option<&'static str>),
    Always(u16),
    /// Never answer.
    Hang,
    Redirect(String),
}

/// One request the receiver got.
pub struct Call {
    pub headers: HeaderMap,
    pub body: Value,
    pub at: Instant,
}

/// An HTTP server taking webhook POSTs on `/hook`, recording each call.
#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    pub calls: Arc<Mutex<Vec<Call>>>,
    pub arrived: Arc<Notify>,
}

impl Receiver {
    pub async fn start(behaviour: Behaviour) -> Self {
        Self::start_on("127.0.0.1:0", behaviour).await
    }

    pub async fn start_on(address: &str, behaviour: Behaviour) -> Self {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let arrived = Arc::new(Notify::new());
        let (log, wake) = (calls.clone(), arrived.clone());
        let handler = move |headers: HeaderMap, body: axum::body::Bytes| {
            let (log, wake, behaviour) = (log.clone(), wake.clone(), behaviour.clone());
            async move {
                let n = {
                    let mut calls = log.lock().unwrap();
                    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    calls.push(Call { headers, body, at: Instant::now() });
                    calls.len()
                };
                wake.notify_waiters();
                match behaviour {
                    Behaviour::Accept => StatusCode::OK.into_response(),
                    Behaviour::FailFirst(times, status, retry_after) if n <= times => {
                        let mut response = StatusCode::from_u16(status).unwrap().into_response();
                        if let Some(value) = retry_after {
                            response.headers_mut().insert("retry-after", value.parse().unwrap());
                        }
                        response
                    }
                    Behaviour::FailFirst(..) => StatusCode::NO_CONTENT.into_response(),
                    Behaviour::Always(status) => StatusCode::from_u16(status).unwrap().into_response(),
                    Behaviour::Hang => std::future::pending().await,
                    Behaviour::Redirect(to) => (StatusCode::FOUND, [("location", to)]).into_response(),
                }
            }
        };
        let app = axum::Router::new().route("/hook", axum::routing::post(handler));
        let listener = tokio::net::TcpListener::bind(address).await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, calls, arrived }
    }

    pub fn count(&self) -> usize {
        self.calls.lock().unwrap().len()
    }

    pub fn bodies(&self) -> Vec<Value> {
        self.calls.lock().unwrap().iter().map(|c| c.body.clone()).collect()
    }

    /// Waits until at least `n` calls arrived.
    pub async fn wait_for(&self, n: usize) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let notified = self.arrived.notified();
            if self.count() >= n {
                return;
            }
            assert!(
                tokio::time::timeout_at(deadline, notified).await.is_ok(),
                "timed out waiting for {n} webhook calls (got {})",
                self.count()
            );
        }
    }
}

/// Push on, with the SSRF `policy`, quick retries and three attempts.
pub fn push_settings(policy: Policy) -> CoreSettings {
    CoreSettings {
        push_notifications: true,
        push: PushSettings {
            policy,
            backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(50),
            max_attempts: 3,
            attempt_timeout: Duration::from_secs(20),
            ..PushSettings::default()
        },
        ..CoreSettings::default()
    }
}
