//! The whole server in-process: every route on one port (gRPC, grpc-web, JSON-RPC, HTTP+JSON,
//! the v0.3 shims, the card, the dashboard) with authentication on, built once per process and
//! driven with `tower::ServiceExt::oneshot` on a current-thread runtime.
//!
//! A fuzz input reaches live tasks through placeholders: `$LIVE` becomes the id of a task
//! created for this input in INPUT_REQUIRED (canceled afterwards, so none accumulate) and
//! `$DONE` the id of a completed one. Unless the input sends its own `x-api-key` or
//! `authorization`, the request carries the harness's API key (principal `fuzzer`, any tenant).
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use a2a_server::agent::demo::DemoAgent;
use a2a_server::auth::{Authenticator, hash_hex};
use a2a_server::core::CoreSettings;
use a2a_server::fuzzing;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, Uri, header};
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::runtime::Runtime;
use tower::ServiceExt;

use crate::agent::QuickAgent;

/// The API key every request carries unless it brings its own credential.
pub const API_KEY: &str = "fuzz-key";
/// The HS256 secret of the harness's JWT issuer (`iss` `fuzz`, `aud` `a2a`).
pub const JWT_SECRET: &str = "fuzz-secret-that-is-long-enough-for-hs256";

/// Finished tasks the store keeps: enough to look some up, few enough that ListTasks stays
/// cheap however long the run.
const MAX_FINISHED: usize = 1000;

/// How long a streaming response may stay silent before the harness stops reading it (a
/// subscription to a live task never ends by itself).
const STREAM_IDLE: Duration = Duration::from_millis(50);

/// How long a unary response may take before it counts as a hang.
const UNARY_PATIENCE: Duration = Duration::from_secs(10);

/// The server's longest GetTask long-poll here.
const LONG_POLL: Duration = Duration::from_millis(20);

/// The most response bytes read (a bound on a runaway stream).
const MAX_RESPONSE: usize = 16 << 20;

/// The process's server.
pub struct Harness {
    runtime: Runtime,
    router: axum::Router,
}

static HARNESS: LazyLock<Harness> = LazyLock::new(Harness::new);

/// A response, read whole or up to where a stream went quiet.
#[derive(Debug)]
pub struct Reply {
    /// The HTTP status.
    pub status: StatusCode,
    /// The response headers.
    pub headers: HeaderMap,
    /// The body bytes read.
    pub body: Bytes,
    /// HTTP trailers, if any came.
    pub trailers: Option<HeaderMap>,
    /// Whether the body ended (false: the harness stopped reading a quiet stream).
    pub complete: bool,
}

