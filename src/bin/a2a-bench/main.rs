//! `a2a-bench`: drives an A2A v1.0 endpoint and prints what it sustains, next to a bare tonic
//! server doing the same wire work (`--baseline`).
//!
//! ```text
//! cargo run --release --bin a2a-bench -- --spawn-server target/release/a2a-server --baseline
//! cargo run --release --bin a2a-bench -- --url http://127.0.0.1:50051 --server-pid 1234
//! cargo run --release --bin a2a-bench -- --spawn-server target/release/a2a-server --baseline --quick
//! ```
//!
//! Scenarios (each a group of rows): `unary` (SendMessage echo at concurrency C), `fan-out` (one
//! task, N subscribers, a burst of E events), `first-event` (SubscribeToTask latency with N
//! subscribers attached) and `memory` (RSS per idle task and per idle stream; needs the server's
//! PID). The fan-out, first-event and memory scenarios rely on the demo agent's `input` and
//! `stream E MS [WAIT]` behaviours, so another server must host an agent that behaves alike.
//!
//! Layout: [`driver`] (the bindings), [`scenarios`] and [`memory`] (what is measured),
//! [`baseline`] (the comparison server), [`process`] (child servers, RSS), [`report`] (table,
//! JSON).
mod baseline;
mod driver;
mod memory;
mod process;
mod report;
mod scenarios;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use driver::{Binding, Target};
use process::ServerProcess;
use report::{Document, Machine, Measured, Row};
use scenarios::{FanoutMethod, FanoutParams, FirstEventParams, Stop, UnaryParams};

