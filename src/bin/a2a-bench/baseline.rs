//! The baseline: a bare tonic server speaking the same `lf.a2a.v1.A2AService`, doing the same
//! wire work as the demo agent with nothing else: no actor, no event log, no store, no
//! validation, no axum router, no reflection or health. It is the "limit" the ratios compare
//! against; our server can approach it but not beat it on equal work.
//!
//! - SendMessage anything else → a COMPLETED Task echoing the text, built like ours (same fields,
//!   same sizes) and not kept. This is the unary scenario's path and it is as lean as tonic
//!   allows: no lock, no map, one allocation per string the Task carries, ids encoded without
//!   `fmt`; what is left is tonic's own work and building the Task.
//! - SendMessage `input` → an INPUT_REQUIRED Task kept in a map (a live, idle task is just the
//!   Task); a follow-up on it either runs `stream E MS [WAIT]` or completes it with an echo.
//! - SendMessage `stream E MS [WAIT]` → a WORKING Task now; WORKING, WAIT ms, E artifact chunks
//!   (`chunk 0`…) MS ms apart, COMPLETED.
//! - SendStreamingMessage `stream E MS [WAIT]` → the same task, its Task then its events on the
//!   call's stream (the `running` memory scenario: a task whose execution is in flight, with its
//!   stream open, producing an event now and then).
//! - `stamped E MS [WAIT]` (either call) → as `stream`, each chunk's event carrying when it was
//!   made ([`SENT_AT_KEY`]): the relay's per-event latency, from the upstream's making an event
//!   to the client's receipt, through our relay and directly.
//! - SendStreamingMessage anything else → the echo's COMPLETED Task, the stream's only item:
//!   what a relay in front of the baseline asks for a unary echo (it calls an upstream that
//!   streams by its streaming call).
//! - CancelTask → CANCELED, which ends the task's life and its stream; a sleeping execution
//!   notices when it wakes.
//! - SubscribeToTask → the Task snapshot, then the task's events. The snapshot and the start of
//!   the feed are taken under one lock, so nothing is missed or duplicated.
//!
//! The fan-out is the smallest broadcast that neither preallocates nor drops: a growable list of
//! `Arc`-shared events per task, created on the first subscription, and a `watch` channel that
//! wakes the subscribers, each of which copies out what is new in batches. (`tokio::sync::broadcast`
//! was the first choice, but it allocates its whole ring up front: at the 4,096 events of lag our
//! server tolerates, that is about 80 KiB per subscribed task, which made the baseline's
//! "idle task with a stream" 10× worse than ours; with a small ring a 2,000-event burst to 1,000
//! subscribers lags.) Events are cloned per subscriber for tonic's codec, as any plain tonic server
//! must; our server does the same today, so the fan-out ratio compares the machinery around the
//! encoder, not encode-once tricks.
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use a2a_server::proto::a2a_service_server::{A2aService, A2aServiceServer};
use a2a_server::proto::{
    AgentCard, Artifact, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest, GetTaskPushNotificationConfigRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse, ListTasksRequest,
    ListTasksResponse, Message, Part, Role, SendMessageRequest, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, Task, TaskArtifactUpdateEvent, TaskPushNotificationConfig, TaskState, TaskStatus,
    TaskStatusUpdateEvent, part, send_message_response, stream_response::Payload,
};
use futures::Stream;
use pbjson_types::value::Kind;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

use crate::BoxError;
use crate::driver::{is_terminal, task_state_of, texts};

/// Events a subscriber takes per lock.
const BATCH: usize = 64;

/// The metadata key of a `stamped` chunk's event: when the baseline made it, in nanoseconds since
/// the Unix epoch, as a decimal string (a JSON number would round it). The wall clock, as the
/// reader is another process on the same machine.
pub const SENT_AT_KEY: &str = "a2aBenchSentAt";

/// Serves the baseline on `listener` until the process ends, with the same HTTP/2 settings as
/// `a2a_server::server::serve`.
pub async fn serve(listener: TcpListener) -> Result<(), BoxError> {
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
        .max_concurrent_streams(Some(10_000))
        .add_service(A2aServiceServer::new(Baseline::default()))
        .serve_with_incoming(incoming)
        .await?;
    Ok(())
}

