//! The invariants the decoding targets assert on what the server decoded.
use std::fmt::Debug;

use a2a_server::error::A2aError;
use a2a_server::fuzzing;
use a2a_server::protojson;
use a2a_server::transport::operation::Operation;
use serde_json::{Value, json};
use tonic_types::StatusExt;

/// An error caused by what the client sent: one of ours, mapped on every wire, and a 4xx (a
/// client's mistake is never reported as the server's).
pub fn client_error(error: &A2aError) {
    mapped(error);
    assert!((400..500).contains(&error.http_status()), "a client's mistake must be a 4xx: {error:?}");
}

/// Any error maps to every wire without panicking, and the mappings agree with each other.
pub fn mapped(error: &A2aError) {
    let reason = error.reason();
    assert!(
        !reason.is_empty() && reason.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'),
        "ErrorInfo reason {reason:?} is UPPER_SNAKE_CASE"
    );
    let status = error.to_grpc_status();
    assert_eq!(status.code(), error.grpc_code());
    assert_ne!(status.code(), tonic::Code::Ok, "an error is never OK: {error:?}");
    let details = status.get_error_details();
    let info = details.error_info().expect("every gRPC error carries an ErrorInfo");
    assert_eq!(info.reason, reason);
    if !error.violations().is_empty() {
        let bad_request = details.bad_request().expect("violations travel as a BadRequest");
        assert_eq!(bad_request.field_violations.len(), error.violations().len());
    }
    let rpc = error.to_jsonrpc_error();
    assert_eq!(rpc["code"], json!(error.jsonrpc_code()));
    assert!(rpc["message"].is_string());
    assert_eq!(rpc["data"][0]["reason"], json!(reason));
    let body = error.to_http_body();
    assert_eq!(body["error"]["code"], json!(error.http_status()));
    assert!((400..600).contains(&error.http_status()));
    // Across a fleet's replicas the error travels as parts and comes back with its reason.
    let (wire_reason, a, b) = error.to_parts();
    if wire_reason != "INTERNAL_ERROR" {
        assert_eq!(A2aError::from_parts(&wire_reason, a, b).reason(), reason, "{error:?} crosses replicas");
    }
}

/// A decoded message survives the trip out and back: its canonical ProtoJSON (value and text
/// agree) decodes strictly to a message with the same ProtoJSON, and its protobuf bytes decode
/// to the same message. Returns the ProtoJSON.
pub fn roundtrip<T: protojson::Encode + Default + Debug>(message: &T) -> Value {
    let value = protojson::encode(message);
    let text = protojson::encode_string(message);
    assert_eq!(serde_json::from_str::<Value>(&text).expect("ProtoJSON text is JSON"), value);
    let back: T = protojson::decode_strict(&value)
        .unwrap_or_else(|e| panic!("canonical ProtoJSON {value} must decode strictly: {e}"));
    assert_eq!(protojson::encode(&back), value, "ProtoJSON decode → encode is stable");
    let lenient: T = protojson::decode(&value).expect("what decodes strictly decodes leniently");
    assert_eq!(protojson::encode(&lenient), value);
    let again = T::decode(message.encode_to_vec().as_slice()).expect("our own protobuf decodes");
    assert_eq!(protojson::encode(&again), value, "protobuf encode → decode is stable");
    value
}

/// The method name and request of a decoded operation, after checking that the request
/// round-trips.
pub fn operation(operation: &Operation) -> (&'static str, Value) {
    let request = match operation {
        Operation::SendMessage(r) | Operation::SendStreamingMessage(r) => roundtrip(r),
        Operation::GetTask(r) => roundtrip(r),
        Operation::ListTasks(r) => roundtrip(r),
        Operation::CancelTask(r) => roundtrip(r),
        Operation::SubscribeToTask(r) => roundtrip(r),
        Operation::CreatePushConfig(r) => roundtrip(r),
        Operation::GetPushConfig(r) => roundtrip(r),
        Operation::ListPushConfigs(r) => roundtrip(r),
        Operation::DeletePushConfig(r) => roundtrip(r),
        Operation::GetExtendedAgentCard(r) => roundtrip(r),
    };
    (operation.name(), request)
}

/// A decoded operation, sent again as a v1.0 JSON-RPC request in its canonical form, decodes
/// to the same operation.
pub fn same_over_jsonrpc(operation: &Operation) {
    let (method, params) = self::operation(operation);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    match fuzzing::jsonrpc_request(body.as_bytes()) {
        Ok((_, Ok(again))) => {
            assert_eq!(self::operation(&again), (method, params), "re-sent as {body}");
        }
        Ok((_, Err(error))) | Err(error) => panic!("re-sent as {body}, refused: {error:?}"),
    }
}
