//! SendMessage and SendStreamingMessage: starting or continuing a task, and the streams that
//! follow it.
use std::sync::Arc;

use futures::StreamExt;
use tokio::sync::{oneshot, watch};

use super::{ATTEMPTS, Core, EventStream, Located, busy, state_name, validate};
use crate::agent::RequestContext;
use crate::call::{CallContext, Owner};
use crate::error::A2aError;
use crate::proto::{
    Message, SendMessageRequest, SendMessageResponse, StreamResponse, Task, TaskPushNotificationConfig,
    TaskState, TaskStatus, send_message_response, stream_response::Payload,
};
use crate::task::actor::start_task;
use crate::task::handle::{Answer, FollowUp, Started, Subscription, Turn};
use crate::task::log::TaskEvent;
use crate::task::view::trim_history;
use crate::task::{is_interrupted, is_terminal, now, state_of};

/// What SendMessage answers, with the task shared rather than copied: the gRPC binding
/// encodes it straight from the copy the actor and the store share.
pub enum SendOutcome {
    /// The agent's direct reply; no task exists.
    Message(Message),
    /// The task (trimmed to the requested history length).
    Task(Arc<Task>),
}

impl SendOutcome {
    /// The response message (copying the task if it is still shared).
    pub fn into_response(self) -> SendMessageResponse {
        let payload = match self {
            Self::Message(message) => send_message_response::Payload::Message(message),
            Self::Task(task) => send_message_response::Payload::Task(Arc::unwrap_or_clone(task)),
        };
        SendMessageResponse { payload: Some(payload) }
    }
}

pub(super) async fn send_message(
    core: &Core,
    call: &CallContext,
    request: SendMessageRequest,
) -> Result<SendOutcome, A2aError> {
    let configuration = request.configuration.as_ref();
    let return_immediately = configuration.is_some_and(|c| c.return_immediately);
    let history_length = configuration.and_then(|c| c.history_length);
    let answer = if return_immediately { Answer::Follow } else { Answer::Settle };
    let task = match begin(core, call, request, answer).await? {
        Started::Message(message) => return Ok(SendOutcome::Message(message)),
        Started::Turn(turn) => turn.subscription.snapshot,
        Started::Settled(task) => task,
    };
    Ok(SendOutcome::Task(trimmed(task, history_length)))
}

/// The task with at most `history_length` messages of history, copied only if that cuts it.
pub(super) fn trimmed(mut task: Arc<Task>, history_length: Option<i32>) -> Arc<Task> {
    if history_length.is_some_and(|n| (n.max(0) as usize) < task.history.len()) {
        trim_history(Arc::make_mut(&mut task), history_length);
    }
    task
}

pub(super) async fn send_streaming_message(
    core: &Core,
    call: &CallContext,
    request: SendMessageRequest,
) -> Result<EventStream, A2aError> {
    let history_length = request.configuration.as_ref().and_then(|c| c.history_length);
    Ok(match begin(core, call, request, Answer::Follow).await? {
        Started::Message(message) => {
            let event = TaskEvent::new(0, StreamResponse { payload: Some(Payload::Message(message)) });
            futures::stream::iter([Ok(Arc::new(event))]).boxed()
        }
        Started::Turn(turn) => turn_stream(*turn, history_length, Some(core.shutdown.subscribe())),
        Started::Settled(_) => unreachable!("a stream asks to follow, not to settle"),
    })
}
/// Validates a SendMessage request and hands the message to a new task or to the live task
/// it names, answered as `answer` asks.
async fn begin(
    core: &Core,
    call: &CallContext,
    request: SendMessageRequest,
    answer: Answer,
) -> Result<Started, A2aError> {
    validate::send_message(&request)?;
    let SendMessageRequest { tenant, message, configuration, metadata } = request;
    let configuration = configuration.unwrap_or_default();
    let inline_push = configuration.task_push_notification_config;
    if inline_push.is_some() && !core.settings.push_notifications {
        return Err(A2aError::PushNotificationNotSupported);
    }
    let mut message = message.ok_or_else(|| A2aError::invalid_field("message", "is required"))?;
    let owner = call.owner(&tenant);

    if !message.task_id.is_empty() {
        let follow_up = FollowUp {
            message,
            extensions: call.extensions.clone(),
            metadata,
            accepted_output_modes: configuration.accepted_output_modes,
        };
        // Boxed: its state would otherwise enlarge every SendMessage's future.
        return Box::pin(continue_task(core, owner, follow_up, inline_push, answer)).await;
    }

    let task_id = uuid::Uuid::new_v4().to_string();
    let context_id = match message.context_id.as_str() {
        "" => uuid::Uuid::new_v4().to_string(),
        given => given.to_owned(),
    };
    message.task_id = task_id.clone();
    message.context_id = context_id.clone();
    if let Some(config) = inline_push {
        // Registered before the agent runs, so the webhook sees the task's first event.
        let config = TaskPushNotificationConfig { task_id: task_id.clone(), ..config };
        Box::pin(core.register_push_config(&owner, config)).await?;
    }
    let task = Task {
        id: task_id.clone(),
        context_id: context_id.clone(),
        status: Some(TaskStatus {
            state: TaskState::Submitted as i32,
            message: None,
            timestamp: Some(now()),
        }),
        history: vec![message.clone()],
        ..Default::default()
    };
    let ctx = RequestContext {
        task_id,
        context_id,
        message,
        task: Arc::new(task),
        new_task: true,
        owner: owner.clone(),
        extensions: call.extensions.clone(),
        metadata,
        accepted_output_modes: configuration.accepted_output_modes,
    };
    start_task(core.env.clone(), owner, ctx, answer)
        .run()
        .await
        .await
        .unwrap_or_else(|_| Err(A2aError::Internal("the task's actor ended without an answer".into())))
}

