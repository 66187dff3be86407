//! The HTTP+JSON binding over a real socket, the Agent Card and the probes.
mod common;

use common::*;
use serde_json::{Value, json};

struct Rest {
    client: reqwest::Client,
    base: String,
}

impl Rest {
    fn new(server: &TestServer) -> Self {
        Self { client: reqwest::Client::new(), base: server.url() }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn post(&self, path: &str, body: Value) -> reqwest::Response {
        self.client.post(self.url(path)).json(&body).send().await.unwrap()
    }

    async fn get(&self, path: &str) -> reqwest::Response {
        self.client.get(self.url(path)).send().await.unwrap()
    }

    async fn ok(response: reqwest::Response) -> Value {
        assert_eq!(response.status(), 200, "{:?}", response.text().await);
        response.json().await.unwrap()
    }

    async fn send(&self, tenant: &str, text: &str) -> Value {
        Self::ok(self.post(&format!("{tenant}/message:send"), json!({"message": json_message(text)})).await)
            .await
    }
}

fn id_of(sent: &Value) -> String {
    sent["task"]["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn send_get_list_cancel_routes() {
    let server = TestServer::start().await;
    let rest = Rest::new(&server);
    let sent = rest.send("", "hello").await;
    assert_eq!(json_state(&sent["task"]).as_deref(), Some("TASK_STATE_COMPLETED"));
    let id = id_of(&sent);

    let task = Rest::ok(rest.get(&format!("/tasks/{id}?historyLength=0")).await).await;
    assert_eq!(task["id"], id.as_str());
    assert!(task.get("history").is_none());
    let task = Rest::ok(rest.get(&format!("/tasks/{id}?history_length=1")).await).await;
    assert_eq!(task["history"].as_array().unwrap().len(), 1, "snake_case query names work too");

    next_millisecond().await;
    rest.send("", "second").await;
    let page = Rest::ok(rest.get("/tasks?pageSize=1&includeArtifacts=true").await).await;
    assert_eq!(page["totalSize"], 2);
    assert_eq!(page["pageSize"], 1);
    assert_eq!(page["tasks"][0]["artifacts"][0]["parts"][0]["text"], "second", "newest first");
    let token = page["nextPageToken"].as_str().unwrap();
    let last = Rest::ok(rest.get(&format!("/tasks?pageSize=1&pageToken={token}")).await).await;
    assert_eq!(last["tasks"][0]["id"], id.as_str());
    assert_eq!(last["nextPageToken"], "");
    assert!(last["tasks"][0].get("artifacts").is_none());
    let filtered = Rest::ok(rest.get("/tasks?status=TASK_STATE_WORKING").await).await;
    assert_eq!(filtered["totalSize"], 0);
    assert_eq!(filtered["tasks"], json!([]));

    let running = Rest::ok(
        rest.post(
            "/message:send",
            json!({"message": json_message("stream 100 200"), "configuration": {"returnImmediately": true}}),
        )
        .await,
    )
    .await;
    let canceled = Rest::ok(rest.post(&format!("/tasks/{}:cancel", id_of(&running)), json!({})).await).await;
    assert_eq!(json_state(&canceled).as_deref(), Some("TASK_STATE_CANCELED"));
    // A cancel without any body works as well.
    let again =
        rest.client.post(rest.url(&format!("/tasks/{}:cancel", id_of(&running)))).send().await.unwrap();
    assert_http_error(again, 400, "TASK_NOT_CANCELABLE").await;
}

#[tokio::test]
async fn tenant_prefixed_routes_scope_tasks() {
    let server = TestServer::start().await;
    let rest = Rest::new(&server);
    let sent = rest.send("/acme", "hello").await;
    let id = id_of(&sent);
    Rest::ok(rest.get(&format!("/acme/tasks/{id}")).await).await;
    assert_http_error(rest.get(&format!("/tasks/{id}")).await, 404, "TASK_NOT_FOUND").await;
    assert_http_error(rest.get(&format!("/globex/tasks/{id}")).await, 404, "TASK_NOT_FOUND").await;
    let mine = Rest::ok(rest.get("/acme/tasks").await).await;
    assert_eq!(mine["totalSize"], 1);
    let theirs = Rest::ok(rest.get("/tasks").await).await;
    assert_eq!(theirs["totalSize"], 0);
}

#[tokio::test]
async fn streams_are_sse_with_sequence_ids_and_subscribe_takes_get_and_post() {
    let server = TestServer::start().await;
    let rest = Rest::new(&server);
    let response = rest.post("/message:stream", json!({"message": json_message("stream 3 0")})).await;
    let events = SseReader::new(response).collect().await;
    let items: Vec<Value> = events.iter().map(SseEvent::json).collect();
    assert!(items[0].get("task").is_some());
    assert_eq!(items.iter().flat_map(json_chunks).collect::<Vec<_>>(), ["chunk 0", "chunk 1", "chunk 2"]);
    let ids: Vec<u64> = events.iter().map(|e| e.id.as_deref().unwrap().parse().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "increasing sequence ids: {ids:?}");

    for method in [reqwest::Method::GET, reqwest::Method::POST] {
        let idle = rest.send("/t1", "input").await;
        let id = id_of(&idle);
        let subscribe = rest.client.request(method.clone(), rest.url(&format!("/t1/tasks/{id}:subscribe")));
        let mut stream = SseReader::new(subscribe.send().await.unwrap());
        let first = stream.next().await.unwrap();
        assert_eq!(json_state(&first.json()).as_deref(), Some("TASK_STATE_INPUT_REQUIRED"));
        let mut answer = json_message("blue");
        answer["taskId"] = json!(id);
        Rest::ok(rest.post("/t1/message:send", json!({"message": answer})).await).await;
        let rest_items: Vec<Value> = stream.collect().await.iter().map(SseEvent::json).collect();
        assert_eq!(
            json_state(rest_items.last().unwrap()).as_deref(),
            Some("TASK_STATE_COMPLETED"),
            "{method}"
        );
    }
}

#[tokio::test]
async fn errors_are_google_rpc_status_json() {
    let server = TestServer::start().await;
    let rest = Rest::new(&server);
    let body = assert_http_error(rest.get("/tasks/nope").await, 404, "TASK_NOT_FOUND").await;
    assert_eq!(body["error"]["status"], "NOT_FOUND");
    assert_eq!(body["error"]["details"][0]["metadata"]["taskId"], "nope");

    let done = rest.send("", "hi").await;
    let terminal = rest.get(&format!("/tasks/{}:subscribe", id_of(&done))).await;
    assert_http_error(terminal, 400, "UNSUPPORTED_OPERATION").await;

    let bad = assert_http_error(rest.get("/tasks?pageSize=0").await, 400, "INVALID_PARAMS").await;
    assert_eq!(bad["error"]["status"], "INVALID_ARGUMENT");
    assert_eq!(bad["error"]["details"][1]["fieldViolations"][0]["field"], "pageSize");
    assert_http_error(rest.get("/tasks?pageSize=ten").await, 400, "INVALID_PARAMS").await;
    assert_http_error(rest.post("/message:send", json!({})).await, 400, "INVALID_PARAMS").await;
    let unparsable =
        rest.client.post(rest.url("/message:send")).header("content-type", "application/json").body("{");
    assert_http_error(unparsable.send().await.unwrap(), 400, "PARSE_ERROR").await;

    let not_json =
        rest.client.post(rest.url("/message:send")).header("content-type", "text/plain").body("hello");
    // Spec v1.0.1 §5.4: ContentTypeNotSupportedError is HTTP 400, INVALID_ARGUMENT (not 415).
    let unsupported =
        assert_http_error(not_json.send().await.unwrap(), 400, "CONTENT_TYPE_NOT_SUPPORTED").await;
    assert_eq!(unsupported["error"]["status"], "INVALID_ARGUMENT");

    let push =
        rest.post("/tasks/t/pushNotificationConfigs", json!({"url": "https://example.com/hook"})).await;
    assert_http_error(push, 400, "PUSH_NOTIFICATION_NOT_SUPPORTED").await;
    assert_http_error(
        rest.get("/tasks/t/pushNotificationConfigs").await,
        400,
        "PUSH_NOTIFICATION_NOT_SUPPORTED",
    )
    .await;
    assert_http_error(
        rest.get("/tasks/t/pushNotificationConfigs/c").await,
        400,
        "PUSH_NOTIFICATION_NOT_SUPPORTED",
    )
    .await;
    let delete = rest.client.delete(rest.url("/tasks/t/pushNotificationConfigs/c")).send().await.unwrap();
    assert_http_error(delete, 400, "PUSH_NOTIFICATION_NOT_SUPPORTED").await;
    assert_http_error(rest.get("/extendedAgentCard").await, 400, "UNSUPPORTED_OPERATION").await;

    let versioned =
        rest.client.get(rest.url("/tasks/nope")).header("A2A-Version", "99.0").send().await.unwrap();
    assert_http_error(versioned, 400, "VERSION_NOT_SUPPORTED").await;
    assert_http_error(rest.get("/tasks/nope?A2A-Version=99.0").await, 400, "VERSION_NOT_SUPPORTED").await;

    let unknown = rest.get("/no/such/route/at/all").await;
    assert_eq!(unknown.status(), 404);
    let wrong_method = rest.get("/message:send").await;
    assert_eq!(wrong_method.status(), 405);
    assert_eq!(wrong_method.headers()["allow"], "POST");
}

#[tokio::test]
async fn responses_follow_the_accept_header() {
    let server = TestServer::start().await;
    let rest = Rest::new(&server);
    let plain = rest.get("/tasks").await;
    assert_eq!(plain.headers()["content-type"], "application/json");
    let a2a =
        rest.client.get(rest.url("/tasks")).header("accept", "application/a2a+json").send().await.unwrap();
    assert_eq!(a2a.headers()["content-type"], "application/a2a+json");
    let error =
        rest.client.get(rest.url("/tasks/x")).header("accept", "application/a2a+json").send().await.unwrap();
    assert_eq!(error.headers()["content-type"], "application/a2a+json");
    let sent = rest
        .client
        .post(rest.url("/message:send"))
        .header("content-type", "application/a2a+json")
        .body(json!({"message": json_message("hi")}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 200, "application/a2a+json request bodies are JSON");
}

#[tokio::test]
async fn agent_card_is_truthful_and_cacheable() {
    let server = TestServer::start().await;
    let rest = Rest::new(&server);
    let response = rest.get("/.well-known/agent-card.json").await;
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert!(headers["cache-control"].to_str().unwrap().contains("max-age="));
    assert!(headers.contains_key("last-modified"));
    let etag = headers["etag"].to_str().unwrap().to_owned();
    assert!(etag.starts_with('"') && !etag.starts_with("W/"), "a strong ETag: {etag}");
    let card: Value = response.json().await.unwrap();
    let interfaces = card["supportedInterfaces"].as_array().unwrap();
    let bindings: Vec<_> = interfaces.iter().map(|i| i["protocolBinding"].as_str().unwrap()).collect();
    assert_eq!(bindings, ["GRPC", "JSONRPC", "HTTP+JSON"]);
    assert_eq!(interfaces[0]["url"], server.addr.to_string(), "gRPC is a bare host:port");
    assert!(interfaces.iter().all(|i| i["protocolVersion"] == "1.0"));
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(card["capabilities"]["pushNotifications"], false);
    assert!(!card["skills"].as_array().unwrap().is_empty());
    let parsed: a2a_server::proto::AgentCard = a2a_server::protojson::decode(&card).unwrap();
    assert_eq!(parsed.name, "a2a-server demo agent");

    let cached = rest.client.get(rest.url("/.well-known/agent-card.json")).header("if-none-match", &etag);
    let cached = cached.send().await.unwrap();
    assert_eq!(cached.status(), 304);
    assert_eq!(cached.headers()["etag"].to_str().unwrap(), etag);
    let stale =
        rest.client.get(rest.url("/.well-known/agent-card.json")).header("if-none-match", "\"other\"");
    assert_eq!(stale.send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn probes() {
    let server = TestServer::start().await;
    let rest = Rest::new(&server);
    assert_eq!(rest.get("/healthz").await.status(), 200);
    assert_eq!(rest.get("/readyz").await.status(), 200);
}

#[tokio::test]
async fn http2_prior_knowledge_works_too() {
    let server = TestServer::start().await;
    let client = reqwest::Client::builder().http2_prior_knowledge().build().unwrap();
    let response = client.get(format!("{}/tasks", server.url())).send().await.unwrap();
    assert_eq!(response.version(), reqwest::Version::HTTP_2);
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn idle_sse_streams_get_keep_alive_comments() {
    use futures::StreamExt;
    let http = a2a_server::transport::http::HttpSettings {
        sse_keep_alive: std::time::Duration::from_millis(200),
        ..Default::default()
    };
    let server = TestServer::builder().http(http).start().await;
    let rest = Rest::new(&server);
    let idle = rest.send("", "input").await;
    let response = rest.get(&format!("/tasks/{}:subscribe", id_of(&idle))).await;
    let mut body = response.bytes_stream();
    let mut seen = String::new();
    // The snapshot, then nothing happens on the task: only keep-alive comments arrive.
    while !seen.lines().any(|line| line.starts_with(':')) {
        let chunk =
            tokio::time::timeout(PATIENCE, body.next()).await.expect("a keep-alive").unwrap().unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(
        seen.starts_with("id: 2\ndata: {\"task\""),
        "the snapshot at generation 2 (created, INPUT_REQUIRED) first: {seen}"
    );
}
