//! The JSON-RPC 2.0 binding over a real socket: every method, the envelope errors, SSE.
mod common;

use common::*;
use serde_json::{Value, json};

struct Rpc {
    client: reqwest::Client,
    url: String,
}

impl Rpc {
    fn new(server: &TestServer) -> Self {
        Self { client: reqwest::Client::new(), url: format!("{}/", server.url()) }
    }

    async fn raw(&self, body: &str, content_type: &str) -> reqwest::Response {
        self.client
            .post(&self.url)
            .header("content-type", content_type)
            .body(body.to_owned())
            .send()
            .await
            .unwrap()
    }

    /// A call answered with plain JSON (HTTP 200 even for errors).
    async fn call(&self, method: &str, params: Value) -> Value {
        let response = self.client.post(&self.url).json(&rpc(7, method, params)).send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "application/json");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["jsonrpc"], "2.0");
        assert_eq!(body["id"], 7);
        body
    }

    async fn stream(&self, method: &str, params: Value) -> SseReader {
        let response = self.client.post(&self.url).json(&rpc(9, method, params)).send().await.unwrap();
        assert_eq!(response.status(), 200);
        SseReader::new(response)
    }
}

/// The `result` of every SSE event, checking each is a complete JSON-RPC response.
fn results(events: &[SseEvent]) -> Vec<Value> {
    events
        .iter()
        .map(|e| {
            let body = e.json();
            assert_eq!(body["jsonrpc"], "2.0");
            assert_eq!(body["id"], 9);
            body["result"].clone()
        })
        .collect()
}

#[tokio::test]
async fn send_get_list_cancel() {
    let server = TestServer::start().await;
    let api = Rpc::new(&server);
    let sent = api.call("SendMessage", json!({"message": json_message("hello")})).await;
    let task = &sent["result"]["task"];
    assert_eq!(json_state(task).as_deref(), Some("TASK_STATE_COMPLETED"));
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "hello");
    assert!(task["status"]["timestamp"].as_str().unwrap().ends_with('Z'));
    assert!(task.get("kind").is_none(), "no v0.3 fields");

    let id = task["id"].as_str().unwrap();
    let got = api.call("GetTask", json!({"id": id, "historyLength": 0})).await;
    assert_eq!(got["result"]["id"], id, "GetTask returns the bare Task");
    assert!(got["result"].get("history").is_none());

    let list = api.call("ListTasks", json!({"pageSize": 10})).await;
    assert_eq!(list["result"]["totalSize"], 1);
    assert_eq!(list["result"]["nextPageToken"], "", "always present");
    assert_eq!(list["result"]["pageSize"], 10);
    assert!(list["result"]["tasks"][0].get("artifacts").is_none(), "artifacts only on request");

    let running = api
        .call(
            "SendMessage",
            json!({"message": json_message("stream 100 200"), "configuration": {"returnImmediately": true}}),
        )
        .await;
    let running_id = running["result"]["task"]["id"].as_str().unwrap().to_owned();
    let canceled = api.call("CancelTask", json!({"id": running_id})).await;
    assert_eq!(json_state(&canceled["result"]).as_deref(), Some("TASK_STATE_CANCELED"));
    let again = api.call("CancelTask", json!({"id": running_id})).await;
    assert_rpc_error(&again, -32002, "TASK_NOT_CANCELABLE");
}

#[tokio::test]
async fn snake_case_and_nulls_are_accepted() {
    let server = TestServer::start().await;
    let api = Rpc::new(&server);
    let params = json!({
        "message": {"message_id": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}],
                    "extensions": null, "reference_task_ids": null, "futureField": 1},
        "configuration": {"accepted_output_modes": null, "history_length": 1},
        "metadata": null
    });
    let sent = api.call("SendMessage", params).await;
    assert_eq!(json_state(&sent["result"]["task"]).as_deref(), Some("TASK_STATE_COMPLETED"), "{sent}");
}

#[tokio::test]
async fn direct_message_reply() {
    let server = TestServer::start().await;
    let api = Rpc::new(&server);
    let sent = api.call("SendMessage", json!({"message": json_message("message hi there")})).await;
    assert_eq!(sent["result"]["message"]["parts"][0]["text"], "hi there");
    assert_eq!(sent["result"]["message"]["role"], "ROLE_AGENT");
}

