//! What one task may hold: history entries (`--max-history`) and bytes of history and
//! artifacts (`--max-task-bytes`), checked before a client's message or an agent's event
//! changes the task.
//!
//! Bytes are the protobuf encoded size plus the fixed in-memory size of each message,
//! artifact and part: a message of many tiny parts costs far more memory than its encoding
//! (a one-byte text part encodes in 5 bytes and takes over a hundred in memory), and the limit
//! is there to bound memory. The total is kept as the task changes, so a check costs the size
//! of what arrives, not of the task. Status messages are measured before the actor stamps
//! their ids, so the total may run a few dozen bytes per entry below the exact figure.
use std::mem::{size_of, size_of_val};

use prost::Message as _;

use crate::agent::AgentEvent;
use crate::error::{A2aError, LimitKind};
use crate::proto::{Artifact, Message, Part, Task};

/// The field number of `Artifact.parts`, for the encoded size of appended parts.
const ARTIFACT_PARTS_FIELD: u32 = 4;

/// The limits of one task; 0: none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskLimits {
    /// `--max-task-bytes`: history and artifacts, measured as this module says.
    pub max_bytes: usize,
    /// `--max-history`: messages in the history.
    pub max_history: usize,
}

impl TaskLimits {
    /// Whether `message` may start a task at all (its first history entry).
    pub fn check_first(&self, task_id: &str, message: &Message) -> Result<(), A2aError> {
        check_bytes(*self, task_id, message_cost(message)).map(drop)
    }
}

/// What a message in the history costs.
pub fn message_cost(message: &Message) -> usize {
    message.encoded_len() + size_of::<Message>() + size_of_val(message.parts.as_slice())
}

fn artifact_cost(artifact: &Artifact) -> usize {
    artifact.encoded_len() + size_of::<Artifact>() + size_of_val(artifact.parts.as_slice())
}

/// What appending `parts` to an artifact adds to its cost.
fn appended_cost(parts: &[Part]) -> usize {
    prost::encoding::message::encoded_len_repeated(ARTIFACT_PARTS_FIELD, parts) + size_of_val(parts)
}

/// A task's running total, checked against the limits (the server's, passed in: not kept in
/// every live task's actor).
pub(crate) struct Budget {
    bytes: usize,
}

impl Budget {
    /// Measures `task` (once, when its actor starts).
    pub fn of(task: &Task) -> Self {
        let bytes = task.history.iter().map(message_cost).sum::<usize>()
            + task.artifacts.iter().map(artifact_cost).sum::<usize>();
        Self { bytes }
    }

    /// The total if `message` joins `task`'s history, or why it may not.
    pub fn message(&self, limits: TaskLimits, task: &Task, message: &Message) -> Result<usize, A2aError> {
        let max = limits.max_history;
        if max != 0 && task.history.len() >= max {
            return Err(A2aError::limit(
                LimitKind::TooLarge,
                "max-history",
                format!(
                    "task {} holds {} history entries, the most it may hold",
                    task.id,
                    task.history.len()
                ),
            ));
        }
        check_bytes(limits, &task.id, self.bytes + message_cost(message))
    }

    /// The total once the agent's `event` is applied to `task`, or why the task cannot take it.
    pub fn event(&self, limits: TaskLimits, task: &Task, event: &AgentEvent) -> Result<usize, A2aError> {
        match event {
            AgentEvent::Status(update) => match update.status.as_ref().and_then(|s| s.message.as_ref()) {
                Some(message) => self.message(limits, task, message),
                None => Ok(self.bytes),
            },
            AgentEvent::Artifact(update) => {
                let Some(artifact) = &update.artifact else { return Ok(self.bytes) };
                // As `rules::merge_artifact` will merge it.
                let existing = task.artifacts.iter().find(|a| a.artifact_id == artifact.artifact_id);
                let total = match existing {
                    Some(_) if update.append => self.bytes + appended_cost(&artifact.parts),
                    Some(old) => self.bytes.saturating_sub(artifact_cost(old)) + artifact_cost(artifact),
                    None => self.bytes + artifact_cost(artifact),
                };
                check_bytes(limits, &task.id, total)
            }
            AgentEvent::Message(_) => Ok(self.bytes),
        }
    }

    /// Takes a total [`Budget::message`] or [`Budget::event`] allowed, once the change is made.
    pub fn set(&mut self, bytes: usize) {
        self.bytes = bytes;
    }
}

/// `total`, if `limits` allow a task to hold it.
fn check_bytes(limits: TaskLimits, task_id: &str, total: usize) -> Result<usize, A2aError> {
    let max = limits.max_bytes;
    if max != 0 && total > max {
        return Err(A2aError::limit(
            LimitKind::TooLarge,
            "max-task-bytes",
            format!("task {task_id} would hold {total} bytes of history and artifacts; the limit is {max}"),
        ));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{text_artifact, text_part};
    use crate::proto::TaskArtifactUpdateEvent;

    fn chunk(id: &str, text: &str, append: bool) -> AgentEvent {
        AgentEvent::Artifact(TaskArtifactUpdateEvent {
            artifact: Some(text_artifact(id, "out", text)),
            append,
            ..Default::default()
        })
    }

    #[test]
    fn the_running_total_is_what_measuring_the_task_gives() {
        let limits = TaskLimits { max_bytes: 0, max_history: 0 };
        let mut task = std::sync::Arc::new(Task { id: "t".into(), ..Default::default() });
        let mut budget = Budget::of(&task);
        let events = [chunk("a", "one", false), chunk("a", "two", true), chunk("b", "x", false)];
        for event in events.into_iter().chain([chunk("a", "replaced", false), chunk("b", "y", true)]) {
            let total = budget.event(limits, &task, &event).unwrap();
            crate::task::rules::apply(&mut task, true, event).unwrap();
            budget.set(total);
            assert_eq!(total, Budget::of(&task).bytes, "after {:?}", task.artifacts);
        }
    }

    #[test]
    fn history_and_bytes_are_refused_past_their_limits() {
        let message = Message { parts: vec![text_part("hello")], ..Default::default() };
        let task = Task { id: "t".into(), history: vec![message.clone(); 2], ..Default::default() };
        let budget = Budget::of(&task);
        let full = budget.message(TaskLimits { max_bytes: 0, max_history: 2 }, &task, &message).unwrap_err();
        assert_eq!((full.reason(), full.metadata()["limit"].as_str()), ("PAYLOAD_TOO_LARGE", "max-history"));

        let limits = TaskLimits { max_bytes: 3 * message_cost(&message) - 1, max_history: 0 };
        let large = budget.message(limits, &task, &message).unwrap_err();
        assert_eq!(large.metadata()["limit"], "max-task-bytes");
        assert!(limits.check_first("t", &message).is_ok());
        let tiny = TaskLimits { max_bytes: 10, max_history: 0 };
        assert!(tiny.check_first("t", &message).is_err());
    }
}
