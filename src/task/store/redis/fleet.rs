//! The fleet primitives: the owner's atomic append, the exact join (snapshot, then the events
//! after it), and the owner lease.
//!
//! # Why the join is exact
//! [`RedisStore::append`] runs one Lua script on the task's slot that appends event `seq` to the
//! stream (entry id `<seq>-0`) *and* stores the Task it produced with `seq`; Redis runs a script
//! alone, so no reader ever sees one without the other. [`RedisStore::snapshot`] reads the Task
//! and its seq S in one command, so the Task includes exactly the events 1..=S. Reading the
//! stream after entry `S-0` then yields S+1, S+2, …: nothing the snapshot already holds (no
//! duplicate) and, since the script refuses any seq but stored + 1, stream ids are consecutive,
//! so a first entry above S+1 can only mean trimming, which [`EventBatch::Trimmed`] reports
//! (no silent gap).
//!
//! # Fencing
//! Two checks in the same script: the stored seq must be `seq - 1` (a writer that missed
//! someone else's append, or retries one that landed, is refused), and, when the caller passes
//! its replica id, the task's lease must name it (a stale owner whose lease expired and was
//! taken over is refused even before its seq diverges).
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::replica::Append;
use super::{RedisStore, millis, scripts};
use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::Task;

/// How much of a task's event stream Redis keeps.
#[derive(Debug, Clone, Copy)]
pub struct StreamBounds {
    /// At least this many newest events are kept (`MAXLEN ~`: Redis trims whole nodes, so
    /// a few more may stay); older ones are trimmed and a reader needing them restarts from a
    /// snapshot.
    pub max_events: usize,
}

/// Why an append was refused; the caller is no longer (or never was) the task's writer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fenced {
    /// The stored seq is not the one before the appended one.
    Seq {
        /// The seq Redis holds.
        stored: u64,
    },
    /// The lease is held by another replica (or by nobody).
    Lease {
        /// The replica holding it now.
        holder: Option<String>,
    },
    /// The task id is stored for another owner.
    Owner,
    /// The stored task is finished (another replica ended it): it takes no more events.
    Finished,
}

/// What [`RedisStore::read_events`] found after the caller's seq.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventBatch {
    /// The next events, consecutive from `after_seq + 1` (empty: none within the block time).
    Events(Vec<(u64, Bytes)>),
    /// The events right after `after_seq` were trimmed; the oldest left is `first_seq`. The
    /// reader restarts from a [`RedisStore::snapshot`].
    Trimmed {
        /// The oldest seq still in the stream.
        first_seq: u64,
    },
}

/// One stream entry as XREAD and XRANGE return it: id and the field/value list.
pub(super) type Entry = (String, Vec<Vec<u8>>);

impl RedisStore {
    /// Appends event `seq` (an encoded `StreamResponse`) and stores `task` (the Task after that
    /// event) in one atomic step, trimming the stream to `bounds`. Refused ([`Fenced`]) unless
    /// the stored seq is `seq - 1` and, with `lease` given, the lease names that replica. The
    /// owner's index entries are updated right after (another slot, so another step).
    pub async fn append(
        &self,
        owner: &Owner,
        task: &Task,
        seq: u64,
        event: Bytes,
        bounds: StreamBounds,
        lease: Option<&str>,
    ) -> Result<Result<(), Fenced>, A2aError> {
        // One event is a batch of one: the same script, the same fences.
        self.append_batch(owner, task, seq, &[event], bounds, lease.unwrap_or(""), Append::with_task(true))
            .await
    }

    /// The stored Task and the seq of the last event it includes, if it exists and belongs to
    /// `owner` (read in one command, so the pair is consistent).
    pub async fn snapshot(&self, owner: &Owner, task_id: &str) -> Result<Option<(Arc<Task>, u64)>, A2aError> {
        self.load(owner, task_id).await
    }

    /// Up to `count` events after `after_seq`. With `block`, waits that long for one to arrive
    /// (`XREAD BLOCK` on a dedicated connection: Redis wakes the reader, nothing polls);
    /// without, answers at once. Says when the events after `after_seq` were trimmed.
    pub async fn read_events(
        &self,
        task_id: &str,
        after_seq: u64,
        block: Option<Duration>,
        count: usize,
    ) -> Result<EventBatch, A2aError> {
        let mut cmd = redis::cmd("XREAD");
        cmd.arg("COUNT").arg(count.max(1));
        if let Some(block) = block {
            cmd.arg("BLOCK").arg(millis(block).max(1));
        }
        cmd.arg("STREAMS").arg(self.keys.events(task_id)).arg(format!("{after_seq}-0"));
        let before = self.redis.before_write().await;
        let reply: Option<Vec<(String, Vec<Entry>)>> = match block {
            Some(block) => self.redis.blocking("read_events", block, &cmd).await?,
            None => self.redis.query("read_events", &cmd).await?,
        };
        let entries = reply.into_iter().flatten().flat_map(|(_, entries)| entries);
        let mut events = Vec::new();
        for (id, fields) in entries {
            let seq = id.split_once('-').and_then(|(seq, _)| seq.parse::<u64>().ok()).ok_or_else(|| {
                A2aError::Internal(format!("event stream of task {task_id} has a foreign entry id {id}"))
            })?;
            if events.is_empty() && seq > after_seq + 1 {
                return Ok(EventBatch::Trimmed { first_seq: seq });
            }
            let payload = fields.into_iter().nth(1).unwrap_or_default();
            events.push((seq, Bytes::from(payload)));
        }
        if !events.is_empty() {
            // An event shown means stored: another replica's append may not be replicated yet.
            self.redis.replicated(before).await?;
        }
        Ok(EventBatch::Events(events))
    }

    /// Takes the task's lease for `replica` for `ttl` (`SET NX PX`), or extends it if `replica`
    /// holds it already; `false` if another replica holds it.
    pub async fn acquire_lease(&self, task_id: &str, replica: &str, ttl: Duration) -> Result<bool, A2aError> {
        self.lease_script("acquire_lease", &scripts::ACQUIRE, task_id, replica, Some(ttl)).await
    }

    /// Extends the lease only if `replica` still holds it; `false` means it was lost.
    pub async fn renew_lease(&self, task_id: &str, replica: &str, ttl: Duration) -> Result<bool, A2aError> {
        self.lease_script("renew_lease", &scripts::RENEW, task_id, replica, Some(ttl)).await
    }

    /// Gives the lease up, only if `replica` holds it; `false` if it did not.
    pub async fn release_lease(&self, task_id: &str, replica: &str) -> Result<bool, A2aError> {
        self.lease_script("release_lease", &scripts::RELEASE, task_id, replica, None).await
    }

    /// The replica holding the task's lease, if any.
    pub async fn lease_owner(&self, task_id: &str) -> Result<Option<String>, A2aError> {
        self.redis.query("lease_owner", redis::cmd("GET").arg(self.keys.lease(task_id))).await
    }

    async fn lease_script(
        &self,
        op: &'static str,
        script: &redis::Script,
        task_id: &str,
        replica: &str,
        ttl: Option<Duration>,
    ) -> Result<bool, A2aError> {
        let mut invocation = script.prepare_invoke();
        invocation.key(self.keys.lease(task_id)).arg(replica);
        if let Some(ttl) = ttl {
            invocation.arg(millis(ttl).max(1));
        }
        let mut conn = self.redis.conn();
        let limit = self.redis.timeouts().command;
        let done: i64 = self.redis.run(op, limit, invocation.invoke_async(&mut conn)).await?;
        Ok(done == 1)
    }
}
