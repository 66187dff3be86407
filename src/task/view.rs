//! Shaping a task for a response: `historyLength` and `includeArtifacts`.
use std::sync::Arc;

use crate::error::A2aError;
use crate::proto::Task;

/// Checks a client's `historyLength`: absent or ≥ 0.
pub fn check_history_length(field: &str, history_length: Option<i32>) -> Result<(), A2aError> {
    match history_length {
        Some(n) if n < 0 => Err(A2aError::invalid_field(field, "must not be negative")),
        _ => Ok(()),
    }
}

/// Keeps the `history_length` most recent messages (all when `None`, none for 0).
pub fn trim_history(task: &mut Task, history_length: Option<i32>) {
    if let Some(n) = history_length {
        let keep = n.max(0) as usize;
        if task.history.len() > keep {
            task.history.drain(..task.history.len() - keep);
        }
    }
}

/// Whether `history_length` keeps fewer messages than `task` holds.
pub fn trims(task: &Task, history_length: Option<i32>) -> bool {
    history_length.is_some_and(|n| (n.max(0) as usize) < task.history.len())
}

/// A shared task trimmed to `history_length` messages: copied only when that changes it.
pub fn trimmed(mut task: Arc<Task>, history_length: Option<i32>) -> Arc<Task> {
    if trims(&task, history_length) {
        trim_history(Arc::make_mut(&mut task), history_length);
    }
    task
}
