//! The live tasks: task id → handle of the actor that owns it.
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use super::handle::TaskHandle;
use crate::call::Owner;

/// Live (non-terminal) tasks. An actor registers itself when it starts and removes itself after
/// its final state is in the store, so a task is always found in one place or the other.
#[derive(Default)]
pub struct Registry {
    /// Keyed by the handle's own id, so the key costs no allocation of its own.
    tasks: RwLock<HashMap<Arc<str>, TaskHandle>>,
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
        if tasks.get(handle.id()).is_some_and(|h| h.tx.same_channel(&handle.tx)) {
            tasks.remove(handle.id());
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
