//! The JSON-RPC 2.0 binding (spec §9): `POST /`, method names equal to the gRPC RPC names,
//! `params` and `result` in ProtoJSON, streaming methods answered with SSE in which every
//! event is a complete JSON-RPC response. Errors travel with HTTP 200.
use axum::body::Body;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use serde::Deserializer;
use serde::de::{MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use super::http::{self, HttpState};
use super::operation::{Operation, Outcome};
use super::request_budget::RequestBudget;
use super::strict_json::{self, UniqueKeys};
use super::{request_size, sse, v03};
use crate::call::Authentication;
use crate::core::CoreSettings;
use crate::error::A2aError;
use crate::protojson::{decode, encode_string_for};

/// Handles one JSON-RPC request.
pub async fn handle(
    State(state): State<HttpState>,
    auth: Option<Extension<Authentication>>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if !http::is_json(&headers) {
        return error_response(&RequestId::NULL, &http::not_json(&headers));
    }
    let body = match request_size::read_body(body, &headers, state.settings.max_request_bytes).await {
        Ok(body) => body,
        Err(error) => return error_response(&RequestId::NULL, &error),
    };
    let (id, request) = match envelope(&body, state.core.settings()) {
        Ok(decoded) => decoded,
        Err(error) => return error_response(&RequestId::NULL, &error),
    };
    let (method, params) = match request {
        Ok(request) => request,
        Err(error) => return error_response(&id, &error),
    };
    let auth = auth.as_ref().map(|a| &a.0);
    let call = http::call_context(&headers, uri.query()).authenticated(auth);
    if state.settings.v03 && v03::jsonrpc::is_v03_call(&method, call.version.as_deref()) {
        return v03::jsonrpc::handle(&state, &headers, auth, id, &method, params).await;
    }
    let operation = match params.and_then(|params| operation(&method, &params)) {
        Ok(operation) => operation,
        Err(error) => return error_response(&id, &error),
    };
    match operation.execute(&state.core, &call, "jsonrpc").await {
        Ok(Outcome::Json(result)) => {
            http::json_text_response(StatusCode::OK, answer(&id, "result", &result.into_text()), false)
        }
        Ok(Outcome::Stream(stream)) => {
            let generation = call.wants_generation();
            // Each event's cached JSON goes between the envelope's two halves, uncopied.
            let head = answer_head(&id, "result");
            sse::response(stream, state.settings.sse_keep_alive, move |item, out| match item {
                Ok(event) => {
                    let json = event.json(generation, |r| encode_string_for(r, generation));
                    out.event(Some(event.seq), None, &[&head, &json, "}"])
                }
                Err(error) => out.event(None, None, &[&answer(&id, "error", &error.to_jsonrpc_error())]),
            })
        }
        Err(error) => error_response(&id, &error),
    }
}

/// Any method but POST on a JSON-RPC URL: HTTP 405 with `Allow: POST` and a JSON-RPC error
/// (the URL is the binding's, so its errors take the binding's form).
pub async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    let error = A2aError::MethodNotAllowed {
        method: method.to_string(),
        path: uri.path().to_owned(),
        allow: Some("POST".to_owned()),
    };
    http::error_text_response(&error, answer(&RequestId::NULL, "error", &error.to_jsonrpc_error()), false)
}

/// A JSON-RPC request's id exactly as the client wrote it: a string, `null`, or a number of
/// any size and form. JSON-RPC 2.0 says the answer carries the same value, and a number
/// read into an integer or a float may not come back the same (2^53 + 1, 1e400, `1.50`),
/// so the id is never read as a number: its text is kept and written back.
#[derive(Clone)]
pub struct RequestId(Option<Box<RawValue>>);

impl RequestId {
    /// The id of an answer to a request whose id could not be read.
    pub const NULL: RequestId = RequestId(None);

    /// The id as JSON text.
    pub fn as_json(&self) -> &str {
        self.0.as_deref().map_or("null", RawValue::get)
    }

    fn of(raw: Box<RawValue>) -> Result<Self, A2aError> {
        match raw.get().as_bytes().first() {
            Some(b'"' | b'-' | b'0'..=b'9') => Ok(Self(Some(raw))),
            Some(b'n') => Ok(Self::NULL),
            _ => Err(invalid("the id must be a string, a number or null")),
        }
    }
}

/// A JSON-RPC answer: `{"jsonrpc":"2.0","id":…,"result"|"error":…}`, with the id as sent.
pub fn answer(id: &RequestId, member: &str, value: &(impl std::fmt::Display + ?Sized)) -> String {
    format!("{}{value}}}", answer_head(id, member))
}

