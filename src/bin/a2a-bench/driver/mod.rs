//! The wire drivers: one per A2A binding, behind one small interface, so every scenario runs
//! unchanged on gRPC, JSON-RPC or HTTP+JSON ([`json`]).
//!
//! The generated proto types are the model on every binding (the JSON bindings carry ProtoJSON
//! of the same messages), so a driver hands scenarios `SendMessageResponse` and `StreamResponse`
//! values whatever the wire. Dispatch is by enum rather than trait objects: the hot calls stay
//! unboxed, and adding a binding is one variant plus its match arms in [`Target::connect`],
//! [`Conn`] and [`Sub`].
mod bare;
mod json;

use std::fmt;
use std::time::Duration;

use a2a_server::proto::a2a_service_client::A2aServiceClient;
use a2a_server::proto::{
    CancelTaskRequest, GetTaskRequest, ListTasksRequest, ListTasksResponse, Message, Part, Role,
    SendMessageConfiguration, SendMessageRequest, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, Task, TaskState, part, send_message_response,
};
use tonic::codegen::http::{HeaderName, HeaderValue};
use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue};
use tonic::transport::{Channel, Endpoint};

use crate::BoxError;
pub use bare::UnaryConn;
use json::{Flavor, JsonConn, SseStream, Transport};

/// The A2A protocol bindings a2a-bench can speak (`--binding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Binding {
    /// gRPC (`lf.a2a.v1.A2AService`), over h2c.
    Grpc,
    /// JSON-RPC 2.0 (`POST /`), streaming over SSE; over h2c.
    Jsonrpc,
    /// HTTP+JSON (REST), streaming over SSE; over h2c.
    Rest,
}

impl fmt::Display for Binding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Binding::Grpc => "grpc",
            Binding::Jsonrpc => "jsonrpc",
            Binding::Rest => "rest",
        })
    }
}

/// An A2A endpoint: where it is and which binding to speak to it.
#[derive(Debug, Clone)]
pub struct Target {
    pub binding: Binding,
    /// Base URL, e.g. `http://127.0.0.1:50051`.
    pub url: String,
    /// A credential every call carries (a server started with `--auth`).
    pub credential: Option<Credential>,
}

/// One request header (gRPC metadata) carrying a credential: an API key in its header, or
/// `authorization: Bearer <JWT>`.
#[derive(Debug, Clone)]
pub struct Credential {
    pub header: HeaderName,
    pub value: HeaderValue,
}

impl Credential {
    pub fn new(header: &str, value: &str) -> Result<Self, BoxError> {
        Ok(Self { header: HeaderName::try_from(header)?, value: HeaderValue::try_from(value)? })
    }
}

impl Target {
    /// A new connection. Each call opens its own transport connection (for gRPC one HTTP/2
    /// connection), so scenarios can spread streams over several of them: a server caps the
    /// concurrent streams per connection (ours at 10,000).
    pub async fn connect(&self) -> Result<Conn, BoxError> {
        let channel = Endpoint::from_shared(self.url.clone())?
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(5))
            .connect()
            .await
            .map_err(|e| format!("cannot connect to {}: {e}", self.url))?;
        let credential = self.credential.clone();
        let json = |flavor| {
            Conn::Json(JsonConn {
                flavor,
                transport: Transport::Channel(channel.clone()),
                base: self.base(),
                credential: credential.clone(),
            })
        };
        Ok(match self.binding {
            Binding::Grpc => Conn::Grpc(GrpcConn::new(channel.clone(), credential.as_ref())?),
            Binding::Jsonrpc => json(Flavor::JsonRpc),
            Binding::Rest => json(Flavor::Rest),
        })
    }

    fn base(&self) -> String {
        self.url.trim_end_matches('/').to_owned()
    }

    /// `count` connections.
    pub async fn connect_many(&self, count: usize) -> Result<Vec<Conn>, BoxError> {
        let mut conns = Vec::with_capacity(count);
        for _ in 0..count.max(1) {
            conns.push(self.connect().await?);
        }
        Ok(conns)
    }
}

