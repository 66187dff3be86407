//! What the upstream's HTTP bindings (JSON-RPC, HTTP+JSON) share: the client, one JSON answer
//! read under a size limit, and an SSE stream read into events. A binding supplies how its
//! JSON is unwrapped (the JSON-RPC envelope, or an HTTP status and `google.rpc.Status` body)
//! and decoded into the v1.0 types.
use std::time::Duration;

use futures::StreamExt;
use reqwest::StatusCode;
use reqwest::header::CONTENT_TYPE;
use serde_json::Value;

use super::sse::SseDecoder;
use super::{Events, UpstreamError, UpstreamSettings};
use crate::proto::StreamResponse;

/// One HTTP upstream: the client, the headers every call carries (credentials, version), and
/// the settings its reads obey.
#[derive(Clone)]
pub(super) struct Peer {
    pub client: reqwest::Client,
    pub headers: reqwest::header::HeaderMap,
    pub settings: std::sync::Arc<UpstreamSettings>,
}

impl Peer {
    /// A request with the peer's headers, asking for `accept`.
    pub fn request(
        &self,
        method: reqwest::Method,
        url: &str,
        accept: &'static str,
    ) -> reqwest::RequestBuilder {
        let request = self.client.request(method, url).headers(self.headers.clone());
        request.header(reqwest::header::ACCEPT, accept)
    }
}

/// Turns one answer's JSON (and its HTTP status) into the binding's result, or a refusal.
pub(super) type Unwrap = fn(StatusCode, Value) -> Result<Value, UpstreamError>;

/// The HTTP client every call over HTTP (and the card's GET) goes through.
pub(super) fn client(settings: &UpstreamSettings) -> Result<reqwest::Client, String> {
    let mut builder = reqwest::Client::builder()
        .connect_timeout(settings.call_timeout)
        // A stream may be quiet for a long time; a dead peer is found by keepalive instead.
        .tcp_keepalive(Duration::from_secs(30))
        .tcp_keepalive_interval(Duration::from_secs(10))
        .tcp_keepalive_retries(3u32)
        // The headers carry the upstream's credentials: they go to the upstream's URL only.
        .redirect(reqwest::redirect::Policy::none());
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

/// Sends `request` and reads its whole JSON answer, unwrapped, within the call timeout (every
/// unary call: a send asks to be answered at once, or streams).
pub(super) async fn json(
    request: reqwest::RequestBuilder,
    settings: &UpstreamSettings,
    unwrap: Unwrap,
) -> Result<Value, UpstreamError> {
    let response = request.timeout(settings.call_timeout).send().await.map_err(unreachable)?;
    read_json(response, settings.max_event_bytes, unwrap).await
}

async fn read_json(
    response: reqwest::Response,
    max_bytes: usize,
    unwrap: Unwrap,
) -> Result<Value, UpstreamError> {
    let status = response.status();
    if matches!(status.as_u16(), 429 | 502 | 503 | 504) {
        // A proxy or an overloaded upstream: not an answer about the task, try again.
        return Err(UpstreamError::Unreachable(format!("HTTP {status}")));
    }
    let mut body = response.bytes_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(unreachable)?;
        if bytes.len() + chunk.len() > max_bytes {
            return Err(UpstreamError::Invalid(format!("an answer over {max_bytes} bytes")));
        }
        bytes.extend_from_slice(&chunk);
    }
    let answer: Value = serde_json::from_slice(&bytes)
        .map_err(|e| UpstreamError::Invalid(format!("HTTP {status}, not a JSON answer: {e}")))?;
    unwrap(status, answer)
}

/// Sends `request` and follows its Server-Sent Events, each unwrapped and decoded. Its start
/// (the answer's headers) must come within the call timeout; the stream may then be quiet for
/// as long as the task runs. An answer that is not SSE (an error, or a server that does not
/// stream) is read as one JSON answer.
pub(super) async fn events(
    request: reqwest::RequestBuilder,
    settings: &UpstreamSettings,
    unwrap: Unwrap,
    decode: impl Fn(Value) -> Result<StreamResponse, UpstreamError> + Send + 'static,
) -> Result<Events, UpstreamError> {
    let response = tokio::time::timeout(settings.call_timeout, request.send())
        .await
        .map_err(|_| UpstreamError::Unreachable("no answer within --upstream-timeout-ms".into()))?
        .map_err(unreachable)?;
    let is_sse = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !is_sse {
        let event = read_json(response, settings.max_event_bytes, unwrap).await.and_then(decode);
        return Ok(Box::pin(futures::stream::once(async move { event })));
    }
    let mut decoder = SseDecoder::new(settings.max_event_bytes);
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
                    .and_then(|json| unwrap(StatusCode::OK, json))
                    .and_then(&decode);
                let failed = event.is_err();
                yield event;
                if failed {
                    return;
                }
            }
        }
    }))
}

/// A transport failure, with the causes its own message leaves out (refused, reset, timed out).
pub(super) fn unreachable(error: reqwest::Error) -> UpstreamError {
    // Without the URL: its query may hold a credential, and the reason reaches clients.
    let error = error.without_url();
    let mut why = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(inner) = source {
        why = format!("{why}: {inner}");
        source = inner.source();
    }
    UpstreamError::Unreachable(why)
}

/// An answer that does not decode.
pub(super) fn invalid(error: impl std::fmt::Display) -> UpstreamError {
    UpstreamError::Invalid(error.to_string())
}
