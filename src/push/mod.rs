//! Push notifications: delivering task events to webhooks, off the event path.
//!
//! The task actor hands each published event to the [`PushDispatcher`] with a non-blocking
//! send and moves on. The dispatcher looks up the task's configs and puts the event on one
//! bounded queue per config; one worker per config POSTs them in order, with retries. So a
//! slow, hanging or dead webhook delays nothing but its own queue, and a full queue sheds
//! artifact chunks before state changes (the newest state of a task is never dropped for an
//! older one).
pub mod delivery;
pub mod ssrf;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::call::Owner;
use crate::task::EventObserver;
use crate::task::log::TaskEvent;
use crate::task::store::TaskStore;
use delivery::{Worker, WorkerQueue};

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
    /// Push notification configs allowed per task.
    pub max_configs_per_task: usize,
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
            max_configs_per_task: 10,
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
    /// Events shed by a full queue.
    pub dropped: AtomicU64,
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
}

/// How many events may wait for the dispatcher itself before new ones are shed.
const DISPATCH_QUEUE: usize = 4096;

/// Routes task events to per-config delivery workers.
pub struct PushDispatcher {
    jobs: mpsc::Sender<Job>,
    stats: Arc<PushStats>,
}

impl PushDispatcher {
    /// Starts the dispatcher (a tokio task) reading configs from `store`.
    pub fn start(store: Arc<dyn TaskStore>, settings: PushSettings) -> Result<Arc<Self>, String> {
        let client = delivery::client(&settings)?;
        let (jobs, receiver) = mpsc::channel(DISPATCH_QUEUE);
        let stats = Arc::new(PushStats::default());
        let router = Router {
            store,
            settings: Arc::new(settings),
            client,
            stats: stats.clone(),
            workers: HashMap::new(),
        };
        tokio::spawn(router.run(receiver));
        Ok(Arc::new(Self { jobs, stats }))
    }

    /// Delivery counters.
    pub fn stats(&self) -> &PushStats {
        &self.stats
    }
}

impl EventObserver for PushDispatcher {
    /// Hands an event over without waiting; if the dispatcher is saturated the event is shed
    /// and counted (the agent and the streams are never slowed by push).
    fn published(&self, owner: &Owner, task_id: &str, event: Arc<TaskEvent>, terminal: bool) {
        let job = Job { owner: owner.clone(), task_id: task_id.to_owned(), event, terminal };
        if self.jobs.try_send(job).is_err() {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(task_id, "push dispatcher saturated; event dropped");
        }
    }
}

struct Router {
    store: Arc<dyn TaskStore>,
    settings: Arc<PushSettings>,
    client: reqwest::Client,
    stats: Arc<PushStats>,
    /// (task id, config id) → the worker delivering to that config.
    workers: HashMap<(String, String), Arc<WorkerQueue>>,
}

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
        for config in configs {
            let key = (job.task_id.clone(), config.id.clone());
            let queue = match self.workers.get(&key) {
                Some(queue) if !queue.is_closed() => queue.clone(),
                _ => {
                    let queue = Arc::new(WorkerQueue::new(self.settings.queue_capacity));
                    let worker = Worker {
                        owner: job.owner.clone(),
                        task_id: job.task_id.clone(),
                        config_id: config.id.clone(),
                        queue: queue.clone(),
                        store: self.store.clone(),
                        client: self.client.clone(),
                        settings: self.settings.clone(),
                        stats: self.stats.clone(),
                    };
                    tokio::spawn(worker.run());
                    self.workers.insert(key.clone(), queue.clone());
                    queue
                }
            };
            if pushed && queue.push(job.event.clone()) {
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            }
            if job.terminal {
                queue.finish();
            }
        }
        if job.terminal {
            self.workers.retain(|(task_id, _), _| task_id != &job.task_id);
        }
    }
}
