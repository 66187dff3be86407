//! A webhook registered for a task not stored yet (one in its creating SendMessage) expires
//! after the retention age unless the task's first write comes: a replica that dies in between
//! leaves neither the config nor its place in the principal's push quota for ever.
use a2a_server::call::Owner;
use a2a_server::task::store::PushConfigLimits;
use suite::config;

use super::*;

/// The push hash of `task_id` (the only task of that id on the server): its `PTTL`.
async fn push_ttl(server: &RedisServer, task_id: &str) -> i64 {
    let client = ::redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> =
        ::redis::cmd("KEYS").arg(format!("*{{{task_id}}}:push")).query_async(&mut conn).await.unwrap();
    assert_eq!(keys.len(), 1, "one push hash for {task_id}: {keys:?}");
    ::redis::cmd("PTTL").arg(&keys[0]).query_async(&mut conn).await.unwrap()
}

/// A store on a server of its own whose finished tasks go at `max_age`, and alice.
async fn started(max_age: Duration) -> Option<(RedisServer, RedisStore, Owner)> {
    let server = RedisServer::start()?;
    let retention = Retention { max_age, ..Retention::default() };
    let store = redis_store(&server.url(), retention, Timeouts::default()).await;
    Some((server, store, owner("alice")))
}

#[tokio::test]
async fn a_webhook_waits_for_its_task_the_retention_age_then_lives_as_long_as_it() {
    let Some((server, store, alice)) = started(Duration::from_secs(3600)).await else { return };
    let limits = PushConfigLimits { per_task: 5, per_principal: 5 };

    store.put_push_config(&alice, &config("early", "p", "https://a.example"), limits).await.unwrap();
    let waiting = push_ttl(&server, "early").await;
    assert!(
        (3_590_000..=3_600_000).contains(&waiting),
        "the retention age until its task is stored: {waiting}"
    );

    let live = task("early", "ctx", TaskState::Working, 0);
    store.append(&alice, &live, 2, Bytes::from_static(b"e"), BOUNDS, None).await.unwrap().unwrap();
    assert_eq!(push_ttl(&server, "early").await, -1, "a live task's webhooks live as long as it");

    store.put_push_config(&alice, &config("early", "q", "https://b.example"), limits).await.unwrap();
    assert_eq!(push_ttl(&server, "early").await, -1, "a second webhook of a live task sets no expiry");
    assert_eq!(store.push_configs(&alice, "early").await.unwrap().len(), 2);
}

#[tokio::test]
async fn a_webhook_whose_task_never_came_gives_its_quota_place_back() {
    let Some((_server, store, alice)) = started(Duration::from_secs(1)).await else { return };
    let limits = PushConfigLimits { per_task: 5, per_principal: 1 };

    store.put_push_config(&alice, &config("never", "p", "https://a.example"), limits).await.unwrap();
    let full = store.put_push_config(&alice, &config("later", "p", "https://a.example"), limits).await;
    assert!(full.is_err(), "the principal's one place is taken");

    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(store.push_configs(&alice, "never").await.unwrap().is_empty(), "expired");
    store.put_push_config(&alice, &config("later", "p", "https://a.example"), limits).await.unwrap();
}
