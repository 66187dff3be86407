//! How the server reads a unary call's request framing, from a raw HTTP/2 client: a message
//! split across data frames, a request stream left open after its message, and every way a
//! body can fail to hold one message (empty, cut short, over the limit, compressed) answered
//! with the status a gRPC server gives.
mod common;

use a2a_server::proto::{SendMessageResponse, TaskState, send_message_response::Payload};
use bytes::Bytes;
use common::*;
use prost::Message as _;
use tokio::net::TcpStream;

/// What the server answered one call: its status code and message, and the messages' bytes.
#[derive(Debug)]
struct Answered {
    status: String,
    message: String,
    accept_encoding: Option<String>,
    body: Vec<u8>,
}

/// A SendMessage call whose body is `frames` (the last one ends the stream unless `keep_open`),
/// with `headers` added.
async fn call(
    server: &TestServer,
    headers: &[(&str, &str)],
    frames: Vec<Vec<u8>>,
    keep_open: bool,
) -> Answered {
    let tcp = TcpStream::connect(server.addr).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.expect("an HTTP/2 handshake");
    tokio::spawn(connection);
    let mut client = client.ready().await.unwrap();
    let mut request = axum::http::Request::post(format!("{}/lf.a2a.v1.A2AService/SendMessage", server.url()))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let (response, mut body) = client.send_request(request.body(()).unwrap(), frames.is_empty()).unwrap();
    let count = frames.len();
    for (i, frame) in frames.into_iter().enumerate() {
        body.send_data(Bytes::from(frame), i + 1 == count && !keep_open).unwrap();
    }
    let response = tokio::time::timeout(PATIENCE, response).await.expect("an answer").unwrap();
    let header =
        |name: &str, map: &axum::http::HeaderMap| map.get(name).map(|v| v.to_str().unwrap().to_owned());
    let head = response.headers().clone();
    let mut received = response.into_body();
    let mut bytes = Vec::new();
    while let Some(chunk) = tokio::time::timeout(PATIENCE, received.data()).await.expect("the body") {
        bytes.extend_from_slice(&chunk.unwrap());
    }
    let trailers = received.trailers().await.unwrap();
    // A trailers-only answer carries the status in its headers.
    let status_in = trailers.as_ref().unwrap_or(&head);
    drop(body);
    Answered {
        status: header("grpc-status", status_in).expect("a grpc-status"),
        // Percent-encoded on the wire; these messages have only spaces to decode.
        message: header("grpc-message", status_in).unwrap_or_default().replace("%20", " "),
        accept_encoding: header("grpc-accept-encoding", &head),
        body: bytes,
    }
}

/// `message` behind its gRPC length prefix.
fn framed(flag: u8, message: &[u8]) -> Vec<u8> {
    let mut bytes = vec![flag];
    bytes.extend_from_slice(&(message.len() as u32).to_be_bytes());
    bytes.extend_from_slice(message);
    bytes
}

/// The task a successful SendMessage answered with.
fn answered_task(answered: &Answered) -> a2a_server::proto::Task {
    assert_eq!(answered.status, "0", "{answered:?}");
    let (header, message) = answered.body.split_at(5);
    assert_eq!(header[0], 0, "not compressed");
    assert_eq!(u32::from_be_bytes(header[1..5].try_into().unwrap()) as usize, message.len());
    match SendMessageResponse::decode(message).unwrap().payload {
        Some(Payload::Task(task)) => task,
        other => panic!("a task, not {other:?}"),
    }
}

#[tokio::test]
async fn a_message_split_across_frames_or_with_the_stream_left_open_is_answered() {
    let server = TestServer::start().await;
    let request = framed(0, &send("split").encode_to_vec());
    // Cut inside the prefix, then inside the message.
    let frames = vec![request[..3].to_vec(), request[3..20].to_vec(), request[20..].to_vec()];
    let task = answered_task(&call(&server, &[], frames, false).await);
    assert_eq!(state(&task), TaskState::Completed);
    assert_eq!(artifact_texts(&task), ["split"]);

    // The request stream stays open after the message: the answer does not wait for its end.
    let request = framed(0, &send("open").encode_to_vec());
    let task = answered_task(&call(&server, &[("grpc-encoding", "identity")], vec![request], true).await);
    assert_eq!(artifact_texts(&task), ["open"]);
}

#[tokio::test]
async fn a_body_without_one_plain_message_gets_the_status_a_grpc_server_gives() {
    let server = TestServer::start().await;
    let request = framed(0, &send("x").encode_to_vec());

    let empty = call(&server, &[], Vec::new(), false).await;
    assert_eq!((empty.status.as_str(), empty.message.as_str()), ("13", "Missing request message."));

    let cut = call(&server, &[], vec![request[..request.len() - 1].to_vec()], false).await;
    assert_eq!((cut.status.as_str(), cut.message.as_str()), ("13", "Unexpected EOF decoding stream."));

    let flagged = call(&server, &[], vec![framed(1, &send("x").encode_to_vec())], false).await;
    assert_eq!(flagged.status, "13", "a compressed flag without an encoding: {flagged:?}");

    let gzip = call(&server, &[("grpc-encoding", "gzip")], vec![request.clone()], false).await;
    assert_eq!(gzip.status, "12", "{gzip:?}");
    assert_eq!(gzip.accept_encoding.as_deref(), Some("identity"));

    let malformed = call(&server, &[], vec![framed(0, &[0xff, 0xff])], false).await;
    assert_eq!(malformed.status, "3", "{malformed:?}");

    // Announced over the limit: refused before a byte of it is held, as the limit error.
    let mut huge = vec![0];
    huge.extend_from_slice(&(64u32 << 20).to_be_bytes());
    let over = call(&server, &[], vec![huge], true).await;
    assert_eq!(over.status, "8", "RESOURCE_EXHAUSTED: {over:?}");
    assert!(over.message.contains("the limit is 4194304 bytes"), "{over:?}");
}
