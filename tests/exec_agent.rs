//! The `exec` agent over gRPC, with real processes: small shell scripts that each test writes
//! into its own scratch directory. A script waits for a file the test creates whenever the
//! test must see something happen before the script goes on; nothing sleeps to synchronise.
mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use a2a_server::agent::exec::{ExecAgent, ExecConfig, InputFormat, STDOUT_ARTIFACT, StdinMode};
use a2a_server::proto::a2a_service_client::A2aServiceClient;
use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{
    Artifact, CancelTaskRequest, GetTaskRequest, StreamResponse, SubscribeToTaskRequest, Task, TaskState,
    part,
};
use common::*;
use tonic::transport::Channel;

type Client = A2aServiceClient<Channel>;

/// A scratch directory for one test's scripts and marker files, removed afterwards.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("a2a-exec-test-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Self(dir)
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }

    /// Writes a shell script and the exec configuration that runs it. The script runs as
    /// `/bin/sh SCRIPT`, so that no test ever executes a file another thread may still have
    /// open for writing (ETXTBSY).
    fn script(&self, body: &str) -> ExecConfig {
        let path = self.0.join(format!("script-{}.sh", uuid::Uuid::new_v4()));
        std::fs::write(&path, body).expect("write script");
        ExecConfig::new("/bin/sh", [path.display().to_string()])
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn exec_server(config: ExecConfig) -> TestServer {
    TestServer::builder().agent(ExecAgent::new(config).expect("exec agent")).start().await
}

async fn get_task(client: &mut Client, id: &str) -> Task {
    client.get_task(GetTaskRequest { id: id.into(), ..Default::default() }).await.expect("get").into_inner()
}

/// Polls GetTask (bounded) until `check` holds; the task then.
async fn wait_for_task(client: &mut Client, id: &str, what: &str, check: impl Fn(&Task) -> bool) -> Task {
    let deadline = Instant::now() + PATIENCE * 4;
    loop {
        let task = get_task(client, id).await;
        if check(&task) {
            return task;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}: {task:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits (bounded polling) until a script has written `path`; its trimmed content.
async fn wait_for_file(path: &str) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.ends_with('\n')
        {
            return text.trim().to_owned();
        }
        assert!(Instant::now() < deadline, "timed out waiting for {path}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn touch(path: &str) {
    std::fs::write(path, "go\n").expect("touch");
}

/// Whether a process exists and has not ended (a zombie waiting for its reaper has ended).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next());
            !matches!(state, Some("Z" | "X"))
        }
    }
}

async fn assert_gone(pid: i32, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) {
        assert!(Instant::now() < deadline, "{what} (pid {pid}) is still running");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn pid_in(path: &str) -> i32 {
    wait_for_file(path).await.parse().expect("a pid")
}

fn status_text(task: &Task) -> String {
    task.status
        .as_ref()
        .and_then(|s| s.message.as_ref())
        .map(|m| texts(&m.parts).join("\n"))
        .unwrap_or_default()
}

fn artifact<'a>(task: &'a Task, name: &str) -> &'a Artifact {
    task.artifacts.iter().find(|a| a.name == name).unwrap_or_else(|| panic!("no artifact {name} in {task:?}"))
}

fn stdout_of(task: &Task) -> String {
    texts(&artifact(task, STDOUT_ARTIFACT).parts).concat()
}

/// The next artifact update of a stream, skipping status updates.
async fn next_chunk(stream: &mut tonic::Streaming<StreamResponse>) -> (String, bool, bool) {
    loop {
        let item = next(stream).await.expect("the stream ended before the next chunk");
        if let Some(Payload::ArtifactUpdate(update)) = &item.payload {
            return (chunk_texts(&item).concat(), update.append, update.last_chunk);
        }
    }
}