/// One connection to an endpoint. Cheap to clone (clones share the connection).
#[derive(Clone)]
pub enum Conn {
    Grpc(GrpcConn),
    Json(JsonConn),
}

/// A gRPC connection, and the credential metadata each call carries.
#[derive(Clone)]
pub struct GrpcConn {
    client: A2aServiceClient<Channel>,
    credential: Option<(AsciiMetadataKey, AsciiMetadataValue)>,
}

impl GrpcConn {
    fn new(channel: Channel, credential: Option<&Credential>) -> Result<Self, BoxError> {
        Ok(Self { client: A2aServiceClient::new(channel), credential: Self::metadata(credential)? })
    }

    /// The credential as gRPC metadata.
    fn metadata(
        credential: Option<&Credential>,
    ) -> Result<Option<(AsciiMetadataKey, AsciiMetadataValue)>, BoxError> {
        Ok(match credential {
            Some(c) => Some((c.header.as_str().parse()?, AsciiMetadataValue::try_from(c.value.as_bytes())?)),
            None => None,
        })
    }

    /// A client for one call (clones share the connection) and the request with metadata.
    fn call<T>(&self, message: T) -> (A2aServiceClient<Channel>, tonic::Request<T>) {
        let mut request = tonic::Request::new(message);
        if let Some((key, value)) = &self.credential {
            request.metadata_mut().insert(key.clone(), value.clone());
        }
        (self.client.clone(), request)
    }
}

impl Conn {
    /// SendMessage, failing after [`CALL_TIMEOUT`].
    pub async fn send(&self, request: SendMessageRequest) -> Result<SendMessageResponse, BoxError> {
        let call = async {
            match self {
                Conn::Grpc(grpc) => {
                    let (mut client, request) = grpc.call(request);
                    Ok(client.send_message(request).await?.into_inner())
                }
                Conn::Json(conn) => conn.send(&request).await,
            }
        };
        bounded("SendMessage", call).await
    }

    /// SendStreamingMessage. Returns once the server has answered the call; the items follow
    /// on the stream.
    pub async fn send_streaming(&self, request: SendMessageRequest) -> Result<Sub, BoxError> {
        let call = async {
            match self {
                Conn::Grpc(grpc) => {
                    let (mut client, request) = grpc.call(request);
                    Ok(Sub::Grpc(client.send_streaming_message(request).await?.into_inner()))
                }
                Conn::Json(conn) => Ok(Sub::Sse(conn.send_streaming(&request).await?)),
            }
        };
        bounded("SendStreamingMessage", call).await
    }

    /// SendMessage whose answer must be a Task.
    pub async fn send_for_task(&self, request: SendMessageRequest) -> Result<Task, BoxError> {
        match self.send(request).await?.payload {
            Some(send_message_response::Payload::Task(task)) => Ok(task),
            other => Err(format!("SendMessage answered {other:?} instead of a Task").into()),
        }
    }

    /// SubscribeToTask. Returns once the server has answered the call, which (on our server)
    /// means the subscription exists; the first item is then the Task snapshot.
    pub async fn subscribe(&self, task_id: &str) -> Result<Sub, BoxError> {
        let call = async {
            match self {
                Conn::Grpc(grpc) => {
                    let (mut client, request) =
                        grpc.call(SubscribeToTaskRequest { id: task_id.to_owned(), ..Default::default() });
                    Ok(Sub::Grpc(client.subscribe_to_task(request).await?.into_inner()))
                }
                Conn::Json(conn) => Ok(Sub::Sse(conn.subscribe(task_id).await?)),
            }
        };
        bounded("SubscribeToTask", call).await
    }
}

impl Conn {
    /// CancelTask (the answer's Task is not needed).
    pub async fn cancel(&self, task_id: &str) -> Result<(), BoxError> {
        let call = async {
            match self {
                Conn::Grpc(grpc) => {
                    let (mut client, request) =
                        grpc.call(CancelTaskRequest { id: task_id.to_owned(), ..Default::default() });
                    client.cancel_task(request).await.map(drop).map_err(BoxError::from)
                }
                Conn::Json(conn) => conn.cancel(task_id).await,
            }
        };
        bounded("CancelTask", call).await
    }