#[tokio::test]
async fn streaming_send_is_sse_of_jsonrpc_responses() {
    let server = TestServer::start().await;
    let api = Rpc::new(&server);
    let events = api
        .stream("SendStreamingMessage", json!({"message": json_message("stream 3 0")}))
        .await
        .collect()
        .await;
    let items = results(&events);
    assert!(items[0].get("task").is_some(), "first a Task: {}", items[0]);
    let chunks: Vec<_> = items.iter().flat_map(json_chunks).collect();
    assert_eq!(chunks, ["chunk 0", "chunk 1", "chunk 2"]);
    assert_eq!(json_state(items.last().unwrap()).as_deref(), Some("TASK_STATE_COMPLETED"));
}

#[tokio::test]
async fn subscribe_mid_stream_and_errors_before_the_stream_are_plain_json() {
    let server = TestServer::start().await;
    let api = Rpc::new(&server);
    let mut first = api.stream("SendStreamingMessage", json!({"message": json_message("stream 6 20")})).await;
    let head = first.next().await.unwrap().json();
    let id = head["result"]["task"]["id"].as_str().unwrap().to_owned();
    while !json_chunks(&first.next().await.unwrap().json()["result"]).contains(&"chunk 1".to_owned()) {}
    let late = results(&api.stream("SubscribeToTask", json!({"id": id})).await.collect().await);
    let mut all: Vec<String> = late[0]["task"]["artifacts"][0]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["text"].as_str().unwrap().to_owned())
        .collect();
    all.extend(late.iter().flat_map(json_chunks));
    assert_eq!(all, (0..6).map(|i| format!("chunk {i}")).collect::<Vec<_>>());
    first.collect().await;

    let unknown = api
        .client
        .post(&api.url)
        .json(&rpc(9, "SubscribeToTask", json!({"id": "nope"})))
        .send()
        .await
        .unwrap();
    assert_eq!(
        unknown.headers()["content-type"],
        "application/json",
        "an error before the stream is not SSE"
    );
    assert_rpc_error(&unknown.json().await.unwrap(), -32001, "TASK_NOT_FOUND");
    let terminal = api.call("SubscribeToTask", json!({"id": id})).await;
    assert_rpc_error(&terminal, -32004, "UNSUPPORTED_OPERATION");
}

#[tokio::test]
async fn an_error_after_the_stream_started_is_the_last_data_event() {
    let settings = a2a_server::core::CoreSettings { event_log_capacity: 4, ..Default::default() };
    let server = TestServer::builder().settings(settings).start().await;
    let api = Rpc::new(&server);
    let idle = api.call("SendMessage", json!({"message": json_message("input")})).await;
    let id = idle["result"]["task"]["id"].as_str().unwrap().to_owned();
    let response =
        api.client.post(&api.url).json(&rpc(9, "SubscribeToTask", json!({"id": id}))).send().await.unwrap();
    // Attached; now a burst the (unread) stream cannot keep up with.
    let mut follow_up = json_message("stream 5000 0");
    follow_up["taskId"] = json!(id);
    api.call("SendMessage", json!({"message": follow_up})).await;
    let events = SseReader::new(response).collect().await;
    let last = events.last().unwrap().json();
    assert_eq!(last["id"], 9);
    assert_eq!(last["error"]["data"][0]["reason"], "SUBSCRIBER_LAGGED", "{last}");
    assert_eq!(last["error"]["code"], -32603);
}

