//! The unary and first-event scenarios, and the helpers every scenario shares (idle tasks,
//! attaching subscribers). Each scenario runs against one [`Target`] and returns its metrics;
//! `main` runs it against our server and the baseline in turn, with the same client, so that
//! client costs weigh the same on both sides. The fan-out is in [`crate::fanout`], the memory
//! scenario in [`crate::memory`].
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{
    SendMessageRequest, SendMessageResponse, StreamResponse, Task, TaskState, send_message_response,
};
use futures::{StreamExt, TryStreamExt};
use prost::Message as _;

use crate::BoxError;
use crate::driver::{
    CALL_TIMEOUT, Conn, Sub, Target, UnaryConn, fresh_message, send_request, task_state, texts, user_message,
};
use crate::fleet::{Per, Probe};
use crate::latency::Histogram;
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
/// depend on how much of the shared CPUs the client (or anyone else) takes. The client is kept
/// as light as it can be all the same (bare HTTP/2 connections, one prebuilt request cloned per
/// call, no timer per call, a preallocated histogram: see `unary_load`), since what it takes
/// of the shared CPUs caps the throughput of both servers.
pub async fn unary(target: &Target, pid: Option<u32>, p: &UnaryParams) -> Result<Measured, BoxError> {
    unary_spread(std::slice::from_ref(target), pid.as_slice(), p, None, None).await
}

