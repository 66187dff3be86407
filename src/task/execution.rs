//! The agent executions of one task, polled by its actor.
//!
//! An execution runs inside the actor's own tokio task instead of a task of its own: a
//! message then costs one spawn rather than two, and an agent that answers without waiting
//! (the common case for quick replies) is done within the actor's first poll, with its events
//! already in the actor's queue. An agent that waits only holds the actor while it is being
//! polled, like any other future.
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::FutureExt;
use tokio::sync::oneshot;

use super::handle::{Answer, Command};
use super::mailbox;
use crate::agent::{AgentExecutor, EventSink, RequestContext};
use crate::error::A2aError;

type AgentFuture = Pin<Box<dyn Future<Output = Result<(), A2aError>> + Send>>;

/// An execution's number within its task. 32 bits: ids only tell apart the executions running
/// or settling at once (they wrap after four billion), and the 8 bytes of a `u64` took the
/// task actor's future past mimalloc's 512-byte class.
pub(crate) type ExecId = u32;

struct Running {
    id: ExecId,
    future: AgentFuture,
    /// Dropped once the execution has ended and its events are published: wakes a stream
    /// waiting for its turn to end.
    done: Option<oneshot::Sender<()>>,
}

/// The running executions, in start order.
#[derive(Default)]
pub(crate) struct Executions {
    running: Vec<Running>,
    /// The turn signals of executions that ended or were dropped, held until the actor has
    /// published what they sent (see [`Executions::signal_ended`]).
    ended: Vec<oneshot::Sender<()>>,
}

impl Executions {
    /// Starts `executor` on `ctx`; its events go to `tx`. A sender who follows the turn
    /// ([`Answer::Follow`]) gets a receiver that wakes when the execution ends.
    pub fn start(
        &mut self,
        id: ExecId,
        executor: Arc<dyn AgentExecutor>,
        ctx: RequestContext,
        tx: mailbox::Sender<Command>,
        answer: Answer,
    ) -> Option<oneshot::Receiver<()>> {
        let (done, ended) = match answer {
            Answer::Follow => {
                let (done, ended) = oneshot::channel();
                (Some(done), Some(ended))
            }
            Answer::Settle => (None, None),
        };
        let sink = EventSink::new(ctx.task_id.clone(), ctx.context_id.clone(), tx);
        // The context rides in a box until the first poll hands it to the agent: a future keeps
        // room for everything it captured for its whole life, and the agent's own future holds
        // the context already (about 400 bytes less per running execution).
        let ctx = Box::new(ctx);
        let future = Box::pin(async move {
            AssertUnwindSafe(executor.execute(*ctx, sink))
                .catch_unwind()
                .await
                .unwrap_or_else(|_| Err(A2aError::Internal("the agent panicked".into())))
        });
        self.running.push(Running { id, future, done });
        ended
    }

    pub fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// Frees the lists' memory while nothing runs or waits to be signalled.
    pub fn release_spare(&mut self) {
        if self.running.is_empty() {
            self.running = Vec::new();
        }
        if self.ended.is_empty() {
            self.ended = Vec::new();
        }
    }

    /// Drops every execution (each stops at its current `.await`).
    pub fn abort_all(&mut self) {
        let signals = self.running.drain(..).filter_map(|running| running.done);
        self.ended.extend(signals);
    }

    /// Tells the streams following ended executions that their turn is over. The actor calls
    /// this only after it has published everything those executions sent (and whatever their
    /// end caused, such as a failure): a stream woken earlier could still see the task waiting
    /// for input, end there, and miss the events of the turn it follows.
    pub fn signal_ended(&mut self) {
        self.ended.clear();
    }

    /// Polls every execution; the first that has ended, with its result. Pending (for ever)
    /// when none runs. The error comes boxed: the actor keeps the result while it drains the
    /// execution's events, and an `A2aError` inline took 80 bytes of every actor's future.
    pub fn poll_finished(&mut self, cx: &mut Context<'_>) -> Poll<(ExecId, Result<(), Box<A2aError>>)> {
        for i in 0..self.running.len() {
            if let Poll::Ready(result) = self.running[i].future.as_mut().poll(cx) {
                let finished = self.running.remove(i);
                self.ended.extend(finished.done);
                return Poll::Ready((finished.id, result.map_err(Box::new)));
            }
        }
        Poll::Pending
    }

    /// Resolves with the next execution to end.
    pub async fn next_finished(&mut self) -> (ExecId, Result<(), Box<A2aError>>) {
        std::future::poll_fn(|cx| self.poll_finished(cx)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::AgentEvent;
    use crate::call::Owner;
    use crate::proto::{Message, Task};

    /// Sends one event and returns at once, as a quick agent does.
    struct OneEvent;

    #[async_trait::async_trait]
    impl AgentExecutor for OneEvent {
        async fn execute(&self, _ctx: RequestContext, events: EventSink) -> Result<(), A2aError> {
            let _ = events.reply("hi").await;
            Ok(())
        }
    }

    fn context() -> RequestContext {
        RequestContext {
            task_id: "t".into(),
            context_id: "c".into(),
            message: Message::default(),
            task: Arc::new(Task::default()),
            new_task: false,
            owner: Owner::default(),
            extensions: Vec::new(),
            metadata: None,
            accepted_output_modes: Vec::new(),
        }
    }

    /// The stream following a turn must not hear that it is over while the events the turn
    /// sent still wait in the actor's queue (it would end without them).
    #[tokio::test]
    async fn a_turn_ends_only_when_the_actor_says_its_events_are_out() {
        let (tx, mut rx) = mailbox::channel(4);
        let mut executions = Executions::default();
        let mut ended =
            executions.start(1, Arc::new(OneEvent), context(), tx, Answer::Follow).expect("a turn");
        let (id, result) = executions.next_finished().await;
        assert_eq!((id, result.is_ok()), (1, true));
        assert!(
            matches!(rx.try_recv(), Some(Command::Agent(event)) if matches!(*event, AgentEvent::Message(_)))
        );
        assert_eq!(ended.try_recv(), Err(oneshot::error::TryRecvError::Empty), "not over yet");
        executions.signal_ended();
        assert_eq!(ended.try_recv(), Err(oneshot::error::TryRecvError::Closed), "over now");
    }

    #[tokio::test]
    async fn dropped_executions_end_their_turns_when_the_actor_says_so() {
        let (tx, _rx) = mailbox::channel(4);
        let mut executions = Executions::default();
        let mut ended =
            executions.start(1, Arc::new(OneEvent), context(), tx, Answer::Follow).expect("a turn");
        executions.abort_all();
        assert!(executions.is_empty());
        assert_eq!(ended.try_recv(), Err(oneshot::error::TryRecvError::Empty), "not over yet");
        executions.signal_ended();
        assert_eq!(ended.try_recv(), Err(oneshot::error::TryRecvError::Closed), "over now");
    }
}
