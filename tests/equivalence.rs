//! The three bindings are one service (spec §5.1: functionally equivalent, same results, same
//! errors). One scenario list runs over gRPC (the tonic client), JSON-RPC and HTTP+JSON
//! (reqwest); every result is decoded into the generated proto types (JSON through
//! `protojson::decode`), every error reduced to its A2A reason, domain and gRPC code (plus
//! ErrorInfo metadata keys and BadRequest fields), server-chosen ids and timestamps are
//! normalised away, and then the three runs must be equal step by step — and what the spec
//! says they should be.
//!
//! The harness (the client over three bindings, the error mapping, the normalised outcomes)
//! lives in `tests/common/`. To add a scenario: write its `run` and `check` side by side below,
//! and add one line to [`SCENARIOS`].
mod common;

use std::panic::AssertUnwindSafe;

use a2a_server::proto::send_message_response::Payload as Reply;
use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{
    GetTaskRequest, ListTasksRequest, Role, SendMessageRequest, SendMessageResponse, StreamResponse, Task,
    TaskPushNotificationConfig, TaskState,
};
use common::bindings::{BINDINGS, Binding, Client};
use common::failure::{A2A_DOMAIN, Failure};
use common::normalise::{Outcome, Steps, step};
use common::*;
use futures::future::BoxFuture;

/// One scenario: what it does on one binding, and what the spec says its steps must be.
struct Scenario {
    name: &'static str,
    /// Runs the scenario with a client on a fresh server; its steps, normalised.
    run: for<'a> fn(&'a Client) -> BoxFuture<'a, Steps>,
    /// What the spec says the (normalised) steps must be, beyond `fails_with`.
    check: fn(&Steps),
    /// The error every step must give: (reason, gRPC code name).
    fails_with: Option<(&'static str, &'static str)>,
    /// The `A2A-Version` the client sends.
    version: &'static str,
}

impl Scenario {
    const fn new(
        name: &'static str,
        run: for<'a> fn(&'a Client) -> BoxFuture<'a, Steps>,
        check: fn(&Steps),
    ) -> Self {
        // 1.1: every binding then carries A2A dev-1.1's `generation`, so the runs also agree on
        // it (what v1.0 JSON clients get instead is `tests/generation.rs`'s business).
        Self { name, run, check, fails_with: None, version: "1.1" }
    }

    /// Every step must fail with `reason` and the gRPC code named `code`.
    const fn failing(self, reason: &'static str, code: &'static str) -> Self {
        Self { fails_with: Some((reason, code)), ..self }
    }

    const fn version(self, version: &'static str) -> Self {
        Self { version, ..self }
    }

    /// Runs the scenario over `binding` on a server of its own.
    async fn run_on(&'static self, binding: Binding) -> Steps {
        let server = TestServer::start().await;
        let client = Client::connect(&server, binding, self.version).await;
        (self.run)(&client).await
    }

    fn check(&self, steps: &Steps) {
        if let Some((reason, code)) = self.fails_with {
            assert!(!steps.is_empty());
            for (label, outcome) in steps {
                let failure = outcome.as_error();
                assert_eq!((failure.reason.as_str(), failure.code.as_str()), (reason, code), "{label}");
                assert_eq!(failure.domain, A2A_DOMAIN, "{label}");
            }
        }
        (self.check)(steps)
    }
}

/// `run`: a scenario's async fn, boxed.
macro_rules! run {
    ($scenario:ident) => {
        |client| Box::pin($scenario(client))
    };
}

