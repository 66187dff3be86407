//! The JSON-RPC 2.0 binding (spec §9): `POST /`, method names equal to the gRPC RPC names,
//! `params` and `result` in ProtoJSON, streaming methods answered with SSE in which every
//! event is a complete JSON-RPC response. Errors travel with HTTP 200.
use axum::body::Bytes;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use axum::response::sse::Event;
use serde_json::{Value, json};

use super::http::{self, HttpState};
use super::operation::{Operation, Outcome};
use super::{sse, v03};
use crate::call::Authentication;
use crate::error::A2aError;
use crate::protojson::{decode, encode_string_for};

/// Handles one JSON-RPC request.
pub async fn handle(
    State(state): State<HttpState>,
    auth: Option<Extension<Authentication>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !http::is_json(&headers) {
        return error_response(&Value::Null, &http::not_json(&headers));
    }
    let (id, request) = match http::parse_json(&body).and_then(envelope) {
        Ok(decoded) => decoded,
        Err(error) => return error_response(&Value::Null, &error),
    };
    let (method, params) = match request {
        Ok(request) => request,
        Err(error) => return error_response(&id, &error),
    };
    let auth = auth.as_ref().map(|a| &a.0);
    let call = http::call_context(&headers, uri.query()).authenticated(auth);
    if state.settings.v03 && v03::jsonrpc::is_v03_call(&method, call.version.as_deref()) {
        return v03::jsonrpc::handle(&state, &headers, auth, id, &method, &params).await;
    }
    let operation = match operation(&method, &params) {
        Ok(operation) => operation,
        Err(error) => return error_response(&id, &error),
    };
    match operation.execute(&state.core, &call, "jsonrpc").await {
        Ok(Outcome::Json(result)) => {
            http::json_response(StatusCode::OK, &json!({"jsonrpc": "2.0", "id": id, "result": result}), false)
        }
        Ok(Outcome::Stream(stream)) => {
            let id_json = id.to_string();
            let generation = call.wants_generation();
            sse::response(stream, state.settings.sse_keep_alive, move |item| match item {
                Ok(event) => Event::default().id(event.seq.to_string()).data(format!(
                    r#"{{"jsonrpc":"2.0","id":{id_json},"result":{}}}"#,
                    event.json(generation, |r| encode_string_for(r, generation))
                )),
                Err(error) => Event::default().data(error_body(&id, &error).to_string()),
            })
        }
        Err(error) => error_response(&id, &error),
    }
}

fn error_body(id: &Value, error: &A2aError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error.to_jsonrpc_error()})
}

fn error_response(id: &Value, error: &A2aError) -> Response {
    http::json_response(StatusCode::OK, &error_body(id, error), false)
}

/// The method name and params of a request.
pub(crate) type MethodCall = (String, Value);

/// Splits a request into its id and its method and params. An envelope so broken that no id
/// can be trusted fails as a whole (answered with id `null`); a bad method or params fail with
/// the id.
pub(crate) fn envelope(request: Value) -> Result<(Value, Result<MethodCall, A2aError>), A2aError> {
    let invalid = |why: &str| A2aError::InvalidRequest(format!("invalid JSON-RPC request: {why}"));
    let mut request = match request {
        Value::Object(map) => map,
        Value::Array(_) => return Err(invalid("batch requests are not supported")),
        _ => return Err(invalid("the request must be a JSON object")),
    };
    let id = match request.remove("id") {
        None => return Err(invalid("an id is required (notifications are not supported)")),
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => id,
        Some(_) => return Err(invalid("the id must be a string, a number or null")),
    };
    if request.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Ok((id, Err(invalid(r#""jsonrpc" must be "2.0""#))));
    }
    let Some(method) = request.get("method").and_then(Value::as_str).map(str::to_owned) else {
        return Ok((id, Err(invalid(r#""method" must be a string"#))));
    };
    let params = match request.remove("params") {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(params @ Value::Object(_)) => params,
        Some(_) => {
            return Ok((id, Err(A2aError::invalid_field("params", "must be an object"))));
        }
    };
    Ok((id, Ok((method, params))))
}

pub(crate) fn operation(method: &str, params: &Value) -> Result<Operation, A2aError> {
    Ok(match method {
        "SendMessage" => Operation::SendMessage(decode(params)?),
        "SendStreamingMessage" => Operation::SendStreamingMessage(decode(params)?),
        "GetTask" => Operation::GetTask(decode(params)?),
        "ListTasks" => Operation::ListTasks(super::operation::list_tasks(params)?),
        "CancelTask" => Operation::CancelTask(decode(params)?),
        "SubscribeToTask" => Operation::SubscribeToTask(decode(params)?),
        "CreateTaskPushNotificationConfig" => Operation::CreatePushConfig(decode(params)?),
        "GetTaskPushNotificationConfig" => Operation::GetPushConfig(decode(params)?),
        "ListTaskPushNotificationConfigs" => Operation::ListPushConfigs(decode(params)?),
        "DeleteTaskPushNotificationConfig" => Operation::DeletePushConfig(decode(params)?),
        "GetExtendedAgentCard" => Operation::GetExtendedAgentCard(decode(params)?),
        v03 if v03.contains('/') => {
            return Err(A2aError::MethodNotFound(format!(
                "method {v03:?} is from A2A v0.3; this server speaks v1.0 (e.g. SendMessage, GetTask)"
            )));
        }
        unknown => return Err(A2aError::MethodNotFound(format!("method {unknown:?} not found"))),
    })
}
