//! The core's limits over real sockets, on gRPC, grpc-web, JSON-RPC and HTTP+JSON: parts per
//! message, bytes and history entries per task, live tasks in total and per principal,
//! subscriptions per task and per principal, and requests per second per principal — each
//! reached with the exact error of its binding (ErrorInfo reason and `limit`, gRPC
//! RESOURCE_EXHAUSTED, JSON-RPC -31413/-31429, HTTP 413/429 with Retry-After), each slot given
//! back when its task or stream ends, however it ends, and each quota kept per principal.
#[path = "auth/client.rs"]
mod client;
mod common;

use std::time::Duration;

use a2a_server::auth::{AuthFile, Authenticator, hash_hex};
use a2a_server::core::CoreSettings;
use a2a_server::proto::{
    CancelTaskRequest, GetTaskRequest, ListTasksRequest, Part, SendMessageRequest, SubscribeToTaskRequest,
    part,
};
use a2a_server::transport::http::HttpSettings;
use client::{BINDINGS, Binding, Caller, Fail, Held, Op};
use common::fleet::{Fleet, eventually};
use common::redis::RedisServer;
use common::*;
use serde_json::{Value, json};

const ALICE_KEY: &str = "alice-limits-key";
const BOB_KEY: &str = "bob-limits-key";

/// A server where alice and bob each have an API key, with `settings`.
struct World {
    server: TestServer,
    channel: tonic::transport::Channel,
}

impl World {
    async fn start(settings: CoreSettings) -> Self {
        Self::start_with(settings, HttpSettings::default()).await
    }

    async fn start_with(settings: CoreSettings, http: HttpSettings) -> Self {
        let file = format!(
            "[[api_key]]\nsha256 = \"{}\"\nprincipal = \"alice\"\n[[api_key]]\nsha256 = \"{}\"\nprincipal = \"bob\"\n",
            hash_hex(ALICE_KEY),
            hash_hex(BOB_KEY)
        );
        let file: AuthFile = toml::from_str(&file).expect("an auth file");
        let server = TestServer::builder()
            .auth(Authenticator::new(file).expect("valid"))
            .settings(settings)
            .http(http)
            .start()
            .await;
        let channel = server.channel().await;
        Self { server, channel }
    }

    fn alice(&self, binding: Binding) -> Caller {
        Caller::new(self.server.url(), binding, self.channel.clone()).with("X-API-Key", ALICE_KEY)
    }

    fn bob(&self, binding: Binding) -> Caller {
        Caller::new(self.server.url(), binding, self.channel.clone()).with("X-API-Key", BOB_KEY)
    }

    /// Live tasks of the API key named `key` (its principal is `key:<key>`).
    fn live(&self, key: &str) -> usize {
        self.server.core.counted_live_tasks(Some(&format!("key:{key}")))
    }

    async fn streams_of(&self, key: &str, count: usize) {
        let (what, principal) = (format!("{key} holds {count} streams"), format!("key:{key}"));
        self.server.wait_until(&what, |core| core.counted_subscriptions(&principal) == count).await;
    }
}

/// A blocking SendMessage of `text` (it answers once the task waits or ends).
fn send_op(text: &str) -> Op {
    Op::Send(send(text))
}

fn follow_up_op(task_id: &str, text: &str) -> Op {
    let mut request = send(text);
    request.message.as_mut().expect("a message").task_id = task_id.to_owned();
    Op::Send(request)
}

fn subscribe_op(task_id: &str) -> Op {
    Op::Subscribe(SubscribeToTaskRequest { id: task_id.to_owned(), ..Default::default() })
}

fn cancel_op(task_id: &str) -> Op {
    Op::Cancel(CancelTaskRequest { id: task_id.to_owned(), ..Default::default() })
}

fn task_id(answer: &Value) -> String {
    answer["task"]["id"].as_str().unwrap_or_else(|| panic!("a task: {answer}")).to_owned()
}