/// Errors end a scenario (or the run) with a message; nothing here is worth a type of its own.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// a2a-bench: benchmark an A2A v1.0 endpoint against a bare tonic server.
#[derive(Debug, Parser)]
#[command(name = "a2a-bench", version, about)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,

    /// Protocol binding to drive.
    #[arg(long, value_enum, default_value_t = Binding::Grpc)]
    binding: Binding,

    /// Endpoint to benchmark (ignored with --spawn-server).
    #[arg(long, default_value = "http://127.0.0.1:50051")]
    url: String,

    /// Start this a2a-server binary on 127.0.0.1 (a free port) for the run and stop it after.
    #[arg(long, value_name = "PATH")]
    spawn_server: Option<PathBuf>,

    /// Extra argument for the spawned server (repeatable), e.g. --server-arg=--event-log-capacity=8192.
    #[arg(long = "server-arg", value_name = "ARG", allow_hyphen_values = true)]
    server_args: Vec<String>,

    /// PID of an external server at --url, for the memory scenario.
    #[arg(long, value_name = "PID", conflicts_with = "spawn_server")]
    server_pid: Option<u32>,

    /// Also measure a bare tonic server doing the same wire work, and print ours/baseline ratios.
    #[arg(long)]
    baseline: bool,

    /// Run the baseline inside this process instead of a child process (no baseline memory rows;
    /// the baseline then shares the client's runtime and threads).
    #[arg(long, requires = "baseline")]
    baseline_in_process: bool,

    /// Scenarios to run, comma-separated [default: all].
    #[arg(long, value_enum, value_delimiter = ',')]
    scenarios: Vec<Scenario>,

    /// A smoke run in a few seconds: tiny sizes, for CI (no thresholds are checked anywhere).
    #[arg(long)]
    quick: bool,

    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,

    /// unary: calls in flight [default: 32; quick: 4].
    #[arg(long)]
    concurrency: Option<usize>,

    /// unary: measured seconds [default: 5; quick: 0.5].
    #[arg(long)]
    duration_secs: Option<f64>,

    /// unary: measure this many calls instead of a duration.
    #[arg(long, conflicts_with = "duration_secs")]
    requests: Option<u64>,

    /// unary: unmeasured warm-up seconds before [default: 1; quick: 0.1].
    #[arg(long)]
    warmup_secs: Option<f64>,

    /// unary: connections the workers share.
    #[arg(long, default_value_t = 1)]
    unary_connections: usize,

    /// unary: the message text (the demo agent echoes anything that is not a command).
    #[arg(long, default_value = "hi")]
    text: String,

    /// fan-out: subscriber counts, one group of rows each [default: 100,1000; quick: 10].
    #[arg(long, value_delimiter = ',')]
    subscribers: Vec<usize>,

    /// fan-out: chunks in the burst [default: 2000; quick: 50].
    #[arg(long)]
    events: Option<u64>,

    /// fan-out: how the subscribers get attached before the burst.
    #[arg(long, value_enum, default_value_t = FanoutMethod::Input)]
    fanout_method: FanoutMethod,

    /// fan-out with --fanout-method wait: the first WAIT (ms) to try.
    #[arg(long, default_value_t = 1000)]
    wait_ms: u64,

    /// first-event: subscribers attached while sampling [default: 1000; quick: 10].
    #[arg(long)]
    first_event_subscribers: Option<usize>,

    /// first-event: samples [default: 1000; quick: 50].
    #[arg(long)]
    first_event_samples: Option<usize>,

    /// memory: tasks and streams to open per phase [default: 10000; quick: 200].
    #[arg(long)]
    memory_count: Option<usize>,

    /// Streams per connection when many are open (servers cap them per HTTP/2 connection).
    #[arg(long, default_value_t = 1000)]
    streams_per_connection: usize,

    /// Worker threads of the client runtime [default: the number of CPUs].
    #[arg(long)]
    client_threads: Option<usize>,

    /// Run each scenario this many times, alternating our server and the baseline, and report
    /// the median of each metric (on a noisy machine, 3 or 5).
    #[arg(long, default_value_t = 1)]
    repeat: usize,

    /// Limit on each phase of a scenario, in seconds.
    #[arg(long, default_value_t = 120)]
    timeout_secs: u64,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the baseline (used by --baseline to get a process of its own).
    #[command(hide = true)]
    BaselineServer {
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scenario {
    Unary,
    FanOut,
    FirstEvent,
    Memory,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if let (None, Some(threads)) = (&args.command, args.client_threads) {
        runtime.worker_threads(threads.max(1));
    }
    let runtime = match runtime.build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("a2a-bench: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = match args.command {
        Some(Command::BaselineServer { listen }) => runtime.block_on(baseline_server(listen)).map(|_| true),
        None => runtime.block_on(run(args)),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("a2a-bench: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn baseline_server(listen: SocketAddr) -> Result<(), BoxError> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    println!("a2a-bench baseline listening on {}", listener.local_addr()?);
    baseline::serve(listener).await
}

/// A server under test: where to reach it and, if known, its PID.
struct Server {
    target: Target,
    pid: Option<u32>,
    process: Option<ServerProcess>,
    /// How to start another instance, when the benchmark started this one.
    recipe: Option<(PathBuf, Vec<String>)>,
}

impl Server {
    fn external(target: Target, pid: Option<u32>) -> Self {
        Self { target, pid, process: None, recipe: None }
    }

    async fn spawn(
        program: PathBuf,
        args: Vec<String>,
        binding: Binding,
        what: &str,
    ) -> Result<Self, BoxError> {
        let process = ServerProcess::spawn(&program, &args).await?;
        eprintln!("a2a-bench: started {what} (pid {}) on {}", process.pid, process.addr);
        Ok(Self {
            target: Target { binding, url: process.url() },
            pid: Some(process.pid),
            process: Some(process),
            recipe: Some((program, args)),
        })
    }

    /// A new instance of a server the benchmark started (for a measurement that must not see
    /// what earlier scenarios left in the heap), or `None` for an external one.
    async fn fresh(&self, what: &str) -> Result<Option<Server>, BoxError> {
        match &self.recipe {
            Some((program, args)) => {
                Ok(Some(Server::spawn(program.clone(), args.clone(), self.target.binding, what).await?))
            }
            None => Ok(None),
        }
    }

    async fn stop(self) {
        if let Some(process) = self.process {
            process.stop().await;
        }
    }
}

/// Everything the scenarios need, with --quick and the defaults resolved.
struct Plan {
    scenarios: Vec<Scenario>,
    unary: UnaryParams,
    fanout: Vec<FanoutParams>,
    first_event: FirstEventParams,
    memory: memory::MemoryParams,
}

impl Plan {
    fn from(args: &Args) -> Self {
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
        Self {
            scenarios: if args.scenarios.is_empty() {
                vec![Scenario::Unary, Scenario::FanOut, Scenario::FirstEvent, Scenario::Memory]
            } else {
                args.scenarios.clone()
            },
            unary: UnaryParams {
                concurrency: args.concurrency.unwrap_or(choose(q, 4, 32)),
                stop,
                warmup: Duration::from_secs_f64(args.warmup_secs.unwrap_or(choose(q, 0.1, 1.0)).max(0.0)),
                connections: args.unary_connections.max(1),
                text: args.text.clone(),
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
            memory: memory::MemoryParams {
                count: args.memory_count.unwrap_or(choose(q, 200, 10_000)).max(1),
                streams_per_connection: spc,
                concurrency: 32,
                timeout,
            },
        }
    }
}

async fn run(args: Args) -> Result<bool, BoxError> {
    let plan = Plan::from(&args);
    let binding = args.binding.to_string();

    let ours = match &args.spawn_server {
        Some(path) => {
            let mut server_args: Vec<String> =
                ["--listen", "127.0.0.1:0", "--log-level", "warn"].map(String::from).into();
            server_args.extend(args.server_args.iter().cloned());
            Server::spawn(path.clone(), server_args, args.binding, &path.display().to_string()).await?
        }
        None => Server::external(Target { binding: args.binding, url: args.url.clone() }, args.server_pid),
    };
    let baseline = if args.baseline { Some(start_baseline(args.baseline_in_process).await?) } else { None };

    let mut rows: Vec<Row> = Vec::new();
    let mut run = RunState { repeat: args.repeat, notes: Vec::new(), ok: true, heap_used: false };
    if baseline.is_some() && args.binding != Binding::Grpc {
        run.notes.push(format!(
            "the baseline speaks gRPC only: the ratios compare our {binding} binding with bare tonic over gRPC"
        ));
    }
    for scenario in &plan.scenarios {
        match scenario {
            Scenario::Unary => {
                let p = &plan.unary;
                let length = match p.stop {
                    Stop::After(d) => format!("D={}s", d.as_secs_f64()),
                    Stop::Requests(n) => format!("n={n}"),
                };
                let params = format!("C={} {length} conns={}", p.concurrency, p.connections);
                let (o, b) = both("unary", &ours, baseline.as_ref(), &mut run, |server, _| {
                    scenarios::unary(&server.target, p)
                })
                .await;
                rows.extend(report::rows("unary", &binding, &params, o.as_ref(), b.as_ref()));
            }
            Scenario::FanOut => {
                for p in &plan.fanout {
                    let method = match p.method {
                        FanoutMethod::Input => "input",
                        FanoutMethod::Wait => "wait",
                    };
                    let params = format!("N={} E={} {method}", p.subscribers, p.events);
                    let (o, b) = both("fan-out", &ours, baseline.as_ref(), &mut run, |server, _| {
                        scenarios::fanout(&server.target, p)
                    })
                    .await;
                    rows.extend(report::rows("fan-out", &binding, &params, o.as_ref(), b.as_ref()));
                }
            }
            Scenario::FirstEvent => {
                let p = &plan.first_event;
                let params = format!("N={} samples={}", p.subscribers, p.samples);
                let (o, b) = both("first-event", &ours, baseline.as_ref(), &mut run, |server, _| {
                    scenarios::first_event(&server.target, p)
                })
                .await;
                rows.extend(report::rows("first-event", &binding, &params, o.as_ref(), b.as_ref()));
            }
            Scenario::Memory => {
                let p = &plan.memory;
                let params = format!("M={}", p.count);
                if ours.pid.is_none() && ours.recipe.is_none() {
                    run.notes.push("memory: skipped for our server: its PID is unknown (use --spawn-server or --server-pid)".into());
                }
                if baseline.as_ref().is_some_and(|b| b.pid.is_none()) {
                    run.notes.push(
                        "memory: skipped for the baseline: it runs in-process (--baseline-in-process)".into(),
                    );
                }
                let heap_used = run.heap_used;
                let (o, b) = both("memory", &ours, baseline.as_ref(), &mut run, |server, label| {
                    memory_on(server, label, p, heap_used)
                })
                .await;
                rows.extend(report::rows("memory", &binding, &params, o.as_ref(), b.as_ref()));
            }
        }
        run.heap_used |= *scenario != Scenario::Memory;
    }

    let machine = Machine::detect();
    println!();
    println!(
        "a2a-bench {} · {} CPUs ({}) · kernel {} · binding {binding}",
        env!("CARGO_PKG_VERSION"),
        machine.cpus,
        machine.cpu_model,
        machine.kernel
    );
    println!("ratio = ours / baseline; (↑) higher is better, (↓) lower is better, (=0) must be zero");
    println!();
    print!("{}", report::table(&rows));
    if !run.notes.is_empty() {
        println!();
        for note in &run.notes {
            println!("note: {note}");
        }
    }
    if let Some(path) = &args.json {
        let document = Document {
            tool: "a2a-bench",
            version: env!("CARGO_PKG_VERSION"),
            command: std::env::args().collect(),
            machine,
            rows,
            notes: run.notes,
        };
        let json = serde_json::to_string_pretty(&document)?;
        std::fs::write(path, json + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        eprintln!("a2a-bench: wrote {}", path.display());
    }

    ours.stop().await;
    if let Some(baseline) = baseline {
        baseline.stop().await;
    }
    Ok(run.ok)
}

/// The baseline server, as a child process (the default: RSS of its own, a runtime of its own,
/// like our server) or inside this process.
async fn start_baseline(in_process: bool) -> Result<Server, BoxError> {
    if in_process {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        tokio::spawn(async move {
            if let Err(error) = baseline::serve(listener).await {
                eprintln!("a2a-bench: the in-process baseline stopped: {error}");
            }
        });
        return Ok(Server::external(Target { binding: Binding::Grpc, url }, None));
    }
    let exe = std::env::current_exe()?;
    let args = ["baseline-server", "--listen", "127.0.0.1:0"].map(String::from).into();
    Server::spawn(exe, args, Binding::Grpc, "the baseline").await
}

/// The memory scenario on one server: on a fresh instance when the benchmark started the
/// server, because RSS deltas only see new pages and the earlier scenarios leave freed heap
/// behind that new tasks would quietly reuse; on the server itself otherwise (with a note if
/// this run already used its heap).
async fn memory_on(
    server: &Server,
    label: &str,
    p: &memory::MemoryParams,
    heap_used: bool,
) -> Result<Option<Measured>, BoxError> {
    if let Some(fresh) = server.fresh(&format!("a fresh {label} for the memory scenario")).await? {
        let result = match fresh.pid {
            Some(pid) => memory::memory(&fresh.target, pid, p).await,
            None => Err("the fresh server has no PID".into()),
        };
        fresh.stop().await;
        return result.map(Some);
    }
    let Some(pid) = server.pid else { return Ok(None) };
    let mut measured = memory::memory(&server.target, pid, p).await?;
    if heap_used {
        measured.notes.push(
            "measured on a server that already ran other scenarios: freed heap gets reused, so the \
         per-item figures may be low (run --scenarios memory alone on a fresh server)"
                .into(),
        );
    }
    Ok(Some(measured))
}

/// Runs one scenario on our server, then on the baseline. A failure becomes a note (and a
/// failing exit status) instead of ending the run, so the other scenarios still report.
async fn both<'s, F, Fut, T>(
    name: &str,
    ours: &'s Server,
    baseline: Option<&'s Server>,
    run: &mut RunState,
    scenario: F,
) -> (Option<Measured>, Option<Measured>)
where
    F: Fn(&'s Server, &'static str) -> Fut,
    Fut: Future<Output = Result<T, BoxError>>,
    T: Into<Option<Measured>>,
{
    let rounds = run.repeat.max(1);
    let (mut o, mut b) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        let servers = std::iter::once(("ours", ours)).chain(baseline.map(|b| ("baseline", b)));
        for (label, server) in servers {
            let tag = if rounds > 1 { format!("{label}, round {round}/{rounds}") } else { label.to_owned() };
            eprintln!("a2a-bench: {name} on {tag} …");
            match scenario(server, label).await {
                Ok(measured) => {
                    if let Some(m) = measured.into() {
                        run.notes.extend(m.notes.iter().map(|n| format!("{name} ({tag}): {n}")));
                        if label == "ours" { o.push(m) } else { b.push(m) }
                    }
                }
                Err(error) => {
                    run.ok = false;
                    run.notes.push(format!("{name} ({tag}) failed: {error}"));
                }
            }
        }
    }
    (report::median(o), report::median(b))
}

/// What the scenarios of one run share: the outcome so far and the notes for under the table.
struct RunState {
    repeat: usize,
    notes: Vec<String>,
    ok: bool,
    /// Whether any scenario other than `memory` has already run on our server.
    heap_used: bool,
}
