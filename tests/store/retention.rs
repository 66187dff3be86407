//! Retention of tasks noted before the retention member carried the task's size and index
//! place (`<owner>/<task>`, its size in the sizes hash): a store upgraded over such members
//! still evicts them, oldest first, with their bytes and their sizes entry.
use a2a_server::proto::TaskState;
use a2a_server::task::store::redis::Timeouts;
use a2a_server::task::store::{Retention, TaskQuery, TaskStore};
use bytes::Bytes;

use super::redis_server::RedisServer;
use super::suite::{owner, task};
use super::{evicted_soon, redis_store, write};

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
