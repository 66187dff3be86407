//! The one request size limit, `--max-request-bytes`, on every binding (gRPC, grpc-web,
//! JSON-RPC, HTTP+JSON, the v0.3 shims), each refusal in its binding's form with the same
//! ErrorInfo (`PAYLOAD_TOO_LARGE`, metadata `limit`); the memory-amplification request of issue 12
//! refused by its size; an HTTP/1.1 body over the limit read to its end before the answer, so
//! the client sees the error and not a reset; and HTTP/1.1 framing that could smuggle a request.
mod common;

use a2a_server::proto::{ListTasksRequest, Part, part};
use a2a_server::proto_v03 as v03;
use a2a_server::proto_v03::a2a_service_client::A2aServiceClient as V03Client;
use a2a_server::transport::http::HttpSettings;
use common::raw_http::{RawHttp, chunked, head};
use common::*;
use prost::Message as _;
use serde_json::{Value, json};
use tonic_types::StatusExt;

/// The limit of most tests here: small, so that bodies over it are quick to send.
const LIMIT: usize = 64 * 1024;
const JSON: &str = "Content-Type: application/json";
const GRPC_WEB: &str = "application/grpc-web+proto";

async fn server_with_limit(limit: usize) -> TestServer {
    TestServer::builder().http(HttpSettings { max_request_bytes: limit, ..Default::default() }).start().await
}

fn text_of(bytes: usize) -> String {
    "x".repeat(bytes)
}

/// The limit's ErrorInfo, first in a JSON `details` or `data` array.
fn assert_limit_info(details: &Value) {
    assert_eq!(details[0]["@type"], "type.googleapis.com/google.rpc.ErrorInfo", "{details}");
    assert_eq!(details[0]["reason"], "PAYLOAD_TOO_LARGE", "{details}");
    assert_eq!(details[0]["domain"], "a2a-server", "{details}");
    assert_eq!(details[0]["metadata"]["limit"], "max-request-bytes", "{details}");
}

/// A JSON-RPC answer refusing the size: the binding's error object, id null (the id was never
/// read), ErrorInfo in `data`.
fn assert_jsonrpc_limit(answer: &Value) {
    assert_rpc_error(answer, -31413, "PAYLOAD_TOO_LARGE");
    assert_eq!(answer["id"], Value::Null, "{answer}");
    assert_limit_info(&answer["error"]["data"]);
}

/// An HTTP+JSON answer refusing the size: 413 with `google.rpc.Status`.
fn assert_rest_limit(status: u16, body: &Value) {
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["error"]["code"], 413, "{body}");
    assert_eq!(body["error"]["status"], "RESOURCE_EXHAUSTED", "{body}");
    assert_limit_info(&body["error"]["details"]);
}

fn assert_grpc_limit(status: &tonic::Status) {
    assert_a2a_error(status, tonic::Code::ResourceExhausted, "PAYLOAD_TOO_LARGE");
    let info = status.get_error_details().error_info().cloned().expect("ErrorInfo");
    assert_eq!(info.metadata["limit"], "max-request-bytes", "{status:?}");
}

