//! The live tasks: task id → handle of the actor that owns it, and the one way to reach a
//! task's actor whatever it is doing (live, hibernated, just gone).
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, RwLock};

use super::fleet::TaskRef;
use super::handle::TaskHandle;
use super::spawn::revive;
use super::{TaskEnv, TaskIdHasher, is_interrupted, is_terminal, state_of};
use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::Task;

/// Live (non-terminal) tasks. An actor registers itself when it starts and removes itself after
/// its final state is in the store, so a task is always found in one place or the other.
#[derive(Default)]
pub struct Registry {
    /// Keyed by the handle's own id, so the key costs no allocation of its own.
    tasks: RwLock<HashMap<Arc<str>, TaskHandle, TaskIdHasher>>,
}

impl Registry {
    /// The handle of `task_id`, if it is live and belongs to `owner`.
    pub fn get(&self, owner: &Owner, task_id: &str) -> Option<TaskHandle> {
        let tasks = self.tasks.read().unwrap_or_else(|e| e.into_inner());
        tasks.get(task_id).filter(|h| h.owner() == owner).cloned()
    }

    pub(crate) fn insert(&self, handle: TaskHandle) {
        let mut tasks = self.tasks.write().unwrap_or_else(|e| e.into_inner());
        tasks.insert(handle.id.clone(), handle);
    }

    /// Removes `handle`'s task, if the registry still holds that very actor (not one revived
    /// since).
    pub(crate) fn remove(&self, handle: &TaskHandle) {
        let mut tasks = self.tasks.write().unwrap_or_else(|e| e.into_inner());
        if let Some((id, other)) = tasks.remove_entry(handle.id())
            && !other.tx.same_channel(&handle.tx)
        {
            tasks.insert(id, other);
        }
    }

    /// The handle of `task_id`, made by `make` (under the lock) if there is none.
    pub(crate) fn get_or_insert_with(&self, task_id: &str, make: impl FnOnce() -> TaskHandle) -> TaskHandle {
        let mut tasks = self.tasks.write().unwrap_or_else(|e| e.into_inner());
        if let Some(handle) = tasks.get(task_id) {
            return handle.clone();
        }
        let handle = make();
        tasks.insert(handle.id.clone(), handle.clone());
        handle
    }

    /// How many tasks are live.
    pub fn len(&self) -> usize {
        self.tasks.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether no task is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Handles of every live task (for shutdown).
    pub fn handles(&self) -> Vec<TaskHandle> {
        self.tasks.read().unwrap_or_else(|e| e.into_inner()).values().cloned().collect()
    }
}

/// What `with_live` found.
pub enum Found<T> {
    /// The live task's actor answered this.
    Live(T),
    /// The task has ended; this is its final state, from the store.
    Finished(Arc<Task>),
}

/// How often [`with_live`] looks the task up again when the actor it found has just gone
/// (finished or hibernated): each time it finds the next state, so a few tries suffice.
const ATTEMPTS: usize = 3;

/// Asks the live actor of `owner`'s task `task_id` with `ask`, reviving the task if it
/// hibernated; or finds it finished. In a fleet the actor may live on another replica: `ask`
/// then reaches it there, and a hibernated task is revived here only if this replica wins
/// its lease. An actor may go between being found and being asked, and `ask` then yields
/// `None`: the task is looked up again, where it now is. TaskNotFound if the owner has no such
/// task; UNAVAILABLE if it keeps changing hands.
pub(crate) async fn with_live<T, Fut>(
    env: &Arc<TaskEnv>,
    owner: &Owner,
    task_id: &str,
    mut ask: impl FnMut(TaskRef) -> Fut,
) -> Result<Found<T>, A2aError>
where
    Fut: Future<Output = Result<Option<T>, A2aError>>,
{
    for _ in 0..ATTEMPTS {
        let target = match env.registry.get(owner, task_id) {
            Some(handle) => TaskRef::Local(handle),
            None => match &env.fleet {
                None => {
                    // An actor leaves the registry only after the store has its last state.
                    let task = stored_task(env, owner, task_id).await?;
                    if is_terminal(state_of(task.status.as_ref())) {
                        return Ok(Found::Finished(task));
                    }
                    // The task carries its generation: numbering goes on from it.
                    let seq = task.generation.max(0) as u64;
                    TaskRef::Local(revive(env, owner.clone(), task, seq))
                }
                Some(fleet) => {
                    let (task, seq) = fleet
                        .stored(owner, task_id)
                        .await?
                        .ok_or_else(|| A2aError::TaskNotFound(task_id.to_owned()))?;
                    if is_terminal(state_of(task.status.as_ref())) {
                        return Ok(Found::Finished(task));
                    }
                    // Only a task waiting for its client hibernates, so only such a task is
                    // revived. A running one whose lease is free has an owner that is renewing
                    // late (Redis was away) or died (a survivor will fail it): an actor here
                    // would fence the live owner out and hold the task with no agent.
                    let hibernated = is_interrupted(state_of(task.status.as_ref()));
                    if hibernated && fleet.claim(task_id).await? {
                        TaskRef::Local(revive(env, owner.clone(), task, seq))
                    } else {
                        let (fleet, owner) = (fleet.clone(), owner.clone());
                        TaskRef::Remote { fleet, owner, task_id: task_id.to_owned() }
                    }
                }
            },
        };
        if let Some(answer) = ask(target).await? {
            return Ok(Found::Live(answer));
        }
    }
    Err(A2aError::Unavailable(format!("task {task_id} kept changing hands; try again")))
}

/// `owner`'s task as it is now: its live actor's snapshot when it lives here, else as stored
/// (an actor leaves the registry only after the store has its last state; in a fleet, the
/// store holds every event anyone was shown).
pub(crate) async fn current_task(env: &TaskEnv, owner: &Owner, task_id: &str) -> Result<Arc<Task>, A2aError> {
    if let Some(handle) = env.registry.get(owner, task_id)
        && let Some(task) = handle.snapshot().await
    {
        return task;
    }
    stored_task(env, owner, task_id).await
}

/// `owner`'s task as stored (where a finished or hibernated task is as its actor left it).
pub(crate) async fn stored_task(env: &TaskEnv, owner: &Owner, task_id: &str) -> Result<Arc<Task>, A2aError> {
    env.store.get(owner, task_id).await?.ok_or_else(|| A2aError::TaskNotFound(task_id.to_owned()))
}
