//! Idempotent SendMessage (`src/core/idempotent.rs`), on every binding: a message its caller
//! already sent is answered with the first call's outcome (the same task, as it is now; the
//! same direct reply) and runs nothing; the same `messageId` with another message is no retry
//! and runs as a new message (the conformance kit reuses ids so). What shows "ran nothing": ListTasks counts
//! one task, the task's history holds the message once, a direct reply keeps its server-made
//! `messageId`, and a finished task is not refused as one (a second run of a follow-up on it
//! would be).
mod common;

use a2a_server::core::CoreSettings;
use a2a_server::proto::send_message_response::Payload as Reply;
use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{
    ListTasksRequest, Message, SendMessageConfiguration, SendMessageRequest, SendMessageResponse, Task,
    TaskState,
};
use common::bindings::{BINDINGS, Binding, Client};
use common::failure::Failure;
use common::*;
use serde_json::json;

/// A fresh server and a client of `binding` for it.
async fn start(binding: Binding) -> (TestServer, Client) {
    let server = TestServer::start().await;
    let client = Client::connect(&server, binding, "1.1").await;
    (server, client)
}

fn task_of(result: Result<SendMessageResponse, Failure>, what: &str) -> Task {
    match result {
        Ok(SendMessageResponse { payload: Some(Reply::Task(task)) }) => task,
        other => panic!("{what}: expected a task, got {other:?}"),
    }
}

fn message_of(result: Result<SendMessageResponse, Failure>, what: &str) -> Message {
    match result {
        Ok(SendMessageResponse { payload: Some(Reply::Message(message)) }) => message,
        other => panic!("{what}: expected a message, got {other:?}"),
    }
}

async fn task_count(client: &Client) -> i32 {
    client.list(ListTasksRequest::default()).await.expect("ListTasks").total_size
}

/// How many user messages of the task's history carry `message_id`.
fn times_in_history(task: &Task, message_id: &str) -> usize {
    task.history.iter().filter(|m| m.message_id == message_id).count()
}

fn returning_immediately(request: &SendMessageRequest) -> SendMessageRequest {
    let configuration = SendMessageConfiguration { return_immediately: true, ..Default::default() };
    SendMessageRequest { configuration: Some(configuration), ..request.clone() }
}

#[tokio::test]
async fn the_same_message_twice_is_one_task_on_every_binding() {
    for binding in BINDINGS {
        let (_server, client) = start(binding).await;
        let request = send("hello, once");
        let first = task_of(client.send(request.clone()).await, "first");
        let again = task_of(client.send(request.clone()).await, "retry");
        assert_eq!(again.id, first.id, "{binding:?}: the retry names the first call's task");
        assert_eq!(state(&again), TaskState::Completed, "{binding:?}");
        assert_eq!(artifact_texts(&again), ["hello, once"], "{binding:?}: one echo");
        assert_eq!(task_count(&client).await, 1, "{binding:?}: the agent ran once");
    }
}

#[tokio::test]
async fn the_same_message_id_with_another_message_runs_as_a_new_message_on_every_binding() {
    for binding in BINDINGS {
        let (_server, client) = start(binding).await;
        let request = send("the first text");
        let first = task_of(client.send(request.clone()).await, "first");
        let mut other = request.clone();
        other.message.as_mut().unwrap().parts = vec![a2a_server::agent::text_part("another text")];
        let second = task_of(client.send(other.clone()).await, "another message, same id");
        assert_ne!(second.id, first.id, "{binding:?}: a task of its own");
        assert_eq!(artifact_texts(&second), ["another text"], "{binding:?}: the agent ran it");
        let (items, error) = client.send_streaming(other).await.expect("a stream").finish().await;
        assert_eq!(error, None, "{binding:?}");
        assert!(!items.is_empty(), "{binding:?}: a stream of its own");
        // Unrecorded, it is no retry of the second call either: a third task.
        assert_eq!(task_count(&client).await, 3, "{binding:?}");
        // The first message's record still stands: its retry runs nothing.
        let again = task_of(client.send(request).await, "retry of the first");
        assert_eq!(again.id, first.id, "{binding:?}");
        assert_eq!(task_count(&client).await, 3, "{binding:?}");
    }
}

