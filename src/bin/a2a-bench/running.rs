//! The `running` memory scenario: the server's resident memory per task whose agent execution
//! is in flight, with its SendStreamingMessage stream open, as a VmRSS delta over many of them.
//! The idle `memory` scenario prices a parked task; this prices the other common shape, a task
//! at work that produces an event now and then (a model streaming slowly, a tool waiting).
//!
//! Each task is SendStreamingMessage [`COMMAND`]: for the demo agent (and the baseline, which
//! emulates it) WORKING, `chunk 0` at once, then one chunk a minute, so during the measurement
//! every execution sleeps with its stream open. The client reads each stream up to its first
//! chunk, so the execution is known to be running before RSS is read.
//!
//! Phases, on a fresh server process (see `main`): warm-up (a few such tasks started and
//! canceled, every connection open), RSS₀; M tasks started and held, RSS₁; per running task
//! with its stream = (RSS₁−RSS₀)/M. Then every task is canceled and its stream closed.
use std::time::{Duration, Instant};

use a2a_server::proto::stream_response::Payload;
use futures::{StreamExt, TryStreamExt};

use crate::BoxError;
use crate::driver::{
    CALL_TIMEOUT, Conn, Sub, Target, fresh_message, is_terminal, send_request, task_state_of,
};
use crate::memory::within;
use crate::process::settled_rss_kib;
use crate::report::{Better, Measured, Metric};

/// What each task runs: 100,000 chunks a minute apart, i.e. longer than any run.
pub const COMMAND: &str = "stream 100000 60000";

#[derive(Debug, Clone)]
pub struct RunningParams {
    pub count: usize,
    pub streams_per_connection: usize,
    /// Tasks started (and canceled) at once.
    pub concurrency: usize,
    pub timeout: Duration,
}

pub async fn running(target: &Target, pid: u32, p: &RunningParams) -> Result<Measured, BoxError> {
    let m = p.count.max(1);
    let spc = p.streams_per_connection.max(1);
    let conns = target.connect_many(m.div_ceil(spc)).await?;
    let started = Instant::now();

    let warm_up = async {
        let held = start_tasks(&conns, spc, (m / 20).clamp(1, 200), p.concurrency).await?;
        cancel_tasks(&conns, held, p.concurrency).await
    };
    within("running", p.timeout, "warm-up", warm_up).await?;
    let rss0 = settled_rss_kib(pid).await?;

    let held =
        within("running", p.timeout, "starting tasks", start_tasks(&conns, spc, m, p.concurrency)).await?;
    let rss1 = settled_rss_kib(pid).await?;

    let mut notes = Vec::new();
    if let Err(error) =
        within("running", p.timeout, "canceling tasks", cancel_tasks(&conns, held, p.concurrency)).await
    {
        notes.push(format!("running: cleaning up: {error}"));
    }
    notes.push(format!(
        "running: M={m} × SendStreamingMessage `{COMMAND}`, RSS KiB {rss0} → {rss1}, {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    let per = rss1.saturating_sub(rss0) as f64 / m as f64;
    Ok(Measured {
        metrics: vec![
            Metric::new("per running task+stream", "KiB", per, Better::Lower),
            Metric::new("RSS before", "MiB", rss0 as f64 / 1024.0, Better::Info),
            Metric::new("RSS at peak", "MiB", rss1 as f64 / 1024.0, Better::Info),
        ],
        notes,
    })
}

/// `count` running tasks, streams `per_connection` to a connection, `concurrency` started at
/// once; each with its open stream, read up to its first chunk.
async fn start_tasks(
    conns: &[Conn],
    per_connection: usize,
    count: usize,
    concurrency: usize,
) -> Result<Vec<(String, Sub)>, BoxError> {
    futures::stream::iter(0..count)
        .map(|i| {
            let conn = conns[(i / per_connection) % conns.len()].clone();
            async move { start_task(&conn).await }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect()
        .await
}

/// One SendStreamingMessage [`COMMAND`], read up to its first artifact chunk.
async fn start_task(conn: &Conn) -> Result<(String, Sub), BoxError> {
    let mut sub = conn.send_streaming(send_request(fresh_message(COMMAND, None), false)).await?;
    let mut task_id = None;
    loop {
        let item = tokio::time::timeout(CALL_TIMEOUT, sub.next())
            .await
            .map_err(|_| format!("SendStreamingMessage: no first chunk within {CALL_TIMEOUT:?}"))??;
        match item.and_then(|item| item.payload) {
            Some(Payload::Task(task)) => task_id = Some(task.id),
            Some(Payload::StatusUpdate(update)) => {
                let state = task_state_of(update.status.as_ref().map(|s| s.state));
                if is_terminal(state) {
                    return Err(format!("`{COMMAND}` ended {state:?} before its first chunk").into());
                }
                task_id.get_or_insert(update.task_id);
            }
            Some(Payload::ArtifactUpdate(update)) => return Ok((task_id.unwrap_or(update.task_id), sub)),
            Some(Payload::Message(_)) => {
                return Err(format!("`{COMMAND}` answered a Message (not the demo agent?)").into());
            }
            None => return Err(format!("the stream of `{COMMAND}` ended before its first chunk").into()),
        }
    }
}

/// Cancels the tasks and closes their streams.
async fn cancel_tasks(conns: &[Conn], held: Vec<(String, Sub)>, concurrency: usize) -> Result<(), BoxError> {
    let ids: Vec<String> = held.into_iter().map(|(id, _stream)| id).collect();
    futures::stream::iter(ids.iter().enumerate())
        .map(|(i, id)| {
            let conn = conns[i % conns.len()].clone();
            async move { conn.cancel(id).await }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<()>()
        .await
}
