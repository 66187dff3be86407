//! SendMessage and SendStreamingMessage: starting a task or continuing one. The streams that
//! follow a turn are in `stream.rs`.
use std::sync::Arc;

use futures::StreamExt;

use super::stream::{Ends, turn_stream};
use super::tasks::trimmed;
use super::{Core, EventStream, state_name, validate};
use crate::agent::RequestContext;
use crate::call::{CallContext, Owner};
use crate::error::A2aError;
use crate::proto::{
    Message, SendMessageRequest, SendMessageResponse, StreamResponse, Task, TaskPushNotificationConfig,
    TaskState, TaskStatus, send_message_response, stream_response::Payload,
};
use crate::task::handle::{Answer, FollowUp, Started};
use crate::task::log::TaskEvent;
use crate::task::now;
use crate::task::quota::SubscriptionSlot;
use crate::task::registry::{Found, with_live};
use crate::task::spawn::start_task;

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

impl Core {
    /// SendMessage: blocks until the task is terminal or interrupted, unless
    /// `returnImmediately`.
    pub async fn send_message(
        &self,
        call: &CallContext,
        request: SendMessageRequest,
    ) -> Result<SendMessageResponse, A2aError> {
        self.send_message_shared(call, request).await.map(SendOutcome::into_response)
    }

    /// SendMessage, answering with the task shared (no copy of it is made for the answer).
    pub async fn send_message_shared(
        &self,
        call: &CallContext,
        request: SendMessageRequest,
    ) -> Result<SendOutcome, A2aError> {
        self.admit(call)?;
        send_message(self, call, request).await
    }

    /// SendStreamingMessage: the Task (or one Message), then updates until terminal or
    /// interrupted.
    pub async fn send_streaming_message(
        &self,
        call: &CallContext,
        request: SendMessageRequest,
    ) -> Result<EventStream, A2aError> {
        self.admit(call)?;
        self.require_streaming()?;
        send_streaming_message(self, call, request).await
    }
}

async fn send_message(
    core: &Core,
    call: &CallContext,
    request: SendMessageRequest,
) -> Result<SendOutcome, A2aError> {
    let configuration = request.configuration.as_ref();
    let return_immediately = configuration.is_some_and(|c| c.return_immediately);
    let history_length = configuration.and_then(|c| c.history_length);
    let answer = if return_immediately { Answer::Follow } else { Answer::Settle };
    let task = match begin(core, call, request, answer, false).await?.0 {
        Started::Message(message) => return Ok(SendOutcome::Message(message)),
        Started::Turn(turn) => turn.subscription.snapshot,
        Started::Settled(task) => task,
    };
    Ok(SendOutcome::Task(trimmed(task, history_length)))
}

async fn send_streaming_message(
    core: &Core,
    call: &CallContext,
    request: SendMessageRequest,
) -> Result<EventStream, A2aError> {
    let history_length = request.configuration.as_ref().and_then(|c| c.history_length);
    let (started, slot) = begin(core, call, request, Answer::Follow, true).await?;
    Ok(match started {
        Started::Message(message) => {
            let event = TaskEvent::new(0, StreamResponse { payload: Some(Payload::Message(message)) });
            futures::stream::iter([Ok(Arc::new(event))]).boxed()
        }
        Started::Turn(turn) => {
            let ends = Ends { shutdown: Some(core.draining()), max_age: core.settings.max_stream, slot };
            turn_stream(*turn, history_length, ends)
        }
        Started::Settled(_) => unreachable!("a stream asks to follow, not to settle"),
    })
}

