//! A task stored as a snapshot and the events after it.
//!
//! While only artifacts come, the owner keeps the stored Task some events behind its stream
//! (at most `--fleet-task-lag`) rather than rewrite the whole of it, which grows with every
//! chunk, for each write (the journal decides, `task/journal.rs`; docs/FLEET.md, "Streaming: a
//! snapshot every K events"). Such a write sets the task hash's `lag`; the Task's own
//! `generation` says which event it includes (every Task stored carries the seq of its last
//! update there), and `seq` is the last event stored. A reader of a task with `lag` brings the
//! Task up to `seq` with the events in between, from the task's stream, by the owner's own
//! rules (`rules::replay`).
//!
//! The marker, not a seq of its own, says to look: a writer that stores the whole Task again
//! (this version's, or an older one's after a takeover) leaves `lag` set but a Task whose
//! generation is `seq`, so nothing is replayed twice. A Task stored before generations were
//! stamped has none, and no `lag` either.
//!
//! The two reads are not one step, and need not be: stream entries never change, so the events
//! read later are the ones that were there. Only their going can break it (the task dropped by
//! retention, or trimmed past them by a burst); then the reader reads again.
use std::sync::Arc;

use prost::Message as _;

use super::fleet::Entry;
use super::{RedisStore, decode_task};
use crate::error::A2aError;
use crate::proto::{StreamResponse, Task};
use crate::task::rules;
use crate::task::store::undecodable::undecodable;

/// Reads of a task and its events after the snapshot before a reader gives up (UNAVAILABLE):
/// the events go only when the task does (then the next read finds no task) or when a writer
/// stored a newer snapshot past a trim (then the next read has it).
pub(super) const READS: usize = 3;

impl RedisStore {
    /// The Task stored as `task`, decoded and brought up to event `seq` when `lag` says it may
    /// be behind; `None` when the events in between are no longer all in the stream (read the
    /// task again). One whose events do not replay is reported as one that does not decode.
    pub(super) async fn caught_up(
        &self,
        task_id: &str,
        task: &[u8],
        lag: bool,
        seq: u64,
    ) -> Result<Option<Task>, A2aError> {
        let mut caught_up = Arc::new(decode_task(task_id, task)?);
        let snap = u64::try_from(caught_up.generation).unwrap_or(0);
        if !lag || snap >= seq {
            return Ok(Some(Arc::unwrap_or_clone(caught_up)));
        }
        let mut cmd = redis::cmd("XRANGE");
        cmd.arg(self.keys.events(task_id)).arg(format!("{}-0", snap + 1)).arg(format!("{seq}-0"));
        let entries: Vec<Entry> = self.redis.query("catch_up", &cmd).await?;
        if entries.len() as u64 != seq - snap {
            return Ok(None);
        }
        for ((id, fields), at) in entries.into_iter().zip(snap + 1..) {
            let foreign = || undecodable(task_id, format!("its event stream has a foreign entry {id}"));
            if id != format!("{at}-0") {
                return Err(foreign());
            }
            let event = fields.into_iter().nth(1).ok_or_else(foreign)?;
            let payload =
                StreamResponse::decode(&event[..]).ok().and_then(|e| e.payload).ok_or_else(foreign)?;
            rules::replay(&mut caught_up, at, payload).map_err(|problem| {
                undecodable(task_id, format!("its event {at} does not replay: {problem}"))
            })?;
        }
        Ok(Some(Arc::unwrap_or_clone(caught_up)))
    }
}

/// UNAVAILABLE for a task whose events after its snapshot kept going while it was read.
pub(super) fn kept_moving(task_id: &str) -> A2aError {
    A2aError::Unavailable(format!("task {task_id} kept changing while it was read; retry"))
}
