//! The fleet's task store: task state in Redis (single node or Redis Cluster), so every replica
//! serves every task.
//!
//! # Key layout (prefix `P`, default `a2a`)
//! | key | type | contents | expiry |
//! |---|---|---|---|
//! | `P:{<task>}:task` | HASH | `task` (protobuf), `seq` (last event), `lag` (`task` may be behind `seq`: `snapshot.rs`), `owner`, `bytes` (events), `fin` (ms) | retention age once finished |
//! | `P:{<task>}:events` | STREAM | entry `<seq>-0`, field `e` = encoded `StreamResponse` | same; trimmed to `MAXLEN ~` |
//! | `P:{<task>}:push` | HASH | `<owner>/<config id>` → creation no. + protobuf; `#` counter | same as the task; the retention age (a day at least) until the task is stored |
//! | `P:{<task>}:lease` | STRING | the owning replica's id | `PX` lease time |
//! | `P:{o:<owner>}:all` | ZSET | `<position>:<task id>`, score 0 (ListTasks order by member) | none |
//! | `P:{o:<owner>}:ctx:<context>` | ZSET | the same, one context | none |
//! | `P:{o:<owner>}:meta` | HASH | task id → `<state>\|<position>\|<context>` | none |
//! | `P:{o:<owner>}:sent:<message id>` | STRING | what the owner's `messageId` stands for (`sent.rs`) | retention age from its claim (none once its task is written born finished on a node) |
//! | `P:{p:<principal>}:push` | SET | `<owner>/<task>/<config id>`: the per-principal cap (`push_quota.rs`) | none |
//! | `P:{finished}` | ZSET | `<owner>/<task id>\|<position>\|<context>[&<messageId>]\|<size>` scored by finish time (ms) (`retention/`) | none |
//! | `P:{finished}:sizes` | HASH | `#` → the bytes the finished tasks hold | none |
//! | `P:{records}`, `P:{records}:sizes` | ZSET, HASH | the same for SendMessage records no task takes along (`<owner>/\|<position>\|&<messageId>\|<size>`), counted apart | none |
//! | `P:{parked}`, `P:{parked}:p:<principal>` | ZSET | `<owner>/<task id>` of parked tasks by deadline (`parked.rs`) | none |
//!
//! `<task>`, `<owner>` and `<context>` are percent-encoded ([`keys`]). A task's keys share one
//! slot; an owner's indexes share another, and on a cluster they and the retention set are in
//! pieces (`{o:<owner>~n}`, `{finished~n}`) spread over the nodes ([`keys`], "Shards"). So on a
//! cluster a write is atomic per slot: the task (one script), then its index entries and
//! retention (a script each, sent together); a single node runs both in one script (`WRITE`). A
//! task finished by its first write takes native commands instead (`born_finished.rs`): on a
//! node one `MULTI` for it and whatever such tasks come meanwhile (`group_commit.rs`), on a
//! cluster one per slot, all at once. Retention evicts in the background (`retention/`).
//! Readers tolerate the window between them: an
//! index entry whose task is gone is skipped and removed (the `UNINDEX` script, given
//! the position the reader saw, so a concurrent move is never undone).
mod acks;
mod batcher;
mod born_finished;
mod conn;
mod fleet;
mod full;
mod group_commit;
pub mod keys;
mod link;
mod list;
mod outbox;
mod parked;
mod pipelined;
mod push_quota;
mod replica;
mod retention;
mod scripts;
mod sent;
mod snapshot;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A webhook stored for a task not written yet (one in its creating SendMessage) expires after
/// the retention age, or this if longer: the task comes with the agent's first event, which
/// may take a while, and the expiry only matters if its replica died first (a call that went
/// forgets its webhook itself: `core/inline_webhook.rs`).
const PENDING_WEBHOOK_FLOOR: Duration = Duration::from_secs(24 * 3600);

use async_trait::async_trait;
use bytes::Bytes;
use prost::Message;

pub use acks::WaitFor;
pub use conn::Timeouts;
pub use fleet::{EventBatch, Fenced, StreamBounds};
pub use outbox::OutboxEntry;
pub use replica::{Append, Orphan};

use self::conn::{Part, Redis};
use self::keys::{Keys, Shard, encode, owner_id, position};
use self::retention::Holds;
use super::push_configs::per_task_refused;
use super::undecodable::undecodable;
use super::url::{RedisTarget, StoreUrl};
use super::{
    PushConfigLimits, PushRegistration, Retention, SentRecord, TaskPage, TaskQuery, TaskStore, status_nanos,
};
use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::Task;
use crate::task::encoded::EncodedTask;
use crate::task::{is_terminal, state_of};

