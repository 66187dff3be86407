//! Retention's members: tasks noted before the member carried the task's size and index
//! place (`<owner>/<task>`, its size in the sizes hash) are still evicted, oldest first, with
//! their bytes and their sizes entry; a finished task takes the SendMessage record of the
//! message that made it along when it goes.
use std::sync::Arc;

use a2a_server::proto::{Message, Role, TaskState};
use a2a_server::task::store::redis::Timeouts;
use a2a_server::task::store::{Retention, SentRecord, SentState, TaskQuery, TaskStore};
use bytes::Bytes;

use super::redis_server::{RedisCluster, RedisServer};
use super::suite::{owner, task};
use super::{BOUNDS, evicted_soon, redis_store, write};

#[tokio::test]
async fn a_task_noted_in_the_old_form_is_still_evicted_with_its_bytes() {
    let Some(server) = RedisServer::start() else { return };
    let store = redis_store(
        &server.url(),
        Retention { max_finished: 3, ..Retention::default() },
        Timeouts::default(),
    )
    .await;
    let alice = owner("alice");
    write(&store, &task("old", "c", TaskState::Completed, 1), Bytes::from_static(b"e"), 0).await;

    // Turn its note into the old form, the oldest of all.
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*finished*").query_async(&mut conn).await.unwrap();
    let set = keys.iter().find(|k| !k.ends_with(":sizes")).expect("the retention set").clone();
    let sizes = keys.iter().find(|k| k.ends_with(":sizes")).expect("the sizes hash").clone();
    let members: Vec<String> =
        redis::cmd("ZRANGE").arg(&set).arg(0).arg(-1).query_async(&mut conn).await.unwrap();
    let [member] = members.as_slice() else { panic!("one member: {members:?}") };
    let size: u64 = member.rsplit('|').next().unwrap().parse().unwrap();
    let old = member.split('|').next().unwrap().to_owned();
    assert!(old.ends_with("/old"), "{old}");
    let _: () = redis::pipe()
        .cmd("ZREM")
        .arg(&set)
        .arg(member)
        .ignore()
        .cmd("ZADD")
        .arg(&set)
        .arg(1)
        .arg(&old)
        .ignore()
        .cmd("HSET")
        .arg(&sizes)
        .arg(&old)
        .arg(size)
        .ignore()
        .query_async(&mut conn)
        .await
        .unwrap();

    for i in 1..=4 {
        write(
            &store,
            &task(&format!("new{i}"), "c", TaskState::Completed, 1 + i),
            Bytes::from_static(b"e"),
            0,
        )
        .await;
    }
    evicted_soon(&store, &alice, "old", "over 3, the oldest").await;
    let page = store.list(&alice, &TaskQuery { page_size: 10, ..TaskQuery::default() }).await.unwrap();
    assert!(page.tasks.iter().all(|t| t.id != "old"), "out of the index too");
    let entry: Option<u64> = redis::cmd("HGET").arg(&sizes).arg(&old).query_async(&mut conn).await.unwrap();
    assert_eq!(entry, None, "its sizes entry went with it");
    // What the sizes hash counts is exactly what the members left hold.
    let left: Vec<String> =
        redis::cmd("ZRANGE").arg(&set).arg(0).arg(-1).query_async(&mut conn).await.unwrap();
    let held: u64 = left.iter().map(|m| m.rsplit('|').next().unwrap().parse::<u64>().unwrap()).sum();
    let total: u64 = redis::cmd("HGET").arg(&sizes).arg("#").query_async(&mut conn).await.unwrap();
    assert_eq!(total, held, "bytes of {left:?}");
}

#[tokio::test]
async fn a_tasks_sendmessage_record_goes_with_it_on_a_node() {
    let Some(server) = RedisServer::start() else { return };
    sendmessage_records_go_with_their_tasks(&server.url()).await;
    // The members that name a record keep their size last: the bytes count stays exact.
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*finished*").query_async(&mut conn).await.unwrap();
    let set = keys.iter().find(|k| !k.ends_with(":sizes")).expect("the retention set");
    let sizes = keys.iter().find(|k| k.ends_with(":sizes")).expect("the sizes hash");
    let left: Vec<String> =
        redis::cmd("ZRANGE").arg(set).arg(0).arg(-1).query_async(&mut conn).await.unwrap();
    assert_eq!(left.len(), 3, "{left:?}");
    assert!(left.iter().all(|m| m.contains('&')), "each names its record: {left:?}");
    let held: u64 = left.iter().map(|m| m.rsplit('|').next().unwrap().parse::<u64>().unwrap()).sum();
    let total: u64 = redis::cmd("HGET").arg(sizes).arg("#").query_async(&mut conn).await.unwrap();
    assert_eq!(total, held, "bytes of {left:?}");
    // On a node the record of a task born finished has no expiry: retention governs it, as
    // it does the task (an expiry costs Redis a look-up per key it deletes). A task finished
    // by the fenced script keeps the expiry on its record, as on its own keys.
    for (i, governed) in [(3, true), (4, false), (5, true)] {
        let keys: Vec<String> =
            redis::cmd("KEYS").arg(format!("*sent:m{i}%*")).query_async(&mut conn).await.unwrap();
        assert_eq!(keys.len(), 1, "t{i}'s record: {keys:?}");
        let ttl: i64 = redis::cmd("PTTL").arg(&keys[0]).query_async(&mut conn).await.unwrap();
        assert_eq!(ttl == -1, governed, "t{i}'s record expires in {ttl} ms");
    }
}