/// A live task: its current state and, once someone subscribed, its events.
struct Live {
    task: Task,
    events: Option<Arc<Events>>,
}

/// Every event of a task since its first subscription, and the count of them, watched.
struct Events {
    /// Read-locked by every subscriber, so they copy out in parallel.
    list: RwLock<Vec<Arc<StreamResponse>>>,
    len: watch::Sender<usize>,
}

impl Events {
    fn new() -> Self {
        Self { list: RwLock::new(Vec::new()), len: watch::channel(0).0 }
    }

    fn push(&self, event: StreamResponse) {
        let mut list = self.list.write().unwrap_or_else(|e| e.into_inner());
        list.push(Arc::new(event));
        self.len.send_replace(list.len());
    }

    /// Up to [`BATCH`] events from `from` on.
    fn read(&self, from: usize) -> Vec<Arc<StreamResponse>> {
        let list = self.list.read().unwrap_or_else(|e| e.into_inner());
        list.get(from..).unwrap_or_default().iter().take(BATCH).cloned().collect()
    }
}

/// A subscriber's position in a task's events.
struct Reader {
    events: Arc<Events>,
    next: usize,
    woken: watch::Receiver<usize>,
    pending: std::vec::IntoIter<Arc<StreamResponse>>,
    done: bool,
}

impl Reader {
    async fn next(&mut self) -> Option<StreamResponse> {
        loop {
            if let Some(event) = self.pending.next() {
                self.done = matches!(&event.payload, Some(Payload::StatusUpdate(u))
                    if is_terminal(task_state_of(u.status.as_ref().map(|s| s.state))));
                return Some(StreamResponse::clone(&event));
            }
            if self.done {
                return None;
            }
            self.woken.borrow_and_update();
            let batch = self.events.read(self.next);
            if batch.is_empty() {
                self.woken.changed().await.ok()?;
            }
            self.next += batch.len();
            self.pending = batch.into_iter();
        }
    }
}

#[derive(Default, Clone)]
struct Baseline {
    live: Arc<Mutex<HashMap<String, Live>>>,
}

type EventStream = Pin<Box<dyn Stream<Item = Result<StreamResponse, Status>> + Send>>;

/// Millisecond timestamps, like ours (the varint size of `nanos` depends on it).
fn now() -> pbjson_types::Timestamp {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    pbjson_types::Timestamp {
        seconds: since.as_secs() as i64,
        nanos: (since.subsec_millis() * 1_000_000) as i32,
    }
}

fn text_part(text: &str) -> Part {
    Part { content: Some(part::Content::Text(text.to_owned())), ..Default::default() }
}

fn status(state: TaskState, message: Option<Message>) -> TaskStatus {
    TaskStatus { state: state as i32, message, timestamp: Some(now()) }
}

/// A random UUID as a String, encoded without `fmt` (one allocation).
fn uuid() -> String {
    let mut buffer = uuid::Uuid::encode_buffer();
    String::from(&*uuid::Uuid::new_v4().hyphenated().encode_lower(&mut buffer))
}

/// The message's text parts joined by newlines, like the demo agent's; one allocation.
fn text_of(parts: &[Part]) -> String {
    let mut found = texts(parts);
    let first = found.next().unwrap_or_default();
    let mut text = first.to_owned();
    for more in found {
        text.push('\n');
        text.push_str(more);
    }
    text
}

/// What a message asks of the demo agent (the subset the benchmark uses), or of the baseline
/// alone (`stamped`).
enum Ask {
    Input,
    Stream { chunks: u64, delay_ms: u64, wait_ms: u64, stamped: bool },
    Echo,
}

fn parse(text: &str) -> Ask {
    let mut words = text.split_whitespace();
    match words.next() {
        Some("input") if words.next().is_none() => Ask::Input,
        Some(word @ ("stream" | "stamped")) => {
            let mut number = |default: u64| words.next().and_then(|w| w.parse().ok()).unwrap_or(default);
            let chunks = number(5);
            let delay_ms = number(500);
            Ask::Stream { chunks, delay_ms, wait_ms: number(0), stamped: word == "stamped" }
        }
        _ => Ask::Echo,
    }
}

