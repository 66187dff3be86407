//! Idempotent SendMessage across a fleet (`src/core/idempotent.rs`): three real `a2a-server`
//! replicas on one real `redis-server`. The same SendMessage sent to two replicas at once runs
//! once (one atomic claim in Redis): both answers name the one task that exists, and one
//! task was started fleet-wide. A retry on another replica gets the first call's direct reply,
//! or the follow-up's task without a second turn.
//!
//! Without `redis-server` these tests skip loudly, except under `CI=true`, where they fail.
mod common;

use a2a_server::proto::send_message_response::Payload as Reply;
use a2a_server::proto::{GetTaskRequest, ListTasksRequest, Message, SendMessageRequest, Task, TaskState};
use a2a_server::task::store::{SentRecord, SentState};
use common::fleet::{Fleet, eventually, within};
use common::redis::{RedisCluster, RedisServer};
use common::*;

const A: usize = 0;
const B: usize = 1;
const C: usize = 2;
const ALL: [usize; 3] = [A, B, C];

async fn send_on(fleet: &Fleet, replica: usize, request: SendMessageRequest) -> Option<Reply> {
    let mut client = fleet[replica].client().await;
    let answer = within("SendMessage", client.send_message(request)).await;
    answer.unwrap_or_else(|e| panic!("SendMessage on replica {replica}: {e:?}")).into_inner().payload
}

fn task(reply: Option<Reply>) -> Task {
    match reply {
        Some(Reply::Task(task)) => task,
        other => panic!("expected a task, got {other:?}"),
    }
}

fn message(reply: Option<Reply>) -> Message {
    match reply {
        Some(Reply::Message(message)) => message,
        other => panic!("expected a message, got {other:?}"),
    }
}

/// The one SendMessage sent to A and B at the same moment.
async fn one_call_on_two_replicas_runs_once(store: &str) {
    let fleet = Fleet::start(3, store, &[]);
    // Connected first, so that both calls leave together.
    let (mut a, mut b) = (fleet[A].client().await, fleet[B].client().await);
    let request = send("stream 3 100");
    let (on_a, on_b) = within("both calls", async {
        tokio::join!(a.send_message(request.clone()), b.send_message(request.clone()))
    })
    .await;
    let on_a = task(on_a.expect("SendMessage on A").into_inner().payload);
    let on_b = task(on_b.expect("SendMessage on B").into_inner().payload);
    assert_eq!(on_a.id, on_b.id, "both answers name the same task");
    for (replica, answer) in [(A, &on_a), (B, &on_b)] {
        assert_eq!(state(answer), TaskState::Completed, "replica {replica} answered once the task ended");
        assert_eq!(artifact_texts(answer).len(), 3, "replica {replica}: one run's chunks");
    }
    let mut c = fleet[C].client().await;
    let listed = within("ListTasks", c.list_tasks(ListTasksRequest::default())).await.expect("ListTasks");
    assert_eq!(listed.into_inner().total_size, 1, "exactly one task exists");
    assert_eq!(fleet.metric_sum("a2a_tasks_started_total", &ALL).await, 1.0, "the agent ran once");
}

#[tokio::test]
async fn the_same_send_to_two_replicas_at_once_runs_once() {
    let Some(redis) = RedisServer::start() else { return };
    one_call_on_two_replicas_runs_once(&redis.url()).await;
}

#[tokio::test]
async fn on_a_redis_cluster_too_the_same_send_to_two_replicas_at_once_runs_once() {
    let Some(cluster) = RedisCluster::start() else { return };
    one_call_on_two_replicas_runs_once(&cluster.url()).await;
}

#[tokio::test]
async fn a_retry_on_another_replica_gets_the_first_outcome() {
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(3, &redis.url(), &[]);

    let reply = send("message hello");
    let first = message(send_on(&fleet, A, reply.clone()).await);
    assert_eq!(message(send_on(&fleet, B, reply).await), first, "the recorded reply, not a new one");

    let asked = task(send_on(&fleet, A, send("input")).await);
    assert_eq!(state(&asked), TaskState::InputRequired);
    let answer = follow_up(&asked, "blue");
    let done = task(send_on(&fleet, B, answer.clone()).await);
    assert_eq!(state(&done), TaskState::Completed);
    // Run again, the follow-up would meet a completed task and be refused.
    let again = task(send_on(&fleet, C, answer.clone()).await);
    assert_eq!((again.id.as_str(), state(&again)), (asked.id.as_str(), TaskState::Completed));
    assert_eq!(artifact_texts(&again), ["blue"]);
    let message_id = &answer.message.as_ref().unwrap().message_id;
    assert_eq!(again.history.iter().filter(|m| &m.message_id == message_id).count(), 1);

    let mut other = answer;
    other.message.as_mut().unwrap().parts = vec![a2a_server::agent::text_part("green")];
    let mut c = fleet[C].client().await;
    // Another message under the same id is no retry: it runs, and meets the completed task.
    let refused = within("SendMessage", c.send_message(other)).await.expect_err("a finished task");
    assert_a2a_error(&refused, tonic::Code::FailedPrecondition, "UNSUPPORTED_OPERATION");
}

