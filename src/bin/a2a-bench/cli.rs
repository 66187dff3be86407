//! The command line, and the plan it resolves to (`--quick` and the defaults applied).
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use crate::burst::BurstParams;
use crate::driver::Binding;
use crate::fanout::{FanoutMethod, FanoutParams};
use crate::list_stall::ListStallParams;
use crate::memory::MemoryParams;
use crate::push::PushParams;
use crate::running::RunningParams;
use crate::scenarios::{FirstEventParams, Stop, UnaryParams};

/// a2a-bench: benchmark an A2A v1.0 endpoint against a bare tonic server.
#[derive(Debug, Parser)]
#[command(name = "a2a-bench", version)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Protocol binding to drive.
    #[arg(long, value_enum, default_value_t = Binding::Grpc)]
    pub binding: Binding,

    /// Endpoint to benchmark (ignored with --spawn-server).
    #[arg(long, default_value = "http://127.0.0.1:50051")]
    pub url: String,

    /// Start this a2a-server binary on 127.0.0.1 (a free port) for the run and stop it after.
    #[arg(long, value_name = "PATH")]
    pub spawn_server: Option<PathBuf>,

    /// Extra argument for the spawned server (repeatable), e.g. --server-arg=--event-log-capacity=8192.
    #[arg(long = "server-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub server_args: Vec<String>,

    /// PID of an external server at --url, for the memory scenario.
    #[arg(long, value_name = "PID", conflicts_with = "spawn_server")]
    pub server_pid: Option<u32>,

    /// Also measure a bare tonic server doing the same wire work, and print ours/baseline ratios.
    #[arg(long)]
    pub baseline: bool,

    /// Run the baseline inside this process instead of a child process (no baseline memory rows;
    /// the baseline then shares the client's runtime and threads).
    #[arg(long, requires = "baseline")]
    pub baseline_in_process: bool,

    /// Scenarios to run, comma-separated [default: all].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub scenarios: Vec<Scenario>,

    /// A smoke run in a few seconds: tiny sizes, for CI (no thresholds are checked anywhere).
    #[arg(long)]
    pub quick: bool,

    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// unary: calls in flight [default: 32; quick: 4].
    #[arg(long)]
    pub concurrency: Option<usize>,

    /// unary: measured seconds [default: 5; quick: 0.5].
    #[arg(long)]
    pub duration_secs: Option<f64>,

    /// unary: measure this many calls instead of a duration.
    #[arg(long, conflicts_with = "duration_secs")]
    pub requests: Option<u64>,

    /// unary: unmeasured warm-up seconds before [default: 1; quick: 0.1].
    #[arg(long)]
    pub warmup_secs: Option<f64>,

    /// unary: HTTP/2 connections the calls are spread over, round-robin.
    #[arg(long, default_value_t = 4)]
    pub unary_connections: usize,

    /// unary: the message text (the demo agent echoes anything that is not a command).
    #[arg(long, default_value = "hi")]
    pub text: String,

    /// fan-out: subscriber counts, one group of rows each [default: 100,1000; quick: 10].
    #[arg(long, value_delimiter = ',')]
    pub subscribers: Vec<usize>,

    /// fan-out: chunks in the burst [default: 2000; quick: 50].
    #[arg(long)]
    pub events: Option<u64>,

    /// fan-out: how the subscribers get attached before the burst.
    #[arg(long, value_enum, default_value_t = FanoutMethod::Input)]
    pub fanout_method: FanoutMethod,

    /// fan-out with --fanout-method wait: the first WAIT (ms) to try.
    #[arg(long, default_value_t = 1000)]
    pub wait_ms: u64,

    /// first-event: subscribers attached while sampling [default: 1000; quick: 10].
    #[arg(long)]
    pub first_event_subscribers: Option<usize>,

    /// first-event: samples [default: 1000; quick: 50].
    #[arg(long)]
    pub first_event_samples: Option<usize>,

    /// memory: tasks and streams to open per phase [default: 10000; quick: 200].
    #[arg(long)]
    pub memory_count: Option<usize>,

    /// running: tasks with an execution in flight and their stream open [default: 5000; quick: 100].
    #[arg(long)]
    pub running_count: Option<usize>,

    /// burst: tasks whose burst is held unread at once [default: 10; quick: 2].
    #[arg(long)]
    pub burst_tasks: Option<usize>,

    /// burst: chunks in each task's burst [default: 20000; quick: 500].
    #[arg(long)]
    pub burst_events: Option<u64>,

    /// list-stall: finished tasks stored before measuring [default: 100000; quick: 2000].
    #[arg(long)]
    pub list_tasks: Option<usize>,

    /// list-stall: concurrent ListTasks loops.
    #[arg(long, default_value_t = 16)]
    pub list_loops: usize,

    /// list-stall: tasks per ListTasks page (1..=100).
    #[arg(long, default_value_t = 50)]
    pub list_page_size: i32,

    /// Streams per connection when many are open (servers cap them per HTTP/2 connection).
    #[arg(long, default_value_t = 1000)]
    pub streams_per_connection: usize,

    /// Worker threads of the client runtime [default: the number of CPUs].
    #[arg(long)]
    pub client_threads: Option<usize>,

    /// Run each scenario this many times, alternating our server and the baseline, and report
    /// the median of each metric (on a noisy machine, 3 or 5).
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,

    /// Run the fleet scenarios: start a `redis-server` on a free loopback port (persistence off)
    /// and N replicas of --spawn-server on it (`--store redis://…`, a prefix of their own), plus
    /// one memory-mode server to compare with. Needs N ≥ 2, except for fleet-unary and
    /// fleet-event-latency alone (`--fleet 1`: the memory store against the Redis store).
    #[arg(long, value_name = "N", requires = "spawn_server", conflicts_with_all = ["baseline", "server_pid"])]
    pub fleet: Option<usize>,

    /// fleet: the redis-server binary to start.
    #[arg(long, value_name = "PATH", default_value = "redis-server")]
    pub redis_server: String,

    /// fleet: start a Redis Cluster of NODES masters (the slots split evenly) instead of one
    /// redis-server; the replicas get `--store redis+cluster://…`, the Redis rows are summed
    /// over the nodes, and each scenario adds per-node CPU and command shares.
    #[arg(long, value_name = "NODES", requires = "fleet", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub redis_cluster: Option<u16>,

    /// fleet: start R replicas of the single redis-server (`--replicaof`, persistence off) and
    /// wait until they are online; the servers still get the primary's URL. For comparing
    /// runs with and without --server-arg=--redis-wait-replicas=R: a row adds the replicas'
    /// CPU per unit beside the primary's. Not with --redis-cluster.
    #[arg(long, value_name = "R", default_value_t = 0, requires = "fleet",
          value_parser = clap::value_parser!(u16).range(0..=16))]
    pub redis_replicas: u16,

    /// fleet-event-latency: chunks the owner emits [default: 1000; quick: 50].
    #[arg(long)]
    pub fleet_events: Option<u64>,

    /// fleet-event-latency: milliseconds between chunks (0: a burst).
    #[arg(long, default_value_t = 2)]
    pub fleet_event_ms: u64,

    /// Measure the relay agent (issue #37): start the baseline as an upstream agent and
    /// --spawn-server as `--agent a2a --upstream-binding grpc --upstream <baseline>`, and run
    /// the relay-* scenarios through the relay and on the baseline directly.
    #[arg(long, requires = "spawn_server", conflicts_with_all = ["baseline", "server_pid", "fleet"])]
    pub relay: bool,

    /// relay-stream: chunks per stream [default: 1000; quick: 50].
    #[arg(long)]
    pub relay_events: Option<u64>,

    /// relay-stream: milliseconds between chunks, one group of rows each (0: a burst).
    #[arg(long, value_delimiter = ',', default_values_t = [2, 0])]
    pub relay_event_ms: Vec<u64>,

    /// Limit on each phase of a scenario, in seconds.
    #[arg(long, default_value_t = 120)]
    pub timeout_secs: u64,
}