/// An answer up to its `member`'s value: the value and a closing `}` complete it.
fn answer_head(id: &RequestId, member: &str) -> String {
    format!(r#"{ANSWER_START}{},"{member}":"#, id.as_json())
}

/// How every answer this binding writes begins, up to its id: [`refused`] reads the id back
/// after it.
const ANSWER_START: &str = r#"{"jsonrpc":"2.0","id":"#;

/// `error` in place of `answer`, a JSON-RPC answer this binding wrote (its id read back from
/// its head); `None` when `answer` is not one.
pub(crate) fn refused(answer: &[u8], error: &A2aError) -> Option<Response> {
    let rest = answer.strip_prefix(ANSWER_START.as_bytes())?;
    let raw = serde_json::Deserializer::from_slice(rest).into_iter::<Box<RawValue>>().next()?.ok()?;
    Some(error_response(&RequestId::of(raw).ok()?, error))
}

fn error_response(id: &RequestId, error: &A2aError) -> Response {
    http::json_text_response(StatusCode::OK, answer(id, "error", &error.to_jsonrpc_error()), false)
}

/// The method name and params of a request; the params are `Err` when they are over the core's
/// `--max-parts` or `--max-struct-values` (counted, never built), which the method's binding
/// renders.
pub(crate) type MethodCall = (String, Result<Value, A2aError>);

fn invalid(why: &str) -> A2aError {
    A2aError::InvalidRequest(format!("invalid JSON-RPC request: {why}"))
}

/// Splits a request into its id and its method and params. A body that is not I-JSON (a
/// duplicate name anywhere) or an envelope so broken that no id can be trusted fails as a
/// whole (answered with id `null`); a bad method or params fail with the id.
pub(crate) fn envelope(
    body: &[u8],
    limits: &CoreSettings,
) -> Result<(RequestId, Result<MethodCall, A2aError>), A2aError> {
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => {}
        Some(b'[') => return strict_json::parse(body).and(Err(invalid("batch requests are not supported"))),
        _ => return strict_json::parse(body).and(Err(invalid("the request must be a JSON object"))),
    }
    let budget = RequestBudget::new(limits);
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let members = deserializer.deserialize_map(Members::new(&budget)).and_then(|members| {
        deserializer.end()?;
        Ok(members)
    });
    let Members { id, jsonrpc, method, params, .. } = members.map_err(strict_json::parse_error)?;
    let id =
        RequestId::of(id.ok_or_else(|| invalid("an id is required (notifications are not supported)"))?)?;
    if jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
        return Ok((id, Err(invalid(r#""jsonrpc" must be "2.0""#))));
    }
    let Some(Value::String(method)) = method else {
        return Ok((id, Err(invalid(r#""method" must be a string"#))));
    };
    let params = match params {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(params @ Value::Object(_)) => params,
        Some(_) => return Ok((id, Err(A2aError::invalid_field("params", "must be an object")))),
    };
    Ok((id, Ok((method, budget.admit().map(|()| params)))))
}

/// The members of a request object, read in one pass: the id as raw text, every other value
/// through [`UniqueKeys`] (`params` as a request, counted against its budget), and no name
/// twice.
struct Members<'a> {
    budget: &'a RequestBudget,
    id: Option<Box<RawValue>>,
    jsonrpc: Option<Value>,
    method: Option<Value>,
    params: Option<Value>,
}

impl<'a> Members<'a> {
    fn new(budget: &'a RequestBudget) -> Self {
        Self { budget, id: None, jsonrpc: None, method: None, params: None }
    }
}

impl<'de, 'a> Visitor<'de> for Members<'a> {
    type Value = Members<'a>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON-RPC request object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'a>, A::Error> {
        let mut members = Members::new(self.budget);
        let mut others = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let taken = match key.as_str() {
                "id" => members.id.replace(map.next_value()?).is_some(),
                "jsonrpc" => members.jsonrpc.replace(map.next_value_seed(UniqueKeys::default())?).is_some(),
                "method" => members.method.replace(map.next_value_seed(UniqueKeys::default())?).is_some(),
                "params" => {
                    members.params.replace(map.next_value_seed(UniqueKeys::request(self.budget))?).is_some()
                }
                _ => {
                    map.next_value_seed(UniqueKeys::default())?;
                    !others.insert(key.clone())
                }
            };
            if taken {
                return Err(strict_json::duplicate(&key));
            }
        }
        Ok(members)
    }
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