#[tokio::test]
async fn streams_stdout_line_by_line_while_the_command_runs() {
    let scratch = Scratch::new();
    let go = scratch.path("go");
    let config = scratch.script(&format!(
        "echo 'chunk 1'\nwhile [ ! -e '{go}' ]; do sleep 0.01; done\necho 'chunk 2'\nprintf 'no newline'\n"
    ));
    let server = exec_server(config).await;
    let mut client = server.client().await;
    let mut stream = client.send_streaming_message(send("hi")).await.expect("stream").into_inner();

    let first = next(&mut stream).await.expect("the task");
    assert_eq!(item_state(&first), Some(TaskState::Submitted));
    // The script cannot print chunk 2 before `go` exists, so this chunk arrives live.
    assert_eq!(next_chunk(&mut stream).await, ("chunk 1\n".into(), false, false));
    touch(&go);
    let mut rest = String::new();
    loop {
        let (text, append, last) = next_chunk(&mut stream).await;
        assert!(append, "chunks after the first append");
        rest.push_str(&text);
        if last {
            assert_eq!(text, "", "the end of output is an empty last chunk");
            break;
        }
    }
    assert_eq!(rest, "chunk 2\nno newline");
    let end = collect(stream).await.expect("the rest");
    assert_eq!(end.last().and_then(item_state), Some(TaskState::Completed));

    let Some(Payload::Task(task)) = first.payload else { panic!("not a task") };
    let task = get_task(&mut client, &task.id).await;
    assert_eq!(state(&task), TaskState::Completed);
    assert_eq!(stdout_of(&task), "chunk 1\nchunk 2\nno newline");
}

#[tokio::test]
async fn multi_turn_through_the_control_protocol() {
    let scratch = Scratch::new();
    let mut config = scratch.script(
        r#"echo "ids $A2A_TASK_ID $A2A_CONTEXT_ID $A2A_MESSAGE_ID"
read -r first
echo "first: $first"
echo '@a2a {"status": "thinking"}'
echo '@a2a {"inputRequired": "What is your name?"}'
read -r name
echo "Hello, $name"
echo "@a2a {\"data\": {\"name\": \"$name\"}, \"name\": \"greeting\"}"
echo '@a2a {"artifact": {"name": "summary", "parts": [{"text": "done"}]}}'
"#,
    );
    config.stdin = StdinMode::Open;
    let server = exec_server(config).await;
    let mut client = server.client().await;
    let request = send("hi");
    let message_id = request.message.as_ref().unwrap().message_id.clone();
    let task = send_task(&mut client, request).await;
    assert_eq!(state(&task), TaskState::InputRequired, "{task:?}");
    assert_eq!(status_text(&task), "What is your name?");

    let done = send_task(&mut client, follow_up(&task, "Ada")).await;
    assert_eq!(state(&done), TaskState::Completed, "{done:?}");
    assert_eq!(
        stdout_of(&done),
        format!("ids {} {} {message_id}\nfirst: hi\nHello, Ada\n", task.id, task.context_id)
    );
    assert_eq!(texts(&artifact(&done, "summary").parts), ["done"]);
    let data = &artifact(&done, "greeting").parts[0].content;
    let Some(part::Content::Data(value)) = data else { panic!("not data: {data:?}") };
    assert_eq!(serde_json::to_value(value).unwrap(), serde_json::json!({"name": "Ada"}));
    let history: Vec<String> = done.history.iter().map(|m| texts(&m.parts).concat()).collect();
    assert_eq!(history, ["hi", "thinking", "What is your name?", "Ada"]);
}

#[tokio::test]
async fn auth_required_resumes_when_the_command_says_so() {
    let scratch = Scratch::new();
    let go = scratch.path("go");
    let config = scratch.script(&format!(
        "echo '@a2a {{\"authRequired\": \"sign in first\"}}'\nwhile [ ! -e '{go}' ]; do sleep 0.01; done\n\
         echo '@a2a {{\"status\": \"signed in\"}}'\necho ok\n"
    ));
    let server = exec_server(config).await;
    let mut client = server.client().await;
    let task = send_task(&mut client, send("hi")).await;
    assert_eq!(state(&task), TaskState::AuthRequired);
    assert_eq!(status_text(&task), "sign in first");
    let request = SubscribeToTaskRequest { id: task.id.clone(), ..Default::default() };
    let stream = client.subscribe_to_task(request).await.expect("subscribe").into_inner();
    touch(&go);
    let items = collect(stream).await.expect("events");
    let states: Vec<TaskState> = items.iter().filter_map(item_state).collect();
    assert_eq!(states, [TaskState::AuthRequired, TaskState::Working, TaskState::Completed]);
    assert_eq!(stdout_of(&get_task(&mut client, &task.id).await), "ok\n");
}

