//! The default, in-process task store, with bounded retention of finished tasks, each held
//! packed in its protobuf encoding (`stored.rs`).
//!
//! One lock guards the tasks, the ListTasks indexes (`index.rs`) and retention (`retention.rs`),
//! and no critical section grows with the number of tasks: a save or a get is a few hash
//! operations, a ListTasks page a seek plus the page (the page's tasks are decoded or copied
//! after the lock is released), and eviction runs in batches of `EVICT_BATCH` with the lock released in
//! between, the evicted tasks freed outside it. Saves let finished tasks run a batch over the
//! count before evicting (reads never see them: a read evicts first).
//!
//! Saves do not index: a saved task waits in `unindexed` until the next listing indexes what
//! is waiting, `INDEX_BATCH` tasks per critical section, and reads its page in the section
//! that finds nothing left. Under a steady stream of quick tasks most are evicted before any
//! listing, and never cost the four ordered inserts and removes (about 7 % of a SendMessage's
//! server CPU when saves indexed); a listing pays for the tasks saved since the last one.
mod index;
mod ranked;
mod retention;
mod sent;
mod stored;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use bytes::Bytes;

use super::push_configs::PushConfigTable;
use super::{PushConfigLimits, PushRegistration, SentRecord, TaskPage, TaskQuery, TaskStore, status_nanos};
use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::Task;
use crate::task::encoded::{EncodedTask, encode};
use crate::task::{TaskIdHasher, is_terminal, state_of};
use index::{Entry, Indexes, Position};
use retention::{Counted, Finished};
pub use retention::{DEFAULT_MAX_BYTES, Retention};
use sent::SentTable;
use stored::Stored;

/// Finished tasks evicted per critical section, and how far past the count saves let them
/// run before evicting: a batch of the oldest is removed while the index paths to them are
/// warm, and other calls still wait microseconds, not milliseconds, when a large task pushes
/// many small ones out or a burst expires at once.
const EVICT_BATCH: usize = 64;

/// Tasks a listing indexes per critical section while it catches the indexes up: other calls
/// wait at most about this many index inserts.
const INDEX_BATCH: usize = 128;

struct Record {
    owner: Owner,
    task: Stored,
    /// Where the task belongs in the ListTasks order.
    entry: Entry,
    /// `None` when the indexes hold `entry`; `Some(i)` when they hold nothing of the task yet
    /// and `State::unindexed[i]` is its id.
    unindexed: Option<usize>,
    /// How retention counts it, once it has finished.
    finished: Option<Counted>,
}

#[derive(Default)]
struct State {
    tasks: HashMap<Arc<str>, Record, TaskIdHasher>,
    indexes: Indexes,
    /// The ids of the tasks the indexes do not hold yet, each once (see `Record::unindexed`).
    unindexed: Vec<Arc<str>>,
    /// Push notification configs by task id, each with the owner that created it.
    push_configs: PushConfigTable,
    finished: Finished,
}

/// Tasks in a map with per-owner ListTasks indexes; finished ones evicted by count, age and
/// bytes.
pub struct MemoryStore {
    retention: Retention,
    state: Mutex<State>,
    /// The SendMessage records (`sent.rs`), under a lock of their own: a claim never waits
    /// for a save or a listing.
    sent: Mutex<SentTable>,
}

impl MemoryStore {
    /// An empty store with the given retention.
    pub fn new(retention: Retention) -> Self {
        Self { retention, state: Mutex::new(State::default()), sent: Mutex::default() }
    }

    fn sent(&self) -> std::sync::MutexGuard<'_, SentTable> {
        self.sent.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `work` on the state with eviction, one lock per batch (the workers contend for
    /// this lock, and a call should take it once when it can). A read evicts everything due
    /// first, a batch per critical section, and runs `work` in the section that evicted the
    /// last batch: it must not see what retention dropped. A save runs `work` first, then
    /// evicts in the same section, and only once a whole batch is due
    /// ([`Finished::save_due`]), the rest a batch per section after. Evicted tasks are freed
    /// outside the lock.
    fn with_evicted<T>(&self, now: Instant, read: bool, work: impl FnOnce(&mut State) -> T) -> T {
        if read {
            loop {
                let mut state = self.lock();
                let (evicted, more) = state.evict(&self.retention, now);
                if !more {
                    let result = work(&mut state);
                    drop(state);
                    drop(evicted);
                    return result;
                }
                drop(state);
                drop(evicted);
            }
        }
        let (result, evicted, mut more) = {
            let mut state = self.lock();
            let result = work(&mut state);
            let (evicted, more) = if state.finished.save_due(&self.retention, now, EVICT_BATCH) {
                state.evict(&self.retention, now)
            } else {
                (Vec::new(), false)
            };
            (result, evicted, more)
        };
        drop(evicted);
        while more {
            let evicted;
            (evicted, more) = self.lock().evict(&self.retention, now);
            drop(evicted);
        }
        result
    }
}

impl State {
    /// Takes out up to [`EVICT_BATCH`] finished tasks retention no longer keeps; says whether
    /// more are due. The caller drops them after releasing the lock.
    fn evict(&mut self, retention: &Retention, now: Instant) -> (Vec<Record>, bool) {
        let mut evicted = Vec::new();
        while let Some(due) = self.finished.due(retention, now) {
            if evicted.len() == EVICT_BATCH {
                return (evicted, true);
            }
            let counted = self.tasks.get(&due.id).and_then(|r| r.finished).filter(|&c| due.counts(Some(c)));
            self.finished.pop(counted);
            if counted.is_some() {
                evicted.extend(self.remove(&due.id));
            }
        }
        (evicted, false)
    }

