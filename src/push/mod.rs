//! Push notifications: delivering task events to webhooks, off the event path.
//!
//! The task actor hands each published event to the [`PushDispatcher`] with a non-blocking
//! send and moves on. The dispatcher looks up the task's configs and puts the event on one
//! bounded queue per config (`queue.rs`); one worker per config POSTs them in order, with
//! retries (`delivery.rs`). So a slow, hanging or dead webhook delays nothing but its own
//! queue, and a full queue sheds artifact chunks before state changes (the newest state of a
//! task is never dropped for an older one).
//!
//! Bounded in total, whatever clients register: at most `max_concurrency` requests in flight
//! (and so sockets open) over every webhook, at most `max_queued_bytes` of events waiting or in delivery, and
//! configs capped per task and per principal (the store enforces those). Optionally every
//! POST is signed (`signing.rs`), with the public keys at `/.well-known/jwks.json`.
//!
//! Each config's bodies are written in the protocol version it was registered in (`body.rs`):
//! a webhook registered through v0.3 gets what a v0.3 server sends.
//!
//! Where events come from: on one server (and on a Redis Cluster), the task actors hand them
//! over as they are written ([`EventObserver`]), and a `kill -9` loses what was queued. A fleet
//! on one Redis node or Sentinels writes each event of a task with webhooks into a durable
//! outbox in the same atomic step, and the fleet hands them in from there
//! ([`PushDispatcher::deliver_durable`], `ticket.rs`): every event reaches every webhook at
//! least once, from whichever replica leads the outbox, and each POST carries
//! `A2A-Delivery-Id: <task id>/<generation>` so receivers can drop repeats.
pub mod body;
pub mod delivery;
pub mod queue;
pub mod signing;
pub mod ssrf;
pub mod ticket;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};

use crate::call::Owner;
use crate::task::log::TaskEvent;
use crate::task::store::{PushConfigLimits, TaskStore};
use crate::task::{EventObserver, TaskEnv};
use delivery::Worker;
use queue::{Pushed, QueueBudget, WorkerQueue};
use signing::PushSigner;
use ticket::Completion;

/// Which events are pushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PushEvents {
    /// Every status and artifact update.
    #[default]
    All,
    /// Status updates only.
    State,
}

/// Delivery policy.
#[derive(Debug, Clone)]
pub struct PushSettings {
    /// Which events are pushed.
    pub events: PushEvents,
    /// What deliveries may connect to.
    pub policy: ssrf::Policy,
    /// Time limit of one POST.
    pub attempt_timeout: Duration,
    /// Attempts per event before giving up.
    pub max_attempts: u32,
    /// Time after the first attempt after which an event is given up.
    pub max_age: Duration,
    /// First retry delay; doubles per attempt (with jitter) up to `max_backoff`.
    pub backoff: Duration,
    /// Longest delay between attempts.
    pub max_backoff: Duration,
    /// Events queued per config before the overflow policy sheds some.
    pub queue_capacity: usize,
    /// Bytes of events queued or in delivery over every config before new ones are dropped.
    pub max_queued_bytes: u64,
    /// Webhook requests in flight at once over every task (and so outbound sockets).
    pub max_concurrency: usize,
    /// Push notification configs allowed per task.
    pub max_configs_per_task: usize,
    /// Push notification configs allowed per principal, over all its tasks and tenants.
    pub max_configs_per_principal: usize,
    /// Signs every POST, when set (`--push-signing-key`).
    pub signing: Option<Arc<PushSigner>>,
    /// The `iss` of signed tokens: the server's public URL (filled in by the server builder
    /// when empty).
    pub issuer: String,
    /// How bodies are written for each protocol version (the server builder adds v0.3's).
    pub encoders: body::Encoders,
}

impl PushSettings {
    /// The config caps, as the store applies them.
    pub fn config_limits(&self) -> PushConfigLimits {
        PushConfigLimits {
            per_task: self.max_configs_per_task,
            per_principal: self.max_configs_per_principal,
        }
    }
}

impl Default for PushSettings {
    fn default() -> Self {
        Self {
            events: PushEvents::All,
            policy: ssrf::Policy::default(),
            attempt_timeout: Duration::from_secs(10),
            max_attempts: 8,
            max_age: Duration::from_secs(600),
            backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(60),
            queue_capacity: 1000,
            max_queued_bytes: 64 * 1024 * 1024,
            max_concurrency: 64,
            max_configs_per_task: 10,
            max_configs_per_principal: 1000,
            signing: None,
            issuer: String::new(),
            encoders: body::Encoders::default(),
        }
    }
}

