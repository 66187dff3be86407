//! The one TaskStore suite every backend passes: each case gets a fresh, empty store.
//!
//! Which store runs what: [`run`] is every backend's (tests/store.rs calls it for memory,
//! Redis and Redis Cluster); [`run_memory_only`] holds the cases only the memory store passes
//! yet (retention by bytes) or that would be slow over Redis round trips (a large index), and
//! tests/store.rs calls it for the memory store alone.
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use a2a_server::call::{Owner, ProtocolVersion};
use prost::Message as _;

use a2a_server::proto::{Artifact, Part, Task, TaskPushNotificationConfig, TaskState, TaskStatus, part};
use a2a_server::task::encoded::EncodedTask;
use a2a_server::task::store::{
    Cursor, PushConfigLimits, PushRegistration, Retention, SentRecord, SentState, TaskQuery, TaskStore,
};

/// A task of `context` in `state`, its status stamped `secs` after an arbitrary epoch.
pub fn task(id: &str, context: &str, state: TaskState, secs: i64) -> Arc<Task> {
    Arc::new(Task {
        id: id.into(),
        context_id: context.into(),
        status: Some(TaskStatus {
            state: state as i32,
            timestamp: Some(pbjson_types::Timestamp { seconds: 1_700_000_000 + secs, nanos: 0 }),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// An owner of the default tenant.
pub fn owner(principal: &str) -> Owner {
    Owner { tenant: String::new(), principal: principal.into() }
}

/// A config registered through v1.0.
pub fn config(task_id: &str, id: &str, url: &str) -> PushRegistration {
    TaskPushNotificationConfig {
        task_id: task_id.into(),
        id: id.into(),
        url: url.into(),
        ..Default::default()
    }
    .into()
}

/// At most `per_task` configs per task, and plenty per principal.
fn cap(per_task: usize) -> PushConfigLimits {
    PushConfigLimits { per_task, per_principal: 1000 }
}

fn query(page_size: usize) -> TaskQuery {
    TaskQuery { page_size, ..Default::default() }
}

async fn ids(store: &Arc<dyn TaskStore>, owner: &Owner, query: &TaskQuery) -> (Vec<String>, usize) {
    let page = store.list(owner, query).await.unwrap();
    (page.tasks.iter().map(|t| t.id.clone()).collect(), page.total)
}

/// Runs every case, each on a store `make` builds with the given retention.
pub async fn run<F, Fut>(make: F)
where
    F: Fn(Retention) -> Fut,
    Fut: Future<Output = Arc<dyn TaskStore>>,
{
    let keep_all = keep_all();
    save_and_get(make(keep_all).await).await;
    save_with_its_encoding(make(keep_all).await).await;
    owners_are_isolated(make(keep_all).await).await;
    list_order_paging_and_cursors(make(keep_all).await).await;
    list_filters_and_totals(make(keep_all).await).await;
    list_follows_updates(make(keep_all).await).await;
    push_configs_crud_and_cap(make(keep_all).await).await;
    push_configs_cap_per_principal(make(Retention { max_finished: 1, ..keep_all }).await).await;
    push_configs_keep_their_version(make(keep_all).await).await;
    retention_by_count(make(Retention { max_finished: 2, ..keep_all }).await).await;
    retention_by_age(make(Retention { max_age: Duration::from_millis(300), ..keep_all }).await).await;
    sent_records_claim_once_and_swap(make(keep_all).await).await;
    an_undecodable_task_breaks_no_listing(make(keep_all).await).await;
    sent_records_last_the_retention_age(
        make(Retention { max_age: Duration::from_millis(300), ..keep_all }).await,
    )
    .await;
}

/// Waits (a few seconds at the most) until `owner`'s task `id` is gone: the memory store
/// evicts on the write, Redis's evictor moments after it, off the call path.
async fn gone_soon(store: &Arc<dyn TaskStore>, owner: &Owner, id: &str, why: &str) {
    let started = std::time::Instant::now();
    while store.get(owner, id).await.unwrap().is_some() {
        assert!(started.elapsed() < Duration::from_secs(5), "{why}: {id} is still there");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// A retention that evicts nothing in these cases.
fn keep_all() -> Retention {
    Retention { max_finished: 1000, max_age: Duration::from_secs(3600), max_bytes: 1 << 30 }
}

/// The cases only the memory store runs (see the module doc).
pub async fn run_memory_only<F, Fut>(make: F)
where
    F: Fn(Retention) -> Fut,
    Fut: Future<Output = Arc<dyn TaskStore>>,
{
    let size = sized("f1", TaskState::Completed, 0, 1000).encoded_len();
    retention_by_bytes(make(Retention { max_bytes: 2 * size + size / 2, ..keep_all() }).await, size).await;
    a_page_ignores_other_owners_tasks(make(Retention { max_finished: 100_000, ..keep_all() }).await).await;
}

/// The ids on every page of `owner`'s tasks, `page_size` at a time, following the page tokens;
/// each page must report `total`.
async fn every_page(
    store: &Arc<dyn TaskStore>,
    owner: &Owner,
    page_size: usize,
    total: usize,
) -> Vec<String> {
    let mut seen = Vec::new();
    let mut q = query(page_size);
    loop {
        let page = store.list(owner, &q).await.unwrap();
        assert_eq!(page.total, total);
        seen.extend(page.tasks.iter().map(|t| t.id.clone()));
        match page.next {
            // The client sends back an opaque token; it must round-trip.
            Some(next) => q.after = Some(Cursor::decode(&next.encode()).unwrap()),
            None => return seen,
        }
    }
}

/// A stored task nested past what protobuf decoders read (an agent may still store one; a
/// client cannot): ListTasks skips it, GetTask of it is an error, other tasks read as ever.
async fn an_undecodable_task_breaks_no_listing(store: Arc<dyn TaskStore>) {
    use pbjson_types::{Struct, Value, value::Kind};
    let alice = owner("alice");
    let deep = (0..40).fold(Value { kind: Some(Kind::BoolValue(true)) }, |inner, _| Value {
        kind: Some(Kind::StructValue(Struct { fields: [("k".to_owned(), inner)].into() })),
    });
    let Some(Kind::StructValue(metadata)) = deep.kind else { unreachable!() };
    let bad = Task { metadata: Some(metadata), ..(*task("bad", "c", TaskState::Completed, 2)).clone() };
    assert!(Task::decode(bad.encode_to_vec().as_slice()).is_err(), "past prost's limit");
    store.save(&alice, task("good", "c", TaskState::Completed, 1)).await.unwrap();
    store.save(&alice, Arc::new(bad)).await.unwrap();
    store.save(&alice, task("live", "c", TaskState::Working, 3)).await.unwrap();
    let (listed, _) = ids(&store, &alice, &query(10)).await;
    assert_eq!(listed, ["live", "good"]);
    let error = store.get(&alice, "bad").await.unwrap_err();
    assert_eq!(error.reason(), "INTERNAL_ERROR");
    assert!(store.get(&alice, "good").await.unwrap().is_some());
}

async fn save_and_get(store: Arc<dyn TaskStore>) {
    let alice = owner("alice");
    assert!(store.get(&alice, "t1").await.unwrap().is_none());
    store.save(&alice, task("t1", "c", TaskState::Working, 1)).await.unwrap();
    assert_eq!(*store.get(&alice, "t1").await.unwrap().unwrap(), *task("t1", "c", TaskState::Working, 1));
    store.save(&alice, task("t1", "c", TaskState::Completed, 2)).await.unwrap();
    assert_eq!(*store.get(&alice, "t1").await.unwrap().unwrap(), *task("t1", "c", TaskState::Completed, 2));
}

/// A finished task saved with the encoding its actor made reads back the same, by id and in a
/// listing.
async fn save_with_its_encoding(store: Arc<dyn TaskStore>) {
    let alice = owner("alice");
    let finished = sized("e1", TaskState::Completed, 3, 100);
    store.save_encoded(&alice, EncodedTask::encoded(finished.clone())).await.unwrap();
    assert_eq!(*store.get(&alice, "e1").await.unwrap().unwrap(), *finished);
    let listed = store.list(&alice, &TaskQuery { include_artifacts: true, ..query(10) }).await.unwrap();
    assert_eq!(listed.tasks, vec![Task::clone(&finished)]);
}

async fn owners_are_isolated(store: Arc<dyn TaskStore>) {
    let alice = owner("alice");
    store.save(&alice, task("t1", "c", TaskState::Working, 1)).await.unwrap();
    store.put_push_config(&alice, &config("t1", "p", "https://a.example"), cap(5)).await.unwrap();
    let strangers = [
        owner("bob"),
        Owner { tenant: "other".into(), principal: "alice".into() },
        owner("alice:"),
        owner(""),
    ];
    for stranger in strangers {
        assert!(store.get(&stranger, "t1").await.unwrap().is_none(), "{stranger:?}");
        assert_eq!(ids(&store, &stranger, &query(10)).await, (vec![], 0), "{stranger:?}");
        assert!(store.push_configs(&stranger, "t1").await.unwrap().is_empty());
        store.delete_push_config(&stranger, "t1", "p").await.unwrap();
    }
    assert_eq!(store.push_configs(&alice, "t1").await.unwrap().len(), 1);
}

async fn list_order_paging_and_cursors(store: Arc<dyn TaskStore>) {
    let alice = owner("alice");
    // Equal timestamps tie-break on id ascending; newest first otherwise.
    for (id, secs) in [("e", 5), ("a", 5), ("c", 9), ("b", 1), ("d", 5), ("f", 7), ("g", -3)] {
        store.save(&alice, task(id, "c", TaskState::Working, secs)).await.unwrap();
    }
    let expected = ["c", "f", "a", "d", "e", "b", "g"];
    assert_eq!(every_page(&store, &alice, 3, 7).await, expected);
    let all = store.list(&alice, &query(7)).await.unwrap();
    assert!(all.next.is_none(), "an exactly full last page has no next cursor");
    let after_a = TaskQuery { after: Some(Cursor::of(&task("a", "c", TaskState::Working, 5))), ..query(2) };
    assert_eq!(ids(&store, &alice, &after_a).await, (vec!["d".into(), "e".into()], 7));
}

async fn list_filters_and_totals(store: Arc<dyn TaskStore>) {
    let alice = owner("alice");
    store.save(&alice, task("w1", "x", TaskState::Working, 1)).await.unwrap();
    store.save(&alice, task("w2", "y", TaskState::Working, 2)).await.unwrap();
    store.save(&alice, task("d1", "x", TaskState::Completed, 3)).await.unwrap();
    store.save(&alice, task("i1", "x", TaskState::InputRequired, 4)).await.unwrap();
    store.save(&owner("bob"), task("b1", "x", TaskState::Working, 5)).await.unwrap();

    let in_x = TaskQuery { context_id: Some("x".into()), ..query(10) };
    assert_eq!(ids(&store, &alice, &in_x).await, (vec!["i1".into(), "d1".into(), "w1".into()], 3));
    let working = TaskQuery { state: Some(TaskState::Working), ..query(10) };
    assert_eq!(ids(&store, &alice, &working).await, (vec!["w2".into(), "w1".into()], 2));
    let working_in_x = TaskQuery { state: Some(TaskState::Working), ..in_x.clone() };
    assert_eq!(ids(&store, &alice, &working_in_x).await, (vec!["w1".into()], 1));
    let since = Some(pbjson_types::Timestamp { seconds: 1_700_000_002, nanos: 0 });
    let recent = TaskQuery { status_after: since, ..query(10) };
    assert_eq!(ids(&store, &alice, &recent).await, (vec!["i1".into(), "d1".into(), "w2".into()], 3));
    let recent_in_x_paged = TaskQuery { status_after: since, page_size: 1, ..in_x.clone() };
    let page = store.list(&alice, &recent_in_x_paged).await.unwrap();
    assert_eq!((page.tasks.len(), page.total), (1, 2));
    let second = TaskQuery { after: page.next, ..recent_in_x_paged };
    assert_eq!(ids(&store, &alice, &second).await, (vec!["d1".into()], 2));
    let no_such_context = TaskQuery { context_id: Some("zzz".into()), ..query(10) };
    assert_eq!(ids(&store, &alice, &no_such_context).await, (vec![], 0));
}

async fn list_follows_updates(store: Arc<dyn TaskStore>) {
    let alice = owner("alice");
    store.save(&alice, task("t1", "x", TaskState::Working, 1)).await.unwrap();
    store.save(&alice, task("t2", "x", TaskState::Working, 2)).await.unwrap();
    // t1 moves ahead, changes state and context: it shows once, in its new place only.
    store.save(&alice, task("t1", "y", TaskState::Completed, 3)).await.unwrap();
    assert_eq!(ids(&store, &alice, &query(10)).await, (vec!["t1".into(), "t2".into()], 2));
    let in_x = TaskQuery { context_id: Some("x".into()), ..query(10) };
    assert_eq!(ids(&store, &alice, &in_x).await, (vec!["t2".into()], 1));
    let working = TaskQuery { state: Some(TaskState::Working), ..query(10) };
    assert_eq!(ids(&store, &alice, &working).await, (vec!["t2".into()], 1));
}

async fn push_configs_crud_and_cap(store: Arc<dyn TaskStore>) {
    let (alice, bob) = (owner("alice"), owner("bob"));
    store.save(&alice, task("t1", "c", TaskState::Working, 1)).await.unwrap();
    store.put_push_config(&alice, &config("t1", "p2", "https://2.example"), cap(2)).await.unwrap();
    store.put_push_config(&alice, &config("t1", "p1", "https://1.example"), cap(2)).await.unwrap();
    let refused = store.put_push_config(&alice, &config("t1", "p3", "https://3.example"), cap(2)).await;
    let refused = refused.unwrap_err();
    assert_eq!(refused.reason(), "QUOTA_EXCEEDED");
    assert_eq!(refused.metadata()["limit"], "max-push-configs-per-task");
    // Replacing one at the cap is allowed and keeps its place (creation order).
    store.put_push_config(&alice, &config("t1", "p2", "https://2b.example"), cap(2)).await.unwrap();
    let listed = store.push_configs(&alice, "t1").await.unwrap();
    let urls: Vec<&str> = listed.iter().map(|r| r.config.url.as_str()).collect();
    assert_eq!(urls, ["https://2b.example", "https://1.example"]);
    // The cap counts per owner.
    store.put_push_config(&bob, &config("t1", "p1", "https://bob.example"), cap(2)).await.unwrap();
    store.delete_push_config(&alice, "t1", "p2").await.unwrap();
    store.delete_push_config(&alice, "t1", "missing").await.unwrap();
    let listed = store.push_configs(&alice, "t1").await.unwrap();
    assert_eq!(listed, vec![config("t1", "p1", "https://1.example")]);
    assert_eq!(store.push_configs(&bob, "t1").await.unwrap().len(), 1);
}

/// A config keeps the protocol version it was registered in (its webhook bodies' form), and a
/// replace takes the version of the call that replaced it.
async fn push_configs_keep_their_version(store: Arc<dyn TaskStore>) {
    let alice = owner("alice");
    store.save(&alice, task("t1", "c", TaskState::Working, 1)).await.unwrap();
    let v03 =
        |id: &str, url: &str| PushRegistration { version: ProtocolVersion::V0_3, ..config("t1", id, url) };
    store.put_push_config(&alice, &v03("old", "https://0.example"), cap(5)).await.unwrap();
    store.put_push_config(&alice, &config("t1", "new", "https://1.example"), cap(5)).await.unwrap();
    store.put_push_config(&alice, &v03("swap", "https://2.example"), cap(5)).await.unwrap();
    let versions = |listed: Vec<PushRegistration>| -> Vec<(String, ProtocolVersion)> {
        listed.into_iter().map(|r| (r.config.id, r.version)).collect()
    };
    let listed = store.push_configs(&alice, "t1").await.unwrap();
    assert_eq!(listed[0], v03("old", "https://0.example"), "the config reads back whole");
    assert_eq!(
        versions(listed),
        [
            ("old".into(), ProtocolVersion::V0_3),
            ("new".into(), ProtocolVersion::V1_0),
            ("swap".into(), ProtocolVersion::V0_3)
        ]
    );
    store.put_push_config(&alice, &config("t1", "swap", "https://2.example"), cap(5)).await.unwrap();
    let listed = versions(store.push_configs(&alice, "t1").await.unwrap());
    assert_eq!(listed[2], ("swap".into(), ProtocolVersion::V1_0), "replaced through v1.0");
}

async fn push_configs_cap_per_principal(store: Arc<dyn TaskStore>) {
    let limits = PushConfigLimits { per_task: 10, per_principal: 3 };
    let alice = owner("alice");
    let alice_elsewhere = Owner { tenant: "t2".into(), principal: "alice".into() };
    for id in ["t1", "t2", "t3", "t4"] {
        store.save(&alice, task(id, "c", TaskState::Working, 1)).await.unwrap();
    }
    store.save(&alice_elsewhere, task("u1", "c", TaskState::Working, 1)).await.unwrap();
    store.save(&owner("bob"), task("b1", "c", TaskState::Working, 1)).await.unwrap();
    store.put_push_config(&alice, &config("t1", "p", "https://1.example"), limits).await.unwrap();
    store.put_push_config(&alice, &config("t2", "p", "https://2.example"), limits).await.unwrap();
    store.put_push_config(&alice_elsewhere, &config("u1", "p", "https://u.example"), limits).await.unwrap();
    store.put_push_config(&alice, &config("t2", "p", "https://2b.example"), limits).await.expect("a replace");
    let refused = store.put_push_config(&alice, &config("t3", "p", "https://3.example"), limits).await;
    let refused = refused.unwrap_err();
    assert_eq!(refused.reason(), "QUOTA_EXCEEDED");
    assert_eq!(refused.metadata()["limit"], "max-push-configs-per-principal", "across tasks and tenants");
    assert!(store.push_configs(&alice, "t3").await.unwrap().is_empty(), "nothing was stored");
    store
        .put_push_config(&owner("bob"), &config("b1", "p", "https://b.example"), limits)
        .await
        .expect("bob's own");
    store.delete_push_config(&alice, "t1", "p").await.unwrap();
    store
        .put_push_config(&alice, &config("t3", "p", "https://3.example"), limits)
        .await
        .expect("a delete frees one");
    // A finished task retention lets go of frees its configs' places too (retention keeps 1).
    store.save(&alice, task("t2", "c", TaskState::Completed, 2)).await.unwrap();
    store.save(&alice, task("t4", "c", TaskState::Completed, 3)).await.unwrap();
    gone_soon(&store, &alice, "t2", "t2 was evicted").await;
    store
        .put_push_config(&alice, &config("t1", "q", "https://1.example"), limits)
        .await
        .expect("t2's place is free");
    assert!(store.put_push_config(&alice, &config("t1", "r", "https://1.example"), limits).await.is_err());
}

async fn retention_by_count(store: Arc<dyn TaskStore>) {
    let alice = owner("alice");
    store.save(&alice, task("live", "c", TaskState::Working, 0)).await.unwrap();
    for (i, id) in ["f1", "f2", "f3"].into_iter().enumerate() {
        store.save(&alice, task(id, "c", TaskState::Working, i as i64)).await.unwrap();
        store.put_push_config(&alice, &config(id, "p", "https://x.example"), cap(5)).await.unwrap();
        store.save(&alice, task(id, "c", TaskState::Completed, 10 + i as i64)).await.unwrap();
    }
    gone_soon(&store, &alice, "f1", "the oldest finished task is evicted").await;
    assert!(store.push_configs(&alice, "f1").await.unwrap().is_empty(), "with its push configs");
    assert!(store.get(&alice, "f3").await.unwrap().is_some());
    assert!(store.get(&alice, "live").await.unwrap().is_some(), "live tasks are never evicted");
    assert_eq!(ids(&store, &alice, &query(10)).await, (vec!["f3".into(), "f2".into(), "live".into()], 3));
}

async fn retention_by_age(store: Arc<dyn TaskStore>) {
    let alice = owner("alice");
    store.save(&alice, task("live", "c", TaskState::Working, 0)).await.unwrap();
    store.save(&alice, task("done", "c", TaskState::Completed, 1)).await.unwrap();
    assert!(store.get(&alice, "done").await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(store.get(&alice, "done").await.unwrap().is_none(), "finished tasks go after the age");
    assert_eq!(ids(&store, &alice, &query(10)).await, (vec!["live".into()], 1));
}

/// A task whose artifact holds `bytes` bytes of text.
fn sized(id: &str, state: TaskState, secs: i64, bytes: usize) -> Arc<Task> {
    let mut task = Task::clone(&task(id, "c", state, secs));
    let text = Part { content: Some(part::Content::Text("x".repeat(bytes))), ..Default::default() };
    task.artifacts = vec![Artifact { artifact_id: "a".into(), parts: vec![text], ..Default::default() }];
    Arc::new(task)
}

/// Retention by bytes: room for two tasks of `size` encoded bytes (and a half).
async fn retention_by_bytes(store: Arc<dyn TaskStore>, size: usize) {
    let alice = owner("alice");
    // Live tasks are never evicted, however large.
    store.save(&alice, sized("l1", TaskState::Working, 0, 10 * size)).await.unwrap();
    for (i, id) in ["f1", "f2", "f3"].into_iter().enumerate() {
        store.save(&alice, sized(id, TaskState::Working, i as i64, 1000)).await.unwrap();
        store.put_push_config(&alice, &config(id, "p", "https://x.example"), cap(5)).await.unwrap();
        store.save(&alice, sized(id, TaskState::Completed, 10 + i as i64, 1000)).await.unwrap();
    }
    assert!(store.get(&alice, "f1").await.unwrap().is_none(), "the oldest finished task is evicted");
    assert!(store.push_configs(&alice, "f1").await.unwrap().is_empty(), "with its push configs");
    assert!(store.get(&alice, "l1").await.unwrap().is_some(), "live tasks are never evicted");
    assert_eq!(ids(&store, &alice, &query(10)).await, (vec!["f3".into(), "f2".into(), "l1".into()], 3));

    // A finished task saved again larger is counted at its new size: f2 must go.
    store.save(&alice, sized("f3", TaskState::Completed, 12, 2000)).await.unwrap();
    assert!(store.get(&alice, "f2").await.unwrap().is_none(), "f3 grew, so f2 no longer fits");
    assert!(store.get(&alice, "f3").await.unwrap().is_some());

    // Many small ones make room for a large one, oldest first.
    for i in 0..20 {
        store.save(&alice, sized(&format!("s{i:02}"), TaskState::Completed, 20 + i, 10)).await.unwrap();
    }
    assert!(store.get(&alice, "f3").await.unwrap().is_none(), "twenty small tasks pushed f3 out");
    store.save(&alice, sized("f4", TaskState::Completed, 50, 2000)).await.unwrap();
    let (kept, total) = ids(&store, &alice, &query(100)).await;
    assert_eq!(kept.first().map(String::as_str), Some("f4"));
    assert!(kept.contains(&"s19".to_owned()), "the newest small ones stay: {kept:?}");
    assert!(!kept.contains(&"s00".to_owned()), "the oldest small ones go: {kept:?}");
    assert_eq!(total, kept.len());

    // A single task larger than the whole budget is not kept at all, and takes nothing with it.
    store.save(&alice, sized("huge", TaskState::Completed, 60, 3 * size)).await.unwrap();
    assert!(store.get(&alice, "huge").await.unwrap().is_none());
    assert!(store.get(&alice, "f4").await.unwrap().is_some());
    assert!(store.get(&alice, "l1").await.unwrap().is_some());
}

/// The index serves a page from the caller's own tasks: 50,000 of another owner, in the same
/// context, states and timestamps, change neither the page nor its total.
async fn a_page_ignores_other_owners_tasks(store: Arc<dyn TaskStore>) {
    let (alice, bob) = (owner("alice"), owner("bob"));
    for i in 0..50_000 {
        let state = if i % 2 == 0 { TaskState::Working } else { TaskState::Completed };
        store.save(&bob, task(&format!("bob-{i:05}"), "shared", state, i % 100)).await.unwrap();
    }
    let mut mine = Vec::new();
    for i in 0..10 {
        let state = if i % 2 == 0 { TaskState::Working } else { TaskState::Completed };
        let id = format!("alice-{i}");
        store.save(&alice, task(&id, "shared", state, i * 10)).await.unwrap();
        mine.push(id);
    }
    mine.reverse(); // newest first
    assert_eq!(ids(&store, &alice, &query(100)).await, (mine.clone(), 10));
    let in_shared = TaskQuery { context_id: Some("shared".into()), ..query(100) };
    assert_eq!(ids(&store, &alice, &in_shared).await, (mine.clone(), 10));
    let working = TaskQuery { state: Some(TaskState::Working), ..in_shared.clone() };
    let mine_working: Vec<String> =
        mine.iter().filter(|id| id.ends_with(['0', '2', '4', '6', '8'])).cloned().collect();
    assert_eq!(ids(&store, &alice, &working).await, (mine_working, 5));
    let since = Some(pbjson_types::Timestamp { seconds: 1_700_000_000 + 50, nanos: 0 });
    let recent = TaskQuery { status_after: since, ..query(100) };
    assert_eq!(ids(&store, &alice, &recent).await, (mine[..5].to_vec(), 5));
    // Paging through them in threes sees each once, in order.
    assert_eq!(every_page(&store, &alice, 3, 10).await, mine);
    assert_eq!(store.list(&bob, &query(1)).await.unwrap().total, 50_000);
}

/// A SendMessage record claimed by `claim` for task `task_id`.
fn claimed(claim: &str, task_id: &str) -> SentRecord {
    let state = SentState::Claimed { task_id: task_id.into(), claim: claim.into(), alive_ms: 1 };
    SentRecord { fingerprint: [3; 32], state }
}

/// Idempotent SendMessage's records: of many claims at once exactly one wins and the others
/// read it; a swap replaces only the record it names; ids are scoped by owner, whatever they
/// hold.
async fn sent_records_claim_once_and_swap(store: Arc<dyn TaskStore>) {
    let (alice, bob) = (owner("alice"), owner("bob"));
    let id = "m}:{1/x";
    let claims = (0..16).map(|i| {
        let store = store.clone();
        let alice = alice.clone();
        async move { (i, store.claim_sent(&alice, id, &claimed(&format!("c{i}"), "t")).await.unwrap()) }
    });
    let outcomes = futures::future::join_all(claims).await;
    let winners: Vec<usize> = outcomes.iter().filter(|(_, held)| held.is_none()).map(|(i, _)| *i).collect();
    assert_eq!(winners.len(), 1, "exactly one claim wins: {winners:?}");
    let winner = claimed(&format!("c{}", winners[0]), "t");
    for (_, held) in &outcomes {
        assert!(held.as_ref().is_none_or(|held| *held == winner), "the others read the winner's record");
    }
    assert_eq!(store.claim_sent(&bob, id, &claimed("b", "t")).await.unwrap(), None, "bob's own id");

    let reply = SentRecord { fingerprint: [3; 32], state: SentState::Replied(vec![0, 1, 2, 255].into()) };
    assert!(!store.swap_sent(&alice, id, &claimed("c99", "t"), Some(&reply)).await.unwrap(), "not held");
    assert!(store.swap_sent(&alice, id, &winner, Some(&reply)).await.unwrap());
    assert_eq!(store.claim_sent(&alice, id, &claimed("x", "t")).await.unwrap(), Some(reply.clone()));
    assert!(store.swap_sent(&alice, id, &reply, None).await.unwrap());
    assert!(!store.swap_sent(&alice, id, &reply, None).await.unwrap(), "removed already");
    assert_eq!(store.claim_sent(&alice, id, &claimed("y", "t")).await.unwrap(), None, "free again");
    assert_eq!(store.claim_sent(&bob, id, &claimed("z", "t")).await.unwrap(), Some(claimed("b", "t")));
}

/// A record goes after the retention age, as a finished task does.
async fn sent_records_last_the_retention_age(store: Arc<dyn TaskStore>) {
    let alice = owner("alice");
    assert_eq!(store.claim_sent(&alice, "m", &claimed("a", "t")).await.unwrap(), None);
    assert!(store.claim_sent(&alice, "m", &claimed("b", "t")).await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(store.claim_sent(&alice, "m", &claimed("c", "t")).await.unwrap(), None, "expired");
}
