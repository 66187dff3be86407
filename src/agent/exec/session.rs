//! One task's command, from start to end: its stdout turned into the output artifact and
//! control instructions, raced against its exit and the task's timeout.
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::process::ChildStdout;
use tokio::time::Instant;

use super::ExecConfig;
use super::control::{self, Control};
use super::output::{End, LineReader, MAX_LINE, Piece, StdoutArtifact};
use super::process::{Exit, ProcessGroup};
use crate::agent::{EventSink, SinkClosed};

/// How long stdout is still read after the command has ended, for output left in the pipe. A
/// process that left the group but holds the pipe open cannot keep the task alive longer.
const DRAIN: Duration = Duration::from_secs(5);

/// How the command ended.
pub(super) struct Ending {
    /// How its leader ended.
    pub exit: Exit,
    /// Why the server stopped it, if it did: a timeout or a control-protocol error.
    pub stopped: Option<String>,
}

pub(super) struct Session<'a> {
    config: &'a ExecConfig,
    events: &'a EventSink,
    group: Arc<ProcessGroup>,
    stdout: LineReader<ChildStdout>,
    artifact: StdoutArtifact,
    /// Whether a follow-up message can still reach the command.
    stdin_open: bool,
    stopped: Option<String>,
}

impl<'a> Session<'a> {
    pub fn new(
        config: &'a ExecConfig,
        events: &'a EventSink,
        group: Arc<ProcessGroup>,
        stdout: ChildStdout,
        stdin_open: bool,
    ) -> Self {
        Self {
            config,
            events,
            group,
            stdout: LineReader::new(stdout, MAX_LINE),
            artifact: StdoutArtifact::new(config.max_artifact_bytes),
            stdin_open,
            stopped: None,
        }
    }

    /// Streams the command's output until it has ended and its stdout is drained.
    pub async fn run(mut self) -> Result<Ending, SinkClosed> {
        let deadline = self.config.timeout.map(|timeout| Instant::now() + timeout);
        let mut exit_watch = self.group.exit();
        let mut exit = None;
        let mut drain_until = None;
        let mut reading = true;
        while reading || exit.is_none() {
            // Lines that are already waiting go out together; the chunk leaves as soon as the
            // command has nothing more to say right now.
            if reading && self.artifact.has_pending() {
                match self.stdout.next().now_or_never() {
                    Some(read) => {
                        reading = self.on_read(read).await?;
                        continue;
                    }
                    None => self.artifact.flush(self.events).await?,
                }
            }
            tokio::select! {
                read = self.stdout.next(), if reading => reading = self.on_read(read).await?,
                ended = async { exit_watch.wait_for(Option::is_some).await.ok().and_then(|ended| *ended) },
                    if exit.is_none() =>
                {
                    exit = Some(ended.unwrap_or(Exit::Unknown));
                    drain_until = Some(Instant::now() + DRAIN);
                }
                () = sleep_until(deadline), if exit.is_none() && self.stopped.is_none() => {
                    let timeout = self.config.timeout.unwrap_or_default();
                    self.stop(format!("the command timed out after {timeout:?} and was stopped"));
                }
                () = sleep_until(drain_until), if reading => reading = false,
            }
        }
        self.artifact.finish(self.events).await?;
        Ok(Ending { exit: exit.unwrap_or(Exit::Unknown), stopped: self.stopped })
    }

    /// Handles one read from stdout; whether to keep reading.
    async fn on_read(&mut self, read: std::io::Result<Option<Piece>>) -> Result<bool, SinkClosed> {
        match read {
            Ok(Some(piece)) => {
                self.on_piece(piece).await?;
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(error) => {
                tracing::warn!(task_id = %self.events.task_id(), %error, "reading the command's output failed");
                Ok(false)
            }
        }
    }

    async fn on_piece(&mut self, piece: Piece) -> Result<(), SinkClosed> {
        if self.stopped.is_some() {
            // Still read, so that the command never blocks on a full pipe, but pass nothing on.
            return Ok(());
        }
        let control = if piece.line_start {
            control::control_json(&piece.text, &self.config.control_prefix)
        } else {
            None
        };
        if let Some(json) = control {
            self.artifact.flush(self.events).await?;
            if piece.end == End::Split {
                self.stop(format!("a control line is longer than {MAX_LINE} bytes"));
                return Ok(());
            }
            return match control::parse(json) {
                Ok(control) => self.apply(control).await,
                Err(problem) => {
                    self.stop(format!("invalid control line {}: {problem}", shorten(json)));
                    Ok(())
                }
            };
        }
        let mut text = piece.text;
        if piece.end == End::Newline {
            text.push('\n');
        }
        self.artifact.write(self.events, &text).await
    }

    async fn apply(&mut self, control: Control) -> Result<(), SinkClosed> {
        match control {
            Control::Status(text) => self.events.working(text.as_deref()).await,
            Control::Artifact { artifact, append, last_chunk } => {
                self.events.artifact_chunk(artifact, append, last_chunk).await
            }
            Control::InputRequired(_) if !self.stdin_open => {
                self.stop(
                    "the command asked for input, but its stdin is closed after the first message \
                     (serve it with --exec-stdin open)"
                        .into(),
                );
                Ok(())
            }
            Control::InputRequired(text) => self.events.input_required(text.as_deref()).await,
            Control::AuthRequired(text) => self.events.auth_required(text.as_deref()).await,
        }
    }

    /// Stops the command (SIGTERM, then SIGKILL after the grace period); the task will fail
    /// with `reason`.
    fn stop(&mut self, reason: String) {
        tracing::info!(task_id = %self.events.task_id(), %reason, "stopping the command");
        self.stopped.get_or_insert(reason);
        self.group.stop();
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// A control line as quoted in an error: at most 200 characters.
fn shorten(text: &str) -> String {
    match text.char_indices().nth(200) {
        Some((cut, _)) => format!("{:?}…", &text[..cut]),
        None => format!("{text:?}"),
    }
}
