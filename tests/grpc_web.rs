//! grpc-web, as a browser reaches the A2A service through tonic-web: unary and server-streaming
//! calls over HTTP/1.1 whose frames are built and read by hand per the grpc-web wire format
//! (every frame is one flag byte, a 4-byte big-endian length and the payload; flag 0x00 carries
//! a protobuf message, flag 0x80 the trailers as `name:value\r\n` lines), the base64
//! `grpc-web-text` variant, errors with their `google.rpc.Status` details, and CORS.
mod common;

use std::collections::BTreeMap;
use std::pin::Pin;

use a2a_server::proto::send_message_response::Payload as Reply;
use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{
    GetTaskRequest, SendMessageResponse, StreamResponse, SubscribeToTaskRequest, Task, TaskState,
};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use common::*;
use futures::StreamExt;
use prost::Message as _;
use reqwest::header::HeaderMap;

const SERVICE: &str = "lf.a2a.v1.A2AService";
const WEB_PROTO: &str = "application/grpc-web+proto";
const WEB_TEXT: &str = "application/grpc-web-text";
const MESSAGE_FLAG: u8 = 0x00;
const TRAILER_FLAG: u8 = 0x80;
const ERROR_INFO: &str = "type.googleapis.com/google.rpc.ErrorInfo";
const ORIGIN: &str = "https://app.example";

/// One grpc-web frame of a response body.
#[derive(Debug, Clone, PartialEq)]
enum Frame {
    /// Flag 0x00: one protobuf message.
    Message(Vec<u8>),
    /// Flag 0x80: the trailers, names lowercased.
    Trailers(BTreeMap<String, String>),
}

/// A message frame: flag 0x00, the length as 4 big-endian bytes, the protobuf bytes.
fn message_frame(message: &impl prost::Message) -> Vec<u8> {
    let payload = message.encode_to_vec();
    let mut frame = Vec::with_capacity(5 + payload.len());
    frame.push(MESSAGE_FLAG);
    frame.extend_from_slice(&u32::try_from(payload.len()).expect("small message").to_be_bytes());
    frame.extend_from_slice(&payload);
    frame
}

/// Takes the first frame off `buffer` if it holds a complete one.
fn take_frame(buffer: &mut Vec<u8>) -> Option<Frame> {
    if buffer.len() < 5 {
        return None;
    }
    let length = u32::from_be_bytes(buffer[1..5].try_into().expect("4 bytes")) as usize;
    if buffer.len() < 5 + length {
        return None;
    }
    let frame: Vec<u8> = buffer.drain(..5 + length).collect();
    let payload = frame[5..].to_vec();
    Some(match frame[0] {
        MESSAGE_FLAG => Frame::Message(payload),
        TRAILER_FLAG => Frame::Trailers(parse_trailers(&payload)),
        flag => panic!("unexpected grpc-web frame flag {flag:#04x}"),
    })
}

/// A trailer frame's payload: HTTP/1-style `name:value` lines, each ended by CRLF.
fn parse_trailers(block: &[u8]) -> BTreeMap<String, String> {
    let text = std::str::from_utf8(block).expect("trailers are text");
    assert!(text.ends_with("\r\n"), "every trailer line ends with CRLF: {text:?}");
    text.split("\r\n")
        .filter(|line| !line.is_empty())
        .map(|line| {
            let (name, value) =
                line.split_once(':').unwrap_or_else(|| panic!("not a trailer line: {line:?}"));
            (name.to_ascii_lowercase(), value.trim_start().to_owned())
        })
        .collect()
}

/// A complete response body as frames: nothing left over, at most one trailer frame, and it
/// comes last.
fn frames(body: &[u8]) -> Vec<Frame> {
    let mut buffer = body.to_vec();
    let mut frames = Vec::new();
    while let Some(frame) = take_frame(&mut buffer) {
        frames.push(frame);
    }
    assert!(buffer.is_empty(), "{} bytes of an incomplete frame at the end of the body", buffer.len());
    let trailer_frames = frames.iter().filter(|f| matches!(f, Frame::Trailers(_))).count();
    assert!(trailer_frames <= 1, "one trailer frame at most: {frames:?}");
    if trailer_frames == 1 {
        assert!(
            matches!(frames.last(), Some(Frame::Trailers(_))),
            "the trailer frame comes last: {frames:?}"
        );
    }
    frames
}

