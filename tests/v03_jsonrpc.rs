//! A2A v0.3 clients over JSON-RPC beside v1.0 ones, on a real socket: every v0.3 method, its
//! v0.3 shapes and error codes, the mixed-version scenarios (one task seen through both
//! versions, the same events in the same order), the Agent Card for both generations, and
//! `--v03 off`.
mod common;

use a2a_server::push::ssrf::Policy;
use a2a_server::transport::http::HttpSettings;
use common::webhook::push_settings;
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

    async fn call(&self, method: &str, params: Value) -> Value {
        let response = self.client.post(&self.url).json(&rpc(3, method, params)).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let body: Value = response.json().await.unwrap();
        assert_eq!((&body["jsonrpc"], &body["id"]), (&json!("2.0"), &json!(3)), "{body}");
        body
    }

    async fn result(&self, method: &str, params: Value) -> Value {
        let body = self.call(method, params).await;
        body.get("result").cloned().unwrap_or_else(|| panic!("{method} failed: {body}"))
    }

    /// A streaming call, by v0.3 (no version header) or v1.0 (`A2A-Version: 1.0`) clients.
    async fn stream(&self, method: &str, params: Value, version: Option<&str>) -> SseReader {
        let mut request = self.client.post(&self.url).json(&rpc(4, method, params));
        if let Some(version) = version {
            request = request.header("A2A-Version", version);
        }
        SseReader::new(request.send().await.unwrap())
    }
}

fn v03_message(text: &str) -> Value {
    json!({"kind": "message", "messageId": uuid::Uuid::new_v4().to_string(), "role": "user",
           "parts": [{"kind": "text", "text": text}]})
}

fn v03_error(body: &Value, code: i64) {
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
}

/// The `kind`, state and chunk text of each v0.3 stream result, compactly.
fn v03_summary(result: &Value) -> String {
    match result["kind"].as_str().unwrap_or("?") {
        "task" => format!("task {}", result["status"]["state"].as_str().unwrap_or("?")),
        "status-update" => {
            format!("status {} final={}", result["status"]["state"].as_str().unwrap(), result["final"])
        }
        "artifact-update" => {
            format!("chunk {}", result["artifact"]["parts"][0]["text"].as_str().unwrap_or("?"))
        }
        other => other.to_owned(),
    }
}

/// The same summary of a v1.0 StreamResponse.
fn v1_summary(result: &Value) -> String {
    if let Some(task) = result.get("task") {
        return format!("task {}", v03_state(&task["status"]["state"]));
    }
    if let Some(update) = result.get("statusUpdate") {
        let state = v03_state(&update["status"]["state"]);
        let last =
            ["completed", "failed", "canceled", "rejected", "input-required"].contains(&state.as_str());
        return format!("status {state} final={last}");
    }
    format!("chunk {}", json_chunks(result).join(","))
}

fn v03_state(v1: &Value) -> String {
    v1.as_str().unwrap().trim_start_matches("TASK_STATE_").to_lowercase().replace('_', "-")
}

async fn results(reader: SseReader) -> Vec<(Option<String>, Value)> {
    reader.collect().await.into_iter().map(|e| (e.id.clone(), e.json()["result"].clone())).collect()
}

#[tokio::test]
async fn send_get_cancel_in_v03_shapes() {
    let server = TestServer::start().await;
    let rpc = Rpc::new(&server);
    let task = rpc.result("message/send", json!({"message": v03_message("hello")})).await;
    assert_eq!(task["kind"], "task");
    assert_eq!(task["status"]["state"], "completed");
    assert_eq!(task["history"][0]["kind"], "message");
    assert_eq!(task["history"][0]["role"], "user");
    assert_eq!(task["artifacts"][0]["parts"][0]["kind"], "text");
    let id = task["id"].as_str().unwrap();

    let got = rpc.result("tasks/get", json!({"id": id, "historyLength": 0})).await;
    assert_eq!((got["kind"].as_str(), got["id"].as_str()), (Some("task"), Some(id)));
    assert!(got.get("history").is_none(), "historyLength 0: {got}");

    v03_error(&rpc.call("tasks/cancel", json!({"id": id})).await, -32002);
    v03_error(&rpc.call("tasks/get", json!({"id": "nope"})).await, -32001);
    v03_error(&rpc.call("tasks/cancel", json!({"id": "nope"})).await, -32001);
    v03_error(&rpc.call("tasks/get", json!({})).await, -32602);
    v03_error(
        &rpc.call("message/send", json!({"message": {"role": "user", "parts": [{"kind": "video"}]}})).await,
        -32602,
    );

    let waiting = rpc.result("message/send", json!({"message": v03_message("input")})).await;
    assert_eq!(waiting["status"]["state"], "input-required");
    let canceled = rpc.result("tasks/cancel", json!({"id": waiting["id"]})).await;
    assert_eq!(canceled["status"]["state"], "canceled");
    // A message reply (the demo's `message TEXT`) is the Message itself.
    let reply = rpc.result("message/send", json!({"message": v03_message("message hi")})).await;
    assert_eq!(reply["kind"], "message", "{reply}");
    // Non-blocking: the Task comes back before it is done.
    let params = json!({"message": v03_message("stream 2 300"), "configuration": {"blocking": false}});
    let early = rpc.result("message/send", params).await;
    assert_ne!(early["status"]["state"], "completed");
}

