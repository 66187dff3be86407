//! `--relay` (issue #37): what the relay agent (`--agent a2a`) adds in front of an upstream A2A
//! agent. The benchmark starts the baseline as the upstream (a process of its own) and
//! `--spawn-server` as `--agent a2a --upstream-binding grpc --upstream <baseline>`, and runs each
//! relay scenario through the relay and on the baseline directly, alternating, with the same
//! client; the table's `relay/dir` column is then what the relay costs, and the `added` rows are
//! relay − direct.
//!
//! - `relay-unary`: the [unary](crate::scenarios::unary) scenario. Through the relay each call is
//!   our server's task (its actor, its store) plus a second gRPC call, to the upstream (a
//!   SendStreamingMessage: the upstream is taken to stream, and the baseline answers an echo
//!   there with the completed Task as the stream's one item). The relay's CPU per call and the
//!   upstream's are reported apart, and together.
//! - `relay-stream`: one SendStreamingMessage `stamped E MS` at a time: the upstream makes E
//!   chunks MS ms apart, each stamped with when it was made (wall clock, same machine); per
//!   chunk, its receipt by the client minus that stamp, read by the fan-out's
//!   [`receipts`]. MS = 0 is a burst: its latencies are mostly
//!   queueing, and its events/s the stream's throughput.
use std::time::Duration;

use a2a_server::proto::StreamResponse;
use a2a_server::proto::stream_response::Payload;

use crate::cli::{Args, Plan, RelayParams, Scenario};
use crate::driver::{Binding, CALL_TIMEOUT, Target, fresh_message, send_request};
use crate::fanout::receipts;
use crate::process::CpuMeter;
use crate::report::{self, Better, Measured, Metric, Row, percentile};
use crate::scenarios::{Stop, unary_spread};
use crate::{BoxError, RunState, Server, both, start_baseline};

/// The labels of the table's value columns in relay mode.
pub const COLUMNS: [&str; 3] = ["relay", "direct", "relay/dir"];

/// Starts the upstream and the relay, runs the relay scenarios, stops both.
pub async fn run(args: &Args, plan: &Plan, run: &mut RunState) -> Result<Vec<Row>, BoxError> {
    let (Some(p), Some(program)) = (&plan.relay, &args.spawn_server) else {
        return Err("--relay needs --spawn-server".into());
    };
    if let Some(other) = plan.scenarios.iter().find(|s| !s.is_relay()) {
        return Err(format!("--relay runs only the relay-* scenarios, not {other:?}").into());
    }
    let upstream = start_baseline(false).await?;
    let mut server_args: Vec<String> =
        ["--listen", "127.0.0.1:0", "--log-level", "warn"].map(String::from).into();
    server_args.extend(crate::process::LIFTED_LIMITS.map(String::from));
    server_args.extend(["--agent", "a2a", "--upstream-binding", "grpc", "--upstream"].map(String::from));
    server_args.push(upstream.target.url.clone());
    server_args.extend(args.server_args.iter().cloned());
    let relay = Server::spawn(program.clone(), server_args, args.binding, "the relay").await?;
    if args.binding != Binding::Grpc {
        run.notes.push(format!(
            "the baseline speaks gRPC only: the client reaches the relay over {}, the baseline over gRPC",
            args.binding
        ));
    }
    let binding = args.binding.to_string();
    let behind = upstream.pid;
    let mut rows = Vec::new();
    for scenario in &plan.scenarios {
        match scenario {
            Scenario::RelayUnary => {
                let u = &plan.unary;
                let length = match u.stop {
                    Stop::After(d) => format!("D={}s", d.as_secs_f64()),
                    Stop::Requests(n) => format!("n={n}"),
                };
                let params = format!("C={} {length} conns={}", u.concurrency, u.connections);
                let (o, b) = both("relay-unary", &relay, Some(&upstream), run, |server, label| async move {
                    let through = label == "ours";
                    let target = std::slice::from_ref(&server.target);
                    let mut m =
                        unary_spread(target, server.pid.as_slice(), u, None, behind.filter(|_| through))
                            .await?;
                    if !through {
                        // Directly, the server is the upstream: its CPU is the whole.
                        let cpu = m.metrics.iter().find(|m| m.name == "server CPU per call").map(|m| m.value);
                        if let Some(cpu) = cpu {
                            m.metrics.push(Metric::new("total CPU per call", "µs", cpu, Better::Lower));
                        }
                    }
                    Ok::<_, BoxError>(m)
                })
                .await;
                let group = report::rows("relay-unary", &binding, &params, o.as_ref(), b.as_ref());
                rows.extend(added(group, &["latency p50", "latency p99"]));
            }
            Scenario::RelayStream => {
                for &delay_ms in &p.delays_ms {
                    let params = format!("`stamped {} {delay_ms}`", p.events);
                    let (o, b) = both("relay-stream", &relay, Some(&upstream), run, |server, label| {
                        let up = behind.filter(|_| label == "ours");
                        stream(&server.target, server.pid, up, p, delay_ms)
                    })
                    .await;
                    let group = report::rows("relay-stream", &binding, &params, o.as_ref(), b.as_ref());
                    rows.extend(added(group, &["event latency p50", "event latency p99"]));
                }
            }
            _ => {}
        }
    }
    relay.stop().await;
    upstream.stop().await;
    Ok(rows)
}

