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

use bytes::{Buf, Bytes};
use prost::Message as _;
use prost::encoding::{DecodeContext, WireType, decode_key, skip_field};

use crate::error::A2aError;
use crate::proto::Task;
use crate::task::store::undecodable::undecodable;

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
    /// Task `id` as a shared value, decoding a packed one.
    pub(super) fn task(self, id: &str) -> Result<Arc<Task>, A2aError> {
        match self {
            Self::Live(task) => Ok(task),
            Self::Packed(bytes) => unpack(bytes).map(Arc::new).map_err(|e| undecodable(id, e)),
        }
    }

    /// The task as an owned value (a live one is copied only while its actor still shares
    /// it). Without `artifacts` a packed task's artifacts are skipped, not decoded: a listing
    /// leaves them out by default, and they are most of a typical task's bytes.
    pub(super) fn into_owned(self, id: &str, artifacts: bool) -> Result<Task, A2aError> {
        let decoded = match self {
            Self::Live(task) => return Ok(Arc::unwrap_or_clone(task)),
            Self::Packed(bytes) if artifacts => unpack(bytes),
            Self::Packed(bytes) => unpack_without_artifacts(bytes),
        };
        decoded.map_err(|e| undecodable(id, e))
    }
}

/// `Task.artifacts`' field number (`lf.a2a.v1.Task`).
const ARTIFACTS_FIELD: u32 = 4;

/// Decodes a packed task field by field, stepping over its artifacts.
fn unpack_without_artifacts(mut buf: Bytes) -> Result<Task, prost::DecodeError> {
    let mut task = Task::default();
    while buf.has_remaining() {
        let (field, wire_type) = decode_key(&mut buf)?;
        if field == ARTIFACTS_FIELD && wire_type == WireType::LengthDelimited {
            skip_field(wire_type, field, &mut buf, DecodeContext::default())?;
        } else {
            task.merge_field(field, wire_type, &mut buf, DecodeContext::default())?;
        }
    }
    Ok(task)
}

/// Decodes a packed task (`crate::task::encoded::encode`); one that does not decode is
/// reported ([`undecodable`]).
fn unpack(bytes: Bytes) -> Result<Task, prost::DecodeError> {
    Task::decode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::Owner;
    use crate::proto::{Artifact, Message, TaskState, TaskStatus};
    use crate::task::encoded::EncodedTask;
    use crate::task::store::memory::MemoryStore;
    use crate::task::store::{Retention, TaskStore};

    #[test]
    fn a_finished_task_packs_and_reads_back_equal() {
        let task = Task {
            id: "t".into(),
            context_id: "c".into(),
            status: Some(TaskStatus { state: TaskState::Completed as i32, ..Default::default() }),
            artifacts: vec![Artifact { artifact_id: "a".into(), name: "echo".into(), ..Default::default() }],
            history: vec![Message { message_id: "m".into(), ..Default::default() }],
            metadata: Some(pbjson_types::Struct::default()),
            generation: 3,
        };
        let bytes = crate::task::encoded::encode(&task);
        assert_eq!(bytes.len(), task.encoded_len());
        let packed = Stored::Packed(bytes);
        assert_eq!(*packed.clone().task("t").unwrap(), task);
        assert_eq!(packed.clone().into_owned("t", true).unwrap(), task);
        let without = Task { artifacts: Vec::new(), ..task.clone() };
        assert_eq!(packed.into_owned("t", false).unwrap(), without, "all but the artifacts");
        let live = Stored::Live(Arc::new(task.clone()));
        assert_eq!(live.into_owned("t", true).unwrap(), task);
    }

    /// A finished task's encoding made by its actor is kept as it is, not made again: the
    /// bytes a save is given are the bytes a read decodes (and the same allocation).
    #[tokio::test]
    async fn a_finished_task_keeps_the_encoding_it_came_with() {
        let store = MemoryStore::new(Retention::default());
        let owner = Owner::default();
        let status = TaskStatus { state: TaskState::Completed as i32, ..Default::default() };
        let task = Arc::new(Task { id: "t1".into(), status: Some(status), ..Default::default() });
        let encoded = EncodedTask::encoded(task.clone());
        let given = encoded.proto().unwrap().as_ptr();
        store.save_encoded(&owner, encoded).await.unwrap();
        let Some(Stored::Packed(kept)) = store.lock().tasks.get("t1").map(|r| r.task.clone()) else {
            panic!("a finished task is kept packed");
        };
        assert_eq!(kept.as_ptr(), given, "the very bytes it was given");
        assert_eq!(*store.get(&owner, "t1").await.unwrap().unwrap(), *task);
    }
}
