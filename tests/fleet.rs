//! A fleet (DESIGN §5): three real `a2a-server` processes on one real `redis-server` serve any
//! call for any task with the exactness of one process. Streams are compared as the encoded
//! `StreamResponse` bytes each replica sent, nothing normalised: the subscribers of one task get
//! the same item sequence on every replica, snapshot first. Cross-replica commands (cancel,
//! follow-up, blocking send) reach the owner; a killed owner's task fails on the survivors; a
//! SIGTERM'd owner's streams can be resumed elsewhere with no gap and no duplicate; a hibernated
//! task revived by racing replicas ends with one owner; a Redis outage is visible and heals.
//!
//! Without `redis-server` these tests skip loudly, except under `CI=true`, where they fail.
mod common;

use std::time::{Duration, Instant};

use a2a_server::proto::a2a_service_client::A2aServiceClient;
use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{
    CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, GetTaskPushNotificationConfigRequest,
    GetTaskRequest, ListTaskPushNotificationConfigsRequest, ListTasksRequest, ListTasksResponse,
    SendMessageConfiguration, SendMessageRequest, StreamResponse, Task, TaskPushNotificationConfig,
    TaskState,
};
use bytes::Bytes;
use common::fleet::{Fleet, collect_raw, decode, eventually, next_raw, subscribe_raw, within};
use common::process::run_to_exit;
use common::redis::{RedisCluster, RedisServer};
use common::*;
use prost::Message as _;
use tonic::Code;
use tonic::transport::Channel;
use tonic_health::pb::health_check_response::ServingStatus;

const A: usize = 0;
const B: usize = 1;
const C: usize = 2;
const ALL: [usize; 3] = [A, B, C];

/// How long after its lease runs out a dead owner's task may take to fail on the survivors.
const DEATH_SLACK: Duration = Duration::from_secs(5);

/// How long a replica may take to notice that Redis is gone.
const OUTAGE_NOTICE: Duration = Duration::from_secs(10);

fn chunks(range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("chunk {i}")).collect()
}

/// The Task of a stream item that must be one.
fn task_of(item: &StreamResponse) -> &Task {
    match &item.payload {
        Some(Payload::Task(task)) => task,
        other => panic!("expected a Task snapshot, got {other:?}"),
    }
}

/// The chunk texts a decoded sequence carries: the snapshot's artifacts, then every update's.
fn joined_chunks(items: &[StreamResponse]) -> Vec<String> {
    let mut all = artifact_texts(task_of(&items[0]));
    all.extend(items[1..].iter().flat_map(chunk_texts));
    all
}

/// The text of a status update's message.
fn status_text(item: &StreamResponse) -> String {
    match &item.payload {
        Some(Payload::StatusUpdate(update)) => {
            texts(&update.status.as_ref().and_then(|s| s.message.as_ref()).expect("a status message").parts)
                .join(" ")
        }
        other => panic!("expected a status update, got {other:?}"),
    }
}

/// A follow-up answered at once with the task, whatever the agent then does.
fn follow_up_returning_immediately(task: &Task, text: &str) -> SendMessageRequest {
    SendMessageRequest {
        configuration: Some(SendMessageConfiguration { return_immediately: true, ..Default::default() }),
        ..follow_up(task, text)
    }
}

async fn get_task(client: &mut A2aServiceClient<Channel>, id: &str) -> Result<Task, tonic::Status> {
    let request = GetTaskRequest { id: id.to_owned(), ..Default::default() };
    within("GetTask", client.get_task(request)).await.map(|r| r.into_inner())
}

/// GetTask of `id` on every replica: the same Task, byte for byte; that Task.
async fn same_task_everywhere(fleet: &Fleet, id: &str) -> Task {
    let mut answers = Vec::new();
    for r in ALL {
        let task = get_task(&mut fleet[r].client().await, id)
            .await
            .unwrap_or_else(|e| panic!("GetTask on {r}: {e:?}"));
        answers.push(task.encode_to_vec());
    }
    assert!(answers.iter().all(|a| a == &answers[0]), "GetTask differs between replicas");
    Task::decode(answers[0].as_slice()).unwrap()
}

/// Every item of `stream` to its end (which must be OK), after `first`.
async fn rest_ok(first: Bytes, stream: &mut tonic::Streaming<Bytes>, who: &str) -> Vec<Bytes> {
    let (rest, end) = collect_raw(stream).await;
    end.unwrap_or_else(|e| panic!("{who}: the stream must end with OK after the terminal event, got {e:?}"));
    let mut all = vec![first];
    all.extend(rest);
    all
}