/// How a [`RedisStore`] is set up.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// Key prefix, so several deployments can share one Redis (`--redis-prefix`).
    pub prefix: String,
    /// Retention of finished tasks, as for the memory store; count is per prefix (fleet-wide).
    pub retention: Retention,
    /// Bounds on every Redis call.
    pub timeouts: Timeouts,
    /// Pieces of each owner's ListTasks indexes and of the retention set (`keys.rs`, "Shards");
    /// `None`: one on a single node, [`CLUSTER_SHARDS`] on a cluster. Fixed for a deployment's
    /// life, like the prefix: entries written under another count are not found.
    pub shards: Option<usize>,
    /// Replicated acknowledgements (`--redis-wait-replicas`, `acks.rs`).
    pub wait: WaitFor,
}

/// Pieces of what tasks share, on a cluster: enough that a cluster of up to 16 equal nodes
/// gets an even share each, few enough that ListTasks (which reads every piece of the
/// owner's index) stays one round trip of small reads.
pub const CLUSTER_SHARDS: usize = 16;

/// How long replicas may take to acknowledge a write (`--redis-wait-timeout-ms`).
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_millis(1_000);

/// The most pieces a deployment may ask for.
pub const MAX_SHARDS: usize = 1_024;

impl Default for RedisOptions {
    fn default() -> Self {
        Self {
            prefix: "a2a".to_owned(),
            retention: Retention::default(),
            timeouts: Timeouts::default(),
            shards: None,
            wait: WaitFor { replicas: 0, timeout: DEFAULT_WAIT_TIMEOUT },
        }
    }
}

/// Task state in Redis; see the module doc for the key layout.
pub struct RedisStore {
    redis: Arc<Redis>,
    keys: Keys,
    retention: Retention,
    /// Retention's limits and this replica's evictor (`retention/`): of finished tasks, and
    /// of the SendMessage records no task takes along.
    retainer: Arc<retention::Retainer>,
    records: Arc<retention::Retainer>,
    /// Parked-task counts as last read, for admission (`parked.rs`).
    parked_usage: parked::UsageCache,
    /// The durable push outbox (`outbox.rs`).
    outbox: outbox::Outbox,
    /// Born-finished writes batched on a single node (`group_commit.rs`).
    group_commit: group_commit::GroupCommit,
    /// SendMessage claims pipelined on a single node (`pipelined.rs`).
    pipelined: pipelined::Pipelined,
}

/// Connects to the Redis a `--store` URL names, with default options and `prefix`, failing
/// fast (within the connect timeout) with a message naming the address.
pub async fn connect(url: &str, prefix: &str) -> Result<RedisStore, String> {
    let options = RedisOptions { prefix: prefix.to_owned(), ..RedisOptions::default() };
    match StoreUrl::parse(url)? {
        StoreUrl::Redis(target) => RedisStore::connect(target, options).await,
        StoreUrl::Memory => Err("--store memory names no Redis".to_owned()),
    }
}

impl RedisStore {
    /// Connects and checks Redis answers; the error names the address.
    pub async fn connect(target: RedisTarget, options: RedisOptions) -> Result<Self, String> {
        if options.prefix.is_empty() || options.prefix.contains(['{', '}']) {
            return Err(format!("--redis-prefix {:?} must be non-empty and without braces", options.prefix));
        }
        let wait_key = format!("{}:wait:{}", options.prefix, uuid::Uuid::new_v4().simple());
        let redis = Redis::connect(target, options.timeouts, options.wait, wait_key).await?;
        let shards = options.shards.unwrap_or(if redis.is_cluster() { CLUSTER_SHARDS } else { 1 });
        if !(1..=MAX_SHARDS).contains(&shards) {
            return Err(format!("--redis-shards {shards} must be between 1 and {MAX_SHARDS}"));
        }
        let keys = Keys::new(&options.prefix, shards);
        let outbox = outbox::Outbox::new(!redis.is_cluster());
        let retain =
            |holds| retention::Retainer::start(redis.clone(), keys.clone(), options.retention, holds);
        let (retainer, records) = (retain(Holds::Tasks), retain(Holds::Records));
        Ok(Self {
            group_commit: group_commit::GroupCommit::start(redis.clone(), retainer.clone()),
            pipelined: pipelined::Pipelined::start(redis.clone(), "claim_sent"),
            retainer,
            records,
            redis,
            keys,
            retention: options.retention,
            parked_usage: parked::UsageCache::default(),
            outbox,
        })
    }