fn task_response(task: Task) -> Response<SendMessageResponse> {
    Response::new(SendMessageResponse { payload: Some(send_message_response::Payload::Task(task)) })
}

/// Completes a new task with the echo of `text`.
fn echo(task: &mut Task, text: String) {
    task.status = Some(status(TaskState::Completed, None));
    // Ours reports the A2A dev-1.1 generation (created, artifact, completed): same bytes.
    task.generation = 3;
    task.artifacts.push(Artifact {
        artifact_id: "echo".into(),
        name: "echo".into(),
        parts: vec![Part { content: Some(part::Content::Text(text)), ..Default::default() }],
        ..Default::default()
    });
}

/// Now, as [`SENT_AT_KEY`] metadata.
fn sent_at() -> pbjson_types::Struct {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let value = pbjson_types::Value { kind: Some(Kind::StringValue(since.as_nanos().to_string())) };
    pbjson_types::Struct { fields: [(SENT_AT_KEY.to_owned(), value)].into_iter().collect() }
}

impl Baseline {
    /// Applies one event to the live task and broadcasts it, under the lock that subscribing
    /// takes too. A terminal event also ends the task's life here. False if the task is no
    /// longer live (canceled), so its execution stops.
    fn publish(&self, task_id: &str, payload: Payload) -> bool {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = live.get_mut(task_id) else { return false };
        let mut terminal = false;
        match &payload {
            Payload::StatusUpdate(update) => {
                entry.task.status = update.status.clone();
                terminal = is_terminal(task_state_of(update.status.as_ref().map(|s| s.state)));
            }
            Payload::ArtifactUpdate(update) => {
                if let Some(artifact) = &update.artifact {
                    match entry.task.artifacts.iter_mut().find(|a| a.artifact_id == artifact.artifact_id) {
                        Some(existing) if update.append => {
                            existing.parts.extend(artifact.parts.iter().cloned())
                        }
                        Some(existing) => *existing = artifact.clone(),
                        None => entry.task.artifacts.push(artifact.clone()),
                    }
                }
            }
            _ => {}
        }
        if let Some(events) = &entry.events {
            events.push(StreamResponse { payload: Some(payload) });
        }
        if terminal {
            live.remove(task_id);
        }
        true
    }

    fn status_event(&self, task: &Task, state: TaskState) -> Payload {
        Payload::StatusUpdate(TaskStatusUpdateEvent {
            task_id: task.id.clone(),
            context_id: task.context_id.clone(),
            status: Some(status(state, None)),
            metadata: None,
            generation: 0,
        })
    }

    /// The execution: WORKING, WAIT ms, the chunks DELAY ms apart (each stamped with when it was
    /// made, if asked), COMPLETED; it stops early if the task is canceled.
    fn start_stream(&self, task: &Task, chunks: u64, delay_ms: u64, wait_ms: u64, stamped: bool) {
        let this = self.clone();
        let task = Task { history: Vec::new(), artifacts: Vec::new(), ..task.clone() };
        tokio::spawn(async move {
            if !this.publish(&task.id, this.status_event(&task, TaskState::Working)) {
                return;
            }
            if wait_ms > 0 {
                tokio::time::sleep(Duration::from_millis(wait_ms)).await;
            }
            for i in 0..chunks {
                if i > 0 && delay_ms > 0 {
                    tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                }
                let artifact = Artifact {
                    artifact_id: "stream".into(),
                    name: "stream".into(),
                    parts: vec![text_part(&format!("chunk {i}"))],
                    ..Default::default()
                };
                let update = TaskArtifactUpdateEvent {
                    task_id: task.id.clone(),
                    context_id: task.context_id.clone(),
                    artifact: Some(artifact),
                    append: i > 0,
                    last_chunk: i + 1 == chunks,
                    metadata: stamped.then(sent_at),
                    generation: 0,
                };
                if !this.publish(&task.id, Payload::ArtifactUpdate(update)) {
                    return;
                }
            }
            this.publish(&task.id, this.status_event(&task, TaskState::Completed));
        });
    }

