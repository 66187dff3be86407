//! The A2A operations, transport-neutral.
//!
//! Each binding decodes its wire format into the generated request message plus a
//! [`CallContext`], calls one method here, and encodes what comes back. Nothing in this module
//! knows about gRPC, HTTP or JSON.
mod send;

pub use send::SendOutcome;
mod validate;

use std::sync::Arc;

use futures::stream::BoxStream;

use crate::agent::AgentExecutor;
use crate::call::{CallContext, Owner};
use crate::error::A2aError;
use crate::proto::{
    AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse, ListTasksRequest, ListTasksResponse, SendMessageRequest,
    SendMessageResponse, SubscribeToTaskRequest, Task, TaskPushNotificationConfig, TaskState,
};
use crate::push::{PushDispatcher, PushSettings, PushStats};
use crate::task::TaskEnv;
use crate::task::actor::revive;
use crate::task::handle::TaskHandle;
use crate::task::log::{SubscriberCount, TaskEvent};
use crate::task::registry::Registry;
use crate::task::store::{Cursor, TaskQuery, TaskStore};
use crate::task::view::trim_history;
use crate::task::{is_terminal, state_of};
use validate::Violations;

/// A stream of task events for one streaming call: first the Task (or one Message), then
/// updates. Each item carries its sequence number in the task's log (the snapshot carries the
/// number it was taken at).
pub type EventStream = BoxStream<'static, Result<Arc<TaskEvent>, A2aError>>;

/// What the server declares and enforces.
#[derive(Debug, Clone)]
pub struct CoreSettings {
    /// `capabilities.streaming`: SendStreamingMessage and SubscribeToTask are offered.
    pub streaming: bool,
    /// `capabilities.pushNotifications`.
    pub push_notifications: bool,
    /// The extended agent card, if one is configured.
    pub extended_card: Option<AgentCard>,
    /// Extensions a client must request (`required: true` in the card).
    pub required_extensions: Vec<String>,
    /// Events each task keeps for subscribers that fall behind.
    pub event_log_capacity: usize,
    /// Encoded bytes of events each task keeps (the newest event is always kept).
    pub event_log_bytes: usize,
    /// Commands (agent events included) each task queues before senders wait.
    pub task_queue_capacity: usize,
    /// How long a task waiting for input (nothing running, nobody subscribed) keeps its actor
    /// before it hibernates to the store; the next call that needs the actor revives it.
    /// `None`: never.
    pub idle_timeout: Option<std::time::Duration>,
    /// How webhooks are delivered when `push_notifications` is on.
    pub push: PushSettings,
}

impl Default for CoreSettings {
    fn default() -> Self {
        Self {
            streaming: true,
            push_notifications: false,
            extended_card: None,
            required_extensions: Vec::new(),
            event_log_capacity: 4096,
            event_log_bytes: 16 * 1024 * 1024,
            task_queue_capacity: 64,
            idle_timeout: Some(std::time::Duration::from_secs(60)),
            push: PushSettings::default(),
        }
    }
}

/// The A2A request handler.
pub struct Core {
    env: Arc<TaskEnv>,
    settings: CoreSettings,
    /// True once the server is draining: new calls are refused and open streams end with
    /// UNAVAILABLE so that clients resubscribe elsewhere.
    shutdown: tokio::sync::watch::Sender<bool>,
}

impl Core {
    /// A core running `executor`, keeping task state in `store`.
    /// Must be called within a tokio runtime (push delivery, when on, starts a task).
    pub fn new(executor: Arc<dyn AgentExecutor>, store: Arc<dyn TaskStore>, settings: CoreSettings) -> Self {
        let push = settings.push_notifications.then(|| {
            PushDispatcher::start(store.clone(), settings.push.clone())
                .unwrap_or_else(|e| panic!("push notifications cannot start: {e}"))
        });
        let env = Arc::new(TaskEnv {
            executor,
            store,
            registry: Arc::new(Registry::default()),
            subscribers: Arc::new(SubscriberCount::default()),
            log_capacity: settings.event_log_capacity,
            log_bytes: settings.event_log_bytes,
            channel_capacity: settings.task_queue_capacity.max(1),
            idle_timeout: settings.idle_timeout,
            push,
        });
        Self { env, settings, shutdown: tokio::sync::watch::Sender::new(false) }
    }

