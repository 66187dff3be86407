//! The fleet: several replicas serving as one on a shared Redis, any of them answering any
//! call for any task.
//!
//! - The replica that runs a task's agent owns it under a lease (`lease.rs`, which also
//!   watches for owners that stopped renewing and ends their tasks).
//! - The owner's actor writes each batch of events and the Task they produced in one atomic
//!   step ([`Fleet::append`]), so a reader anywhere joins exactly.
//! - Other replicas follow a task through one reader per task per replica (`mirror.rs`).
//! - Commands for a task travel to its owner and its answer comes back (`forward.rs`, with
//!   `mail.rs`, what the replicas say to one another).
//!
//! The core sees none of this: it asks the task layer's [`Fleet`] trait, which [`RedisFleet`]
//! implements.
mod forward;
mod lease;
pub(crate) mod mail;
mod mirror;
mod outbox;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::oneshot;

use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::Task;
use crate::task::fleet::{Fleet, Forward, Forwarded, StoredEvents, WriteHints};
use crate::task::handle::Subscription;
use crate::task::log::{EventLog, SubscriberCount};
use crate::task::store::TaskStore as _;
use crate::task::store::redis::{Append, Fenced, RedisStore, StreamBounds};
use crate::task::{TaskEnv, is_terminal, state_of};

/// Events a task's Redis stream keeps at most (`XADD MAXLEN ~`). Each replica's follower
/// reads the stream as it grows (512 entries a read) into its own byte-bounded log, so the
/// stream only has to cover a follower's read lag, not a slow subscriber's; Redis cannot
/// trim by bytes, so a count much larger would let large artifacts fill Redis.
pub const STREAM_EVENTS: usize = 4096;

/// Events a streaming task's stored Task lags behind its stream at most, by default
/// (`--fleet-task-lag`): what a reader on another replica replays at the most.
pub const TASK_LAG: usize = 32;

/// How a replica takes part in the fleet.
#[derive(Debug, Clone)]
pub struct FleetSettings {
    /// This replica's id, unique in the fleet (a fresh random one by default).
    pub replica: String,
    /// How long a task's lease lasts unless renewed (`--lease-ms`); an owner that dies is
    /// noticed within about this much.
    pub lease: Duration,
    /// Events of a task kept in its Redis stream (at most the event log's count bound).
    pub stream_events: usize,
    /// Events kept per followed task in this replica's log.
    pub log_capacity: usize,
    /// Bytes of events kept per followed task in this replica's log.
    pub log_bytes: usize,
    /// Tasks of other replicas this replica follows at once (one Redis connection each).
    pub max_followers: usize,
    /// Events a stored Task may lag behind its stream while only artifacts come
    /// (`--fleet-task-lag`; 0: the whole Task with every write). At most a quarter of
    /// `stream_events`, so the stream surely keeps what a reader replays.
    pub task_lag: usize,
}

impl FleetSettings {
    /// Settings for replica `replica` with the given lease and the default bounds.
    pub fn new(replica: String, lease: Duration) -> Self {
        Self {
            replica,
            lease,
            stream_events: STREAM_EVENTS,
            log_capacity: crate::core::DEFAULT_EVENT_LOG_CAPACITY,
            log_bytes: crate::core::DEFAULT_EVENT_LOG_BYTES,
            max_followers: 1024,
            task_lag: TASK_LAG,
        }
    }
}

/// A replica of a fleet on Redis.
pub struct RedisFleet(Arc<Inner>);

struct Inner {
    store: Arc<RedisStore>,
    replica: String,
    settings: FleetSettings,
    /// The leases this replica holds (its live tasks), renewed by `lease.rs`.
    held: Mutex<HashSet<String>>,
    /// This replica's follower of each task it follows for others: task id → its local log.
    followers: Mutex<HashMap<String, Arc<EventLog>>>,
    /// Forwarded calls waiting for their owner's reply, by request id.
    waiting: Mutex<HashMap<u64, oneshot::Sender<mail::Reply>>>,
    next_request: AtomicU64,
    /// The local tasks, for the commands other replicas forward here.
    env: OnceLock<Weak<TaskEnv>>,
    /// Whether Redis answered the last health check.
    healthy: AtomicBool,
}

impl RedisFleet {
    /// A replica of the fleet whose shared store is `store`.
    pub fn new(store: Arc<RedisStore>, settings: FleetSettings) -> Self {
        Self(Arc::new(Inner {
            store,
            replica: settings.replica.clone(),
            settings,
            held: Mutex::new(HashSet::new()),
            followers: Mutex::new(HashMap::new()),
            waiting: Mutex::new(HashMap::new()),
            next_request: AtomicU64::new(1),
            env: OnceLock::new(),
            healthy: AtomicBool::new(true),
        }))
    }

    /// This replica's id.
    pub fn replica(&self) -> &str {
        &self.0.replica
    }
}

impl Inner {
    fn subscribers(&self) -> Arc<SubscriberCount> {
        self.env.get().and_then(Weak::upgrade).map(|env| env.subscribers.clone()).unwrap_or_default()
    }

    fn bounds(&self) -> StreamBounds {
        StreamBounds { max_events: self.settings.stream_events }
    }

    async fn claim(&self, task_id: &str) -> Result<bool, A2aError> {
        if !self.store.claim(task_id, &self.replica, self.settings.lease).await? {
            return Ok(false);
        }
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.insert(task_id.to_owned());
        metrics::gauge!("a2a_fleet_leases_held").set(held.len() as f64);
        Ok(true)
    }

    fn holds(&self, task_id: &str) -> bool {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).contains(task_id)
    }
}

