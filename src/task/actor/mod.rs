//! The task actor: one tokio task per live task, the task's only writer.
//!
//! Everything that touches a live task arrives as a `Command` on one bounded channel: agent
//! events, subscriptions, snapshots, cancels and follow-up messages. The task's agent
//! executions run inside the actor too (`Executions`), and an execution's end is handled
//! only after every event it sent. Because one loop handles all of it in order, a
//! subscription is answered with the snapshot and the log position it reflects in one step:
//! the subscriber gets the Task first and then exactly the events after it, with no lock, gap
//! or duplicate.
mod expiry;
mod log_slot;
mod turns;
mod writes;

use std::sync::Arc;

use tokio::sync::oneshot;

use super::budget::Budget;
use super::encoded::{EncodedTask, EncodingCache};
use super::execution::{ExecId, Executions};
use super::handle::{Command, Started, Subscription, TaskHandle};
use super::journal::{Held, Journal};
use super::log::{Feed, TaskEvent};
use super::mailbox;
use super::metrics::{TaskMetrics, track_state};
use super::phase::Phase;
use super::rules::{self, Change};
use super::{TaskEnv, is_interrupted, is_terminal, state_of};
use crate::agent::AgentEvent;
use crate::error::A2aError;
use crate::proto::{StreamResponse, Task, TaskState, TaskStatus};
use log_slot::LogSlot;

/// Artifact-only changes reach the store at most this late (state changes at once).
const ARTIFACT_PERSIST_DELAY: std::time::Duration = std::time::Duration::from_millis(200);

/// What the store has not seen yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dirty {
    Clean,
    /// Only artifacts changed, since this moment.
    Artifacts(std::time::Instant),
    /// The status, the history or the task's existence changed.
    State,
}

pub(super) struct TaskActor {
    /// The task as it is now. Shared (copy on write) with the store and with snapshots, so
    /// persisting and snapshotting cost a reference count, not a copy.
    task: Arc<Task>,
    /// The finished task's encoding, made once for the store and a settled caller.
    encoding: EncodingCache,
    handle: TaskHandle,
    rx: mailbox::Receiver<Command>,
    /// The event log, once something reads it.
    log: LogSlot,
    executions: Executions,
    next_exec: ExecId,
    /// Callers of a blocking SendMessage, with the execution their message started.
    settling: Vec<(ExecId, oneshot::Sender<Result<Started, A2aError>>)>,
    phase: Phase,
    /// How far the store is behind the actor's state.
    dirty: Dirty,
    /// When the actor last had something to do, for the idle timeout.
    last_active: tokio::time::Instant,
    /// In a fleet: the events the shared store has not seen yet. Boxed: a single server's
    /// tasks have none, and the actor is part of every live task (112 bytes inline).
    journal: Option<Box<Journal>>,
    /// A follow-up was accepted and nothing published since (see `rules::match_generation`).
    message_pending: bool,
    /// What the task holds, against what it may hold.
    budget: Budget,
    env: Arc<TaskEnv>,
}

impl TaskActor {
    /// An actor running `executions` (a new task's first message's), whose next event is
    /// `last_seq + 1`.
    pub(super) fn new(
        env: Arc<TaskEnv>,
        (handle, rx): (TaskHandle, mailbox::Receiver<Command>),
        (task, last_seq): (Arc<Task>, u64),
        executions: Executions,
        phase: Phase,
    ) -> Self {
        Self {
            budget: Budget::of(&task),
            log: LogSlot::starting_at(last_seq),
            journal: env.fleet.clone().map(|fleet| Box::new(Journal::new(fleet))),
            message_pending: false,
            task,
            encoding: EncodingCache::default(),
            handle,
            rx,
            executions,
            next_exec: 1,
            settling: Vec::new(),
            phase,
            dirty: Dirty::Clean,
            last_active: tokio::time::Instant::now(),
            env,
        }
    }

    /// Whether the loop goes on: the task is starting or live.
    fn running(&self) -> bool {
        matches!(self.phase, Phase::Starting(_) | Phase::Live)
    }

