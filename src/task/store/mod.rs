//! Where task state lives beyond (and besides) its actor: the source for GetTask on finished
//! tasks and for ListTasks. Behind a trait so a shared store (Redis) can replace the in-memory
//! one for multi-replica deployments.
pub mod memory;
pub mod push_configs;
pub mod redis;
pub mod sent;
pub(crate) mod undecodable;
pub mod url;

use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine;

use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::{Task, TaskState};
use crate::task::encoded::EncodedTask;

pub use memory::{MemoryStore, Retention};
pub use push_configs::{PushConfigLimits, PushRegistration};
pub use redis::{RedisOptions, RedisStore};
pub use sent::{Fingerprint, SentRecord, SentState};
pub use url::{RedisTarget, StoreUrl};

/// The filters and page of a ListTasks call, already validated.
#[derive(Debug, Clone, Default)]
pub struct TaskQuery {
    /// Only tasks of this context.
    pub context_id: Option<String>,
    /// Only tasks in this state.
    pub state: Option<TaskState>,
    /// Only tasks whose status timestamp is at or after this.
    pub status_after: Option<pbjson_types::Timestamp>,
    /// Page size, 1..=100.
    pub page_size: usize,
    /// Resume after this position.
    pub after: Option<Cursor>,
    /// Whether the caller shows artifacts. Without, a store may leave them out of the page
    /// (the core clears them anyway).
    pub include_artifacts: bool,
}

/// One page of tasks, newest status first.
#[derive(Debug, Clone, Default)]
pub struct TaskPage {
    /// The tasks of the page (full: the core trims history and artifacts).
    pub tasks: Vec<Task>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<Cursor>,
    /// Matching tasks before pagination.
    pub total: usize,
}

/// A position in the ListTasks order: status timestamp descending, then task id ascending.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cursor {
    /// Status timestamp in nanoseconds since the epoch.
    pub timestamp_nanos: i128,
    /// Task id, to break ties.
    pub task_id: String,
}

impl Cursor {
    /// The cursor of a task's current position.
    pub fn of(task: &Task) -> Self {
        Self { timestamp_nanos: status_nanos(task), task_id: task.id.clone() }
    }

    /// The opaque page token clients send back.
    pub fn encode(&self) -> String {
        let raw = format!("{}:{}", self.timestamp_nanos, self.task_id);
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
    }

    /// Parses a page token this server issued.
    pub fn decode(token: &str) -> Result<Self, A2aError> {
        let invalid = || A2aError::invalid_field("pageToken", "not a page token issued by this server");
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token).map_err(|_| invalid())?;
        let raw = String::from_utf8(raw).map_err(|_| invalid())?;
        let (nanos, task_id) = raw.split_once(':').ok_or_else(invalid)?;
        Ok(Self { timestamp_nanos: nanos.parse().map_err(|_| invalid())?, task_id: task_id.to_owned() })
    }

    /// Sort key: newest first, then by id.
    pub fn sort_key(&self) -> (std::cmp::Reverse<i128>, &str) {
        (std::cmp::Reverse(self.timestamp_nanos), &self.task_id)
    }
}

/// A task's status timestamp in nanoseconds (0 when absent).
pub fn status_nanos(task: &Task) -> i128 {
    task.status
        .as_ref()
        .and_then(|s| s.timestamp.as_ref())
        .map(|t| t.seconds as i128 * 1_000_000_000 + t.nanos as i128)
        .unwrap_or(0)
}

/// Storage of task state, scoped by owner.
#[async_trait]
pub trait TaskStore: Send + Sync + 'static {
    /// Inserts or replaces a task. The task comes shared: its actor keeps using it (and copies
    /// it only when it changes again), so an in-memory store can keep it without a copy.
    async fn save(&self, owner: &Owner, task: Arc<Task>) -> Result<(), A2aError>;
    /// [`Self::save`], with the task's protobuf encoding when its actor made one (a finished
    /// task's): a store that keeps bytes uses them rather than encoding the task again. The
    /// actor saves through this; a store that keeps no bytes need not implement it.
    async fn save_encoded(&self, owner: &Owner, task: EncodedTask) -> Result<(), A2aError> {
        self.save(owner, task.into_parts().0).await
    }
    /// The task, if it exists and belongs to `owner`.
    async fn get(&self, owner: &Owner, task_id: &str) -> Result<Option<Arc<Task>>, A2aError>;
    /// A page of `owner`'s tasks matching `query`.
    async fn list(&self, owner: &Owner, query: &TaskQuery) -> Result<TaskPage, A2aError>;

    /// Inserts or replaces (by id) a push notification config of a task, with the protocol
    /// version it was registered in; refuses a new one beyond either of `limits`
    /// (`QUOTA_EXCEEDED`). Configs go when their task is evicted.
    async fn put_push_config(
        &self,
        owner: &Owner,
        registration: &PushRegistration,
        limits: PushConfigLimits,
    ) -> Result<(), A2aError>;
    /// The push notification configs of `owner`'s task, each with its version, in creation
    /// order.
    async fn push_configs(&self, owner: &Owner, task_id: &str) -> Result<Vec<PushRegistration>, A2aError>;
    /// Removes a push notification config; removing a missing one is not an error.
    async fn delete_push_config(&self, owner: &Owner, task_id: &str, config_id: &str)
    -> Result<(), A2aError>;

    /// Idempotent SendMessage (`core/idempotent.rs`): stores `record` as what `owner`'s
    /// `message_id` stands for, unless a record is there already, in one atomic step; `None`
    /// when `record` was stored, else the record that was there (and is kept). A record lasts
    /// the retention age from its claim, or less when retention's count or bytes need room.
    async fn claim_sent(
        &self,
        owner: &Owner,
        message_id: &str,
        record: &SentRecord,
    ) -> Result<Option<SentRecord>, A2aError>;
    /// Replaces `owner`'s record of `message_id` with `new` (removes it, with `None`) if it is
    /// still `old`, in one atomic step, keeping its expiry; whether it was.
    async fn swap_sent(
        &self,
        owner: &Owner,
        message_id: &str,
        old: &SentRecord,
        new: Option<&SentRecord>,
    ) -> Result<bool, A2aError>;
    /// A follow-up's message is in its task's history, so its `record` (a claim) stays as
    /// what the message stands for: a store whose retention does not already bound such a
    /// record (no task's retention takes it along, as a new task's) bounds it now. By default
    /// nothing: the memory store's records are bounded as they are claimed.
    async fn keep_sent(
        &self,
        _owner: &Owner,
        _message_id: &str,
        _record: &SentRecord,
    ) -> Result<(), A2aError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trip_and_garbage() {
        let cursor = Cursor { timestamp_nanos: 1_700_000_000_123_000_000, task_id: "a:b".into() };
        assert_eq!(Cursor::decode(&cursor.encode()).unwrap(), cursor);
        for bad in ["", "!!", "bm9wZQ"] {
            assert_eq!(Cursor::decode(bad).unwrap_err().reason(), "INVALID_PARAMS");
        }
    }
}
