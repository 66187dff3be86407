//! The Task-then-events streams: a message's turn (SendStreamingMessage) and a subscription
//! (SubscribeToTask). Both read the task's event log forward from the snapshot they start
//! with, so the Task comes first and no event is missed or repeated.
use std::sync::Arc;

use futures::StreamExt;
use tokio::sync::{oneshot, watch};

use super::{Core, EventStream, state_name, validate};
use crate::call::CallContext;
use crate::error::A2aError;
use crate::proto::{StreamResponse, SubscribeToTaskRequest, Task, TaskState, stream_response::Payload};
use crate::task::handle::{Subscription, Turn};
use crate::task::log::TaskEvent;
use crate::task::registry::{Found, with_live};
use crate::task::view::trim_history;
use crate::task::{is_interrupted, is_terminal, state_of};

impl Core {
    /// SubscribeToTask: the Task now, then every update until it is terminal.
    pub async fn subscribe_to_task(
        &self,
        call: &CallContext,
        request: SubscribeToTaskRequest,
    ) -> Result<EventStream, A2aError> {
        self.admit(call)?;
        self.require_streaming()?;
        validate::task_id("id", &request.id)?;
        let owner = call.owner(&request.tenant)?;
        match with_live(&self.env, &owner, &request.id, |handle| async move { handle.subscribe().await })
            .await?
        {
            Found::Live(subscription) => Ok(subscription_stream(subscription, self.draining())),
            Found::Finished(task) => Err(A2aError::UnsupportedOperation(format!(
                "task {} is in terminal state {}; there is nothing to subscribe to",
                task.id,
                state_name(&task)
            ))),
        }
    }
}

/// The snapshot as the stream's first item.
fn snapshot_event(snapshot: Task, seq: u64) -> Arc<TaskEvent> {
    Arc::new(TaskEvent::new(seq, StreamResponse { payload: Some(Payload::Task(snapshot)) }))
}

/// The stream of one message's turn: the Task, then events until the task is terminal or
/// interrupted. If the turn's execution ends while the task is already waiting (the agent had
/// nothing to add), the stream ends too rather than waiting for some later turn.
pub(super) fn turn_stream(
    turn: Turn,
    history_length: Option<i32>,
    shutdown: Option<watch::Receiver<bool>>,
) -> EventStream {
    let Turn { subscription, done } = turn;
    follow(subscription, history_length, shutdown, true, done)
}

/// The stream of a SubscribeToTask call: the Task, then every event until the terminal one.
fn subscription_stream(subscription: Subscription, shutdown: watch::Receiver<bool>) -> EventStream {
    follow(subscription, None, Some(shutdown), false, None)
}

/// Yields the snapshot, then the feed's events. A subscription ends after the terminal event;
/// a `turn` also ends at an interrupted state, or when its execution is over (`done`) while
/// the task waits. Draining ends it with UNAVAILABLE.
fn follow(
    subscription: Subscription,
    history_length: Option<i32>,
    shutdown: Option<watch::Receiver<bool>>,
    turn: bool,
    done: Option<oneshot::Receiver<()>>,
) -> EventStream {
    let Subscription { snapshot, mut feed } = subscription;
    // Without an execution to wait for: a receiver whose sender never fires.
    let (never, unused) = oneshot::channel();
    let (mut done, mut waiting) = match done {
        Some(done) => (done, true),
        None => (unused, false),
    };
    let ends_at = move |state: TaskState| is_terminal(state) || (turn && is_interrupted(state));
    async_stream::stream! {
        let mut state = state_of(snapshot.status.as_ref());
        let mut snapshot = Arc::unwrap_or_clone(snapshot);
        trim_history(&mut snapshot, history_length);
        yield Ok(snapshot_event(snapshot, feed.cursor()));
        let _never = never;
        let mut draining = shutdown;
        loop {
            tokio::select! {
                biased;
                _ = drained(&mut draining) => {
                    yield Err(shutting_down());
                    break;
                }
                next = feed.next() => match next {
                    None => break,
                    Some(Err(error)) => {
                        yield Err(error);
                        break;
                    }
                    Some(Ok(event)) => {
                        let new_state = event.state();
                        yield Ok(event);
                        if let Some(new_state) = new_state {
                            state = new_state;
                            if ends_at(state) {
                                break;
                            }
                        }
                    }
                },
                _ = &mut done, if waiting => {
                    waiting = false;
                    if ends_at(state) {
                        break;
                    }
                }
            }
        }
    }
    .boxed()
}

/// Resolves once the server starts draining; never, without a shutdown signal.
async fn drained(shutdown: &mut Option<watch::Receiver<bool>>) {
    if let Some(receiver) = shutdown
        && receiver.wait_for(|draining| *draining).await.is_ok()
    {
        return;
    }
    std::future::pending().await
}

fn shutting_down() -> A2aError {
    A2aError::Unavailable(
        "the server is shutting down; call SubscribeToTask again (on another replica)".into(),
    )
}