#[tokio::test]
async fn json_input_is_the_whole_message_on_one_line() {
    let scratch = Scratch::new();
    let mut config = scratch.script("read -r line\nprintf '%s\\n' \"$line\"\n");
    config.input = InputFormat::Json;
    let server = exec_server(config).await;
    let mut client = server.client().await;
    let request = send("two\nlines");
    let message_id = request.message.as_ref().unwrap().message_id.clone();
    let task = send_task(&mut client, request).await;
    assert_eq!(state(&task), TaskState::Completed, "{task:?}");
    let output = stdout_of(&task);
    assert_eq!(output.lines().count(), 1, "{output}");
    let message: serde_json::Value = serde_json::from_str(&output).expect("JSON");
    assert_eq!(message["messageId"], message_id);
    assert_eq!(message["taskId"], task.id);
    assert_eq!(message["role"], "ROLE_USER");
    assert_eq!(message["parts"][0]["text"], "two\nlines");
}

#[tokio::test]
async fn a_failing_command_fails_the_task_with_the_tail_of_stderr() {
    let scratch = Scratch::new();
    let config = scratch
        .script("echo 'working on it'\nfor i in $(seq 1 30); do echo \"problem $i\" >&2; done\nexit 3\n");
    let server = exec_server(config).await;
    let mut client = server.client().await;
    let task = send_task(&mut client, send("hi")).await;
    assert_eq!(state(&task), TaskState::Failed);
    let message = status_text(&task);
    let lines: Vec<&str> = message.lines().collect();
    assert_eq!(lines[0], "the command exited with code 3", "{message}");
    assert_eq!(lines[1], "stderr (last 20 lines):");
    assert_eq!(lines[2..], (11..=30).map(|i| format!("problem {i}")).collect::<Vec<_>>()[..]);
    assert_eq!(stdout_of(&task), "working on it\n");
}

#[tokio::test]
async fn cancel_kills_the_whole_process_tree() {
    let scratch = Scratch::new();
    let (child, leader) = (scratch.path("child.pid"), scratch.path("leader.pid"));
    let config = scratch
        .script(&format!("sleep 1000 &\necho $! > '{child}'\necho $$ > '{leader}'\necho started\nwait\n"));
    let server = exec_server(config).await;
    let mut client = server.client().await;
    let mut stream = client.send_streaming_message(send("hi")).await.expect("stream").into_inner();
    let Some(Payload::Task(task)) = next(&mut stream).await.expect("the task").payload else { panic!() };
    assert_eq!(next_chunk(&mut stream).await.0, "started\n");
    let (child, leader) = (pid_in(&child).await, pid_in(&leader).await);
    assert!(alive(child) && alive(leader));

    let canceled = client
        .cancel_task(CancelTaskRequest { id: task.id.clone(), ..Default::default() })
        .await
        .expect("cancel")
        .into_inner();
    assert_eq!(state(&canceled), TaskState::Canceled);
    assert!(!alive(leader), "CancelTask answers once the command is gone");
    assert_gone(child, "the command's child").await;
    let rest = collect(stream).await.expect("the rest");
    assert_eq!(rest.last().and_then(item_state), Some(TaskState::Canceled));
}

#[tokio::test]
async fn cancel_sends_sigkill_after_the_grace_period() {
    let scratch = Scratch::new();
    let (child, leader) = (scratch.path("child.pid"), scratch.path("leader.pid"));
    // Both the script and its child ignore SIGTERM.
    let mut config = scratch
        .script(&format!("trap '' TERM\nsleep 1000 &\necho $! > '{child}'\necho $$ > '{leader}'\nwait\n"));
    config.grace = Duration::from_millis(300);
    let server = exec_server(config).await;
    let mut client = server.client().await;
    let task = send_task(&mut client, send_returning_immediately("hi")).await;
    let (child, leader) = (pid_in(&child).await, pid_in(&leader).await);

    let started = Instant::now();
    let canceled = client
        .cancel_task(CancelTaskRequest { id: task.id.clone(), ..Default::default() })
        .await
        .expect("cancel")
        .into_inner();
    assert_eq!(state(&canceled), TaskState::Canceled);
    assert!(started.elapsed() >= Duration::from_millis(300), "SIGKILL only after the grace period");
    assert!(!alive(leader));
    assert_gone(child, "the command's child").await;
}

#[tokio::test]
async fn a_command_that_runs_too_long_is_stopped_and_fails() {
    let scratch = Scratch::new();
    let child = scratch.path("child.pid");
    let mut config = scratch.script(&format!("echo started\nsleep 1000 &\necho $! > '{child}'\nwait\n"));
    config.timeout = Some(Duration::from_millis(500));
    config.grace = Duration::from_millis(300);
    let server = exec_server(config).await;
    let mut client = server.client().await;
    let task = send_task(&mut client, send("hi")).await;
    assert_eq!(state(&task), TaskState::Failed);
    assert!(status_text(&task).starts_with("the command timed out after 500ms and was stopped"), "{task:?}");
    assert_eq!(stdout_of(&task), "started\n");
    assert_gone(pid_in(&child).await, "the command's child").await;
}