/// The protobuf messages of the message frames, decoded as `T`.
fn messages<T: prost::Message + Default>(frames: &[Frame]) -> Vec<T> {
    frames
        .iter()
        .filter_map(|frame| match frame {
            Frame::Message(bytes) => Some(T::decode(bytes.as_slice()).expect("a valid protobuf message")),
            Frame::Trailers(_) => None,
        })
        .collect()
}

/// The call's final status: the trailer frame, or, for a trailers-only response (an error
/// before any message, which grpc-web allows), the response headers.
fn status_of(headers: &HeaderMap, frames: &[Frame]) -> BTreeMap<String, String> {
    match frames.last() {
        Some(Frame::Trailers(trailers)) => trailers.clone(),
        _ => {
            assert!(frames.is_empty(), "messages must be followed by a trailer frame: {frames:?}");
            headers
                .iter()
                .filter(|(name, _)| name.as_str().starts_with("grpc-"))
                .map(|(name, value)| (name.as_str().to_owned(), value.to_str().expect("ASCII").to_owned()))
                .collect()
        }
    }
}

/// Base64 that may come as several independently padded chunks (grpc-web-text servers encode
/// each write separately): each chunk ends after its padding.
fn decode_base64_chunks(text: &str) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let end = match rest.find('=') {
            Some(start) => start + rest[start..].bytes().take_while(|b| *b == b'=').count(),
            None => rest.len(),
        };
        bytes.extend(STANDARD.decode(&rest[..end]).unwrap_or_else(|e| panic!("not base64 ({e}): {rest:?}")));
        rest = &rest[end..];
    }
    bytes
}

/// Reads frames off a streaming response as they arrive.
struct FrameReader {
    body: Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buffer: Vec<u8>,
}

impl FrameReader {
    fn new(response: reqwest::Response) -> Self {
        Self { body: Box::pin(response.bytes_stream()), buffer: Vec::new() }
    }

    /// The next frame, or `None` once the body ended (which must be at a frame boundary).
    async fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(frame) = take_frame(&mut self.buffer) {
                return Some(frame);
            }
            match tokio::time::timeout(PATIENCE, self.body.next()).await.expect("grpc-web body stalled") {
                Some(chunk) => self.buffer.extend_from_slice(&chunk.expect("grpc-web body")),
                None => {
                    assert!(self.buffer.is_empty(), "the body ended inside a frame");
                    return None;
                }
            }
        }
    }
}

/// One grpc-web call over HTTP/1.1 (reqwest speaks HTTP/1.1 to an `http://` URL).
async fn call(
    http: &reqwest::Client,
    server: &TestServer,
    method: &str,
    content_type: &str,
    body: Vec<u8>,
) -> reqwest::Response {
    let response = http
        .post(format!("{}/{SERVICE}/{method}", server.url()))
        .header("content-type", content_type)
        .header("accept", content_type)
        .header("x-grpc-web", "1")
        .header("x-user-agent", "grpc-web-javascript/0.1")
        .body(body)
        .send()
        .await
        .expect("grpc-web request");
    assert_eq!(response.version(), reqwest::Version::HTTP_11, "grpc-web over HTTP/1.1");
    assert_eq!(response.status(), 200, "grpc-web answers with HTTP 200 and puts the outcome in grpc-status");
    response
}

fn content_type(response: &reqwest::Response) -> String {
    response.headers().get("content-type").expect("a content type").to_str().unwrap().to_owned()
}

fn the_task(reply: SendMessageResponse) -> Task {
    match reply.payload {
        Some(Reply::Task(task)) => task,
        other => panic!("expected a task, got {other:?}"),
    }
}

#[tokio::test]
async fn unary_send_message_round_trip_over_http1() {
    let server = TestServer::start().await;
    let http = reqwest::Client::new();
    let response =
        call(&http, &server, "SendMessage", WEB_PROTO, message_frame(&send("hello grpc-web"))).await;
    assert_eq!(content_type(&response), WEB_PROTO);
    let headers = response.headers().clone();
    let body = response.bytes().await.expect("body");
    let frames = frames(&body);
    assert_eq!(frames.len(), 2, "one message, then the trailers: {frames:?}");
    assert_eq!(body[0], MESSAGE_FLAG);

    let replies = messages::<SendMessageResponse>(&frames);
    let task = the_task(replies.into_iter().next().unwrap());
    assert_eq!(state(&task), TaskState::Completed);
    assert_eq!(artifact_texts(&task), ["hello grpc-web"]);
    assert_eq!(task.history.len(), 1);
    assert_eq!(texts(&task.history[0].parts), ["hello grpc-web"]);

    let trailers = status_of(&headers, &frames);
    assert!(matches!(frames.last(), Some(Frame::Trailers(_))), "a success ends with a trailer frame");
    assert_eq!(trailers.get("grpc-status").map(String::as_str), Some("0"), "{trailers:?}");

    // The same service as plain gRPC: the task is there.
    let read = server
        .client()
        .await
        .get_task(GetTaskRequest { id: task.id.clone(), ..Default::default() })
        .await
        .expect("the task over gRPC")
        .into_inner();
    assert_eq!(read.id, task.id);
    assert_eq!(state(&read), TaskState::Completed);
}

