//! A message's sender hearing back: a new task's starter, a follow-up's sender, and the
//! callers of a blocking SendMessage, answered when their turn settles. In a fleet an answer
//! waits until the store holds what it says (`deliver`, and `writes.rs`).
use tokio::sync::oneshot;

use super::{Dirty, TaskActor};
use crate::agent::RequestContext;
use crate::error::A2aError;
use crate::proto::TaskState;
use crate::task::encoded::EncodedTask;
use crate::task::execution::ExecId;
use crate::task::handle::{Answer, FollowUp, Reply, Started};
use crate::task::journal::Held;
use crate::task::metrics::{TaskMetrics, track_state};
use crate::task::phase::{Phase, Starter};
use crate::task::{rules, state_of};

impl TaskActor {
    /// The starter, if the task is still starting; the phase is then [`Phase::NoTask`] until
    /// the caller says otherwise.
    pub(super) fn take_starter(&mut self) -> Option<Box<Starter>> {
        match std::mem::replace(&mut self.phase, Phase::NoTask) {
            Phase::Starting(starter) => Some(starter),
            phase => {
                self.phase = phase;
                None
            }
        }
    }

    /// The agent's first task event: the task now exists. It is registered, and its starter
    /// hears back (at once, or when the turn ends).
    pub(super) fn begin(&mut self, starter: Starter) {
        let Starter { reply, done, slot } = starter;
        slot.commit();
        self.phase = Phase::Live;
        self.env.registry.insert(self.handle.clone());
        TaskMetrics::get().started.increment(1);
        track_state(TaskState::Unspecified, TaskState::Submitted);
        self.dirty = Dirty::State;
        self.answer(0, reply, done);
    }

    /// Tells the sender of execution `exec`'s message how to follow its turn, or keeps them
    /// until the turn settles.
    pub(super) fn answer(&mut self, exec: ExecId, reply: Reply, done: Option<oneshot::Receiver<()>>) {
        match (reply.answer, done) {
            (Answer::Follow, Some(done)) => self.deliver(Held::Turn { reply: reply.to, done }),
            _ => self.settling.push((exec, reply.to)),
        }
    }

    pub(super) fn on_message(&mut self, turn: FollowUp, reply: Reply) {
        let FollowUp { message, extensions, metadata, accepted_output_modes, if_generation_match } = turn;
        if let Err(error) = rules::match_generation(&self.task, if_generation_match, self.message_pending) {
            return reply.send(Err(error));
        }
        let bytes = match self.budget.message(self.env.limits, &self.task, &message) {
            Ok(bytes) => bytes,
            Err(error) => return reply.send(Err(error)),
        };
        let message = match rules::accept_message(&mut self.task, message) {
            Ok(message) => message,
            Err(error) => return reply.send(Err(error)),
        };
        self.budget.set(bytes);
        self.dirty = Dirty::State;
        self.message_pending = true;
        let ctx = RequestContext {
            task_id: self.task.id.clone(),
            context_id: self.task.context_id.clone(),
            message,
            task: self.task.clone(),
            new_task: false,
            owner: (*self.handle.owner).clone(),
            extensions,
            metadata,
            accepted_output_modes,
        };
        let exec = self.next_exec;
        self.next_exec = self.next_exec.wrapping_add(1);
        let (executor, tx) = (self.env.executor.clone(), self.handle.tx.clone());
        let done = self.executions.start(exec, executor, ctx, tx, reply.answer);
        self.answer(exec, reply, done);
    }

    pub(super) fn on_execution_finished(&mut self, exec: ExecId, result: Result<(), A2aError>) {
        if let Some(starter) = self.take_starter() {
            // The execution ended before its first event: there is no task.
            let error = result.err().unwrap_or_else(|| {
                A2aError::InvalidAgentResponse(
                    "the agent finished without creating a task or replying".into(),
                )
            });
            return starter.reply.send(Err(error));
        }
        if matches!(self.phase, Phase::NoTask) {
            // A direct reply: the execution's end has no task to judge (judging it failed a
            // phantom task: a warning, a negative gauge, a webhook for a task nobody has).
            return;
        }
        let state = state_of(self.task.status.as_ref());
        match result {
            Err(error) => self.fail(&format!("the agent failed: {error}")),
            Ok(())
                if self.executions.is_empty()
                    && matches!(state, TaskState::Submitted | TaskState::Working) =>
            {
                self.fail("invalid agent response: the agent finished without a final or interrupted state")
            }
            Ok(()) => {}
        }
        if rules::settles(state_of(self.task.status.as_ref()))
            && let Some(i) = self.settling.iter().position(|(e, _)| *e == exec)
        {
            let (_, reply) = self.settling.swap_remove(i);
            let task = self.encoded_task();
            self.deliver(settled(reply, task));
        }
    }

    /// Answers every blocked caller with the task as it is now.
    pub(super) fn settle_all(&mut self) {
        if self.settling.is_empty() {
            // Nobody to answer: no encoding made for nobody (a fleet's journal writes its own).
            return;
        }
        let task = self.encoded_task();
        for (_, reply) in std::mem::take(&mut self.settling) {
            self.deliver(settled(reply, task.clone()));
        }
    }
}

/// A blocked caller's answer: the task as its turn settled, once stored.
fn settled(reply: oneshot::Sender<Result<Started, A2aError>>, task: EncodedTask) -> Held {
    Held::Ready(Box::new(move |stored| drop(reply.send(stored.map(|()| Started::Settled(task))))))
}
