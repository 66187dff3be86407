//! The actor's writes to the store, and the answers that wait for them.
//!
//! On a single server the store is this process's memory: answers leave at once and the task
//! is saved when the actor is idle. In a fleet (`journal.rs`) nothing is shown or answered
//! before the write that holds it succeeded; a failed write is tried again with backoff for as
//! long as this replica owns the task, and callers held for it hear UNAVAILABLE once it has
//! failed for a lease.
use super::{Dirty, TaskActor, sleep_until};
use crate::error::A2aError;
use crate::task::handle::{Command, Started, Turn};
use crate::task::journal::{Flushed, Held, Journal, not_stored};
use crate::task::phase::Phase;

impl TaskActor {
    /// Whether the store holds the task exactly as the actor has it.
    pub(super) fn in_sync(&self) -> bool {
        self.dirty == Dirty::Clean && self.journal.as_deref().is_none_or(Journal::is_empty)
    }

    /// Sends an answer to a caller: at once, or in a fleet once the store has what it says.
    pub(super) fn deliver(&mut self, held: Held) {
        match &mut self.journal {
            Some(journal) if !(self.dirty == Dirty::Clean && journal.is_empty()) => journal.hold(held),
            _ => self.send_held(held, Ok(())),
        }
    }

    /// Answers every held caller: with what they asked for once it is stored, or `error`.
    pub(super) fn answer_held(&mut self, outcome: Result<(), A2aError>) {
        let Some(journal) = &mut self.journal else {
            return;
        };
        for held in journal.take_held() {
            self.send_held(held, outcome.clone());
        }
    }

    /// Subscriptions are taken now, when the log has every stored event and the task is as
    /// stored: the snapshot and the feed's start agree.
    fn send_held(&self, held: Held, outcome: Result<(), A2aError>) {
        match held {
            Held::Subscription { after, reply } => {
                drop(reply.send(outcome.map(|()| self.subscription(after))))
            }
            Held::Turn { reply, done } => {
                let turn = outcome.map(|()| Turn { subscription: self.subscription(None), done: Some(done) });
                drop(reply.send(turn.map(|turn| Started::Turn(Box::new(turn)))))
            }
            Held::Ready(answer) => answer(outcome),
        }
    }

    /// In a fleet: writes what is due (now when answers wait, else when idle or a batch is
    /// full), then answers the callers it held; tells them UNAVAILABLE when writes have been
    /// failing for a lease.
    pub(super) async fn sync(&mut self) {
        let Some(journal) = &self.journal else {
            return;
        };
        let idle = self.rx.is_empty();
        let due = journal.has_held() || journal.due(idle) || (self.dirty == Dirty::State && idle);
        if due && journal.retry_at().is_none() {
            self.persist().await;
        }
        if matches!(self.phase, Phase::Lost) {
            return;
        }
        if self.in_sync() {
            self.answer_held(Ok(()));
        } else if self.journal.as_deref().is_some_and(Journal::failing_too_long) {
            let error = not_stored(&self.task.id);
            self.answer_held(Err(error));
        }
    }

    /// Stores what the store has not seen: the journal's events with the Task after them, or
    /// the Task alone (a change without an event, such as a follow-up in the history).
    pub(super) async fn persist(&mut self) {
        if self.dirty == Dirty::Clean {
            return;
        }
        // In a fleet the journal's write carries the Task too (never ahead of its events).
        match self.flush().await {
            Some(false) => {}
            Some(true) | None => return,
        }
        let task = self.encoded_task();
        let saved = self.env.store.save_encoded(&self.handle.owner, task).await;
        match saved {
            Ok(()) => {
                self.dirty = Dirty::Clean;
                if let Some(journal) = &mut self.journal {
                    journal.succeeded();
                }
            }
            Err(error) => self.write_failed(&error, "persisting the task failed"),
        }
    }

    /// Writes the journal's pending events, with the Task after them, to the fleet's store
    /// (and its place in ListTasks when the state changed), then shows them: to the log and
    /// the webhooks. Whether it wrote anything; `None` when writing failed. When another
    /// replica owns the task now, the actor stops ([`Phase::Lost`]).
    async fn flush(&mut self) -> Option<bool> {
        let reindex = self.dirty == Dirty::State;
        let Some(journal) = self.journal.as_mut() else {
            return Some(false);
        };
        // Webhooks see every event when push is on; feeds see what the log shows.
        let unwatched = self.env.observer.is_none() && self.log.feeds() == 0;
        let artifacts_only = matches!(self.dirty, Dirty::Artifacts(_));
        let flushed = journal.flush(&self.handle.owner, &self.task, reindex, unwatched, artifacts_only).await;
        match flushed {
            Ok(Flushed::Done { written }) if written.is_empty() => Some(false),
            Ok(Flushed::Done { written }) => {
                journal.succeeded();
                self.dirty = Dirty::Clean;
                for event in written {
                    self.log.append_numbered(event.clone());
                    self.show(event);
                }
                Some(true)
            }
            Ok(Flushed::Lost) => {
                tracing::error!(task_id = %self.task.id, "another replica took this task over; stopping its actor here");
                self.executions.abort_all();
                self.phase = Phase::Lost;
                None
            }
            Err(error) => {
                self.write_failed(&error, "writing the task's events to the store failed");
                None
            }
        }
    }

    /// Notes a failed write (to be tried again); says so once per run of failures.
    fn write_failed(&mut self, error: &A2aError, what: &str) {
        let Some(journal) = &mut self.journal else {
            return tracing::warn!(task_id = %self.task.id, %error, "{what}");
        };
        if journal.retry_at().is_none() && !journal.failing_too_long() {
            tracing::warn!(task_id = %self.task.id, %error, "{what}; trying again until the store takes it");
        }
        journal.failed();
    }

    /// Stores the finished task. In a fleet the write is tried until the store takes it
    /// (`true`) or another replica owns the task (`false`); commands that arrive meanwhile
    /// are refused as retryable, and held callers hear UNAVAILABLE after a lease.
    pub(super) async fn store_final(&mut self) -> bool {
        loop {
            self.persist().await;
            if self.journal.is_none() || self.in_sync() {
                return true;
            }
            if matches!(self.phase, Phase::Lost) {
                return false;
            }
            if self.journal.as_deref().is_some_and(Journal::failing_too_long) {
                let error = not_stored(&self.task.id);
                self.answer_held(Err(error));
            }
            let retry = self.journal.as_deref().and_then(Journal::retry_at);
            tokio::select! {
                Some(command) = self.rx.recv() => self.refuse(command),
                _ = sleep_until(retry) => {}
            }
        }
    }

    /// Answers a command that came while the finished task waits for the store: retry later.
    fn refuse(&self, command: Command) {
        let error = not_stored(&self.task.id);
        match command {
            Command::Subscribe { reply, .. } => drop(reply.send(Err(error))),
            Command::Snapshot { reply } | Command::Cancel { reply } => drop(reply.send(Err(error))),
            Command::Message { reply, .. } => reply.send(Err(error)),
            Command::Agent(_) | Command::Park => {}
        }
    }
}
