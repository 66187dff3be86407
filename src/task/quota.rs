//! What callers may hold open at once: live tasks (in total and per principal,
//! `--max-live-tasks[-per-principal]`) and subscriptions (per task and per principal,
//! `--max-subscriptions-per-{task,principal}`).
//!
//! Live tasks are counted in the task layer because a task's slot outlives the call that
//! took it: the actor gives it back when the task becomes terminal, however that happens
//! (the agent finishing or failing, a cancel, a fleet replica losing the task). A task that
//! hibernates gives its slot back: it holds store space, not an actor, and counts against
//! `--max-parked-tasks` instead (`parked.rs`); whichever replica revives it counts it again.
//!
//! A refusal here says `Retry-After` [`RETRY_AFTER_SECS`]: a slot frees whenever any task
//! ends or hibernates, or a stream ends, which the server cannot foresee, and a refusal costs
//! the server next to nothing, so a short wait is the useful answer.
//!
//! A slot is released by task id, idempotently, so no path can release twice or release
//! another task's slot. Each map holds only keys in use: a key leaves when its count is zero.
use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};

use super::TaskIdHasher;
use crate::call::Owner;
use crate::error::{A2aError, LimitKind};

/// Counts by key (a principal, or a task id); a key leaves the map when its count drops to
/// zero. Hashed like the task-id maps: a client chooses no more keys here than the principals
/// it can authenticate as, and the seed is the process's own (SipHash was a tenth of a
/// microsecond of every SendMessage, for the add and the remove of its principal).
struct Counts<K>(HashMap<K, usize, TaskIdHasher>);

impl<K: Hash + Eq> Counts<K> {
    fn new() -> Self {
        Self(HashMap::default())
    }

    fn get(&self, key: &K) -> usize {
        self.0.get(key).copied().unwrap_or(0)
    }

    fn add(&mut self, key: K) {
        *self.0.entry(key).or_default() += 1;
    }

    /// The stored key equal to `key`, to share instead of allocating another.
    fn key<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> Option<&K>
    where
        K: Borrow<Q>,
    {
        self.0.get_key_value(key).map(|(stored, _)| stored)
    }

    fn remove(&mut self, key: &K) {
        if let Some(count) = self.0.get_mut(key) {
            *count -= 1;
            if *count == 0 {
                self.0.remove(key);
            }
        }
    }
}

/// The `Retry-After` of a live-task or subscription refusal, in seconds.
pub const RETRY_AFTER_SECS: u64 = 1;

