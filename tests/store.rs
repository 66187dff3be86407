//! The task stores: one suite over the memory store, Redis and a Redis Cluster, then the fleet
//! primitives only Redis has (append, exact join, trimming, blocking reads, leases, outages).
#[path = "store/cluster.rs"]
mod cluster;
#[path = "store/group_commit.rs"]
mod group_commit;
#[path = "store/pipelined.rs"]
mod pipelined;
#[path = "common/redis.rs"]
mod redis_server;
#[path = "store/replicated.rs"]
mod replicated;
#[path = "store/retention.rs"]
mod retention;
#[path = "store/snapshot.rs"]
mod snapshot;
#[path = "store/suite.rs"]
mod suite;
#[path = "store/webhook_expiry.rs"]
mod webhook_expiry;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use a2a_server::fleet::{FleetSettings, RedisFleet};
use a2a_server::proto::{Task, TaskState};
use a2a_server::task::fleet::{Fleet, WriteHints};
use a2a_server::task::store::redis::{EventBatch, Fenced, StreamBounds, Timeouts};
use a2a_server::task::store::{
    MemoryStore, RedisOptions, RedisStore, Retention, StoreUrl, TaskQuery, TaskStore,
};
use bytes::Bytes;
use prost::Message;
use redis_server::{RedisCluster, RedisServer};
use suite::{owner, task};

/// Every call here must end well within this, answer or error: nothing may hang.
const BOUND: Duration = Duration::from_secs(10);

/// A store on `url` under a prefix no other test uses.
async fn redis_store(url: &str, retention: Retention, timeouts: Timeouts) -> RedisStore {
    redis_store_in(url, retention, timeouts, None).await
}