/// A message of `count` text parts `text`.
fn many_parts(count: usize, text: &str) -> SendMessageRequest {
    let mut request = send(text);
    let part = Part { content: Some(part::Content::Text(text.to_owned())), ..Default::default() };
    request.message.as_mut().expect("a message").parts = vec![part; count];
    request
}

/// Asserts that `result` is the limit `limit` refusing with `reason`, as `binding` renders it.
fn assert_limit<'a>(
    result: &'a Result<Value, Fail>,
    binding: Binding,
    reason: &str,
    limit: &str,
) -> &'a Fail {
    let fail = match result {
        Err(fail) => fail,
        Ok(value) => panic!("{binding:?}: expected {reason} ({limit}), got {value}"),
    };
    assert_eq!((fail.reason.as_str(), fail.metadata.get("limit").map(String::as_str)), (reason, Some(limit)));
    let too_large = reason == "PAYLOAD_TOO_LARGE";
    let code = match binding {
        Binding::Grpc | Binding::GrpcWeb => "RESOURCE_EXHAUSTED",
        Binding::JsonRpc if too_large => "-31413",
        Binding::JsonRpc => "-31429",
        Binding::HttpJson if too_large => "413",
        Binding::HttpJson => "429",
    };
    assert_eq!(fail.code, code, "{binding:?}: {fail:?}");
    fail
}

#[tokio::test]
async fn size_limits_refuse_a_message_before_it_is_stored_on_every_binding() {
    let settings =
        CoreSettings { max_parts: 3, max_history: 2, max_task_bytes: 4096, ..CoreSettings::default() };
    let world = World::start(settings).await;
    for binding in BINDINGS {
        let alice = world.alice(binding);
        let parts = alice.call(&Op::Send(many_parts(4, "word"))).await;
        assert_limit(&parts, binding, "PAYLOAD_TOO_LARGE", "max-parts");
        let large = alice.call(&Op::Send(many_parts(1, &"x".repeat(5000)))).await;
        assert_limit(&large, binding, "PAYLOAD_TOO_LARGE", "max-task-bytes");

        // `input`: the user's message and the agent's question fill a history of two.
        let waiting = alice.call(&send_op("input")).await.expect("a task");
        let id = task_id(&waiting);
        let answer = alice.call(&follow_up_op(&id, "an answer")).await;
        assert_limit(&answer, binding, "PAYLOAD_TOO_LARGE", "max-history");
        let get =
            |history_length| Op::Get(GetTaskRequest { id: id.clone(), history_length, ..Default::default() });
        let task = alice.call(&get(None)).await.expect("the task");
        assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{binding:?}: still waiting");
        assert_eq!(task["history"].as_array().map(Vec::len), Some(2), "{binding:?}: the answer is not in it");
        let last = alice.call(&get(Some(1))).await.expect("the task");
        assert_eq!(
            last["history"].as_array().map(Vec::len),
            Some(1),
            "{binding:?}: historyLength still trims"
        );
        assert_eq!(last["history"][0]["role"], "ROLE_AGENT", "the most recent entry: {last}");
        alice.call(&cancel_op(&id)).await.expect("canceled");
    }
    let list = world.alice(Binding::Grpc).call(&Op::List(ListTasksRequest::default())).await.expect("a list");
    assert_eq!(list["totalSize"], 4, "one `input` task per binding and nothing refused: {list}");
}

#[tokio::test]
async fn a_v03_client_gets_the_limit_as_its_json_rpc_error() {
    let server =
        TestServer::builder().settings(CoreSettings { max_parts: 3, ..Default::default() }).start().await;
    let part = json!({"kind": "text", "text": "word"});
    let message =
        json!({"kind": "message", "messageId": "m-1", "role": "user", "parts": [part, part, part, part]});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}});
    let response = reqwest::Client::new().post(server.url()).json(&body).send().await.expect("JSON-RPC");
    let answer: Value = response.json().await.expect("JSON");
    assert_eq!(answer["error"]["code"], -31413, "{answer}");
    assert_eq!(answer["error"]["data"]["reason"], "PAYLOAD_TOO_LARGE", "{answer}");
}

