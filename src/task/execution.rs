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
use tokio::sync::{mpsc, oneshot};

use super::handle::{Answer, Command};
use crate::agent::{AgentExecutor, EventSink, RequestContext};
use crate::error::A2aError;

type AgentFuture = Pin<Box<dyn Future<Output = Result<(), A2aError>> + Send>>;

struct Running {
    id: u64,
    future: AgentFuture,
    /// Dropped when the execution ends: wakes a stream waiting for its turn to end.
    _done: Option<oneshot::Sender<()>>,
}

/// The running executions, in start order.
#[derive(Default)]
pub(crate) struct Executions {
    running: Vec<Running>,
}

impl Executions {
    /// Starts `executor` on `ctx`; its events go to `tx`. A sender who follows the turn
    /// ([`Answer::Follow`]) gets a receiver that wakes when the execution ends.
    pub fn start(
        &mut self,
        id: u64,
        executor: Arc<dyn AgentExecutor>,
        ctx: RequestContext,
        tx: mpsc::Sender<Command>,
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
        self.running.push(Running { id, future, _done: done });
        ended
    }

    pub fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// Drops every execution (each stops at its current `.await`).
    pub fn abort_all(&mut self) {
        self.running.clear();
    }

    /// Polls every execution; the first that has ended, with its result. Pending (for ever)
    /// when none runs.
    pub fn poll_finished(&mut self, cx: &mut Context<'_>) -> Poll<(u64, Result<(), A2aError>)> {
        for i in 0..self.running.len() {
            if let Poll::Ready(result) = self.running[i].future.as_mut().poll(cx) {
                let finished = self.running.remove(i);
                return Poll::Ready((finished.id, result));
            }
        }
        Poll::Pending
    }

    /// Resolves with the next execution to end.
    pub async fn next_finished(&mut self) -> (u64, Result<(), A2aError>) {
        std::future::poll_fn(|cx| self.poll_finished(cx)).await
    }
}