/// QUOTA_EXCEEDED of the flag `limit` once `count` has reached `cap` (0: no cap), saying
/// `what` (is at `count`) for a person.
fn check(count: usize, cap: usize, limit: &str, what: impl FnOnce() -> String) -> Result<(), A2aError> {
    if cap != 0 && count >= cap {
        let detail = format!("{}, the most allowed", what());
        return Err(A2aError::limit(LimitKind::Quota, limit, detail).retry_after(Some(RETRY_AFTER_SECS)));
    }
    Ok(())
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The live (non-terminal) tasks this server counts, by task id and by principal.
pub struct LiveTasks {
    max_total: usize,
    max_per_principal: usize,
    inner: Mutex<Live>,
}

struct Live {
    /// Task id → its principal.
    tasks: HashMap<Arc<str>, Arc<str>, TaskIdHasher>,
    per_principal: Counts<Arc<str>>,
}

impl LiveTasks {
    /// A ledger allowing `max_total` live tasks and `max_per_principal` per principal (0: no
    /// cap).
    pub fn new(max_total: usize, max_per_principal: usize) -> Self {
        let inner = Mutex::new(Live { tasks: HashMap::default(), per_principal: Counts::new() });
        Self { max_total, max_per_principal, inner }
    }

    /// Takes a slot for `principal`'s new task `task_id`, or refuses with QUOTA_EXCEEDED. The
    /// slot goes back when the [`Reservation`] is dropped, unless the task came to be
    /// ([`Reservation::commit`]): then when the task ends ([`LiveTasks::release`]).
    pub fn reserve(self: &Arc<Self>, principal: &str, task_id: &str) -> Result<Reservation, A2aError> {
        let mut live = lock(&self.inner);
        // The principal's key, shared when it holds tasks already (no allocation per call).
        let principal: Arc<str> = match live.per_principal.key(principal) {
            Some(key) => key.clone(),
            None => principal.into(),
        };
        let own = live.per_principal.get(&principal);
        check(own, self.max_per_principal, "max-live-tasks-per-principal", || {
            format!("principal {principal:?} has {own} live tasks (finish or cancel one first)")
        })?;
        let all = live.tasks.len();
        check(all, self.max_total, "max-live-tasks", || format!("the server holds {all} live tasks"))?;
        let task_id: Arc<str> = task_id.into();
        live.insert(task_id.clone(), principal);
        Ok(Reservation { ledger: self.clone(), task_id: Some(task_id) })
    }

    /// Counts a task that became live here without asking (revived from the store): refusing
    /// would strand a task that exists. Nothing changes if it is counted already.
    pub fn count(&self, principal: &str, task_id: &str) {
        let mut live = lock(&self.inner);
        if !live.tasks.contains_key(task_id) {
            live.insert(task_id.into(), principal.into());
        }
    }

    /// Gives `task_id`'s slot back (it ended, or left this replica); nothing if it has none.
    pub fn release(&self, task_id: &str) {
        let mut live = lock(&self.inner);
        if let Some(principal) = live.tasks.remove(task_id) {
            live.per_principal.remove(&principal);
        }
    }

    /// Live tasks counted now.
    pub fn len(&self) -> usize {
        lock(&self.inner).tasks.len()
    }

    /// Whether no live task is counted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Live tasks of `principal` counted now.
    pub fn of(&self, principal: &str) -> usize {
        lock(&self.inner).per_principal.get(&Arc::from(principal))
    }
}

impl Live {
    fn insert(&mut self, task_id: Arc<str>, principal: Arc<str>) {
        self.per_principal.add(principal.clone());
        self.tasks.insert(task_id, principal);
    }
}

/// A new task's slot, taken before its agent runs; given back on drop unless committed (the
/// agent answered with a direct message, or failed before the task existed).
pub struct Reservation {
    ledger: Arc<LiveTasks>,
    task_id: Option<Arc<str>>,
}

impl Reservation {
    /// The task exists: its slot stays until the task ends.
    pub fn commit(mut self) {
        self.task_id = None;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(task_id) = self.task_id.take() {
            self.ledger.release(&task_id);
        }
    }
}

/// The open subscriptions (SubscribeToTask and SendStreamingMessage streams), per task and
/// per principal. Tasks are counted by owner and id, so another principal naming a task can
/// neither reach its count nor learn from a refusal that it exists.
pub struct Subscriptions {
    max_per_task: usize,
    max_per_principal: usize,
    inner: Mutex<Open>,
}

struct Open {
    per_task: Counts<(Owner, Arc<str>)>,
    per_principal: Counts<Arc<str>>,
}

impl Subscriptions {
    /// Allowing `max_per_task` streams on one task and `max_per_principal` per principal
    /// (0: no cap).
    pub fn new(max_per_task: usize, max_per_principal: usize) -> Self {
        let inner = Mutex::new(Open { per_task: Counts::new(), per_principal: Counts::new() });
        Self { max_per_task, max_per_principal, inner }
    }

    /// Takes a slot for a stream of `owner`'s task `task_id`, or refuses with QUOTA_EXCEEDED;
    /// the slot goes back when the [`SubscriptionSlot`] is dropped (with the stream, whether
    /// it ended or its client went away).
    pub fn open(self: &Arc<Self>, owner: &Owner, task_id: &str) -> Result<SubscriptionSlot, A2aError> {
        let mut open = lock(&self.inner);
        let principal: Arc<str> = owner.principal.as_str().into();
        let own = open.per_principal.get(&principal);
        check(own, self.max_per_principal, "max-subscriptions-per-principal", || {
            format!("principal {principal:?} has {own} open streams")
        })?;
        let task = (owner.clone(), Arc::<str>::from(task_id));
        let followers = open.per_task.get(&task);
        check(followers, self.max_per_task, "max-subscriptions-per-task", || {
            format!("task {task_id} has {followers} open streams")
        })?;
        open.per_principal.add(principal.clone());
        open.per_task.add(task.clone());
        Ok(SubscriptionSlot { subscriptions: self.clone(), principal, task })
    }

    /// Open streams of `principal` now.
    pub fn of_principal(&self, principal: &str) -> usize {
        lock(&self.inner).per_principal.get(&Arc::from(principal))
    }

    /// Open streams of `owner`'s task `task_id` now.
    pub fn of_task(&self, owner: &Owner, task_id: &str) -> usize {
        lock(&self.inner).per_task.get(&(owner.clone(), Arc::from(task_id)))
    }
}

/// One open stream's place in [`Subscriptions`], given back on drop.
pub struct SubscriptionSlot {
    subscriptions: Arc<Subscriptions>,
    principal: Arc<str>,
    task: (Owner, Arc<str>),
}

impl Drop for SubscriptionSlot {
    fn drop(&mut self) {
        let mut open = lock(&self.subscriptions.inner);
        open.per_principal.remove(&self.principal);
        open.per_task.remove(&self.task);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(principal: &str) -> Owner {
        Owner { tenant: String::new(), principal: principal.into() }
    }

    #[test]
    fn live_slots_are_capped_per_principal_and_in_total_and_released_once() {
        let live = Arc::new(LiveTasks::new(3, 2));
        let a1 = live.reserve("alice", "a1").unwrap();
        a1.commit();
        let _a2 = live.reserve("alice", "a2").unwrap();
        let refused = live.reserve("alice", "a3").err().unwrap();
        assert_eq!(refused.metadata()["limit"], "max-live-tasks-per-principal");
        assert_eq!(refused.retry_after_secs(), Some(RETRY_AFTER_SECS), "slots free as tasks end");
        let b1 = live.reserve("bob", "b1").unwrap();
        let full = live.reserve("carol", "c1").err().unwrap();
        assert_eq!(full.metadata()["limit"], "max-live-tasks");
        drop(b1);
        assert_eq!((live.len(), live.of("bob")), (2, 0), "an uncommitted reservation goes back");
        live.release("a1");
        live.release("a1");
        assert_eq!(live.of("alice"), 1, "released once");
        live.count("alice", "a2");
        assert_eq!(live.of("alice"), 1, "counting a counted task changes nothing");
    }

    #[test]
    fn subscriptions_are_capped_per_task_of_an_owner_and_per_principal() {
        let subs = Arc::new(Subscriptions::new(2, 3));
        let s1 = subs.open(&owner("alice"), "t").unwrap();
        let _s2 = subs.open(&owner("alice"), "t").unwrap();
        let refused = subs.open(&owner("alice"), "t").err().unwrap();
        assert_eq!(refused.metadata()["limit"], "max-subscriptions-per-task");
        let _other = subs.open(&owner("mallory"), "t").expect("another owner's count is apart");
        let _s3 = subs.open(&owner("alice"), "u").unwrap();
        let refused = subs.open(&owner("alice"), "v").err().unwrap();
        assert_eq!(refused.metadata()["limit"], "max-subscriptions-per-principal");
        drop(s1);
        assert_eq!(subs.of_task(&owner("alice"), "t"), 1);
        assert_eq!(subs.of_principal("alice"), 2);
        assert!(subs.open(&owner("alice"), "t").is_ok());
    }
}
