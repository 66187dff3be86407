//! Request bodies are read as I-JSON (RFC 7493): an object that names a member twice, at any
//! depth, is refused instead of silently keeping the last value. A proxy, a logger or an
//! authorization layer reading the first `method` (or `taskId`) must never see another request
//! than the one the server runs.
//!
//! [`UniqueKeys`] builds the same [`Value`] as `serde_json::from_slice` in the same single pass:
//! each member goes in through `Map::entry`, which finds a duplicate with the lookup that an
//! insert makes anyway.
//!
//! A request's costly shapes are counted in the same pass, against the core's limits
//! ([`RequestBudget`]): the parts of `message.parts` (`--max-parts`) and the values inside any
//! `data` or `metadata` member (`--max-struct-values`), and how deep objects and arrays nest
//! inside such a member (the core's `MAX_NESTING`). Past a limit, what remains is skipped,
//! not built, so refusing a message of a hundred thousand parts or of a data part of two
//! million numbers costs its bytes and nothing more: a built value costs 32 bytes or more, and
//! decoding it as ProtoJSON about 1 KB.
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};

use super::request_budget::RequestBudget;
use crate::error::A2aError;

/// Parses a JSON body; bad JSON and duplicate names are both a JSON parse error (JSON-RPC
/// -32700, HTTP 400), naming the line and column.
pub fn parse(body: &[u8]) -> Result<Value, A2aError> {
    parse_request(body, &RequestBudget::unlimited())
}

/// [`parse`] for a request (an HTTP+JSON body, or JSON-RPC params), counted against `budget`;
/// a request over it is the core's limit error.
pub fn parse_request(body: &[u8], budget: &RequestBudget) -> Result<Value, A2aError> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let value = UniqueKeys::request(budget).deserialize(&mut deserializer).and_then(|value| {
        deserializer.end()?;
        Ok(value)
    });
    let value = value.map_err(parse_error)?;
    budget.admit()?;
    Ok(value)
}

/// The path of the counted parts array, from the request's root.
const PARTS_PATH: [&str; 2] = ["message", "parts"];
/// Members whose values are structured data (`google.protobuf.Struct` or `Value`).
const STRUCT_MEMBERS: [&str; 2] = ["data", "metadata"];

/// The error for a body that is not I-JSON.
pub fn parse_error(error: serde_json::Error) -> A2aError {
    A2aError::JsonParse(format!("invalid JSON: {error}"))
}

/// Deserializes any JSON value into a [`Value`], refusing objects with duplicate names; with a
/// [`RequestBudget`], the value is a request whose parts and structured values it counts.
#[derive(Clone, Copy, Default)]
pub struct UniqueKeys<'a> {
    budget: Option<&'a RequestBudget>,
    /// How much of [`PARTS_PATH`] leads here; `None` off that path.
    parts_depth: Option<usize>,
    /// Inside a `data` or `metadata` member.
    in_struct: bool,
    /// Objects and arrays around this value inside that member.
    depth: usize,
}

impl<'a> UniqueKeys<'a> {
    /// For a request's root, counted against `budget`.
    pub fn request(budget: &'a RequestBudget) -> Self {
        Self { budget: Some(budget), parts_depth: Some(0), in_struct: false, depth: 0 }
    }

    /// For the value of member `key` of this object.
    fn member(self, key: &str) -> Self {
        let parts_depth =
            self.parts_depth.filter(|&depth| !self.in_struct && PARTS_PATH.get(depth) == Some(&key));
        Self {
            budget: self.budget,
            parts_depth: parts_depth.map(|depth| depth + 1),
            in_struct: self.in_struct || STRUCT_MEMBERS.contains(&key),
            depth: if self.in_struct { self.depth + 1 } else { 0 },
        }
    }

    /// For an element of this array.
    fn element(self) -> Self {
        Self { parts_depth: None, depth: if self.in_struct { self.depth + 1 } else { 0 }, ..self }
    }

