//! The task actor: one tokio task per live task, the task's only writer.
//!
//! Everything that touches a live task arrives as a `Command` on one bounded channel: agent
//! events, subscriptions, snapshots, cancels and follow-up messages. The task's agent
//! executions run inside the actor too ([`Executions`]), and an execution's end is handled
//! only after every event it sent. Because one loop handles all of it in order, a
//! subscription is answered with the snapshot and the log position it reflects in one step:
//! the subscriber gets the Task first and then exactly the events after it, with no lock, gap
//! or duplicate.
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use tokio::sync::{mpsc, oneshot};

use super::execution::Executions;
use super::handle::{Command, FollowUp, Reply, Started, Subscription, TaskHandle, Turn};
use super::log::{EventLog, Feed, SubscriberCount};
use super::metrics::{TaskMetrics, track_state};
use super::registry::Registry;
use super::store::TaskStore;
use super::{is_interrupted, is_terminal, now, state_of};
use crate::agent::{AgentEvent, AgentExecutor, RequestContext};
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
    /// How long an idle waiting task keeps its actor (`None`: for ever).
    pub idle_timeout: Option<std::time::Duration>,
    /// Where events go for webhook delivery, when push notifications are on.
    pub push: Option<Arc<PushDispatcher>>,
}

/// Starts the task of a new message: its actor, running the agent. The receiver answers as
/// `settle` asks (see [`Reply`]). If the agent's first event is a message, that is the answer
/// and no task ever exists; otherwise the actor registers the task and lives until it is
/// terminal.
///
/// The actor first runs right here, in the caller's task, until it has to wait; only then is
/// it spawned. An agent that answers without waiting has finished by then, so a quick task
/// costs no spawn and its caller's answer is already there.
pub fn start_task(env: Arc<TaskEnv>, owner: Owner, ctx: RequestContext, settle: bool) -> StartingTask {
    let (tx, rx) = mpsc::channel(env.channel_capacity);
    let (reply_tx, reply) = oneshot::channel();
    let task = ctx.task.clone();
    let handle = TaskHandle { id: task.id.as_str().into(), owner: Arc::new(owner), tx };
    let mut executions = Executions::default();
    let starter = if settle {
        executions.start(0, env.executor.clone(), ctx, handle.tx.clone(), None);
        Starter::Settle(reply_tx)
    } else {
        let (done_tx, done) = oneshot::channel();
        executions.start(0, env.executor.clone(), ctx, handle.tx.clone(), Some(done_tx));
        Starter::Follow { reply: reply_tx, done }
    };
    let mut actor = TaskActor::new(env, handle, rx, task);
    actor.executions = executions;
    actor.starter = Some(Box::new(starter));
    StartingTask { run: Box::pin(actor.run()), reply }
}

/// A new task's actor, not yet run, and where its answer will come. Built synchronously so
/// that the caller's future does not have to hold the request while it waits.
pub struct StartingTask {
    run: Pin<Box<dyn Future<Output = ()> + Send>>,
    reply: oneshot::Receiver<Result<Started, A2aError>>,
}

impl StartingTask {
    /// Runs the actor until it first waits (spawning it then), and hands back the receiver of
    /// its answer.
    pub async fn run(self) -> oneshot::Receiver<Result<Started, A2aError>> {
        let Self { mut run, reply } = self;
        let first = std::future::poll_fn(|cx| {
            Poll::Ready(std::panic::catch_unwind(AssertUnwindSafe(|| run.as_mut().poll(cx))))
        })
        .await;
        match first {
            Ok(Poll::Pending) => drop(tokio::spawn(run)),
            Ok(Poll::Ready(())) => {}
            // The actor's own bug: its drop cleans up, and the caller's receiver says it ended.
            Err(_) => tracing::error!("a task actor panicked"),
        }
        reply
    }
}

