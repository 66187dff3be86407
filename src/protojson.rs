//! ProtoJSON for the generated types, driven by the embedded descriptors (prost-reflect), so the
//! JSON bindings, push bodies and card files speak exactly the proto's JSON mapping with no
//! hand-written twin model. It is the proto's codec, so it lives beside [`crate::proto`].
//!
//! Output is canonical: lowerCamelCase names, enums by name, base64 bytes, RFC 3339 timestamps
//! ending in `Z`, default-valued implicit fields omitted. Input is lenient as ProtoJSON parsers
//! must be: proto or JSON field names, enum names or numbers, `null` for any field (for
//! repeated and map fields too, which real clients send), unknown fields ignored.
use std::sync::LazyLock;

use prost::{Message, Name};
use prost_reflect::{DescriptorPool, DeserializeOptions, DynamicMessage, MessageDescriptor, ReflectMessage};
use serde_json::Value;

use crate::error::A2aError;
use crate::proto::{FILE_DESCRIPTOR_SET, ListTasksResponse};

static POOL: LazyLock<DescriptorPool> = LazyLock::new(|| {
    DescriptorPool::decode(FILE_DESCRIPTOR_SET).expect("the embedded descriptor set is valid")
});

/// The descriptor of a generated message type.
pub fn descriptor<T: Name>() -> MessageDescriptor {
    POOL.get_message_by_name(&T::full_name()).expect("every generated type is in the embedded descriptor set")
}

/// Decodes a ProtoJSON value into `T`; a value that does not fit is an `InvalidParams` error
/// naming what is wrong.
pub fn decode<T: Message + Name + Default>(value: &Value) -> Result<T, A2aError> {
    from_value(value, false).map_err(|problem| invalid_json::<T>(&problem))
}

/// Decodes a ProtoJSON value into `T` strictly: an unknown field or enum name is an error, not
/// ignored, because a misspelt field there is a bug to report (an exec agent's control lines).
/// The error is the problem in words, for the caller to put in its own terms.
pub fn decode_strict<T: Message + Name + Default>(value: &Value) -> Result<T, String> {
    from_value(value, true)
}

fn from_value<T: Message + Name + Default>(value: &Value, deny_unknown: bool) -> Result<T, String> {
    let options = DeserializeOptions::new().deny_unknown_fields(deny_unknown);
    let message = DynamicMessage::deserialize_with_options(descriptor::<T>(), value, &options)
        .map_err(|e| e.to_string())?;
    message.transcode_to::<T>().map_err(|e| e.to_string())
}

fn invalid_json<T: Name>(problem: &str) -> A2aError {
    A2aError::InvalidParams {
        message: format!("invalid {}: {problem}", T::NAME),
        violations: vec![crate::error::FieldViolation::new(T::NAME, problem)],
    }
}

fn dynamic<T: Message + Name>(message: &T) -> DynamicMessage {
    let mut dynamic = DynamicMessage::new(descriptor::<T>());
    dynamic.transcode_from(message).expect("a generated message transcodes to its own descriptor");
    dynamic
}

/// Encodes `message` as canonical ProtoJSON.
pub fn encode<T: Message + Name>(message: &T) -> Value {
    serde_json::to_value(dynamic(message)).expect("ProtoJSON of a valid message serializes")
}

/// Encodes `message` as canonical ProtoJSON text.
pub fn encode_string<T: Message + Name>(message: &T) -> String {
    serde_json::to_string(&dynamic(message)).expect("ProtoJSON of a valid message serializes")
}

/// The messages that carry A2A dev-1.1's `generation` field.
const WITH_GENERATION: [&str; 3] =
    ["lf.a2a.v1.Task", "lf.a2a.v1.TaskStatusUpdateEvent", "lf.a2a.v1.TaskArtifactUpdateEvent"];

/// Clears `generation` in `message` if it carries one, else in the messages directly inside it
/// (a StreamResponse's payload, a SendMessageResponse's task, a ListTasksResponse's tasks).
fn strip_generation(message: &mut DynamicMessage) {
    let descriptor = message.descriptor();
    if WITH_GENERATION.contains(&descriptor.full_name()) {
        message.clear_field_by_name("generation");
        return;
    }
    for field in descriptor.fields() {
        let carries = field.kind().as_message().is_some_and(|m| WITH_GENERATION.contains(&m.full_name()));
        if !carries || !message.has_field(&field) {
            continue;
        }
        match message.get_field_mut(&field) {
            prost_reflect::Value::Message(inner) => inner.clear_field_by_name("generation"),
            prost_reflect::Value::List(items) => {
                for item in items {
                    if let prost_reflect::Value::Message(inner) = item {
                        inner.clear_field_by_name("generation");
                    }
                }
            }
            _ => {}
        }
    }
}

/// `message` for a JSON client: with the `generation` fields (A2A dev-1.1) only when
/// `generation` (see [`crate::call::CallContext::wants_generation`]); without, exactly the
/// v1.0 form.
fn dynamic_for<T: Message + Name>(message: &T, generation: bool) -> DynamicMessage {
    let mut dynamic = dynamic(message);
    if !generation {
        strip_generation(&mut dynamic);
    }
    dynamic
}

/// [`encode`], with the `generation` fields only when `generation`.
pub fn encode_for<T: Message + Name>(message: &T, generation: bool) -> Value {
    serde_json::to_value(dynamic_for(message, generation)).expect("ProtoJSON of a valid message serializes")
}

