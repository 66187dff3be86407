//! The fleet's ledger of parked tasks (`task/parked.rs`) in Redis, shared by every replica.
//!
//! | key | type | contents |
//! |---|---|---|
//! | `P:{parked}` | ZSET | `<owner id>/<task id>` (encoded) scored by its deadline (ms) |
//! | `P:{parked}:p:<principal>` | ZSET | the same, one principal's |
//!
//! Every key shares the `{parked}` slot, so one script keeps them in step on a cluster too,
//! and the counts are ZCARDs, never counters that could drift. A replica parks a task before
//! it gives the task's lease up, and the task's next owner unparks it; the sweep of every
//! replica reads the due members (`task/sweep.rs`).
//!
//! Admission asks for the counts on every new task; [`UsageCache`] answers that from what this
//! replica read less than [`USAGE_FRESH`] ago, and `ParkedCaps` asks again exactly near a cap.
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use redis::Script;

use super::RedisStore;
use super::keys::{decode, encode, owner_from_id, owner_id};
use crate::call::Owner;
use crate::error::A2aError;
use crate::task::parked::{ParkedTasks, ParkedUsage};

/// KEYS: all, the principal's. ARGV: member, deadline.
static PARK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
return 1
",
    )
});

/// KEYS: all, the principal's. ARGV: member.
static UNPARK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
redis.call('ZREM', KEYS[1], ARGV[1])
return redis.call('ZREM', KEYS[2], ARGV[1])
",
    )
});

/// KEYS: all, the principal's. Returns both counts and both first scores ('' when empty).
static USAGE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local function first(key)
  local head = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return head[2] or ''
end
return {redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[2]), first(KEYS[1]), first(KEYS[2])}
",
    )
});

/// How long counts this replica read may answer admission (`ParkedTasks::recent_usage`):
/// another replica's parking shows here at most this late, and only far from a cap.
pub const USAGE_FRESH: Duration = Duration::from_millis(250);

/// Principals whose counts are kept at once; past it the stale ones go, then all.
const CACHED_PRINCIPALS: usize = 1024;

/// The counts as last read, per principal; this replica's own parking clears them.
#[derive(Default)]
pub struct UsageCache(Mutex<HashMap<String, (Instant, ParkedUsage)>>);

impl UsageCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, ParkedUsage)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn get(&self, principal: &str) -> Option<ParkedUsage> {
        let cached = self.lock();
        cached.get(principal).filter(|(at, _)| at.elapsed() < USAGE_FRESH).map(|(_, usage)| *usage)
    }

    fn put(&self, principal: &str, usage: ParkedUsage) {
        let mut cached = self.lock();
        if cached.len() >= CACHED_PRINCIPALS && !cached.contains_key(principal) {
            cached.retain(|_, (at, _)| at.elapsed() < USAGE_FRESH);
            if cached.len() >= CACHED_PRINCIPALS {
                cached.clear();
            }
        }
        cached.insert(principal.to_owned(), (Instant::now(), usage));
    }

    fn clear(&self) {
        self.lock().clear();
    }
}

impl RedisStore {
    fn parked_keys(&self, principal: &str) -> (String, String) {
        (self.keys.parked(), self.keys.parked_of(principal))
    }

    async fn parked_script<T: redis::FromRedisValue>(
        &self,
        op: &'static str,
        script: &Script,
        principal: &str,
        args: &[String],
    ) -> Result<T, A2aError> {
        let (all, own) = self.parked_keys(principal);
        let mut invocation = script.prepare_invoke();
        invocation.key(all).key(own);
        for arg in args {
            invocation.arg(arg);
        }
        let mut conn = self.redis.conn();
        let limit = self.redis.timeouts().command;
        self.redis.run(op, limit, invocation.invoke_async(&mut conn)).await
    }
}

/// The ledger member of `owner`'s task.
fn member(owner: &Owner, task_id: &str) -> String {
    format!("{}/{}", owner_id(owner), encode(task_id))
}

/// The owner and task id a member stands for; `None` for one this code did not write.
fn parse_member(member: &str) -> Option<(Owner, String)> {
    let (oid, task) = member.split_once('/')?;
    Some((owner_from_id(oid)?, decode(task)?))
}

/// A score as Redis returns it, in ms.
fn score(text: &str) -> Option<u64> {
    text.parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0).map(|s| s as u64)
}

#[async_trait]
impl ParkedTasks for RedisStore {
    async fn park(&self, owner: &Owner, task_id: &str, deadline_ms: u64) -> Result<(), A2aError> {
        let args = [member(owner, task_id), deadline_ms.to_string()];
        self.parked_usage.clear();
        self.parked_script::<i64>("park", &PARK, &owner.principal, &args).await.map(drop)
    }

    async fn unpark(&self, owner: &Owner, task_id: &str) -> Result<(), A2aError> {
        let args = [member(owner, task_id)];
        self.parked_usage.clear();
        self.parked_script::<i64>("unpark", &UNPARK, &owner.principal, &args).await.map(drop)
    }

    async fn due(&self, now_ms: u64, max: usize) -> Result<Vec<(Owner, String)>, A2aError> {
        let mut cmd = redis::cmd("ZRANGEBYSCORE");
        cmd.arg(self.keys.parked()).arg("-inf").arg(now_ms).arg("LIMIT").arg(0).arg(max);
        let members: Vec<String> = self.redis.query("parked_due", &cmd).await?;
        let mut due = Vec::with_capacity(members.len());
        for member in members {
            match parse_member(&member) {
                Some(task) => due.push(task),
                None => {
                    // Not ours: out of the way of the sweep.
                    let cmd = redis::cmd("ZREM").arg(self.keys.parked()).arg(&member).to_owned();
                    self.redis.query::<i64>("parked_drop", &cmd).await?;
                }
            }
        }
        Ok(due)
    }

    async fn usage(&self, principal: &str) -> Result<ParkedUsage, A2aError> {
        let (total, own, first, own_first): (usize, usize, String, String) =
            self.parked_script("parked_usage", &USAGE, principal, &[]).await?;
        let usage = ParkedUsage {
            total,
            of_principal: own,
            first_deadline_ms: score(&first),
            principal_first_deadline_ms: score(&own_first),
        };
        self.parked_usage.put(principal, usage);
        Ok(usage)
    }

    async fn recent_usage(&self, principal: &str) -> Result<ParkedUsage, A2aError> {
        match self.parked_usage.get(principal) {
            Some(usage) => Ok(usage),
            None => self.usage(principal).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_name_their_owner_and_task_whatever_the_strings() {
        let owner = Owner { tenant: "t:/1".into(), principal: "p}/{:".into() };
        assert_eq!(parse_member(&member(&owner, "a/b")), Some((owner, "a/b".to_owned())));
        assert_eq!(parse_member("garbage"), None);
        assert_eq!(score("1.7e12"), Some(1_700_000_000_000));
        assert_eq!(score(""), None);
    }
}
