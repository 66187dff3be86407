//! The one place that knows how A2A v0.3 JSON differs from v1.0: v0.3 params become the v1.0
//! ProtoJSON that [`protojson`](crate::protojson) decodes into the generated request types, and
//! v1.0 results (encoded by the same codec) become v0.3 shapes. Both directions are plain
//! rewrites of JSON trees, so no second model of the types exists.
//!
//! The v0.3 conventions handled here: `kind` discriminators (`task`, `message`, `status-update`,
//! `artifact-update`, `text`, `file`, `data`), lowercase kebab-case enums (`input-required`,
//! `user`), `final` on status updates, `FilePart{file:{bytes|uri, mimeType, name}}`,
//! `DataPart.data` as an object, `blocking` instead of `returnImmediately`, and the push config
//! nested in `{taskId, pushNotificationConfig}` with `authentication.schemes[]`.
use serde_json::{Map, Value, json};

use crate::error::A2aError;

/// v1.0 TaskState names and their v0.3 JSON spellings (v0.3 spelt `canceled` in JSON even
/// though its proto said `TASK_STATE_CANCELLED`).
pub const STATES: [(&str, &str); 9] = [
    ("TASK_STATE_UNSPECIFIED", "unknown"),
    ("TASK_STATE_SUBMITTED", "submitted"),
    ("TASK_STATE_WORKING", "working"),
    ("TASK_STATE_COMPLETED", "completed"),
    ("TASK_STATE_FAILED", "failed"),
    ("TASK_STATE_CANCELED", "canceled"),
    ("TASK_STATE_INPUT_REQUIRED", "input-required"),
    ("TASK_STATE_REJECTED", "rejected"),
    ("TASK_STATE_AUTH_REQUIRED", "auth-required"),
];

/// The states after which a v0.3 stream ends (`final: true`): terminal and interrupted ones.
const FINAL_STATES: [&str; 6] =
    ["completed", "failed", "canceled", "rejected", "input-required", "auth-required"];

fn invalid(field: &str, why: &str) -> A2aError {
    A2aError::invalid_field(field, why)
}

fn object<'a>(value: &'a Value, field: &str) -> Result<&'a Map<String, Value>, A2aError> {
    value.as_object().ok_or_else(|| invalid(field, "must be an object"))
}

/// Copies the listed members of `from` that are present (and not null) into `to`.
fn copy(from: &Map<String, Value>, to: &mut Map<String, Value>, names: &[&str]) {
    for name in names {
        if let Some(value) = from.get(*name).filter(|v| !v.is_null()) {
            to.insert((*name).to_owned(), value.clone());
        }
    }
}

// ---- v0.3 → v1.0 -------------------------------------------------------------------------

/// A v0.3 `Part` (`{kind:"text"|"file"|"data", …}`) as a v1.0 `Part`. A part without `kind`
/// is recognised by its member, as lenient parsers must.
pub fn part_in(part: &Value) -> Result<Value, A2aError> {
    let part = object(part, "message.parts")?;
    let kind = match part.get("kind").and_then(Value::as_str) {
        Some(kind) => kind,
        None if part.contains_key("text") => "text",
        None if part.contains_key("file") => "file",
        None if part.contains_key("data") => "data",
        None => return Err(invalid("message.parts.kind", "must be \"text\", \"file\" or \"data\"")),
    };
    let mut out = Map::new();
    copy(part, &mut out, &["metadata"]);
    match kind {
        "text" => copy(part, &mut out, &["text"]),
        "data" => copy(part, &mut out, &["data"]),
        "file" => {
            let file = object(part.get("file").unwrap_or(&Value::Null), "message.parts.file")?;
            match (file.get("bytes"), file.get("uri")) {
                (Some(bytes), _) if !bytes.is_null() => out.insert("raw".into(), bytes.clone()),
                (_, Some(uri)) if !uri.is_null() => out.insert("url".into(), uri.clone()),
                _ => return Err(invalid("message.parts.file", "needs \"bytes\" or \"uri\"")),
            };
            if let Some(mime) = file.get("mimeType").filter(|v| !v.is_null()) {
                out.insert("mediaType".into(), mime.clone());
            }
            if let Some(name) = file.get("name").filter(|v| !v.is_null()) {
                out.insert("filename".into(), name.clone());
            }
        }
        other => return Err(invalid("message.parts.kind", &format!("unknown part kind {other:?}"))),
    }
    Ok(Value::Object(out))
}

