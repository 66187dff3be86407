//! How deep a client's structured data (`google.protobuf.Struct` and `Value`: metadata, data
//! parts) may nest, and its measure.
//!
//! Protobuf decoders stop at a recursion limit (prost and upb: 100 nested messages). A value a
//! client sends travels on inside wrappers the request did not have (the Task in a fleet's
//! mail, a v0.3 data part), so a value that decoded in the request can make the stored task
//! undecodable everywhere. The limit is computed from the deepest wrapper, so that whatever
//! carries an admitted value still decodes; the test below builds each wrapper and proves it.
use pbjson_types::{Struct, Value, value::Kind};

use crate::error::A2aError;

/// The nested messages a protobuf decoder reads (prost's `RECURSION_LIMIT`; upb's default).
const DECODER_DEPTH: usize = 100;

/// The message depth at which the deepest client-sent `Value` travels: fleet mail answering a
/// forwarded turn, `Mail → Reply → TurnStart → Task → TaskStatus → Message → Part → Value`.
/// A v0.3 data part is as deep: `StreamResponse → Task → TaskStatus → Message → Part →
/// DataPart → Struct → (entry → Value)` when a non-object value is wrapped as `{"value": …}`,
/// and that wrapped value is an array (which costs one level less than an object).
const DEEPEST_WRAPPER: usize = 7;

/// Message levels one nesting level costs at most: an object is a `Struct`, a map entry and
/// the `Value` in it; an array is a `ListValue` and a `Value`, one less.
const LEVELS_PER_NESTING: usize = 3;

/// How deep a client's structured data may nest: objects and arrays inside one another,
/// the outermost counting 1 (`{"a": 1}` nests 1 deep, `{"a": [{}]}` 3). 31.
pub const MAX_NESTING: usize = (DECODER_DEPTH - DEEPEST_WRAPPER) / LEVELS_PER_NESTING;

/// The error for structured data in `field` nested deeper than [`MAX_NESTING`].
pub fn too_deep(field: impl Into<String>) -> A2aError {
    A2aError::invalid_field(
        field,
        format!("nests objects and arrays more than {MAX_NESTING} deep; that is the limit"),
    )
}

/// What the checks measure of structured data, in one walk.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Values, itself included (`--max-struct-values`).
    pub values: usize,
    /// Objects and arrays nested in one another ([`MAX_NESTING`]).
    pub depth: usize,
}

impl Shape {
    /// A JSON object: itself and every value below it.
    pub fn of_struct(object: &Struct) -> Self {
        Self::container(object.fields.values())
    }

    /// A JSON value: itself and every value below it.
    pub fn of_value(value: &Value) -> Self {
        match &value.kind {
            Some(Kind::StructValue(s)) => Self::of_struct(s),
            Some(Kind::ListValue(list)) => Self::container(list.values.iter()),
            _ => Self { values: 1, depth: 0 },
        }
    }

    fn container<'a>(children: impl Iterator<Item = &'a Value>) -> Self {
        children.map(Self::of_value).fold(Self { values: 1, depth: 1 }, |shape, child| Self {
            values: shape.values + child.values,
            depth: shape.depth.max(child.depth + 1),
        })
    }
}

#[cfg(test)]
#[path = "nesting_tests.rs"]
mod tests;
