//! The memory store on its own, at its retention cap: what a save of an echo call's Task costs
//! (on one thread, and on two contending for the store's lock as the server's two workers do),
//! and what a GetTask and a ListTasks page cost. In process, on mimalloc as the server runs,
//! with no network and no client: a steadier figure than a whole server's on a shared
//! machine, for work on the store (the unary scenario of `a2a-bench` shows what it is worth).
//!
//! ```text
//! cargo bench --bench store                                   # 10,000 kept, 200,000 saves, medians of 5
//! cargo bench --bench store -- --kept 100000 --saves 400000 --repeat 3
//! ```
//!
//! `cargo test` runs it once, tiny, as a smoke run (cargo passes `--bench` only to `cargo bench`).
use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_server::call::{CallContext, Owner};
use a2a_server::proto::{Artifact, Message, Part, Role, Task, TaskState, TaskStatus, part};
use a2a_server::task::store::{MemoryStore, Retention, TaskQuery, TaskStore};
use clap::Parser;

#[global_allocator]
static ALLOCATOR: a2a_server::allocator::Mimalloc = a2a_server::allocator::Mimalloc;

#[derive(Debug, Parser)]
struct Args {
    /// Finished tasks the store keeps (its retention count); it is full before timing starts.
    #[arg(long, default_value_t = 10_000)]
    kept: usize,
    /// Saves timed per round (each a new finished task, so each evicts at the cap).
    #[arg(long, default_value_t = 200_000)]
    saves: usize,
    /// Rounds; every figure is the median.
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Set by `cargo bench`; without it (`cargo test`) the run is a tiny smoke run.
    #[arg(long)]
    bench: bool,
}

fn main() {
    // Under `cargo test` the arguments are the test harness's (filters, `--nocapture`): not ours.
    let args = if std::env::args().any(|arg| arg == "--bench") { Args::parse() } else { smoke() };
    let owner = CallContext::default().owner("").expect("the default principal may use the default tenant");
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
    let mut rounds: Vec<[f64; 5]> = Vec::new();
    for _ in 0..args.repeat {
        rounds.push(runtime.block_on(round(&args, &owner)));
    }
    let rows = [
        "save, one thread [ns]",
        "save, two threads: wall per save [ns]",
        "save, two threads: per save per thread [ns]",
        "GetTask [ns]",
        "ListTasks, first page of 50 [ns]",
    ];
    println!("memory store, {} kept, {} saves per round, medians of {}", args.kept, args.saves, args.repeat);
    for (i, row) in rows.iter().enumerate() {
        let mut values: Vec<f64> = rounds.iter().map(|r| r[i]).collect();
        values.sort_by(f64::total_cmp);
        let (min, median, max) = (values[0], values[values.len() / 2], values[values.len() - 1]);
        println!("{row:<46} {median:>9.0}   (min {min:.0}, max {max:.0})");
    }
}

/// The smoke run's sizes.
fn smoke() -> Args {
    Args { kept: 500, saves: 2_000, repeat: 1, bench: false }
}

/// One round: each figure on a store filled to its cap first.
async fn round(args: &Args, owner: &Owner) -> [f64; 5] {
    let one = full_store(args, owner).await;
    let tasks: Vec<Arc<Task>> = (0..args.saves).map(|_| echo_task()).collect();
    let start = Instant::now();
    for task in tasks {
        one.save(owner, task).await.expect("a memory save");
    }
    let single = per(start.elapsed(), args.saves);

    let two = Arc::new(full_store(args, owner).await);
    let halves: Vec<Vec<Arc<Task>>> =
        (0..2).map(|_| (0..args.saves / 2).map(|_| echo_task()).collect()).collect();
    let start = Instant::now();
    let threads: Vec<_> = halves
        .into_iter()
        .map(|half| {
            let (store, owner) = (two.clone(), owner.clone());
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
                runtime.block_on(async {
                    for task in half {
                        store.save(&owner, task).await.expect("a memory save");
                    }
                })
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("a saving thread");
    }
    let wall = per(start.elapsed(), args.saves / 2 * 2);

    let (gets, ids) = (args.saves, kept_ids(&two, owner, args.kept).await);
    let start = Instant::now();
    for i in 0..gets {
        let found = two.get(owner, &ids[i.wrapping_mul(7919) % ids.len()]).await.expect("a memory get");
        assert!(found.is_some(), "a kept task is found");
    }
    let get = per(start.elapsed(), gets);

    let pages = (args.saves / 100).max(10);
    let query = TaskQuery { page_size: 50, ..Default::default() };
    let start = Instant::now();
    for _ in 0..pages {
        let page = two.list(owner, &query).await.expect("a memory list");
        assert_eq!(page.total, args.kept, "a list sees exactly what retention keeps");
    }
    let list = per(start.elapsed(), pages);
    [single, wall, wall * 2.0, get, list]
}

async fn full_store(args: &Args, owner: &Owner) -> MemoryStore {
    let store = MemoryStore::new(Retention { max_finished: args.kept, ..Retention::default() });
    for _ in 0..args.kept {
        store.save(owner, echo_task()).await.expect("a memory save");
    }
    store
}

/// The ids of every kept task, newest first, paged through ListTasks.
async fn kept_ids(store: &MemoryStore, owner: &Owner, kept: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(kept);
    let mut query = TaskQuery { page_size: 100, ..Default::default() };
    loop {
        let page = store.list(owner, &query).await.expect("a memory list");
        ids.extend(page.tasks.into_iter().map(|task| task.id));
        match page.next {
            Some(next) => query.after = Some(next),
            None => break,
        }
    }
    assert_eq!(ids.len(), kept, "paging reaches every kept task once");
    ids
}

fn per(elapsed: Duration, count: usize) -> f64 {
    elapsed.as_nanos() as f64 / count.max(1) as f64
}

/// The Task an echo call leaves behind: its own context, the message in its history, one
/// artifact, COMPLETED now.
fn echo_task() -> Arc<Task> {
    let (id, context_id) = (uuid::Uuid::new_v4().to_string(), uuid::Uuid::new_v4().to_string());
    let text = |text: &str| Part { content: Some(part::Content::Text(text.into())), ..Default::default() };
    let message = Message {
        message_id: uuid::Uuid::new_v4().to_string(),
        role: Role::User as i32,
        parts: vec![text("hi")],
        task_id: id.clone(),
        context_id: context_id.clone(),
        ..Default::default()
    };
    let status = TaskStatus {
        state: TaskState::Completed as i32,
        message: None,
        timestamp: Some(a2a_server::task::now()),
    };
    Arc::new(Task {
        id,
        context_id,
        status: Some(status),
        history: vec![message],
        artifacts: vec![Artifact {
            artifact_id: "echo".into(),
            name: "echo".into(),
            parts: vec![text("hi")],
            ..Default::default()
        }],
        generation: 3,
        ..Default::default()
    })
}
