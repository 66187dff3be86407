//! The three bindings are one service (spec §5.1: functionally equivalent, same results, same
//! errors). One scenario list runs over gRPC (the tonic client), JSON-RPC and HTTP+JSON
//! (reqwest); every result is decoded into the generated proto types (JSON through
//! `protojson::decode`), every error reduced to its A2A reason, domain and gRPC code (plus
//! ErrorInfo metadata keys and BadRequest fields), server-chosen ids and timestamps are
//! normalised away, and then the three runs must be equal step by step — and what the spec
//! says they should be.
mod common;

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicI64, Ordering};

use a2a_server::error::code_name;
use a2a_server::proto::a2a_service_client::A2aServiceClient;
use a2a_server::proto::send_message_response::Payload as Reply;
use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{
    AgentCard, CancelTaskRequest, GetExtendedAgentCardRequest, GetTaskRequest, ListTasksRequest,
    ListTasksResponse, Message, SendMessageRequest, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, Task, TaskPushNotificationConfig, TaskState, TaskStatus,
};
use a2a_server::protojson::{decode, encode};
use common::*;
use reqwest::Method;
use serde_json::{Value, json};
use tonic::transport::Channel;
use tonic_types::StatusExt;

const ERROR_INFO: &str = "type.googleapis.com/google.rpc.ErrorInfo";
const BAD_REQUEST: &str = "type.googleapis.com/google.rpc.BadRequest";
const A2A_DOMAIN: &str = "a2a-protocol.org";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Binding {
    Grpc,
    JsonRpc,
    HttpJson,
}

const BINDINGS: [Binding; 3] = [Binding::Grpc, Binding::JsonRpc, Binding::HttpJson];

// ---------------------------------------------------------------------------------------------
// Errors, binding-neutral.

/// An A2A error as every binding can express it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Failure {
    /// ErrorInfo `reason`.
    reason: String,
    /// ErrorInfo `domain`.
    domain: String,
    /// The canonical gRPC code name: the gRPC status, the HTTP+JSON `error.status`, or the code
    /// the spec's table pairs with the JSON-RPC error code.
    code: String,
    /// ErrorInfo metadata keys, sorted.
    metadata_keys: Vec<String>,
    /// BadRequest field violations, in order.
    fields: Vec<String>,
}

/// Spec v1.0.1 §5.4 (A2A-NOTES §6): an A2A error's gRPC code, JSON-RPC code and HTTP status.
struct Mapping {
    grpc: tonic::Code,
    jsonrpc: i64,
    http: u16,
}

fn spec_mapping(reason: &str) -> Mapping {
    use tonic::Code::*;
    let (grpc, jsonrpc, http) = match reason {
        "TASK_NOT_FOUND" => (NotFound, -32001, 404),
        "TASK_NOT_CANCELABLE" => (FailedPrecondition, -32002, 400),
        "PUSH_NOTIFICATION_NOT_SUPPORTED" => (FailedPrecondition, -32003, 400),
        "UNSUPPORTED_OPERATION" => (FailedPrecondition, -32004, 400),
        "CONTENT_TYPE_NOT_SUPPORTED" => (InvalidArgument, -32005, 415),
        "EXTENDED_AGENT_CARD_NOT_CONFIGURED" => (FailedPrecondition, -32007, 400),
        "EXTENSION_SUPPORT_REQUIRED" => (FailedPrecondition, -32008, 400),
        "VERSION_NOT_SUPPORTED" => (FailedPrecondition, -32009, 400),
        "INVALID_PARAMS" => (InvalidArgument, -32602, 400),
        other => panic!("reason {other:?} is not one these scenarios can produce"),
    };
    Mapping { grpc, jsonrpc, http }
}

/// The gRPC code the spec pairs with a JSON-RPC error code (a function: each JSON-RPC code has
/// exactly one).
fn grpc_code_of_jsonrpc(code: i64) -> &'static str {
    match code {
        -32001 => "NOT_FOUND",
        -32002 | -32003 | -32004 | -32007 | -32008 | -32009 => "FAILED_PRECONDITION",
        -32005 | -32600 | -32602 | -32700 => "INVALID_ARGUMENT",
        -32006 | -32603 => "INTERNAL",
        -32601 => "UNIMPLEMENTED",
        other => panic!("JSON-RPC error code {other} is not in the spec's table"),
    }
}

fn grpc_failure(status: &tonic::Status) -> Failure {
    let details = status.get_error_details();
    let info = details.error_info().unwrap_or_else(|| panic!("no ErrorInfo in {status:?}"));
    let mut metadata_keys: Vec<String> = info.metadata.keys().cloned().collect();
    metadata_keys.sort();
    let fields = details
        .bad_request()
        .map(|b| b.field_violations.iter().map(|v| v.field.clone()).collect())
        .unwrap_or_default();
    let failure = Failure {
        reason: info.reason.clone(),
        domain: info.domain.clone(),
        code: code_name(status.code()).to_owned(),
        metadata_keys,
        fields,
    };
    assert_eq!(status.code(), spec_mapping(&failure.reason).grpc, "gRPC code of {status:?}");
    failure
}

/// ErrorInfo (first) and BadRequest from ProtoJSON `Any` details.
fn json_failure(code: &str, details: &Value) -> Failure {
    let info = &details[0];
    assert_eq!(info["@type"], ERROR_INFO, "the ErrorInfo comes first: {details}");
    let mut metadata_keys: Vec<String> =
        info["metadata"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
    metadata_keys.sort();
    let fields = details
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["@type"] == BAD_REQUEST)
        .flat_map(|d| d["fieldViolations"].as_array().cloned().unwrap_or_default())
        .map(|v| v["field"].as_str().expect("a field name").to_owned())
        .collect();
    Failure {
        reason: info["reason"].as_str().unwrap_or_else(|| panic!("no reason: {details}")).to_owned(),
        domain: info["domain"].as_str().unwrap_or_default().to_owned(),
        code: code.to_owned(),
        metadata_keys,
        fields,
    }
}

