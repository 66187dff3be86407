//! How the memory store holds one task: a live task as the value its actor last saved, a
//! finished one packed into its protobuf encoding.
//!
//! Retention keeps thousands of finished tasks that are rarely read again, and each one held
//! as a `Task` is a tree of a few dozen small allocations. Evicting it, long after it was
//! built, walks and frees that tree from memory that has long left the cache: with 10,000
//! tasks retained that cost about a fifth of a quick SendMessage's server CPU. Packed, a
//! finished task is one allocation (a few hundred bytes for a typical one), the tree is freed
//! while it is still warm, and a read of a finished task pays for the decode instead.
use std::sync::Arc;

use bytes::Bytes;
use prost::Message as _;

use crate::error::A2aError;
use crate::proto::Task;

/// A stored task; cloning it is cheap (a reference count), so reads clone under the store's
/// lock and decode after releasing it.
#[derive(Clone)]
pub(super) enum Stored {
    /// A task still running: kept as saved, so its actor and readers share one value.
    Live(Arc<Task>),
    /// A finished task's encoding.
    Packed(Bytes),
}

impl Stored {
    /// A finished task packed, `len` being its `encoded_len` (measured once by the caller,
    /// which needs it first to decide whether retention keeps the task at all).
    pub(super) fn pack(task: &Task, len: usize) -> Self {
        let mut buf = Vec::with_capacity(len);
        task.encode_raw(&mut buf);
        Self::Packed(Bytes::from(buf))
    }

    /// The task as a shared value, decoding a packed one.
    pub(super) fn task(self) -> Result<Arc<Task>, A2aError> {
        match self {
            Self::Live(task) => Ok(task),
            Self::Packed(bytes) => unpack(bytes).map(Arc::new),
        }
    }

    /// The task as an owned value (a live one is copied only while its actor still shares it).
    pub(super) fn into_owned(self) -> Result<Task, A2aError> {
        match self {
            Self::Live(task) => Ok(Arc::unwrap_or_clone(task)),
            Self::Packed(bytes) => unpack(bytes),
        }
    }
}

/// Decodes what [`Stored::new`] encoded (it cannot fail but for a bug, reported as such).
fn unpack(bytes: Bytes) -> Result<Task, A2aError> {
    Task::decode(bytes).map_err(|e| A2aError::Internal(format!("a stored task does not decode: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{TaskState, TaskStatus};

    #[test]
    fn a_finished_task_packs_and_reads_back_equal() {
        let task = Task {
            id: "t".into(),
            context_id: "c".into(),
            status: Some(TaskStatus { state: TaskState::Completed as i32, ..Default::default() }),
            ..Default::default()
        };
        let packed = Stored::pack(&task, task.encoded_len());
        let Stored::Packed(bytes) = &packed else { panic!("a finished task is packed") };
        assert_eq!(bytes.len(), task.encoded_len());
        assert_eq!(*packed.clone().task().unwrap(), task);
        assert_eq!(packed.into_owned().unwrap(), task);
        let live = Stored::Live(Arc::new(task.clone()));
        assert_eq!(live.into_owned().unwrap(), task);
    }
}