#[tokio::test]
async fn stream_opens_with_the_task_and_ends_with_final() {
    let server = TestServer::start().await;
    let rpc = Rpc::new(&server);
    let events =
        results(rpc.stream("message/stream", json!({"message": v03_message("stream 3 0")}), None).await)
            .await;
    let summary: Vec<_> = events.iter().map(|(_, r)| v03_summary(r)).collect();
    assert_eq!(summary.first().map(String::as_str), Some("task submitted"), "{summary:?}");
    assert_eq!(summary.last().map(String::as_str), Some("status completed final=true"), "{summary:?}");
    let chunks: Vec<_> = summary.iter().filter(|s| s.starts_with("chunk")).collect();
    assert_eq!(chunks, ["chunk chunk 0", "chunk chunk 1", "chunk chunk 2"]);
    assert!(events.iter().all(|(id, _)| id.is_some()), "every frame has its sequence id");
}

#[tokio::test]
async fn v03_and_v1_subscribers_see_the_same_events_in_order() {
    let server = TestServer::start().await;
    let rpc = Rpc::new(&server);
    let task = rpc
        .result(
            "message/send",
            json!({"message": v03_message("stream 6 150"),
                                               "configuration": {"blocking": false}}),
        )
        .await;
    let id = task["id"].as_str().unwrap().to_owned();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let (v03, v1) = tokio::join!(
        rpc.stream("tasks/resubscribe", json!({"id": id}), None),
        rpc.stream("SubscribeToTask", json!({"id": id}), Some("1.0")),
    );
    let (v03, v1) = tokio::join!(results(v03), results(v1));
    // Each opens with the Task snapshot (mid-stream: already working, some chunks in it).
    assert_eq!(v03[0].1["kind"], "task", "{:?}", v03[0]);
    assert_eq!(v03[0].1["status"]["state"], "working");
    assert!(v1[0].1.get("task").is_some());
    // After the snapshots, both are the same events (same sequence ids), in the same order.
    let tail = |events: &[(Option<String>, Value)],
                summary: fn(&Value) -> String|
     -> Vec<(Option<String>, String)> {
        events[1..].iter().map(|(id, r)| (id.clone(), summary(r))).collect()
    };
    let (v03_tail, v1_tail) = (tail(&v03, v03_summary), tail(&v1, v1_summary));
    if v03[0].0 == v1[0].0 {
        assert_eq!(v03_tail, v1_tail);
    } else {
        // Subscribed at different points: the later one's events are a suffix of the other's.
        let (long, short) =
            if v03_tail.len() >= v1_tail.len() { (&v03_tail, &v1_tail) } else { (&v1_tail, &v03_tail) };
        assert!(long.ends_with(short), "{v03_tail:?} vs {v1_tail:?}");
    }
    // No gap, no duplicate: the snapshot's chunks plus the streamed ones are each chunk once.
    let snapshot_chunks = v03[0].1["artifacts"][0]["parts"].as_array().map_or(0, Vec::len);
    let streamed = v03_tail.iter().filter(|(_, s)| s.starts_with("chunk")).count();
    assert_eq!(snapshot_chunks + streamed, 6, "{v03:?}");
    assert_eq!(v03_tail.last().unwrap().1, "status completed final=true");
}

