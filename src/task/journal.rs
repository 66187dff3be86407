//! The fleet side of a task actor: the events the shared store has not seen yet.
//!
//! The actor publishes each event to its local log at once (its local subscribers never wait
//! for the store) and notes it here; it writes what piled up in one atomic append whenever it
//! has nothing else to do, or when the batch is full, and always before it saves the task. So
//! the store's (Task, seq) pair never runs ahead of its event stream, which is what lets a
//! reader on another replica join exactly.
use std::sync::Arc;

use super::fleet::Fleet;
use super::log::TaskEvent;
use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::Task;

/// Events written in one append at the most, so a long burst reaches other replicas in steady
/// steps instead of one huge write at its end.
const BATCH: usize = 64;

/// What happened to a flush.
pub(super) enum Flushed {
    /// The store holds every event so far; `wrote`: this flush wrote some (with the Task).
    Done {
        /// Whether there was anything to write.
        wrote: bool,
    },
    /// Another replica owns the task now: this actor must stop writing, and stop.
    Lost,
}

/// An answer to a caller, held until the state it reflects is in the store.
pub(super) type Deferred = Box<dyn FnOnce() + Send>;

/// Unwritten events of one task, the fleet they go to, and the answers waiting for them.
pub(super) struct Journal {
    fleet: Arc<dyn Fleet>,
    pending: Vec<Arc<TaskEvent>>,
    /// Answers to callers (a new task's id, a cancel, a settled turn) held until the store has
    /// what they say: a client that goes on to another replica must find it there.
    deferred: Vec<Deferred>,
}

impl Journal {
    /// An empty journal writing to `fleet`.
    pub(super) fn new(fleet: Arc<dyn Fleet>) -> Self {
        Self { fleet, pending: Vec::new(), deferred: Vec::new() }
    }

    /// Holds an answer until the next write.
    pub(super) fn defer(&mut self, answer: Deferred) {
        self.deferred.push(answer);
    }

    /// Whether answers wait for a write.
    pub(super) fn has_deferred(&self) -> bool {
        !self.deferred.is_empty()
    }

    /// Sends every held answer (after a write, or when the actor ends either way).
    pub(super) fn answer_all(&mut self) {
        for answer in self.deferred.drain(..) {
            answer();
        }
    }

    /// Notes an event the actor just published.
    pub(super) fn record(&mut self, event: Arc<TaskEvent>) {
        self.pending.push(event);
    }

    /// Whether a flush is due: something waits and the actor is idle, or the batch is full.
    pub(super) fn due(&self, idle: bool) -> bool {
        !self.pending.is_empty() && (idle || self.pending.len() >= BATCH)
    }

    /// Whether every event is written.
    pub(super) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Writes the pending events with `task`, the Task after the last of them (and, with
    /// `reindex`, its place in ListTasks). On a store error the events stay pending, to be
    /// written with the next flush.
    pub(super) async fn flush(
        &mut self,
        owner: &Owner,
        task: &Task,
        reindex: bool,
    ) -> Result<Flushed, A2aError> {
        let Some(first) = self.pending.first() else {
            return Ok(Flushed::Done { wrote: false });
        };
        let first_seq = first.seq;
        let events = self.pending.iter().map(|event| event.proto_bytes()).collect();
        if !self.fleet.append(owner, task, first_seq, events, reindex).await? {
            return Ok(Flushed::Lost);
        }
        self.pending.clear();
        Ok(Flushed::Done { wrote: true })
    }

    /// The fleet, for the lease.
    pub(super) fn fleet(&self) -> &Arc<dyn Fleet> {
        &self.fleet
    }
}

/// Why the subscribers of a task that moved to another replica end: they resubscribe.
pub(super) fn lost(task_id: &str) -> A2aError {
    A2aError::Unavailable(format!("task {task_id} is now run by another replica; call SubscribeToTask again"))
}
