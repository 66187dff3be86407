//! The v0.3 JSON-RPC methods at `/`: each is decoded (through [`convert`]) into the v1.0
//! [`Operation`] it was renamed to, run on the same core, and its result encoded back into the
//! v0.3 shape. The envelope checks are the v1.0 binding's (`transport/jsonrpc.rs`).
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use futures::StreamExt;
use serde_json::{Value, json};

use super::convert;
use crate::call::{Authentication, CallContext, ProtocolVersion};
use crate::error::A2aError;
use crate::proto::{
    DeleteTaskPushNotificationConfigRequest, GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest, ListTaskPushNotificationConfigsRequest, SubscribeToTaskRequest,
};
use crate::protojson::{decode, encode};
use crate::transport::http::{self, HttpState};
use crate::transport::jsonrpc::{RequestId, answer};
use crate::transport::operation::{Operation, Outcome};
use crate::transport::sse;

/// The telemetry label of calls made through this binding.
const BINDING: &str = "jsonrpc-v0.3";

/// The v0.3 method names, each with the v1.0 method it became.
pub const METHODS: [(&str, &str); 10] = [
    ("message/send", "SendMessage"),
    ("message/stream", "SendStreamingMessage"),
    ("tasks/get", "GetTask"),
    ("tasks/cancel", "CancelTask"),
    ("tasks/resubscribe", "SubscribeToTask"),
    ("tasks/pushNotificationConfig/set", "CreateTaskPushNotificationConfig"),
    ("tasks/pushNotificationConfig/get", "GetTaskPushNotificationConfig"),
    ("tasks/pushNotificationConfig/list", "ListTaskPushNotificationConfigs"),
    ("tasks/pushNotificationConfig/delete", "DeleteTaskPushNotificationConfig"),
    ("agent/getAuthenticatedExtendedCard", "GetExtendedAgentCard"),
];

/// Whether this call is a v0.3 one: a v0.3 method name, with no `A2A-Version` or a `0.x` one
/// (spec: a missing version means 0.3). A v0.3 name sent as `A2A-Version: 1.0` stays with the
/// v1.0 binding, which does not know it.
pub fn is_v03_call(method: &str, version: Option<&str>) -> bool {
    let version_ok = match version.map(str::trim) {
        None | Some("") => true,
        Some(version) => version.starts_with("0."),
    };
    version_ok && METHODS.iter().any(|(name, _)| *name == method)
}

/// The v0.3 caller: both extension headers (`X-A2A-Extensions`, v0.3's, and `A2A-Extensions`),
/// and no version, so that the core (which speaks 1.x only) takes the call as its own; marked
/// as v0.3, so that the webhooks it registers get v0.3 bodies.
pub fn call_context(headers: &HeaderMap) -> CallContext {
    let extensions = ["x-a2a-extensions", "a2a-extensions"]
        .into_iter()
        .flat_map(|name| headers.get_all(name).into_iter().filter_map(|v| v.to_str().ok()));
    let mut call = CallContext::from_parameters(None, extensions);
    call.protocol = ProtocolVersion::V0_3;
    call.traceparent = headers.get("traceparent").and_then(|v| v.to_str().ok()).map(str::to_owned);
    call
}