/// Delivery counters.
#[derive(Debug, Default)]
pub struct PushStats {
    /// Events delivered (2xx).
    pub delivered: AtomicU64,
    /// Attempts that were retried.
    pub retries: AtomicU64,
    /// Events given up after the attempt or age limit, or refused with a non-retryable status.
    pub failed: AtomicU64,
    /// Deliveries refused by the SSRF guard.
    pub refused: AtomicU64,
    /// Events shed by a full queue or the spent byte budget, or left queued when a worker
    /// stopped.
    pub dropped: AtomicU64,
    /// Requests in flight now (a gauge).
    pub in_flight: AtomicU64,
    /// Bytes of events queued or in delivery now (a gauge).
    pub queued_bytes: AtomicU64,
}

impl PushStats {
    /// A counter's value.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// One event of one task, on its way to the task's webhooks.
struct Job {
    owner: Owner,
    task_id: String,
    event: Arc<TaskEvent>,
    terminal: bool,
    /// The durable outbox entry it came from (fleet mode).
    completion: Option<Arc<Completion>>,
}

/// How many events may wait for the dispatcher itself before new ones are shed.
const DISPATCH_QUEUE: usize = 4096;

/// Where workers read a task as it is now (for bodies written from the task): the tasks of
/// the core, attached once it is built.
type Tasks = Arc<OnceLock<Weak<TaskEnv>>>;

/// Routes task events to per-config delivery workers.
pub struct PushDispatcher {
    jobs: mpsc::Sender<Job>,
    stats: Arc<PushStats>,
    tasks: Tasks,
    /// Events come from a durable outbox ([`PushDispatcher::deliver_durable`]), not from the
    /// actors.
    durable: std::sync::atomic::AtomicBool,
    /// `--push-queue-capacity`: how many durable events may be out at once (a webhook's queue
    /// then never sheds one for want of room).
    queue_capacity: usize,
}

impl PushDispatcher {
    /// Starts the dispatcher (a tokio task) reading configs from `store`.
    pub fn start(store: Arc<dyn TaskStore>, settings: PushSettings) -> Result<Arc<Self>, String> {
        let client = delivery::client(&settings)?;
        let (jobs, receiver) = mpsc::channel(DISPATCH_QUEUE);
        let queue_capacity = settings.queue_capacity.max(1);
        let stats = Arc::new(PushStats::default());
        let tasks = Tasks::default();
        let router = Router {
            store,
            tasks: tasks.clone(),
            client,
            stats: stats.clone(),
            budget: Arc::new(QueueBudget::new(settings.max_queued_bytes, stats.clone())),
            sends: Arc::new(Semaphore::new(settings.max_concurrency.max(1))),
            settings: Arc::new(settings),
            workers: HashMap::new(),
            routed: 0,
        };
        tokio::spawn(router.run(receiver));
        Ok(Arc::new(Self { jobs, stats, tasks, durable: Default::default(), queue_capacity }))
    }

    /// Gives the workers the tasks whose events they deliver (a weak reference: the tasks'
    /// actors hold the dispatcher as their observer); called once, when the core is built.
    pub fn attach(&self, tasks: Weak<TaskEnv>) {
        let _ = self.tasks.set(tasks);
    }

    /// Delivery counters.
    pub fn stats(&self) -> &PushStats {
        &self.stats
    }

    /// How many durable events a reader may have out at once: no more than one webhook's queue
    /// holds, so none is shed for want of room (only the byte budget can still shed one).
    pub fn durable_window(&self, most: usize) -> usize {
        self.queue_capacity.min(most).max(1)
    }

    /// From now on events come from a durable outbox only; the actors' hand-over is ignored.
    pub fn use_durable_outbox(&self) {
        self.durable.store(true, Ordering::Release);
    }

