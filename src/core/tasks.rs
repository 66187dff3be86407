//! GetTask, ListTasks and CancelTask: reading the caller's tasks and ending one.
use std::sync::Arc;

use super::validate::{self, Violations};
use super::{Core, state_name};
use crate::call::{CallContext, Owner};
use crate::error::A2aError;
use crate::proto::{CancelTaskRequest, GetTaskRequest, ListTasksRequest, ListTasksResponse, Task, TaskState};
use crate::task::fleet::TaskRef;
use crate::task::registry::{Found, with_live};
use crate::task::store::{Cursor, TaskQuery};
use crate::task::view::{trim_history, trimmed};
use crate::task::{is_terminal, state_of};
use prost::Message as _;

impl Core {
    /// GetTask.
    pub async fn get_task(&self, call: &CallContext, request: GetTaskRequest) -> Result<Task, A2aError> {
        self.get_task_shared(call, request).await.map(Arc::unwrap_or_clone)
    }

    /// GetTask, answering with the task shared (no copy of it is made for the answer).
    pub async fn get_task_shared(
        &self,
        call: &CallContext,
        request: GetTaskRequest,
    ) -> Result<Arc<Task>, A2aError> {
        self.admit(call)?;
        let mut v = Violations::default();
        v.require_id("id", &request.id);
        v.non_negative("historyLength", request.history_length);
        v.into_result()?;
        let owner = call.owner(&request.tenant)?;
        let task = match request.current_generation {
            None => self.current_task(&owner, &request.id).await?,
            Some(known) => self.task_after(&owner, &request.id, known).await?,
        };
        Ok(trimmed(task, request.history_length))
    }

    /// Long-poll (A2A dev-1.1 `currentGeneration`): the task once its generation is past
    /// `known`, or as it is when it is terminal or `max_long_poll` has passed. The wait is a
    /// feed on the task's log, woken by its next update: no polling, no thread.
    async fn task_after(&self, owner: &Owner, task_id: &str, known: i64) -> Result<Arc<Task>, A2aError> {
        let settled = |task: &Task| task.generation > known || is_terminal(state_of(task.status.as_ref()));
        let task = self.current_task(owner, task_id).await?;
        if settled(&task) || self.settings.max_long_poll.is_zero() {
            return Ok(task);
        }
        let deadline = tokio::time::Instant::now() + self.settings.max_long_poll;
        let subscribe = |handle: TaskRef| async move { handle.subscribe(None).await };
        let subscription = match with_live(&self.env, owner, task_id, subscribe).await? {
            Found::Live(subscription) => subscription,
            Found::Finished(task) => return Ok(task),
        };
        if settled(&subscription.snapshot) {
            return Ok(subscription.snapshot);
        }
        let mut feed = subscription.feed;
        // Ends at the deadline, at the end of the task's stream, or at an update past `known`.
        while let Ok(Some(Ok(event))) = tokio::time::timeout_at(deadline, feed.next()).await {
            if event.seq as i64 > known {
                break;
            }
        }
        drop(feed);
        self.current_task(owner, task_id).await
    }

    /// ListTasks: the caller's tasks, newest status first, cursor-paginated.
    pub async fn list_tasks(
        &self,
        call: &CallContext,
        request: ListTasksRequest,
    ) -> Result<ListTasksResponse, A2aError> {
        self.admit(call)?;
        let mut v = Violations::default();
        let page_size = request.page_size.unwrap_or(50);
        if !(1..=100).contains(&page_size) {
            v.add("pageSize", "must be between 1 and 100");
        }
        v.non_negative("historyLength", request.history_length);
        let state = match TaskState::try_from(request.status) {
            Ok(TaskState::Unspecified) => None,
            Ok(state) => Some(state),
            Err(_) => {
                v.add("status", format!("{} is not a task state", request.status));
                None
            }
        };
        v.into_result()?;
        let after = match request.page_token.as_str() {
            "" => None,
            token => Some(Cursor::decode(token)?),
        };
        let include_artifacts = request.include_artifacts.unwrap_or(false);
        let query = TaskQuery {
            context_id: Some(request.context_id).filter(|c| !c.is_empty()),
            state,
            status_after: request.status_timestamp_after,
            page_size: page_size as usize,
            after,
            include_artifacts,
        };
        let page = self.env.store.list(&call.owner(&request.tenant)?, &query).await?;
        let mut tasks: Vec<Task> = Vec::with_capacity(page.tasks.len());
        let mut next = page.next;
        let mut bytes = 0usize;
        for mut task in page.tasks {
            trim_history(&mut task, request.history_length);
            if !include_artifacts {
                task.artifacts.clear();
            }
            // Bounded at the source: a client that never reads holds at most one page.
            bytes = bytes.saturating_add(task.encoded_len());
            if bytes > self.settings.max_list_page_bytes
                && let Some(last) = tasks.last()
            {
                next = Some(Cursor::of(last));
                break;
            }
            tasks.push(task);
        }
        Ok(ListTasksResponse {
            tasks,
            next_page_token: next.map(|c| c.encode()).unwrap_or_default(),
            page_size,
            total_size: page.total as i32,
        })
    }

    /// CancelTask: a live task becomes CANCELED; a finished one is not cancelable.
    pub async fn cancel_task(
        &self,
        call: &CallContext,
        request: CancelTaskRequest,
    ) -> Result<Task, A2aError> {
        self.admit(call)?;
        validate::task_id("id", &request.id)?;
        let owner = call.owner(&request.tenant)?;
        match with_live(&self.env, &owner, &request.id, |handle| async move { handle.cancel().await }).await?
        {
            Found::Live(task) => Ok(Arc::unwrap_or_clone(task)),
            Found::Finished(task) => {
                Err(A2aError::TaskNotCancelable { state: state_name(&task), task_id: task.id.clone() })
            }
        }
    }

    /// The task as it is now: from its actor while live, else from the store (where a
    /// hibernated task is as its actor left it).
    pub(super) async fn current_task(&self, owner: &Owner, task_id: &str) -> Result<Arc<Task>, A2aError> {
        crate::task::registry::current_task(&self.env, owner, task_id).await
    }
}
