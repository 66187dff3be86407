//! The fleet side of a task actor: the events the shared store has not seen yet, the answers
//! that wait for them, and how a failed write is retried.
//!
//! Two rules of the fleet live here (docs/FLEET.md, "Answers and events wait for the store"):
//! - **An event shown means stored.** The actor numbers an event when its agent sends it but
//!   keeps it here, unseen, until the atomic append that holds it succeeded; only then does it
//!   reach the task's log (local subscribers, turns) and webhooks. So a generation any client
//!   has seen exists in the store, and a resume cursor is always valid on any replica.
//! - **An answer means stored.** A reply that says what the task is (created, settled,
//!   canceled, a subscription's snapshot) is held here until the store has it; a write that
//!   fails is retried with backoff, and the held callers get UNAVAILABLE once it has failed
//!   for a lease (the store may come back later and take it: the task goes on).
//!
//! Appends are batched: what piled up is written in one step whenever the actor has nothing
//! else to do, when the batch is full, or when an answer waits, and always before the Task is
//! saved alone. So the store's (Task, seq) pair never runs ahead of its event stream, which is
//! what lets a reader on another replica join exactly.
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::fleet::{Fleet, WriteHints};
use super::handle::{Started, Subscription};
use super::log::TaskEvent;
use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::Task;

/// Events written in one append at the most, so a long burst reaches other replicas in steady
/// steps instead of one huge write at its end.
const BATCH: usize = 64;

/// Unwritten events a task may pile up while the store refuses its writes; then the actor takes
/// no more commands (its agent waits on the bounded channel) until a write succeeds. A fleet's
/// Redis stream keeps this many events, so one write never exceeds what it keeps.
const MAX_PENDING: usize = crate::fleet::STREAM_EVENTS;

/// The first wait after a failed write; it doubles up to [`MAX_RETRY_DELAY`].
const FIRST_RETRY_DELAY: Duration = Duration::from_millis(25);

/// The longest wait between two tries of a failing write.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(1);

/// What happened to a flush.
pub(super) enum Flushed {
    /// The store holds every event so far; `written`: what this flush wrote (with the Task),
    /// in order, to be shown now.
    Done {
        /// The events written, oldest first (none: there was nothing to write).
        written: Vec<Arc<TaskEvent>>,
    },
    /// Another replica owns the task now: this actor must stop writing, and stop.
    Lost,
}

/// An answer to a caller, held until the state it reflects is in the store.
pub(super) enum Held {
    /// A subscription (SubscribeToTask on the owner): its snapshot and feed are taken when the
    /// store has caught up, so the snapshot is stored and the feed starts right after it.
    Subscription {
        /// A resuming subscriber's last generation.
        after: Option<u64>,
        /// Where the subscription goes.
        reply: oneshot::Sender<Result<Subscription, A2aError>>,
    },
    /// A message's sender that follows its turn: the turn's subscription, taken likewise.
    Turn {
        /// Where the turn goes.
        reply: oneshot::Sender<Result<Started, A2aError>>,
        /// Wakes when the turn's execution has ended.
        done: oneshot::Receiver<()>,
    },
    /// An answer made already (a settled turn, a canceled task, a snapshot): sent with `Ok` once
    /// the store has it, or the error that kept it from the store.
    Ready(Box<dyn FnOnce(Result<(), A2aError>) + Send>),
}

/// A write that failed: when the actor tries again, and since when it has been failing.
struct Retry {
    since: Instant,
    at: Instant,
    delay: Duration,
}

/// Unwritten events of one task, the fleet they go to, and the answers waiting for them.
pub(super) struct Journal {
    fleet: Arc<dyn Fleet>,
    pending: Vec<Arc<TaskEvent>>,
    held: Vec<Held>,
    retry: Option<Retry>,
    /// Events written since this journal last wrote the Task with them; `None` until it has
    /// (an actor writes the whole Task first, whatever the store held before it).
    lag: Option<usize>,
}

impl Journal {
    /// An empty journal writing to `fleet`.
    pub(super) fn new(fleet: Arc<dyn Fleet>) -> Self {
        Self { fleet, pending: Vec::new(), held: Vec::new(), retry: None, lag: None }
    }

    /// Holds an answer until the next write.
    pub(super) fn hold(&mut self, answer: Held) {
        self.held.push(answer);
    }

    /// Whether answers wait for a write.
    pub(super) fn has_held(&self) -> bool {
        !self.held.is_empty()
    }

    /// The held answers, to be sent now (after a write, or with the error that stopped it).
    pub(super) fn take_held(&mut self) -> Vec<Held> {
        std::mem::take(&mut self.held)
    }

