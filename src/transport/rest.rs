//! The HTTP+JSON binding (spec §11): the proto's `google.api.http` routes, each also under a
//! `/{tenant}` prefix, bodies and results in ProtoJSON, GET/DELETE parameters in the query
//! string, errors as `google.rpc.Status` JSON, streams as SSE of bare `StreamResponse`s whose
//! SSE `id` is the event's per-task sequence number.
use axum::extract::Request;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::Response;
use prost_reflect::{Kind, MessageDescriptor};
use serde_json::{Map, Value};

use super::http::{self, HttpState};
use super::operation::{Operation, Outcome};
use super::{request_size, sse};
use crate::core::CoreSettings;
use crate::error::A2aError;
use crate::proto::{
    CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTasksRequest, SubscribeToTaskRequest,
};
use crate::protojson::{decode, descriptor, encode_string_for};

/// A matched route, with its path parameters.
#[derive(Debug, PartialEq)]
pub(crate) enum Route {
    SendMessage,
    SendStreamingMessage,
    ListTasks,
    GetTask(String),
    CancelTask(String),
    SubscribeToTask(String),
    CreatePushConfig(String),
    ListPushConfigs(String),
    GetPushConfig(String, String),
    DeletePushConfig(String, String),
    ExtendedAgentCard,
}

#[derive(Debug, PartialEq)]
pub(crate) enum Miss {
    NotFound,
    MethodNotAllowed(&'static str),
}

fn decode_segment(raw: &str) -> String {
    percent_encoding::percent_decode_str(raw).decode_utf8_lossy().into_owned()
}

/// Matches path segments (still percent-encoded, so that an encoded `:` stays part of an id
/// while a literal one starts the custom verb) against the binding's routes.
fn match_route(method: &Method, segments: &[&str]) -> Result<Route, Miss> {
    let allow = |allowed: &'static str, ok: bool, route: Route| {
        if ok { Ok(route) } else { Err(Miss::MethodNotAllowed(allowed)) }
    };
    let post = method == Method::POST;
    let get = method == Method::GET;
    match segments {
        ["message:send"] => allow("POST", post, Route::SendMessage),
        ["message:stream"] => allow("POST", post, Route::SendStreamingMessage),
        ["tasks"] => allow("GET", get, Route::ListTasks),
        ["extendedAgentCard"] => allow("GET", get, Route::ExtendedAgentCard),
        ["tasks", task] => match task.rsplit_once(':') {
            Some((id, "cancel")) if !id.is_empty() => {
                allow("POST", post, Route::CancelTask(decode_segment(id)))
            }
            Some((id, "subscribe")) if !id.is_empty() => {
                // The proto says GET, the spec text says POST; clients send both.
                allow("GET, POST", get || post, Route::SubscribeToTask(decode_segment(id)))
            }
            Some(_) => Err(Miss::NotFound),
            None => allow("GET", get, Route::GetTask(decode_segment(task))),
        },
        ["tasks", task, "pushNotificationConfigs"] => match *method {
            Method::POST => Ok(Route::CreatePushConfig(decode_segment(task))),
            Method::GET => Ok(Route::ListPushConfigs(decode_segment(task))),
            _ => Err(Miss::MethodNotAllowed("GET, POST")),
        },
        ["tasks", task, "pushNotificationConfigs", id] => match *method {
            Method::GET => Ok(Route::GetPushConfig(decode_segment(task), decode_segment(id))),
            Method::DELETE => Ok(Route::DeletePushConfig(decode_segment(task), decode_segment(id))),
            _ => Err(Miss::MethodNotAllowed("GET, DELETE")),
        },
        _ => Err(Miss::NotFound),
    }
}

/// Matches a path with or without a leading tenant segment. The unprefixed reading wins, so a
/// tenant cannot shadow a route (`/tasks/x` is GetTask, never tenant `tasks`).
pub(crate) fn resolve(method: &Method, path: &str) -> Result<(Route, Option<String>), Miss> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match match_route(method, &segments) {
        Ok(route) => Ok((route, None)),
        Err(miss) => match segments.split_first() {
            Some((tenant, rest)) if !tenant.is_empty() && !rest.is_empty() => match match_route(method, rest)
            {
                Ok(route) => Ok((route, Some(decode_segment(tenant)))),
                Err(Miss::NotFound) => Err(miss),
                Err(other) => Err(other),
            },
            _ => Err(miss),
        },
    }
}

