//! Command-line flags; each also reads an `A2A_*` environment variable.
use std::net::SocketAddr;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::core::CoreSettings;
use crate::task::store::Retention;

/// a2a-server: hosts an agent behind the A2A v1.0 protocol (gRPC first).
#[derive(Debug, Clone, Parser)]
#[command(name = "a2a-server", version, about)]
pub struct Config {
    /// Address to listen on.
    #[arg(long, env = "A2A_LISTEN", default_value = "0.0.0.0:50051")]
    pub listen: SocketAddr,

    /// The agent to host.
    #[arg(long, env = "A2A_AGENT", value_enum, default_value_t = AgentKind::Demo)]
    pub agent: AgentKind,

    /// Log output format.
    #[arg(long, env = "A2A_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Log filter, e.g. `info` or `a2a_server=debug,info`.
    #[arg(long, env = "A2A_LOG_LEVEL", default_value = "info")]
    pub log_level: String,

    /// Finished tasks kept readable (GetTask, ListTasks); the oldest go first.
    #[arg(long, env = "A2A_TASK_RETENTION_COUNT", default_value_t = 10_000)]
    pub task_retention_count: usize,

    /// Seconds a finished task stays readable.
    #[arg(long, env = "A2A_TASK_RETENTION_SECS", default_value_t = 3600)]
    pub task_retention_secs: u64,

    /// Events each live task keeps so that subscribers which fall behind can catch up.
    #[arg(long, env = "A2A_EVENT_LOG_CAPACITY", default_value_t = 4096,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub event_log_capacity: u64,
}

/// Built-in agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AgentKind {
    /// Deterministic demo behaviours (see the README).
    Demo,
}

/// Log formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

impl Config {
    /// The retention of finished tasks.
    pub fn retention(&self) -> Retention {
        Retention {
            max_finished: self.task_retention_count,
            max_age: Duration::from_secs(self.task_retention_secs),
        }
    }

    /// The core's settings.
    pub fn core_settings(&self) -> CoreSettings {
        CoreSettings { event_log_capacity: self.event_log_capacity as usize, ..CoreSettings::default() }
    }
}
