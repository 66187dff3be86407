//! A webhook receiver on a loopback address that records every push, a verifier of signed
//! pushes (as a receiver would check them), a receiver that never answers (counting the
//! connections it holds), and the push settings that let a test server deliver to them.

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
    /// The body exactly as it arrived (what a signature covers).
    pub raw: axum::body::Bytes,
    pub body: Value,
    pub at: Instant,
}

/// An HTTP server taking webhook POSTs on `/hook`, recording each call.
#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    pub calls: Arc<Mutex<Vec<Call>>>,
    pub arrived: Arc<Notify>,
    behaviour: Behaviour,
    address: std::net::SocketAddr,
    server: Arc<Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

impl Receiver {
    pub async fn start(behaviour: Behaviour) -> Self {
        Self::start_on("127.0.0.1:0", behaviour).await
    }

    pub async fn start_on(address: &str, behaviour: Behaviour) -> Self {
        let listener = tokio::net::TcpListener::bind(address).await.unwrap();
        let address = listener.local_addr().unwrap();
        let receiver = Self {
            url: format!("http://{address}/hook"),
            calls: Arc::new(Mutex::new(Vec::new())),
            arrived: Arc::new(Notify::new()),
            behaviour,
            address,
            server: Arc::new(Mutex::new(None)),
        };
        receiver.serve(listener);
        receiver
    }

    /// Stops listening: webhooks meet a refused connection until [`Receiver::restart`].
    pub fn stop(&self) {
        if let Some(server) = self.server.lock().unwrap().take() {
            server.abort();
        }
    }

    /// Listens again on the same address, recording into the same calls.
    pub async fn restart(&self) {
        self.stop();
        let deadline = Instant::now() + PATIENCE;
        let listener = loop {
            match tokio::net::TcpListener::bind(self.address).await {
                Ok(listener) => break listener,
                Err(error) if Instant::now() < deadline => {
                    let _ = error;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(error) => panic!("cannot listen on {} again: {error}", self.address),
            }
        };
        self.serve(listener);
    }

    fn serve(&self, listener: tokio::net::TcpListener) {
        let (log, wake, behaviour) = (self.calls.clone(), self.arrived.clone(), self.behaviour.clone());
        let handler = move |headers: HeaderMap, body: axum::body::Bytes| {
            let (log, wake, behaviour) = (log.clone(), wake.clone(), behaviour.clone());
            async move {
                let n = {
                    let mut calls = log.lock().unwrap();
                    let parsed = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    calls.push(Call { headers, raw: body, body: parsed, at: Instant::now() });
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
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        *self.server.lock().unwrap() = Some(server);
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

/// Checks signed pushes the way a receiver would, through an implementation of its own: the
/// key from the server's JWKS by the token's `kid` (`jsonwebtoken`, where the server signs
/// with aws-lc directly), the signature, `iss`, `aud` (this webhook's URL), `exp` and `iat`,
/// and the SHA-256 of the exact body bytes against `request_body_sha256`.
pub struct Verifier {
    pub jwks: jsonwebtoken::jwk::JwkSet,
    issuer: String,
}

impl Verifier {
    /// Fetches the JWKS of the server at `base` (which is also the expected issuer).
    pub async fn fetch(base: &str) -> Self {
        let response = reqwest::get(format!("{base}/.well-known/jwks.json")).await.expect("JWKS reachable");
        assert_eq!(response.status(), 200, "the JWKS is served");
        let jwks = response.json().await.expect("a JWK set");
        Self { jwks, issuer: base.to_owned() }
    }

    /// Expects `issuer` instead of the URL the JWKS came from (a fleet behind one public URL).
    pub fn issued_by(self, issuer: &str) -> Self {
        Self { issuer: issuer.to_owned(), ..self }
    }

    /// The claims of a push that verifies; why not, otherwise.
    pub fn verify(&self, headers: &HeaderMap, body: &[u8], audience: &str) -> Result<Value, String> {
        use jsonwebtoken::{DecodingKey, Validation, decode, decode_header};
        let token = headers
            .get("x-a2a-notification-signature")
            .ok_or("no signature header")?
            .to_str()
            .map_err(|e| e.to_string())?;
        let header = decode_header(token).map_err(|e| format!("header: {e}"))?;
        let kid = header.kid.as_deref().ok_or("no kid")?;
        let jwk = self.jwks.find(kid).ok_or_else(|| format!("kid {kid} is not in the JWKS"))?;
        let published = jwk.common.key_algorithm.map(|a| format!("{a:?}"));
        if published != Some(format!("{:?}", header.alg)) {
            return Err(format!("alg {:?} is not the key's {published:?}", header.alg));
        }
        let key = DecodingKey::from_jwk(jwk).map_err(|e| format!("JWK: {e}"))?;
        let mut validation = Validation::new(header.alg);
        validation.set_audience(&[audience]);
        validation.set_issuer(&[&self.issuer]);
        validation.set_required_spec_claims(&["exp", "iat", "aud", "iss"]);
        let claims = decode::<Value>(token, &key, &validation).map_err(|e| format!("token: {e}"))?.claims;
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, body);
        let actual: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        if claims["request_body_sha256"] != actual.as_str() {
            return Err("the body is not the one signed".into());
        }
        let iat = claims["iat"].as_u64().ok_or("no iat")?;
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        if iat > now + 60 || now - iat.min(now) > 300 {
            return Err(format!("iat {iat} is outside the window around {now}"));
        }
        Ok(claims)
    }
}

/// A webhook that accepts connections and never answers; it counts the connections open now
/// and the most that were ever open at once.
pub struct Silent {
    pub url: String,
    counts: Arc<SilentCounts>,
}

#[derive(Default)]
struct SilentCounts {
    open: std::sync::atomic::AtomicUsize,
    peak: std::sync::atomic::AtomicUsize,
}

impl Silent {
    pub async fn start() -> Self {
        use std::sync::atomic::Ordering::SeqCst;
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let counts = Arc::new(SilentCounts::default());
        let shared = counts.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let counts = shared.clone();
                let open = counts.open.fetch_add(1, SeqCst) + 1;
                counts.peak.fetch_max(open, SeqCst);
                tokio::spawn(async move {
                    // Read (and ignore) until the client gives up; never answer.
                    let mut buffer = [0u8; 4096];
                    while matches!(socket.read(&mut buffer).await, Ok(1..)) {}
                    counts.open.fetch_sub(1, SeqCst);
                });
            }
        });
        Self { url, counts }
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.counts.open.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The most connections that were open at once.
    pub fn peak(&self) -> usize {
        self.counts.peak.load(std::sync::atomic::Ordering::SeqCst)
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