    fn follow_up(&self, mut message: Message, text: &str) -> Result<Response<SendMessageResponse>, Status> {
        let task = {
            let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
            let entry =
                live.get_mut(&message.task_id).ok_or_else(|| Status::not_found("no such live task"))?;
            message.context_id = entry.task.context_id.clone();
            entry.task.history.push(message);
            entry.task.clone()
        };
        match parse(text) {
            Ask::Stream { chunks, delay_ms, wait_ms, stamped } => {
                self.start_stream(&task, chunks, delay_ms, wait_ms, stamped)
            }
            Ask::Input | Ask::Echo => {
                let artifact = Artifact {
                    artifact_id: "echo".into(),
                    name: "echo".into(),
                    parts: vec![text_part(text)],
                    ..Default::default()
                };
                let update = TaskArtifactUpdateEvent {
                    task_id: task.id.clone(),
                    context_id: task.context_id.clone(),
                    artifact: Some(artifact),
                    last_chunk: true,
                    ..Default::default()
                };
                self.publish(&task.id, Payload::ArtifactUpdate(update));
                self.publish(&task.id, self.status_event(&task, TaskState::Completed));
            }
        }
        Ok(task_response(task))
    }

    /// A new task for `message` (given fresh ids), SUBMITTED.
    fn new_task(mut message: Message) -> Task {
        message.task_id = uuid();
        if message.context_id.is_empty() {
            message.context_id = uuid();
        }
        Task {
            id: message.task_id.clone(),
            context_id: message.context_id.clone(),
            status: Some(status(TaskState::Submitted, None)),
            history: vec![message],
            ..Default::default()
        }
    }
}

/// The call's stream: `first`, then what `reader` yields.
fn feed(first: StreamResponse, reader: Reader) -> EventStream {
    Box::pin(futures::stream::unfold((Some(first), reader), |(first, mut reader)| async move {
        if let Some(first) = first {
            return Some((Ok(first), (None, reader)));
        }
        reader.next().await.map(|event| (Ok(event), (None, reader)))
    }))
}

#[tonic::async_trait]
impl A2aService for Baseline {
    async fn send_message(
        &self,
        request: Request<SendMessageRequest>,
    ) -> Result<Response<SendMessageResponse>, Status> {
        let message =
            request.into_inner().message.ok_or_else(|| Status::invalid_argument("message is required"))?;
        let text = text_of(&message.parts);
        if !message.task_id.is_empty() {
            return self.follow_up(message, &text);
        }
        let ask = parse(&text);
        let mut task = Self::new_task(message);
        match ask {
            Ask::Echo => {
                echo(&mut task, text);
                Ok(task_response(task))
            }
            Ask::Input => {
                let question = Message {
                    message_id: uuid(),
                    context_id: task.context_id.clone(),
                    task_id: task.id.clone(),
                    role: Role::Agent as i32,
                    parts: vec![text_part("What should I echo back?")],
                    ..Default::default()
                };
                task.history.push(question.clone());
                task.status = Some(status(TaskState::InputRequired, Some(question)));
                let live = Live { task: task.clone(), events: None };
                self.live.lock().unwrap_or_else(|e| e.into_inner()).insert(task.id.clone(), live);
                Ok(task_response(task))
            }
            Ask::Stream { chunks, delay_ms, wait_ms, stamped } => {
                let live = Live { task: task.clone(), events: None };
                self.live.lock().unwrap_or_else(|e| e.into_inner()).insert(task.id.clone(), live);
                self.start_stream(&task, chunks, delay_ms, wait_ms, stamped);
                Ok(task_response(task))
            }
        }
    }

    type SendStreamingMessageStream = EventStream;