/// Hidden subcommands: the baseline runs as a child process of its own so that its RSS is its own.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the baseline (used by --baseline to get a process of its own).
    #[command(hide = true)]
    BaselineServer {
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
    },
}

/// The scenarios, each a group of rows; they run in the order given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    Unary,
    FanOut,
    FirstEvent,
    /// RSS per idle task, per idle task with a subscriber, per idle stream.
    Memory,
    /// RSS per task whose execution is in flight with its SendStreamingMessage stream open
    /// (`stream 100000 60000`), on a fresh server.
    Running,
    /// RSS per task holding an unread burst of `stream E 0` in its event log, and that the
    /// burst then arrives whole (our server only, on a fresh server).
    Burst,
    /// RSS per parked task once its actor has hibernated (our server only, on a fresh server
    /// started with a 1 s idle timeout).
    Hibernate,
    /// RSS per finished task while the store retains it (quick echo tasks; our server only,
    /// on a fresh server).
    Retained,
    /// Webhook delivery (our server only; not part of the default set, as it turns push on).
    Push,
    /// Resuming a task with a 1 MiB artifact after 10 missed updates, with the cursor against
    /// a fresh snapshot, over HTTP+JSON SSE (an in-process server with an agent of its own; our
    /// server only; not part of the default set: about 3 s per round).
    Resume,
    /// SendMessage p50/p99 alone and beside concurrent ListTasks loops, with many finished tasks
    /// stored (our server only, on a fresh server retaining them all; not in the default set).
    ListStall,
    /// Server CPU per SendMessage with no credential, an API key and JWTs (HS256, ES256,
    /// RS256), on fresh servers without and with a generated `--auth` file (our server only;
    /// not in the default set).
    Auth,
    /// --fleet: SubscribeToTask on replica B of a task streaming on replica A, to its snapshot.
    FleetFirstEvent,
    /// --fleet: per event, receipt on another replica minus receipt on the owner.
    FleetEventLatency,
    /// --fleet: a follow-up on A, to the first update on a subscriber on A and on B.
    FleetUpdateLatency,
    /// --fleet: a burst to subscribers spread evenly over the replicas.
    FleetFanout,
    /// --fleet: unary SendMessage in Redis mode (1 and N replicas) against memory mode.
    FleetUnary,
    /// --relay: the unary scenario through the relay, and on its upstream directly.
    RelayUnary,
    /// --relay: SendStreamingMessage `stamped E MS` through the relay and directly: per chunk,
    /// receipt minus when the upstream made it.
    RelayStream,
}