/// [`redis_store`] with its owners' indexes and retention set in `shards` pieces.
async fn redis_store_in(
    url: &str,
    retention: Retention,
    timeouts: Timeouts,
    shards: Option<usize>,
) -> RedisStore {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let StoreUrl::Redis(target) = StoreUrl::parse(url).unwrap() else { panic!("{url} is not Redis") };
    let prefix = format!("test{}", NEXT.fetch_add(1, Ordering::Relaxed));
    RedisStore::connect(
        target,
        RedisOptions { prefix, retention, timeouts, shards, ..RedisOptions::default() },
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn suite_on_memory() {
    let make = |retention| async move { Arc::new(MemoryStore::new(retention)) as Arc<dyn TaskStore> };
    suite::run(make).await;
    suite::run_memory_only(make).await;
}

#[tokio::test]
async fn suite_on_redis() {
    let Some(server) = RedisServer::start() else { return };
    suite_on(server.url()).await;
}

#[tokio::test]
async fn suite_on_redis_cluster() {
    let Some(cluster) = RedisCluster::start() else { return };
    suite_on(cluster.url()).await;
}

/// Indexes and retention in pieces on a single node: what a cluster does (the merge of the
/// pieces' pages, the exact fleet-wide limits), with every write path a node has.
#[tokio::test]
async fn suite_on_redis_in_pieces() {
    let Some(server) = RedisServer::start() else { return };
    suite_in(server.url(), Some(5)).await;
}

async fn suite_on(url: String) {
    suite_in(url, None).await;
}

async fn suite_in(url: String, shards: Option<usize>) {
    suite::run(|retention| {
        let url = url.clone();
        async move {
            Arc::new(redis_store_in(&url, retention, Timeouts::default(), shards).await) as Arc<dyn TaskStore>
        }
    })
    .await;
}

/// The task after `seq` events: its history length says which event it includes.
fn task_at(seq: u64) -> Task {
    let mut task = Task::clone(&task("t", "c", TaskState::Working, seq as i64));
    task.history = vec![Default::default(); seq as usize];
    task
}

const BOUNDS: StreamBounds = StreamBounds { max_events: 10_000 };

/// A writer appends 300 events while readers join at random moments: each gets a snapshot at
/// some S and then exactly S+1..=300 from the stream, no gap, no duplicate.
async fn exact_join(store: Arc<RedisStore>) {
    let alice = owner("alice");
    const LAST: u64 = 300;
    let writer = {
        let (store, alice) = (store.clone(), alice.clone());
        tokio::spawn(async move {
            for seq in 1..=LAST {
                let event = Bytes::from(format!("event {seq}"));
                store.append(&alice, &task_at(seq), seq, event, BOUNDS, None).await.unwrap().unwrap();
            }
        })
    };
    let mut readers = Vec::new();
    for delay in [0u64, 1, 3, 7, 15] {
        let (store, alice) = (store.clone(), alice.clone());
        readers.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            let (snapshot, at) = loop {
                if let Some(found) = store.snapshot(&alice, "t").await.unwrap() {
                    break found;
                }
                tokio::task::yield_now().await;
            };
            assert_eq!(snapshot.history.len() as u64, at, "the snapshot includes exactly its seq");
            let mut last = at;
            while last < LAST {
                let read = store.read_events("t", last, Some(Duration::from_secs(5)), 50).await.unwrap();
                let EventBatch::Events(events) = read else { panic!("trimmed: {read:?}") };
                for (seq, payload) in events {
                    assert_eq!(seq, last + 1, "no gap, no duplicate");
                    assert_eq!(payload, Bytes::from(format!("event {seq}")));
                    last = seq;
                }
            }
            at
        }));
    }
    writer.await.unwrap();
    for reader in readers {
        tokio::time::timeout(BOUND, reader).await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn append_then_snapshot_and_events_join_exactly() {
    let Some(server) = RedisServer::start() else { return };
    exact_join(Arc::new(redis_store(&server.url(), Retention::default(), Timeouts::default()).await)).await;
}

#[tokio::test]
async fn append_then_snapshot_and_events_join_exactly_on_a_cluster() {
    let Some(cluster) = RedisCluster::start() else { return };
    exact_join(Arc::new(redis_store(&cluster.url(), Retention::default(), Timeouts::default()).await)).await;
}

#[tokio::test]
async fn append_is_fenced_by_seq_and_lease() {
    let Some(server) = RedisServer::start() else { return };
    let store = redis_store(&server.url(), Retention::default(), Timeouts::default()).await;
    let alice = owner("alice");
    let event = || Bytes::from_static(b"e");
    assert_eq!(store.append(&alice, &task_at(1), 1, event(), BOUNDS, None).await.unwrap(), Ok(()));
    let again = store.append(&alice, &task_at(1), 1, event(), BOUNDS, None).await.unwrap();
    assert_eq!(again, Err(Fenced::Seq { stored: 1 }), "a retried append is refused");
    let skipping = store.append(&alice, &task_at(3), 3, event(), BOUNDS, None).await.unwrap();
    assert_eq!(skipping, Err(Fenced::Seq { stored: 1 }), "a stale writer is refused");
    let stranger = store.append(&owner("bob"), &task_at(2), 2, event(), BOUNDS, None).await.unwrap();
    assert_eq!(stranger, Err(Fenced::Owner));

    assert!(store.acquire_lease("t", "replica-a", Duration::from_secs(10)).await.unwrap());
    let not_ours = store.append(&alice, &task_at(2), 2, event(), BOUNDS, Some("replica-b")).await.unwrap();
    assert_eq!(not_ours, Err(Fenced::Lease { holder: Some("replica-a".into()) }));
    assert_eq!(
        store.append(&alice, &task_at(2), 2, event(), BOUNDS, Some("replica-a")).await.unwrap(),
        Ok(())
    );
    let (snapshot, seq) = store.snapshot(&alice, "t").await.unwrap().unwrap();
    assert_eq!((snapshot.history.len(), seq), (2, 2), "refused appends left nothing behind");
    assert!(store.snapshot(&owner("bob"), "t").await.unwrap().is_none());
}

#[tokio::test]
async fn a_finished_task_takes_no_more_events() {
    let Some(server) = RedisServer::start() else { return };
    let store = redis_store(&server.url(), Retention::default(), Timeouts::default()).await;
    let alice = owner("alice");
    let mut failed = task_at(1);
    failed.status.get_or_insert_default().state = TaskState::Failed as i32;
    assert_eq!(
        store.append(&alice, &failed, 1, Bytes::from_static(b"end"), BOUNDS, None).await.unwrap(),
        Ok(())
    );
    // A writer that lost the task to the survivor that failed it, at the next seq.
    let late = store.append(&alice, &task_at(2), 2, Bytes::from_static(b"late"), BOUNDS, None).await.unwrap();
    assert_eq!(late, Err(Fenced::Finished));
    // An owner that stalled past its lease retries the event the survivor's end took the seq
    // of: finished, not "your write landed" (it would show its own event as stored).
    let stalled =
        store.append(&alice, &task_at(1), 1, Bytes::from_static(b"mine"), BOUNDS, None).await.unwrap();
    assert_eq!(stalled, Err(Fenced::Finished));
    let mut other_end = failed.clone();
    other_end.status.get_or_insert_default().state = TaskState::Completed as i32;
    let ending =
        store.append(&alice, &other_end, 1, Bytes::from_static(b"mine"), BOUNDS, None).await.unwrap();
    assert_eq!(ending, Err(Fenced::Finished), "another end than the stored one is not its own");
    // The writer's own end, landed with its reply lost, is its own: the seq says so.
    let own = store.append(&alice, &failed, 1, Bytes::from_static(b"end"), BOUNDS, None).await.unwrap();
    assert_eq!(own, Err(Fenced::Seq { stored: 1 }));
    let (snapshot, seq) = store.snapshot(&alice, "t").await.unwrap().unwrap();
    assert_eq!(
        (TaskState::try_from(snapshot.status.as_ref().unwrap().state), seq),
        (Ok(TaskState::Failed), 1)
    );
}

#[tokio::test]
async fn the_fleet_writes_the_rest_of_a_batch_that_landed_in_part() {
    let Some(server) = RedisServer::start() else { return };
    let store = Arc::new(redis_store(&server.url(), Retention::default(), Timeouts::default()).await);
    let fleet = RedisFleet::new(store.clone(), FleetSettings::new("r".into(), Duration::from_secs(10)));
    let alice = owner("alice");
    let events =
        |seqs: std::ops::RangeInclusive<u64>| seqs.map(|s| Bytes::from(format!("event {s}"))).collect();
    assert!(fleet.append(&alice, &task_at(3), 1, events(1..=3), hints(true)).await.unwrap());
    // Its reply was lost, and the retry carries the events that came meanwhile.
    assert!(fleet.append(&alice, &task_at(5), 1, events(1..=5), hints(false)).await.unwrap(), "not fenced");
    let (_, seq) = store.snapshot(&alice, "t").await.unwrap().unwrap();
    assert_eq!(seq, 5);
    let EventBatch::Events(stored) = store.read_events("t", 0, None, 100).await.unwrap() else {
        panic!("trimmed")
    };
    let expected: Vec<(u64, Bytes)> = (1..=5).map(|s| (s, Bytes::from(format!("event {s}")))).collect();
    assert_eq!(stored, expected, "each event once, in order");
}

#[tokio::test]
async fn a_reader_behind_the_trimmed_stream_is_told_to_restart() {
    let Some(server) = RedisServer::start() else { return };
    let store = redis_store(&server.url(), Retention::default(), Timeouts::default()).await;
    let alice = owner("alice");
    let small = StreamBounds { max_events: 10 };
    for seq in 1..=500 {
        store
            .append(&alice, &task_at(seq), seq, Bytes::from_static(b"e"), small, None)
            .await
            .unwrap()
            .unwrap();
    }
    let EventBatch::Trimmed { first_seq } = store.read_events("t", 0, None, 10).await.unwrap() else {
        panic!("the stream was not trimmed")
    };
    assert!(first_seq > 1 && first_seq <= 491, "first_seq {first_seq}");
    let EventBatch::Events(tail) = store.read_events("t", 495, None, 100).await.unwrap() else { panic!() };
    assert_eq!(tail.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), [496, 497, 498, 499, 500]);
    let EventBatch::Events(none) = store.read_events("t", 500, None, 100).await.unwrap() else { panic!() };
    assert!(none.is_empty());
}

