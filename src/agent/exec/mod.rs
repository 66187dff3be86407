//! The built-in `exec` agent: any program becomes an A2A agent.
//!
//! `a2a-server --agent exec -- CMD [ARGS…]` runs CMD once per task, in its own process group,
//! with `A2A_TASK_ID`, `A2A_CONTEXT_ID` and `A2A_MESSAGE_ID` in its environment:
//!
//! - **Input**: the user message's text parts on stdin ([`InputFormat::Text`]), or the whole
//!   message as one line of A2A JSON ([`InputFormat::Json`]). With [`StdinMode::Close`] stdin
//!   closes after the first message, as filters (`wc`, `sort`, `sys.stdin.read()`) expect; with
//!   [`StdinMode::Open`] every later message on the task is written there too, one per line.
//! - **Output**: stdout becomes one artifact, `stdout`, streamed live. A line goes out as soon
//!   as it is complete; lines that are already waiting go out together in one chunk (at most
//!   4 KiB), so a fast writer does not cost one event per line. The first chunk creates the
//!   artifact, later ones append; at the end of output an empty chunk carries `lastChunk`.
//!   Concatenating the chunks' texts gives stdout without its control lines (bytes that are
//!   not UTF-8 become U+FFFD). Memory stays bounded however much is printed: lines are read
//!   with a 1 MiB limit (longer ones are passed on in pieces), and the task keeps at most
//!   [`ExecConfig::max_artifact_bytes`] of the artifact — past that a chunk replaces what is
//!   stored (`append: false`, with `omittedBytes` in the artifact's metadata), so live
//!   subscribers still get everything and late readers the latest window.
//! - **Control**: a stdout line starting with the control prefix (default `@a2a`) and then a
//!   JSON object is an instruction instead of output (anything else after the prefix fails the
//!   task):
//!
//!   | line | effect |
//!   |---|---|
//!   | `@a2a {"status": "Downloading…"}` | WORKING, with that status message (`null`: none) |
//!   | `@a2a {"artifact": {"name": "summary", "parts": [{"text": "…"}]}}` | an artifact in A2A JSON; `artifactId` defaults to the name; optional siblings `"append"` and `"lastChunk"` stream it in chunks |
//!   | `@a2a {"data": {"words": 42}}` | shorthand: a new artifact `data` with one data part (optional sibling `"name"`) |
//!   | `@a2a {"inputRequired": "Your name?"}` | INPUT_REQUIRED; the next message on the task arrives on stdin ([`StdinMode::Open`] only) |
//!   | `@a2a {"authRequired": "Sign in at …"}` | AUTH_REQUIRED; the next message arrives on stdin, or the command resumes by itself with a `status` line |
//! - **End**: exit code 0 → COMPLETED; any other exit or a signal → FAILED, with the last
//!   lines of stderr in the status message. When the command ends, whatever it left running in
//!   its process group is killed.
//! - **Cancel**: SIGTERM to the process group, SIGKILL after the grace period; CancelTask
//!   answers once the group is gone. Processes are also stopped when their execution is
//!   dropped (the task failed) and killed when the server shuts down: no orphans.
//! - **Limits**: a per-task timeout (the task fails); at most
//!   [`ExecConfig::max_concurrency`] commands at once — further tasks wait in SUBMITTED and
//!   start in the order they came.
pub(crate) mod control;
pub(crate) mod output;
mod process;
mod session;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::{Semaphore, mpsc};

use super::{AgentExecutor, EventSink, RequestContext};
use crate::error::A2aError;
use crate::proto::{AgentCard, AgentSkill, Message, TaskState};
pub use output::STDOUT_ARTIFACT;
pub use process::CommandError;
use process::{Launch, StopOnDrop};
use session::Session;

/// How a message is written to the command's stdin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InputFormat {
    /// The message's text parts, joined with newlines, ending with a newline.
    #[default]
    Text,
    /// The whole message as one line of A2A (Proto)JSON.
    Json,
}

/// Whether stdin stays open for later messages on the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StdinMode {
    /// Stdin closes after the first message: the command sees end of input.
    #[default]
    Close,
    /// Stdin stays open; each later message on the task is written to it (multi-turn).
    Open,
}

/// What the exec agent runs and within which limits.
#[derive(Debug, Clone)]
pub struct ExecConfig {
    /// The program (a path, or a name looked up on `PATH`).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// How messages are written to stdin.
    pub input: InputFormat,
    /// Whether stdin stays open for later messages.
    pub stdin: StdinMode,
    /// Stdout lines starting with this (and then a JSON object) are control instructions; an
    /// empty prefix turns the control protocol off.
    pub control_prefix: String,
    /// A command running longer is stopped and its task fails; `None`: no limit.
    pub timeout: Option<Duration>,
    /// How long a stopped command has between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Commands running at once; further tasks wait in SUBMITTED.
    pub max_concurrency: usize,
    /// Bytes of the stdout artifact the task keeps (live subscribers get all of it).
    pub max_artifact_bytes: usize,
}

