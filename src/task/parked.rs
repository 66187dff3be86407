//! Parked tasks: those hibernated in the store while they wait for input or auth
//! (INPUT_REQUIRED, AUTH_REQUIRED), each with the moment it expires (`--input-timeout-secs`).
//!
//! A hibernated task has no actor to time it, so its actor writes it here before it
//! hibernates (in a fleet: before it gives the lease up), and a revived task's actor takes it
//! out. The ledger is what `sweep.rs` walks to expire hibernated tasks, and what
//! `--max-parked-tasks[-per-principal]` counts: a parked task holds store space, not a live
//! slot. On one server the ledger is in memory ([`MemoryParked`]); in a fleet it is in Redis
//! (`store/redis/parked.rs`), so every replica sees every parked task.
//!
//! An entry may outlive its parking by a little (a revived task's removal failed): the sweep
//! finds such an entry when it is due and drops or moves it, so nothing is held for ever.
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use crate::call::Owner;
use crate::error::{A2aError, LimitKind};

/// The deadline of a task that never expires (`--input-timeout-secs 0`): far beyond any
/// clock, yet exact as a Redis score (a double).
pub const NEVER: u64 = 1 << 52;

/// How many parked tasks there are, and when the first of them expires.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParkedUsage {
    /// Parked tasks of every principal.
    pub total: usize,
    /// Parked tasks of the principal asked about.
    pub of_principal: usize,
    /// The earliest deadline (ms since the epoch) of all parked tasks, if any.
    pub first_deadline_ms: Option<u64>,
    /// The earliest deadline of the principal's parked tasks, if any.
    pub principal_first_deadline_ms: Option<u64>,
}

/// The ledger of parked tasks, by owner and task id, ordered by deadline.
#[async_trait]
pub trait ParkedTasks: Send + Sync + 'static {
    /// Notes (or moves) `owner`'s task as parked until `deadline_ms`.
    async fn park(&self, owner: &Owner, task_id: &str, deadline_ms: u64) -> Result<(), A2aError>;
    /// Takes the task out; nothing if it is not there.
    async fn unpark(&self, owner: &Owner, task_id: &str) -> Result<(), A2aError>;
    /// Up to `max` parked tasks whose deadline is at or before `now_ms`, earliest first.
    async fn due(&self, now_ms: u64, max: usize) -> Result<Vec<(Owner, String)>, A2aError>;
    /// The counts and first deadlines, overall and of `principal`.
    async fn usage(&self, principal: &str) -> Result<ParkedUsage, A2aError>;
    /// The same, possibly as read a moment ago (a shared ledger answers from a short-lived
    /// copy, so admission away from the caps costs no store round trip per call).
    async fn recent_usage(&self, principal: &str) -> Result<ParkedUsage, A2aError> {
        self.usage(principal).await
    }
}

/// The caps on parked tasks (0: none) and how long a parked task may wait.
#[derive(Debug, Clone, Copy)]
pub struct ParkedCaps {
    /// `--max-parked-tasks`.
    pub max_total: usize,
    /// `--max-parked-tasks-per-principal`.
    pub max_per_principal: usize,
    /// `--input-timeout-secs` (`None`: never).
    pub input_timeout: Option<Duration>,
}

