//! Replicated acknowledgements (`--redis-wait-replicas`) and Sentinel failover, on real
//! `redis-server` processes: a primary with a replica, and a primary with two replicas under
//! three Sentinels.
use std::time::{Duration, Instant};

use a2a_server::proto::TaskState;
use a2a_server::task::store::redis::{Timeouts, WaitFor};
use a2a_server::task::store::{RedisOptions, RedisStore, StoreUrl, TaskStore};

use super::BOUND;
use super::redis_server::{RedisCluster, RedisSentinels, RedisServer};
use super::suite::{owner, task};

/// How long a WAIT round may take here: short, so a missing replica shows within a second.
const WAIT: Duration = Duration::from_millis(300);

async fn store_waiting_for(url: &str, replicas: u32) -> Result<RedisStore, String> {
    let StoreUrl::Redis(target) = StoreUrl::parse(url).unwrap() else { panic!("{url} is not Redis") };
    let timeouts = Timeouts { connect: Duration::from_millis(500), command: Duration::from_millis(500) };
    let options = RedisOptions {
        prefix: format!("replicated{}", uuid::Uuid::new_v4().simple()),
        timeouts,
        wait: WaitFor { replicas, timeout: WAIT },
        ..RedisOptions::default()
    };
    RedisStore::connect(target, options).await
}

#[tokio::test]
async fn an_answer_waits_for_the_replica_and_fails_without_it() {
    let Some(primary) = RedisServer::start() else { return };
    let replica = RedisServer::start_replica_of(primary.port).expect("redis-server");
    let store = store_waiting_for(&primary.url(), 1).await.unwrap();
    let alice = owner("alice");
    // The replica may still be syncing: the first write waits for it (or fails, then succeeds).
    let deadline = Instant::now() + BOUND;
    while store.save(&alice, task("t1", "c", TaskState::Working, 1)).await.is_err() {
        assert!(Instant::now() < deadline, "the replica never acknowledged");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(store.get(&alice, "t1").await.unwrap().is_some());

    replica.pause(true);
    let started = Instant::now();
    let error = tokio::time::timeout(BOUND, store.save(&alice, task("t2", "c", TaskState::Working, 2)))
        .await
        .expect("no hang")
        .unwrap_err();
    assert_eq!(error.reason(), "UNAVAILABLE", "{error}");
    assert!(error.to_string().contains("did not confirm"), "{error}");
    assert!(started.elapsed() < WAIT * 2 + Duration::from_secs(2), "took {:?}", started.elapsed());
    // What a reader would be shown is not replicated either: it is not shown.
    let read = tokio::time::timeout(BOUND, store.get(&alice, "t2")).await.expect("no hang");
    assert_eq!(read.unwrap_err().reason(), "UNAVAILABLE");

    replica.pause(false);
    let deadline = Instant::now() + BOUND;
    while store.save(&alice, task("t3", "c", TaskState::Working, 3)).await.is_err() {
        assert!(Instant::now() < deadline, "no recovery after the replica came back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(store.get(&alice, "t2").await.unwrap().is_some(), "t2 landed and is replicated now");
    let replicated = replica.command("INFO replication").unwrap_or_default();
    assert!(replicated.contains("role:slave"), "{replicated}");
}

#[tokio::test]
async fn waiting_for_more_replicas_than_there_are_fails_every_write() {
    let Some(primary) = RedisServer::start() else { return };
    let _replica = RedisServer::start_replica_of(primary.port).expect("redis-server");
    let store = store_waiting_for(&primary.url(), 2).await.unwrap();
    let error = store.save(&owner("alice"), task("t", "c", TaskState::Working, 1)).await.unwrap_err();
    assert!(error.to_string().contains("fewer than 2 replica(s)"), "{error}");
}

#[tokio::test]
async fn a_cluster_refuses_replicated_acknowledgements() {
    let Some(cluster) = RedisCluster::start() else { return };
    let error = store_waiting_for(&cluster.url(), 1).await.err().expect("refused");
    assert!(error.contains("--redis-wait-replicas"), "{error}");
}

/// Runs `call` until it works (within 30 s, the bound for coming back), counting the
/// failures meanwhile; every failure must be UNAVAILABLE, none may hang.
async fn until_it_works<T, F: std::future::Future<Output = Result<T, a2a_server::error::A2aError>>>(
    mut call: impl FnMut() -> F,
) -> (T, usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut failures = 0;
    loop {
        match tokio::time::timeout(BOUND, call()).await.expect("no hang") {
            Ok(value) => return (value, failures),
            Err(error) => {
                assert_eq!(error.reason(), "UNAVAILABLE", "{error}");
                assert!(Instant::now() < deadline, "still failing 30 s on: {error}");
                failures += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn save_until_it_works(store: &RedisStore, id: &str) -> usize {
    let alice = owner("alice");
    until_it_works(|| store.save(&alice, task(id, "c", TaskState::Working, 1))).await.1
}

/// Whether `id` is stored, read as soon as reads work (a replica may be rejoining).
async fn stored(store: &RedisStore, id: &str) -> bool {
    let alice = owner("alice");
    until_it_works(|| store.get(&alice, id)).await.0.is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinels_lead_the_store_to_the_new_primary() {
    let Some(mut topology) = tokio::task::block_in_place(RedisSentinels::start) else { return };
    let store = store_waiting_for(&topology.url(), 1).await.unwrap();
    save_until_it_works(&store, "before").await;

    // Demoted alive: the old primary answers READONLY now; the store must not stay with it.
    let first = topology.primary_port().unwrap();
    topology.force_failover();
    let second = tokio::task::block_in_place(|| topology.wait_failover(first));
    save_until_it_works(&store, "after-demotion").await;
    assert!(stored(&store, "before").await, "acknowledged before the failover");

    // Killed: the Sentinels promote the remaining replica.
    let killed = tokio::task::block_in_place(|| topology.kill9_primary(Duration::ZERO));
    assert_eq!(killed, second);
    let third = tokio::task::block_in_place(|| topology.wait_failover(second));
    let failures = save_until_it_works(&store, "after-kill").await;
    for id in ["before", "after-demotion", "after-kill"] {
        assert!(stored(&store, id).await, "{id} is on the new primary {third}");
    }
    // The primary the Sentinels settled on (an attempt of theirs may have been superseded).
    let settled = tokio::task::block_in_place(|| topology.wait_failover(second));
    let role = topology.node(settled).command("ROLE").unwrap_or_default();
    assert!(role.contains("master"), "{role}");
    eprintln!("failover: {failures} failed saves before the store found the new primary");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_master_name_fails_the_start_naming_it() {
    let Some(topology) = tokio::task::block_in_place(RedisSentinels::start) else { return };
    let url = topology.url().replace("mymaster", "nosuchmaster");
    let error = store_waiting_for(&url, 0).await.err().expect("no such master");
    assert!(error.contains("nosuchmaster"), "{error}");
}
