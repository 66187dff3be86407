//! SubscribeToTask, the heart of the server: snapshot first, nothing lost, nothing duplicated,
//! the same bytes for everyone, slow readers isolated, disconnects freed.
mod common;

use a2a_server::core::CoreSettings;
use a2a_server::proto::a2a_service_client::A2aServiceClient;
use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{StreamResponse, SubscribeToTaskRequest, Task, TaskState};
use common::*;
use prost::Message as _;
use tonic::Code;
use tonic::transport::Channel;

fn subscribe_request(task: &Task) -> SubscribeToTaskRequest {
    SubscribeToTaskRequest { id: task.id.clone(), ..Default::default() }
}

async fn subscribe(client: &mut A2aServiceClient<Channel>, task: &Task) -> tonic::Streaming<StreamResponse> {
    client.subscribe_to_task(subscribe_request(task)).await.expect("subscribe").into_inner()
}

/// A task parked in INPUT_REQUIRED: nothing happens until a follow-up, so subscribers can be
/// attached at a known point without sleeping.
async fn idle_task(client: &mut A2aServiceClient<Channel>) -> Task {
    let task = send_task(client, send("input")).await;
    assert_eq!(state(&task), TaskState::InputRequired);
    task
}

/// Starts the follow-up `command` on an idle task without waiting for it.
async fn start(client: &mut A2aServiceClient<Channel>, task: &Task, command: &str) {
    let mut request = follow_up(task, command);
    request.configuration =
        Some(a2a_server::proto::SendMessageConfiguration { return_immediately: true, ..Default::default() });
    send_task(client, request).await;
}

fn snapshot(item: &StreamResponse) -> &Task {
    match &item.payload {
        Some(Payload::Task(task)) => task,
        other => panic!("the first item must be a Task, got {other:?}"),
    }
}

#[tokio::test]
async fn subscription_opens_with_the_task_snapshot() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let task = idle_task(&mut client).await;
    let mut stream = subscribe(&mut client, &task).await;
    let first = next(&mut stream).await.expect("an item");
    let snap = snapshot(&first);
    assert_eq!(snap.id, task.id);
    assert_eq!(state(snap), TaskState::InputRequired);
    assert_eq!(snap.history, task.history);
}

#[tokio::test]
async fn concurrent_subscribers_receive_byte_identical_sequences() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let task = idle_task(&mut client).await;
    let mut streams = Vec::new();
    for _ in 0..3 {
        let mut own = server.client().await;
        streams.push(subscribe(&mut own, &task).await);
    }
    start(&mut client, &task, "stream 50 0").await;
    let mut sequences = Vec::new();
    for stream in streams {
        let items = collect(stream).await.expect("stream ends with OK");
        sequences.push(items.iter().map(|i| i.encode_to_vec()).collect::<Vec<_>>());
        let chunks: Vec<_> = items.iter().flat_map(chunk_texts).collect();
        assert_eq!(chunks, (0..50).map(|i| format!("chunk {i}")).collect::<Vec<_>>());
        assert_eq!(item_state(items.last().unwrap()), Some(TaskState::Completed));
    }
    assert_eq!(sequences[0], sequences[1]);
    assert_eq!(sequences[1], sequences[2]);
}

#[tokio::test]
async fn late_subscriber_gets_everything_so_far_then_exactly_the_rest() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut first = client.send_streaming_message(send("stream 10 30")).await.unwrap().into_inner();
    let task = snapshot(&next(&mut first).await.unwrap()).clone();
    // Wait until the first subscriber has seen chunk 2: the task is mid-stream.
    loop {
        let item = next(&mut first).await.expect("more items");
        if chunk_texts(&item) == ["chunk 2"] {
            break;
        }
    }
    let mut late_client = server.client().await;
    let mut late = subscribe(&mut late_client, &task).await;
    let head = next(&mut late).await.unwrap();
    let snap = snapshot(&head);
    let before = artifact_texts(snap);
    assert!(before.len() >= 3, "the snapshot holds every chunk so far: {before:?}");
    let rest = collect(late).await.expect("ends with OK");
    let after: Vec<_> = rest.iter().flat_map(chunk_texts).collect();
    let all: Vec<_> = before.into_iter().chain(after).collect();
    assert_eq!(all, (0..10).map(|i| format!("chunk {i}")).collect::<Vec<_>>(), "no gap, no duplicate");
    assert_eq!(item_state(rest.last().unwrap()), Some(TaskState::Completed));
    let firsts = collect(first).await.unwrap();
    assert_eq!(item_state(firsts.last().unwrap()), Some(TaskState::Completed));
}