fn jsonrpc_failure(error: &Value) -> Failure {
    let code = error["code"].as_i64().unwrap_or_else(|| panic!("no numeric code: {error}"));
    let failure = json_failure(grpc_code_of_jsonrpc(code), &error["data"]);
    assert_eq!(code, spec_mapping(&failure.reason).jsonrpc, "JSON-RPC code of {error}");
    failure
}

fn rest_failure(http_status: u16, body: &Value) -> Failure {
    let error = &body["error"];
    assert_eq!(error["code"], http_status, "error.code is the HTTP status: {body}");
    let status = error["status"].as_str().unwrap_or_else(|| panic!("no error.status: {body}"));
    let failure = json_failure(status, &error["details"]);
    assert_eq!(http_status, spec_mapping(&failure.reason).http, "HTTP status of {body}");
    failure
}

// ---------------------------------------------------------------------------------------------
// One client, three bindings.

fn from_json<T: prost::Message + prost::Name + Default>(value: &Value) -> T {
    decode(value).unwrap_or_else(|e| panic!("not a {}: {e}: {value}", T::NAME))
}

fn is_sse(response: &reqwest::Response) -> bool {
    let content_type = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
    content_type.starts_with("text/event-stream")
}

fn is_json(response: &reqwest::Response) -> bool {
    let content_type = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
    content_type.contains("json")
}

/// A JSON-RPC response envelope: version, the request's id, exactly one of result and error.
fn check_envelope(body: &Value, id: i64) {
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
    assert_eq!(body["id"], id, "{body}");
    assert!(body.get("result").is_some() != body.get("error").is_some(), "result xor error: {body}");
}

/// GET query parameters from a request's ProtoJSON (spec §11.5): its top-level scalars.
fn query_string(request: &Value, skip: &[&str]) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    for (name, value) in request.as_object().expect("an object") {
        if skip.contains(&name.as_str()) {
            continue;
        }
        match value {
            Value::String(s) => query.append_pair(name, s),
            Value::Number(_) | Value::Bool(_) => query.append_pair(name, &value.to_string()),
            other => panic!("{name}={other} cannot go in a query string"),
        };
    }
    let query = query.finish();
    if query.is_empty() { query } else { format!("?{query}") }
}

struct Client {
    binding: Binding,
    base: String,
    grpc: A2aServiceClient<Channel>,
    http: reqwest::Client,
    /// The `A2A-Version` every call carries.
    version: String,
    ids: AtomicI64,
}

/// A stream of `StreamResponse`s on any binding.
enum ItemStream {
    Grpc(Box<tonic::Streaming<StreamResponse>>),
    JsonRpc { events: SseReader, id: i64 },
    HttpJson { events: SseReader, last_id: Option<u64> },
}

impl ItemStream {
    /// The next item or error; `None` once the server ended the stream.
    async fn next(&mut self) -> Option<Result<StreamResponse, Failure>> {
        match self {
            Self::Grpc(stream) => {
                match tokio::time::timeout(PATIENCE, stream.message()).await.expect("gRPC stream stalled") {
                    Ok(item) => item.map(Ok),
                    Err(status) => Some(Err(grpc_failure(&status))),
                }
            }
            Self::JsonRpc { events, id } => {
                let body = events.next().await?.json();
                check_envelope(&body, *id);
                Some(match body.get("error") {
                    Some(error) => Err(jsonrpc_failure(error)),
                    None => Ok(from_json(&body["result"])),
                })
            }
            Self::HttpJson { events, last_id } => {
                let event = events.next().await?;
                let body = event.json();
                if body.get("error").is_some() {
                    assert_eq!(event.event.as_deref(), Some("error"), "an error event: {event:?}");
                    let status = body["error"]["code"].as_u64().expect("error.code") as u16;
                    return Some(Err(rest_failure(status, &body)));
                }
                let seq: u64 = event
                    .id
                    .as_deref()
                    .and_then(|id| id.parse().ok())
                    .unwrap_or_else(|| panic!("an SSE id with the sequence number: {event:?}"));
                if let Some(last) = *last_id {
                    assert!(seq > last, "SSE ids increase: {last}, then {seq}");
                }
                *last_id = Some(seq);
                Some(Ok(from_json(&body)))
            }
        }
    }

    /// Every remaining item, and the error that ended the stream, if one did.
    async fn finish(mut self) -> (Vec<StreamResponse>, Option<Failure>) {
        let mut items = Vec::new();
        while let Some(item) = self.next().await {
            match item {
                Ok(item) => items.push(item),
                Err(failure) => {
                    assert!(self.next().await.is_none(), "the stream ends after an error");
                    return (items, Some(failure));
                }
            }
        }
        (items, None)
    }
}

impl Client {
    async fn connect(server: &TestServer, binding: Binding, version: &str) -> Self {
        Self {
            binding,
            base: server.url(),
            grpc: server.client().await,
            http: reqwest::Client::new(),
            version: version.to_owned(),
            ids: AtomicI64::new(1),
        }
    }