impl ParkedCaps {
    /// Refuses a new task of `principal` while its parked tasks, or everyone's, are at their
    /// cap: a new task may come to wait too. The refusal says when the first parked task that
    /// counts expires (plus a sweep, which is when its slot is free), or nothing when none
    /// ever does (`--input-timeout-secs 0`).
    pub async fn admit(&self, ledger: &dyn ParkedTasks, principal: &str) -> Result<(), A2aError> {
        if self.max_total == 0 && self.max_per_principal == 0 {
            return Ok(());
        }
        // Far from both caps a recent count decides; near one, only the exact count does.
        if !self.near(&ledger.recent_usage(principal).await?) {
            return Ok(());
        }
        let usage = ledger.usage(principal).await?;
        let (limit, first, detail) = if self.max_per_principal != 0
            && usage.of_principal >= self.max_per_principal
        {
            let detail = format!(
                "principal {principal:?} has {} tasks parked waiting for input, the most allowed (answer or cancel one first)",
                usage.of_principal
            );
            ("max-parked-tasks-per-principal", usage.principal_first_deadline_ms, detail)
        } else if self.max_total != 0 && usage.total >= self.max_total {
            let detail =
                format!("the server holds {} tasks parked waiting for input, the most allowed", usage.total);
            ("max-parked-tasks", usage.first_deadline_ms, detail)
        } else {
            return Ok(());
        };
        Err(A2aError::limit(LimitKind::Quota, limit, detail).retry_after(self.retry_after(first, now_ms())))
    }

    /// Whether `usage` is within a tenth of a cap (at least one task): close enough that a
    /// count a moment old could let a task past it.
    fn near(&self, usage: &ParkedUsage) -> bool {
        let near = |count: usize, cap: usize| cap != 0 && count + (cap / 10).max(1) >= cap;
        near(usage.of_principal, self.max_per_principal) || near(usage.total, self.max_total)
    }

    /// Seconds until a parked slot frees: the first deadline, plus the sweep that acts on it;
    /// at least 1; `None` when parked tasks never expire.
    fn retry_after(&self, first_deadline_ms: Option<u64>, now_ms: u64) -> Option<u64> {
        let timeout = self.input_timeout?;
        let sweep = super::sweep::period(timeout);
        let wait_ms = first_deadline_ms.unwrap_or(now_ms).saturating_sub(now_ms).min(millis(timeout));
        Some((wait_ms + millis(sweep)).div_ceil(1000).max(1))
    }
}

/// The ledger of a single server, in memory: entries come only from tasks that exist and
/// hibernated, so it holds no more than the store does.
#[derive(Default)]
pub struct MemoryParked(Mutex<Ledger>);

#[derive(Default)]
struct Ledger {
    /// Task id → its owner and deadline.
    tasks: HashMap<Arc<str>, (Owner, u64)>,
    /// Every entry by deadline.
    order: BTreeSet<(u64, Arc<str>)>,
    /// Each principal's entries by deadline; a principal leaves with its last entry.
    per_principal: HashMap<String, BTreeSet<(u64, Arc<str>)>>,
}

impl Ledger {
    fn remove(&mut self, task_id: &str) {
        let Some((id, (owner, deadline))) = self.tasks.remove_entry(task_id) else { return };
        self.order.remove(&(deadline, id.clone()));
        if let Some(own) = self.per_principal.get_mut(&owner.principal) {
            own.remove(&(deadline, id));
            if own.is_empty() {
                self.per_principal.remove(&owner.principal);
            }
        }
    }
}