impl ExecConfig {
    /// Runs `program` with `args`, with the defaults for everything else.
    pub fn new(program: impl Into<PathBuf>, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            input: InputFormat::Text,
            stdin: StdinMode::Close,
            control_prefix: "@a2a".into(),
            timeout: Some(Duration::from_secs(3600)),
            grace: Duration::from_secs(5),
            max_concurrency: 16,
            max_artifact_bytes: 1 << 20,
        }
    }
}

/// The exec agent. Cheap to share; one per server.
///
/// ```
/// use std::time::Duration;
///
/// use a2a_server::agent::exec::{CommandError, ExecAgent, ExecConfig, StdinMode};
///
/// let mut config = ExecConfig::new("sh", ["-c", "tr a-z A-Z"]);
/// config.stdin = StdinMode::Open;
/// config.timeout = Some(Duration::from_secs(60));
/// let agent = ExecAgent::new(config)?; // checks that the program exists and is executable
/// assert!(agent.config().program.is_absolute(), "found on PATH");
///
/// let missing = ExecAgent::new(ExecConfig::new("/no/such/program", Vec::<String>::new()));
/// assert!(matches!(missing, Err(CommandError::NotFound(_))));
/// # Ok::<(), CommandError>(())
/// ```
pub struct ExecAgent {
    config: Arc<ExecConfig>,
    slots: Arc<Semaphore>,
    running: Mutex<HashMap<String, Arc<Running>>>,
}

/// A task's running command, as later messages and cancellation reach it.
struct Running {
    group: Arc<process::ProcessGroup>,
    /// Later messages go to stdin through here (`None` once stdin is closed).
    input: Option<mpsc::Sender<Vec<u8>>>,
    /// Set by [`AgentExecutor::cancel`]: the task ends CANCELED, not by the command's exit.
    canceled: AtomicBool,
}

impl ExecAgent {
    /// An agent running `config.program`, which must be an executable file.
    pub fn new(mut config: ExecConfig) -> Result<Self, CommandError> {
        config.program = process::resolve(&config.program)?;
        let slots = Arc::new(Semaphore::new(config.max_concurrency.max(1)));
        Ok(Self { config: Arc::new(config), slots, running: Mutex::default() })
    }

    /// The configuration in force (with the program resolved to its path).
    pub fn config(&self) -> &ExecConfig {
        &self.config
    }

