//! Agents plug in here: implement [`AgentExecutor`], emit events through the [`EventSink`].
//!
//! The sink is bounded and feeds the task's actor directly: an agent that produces faster than
//! the actor can take waits in `send`, so backpressure reaches the agent, never memory.
//!
//! The core checks what an agent emits. An event for another task or context, an artifact
//! without an id or without parts, an invalid state, or a direct message once the task exists
//! fails the task (FAILED, with a status message saying what was wrong) and drops the
//! execution; a panic in `execute` fails the task too. Once the task is terminal the sink is
//! closed: `send` answers [`SinkClosed`], which `?` turns into an error that ends the execution.
//!
//! Built-in agents: [`demo`] (deterministic behaviours for trying the protocol), [`exec`]
//! (runs a command per task) and [`relay`] (each task is one task of an upstream A2A agent). `examples/shout.rs` builds a server around a custom agent.
pub mod demo;
pub mod exec;
pub mod relay;

use std::sync::Arc;

use async_trait::async_trait;

use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::{
    Artifact, Message, Part, Role, Task, TaskArtifactUpdateEvent, TaskState, TaskStatus,
    TaskStatusUpdateEvent, part,
};
use crate::task::handle::Command;
use crate::task::mailbox;

/// An agent: turns a user message into task events (or one direct reply).
///
/// A counting agent, and a message sent to it through the [`Core`](crate::core::Core) (a
/// server serves the same core over the wire; see `examples/shout.rs`):
///
/// ```
/// use std::sync::Arc;
///
/// use a2a_server::agent::{AgentExecutor, EventSink, RequestContext, text_artifact, text_part};
/// use a2a_server::call::CallContext;
/// use a2a_server::core::{Core, CoreSettings};
/// use a2a_server::error::A2aError;
/// use a2a_server::proto::{Message, Role, SendMessageRequest, TaskState, send_message_response::Payload};
/// use a2a_server::task::store::{MemoryStore, Retention};
///
/// /// Counts the words of each message.
/// struct WordCount;
///
/// #[async_trait::async_trait]
/// impl AgentExecutor for WordCount {
///     async fn execute(&self, ctx: RequestContext, events: EventSink) -> Result<(), A2aError> {
///         events.working(Some("counting")).await?; // the first event creates the task
///         let words = ctx.text().split_whitespace().count();
///         events.artifact(text_artifact("count", "word count", &words.to_string())).await?;
///         events.complete(None).await?;
///         Ok(())
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), A2aError> {
/// let store = Arc::new(MemoryStore::new(Retention::default()));
/// let core = Core::new(Arc::new(WordCount), store, CoreSettings::default());
/// let message = Message {
///     message_id: "m-1".into(),
///     role: Role::User as i32,
///     parts: vec![text_part("one two three")],
///     ..Default::default()
/// };
/// let request = SendMessageRequest { message: Some(message), ..Default::default() };
/// let Some(Payload::Task(task)) = core.send_message(&CallContext::default(), request).await?.payload else {
///     panic!("expected a task");
/// };
/// assert_eq!(task.status.unwrap().state, TaskState::Completed as i32);
/// assert_eq!(task.artifacts[0].parts[0], text_part("3"));
/// # Ok(())
/// # }
/// ```
#[async_trait]
pub trait AgentExecutor: Send + Sync + 'static {
    /// Handles one user message. The first event decides what the caller gets: a
    /// [`AgentEvent::Message`] is a direct reply and no task is created; anything else creates
    /// (or continues) the task. Returning leaves an interrupted task waiting for the next
    /// message; returning while the task is still SUBMITTED or WORKING fails it (unless another
    /// execution of the same task is still running).
    ///
    /// Every message runs its own execution: a message on an existing task
    /// ([`RequestContext::new_task`] false) runs while earlier executions of that task may
    /// still be running. The caller of a blocking SendMessage gets the task once it is terminal
    /// or interrupted, or once this execution has returned and the task is waiting again; so
    /// an execution that hands the message to work started earlier should report the state it
    /// leads to (e.g. WORKING) before returning.
    ///
    /// The future is polled by the task's actor, between the commands it handles: awaiting is
    /// free, but long synchronous work inside a poll delays subscriptions and reads of this task
    /// meanwhile; run such work with `tokio::task::spawn_blocking` (or a task of its own).
    async fn execute(&self, ctx: RequestContext, events: EventSink) -> Result<(), A2aError>;

    /// Called when a client cancels the task, before its running executions are dropped; the
    /// task becomes CANCELED when this returns. Release what the task holds here (the exec
    /// agent stops its process group). Executions are dropped at an `.await`, so resources
    /// they own should also clean up on drop.
    async fn cancel(&self, _task_id: &str) {}

    /// [`cancel`](Self::cancel) with the whole task at hand, for an agent that keeps what it
    /// needs to cancel in the task (the relay keeps the upstream's task id in its metadata, so
    /// any replica can cancel it). By default, `cancel` with the task's id.
    async fn cancel_task(&self, task: &Task) {
        self.cancel(&task.id).await
    }
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
    /// SUBMITTED task holding just this message). Shared with the task's actor.
    pub task: Arc<Task>,
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

    /// The task's messages so far, oldest first, this one last.
    pub fn history(&self) -> &[Message] {
        &self.task.history
    }

    /// The tenant the task belongs to (empty when the server is not multi-tenant).
    pub fn tenant(&self) -> &str {
        &self.owner.tenant
    }

    /// The authenticated caller, namespaced by its credential (`key:alice`, `jwt:<issuer>#alice`,
    /// `mtls:alice`; see the README's "Principals").
    pub fn principal(&self) -> &str {
        &self.owner.principal
    }

    /// The task's state when the message arrived.
    pub fn state(&self) -> TaskState {
        crate::task::state_of(self.task.status.as_ref())
    }
}