/// POSTs `body`; the status and the JSON answer.
async fn post_json(url: String, body: &Value) -> (u16, Value) {
    let response = reqwest::Client::new().post(url).json(body).send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

/// A grpc-web message frame: flag 0, 4-byte big-endian length, the protobuf bytes.
fn grpc_web_frame(message: &impl prost::Message) -> Vec<u8> {
    let payload = message.encode_to_vec();
    let mut frame = vec![0];
    frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    frame.extend_from_slice(&payload);
    frame
}

fn v03_message(parts: Vec<v03::Part>) -> v03::SendMessageRequest {
    let message = v03::Message {
        message_id: uuid::Uuid::new_v4().to_string(),
        role: v03::Role::User as i32,
        content: parts,
        ..Default::default()
    };
    v03::SendMessageRequest { request: Some(message), ..Default::default() }
}

fn v03_text(text: &str) -> v03::Part {
    v03::Part { part: Some(v03::part::Part::Text(text.into())), metadata: None }
}

#[tokio::test]
async fn json_bodies_over_the_limit_get_their_bindings_error_sized_or_chunked() {
    let server = server_with_limit(LIMIT).await;
    let client = reqwest::Client::new();
    let big = text_of(LIMIT);
    let bodies = [
        ("/", rpc(1, "SendMessage", json!({"message": json_message(&big)}))),
        ("/message:send", json!({"message": json_message(&big)})),
        (
            "/v1/message:send",
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "content": [{"text": big}]}}),
        ),
    ];
    for chunked in [false, true] {
        for (path, body) in &bodies {
            let text = body.to_string();
            let body = if chunked {
                // No Content-Length: the body crosses the limit midway.
                let pieces: Vec<Result<Vec<u8>, std::io::Error>> =
                    text.as_bytes().chunks(8192).map(|c| Ok(c.to_vec())).collect();
                reqwest::Body::wrap_stream(futures::stream::iter(pieces))
            } else {
                reqwest::Body::from(text)
            };
            let url = format!("{}{path}", server.url());
            let response =
                client.post(url).header("content-type", "application/json").body(body).send().await.unwrap();
            let status = response.status().as_u16();
            assert!(response.headers()["content-type"].to_str().unwrap().contains("json"));
            let answer: Value = response.json().await.unwrap();
            match *path {
                // JSON-RPC answers every error with HTTP 200.
                "/" => {
                    assert_eq!(status, 200);
                    assert_jsonrpc_limit(&answer);
                }
                "/message:send" => assert_rest_limit(status, &answer),
                // v0.3 REST: the status, and the JSON-RPC code v0.3 SDKs read.
                _ => {
                    assert_eq!((status, &answer["code"]), (413, &json!(-31413)), "{answer}");
                    assert_eq!(answer["data"]["reason"], "PAYLOAD_TOO_LARGE", "{answer}");
                }
            }
        }
    }
    // Just under the limit is served.
    let fits = rpc(2, "SendMessage", json!({"message": json_message(&text_of(LIMIT - 1024))}));
    let answer = post_json(server.url(), &fits).await.1;
    assert!(answer.get("result").is_some(), "{}", &answer.to_string()[..200]);
}

#[tokio::test]
async fn grpc_messages_over_the_limit_are_resource_exhausted_not_out_of_range() {
    let server = server_with_limit(LIMIT).await;
    let big = text_of(LIMIT);
    let mut client = server.client().await;
    // The encode-once RPCs, unary and streaming, and one of the generated server's.
    assert_grpc_limit(&client.send_message(send(&big)).await.unwrap_err());
    assert_grpc_limit(&client.send_streaming_message(send(&big)).await.unwrap_err());
    let list = ListTasksRequest { context_id: big.clone(), ..Default::default() };
    assert_grpc_limit(&client.list_tasks(list).await.unwrap_err());
    // The v0.3 service.
    let mut old = V03Client::new(server.channel().await);
    assert_grpc_limit(&old.send_message(v03_message(vec![v03_text(&big)])).await.unwrap_err());
    // grpc-web over HTTP/1.1: the same status, in the response headers.
    let response = reqwest::Client::builder()
        .http1_only()
        .build()
        .unwrap()
        .post(format!("{}/lf.a2a.v1.A2AService/SendMessage", server.url()))
        .header("content-type", GRPC_WEB)
        .body(grpc_web_frame(&send(&big)))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], GRPC_WEB);
    assert_grpc_limit(&tonic::Status::from_header_map(response.headers()).expect("grpc-status"));
    // Just under the limit is served.
    send_task(&mut client, send(&text_of(LIMIT - 1024))).await;
}

