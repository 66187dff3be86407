//! The unary and first-event scenarios, and the helpers every scenario shares (idle tasks,
//! attaching subscribers). Each scenario runs against one [`Target`] and returns its metrics;
//! `main` runs it against our server and the baseline in turn, with the same client, so that
//! client costs weigh the same on both sides. The fan-out is in [`crate::fanout`], the memory
//! scenario in [`crate::memory`].
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{StreamResponse, Task, TaskState};
use futures::{StreamExt, TryStreamExt};
use prost::Message as _;

use crate::BoxError;
use crate::driver::{CALL_TIMEOUT, Conn, Sub, Target, fresh_message, send_request, task_state, user_message};
use crate::fleet::{Per, Probe};
use crate::process::CpuMeter;
use crate::report::{Better, Measured, Metric, percentile};

/// How many subscribe calls are in flight at once while attaching many subscribers.
pub const ATTACH_CONCURRENCY: usize = 256;

fn micros(sorted_nanos: &[u64], q: f64) -> f64 {
    percentile(sorted_nanos, q) / 1000.0
}

pub fn connections_for(streams: usize, per_connection: usize) -> usize {
    streams.div_ceil(per_connection.max(1)).max(1)
}

// ---------------------------------------------------------------------------------------------
// unary

/// How long the unary load runs.
#[derive(Debug, Clone, Copy)]
pub enum Stop {
    After(Duration),
    Requests(u64),
}

#[derive(Debug, Clone)]
pub struct UnaryParams {
    pub concurrency: usize,
    pub stop: Stop,
    pub warmup: Duration,
    pub connections: usize,
    pub text: String,
}

/// SendMessage on the echo path from `concurrency` closed-loop workers: each sends, awaits the
/// answer, and sends again, so `concurrency` is the number of calls in flight.
///
/// With the server's PID, also the server CPU time per call: unlike requests/s, it does not
/// depend on how much of the shared CPUs the client (or anyone else) takes.
pub async fn unary(target: &Target, pid: Option<u32>, p: &UnaryParams) -> Result<Measured, BoxError> {
    unary_spread(std::slice::from_ref(target), pid.as_slice(), p, None).await
}

/// [`unary`] over several servers (a fleet's replicas): `p.connections` to each, and with more
/// than one server every worker sends its successive calls round-robin over them, as a load
/// balancer would. Server CPU is summed over `pids`; with a `probe`, Redis commands and CPU per
/// call are added.
pub async fn unary_spread(
    targets: &[Target],
    pids: &[u32],
    p: &UnaryParams,
    probe: Option<Probe<'_>>,
) -> Result<Measured, BoxError> {
    let mut conns = Vec::new();
    for _ in 0..p.connections {
        for target in targets {
            conns.push(target.connect().await?);
        }
    }
    let rotate = targets.len() > 1;
    let probe_request = send_request(user_message("bench-probe".into(), &p.text, None), false);
    let response_bytes = conns[0].send(probe_request).await?.encoded_len();
    if !p.warmup.is_zero() {
        unary_load(&conns, p.concurrency, &p.text, Stop::After(p.warmup), rotate).await;
    }
    let mark = match probe {
        Some(probe) => Some(probe.mark().await?),
        None => None,
    };
    let (cpu, client_cpu) = (CpuMeter::start_all(pids), CpuMeter::start(Some(std::process::id())));
    let load = unary_load(&conns, p.concurrency, &p.text, p.stop, rotate).await;
    let (cpu, client_cpu) = (cpu.elapsed(), client_cpu.elapsed());
    if load.nanos.is_empty() {
        return Err(format!(
            "no SendMessage succeeded ({} errors; first: {})",
            load.errors,
            load.first_error.unwrap_or_default()
        )
        .into());
    }
    let mut notes = Vec::new();
    if let Some(error) = load.first_error {
        notes.push(format!("{} SendMessage errors, the first: {error}", load.errors));
    }
    let calls = load.nanos.len() as f64;
    let mut metrics = vec![
        Metric::new("throughput", "req/s", calls / load.elapsed.as_secs_f64(), Better::Higher),
        Metric::new("latency p50", "µs", micros(&load.nanos, 0.50), Better::Lower),
        Metric::new("latency p99", "µs", micros(&load.nanos, 0.99), Better::Lower),
    ];
    if let Some(cpu) = cpu {
        metrics.push(Metric::new("server CPU per call", "µs", cpu as f64 / 1000.0 / calls, Better::Lower));
    }
    if let Some(cpu) = client_cpu {
        // The client shares the machine: what it takes, the servers cannot have.
        metrics.push(Metric::new("client CPU per call", "µs", cpu as f64 / 1000.0 / calls, Better::Info));
    }
    if let (Some(probe), Some(mark)) = (probe, mark) {
        let (redis, note) = probe.finish(&mark, calls, Per::Call, "unary").await?;
        metrics.extend(redis);
        notes.push(note);
    }
    metrics.push(Metric::new("errors", "calls", load.errors as f64, Better::Zero));
    metrics.push(Metric::new("response size", "B protobuf", response_bytes as f64, Better::Info));
    Ok(Measured { metrics, notes })
}