#[tokio::test]
async fn a_blocked_read_wakes_on_append() {
    let Some(server) = RedisServer::start() else { return };
    let store = Arc::new(redis_store(&server.url(), Retention::default(), Timeouts::default()).await);
    let alice = owner("alice");
    store.append(&alice, &task_at(1), 1, Bytes::from_static(b"one"), BOUNDS, None).await.unwrap().unwrap();
    // Nothing new: the read returns empty after its block time.
    let started = Instant::now();
    let idle = store.read_events("t", 1, Some(Duration::from_millis(200)), 10).await.unwrap();
    assert_eq!(idle, EventBatch::Events(vec![]));
    assert!(started.elapsed() >= Duration::from_millis(190));
    // Several blocked readers at once (each on its own connection), woken by one append.
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                let read = store.read_events("t", 1, Some(Duration::from_secs(30)), 10).await.unwrap();
                (read, started.elapsed())
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    store.append(&alice, &task_at(2), 2, Bytes::from_static(b"two"), BOUNDS, None).await.unwrap().unwrap();
    for reader in readers {
        let (read, waited) = tokio::time::timeout(BOUND, reader).await.unwrap().unwrap();
        assert_eq!(read, EventBatch::Events(vec![(2, Bytes::from_static(b"two"))]));
        assert!(waited < Duration::from_secs(5), "woken by the append, not the 30 s block: {waited:?}");
    }
}