/// Every scenario, once.
const SCENARIOS: &[Scenario] = &[
    Scenario::new("send echo", run!(send_echo), check_send_echo),
    Scenario::new("stream", run!(stream), check_stream),
    Scenario::new("subscribe mid-stream", run!(subscribe_mid_stream), check_subscribe_mid_stream),
    Scenario::new("input-required turn", run!(input_required_turn), check_input_required_turn),
    Scenario::new("get with historyLength", run!(get_with_history_length), check_get_with_history_length),
    Scenario::new("list with pagination", run!(list_with_pagination), check_list_with_pagination),
    Scenario::new("cancel", run!(cancel), check_cancel),
    Scenario::new("get unknown task", run!(get_unknown_task), names_the_task)
        .failing("TASK_NOT_FOUND", "NOT_FOUND"),
    Scenario::new("cancel unknown task", run!(cancel_unknown_task), names_the_task)
        .failing("TASK_NOT_FOUND", "NOT_FOUND"),
    Scenario::new("subscribe unknown task", run!(subscribe_unknown_task), names_the_task)
        .failing("TASK_NOT_FOUND", "NOT_FOUND"),
    Scenario::new("subscribe terminal task", run!(subscribe_terminal_task), only_the_error)
        .failing("UNSUPPORTED_OPERATION", "FAILED_PRECONDITION"),
    Scenario::new("cancel completed task", run!(cancel_completed_task), only_the_error)
        .failing("TASK_NOT_CANCELABLE", "FAILED_PRECONDITION"),
    Scenario::new("missing message", run!(missing_message), check_missing_message)
        .failing("INVALID_PARAMS", "INVALID_ARGUMENT"),
    Scenario::new("negative historyLength", run!(negative_history_length), check_negative_history_length)
        .failing("INVALID_PARAMS", "INVALID_ARGUMENT"),
    Scenario::new("pageSize 0", run!(page_size_zero), check_page_size_zero)
        .failing("INVALID_PARAMS", "INVALID_ARGUMENT"),
    Scenario::new("unsupported version", run!(unsupported_version), check_unsupported_version)
        .failing("VERSION_NOT_SUPPORTED", "FAILED_PRECONDITION")
        .version("99.0"),
    Scenario::new("create push config", run!(create_push_config), only_the_error)
        .failing("PUSH_NOTIFICATION_NOT_SUPPORTED", "FAILED_PRECONDITION"),
    Scenario::new("extended card", run!(extended_card), only_the_error)
        .failing("UNSUPPORTED_OPERATION", "FAILED_PRECONDITION"),
    Scenario::new("direct message", run!(direct_message), check_direct_message),
    Scenario::new("fail and reject", run!(fail_and_reject), check_fail_and_reject),
    Scenario::new("stream to input-required", run!(stream_to_input_required), check_stream_to_input_required),
    Scenario::new("list filters", run!(list_filters), check_list_filters),
    Scenario::new("follow-up on unknown task", run!(follow_up_unknown_task), only_the_error)
        .failing("TASK_NOT_FOUND", "NOT_FOUND"),
    Scenario::new("follow-up on terminal task", run!(follow_up_terminal_task), only_the_error)
        .failing("UNSUPPORTED_OPERATION", "FAILED_PRECONDITION"),
];

// ---------------------------------------------------------------------------------------------
// Helpers the scenarios share.

/// The task of a raw send result (the scenario needs its id).
fn task_of(result: &Result<SendMessageResponse, Failure>) -> Task {
    match result {
        Ok(SendMessageResponse { payload: Some(Reply::Task(task)) }) => task.clone(),
        other => panic!("expected a task, got {other:?}"),
    }
}

fn with_context(text: &str, context_id: &str) -> SendMessageRequest {
    let mut request = send(text);
    request.message.as_mut().unwrap().context_id = context_id.to_owned();
    request
}

fn get_request(id: &str, history_length: Option<i32>) -> GetTaskRequest {
    GetTaskRequest { id: id.to_owned(), history_length, ..Default::default() }
}

fn chunks(items: &[StreamResponse]) -> Vec<String> {
    items.iter().flat_map(chunk_texts).collect()
}

fn numbered_chunks(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("chunk {i}")).collect()
}

fn status_text(task: &Task) -> Vec<String> {
    task.status.as_ref().and_then(|s| s.message.as_ref()).map(|m| texts(&m.parts)).unwrap_or_default()
}