/// Subscribers on A, B and C (two each) of a task owned by A receive byte-identical sequences:
/// the same snapshot, the same events, the same end.
async fn identical_sequences_on_every_replica(store: &str) {
    let fleet = Fleet::start(3, store, &[]);
    let mut a = fleet[A].client().await;
    let task = send_task(&mut a, send("input")).await;
    assert_eq!(state(&task), TaskState::InputRequired);

    let mut subscribers = Vec::new();
    for r in ALL {
        for _ in 0..2 {
            let mut stream = subscribe_raw(fleet[r].channel().await, &task.id).await.expect("subscribe");
            let snapshot = next_raw(&mut stream).await.expect("a snapshot").expect("a snapshot");
            subscribers.push((r, snapshot, stream));
        }
    }
    let first = decode(&subscribers[0].1);
    assert_eq!(task_of(&first).id, task.id);
    assert_eq!(state(task_of(&first)), TaskState::InputRequired);

    // The burst starts only once every subscriber holds its snapshot.
    let done = within("the follow-up", a.send_message(follow_up(&task, "stream 20 20"))).await;
    assert!(done.is_ok(), "{done:?}");

    let mut sequences = Vec::new();
    for (r, snapshot, mut stream) in subscribers {
        sequences.push((r, rest_ok(snapshot, &mut stream, &format!("subscriber on replica {r}")).await));
    }
    let reference: Vec<StreamResponse> = sequences[0].1.iter().map(decode).collect();
    assert_eq!(joined_chunks(&reference), chunks(0..20));
    assert_eq!(item_state(reference.last().unwrap()), Some(TaskState::Completed));
    for (i, (r, sequence)) in sequences.iter().enumerate() {
        assert_eq!(sequence.len(), sequences[0].1.len(), "subscriber {i} on replica {r}: item count");
        for (k, (got, want)) in sequence.iter().zip(&sequences[0].1).enumerate() {
            assert!(
                got == want,
                "subscriber {i} on replica {r}, item {k}: {:?}\nA's first subscriber got: {:?}",
                decode(got),
                decode(want)
            );
        }
    }
    let stored = same_task_everywhere(&fleet, &task.id).await;
    assert_eq!(state(&stored), TaskState::Completed);
    assert_eq!(artifact_texts(&stored), chunks(0..20));
}

#[tokio::test]
async fn subscribers_on_every_replica_receive_byte_identical_sequences() {
    let Some(redis) = RedisServer::start() else { return };
    identical_sequences_on_every_replica(&redis.url()).await;
}

#[tokio::test]
async fn on_a_redis_cluster_too_subscribers_on_every_replica_receive_byte_identical_sequences() {
    let Some(cluster) = RedisCluster::start() else { return };
    identical_sequences_on_every_replica(&cluster.url()).await;
}

