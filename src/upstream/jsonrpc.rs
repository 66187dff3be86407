//! An upstream over JSON-RPC 2.0: v1.0 (ProtoJSON params and results, `A2A-Version: 1.0`) or
//! v0.3 (`message/send` and friends, rewritten to and from v1.0 by the v0.3 shim's
//! [`convert`](crate::transport::v03::convert)). Streams are Server-Sent Events whose data is a
//! JSON-RPC response per event.
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, HeaderValue};
use serde_json::{Value, json};

use super::http::{self, Peer, invalid};
use super::{Endpoint, Events, UpstreamError, UpstreamVersion};
use crate::proto::{SendMessageRequest, StreamResponse, Task};
use crate::protojson;
use crate::transport::v03::convert;

#[derive(Clone)]
pub(super) struct JsonRpc {
    peer: Peer,
    url: String,
    version: UpstreamVersion,
    ids: Arc<AtomicU64>,
}

/// The v1.0 and v0.3 method names of one operation.
struct Method {
    v10: &'static str,
    v03: &'static str,
}

const SEND: Method = Method { v10: "SendMessage", v03: "message/send" };
const STREAM: Method = Method { v10: "SendStreamingMessage", v03: "message/stream" };
const GET: Method = Method { v10: "GetTask", v03: "tasks/get" };
const CANCEL: Method = Method { v10: "CancelTask", v03: "tasks/cancel" };
const SUBSCRIBE: Method = Method { v10: "SubscribeToTask", v03: "tasks/resubscribe" };

impl JsonRpc {
    pub(super) fn new(mut peer: Peer, endpoint: &Endpoint) -> Self {
        if endpoint.version == UpstreamVersion::V10 {
            peer.headers.insert("a2a-version", HeaderValue::from_static("1.0"));
        }
        peer.headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let ids = Arc::new(AtomicU64::new(1));
        Self { peer, url: endpoint.url.clone(), version: endpoint.version, ids }
    }

    fn request(&self, method: &Method, params: Value, accept: &'static str) -> reqwest::RequestBuilder {
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        let name = match self.version {
            UpstreamVersion::V10 => method.v10,
            UpstreamVersion::V03 => method.v03,
        };
        let body = json!({"jsonrpc": "2.0", "id": id, "method": name, "params": params});
        self.peer.request(reqwest::Method::POST, &self.url, accept).json(&body)
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

    /// One call answered with one JSON-RPC response.
    async fn call(&self, method: &Method, params: Value) -> Result<Value, UpstreamError> {
        let request = self.request(method, params, "application/json");
        http::json(request, &self.peer.settings, result_of).await
    }

    /// A call answered with a stream of events.
    async fn stream(&self, method: &Method, params: Value) -> Result<Events, UpstreamError> {
        let version = self.version;
        let request = self.request(method, params, "text/event-stream");
        http::events(request, &self.peer.settings, result_of, move |result| event(version, result)).await
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
        let event = event(self.version, self.call(&SEND, params).await?);
        Ok(Box::pin(futures::stream::once(async move { event })))
    }

    pub(super) async fn subscribe(&self, task_id: &str) -> Result<Events, UpstreamError> {
        self.stream(&SUBSCRIBE, json!({"id": task_id})).await
    }

    pub(super) async fn get_task(&self, task_id: &str) -> Result<Task, UpstreamError> {
        task(self.version, self.call(&GET, json!({"id": task_id})).await?)
    }

    pub(super) async fn cancel(&self, task_id: &str) -> Result<Task, UpstreamError> {
        task(self.version, self.call(&CANCEL, json!({"id": task_id})).await?)
    }
}

/// A result as a v1.0 `StreamResponse` (a v1.0 `SendMessageResponse` has the same shape).
fn event(version: UpstreamVersion, result: Value) -> Result<StreamResponse, UpstreamError> {
    let result = match version {
        UpstreamVersion::V10 => result,
        UpstreamVersion::V03 => convert::result_in(&result).map_err(invalid)?,
    };
    protojson::decode::<StreamResponse>(&result).map_err(invalid)
}

fn task(version: UpstreamVersion, result: Value) -> Result<Task, UpstreamError> {
    let result = match version {
        UpstreamVersion::V10 => result,
        UpstreamVersion::V03 => {
            convert::result_in(&result).map_err(invalid)?.get("task").cloned().unwrap_or_default()
        }
    };
    protojson::decode::<Task>(&result).map_err(invalid)
}

/// The `result` of a JSON-RPC response, or its `error` as a refusal.
fn result_of(_: StatusCode, mut answer: Value) -> Result<Value, UpstreamError> {
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