#[async_trait]
impl Fleet for RedisFleet {
    fn attach(&self, env: Weak<TaskEnv>) {
        if self.0.env.set(env).is_ok() {
            tokio::spawn(self.0.clone().run_inbox());
            tokio::spawn(self.0.clone().run_lease_keeper());
            tokio::spawn(self.0.clone().run_sweeper());
        }
    }

    fn deliver_webhooks(&self, push: Arc<crate::push::PushDispatcher>) -> bool {
        if !self.0.store.outbox_on() {
            return false;
        }
        tokio::spawn(self.0.clone().run_outbox(push));
        true
    }

    async fn claim(&self, task_id: &str) -> Result<bool, A2aError> {
        self.0.claim(task_id).await
    }

    async fn release(&self, task_id: &str) {
        let inner = &self.0;
        let held = {
            let mut held = inner.held.lock().unwrap_or_else(|e| e.into_inner());
            let was = held.remove(task_id);
            metrics::gauge!("a2a_fleet_leases_held").set(held.len() as f64);
            was
        };
        // A task that never took a lease (it finished within its first write) has none to give.
        if held && let Err(error) = inner.store.disown(task_id, &inner.replica).await {
            tracing::warn!(%task_id, %error, "could not release the task's lease (it expires by itself)");
        }
    }

    async fn stored(&self, owner: &Owner, task_id: &str) -> Result<Option<(Arc<Task>, u64)>, A2aError> {
        self.0.store.snapshot(owner, task_id).await
    }

    async fn append(
        &self,
        owner: &Owner,
        task: &Task,
        first_seq: u64,
        events: Vec<Bytes>,
        hints: WriteHints,
    ) -> Result<bool, A2aError> {
        let reindex = hints.reindex;
        let inner = &self.0;
        // A new task that is over by its first write was never visible to anyone else (its id
        // is fresh and its caller waits for this write): it needs no lease, and the script's
        // seq check still refuses any other writer.
        let unowned_finish = first_seq <= 2 && is_terminal(state_of(task.status.as_ref()));
        // Its first try needs no script at all (`born_finished.rs`); a retry is fenced.
        if unowned_finish
            && hints.first_try
            && !events.is_empty()
            && inner.store.born_finished_allowed(&task.id)
        {
            let bounds = inner.bounds();
            inner.store.write_born_finished(owner, task, first_seq, &events, bounds, hints.unwatched).await?;
            return Ok(true);
        }
        if !unowned_finish && !inner.holds(&task.id) && !inner.claim(&task.id).await? {
            return Ok(false);
        }
        let last_seq = first_seq + events.len() as u64 - 1;
        let (mut first, mut events) = (first_seq, events);
        let how = Append { reindex, keep_task: hints.task_may_lag };
        for _ in 0..3 {
            let lease = if inner.holds(&task.id) { inner.replica.as_str() } else { "" };
            let bounds = inner.bounds();
            let appended = inner.store.append_batch(owner, task, first, &events, bounds, lease, how).await?;
            match appended {
                Ok(()) => return Ok(true),
                // The lease lapsed with nobody taking it (a slow renewal, a Redis restart): take
                // it again and retry.
                Err(Fenced::Lease { holder: None }) if inner.claim(&task.id).await? => continue,
                // A retried batch that had landed (its reply was lost): its events are written.
                // The Task goes in alone when this try carried it: the try that landed may have
                // kept it behind, or the Task changed since without an event (a follow-up).
                Err(Fenced::Seq { stored }) if stored == last_seq => {
                    if !how.keep_task {
                        inner.store.save(owner, Arc::new(task.clone())).await?;
                    }
                    return Ok(true);
                }
                // One that had landed in part: the retry carries the events that came since too.
                // What is stored is this replica's own (the lease, checked first, names it; a
                // takeover would have finished the task), so the rest goes on top of it.
                Err(Fenced::Seq { stored }) if (first..last_seq).contains(&stored) => {
                    events.drain(..(stored + 1 - first) as usize);
                    first = stored + 1;
                }
                Err(fenced) => {
                    tracing::warn!(task_id = %task.id, ?fenced, first, last_seq, "the store refused this replica's write");
                    inner.held.lock().unwrap_or_else(|e| e.into_inner()).remove(&task.id);
                    return Ok(false);
                }
            }
        }
        Ok(false)
    }

    async fn follow(
        &self,
        owner: &Owner,
        task_id: &str,
        after: Option<u64>,
    ) -> Result<Option<Subscription>, A2aError> {
        self.0.follow(owner, task_id, after).await
    }

    async fn events_after(&self, task_id: &str, after: u64, max: usize) -> Result<StoredEvents, A2aError> {
        self.0.events_after(task_id, after, max).await
    }

    async fn forward(
        &self,
        owner: &Owner,
        task_id: &str,
        command: Forward,
    ) -> Result<Option<Forwarded>, A2aError> {
        self.0.forward(owner, task_id, command).await
    }

    fn write_patience(&self) -> Duration {
        self.0.settings.lease
    }

    fn task_lag(&self) -> usize {
        self.0.settings.task_lag.min(self.0.settings.stream_events / 4)
    }

    async fn healthy(&self) -> bool {
        let healthy = self.0.store.ping().await.is_ok();
        self.0.healthy.store(healthy, Ordering::Relaxed);
        healthy
    }

    fn parked_tasks(&self) -> Arc<dyn crate::task::parked::ParkedTasks> {
        self.0.store.clone()
    }

    fn unavailable(&self) -> Option<A2aError> {
        if self.0.healthy.load(Ordering::Relaxed) {
            return None;
        }
        Some(A2aError::Unavailable(format!(
            "the task store (Redis at {}) does not answer; retry later",
            self.0.store.address()
        )))
    }
}
