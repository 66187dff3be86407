//! The relay agent (`--agent a2a --upstream URL`): each task here is one task of an upstream
//! A2A agent, v1.0 or v0.3, reached through [`crate::upstream`]. Every upstream event becomes
//! this task's event (with this server's ids and generations), so the upstream agent gets
//! every binding, resume, the fleet, auth, limits, push and `/ui` of this server.
//!
//! - **The upstream task's id is kept in the task's metadata** (key [`UPSTREAM_KEY`], set with
//!   the first status relayed), so a follow-up or a cancel on any replica reaches the same
//!   upstream task.
//! - **A stream that breaks is resumed** with the upstream's own subscribe (or, for an
//!   upstream that does not stream, by reading the task), and [`Mirror`] relays only what this
//!   task does not show yet.
//! - **An upstream that fails, or stays unreachable for `--upstream-retry-secs`, fails the
//!   task** with a status message naming it; a task never hangs on it.
mod mirror;
mod remote;

use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;

pub use mirror::{Catch, Mirror};
pub use remote::UPSTREAM_KEY;
use remote::{Live, LiveEntry, Remote};

use super::{AgentEvent, AgentExecutor, EventSink, RequestContext, SinkClosed};
use crate::error::A2aError;
use crate::proto::{
    AgentCard, Message, SendMessageConfiguration, SendMessageRequest, StreamResponse, Task,
    TaskArtifactUpdateEvent, TaskState, TaskStatus, TaskStatusUpdateEvent, stream_response::Payload,
};
use crate::upstream::{Events, Upstream, UpstreamCard, UpstreamError, UpstreamSettings, UpstreamVersion};

/// The relay agent.
pub struct RelayAgent {
    upstream: Upstream,
    /// How failures name the upstream: its URL without credentials, query or fragment.
    name: String,
    /// The upstream tasks of this replica's running executions, for a cancel that comes before
    /// the task's metadata names one.
    live: Live,
}

impl RelayAgent {
    /// Reads the upstream's card and connects; the card returned is the upstream's own
    /// (name, description, skills, modes) for this server to complete with its interfaces.
    pub async fn connect(settings: UpstreamSettings) -> Result<(Self, AgentCard), String> {
        let (upstream, UpstreamCard { card, endpoint, streaming }) = Upstream::connect(settings).await?;
        let name = url::Url::parse(&endpoint.url)
            .map(|mut url| {
                let _ = url.set_password(None);
                let _ = url.set_username("");
                url.set_query(None);
                url.set_fragment(None);
                url.to_string()
            })
            .unwrap_or_else(|_| endpoint.url.clone());
        tracing::info!(upstream = %name, binding = ?endpoint.binding, version = ?endpoint.version, streaming, "relaying to an upstream agent");
        let card = completed(card, &name);
        Ok((Self { upstream, name, live: Live::default() }, card))
    }
}

/// The upstream's card, completed where it says nothing this server's card must say (an
/// endpoint named directly may have no card at all).
fn completed(mut card: AgentCard, name: &str) -> AgentCard {
    if card.name.is_empty() {
        // An endpoint named directly whose origin serves no card: a card must still say something.
        card.name = "relay".into();
        card.description = format!("Relays each task to the A2A agent at {name}.");
        card.version = env!("CARGO_PKG_VERSION").into();
    }
    if card.skills.is_empty() {
        card.skills.push(crate::proto::AgentSkill {
            id: "relay".into(),
            name: "Relay".into(),
            description: card.description.clone(),
            tags: vec!["relay".into()],
            ..Default::default()
        });
    }
    for modes in [&mut card.default_input_modes, &mut card.default_output_modes] {
        if modes.is_empty() {
            modes.push("text/plain".into());
        }
    }
    card
}

#[async_trait]
impl AgentExecutor for RelayAgent {
    async fn execute(&self, ctx: RequestContext, events: EventSink) -> Result<(), A2aError> {
        let mirror = Mirror::of(&ctx.task);
        let remote = Remote::of(&ctx.task);
        let mut relay = Relay {
            upstream: &self.upstream,
            name: &self.name,
            events: &events,
            live: self.live.hold(&ctx.task_id),
            start: mirror.clone(),
            mirror,
            stored: remote.is_some(),
            remote,
            // A follow-up starts on a task that is waiting: it is not over until the upstream
            // shows that it took the message (a status of this turn).
            acknowledged: ctx.new_task,
            new_task: ctx.new_task,
            sent_message_id: ctx.message.message_id.clone(),
            heard: 0,
        };
        match relay.run(&ctx).await {
            Ok(()) | Err(Stop::Closed) => Ok(()),
            Err(Stop::Failed(why)) => {
                tracing::warn!(task_id = %ctx.task_id, upstream = %self.name, %why, "relayed task failed");
                // The upstream task, if any, would go on for nobody.
                if let Some(remote) = relay.remote.clone() {
                    self.cancel_upstream(&ctx.task_id, remote);
                }
                relay.fail(&why).await.or(Ok(()))
            }
        }
    }