/// Handles every request no other route took: HTTP+JSON calls, or a 404.
pub async fn handle(state: HttpState, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let a2a_json = http::wants_a2a_json(&parts.headers);
    let base = state.settings.base_path.as_str();
    let path = match parts.uri.path().strip_prefix(base) {
        Some(rest) if !base.is_empty() && rest.starts_with('/') => rest,
        _ => parts.uri.path(),
    };
    let (route, tenant) = match resolve(&parts.method, path) {
        Ok(found) => found,
        Err(Miss::NotFound) => {
            let error =
                A2aError::MethodNotFound(format!("no route for {} {}", parts.method, parts.uri.path()));
            return error_response(&error, a2a_json);
        }
        Err(Miss::MethodNotAllowed(allowed)) => {
            let error = A2aError::MethodNotAllowed {
                method: parts.method.to_string(),
                path: parts.uri.path().to_owned(),
                allow: Some(allowed.to_owned()),
            };
            return error_response(&error, a2a_json);
        }
    };
    let limit = state.settings.max_request_bytes;
    let body = match request_size::read_body(body, &parts.headers, limit).await {
        Ok(body) => body,
        Err(error) => return error_response(&error, a2a_json),
    };
    let operation = match operation(route, &parts.headers, parts.uri.query(), &body, state.core.settings()) {
        Ok(mut operation) => {
            if let Some(tenant) = tenant {
                operation.set_tenant(tenant);
            }
            operation
        }
        Err(error) => return error_response(&error, a2a_json),
    };
    let call = http::call_context(&parts.headers, parts.uri.query()).authenticated(parts.extensions.get());
    match operation.execute(&state.core, &call, "rest").await {
        Ok(Outcome::Json(result)) => http::json_text_response(StatusCode::OK, result.into_text(), a2a_json),
        Ok(Outcome::Stream(stream)) => {
            let generation = call.wants_generation();
            sse::response(stream, state.settings.sse_keep_alive, move |item, out| match item {
                Ok(event) => {
                    let json = event.json(generation, |r| encode_string_for(r, generation));
                    out.event(Some(event.seq), None, &[&json])
                }
                Err(error) => out.event(None, Some("error"), &[&error.to_http_body().to_string()]),
            })
        }
        Err(error) => error_response(&error, a2a_json),
    }
}

fn error_response(error: &A2aError, a2a_json: bool) -> Response {
    http::error_response(error, &error.to_http_body(), a2a_json)
}

/// The request body as JSON (`{}` when empty), refusing bodies that are not declared JSON and
/// requests over the core's `limits`.
fn body_json(headers: &HeaderMap, body: &[u8], limits: &CoreSettings) -> Result<Value, A2aError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Object(Map::new()));
    }
    if !http::is_json(headers) {
        return Err(http::not_json(headers));
    }
    http::parse_json(body, limits)
}

pub(crate) fn operation(
    route: Route,
    headers: &HeaderMap,
    query: Option<&str>,
    body: &[u8],
    limits: &CoreSettings,
) -> Result<Operation, A2aError> {
    let query = query.unwrap_or_default();
    let body_json = |headers, body| body_json(headers, body, limits);
    Ok(match route {
        Route::SendMessage => Operation::SendMessage(decode(&body_json(headers, body)?)?),
        Route::SendStreamingMessage => Operation::SendStreamingMessage(decode(&body_json(headers, body)?)?),
        Route::ListTasks => Operation::ListTasks(super::operation::list_tasks(&query_json(
            descriptor::<ListTasksRequest>(),
            query,
        )?)?),
        Route::GetTask(id) => {
            let request = decode(&query_json(descriptor::<GetTaskRequest>(), query)?)?;
            Operation::GetTask(GetTaskRequest { id, ..request })
        }
        Route::CancelTask(id) => {
            let request: CancelTaskRequest = decode(&body_json(headers, body)?)?;
            Operation::CancelTask(CancelTaskRequest { id, ..request })
        }
        Route::SubscribeToTask(id) => {
            Operation::SubscribeToTask(SubscribeToTaskRequest { id, ..Default::default() })
        }
        Route::CreatePushConfig(task_id) => {
            let mut config: crate::proto::TaskPushNotificationConfig = decode(&body_json(headers, body)?)?;
            config.task_id = task_id;
            Operation::CreatePushConfig(config)
        }
        Route::ListPushConfigs(task_id) => {
            let request =
                decode(&query_json(descriptor::<ListTaskPushNotificationConfigsRequest>(), query)?)?;
            Operation::ListPushConfigs(ListTaskPushNotificationConfigsRequest { task_id, ..request })
        }
        Route::GetPushConfig(task_id, id) => Operation::GetPushConfig(GetTaskPushNotificationConfigRequest {
            task_id,
            id,
            ..Default::default()
        }),
        Route::DeletePushConfig(task_id, id) => {
            Operation::DeletePushConfig(DeleteTaskPushNotificationConfigRequest {
                task_id,
                id,
                ..Default::default()
            })
        }
        Route::ExtendedAgentCard => Operation::GetExtendedAgentCard(GetExtendedAgentCardRequest::default()),
    })
}