/// A v0.3 `Message` as a v1.0 `Message`.
pub fn message_in(message: &Value) -> Result<Value, A2aError> {
    let message = object(message, "message")?;
    let mut out = Map::new();
    copy(
        message,
        &mut out,
        &["messageId", "contextId", "taskId", "referenceTaskIds", "metadata", "extensions"],
    );
    let role = match message.get("role").and_then(Value::as_str) {
        Some("user") => "ROLE_USER",
        Some("agent") => "ROLE_AGENT",
        _ => return Err(invalid("message.role", "must be \"user\" or \"agent\"")),
    };
    out.insert("role".into(), role.into());
    let parts = match message.get("parts") {
        Some(Value::Array(parts)) => parts.iter().map(part_in).collect::<Result<Vec<_>, _>>()?,
        None | Some(Value::Null) => Vec::new(),
        Some(_) => return Err(invalid("message.parts", "must be a list")),
    };
    out.insert("parts".into(), Value::Array(parts));
    Ok(Value::Object(out))
}

/// A v0.3 `PushNotificationConfig` (`authentication.schemes[]`) as the fields of a v1.0
/// `TaskPushNotificationConfig` (one `authentication.scheme`) for `task_id`.
pub fn push_config_in(config: &Value, task_id: &str) -> Result<Value, A2aError> {
    let config = object(config, "pushNotificationConfig")?;
    let mut out = Map::new();
    copy(config, &mut out, &["id", "url", "token"]);
    if !task_id.is_empty() {
        out.insert("taskId".into(), task_id.into());
    }
    if let Some(auth) = config.get("authentication").filter(|v| !v.is_null()) {
        let auth = object(auth, "pushNotificationConfig.authentication")?;
        let scheme = auth.get("schemes").and_then(Value::as_array).and_then(|s| s.first()).cloned();
        let mut v1 = Map::new();
        v1.insert("scheme".into(), scheme.unwrap_or_else(|| "".into()));
        copy(auth, &mut v1, &["credentials"]);
        out.insert("authentication".into(), Value::Object(v1));
    }
    Ok(Value::Object(out))
}

/// v0.3 `MessageSendParams` as a v1.0 `SendMessageRequest`. v0.3 blocks unless
/// `configuration.blocking` is `false` (the v0.3 SDKs' rule), which is v1.0's default.
pub fn send_params_in(params: &Value) -> Result<Value, A2aError> {
    let params = object(params, "params")?;
    let mut out = Map::new();
    out.insert("message".into(), message_in(params.get("message").unwrap_or(&Value::Null))?);
    copy(params, &mut out, &["metadata"]);
    if let Some(config) = params.get("configuration").filter(|v| !v.is_null()) {
        let config = object(config, "configuration")?;
        let mut v1 = Map::new();
        copy(config, &mut v1, &["acceptedOutputModes", "historyLength"]);
        if config.get("blocking") == Some(&Value::Bool(false)) {
            v1.insert("returnImmediately".into(), true.into());
        }
        if let Some(push) = config.get("pushNotificationConfig").filter(|v| !v.is_null()) {
            v1.insert("taskPushNotificationConfig".into(), push_config_in(push, "")?);
        }
        out.insert("configuration".into(), Value::Object(v1));
    }
    Ok(Value::Object(out))
}

/// The `id` of v0.3 `TaskIdParams` / `TaskQueryParams`.
pub fn task_id_in(params: &Value) -> Result<String, A2aError> {
    match params.get("id") {
        Some(Value::String(id)) => Ok(id.clone()),
        _ => Err(invalid("id", "is required and must be a string")),
    }
}