    async fn cancel_task(&self, task: &Task) {
        if let Some(remote) = Remote::of(task).or_else(|| self.live.get(&task.id)) {
            self.cancel_upstream(&task.id, remote);
        }
    }
}

impl RelayAgent {
    /// Cancels the upstream task off the caller (the actor): the task here is canceled at once,
    /// the upstream's as soon as it answers; a refusal is logged.
    fn cancel_upstream(&self, task_id: &str, remote: Remote) {
        let upstream = self.upstream.clone();
        let (name, task_id) = (self.name.clone(), task_id.to_owned());
        tokio::spawn(async move {
            if let Err(error) = upstream.cancel(&remote.task_id).await {
                tracing::warn!(%task_id, upstream = %name, %error, "the upstream did not cancel its task");
            }
        });
    }
}

/// How long a call's stream may take to end by itself once the task settled. Dropped unread,
/// it would be reset, and h2 closes a connection after 1,024 resets of its own making: every
/// task then in flight on it failed (a2a-bench `--relay`, 48 of 250,000 calls).
const STREAM_END_GRACE: Duration = Duration::from_secs(2);

/// Lets a settled call's stream end: read to its end now if it already has, else off the
/// execution, for at most [`STREAM_END_GRACE`].
fn let_end(mut events: Events) {
    use futures::FutureExt;
    for _ in 0..16 {
        match events.next().now_or_never() {
            Some(Some(_)) => continue,
            Some(None) => return,
            None => break,
        }
    }
    tokio::spawn(async move {
        let _ = tokio::time::timeout(STREAM_END_GRACE, events.for_each(|_| async {})).await;
    });
}

/// Why a relay stopped early.
enum Stop {
    /// The task no longer takes events (canceled here, or ended).
    Closed,
    /// The upstream failed the relay: the task fails, saying this.
    Failed(String),
}

impl From<SinkClosed> for Stop {
    fn from(_: SinkClosed) -> Self {
        Stop::Closed
    }
}

/// How following one upstream call ended.
enum Followed {
    /// The task is terminal or waiting (or the answer was a direct message).
    Settled,
    /// The upstream answered, and the task is still running there.
    Running,
    /// The call ended or broke first, or the upstream was not reached.
    Broke(String),
}

/// One execution's relay.
struct Relay<'a> {
    upstream: &'a Upstream,
    name: &'a str,
    events: &'a EventSink,
    live: LiveEntry,
    /// What the task showed when this execution began.
    start: Mirror,
    mirror: Mirror,
    remote: Option<Remote>,
    /// Whether the task's metadata holds `remote` already.
    stored: bool,
    /// Whether the upstream has shown it took this execution's message.
    acknowledged: bool,
    new_task: bool,
    /// The id of the client's message this execution sent upstream.
    sent_message_id: String,
    /// Upstream events received, so a resumed call that delivered some counts as an answer.
    heard: u64,
}