#[tokio::test]
async fn a_tasks_sendmessage_record_goes_with_it_on_a_cluster() {
    let Some(cluster) = RedisCluster::start() else { return };
    sendmessage_records_go_with_their_tasks(&cluster.url()).await;
}

/// Each call leaves a SendMessage record; kept for the whole retention age they outnumbered
/// the tasks retention keeps many times over. A finished task is noted with the message that
/// made it (by either write path), and its record goes when it does: the message is free
/// again (a retry then runs anew, as after any eviction), while the kept tasks' records still
/// answer.
async fn sendmessage_records_go_with_their_tasks(url: &str) {
    let store = capped_store(url).await;
    let alice = owner("alice");
    // A message id with what keys and members must keep apart.
    let message_id = |i: usize| format!("m{i}|}}:{{/x");
    for i in 1..=5 {
        assert_eq!(store.claim_sent(&alice, &message_id(i), &claim(i)).await.unwrap(), None);
        let mut done = task(&format!("t{i}"), &format!("t{i}"), TaskState::Completed, i as i64);
        let made_by = Message { message_id: message_id(i), role: Role::User as i32, ..Default::default() };
        let reply = Message { message_id: format!("r{i}"), role: Role::Agent as i32, ..Default::default() };
        Arc::make_mut(&mut done).history = vec![made_by, reply];
        let event = Bytes::from_static(b"e");
        if i % 2 == 1 {
            store.write_born_finished(&alice, &done, 2, &[event], BOUNDS, i % 4 == 1).await.unwrap();
        } else {
            // The fenced script's way (slot by slot on a cluster), as a task that ran on.
            store.append(&alice, &done, 2, event, BOUNDS, None).await.unwrap().unwrap();
        }
    }
    for i in 1..=2 {
        evicted_soon(&store, &alice, &format!("t{i}"), "over 3, the oldest").await;
        let again = SentRecord { fingerprint: [8; 32], ..claim(9) };
        assert_eq!(store.claim_sent(&alice, &message_id(i), &again).await.unwrap(), None, "m{i} is free");
    }
    for i in 3..=5 {
        assert!(store.get(&alice, &format!("t{i}")).await.unwrap().is_some(), "t{i} is kept");
        let held = store.claim_sent(&alice, &message_id(i), &claim(9)).await.unwrap();
        assert_eq!(held, Some(claim(i)), "t{i}'s record still answers");
    }
}

#[tokio::test]
async fn a_direct_replys_record_is_kept_like_a_finished_task_on_a_node() {
    let Some(server) = RedisServer::start() else { return };
    replies_are_kept_like_finished_tasks(&server.url()).await;
}

#[tokio::test]
async fn a_direct_replys_record_is_kept_like_a_finished_task_on_a_cluster() {
    let Some(cluster) = RedisCluster::start() else { return };
    replies_are_kept_like_finished_tasks(&cluster.url()).await;
}

