//! What the fleet's replicas say to one another through Redis: the owner's batched append,
//! each replica's inbox (forwarded commands and their replies), and the set of owned tasks
//! whose leases a survivor watches.
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::conn::Part;
use super::fleet::{Fenced, StreamBounds};
use super::keys::{encode, owner_id, position};
use super::{RedisStore, millis, now_ms, retention, scripts, snapshot, status_nanos};
use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::Task;
use crate::task::{is_terminal, state_of};

/// Inbox entries kept per replica (`MAXLEN ~`); a reader never lags this far behind.
const INBOX_LENGTH: usize = 10_000;

/// An inbox outlives its replica by this much, then Redis drops it.
const INBOX_TTL: Duration = Duration::from_secs(3600);

/// How an append stores its Task.
#[derive(Clone, Copy, Debug, Default)]
pub struct Append {
    /// The status changed: the task moves to its new place in ListTasks.
    pub reindex: bool,
    /// The store may keep the Task it has, behind these events (only artifacts changed since
    /// it was stored, a few events ago): readers replay the rest (`snapshot.rs`). Ignored for
    /// a finishing write.
    pub keep_task: bool,
}

impl Append {
    /// The Task goes in, and with `reindex` its place in ListTasks.
    pub fn with_task(reindex: bool) -> Self {
        Self { reindex, keep_task: false }
    }
}

/// A task found in the store whatever its owner: for a survivor that takes over an orphan.
pub struct Orphan {
    /// The task as its last owner stored it.
    pub task: Arc<Task>,
    /// The seq of the last event it includes.
    pub seq: u64,
    /// Its owner, encoded as in key names (what the append script compares).
    owner_id: String,
}

impl Orphan {
    /// Its owner, if its stored owner id reads as one.
    pub fn owner(&self) -> Option<crate::call::Owner> {
        super::keys::owner_from_id(&self.owner_id)
    }
}

impl RedisStore {
    /// Appends `events` (consecutive, from `first_seq`) and stores `task`, the Task after the
    /// last of them, in one atomic step, as [`RedisStore::append`] does for one event; checks
    /// the lease names `lease` unless it is empty. With `reindex` (the status changed), the
    /// owner's index follows in one more round trip; a finished task is always reindexed.
    #[allow(clippy::too_many_arguments)]
    pub async fn append_batch(
        &self,
        owner: &Owner,
        task: &Task,
        first_seq: u64,
        events: &[Bytes],
        bounds: StreamBounds,
        lease: &str,
        how: Append,
    ) -> Result<Result<(), Fenced>, A2aError> {
        self.append_batch_as(&owner_id(owner), task, first_seq, events, bounds, lease, how).await
    }