/// Gives a hibernated task its actor back, from the task as stored; or the actor another
/// caller revived meanwhile. Registry and revival go together under the registry's lock, so a
/// task never has two actors.
pub fn revive(env: &Arc<TaskEnv>, owner: Owner, task: Arc<Task>) -> TaskHandle {
    env.registry.get_or_insert_with(&task.id.clone(), || {
        let (tx, rx) = mpsc::channel(env.channel_capacity);
        let handle = TaskHandle { id: task.id.as_str().into(), owner: Arc::new(owner), tx };
        let mut actor = TaskActor::new(env.clone(), handle.clone(), rx, task);
        actor.exists = true;
        TaskMetrics::get().revived.increment(1);
        track_state(TaskState::Unspecified, state_of(actor.task.status.as_ref()));
        drop(tokio::spawn(actor.run()));
        handle
    })
}

/// Who sent a new task's first message, until the agent's first event says whether there is a
/// task at all; how they want to hear back as in [`Reply`].
enum Starter {
    /// With the first execution's end, for their [`Turn`].
    Follow {
        reply: oneshot::Sender<Result<Started, A2aError>>,
        done: oneshot::Receiver<()>,
    },
    Settle(oneshot::Sender<Result<Started, A2aError>>),
}

impl Starter {
    /// Answers at once (a direct message, or an error: there is no task).
    fn answer(self, started: Result<Started, A2aError>) {
        let (Self::Follow { reply, .. } | Self::Settle(reply)) = self;
        let _ = reply.send(started);
    }
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
    /// The task as it is now. Shared (copy on write) with the store and with snapshots, so
    /// persisting and snapshotting cost a reference count, not a copy.
    task: Arc<Task>,
    handle: TaskHandle,
    rx: mpsc::Receiver<Command>,
    log: Arc<EventLog>,
    executions: Executions,
    next_exec: u64,
    /// Callers of a blocking SendMessage, with the execution their message started.
    settling: Vec<(u64, oneshot::Sender<Result<Started, A2aError>>)>,
    /// Set until the agent's first event: then the task exists (or was a direct reply).
    starter: Option<Box<Starter>>,
    /// The agent's first event was a task event: the task is registered and stored.
    exists: bool,
    /// How far the store is behind the actor's state.
    dirty: Dirty,
    /// The task reached a terminal state (or never came to exist).
    finished: bool,
    /// When the actor last had something to do, for the idle timeout.
    last_active: tokio::time::Instant,
    /// The task hibernated: the store has it and the actor left the registry.
    hibernated: bool,
    env: Arc<TaskEnv>,
}

impl TaskActor {
    /// An actor with nothing running, not yet existing (see `exists`).
    fn new(env: Arc<TaskEnv>, handle: TaskHandle, rx: mpsc::Receiver<Command>, task: Arc<Task>) -> Self {
        Self {
            log: Arc::new(EventLog::new(handle.id.clone(), env.log_capacity, env.log_bytes)),
            task,
            handle,
            rx,
            executions: Executions::default(),
            next_exec: 1,
            settling: Vec::new(),
            starter: None,
            exists: false,
            dirty: Dirty::Clean,
            finished: false,
            last_active: tokio::time::Instant::now(),
            hibernated: false,
            env,
        }
    }

    async fn run(mut self) {
        while !self.finished {
            if self.dirty == Dirty::State && self.rx.is_empty() {
                self.persist().await;
            }
            let deadline = self.deadline();
            tokio::select! {
                biased;
                command = self.rx.recv() => match command {
                    Some(command) => {
                        self.last_active = tokio::time::Instant::now();
                        self.handle(command).await
                    }
                    None => break,
                },
                (exec, result) = self.executions.next_finished() => {
                    // Whatever the execution sent before it returned is applied first.
                    self.drain().await;
                    self.on_execution_finished(exec, result);
                    self.last_active = tokio::time::Instant::now();
                }
                _ = sleep_until(deadline) => {
                    if self.dirty != Dirty::Clean {
                        self.persist().await;
                    } else if self.hibernate() {
                        break;
                    }
                }
            }
        }
        self.log.close();
        if self.hibernated {
            // Callers that sent a command meanwhile see the actor gone and revive the task.
            self.rx.close();
            while self.rx.recv().await.is_some() {}
            return;
        }
        if !self.exists {
            return;
        }
        self.dirty = Dirty::State;
        self.persist().await;
        self.env.registry.remove(&self.handle);
        self.settle_all();
        let state = state_of(self.task.status.as_ref());
        track_state(state, TaskState::Unspecified);
        if let Some(counter) = TaskMetrics::get().finished(state) {
            counter.increment(1);
        }
    }