#[tokio::test]
async fn a_task_is_shared_across_versions() {
    let server = TestServer::start().await;
    let rpc = Rpc::new(&server);
    // Created by v0.3, read by v1.0 (gRPC).
    let task = rpc.result("message/send", json!({"message": v03_message("hello")})).await;
    let mut grpc = server.client().await;
    let request =
        a2a_server::proto::GetTaskRequest { id: task["id"].as_str().unwrap().into(), ..Default::default() };
    let read = grpc.get_task(request).await.unwrap().into_inner();
    assert_eq!(state(&read), a2a_server::proto::TaskState::Completed);
    assert_eq!(read.context_id, task["contextId"].as_str().unwrap());
    // Created by v1.0, read, continued and subscribed by v0.3.
    let v1 = send_task(&mut grpc, send("input")).await;
    let got = rpc.result("tasks/get", json!({"id": v1.id})).await;
    assert_eq!(
        (got["kind"].as_str(), got["status"]["state"].as_str()),
        (Some("task"), Some("input-required"))
    );
    let subscription = rpc.stream("tasks/resubscribe", json!({"id": v1.id}), None).await;
    let mut message = v03_message("stream 2 0");
    message["taskId"] = json!(v1.id);
    message["contextId"] = json!(v1.context_id);
    let done = rpc.result("message/send", json!({"message": message})).await;
    assert_eq!(done["status"]["state"], "completed");
    let summary: Vec<_> = results(subscription).await.iter().map(|(_, r)| v03_summary(r)).collect();
    assert_eq!(summary.first().map(String::as_str), Some("task input-required"), "{summary:?}");
    assert_eq!(summary.last().map(String::as_str), Some("status completed final=true"), "{summary:?}");
    // A terminal task has nothing to resubscribe to.
    // Errors of streaming methods come as a one-event stream: v0.3 clients read those as SSE.
    for (id, code) in [(v1.id.as_str(), -32004), ("nope", -32001)] {
        let events = rpc.stream("tasks/resubscribe", json!({"id": id}), None).await.collect().await;
        assert_eq!(events.len(), 1);
        v03_error(&events[0].json(), code);
    }
}

#[tokio::test]
async fn push_config_set_get_list_delete() {
    let server =
        TestServer::builder().settings(push_settings(Policy::with_allowlist(true, &[]))).start().await;
    let rpc = Rpc::new(&server);
    let task = rpc.result("message/send", json!({"message": v03_message("input")})).await;
    let id = task["id"].as_str().unwrap();
    let config = json!({"taskId": id, "pushNotificationConfig": {"id": "p1", "url": "http://127.0.0.1:9/hook",
        "token": "tok", "authentication": {"schemes": ["Bearer"], "credentials": "secret"}}});
    assert_eq!(rpc.result("tasks/pushNotificationConfig/set", config.clone()).await, config);
    let default = json!({"taskId": id, "pushNotificationConfig": {"url": "http://127.0.0.1:9/other"}});
    let set = rpc.result("tasks/pushNotificationConfig/set", default).await;
    assert_eq!(set["pushNotificationConfig"]["id"], id, "no id: the task's");
    let got = rpc
        .result("tasks/pushNotificationConfig/get", json!({"id": id, "pushNotificationConfigId": "p1"}))
        .await;
    assert_eq!(got, config);
    let got = rpc.result("tasks/pushNotificationConfig/get", json!({"id": id})).await;
    assert_eq!(got["pushNotificationConfig"]["url"], "http://127.0.0.1:9/other");
    let listed = rpc.result("tasks/pushNotificationConfig/list", json!({"id": id})).await;
    assert_eq!(listed.as_array().map(Vec::len), Some(2), "{listed}");
    let deleted = rpc
        .call("tasks/pushNotificationConfig/delete", json!({"id": id, "pushNotificationConfigId": "p1"}))
        .await;
    assert_eq!(deleted["result"], Value::Null, "{deleted}");
    assert!(deleted.get("error").is_none());
    let gone = rpc
        .call("tasks/pushNotificationConfig/get", json!({"id": id, "pushNotificationConfigId": "p1"}))
        .await;
    v03_error(&gone, -32001);
    // Without push support: -32003.
    let plain = TestServer::start().await;
    let body = Rpc::new(&plain).call("tasks/pushNotificationConfig/list", json!({"id": id})).await;
    v03_error(&body, -32003);
}

#[tokio::test]
async fn versions_and_extension_headers() {
    let server = TestServer::start().await;
    let rpc = Rpc::new(&server);
    let send = |version: &'static str| {
        let body = common::rpc(1, "message/send", json!({"message": v03_message("hello")}));
        rpc.client.post(&rpc.url).header("A2A-Version", version).json(&body).send()
    };
    let as_03: Value = send("0.3").await.unwrap().json().await.unwrap();
    assert_eq!(as_03["result"]["kind"], "task", "A2A-Version 0.3 is v0.3");
    let as_1: Value = send("1.0").await.unwrap().json().await.unwrap();
    assert_eq!(as_1["error"]["code"], -32601, "a v0.3 method name is not a v1.0 method: {as_1}");
    assert!(as_1["error"]["message"].as_str().unwrap().contains("v0.3"), "the error says why: {as_1}");
    // v1.0 methods without a version keep today's behaviour.
    let v1 = rpc.result("SendMessage", json!({"message": json_message("hello")})).await;
    assert!(v1.get("task").is_some());
    // Both extension headers reach the core (an unknown extension is simply not active).
    for header in ["X-A2A-Extensions", "A2A-Extensions"] {
        let body = common::rpc(2, "message/send", json!({"message": v03_message("hello")}));
        let response =
            rpc.client.post(&rpc.url).header(header, "urn:nothing").json(&body).send().await.unwrap();
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["result"]["kind"], "task", "{header}: {body}");
    }
    let card = rpc.call("agent/getAuthenticatedExtendedCard", json!({})).await;
    assert!(card["error"]["code"].as_i64().is_some_and(|c| c == -32004 || c == -32007), "{card}");
}

