//! Request validation: REQUIRED fields and value ranges, reported as field violations
//! (spec §5.7: servers reject missing required fields before doing anything).
pub(crate) mod nesting;

use pbjson_types::{Struct, Value, value::Kind};

pub use nesting::{MAX_NESTING, Shape};

use crate::error::{A2aError, FieldViolation, LimitKind};
use crate::proto::{Message, Role, SendMessageRequest, TaskPushNotificationConfig, part};

/// Collects violations and turns them into one `InvalidParams` error.
#[derive(Default)]
pub(crate) struct Violations(Vec<FieldViolation>);

impl Violations {
    pub fn add(&mut self, field: impl Into<String>, description: impl Into<String>) {
        self.0.push(FieldViolation::new(field, description));
    }

    pub fn require_id(&mut self, field: &str, value: &str) {
        if value.is_empty() {
            self.add(field, "is required");
        }
    }

    pub fn non_negative(&mut self, field: &str, value: Option<i32>) {
        if value.is_some_and(|n| n < 0) {
            self.add(field, "must not be negative");
        }
    }

    /// A NaN or an infinity, which protobuf can carry but JSON cannot: accepted over gRPC, it
    /// would make the task unreadable on every JSON binding (found by fuzzing). The field's
    /// name is made only for a violation: a part's is formatted, on every message otherwise.
    pub fn finite_struct<F: Into<String>>(&mut self, field: impl FnOnce() -> F, value: Option<&Struct>) {
        if value.is_some_and(|s| s.fields.values().any(non_finite)) {
            self.add(field(), "must not hold NaN or an infinity");
        }
    }

    pub fn into_result(self) -> Result<(), A2aError> {
        let Some(first) = self.0.first() else {
            return Ok(());
        };
        let message = match self.0.len() {
            1 => format!("invalid {}: {}", first.field, first.description),
            n => format!("invalid {}: {} (and {} more)", first.field, first.description, n - 1),
        };
        Err(A2aError::InvalidParams { message, violations: self.0 })
    }
}

/// `--max-parts`: checked before anything else looks at the parts. The bindings count the parts
/// of a request before decoding it, with [`admit_parts`], so that refusing a message of a
/// hundred thousand parts costs no more than reading its bytes; this is the same check on the
/// decoded request, for every path.
pub(crate) fn parts(request: &SendMessageRequest, max_parts: usize) -> Result<(), A2aError> {
    admit_parts(request.message.as_ref().map_or(0, |m| m.parts.len()), max_parts)
}

/// `--max-struct-values` and [`MAX_NESTING`]: the values in a SendMessage request's
/// structured data (its data parts and metadata) and how deep each nests, measured in one walk
/// ([`Shape`]). The JSON bindings measure the same while parsing (`transport/strict_json.rs`);
/// this is the check every path meets, gRPC's included, before anything is stored.
pub(crate) fn struct_values(request: &SendMessageRequest, max: usize) -> Result<(), A2aError> {
    let mut count = 0;
    let mut deepest: Option<String> = None;
    let mut measure = |field: &dyn Fn() -> String, shape: Shape| {
        count += shape.values;
        if shape.depth > MAX_NESTING && deepest.is_none() {
            deepest = Some(field());
        }
    };
    if let Some(metadata) = &request.metadata {
        measure(&|| "metadata".into(), Shape::of_struct(metadata));
    }
    if let Some(message) = &request.message {
        if let Some(metadata) = &message.metadata {
            measure(&|| "message.metadata".into(), Shape::of_struct(metadata));
        }
        for (i, part) in message.parts.iter().enumerate() {
            if let Some(metadata) = &part.metadata {
                measure(&|| format!("message.parts[{i}].metadata"), Shape::of_struct(metadata));
            }
            if let Some(part::Content::Data(data)) = &part.content {
                measure(&|| format!("message.parts[{i}].data"), Shape::of_value(data));
            }
        }
    }
    admit_struct_values(count, max)?;
    deepest.map_or(Ok(()), |field| Err(nesting::too_deep(field)))
}

/// `--max-struct-values` for `count` values (`max` 0: no limit).
pub fn admit_struct_values(count: usize, max: usize) -> Result<(), A2aError> {
    if max != 0 && count > max {
        return Err(A2aError::limit(
            LimitKind::TooLarge,
            "max-struct-values",
            format!(
                "the data parts and metadata of the request hold more than {max} values (at least {count}); the limit is {max}"
            ),
        ));
    }
    Ok(())
}

/// `--max-parts` for a message of `count` parts (`max_parts` 0: no limit).
pub fn admit_parts(count: usize, max_parts: usize) -> Result<(), A2aError> {
    if max_parts != 0 && count > max_parts {
        return Err(A2aError::limit(
            LimitKind::TooLarge,
            "max-parts",
            format!("the message has {count} parts; the limit is {max_parts}"),
        ));
    }
    Ok(())
}

/// A required id parameter.
pub(crate) fn task_id(field: &str, id: &str) -> Result<(), A2aError> {
    let mut v = Violations::default();
    v.require_id(field, id);
    v.into_result()
}

pub(crate) fn send_message(request: &SendMessageRequest) -> Result<(), A2aError> {
    let mut v = Violations::default();
    match &request.message {
        None => v.add("message", "is required"),
        Some(message) => check_message(&mut v, message),
    }
    if let Some(configuration) = &request.configuration {
        v.non_negative("configuration.historyLength", configuration.history_length);
    }
    v.finite_struct(|| "metadata", request.metadata.as_ref());
    v.into_result()
}