    /// Where the store is, for messages (host and port, never credentials).
    pub fn address(&self) -> String {
        self.redis.address()
    }

    /// Whether the store is a Redis Cluster (whose steps cannot cross hash slots).
    pub fn is_cluster(&self) -> bool {
        self.redis.is_cluster()
    }

    /// How long this replica has seen Redis without a break (see `Redis::seen_for`).
    pub fn seen_for(&self) -> Duration {
        self.redis.seen_for()
    }

    /// Notes a restart of Redis since the last look (see `Redis::check_restart`).
    pub async fn check_restart(&self) -> Result<(), A2aError> {
        self.redis.check_restart().await
    }

    /// Checks Redis answers now (for readiness).
    pub async fn ping(&self) -> Result<(), A2aError> {
        self.redis.query::<String>("ping", &redis::cmd("PING")).await.map(drop)
    }

    /// Runs a task-writing script's follow-up in one round trip: the owner's index entries
    /// and (the first time the task is seen finished, holding `size` bytes) the retention
    /// note. A single node does all of this inside [`scripts::WRITE`]; this is the cluster's
    /// way, slot by slot.
    async fn indexed(&self, oid: &str, task: &Task, newly_finished: bool, size: u64) -> Result<(), A2aError> {
        let mut parts = vec![Part::Script(&scripts::INDEX, self.index_invocation(oid, task))];
        if newly_finished {
            let place = position(status_nanos(task));
            let made_by = retention::made_by(task);
            let member =
                retention::member(size, &place, &encode(&task.context_id), oid, &task.id, made_by.as_deref());
            parts.push(self.note_part(Holds::Tasks, &task.id, member, size));
        }
        let replies = self.redis.together("index", parts).await?;
        if let Some(noted) = replies.into_iter().nth(1) {
            self.noted(Holds::Tasks, noted, size)?;
        }
        Ok(())
    }

    /// [`scripts::NOTE`] of retention `member`, holding `size` bytes, in the piece of the set
    /// that `holds` it that `id` (a task's id, or a record's `messageId`) falls in.
    fn note_part<'a>(&self, holds: Holds, id: &str, member: String, size: u64) -> Part<'a> {
        let shard = self.retainer_of(holds).piece_of(id);
        let mut note = scripts::NOTE.prepare_invoke();
        note.key(self.keys.finished(&shard)).key(self.keys.finished_sizes(&shard));
        note.arg(member).arg(now_ms()).arg(size);
        Part::Script(&scripts::NOTE, note)
    }

    /// Tells the evictor what a [`RedisStore::note_part`]'s reply says its piece holds.
    fn noted(&self, holds: Holds, reply: redis::Value, size: u64) -> Result<(), A2aError> {
        let (count, bytes): (u64, i64) = redis::from_redis_value(reply)
            .map_err(|e| A2aError::Internal(format!("retention reply: {e}")))?;
        self.retainer_of(holds).noted(1, count, bytes, size);
        Ok(())
    }

    /// The retainer of the set that `holds` what it says.
    fn retainer_of(&self, holds: Holds) -> &retention::Retainer {
        match holds {
            Holds::Tasks => &self.retainer,
            Holds::Records => &self.records,
        }
    }

    fn index_invocation<'a>(&self, oid: &str, task: &Task) -> redis::ScriptInvocation<'a> {
        let shard = self.keys.owner_shard(oid, &task.id);
        let mut index = scripts::INDEX.prepare_invoke();
        index
            .key(self.keys.owner_index(&shard))
            .key(self.keys.owner_meta(&shard))
            .arg(self.keys.context_index_prefix(&shard))
            .arg(&task.id)
            .arg(position(status_nanos(task)))
            .arg(state_of(task.status.as_ref()) as i32)
            .arg(encode(&task.context_id));
        index
    }

    /// Takes a task out of its owner's indexes (only from `expected_position` if not empty).
    async fn unindex(&self, oid: &str, task_id: &str, expected_position: &str) -> Result<(), A2aError> {
        let shard = self.keys.owner_shard(oid, task_id);
        let unindex = unindex_invocation(&self.keys, &shard, [(task_id, expected_position)]);
        let mut conn = self.redis.conn();
        let limit = self.redis.timeouts().command;
        self.redis.run("unindex", limit, unindex.invoke_async::<i64>(&mut conn)).await.map(drop)
    }