#[tokio::test]
async fn a_late_subscriber_on_another_replica_gets_everything_so_far_then_exactly_the_rest() {
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(3, &redis.url(), &[]);
    let mut a = fleet[A].client().await;
    let task = send_task(&mut a, send("input")).await;
    let mut on_a = subscribe_raw(fleet[A].channel().await, &task.id).await.expect("subscribe on A");
    let mut a_items = vec![next_raw(&mut on_a).await.unwrap().expect("A's snapshot")];
    within("the follow-up", a.send_message(follow_up_returning_immediately(&task, "stream 30 50")))
        .await
        .unwrap();

    // Three chunks in, C joins.
    while a_items.iter().map(decode).flat_map(|i| chunk_texts(&i)).count() < 3 {
        a_items.push(next_raw(&mut on_a).await.unwrap().expect("A's stream goes on"));
    }
    let mut on_c = subscribe_raw(fleet[C].channel().await, &task.id).await.expect("subscribe on C");
    let c_snapshot = next_raw(&mut on_c).await.unwrap().expect("C's snapshot");
    // The owner keeps the stored Task behind while only chunks come (C's snapshot replayed
    // the rest): the last whole write was the one with WORKING and the first chunk.
    let mut redis_conn =
        ::redis::Client::open(redis.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let (stored, lag, seq): (Vec<u8>, Option<String>, u64) = ::redis::cmd("HMGET")
        .arg(format!("{}:{{{}}}:task", fleet.prefix, task.id))
        .arg(&["task", "lag", "seq"])
        .query_async(&mut redis_conn)
        .await
        .unwrap();
    let behind = Task::decode(&stored[..]).unwrap().generation as u64;
    assert!(lag.is_some() && behind < seq, "the stored Task lags its stream: at {behind}, seq {seq}");
    let c_items = rest_ok(c_snapshot, &mut on_c, "C").await;
    let a_items = {
        let first = a_items.remove(0);
        let mut all = rest_ok(first, &mut on_a, "A").await;
        all.splice(1..1, a_items);
        all
    };

    let c_decoded: Vec<StreamResponse> = c_items.iter().map(decode).collect();
    let snapshot = task_of(&c_decoded[0]);
    assert_eq!(state(snapshot), TaskState::Working);
    let so_far = artifact_texts(snapshot);
    assert!(so_far.len() >= 3 && so_far.len() < 30, "C's snapshot holds chunk 0..k, 3 <= k < 30: {so_far:?}");
    assert_eq!(so_far, chunks(0..so_far.len()), "everything so far, in order");
    assert_eq!(joined_chunks(&c_decoded), chunks(0..30), "then exactly the rest");
    assert_eq!(item_state(c_decoded.last().unwrap()), Some(TaskState::Completed));
    // What C got after its snapshot is, byte for byte, the tail of what A's subscriber got.
    let tail = &c_items[1..];
    assert!(tail.len() < a_items.len());
    assert!(a_items[a_items.len() - tail.len()..] == *tail, "C's events are not the tail of A's");
}

#[tokio::test]
async fn cancel_via_another_replica_reaches_the_owner() {
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(3, &redis.url(), &[]);
    let mut a = fleet[A].client().await;
    let task = send_task(&mut a, send_returning_immediately("stream 100 200")).await;
    let mut watchers = Vec::new();
    for r in [A, B] {
        let mut stream = subscribe_raw(fleet[r].channel().await, &task.id).await.expect("subscribe");
        let snapshot = next_raw(&mut stream).await.unwrap().expect("a snapshot");
        watchers.push((r, snapshot, stream));
    }

    let mut c = fleet[C].client().await;
    let request = CancelTaskRequest { id: task.id.clone(), ..Default::default() };
    let canceled = within("CancelTask on C", c.cancel_task(request.clone())).await.expect("cancel via C");
    let canceled = canceled.into_inner();
    assert_eq!(canceled.id, task.id);
    assert_eq!(state(&canceled), TaskState::Canceled, "the owner's answer");

    for (r, snapshot, mut stream) in watchers {
        let items = rest_ok(snapshot, &mut stream, &format!("watcher on {r}")).await;
        let last = decode(items.last().unwrap());
        assert_eq!(item_state(&last), Some(TaskState::Canceled), "watcher on {r}");
    }
    assert_eq!(state(&same_task_everywhere(&fleet, &task.id).await), TaskState::Canceled);
    let again = within("CancelTask on B", fleet[B].client().await.cancel_task(request)).await.unwrap_err();
    assert_a2a_error(&again, Code::FailedPrecondition, "TASK_NOT_CANCELABLE");
    assert_eq!(fleet[C].metric("a2a_fleet_forwarded_total").await, 1.0, "C forwarded one command");
}

#[tokio::test]
async fn a_follow_up_via_another_replica_answers_the_owners_input_request() {
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(3, &redis.url(), &[]);
    let mut a = fleet[A].client().await;
    let task = send_task(&mut a, send("input")).await;
    assert_eq!(state(&task), TaskState::InputRequired);

    let mut b = fleet[B].client().await;
    let done = send_task(&mut b, follow_up(&task, "green")).await;
    assert_eq!(done.id, task.id);
    assert_eq!(state(&done), TaskState::Completed);
    assert_eq!(artifact_texts(&done), ["green"]);
    assert_eq!(done.history.len(), task.history.len() + 1, "the follow-up joined the history");
    let stored = same_task_everywhere(&fleet, &task.id).await;
    assert_eq!(stored.encode_to_vec(), done.encode_to_vec(), "B answered with the owner's task");
    assert_eq!(fleet[B].metric("a2a_fleet_forwarded_total").await, 1.0, "B forwarded one command");
}

#[tokio::test]
async fn a_blocking_send_on_another_replica_waits_for_the_owners_outcome() {
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(3, &redis.url(), &[]);
    let mut a = fleet[A].client().await;
    let mut b = fleet[B].client().await;

    // Blocking SendMessage: answered when the owner's run ends, with its final task.
    let task = send_task(&mut a, send("input")).await;
    let started = Instant::now();
    let done = within("blocking SendMessage on B", async {
        send_task(&mut b, follow_up(&task, "stream 10 100")).await
    })
    .await;
    assert!(started.elapsed() >= Duration::from_millis(900), "answered before the run ended");
    assert_eq!(done.id, task.id);
    assert_eq!(state(&done), TaskState::Completed);
    assert_eq!(artifact_texts(&done), chunks(0..10));

    // SendStreamingMessage: the task first, then every event, then the end.
    let task = send_task(&mut a, send("input")).await;
    let stream =
        within("SendStreamingMessage on B", b.send_streaming_message(follow_up(&task, "stream 5 50")))
            .await
            .expect("streaming follow-up via B")
            .into_inner();
    let items = collect(stream).await.expect("ends with OK");
    assert_eq!(task_of(&items[0]).id, task.id);
    assert_eq!(joined_chunks(&items), chunks(0..5));
    assert_eq!(item_state(items.last().unwrap()), Some(TaskState::Completed));
    assert_eq!(state(&same_task_everywhere(&fleet, &task.id).await), TaskState::Completed);
}

#[tokio::test]
async fn kill_9_of_the_owner_fails_its_task_on_every_survivor_within_the_lease() {
    let Some(redis) = RedisServer::start() else { return };
    let lease = Duration::from_millis(1000);
    let mut fleet = Fleet::start(3, &redis.url(), &["--lease-ms", "1000"]);
    let mut a = fleet[A].client().await;
    let task = send_task(&mut a, send_returning_immediately("stream 1000 100")).await;
    let mut watchers = Vec::new();
    for r in [B, C] {
        let mut stream = subscribe_raw(fleet[r].channel().await, &task.id).await.expect("subscribe");
        let mut items = vec![next_raw(&mut stream).await.unwrap().expect("a snapshot")];
        // Live: at least one chunk arrived through this replica after its snapshot.
        while items[1..].iter().map(decode).flat_map(|i| chunk_texts(&i)).count() == 0 {
            items.push(next_raw(&mut stream).await.unwrap().expect("the stream goes on"));
        }
        watchers.push((r, items, stream));
    }

    fleet[A].kill9();
    let killed = Instant::now();
    let mut ends = Vec::new();
    for (r, mut items, mut stream) in watchers {
        let (rest, end) = collect_raw(&mut stream).await;
        end.unwrap_or_else(|e| panic!("replica {r}: the stream must end OK after FAILED, got {e:?}"));
        let waited = killed.elapsed();
        assert!(waited <= lease + DEATH_SLACK, "replica {r}: FAILED came {waited:?} after the kill");
        items.extend(rest);
        let decoded: Vec<StreamResponse> = items.iter().map(decode).collect();
        let terminal: Vec<_> = decoded.iter().filter(|i| is_terminal(i)).collect();
        assert_eq!(terminal.len(), 1, "replica {r}: one terminal event");
        let last = decoded.last().unwrap();
        assert_eq!(item_state(last), Some(TaskState::Failed), "replica {r}");
        let text = status_text(last).to_lowercase();
        assert!(text.contains("replica") && text.contains("lost"), "replica {r}: status message {text:?}");
        let seen = joined_chunks(&decoded);
        assert_eq!(seen, chunks(0..seen.len()), "replica {r}: no gap before the failure");
        ends.push(items.last().unwrap().clone());
    }
    assert_eq!(ends[0], ends[1], "B and C received the same terminal event");

    let mut b = fleet[B].client().await;
    let failed = get_task(&mut b, &task.id).await.expect("GetTask on a survivor");
    assert_eq!(state(&failed), TaskState::Failed);
    let mut c = fleet[C].client().await;
    assert_eq!(get_task(&mut c, &task.id).await.unwrap().encode_to_vec(), failed.encode_to_vec());
}

fn is_terminal(item: &StreamResponse) -> bool {
    matches!(
        item_state(item),
        Some(TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected)
    ) && matches!(item.payload, Some(Payload::StatusUpdate(_)))
}

#[tokio::test]
async fn sigterm_of_the_owner_ends_its_streams_with_unavailable_and_a_resubscribe_elsewhere_misses_nothing() {
    let Some(redis) = RedisServer::start() else { return };
    let mut fleet = Fleet::start(3, &redis.url(), &["--drain-timeout-secs", "20"]);
    let mut a = fleet[A].client().await;
    let task = send_task(&mut a, send_returning_immediately("stream 30 100")).await;
    let mut on_a = subscribe_raw(fleet[A].channel().await, &task.id).await.expect("subscribe on A");
    let mut before = vec![next_raw(&mut on_a).await.unwrap().expect("A's snapshot")];
    while joined_chunks(&before.iter().map(decode).collect::<Vec<_>>()).len() < 3 {
        before.push(next_raw(&mut on_a).await.unwrap().expect("A's stream goes on"));
    }

    fleet[A].terminate();
    let cut = loop {
        match next_raw(&mut on_a).await {
            Ok(Some(item)) => before.push(item),
            Ok(None) => panic!("A's stream ended OK on SIGTERM; expected UNAVAILABLE"),
            Err(status) => break status,
        }
    };
    assert_eq!(cut.code(), Code::Unavailable, "{cut:?}");
    let seen = joined_chunks(&before.iter().map(decode).collect::<Vec<_>>());
    assert_eq!(seen, chunks(0..seen.len()), "what A delivered is a prefix");

    // The client resubscribes through the load balancer and lands on B.
    let mut on_b = subscribe_raw(fleet[B].channel().await, &task.id).await.expect("resubscribe on B");
    let snapshot = next_raw(&mut on_b).await.unwrap().expect("B's snapshot");
    let after: Vec<StreamResponse> = rest_ok(snapshot, &mut on_b, "B").await.iter().map(decode).collect();
    let covered = artifact_texts(task_of(&after[0]));
    assert!(covered.len() >= seen.len(), "B's snapshot ({covered:?}) covers what A delivered ({seen:?})");
    assert_eq!(covered[..seen.len()], seen[..], "no gap: the snapshot extends what A delivered");
    assert_eq!(joined_chunks(&after), chunks(0..30), "no gap and no duplicate after the snapshot");
    assert_eq!(item_state(after.last().unwrap()), Some(TaskState::Completed));
    assert_eq!(fleet[A].exit_code().await, 0, "A finished its running task within the drain");
    let mut c = fleet[C].client().await;
    assert_eq!(artifact_texts(&get_task(&mut c, &task.id).await.unwrap()), chunks(0..30));
}

/// What one of the racing calls came back with.
enum Raced {
    Subscribed(usize, Bytes, tonic::Streaming<Bytes>),
    Sent(Task),
}

#[tokio::test]
async fn a_hibernated_task_revived_by_racing_replicas_ends_with_exactly_one_owner() {
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(3, &redis.url(), &["--task-idle-secs", "1"]);
    let mut a = fleet[A].client().await;
    let task = send_task(&mut a, send("input")).await;
    eventually("A hibernates the task and gives up its lease", PATIENCE, || async {
        fleet[A].metric("a2a_tasks_hibernated_total").await >= 1.0
            && fleet.metric_sum("a2a_fleet_leases_held", &ALL).await == 0.0
    })
    .await;

    // Eight calls at once over A, B and C: seven subscriptions and one follow-up that waits
    // three seconds before streaming, so every subscription lands on a live, unfinished task.
    let mut channels = Vec::new();
    for i in 0..8 {
        channels.push((i % 3, fleet[i % 3].channel().await));
    }
    let calls = channels.into_iter().enumerate().map(|(i, (r, channel))| {
        let task = task.clone();
        tokio::spawn(async move {
            if i == 5 {
                let mut client = A2aServiceClient::new(channel);
                let answer = client.send_message(follow_up(&task, "stream 5 100 3000")).await;
                let Some(a2a_server::proto::send_message_response::Payload::Task(done)) = answer
                    .unwrap_or_else(|e| panic!("call {i} (follow-up on {r}): {e:?}"))
                    .into_inner()
                    .payload
                else {
                    panic!("call {i}: expected a task")
                };
                Raced::Sent(done)
            } else {
                let mut stream = subscribe_raw(channel, &task.id)
                    .await
                    .unwrap_or_else(|e| panic!("call {i} (subscribe on {r}): {e:?}"));
                let snapshot = next_raw(&mut stream).await.unwrap_or_else(|e| panic!("call {i}: {e:?}"));
                Raced::Subscribed(r, snapshot.expect("a snapshot"), stream)
            }
        })
    });
    let mut calls: Vec<_> = calls.collect();
    // Subscriptions answer at once; the follow-up only when its run ends, so it is awaited last.
    let follow_up_call = calls.remove(5);
    let mut subscribers = Vec::new();
    for call in calls {
        match within("a racing subscription", call).await.expect("the call succeeded") {
            Raced::Subscribed(r, snapshot, stream) => subscribers.push((r, snapshot, stream)),
            Raced::Sent(_) => unreachable!(),
        }
    }
    // All seven are in and the run has not finished (it waits three seconds): one owner.
    assert_eq!(
        fleet.metric_sum("a2a_fleet_leases_held", &ALL).await,
        1.0,
        "one lease for the revived task over the whole fleet"
    );
    let Raced::Sent(done) = within("the racing follow-up", follow_up_call).await.expect("the call succeeded")
    else {
        unreachable!()
    };
    assert_eq!(state(&done), TaskState::Completed);
    assert_eq!(artifact_texts(&done), chunks(0..5));
    for (r, snapshot, mut stream) in subscribers {
        let items: Vec<StreamResponse> =
            rest_ok(snapshot, &mut stream, &format!("subscriber on {r}")).await.iter().map(decode).collect();
        assert_eq!(joined_chunks(&items), chunks(0..5), "subscriber on {r}");
        assert_eq!(item_state(items.last().unwrap()), Some(TaskState::Completed));
    }
    assert_eq!(fleet.metric_sum("a2a_tasks_revived_total", &ALL).await, 1.0, "revived exactly once");
    eventually("the finished task's lease is released", PATIENCE, || async {
        fleet.metric_sum("a2a_fleet_leases_held", &ALL).await == 0.0
    })
    .await;
}

#[tokio::test]
async fn a_redis_outage_answers_unavailable_and_heals_by_itself() {
    let Some(mut redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(3, &redis.url(), &[]);
    for r in ALL {
        assert_eq!(fleet[r].health().await, Some(ServingStatus::Serving));
        assert_eq!(fleet[r].readyz().await, 200);
    }
    let mut a = fleet[A].client().await;
    let before = send_task(&mut a, send("hello")).await;

    redis.stop();
    for r in ALL {
        eventually(&format!("replica {r} reports NOT_SERVING"), OUTAGE_NOTICE, || async {
            fleet[r].health().await == Some(ServingStatus::NotServing) && fleet[r].readyz().await == 503
        })
        .await;
    }
    let mut b = fleet[B].client().await;
    let error = get_task(&mut b, &before.id).await.expect_err("GetTask without Redis");
    assert_unavailable(&error);
    let mut c = fleet[C].client().await;
    let error =
        within("SendMessage", c.send_message(send("hello"))).await.expect_err("SendMessage without Redis");
    assert_unavailable(&error);
    let error = within("ListTasks", a.list_tasks(ListTasksRequest::default())).await.expect_err("ListTasks");
    assert_unavailable(&error);
    let rest =
        within("GET /tasks/{id}", reqwest::get(format!("{}/tasks/{}", fleet[B].url(), before.id))).await;
    assert_eq!(rest.unwrap().status(), 503, "HTTP+JSON without Redis");
    assert!(fleet.metric_sum("a2a_redis_errors_total", &ALL).await > 0.0, "errors are counted");

    redis.restart();
    for r in ALL {
        eventually(&format!("replica {r} is SERVING again"), PATIENCE, || async {
            fleet[r].health().await == Some(ServingStatus::Serving) && fleet[r].readyz().await == 200
        })
        .await;
    }
    let after = send_task(&mut a, send("hello again")).await;
    assert_eq!(state(&after), TaskState::Completed);
    assert_eq!(artifact_texts(&same_task_everywhere(&fleet, &after.id).await), ["hello again"]);
}

fn assert_unavailable(status: &tonic::Status) {
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(status.message().to_lowercase().contains("redis"), "a clear message: {status:?}");
}

/// Every page of `request`, each page asked of `replicas[page % len]`.
async fn pages(fleet: &Fleet, replicas: &[usize], request: ListTasksRequest) -> Vec<ListTasksResponse> {
    let mut clients = Vec::new();
    for &r in replicas {
        clients.push(fleet[r].client().await);
    }
    let mut pages: Vec<ListTasksResponse> = Vec::new();
    loop {
        let page_token = pages.last().map(|p| p.next_page_token.clone()).unwrap_or_default();
        let client = &mut clients[pages.len() % replicas.len()];
        let request = ListTasksRequest { page_token, ..request.clone() };
        let page = within("ListTasks", client.list_tasks(request)).await.expect("ListTasks").into_inner();
        let last = page.next_page_token.is_empty();
        pages.push(page);
        if last {
            return pages;
        }
        assert!(pages.len() < 50, "ListTasks never ends");
    }
}

#[tokio::test]
async fn list_tasks_gives_the_same_pages_from_every_replica() {
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(3, &redis.url(), &[]);
    let context = uuid::Uuid::new_v4().to_string();
    let mut created = Vec::new();
    for i in 0..9 {
        let mut client = fleet[i % 3].client().await;
        let mut request = send(&format!("hello {i}"));
        request.message.as_mut().unwrap().context_id = context.clone();
        let task = send_task(&mut client, request).await;
        // Status timestamps have millisecond precision: keep them apart so newest-first is
        // the creation order.
        let stamp = task.status.as_ref().and_then(|s| s.timestamp).expect("a status timestamp");
        let stamp = Duration::new(stamp.seconds as u64, stamp.nanos as u32);
        eventually("the clock passes the last status timestamp", PATIENCE, || async {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap()
                > stamp + Duration::from_millis(1)
        })
        .await;
        created.push(task.id);
    }
    created.reverse(); // newest first

    for by_context in [false, true] {
        let request = ListTasksRequest {
            context_id: if by_context { context.clone() } else { String::new() },
            page_size: Some(2),
            ..Default::default()
        };
        let from_a = pages(&fleet, &[A], request.clone()).await;
        let ids: Vec<String> = from_a.iter().flat_map(|p| p.tasks.iter().map(|t| t.id.clone())).collect();
        assert_eq!(ids, created, "newest first (by context: {by_context})");
        assert_eq!(from_a.len(), 5);
        assert!(from_a.iter().all(|p| p.total_size == 9));
        for replicas in [&[B][..], &[C], &[A, B, C], &[C, B, A]] {
            let other = pages(&fleet, replicas, request.clone()).await;
            assert!(
                other == from_a,
                "pages asked of {replicas:?} differ from A's (by context: {by_context})"
            );
        }
    }
    for id in &created {
        same_task_everywhere(&fleet, id).await;
    }
}

#[tokio::test]
async fn push_configs_are_served_by_every_replica() {
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(3, &redis.url(), &["--push"]);
    let mut a = fleet[A].client().await;
    let mut b = fleet[B].client().await;
    let mut c = fleet[C].client().await;
    let task = send_task(&mut a, send("input")).await;
    let config = |id: &str| TaskPushNotificationConfig {
        id: id.into(),
        task_id: task.id.clone(),
        url: "https://hooks.example.com/a2a".into(),
        ..Default::default()
    };
    let get = |id: &str| GetTaskPushNotificationConfigRequest {
        task_id: task.id.clone(),
        id: id.into(),
        ..Default::default()
    };
    let list = ListTaskPushNotificationConfigsRequest { task_id: task.id.clone(), ..Default::default() };

    let one = within("create on A", a.create_task_push_notification_config(config("one")))
        .await
        .unwrap()
        .into_inner();
    let two = within("create on C", c.create_task_push_notification_config(config("two")))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        within("get on B", b.get_task_push_notification_config(get("one"))).await.unwrap().into_inner(),
        one
    );
    assert_eq!(
        within("get on A", a.get_task_push_notification_config(get("two"))).await.unwrap().into_inner(),
        two
    );
    let mut listed = Vec::new();
    for client in [&mut a, &mut b, &mut c] {
        let page = within("list", client.list_task_push_notification_configs(list.clone())).await.unwrap();
        listed.push(page.into_inner());
    }
    assert_eq!(listed[0].configs.len(), 2);
    assert!(listed.iter().all(|l| l == &listed[0]), "the same list from every replica");

    let delete = DeleteTaskPushNotificationConfigRequest {
        task_id: task.id.clone(),
        id: "one".into(),
        ..Default::default()
    };
    within("delete on B", b.delete_task_push_notification_config(delete)).await.expect("delete on B");
    let gone = within("get on C", c.get_task_push_notification_config(get("one"))).await.unwrap_err();
    assert_a2a_error(&gone, Code::NotFound, "TASK_NOT_FOUND");
    let left = within("list on A", a.list_task_push_notification_configs(list)).await.unwrap().into_inner();
    assert_eq!(left.configs, [two]);
}

#[test]
fn an_unreachable_redis_at_start_exits_2_naming_the_address() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let store = format!("redis://127.0.0.1:{port}/0");
    let (code, stderr) = run_to_exit(&["--listen", "127.0.0.1:0", "--store", &store]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
}

/// Metadata `depth` objects deep.
fn nested_metadata(depth: usize) -> pbjson_types::Struct {
    use pbjson_types::{Struct, Value, value::Kind};
    let leaf = Value { kind: Some(Kind::BoolValue(true)) };
    let value = (1..depth).fold(leaf, |inner, _| Value {
        kind: Some(Kind::StructValue(Struct { fields: [("k".to_owned(), inner)].into() })),
    });
    Struct { fields: [("k".to_owned(), value)].into() }
}

/// Issue 33: a follow-up sent to another replica than its task's owner, its metadata nested
/// one level past the limit, is refused at once (not dropped as unreadable mail while the
/// caller waits); at the limit it is forwarded, answered, and the task reads everywhere.
#[tokio::test]
async fn a_follow_up_nested_too_deep_is_refused_at_once_via_another_replica() {
    use a2a_server::core::MAX_NESTING;
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(3, &redis.url(), &[]);
    let mut a = fleet[A].client().await;
    let mut b = fleet[B].client().await;
    let task = send_task(&mut a, send("input")).await;
    assert_eq!(state(&task), TaskState::InputRequired);

    let mut too_deep = follow_up(&task, "green");
    too_deep.message.as_mut().expect("a message").metadata = Some(nested_metadata(MAX_NESTING + 1));
    let started = Instant::now();
    let status = b.send_message(too_deep).await.expect_err("refused");
    assert!(started.elapsed() < Duration::from_secs(5), "refused at once: {:?}", started.elapsed());
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("message.metadata"), "{status:?}");

    let mut at_limit = follow_up(&task, "green");
    at_limit.message.as_mut().expect("a message").metadata = Some(nested_metadata(MAX_NESTING));
    let started = Instant::now();
    let done = within("a follow-up at the limit via B", send_task(&mut b, at_limit)).await;
    assert!(started.elapsed() < Duration::from_secs(5), "answered: {:?}", started.elapsed());
    assert_eq!(state(&done), TaskState::Completed);
    assert_eq!(done.history.last().and_then(|m| m.metadata.clone()), Some(nested_metadata(MAX_NESTING)));
    same_task_everywhere(&fleet, &task.id).await;
    for replica in [A, B] {
        let mut client = fleet[replica].client().await;
        let list = client.list_tasks(ListTasksRequest::default()).await.expect("ListTasks").into_inner();
        assert_eq!(list.tasks.len(), 1, "replica {replica} lists the task");
    }
}

/// `--fleet-task-lag 0` (for a rolling upgrade from replicas that read the Task as stored)
/// writes the whole Task with every event; by default a stream of chunks leaves it behind.
#[tokio::test]
async fn fleet_task_lag_zero_writes_the_whole_task_with_every_event() {
    let Some(redis) = RedisServer::start() else { return };
    let mut conn =
        ::redis::Client::open(redis.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    for (args, lagged) in [(&["--fleet-task-lag", "0"][..], false), (&[][..], true)] {
        let fleet = Fleet::start(1, &redis.url(), args);
        let mut a = fleet[A].client().await;
        let task = send_task(&mut a, send("stream 20 5")).await;
        assert_eq!(state(&task), TaskState::Completed);
        let key = format!("{}:{{{}}}:task", fleet.prefix, task.id);
        let lag: bool = ::redis::cmd("HEXISTS").arg(&key).arg("lag").query_async(&mut conn).await.unwrap();
        assert_eq!(lag, lagged, "with {args:?}, the stored Task lagged: {lag}");
        assert_eq!(get_task(&mut a, &task.id).await.unwrap(), task, "GetTask reads it back whole");
    }
}
