//! The Task-then-events streams: a message's turn (SendStreamingMessage) and a subscription
//! (SubscribeToTask). Both read the task's event log forward from the snapshot they start
//! with, so the Task comes first and no event is missed or repeated.
use std::sync::Arc;

use futures::StreamExt;
use tokio::sync::{oneshot, watch};

use super::{Core, EventStream, state_name, validate};
use crate::call::{CallContext, LAST_GENERATION};
use crate::error::A2aError;
use crate::proto::{StreamResponse, SubscribeToTaskRequest, Task, TaskState, stream_response::Payload};
use crate::task::fleet::CatchUp;
use crate::task::handle::{Subscription, Turn};
use crate::task::log::{Feed, TaskEvent};
use crate::task::quota::SubscriptionSlot;
use crate::task::registry::{Found, with_live};
use crate::task::view::trim_history;
use crate::task::{is_interrupted, is_terminal, state_of};

impl Core {
    /// SubscribeToTask: the Task now, then every update until it is terminal.
    ///
    /// A resuming caller (the resume extension's `A2A-Last-Generation`, or SSE's
    /// `Last-Event-ID`; see `docs/extensions/resume.md`) gets exactly the updates after the
    /// generation it names, with no Task first, when the task's log still holds them all or,
    /// in a fleet, the task's shared stream holds the ones the log lacks; otherwise the Task
    /// first as usual (its generation shows the jump). A generation the task has not reached
    /// is INVALID_ARGUMENT.
    pub async fn subscribe_to_task(
        &self,
        call: &CallContext,
        request: SubscribeToTaskRequest,
    ) -> Result<EventStream, A2aError> {
        self.admit(call)?;
        self.require_streaming()?;
        validate::task_id("id", &request.id)?;
        let after = call.resume_after()?;
        let owner = call.owner(&request.tenant)?;
        let slot = self.subscriptions.open(&owner, &request.id)?;
        match with_live(&self.env, &owner, &request.id, |handle| async move { handle.subscribe(after).await })
            .await?
        {
            Found::Live(subscription) => {
                let current = generation_of(&subscription.snapshot).max(subscription.feed.cursor());
                check_not_ahead(&request.id, after, current)?;
                // The feed starts at the caller's cursor when the log held every event since;
                // otherwise the shared stream may hold the ones in between.
                let catch_up = self.catch_up(&request.id, after, subscription.feed.cursor()).await;
                let resumed = after == Some(subscription.feed.cursor()) || catch_up.is_some();
                if after.is_some() {
                    let from = match (&catch_up, resumed) {
                        (Some(_), _) => "stream",
                        (None, true) => "log",
                        (None, false) => "task",
                    };
                    metrics::counter!("a2a_resumes_total", "from" => from).increment(1);
                }
                let ends = Ends {
                    shutdown: Some(self.draining()),
                    max_age: self.settings.max_stream,
                    slot: Some(slot),
                };
                Ok(subscription_stream(subscription, catch_up, ends, resumed))
            }
            Found::Finished(task) if after.is_some() => {
                // A resuming caller is never refused for being late: it gets the updates it
                // missed when the fleet's stream still holds them (the last is the terminal
                // one), else the final Task.
                check_not_ahead(&request.id, after, generation_of(&task))?;
                if let Some(catch_up) = self.catch_up(&request.id, after, generation_of(&task)).await {
                    metrics::counter!("a2a_resumes_total", "from" => "stream").increment(1);
                    return Ok(missed(catch_up));
                }
                metrics::counter!("a2a_resumes_total", "from" => "task").increment(1);
                let snapshot = snapshot_event(Arc::unwrap_or_clone(task.clone()), generation_of(&task));
                Ok(futures::stream::iter([Ok(snapshot)]).boxed())
            }
            Found::Finished(task) => Err(A2aError::UnsupportedOperation(format!(
                "task {} is in terminal state {}; there is nothing to subscribe to",
                task.id,
                state_name(&task)
            ))),
        }
    }
}

impl Core {
    /// For a caller resuming after `after` whose feed starts later, at `feed_start`: the events
    /// in between from the fleet's shared stream, when it still holds them. `None` on a single
    /// server, without a gap, or when the stream was trimmed past the cursor: the Task first
    /// is then the answer (also when the store fails here, as it is always correct).
    async fn catch_up(&self, task_id: &str, after: Option<u64>, feed_start: u64) -> Option<CatchUp> {
        let after = after.filter(|&after| after < feed_start)?;
        let fleet = self.env.fleet.clone()?;
        CatchUp::start(fleet, task_id, after, feed_start).await.unwrap_or_else(|error| {
            tracing::warn!(%task_id, %error, "could not read the missed events; the Task goes first");
            None
        })
    }
}

