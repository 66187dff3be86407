//! The A2A operations, transport-neutral.
//!
//! Each binding decodes its wire format into the generated request message plus a
//! [`CallContext`], calls one method here, and encodes what comes back. Nothing in this module
//! knows about gRPC, HTTP or JSON.
//!
//! One file per concept, each adding its RPCs to [`Core`]: `send.rs` (SendMessage,
//! SendStreamingMessage; a retried message is answered, not run again, by `idempotent.rs`
//! with `fingerprint.rs`), `stream.rs` (the Task-then-events streams, SubscribeToTask),
//! `tasks.rs` (GetTask, ListTasks, CancelTask), `push_config.rs` (the four push-config RPCs),
//! `validate.rs` (request checks) and `rate.rs` (requests per second per principal). This file
//! holds what they share: the settings, the admission checks and the lookups of a caller's
//! task.
mod fingerprint;
mod idempotent;
mod inline_webhook;
mod push_config;
mod rate;
mod send;
mod stream;
mod tasks;
pub(crate) mod validate;

pub use send::SendOutcome;
pub use validate::MAX_NESTING;

use std::sync::Arc;

use futures::stream::BoxStream;

use crate::agent::AgentExecutor;
use crate::call::{CallContext, Owner};
use crate::error::A2aError;
use crate::proto::{AgentCard, GetExtendedAgentCardRequest, Task};
use crate::push::{PushDispatcher, PushSettings, PushStats};
use crate::task::TaskEnv;
use crate::task::budget::TaskLimits;
use crate::task::fleet::Fleet;
use crate::task::log::{SubscriberCount, TaskEvent};
use crate::task::parked::{MemoryParked, ParkedCaps};
use crate::task::quota::{LiveTasks, Subscriptions};
use crate::task::registry::{Registry, stored_task};
use crate::task::state_of;
use crate::task::store::TaskStore;

/// A stream of task events for one streaming call: first the Task (or one Message), then
/// updates. Each item carries its sequence number in the task's log (the snapshot carries the
/// number it was taken at).
pub type EventStream = BoxStream<'static, Result<Arc<TaskEvent>, A2aError>>;

/// Memory a task's event log may hold by default, as the log counts its events (about 550
/// bytes plus twice the encoding each): about 21,000 small events.
pub const DEFAULT_EVENT_LOG_BYTES: usize = 16 * 1024 * 1024;

/// Events a task's log keeps at most by default. A backstop only: the byte bound holds first
/// for events of any size, so a burst is kept for a lagging subscriber whatever its count.
pub const DEFAULT_EVENT_LOG_CAPACITY: usize = 65_536;

/// How long a task may wait for input by default: a day, for a person to come back to it.
pub const DEFAULT_INPUT_TIMEOUT_SECS: u64 = 86_400;

/// Parked (hibernated, waiting) tasks allowed by default. A parked task is its stored Task
/// only (no actor, channel or event log): a few KiB for a typical one (`tests/attacks/
/// parked.rs` measures it), so 100,000 is a few hundred MiB of a 24 GiB machine in the memory
/// store, and nothing of a replica's RAM in Redis.
pub const DEFAULT_MAX_PARKED_TASKS: usize = 100_000;

/// One principal's share of the parked tasks by default: a tenth, as for live tasks.
pub const DEFAULT_MAX_PARKED_TASKS_PER_PRINCIPAL: usize = 10_000;

