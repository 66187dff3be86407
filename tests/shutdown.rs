//! Graceful shutdown of a real `a2a-server` process on a real SIGTERM.
mod common;

use std::time::Duration;

use a2a_server::proto::a2a_service_client::A2aServiceClient;
use a2a_server::proto::send_message_response::Payload as Reply;
use a2a_server::proto::{ListTasksRequest, SubscribeToTaskRequest, TaskState};
use common::process::ServerProcess;
use common::*;
use tonic::transport::Channel;

/// The binary with a drain timeout; the process and its URL.
fn start(drain_timeout_secs: u64) -> (ServerProcess, String) {
    let process = ServerProcess::start(&[
        "--listen",
        "127.0.0.1:0",
        "--drain-timeout-secs",
        &drain_timeout_secs.to_string(),
    ]);
    let url = process.url();
    (process, url)
}

async fn client(url: &str) -> A2aServiceClient<Channel> {
    A2aServiceClient::connect(url.to_owned()).await.unwrap()
}

/// Waits until the server holds `n` tasks (so a blocking call is known to be in flight).
async fn wait_for_tasks(client: &mut A2aServiceClient<Channel>, n: i32) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while client.list_tasks(ListTasksRequest::default()).await.unwrap().into_inner().total_size < n {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn sigterm_ends_streams_with_unavailable_and_lets_unary_calls_finish() {
    let (mut process, url) = start(30);
    let mut control = client(&url).await;
    let idle = match control.send_message(send("input")).await.unwrap().into_inner().payload {
        Some(Reply::Task(task)) => task,
        other => panic!("{other:?}"),
    };
    let mut stream = client(&url)
        .await
        .subscribe_to_task(SubscribeToTaskRequest { id: idle.id.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    next(&mut stream).await.expect("the snapshot");

    let mut blocking = client(&url).await;
    let in_flight = tokio::spawn(async move { blocking.send_message(send("stream 5 200")).await });
    wait_for_tasks(&mut control, 2).await;

    process.terminate();
    let ended = tokio::time::timeout(PATIENCE, stream.message()).await.unwrap().unwrap_err();
    assert_eq!(ended.code(), tonic::Code::Unavailable, "{ended:?}");

    let finished = in_flight.await.unwrap().expect("the in-flight unary call finishes");
    match finished.into_inner().payload {
        Some(Reply::Task(task)) => assert_eq!(state(&task), TaskState::Completed),
        other => panic!("{other:?}"),
    }
    assert_eq!(process.exit_code().await, 0);
}

#[tokio::test]
async fn running_tasks_are_cancelled_when_the_drain_timeout_passes() {
    let (mut process, url) = start(1);
    let mut control = client(&url).await;
    let mut blocking = client(&url).await;
    let in_flight = tokio::spawn(async move { blocking.send_message(send("stream 100 1000")).await });
    wait_for_tasks(&mut control, 1).await;
    process.terminate();
    let answer = in_flight.await.unwrap().expect("the blocked call is answered");
    match answer.into_inner().payload {
        Some(Reply::Task(task)) => assert_eq!(state(&task), TaskState::Canceled),
        other => panic!("{other:?}"),
    }
    assert_eq!(process.exit_code().await, 0);
}

/// A SIGTERM that comes the moment the server has said it listens (a supervisor that stops a
/// replica it has just started) drains it like any other: exit code 0, not death by the signal.
#[tokio::test]
async fn a_sigterm_right_after_the_listening_line_still_drains() {
    for _ in 0..10 {
        let (mut process, _) = start(5);
        let pid = libc::pid_t::try_from(process.pid()).expect("a pid");
        // SAFETY: kill only sends a signal, to the server process this test started.
        #[allow(unsafe_code)]
        let sent = unsafe { libc::kill(pid, libc::SIGTERM) };
        assert_eq!(sent, 0, "kill -TERM {pid}");
        assert_eq!(process.exit_code().await, 0, "stderr:\n{}", process.stderr());
    }
}
