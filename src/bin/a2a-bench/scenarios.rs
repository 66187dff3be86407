//! The throughput and latency scenarios: unary echo, burst fan-out, first-event latency. Each
//! runs against one [`Target`] and returns its metrics; `main` runs it against our server and
//! the baseline in turn, with the same client, so that client costs cancel out in the ratio.
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{StreamResponse, Task, TaskState};
use futures::{StreamExt, TryStreamExt};
use prost::Message as _;
use tokio::sync::mpsc;

use crate::BoxError;
use crate::driver::{
    Conn, Sub, Target, fresh_message, send_request, task_state, task_state_of, texts, user_message,
};
use crate::report::{Better, Measured, Metric, percentile};

/// How many subscribe calls are in flight at once while attaching many subscribers.
pub const ATTACH_CONCURRENCY: usize = 256;

fn micros(sorted_nanos: &[u64], q: f64) -> f64 {
    percentile(sorted_nanos, q) / 1000.0
}

fn connections_for(streams: usize, per_connection: usize) -> usize {
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
pub async fn unary(target: &Target, p: &UnaryParams) -> Result<Measured, BoxError> {
    let conns = target.connect_many(p.connections).await?;
    let probe = conns[0].send(send_request(user_message("bench-probe".into(), &p.text, None), false)).await?;
    let response_bytes = probe.encoded_len();
    if !p.warmup.is_zero() {
        unary_load(&conns, p.concurrency, &p.text, Stop::After(p.warmup)).await;
    }
    let load = unary_load(&conns, p.concurrency, &p.text, p.stop).await;
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
    Ok(Measured {
        metrics: vec![
            Metric::new(
                "throughput",
                "req/s",
                load.nanos.len() as f64 / load.elapsed.as_secs_f64(),
                Better::Higher,
            ),
            Metric::new("latency p50", "µs", micros(&load.nanos, 0.50), Better::Lower),
            Metric::new("latency p99", "µs", micros(&load.nanos, 0.99), Better::Lower),
            Metric::new("errors", "calls", load.errors as f64, Better::Zero),
            Metric::new("response size", "B protobuf", response_bytes as f64, Better::Info),
        ],
        notes,
    })
}

struct Load {
    /// Latencies of the successful calls, sorted.
    nanos: Vec<u64>,
    errors: u64,
    first_error: Option<String>,
    elapsed: Duration,
}

async fn unary_load(conns: &[Conn], concurrency: usize, text: &str, stop: Stop) -> Load {
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
            let conn = conns[worker % conns.len()].clone();
            let text = text.to_owned();
            let budget = budget.clone();
            tokio::spawn(async move {
                let mut nanos = Vec::with_capacity(4096);
                let (mut errors, mut first_error) = (0u64, None);
                for i in 0u64.. {
                    if deadline.is_some_and(|d| Instant::now() >= d)
                        || budget.fetch_sub(1, Ordering::Relaxed) <= 0
                    {
                        break;
                    }
                    let request =
                        send_request(user_message(format!("bench-{worker}-{i}"), &text, None), false);
                    let sent = Instant::now();
                    match conn.send(request).await {
                        Ok(_) => nanos.push(sent.elapsed().as_nanos() as u64),
                        Err(error) => {
                            errors += 1;
                            first_error.get_or_insert_with(|| error.to_string());
                        }
                    }
                }
                (nanos, errors, first_error)
            })
        })
        .collect();
    let mut load = Load { nanos: Vec::new(), errors: 0, first_error: None, elapsed: Duration::ZERO };
    for worker in workers {
        match worker.await {
            Ok((nanos, errors, first_error)) => {
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
    load.elapsed = start.elapsed();
    load.nanos.sort_unstable();
    load
}

// ---------------------------------------------------------------------------------------------
// fan-out

/// How the fan-out gets N subscribers onto a task before its burst starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FanoutMethod {
    /// `input` → idle INPUT_REQUIRED task; attach everyone; the follow-up `stream E 0` starts the
    /// burst. No timing assumptions at all.
    Input,
    /// `stream E 0 WAIT` with returnImmediately; attach everyone within WAIT ms (retried with a
    /// 4× larger WAIT, twice, if some subscriber attached too late).
    Wait,
}

#[derive(Debug, Clone)]
pub struct FanoutParams {
    pub subscribers: usize,
    pub events: u64,
    pub method: FanoutMethod,
    pub wait_ms: u64,
    pub streams_per_connection: usize,
    pub timeout: Duration,
}

/// One task, N subscribers, a burst of E chunks: events delivered per second in total, from the
/// first chunk any subscriber saw to the last subscriber's end of stream, and a check that every
/// subscriber got `chunk 0`…`chunk E-1` exactly once, in order (snapshot + stream).
pub async fn fanout(target: &Target, p: &FanoutParams) -> Result<Measured, BoxError> {
    let conns = target.connect_many(connections_for(p.subscribers, p.streams_per_connection)).await?;
    let control = target.connect().await?;
    let mut notes = Vec::new();
    let attempt = match p.method {
        FanoutMethod::Input => fanout_once(&conns, &control, p, None).await?,
        FanoutMethod::Wait => {
            let mut wait_ms = p.wait_ms.max(1);
            let mut tries = 0;
            loop {
                let attempt = fanout_once(&conns, &control, p, Some(wait_ms)).await?;
                tries += 1;
                if attempt.late == 0 {
                    break attempt;
                }
                let what = format!(
                    "{} of {} subscribers attached after the burst had begun (WAIT {wait_ms} ms, attach took {} ms)",
                    attempt.late,
                    p.subscribers,
                    attempt.attach.as_millis()
                );
                if tries == 3 {
                    return Err(format!("{what}; giving up after 3 tries, raise --wait-ms").into());
                }
                notes.push(format!("{what}; retried with WAIT {} ms", wait_ms * 4));
                wait_ms *= 4;
            }
        }
    };
    let reports = attempt.reports;
    let first_chunk = reports.iter().filter_map(|r| r.first_chunk).min();
    let last_done = reports.iter().map(|r| r.done).max();
    let delivered: u64 = reports.iter().map(|r| r.streamed).sum();
    let burst = match (first_chunk, last_done) {
        (Some(first), Some(last)) => last.saturating_duration_since(first),
        _ => Duration::ZERO,
    };
    let lost: u64 = reports.iter().map(|r| r.lost).sum();
    let reordered: u64 = reports.iter().map(|r| r.out_of_order + r.duplicates).sum();
    let failed: Vec<&SubReport> = reports.iter().filter(|r| r.failure.is_some()).collect();
    if let Some(first) = failed.first() {
        notes.push(format!(
            "{} subscribers failed, the first: {}",
            failed.len(),
            first.failure.as_deref().unwrap_or_default()
        ));
    }
    let rate = if burst.is_zero() { 0.0 } else { delivered as f64 / burst.as_secs_f64() };
    Ok(Measured {
        metrics: vec![
            Metric::new("delivered", "events/s", rate, Better::Higher),
            Metric::new("burst", "ms", burst.as_secs_f64() * 1000.0, Better::Lower),
            Metric::new("attach all", "ms", attempt.attach.as_secs_f64() * 1000.0, Better::Lower),
            Metric::new("lost", "events", lost as f64, Better::Zero),
            Metric::new("reordered/dup", "events", reordered as f64, Better::Zero),
            Metric::new("failed subs", "subs", failed.len() as f64, Better::Zero),
        ],
        notes,
    })
}

struct Attempt {
    reports: Vec<SubReport>,
    /// From the task's creation to the last subscriber having its snapshot.
    attach: Duration,
    /// Subscribers whose snapshot already held chunks: they attached after the burst began.
    late: usize,
}

async fn fanout_once(
    conns: &[Conn],
    control: &Conn,
    p: &FanoutParams,
    wait_ms: Option<u64>,
) -> Result<Attempt, BoxError> {
    let started = Instant::now();
    let task = match wait_ms {
        None => idle_task(control).await?,
        Some(wait) => {
            let text = format!("stream {} 0 {wait}", p.events);
            control.send_for_task(send_request(fresh_message(&text, None), true)).await?
        }
    };
    let (ack_tx, mut acks) = mpsc::unbounded_channel();
    let spc = p.streams_per_connection.max(1);
    let mut subscribers: Vec<_> = (0..p.subscribers)
        .map(|i| tokio::spawn(subscriber(conns[i / spc].clone(), task.id.clone(), p.events, ack_tx.clone())))
        .collect();
    drop(ack_tx);

    let mut late = 0;
    let attached = tokio::time::timeout(p.timeout, async {
        for _ in 0..p.subscribers {
            match acks.recv().await {
                Some(Ok(0)) => {}
                Some(Ok(_)) => late += 1,
                Some(Err(error)) => return Err(error),
                None => return Err("a subscriber task vanished".to_owned()),
            }
        }
        Ok(())
    })
    .await;
    match attached {
        Ok(Ok(())) => {}
        Ok(Err(error)) => {
            abort_all(&subscribers);
            return Err(format!("attaching subscribers: {error}").into());
        }
        Err(_) => {
            abort_all(&subscribers);
            return Err(
                format!("attaching {} subscribers took longer than {:?}", p.subscribers, p.timeout).into()
            );
        }
    }
    let attach = started.elapsed();
    if wait_ms.is_none() {
        let text = format!("stream {} 0", p.events);
        control.send_for_task(send_request(fresh_message(&text, Some(&task.id)), true)).await?;
    }
    let joined = tokio::time::timeout(p.timeout, futures::future::join_all(subscribers.iter_mut())).await;
    let Ok(joined) = joined else {
        abort_all(&subscribers);
        return Err(format!("the burst did not reach every subscriber within {:?}", p.timeout).into());
    };
    let reports = joined
        .into_iter()
        .map(|r| r.unwrap_or_else(|e| SubReport::failed(format!("subscriber task failed: {e}"))))
        .collect();
    Ok(Attempt { reports, attach, late })
}

fn abort_all<T>(tasks: &[tokio::task::JoinHandle<T>]) {
    tasks.iter().for_each(|t| t.abort());
}

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

/// What one fan-out subscriber saw.
struct SubReport {
    first_chunk: Option<Instant>,
    done: Instant,
    /// Chunks that came on the stream (not in the snapshot).
    streamed: u64,
    lost: u64,
    out_of_order: u64,
    duplicates: u64,
    /// Why this subscriber does not count as a clean run, if it does not.
    failure: Option<String>,
}

impl SubReport {
    fn failed(why: String) -> Self {
        Self {
            first_chunk: None,
            done: Instant::now(),
            streamed: 0,
            lost: 0,
            out_of_order: 0,
            duplicates: 0,
            failure: Some(why),
        }
    }
}

/// Which chunks a subscriber has seen, and in what order.
struct Chunks {
    seen: Vec<bool>,
    next: u64,
    out_of_order: u64,
    duplicates: u64,
    foreign: u64,
}

impl Chunks {
    fn new(total: u64) -> Self {
        Self { seen: vec![false; total as usize], next: 0, out_of_order: 0, duplicates: 0, foreign: 0 }
    }

    fn push(&mut self, text: &str) {
        let Some(k) = text.strip_prefix("chunk ").and_then(|n| n.parse::<u64>().ok()) else {
            self.foreign += 1;
            return;
        };
        match self.seen.get_mut(k as usize) {
            None => self.foreign += 1,
            Some(true) => self.duplicates += 1,
            Some(seen) => {
                *seen = true;
                if k != self.next {
                    self.out_of_order += 1;
                }
                self.next = k + 1;
            }
        }
    }

    fn lost(&self) -> u64 {
        self.seen.iter().filter(|s| !**s).count() as u64
    }
}

/// The chunk texts a Task snapshot already holds (the `stream` artifact's parts).
fn snapshot_chunks(task: &Task) -> impl Iterator<Item = &str> {
    task.artifacts.iter().filter(|a| a.artifact_id == "stream").flat_map(|a| texts(&a.parts))
}

/// One fan-out subscriber: subscribe, report the snapshot's chunk count on `ack` (0 means it
/// attached before the burst), then read to the end of the stream.
async fn subscriber(
    conn: Conn,
    task_id: String,
    events: u64,
    ack: mpsc::UnboundedSender<Result<usize, String>>,
) -> SubReport {
    let (mut sub, snapshot) = match subscribe_for_snapshot(&conn, &task_id).await {
        Ok(pair) => pair,
        Err(error) => {
            let _ = ack.send(Err(error.to_string()));
            return SubReport::failed(error.to_string());
        }
    };
    let mut chunks = Chunks::new(events);
    let mut in_snapshot = 0;
    for text in snapshot_chunks(&snapshot) {
        chunks.push(text);
        in_snapshot += 1;
    }
    let _ = ack.send(Ok(in_snapshot));
    drop(ack);

    let mut state = task_state(&snapshot);
    let (mut first_chunk, mut streamed, mut failure) = (None, 0, None);
    loop {
        match sub.next().await {
            Ok(Some(StreamResponse { payload: Some(Payload::ArtifactUpdate(update)) })) => {
                first_chunk.get_or_insert_with(Instant::now);
                for text in update.artifact.iter().flat_map(|a| texts(&a.parts)) {
                    chunks.push(text);
                    streamed += 1;
                }
            }
            Ok(Some(StreamResponse { payload: Some(Payload::StatusUpdate(update)) })) => {
                state = task_state_of(update.status.as_ref().map(|s| s.state));
            }
            Ok(Some(other)) => chunks.foreign += u64::from(other.payload.is_some()),
            Ok(None) => break,
            Err(error) => {
                failure = Some(error.to_string());
                break;
            }
        }
    }
    let done = Instant::now();
    if failure.is_none() && state != TaskState::Completed {
        failure = Some(format!("the stream ended in state {state:?}, not COMPLETED"));
    }
    if failure.is_none() && chunks.foreign > 0 {
        failure = Some(format!("{} items that are not `chunk K` artifact parts", chunks.foreign));
    }
    SubReport {
        first_chunk,
        done,
        streamed,
        lost: chunks.lost(),
        out_of_order: chunks.out_of_order,
        duplicates: chunks.duplicates,
        failure,
    }
}

/// SubscribeToTask and its first item, which must be the Task.
pub async fn subscribe_for_snapshot(conn: &Conn, task_id: &str) -> Result<(Sub, Task), BoxError> {
    let mut sub = conn.subscribe(task_id).await?;
    match sub.next().await? {
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
