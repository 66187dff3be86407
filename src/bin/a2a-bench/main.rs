//! `a2a-bench`: drives an A2A v1.0 endpoint and prints what it sustains, next to a bare tonic
//! server doing the same wire work (`--baseline`).
//!
//! ```text
//! cargo run --release --bin a2a-bench -- --spawn-server target/release/a2a-server --baseline
//! cargo run --release --bin a2a-bench -- --url http://127.0.0.1:50051 --server-pid 1234
//! cargo run --release --bin a2a-bench -- --spawn-server target/release/a2a-server --baseline --quick
//! ```
//!
//! Scenarios (each a group of rows): `unary` (SendMessage echo, C calls in flight spread
//! round-robin over `--unary-connections` HTTP/2 connections), `fan-out` (one task, N
//! subscribers, a burst of E events), `first-event` (SubscribeToTask latency with N subscribers
//! attached), `memory` (RSS per idle task and per idle stream), `running` (RSS per task whose
//! execution is in flight with its SendStreamingMessage stream open) and `burst` (RSS per task
//! holding an unread 20,000-event burst, which must then arrive whole); the memory scenarios need
//! the server's PID and run on fresh server processes when the benchmark started them. The
//! fan-out, first-event and memory scenarios rely on the demo agent's `input` and
//! `stream E MS [WAIT]` behaviours, so another server must host an agent that behaves alike.
//! `resume` (not in the default set) runs an agent of its own on an in-process server.
//! `list-stall` and `auth` (not in the default set either) each start fresh servers of their
//! own: one retaining 100,000 finished tasks, and servers without and with `--auth`.
//! `--relay` runs `relay-unary` and `relay-stream` instead ([`relay`]): our server as the relay
//! agent in front of the baseline, against the baseline called directly.
//!
//! Server CPU time (all threads' `/proc/PID/task/*/schedstat`, over the measured window) is
//! reported per call in the unary rows and per delivered event in the fan-out rows, for our
//! server and for the baseline: unlike throughput, it does not depend on how much of the shared
//! CPUs the client takes. The unary client is kept light all the same, as what it takes caps
//! both servers' throughput ([`scenarios::unary`]: bare HTTP/2 connections, one prebuilt
//! request cloned per call, no per-call timer, a preallocated [`latency`] histogram), and its
//! own CPU per call is reported too.
//!
//! Layout: [`cli`] (flags and defaults), [`driver`] (the bindings), [`scenarios`], [`fanout`],
//! [`memory`], [`running`], [`resume`], [`list_stall`], [`auth`] and [`relay`] (what is measured),
//! [`fresh`] (scenarios on servers of their own), [`baseline`] (the comparison server),
//! [`process`] (child servers, RSS, CPU), [`latency`] (the unary latency histogram),
//! [`report`] (table, JSON).
mod auth;
mod baseline;
mod burst;
mod cli;
mod driver;
mod fanout;
mod fleet;
mod fresh;
mod latency;
mod list_stall;
mod memory;
mod process;
mod push;
mod relay;
mod report;
mod resume;
mod running;
mod scenarios;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use cli::{Args, Command, Plan, Scenario};
use driver::{Binding, Target};
use fanout::FanoutMethod;
use process::ServerProcess;
use report::{Document, Machine, Measured, Row};
use scenarios::Stop;

/// Errors end a scenario (or the run) with a message; nothing here is worth a type of its own.
pub use a2a_server::error::BoxError;

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
        // On Ctrl-C or SIGTERM the run is dropped, and with it every server it started (each
        // child is killed when its handle drops).
        None => runtime.block_on(async {
            tokio::select! {
                result = run(args) => result,
                signal = interrupted() => Err(format!("{signal}: stopped, and so are the servers it started").into()),
            }
        }),
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

