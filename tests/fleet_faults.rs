//! The fleet's fault suite (issue 32): a real `redis-server` with its append-only file, three
//! replica processes on fixed ports, and a real nginx running the shipped
//! `deploy/nginx/nginx.conf`, driven through nginx by blocking gRPC callers and by gRPC and SSE
//! streaming clients while something fails:
//!
//! - (a) Redis shut down (its AOF synced) for longer than the lease, then started again (twice);
//! - (b) Redis killed with `kill -9` under `appendfsync always`, down longer than the lease (three times);
//! - (c) a rolling restart (SIGTERM, wait for the exit, start again on the same port) of all
//!   three replicas, 3-2-1 then 1-2-3;
//! - (d) `kill -9` of the replica that owns running tasks, followed on both survivors;
//! - (e) `kill -9` of the Redis primary under three Sentinels, the replicas started with
//!   `--redis-wait-replicas 1` (`faults/failover.rs`).
//!
//! Afterwards every task a client was told about is read back. The checks are DESIGN §5's three
//! rules: an answer means stored (no acknowledged task missing or behind its answer), an event
//! shown means stored (the stored generation reaches every generation a client saw, no two
//! clients saw different events at one generation, a resume cursor is never refused), an outage
//! is not a death (no task FAILED as "replica lost" in (a)-(c)); and resuming streams get exactly
//! the events after their cursor, no Task snapshot first. In (c) the only error a client may see
//! is the resumable close; in (a) and (b) also UNAVAILABLE while Redis is down. (d) must end every
//! task FAILED on every survivor within the lease + 5 s.
//!
//! The scenarios run one after another (the table needs them all, and two cores cannot run
//! them side by side); the table goes straight to stderr, so `cargo test` shows it. The
//! replicas', nginx's and the clients' logs of a run are kept in `target/tmp/fleet-faults/<pid>/`
//! (a scenario's `-findings.log` lists every finding, its `-clients.log` everything each client
//! got, its `-timeline.log` what the suite did when). `FLEET_FAULTS=ab` runs only (a) and (b).
//!
//! Without `redis-server` or nginx the suite skips loudly, except under `CI=true`, where it fails.
mod common;
#[path = "faults/failover.rs"]
mod failover;
#[path = "faults/ledger.rs"]
mod ledger;
#[path = "faults/traffic.rs"]
mod traffic;
#[path = "faults/wire.rs"]
mod wire;

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use a2a_server::proto::{GetTaskRequest, SendMessageConfiguration, SendMessageRequest, TaskState};
use common::fleet::{Replica, unique_prefix};
use common::nginx::{Nginx, free_port};
use common::redis::{RedisSentinels, RedisServer};
use ledger::{Ledger, Policy, Row};
use tokio::time::Instant;
use traffic::{Clients, follow};
use wire::{Wire, message};

/// The lease the fleet runs with: short, so that an outage outlasts it in seconds.
const LEASE: Duration = Duration::from_millis(2000);

/// How long after the lease a dead owner's tasks may take to fail on every survivor.
const DEATH_SLACK: Duration = Duration::from_secs(5);

/// How long Redis stays down in (a) and (b): longer than the lease.
const OUTAGE: Duration = Duration::from_millis(2000 + 2000);

/// How many times Redis goes away in (a) and (b): what breaks depends on the writes in flight
/// at that moment, and a kill -9 mid-write is the rarer case.
fn outages(fault: Fault) -> usize {
    if matches!(fault, Fault::RedisKill9) { 3 } else { 2 }
}

/// How long read-back waits for tasks to finish after the clients stop.
const SETTLE: Duration = Duration::from_secs(40);

/// (a)-(c): what a client may be told without it counting as a failed call.
const DURING_OUTAGE: &[&str] = &["UNAVAILABLE", "STREAM_CLOSED"];
const RESUMABLE_CLOSE_ONLY: &[&str] = &["STREAM_CLOSED"];

#[derive(Clone, Copy, Debug)]
enum Fault {
    RedisShutdown,
    RedisKill9,
    RollingRestart,
    OwnerKill9,
    SentinelFailover,
}

impl Fault {
    fn name(self) -> String {
        match self {
            Fault::RedisShutdown => {
                format!("(a) Redis SHUTDOWN {}x{OUTAGE:.0?}, AOF everysec", outages(self))
            }
            Fault::RedisKill9 => format!("(b) Redis kill -9 {}x{OUTAGE:.0?}, AOF always", outages(self)),
            Fault::RollingRestart => "(c) rolling restart 3-2-1, 1-2-3".to_owned(),
            Fault::OwnerKill9 => "(d) kill -9 of an owner".to_owned(),
            Fault::SentinelFailover => "(e) primary kill -9, Sentinel, WAIT 1".to_owned(),
        }
    }

