//! Request validation: REQUIRED fields and value ranges, reported as field violations
//! (spec §5.7: servers reject missing required fields before doing anything).
use pbjson_types::{Struct, Value, value::Kind};

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

/// `--max-struct-values`: the values in a SendMessage request's structured data (its data
/// parts and metadata), counted as [`struct_values`] counts them. The JSON bindings count the
/// same values while parsing (`transport/strict_json.rs`); this is the check every path meets.
pub(crate) fn struct_values(request: &SendMessageRequest, max: usize) -> Result<(), A2aError> {
    if max == 0 {
        return Ok(());
    }
    let structs = |s: Option<&Struct>| s.map_or(0, struct_count);
    let mut count = structs(request.metadata.as_ref());
    if let Some(message) = &request.message {
        count += structs(message.metadata.as_ref());
        for part in &message.parts {
            count += structs(part.metadata.as_ref());
            if let Some(part::Content::Data(data)) = &part.content {
                count += value_count(data);
            }
        }
    }
    admit_struct_values(count, max)
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

/// A JSON object as structured data: itself and every value below it.
fn struct_count(object: &Struct) -> usize {
    1 + object.fields.values().map(value_count).sum::<usize>()
}

/// A JSON value: itself and every value below it.
fn value_count(value: &Value) -> usize {
    match &value.kind {
        Some(Kind::StructValue(s)) => struct_count(s),
        Some(Kind::ListValue(list)) => 1 + list.values.iter().map(value_count).sum::<usize>(),
        _ => 1,
    }
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
