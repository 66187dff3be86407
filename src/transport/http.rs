//! What the JSON bindings share over HTTP: their state and settings, service parameters from
//! headers, content-type checks and response encoding. The router that puts the bindings
//! together is the server's (`server/router.rs`).
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::card::CardService;
use super::parameters::{A2A_EXTENSIONS, A2A_LAST_GENERATION, A2A_VERSION, LAST_EVENT_ID, TRACEPARENT};
use super::request_budget::RequestBudget;
use crate::call::CallContext;
use crate::core::Core;
use crate::core::CoreSettings;
use crate::error::A2aError;

/// `application/a2a+json`, the HTTP+JSON binding's media type (spec v1.0.1 §11.1).
pub const A2A_JSON: &str = "application/a2a+json";

/// Settings of the HTTP side.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// How often an idle SSE stream gets a keep-alive comment.
    pub sse_keep_alive: Duration,
    /// The path of the public URL (e.g. `/a2a`), empty for the root. The bindings are served
    /// both at the root and under it, so a proxy may forward the path as it is or strip it.
    pub base_path: String,
    /// Serve A2A v0.3 clients too (their JSON-RPC methods, and the v0.3 fields of the card).
    pub v03: bool,
    /// The largest request a client may send, on every binding (a gRPC message, a JSON body):
    /// see [`request_size`](super::request_size).
    pub max_request_bytes: usize,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            sse_keep_alive: Duration::from_secs(15),
            base_path: String::new(),
            v03: true,
            max_request_bytes: super::request_size::DEFAULT_MAX_REQUEST_BYTES,
        }
    }
}

impl HttpSettings {
    /// The base path of a public URL: its path without the trailing slash (empty for `/`).
    pub fn base_path_of(public_url: &str) -> String {
        url::Url::parse(public_url).map(|url| url.path().trim_end_matches('/').to_owned()).unwrap_or_default()
    }
}

/// Shared state of the HTTP handlers.
#[derive(Clone)]
pub struct HttpState {
    /// The A2A core.
    pub core: Arc<Core>,
    /// HTTP settings.
    pub settings: HttpSettings,
    /// The public Agent Card.
    pub card: Arc<CardService>,
}

/// Service parameters from HTTP headers (case-insensitive names) or, for `A2A-Version`, the
/// query string (spec §3.6.1).
pub fn call_context(headers: &HeaderMap, query: Option<&str>) -> CallContext {
    let from_query = query.and_then(|q| {
        form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k.eq_ignore_ascii_case("a2a-version"))
            .map(|(_, v)| v.into_owned())
    });
    let text = |name: &HeaderName| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let version = text(&A2A_VERSION).or(from_query);
    let extensions = headers.get_all(A2A_EXTENSIONS).into_iter().filter_map(|v| v.to_str().ok());
    let mut call = CallContext::from_parameters(version.as_deref(), extensions);
    call.traceparent = text(&TRACEPARENT);
    call.last_generation = text(&A2A_LAST_GENERATION);
    call.last_event_id = text(&LAST_EVENT_ID);
    call
}

/// Whether the request body is declared as JSON (`application/json`, `application/a2a+json`
/// or any `+json` type). A request without a Content-Type is read as JSON.
pub fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE) else { return true };
    let Ok(value) = value.to_str() else { return false };
    let essence = value.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// The error for a request body that is not JSON.
pub fn not_json(headers: &HeaderMap) -> A2aError {
    let given = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("?");
    A2aError::ContentTypeNotSupported(format!(
        "request Content-Type {given:?} is not supported; send application/json or {A2A_JSON}"
    ))
}

/// Whether the client asked for `application/a2a+json` responses.
pub fn wants_a2a_json(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .into_iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains(A2A_JSON))
}

/// A JSON response with the negotiated media type.
pub fn json_response(status: StatusCode, body: &Value, a2a_json: bool) -> Response {
    json_text_response(status, body.to_string(), a2a_json)
}

/// [`json_response`] for JSON already written out.
pub fn json_text_response(status: StatusCode, body: String, a2a_json: bool) -> Response {
    let content_type = if a2a_json { A2A_JSON } else { "application/json" };
    let mut response = (status, body).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// An error as an HTTP response: `body` (the binding's form of `error`) with the error's HTTP
/// status, `Retry-After` when waiting helps, and `Allow` for a method not allowed.
pub fn error_response(error: &A2aError, body: &Value, a2a_json: bool) -> Response {
    error_text_response(error, body.to_string(), a2a_json)
}

/// [`error_response`] for a body already written out.
pub fn error_text_response(error: &A2aError, body: String, a2a_json: bool) -> Response {
    let status = StatusCode::from_u16(error.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = json_text_response(status, body, a2a_json);
    if let Some(secs) = error.retry_after_secs() {
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    if let A2aError::MethodNotAllowed { allow: Some(allow), .. } = error
        && let Ok(allow) = HeaderValue::from_str(allow)
    {
        response.headers_mut().insert(header::ALLOW, allow);
    }
    response
}

/// `error` in place of `answer`, a JSON answer the server wrote but could not afford to send
/// (see `server/send_budget.rs`): a JSON-RPC error with the answer's id, else the HTTP+JSON
/// error, in the media type the answer had.
pub fn refused_answer(headers: &HeaderMap, answer: &[u8], error: &A2aError) -> Response {
    if let Some(response) = super::jsonrpc::refused(answer, error) {
        return response;
    }
    let a2a_json =
        headers.get(header::CONTENT_TYPE).is_some_and(|ct| ct.as_bytes().starts_with(A2A_JSON.as_bytes()));
    error_response(error, &error.to_http_body(), a2a_json)
}

/// Parses a request body as I-JSON (duplicate names refused), mapping failure to a JSON parse
/// error; a request over the core's `--max-parts` or `--max-struct-values` gets the core's
/// error, found without building what is over.
pub fn parse_json(body: &[u8], limits: &CoreSettings) -> Result<Value, A2aError> {
    super::strict_json::parse_request(body, &RequestBudget::new(limits))
}

#[cfg(test)]
mod tests {
    use super::parse_json;

    /// Regression (fuzz target `protobuf`): 1.5 × 2^768, printed shortest as below, came back
    /// one ulp off from serde_json's default float parser, so a `Struct` number a client sent
    /// was not the number it meant, and re-encoding a message changed it.
    #[test]
    fn json_numbers_parse_to_the_exact_double() {
        let exact = f64::from_bits(0x6ff8_0000_0000_0000);
        let value = parse_json(br#"{"n": 2.3287771384510634e231}"#, &Default::default()).expect("valid JSON");
        assert_eq!(value["n"].as_f64().map(f64::to_bits), Some(exact.to_bits()));
    }
}