/// Runs one v0.3 call whose envelope the JSON-RPC binding already checked.
pub async fn handle(
    state: &HttpState,
    headers: &HeaderMap,
    auth: Option<&Authentication>,
    id: RequestId,
    method: &str,
    params: Result<Value, A2aError>,
) -> Response {
    let operation = match params.and_then(|params| operation(method, &params)) {
        Ok(operation) => operation,
        Err(error) => return error_response(&id, &error),
    };
    let call = call_context(headers).authenticated(auth);
    let streaming = matches!(operation, Operation::SendStreamingMessage(_) | Operation::SubscribeToTask(_));
    let outcome = match operation.execute(&state.core, &call, BINDING).await {
        // v0.3 clients read a streaming method's answer as SSE whatever it is, so a call that
        // fails before its stream starts is answered with a stream of that one error.
        Err(error) if streaming => Ok(Outcome::Stream(futures::stream::once(async { Err(error) }).boxed())),
        outcome => outcome,
    };
    match outcome {
        Ok(Outcome::Json(result)) => http::json_text_response(
            StatusCode::OK,
            answer(&id, "result", &result_of(method, &result.into_value(), state)),
            false,
        ),
        Ok(Outcome::Stream(stream)) => {
            sse::response(stream, state.settings.sse_keep_alive, move |item, out| match item {
                Ok(event) => {
                    let result = convert::result_out(&encode(&event.response));
                    out.event(Some(event.seq), None, &[&answer(&id, "result", &result)])
                }
                Err(error) => out.event(None, None, &[&answer(&id, "error", &convert::error_out(&error))]),
            })
        }
        Err(error) => error_response(&id, &error),
    }
}

/// Decodes v0.3 params into the v1.0 operation.
pub fn operation(method: &str, params: &Value) -> Result<Operation, A2aError> {
    Ok(match method {
        "message/send" => Operation::SendMessage(decode(&convert::send_params_in(params)?)?),
        "message/stream" => Operation::SendStreamingMessage(decode(&convert::send_params_in(params)?)?),
        "tasks/get" => Operation::GetTask(decode(&convert::task_query_in(params)?)?),
        "tasks/cancel" => Operation::CancelTask(decode(&json!({"id": convert::task_id_in(params)?}))?),
        "tasks/resubscribe" => Operation::SubscribeToTask(SubscribeToTaskRequest {
            id: convert::task_id_in(params)?,
            ..Default::default()
        }),
        "tasks/pushNotificationConfig/set" => {
            Operation::CreatePushConfig(decode(&convert::task_push_config_in(params)?)?)
        }
        "tasks/pushNotificationConfig/get" => {
            let request: GetTaskPushNotificationConfigRequest =
                decode(&convert::push_config_ref_in(params)?)?;
            Operation::GetPushConfig(request)
        }
        "tasks/pushNotificationConfig/list" => {
            Operation::ListPushConfigs(ListTaskPushNotificationConfigsRequest {
                task_id: convert::task_id_in(params)?,
                ..Default::default()
            })
        }
        "tasks/pushNotificationConfig/delete" => {
            let request: DeleteTaskPushNotificationConfigRequest =
                decode(&convert::push_config_ref_in(params)?)?;
            Operation::DeletePushConfig(request)
        }
        "agent/getAuthenticatedExtendedCard" => {
            Operation::GetExtendedAgentCard(GetExtendedAgentCardRequest::default())
        }
        other => return Err(A2aError::MethodNotFound(format!("method {other:?} not found"))),
    })
}

/// A v1.0 unary result (ProtoJSON) in the v0.3 shape of `method`'s result.
fn result_of(method: &str, result: &Value, state: &HttpState) -> Value {
    match method {
        "message/send" => convert::result_out(result),
        "tasks/get" | "tasks/cancel" => convert::task_out(result),
        "tasks/pushNotificationConfig/set" | "tasks/pushNotificationConfig/get" => {
            convert::push_config_out(result)
        }
        "tasks/pushNotificationConfig/list" => {
            let configs = result.get("configs").and_then(Value::as_array);
            Value::Array(
                configs.map(|c| c.iter().map(convert::push_config_out).collect()).unwrap_or_default(),
            )
        }
        "tasks/pushNotificationConfig/delete" => Value::Null,
        "agent/getAuthenticatedExtendedCard" => state.card.v03_extended(result),
        _ => result.clone(),
    }
}

fn error_response(id: &RequestId, error: &A2aError) -> Response {
    http::json_text_response(StatusCode::OK, answer(id, "error", &convert::error_out(error)), false)
}
