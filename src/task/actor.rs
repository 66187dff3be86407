//! The task actor: one tokio task per live task, the task's only writer.
//!
//! Everything that touches a live task arrives as a `Command` on one bounded channel: agent
//! events, subscriptions, snapshots, cancels, follow-up messages, and the end of an agent
//! execution. Because one loop handles them in order, a subscription is answered with the
//! snapshot and the log position it reflects in one step: the subscriber gets the Task first
//! and then exactly the events after it, with no lock, gap or duplicate.
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use super::handle::{Command, FollowUp, Started, Subscription, TaskHandle, Turn};
use super::log::{EventLog, Feed, SubscriberCount};
use super::registry::Registry;
use super::store::TaskStore;
use super::{is_terminal, now, state_of};
use crate::agent::{AgentEvent, AgentExecutor, EventSink, RequestContext};
use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::{
    Message, Role, StreamResponse, Task, TaskArtifactUpdateEvent, TaskState, TaskStatus,
    TaskStatusUpdateEvent, stream_response::Payload,
};
use crate::push::PushDispatcher;

/// What every actor shares: the agent, the store, the registry and the limits.
pub struct TaskEnv {
    /// The agent that executes messages.
    pub executor: Arc<dyn AgentExecutor>,
    /// Where task state is persisted.
    pub store: Arc<dyn TaskStore>,
    /// Live tasks.
    pub registry: Arc<Registry>,
    /// Open subscriptions, for observability and leak tests.
    pub subscribers: Arc<SubscriberCount>,
    /// Events kept per task for subscribers that fall behind.
    pub log_capacity: usize,
    /// Bytes (encoded) of events kept per task.
    pub log_bytes: usize,
    /// Commands (agent events included) queued per task before senders wait.
    pub channel_capacity: usize,
    /// Where events go for webhook delivery, when push notifications are on.
    pub push: Option<Arc<PushDispatcher>>,
}

/// Runs the agent on the first message of a new task. If its first event is a task event, the
/// task's actor starts (and registers itself); if it is a message, no task ever exists.
pub async fn start_task(env: Arc<TaskEnv>, owner: Owner, ctx: RequestContext) -> Result<Started, A2aError> {
    let (tx, mut rx) = mpsc::channel(env.channel_capacity);
    let task = ctx.task.clone();
    let execution = spawn_execution(env.executor.clone(), ctx, tx.clone(), 0);
    let first = match rx.recv().await {
        Some(Command::Agent(event)) => match *event {
            AgentEvent::Message(message) => {
                execution.abort();
                return Ok(Started::Message(message));
            }
            // Kept boxed: the actor's future would otherwise reserve room for it for life.
            event => Box::new(event),
        },
        Some(Command::ExecutionFinished { result: Err(error), .. }) => return Err(*error),
        _ => {
            return Err(A2aError::InvalidAgentResponse(
                "the agent finished without creating a task or replying".into(),
            ));
        }
    };

    let handle = TaskHandle { id: task.id.as_str().into(), owner: Arc::new(owner), tx: tx.clone() };
    let log = Arc::new(EventLog::new(task.id.clone(), env.log_capacity, env.log_bytes));
    let (done_tx, done) = oneshot::channel();
    let subscription =
        Subscription { snapshot: task.clone(), feed: Feed::new(log.clone(), 0, env.subscribers.clone()) };
    let actor = TaskActor {
        task,
        handle: handle.clone(),
        rx,
        log,
        executions: HashMap::from([(0, Execution { abort: execution, _done: done_tx })]),
        next_exec: 1,
        dirty: Dirty::State,
        finished: false,
        env: env.clone(),
    };
    env.registry.insert(handle.clone());
    metrics::counter!("a2a_tasks_started_total").increment(1);
    track_state(TaskState::Unspecified, TaskState::Submitted);
    tokio::spawn(actor.run(first));
    Ok(Started::Task { handle, turn: Box::new(Turn { subscription, done }) })
}

