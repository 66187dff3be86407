//! SendMessage and SendStreamingMessage: starting a task or continuing one. The streams that
//! follow a turn are in `stream.rs`.
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::{FutureExt as _, StreamExt};

use super::fingerprint::fingerprint;
use super::idempotent::{self, Claim, Claimed, Earlier, Sent};
use super::inline_webhook::InlineWebhook;
use super::stream::{Ends, turn_stream};
use super::{Core, EventStream, state_name, validate};
use crate::agent::RequestContext;
use crate::call::{CallContext, Owner, ProtocolVersion};
use crate::error::A2aError;
use crate::proto::{
    Message, SendMessageRequest, SendMessageResponse, StreamResponse, Task, TaskPushNotificationConfig,
    TaskState, TaskStatus, send_message_response, stream_response::Payload,
};
use crate::task::encoded::EncodedTask;
use crate::task::handle::{Answer, FollowUp, Started, Turn};
use crate::task::log::TaskEvent;
use crate::task::now;
use crate::task::quota::SubscriptionSlot;
use crate::task::registry::{Found, with_live};
use crate::task::rules::settles;
use crate::task::spawn::{StartingTask, start_task};
use crate::task::state_of;

/// What SendMessage answers, with the task shared rather than copied: the gRPC binding
/// encodes it straight from the copy the actor and the store share, or copies the encoding
/// the actor made of a finished task.
pub enum SendOutcome {
    /// The agent's direct reply; no task exists.
    Message(Message),
    /// The task (trimmed to the requested history length).
    Task(EncodedTask),
}

impl SendOutcome {
    /// The response message (copying the task if it is still shared).
    pub fn into_response(self) -> SendMessageResponse {
        let payload = match self {
            Self::Message(message) => send_message_response::Payload::Message(message),
            Self::Task(task) => {
                send_message_response::Payload::Task(Arc::unwrap_or_clone(task.into_parts().0))
            }
        };
        SendMessageResponse { payload: Some(payload) }
    }
}