/// For error scenarios whose steps need nothing beyond their `fails_with`.
fn only_the_error(_: &Steps) {}

/// A task-not-found error carries the task id in its ErrorInfo metadata.
fn names_the_task(steps: &Steps) {
    assert_eq!(steps[0].1.as_error().metadata_keys, ["taskId"]);
}

// ---------------------------------------------------------------------------------------------
// The scenarios: each one's run, then its check.

async fn send_echo(client: &Client) -> Steps {
    vec![("send", Outcome::reply(&client.send(send("hello, bindings")).await))]
}

fn check_send_echo(steps: &Steps) {
    let task = step(steps, "send").reply_task();
    assert_eq!(state(task), TaskState::Completed);
    assert_eq!(artifact_texts(task), ["hello, bindings"]);
    assert_eq!(task.history.len(), 1);
    assert_eq!(texts(&task.history[0].parts), ["hello, bindings"]);
}

async fn stream(client: &Client) -> Steps {
    vec![("stream", Outcome::stream(client.send_streaming(send("stream 4 0")).await).await)]
}

fn check_stream(steps: &Steps) {
    let (items, error) = step(steps, "stream").as_stream();
    assert_eq!(error, None);
    assert_eq!(items.len(), 7, "Task, WORKING, 4 chunks, COMPLETED: {items:#?}");
    assert!(matches!(items[0].payload, Some(Payload::Task(_))), "a Task first");
    assert_eq!(item_state(&items[0]), Some(TaskState::Submitted));
    assert_eq!(item_state(&items[1]), Some(TaskState::Working));
    assert_eq!(chunks(items), numbered_chunks(4));
    assert_eq!(item_state(&items[6]), Some(TaskState::Completed));
}

/// Each chunk of the subscribe-mid-stream task is this far apart: after the first stream saw
/// chunk 1 the subscription has (CHUNKS - 2) × this long to attach before the task ends.
const MID_STREAM_CHUNKS: usize = 6;
const MID_STREAM_GAP_MS: u64 = 250;

async fn subscribe_mid_stream(client: &Client) -> Steps {
    let mut steps: Steps = Vec::new();
    let command = format!("stream {MID_STREAM_CHUNKS} {MID_STREAM_GAP_MS}");
    let mut first = client.send_streaming(send(&command)).await.expect("the stream opens");
    let mut seen = Vec::new();
    let task = loop {
        let item = first.next().await.expect("an item").expect("no error");
        seen.push(item.clone());
        if let Some(Payload::Task(task)) = &item.payload {
            break task.clone();
        }
    };
    while seen.last().is_none_or(|item| chunk_texts(item) != ["chunk 1"]) {
        seen.push(first.next().await.expect("more items").expect("no error"));
    }
    let subscription = client.subscribe(&task.id).await.expect("the task is live: subscribe");
    let (mut late, late_error) = subscription.finish().await;
    assert!(!late.is_empty(), "the subscription yields the task first");
    let head = late.remove(0);
    let Some(Payload::Task(snapshot)) = &head.payload else {
        panic!("a subscription opens with the Task, got {head:?}")
    };
    let before = artifact_texts(snapshot);
    steps.push(("snapshot state", Outcome::Fact(format!("{:?}", state(snapshot)))));
    steps.push((
        "snapshot holds chunks 0 and 1",
        Outcome::Fact(format!("{}", before.starts_with(&numbered_chunks(2)))),
    ));
    let all: Vec<String> = before.into_iter().chain(chunks(&late)).collect();
    steps.push(("snapshot + rest", Outcome::Fact(format!("{all:?}"))));
    let last_state = late.last().and_then(item_state);
    steps.push(("subscription end", Outcome::Fact(format!("{last_state:?}, error {late_error:?}"))));
    let (rest, error) = first.finish().await;
    seen.extend(rest);
    steps.push(("first stream", Outcome::items(seen, error)));
    steps
}

