//! One caller with one credential over four bindings — gRPC, grpc-web, JSON-RPC and HTTP+JSON —
//! for each of the 11 A2A operations, answers reduced to ProtoJSON (a streaming call to its
//! first item) and errors to their ErrorInfo reason plus what the binding said around it.
// Shared by several test files, each using part of it.
#![allow(dead_code)]
use std::collections::BTreeMap;

use a2a_server::proto::{
    AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse, ListTasksRequest, ListTasksResponse, SendMessageRequest,
    SendMessageResponse, StreamResponse, SubscribeToTaskRequest, Task, TaskPushNotificationConfig,
};
use a2a_server::protojson::encode;
use prost::Message as _;
use reqwest::Method;
use serde_json::{Value, json};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::metadata::{MetadataKey, MetadataValue};
use tonic::transport::Channel;
use tonic_types::StatusExt;

use crate::common::SseReader;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    Grpc,
    GrpcWeb,
    JsonRpc,
    HttpJson,
}

pub const BINDINGS: [Binding; 4] = [Binding::Grpc, Binding::GrpcWeb, Binding::JsonRpc, Binding::HttpJson];

/// An error as one binding rendered it.
#[derive(Debug, Clone)]
pub struct Fail {
    /// ErrorInfo `reason`.
    pub reason: String,
    /// The gRPC code name, the JSON-RPC code, or the HTTP status, as text.
    pub code: String,
    /// The `WWW-Authenticate` header of an HTTP answer.
    pub challenge: Option<String>,
    /// The error's message.
    pub message: String,
    /// The ErrorInfo metadata.
    pub metadata: BTreeMap<String, String>,
    /// The `Retry-After` header of an HTTP answer.
    pub retry_after: Option<String>,
}

/// What keeps a streaming call open after its first item: dropping it ends the call, as a
/// client that goes away does. Nothing for a unary call.
pub struct Held(Option<Box<dyn std::any::Any + Send>>);

impl Held {
    fn stream(stream: impl std::any::Any + Send) -> Self {
        Self(Some(Box::new(stream)))
    }
}

/// The 11 operations, each with its request.
#[derive(Debug, Clone)]
pub enum Op {
    Send(SendMessageRequest),
    SendStreaming(SendMessageRequest),
    Get(GetTaskRequest),
    List(ListTasksRequest),
    Cancel(CancelTaskRequest),
    Subscribe(SubscribeToTaskRequest),
    CreatePush(TaskPushNotificationConfig),
    GetPush(GetTaskPushNotificationConfigRequest),
    ListPush(ListTaskPushNotificationConfigsRequest),
    DeletePush(DeleteTaskPushNotificationConfigRequest),
    ExtendedCard(GetExtendedAgentCardRequest),
}

impl Op {
    /// Every operation, aimed at `task_id` and its push config `config_id`.
    pub fn every(task_id: &str, config_id: &str) -> Vec<Op> {
        let mut follow_up = crate::common::send_returning_immediately("more");
        follow_up.message.as_mut().expect("a message").task_id = task_id.into();
        let config = TaskPushNotificationConfig {
            task_id: task_id.into(),
            url: "http://127.0.0.1:9/hook".into(),
            ..Default::default()
        };
        vec![
            Op::Send(follow_up.clone()),
            Op::SendStreaming(SendMessageRequest { configuration: None, ..follow_up }),
            Op::Get(GetTaskRequest { id: task_id.into(), ..Default::default() }),
            Op::List(ListTasksRequest::default()),
            Op::Cancel(CancelTaskRequest { id: task_id.into(), ..Default::default() }),
            Op::Subscribe(SubscribeToTaskRequest { id: task_id.into(), ..Default::default() }),
            Op::CreatePush(config),
            Op::GetPush(GetTaskPushNotificationConfigRequest {
                task_id: task_id.into(),
                id: config_id.into(),
                ..Default::default()
            }),
            Op::ListPush(ListTaskPushNotificationConfigsRequest {
                task_id: task_id.into(),
                ..Default::default()
            }),
            Op::DeletePush(DeleteTaskPushNotificationConfigRequest {
                task_id: task_id.into(),
                id: config_id.into(),
                ..Default::default()
            }),
            Op::ExtendedCard(GetExtendedAgentCardRequest::default()),
        ]
    }

