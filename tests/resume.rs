//! The resume extension (`docs/extensions/resume.md`) on every binding: SubscribeToTask with
//! the last generation seen gets exactly the updates after it and no Task while the task's
//! log still holds them; the Task first otherwise; an error only for a generation the task
//! has not reached. SSE's `Last-Event-ID` resumes the same way.
mod common;

use a2a_server::call::RESUME_EXTENSION;
use a2a_server::core::CoreSettings;
use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{SendMessageResponse, StreamResponse, TaskState, send_message_response};
use common::bindings::{BINDINGS, Binding, Client, ItemStream};
use common::*;

fn task_id(response: SendMessageResponse) -> String {
    match response.payload {
        Some(send_message_response::Payload::Task(task)) => task.id,
        other => panic!("expected a task, got {other:?}"),
    }
}

/// Reads `stream` until an item of generation `at` or later; the items read.
async fn read_until(stream: &mut ItemStream, at: i64) -> Vec<StreamResponse> {
    let mut items = Vec::new();
    loop {
        let item = stream.next().await.expect("the stream goes on").expect("an item");
        let reached = item_generation(&item) >= at;
        items.push(item);
        if reached {
            return items;
        }
    }
}

/// A client with the resume extension active.
async fn resumer(server: &TestServer, binding: Binding) -> Client {
    Client::connect(server, binding, "1.0").await.with_header("a2a-extensions", RESUME_EXTENSION)
}

#[tokio::test]
async fn resuming_from_the_middle_gets_exactly_the_rest_without_a_snapshot() {
    let server = TestServer::start().await;
    for binding in BINDINGS {
        let client = resumer(&server, binding).await;
        let id = task_id(client.send(send_returning_immediately("stream 12 60")).await.unwrap());
        let mut whole = client.subscribe(&id).await.unwrap();
        let seen = read_until(&mut whole, 6).await;
        let cut = item_generation(seen.last().unwrap());

        let resumed = client.with_header("a2a-last-generation", cut.to_string()).subscribe(&id).await;
        let (rest, failure) = resumed.unwrap().finish().await;
        assert!(failure.is_none(), "{binding:?}: {failure:?}");
        let (remaining, _) = whole.finish().await;
        assert!(!matches!(rest[0].payload, Some(Payload::Task(_))), "{binding:?}: no snapshot");
        assert_eq!(item_generation(&rest[0]), cut + 1, "{binding:?}: right after the cursor");
        assert_eq!(rest, remaining, "{binding:?}: the joined sequence is the uninterrupted one");
        assert_eq!(item_state(rest.last().unwrap()), Some(TaskState::Completed));
    }
}

#[tokio::test]
async fn sse_last_event_id_resumes_without_the_extension() {
    let server = TestServer::start().await;
    for binding in [Binding::JsonRpc, Binding::HttpJson] {
        let client = Client::connect(&server, binding, "1.0").await;
        // WORKING (2), then 300 ms, then the chunks (3…12) and COMPLETED.
        let id = task_id(client.send(send_returning_immediately("stream 10 60 300")).await.unwrap());
        let mut whole = client.subscribe(&id).await.unwrap();
        // The Task (at 2), chunks 3 and 4: v1.0 items carry no generation, so they are counted.
        for _ in 0..3 {
            whole.next().await.unwrap().unwrap();
        }
        let resumed = client.with_header("last-event-id", "3").subscribe(&id).await.unwrap();
        let (rest, _) = resumed.finish().await;
        let (remaining, _) = whole.finish().await;
        assert!(!matches!(rest[0].payload, Some(Payload::Task(_))), "{binding:?}: no snapshot");
        assert_eq!(chunk_texts(&rest[0]), ["chunk 1"], "{binding:?}: generation 4 first");
        assert_eq!(rest[1..], remaining[..], "{binding:?}: then what the other subscriber saw");
        assert_eq!(item_state(rest.last().unwrap()), Some(TaskState::Completed));
    }
}

#[tokio::test]
async fn resuming_from_before_the_logs_reach_gets_the_task_then_the_rest() {
    let settings = CoreSettings { event_log_capacity: 3, ..Default::default() };
    let server = TestServer::builder().settings(settings).start().await;
    for binding in BINDINGS {
        let client = resumer(&server, binding).await;
        let id = task_id(client.send(send_returning_immediately("stream 14 60")).await.unwrap());
        let mut whole = client.subscribe(&id).await.unwrap();
        read_until(&mut whole, 9).await;

        let resumed = client.with_header("a2a-last-generation", "2").subscribe(&id).await.unwrap();
        let (items, failure) = resumed.finish().await;
        assert!(failure.is_none(), "{binding:?}: never an error for an old cursor: {failure:?}");
        let Some(Payload::Task(task)) = &items[0].payload else { panic!("{binding:?}: the Task first") };
        assert!(task.generation >= 9, "{binding:?}: the jump says it was reconciled");
        let generations: Vec<i64> = items.iter().map(item_generation).collect();
        let expected: Vec<i64> = (task.generation..task.generation + items.len() as i64).collect();
        assert_eq!(generations, expected, "{binding:?}: then every update, none missing");
        assert_eq!(item_state(items.last().unwrap()), Some(TaskState::Completed));
        whole.finish().await;
    }
}

#[tokio::test]
async fn a_cursor_from_the_future_is_invalid_and_a_finished_task_resumes_to_its_final_state() {
    let server = TestServer::start().await;
    for binding in BINDINGS {
        let client = resumer(&server, binding).await;
        let id = task_id(client.send(send_returning_immediately("stream 3 200")).await.unwrap());
        let failure = match client.with_header("a2a-last-generation", "1000").subscribe(&id).await {
            Err(failure) => failure,
            Ok(stream) => stream.finish().await.1.expect("an error"),
        };
        assert_eq!(failure.reason, "INVALID_PARAMS", "{binding:?}");
        assert_eq!(failure.fields, ["A2A-Last-Generation"], "{binding:?}");

        // Not a number: the same error.
        let garbage = client.with_header("a2a-last-generation", "soon").subscribe(&id).await;
        assert_eq!(garbage.err().map(|f| f.reason), Some("INVALID_PARAMS".into()), "{binding:?}");

        // Without the extension the header means nothing: the Task first.
        let plain = Client::connect(&server, binding, "1.0").await.with_header("a2a-last-generation", "2");
        let mut stream = plain.subscribe(&id).await.unwrap();
        let first = stream.next().await.unwrap().unwrap();
        assert!(matches!(first.payload, Some(Payload::Task(_))), "{binding:?}");
        stream.finish().await;

        // Finished meanwhile: a resuming client gets the final Task (a plain one, an error).
        let (items, failure) =
            client.with_header("a2a-last-generation", "2").subscribe(&id).await.unwrap().finish().await;
        assert!(failure.is_none(), "{binding:?}");
        assert_eq!(items.len(), 1);
        assert_eq!(item_state(&items[0]), Some(TaskState::Completed));
    }
}