/// A follow-up's SendMessage record is kept like a finished task: retention counts it and
/// lets it go, oldest first. Nothing noted it before (a new task's member names only the
/// message that made it), so each stayed the whole retention age, an hour by default,
/// whatever retention's count and bytes said: Redis grew by a record per follow-up however
/// few tasks it kept. Records are counted apart from the tasks, as the memory store counts
/// them: a conversation's turns do not push its tasks out of retention.
#[tokio::test]
async fn a_follow_ups_record_is_kept_like_a_finished_task() {
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(1, &redis.url(), &["--task-retention-count", "4"]);
    let mut last = String::new();
    for turn in 0..10 {
        let asked = task(send_on(&fleet, A, send("input")).await);
        let answer = follow_up(&asked, &format!("blue {turn}"));
        last.clone_from(&answer.message.as_ref().unwrap().message_id);
        assert_eq!(state(&task(send_on(&fleet, A, answer).await)), TaskState::Completed);
    }
    // Each task's record goes with it, each follow-up's on its own: 4 + 4 records at the most.
    let left = records_come_down_to(&redis, &fleet, 8).await;
    assert!(left.iter().any(|key| key.ends_with(&format!("sent:{last}"))), "the newest stays: {left:?}");
    // And retention keeps the 4 newest tasks, as it would in memory: before, the follow-ups'
    // records took places of the 4, and half the tasks went.
    let mut client = fleet[A].client().await;
    let limit = std::time::Duration::from_secs(15);
    eventually("retention keeps the 4 newest tasks", limit, || {
        let mut client = client.clone();
        async move {
            let listed = client.list_tasks(ListTasksRequest::default()).await.unwrap().into_inner();
            listed.total_size == 4
        }
    })
    .await;
    let listed = within("ListTasks", client.list_tasks(ListTasksRequest::default())).await.unwrap();
    assert_eq!(listed.into_inner().tasks.len(), 4);
}

/// A follow-up whose call was dropped before it settled its claim (its client gave up while the
/// turn ran) leaves the claim for a retry to find, and it is kept like a finished task: nothing
/// noted it before, so each stayed the whole retention age, one per dropped call.
#[tokio::test]
async fn a_dropped_follow_ups_claim_is_kept_like_a_finished_task() {
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(1, &redis.url(), &["--task-retention-count", "4"]);
    let mut client = fleet[A].client().await;
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let asked = task(send_on(&fleet, A, send("input")).await);
        // The follow-up runs a turn of 3 chunks 200 ms apart; its caller gives up at once.
        let given_up = tokio::time::timeout(
            std::time::Duration::from_millis(100),
            client.send_message(follow_up(&asked, "stream 3 200")),
        );
        assert!(given_up.await.is_err(), "the turn outlasts the caller's patience");
        tasks.push(asked);
    }
    // Every turn ends (its task COMPLETED), then retention keeps 4 tasks, with their records,
    // and 4 follow-ups' records: without the note, all 8 of these stayed.
    records_come_down_to(&redis, &fleet, 8).await;
}

