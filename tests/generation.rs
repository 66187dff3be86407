//! A2A dev-1.1's `generation` on every binding: its numbering (1 at creation, +1 per status or
//! artifact update, across an INPUT_REQUIRED turn and across hibernation), JSON only for
//! clients that ask for 1.1 (v1.0 clients get today's bytes), long-poll GetTask
//! (`currentGeneration`) and `ifGenerationMatch` on follow-up messages.
mod common;

use std::time::{Duration, Instant};

use a2a_server::core::CoreSettings;
use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{
    GetTaskRequest, SendMessageRequest, SendMessageResponse, Task, TaskState, send_message_response,
};
use a2a_server::protojson::encode;
use common::bindings::{BINDINGS, Binding, Client};
use common::*;

fn task_of(response: SendMessageResponse) -> Task {
    match response.payload {
        Some(send_message_response::Payload::Task(task)) => task,
        other => panic!("expected a task, got {other:?}"),
    }
}

fn get(id: &str, current_generation: Option<i64>) -> GetTaskRequest {
    GetTaskRequest { id: id.to_owned(), current_generation, ..Default::default() }
}

fn follow_up_if(task: &Task, text: &str, if_generation_match: Option<i64>) -> SendMessageRequest {
    let mut request = follow_up(task, text);
    request.configuration.get_or_insert_with(Default::default).if_generation_match = if_generation_match;
    request
}

async fn server(settings: CoreSettings) -> TestServer {
    TestServer::builder().settings(settings).start().await
}

#[tokio::test]
async fn creation_is_generation_1_and_every_update_adds_1_on_every_binding() {
    let server = TestServer::start().await;
    for binding in BINDINGS {
        let client = Client::connect(&server, binding, "1.1").await;
        let (items, failure) = client.send_streaming(send("stream 3 0")).await.unwrap().finish().await;
        assert!(failure.is_none(), "{binding:?}: {failure:?}");
        let generations: Vec<i64> = items.iter().map(item_generation).collect();
        // The Task as created (1), WORKING, three chunks, COMPLETED.
        assert_eq!(generations, [1, 2, 3, 4, 5, 6], "{binding:?}");
        let Some(Payload::Task(task)) = &items[0].payload else { panic!("the Task first") };
        let stored = client.get(get(&task.id, None)).await.unwrap();
        assert_eq!(stored.generation, 6, "{binding:?}: the task's is its last update's");
        let listed = client.list(Default::default()).await.unwrap();
        assert!(listed.tasks.iter().all(|t| t.generation > 0), "{binding:?}: listed tasks carry it");
    }
}

#[tokio::test]
async fn the_numbering_goes_on_across_a_turn_and_across_hibernation() {
    let settings = CoreSettings { idle_timeout: Some(Duration::from_millis(100)), ..Default::default() };
    let server = server(settings).await;
    for binding in BINDINGS {
        let client = Client::connect(&server, binding, "1.1").await;
        let asked = task_of(client.send(send("input")).await.unwrap());
        assert_eq!((state(&asked), asked.generation), (TaskState::InputRequired, 2), "{binding:?}");
        server.wait_until("the task to hibernate", |core| core.live_tasks() == 0).await;
        let hibernated = client.get(get(&asked.id, None)).await.unwrap();
        assert_eq!(hibernated.generation, 2, "{binding:?}: stored with the task");
        // Revived by the follow-up: its echo artifact is 3, COMPLETED is 4.
        let (items, _) = client.send_streaming(follow_up(&asked, "again")).await.unwrap().finish().await;
        let generations: Vec<i64> = items.iter().map(item_generation).collect();
        assert_eq!(generations, [2, 3, 4], "{binding:?}: the Task as the message found it, then 3, 4");
        assert_eq!(client.get(get(&asked.id, None)).await.unwrap().generation, 4, "{binding:?}");
    }
}

/// The raw JSON body of a GetTask over HTTP+JSON and JSON-RPC, for `version`.
async fn raw_get(server: &TestServer, id: &str, version: &str) -> (String, String) {
    let http = reqwest::Client::new();
    let rest = http.get(format!("{}/tasks/{id}", server.url()));
    let jsonrpc = http.post(server.url()).json(&rpc(1, "GetTask", serde_json::json!({"id": id})));
    let mut bodies = Vec::new();
    for request in [rest, jsonrpc] {
        let response = request.header("A2A-Version", version).send().await.unwrap();
        bodies.push(response.text().await.unwrap());
    }
    (bodies.remove(0), bodies.remove(0))
}

