//! `--fleet N`: the server as a fleet on Redis, measured against the same work on one
//! memory-mode server.
//!
//! The benchmark starts its own `redis-server` on a free loopback port (no RDB, no AOF), or
//! with `--redis-cluster NODES` a Redis Cluster of that many ([`redis_cluster`]), or with
//! `--redis-replicas R` one with R replicas online ([`redis_replicas`]), N replicas
//! of `--spawn-server` on it (`--store redis://…` or `redis+cluster://…`, with the default key
//! prefix: the Redis is theirs alone, and every byte of a longer prefix, in every key of every
//! command, would be measured as the store's cost) and one `--store memory` server, and stops
//! them all at the end, on an error, or on Ctrl-C (every child is killed when its handle
//! drops). Each scenario runs on the fleet and on the memory server in turn, `--repeat` times,
//! and reports medians; the table's `memory` column is the same scenario with every "replica"
//! being that one server, so `redis/mem` is the fleet's cost. Redis's own commands and CPU are
//! read around the measured part of each scenario ([`probe`]), summed over its nodes, net of
//! what the idle fleet sends anyway (leases, inboxes); on a cluster, with how evenly they
//! spread over the nodes; with Redis replicas, their CPU beside the primary's.
//!
//! The scenarios themselves are in [`scenarios`].
mod probe;
mod redis;
mod redis_cluster;
mod redis_replicas;
mod scenarios;

use std::time::Duration;

use self::probe::Background;
pub use self::probe::{Per, Probe};
use self::redis_cluster::RedisNodes;
use crate::cli::{Args, FleetParams, Plan, Scenario};
use crate::driver::Target;
use crate::process::ServerProcess;
use crate::report::{self, Better, Measured, Metric, Row};
use crate::{BoxError, RunState};

/// One server of a cluster: where it is and its PID (for its CPU time).
pub struct Replica {
    pub target: Target,
    pub pid: u32,
}

/// What a fleet scenario runs on: the fleet's replicas and its Redis, or the memory server
/// alone (every replica index then names it).
pub struct Cluster<'a> {
    replicas: Vec<Replica>,
    pub probe: Option<Probe<'a>>,
}

impl Cluster<'_> {
    /// Replica `i` (wrapping: on the memory server, every replica is the one server).
    pub fn replica(&self, i: usize) -> &Replica {
        &self.replicas[i % self.replicas.len()]
    }

    /// How many replicas there are (1 for the memory server).
    pub fn len(&self) -> usize {
        self.replicas.len()
    }

    /// Every server's PID.
    pub fn pids(&self) -> Vec<u32> {
        self.replicas.iter().map(|r| r.pid).collect()
    }

    /// The first `n` replicas, as a cluster of their own.
    fn first(&self, n: usize) -> Cluster<'_> {
        let replicas =
            self.replicas.iter().take(n.max(1)).map(|r| Replica { target: r.target.clone(), pid: r.pid });
        Cluster { replicas: replicas.collect(), probe: self.probe }
    }
}

/// The labels of the table's value columns in fleet mode.
pub const COLUMNS: [&str; 3] = ["redis", "memory", "redis/mem"];

/// Starts Redis, the replicas and the memory server, runs the fleet scenarios, stops them all.
pub async fn run(args: &Args, plan: &Plan, run: &mut RunState) -> Result<Vec<Row>, BoxError> {
    let (Some(p), Some(program)) = (&plan.fleet, &args.spawn_server) else {
        return Err("--fleet needs --spawn-server".into());
    };
    // fleet-unary and fleet-event-latency also measure one replica (the table of issue #35:
    // memory store against Redis store); the others cross from one replica to another.
    let one_will_do = |s: &Scenario| matches!(s, Scenario::FleetUnary | Scenario::FleetEventLatency);
    if p.replicas == 0 || (p.replicas < 2 && !plan.scenarios.iter().all(one_will_do)) {
        return Err("--fleet needs at least 2 replicas (the scenarios cross from one to another); \
                    --fleet 1 runs fleet-unary and fleet-event-latency only"
            .into());
    }
    if let Some(other) = plan.scenarios.iter().find(|s| !s.is_fleet()) {
        return Err(format!("--fleet runs only the fleet-* scenarios, not {other:?}").into());
    }
    let mut base: Vec<String> = ["--listen", "127.0.0.1:0", "--log-level", "warn"].map(String::from).into();
    base.extend(crate::process::LIFTED_LIMITS.map(String::from));
    let redis = RedisNodes::start(&p.redis_server, p.redis_cluster, p.redis_replicas).await?;
    eprintln!("a2a-bench: started {}", redis.describe());
    let mut processes = Vec::new();
    for i in 0..p.replicas {
        let mut server_args = base.clone();
        // The default prefix, named so that an A2A_REDIS_PREFIX in the environment does not apply.
        server_args.extend(["--store".into(), redis.url(), "--redis-prefix".into(), "a2a".into()]);
        server_args.extend(["--replica-id".into(), format!("bench-{i}")]);
        server_args.extend(args.server_args.iter().cloned());
        let process = ServerProcess::spawn(program, &server_args).await?;
        eprintln!("a2a-bench: started replica bench-{i} (pid {}) on {}", process.pid, process.addr);
        processes.push(process);
    }
    let mut memory_args = base.clone();
    memory_args.extend(args.server_args.iter().cloned());
    let memory = ServerProcess::spawn(program, &memory_args).await?;
    eprintln!("a2a-bench: started the memory-mode server (pid {}) on {}", memory.pid, memory.addr);

    let replica = |process: &ServerProcess| Replica {
        target: Target { binding: args.binding, url: process.url(), credential: None },
        pid: process.pid,
    };
    let background = idle_rate(&redis, p.idle).await?;
    let fleet = Cluster {
        replicas: processes.iter().map(replica).collect(),
        probe: Some(Probe { redis: &redis, background: &background }),
    };
    let alone = Cluster { replicas: vec![replica(&memory)], probe: None };

    let binding = args.binding.to_string();
    let mut rows = vec![idle_row(&binding, p, &background)];
    for scenario in &plan.scenarios {
        rows.extend(scenario_rows(*scenario, p, plan, &fleet, &alone, run, &binding).await);
    }

    for process in processes {
        process.stop().await;
    }
    memory.stop().await;
    redis.stop().await;
    Ok(rows)
}