/// How long a unary call may take before it counts as an error; a server that never answers
/// one call must not hang the benchmark.
const UNARY_CALL_TIMEOUT: Duration = Duration::from_secs(5);

struct Load {
    /// Latencies of the successful calls, sorted.
    nanos: Vec<u64>,
    errors: u64,
    first_error: Option<String>,
    elapsed: Duration,
}

/// `rotate`: worker w sends its i-th call on `conns[(w + i) % len]` (round-robin over servers)
/// instead of always on `conns[w % len]`.
async fn unary_load(conns: &[Conn], concurrency: usize, text: &str, stop: Stop, rotate: bool) -> Load {
    let start = Instant::now();
    let budget = Arc::new(AtomicI64::new(match stop {
        Stop::Requests(n) => n as i64,
        Stop::After(_) => i64::MAX,
    }));
    let deadline = match stop {
        Stop::After(d) => Some(start + d),
        Stop::Requests(_) => None,
    };
    let workers: Vec<_> = (0..concurrency.max(1))
        .map(|worker| {
            let conns = conns.to_vec();
            let text = text.to_owned();
            let budget = budget.clone();
            tokio::spawn(async move {
                let mut nanos = Vec::with_capacity(4096);
                let (mut errors, mut first_error) = (0u64, None);
                let mut last_success = start;
                for i in 0u64.. {
                    if deadline.is_some_and(|d| Instant::now() >= d)
                        || budget.fetch_sub(1, Ordering::Relaxed) <= 0
                    {
                        break;
                    }
                    let request =
                        send_request(user_message(format!("bench-{worker}-{i}"), &text, None), false);
                    let conn = &conns[(worker + if rotate { i as usize } else { 0 }) % conns.len()];
                    let sent = Instant::now();
                    match tokio::time::timeout(UNARY_CALL_TIMEOUT, conn.send(request)).await {
                        Ok(Ok(_)) => {
                            last_success = Instant::now();
                            nanos.push(last_success.duration_since(sent).as_nanos() as u64);
                        }
                        Ok(Err(error)) => {
                            errors += 1;
                            first_error.get_or_insert_with(|| error.to_string());
                        }
                        Err(_) => {
                            errors += 1;
                            first_error.get_or_insert_with(|| {
                                format!("no answer within {UNARY_CALL_TIMEOUT:?} (call abandoned)")
                            });
                        }
                    }
                }
                (nanos, errors, first_error, last_success)
            })
        })
        .collect();
    let mut load = Load { nanos: Vec::new(), errors: 0, first_error: None, elapsed: Duration::ZERO };
    let mut end = start;
    for worker in workers {
        match worker.await {
            Ok((nanos, errors, first_error, last_success)) => {
                end = end.max(last_success);
                load.nanos.extend(nanos);
                load.errors += errors;
                if load.first_error.is_none() {
                    load.first_error = first_error;
                }
            }
            Err(panic) => {
                load.errors += 1;
                load.first_error.get_or_insert_with(|| format!("worker failed: {panic}"));
            }
        }
    }
    // Up to the last answer, so that a call abandoned after UNARY_CALL_TIMEOUT does not dilute
    // the rate of the others.
    load.elapsed = end.duration_since(start);
    load.nanos.sort_unstable();
    load
}

