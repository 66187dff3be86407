//! The memory scenario: the server's resident memory per idle live task and per idle open
//! subscriber stream, as VmRSS deltas over many of them (read from `/proc/<pid>/status`).
//!
//! Phases, on one server process, each measured once RSS has settled:
//! 0. warm-up (a few tasks and streams opened and closed, every connection open), RSS₀;
//! 1. M `input` tasks, left INPUT_REQUIRED (live and idle), RSS₁: per task = (RSS₁−RSS₀)/M;
//! 2. one subscriber on each of them, RSS₂: per task with its stream = (RSS₂−RSS₀)/M, which is
//!    the shape of the figure in the issue (a bare tonic server: about 9 KiB);
//! 3. M more subscribers, all on one of those tasks, RSS₃: per stream = (RSS₃−RSS₂)/M.
//!
//! Then everything is closed and the tasks are completed, so an external server is left as
//! it was (apart from M finished tasks in its store).
//!
//! [`hibernated`] measures what a parked task costs once its actor has hibernated to the
//! store (our server only: it needs a server started with `--task-idle-secs`), and
//! [`retained`] what a finished task costs while retention keeps it (our server only).
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};

use crate::BoxError;
use crate::driver::{Conn, Target, fresh_message, is_terminal, send_request, task_state};
use crate::process::settled_rss_kib;
use crate::report::{Better, Measured, Metric};
use crate::scenarios::{attach, finish_idle_task, idle_task};

#[derive(Debug, Clone)]
pub struct MemoryParams {
    pub count: usize,
    pub streams_per_connection: usize,
    /// Calls in flight while creating and finishing tasks.
    pub concurrency: usize,
    pub timeout: Duration,
}

pub async fn memory(target: &Target, pid: u32, p: &MemoryParams) -> Result<Measured, BoxError> {
    let m = p.count.max(1);
    let spc = p.streams_per_connection.max(1);
    // Every connection is open before RSS₀, so connection buffers do not count as per-stream
    // memory: phase 2 uses the first half, phase 3 the second.
    let half = m.div_ceil(spc);
    let conns = target.connect_many(2 * half).await?;
    let (spread_conns, one_task_conns) = conns.split_at(half);
    let started = Instant::now();

    let warm_up = async {
        let ids = create_tasks(&conns, (m / 20).clamp(1, 200), p.concurrency).await?;
        drop(attach(&conns, spc, ids.iter().map(String::as_str)).await?);
        finish_tasks(&conns, &ids, p.concurrency).await
    };
    within("memory", p.timeout, "warm-up", warm_up).await?;
    let rss0 = settled_rss_kib(pid).await?;

    let ids = within("memory", p.timeout, "creating tasks", create_tasks(&conns, m, p.concurrency)).await?;
    let rss1 = settled_rss_kib(pid).await?;

    let spread = within(
        "memory",
        p.timeout,
        "one stream per task",
        attach(spread_conns, spc, ids.iter().map(String::as_str)),
    )
    .await?;
    let rss2 = settled_rss_kib(pid).await?;

    let one = ids[0].as_str();
    let crowd = within(
        "memory",
        p.timeout,
        "streams on one task",
        attach(one_task_conns, spc, std::iter::repeat_n(one, m)),
    )
    .await?;
    let rss3 = settled_rss_kib(pid).await?;

    drop(crowd);
    drop(spread);
    within("memory", p.timeout, "finishing tasks", finish_tasks(&conns, &ids, p.concurrency)).await?;

    let per = |from: u64, to: u64| to.saturating_sub(from) as f64 / m as f64;
    Ok(Measured {
        metrics: vec![
            Metric::new("per idle task", "KiB", per(rss0, rss1), Better::Lower),
            Metric::new("per idle task+stream", "KiB", per(rss0, rss2), Better::Lower),
            Metric::new("per idle stream", "KiB", per(rss2, rss3), Better::Lower),
            Metric::new("RSS before", "MiB", rss0 as f64 / 1024.0, Better::Info),
            Metric::new("RSS at peak", "MiB", rss3 as f64 / 1024.0, Better::Info),
        ],
        notes: vec![format!(
            "memory: M={m}, RSS KiB {rss0} → {rss1} (tasks) → {rss2} (+1 stream each) → {rss3} (+M streams on one \
             task), {:.1} s",
            started.elapsed().as_secs_f64()
        )],
    })
}

/// The idle timeout of the server the hibernate scenario starts (`--task-idle-secs`).
pub const IDLE_SECS: u64 = 1;

/// The hibernate scenario, on a fresh server started with `--task-idle-secs` [`IDLE_SECS`]:
/// after a warm-up, RSS₀; M `input` tasks, left to hibernate, RSS₁; M more, RSS₂. The first
/// delta is an upper bound (the actors' memory, freed when they hibernate, is not all given
/// back to the OS); the second is the steady cost of one more parked task, since the new
/// actors reuse what the first batch freed.
pub async fn hibernated(target: &Target, pid: u32, p: &MemoryParams) -> Result<Measured, BoxError> {
    let m = p.count.max(1);
    let conns = target.connect_many(4).await?;
    let started = Instant::now();
    let conns = &conns;
    let batch = move |n| async move { create_tasks(conns, n, p.concurrency).await.map(drop) };
    let parked = || tokio::time::sleep(Duration::from_millis(IDLE_SECS * 1000 + 1500));
    let rows = ["per hibernated task, first batch", "per hibernated task, steady"];
    let (metrics, [rss0, rss1, rss2]) = two_batches(pid, p, m, ("hibernate", rows), batch, parked).await?;
    Ok(Measured {
        metrics,
        notes: vec![format!(
            "hibernate: M={m}, idle timeout {IDLE_SECS} s, RSS KiB {rss0} → {rss1} (M parked) → {rss2} (2M parked), \
             {:.1} s",
            started.elapsed().as_secs_f64()
        )],
    })
}