/// The rows, with `added NAME` (relay − direct) after each of `names`.
fn added(group: Vec<Row>, names: &[&str]) -> Vec<Row> {
    let mut out = Vec::with_capacity(group.len() + names.len());
    for row in group {
        let extra = match (names.contains(&row.metric.as_str()), row.ours, row.baseline) {
            (true, Some(relay), Some(direct)) => Some(Row {
                metric: format!("added {}", row.metric),
                ours: Some(relay - direct),
                baseline: None,
                ratio: None,
                ..row.clone()
            }),
            _ => None,
        };
        out.push(row);
        out.extend(extra);
    }
    out
}

/// One SendStreamingMessage `stamped E MS` on `target`, read to its end: per chunk, receipt
/// minus when the upstream made it; the chunks' rate; CPU per event of the server (and of the
/// upstream behind it, with its PID); and that every chunk came once, in order.
async fn stream(
    target: &Target,
    pid: Option<u32>,
    upstream: Option<u32>,
    p: &RelayParams,
    delay_ms: u64,
) -> Result<Measured, BoxError> {
    let conn = target.connect().await?;
    let open = |text: String| {
        let conn = conn.clone();
        async move {
            let mut sub = conn.send_streaming(send_request(fresh_message(&text, None), false)).await?;
            let first = tokio::time::timeout(CALL_TIMEOUT, sub.next())
                .await
                .map_err(|_| format!("SendStreamingMessage: no first item within {CALL_TIMEOUT:?}"))??;
            match first {
                Some(StreamResponse { payload: Some(Payload::Task(_)) }) => Ok::<_, BoxError>(sub),
                other => Err(format!("the first item of the stream was {other:?}, not the Task").into()),
            }
        }
    };
    // Warm-up: the connections (ours to the relay, the relay's to the upstream), caches.
    let warm = p.events.min(50);
    let sub = open(format!("stamped {warm} 0")).await?;
    let seen = tokio::time::timeout(p.timeout, receipts(conn.clone(), sub, warm))
        .await
        .map_err(|_| format!("the warm-up stream did not end within {:?}", p.timeout))?;
    if let Some(failure) = seen.failure {
        return Err(format!("the warm-up stream: {failure}").into());
    }

    let (cpu, upstream_cpu) = (CpuMeter::start(pid), upstream.map(|pid| CpuMeter::start(Some(pid))));
    let sub = open(format!("stamped {} {delay_ms}", p.events)).await?;
    let seen = tokio::time::timeout(p.timeout, receipts(conn.clone(), sub, p.events))
        .await
        .map_err(|_| format!("the stream did not end within {:?}", p.timeout))?;
    let (cpu, upstream_cpu) = (cpu.elapsed(), upstream_cpu.and_then(|m| m.elapsed()));

    let mut lags: Vec<u64> = seen.lag.iter().flatten().copied().collect();
    lags.sort_unstable();
    let received = seen.at.iter().flatten().count();
    let mut notes = Vec::new();
    if lags.len() < received {
        notes.push(format!("{} of {received} chunks came without their stamp", received - lags.len()));
    }
    if let Some(failure) = &seen.failure {
        notes.push(format!("the stream failed: {failure}"));
    }
    let micros = |q: f64| percentile(&lags, q) / 1000.0;
    // From the upstream's making chunk 0 (its receipt less its latency) to the last receipt: in
    // a burst the chunks arrive in a few reads, so their receipts alone would say little.
    let made = match (seen.at.first(), seen.lag.first()) {
        (Some(Some(at)), Some(Some(lag))) => at.checked_sub(Duration::from_nanos(*lag)),
        _ => None,
    };
    let span = match (made, seen.at.iter().flatten().max()) {
        (Some(made), Some(last)) => last.saturating_duration_since(made),
        _ => Duration::ZERO,
    };
    let rate = if span.is_zero() { 0.0 } else { received as f64 / span.as_secs_f64() };
    let mut metrics = vec![
        Metric::new("event latency p50", "µs", micros(0.50), Better::Lower),
        Metric::new("event latency p99", "µs", micros(0.99), Better::Lower),
        Metric::new("event latency max", "µs", micros(1.0), Better::Lower),
        Metric::new("chunks made → received", "events/s", rate, Better::Higher),
    ];
    // WORKING, the chunks, COMPLETED.
    let emitted = (p.events + 2) as f64;
    if let Some(cpu) = cpu {
        metrics.push(Metric::new("server CPU per event", "µs", cpu as f64 / 1000.0 / emitted, Better::Lower));
        let total = cpu + upstream_cpu.unwrap_or(0);
        if let Some(up) = upstream_cpu {
            metrics.push(Metric::new(
                "upstream CPU per event",
                "µs",
                up as f64 / 1000.0 / emitted,
                Better::Info,
            ));
        }
        metrics.push(Metric::new(
            "total CPU per event",
            "µs",
            total as f64 / 1000.0 / emitted,
            Better::Lower,
        ));
    }
    metrics.extend([
        Metric::new("lost", "events", seen.chunks.lost() as f64, Better::Zero),
        Metric::new(
            "reordered/dup",
            "events",
            (seen.chunks.out_of_order + seen.chunks.duplicates) as f64,
            Better::Zero,
        ),
        Metric::new("failed streams", "streams", f64::from(u8::from(seen.failure.is_some())), Better::Zero),
    ]);
    Ok(Measured { metrics, notes })
}
