//! One A2A client over three bindings: gRPC (the tonic client), JSON-RPC and HTTP+JSON
//! (reqwest). Results are decoded into the generated proto types (JSON through
//! `protojson::decode_described`, the reference reader); errors become [`Failure`]s; the
//! envelope, content types and SSE ids are checked on the way.

use std::sync::atomic::{AtomicI64, Ordering};

use a2a_server::proto::a2a_service_client::A2aServiceClient;
use a2a_server::proto::{
    AgentCard, CancelTaskRequest, GetExtendedAgentCardRequest, GetTaskRequest, ListTasksRequest,
    ListTasksResponse, SendMessageRequest, SendMessageResponse, StreamResponse, SubscribeToTaskRequest, Task,
    TaskPushNotificationConfig,
};
use a2a_server::protojson::{decode_described, encode};
use reqwest::Method;
use serde_json::{Value, json};
use tonic::transport::Channel;

use super::failure::{Failure, grpc_failure, jsonrpc_failure, rest_failure};
use super::{PATIENCE, SseReader, TestServer, rpc};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    Grpc,
    JsonRpc,
    HttpJson,
}

pub const BINDINGS: [Binding; 3] = [Binding::Grpc, Binding::JsonRpc, Binding::HttpJson];

pub fn from_json<T: prost::Message + prost::Name + Default>(value: &Value) -> T {
    decode_described(value).unwrap_or_else(|e| panic!("not a {}: {e}: {value}", T::NAME))
}

fn is_sse(response: &reqwest::Response) -> bool {
    let content_type = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
    content_type.starts_with("text/event-stream")
}

fn is_json(response: &reqwest::Response) -> bool {
    let content_type = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
    content_type.contains("json")
}

/// A unary gRPC answer, its error reduced to a [`Failure`].
fn unary<T>(result: Result<tonic::Response<T>, tonic::Status>) -> Result<T, Failure> {
    result.map(tonic::Response::into_inner).map_err(|status| grpc_failure(&status))
}