fn check_subscribe_mid_stream(steps: &Steps) {
    assert_eq!(step(steps, "snapshot state"), &Outcome::Fact("Working".into()));
    assert_eq!(step(steps, "snapshot holds chunks 0 and 1"), &Outcome::Fact("true".into()));
    let all = format!("{:?}", numbered_chunks(MID_STREAM_CHUNKS));
    assert_eq!(step(steps, "snapshot + rest"), &Outcome::Fact(all), "no gap, no duplicate");
    assert_eq!(step(steps, "subscription end"), &Outcome::Fact("Some(Completed), error None".into()));
    let (items, error) = step(steps, "first stream").as_stream();
    assert_eq!(error, None);
    assert_eq!(chunks(items), numbered_chunks(MID_STREAM_CHUNKS));
    assert_eq!(item_state(items.last().unwrap()), Some(TaskState::Completed));
}

async fn input_required_turn(client: &Client) -> Steps {
    let asked = client.send(send("input")).await;
    let task = task_of(&asked);
    let answered = client.send(follow_up(&task, "blue")).await;
    let done = task_of(&answered);
    assert_eq!((&done.id, &done.context_id), (&task.id, &task.context_id), "the same task");
    vec![("send input", Outcome::reply(&asked)), ("answer", Outcome::reply(&answered))]
}

fn check_input_required_turn(steps: &Steps) {
    let asked = step(steps, "send input").reply_task();
    assert_eq!(state(asked), TaskState::InputRequired);
    assert_eq!(status_text(asked), ["What should I echo back?"]);
    assert_eq!(asked.history.len(), 2, "the message and the question");
    let done = step(steps, "answer").reply_task();
    assert_eq!(state(done), TaskState::Completed);
    assert_eq!(artifact_texts(done), ["blue"]);
    assert_eq!(done.history.len(), 3);
}

async fn get_with_history_length(client: &Client) -> Steps {
    let task = task_of(&client.send(send("input")).await);
    task_of(&client.send(follow_up(&task, "blue")).await);
    vec![
        ("get historyLength=1", Outcome::task(&client.get(get_request(&task.id, Some(1))).await)),
        ("get", Outcome::task(&client.get(get_request(&task.id, None)).await)),
    ]
}

fn check_get_with_history_length(steps: &Steps) {
    let one = step(steps, "get historyLength=1").as_task();
    assert_eq!(state(one), TaskState::Completed);
    assert_eq!(one.history.len(), 1, "the most recent message only");
    assert_eq!(texts(&one.history[0].parts), ["blue"]);
    let full = step(steps, "get").as_task();
    assert_eq!(full.history.len(), 3);
    assert_eq!(full.history[2], one.history[0]);
}

async fn list_with_pagination(client: &Client) -> Steps {
    for text in ["one", "two", "three"] {
        task_of(&client.send(with_context(text, "equivalence-context")).await);
        next_millisecond().await;
    }
    task_of(&client.send(with_context("elsewhere", "another-context")).await);
    let page = |token: String| ListTasksRequest {
        context_id: "equivalence-context".into(),
        page_size: Some(2),
        page_token: token,
        ..Default::default()
    };
    let first = client.list(page(String::new())).await;
    let token = first.as_ref().map(|l| l.next_page_token.clone()).unwrap_or_default();
    let second = client.list(page(token)).await;
    let contexts: Vec<String> = [&first, &second]
        .into_iter()
        .flat_map(|r| r.iter().flat_map(|l| l.tasks.iter().map(|t| t.context_id.clone())))
        .collect();
    vec![
        ("page 1", Outcome::list(&first)),
        ("page 2", Outcome::list(&second)),
        ("listed contexts", Outcome::Fact(format!("{contexts:?}"))),
    ]
}

