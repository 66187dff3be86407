//! A real server on 127.0.0.1 for each test, and the helpers every test file shares.
//!
//! The three-binding harness lives beside it: [`bindings`] (one client over gRPC, JSON-RPC and
//! HTTP+JSON), [`failure`] (errors reduced to what every binding can say, checked against the
//! spec's mapping table) and [`normalise`] (results with server-chosen ids and timestamps
//! normalised away, for comparing runs step by step). [`webhook`] holds a push receiver;
//! [`raw_http`] speaks HTTP/1.1 by hand.
#![allow(dead_code)]

pub mod bindings;
pub mod certs;
pub mod failure;
pub mod fleet;
pub mod nginx;
pub mod normalise;
pub mod process;
pub mod raw_http;
pub mod redis;
pub mod webhook;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use a2a_server::agent::demo::DemoAgent;
use a2a_server::agent::{AgentExecutor, text_part};
use a2a_server::core::{Core, CoreSettings};
use a2a_server::proto::a2a_service_client::A2aServiceClient;
use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{
    Message, Role, SendMessageConfiguration, SendMessageRequest, StreamResponse, Task, TaskState, part,
    send_message_response,
};
use a2a_server::server::{ConnectionSettings, Running, Server, Tls};
use a2a_server::transport::http::HttpSettings;
use tonic::transport::Channel;
use tonic_types::StatusExt;

/// The longest any awaited event may take before a test fails instead of hanging.
pub const PATIENCE: Duration = Duration::from_secs(30);

pub struct TestServer {
    pub addr: SocketAddr,
    pub core: Arc<Core>,
    /// Stops the server when the test drops it.
    running: Running,
}

/// What a [`TestServer`] is started with; every part has a default (the demo agent, default
/// core and HTTP settings, no CORS origins).
///
/// ```ignore
/// let server = TestServer::builder().settings(settings).cors([ORIGIN]).start().await;
/// ```
pub struct TestServerBuilder {
    agent: Arc<dyn AgentExecutor>,
    settings: CoreSettings,
    cors_origins: Vec<String>,
    http: HttpSettings,
    auth: Option<Arc<a2a_server::auth::Authenticator>>,
    max_connection_age: Option<Duration>,
    connections: Option<ConnectionSettings>,
    tls: Option<Arc<Tls>>,
}

impl TestServerBuilder {
    /// The connection cap and timeouts.
    pub fn connections(mut self, settings: ConnectionSettings) -> Self {
        self.connections = Some(settings);
        self
    }

    /// TLS on the port.
    pub fn tls(mut self, tls: Arc<Tls>) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Authentication on, with these credentials.
    pub fn auth(mut self, auth: a2a_server::auth::Authenticator) -> Self {
        self.auth = Some(Arc::new(auth));
        self
    }

    /// GOAWAY on every connection after `age`.
    pub fn max_connection_age(mut self, age: Duration) -> Self {
        self.max_connection_age = Some(age);
        self
    }

    /// The agent behind the server (the card stays the demo agent's).
    pub fn agent(mut self, agent: impl AgentExecutor + 'static) -> Self {
        self.agent = Arc::new(agent);
        self
    }

    pub fn settings(mut self, settings: CoreSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Origins allowed by CORS.
    pub fn cors<S: Into<String>>(mut self, origins: impl IntoIterator<Item = S>) -> Self {
        self.cors_origins = origins.into_iter().map(Into::into).collect();
        self
    }

    pub fn http(mut self, http: HttpSettings) -> Self {
        self.http = http;
        self
    }

    /// Binds 127.0.0.1 on a free port and serves until the [`TestServer`] is dropped.
    pub async fn start(self) -> TestServer {
        serve(self).await
    }
}

/// The one place a test server is wired: the library's own [`Server`] builder on 127.0.0.1.
async fn serve(builder: TestServerBuilder) -> TestServer {
    let TestServerBuilder { agent, settings, cors_origins, http, auth, max_connection_age, connections, tls } =
        builder;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let mut server = Server::new(agent, DemoAgent::card())
        .settings(settings)
        .cors_origins(cors_origins)
        .http(http)
        .max_connection_age(max_connection_age);
    if let Some(auth) = auth {
        server = server.auth(auth);
    }
    if let Some(connections) = connections {
        server = server.connections(connections);
    }
    if let Some(tls) = tls {
        server = server.tls(tls);
    }
    let running = server.start(listener).await.expect("start");
    TestServer { addr: running.local_addr(), core: running.core().clone(), running }
}

impl TestServer {
    /// A server with every default: the demo agent, default settings.
    pub async fn start() -> Self {
        Self::builder().start().await
    }

