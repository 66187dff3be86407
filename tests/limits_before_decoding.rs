//! `--max-parts` is checked on a request's bytes, before the message is decoded, on every binding
//! and both protocol versions: refusing a message of half a million parts must cost its bytes,
//! not the hundreds of bytes per part that decoding builds (issue 12's amplification request).
//! The proof is a message whose last part cannot be decoded (a number for a text in JSON, bytes
//! that are not UTF-8 in protobuf): one part over the limit, it is refused for its parts, so that
//! part was never decoded; within the limit, the same part is refused as undecodable.
//!
//! `--max-struct-values` bounds the values in data parts and metadata, counted alike by the JSON
//! parser (before decoding) and by the core (on every binding).
mod common;

use a2a_server::core::CoreSettings;
use a2a_server::proto::SendMessageRequest;
use a2a_server::proto_v03 as v03;
use common::*;
use prost::Message as _;
use serde_json::{Value, json};

const MAX_PARTS: usize = 3;
const BAD: &str = "BADBAD";

async fn server() -> TestServer {
    TestServer::builder()
        .settings(CoreSettings { max_parts: MAX_PARTS, ..CoreSettings::default() })
        .start()
        .await
}

/// `good` decodable text parts, then one that is not (a number where a text goes).
fn json_parts(good: usize, v03: bool) -> Vec<Value> {
    let kind = |mut part: Value| {
        if v03 {
            part["kind"] = json!("text");
        }
        part
    };
    let mut parts: Vec<Value> = (0..good).map(|_| kind(json!({"text": "ok"}))).collect();
    parts.push(kind(json!({"text": 5})));
    parts
}

/// An encoded SendMessageRequest (v1.0 or v0.3) with `good` parts, then one whose text is not
/// UTF-8.
fn protobuf_request(good: usize, v03: bool) -> Vec<u8> {
    let texts: Vec<&str> = std::iter::repeat_n("ok", good).chain([BAD]).collect();
    let mut bytes = if v03 {
        let content = texts
            .iter()
            .map(|t| v03::Part { part: Some(v03::part::Part::Text((*t).into())), ..Default::default() });
        let message = v03::Message {
            message_id: "m".into(),
            role: 1,
            content: content.collect(),
            ..Default::default()
        };
        v03::SendMessageRequest { request: Some(message), ..Default::default() }.encode_to_vec()
    } else {
        let mut request = send("ok");
        let part = |t: &&str| a2a_server::proto::Part {
            content: Some(a2a_server::proto::part::Content::Text((*t).into())),
            ..Default::default()
        };
        request.message.as_mut().expect("a message").parts = texts.iter().map(part).collect();
        request.encode_to_vec()
    };
    let at = bytes.windows(BAD.len()).position(|w| w == BAD.as_bytes()).expect("the bad part");
    bytes[at..at + BAD.len()].fill(0xff);
    bytes
}

/// One gRPC (or grpc-web) call with a raw request; its status, from the (trailers-only) headers.
async fn raw_grpc(server: &TestServer, path: &str, request: &[u8], web: bool) -> tonic::Status {
    let mut frame = vec![0];
    frame.extend_from_slice(&(request.len() as u32).to_be_bytes());
    frame.extend_from_slice(request);
    let client = match web {
        true => reqwest::Client::builder().http1_only().build(),
        false => reqwest::Client::builder().http2_prior_knowledge().build(),
    };
    let content_type = if web { "application/grpc-web+proto" } else { "application/grpc" };
    let response = client
        .expect("a client")
        .post(format!("{}{path}", server.url()))
        .header("content-type", content_type)
        .header("te", "trailers")
        .body(frame)
        .send()
        .await
        .expect("an answer");
    tonic::Status::from_header_map(response.headers()).expect("a trailers-only status")
}

