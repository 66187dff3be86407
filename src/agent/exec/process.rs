//! One command run: its own process group, and a supervisor that guarantees the whole group
//! is gone when the command ends, is stopped, or the server drops it.
//!
//! The [`Child`] belongs to a supervisor tokio task, not to the execution that reads the output,
//! so the process is reaped and stopped (SIGTERM, then SIGKILL after the grace period) even
//! while that execution waits for the task's queue or has been dropped. When the supervisor
//! itself is dropped (the runtime shuts down), a guard kills the group with SIGKILL.
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::{OwnedSemaphorePermit, watch};

/// Why the command cannot be run at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// No command was given.
    #[error("no command given: a2a-server --agent exec -- CMD [ARGS…]")]
    Missing,
    /// The program does not exist (as a path, or on `PATH`).
    #[error("command not found: {0}")]
    NotFound(String),
    /// The program exists but cannot be executed.
    #[error("command is not executable: {0}: {1}")]
    NotExecutable(String, String),
}

/// Finds `program` as a path (when it holds a `/`) or on `PATH`, and checks that it is an
/// executable file.
pub(super) fn resolve(program: &Path) -> Result<PathBuf, CommandError> {
    let shown = program.display().to_string();
    if program.as_os_str().is_empty() {
        return Err(CommandError::Missing);
    }
    if program.as_os_str().as_bytes().contains(&b'/') {
        return check_executable(program).map(|()| program.to_path_buf());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut found_but_not_executable = None;
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(program);
        match check_executable(&candidate) {
            Ok(()) => return Ok(candidate),
            Err(CommandError::NotExecutable(_, why)) => {
                found_but_not_executable.get_or_insert(CommandError::NotExecutable(shown.clone(), why));
            }
            Err(_) => {}
        }
    }
    Err(found_but_not_executable.unwrap_or(CommandError::NotFound(format!("{shown} (not on PATH)"))))
}

fn check_executable(path: &Path) -> Result<(), CommandError> {
    let shown = path.display().to_string();
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Err(CommandError::NotFound(shown)),
        Err(error) => return Err(CommandError::NotExecutable(shown, error.to_string())),
    };
    if !metadata.is_file() {
        return Err(CommandError::NotExecutable(shown, "not a regular file".into()));
    }
    if metadata.permissions().mode() & 0o111 == 0 {
        return Err(CommandError::NotExecutable(shown, "no execute permission".into()));
    }
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| CommandError::NotExecutable(shown.clone(), "the path holds a NUL byte".into()))?;
    // access(2) asks the kernel with the server's own credentials, which the permission bits
    // alone cannot tell (ACLs, read-only mounts, noexec).
    // SAFETY: `c_path` is a valid NUL-terminated string that outlives the call.
    #[allow(unsafe_code)]
    let refused = unsafe { libc::access(c_path.as_ptr(), libc::X_OK) } != 0;
    if refused {
        return Err(CommandError::NotExecutable(shown, io::Error::last_os_error().to_string()));
    }
    Ok(())
}

/// How the command's leader process ended.
#[derive(Debug, Clone, Copy)]
pub(super) enum Exit {
    /// It exited or was killed.
    Status(ExitStatus),
    /// Waiting for it failed (the process is gone, but how it ended is unknown).
    Unknown,
}

impl Exit {
    pub fn success(&self) -> bool {
        matches!(self, Exit::Status(status) if status.success())
    }

    /// What happened, for a status message.
    pub fn describe(&self) -> String {
        match self {
            Exit::Status(status) => match (status.code(), status.signal()) {
                (Some(code), _) => format!("the command exited with code {code}"),
                (None, Some(signal)) => {
                    format!("the command was killed by signal {signal} ({})", signal_name(signal))
                }
                (None, None) => format!("the command ended: {status}"),
            },
            Exit::Unknown => "the command ended in an unknown way".into(),
        }
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGABRT => "SIGABRT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        _ => "another signal",
    }
}

/// A running command's process group: ask it to stop, learn when its leader has ended.
pub(super) struct ProcessGroup {
    stop: watch::Sender<bool>,
    exit: watch::Sender<Option<Exit>>,
}

impl ProcessGroup {
    /// Stops the group: SIGTERM now, SIGKILL after the grace period. Idempotent.
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// Watches the leader's end (`None` until then). By the time it is set, the rest of the
    /// group has been sent SIGKILL.
    pub fn exit(&self) -> watch::Receiver<Option<Exit>> {
        self.exit.subscribe()
    }

    /// Waits until the group is gone.
    pub async fn gone(&self) {
        let _ = self.exit().wait_for(Option::is_some).await;
    }
}