    /// When the actor must wake without a command: to persist artifact changes, or to see
    /// whether it may hibernate.
    fn deadline(&self) -> Option<tokio::time::Instant> {
        match self.dirty {
            Dirty::Artifacts(since) => Some(tokio::time::Instant::from_std(since + ARTIFACT_PERSIST_DELAY)),
            Dirty::State => None,
            Dirty::Clean => self.env.idle_timeout.filter(|_| self.quiet()).map(|t| self.last_active + t),
        }
    }

    /// Waiting for the client with nothing running and no caller waiting.
    fn quiet(&self) -> bool {
        self.exists
            && self.executions.is_empty()
            && self.settling.is_empty()
            && is_interrupted(state_of(self.task.status.as_ref()))
    }

    /// Leaves the registry if nobody follows the task (the store is up to date); otherwise the
    /// idle clock starts again. Whether it did.
    fn hibernate(&mut self) -> bool {
        if !self.quiet() || self.log.feeds() > 0 || !self.rx.is_empty() {
            self.last_active = tokio::time::Instant::now();
            return false;
        }
        self.env.registry.remove(&self.handle);
        self.hibernated = true;
        track_state(state_of(self.task.status.as_ref()), TaskState::Unspecified);
        TaskMetrics::get().hibernated.increment(1);
        true
    }

    /// Handles every command already queued.
    async fn drain(&mut self) {
        while !self.finished
            && let Ok(command) = self.rx.try_recv()
        {
            self.handle(command).await;
        }
    }

    async fn handle(&mut self, command: Command) {
        match command {
            Command::Agent(event) => self.on_agent_event(*event),
            Command::Subscribe { reply } => {
                let _ = reply.send(self.subscription());
            }
            Command::Snapshot { reply } => {
                let _ = reply.send(self.task.clone());
            }
            Command::Cancel { reply } => {
                self.env.executor.cancel(&self.task.id).await;
                self.executions.abort_all();
                self.set_status(TaskStatus {
                    state: TaskState::Canceled as i32,
                    message: None,
                    timestamp: None,
                });
                let _ = reply.send(self.task.clone());
            }
            Command::Message { turn, reply } => self.on_message(*turn, reply),
        }
    }

    fn subscription(&self) -> Subscription {
        Subscription {
            snapshot: self.task.clone(),
            feed: Feed::new(self.log.clone(), self.log.last_seq(), self.env.subscribers.clone()),
        }
    }

    async fn persist(&mut self) {
        if self.dirty == Dirty::Clean {
            return;
        }
        match self.env.store.save(&self.handle.owner, self.task.clone()).await {
            Ok(()) => self.dirty = Dirty::Clean,
            Err(error) => {
                tracing::warn!(task_id = %self.task.id, %error, "persisting the task failed")
            }
        }
    }

    /// The task, to change (copied first if a snapshot or the store still shares it).
    fn task_mut(&mut self) -> &mut Task {
        Arc::make_mut(&mut self.task)
    }

    /// The agent's first task event: the task now exists. It is registered, and its starter
    /// hears back (at once, or when the turn ends).
    fn begin(&mut self, starter: Starter) {
        self.exists = true;
        self.env.registry.insert(self.handle.clone());
        TaskMetrics::get().started.increment(1);
        track_state(TaskState::Unspecified, TaskState::Submitted);
        self.dirty = Dirty::State;
        match starter {
            Starter::Follow { reply, done } => {
                let subscription = Subscription {
                    snapshot: self.task.clone(),
                    feed: Feed::new(self.log.clone(), 0, self.env.subscribers.clone()),
                };
                let _ = reply.send(Ok(Started::Turn(Box::new(Turn { subscription, done }))));
            }
            Starter::Settle(reply) => self.settling.push((0, reply)),
        }
    }