/// What the server declares and enforces. In the limits (`max_*`), 0 means no limit.
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
    /// Events each task keeps at most for subscribers that fall behind (a backstop).
    pub event_log_capacity: usize,
    /// Memory each task's events may hold, as the log counts it (the newest event is always
    /// kept): the bound that normally limits the log.
    pub event_log_bytes: usize,
    /// Commands (agent events included) each task queues before senders wait.
    pub task_queue_capacity: usize,
    /// How long a task waiting for input (nothing running, nobody subscribed) keeps its actor
    /// before it hibernates to the store; the next call that needs the actor revives it.
    /// `None`: never.
    pub idle_timeout: Option<std::time::Duration>,
    /// The longest a long-polling GetTask (`currentGeneration`, A2A dev-1.1) is held.
    pub max_long_poll: std::time::Duration,
    /// How long a SubscribeToTask or SendStreamingMessage stream may last before the server
    /// ends it with a resumable close (so a load balancer can move the client); `None`: for
    /// ever.
    pub max_stream: Option<std::time::Duration>,
    /// How webhooks are delivered when `push_notifications` is on.
    pub push: PushSettings,
    /// Every call needs a checked credential (authentication is on): a call whose binding
    /// applied no authentication outcome is refused rather than served as anonymous.
    pub require_authentication: bool,
    /// `--max-parts`: parts in one message a client sends.
    pub max_parts: usize,
    /// `--max-struct-values`: JSON values in the structured data of one request (data parts and
    /// metadata), each of which costs hundreds of bytes while a JSON request is decoded.
    pub max_struct_values: usize,
    /// `--max-task-bytes`: what one task's history and artifacts may hold (`task::budget`).
    pub max_task_bytes: usize,
    /// `--max-history`: messages in one task's history.
    pub max_history: usize,
    /// `--max-list-page-bytes`: a ListTasks page ends before the task that would take its
    /// encoding past this (a page holds at least one task); `nextPageToken` goes on from there.
    pub max_list_page_bytes: usize,
    /// `--dedupe-messages`: a SendMessage whose message its caller sent already is answered
    /// with the first call's outcome (`idempotent.rs`); off, every message runs.
    pub dedupe_messages: bool,
    /// `--max-live-tasks`: tasks not yet terminal on this server (this replica, in a fleet).
    pub max_live_tasks: usize,
    /// `--max-live-tasks-per-principal`: the same, per principal.
    pub max_live_tasks_per_principal: usize,
    /// `--input-timeout-secs`: how long a task may wait for input or auth (live or
    /// hibernated) before it is canceled, saying why. `None`: for ever.
    pub input_timeout: Option<std::time::Duration>,
    /// `--max-parked-tasks`: hibernated tasks waiting for input (in a fleet, of the whole
    /// fleet); at the cap new tasks are refused until one expires, is answered or canceled.
    pub max_parked_tasks: usize,
    /// `--max-parked-tasks-per-principal`: the same, per principal.
    pub max_parked_tasks_per_principal: usize,
    /// `--max-subscriptions-per-task`: open streams following one task.
    pub max_subscriptions_per_task: usize,
    /// `--max-subscriptions-per-principal`: open streams of one principal.
    pub max_subscriptions_per_principal: usize,
    /// `--max-requests-per-sec`: calls per second per principal.
    pub max_requests_per_sec: u32,
    /// `--max-requests-burst`: calls a principal may make at once before its rate applies
    /// (0: one second's worth).
    pub max_requests_burst: u32,
}

impl Default for CoreSettings {
    fn default() -> Self {
        Self {
            streaming: true,
            push_notifications: false,
            extended_card: None,
            required_extensions: Vec::new(),
            event_log_capacity: DEFAULT_EVENT_LOG_CAPACITY,
            event_log_bytes: DEFAULT_EVENT_LOG_BYTES,
            task_queue_capacity: 64,
            idle_timeout: Some(std::time::Duration::from_secs(60)),
            max_long_poll: std::time::Duration::from_secs(30),
            max_stream: None,
            push: PushSettings::default(),
            require_authentication: false,
            max_parts: 1_000,
            max_struct_values: 20_000,
            max_task_bytes: 8 * 1024 * 1024,
            max_history: 1_000,
            max_list_page_bytes: 4 << 20,
            dedupe_messages: true,
            max_live_tasks: 10_000,
            max_live_tasks_per_principal: 1_000,
            input_timeout: Some(std::time::Duration::from_secs(DEFAULT_INPUT_TIMEOUT_SECS)),
            max_parked_tasks: DEFAULT_MAX_PARKED_TASKS,
            max_parked_tasks_per_principal: DEFAULT_MAX_PARKED_TASKS_PER_PRINCIPAL,
            max_subscriptions_per_task: 1_000,
            max_subscriptions_per_principal: 10_000,
            max_requests_per_sec: 0,
            max_requests_burst: 0,
        }
    }
}

