//! An upstream over JSON-RPC 2.0: v1.0 (ProtoJSON params and results, `A2A-Version: 1.0`) or
//! v0.3 (`message/send` and friends, rewritten to and from v1.0 by the v0.3 shim's
//! [`convert`](crate::transport::v03::convert)). Streams are Server-Sent Events whose data is a
//! JSON-RPC response per event.
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap};
use serde_json::{Value, json};

use super::sse::SseDecoder;
use super::{Endpoint, Events, UpstreamError, UpstreamSettings, UpstreamVersion};
use crate::proto::{SendMessageRequest, StreamResponse, Task};
use crate::protojson;
use crate::transport::v03::convert;

/// The HTTP client every JSON-RPC upstream call (and the card's GET) goes through.
pub(super) fn http_client(settings: &UpstreamSettings) -> Result<reqwest::Client, String> {
    let mut builder = reqwest::Client::builder()
        .connect_timeout(settings.call_timeout)
        // A stream may be quiet for a long time; a dead peer is found by keepalive instead.
        .tcp_keepalive(std::time::Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::limited(3));
    if let Some(pem) = &settings.tls_ca_pem {
        let certificates =
            reqwest::Certificate::from_pem_bundle(pem).map_err(|e| format!("--upstream-ca: {e}"))?;
        builder = builder.tls_certs_only(certificates);
    }
    if let Some((certificate, key)) = &settings.tls_identity {
        let pem = [certificate.as_slice(), b"\n", key.as_slice()].concat();
        let identity =
            reqwest::Identity::from_pem(&pem).map_err(|e| format!("--upstream-client-cert/-key: {e}"))?;
        builder = builder.identity(identity);
    }
    builder.build().map_err(|e| format!("the upstream HTTP client: {e}"))
}

#[derive(Clone)]
pub(super) struct JsonRpc {
    http: reqwest::Client,
    headers: HeaderMap,
    url: String,
    version: UpstreamVersion,
    settings: Arc<UpstreamSettings>,
    ids: Arc<AtomicU64>,
}

/// The v1.0 and v0.3 method names of one operation.
struct Method {
    v10: &'static str,
    v03: &'static str,
    /// A blocking send lasts as long as the task runs: no time limit but the connection's.
    unbounded: bool,
}

const SEND: Method = Method { v10: "SendMessage", v03: "message/send", unbounded: true };
const STREAM: Method = Method { v10: "SendStreamingMessage", v03: "message/stream", unbounded: false };
const GET: Method = Method { v10: "GetTask", v03: "tasks/get", unbounded: false };
const CANCEL: Method = Method { v10: "CancelTask", v03: "tasks/cancel", unbounded: false };
const SUBSCRIBE: Method = Method { v10: "SubscribeToTask", v03: "tasks/resubscribe", unbounded: false };

impl JsonRpc {
    pub(super) fn new(
        http: reqwest::Client,
        mut headers: HeaderMap,
        endpoint: &Endpoint,
        settings: Arc<UpstreamSettings>,
    ) -> Self {
        if endpoint.version == UpstreamVersion::V10 {
            headers.insert("a2a-version", reqwest::header::HeaderValue::from_static("1.0"));
        }
        headers.insert(CONTENT_TYPE, reqwest::header::HeaderValue::from_static("application/json"));
        let ids = Arc::new(AtomicU64::new(1));
        Self { http, headers, url: endpoint.url.clone(), version: endpoint.version, settings, ids }
    }