impl Core {
    /// SendMessage: blocks until the task is terminal or interrupted, unless
    /// `returnImmediately`.
    pub fn send_message<'a>(
        &'a self,
        call: &CallContext,
        request: SendMessageRequest,
    ) -> impl Future<Output = Result<SendMessageResponse, A2aError>> + Send + use<'a> {
        // `map`, not an `async` block: a block would hold the inner future twice (as it was
        // captured and as it is awaited), doubling what every call's boxed future copies.
        self.send_message_shared(call, request).map(|outcome| outcome.map(SendOutcome::into_response))
    }

    /// SendMessage, answering with the task shared (no copy of it is made for the answer).
    ///
    /// The request is checked and taken apart before the future exists (as in every entry
    /// point here), so the future holds only what the rest of the call needs: the request's
    /// bytes are not copied into it and on with every layer that awaits it.
    ///
    /// A message its caller sent already is answered with that call's outcome and not run
    /// again (`idempotent.rs`).
    pub fn send_message_shared<'a>(
        &'a self,
        call: &CallContext,
        request: SendMessageRequest,
    ) -> impl Future<Output = Result<SendOutcome, A2aError>> + Send + use<'a> {
        let configuration = request.configuration.as_ref();
        let return_immediately = configuration.is_some_and(|c| c.return_immediately);
        let history_length = configuration.and_then(|c| c.history_length);
        let answer = if return_immediately { Answer::Follow } else { Answer::Settle };
        let begun = self.admit(call).and_then(|()| begin(self, call, request, answer, false));
        async move {
            let (mut begun, _, sent) = begun?;
            let owner = sent.owner.clone();
            let admitted = begun.admitted(self, sent.new_task, &owner).await;
            let started = match idempotent::claim(self, sent).await? {
                Claimed::Run(claim) => run_claimed(self, claim, admitted, begun).await?,
                Claimed::Earlier(Earlier::Message(message)) => return Ok(SendOutcome::Message(message)),
                Claimed::Earlier(Earlier::Task(task_id)) => {
                    // Not held while the earlier task is waited for: a retry's own webhook
                    // (registered for a task it does not make) would hold a push quota place.
                    drop(begun);
                    let task = match answer {
                        Answer::Follow => self.current_task(&owner, &task_id).await?,
                        Answer::Settle => idempotent::settled_task(self, &owner, &task_id).await?,
                    };
                    return Ok(SendOutcome::Task(EncodedTask::plain(task).trimmed(history_length)));
                }
            };
            let task = match started {
                Started::Message(message) => return Ok(SendOutcome::Message(message)),
                Started::Turn(turn) => EncodedTask::plain(turn.subscription.snapshot),
                Started::Settled(task) => task,
            };
            Ok(SendOutcome::Task(task.trimmed(history_length)))
        }
    }

    /// SendStreamingMessage: the Task (or one Message), then updates until terminal or
    /// interrupted.
    pub fn send_streaming_message<'a>(
        &'a self,
        call: &CallContext,
        request: SendMessageRequest,
    ) -> impl Future<Output = Result<EventStream, A2aError>> + Send + use<'a> {
        let history_length = request.configuration.as_ref().and_then(|c| c.history_length);
        let begun = self
            .admit(call)
            .and_then(|()| self.require_streaming())
            .and_then(|()| begin(self, call, request, Answer::Follow, true));
        async move {
            let (mut begun, slot, sent) = begun?;
            let owner = sent.owner.clone();
            let admitted = begun.admitted(self, sent.new_task, &owner).await;
            let started = match idempotent::claim(self, sent).await? {
                Claimed::Run(claim) => run_claimed(self, claim, admitted, begun).await?,
                Claimed::Earlier(Earlier::Message(message)) => return Ok(one(Payload::Message(message), 0)),
                Claimed::Earlier(Earlier::Task(task_id)) => {
                    drop((begun, slot));
                    return self.follow_earlier(&owner, &task_id, history_length).await;
                }
            };
            Ok(match started {
                Started::Message(message) => one(Payload::Message(message), 0),
                Started::Turn(turn) => {
                    let ends =
                        Ends { shutdown: Some(self.draining()), max_age: self.settings.max_stream, slot };
                    turn_stream(*turn, history_length, ends)
                }
                Started::Settled(_) => unreachable!("a stream asks to follow, not to settle"),
            })
        }
    }

    /// A retried SendStreamingMessage whose message an earlier call gave to `task_id`: the
    /// task, then its updates until it is terminal or interrupted, as the first call's stream
    /// ran (just the task, if it is there already).
    async fn follow_earlier(
        &self,
        owner: &Owner,
        task_id: &str,
        history_length: Option<i32>,
    ) -> Result<EventStream, A2aError> {
        let slot = self.subscriptions.open(owner, task_id)?;
        let subscription = match idempotent::subscribe(self, owner, task_id).await? {
            Found::Live(subscription) => subscription,
            Found::Finished(task) => {
                return Ok(one(Payload::Task(trimmed(&task, history_length)), generation(&task)));
            }
        };
        let snapshot = &subscription.snapshot;
        if settles(state_of(snapshot.status.as_ref())) {
            return Ok(one(Payload::Task(trimmed(snapshot, history_length)), subscription.feed.cursor()));
        }
        let ends =
            Ends { shutdown: Some(self.draining()), max_age: self.settings.max_stream, slot: Some(slot) };
        Ok(turn_stream(Turn { subscription, done: None }, history_length, ends))
    }
}

/// A stream of one item.
fn one(payload: Payload, seq: u64) -> EventStream {
    let event = TaskEvent::new(seq, StreamResponse { payload: Some(payload) });
    futures::stream::iter([Ok(Arc::new(event))]).boxed()
}

/// A copy of `task` with at most `history_length` messages of history.
fn trimmed(task: &Arc<Task>, history_length: Option<i32>) -> Task {
    EncodedTask::plain(task.clone()).trimmed(history_length).into_parts().0.as_ref().clone()
}

/// A task's generation as a log position.
fn generation(task: &Task) -> u64 {
    task.generation.max(0) as u64
}

