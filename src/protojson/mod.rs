//! ProtoJSON for the generated types, so the JSON bindings, push bodies and card files speak
//! exactly the proto's JSON mapping with no hand-written twin model. It is the proto's codec,
//! so it lives beside [`crate::proto`].
//!
//! Both directions use the serde code pbjson-build generates from the embedded descriptors,
//! with the descriptors themselves (prost-reflect, through a `DynamicMessage`) as the
//! reference and the fallback: going through a `DynamicMessage` (a protobuf encode or decode
//! and a map entry per field besides the JSON) was a sixth of an HTTP+JSON call's CPU when
//! writing and a tenth when reading. Writing ([`Encode`]): a test holds the two writers to the
//! same output, and a value the generated code refuses is written from the descriptors.
//! Reading (`read.rs`): what the generated code does not read exactly as the descriptors do
//! goes to the descriptors, whose strict mode exec agents' control lines get.
//!
//! Output is canonical: lowerCamelCase names, enums by name, base64 bytes, RFC 3339 timestamps
//! ending in `Z`, default-valued implicit fields omitted. Input is lenient as ProtoJSON parsers
//! must be: proto or JSON field names, enum names or numbers, `null` for any field (for
//! repeated and map fields too, which real clients send), unknown fields ignored.
use std::sync::LazyLock;

use prost::{Message, Name};
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, ReflectMessage};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::proto::{FILE_DESCRIPTOR_SET, ListTasksResponse};

mod read;
pub use read::{ReadTimestamp, decode, decode_described, decode_generated, decode_strict};

static POOL: LazyLock<DescriptorPool> = LazyLock::new(|| {
    DescriptorPool::decode(FILE_DESCRIPTOR_SET).expect("the embedded descriptor set is valid")
});

/// The descriptor of a generated message type.
pub fn descriptor<T: Name>() -> MessageDescriptor {
    POOL.get_message_by_name(&T::full_name()).expect("every generated type is in the embedded descriptor set")
}

fn dynamic<T: Message + Name>(message: &T) -> DynamicMessage {
    let mut dynamic = DynamicMessage::new(descriptor::<T>());
    dynamic.transcode_from(message).expect("a generated message transcodes to its own descriptor");
    dynamic
}

/// Encodes `message` as canonical ProtoJSON.
pub fn encode<T: Encode>(message: &T) -> Value {
    encode_for(message, true)
}

/// Encodes `message` as canonical ProtoJSON text.
pub fn encode_string<T: Encode>(message: &T) -> String {
    encode_string_for(message, true)
}

/// What the server writes as ProtoJSON: a v1.0 message with its generated serde code (about a
/// fifth of the CPU of going through a `DynamicMessage`), and with the A2A dev-1.1
/// `generation` fields it may carry. The same code reads it ([`decode`]).
pub trait Encode: Message + Name + Serialize + DeserializeOwned + Clone {
    /// Whether a `generation` field in it is set, directly or in the messages directly inside
    /// it (a StreamResponse's payload, a SendMessageResponse's task, a ListTasksResponse's
    /// tasks).
    fn has_generation(&self) -> bool {
        false
    }

    /// Clears those fields.
    fn clear_generation(&mut self) {}
}

/// A message with a `generation` field of its own.
macro_rules! generation_field {
    ($($ty:ident),*) => {$(
        impl Encode for crate::proto::$ty {
            fn has_generation(&self) -> bool {
                self.generation != 0
            }

            fn clear_generation(&mut self) {
                self.generation = 0;
            }
        }
    )*};
}

generation_field!(Task, TaskStatusUpdateEvent, TaskArtifactUpdateEvent);

/// Every other message of the package: none carries a `generation` field, directly or in a
/// message directly inside it.
macro_rules! no_generation {
    ($($ty:ident),*) => {$( impl Encode for crate::proto::$ty {} )*};
}

no_generation!(
    SendMessageConfiguration,
    TaskStatus,
    Part,
    Message,
    Artifact,
    AuthenticationInfo,
    AgentInterface,
    AgentCard,
    AgentProvider,
    AgentCapabilities,
    AgentExtension,
    AgentSkill,
    AgentCardSignature,
    TaskPushNotificationConfig,
    StringList,
    SecurityRequirement,
    SecurityScheme,
    ApiKeySecurityScheme,
    HttpAuthSecurityScheme,
    OAuth2SecurityScheme,
    OpenIdConnectSecurityScheme,
    MutualTlsSecurityScheme,
    OAuthFlows,
    AuthorizationCodeOAuthFlow,
    ClientCredentialsOAuthFlow,
    ImplicitOAuthFlow,
    PasswordOAuthFlow,
    DeviceCodeOAuthFlow,
    SendMessageRequest,
    GetTaskRequest,
    ListTasksRequest,
    CancelTaskRequest,
    GetTaskPushNotificationConfigRequest,
    DeleteTaskPushNotificationConfigRequest,
    SubscribeToTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    GetExtendedAgentCardRequest,
    ListTaskPushNotificationConfigsResponse
);