fn check_list_with_pagination(steps: &Steps) {
    let first = step(steps, "page 1").as_list();
    assert_eq!((first.tasks.len(), first.page_size, first.total_size), (2, 2, 3));
    assert_eq!(first.next_page_token, "<token>", "a token for the next page");
    let second = step(steps, "page 2").as_list();
    assert_eq!((second.tasks.len(), second.page_size, second.total_size), (1, 2, 3));
    assert_eq!(second.next_page_token, "", "the last page has an empty token");
    let listed: Vec<Vec<String>> =
        first.tasks.iter().chain(&second.tasks).map(|t| texts(&t.history[0].parts)).collect();
    assert_eq!(listed, [["three"], ["two"], ["one"]], "newest first, each once");
    assert!(first.tasks.iter().chain(&second.tasks).all(|t| t.artifacts.is_empty()));
    let contexts = format!("{:?}", ["equivalence-context"; 3]);
    assert_eq!(step(steps, "listed contexts"), &Outcome::Fact(contexts));
}

async fn cancel(client: &Client) -> Steps {
    let started = client.send(send_returning_immediately("stream 100 200")).await;
    let task = task_of(&started);
    // How many chunks the task produced before the cancel landed is timing; the rest of the
    // task must agree.
    let canceled = client.cancel(&task.id).await;
    let read = client.get(get_request(&task.id, None)).await;
    for task in [&canceled, &read].into_iter().flatten() {
        let produced = artifact_texts(task);
        assert_eq!(produced, numbered_chunks(produced.len()), "chunks in order");
    }
    let without_artifacts = |result: Result<Task, Failure>| {
        result.map(|mut task| {
            task.artifacts.clear();
            task
        })
    };
    vec![
        ("send returnImmediately", Outcome::reply(&started)),
        ("cancel", Outcome::task(&without_artifacts(canceled))),
        ("get after cancel", Outcome::task(&without_artifacts(read))),
        ("cancel again", Outcome::unexpected(client.cancel(&task.id).await)),
    ]
}

fn check_cancel(steps: &Steps) {
    assert_eq!(state(step(steps, "send returnImmediately").reply_task()), TaskState::Submitted);
    assert_eq!(state(step(steps, "cancel").as_task()), TaskState::Canceled);
    assert_eq!(state(step(steps, "get after cancel").as_task()), TaskState::Canceled);
    assert_eq!(step(steps, "cancel again").as_error().reason, "TASK_NOT_CANCELABLE");
}

async fn get_unknown_task(client: &Client) -> Steps {
    vec![("get", Outcome::task(&client.get(get_request("no-such-task", None)).await))]
}

async fn cancel_unknown_task(client: &Client) -> Steps {
    vec![("cancel", Outcome::task(&client.cancel("no-such-task").await))]
}

async fn subscribe_unknown_task(client: &Client) -> Steps {
    vec![("subscribe", Outcome::stream(client.subscribe("no-such-task").await).await)]
}

async fn subscribe_terminal_task(client: &Client) -> Steps {
    let task = task_of(&client.send(send("done already")).await);
    vec![("subscribe", Outcome::stream(client.subscribe(&task.id).await).await)]
}

async fn cancel_completed_task(client: &Client) -> Steps {
    let task = task_of(&client.send(send("done already")).await);
    vec![("cancel", Outcome::task(&client.cancel(&task.id).await))]
}

async fn missing_message(client: &Client) -> Steps {
    let request = SendMessageRequest::default();
    vec![
        ("send", Outcome::reply(&client.send(request.clone()).await)),
        ("stream", Outcome::stream(client.send_streaming(request).await).await),
    ]
}

fn check_missing_message(steps: &Steps) {
    for (label, outcome) in steps {
        assert_eq!(outcome.as_error().fields, ["message"], "{label}");
    }
}

async fn negative_history_length(client: &Client) -> Steps {
    let task = task_of(&client.send(send("hi")).await);
    vec![("get", Outcome::task(&client.get(get_request(&task.id, Some(-1))).await))]
}

fn check_negative_history_length(steps: &Steps) {
    assert_eq!(steps[0].1.as_error().fields, ["historyLength"]);
}

