//! The list-stall scenario (issue 12, item 6): does a caller listing tasks hold up everyone
//! else? With `tasks` finished tasks stored (SendMessage `hi`, which the demo agent completes at
//! once, on a server that retains them all), SendMessage latency is measured alone and then
//! beside `loops` closed loops of ListTasks (one page each). A store that scans and sorts
//! every task under one lock makes the second p50 hundreds of times the first; an indexed one
//! leaves it near the first, whatever the number of tasks.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::BoxError;
use crate::driver::{Conn, Target};
use crate::process::CpuMeter;
use crate::report::{Better, Measured, Metric, percentile};
use crate::scenarios::{self, Stop, UnaryParams};

/// Sizes of the list-stall scenario.
pub struct ListStallParams {
    /// Finished tasks stored before measuring.
    pub tasks: usize,
    /// Concurrent ListTasks loops.
    pub loops: usize,
    /// Tasks per ListTasks page.
    pub page_size: i32,
    /// The SendMessage load measured alone and beside the loops.
    pub unary: UnaryParams,
    /// Limit on storing the tasks.
    pub timeout: Duration,
}

impl ListStallParams {
    /// The server flags the scenario needs: retention that keeps every task it stores.
    pub fn server_args(&self) -> Vec<String> {
        vec!["--task-retention-count".into(), (self.tasks * 2 + 100_000).to_string()]
    }
}

/// Runs the scenario on a server started with [`ListStallParams::server_args`].
pub async fn list_stall(
    target: &Target,
    pid: Option<u32>,
    p: &ListStallParams,
) -> Result<Measured, BoxError> {
    let fill = UnaryParams {
        concurrency: 64,
        stop: Stop::Requests(p.tasks as u64),
        warmup: Duration::ZERO,
        connections: 4,
        text: "hi".into(),
    };
    let started = Instant::now();
    tokio::time::timeout(p.timeout, scenarios::unary(target, None, &fill))
        .await
        .map_err(|_| format!("storing {} tasks took longer than {:?}", p.tasks, p.timeout))??;
    let fill_rate = p.tasks as f64 / started.elapsed().as_secs_f64();
    let probe = target.connect().await?;
    let stored = probe.list_tasks(1).await?.total_size.max(0) as usize;
    if stored < p.tasks {
        return Err(format!("the server lists {stored} tasks after storing {} (retention?)", p.tasks).into());
    }

    let alone = scenarios::unary(target, pid, &p.unary).await?;

    // The loops alone first, for the cost of a page; then the same loops beside the sends.
    let conns = target.connect_many(4).await?;
    let period = match p.unary.stop {
        Stop::After(d) => d,
        Stop::Requests(_) => Duration::from_secs(1),
    };
    let cpu = CpuMeter::start(pid);
    let lists = Lists::start(&conns, p);
    tokio::time::sleep(period).await;
    let (cpu, alone_lists) = (cpu.elapsed(), lists.stop().await?);
    let lists = Lists::start(&conns, p);
    let beside = scenarios::unary(target, None, &p.unary).await;
    let beside_lists = lists.stop().await?;
    let beside = beside?;
    let Listed { nanos, errors, first_error } = alone_lists;
    let errors = errors + beside_lists.errors;
    let first_error = first_error.or(beside_lists.first_error);

    let pages = nanos.len() as f64;
    let micros = |q| percentile(&nanos, q) / 1000.0;
    let (p50, p99) = (metric(&alone, "latency p50"), metric(&alone, "latency p99"));
    let (busy_p50, busy_p99) = (metric(&beside, "latency p50"), metric(&beside, "latency p99"));
    let mut metrics = vec![
        Metric::new("stored tasks", "tasks", stored as f64, Better::Info),
        Metric::new("storing rate", "tasks/s", fill_rate, Better::Info),
        Metric::new("send p50 alone", "µs", p50, Better::Lower),
        Metric::new("send p99 alone", "µs", p99, Better::Lower),
        Metric::new("send p50 beside lists", "µs", busy_p50, Better::Lower),
        Metric::new("send p99 beside lists", "µs", busy_p99, Better::Lower),
        Metric::new("send p50 slowdown", "×", busy_p50 / p50, Better::Lower),
        Metric::new("send p99 slowdown", "×", busy_p99 / p99, Better::Lower),
        Metric::new("ListTasks p50", "µs", micros(0.50), Better::Lower),
        Metric::new("ListTasks p99", "µs", micros(0.99), Better::Lower),
        Metric::new("ListTasks rate", "pages/s", pages / period.as_secs_f64(), Better::Higher),
    ];
    if let (Some(cpu), true) = (cpu, pages > 0.0) {
        metrics.push(Metric::new(
            "server CPU per ListTasks",
            "µs",
            cpu as f64 / 1000.0 / pages,
            Better::Lower,
        ));
    }
    metrics.push(Metric::new("errors", "calls", errors as f64 + metric(&beside, "errors"), Better::Zero));
    let mut notes = alone.notes;
    notes.extend(beside.notes);
    notes.extend(first_error.map(|e| format!("{errors} ListTasks errors, the first: {e}")));
    Ok(Measured { metrics, notes })
}

/// `loops` closed loops of ListTasks, running until stopped.
struct Lists {
    stop: Arc<AtomicBool>,
    loops: Vec<tokio::task::JoinHandle<Listed>>,
}

/// What ListTasks loops saw.
#[derive(Default)]
struct Listed {
    /// Latency of each page listed (sorted once the loops are stopped).
    nanos: Vec<u64>,
    errors: u64,
    first_error: Option<String>,
}

impl Lists {
    fn start(conns: &[Conn], p: &ListStallParams) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let loops = (0..p.loops.max(1))
            .map(|i| tokio::spawn(list_loop(conns[i % conns.len()].clone(), p.page_size, stop.clone())))
            .collect();
        Self { stop, loops }
    }

    /// Stops the loops and adds up what they saw.
    async fn stop(self) -> Result<Listed, BoxError> {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = Listed::default();
        for listed in self.loops {
            let listed = listed.await?;
            all.nanos.extend(listed.nanos);
            all.errors += listed.errors;
            all.first_error = all.first_error.or(listed.first_error);
        }
        all.nanos.sort_unstable();
        Ok(all)
    }
}

/// ListTasks of one page, again and again until `stop`.
async fn list_loop(conn: Conn, page_size: i32, stop: Arc<AtomicBool>) -> Listed {
    let mut listed = Listed::default();
    while !stop.load(Ordering::Relaxed) {
        let sent = Instant::now();
        match conn.list_tasks(page_size).await {
            Ok(_) => listed.nanos.push(sent.elapsed().as_nanos() as u64),
            Err(error) => {
                listed.errors += 1;
                listed.first_error.get_or_insert_with(|| error.to_string());
            }
        }
    }
    listed
}

/// A metric by name (NaN when absent).
fn metric(measured: &Measured, name: &str) -> f64 {
    measured.metrics.iter().find(|m| m.name == name).map_or(f64::NAN, |m| m.value)
}