#[tokio::test]
async fn extra_tasks_wait_in_submitted_and_start_in_order() {
    let scratch = Scratch::new();
    let dir = scratch.path("");
    let mut config = scratch.script(&format!(
        "echo \"$A2A_TASK_ID\" > '{dir}started-'\"$A2A_TASK_ID\"\n\
         while [ ! -e '{dir}go-'\"$A2A_TASK_ID\" ]; do sleep 0.01; done\necho done\n"
    ));
    config.max_concurrency = 1;
    let server = exec_server(config).await;
    let mut client = server.client().await;
    let started = |task: &Task| format!("{dir}started-{}", task.id);
    let go = |task: &Task| format!("{dir}go-{}", task.id);

    let first = send_task(&mut client, send_returning_immediately("1")).await;
    wait_for_file(&started(&first)).await;
    let second = send_task(&mut client, send_returning_immediately("2")).await;
    let third = send_task(&mut client, send_returning_immediately("3")).await;
    for task in [&second, &third] {
        let queued = wait_for_task(&mut client, &task.id, "the waiting message", |t| {
            status_text(t).starts_with("waiting")
        })
        .await;
        assert_eq!(state(&queued), TaskState::Submitted);
    }

    touch(&go(&first));
    wait_for_file(&started(&second)).await;
    let first =
        wait_for_task(&mut client, &first.id, "the first to complete", |t| state(t) == TaskState::Completed)
            .await;
    assert_eq!(stdout_of(&first), "done\n");
    assert_eq!(state(&get_task(&mut client, &third.id).await), TaskState::Submitted);
    assert!(!Path::new(&started(&third)).exists(), "the third waits for the second");

    touch(&go(&second));
    wait_for_file(&started(&third)).await;
    touch(&go(&third));
    for task in [&second, &third] {
        wait_for_task(&mut client, &task.id, "completion", |t| state(t) == TaskState::Completed).await;
    }
}

fn rss_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with(field)).expect("field");
    line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("a number")
}

