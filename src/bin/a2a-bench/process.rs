//! Server processes the benchmark starts and stops, and reading a process's resident memory.
//!
//! Memory is measured per process (VmRSS), so every server whose memory we report runs in its
//! own process: our `a2a-server` (`--spawn-server`) and the baseline (the hidden
//! `baseline-server` subcommand of this same binary).
use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::BoxError;

/// Flags every spawned `a2a-server` gets: its quotas lifted far past any size a scenario
/// reaches (the benchmark, one client without a credential, is one principal), yet still
/// counted, so what counting costs is in the figures.
pub const LIFTED_LIMITS: [&str; 4] = [
    "--max-live-tasks=1000000000",
    "--max-live-tasks-per-principal=1000000000",
    "--max-subscriptions-per-task=1000000000",
    "--max-subscriptions-per-principal=1000000000",
];

/// A child server listening on 127.0.0.1. Killed when dropped, so an early error exit never
/// leaves a server behind.
pub struct ServerProcess {
    child: Child,
    pub addr: SocketAddr,
    pub pid: u32,
}

impl ServerProcess {
    /// Starts `program args…` and waits for it to print `… listening on ADDR …` on stdout (both
    /// `a2a-server` and `a2a-bench baseline-server` do, with the port the OS chose for
    /// `127.0.0.1:0`).
    pub async fn spawn(program: &Path, args: &[String]) -> Result<Self, BoxError> {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
        let pid = child.id().ok_or("the server exited at once")?;
        let stdout = child.stdout.take().ok_or("no stdout pipe")?;
        let mut lines = BufReader::new(stdout).lines();
        let addr = tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(line) = lines.next_line().await? {
                if let Some(addr) = listening_address(&line) {
                    return Ok::<_, BoxError>(addr);
                }
            }
            Err("the server closed stdout without printing its address".into())
        })
        .await
        .map_err(|_| format!("{} printed no `listening on ADDR` line within 20 s", program.display()))??;
        // Keep draining stdout so that a chatty server never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Self { child, addr, pid })
    }

    /// The server's base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops the server (SIGKILL: there is nothing to flush) and reaps it.
    pub async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

/// The address in a `… listening on ADDR …` line.
fn listening_address(line: &str) -> Option<SocketAddr> {
    let rest = line.split_once("listening on ")?.1;
    rest.split_whitespace().next()?.parse().ok()
}

/// Resident memory of `pid` in KiB, from `/proc/<pid>/status`.
pub fn rss_kib(pid: u32) -> Result<u64, BoxError> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("cannot read /proc/{pid}/status: {e}"))?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).ok_or("no VmRSS in /proc/<pid>/status")?;
    let kib = line.split_whitespace().nth(1).ok_or("malformed VmRSS line")?;
    Ok(kib.parse()?)
}

/// CPU time `pid` has used so far, all threads, in nanoseconds (the first field of each
/// `/proc/<pid>/task/<tid>/schedstat`). Threads that already exited are not counted, which is
/// fine for servers whose runtime threads live as long as they do.
pub fn cpu_nanos(pid: u32) -> Result<u64, BoxError> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map_err(|e| format!("cannot read /proc/{pid}/task: {e}"))?;
    let mut total = 0;
    for task in tasks {
        let path = task?.path().join("schedstat");
        // A thread may exit between listing and reading.
        if let Ok(stat) = std::fs::read_to_string(&path) {
            total += stat.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    Ok(total)
}

/// Measures the server CPU time spent while `work` runs, when the PID is known (for a fleet,
/// the sum over its replicas).
pub struct CpuMeter {
    pids: Vec<u32>,
    start: u64,
}

impl CpuMeter {
    pub fn start(pid: Option<u32>) -> Self {
        Self::start_all(pid.as_slice())
    }

    /// The CPU time of all of `pids` together.
    pub fn start_all(pids: &[u32]) -> Self {
        let start = pids.iter().filter_map(|&pid| cpu_nanos(pid).ok()).sum();
        Self { pids: pids.to_vec(), start }
    }

    /// CPU nanoseconds since `start`, if measurable.
    pub fn elapsed(&self) -> Option<u64> {
        if self.pids.is_empty() {
            return None;
        }
        let now: Result<Vec<u64>, BoxError> = self.pids.iter().map(|&pid| cpu_nanos(pid)).collect();
        Some(now.ok()?.iter().sum::<u64>().saturating_sub(self.start))
    }
}

/// RSS once it has stopped moving: allocator and kernel bookkeeping settle within a few
/// hundred milliseconds after a burst of work, and we want the idle footprint.
pub async fn settled_rss_kib(pid: u32) -> Result<u64, BoxError> {
    let mut last = rss_kib(pid)?;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = rss_kib(pid)?;
        if now == last {
            return Ok(now);
        }
        last = now;
    }
    Ok(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_address() {
        let line = "a2a-server listening on 127.0.0.1:40123 (gRPC lf.a2a.v1.A2AService, agent Demo)";
        assert_eq!(listening_address(line), Some("127.0.0.1:40123".parse().unwrap()));
        assert_eq!(listening_address("starting"), None);
    }

    #[test]
    fn reads_own_rss_and_cpu() {
        assert!(rss_kib(std::process::id()).unwrap() > 0);
        assert!(cpu_nanos(std::process::id()).unwrap() > 0);
    }
}
