//! The JSON bindings: JSON-RPC 2.0 (`POST /`) and HTTP+JSON (`POST /message:send`,
//! `GET /tasks/{id}:subscribe`), both ProtoJSON, streams as Server-Sent Events.
//!
//! Bodies go through [`a2a_server::protojson`], the server's own descriptor-driven codec.
//!
//! They ride on tonic's `Channel` used as a plain HTTP/2 client (h2c, prior knowledge), which
//! the server accepts on its one port: no HTTP client crate is needed, and one connection
//! multiplexes many SSE streams just as it does gRPC streams, so the scenarios open the same
//! number of connections on every binding. (HTTP/1.1 would need a connection per open stream.)
use std::collections::VecDeque;

use a2a_server::proto::{
    ListTasksRequest, ListTasksResponse, SendMessageRequest, SendMessageResponse, StreamResponse, Task,
};
use a2a_server::protojson;
use axum::body::{Body as AxumBody, BodyDataStream, Bytes};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::Value;
use tonic::codegen::Service;
use tonic::codegen::http::{self, Request, Response, header};
use tonic::transport::Channel;

use crate::BoxError;

/// Which of the two JSON bindings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    JsonRpc,
    Rest,
}

/// What a [`JsonConn`]'s requests travel on.
#[derive(Clone)]
pub enum Transport {
    /// tonic's `Channel`: reconnects, and buffers calls through a task of its own.
    Channel(Channel),
    /// One bare hyper HTTP/2 connection, as the gRPC unary load uses (see `bare.rs`), so
    /// that the JSON and gRPC unary rows differ in the binding alone, not in the client.
    Bare(super::bare::H2),
}

/// One HTTP/2 connection speaking a JSON binding.
#[derive(Clone)]
pub struct JsonConn {
    pub flavor: Flavor,
    pub transport: Transport,
    /// Base URL without a trailing slash.
    pub base: String,
    /// A header every request carries.
    pub credential: Option<super::Credential>,
}

/// A JSON-RPC response; `id` and `jsonrpc` are not checked (one call per stream).
#[derive(Deserialize)]
struct Envelope {
    result: Option<Value>,
    error: Option<Value>,
}

impl JsonConn {
    async fn call(
        &self,
        method: http::Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Response<AxumBody>, BoxError> {
        let mut request = Request::builder().method(method).uri(format!("{}{path}", self.base));
        if body.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/json");
        }
        if let Some(credential) = &self.credential {
            request = request.header(&credential.header, &credential.value);
        }
        let body = tonic::body::Body::new(body.map(AxumBody::from).unwrap_or_else(AxumBody::empty));
        let request = request.body(body)?;
        Ok(match &self.transport {
            Transport::Channel(channel) => Self::call_on(channel.clone(), request).await?.map(AxumBody::new),
            Transport::Bare(h2) => Self::call_on(h2.clone(), request).await?.map(AxumBody::new),
        })
    }

    async fn call_on<S>(mut service: S, request: Request<tonic::body::Body>) -> Result<S::Response, BoxError>
    where
        S: Service<Request<tonic::body::Body>>,
        S::Error: Into<BoxError>,
    {
        std::future::poll_fn(|cx| service.poll_ready(cx)).await.map_err(Into::into)?;
        service.call(request).await.map_err(Into::into)
    }

    fn rpc(method: &str, params: &Value) -> Result<Vec<u8>, BoxError> {
        Ok(Self::rpc_text(method, &serde_json::to_string(params)?).into_bytes())
    }