#[tokio::test]
async fn v1_0_json_clients_get_exactly_the_v1_0_bytes() {
    let server = TestServer::start().await;
    let mut grpc = server.client().await;
    let task = send_task(&mut grpc, send("stream 2 0")).await;
    assert_eq!(task.generation, 5, "gRPC always carries it");

    let (rest_10, jsonrpc_10) = raw_get(&server, &task.id, "1.0").await;
    let (rest_11, jsonrpc_11) = raw_get(&server, &task.id, "1.1").await;
    // Today's encoder, on the task without the field: byte for byte what v1.0 clients get.
    let today = serde_json::to_string(&encode(&Task { generation: 0, ..task.clone() })).unwrap();
    assert_eq!(rest_10, today);
    assert_eq!(jsonrpc_10, format!(r#"{{"jsonrpc":"2.0","id":1,"result":{today}}}"#));
    assert!(rest_11.contains(r#""generation":"5""#), "{rest_11}");
    assert!(jsonrpc_11.contains(r#""generation":"5""#), "{jsonrpc_11}");
    assert_eq!(rest_11.replace(r#","generation":"5""#, ""), rest_10, "the only difference");

    // Streams too: a v1.0 SSE client never sees the field; the resume extension adds it.
    let plain = Client::connect(&server, Binding::HttpJson, "1.0").await;
    for (client, wants) in [
        (plain.with_header("x-unused", "1"), false),
        (plain.with_header("a2a-extensions", a2a_server::call::RESUME_EXTENSION), true),
    ] {
        let (items, _) = client.send_streaming(send("stream 2 0")).await.unwrap().finish().await;
        assert!(items.iter().all(|item| (item_generation(item) > 0) == wants), "{wants}: {items:?}");
    }
    let raw = reqwest::Client::new()
        .post(format!("{}/message:stream", server.url()))
        .header("A2A-Version", "1.0")
        .json(&encode(&send("stream 2 0")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!raw.contains("generation"), "{raw}");
}

#[tokio::test]
async fn long_poll_answers_on_advance_on_timeout_and_at_once_for_a_terminal_task() {
    let settings = CoreSettings { max_long_poll: Duration::from_millis(700), ..Default::default() };
    let server = server(settings).await;
    for binding in BINDINGS {
        let client = Client::connect(&server, binding, "1.1").await;
        // On advance: the task waits 300 ms before its first chunk.
        let task = task_of(client.send(send_returning_immediately("stream 1 0 300")).await.unwrap());
        let known = client.get(get(&task.id, None)).await.unwrap().generation;
        let started = Instant::now();
        let advanced = client.get(get(&task.id, Some(known))).await.unwrap();
        assert!(advanced.generation > known, "{binding:?}: {} after {known}", advanced.generation);
        assert!(started.elapsed() < Duration::from_millis(650), "{binding:?}: answered on the advance");

        // On timeout: a task waiting for input does not move.
        let waiting = task_of(client.send(send("input")).await.unwrap());
        let started = Instant::now();
        let same = client.get(get(&waiting.id, Some(waiting.generation))).await.unwrap();
        assert_eq!(same.generation, waiting.generation, "{binding:?}");
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(650), "{binding:?}: held until the maximum, {waited:?}");
        assert!(waited < Duration::from_secs(5), "{binding:?}: {waited:?}");

        // A terminal task never advances: at once.
        let done = task_of(client.send(send("hello")).await.unwrap());
        let started = Instant::now();
        let final_task = client.get(get(&done.id, Some(done.generation + 10))).await.unwrap();
        assert_eq!(final_task.generation, done.generation);
        assert!(started.elapsed() < Duration::from_millis(500), "{binding:?}: at once");

        // A generation already passed: at once.
        let passed = client.get(get(&done.id, Some(1))).await.unwrap();
        assert_eq!(passed.generation, done.generation);
    }
}

#[tokio::test]
async fn if_generation_match_accepts_the_current_generation_and_refuses_any_other() {
    let server = TestServer::start().await;
    for binding in BINDINGS {
        let client = Client::connect(&server, binding, "1.1").await;
        let asked = task_of(client.send(send("input")).await.unwrap());
        assert_eq!(asked.generation, 2);

        for stale in [1, 3] {
            let failure = client.send(follow_up_if(&asked, "x", Some(stale))).await.unwrap_err();
            assert_eq!(failure.reason, "TASK_GENERATION_MISMATCH", "{binding:?}");
            assert_eq!(failure.code, "ABORTED", "{binding:?}");
            assert_eq!(failure.metadata_keys, ["currentGeneration", "expectedGeneration", "taskId"]);
            let streaming = client.send_streaming(follow_up_if(&asked, "x", Some(stale))).await;
            let failure = match streaming {
                Err(failure) => failure,
                Ok(stream) => stream.finish().await.1.expect("an error"),
            };
            assert_eq!(failure.reason, "TASK_GENERATION_MISMATCH", "{binding:?}: streaming too");
        }

        let done = task_of(client.send(follow_up_if(&asked, "matched", Some(2))).await.unwrap());
        assert_eq!(state(&done), TaskState::Completed, "{binding:?}");
        assert_eq!(artifact_texts(&done), ["matched"], "{binding:?}: the refused ones left no trace");

        // Ignored when the message creates a task.
        let created = client.send(follow_up_if(&Task::default(), "new", Some(42))).await.unwrap();
        assert_eq!(state(&task_of(created)), TaskState::Completed);
    }
}

#[tokio::test]
async fn mismatch_metadata_names_both_generations() {
    let server = TestServer::start().await;
    let mut grpc = server.client().await;
    let asked = send_task(&mut grpc, send("input")).await;
    let status = grpc.send_message(follow_up_if(&asked, "x", Some(7))).await.unwrap_err();
    assert_a2a_error(&status, tonic::Code::Aborted, "TASK_GENERATION_MISMATCH");
    use tonic_types::StatusExt;
    let info = status.get_error_details().error_info().cloned().expect("ErrorInfo");
    assert_eq!(info.metadata["taskId"], asked.id);
    assert_eq!(info.metadata["expectedGeneration"], "7");
    assert_eq!(info.metadata["currentGeneration"], "2");
}