/// The A2A request handler.
pub struct Core {
    /// What the task actors share; the RPC files reach tasks through it.
    env: Arc<TaskEnv>,
    /// Webhook delivery (also the actors' event observer), when push notifications are on.
    push: Option<Arc<PushDispatcher>>,
    settings: CoreSettings,
    /// The open streams, against `max_subscriptions_per_*`.
    subscriptions: Arc<Subscriptions>,
    /// Requests per second per principal, when limited.
    rate: Option<rate::RateLimit>,
    /// True once the server is draining: open streams end with the resumable close so that
    /// clients resubscribe elsewhere (calls are still served; see `begin_shutdown`).
    shutdown: tokio::sync::watch::Sender<bool>,
}

impl Core {
    /// A core running `executor`, keeping task state in `store`.
    /// Must be called within a tokio runtime (push delivery, when on, starts a task).
    pub fn new(executor: Arc<dyn AgentExecutor>, store: Arc<dyn TaskStore>, settings: CoreSettings) -> Self {
        Self::build(executor, store, None, settings)
    }

    /// A core that is one replica of `fleet`: `store` is the store the replicas share, and a
    /// task may live on any of them.
    pub fn in_fleet(
        executor: Arc<dyn AgentExecutor>,
        store: Arc<dyn TaskStore>,
        fleet: Arc<dyn Fleet>,
        settings: CoreSettings,
    ) -> Self {
        Self::build(executor, store, Some(fleet), settings)
    }

    fn build(
        executor: Arc<dyn AgentExecutor>,
        store: Arc<dyn TaskStore>,
        fleet: Option<Arc<dyn Fleet>>,
        settings: CoreSettings,
    ) -> Self {
        let push = settings.push_notifications.then(|| {
            PushDispatcher::start(store.clone(), settings.push.clone())
                .unwrap_or_else(|e| panic!("push notifications cannot start: {e}"))
        });
        let env = Arc::new(TaskEnv {
            executor,
            store,
            registry: Arc::new(Registry::default()),
            live: Arc::new(LiveTasks::new(settings.max_live_tasks, settings.max_live_tasks_per_principal)),
            parked: match &fleet {
                Some(fleet) => fleet.parked_tasks(),
                None => Arc::new(MemoryParked::default()),
            },
            input_timeout: settings.input_timeout,
            limits: TaskLimits { max_bytes: settings.max_task_bytes, max_history: settings.max_history },
            subscribers: Arc::new(SubscriberCount::default()),
            log_capacity: settings.event_log_capacity,
            log_bytes: settings.event_log_bytes,
            channel_capacity: settings.task_queue_capacity.max(1),
            idle_timeout: settings.idle_timeout,
            observer: push.clone().map(|push| push as Arc<dyn crate::task::EventObserver>),
            fleet: fleet.clone(),
        });
        if let Some(fleet) = &fleet {
            fleet.attach(Arc::downgrade(&env));
        }
        if let Some(push) = &push {
            push.attach(Arc::downgrade(&env));
            if fleet.as_ref().is_some_and(|fleet| fleet.deliver_webhooks(push.clone())) {
                push.use_durable_outbox();
            }
        }
        if let Some(timeout) = settings.input_timeout {
            tokio::spawn(crate::task::sweep::run(Arc::downgrade(&env), timeout));
        }
        let subscriptions = Arc::new(Subscriptions::new(
            settings.max_subscriptions_per_task,
            settings.max_subscriptions_per_principal,
        ));
        let rate = rate::RateLimit::new(settings.max_requests_per_sec, settings.max_requests_burst);
        Self { env, push, settings, subscriptions, rate, shutdown: tokio::sync::watch::Sender::new(false) }
    }

