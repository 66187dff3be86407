//! One `redis-server` the benchmark starts on a free loopback port with persistence off, and
//! what it tells us: `INFO commandstats` (commands and their usec), `INFO stats` (bytes in and
//! out) and its CPU time (from /proc, else `INFO cpu`). [`super::redis_cluster`] joins several
//! into a Redis Cluster, [`super::redis_replicas`] starts replicas of one; [`super::probe`] turns
//! their counters into rows.
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use tokio::process::{Child, Command};

use crate::BoxError;
use crate::process::cpu_nanos;

/// How long a fresh `redis-server` may take to answer PING.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one command of ours (INFO, CLUSTER …) may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// A cluster node's bus listens on its port + 10000, which must be free too.
const BUS_OFFSET: u16 = 10_000;

/// What a `redis-server` the benchmark starts is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A single node on its own (the fleet's primary by default).
    Alone,
    /// A cluster-enabled node, whose bus port must be free too (it joins no cluster yet).
    ClusterNode,
    /// A replica of the node on this loopback port (`--replicaof 127.0.0.1 PORT`).
    ReplicaOf(u16),
}

/// A `redis-server` child on 127.0.0.1, killed when dropped (an error or Ctrl-C never leaves
/// it behind).
pub struct RedisProcess {
    child: Child,
    dir: PathBuf,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its PID, for its CPU time.
    pub pid: u32,
    conn: MultiplexedConnection,
}

impl RedisProcess {
    /// Starts `program` (normally `redis-server`) on a free port, with no RDB and no AOF, in
    /// its `role`, and waits until it answers (a replica answers before its first sync is
    /// done: [`super::redis_replicas`] waits for that). A port taken between choosing and
    /// binding it is retried.
    pub async fn start(program: &str, role: Role) -> Result<Self, BoxError> {
        let mut last = String::new();
        for _ in 0..3 {
            match Self::try_start(program, role).await {
                Ok(redis) => return Ok(redis),
                Err(error) => last = error.to_string(),
            }
        }
        Err(format!("cannot start {program}: {last}").into())
    }

