//! Real `redis-server` processes for tests: one node, a three-node Redis Cluster, or a primary
//! with replicas under three Sentinels, each on free ports, killed on drop. Persistence is off, except for a node started with
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
    /// The port of the primary this node replicates, if it is a replica.
    replica_of: Option<u16>,
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
        let mut server = Self { port, dir, cluster, appendfsync, replica_of: None, child: None };
        server.restart();
        server
    }

    /// A replica of the node on `primary` (no persistence), or `None` without the binary.
    pub fn start_replica_of(primary: u16) -> Option<Self> {
        available().then(|| {
            let port = free_port();
            let dir = std::env::temp_dir().join(format!("a2a-redis-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let mut replica =
                Self { port, dir, cluster: false, appendfsync: None, replica_of: Some(primary), child: None };
            replica.restart();
            replica
        })
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Sends one inline command; the raw reply (what arrives within a moment).
    pub fn command(&self, command: &str) -> Option<String> {
        ask(self.port, command)
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

    /// SIGSTOP (`pause: true`) or SIGCONT: a node that is there but does not answer.
    pub fn pause(&self, pause: bool) {
        let Some(child) = &self.child else { return };
        let signal = if pause { "-STOP" } else { "-CONT" };
        let status =
            Command::new("kill").args([signal, &child.id().to_string()]).status().expect("kill runs");
        assert!(status.success(), "kill {signal} of redis-server failed");
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
        if let Some(primary) = self.replica_of {
            cmd.args(["--replicaof", "127.0.0.1", &primary.to_string()]);
        }
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

/// The name the Sentinels monitor the primary under.
pub const MASTER_NAME: &str = "mymaster";

/// A primary and two replicas (no persistence) under three Sentinels that fail over one second
/// after the primary stops answering (`down-after-milliseconds 1000`, quorum 2). Two replicas,
/// so that after a failover the new primary still has one to acknowledge `WAIT 1`.
pub struct RedisSentinels {
    /// `nodes[0]` starts as the primary.
    pub nodes: Vec<RedisServer>,
    /// The Sentinels' ports.
    pub sentinel_ports: Vec<u16>,
    sentinels: Vec<Child>,
    dir: PathBuf,
}

impl RedisSentinels {
    /// Starts it all and waits until the Sentinels know the replicas and each other, or `None`
    /// (after the loud message) without the binary.
    pub fn start() -> Option<Self> {
        if !available() {
            return None;
        }
        let primary = RedisServer::spawn(free_port(), false, None);
        let port = primary.port;
        let mut nodes = vec![primary];
        nodes.extend((0..2).filter_map(|_| RedisServer::start_replica_of(port)));
        let dir =
            std::env::temp_dir().join(format!("a2a-sentinels-{}-{}", std::process::id(), nodes[0].port));
        let sentinel_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let mut sentinels = Vec::new();
        for port in &sentinel_ports {
            let own = dir.join(port.to_string());
            std::fs::create_dir_all(&own).unwrap();
            // Sentinel rewrites its file (ids, known replicas and peers): a fresh one each run.
            let conf = format!(
                "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor {MASTER_NAME} 127.0.0.1 {} 2\n\
                 sentinel down-after-milliseconds {MASTER_NAME} 1000\nsentinel failover-timeout {MASTER_NAME} 5000\n",
                own.display(),
                nodes[0].port
            );
            let path = own.join("sentinel.conf");
            std::fs::write(&path, conf).unwrap();
            // Debian's `redis-sentinel` (what .ci/run installs) is the same binary in Sentinel
            // mode; without it, `redis-server --sentinel` is.
            let mut command = match Command::new("redis-sentinel").arg("--version").output() {
                Ok(out) if out.status.success() => Command::new("redis-sentinel"),
                _ => Command::new("redis-server"),
            };
            let child = command
                .arg(&path)
                .arg("--sentinel")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server --sentinel starts");
            sentinels.push(child);
        }
        let topology = Self { nodes, sentinel_ports, sentinels, dir };
        for port in &topology.sentinel_ports {
            wait_until(
                || {
                    let master = ask(*port, &format!("SENTINEL MASTER {MASTER_NAME}")).unwrap_or_default();
                    ask(*port, &format!("SENTINEL CKQUORUM {MASTER_NAME}"))
                        .is_some_and(|r| r.starts_with("+OK"))
                        && field(&master, "num-slaves").is_some_and(|n| n >= 2)
                        && field(&master, "num-other-sentinels").is_some_and(|n| n >= 2)
                },
                "the Sentinels know both replicas and each other",
            );
        }
        Some(topology)
    }

    /// `redis+sentinel://S1,S2,S3/mymaster`.
    pub fn url(&self) -> String {
        let sentinels: Vec<String> = self.sentinel_ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        format!("redis+sentinel://{}/{MASTER_NAME}", sentinels.join(","))
    }

    /// The port of the primary the first Sentinel names now.
    pub fn primary_port(&self) -> Option<u16> {
        let reply = ask(self.sentinel_ports[0], &format!("SENTINEL get-master-addr-by-name {MASTER_NAME}"))?;
        reply.lines().filter(|l| !l.starts_with(['*', '$'])).nth(1)?.trim().parse().ok()
    }

    /// A forced failover (`SENTINEL FAILOVER`): the primary is demoted, alive, to a replica.
    pub fn force_failover(&self) {
        let reply =
            ask(self.sentinel_ports[0], &format!("SENTINEL FAILOVER {MASTER_NAME}")).unwrap_or_default();
        assert!(reply.starts_with("+OK"), "SENTINEL FAILOVER: {reply}");
    }

    /// The node on `port`.
    pub fn node(&self, port: u16) -> &RedisServer {
        self.nodes.iter().find(|n| n.port == port).expect("one of ours")
    }

    /// SIGKILL of the node that is the primary now, cut off from its replicas for `lag` before,
    /// so that what it took in that time is on no other node; its port. (The replicas are
    /// paused and their links closed: a paused replica alone would still get everything the
    /// kernel had buffered for it.)
    pub fn kill9_primary(&mut self, lag: Duration) -> u16 {
        let port = self.primary_port().expect("the Sentinels name a primary");
        for replica in self.nodes.iter().filter(|n| n.port != port) {
            replica.pause(true);
        }
        let cut = ask(port, "CLIENT KILL TYPE replica").unwrap_or_default();
        assert!(cut.starts_with(':'), "CLIENT KILL TYPE replica: {cut}");
        std::thread::sleep(lag);
        self.nodes.iter_mut().find(|n| n.port == port).expect("the primary is one of ours").kill9();
        for replica in self.nodes.iter().filter(|n| n.port != port) {
            replica.pause(false);
        }
        port
    }

    /// Waits until the Sentinels name a primary other than `old` that says it is one (`ROLE`):
    /// the name can change before the promotion took, or move again when a Sentinel's
    /// attempt is superseded; its port.
    pub fn wait_failover(&self, old: u16) -> u16 {
        let promoted = || {
            let port = self.primary_port().filter(|&p| p != old)?;
            let node = self.nodes.iter().find(|n| n.port == port)?;
            node.command("ROLE").is_some_and(|role| role.contains("master")).then_some(port)
        };
        wait_until(|| promoted().is_some(), "the Sentinels promote a replica");
        self.primary_port().unwrap_or(old)
    }
}

impl Drop for RedisSentinels {
    fn drop(&mut self) {
        for child in &mut self.sentinels {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The number after `name` in a RESP array of name/value pairs (as inline replies print).
fn field(reply: &str, name: &str) -> Option<u64> {
    let lines: Vec<&str> = reply.lines().filter(|l| !l.starts_with(['*', '$'])).collect();
    let at = lines.iter().position(|l| *l == name)?;
    lines.get(at + 1)?.trim().parse().ok()
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