/// Issue 12's attack: a 2 MB JSON-RPC request of 100,000 one-word parts (and over gRPC,
/// 550,000 one-byte parts) cost 30 MB (70 MB) that stayed. With the limit below its size it
/// is refused on every binding before any task exists. (Parts per message are the core's
/// limit; this test owns only the bytes.)
#[tokio::test]
async fn the_amplification_request_is_refused_by_its_size_on_every_binding() {
    let server = server_with_limit(1024 * 1024).await;
    let parts: Vec<Value> = (0..100_000).map(|_| json!({"text": "amplify"})).collect();
    let message = json!({"messageId": "amplification", "role": "ROLE_USER", "parts": parts});
    let request = rpc(1, "SendMessage", json!({"message": message}));
    let text = request.to_string();
    assert!((1_900_000..2_100_000).contains(&text.len()), "about 2 MB: {}", text.len());
    let answer = post_json(server.url(), &request).await.1;
    assert_jsonrpc_limit(&answer);
    let (status, body) =
        post_json(format!("{}/message:send", server.url()), &json!({"message": message})).await;
    assert_rest_limit(status, &body);
    let v03_parts: Vec<Value> = (0..100_000).map(|_| json!({"kind": "text", "text": "amplify"})).collect();
    let old_message = json!({"messageId": "m", "role": "user", "kind": "message", "parts": v03_parts});
    let old_request =
        json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": old_message}});
    assert_jsonrpc_limit(&post_json(server.url(), &old_request).await.1);

    let mut request = send("");
    let one_byte = Part { content: Some(part::Content::Text("a".into())), ..Default::default() };
    request.message.as_mut().unwrap().parts = vec![one_byte; 550_000];
    assert!(request.encoded_len() > 2_500_000, "{}", request.encoded_len());
    assert_grpc_limit(&server.client().await.send_message(request).await.unwrap_err());
    let old_parts = vec![v03_text("a"); 550_000];
    assert_grpc_limit(
        &V03Client::new(server.channel().await).send_message(v03_message(old_parts)).await.unwrap_err(),
    );
    assert_eq!(server.core.live_tasks(), 0, "no task was created");
}

#[tokio::test]
async fn an_http1_body_over_the_limit_is_read_to_its_end_before_the_answer() {
    let server = server_with_limit(LIMIT).await;
    let rpc_body = rpc(1, "SendMessage", json!({"message": json_message(&text_of(3 * LIMIT))})).to_string();
    let rest_body = json!({"message": json_message(&text_of(3 * LIMIT))}).to_string();
    let mut http = RawHttp::connect(server.addr).await;

    // Declared too large: answered only once the client has sent it all, and the connection
    // stays open for the next request (which it could not if the body had been left unread).
    let length = format!("Content-Length: {}", rpc_body.len());
    http.send(head("POST", "/", &[JSON, &length]).as_bytes()).await;
    http.send_in_pieces(rpc_body.as_bytes(), 8192).await;
    let response = http.response().await;
    assert_eq!(response.status, 200);
    assert_jsonrpc_limit(&response.json());
    assert_eq!(response.header("connection"), None);

    // Chunked, too large midway.
    http.send(head("POST", "/message:send", &[JSON, "Transfer-Encoding: chunked"]).as_bytes()).await;
    http.send_in_pieces(&chunked(rest_body.as_bytes(), 4096), 8192).await;
    let response = http.response().await;
    assert_rest_limit(response.status, &response.json());

    // grpc-web: tonic refuses at the length prefix; the rest is read all the same.
    let frame = grpc_web_frame(&send(&text_of(3 * LIMIT)));
    let length = format!("Content-Length: {}", frame.len());
    let grpc_web = format!("Content-Type: {GRPC_WEB}");
    http.send(head("POST", "/lf.a2a.v1.A2AService/SendMessage", &[&grpc_web, &length]).as_bytes()).await;
    http.send_in_pieces(&frame, 8192).await;
    let response = http.response().await;
    assert_eq!((response.status, response.header("grpc-status")), (200, Some("8")), "{response:?}");

    http.send(head("GET", "/healthz", &[]).as_bytes()).await;
    assert_eq!(http.response().await.status, 200, "the same connection serves on");
}

