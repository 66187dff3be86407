//! The two ways the fault suite's clients stream: gRPC (`SendStreamingMessage`,
//! `SubscribeToTask` with `a2a-last-generation`) and SSE over HTTP+JSON (`POST /message:stream`,
//! `GET /tasks/{id}:subscribe` with `Last-Event-ID`), both with the resume extension active.
//! Each reduces what arrives to [`Next`]: an item, the end, or an error with its ErrorInfo
//! reason (none when it did not come from a replica: an nginx 502, a reset, a stall).
use std::pin::Pin;
use std::time::Duration;

use a2a_server::call::RESUME_EXTENSION;
use a2a_server::proto::a2a_service_client::A2aServiceClient;
use a2a_server::proto::{Message, Role, SendMessageRequest, StreamResponse, SubscribeToTaskRequest};
use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde_json::Value;
use tonic::transport::Channel;
use tonic_types::StatusExt;

use super::ledger::Item;

/// How long a stream may stay silent before the client takes it for broken: the suite's
/// tasks emit every 100 ms, and SSE keep-alives come every 15 s.
const STALL: Duration = Duration::from_secs(20);

/// How a client reaches the fleet.
#[derive(Clone)]
pub enum Wire {
    Grpc(A2aServiceClient<Channel>),
    /// A client and the base URL (`http://IP:PORT`).
    Sse(reqwest::Client, String),
}

/// One open stream.
pub enum Open {
    Grpc(tonic::Streaming<StreamResponse>),
    Sse(SseBody),
}

/// What the shipped nginx.conf says in its own error answers (it sends an ErrorInfo too).
const FROM_NGINX: &str = "the load balancer";

/// The reason given to nginx's own error answers: no fault excuses them.
const NGINX_REASON: &str = "NGINX";

/// An error answer or a broken stream.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The ErrorInfo reason when a replica answered; [`NGINX_REASON`] when nginx did.
    pub reason: Option<String>,
    pub text: String,
    /// The resumable close's `lastGeneration`.
    pub last_generation: Option<i64>,
}

impl Failure {
    pub fn bare(text: impl Into<String>) -> Self {
        Self { reason: None, text: text.into(), last_generation: None }
    }

    pub fn from_status(status: &tonic::Status) -> Self {
        let info = status.get_error_details().error_info().cloned();
        let from_nginx = status.message().contains(FROM_NGINX);
        Self {
            reason: if from_nginx {
                Some(NGINX_REASON.into())
            } else {
                info.as_ref().map(|i| i.reason.clone())
            },
            text: format!("{:?} {}", status.code(), status.message()),
            last_generation: info.and_then(|i| i.metadata.get("lastGeneration").and_then(|g| g.parse().ok())),
        }
    }

    /// A `google.rpc.Status` JSON body (an HTTP error answer or an SSE `error` event), or
    /// whatever else came (nginx's HTML).
    fn from_body(status: Option<u16>, body: &str) -> Self {
        let json: Option<Value> = serde_json::from_str(body).ok();
        let detail = json.as_ref().and_then(|j| j.pointer("/error/details/0")).cloned();
        let short: String = body.chars().take(120).collect::<String>().replace('\n', " ");
        let reason = detail.as_ref().and_then(|d| d["reason"].as_str()).map(str::to_owned);
        Self {
            reason: if body.contains(FROM_NGINX) { Some(NGINX_REASON.into()) } else { reason },
            text: match status {
                Some(code) => format!("HTTP {code}: {short}"),
                None => short,
            },
            last_generation: detail
                .as_ref()
                .and_then(|d| d.pointer("/metadata/lastGeneration"))
                .and_then(|g| g.as_str())
                .and_then(|g| g.parse().ok()),
        }
    }
}

/// What a stream gave next.
pub enum Next {
    Item(Item),
    End,
    Error(Failure),
}

/// A user message with a fixed id: a retry sends the same one.
pub fn message(text: &str, message_id: &str) -> Message {
    Message {
        message_id: message_id.to_owned(),
        role: Role::User as i32,
        parts: vec![a2a_server::agent::text_part(text)],
        ..Default::default()
    }
}

impl Wire {
    /// A gRPC client on a channel of its own to `url` (nginx, or one replica), connecting
    /// lazily and reconnecting by itself.
    pub fn grpc(url: &str) -> Self {
        let channel = Channel::from_shared(url.to_owned()).unwrap().connect_timeout(Duration::from_secs(5));
        Wire::Grpc(A2aServiceClient::new(channel.connect_lazy()))
    }

    pub fn sse(base: &str) -> Self {
        let client = reqwest::Client::builder().connect_timeout(Duration::from_secs(5)).build().unwrap();
        Wire::Sse(client, base.to_owned())
    }

