//! The fleet scenarios, each run on a [`Cluster`]: the fleet (replica 0 is "A", the owner of
//! the task; replica 1 is "B") or the memory server alone (then A and B are the same server,
//! reached over different connections).
use std::time::{Duration, Instant};

use futures::future::join_all;

use super::{Cluster, Per};
use crate::BoxError;
use crate::cli::LatencyParams;
use crate::driver::{CALL_TIMEOUT, Conn, Sub, fresh_message, send_request};
use crate::fanout::{FanoutParams, Receipts, fanout_with, receipts};
use crate::process::CpuMeter;
use crate::report::{Better, Measured, Metric, percentile};
use crate::scenarios::{
    UnaryParams, connections_for, finish_idle_task, idle_task, subscribe_for_snapshot, unary_spread,
};

/// The long task the first-event samples subscribe to: a chunk every 10 ms, for far longer
/// than any run (cancelled at the end).
const BACKGROUND_STREAM: &str = "stream 1000000 10";

/// How long the background stream's own Redis commands are counted, to be subtracted.
const STREAM_ALONE: Duration = Duration::from_millis(500);

/// Unmeasured first-event samples before the measured ones.
const WARMUP: usize = 50;

/// How long a watcher of the background stream reads before giving up on its own.
const WATCH_LIMIT: Duration = Duration::from_secs(600);

fn micros(sorted: &[u64], q: f64) -> f64 {
    percentile(sorted, q) / 1000.0
}

/// fleet-first-event: a long `stream` task runs on A, watched by one subscriber on every
/// replica (so B follows it). On a connection of its own to B, one SubscribeToTask at a time:
/// the time from the call to its first item, the Task snapshot (warm: B already follows the
/// task). Then, a fifth as many times, the same on a fresh `input` task of A's that B does not
/// follow yet (cold: B starts its follower).
pub async fn first_event(cluster: &Cluster<'_>, samples: usize) -> Result<Measured, BoxError> {
    let owner = cluster.replica(0).target.connect().await?;
    let sampler = cluster.replica(1).target.connect().await?;
    let task = owner.send_for_task(send_request(fresh_message(BACKGROUND_STREAM, None), true)).await?;
    let mut watchers = Vec::new();
    for i in 0..cluster.len() {
        let conn = cluster.replica(i).target.connect().await?;
        let (sub, _) = subscribe_for_snapshot(&conn, &task.id).await?;
        watchers.push(tokio::spawn(watch(conn, sub)));
    }
    let outcome = async {
        let sample = |id: String| {
            let sampler = &sampler;
            async move {
                let sent = Instant::now();
                subscribe_for_snapshot(sampler, &id).await?;
                Ok::<_, BoxError>(sent.elapsed().as_nanos() as u64)
            }
        };
        for _ in 0..WARMUP.min(samples) {
            sample(task.id.clone()).await?;
        }
        // What the stream and the idle fleet cost Redis without any subscribe: subtracted.
        let background = match cluster.probe {
            Some(probe) => Some(probe.background_over(STREAM_ALONE).await?),
            None => None,
        };
        let probe = cluster.probe.zip(background.as_ref()).map(|(probe, b)| probe.with_background(b));
        let mark = match probe {
            Some(probe) => Some(probe.mark().await?),
            None => None,
        };
        let mut warm = Vec::with_capacity(samples);
        for _ in 0..samples {
            warm.push(sample(task.id.clone()).await?);
        }
        let redis = match (probe, mark) {
            (Some(probe), Some(mark)) => {
                Some(probe.finish(&mark, samples as f64, Per::Subscription, "warm").await?)
            }
            _ => None,
        };
        let mut cold = Vec::new();
        let mut fresh = Vec::new();
        for _ in 0..(samples / 5).max(1) {
            let idle = idle_task(&owner).await?;
            cold.push(sample(idle.id.clone()).await?);
            fresh.push(idle.id);
        }
        for id in &fresh {
            finish_idle_task(&owner, id).await?;
        }
        Ok::<_, BoxError>((warm, cold, redis))
    }
    .await;
    watchers.iter().for_each(|w| w.abort());
    let cancelled = owner.cancel(&task.id).await;
    let (mut warm, mut cold, redis) = outcome?;
    cancelled.map_err(|e| format!("cancelling the background stream: {e}"))?;
    warm.sort_unstable();
    cold.sort_unstable();
    let mut metrics = vec![
        Metric::new("first event p50", "µs", micros(&warm, 0.50), Better::Lower),
        Metric::new("first event p99", "µs", micros(&warm, 0.99), Better::Lower),
        Metric::new("first event max", "µs", micros(&warm, 1.0), Better::Lower),
        Metric::new("cold first event p50", "µs", micros(&cold, 0.50), Better::Lower),
        Metric::new("cold first event p99", "µs", micros(&cold, 0.99), Better::Lower),
    ];
    let mut notes = Vec::new();
    if let Some((rows, note)) = redis {
        metrics.extend(rows);
        notes.push(note);
    }
    Ok(Measured { metrics, notes })
}

