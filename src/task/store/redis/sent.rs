//! SendMessage records in Redis (idempotent SendMessage, `core/idempotent.rs`): one STRING per
//! owner and `messageId`, `P:{o:<owner>}:sent:<message id>` (both encoded), expiring after the
//! retention age (unless its task is written born finished on a node: `born_finished.rs`). A
//! claim is one native `SET NX PX`: atomic across every replica, one round trip (shared with
//! the claims of calls that come meanwhile, `pipelined.rs`), no script to run; only a retry,
//! whose `SET` finds the record there, reads it with a second command (`SET NX GET` would do
//! both at once, but needs Redis 7.0). A swap compares the whole value, so only the claim's
//! holder (whose value carries its own claim id) replaces it.
use std::sync::LazyLock;
use std::time::{SystemTime, UNIX_EPOCH};

use redis::Script;

use super::keys::{encode, owner_id, position};
use super::retention::Holds;
use super::{RedisStore, millis, retention};
use crate::call::Owner;
use crate::error::A2aError;
use crate::task::store::{SentRecord, SentState};

/// How often a claim is tried when the record it found is gone before it could read it.
const CLAIM_TRIES: usize = 3;

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
        let key = self.keys.sent(&owner_id(owner), message_id);
        let ttl = millis(self.retention.max_age).max(1);
        let mut claim = redis::cmd("SET");
        claim.arg(&key).arg(&record.encode()[..]).arg("NX").arg("PX").arg(ttl);
        // The record that is there can expire or be removed between the two commands: then
        // the message is free again, and the claim is tried anew.
        for _ in 0..CLAIM_TRIES {
            let set: Option<String> = self.pipelined.query(claim.clone()).await?;
            if set.is_some() {
                return Ok(None);
            }
            let held: Option<Vec<u8>> = self.redis.query("claim_sent", redis::cmd("GET").arg(&key)).await?;
            if let Some(bytes) = held {
                return SentRecord::decode(&bytes).map(Some);
            }
        }
        Err(A2aError::Unavailable(format!("messageId {message_id:?} keeps changing hands; retry")))
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
        if let (1, Some(reply @ SentRecord { state: SentState::Replied(_), .. })) = (swapped, new) {
            self.note_record(owner, message_id, reply).await?;
        }
        Ok(swapped == 1)
    }

    /// Notes a record no task takes along for retention, as a finished task without a task:
    /// a direct reply's, or a follow-up's once its task holds the message (a new task's member
    /// names only the message that made it). Records have a retention set of their own, with
    /// the same limits (`retention::Holds`), and the evictor unlinks the record when it goes
    /// (`retention/member.rs`). Without this such a
    /// record stayed the whole retention age, one per call, however few tasks retention kept.
    pub(super) async fn note_record(
        &self,
        owner: &Owner,
        message_id: &str,
        record: &SentRecord,
    ) -> Result<(), A2aError> {
        let oid = owner_id(owner);
        let message = encode(message_id);
        let size = record.encode().len() as u64;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i128);
        let member = retention::member(size, &position(now), "", &oid, "", Some(&message));
        let note = self.note_part(Holds::Records, message_id, member, size);
        let noted = self.redis.together("note_record", vec![note]).await?;
        if let Some(noted) = noted.into_iter().next() {
            self.noted(Holds::Records, noted, size)?;
        }
        Ok(())
    }
}