/// Hands a follow-up message to the live (or hibernated) task it names.
async fn continue_task(
    core: &Core,
    owner: Owner,
    follow_up: FollowUp,
    mut push: Option<TaskPushNotificationConfig>,
    answer: Answer,
) -> Result<Started, A2aError> {
    let task_id = follow_up.message.task_id.clone();
    for _ in 0..ATTEMPTS {
        let handle = match core.locate(&owner, &task_id).await? {
            Located::Live(handle) => handle,
            Located::Finished(task) => {
                return Err(A2aError::UnsupportedOperation(format!(
                    "task {task_id} is in terminal state {} and accepts no more messages",
                    state_name(&task)
                )));
            }
        };
        if let Some(config) = push.take() {
            let config = TaskPushNotificationConfig { task_id: task_id.clone(), ..config };
            core.register_push_config(&owner, config).await?;
        }
        // A copy, in case the actor is gone before it takes the message.
        if let Some(started) = handle.send_message(follow_up.clone(), answer).await {
            return started;
        }
    }
    Err(busy(&task_id))
}

/// The snapshot as the stream's first item.
fn snapshot_event(snapshot: Task, seq: u64) -> Arc<TaskEvent> {
    Arc::new(TaskEvent::new(seq, StreamResponse { payload: Some(Payload::Task(snapshot)) }))
}

/// The stream of one message's turn: the Task, then events until the task is terminal or
/// interrupted. If the turn's execution ends while the task is already waiting (the agent had
/// nothing to add), the stream ends too rather than waiting for some later turn.
fn turn_stream(
    turn: Turn,
    history_length: Option<i32>,
    shutdown: Option<watch::Receiver<bool>>,
) -> EventStream {
    let Turn { subscription, done } = turn;
    follow(subscription, history_length, shutdown, Some(done))
}

/// The stream of a SubscribeToTask call: the Task, then every event until the terminal one.
pub(super) fn subscription_stream(
    subscription: Subscription,
    shutdown: watch::Receiver<bool>,
) -> EventStream {
    follow(subscription, None, Some(shutdown), None)
}

/// Yields the snapshot, then the feed's events. A subscription (no `done`) ends after the
/// terminal event; a turn (with `done`) also ends at an interrupted state, or when its
/// execution is over while the task waits. Draining ends it with UNAVAILABLE.
fn follow(
    subscription: Subscription,
    history_length: Option<i32>,
    shutdown: Option<watch::Receiver<bool>>,
    done: Option<oneshot::Receiver<()>>,
) -> EventStream {
    let Subscription { snapshot, mut feed } = subscription;
    let turn = done.is_some();
    // A subscription has no execution to wait for: a receiver whose sender never fires.
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
