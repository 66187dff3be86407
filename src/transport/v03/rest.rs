//! The v0.3 HTTP+JSON binding under `/v1/` (its routes are the v0.3 proto's `google.api.http`
//! annotations; its bodies the v0.3 proto's ProtoJSON): each route is decoded into the v1.0
//! [`Operation`] through [`typed`], run on the same core, and answered in v0.3 ProtoJSON.
use axum::body::Bytes;
use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use super::{json as v03json, typed};
use crate::core::CoreSettings;
use crate::error::A2aError;
use crate::proto as v1;
use crate::proto_v03 as v03;
use crate::protojson;
use crate::transport::http::{self, HttpState};
use crate::transport::operation::{Operation, Outcome};
use crate::transport::{request_size, sse};

/// Handles a request whose path starts with `/v1/` (after the base path).
pub async fn handle(state: HttpState, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let base = state.settings.base_path.as_str();
    let path = parts.uri.path();
    let path = path.strip_prefix(base).filter(|p| p.starts_with("/v1/")).unwrap_or(path).to_owned();
    let query = parts.uri.query().unwrap_or_default().to_owned();
    let body = match request_size::read_body(body, &parts.headers, state.settings.max_request_bytes).await {
        Ok(body) => body,
        Err(e) => return error(&e),
    };
    if !body.is_empty() && !http::is_json(&parts.headers) {
        return error(&http::not_json(&parts.headers));
    }
    let route = match route(&parts.method, &path, &query, &body, &state) {
        Ok(route) => route,
        Err(error_value) => return error(&error_value),
    };
    let (operation, answer) = match route {
        Route::Card(card) => return http::json_response(StatusCode::OK, &card, false),
        Route::Call(operation, answer) => (*operation, answer),
    };
    let call = super::jsonrpc::call_context(&parts.headers).authenticated(parts.extensions.get());
    match operation.execute(&state.core, &call, "rest-v0.3").await {
        Ok(Outcome::Json(result)) => match answer(result.into_value()) {
            Ok(body) => http::json_response(StatusCode::OK, &body, false),
            Err(e) => error(&e),
        },
        Ok(Outcome::Stream(stream)) => {
            sse::response(stream, state.settings.sse_keep_alive, |item, out| match item {
                Ok(event) => {
                    let json = v03json::encode(&typed::stream_out(event.response.clone())).to_string();
                    out.event(Some(event.seq), None, &[&json])
                }
                Err(e) => out.event(None, Some("error"), &[&super::convert::error_out(&e).to_string()]),
            })
        }
        Err(e) => error(&e),
    }
}

/// A v0.3 REST error: the HTTP status of the error, and a body with the A2A JSON-RPC `code`
/// (which the v0.3 SDKs map to their error types), `message` and `data`.
fn error(error: &A2aError) -> Response {
    http::error_response(error, &super::convert::error_out(error), false)
}

/// How a unary v1.0 result (ProtoJSON) becomes the v0.3 answer.
type Answer = fn(Value) -> Result<Value, A2aError>;

enum Route {
    Call(Box<Operation>, Answer),
    Card(Value),
}

fn call(operation: Operation, answer: Answer) -> Route {
    Route::Call(Box::new(operation), answer)
}

fn body_json(body: &Bytes, limits: &CoreSettings) -> Result<Value, A2aError> {
    if body.is_empty() { Ok(json!({})) } else { http::parse_json(body, limits) }
}

fn history_length(query: &str) -> Result<Option<i32>, A2aError> {
    let value = form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "historyLength" || k == "history_length")
        .map(|(_, v)| v.into_owned());
    value
        .map(|v| v.parse::<i32>().map_err(|_| A2aError::invalid_field("historyLength", "must be an integer")))
        .transpose()
}

fn task_answer(result: Value) -> Result<Value, A2aError> {
    Ok(v03json::encode(&typed::task_out(protojson::decode::<v1::Task>(&result)?)))
}

fn config_answer(result: Value) -> Result<Value, A2aError> {
    let config: v1::TaskPushNotificationConfig = protojson::decode(&result)?;
    Ok(v03json::encode(&typed::push_config_out(config)))
}