/// `--dedupe-messages off`: every message runs, the same one twice too (what the conformance
/// kit, which resends identical messages to make new tasks, needs).
#[tokio::test]
async fn with_dedupe_off_the_same_message_runs_again() {
    let settings = CoreSettings { dedupe_messages: false, ..CoreSettings::default() };
    let server = TestServer::builder().settings(settings).start().await;
    for binding in BINDINGS {
        let client = Client::connect(&server, binding, "1.1").await;
        let request = send("twice");
        let first = task_of(client.send(request.clone()).await, "first");
        let second = task_of(client.send(request).await, "the same message again");
        assert_ne!(second.id, first.id, "{binding:?}: ran again, a task of its own");
        assert_eq!(artifact_texts(&second), ["twice"], "{binding:?}");
    }
}

#[tokio::test]
async fn a_retried_direct_reply_is_the_same_message_on_every_binding() {
    for binding in BINDINGS {
        let (_server, client) = start(binding).await;
        let request = send("message hi there");
        let first = message_of(client.send(request.clone()).await, "first");
        let again = message_of(client.send(request.clone()).await, "retry");
        // A second run would reply with a message of a new server-made id (and context).
        assert_eq!(again, first, "{binding:?}: the recorded reply");
        let (items, error) = client.send_streaming(request).await.expect("a stream").finish().await;
        assert_eq!(error, None, "{binding:?}");
        assert!(
            matches!(&items[..], [item] if item.payload == Some(Payload::Message(first.clone()))),
            "{binding:?}: the same reply as the stream's one item: {items:?}"
        );
        assert_eq!(task_count(&client).await, 0, "{binding:?}");
    }
}

#[tokio::test]
async fn a_retried_follow_up_runs_no_second_turn_on_every_binding() {
    for binding in BINDINGS {
        let (_server, client) = start(binding).await;
        let asked = task_of(client.send(send("input")).await, "input");
        assert_eq!(state(&asked), TaskState::InputRequired, "{binding:?}");
        let answer = follow_up(&asked, "blue");
        let message_id = answer.message.as_ref().unwrap().message_id.clone();
        let done = task_of(client.send(answer.clone()).await, "follow-up");
        assert_eq!(state(&done), TaskState::Completed, "{binding:?}");
        // Run again, the follow-up would meet a completed task and be refused.
        let again = task_of(client.send(answer.clone()).await, "retried follow-up");
        assert_eq!(again.id, asked.id, "{binding:?}");
        assert_eq!(state(&again), TaskState::Completed, "{binding:?}");
        assert_eq!(artifact_texts(&again), ["blue"], "{binding:?}: one turn's echo");
        assert_eq!(times_in_history(&again, &message_id), 1, "{binding:?}: the follow-up once");
        let immediately = task_of(client.send(returning_immediately(&answer)).await, "non-blocking retry");
        assert_eq!((&immediately.id, state(&immediately)), (&asked.id, TaskState::Completed));
    }
}

/// A retry of a call that returned at once, sent blocking, waits for the task to finish as a
/// blocking first call would have; a streamed retry follows the same task to its end.
#[tokio::test]
async fn a_blocking_or_streamed_retry_follows_the_running_task_on_every_binding() {
    for binding in BINDINGS {
        let (_server, client) = start(binding).await;
        let request = send("stream 4 150");
        let first = task_of(client.send(returning_immediately(&request)).await, "first");
        assert_ne!(state(&first), TaskState::Completed, "{binding:?}: still running");
        let settled = task_of(client.send(request.clone()).await, "blocking retry");
        assert_eq!(settled.id, first.id, "{binding:?}");
        assert_eq!(state(&settled), TaskState::Completed, "{binding:?}: it waited for the end");
        assert_eq!(artifact_texts(&settled).len(), 4, "{binding:?}: one run's chunks");

        let request = send("stream 4 150");
        let first = task_of(client.send(returning_immediately(&request)).await, "second first");
        let (items, error) = client.send_streaming(request.clone()).await.expect("a stream").finish().await;
        assert_eq!(error, None, "{binding:?}");
        let Some(Payload::Task(head)) = &items[0].payload else {
            panic!("{binding:?}: a Task first: {items:?}")
        };
        assert_eq!(head.id, first.id, "{binding:?}: the streamed retry follows the first task");
        let mut chunks = artifact_texts(head);
        chunks.extend(items[1..].iter().flat_map(chunk_texts));
        assert_eq!(chunks.len(), 4, "{binding:?}: the task's chunks, each once: {items:?}");
        assert_eq!(items.last().and_then(item_state), Some(TaskState::Completed), "{binding:?}");
        assert_eq!(task_count(&client).await, 2, "{binding:?}");
    }
}

