//! A2A errors reduced to what every binding can express, each checked against the spec's
//! mapping table on the way (spec v1.0.1 §5.4).

use a2a_server::error::code_name;
use serde_json::Value;
use tonic_types::StatusExt;

const ERROR_INFO: &str = "type.googleapis.com/google.rpc.ErrorInfo";
const BAD_REQUEST: &str = "type.googleapis.com/google.rpc.BadRequest";
pub const A2A_DOMAIN: &str = "a2a-protocol.org";

/// An A2A error as every binding can express it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// ErrorInfo `reason`.
    pub reason: String,
    /// ErrorInfo `domain`.
    pub domain: String,
    /// The canonical gRPC code name: the gRPC status, the HTTP+JSON `error.status`, or the code
    /// the spec's table pairs with the JSON-RPC error code.
    pub code: String,
    /// ErrorInfo metadata keys, sorted.
    pub metadata_keys: Vec<String>,
    /// BadRequest field violations, in order.
    pub fields: Vec<String>,
}

/// Spec v1.0.1 §5.4 (A2A-NOTES §6): an A2A error's gRPC code, JSON-RPC code and HTTP status.
pub struct Mapping {
    pub grpc: tonic::Code,
    pub jsonrpc: i64,
    pub http: u16,
}

pub fn spec_mapping(reason: &str) -> Mapping {
    use tonic::Code::*;
    let (grpc, jsonrpc, http) = match reason {
        "TASK_NOT_FOUND" => (NotFound, -32001, 404),
        "TASK_NOT_CANCELABLE" => (FailedPrecondition, -32002, 400),
        "PUSH_NOTIFICATION_NOT_SUPPORTED" => (FailedPrecondition, -32003, 400),
        "UNSUPPORTED_OPERATION" => (FailedPrecondition, -32004, 400),
        "CONTENT_TYPE_NOT_SUPPORTED" => (InvalidArgument, -32005, 400),
        "EXTENDED_AGENT_CARD_NOT_CONFIGURED" => (FailedPrecondition, -32007, 400),
        "EXTENSION_SUPPORT_REQUIRED" => (FailedPrecondition, -32008, 400),
        "VERSION_NOT_SUPPORTED" => (FailedPrecondition, -32009, 400),
        "INVALID_PARAMS" => (InvalidArgument, -32602, 400),
        "TASK_GENERATION_MISMATCH" => (Aborted, -32010, 409),
        "STREAM_CLOSED" => (Unavailable, -32603, 503),
        other => panic!("reason {other:?} is not one these scenarios can produce"),
    };
    Mapping { grpc, jsonrpc, http }
}

/// The gRPC code the spec pairs with a JSON-RPC error code (a function: each JSON-RPC code has
/// exactly one).
pub fn grpc_code_of_jsonrpc(code: i64) -> &'static str {
    match code {
        -32001 => "NOT_FOUND",
        -32002 | -32003 | -32004 | -32007 | -32008 | -32009 => "FAILED_PRECONDITION",
        -32005 | -32600 | -32602 | -32700 => "INVALID_ARGUMENT",
        -32006 | -32603 => "INTERNAL",
        -32601 => "UNIMPLEMENTED",
        -32010 => "ABORTED",
        other => panic!("JSON-RPC error code {other} is not in the spec's table"),
    }
}

pub fn grpc_failure(status: &tonic::Status) -> Failure {
    let details = status.get_error_details();
    let info = details.error_info().unwrap_or_else(|| panic!("no ErrorInfo in {status:?}"));
    let mut metadata_keys: Vec<String> = info.metadata.keys().cloned().collect();
    metadata_keys.sort();
    let fields = details
        .bad_request()
        .map(|b| b.field_violations.iter().map(|v| v.field.clone()).collect())
        .unwrap_or_default();
    let failure = Failure {
        reason: info.reason.clone(),
        domain: info.domain.clone(),
        code: code_name(status.code()).to_owned(),
        metadata_keys,
        fields,
    };
    assert_eq!(status.code(), spec_mapping(&failure.reason).grpc, "gRPC code of {status:?}");
    failure
}

/// ErrorInfo (first) and BadRequest from ProtoJSON `Any` details.
pub fn json_failure(code: &str, details: &Value) -> Failure {
    let info = &details[0];
    assert_eq!(info["@type"], ERROR_INFO, "the ErrorInfo comes first: {details}");
    let mut metadata_keys: Vec<String> =
        info["metadata"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
    metadata_keys.sort();
    let fields = details
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["@type"] == BAD_REQUEST)
        .flat_map(|d| d["fieldViolations"].as_array().cloned().unwrap_or_default())
        .map(|v| v["field"].as_str().expect("a field name").to_owned())
        .collect();
    Failure {
        reason: info["reason"].as_str().unwrap_or_else(|| panic!("no reason: {details}")).to_owned(),
        domain: info["domain"].as_str().unwrap_or_default().to_owned(),
        code: code.to_owned(),
        metadata_keys,
        fields,
    }
}

pub fn jsonrpc_failure(error: &Value) -> Failure {
    let code = error["code"].as_i64().unwrap_or_else(|| panic!("no numeric code: {error}"));
    let failure = json_failure(grpc_code_of_jsonrpc(code), &error["data"]);
    assert_eq!(code, spec_mapping(&failure.reason).jsonrpc, "JSON-RPC code of {error}");
    failure
}

pub fn rest_failure(http_status: u16, body: &Value) -> Failure {
    let error = &body["error"];
    assert_eq!(error["code"], http_status, "error.code is the HTTP status: {body}");
    let status = error["status"].as_str().unwrap_or_else(|| panic!("no error.status: {body}"));
    let failure = json_failure(status, &error["details"]);
    assert_eq!(http_status, spec_mapping(&failure.reason).http, "HTTP status of {body}");
    failure
}
