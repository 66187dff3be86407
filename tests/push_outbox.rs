//! A fleet's durable push outbox (issue 36): every event of a task with a webhook reaches the
//! webhook at least once even when the receiver is down for 10 s and, meanwhile, the replica
//! that owned the task and led the outbox dies with `kill -9`. Deduplicated by
//! `A2A-Delivery-Id`, the receiver then holds exactly the task's events, the survivor's
//! terminal FAILED included.
//!
//! Real processes: `redis-server`, two `a2a-server` replicas, an HTTP receiver on loopback.
//! Without `redis-server` the test skips loudly, except under `CI=true`, where it fails.
mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use a2a_server::proto::{GetTaskRequest, SendMessageConfiguration, TaskPushNotificationConfig, TaskState};
use common::fleet::{Fleet, eventually, within};
use common::redis::RedisServer;
use common::webhook::{Behaviour, Receiver};
use common::*;

/// How long the receiver is down.
const DOWN: Duration = Duration::from_secs(10);

/// The replica ids' `GET` reply names the leader: `$<len>\r\n<id>\r\n`.
fn leader(redis: &RedisServer, prefix: &str) -> Option<String> {
    let reply = redis.command(&format!("GET {prefix}:{{outbox}}:leader"))?;
    reply.lines().nth(1).map(str::to_owned).filter(|id| !id.is_empty())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_reaches_a_webhook_that_was_down_while_its_owner_died() {
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(2, &redis.url(), &["--push", "--push-allow-private"]);
    let receiver = Receiver::start(Behaviour::Accept).await;
    eventually("a replica leads the outbox", Duration::from_secs(10), || async {
        leader(&redis, &fleet.prefix).is_some()
    })
    .await;
    // The task is started on the leader, so one kill takes the owner and the outbox's reader.
    let lead = leader(&redis, &fleet.prefix).unwrap();
    let (owner, survivor) = if fleet[0].id == lead { (0, 1) } else { (1, 0) };

    let mut request = send_returning_immediately("stream 30 200");
    request.configuration = Some(SendMessageConfiguration {
        return_immediately: true,
        task_push_notification_config: Some(TaskPushNotificationConfig {
            id: "hook".into(),
            url: receiver.url.clone(),
            ..Default::default()
        }),
        ..Default::default()
    });
    let mut client = fleet[owner].client().await;
    let task = within("send on the leader", send_task(&mut client, request)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    receiver.stop();
    let before = receiver.count();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut fleet = fleet;
    fleet.replicas[owner].kill9();
    tokio::time::sleep(DOWN - Duration::from_millis(1500)).await;
    receiver.restart().await;

    // The survivor fails the task (its owner is gone) and leads the outbox now.
    let other = fleet[survivor].client().await;
    let request = GetTaskRequest { id: task.id.clone(), ..Default::default() };
    let last = std::sync::Mutex::new(None);
    eventually("the survivor ends the task", Duration::from_secs(30), || {
        let (mut client, request, last) = (other.clone(), request.clone(), &last);
        async move {
            let task = client.get_task(request).await.map(|t| t.into_inner()).ok();
            let done = task.as_ref().is_some_and(|t| state(t) == TaskState::Failed);
            *last.lock().unwrap() = task;
            done
        }
    })
    .await;
    let stored = last.into_inner().unwrap().unwrap();
    let generation = u64::try_from(stored.generation).unwrap();
    let prefix = format!("{}/", task.id);
    let delivered = || -> BTreeMap<u64, (usize, String)> {
        let calls = receiver.calls.lock().unwrap();
        let mut seen: BTreeMap<u64, (usize, String)> = BTreeMap::new();
        for call in calls.iter() {
            let id = call.headers.get("a2a-delivery-id").and_then(|v| v.to_str().ok()).unwrap_or_default();
            let Some(seq) = id.strip_prefix(&prefix).and_then(|s| s.parse().ok()) else { continue };
            let state =
                call.body.pointer("/statusUpdate/status/state").and_then(|s| s.as_str()).unwrap_or("");
            seen.entry(seq).or_insert((0, state.to_owned())).0 += 1;
        }
        seen
    };
    eventually("every event delivered", Duration::from_secs(60), || async {
        delivered().len() as u64 >= generation - 1
    })
    .await;
    let seen = delivered();
    let seqs: Vec<u64> = seen.keys().copied().collect();
    assert_eq!(
        seqs,
        (2..=generation).collect::<Vec<_>>(),
        "each event once after deduplication, none missing"
    );
    assert_eq!(seen[&generation].1, "TASK_STATE_FAILED", "the survivor's terminal FAILED was delivered");
    let repeats: usize = seen.values().map(|(n, _)| n - 1).sum();
    assert!(before > 0, "some events were delivered before the receiver went down");
    eprintln!(
        "push outbox: {} events, {before} delivered before the outage, {repeats} repeats dropped by A2A-Delivery-Id",
        generation - 1
    );
    let failed =
        receiver.calls.lock().unwrap().iter().filter(|c| c.headers.get("a2a-delivery-id").is_none()).count();
    assert_eq!(failed, 0, "every POST names its delivery");
    // The dead leader's entries were taken over, so its reader left the group: each restart
    // names a new one, which would otherwise stay for ever.
    let dead = fleet.replicas[owner].id.clone();
    let readers = || redis.command(&format!("XINFO CONSUMERS {}:{{outbox}} push", fleet.prefix));
    eventually("the dead leader's reader leaves the group", Duration::from_secs(10), || async {
        readers().is_some_and(|r| !r.contains(&dead))
    })
    .await;
    assert!(readers().unwrap().contains(&fleet[survivor].id), "the leader's own reader stays");
    // Redis never failed: a replica waiting for the lead must not count errors (each would
    // be a break in its sight of Redis, holding its sweeper back a lease).
    assert_eq!(fleet[survivor].metric("a2a_redis_errors_total").await, 0.0, "no failed Redis call");
}