/// fleet-update-latency: what a subscriber waits for an update. On a fresh idle `input` task of
/// A's, one subscriber on A (the owner) and one on B; a follow-up (`returnImmediately`) makes
/// A's agent finish the task; the time from sending it to the first update each subscriber
/// receives, one sample at a time. In a fleet an update is shown only once the store holds it,
/// on the owner too, so the A column includes that write; on the memory server A and B are
/// two connections to the one server.
pub async fn update_latency(cluster: &Cluster<'_>, samples: usize) -> Result<Measured, BoxError> {
    let owner = cluster.replica(0).target.connect().await?;
    let other = cluster.replica(1).target.connect().await?;
    let (mut local, mut remote) = (Vec::with_capacity(samples), Vec::with_capacity(samples));
    for i in 0..samples + WARMUP / 5 {
        let task = idle_task(&owner).await?;
        let (mut on_owner, _) = subscribe_for_snapshot(&owner, &task.id).await?;
        let (mut on_other, _) = subscribe_for_snapshot(&other, &task.id).await?;
        let sent = Instant::now();
        let finish = owner.send(send_request(fresh_message("done", Some(&task.id)), true));
        let (finished, a, b) =
            tokio::join!(finish, first_update(&mut on_owner, sent), first_update(&mut on_other, sent));
        finished?;
        if i >= WARMUP / 5 {
            local.push(a?);
            remote.push(b?);
        }
    }
    local.sort_unstable();
    remote.sort_unstable();
    let metrics = vec![
        Metric::new("update on A p50", "µs", micros(&local, 0.50), Better::Lower),
        Metric::new("update on A p99", "µs", micros(&local, 0.99), Better::Lower),
        Metric::new("update on B p50", "µs", micros(&remote, 0.50), Better::Lower),
        Metric::new("update on B p99", "µs", micros(&remote, 0.99), Better::Lower),
    ];
    Ok(Measured { metrics, notes: Vec::new() })
}

/// Nanoseconds from `sent` to the subscription's next item.
async fn first_update(sub: &mut Sub, sent: Instant) -> Result<u64, String> {
    match tokio::time::timeout(CALL_TIMEOUT, sub.next()).await {
        Ok(Ok(Some(_))) => Ok(sent.elapsed().as_nanos() as u64),
        Ok(Ok(None)) => Err("the stream ended before its first update".to_owned()),
        Ok(Err(error)) => Err(format!("the stream failed: {error}")),
        Err(_) => Err(format!("no update within {CALL_TIMEOUT:?}")),
    }
}

/// Reads a subscription (keeping its connection) until it ends, so it never backs up.
async fn watch(conn: Conn, mut sub: Sub) {
    let deadline = Instant::now() + WATCH_LIMIT;
    while Instant::now() < deadline {
        if !matches!(sub.next().await, Ok(Some(_))) {
            break;
        }
    }
    drop(conn);
}

