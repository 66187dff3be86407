//! An upstream over HTTP+JSON (v1.0): `POST /message:send` and `/message:stream`, `GET
//! /tasks/{id}`, `POST /tasks/{id}:cancel`, `GET /tasks/{id}:subscribe`, under the interface's
//! URL. Bodies are ProtoJSON; errors are an HTTP status with a `google.rpc.Status` body; streams
//! are Server-Sent Events of `StreamResponse`s.
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::StatusCode;
use reqwest::header::HeaderValue;
use serde_json::{Value, json};

use super::http::{self, Peer, invalid};
use super::{Endpoint, Events, UpstreamError};
use crate::proto::{SendMessageRequest, StreamResponse, Task};
use crate::protojson;

#[derive(Clone)]
pub(super) struct Rest {
    peer: Peer,
    base: String,
}

impl Rest {
    pub(super) fn new(mut peer: Peer, endpoint: &Endpoint) -> Self {
        peer.headers.insert("a2a-version", HeaderValue::from_static("1.0"));
        let base = endpoint.url.trim_end_matches('/').to_owned();
        Self { peer, base }
    }

    fn task_url(&self, task_id: &str, verb: &str) -> String {
        format!("{}/tasks/{}{verb}", self.base, utf8_percent_encode(task_id, NON_ALPHANUMERIC))
    }

    fn request(&self, method: reqwest::Method, url: String, accept: &'static str) -> reqwest::RequestBuilder {
        self.peer.request(method, &url, accept)
    }

    pub(super) async fn send(
        &self,
        request: SendMessageRequest,
        streaming: bool,
    ) -> Result<Events, UpstreamError> {
        let body = protojson::encode(&request);
        if streaming {
            let url = format!("{}/message:stream", self.base);
            let request = self.request(reqwest::Method::POST, url, "text/event-stream").json(&body);
            return http::events(request, &self.peer.settings, body_of, event).await;
        }
        let url = format!("{}/message:send", self.base);
        let request = self.request(reqwest::Method::POST, url, "application/json").json(&body);
        let event = event(http::json(request, &self.peer.settings, body_of).await?);
        Ok(Box::pin(futures::stream::once(async move { event })))
    }

    pub(super) async fn subscribe(&self, task_id: &str) -> Result<Events, UpstreamError> {
        let request =
            self.request(reqwest::Method::GET, self.task_url(task_id, ":subscribe"), "text/event-stream");
        http::events(request, &self.peer.settings, body_of, event).await
    }

    pub(super) async fn get_task(&self, task_id: &str) -> Result<Task, UpstreamError> {
        let request = self.request(reqwest::Method::GET, self.task_url(task_id, ""), "application/json");
        task(http::json(request, &self.peer.settings, body_of).await?)
    }

    pub(super) async fn cancel(&self, task_id: &str) -> Result<Task, UpstreamError> {
        let url = self.task_url(task_id, ":cancel");
        let request = self.request(reqwest::Method::POST, url, "application/json").json(&json!({}));
        task(http::json(request, &self.peer.settings, body_of).await?)
    }
}

fn event(body: Value) -> Result<StreamResponse, UpstreamError> {
    protojson::decode::<StreamResponse>(&body).map_err(invalid)
}

fn task(body: Value) -> Result<Task, UpstreamError> {
    protojson::decode::<Task>(&body).map_err(invalid)
}

/// A success's body, or a `google.rpc.Status` (`{"error": {code, status, message}}`) as a refusal.
fn body_of(status: StatusCode, body: Value) -> Result<Value, UpstreamError> {
    match body.get("error").filter(|e| e.is_object()) {
        Some(error) => {
            let name = error.get("status").and_then(Value::as_str).unwrap_or_default();
            let message = error.get("message").and_then(Value::as_str).unwrap_or_default();
            Err(UpstreamError::Refused(format!("HTTP {} {name}: {message}", status.as_u16())))
        }
        None if status.is_success() => Ok(body),
        None => Err(UpstreamError::Refused(format!("HTTP {status}"))),
    }
}