/// Resolves on Ctrl-C (SIGINT) or SIGTERM, naming it.
async fn interrupted() -> &'static str {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let terminated = async {
        match term.as_mut() {
            Some(term) => drop(term.recv().await),
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "interrupted",
        () = terminated => "terminated",
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
            target: Target { binding, url: process.url(), credential: None },
            pid: Some(process.pid),
            process: Some(process),
            recipe: Some((program, args)),
        })
    }

    /// A new instance of a server the benchmark started (for a measurement that must not see
    /// what earlier scenarios left in the heap), or `None` for an external one.
    async fn fresh(&self, what: &str) -> Result<Option<Server>, BoxError> {
        self.fresh_with(&[], what).await
    }

    /// [`Self::fresh`], with more arguments for the new process.
    async fn fresh_with(&self, extra: &[&str], what: &str) -> Result<Option<Server>, BoxError> {
        match &self.recipe {
            Some((program, args)) => {
                let args = args.iter().cloned().chain(extra.iter().map(|a| a.to_string())).collect();
                Ok(Some(Server::spawn(program.clone(), args, self.target.binding, what).await?))
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

async fn run(args: Args) -> Result<bool, BoxError> {
    let plan = Plan::from(&args);
    let binding = args.binding.to_string();
    if plan.fleet.is_some() {
        let mut run = RunState { repeat: args.repeat, notes: Vec::new(), ok: true, heap_used: false };
        let rows = fleet::run(&args, &plan, &mut run).await?;
        output(&args, &binding, rows, run.notes, fleet::COLUMNS)?;
        return Ok(run.ok);
    }
    if let Some(scenario) = plan.scenarios.iter().find(|s| s.is_fleet()) {
        return Err(format!("the scenario {scenario:?} needs --fleet N").into());
    }
    if plan.relay.is_some() {
        let mut run = RunState { repeat: args.repeat, notes: Vec::new(), ok: true, heap_used: false };
        let rows = relay::run(&args, &plan, &mut run).await?;
        output(&args, &binding, rows, run.notes, relay::COLUMNS)?;
        return Ok(run.ok);
    }
    if let Some(scenario) = plan.scenarios.iter().find(|s| s.is_relay()) {
        return Err(format!("the scenario {scenario:?} needs --relay").into());
    }

    let ours = match &args.spawn_server {
        Some(path) => {
            let mut server_args: Vec<String> =
                ["--listen", "127.0.0.1:0", "--log-level", "warn"].map(String::from).into();
            server_args.extend(process::LIFTED_LIMITS.map(String::from));
            server_args.extend(args.server_args.iter().cloned());
            if plan.scenarios.contains(&Scenario::Push) {
                server_args.extend(push::SERVER_ARGS.iter().map(|a| a.to_string()));
            }
            Server::spawn(path.clone(), server_args, args.binding, &path.display().to_string()).await?
        }
        None => Server::external(
            Target { binding: args.binding, url: args.url.clone(), credential: None },
            args.server_pid,
        ),
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
                    scenarios::unary(&server.target, server.pid, p)
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
                        fanout::fanout(&server.target, server.pid, p)
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
            Scenario::Push => {
                let p = &plan.push;
                let params = format!("samples={} E={} Q={}", p.samples, p.events, p.queued);
                let measured = run.ours_only("push", push::push(&ours.target, ours.pid, p).await.map(Some));
                rows.extend(report::rows("push", &binding, &params, measured.as_ref(), None));
            }
            Scenario::Burst => {
                let p = &plan.burst;
                let params = format!("M={} `stream {} 0`", p.count, p.events);
                let heap_used = run.heap_used;
                let measured = run.ours_only(
                    "burst",
                    fresh::memory_on(&ours, "server", heap_used, |target, pid| async move {
                        burst::burst(&target, pid, p).await
                    })
                    .await,
                );
                rows.extend(report::rows("burst", &binding, &params, measured.as_ref(), None));
            }
            Scenario::Hibernate => {
                let p = &plan.memory;
                let params = format!("M={} idle={}s", p.count, memory::IDLE_SECS);
                let measured = run.ours_only("hibernate", fresh::hibernate_on(&ours, p).await);
                rows.extend(report::rows("hibernate", &binding, &params, measured.as_ref(), None));
            }
            Scenario::Retained => {
                let p = &plan.memory;
                let params = format!("M={}", p.count.min(memory::RETAINED_MAX));
                let heap_used = run.heap_used;
                let measured = run.ours_only(
                    "retained",
                    fresh::memory_on(&ours, "server", heap_used, |target, pid| async move {
                        memory::retained(&target, pid, p).await
                    })
                    .await,
                );
                rows.extend(report::rows("retained", &binding, &params, measured.as_ref(), None));
            }
            Scenario::Resume => {
                // In process, on a server of its own per round; our server only.
                let params = "1 MiB artifact, 10 missed";
                let (o, _) = both("resume", &ours, None, &mut run, |_, _| resume::resume()).await;
                rows.extend(report::rows("resume", "http-json", params, o.as_ref(), None));
            }
            Scenario::ListStall => {
                let p = &plan.list_stall;
                let params = format!(
                    "tasks={} loops={} page={} C={}",
                    p.tasks, p.loops, p.page_size, p.unary.concurrency
                );
                let measured = run.ours_only("list-stall", fresh::list_stall_on(&ours, p).await);
                rows.extend(report::rows("list-stall", &binding, &params, measured.as_ref(), None));
            }
            Scenario::Auth => {
                for (kind, measured) in fresh::auth_on(&ours, &plan.unary, &mut run).await {
                    let params = format!("{kind} C={}", plan.unary.concurrency);
                    rows.extend(report::rows("auth", &binding, &params, measured.as_ref(), None));
                }
            }
            Scenario::RelayUnary | Scenario::RelayStream => {}
            Scenario::FleetFirstEvent
            | Scenario::FleetEventLatency
            | Scenario::FleetUpdateLatency
            | Scenario::FleetFanout
            | Scenario::FleetUnary => {}
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
                    fresh::memory_on(server, label, heap_used, |target, pid| async move {
                        memory::memory(&target, pid, p).await
                    })
                })
                .await;
                rows.extend(report::rows("memory", &binding, &params, o.as_ref(), b.as_ref()));
            }
            Scenario::Running => {
                let p = &plan.running;
                let params = format!("M={} `{}`", p.count, running::COMMAND);
                let heap_used = run.heap_used;
                let (o, b) = both("running", &ours, baseline.as_ref(), &mut run, |server, label| {
                    fresh::memory_on(server, label, heap_used, |target, pid| async move {
                        running::running(&target, pid, p).await
                    })
                })
                .await;
                rows.extend(report::rows("running", &binding, &params, o.as_ref(), b.as_ref()));
            }
        }
        run.heap_used |= !matches!(scenario, Scenario::Memory | Scenario::Running | Scenario::Burst);
    }

    output(&args, &binding, rows, run.notes, report::COLUMNS)?;

    ours.stop().await;
    if let Some(baseline) = baseline {
        baseline.stop().await;
    }
    Ok(run.ok)
}