/// fleet-event-latency: an idle `input` task on A with a subscriber on A (local) and one on
/// every other replica; the follow-up `stream E MS` makes A emit E chunks. Each subscriber
/// notes when each chunk reached it (one clock: this process's); per chunk and remote
/// subscriber, remote receipt minus local receipt is the time the event took to cross replicas
/// beyond what a local subscriber waits.
pub async fn event_latency(cluster: &Cluster<'_>, l: &LatencyParams) -> Result<Measured, BoxError> {
    let owner = cluster.replica(0).target.connect().await?;
    let task = idle_task(&owner).await?;
    let mut readers = Vec::new();
    // Reader 0 is on A; the rest on the other replicas (on the memory server: a second one).
    for i in 0..cluster.len().max(2) {
        let conn = cluster.replica(i).target.connect().await?;
        let (sub, _) = subscribe_for_snapshot(&conn, &task.id).await?;
        readers.push(tokio::spawn(receipts(conn, sub, l.events)));
    }
    let cpu = CpuMeter::start_all(&cluster.pids());
    let mark = match cluster.probe {
        Some(probe) => Some(probe.mark().await?),
        None => None,
    };
    let text = format!("stream {} {}", l.events, l.delay_ms);
    owner.send_for_task(send_request(fresh_message(&text, Some(&task.id)), true)).await?;
    let Ok(joined) = tokio::time::timeout(l.timeout, join_all(readers.iter_mut())).await else {
        readers.iter().for_each(|r| r.abort());
        return Err(format!("the stream did not reach every subscriber within {:?}", l.timeout).into());
    };
    let cpu = cpu.elapsed();
    let emitted = (l.events + 2) as f64; // WORKING, E chunks, COMPLETED
    let redis = match (cluster.probe, mark) {
        (Some(probe), Some(mark)) => {
            let what = if l.delay_ms == 0 { "burst" } else { "paced stream" };
            Some(probe.finish(&mark, emitted, Per::Event, what).await?)
        }
        _ => None,
    };
    let seen: Vec<Receipts> = joined
        .into_iter()
        .map(|r| r.unwrap_or_else(|e| Receipts::failed(format!("reader failed: {e}"))))
        .collect();

    let mut deltas = Vec::new();
    let mut earlier = 0u64;
    for remote in &seen[1..] {
        for (local, far) in seen[0].at.iter().zip(&remote.at) {
            if let (Some(local), Some(far)) = (local, far) {
                let delta = if far >= local {
                    far.duration_since(*local).as_nanos() as i64
                } else {
                    earlier += 1;
                    -(local.duration_since(*far).as_nanos() as i64)
                };
                deltas.push(delta);
            }
        }
    }
    deltas.sort_unstable();
    let signed = |q: f64| {
        if deltas.is_empty() {
            return f64::NAN;
        }
        let rank = ((q * deltas.len() as f64).ceil() as usize).clamp(1, deltas.len());
        deltas[rank - 1] as f64 / 1000.0
    };
    let mut notes = Vec::new();
    let failed: Vec<&Receipts> = seen.iter().filter(|r| r.failure.is_some()).collect();
    if let Some(first) = failed.first() {
        notes.push(format!(
            "{} subscribers failed, the first: {}",
            failed.len(),
            first.failure.as_deref().unwrap_or("")
        ));
    }
    let mut metrics = vec![
        Metric::new("remote − local p50", "µs", signed(0.50), Better::Lower),
        Metric::new("remote − local p99", "µs", signed(0.99), Better::Lower),
        Metric::new("remote − local max", "µs", signed(1.0), Better::Lower),
        Metric::new(
            "remote before local",
            "%",
            100.0 * earlier as f64 / deltas.len().max(1) as f64,
            Better::Info,
        ),
    ];
    if let Some(cpu) = cpu {
        metrics.push(Metric::new("server CPU per event", "µs", cpu as f64 / 1000.0 / emitted, Better::Lower));
    }
    if let Some((rows, note)) = redis {
        metrics.extend(rows);
        notes.push(note);
    }
    metrics.extend([
        Metric::new("lost", "events", seen.iter().map(|r| r.chunks.lost()).sum::<u64>() as f64, Better::Zero),
        Metric::new(
            "reordered/dup",
            "events",
            seen.iter().map(|r| r.chunks.out_of_order + r.chunks.duplicates).sum::<u64>() as f64,
            Better::Zero,
        ),
        Metric::new("failed subs", "subs", failed.len() as f64, Better::Zero),
    ]);
    Ok(Measured { metrics, notes })
}

/// fleet-fanout: the fan-out scenario with subscriber i on replica i mod N (each replica's
/// share spread over connections as usual) and the task created and driven on A.
pub async fn fanout(cluster: &Cluster<'_>, f: &FanoutParams) -> Result<Measured, BoxError> {
    let n = cluster.len();
    let spc = f.streams_per_connection.max(1);
    let mut by_replica = Vec::with_capacity(n);
    for i in 0..n {
        by_replica.push(
            cluster.replica(i).target.connect_many(connections_for(f.subscribers.div_ceil(n), spc)).await?,
        );
    }
    let subscribers: Vec<Conn> =
        (0..f.subscribers).map(|i| by_replica[i % n][(i / n) / spc].clone()).collect();
    let control = cluster.replica(0).target.connect().await?;
    fanout_with(&subscribers, &control, &cluster.pids(), f, cluster.probe).await
}

/// fleet-unary: the unary scenario, calls round-robin over the cluster's replicas.
pub async fn unary(cluster: &Cluster<'_>, u: &UnaryParams) -> Result<Measured, BoxError> {
    let targets: Vec<_> = (0..cluster.len()).map(|i| cluster.replica(i).target.clone()).collect();
    unary_spread(&targets, &cluster.pids(), u, cluster.probe, None).await
}
