//! Redis out of memory (its `maxmemory` reached, `maxmemory-policy noeviction`): the fleet
//! makes room by dropping its oldest finished tasks (and records kept for retries), as
//! retention would, instead of refusing
//! every call until an operator steps in. Before, a write refused for memory woke nothing
//! (retention's limits were not reached), so every new call failed UNAVAILABLE and every
//! task whose write was refused waited for the store for ever.
//!
//! Needs `redis-server` (skipped without it, like the other fleet tests).
mod common;

use std::time::{Duration, Instant};

use common::fleet::Fleet;
use common::redis::RedisServer;
use common::*;
use futures::StreamExt;

/// Calls sent in all: several times what the memory Redis is given holds.
const CALLS: usize = 3_000;

/// Calls in flight at once.
const IN_FLIGHT: usize = 8;

fn info_field(info: &str, field: &str) -> u64 {
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO has no {field}: {info}"))
}

#[tokio::test]
async fn a_full_redis_makes_room_by_dropping_the_oldest_finished_tasks() {
    // Room for some hundreds of echo tasks, far below retention's limits (10,000, 256 MiB).
    let echo = |i: usize| format!("echo {i} {}", "x".repeat(200));
    through_a_full_redis(2 * 1024 * 1024, echo, "finished", "finished tasks").await;
}

/// The SendMessage records kept for retries of direct replies, which no task holds, have a
/// retention set of their own: a Redis full of them makes room by dropping the oldest too.
#[tokio::test]
async fn a_redis_full_of_direct_replies_makes_room_by_dropping_the_oldest_records() {
    // Each record holds its reply: ~1 KiB, so 3,000 of them are more than the room there is.
    let reply = |i: usize| format!("message {i} {}", "x".repeat(1000));
    through_a_full_redis(2 * 1024 * 1024, reply, "records", "records").await;
}

/// Sends [`CALLS`] messages (`text`) through a Redis given `headroom` bytes more than it holds
/// empty, retrying those refused for memory as a client would, and checks that every one was
/// answered, Redis ran out of memory, and room was made by dropping some (not all) of the
/// members of retention set `set` (`what`, for messages).
async fn through_a_full_redis(headroom: u64, text: impl Fn(usize) -> String, set: &str, what: &str) {
    let Some(redis) = RedisServer::start() else { return };
    let used = info_field(&redis.command("INFO memory").expect("INFO"), "used_memory");
    let limit = used + headroom;
    for setting in [format!("CONFIG SET maxmemory {limit}"), "CONFIG SET maxmemory-policy noeviction".into()]
    {
        assert!(redis.command(&setting).expect("CONFIG SET").contains("OK"), "{setting}");
    }
    let fleet = Fleet::start(1, &redis.url(), &[]);
    let client = fleet[0].client().await;
    let started = Instant::now();
    let (mut refused, mut done) = (0, 0);
    let mut calls = futures::stream::iter(0..CALLS)
        .map(|i| {
            let (mut client, text) = (client.clone(), text(i));
            async move {
                // A call refused while room is being made is retried, as a client would.
                let mut refused = 0;
                loop {
                    let request = send(&text);
                    match tokio::time::timeout(Duration::from_secs(10), client.send_message(request)).await {
                        Ok(Ok(_)) => return refused,
                        Ok(Err(status)) if status.code() == tonic::Code::Unavailable && refused < 50 => {
                            refused += 1;
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                        Ok(Err(status)) => panic!("call {i}: {status:?}"),
                        Err(_) => panic!("call {i} had no answer within 10 s"),
                    }
                }
            }
        })
        .buffer_unordered(IN_FLIGHT);
    while let Some(tries) = calls.next().await {
        refused += tries;
        done += 1;
    }
    assert_eq!(done, CALLS);
    let info = redis.command("INFO memory").expect("INFO");
    let kept: u64 = redis
        .command(&format!("ZCARD {}:{{{set}}}", fleet.prefix))
        .and_then(|reply| reply.trim().trim_start_matches(':').parse().ok())
        .expect("ZCARD");
    eprintln!(
        "{CALLS} calls in {:?}: {refused} refused for memory and retried; {kept} {what} kept; \
         Redis used {} of {limit} bytes",
        started.elapsed(),
        info_field(&info, "used_memory"),
    );
    assert!(fleet[0].metric("a2a_redis_out_of_memory_total").await > 0.0, "Redis did run out of memory");
    assert!(kept < CALLS as u64, "room was made by dropping {what}: {kept} kept");
    assert!(kept > 0, "only as many as room needed went");
}

/// Redis full of what no retention may drop (here: other data): each call is refused at once,
/// saying the store is full, and the evictor, finding no finished task to drop, pauses rather
/// than asking Redis again for every refusal.
#[tokio::test]
async fn a_redis_full_of_nothing_droppable_refuses_at_once_and_the_evictor_pauses() {
    let Some(redis) = RedisServer::start() else { return };
    let fleet = Fleet::start(1, &redis.url(), &[]);
    let mut client = fleet[0].client().await;
    let used = info_field(&redis.command("INFO memory").expect("INFO"), "used_memory");
    for setting in
        [format!("CONFIG SET maxmemory {}", used / 2), "CONFIG SET maxmemory-policy noeviction".into()]
    {
        assert!(redis.command(&setting).expect("CONFIG SET").contains("OK"), "{setting}");
    }
    let evictions = || async {
        let text = fleet[0].metrics().await;
        text.lines()
            .filter(|line| line.starts_with("a2a_redis_round_trips_total") && line.contains("op=\"evict\""))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    let before = evictions().await;
    let started = Instant::now();
    for i in 0..100 {
        let refused = client.send_message(send(&format!("echo {i}"))).await.expect_err("Redis is full");
        assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
        assert!(refused.message().contains("is full"), "says why: {}", refused.message());
    }
    let took = started.elapsed();
    // One look per second at the most while nothing is left to drop (plus the one under way).
    let looks = evictions().await - before;
    assert!(looks <= took.as_secs_f64().ceil() + 2.0, "{looks} evictor round trips in {took:?}");
    assert!(fleet[0].metric("a2a_redis_out_of_memory_total").await >= 100.0);
}