#[tokio::test]
async fn subscriber_on_input_required_sees_a_unary_follow_up_and_ends_after_terminal() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let task = idle_task(&mut client).await;
    let mut sub_client = server.client().await;
    let stream = subscribe(&mut sub_client, &task).await;
    let done = send_task(&mut client, follow_up(&task, "green")).await;
    assert_eq!(state(&done), TaskState::Completed);
    let items = collect(stream).await.expect("ends with OK");
    assert_eq!(state(snapshot(&items[0])), TaskState::InputRequired);
    let chunks: Vec<_> = items.iter().flat_map(chunk_texts).collect();
    assert_eq!(chunks, ["green"]);
    assert_eq!(item_state(items.last().unwrap()), Some(TaskState::Completed));
    assert_eq!(items.len(), 3, "snapshot, artifact, COMPLETED: {items:?}");
}

#[tokio::test]
async fn auth_required_task_keeps_subscribers_through_its_resumption() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let mut stream = client.send_streaming_message(send("auth")).await.unwrap().into_inner();
    let task = snapshot(&next(&mut stream).await.unwrap()).clone();
    let items = collect(stream).await.unwrap();
    assert_eq!(
        item_state(items.last().unwrap()),
        Some(TaskState::AuthRequired),
        "the send stream stops there"
    );
    // The agent resumes by itself about a second later; a subscriber stays attached through it.
    let mut sub_client = server.client().await;
    let items = collect(subscribe(&mut sub_client, &task).await).await.expect("ends with OK");
    assert_eq!(state(snapshot(&items[0])), TaskState::AuthRequired);
    let states: Vec<_> = items[1..].iter().filter_map(item_state).collect();
    assert_eq!(states, [TaskState::Working, TaskState::Completed]);
}

#[tokio::test]
async fn terminal_and_unknown_tasks_cannot_be_subscribed() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let done = send_task(&mut client, send("hi")).await;
    let error = client.subscribe_to_task(subscribe_request(&done)).await.unwrap_err();
    assert_a2a_error(&error, Code::FailedPrecondition, "UNSUPPORTED_OPERATION");
    let unknown = Task { id: "no-such-task".into(), ..Default::default() };
    let error = client.subscribe_to_task(subscribe_request(&unknown)).await.unwrap_err();
    assert_a2a_error(&error, Code::NotFound, "TASK_NOT_FOUND");
}

#[tokio::test]
async fn streaming_can_be_switched_off() {
    let server =
        TestServer::builder().settings(CoreSettings { streaming: false, ..Default::default() }).start().await;
    let mut client = server.client().await;
    let task = idle_task(&mut client).await;
    let error = client.subscribe_to_task(subscribe_request(&task)).await.unwrap_err();
    assert_a2a_error(&error, Code::FailedPrecondition, "UNSUPPORTED_OPERATION");
    let error = client.send_streaming_message(send("hi")).await.unwrap_err();
    assert_a2a_error(&error, Code::FailedPrecondition, "UNSUPPORTED_OPERATION");
}

#[tokio::test]
async fn a_subscriber_that_never_reads_does_not_delay_a_fast_one() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let task = idle_task(&mut client).await;
    let mut slow_client = server.client().await;
    let slow = subscribe(&mut slow_client, &task).await;
    let mut fast_client = server.client().await;
    let fast = subscribe(&mut fast_client, &task).await;
    // Far more than fits in the slow subscriber's HTTP/2 windows.
    start(&mut client, &task, "stream 3000 0").await;
    let items = collect(fast).await.expect("the fast subscriber finishes");
    assert_eq!(items.iter().flat_map(chunk_texts).count(), 3000);
    assert_eq!(item_state(items.last().unwrap()), Some(TaskState::Completed));
    // The slow one is still attached, unread; the task finished regardless.
    let done =
        client.get_task(a2a_server::proto::GetTaskRequest { id: task.id.clone(), ..Default::default() });
    assert_eq!(state(&done.await.unwrap().into_inner()), TaskState::Completed);
    drop(slow);
}

#[tokio::test]
async fn a_subscriber_behind_the_log_is_told_to_resubscribe() {
    let settings = CoreSettings { event_log_capacity: 8, ..Default::default() };
    let server = TestServer::builder().settings(settings).start().await;
    let mut client = server.client().await;
    let task = idle_task(&mut client).await;
    let mut slow_client = server.client().await;
    let mut slow = subscribe(&mut slow_client, &task).await;
    send_task(&mut client, follow_up(&task, "stream 5000 0")).await;
    // Everything after the snapshot was produced while this subscriber did not read; what it
    // can still be given, it gets in order, then an explicit error, never a silent gap.
    let mut chunks = Vec::new();
    let error = loop {
        match tokio::time::timeout(PATIENCE, slow.message()).await.expect("stalled") {
            Ok(Some(item)) => chunks.extend(chunk_texts(&item)),
            Ok(None) => panic!("the stream ended without reporting the lag"),
            Err(status) => break status,
        }
    };
    assert_a2a_error(&error, Code::ResourceExhausted, "SUBSCRIBER_LAGGED");
    assert!(error.message().contains("SubscribeToTask"), "{}", error.message());
    let expected: Vec<_> = (0..chunks.len()).map(|i| format!("chunk {i}")).collect();
    assert_eq!(chunks, expected, "whatever arrived before the error is contiguous");
}