async fn page_size_zero(client: &Client) -> Steps {
    let request = ListTasksRequest { page_size: Some(0), ..Default::default() };
    vec![("list", Outcome::list(&client.list(request).await))]
}

fn check_page_size_zero(steps: &Steps) {
    assert_eq!(steps[0].1.as_error().fields, ["pageSize"]);
}

/// Every RPC of a client that sends an `A2A-Version` the server does not speak.
async fn unsupported_version(client: &Client) -> Steps {
    vec![
        ("send", Outcome::reply(&client.send(send("hi")).await)),
        ("stream", Outcome::stream(client.send_streaming(send("hi")).await).await),
        ("get", Outcome::task(&client.get(get_request("any", None)).await)),
        ("list", Outcome::list(&client.list(ListTasksRequest::default()).await)),
        ("cancel", Outcome::task(&client.cancel("any").await)),
    ]
}

fn check_unsupported_version(steps: &Steps) {
    for (label, outcome) in steps {
        assert_eq!(outcome.as_error().metadata_keys, ["version"], "{label}");
    }
}

async fn create_push_config(client: &Client) -> Steps {
    let task = task_of(&client.send(send("input")).await);
    let config = TaskPushNotificationConfig {
        task_id: task.id.clone(),
        url: "https://example.com/webhook".into(),
        token: "secret".into(),
        ..Default::default()
    };
    vec![("create", Outcome::unexpected(client.create_push_config(config).await))]
}

async fn extended_card(client: &Client) -> Steps {
    vec![("get", Outcome::unexpected(client.extended_card().await))]
}

async fn direct_message(client: &Client) -> Steps {
    let sent = Outcome::reply(&client.send(send("message hi there")).await);
    let streamed = Outcome::stream(client.send_streaming(send("message hello")).await).await;
    vec![("send", sent), ("stream", streamed)]
}

fn check_direct_message(steps: &Steps) {
    let Outcome::Reply(SendMessageResponse { payload: Some(Reply::Message(reply)) }) = step(steps, "send")
    else {
        panic!("a direct Message reply, no task: {:?}", step(steps, "send"))
    };
    assert_eq!(texts(&reply.parts), ["hi there"]);
    assert_eq!(reply.role, Role::Agent as i32);
    let (items, error) = step(steps, "stream").as_stream();
    assert_eq!(error, None);
    assert!(
        matches!(items, [StreamResponse { payload: Some(Payload::Message(m)) }] if texts(&m.parts) == ["hello"]),
        "exactly one Message: {items:?}"
    );
}

async fn fail_and_reject(client: &Client) -> Steps {
    vec![
        ("fail", Outcome::reply(&client.send(send("fail")).await)),
        ("reject", Outcome::reply(&client.send(send("reject")).await)),
    ]
}

fn check_fail_and_reject(steps: &Steps) {
    let failed = step(steps, "fail").reply_task();
    assert_eq!(state(failed), TaskState::Failed);
    assert!(!status_text(failed).is_empty(), "a FAILED status explains itself");
    assert_eq!(state(step(steps, "reject").reply_task()), TaskState::Rejected);
}

async fn stream_to_input_required(client: &Client) -> Steps {
    let opened = client.send_streaming(send("input")).await.expect("the stream opens");
    let (items, error) = opened.finish().await;
    let task = match items.first().map(|i| &i.payload) {
        Some(Some(Payload::Task(task))) => task.clone(),
        other => panic!("a Task first, got {other:?}"),
    };
    let asked = Outcome::items(items, error);
    let answer = client.send_streaming(follow_up(&task, "blue")).await;
    vec![("stream input", asked), ("stream answer", Outcome::stream(answer).await)]
}

fn check_stream_to_input_required(steps: &Steps) {
    let (items, error) = step(steps, "stream input").as_stream();
    assert_eq!(error, None);
    assert_eq!(item_state(items.last().unwrap()), Some(TaskState::InputRequired), "ends interrupted");
    let (items, error) = step(steps, "stream answer").as_stream();
    assert_eq!(error, None);
    assert_eq!(chunks(items), ["blue"]);
    assert_eq!(item_state(items.last().unwrap()), Some(TaskState::Completed));
}

