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
//! a round looks at every piece (its count, bytes, expired count and oldest members, one
//! script per piece, all in one round trip), chooses the fleet's oldest that retention lets go
//! ([`choose`]: the limits hold fleet-wide, exactly, however many pieces), takes them out of
//! their pieces (a script that removes only members still there, so two replicas evicting at
//! once never both drop one task), then `UNLINK`s their keys and their index entries. Expiry
//! by age is looked at once a [`AGE_TICK`]; ListTasks runs a round first, so it never shows an
//! expired task. The fleet may sit above a limit by what finishes between a wake and its
//! round (a couple of round trips' worth of writes): the bound is kept within moments, not
//! per call.
//!
//! # The member
//! `<owner id>/<task id>|<position>|<encoded context>|<size>`: the size, so eviction needs no
//! per-task sizes hash, and the task's place in its owner's indexes (final once finished), so
//! its entries go with native `ZREM`/`HDEL` and no read. Owner and task come first so tasks
//! finished in the same millisecond go in the order of their ids, as before. Members noted
//! before this format (`<owner id>/<task id>`, their size in the sizes hash) are still
//! evicted correctly: a new member is told by its 32-hex-digit position.
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::Notify;

use redis::Value;

use super::conn::{Part, Redis};
use super::keys::{Keys, Shard};
use super::{millis, now_ms, scripts, unindex_invocation};
use crate::error::A2aError;
use crate::task::store::Retention;

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
    /// The pieces of the retention set.
    pieces: Vec<Shard>,
    /// The fleet's finished tasks and their bytes as this replica's last round counted them,
    /// plus what it noted since: with pieces, a write's reply tells only its own piece.
    counted: (AtomicU64, AtomicI64),
    wake: Arc<Notify>,
}

impl Retainer {
    /// The retainer, with its evictor running until the store is dropped.
    pub(super) fn start(redis: Arc<Redis>, keys: Keys, retention: Retention) -> Arc<Self> {
        let wake = Arc::new(Notify::new());
        let pieces = keys.finished_shards();
        let counted = (AtomicU64::new(0), AtomicI64::new(0));
        let retainer = Arc::new(Self { redis, keys, retention, pieces, counted, wake: wake.clone() });
        tokio::spawn(evictor(Arc::downgrade(&retainer), wake));
        retainer
    }