    pub fn method(&self) -> &'static str {
        match self {
            Op::Send(_) => "SendMessage",
            Op::SendStreaming(_) => "SendStreamingMessage",
            Op::Get(_) => "GetTask",
            Op::List(_) => "ListTasks",
            Op::Cancel(_) => "CancelTask",
            Op::Subscribe(_) => "SubscribeToTask",
            Op::CreatePush(_) => "CreateTaskPushNotificationConfig",
            Op::GetPush(_) => "GetTaskPushNotificationConfig",
            Op::ListPush(_) => "ListTaskPushNotificationConfigs",
            Op::DeletePush(_) => "DeleteTaskPushNotificationConfig",
            Op::ExtendedCard(_) => "GetExtendedAgentCard",
        }
    }

    fn streaming(&self) -> bool {
        matches!(self, Op::SendStreaming(_) | Op::Subscribe(_))
    }

    fn params(&self) -> Value {
        match self {
            Op::Send(r) | Op::SendStreaming(r) => encode(r),
            Op::Get(r) => encode(r),
            Op::List(r) => encode(r),
            Op::Cancel(r) => encode(r),
            Op::Subscribe(r) => encode(r),
            Op::CreatePush(r) => encode(r),
            Op::GetPush(r) => encode(r),
            Op::ListPush(r) => encode(r),
            Op::DeletePush(r) => encode(r),
            Op::ExtendedCard(r) => encode(r),
        }
    }

    /// The HTTP+JSON method, path (tenant prefix included) and body.
    fn rest(&self) -> (Method, String, Option<Value>) {
        let params = self.params();
        let tenant =
            params["tenant"].as_str().filter(|t| !t.is_empty()).map(|t| format!("/{t}")).unwrap_or_default();
        let (method, path, body) = match self {
            Op::Send(_) => (Method::POST, "/message:send".to_owned(), Some(params)),
            Op::SendStreaming(_) => (Method::POST, "/message:stream".to_owned(), Some(params)),
            Op::Get(r) => {
                let query = r.history_length.map(|n| format!("?historyLength={n}")).unwrap_or_default();
                (Method::GET, format!("/tasks/{}{query}", r.id), None)
            }
            Op::List(_) => (Method::GET, "/tasks".to_owned(), None),
            Op::Cancel(r) => (Method::POST, format!("/tasks/{}:cancel", r.id), Some(params)),
            Op::Subscribe(r) => (Method::GET, format!("/tasks/{}:subscribe", r.id), None),
            Op::CreatePush(r) => {
                (Method::POST, format!("/tasks/{}/pushNotificationConfigs", r.task_id), Some(params))
            }
            Op::GetPush(r) => {
                (Method::GET, format!("/tasks/{}/pushNotificationConfigs/{}", r.task_id, r.id), None)
            }
            Op::ListPush(r) => (Method::GET, format!("/tasks/{}/pushNotificationConfigs", r.task_id), None),
            Op::DeletePush(r) => {
                (Method::DELETE, format!("/tasks/{}/pushNotificationConfigs/{}", r.task_id, r.id), None)
            }
            Op::ExtendedCard(_) => (Method::GET, "/extendedAgentCard".to_owned(), None),
        };
        (method, format!("{tenant}{path}"), body)
    }
}

/// Calls one server over one binding with one credential (header name and value), or none;
/// [`Caller::and`] adds more headers, to send a credential header twice.
#[derive(Clone)]
pub struct Caller {
    pub binding: Binding,
    base: String,
    channel: Channel,
    http: reqwest::Client,
    credential: Option<(String, String)>,
    /// Headers sent after the credential.
    extra: Vec<(String, String)>,
}

impl Caller {
    /// A caller of the server at `base` (`http://IP:PORT`), gRPC over `channel`.
    pub fn new(base: String, binding: Binding, channel: Channel) -> Self {
        Self { binding, base, channel, http: reqwest::Client::new(), credential: None, extra: Vec::new() }
    }

    /// The same caller with its HTTP calls made by `http` (a TLS client, say).
    pub fn with_http(&self, http: reqwest::Client) -> Self {
        Self { http, ..self.clone() }
    }

    /// The same caller with `header: value` on every call.
    pub fn with(&self, header: &str, value: &str) -> Self {
        Self { credential: Some((header.to_owned(), value.to_owned())), ..self.clone() }
    }

    /// The same caller with `header: value` added after its other headers (a repeat of one of
    /// them goes on the wire as a second header).
    pub fn and(&self, header: &str, value: &str) -> Self {
        let mut extra = self.extra.clone();
        extra.push((header.to_owned(), value.to_owned()));
        Self { extra, ..self.clone() }
    }

    pub async fn call(&self, op: &Op) -> Result<Value, Fail> {
        self.open(op).await.map(|(value, _)| value)
    }