    fn tag(self) -> &'static str {
        match self {
            Fault::RedisShutdown => "a",
            Fault::RedisKill9 => "b",
            Fault::RollingRestart => "c",
            Fault::OwnerKill9 => "d",
            Fault::SentinelFailover => "e",
        }
    }
}

/// What the fleet's Redis is.
enum Backend {
    /// One node (with its append-only file).
    Node(RedisServer),
    /// A primary and replicas under Sentinels.
    Sentinels(RedisSentinels),
}

impl Backend {
    fn url(&self) -> String {
        match self {
            Backend::Node(node) => node.url(),
            Backend::Sentinels(sentinels) => sentinels.url(),
        }
    }

    /// The single node (the scenarios that stop and start it use one).
    fn node(&mut self) -> &mut RedisServer {
        match self {
            Backend::Node(node) => node,
            Backend::Sentinels(sentinels) => &mut sentinels.nodes[0],
        }
    }
}

/// Redis, three replicas on ports of their own, nginx over them.
struct Stage {
    redis: Backend,
    replicas: Vec<Replica>,
    ports: Vec<u16>,
    nginx: Nginx,
    logs: PathBuf,
}

impl Stage {
    fn start(fault: Fault, redis: Backend, extra: &[&str]) -> Self {
        let prefix = unique_prefix();
        let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let lease = LEASE.as_millis().to_string();
        let mut args = vec!["--lease-ms", &lease, "--drain-timeout-secs", "30"];
        args.extend_from_slice(extra);
        let replicas = ports
            .iter()
            .enumerate()
            .map(|(i, port)| {
                let listen = format!("127.0.0.1:{port}");
                Replica::start_at(&listen, &redis.url(), &prefix, &format!("r{}", i + 1), &args)
            })
            .collect();
        let nginx = Nginx::start(&ports).expect("nginx (checked before)");
        let logs = logs_dir();
        std::fs::create_dir_all(&logs).unwrap();
        let stage = Self { redis, replicas, ports, nginx, logs };
        stage.note(
            fault,
            &format!(
                "replica ports {:?}, nginx gRPC {} HTTP {}",
                stage.ports, stage.nginx.grpc_port, stage.nginx.http_port
            ),
        );
        stage
    }

    /// Appends what replica `r` logged so far to its file (before a restart drops it).
    fn keep_log(&self, fault: Fault, r: usize) {
        let path = self.logs.join(format!("{}-r{}.log", fault.tag(), r + 1));
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
        let _ = file.write_all(self.replicas[r].stderr().as_bytes());
    }

    fn keep_logs(&self, fault: Fault, ledger: &Ledger) {
        for r in 0..self.replicas.len() {
            self.keep_log(fault, r);
        }
        let _ = std::fs::write(self.logs.join(format!("{}-clients.log", fault.tag())), ledger.trace());
        let findings = ledger.row("").details.join("\n");
        let _ = std::fs::write(self.logs.join(format!("{}-findings.log", fault.tag())), findings);
        let _ = std::fs::write(self.logs.join(format!("{}-nginx.log", fault.tag())), self.nginx.log());
    }

    /// A line in the scenario's timeline file, to line logs up with what the suite did.
    fn note(&self, fault: Fault, text: &str) {
        let path = self.logs.join(format!("{}-timeline.log", fault.tag()));
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
        let _ = writeln!(file, "{}.{:03} {text}", now.as_secs(), now.subsec_millis());
    }

    /// Stops the clients, reads every task back from all three replicas, keeps the logs: the
    /// scenario's row.
    async fn finish(
        &self,
        fault: Fault,
        clients: &Clients,
        handles: Vec<tokio::task::JoinHandle<()>>,
    ) -> Row {
        self.note(fault, "clients stopping");
        clients.stop(handles).await;
        self.note(fault, "clients stopped; reading back");
        read_back(&clients.ledger, &self.replica_urls(&[0, 1, 2])).await;
        self.keep_logs(fault, &clients.ledger);
        clients.ledger.row(&fault.name())
    }

    fn replica_urls(&self, which: &[usize]) -> Vec<String> {
        which.iter().map(|&r| self.replicas[r].url()).collect()
    }
}

/// This run's log directory, `target/tmp/fleet-faults/<pid>`: two runs at once (two engineers'
/// `cargo test` on one checkout) must not write into each other's files.
fn logs_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fleet-faults").join(std::process::id().to_string())
}

