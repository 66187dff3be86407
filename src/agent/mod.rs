//! Agents plug in here: implement [`AgentExecutor`], emit events through the [`EventSink`].
//!
//! The sink is bounded and feeds the task's actor directly: an agent that produces faster than
//! the actor can take waits in `send`, so backpressure reaches the agent, never memory.
pub mod demo;

use async_trait::async_trait;
use tokio::sync::mpsc;

use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::{
    Artifact, Message, Part, Role, Task, TaskArtifactUpdateEvent, TaskState, TaskStatus,
    TaskStatusUpdateEvent, part,
};
use crate::task::actor::Command;

/// An agent: turns a user message into task events (or one direct reply).
#[async_trait]
pub trait AgentExecutor: Send + Sync + 'static {
    /// Handles one user message. The first event decides what the caller gets: a
    /// [`AgentEvent::Message`] is a direct reply and no task is created; anything else creates
    /// (or continues) the task. Returning leaves an interrupted task waiting for the next
    /// message; returning while the task is still SUBMITTED or WORKING fails it.
    async fn execute(&self, ctx: RequestContext, events: EventSink) -> Result<(), A2aError>;

    /// Called when a client cancels the task, before its running executions are dropped.
    async fn cancel(&self, _task_id: &str) {}
}

/// What an execution knows about the message it handles.
#[derive(Debug, Clone)]
pub struct RequestContext {
    /// The task this message belongs to (generated for a new task).
    pub task_id: String,
    /// The task's context.
    pub context_id: String,
    /// The user message, with `task_id` and `context_id` filled in.
    pub message: Message,
    /// The task as it stood when the message arrived, history included (for a new task: the
    /// SUBMITTED task holding just this message).
    pub task: Task,
    /// Whether this message starts a new task.
    pub new_task: bool,
    /// Who sent it.
    pub owner: Owner,
    /// Extensions the client asked to activate.
    pub extensions: Vec<String>,
    /// The request's `metadata`.
    pub metadata: Option<pbjson_types::Struct>,
    /// Media types the client accepts for output.
    pub accepted_output_modes: Vec<String>,
}

impl RequestContext {
    /// The message's text parts, joined with newlines.
    pub fn text(&self) -> String {
        message_text(&self.message)
    }

    /// The task's state when the message arrived.
    pub fn state(&self) -> TaskState {
        crate::task::state_of(self.task.status.as_ref())
    }
}

/// One thing an agent reports.
#[derive(Debug, Clone)]
pub enum AgentEvent {
    /// A new status.
    Status(TaskStatusUpdateEvent),
    /// A whole artifact or a chunk of one.
    Artifact(TaskArtifactUpdateEvent),
    /// A direct reply; valid only as the first event of a new message, and then no task exists.
    Message(Message),
}

/// The task no longer takes events (it ended, was canceled, or the reply was a message).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the task no longer accepts events")]
pub struct SinkClosed;

impl From<SinkClosed> for A2aError {
    fn from(_: SinkClosed) -> Self {
        A2aError::Unavailable("the task no longer accepts events".into())
    }
}

/// Where an execution sends its events. Cheap to clone; bounded.
#[derive(Clone)]
pub struct EventSink {
    task_id: String,
    context_id: String,
    tx: mpsc::Sender<Command>,
}

impl EventSink {
    pub(crate) fn new(task_id: String, context_id: String, tx: mpsc::Sender<Command>) -> Self {
        Self { task_id, context_id, tx }
    }

    /// The task the events belong to.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The task's context.
    pub fn context_id(&self) -> &str {
        &self.context_id
    }

    /// Sends one event, waiting while the task's queue is full.
    pub async fn send(&self, event: AgentEvent) -> Result<(), SinkClosed> {
        self.tx.send(Command::Agent(Box::new(event))).await.map_err(|_| SinkClosed)
    }

