//! The fan-out scenario: one task, N subscribers, a burst of E events; throughput and a check
//! that every subscriber got every event exactly once, in order; and the reading of a stream's
//! chunks with their times of receipt ([`receipts`], for the fleet's and the relay's latencies).
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{StreamResponse, Task, TaskState};
use pbjson_types::value::Kind;
use tokio::sync::mpsc;

use crate::BoxError;
use crate::baseline::SENT_AT_KEY;
use crate::driver::{Conn, Sub, Target, fresh_message, send_request, task_state, task_state_of, texts};
use crate::fleet::{Per, Probe};
use crate::process::CpuMeter;
use crate::report::{Better, Measured, Metric};
use crate::scenarios::{connections_for, idle_task, subscribe_for_snapshot};

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
///
/// With the server's PID, also the server CPU time per delivered event (over the whole attempt:
/// attaching, the burst, the ends of the streams).
pub async fn fanout(target: &Target, pid: Option<u32>, p: &FanoutParams) -> Result<Measured, BoxError> {
    let conns = target.connect_many(connections_for(p.subscribers, p.streams_per_connection)).await?;
    let spc = p.streams_per_connection.max(1);
    let subscribers: Vec<Conn> = (0..p.subscribers).map(|i| conns[i / spc].clone()).collect();
    let control = target.connect().await?;
    fanout_with(&subscribers, &control, pid.as_slice(), p, None).await
}

/// [`fanout`] with subscriber i on `subscribers[i]` (a fleet spreads them over its replicas)
/// and the task created and driven on `control`. Server CPU is summed over `pids`; with a
/// `probe`, what Redis did during the burst (after every subscriber attached) is added.
pub async fn fanout_with(
    subscribers: &[Conn],
    control: &Conn,
    pids: &[u32],
    p: &FanoutParams,
    probe: Option<Probe<'_>>,
) -> Result<Measured, BoxError> {
    let conns = subscribers;
    let mut notes = Vec::new();
    let mut cpu = CpuMeter::start_all(pids);
    let attempt = match p.method {
        FanoutMethod::Input => fanout_once(conns, control, p, None, probe).await?,
        FanoutMethod::Wait => {
            let mut wait_ms = p.wait_ms.max(1);
            let mut tries = 0;
            loop {
                let attempt = fanout_once(conns, control, p, Some(wait_ms), None).await?;
                tries += 1;
                let what = match &attempt.too_late {
                    None if attempt.late == 0 => break attempt,
                    None => format!(
                        "{} of {} subscribers attached after the burst had begun (WAIT {wait_ms} ms, attach took \
                         {} ms)",
                        attempt.late,
                        p.subscribers,
                        attempt.attach.as_millis()
                    ),
                    Some(error) => {
                        format!(
                            "a subscriber could not attach before the task ended (WAIT {wait_ms} ms): {error}"
                        )
                    }
                };
                if tries == 3 {
                    return Err(format!("{what}; giving up after 3 tries, raise --wait-ms").into());
                }
                notes.push(format!("{what}; retried with WAIT {} ms", wait_ms * 4));
                wait_ms *= 4;
                cpu = CpuMeter::start_all(pids);
            }
        }
    };
    let cpu = cpu.elapsed();
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
    let mut metrics = vec![
        Metric::new("delivered", "events/s", rate, Better::Higher),
        Metric::new("burst", "ms", burst.as_secs_f64() * 1000.0, Better::Lower),
        Metric::new("attach all", "ms", attempt.attach.as_secs_f64() * 1000.0, Better::Lower),
    ];
    if let (Some(cpu), true) = (cpu, delivered > 0) {
        metrics.push(Metric::new("server CPU per event", "ns", cpu as f64 / delivered as f64, Better::Lower));
    }
    if let Some((redis, note)) = attempt.redis {
        metrics.extend(redis);
        notes.push(note);
    }
    metrics.extend([
        Metric::new("lost", "events", lost as f64, Better::Zero),
        Metric::new("reordered/dup", "events", reordered as f64, Better::Zero),
        Metric::new("failed subs", "subs", failed.len() as f64, Better::Zero),
    ]);
    Ok(Measured { metrics, notes })
}

struct Attempt {
    reports: Vec<SubReport>,
    /// From the task's creation to the last subscriber having its snapshot.
    attach: Duration,
    /// Subscribers whose snapshot already held chunks: they attached after the burst began.
    late: usize,
    /// With a WAIT: why a subscriber could not attach at all (the task had already ended);
    /// the attempt is then void and `reports` empty.
    too_late: Option<String>,
    /// With a probe: Redis's rows and note for the burst.
    redis: Option<(Vec<Metric>, String)>,
}