    /// A write noted a finished task of `size` bytes, and its piece of the retention set now
    /// holds `count` of them, `bytes` in all. If the fleet is over a limit by either estimate
    /// (that many in every piece, as tasks spread evenly; or what this replica counted), the
    /// evictor runs, which counts exactly; this call does not wait for it. With one piece the
    /// first estimate is exact.
    pub(super) fn noted(&self, count: u64, bytes: i64, size: u64) {
        let pieces = self.pieces.len() as u64;
        let size = i64::try_from(size).unwrap_or(i64::MAX);
        let here = (
            self.counted.0.fetch_add(1, Ordering::Relaxed).saturating_add(1),
            self.counted.1.fetch_add(size, Ordering::Relaxed).saturating_add(size),
        );
        let count = count.saturating_mul(pieces).max(here.0);
        let bytes = bytes.saturating_mul(pieces as i64).max(here.1);
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
        // Counts first (a few bytes per piece); the oldest members only if some must go.
        let every: Vec<usize> = (0..self.pieces.len()).collect();
        let mut looks = self.look(cutoff, &every, 0).await?;
        let Some(candidates) = wanted(&looks, &self.retention, why) else {
            self.recount(&looks, &[]);
            return Ok(0);
        };
        // The fleet's oldest, without reading `candidates` members of every piece: a few of
        // each (tasks spread evenly), then more of each piece whose every member shown was
        // chosen (its next one may be older than the cut); the others' unread members are
        // newer than the cut, so the choice is exact once no piece is used up.
        let mut asked = vec![0; looks.len()];
        let mut need: Vec<usize> = every.into_iter().filter(|&i| looks[i].count > 0).collect();
        let mut n = (candidates.div_ceil(looks.len()) + 1).min(candidates);
        for _ in 0..LOOKS {
            if need.is_empty() {
                break;
            }
            for (i, look) in need.iter().zip(self.look(cutoff, &need, n).await?) {
                (looks[*i], asked[*i]) = (look, n);
            }
            let chosen = choose(&looks, &self.retention, why);
            let used_up = |i: &usize| {
                let (look, shown) = (&looks[*i], looks[*i].oldest.len());
                asked[*i] < candidates && look.count as usize > shown && chosen[*i].len() == shown
            };
            need = (0..looks.len()).filter(used_up).collect();
            n = (n * 2).min(candidates);
        }
        let chosen = choose(&looks, &self.retention, why);
        self.recount(&looks, &chosen);
        let mut takes = Vec::new();
        for (piece, members) in self.pieces.iter().zip(chosen).filter(|(_, m)| !m.is_empty()) {
            let mut take = scripts::TAKE.prepare_invoke();
            take.key(self.keys.finished(piece)).key(self.keys.finished_sizes(piece));
            for (member, _) in members {
                take.arg(member);
            }
            takes.push(Part::Script(&scripts::TAKE, take));
        }
        if takes.is_empty() {
            return Ok(0);
        }
        let taken = self.redis.together("evict", takes).await?;
        let members: Vec<String> = taken
            .into_iter()
            .map(redis::from_redis_value::<Vec<String>>)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| A2aError::Internal(format!("retention reply: {e}")))?
            .concat();
        self.drop_members(&members).await?;
        Ok(members.len())
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
    /// one round trip.
    async fn look(&self, cutoff: u64, pieces: &[usize], oldest: usize) -> Result<Vec<Look>, A2aError> {
        let parts = pieces.iter().map(|&i| {
            let piece = &self.pieces[i];
            let mut peek = scripts::PEEK.prepare_invoke();
            peek.key(self.keys.finished(piece)).key(self.keys.finished_sizes(piece));
            peek.arg(cutoff).arg(oldest);
            Part::Script(&scripts::PEEK, peek)
        });
        let replies = self.redis.together("evict", parts.collect()).await?;
        replies.into_iter().map(Look::parse).collect()
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
        let mut by_shard: HashMap<Shard, Vec<&Evicted<'_>>> = HashMap::new();
        for task in &evicted {
            by_shard.entry(self.keys.owner_shard(task.oid, task.task_id)).or_default().push(task);
        }
        for (shard, tasks) in by_shard {
            self.unindex_parts(&shard, &tasks, &mut parts);
        }
        self.redis.together("evict_drop", parts).await.map(drop)
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
                    let key = format!("{}{context}", self.keys.context_index_prefix(shard));
                    contexts
                        .entry(context)
                        .or_insert_with(|| redis::cmd("ZREM").arg(key).to_owned())
                        .arg(&entry);
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

/// What a round saw in one piece of the retention set ([`scripts::PEEK`]).
struct Look {
    count: u64,
    bytes: i64,
    /// Members older than the retention age.
    expired: u64,
    /// The oldest members: (score, member, size), oldest first.
    oldest: Vec<(f64, String, i64)>,
}

impl Look {
    fn parse(reply: Value) -> Result<Self, A2aError> {
        let malformed =
            |what: &str| A2aError::Internal(format!("malformed retention reply from Redis: {what}"));
        let values: Vec<Value> = redis::from_redis_value(reply).map_err(|e| malformed(&e.to_string()))?;
        let int = |value: &Value| {
            redis::from_redis_value::<i64>(value.clone()).map_err(|e| malformed(&e.to_string()))
        };
        let [count, bytes, expired, rest @ ..] = values.as_slice() else {
            return Err(malformed("too short"));
        };
        let mut oldest = Vec::new();
        for entry in rest.chunks(3) {
            let [member, score, size] = entry else { return Err(malformed("a partial member")) };
            let member: String =
                redis::from_redis_value(member.clone()).map_err(|e| malformed(&e.to_string()))?;
            let score: f64 = redis::from_redis_value(score.clone()).map_err(|e| malformed(&e.to_string()))?;
            oldest.push((score, member, int(size)?));
        }
        let count = u64::try_from(int(count)?).unwrap_or(0);
        let expired = u64::try_from(int(expired)?).unwrap_or(0);
        Ok(Self { count, bytes: int(bytes)?, expired, oldest })
    }
}

/// The fleet's totals from every piece, and what retention keeps of them: (count, bytes,
/// expired that may go now, count to keep, bytes to keep). Over the count or the bytes,
/// eviction goes to 1/64 below the limit, so it comes in batches, not one task per finished
/// task; expired tasks go once there are enough of them for `why`.
fn limits(looks: &[Look], retention: &Retention, why: RetainFor) -> (u64, i64, u64, u64, i64) {
    let count: u64 = looks.iter().map(|l| l.count).sum();
    let bytes: i64 = looks.iter().map(|l| l.bytes).sum();
    let expired: u64 = looks.iter().map(|l| l.expired).sum();
    let max_count = retention.max_finished as u64;
    let max_bytes = i64::try_from(retention.max_bytes).unwrap_or(i64::MAX);
    let (keep_count, keep_bytes) = if count > max_count || bytes > max_bytes {
        (max_count - max_count / 64, max_bytes - max_bytes / 64)
    } else {
        (count, bytes)
    };
    let expired = if expired < why.age_slack(retention.max_finished) as u64 { 0 } else { expired };
    (count, bytes, expired, keep_count, keep_bytes)
}

/// How many of its oldest members each piece must show for [`choose`] to find the fleet's
/// oldest that go this round; `None` if none go.
fn wanted(looks: &[Look], retention: &Retention, why: RetainFor) -> Option<usize> {
    let (count, bytes, expired, keep_count, keep_bytes) = limits(looks, retention, why);
    let want = (count.saturating_sub(keep_count).max(expired) as usize).min(EVICT_BATCH);
    match (want, bytes > keep_bytes) {
        (_, true) => Some(EVICT_BATCH),
        (0, false) => None,
        (want, false) => Some(want),
    }
}

/// Which members each piece gives up this round (with their sizes): the fleet's oldest, as
/// many as the count limit and the expired ones call for, then as the bytes limit does, at
/// most [`EVICT_BATCH`] (see [`limits`]).
fn choose(looks: &[Look], retention: &Retention, why: RetainFor) -> Vec<Vec<(String, i64)>> {
    let (count, mut bytes, expired, keep_count, keep_bytes) = limits(looks, retention, why);
    let want = (count.saturating_sub(keep_count).max(expired) as usize).min(EVICT_BATCH);
    let mut candidates: Vec<(usize, &(f64, String, i64))> = looks
        .iter()
        .enumerate()
        .flat_map(|(piece, look)| look.oldest.iter().map(move |c| (piece, c)))
        .collect();
    candidates.sort_by(|(_, a), (_, b)| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    let mut chosen = vec![Vec::new(); looks.len()];
    for (taken, (piece, (_, member, size))) in candidates.into_iter().enumerate() {
        if taken >= EVICT_BATCH || (taken >= want && bytes <= keep_bytes) {
            break;
        }
        bytes -= size;
        chosen[piece].push((member.clone(), *size));
    }
    chosen
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

    fn look(count: u64, expired: u64, oldest: &[(f64, &str, i64)]) -> Look {
        let bytes = oldest.iter().map(|(_, _, size)| size).sum();
        let oldest =
            oldest.iter().map(|(score, member, size)| (*score, (*member).to_owned(), *size)).collect();
        Look { count, bytes, expired, oldest }
    }

    fn names(chosen: &[Vec<(String, i64)>]) -> Vec<Vec<&str>> {
        chosen.iter().map(|piece| piece.iter().map(|(m, _)| m.as_str()).collect()).collect()
    }

    #[test]
    fn the_fleets_oldest_go_first_across_pieces() {
        let keep = Retention { max_finished: 3, max_age: Duration::from_secs(3600), max_bytes: 1 << 30 };
        let looks = [
            look(3, 0, &[(1.0, "a", 10), (4.0, "d", 10), (6.0, "f", 10)]),
            look(2, 0, &[(2.0, "b", 10), (5.0, "e", 10)]),
            look(0, 0, &[]),
        ];
        // Five held, three kept: the two oldest of the fleet, whatever piece they are in.
        assert_eq!(names(&choose(&looks, &keep, RetainFor::Read)), [vec!["a"], vec!["b"], vec![]]);
        let roomy = Retention { max_finished: 5, ..keep };
        assert!(choose(&looks, &roomy, RetainFor::Read).iter().all(Vec::is_empty), "within the limits");
        // By bytes: 50 held, room for 30 (less 1/64, so 29): the three oldest.
        let bytes = Retention { max_finished: 100, max_bytes: 30, ..keep };
        assert_eq!(names(&choose(&looks, &bytes, RetainFor::Read)), [vec!["a"], vec!["b"], vec![]]);
        let bytes = Retention { max_bytes: 29, ..bytes };
        assert_eq!(names(&choose(&looks, &bytes, RetainFor::Read)), [vec!["a", "d"], vec!["b"], vec![]]);
    }

    #[test]
    fn expired_tasks_go_when_enough_of_them_wait() {
        let retention = Retention { max_finished: 640, max_age: Duration::from_secs(1), max_bytes: 1 << 30 };
        let looks = [look(2, 1, &[(1.0, "a", 1), (9.0, "z", 1)]), look(1, 1, &[(2.0, "b", 1)])];
        // A read takes every expired one; the background evictor waits for 640/64 of them.
        assert_eq!(names(&choose(&looks, &retention, RetainFor::Read)), [vec!["a"], vec!["b"]]);
        assert!(choose(&looks, &retention, RetainFor::Background).iter().all(Vec::is_empty));
    }

    #[test]
    fn a_round_takes_one_batch_at_most() {
        let retention = Retention { max_finished: 1, max_age: Duration::from_secs(3600), max_bytes: 1 << 30 };
        let members: Vec<String> = (0..100).map(|i| format!("m{i:03}")).collect();
        let oldest: Vec<(f64, &str, i64)> = members.iter().map(|m| (1.0, m.as_str(), 1)).collect();
        let chosen = choose(&[look(100, 0, &oldest)], &retention, RetainFor::Read);
        assert_eq!(chosen[0].len(), EVICT_BATCH);
        assert_eq!(chosen[0][0].0, "m000", "same score: in member order, as Redis orders them");
    }
}
