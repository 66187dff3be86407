//! What every response must look like, in its binding's own terms: a gRPC status on gRPC and
//! grpc-web (in headers, trailers or the grpc-web trailer frame, with details that decode), a
//! JSON-RPC response object on JSON-RPC, a `google.rpc.Status` JSON on HTTP+JSON errors, and
//! never a 5xx for anything a client sends.
use axum::http::{HeaderMap, Method, StatusCode, header};
use base64::Engine as _;
use serde_json::Value;
use tonic_types::StatusExt;

use crate::server::{Reply, Sent};

/// Checks `reply` against the binding `sent` went to.
pub fn check(sent: &Sent, reply: &Reply) {
    assert!(
        !reply.status.is_server_error() || reply.status == StatusCode::SERVICE_UNAVAILABLE,
        "{} {} answered {}: {:?}",
        sent.method,
        sent.path,
        reply.status,
        String::from_utf8_lossy(&reply.body)
    );
    let content_type = reply.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let grpc_request = sent.content_type.as_deref().is_some_and(|ct| ct.starts_with("application/grpc"));
    if content_type.starts_with("application/grpc") {
        grpc(reply, content_type);
    } else if grpc_request && reply.status == StatusCode::OK && reply.headers.contains_key("grpc-status") {
        // A trailers-only answer (an unknown method) carries no body type of its own.
        status_of(&reply.headers);
    } else if content_type.starts_with("text/event-stream") {
        sse(sent, reply);
    } else if content_type.contains("json") {
        json(sent, reply);
    }
}

/// A gRPC or grpc-web response carries one valid status; a grpc-web body is whole frames
/// ending with the trailer frame.
fn grpc(reply: &Reply, content_type: &str) {
    assert_eq!(reply.status, StatusCode::OK, "gRPC answers HTTP 200");
    if reply.headers.contains_key("grpc-status") {
        status_of(&reply.headers);
        return;
    }
    if let Some(trailers) = &reply.trailers {
        status_of(trailers);
        return;
    }
    if !content_type.starts_with("application/grpc-web") || !reply.complete {
        return;
    }
    let bytes = if content_type.starts_with("application/grpc-web-text") {
        text_body(&reply.body)
    } else {
        reply.body.to_vec()
    };
    let mut rest = &bytes[..];
    let mut trailers = None;
    while !rest.is_empty() {
        assert!(trailers.is_none(), "the trailer frame is the last frame");
        assert!(rest.len() >= 5, "a frame has a 5-byte header: {bytes:?}");
        let length = u32::from_be_bytes(rest[1..5].try_into().expect("4 bytes")) as usize;
        assert!(rest.len() >= 5 + length, "a frame is whole");
        let payload = &rest[5..5 + length];
        match rest[0] {
            0x00 => {}
            0x80 => trailers = Some(trailer_block(payload)),
            flag => panic!("unknown grpc-web frame flag {flag:#04x}"),
        }
        rest = &rest[5 + length..];
    }
    status_of(&trailers.expect("a complete grpc-web body ends with its trailers"));
}

/// A grpc-web-text body: base64, written a chunk at a time, each chunk padded on its own (so
/// the body is decoded chunk by chunk, a chunk ending after its `=` padding).
fn text_body(body: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let end = match rest.iter().position(|&b| b == b'=') {
            Some(first) => first + rest[first..].iter().take_while(|&&b| b == b'=').count(),
            None => rest.len(),
        };
        let chunk = base64::engine::general_purpose::STANDARD
            .decode(&rest[..end])
            .unwrap_or_else(|e| panic!("grpc-web-text is base64 chunks ({e}): {body:?}"));
        bytes.extend(chunk);
        rest = &rest[end..];
    }
    bytes
}