    /// Removes a task, its index entries and its push configs (not its retention entry).
    fn remove(&mut self, id: &str) -> Option<Record> {
        let record = self.tasks.remove(id)?;
        match record.unindexed {
            None => self.indexes.remove(&record.owner, &record.entry),
            Some(slot) => {
                // The last waiting id fills the slot, and its record learns where it went.
                self.unindexed.swap_remove(slot);
                if let Some(moved) = self.unindexed.get(slot)
                    && let Some(moved) = self.tasks.get_mut(moved)
                {
                    moved.unindexed = Some(slot);
                }
            }
        }
        self.push_configs.remove_task(id);
        Some(record)
    }

    /// Indexes up to `limit` of the tasks saves left unindexed; whether any still wait.
    fn catch_up(&mut self, limit: usize) -> bool {
        let Self { tasks, indexes, unindexed, .. } = self;
        for _ in 0..limit {
            let Some(id) = unindexed.pop() else { return false };
            if let Some(record) = tasks.get_mut(&id)
                && record.unindexed.take().is_some()
            {
                indexes.insert(&record.owner, &record.entry);
            }
        }
        !unindexed.is_empty()
    }

    /// Stores `task` as `stored` for `owner` (finished and `bytes` long, if `bytes` is given),
    /// leaving its indexing to the next listing; returns what it replaced, for the caller to
    /// drop outside the lock. A finished task larger than all retention may keep is not kept:
    /// it is removed instead.
    fn save(
        &mut self,
        owner: &Owner,
        task: &Task,
        (stored, bytes): (Stored, Option<usize>),
        retention: &Retention,
        now: Instant,
    ) -> Result<Option<Stored>, A2aError> {
        let stored_owner = self.tasks.get(task.id.as_str()).map(|r| &r.owner);
        if stored_owner.is_some_and(|o| o != owner) {
            return Err(A2aError::Internal(format!("task {} is stored for another owner", task.id)));
        }
        if bytes.is_some_and(|b| b > retention.max_bytes) {
            let forgotten = self.remove(&task.id);
            if let Some(counted) = forgotten.as_ref().and_then(|r| r.finished) {
                self.finished.forget(counted);
            }
            return Ok(forgotten.map(|r| r.task));
        }
        let Self { tasks, indexes, finished, unindexed, .. } = self;
        let entry = |id: Arc<str>| Entry {
            position: Position::new(status_nanos(task), id),
            state: state_of(task.status.as_ref()),
            context_id: task.context_id.clone(),
        };
        let Some(record) = tasks.get_mut(task.id.as_str()) else {
            let id: Arc<str> = Arc::from(task.id.as_str());
            let entry = entry(id.clone());
            let waiting = Some(wait_for_index(unindexed, id.clone()));
            let counted = bytes.map(|bytes| finished.push(id.clone(), now, bytes));
            let record =
                Record { owner: owner.clone(), task: stored, entry, unindexed: waiting, finished: counted };
            tasks.insert(id, record);
            return Ok(None);
        };
        let entry = entry(record.entry.position.id.clone());
        if entry != record.entry {
            // Out of the indexes until the next listing puts it back where it now belongs.
            if record.unindexed.is_none() {
                indexes.remove(owner, &record.entry);
                record.unindexed = Some(wait_for_index(unindexed, record.entry.position.id.clone()));
            }
            record.entry = entry;
        }
        record.finished = match (record.finished, bytes) {
            (Some(counted), Some(bytes)) => Some(finished.resize(counted, bytes)),
            (None, Some(bytes)) => Some(finished.push(record.entry.position.id.clone(), now, bytes)),
            // A finished task saved unfinished (no rule does that) keeps its place and size.
            (counted, None) => counted,
        };
        Ok(Some(std::mem::replace(&mut record.task, stored)))
    }
}

/// Puts `id` among the tasks waiting for a listing to index them; its slot there.
fn wait_for_index(unindexed: &mut Vec<Arc<str>>, id: Arc<str>) -> usize {
    unindexed.push(id);
    unindexed.len() - 1
}

#[async_trait]
impl TaskStore for MemoryStore {
    async fn save(&self, owner: &Owner, task: Arc<Task>) -> Result<(), A2aError> {
        self.save_encoded(owner, EncodedTask::plain(task)).await
    }

