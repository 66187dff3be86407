//! The clients a fault runs under, all through nginx: blocking SendMessage callers that retry
//! with the same `messageId` until they get an answer, and streaming clients (gRPC and SSE)
//! that start `stream N MS` tasks, each followed by a second subscriber, and resume after every
//! break with the last generation they saw. Everything they are told goes to the [`Ledger`].
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use a2a_server::proto::a2a_service_client::A2aServiceClient;
use a2a_server::proto::{SendMessageConfiguration, SendMessageRequest, send_message_response};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tonic::transport::Channel;

use super::ledger::{Item, Ledger};
use super::wire::{Failure, Next, Open, Wire, message};

/// How long a client keeps retrying one call (or resuming one stream) before it gives up.
const GIVE_UP: Duration = Duration::from_secs(45);

/// How long a client follows one task at most: the suite's tasks run for seconds, so a task
/// still running after this is stuck (no owner, nobody ending it).
const FOLLOW_LIMIT: Duration = Duration::from_secs(60);

/// The pause between retries.
const BACKOFF: Duration = Duration::from_millis(200);

/// The `stream` task every streaming client starts: 30 chunks 100 ms apart (about 3 s).
pub const CHUNKS: u64 = 30;
const DELAY_MS: u64 = 100;

/// What the clients share.
pub struct Clients {
    pub ledger: Arc<Ledger>,
    grpc_url: String,
    http_url: String,
    stop: AtomicBool,
}