/// The amplification requests: 100,000 one-word text parts in 1.6 MB of JSON, and
/// 550,000 one-byte parts in 2.75 MB of protobuf. Each is refused, and nothing is stored.
#[tokio::test]
async fn the_amplification_requests_are_refused_on_every_binding() {
    let world = World::start(CoreSettings::default()).await;
    for binding in BINDINGS {
        let request = match binding {
            Binding::Grpc | Binding::GrpcWeb => many_parts(550_000, "a"),
            Binding::JsonRpc | Binding::HttpJson => many_parts(100_000, "word"),
        };
        let refused = world.alice(binding).call(&Op::Send(request)).await;
        let fail = assert_limit(&refused, binding, "PAYLOAD_TOO_LARGE", "max-parts");
        assert!(fail.message.contains("the limit is 1000"), "{fail:?}");
    }
    assert_eq!(world.server.core.counted_live_tasks(None), 0);
    let list = world.alice(Binding::Grpc).call(&Op::List(ListTasksRequest::default())).await.expect("a list");
    assert_eq!(list["totalSize"].as_i64().unwrap_or(0), 0, "{list}");
}

#[tokio::test]
async fn an_agent_past_the_task_bytes_fails_its_task_after_every_event_so_far() {
    let settings = CoreSettings { max_task_bytes: 20_000, ..CoreSettings::default() };
    let server = TestServer::builder().settings(settings).start().await;
    let mut client = server.client().await;
    let stream = client.send_streaming_message(send("stream 1000 0")).await.expect("a stream").into_inner();
    let items = collect(stream).await.expect("the stream ends normally");
    let generations: Vec<i64> = items.iter().map(item_generation).collect();
    let expected: Vec<i64> = (generations[0]..generations[0] + items.len() as i64).collect();
    assert_eq!(generations, expected, "every event, in order, none missing");
    let last = items.last().expect("items");
    assert_eq!(item_state(last), Some(a2a_server::proto::TaskState::Failed));
    let a2a_server::proto::stream_response::Payload::StatusUpdate(update) = last.payload.as_ref().unwrap()
    else {
        panic!("a status update last")
    };
    let why = texts(&update.status.as_ref().unwrap().message.as_ref().expect("a reason").parts).join("");
    assert!(why.contains("--max-task-bytes"), "{why}");
    let streamed: Vec<String> = items.iter().flat_map(chunk_texts).collect();
    assert!(!streamed.is_empty() && streamed.len() < 1000, "{} chunks", streamed.len());

    let id = items.iter().find_map(|item| match &item.payload {
        Some(a2a_server::proto::stream_response::Payload::Task(task)) => Some(task.id.clone()),
        _ => None,
    });
    let task = client.get_task(GetTaskRequest { id: id.expect("a task first"), ..Default::default() }).await;
    let task = task.expect("the task").into_inner();
    assert_eq!(artifact_texts(&task), streamed, "the task holds what was streamed");
    assert_eq!(server.core.counted_live_tasks(None), 0, "its slot is free");
}

#[tokio::test]
async fn live_tasks_are_capped_per_principal_and_in_total_on_every_binding() {
    let settings =
        CoreSettings { max_live_tasks: 3, max_live_tasks_per_principal: 2, ..CoreSettings::default() };
    let world = World::start(settings).await;
    for binding in BINDINGS {
        let (alice, bob) = (world.alice(binding), world.bob(binding));
        let mut ids = Vec::new();
        for _ in 0..2 {
            ids.push(task_id(&alice.call(&send_op("input")).await.expect("a task")));
        }
        let own = alice.call(&send_op("input")).await;
        assert_limit(&own, binding, "QUOTA_EXCEEDED", "max-live-tasks-per-principal");
        let direct = alice.call(&send_op("message hi")).await;
        assert_limit(&direct, binding, "QUOTA_EXCEEDED", "max-live-tasks-per-principal");
        // Bob's own count is apart; the server's total is not.
        let bobs = task_id(&bob.call(&send_op("input")).await.expect("bob's task"));
        let total = bob.call(&send_op("input")).await;
        assert_limit(&total, binding, "QUOTA_EXCEEDED", "max-live-tasks");
        assert_eq!((world.live("alice"), world.live("bob")), (2, 1));
        bob.call(&cancel_op(&bobs)).await.expect("canceled");
        alice.call(&cancel_op(&ids[0])).await.expect("canceled");
        // Given back before the cancel is answered: a new task may follow at once.
        let again = alice.call(&send_op("input")).await.expect("room again");
        for id in [&ids[1], &task_id(&again)] {
            alice.call(&cancel_op(id)).await.expect("canceled");
        }
        assert_eq!(world.server.core.counted_live_tasks(None), 0, "{binding:?}");
    }
}