    /// [`RedisStore::append_batch`] for the owner id `oid`; whatever the script found (written
    /// now, landed before, or fenced), it counts only once replicated.
    #[allow(clippy::too_many_arguments)]
    async fn append_batch_as(
        &self,
        oid: &str,
        task: &Task,
        first_seq: u64,
        events: &[Bytes],
        bounds: StreamBounds,
        lease: &str,
        how: Append,
    ) -> Result<Result<(), Fenced>, A2aError> {
        let Append { reindex, keep_task } = how;
        // A Task the store keeps, behind these events, is not even encoded; a finishing one
        // always goes in.
        let keep = keep_task && !is_terminal(state_of(task.status.as_ref()));
        let (bytes, owner_arg, finished, now, ttl) = self.write_args(task, keep.then(Bytes::new), oid);
        let made_by = if finished == 1 { retention::made_by(task) } else { None };
        let before = self.redis.before_write().await;
        let single = !self.redis.is_cluster();
        let mut write =
            if single { scripts::WRITE.prepare_invoke() } else { scripts::APPEND_BATCH.prepare_invoke() };
        write
            .key(self.keys.task(&task.id))
            .key(self.keys.events(&task.id))
            .key(self.keys.push(&task.id))
            .key(self.keys.lease(&task.id));
        write.arg(&bytes[..]).arg(owner_arg).arg(finished).arg(now).arg(ttl);
        write.arg(first_seq).arg(bounds.max_events.max(1)).arg(lease);
        if single {
            // The rest of the write in the same step: the index move and the retention note.
            let (shard, finished) =
                (self.keys.owner_shard(oid, &task.id), self.keys.finished_shard(&task.id));
            write.key(self.keys.owner_index(&shard)).key(self.keys.owner_meta(&shard));
            write.key(self.keys.finished(&finished)).key(self.keys.finished_sizes(&finished));
            write.key(self.keys.outbox());
            write.arg(if reindex { "1" } else { "0" }).arg(self.keys.context_index_prefix(&shard));
            write.arg(position(status_nanos(task))).arg(state_of(task.status.as_ref()) as i32);
            write.arg(encode(&task.context_id)).arg(&task.id).arg(format!("{oid}/{}", task.id));
            write.arg(self.outbox_bound());
            write.arg(made_by.unwrap_or_default());
        }
        for event in events {
            write.arg(event.as_ref());
        }
        let mut conn = self.redis.conn();
        let limit = self.redis.timeouts().command;
        let reply: Vec<String> = self.redis.run("append", limit, write.invoke_async(&mut conn)).await?;
        let (outcome, detail) = match reply.get(..2) {
            Some([outcome, detail]) => (outcome.clone(), detail.clone()),
            _ => return Err(A2aError::Internal(format!("unexpected append reply {reply:?}"))),
        };
        let appended = match outcome.as_str() {
            "ok" => {
                if first_seq <= 2 {
                    self.note_webhook(&task.id, false);
                }
                let newly_finished = detail == "1";
                if single {
                    if let Some([size, count, bytes]) = reply.get(2..5) {
                        let parse = |n: &String| n.parse().unwrap_or(0);
                        self.retainer.noted(1, parse(count), parse(bytes) as i64, parse(size));
                    }
                } else if reindex || newly_finished {
                    let size = reply.get(2).and_then(|size| size.parse().ok()).unwrap_or(0);
                    self.indexed(oid, task, newly_finished, size).await?;
                }
                Ok(())
            }
            "seq" => Err(Fenced::Seq { stored: detail.parse().unwrap_or(0) }),
            "finished" => Err(Fenced::Finished),
            "lease" => Err(Fenced::Lease { holder: Some(detail).filter(|h| !h.is_empty()) }),
            _ => Err(Fenced::Owner),
        };
        self.redis.replicated(before).await?;
        Ok(appended)
    }

    /// Puts `payload` in `replica`'s inbox.
    pub async fn send_to_replica(&self, replica: &str, payload: &[u8]) -> Result<(), A2aError> {
        let key = self.keys.inbox(replica);
        let mut pipe = redis::pipe();
        pipe.cmd("XADD").arg(&key).arg("MAXLEN").arg("~").arg(INBOX_LENGTH).arg("*").arg("m").arg(payload);
        pipe.cmd("PEXPIRE").arg(&key).arg(millis(INBOX_TTL)).ignore();
        let mut conn = self.redis.conn();
        let limit = self.redis.timeouts().command;
        self.redis.run("send_to_replica", limit, pipe.query_async::<(String,)>(&mut conn)).await.map(drop)
    }