/// v0.3 `TaskQueryParams` (`{id, historyLength}`) as a v1.0 `GetTaskRequest`.
pub fn task_query_in(params: &Value) -> Result<Value, A2aError> {
    let mut out = json!({"id": task_id_in(params)?});
    if let Some(length) = params.get("historyLength").filter(|v| !v.is_null()) {
        out["historyLength"] = length.clone();
    }
    Ok(out)
}

/// v0.3 `TaskPushNotificationConfig` (`{taskId, pushNotificationConfig}`) as a v1.0 one. A
/// config without an id gets the task's id, as v0.3 servers did.
pub fn task_push_config_in(params: &Value) -> Result<Value, A2aError> {
    let task_id = match params.get("taskId") {
        Some(Value::String(id)) => id.clone(),
        _ => return Err(invalid("taskId", "is required and must be a string")),
    };
    let mut out = push_config_in(params.get("pushNotificationConfig").unwrap_or(&Value::Null), &task_id)?;
    if out.get("id").and_then(Value::as_str).is_none_or(str::is_empty) {
        out["id"] = task_id.into();
    }
    Ok(out)
}

/// The `(taskId, configId)` of v0.3 get/delete push config params (`{id, pushNotificationConfigId}`);
/// a missing config id means the task's default config, whose id is the task's.
pub fn push_config_ref_in(params: &Value) -> Result<Value, A2aError> {
    let task_id = task_id_in(params)?;
    let config_id = match params.get("pushNotificationConfigId") {
        Some(Value::String(id)) if !id.is_empty() => id.clone(),
        None | Some(Value::Null) | Some(Value::String(_)) => task_id.clone(),
        Some(_) => return Err(invalid("pushNotificationConfigId", "must be a string")),
    };
    Ok(json!({"taskId": task_id, "id": config_id}))
}

/// A v0.3 `TaskStatus` (kebab-case state) as a v1.0 one.
fn status_in(status: &Value) -> Result<Value, A2aError> {
    let mut out = object(status, "status")?.clone();
    let state = out.get("state").and_then(Value::as_str).unwrap_or("unknown");
    let state = STATES.iter().find(|(_, v03)| *v03 == state).map_or("TASK_STATE_UNSPECIFIED", |(v1, _)| v1);
    out.insert("state".into(), state.into());
    if let Some(message) = out.get("message").filter(|v| !v.is_null()) {
        let message = message_in(message)?;
        out.insert("message".into(), message);
    }
    Ok(Value::Object(out))
}

/// A v0.3 `Artifact` (parts with `kind`) as a v1.0 one.
fn artifact_in(artifact: &Value) -> Result<Value, A2aError> {
    let mut out = object(artifact, "artifact")?.clone();
    let parts = out.get("parts").and_then(Value::as_array).map(|parts| parts.iter().map(part_in).collect());
    out.insert("parts".into(), Value::Array(parts.transpose()?.unwrap_or_default()));
    Ok(Value::Object(out))
}

/// A v0.3 `Task` (`kind: "task"`) as a v1.0 one.
fn task_in(task: &Value) -> Result<Value, A2aError> {
    let mut out = object(task, "task")?.clone();
    out.remove("kind");
    let status = status_in(out.get("status").unwrap_or(&json!({})))?;
    out.insert("status".into(), status);
    for (key, map) in
        [("history", message_in as fn(&Value) -> Result<Value, A2aError>), ("artifacts", artifact_in)]
    {
        if let Some(items) = out.get(key).and_then(Value::as_array) {
            let converted = items.iter().map(map).collect::<Result<Vec<_>, _>>()?;
            out.insert(key.into(), Value::Array(converted));
        }
    }
    Ok(Value::Object(out))
}