/// Removes the log directories of earlier runs whose process is gone.
fn clear_old_logs() {
    let Ok(entries) = std::fs::read_dir(logs_dir().parent().unwrap()) else { return };
    for path in entries.flatten().map(|e| e.path()) {
        let pid = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if pid.parse::<u32>().is_ok() && !PathBuf::from(format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

fn clients(stage: &Stage, ledger: &Arc<Ledger>) -> Arc<Clients> {
    Clients::new(ledger.clone(), stage.nginx.grpc_url(), stage.nginx.http_url())
}

fn aof_node() -> RedisServer {
    RedisServer::start_with_aof("everysec").expect("redis-server")
}

/// (a) and (b): Redis goes away for longer than the lease under traffic, and comes back.
async fn redis_outage(fault: Fault) -> Row {
    let kill = matches!(fault, Fault::RedisKill9);
    let redis = RedisServer::start_with_aof(if kill { "always" } else { "everysec" }).expect("redis-server");
    let mut stage = Stage::start(fault, Backend::Node(redis), &[]);
    let policy = Policy { excused: DURING_OUTAGE, expected_end: TaskState::Completed };
    let ledger = Arc::new(Ledger::new(policy));
    let clients = clients(&stage, &ledger);
    let handles = clients.start(3, 6);
    for _ in 0..outages(fault) {
        tokio::time::sleep(Duration::from_secs(3)).await;
        stage.note(fault, if kill { "redis kill -9" } else { "redis SHUTDOWN" });
        tokio::task::block_in_place(|| {
            if kill { stage.redis.node().kill9() } else { stage.redis.node().shutdown() }
        });
        tokio::time::sleep(OUTAGE).await;
        stage.note(fault, "redis restarting");
        tokio::task::block_in_place(|| stage.redis.node().restart());
        stage.note(fault, "redis up");
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    stage.finish(fault, &clients, handles).await
}

/// (c): every replica in turn drains and starts again on its port, twice over, under traffic.
async fn rolling_restart(fault: Fault) -> Row {
    let mut stage = Stage::start(fault, Backend::Node(aof_node()), &[]);
    let policy = Policy { excused: RESUMABLE_CLOSE_ONLY, expected_end: TaskState::Completed };
    let ledger = Arc::new(Ledger::new(policy));
    let clients = clients(&stage, &ledger);
    let handles = clients.start(2, 4);
    tokio::time::sleep(Duration::from_secs(3)).await;
    for r in [2, 1, 0, 0, 1, 2] {
        stage.note(fault, &format!("SIGTERM r{}", r + 1));
        stage.replicas[r].terminate();
        let code = stage.replicas[r].exit_code().await;
        stage.note(fault, &format!("r{} exited ({code}); restarting", r + 1));
        if code != 0 {
            ledger.failed("harness", format!("r{} exited with {code} after SIGTERM", r + 1));
        }
        stage.keep_log(fault, r);
        tokio::task::block_in_place(|| stage.replicas[r].restart());
        stage.note(fault, &format!("r{} listening", r + 1));
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    // The restarted processes' logs (the drained ones were kept before each restart).
    stage.finish(fault, &clients, handles).await
}

/// (d): running tasks owned by r1, followed on r2 and r3 directly and through nginx; r1 is
/// killed; every survivor's subscribers must get FAILED within the lease + 5 s.
async fn owner_kill9(fault: Fault) -> Row {
    let mut stage = Stage::start(fault, Backend::Node(aof_node()), &[]);
    // A kill -9 breaks the streams that ran through the dead replica: those breaks, and a
    // resume elsewhere, are reported but not held against the fault.
    let policy = Policy { excused: DURING_OUTAGE, expected_end: TaskState::Failed };
    let ledger = Arc::new(Ledger::new(policy));
    let Wire::Grpc(mut owner) = Wire::grpc(&stage.replicas[0].url()) else { unreachable!() };
    let mut watchers = Vec::new();
    let mut through_nginx = Vec::new();
    for _ in 0..4 {
        let request = SendMessageRequest {
            message: Some(message("stream 600 100", &uuid::Uuid::new_v4().to_string())),
            configuration: Some(SendMessageConfiguration { return_immediately: true, ..Default::default() }),
            ..Default::default()
        };
        let task = common::send_task(&mut owner, request).await;
        ledger.answered(&task);
        for r in [1, 2] {
            let (ledger, mut wire, id) =
                (ledger.clone(), Wire::grpc(&stage.replicas[r].url()), task.id.clone());
            let who = format!("r{}-watch", r + 1);
            watchers
                .push(tokio::spawn(async move { follow(&ledger, &who, &mut wire, &id, None, None).await }));
        }
        for mut wire in [Wire::grpc(&stage.nginx.grpc_url()), Wire::sse(&stage.nginx.http_url())] {
            let (ledger, id) = (ledger.clone(), task.id.clone());
            let who = format!("nginx-{}", wire.name());
            through_nginx
                .push(tokio::spawn(async move { follow(&ledger, &who, &mut wire, &id, None, None).await }));
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    stage.note(fault, "kill -9 r1");
    stage.replicas[0].kill9();
    let killed = Instant::now();
    for (i, watcher) in watchers.into_iter().enumerate() {
        let who = format!("task {} on r{}", i / 2 + 1, i % 2 + 2);
        match tokio::time::timeout(LEASE + DEATH_SLACK + Duration::from_secs(20), watcher).await {
            Ok(Ok(Some(at))) => {
                let took = at.saturating_duration_since(killed);
                ledger.failed_after(took);
                if took > LEASE + DEATH_SLACK {
                    ledger.late(format!("{who}: the terminal event came {took:?} after the kill"));
                }
            }
            Ok(Ok(None)) => ledger.late(format!("{who}: no terminal event")),
            Ok(Err(panic)) => ledger.late(format!("{who}: the watcher panicked: {panic}")),
            Err(_) => ledger.late(format!("{who}: no terminal event within the lease + 25 s")),
        }
    }
    for follower in through_nginx {
        let _ = tokio::time::timeout(Duration::from_secs(60), follower).await;
    }
    stage.note(fault, "reading back");
    read_back(&ledger, &stage.replica_urls(&[1, 2])).await;
    stage.keep_logs(fault, &ledger);
    ledger.row(&fault.name())
}

/// GetTask of every task the clients were told about, directly on the replicas (round robin),
/// waiting (bounded) for running ones to finish; each is held against the ledger.
async fn read_back(ledger: &Ledger, urls: &[String]) {
    let mut clients = Vec::new();
    for url in urls {
        let Wire::Grpc(client) = Wire::grpc(url) else { unreachable!() };
        clients.push(client);
    }
    let deadline = Instant::now() + SETTLE;
    let mut pending = ledger.tasks();
    let mut turn = 0;
    while !pending.is_empty() {
        let mut still = Vec::new();
        for id in pending {
            turn += 1;
            let client = &mut clients[turn % urls.len()];
            let request = GetTaskRequest { id: id.clone(), ..Default::default() };
            let answer = tokio::time::timeout(Duration::from_secs(10), client.get_task(request)).await;
            let over = Instant::now() > deadline;
            match answer {
                Ok(Ok(task)) => {
                    let task = task.into_inner();
                    if ledger::terminal(common::state(&task)) || over {
                        ledger.verify(Ok(&task), &id);
                    } else {
                        still.push(id);
                    }
                }
                Ok(Err(status)) if status.code() == tonic::Code::NotFound || over => {
                    ledger.verify(Err(format!("GetTask: {:?} {}", status.code(), status.message())), &id)
                }
                Ok(Err(_)) => still.push(id),
                Err(_) if over => ledger.verify(Err("GetTask: no answer".to_owned()), &id),
                Err(_) => still.push(id),
            }
        }
        pending = still;
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// Runs one fault; a panic in the harness becomes a row with one failed call that says so.
async fn run(fault: Fault) -> Row {
    let started = Instant::now();
    let outcome = tokio::spawn(async move {
        match fault {
            Fault::RedisShutdown | Fault::RedisKill9 => redis_outage(fault).await,
            Fault::RollingRestart => rolling_restart(fault).await,
            Fault::OwnerKill9 => owner_kill9(fault).await,
            Fault::SentinelFailover => failover::primary_kill9(fault).await,
        }
    })
    .await;
    let row = outcome.unwrap_or_else(|panic| {
        let ledger = Ledger::new(Policy { excused: &[], expected_end: TaskState::Completed });
        ledger.failed("harness", format!("the scenario panicked: {panic}"));
        ledger.row(&fault.name())
    });
    say(&format!("fleet faults: {} done in {:.1?}\n", row.fault, started.elapsed()));
    row
}

/// Straight to the process's stderr: the test harness captures eprintln! of passing tests.
fn say(text: &str) {
    let _ = std::io::stderr().write_all(text.as_bytes());
}

fn table(rows: &[Row]) -> String {
    let line = |cells: [&str; 12]| {
        let mut out = format!("{:<37}", cells[0]);
        for (cell, width) in cells[1..].iter().zip([6, 5, 7, 9, 7, 10, 9, 9, 8, 11, 10]) {
            out.push_str(&format!(" {cell:>width$}"));
        }
        out + "\n"
    };
    let mut out = format!("\nfleet fault suite (3 replicas behind nginx, lease {LEASE:?})\n");
    out.push_str(&line([
        "fault",
        "acked",
        "lost",
        "forked",
        "snapshot",
        "failed",
        "reconnect",
        "gaps/dup",
        "rep-lost",
        "excused",
        "final-Task",
        "FAILED in",
    ]));
    for row in rows {
        let numbers =
            [row.acknowledged as usize, row.lost, row.forks, row.snapshot_resumes, row.failed_calls];
        let numbers = numbers.map(|n| n.to_string());
        let reconnect = format!("{:.1?}", row.longest_reconnect);
        let failed_in = row.slowest_failed.map_or("-".to_owned(), |d| format!("{d:.1?}"));
        let rest =
            [row.gaps, row.replica_lost, row.excused as usize, row.final_task_resumes].map(|n| n.to_string());
        out.push_str(&line([
            &row.fault,
            &numbers[0],
            &numbers[1],
            &numbers[2],
            &numbers[3],
            &numbers[4],
            &reconnect,
            &rest[0],
            &rest[1],
            &rest[2],
            &rest[3],
            &failed_in,
        ]));
    }
    out.push_str(
        "acked: SendMessage answers and started streams. lost: acknowledged tasks missing, behind their \
         answer, or not ending as they must. forked: generations a client saw that the store lacks or \
         holds differently, or resume cursors refused. snapshot: resumes of a running task that began with \
         a Task. failed: error answers through nginx that no fault excuses (excused: UNAVAILABLE while \
         Redis is down in (a)(b), the resumable close). reconnect: longest stream break to its next item. \
         rep-lost: tasks FAILED as \"replica lost\". final-Task: resumes of a task that ended meanwhile, \
         answered with its final Task (resume.md 4.4). FAILED in: (d) slowest kill -9 to FAILED on a survivor; \
         (e) slowest kill -9 of the primary to SERVING again on every replica.\n",
    );
    for row in rows {
        for line in row.details.iter().take(8) {
            out.push_str(line);
            out.push('\n');
        }
        if row.details.len() > 8 {
            out.push_str(&format!("  {} … {} more findings in its log\n", row.fault, row.details.len() - 8));
        }
    }
    out
}

/// Which of a row's counts break the fault's promise.
fn broken(fault: Fault, row: &Row) -> Vec<String> {
    let mut broken = Vec::new();
    let mut must_be_zero = |what: &str, n: usize| {
        if n > 0 {
            broken.push(format!("{}: {n} {what}", row.fault));
        }
    };
    must_be_zero("lost", row.lost);
    must_be_zero("forked generations", row.forks);
    must_be_zero("gaps or duplicates", row.gaps);
    match fault {
        Fault::OwnerKill9 => must_be_zero("late or missing FAILED on a survivor", row.late),
        Fault::SentinelFailover => {
            must_be_zero("replicas not SERVING again in time", row.late);
            must_be_zero("snapshot resumes", row.snapshot_resumes);
            must_be_zero("failed calls", row.failed_calls);
            must_be_zero("tasks failed as replica lost", row.replica_lost);
        }
        _ => {
            must_be_zero("snapshot resumes", row.snapshot_resumes);
            must_be_zero("failed calls", row.failed_calls);
            must_be_zero("tasks failed as replica lost", row.replica_lost);
        }
    }
    if row.acknowledged < 4 {
        broken.push(format!(
            "{}: only {} acknowledged calls: the traffic did not run",
            row.fault, row.acknowledged
        ));
    }
    broken
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_lose_nothing_through_nginx() {
    if !common::redis::available() || !common::nginx::available() {
        return;
    }
    let started = Instant::now();
    clear_old_logs();
    let faults = [
        Fault::RedisShutdown,
        Fault::RedisKill9,
        Fault::RollingRestart,
        Fault::OwnerKill9,
        Fault::SentinelFailover,
    ];
    let only = std::env::var("FLEET_FAULTS").unwrap_or_default();
    let mut rows = Vec::new();
    let mut broken_all = Vec::new();
    for fault in faults.into_iter().filter(|f| only.is_empty() || only.contains(f.tag())) {
        let row = run(fault).await;
        broken_all.extend(broken(fault, &row));
        rows.push(row);
    }
    say(&table(&rows));
    say(&format!("fleet faults: {:.1?} in all; logs in {}\n", started.elapsed(), logs_dir().display()));
    assert!(broken_all.is_empty(), "the fleet broke its promises under faults:\n{}", broken_all.join("\n"));
}
