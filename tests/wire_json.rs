//! JSON and HTTP hygiene on the wire: duplicate names refused at any depth on every JSON binding
//! (a proxy reading the first `method` must see the call the server runs), JSON-RPC ids
//! echoed exactly as sent (numbers of any size or form, strings, null), and no error answered
//! with an empty or non-JSON body: a method a route does not serve (405), an unknown path
//! (404), a URI or headers too long for hyper (414, 431), a malformed header (400).
mod common;

use common::raw_http::{RawHttp, head};
use common::*;
use serde_json::{Value, json};

async fn post_text(server: &TestServer, path: &str, body: &str) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(format!("{}{path}", server.url()))
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    assert!(response.headers()["content-type"].to_str().unwrap().contains("json"));
    (status, response.text().await.unwrap())
}

async fn post_json(server: &TestServer, path: &str, body: &str) -> (u16, Value) {
    let (status, text) = post_text(server, path, body).await;
    (status, serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}")))
}

#[tokio::test]
async fn duplicate_names_are_refused_at_any_depth_on_every_json_binding() {
    let server = TestServer::start().await;
    let message = r#"{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}"#;
    let twice_in_a_part = r#"{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi","text":"ho"}]}"#;
    for body in [
        // A proxy reading the first `method` would see a harmless GetTask.
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"GetTask","method":"SendMessage","params":{{"message":{message}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":1,"id":2,"method":"SendMessage","params":{{"message":{message}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{{"message":{twice_in_a_part}}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{{"message":{message}}},"x":{{}},"x":1}}"#),
        r#"[{"jsonrpc":"2.0","id":1,"method":"GetTask","method":"GetTask"}]"#.to_owned(),
        // The v0.3 methods share the envelope.
        r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","kind":"message"}}}"#
            .to_owned(),
    ] {
        let (status, answer) = post_json(&server, "/", &body).await;
        assert_eq!(status, 200);
        assert_rpc_error(&answer, -32700, "PARSE_ERROR");
        assert_eq!(answer["id"], Value::Null, "no id is trusted in a body read two ways");
        assert!(answer["error"]["message"].as_str().unwrap().contains("duplicate key"), "{answer}");
    }
    let (status, answer) =
        post_json(&server, "/message:send", &format!(r#"{{"message":{twice_in_a_part}}}"#)).await;
    assert_eq!((status, &answer["error"]["status"]), (400, &json!("INVALID_ARGUMENT")), "{answer}");
    assert_eq!(answer["error"]["details"][0]["reason"], "PARSE_ERROR", "{answer}");
    let old = r#"{"message":{"messageId":"m","role":"ROLE_USER","role":"ROLE_AGENT","content":[]}}"#;
    let (status, answer) = post_json(&server, "/v1/message:send", old).await;
    assert_eq!((status, &answer["code"]), (400, &json!(-32700)), "{answer}");
    assert_eq!(server.core.live_tasks(), 0, "nothing ran");
    // The same name in different objects is fine.
    let (_, answer) =
        post_json(&server, "/", &rpc(1, "SendMessage", json!({"message": json_message("hi")})).to_string())
            .await;
    assert!(answer.get("result").is_some(), "{answer}");
}

#[tokio::test]
async fn jsonrpc_ids_come_back_exactly_as_sent() {
    let server = TestServer::start().await;
    let ids = [
        "9007199254740993",
        "-9007199254740993",
        "18446744073709551616",
        "-18446744073709551617",
        "123456789012345678901234567890",
        "-1",
        "0",
        "1.50",
        "1e3",
        "-0.0",
        "2.5E-7",
        r#""abc""#,
        r#""""#,
        r#""\u00e9\n""#,
        "null",
    ];
    for id in ids {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"GetTask","params":{{"id":"nope"}}}}"#);
        let (_, text) = post_text(&server, "/", &body).await;
        assert!(text.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":{id},"error":"#)), "{id}: {text}");
        assert_rpc_error(&serde_json::from_str(&text).unwrap(), -32001, "TASK_NOT_FOUND");
        // A v0.3 method too.
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tasks/get","params":{{"id":"nope"}}}}"#);
        let (_, text) = post_text(&server, "/", &body).await;
        assert!(text.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":{id},"error":"#)), "{id}: {text}");
    }
    // Results and every SSE event of a stream carry it too.
    let big = "9007199254740993";
    let message = json_message("hello").to_string();
    let body =
        format!(r#"{{"jsonrpc":"2.0","id":{big},"method":"SendMessage","params":{{"message":{message}}}}}"#);
    let (_, text) = post_text(&server, "/", &body).await;
    assert!(text.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":{big},"result":"#)), "{text}");
    // A message of its own: the same one again would be answered as a retry, one event.
    let message = json_message("hello").to_string();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{big},"method":"SendStreamingMessage","params":{{"message":{message}}}}}"#
    );
    let response = reqwest::Client::new()
        .post(server.url())
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let events = SseReader::new(response).collect().await;
    assert!(events.len() >= 2, "{events:?}");
    for event in events {
        assert!(event.data.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":{big},"result":"#)), "{event:?}");
    }
    // Anything else is no id.
    for id in ["true", "{}", "[1]"] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"GetTask","params":{{"id":"nope"}}}}"#);
        let (_, answer) = post_json(&server, "/", &body).await;
        assert_rpc_error(&answer, -32600, "INVALID_REQUEST");
        assert_eq!(answer["id"], Value::Null);
    }
}

/// A `google.rpc.Status` JSON body of `status`, with its ErrorInfo `reason`.
async fn assert_status_body(response: reqwest::Response, status: u16, reason: &str) -> Value {
    assert_eq!(response.status().as_u16(), status);
    let content_type = response.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(content_type.as_deref(), Some("application/json"));
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], status, "{body}");
    assert_eq!(body["error"]["details"][0]["reason"], reason, "{body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    body
}