/// Validates a SendMessage request and hands the message to a new task or to the live task
/// it names, answered as `answer` asks. A `stream` takes its subscription slot first, and
/// gets it back to hold while it lasts.
async fn begin(
    core: &Core,
    call: &CallContext,
    request: SendMessageRequest,
    answer: Answer,
    stream: bool,
) -> Result<(Started, Option<SubscriptionSlot>), A2aError> {
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

    if !message.task_id.is_empty() {
        let slot = open_slot(&message.task_id)?;
        let follow_up = FollowUp {
            message,
            extensions: call.extensions.clone(),
            metadata,
            accepted_output_modes: configuration.accepted_output_modes,
            // Only for follow-ups: a message that creates a task has nothing to match.
            if_generation_match: configuration.if_generation_match,
        };
        // Boxed: its state would otherwise enlarge every SendMessage's future.
        let started = Box::pin(continue_task(core, owner, follow_up, inline_push, answer)).await?;
        return Ok((started, slot));
    }

    let task_id = uuid::Uuid::new_v4().to_string();
    core.env.limits.check_first(&task_id, &message)?;
    let reservation = core.env.live.reserve(&owner.principal, &task_id)?;
    let slot = open_slot(&task_id)?;
    let context_id = match message.context_id.as_str() {
        "" => uuid::Uuid::new_v4().to_string(),
        given => given.to_owned(),
    };
    message.task_id = task_id.clone();
    message.context_id = context_id.clone();
    let registered = match inline_push {
        // Registered before the agent runs, so the webhook sees the task's first event.
        Some(config) => {
            let config = TaskPushNotificationConfig { task_id: task_id.clone(), ..config };
            Some((owner.clone(), Box::pin(core.register_push_config(&owner, config)).await?))
        }
        None => None,
    };
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
    let started = start_task(core.env.clone(), owner, ctx, answer, reservation)
        .run()
        .await
        .await
        .unwrap_or_else(|_| Err(A2aError::Internal("the task's actor ended without an answer".into())));
    if let Some((owner, config)) = registered
        && !matches!(started, Ok(Started::Turn(_) | Started::Settled(_)))
    {
        // No task came to be (a direct reply, or the agent failed first): nor does its webhook.
        if let Err(error) = core.env.store.delete_push_config(&owner, &config.task_id, &config.id).await {
            tracing::warn!(%error, "forgetting the push config of a task that never existed failed");
        }
    }
    Ok((started?, slot))
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
    let ask = |handle: crate::task::fleet::TaskRef| {
        let (push, owner, task_id) = (push.take(), &owner, &task_id);
        // A copy, in case the actor is gone before it takes the message.
        let follow_up = follow_up.clone();
        async move {
            if let Some(config) = push {
                let config = TaskPushNotificationConfig { task_id: task_id.clone(), ..config };
                if let Err(error) = core.register_push_config(owner, config).await {
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::agent::{AgentExecutor, EventSink};
    use crate::core::CoreSettings;
    use crate::proto::{GetTaskRequest, ListTasksRequest, Part, Role, SendMessageConfiguration};
    use crate::push::PushSettings;
    use crate::push::ssrf::Policy;
    use crate::task::store::{MemoryStore, Retention, TaskStore};

    /// Answers every message directly, noting the task id the message would have had.
    #[derive(Default)]
    struct Replier(Mutex<Vec<String>>);

    #[async_trait::async_trait]
    impl AgentExecutor for Replier {
        async fn execute(&self, ctx: RequestContext, events: EventSink) -> Result<(), A2aError> {
            self.0.lock().unwrap().push(ctx.task_id.clone());
            let _ = events.reply("hello").await;
            Ok(())
        }
    }

    fn request_with_webhook() -> SendMessageRequest {
        let message = Message {
            message_id: uuid::Uuid::new_v4().to_string(),
            role: Role::User as i32,
            parts: vec![Part {
                content: Some(crate::proto::part::Content::Text("hi".into())),
                ..Default::default()
            }],
            ..Default::default()
        };
        let webhook =
            TaskPushNotificationConfig { url: "http://127.0.0.1:9/hook".into(), ..Default::default() };
        SendMessageRequest {
            message: Some(message),
            configuration: Some(SendMessageConfiguration {
                task_push_notification_config: Some(webhook),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_direct_reply_leaves_no_task_and_no_webhook_behind() {
        let agent = Arc::new(Replier::default());
        let store: Arc<dyn TaskStore> = Arc::new(MemoryStore::new(Retention::default()));
        let settings = CoreSettings {
            push_notifications: true,
            push: PushSettings { policy: Policy::with_allowlist(true, &[]), ..Default::default() },
            ..Default::default()
        };
        let core = Core::new(agent.clone(), store.clone(), settings);
        let call = CallContext::default();
        let owner = call.owner("").unwrap();

        let outcome = core.send_message_shared(&call, request_with_webhook()).await.unwrap();
        assert!(matches!(outcome, SendOutcome::Message(m) if m.task_id.is_empty()));
        let mut stream = core.send_streaming_message(&call, request_with_webhook()).await.unwrap();
        let first = stream.next().await.unwrap().unwrap();
        assert!(matches!(first.response.payload, Some(Payload::Message(_))));
        assert!(stream.next().await.is_none(), "one message, then the end");

        let ids = agent.0.lock().unwrap().clone();
        assert_eq!(ids.len(), 2);
        assert_eq!(core.live_tasks(), 0, "nothing registered");
        for id in ids {
            assert!(store.get(&owner, &id).await.unwrap().is_none(), "nothing stored");
            assert!(store.push_configs(&owner, &id).await.unwrap().is_empty(), "the webhook is forgotten");
            let get = core.get_task(&call, GetTaskRequest { id: id.clone(), ..Default::default() }).await;
            assert!(matches!(get, Err(A2aError::TaskNotFound(_))));
        }
        let list = core.list_tasks(&call, ListTasksRequest::default()).await.unwrap();
        assert_eq!(list.total_size, 0);
    }
}