#[tokio::test]
async fn a_live_slot_is_freed_when_its_task_hibernates_and_however_its_task_ends() {
    let settings = CoreSettings {
        max_live_tasks_per_principal: 1,
        idle_timeout: Some(Duration::from_millis(100)),
        ..CoreSettings::default()
    };
    let world = World::start(settings).await;
    let alice = world.alice(Binding::JsonRpc);
    let waiting = task_id(&alice.call(&send_op("input")).await.expect("a task"));
    world.server.wait_until("the task hibernates", |core| core.live_tasks() == 0).await;
    // A hibernated task is parked (`tests/parked.rs`): it holds no live slot.
    assert_eq!(world.live("alice"), 0, "a hibernated task gives its live slot back");
    let canceled = alice.call(&cancel_op(&waiting)).await.expect("revived and canceled");
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELED");

    // Completed, failed, rejected, answered after input, or no task at all: each frees it.
    for text in ["hello", "fail", "reject", "message hi", "hello"] {
        alice.call(&send_op(text)).await.unwrap_or_else(|f| panic!("{text}: {f:?}"));
        assert_eq!(world.live("alice"), 0, "after {text}");
    }
    let asked = task_id(&alice.call(&send_op("input")).await.expect("a task"));
    alice.call(&follow_up_op(&asked, "an answer")).await.expect("completed");
    assert_eq!(world.live("alice"), 0, "an answered task");
    // An agent failing the task (its output too large) frees it too.
    let settings =
        CoreSettings { max_live_tasks_per_principal: 1, max_task_bytes: 10_000, ..Default::default() };
    let world = World::start(settings).await;
    let alice = world.alice(Binding::Grpc);
    let failed = alice.call(&send_op("stream 1000 0")).await.expect("a task");
    assert_eq!(failed["task"]["status"]["state"], "TASK_STATE_FAILED", "{failed}");
    assert!(alice.call(&send_op("hello")).await.is_ok());
}

#[tokio::test]
async fn streams_are_capped_per_task_and_per_principal_and_freed_when_they_end_on_every_binding() {
    let settings = CoreSettings {
        max_subscriptions_per_task: 2,
        max_subscriptions_per_principal: 3,
        ..Default::default()
    };
    // Keep-alives every second, so an HTTP/1.1 stream whose client left is noticed soon.
    let http = HttpSettings { sse_keep_alive: Duration::from_secs(1), ..HttpSettings::default() };
    let world = World::start_with(settings, http).await;
    for binding in BINDINGS {
        let (alice, bob) = (world.alice(binding), world.bob(binding));
        let waiting = task_id(&alice.call(&send_op("input")).await.expect("a task"));
        let mut held: Vec<Held> = Vec::new();
        for _ in 0..2 {
            held.push(alice.open(&subscribe_op(&waiting)).await.expect("a subscription").1);
        }
        let third = alice.call(&subscribe_op(&waiting)).await;
        assert_limit(&third, binding, "QUOTA_EXCEEDED", "max-subscriptions-per-task");
        let stranger = bob.call(&subscribe_op(&waiting)).await;
        assert_eq!(stranger.err().map(|f| f.reason), Some("TASK_NOT_FOUND".into()), "{binding:?}: no leak");

        // A streaming SendMessage counts too: alice's third stream, her last.
        let running = alice.open(&Op::SendStreaming(send("stream 1000 50"))).await.expect("a stream");
        let running_id = running.0["task"]["id"].as_str().expect("the Task first").to_owned();
        held.push(running.1);
        world.streams_of("alice", 3).await;
        let fourth = alice.call(&Op::SendStreaming(send("hello"))).await;
        assert_limit(&fourth, binding, "QUOTA_EXCEEDED", "max-subscriptions-per-principal");
        let bobs = task_id(&bob.call(&send_op("input")).await.expect("bob's task"));
        let (_, bob_held) = bob.open(&subscribe_op(&bobs)).await.expect("bob's own quota");

        // A client that goes away frees its slot.
        drop(held.remove(0));
        world.streams_of("alice", 2).await;
        held.push(alice.open(&subscribe_op(&waiting)).await.expect("room again").1);
        // Streams that end free theirs, though their clients are still there.
        alice.call(&cancel_op(&waiting)).await.expect("canceled");
        alice.call(&cancel_op(&running_id)).await.expect("canceled");
        bob.call(&cancel_op(&bobs)).await.expect("canceled");
        world.streams_of("alice", 0).await;
        world.streams_of("bob", 0).await;
        drop((held, bob_held));
    }
}