async fn fanout_once(
    conns: &[Conn],
    control: &Conn,
    p: &FanoutParams,
    wait_ms: Option<u64>,
    probe: Option<Probe<'_>>,
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
    let mut subscribers: Vec<_> = (0..p.subscribers)
        .map(|i| {
            let conn = conns[i % conns.len()].clone();
            tokio::spawn(subscriber(conn, task.id.clone(), p.events, ack_tx.clone()))
        })
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
            if wait_ms.is_some() {
                // Most likely the burst and the task ended before this subscriber came: retry.
                return Ok(Attempt {
                    reports: Vec::new(),
                    attach: started.elapsed(),
                    late: 0,
                    too_late: Some(error),
                    redis: None,
                });
            }
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
    let mark = match probe {
        Some(probe) => Some(probe.mark().await?),
        None => None,
    };
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
    let redis = match (probe, mark) {
        // The burst's events: WORKING, E chunks, COMPLETED.
        (Some(probe), Some(mark)) => {
            Some(probe.finish(&mark, (p.events + 2) as f64, Per::Event, "burst").await?)
        }
        _ => None,
    };
    Ok(Attempt { reports, attach, late, too_late: None, redis })
}

fn abort_all<T>(tasks: &[tokio::task::JoinHandle<T>]) {
    tasks.iter().for_each(|t| t.abort());
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
pub struct Chunks {
    seen: Vec<bool>,
    next: u64,
    pub out_of_order: u64,
    pub duplicates: u64,
    /// Items that are not `chunk K` of this burst.
    pub foreign: u64,
}

impl Chunks {
    pub fn new(total: u64) -> Self {
        Self { seen: vec![false; total as usize], next: 0, out_of_order: 0, duplicates: 0, foreign: 0 }
    }

    /// Counts one `chunk K` text; `K` if it is new.
    pub fn push(&mut self, text: &str) -> Option<u64> {
        let Some(k) = text.strip_prefix("chunk ").and_then(|n| n.parse::<u64>().ok()) else {
            self.foreign += 1;
            return None;
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
                return Some(k);
            }
        }
        None
    }

    pub fn lost(&self) -> u64 {
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

/// When each chunk reached one reader, and, for chunks stamped by the baseline (`stamped E MS`),
/// how long after it was made.
pub struct Receipts {
    pub at: Vec<Option<Instant>>,
    /// Per chunk: receipt minus [`SENT_AT_KEY`], both on the wall clock, in nanoseconds.
    pub lag: Vec<Option<u64>>,
    pub chunks: Chunks,
    pub failure: Option<String>,
}

impl Receipts {
    pub fn failed(why: String) -> Self {
        Self { at: Vec::new(), lag: Vec::new(), chunks: Chunks::new(0), failure: Some(why) }
    }
}

/// Reads a subscription (past its first item) to its end, noting when each new `chunk K`
/// arrived; `conn` is held open until then.
pub async fn receipts(conn: Conn, mut sub: Sub, events: u64) -> Receipts {
    let slots = events as usize;
    let mut out = Receipts {
        at: vec![None; slots],
        lag: vec![None; slots],
        chunks: Chunks::new(events),
        failure: None,
    };
    let mut state = TaskState::InputRequired;
    loop {
        match sub.next().await {
            Ok(Some(StreamResponse { payload: Some(Payload::ArtifactUpdate(update)) })) => {
                let now = Instant::now();
                let lag = sent_at(update.metadata.as_ref()).map(|sent| {
                    let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
                    (wall.as_nanos() as u64).saturating_sub(sent)
                });
                for text in update.artifact.iter().flat_map(|a| texts(&a.parts)) {
                    if let Some(k) = out.chunks.push(text) {
                        out.at[k as usize] = Some(now);
                        out.lag[k as usize] = lag;
                    }
                }
            }
            Ok(Some(StreamResponse { payload: Some(Payload::StatusUpdate(update)) })) => {
                state = task_state_of(update.status.as_ref().map(|s| s.state));
            }
            Ok(Some(_)) => out.chunks.foreign += 1,
            Ok(None) => break,
            Err(error) => {
                out.failure = Some(error.to_string());
                break;
            }
        }
    }
    if out.failure.is_none() && state != TaskState::Completed {
        out.failure = Some(format!("the stream ended in state {state:?}, not COMPLETED"));
    }
    if out.failure.is_none() && out.chunks.foreign > 0 {
        out.failure = Some(format!("{} items that are not `chunk K` artifact parts", out.chunks.foreign));
    }
    drop(conn);
    out
}

/// The [`SENT_AT_KEY`] stamp of an event's metadata.
fn sent_at(metadata: Option<&pbjson_types::Struct>) -> Option<u64> {
    match metadata?.fields.get(SENT_AT_KEY)?.kind.as_ref()? {
        Kind::StringValue(nanos) => nanos.parse().ok(),
        _ => None,
    }
}