#[tokio::test]
async fn leases_are_exclusive_renewable_releasable_and_expire() {
    let Some(server) = RedisServer::start() else { return };
    let store = redis_store(&server.url(), Retention::default(), Timeouts::default()).await;
    let ttl = Duration::from_secs(10);
    assert!(store.acquire_lease("t", "a", ttl).await.unwrap());
    assert!(store.acquire_lease("t", "a", ttl).await.unwrap(), "re-acquiring one's own lease extends it");
    assert!(!store.acquire_lease("t", "b", ttl).await.unwrap());
    assert_eq!(store.lease_owner("t").await.unwrap().as_deref(), Some("a"));
    assert!(!store.renew_lease("t", "b", ttl).await.unwrap());
    assert!(store.renew_lease("t", "a", ttl).await.unwrap());
    assert!(!store.release_lease("t", "b").await.unwrap());
    assert!(store.release_lease("t", "a").await.unwrap());
    assert_eq!(store.lease_owner("t").await.unwrap(), None);
    assert!(!store.renew_lease("t", "a", ttl).await.unwrap(), "a released lease cannot be renewed");

    assert!(store.acquire_lease("t", "a", Duration::from_millis(200)).await.unwrap());
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(store.lease_owner("t").await.unwrap(), None, "an unrenewed lease expires");
    assert!(store.acquire_lease("t", "b", ttl).await.unwrap());
    assert!(!store.renew_lease("t", "a", ttl).await.unwrap(), "the old owner learns it lost the lease");
}