    /// Whether this object or array may be built: not if it is structured data nested past
    /// the limit (the request will be refused).
    fn admit_container(self) -> bool {
        !self.in_struct || self.budget.is_none_or(|budget| budget.admit_depth(self.depth + 1))
    }

    /// Unwinding from data nested too deep: `segment` is a step of the path to its member (only
    /// the steps down to that member, not those inside it).
    fn too_deep_in(self, segment: impl FnOnce() -> String) {
        if let Some(budget) = self.budget.filter(|_| !self.in_struct) {
            budget.too_deep_in(segment);
        }
    }

    /// Whether this array is the message's parts.
    fn is_parts(self) -> bool {
        self.parts_depth == Some(PARTS_PATH.len())
    }

    /// Counts this value if it is structured data; `false` when it is over the budget and must
    /// not be built.
    fn admit(self) -> bool {
        !self.in_struct || self.budget.is_none_or(RequestBudget::admit_struct_value)
    }

    /// Whether the request is already over its budget of structured values or nests them too
    /// deep: nothing more of it is built (it will be refused).
    fn over_budget(self) -> bool {
        self.budget.is_some_and(|budget| budget.struct_values_over() || budget.is_too_deep())
    }

    fn build<E>(self, make: impl FnOnce() -> Value) -> Result<Value, E> {
        Ok(if self.admit() { make() } else { Value::Null })
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
        self.build(|| Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        self.build(|| Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        self.build(|| Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // JSON text never holds NaN or an infinity; serde_json refuses numbers out of range.
        self.build(|| Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        self.build(|| Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        self.build(|| Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        self.build(|| Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        self.build(|| Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        if !self.admit_container() || !self.admit() {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(Value::Null);
        }
        let parts = self.budget.filter(|_| self.is_parts());
        let limit = parts.map_or(usize::MAX, RequestBudget::max_parts);
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while items.len() < limit {
            match seq.next_element_seed(self.element())? {
                Some(_) if self.over_budget() => {
                    self.too_deep_in(|| format!("[{}]", items.len()));
                    while seq.next_element::<IgnoredAny>()?.is_some() {}
                    return Ok(Value::Null);
                }
                Some(value) => items.push(value),
                None => return Ok(Value::Array(items)),
            }
        }
        if let Some(budget) = parts {
            let mut over = 0usize;
            while seq.next_element::<IgnoredAny>()?.is_some() {
                over += 1;
            }
            budget.parts_over(over);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        if !self.admit_container() || !self.admit() {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(Value::Null);
        }
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            match object.entry(key) {
                Entry::Vacant(slot) => {
                    let value = map.next_value_seed(self.member(slot.key()))?;
                    if self.over_budget() {
                        self.too_deep_in(|| slot.key().clone());
                        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                        return Ok(Value::Null);
                    }
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
    fn a_request_is_counted_and_refused_past_its_budget() {
        // 3 parts; structured values: metadata {a:[1,2]} = 4, data "x" = 1, part metadata {} = 1.
        let text = br#"{"message":{"metadata":{"a":[1,2]},"parts":[{"data":"x"},{"text":"t","metadata":{}},{"text":"u"}]},"x":{"parts":[1,2,3,4]}}"#;
        let expected: Value = serde_json::from_slice(text).unwrap();
        let within = || RequestBudget::with_limits(3, 6);
        assert_eq!(parse_request(text, &within()).unwrap(), expected);

        let error = parse_request(text, &RequestBudget::with_limits(2, 0)).unwrap_err();
        assert_eq!(error.reason(), "PAYLOAD_TOO_LARGE");
        assert!(error.to_string().contains("3 parts; the limit is 2"), "{error}");
        let error = parse_request(text, &RequestBudget::with_limits(0, 5)).unwrap_err();
        assert_eq!(error.reason(), "PAYLOAD_TOO_LARGE");
        assert!(error.to_string().contains("more than 5 values"), "{error}");

        // Duplicates inside counted data are still refused; `parts` elsewhere is not counted.
        let duplicate = br#"{"message":{"parts":[{"data":{"k":1,"k":2}}]}}"#;
        assert_eq!(parse_request(duplicate, &within()).unwrap_err().reason(), "PARSE_ERROR");
        let elsewhere = br#"{"message":{"metadata":{"parts":[1,2,3,4,5]}},"parts":[1,2,3,4]}"#;
        assert!(parse_request(elsewhere, &RequestBudget::with_limits(1, 0)).is_ok());
        // Bad JSON past the budget is still bad JSON.
        let broken = br#"{"message":{"parts":[{"data":[1,2,3,4,5,6,7,]}]}}"#;
        assert_eq!(parse_request(broken, &within()).unwrap_err().reason(), "PARSE_ERROR");
    }

    /// Structured data nested past the core's limit is refused naming its member, objects,
    /// arrays or both; at the limit it is built as serde_json builds it.
    #[test]
    fn structured_data_nested_too_deep_is_refused_naming_its_field() {
        use crate::core::MAX_NESTING;
        let nest = |depth: usize, open: &dyn Fn(usize) -> &'static str| {
            let opens: String = (0..depth).map(open).collect();
            let closes: String =
                (0..depth).rev().map(|level| if open(level) == "[" { "]" } else { "}" }).collect();
            format!("{opens}1{closes}")
        };
        let objects = |depth| nest(depth, &|_| r#"{"k":"#);
        let arrays = |depth| nest(depth, &|_| "[");
        let mixed = |depth| nest(depth, &|level| if level % 2 == 0 { "[" } else { r#"{"k":"# });
        let budget = || RequestBudget::with_limits(0, 0);
        for value in [objects(MAX_NESTING), arrays(MAX_NESTING), mixed(MAX_NESTING)] {
            let text = format!(r#"{{"message":{{"parts":[{{"text":"t"}},{{"data":{value}}}]}}}}"#);
            let expected: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(parse_request(text.as_bytes(), &budget()).unwrap(), expected);
            let deeper = format!(r#"{{"message":{{"metadata":{{"a":{value}}}}}}}"#);
            assert_eq!(parse_request(deeper.as_bytes(), &budget()).unwrap_err().reason(), "INVALID_PARAMS");
        }
        for (value, field) in [
            (
                format!(
                    r#"{{"message":{{"parts":[{{"text":"t"}},{{"data":{}}}]}}}}"#,
                    arrays(MAX_NESTING + 1)
                ),
                "message.parts[1].data",
            ),
            (format!(r#"{{"message":{{"metadata":{}}}}}"#, objects(MAX_NESTING + 1)), "message.metadata"),
            (format!(r#"{{"metadata":{},"x":{{"k":1}}}}"#, mixed(MAX_NESTING + 1)), "metadata"),
            (
                format!(r#"{{"message":{{"parts":[{{"metadata":{}}}]}}}}"#, mixed(MAX_NESTING + 5)),
                "message.parts[0].metadata",
            ),
        ] {
            let error = parse_request(value.as_bytes(), &budget()).unwrap_err();
            assert_eq!(error.reason(), "INVALID_PARAMS", "{field}: {error}");
            assert_eq!(error.violations()[0].field, field, "{error}");
        }
        // Nesting outside data and metadata is only serde_json's to bound.
        let elsewhere = format!(r#"{{"x":{}}}"#, arrays(MAX_NESTING + 10));
        assert!(parse_request(elsewhere.as_bytes(), &budget()).is_ok());
    }

    #[test]
    fn trailing_garbage_and_syntax_errors_are_parse_errors() {
        for text in ["{} x", "{", "", "[1,]", "nul"] {
            assert_eq!(parse(text.as_bytes()).unwrap_err().reason(), "PARSE_ERROR", "{text}");
        }
    }
}