/// Waits (up to 15 s) until `fleet` holds at most `most` SendMessage records in `redis`;
/// their keys then.
async fn records_come_down_to(redis: &RedisServer, fleet: &Fleet, most: usize) -> Vec<String> {
    let conn = ::redis::Client::open(redis.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let records = || {
        let (mut conn, pattern) = (conn.clone(), format!("{}:*sent:*", fleet.prefix));
        async move { ::redis::cmd("KEYS").arg(pattern).query_async::<Vec<String>>(&mut conn).await.unwrap() }
    };
    let limit = std::time::Duration::from_secs(15);
    eventually("retention lets the records go", limit, || async { records().await.len() <= most }).await;
    records().await
}

/// SendMessage claims in `redis` no call settled: with an expiry left (one its call settled is
/// kept without expiry, retention bounding it with its task), and naming a task that does not
/// exist (a task's first write retried through the `WRITE` script keeps its record's expiry).
async fn abandoned_claims(redis: &RedisServer, fleet: &Fleet) -> usize {
    let client = ::redis::Client::open(redis.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let mut grpc = fleet[A].client().await;
    let pattern = format!("{}:*sent:*", fleet.prefix);
    let keys: Vec<String> = ::redis::cmd("KEYS").arg(pattern).query_async(&mut conn).await.unwrap();
    let mut abandoned = 0;
    for key in keys {
        let ttl: i64 = ::redis::cmd("PTTL").arg(&key).query_async(&mut conn).await.unwrap();
        let record: Option<Vec<u8>> = ::redis::cmd("GET").arg(&key).query_async(&mut conn).await.unwrap();
        let (true, Some(record)) = (ttl > 0, record) else { continue };
        let SentState::Claimed { task_id, .. } = SentRecord::decode(&record).unwrap().state else { continue };
        match grpc.get_task(GetTaskRequest { id: task_id, ..Default::default() }).await {
            Ok(_) => {}
            Err(status) if status.code() == tonic::Code::NotFound => abandoned += 1,
            Err(status) => panic!("GetTask of a claim's task failed: {status}"),
        }
    }
    abandoned
}

/// Waits (up to 15 s) until no call's claim is left abandoned: removed at once, or 6 s later
/// (when a claim goes stale) if it landed after its call went.
async fn no_claim_left_behind(redis: &RedisServer, fleet: &Fleet) {
    let limit = std::time::Duration::from_secs(15);
    eventually("no abandoned claim is left", limit, || async { abandoned_claims(redis, fleet).await == 0 })
        .await;
}

/// Calls their clients give up on early leave no SendMessage claim behind: a new task's parked
/// caps are read (a Redis round trip now and then) before its message is claimed, not between
/// the claim and the agent's start. Before, a call that went while they were read left its
/// claim the retention age (an hour), one key per such call, and a retry of the call waited
/// for the claim to go stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_given_up_on_early_leave_no_claim_behind() {
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(1, &redis.url(), &[]);
    let client = fleet[A].client().await;
    let (rounds, width) = (40u64, 16u64);
    let mut given_up = 0;
    for round in 0..rounds {
        let calls = (0..width).map(|i| {
            let mut client = client.clone();
            // 0.2 to 2.5 ms: some calls go before their claim, some after.
            let patience = std::time::Duration::from_micros(200 + (round * width + i) % 24 * 100);
            async move { tokio::time::timeout(patience, client.send_message(send("hi"))).await.is_err() }
        });
        given_up += futures::future::join_all(calls).await.into_iter().filter(|gone| *gone).count();
    }
    no_claim_left_behind(&redis, &fleet).await;
    eprintln!("{given_up} of {} calls given up on; no claim left behind", rounds * width);
    assert!(given_up > 0, "some calls went before their answer");
}

/// A call its client gives up on while its claim waits in a stalled Redis (writes paused, as a
/// busy or failing-over primary holds them) leaves no claim once Redis goes on: the claim lands
/// after its call went, and is removed then, since nothing ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_that_lands_after_its_call_went_is_removed() {
    let Some(redis) = RedisServer::start() else { return };
    // No parked caps: the claim is the call's only round trip before its agent starts.
    let caps = ["--max-parked-tasks", "0", "--max-parked-tasks-per-principal", "0"];
    let fleet = Fleet::start(1, &redis.url(), &caps);
    let client = fleet[A].client().await;
    redis.command("CLIENT PAUSE 800 WRITE").expect("pausing Redis's writes");
    let calls = (0..8).map(|_| {
        let mut client = client.clone();
        let patience = std::time::Duration::from_millis(200);
        async move { tokio::time::timeout(patience, client.send_message(send("hi"))).await.is_err() }
    });
    let given_up = futures::future::join_all(calls).await.into_iter().filter(|gone| *gone).count();
    assert_eq!(given_up, 8, "every call went while Redis held its claim");
    // Once the pause is over, and the claims have landed.
    tokio::time::sleep(std::time::Duration::from_millis(1_000)).await;
    no_claim_left_behind(&redis, &fleet).await;
}