#[tokio::test]
async fn printing_200_mb_keeps_server_memory_bounded() {
    const TOTAL: u64 = 200 << 20;
    let scratch = Scratch::new();
    let config = scratch.script(&format!(
        "yes 'the quick brown fox jumps over the lazy dog 0123456789 abcdefghijklmnopqrstuvwxyz' | head -c {TOTAL}\n"
    ));
    let server = exec_server(config).await;
    let mut client = server.client().await;
    let before = rss_kib("VmRSS:");
    let started = Instant::now();
    let task = send_task(&mut client, send_returning_immediately("go")).await;
    let mut peak = before;
    let deadline = Instant::now() + Duration::from_secs(300);
    let task = loop {
        let task = get_task(&mut client, &task.id).await;
        peak = peak.max(rss_kib("VmRSS:"));
        if state(&task) == TaskState::Completed {
            break task;
        }
        assert_eq!(state(&task), TaskState::Working, "{:?}", task.status);
        assert!(Instant::now() < deadline, "200 MB took too long");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let elapsed = started.elapsed();
    let stdout = artifact(&task, STDOUT_ARTIFACT);
    let stored: usize = texts(&stdout.parts).iter().map(String::len).sum();
    let omitted =
        stdout.metadata.as_ref().and_then(|m| m.fields.get("omittedBytes")).and_then(|v| match v.kind {
            Some(pbjson_types::value::Kind::NumberValue(n)) => Some(n as u64),
            _ => None,
        });
    assert_eq!(omitted.expect("omittedBytes") + stored as u64, TOTAL, "every byte was read and counted");
    assert!(stored <= 1 << 20, "the task keeps at most 1 MiB of output, not {stored}");
    let growth_mib = (peak.saturating_sub(before)) as f64 / 1024.0;
    let hwm_mib = (rss_kib("VmHWM:").saturating_sub(before)) as f64 / 1024.0;
    println!(
        "200 MiB of output in {elapsed:.1?}: RSS before {:.1} MiB, peak growth {growth_mib:.1} MiB (high-water mark +{hwm_mib:.1} MiB)",
        before as f64 / 1024.0
    );
    assert!(growth_mib < 64.0, "the server grew by {growth_mib:.1} MiB while streaming 200 MiB");
}

#[tokio::test]
async fn an_invalid_control_line_fails_the_task_and_stops_the_command() {
    let scratch = Scratch::new();
    let child = scratch.path("child.pid");
    let config = scratch.script(&format!(
        "sleep 1000 &\necho $! > '{child}'\necho before\necho '@a2a {{\"bogus\": 1}}'\necho after\nwait\n"
    ));
    let server = exec_server(config).await;
    let mut client = server.client().await;
    let task = send_task(&mut client, send("hi")).await;
    assert_eq!(state(&task), TaskState::Failed);
    let message = status_text(&task);
    assert!(
        message.starts_with("invalid control line \"{\\\"bogus\\\": 1}\": expected one of the keys"),
        "{message}"
    );
    assert_eq!(stdout_of(&task), "before\n", "nothing after the invalid line is passed on");
    assert_gone(pid_in(&child).await, "the command's child").await;
}

#[tokio::test]
async fn asking_for_input_needs_stdin_kept_open() {
    let scratch = Scratch::new();
    let config = scratch.script("echo '@a2a {\"inputRequired\": \"name?\"}'\nread -r name\n");
    let server = exec_server(config).await;
    let mut client = server.client().await;
    let task = send_task(&mut client, send("hi")).await;
    assert_eq!(state(&task), TaskState::Failed);
    assert!(status_text(&task).contains("--exec-stdin open"), "{task:?}");
}

#[tokio::test]
async fn an_event_the_core_rejects_fails_the_task_and_the_dropped_execution_stops_the_command() {
    let scratch = Scratch::new();
    let child = scratch.path("child.pid");
    // An artifact without parts: the core rejects it, fails the task and drops the execution.
    let mut config = scratch.script(&format!(
        "sleep 1000 &\necho $! > '{child}'\necho '@a2a {{\"artifact\": {{\"name\": \"empty\", \"parts\": []}}}}'\nwait\n"
    ));
    config.grace = Duration::from_millis(200);
    let server = exec_server(config).await;
    let mut client = server.client().await;
    let task = send_task(&mut client, send("hi")).await;
    assert_eq!(state(&task), TaskState::Failed);
    assert!(status_text(&task).contains("artifact empty has no parts"), "{task:?}");
    assert_gone(pid_in(&child).await, "the command's child").await;
}

#[tokio::test]
async fn a_missing_command_stops_start_up_with_a_clear_message() {
    let scratch = Scratch::new();
    let not_executable = scratch.path("plain.txt");
    std::fs::write(&not_executable, "echo hi\n").unwrap();
    for (command, expected) in [
        ("/nonexistent/agent", "command not found: /nonexistent/agent"),
        ("no-such-agent-command", "command not found: no-such-agent-command"),
        (not_executable.as_str(), "command is not executable"),
    ] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_a2a-server"))
            .args(["--listen", "127.0.0.1:0", "--agent", "exec", "--", command])
            .output()
            .expect("run a2a-server");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{command}: {stderr}");
        assert!(stderr.contains(expected), "{command}: {stderr}");
    }
}

#[tokio::test]
async fn server_shutdown_leaves_no_process_behind() {
    let scratch = Scratch::new();
    let (child_pid, leader_pid) = (scratch.path("child.pid"), scratch.path("leader.pid"));
    let script = scratch.path("script.sh");
    std::fs::write(
        &script,
        format!("sleep 1000 &\necho $! > '{child_pid}'\necho $$ > '{leader_pid}'\nwait\n"),
    )
    .unwrap();
    let mut server = common::process::ServerProcess::start(&[
        "--listen",
        "127.0.0.1:0",
        "--agent",
        "exec",
        "--",
        "/bin/sh",
        &script,
    ]);
    {
        let mut client = A2aServiceClient::connect(server.url()).await.expect("connect");
        send_task(&mut client, send_returning_immediately("hi")).await;
    }
    let (child, leader) = (pid_in(&child_pid).await, pid_in(&leader_pid).await);
    assert!(alive(child) && alive(leader));

    server.terminate();
    // A clean exit, not death by the signal: only a drained server drops its commands' groups.
    assert_eq!(server.exit_code().await, 0, "stderr:\n{}", server.stderr());
    assert_gone(leader, "the command").await;
    assert_gone(child, "the command's child").await;
}