#[tokio::test]
async fn a_body_too_large_to_drain_is_refused_at_once_and_the_connection_closed() {
    let server = server_with_limit(LIMIT).await;
    // More than the drain budget (4 × the limit): the answer comes before any body byte.
    let mut http = RawHttp::connect(server.addr).await;
    http.send(head("POST", "/", &[JSON, "Content-Length: 100000000"]).as_bytes()).await;
    let response = http.response().await;
    assert_eq!(response.status, 200);
    assert_jsonrpc_limit(&response.json());
    assert_eq!(response.header("connection"), Some("close"));
    assert!(http.closes().await);

    // A client waiting for `100 Continue` is not asked for a body the server would refuse.
    let mut http = RawHttp::connect(server.addr).await;
    let expect = "Expect: 100-continue";
    http.send(head("POST", "/message:send", &[JSON, expect, "Content-Length: 200000"]).as_bytes()).await;
    let response = http.response().await;
    assert_rest_limit(response.status, &response.json());
    assert_eq!(response.header("connection"), Some("close"));
    assert!(http.closes().await);
}

/// A request with both Content-Length and Transfer-Encoding is refused before it runs (a front
/// end may have framed it by the other header), whichever comes first, alone on its connection
/// or behind a kept-alive request; the connection closes, so bytes framed differently are never
/// read as a request.
#[tokio::test]
async fn content_length_beside_transfer_encoding_is_refused_and_cannot_smuggle_a_request() {
    let server = TestServer::start().await;
    // `input` parks the task: had the request run, a live task would remain.
    let body = rpc(1, "SendMessage", json!({"message": json_message("input")})).to_string();
    let smuggled = head("GET", "/healthz", &[]);
    for headers in [
        [JSON, "Content-Length: 4", "Transfer-Encoding: chunked"],
        [JSON, "Transfer-Encoding: chunked", "Content-Length: 4"],
    ] {
        for kept_alive_before in [false, true] {
            let mut http = RawHttp::connect(server.addr).await;
            let mut request = Vec::new();
            if kept_alive_before {
                request.extend(head("GET", "/healthz", &[]).into_bytes());
            }
            request.extend(head("POST", "/", &headers).into_bytes());
            request.extend(chunked(body.as_bytes(), 16));
            request.extend(smuggled.as_bytes());
            http.send(&request).await;
            if kept_alive_before {
                assert_eq!(http.response().await.status, 200);
            }
            let response = http.response().await;
            assert_eq!(response.status, 400, "{headers:?}: {response:?}");
            let error = response.json();
            assert_eq!(error["error"]["details"][0]["reason"], "INVALID_REQUEST", "{error}");
            let message = error["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains("both Content-Length and Transfer-Encoding"), "{message}");
            assert!(http.closes().await, "the smuggled request must never be answered");
        }
    }
    assert_eq!(server.core.live_tasks(), 0, "the refused requests never ran");
}

/// Conflicting lengths and unknown codings are refused by hyper before any route; the answer
/// still has a body.
#[tokio::test]
async fn ambiguous_or_unknown_framing_is_a_400_with_a_body() {
    let server = TestServer::start().await;
    for headers in [
        &["Content-Length: 4", "Content-Length: 5"][..],
        &["Content-Length: 4, 5"],
        &["Transfer-Encoding: gzip"],
        &["Content-Length: -1"],
    ] {
        let mut http = RawHttp::connect(server.addr).await;
        let mut all = vec![JSON];
        all.extend_from_slice(headers);
        http.send(format!("{}abcd", head("POST", "/", &all)).as_bytes()).await;
        let response = http.response().await;
        assert_eq!(response.status, 400, "{headers:?}: {response:?}");
        let body = response.json();
        assert_eq!(body["error"]["code"], 400, "{body}");
        assert_eq!(body["error"]["details"][0]["reason"], "INVALID_REQUEST", "{body}");
        assert!(http.closes().await);
    }
    // The same length twice is one length (RFC 9110 §8.6 allows either reading).
    let mut http = RawHttp::connect(server.addr).await;
    let body = rpc(1, "GetTask", json!({"id": "nope"})).to_string();
    let length = format!("Content-Length: {}", body.len());
    http.send(format!("{}{body}", head("POST", "/", &[JSON, &length, &length])).as_bytes()).await;
    assert_rpc_error(&http.response().await.json(), -32001, "TASK_NOT_FOUND");
}