/// A streaming gRPC answer as an [`ItemStream`].
fn streaming(
    result: Result<tonic::Response<tonic::Streaming<StreamResponse>>, tonic::Status>,
) -> Result<ItemStream, Failure> {
    unary(result).map(|stream| ItemStream::Grpc(Box::new(stream)))
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

/// An A2A client speaking one binding to one server; every call carries its `A2A-Version`.
pub struct Client {
    binding: Binding,
    base: String,
    grpc: A2aServiceClient<Channel>,
    http: reqwest::Client,
    /// The `A2A-Version` every call carries.
    version: String,
    /// Extra service parameters every call carries (`A2A-Extensions`, `A2A-Last-Generation`,
    /// `Last-Event-ID`), as lowercase names.
    headers: Vec<(&'static str, String)>,
    ids: AtomicI64,
}

/// A stream of `StreamResponse`s on any binding.
pub enum ItemStream {
    Grpc(Box<tonic::Streaming<StreamResponse>>),
    JsonRpc { events: SseReader, id: i64 },
    HttpJson { events: SseReader, last_id: Option<u64> },
}

impl ItemStream {
    /// The next item or error; `None` once the server ended the stream.
    pub async fn next(&mut self) -> Option<Result<StreamResponse, Failure>> {
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
    pub async fn finish(mut self) -> (Vec<StreamResponse>, Option<Failure>) {
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
    pub async fn connect(server: &TestServer, binding: Binding, version: &str) -> Self {
        Self::to(server.url(), server.client().await, binding, version)
    }

    /// A client of the server at `base` (`http://IP:PORT`, e.g. a fleet's replica), whose gRPC
    /// calls go through `grpc`.
    pub fn to(base: String, grpc: A2aServiceClient<Channel>, binding: Binding, version: &str) -> Self {
        Self {
            binding,
            base,
            grpc,
            http: reqwest::Client::new(),
            version: version.to_owned(),
            headers: Vec::new(),
            ids: AtomicI64::new(1),
        }
    }

    /// The binding it calls.
    pub fn binding(&self) -> Binding {
        self.binding
    }

    /// The same client, every call also carrying `name: value` (HTTP header, gRPC metadata).
    pub fn with_header(&self, name: &'static str, value: impl Into<String>) -> Self {
        let mut headers = self.headers.clone();
        headers.push((name, value.into()));
        Self {
            binding: self.binding,
            base: self.base.clone(),
            grpc: self.grpc.clone(),
            http: self.http.clone(),
            version: self.version.clone(),
            headers,
            ids: AtomicI64::new(self.ids.load(Ordering::Relaxed) + 1000),
        }
    }

    fn grpc_request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        request.metadata_mut().insert("a2a-version", self.version.parse().expect("ASCII"));
        for (name, value) in &self.headers {
            request.metadata_mut().insert(*name, value.parse().expect("ASCII"));
        }
        request
    }

    fn http_request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let mut request =
            self.http.request(method, format!("{}{path}", self.base)).header("A2A-Version", &self.version);
        for (name, value) in &self.headers {
            request = request.header(*name, value);
        }
        request
    }

    async fn jsonrpc<T: prost::Message + prost::Name + Default>(
        &self,
        method: &str,
        params: Value,
    ) -> Result<T, Failure> {
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
            None => Ok(from_json(&body["result"])),
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

    async fn rest<T: prost::Message + prost::Name + Default>(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<T, Failure> {
        let mut request = self.http_request(method, path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("HTTP+JSON");
        let status = response.status().as_u16();
        assert!(is_json(&response), "{path}: {:?}", response.headers());
        let body: Value = response.json().await.expect("a JSON body");
        if (200..300).contains(&status) { Ok(from_json(&body)) } else { Err(rest_failure(status, &body)) }
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

    pub async fn send(&self, request: SendMessageRequest) -> Result<SendMessageResponse, Failure> {
        match self.binding {
            Binding::Grpc => unary(self.grpc.clone().send_message(self.grpc_request(request)).await),
            Binding::JsonRpc => self.jsonrpc("SendMessage", encode(&request)).await,
            Binding::HttpJson => self.rest(Method::POST, "/message:send", Some(encode(&request))).await,
        }
    }

    pub async fn send_streaming(&self, request: SendMessageRequest) -> Result<ItemStream, Failure> {
        match self.binding {
            Binding::Grpc => {
                streaming(self.grpc.clone().send_streaming_message(self.grpc_request(request)).await)
            }
            Binding::JsonRpc => self.jsonrpc_stream("SendStreamingMessage", encode(&request)).await,
            Binding::HttpJson => {
                self.rest_stream(Method::POST, "/message:stream", Some(encode(&request))).await
            }
        }
    }

    pub async fn subscribe(&self, id: &str) -> Result<ItemStream, Failure> {
        let request = SubscribeToTaskRequest { id: id.to_owned(), ..Default::default() };
        match self.binding {
            Binding::Grpc => streaming(self.grpc.clone().subscribe_to_task(self.grpc_request(request)).await),
            Binding::JsonRpc => self.jsonrpc_stream("SubscribeToTask", encode(&request)).await,
            Binding::HttpJson => self.rest_stream(Method::GET, &format!("/tasks/{id}:subscribe"), None).await,
        }
    }

    pub async fn get(&self, request: GetTaskRequest) -> Result<Task, Failure> {
        match self.binding {
            Binding::Grpc => unary(self.grpc.clone().get_task(self.grpc_request(request)).await),
            Binding::JsonRpc => self.jsonrpc("GetTask", encode(&request)).await,
            Binding::HttpJson => {
                let query = query_string(&encode(&request), &["id", "tenant"]);
                let path = format!("/tasks/{}{query}", request.id);
                self.rest(Method::GET, &path, None).await
            }
        }
    }

    pub async fn list(&self, request: ListTasksRequest) -> Result<ListTasksResponse, Failure> {
        match self.binding {
            Binding::Grpc => unary(self.grpc.clone().list_tasks(self.grpc_request(request)).await),
            Binding::JsonRpc => self.jsonrpc("ListTasks", encode(&request)).await,
            Binding::HttpJson => {
                let path = format!("/tasks{}", query_string(&encode(&request), &["tenant"]));
                self.rest(Method::GET, &path, None).await
            }
        }
    }

    pub async fn cancel(&self, id: &str) -> Result<Task, Failure> {
        let request = CancelTaskRequest { id: id.to_owned(), ..Default::default() };
        match self.binding {
            Binding::Grpc => unary(self.grpc.clone().cancel_task(self.grpc_request(request)).await),
            Binding::JsonRpc => self.jsonrpc("CancelTask", encode(&request)).await,
            Binding::HttpJson => {
                let path = format!("/tasks/{id}:cancel");
                self.rest(Method::POST, &path, Some(encode(&request))).await
            }
        }
    }

    pub async fn create_push_config(
        &self,
        config: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, Failure> {
        match self.binding {
            Binding::Grpc => {
                unary(self.grpc.clone().create_task_push_notification_config(self.grpc_request(config)).await)
            }
            Binding::JsonRpc => self.jsonrpc("CreateTaskPushNotificationConfig", encode(&config)).await,
            Binding::HttpJson => {
                let path = format!("/tasks/{}/pushNotificationConfigs", config.task_id);
                self.rest(Method::POST, &path, Some(encode(&config))).await
            }
        }
    }

    pub async fn extended_card(&self) -> Result<AgentCard, Failure> {
        match self.binding {
            Binding::Grpc => unary(
                self.grpc
                    .clone()
                    .get_extended_agent_card(self.grpc_request(GetExtendedAgentCardRequest::default()))
                    .await,
            ),
            Binding::JsonRpc => self.jsonrpc("GetExtendedAgentCard", json!({})).await,
            Binding::HttpJson => self.rest(Method::GET, "/extendedAgentCard", None).await,
        }
    }
}