    async fn save_encoded(&self, owner: &Owner, task: EncodedTask) -> Result<(), A2aError> {
        let now = Instant::now();
        // Packed before taking the lock (unless the actor did): it walks the whole task. One
        // too large to keep is not kept (the save forgets it).
        let (task, proto) = task.into_parts();
        let finished = is_terminal(state_of(task.status.as_ref()));
        let packed = finished.then(|| proto.unwrap_or_else(|| encode(&task)));
        let bytes = packed.as_ref().map(Bytes::len);
        let stored = match packed {
            Some(packed) if packed.len() <= self.retention.max_bytes => Stored::Packed(packed),
            _ => Stored::Live(task.clone()),
        };
        let stored = (stored, bytes);
        let replaced =
            self.with_evicted(now, false, |state| state.save(owner, &task, stored, &self.retention, now))?;
        drop((replaced, task));
        Ok(())
    }

    async fn get(&self, owner: &Owner, task_id: &str) -> Result<Option<Arc<Task>>, A2aError> {
        let stored = self.with_evicted(Instant::now(), true, |state| {
            state.tasks.get(task_id).filter(|record| &record.owner == owner).map(|record| record.task.clone())
        });
        stored.map(|stored| stored.task(task_id)).transpose()
    }

    async fn list(&self, owner: &Owner, query: &TaskQuery) -> Result<TaskPage, A2aError> {
        let now = Instant::now();
        let (tasks, next, total) = loop {
            let page = self.with_evicted(now, true, |state| {
                if state.catch_up(INDEX_BATCH) {
                    return None;
                }
                let page = state.indexes.page(owner, query);
                let tasks: Vec<(Arc<str>, Stored)> = page
                    .ids
                    .iter()
                    .filter_map(|id| state.tasks.get(&**id).map(|r| (id.clone(), r.task.clone())))
                    .collect();
                Some((tasks, page.next, page.total))
            });
            if let Some(page) = page {
                break page;
            }
        };
        // Decoded or copied (the core trims them) outside the lock; one that does not decode
        // is skipped (and reported), so it cannot break the listing.
        let artifacts = query.include_artifacts;
        let tasks: Vec<Task> =
            tasks.into_iter().filter_map(|(id, t)| t.into_owned(&id, artifacts).ok()).collect();
        Ok(TaskPage { tasks, next, total })
    }

    async fn put_push_config(
        &self,
        owner: &Owner,
        registration: &PushRegistration,
        limits: PushConfigLimits,
    ) -> Result<(), A2aError> {
        // Evicts first, as a read does: a due task's configs must not count against the cap.
        self.with_evicted(Instant::now(), true, |state| state.push_configs.put(owner, registration, limits))
    }

    async fn push_configs(&self, owner: &Owner, task_id: &str) -> Result<Vec<PushRegistration>, A2aError> {
        Ok(self.with_evicted(Instant::now(), true, |state| state.push_configs.of(owner, task_id)))
    }

    async fn delete_push_config(
        &self,
        owner: &Owner,
        task_id: &str,
        config_id: &str,
    ) -> Result<(), A2aError> {
        self.lock().push_configs.delete(owner, task_id, config_id);
        Ok(())
    }

    async fn claim_sent(
        &self,
        owner: &Owner,
        message_id: &str,
        record: &SentRecord,
    ) -> Result<Option<SentRecord>, A2aError> {
        Ok(self.sent().claim(&self.retention, Instant::now(), owner, message_id, record))
    }

    async fn swap_sent(
        &self,
        owner: &Owner,
        message_id: &str,
        old: &SentRecord,
        new: Option<&SentRecord>,
    ) -> Result<bool, A2aError> {
        Ok(self.sent().swap(&self.retention, Instant::now(), owner, message_id, old, new))
    }
}

#[cfg(test)]
mod tests;
