//! Retention in Redis: which finished tasks the fleet keeps, and the evictor that lets the
//! others go, off the call path.
//!
//! A write that finishes a task notes it in `P:{finished}` (scored by finish time) and adds
//! its size to `P:{finished}:sizes` `#`, in the same step as the task (`scripts.rs` `note`),
//! and learns the fleet's count and bytes from the reply. Over a limit, it wakes this replica's
//! [`Retainer`] and answers its caller at once: eviction (a script popping the oldest, then
//! `UNLINK` of their keys and their index entries) runs in the background in rounds of
//! [`EVICT_BATCH`], so no call waits for it and no round stalls Redis for long. Expiry by age
//! is looked at once a [`AGE_TICK`]; ListTasks runs a round first, so it never shows an
//! expired task. The fleet may sit above a limit by what finishes between a wake and its
//! round (one round trip's worth of writes): the bound is kept within moments, not per call.
//!
//! # The member
//! `<owner id>/<task id>|<position>|<encoded context>|<size>`: the size, so eviction needs no
//! per-task sizes hash, and the task's place in its owner's indexes (final once finished), so
//! its entries go with native `ZREM`/`HDEL` and no read. Owner and task come first so tasks
//! finished in the same millisecond go in the order of their ids, as before. Members noted
//! before this format (`<owner id>/<task id>`, their size in the sizes hash) are still
//! evicted correctly: a new member is told by its 32-hex-digit position.
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::Notify;

use super::conn::{Part, Redis};
use super::keys::Keys;
use super::{millis, now_ms, scripts};
use crate::error::A2aError;
use crate::task::store::Retention;

/// Finished tasks evicted in one round at the most: a round's Redis work stays well under a
/// millisecond, and more wait for the next round.
const EVICT_BATCH: usize = 32;

/// Rounds one wake runs at the most before it waits again (32 × 64 = 2,048 tasks).
const MAX_ROUNDS: usize = 64;

/// How often each replica looks for tasks retention lets go by age.
const AGE_TICK: Duration = Duration::from_secs(5);

/// The retention member of a finished task; see the module doc.
pub(super) fn member(size: u64, position: &str, encoded_context: &str, oid: &str, task_id: &str) -> String {
    format!("{oid}/{task_id}|{position}|{encoded_context}|{size}")
}

/// What an evicted member names: owner, task, and (new members) its index position and context.
struct Evicted<'a> {
    oid: &'a str,
    task_id: &'a str,
    place: Option<(&'a str, &'a str)>,
}

fn parse(member: &str) -> Option<Evicted<'_>> {
    let mut fields = member.rsplitn(4, '|');
    let (size, context, position, rest) = (fields.next()?, fields.next(), fields.next(), fields.next());
    let digits = |text: &str, hex: bool| {
        text.bytes().all(|b| if hex { b.is_ascii_hexdigit() } else { b.is_ascii_digit() })
    };
    match (context, position, rest) {
        (Some(context), Some(position), Some(rest))
            if !size.is_empty() && digits(size, false) && position.len() == 32 && digits(position, true) =>
        {
            let (oid, task_id) = rest.split_once('/')?;
            Some(Evicted { oid, task_id, place: Some((position, context)) })
        }
        _ => {
            let (oid, task_id) = member.split_once('/')?;
            Some(Evicted { oid, task_id, place: None })
        }
    }
}

/// Who asks for a round, which decides how many expired tasks it waits for.
#[derive(Clone, Copy)]
pub(super) enum RetainFor {
    /// The evictor: evicting by age waits for 1/64 of the count limit to expire (rounds, not
    /// one per second per task; the keys expire by themselves meanwhile).
    Background,
    /// A read (ListTasks): every expired task goes now.
    Read,
}

impl RetainFor {
    fn age_slack(self, max_count: usize) -> usize {
        match self {
            Self::Background => (max_count / 64).max(1),
            Self::Read => 1,
        }
    }
}

/// This replica's share of retention: the limits, and the evictor's wake-up.
pub(super) struct Retainer {
    redis: Arc<Redis>,
    keys: Keys,
    retention: Retention,
    wake: Arc<Notify>,
}

impl Retainer {
    /// The retainer, with its evictor running until the store is dropped.
    pub(super) fn start(redis: Arc<Redis>, keys: Keys, retention: Retention) -> Arc<Self> {
        let wake = Arc::new(Notify::new());
        let retainer = Arc::new(Self { redis, keys, retention, wake: wake.clone() });
        tokio::spawn(evictor(Arc::downgrade(&retainer), wake));
        retainer
    }

    /// A write noted a finished task and the fleet now holds `count` of them, `bytes` in all:
    /// over a limit, the evictor runs (this call does not wait for it).
    pub(super) fn noted(&self, count: u64, bytes: i64) {
        let over_count = usize::try_from(count).map_or(true, |count| count > self.retention.max_finished);
        let over_bytes = usize::try_from(bytes).is_ok_and(|bytes| bytes > self.retention.max_bytes);
        if over_count || over_bytes {
            self.wake.notify_one();
        }
    }

    /// Runs rounds until one takes less than a full batch (at most [`MAX_ROUNDS`]).
    pub(super) async fn rounds(&self, why: RetainFor) -> Result<(), A2aError> {
        for _ in 0..MAX_ROUNDS {
            if self.round(why).await? < EVICT_BATCH {
                break;
            }
        }
        Ok(())
    }

