//! Retention in Redis: which finished tasks the fleet keeps, and the evictor that lets the
//! others go, off the call path.
//!
//! A write that finishes a task notes it in its piece of the retention set (`P:{finished}` on
//! a single node; one of [`crate::task::store::redis::CLUSTER_SHARDS`] pieces on a cluster,
//! `keys.rs` "Shards"), scored by finish time, and adds its size to the piece's `sizes` `#`,
//! in the same step as the task (`scripts.rs` `note`); the reply says what the piece holds,
//! from which the write estimates the fleet's count and bytes. Over a limit, it wakes this
//! replica's [`Retainer`] and answers its caller at once. Eviction runs in the background in
//! rounds of [`EVICT_BATCH`], so no call waits for it and no round stalls Redis for long:
//! a round looks at every piece (its count, bytes, expired count and, when some are known to
//! go, its oldest members: native reads, all pieces in one round trip), chooses the fleet's
//! oldest that retention lets go ([`choose`]: the limits hold fleet-wide, exactly, however
//! many pieces), and in one more round trip takes them out of their pieces (a script that
//! removes only members still there and counts only their bytes, so two replicas evicting at
//! once never count one task twice) and `UNLINK`s their keys, records and index entries. Two
//! round trips a round keep up with one replica's full unary load (at the 10,000 cap, 10,023
//! tasks held after 4 s of it; with four round trips a round the fleet held 28,000 and
//! growing). Expiry by age is looked at once a [`AGE_TICK`]; ListTasks runs a round first, so
//! it never shows an expired task. The fleet may sit above a limit by what finishes between a
//! wake and its round: the bound is kept within moments, not per call.
//!
//! # The member
//! `<owner id>/<task id>|<position>|<encoded context>|<size>`: the size, so eviction needs no
//! per-task sizes hash, and the task's place in its owner's indexes (final once finished), so
//! its entries go with native `ZREM`/`HDEL` and no read. The context is empty when the task
//! opened it: such a task has no context index entry (`keys.rs` `indexes_context`), and a
//! `ZREM` of a key that does not exist still costs Redis a command per evicted task. Owner and
//! task come first so tasks finished in the same millisecond go in the order of their ids, as
//! before. Members noted before this format (`<owner id>/<task id>`, their size in the sizes
//! hash) are still evicted correctly: a new member is told by its 32-hex-digit position.
//!
//! A task's context is followed by `&<encoded messageId>`: the SendMessage record of the
//! message that made it (`sent.rs`) goes with the task (`member.rs` says why there). A direct
//! reply's record, which no task takes along, and a follow-up's (its task's member names only
//! the message that made it) are noted as a member without a task,
//! `<owner id>/|<position>|&<encoded messageId>|<size>`, in a set of their own (`P:{records}`,
//! [`Holds::Records`]) under the same limits, counted apart from the tasks as in memory. Records
//! would otherwise stay for the whole retention age, one per call however few tasks retention
//! keeps (measured: 52,000 records beside 11,000 tasks after 4 s of load); a retry after its
//! task left retention runs anew either way (docs/FLEET.md, "Idempotent SendMessage").
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::Notify;

use super::conn::{Part, Redis};
use super::keys::{Keys, Shard};
use super::{millis, now_ms, scripts, unindex_invocation};
use crate::error::A2aError;
use crate::task::store::Retention;

mod choice;
mod member;

pub(super) use choice::RetainFor;
use choice::{Look, choose, malformed, wanted};
use member::{Evicted, parse};
pub(super) use member::{made_by, member};

/// Finished tasks evicted in one round at the most: a round's Redis work stays well under a
/// millisecond, and more wait for the next round.
const EVICT_BATCH: usize = 32;

/// Rounds one wake runs at the most before it waits again (32 × 64 = 2,048 tasks).
const MAX_ROUNDS: usize = 64;

/// Looks at the pieces' oldest members a round takes at the most (each doubles how many it
/// reads of a piece still used up: 3, 6, …, the batch).
const LOOKS: usize = 6;

/// How often each replica looks for tasks retention lets go by age.
const AGE_TICK: Duration = Duration::from_secs(5);

/// The least time between two rounds for room (`full.rs`), so refusals for memory that keep
/// coming (Redis frees large values in the background) drop at most a batch per this, per
/// replica: ~1,600 tasks a second.
const ROOM_GAP: Duration = Duration::from_millis(20);