/// A validated message, handed on: what remains is to hear how its task started.
enum Begun<'a> {
    /// A new task's actor, not yet run: the common path, held inline.
    Start(StartingTask),
    /// A new task whose inline webhook is registered first: boxed, so that its state does
    /// not enlarge every SendMessage's future.
    Webhook(Box<InlineWebhook>),
    /// A follow-up: boxed, as a webhook's.
    Boxed(BoxFuture<'a, Result<Started, A2aError>>),
}

impl Begun<'_> {
    /// What stands between a new task and its start, done before its message is claimed, so
    /// that a call dropped meanwhile leaves no claim behind (only the call that holds a claim
    /// settles it): the parked caps are read (`task/parked.rs`: the task may come to wait for
    /// input too), then its inline webhook is registered. A refusal of either is only held
    /// here (see [`run_claimed`]). A follow-up goes to a task that exists, and registers its
    /// webhook once the claim is its own.
    async fn admitted(&mut self, core: &Core, new_task: bool, owner: &Owner) -> Result<(), A2aError> {
        if new_task {
            core.parked_caps().admit(&*core.env.parked, &owner.principal).await?;
        }
        match self {
            Self::Webhook(webhook) => webhook.register(core).await,
            Self::Start(_) | Self::Boxed(_) => Ok(()),
        }
    }

    async fn started(self) -> Result<Started, A2aError> {
        match self {
            Self::Start(starting) => started(starting).await,
            Self::Webhook(webhook) => webhook.started().await,
            Self::Boxed(started) => started.await,
        }
    }
}

/// Runs the message this call claimed, if what stands before its start let it
/// ([`Begun::admitted`]). A refusal there counts only now that the claim showed the message is
/// no retry of one that ran (whose task, or webhook, may be what fills the caps or the push
/// quota: its retry gets it back); nothing ran, so the claim goes whatever the refusal, an
/// UNAVAILABLE too (`Claim::refuse`), and the webhook, if one was registered, with `begun`.
async fn run_claimed(
    core: &Core,
    claim: Claim,
    admitted: Result<(), A2aError>,
    begun: Begun<'_>,
) -> Result<Started, A2aError> {
    match admitted {
        // Pinned here, so it outlives `run`'s future (dropped after a follow-up's `Unsettled`
        // if the call is dropped; neither drop touches what the other does).
        Ok(()) => claim.run(core, std::pin::pin!(begun.started())).await,
        Err(error) => {
            drop(begun);
            Err(claim.refuse(core, error).await)
        }
    }
}

/// Runs a new task's actor until it first waits, then waits for its answer.
async fn started(starting: StartingTask) -> Result<Started, A2aError> {
    answered(starting.run().await.await)
}

/// What a new task's actor answered; an actor gone without a word is an internal error.
pub(super) fn answered(
    reply: Result<Result<Started, A2aError>, tokio::sync::oneshot::error::RecvError>,
) -> Result<Started, A2aError> {
    reply.unwrap_or_else(|_| Err(A2aError::Internal("the task's actor ended without an answer".into())))
}