    /// Notes an event the actor just numbered; it is shown once written.
    pub(super) fn record(&mut self, event: Arc<TaskEvent>) {
        self.pending.push(event);
    }

    /// The number of the newest event, written or not (`None`: nothing waits).
    pub(super) fn last_seq(&self) -> Option<u64> {
        self.pending.last().map(|event| event.seq)
    }

    /// Whether a flush is due: something waits and the actor is idle, or the batch is full;
    /// never while a failed write waits for its next try.
    pub(super) fn due(&self, idle: bool) -> bool {
        !self.pending.is_empty() && (idle || self.pending.len() >= BATCH) && self.retry_at().is_none()
    }

    /// Whether every event is written.
    pub(super) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Whether the actor must stop taking commands until a write succeeds.
    pub(super) fn is_full(&self) -> bool {
        self.pending.len() >= MAX_PENDING
    }

    /// When a failed write is tried again, if one waits for that.
    pub(super) fn retry_at(&self) -> Option<Instant> {
        self.retry.as_ref().map(|retry| retry.at).filter(|&at| at > Instant::now())
    }

    /// Whether writes have been failing for at least the fleet's patience (a lease): held
    /// callers are told UNAVAILABLE rather than kept waiting longer.
    pub(super) fn failing_too_long(&self) -> bool {
        self.retry.as_ref().is_some_and(|retry| retry.since.elapsed() >= self.fleet.write_patience())
    }

    /// Notes a failed write: the next try waits, twice as long as the last up to a second.
    pub(super) fn failed(&mut self) {
        let now = Instant::now();
        let retry = self.retry.get_or_insert(Retry { since: now, at: now, delay: Duration::ZERO });
        retry.delay = (retry.delay * 2).clamp(FIRST_RETRY_DELAY, MAX_RETRY_DELAY);
        retry.at = now + retry.delay;
    }

    /// Notes a write that succeeded: the next one goes at once.
    pub(super) fn succeeded(&mut self) {
        self.retry = None;
    }

    /// Whether a held answer follows the task's events (a subscription, a turn): they will
    /// be seen, so they must be in the stream.
    pub(super) fn watched(&self) -> bool {
        self.held.iter().any(|held| matches!(held, Held::Subscription { .. } | Held::Turn { .. }))
    }

    /// Writes the pending events with `task`, the Task after the last of them (and, with
    /// `reindex`, its place in ListTasks); `unwatched`: nobody outside the journal can see
    /// them (no feed, no webhook); `artifacts_only`: nothing but artifacts changed since the
    /// last write, so the store may keep the Task behind them (`Fleet::task_lag`).
    /// On a store error the events stay pending, to be written with the next flush.
    pub(super) async fn flush(
        &mut self,
        owner: &Owner,
        task: &Task,
        reindex: bool,
        unwatched: bool,
        artifacts_only: bool,
    ) -> Result<Flushed, A2aError> {
        let Some(first) = self.pending.first() else {
            return Ok(Flushed::Done { written: Vec::new() });
        };
        let first_seq = first.seq;
        let events = self.pending.iter().map(|event| event.proto_bytes()).collect();
        let most = self.fleet.task_lag();
        let lag = self.lag.map(|lag| lag + self.pending.len()).filter(|lag| artifacts_only && *lag <= most);
        let hints = WriteHints {
            reindex,
            first_try: self.retry.is_none(),
            unwatched: unwatched && !self.watched(),
            task_may_lag: lag.is_some(),
        };
        if !self.fleet.append(owner, task, first_seq, events, hints).await? {
            return Ok(Flushed::Lost);
        }
        // Counted as kept behind even when the store wrote it anyway: the next write then
        // stores it sooner, never later.
        self.lag = Some(lag.unwrap_or(0));
        Ok(Flushed::Done { written: std::mem::take(&mut self.pending) })
    }

    /// The fleet, for the lease.
    pub(super) fn fleet(&self) -> &Arc<dyn Fleet> {
        &self.fleet
    }
}

/// Why the subscribers of a task that moved to another replica end: the resumable close at
/// the last generation this replica stored (and so showed), from which they resubscribe.
pub(super) fn lost(task_id: &str, last_generation: u64) -> A2aError {
    A2aError::StreamClosed {
        task_id: task_id.to_owned(),
        last_generation,
        why: "the task is now run by another replica".to_owned(),
    }
}

/// What callers held for a write hear when the store does not take it.
pub(super) fn not_stored(task_id: &str) -> A2aError {
    A2aError::Unavailable(format!(
        "the task store does not take task {task_id}'s writes now; retry (the task goes on once it does)"
    ))
}