    /// The stored task and its seq, if it exists, belongs to `owner` and finished no longer ago
    /// than the retention age (a born-finished task on a single node has no TTL: the evictor
    /// takes it within an age tick, and until then `fin` says it is gone). A Task stored some
    /// events behind is brought up to date (`snapshot.rs`).
    async fn load(&self, owner: &Owner, task_id: &str) -> Result<Option<(Arc<Task>, u64)>, A2aError> {
        let fields = ["task", "owner", "seq", "fin", "lag"];
        let cmd = redis::cmd("HMGET").arg(self.keys.task(task_id)).arg(&fields).to_owned();
        for _ in 0..snapshot::READS {
            let before = self.redis.before_write().await;
            let (bytes, stored_owner, seq, fin, lag): Stored = self.redis.query("get", &cmd).await?;
            let aged = fin.is_some_and(|fin| fin.saturating_add(millis(self.retention.max_age)) <= now_ms());
            let (Some(bytes), Some(stored)) = (bytes, stored_owner) else { return Ok(None) };
            if stored != owner_id(owner) || aged {
                return Ok(None);
            }
            let seq = seq.unwrap_or(0);
            if let Some(task) = self.caught_up(task_id, &bytes, lag.is_some(), seq).await? {
                // What a reader is shown must be replicated too (it may be a write in flight).
                self.redis.replicated(before).await?;
                return Ok(Some((Arc::new(task), seq)));
            }
        }
        Err(snapshot::kept_moving(task_id))
    }

    /// The arguments every task-writing script shares: task bytes (`encoded`, when the actor
    /// made them), owner, finished, now, ttl.
    fn write_args(&self, task: &Task, encoded: Option<Bytes>, oid: &str) -> (Bytes, String, u8, u64, u64) {
        let finished = is_terminal(state_of(task.status.as_ref()));
        (
            encoded.unwrap_or_else(|| crate::task::encoded::encode(task)),
            oid.to_owned(),
            finished as u8,
            now_ms(),
            millis(self.retention.max_age).max(1),
        )
    }
}

#[async_trait]
impl TaskStore for RedisStore {
    async fn save(&self, owner: &Owner, task: Arc<Task>) -> Result<(), A2aError> {
        self.save_encoded(owner, EncodedTask::plain(task)).await
    }

    async fn save_encoded(&self, owner: &Owner, task: EncodedTask) -> Result<(), A2aError> {
        let oid = owner_id(owner);
        let (task, proto) = task.into_parts();
        let (bytes, owner_arg, finished, now, ttl) = self.write_args(&task, proto, &oid);
        let mut save = scripts::SAVE.prepare_invoke();
        save.key(self.keys.task(&task.id)).key(self.keys.events(&task.id)).key(self.keys.push(&task.id));
        save.arg(&bytes[..]).arg(owner_arg).arg(finished).arg(now).arg(ttl);
        let mut conn = self.redis.conn();
        let limit = self.redis.timeouts().command;
        let before = self.redis.before_write().await;
        let reply: Vec<String> = self.redis.run("save", limit, save.invoke_async(&mut conn)).await?;
        match reply.as_slice() {
            [ok, newly, size] if ok == "ok" => {
                self.indexed(&oid, &task, newly == "1", size.parse().unwrap_or(0)).await?;
                self.redis.replicated(before).await
            }
            _ => Err(A2aError::Internal(format!("task {} is stored for another owner", task.id))),
        }
    }

    async fn get(&self, owner: &Owner, task_id: &str) -> Result<Option<Arc<Task>>, A2aError> {
        Ok(self.load(owner, task_id).await?.map(|(task, _)| task))
    }

    async fn list(&self, owner: &Owner, query: &TaskQuery) -> Result<TaskPage, A2aError> {
        self.retainer.rounds(retention::RetainFor::Read).await?;
        self.list_page(owner, query).await
    }