#[tokio::test]
async fn the_request_rate_is_limited_per_principal_on_every_binding() {
    for binding in BINDINGS {
        let settings = CoreSettings { max_requests_per_sec: 1, max_requests_burst: 3, ..Default::default() };
        let world = World::start(settings).await;
        let (alice, bob) = (world.alice(binding), world.bob(binding));
        let get = Op::Get(GetTaskRequest { id: "nothing".into(), ..Default::default() });
        // A burst of 3, then one a second: refused within a few calls however slow the machine.
        let mut refused = None;
        for _ in 0..50 {
            match alice.call(&get).await {
                Err(fail) if fail.reason == "RATE_LIMITED" => {
                    refused = Some(fail);
                    break;
                }
                Err(fail) => assert_eq!(fail.reason, "TASK_NOT_FOUND"),
                Ok(value) => panic!("{value}"),
            }
        }
        let refused = Err(refused.unwrap_or_else(|| panic!("{binding:?}: never limited")));
        let fail = assert_limit(&refused, binding, "RATE_LIMITED", "max-requests-per-sec");
        assert_eq!(fail.metadata.get("retryAfterSeconds").map(String::as_str), Some("1"), "{fail:?}");
        let header = (binding == Binding::HttpJson).then_some("1");
        assert_eq!(fail.retry_after.as_deref(), header, "{binding:?}: Retry-After");
        let other = bob.call(&get).await;
        assert_eq!(
            other.err().map(|f| f.reason),
            Some("TASK_NOT_FOUND".into()),
            "{binding:?}: bob's own rate"
        );
    }
}

/// In a fleet a live task counts on the replica that holds it: it leaves its replica's count
/// when it hibernates and joins the count of the replica that revives it, which gives it back
/// when the task ends.
#[tokio::test]
async fn in_a_fleet_a_task_counts_on_the_replica_that_holds_it() {
    let Some(redis) = RedisServer::start() else { return };
    let args = ["--max-live-tasks-per-principal", "1", "--task-idle-secs", "1"];
    let fleet = Fleet::start(2, &redis.url(), &args);
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[1]);
    let (mut on_a, mut on_b) = (a.client().await, b.client().await);
    let waiting = send_task(&mut on_a, send("input")).await;
    let refused = on_a.send_message(send("input")).await.expect_err("a is full");
    assert_a2a_error(&refused, tonic::Code::ResourceExhausted, "QUOTA_EXCEEDED");

    // Once the task hibernated, it is no replica's: a has room again.
    eventually("a has room once the task hibernated", PATIENCE, || {
        let mut on_a = on_a.clone();
        async move { on_a.send_message(send("hello")).await.is_ok() }
    })
    .await;
    // b revives it to follow it: now b is full, until the task ends.
    let request = SubscribeToTaskRequest { id: waiting.id.clone(), ..Default::default() };
    let mut following = on_b.subscribe_to_task(request).await.expect("revived on b").into_inner();
    assert!(next(&mut following).await.is_some(), "the Task first");
    let refused = on_b.send_message(send("input")).await.expect_err("b is full");
    assert_a2a_error(&refused, tonic::Code::ResourceExhausted, "QUOTA_EXCEEDED");
    on_b.cancel_task(CancelTaskRequest { id: waiting.id.clone(), ..Default::default() })
        .await
        .expect("canceled");
    let after = send_task(&mut on_b, send("input")).await;
    assert_eq!(state(&after), a2a_server::proto::TaskState::InputRequired);
}