/// The updates a resuming caller missed of a task that has ended since, up to its terminal one.
fn missed(mut catch_up: CatchUp) -> EventStream {
    async_stream::stream! {
        while let Some(next) = catch_up.next().await {
            let failed = next.is_err();
            yield next;
            if failed {
                break;
            }
        }
    }
    .boxed()
}

/// A task's generation as a log position.
fn generation_of(task: &Task) -> u64 {
    task.generation.max(0) as u64
}

/// A resume cursor past the task's generation comes from somewhere else: INVALID_ARGUMENT.
fn check_not_ahead(task_id: &str, after: Option<u64>, current: u64) -> Result<(), A2aError> {
    match after {
        Some(after) if after > current => Err(A2aError::invalid_field(
            LAST_GENERATION,
            format!("generation {after} is ahead of task {task_id}, which is at generation {current}"),
        )),
        _ => Ok(()),
    }
}

/// The snapshot as the stream's first item.
fn snapshot_event(snapshot: Task, seq: u64) -> Arc<TaskEvent> {
    Arc::new(TaskEvent::new(seq, StreamResponse { payload: Some(Payload::Task(snapshot)) }))
}

/// The stream of one message's turn: the Task, then events until the task is terminal or
/// interrupted. If the turn's execution ends while the task is already waiting (the agent had
/// nothing to add), the stream ends too rather than waiting for some later turn.
pub(super) fn turn_stream(turn: Turn, history_length: Option<i32>, ends: Ends) -> EventStream {
    let Turn { subscription, done } = turn;
    follow(subscription, None, history_length, ends, true, done, true)
}

/// What ends a stream early, with a resumable close ([`A2aError::StreamClosed`]): the server
/// draining, and the stream's maximum age; and the stream's subscription slot, given back when
/// the stream ends or its client goes away (the stream is dropped).
pub(super) struct Ends {
    /// Becomes true when the server drains.
    pub shutdown: Option<watch::Receiver<bool>>,
    /// `--max-stream-secs`.
    pub max_age: Option<std::time::Duration>,
    /// The stream's place among the open subscriptions, if it is counted.
    pub slot: Option<SubscriptionSlot>,
}

/// The stream of a SubscribeToTask call: the Task, then every event until the terminal one.
/// A `resumed` one starts with the events after the caller's cursor, without the Task: those
/// of `catch_up` (from the shared stream), then the feed's.
fn subscription_stream(
    subscription: Subscription,
    catch_up: Option<CatchUp>,
    ends: Ends,
    resumed: bool,
) -> EventStream {
    follow(subscription, catch_up, None, ends, false, None, !resumed)
}

/// Yields the snapshot, then the missed events of `catch_up`, then the feed's events. A
/// subscription ends after the terminal event; a `turn` also ends at an interrupted state, or
/// when its execution is over (`done`) while the task waits. Draining or the maximum age ends
/// it with a resumable close.
fn follow(
    subscription: Subscription,
    mut catch_up: Option<CatchUp>,
    history_length: Option<i32>,
    ends: Ends,
    turn: bool,
    done: Option<oneshot::Receiver<()>>,
    snapshot_first: bool,
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
        let task_id = snapshot.id.clone();
        // The generation of the last item sent, for a resumable close.
        let mut sent = catch_up.as_ref().map_or(feed.cursor(), CatchUp::cursor);
        if snapshot_first {
            yield Ok(snapshot_event(snapshot, feed.cursor()));
        }
        let _never = never;
        let _slot = ends.slot;
        let mut draining = ends.shutdown;
        let too_old = sleep_for(ends.max_age);
        tokio::pin!(too_old);
        loop {
            tokio::select! {
                biased;
                _ = drained(&mut draining) => {
                    yield Err(closed(task_id, sent, "the server is shutting down"));
                    break;
                }
                () = &mut too_old => {
                    yield Err(closed(task_id, sent, "the stream reached the server's maximum age"));
                    break;
                }
                next = next_event(&mut catch_up, &mut feed) => match next {
                    None => break,
                    Some(Err(error)) => {
                        yield Err(error);
                        break;
                    }
                    Some(Ok(event)) => {
                        let new_state = event.state();
                        sent = event.seq;
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

/// The next event: the missed ones of `catch_up` first, then the feed's.
async fn next_event(
    catch_up: &mut Option<CatchUp>,
    feed: &mut Feed,
) -> Option<Result<Arc<TaskEvent>, A2aError>> {
    if let Some(missed) = catch_up {
        if let Some(next) = missed.next().await {
            return Some(next);
        }
        *catch_up = None;
    }
    feed.next().await
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

/// Resolves after `age`; never without one.
async fn sleep_for(age: Option<std::time::Duration>) {
    match age {
        Some(age) => tokio::time::sleep(age).await,
        None => std::future::pending().await,
    }
}

/// The resumable close of a stream that sent up to generation `sent`.
fn closed(task_id: String, last_generation: u64, why: &str) -> A2aError {
    A2aError::StreamClosed { task_id, last_generation, why: why.to_owned() }
}