/// Stops the group when dropped: the execution that owns it ended or was aborted.
pub(super) struct StopOnDrop(pub Arc<ProcessGroup>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// The pipes of a started command, and its group.
pub(super) struct Spawned {
    pub group: Arc<ProcessGroup>,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    pub stderr: ChildStderr,
}

/// What a command run needs to know.
pub(super) struct Launch<'a> {
    pub program: &'a Path,
    pub args: &'a [String],
    pub env: [(&'static str, &'a str); 3],
    pub grace: Duration,
}

/// Starts the command in a new process group with piped stdio, and its supervisor, which
/// holds `permit` (a concurrency slot) until the whole group is gone.
pub(super) fn spawn(launch: Launch<'_>, permit: OwnedSemaphorePermit) -> io::Result<Spawned> {
    let mut command = Command::new(launch.program);
    command
        .args(launch.args)
        .envs(launch.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = command.spawn()?;
    let pid = child.id().ok_or_else(|| io::Error::other("the process ended before it could be watched"))?;
    let guard = GroupGuard { pgid: pid as libc::pid_t, armed: true };
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(io::Error::other("the process's pipes are missing"));
    };
    let group = Arc::new(ProcessGroup { stop: watch::channel(false).0, exit: watch::channel(None).0 });
    tokio::spawn(supervise(child, group.clone(), launch.grace, guard, permit));
    Ok(Spawned { group, stdin, stdout, stderr })
}

/// Reaps the leader; on a stop request sends SIGTERM to the group and SIGKILL after `grace`.
/// Once the leader has ended, whatever is left of its group is killed too.
async fn supervise(
    mut child: Child,
    group: Arc<ProcessGroup>,
    grace: Duration,
    mut guard: GroupGuard,
    permit: OwnedSemaphorePermit,
) {
    let mut stop = group.stop.subscribe();
    let waited = tokio::select! {
        waited = child.wait() => waited,
        _ = async { stop.wait_for(|stop| *stop).await.is_ok() } => {
            guard.signal(libc::SIGTERM);
            match tokio::time::timeout(grace, child.wait()).await {
                Ok(waited) => waited,
                Err(_) => {
                    guard.signal(libc::SIGKILL);
                    child.wait().await
                }
            }
        }
    };
    guard.kill_rest();
    drop(permit);
    let exit = match waited {
        Ok(status) => Exit::Status(status),
        Err(error) => {
            tracing::warn!(%error, "waiting for a command failed");
            Exit::Unknown
        }
    };
    group.exit.send_replace(Some(exit));
}

/// Signals a process group; kills it with SIGKILL when dropped while still armed.
struct GroupGuard {
    pgid: libc::pid_t,
    armed: bool,
}

impl GroupGuard {
    fn signal(&self, signal: libc::c_int) {
        if self.armed {
            // The whole process group, so that a shell's children go too; std has no killpg.
            // SAFETY: killpg only sends a signal; a group that no longer exists answers ESRCH.
            #[allow(unsafe_code)]
            unsafe {
                libc::killpg(self.pgid, signal)
            };
        }
    }

    /// Kills what is left of the group once its leader has been reaped, and disarms: the group
    /// id may be reused afterwards.
    fn kill_rest(&mut self) {
        self.signal(libc::SIGKILL);
        self.armed = false;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.signal(libc::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_programs_and_explains_failures() {
        assert!(resolve(Path::new("sh")).unwrap().is_absolute());
        assert_eq!(resolve(Path::new("/bin/sh")).unwrap(), Path::new("/bin/sh"));
        assert_eq!(resolve(Path::new("")), Err(CommandError::Missing));
        assert!(matches!(resolve(Path::new("/nonexistent/tool")), Err(CommandError::NotFound(_))));
        assert!(matches!(resolve(Path::new("no-such-tool-a2a")), Err(CommandError::NotFound(_))));
        assert!(matches!(resolve(Path::new("/tmp")), Err(CommandError::NotExecutable(..))));
        let file = std::env::temp_dir().join(format!("a2a-not-executable-{}", std::process::id()));
        std::fs::write(&file, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = resolve(&file).unwrap_err().to_string();
        std::fs::remove_file(&file).unwrap();
        assert!(error.contains("no execute permission"), "{error}");
    }

    #[test]
    fn describes_how_a_command_ended() {
        assert_eq!(Exit::Status(ExitStatus::from_raw(3 << 8)).describe(), "the command exited with code 3");
        assert_eq!(
            Exit::Status(ExitStatus::from_raw(libc::SIGKILL)).describe(),
            "the command was killed by signal 9 (SIGKILL)"
        );
        assert!(Exit::Status(ExitStatus::from_raw(0)).success());
    }
}