/// Moves a task between the live-tasks-by-state gauges (UNSPECIFIED: not counted).
fn track_state(from: TaskState, to: TaskState) {
    if from == to {
        return;
    }
    if from != TaskState::Unspecified && !is_terminal(from) {
        metrics::gauge!("a2a_tasks", "state" => from.as_str_name()).decrement(1.0);
    }
    if to != TaskState::Unspecified && !is_terminal(to) {
        metrics::gauge!("a2a_tasks", "state" => to.as_str_name()).increment(1.0);
    }
}

/// Runs one execution of the agent in its own tokio task and reports its end to the actor
/// (after all its events, since they share the channel). A panic becomes an error.
fn spawn_execution(
    executor: Arc<dyn AgentExecutor>,
    ctx: RequestContext,
    tx: mpsc::Sender<Command>,
    exec: u64,
) -> AbortHandle {
    let sink = EventSink::new(ctx.task_id.clone(), ctx.context_id.clone(), tx.clone());
    tokio::spawn(async move {
        let result = AssertUnwindSafe(executor.execute(ctx, sink))
            .catch_unwind()
            .await
            .unwrap_or_else(|_| Err(A2aError::Internal("the agent panicked".into())));
        let result = result.map_err(Box::new);
        let _ = tx.send(Command::ExecutionFinished { exec, result }).await;
    })
    .abort_handle()
}

struct Execution {
    abort: AbortHandle,
    /// Dropped when the execution ends: wakes the caller waiting for its turn.
    _done: oneshot::Sender<()>,
}

/// Artifact-only changes reach the store at most this late (state changes at once).
const ARTIFACT_PERSIST_DELAY: std::time::Duration = std::time::Duration::from_millis(200);

/// What the store has not seen yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dirty {
    Clean,
    /// Only artifacts changed, since this moment.
    Artifacts(std::time::Instant),
    /// The status, the history or the task's existence changed.
    State,
}

struct TaskActor {
    task: Task,
    handle: TaskHandle,
    rx: mpsc::Receiver<Command>,
    log: Arc<EventLog>,
    executions: HashMap<u64, Execution>,
    next_exec: u64,
    /// How far the store is behind the actor's state.
    dirty: Dirty,
    /// The task reached a terminal state.
    finished: bool,
    env: Arc<TaskEnv>,
}

impl TaskActor {
    async fn run(mut self, first: Box<AgentEvent>) {
        // The first event is applied before the first await, so the future never holds it.
        self.on_agent_event(*first);
        self.persist().await;
        while !self.finished {
            let command = match self.rx.try_recv() {
                Ok(command) => command,
                Err(_) => match self.idle().await {
                    Some(command) => command,
                    None => break,
                },
            };
            self.handle(command).await;
        }
        self.log.close();
        self.dirty = Dirty::State;
        self.persist().await;
        self.env.registry.remove(&self.task.id);
        let state = state_of(self.task.status.as_ref());
        track_state(state, TaskState::Unspecified);
        metrics::counter!("a2a_tasks_finished_total", "state" => state.as_str_name()).increment(1);
    }

    async fn handle(&mut self, command: Command) {
        match command {
            Command::Agent(event) => self.on_agent_event(*event),
            Command::ExecutionFinished { exec, result } => self.on_execution_finished(exec, result),
            Command::Subscribe { reply } => {
                let _ = reply.send(self.subscription());
            }
            Command::Snapshot { reply } => {
                let _ = reply.send(self.task.clone());
            }
            Command::Cancel { reply } => {
                self.env.executor.cancel(&self.task.id).await;
                self.abort_executions();
                self.set_status(TaskStatus {
                    state: TaskState::Canceled as i32,
                    message: None,
                    timestamp: None,
                });
                let _ = reply.send(self.task.clone());
            }
            Command::Message { turn, reply } => {
                let _ = reply.send(self.on_message(*turn));
            }
        }
    }

