//! Reading ProtoJSON into the generated types: the generated serde code first, the
//! descriptors (prost-reflect) for everything it does not read the same way, and strictly for
//! exec agents' control lines.
use std::sync::LazyLock;

use prost::{Message, Name};
use prost_reflect::{DeserializeOptions, DynamicMessage, MessageDescriptor};
use serde::Deserialize;
use serde::de::{DeserializeOwned, Deserializer};
use serde_json::Value;

use super::{POOL, descriptor};
use crate::error::A2aError;

/// Decodes a ProtoJSON value into `T`; a value that does not fit is an `InvalidParams` error
/// naming what is wrong.
///
/// The generated serde code reads first (a fifth of the descriptors' cost, which was a tenth
/// of a JSON call's CPU). It reads what it accepts as the descriptors do, with one
/// difference: a `null` inside a `Struct` or list becomes an unset `Value` where ProtoJSON
/// says `NULL_VALUE`. So a value with a `null` anywhere, and any value the generated code
/// refuses (its errors name no field), is read by the descriptors. The fuzz target
/// `protojson` holds the two readers to the same message.
pub fn decode<T: Message + Name + Default + DeserializeOwned>(value: &Value) -> Result<T, A2aError> {
    if let Some(message) = decode_generated(value) {
        return Ok(message);
    }
    decode_described(value)
}

/// [`decode`] with the generated serde code alone: `None` where [`decode`] asks the
/// descriptors.
pub fn decode_generated<T: DeserializeOwned>(value: &Value) -> Option<T> {
    if has_null(value) {
        return None;
    }
    T::deserialize(value).ok()
}

/// [`decode`] with the descriptors alone.
pub fn decode_described<T: Message + Name + Default>(value: &Value) -> Result<T, A2aError> {
    from_value(value, false).map_err(|problem| invalid_json::<T>(&problem))
}

/// Whether a `null` is anywhere in `value`. Depth is bounded by the parser's recursion limit.
fn has_null(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.iter().any(has_null),
        Value::Object(members) => members.values().any(has_null),
        Value::Bool(_) | Value::Number(_) | Value::String(_) => false,
    }
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

/// A Timestamp read as the descriptors read it: upper-case `T` and `Z`, years 1–9999, as
/// protobuf's conformance suite asks. pbjson-types' own reader (chrono) also takes `t`, `z`
/// and a space, so a time it read could be refused once a `null` elsewhere sent the same
/// message to the descriptors. `build.rs` routes the generated code's Timestamp fields here.
pub struct ReadTimestamp(pub pbjson_types::Timestamp);

static TIMESTAMP: LazyLock<MessageDescriptor> = LazyLock::new(|| {
    POOL.get_message_by_name("google.protobuf.Timestamp").expect("the descriptor set holds Timestamp")
});

impl<'de> Deserialize<'de> for ReadTimestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let message = DynamicMessage::deserialize(TIMESTAMP.clone(), deserializer)?;
        let field = |name: &str| message.get_field_by_name(name).map(|value| value.into_owned());
        Ok(Self(pbjson_types::Timestamp {
            seconds: field("seconds").and_then(|value| value.as_i64()).unwrap_or_default(),
            nanos: field("nanos").and_then(|value| value.as_i32()).unwrap_or_default(),
        }))
    }
}