#[tokio::test]
async fn server_streaming_send_decodes_every_frame() {
    let server = TestServer::start().await;
    let http = reqwest::Client::new();
    let response =
        call(&http, &server, "SendStreamingMessage", WEB_PROTO, message_frame(&send("stream 3 0"))).await;
    assert_eq!(content_type(&response), WEB_PROTO);
    let mut reader = FrameReader::new(response);
    let mut items = Vec::new();
    let trailers = loop {
        match reader.next().await.expect("the stream ends with a trailer frame") {
            Frame::Message(bytes) => {
                items.push(StreamResponse::decode(bytes.as_slice()).expect("StreamResponse"))
            }
            Frame::Trailers(trailers) => break trailers,
        }
    };
    assert_eq!(reader.next().await, None, "nothing after the trailer frame");
    assert_eq!(trailers.get("grpc-status").map(String::as_str), Some("0"), "{trailers:?}");

    assert_eq!(items.len(), 6, "Task, WORKING, three chunks, COMPLETED: {items:#?}");
    let Some(Payload::Task(task)) = &items[0].payload else { panic!("first a Task: {:?}", items[0]) };
    assert_eq!(state(task), TaskState::Submitted);
    assert_eq!(item_state(&items[1]), Some(TaskState::Working));
    let chunks: Vec<(String, bool, bool)> = items[2..5]
        .iter()
        .map(|item| match &item.payload {
            Some(Payload::ArtifactUpdate(update)) => {
                assert_eq!(update.task_id, task.id);
                let texts = texts(&update.artifact.as_ref().expect("artifact").parts);
                (texts.join(""), update.append, update.last_chunk)
            }
            other => panic!("expected an artifact update, got {other:?}"),
        })
        .collect();
    assert_eq!(
        chunks,
        [("chunk 0".into(), false, false), ("chunk 1".into(), true, false), ("chunk 2".into(), true, true)]
    );
    assert_eq!(item_state(&items[5]), Some(TaskState::Completed));
}

#[tokio::test]
async fn streamed_frames_arrive_as_events_happen() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let waiting = the_task(client.send_message(send("input")).await.expect("send").into_inner());
    assert_eq!(state(&waiting), TaskState::InputRequired);

    let http = reqwest::Client::new();
    let request = SubscribeToTaskRequest { id: waiting.id.clone(), ..Default::default() };
    let response = call(&http, &server, "SubscribeToTask", WEB_PROTO, message_frame(&request)).await;
    let mut reader = FrameReader::new(response);
    // The task is idle: the snapshot can only arrive if frames are not held back until the end.
    let Some(Frame::Message(first)) = reader.next().await else { panic!("expected the snapshot frame") };
    let snapshot = StreamResponse::decode(first.as_slice()).unwrap();
    assert!(
        matches!(&snapshot.payload, Some(Payload::Task(t)) if t.id == waiting.id && state(t) == TaskState::InputRequired)
    );

    let done = the_task(client.send_message(follow_up(&waiting, "green")).await.unwrap().into_inner());
    assert_eq!(state(&done), TaskState::Completed);
    let mut rest = Vec::new();
    let trailers = loop {
        match reader.next().await.expect("a trailer frame at the end") {
            Frame::Message(bytes) => rest.push(StreamResponse::decode(bytes.as_slice()).unwrap()),
            Frame::Trailers(trailers) => break trailers,
        }
    };
    assert_eq!(trailers.get("grpc-status").map(String::as_str), Some("0"));
    assert_eq!(rest.iter().flat_map(chunk_texts).collect::<Vec<_>>(), ["green"]);
    assert_eq!(item_state(rest.last().unwrap()), Some(TaskState::Completed));
}