#[tokio::test]
async fn envelope_errors() {
    let server = TestServer::start().await;
    let api = Rpc::new(&server);
    let parse = api.raw("{not json", "application/json").await.json::<Value>().await.unwrap();
    assert_rpc_error(&parse, -32700, "PARSE_ERROR");
    assert_eq!(parse["id"], Value::Null);

    let batch =
        api.raw(&json!([rpc(1, "GetTask", json!({"id": "x"}))]).to_string(), "application/json").await;
    assert_rpc_error(&batch.json().await.unwrap(), -32600, "INVALID_REQUEST");
    for bad in [
        json!({"jsonrpc": "1.0", "id": 1, "method": "GetTask"}),
        json!({"jsonrpc": "2.0", "id": true, "method": "GetTask"}),
        json!({"jsonrpc": "2.0", "id": {"a": 1}, "method": "GetTask"}),
        json!({"jsonrpc": "2.0", "method": "GetTask"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": 5}),
        json!("just a string"),
    ] {
        let body = api.raw(&bad.to_string(), "application/json").await.json::<Value>().await.unwrap();
        assert_rpc_error(&body, -32600, "INVALID_REQUEST");
    }
    let string_id = api
        .raw(&json!({"jsonrpc": "2.0", "id": "abc", "method": "Nope"}).to_string(), "application/json")
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(string_id["id"], "abc");
    assert_rpc_error(&string_id, -32601, "METHOD_NOT_FOUND");
    // A v0.3 method name without A2A-Version is a v0.3 call now (tests/v03_jsonrpc.rs covers
    // it, and that A2A-Version 1.0 or --v03 off still make it an unknown method).
    let v03 = api.call("message/send", json!({})).await;
    assert_eq!(v03["error"]["code"], -32602, "{v03}");

    let not_json = api.raw("id=1", "application/x-www-form-urlencoded").await;
    assert_eq!(not_json.status(), 200);
    assert_rpc_error(&not_json.json().await.unwrap(), -32005, "CONTENT_TYPE_NOT_SUPPORTED");

    let wrong_params = api.call("GetTask", json!([1, 2])).await;
    assert_rpc_error(&wrong_params, -32602, "INVALID_PARAMS");
    let wrong_type = api.call("GetTask", json!({"id": "x", "historyLength": "lots"})).await;
    assert_rpc_error(&wrong_type, -32602, "INVALID_PARAMS");
    let missing = api.call("SendMessage", json!({})).await;
    assert_rpc_error(&missing, -32602, "INVALID_PARAMS");
    assert_eq!(missing["error"]["data"][1]["@type"], "type.googleapis.com/google.rpc.BadRequest");
    assert_eq!(missing["error"]["data"][1]["fieldViolations"][0]["field"], "message");
}

#[tokio::test]
async fn a2a_errors_and_service_parameters() {
    let server = TestServer::start().await;
    let api = Rpc::new(&server);
    assert_rpc_error(&api.call("GetTask", json!({"id": "nope"})).await, -32001, "TASK_NOT_FOUND");
    let push = api
        .call("CreateTaskPushNotificationConfig", json!({"taskId": "t", "url": "https://x.example"}))
        .await;
    assert_rpc_error(&push, -32003, "PUSH_NOTIFICATION_NOT_SUPPORTED");
    for method in [
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    ] {
        let body = api.call(method, json!({"taskId": "t", "id": "c"})).await;
        assert_rpc_error(&body, -32003, "PUSH_NOTIFICATION_NOT_SUPPORTED");
    }
    // The spec's example sends no params at all.
    let card =
        api.client.post(&api.url).json(&json!({"jsonrpc": "2.0", "id": 7, "method": "GetExtendedAgentCard"}));
    assert_rpc_error(&card.send().await.unwrap().json().await.unwrap(), -32004, "UNSUPPORTED_OPERATION");

    let versioned = |version: &'static str| {
        api.client.post(&api.url).header("A2A-Version", version).json(&rpc(
            7,
            "GetTask",
            json!({"id": "nope"}),
        ))
    };
    let body: Value = versioned("99.0").send().await.unwrap().json().await.unwrap();
    assert_rpc_error(&body, -32009, "VERSION_NOT_SUPPORTED");
    let body: Value = versioned("1.0").send().await.unwrap().json().await.unwrap();
    assert_rpc_error(&body, -32001, "TASK_NOT_FOUND");
    let query = format!("{}?A2A-Version=99.0", api.url);
    let body: Value = json_answer(api.client.post(query).json(&rpc(7, "GetTask", json!({"id": "x"})))).await;
    assert_rpc_error(&body, -32009, "VERSION_NOT_SUPPORTED");
}

#[tokio::test]
async fn closing_an_sse_stream_frees_the_subscription() {
    let server = TestServer::start().await;
    let api = Rpc::new(&server);
    let idle = api.call("SendMessage", json!({"message": json_message("input")})).await;
    let id = idle["result"]["task"]["id"].as_str().unwrap().to_owned();
    let mut stream = api.stream("SubscribeToTask", json!({"id": id})).await;
    stream.next().await.unwrap();
    server.wait_until("one subscription", |core| core.open_subscriptions() == 1).await;
    drop(stream);
    server.wait_until("no subscription", |core| core.open_subscriptions() == 0).await;
}