impl Harness {
    fn new() -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        let auth = format!(
            "[[api_key]]\nsha256 = \"{}\"\nprincipal = \"fuzzer\"\ntenants = [\"*\"]\n\n\
             [[jwt]]\nissuer = \"fuzz\"\naudiences = [\"a2a\"]\nalgorithms = [\"HS256\"]\n\
             secret = \"{JWT_SECRET}\"\ntenants_claim = \"tenants\"\n",
            hash_hex(API_KEY)
        );
        let auth =
            Authenticator::new(toml::from_str(&auth).expect("the auth file parses")).expect("valid auth");
        let settings = CoreSettings {
            extended_card: Some(DemoAgent::card()),
            // A GetTask naming a generation the task has not reached waits for it (A2A dev-1.1
            // long-poll), 30 s by default: past libFuzzer's timeout, where the wait is by
            // design. Kept short, its end is still exercised.
            max_long_poll: LONG_POLL,
            ..CoreSettings::default()
        };
        let router = runtime
            .block_on(fuzzing::router(
                Arc::new(QuickAgent),
                DemoAgent::card(),
                settings,
                Some(Arc::new(auth)),
                MAX_FINISHED,
            ))
            .expect("the router builds");
        Self { runtime, router }
    }

    /// The process's harness (built on first use).
    pub fn get() -> &'static Harness {
        &HARNESS
    }

    /// Sends `request` and reads its response.
    pub fn send(&self, request: Request<Body>) -> Reply {
        self.runtime.block_on(self.exchange(request))
    }

    async fn exchange(&self, request: Request<Body>) -> Reply {
        let response = self.router.clone().oneshot(request).await.unwrap_or_else(|never| match never {});
        let (parts, mut body) = response.into_parts();
        let content_type = parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
        let streaming = content_type
            .is_some_and(|ct| ct.starts_with("text/event-stream") || ct.starts_with("application/grpc"));
        let patience = if streaming { STREAM_IDLE } else { UNARY_PATIENCE };
        let (mut data, mut trailers, mut complete) = (BytesMut::new(), None, false);
        while data.len() <= MAX_RESPONSE {
            match tokio::time::timeout(patience, body.frame()).await {
                Ok(Some(Ok(frame))) => match frame.into_data() {
                    Ok(chunk) => data.extend_from_slice(&chunk),
                    Err(frame) => trailers = frame.into_trailers().ok(),
                },
                Ok(Some(Err(error))) => panic!("the response body failed: {error}"),
                Ok(None) => {
                    complete = true;
                    break;
                }
                Err(_) if streaming => break,
                Err(_) => panic!("a unary response took longer than {UNARY_PATIENCE:?}: a hang"),
            }
        }
        Reply { status: parts.status, headers: parts.headers, body: data.freeze(), trailers, complete }
    }

    /// Runs one raw request (see [`parse_raw`]) with its placeholders filled in, and returns
    /// it (as sent) with its reply; `None` when `raw` is not a request HTTP could carry.
    pub fn run_raw(&self, raw: &[u8]) -> Option<(Sent, Reply)> {
        let live = contains(raw, b"$LIVE").then(|| self.create_task("input"));
        let done = contains(raw, b"$DONE").then(|| self.create_task("done"));
        let mut filled = raw.to_vec();
        if let Some(id) = &live {
            filled = replace(&filled, b"$LIVE", id.as_bytes());
        }
        if let Some(id) = &done {
            filled = replace(&filled, b"$DONE", id.as_bytes());
        }
        let outcome = parse_raw(&filled).map(|(sent, request)| (sent, self.send(request)));
        if let Some(id) = live {
            self.cancel(&id);
        }
        outcome
    }

    /// Cancels a task (a finished one stays as it is).
    pub fn cancel(&self, id: &str) {
        self.call_jsonrpc("CancelTask", json!({"id": id}));
    }

    /// A JSON-RPC call with the harness's credential; the response object.
    pub fn call_jsonrpc(&self, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let request = Request::post("/")
            .header(header::CONTENT_TYPE, "application/json")
            .header("x-api-key", API_KEY)
            .body(Body::from(body.to_string()))
            .expect("a valid request");
        let reply = self.send(request);
        serde_json::from_slice(&reply.body).expect("JSON-RPC answers JSON")
    }

    /// Creates a task from a message of `text` (see [`QuickAgent`]) and returns its id.
    pub fn create_task(&self, text: &str) -> String {
        // A messageId of its own: a used one would be answered as a retry (or refused).
        static MESSAGES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = MESSAGES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let message =
            json!({"messageId": format!("harness-{n}"), "role": "ROLE_USER", "parts": [{"text": text}]});
        let reply = self.call_jsonrpc("SendMessage", json!({"message": message}));
        reply["result"]["task"]["id"].as_str().unwrap_or_else(|| panic!("no task in {reply}")).to_owned()
    }
}

/// What a request was, for checking its reply.
#[derive(Debug, Clone)]
pub struct Sent {
    /// The method.
    pub method: Method,
    /// The path.
    pub path: String,
    /// The request's Content-Type, if any.
    pub content_type: Option<String>,
}

/// Parses a raw request: `METHOD TARGET` on the first line, then `name: value` header lines,
/// an empty line, and the body (lines end with `\n` or `\r\n`). `None` when the head is not one
/// HTTP could carry (hyper refuses such requests before any of the server's code runs). The
/// harness's API key is added unless the request names a credential of its own.
pub fn parse_raw(raw: &[u8]) -> Option<(Sent, Request<Body>)> {
    let (head, body) =
        match find(raw, b"\n\n").map(|at| (at, 2)).or_else(|| find(raw, b"\r\n\r\n").map(|at| (at, 4))) {
            Some((at, skip)) => (&raw[..at], &raw[at + skip..]),
            None => (raw, &[][..]),
        };
    let head = std::str::from_utf8(head).ok()?;
    let mut lines = head.lines();
    let (method, target) = lines.next()?.split_once(' ')?;
    let method = Method::from_bytes(method.as_bytes()).ok()?;
    let uri: Uri = target.trim_end().parse().ok()?;
    uri.path().starts_with('/').then_some(())?;
    let mut builder = Request::builder().method(method.clone()).uri(uri.clone());
    let mut credential = false;
    for line in lines {
        let (name, value) = line.split_once(':')?;
        let name = HeaderName::from_bytes(name.trim().as_bytes()).ok()?;
        let value = HeaderValue::from_str(value.trim()).ok()?;
        credential |= name == header::AUTHORIZATION || name.as_str() == "x-api-key";
        builder = builder.header(name, value);
    }
    if !credential {
        builder = builder.header("x-api-key", API_KEY);
    }
    let request = builder.body(Body::from(body.to_vec())).ok()?;
    let content_type =
        request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_owned);
    Some((Sent { method, path: uri.path().to_owned(), content_type }, request))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    find(haystack, needle).is_some()
}

fn replace(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut rest = haystack;
    while let Some(at) = find(rest, needle) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(with);
        rest = &rest[at + needle.len()..];
    }
    out.extend_from_slice(rest);
    out
}
