//! The client side of A2A: calls to an *upstream* agent that this server fronts
//! (`--agent a2a --upstream URL`, [`crate::agent::relay`]).
//!
//! Five operations are all a relay needs: send (streaming or not), subscribe, get, cancel, and
//! reading the card. Each binding answers them in v1.0's generated types, so the relay never
//! sees a wire form: `jsonrpc.rs` (v1.0 ProtoJSON, or v0.3 JSON rewritten by the same
//! [`convert`](crate::transport::v03::convert) the v0.3 shim uses, read backwards), `rest.rs`
//! (HTTP+JSON, v1.0), `http.rs` (what those two share), `grpc.rs` (the generated tonic client),
//! `sse.rs` (the event framing), `card.rs` (either card version).
//!
//! This module sits beside the transports, not under the core: it is a client, used only by
//! the relay agent, and it knows the wire forms the way `transport/` does.
pub mod card;
mod grpc;
mod http;
mod jsonrpc;
mod rest;
pub mod sse;

use std::pin::Pin;
use std::time::Duration;

use futures::Stream;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

pub use card::{Endpoint, UpstreamBinding, UpstreamCard, UpstreamVersion};

use crate::proto::{SendMessageRequest, StreamResponse, Task};

/// Settings of the upstream client, from `--upstream*` flags.
#[derive(Debug, Clone)]
pub struct UpstreamSettings {
    /// The card's URL, or the endpoint's when `binding` is forced.
    pub url: String,
    /// A binding to use instead of the card's preference (`--upstream-binding`); `url` is then
    /// the endpoint itself.
    pub binding: Option<UpstreamBinding>,
    /// With a forced binding: the version it speaks (`--upstream-version`).
    pub version: UpstreamVersion,
    /// Headers sent on every upstream call (`--upstream-header`): its credentials.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Connecting, and a unary call's whole answer (`--upstream-timeout-ms`).
    pub call_timeout: Duration,
    /// How long a task whose upstream went away keeps trying to reach it again before it fails
    /// (`--upstream-retry-secs`).
    pub retry_window: Duration,
    /// How often a task is read while the upstream has no stream to follow.
    pub poll_interval: Duration,
    /// The largest event or answer read from the upstream.
    pub max_event_bytes: usize,
    /// PEM of the CA that signs the upstream's certificate (else the system's roots).
    pub tls_ca_pem: Option<Vec<u8>>,
    /// PEMs of this server's client certificate and its key, for an upstream that wants mTLS.
    pub tls_identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl Default for UpstreamSettings {
    fn default() -> Self {
        Self {
            url: String::new(),
            binding: None,
            version: UpstreamVersion::V10,
            headers: Vec::new(),
            call_timeout: Duration::from_secs(30),
            retry_window: Duration::from_secs(30),
            poll_interval: Duration::from_millis(500),
            max_event_bytes: 16 << 20,
            tls_ca_pem: None,
            tls_identity: None,
        }
    }
}

/// Why an upstream call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamError {
    /// Not reached, or the connection broke: trying again may succeed.
    #[error("unreachable: {0}")]
    Unreachable(String),
    /// It answered with an error of its own.
    #[error("refused: {0}")]
    Refused(String),
    /// It answered something that is not A2A.
    #[error("invalid answer: {0}")]
    Invalid(String),
}

/// The events of one upstream call, in order; it ends when the upstream ends it.
pub type Events = Pin<Box<dyn Stream<Item = Result<StreamResponse, UpstreamError>> + Send>>;

/// A connected upstream agent.
#[derive(Clone)]
pub struct Upstream {
    endpoint: Endpoint,
    streaming: bool,
    client: Client,
    settings: std::sync::Arc<UpstreamSettings>,
}

#[derive(Clone)]
enum Client {
    JsonRpc(jsonrpc::JsonRpc),
    Rest(rest::Rest),
    Grpc(grpc::Grpc),
}