/// How long refusals for memory are not answered with a round after one that found no finished
/// task to drop (Redis is full of live tasks or of other data: nothing here can make room).
const ROOM_NONE_LEFT: Duration = Duration::from_secs(1);

/// What a retention set holds. The records no task takes along (a direct reply's, a
/// follow-up's) are counted apart from the finished tasks, as the memory store counts them
/// (`memory/sent.rs`): in one count, a conversation of n turns took n places of retention's,
/// and a store of long conversations kept a fraction of the tasks it was told to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Holds {
    /// Finished tasks (`P:{finished}`), with the records of the messages that made them.
    Tasks,
    /// SendMessage records on their own (`P:{records}`).
    Records,
}

/// This replica's share of retention: the limits, and the evictor's wake-up.
pub(super) struct Retainer {
    redis: Arc<Redis>,
    keys: Keys,
    retention: Retention,
    /// What the set holds, and its pieces.
    holds: Holds,
    pieces: Vec<Shard>,
    /// The fleet's finished tasks and their bytes as this replica's last round counted them,
    /// plus what it noted since: with pieces, a write's reply tells only its own piece.
    counted: (AtomicU64, AtomicI64),
    /// A write found the fleet over a limit since the last look began. A wake whose every
    /// such write a look has seen since (the rounds it set off have run) looks no more: under
    /// load, writes during the rounds left a wake behind them, and each such look found
    /// nothing to take (measured: 2.2 looks per take).
    over: AtomicBool,
    wake: Arc<Notify>,
}

impl Retainer {
    /// The retainer of the set that `holds` what it says, with its evictor running until the
    /// store is dropped.
    pub(super) fn start(redis: Arc<Redis>, keys: Keys, retention: Retention, holds: Holds) -> Arc<Self> {
        let wake = Arc::new(Notify::new());
        let room = redis.room_wanted();
        let pieces = match holds {
            Holds::Tasks => keys.finished_shards(),
            Holds::Records => keys.records_shards(),
        };
        let counted = (AtomicU64::new(0), AtomicI64::new(0));
        let over = AtomicBool::new(false);
        let wake_up = wake.clone();
        let retainer = Arc::new(Self { redis, keys, retention, holds, pieces, counted, over, wake: wake_up });
        tokio::spawn(evictor(Arc::downgrade(&retainer), wake, room));
        retainer
    }

    /// The piece of this set that the member of `id` (a task's id, or a record's `messageId`)
    /// goes in.
    pub(super) fn piece_of(&self, id: &str) -> Shard {
        match self.holds {
            Holds::Tasks => self.keys.finished_shard(id),
            Holds::Records => self.keys.records_shard(id),
        }
    }

