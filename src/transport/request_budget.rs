//! What one JSON request may hold of the shapes that cost the most to decode, counted while it
//! is parsed (`strict_json.rs`) against the core's limits, so that a request over them is
//! refused before they are built. The errors are the core's own, which it also raises on the
//! decoded request of every binding. Structured data nested past the core's `MAX_NESTING` is
//! refused here too, naming its field: past prost's limit it would not even decode.
use std::cell::{Cell, RefCell};

use crate::core::CoreSettings;
use crate::core::validate::nesting::too_deep;
use crate::core::validate::{MAX_NESTING, admit_parts, admit_struct_values};
use crate::error::A2aError;

/// The counts of one request against the limits.
pub struct RequestBudget {
    max_parts: usize,
    max_struct_values: usize,
    /// Parts past `max_parts` (skipped, not built).
    parts_over: Cell<usize>,
    /// Structured values seen, up to one past the limit (the rest are skipped).
    struct_values: Cell<usize>,
    /// Structured data nested past [`MAX_NESTING`] was met: the path to its member, built
    /// innermost first as the parse unwinds (the rest of the request is skipped).
    too_deep: RefCell<Option<Vec<String>>>,
}

impl RequestBudget {
    /// The core's limits (`--max-parts`, `--max-struct-values`).
    pub fn new(settings: &CoreSettings) -> Self {
        Self::with_limits(settings.max_parts, settings.max_struct_values)
    }

    /// Limits as given (0: none).
    pub fn with_limits(max_parts: usize, max_struct_values: usize) -> Self {
        Self {
            max_parts,
            max_struct_values,
            parts_over: Cell::new(0),
            struct_values: Cell::new(0),
            too_deep: RefCell::new(None),
        }
    }

    /// No limits: any JSON body.
    pub fn unlimited() -> Self {
        Self::with_limits(0, 0)
    }

    /// The parts a message may have (`usize::MAX` without a limit).
    pub(super) fn max_parts(&self) -> usize {
        if self.max_parts == 0 { usize::MAX } else { self.max_parts }
    }

    /// The message's parts array had `over` parts past the limit.
    pub(super) fn parts_over(&self, over: usize) {
        self.parts_over.set(over);
    }

    /// Counts one structured value; `false` once there are more than the limit (the value is
    /// then not to be built).
    pub(super) fn admit_struct_value(&self) -> bool {
        if self.max_struct_values == 0 {
            return true;
        }
        let seen = self.struct_values.get();
        if seen > self.max_struct_values {
            return false;
        }
        self.struct_values.set(seen + 1);
        seen < self.max_struct_values
    }

    /// Whether more structured values came than the limit.
    pub(super) fn struct_values_over(&self) -> bool {
        self.max_struct_values != 0 && self.struct_values.get() > self.max_struct_values
    }

    /// Whether structured data `depth` deep (objects and arrays) may be built; past
    /// [`MAX_NESTING`] it is noted, and is not.
    pub(super) fn admit_depth(&self, depth: usize) -> bool {
        if depth <= MAX_NESTING {
            return true;
        }
        self.too_deep.borrow_mut().get_or_insert_with(Vec::new);
        false
    }

    /// Whether structured data was nested too deep.
    pub(super) fn is_too_deep(&self) -> bool {
        self.too_deep.borrow().is_some()
    }

    /// As the parse unwinds from too deep data: `segment` (a member name, or `[i]`) is the
    /// next outer step of the path to its field.
    pub(super) fn too_deep_in(&self, segment: impl FnOnce() -> String) {
        if let Some(path) = self.too_deep.borrow_mut().as_mut() {
            path.push(segment());
        }
    }

    /// The core's error for the first limit the request went over.
    pub fn admit(&self) -> Result<(), A2aError> {
        if self.parts_over.get() > 0 {
            admit_parts(self.max_parts + self.parts_over.get(), self.max_parts)?;
        }
        admit_struct_values(self.struct_values.get(), self.max_struct_values)?;
        match self.too_deep.borrow().as_deref() {
            Some(path) => Err(too_deep(field_path(path))),
            None => Ok(()),
        }
    }
}

/// `["data", "[0]", "parts", "message"]` (innermost first) as `message.parts[0].data`.
fn field_path(innermost_first: &[String]) -> String {
    let mut path = String::new();
    for segment in innermost_first.iter().rev() {
        if !path.is_empty() && !segment.starts_with('[') {
            path.push('.');
        }
        path.push_str(segment);
    }
    path
}