impl Clients {
    pub fn new(ledger: Arc<Ledger>, grpc_url: String, http_url: String) -> Arc<Self> {
        Arc::new(Self { ledger, grpc_url, http_url, stop: AtomicBool::new(false) })
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Starts `senders` blocking callers and `streamers` streaming clients (alternately gRPC
    /// and SSE).
    pub fn start(self: &Arc<Self>, senders: usize, streamers: usize) -> Vec<JoinHandle<()>> {
        let mut handles = Vec::new();
        for n in 0..senders {
            handles.push(tokio::spawn(sender(self.clone(), n)));
        }
        for n in 0..streamers {
            handles.push(tokio::spawn(streamer(self.clone(), n, n % 2 == 1)));
        }
        handles
    }

    /// Tells every client to stop after what it is doing, and waits (bounded) for them.
    pub async fn stop(&self, handles: Vec<JoinHandle<()>>) {
        self.stop.store(true, Ordering::Relaxed);
        for handle in handles {
            match tokio::time::timeout(FOLLOW_LIMIT + GIVE_UP, handle).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => self.ledger.failed("client", format!("a client panicked: {error}")),
                Err(_) => self.ledger.failed("client", "a client did not finish in time".to_owned()),
            }
        }
    }
}

/// Blocking SendMessage in a loop: an echo (done at once), a short `stream 3 50` (done in
/// 150 ms), and a `stream 20 100` answered at once (returnImmediately), which then runs for 2 s.
async fn sender(clients: Arc<Clients>, n: usize) {
    let who = format!("sender{n}");
    let Wire::Grpc(mut client) = Wire::grpc(&clients.grpc_url) else { unreachable!() };
    let mut k = 0u64;
    while !clients.stopped() {
        k += 1;
        let (text, immediately, chunks) = match k % 3 {
            0 => (format!("hello {n}-{k}"), false, None),
            1 => ("stream 3 50".to_owned(), false, Some(3)),
            _ => ("stream 20 100".to_owned(), true, Some(20)),
        };
        let request = SendMessageRequest {
            message: Some(message(&text, &uuid::Uuid::new_v4().to_string())),
            configuration: Some(SendMessageConfiguration {
                return_immediately: immediately,
                ..Default::default()
            }),
            ..Default::default()
        };
        if let Some(task) = send(&clients, &who, &mut client, request).await {
            clients.ledger.answered(&task);
            if let Some(chunks) = chunks {
                clients.ledger.expect_chunks(&task.id, chunks);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One SendMessage, retried with the same request (so the same `messageId`) until answered.
async fn send(
    clients: &Clients,
    who: &str,
    client: &mut A2aServiceClient<Channel>,
    request: SendMessageRequest,
) -> Option<a2a_server::proto::Task> {
    let deadline = Instant::now() + GIVE_UP;
    // A task an UNAVAILABLE answer named: the call created it, so a retry (the same
    // messageId) must be answered with it, not with a second task.
    let mut named: Option<String> = None;
    loop {
        match tokio::time::timeout(Duration::from_secs(20), client.send_message(request.clone())).await {
            Ok(Ok(answer)) => match answer.into_inner().payload {
                Some(send_message_response::Payload::Task(task)) => {
                    if let Some(first) = named.filter(|first| *first != task.id) {
                        let text = format!(
                            "a retry was answered with task {}, an earlier try named task {first}",
                            task.id
                        );
                        clients.ledger.gap(who, text);
                    }
                    return Some(task);
                }
                other => {
                    clients.ledger.failed(who, format!("SendMessage answered {other:?}"));
                    return None;
                }
            },
            Ok(Err(status)) => {
                named = named.or_else(|| task_named(status.message()));
                let failure = Failure::from_status(&status);
                clients.ledger.error(who, "SendMessage", failure.reason.as_deref(), &failure.text);
            }
            Err(_) => clients.ledger.failed(who, "SendMessage: no answer within 20 s".to_owned()),
        }
        if Instant::now() > deadline {
            clients.ledger.failed(who, format!("SendMessage: no answer after retrying for {GIVE_UP:?}"));
            return None;
        }
        tokio::time::sleep(BACKOFF).await;
    }
}

/// The task id an error message names ("… task <uuid>'s writes …"), if any.
fn task_named(message: &str) -> Option<String> {
    let at = message.find("task ")? + "task ".len();
    let id: String = message[at..].chars().take_while(|c| c.is_ascii_hexdigit() || *c == '-').collect();
    (id.len() == 36).then_some(id)
}

/// Starts a streaming task, follows it to its end with a second subscriber beside it; again.
async fn streamer(clients: Arc<Clients>, n: usize, sse: bool) {
    let wire = || if sse { Wire::sse(&clients.http_url) } else { Wire::grpc(&clients.grpc_url) };
    let mut own = wire();
    let who = format!("{}-stream{n}", own.name());
    let text = format!("stream {CHUNKS} {DELAY_MS}");
    while !clients.stopped() {
        let Some((mut open, first)) = start(&clients, &who, &mut own, &text).await else { continue };
        clients.ledger.acknowledged(&first);
        clients.ledger.expect_chunks(&first.task_id, CHUNKS);
        clients.ledger.saw(&who, &first);
        let task_id = first.task_id.clone();
        if first.terminal() {
            // A retry whose first try ran while the store was away: the task finished
            // meanwhile, and the retried stream answers with the final Task, then ends.
            if !matches!(open.next().await, Next::End) {
                clients
                    .ledger
                    .failed(&who, format!("task {task_id}: the stream did not end after the final Task"));
            }
            continue;
        }
        let follower = {
            let (clients, mut other, task_id) = (clients.clone(), wire(), task_id.clone());
            let who = format!("{}-follow{n}", other.name());
            tokio::spawn(async move { follow(&clients.ledger, &who, &mut other, &task_id, None, None).await })
        };
        follow(&clients.ledger, &who, &mut own, &task_id, Some(open), Some(first.generation)).await;
        let _ = follower.await;
    }
}

/// SendStreamingMessage, retried with the same `messageId` until the stream's first item.
async fn start(clients: &Clients, who: &str, wire: &mut Wire, text: &str) -> Option<(Open, Item)> {
    let message_id = uuid::Uuid::new_v4().to_string();
    let deadline = Instant::now() + GIVE_UP;
    loop {
        let failure = match wire.start(text, &message_id).await {
            Ok(mut open) => match open.next().await {
                Next::Item(item) => return Some((open, item)),
                Next::End => Failure::bare("the stream ended before its first item"),
                Next::Error(failure) => failure,
            },
            Err(failure) => failure,
        };
        clients.ledger.error(who, "SendStreamingMessage", failure.reason.as_deref(), &failure.text);
        if Instant::now() > deadline || clients.stopped() {
            clients.ledger.failed(who, "SendStreamingMessage: no stream after retrying".to_owned());
            return None;
        }
        tokio::time::sleep(BACKOFF).await;
    }
}

/// Reads a task's stream to its terminal event, resubscribing after every break with the last
/// generation seen, and checks each item against the one before: exactly one generation later,
/// and a resume never starts with a Task. Without `open` it subscribes first (a plain
/// subscription, snapshot first, unless `last` is given). Returns when the terminal event came.
pub async fn follow(
    ledger: &Ledger,
    who: &str,
    wire: &mut Wire,
    task_id: &str,
    mut open: Option<Open>,
    mut last: Option<i64>,
) -> Option<Instant> {
    // Whether the stream's next item is its first, and whether that stream is a resume.
    let (mut fresh, mut resumed) = (open.is_none(), false);
    let mut broke_at: Option<Instant> = None;
    let limit = Instant::now() + FOLLOW_LIMIT;
    loop {
        if Instant::now() > limit {
            ledger.failed(
                who,
                format!("task {task_id}: no terminal event after following it for {FOLLOW_LIMIT:?}"),
            );
            return None;
        }
        if let Some(stream) = open.as_mut() {
            match stream.next().await {
                Next::Item(item) => {
                    if let Some(at) = broke_at.take() {
                        ledger.reconnected(at.elapsed());
                    }
                    check(ledger, who, task_id, &item, last, fresh, resumed);
                    ledger.saw(who, &item);
                    fresh = false;
                    last = Some(last.map_or(item.generation, |l| l.max(item.generation)));
                    if item.terminal() {
                        let arrived = Instant::now();
                        if !matches!(stream.next().await, Next::End) {
                            ledger.failed(
                                who,
                                format!("task {task_id}: the stream did not end after the terminal event"),
                            );
                        }
                        return Some(arrived);
                    }
                    continue;
                }
                Next::End => {
                    ledger.failed(who, format!("task {task_id}: the stream ended before the terminal event"))
                }
                Next::Error(failure) => {
                    let what = format!("task {task_id} stream");
                    ledger.error(who, &what, failure.reason.as_deref(), &failure.text);
                    // The resumable close names the last generation the stream sent.
                    if let Some(closed_at) = failure.last_generation
                        && Some(closed_at) != last
                    {
                        let text = format!(
                            "task {task_id}: closed at generation {closed_at}, the client's last is {last:?}"
                        );
                        ledger.gap(who, text);
                    }
                }
            }
            drop(open.take());
            broke_at.get_or_insert_with(Instant::now);
        }
        // (Re)subscribe.
        let deadline = Instant::now() + GIVE_UP;
        loop {
            ledger.note(who, &format!("{task_id} subscribe after {last:?}"));
            match wire.subscribe(task_id, last).await {
                Ok(stream) => {
                    (open, fresh, resumed) = (Some(stream), true, last.is_some());
                    break;
                }
                Err(failure) => {
                    let reason = failure.reason.as_deref();
                    if reason == Some("INVALID_PARAMS") && last.is_some() {
                        ledger.refused_cursor(who, task_id, last.unwrap(), &failure.text);
                        // Nothing after an invalid cursor: follow it afresh, as a client must.
                        last = None;
                    } else if reason == Some("UNSUPPORTED_OPERATION") && last.is_none() {
                        // A plain subscription to a task that finished meanwhile.
                        return None;
                    } else {
                        ledger.error(who, &format!("task {task_id} subscribe"), reason, &failure.text);
                    }
                }
            }
            if Instant::now() > deadline {
                ledger.failed(who, format!("task {task_id}: no stream after resubscribing for {GIVE_UP:?}"));
                return None;
            }
            tokio::time::sleep(BACKOFF).await;
        }
    }
}

/// One item against the one before it on this client.
fn check(
    ledger: &Ledger,
    who: &str,
    task_id: &str,
    item: &Item,
    last: Option<i64>,
    fresh: bool,
    resumed: bool,
) {
    if item.task_id != task_id {
        ledger.failed(who, format!("task {task_id}: an item of task {}", item.task_id));
        return;
    }
    let Some(last) = last else { return };
    if fresh && !resumed {
        return;
    }
    if fresh && item.snapshot {
        // A task that ended meanwhile resumes to its final Task (resume.md §4.4): the client
        // learns how it ended. Only a Task of a running task is a snapshot resume.
        if item.terminal() {
            ledger.final_task_resume(who, task_id, last, item.generation);
        } else {
            ledger.snapshot_resume(who, task_id, last, item.generation);
        }
        if item.generation < last {
            ledger.gap(
                who,
                format!("task {task_id}: a resume after {last} began with a Task at {}", item.generation),
            );
        }
        return;
    }
    if item.snapshot {
        ledger.gap(who, format!("task {task_id}: a Task in the middle of a stream after {last}"));
    } else if item.generation <= last {
        ledger.gap(
            who,
            format!("task {task_id}: generation {} again after {last} (duplicate)", item.generation),
        );
    } else if item.generation != last + 1 {
        ledger.gap(who, format!("task {task_id}: generation {} after {last} (gap)", item.generation));
    }
}