    fn on_message(&mut self, turn: FollowUp, reply: Reply) {
        let FollowUp { mut message, extensions, metadata, accepted_output_modes } = turn;
        if !message.context_id.is_empty() && message.context_id != self.task.context_id {
            return reply.send(Err(A2aError::invalid_field(
                "message.contextId",
                format!("does not match the context of task {}", self.task.id),
            )));
        }
        message.context_id = self.task.context_id.clone();
        self.task_mut().history.push(message.clone());
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
        let (executor, tx) = (self.env.executor.clone(), self.handle.tx.clone());
        match reply {
            Reply::Follow(reply) => {
                let (done_tx, done) = oneshot::channel();
                self.executions.start(exec, executor, ctx, tx, Some(done_tx));
                let turn = Turn { subscription: self.subscription(), done };
                let _ = reply.send(Ok(Started::Turn(Box::new(turn))));
            }
            Reply::Settle(reply) => {
                self.executions.start(exec, executor, ctx, tx, None);
                self.settling.push((exec, reply));
            }
        }
    }

    fn on_execution_finished(&mut self, exec: u64, result: Result<(), A2aError>) {
        if let Some(starter) = self.starter.take() {
            // The execution ended before its first event: there is no task.
            let error = result.err().unwrap_or_else(|| {
                A2aError::InvalidAgentResponse(
                    "the agent finished without creating a task or replying".into(),
                )
            });
            starter.answer(Err(error));
            self.finished = true;
            return;
        }
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
        if settles(state_of(self.task.status.as_ref()))
            && let Some(i) = self.settling.iter().position(|(e, _)| *e == exec)
        {
            let (_, reply) = self.settling.swap_remove(i);
            let _ = reply.send(Ok(Started::Settled(self.task.clone())));
        }
    }

    /// Answers every blocked caller with the task as it is now.
    fn settle_all(&mut self) {
        for (_, reply) in self.settling.drain(..) {
            let _ = reply.send(Ok(Started::Settled(self.task.clone())));
        }
    }

    fn on_agent_event(&mut self, event: AgentEvent) {
        if let Some(starter) = self.starter.take() {
            if let AgentEvent::Message(message) = event {
                // A direct reply: no task.
                self.executions.abort_all();
                self.finished = true;
                return starter.answer(Ok(Started::Message(message)));
            }
            self.begin(*starter);
        }
        if let Err(problem) = self.apply(event) {
            self.executions.abort_all();
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
        let artifacts = &mut self.task_mut().artifacts;
        match artifacts.iter_mut().find(|a| a.artifact_id == artifact.artifact_id) {
            Some(existing) if update.append => existing.parts.extend(artifact.parts.iter().cloned()),
            Some(existing) => *existing = artifact.clone(),
            None => artifacts.push(artifact.clone()),
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
            self.task_mut().history.push(message.clone());
        }
        let previous = state_of(self.task.status.as_ref());
        let state = state_of(Some(&status));
        self.task_mut().status = Some(status.clone());
        track_state(previous, state);
        self.publish(Payload::StatusUpdate(TaskStatusUpdateEvent {
            task_id: self.task.id.clone(),
            context_id: self.task.context_id.clone(),
            status: Some(status),
            metadata,
        }));
        if is_terminal(state) {
            self.finished = true;
        }
        if settles(state) {
            self.settle_all();
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
        TaskMetrics::get().events.increment(1);
        let event = self.log.append(StreamResponse { payload: Some(payload) });
        if let Some(push) = &self.env.push {
            let terminal = event.state().is_some_and(is_terminal);
            push.enqueue(&self.handle.owner, &self.task.id, event, terminal);
        }
    }
}

/// Whether a blocking SendMessage returns at this state: terminal or interrupted.
fn settles(state: TaskState) -> bool {
    is_terminal(state) || is_interrupted(state)
}

/// Resolves at `deadline`; never without one.
async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

impl Drop for TaskActor {
    /// If the actor ends without reaching a terminal state (it panicked), its subscribers must
    /// not wait forever: the log is closed and the task leaves the registry.
    fn drop(&mut self) {
        if !self.finished && self.exists && !self.hibernated {
            self.log.close();
            self.env.registry.remove(&self.handle);
        }
    }
}