fn invalid_json<T: Name>(problem: &str) -> A2aError {
    A2aError::InvalidParams {
        message: format!("invalid {}: {problem}", T::NAME),
        violations: vec![crate::error::FieldViolation::new(T::NAME, problem)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{Message as A2aMessage, Role};
    use serde_json::json;

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

    /// Requests as real clients write them, every kind of field a request carries: the
    /// generated code reads each, and reads it as the descriptors do.
    #[test]
    fn the_generated_reader_reads_as_the_descriptors_read() {
        use crate::proto::{GetTaskRequest, SendMessageRequest, TaskPushNotificationConfig};
        let sends = [
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}),
            json!({
                "tenant": "t",
                "message": {
                    "message_id": "m", "contextId": "c", "taskId": "t1", "role": 2,
                    "parts": [
                        {"text": "", "metadata": {"k": [1, "two", {"three": true}]}},
                        {"raw": "AQID", "mediaType": "application/octet-stream", "filename": "f"},
                        {"raw": "-_8"},
                        {"url": "https://example.com/a"},
                        {"data": {"n": 1.5, "s": "x", "l": [], "o": {}}},
                        {"data": "just a string"}
                    ],
                    "metadata": {"deep": {"er": [[1], [2.5e10]]}},
                    "extensions": ["https://ext"], "referenceTaskIds": ["r"],
                    "somethingNew": {"ignored": [1, 2]}
                },
                "configuration": {
                    "acceptedOutputModes": ["text/plain"], "historyLength": "3",
                    "returnImmediately": true, "ifGenerationMatch": "9007199254740993",
                    "taskPushNotificationConfig": {
                        "url": "https://hook", "token": "tok",
                        "authentication": {"scheme": "Bearer", "credentials": "c"}
                    }
                },
                "metadata": {"trace": "abc"}
            }),
        ];
        for value in &sends {
            let generated: SendMessageRequest = decode_generated(value).expect("the generated code reads it");
            assert_eq!(generated, decode_described::<SendMessageRequest>(value).unwrap(), "{value}");
        }
        let get = json!({"id": "t", "historyLength": 2, "currentGeneration": "5"});
        let generated: GetTaskRequest = decode_generated(&get).expect("the generated code reads it");
        assert_eq!(generated, decode_described::<GetTaskRequest>(&get).unwrap());
        let config = json!({"taskId": "t", "url": "https://hook", "authentication": {"scheme": "Basic"}});
        let generated: TaskPushNotificationConfig = decode_generated(&config).expect("read");
        assert_eq!(generated, decode_described::<TaskPushNotificationConfig>(&config).unwrap());
    }

    /// Both readers take a time only in ProtoJSON's form (upper-case `T` and `Z`), whether or
    /// not a `null` elsewhere sends the message to the descriptors (a fuzz finding).
    #[test]
    fn both_readers_read_times_alike() {
        use crate::proto::ListTasksRequest;
        let fine = json!({"statusTimestampAfter": "2026-01-01T00:00:00.5+01:00"});
        let generated: ListTasksRequest = decode_generated(&fine).expect("the generated code reads it");
        assert_eq!(
            generated.status_timestamp_after.map(|t| (t.seconds, t.nanos)),
            Some((1767222000, 500_000_000))
        );
        assert_eq!(generated, decode_described(&fine).unwrap());
        for time in
            ["2026-01-01T00:00:00z", "2026-01-01t00:00:00Z", "2026-01-01 00:00:00Z", "0000-12-31T00:00:00Z"]
        {
            for value in
                [json!({"statusTimestampAfter": time}), json!({"statusTimestampAfter": time, "tenant": null})]
            {
                assert!(decode_generated::<ListTasksRequest>(&value).is_none(), "{value}");
                let error = decode::<ListTasksRequest>(&value).unwrap_err();
                assert_eq!(error.reason(), "INVALID_PARAMS", "{value}");
            }
        }
    }

    /// A `null` inside a Struct is `NULL_VALUE` (the generated code would make it an unset
    /// Value), and what the generated code refuses the descriptors read or word the error of.
    #[test]
    fn nulls_and_refusals_go_to_the_descriptors() {
        use pbjson_types::value::Kind;
        let value = json!({"messageId": "m", "role": "ROLE_USER", "parts": [], "metadata": {"gone": null}});
        assert!(decode_generated::<A2aMessage>(&value).is_none());
        let message: A2aMessage = decode(&value).unwrap();
        let gone = &message.metadata.unwrap().fields["gone"];
        assert_eq!(gone.kind, Some(Kind::NullValue(0)));

        let unknown_role = json!({"messageId": "m", "role": "ROLE_NOPE"});
        assert!(decode_generated::<A2aMessage>(&unknown_role).is_none());
        assert_eq!(decode::<A2aMessage>(&unknown_role).unwrap().role, 0);

        let two_contents = json!({"messageId": "m", "parts": [{"text": "a", "url": "b"}]});
        assert!(decode_generated::<A2aMessage>(&two_contents).is_none());
        let error = decode::<A2aMessage>(&two_contents).unwrap_err();
        assert!(!error.violations().is_empty(), "the descriptors name the field: {error:?}");
    }
}