#[tokio::test]
async fn redis_down_is_unavailable_and_recovers_after_restart() {
    let Some(mut server) = RedisServer::start() else { return };
    let timeouts = Timeouts { connect: Duration::from_millis(500), command: Duration::from_millis(500) };
    let store = redis_store(&server.url(), Retention::default(), timeouts).await;
    let alice = owner("alice");
    store.save(&alice, task("t", "c", TaskState::Working, 1)).await.unwrap();

    server.stop();
    let started = Instant::now();
    let error = tokio::time::timeout(BOUND, store.get(&alice, "t")).await.expect("no hang").unwrap_err();
    assert_eq!(error.reason(), "UNAVAILABLE");
    assert!(error.to_string().contains(&format!("127.0.0.1:{}", server.port)), "{error}");
    let blocked =
        tokio::time::timeout(BOUND, store.read_events("t", 0, Some(Duration::from_millis(100)), 1)).await;
    assert_eq!(blocked.expect("no hang").unwrap_err().reason(), "UNAVAILABLE");
    let listed = tokio::time::timeout(BOUND, store.list(&alice, &Default::default())).await;
    assert_eq!(listed.expect("no hang").unwrap_err().reason(), "UNAVAILABLE");
    assert!(started.elapsed() < BOUND);

    server.restart();
    let deadline = Instant::now() + BOUND;
    loop {
        match tokio::time::timeout(BOUND, store.save(&alice, task("t2", "c", TaskState::Working, 2))).await {
            Ok(Ok(())) => break,
            _ if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(100)).await,
            other => panic!("no recovery after the restart: {other:?}"),
        }
    }
    assert!(store.get(&alice, "t2").await.unwrap().is_some());
    assert!(store.get(&alice, "t").await.unwrap().is_none(), "persistence is off: the old task is gone");
}

#[tokio::test]
async fn connect_fails_fast_naming_the_address() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let started = Instant::now();
    let error = a2a_server::task::store::redis::connect(&format!("redis://127.0.0.1:{port}"), "a2a")
        .await
        .err()
        .expect("nothing listens there");
    assert!(error.contains(&format!("127.0.0.1:{port}")), "{error}");
    assert!(started.elapsed() < BOUND);
    let bad = a2a_server::task::store::redis::connect("redis://127.0.0.1:1", "a{b}").await.err().unwrap();
    assert!(bad.contains("prefix"), "{bad}");
}

