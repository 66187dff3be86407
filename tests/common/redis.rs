//! Real `redis-server` processes for tests: one node, or a three-node Redis Cluster, each on
//! free ports, killed on drop. Persistence is off, except for a node started with
//! [`RedisServer::start_with_aof`]: the fault suite stops, kills and restarts it on the same port
//! and data directory, and it comes back with what its append-only file holds.
//!
//! Without a `redis-server` binary the tests skip loudly, except in CI (`CI=true`), where the
//! Redis tests must run and a missing binary is a failure.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a fresh server (or cluster) may take to answer.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// `true` if `redis-server` can run here; otherwise says so loudly (or panics in CI).
pub fn available() -> bool {
    let found = Command::new("redis-server").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("redis-server is not installed, and CI=true: the Redis tests must run in CI");
        }
        // Straight to the process's stderr: the test harness captures eprintln! of passing tests.
        let loud = b"\n*** SKIPPED: redis-server not installed (apt-get install redis-server) ***\n\n";
        let _ = std::io::stderr().write_all(loud);
    }
    found
}

/// A port that is free now, whose cluster bus port (+10000) is free too.
fn free_port() -> u16 {
    loop {
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap();
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

/// One `redis-server` process.
pub struct RedisServer {
    /// Its port on 127.0.0.1.
    pub port: u16,
    dir: PathBuf,
    cluster: bool,
    /// `appendfsync` (`always`, `everysec`) with the append-only file on; `None`: no persistence.
    appendfsync: Option<&'static str>,
    child: Option<Child>,
}

impl RedisServer {
    /// A single node on a free port, or `None` (after the loud message) without the binary.
    pub fn start() -> Option<Self> {
        available().then(|| Self::spawn(free_port(), false, None))
    }

    /// A single node with the append-only file on and `appendfsync` as given (`always`,
    /// `everysec`), or `None` (after the loud message) without the binary. A
    /// [`RedisServer::restart`] after [`RedisServer::shutdown`] or [`RedisServer::kill9`] loads
    /// what the file holds.
    pub fn start_with_aof(appendfsync: &'static str) -> Option<Self> {
        available().then(|| Self::spawn(free_port(), false, Some(appendfsync)))
    }

    fn spawn(port: u16, cluster: bool, appendfsync: Option<&'static str>) -> Self {
        let dir = std::env::temp_dir().join(format!("a2a-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut server = Self { port, dir, cluster, appendfsync, child: None };
        server.restart();
        server
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the process (the port stays this server's for [`RedisServer::restart`]).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGKILL, as a crash: what the append-only file had not synced is gone.
    pub fn kill9(&mut self) {
        self.stop();
    }

    /// `SHUTDOWN`: Redis syncs its append-only file (if on) and exits; waits for the exit.
    pub fn shutdown(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        let _ = ask(self.port, "SHUTDOWN");
        let deadline = Instant::now() + START_TIMEOUT;
        while child.try_wait().ok().flatten().is_none() {
            if Instant::now() >= deadline {
                let _ = child.kill();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Starts the process again on the same port and directory and waits for it: empty when
    /// persistence is off, else with what the append-only file holds.
    pub fn restart(&mut self) {
        self.stop();
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", ""]);
        match self.appendfsync {
            Some(fsync) => cmd.args(["--appendonly", "yes", "--appendfsync", fsync]),
            None => cmd.args(["--appendonly", "no"]),
        };
        cmd.arg("--dir").arg(&self.dir);
        if self.cluster {
            cmd.args(["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]);
            cmd.args(["--cluster-node-timeout", "2000"]);
        }
        let child = cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("redis-server starts");
        self.child = Some(child);
        wait_until(
            // A node loading its append-only file answers -LOADING until it is done.
            || ask(self.port, "PING").is_some_and(|r| r.starts_with("+PONG")),
            "redis-server answers PING",
        );
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Three cluster-enabled nodes joined with `redis-cli --cluster create`, all slots covered.
pub struct RedisCluster {
    /// The nodes (masters, no replicas).
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// A fresh cluster, or `None` (after the loud message) without the binary.
    pub fn start() -> Option<Self> {
        if !available() {
            return None;
        }
        let nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::spawn(free_port(), true, None)).collect();
        let addresses: Vec<String> = nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)).collect();
        let status = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("redis-cli runs");
        assert!(status.success(), "redis-cli --cluster create failed");
        for node in &nodes {
            wait_until(
                || ask(node.port, "CLUSTER INFO").is_some_and(|r| r.contains("cluster_state:ok")),
                "the cluster is ok on every node",
            );
        }
        Some(Self { nodes })
    }

    /// `redis+cluster://h1:p1,h2:p2,h3:p3`.
    pub fn url(&self) -> String {
        let nodes: Vec<String> = self.nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)).collect();
        format!("redis+cluster://{}", nodes.join(","))
    }
}

/// Sends one inline command and returns what arrives within a moment.
fn ask(port: u16, command: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    stream.write_all(format!("{command}\r\n").as_bytes()).ok()?;
    let mut buf = [0u8; 4096];
    let n = stream.read(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

fn wait_until(mut ready: impl FnMut() -> bool, what: &str) {
    let deadline = Instant::now() + START_TIMEOUT;
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