impl Encode for crate::proto::StreamResponse {
    fn has_generation(&self) -> bool {
        use crate::proto::stream_response::Payload;
        match &self.payload {
            Some(Payload::Task(task)) => task.has_generation(),
            Some(Payload::StatusUpdate(update)) => update.has_generation(),
            Some(Payload::ArtifactUpdate(update)) => update.has_generation(),
            Some(Payload::Message(_)) | None => false,
        }
    }

    fn clear_generation(&mut self) {
        use crate::proto::stream_response::Payload;
        match &mut self.payload {
            Some(Payload::Task(task)) => task.clear_generation(),
            Some(Payload::StatusUpdate(update)) => update.clear_generation(),
            Some(Payload::ArtifactUpdate(update)) => update.clear_generation(),
            Some(Payload::Message(_)) | None => {}
        }
    }
}

impl Encode for crate::proto::SendMessageResponse {
    fn has_generation(&self) -> bool {
        use crate::proto::send_message_response::Payload;
        matches!(&self.payload, Some(Payload::Task(task)) if task.has_generation())
    }

    fn clear_generation(&mut self) {
        use crate::proto::send_message_response::Payload;
        if let Some(Payload::Task(task)) = &mut self.payload {
            task.clear_generation();
        }
    }
}

impl Encode for ListTasksResponse {
    fn has_generation(&self) -> bool {
        self.tasks.iter().any(Encode::has_generation)
    }

    fn clear_generation(&mut self) {
        self.tasks.iter_mut().for_each(Encode::clear_generation);
    }
}

/// A Timestamp as ProtoJSON writes it: RFC 3339 in UTC ending in `Z`, with 0, 3, 6 or 9
/// fractional digits (the generated code's own form ends in `+00:00`; `build.rs` routes the
/// Timestamp fields here). A time outside years 1–9999 is an error, which sends the message
/// through the descriptors (see [`Encode`]).
pub struct Rfc3339<'a>(pub &'a pbjson_types::Timestamp);

impl Serialize for Rfc3339<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let pbjson_types::Timestamp { seconds, nanos } = *self.0;
        let time =
            u32::try_from(nanos).ok().and_then(|nanos| chrono::DateTime::from_timestamp(seconds, nanos));
        match time {
            Some(time) if (1..=9999).contains(&chrono::Datelike::year(&time)) => {
                serializer.serialize_str(&time.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
            }
            _ => Err(serde::ser::Error::custom(format!("timestamp {seconds}s {nanos}ns is out of range"))),
        }
    }
}

/// Where ProtoJSON is written to: a `serde_json::Value` or text.
trait Writer<R> {
    fn write<S: Serialize>(&self, value: &S) -> serde_json::Result<R>;
}

struct ToValue;

impl Writer<Value> for ToValue {
    fn write<S: Serialize>(&self, value: &S) -> serde_json::Result<Value> {
        serde_json::to_value(value)
    }
}

struct ToText;

impl Writer<String> for ToText {
    fn write<S: Serialize>(&self, value: &S) -> serde_json::Result<String> {
        serde_json::to_string(value)
    }
}

/// `message` for a JSON client: with the `generation` fields (A2A dev-1.1) only when
/// `generation` (see [`crate::call::CallContext::wants_generation`]); without, exactly the
/// v1.0 form. A value the generated code cannot write (an enum number the proto does not
/// name, which ProtoJSON writes as a number) is written from the descriptors instead.
fn write_for<T: Encode, R>(message: &T, generation: bool, writer: impl Writer<R>) -> R {
    let written = if generation || !message.has_generation() {
        writer.write(message)
    } else {
        let mut copy = message.clone();
        copy.clear_generation();
        writer.write(&copy)
    };
    written.unwrap_or_else(|_| {
        writer.write(&dynamic_for(message, generation)).expect("ProtoJSON of a valid message serializes")
    })
}

/// [`encode`], with the `generation` fields only when `generation`.
pub fn encode_for<T: Encode>(message: &T, generation: bool) -> Value {
    write_for(message, generation, ToValue)
}