    /// The name of this evictor's round trips in metrics and logs.
    fn op(&self) -> &'static str {
        match self.holds {
            Holds::Tasks => "evict",
            Holds::Records => "evict_records",
        }
    }

    /// A write noted `tasks` finished tasks of `size` bytes in all, and their piece of the
    /// retention set now holds `count` of them, `bytes` in all. If the fleet is over a limit by
    /// either estimate (that many in every piece, as tasks spread evenly; or what this replica
    /// counted), the evictor runs, which counts exactly; this call does not wait for it. With one
    /// piece the first estimate is exact.
    pub(super) fn noted(&self, tasks: u64, count: u64, bytes: i64, size: u64) {
        let pieces = self.pieces.len() as u64;
        let size = i64::try_from(size).unwrap_or(i64::MAX);
        let here = (
            self.counted.0.fetch_add(tasks, Ordering::Relaxed).saturating_add(tasks),
            self.counted.1.fetch_add(size, Ordering::Relaxed).saturating_add(size),
        );
        let count = count.saturating_mul(pieces).max(here.0);
        let bytes = bytes.saturating_mul(pieces as i64).max(here.1);
        let over_count = usize::try_from(count).map_or(true, |count| count > self.retention.max_finished);
        let over_bytes = usize::try_from(bytes).is_ok_and(|bytes| bytes > self.retention.max_bytes);
        if over_count || over_bytes {
            // The flag before the wake: a wake never finds it unset for a write not yet looked at.
            self.over.store(true, Ordering::SeqCst);
            self.wake.notify_one();
        }
    }

    /// Runs rounds until one takes less than a full batch (at most [`MAX_ROUNDS`]).
    pub(super) async fn rounds(&self, why: RetainFor) -> Result<(), A2aError> {
        let mut eager = matches!(why, RetainFor::Over);
        for _ in 0..MAX_ROUNDS {
            if self.round(why, eager).await? < EVICT_BATCH {
                break;
            }
            // A full batch went: the next round has some to take too.
            eager = true;
        }
        Ok(())
    }

    /// Runs one round: takes out what retention lets go now (at most [`EVICT_BATCH`]) and
    /// drops it; how many it took. `eager`: some are known to go, so the first look reads the
    /// oldest members with the counts.
    async fn round(&self, why: RetainFor, eager: bool) -> Result<usize, A2aError> {
        let cutoff = now_ms().saturating_sub(millis(self.retention.max_age));
        // Counts first (a few bytes per piece); the oldest members only if some must go.
        let every: Vec<usize> = (0..self.pieces.len()).collect();
        // Every write that found the fleet over before this is in what the look reads.
        self.over.store(false, Ordering::SeqCst);
        let first = if eager { (EVICT_BATCH.div_ceil(every.len()) + 1).min(EVICT_BATCH) } else { 0 };
        let mut looks = self.look(cutoff, &every, first).await?;
        let Some(candidates) = wanted(&looks, &self.retention, why) else {
            self.recount(&looks, &[]);
            return Ok(0);
        };
        // The fleet's oldest, without reading `candidates` members of every piece: a few of
        // each (tasks spread evenly), then more of each piece whose every member shown was
        // chosen (its next one may be older than the cut); the others' unread members are
        // newer than the cut, so the choice is exact once no piece is used up.
        let mut asked = vec![first; looks.len()];
        let mut n = if first == 0 { (candidates.div_ceil(looks.len()) + 1).min(candidates) } else { first };
        for look in 0..=LOOKS {
            let chosen = choose(&looks, &self.retention, why);
            let used_up = |i: &usize| {
                let (look, shown) = (&looks[*i], looks[*i].oldest.len());
                asked[*i] < candidates && look.count as usize > shown && chosen[*i].len() == shown
            };
            let need: Vec<usize> = (0..looks.len()).filter(used_up).collect();
            if need.is_empty() || look == LOOKS {
                break;
            }
            if asked[need[0]] > 0 {
                n = (n * 2).min(candidates);
            }
            for (i, look) in need.iter().zip(self.look(cutoff, &need, n).await?) {
                (looks[*i], asked[*i]) = (look, n);
            }
        }
        let chosen = choose(&looks, &self.retention, why);
        self.recount(&looks, &chosen);
        // The take and the drop in one round trip: the drop does not wait to hear which
        // members the take found. One another replica's evictor took meanwhile is dropped by
        // both, which is harmless (unlinks and removals of what is gone); the bytes, the one
        // thing not to count twice, are counted by the take alone.
        let mut parts = Vec::new();
        let mut all = Vec::new();
        for (piece, members) in self.pieces.iter().zip(chosen).filter(|(_, m)| !m.is_empty()) {
            let mut take = scripts::TAKE.prepare_invoke();
            take.key(self.keys.finished(piece)).key(self.keys.finished_sizes(piece));
            for (member, size) in members {
                let in_sizes = parse(&member).is_none_or(|evicted| evicted.size.is_none());
                take.arg(&member).arg(size).arg(if in_sizes { "1" } else { "0" });
                all.push(member);
            }
            parts.push(Part::Script(&scripts::TAKE, take));
        }
        if parts.is_empty() {
            return Ok(0);
        }
        let takes = parts.len();
        self.drop_parts(&all, &mut parts);
        let replies = self.redis.together(self.op(), parts).await?;
        let taken: usize = replies
            .into_iter()
            .take(takes)
            .map(redis::from_redis_value::<Vec<String>>)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| A2aError::Internal(format!("retention reply: {e}")))?
            .iter()
            .map(Vec::len)
            .sum();
        Ok(taken)
    }

    /// Notes what the fleet holds once `chosen` are gone, as seen by `looks`: the base that
    /// [`Retainer::noted`] adds this replica's writes to.
    fn recount(&self, looks: &[Look], chosen: &[Vec<(String, i64)>]) {
        let count: u64 = looks.iter().map(|l| l.count).sum();
        let bytes: i64 = looks.iter().map(|l| l.bytes).sum();
        let freed: i64 = chosen.iter().flatten().map(|(_, size)| size).sum();
        let gone = chosen.iter().map(Vec::len).sum::<usize>() as u64;
        self.counted.0.store(count.saturating_sub(gone), Ordering::Relaxed);
        self.counted.1.store(bytes.saturating_sub(freed), Ordering::Relaxed);
    }

    /// What the `pieces` (indexes) of the retention set hold, with their `oldest` members, in
    /// one round trip of native commands: no script, since nothing here needs to be one step
    /// (the take checks every member again). Sizes come from the members; a member of the old
    /// form has its size in the sizes hash, read in a second round trip (rare: only tasks
    /// noted before members carried their size).
    async fn look(&self, cutoff: u64, pieces: &[usize], oldest: usize) -> Result<Vec<Look>, A2aError> {
        // One piece: Redis's order is the fleet's, and a score costs Redis a float's formatting.
        let scored = self.pieces.len() > 1;
        let mut parts = Vec::new();
        for &i in pieces {
            let (set, sizes) =
                (self.keys.finished(&self.pieces[i]), self.keys.finished_sizes(&self.pieces[i]));
            parts.push(Part::Cmd(redis::cmd("ZCARD").arg(&set).to_owned()));
            parts.push(Part::Cmd(redis::cmd("HGET").arg(sizes).arg("#").to_owned()));
            parts.push(Part::Cmd(
                redis::cmd("ZCOUNT").arg(&set).arg("-inf").arg(format!("({cutoff}")).to_owned(),
            ));
            if oldest > 0 {
                let mut zrange = redis::cmd("ZRANGE");
                zrange.arg(&set).arg(0).arg(oldest - 1);
                if scored {
                    zrange.arg("WITHSCORES");
                }
                parts.push(Part::Cmd(zrange));
            }
        }
        let mut replies = self.redis.together(self.op(), parts).await?.into_iter();
        let mut looks = Vec::with_capacity(pieces.len());
        for &i in pieces {
            let (count, bytes, expired) = (replies.next(), replies.next(), replies.next());
            let members = if oldest > 0 { replies.next() } else { None };
            let (mut look, old_form) = Look::parse(count, bytes, expired, members, scored)?;
            if !old_form.is_empty() {
                let mut hmget = redis::cmd("HMGET");
                hmget.arg(self.keys.finished_sizes(&self.pieces[i]));
                for &at in &old_form {
                    hmget.arg(&look.oldest[at].1);
                }
                let reply = self.redis.together(self.op(), vec![Part::Cmd(hmget)]).await?;
                let sizes: Vec<Option<i64>> = reply
                    .into_iter()
                    .next()
                    .map(redis::from_redis_value)
                    .transpose()
                    .map_err(|e| malformed(&e.to_string()))?
                    .unwrap_or_default();
                for (at, size) in old_form.into_iter().zip(sizes) {
                    look.oldest[at].2 = size.unwrap_or(0);
                }
            }
            looks.push(look);
        }
        Ok(looks)
    }

    /// Adds to `parts` what deletes the keys, SendMessage records and index entries of the
    /// finished tasks `members` name: one `UNLINK` (per key group on a cluster, whose commands
    /// stay within a slot), and per owner native `ZREM`s and one `HDEL` (the `UNINDEX` script
    /// for members of the old form).
    fn drop_parts(&self, members: &[String], parts: &mut Vec<Part<'_>>) {
        let evicted: Vec<Evicted<'_>> = members.iter().filter_map(|member| parse(member)).collect();
        if evicted.is_empty() {
            return;
        }
        let cluster = self.redis.is_cluster();
        let mut unlink = redis::cmd("UNLINK");
        for task in &evicted {
            // A direct reply's member names no task, only its record.
            let id = task.task_id;
            if !id.is_empty() {
                unlink.arg(self.keys.task(id)).arg(self.keys.events(id)).arg(self.keys.push(id));
                if cluster {
                    parts.push(Part::Cmd(std::mem::replace(&mut unlink, redis::cmd("UNLINK"))));
                }
            }
            // The record is in the owner's slot, not the task's: a command of its own there.
            if let Some(sent) = task.sent {
                let key = self.keys.sent_encoded(task.oid, sent);
                if cluster {
                    parts.push(Part::Cmd(redis::cmd("UNLINK").arg(key).to_owned()));
                } else {
                    unlink.arg(key);
                }
            }
        }
        // (The command's name is its first argument.)
        if !cluster && unlink.args_iter().count() > 1 {
            parts.push(Part::Cmd(unlink));
        }
        let mut by_shard: HashMap<Shard, Vec<&Evicted<'_>>> = HashMap::new();
        for task in evicted.iter().filter(|task| !task.task_id.is_empty()) {
            by_shard.entry(self.keys.owner_shard(task.oid, task.task_id)).or_default().push(task);
        }
        for (shard, tasks) in by_shard {
            self.unindex_parts(&shard, &tasks, parts);
        }
    }

    /// The index removals for evicted `tasks`, all in one piece of one owner's indexes.
    fn unindex_parts<'a>(&self, shard: &Shard, tasks: &[&Evicted<'_>], parts: &mut Vec<Part<'a>>) {
        let mut all = redis::cmd("ZREM");
        all.arg(self.keys.owner_index(shard));
        let mut meta = redis::cmd("HDEL");
        meta.arg(self.keys.owner_meta(shard));
        let mut contexts: HashMap<&str, redis::Cmd> = HashMap::new();
        let mut unplaced = Vec::new();
        let mut placed = 0;
        for task in tasks {
            match task.place {
                Some((position, context)) => {
                    let entry = format!("{position}:{}", task.task_id);
                    // An empty context: the task opened it and has no entry there.
                    if !context.is_empty() {
                        let key = format!("{}{context}", self.keys.context_index_prefix(shard));
                        contexts
                            .entry(context)
                            .or_insert_with(|| redis::cmd("ZREM").arg(key).to_owned())
                            .arg(&entry);
                    }
                    all.arg(entry);
                    meta.arg(task.task_id);
                    placed += 1;
                }
                None => unplaced.push((task.task_id, "")),
            }
        }
        if placed > 0 {
            parts.extend([Part::Cmd(all), Part::Cmd(meta)]);
            parts.extend(contexts.into_values().map(Part::Cmd));
        }
        if !unplaced.is_empty() {
            parts.push(Part::Script(&scripts::UNINDEX, unindex_invocation(&self.keys, shard, unplaced)));
        }
    }
}

