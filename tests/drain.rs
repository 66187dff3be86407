//! What a draining server does with the calls that still reach it, over real sockets: nothing
//! a client (a load balancer) has already sent is refused or cut. A call on an open HTTP/2
//! connection after SIGTERM is served; an HTTP/1.1 request on a kept-alive connection gets
//! its answer with `Connection: close`; connections waiting in the listen backlog when the
//! listener stops are accepted and served, not reset; and in a fleet, a task that comes to wait
//! for input during the drain hibernates to the store instead of being cancelled.
mod common;

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use a2a_server::proto::{SendMessageResponse, TaskState, send_message_response};
use a2a_server::server::Server;
use common::fleet::{Fleet, eventually};
use common::process::ServerProcess;
use common::raw_http::{RawHttp, head};
use common::redis::RedisServer;
use common::*;
use prost::Message as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Waits until the server refuses new connections: its drain has closed the listener.
async fn wait_until_refused(addr: SocketAddr) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while tokio::net::TcpStream::connect(addr).await.is_ok() {
        assert!(tokio::time::Instant::now() < deadline, "the listener never closed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// HTTP/2 by hand, as far as one gRPC call needs, so that the test decides exactly when it
/// reads and writes: a load balancer writes a request on a connection it holds *before* it
/// reads what the server sent meanwhile (a GOAWAY, a PING), and no HTTP/2 library lets a test
/// do that (they answer a PING before sending queued streams).
struct RawH2 {
    stream: tokio::net::TcpStream,
    buffer: Vec<u8>,
}

/// One frame: its type, flags, stream and payload.
type Frame = (u8, u8, u32, Vec<u8>);

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const END_STREAM: u8 = 1;
const ACK: u8 = 1;

impl RawH2 {
    /// Connects, exchanges the preface and SETTINGS.
    async fn connect(addr: SocketAddr) -> Self {
        let mut h2 = Self { stream: tokio::net::TcpStream::connect(addr).await.unwrap(), buffer: Vec::new() };
        h2.stream.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await.unwrap();
        h2.write(SETTINGS, 0, 0, &[]).await;
        loop {
            let (kind, flags, _, _) = h2.frame().await.expect("the server's SETTINGS");
            if kind == SETTINGS && flags & ACK == 0 {
                break h2.write(SETTINGS, ACK, 0, &[]).await;
            }
        }
        h2
    }

    async fn write(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        let mut frame = u32::try_from(payload.len()).unwrap().to_be_bytes()[1..].to_vec();
        frame.extend_from_slice(&[kind, flags]);
        frame.extend_from_slice(&stream.to_be_bytes());
        frame.extend_from_slice(payload);
        self.stream.write_all(&frame).await.unwrap();
    }

    /// The next frame, or `None` at the end of the connection.
    async fn frame(&mut self) -> Option<Frame> {
        loop {
            if self.buffer.len() >= 9 {
                let length = u32::from_be_bytes([0, self.buffer[0], self.buffer[1], self.buffer[2]]) as usize;
                if self.buffer.len() >= 9 + length {
                    let frame: Vec<u8> = self.buffer.drain(..9 + length).collect();
                    let stream = u32::from_be_bytes(frame[5..9].try_into().unwrap()) & 0x7fff_ffff;
                    return Some((frame[3], frame[4], stream, frame[9..].to_vec()));
                }
            }
            let mut chunk = [0u8; 16 * 1024];
            let n = tokio::time::timeout(PATIENCE, self.stream.read(&mut chunk))
                .await
                .expect("the server writes");
            match n {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buffer.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Writes a gRPC SendMessage of `text` on `stream`: HEADERS, then DATA ending the stream.
    async fn send_call(&mut self, stream: u32, text: &str) {
        // HPACK: indexed :method POST (3) and :scheme http (6); :path (4), :authority (1) and
        // content-type (31) with indexed names; te as a new name; nothing Huffman-coded.
        let mut block = vec![0x83, 0x86];
        let literal = |block: &mut Vec<u8>, value: &str| {
            block.push(u8::try_from(value.len()).unwrap());
            block.extend_from_slice(value.as_bytes());
        };
        block.push(0x04);
        literal(&mut block, "/lf.a2a.v1.A2AService/SendMessage");
        block.push(0x01);
        literal(&mut block, "localhost");
        block.extend_from_slice(&[0x0f, 0x10]);
        literal(&mut block, "application/grpc");
        block.push(0x00);
        literal(&mut block, "te");
        literal(&mut block, "trailers");
        self.write(HEADERS, 0x4, stream, &block).await;
        let message = send(text).encode_to_vec();
        let mut body = vec![0u8];
        body.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
        body.extend_from_slice(&message);
        self.write(DATA, END_STREAM, stream, &body).await;
    }

    /// Reads until the answer on `stream` arrives, acknowledging PINGs as any client does; the
    /// decoded answer, or what came instead.
    async fn answer(&mut self, stream: u32) -> Result<SendMessageResponse, String> {
        let mut body = Vec::new();
        loop {
            match self.frame().await {
                None => return Err("the connection closed before the answer".into()),
                Some((PING, flags, 0, payload)) if flags & ACK == 0 => {
                    self.write(PING, ACK, 0, &payload).await
                }
                Some((GOAWAY, _, _, payload)) => {
                    let last = u32::from_be_bytes(payload[..4].try_into().unwrap()) & 0x7fff_ffff;
                    if last < stream {
                        return Err(format!("GOAWAY before the stream: last stream {last}"));
                    }
                }
                Some((RST_STREAM, _, id, _)) if id == stream => return Err("the stream was reset".into()),
                Some((DATA, _, id, payload)) if id == stream => {
                    body.extend_from_slice(&payload);
                    if body.len() >= 5
                        && body.len() >= 5 + u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize
                    {
                        return SendMessageResponse::decode(&body[5..]).map_err(|e| e.to_string());
                    }
                }
                Some((HEADERS, flags, id, _)) if id == stream && flags & END_STREAM != 0 => {
                    return Err("a trailers-only answer: the call was refused".into());
                }
                Some(_) => {}
            }
        }
    }
}

fn completed(answer: Result<SendMessageResponse, String>) {
    match answer.expect("the call is served").payload {
        Some(send_message_response::Payload::Task(task)) => assert_eq!(state(&task), TaskState::Completed),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_call_on_an_open_http2_connection_after_sigterm_is_served_not_refused() {
    let mut process = ServerProcess::start(&["--listen", "127.0.0.1:0"]);
    let addr: SocketAddr = process.addr.parse().unwrap();
    let mut connection = RawH2::connect(addr).await;
    connection.send_call(1, "hello").await;
    completed(connection.answer(1).await);

    // The server drains, and has told this connection so (GOAWAY, PING) by the time its
    // listener is closed; the request is written before any of that is read, as nginx writes
    // on a kept-alive upstream connection it has just taken from its cache.
    process.terminate();
    wait_until_refused(addr).await;
    connection.send_call(3, "hello again").await;
    completed(connection.answer(3).await);
    assert_eq!(process.exit_code().await, 0);
}

#[tokio::test]
async fn a_request_on_a_kept_alive_http1_connection_during_the_drain_is_answered_with_connection_close() {
    let mut process = ServerProcess::start(&["--listen", "127.0.0.1:0"]);
    let addr: SocketAddr = process.addr.parse().unwrap();
    let body = serde_json::json!({"message": json_message("hello")}).to_string();
    let request = |body: &str| {
        let head = head(
            "POST",
            "/message:send",
            &["Content-Type: application/json", &format!("Content-Length: {}", body.len())],
        );
        format!("{head}{body}")
    };
    let mut connection = RawHttp::connect(addr).await;
    connection.send(request(&body).as_bytes()).await;
    let kept = connection.response().await;
    assert_eq!(kept.status, 200, "{kept:?}");
    assert_eq!(kept.header("connection"), None, "kept alive before the drain");

    process.terminate();
    wait_until_refused(addr).await;
    let body = serde_json::json!({"message": json_message("hello again")}).to_string();
    connection.send(request(&body).as_bytes()).await;
    let answer = connection.response().await;
    assert_eq!(answer.status, 200, "served, not refused: {answer:?}");
    assert_eq!(answer.json()["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{answer:?}");
    assert_eq!(answer.header("connection"), Some("close"), "{answer:?}");
    assert!(connection.closes().await, "the connection closes after the answer");
    assert_eq!(process.exit_code().await, 0);
}

#[tokio::test]
async fn connections_waiting_in_the_backlog_when_the_listener_stops_are_served_not_reset() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let running = Server::default().start(listener).await.unwrap();
    // Let the accept loop start waiting.
    tokio::time::sleep(Duration::from_millis(50)).await;

    // This test runs on a single-threaded runtime: while it connects and writes with blocking
    // calls, the accept loop cannot run, so every connection waits in the kernel's backlog,
    // its request sent, when the server is told to stop.
    let card = head("GET", "/.well-known/agent-card.json", &[]);
    let waiting: Vec<std::net::TcpStream> = (0..8)
        .map(|_| {
            let mut stream = std::net::TcpStream::connect(addr).unwrap();
            stream.write_all(card.as_bytes()).unwrap();
            stream
        })
        .collect();
    running.stop();

    for stream in waiting {
        stream.set_nonblocking(true).unwrap();
        let mut stream = tokio::net::TcpStream::from_std(stream).unwrap();
        let mut answer = Vec::new();
        tokio::time::timeout(PATIENCE, stream.read_to_end(&mut answer))
            .await
            .expect("the server answers and closes")
            .expect("an answer, not a reset");
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.to_ascii_lowercase().contains("connection: close"), "{answer}");
    }
    wait_until_refused(addr).await;
    running.wait().await.unwrap();
}

#[tokio::test]
async fn in_a_fleet_a_task_that_comes_to_wait_during_the_drain_hibernates_instead_of_being_cancelled() {
    let Some(redis) = RedisServer::start() else { return };
    // A long delay keeps the listener open after SIGTERM, so a new call reaches the draining
    // replica, as calls on a load balancer's open connections do.
    let fleet = Fleet::start(2, &redis.url(), &["--drain-delay-ms", "60000", "--drain-timeout-secs", "60"]);
    let mut a = fleet[0].client().await;
    send_task(&mut a, send("hello")).await;

    fleet[0].terminate();
    eventually("A is draining", PATIENCE, || async { fleet[0].readyz().await == 503 }).await;
    let waiting = send_task(&mut a, send("input")).await;
    assert_eq!(state(&waiting), TaskState::InputRequired, "the call is served during the drain");
    // Hibernated, not held until the drain timeout: B takes the follow-up.
    eventually("A hibernates the task and gives up its lease", PATIENCE, || async {
        fleet[0].metric("a2a_tasks_hibernated_total").await >= 1.0
    })
    .await;
    let mut b = fleet[1].client().await;
    let done = send_task(&mut b, follow_up(&waiting, "done")).await;
    assert_eq!(state(&done), TaskState::Completed);
    drop(a);
}
