//! The fleet's Redis: a `redis-server` the benchmark starts on a free loopback port with
//! persistence off, and what it tells us about a scenario: `INFO commandstats` (commands and
//! their usec), `INFO stats` (bytes in and out) and its CPU time (from /proc, else `INFO cpu`).
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use tokio::process::{Child, Command};

use crate::BoxError;
use crate::process::cpu_nanos;
use crate::report::{Better, Metric};

/// How long a fresh `redis-server` may take to answer PING.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one INFO may take.
const INFO_TIMEOUT: Duration = Duration::from_secs(5);

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
    /// Starts `program` (normally `redis-server`) on a free port, with no RDB and no AOF, and
    /// waits until it answers. A port taken between choosing and binding it is retried.
    pub async fn start(program: &str) -> Result<Self, BoxError> {
        let mut last = String::new();
        for _ in 0..3 {
            match Self::try_start(program).await {
                Ok(redis) => return Ok(redis),
                Err(error) => last = error.to_string(),
            }
        }
        Err(format!("cannot start {program}: {last}").into())
    }

    async fn try_start(program: &str) -> Result<Self, BoxError> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let dir = std::env::temp_dir().join(format!("a2a-bench-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let mut child = Command::new(program)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
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

    /// The URL replicas get for `--store`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// What Redis has done so far: commands per name, bytes in and out, and its CPU time (the
    /// process's from /proc; where that cannot be read, `used_cpu_sys` + `used_cpu_user`).
    pub async fn mark(&self) -> Result<Mark, BoxError> {
        let mut conn = self.conn.clone();
        let mut info = redis::cmd("INFO");
        info.arg("commandstats").arg("stats").arg("cpu");
        let info = tokio::time::timeout(INFO_TIMEOUT, info.query_async(&mut conn))
            .await
            .map_err(|_| format!("Redis: no answer to INFO within {INFO_TIMEOUT:?}"))?
            .map_err(|e| format!("Redis INFO: {e}"))?;
        let text = String::from_utf8_lossy(&info_bytes(info)).into_owned();
        let cpu = cpu_nanos(self.pid).ok().or_else(|| info_cpu_nanos(&text));
        let bytes = (info_field(&text, "total_net_input_bytes"), info_field(&text, "total_net_output_bytes"));
        let bytes = match bytes {
            (Some(i), Some(o)) => Some((i as u64, o as u64)),
            _ => None,
        };
        Ok(Mark { commands: parse_commandstats(&text), bytes, cpu, at: Instant::now() })
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

/// INFO's answer as bytes (a bulk string, or a verbatim string under RESP3).
fn info_bytes(value: redis::Value) -> Vec<u8> {
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
fn parse_commandstats(info: &str) -> BTreeMap<String, (u64, u64)> {
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

/// Redis's counters at one moment.
#[derive(Debug, Clone)]
pub struct Mark {
    commands: BTreeMap<String, (u64, u64)>,
    /// `total_net_input_bytes`, `total_net_output_bytes`.
    bytes: Option<(u64, u64)>,
    cpu: Option<u64>,
    at: Instant,
}

/// What a scenario's counted part is made of.
#[derive(Debug, Clone, Copy)]
pub enum Per {
    /// Per event the owner emitted.
    Event,
    /// Per unary call.
    Call,
    /// Per SubscribeToTask.
    Subscription,
}

/// What Redis did between two marks, divided by `count` units of work.
pub struct Delta {
    /// Commands (INFO, the benchmark's own, left out), counting those a Lua script runs: Redis
    /// counts them alike, so client round trips are fewer (see `scripts`).
    pub commands: u64,
    /// Script calls (EVALSHA, EVAL, FCALL): each is one round trip, whatever it runs inside.
    pub scripts: u64,
    /// Redis CPU nanoseconds, if readable.
    pub cpu: Option<u64>,
    /// Bytes Redis read from and wrote to its clients (the benchmark's INFO included: a few
    /// KiB per measurement).
    pub bytes: Option<(u64, u64)>,
    /// Per command name: calls and usec inside Redis, most calls first.
    pub by_command: Vec<(String, u64, u64)>,
    pub elapsed: Duration,
}

impl Delta {
    pub fn between(before: &Mark, after: &Mark) -> Self {
        let mut by_command: Vec<(String, u64, u64)> = after
            .commands
            .iter()
            .filter(|(name, _)| name.as_str() != "info")
            .map(|(name, &(calls, usec))| {
                let (c0, u0) = before.commands.get(name).copied().unwrap_or((0, 0));
                (name.clone(), calls.saturating_sub(c0), usec.saturating_sub(u0))
            })
            .filter(|(_, calls, _)| *calls > 0)
            .collect();
        by_command.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let cpu = match (before.cpu, after.cpu) {
            (Some(b), Some(a)) => Some(a.saturating_sub(b)),
            _ => None,
        };
        let bytes = match (before.bytes, after.bytes) {
            (Some((i0, o0)), Some((i1, o1))) => Some((i1.saturating_sub(i0), o1.saturating_sub(o0))),
            _ => None,
        };
        let is_script = |name: &str| name.starts_with("eval") || name.starts_with("fcall");
        Self {
            commands: by_command.iter().map(|c| c.1).sum(),
            scripts: by_command.iter().filter(|c| is_script(&c.0)).map(|c| c.1).sum(),
            cpu,
            bytes,
            by_command,
            elapsed: after.at.saturating_duration_since(before.at),
        }
    }

    /// What Redis did per second.
    pub fn rate(&self) -> Rate {
        let secs = self.elapsed.as_secs_f64().max(1e-3);
        let (bytes_in, bytes_out) = self.bytes.unwrap_or((0, 0));
        Rate {
            commands: self.commands as f64 / secs,
            scripts: self.scripts as f64 / secs,
            cpu: self.cpu.unwrap_or(0) as f64 / secs,
            bytes_in: bytes_in as f64 / secs,
            bytes_out: bytes_out as f64 / secs,
        }
    }

    /// Commands, scripts and Redis CPU per unit, as rows, net of `background` (what Redis does
    /// meanwhile anyway: leases and inboxes of the idle fleet, a stream that runs on).
    pub fn metrics(&self, count: f64, per: Per, background: Rate) -> Vec<Metric> {
        if count <= 0.0 {
            return Vec::new();
        }
        let secs = self.elapsed.as_secs_f64();
        let net = |total: f64, rate: f64| (total - rate * secs).max(0.0) / count;
        let (name, scripts, cpu_name, bytes_in, bytes_out) = match per {
            Per::Event => (
                "redis commands per event",
                "redis scripts per event",
                "redis CPU per event",
                "redis bytes in per event",
                "redis bytes out per event",
            ),
            Per::Call => (
                "redis commands per call",
                "redis scripts per call",
                "redis CPU per call",
                "redis bytes in per call",
                "redis bytes out per call",
            ),
            Per::Subscription => (
                "redis commands per subscribe",
                "redis scripts per subscribe",
                "redis CPU per subscribe",
                "redis bytes in per subscribe",
                "redis bytes out per subscribe",
            ),
        };
        let mut out = vec![
            Metric::new(name, "cmds", net(self.commands as f64, background.commands), Better::Lower),
            Metric::new(scripts, "calls", net(self.scripts as f64, background.scripts), Better::Lower),
        ];
        if let Some(cpu) = self.cpu {
            out.push(Metric::new(cpu_name, "µs", net(cpu as f64, background.cpu) / 1000.0, Better::Lower));
        }
        if let Some((i, o)) = self.bytes {
            out.push(Metric::new(bytes_in, "B", net(i as f64, background.bytes_in), Better::Lower));
            out.push(Metric::new(bytes_out, "B", net(o as f64, background.bytes_out), Better::Lower));
        }
        out
    }

    /// Every command, most frequent first, per unit: `evalsha 1.00 (3.1 µs each), xread 2.00 …`
    /// (not net of the background; a script's usec includes the commands it runs, which are
    /// counted again under their own names).
    pub fn summary(&self, count: f64) -> String {
        let parts: Vec<String> = self
            .by_command
            .iter()
            .map(|(name, calls, usec)| {
                let per = *calls as f64 / count.max(1.0);
                let each = *usec as f64 / (*calls).max(1) as f64;
                format!("{name} {per:.3} ({each:.1} µs each)")
            })
            .collect();
        parts.join(", ")
    }
}

/// Redis seen around the measured part of a scenario: its commands (net of the idle fleet's
/// `background`) and CPU per unit of work.
#[derive(Clone, Copy)]
pub struct Probe<'a> {
    pub redis: &'a RedisProcess,
    pub background: Rate,
}

/// Redis's work per second.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rate {
    pub commands: f64,
    pub scripts: f64,
    /// CPU nanoseconds per second.
    pub cpu: f64,
    pub bytes_in: f64,
    pub bytes_out: f64,
}

impl Probe<'_> {
    pub async fn mark(&self) -> Result<Mark, BoxError> {
        self.redis.mark().await
    }

    /// This probe with what Redis does per second over `window` from now as its background (for
    /// work that goes on during a measurement but is not what is measured).
    pub async fn with_background_of(self, window: Duration) -> Result<Self, BoxError> {
        let before = self.mark().await?;
        tokio::time::sleep(window).await;
        let delta = Delta::between(&before, &self.mark().await?);
        Ok(Self { background: delta.rate(), ..self })
    }

    /// The rows for what Redis did since `before`, per `count` units, and a note naming the
    /// commands (`what` says which part of which scenario).
    pub async fn finish(
        &self,
        before: &Mark,
        count: f64,
        per: Per,
        what: &str,
    ) -> Result<(Vec<Metric>, String), BoxError> {
        let delta = Delta::between(before, &self.mark().await?);
        let unit = match per {
            Per::Event => "event",
            Per::Call => "call",
            Per::Subscription => "subscribe",
        };
        let note = format!("redis per {unit} ({what}): {}", delta.summary(count));
        Ok((delta.metrics(count, per, self.background), note))
    }
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
        let before =
            Mark { commands: BTreeMap::new(), bytes: Some((0, 0)), cpu: Some(0), at: Instant::now() };
        let after = Mark { commands: stats, bytes: Some((500, 100)), cpu: Some(10_000), at: before.at };
        let delta = Delta::between(&before, &after);
        assert_eq!(delta.commands, 15);
        assert_eq!(delta.by_command[0].0, "xread");
        let metrics = delta.metrics(5.0, Per::Event, Rate::default());
        assert_eq!(metrics[0].value, 3.0);
        assert_eq!(metrics[1].value, 0.6);
        assert_eq!(metrics[2].value, 2.0);
        assert_eq!(metrics[3].value, 100.0);
        assert_eq!(metrics[4].value, 20.0);
    }

    #[test]
    fn reads_cpu_and_bytes_from_info() {
        let info = "# Stats\r\ntotal_net_input_bytes:1234\r\ntotal_net_output_bytes:99\r\n\
                    # CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:0.250000\r\nused_cpu_sys_children:9.0\r\n";
        assert_eq!(info_field(info, "total_net_input_bytes"), Some(1234.0));
        assert_eq!(info_cpu_nanos(info), Some(1_750_000_000));
    }
}