    /// Starts draining: open streams, and any opened from now on, end with the resumable close
    /// (UNAVAILABLE, `STREAM_CLOSED`). Calls are still served: a call that reaches a draining
    /// server came on a connection the client (a load balancer) opened before, and refusing it
    /// fails it, since the balancer cannot know it was not acted on. Unary calls, running ones
    /// and new ones alike, go on; a task started now runs here like the others until the drain
    /// timeout. The server stops taking connections (`server/drain.rs`), which moves new calls
    /// elsewhere.
    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// Whether the server is draining.
    pub fn is_draining(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Hibernates every live task that only waits for its client: in a fleet, a draining
    /// replica leaves those to the others instead of holding them until it exits.
    pub fn park_waiting(&self) {
        for handle in self.env.registry.handles() {
            handle.park();
        }
    }

    /// Waits until no task is live here, or `limit` passes (a draining fleet replica lets
    /// running tasks finish).
    pub async fn wait_idle(&self, limit: std::time::Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        while self.live_tasks() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
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

    /// The fleet this server is a replica of, if any.
    pub fn fleet(&self) -> Option<&Arc<dyn Fleet>> {
        self.env.fleet.as_ref()
    }

    /// Webhook delivery counters, when push notifications are on.
    pub fn push_stats(&self) -> Option<&PushStats> {
        self.push.as_deref().map(PushDispatcher::stats)
    }

    /// Tasks with a live actor right now.
    pub fn live_tasks(&self) -> usize {
        self.env.registry.len()
    }

    /// The live tasks counted against `--max-live-tasks` (on a single server, hibernated ones
    /// too), in total and of one principal.
    pub fn counted_live_tasks(&self, principal: Option<&str>) -> usize {
        match principal {
            None => self.env.live.len(),
            Some(principal) => self.env.live.of(principal),
        }
    }

    /// The caps on parked tasks, which a new task must pass (`send.rs`).
    fn parked_caps(&self) -> ParkedCaps {
        ParkedCaps {
            max_total: self.settings.max_parked_tasks,
            max_per_principal: self.settings.max_parked_tasks_per_principal,
            input_timeout: self.settings.input_timeout,
        }
    }

    /// The parked tasks (hibernated, waiting for input) in the ledger, in total and of one
    /// principal (in a fleet, of the whole fleet).
    pub async fn counted_parked_tasks(&self, principal: &str) -> Result<(usize, usize), A2aError> {
        let usage = self.env.parked.usage(principal).await?;
        Ok((usage.total, usage.of_principal))
    }

    /// The open streams counted against `--max-subscriptions-per-principal`.
    pub fn counted_subscriptions(&self, principal: &str) -> usize {
        self.subscriptions.of_principal(principal)
    }

    /// Every call passes here first: a credential (when required), the caller's request rate,
    /// a store that answers, the version and extensions. A draining server still admits calls
    /// (see `begin_shutdown`).
    fn admit(&self, call: &CallContext) -> Result<(), A2aError> {
        call.check_authentication(self.settings.require_authentication)?;
        if let Some(rate) = &self.rate {
            rate.check(&call.principal)?;
        }
        if let Some(unavailable) = self.env.fleet.as_ref().and_then(|fleet| fleet.unavailable()) {
            return Err(unavailable);
        }
        call.check_version()?;
        call.check_required_extensions(&self.settings.required_extensions)
    }

    /// A receiver that turns true once the server drains, for streams to end on.
    fn draining(&self) -> tokio::sync::watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Fails with TaskNotFound unless `owner` has the task (live or stored).
    async fn require_task(&self, owner: &Owner, task_id: &str) -> Result<(), A2aError> {
        if self.env.registry.get(owner, task_id).is_some() {
            return Ok(());
        }
        stored_task(&self.env, owner, task_id).await.map(|_| ())
    }

    /// GetExtendedAgentCard.
    pub async fn get_extended_agent_card(
        &self,
        call: &CallContext,
        request: GetExtendedAgentCardRequest,
    ) -> Result<AgentCard, A2aError> {
        // With authentication on, admission has just required a credential (spec §3.1.11).
        self.admit(call)?;
        call.owner(&request.tenant)?;
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
}

/// The task's state as its enum name, for error messages.
fn state_name(task: &Task) -> String {
    state_of(task.status.as_ref()).as_str_name().to_owned()
}
