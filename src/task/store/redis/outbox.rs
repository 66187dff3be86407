//! The durable push outbox (single node or Sentinels): one Redis stream `P:{outbox}` of
//! (task, seq, owner, event) entries, one per event of a task that has webhooks, written by
//! the [`scripts::WRITE`] step that writes the event itself. The entry carries the event: the
//! task's own stream keeps only its newest events, and a burst must not outrun a webhook that
//! is down. One replica at a time reads it (it holds `P:{outbox}:leader`, a lease) through the
//! consumer group `push`, delivers each event and only then acknowledges and deletes the entry.
//! Entries a dead reader had taken are claimed by the next one once idle for a lease
//! (`XAUTOCLAIM`), and the readers that then hold nothing leave the group
//! ([`scripts::OUTBOX_FORGET`]); the fleet side is `fleet/outbox.rs`.
//!
//! A task finished by its first write takes native commands (`born_finished.rs`) that cannot
//! test for webhooks; so a task given a webhook before it was first stored (one in its
//! creating SendMessage) is noted here and takes the script instead.
//!
//! A Redis Cluster has no outbox (a task's slot cannot hold a fleet-wide stream): there, as in
//! memory mode, webhooks are delivered from the owner's memory.
use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use redis::streams::{StreamAutoClaimReply, StreamId, StreamReadReply};

use super::keys::owner_from_id;
use super::{RedisStore, millis, scripts};
use crate::call::Owner;
use crate::error::A2aError;

/// The consumer group every reader of the outbox belongs to.
const GROUP: &str = "push";

/// Entries the outbox keeps at most (`XADD MAXLEN ~`): far beyond what a live fleet has
/// pending, so only a fleet that delivered nothing for very long loses its oldest entries.
const MAX_ENTRIES: u64 = 1_000_000;

/// New tasks awaiting their first write with a webhook, noted at most: past it, no task takes
/// the native first write any more (all take the script, which tests for webhooks itself).
const MAX_NOTED: usize = 65_536;

/// One outbox entry: event `seq` of `owner`'s task `task_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxEntry {
    /// The stream entry id (for acknowledging it).
    pub id: String,
    /// The task.
    pub task_id: String,
    /// The event's number in the task's stream.
    pub seq: u64,
    /// The task's owner.
    pub owner: Owner,
    /// The event (an encoded `StreamResponse`).
    pub event: Bytes,
}

/// The outbox's switch and the tasks that must not take the native first write.
pub(super) struct Outbox {
    on: bool,
    noted: Mutex<HashSet<String>>,
    overflowed: AtomicBool,
}

impl Outbox {
    pub(super) fn new(on: bool) -> Self {
        Self { on, noted: Mutex::new(HashSet::new()), overflowed: AtomicBool::new(false) }
    }

    fn noted(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.noted.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl RedisStore {
    /// Whether webhooks are delivered from the durable outbox (a single node or Sentinels).
    pub fn outbox_on(&self) -> bool {
        self.outbox.on
    }

    /// The WRITE script's outbox argument: its length bound, or '' with no outbox.
    pub(super) fn outbox_bound(&self) -> String {
        if self.outbox.on { MAX_ENTRIES.to_string() } else { String::new() }
    }

    /// Notes a webhook given to a task not stored yet, whose first write must then test for
    /// webhooks (the script); forgets it again once written or the webhook is deleted.
    pub(super) fn note_webhook(&self, task_id: &str, noted: bool) {
        if !self.outbox.on {
            return;
        }
        let mut set = self.outbox.noted();
        if !noted {
            set.remove(task_id);
        } else if set.len() < MAX_NOTED {
            set.insert(task_id.to_owned());
        } else if !self.outbox.overflowed.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "too many new tasks with webhooks at once: first writes take the script from now on"
            );
        }
    }

    /// Whether a task finished by its first write may take the native commands (which write
    /// no outbox entry).
    pub fn born_finished_allowed(&self, task_id: &str) -> bool {
        !self.outbox.on
            || !(self.outbox.overflowed.load(Ordering::Relaxed) || self.outbox.noted().contains(task_id))
    }

    /// Creates the consumer group (and the stream) if missing (again after a Redis that lost
    /// its data); an existing one is no error.
    pub async fn outbox_prepare(&self) -> Result<(), A2aError> {
        let mut invocation = scripts::OUTBOX_GROUP.prepare_invoke();
        invocation.key(self.keys.outbox()).arg(GROUP);
        let mut conn = self.redis.conn();
        let limit = self.redis.timeouts().command;
        self.redis.run("outbox_prepare", limit, invocation.invoke_async::<i64>(&mut conn)).await.map(drop)
    }

    /// Removes the readers other than `replica` that hold no entries; how many.
    pub async fn outbox_forget_readers(&self, replica: &str) -> Result<usize, A2aError> {
        let mut invocation = scripts::OUTBOX_FORGET.prepare_invoke();
        invocation.key(self.keys.outbox()).arg(GROUP).arg(replica);
        let mut conn = self.redis.conn();
        let limit = self.redis.timeouts().command;
        self.redis.run("outbox_forget_readers", limit, invocation.invoke_async(&mut conn)).await
    }