impl Scenario {
    /// Whether the scenario needs --fleet (and is the only kind --fleet runs).
    pub fn is_fleet(self) -> bool {
        matches!(
            self,
            Self::FleetFirstEvent
                | Self::FleetEventLatency
                | Self::FleetUpdateLatency
                | Self::FleetFanout
                | Self::FleetUnary
        )
    }

    /// Whether the scenario needs --relay (and is the only kind --relay runs).
    pub fn is_relay(self) -> bool {
        matches!(self, Self::RelayUnary | Self::RelayStream)
    }
}

/// Everything the scenarios need, with --quick and the defaults resolved.
pub struct Plan {
    pub scenarios: Vec<Scenario>,
    pub unary: UnaryParams,
    pub fanout: Vec<FanoutParams>,
    pub first_event: FirstEventParams,
    pub memory: MemoryParams,
    pub running: RunningParams,
    pub burst: BurstParams,
    pub push: PushParams,
    pub list_stall: ListStallParams,
    /// With --fleet.
    pub fleet: Option<FleetParams>,
    /// With --relay.
    pub relay: Option<RelayParams>,
}

/// relay-stream: how many chunks, how fast (one group of rows per pace).
pub struct RelayParams {
    pub events: u64,
    pub delays_ms: Vec<u64>,
    pub timeout: Duration,
}

/// The sizes of the fleet scenarios.
pub struct FleetParams {
    pub replicas: usize,
    pub redis_server: String,
    /// With --redis-cluster: how many cluster nodes.
    pub redis_cluster: Option<usize>,
    /// With --redis-replicas: how many replicas of the single node (0: none).
    pub redis_replicas: usize,
    /// SubscribeToTask samples on a followed task (warm); a fifth as many on fresh tasks (cold).
    pub first_event_samples: usize,
    pub latency: LatencyParams,
    pub fanout: FanoutParams,
    /// How long the idle fleet is watched for its background Redis commands.
    pub idle: Duration,
}

/// fleet-event-latency: how many chunks, how fast.
pub struct LatencyParams {
    pub events: u64,
    pub delay_ms: u64,
    pub timeout: Duration,
}

