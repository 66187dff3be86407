//! `A2A-Extensions` echoed: every binding answers with the extensions it activated for the call
//! (asked for by the client and declared in the card: here the resume extension, which the
//! server declares itself) in the `A2A-Extensions` response header, gRPC's initial metadata
//! `a2a-extensions`; streams carry it on their head. Nothing activated, no header. Driven with
//! real clients: reqwest (JSON-RPC, HTTP+JSON with SSE, the v0.3 routes, grpc-web) and tonic.
mod common;

use a2a_server::call::RESUME_EXTENSION;
use a2a_server::proto::{GetTaskRequest, SendMessageRequest};
use common::*;
use serde_json::json;
use tonic::metadata::MetadataValue;

/// What clients ask for: an unknown extension beside the resume extension, twice.
fn asked() -> String {
    format!("urn:unknown, {RESUME_EXTENSION}, {RESUME_EXTENSION}")
}

/// Asserts `headers` echo exactly the resume extension (`asked`) or nothing.
fn assert_echo(headers: &reqwest::header::HeaderMap, asked: bool, what: &str) {
    let echoed: Vec<_> = headers.get_all("a2a-extensions").iter().map(|v| v.to_str().unwrap()).collect();
    let expected: &[&str] = if asked { &[RESUME_EXTENSION] } else { &[] };
    assert_eq!(echoed, expected, "{what}");
}

#[tokio::test]
async fn every_http_binding_echoes_the_activated_extensions() {
    let server = TestServer::start().await;
    let http = reqwest::Client::new();
    let base = server.url();
    for asked_for in [true, false] {
        let with = |request: reqwest::RequestBuilder| match asked_for {
            true => request.header("A2A-Extensions", asked()),
            false => request.header("A2A-Extensions", "urn:unknown"),
        };
        let send = json!({"message": json_message("hello")});
        let calls = [
            ("JSON-RPC", with(http.post(format!("{base}/"))).json(&rpc(1, "SendMessage", send.clone()))),
            (
                "JSON-RPC SSE",
                with(http.post(format!("{base}/"))).json(&rpc(2, "SendStreamingMessage", send.clone())),
            ),
            ("HTTP+JSON", with(http.post(format!("{base}/message:send"))).json(&send)),
            ("HTTP+JSON SSE", with(http.post(format!("{base}/message:stream"))).json(&send)),
            ("HTTP+JSON error", with(http.get(format!("{base}/tasks/no-such-task")))),
            ("card", with(http.get(format!("{base}/.well-known/agent-card.json")))),
        ];
        for (what, request) in calls {
            let response = request.send().await.unwrap();
            assert_echo(response.headers(), asked_for, what);
        }
        // v0.3 clients name the header X-A2A-Extensions.
        let v03_send = json!({"message": {"kind": "message", "messageId": "m", "role": "user",
                                          "parts": [{"kind": "text", "text": "hi"}]}});
        let v03 = |request: reqwest::RequestBuilder| match asked_for {
            true => request.header("X-A2A-Extensions", RESUME_EXTENSION),
            false => request,
        };
        let calls = [
            (
                "v0.3 JSON-RPC",
                v03(http.post(format!("{base}/"))).json(&rpc(3, "message/send", v03_send.clone())),
            ),
            (
                "v0.3 JSON-RPC SSE",
                v03(http.post(format!("{base}/"))).json(&rpc(4, "message/stream", v03_send)),
            ),
            ("v0.3 REST", v03(http.get(format!("{base}/v1/card")))),
        ];
        for (what, request) in calls {
            let response = request.send().await.unwrap();
            assert_echo(response.headers(), asked_for, what);
        }
    }
}

#[tokio::test]
async fn grpc_web_echoes_in_its_response_headers() {
    let server = TestServer::start().await;
    let request = GetTaskRequest { id: "no-such-task".into(), ..Default::default() };
    let payload = prost::Message::encode_to_vec(&request);
    let mut frame = vec![0u8];
    frame.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_be_bytes());
    frame.extend_from_slice(&payload);
    for asked_for in [true, false] {
        let mut call = reqwest::Client::new()
            .post(format!("{}/lf.a2a.v1.A2AService/GetTask", server.url()))
            .header("content-type", "application/grpc-web+proto")
            .header("x-grpc-web", "1")
            .body(frame.clone());
        if asked_for {
            call = call.header("a2a-extensions", asked());
        }
        let response = call.send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_echo(response.headers(), asked_for, "grpc-web");
    }
}

#[tokio::test]
async fn grpc_echoes_in_initial_metadata_for_unary_streaming_and_failed_calls() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let echoed = |metadata: &tonic::metadata::MetadataMap| {
        metadata.get_all("a2a-extensions").iter().map(|v| v.to_str().unwrap().to_owned()).collect::<Vec<_>>()
    };
    let with = |message: SendMessageRequest, asked_for: bool| {
        let mut request = tonic::Request::new(message);
        if asked_for {
            request.metadata_mut().insert("a2a-extensions", MetadataValue::try_from(asked()).unwrap());
        }
        request
    };
    for asked_for in [true, false] {
        let expected: Vec<String> = if asked_for { vec![RESUME_EXTENSION.into()] } else { vec![] };
        let unary = client.send_message(with(send("hello"), asked_for)).await.unwrap();
        assert_eq!(echoed(unary.metadata()), expected, "unary");
        let stream = client.send_streaming_message(with(send("stream 2 0"), asked_for)).await.unwrap();
        assert_eq!(echoed(stream.metadata()), expected, "streaming: in the initial metadata");
        let mut get = tonic::Request::new(GetTaskRequest { id: "no-such-task".into(), ..Default::default() });
        if asked_for {
            get.metadata_mut().insert("a2a-extensions", MetadataValue::try_from(asked()).unwrap());
        }
        let failed = client.get_task(get).await.unwrap_err();
        assert_eq!(echoed(failed.metadata()), expected, "a failed call");
    }
}