/// A burst far longer than the old 4,096-event count bound (the demo agent makes 20,000 chunks
/// in about a second) is held for readers that did not keep up, with the default settings:
/// the log's byte bound is what limits it, and 20,000 small events fit in it.
#[tokio::test]
async fn a_burst_of_twenty_thousand_events_is_held_for_readers_that_did_not_keep_up() {
    const EVENTS: usize = 20_000;
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let task = idle_task(&mut client).await;
    // HTTP/2's smallest windows, so the server can hand over only a few events ahead of what
    // each client reads: the rest must wait in the log.
    let narrow = || async {
        let channel = tonic::transport::Endpoint::from_shared(server.url())
            .unwrap()
            .initial_stream_window_size(65_535)
            .initial_connection_window_size(65_535)
            .connect()
            .await
            .expect("connect");
        A2aServiceClient::new(channel)
    };
    let mut subscriber_client = narrow().await;
    let subscriber = subscribe(&mut subscriber_client, &task).await;
    // The caller's own stream, too: it reads its first item, then nothing until the end.
    let mut caller_client = narrow().await;
    let mut caller = caller_client
        .send_streaming_message(follow_up(&task, &format!("stream {EVENTS} 0")))
        .await
        .unwrap()
        .into_inner();
    let first = next(&mut caller).await.expect("the caller's stream opens");
    server.wait_until("the burst is over", |core| core.live_tasks() == 0).await;
    let mut caller_items = vec![first];
    caller_items.extend(collect(caller).await.expect("the caller's stream ends cleanly"));
    let subscriber_items = collect(subscriber).await.expect("the subscriber's stream ends cleanly");
    let expected: Vec<String> = (0..EVENTS).map(|i| format!("chunk {i}")).collect();
    for (who, items) in [("caller", caller_items), ("subscriber", subscriber_items)] {
        let chunks: Vec<String> = items.iter().flat_map(chunk_texts).collect();
        assert!(chunks == expected, "{who}: {} chunks, not the {EVENTS} in order", chunks.len());
        assert_eq!(item_state(items.last().unwrap()), Some(TaskState::Completed), "{who}");
    }
}

#[tokio::test]
async fn disconnecting_frees_the_subscription() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let task = idle_task(&mut client).await;
    let mut subscribers = Vec::new();
    for _ in 0..5 {
        let mut own = server.client().await;
        let stream = subscribe(&mut own, &task).await;
        subscribers.push((own, stream));
    }
    server.wait_until("5 open subscriptions", |core| core.open_subscriptions() == 5).await;
    subscribers.truncate(2);
    server.wait_until("2 open subscriptions", |core| core.open_subscriptions() == 2).await;
    drop(subscribers);
    server.wait_until("no open subscription", |core| core.open_subscriptions() == 0).await;
    assert_eq!(server.core.live_tasks(), 1, "the task itself lives on");
    send_task(&mut client, follow_up(&task, "done")).await;
    server.wait_until("no live task", |core| core.live_tasks() == 0).await;
}

#[tokio::test]
async fn two_hundred_subscribers_two_thousand_events_no_loss_no_reordering() {
    const SUBSCRIBERS: usize = 200;
    const EVENTS: usize = 2000;
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let task = idle_task(&mut client).await;
    // A few connections, many streams on each, as a real fan-out would look.
    let mut clients = Vec::new();
    for _ in 0..8 {
        clients.push(server.client().await);
    }
    let mut streams = Vec::new();
    let connections = clients.len();
    for i in 0..SUBSCRIBERS {
        streams.push(subscribe(&mut clients[i % connections], &task).await);
    }
    start(&mut client, &task, &format!("stream {EVENTS} 0")).await;
    let readers: Vec<_> = streams.into_iter().map(|s| tokio::spawn(collect(s))).collect();
    let expected: Vec<_> = (0..EVENTS).map(|i| format!("chunk {i}")).collect();
    let mut reference: Option<Vec<Vec<u8>>> = None;
    for reader in readers {
        let items = reader.await.unwrap().expect("every stream ends with OK");
        let chunks: Vec<_> = items.iter().flat_map(chunk_texts).collect();
        assert_eq!(chunks, expected);
        assert_eq!(item_state(items.last().unwrap()), Some(TaskState::Completed));
        let bytes: Vec<_> = items.iter().map(|i| i.encode_to_vec()).collect();
        match &reference {
            None => reference = Some(bytes),
            Some(reference) => assert!(reference == &bytes, "every subscriber got the same bytes"),
        }
    }
    server.wait_until("subscriptions released", |core| core.open_subscriptions() == 0).await;
}