    /// Like [`Caller::call`], and a streaming call stays open until the [`Held`] is dropped.
    pub async fn open(&self, op: &Op) -> Result<(Value, Held), Fail> {
        match self.binding {
            Binding::Grpc | Binding::GrpcWeb => match op {
                Op::Send(r) => self.proto::<_, SendMessageResponse>(op, r).await,
                Op::SendStreaming(r) => self.proto::<_, StreamResponse>(op, r).await,
                Op::Get(r) => self.proto::<_, Task>(op, r).await,
                Op::List(r) => self.proto::<_, ListTasksResponse>(op, r).await,
                Op::Cancel(r) => self.proto::<_, Task>(op, r).await,
                Op::Subscribe(r) => self.proto::<_, StreamResponse>(op, r).await,
                Op::CreatePush(r) => self.proto::<_, TaskPushNotificationConfig>(op, r).await,
                Op::GetPush(r) => self.proto::<_, TaskPushNotificationConfig>(op, r).await,
                Op::ListPush(r) => self.proto::<_, ListTaskPushNotificationConfigsResponse>(op, r).await,
                Op::DeletePush(r) => self.proto::<_, ()>(op, r).await,
                Op::ExtendedCard(r) => self.proto::<_, AgentCard>(op, r).await,
            },
            Binding::JsonRpc => self.jsonrpc(op).await,
            Binding::HttpJson => self.rest(op).await,
        }
    }

    async fn proto<Req, Resp>(&self, op: &Op, request: &Req) -> Result<(Value, Held), Fail>
    where
        Req: prost::Message + Clone + Send + Sync + 'static,
        Resp: Reply,
    {
        if self.binding == Binding::GrpcWeb {
            return self.grpc_web::<Resp>(op, request.encode_to_vec()).await;
        }
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        grpc.ready().await.expect("channel ready");
        let path: PathAndQuery = format!("/lf.a2a.v1.A2AService/{}", op.method()).parse().expect("path");
        let mut request = tonic::Request::new(request.clone());
        for (name, value) in self.credential.iter().chain(&self.extra) {
            let key = MetadataKey::from_bytes(name.to_ascii_lowercase().as_bytes()).expect("header name");
            request.metadata_mut().append(key, MetadataValue::try_from(value.as_str()).expect("ASCII"));
        }
        let codec = tonic_prost::ProstCodec::<Req, Resp::Wire>::default();
        if op.streaming() {
            let mut stream =
                grpc.server_streaming(request, path, codec).await.map_err(grpc_fail)?.into_inner();
            match stream.message().await {
                Ok(Some(first)) => Ok((Resp::json(&first), Held::stream(stream))),
                Ok(None) => Ok((Value::Null, Held(None))),
                Err(status) => Err(grpc_fail(status)),
            }
        } else {
            let response = grpc.unary(request, path, codec).await.map_err(grpc_fail)?;
            Ok((Resp::json(response.get_ref()), Held(None)))
        }
    }

    fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        for (name, value) in self.credential.iter().chain(&self.extra) {
            request = request.header(name, value);
        }
        request
    }

    async fn grpc_web<Resp: Reply>(&self, op: &Op, payload: Vec<u8>) -> Result<(Value, Held), Fail> {
        let mut body = vec![0u8];
        body.extend_from_slice(&u32::try_from(payload.len()).expect("small").to_be_bytes());
        body.extend_from_slice(&payload);
        let mut response = self
            .request(Method::POST, &format!("/lf.a2a.v1.A2AService/{}", op.method()))
            .header("content-type", "application/grpc-web+proto")
            .header("x-grpc-web", "1")
            .body(body)
            .send()
            .await
            .expect("grpc-web");
        if let Some(status) = tonic::Status::from_header_map(response.headers())
            && status.code() != tonic::Code::Ok
        {
            return Err(grpc_fail(status));
        }
        let mut buffer = Vec::new();
        loop {
            if buffer.len() >= 5 {
                let length = u32::from_be_bytes(buffer[1..5].try_into().expect("4 bytes")) as usize;
                if buffer.len() >= 5 + length {
                    let frame = buffer[5..5 + length].to_vec();
                    if buffer[0] == 0 {
                        let first = Resp::json(&Resp::Wire::decode(frame.as_slice()).expect("a message"));
                        return Ok((first, Held::stream(response)));
                    }
                    let trailers = trailer_map(&frame);
                    return match tonic::Status::from_header_map(&trailers) {
                        Some(status) if status.code() != tonic::Code::Ok => Err(grpc_fail(status)),
                        _ => Ok((Value::Null, Held(None))),
                    };
                }
            }
            match response.chunk().await.expect("grpc-web body") {
                Some(chunk) => buffer.extend_from_slice(&chunk),
                None => panic!("grpc-web body ended without trailers"),
            }
        }
    }

    async fn jsonrpc(&self, op: &Op) -> Result<(Value, Held), Fail> {
        let envelope = json!({"jsonrpc": "2.0", "id": 7, "method": op.method(), "params": op.params()});
        let mut request = self.request(Method::POST, "/").json(&envelope);
        if op.streaming() {
            request = request.header("accept", "text/event-stream");
        }
        let response = request.send().await.expect("JSON-RPC");
        assert_eq!(response.status(), 200, "JSON-RPC answers with HTTP 200, errors included");
        let challenge = challenge(&response);
        let retry_after = retry_after(&response);
        let (body, held) = if is_sse(&response) {
            let mut events = SseReader::new(response);
            let first = events.next().await.expect("a first event").json();
            (first, Held::stream(events))
        } else {
            (response.json::<Value>().await.expect("JSON"), Held(None))
        };
        assert_eq!(body["id"], 7, "{body}");
        match body.get("error") {
            Some(error) => Err(Fail {
                reason: error["data"][0]["reason"].as_str().expect("an ErrorInfo reason").to_owned(),
                code: error["code"].to_string(),
                challenge,
                message: error["message"].as_str().unwrap_or_default().to_owned(),
                metadata: metadata_of(&error["data"]),
                retry_after,
            }),
            None => Ok((body["result"].clone(), held)),
        }
    }

    async fn rest(&self, op: &Op) -> Result<(Value, Held), Fail> {
        let (method, path, body) = op.rest();
        let mut request = self.request(method, &path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("HTTP+JSON");
        let status = response.status().as_u16();
        let challenge = challenge(&response);
        let retry_after = retry_after(&response);
        if is_sse(&response) {
            let mut events = SseReader::new(response);
            let body = events.next().await.expect("a first event").json();
            return match body.get("error") {
                Some(error) => Err(Fail {
                    reason: reason_of(&error["details"]),
                    code: error["code"].to_string(),
                    challenge,
                    message: error["message"].as_str().unwrap_or_default().to_owned(),
                    metadata: metadata_of(&error["details"]),
                    retry_after,
                }),
                None => Ok((body, Held::stream(events))),
            };
        }
        let body: Value = response.json().await.expect("JSON");
        if (200..300).contains(&status) {
            return Ok((body, Held(None)));
        }
        assert_eq!(body["error"]["code"], status, "{body}");
        let reason = reason_of(&body["error"]["details"]);
        let message = body["error"]["message"].as_str().unwrap_or_default().to_owned();
        let metadata = metadata_of(&body["error"]["details"]);
        Err(Fail { reason, code: status.to_string(), challenge, message, metadata, retry_after })
    }
}

