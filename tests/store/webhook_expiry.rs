//! A webhook registered for a task not stored yet (one in its creating SendMessage) expires
//! after the retention age (a day at least) unless the task's first write comes: a replica
//! that dies in between leaves neither the config nor its place in the principal's push quota
//! for ever. A live task's first write, by the fleet's append or by the plain save, keeps its
//! webhooks as long as the task.
use a2a_server::call::Owner;
use a2a_server::task::store::PushConfigLimits;
use suite::config;

use super::*;

/// A day, in ms: the least a pending webhook is given.
const DAY_MS: i64 = 24 * 3600 * 1000;

/// A store on a server of its own, with the default retention, and alice.
async fn started() -> Option<(RedisServer, RedisStore, Owner)> {
    let server = RedisServer::start()?;
    let store = redis_store(&server.url(), Retention::default(), Timeouts::default()).await;
    Some((server, store, owner("alice")))
}

/// The key of the push hash of `task_id` (the only task of that id on the server).
async fn push_key(server: &RedisServer, task_id: &str) -> String {
    let client = ::redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let pattern = format!("*{{{task_id}}}:push");
    let keys: Vec<String> = ::redis::cmd("KEYS").arg(pattern).query_async(&mut conn).await.unwrap();
    assert_eq!(keys.len(), 1, "one push hash for {task_id}: {keys:?}");
    keys[0].clone()
}

/// `PTTL` of the push hash of `task_id`, or `PEXPIRE` it to `ms` first.
async fn push_ttl(server: &RedisServer, task_id: &str, expire_in: Option<i64>) -> i64 {
    let key = push_key(server, task_id).await;
    let client = ::redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    if let Some(ms) = expire_in {
        ::redis::cmd("PEXPIRE").arg(&key).arg(ms).query_async::<i64>(&mut conn).await.unwrap();
    }
    ::redis::cmd("PTTL").arg(&key).query_async(&mut conn).await.unwrap()
}

const LIMITS: PushConfigLimits = PushConfigLimits { per_task: 5, per_principal: 5 };

#[tokio::test]
async fn a_webhook_waits_for_its_task_then_lives_as_long_as_it() {
    let Some((server, store, alice)) = started().await else { return };
    for (id, by_append) in [("appended", true), ("saved", false)] {
        store.put_push_config(&alice, &config(id, "p", "https://a.example"), LIMITS).await.unwrap();
        let waiting = push_ttl(&server, id, None).await;
        assert!(
            (DAY_MS - 10_000..=DAY_MS).contains(&waiting),
            "a day, the retention age being shorter: {waiting}"
        );

        let live = task(id, "ctx", TaskState::Working, 0);
        if by_append {
            store.append(&alice, &live, 2, Bytes::from_static(b"e"), BOUNDS, None).await.unwrap().unwrap();
        } else {
            store.save(&alice, live).await.unwrap();
        }
        assert_eq!(push_ttl(&server, id, None).await, -1, "{id}: a live task's webhooks live as long as it");

        store.put_push_config(&alice, &config(id, "q", "https://b.example"), LIMITS).await.unwrap();
        assert_eq!(
            push_ttl(&server, id, None).await,
            -1,
            "{id}: a second webhook of a live task sets no expiry"
        );
        assert_eq!(store.push_configs(&alice, id).await.unwrap().len(), 2);
    }
}

/// Once a pending webhook has expired (brought forward here), its place in the principal's
/// quota is free again.
#[tokio::test]
async fn a_webhook_whose_task_never_came_gives_its_quota_place_back() {
    let Some((server, store, alice)) = started().await else { return };
    let limits = PushConfigLimits { per_principal: 1, ..LIMITS };

    store.put_push_config(&alice, &config("never", "p", "https://a.example"), limits).await.unwrap();
    let full = store.put_push_config(&alice, &config("later", "p", "https://a.example"), limits).await;
    assert!(full.is_err(), "the principal's one place is taken");

    push_ttl(&server, "never", Some(1)).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(store.push_configs(&alice, "never").await.unwrap().is_empty(), "expired");
    store.put_push_config(&alice, &config("later", "p", "https://a.example"), limits).await.unwrap();
}