    /// Moves the task to `state`, with an optional agent message explaining it.
    pub async fn status(&self, state: TaskState, message: Option<Message>) -> Result<(), SinkClosed> {
        self.send(AgentEvent::Status(TaskStatusUpdateEvent {
            task_id: self.task_id.clone(),
            context_id: self.context_id.clone(),
            status: Some(TaskStatus { state: state as i32, message, timestamp: None }),
            metadata: None,
        }))
        .await
    }

    /// A status with an optional text message.
    async fn status_text(&self, state: TaskState, text: Option<&str>) -> Result<(), SinkClosed> {
        self.status(state, text.map(|t| self.agent_message(t))).await
    }

    /// WORKING, optionally saying what is going on.
    pub async fn working(&self, text: Option<&str>) -> Result<(), SinkClosed> {
        self.status_text(TaskState::Working, text).await
    }

    /// INPUT_REQUIRED, optionally with the question.
    pub async fn input_required(&self, text: Option<&str>) -> Result<(), SinkClosed> {
        self.status_text(TaskState::InputRequired, text).await
    }

    /// AUTH_REQUIRED, optionally explaining what authorization is needed.
    pub async fn auth_required(&self, text: Option<&str>) -> Result<(), SinkClosed> {
        self.status_text(TaskState::AuthRequired, text).await
    }

    /// COMPLETED, optionally with a final message.
    pub async fn complete(&self, text: Option<&str>) -> Result<(), SinkClosed> {
        self.status_text(TaskState::Completed, text).await
    }

    /// FAILED, optionally saying why.
    pub async fn fail(&self, text: Option<&str>) -> Result<(), SinkClosed> {
        self.status_text(TaskState::Failed, text).await
    }

    /// REJECTED, optionally saying why.
    pub async fn reject(&self, text: Option<&str>) -> Result<(), SinkClosed> {
        self.status_text(TaskState::Rejected, text).await
    }

    /// A whole artifact in one event.
    pub async fn artifact(&self, artifact: Artifact) -> Result<(), SinkClosed> {
        self.artifact_chunk(artifact, false, true).await
    }

    /// One chunk of an artifact: `append` adds its parts to the artifact with the same id,
    /// `last_chunk` says no more chunks follow.
    pub async fn artifact_chunk(
        &self,
        artifact: Artifact,
        append: bool,
        last_chunk: bool,
    ) -> Result<(), SinkClosed> {
        self.send(AgentEvent::Artifact(TaskArtifactUpdateEvent {
            task_id: self.task_id.clone(),
            context_id: self.context_id.clone(),
            artifact: Some(artifact),
            append,
            last_chunk,
            metadata: None,
        }))
        .await
    }

    /// A direct reply instead of a task (only as the first event of a new message).
    pub async fn reply(&self, text: &str) -> Result<(), SinkClosed> {
        let mut message = self.agent_message(text);
        message.task_id.clear();
        self.send(AgentEvent::Message(message)).await
    }

    /// An agent message in this task's context holding one text part.
    pub fn agent_message(&self, text: &str) -> Message {
        Message {
            message_id: uuid::Uuid::new_v4().to_string(),
            context_id: self.context_id.clone(),
            task_id: self.task_id.clone(),
            role: Role::Agent as i32,
            parts: vec![text_part(text)],
            ..Default::default()
        }
    }
}

/// A part holding `text`.
pub fn text_part(text: &str) -> Part {
    Part { content: Some(part::Content::Text(text.to_owned())), ..Default::default() }
}

/// An artifact with one text part.
pub fn text_artifact(artifact_id: &str, name: &str, text: &str) -> Artifact {
    Artifact {
        artifact_id: artifact_id.to_owned(),
        name: name.to_owned(),
        parts: vec![text_part(text)],
        ..Default::default()
    }
}

/// The text parts of a message, joined with newlines.
pub fn message_text(message: &Message) -> String {
    let texts: Vec<&str> = message
        .parts
        .iter()
        .filter_map(|p| match &p.content {
            Some(part::Content::Text(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    texts.join("\n")
}