async fn list_filters(client: &Client) -> Steps {
    task_of(&client.send(send("input")).await);
    next_millisecond().await;
    task_of(&client.send(send("hi")).await);
    let waiting = ListTasksRequest { status: TaskState::InputRequired as i32, ..Default::default() };
    let full =
        ListTasksRequest { include_artifacts: Some(true), history_length: Some(0), ..Default::default() };
    vec![
        ("status filter", Outcome::list(&client.list(waiting).await)),
        ("artifacts, no history", Outcome::list(&client.list(full).await)),
    ]
}

fn check_list_filters(steps: &Steps) {
    let waiting = step(steps, "status filter").as_list();
    assert_eq!(waiting.total_size, 1);
    assert_eq!(state(&waiting.tasks[0]), TaskState::InputRequired);
    let full = step(steps, "artifacts, no history").as_list();
    assert_eq!(full.total_size, 2);
    assert!(full.tasks.iter().all(|t| t.history.is_empty()), "historyLength=0");
    let artifacts: Vec<_> = full.tasks.iter().map(artifact_texts).collect();
    assert_eq!(artifacts, [vec!["hi".to_owned()], vec![]], "newest first, artifacts included");
}

async fn follow_up_unknown_task(client: &Client) -> Steps {
    let unknown = Task { id: "no-such-task".into(), ..Default::default() };
    let sent = Outcome::reply(&client.send(follow_up(&unknown, "x")).await);
    let streamed = Outcome::stream(client.send_streaming(follow_up(&unknown, "x")).await).await;
    vec![("send", sent), ("stream", streamed)]
}

async fn follow_up_terminal_task(client: &Client) -> Steps {
    let task = task_of(&client.send(send("done already")).await);
    let sent = Outcome::reply(&client.send(follow_up(&task, "again")).await);
    let streamed = Outcome::stream(client.send_streaming(follow_up(&task, "again")).await).await;
    vec![("send", sent), ("stream", streamed)]
}

// ---------------------------------------------------------------------------------------------
// The test.

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "(no message)".into())
}

/// Runs every scenario over every binding; reports every disagreement and every departure
/// from the spec at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_binding_gives_the_same_results() {
    let mut problems = Vec::new();
    for scenario in SCENARIOS {
        let name = scenario.name;
        let mut runs: Vec<(Binding, Steps)> = Vec::new();
        for binding in BINDINGS {
            match tokio::spawn(scenario.run_on(binding)).await {
                Ok(steps) => runs.push((binding, steps)),
                Err(error) => problems
                    .push(format!("{name:?} over {binding:?} failed: {}", panic_text(error.into_panic()))),
            }
        }
        for (binding, steps) in &runs {
            if let Err(payload) = std::panic::catch_unwind(AssertUnwindSafe(|| scenario.check(steps))) {
                problems.push(format!(
                    "{name:?} over {binding:?} is not what the spec says: {}",
                    panic_text(payload)
                ));
            }
        }
        let Some(((reference_binding, reference), others)) = runs.split_first() else { continue };
        for (binding, steps) in others {
            let labels = |steps: &Steps| steps.iter().map(|(l, _)| *l).collect::<Vec<_>>();
            if labels(steps) != labels(reference) {
                problems.push(format!("{name:?}: {reference_binding:?} and {binding:?} ran different steps"));
                continue;
            }
            for ((label, expected), (_, actual)) in reference.iter().zip(steps) {
                if expected != actual {
                    problems.push(format!(
                        "{name:?}, step {label:?}: {reference_binding:?} and {binding:?} disagree\n\
                         {reference_binding:?}: {expected:#?}\n{binding:?}: {actual:#?}"
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{} problem(s):\n\n{}", problems.len(), problems.join("\n\n"));
}