    /// Starts draining: new calls answer UNAVAILABLE, open streams end with UNAVAILABLE.
    /// Unary calls already running (a blocking SendMessage included) go on.
    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// Cancels every live task (when draining takes too long), so blocked callers get an answer.
    pub async fn cancel_all(&self) {
        for handle in self.env.registry.handles() {
            handle.cancel().await;
        }
    }

    /// The settings in force.
    pub fn settings(&self) -> &CoreSettings {
        &self.settings
    }

    /// Open subscriptions (streaming calls following a task) right now.
    pub fn open_subscriptions(&self) -> usize {
        self.env.subscribers.get()
    }

    /// Webhook delivery counters, when push notifications are on.
    pub fn push_stats(&self) -> Option<&PushStats> {
        self.env.push.as_deref().map(PushDispatcher::stats)
    }

    /// Tasks with a live actor right now.
    pub fn live_tasks(&self) -> usize {
        self.env.registry.len()
    }

    fn admit(&self, call: &CallContext) -> Result<(), A2aError> {
        if *self.shutdown.borrow() {
            return Err(A2aError::Unavailable(
                "the server is shutting down; retry on another replica".into(),
            ));
        }
        call.check_version()?;
        call.check_required_extensions(&self.settings.required_extensions)
    }

    /// SendMessage: blocks until the task is terminal or interrupted, unless
    /// `returnImmediately`.
    pub async fn send_message(
        &self,
        call: &CallContext,
        request: SendMessageRequest,
    ) -> Result<SendMessageResponse, A2aError> {
        self.send_message_shared(call, request).await.map(SendOutcome::into_response)
    }

    /// SendMessage, answering with the task shared (no copy of it is made for the answer).
    pub async fn send_message_shared(
        &self,
        call: &CallContext,
        request: SendMessageRequest,
    ) -> Result<SendOutcome, A2aError> {
        self.admit(call)?;
        send::send_message(self, call, request).await
    }

