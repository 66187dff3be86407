//! The memory store's eviction, deferred indexes and positions, under load.
use super::*;
use crate::proto::{TaskState, TaskStatus};

fn finished(id: usize) -> Arc<Task> {
    let status = TaskStatus { state: TaskState::Completed as i32, ..Default::default() };
    Arc::new(Task {
        id: format!("t{id}"),
        context_id: "c".into(),
        status: Some(status),
        ..Default::default()
    })
}

/// Saves let a batch of finished tasks past the count before evicting them together;
/// no read, list or push-config call ever sees one of them.
#[tokio::test]
async fn saves_evict_in_batches_and_reads_stay_exact() {
    let store = MemoryStore::new(Retention { max_finished: 2, ..Retention::default() });
    let owner = Owner::default();
    let held = || store.lock().tasks.len();
    for id in 0..EVICT_BATCH + 1 {
        store.save(&owner, finished(id)).await.unwrap();
    }
    assert_eq!(held(), EVICT_BATCH + 1, "a batch less one over the count: nothing evicted yet");
    store.save(&owner, finished(EVICT_BATCH + 1)).await.unwrap();
    assert_eq!(held(), 2, "a whole batch over: evicted down to the count at once");

    for id in 100..110 {
        store.save(&owner, finished(id)).await.unwrap();
    }
    assert_eq!(held(), 12);
    assert!(store.get(&owner, "t107").await.unwrap().is_none(), "a read evicts first");
    assert_eq!(held(), 2);
    store.save(&owner, finished(110)).await.unwrap();
    let page = store.list(&owner, &TaskQuery { page_size: 10, ..Default::default() }).await.unwrap();
    assert_eq!(page.total, 2, "a list evicts first");
    let ids: Vec<_> = page.tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.contains(&"t110") && ids.contains(&"t109"), "{ids:?}");
}

/// More tasks than a batch age out at once: a read still sees none of them (it evicts
/// them all, a batch per critical section, before it looks).
#[tokio::test]
async fn reads_see_none_of_many_tasks_aged_out_at_once() {
    let retention = Retention { max_age: std::time::Duration::from_millis(50), ..Retention::default() };
    let store = MemoryStore::new(retention);
    let owner = Owner::default();
    let many = EVICT_BATCH * 3 + 5;
    for id in 0..many {
        store.save(&owner, finished(id)).await.unwrap();
    }
    tokio::time::sleep(std::time::Duration::from_millis(120)).await;
    let newest = format!("t{}", many - 1);
    assert!(store.get(&owner, &newest).await.unwrap().is_none(), "aged out, yet readable");
    assert_eq!(store.lock().tasks.len(), 0, "every aged-out task is gone");
    let page = store.list(&owner, &TaskQuery { page_size: 10, ..Default::default() }).await.unwrap();
    assert_eq!(page.total, 0);
}

/// Saves leave indexing to listings; whatever mix of saves, state changes, evictions and
/// forgotten oversize tasks came before, a listing shows exactly the tasks the store holds,
/// in order, and every task waiting for indexing is in `unindexed` once, at its slot.
#[tokio::test]
async fn listings_catch_the_deferred_indexes_up_exactly() {
    let retention = Retention { max_finished: 150, max_bytes: 1 << 20, ..Retention::default() };
    let store = MemoryStore::new(retention);
    let owners = [Owner::default(), Owner { tenant: "t".into(), principal: "p".into() }];
    let states = [TaskState::Submitted, TaskState::Working, TaskState::InputRequired, TaskState::Completed];
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut saved: Vec<(usize, String)> = Vec::new();
    for round in 0..3_000 {
        let (owner, id) = match next(3) {
            0 if !saved.is_empty() => saved[next(saved.len() as u64) as usize].clone(),
            _ => {
                saved.push((next(2) as usize, format!("task-{round}")));
                saved.last().cloned().unwrap_or_default()
            }
        };
        let status = TaskStatus {
            state: states[next(4) as usize] as i32,
            message: None,
            // Few distinct timestamps: ties are ordered by id.
            timestamp: Some(pbjson_types::Timestamp { seconds: next(40) as i64, nanos: 0 }),
        };
        // Now and then a finished task too large for retention: forgotten, not kept.
        let bulk = if next(50) == 0 { "x".repeat(2 << 20) } else { String::new() };
        let task = Task {
            id,
            context_id: format!("c{}", next(3)),
            status: Some(status),
            metadata: (!bulk.is_empty()).then(|| pbjson_types::Struct {
                fields: [("bulk".to_owned(), pbjson_types::Value::from(bulk))].into(),
            }),
            ..Default::default()
        };
        store.save(&owners[owner], Arc::new(task)).await.unwrap();
        // Often at first (indexed tasks change), then rarely (more than a batch waits).
        if next(if round < 1_500 { 20 } else { 400 }) == 0 {
            check_listings(&store, &owners).await;
        }
        let state = store.lock();
        for (i, id) in state.unindexed.iter().enumerate() {
            assert_eq!(state.tasks[id].unindexed, Some(i), "{id} waits at its slot");
        }
        let waiting = state.tasks.values().filter(|r| r.unindexed.is_some()).count();
        assert_eq!(waiting, state.unindexed.len(), "every unindexed task waits once");
    }
    check_listings(&store, &owners).await;
}

/// Every owner's listing, whole and by context and by state, against the held tasks.
async fn check_listings(store: &MemoryStore, owners: &[Owner]) {
    for owner in owners {
        for context_id in [None, Some("c0"), Some("c2")] {
            for state in [None, Some(TaskState::Completed), Some(TaskState::Working)] {
                let query = TaskQuery {
                    include_artifacts: true,
                    context_id: context_id.map(str::to_owned),
                    state,
                    page_size: 100_000,
                    ..Default::default()
                };
                let page = store.list(owner, &query).await.unwrap();
                let listed: Vec<String> = page.tasks.iter().map(|t| t.id.clone()).collect();
                let mut held: Vec<(i128, String)> = {
                    let state_now = store.lock();
                    state_now
                        .tasks
                        .values()
                        .filter(|r| &r.owner == owner)
                        .map(|r| r.task.clone().into_owned("", true).unwrap())
                        .filter(|t| context_id.is_none_or(|c| t.context_id == c))
                        .filter(|t| state.is_none_or(|s| state_of(t.status.as_ref()) == s))
                        .map(|t| (-status_nanos(&t), t.id))
                        .collect()
                };
                held.sort();
                let held: Vec<String> = held.into_iter().map(|(_, id)| id).collect();
                assert_eq!(listed, held, "{owner:?} {context_id:?} {state:?}");
                assert_eq!(page.total, held.len());
            }
        }
    }
    assert!(store.lock().unindexed.is_empty(), "a listing leaves nothing unindexed");
}

/// The id's head breaks ties exactly as the whole id would, whatever the ids' lengths.
#[test]
fn positions_order_as_timestamp_then_id() {
    let ids = ["", "a", "a\0", "a\0\u{1}", "abcdefgh", "abcdefgh0", "abcdefghi", "abcdefg", "b", "\u{7f}z"];
    let mut positions: Vec<Position> = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        for nanos in [5, (i % 3) as i128] {
            positions.push(Position::new(nanos, Arc::from(*id)));
        }
    }
    let mut expected = positions.clone();
    expected.sort_by(|a, b| (std::cmp::Reverse(a.nanos), &*a.id).cmp(&(std::cmp::Reverse(b.nanos), &*b.id)));
    positions.sort();
    assert_eq!(positions, expected);
}
