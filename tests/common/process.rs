//! The real `a2a-server` binary as a child process: started with flags, its addresses read from
//! the lines it prints (`a2a-server listening on ADDR …`, and `… HTTP bindings on ADDR` when the
//! HTTP side has its own port), stopped with SIGTERM or SIGKILL, killed on drop.
//!
//! Its stderr goes to a file, printed (the tail) when a test fails while the process is alive,
//! so a failing fleet test shows what each replica said.
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::PATIENCE;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_a2a-server");

/// Environment variables that would change what the flags of a test say.
const SCRUBBED_ENV: &[&str] = &["A2A_LISTEN", "A2A_HTTP_LISTEN", "A2A_STORE", "A2A_REDIS_PREFIX"];

/// A running `a2a-server` process, killed on drop.
pub struct ServerProcess {
    child: Child,
    /// The gRPC (and, unless split, every binding's) address, `IP:PORT`.
    pub addr: String,
    /// The HTTP bindings' own address, when started with `--http-listen`.
    pub http: Option<String>,
    stderr: PathBuf,
}

impl ServerProcess {
    /// Starts the binary with `args` and waits (bounded) for the address line(s).
    pub fn start(args: &[&str]) -> Self {
        Self::start_with_env(args, &[])
    }

    /// [`ServerProcess::start`] with extra environment variables.
    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::start_bin(std::path::Path::new(BIN), args, env)
    }

    /// [`ServerProcess::start_with_env`] of another build of the binary (the release build
    /// that tests/attacks measures).
    pub fn start_bin(bin: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(bin);
        command.args(args);
        Self::spawn(command, args, env)
    }

    /// [`ServerProcess::start`] under a soft limit of `nofile` open files (the shell's
    /// `ulimit -n`, then `exec`, so the pid is the server's).
    pub fn start_with_nofile(args: &[&str], nofile: u64) -> Self {
        let mut command = Command::new("sh");
        command.arg("-c").arg(format!("ulimit -S -n {nofile} && exec \"$0\" \"$@\"")).arg(BIN).args(args);
        Self::spawn(command, args, &[])
    }

    fn spawn(mut command: Command, args: &[&str], env: &[(&str, &str)]) -> Self {
        let stderr = log_path();
        for name in SCRUBBED_ENV {
            command.env_remove(name);
        }
        command.envs(env.iter().copied());
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("stderr log"))
            .spawn()
            .expect("spawn a2a-server");
        // Read stdout on a thread for the process's whole life: the server must never write
        // into a closed pipe, and the test must never block on a line that does not come.
        let (lines_tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if lines_tx.send(line).is_err() {
                    // Nobody listens any more; keep draining.
                    continue;
                }
            }
        });
        let mut process = Self { child, addr: String::new(), http: None, stderr };
        let first = process.line(&lines, "the `listening on` line");
        process.addr = first
            .split("listening on ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no address in {first:?}"))
            .to_owned();
        if args.contains(&"--http-listen") {
            let second = process.line(&lines, "the HTTP bindings line");
            process.http = Some(second.rsplit(' ').next().unwrap().to_owned());
        }
        process
    }

    /// The next stdout line, or a panic that shows stderr if the process exits or stays silent.
    fn line(&mut self, lines: &mpsc::Receiver<String>, what: &str) -> String {
        match lines.recv_timeout(PATIENCE) {
            Ok(line) => line,
            Err(_) => {
                let status = self.child.try_wait().ok().flatten();
                panic!(
                    "a2a-server did not print {what} (exit status: {status:?}); stderr:\n{}",
                    self.stderr()
                )
            }
        }
    }

    /// `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM (graceful shutdown).
    pub fn terminate(&self) {
        self.signal("-TERM");
    }

    /// Sends SIGHUP (reload the TLS files).
    pub fn hangup(&self) {
        self.signal("-HUP");
    }

    /// Sends SIGKILL: the process dies on the spot, as in a crash.
    pub fn kill9(&mut self) {
        self.signal("-KILL");
        let _ = self.child.wait();
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill").args([signal, &self.pid().to_string()]).status().unwrap();
        assert!(status.success(), "kill {signal} {}", self.pid());
    }

    /// Waits (bounded by [`PATIENCE`]) for the process to exit; its exit code.
    pub async fn exit_code(&mut self) -> i32 {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            assert!(tokio::time::Instant::now() < deadline, "the server did not exit");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Everything the process wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = self.stderr();
            let tail: Vec<&str> = log.lines().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect();
            eprintln!("---- a2a-server {} (pid {}) stderr, last lines ----", self.addr, self.pid());
            eprintln!("{}", tail.join("\n"));
        }
        let _ = std::fs::remove_file(&self.stderr);
    }
}

/// Runs the binary until it exits by itself (bounded by [`PATIENCE`], then killed): its exit
/// code and stderr.
pub fn run_to_exit(args: &[&str]) -> (i32, String) {
    let stderr = log_path();
    let mut command = Command::new(BIN);
    command.args(args);
    for name in SCRUBBED_ENV {
        command.env_remove(name);
    }
    let mut child = command
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).expect("stderr log"))
        .spawn()
        .expect("run a2a-server");
    let deadline = Instant::now() + PATIENCE;
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code().unwrap_or(-1);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(&stderr).unwrap_or_default();
            panic!("a2a-server {args:?} did not exit within {PATIENCE:?}; stderr:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let log = std::fs::read_to_string(&stderr).unwrap_or_default();
    let _ = std::fs::remove_file(&stderr);
    (code, log)
}

/// A fresh file for one process's stderr.
fn log_path() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("a2a-server-test-{}-{n}.stderr", std::process::id()))
}