    /// A server with some parts of its own.
    pub fn builder() -> TestServerBuilder {
        TestServerBuilder {
            agent: Arc::new(DemoAgent),
            settings: CoreSettings::default(),
            cors_origins: Vec::new(),
            http: HttpSettings::default(),
            auth: None,
            max_connection_age: None,
            connections: None,
            tls: None,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `https://127.0.0.1:PORT`, for a server with TLS.
    pub fn https_url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// A new HTTP/2 connection to the server.
    pub async fn channel(&self) -> Channel {
        Channel::from_shared(self.url()).expect("url").connect().await.expect("connect")
    }

    /// An A2A client on its own connection.
    pub async fn client(&self) -> A2aServiceClient<Channel> {
        A2aServiceClient::new(self.channel().await)
    }

    /// Waits (event-driven polling of a counter the core exposes) until `check` holds.
    pub async fn wait_until(&self, what: &str, check: impl Fn(&Core) -> bool) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while !check(&self.core) {
            assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

pub fn user_message(text: &str) -> Message {
    Message {
        message_id: uuid::Uuid::new_v4().to_string(),
        role: Role::User as i32,
        parts: vec![text_part(text)],
        ..Default::default()
    }
}

pub fn send(text: &str) -> SendMessageRequest {
    SendMessageRequest { message: Some(user_message(text)), ..Default::default() }
}

pub fn send_returning_immediately(text: &str) -> SendMessageRequest {
    SendMessageRequest {
        message: Some(user_message(text)),
        configuration: Some(SendMessageConfiguration { return_immediately: true, ..Default::default() }),
        ..Default::default()
    }
}

pub fn follow_up(task: &Task, text: &str) -> SendMessageRequest {
    let mut message = user_message(text);
    message.task_id = task.id.clone();
    SendMessageRequest { message: Some(message), ..Default::default() }
}

/// SendMessage that must answer with a task; the task.
pub async fn send_task(client: &mut A2aServiceClient<Channel>, request: SendMessageRequest) -> Task {
    match client.send_message(request).await.expect("send").into_inner().payload {
        Some(send_message_response::Payload::Task(task)) => task,
        other => panic!("expected a task, got {other:?}"),
    }
}

pub fn state(task: &Task) -> TaskState {
    TaskState::try_from(task.status.as_ref().map(|s| s.state).unwrap_or(0)).unwrap_or(TaskState::Unspecified)
}

/// The state a stream item moves the task to, if any.
pub fn item_state(item: &StreamResponse) -> Option<TaskState> {
    match &item.payload {
        Some(Payload::Task(task)) => Some(state(task)),
        Some(Payload::StatusUpdate(update)) => {
            TaskState::try_from(update.status.as_ref().map(|s| s.state).unwrap_or(0)).ok()
        }
        _ => None,
    }
}

/// The A2A 1.1 generation an item carries (the Task's or the update's; 0 for a message).
pub fn item_generation(item: &StreamResponse) -> i64 {
    match &item.payload {
        Some(Payload::Task(task)) => task.generation,
        Some(Payload::StatusUpdate(update)) => update.generation,
        Some(Payload::ArtifactUpdate(update)) => update.generation,
        _ => 0,
    }
}

/// The texts of an artifact update's parts.
pub fn chunk_texts(item: &StreamResponse) -> Vec<String> {
    match &item.payload {
        Some(Payload::ArtifactUpdate(update)) => texts(&update.artifact.as_ref().expect("artifact").parts),
        _ => Vec::new(),
    }
}

pub fn texts(parts: &[a2a_server::proto::Part]) -> Vec<String> {
    parts
        .iter()
        .filter_map(|p| match &p.content {
            Some(part::Content::Text(t)) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

/// Every text in every artifact of a task, in order.
pub fn artifact_texts(task: &Task) -> Vec<String> {
    task.artifacts.iter().flat_map(|a| texts(&a.parts)).collect()
}

/// Reads a stream to its end (failing the test if that takes longer than [`PATIENCE`]).
pub async fn collect(
    mut stream: tonic::Streaming<StreamResponse>,
) -> Result<Vec<StreamResponse>, tonic::Status> {
    let mut items = Vec::new();
    loop {
        match tokio::time::timeout(PATIENCE, stream.message()).await.expect("stream stalled") {
            Ok(Some(item)) => items.push(item),
            Ok(None) => return Ok(items),
            Err(status) => return Err(status),
        }
    }
}

/// The next item of a stream (failing the test if it does not come).
pub async fn next(stream: &mut tonic::Streaming<StreamResponse>) -> Option<StreamResponse> {
    tokio::time::timeout(PATIENCE, stream.message()).await.expect("stream stalled").expect("stream error")
}

/// Waits until the next status timestamp will differ from the last one. Timestamps are whole
/// milliseconds (spec §5.6.1), so tasks that change within one tie in ListTasks' newest-first
/// order (and are then ordered by id); a test asserting that order waits this out.
pub async fn next_millisecond() {
    tokio::time::sleep(Duration::from_millis(2)).await;
}

/// Asserts the status code and the A2A ErrorInfo (domain and reason) of an error.
pub fn assert_a2a_error(status: &tonic::Status, code: tonic::Code, reason: &str) {
    assert_eq!(status.code(), code, "code of {status:?}");
    let details = status.get_error_details();
    let info = details.error_info().unwrap_or_else(|| panic!("no ErrorInfo in {status:?}"));
    assert_eq!(info.reason, reason, "reason of {status:?}");
    assert!(!info.domain.is_empty());
}

/// One Server-Sent Event.
#[derive(Debug, Clone, PartialEq)]
pub struct SseEvent {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
}

impl SseEvent {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.data)
            .unwrap_or_else(|e| panic!("SSE data is not JSON ({e}): {}", self.data))
    }
}

/// Reads SSE events from a response as they arrive.
pub struct SseReader {
    body: std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buffer: String,
}

impl SseReader {
    pub fn new(response: reqwest::Response) -> Self {
        let content_type = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
        assert!(content_type.starts_with("text/event-stream"), "not SSE: {content_type}");
        Self { body: Box::pin(response.bytes_stream()), buffer: String::new() }
    }

    /// The next event (comments skipped), or `None` when the server closed the stream.
    pub async fn next(&mut self) -> Option<SseEvent> {
        use futures::StreamExt;
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut event = SseEvent { id: None, event: None, data: String::new() };
                let mut has_data = false;
                for line in block.lines() {
                    let (field, value) = line.split_once(':').unwrap_or((line, ""));
                    let value = value.strip_prefix(' ').unwrap_or(value);
                    match field {
                        "id" => event.id = Some(value.to_owned()),
                        "event" => event.event = Some(value.to_owned()),
                        "data" => {
                            if has_data {
                                event.data.push('\n');
                            }
                            event.data.push_str(value);
                            has_data = true;
                        }
                        _ => {}
                    }
                }
                if has_data {
                    return Some(event);
                }
            }
            let chunk = tokio::time::timeout(PATIENCE, self.body.next()).await.expect("SSE stalled")?;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk.expect("SSE body")));
        }
    }

    /// Every remaining event, until the server closes the stream.
    pub async fn collect(mut self) -> Vec<SseEvent> {
        let mut events = Vec::new();
        while let Some(event) = self.next().await {
            events.push(event);
        }
        events
    }
}

/// Sends `request` and reads its answer as JSON, whatever the status (failing the test if there
/// is no answer or it is not JSON).
pub async fn json_answer(request: reqwest::RequestBuilder) -> serde_json::Value {
    let response = request.send().await.expect("an answer");
    response.json().await.expect("a JSON answer")
}

/// A JSON-RPC request body.
pub fn rpc(id: i64, method: &str, params: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A ProtoJSON user message.
pub fn json_message(text: &str) -> serde_json::Value {
    serde_json::json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER", "parts": [{"text": text}]})
}

/// The state name of a ProtoJSON StreamResponse / Task / status update, if it carries one.
pub fn json_state(item: &serde_json::Value) -> Option<String> {
    let status = item
        .get("task")
        .and_then(|t| t.get("status"))
        .or_else(|| item.get("statusUpdate").and_then(|u| u.get("status")))
        .or_else(|| item.get("status"))?;
    status.get("state").and_then(|s| s.as_str()).map(str::to_owned)
}

/// The text parts of a ProtoJSON artifactUpdate.
pub fn json_chunks(item: &serde_json::Value) -> Vec<String> {
    item.pointer("/artifactUpdate/artifact/parts")
        .and_then(|p| p.as_array())
        .map(|parts| {
            parts.iter().filter_map(|p| p.get("text").and_then(|t| t.as_str()).map(str::to_owned)).collect()
        })
        .unwrap_or_default()
}

/// Asserts a JSON-RPC error response: code, and the ErrorInfo reason first in `data`.
pub fn assert_rpc_error(body: &serde_json::Value, code: i64, reason: &str) {
    let error = body.get("error").unwrap_or_else(|| panic!("not an error: {body}"));
    assert_eq!(error["code"], code, "{body}");
    assert_eq!(error["data"][0]["@type"], "type.googleapis.com/google.rpc.ErrorInfo", "{body}");
    assert_eq!(error["data"][0]["reason"], reason, "{body}");
    assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()));
    let keys: Vec<_> = error.as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, ["code", "message", "data"], "only code, message and data");
}

/// Asserts an HTTP+JSON error: status, `google.rpc.Status` body and the ErrorInfo reason.
pub async fn assert_http_error(response: reqwest::Response, status: u16, reason: &str) -> serde_json::Value {
    assert_eq!(response.status().as_u16(), status);
    let content_type = response.headers().get("content-type").unwrap().to_str().unwrap().to_owned();
    assert!(content_type.contains("json"), "{content_type}");
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], status, "{body}");
    assert!(body["error"]["status"].as_str().is_some(), "{body}");
    assert_eq!(body["error"]["details"][0]["reason"], reason, "{body}");
    assert_eq!(body["error"]["details"][0]["domain"], "a2a-protocol.org", "{body}");
    body
}