/// A gRPC response type and its ProtoJSON.
pub trait Reply: Send + Sync + 'static {
    type Wire: prost::Message + Default + Send + Sync + 'static;
    fn json(message: &Self::Wire) -> Value;
}

macro_rules! reply {
    ($($t:ty),+) => {$(
        impl Reply for $t {
            type Wire = $t;
            fn json(message: &$t) -> Value {
                encode(message)
            }
        }
    )+};
}
reply!(SendMessageResponse, StreamResponse, Task, ListTasksResponse, TaskPushNotificationConfig);
reply!(ListTaskPushNotificationConfigsResponse, AgentCard);

/// `google.protobuf.Empty`.
impl Reply for () {
    type Wire = ();
    fn json(_: &()) -> Value {
        json!({})
    }
}

fn grpc_fail(status: tonic::Status) -> Fail {
    let details = status.get_error_details();
    let info = details.error_info().unwrap_or_else(|| panic!("no ErrorInfo in {status:?}"));
    let code = a2a_server::error::code_name(status.code()).to_owned();
    Fail {
        reason: info.reason.clone(),
        code,
        challenge: None,
        message: status.message().to_owned(),
        metadata: info.metadata.clone().into_iter().collect(),
        retry_after: None,
    }
}

fn reason_of(details: &Value) -> String {
    details[0]["reason"].as_str().unwrap_or_else(|| panic!("no ErrorInfo: {details}")).to_owned()
}

/// The ErrorInfo metadata of ProtoJSON details.
fn metadata_of(details: &Value) -> BTreeMap<String, String> {
    let metadata = details[0]["metadata"].as_object().cloned().unwrap_or_default();
    metadata.into_iter().map(|(key, value)| (key, value.as_str().unwrap_or_default().to_owned())).collect()
}

fn retry_after(response: &reqwest::Response) -> Option<String> {
    response.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_owned)
}

fn challenge(response: &reqwest::Response) -> Option<String> {
    response.headers().get("www-authenticate").and_then(|v| v.to_str().ok()).map(str::to_owned)
}

fn is_sse(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("text/event-stream"))
}

fn trailer_map(block: &[u8]) -> reqwest::header::HeaderMap {
    let text = std::str::from_utf8(block).expect("trailers are text");
    let lines: BTreeMap<String, String> = text
        .split("\r\n")
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let mut map = reqwest::header::HeaderMap::new();
    for (name, value) in lines {
        let name = reqwest::header::HeaderName::from_bytes(name.as_bytes()).expect("a header name");
        map.insert(name, value.parse().expect("a header value"));
    }
    map
}