/// Two identical calls at once on one server: one runs, the other waits for it.
#[tokio::test]
async fn the_same_message_sent_twice_at_once_runs_once() {
    let (_server, client) = start(Binding::Grpc).await;
    let request = send("stream 3 100");
    let (a, b) = tokio::join!(client.send(request.clone()), client.send(request.clone()));
    let (a, b) = (task_of(a, "one"), task_of(b, "other"));
    assert_eq!(a.id, b.id);
    assert_eq!(
        (state(&a), state(&b)),
        (TaskState::Completed, TaskState::Completed),
        "both blocked to the end"
    );
    assert_eq!(artifact_texts(&b).len(), 3);
    assert_eq!(task_count(&client).await, 1);
}

/// A follow-up its task refused frees its messageId: the same message, retried when it can
/// be taken, runs at once (a claim left behind would hold it back until it went stale, 6 s).
#[tokio::test]
async fn a_refused_follow_up_can_be_sent_again() {
    let (_server, client) = start(Binding::Grpc).await;
    let asked = task_of(client.send(send("input")).await, "input");
    let answer = follow_up(&asked, "blue");
    let at = |generation: i64| {
        let configuration =
            SendMessageConfiguration { if_generation_match: Some(generation), ..Default::default() };
        SendMessageRequest { configuration: Some(configuration), ..answer.clone() }
    };
    let refused = client.send(at(asked.generation + 5)).await.expect_err("not at that generation");
    assert_eq!(refused.reason, "TASK_GENERATION_MISMATCH", "{refused:?}");
    let retried = tokio::time::timeout(std::time::Duration::from_secs(4), client.send(at(asked.generation)));
    let done = task_of(retried.await.expect("the retry runs at once"), "retry");
    assert_eq!((state(&done), artifact_texts(&done)), (TaskState::Completed, vec!["blue".to_owned()]));
}

/// Another owner's messageId is its own: the same message in another tenant starts a task there.
#[tokio::test]
async fn message_ids_are_scoped_by_owner() {
    let (_server, client) = start(Binding::Grpc).await;
    let request = send("hello");
    let mine = task_of(client.send(request.clone()).await, "default tenant");
    let elsewhere = SendMessageRequest { tenant: "other".into(), ..request };
    let theirs = task_of(client.send(elsewhere).await, "other tenant");
    assert_ne!(theirs.id, mine.id);
}

/// A v0.3 client's retry (JSON-RPC `message/send`) is deduplicated the same way.
#[tokio::test]
async fn a_v03_retry_is_answered_with_the_same_task() {
    let server = TestServer::start().await;
    let http = reqwest::Client::new();
    let call = |message: serde_json::Value| {
        let request = http.post(server.url()).json(&rpc(1, "message/send", json!({"message": message})));
        async move { request.send().await.expect("JSON-RPC").json::<serde_json::Value>().await.expect("JSON") }
    };
    let message = json!({"kind": "message", "messageId": uuid::Uuid::new_v4().to_string(), "role": "user",
                         "parts": [{"kind": "text", "text": "hello"}]});
    let first = call(message.clone()).await;
    let again = call(message.clone()).await;
    assert_eq!(first["result"]["kind"], "task", "{first}");
    assert_eq!(again["result"]["id"], first["result"]["id"], "{again}");
    let mut other = message;
    other["parts"][0]["text"] = json!("changed");
    let another = call(other).await;
    assert_eq!(another["result"]["kind"], "task", "{another}");
    assert_ne!(another["result"]["id"], first["result"]["id"], "no retry, a task of its own: {another}");
}