    fn method(&self, method: &Method) -> &'static str {
        match self.version {
            UpstreamVersion::V10 => method.v10,
            UpstreamVersion::V03 => method.v03,
        }
    }

    fn body(&self, method: &Method, params: Value) -> Value {
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        json!({"jsonrpc": "2.0", "id": id, "method": self.method(method), "params": params})
    }

    /// A send's params: v1.0's request as ProtoJSON, or v0.3's `MessageSendParams`.
    fn send_params(&self, request: &SendMessageRequest) -> Value {
        let v10 = protojson::encode(request);
        if self.version == UpstreamVersion::V10 {
            return v10;
        }
        let mut params = json!({"message": convert::message_out(&v10["message"])});
        if let Some(metadata) = v10.get("metadata") {
            params["metadata"] = metadata.clone();
        }
        if let Some(modes) = v10.pointer("/configuration/acceptedOutputModes") {
            params["configuration"] = json!({"acceptedOutputModes": modes});
        }
        if v10.pointer("/configuration/returnImmediately") == Some(&Value::Bool(true)) {
            params["configuration"]["blocking"] = false.into();
        }
        params
    }

    fn id_params(&self, task_id: &str) -> Value {
        json!({"id": task_id})
    }

    /// One call answered with one JSON-RPC response.
    async fn call(&self, method: &Method, params: Value) -> Result<Value, UpstreamError> {
        let mut request = self.http.post(&self.url).headers(self.headers.clone());
        if !method.unbounded {
            request = request.timeout(self.settings.call_timeout);
        }
        let response = request
            .header(ACCEPT, "application/json")
            .json(&self.body(method, params))
            .send()
            .await
            .map_err(unreachable)?;
        let status = response.status();
        let bytes = read_capped(response, self.settings.max_event_bytes).await?;
        let answer: Value = serde_json::from_slice(&bytes)
            .map_err(|e| UpstreamError::Invalid(format!("HTTP {status}, not a JSON-RPC response: {e}")))?;
        result_of(answer)
    }

    /// A call answered with a stream of events.
    async fn stream(&self, method: &Method, params: Value) -> Result<Events, UpstreamError> {
        let request = self
            .http
            .post(&self.url)
            .headers(self.headers.clone())
            .header(ACCEPT, "text/event-stream")
            .json(&self.body(method, params))
            .send();
        // The stream itself may be quiet for as long as the task runs; its start may not.
        let response = tokio::time::timeout(self.settings.call_timeout, request)
            .await
            .map_err(|_| UpstreamError::Unreachable("no answer within --upstream-timeout-ms".into()))?
            .map_err(unreachable)?;
        let is_sse = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_sse {
            // An error (or a server that does not stream) answers with one JSON-RPC response.
            let status = response.status();
            let bytes = read_capped(response, self.settings.max_event_bytes).await?;
            let answer: Value = serde_json::from_slice(&bytes)
                .map_err(|e| UpstreamError::Invalid(format!("HTTP {status}, neither SSE nor JSON: {e}")))?;
            let event = self.event(result_of(answer)?);
            return Ok(Box::pin(futures::stream::once(async move { event })));
        }
        let mut decoder = SseDecoder::new(self.settings.max_event_bytes);
        let this = self.clone();
        let body = response.bytes_stream();
        Ok(Box::pin(async_stream::stream! {
            futures::pin_mut!(body);
            while let Some(chunk) = body.next().await {
                let chunk = match chunk {
                    Ok(chunk) => chunk,
                    Err(error) => {
                        yield Err(UpstreamError::Unreachable(format!("the stream broke: {error}")));
                        return;
                    }
                };
                let events = match decoder.push(&chunk) {
                    Ok(events) => events,
                    Err(error) => {
                        yield Err(UpstreamError::Invalid(error));
                        return;
                    }
                };
                for data in events {
                    let event = serde_json::from_slice::<Value>(&data)
                        .map_err(|e| UpstreamError::Invalid(format!("an SSE event is not JSON: {e}")))
                        .and_then(result_of)
                        .and_then(|result| this.event(result));
                    let failed = event.is_err();
                    yield event;
                    if failed {
                        return;
                    }
                }
            }
        }))
    }

    /// A result as a v1.0 `StreamResponse` (a v1.0 `SendMessageResponse` has the same shape).
    fn event(&self, result: Value) -> Result<StreamResponse, UpstreamError> {
        let result = match self.version {
            UpstreamVersion::V10 => result,
            UpstreamVersion::V03 => convert::result_in(&result).map_err(invalid)?,
        };
        protojson::decode::<StreamResponse>(&result).map_err(invalid)
    }

    fn task(&self, result: Value) -> Result<Task, UpstreamError> {
        let result = match self.version {
            UpstreamVersion::V10 => result,
            UpstreamVersion::V03 => {
                convert::result_in(&result).map_err(invalid)?.get("task").cloned().unwrap_or_default()
            }
        };
        protojson::decode::<Task>(&result).map_err(invalid)
    }

    pub(super) async fn send(
        &self,
        request: SendMessageRequest,
        streaming: bool,
    ) -> Result<Events, UpstreamError> {
        let params = self.send_params(&request);
        if streaming {
            return self.stream(&STREAM, params).await;
        }
        let event = self.event(self.call(&SEND, params).await?);
        Ok(Box::pin(futures::stream::once(async move { event })))
    }

    pub(super) async fn subscribe(&self, task_id: &str) -> Result<Events, UpstreamError> {
        self.stream(&SUBSCRIBE, self.id_params(task_id)).await
    }

    pub(super) async fn get_task(&self, task_id: &str) -> Result<Task, UpstreamError> {
        let result = self.call(&GET, self.id_params(task_id)).await?;
        self.task(result)
    }

    pub(super) async fn cancel(&self, task_id: &str) -> Result<Task, UpstreamError> {
        let result = self.call(&CANCEL, self.id_params(task_id)).await?;
        self.task(result)
    }
}

/// The `result` of a JSON-RPC response, or its `error` as a refusal.
fn result_of(mut answer: Value) -> Result<Value, UpstreamError> {
    if let Some(error) = answer.get("error").filter(|e| !e.is_null()) {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or_default();
        let message = error.get("message").and_then(Value::as_str).unwrap_or_default();
        return Err(UpstreamError::Refused(format!("JSON-RPC error {code}: {message}")));
    }
    match answer.get_mut("result") {
        Some(result) => Ok(result.take()),
        None => Err(UpstreamError::Invalid("a JSON-RPC response without result or error".into())),
    }
}

/// The whole body, refusing one over `limit` bytes.
async fn read_capped(response: reqwest::Response, limit: usize) -> Result<Vec<u8>, UpstreamError> {
    let mut body = response.bytes_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(unreachable)?;
        if bytes.len() + chunk.len() > limit {
            return Err(UpstreamError::Invalid(format!("an answer over {limit} bytes")));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

fn unreachable(error: reqwest::Error) -> UpstreamError {
    // The error's source chain says why (refused, reset, timed out); its Display alone does not.
    let mut why = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(inner) = source {
        why = format!("{why}: {inner}");
        source = inner.source();
    }
    UpstreamError::Unreachable(why)
}

fn invalid(error: impl std::fmt::Display) -> UpstreamError {
    UpstreamError::Invalid(error.to_string())
}
