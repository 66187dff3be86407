//! The per-principal cap on push configs (`--max-push-configs-per-principal`) in Redis.
//!
//! A principal's configs live under many tasks (each task's keys share one slot), so the
//! count cannot be taken inside the task's script. Each principal has a SET of its configs in
//! its own slot: a config is reserved there first (one atomic script: already there, room
//! left, or refused), then stored with the task, and the reservation is given back when the
//! task refuses it or the config is deleted. Members whose task has gone (retention, expiry)
//! are not removed when the task goes; they are found and removed only when the principal
//! reaches the cap, so the check costs one round trip until then.
use std::sync::LazyLock;

use percent_encoding::percent_decode_str;
use redis::{Script, Value};

use super::RedisStore;
use super::conn::Part;
use super::keys::{encode, owner_id};
use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::TaskPushNotificationConfig;
use crate::task::store::push_configs::per_principal_refused;

/// KEYS: the principal's set. ARGV: member, cap. Returns 2 if the member is already there
/// (a replace), 1 if it was added, 0 if the set is full.
static RESERVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return 2 end
if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('SADD', KEYS[1], ARGV[1])
return 1
",
    )
});

/// What reserving a config's place found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Reservation {
    /// The config was counted already (it is being replaced).
    Existing,
    /// The config is counted now; give it back if storing it fails.
    New,
}

fn member(owner: &Owner, task_id: &str, config_id: &str) -> String {
    format!("{}/{}/{}", owner_id(owner), encode(task_id), encode(config_id))
}

impl RedisStore {
    /// Counts `config` against its principal's cap, or refuses it with QUOTA_EXCEEDED.
    pub(super) async fn reserve_push(
        &self,
        owner: &Owner,
        config: &TaskPushNotificationConfig,
        cap: usize,
    ) -> Result<Reservation, A2aError> {
        let key = self.keys.principal_push(&owner.principal);
        let member = member(owner, &config.task_id, &config.id);
        for attempt in 0..2 {
            let mut reserve = RESERVE.prepare_invoke();
            reserve.key(&key).arg(&member).arg(cap);
            let mut conn = self.redis.conn();
            let limit = self.redis.timeouts().command;
            match self.redis.run("reserve_push", limit, reserve.invoke_async::<i64>(&mut conn)).await? {
                2 => return Ok(Reservation::Existing),
                1 => return Ok(Reservation::New),
                _ if attempt == 0 && self.forget_gone(&key).await? > 0 => continue,
                _ => break,
            }
        }
        Err(per_principal_refused(cap))
    }

    /// Gives a config's place back (deleted, or refused by its task).
    pub(super) async fn release_push(
        &self,
        owner: &Owner,
        task_id: &str,
        config_id: &str,
    ) -> Result<(), A2aError> {
        let key = self.keys.principal_push(&owner.principal);
        let cmd = redis::cmd("SREM").arg(key).arg(member(owner, task_id, config_id)).to_owned();
        self.redis.query::<i64>("release_push", &cmd).await.map(drop)
    }

    /// Removes the members of `key` whose config is no longer stored; how many.
    async fn forget_gone(&self, key: &str) -> Result<usize, A2aError> {
        let members: Vec<String> = self.redis.query("push_members", redis::cmd("SMEMBERS").arg(key)).await?;
        let mut checked = Vec::new();
        let mut gone = Vec::new();
        for member in members {
            let mut parts = member.splitn(3, '/');
            let decoded = match (parts.next(), parts.next(), parts.next()) {
                (Some(oid), Some(task), Some(config)) => {
                    let decode = |s: &str| percent_decode_str(s).decode_utf8().map(|c| c.into_owned());
                    decode(task).ok().zip(decode(config).ok()).map(|(t, c)| (format!("{oid}/{c}"), t))
                }
                _ => None,
            };
            match decoded {
                Some((field, task_id)) => checked.push((member, self.keys.push(&task_id), field)),
                None => gone.push(member),
            }
        }
        if !checked.is_empty() {
            let parts = checked
                .iter()
                .map(|(_, push, field)| Part::Cmd(redis::cmd("HEXISTS").arg(push).arg(field).to_owned()));
            let answers = self.redis.together("push_exists", parts.collect()).await?;
            for ((member, _, _), answer) in checked.into_iter().zip(answers) {
                if matches!(answer, Value::Int(0)) {
                    gone.push(member);
                }
            }
        }
        if !gone.is_empty() {
            let cmd = redis::cmd("SREM").arg(key).arg(&gone).to_owned();
            self.redis.query::<i64>("forget_push", &cmd).await?;
        }
        Ok(gone.len())
    }
}