/// A v0.3 result (what an upstream v0.3 agent answers to `message/send`, `message/stream`,
/// `tasks/get`, `tasks/resubscribe`: a Task, Message or event, told apart by `kind`) as the
/// v1.0 `StreamResponse` ProtoJSON; the inverse of [`result_out`]. `final` is dropped: v1.0
/// derives it from the state.
pub fn result_in(result: &Value) -> Result<Value, A2aError> {
    let kind = result.get("kind").and_then(Value::as_str).unwrap_or_default();
    Ok(match kind {
        "task" => json!({"task": task_in(result)?}),
        "message" => {
            let mut message = object(result, "message")?.clone();
            message.remove("kind");
            json!({"message": message_in(&Value::Object(message))?})
        }
        "status-update" => {
            let mut update = object(result, "statusUpdate")?.clone();
            update.retain(|name, _| !["kind", "final"].contains(&name.as_str()));
            let status = status_in(update.get("status").unwrap_or(&json!({})))?;
            update.insert("status".into(), status);
            json!({"statusUpdate": update})
        }
        "artifact-update" => {
            let mut update = object(result, "artifactUpdate")?.clone();
            update.remove("kind");
            let artifact = artifact_in(update.get("artifact").unwrap_or(&json!({})))?;
            update.insert("artifact".into(), artifact);
            json!({"artifactUpdate": update})
        }
        other => return Err(invalid("result.kind", &format!("unknown kind {other:?}"))),
    })
}

// ---- v1.0 → v0.3 -------------------------------------------------------------------------

fn rename_enum(value: &mut Value, pairs: &[(&str, &str)]) {
    if let Some(name) = value.as_str()
        && let Some((_, v03)) = pairs.iter().find(|(v1, _)| *v1 == name)
    {
        *value = Value::String((*v03).to_owned());
    }
}

/// A v1.0 `Part` (ProtoJSON) as a v0.3 part with its `kind`. A v1.0 data part whose value is
/// not an object is wrapped as `{"value": …}`: v0.3 data parts carry objects only.
pub fn part_out(part: &Value) -> Value {
    let Some(part) = part.as_object() else { return part.clone() };
    let mut out = Map::new();
    if let Some(text) = part.get("text") {
        out.insert("kind".into(), "text".into());
        out.insert("text".into(), text.clone());
    } else if let Some(data) = part.get("data") {
        out.insert("kind".into(), "data".into());
        let data = if data.is_object() { data.clone() } else { json!({"value": data}) };
        out.insert("data".into(), data);
    } else {
        let mut file = Map::new();
        if let Some(raw) = part.get("raw") {
            file.insert("bytes".into(), raw.clone());
        } else {
            // A v1.0 part is exactly one of text/raw/url/data; url is what is left.
            file.insert("uri".into(), part.get("url").cloned().unwrap_or_else(|| "".into()));
        }
        if let Some(media) = part.get("mediaType") {
            file.insert("mimeType".into(), media.clone());
        }
        if let Some(name) = part.get("filename") {
            file.insert("name".into(), name.clone());
        }
        out.insert("kind".into(), "file".into());
        out.insert("file".into(), Value::Object(file));
    }
    copy(part, &mut out, &["metadata"]);
    Value::Object(out)
}

fn parts_out(value: &mut Map<String, Value>) {
    let parts =
        value.get("parts").and_then(Value::as_array).map(|parts| parts.iter().map(part_out).collect());
    value.insert("parts".into(), Value::Array(parts.unwrap_or_default()));
}

/// A v1.0 `Message` as a v0.3 one (`kind: "message"`, `role: "user"|"agent"`).
pub fn message_out(message: &Value) -> Value {
    let mut out = message.as_object().cloned().unwrap_or_default();
    out.insert("kind".into(), "message".into());
    if let Some(role) = out.get_mut("role") {
        rename_enum(role, &[("ROLE_USER", "user"), ("ROLE_AGENT", "agent")]);
    }
    parts_out(&mut out);
    Value::Object(out)
}