/// VmRSS of process `pid`, in MiB.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("a VmRSS line");
    let kib: f64 = line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("kB");
    kib / 1024.0
}

/// The server binary's resident memory before and after 20 of each amplification request
/// (JSON-RPC, then gRPC), in MiB; what each answered.
async fn amplification_rss(args: &[&str]) -> ([f64; 3], Vec<String>) {
    let mut all = vec!["--listen", "127.0.0.1:0"];
    all.extend_from_slice(args);
    let server = process::ServerProcess::start(&all);
    let settle = || tokio::time::sleep(Duration::from_millis(500));
    let mut client = a2a_server::proto::a2a_service_client::A2aServiceClient::connect(server.url())
        .await
        .expect("connect");
    client.send_message(send("hello")).await.expect("warm-up");
    settle().await;
    let before = rss_mib(server.pid());
    let params = a2a_server::protojson::encode(&many_parts(100_000, "word"));
    let body = serde_json::to_vec(&rpc(1, "SendMessage", params)).expect("JSON");
    let http = reqwest::Client::new();
    let mut answers = Vec::new();
    for _ in 0..20 {
        let response = http.post(server.url()).header("content-type", "application/json").body(body.clone());
        let answer: Value = response.send().await.expect("JSON-RPC").json().await.expect("JSON");
        answers.push(answer["error"]["data"][0]["reason"].as_str().unwrap_or("accepted").to_owned());
    }
    settle().await;
    let after_json = rss_mib(server.pid());
    let request = many_parts(550_000, "a");
    for _ in 0..20 {
        let answer = client.send_message(request.clone()).await;
        answers.push(answer.err().map_or("accepted".to_owned(), |status| status.code().to_string()));
    }
    settle().await;
    ([before, after_json, rss_mib(server.pid())], answers)
}

/// The attack against the binary with the default limits: 20 JSON-RPC requests of
/// 100,000 parts, then 20 gRPC requests of 550,000 parts, all refused; resident memory
/// afterwards stays far below the 613 MB the issue measured without limits (the bound is
/// generous: what is measured is what decoding a refused request costs at its peak, not what
/// stays). `cargo test --test limits -- --ignored --nocapture amplification` prints the figures.
#[tokio::test]
#[ignore]
async fn amplification_costs_bounded_memory() {
    let ([before, json, grpc], answers) = amplification_rss(&[]).await;
    println!(
        "RSS with the default limits: {before:.0} MiB, after JSON-RPC {json:.0} MiB, after gRPC {grpc:.0} MiB"
    );
    assert!(answers.iter().all(|a| a == "PAYLOAD_TOO_LARGE" || a.contains("exhausted")), "{answers:?}");
    assert!(grpc - before < 300.0, "{before:.0} → {grpc:.0} MiB");
}

/// The same without the limits that refuse it, for comparison (prints only).
#[tokio::test]
#[ignore]
async fn amplification_without_limits_for_comparison() {
    let args = ["--max-parts", "0", "--max-task-bytes", "0"];
    let ([before, json, grpc], answers) = amplification_rss(&args).await;
    println!("RSS without limits: {before:.0} MiB, after JSON-RPC {json:.0} MiB, after gRPC {grpc:.0} MiB");
    println!("answers: {:?}", &answers[..2]);
}