    async fn try_start(program: &str, role: Role) -> Result<Self, BoxError> {
        let port = free_port(role == Role::ClusterNode)?;
        let dir = std::env::temp_dir().join(format!("a2a-bench-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let mut command = Command::new(program);
        command.args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]);
        // Redis changes into --dir, so the cluster's nodes.conf lands there too.
        command.arg("--dir").arg(&dir);
        match role {
            Role::Alone => {}
            Role::ClusterNode => {
                command.args(["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]);
                command.args(["--cluster-node-timeout", "2000"]);
            }
            // The full sync's RDB lands in --dir too, removed with it.
            Role::ReplicaOf(primary) => {
                command.arg("--replicaof").arg("127.0.0.1").arg(primary.to_string());
            }
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {program} (apt-get install redis-server): {e}"))?;
        let pid = child.id().ok_or("redis-server exited at once")?;
        let url = format!("redis://127.0.0.1:{port}/0");
        let client = redis::Client::open(url.as_str())?;
        let deadline = Instant::now() + START_TIMEOUT;
        let conn = loop {
            if let Ok(Some(status)) = child.try_wait() {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(format!("redis-server exited ({status}) on port {port}").into());
            }
            let attempt = tokio::time::timeout(Duration::from_secs(1), async {
                let mut conn = client.get_multiplexed_async_connection().await?;
                redis::cmd("PING").query_async::<String>(&mut conn).await?;
                Ok::<_, redis::RedisError>(conn)
            });
            if let Ok(Ok(conn)) = attempt.await {
                break conn;
            }
            if Instant::now() >= deadline {
                let _ = child.start_kill();
                let _ = std::fs::remove_dir_all(&dir);
                return Err(format!(
                    "redis-server on port {port} did not answer PING within {START_TIMEOUT:?}"
                )
                .into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        Ok(Self { child, dir, port, pid, conn })
    }

    /// `127.0.0.1:PORT`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Sends one command of the benchmark's own (never a hung run: it times out).
    pub async fn query<T: redis::FromRedisValue>(&self, command: &redis::Cmd) -> Result<T, BoxError> {
        let mut conn = self.conn.clone();
        let answer = tokio::time::timeout(QUERY_TIMEOUT, command.query_async(&mut conn))
            .await
            .map_err(|_| format!("Redis on port {}: no answer within {QUERY_TIMEOUT:?}", self.port))?;
        Ok(answer.map_err(|e| format!("Redis on port {}: {e}", self.port))?)
    }

    /// What this node has done so far: commands per name, bytes in and out, and its CPU time
    /// (the process's from /proc; where that cannot be read, `used_cpu_sys` + `used_cpu_user`).
    pub async fn mark(&self) -> Result<NodeMark, BoxError> {
        let mut info = redis::cmd("INFO");
        info.arg("commandstats").arg("stats").arg("cpu").arg("memory");
        let text = String::from_utf8_lossy(&info_bytes(self.query(&info).await?)).into_owned();
        let cpu = cpu_nanos(self.pid).ok().or_else(|| info_cpu_nanos(&text));
        let bytes = (info_field(&text, "total_net_input_bytes"), info_field(&text, "total_net_output_bytes"));
        let bytes = match bytes {
            (Some(i), Some(o)) => Some((i as u64, o as u64)),
            _ => None,
        };
        let memory = info_field(&text, "used_memory").map(|m| m as u64);
        Ok(NodeMark { commands: parse_commandstats(&text), bytes, cpu, memory, at: Instant::now() })
    }

    /// Kills the server and reaps it (its directory goes when it drops).
    pub async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
    }
}

impl Drop for RedisProcess {
    fn drop(&mut self) {
        // The child itself is killed by `kill_on_drop`.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A loopback port free now; for a cluster node, one whose bus port (+10000) is free as well.
fn free_port(cluster: bool) -> Result<u16, BoxError> {
    for _ in 0..100 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        if !cluster {
            return Ok(port);
        }
        let bus = port.checked_add(BUS_OFFSET);
        if bus.is_some_and(|bus| std::net::TcpListener::bind(("127.0.0.1", bus)).is_ok()) {
            return Ok(port);
        }
    }
    Err("no free loopback port whose cluster bus port (+10000) is free too".into())
}

/// One node's counters at one moment.
#[derive(Debug, Clone)]
pub struct NodeMark {
    /// Per command name: calls and usec.
    pub commands: BTreeMap<String, (u64, u64)>,
    /// `total_net_input_bytes`, `total_net_output_bytes`.
    pub bytes: Option<(u64, u64)>,
    /// CPU nanoseconds, if readable.
    pub cpu: Option<u64>,
    /// `used_memory`: what the data set (and Redis's buffers) hold now.
    pub memory: Option<u64>,
    pub at: Instant,
}

/// INFO's answer as bytes (a bulk string, or a verbatim string under RESP3).
pub fn info_bytes(value: redis::Value) -> Vec<u8> {
    match value {
        redis::Value::BulkString(bytes) => bytes,
        redis::Value::VerbatimString { text, .. } => text.into_bytes(),
        redis::Value::SimpleString(text) => text.into_bytes(),
        _ => Vec::new(),
    }
}

/// A `name:value` line of INFO, as a number.
fn info_field(info: &str, name: &str) -> Option<f64> {
    info.lines().find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':')?.parse().ok())
}

/// `used_cpu_sys` + `used_cpu_user` (seconds, to the microsecond) in nanoseconds.
fn info_cpu_nanos(info: &str) -> Option<u64> {
    let secs = info_field(info, "used_cpu_sys")? + info_field(info, "used_cpu_user")?;
    Some((secs * 1e9) as u64)
}

/// `cmdstat_<name>:calls=N,usec=U,…` lines → name → (calls, usec).
pub fn parse_commandstats(info: &str) -> BTreeMap<String, (u64, u64)> {
    let mut out = BTreeMap::new();
    for line in info.lines() {
        let Some((name, fields)) = line.trim().strip_prefix("cmdstat_").and_then(|l| l.split_once(':'))
        else {
            continue;
        };
        let field = |key: &str| {
            fields.split(',').find_map(|f| f.strip_prefix(key)?.strip_prefix('=')?.parse::<u64>().ok())
        };
        out.insert(name.to_owned(), (field("calls").unwrap_or(0), field("usec").unwrap_or(0)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_commandstats() {
        let info = "# Commandstats\r\ncmdstat_xread:calls=12,usec=34,usec_per_call=2.83,rejected_calls=0,failed_calls=0\r\n\
                    cmdstat_evalsha:calls=3,usec=30,usec_per_call=10.00\r\n";
        let stats = parse_commandstats(info);
        assert_eq!(stats["xread"], (12, 34));
        assert_eq!(stats["evalsha"], (3, 30));
    }

    #[test]
    fn reads_cpu_and_bytes_from_info() {
        let info = "# Stats\r\ntotal_net_input_bytes:1234\r\ntotal_net_output_bytes:99\r\n\
                    # CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:0.250000\r\nused_cpu_sys_children:9.0\r\n";
        assert_eq!(info_field(info, "total_net_input_bytes"), Some(1234.0));
        assert_eq!(info_cpu_nanos(info), Some(1_750_000_000));
    }
}