    fn subscription(&self) -> Subscription {
        Subscription {
            snapshot: self.task.clone(),
            feed: Feed::new(self.log.clone(), self.log.last_seq(), self.env.subscribers.clone()),
        }
    }

    /// Waits for the next command once the queue is empty, persisting meanwhile: state changes
    /// at once (a burst costs one write), artifact-only changes at most every
    /// [`ARTIFACT_PERSIST_DELAY`] (a long stream of chunks would otherwise copy the growing task
    /// into the store once per chunk).
    async fn idle(&mut self) -> Option<Command> {
        loop {
            match self.dirty {
                Dirty::Clean => return self.rx.recv().await,
                Dirty::State => self.persist().await,
                Dirty::Artifacts(since) => {
                    let deadline = tokio::time::Instant::from_std(since + ARTIFACT_PERSIST_DELAY);
                    tokio::select! {
                        command = self.rx.recv() => return command,
                        _ = tokio::time::sleep_until(deadline) => self.persist().await,
                    }
                }
            }
        }
    }

    async fn persist(&mut self) {
        if self.dirty == Dirty::Clean {
            return;
        }
        match self.env.store.save(&self.handle.owner, &self.task).await {
            Ok(()) => self.dirty = Dirty::Clean,
            Err(error) => {
                tracing::warn!(task_id = %self.task.id, %error, "persisting the task failed")
            }
        }
    }

    fn on_message(&mut self, turn: FollowUp) -> Result<Turn, A2aError> {
        let FollowUp { mut message, extensions, metadata, accepted_output_modes } = turn;
        if !message.context_id.is_empty() && message.context_id != self.task.context_id {
            return Err(A2aError::invalid_field(
                "message.contextId",
                format!("does not match the context of task {}", self.task.id),
            ));
        }
        message.context_id = self.task.context_id.clone();
        self.task.history.push(message.clone());
        self.dirty = Dirty::State;
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
        self.next_exec += 1;
        let abort = spawn_execution(self.env.executor.clone(), ctx, self.handle.tx.clone(), exec);
        let (done_tx, done) = oneshot::channel();
        self.executions.insert(exec, Execution { abort, _done: done_tx });
        Ok(Turn { subscription: self.subscription(), done })
    }

    fn on_execution_finished(&mut self, exec: u64, result: Result<(), Box<A2aError>>) {
        self.executions.remove(&exec);
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
    }

    fn on_agent_event(&mut self, event: AgentEvent) {
        if let Err(problem) = self.apply(event) {
            self.abort_executions();
            self.fail(&format!("invalid agent response: {problem}"));
        }
    }

    /// Checks an agent event against the protocol and applies it; the reason when it breaks it.
    fn apply(&mut self, event: AgentEvent) -> Result<(), String> {
        match event {
            AgentEvent::Message(_) => Err("a direct message is only allowed instead of a task".into()),
            AgentEvent::Status(update) => {
                self.check_ids(&update.task_id, &update.context_id)?;
                let status = update.status.ok_or("a status update without a status")?;
                match TaskState::try_from(status.state) {
                    Ok(TaskState::Unspecified) | Err(_) => {
                        Err(format!("invalid task state {}", status.state))
                    }
                    Ok(_) => {
                        self.set_status_with_metadata(status, update.metadata);
                        Ok(())
                    }
                }
            }
            AgentEvent::Artifact(update) => {
                self.check_ids(&update.task_id, &update.context_id)?;
                let artifact = update.artifact.as_ref().ok_or("an artifact update without an artifact")?;
                if artifact.artifact_id.is_empty() {
                    return Err("an artifact without an artifactId".into());
                }
                if artifact.parts.is_empty() {
                    return Err(format!("artifact {} has no parts", artifact.artifact_id));
                }
                self.merge_artifact(&update);
                let update = TaskArtifactUpdateEvent {
                    task_id: self.task.id.clone(),
                    context_id: self.task.context_id.clone(),
                    ..update
                };
                self.publish(Payload::ArtifactUpdate(update));
                Ok(())
            }
        }
    }

