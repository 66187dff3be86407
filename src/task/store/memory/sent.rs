//! The memory store's SendMessage records (idempotent SendMessage, `core/idempotent.rs`):
//! a map under its own lock, bounded as finished tasks are, by retention's count, age and
//! bytes. A record goes when it is older than the retention age, or when the oldest must make
//! room: for more records than retention keeps finished tasks, or for replies holding more
//! bytes than it keeps of them. Records come from calls, so a client can fill the map only
//! to those bounds, never past them.
use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use super::Retention;
use crate::call::Owner;
use crate::task::store::SentRecord;

/// One record, with its place in the claim order.
struct Held {
    record: SentRecord,
    /// Its entry in [`SentTable::order`] (a removed and claimed again key has a new one).
    seq: u64,
}

/// The records by owner and messageId, and the order they were claimed in.
#[derive(Default)]
pub(super) struct SentTable {
    records: HashMap<String, Held>,
    /// Keys in claim order with when and which claim; an entry whose key was removed or
    /// claimed again since is skipped when it reaches the front. Bounded by the count too.
    order: VecDeque<(String, Instant, u64)>,
    next_seq: u64,
    /// What the replies held add up to.
    bytes: usize,
}

/// The map key of `owner`'s `message_id`: each part length-prefixed, so no two triples meet.
fn key(owner: &Owner, message_id: &str) -> String {
    format!(
        "{}:{}{}:{}{message_id}",
        owner.tenant.len(),
        owner.tenant,
        owner.principal.len(),
        owner.principal
    )
}

impl SentTable {
    /// [`crate::task::store::TaskStore::claim_sent`].
    pub(super) fn claim(
        &mut self,
        retention: &Retention,
        now: Instant,
        owner: &Owner,
        message_id: &str,
        record: &SentRecord,
    ) -> Option<SentRecord> {
        self.evict(retention, now);
        let key = key(owner, message_id);
        if let Some(held) = self.records.get(&key) {
            return Some(held.record.clone());
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.bytes += record.reply_bytes();
        self.order.push_back((key.clone(), now, seq));
        self.records.insert(key, Held { record: record.clone(), seq });
        // A record past every bound (a reply larger than all the bytes kept) goes at once.
        self.evict(retention, now);
        None
    }

    /// [`crate::task::store::TaskStore::swap_sent`].
    pub(super) fn swap(
        &mut self,
        retention: &Retention,
        now: Instant,
        owner: &Owner,
        message_id: &str,
        old: &SentRecord,
        new: Option<&SentRecord>,
    ) -> bool {
        self.evict(retention, now);
        let key = key(owner, message_id);
        let Some(held) = self.records.get_mut(&key).filter(|held| held.record == *old) else {
            return false;
        };
        self.bytes -= held.record.reply_bytes();
        match new {
            Some(new) => {
                self.bytes += new.reply_bytes();
                held.record = new.clone();
            }
            None => drop(self.records.remove(&key)),
        }
        self.evict(retention, now);
        true
    }

    /// Drops the oldest records while retention's age, count or bytes say so.
    fn evict(&mut self, retention: &Retention, now: Instant) {
        while let Some((key, claimed, seq)) = self.order.front() {
            let too_old = now.saturating_duration_since(*claimed) > retention.max_age;
            let too_many = self.order.len() > retention.max_finished.max(1);
            let too_big = self.bytes > retention.max_bytes;
            let current = self.records.get(key).is_some_and(|held| held.seq == *seq);
            if current && !(too_old || too_many || too_big) {
                return;
            }
            if current && let Some(held) = self.records.remove(key) {
                self.bytes -= held.record.reply_bytes();
            }
            self.order.pop_front();
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.records.len()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::task::store::SentState;

    fn claimed(task_id: &str) -> SentRecord {
        let state = SentState::Claimed { task_id: task_id.into(), claim: "c".into(), alive_ms: 0 };
        SentRecord { fingerprint: [0; 32], state }
    }

    fn replied(bytes: usize) -> SentRecord {
        SentRecord { fingerprint: [1; 32], state: SentState::Replied(vec![b'x'; bytes].into()) }
    }

    #[test]
    fn one_claim_per_owner_and_message_id_and_swaps_compare_first() {
        let (mut table, retention, now) = (SentTable::default(), Retention::default(), Instant::now());
        let alice = Owner { tenant: String::new(), principal: "alice".into() };
        let bob = Owner { tenant: String::new(), principal: "bob".into() };
        assert_eq!(table.claim(&retention, now, &alice, "m", &claimed("t1")), None);
        assert_eq!(table.claim(&retention, now, &alice, "m", &claimed("t2")), Some(claimed("t1")));
        assert_eq!(table.claim(&retention, now, &bob, "m", &claimed("t3")), None, "another caller's id");
        assert!(!table.swap(&retention, now, &alice, "m", &claimed("t2"), None), "not the record there");
        assert!(table.swap(&retention, now, &alice, "m", &claimed("t1"), Some(&replied(3))));
        assert_eq!(table.claim(&retention, now, &alice, "m", &claimed("t4")), Some(replied(3)));
        assert!(table.swap(&retention, now, &alice, "m", &replied(3), None));
        assert_eq!(table.claim(&retention, now, &alice, "m", &claimed("t5")), None, "removed: free again");
    }

    #[test]
    fn records_are_bounded_by_count_age_and_bytes() {
        let owner = Owner::default();
        let now = Instant::now();
        let retention = Retention { max_finished: 3, max_age: Duration::from_secs(60), max_bytes: 10 };
        let mut table = SentTable::default();
        for i in 0..10 {
            // Removed and claimed again: the stale order entries count against the bound too.
            table.claim(&retention, now, &owner, &format!("m{i}"), &claimed("t"));
            table.swap(&retention, now, &owner, &format!("m{i}"), &claimed("t"), None);
            table.claim(&retention, now, &owner, &format!("m{i}"), &claimed("t"));
        }
        assert!(table.len() <= 3 && table.order.len() <= 3, "{} records", table.len());
        assert!(table.claim(&retention, now, &owner, "m9", &claimed("u")).is_some(), "the newest stay");
        assert!(table.claim(&retention, now, &owner, "m0", &claimed("u")).is_none(), "the oldest went");

        let later = now + Duration::from_secs(61);
        table.claim(&retention, later, &owner, "fresh", &replied(4));
        assert_eq!(table.len(), 1, "every older record is past the age");
        table.claim(&retention, later, &owner, "big", &claimed("t"));
        assert!(table.swap(&retention, later, &owner, "big", &claimed("t"), Some(&replied(8))));
        assert_eq!(table.bytes, 8, "12 bytes of replies: the oldest went");
        assert!(table.claim(&retention, later, &owner, "fresh", &claimed("t")).is_none());
        table.claim(&retention, later, &owner, "huge", &replied(11));
        assert!(table.claim(&retention, later, &owner, "huge", &claimed("t")).is_none(), "never kept");
    }
}