#[tokio::test]
async fn no_error_goes_out_without_a_json_body() {
    let server = TestServer::start().await;
    let client = reqwest::Client::new();
    let url = |path: &str| format!("{}{path}", server.url());

    // The JSON-RPC URL answers other methods in JSON-RPC's form, with 405 and Allow.
    for method in [reqwest::Method::GET, reqwest::Method::PUT, reqwest::Method::DELETE] {
        let response = client.request(method.clone(), url("/")).send().await.unwrap();
        assert_eq!(response.status(), 405, "{method}");
        assert_eq!(response.headers()["allow"], "POST");
        let answer: Value = response.json().await.unwrap();
        assert_rpc_error(&answer, -32600, "METHOD_NOT_ALLOWED");
        assert_eq!((&answer["jsonrpc"], &answer["id"]), (&json!("2.0"), &Value::Null));
        assert_eq!(answer["error"]["data"][0]["metadata"]["allow"], "POST");
    }
    // Other routes in HTTP+JSON's form.
    let response = client.post(url("/.well-known/agent-card.json")).send().await.unwrap();
    assert!(response.headers()["allow"].to_str().unwrap().contains("GET"));
    assert_status_body(response, 405, "METHOD_NOT_ALLOWED").await;
    let response = client.delete(url("/healthz")).send().await.unwrap();
    assert_status_body(response, 405, "METHOD_NOT_ALLOWED").await;
    let response = client.get(url("/message:send")).send().await.unwrap();
    assert_eq!(response.headers()["allow"], "POST");
    let body = assert_status_body(response, 405, "METHOD_NOT_ALLOWED").await;
    assert_eq!(body["error"]["details"][0]["metadata"]["allow"], "POST");
    assert_status_body(client.get(url("/no/such/route")).send().await.unwrap(), 404, "METHOD_NOT_FOUND")
        .await;

    // A task id hyper still reads is the binding's to answer; a longer one is hyper's 414.
    let long = "t".repeat(60_000);
    let response = client.get(url(&format!("/tasks/{long}"))).send().await.unwrap();
    assert_status_body(response, 404, "TASK_NOT_FOUND").await;
    // (No client library builds a URI this long: the request goes by hand.)
    let mut http = RawHttp::connect(server.addr).await;
    http.send(head("GET", &format!("/tasks/{}", "t".repeat(100_000)), &[]).as_bytes()).await;
    let response = http.response().await;
    assert_eq!(response.status, 414);
    assert_eq!(response.json()["error"]["code"], 414);
    assert_eq!(response.json()["error"]["details"][0]["reason"], "INVALID_REQUEST");
    assert!(http.closes().await);
    // Headers beyond hyper's read buffer.
    let response = client.get(url("/tasks")).header("x-filler", "f".repeat(1_000_000)).send().await.unwrap();
    assert_status_body(response, 431, "INVALID_REQUEST").await;

    // A malformed header line: hyper's 400, with a body.
    let mut http = RawHttp::connect(server.addr).await;
    http.send(head("GET", "/tasks", &["Bad Header: x"]).as_bytes()).await;
    let response = http.response().await;
    assert_eq!(response.status, 400);
    assert_eq!(response.json()["error"]["details"][0]["reason"], "INVALID_REQUEST");
    assert!(http.closes().await);
}