#[tokio::test]
async fn parts_are_counted_on_the_bytes_before_the_message_is_decoded() {
    let server = server().await;
    for (label, path, v03, web) in [
        ("gRPC", "/lf.a2a.v1.A2AService/SendMessage", false, false),
        ("gRPC streaming", "/lf.a2a.v1.A2AService/SendStreamingMessage", false, false),
        ("grpc-web", "/lf.a2a.v1.A2AService/SendMessage", false, true),
        ("v0.3 gRPC", "/a2a.v1.A2AService/SendMessage", true, false),
        ("v0.3 gRPC streaming", "/a2a.v1.A2AService/SendStreamingMessage", true, false),
    ] {
        let over = raw_grpc(&server, path, &protobuf_request(MAX_PARTS, v03), web).await;
        assert_a2a_error(&over, tonic::Code::ResourceExhausted, "PAYLOAD_TOO_LARGE");
        assert!(over.message().contains("4 parts"), "{label}: {over:?}");
        let within = raw_grpc(&server, path, &protobuf_request(MAX_PARTS - 1, v03), web).await;
        assert_ne!(within.code(), tonic::Code::ResourceExhausted, "{label}: {within:?}");
        assert_ne!(within.code(), tonic::Code::Ok, "{label}: the bad part must be refused: {within:?}");
    }

    let http = reqwest::Client::new();
    let post = |url: String, body: Value| {
        let request = http.post(url).json(&body);
        async move {
            let response = request.send().await.expect("an answer");
            (response.status().as_u16(), response.json::<Value>().await.expect("JSON"))
        }
    };
    let message = |good, v03: bool| {
        let mut message = json!({"messageId": "m", "role": if v03 { "user" } else { "ROLE_USER" }});
        message["parts"] = json!(json_parts(good, v03));
        if v03 {
            message["kind"] = json!("message");
        }
        json!({"message": message})
    };
    // JSON-RPC v1.0, and v0.3 (whose error data is the ErrorInfo itself).
    for (method, v03) in [("SendMessage", false), ("SendStreamingMessage", false), ("message/send", true)] {
        let reason = |answer: &Value| {
            let data = &answer["error"]["data"];
            data.get(0).unwrap_or(data)["reason"].as_str().unwrap_or_default().to_owned()
        };
        let (_, over) = post(server.url(), rpc(7, method, message(MAX_PARTS, v03))).await;
        assert_eq!(reason(&over), "PAYLOAD_TOO_LARGE", "{method}: {over}");
        assert_eq!(over["id"], 7, "the id is kept: {over}");
        assert!(over["error"]["message"].as_str().unwrap_or_default().contains("4 parts"), "{over}");
        let (_, within) = post(server.url(), rpc(7, method, message(MAX_PARTS - 1, v03))).await;
        assert_ne!(reason(&within), "PAYLOAD_TOO_LARGE", "{method}: {within}");
        assert!(within.get("error").is_some(), "{method}: the bad part must be refused: {within}");
    }
    // HTTP+JSON v1.0 and v0.3.
    for (path, v03) in [("/message:send", false), ("/message:stream", false), ("/v1/message:send", true)] {
        let (status, over) = post(format!("{}{path}", server.url()), message(MAX_PARTS, v03)).await;
        assert_eq!(status, 413, "{path}: {over}");
        let (status, within) = post(format!("{}{path}", server.url()), message(MAX_PARTS - 1, v03)).await;
        assert_eq!(status, 400, "{path}: the bad part must be refused: {within}");
    }
    assert_eq!(server.core.live_tasks(), 0, "nothing ran");
}

/// A `parts` array anywhere but at `message.parts` is the client's data, not counted.
#[tokio::test]
async fn only_the_messages_own_parts_are_counted() {
    let server = server().await;
    let many: Vec<Value> = (0..50).map(|i| json!({"text": i.to_string()})).collect();
    let mut message = json_message("hello");
    message["metadata"] = json!({"parts": many, "message": {"parts": many}});
    message["parts"][0]["data"] = json!({"parts": many});
    message["parts"][0].as_object_mut().expect("a part").remove("text");
    let params = json!({"message": message, "metadata": {"message": {"parts": many}}});
    let answer: Value = reqwest::Client::new()
        .post(server.url())
        .json(&rpc(1, "SendMessage", params))
        .send()
        .await
        .expect("an answer")
        .json()
        .await
        .expect("JSON");
    assert!(answer.get("result").is_some(), "{answer}");
}

/// SendMessage params with exactly ten structured values (one more with `extra`): request
/// metadata `{}` (1), message metadata `{"a":1,"b":[1,2]}` (5), data `{"x":null}` (2), part
/// metadata `{"y":"s"}` (2).
fn ten_values(extra: bool) -> Value {
    let list = if extra { json!([1, 2, 3]) } else { json!([1, 2]) };
    let message = json!({
        "messageId": uuid::Uuid::new_v4().to_string(),
        "role": "ROLE_USER",
        "metadata": {"a": 1, "b": list},
        "parts": [{"data": {"x": null}, "metadata": {"y": "s"}}],
    });
    json!({"message": message, "metadata": {}})
}

#[tokio::test]
async fn structured_values_are_counted_alike_on_every_binding() {
    let settings = CoreSettings { max_struct_values: 10, ..CoreSettings::default() };
    let server = TestServer::builder().settings(settings).start().await;
    let http = reqwest::Client::new();
    for extra in [false, true] {
        let answer: Value =
            json_answer(http.post(server.url()).json(&rpc(1, "SendMessage", ten_values(extra)))).await;
        let rest = http
            .post(format!("{}/message:send", server.url()))
            .json(&ten_values(extra))
            .send()
            .await
            .unwrap();
        let request: SendMessageRequest =
            a2a_server::protojson::decode(&ten_values(extra)).expect("ProtoJSON");
        let grpc = server.client().await.send_message(request).await;
        if extra {
            assert_rpc_error(&answer, -31413, "PAYLOAD_TOO_LARGE");
            assert_eq!(answer["error"]["data"][0]["metadata"]["limit"], "max-struct-values", "{answer}");
            assert_eq!(rest.status().as_u16(), 413);
            let status = grpc.expect_err("refused");
            assert_a2a_error(&status, tonic::Code::ResourceExhausted, "PAYLOAD_TOO_LARGE");
            assert!(status.message().contains("more than 10 values (at least 11)"), "{status:?}");
        } else {
            assert!(answer.get("result").is_some(), "{answer}");
            assert_eq!(rest.status().as_u16(), 200);
            grpc.expect("served");
        }
    }
}