async fn scenario_rows(
    scenario: Scenario,
    p: &FleetParams,
    plan: &Plan,
    fleet: &Cluster<'_>,
    alone: &Cluster<'_>,
    run: &mut RunState,
    binding: &str,
) -> Vec<Row> {
    let n = p.replicas;
    let pair = |name: &str, params: &str, m: Vec<Option<Measured>>| {
        report::rows(name, binding, params, m[0].as_ref(), m[1].as_ref())
    };
    let on = |label: &str| if label == "redis" { fleet } else { alone };
    const BOTH: [&str; 2] = ["redis", "memory"];
    match scenario {
        Scenario::FleetFirstEvent => {
            let (name, samples) = ("fleet-first-event", p.first_event_samples);
            let m = rounds(name, &BOTH, run, |label| scenarios::first_event(on(label), samples)).await;
            pair(name, &format!("replicas={n} samples={samples}"), m)
        }
        Scenario::FleetEventLatency => {
            let (name, l) = ("fleet-event-latency", &p.latency);
            let m = rounds(name, &BOTH, run, |label| scenarios::event_latency(on(label), l)).await;
            pair(name, &format!("replicas={n} E={} every {} ms", l.events, l.delay_ms), m)
        }
        Scenario::FleetUpdateLatency => {
            let (name, samples) = ("fleet-update-latency", (p.first_event_samples / 5).max(5));
            let m = rounds(name, &BOTH, run, |label| scenarios::update_latency(on(label), samples)).await;
            pair(name, &format!("replicas={n} samples={samples}"), m)
        }
        Scenario::FleetFanout => {
            let (name, f) = ("fleet-fanout", &p.fanout);
            let m = rounds(name, &BOTH, run, |label| scenarios::fanout(on(label), f)).await;
            pair(name, &format!("replicas={n} N={} E={}", f.subscribers, f.events), m)
        }
        Scenario::FleetUnary => {
            let name = "fleet-unary";
            let u = &plan.unary;
            let one = fleet.first(1);
            let labels: &[&str] =
                if n > 1 { &["redis×1", "memory", "redis×N"] } else { &["redis×1", "memory"] };
            let m = rounds(name, labels, run, |label| {
                let cluster = match label {
                    "redis×1" => &one,
                    "redis×N" => fleet,
                    _ => alone,
                };
                scenarios::unary(cluster, u)
            })
            .await;
            let params =
                |r: usize| format!("replicas={r} C={} conns={}/replica", u.concurrency, u.connections);
            let mut rows = report::rows(name, binding, &params(1), m[0].as_ref(), m[1].as_ref());
            if n > 1 {
                rows.extend(report::rows(name, binding, &params(n), m[2].as_ref(), m[1].as_ref()));
            }
            rows
        }
        _ => Vec::new(),
    }
}

/// Runs a scenario `run.repeat` times on each of `labels` in turn (a failure becomes a note
/// and a failing exit status) and returns the medians, one per label.
async fn rounds<'s, F, Fut>(
    name: &str,
    labels: &[&'s str],
    run: &mut RunState,
    scenario: F,
) -> Vec<Option<Measured>>
where
    F: Fn(&'s str) -> Fut,
    Fut: Future<Output = Result<Measured, BoxError>>,
{
    let total = run.repeat.max(1);
    let mut measured: Vec<Vec<Measured>> = labels.iter().map(|_| Vec::new()).collect();
    for round in 1..=total {
        for (i, label) in labels.iter().enumerate() {
            let tag = if total > 1 { format!("{label}, round {round}/{total}") } else { (*label).to_owned() };
            eprintln!("a2a-bench: {name} on {tag} …");
            match scenario(label).await {
                Ok(m) => {
                    run.notes.extend(m.notes.iter().map(|n| format!("{name} ({tag}): {n}")));
                    measured[i].push(m);
                }
                Err(error) => {
                    run.ok = false;
                    run.notes.push(format!("{name} ({tag}) failed: {error}"));
                }
            }
        }
    }
    measured.into_iter().map(report::median).collect()
}

/// What Redis gets per second from the idle fleet (lease renewals, inbox and follower reads
/// that time out), per node, subtracted from every scenario's count.
async fn idle_rate(redis: &RedisNodes, window: Duration) -> Result<Background, BoxError> {
    Probe { redis, background: &Background::default() }.background_over(window).await
}

fn idle_row(binding: &str, p: &FleetParams, background: &Background) -> Row {
    let commands = background.total().commands;
    let metric = Metric::new("redis commands when idle", "cmds/s", commands, Better::Info);
    let measured = Measured { metrics: vec![metric], notes: Vec::new() };
    let on = match (p.redis_cluster, p.redis_replicas) {
        (Some(n), _) => format!(" on {n} cluster nodes"),
        (None, 0) => String::new(),
        (None, r) => format!(" redis-replicas={r}"),
    };
    let params = format!("replicas={}{on} over {:.1} s", p.replicas, p.idle.as_secs_f64());
    report::rows("fleet-idle", binding, &params, Some(&measured), None).remove(0)
}