    /// A JSON-RPC request around params already written as JSON.
    fn rpc_text(method: &str, params: &str) -> String {
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{params}}}"#)
    }

    /// SendMessage.
    pub async fn send(&self, request: &SendMessageRequest) -> Result<SendMessageResponse, BoxError> {
        let (path, body) = match self.flavor {
            Flavor::JsonRpc => {
                ("/", Self::rpc_text("SendMessage", &protojson::encode_string(request)).into_bytes())
            }
            Flavor::Rest => ("/message:send", protojson::encode_string(request).into_bytes()),
        };
        let response = self.call(http::Method::POST, path, Some(body)).await?;
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 64 << 20).await?;
        self.decode(status, &bytes)
    }

    /// ListTasks (the page size only).
    pub async fn list_tasks(&self, request: &ListTasksRequest) -> Result<ListTasksResponse, BoxError> {
        let page_size = request.page_size.unwrap_or(50);
        let params = serde_json::json!({ "pageSize": page_size });
        self.read("ListTasks", &params, &format!("/tasks?pageSize={page_size}")).await
    }

    /// GetTask (no history).
    pub async fn get_task(&self, task_id: &str) -> Result<Task, BoxError> {
        let params = serde_json::json!({ "id": task_id, "historyLength": 0 });
        self.read("GetTask", &params, &format!("/tasks/{task_id}?historyLength=0")).await
    }

    /// A read-only method: JSON-RPC `method` with `params`, or HTTP+JSON `GET rest_path`.
    async fn read<M>(&self, method: &str, params: &Value, rest_path: &str) -> Result<M, BoxError>
    where
        M: protojson::Encode + Default,
    {
        let response = match self.flavor {
            Flavor::JsonRpc => self.call(http::Method::POST, "/", Some(Self::rpc(method, params)?)).await?,
            Flavor::Rest => self.call(http::Method::GET, rest_path, None).await?,
        };
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 64 << 20).await?;
        self.decode(status, &bytes)
    }

    /// CancelTask; the answer is checked for success only.
    pub async fn cancel(&self, task_id: &str) -> Result<(), BoxError> {
        let response = match self.flavor {
            Flavor::JsonRpc => {
                let body = Self::rpc("CancelTask", &serde_json::json!({ "id": task_id }))?;
                self.call(http::Method::POST, "/", Some(body)).await?
            }
            Flavor::Rest => self.call(http::Method::POST, &format!("/tasks/{task_id}:cancel"), None).await?,
        };
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 64 << 20).await?;
        let failed = match self.flavor {
            Flavor::Rest => !status.is_success(),
            Flavor::JsonRpc => serde_json::from_slice::<Envelope>(&bytes)?.error.is_some(),
        };
        if failed { Err(self.error(status, &bytes)) } else { Ok(()) }
    }

    /// SubscribeToTask: resolves when the server has sent the response head.
    pub async fn subscribe(&self, task_id: &str) -> Result<SseStream, BoxError> {
        let response = match self.flavor {
            Flavor::JsonRpc => {
                let body = Self::rpc("SubscribeToTask", &serde_json::json!({ "id": task_id }))?;
                self.call(http::Method::POST, "/", Some(body)).await?
            }
            Flavor::Rest => {
                self.call(http::Method::GET, &format!("/tasks/{task_id}:subscribe"), None).await?
            }
        };
        self.sse(response).await
    }

    /// SendStreamingMessage: resolves when the server has sent the response head.
    pub async fn send_streaming(&self, request: &SendMessageRequest) -> Result<SseStream, BoxError> {
        let (path, body) = match self.flavor {
            Flavor::JsonRpc => ("/", Self::rpc("SendStreamingMessage", &protojson::encode(request))?),
            Flavor::Rest => ("/message:stream", protojson::encode_string(request).into_bytes()),
        };
        let response = self.call(http::Method::POST, path, Some(body)).await?;
        self.sse(response).await
    }

    /// The SSE stream of a response, or the error it carries instead.
    async fn sse(&self, response: Response<AxumBody>) -> Result<SseStream, BoxError> {
        let is_sse = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.starts_with("text/event-stream"));
        if !is_sse {
            let status = response.status();
            let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await?;
            return Err(self.error(status, &bytes));
        }
        Ok(SseStream {
            flavor: self.flavor,
            body: response.into_body().into_data_stream(),
            buffer: Vec::new(),
            ready: VecDeque::new(),
        })
    }

    fn decode<M>(&self, status: http::StatusCode, bytes: &[u8]) -> Result<M, BoxError>
    where
        M: protojson::Encode + Default,
    {
        match self.flavor {
            Flavor::Rest if status.is_success() => Ok(protojson::decode(&serde_json::from_slice(bytes)?)?),
            Flavor::Rest => Err(self.error(status, bytes)),
            Flavor::JsonRpc => match serde_json::from_slice::<Envelope>(bytes)? {
                Envelope { result: Some(result), .. } => Ok(protojson::decode(&result)?),
                Envelope { error, .. } => {
                    Err(format!("JSON-RPC error: {}", error.unwrap_or_default()).into())
                }
            },
        }
    }

    fn error(&self, status: http::StatusCode, bytes: &[u8]) -> BoxError {
        format!("HTTP {status}: {}", String::from_utf8_lossy(&bytes[..bytes.len().min(500)])).into()
    }
}

/// An SSE response body, parsed into `StreamResponse`s.
pub struct SseStream {
    flavor: Flavor,
    body: BodyDataStream,
    /// Bytes of an event not yet complete.
    buffer: Vec<u8>,
    /// Complete events not yet handed out: (event type, data).
    ready: VecDeque<(String, String)>,
}

impl SseStream {
    /// The next item; `None` once the server ended the stream.
    pub async fn next(&mut self) -> Result<Option<StreamResponse>, BoxError> {
        loop {
            if let Some((kind, data)) = self.ready.pop_front() {
                if kind == "error" {
                    return Err(format!("error event: {data}").into());
                }
                return Ok(Some(match self.flavor {
                    Flavor::Rest => protojson::decode::<StreamResponse>(&serde_json::from_str(&data)?)?,
                    Flavor::JsonRpc => match serde_json::from_str::<Envelope>(&data)? {
                        Envelope { result: Some(result), .. } => protojson::decode(&result)?,
                        Envelope { error, .. } => {
                            return Err(format!("JSON-RPC error event: {}", error.unwrap_or_default()).into());
                        }
                    },
                }));
            }
            match self.body.next().await {
                Some(Ok(chunk)) => self.absorb(&chunk),
                Some(Err(error)) => return Err(error.into()),
                None => return Ok(None),
            }
        }
    }

    /// Adds received bytes; every complete event (ended by a blank line) moves to `ready`.
    /// Comment lines (the keep-alives) and `id:` are dropped; an event without data is skipped.
    fn absorb(&mut self, chunk: &Bytes) {
        self.buffer.extend_from_slice(chunk);
        while let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
            let raw: Vec<u8> = self.buffer.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&raw);
            let (mut kind, mut data) = (String::from("message"), Vec::new());
            for line in text.lines().map(|l| l.strip_suffix('\r').unwrap_or(l)) {
                if let Some(value) = line.strip_prefix("data:") {
                    data.push(value.strip_prefix(' ').unwrap_or(value));
                } else if let Some(value) = line.strip_prefix("event:") {
                    kind = value.trim().to_owned();
                }
            }
            if !data.is_empty() {
                self.ready.push_back((kind, data.join("\n")));
            }
        }
    }
}