/// [`unary`] over several servers (a fleet's replicas): `p.connections` to each, and every
/// worker sends its successive calls round-robin over all the connections (so over the
/// servers too, as a load balancer would). Server CPU is summed over `pids`; with a `probe`,
/// Redis commands and CPU per call are added; with `upstream`, the PID of the agent the servers
/// relay to, its CPU per call over the same window and the servers' and its together.
pub async fn unary_spread(
    targets: &[Target],
    pids: &[u32],
    p: &UnaryParams,
    probe: Option<Probe<'_>>,
    upstream: Option<u32>,
) -> Result<Measured, BoxError> {
    let mut conns = Vec::new();
    for _ in 0..p.connections {
        for target in targets {
            conns.push(target.connect_unary().await?);
        }
    }
    // One request for every call, each with a messageId of its own (`unary_load`): the server
    // answers a messageId it has seen with the first call's outcome instead of running it.
    let request = send_request(user_message("bench-unary".into(), &p.text, None), false);
    let mut first = conns[0].clone();
    let response_bytes = tokio::time::timeout(CALL_TIMEOUT, first.send(numbered(&request)))
        .await
        .map_err(|_| format!("SendMessage: no answer within {CALL_TIMEOUT:?}"))??
        .encoded_len();
    if !p.warmup.is_zero() {
        unary_load(&conns, p.concurrency, &request, Stop::After(p.warmup)).await;
    }
    let mark = match probe {
        Some(probe) => Some(probe.mark().await?),
        None => None,
    };
    let (cpu, client_cpu) = (CpuMeter::start_all(pids), CpuMeter::start(Some(std::process::id())));
    let upstream_cpu = upstream.map(|pid| CpuMeter::start(Some(pid)));
    let load = unary_load(&conns, p.concurrency, &request, p.stop).await;
    let (cpu, client_cpu) = (cpu.elapsed(), client_cpu.elapsed());
    let upstream_cpu = upstream_cpu.and_then(|meter| meter.elapsed());
    let calls = load.latencies.len() as f64;
    if calls == 0.0 {
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
    let mut metrics = vec![
        Metric::new("throughput", "req/s", calls / load.elapsed.as_secs_f64(), Better::Higher),
        Metric::new("latency p50", "µs", load.latencies.percentile(0.50) / 1000.0, Better::Lower),
        Metric::new("latency p99", "µs", load.latencies.percentile(0.99) / 1000.0, Better::Lower),
        Metric::new("latency max", "µs", load.latencies.percentile(1.0) / 1000.0, Better::Lower),
    ];
    if let Some(cpu) = cpu {
        metrics.push(Metric::new("server CPU per call", "µs", cpu as f64 / 1000.0 / calls, Better::Lower));
    }
    if let (Some(cpu), Some(upstream)) = (cpu, upstream_cpu) {
        metrics.push(Metric::new(
            "upstream CPU per call",
            "µs",
            upstream as f64 / 1000.0 / calls,
            Better::Info,
        ));
        let both = (cpu + upstream) as f64 / 1000.0 / calls;
        metrics.push(Metric::new("total CPU per call", "µs", both, Better::Lower));
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

/// How long a unary call may go unanswered before its worker is abandoned and the call counts
/// as an error; a server that never answers one call must not hang the benchmark.
const UNARY_CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the coordinator looks for stalled workers.
const WATCH_EVERY: Duration = Duration::from_millis(100);

struct Load {
    /// Latencies of the successful calls.
    latencies: Histogram,
    errors: u64,
    first_error: Option<String>,
    elapsed: Duration,
}

/// What one worker has done so far, written by it alone and read by the coordinator (also
/// after abandoning it).
#[derive(Default)]
struct WorkerState {
    latencies: Histogram,
    errors: AtomicU64,
    /// Calls finished, answered or failed: the coordinator's sign of life.
    finished: AtomicU64,
    /// When the latest answer arrived, in nanoseconds since the load began.
    last_answer: AtomicU64,
    first_error: Mutex<Option<String>>,
}

/// Bumps a counter only its owner writes (no locked instruction).
fn bump(counter: &AtomicU64, by: u64) {
    counter.store(counter.load(Ordering::Relaxed) + by, Ordering::Relaxed);
}

/// `concurrency` closed-loop workers; worker w sends its i-th call on `conns[(w + i) % len]`,
/// so calls spread round-robin over every connection (and over the servers of a fleet).
///
/// The hot path is as light as the client can be: gRPC calls go straight to hyper's HTTP/2
/// connection (see [`UnaryConn`]), the request is built once and its clone is the only
/// allocation per call (besides tonic's and hyper's own and decoding the answer), each worker
/// owns its clients (no clone per call) and its latency histogram (no growing vector), and no
/// timer is armed per call: the coordinator abandons a worker whose call has gone unanswered for
/// [`UNARY_CALL_TIMEOUT`], counting that call as an error.
/// `request` with a messageId no call of this process, or of another run, has sent.
fn numbered(request: &SendMessageRequest) -> SendMessageRequest {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let mut request = request.clone();
    if let Some(message) = request.message.as_mut() {
        let n = CALLS.fetch_add(1, Ordering::Relaxed);
        message.message_id = format!("bench-unary-{}-{n}", std::process::id());
    }
    request
}

async fn unary_load(
    conns: &[UnaryConn],
    concurrency: usize,
    request: &SendMessageRequest,
    stop: Stop,
) -> Load {
    let start = Instant::now();
    let budget = match stop {
        Stop::Requests(n) => Some(Arc::new(AtomicI64::new(n as i64))),
        Stop::After(_) => None,
    };
    let deadline = match stop {
        Stop::After(d) => Some(start + d),
        Stop::Requests(_) => None,
    };
    let workers: Vec<_> = (0..concurrency.max(1))
        .map(|worker| {
            let state = Arc::new(WorkerState::default());
            let mine = state.clone();
            let mut conns = conns.to_vec();
            let request = request.clone();
            let budget = budget.clone();
            let handle = tokio::spawn(async move {
                let count = conns.len();
                let mut next = worker % count;
                loop {
                    let sent = Instant::now();
                    if deadline.is_some_and(|d| sent >= d)
                        || budget.as_ref().is_some_and(|b| b.fetch_sub(1, Ordering::Relaxed) <= 0)
                    {
                        break;
                    }
                    let conn = &mut conns[next];
                    next = if next + 1 == count { 0 } else { next + 1 };
                    let result = conn.send(numbered(&request)).await;
                    let answered = Instant::now();
                    match result.and_then(refused) {
                        Ok(()) => {
                            mine.latencies.record(answered.duration_since(sent).as_nanos() as u64);
                            let since_start = answered.duration_since(start).as_nanos() as u64;
                            mine.last_answer.store(since_start, Ordering::Relaxed);
                        }
                        Err(error) => {
                            bump(&mine.errors, 1);
                            let mut first = mine.first_error.lock().unwrap_or_else(|e| e.into_inner());
                            first.get_or_insert_with(|| error.to_string());
                        }
                    }
                    bump(&mine.finished, 1);
                }
            });
            (state, handle)
        })
        .collect();
    let mut load =
        Load { latencies: Histogram::default(), errors: 0, first_error: None, elapsed: Duration::ZERO };
    // The coordinator: waits for the workers, abandoning any whose call has stalled.
    let mut seen: Vec<(u64, Instant)> = vec![(0, Instant::now()); workers.len()];
    loop {
        let mut running = false;
        for ((state, handle), (finished, since)) in workers.iter().zip(seen.iter_mut()) {
            if handle.is_finished() {
                continue;
            }
            let now_finished = state.finished.load(Ordering::Relaxed);
            if now_finished != *finished {
                (*finished, *since) = (now_finished, Instant::now());
            } else if since.elapsed() >= UNARY_CALL_TIMEOUT {
                handle.abort();
                load.errors += 1;
                load.first_error.get_or_insert_with(|| {
                    format!("no answer within {UNARY_CALL_TIMEOUT:?} (call and its worker abandoned)")
                });
                continue;
            }
            running = true;
        }
        if !running {
            break;
        }
        tokio::time::sleep(WATCH_EVERY).await;
    }
    let mut last_answer = 0;
    for (state, handle) in workers {
        if let Err(error) = handle.await
            && error.is_panic()
        {
            load.errors += 1;
            load.first_error.get_or_insert_with(|| format!("worker failed: {error}"));
        }
        load.latencies.merge(&state.latencies);
        load.errors += state.errors.load(Ordering::Relaxed);
        last_answer = last_answer.max(state.last_answer.load(Ordering::Relaxed));
        if load.first_error.is_none() {
            load.first_error = state.first_error.lock().unwrap_or_else(|e| e.into_inner()).take();
        }
    }
    // Up to the last answer, so that an abandoned call does not dilute the rate of the others.
    load.elapsed = Duration::from_nanos(last_answer);
    load
}

/// An answer that is a task the agent ended in failure (FAILED, REJECTED, CANCELED) as an error:
/// the call was answered, but the work was not done (a relay whose upstream call failed
/// answers so). Any other answer counts, so that `unary` works with any agent.
fn refused(response: SendMessageResponse) -> Result<(), BoxError> {
    let Some(send_message_response::Payload::Task(task)) = response.payload else { return Ok(()) };
    match task_state(&task) {
        state @ (TaskState::Failed | TaskState::Rejected | TaskState::Canceled) => {
            let why =
                task.status.and_then(|s| s.message).map(|m| texts(&m.parts).collect::<Vec<_>>().join(" "));
            Err(format!("answered a {state:?} task: {}", why.unwrap_or_default()).into())
        }
        _ => Ok(()),
    }
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
