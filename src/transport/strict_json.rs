//! Request bodies are read as I-JSON (RFC 7493): an object that names a member twice, at any
//! depth, is refused instead of silently keeping the last value. A proxy, a logger or an
//! authorization layer reading the first `method` (or `taskId`) must never see another request
//! than the one the server runs.
//!
//! [`UniqueKeys`] builds the same [`Value`] as `serde_json::from_slice` in the same single pass:
//! each member goes in through `Map::entry`, which finds a duplicate with the lookup that an
//! insert makes anyway.
//!
//! A request's `message.parts` is counted in the same pass: past `--max-parts` the remaining
//! parts are skipped, not built, so refusing a message of a hundred thousand parts costs its
//! bytes and nothing more (a built part costs a few hundred bytes of `Value` each, several times
//! what it took on the wire).
use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};

use crate::error::A2aError;

/// Parses a JSON body; bad JSON and duplicate names are both a JSON parse error (JSON-RPC
/// -32700, HTTP 400), naming the line and column.
pub fn parse(body: &[u8]) -> Result<Value, A2aError> {
    parse_request(body, 0)
}

/// [`parse`] for a request (an HTTP+JSON body, or JSON-RPC params) whose `message.parts` may
/// hold at most `max_parts` parts (0: any number); more is the core's `--max-parts` error.
pub fn parse_request(body: &[u8], max_parts: usize) -> Result<Value, A2aError> {
    let parts = PartsCount::new(max_parts);
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let value = UniqueKeys::request(&parts).deserialize(&mut deserializer).and_then(|value| {
        deserializer.end()?;
        Ok(value)
    });
    let value = value.map_err(parse_error)?;
    parts.admit()?;
    Ok(value)
}

/// The path of the counted array, from the request's root.
const PARTS_PATH: [&str; 2] = ["message", "parts"];

/// The parts counted in one request, against the limit.
pub struct PartsCount {
    max_parts: usize,
    /// Parts beyond the limit (only the first `max_parts` are built).
    over: Cell<usize>,
}

impl PartsCount {
    /// Counts against `max_parts` (0: any number).
    pub fn new(max_parts: usize) -> Self {
        Self { max_parts, over: Cell::new(0) }
    }

    /// The core's `--max-parts` error if the request had too many parts.
    pub fn admit(&self) -> Result<(), A2aError> {
        match self.over.get() {
            0 => Ok(()),
            over => crate::core::validate::admit_parts(self.max_parts + over, self.max_parts),
        }
    }
}

/// The error for a body that is not I-JSON.
pub fn parse_error(error: serde_json::Error) -> A2aError {
    A2aError::JsonParse(format!("invalid JSON: {error}"))
}

/// Deserializes any JSON value into a [`Value`], refusing objects with duplicate names; when
/// given a [`PartsCount`], the value is a request whose `message.parts` it counts.
#[derive(Clone, Copy, Default)]
pub struct UniqueKeys<'a> {
    parts: Option<(&'a PartsCount, usize)>,
}

impl<'a> UniqueKeys<'a> {
    /// For a request's root, counting its parts into `parts`.
    pub fn request(parts: &'a PartsCount) -> Self {
        Self { parts: (parts.max_parts != 0).then_some((parts, 0)) }
    }

    /// For the value of member `key` of this object.
    fn member(self, key: &str) -> Self {
        match self.parts {
            Some((parts, depth)) if PARTS_PATH.get(depth) == Some(&key) => {
                Self { parts: Some((parts, depth + 1)) }
            }
            _ => Self::default(),
        }
    }

    /// The count this value is the parts array for, if it is.
    fn counted_parts(self) -> Option<&'a PartsCount> {
        self.parts.and_then(|(parts, depth)| (depth == PARTS_PATH.len()).then_some(parts))
    }
}

impl<'de> DeserializeSeed<'de> for UniqueKeys<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for UniqueKeys<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // JSON text never holds NaN or an infinity; serde_json refuses numbers out of range.
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        let counted = self.counted_parts();
        let limit = counted.map_or(usize::MAX, |parts| parts.max_parts);
        while items.len() < limit {
            match seq.next_element_seed(Self::default())? {
                Some(value) => items.push(value),
                None => return Ok(Value::Array(items)),
            }
        }
        if let Some(parts) = counted {
            let mut over = 0usize;
            while seq.next_element::<IgnoredAny>()?.is_some() {
                over += 1;
            }
            parts.over.set(over);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            match object.entry(key) {
                Entry::Vacant(slot) => {
                    let value = map.next_value_seed(self.member(slot.key()))?;
                    slot.insert(value);
                }
                Entry::Occupied(taken) => return Err(duplicate(taken.key())),
            }
        }
        Ok(Value::Object(object))
    }
}

/// The error for a name given twice in one object.
pub fn duplicate<E: de::Error>(key: &str) -> E {
    E::custom(format_args!("duplicate key {key:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_value_as_serde_json() {
        let text = br#"{"a":[1,-2,18446744073709551615,1.5e3,"x\u0041",null,true,{}],"b":{"c":{"d":[]}},"e":-9223372036854775808}"#;
        let expected: Value = serde_json::from_slice(text).unwrap();
        let parsed = parse(text).unwrap();
        assert_eq!(parsed, expected);
        // The member order is kept (preserve_order), as serde_json's own Value keeps it.
        assert_eq!(parsed.to_string(), expected.to_string());
    }

    #[test]
    fn duplicate_names_are_refused_at_any_depth() {
        for text in [
            r#"{"method":"GetTask","method":"CancelTask"}"#,
            r#"{"params":{"message":{"parts":[{"text":"a","text":"b"}]}}}"#,
            r#"[{"x":1},{"y":1,"y":1}]"#,
            // Escapes decode to the same name, so they are the same member.
            r#"{"id":1,"\u0069d":2}"#,
        ] {
            let error = parse(text.as_bytes()).unwrap_err();
            assert!(matches!(error, A2aError::JsonParse(_)), "{text}: {error:?}");
            assert!(error.to_string().contains("duplicate key"), "{error}");
            assert!(error.to_string().contains("column"), "{error}");
        }
        assert!(parse(br#"{"a":{"x":1},"b":{"x":1}}"#).is_ok(), "the same name in two objects is fine");
    }

    #[test]
    fn trailing_garbage_and_syntax_errors_are_parse_errors() {
        for text in ["{} x", "{", "", "[1,]", "nul"] {
            assert_eq!(parse(text.as_bytes()).unwrap_err().reason(), "PARSE_ERROR", "{text}");
        }
    }
}
