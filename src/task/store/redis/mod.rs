//! The fleet's task store: task state in Redis (single node or Redis Cluster), so every replica
//! serves every task.
//!
//! # Key layout (prefix `P`, default `a2a`)
//! | key | type | contents | expiry |
//! |---|---|---|---|
//! | `P:{<task>}:task` | HASH | `task` (protobuf), `seq` (last event), `owner`, `fin` (ms) | retention age once finished |
//! | `P:{<task>}:events` | STREAM | entry `<seq>-0`, field `e` = encoded `StreamResponse` | same; trimmed to `MAXLEN ~` |
//! | `P:{<task>}:push` | HASH | `<owner>/<config id>` → creation no. + protobuf; `#` counter | same as the task |
//! | `P:{<task>}:lease` | STRING | the owning replica's id | `PX` lease time |
//! | `P:{o:<owner>}:all` | ZSET | `<position>:<task id>`, score 0 (ListTasks order by member) | none |
//! | `P:{o:<owner>}:ctx:<context>` | ZSET | the same, one context | none |
//! | `P:{o:<owner>}:meta` | HASH | task id → `<state>\|<position>\|<context>` | none |
//! | `P:{p:<principal>}:push` | SET | `<owner>/<task>/<config id>`: the per-principal cap (`push_quota.rs`) | none |
//! | `P:finished` | ZSET | `<owner>/<task id>` scored by finish time (ms) | none |
//!
//! `<task>`, `<owner>` and `<context>` are percent-encoded ([`keys`]). A task's keys share one
//! slot; an owner's indexes share another. So a write is two atomic steps: the task (one
//! script), then its index entries (one script). Readers tolerate the window between them: an
//! index entry whose task is gone is skipped and removed (the `UNINDEX` script, given
//! the position the reader saw, so a concurrent move is never undone).
mod conn;
mod fleet;
pub mod keys;
mod list;
mod push_quota;
mod replica;
mod scripts;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use prost::Message;

pub use conn::Timeouts;
pub use fleet::{EventBatch, Fenced, StreamBounds};
pub use replica::Orphan;

use self::conn::{Part, Redis};
use self::keys::{Keys, encode, owner_id, position};
use super::push_configs::per_task_refused;
use super::url::{RedisTarget, StoreUrl};
use super::{PushConfigLimits, Retention, TaskPage, TaskQuery, TaskStore, status_nanos};
use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::{Task, TaskPushNotificationConfig};
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
}

impl Default for RedisOptions {
    fn default() -> Self {
        Self { prefix: "a2a".to_owned(), retention: Retention::default(), timeouts: Timeouts::default() }
    }
}