/// A webhook config: an absolute http(s) URL, and a scheme when authentication is given. No
/// DNS lookup or reachability check here: the host may only resolve where deliveries run.
pub(crate) fn push_config(config: &TaskPushNotificationConfig) -> Result<(), A2aError> {
    let mut v = Violations::default();
    match reqwest::Url::parse(&config.url) {
        _ if config.url.is_empty() => v.add("url", "is required"),
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => {}
        Ok(_) => v.add("url", "must be an http or https URL"),
        Err(e) => v.add("url", format!("is not a valid URL: {e}")),
    }
    if let Some(authentication) = &config.authentication
        && authentication.scheme.trim().is_empty()
    {
        v.add("authentication.scheme", "is required");
    }
    v.into_result()
}

fn check_message(v: &mut Violations, message: &Message) {
    v.require_id("message.messageId", &message.message_id);
    match Role::try_from(message.role) {
        Ok(Role::User | Role::Agent) => {}
        _ => v.add("message.role", "must be ROLE_USER"),
    }
    if message.parts.is_empty() {
        v.add("message.parts", "must hold at least one part");
    }
    v.finite_struct(|| "message.metadata", message.metadata.as_ref());
    for (i, part) in message.parts.iter().enumerate() {
        if part.content.is_none() {
            v.add(format!("message.parts[{i}]"), "must have one of text, raw, url or data");
        }
        v.finite_struct(|| format!("message.parts[{i}].metadata"), part.metadata.as_ref());
        if let Some(part::Content::Data(data)) = &part.content
            && non_finite(data)
        {
            v.add(format!("message.parts[{i}].data"), "must not hold NaN or an infinity");
        }
    }
}

/// Whether a JSON value holds a number JSON cannot write (NaN, ±infinity).
fn non_finite(value: &Value) -> bool {
    match &value.kind {
        Some(Kind::NumberValue(n)) => !n.is_finite(),
        Some(Kind::StructValue(s)) => s.fields.values().any(non_finite),
        Some(Kind::ListValue(list)) => list.values.iter().any(non_finite),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::text_part;

    #[test]
    fn reports_every_missing_field() {
        let request = SendMessageRequest {
            message: Some(Message { parts: vec![text_part("x"), Default::default()], ..Default::default() }),
            ..Default::default()
        };
        let error = send_message(&request).unwrap_err();
        let fields: Vec<_> = error.violations().iter().map(|v| v.field.as_str()).collect();
        assert_eq!(fields, ["message.messageId", "message.role", "message.parts[1]"]);
        assert_eq!(error.reason(), "INVALID_PARAMS");
    }

    /// Structured data nested past [`MAX_NESTING`] is refused naming its field, at the limit
    /// it passes; depth is measured in data parts and in every metadata.
    #[test]
    fn refuses_structured_data_nested_too_deep() {
        let nest = |depth: usize| -> Value {
            let mut value = serde_json::json!("x");
            for level in 0..depth {
                value =
                    if level % 3 == 0 { serde_json::json!([value]) } else { serde_json::json!({"k": value}) };
            }
            serde_json::from_value(value).unwrap()
        };
        let object = |depth: usize| match nest(depth).kind {
            Some(Kind::StructValue(s)) => s,
            other => panic!("not an object: {other:?}"),
        };
        let request = |data: Value, metadata: Struct| SendMessageRequest {
            message: Some(Message {
                message_id: "m".into(),
                role: Role::User as i32,
                parts: vec![
                    text_part("x"),
                    crate::proto::Part { content: Some(part::Content::Data(data)), ..Default::default() },
                ],
                metadata: Some(metadata.clone()),
                ..Default::default()
            }),
            metadata: Some(metadata),
            ..Default::default()
        };
        assert!(struct_values(&request(nest(MAX_NESTING), object(MAX_NESTING - 1)), 0).is_ok());
        let error = struct_values(&request(nest(MAX_NESTING + 1), object(2)), 0).unwrap_err();
        assert_eq!(error.reason(), "INVALID_PARAMS");
        assert_eq!(error.violations()[0].field, "message.parts[1].data");
        let error = struct_values(&request(nest(1), object(MAX_NESTING + 2)), 0).unwrap_err();
        assert_eq!(error.violations()[0].field, "metadata", "the first field met: {error}");
        // A request over both limits gets the size limit first.
        let error = struct_values(&request(nest(MAX_NESTING + 1), object(2)), 3).unwrap_err();
        assert_eq!(error.reason(), "PAYLOAD_TOO_LARGE");
    }

    /// Regression (fuzz target `protobuf`): a NaN in a Struct, sent over gRPC, passed
    /// validation and then made ProtoJSON encoding panic for every JSON reader of the task.
    #[test]
    fn refuses_numbers_json_cannot_carry() {
        let number = |n: f64| Value { kind: Some(Kind::NumberValue(n)) };
        let nested = Struct { fields: [("n".to_owned(), number(f64::NAN))].into() };
        let mut part = text_part("x");
        part.metadata = Some(Struct {
            fields: [("s".to_owned(), Value { kind: Some(Kind::StructValue(nested)) })].into(),
        });
        let data = crate::proto::Part {
            content: Some(part::Content::Data(number(f64::INFINITY))),
            ..Default::default()
        };
        let request = SendMessageRequest {
            message: Some(Message {
                message_id: "m".into(),
                role: Role::User as i32,
                parts: vec![part, data, text_part("fine")],
                ..Default::default()
            }),
            ..Default::default()
        };
        let error = send_message(&request).unwrap_err();
        let fields: Vec<_> = error.violations().iter().map(|v| v.field.as_str()).collect();
        assert_eq!(fields, ["message.parts[0].metadata", "message.parts[1].data"]);
    }
}
