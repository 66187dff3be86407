//! The fleet's rules under a Redis outage, on a task's owner (docs/FLEET.md, "Answers wait for
//! the store" and "Failures"): no event is shown before it is stored, no answer says what the
//! store does not hold, an outage longer than the lease fails no task, and an owner that loses
//! its lease ends its streams with the resumable close at the last generation it stored.
//! Needs `redis-server` (skipped without it, like the other fleet tests). The wider fault
//! suite, through nginx, is `tests/fleet_faults.rs`.
mod common;

use std::time::{Duration, Instant};

use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{GetTaskRequest, StreamResponse, TaskState};
use common::fleet::Fleet;
use common::redis::RedisServer;
use common::*;
use tonic::Streaming;
use tonic_types::StatusExt;

/// An entry of a Redis stream: its id and field/value pairs.
type StreamEntry = (String, Vec<(String, Vec<u8>)>);

const A: usize = 0;
const B: usize = 1;

/// Every item of a stream with the moment it arrived, and how the stream ended.
async fn read_timed(
    mut stream: Streaming<StreamResponse>,
) -> (Vec<(Instant, StreamResponse)>, Option<tonic::Status>) {
    let mut items = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(30), stream.message()).await {
            Ok(Ok(Some(item))) => items.push((Instant::now(), item)),
            Ok(Ok(None)) => return (items, None),
            Ok(Err(status)) => return (items, Some(status)),
            Err(_) => panic!("a stream stalled for 30 s"),
        }
    }
}

/// The task id a stream's first item names.
fn task_id(item: &StreamResponse) -> String {
    match &item.payload {
        Some(Payload::Task(task)) => task.id.clone(),
        other => panic!("a stream opens with the Task, not {other:?}"),
    }
}

#[tokio::test]
async fn an_outage_longer_than_the_lease_shows_nothing_unstored_keeps_every_answer_and_fails_no_task() {
    let Some(mut redis) = RedisServer::start_with_aof("always") else { return };
    let fleet = Fleet::start(2, &redis.url(), &["--lease-ms", "1000"]);
    let mut a = fleet[A].client().await;
    let mut readers = Vec::new();
    for _ in 0..2 {
        let stream = a.send_streaming_message(send("stream 30 100")).await.expect("stream").into_inner();
        readers.push(tokio::spawn(read_timed(stream)));
    }
    let mut blocking_client = fleet[A].client().await;
    let blocking = tokio::spawn(async move { blocking_client.send_message(send("stream 15 100")).await });

    tokio::time::sleep(Duration::from_millis(700)).await;
    redis.shutdown();
    let down = Instant::now();
    // Longer than the lease: every lease expires while Redis is away.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let up = Instant::now();
    redis.restart();

    let mut ids = Vec::new();
    for reader in readers {
        let (items, end) = reader.await.expect("reader");
        assert!(end.is_none(), "the owner's stream goes on after the outage: {end:?}");
        let id = task_id(&items[0].1);
        // Nothing reached the subscriber while the store could not take it (a little slack
        // for what was stored just before Redis went away).
        let shown_while_down =
            items.iter().filter(|(at, _)| *at > down + Duration::from_millis(300) && *at < up).count();
        assert_eq!(shown_while_down, 0, "events shown while Redis was down, on task {id}");
        let generations: Vec<i64> = items.iter().map(|(_, item)| item_generation(item)).collect();
        let first = generations[0];
        let expected: Vec<i64> = (first..first + generations.len() as i64).collect();
        assert_eq!(generations, expected, "gapless, without duplicates, on task {id}");
        assert_eq!(item_state(&items.last().expect("items").1), Some(TaskState::Completed), "task {id}");
        ids.push((id, *generations.last().expect("generations")));
    }
    match blocking.await.expect("blocking call") {
        // What a blocking caller was told is what the store holds.
        Ok(answer) => {
            let task = match answer.into_inner().payload {
                Some(a2a_server::proto::send_message_response::Payload::Task(task)) => task,
                other => panic!("a task, not {other:?}"),
            };
            assert_eq!(state(&task), TaskState::Completed);
            ids.push((task.id.clone(), task.generation));
        }
        // Or it was told to retry: never a success the store does not hold.
        Err(status) => assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}"),
    }
    let mut b = fleet[B].client().await;
    for (id, generation) in ids {
        let request = GetTaskRequest { id: id.clone(), ..Default::default() };
        let stored = b.get_task(request).await.expect("GetTask on the other replica").into_inner();
        assert_eq!(state(&stored), TaskState::Completed, "no task failed as if its replica died: {stored:?}");
        assert_eq!(stored.generation, generation, "the store holds every generation shown, task {id}");
    }
    assert_eq!(fleet.metric_sum("a2a_fleet_takeovers_total", &[A, B]).await, 0.0, "nothing taken over");
}

