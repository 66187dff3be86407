//! Connections and streams a load balancer can recycle: `--max-stream-secs` ends a stream with
//! a resumable close (gRPC UNAVAILABLE / an SSE error event, reason STREAM_CLOSED, naming the
//! last generation sent), after which a resuming client continues with nothing lost or
//! repeated; `--max-connection-age` sends GOAWAY, which a tonic client obeys by finishing
//! its calls in flight and opening a new connection.
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use a2a_server::call::RESUME_EXTENSION;
use a2a_server::core::CoreSettings;
use a2a_server::proto::a2a_service_client::A2aServiceClient;
use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{
    GetTaskRequest, StreamResponse, SubscribeToTaskRequest, TaskState, send_message_response,
};
use common::bindings::{BINDINGS, Client};
use common::*;
use tokio::net::{TcpListener, TcpStream};
use tonic::transport::Endpoint;
use tonic_types::StatusExt;

#[tokio::test]
async fn a_stream_past_its_maximum_age_closes_resumably_and_resumes_without_loss() {
    let settings = CoreSettings { max_stream: Some(Duration::from_millis(400)), ..Default::default() };
    let server = TestServer::builder().settings(settings).start().await;
    for binding in BINDINGS {
        let client =
            Client::connect(&server, binding, "1.0").await.with_header("a2a-extensions", RESUME_EXTENSION);
        let reply = client.send(send_returning_immediately("stream 16 80")).await.unwrap();
        let Some(send_message_response::Payload::Task(task)) = reply.payload else { panic!("a task") };

        let mut joined: Vec<StreamResponse> = Vec::new();
        let mut closes = 0;
        let mut stream = client.subscribe(&task.id).await.unwrap();
        loop {
            let (items, failure) = stream.finish().await;
            joined.extend(items);
            let Some(failure) = failure else { break };
            assert_eq!(failure.reason, "STREAM_CLOSED", "{binding:?}: {failure:?}");
            assert_eq!(failure.metadata_keys, ["lastGeneration", "taskId"], "{binding:?}");
            closes += 1;
            assert!(closes < 20, "{binding:?}: the task should be over by now");
            let last = item_generation(joined.last().expect("items before a close"));
            stream = client
                .with_header("a2a-last-generation", last.to_string())
                .subscribe(&task.id)
                .await
                .unwrap();
        }
        assert!(closes >= 1, "{binding:?}: a 1.3 s stream outlives a 0.4 s maximum");

        // A resume that arrives after the task finished gets the final Task instead of the
        // updates (a loaded machine can be that late): it must then hold everything.
        let all: Vec<String> = (0..16).map(|i| format!("chunk {i}")).collect();
        let late = match joined.last().and_then(|item| item.payload.as_ref()) {
            Some(Payload::Task(last)) if joined.len() > 1 => Some(last.clone()),
            _ => None,
        };
        if let Some(last) = &late {
            joined.pop();
            assert_eq!(last.status.as_ref().map(|s| s.state()), Some(TaskState::Completed), "{binding:?}");
            assert!(last.generation > item_generation(joined.last().unwrap()), "{binding:?}");
            assert_eq!(artifact_texts(last), all, "{binding:?}: the final Task holds every chunk");
        }

        // Otherwise the joined sequence is what an uninterrupted subscriber sees: the Task, then
        // every update once, in order, to COMPLETED.
        let Some(Payload::Task(first)) = &joined[0].payload else { panic!("{binding:?}: the Task first") };
        assert!(
            joined[1..].iter().all(|item| !matches!(item.payload, Some(Payload::Task(_)))),
            "{binding:?}"
        );
        let generations: Vec<i64> = joined.iter().map(item_generation).collect();
        let expected: Vec<i64> = (first.generation..first.generation + joined.len() as i64).collect();
        assert_eq!(generations, expected, "{binding:?}");
        if late.is_some() {
            continue;
        }
        assert_eq!(item_state(joined.last().unwrap()), Some(TaskState::Completed));
        let mut chunks = artifact_texts(first);
        chunks.extend(joined.iter().flat_map(chunk_texts));
        assert_eq!(chunks, all, "{binding:?}: nothing lost, nothing repeated");
    }
}

#[tokio::test]
async fn the_grpc_close_names_the_last_generation_sent() {
    let settings = CoreSettings { max_stream: Some(Duration::from_millis(300)), ..Default::default() };
    let server = TestServer::builder().settings(settings).start().await;
    let mut grpc = server.client().await;
    let task = send_task(&mut grpc, send_returning_immediately("stream 10 100")).await;
    let mut stream = grpc
        .subscribe_to_task(SubscribeToTaskRequest { id: task.id.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    let mut last = 0;
    let status = loop {
        match stream.message().await {
            Ok(Some(item)) => last = item_generation(&item),
            Ok(None) => panic!("ended without the close"),
            Err(status) => break status,
        }
    };
    assert_a2a_error(&status, tonic::Code::Unavailable, "STREAM_CLOSED");
    let info = status.get_error_details().error_info().cloned().expect("ErrorInfo");
    assert_eq!(info.metadata["lastGeneration"], last.to_string());
    assert_eq!(info.metadata["taskId"], task.id);
}

/// A TCP relay in front of the server that counts the connections clients open and the ones
/// the server closes.
async fn relay(to: std::net::SocketAddr) -> (std::net::SocketAddr, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (opened, closed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (o, c) = (opened.clone(), closed.clone());
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            o.fetch_add(1, Ordering::SeqCst);
            let c = c.clone();
            tokio::spawn(async move {
                let mut server = TcpStream::connect(to).await.unwrap();
                let (mut cr, mut cw) = client.split();
                let (mut sr, mut sw) = server.split();
                // The server's side ending first is the server closing the connection.
                tokio::select! {
                    _ = tokio::io::copy(&mut sr, &mut cw) => { c.fetch_add(1, Ordering::SeqCst); }
                    _ = tokio::io::copy(&mut cr, &mut sw) => {}
                }
            });
        }
    });
    (addr, opened, closed)
}

#[tokio::test]
async fn max_connection_age_sends_goaway_and_a_tonic_client_moves_to_a_new_connection() {
    let server = TestServer::builder().max_connection_age(Duration::from_millis(500)).start().await;
    let (addr, opened, closed) = relay(server.addr).await;
    let channel = Endpoint::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();
    let mut grpc = A2aServiceClient::new(channel);

    // A stream in flight across the age finishes normally (GOAWAY, not a reset).
    let task = send_task(&mut grpc, send_returning_immediately("stream 10 100")).await;
    let stream = grpc
        .subscribe_to_task(SubscribeToTaskRequest { id: task.id.clone(), ..Default::default() })
        .await
        .unwrap();
    let items = collect(stream.into_inner()).await.expect("the stream survives the GOAWAY");
    assert_eq!(item_state(items.last().unwrap()), Some(TaskState::Completed));
    assert_eq!(opened.load(Ordering::SeqCst), 1, "one connection so far");

    // The server closed the aged connection once it was idle; the same client carries on over
    // a new one.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while closed.load(Ordering::SeqCst) == 0 {
        assert!(tokio::time::Instant::now() < deadline, "the server never closed the aged connection");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let got = grpc.get_task(GetTaskRequest { id: task.id.clone(), ..Default::default() }).await.unwrap();
    assert_eq!(state(&got.into_inner()), TaskState::Completed);
    assert_eq!(opened.load(Ordering::SeqCst), 2, "the next call went over a new connection");
}