    /// Delivers one event of a durable outbox entry to the task's webhooks (waiting while
    /// the dispatcher is busy: the outbox is read no faster than it is delivered). The
    /// `completion` reports when every webhook is done with it.
    pub async fn deliver_durable(
        &self,
        owner: Owner,
        task_id: String,
        event: Arc<TaskEvent>,
        terminal: bool,
        completion: Arc<Completion>,
    ) {
        let job = Job { owner, task_id, event, terminal, completion: Some(completion) };
        let _ = self.jobs.send(job).await;
    }
}

impl EventObserver for PushDispatcher {
    /// Hands an event over without waiting; if the dispatcher is saturated the event is shed
    /// and counted (the agent and the streams are never slowed by push).
    fn published(&self, owner: &Owner, task_id: &str, event: Arc<TaskEvent>, terminal: bool) {
        if self.durable.load(Ordering::Acquire) {
            return;
        }
        let job =
            Job { owner: owner.clone(), task_id: task_id.to_owned(), event, terminal, completion: None };
        if self.jobs.try_send(job).is_err() {
            dropped(&self.stats, 1, task_id, "push dispatcher saturated");
        }
    }
}

/// Counts events given up without delivery, and logs the first and then one in a thousand
/// (a flood of drops must not become a flood of log lines).
fn dropped(stats: &PushStats, n: u64, task_id: &str, why: &str) {
    if n == 0 {
        return;
    }
    let before = stats.dropped.fetch_add(n, Ordering::Relaxed);
    if before == 0 || before / 1000 != (before + n) / 1000 {
        tracing::warn!(task_id, total = before + n, "{why}; push events dropped");
    }
}

struct Router {
    store: Arc<dyn TaskStore>,
    tasks: Tasks,
    settings: Arc<PushSettings>,
    client: reqwest::Client,
    stats: Arc<PushStats>,
    budget: Arc<QueueBudget>,
    sends: Arc<Semaphore>,
    /// (task id, config id) → the worker delivering to that config.
    workers: HashMap<(String, String), Arc<WorkerQueue>>,
    /// Jobs routed, to sweep stopped workers out of the map now and then.
    routed: u64,
}

/// Every this many jobs the map of workers forgets the ones that stopped (idle or deleted).
const SWEEP_EVERY: u64 = 1024;

impl Router {
    async fn run(mut self, mut jobs: mpsc::Receiver<Job>) {
        while let Some(job) = jobs.recv().await {
            self.route(job).await;
        }
    }

    async fn route(&mut self, job: Job) {
        let pushed = match self.settings.events {
            PushEvents::All => true,
            PushEvents::State => job.event.state().is_some(),
        };
        let configs = match self.store.push_configs(&job.owner, &job.task_id).await {
            Ok(configs) => configs,
            Err(error) => {
                tracing::warn!(task_id = %job.task_id, %error, "cannot read push configs");
                Vec::new()
            }
        };
        for config in configs.into_iter().map(|registration| registration.config) {
            let key = (job.task_id.clone(), config.id.clone());
            let mut shed = 0;
            if pushed {
                let mut ticket = job.completion.as_ref().map(|completion| completion.ticket());
                let mut outcome = Pushed::Closed;
                if let Some(queue) = self.workers.get(&key) {
                    outcome = queue.push_ticketed(job.event.clone(), &mut ticket);
                }
                if outcome == Pushed::Closed {
                    let queue = self.spawn_worker(&job, &config.id);
                    outcome = queue.push_ticketed(job.event.clone(), &mut ticket);
                    self.workers.insert(key.clone(), queue);
                }
                match outcome {
                    Pushed::Queued { shed: n } => shed = n,
                    Pushed::Dropped { shed: n } => shed = n + 1,
                    Pushed::Closed => {}
                }
            }
            dropped(&self.stats, shed as u64, &job.task_id, "webhook queue full or push byte budget spent");
            if job.terminal
                && let Some(queue) = self.workers.get(&key)
            {
                queue.finish();
            }
        }
        if job.terminal {
            self.workers.retain(|(task_id, _), _| task_id != &job.task_id);
        }
        self.routed += 1;
        if self.routed.is_multiple_of(SWEEP_EVERY) {
            self.workers.retain(|_, queue| !queue.is_closed());
        }
    }

    /// Starts the worker of one config, with an empty queue.
    fn spawn_worker(&self, job: &Job, config_id: &str) -> Arc<WorkerQueue> {
        let queue = Arc::new(WorkerQueue::new(self.settings.queue_capacity, self.budget.clone()));
        let worker = Worker {
            owner: job.owner.clone(),
            task_id: job.task_id.clone(),
            config_id: config_id.to_owned(),
            queue: queue.clone(),
            store: self.store.clone(),
            tasks: self.tasks.clone(),
            client: self.client.clone(),
            settings: self.settings.clone(),
            stats: self.stats.clone(),
            sends: self.sends.clone(),
        };
        tokio::spawn(worker.run());
        queue
    }
}
