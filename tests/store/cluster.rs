//! A Redis Cluster shares the work of one owner's calls: each owner's ListTasks index and the
//! retention set are in pieces spread over the nodes (`keys.rs`, "Shards"), so no node does
//! every call's index and retention work. Counted in commands (Redis's own `commandstats`),
//! which, unlike CPU time, a busy CI machine cannot blur.
use std::collections::BTreeSet;

use a2a_server::proto::TaskState;
use a2a_server::task::store::redis::Timeouts;
use a2a_server::task::store::{RedisOptions, RedisStore, Retention, StoreUrl, TaskQuery, TaskStore};
use bytes::Bytes;

use super::redis_server::RedisCluster;
use super::suite::{owner, task};
use super::{redis_store_in, write};

/// Commands each node has run so far, from `INFO commandstats`.
async fn commands_per_node(cluster: &RedisCluster) -> Vec<u64> {
    let mut counts = Vec::new();
    for node in &cluster.nodes {
        let client = redis::Client::open(node.url()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let info: String = redis::cmd("INFO").arg("commandstats").query_async(&mut conn).await.unwrap();
        let calls = info
            .lines()
            .filter(|line| line.starts_with("cmdstat_") && !line.starts_with("cmdstat_info:"))
            .filter_map(|line| line.split("calls=").nth(1)?.split(',').next()?.parse::<u64>().ok());
        counts.push(calls.sum());
    }
    counts
}

/// Each node's share of the commands of one owner's calls (1.0: the mean), with the owner's
/// index and the retention set in `shards` pieces (`None`: the store's default).
async fn spread_of(shards: Option<usize>) -> Vec<f64> {
    let Some(cluster) = RedisCluster::start() else { return Vec::new() };
    let store = redis_store_in(&cluster.url(), Retention::default(), Timeouts::default(), shards).await;
    let alice = owner("alice");
    let before = commands_per_node(&cluster).await;
    const TASKS: usize = 900;
    for i in 0..TASKS {
        let done = task(&format!("t{i:04}"), &format!("c{}", i % 7), TaskState::Completed, i as i64);
        // Half by the script, half by the born-finished `MULTI`s.
        write(&store, &done, Bytes::from_static(b"e"), i as i64).await;
    }
    let after = commands_per_node(&cluster).await;
    let done: Vec<f64> = after.iter().zip(&before).map(|(a, b)| (a - b) as f64).collect();
    let mean = done.iter().sum::<f64>() / done.len() as f64;

    // Whatever the pieces, the owner's tasks list whole, newest first, page by page.
    let mut query = TaskQuery { page_size: 100, ..TaskQuery::default() };
    let mut seen = Vec::new();
    loop {
        let page = store.list(&alice, &query).await.unwrap();
        assert_eq!(page.total, TASKS);
        seen.extend(page.tasks.iter().map(|t| t.id.clone()));
        match page.next {
            Some(next) => query.after = Some(next),
            None => break,
        }
    }
    let newest_first: Vec<String> = (0..TASKS).rev().map(|i| format!("t{i:04}")).collect();
    assert_eq!(seen, newest_first);
    let context = TaskQuery { page_size: 200, context_id: Some("c3".into()), ..TaskQuery::default() };
    let listed: BTreeSet<String> =
        store.list(&alice, &context).await.unwrap().tasks.into_iter().map(|t| t.id.clone()).collect();
    assert_eq!(listed, (0..TASKS).filter(|i| i % 7 == 3).map(|i| format!("t{i:04}")).collect());

    done.iter().map(|n| n / mean).collect()
}

#[tokio::test]
async fn one_owners_calls_spread_evenly_over_a_cluster() {
    let shares = spread_of(None).await;
    eprintln!("commands per node / mean, in pieces: {shares:?}");
    for share in &shares {
        assert!((0.75..=1.25).contains(share), "each node within ±25 % of the mean: {shares:?}");
    }
    // What the pieces are for: in one piece, the same calls load one node far more.
    let whole = spread_of(Some(1)).await;
    eprintln!("commands per node / mean, in one piece: {whole:?}");
    assert!(whole.iter().any(|share| !(0.75..=1.25).contains(share)), "one piece: {whole:?}");
}

/// Retention in pieces still lets the fleet's oldest go first, exactly: whatever piece they sit
/// in, the evicted tasks are the first written, the kept ones the last. A replica with a roomy
/// limit writes them; one with a tight limit then evicts many rounds' worth at once, so each
/// round must find the oldest 32 among pieces that hold them unevenly.
async fn oldest_go_first_in_pieces(url: &str, shards: Option<usize>) {
    let StoreUrl::Redis(target) = StoreUrl::parse(url).unwrap() else { panic!("{url} is not Redis") };
    let prefix = format!("oldest-{}-{shards:?}", std::process::id());
    let connect = |max_finished| {
        let retention = Retention { max_finished, ..Retention::default() };
        let options = RedisOptions {
            prefix: prefix.clone(),
            retention,
            timeouts: Timeouts::default(),
            shards,
            ..RedisOptions::default()
        };
        RedisStore::connect(target.clone(), options)
    };
    let (writer, reader) = (connect(100_000).await.unwrap(), connect(64).await.unwrap());
    let alice = owner("alice");
    const TASKS: usize = 300;
    for i in 0..TASKS {
        let done = task(&format!("t{i:04}"), "c", TaskState::Completed, i as i64);
        write(&writer, &done, Bytes::from_static(b"e"), i as i64).await;
        // Apart in time, so the finish order is the write order.
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    // A read runs rounds first: the count is back under the limit.
    let query = TaskQuery { page_size: 100, ..TaskQuery::default() };
    let page = reader.list(&alice, &query).await.unwrap();
    assert!((63..=64).contains(&page.total), "{} kept", page.total);
    let mut kept = Vec::new();
    for i in 0..TASKS {
        kept.push(reader.get(&alice, &format!("t{i:04}")).await.unwrap().is_some());
    }
    let first_kept = kept.iter().position(|k| *k).unwrap();
    assert!(kept[first_kept..].iter().all(|k| *k), "evicted: a prefix of the write order: {kept:?}");
    assert_eq!(TASKS - first_kept, page.total);
}

#[tokio::test]
async fn the_oldest_go_first_in_pieces_on_a_node() {
    let Some(server) = super::redis_server::RedisServer::start() else { return };
    oldest_go_first_in_pieces(&server.url(), Some(8)).await;
}

#[tokio::test]
async fn the_oldest_go_first_in_pieces_on_a_cluster() {
    let Some(cluster) = RedisCluster::start() else { return };
    oldest_go_first_in_pieces(&cluster.url(), None).await;
}