    /// Runs one round: takes out what retention lets go now (at most [`EVICT_BATCH`]) and
    /// drops it; how many it took.
    async fn round(&self, why: RetainFor) -> Result<usize, A2aError> {
        let cutoff = now_ms().saturating_sub(millis(self.retention.max_age));
        let max_bytes = u64::try_from(self.retention.max_bytes).unwrap_or(u64::MAX).min(i64::MAX as u64);
        let mut evict = scripts::EVICT.prepare_invoke();
        evict.key(self.keys.finished()).key(self.keys.finished_sizes());
        evict.arg(cutoff).arg(self.retention.max_finished).arg(max_bytes).arg(EVICT_BATCH);
        evict.arg(why.age_slack(self.retention.max_finished));
        let mut conn = self.redis.conn();
        let limit = self.redis.timeouts().command;
        let members: Vec<String> = self.redis.run("evict", limit, evict.invoke_async(&mut conn)).await?;
        self.drop_members(&members).await?;
        Ok(members.len())
    }

    /// Deletes the keys and index entries of the finished tasks `members` name, in one round
    /// trip: one `UNLINK` (per task on a cluster, whose commands stay within a slot), and per
    /// owner native `ZREM`s and one `HDEL` (the `UNINDEX` script for members of the old form).
    async fn drop_members(&self, members: &[String]) -> Result<(), A2aError> {
        let evicted: Vec<Evicted<'_>> = members.iter().filter_map(|member| parse(member)).collect();
        if evicted.is_empty() {
            return Ok(());
        }
        let cluster = self.redis.is_cluster();
        let mut parts = Vec::new();
        let mut unlink = redis::cmd("UNLINK");
        for task in &evicted {
            let id = task.task_id;
            unlink.arg(self.keys.task(id)).arg(self.keys.events(id)).arg(self.keys.push(id));
            if cluster {
                parts.push(Part::Cmd(std::mem::replace(&mut unlink, redis::cmd("UNLINK"))));
            }
        }
        if !cluster {
            parts.push(Part::Cmd(unlink));
        }
        let mut by_owner: HashMap<&str, Vec<&Evicted<'_>>> = HashMap::new();
        for task in &evicted {
            by_owner.entry(task.oid).or_default().push(task);
        }
        for (oid, tasks) in by_owner {
            self.unindex_parts(oid, &tasks, &mut parts);
        }
        self.redis.together("evict_drop", parts).await.map(drop)
    }

    /// One owner's index removals for evicted `tasks`.
    fn unindex_parts<'a>(&self, oid: &str, tasks: &[&Evicted<'_>], parts: &mut Vec<Part<'a>>) {
        let mut all = redis::cmd("ZREM");
        all.arg(self.keys.owner_index(oid));
        let mut meta = redis::cmd("HDEL");
        meta.arg(self.keys.owner_meta(oid));
        let mut contexts: HashMap<&str, redis::Cmd> = HashMap::new();
        let mut old = scripts::UNINDEX.prepare_invoke();
        old.key(self.keys.owner_index(oid))
            .key(self.keys.owner_meta(oid))
            .arg(self.keys.context_index_prefix(oid));
        let (mut placed, mut unplaced) = (0, 0);
        for task in tasks {
            match task.place {
                Some((position, context)) => {
                    let entry = format!("{position}:{}", task.task_id);
                    let key = format!("{}{context}", self.keys.context_index_prefix(oid));
                    contexts
                        .entry(context)
                        .or_insert_with(|| redis::cmd("ZREM").arg(key).to_owned())
                        .arg(&entry);
                    all.arg(entry);
                    meta.arg(task.task_id);
                    placed += 1;
                }
                None => {
                    old.arg(task.task_id).arg("");
                    unplaced += 1;
                }
            }
        }
        if placed > 0 {
            parts.extend([Part::Cmd(all), Part::Cmd(meta)]);
            parts.extend(contexts.into_values().map(Part::Cmd));
        }
        if unplaced > 0 {
            parts.push(Part::Script(&scripts::UNINDEX, old));
        }
    }
}

/// The evictor: a round whenever a write finds the fleet over a limit, and once a
/// [`AGE_TICK`] for age; as many rounds as it takes (up to [`MAX_ROUNDS`]). Ends with its
/// store.
async fn evictor(retainer: Weak<Retainer>, wake: Arc<Notify>) {
    loop {
        tokio::select! {
            () = wake.notified() => {}
            () = tokio::time::sleep(AGE_TICK) => {}
        }
        let Some(retainer) = retainer.upgrade() else { return };
        if let Err(error) = retainer.rounds(RetainFor::Background).await {
            tracing::debug!(%error, "retention round failed; the next tick tries again");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_name_their_task_and_place_in_either_form() {
        let position = "0123456789abcdef0123456789abcdef";
        let new = member(1234, position, "ctx%2F1", "t:alice", "task|1/x");
        let parsed = parse(&new).expect("a member");
        assert_eq!(
            (parsed.oid, parsed.task_id, parsed.place),
            ("t:alice", "task|1/x", Some((position, "ctx%2F1")))
        );
        let old = parse("t:alice/task|1").expect("an old member");
        assert_eq!((old.oid, old.task_id, old.place), ("t:alice", "task|1", None));
        assert!(parse("garbage").is_none());
    }
}