    fn check_ids(&self, task_id: &str, context_id: &str) -> Result<(), String> {
        if !task_id.is_empty() && task_id != self.task.id {
            return Err(format!("an event for task {task_id} sent to task {}", self.task.id));
        }
        if !context_id.is_empty() && context_id != self.task.context_id {
            return Err(format!("an event for context {context_id} sent to task {}", self.task.id));
        }
        Ok(())
    }

    fn merge_artifact(&mut self, update: &TaskArtifactUpdateEvent) {
        let Some(artifact) = &update.artifact else {
            return;
        };
        let existing = self.task.artifacts.iter_mut().find(|a| a.artifact_id == artifact.artifact_id);
        match existing {
            Some(existing) if update.append => existing.parts.extend(artifact.parts.iter().cloned()),
            Some(existing) => *existing = artifact.clone(),
            None => self.task.artifacts.push(artifact.clone()),
        }
    }

    fn set_status(&mut self, status: TaskStatus) {
        self.set_status_with_metadata(status, None)
    }

    /// Records a new status: stamps it, keeps its message in the history, publishes it, and
    /// marks the task finished when the state is terminal.
    fn set_status_with_metadata(&mut self, mut status: TaskStatus, metadata: Option<pbjson_types::Struct>) {
        if status.timestamp.is_none() {
            status.timestamp = Some(now());
        }
        if let Some(message) = status.message.as_mut() {
            if message.message_id.is_empty() {
                message.message_id = uuid::Uuid::new_v4().to_string();
            }
            if message.role == Role::Unspecified as i32 {
                message.role = Role::Agent as i32;
            }
            message.task_id = self.task.id.clone();
            message.context_id = self.task.context_id.clone();
            self.task.history.push(message.clone());
        }
        let previous = state_of(self.task.status.as_ref());
        self.task.status = Some(status.clone());
        track_state(previous, state_of(self.task.status.as_ref()));
        self.publish(Payload::StatusUpdate(TaskStatusUpdateEvent {
            task_id: self.task.id.clone(),
            context_id: self.task.context_id.clone(),
            status: Some(status),
            metadata,
        }));
        if is_terminal(state_of(self.task.status.as_ref())) {
            self.finished = true;
        }
    }

    fn fail(&mut self, text: &str) {
        tracing::warn!(task_id = %self.task.id, reason = text, "task failed");
        let message = Message {
            message_id: uuid::Uuid::new_v4().to_string(),
            role: Role::Agent as i32,
            parts: vec![crate::agent::text_part(text)],
            ..Default::default()
        };
        self.set_status(TaskStatus {
            state: TaskState::Failed as i32,
            message: Some(message),
            timestamp: None,
        });
    }

    fn publish(&mut self, payload: Payload) {
        self.dirty = match (&payload, self.dirty) {
            (Payload::ArtifactUpdate(_), Dirty::Clean) => Dirty::Artifacts(std::time::Instant::now()),
            (Payload::ArtifactUpdate(_), dirty) => dirty,
            _ => Dirty::State,
        };
        metrics::counter!("a2a_events_total").increment(1);
        let event = self.log.append(StreamResponse { payload: Some(payload) });
        if let Some(push) = &self.env.push {
            let terminal = event.state().is_some_and(is_terminal);
            push.enqueue(&self.handle.owner, &self.task.id, event, terminal);
        }
    }

    fn abort_executions(&mut self) {
        for (_, execution) in self.executions.drain() {
            execution.abort.abort();
        }
    }
}

impl Drop for TaskActor {
    /// If the actor ends without reaching a terminal state (it panicked), its subscribers must
    /// not wait forever: the log is closed and the task leaves the registry.
    fn drop(&mut self) {
        if !self.finished {
            self.log.close();
            self.env.registry.remove(&self.task.id);
        }
    }
}
