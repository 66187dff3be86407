//! SendMessage records in Redis (idempotent SendMessage, `core/idempotent.rs`): one STRING per
//! owner and `messageId`, `P:{o:<owner>}:sent:<message id>` (both encoded), expiring after the
//! retention age. A claim is one script (`GET`, else `SET … PX`): one round trip, atomic across
//! every replica, and on Redis 6.2 too (`SET NX GET` needs 7.0). A swap compares the whole
//! value, so only the claim's holder (whose value carries its own claim id) replaces it.
use std::sync::LazyLock;

use redis::Script;

use super::keys::owner_id;
use super::{RedisStore, millis};
use crate::call::Owner;
use crate::error::A2aError;
use crate::task::store::SentRecord;

/// KEYS: the record. ARGV: the new record, its expiry (ms). Returns the record that was
/// there (and stays), or nothing once the new one is stored.
static CLAIM: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local held = redis.call('GET', KEYS[1])
if held then return held end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
",
    )
});

/// KEYS: the record. ARGV: the record expected, the new one ('' removes it). Returns 1 if the
/// expected record was there (and is replaced, its expiry kept), else 0.
static SWAP: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL') end
return 1
",
    )
});

impl RedisStore {
    /// [`crate::task::store::TaskStore::claim_sent`].
    pub(super) async fn claim_sent_record(
        &self,
        owner: &Owner,
        message_id: &str,
        record: &SentRecord,
    ) -> Result<Option<SentRecord>, A2aError> {
        let mut claim = CLAIM.prepare_invoke();
        claim.key(self.keys.sent(&owner_id(owner), message_id));
        claim.arg(&record.encode()[..]).arg(millis(self.retention.max_age).max(1));
        let mut conn = self.redis.conn();
        let limit = self.redis.timeouts().command;
        let held: Option<Vec<u8>> =
            self.redis.run("claim_sent", limit, claim.invoke_async(&mut conn)).await?;
        held.map(|bytes| SentRecord::decode(&bytes)).transpose()
    }

    /// [`crate::task::store::TaskStore::swap_sent`].
    pub(super) async fn swap_sent_record(
        &self,
        owner: &Owner,
        message_id: &str,
        old: &SentRecord,
        new: Option<&SentRecord>,
    ) -> Result<bool, A2aError> {
        let mut swap = SWAP.prepare_invoke();
        swap.key(self.keys.sent(&owner_id(owner), message_id));
        swap.arg(&old.encode()[..]).arg(new.map(|r| r.encode()).as_deref().unwrap_or_default());
        let mut conn = self.redis.conn();
        let limit = self.redis.timeouts().command;
        let swapped: i64 = self.redis.run("swap_sent", limit, swap.invoke_async(&mut conn)).await?;
        Ok(swapped == 1)
    }
}