fn route(
    method: &Method,
    path: &str,
    query: &str,
    body: &Bytes,
    state: &HttpState,
) -> Result<Route, A2aError> {
    let not_found = || A2aError::MethodNotFound(format!("no v0.3 route {method} {path}"));
    let rest = path.strip_prefix("/v1/").ok_or_else(not_found)?;
    let body_json = |body| body_json(body, state.core.settings());
    let segments: Vec<&str> = rest.split('/').collect();
    Ok(match (method, segments.as_slice()) {
        (&Method::GET, ["card"]) => Route::Card(super::card::v03_card(state)),
        (&Method::POST, ["message:send"]) => {
            let request: v03::SendMessageRequest = v03json::decode(&body_json(body)?)?;
            let answer: Answer = |result| {
                let response: v1::SendMessageResponse = protojson::decode(&result)?;
                Ok(v03json::encode(&typed::send_out(response)))
            };
            call(Operation::SendMessage(typed::send_in(request)), answer)
        }
        (&Method::POST, ["message:stream"]) => {
            let request: v03::SendMessageRequest = v03json::decode(&body_json(body)?)?;
            call(Operation::SendStreamingMessage(typed::send_in(request)), Ok)
        }
        (&Method::GET, ["tasks", id]) if !id.contains(':') => {
            let request = v1::GetTaskRequest {
                id: (*id).to_owned(),
                history_length: history_length(query)?,
                ..Default::default()
            };
            call(Operation::GetTask(request), task_answer)
        }
        (&Method::POST, ["tasks", verb]) if verb.ends_with(":cancel") => {
            let id = verb.trim_end_matches(":cancel").to_owned();
            call(Operation::CancelTask(v1::CancelTaskRequest { id, ..Default::default() }), task_answer)
        }
        (&Method::GET | &Method::POST, ["tasks", verb]) if verb.ends_with(":subscribe") => {
            let id = verb.trim_end_matches(":subscribe").to_owned();
            call(Operation::SubscribeToTask(v1::SubscribeToTaskRequest { id, ..Default::default() }), Ok)
        }
        (&Method::POST, ["tasks", id, "pushNotificationConfigs"]) => {
            // The route's body is the config (the proto's `body: "config"`), but the v0.3 SDKs
            // send the whole CreateTaskPushNotificationConfigRequest: both are accepted.
            let body = body_json(body)?;
            let mut request = v03::CreateTaskPushNotificationConfigRequest::default();
            if body.get("config").is_some() {
                request = v03json::decode(&body)?;
            } else {
                request.config = Some(v03json::decode(&body)?);
            }
            request.parent = format!("tasks/{id}");
            call(Operation::CreatePushConfig(typed::create_push_config_in(request)?), config_answer)
        }
        (&Method::GET, ["tasks", id, "pushNotificationConfigs"]) => {
            let request = v1::ListTaskPushNotificationConfigsRequest {
                task_id: (*id).to_owned(),
                ..Default::default()
            };
            let answer: Answer = |result| {
                let list: v1::ListTaskPushNotificationConfigsResponse = protojson::decode(&result)?;
                let configs = list.configs.into_iter().map(typed::push_config_out).collect();
                Ok(v03json::encode(&v03::ListTaskPushNotificationConfigResponse {
                    configs,
                    next_page_token: list.next_page_token,
                }))
            };
            call(Operation::ListPushConfigs(request), answer)
        }
        (&Method::GET, ["tasks", task_id, "pushNotificationConfigs", id]) => {
            let request = v1::GetTaskPushNotificationConfigRequest {
                task_id: (*task_id).to_owned(),
                id: (*id).to_owned(),
                ..Default::default()
            };
            call(Operation::GetPushConfig(request), config_answer)
        }
        (&Method::DELETE, ["tasks", task_id, "pushNotificationConfigs", id]) => {
            let request = v1::DeleteTaskPushNotificationConfigRequest {
                task_id: (*task_id).to_owned(),
                id: (*id).to_owned(),
                ..Default::default()
            };
            call(Operation::DeletePushConfig(request), |_| Ok(json!({})))
        }
        _ => return Err(not_found()),
    })
}