/// Prints the table (and its notes) and writes the JSON document if asked.
fn output(
    args: &Args,
    binding: &str,
    rows: Vec<Row>,
    notes: Vec<String>,
    columns: [&'static str; 3],
) -> Result<(), BoxError> {
    let machine = Machine::detect();
    println!();
    println!(
        "a2a-bench {} · {} CPUs ({}) · kernel {} · binding {binding}",
        env!("CARGO_PKG_VERSION"),
        machine.cpus,
        machine.cpu_model,
        machine.kernel
    );
    println!(
        "ratio = {} / {}; (↑) higher is better, (↓) lower is better, (=0) must be zero",
        columns[0], columns[1]
    );
    println!();
    print!("{}", report::table_with(&rows, columns));
    if !notes.is_empty() {
        println!();
        for note in &notes {
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
            notes,
            columns,
        };
        let json = serde_json::to_string_pretty(&document)?;
        std::fs::write(path, json + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        eprintln!("a2a-bench: wrote {}", path.display());
    }

    Ok(())
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
        return Ok(Server::external(Target { binding: Binding::Grpc, url, credential: None }, None));
    }
    let exe = std::env::current_exe()?;
    let args = ["baseline-server", "--listen", "127.0.0.1:0"].map(String::from).into();
    Server::spawn(exe, args, Binding::Grpc, "the baseline").await
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

impl RunState {
    /// The outcome of a scenario run on our server alone: its notes kept, or its failure noted
    /// (and the run marked failed).
    fn ours_only(&mut self, name: &str, outcome: Result<Option<Measured>, BoxError>) -> Option<Measured> {
        match outcome {
            Ok(measured) => {
                let notes = measured.iter().flat_map(|m| &m.notes);
                self.notes.extend(notes.map(|n| format!("{name} (ours): {n}")));
                measured
            }
            Err(error) => {
                self.ok = false;
                self.notes.push(format!("{name}: {error}"));
                None
            }
        }
    }
}