// ---------------------------------------------------------------------------------------------
// shared

/// A new INPUT_REQUIRED task (SendMessage `input`, waiting for the turn to pause).
pub async fn idle_task(conn: &Conn) -> Result<Task, BoxError> {
    let task = conn.send_for_task(send_request(fresh_message("input", None), false)).await?;
    match task_state(&task) {
        TaskState::InputRequired => Ok(task),
        other => {
            Err(format!("`input` left the task {other:?} instead of INPUT_REQUIRED (not the demo agent?)")
                .into())
        }
    }
}

/// Ends an idle task (the demo agent completes it by echoing the answer).
pub async fn finish_idle_task(conn: &Conn, task_id: &str) -> Result<(), BoxError> {
    conn.send(send_request(fresh_message("done", Some(task_id)), false)).await.map(drop)
}

/// SubscribeToTask and its first item, which must be the Task.
pub async fn subscribe_for_snapshot(conn: &Conn, task_id: &str) -> Result<(Sub, Task), BoxError> {
    let mut sub = conn.subscribe(task_id).await?;
    let first = tokio::time::timeout(CALL_TIMEOUT, sub.next())
        .await
        .map_err(|_| format!("SubscribeToTask: no first item within {CALL_TIMEOUT:?}"))??;
    match first {
        Some(StreamResponse { payload: Some(Payload::Task(task)) }) => Ok((sub, task)),
        other => Err(format!("the first item of SubscribeToTask was {other:?}, not the Task").into()),
    }
}
// ---------------------------------------------------------------------------------------------
// first-event latency

#[derive(Debug, Clone)]
pub struct FirstEventParams {
    pub subscribers: usize,
    pub samples: usize,
    pub streams_per_connection: usize,
}

/// With N subscribers already attached to an idle task, the time from a SubscribeToTask call to
/// its first item (the Task snapshot), sampled one call at a time on a connection of its own.
pub async fn first_event(target: &Target, p: &FirstEventParams) -> Result<Measured, BoxError> {
    let conns = target.connect_many(connections_for(p.subscribers, p.streams_per_connection)).await?;
    let probe = target.connect().await?;
    let task = idle_task(&probe).await?;
    let held = attach(&conns, p.streams_per_connection, std::iter::repeat_n(task.id.as_str(), p.subscribers))
        .await?;

    let sample = || async {
        let sent = Instant::now();
        subscribe_for_snapshot(&probe, &task.id).await?;
        Ok::<_, BoxError>(sent.elapsed().as_nanos() as u64)
    };
    for _ in 0..p.samples.min(50) {
        sample().await?; // warm-up: connection windows, allocator, caches
    }
    let mut nanos = Vec::with_capacity(p.samples);
    for _ in 0..p.samples {
        nanos.push(sample().await?);
    }
    nanos.sort_unstable();
    drop(held);
    finish_idle_task(&probe, &task.id).await?;
    Ok(Measured {
        metrics: vec![
            Metric::new("first event p50", "µs", micros(&nanos, 0.50), Better::Lower),
            Metric::new("first event p99", "µs", micros(&nanos, 0.99), Better::Lower),
            Metric::new("first event max", "µs", micros(&nanos, 1.0), Better::Lower),
        ],
        notes: Vec::new(),
    })
}

/// Opens one subscription per id (ids may repeat), `per_connection` to a connection, each
/// read up to its snapshot, and returns them open.
pub async fn attach<'a>(
    conns: &[Conn],
    per_connection: usize,
    task_ids: impl Iterator<Item = &'a str>,
) -> Result<Vec<Sub>, BoxError> {
    let per_connection = per_connection.max(1);
    futures::stream::iter(task_ids.enumerate())
        .map(|(i, id)| {
            let conn = conns[(i / per_connection) % conns.len()].clone();
            async move { subscribe_for_snapshot(&conn, id).await.map(|(sub, _)| sub) }
        })
        .buffer_unordered(ATTACH_CONCURRENCY)
        .try_collect()
        .await
}