    /// SendStreamingMessage: the Task (or one Message), then updates until terminal or
    /// interrupted.
    pub async fn send_streaming_message(
        &self,
        call: &CallContext,
        request: SendMessageRequest,
    ) -> Result<EventStream, A2aError> {
        self.admit(call)?;
        self.require_streaming()?;
        send::send_streaming_message(self, call, request).await
    }

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
        let task = self.current_task(&call.owner(&request.tenant), &request.id).await?;
        Ok(send::trimmed(task, request.history_length))
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
        let query = TaskQuery {
            context_id: Some(request.context_id).filter(|c| !c.is_empty()),
            state,
            status_after: request.status_timestamp_after,
            page_size: page_size as usize,
            after,
        };
        let page = self.env.store.list(&call.owner(&request.tenant), &query).await?;
        let include_artifacts = request.include_artifacts.unwrap_or(false);
        let tasks = page
            .tasks
            .into_iter()
            .map(|mut task| {
                trim_history(&mut task, request.history_length);
                if !include_artifacts {
                    task.artifacts.clear();
                }
                task
            })
            .collect();
        Ok(ListTasksResponse {
            tasks,
            next_page_token: page.next.map(|c| c.encode()).unwrap_or_default(),
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
        let owner = call.owner(&request.tenant);
        for _ in 0..ATTEMPTS {
            match self.locate(&owner, &request.id).await? {
                Located::Live(handle) => {
                    if let Some(task) = handle.cancel().await {
                        return Ok(Arc::unwrap_or_clone(task));
                    }
                }
                Located::Finished(task) => {
                    return Err(A2aError::TaskNotCancelable {
                        state: state_name(&task),
                        task_id: task.id.clone(),
                    });
                }
            }
        }
        Err(busy(&request.id))
    }

    /// SubscribeToTask: the Task now, then every update until it is terminal.
    pub async fn subscribe_to_task(
        &self,
        call: &CallContext,
        request: SubscribeToTaskRequest,
    ) -> Result<EventStream, A2aError> {
        self.admit(call)?;
        self.require_streaming()?;
        validate::task_id("id", &request.id)?;
        let owner = call.owner(&request.tenant);
        for _ in 0..ATTEMPTS {
            match self.locate(&owner, &request.id).await? {
                Located::Live(handle) => {
                    if let Some(subscription) = handle.subscribe().await {
                        return Ok(send::subscription_stream(subscription, self.shutdown.subscribe()));
                    }
                }
                Located::Finished(task) => {
                    return Err(A2aError::UnsupportedOperation(format!(
                        "task {} is in terminal state {}; there is nothing to subscribe to",
                        task.id,
                        state_name(&task)
                    )));
                }
            }
        }
        Err(busy(&request.id))
    }

    /// CreateTaskPushNotificationConfig: registers a webhook for an existing task.
    pub async fn create_task_push_notification_config(
        &self,
        call: &CallContext,
        config: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, A2aError> {
        let owner = self.push_scope(call, &config.tenant, &config.task_id, None).await?;
        self.register_push_config(&owner, config).await
    }

    /// Validates a config, gives it an id if it has none, and stores it.
    async fn register_push_config(
        &self,
        owner: &Owner,
        mut config: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, A2aError> {
        validate::push_config(&config)?;
        if config.id.is_empty() {
            config.id = uuid::Uuid::new_v4().to_string();
        }
        self.env.store.put_push_config(owner, &config, self.settings.push.max_configs_per_task).await?;
        Ok(config)
    }

    /// GetTaskPushNotificationConfig.
    pub async fn get_task_push_notification_config(
        &self,
        call: &CallContext,
        request: GetTaskPushNotificationConfigRequest,
    ) -> Result<TaskPushNotificationConfig, A2aError> {
        let owner = self.push_scope(call, &request.tenant, &request.task_id, Some(&request.id)).await?;
        let configs = self.env.store.push_configs(&owner, &request.task_id).await?;
        configs
            .into_iter()
            .find(|c| c.id == request.id)
            .ok_or(A2aError::PushConfigNotFound { task_id: request.task_id, config_id: request.id })
    }

    /// ListTaskPushNotificationConfigs, paginated (default 50, at most 100 per page).
    pub async fn list_task_push_notification_configs(
        &self,
        call: &CallContext,
        request: ListTaskPushNotificationConfigsRequest,
    ) -> Result<ListTaskPushNotificationConfigsResponse, A2aError> {
        let owner = self.push_scope(call, &request.tenant, &request.task_id, None).await?;
        if !(0..=100).contains(&request.page_size) {
            return Err(A2aError::invalid_field("pageSize", "must be between 1 and 100"));
        }
        let start = match request.page_token.as_str() {
            "" => 0,
            token => token.parse::<usize>().map_err(|_| {
                A2aError::invalid_field("pageToken", "not a page token issued by this server")
            })?,
        };
        let configs = self.env.store.push_configs(&owner, &request.task_id).await?;
        let page_size = if request.page_size == 0 { 50 } else { request.page_size as usize };
        let end = (start + page_size).min(configs.len());
        let page = configs.get(start..end).map(<[_]>::to_vec).unwrap_or_default();
        let next_page_token = if end < configs.len() { end.to_string() } else { String::new() };
        Ok(ListTaskPushNotificationConfigsResponse { configs: page, next_page_token })
    }

    /// DeleteTaskPushNotificationConfig: idempotent.
    pub async fn delete_task_push_notification_config(
        &self,
        call: &CallContext,
        request: DeleteTaskPushNotificationConfigRequest,
    ) -> Result<(), A2aError> {
        let owner = self.push_scope(call, &request.tenant, &request.task_id, Some(&request.id)).await?;
        self.env.store.delete_push_config(&owner, &request.task_id, &request.id).await
    }

    /// The checks every push-config call starts with: admitted, push on, ids present, and the
    /// task visible to the caller. The caller's owner.
    async fn push_scope(
        &self,
        call: &CallContext,
        tenant: &str,
        task_id: &str,
        config_id: Option<&str>,
    ) -> Result<Owner, A2aError> {
        self.admit(call)?;
        if !self.settings.push_notifications {
            return Err(A2aError::PushNotificationNotSupported);
        }
        let mut v = Violations::default();
        v.require_id("taskId", task_id);
        if let Some(id) = config_id {
            v.require_id("id", id);
        }
        v.into_result()?;
        let owner = call.owner(tenant);
        self.require_task(&owner, task_id).await?;
        Ok(owner)
    }

    /// Fails with TaskNotFound unless `owner` has the task (live or stored).
    async fn require_task(&self, owner: &Owner, task_id: &str) -> Result<(), A2aError> {
        if self.env.registry.get(owner, task_id).is_some() {
            return Ok(());
        }
        self.stored_task(owner, task_id).await.map(|_| ())
    }

    /// GetExtendedAgentCard.
    pub async fn get_extended_agent_card(
        &self,
        call: &CallContext,
        _request: GetExtendedAgentCardRequest,
    ) -> Result<AgentCard, A2aError> {
        self.admit(call)?;
        self.settings.extended_card.clone().ok_or_else(|| {
            A2aError::UnsupportedOperation("this agent does not offer an extended agent card".into())
        })
    }

    fn require_streaming(&self) -> Result<(), A2aError> {
        if self.settings.streaming {
            Ok(())
        } else {
            Err(A2aError::UnsupportedOperation("this agent does not support streaming".into()))
        }
    }

    /// Where a task is: with its actor (revived from the store if it hibernated), or finished.
    async fn locate(&self, owner: &Owner, task_id: &str) -> Result<Located, A2aError> {
        if let Some(handle) = self.env.registry.get(owner, task_id) {
            return Ok(Located::Live(handle));
        }
        // An actor leaves the registry only after the store has its last state.
        let task = self.stored_task(owner, task_id).await?;
        if finished(&task) {
            return Ok(Located::Finished(task));
        }
        Ok(Located::Live(revive(&self.env, owner.clone(), task)))
    }

    /// The task as it is now: from its actor while live, else from the store (where a
    /// hibernated task is as its actor left it).
    async fn current_task(&self, owner: &Owner, task_id: &str) -> Result<Arc<Task>, A2aError> {
        if let Some(handle) = self.env.registry.get(owner, task_id)
            && let Some(task) = handle.snapshot().await
        {
            return Ok(task);
        }
        self.stored_task(owner, task_id).await
    }

    async fn stored_task(&self, owner: &Owner, task_id: &str) -> Result<Arc<Task>, A2aError> {
        self.env.store.get(owner, task_id).await?.ok_or_else(|| A2aError::TaskNotFound(task_id.to_owned()))
    }
}

/// Where [`Core::locate`] found a task.
enum Located {
    Live(TaskHandle),
    Finished(Arc<Task>),
}

/// How often a call goes back to the registry when the actor it found has just gone
/// (finished or hibernated): each time it finds the next state, so a few tries suffice.
const ATTEMPTS: usize = 3;

fn busy(task_id: &str) -> A2aError {
    A2aError::Unavailable(format!("task {task_id} kept changing hands; try again"))
}

/// The task's state as its enum name, for error messages.
fn state_name(task: &Task) -> String {
    state_of(task.status.as_ref()).as_str_name().to_owned()
}

/// Whether the task has ended (used where a task read from the store has no actor).
fn finished(task: &Task) -> bool {
    is_terminal(state_of(task.status.as_ref()))
}
