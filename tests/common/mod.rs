//! A real server on 127.0.0.1 for each test, and the helpers every test file shares.
#![allow(dead_code)]

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
};
use a2a_server::server;
use a2a_server::task::store::{MemoryStore, Retention};
use tokio::sync::oneshot;
use tonic::transport::Channel;
use tonic_types::StatusExt;

/// The longest any awaited event may take before a test fails instead of hanging.
pub const PATIENCE: Duration = Duration::from_secs(30);

pub struct TestServer {
    pub addr: SocketAddr,
    pub core: Arc<Core>,
    stop: Option<oneshot::Sender<()>>,
}

impl TestServer {
    pub async fn start() -> Self {
        Self::start_with(CoreSettings::default()).await
    }

    pub async fn start_with(settings: CoreSettings) -> Self {
        Self::start_agent(Arc::new(DemoAgent), settings).await
    }

    pub async fn start_agent(agent: Arc<dyn AgentExecutor>, settings: CoreSettings) -> Self {
        let store = Arc::new(MemoryStore::new(Retention::default()));
        let core = Arc::new(Core::new(agent, store, settings));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let app = server::app(core.clone()).await.expect("app");
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(server::serve(listener, app, async {
            let _ = stopped.await;
        }));
        Self { addr, core, stop: Some(stop) }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
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

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
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

/// Asserts the status code and the A2A ErrorInfo (domain and reason) of an error.
pub fn assert_a2a_error(status: &tonic::Status, code: tonic::Code, reason: &str) {
    assert_eq!(status.code(), code, "code of {status:?}");
    let details = status.get_error_details();
    let info = details.error_info().unwrap_or_else(|| panic!("no ErrorInfo in {status:?}"));
    assert_eq!(info.reason, reason, "reason of {status:?}");
    assert!(!info.domain.is_empty());
}
