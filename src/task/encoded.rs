//! A task version together with its protobuf encoding, made once for everyone who needs it.
//!
//! A quick SendMessage ends with the same finished task written twice: packed by the store
//! (the memory store keeps a finished task as its encoding, Redis keeps nothing else) and
//! encoded again into the gRPC answer. Each walk of the task costs about 2,000 instructions,
//! a few percent of such a call. The actor encodes a finished task once, hands the bytes to
//! the store, and the caller waiting on the turn gets them with the task; a binding that
//! speaks protobuf copies them into its answer, the others use the task and ignore them.
use std::sync::Arc;

use bytes::Bytes;
use prost::Message as _;

use super::view;
use crate::proto::Task;

/// A task version, with its encoding when one was made for it. The fields are private so
/// that the bytes are always exactly the task's encoding: readers trust them.
#[derive(Clone, Debug)]
pub struct EncodedTask {
    task: Arc<Task>,
    proto: Option<Bytes>,
}

impl EncodedTask {
    /// A task without its encoding.
    pub fn plain(task: Arc<Task>) -> Self {
        Self { task, proto: None }
    }

    /// A task with its encoding, made now.
    pub fn encoded(task: Arc<Task>) -> Self {
        let proto = Some(encode(&task));
        Self { task, proto }
    }

    /// The task.
    pub fn task(&self) -> &Arc<Task> {
        &self.task
    }

    /// The task's protobuf encoding, if it was made.
    pub fn proto(&self) -> Option<&Bytes> {
        self.proto.as_ref()
    }

    /// The task and its encoding, if made.
    pub fn into_parts(self) -> (Arc<Task>, Option<Bytes>) {
        (self.task, self.proto)
    }

    /// The task with its history trimmed to `history_length` messages; the encoding goes
    /// when the task changes.
    pub fn trimmed(self, history_length: Option<i32>) -> Self {
        if view::trims(&self.task, history_length) {
            return Self::plain(view::trimmed(self.task, history_length));
        }
        self
    }
}

/// A task's protobuf encoding, written without measuring it first: measuring walks the whole
/// task again (prost measures every nested message as it encodes it anyway), and a task is
/// bounded by `--max-task-bytes`, so a buffer grown as it goes costs at most a few copies of a
/// small one.
pub fn encode(task: &Task) -> Bytes {
    let mut buf = Vec::with_capacity(TASK_ENCODE_BUFFER);
    task.encode_raw(&mut buf);
    Bytes::from(buf)
}

/// What an encoding starts with: a typical finished task fits.
const TASK_ENCODE_BUFFER: usize = 512;

/// The encoding of one task version, kept by its actor so that the version is encoded at
/// most once however many want its bytes.
#[derive(Default)]
pub(super) struct EncodingCache(Option<(Arc<Task>, Bytes)>);

impl EncodingCache {
    /// `task`'s encoding, made now unless this very version was encoded before.
    pub(super) fn of(&mut self, task: &Arc<Task>) -> Bytes {
        if let Some(bytes) = self.made(task) {
            return bytes;
        }
        let bytes = encode(task);
        self.0 = Some((task.clone(), bytes.clone()));
        bytes
    }

    /// `task` with its encoding (see [`Self::of`]).
    pub(super) fn encoded(&mut self, task: &Arc<Task>) -> EncodedTask {
        EncodedTask { task: task.clone(), proto: Some(self.of(task)) }
    }

    /// `task`'s encoding if this very version (the same allocation: versions are never
    /// changed in place while shared) was encoded.
    pub(super) fn made(&self, task: &Arc<Task>) -> Option<Bytes> {
        self.0.as_ref().filter(|(encoded, _)| Arc::ptr_eq(encoded, task)).map(|(_, bytes)| bytes.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Message;

    fn task(messages: usize) -> Arc<Task> {
        let history = (0..messages).map(|i| Message { message_id: format!("m{i}"), ..Default::default() });
        Arc::new(Task { id: "t".into(), history: history.collect(), generation: 2, ..Default::default() })
    }

    #[test]
    fn the_encoding_is_prosts_and_made_once_per_version() {
        let mut cache = EncodingCache::default();
        let first = task(2);
        assert_eq!(cache.made(&first), None);
        let bytes = cache.of(&first);
        assert_eq!(bytes, first.encode_to_vec());
        assert_eq!(cache.made(&first).unwrap().as_ptr(), bytes.as_ptr(), "the same bytes, not a copy");

        let equal_but_another_version = Arc::new((*first).clone());
        assert_eq!(cache.made(&equal_but_another_version), None, "versions are told apart by identity");
        assert_eq!(cache.of(&equal_but_another_version), bytes);
    }

    #[test]
    fn trimming_drops_the_encoding_only_when_it_changes_the_task() {
        let full = EncodedTask::encoded(task(3));
        assert_eq!(full.proto().unwrap(), &task(3).encode_to_vec());
        assert!(full.clone().trimmed(None).proto().is_some());
        assert!(full.clone().trimmed(Some(3)).proto().is_some());
        let trimmed = full.trimmed(Some(1));
        assert_eq!(trimmed.proto(), None);
        assert_eq!(trimmed.task().history.len(), 1);
        assert_eq!(trimmed.task().history[0].message_id, "m2", "the most recent message is kept");
    }
}