/// One thing an agent reports.
#[derive(Debug, Clone)]
pub enum AgentEvent {
    /// A new status. Its `metadata` is also merged into the task's (key by key), which is
    /// where an agent keeps what a later execution, on any replica, needs.
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

/// Where an execution sends its events. Cheap to clone; bounded: when the task's queue is
/// full, sending waits, so a slow consumer slows the agent down instead of growing memory.
///
/// Every helper returns [`SinkClosed`] once the task no longer takes events. Streaming one
/// artifact in chunks, then finishing:
///
/// ```
/// use a2a_server::agent::{EventSink, SinkClosed, text_artifact};
///
/// async fn stream_lines(events: &EventSink, lines: &[&str]) -> Result<(), SinkClosed> {
///     events.working(None).await?;
///     for (i, line) in lines.iter().enumerate() {
///         let chunk = text_artifact("lines", "lines", *line);
///         // The first chunk creates the artifact; later ones append to it.
///         events.artifact_chunk(chunk, i > 0, i + 1 == lines.len()).await?;
///     }
///     events.complete(Some("all lines sent")).await
/// }
/// ```
///
/// Asking for input instead: `events.input_required(Some("Which city?"))`, after which the
/// execution returns; the answer arrives as a new execution on the same task. A direct reply
/// without a task: `events.reply("pong")` as the only event.
#[derive(Clone)]
pub struct EventSink {
    task_id: String,
    context_id: String,
    tx: mailbox::Sender<Command>,
}

impl EventSink {
    pub(crate) fn new(task_id: String, context_id: String, tx: mailbox::Sender<Command>) -> Self {
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
            // The actor fills in the task's ids (copying them here cost two allocations).
            task_id: String::new(),
            context_id: String::new(),
            status: Some(TaskStatus { state: state as i32, message, timestamp: None }),
            metadata: None,
            // The task's actor numbers it.
            generation: 0,
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
            // The actor fills in the task's ids.
            task_id: String::new(),
            context_id: String::new(),
            artifact: Some(artifact),
            append,
            last_chunk,
            metadata: None,
            // The task's actor numbers it.
            generation: 0,
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
            message_id: crate::proto::new_id(),
            context_id: self.context_id.clone(),
            task_id: self.task_id.clone(),
            role: Role::Agent as i32,
            parts: vec![text_part(text)],
            ..Default::default()
        }
    }
}

/// A part holding `text`.
pub fn text_part(text: impl Into<String>) -> Part {
    Part { content: Some(part::Content::Text(text.into())), ..Default::default() }
}

/// An artifact with one text part (an owned `text` moves in, a borrowed one is copied).
pub fn text_artifact(artifact_id: &str, name: &str, text: impl Into<String>) -> Artifact {
    Artifact {
        artifact_id: artifact_id.to_owned(),
        name: name.to_owned(),
        parts: vec![text_part(text)],
        ..Default::default()
    }
}

/// The text parts of a message, joined with newlines.
pub fn message_text(message: &Message) -> String {
    let texts = || {
        message.parts.iter().filter_map(|p| match &p.content {
            Some(part::Content::Text(t)) => Some(t.as_str()),
            _ => None,
        })
    };
    // Written straight into one string of the right size (no list of the parts first).
    let size = texts().map(|t| t.len() + 1).sum::<usize>().saturating_sub(1);
    let mut joined = String::with_capacity(size);
    for (i, text) in texts().enumerate() {
        if i > 0 {
            joined.push('\n');
        }
        joined.push_str(text);
    }
    joined
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_text_joins_the_text_parts_with_newlines() {
        let data = Part { content: Some(part::Content::Raw(vec![1, 2])), ..Default::default() };
        let message = |parts: Vec<Part>| message_text(&Message { parts, ..Default::default() });
        assert_eq!(message(vec![]), "");
        assert_eq!(message(vec![data.clone()]), "");
        assert_eq!(message(vec![text_part("one")]), "one");
        assert_eq!(message(vec![text_part("a"), data, text_part(""), text_part("b")]), "a\n\nb");
    }
}