    /// Runs the actor to its end. The loop borrows the actor: an `async fn` that takes `self`
    /// keeps it twice in its future (the argument, and the local it is moved into), which was
    /// 328 bytes more in every task's allocation, copied on every start.
    pub(super) fn run(self) -> impl Future<Output = ()> + Send + 'static {
        let mut actor = self;
        async move { actor.run_to_end().await }
    }

    async fn run_to_end(&mut self) {
        if matches!(self.phase, Phase::Live) {
            // Revived: the task is live again, no longer parked.
            self.unpark().await;
        }
        while self.running() {
            // Everything the last command or execution end caused is published by now.
            self.executions.signal_ended();
            if self.journal.is_some() {
                self.sync().await;
                if !self.running() {
                    break;
                }
            } else if self.dirty == Dirty::State && self.rx.is_empty() {
                self.persist().await;
            }
            if self.quiet() {
                self.release_spare();
            }
            let deadline = self.deadline();
            // A fleet task whose unwritten events reached their bound takes nothing more until a
            // write succeeds: its agent waits on the bounded channel.
            let open = !self.journal.as_deref().is_some_and(Journal::is_full);
            tokio::select! {
                biased;
                command = self.rx.recv(), if open => match command {
                    Some(command) => {
                        self.last_active = tokio::time::Instant::now();
                        self.handle(command).await
                    }
                    None => break,
                },
                (exec, result) = self.executions.next_finished(), if open => {
                    // Whatever the execution sent before it returned is applied first.
                    self.drain().await;
                    self.on_execution_finished(exec, result.map_err(|error| *error));
                    self.last_active = tokio::time::Instant::now();
                }
                _ = sleep_until(deadline) => {
                    if self.journal.as_ref().is_some_and(|journal| journal.retry_at().is_some()) {
                        // A failed write's next try: `sync` makes it.
                    } else if self.dirty != Dirty::Clean {
                        self.persist().await;
                    } else if self.input_expired() {
                        self.expire().await;
                    } else if self.hibernate(false).await {
                        break;
                    }
                }
            }
        }
        match self.phase {
            Phase::Hibernated => {
                self.log.close();
                // A parked task counts against --max-parked-tasks, not a live slot (in a fleet
                // it is no replica's: whichever revives it counts it).
                self.env.live.release(&self.task.id);
                self.release().await;
                // Callers that sent a command meanwhile see the actor gone and revive the task.
                self.rx.close();
                while self.rx.recv().await.is_some() {}
                return;
            }
            Phase::Lost => return self.end_lost(),
            Phase::Starting(_) | Phase::NoTask => return self.log.close(),
            Phase::Live | Phase::Finished => {}
        }
        self.dirty = Dirty::State;
        if !self.store_final().await {
            return self.end_lost();
        }
        self.log.close();
        self.release().await;
        self.env.registry.remove(&self.handle);
        self.settle_all();
        self.answer_held(Ok(()));
        let state = state_of(self.task.status.as_ref());
        track_state(state, TaskState::Unspecified);
        if let Some(counter) = TaskMetrics::get().finished(state) {
            counter.increment(1);
        }
        // Everything is undone already: nothing is left for the drop to clean up.
        self.phase = Phase::Finished;
    }

    /// Another replica owns the task now: nothing more is written or shown here. Callers
    /// still waiting for a write and this replica's subscribers hear so, the subscribers with
    /// the resumable close at the last generation stored here.
    fn end_lost(&mut self) {
        self.phase = Phase::Lost;
        self.env.live.release(&self.task.id);
        let moved =
            A2aError::Unavailable(format!("task {} is now run by another replica; retry", self.task.id));
        self.answer_held(Err(moved));
        self.log.close_with(super::journal::lost(&self.task.id, self.log.last_seq()));
        self.env.registry.remove(&self.handle);
        track_state(state_of(self.task.status.as_ref()), TaskState::Unspecified);
    }

    /// When the actor must wake without a command: to persist artifact changes, to see
    /// whether it may hibernate, or to expire a task that waited too long for input.
    fn deadline(&self) -> Option<tokio::time::Instant> {
        if let Some(retry) = self.journal.as_deref().and_then(Journal::retry_at) {
            return Some(retry);
        }
        let own = match self.dirty {
            Dirty::Artifacts(since) => Some(tokio::time::Instant::from_std(since + ARTIFACT_PERSIST_DELAY)),
            Dirty::State => None,
            Dirty::Clean => self.env.idle_timeout.filter(|_| self.quiet()).map(|t| self.last_active + t),
        };
        match (own, self.input_deadline()) {
            (Some(own), Some(input)) => Some(own.min(input)),
            (own, input) => own.or(input),
        }
    }

    /// Waiting for the client with nothing running and no caller waiting.
    fn quiet(&self) -> bool {
        matches!(self.phase, Phase::Live)
            && self.executions.is_empty()
            && self.settling.is_empty()
            && is_interrupted(state_of(self.task.status.as_ref()))
    }

    /// Gives back what a busy turn grew and an idle task does not need (the command queue,
    /// the executions' and callers' lists): a task may wait for its client a long time.
    fn release_spare(&mut self) {
        self.rx.release_spare();
        self.executions.release_spare();
        self.settling.shrink_to_fit();
    }

    /// Leaves the registry if nobody follows the task (the store is up to date) or, when
    /// `parking`, even if some do (the server drains: their streams end anyway), once the
    /// parked ledger holds it; otherwise the idle clock starts again. Whether it did.
    async fn hibernate(&mut self, parking: bool) -> bool {
        if !self.may_hibernate(parking) {
            self.last_active = tokio::time::Instant::now();
            return false;
        }
        if !self.park().await || !self.may_hibernate(parking) {
            // The ledger is away, or a command came meanwhile: the task stays live.
            self.unpark().await;
            self.last_active = tokio::time::Instant::now();
            return false;
        }
        self.env.registry.remove(&self.handle);
        self.phase = Phase::Hibernated;
        track_state(state_of(self.task.status.as_ref()), TaskState::Unspecified);
        TaskMetrics::get().hibernated.increment(1);
        true
    }

    /// Whether the task may hibernate now (see [`Self::hibernate`]).
    fn may_hibernate(&self, parking: bool) -> bool {
        let unwritten = self.journal.as_ref().is_some_and(|journal| !journal.is_empty());
        let followed = !parking && self.log.feeds() > 0;
        self.quiet() && !followed && self.rx.is_empty() && !unwritten && self.dirty == Dirty::Clean
    }

    /// Handles every command already queued.
    async fn drain(&mut self) {
        while self.running()
            && let Some(command) = self.rx.try_recv()
        {
            self.handle(command).await;
        }
    }

    async fn handle(&mut self, command: Command) {
        match command {
            Command::Agent(event) => self.on_agent_event(*event),
            Command::Subscribe { after, reply } => self.deliver(Held::Subscription { after, reply }),
            Command::Park => {
                // Rare (a fleet replica draining): boxed, so that every actor's future does not
                // keep room for a write and a hibernation for its whole life.
                Box::pin(async {
                    self.persist().await;
                    self.hibernate(true).await;
                })
                .await
            }
            Command::Snapshot { reply } => {
                let task = self.task.clone();
                self.deliver(Held::Ready(Box::new(move |stored| drop(reply.send(stored.map(|()| task))))));
            }
            Command::Cancel { reply } => {
                self.env.executor.cancel_task(&self.task).await;
                self.executions.abort_all();
                let canceled =
                    TaskStatus { state: TaskState::Canceled as i32, message: None, timestamp: None };
                self.set_status(canceled);
                let task = self.task.clone();
                self.deliver(Held::Ready(Box::new(move |stored| drop(reply.send(stored.map(|()| task))))));
            }
            Command::Message { turn, reply } => self.on_message(*turn, reply),
        }
    }

    /// The task now and a feed from its generation; or, for a resuming subscriber whose events
    /// since `after` are all in the log, a feed from `after` (the core then sends no snapshot).
    fn subscription(&self, after: Option<u64>) -> Subscription {
        let log = self.log.follow(&self.handle.id, &self.env);
        let cursor = after.filter(|&after| log.holds_after(after)).unwrap_or(log.last_seq());
        Subscription {
            snapshot: self.task.clone(),
            feed: Feed::new(log.clone(), cursor, self.env.subscribers.clone()),
        }
    }

    /// The task as it is now, with its encoding once it is finished: the store keeps a
    /// finished task's bytes and a gRPC caller's answer carries them, so they are made once.
    fn encoded_task(&mut self) -> EncodedTask {
        match is_terminal(state_of(self.task.status.as_ref())) {
            true => self.encoding.encoded(&self.task),
            false => EncodedTask::plain(self.task.clone()),
        }
    }

    /// Gives the fleet lease up, if there is a fleet.
    async fn release(&mut self) {
        // Only owned values across the await: the actor itself is not `Sync`.
        if let Some(fleet) = self.journal.as_ref().map(|journal| journal.fleet().clone()) {
            let task_id = self.task.id.clone();
            fleet.release(&task_id).await;
        }
    }

    fn on_agent_event(&mut self, event: AgentEvent) {
        if let Some(starter) = self.take_starter() {
            if let AgentEvent::Message(message) = event {
                // A direct reply: no task (the phase stays NoTask).
                self.executions.abort_all();
                return starter.reply.send(Ok(Started::Message(message)));
            }
            self.begin(*starter);
        }
        let bytes = match self.budget.event(self.env.limits, &self.task, &event) {
            Ok(bytes) => bytes,
            Err(limit) => {
                // The event is not applied; the task fails as its next event, so subscribers
                // see every event up to here and then why it ended.
                self.executions.abort_all();
                let flag = limit.metadata().remove("limit").unwrap_or_default();
                return self
                    .fail(&format!("the agent's output exceeded a limit of the task: {limit} (--{flag})"));
            }
        };
        let announce = self.announces();
        match rules::apply(&mut self.task, announce, event) {
            Ok(change) => {
                self.budget.set(bytes);
                self.record(change)
            }
            Err(problem) => {
                self.executions.abort_all();
                self.fail(&format!("invalid agent response: {problem}"));
            }
        }
    }

    fn set_status(&mut self, status: TaskStatus) {
        let announce = self.announces();
        let change = rules::set_status(&mut self.task, announce, status, None);
        self.record(change);
    }

    /// Whether anything reads the task's updates: a subscriber (now or, to resume, once),
    /// the fleet's journal or webhooks. With nothing, the rules build none (the artifact of
    /// an echo was copied, and each update allocated, for no reader).
    fn announces(&self) -> bool {
        self.log.followed() || self.journal.is_some() || self.env.observer.is_some()
    }

    /// Publishes a change the rules made; a new status also moves the gauges, ends the task
    /// when terminal and answers blocked callers when it settles.
    fn record(&mut self, change: Change) {
        let Change::Status { previous, .. } = &change else {
            return self.publish(change);
        };
        let (previous, state) = (*previous, state_of(self.task.status.as_ref()));
        track_state(previous, state);
        self.publish(change);
        if is_terminal(state) {
            self.phase = Phase::Finished;
            // Now, not once stored: a client told the task ended may start another at once.
            self.env.live.release(&self.task.id);
        }
        if rules::settles(state) {
            self.settle_all();
        }
    }

    fn fail(&mut self, text: &str) {
        tracing::warn!(task_id = %self.task.id, reason = text, "task failed");
        self.set_status(rules::failure(text));
    }

    /// Publishes a change as the task's next generation (its update, if announced, and the
    /// task carry it; the rules just changed the task, so stamping it copies nothing).
    fn publish(&mut self, change: Change) {
        let artifact = matches!(change, Change::Artifact(_));
        let mut payload = change.into_payload();
        let seq = self.last_seq() + 1;
        rules::stamp_generation(&mut self.task, payload.as_mut(), seq);
        self.message_pending = false;
        self.dirty = match (artifact, self.dirty) {
            (true, Dirty::Clean) => Dirty::Artifacts(std::time::Instant::now()),
            (true, dirty) => dirty,
            (false, _) => Dirty::State,
        };
        TaskMetrics::get().events.increment(1);
        let Some(payload) = payload else {
            // Nothing reads it: the log only counts it.
            return self.log.skip();
        };
        let response = StreamResponse { payload: Some(payload) };
        match &mut self.journal {
            // In a fleet the event is shown once the store holds it (`writes.rs`).
            Some(journal) => journal.record(Arc::new(TaskEvent::new(seq, response))),
            None => {
                let event = self.log.append(response);
                self.show(event);
            }
        }
    }

    /// Tells the webhooks of an event now in the log.
    fn show(&self, event: Arc<TaskEvent>) {
        if let Some(observer) = &self.env.observer {
            let terminal = event.state().is_some_and(is_terminal);
            observer.published(&self.handle.owner, &self.task.id, event, terminal);
        }
    }

    /// The number of the task's newest event, shown or (in a fleet) not yet written.
    fn last_seq(&self) -> u64 {
        self.journal.as_deref().and_then(Journal::last_seq).unwrap_or_else(|| self.log.last_seq())
    }
}

/// Resolves at `deadline`; never without one.
fn sleep_until(deadline: Option<tokio::time::Instant>) -> Deadline {
    Deadline { sleep: deadline.map(tokio::time::sleep_until) }
}

pin_project_lite::pin_project! {
    /// [`sleep_until`]'s future: the timer alone (an `async fn` kept the deadline beside it,
    /// 24 bytes more in the actor's future, which waits on it while idle).
    struct Deadline {
        #[pin]
        sleep: Option<tokio::time::Sleep>,
    }
}

impl Future for Deadline {
    type Output = ();

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        match self.project().sleep.as_pin_mut() {
            Some(sleep) => sleep.poll(cx),
            None => std::task::Poll::Pending,
        }
    }
}

impl Drop for TaskActor {
    /// If the actor ends without reaching a terminal state (it panicked), its subscribers must
    /// not wait forever: the log is closed and the task leaves the registry.
    fn drop(&mut self) {
        if matches!(self.phase, Phase::Live) {
            self.log.close();
            self.env.registry.remove(&self.handle);
            self.env.live.release(&self.task.id);
        }
    }
}