    async fn put_push_config(
        &self,
        owner: &Owner,
        registration: &PushRegistration,
        limits: PushConfigLimits,
    ) -> Result<(), A2aError> {
        let config = &registration.config;
        let reservation = self.reserve_push(owner, config, limits.per_principal).await?;
        if self.outbox_on() {
            // A task not stored yet (a webhook in its creating SendMessage) must not take the
            // native first write, which writes no outbox entry (`outbox.rs`).
            let exists: i64 = self
                .redis
                .query("put_push_config", redis::cmd("EXISTS").arg(self.keys.task(&config.task_id)))
                .await?;
            self.note_webhook(&config.task_id, exists == 0);
        }
        let mut put = scripts::PUT_PUSH.prepare_invoke();
        put.key(self.keys.push(&config.task_id)).key(self.keys.task(&config.task_id));
        put.arg(format!("{}/", owner_id(owner)))
            .arg(&config.id)
            .arg(registration.encode())
            .arg(limits.per_task)
            .arg(millis(self.retention.max_age.max(PENDING_WEBHOOK_FLOOR)));
        let mut conn = self.redis.conn();
        let stored = self.redis.write("put_push_config", put.invoke_async::<i64>(&mut conn)).await;
        if !matches!(stored, Ok(1..)) && reservation == push_quota::Reservation::New {
            let _ = self.release_push(owner, &config.task_id, &config.id).await;
        }
        match stored? {
            0 => Err(per_task_refused(&config.task_id, limits.per_task)),
            _ => Ok(()),
        }
    }

    async fn push_configs(&self, owner: &Owner, task_id: &str) -> Result<Vec<PushRegistration>, A2aError> {
        let fields: Vec<(Vec<u8>, Vec<u8>)> =
            self.redis.query("push_configs", redis::cmd("HGETALL").arg(self.keys.push(task_id))).await?;
        let prefix = format!("{}/", owner_id(owner));
        let mut configs = Vec::new();
        for (field, value) in fields {
            if !field.starts_with(prefix.as_bytes()) || value.len() < 20 {
                continue;
            }
            let (created, bytes) = value.split_at(20);
            let config = PushRegistration::decode(bytes)
                .map_err(|e| A2aError::Internal(format!("stored push config of task {task_id}: {e}")))?;
            configs.push((created.to_vec(), config));
        }
        configs.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(configs.into_iter().map(|(_, config)| config).collect())
    }

    async fn delete_push_config(
        &self,
        owner: &Owner,
        task_id: &str,
        config_id: &str,
    ) -> Result<(), A2aError> {
        let field = format!("{}/{config_id}", owner_id(owner));
        let cmd = redis::cmd("HDEL").arg(self.keys.push(task_id)).arg(field).to_owned();
        let mut conn = self.redis.conn();
        self.redis.write("delete_push_config", cmd.query_async::<i64>(&mut conn)).await?;
        self.note_webhook(task_id, false);
        self.release_push(owner, task_id, config_id).await
    }

    async fn claim_sent(
        &self,
        owner: &Owner,
        message_id: &str,
        record: &SentRecord,
    ) -> Result<Option<SentRecord>, A2aError> {
        self.claim_sent_record(owner, message_id, record).await
    }

    async fn swap_sent(
        &self,
        owner: &Owner,
        message_id: &str,
        old: &SentRecord,
        new: Option<&SentRecord>,
    ) -> Result<bool, A2aError> {
        self.swap_sent_record(owner, message_id, old, new).await
    }

    async fn keep_sent(&self, owner: &Owner, message_id: &str, record: &SentRecord) -> Result<(), A2aError> {
        self.note_record(owner, message_id, record).await
    }
}

/// [`scripts::UNINDEX`] of (task id, expected position) pairs in one piece of an owner's
/// indexes.
fn unindex_invocation<'a, 'b>(
    keys: &Keys,
    shard: &Shard,
    pairs: impl IntoIterator<Item = (&'b str, &'b str)>,
) -> redis::ScriptInvocation<'a> {
    let mut unindex = scripts::UNINDEX.prepare_invoke();
    unindex.key(keys.owner_index(shard)).key(keys.owner_meta(shard)).arg(keys.context_index_prefix(shard));
    for (task_id, expected_position) in pairs {
        unindex.arg(task_id).arg(expected_position);
    }
    unindex
}

/// A task hash's `task`, `owner`, `seq`, `fin` and `lag`, as a reader asks for them.
type Stored = (Option<Vec<u8>>, Option<String>, Option<u64>, Option<u64>, Option<String>);

/// Decodes stored task `task_id`; garbage in Redis is a server fault, not the client's, and is
/// reported ([`undecodable`]).
fn decode_task(task_id: &str, bytes: &[u8]) -> Result<Task, A2aError> {
    Task::decode(bytes).map_err(|e| undecodable(task_id, e))
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(millis).unwrap_or(0)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