impl Upstream {
    /// Reads the upstream's card (retrying within the retry window: an upstream may start
    /// after this server) and connects to the interface it chooses. With a forced binding the
    /// URL is the endpoint, and the card is read from its origin's well-known path if it is
    /// there (for the skills); the upstream is then taken to stream.
    pub async fn connect(settings: UpstreamSettings) -> Result<(Self, UpstreamCard), String> {
        let http = http::client(&settings)?;
        let mut headers = HeaderMap::new();
        for (name, value) in &settings.headers {
            headers.append(name.clone(), value.clone());
        }
        let read = match settings.binding {
            None => {
                let card = fetch_card(&http, &headers, &settings.url, &settings).await?;
                let mut read = card::read(&card, None)?;
                // A gRPC interface may name `host:port` alone: it is reached as the card was.
                if !read.endpoint.url.contains("://") {
                    let scheme = if settings.url.starts_with("https://") { "https" } else { "http" };
                    read.endpoint.url = format!("{scheme}://{}", read.endpoint.url);
                }
                read
            }
            Some(binding) => {
                let well_known = url::Url::parse(&settings.url)
                    .and_then(|url| url.join("/.well-known/agent-card.json"))
                    .map_err(|e| format!("--upstream {}: {e}", settings.url))?;
                let once = UpstreamSettings { retry_window: Duration::ZERO, ..settings.clone() };
                let card = fetch_card(&http, &headers, well_known.as_str(), &once).await.ok();
                // The card's description, skills and streaming, whatever interfaces it lists;
                // without one, the upstream is taken to stream.
                let (card, streaming) =
                    card.and_then(|card| card::describe(&card).ok()).unwrap_or((Default::default(), true));
                let endpoint = Endpoint { url: settings.url.clone(), binding, version: settings.version };
                UpstreamCard { endpoint, streaming, card }
            }
        };
        let settings = std::sync::Arc::new(settings);
        let peer = http::Peer { client: http, headers, settings: settings.clone() };
        let client = match read.endpoint.binding {
            UpstreamBinding::JsonRpc => Client::JsonRpc(jsonrpc::JsonRpc::new(peer, &read.endpoint)),
            UpstreamBinding::HttpJson => Client::Rest(rest::Rest::new(peer, &read.endpoint)),
            UpstreamBinding::Grpc => Client::Grpc(grpc::Grpc::new(&read.endpoint.url, &settings)?),
        };
        let upstream = Self { endpoint: read.endpoint.clone(), streaming: read.streaming, client, settings };
        Ok((upstream, read))
    }

    /// The interface in use.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Whether its streaming calls are used.
    pub fn streams(&self) -> bool {
        self.streaming
    }

    /// The client settings.
    pub fn settings(&self) -> &UpstreamSettings {
        &self.settings
    }

    /// Sends a message: the streaming call's events when the upstream streams, else the one
    /// answer (a Task or Message) as a stream of one.
    pub async fn send(&self, request: SendMessageRequest) -> Result<Events, UpstreamError> {
        match &self.client {
            Client::JsonRpc(c) => c.send(request, self.streaming).await,
            Client::Rest(c) => c.send(request, self.streaming).await,
            Client::Grpc(c) => c.send(request, self.streaming).await,
        }
    }

    /// Follows a task's events (v1.0 begins with the Task; v0.3 with the next event).
    pub async fn subscribe(&self, task_id: &str) -> Result<Events, UpstreamError> {
        match &self.client {
            Client::JsonRpc(c) => c.subscribe(task_id).await,
            Client::Rest(c) => c.subscribe(task_id).await,
            Client::Grpc(c) => c.subscribe(task_id).await,
        }
    }

    /// Reads a task.
    pub async fn get_task(&self, task_id: &str) -> Result<Task, UpstreamError> {
        match &self.client {
            Client::JsonRpc(c) => c.get_task(task_id).await,
            Client::Rest(c) => c.get_task(task_id).await,
            Client::Grpc(c) => c.get_task(task_id).await,
        }
    }

    /// Cancels a task.
    pub async fn cancel(&self, task_id: &str) -> Result<Task, UpstreamError> {
        match &self.client {
            Client::JsonRpc(c) => c.cancel(task_id).await,
            Client::Rest(c) => c.cancel(task_id).await,
            Client::Grpc(c) => c.cancel(task_id).await,
        }
    }
}

/// GETs the card, trying again (every half second) within the retry window while it is
/// unreachable; each try has the call timeout.
async fn fetch_card(
    http: &reqwest::Client,
    headers: &HeaderMap,
    url: &str,
    settings: &UpstreamSettings,
) -> Result<serde_json::Value, String> {
    let deadline = tokio::time::Instant::now() + settings.retry_window;
    loop {
        let answer = http.get(url).headers(headers.clone()).timeout(settings.call_timeout).send().await;
        match answer {
            Ok(response) if response.status().is_success() => {
                return response.json().await.map_err(|e| format!("the agent card at {url}: {e}"));
            }
            Ok(response) => return Err(format!("the agent card at {url}: HTTP {}", response.status())),
            Err(error) if tokio::time::Instant::now() >= deadline => {
                return Err(format!("the agent card at {url} is unreachable: {error}"));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}