    /// GetTask (no history).
    pub async fn get_task(&self, task_id: &str) -> Result<Task, BoxError> {
        let call = async {
            match self {
                Conn::Grpc(grpc) => {
                    let request = GetTaskRequest {
                        id: task_id.to_owned(),
                        history_length: Some(0),
                        ..Default::default()
                    };
                    let (mut client, request) = grpc.call(request);
                    Ok(client.get_task(request).await?.into_inner())
                }
                Conn::Json(conn) => conn.get_task(task_id).await,
            }
        };
        bounded("GetTask", call).await
    }

    /// ListTasks: the first page of `page_size` tasks (without artifacts).
    pub async fn list_tasks(&self, page_size: i32) -> Result<ListTasksResponse, BoxError> {
        let request = ListTasksRequest { page_size: Some(page_size), ..Default::default() };
        let call = async {
            match self {
                Conn::Grpc(grpc) => {
                    let (mut client, request) = grpc.call(request);
                    Ok(client.list_tasks(request).await?.into_inner())
                }
                Conn::Json(conn) => conn.list_tasks(&request).await,
            }
        };
        bounded("ListTasks", call).await
    }
}

/// The longest any single call (not a stream's later items) may take: a server that never
/// answers must fail the scenario, not hang the benchmark.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

async fn bounded<T>(what: &str, call: impl Future<Output = Result<T, BoxError>>) -> Result<T, BoxError> {
    tokio::time::timeout(CALL_TIMEOUT, call)
        .await
        .map_err(|_| format!("{what}: no answer within {CALL_TIMEOUT:?}"))?
}

/// An open server stream of `StreamResponse`s.
pub enum Sub {
    Grpc(tonic::Streaming<StreamResponse>),
    Sse(SseStream),
}

impl Sub {
    /// The next item; `None` when the stream ended normally.
    pub async fn next(&mut self) -> Result<Option<StreamResponse>, BoxError> {
        match self {
            Sub::Grpc(stream) => Ok(stream.message().await?),
            Sub::Sse(stream) => stream.next().await,
        }
    }
}

/// A user message with one text part. `id` is the messageId; on the echo path a cheap counter
/// string keeps the client's own CPU use out of the measurement.
pub fn user_message(id: String, text: &str, task_id: Option<&str>) -> Message {
    Message {
        message_id: id,
        role: Role::User as i32,
        task_id: task_id.unwrap_or_default().to_owned(),
        parts: vec![Part { content: Some(part::Content::Text(text.to_owned())), ..Default::default() }],
        ..Default::default()
    }
}

/// A SendMessage request; `return_immediately` asks for the Task without waiting for the turn.
pub fn send_request(message: Message, return_immediately: bool) -> SendMessageRequest {
    let configuration = return_immediately
        .then(|| SendMessageConfiguration { return_immediately: true, ..Default::default() });
    SendMessageRequest { message: Some(message), configuration, ..Default::default() }
}

/// A message with a fresh random id.
pub fn fresh_message(text: &str, task_id: Option<&str>) -> Message {
    user_message(uuid::Uuid::new_v4().to_string(), text, task_id)
}

/// The state of a task.
pub fn task_state(task: &Task) -> TaskState {
    task_state_of(task.status.as_ref().map(|s| s.state))
}

/// A wire state number as the enum (unknown numbers as UNSPECIFIED).
pub fn task_state_of(state: Option<i32>) -> TaskState {
    TaskState::try_from(state.unwrap_or(0)).unwrap_or(TaskState::Unspecified)
}

/// Whether a state ends the task.
pub fn is_terminal(state: TaskState) -> bool {
    matches!(state, TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected)
}

/// The text parts, in order.
pub fn texts(parts: &[Part]) -> impl Iterator<Item = &str> {
    parts.iter().filter_map(|p| match &p.content {
        Some(part::Content::Text(t)) => Some(t.as_str()),
        _ => None,
    })
}