impl MemoryParked {
    fn lock(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl ParkedTasks for MemoryParked {
    async fn park(&self, owner: &Owner, task_id: &str, deadline_ms: u64) -> Result<(), A2aError> {
        let mut ledger = self.lock();
        ledger.remove(task_id);
        let id: Arc<str> = task_id.into();
        ledger.order.insert((deadline_ms, id.clone()));
        ledger.per_principal.entry(owner.principal.clone()).or_default().insert((deadline_ms, id.clone()));
        ledger.tasks.insert(id, (owner.clone(), deadline_ms));
        Ok(())
    }

    async fn unpark(&self, _owner: &Owner, task_id: &str) -> Result<(), A2aError> {
        self.lock().remove(task_id);
        Ok(())
    }

    async fn due(&self, now_ms: u64, max: usize) -> Result<Vec<(Owner, String)>, A2aError> {
        let ledger = self.lock();
        let due = ledger.order.iter().take_while(|(deadline, _)| *deadline <= now_ms).take(max);
        Ok(due.filter_map(|(_, id)| Some((ledger.tasks.get(id)?.0.clone(), id.to_string()))).collect())
    }

    async fn usage(&self, principal: &str) -> Result<ParkedUsage, A2aError> {
        let ledger = self.lock();
        let own = ledger.per_principal.get(principal);
        Ok(ParkedUsage {
            total: ledger.tasks.len(),
            of_principal: own.map_or(0, BTreeSet::len),
            first_deadline_ms: ledger.order.first().map(|(deadline, _)| *deadline),
            principal_first_deadline_ms: own.and_then(|own| own.first()).map(|(deadline, _)| *deadline),
        })
    }
}

/// When a task whose status asked for input at `status`'s time stops waiting (ms since the
/// epoch): that time (now, if it has none or one from the future: an agent's own clock) plus
/// `timeout`; [`NEVER`] without a timeout.
pub fn input_deadline_ms(status: Option<&crate::proto::TaskStatus>, timeout: Option<Duration>) -> u64 {
    let Some(timeout) = timeout else { return NEVER };
    let now = now_ms();
    let since = status.and_then(|s| s.timestamp.as_ref()).map_or(now, |t| {
        (t.seconds.max(0) as u64).saturating_mul(1000).saturating_add(t.nanos.max(0) as u64 / 1_000_000)
    });
    since.min(now).saturating_add(millis(timeout))
}

/// Milliseconds since the epoch, now.
pub fn now_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    millis(since)
}

pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(principal: &str) -> Owner {
        Owner { tenant: String::new(), principal: principal.into() }
    }

    #[tokio::test]
    async fn the_memory_ledger_counts_orders_and_forgets() {
        let ledger = MemoryParked::default();
        ledger.park(&owner("alice"), "a1", 300).await.unwrap();
        ledger.park(&owner("alice"), "a2", 100).await.unwrap();
        ledger.park(&owner("bob"), "b1", 200).await.unwrap();
        ledger.park(&owner("alice"), "a2", 400).await.unwrap();
        let usage = ledger.usage("alice").await.unwrap();
        assert_eq!(
            usage,
            ParkedUsage {
                total: 3,
                of_principal: 2,
                first_deadline_ms: Some(200),
                principal_first_deadline_ms: Some(300)
            }
        );
        let due: Vec<String> = ledger.due(300, 10).await.unwrap().into_iter().map(|(_, id)| id).collect();
        assert_eq!(due, ["b1", "a1"], "a moved deadline counts, earliest first");
        ledger.unpark(&owner("bob"), "b1").await.unwrap();
        ledger.unpark(&owner("bob"), "b1").await.unwrap();
        assert_eq!(ledger.usage("bob").await.unwrap().of_principal, 0);
        assert!(!ledger.lock().per_principal.contains_key("bob"), "an empty principal leaves");
    }

    #[tokio::test]
    async fn a_refusal_says_when_the_first_parked_task_expires() {
        let ledger = MemoryParked::default();
        let now = now_ms();
        ledger.park(&owner("alice"), "a1", now + 10_000).await.unwrap();
        let caps =
            ParkedCaps { max_total: 0, max_per_principal: 1, input_timeout: Some(Duration::from_secs(60)) };
        let refused = caps.admit(&ledger, "alice").await.unwrap_err();
        assert_eq!(refused.metadata()["limit"], "max-parked-tasks-per-principal");
        // 10 s to the deadline, and the sweep (a quarter of the timeout) after it.
        assert!(matches!(refused.retry_after_secs(), Some(24..=25)), "{:?}", refused.retry_after_secs());
        assert!(caps.admit(&ledger, "bob").await.is_ok(), "another principal's share is apart");
        let never = ParkedCaps { input_timeout: None, ..caps };
        assert_eq!(never.admit(&ledger, "alice").await.unwrap_err().retry_after_secs(), None);
        let total = ParkedCaps { max_total: 1, max_per_principal: 0, ..caps };
        assert_eq!(total.admit(&ledger, "bob").await.unwrap_err().metadata()["limit"], "max-parked-tasks");
    }
}