    async fn send_streaming_message(
        &self,
        request: Request<SendMessageRequest>,
    ) -> Result<Response<EventStream>, Status> {
        let message =
            request.into_inner().message.ok_or_else(|| Status::invalid_argument("message is required"))?;
        if !message.task_id.is_empty() {
            return Err(Status::unimplemented("the baseline streams new tasks only"));
        }
        let text = text_of(&message.parts);
        let ask = parse(&text);
        let mut task = Self::new_task(message);
        let Ask::Stream { chunks, delay_ms, wait_ms, stamped } = ask else {
            if matches!(ask, Ask::Input) {
                return Err(Status::unimplemented("the baseline does not stream `input`"));
            }
            echo(&mut task, text);
            let item = StreamResponse { payload: Some(Payload::Task(task)) };
            return Ok(Response::new(Box::pin(futures::stream::once(async move { Ok(item) }))));
        };
        // Subscribed from the start, so the stream misses nothing the execution publishes.
        let events = Arc::new(Events::new());
        let woken = events.len.subscribe();
        let reader =
            Reader { events: events.clone(), next: 0, woken, pending: Vec::new().into_iter(), done: false };
        let live = Live { task: task.clone(), events: Some(events) };
        self.live.lock().unwrap_or_else(|e| e.into_inner()).insert(task.id.clone(), live);
        self.start_stream(&task, chunks, delay_ms, wait_ms, stamped);
        Ok(Response::new(feed(StreamResponse { payload: Some(Payload::Task(task)) }, reader)))
    }

    async fn get_task(&self, request: Request<GetTaskRequest>) -> Result<Response<Task>, Status> {
        let live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        let entry = live.get(&request.get_ref().id).ok_or_else(|| Status::not_found("no such live task"))?;
        Ok(Response::new(entry.task.clone()))
    }

    async fn list_tasks(
        &self,
        _request: Request<ListTasksRequest>,
    ) -> Result<Response<ListTasksResponse>, Status> {
        Err(Status::unimplemented("not part of the baseline"))
    }

    async fn cancel_task(&self, request: Request<CancelTaskRequest>) -> Result<Response<Task>, Status> {
        let id = &request.get_ref().id;
        let task = {
            let live = self.live.lock().unwrap_or_else(|e| e.into_inner());
            live.get(id).ok_or_else(|| Status::not_found("no such live task"))?.task.clone()
        };
        self.publish(id, self.status_event(&task, TaskState::Canceled));
        Ok(Response::new(Task { status: Some(status(TaskState::Canceled, None)), ..task }))
    }

    type SubscribeToTaskStream = EventStream;

    async fn subscribe_to_task(
        &self,
        request: Request<SubscribeToTaskRequest>,
    ) -> Result<Response<EventStream>, Status> {
        let (snapshot, reader) = {
            let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
            let entry =
                live.get_mut(&request.get_ref().id).ok_or_else(|| Status::not_found("no such live task"))?;
            let events = entry.events.get_or_insert_with(|| Arc::new(Events::new())).clone();
            let next = *events.len.borrow();
            let woken = events.len.subscribe();
            let reader = Reader { events, next, woken, pending: Vec::new().into_iter(), done: false };
            (entry.task.clone(), reader)
        };
        Ok(Response::new(feed(StreamResponse { payload: Some(Payload::Task(snapshot)) }, reader)))
    }

    async fn create_task_push_notification_config(
        &self,
        _request: Request<TaskPushNotificationConfig>,
    ) -> Result<Response<TaskPushNotificationConfig>, Status> {
        Err(Status::unimplemented("not part of the baseline"))
    }

    async fn get_task_push_notification_config(
        &self,
        _request: Request<GetTaskPushNotificationConfigRequest>,
    ) -> Result<Response<TaskPushNotificationConfig>, Status> {
        Err(Status::unimplemented("not part of the baseline"))
    }

    async fn list_task_push_notification_configs(
        &self,
        _request: Request<ListTaskPushNotificationConfigsRequest>,
    ) -> Result<Response<ListTaskPushNotificationConfigsResponse>, Status> {
        Err(Status::unimplemented("not part of the baseline"))
    }

    async fn get_extended_agent_card(
        &self,
        _request: Request<GetExtendedAgentCardRequest>,
    ) -> Result<Response<AgentCard>, Status> {
        Err(Status::unimplemented("not part of the baseline"))
    }

    async fn delete_task_push_notification_config(
        &self,
        _request: Request<DeleteTaskPushNotificationConfigRequest>,
    ) -> Result<Response<pbjson_types::Empty>, Status> {
        Err(Status::unimplemented("not part of the baseline"))
    }
}