    /// The id a new reader of `replica`'s inbox starts after: its newest entry now. Mail from
    /// before the replica started is not for it (a replica restarted under the same id must
    /// not replay a previous life's cancels).
    pub async fn inbox_start(&self, replica: &str) -> Result<String, A2aError> {
        let cmd = redis::cmd("XREVRANGE")
            .arg(self.keys.inbox(replica))
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1)
            .to_owned();
        let newest: Vec<(String, Vec<Vec<u8>>)> = self.redis.query("inbox_start", &cmd).await?;
        Ok(newest.into_iter().next().map(|(id, _)| id).unwrap_or_else(|| "0-0".to_owned()))
    }

    /// The entries of `replica`'s inbox after `after` (an entry id), waiting up to `block`
    /// for one; each as (entry id, payload).
    pub async fn read_inbox(
        &self,
        replica: &str,
        after: &str,
        block: Duration,
    ) -> Result<Vec<(String, Vec<u8>)>, A2aError> {
        let mut cmd = redis::cmd("XREAD");
        cmd.arg("COUNT").arg(256).arg("BLOCK").arg(millis(block).max(1));
        cmd.arg("STREAMS").arg(self.keys.inbox(replica)).arg(after);
        type Entries = Vec<(String, Vec<(String, Vec<Vec<u8>>)>)>;
        let reply: Option<Entries> = self.redis.blocking("read_inbox", block, &cmd).await?;
        let entries = reply.into_iter().flatten().flat_map(|(_, entries)| entries);
        Ok(entries.map(|(id, fields)| (id, fields.into_iter().nth(1).unwrap_or_default())).collect())
    }

    /// Takes the task's lease for `replica` (or extends it, if it holds it) and notes its
    /// expiry in the watched set, in one round trip; `false` if another replica holds it.
    pub async fn claim(&self, task_id: &str, replica: &str, lease: Duration) -> Result<bool, A2aError> {
        let mut acquire = scripts::ACQUIRE.prepare_invoke();
        acquire.key(self.keys.lease(task_id)).arg(replica).arg(millis(lease).max(1));
        // Harmless when the lease is another's: a survivor checks the lease itself.
        let watch =
            redis::cmd("ZADD").arg(self.keys.live()).arg(now_ms() + millis(lease)).arg(task_id).to_owned();
        let replies = self
            .redis
            .together("claim", vec![Part::Script(&scripts::ACQUIRE, acquire), Part::Cmd(watch)])
            .await?;
        let acquired: i64 = replies
            .first()
            .map(|v| redis::from_redis_value(v.clone()))
            .transpose()
            .map_err(|e| A2aError::Internal(format!("claim reply: {e}")))?
            .unwrap_or(0);
        Ok(acquired == 1)
    }

    /// Gives the task's lease up (only if `replica` holds it) and takes it out of the watched
    /// set, in one round trip.
    pub async fn disown(&self, task_id: &str, replica: &str) -> Result<(), A2aError> {
        let mut release = scripts::RELEASE.prepare_invoke();
        release.key(self.keys.lease(task_id)).arg(replica);
        let unwatch = redis::cmd("ZREM").arg(self.keys.live()).arg(task_id).to_owned();
        self.redis
            .together("disown", vec![Part::Script(&scripts::RELEASE, release), Part::Cmd(unwatch)])
            .await
            .map(drop)
    }

    /// Notes (or moves) the expiry of a task's lease in the set survivors watch.
    pub async fn mark_owned(&self, task_ids: &[String], lease: Duration) -> Result<(), A2aError> {
        if task_ids.is_empty() {
            return Ok(());
        }
        let expiry = now_ms() + millis(lease);
        let mut cmd = redis::cmd("ZADD");
        cmd.arg(self.keys.live());
        for id in task_ids {
            cmd.arg(expiry).arg(id);
        }
        self.redis.query::<i64>("mark_owned", &cmd).await.map(drop)
    }

    /// Up to `limit` watched tasks whose lease should have been renewed by now.
    pub async fn overdue(&self, limit: usize) -> Result<Vec<String>, A2aError> {
        let cmd = redis::cmd("ZRANGEBYSCORE")
            .arg(self.keys.live())
            .arg("-inf")
            .arg(now_ms())
            .arg("LIMIT")
            .arg(0)
            .arg(limit)
            .to_owned();
        self.redis.query("overdue", &cmd).await
    }

    /// The stored task, whoever owns it, for a survivor about to take it over.
    /// A Task stored some events behind is brought up to date (`snapshot.rs`).
    pub async fn orphan(&self, task_id: &str) -> Result<Option<Orphan>, A2aError> {
        let fields = ["task", "owner", "seq", "lag"];
        let cmd = redis::cmd("HMGET").arg(self.keys.task(task_id)).arg(&fields).to_owned();
        for _ in 0..snapshot::READS {
            let (bytes, owner, seq, lag): (Option<Vec<u8>>, Option<String>, Option<u64>, Option<String>) =
                self.redis.query("orphan", &cmd).await?;
            let (Some(bytes), Some(owner_id)) = (bytes, owner) else { return Ok(None) };
            let seq = seq.unwrap_or(0);
            if let Some(task) = self.caught_up(task_id, &bytes, lag.is_some(), seq).await? {
                return Ok(Some(Orphan { task: Arc::new(task), seq, owner_id }));
            }
        }
        Err(snapshot::kept_moving(task_id))
    }

    /// Ends an orphan (its owner is gone): appends `event`, the update that produced `task`,
    /// and indexes the task; refused when another replica took the task meanwhile.
    pub async fn end_orphan(
        &self,
        orphan: &Orphan,
        task: &Task,
        event: Bytes,
        bounds: StreamBounds,
        lease: &str,
    ) -> Result<Result<(), Fenced>, A2aError> {
        self.append_batch_as(
            &orphan.owner_id,
            task,
            orphan.seq + 1,
            &[event],
            bounds,
            lease,
            Append::with_task(true),
        )
        .await
    }
}