impl Plan {
    pub fn from(args: &Args) -> Self {
        let q = args.quick;
        fn choose<T>(quick: bool, small: T, full: T) -> T {
            if quick { small } else { full }
        }
        let timeout = Duration::from_secs(args.timeout_secs.max(1));
        let spc = args.streams_per_connection.max(1);
        let stop = match (args.requests, args.duration_secs) {
            (Some(n), _) => Stop::Requests(n),
            (None, Some(secs)) => Stop::After(Duration::from_secs_f64(secs.max(0.01))),
            (None, None) => Stop::After(Duration::from_secs_f64(choose(q, 0.5, 5.0))),
        };
        let subscribers = if args.subscribers.is_empty() {
            choose(q, vec![10], vec![100, 1000])
        } else {
            args.subscribers.clone()
        };
        let events = args.events.unwrap_or(choose(q, 50, 2000));
        let unary = UnaryParams {
            concurrency: args.concurrency.unwrap_or(choose(q, 4, 32)),
            stop,
            warmup: Duration::from_secs_f64(args.warmup_secs.unwrap_or(choose(q, 0.1, 1.0)).max(0.0)),
            connections: args.unary_connections.max(1),
            text: args.text.clone(),
        };
        let fleet = args.fleet.map(|replicas| FleetParams {
            replicas,
            redis_server: args.redis_server.clone(),
            redis_cluster: args.redis_cluster.map(usize::from),
            redis_replicas: usize::from(args.redis_replicas),
            first_event_samples: args.first_event_samples.unwrap_or(choose(q, 50, 1000)).max(5),
            latency: LatencyParams {
                events: args.fleet_events.unwrap_or(choose(q, 50, 1000)).max(1),
                delay_ms: args.fleet_event_ms,
                timeout,
            },
            fanout: FanoutParams {
                subscribers: args.subscribers.first().copied().unwrap_or(choose(q, 30, 1000)).max(1),
                events,
                method: FanoutMethod::Input,
                wait_ms: args.wait_ms,
                streams_per_connection: spc,
                timeout,
            },
            idle: Duration::from_secs_f64(choose(q, 0.5, 2.0)),
        });
        Self {
            scenarios: if args.scenarios.is_empty() && fleet.is_some() {
                vec![
                    Scenario::FleetFirstEvent,
                    Scenario::FleetEventLatency,
                    Scenario::FleetUpdateLatency,
                    Scenario::FleetFanout,
                    Scenario::FleetUnary,
                ]
            } else if args.scenarios.is_empty() && args.relay {
                vec![Scenario::RelayUnary, Scenario::RelayStream]
            } else if args.scenarios.is_empty() {
                vec![
                    Scenario::Unary,
                    Scenario::FanOut,
                    Scenario::FirstEvent,
                    Scenario::Memory,
                    Scenario::Running,
                    Scenario::Burst,
                    Scenario::Hibernate,
                    Scenario::Retained,
                ]
            } else {
                args.scenarios.clone()
            },
            fanout: subscribers
                .into_iter()
                .map(|n| FanoutParams {
                    subscribers: n.max(1),
                    events,
                    method: args.fanout_method,
                    wait_ms: args.wait_ms,
                    streams_per_connection: spc,
                    timeout,
                })
                .collect(),
            first_event: FirstEventParams {
                subscribers: args.first_event_subscribers.unwrap_or(choose(q, 10, 1000)),
                samples: args.first_event_samples.unwrap_or(choose(q, 50, 1000)).max(1),
                streams_per_connection: spc,
            },
            memory: MemoryParams {
                count: args.memory_count.unwrap_or(choose(q, 200, 10_000)).max(1),
                streams_per_connection: spc,
                concurrency: 32,
                timeout,
            },
            running: RunningParams {
                count: args.running_count.unwrap_or(choose(q, 100, 5_000)).max(1),
                streams_per_connection: spc,
                concurrency: 32,
                timeout,
            },
            burst: BurstParams {
                count: args.burst_tasks.unwrap_or(choose(q, 2, 10)).max(1),
                events: args.burst_events.unwrap_or(choose(q, 500, 20_000)).max(1),
                timeout,
            },
            push: PushParams {
                samples: choose(q, 20, 500),
                events: choose(q, 100, 10_000),
                queued: choose(q, 1000, 10_000),
            },
            list_stall: ListStallParams {
                tasks: args.list_tasks.unwrap_or(choose(q, 2_000, 100_000)).max(1),
                loops: args.list_loops.max(1),
                page_size: args.list_page_size.clamp(1, 100),
                // A light load, so that its latency shows the lists' interference, not its own queue.
                unary: UnaryParams { concurrency: 4, connections: 1, ..unary.clone() },
                timeout,
            },
            unary,
            fleet,
            relay: args.relay.then(|| RelayParams {
                events: args.relay_events.unwrap_or(choose(q, 50, 1000)).max(1),
                delays_ms: if args.relay_event_ms.is_empty() { vec![2] } else { args.relay_event_ms.clone() },
                timeout,
            }),
        }
    }
}