impl Relay<'_> {
    async fn run(&mut self, ctx: &RequestContext) -> Result<(), Stop> {
        let request = self.outgoing(ctx);
        let events = match self.upstream.send(request).await {
            Ok(events) => events,
            Err(error) => return Err(Stop::Failed(format!("the message was not delivered: {error}"))),
        };
        let mut why = match self.follow(events).await? {
            Followed::Settled => return Ok(()),
            Followed::Running => String::new(),
            Followed::Broke(why) => why,
        };
        // Only time without an answer counts against the retry window.
        let window = self.upstream.settings().retry_window;
        let mut deadline = tokio::time::Instant::now() + window;
        let mut pause = Duration::from_millis(50);
        loop {
            let Some(remote) = self.remote.clone() else {
                return Err(Stop::Failed(format!("the call ended before the upstream named a task ({why})")));
            };
            let heard = self.heard;
            match self.resume(&remote.task_id).await? {
                Followed::Settled => return Ok(()),
                Followed::Running => deadline = tokio::time::Instant::now() + window,
                Followed::Broke(again) if self.heard > heard => {
                    // A resumed stream that delivered events broke again later: it was an answer.
                    deadline = tokio::time::Instant::now() + window;
                    pause = Duration::from_millis(50);
                    why = again;
                }
                Followed::Broke(again) => {
                    why = again;
                    if tokio::time::Instant::now() >= deadline {
                        return Err(Stop::Failed(format!("unreachable for {} s: {why}", window.as_secs())));
                    }
                }
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(self.upstream.settings().poll_interval);
        }
    }

    /// Whether this execution is over: the upstream took its message and the task is terminal
    /// or waits for the client again.
    fn done(&self) -> bool {
        self.acknowledged && self.mirror.settled()
    }

    /// The request sent upstream: the client's message, addressed to the upstream task (or, for
    /// a new task, to the upstream context of this caller's context, which the upstream may adopt).
    fn outgoing(&self, ctx: &RequestContext) -> SendMessageRequest {
        let mut message = ctx.message.clone();
        match &self.remote {
            Some(remote) => {
                message.task_id = remote.task_id.clone();
                message.context_id = remote.context_id.clone();
            }
            None => {
                message.task_id.clear();
                message.context_id = remote::upstream_context(&ctx.owner, &ctx.context_id);
            }
        }
        // They name tasks of this server, which the upstream does not know.
        message.reference_task_ids.clear();
        // An upstream that does not stream is asked to answer at once (with its task's id, so a
        // cancel or a follow-up can reach it), then read until the task settles.
        let return_immediately = !self.upstream.streams();
        let configuration =
            (return_immediately || !ctx.accepted_output_modes.is_empty()).then(|| SendMessageConfiguration {
                accepted_output_modes: ctx.accepted_output_modes.clone(),
                return_immediately,
                ..Default::default()
            });
        SendMessageRequest {
            tenant: String::new(),
            message: Some(message),
            configuration,
            metadata: ctx.metadata.clone(),
        }
    }

    /// One more try after a break. A v1.0 upstream that streams is subscribed to: its stream
    /// opens with the task, so what was missed is caught up exactly, then followed. Otherwise
    /// the task is read: a v0.3 `tasks/resubscribe` opens with the next event and no snapshot,
    /// so what happened meanwhile could be neither told apart nor replayed exactly.
    async fn resume(&mut self, task_id: &str) -> Result<Followed, Stop> {
        if self.upstream.streams() && self.upstream.endpoint().version == UpstreamVersion::V10 {
            match self.upstream.subscribe(task_id).await {
                Ok(events) => return self.follow(events).await,
                Err(UpstreamError::Unreachable(why)) => return Ok(Followed::Broke(why)),
                // Refused: a task that is over can no longer be subscribed to; read it.
                Err(_) => {}
            }
        }
        self.read(task_id).await
    }

    /// Reads the upstream task and relays what it holds that is new.
    async fn read(&mut self, task_id: &str) -> Result<Followed, Stop> {
        match self.upstream.get_task(task_id).await {
            Ok(task) => {
                self.heard += 1;
                self.snapshot(task).await?;
                if self.done() {
                    return Ok(Followed::Settled);
                }
                Ok(Followed::Running)
            }
            Err(UpstreamError::Unreachable(why)) => Ok(Followed::Broke(why)),
            Err(error) => Err(Stop::Failed(error.to_string())),
        }
    }

    /// Relays one call's events until the task settles or the call ends.
    async fn follow(&mut self, mut events: Events) -> Result<Followed, Stop> {
        while let Some(event) = events.next().await {
            let payload = match event {
                Ok(StreamResponse { payload: Some(payload) }) => payload,
                Ok(StreamResponse { payload: None }) => continue,
                Err(UpstreamError::Unreachable(why)) => return Ok(Followed::Broke(why)),
                Err(error) => return Err(Stop::Failed(error.to_string())),
            };
            self.heard += 1;
            match payload {
                Payload::Message(message) if self.new_task && self.remote.is_none() => {
                    let reply = Message {
                        task_id: String::new(),
                        context_id: self.events.context_id().into(),
                        ..message
                    };
                    self.events.send(AgentEvent::Message(reply)).await?;
                    let_end(events);
                    return Ok(Followed::Settled);
                }
                Payload::Message(message) => {
                    // A message about a task: shown as its status message, the state unchanged.
                    let state = self.mirror.state();
                    let state = if state == TaskState::Submitted { TaskState::Working } else { state };
                    let status = TaskStatus { state: state as i32, message: Some(message), timestamp: None };
                    self.acknowledged = true;
                    self.status(status, None).await?;
                }
                Payload::Task(task) => {
                    self.learn(&task.id, &task.context_id);
                    self.snapshot(task).await?;
                }
                Payload::StatusUpdate(update) => {
                    self.learn(&update.task_id, &update.context_id);
                    self.acknowledged = true;
                    if let Some(status) = update.status
                        && let Some(status) = self.without_echo(status)
                    {
                        self.status(status, update.metadata).await?;
                    }
                }
                Payload::ArtifactUpdate(update) => {
                    self.learn(&update.task_id, &update.context_id);
                    if let Some(artifact) = update.artifact {
                        self.artifact(artifact, update.append, update.last_chunk, update.metadata).await?;
                    }
                }
            }
            if self.done() {
                let_end(events);
                return Ok(Followed::Settled);
            }
        }
        Ok(Followed::Broke("the upstream ended the stream before the task ended".into()))
    }

    /// A status without the client's own message, which some upstreams echo in one (ADK on
    /// a2a-sdk 0.3 opens its stream with SUBMITTED carrying it): the task's history holds it
    /// already. `None` when nothing is left to relay (the state unchanged).
    fn without_echo(&self, mut status: TaskStatus) -> Option<TaskStatus> {
        if status.message.as_ref().is_some_and(|m| m.message_id == self.sent_message_id) {
            status.message = None;
            if status.state == self.mirror.state() as i32 {
                return None;
            }
        }
        Some(status)
    }

    /// Notes the upstream task's ids the first time an event names them.
    fn learn(&mut self, task_id: &str, context_id: &str) {
        if self.remote.is_none() && !task_id.is_empty() {
            let remote = Remote { task_id: task_id.into(), context_id: context_id.into() };
            self.live.set(&remote);
            self.remote = Some(remote);
        }
    }

    /// Relays what an upstream snapshot holds that is new.
    async fn snapshot(&mut self, task: Task) -> Result<(), Stop> {
        let changes = self.mirror.catch_up(&task);
        if changes.is_empty() && !self.acknowledged {
            // Nothing new, but the upstream's status may have been set again (same state).
            let mut probe = self.mirror.clone();
            if let Some(status) = &task.status {
                probe.status(status);
            }
            self.acknowledged = probe.status_moved_from(&self.start);
        }
        for change in changes {
            match change {
                Catch::Artifact { artifact, append, last_chunk } => {
                    self.artifact(artifact, append, last_chunk, None).await?
                }
                Catch::Status(status) => self.status(status, None).await?,
            }
        }
        Ok(())
    }

    /// Relays a status. The first one relayed after the upstream named its task carries that
    /// name into the task's metadata (no event of its own, so the sequence stays the
    /// upstream's; every execution ends on a status, so it is stored before a follow-up).
    async fn status(
        &mut self,
        mut status: TaskStatus,
        metadata: Option<pbjson_types::Struct>,
    ) -> Result<(), Stop> {
        if matches!(TaskState::try_from(status.state), Ok(TaskState::Unspecified) | Err(_)) {
            return Err(Stop::Failed(format!("it sent a status without a valid state ({})", status.state)));
        }
        let mut metadata = remote::strip(metadata);
        if !self.stored
            && let Some(remote) = &self.remote
        {
            let mut merged = metadata.unwrap_or_default();
            merged.fields.extend(remote.metadata().fields);
            metadata = Some(merged);
            self.stored = true;
        }
        if let Some(message) = status.message.as_mut() {
            // This task's ids replace the upstream's (the task's rules set them).
            message.task_id.clear();
            message.context_id.clear();
        }
        self.mirror.status(&status);
        if self.mirror.status_moved_from(&self.start) {
            self.acknowledged = true;
        }
        let update = TaskStatusUpdateEvent { status: Some(status), metadata, ..Default::default() };
        self.events.send(AgentEvent::Status(update)).await?;
        Ok(())
    }

    async fn artifact(
        &mut self,
        artifact: crate::proto::Artifact,
        append: bool,
        last_chunk: bool,
        metadata: Option<pbjson_types::Struct>,
    ) -> Result<(), Stop> {
        if artifact.parts.is_empty() {
            // Nothing to show; the core refuses a chunk without parts.
            return Ok(());
        }
        self.mirror.artifact(&artifact, append);
        let update = TaskArtifactUpdateEvent {
            artifact: Some(artifact),
            append,
            last_chunk,
            metadata,
            ..Default::default()
        };
        self.events.send(AgentEvent::Artifact(update)).await?;
        Ok(())
    }

    /// Fails the task, naming the upstream.
    async fn fail(&mut self, why: &str) -> Result<(), SinkClosed> {
        let text = format!("upstream agent {}: {why}", self.name);
        let message = self.events.agent_message(&text);
        match self
            .status(
                TaskStatus { state: TaskState::Failed as i32, message: Some(message), timestamp: None },
                None,
            )
            .await
        {
            Err(Stop::Closed) => Err(SinkClosed),
            _ => Ok(()),
        }
    }
}