/// A v1.0 `TaskStatus` as a v0.3 one (kebab-case state).
pub fn status_out(status: &Value) -> Value {
    let mut out = status.as_object().cloned().unwrap_or_default();
    let state = out.entry("state").or_insert_with(|| "TASK_STATE_UNSPECIFIED".into());
    rename_enum(state, &STATES);
    if let Some(message) = out.get("message").map(message_out) {
        out.insert("message".into(), message);
    }
    Value::Object(out)
}

fn artifact_out(artifact: &Value) -> Value {
    let mut out = artifact.as_object().cloned().unwrap_or_default();
    parts_out(&mut out);
    Value::Object(out)
}

/// A v1.0 `Task` as a v0.3 one (`kind: "task"`).
pub fn task_out(task: &Value) -> Value {
    let mut out = task.as_object().cloned().unwrap_or_default();
    out.insert("kind".into(), "task".into());
    let status = status_out(out.get("status").unwrap_or(&Value::Null));
    out.insert("status".into(), status);
    for (key, map) in [("history", message_out as fn(&Value) -> Value), ("artifacts", artifact_out)] {
        if let Some(items) = out.get(key).and_then(Value::as_array) {
            let converted = items.iter().map(map).collect();
            out.insert(key.into(), Value::Array(converted));
        }
    }
    Value::Object(out)
}

/// A v1.0 `SendMessageResponse` or `StreamResponse` (ProtoJSON) as the v0.3 result: the Task,
/// Message or event itself, with its `kind`; status updates carry `final`.
pub fn result_out(response: &Value) -> Value {
    if let Some(task) = response.get("task") {
        return task_out(task);
    }
    if let Some(message) = response.get("message") {
        return message_out(message);
    }
    if let Some(update) = response.get("statusUpdate") {
        let mut out = update.as_object().cloned().unwrap_or_default();
        let status = status_out(out.get("status").unwrap_or(&Value::Null));
        let last = status.get("state").and_then(Value::as_str).is_some_and(|s| FINAL_STATES.contains(&s));
        out.insert("status".into(), status);
        out.insert("kind".into(), "status-update".into());
        out.insert("final".into(), last.into());
        return Value::Object(out);
    }
    if let Some(update) = response.get("artifactUpdate") {
        let mut out = update.as_object().cloned().unwrap_or_default();
        let artifact = artifact_out(out.get("artifact").unwrap_or(&Value::Null));
        out.insert("artifact".into(), artifact);
        out.insert("kind".into(), "artifact-update".into());
        return Value::Object(out);
    }
    response.clone()
}

/// A v1.0 `TaskPushNotificationConfig` as a v0.3 one: `{taskId, pushNotificationConfig}`.
pub fn push_config_out(config: &Value) -> Value {
    let from = config.as_object().cloned().unwrap_or_default();
    let mut inner = Map::new();
    copy(&from, &mut inner, &["id", "url", "token"]);
    if let Some(auth) = from.get("authentication").and_then(Value::as_object) {
        let mut v03 = Map::new();
        let scheme = auth.get("scheme").cloned().unwrap_or_else(|| "".into());
        v03.insert("schemes".into(), Value::Array(vec![scheme]));
        copy(auth, &mut v03, &["credentials"]);
        inner.insert("authentication".into(), Value::Object(v03));
    }
    json!({"taskId": from.get("taskId").cloned().unwrap_or_else(|| "".into()), "pushNotificationConfig": inner})
}

/// An [`A2aError`] as a v0.3 JSON-RPC `error` object. The A2A codes -32001…-32007 are the same
/// in both versions; -32008 and -32009 are new in v1.0, so v0.3 clients get -32600 (invalid
/// request) for them. v0.3 `data` was free-form: it carries the v1.0 `reason`.
pub fn error_out(error: &A2aError) -> Value {
    let code = match error.jsonrpc_code() {
        -32008 | -32009 => -32600,
        code => code,
    };
    json!({"code": code, "message": error.to_string(), "data": {"reason": error.reason()}})
}