/// Task state in Redis; see the module doc for the key layout.
pub struct RedisStore {
    redis: Arc<Redis>,
    keys: Keys,
    retention: Retention,
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
        let redis = Redis::connect(target, options.timeouts).await?;
        Ok(Self { redis, keys: Keys::new(&options.prefix), retention: options.retention })
    }

    /// Where the store is, for messages (host and port, never credentials).
    pub fn address(&self) -> String {
        self.redis.address()
    }

    /// Checks Redis answers now (for readiness).
    pub async fn ping(&self) -> Result<(), A2aError> {
        self.redis.query::<String>("ping", &redis::cmd("PING")).await.map(drop)
    }

    /// Runs a task-writing script's follow-up in one round trip: the owner's index entries
    /// and (the first time the task is seen finished) the retention bookkeeping; then drops
    /// whatever retention no longer keeps.
    async fn indexed(&self, oid: &str, task: &Task, newly_finished: bool) -> Result<(), A2aError> {
        let mut index = scripts::INDEX.prepare_invoke();
        index
            .key(self.keys.owner_index(oid))
            .key(self.keys.owner_meta(oid))
            .arg(self.keys.context_index_prefix(oid))
            .arg(&task.id)
            .arg(position(status_nanos(task)))
            .arg(state_of(task.status.as_ref()) as i32)
            .arg(encode(&task.context_id));
        let mut parts = vec![Part::Script(&scripts::INDEX, index)];
        if newly_finished {
            let member = format!("{oid}/{}", task.id);
            parts.push(Part::Cmd(
                redis::cmd("ZADD").arg(self.keys.finished()).arg(now_ms()).arg(member).to_owned(),
            ));
            let mut expired = scripts::EXPIRED.prepare_invoke();
            self.expired_args(&mut expired);
            parts.push(Part::Script(&scripts::EXPIRED, expired));
        }
        let replies = self.redis.together("index", parts).await?;
        match replies.get(2) {
            Some(members) => {
                let members: Vec<String> = redis::from_redis_value(members.clone())
                    .map_err(|e| A2aError::Internal(format!("retention reply: {e}")))?;
                self.drop_expired(members).await
            }
            None => Ok(()),
        }
    }

    /// Removes the finished tasks retention no longer keeps (by count and age); their keys
    /// would expire by themselves, but their index entries would not.
    async fn evict(&self) -> Result<(), A2aError> {
        let mut expired = scripts::EXPIRED.prepare_invoke();
        self.expired_args(&mut expired);
        let mut conn = self.redis.conn();
        let limit = self.redis.timeouts().command;
        let members: Vec<String> = self.redis.run("expired", limit, expired.invoke_async(&mut conn)).await?;
        self.drop_expired(members).await
    }

    fn expired_args(&self, expired: &mut redis::ScriptInvocation<'_>) {
        let cutoff = now_ms().saturating_sub(millis(self.retention.max_age));
        expired.key(self.keys.finished()).arg(cutoff).arg(self.retention.max_finished).arg(256);
    }

    /// Deletes the keys and index entries of finished tasks retention let go.
    async fn drop_expired(&self, members: Vec<String>) -> Result<(), A2aError> {
        for member in members {
            if let Some((oid, task_id)) = member.split_once('/') {
                let keys = [self.keys.task(task_id), self.keys.events(task_id), self.keys.push(task_id)];
                let delete = redis::cmd("DEL").arg(&keys).to_owned();
                let unindex = Part::Script(&scripts::UNINDEX, self.unindex_invocation(oid, task_id, ""));
                self.redis.together("evict", vec![Part::Cmd(delete), unindex]).await?;
            }
        }
        Ok(())
    }

    fn unindex_invocation<'a>(
        &self,
        oid: &str,
        task_id: &str,
        expected_position: &str,
    ) -> redis::ScriptInvocation<'a> {
        let mut unindex = scripts::UNINDEX.prepare_invoke();
        unindex
            .key(self.keys.owner_index(oid))
            .key(self.keys.owner_meta(oid))
            .arg(self.keys.context_index_prefix(oid))
            .arg(task_id)
            .arg(expected_position);
        unindex
    }

    /// Takes a task out of its owner's indexes (only from `expected_position` if not empty).
    async fn unindex(&self, oid: &str, task_id: &str, expected_position: &str) -> Result<(), A2aError> {
        let unindex = self.unindex_invocation(oid, task_id, expected_position);
        let mut conn = self.redis.conn();
        let limit = self.redis.timeouts().command;
        self.redis.run("unindex", limit, unindex.invoke_async::<i64>(&mut conn)).await.map(drop)
    }

    /// The stored task and its seq, if it exists and belongs to `owner`.
    async fn load(&self, owner: &Owner, task_id: &str) -> Result<Option<(Arc<Task>, u64)>, A2aError> {
        let cmd = redis::cmd("HMGET").arg(self.keys.task(task_id)).arg(&["task", "owner", "seq"]).to_owned();
        let (bytes, stored_owner, seq): (Option<Vec<u8>>, Option<String>, Option<u64>) =
            self.redis.query("get", &cmd).await?;
        match (bytes, stored_owner) {
            (Some(bytes), Some(stored)) if stored == owner_id(owner) => {
                Ok(Some((Arc::new(decode_task(&bytes)?), seq.unwrap_or(0))))
            }
            _ => Ok(None),
        }
    }

    /// The arguments every task-writing script shares: task bytes, owner, finished, now, ttl.
    fn write_args(&self, task: &Task, oid: &str) -> (Vec<u8>, String, u8, u64, u64) {
        let finished = is_terminal(state_of(task.status.as_ref()));
        (
            task.encode_to_vec(),
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
        let oid = owner_id(owner);
        let (bytes, owner_arg, finished, now, ttl) = self.write_args(&task, &oid);
        let mut save = scripts::SAVE.prepare_invoke();
        save.key(self.keys.task(&task.id)).key(self.keys.events(&task.id)).key(self.keys.push(&task.id));
        save.arg(bytes).arg(owner_arg).arg(finished).arg(now).arg(ttl);
        let mut conn = self.redis.conn();
        let limit = self.redis.timeouts().command;
        let (outcome, detail): (String, String) =
            self.redis.run("save", limit, save.invoke_async(&mut conn)).await?;
        if outcome != "ok" {
            return Err(A2aError::Internal(format!("task {} is stored for another owner", task.id)));
        }
        self.indexed(&oid, &task, detail == "1").await
    }

    async fn get(&self, owner: &Owner, task_id: &str) -> Result<Option<Arc<Task>>, A2aError> {
        Ok(self.load(owner, task_id).await?.map(|(task, _)| task))
    }

    async fn list(&self, owner: &Owner, query: &TaskQuery) -> Result<TaskPage, A2aError> {
        self.evict().await?;
        self.list_page(owner, query).await
    }

    async fn put_push_config(
        &self,
        owner: &Owner,
        config: &TaskPushNotificationConfig,
        limits: PushConfigLimits,
    ) -> Result<(), A2aError> {
        let reservation = self.reserve_push(owner, config, limits.per_principal).await?;
        let mut put = scripts::PUT_PUSH.prepare_invoke();
        put.key(self.keys.push(&config.task_id)).key(self.keys.task(&config.task_id));
        put.arg(format!("{}/", owner_id(owner)))
            .arg(&config.id)
            .arg(config.encode_to_vec())
            .arg(limits.per_task);
        let mut conn = self.redis.conn();
        let limit = self.redis.timeouts().command;
        let stored = self.redis.run("put_push_config", limit, put.invoke_async::<i64>(&mut conn)).await;
        if !matches!(stored, Ok(1..)) && reservation == push_quota::Reservation::New {
            let _ = self.release_push(owner, &config.task_id, &config.id).await;
        }
        match stored? {
            0 => Err(per_task_refused(&config.task_id, limits.per_task)),
            _ => Ok(()),
        }
    }

    async fn push_configs(
        &self,
        owner: &Owner,
        task_id: &str,
    ) -> Result<Vec<TaskPushNotificationConfig>, A2aError> {
        let fields: Vec<(Vec<u8>, Vec<u8>)> =
            self.redis.query("push_configs", redis::cmd("HGETALL").arg(self.keys.push(task_id))).await?;
        let prefix = format!("{}/", owner_id(owner));
        let mut configs = Vec::new();
        for (field, value) in fields {
            if !field.starts_with(prefix.as_bytes()) || value.len() < 20 {
                continue;
            }
            let (created, bytes) = value.split_at(20);
            let config = TaskPushNotificationConfig::decode(bytes)
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
        self.redis.query::<i64>("delete_push_config", &cmd).await?;
        self.release_push(owner, task_id, config_id).await
    }
}

/// Decodes a stored task; garbage in Redis is a server fault, not the client's.
fn decode_task(bytes: &[u8]) -> Result<Task, A2aError> {
    Task::decode(bytes).map_err(|e| A2aError::Internal(format!("stored task does not decode: {e}")))
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(millis).unwrap_or(0)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