/// The status details of an error call, decoded from `grpc-status-details-bin`.
fn status_details(status: &BTreeMap<String, String>) -> tonic_types::Status {
    let encoded = status.get("grpc-status-details-bin").unwrap_or_else(|| panic!("no details in {status:?}"));
    // Binary metadata is base64, sent without padding (decoders must accept both).
    let bytes = STANDARD_NO_PAD.decode(encoded.trim_end_matches('=')).expect("base64");
    tonic_types::Status::decode(bytes.as_slice()).expect("a google.rpc.Status")
}

fn error_info(details: &tonic_types::Status) -> tonic_types::pb::ErrorInfo {
    let any = details
        .details
        .iter()
        .find(|any| any.type_url == ERROR_INFO)
        .unwrap_or_else(|| panic!("no ErrorInfo among {details:?}"));
    tonic_types::pb::ErrorInfo::decode(any.value.as_slice()).expect("an ErrorInfo")
}

#[tokio::test]
async fn errors_carry_grpc_status_and_decodable_details() {
    let server = TestServer::start().await;
    let http = reqwest::Client::new();
    for method in ["GetTask", "SubscribeToTask"] {
        // GetTaskRequest and SubscribeToTaskRequest share their wire shape (tenant 1, id 2).
        let request = GetTaskRequest { id: "no-such-task".into(), ..Default::default() };
        let response = call(&http, &server, method, WEB_PROTO, message_frame(&request)).await;
        let headers = response.headers().clone();
        let frames = frames(&response.bytes().await.unwrap());
        assert!(messages::<StreamResponse>(&frames).is_empty(), "{method}: no message on an error");
        let status = status_of(&headers, &frames);
        assert_eq!(
            status.get("grpc-status").map(String::as_str),
            Some("5"),
            "{method}: NOT_FOUND, {status:?}"
        );
        let message = percent_encoding::percent_decode_str(status.get("grpc-message").expect("grpc-message"))
            .decode_utf8()
            .expect("UTF-8")
            .into_owned();
        assert!(message.contains("no-such-task"), "{method}: {message}");

        let details = status_details(&status);
        assert_eq!(details.code, 5, "{method}: the details repeat the code");
        assert_eq!(details.message, message, "{method}: and the message");
        let info = error_info(&details);
        assert_eq!(info.reason, "TASK_NOT_FOUND", "{method}");
        assert_eq!(info.domain, "a2a-protocol.org", "{method}");
        assert_eq!(info.metadata.get("taskId").map(String::as_str), Some("no-such-task"), "{method}");
    }

    // A version this server does not speak: FAILED_PRECONDITION with VERSION_NOT_SUPPORTED.
    let response = http
        .post(format!("{}/{SERVICE}/SendMessage", server.url()))
        .header("content-type", WEB_PROTO)
        .header("x-grpc-web", "1")
        .header("a2a-version", "99.0")
        .body(message_frame(&send("hi")))
        .send()
        .await
        .unwrap();
    let headers = response.headers().clone();
    let frames = frames(&response.bytes().await.unwrap());
    let status = status_of(&headers, &frames);
    assert_eq!(status.get("grpc-status").map(String::as_str), Some("9"), "{status:?}");
    assert_eq!(error_info(&status_details(&status)).reason, "VERSION_NOT_SUPPORTED");
}

#[tokio::test]
async fn grpc_web_text_round_trip() {
    let server = TestServer::start().await;
    let http = reqwest::Client::new();
    let body = STANDARD.encode(message_frame(&send("hello text")));
    let response = call(&http, &server, "SendMessage", WEB_TEXT, body.into_bytes()).await;
    assert!(content_type(&response).starts_with(WEB_TEXT), "{}", content_type(&response));
    let headers = response.headers().clone();
    let text = response.text().await.expect("a text body");
    assert!(
        text.bytes().all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b)),
        "the body is base64 only: {text:?}"
    );
    let frames = frames(&decode_base64_chunks(&text));
    let replies = messages::<SendMessageResponse>(&frames);
    assert_eq!(replies.len(), 1, "{frames:?}");
    let task = the_task(replies.into_iter().next().unwrap());
    assert_eq!(state(&task), TaskState::Completed);
    assert_eq!(artifact_texts(&task), ["hello text"]);
    let status = status_of(&headers, &frames);
    assert!(matches!(frames.last(), Some(Frame::Trailers(_))));
    assert_eq!(status.get("grpc-status").map(String::as_str), Some("0"), "{status:?}");
}