/// A direct reply makes no task, so nothing took its record along: it stayed the whole
/// retention age, one per call. It is now noted as a finished task without a task, counts
/// toward the same limits, and goes oldest first: its messageId is free again.
async fn replies_are_kept_like_finished_tasks(url: &str) {
    let store = capped_store(url).await;
    let alice = owner("alice");
    let reply = |i: usize| SentRecord {
        fingerprint: [7; 32],
        state: SentState::Replied(Bytes::from(format!("reply {i}"))),
    };
    let message_id = |i: usize| format!("r{i}|}}:{{/&x");
    for i in 1..=5 {
        assert_eq!(store.claim_sent(&alice, &message_id(i), &claim(i)).await.unwrap(), None);
        assert!(store.swap_sent(&alice, &message_id(i), &claim(i), Some(&reply(i))).await.unwrap());
        // Replies are told apart by their time: one per millisecond keeps the order sure.
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    let started = std::time::Instant::now();
    for i in 1..=2 {
        loop {
            let again = store.claim_sent(&alice, &message_id(i), &claim(9)).await.unwrap();
            if again.is_none() {
                break;
            }
            assert_eq!(again, Some(reply(i)), "until it goes, the reply answers");
            assert!(started.elapsed() < std::time::Duration::from_secs(10), "r{i} is still kept");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
    for i in 3..=5 {
        assert_eq!(
            store.claim_sent(&alice, &message_id(i), &claim(9)).await.unwrap(),
            Some(reply(i)),
            "r{i}"
        );
    }
}

/// A task that opened its context (the context bears its id, as when the client sent none)
/// has no entry in that context's index, by either write path: ListTasks finds it through the
/// meta hash, and no key is born and deleted with every such task. Its retention member says
/// so (an empty context), so eviction sends no `ZREM` for it; a task in another's context has
/// its entry, which goes with it.
#[tokio::test]
async fn a_task_that_opened_its_context_has_no_context_index_key() {
    let Some(server) = RedisServer::start() else { return };
    let kept = Retention { max_finished: 5, ..Retention::default() };
    let store = redis_store(&server.url(), kept, Timeouts::default()).await;
    let alice = owner("alice");
    let e = || Bytes::from_static(b"e");
    // Born finished (odd) and through the fenced script (even); o3 runs before it finishes.
    write(&store, &task("o1", "o1", TaskState::Completed, 1), e(), 1).await;
    write(&store, &task("o2", "o2", TaskState::Completed, 2), e(), 2).await;
    store
        .append(&alice, &task("o3", "o3", TaskState::Working, 3), 1, e(), BOUNDS, None)
        .await
        .unwrap()
        .unwrap();
    store
        .append(&alice, &task("o3", "o3", TaskState::Completed, 4), 2, e(), BOUNDS, None)
        .await
        .unwrap()
        .unwrap();
    write(&store, &task("f1", "o1", TaskState::Completed, 5), e(), 3).await;

    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let contexts = |mut conn: redis::aio::MultiplexedConnection| async move {
        let keys: Vec<String> = redis::cmd("KEYS").arg("*:ctx:*").query_async(&mut conn).await.unwrap();
        keys
    };
    let keys = contexts(conn.clone()).await;
    let [only] = keys.as_slice() else { panic!("only o1's context, for f1: {keys:?}") };
    assert!(only.ends_with(":ctx:o1"), "{only}");
    let entries: Vec<String> =
        redis::cmd("ZRANGE").arg(only).arg(0).arg(-1).query_async(&mut conn).await.unwrap();
    assert!(matches!(entries.as_slice(), [entry] if entry.ends_with(":f1")), "{entries:?}");

    let listed = |context: &str| {
        let query = TaskQuery { page_size: 10, context_id: Some(context.into()), ..TaskQuery::default() };
        let (store, alice) = (&store, &alice);
        async move {
            let page = store.list(alice, &query).await.unwrap();
            let mut ids: Vec<String> = page.tasks.iter().map(|t| t.id.clone()).collect();
            ids.sort();
            (ids, page.total)
        }
    };
    assert_eq!(listed("o1").await, (vec!["f1".to_owned(), "o1".to_owned()], 2));
    assert_eq!(listed("o2").await, (vec!["o2".to_owned()], 1));
    assert_eq!(listed("o3").await, (vec!["o3".to_owned()], 1));

    let keys: Vec<String> = redis::cmd("KEYS").arg("*finished*").query_async(&mut conn).await.unwrap();
    let set = keys.iter().find(|k| !k.ends_with(":sizes")).expect("the retention set");
    let members: Vec<String> =
        redis::cmd("ZRANGE").arg(set).arg(0).arg(-1).query_async(&mut conn).await.unwrap();
    for member in &members {
        let context = member.rsplit('|').nth(1).unwrap();
        let expected = if member.contains("/f1|") { "o1" } else { "" };
        assert_eq!(context, expected, "{member}");
    }

    // Five more openers under a cap of five: the four above go, and with them every context
    // index entry there was.
    for i in 1..=5 {
        write(&store, &task(&format!("n{i}"), &format!("n{i}"), TaskState::Completed, 5 + i), e(), i).await;
    }
    for id in ["o1", "o2", "o3", "f1"] {
        evicted_soon(&store, &alice, id, "over 5, the oldest").await;
    }
    let left = contexts(conn.clone()).await;
    assert!(left.is_empty(), "no context index is left: {left:?}");
    assert_eq!(listed("n2").await, (vec!["n2".to_owned()], 1));
}

/// A store that keeps 3 finished tasks.
async fn capped_store(url: &str) -> a2a_server::task::store::RedisStore {
    redis_store(url, Retention { max_finished: 3, ..Retention::default() }, Timeouts::default()).await
}

/// The `i`th claim, for task `t<i>`.
fn claim(i: usize) -> SentRecord {
    SentRecord {
        fingerprint: [7; 32],
        state: SentState::Claimed { task_id: format!("t{i}"), claim: format!("c{i}"), alive_ms: 1 },
    }
}