/// The evictor: a round whenever a write finds the fleet over a limit, and once a
/// [`AGE_TICK`] for age; as many rounds as it takes (up to [`MAX_ROUNDS`]). One round for
/// `room` whenever Redis refused a write for memory (`full.rs`), then a pause: [`ROOM_GAP`],
/// or [`ROOM_NONE_LEFT`] if nothing was left to drop (the refusals meanwhile ask for one more
/// round, not one each). Ends with its store.
async fn evictor(retainer: Weak<Retainer>, wake: Arc<Notify>, room: Arc<Notify>) {
    loop {
        let why = tokio::select! {
            () = room.notified() => RetainFor::Room,
            () = wake.notified() => RetainFor::Over,
            () = tokio::time::sleep(AGE_TICK) => RetainFor::Background,
        };
        let Some(retainer) = retainer.upgrade() else { return };
        if matches!(why, RetainFor::Over) && !retainer.over.load(Ordering::SeqCst) {
            continue;
        }
        if matches!(why, RetainFor::Room) {
            let pause = match retainer.round(why, true).await {
                Ok(0) => {
                    if retainer.holds == Holds::Tasks {
                        tracing::warn!("Redis is out of memory and no finished task is left to drop");
                    }
                    ROOM_NONE_LEFT
                }
                Ok(_) => ROOM_GAP,
                Err(error) => {
                    tracing::debug!(%error, "retention round for room failed");
                    ROOM_GAP
                }
            };
            drop(retainer);
            tokio::time::sleep(pause).await;
            continue;
        }
        if let Err(error) = retainer.rounds(why).await {
            tracing::debug!(%error, "retention round failed; the next tick tries again");
        }
    }
}