    /// The card the exec agent publishes unless the operator overrides it: one skill, running
    /// the command.
    pub fn card(&self) -> AgentCard {
        let program = self.config.program.file_name().unwrap_or(self.config.program.as_os_str());
        let command_line = std::iter::once(self.config.program.display().to_string())
            .chain(self.config.args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ");
        let input_mode = match self.config.input {
            InputFormat::Text => "text/plain",
            InputFormat::Json => "application/json",
        };
        AgentCard {
            name: program.to_string_lossy().into_owned(),
            description: format!(
                "Runs `{command_line}` for each task; its output streams back as an artifact."
            ),
            version: env!("CARGO_PKG_VERSION").into(),
            default_input_modes: vec![input_mode.into()],
            default_output_modes: vec!["text/plain".into(), "application/json".into()],
            skills: vec![AgentSkill {
                id: "run".into(),
                name: "Run".into(),
                description: format!("Runs `{command_line}` with the message on its stdin."),
                tags: vec!["exec".into()],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn running(&self, task_id: &str) -> Option<Arc<Running>> {
        self.lock().get(task_id).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Running>>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The first message of a task: wait for a slot, run the command, report how it ended.
    async fn run(&self, ctx: RequestContext, events: EventSink) -> Result<(), A2aError> {
        // Polled once before SUBMITTED is reported, so the task holds its place in the queue
        // before its creator hears of it: tasks start in the order they were created.
        let acquire = self.slots.clone().acquire_owned();
        tokio::pin!(acquire);
        let permit = match (&mut acquire).now_or_never() {
            Some(permit) => permit,
            None => {
                let waiting = format!(
                    "waiting: {} commands are running, the most this agent runs at once",
                    self.config.max_concurrency
                );
                events.status(TaskState::Submitted, Some(events.agent_message(&waiting))).await?;
                acquire.await
            }
        }
        .map_err(|_| A2aError::Internal("the exec agent's slots are closed".into()))?;
        events.working(None).await?;
        let input = encode(&ctx.message, &self.config);
        let launch = Launch {
            program: &self.config.program,
            args: &self.config.args,
            env: [
                ("A2A_TASK_ID", &ctx.task_id),
                ("A2A_CONTEXT_ID", &ctx.context_id),
                ("A2A_MESSAGE_ID", &ctx.message.message_id),
            ],
            grace: self.config.grace,
        };
        let spawned = match process::spawn(launch, permit) {
            Ok(spawned) => spawned,
            Err(error) => {
                let text = format!("cannot start {}: {error}", self.config.program.display());
                events.fail(Some(&text)).await?;
                return Ok(());
            }
        };
        let _stop = StopOnDrop(spawned.group.clone());
        let (input_tx, input_rx) = mpsc::channel(4);
        tokio::spawn(write_stdin(spawned.stdin, input_rx));
        let _ = input_tx.try_send(input);
        let input = (self.config.stdin == StdinMode::Open).then_some(input_tx);
        let stdin_open = input.is_some();
        let running =
            Arc::new(Running { group: spawned.group.clone(), input, canceled: AtomicBool::new(false) });
        let _registered = Registered::new(self, &ctx.task_id, running.clone());

        let stderr_tail = Arc::new(Mutex::new(output::StderrTail::default()));
        let stderr =
            tokio::spawn(output::collect_stderr(spawned.stderr, stderr_tail.clone(), ctx.task_id.clone()));
        let ending =
            Session::new(&self.config, &events, spawned.group, spawned.stdout, stdin_open).run().await?;
        if running.canceled.load(Ordering::SeqCst) {
            return Ok(());
        }
        // Stderr ends with the group; a process that escaped it cannot hold the task.
        let _ = tokio::time::timeout(Duration::from_secs(1), stderr).await;
        let tail = stderr_tail.lock().unwrap_or_else(|e| e.into_inner()).describe();
        match ending.stopped {
            Some(reason) => events.fail(Some(&format!("{reason}{tail}"))).await?,
            None if ending.exit.success() => events.complete(None).await?,
            None => events.fail(Some(&format!("{}{tail}", ending.exit.describe()))).await?,
        }
        Ok(())
    }

    /// A later message on a task whose command runs: written to its stdin (when open). If the
    /// task was waiting for the message it is WORKING again before the command can react, and
    /// this execution ends there; the first execution carries on reporting.
    async fn deliver(
        &self,
        running: &Running,
        ctx: RequestContext,
        events: EventSink,
    ) -> Result<(), A2aError> {
        let Some(input) = &running.input else {
            tracing::info!(task_id = %ctx.task_id, "stdin is closed; the message stays in the history only");
            return Ok(());
        };
        let bytes = encode(&ctx.message, &self.config);
        if matches!(ctx.state(), TaskState::InputRequired | TaskState::AuthRequired) {
            events.working(None).await?;
        }
        if input.send(bytes).await.is_err() {
            tracing::info!(task_id = %ctx.task_id, "the command no longer reads its input");
        }
        Ok(())
    }
}

#[async_trait]
impl AgentExecutor for ExecAgent {
    async fn execute(&self, ctx: RequestContext, events: EventSink) -> Result<(), A2aError> {
        if let Some(running) = self.running(&ctx.task_id) {
            return self.deliver(&running, ctx, events).await;
        }
        if !ctx.new_task {
            // The command has not started yet or has just ended: the message stays in the
            // history, and the first execution still decides how the task ends.
            return Ok(());
        }
        self.run(ctx, events).await
    }

    /// Stops the task's command and waits (a little longer than the grace period) until its
    /// whole process group is gone.
    async fn cancel(&self, task_id: &str) {
        let Some(running) = self.running(task_id) else {
            return;
        };
        running.canceled.store(true, Ordering::SeqCst);
        running.group.stop();
        let patience = self.config.grace + Duration::from_secs(2);
        if tokio::time::timeout(patience, running.group.gone()).await.is_err() {
            tracing::warn!(%task_id, "the command outlived SIGKILL");
        }
    }
}

/// Keeps a task's [`Running`] findable while its first execution lives.
struct Registered<'a> {
    agent: &'a ExecAgent,
    task_id: String,
}

impl<'a> Registered<'a> {
    fn new(agent: &'a ExecAgent, task_id: &str, running: Arc<Running>) -> Self {
        agent.lock().insert(task_id.to_owned(), running);
        Self { agent, task_id: task_id.to_owned() }
    }
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.agent.lock().remove(&self.task_id);
    }
}

/// A message as the command reads it: one line of JSON, or its text ending with a newline
/// (an empty text is nothing, unless stdin stays open: then it is an empty line).
fn encode(message: &Message, config: &ExecConfig) -> Vec<u8> {
    let mut text = match config.input {
        InputFormat::Text => super::message_text(message),
        InputFormat::Json => crate::protojson::encode_string(message),
    };
    if (config.stdin == StdinMode::Open || !text.is_empty()) && !text.ends_with('\n') {
        text.push('\n');
    }
    text.into_bytes()
}

/// Writes messages to stdin until the channel closes (then stdin closes) or the command stops
/// reading.
async fn write_stdin(mut stdin: ChildStdin, mut messages: mpsc::Receiver<Vec<u8>>) {
    while let Some(bytes) = messages.recv().await {
        if stdin.write_all(&bytes).await.is_err() || stdin.flush().await.is_err() {
            break;
        }
    }
}
