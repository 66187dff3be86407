//! What every attack shares: the release binary, a server started from it, its memory.
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use crate::common::process::ServerProcess;

/// The release build of `a2a-server`, built (once per test process) if it is missing or stale;
/// `A2A_ATTACK_BIN` names another binary instead (for a quick local rerun; CI never sets it).
pub fn release_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("A2A_ATTACK_BIN") {
            eprintln!("tests/attacks: A2A_ATTACK_BIN set: attacking {bin:?}, not a fresh release build");
            return PathBuf::from(bin);
        }
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let status = Command::new(env!("CARGO"))
            .current_dir(manifest)
            .args(["build", "--release", "--locked", "--bin", "a2a-server"])
            .status()
            .expect("run cargo build --release");
        assert!(status.success(), "cargo build --release --bin a2a-server failed");
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| manifest.join("target"));
        let bin = target.join("release").join("a2a-server");
        assert!(bin.exists(), "no release binary at {}", bin.display());
        bin
    })
}

/// The release server started with `args`, on a free loopback port unless they name one.
pub fn start(args: &[&str]) -> ServerProcess {
    let mut all = args.to_vec();
    if !args.contains(&"--listen") {
        all.extend(["--listen", "127.0.0.1:0"]);
    }
    ServerProcess::start_bin(release_bin(), &all, &[])
}

/// A `/proc/PID/status` field in KiB (`VmRSS`, `VmHWM`).
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc/PID/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// Resident memory of `pid`, MiB.
pub fn rss_mib(pid: u32) -> f64 {
    status_kib(pid, "VmRSS") as f64 / 1024.0
}

/// Polls `check` every 50 ms until it holds or `within` passes; how long it took, or `None`.
pub async fn within(within: Duration, mut check: impl FnMut() -> bool) -> Option<Duration> {
    let start = tokio::time::Instant::now();
    loop {
        if check() {
            return Some(start.elapsed());
        }
        if start.elapsed() >= within {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One row of the attack table, printed to stderr for the closing note.
pub fn report(attack: &str, bound: &str, measured: &str) {
    eprintln!("ATTACK | {attack} | {bound} | {measured}");
}
