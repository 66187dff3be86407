//! Group commit on a single node: born-finished writes that come together are stored in a
//! few `MULTI`s, each write exactly (its Task, events, index entries, meta and retention
//! note), and a batch that cannot be written fails every write in it, without a hang.
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use a2a_server::proto::{Task, TaskState};
use a2a_server::task::store::redis::{EventBatch, Timeouts};
use a2a_server::task::store::{RedisStore, Retention, TaskQuery, TaskStore};
use bytes::Bytes;
use futures::future::join_all;
use prost::Message;

use super::redis_server::RedisServer;
use super::suite::{owner, task};
use super::{BOUND, BOUNDS, redis_store, redis_store_in};

/// How many writes come together.
const WRITES: usize = 200;

/// The `i`-th task: two owners; every third task opens its own context, the rest share one
/// per owner; every other one was watched (its events are stored).
fn nth(i: usize) -> (a2a_server::call::Owner, Arc<Task>, bool) {
    let who = if i.is_multiple_of(2) { "alice" } else { "bob" };
    let id = format!("t{i}");
    let context = if i.is_multiple_of(3) { id.clone() } else { format!("ctx-{who}") };
    (owner(who), task(&id, &context, TaskState::Completed, i as i64), i % 4 < 2)
}

/// Writes tasks `range` all at once: each is queued before any batch goes.
async fn write_all(store: &RedisStore, range: std::ops::Range<usize>) -> Vec<Result<(), String>> {
    let writes = range.map(|i| async move {
        let (who, done, watched) = nth(i);
        let events = [Bytes::from(format!("event of {i}"))];
        let written = store.write_born_finished(&who, &done, 2, &events, BOUNDS, !watched);
        tokio::time::timeout(BOUND, written).await.expect("no hang").map_err(|e| e.reason().to_owned())
    });
    join_all(writes).await
}

/// One `INFO commandstats` count of calls of `command`.
fn calls(server: &RedisServer, command: &str) -> u64 {
    let stats = server.command("INFO commandstats").unwrap_or_default();
    let line = stats.lines().find(|l| l.starts_with(&format!("cmdstat_{command}:"))).unwrap_or_default();
    line.split(['=', ',']).nth(1).and_then(|n| n.parse().ok()).unwrap_or(0)
}

#[tokio::test]
async fn born_finished_writes_that_come_together_go_together_each_exactly() {
    let Some(server) = RedisServer::start() else { return };
    // Three index and retention pieces on the node: a batch spans several of each.
    let store = redis_store_in(&server.url(), Retention::default(), Timeouts::default(), Some(3)).await;
    server.command("CONFIG RESETSTAT");

    let written = write_all(&store, 0..WRITES).await;
    assert!(written.iter().all(Result::is_ok), "{written:?}");
    let (execs, hsets) = (calls(&server, "exec"), calls(&server, "hset"));
    assert!(execs * 8 <= WRITES as u64, "{WRITES} writes took {execs} MULTIs");
    // One HSET per Task, and one per meta piece (two owners, three pieces) and batch, not
    // one per task.
    assert!(hsets <= (WRITES as u64) + execs * 6, "{hsets} HSETs in {execs} MULTIs");

    let mut listed: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..WRITES {
        let (who, done, watched) = nth(i);
        let (stored, seq) = store.snapshot(&who, &done.id).await.unwrap().expect("stored");
        assert_eq!((stored.id.as_str(), seq), (done.id.as_str(), 2), "task {i}");
        let events = store.read_events(&done.id, 1, None, 10).await.unwrap();
        let EventBatch::Events(events) = events else { panic!("trimmed") };
        let expected: &[u64] = if watched { &[2] } else { &[] };
        assert_eq!(events.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), expected, "task {i}");
        *listed.entry(who.principal.clone()).or_default() += 1;
    }
    for (who, count) in listed {
        let all = TaskQuery { page_size: 100, ..TaskQuery::default() };
        let page = store.list(&owner(&who), &all).await.unwrap();
        assert_eq!(page.total, count, "{who}'s index");
        let shared = TaskQuery { context_id: Some(format!("ctx-{who}")), ..all.clone() };
        let in_context = store.list(&owner(&who), &shared).await.unwrap().total;
        assert_eq!(in_context, (0..WRITES).filter(|i| nth(*i).0.principal == who && i % 3 != 0).count());
        let opened = TaskQuery { context_id: Some(if who == "alice" { "t0" } else { "t3" }.into()), ..all };
        assert_eq!(store.list(&owner(&who), &opened).await.unwrap().total, 1, "{who}: a context of one");
    }

    // Retention noted every task once, and each piece's bytes are its members' sizes.
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*finished*").query_async(&mut conn).await.unwrap();
    let (mut members, mut bytes) = (0, 0);
    for set in keys.iter().filter(|k| !k.ends_with(":sizes")) {
        let held: Vec<String> =
            redis::cmd("ZRANGE").arg(set).arg(0).arg(-1).query_async(&mut conn).await.unwrap();
        let sizes = held.iter().map(|m| m.rsplit('|').next().unwrap().parse::<u64>().unwrap()).sum::<u64>();
        let total: u64 =
            redis::cmd("HGET").arg(format!("{set}:sizes")).arg("#").query_async(&mut conn).await.unwrap();
        assert_eq!(total, sizes, "{set}");
        (members, bytes) = (members + held.len(), bytes + total);
    }
    assert_eq!(members, WRITES);
    let expected = (0..WRITES)
        .map(|i| {
            let (_, done, watched) = nth(i);
            (done.encoded_len() + if watched { format!("event of {i}").len() } else { 0 }) as u64
        })
        .sum::<u64>();
    assert_eq!(bytes, expected);
}

#[tokio::test]
async fn a_batch_that_cannot_be_written_fails_every_write_in_it_and_the_next_goes() {
    let Some(mut server) = RedisServer::start() else { return };
    let timeouts = Timeouts { connect: Duration::from_millis(500), command: Duration::from_millis(500) };
    let store = redis_store(&server.url(), Retention::default(), timeouts).await;
    write_all(&store, 0..1).await[0].clone().expect("Redis up");

    server.stop();
    let failed = write_all(&store, 1..WRITES).await;
    assert!(failed.iter().all(|w| *w == Err("UNAVAILABLE".to_owned())), "{failed:?}");

    server.restart();
    let deadline = tokio::time::Instant::now() + BOUND;
    while write_all(&store, 1..2).await[0].is_err() {
        assert!(tokio::time::Instant::now() < deadline, "no recovery after the restart");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let written = write_all(&store, 2..WRITES).await;
    assert!(written.iter().all(Result::is_ok), "{written:?}");
    let page = store.list(&owner("alice"), &TaskQuery { page_size: 100, ..TaskQuery::default() }).await;
    assert_eq!(page.unwrap().total, (1..WRITES).filter(|i| i % 2 == 0).count());
}