fn trailer_block(payload: &[u8]) -> HeaderMap {
    let text = std::str::from_utf8(payload).expect("trailers are text");
    let mut map = HeaderMap::new();
    for line in text.split("\r\n").filter(|line| !line.is_empty()) {
        let (name, value) = line.split_once(':').unwrap_or_else(|| panic!("not a trailer line: {line:?}"));
        let name = axum::http::HeaderName::from_bytes(name.trim().as_bytes()).expect("a header name");
        map.append(name, value.trim().parse().expect("a header value"));
    }
    map
}

/// The status in `headers` is a valid code, and its details, when present, decode and agree.
fn status_of(headers: &HeaderMap) {
    let code = headers.get("grpc-status").expect("a gRPC status").to_str().expect("text");
    let code: i32 = code.parse().unwrap_or_else(|_| panic!("grpc-status {code:?} is a number"));
    assert!((0..=16).contains(&code), "grpc-status {code} is a gRPC code");
    let status = tonic::Status::from_header_map(headers).expect("the status parses");
    assert_eq!(status.code() as i32, code);
    if headers.contains_key("grpc-status-details-bin") {
        let details = status.get_error_details();
        let info = details.error_info().expect("our details carry an ErrorInfo");
        assert!(!info.reason.is_empty());
    }
}

/// A JSON response: JSON-RPC on the JSON-RPC endpoint, an error object on HTTP errors.
fn json(sent: &Sent, reply: &Reply) {
    let body: Value = serde_json::from_slice(&reply.body).unwrap_or_else(|e| {
        panic!("a JSON response is JSON ({e}): {:?}", String::from_utf8_lossy(&reply.body))
    });
    if jsonrpc(sent) {
        jsonrpc_response(&body);
    } else if reply.status.is_client_error() || reply.status.is_server_error() {
        let error = if sent.path.starts_with("/v1/") { &body } else { &body["error"] };
        assert!(error["code"].is_i64(), "an error body has a code: {body}");
        assert!(error["message"].is_string(), "an error body has a message: {body}");
        if !sent.path.starts_with("/v1/") && reply.status != StatusCode::METHOD_NOT_ALLOWED {
            assert_eq!(
                error["code"],
                Value::from(reply.status.as_u16()),
                "the body's code is the HTTP status"
            );
            assert!(error["status"].is_string(), "a google.rpc.Status names its code: {body}");
        }
    }
}

/// Whether `sent` went to the JSON-RPC endpoint.
fn jsonrpc(sent: &Sent) -> bool {
    sent.method == Method::POST && sent.path == "/"
}

fn jsonrpc_response(body: &Value) {
    assert_eq!(body["jsonrpc"], "2.0", "a JSON-RPC response: {body}");
    let id = body.get("id").expect("a JSON-RPC response has an id");
    assert!(id.is_string() || id.is_number() || id.is_null(), "id {id}");
    match (body.get("result"), body.get("error")) {
        (Some(_), None) => {}
        (None, Some(error)) => {
            assert!(error["code"].is_i64(), "an error code: {body}");
            assert!(error["message"].is_string(), "an error message: {body}");
        }
        _ => panic!("exactly one of result and error: {body}"),
    }
}

/// Every SSE event's data is JSON (a JSON-RPC response on the JSON-RPC endpoint).
fn sse(sent: &Sent, reply: &Reply) {
    let mut text = std::str::from_utf8(&reply.body).expect("SSE is text");
    if !reply.complete {
        // A stream read until it went quiet: its last event may be cut.
        text = text.rfind("\n\n").map_or("", |end| &text[..end]);
    }
    for event in text.split("\n\n").filter(|event| !event.trim().is_empty()) {
        let data: String = event
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(|data| data.strip_prefix(' ').unwrap_or(data))
            .collect::<Vec<_>>()
            .join("\n");
        if data.is_empty() {
            continue; // a keep-alive comment
        }
        let value: Value =
            serde_json::from_str(&data).unwrap_or_else(|e| panic!("SSE data is JSON ({e}): {data}"));
        if jsonrpc(sent) {
            jsonrpc_response(&value);
        }
    }
}