    fn grpc_request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        request.metadata_mut().insert("a2a-version", self.version.parse().expect("ASCII"));
        request
    }

    fn http_request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.http.request(method, format!("{}{path}", self.base)).header("A2A-Version", &self.version)
    }

    async fn jsonrpc(&self, method: &str, params: Value) -> Result<Value, Failure> {
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        let response = self
            .http_request(Method::POST, "/")
            .json(&rpc(id, method, params))
            .send()
            .await
            .expect("JSON-RPC");
        assert_eq!(response.status(), 200, "JSON-RPC answers with HTTP 200, errors included");
        assert!(is_json(&response), "{method}: {:?}", response.headers());
        let body: Value = response.json().await.expect("a JSON body");
        check_envelope(&body, id);
        match body.get("error") {
            Some(error) => Err(jsonrpc_failure(error)),
            None => Ok(body["result"].clone()),
        }
    }

    async fn jsonrpc_stream(&self, method: &str, params: Value) -> Result<ItemStream, Failure> {
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        let response = self
            .http_request(Method::POST, "/")
            .header("accept", "text/event-stream")
            .json(&rpc(id, method, params))
            .send()
            .await
            .expect("JSON-RPC");
        assert_eq!(response.status(), 200, "JSON-RPC answers with HTTP 200, errors included");
        if is_sse(&response) {
            return Ok(ItemStream::JsonRpc { events: SseReader::new(response), id });
        }
        // An error before the first event is a plain JSON-RPC error response.
        assert!(is_json(&response), "{method}: neither SSE nor JSON: {:?}", response.headers());
        let body: Value = response.json().await.expect("a JSON body");
        check_envelope(&body, id);
        Err(jsonrpc_failure(body.get("error").unwrap_or_else(|| panic!("a result without SSE: {body}"))))
    }

    async fn rest(&self, method: Method, path: &str, body: Option<Value>) -> Result<Value, Failure> {
        let mut request = self.http_request(method, path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("HTTP+JSON");
        let status = response.status().as_u16();
        assert!(is_json(&response), "{path}: {:?}", response.headers());
        let body: Value = response.json().await.expect("a JSON body");
        if (200..300).contains(&status) { Ok(body) } else { Err(rest_failure(status, &body)) }
    }

    async fn rest_stream(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<ItemStream, Failure> {
        let mut request = self.http_request(method, path).header("accept", "text/event-stream");
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("HTTP+JSON");
        let status = response.status().as_u16();
        if is_sse(&response) {
            assert_eq!(status, 200);
            return Ok(ItemStream::HttpJson { events: SseReader::new(response), last_id: None });
        }
        assert!(!(200..300).contains(&status), "{path}: a success must be SSE, got {status}");
        assert!(is_json(&response), "{path}: {:?}", response.headers());
        let body: Value = response.json().await.expect("a JSON body");
        Err(rest_failure(status, &body))
    }

    async fn send(&self, request: SendMessageRequest) -> Result<SendMessageResponse, Failure> {
        match self.binding {
            Binding::Grpc => self
                .grpc
                .clone()
                .send_message(self.grpc_request(request))
                .await
                .map(tonic::Response::into_inner)
                .map_err(|s| grpc_failure(&s)),
            Binding::JsonRpc => self.jsonrpc("SendMessage", encode(&request)).await.map(|v| from_json(&v)),
            Binding::HttpJson => {
                self.rest(Method::POST, "/message:send", Some(encode(&request))).await.map(|v| from_json(&v))
            }
        }
    }

    async fn send_streaming(&self, request: SendMessageRequest) -> Result<ItemStream, Failure> {
        match self.binding {
            Binding::Grpc => self
                .grpc
                .clone()
                .send_streaming_message(self.grpc_request(request))
                .await
                .map(|r| ItemStream::Grpc(Box::new(r.into_inner())))
                .map_err(|s| grpc_failure(&s)),
            Binding::JsonRpc => self.jsonrpc_stream("SendStreamingMessage", encode(&request)).await,
            Binding::HttpJson => {
                self.rest_stream(Method::POST, "/message:stream", Some(encode(&request))).await
            }
        }
    }

    async fn subscribe(&self, id: &str) -> Result<ItemStream, Failure> {
        let request = SubscribeToTaskRequest { id: id.to_owned(), ..Default::default() };
        match self.binding {
            Binding::Grpc => self
                .grpc
                .clone()
                .subscribe_to_task(self.grpc_request(request))
                .await
                .map(|r| ItemStream::Grpc(Box::new(r.into_inner())))
                .map_err(|s| grpc_failure(&s)),
            Binding::JsonRpc => self.jsonrpc_stream("SubscribeToTask", encode(&request)).await,
            Binding::HttpJson => self.rest_stream(Method::GET, &format!("/tasks/{id}:subscribe"), None).await,
        }
    }

    async fn get(&self, request: GetTaskRequest) -> Result<Task, Failure> {
        match self.binding {
            Binding::Grpc => self
                .grpc
                .clone()
                .get_task(self.grpc_request(request))
                .await
                .map(tonic::Response::into_inner)
                .map_err(|s| grpc_failure(&s)),
            Binding::JsonRpc => self.jsonrpc("GetTask", encode(&request)).await.map(|v| from_json(&v)),
            Binding::HttpJson => {
                let query = query_string(&encode(&request), &["id", "tenant"]);
                let path = format!("/tasks/{}{query}", request.id);
                self.rest(Method::GET, &path, None).await.map(|v| from_json(&v))
            }
        }
    }

    async fn list(&self, request: ListTasksRequest) -> Result<ListTasksResponse, Failure> {
        match self.binding {
            Binding::Grpc => self
                .grpc
                .clone()
                .list_tasks(self.grpc_request(request))
                .await
                .map(tonic::Response::into_inner)
                .map_err(|s| grpc_failure(&s)),
            Binding::JsonRpc => self.jsonrpc("ListTasks", encode(&request)).await.map(|v| from_json(&v)),
            Binding::HttpJson => {
                let path = format!("/tasks{}", query_string(&encode(&request), &["tenant"]));
                self.rest(Method::GET, &path, None).await.map(|v| from_json(&v))
            }
        }
    }

    async fn cancel(&self, id: &str) -> Result<Task, Failure> {
        let request = CancelTaskRequest { id: id.to_owned(), ..Default::default() };
        match self.binding {
            Binding::Grpc => self
                .grpc
                .clone()
                .cancel_task(self.grpc_request(request))
                .await
                .map(tonic::Response::into_inner)
                .map_err(|s| grpc_failure(&s)),
            Binding::JsonRpc => self.jsonrpc("CancelTask", encode(&request)).await.map(|v| from_json(&v)),
            Binding::HttpJson => {
                let path = format!("/tasks/{id}:cancel");
                self.rest(Method::POST, &path, Some(encode(&request))).await.map(|v| from_json(&v))
            }
        }
    }

    async fn create_push_config(
        &self,
        config: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, Failure> {
        match self.binding {
            Binding::Grpc => self
                .grpc
                .clone()
                .create_task_push_notification_config(self.grpc_request(config))
                .await
                .map(tonic::Response::into_inner)
                .map_err(|s| grpc_failure(&s)),
            Binding::JsonRpc => {
                self.jsonrpc("CreateTaskPushNotificationConfig", encode(&config)).await.map(|v| from_json(&v))
            }
            Binding::HttpJson => {
                let path = format!("/tasks/{}/pushNotificationConfigs", config.task_id);
                self.rest(Method::POST, &path, Some(encode(&config))).await.map(|v| from_json(&v))
            }
        }
    }

    async fn extended_card(&self) -> Result<AgentCard, Failure> {
        match self.binding {
            Binding::Grpc => self
                .grpc
                .clone()
                .get_extended_agent_card(self.grpc_request(GetExtendedAgentCardRequest::default()))
                .await
                .map(tonic::Response::into_inner)
                .map_err(|s| grpc_failure(&s)),
            Binding::JsonRpc => self.jsonrpc("GetExtendedAgentCard", json!({})).await.map(|v| from_json(&v)),
            Binding::HttpJson => {
                self.rest(Method::GET, "/extendedAgentCard", None).await.map(|v| from_json(&v))
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Normalised outcomes.

fn normalise_message(message: &mut Message) {
    message.message_id.clear();
    message.context_id.clear();
    message.task_id.clear();
}

fn normalise_status(status: &mut Option<TaskStatus>) {
    if let Some(status) = status {
        status.timestamp = None;
        if let Some(message) = &mut status.message {
            normalise_message(message);
        }
    }
}

fn normalise_task(task: &mut Task) {
    task.id.clear();
    task.context_id.clear();
    normalise_status(&mut task.status);
    task.history.iter_mut().for_each(normalise_message);
}

fn normalise_item(item: &mut StreamResponse) {
    match &mut item.payload {
        Some(Payload::Task(task)) => normalise_task(task),
        Some(Payload::Message(message)) => normalise_message(message),
        Some(Payload::StatusUpdate(update)) => {
            update.task_id.clear();
            update.context_id.clear();
            normalise_status(&mut update.status);
        }
        Some(Payload::ArtifactUpdate(update)) => {
            update.task_id.clear();
            update.context_id.clear();
        }
        None => {}
    }
}

/// Every item of a stream is about one task, in one context (checked before the ids are
/// normalised away).
fn assert_one_task(items: &[StreamResponse]) {
    let mut ids = std::collections::BTreeSet::new();
    for item in items {
        match &item.payload {
            Some(Payload::Task(task)) => ids.insert((task.id.clone(), task.context_id.clone())),
            Some(Payload::StatusUpdate(update)) => {
                ids.insert((update.task_id.clone(), update.context_id.clone()))
            }
            Some(Payload::ArtifactUpdate(update)) => {
                ids.insert((update.task_id.clone(), update.context_id.clone()))
            }
            Some(Payload::Message(_)) | None => false,
        };
    }
    assert!(ids.len() <= 1, "one task and context per stream: {ids:?}");
    assert!(ids.iter().all(|(task, context)| !task.is_empty() && !context.is_empty()), "{ids:?}");
}

/// One step's result, with server-chosen ids, page tokens and timestamps normalised away.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Reply(SendMessageResponse),
    Task(Task),
    List(ListTasksResponse),
    Stream {
        items: Vec<StreamResponse>,
        error: Option<Failure>,
    },
    /// A fact derived from a result whose raw form depends on timing.
    Fact(String),
    /// A success where none was expected.
    Unexpected(String),
    Error(Failure),
}

impl Outcome {
    fn reply(result: &Result<SendMessageResponse, Failure>) -> Self {
        match result.clone() {
            Ok(mut reply) => {
                match &mut reply.payload {
                    Some(Reply::Task(task)) => normalise_task(task),
                    Some(Reply::Message(message)) => normalise_message(message),
                    None => {}
                }
                Self::Reply(reply)
            }
            Err(failure) => Self::Error(failure),
        }
    }

    fn task(result: &Result<Task, Failure>) -> Self {
        match result.clone() {
            Ok(mut task) => {
                normalise_task(&mut task);
                Self::Task(task)
            }
            Err(failure) => Self::Error(failure),
        }
    }

    fn list(result: &Result<ListTasksResponse, Failure>) -> Self {
        match result.clone() {
            Ok(mut list) => {
                list.tasks.iter_mut().for_each(normalise_task);
                if !list.next_page_token.is_empty() {
                    list.next_page_token = "<token>".into();
                }
                Self::List(list)
            }
            Err(failure) => Self::Error(failure),
        }
    }

    fn items(mut items: Vec<StreamResponse>, error: Option<Failure>) -> Self {
        assert_one_task(&items);
        items.iter_mut().for_each(normalise_item);
        Self::Stream { items, error }
    }

    async fn stream(opened: Result<ItemStream, Failure>) -> Self {
        match opened {
            Ok(stream) => {
                let (items, error) = stream.finish().await;
                Self::items(items, error)
            }
            Err(failure) => Self::Error(failure),
        }
    }

    fn unexpected<T: std::fmt::Debug>(result: Result<T, Failure>) -> Self {
        match result {
            Ok(value) => Self::Unexpected(format!("{value:?}")),
            Err(failure) => Self::Error(failure),
        }
    }

    fn reply_task(&self) -> &Task {
        match self {
            Self::Reply(SendMessageResponse { payload: Some(Reply::Task(task)) }) => task,
            other => panic!("expected a task reply, got {other:?}"),
        }
    }

    fn as_task(&self) -> &Task {
        match self {
            Self::Task(task) => task,
            other => panic!("expected a task, got {other:?}"),
        }
    }

    fn as_list(&self) -> &ListTasksResponse {
        match self {
            Self::List(list) => list,
            other => panic!("expected a task list, got {other:?}"),
        }
    }

    fn as_stream(&self) -> (&[StreamResponse], Option<&Failure>) {
        match self {
            Self::Stream { items, error } => (items, error.as_ref()),
            other => panic!("expected a stream, got {other:?}"),
        }
    }

    fn as_error(&self) -> &Failure {
        match self {
            Self::Error(failure) => failure,
            other => panic!("expected an error, got {other:?}"),
        }
    }
}

type Steps = Vec<(&'static str, Outcome)>;

fn step<'a>(steps: &'a Steps, label: &str) -> &'a Outcome {
    &steps.iter().find(|(l, _)| *l == label).unwrap_or_else(|| panic!("no step {label:?}")).1
}

/// The task of a raw send result (the scenario needs its id).
fn task_of(result: &Result<SendMessageResponse, Failure>) -> Task {
    match result {
        Ok(SendMessageResponse { payload: Some(Reply::Task(task)) }) => task.clone(),
        other => panic!("expected a task, got {other:?}"),
    }
}

fn with_context(text: &str, context_id: &str) -> SendMessageRequest {
    let mut request = send(text);
    request.message.as_mut().unwrap().context_id = context_id.to_owned();
    request
}

fn get_request(id: &str, history_length: Option<i32>) -> GetTaskRequest {
    GetTaskRequest { id: id.to_owned(), history_length, ..Default::default() }
}

fn chunks(items: &[StreamResponse]) -> Vec<String> {
    items.iter().flat_map(chunk_texts).collect()
}

fn numbered_chunks(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("chunk {i}")).collect()
}

fn status_text(task: &Task) -> Vec<String> {
    task.status.as_ref().and_then(|s| s.message.as_ref()).map(|m| texts(&m.parts)).unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// The scenarios.

#[derive(Debug, Clone, Copy)]
enum Scenario {
    SendEcho,
    Stream,
    SubscribeMidStream,
    InputRequiredTurn,
    GetWithHistoryLength,
    ListWithPagination,
    Cancel,
    GetUnknownTask,
    CancelUnknownTask,
    SubscribeUnknownTask,
    SubscribeTerminalTask,
    CancelCompletedTask,
    MissingMessage,
    NegativeHistoryLength,
    PageSizeZero,
    UnsupportedVersion,
    CreatePushConfig,
    ExtendedCard,
    DirectMessage,
    FailAndReject,
    StreamToInputRequired,
    ListFilters,
    FollowUpUnknownTask,
    FollowUpTerminalTask,
}

const SCENARIOS: &[Scenario] = &[
    Scenario::SendEcho,
    Scenario::Stream,
    Scenario::SubscribeMidStream,
    Scenario::InputRequiredTurn,
    Scenario::GetWithHistoryLength,
    Scenario::ListWithPagination,
    Scenario::Cancel,
    Scenario::GetUnknownTask,
    Scenario::CancelUnknownTask,
    Scenario::SubscribeUnknownTask,
    Scenario::SubscribeTerminalTask,
    Scenario::CancelCompletedTask,
    Scenario::MissingMessage,
    Scenario::NegativeHistoryLength,
    Scenario::PageSizeZero,
    Scenario::UnsupportedVersion,
    Scenario::CreatePushConfig,
    Scenario::ExtendedCard,
    Scenario::DirectMessage,
    Scenario::FailAndReject,
    Scenario::StreamToInputRequired,
    Scenario::ListFilters,
    Scenario::FollowUpUnknownTask,
    Scenario::FollowUpTerminalTask,
];

/// Each chunk of the subscribe-mid-stream task is this far apart: after the first stream saw
/// chunk 1 the subscription has (CHUNKS - 2) × this long to attach before the task ends.
const MID_STREAM_CHUNKS: usize = 6;
const MID_STREAM_GAP_MS: u64 = 250;

impl Scenario {
    /// The error every step of an error scenario must give: (reason, gRPC code).
    fn expected_error(self) -> Option<(&'static str, &'static str)> {
        Some(match self {
            Self::GetUnknownTask
            | Self::CancelUnknownTask
            | Self::SubscribeUnknownTask
            | Self::FollowUpUnknownTask => ("TASK_NOT_FOUND", "NOT_FOUND"),
            Self::SubscribeTerminalTask | Self::ExtendedCard | Self::FollowUpTerminalTask => {
                ("UNSUPPORTED_OPERATION", "FAILED_PRECONDITION")
            }
            Self::CancelCompletedTask => ("TASK_NOT_CANCELABLE", "FAILED_PRECONDITION"),
            Self::MissingMessage | Self::NegativeHistoryLength | Self::PageSizeZero => {
                ("INVALID_PARAMS", "INVALID_ARGUMENT")
            }
            Self::UnsupportedVersion => ("VERSION_NOT_SUPPORTED", "FAILED_PRECONDITION"),
            Self::CreatePushConfig => ("PUSH_NOTIFICATION_NOT_SUPPORTED", "FAILED_PRECONDITION"),
            _ => return None,
        })
    }

    /// Runs the scenario over `binding` on a server of its own.
    async fn run_on(self, binding: Binding) -> Steps {
        let server = TestServer::start().await;
        let version = match self {
            Self::UnsupportedVersion => "99.0",
            _ => "1.0",
        };
        let client = Client::connect(&server, binding, version).await;
        self.run(&client).await
    }

    async fn run(self, client: &Client) -> Steps {
        let mut steps: Steps = Vec::new();
        match self {
            Self::SendEcho => {
                steps.push(("send", Outcome::reply(&client.send(send("hello, bindings")).await)));
            }
            Self::Stream => {
                steps
                    .push(("stream", Outcome::stream(client.send_streaming(send("stream 4 0")).await).await));
            }
            Self::SubscribeMidStream => {
                let command = format!("stream {MID_STREAM_CHUNKS} {MID_STREAM_GAP_MS}");
                let mut first = client.send_streaming(send(&command)).await.expect("the stream opens");
                let mut seen = Vec::new();
                let task = loop {
                    let item = first.next().await.expect("an item").expect("no error");
                    seen.push(item.clone());
                    if let Some(Payload::Task(task)) = &item.payload {
                        break task.clone();
                    }
                };
                while seen.last().is_none_or(|item| chunk_texts(item) != ["chunk 1"]) {
                    seen.push(first.next().await.expect("more items").expect("no error"));
                }
                let subscription = client.subscribe(&task.id).await.expect("the task is live: subscribe");
                let (mut late, late_error) = subscription.finish().await;
                assert!(!late.is_empty(), "the subscription yields the task first");
                let head = late.remove(0);
                let Some(Payload::Task(snapshot)) = &head.payload else {
                    panic!("a subscription opens with the Task, got {head:?}")
                };
                let before = artifact_texts(snapshot);
                steps.push(("snapshot state", Outcome::Fact(format!("{:?}", state(snapshot)))));
                steps.push((
                    "snapshot holds chunks 0 and 1",
                    Outcome::Fact(format!("{}", before.starts_with(&numbered_chunks(2)))),
                ));
                let all: Vec<String> = before.into_iter().chain(chunks(&late)).collect();
                steps.push(("snapshot + rest", Outcome::Fact(format!("{all:?}"))));
                let last_state = late.last().and_then(item_state);
                steps.push((
                    "subscription end",
                    Outcome::Fact(format!("{last_state:?}, error {late_error:?}")),
                ));
                let (rest, error) = first.finish().await;
                seen.extend(rest);
                steps.push(("first stream", Outcome::items(seen, error)));
            }
            Self::InputRequiredTurn => {
                let asked = client.send(send("input")).await;
                steps.push(("send input", Outcome::reply(&asked)));
                let task = task_of(&asked);
                let answered = client.send(follow_up(&task, "blue")).await;
                let done = task_of(&answered);
                assert_eq!((&done.id, &done.context_id), (&task.id, &task.context_id), "the same task");
                steps.push(("answer", Outcome::reply(&answered)));
            }
            Self::GetWithHistoryLength => {
                let task = task_of(&client.send(send("input")).await);
                task_of(&client.send(follow_up(&task, "blue")).await);
                steps.push((
                    "get historyLength=1",
                    Outcome::task(&client.get(get_request(&task.id, Some(1))).await),
                ));
                steps.push(("get", Outcome::task(&client.get(get_request(&task.id, None)).await)));
            }
            Self::ListWithPagination => {
                for text in ["one", "two", "three"] {
                    task_of(&client.send(with_context(text, "equivalence-context")).await);
                }
                task_of(&client.send(with_context("elsewhere", "another-context")).await);
                let page = |token: String| ListTasksRequest {
                    context_id: "equivalence-context".into(),
                    page_size: Some(2),
                    page_token: token,
                    ..Default::default()
                };
                let first = client.list(page(String::new())).await;
                let token = first.as_ref().map(|l| l.next_page_token.clone()).unwrap_or_default();
                let second = client.list(page(token)).await;
                let contexts: Vec<String> = [&first, &second]
                    .into_iter()
                    .flat_map(|r| r.iter().flat_map(|l| l.tasks.iter().map(|t| t.context_id.clone())))
                    .collect();
                steps.push(("page 1", Outcome::list(&first)));
                steps.push(("page 2", Outcome::list(&second)));
                steps.push(("listed contexts", Outcome::Fact(format!("{contexts:?}"))));
            }
            Self::Cancel => {
                let started = client.send(send_returning_immediately("stream 100 200")).await;
                steps.push(("send returnImmediately", Outcome::reply(&started)));
                let task = task_of(&started);
                // How many chunks the task produced before the cancel landed is timing; the rest
                // of the task must agree.
                let canceled = client.cancel(&task.id).await;
                let read = client.get(get_request(&task.id, None)).await;
                for task in [&canceled, &read].into_iter().flatten() {
                    let produced = artifact_texts(task);
                    assert_eq!(produced, numbered_chunks(produced.len()), "chunks in order");
                }
                let without_artifacts = |result: Result<Task, Failure>| {
                    result.map(|mut task| {
                        task.artifacts.clear();
                        task
                    })
                };
                steps.push(("cancel", Outcome::task(&without_artifacts(canceled))));
                steps.push(("get after cancel", Outcome::task(&without_artifacts(read))));
                steps.push(("cancel again", Outcome::unexpected(client.cancel(&task.id).await)));
            }
            Self::GetUnknownTask => {
                steps.push(("get", Outcome::task(&client.get(get_request("no-such-task", None)).await)));
            }
            Self::CancelUnknownTask => {
                steps.push(("cancel", Outcome::task(&client.cancel("no-such-task").await)));
            }
            Self::SubscribeUnknownTask => {
                steps.push(("subscribe", Outcome::stream(client.subscribe("no-such-task").await).await));
            }
            Self::SubscribeTerminalTask => {
                let task = task_of(&client.send(send("done already")).await);
                steps.push(("subscribe", Outcome::stream(client.subscribe(&task.id).await).await));
            }
            Self::CancelCompletedTask => {
                let task = task_of(&client.send(send("done already")).await);
                steps.push(("cancel", Outcome::task(&client.cancel(&task.id).await)));
            }
            Self::MissingMessage => {
                let request = SendMessageRequest::default();
                steps.push(("send", Outcome::reply(&client.send(request.clone()).await)));
                steps.push(("stream", Outcome::stream(client.send_streaming(request).await).await));
            }
            Self::NegativeHistoryLength => {
                let task = task_of(&client.send(send("hi")).await);
                steps.push(("get", Outcome::task(&client.get(get_request(&task.id, Some(-1))).await)));
            }
            Self::PageSizeZero => {
                let request = ListTasksRequest { page_size: Some(0), ..Default::default() };
                steps.push(("list", Outcome::list(&client.list(request).await)));
            }
            Self::UnsupportedVersion => {
                steps.push(("send", Outcome::reply(&client.send(send("hi")).await)));
                steps.push(("stream", Outcome::stream(client.send_streaming(send("hi")).await).await));
                steps.push(("get", Outcome::task(&client.get(get_request("any", None)).await)));
                steps.push(("list", Outcome::list(&client.list(ListTasksRequest::default()).await)));
                steps.push(("cancel", Outcome::task(&client.cancel("any").await)));
            }
            Self::CreatePushConfig => {
                let task = task_of(&client.send(send("input")).await);
                let config = TaskPushNotificationConfig {
                    task_id: task.id.clone(),
                    url: "https://example.com/webhook".into(),
                    token: "secret".into(),
                    ..Default::default()
                };
                steps.push(("create", Outcome::unexpected(client.create_push_config(config).await)));
            }
            Self::ExtendedCard => {
                steps.push(("get", Outcome::unexpected(client.extended_card().await)));
            }
            Self::DirectMessage => {
                steps.push(("send", Outcome::reply(&client.send(send("message hi there")).await)));
                let stream = client.send_streaming(send("message hello")).await;
                steps.push(("stream", Outcome::stream(stream).await));
            }
            Self::FailAndReject => {
                steps.push(("fail", Outcome::reply(&client.send(send("fail")).await)));
                steps.push(("reject", Outcome::reply(&client.send(send("reject")).await)));
            }
            Self::StreamToInputRequired => {
                let opened = client.send_streaming(send("input")).await.expect("the stream opens");
                let (items, error) = opened.finish().await;
                let task = match items.first().map(|i| &i.payload) {
                    Some(Some(Payload::Task(task))) => task.clone(),
                    other => panic!("a Task first, got {other:?}"),
                };
                steps.push(("stream input", Outcome::items(items, error)));
                let answer = client.send_streaming(follow_up(&task, "blue")).await;
                steps.push(("stream answer", Outcome::stream(answer).await));
            }
            Self::ListFilters => {
                task_of(&client.send(send("input")).await);
                task_of(&client.send(send("hi")).await);
                let waiting =
                    ListTasksRequest { status: TaskState::InputRequired as i32, ..Default::default() };
                steps.push(("status filter", Outcome::list(&client.list(waiting).await)));
                let full = ListTasksRequest {
                    include_artifacts: Some(true),
                    history_length: Some(0),
                    ..Default::default()
                };
                steps.push(("artifacts, no history", Outcome::list(&client.list(full).await)));
            }
            Self::FollowUpUnknownTask => {
                let unknown = Task { id: "no-such-task".into(), ..Default::default() };
                steps.push(("send", Outcome::reply(&client.send(follow_up(&unknown, "x")).await)));
                let stream = client.send_streaming(follow_up(&unknown, "x")).await;
                steps.push(("stream", Outcome::stream(stream).await));
            }
            Self::FollowUpTerminalTask => {
                let task = task_of(&client.send(send("done already")).await);
                steps.push(("send", Outcome::reply(&client.send(follow_up(&task, "again")).await)));
                let stream = client.send_streaming(follow_up(&task, "again")).await;
                steps.push(("stream", Outcome::stream(stream).await));
            }
        }
        steps
    }

    /// What the spec says the (normalised) steps must be.
    fn check(self, steps: &Steps) {
        if let Some((reason, code)) = self.expected_error() {
            assert!(!steps.is_empty());
            for (label, outcome) in steps {
                let failure = outcome.as_error();
                assert_eq!((failure.reason.as_str(), failure.code.as_str()), (reason, code), "{label}");
                assert_eq!(failure.domain, A2A_DOMAIN, "{label}");
            }
        }
        match self {
            Self::SendEcho => {
                let task = step(steps, "send").reply_task();
                assert_eq!(state(task), TaskState::Completed);
                assert_eq!(artifact_texts(task), ["hello, bindings"]);
                assert_eq!(task.history.len(), 1);
                assert_eq!(texts(&task.history[0].parts), ["hello, bindings"]);
            }
            Self::Stream => {
                let (items, error) = step(steps, "stream").as_stream();
                assert_eq!(error, None);
                assert_eq!(items.len(), 7, "Task, WORKING, 4 chunks, COMPLETED: {items:#?}");
                assert!(matches!(items[0].payload, Some(Payload::Task(_))), "a Task first");
                assert_eq!(item_state(&items[0]), Some(TaskState::Submitted));
                assert_eq!(item_state(&items[1]), Some(TaskState::Working));
                assert_eq!(chunks(items), numbered_chunks(4));
                assert_eq!(item_state(&items[6]), Some(TaskState::Completed));
            }
            Self::SubscribeMidStream => {
                assert_eq!(step(steps, "snapshot state"), &Outcome::Fact("Working".into()));
                assert_eq!(step(steps, "snapshot holds chunks 0 and 1"), &Outcome::Fact("true".into()));
                let all = format!("{:?}", numbered_chunks(MID_STREAM_CHUNKS));
                assert_eq!(step(steps, "snapshot + rest"), &Outcome::Fact(all), "no gap, no duplicate");
                assert_eq!(
                    step(steps, "subscription end"),
                    &Outcome::Fact("Some(Completed), error None".into())
                );
                let (items, error) = step(steps, "first stream").as_stream();
                assert_eq!(error, None);
                assert_eq!(chunks(items), numbered_chunks(MID_STREAM_CHUNKS));
                assert_eq!(item_state(items.last().unwrap()), Some(TaskState::Completed));
            }
            Self::InputRequiredTurn => {
                let asked = step(steps, "send input").reply_task();
                assert_eq!(state(asked), TaskState::InputRequired);
                assert_eq!(status_text(asked), ["What should I echo back?"]);
                assert_eq!(asked.history.len(), 2, "the message and the question");
                let done = step(steps, "answer").reply_task();
                assert_eq!(state(done), TaskState::Completed);
                assert_eq!(artifact_texts(done), ["blue"]);
                assert_eq!(done.history.len(), 3);
            }
            Self::GetWithHistoryLength => {
                let one = step(steps, "get historyLength=1").as_task();
                assert_eq!(state(one), TaskState::Completed);
                assert_eq!(one.history.len(), 1, "the most recent message only");
                assert_eq!(texts(&one.history[0].parts), ["blue"]);
                let full = step(steps, "get").as_task();
                assert_eq!(full.history.len(), 3);
                assert_eq!(full.history[2], one.history[0]);
            }
            Self::ListWithPagination => {
                let first = step(steps, "page 1").as_list();
                assert_eq!((first.tasks.len(), first.page_size, first.total_size), (2, 2, 3));
                assert_eq!(first.next_page_token, "<token>", "a token for the next page");
                let second = step(steps, "page 2").as_list();
                assert_eq!((second.tasks.len(), second.page_size, second.total_size), (1, 2, 3));
                assert_eq!(second.next_page_token, "", "the last page has an empty token");
                let listed: Vec<Vec<String>> =
                    first.tasks.iter().chain(&second.tasks).map(|t| texts(&t.history[0].parts)).collect();
                assert_eq!(listed, [["three"], ["two"], ["one"]], "newest first, each once");
                assert!(first.tasks.iter().chain(&second.tasks).all(|t| t.artifacts.is_empty()));
                let contexts = format!("{:?}", ["equivalence-context"; 3]);
                assert_eq!(step(steps, "listed contexts"), &Outcome::Fact(contexts));
            }
            Self::Cancel => {
                assert_eq!(state(step(steps, "send returnImmediately").reply_task()), TaskState::Submitted);
                assert_eq!(state(step(steps, "cancel").as_task()), TaskState::Canceled);
                assert_eq!(state(step(steps, "get after cancel").as_task()), TaskState::Canceled);
                assert_eq!(step(steps, "cancel again").as_error().reason, "TASK_NOT_CANCELABLE");
            }
            Self::GetUnknownTask | Self::CancelUnknownTask | Self::SubscribeUnknownTask => {
                assert_eq!(steps[0].1.as_error().metadata_keys, ["taskId"]);
            }
            Self::MissingMessage => {
                for (label, outcome) in steps {
                    assert_eq!(outcome.as_error().fields, ["message"], "{label}");
                }
            }
            Self::NegativeHistoryLength => assert_eq!(steps[0].1.as_error().fields, ["historyLength"]),
            Self::PageSizeZero => assert_eq!(steps[0].1.as_error().fields, ["pageSize"]),
            Self::UnsupportedVersion => {
                for (label, outcome) in steps {
                    assert_eq!(outcome.as_error().metadata_keys, ["version"], "{label}");
                }
            }
            Self::DirectMessage => {
                let Outcome::Reply(SendMessageResponse { payload: Some(Reply::Message(reply)) }) =
                    step(steps, "send")
                else {
                    panic!("a direct Message reply, no task: {:?}", step(steps, "send"))
                };
                assert_eq!(texts(&reply.parts), ["hi there"]);
                assert_eq!(reply.role, a2a_server::proto::Role::Agent as i32);
                let (items, error) = step(steps, "stream").as_stream();
                assert_eq!(error, None);
                assert!(
                    matches!(items, [StreamResponse { payload: Some(Payload::Message(m)) }] if texts(&m.parts) == ["hello"]),
                    "exactly one Message: {items:?}"
                );
            }
            Self::FailAndReject => {
                let failed = step(steps, "fail").reply_task();
                assert_eq!(state(failed), TaskState::Failed);
                assert!(!status_text(failed).is_empty(), "a FAILED status explains itself");
                assert_eq!(state(step(steps, "reject").reply_task()), TaskState::Rejected);
            }
            Self::StreamToInputRequired => {
                let (items, error) = step(steps, "stream input").as_stream();
                assert_eq!(error, None);
                assert_eq!(
                    item_state(items.last().unwrap()),
                    Some(TaskState::InputRequired),
                    "ends interrupted"
                );
                let (items, error) = step(steps, "stream answer").as_stream();
                assert_eq!(error, None);
                assert_eq!(chunks(items), ["blue"]);
                assert_eq!(item_state(items.last().unwrap()), Some(TaskState::Completed));
            }
            Self::ListFilters => {
                let waiting = step(steps, "status filter").as_list();
                assert_eq!(waiting.total_size, 1);
                assert_eq!(state(&waiting.tasks[0]), TaskState::InputRequired);
                let full = step(steps, "artifacts, no history").as_list();
                assert_eq!(full.total_size, 2);
                assert!(full.tasks.iter().all(|t| t.history.is_empty()), "historyLength=0");
                let artifacts: Vec<_> = full.tasks.iter().map(artifact_texts).collect();
                assert_eq!(artifacts, [vec!["hi".to_owned()], vec![]], "newest first, artifacts included");
            }
            Self::SubscribeTerminalTask
            | Self::CancelCompletedTask
            | Self::CreatePushConfig
            | Self::ExtendedCard
            | Self::FollowUpUnknownTask
            | Self::FollowUpTerminalTask => {}
        }
    }
}

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "(no message)".into())
}

/// Runs every scenario over every binding; reports every disagreement and every departure
/// from the spec at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_binding_gives_the_same_results() {
    let mut problems = Vec::new();
    for &scenario in SCENARIOS {
        let mut runs: Vec<(Binding, Steps)> = Vec::new();
        for binding in BINDINGS {
            match tokio::spawn(scenario.run_on(binding)).await {
                Ok(steps) => runs.push((binding, steps)),
                Err(error) => problems.push(format!(
                    "{scenario:?} over {binding:?} failed: {}",
                    panic_text(error.into_panic())
                )),
            }
        }
        for (binding, steps) in &runs {
            if let Err(payload) = std::panic::catch_unwind(AssertUnwindSafe(|| scenario.check(steps))) {
                problems.push(format!(
                    "{scenario:?} over {binding:?} is not what the spec says: {}",
                    panic_text(payload)
                ));
            }
        }
        let Some(((reference_binding, reference), others)) = runs.split_first() else { continue };
        for (binding, steps) in others {
            let labels = |steps: &Steps| steps.iter().map(|(l, _)| *l).collect::<Vec<_>>();
            if labels(steps) != labels(reference) {
                problems
                    .push(format!("{scenario:?}: {reference_binding:?} and {binding:?} ran different steps"));
                continue;
            }
            for ((label, expected), (_, actual)) in reference.iter().zip(steps) {
                if expected != actual {
                    problems.push(format!(
                        "{scenario:?}, step {label:?}: {reference_binding:?} and {binding:?} disagree\n\
                         {reference_binding:?}: {expected:#?}\n{binding:?}: {actual:#?}"
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{} problem(s):\n\n{}", problems.len(), problems.join("\n\n"));
}