    pub fn name(&self) -> &'static str {
        match self {
            Wire::Grpc(_) => "grpc",
            Wire::Sse(..) => "sse",
        }
    }

    /// SendStreamingMessage `text` with `message_id`.
    pub async fn start(&mut self, text: &str, message_id: &str) -> Result<Open, Failure> {
        match self {
            Wire::Grpc(client) => {
                let request =
                    SendMessageRequest { message: Some(message(text, message_id)), ..Default::default() };
                let call = client.send_streaming_message(with_resume(tonic::Request::new(request), None));
                match tokio::time::timeout(STALL, call).await {
                    Ok(Ok(response)) => Ok(Open::Grpc(response.into_inner())),
                    Ok(Err(status)) => Err(Failure::from_status(&status)),
                    Err(_) => Err(Failure::bare("SendStreamingMessage: no answer in time")),
                }
            }
            Wire::Sse(client, base) => {
                let body = serde_json::json!({"message": {
                    "messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}});
                let request = client
                    .post(format!("{base}/message:stream"))
                    .header("a2a-extensions", RESUME_EXTENSION)
                    .json(&body);
                sse_open(request).await
            }
        }
    }

    /// SubscribeToTask, resuming after `cursor` when given.
    pub async fn subscribe(&mut self, task_id: &str, cursor: Option<i64>) -> Result<Open, Failure> {
        match self {
            Wire::Grpc(client) => {
                let request = SubscribeToTaskRequest { id: task_id.to_owned(), ..Default::default() };
                let call = client.subscribe_to_task(with_resume(tonic::Request::new(request), cursor));
                match tokio::time::timeout(STALL, call).await {
                    Ok(Ok(response)) => Ok(Open::Grpc(response.into_inner())),
                    Ok(Err(status)) => Err(Failure::from_status(&status)),
                    Err(_) => Err(Failure::bare("SubscribeToTask: no answer in time")),
                }
            }
            Wire::Sse(client, base) => {
                let mut request = client
                    .get(format!("{base}/tasks/{task_id}:subscribe"))
                    .header("a2a-extensions", RESUME_EXTENSION);
                if let Some(cursor) = cursor {
                    request = request.header("last-event-id", cursor.to_string());
                }
                sse_open(request).await
            }
        }
    }
}

fn with_resume<T>(mut request: tonic::Request<T>, cursor: Option<i64>) -> tonic::Request<T> {
    let metadata = request.metadata_mut();
    metadata.insert("a2a-extensions", RESUME_EXTENSION.parse().unwrap());
    if let Some(cursor) = cursor {
        metadata.insert("a2a-last-generation", cursor.to_string().parse().unwrap());
    }
    request
}

async fn sse_open(request: reqwest::RequestBuilder) -> Result<Open, Failure> {
    let response = match tokio::time::timeout(STALL, request.send()).await {
        Ok(Ok(response)) => response,
        Ok(Err(error)) => return Err(Failure::bare(format!("HTTP request failed: {error}"))),
        Err(_) => return Err(Failure::bare("HTTP: no answer in time")),
    };
    let status = response.status().as_u16();
    let is_sse = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if status != 200 || !is_sse {
        let body = tokio::time::timeout(STALL, response.text()).await.ok().and_then(Result::ok);
        return Err(Failure::from_body(Some(status), &body.unwrap_or_default()));
    }
    Ok(Open::Sse(SseBody { body: Box::pin(response.bytes_stream()), buffer: String::new() }))
}

impl Open {
    /// The next item, the end, or what broke the stream.
    pub async fn next(&mut self) -> Next {
        match self {
            Open::Grpc(stream) => match tokio::time::timeout(STALL, stream.message()).await {
                Err(_) => Next::Error(Failure::bare("gRPC stream stalled")),
                Ok(Ok(None)) => Next::End,
                Ok(Err(status)) => Next::Error(Failure::from_status(&status)),
                Ok(Ok(Some(item))) => match Item::from_proto(&item) {
                    Some(item) => Next::Item(item),
                    None => Next::Error(Failure::bare(format!("an item that is no task event: {item:?}"))),
                },
            },
            Open::Sse(body) => match body.next().await {
                Err(text) => Next::Error(Failure::bare(text)),
                Ok(None) => Next::End,
                Ok(Some((_, Some(kind), data))) if kind == "error" => {
                    Next::Error(Failure::from_body(None, &data))
                }
                Ok(Some((id, _, data))) => {
                    let json: Value = match serde_json::from_str(&data) {
                        Ok(json) => json,
                        Err(_) => return Next::Error(Failure::bare(format!("SSE data is not JSON: {data}"))),
                    };
                    let id = id.and_then(|id| id.parse().ok());
                    match Item::from_json(&json, id) {
                        Some(item) => Next::Item(item),
                        None => Next::Error(Failure::from_body(None, &data)),
                    }
                }
            },
        }
    }
}

/// An SSE response body read event by event.
pub struct SseBody {
    body: Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>,
    buffer: String,
}

impl SseBody {
    /// The next event's `(id, event, data)` (comments skipped); `None` at the end of the body;
    /// `Err` when it broke or stalled.
    async fn next(&mut self) -> Result<Option<(Option<String>, Option<String>, String)>, String> {
        // Keep-alive comments do not count: a stream that sends nothing else for this long
        // (the suite's tasks emit every 100 ms) is stuck.
        let deadline = tokio::time::Instant::now() + STALL;
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let (mut id, mut kind, mut data) = (None, None, None::<String>);
                for line in block.lines() {
                    let (field, value) = line.split_once(':').unwrap_or((line, ""));
                    let value = value.strip_prefix(' ').unwrap_or(value);
                    match field {
                        "id" => id = Some(value.to_owned()),
                        "event" => kind = Some(value.to_owned()),
                        "data" => match &mut data {
                            Some(data) => {
                                data.push('\n');
                                data.push_str(value);
                            }
                            None => data = Some(value.to_owned()),
                        },
                        _ => {}
                    }
                }
                if let Some(data) = data {
                    return Ok(Some((id, kind, data)));
                }
            }
            match tokio::time::timeout_at(deadline, self.body.next()).await {
                Err(_) => return Err("SSE stream stalled".to_owned()),
                Ok(None) if self.buffer.trim().is_empty() => return Ok(None),
                Ok(None) => return Err(format!("SSE body ended inside an event: {:?}", self.buffer)),
                Ok(Some(Err(error))) => return Err(format!("SSE body broke: {error}")),
                Ok(Some(Ok(chunk))) => self.buffer.push_str(&String::from_utf8_lossy(&chunk)),
            }
        }
    }
}