/// [`encode_string`], with the `generation` fields only when `generation`.
pub fn encode_string_for<T: Message + Name>(message: &T, generation: bool) -> String {
    serde_json::to_string(&dynamic_for(message, generation)).expect("ProtoJSON of a valid message serializes")
}

/// `ListTasksResponse` must always carry `nextPageToken`, `pageSize` and `totalSize`, even at
/// their default values (spec §3.1.4), and `tasks` even when empty.
pub fn encode_list_tasks(response: &ListTasksResponse) -> Value {
    encode_list_tasks_for(response, true)
}

/// [`encode_list_tasks`], with the tasks' `generation` only when `generation`.
pub fn encode_list_tasks_for(response: &ListTasksResponse, generation: bool) -> Value {
    let mut value = encode_for(response, generation);
    if let Value::Object(map) = &mut value {
        map.entry("tasks").or_insert_with(|| Value::Array(Vec::new()));
        map.entry("nextPageToken").or_insert_with(|| Value::String(String::new()));
        map.entry("pageSize").or_insert_with(|| Value::from(response.page_size));
        map.entry("totalSize").or_insert_with(|| Value::from(response.total_size));
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{Message as A2aMessage, Part, Role, Task, TaskState, TaskStatus, part};
    use serde_json::json;

    #[test]
    fn canonical_output() {
        let task = Task {
            id: "t".into(),
            status: Some(TaskStatus {
                state: TaskState::Working as i32,
                message: None,
                timestamp: Some(pbjson_types::Timestamp { seconds: 1_700_000_000, nanos: 123_000_000 }),
            }),
            history: vec![A2aMessage {
                message_id: "m".into(),
                role: Role::User as i32,
                parts: vec![Part { content: Some(part::Content::Raw(vec![1, 2, 3])), ..Default::default() }],
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(
            encode(&task),
            json!({
                "id": "t",
                "status": {"state": "TASK_STATE_WORKING", "timestamp": "2023-11-14T22:13:20.123Z"},
                "history": [{"messageId": "m", "role": "ROLE_USER", "parts": [{"raw": "AQID"}]}]
            })
        );
    }

    #[test]
    fn lenient_input() {
        let value = json!({
            "message_id": "m", "role": 1, "parts": [{"text": "hi"}, {"data": null}],
            "extensions": null, "metadata": null, "somethingNew": {"x": 1}
        });
        let message: A2aMessage = decode(&value).unwrap();
        assert_eq!(message.message_id, "m");
        assert_eq!(message.role, Role::User as i32);
        assert_eq!(message.parts.len(), 2);
        assert!(message.extensions.is_empty());
        // Unknown enum names are dropped like unknown fields (validation then rejects a
        // missing role); values of the wrong JSON type are errors.
        let unknown: A2aMessage = decode(&json!({"role": "ROLE_NOPE"})).unwrap();
        assert_eq!(unknown.role, 0);
        let bad = decode::<A2aMessage>(&json!({"parts": "not a list"})).unwrap_err();
        assert_eq!(bad.reason(), "INVALID_PARAMS");
    }

    #[test]
    fn strict_input_rejects_what_lenient_input_ignores() {
        let typo = json!({"messageId": "m", "role": "ROLE_USER", "parts": [], "contextID": "c"});
        assert!(decode::<A2aMessage>(&typo).is_ok());
        let problem = decode_strict::<A2aMessage>(&typo).unwrap_err();
        assert!(problem.contains("contextID"), "{problem}");
        let problem = decode_strict::<A2aMessage>(&json!({"role": "ROLE_NOPE"})).unwrap_err();
        assert!(problem.contains("ROLE_NOPE"), "{problem}");
        let message: A2aMessage =
            decode_strict(&json!({"message_id": "m", "role": 2, "extensions": null})).unwrap();
        assert_eq!((message.message_id.as_str(), message.role), ("m", Role::Agent as i32));
    }

    #[test]
    fn generation_only_when_asked_for() {
        use crate::proto::{StreamResponse, TaskStatusUpdateEvent, stream_response::Payload};
        let task = Task { id: "t".into(), generation: 3, ..Default::default() };
        assert_eq!(encode_for(&task, true), json!({"id": "t", "generation": "3"}));
        assert_eq!(encode_for(&task, false), json!({"id": "t"}));
        let update = TaskStatusUpdateEvent { task_id: "t".into(), generation: 4, ..Default::default() };
        let event = StreamResponse { payload: Some(Payload::StatusUpdate(update)) };
        assert_eq!(encode_string_for(&event, false), r#"{"statusUpdate":{"taskId":"t"}}"#);
        assert_eq!(encode_string_for(&event, true), r#"{"statusUpdate":{"taskId":"t","generation":"4"}}"#);
        let list = ListTasksResponse { tasks: vec![task], ..Default::default() };
        assert_eq!(encode_list_tasks_for(&list, false)["tasks"], json!([{"id": "t"}]));
    }

    #[test]
    fn list_response_always_has_paging_fields() {
        let value = encode_list_tasks(&ListTasksResponse::default());
        assert_eq!(value, json!({"tasks": [], "nextPageToken": "", "pageSize": 0, "totalSize": 0}));
    }
}