#[tokio::test]
async fn an_owner_that_loses_its_lease_ends_its_streams_resumably_at_the_last_stored_generation() {
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(1, &redis.url(), &[]);
    let mut a = fleet[A].client().await;
    let mut stream = a.send_streaming_message(send("stream 40 100")).await.expect("stream").into_inner();
    let first = next(&mut stream).await.expect("the Task");
    let id = task_id(&first);
    let mut seen = item_generation(&first);
    for _ in 0..3 {
        seen = item_generation(&next(&mut stream).await.expect("an update"));
    }
    // Another replica takes the lease (as a survivor would after this one stalled).
    let client = ::redis::Client::open(redis.url()).expect("redis url");
    let mut conn = client.get_multiplexed_async_connection().await.expect("redis");
    let lease = format!("{}:{{{id}}}:lease", fleet.prefix);
    let _: () = ::redis::cmd("SET")
        .arg(&lease)
        .arg("intruder")
        .arg("PX")
        .arg(60_000)
        .query_async(&mut conn)
        .await
        .unwrap();
    let status = loop {
        match tokio::time::timeout(PATIENCE, stream.message()).await.expect("the stream ends") {
            Ok(Some(item)) => seen = item_generation(&item),
            Ok(None) => panic!("the stream ended as if the task were over"),
            Err(status) => break status,
        }
    };
    assert_a2a_error(&status, tonic::Code::Unavailable, "STREAM_CLOSED");
    let details = status.get_error_details();
    let info = details.error_info().expect("ErrorInfo");
    assert_eq!(info.metadata.get("lastGeneration"), Some(&seen.to_string()), "{status:?}");
    // Everything shown is stored: the stream holds the last generation this client saw.
    let stored: Vec<StreamEntry> = ::redis::cmd("XRANGE")
        .arg(format!("{}:{{{id}}}:events", fleet.prefix))
        .arg(format!("{seen}-0"))
        .arg(format!("{seen}-0"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(stored.len(), 1, "generation {seen} is in the task's stream");
}

#[tokio::test]
async fn a_call_elsewhere_while_a_running_tasks_lease_is_lapsed_does_not_take_it_from_its_owner() {
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(2, &redis.url(), &[]);
    let mut a = fleet[A].client().await;
    let mut stream = a.send_streaming_message(send("stream 20 100")).await.expect("stream").into_inner();
    let id = task_id(&next(&mut stream).await.expect("the Task"));
    next(&mut stream).await.expect("an update");
    // The lease lapses while its owner lives (as when Redis was away longer than the lease);
    // a subscriber on B comes before the owner renews it.
    let client = ::redis::Client::open(redis.url()).expect("redis url");
    let mut conn = client.get_multiplexed_async_connection().await.expect("redis");
    let lease = format!("{}:{{{id}}}:lease", fleet.prefix);
    let _: i64 = ::redis::cmd("DEL").arg(&lease).query_async(&mut conn).await.unwrap();
    let mut b = fleet[B].client().await;
    let request = a2a_server::proto::SubscribeToTaskRequest { id: id.clone(), ..Default::default() };
    let on_b = b.subscribe_to_task(request).await.expect("subscribe on B").into_inner();
    let (items, end) = read_timed(on_b).await;
    assert!(end.is_none(), "{end:?}");
    assert_eq!(item_state(&items.last().expect("items").1), Some(TaskState::Completed), "B saw the end");
    let (rest, end) = read_timed(stream).await;
    assert!(end.is_none(), "the owner kept its task: {end:?}");
    assert_eq!(item_state(&rest.last().expect("items").1), Some(TaskState::Completed));
    let stored = b.get_task(GetTaskRequest { id, ..Default::default() }).await.expect("GetTask").into_inner();
    assert_eq!(artifact_texts(&stored).len(), 20, "every chunk, from the agent that ran on A");
}