/// At most this many tasks per batch of the retained scenario: its warm-up and two batches
/// stay under the server's default retention count (10,000), so nothing is evicted.
pub const RETAINED_MAX: usize = 4_000;

/// The retained scenario, on a fresh server: after a warm-up, RSS₀; M quick tasks (the
/// unary echo, finished when SendMessage answers), RSS₁; M more, RSS₂. As with hibernation the
/// first delta is an upper bound (it includes the calls' own memory, which later calls
/// reuse); the second is the steady cost of one more finished task in the store.
pub async fn retained(target: &Target, pid: u32, p: &MemoryParams) -> Result<Measured, BoxError> {
    let m = p.count.clamp(1, RETAINED_MAX);
    let conns = target.connect_many(4).await?;
    let started = Instant::now();
    let batch = |n| quick_tasks(&conns, n, p.concurrency);
    let settled = || std::future::ready(());
    let rows = ["per retained task, first batch", "per retained task, steady"];
    let (metrics, [rss0, rss1, rss2]) = two_batches(pid, p, m, ("retained", rows), batch, settled).await?;
    Ok(Measured {
        metrics,
        notes: vec![format!(
            "retained: M={m}, RSS KiB {rss0} → {rss1} (M finished) → {rss2} (2M finished), {:.1} s",
            started.elapsed().as_secs_f64()
        )],
    })
}

/// The shape of the hibernate and retained scenarios: a warm-up batch, then two batches of
/// `m`, each followed by `settle` and an RSS reading; the `rows` per task of the first batch
/// (an upper bound) and of the second (the steady cost), and the three readings.
async fn two_batches<B, BFut, S, SFut>(
    pid: u32,
    p: &MemoryParams,
    m: usize,
    (scenario, rows): (&str, [&'static str; 2]),
    batch: B,
    settle: S,
) -> Result<(Vec<Metric>, [u64; 3]), BoxError>
where
    B: Fn(usize) -> BFut,
    BFut: Future<Output = Result<(), BoxError>>,
    S: Fn() -> SFut,
    SFut: Future<Output = ()>,
{
    let mut rss = [0; 3];
    for (i, (phase, n)) in
        [("warm-up", (m / 20).clamp(1, 200)), ("a batch", m), ("a second batch", m)].into_iter().enumerate()
    {
        within(scenario, p.timeout, phase, batch(n)).await?;
        settle().await;
        rss[i] = settled_rss_kib(pid).await?;
    }
    let per = |from: u64, to: u64| to.saturating_sub(from) as f64 / m as f64;
    let metrics = vec![
        Metric::new(rows[0], "KiB", per(rss[0], rss[1]), Better::Lower),
        Metric::new(rows[1], "KiB", per(rss[1], rss[2]), Better::Lower),
    ];
    Ok((metrics, rss))
}

/// `count` tasks the demo agent finishes at once (an echo), `concurrency` at a time.
async fn quick_tasks(conns: &[Conn], count: usize, concurrency: usize) -> Result<(), BoxError> {
    futures::stream::iter(0..count)
        .map(|i| {
            let conn = conns[i % conns.len()].clone();
            async move {
                let task = conn.send_for_task(send_request(fresh_message("retained", None), false)).await?;
                match task_state(&task) {
                    state if is_terminal(state) => Ok(()),
                    other => Err(format!("an echo left the task {other:?}, not finished").into()),
                }
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect()
        .await
}

/// `count` idle INPUT_REQUIRED tasks, created `concurrency` at a time over `conns`.
async fn create_tasks(conns: &[Conn], count: usize, concurrency: usize) -> Result<Vec<String>, BoxError> {
    futures::stream::iter(0..count)
        .map(|i| {
            let conn = conns[i % conns.len()].clone();
            async move { idle_task(&conn).await.map(|task| task.id) }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect()
        .await
}

/// Completes the tasks, `concurrency` at a time.
async fn finish_tasks(conns: &[Conn], ids: &[String], concurrency: usize) -> Result<(), BoxError> {
    futures::stream::iter(ids.iter().enumerate())
        .map(|(i, id)| {
            let conn = conns[i % conns.len()].clone();
            async move { finish_idle_task(&conn, id).await }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<()>()
        .await
}

/// `fut`, or an error naming the scenario and phase if it takes longer than `timeout`.
pub(crate) async fn within<T>(
    scenario: &str,
    timeout: Duration,
    what: &str,
    fut: impl Future<Output = Result<T, BoxError>>,
) -> Result<T, BoxError> {
    tokio::time::timeout(timeout, fut)
        .await
        .map_err(|_| format!("{scenario}: {what} took longer than {timeout:?}"))?
}