    /// Takes (or keeps) the outbox's lead for `replica` for `ttl`; `false` if another leads.
    pub async fn outbox_lead(&self, replica: &str, ttl: Duration) -> Result<bool, A2aError> {
        let mut invocation = scripts::ACQUIRE.prepare_invoke();
        invocation.key(self.keys.outbox_leader()).arg(replica).arg(millis(ttl).max(1));
        let mut conn = self.redis.conn();
        let limit = self.redis.timeouts().command;
        let led: i64 = self.redis.run("outbox_lead", limit, invocation.invoke_async(&mut conn)).await?;
        Ok(led == 1)
    }

    /// Takes over up to `count` entries that readers took and left unacknowledged, from
    /// stream id `start` on; returns them (oldest first) and where to go on ("0-0": done).
    pub async fn outbox_claim(
        &self,
        replica: &str,
        start: &str,
        count: usize,
    ) -> Result<(Vec<OutboxEntry>, String), A2aError> {
        let cmd = redis::cmd("XAUTOCLAIM")
            .arg(self.keys.outbox())
            .arg(GROUP)
            .arg(replica)
            .arg(0)
            .arg(start)
            .arg("COUNT")
            .arg(count.max(1))
            .to_owned();
        let reply: StreamAutoClaimReply = self.redis.query("outbox_claim", &cmd).await?;
        if !reply.deleted_ids.is_empty() {
            tracing::warn!(
                lost = reply.deleted_ids.len(),
                "push outbox entries were trimmed before delivery"
            );
            self.outbox_done(&reply.deleted_ids).await?;
        }
        Ok((self.entries(reply.claimed).await, reply.next_stream_id))
    }

    /// Up to `count` new entries for `replica`, waiting up to `block` for one (on a dedicated
    /// connection).
    pub async fn outbox_read(
        &self,
        replica: &str,
        count: usize,
        block: Duration,
    ) -> Result<Vec<OutboxEntry>, A2aError> {
        let mut cmd = redis::cmd("XREADGROUP");
        cmd.arg("GROUP").arg(GROUP).arg(replica).arg("COUNT").arg(count.max(1));
        cmd.arg("BLOCK").arg(millis(block).max(1)).arg("STREAMS").arg(self.keys.outbox()).arg(">");
        let reply: Option<StreamReadReply> = self.redis.blocking("outbox_read", block, &cmd).await?;
        let ids = reply.into_iter().flat_map(|reply| reply.keys).flat_map(|key| key.ids).collect();
        Ok(self.entries(ids).await)
    }

    /// Takes back this replica's own entries `ids` (to hand them out again): those still
    /// pending, with their fields.
    pub async fn outbox_reclaim(&self, replica: &str, ids: &[String]) -> Result<Vec<OutboxEntry>, A2aError> {
        let cmd =
            redis::cmd("XCLAIM").arg(self.keys.outbox()).arg(GROUP).arg(replica).arg(0).arg(ids).to_owned();
        let reply: redis::streams::StreamClaimReply = self.redis.query("outbox_reclaim", &cmd).await?;
        Ok(self.entries(reply.ids).await)
    }

    /// Parses entries; one this code did not write is acknowledged and skipped.
    async fn entries(&self, ids: Vec<StreamId>) -> Vec<OutboxEntry> {
        let mut entries = Vec::new();
        let mut foreign = Vec::new();
        for id in ids {
            let task_id: Option<String> = id.get("t");
            let seq: Option<u64> = id.get("s");
            let owner = id.get::<String>("o").and_then(|oid| owner_from_id(&oid));
            let event = id.get::<Vec<u8>>("e").map(Bytes::from);
            match (task_id, seq, owner, event) {
                (Some(task_id), Some(seq), Some(owner), Some(event)) => {
                    entries.push(OutboxEntry { id: id.id, task_id, seq, owner, event })
                }
                _ => foreign.push(id.id),
            }
        }
        if !foreign.is_empty() {
            tracing::warn!(entries = foreign.len(), "push outbox entries this server did not write; skipped");
            let _ = self.outbox_done(&foreign).await;
        }
        entries
    }

    /// Acknowledges and deletes entries whose deliveries are over.
    pub async fn outbox_done(&self, ids: &[String]) -> Result<(), A2aError> {
        if ids.is_empty() {
            return Ok(());
        }
        let key = self.keys.outbox();
        let mut pipe = redis::pipe();
        pipe.cmd("XACK").arg(&key).arg(GROUP).arg(ids).ignore();
        pipe.cmd("XDEL").arg(&key).arg(ids).ignore();
        let mut conn = self.redis.conn();
        let limit = self.redis.timeouts().command;
        self.redis.run("outbox_done", limit, pipe.query_async::<()>(&mut conn)).await
    }
}
