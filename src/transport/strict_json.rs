//! Request bodies are read as I-JSON (RFC 7493): an object that names a member twice, at any
//! depth, is refused instead of silently keeping the last value. A proxy, a logger or an
//! authorization layer reading the first `method` (or `taskId`) must never see another request
//! than the one the server runs.
//!
//! [`UniqueKeys`] builds the same [`Value`] as `serde_json::from_slice` in the same single pass:
//! each member goes in through `Map::entry`, which finds a duplicate with the lookup that an
//! insert makes anyway.
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};

use crate::error::A2aError;

/// Parses a request body; bad JSON and duplicate names are both a JSON parse error (JSON-RPC
/// -32700, HTTP 400), naming the line and column.
pub fn parse(body: &[u8]) -> Result<Value, A2aError> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let value = UniqueKeys.deserialize(&mut deserializer).and_then(|value| {
        deserializer.end()?;
        Ok(value)
    });
    value.map_err(parse_error)
}

/// The error for a body that is not I-JSON.
pub fn parse_error(error: serde_json::Error) -> A2aError {
    A2aError::JsonParse(format!("invalid JSON: {error}"))
}

/// Deserializes any JSON value into a [`Value`], refusing objects with duplicate names.
#[derive(Clone, Copy)]
pub struct UniqueKeys;

impl<'de> DeserializeSeed<'de> for UniqueKeys {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for UniqueKeys {
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
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            match object.entry(key) {
                Entry::Vacant(slot) => {
                    slot.insert(map.next_value_seed(self)?);
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