fn header<'a>(response: &'a reqwest::Response, name: &str) -> Option<&'a str> {
    response.headers().get(name).map(|v| v.to_str().expect("ASCII header"))
}

/// The comma-separated items of a header, lowercased.
fn header_items(response: &reqwest::Response, name: &str) -> Vec<String> {
    response
        .headers()
        .get_all(name)
        .iter()
        .flat_map(|v| v.to_str().unwrap().split(','))
        .map(|item| item.trim().to_ascii_lowercase())
        .filter(|item| !item.is_empty())
        .collect()
}

async fn preflight(http: &reqwest::Client, url: &str, origin: &str) -> reqwest::Response {
    http.request(reqwest::Method::OPTIONS, url)
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type,x-grpc-web,a2a-version")
        .send()
        .await
        .expect("preflight")
}

#[tokio::test]
async fn cors_preflight_allows_the_configured_origin() {
    let server = TestServer::builder().cors([ORIGIN]).start().await;
    let http = reqwest::Client::new();
    // grpc-web and JSON-RPC alike.
    for url in [format!("{}/{SERVICE}/SendMessage", server.url()), format!("{}/", server.url())] {
        let response = preflight(&http, &url, ORIGIN).await;
        assert!(matches!(response.status().as_u16(), 200 | 204), "{url}: {}", response.status());
        assert_eq!(header(&response, "access-control-allow-origin"), Some(ORIGIN), "{url}");
        let methods = header_items(&response, "access-control-allow-methods");
        assert!(methods.contains(&"post".to_owned()), "{url}: {methods:?}");
        let allowed = header_items(&response, "access-control-allow-headers");
        for wanted in ["content-type", "x-grpc-web", "a2a-version"] {
            assert!(allowed.contains(&wanted.to_owned()), "{url}: {wanted} not in {allowed:?}");
        }
        assert!(header(&response, "access-control-max-age").is_some(), "{url}: preflights are cacheable");
        assert!(header_items(&response, "vary").iter().any(|v| v == "origin"), "{url}: Vary: Origin");
    }

    // Another origin gets no permission.
    let response =
        preflight(&http, &format!("{}/{SERVICE}/SendMessage", server.url()), "https://evil.example").await;
    assert_eq!(header(&response, "access-control-allow-origin"), None);

    // The call itself: allowed, and the status headers are readable by the page's script.
    let response = http
        .post(format!("{}/{SERVICE}/GetTask", server.url()))
        .header("origin", ORIGIN)
        .header("content-type", WEB_PROTO)
        .header("x-grpc-web", "1")
        .body(message_frame(&GetTaskRequest { id: "no-such-task".into(), ..Default::default() }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "access-control-allow-origin"), Some(ORIGIN));
    let exposed = header_items(&response, "access-control-expose-headers");
    for wanted in ["grpc-status", "grpc-message", "grpc-status-details-bin"] {
        assert!(exposed.contains(&wanted.to_owned()), "{wanted} not exposed: {exposed:?}");
    }
    let headers = response.headers().clone();
    let frames = frames(&response.bytes().await.unwrap());
    assert_eq!(status_of(&headers, &frames).get("grpc-status").map(String::as_str), Some("5"));
}

#[tokio::test]
async fn without_cors_configured_no_origin_is_allowed() {
    let server = TestServer::start().await;
    let http = reqwest::Client::new();
    for url in [format!("{}/{SERVICE}/SendMessage", server.url()), format!("{}/", server.url())] {
        let response = preflight(&http, &url, ORIGIN).await;
        assert_eq!(header(&response, "access-control-allow-origin"), None, "{url}: {:?}", response.headers());
        assert_eq!(header(&response, "access-control-allow-methods"), None, "{url}");
    }
    // A cross-origin call still works for non-browser clients, without CORS headers.
    let response = http
        .post(format!("{}/{SERVICE}/SendMessage", server.url()))
        .header("origin", ORIGIN)
        .header("content-type", WEB_PROTO)
        .header("x-grpc-web", "1")
        .body(message_frame(&send("no cors")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "access-control-allow-origin"), None);
    let headers = response.headers().clone();
    let frames = frames(&response.bytes().await.unwrap());
    assert_eq!(status_of(&headers, &frames).get("grpc-status").map(String::as_str), Some("0"));
    let task = the_task(messages::<SendMessageResponse>(&frames).into_iter().next().expect("a reply"));
    assert_eq!(artifact_texts(&task), ["no cors"]);
}