/// [`encode_string`], with the `generation` fields only when `generation`.
pub fn encode_string_for<T: Encode>(message: &T, generation: bool) -> String {
    write_for(message, generation, ToText)
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

    /// The generated code writes exactly what the descriptors write, for every kind of field
    /// a Task carries (the descriptor path is the reference: it is what the server wrote
    /// before, and what it still writes for values the generated code refuses).
    #[test]
    fn generated_output_is_the_descriptors_output() {
        use crate::proto::{Artifact, TaskArtifactUpdateEvent, TaskStatusUpdateEvent};
        use crate::proto::{SendMessageResponse, StreamResponse, send_message_response, stream_response};
        let metadata: pbjson_types::Struct = serde_json::from_value(json!({
            "n": 1.5, "i": 3, "s": "x\u{e9}\"\u{1}", "b": true, "z": null, "list": [1, "a", {"k": []}]
        }))
        .unwrap();
        let parts = vec![
            Part { content: Some(part::Content::Text("hi\n".into())), ..Default::default() },
            Part {
                content: Some(part::Content::Raw(vec![0, 255, 7])),
                media_type: "a/b".into(),
                ..Default::default()
            },
            Part {
                content: Some(part::Content::Url("https://x.test/f".into())),
                filename: "f".into(),
                ..Default::default()
            },
            Part {
                content: Some(part::Content::Data(serde_json::from_value(json!([1, {"a": "b"}])).unwrap())),
                ..Default::default()
            },
        ];
        let mut tasks = Vec::new();
        for nanos in [0, 123_000_000, 123_456_000, 123_456_789, 1] {
            tasks.push(Task {
                id: "t".into(),
                context_id: "c".into(),
                status: Some(TaskStatus {
                    state: TaskState::InputRequired as i32,
                    message: Some(A2aMessage {
                        message_id: "s".into(),
                        role: Role::Agent as i32,
                        ..Default::default()
                    }),
                    timestamp: Some(pbjson_types::Timestamp { seconds: 1_700_000_000, nanos }),
                }),
                artifacts: vec![Artifact {
                    artifact_id: "a".into(),
                    name: "n".into(),
                    parts: parts.clone(),
                    metadata: Some(metadata.clone()),
                    extensions: vec!["e".into()],
                    ..Default::default()
                }],
                history: vec![A2aMessage {
                    message_id: "m".into(),
                    role: Role::User as i32,
                    parts: parts.clone(),
                    reference_task_ids: vec!["r".into()],
                    ..Default::default()
                }],
                metadata: Some(metadata.clone()),
                generation: 7,
            });
        }
        for generation in [true, false] {
            for task in &tasks {
                let reference = serde_json::to_value(dynamic_for(task, generation)).unwrap();
                assert_eq!(encode_for(task, generation), reference);
                let response =
                    SendMessageResponse { payload: Some(send_message_response::Payload::Task(task.clone())) };
                assert_eq!(
                    encode_for(&response, generation),
                    serde_json::to_value(dynamic_for(&response, generation)).unwrap()
                );
            }
            let updates = [
                stream_response::Payload::StatusUpdate(TaskStatusUpdateEvent {
                    task_id: "t".into(),
                    status: tasks[2].status.clone(),
                    generation: 9,
                    ..Default::default()
                }),
                stream_response::Payload::ArtifactUpdate(TaskArtifactUpdateEvent {
                    task_id: "t".into(),
                    artifact: tasks[0].artifacts.first().cloned(),
                    append: true,
                    last_chunk: true,
                    generation: 10,
                    ..Default::default()
                }),
            ];
            for payload in updates {
                let event = StreamResponse { payload: Some(payload) };
                let reference = serde_json::to_string(&dynamic_for(&event, generation)).unwrap();
                let ours: Value = serde_json::from_str(&encode_string_for(&event, generation)).unwrap();
                assert_eq!(ours, serde_json::from_str::<Value>(&reference).unwrap());
            }
        }
    }

    /// A value the generated code refuses (an enum number the proto does not name) is written
    /// as the descriptors write it: the number.
    #[test]
    fn unnamed_enum_numbers_are_written_as_numbers() {
        let task = Task {
            id: "t".into(),
            status: Some(TaskStatus { state: 99, ..Default::default() }),
            generation: 2,
            ..Default::default()
        };
        assert_eq!(encode_for(&task, false), json!({"id": "t", "status": {"state": 99}}));
        assert_eq!(encode_string_for(&task, true), r#"{"id":"t","status":{"state":99},"generation":"2"}"#);
    }

    #[test]
    fn list_response_always_has_paging_fields() {
        let value = encode_list_tasks(&ListTasksResponse::default());
        assert_eq!(value, json!({"tasks": [], "nextPageToken": "", "pageSize": 0, "totalSize": 0}));
    }
}
