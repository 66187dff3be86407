//! Redis out of memory: its `maxmemory` reached under `maxmemory-policy noeviction`, so it
//! refuses every write that could grow it (`OOM command not allowed when used memory >
//! 'maxmemory'`) while still answering reads and deletes.
//!
//! Retention is what bounds Redis's memory (`retention/`), but by the limits it is given: a
//! Redis given less memory than they allow fills before they are reached, and then no write's
//! reply ever said "over the limit", so nothing evicted. Every new call failed UNAVAILABLE and
//! every task whose write Redis refused waited for the store for ever. Now each refusal for
//! memory wakes the evictor for a round that drops the fleet's oldest finished tasks whatever
//! the limits say (`RetainFor::Room`; paced, `retention::evictor`): the finished tasks are the
//! part of the store that may go, oldest first, as retention would let them go anyway. The
//! refused writes are retried as in any outage (an answer still means stored), and land once
//! there is room.
//!
//! The refusals are counted (`a2a_redis_out_of_memory_total`) and logged as an error at most
//! once per [`LOG_EVERY`], naming what to change: Redis's memory, or retention's limits.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// The least time between two error logs of Redis being out of memory.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// What a replica does when Redis refuses a write for memory.
pub(super) struct Full {
    /// Wake the evictors (of finished tasks and of records) for a round that makes room
    /// (`retention::evictor`): one each, so that a refusal reaches both.
    rooms: Mutex<Vec<Arc<Notify>>>,
    /// When (ms after `since`) the last error log was.
    since: Instant,
    logged_ms: AtomicU64,
}

impl Full {
    pub(super) fn new() -> Self {
        Self { rooms: Mutex::default(), since: Instant::now(), logged_ms: AtomicU64::new(0) }
    }

    /// A new wake-up for room, for one evictor (a store starts two).
    pub(super) fn room(&self) -> Arc<Notify> {
        let room = Arc::new(Notify::new());
        self.rooms.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(room.clone());
        room
    }

    /// Whether `error` (a failed call's text, a pipeline's included) is Redis refusing a
    /// write for memory; if so, counts it, asks the evictor for room and logs it now and then.
    pub(super) fn refused(&self, error: &str, address: &str) -> bool {
        if !is_out_of_memory(error) {
            return false;
        }
        metrics::counter!("a2a_redis_out_of_memory_total").increment(1);
        for room in self.rooms.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter() {
            room.notify_one();
        }
        let now = u64::try_from(self.since.elapsed().as_millis()).unwrap_or(u64::MAX);
        let last = self.logged_ms.load(Ordering::Relaxed);
        let due = last == 0 || now.saturating_sub(last) >= LOG_EVERY.as_millis() as u64;
        if due
            && self.logged_ms.compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            tracing::error!(
                address,
                "Redis is out of memory (its maxmemory) and refuses writes: dropping the oldest \
                 finished tasks and SendMessage records to make room. Give Redis more memory than \
                 --task-retention-bytes, the records and the live tasks need, or lower the \
                 retention limits"
            );
        }
        true
    }
}

/// Redis's refusal for memory, as a client library words it: the error code `OOM`.
fn is_out_of_memory(error: &str) -> bool {
    error.contains("OOM") && error.contains("maxmemory")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_refusal_for_memory_counts() {
        let full = Full::new();
        let pipelined = "Pipeline failure: [(Index 0, error: \"OOM\": command not allowed when used \
                         memory > 'maxmemory'.)]";
        assert!(full.refused(pipelined, "redis"));
        assert!(full.refused("OOM command not allowed when used memory > 'maxmemory'.", "redis"));
        assert!(!full.refused("no answer within 2s", "redis"));
        assert!(!full.refused("NOSCRIPT No matching script", "redis"));
    }
}