/// Validates a SendMessage request and hands the message to a new task or to the live task
/// it names, answered as `answer` asks; nothing runs until the [`Begun`] is awaited, which the
/// caller does once the message is claimed ([`Sent`]). A `stream` takes its subscription slot
/// first, and gets it back to hold while it lasts. Synchronous: nothing of the request
/// outlives it.
fn begin<'a>(
    core: &'a Core,
    call: &CallContext,
    request: SendMessageRequest,
    answer: Answer,
    stream: bool,
) -> Result<(Begun<'a>, Option<SubscriptionSlot>, Sent), A2aError> {
    validate::parts(&request, core.settings.max_parts)?;
    validate::struct_values(&request, core.settings.max_struct_values)?;
    validate::send_message(&request)?;
    let SendMessageRequest { tenant, message, configuration, metadata } = request;
    let configuration = configuration.unwrap_or_default();
    let inline_push = configuration.task_push_notification_config;
    if inline_push.is_some() && !core.settings.push_notifications {
        return Err(A2aError::PushNotificationNotSupported);
    }
    let mut message = message.ok_or_else(|| A2aError::invalid_field("message", "is required"))?;
    let owner = call.owner(&tenant)?;
    let open_slot = |task_id: &str| stream.then(|| core.subscriptions.open(&owner, task_id)).transpose();
    let sent = |task_id: &str, new_task: bool, message: &Message| Sent {
        owner: owner.clone(),
        message_id: message.message_id.clone(),
        fingerprint: fingerprint(message, metadata.as_ref()),
        task_id: task_id.to_owned(),
        new_task,
    };

    if !message.task_id.is_empty() {
        let slot = open_slot(&message.task_id)?;
        let sent = sent(&message.task_id, false, &message);
        let follow_up = FollowUp {
            message,
            extensions: call.extensions.clone(),
            metadata,
            accepted_output_modes: configuration.accepted_output_modes,
            // Only for follow-ups: a message that creates a task has nothing to match.
            if_generation_match: configuration.if_generation_match,
        };
        let started = continue_task(core, owner, follow_up, inline_push, call.protocol, answer);
        return Ok((Begun::Boxed(Box::pin(started)), slot, sent));
    }

    let task_id = crate::proto::new_id();
    // As the client sent it: before the task and context ids are filled in.
    let sent = sent(&task_id, true, &message);
    core.env.limits.check_first(&task_id, &message)?;
    let reservation = core.env.live.reserve(&owner.principal, &task_id)?;
    let slot = open_slot(&task_id)?;
    // A context this call opens takes the task's id: one id fewer to mint, and a fleet can
    // then find a context of one task without an index of its own (docs/FLEET.md).
    let context_id = match message.context_id.as_str() {
        "" => task_id.clone(),
        given => given.to_owned(),
    };
    message.task_id = task_id.clone();
    message.context_id = context_id.clone();
    let inline_push =
        inline_push.map(|config| TaskPushNotificationConfig { task_id: task_id.clone(), ..config });
    let task = Task {
        id: task_id.clone(),
        context_id: context_id.clone(),
        status: Some(TaskStatus {
            state: TaskState::Submitted as i32,
            message: None,
            timestamp: Some(now()),
        }),
        history: vec![message.clone()],
        // A2A dev-1.1: the creation is generation 1; the agent's first update is 2.
        generation: 1,
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
    let begun = match inline_push {
        None => Begun::Start(start_task(core.env.clone(), owner, ctx, answer, reservation)),
        Some(config) => {
            // Not run yet: the webhook is registered first.
            let starting = start_task(core.env.clone(), owner.clone(), ctx, answer, reservation);
            Begun::Webhook(Box::new(InlineWebhook::new(owner, config, call.protocol, starting)))
        }
    };
    Ok((begun, slot, sent))
}

/// Hands a follow-up message to the live (or hibernated) task it names.
async fn continue_task(
    core: &Core,
    owner: Owner,
    follow_up: FollowUp,
    mut push: Option<TaskPushNotificationConfig>,
    version: ProtocolVersion,
    answer: Answer,
) -> Result<Started, A2aError> {
    let task_id = follow_up.message.task_id.clone();
    let ask = |handle: crate::task::fleet::TaskRef| {
        let (push, owner, task_id) = (push.take(), &owner, &task_id);
        // A copy, in case the actor is gone before it takes the message.
        let follow_up = follow_up.clone();
        async move {
            if let Some(config) = push {
                let config = TaskPushNotificationConfig { task_id: task_id.clone(), ..config };
                if let Err(error) = core.register_push_config(owner, config, version).await {
                    return Ok(Some(Err(error)));
                }
            }
            handle.send_message(follow_up, answer).await
        }
    };
    match with_live(&core.env, &owner, &task_id, ask).await? {
        Found::Live(started) => started,
        Found::Finished(task) => Err(A2aError::UnsupportedOperation(format!(
            "task {task_id} is in terminal state {} and accepts no more messages",
            state_name(&task)
        ))),
    }
}
