//! The default, in-process task store, with bounded retention of finished tasks.
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::push_configs::PushConfigTable;
use super::{Cursor, PushConfigLimits, TaskPage, TaskQuery, TaskStore};
use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::{Task, TaskPushNotificationConfig};
use crate::task::{is_terminal, state_of};

/// How long finished tasks stay readable. Live tasks are never evicted.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// Keep at most this many finished tasks (the oldest finished go first).
    pub max_finished: usize,
    /// Drop finished tasks this long after they finished.
    pub max_age: Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Self { max_finished: 10_000, max_age: Duration::from_secs(3600) }
    }
}

struct Record {
    owner: Owner,
    task: Arc<Task>,
}

#[derive(Default)]
struct State {
    tasks: HashMap<String, Record>,
    /// Push notification configs by task id, each with the owner that created it.
    push_configs: PushConfigTable,
    /// Finished task ids in the order they finished.
    finished: VecDeque<(String, Instant)>,
}

/// Tasks in a map, finished ones evicted by count and age.
pub struct MemoryStore {
    retention: Retention,
    state: Mutex<State>,
}

impl MemoryStore {
    /// An empty store with the given retention.
    pub fn new(retention: Retention) -> Self {
        Self { retention, state: Mutex::new(State::default()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl State {
    /// Takes the expired finished tasks out; the caller drops them after releasing the lock,
    /// so freeing large tasks never holds up other calls.
    fn evict(&mut self, retention: &Retention, now: Instant) -> Vec<Record> {
        let mut evicted = Vec::new();
        while let Some((id, finished_at)) = self.finished.front() {
            let too_many = self.finished.len() > retention.max_finished;
            let too_old = now.duration_since(*finished_at) > retention.max_age;
            if !too_many && !too_old {
                break;
            }
            evicted.extend(self.tasks.remove(id));
            self.push_configs.remove_task(id);
            self.finished.pop_front();
        }
        evicted
    }
}

#[async_trait]
impl TaskStore for MemoryStore {
    async fn save(&self, owner: &Owner, task: Arc<Task>) -> Result<(), A2aError> {
        let now = Instant::now();
        let finished = is_terminal(state_of(task.status.as_ref()));
        let (previous, evicted) = {
            let mut state = self.lock();
            let previous = match state.tasks.get_mut(&task.id) {
                Some(record) => Some(std::mem::replace(&mut record.task, task.clone())),
                None => {
                    let record = Record { owner: owner.clone(), task: task.clone() };
                    state.tasks.insert(task.id.clone(), record);
                    None
                }
            };
            let was_finished = previous.as_ref().is_some_and(|t| is_terminal(state_of(t.status.as_ref())));
            if finished && !was_finished {
                state.finished.push_back((task.id.clone(), now));
            }
            (previous, state.evict(&self.retention, now))
        };
        drop((previous, evicted));
        Ok(())
    }

    async fn get(&self, owner: &Owner, task_id: &str) -> Result<Option<Arc<Task>>, A2aError> {
        let mut state = self.lock();
        state.evict(&self.retention, Instant::now());
        Ok(state.tasks.get(task_id).filter(|record| &record.owner == owner).map(|record| record.task.clone()))
    }

    async fn list(&self, owner: &Owner, query: &TaskQuery) -> Result<TaskPage, A2aError> {
        let mut state = self.lock();
        let evicted = state.evict(&self.retention, Instant::now());
        let after_nanos =
            query.status_after.as_ref().map(|t| t.seconds as i128 * 1_000_000_000 + t.nanos as i128);
        let mut matches: Vec<(Cursor, &Task)> = state
            .tasks
            .values()
            .filter(|r| &r.owner == owner)
            .map(|r| &*r.task)
            .filter(|t| query.context_id.as_ref().is_none_or(|c| &t.context_id == c))
            .filter(|t| query.state.is_none_or(|s| state_of(t.status.as_ref()) == s))
            .map(|t| (Cursor::of(t), t))
            .filter(|(c, _)| after_nanos.is_none_or(|after| c.timestamp_nanos >= after))
            .collect();
        let total = matches.len();
        matches.sort_by(|a, b| a.0.sort_key().cmp(&b.0.sort_key()));
        let start = match &query.after {
            Some(after) => matches.partition_point(|(c, _)| c.sort_key() <= after.sort_key()),
            None => 0,
        };
        let page: Vec<_> = matches[start..].iter().take(query.page_size).collect();
        let next =
            (start + page.len() < matches.len()).then(|| page.last().map(|(c, _)| c.clone())).flatten();
        let tasks = page.into_iter().map(|(_, t)| Task::clone(t)).collect();
        drop(matches);
        drop(state);
        drop(evicted);
        Ok(TaskPage { tasks, next, total })
    }

    async fn put_push_config(
        &self,
        owner: &Owner,
        config: &TaskPushNotificationConfig,
        limits: PushConfigLimits,
    ) -> Result<(), A2aError> {
        self.lock().push_configs.put(owner, config, limits)
    }

    async fn push_configs(
        &self,
        owner: &Owner,
        task_id: &str,
    ) -> Result<Vec<TaskPushNotificationConfig>, A2aError> {
        Ok(self.lock().push_configs.of(owner, task_id))
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
}
