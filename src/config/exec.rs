//! The `--exec-…` settings of the exec agent (`--agent exec`): how a message reaches its
//! command, and the bounds on the command's time, concurrency and output.
use std::time::Duration;

use clap::Args;

use crate::agent::exec::{ExecConfig, InputFormat, StdinMode};

/// The exec agent's settings; see each flag.
#[derive(Debug, Clone, Args)]
pub struct ExecFlags {
    /// exec agent: how a message reaches the command's stdin (its text, or one line of A2A JSON).
    #[arg(
        id = "exec_input",
        long = "exec-input",
        value_name = "EXEC_INPUT",
        env = "A2A_EXEC_INPUT",
        value_enum,
        default_value_t = InputFormat::Text
    )]
    pub input: InputFormat,

    /// exec agent: close stdin after the first message, or keep it open so that later messages
    /// on the task (answers to INPUT_REQUIRED) reach the command too.
    #[arg(
        id = "exec_stdin",
        long = "exec-stdin",
        value_name = "EXEC_STDIN",
        env = "A2A_EXEC_STDIN",
        value_enum,
        default_value_t = StdinMode::Close
    )]
    pub stdin: StdinMode,

    /// exec agent: stdout lines starting with this and a JSON object are control instructions
    /// (empty: none are).
    #[arg(
        id = "exec_control_prefix",
        value_name = "EXEC_CONTROL_PREFIX",
        long = "exec-control-prefix",
        env = "A2A_EXEC_CONTROL_PREFIX",
        default_value = "@a2a"
    )]
    pub control_prefix: String,

    /// exec agent: seconds a command may run before it is stopped and its task fails (0: no limit).
    #[arg(
        id = "exec_timeout_secs",
        value_name = "EXEC_TIMEOUT_SECS",
        long = "exec-timeout-secs",
        env = "A2A_EXEC_TIMEOUT_SECS",
        default_value_t = 3600
    )]
    pub timeout_secs: u64,

    /// exec agent: milliseconds between SIGTERM and SIGKILL when a command is stopped.
    #[arg(
        id = "exec_grace_ms",
        long = "exec-grace-ms",
        value_name = "EXEC_GRACE_MS",
        env = "A2A_EXEC_GRACE_MS",
        default_value_t = 5000
    )]
    pub grace_ms: u64,

    /// exec agent: commands running at once; further tasks wait in SUBMITTED, in order.
    #[arg(
        id = "exec_max_concurrency",
        long = "exec-max-concurrency",
        value_name = "EXEC_MAX_CONCURRENCY",
        env = "A2A_EXEC_MAX_CONCURRENCY",
        default_value_t = 16,
        value_parser = clap::value_parser!(u64).range(1..=100_000)
    )]
    pub max_concurrency: u64,

    /// exec agent: bytes of the stdout artifact a task keeps (live subscribers get all output).
    #[arg(
        id = "exec_max_artifact_bytes",
        long = "exec-max-artifact-bytes",
        value_name = "EXEC_MAX_ARTIFACT_BYTES",
        env = "A2A_EXEC_MAX_ARTIFACT_BYTES",
        default_value_t = 1 << 20
    )]
    pub max_artifact_bytes: usize,
}

impl ExecFlags {
    /// The exec agent's settings for `command` (the program, then its arguments).
    pub fn config(&self, command: &[String]) -> ExecConfig {
        let (program, args) = command.split_first().map(|(p, a)| (p.as_str(), a)).unwrap_or(("", &[]));
        ExecConfig {
            input: self.input,
            stdin: self.stdin,
            control_prefix: self.control_prefix.clone(),
            timeout: (self.timeout_secs > 0).then(|| Duration::from_secs(self.timeout_secs)),
            grace: Duration::from_millis(self.grace_ms),
            max_concurrency: self.max_concurrency as usize,
            max_artifact_bytes: self.max_artifact_bytes,
            ..ExecConfig::new(program, args.iter().cloned())
        }
    }
}