/// Waits (within [`BOUND`]) until `owner`'s task `id` is gone: the evictor runs in the
/// background, woken by the write that went over a limit.
async fn evicted_soon(store: &RedisStore, owner: &a2a_server::call::Owner, id: &str, why: &str) {
    let started = Instant::now();
    while store.get(owner, id).await.unwrap().is_some() {
        assert!(started.elapsed() < BOUND, "{why}: {id} is still kept");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The owner's write paths (the script, slot by slot on a cluster, and on a node the
/// born-finished `MULTI`) keep retention: each write over a limit has the evictor take the
/// oldest out within moments, in batches that stop 1/64 below the limit; by bytes likewise;
/// the evicted tasks leave the index with their keys.
async fn retention_on_the_write_path(url: &str) {
    let alice = owner("alice");
    let query = TaskQuery { page_size: 100, ..TaskQuery::default() };
    // By count: 128 kept, 2 (1/64) below that after each batch.
    let store =
        redis_store(url, Retention { max_finished: 128, ..Retention::default() }, Timeouts::default()).await;
    for i in 0..300 {
        let done = task(&format!("t{i:03}"), "c", TaskState::Completed, i);
        write(&store, &done, Bytes::from_static(b"e"), i).await;
        // Only reads that evict nothing (GetTask), so the write path alone keeps the bound.
        if i >= 128 {
            evicted_soon(&store, &alice, &format!("t{:03}", i - 128), &format!("after task {i}, over 128"))
                .await;
        }
    }
    assert!(
        store.get(&alice, "t174").await.unwrap().is_some(),
        "a batch evicts no more than 1/64 below the limit"
    );
    let total = store.list(&alice, &query).await.unwrap().total;
    assert!((126..=128).contains(&total), "the index holds {total}: evicted tasks left it");

    // By bytes: each task holds its encoding plus its event; room for about ten.
    let big = |i: i64| {
        let mut done = Task::clone(&task(&format!("b{i:03}"), "c", TaskState::Completed, i));
        done.metadata = Some(pbjson_types::Struct {
            fields: [("pad".to_owned(), pbjson_types::Value::from("x".repeat(1000)))].into(),
        });
        done
    };
    let size = big(0).encoded_len() + 1000;
    let retention = Retention { max_bytes: 10 * size, ..Retention::default() };
    let store = redis_store(url, retention, Timeouts::default()).await;
    for i in 0..40 {
        let event = Bytes::from(vec![b'e'; 1000]);
        write(&store, &big(i), event, i).await;
        if i >= 10 {
            evicted_soon(
                &store,
                &alice,
                &format!("b{:03}", i - 10),
                &format!("after task {i}, over the bytes"),
            )
            .await;
        }
    }
    assert!(store.get(&alice, "b039").await.unwrap().is_some());
    assert!(store.get(&alice, "b000").await.unwrap().is_none());
}

/// A reindexing write's hints: a first try or a retry; its events watched.
fn hints(first_try: bool) -> WriteHints {
    WriteHints { reindex: true, first_try, unwatched: false, task_may_lag: false }
}

#[tokio::test]
async fn a_born_finished_task_nobody_watched_is_stored_without_its_events() {
    let Some(server) = RedisServer::start() else { return };
    let store = Arc::new(redis_store(&server.url(), Retention::default(), Timeouts::default()).await);
    let fleet = RedisFleet::new(store.clone(), FleetSettings::new("r".into(), Duration::from_secs(10)));
    let alice = owner("alice");
    let done = task("quiet", "ctx", TaskState::Completed, 7);
    let events = vec![Bytes::from_static(b"working"), Bytes::from_static(b"completed")];
    let unwatched = WriteHints { unwatched: true, ..hints(true) };
    assert!(fleet.append(&alice, &done, 2, events.clone(), unwatched).await.unwrap());
    let (_, seq) = store.snapshot(&alice, "quiet").await.unwrap().unwrap();
    assert_eq!(seq, 3, "the Task says how far it went");
    // No stream: a resume from before the end finds nothing after it and gets the Task first.
    assert_eq!(store.read_events("quiet", 1, None, 10).await.unwrap(), EventBatch::Events(vec![]));
    // A retry (its reply lost) is fenced by the seq, and writes no event either.
    assert!(
        fleet.append(&alice, &done, 2, events, WriteHints { first_try: false, ..unwatched }).await.unwrap()
    );
    assert_eq!(store.read_events("quiet", 1, None, 10).await.unwrap(), EventBatch::Events(vec![]));
    let page = store.list(&alice, &TaskQuery { page_size: 10, ..TaskQuery::default() }).await.unwrap();
    assert_eq!(page.tasks.len(), 1, "indexed");
}

/// A context a task opened bears that task's id and gets no index of its own from the
/// born-finished write; ListTasks of that context still finds the task, merged in order with
/// the context's later tasks, with totals, pages, cursors and filters as for any context.
async fn a_context_of_one_task_lists_without_its_own_index(url: &str) {
    let store = redis_store(url, Retention::default(), Timeouts::default()).await;
    let alice = owner("alice");
    let by_context =
        |page_size: usize| TaskQuery { page_size, context_id: Some("first".into()), ..TaskQuery::default() };
    let ids = |page: &a2a_server::task::store::TaskPage| {
        page.tasks.iter().map(|t| t.id.clone()).collect::<Vec<_>>()
    };
    // The opener, finished by its first write (the MULTI on a node), at 10 s.
    write(&store, &task("first", "first", TaskState::Completed, 10), Bytes::from_static(b"e"), 1).await;
    let page = store.list(&alice, &by_context(10)).await.unwrap();
    assert_eq!((ids(&page), page.total), (vec!["first".to_owned()], 1));
    // Two more tasks join the context, one older (5 s) and one newer (20 s) than the opener.
    for (id, secs) in [("older", 5), ("newer", 20)] {
        store
            .append(
                &alice,
                &task(id, "first", TaskState::Completed, secs),
                2,
                Bytes::from_static(b"e"),
                BOUNDS,
                None,
            )
            .await
            .unwrap()
            .unwrap();
    }
    store.save(&alice, task("elsewhere", "other", TaskState::Completed, 15)).await.unwrap();
    let page = store.list(&alice, &by_context(10)).await.unwrap();
    assert_eq!(
        (ids(&page), page.total),
        (vec!["newer".into(), "first".into(), "older".into()], 3),
        "newest first"
    );
    // Page by page: the opener sits between the others, cursors included.
    let mut seen = Vec::new();
    let mut query = by_context(1);
    loop {
        let page = store.list(&alice, &query).await.unwrap();
        assert_eq!(page.total, 3, "every page counts the opener");
        seen.extend(ids(&page));
        match page.next {
            Some(next) => query.after = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, ["newer", "first", "older"]);
    // Filters apply to it too.
    let working = TaskQuery { state: Some(TaskState::Working), ..by_context(10) };
    assert_eq!(store.list(&alice, &working).await.unwrap().total, 0);
    let completed = TaskQuery { state: Some(TaskState::Completed), ..by_context(10) };
    assert_eq!(ids(&store.list(&alice, &completed).await.unwrap()), ["newer", "first", "older"]);
    let since = TaskQuery {
        status_after: Some(pbjson_types::Timestamp { seconds: 1_700_000_012, nanos: 0 }),
        ..by_context(10)
    };
    assert_eq!(ids(&store.list(&alice, &since).await.unwrap()), ["newer"], "status_after bounds it");
    let other = TaskQuery { context_id: Some("other".into()), ..by_context(10) };
    assert_eq!(ids(&store.list(&alice, &other).await.unwrap()), ["elsewhere"], "never in another context");
    assert_eq!(store.list(&owner("bob"), &by_context(10)).await.unwrap().total, 0, "nor another owner's");
}

#[tokio::test]
async fn a_context_of_one_task_lists_without_its_own_index_on_a_node() {
    let Some(server) = RedisServer::start() else { return };
    a_context_of_one_task_lists_without_its_own_index(&server.url()).await;
}

#[tokio::test]
async fn a_context_of_one_task_lists_without_its_own_index_on_a_cluster() {
    let Some(cluster) = RedisCluster::start() else { return };
    a_context_of_one_task_lists_without_its_own_index(&cluster.url()).await;
}

/// A finished task's first write, by the script or (odd `i`, on a node) the born-finished
/// `MULTI`.
async fn write(store: &RedisStore, done: &Task, event: Bytes, i: i64) {
    let alice = owner("alice");
    if i % 2 == 1 {
        // Some without their events (nobody watched), where the bytes allow.
        let unwatched = i % 4 == 1 && event.len() < 10;
        store.write_born_finished(&alice, done, 2, &[event], BOUNDS, unwatched).await.unwrap();
    } else {
        store.append(&alice, done, 2, event, BOUNDS, None).await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn a_born_finished_task_is_one_step_and_a_retry_of_it_counts_once() {
    let Some(server) = RedisServer::start() else { return };
    let store = Arc::new(redis_store(&server.url(), Retention::default(), Timeouts::default()).await);
    let fleet = RedisFleet::new(store.clone(), FleetSettings::new("r".into(), Duration::from_secs(10)));
    let alice = owner("alice");
    let done = task("born", "ctx", TaskState::Completed, 7);
    let events = vec![Bytes::from_static(b"working"), Bytes::from_static(b"completed")];
    assert!(fleet.append(&alice, &done, 2, events.clone(), hints(true)).await.unwrap());
    // Its reply was lost: the retry goes through the fenced script, which finds it written.
    assert!(fleet.append(&alice, &done, 2, events, hints(false)).await.unwrap());

    let (stored, seq) = store.snapshot(&alice, "born").await.unwrap().unwrap();
    assert_eq!((stored.id.as_str(), seq), ("born", 3), "the Task and its seq in one hash");
    let EventBatch::Events(stored) = store.read_events("born", 1, None, 10).await.unwrap() else {
        panic!("trimmed")
    };
    assert_eq!(stored.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), [2, 3], "events numbered from 2");
    let page = store.list(&alice, &TaskQuery { page_size: 10, ..TaskQuery::default() }).await.unwrap();
    assert_eq!(page.tasks.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(), ["born"], "indexed");
    let by_context = TaskQuery { page_size: 10, context_id: Some("ctx".into()), ..TaskQuery::default() };
    assert_eq!(store.list(&alice, &by_context).await.unwrap().tasks.len(), 1, "in its context's index");
    let by_state = TaskQuery { page_size: 10, state: Some(TaskState::Completed), ..TaskQuery::default() };
    assert_eq!(store.list(&alice, &by_state).await.unwrap().tasks.len(), 1, "its state noted");

    // Retention noted it once: the bytes are the task's and its events', not twice that.
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*finished*").query_async(&mut conn).await.unwrap();
    let sizes = keys.iter().find(|k| k.ends_with(":sizes")).expect("the sizes hash");
    let total: u64 = redis::cmd("HGET").arg(sizes).arg("#").query_async(&mut conn).await.unwrap();
    assert_eq!(total, (done.encoded_len() + "working".len() + "completed".len()) as u64);
    let task_keys: Vec<String> = redis::cmd("KEYS").arg("*{born}:task").query_async(&mut conn).await.unwrap();
    let ttl: i64 = redis::cmd("PTTL").arg(&task_keys[0]).query_async(&mut conn).await.unwrap();
    assert_eq!(ttl, -1, "on a single node retention, not a per-call PEXPIRE, bounds the keys");
}

#[tokio::test]
async fn a_born_finished_task_without_a_ttl_still_goes_at_the_retention_age() {
    let Some(server) = RedisServer::start() else { return };
    let age = Retention { max_age: Duration::from_millis(400), ..Retention::default() };
    let store = Arc::new(redis_store(&server.url(), age, Timeouts::default()).await);
    let alice = owner("alice");
    let done = task("aged", "ctx", TaskState::Completed, 7);
    let events = [Bytes::from_static(b"working"), Bytes::from_static(b"completed")];
    store.write_born_finished(&alice, &done, 2, &events, BOUNDS, false).await.unwrap();
    assert!(store.get(&alice, "aged").await.unwrap().is_some(), "stored");

    tokio::time::sleep(Duration::from_millis(700)).await;
    // No TTL took it, and the evictor's age tick has not come yet: GetTask goes by `fin`.
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys = |conn: &mut redis::aio::MultiplexedConnection| {
        let mut conn = conn.clone();
        async move { redis::cmd("KEYS").arg("*{aged}*").query_async::<Vec<String>>(&mut conn).await.unwrap() }
    };
    assert_eq!(keys(&mut conn).await.len(), 2, "task and events still in Redis, with no TTL");
    assert!(store.get(&alice, "aged").await.unwrap().is_none(), "past the age, GetTask finds it gone");
    // ListTasks runs an eviction round first, which takes its keys with it.
    let page = store.list(&alice, &TaskQuery { page_size: 10, ..TaskQuery::default() }).await.unwrap();
    assert!(page.tasks.is_empty(), "past the age, ListTasks does not show it");
    assert!(keys(&mut conn).await.is_empty(), "the evictor unlinked its keys");
}

#[tokio::test]
async fn retention_holds_on_the_owners_write_path() {
    let Some(server) = RedisServer::start() else { return };
    retention_on_the_write_path(&server.url()).await;
}

#[tokio::test]
async fn retention_holds_on_the_owners_write_path_on_a_cluster() {
    let Some(cluster) = RedisCluster::start() else { return };
    retention_on_the_write_path(&cluster.url()).await;
}

#[test]
fn retention_flags_reach_the_store() {
    use a2a_server::config::Config;
    use a2a_server::task::store::memory::DEFAULT_MAX_BYTES;
    use clap::Parser as _;
    let parse = |args: &[&str]| Config::try_parse_from([&["a2a-server"], args].concat()).unwrap().retention();
    assert_eq!(parse(&[]).max_bytes, DEFAULT_MAX_BYTES);
    assert_eq!(DEFAULT_MAX_BYTES, 256 << 20);
    let retention = parse(&["--task-retention-bytes", "1048576", "--task-retention-count", "7"]);
    assert_eq!((retention.max_bytes, retention.max_finished), (1 << 20, 7));
    assert!(Config::try_parse_from(["a2a-server", "--task-retention-bytes", "lots"]).is_err());
}
