//! A stored task that does not decode. A client can no longer store one (the core refuses
//! structured data nested past what decoders read, `core/validate/nesting.rs`), but an agent,
//! an older release or a bug might: then ListTasks skips it and calls on other tasks go on;
//! GetTask of that very task answers INTERNAL. Each is counted
//! (`a2a_store_undecodable_total`) and logged once, not once per read for as long as it is
//! kept.
use std::collections::HashSet;
use std::fmt::Display;
use std::sync::{Mutex, OnceLock};

use metrics::Counter;

use crate::error::A2aError;

/// Task ids already logged; past this many the set starts again, so memory stays bounded and
/// a flood of bad tasks still logs at most this many lines per round.
const LOGGED: usize = 1024;

/// `a2a_store_undecodable_total`: reads that met a stored task that does not decode.
fn counter() -> &'static Counter {
    static COUNTER: OnceLock<Counter> = OnceLock::new();
    COUNTER.get_or_init(|| metrics::counter!("a2a_store_undecodable_total"))
}

/// The error for task `task_id`, whose stored bytes failed to decode with `error`: counted,
/// and logged the first time.
pub(crate) fn undecodable(task_id: &str, error: impl Display) -> A2aError {
    counter().increment(1);
    static SEEN: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    let mut seen = SEEN.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if seen.len() >= LOGGED {
        seen.clear();
    }
    if seen.insert(task_id.to_owned()) {
        tracing::error!(%task_id, %error, "a stored task does not decode; ListTasks skips it");
    }
    A2aError::Internal(format!("stored task {task_id} does not decode: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_undecodable_task_is_an_internal_error_naming_it() {
        let error = undecodable("t1", "recursion limit reached");
        assert_eq!(error.reason(), "INTERNAL_ERROR");
        assert!(error.to_string().contains("t1"), "{error}");
    }
}
