//! Tasks: their lifecycle rules, the per-task actor, its event log, the registry of live
//! actors, what a task and its callers may hold (`budget.rs`, `quota.rs`), the tasks parked
//! waiting for input and their expiry (`parked.rs`, `sweep.rs`) and the store of task state.
pub mod actor;
pub mod budget;
pub mod encoded;
mod execution;
pub mod fleet;
pub mod handle;
mod journal;
pub mod log;
pub(crate) mod mailbox;
mod metrics;
pub mod parked;
mod phase;
pub mod quota;
pub mod registry;
pub(crate) mod rules;
pub mod spawn;
pub mod store;
pub mod sweep;
pub mod view;

use std::sync::Arc;

use crate::agent::AgentExecutor;
use crate::call::Owner;
use crate::proto::{TaskState, TaskStatus};
use budget::TaskLimits;
use log::{SubscriberCount, TaskEvent};
use quota::LiveTasks;
use registry::Registry;
use store::TaskStore;

/// What every actor shares: the agent, the store, the registry and the limits.
pub struct TaskEnv {
    /// The agent that executes messages.
    pub executor: Arc<dyn AgentExecutor>,
    /// Where task state is persisted.
    pub store: Arc<dyn TaskStore>,
    /// Live tasks.
    pub registry: Arc<Registry>,
    /// The live tasks counted against `--max-live-tasks[-per-principal]` (not hibernated
    /// ones: those are in `parked`).
    pub live: Arc<LiveTasks>,
    /// The hibernated tasks waiting for input, with their deadlines (in a fleet, in Redis).
    pub parked: Arc<dyn parked::ParkedTasks>,
    /// How long a task may wait for input or auth before it is canceled (`None`: for ever).
    pub input_timeout: Option<std::time::Duration>,
    /// What one task may hold.
    pub limits: TaskLimits,
    /// Open subscriptions, for observability and leak tests.
    pub subscribers: Arc<SubscriberCount>,
    /// Events kept per task for subscribers that fall behind.
    pub log_capacity: usize,
    /// Bytes (encoded) of events kept per task.
    pub log_bytes: usize,
    /// Commands (agent events included) queued per task before senders wait.
    pub channel_capacity: usize,
    /// How long an idle waiting task keeps its actor (`None`: for ever).
    pub idle_timeout: Option<std::time::Duration>,
    /// Where events go besides the subscribers (webhook delivery), when push notifications
    /// are on.
    pub observer: Option<Arc<dyn EventObserver>>,
    /// The other replicas sharing the store, when this server is one of a fleet.
    pub fleet: Option<Arc<dyn fleet::Fleet>>,
}

/// The hasher of the maps keyed by task id (the store's tasks, the registry, the live-task
/// ledger): ids are this server's own UUIDs, so SipHash's guard against chosen keys buys
/// nothing there, while it cost a few percent of a unary call's CPU. Seeded per process.
pub(crate) type TaskIdHasher = foldhash::fast::RandomState;

/// What hears of every event an actor publishes, besides its subscribers: webhook delivery.
/// A trait, so that the task layer does not depend on the push module built on top of it.
pub trait EventObserver: Send + Sync {
    /// Called by the actor for each event, in order; must not block (hand the event over and
    /// return).
    fn published(&self, owner: &Owner, task_id: &str, event: Arc<TaskEvent>, terminal: bool);
}

/// COMPLETED, FAILED, CANCELED and REJECTED: nothing happens to the task afterwards.
pub fn is_terminal(state: TaskState) -> bool {
    matches!(state, TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected)
}

/// INPUT_REQUIRED and AUTH_REQUIRED: the task waits for the client (or a credential).
pub fn is_interrupted(state: TaskState) -> bool {
    matches!(state, TaskState::InputRequired | TaskState::AuthRequired)
}

/// The state of a status, treating unknown numbers as UNSPECIFIED.
pub fn state_of(status: Option<&TaskStatus>) -> TaskState {
    status.and_then(|s| TaskState::try_from(s.state).ok()).unwrap_or(TaskState::Unspecified)
}

/// The current time as a protobuf Timestamp, truncated to milliseconds (spec §5.6.1).
pub fn now() -> pbjson_types::Timestamp {
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    pbjson_types::Timestamp {
        seconds: since_epoch.as_secs() as i64,
        nanos: (since_epoch.subsec_millis() * 1_000_000) as i32,
    }
}