/// Checks `value` against the v1.0 message `name` as the v1.0 card schema does
/// (`additionalProperties: false`): every key must be a field of the message, recursively.
fn assert_only_v1_fields(value: &Value, descriptor: &prost_reflect::MessageDescriptor, path: &str) {
    let Some(map) = value.as_object() else { return };
    for (key, item) in map {
        let field = descriptor
            .fields()
            .find(|f| f.json_name() == key)
            .unwrap_or_else(|| panic!("{path}.{key} is not a field of {}", descriptor.full_name()));
        let prost_reflect::Kind::Message(inner) = field.kind() else { continue };
        if inner.full_name().starts_with("google.protobuf.") || field.is_map() {
            continue;
        }
        let items =
            if field.is_list() { item.as_array().cloned().unwrap_or_default() } else { vec![item.clone()] };
        for item in &items {
            assert_only_v1_fields(item, &inner, &format!("{path}.{key}"));
        }
    }
}

#[tokio::test]
async fn one_card_url_for_both_generations() {
    let server = TestServer::start().await;
    let url = format!("{}/.well-known/agent-card.json", server.url());
    let client = reqwest::Client::new();
    let v03 = client.get(&url).send().await.unwrap();
    assert_eq!(v03.headers()["vary"], "a2a-version");
    let v03_etag = v03.headers()["etag"].clone();
    let v03: Value = v03.json().await.unwrap();
    let jsonrpc =
        v03["supportedInterfaces"].as_array().unwrap().iter().find(|i| i["protocolBinding"] == "JSONRPC");
    assert_eq!(v03["url"], jsonrpc.unwrap()["url"], "v0.3 clients are sent to the JSON-RPC interface");
    assert_eq!(v03["preferredTransport"], "JSONRPC");
    assert_eq!(v03["protocolVersion"], "0.3.0");
    let transports: Vec<_> =
        v03["additionalInterfaces"].as_array().unwrap().iter().map(|i| i["transport"].clone()).collect();
    assert_eq!(transports, ["JSONRPC", "HTTP+JSON", "GRPC"], "v0.3 is served on every binding");
    assert_eq!(v03["additionalInterfaces"][2]["url"], server.addr.to_string(), "gRPC: host:port");
    // The v1.0 card is all there too: a v1.0 client reading it ignores the rest.
    assert_eq!(v03["supportedInterfaces"].as_array().map(Vec::len), Some(3));
    let card: a2a_server::proto::AgentCard = a2a_server::protojson::decode(&v03).unwrap();
    assert_eq!(card.name, "a2a-server demo agent");

    let descriptor = a2a_server::protojson::descriptor::<a2a_server::proto::AgentCard>();
    for asked in [client.get(&url).header("A2A-Version", "1.0"), client.get(format!("{url}?a2a-version=1.0"))]
    {
        let v1 = asked.send().await.unwrap();
        assert_ne!(v1.headers()["etag"], v03_etag, "each variant has its own ETag");
        let v1: Value = v1.json().await.unwrap();
        assert!(v1.get("url").is_none() && v1.get("protocolVersion").is_none(), "{v1}");
        assert_only_v1_fields(&v1, &descriptor, "card");
    }
    let strict = std::panic::catch_unwind(|| assert_only_v1_fields(&v03, &descriptor, "card"));
    assert!(strict.is_err(), "the checker does reject the v0.3 fields");

    let off = TestServer::builder().http(HttpSettings { v03: false, ..Default::default() }).start().await;
    let plain: Value = reqwest::get(format!("{}/.well-known/agent-card.json", off.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_only_v1_fields(&plain, &descriptor, "card");
    let body = Rpc::new(&off).call("message/send", json!({"message": v03_message("hello")})).await;
    assert_eq!(body["error"]["code"], -32601, "--v03 off: v0.3 methods are unknown");
}

#[tokio::test]
async fn browsers_may_send_the_v03_extension_header() {
    let origin = "https://app.example";
    let server = TestServer::builder().cors([origin]).start().await;
    let response = reqwest::Client::new()
        .request(reqwest::Method::OPTIONS, format!("{}/", server.url()))
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type,x-a2a-extensions")
        .send()
        .await
        .unwrap();
    let allowed =
        response.headers().get("access-control-allow-headers").unwrap().to_str().unwrap().to_lowercase();
    assert!(allowed.contains("x-a2a-extensions"), "{allowed}");
}