/// Query parameters as the ProtoJSON object of `message`, typed by its descriptor: numbers and
/// booleans are parsed, everything else (strings, enum names, timestamps) stays a string.
/// Names may be camelCase or snake_case; unknown names are ignored; repeated fields take
/// repeated keys or comma-separated values (spec §11.5).
fn query_json(message: MessageDescriptor, query: &str) -> Result<Value, A2aError> {
    let mut object = Map::new();
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        let Some(field) = message.get_field_by_json_name(&key).or_else(|| message.get_field_by_name(&key))
        else {
            continue;
        };
        let name = field.json_name().to_owned();
        let typed = |raw: &str| -> Result<Value, A2aError> {
            let bad = |what: &str| A2aError::invalid_field(name.clone(), format!("{raw:?} is not {what}"));
            Ok(match field.kind() {
                Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 | Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => {
                    Value::from(raw.parse::<i64>().map_err(|_| bad("an integer"))?)
                }
                Kind::Uint32 | Kind::Fixed32 | Kind::Uint64 | Kind::Fixed64 => {
                    Value::from(raw.parse::<u64>().map_err(|_| bad("an unsigned integer"))?)
                }
                Kind::Bool => Value::Bool(raw.parse::<bool>().map_err(|_| bad("true or false"))?),
                Kind::Message(_)
                    if field
                        .kind()
                        .as_message()
                        .is_some_and(|m| m.full_name() != "google.protobuf.Timestamp") =>
                {
                    return Err(A2aError::invalid_field(
                        name.clone(),
                        "objects cannot be given in the query string",
                    ));
                }
                _ => Value::String(raw.to_owned()),
            })
        };
        if field.is_list() {
            let list = object.entry(name.clone()).or_insert_with(|| Value::Array(Vec::new()));
            for item in value.split(',').filter(|s| !s.is_empty()) {
                if let Value::Array(items) = list {
                    items.push(typed(item)?);
                }
            }
        } else {
            object.insert(name.clone(), typed(&value)?);
        }
    }
    Ok(Value::Object(object))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(method: Method, path: &str) -> Result<(Route, Option<String>), Miss> {
        resolve(&method, path)
    }

    #[test]
    fn routes_with_and_without_tenant() {
        assert_eq!(route(Method::POST, "/message:send"), Ok((Route::SendMessage, None)));
        assert_eq!(
            route(Method::POST, "/acme/message:stream"),
            Ok((Route::SendStreamingMessage, Some("acme".into())))
        );
        assert_eq!(route(Method::GET, "/tasks/abc"), Ok((Route::GetTask("abc".into()), None)));
        assert_eq!(route(Method::GET, "/tasks/tasks"), Ok((Route::GetTask("tasks".into()), None)));
        assert_eq!(route(Method::GET, "/t1/tasks"), Ok((Route::ListTasks, Some("t1".into()))));
        assert_eq!(route(Method::POST, "/tasks/a%3Ab:cancel"), Ok((Route::CancelTask("a:b".into()), None)));
        assert_eq!(
            route(Method::GET, "/x/tasks/abc:subscribe"),
            Ok((Route::SubscribeToTask("abc".into()), Some("x".into())))
        );
        assert_eq!(
            route(Method::POST, "/tasks/abc:subscribe"),
            Ok((Route::SubscribeToTask("abc".into()), None))
        );
        assert_eq!(
            route(Method::DELETE, "/tasks/t/pushNotificationConfigs/c"),
            Ok((Route::DeletePushConfig("t".into(), "c".into()), None))
        );
        assert_eq!(route(Method::GET, "/message:send"), Err(Miss::MethodNotAllowed("POST")));
        assert_eq!(route(Method::GET, "/nope"), Err(Miss::NotFound));
        assert_eq!(route(Method::POST, "/tasks/abc:explode"), Err(Miss::NotFound));
    }

    #[test]
    fn query_parameters_are_typed_by_the_descriptor() {
        let value = query_json(
            descriptor::<ListTasksRequest>(),
            "contextId=c&page_size=5&includeArtifacts=true&status=TASK_STATE_WORKING&statusTimestampAfter=2026-01-01T00:00:00Z&A2A-Version=1.0&unknown=1",
        )
        .unwrap();
        let request: ListTasksRequest = decode(&value).unwrap();
        assert_eq!(request.context_id, "c");
        assert_eq!(request.page_size, Some(5));
        assert_eq!(request.include_artifacts, Some(true));
        assert_eq!(request.status, crate::proto::TaskState::Working as i32);
        assert!(request.status_timestamp_after.is_some());
        let error = query_json(descriptor::<ListTasksRequest>(), "pageSize=ten").unwrap_err();
        assert_eq!(error.violations()[0].field, "pageSize");
    }
}
