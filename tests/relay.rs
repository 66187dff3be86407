//! The relay agent (`--agent a2a --upstream URL`, issue #37) in front of real upstream agents:
//! a v1.0 agent built with a2a-sdk 1.x and a v0.3 agent built with a2a-sdk 0.3
//! (`tests/interop/upstream/`), and this server's own demo agent as a gRPC upstream. The real
//! `a2a-server` binary relays; clients call it over gRPC, JSON-RPC and HTTP+JSON.
//!
//! Without the upstream agents' venvs the tests skip loudly, except under `CI=true`.
mod common;
#[path = "relay/upstream.rs"]
mod upstream;

use std::time::Duration;

use a2a_server::proto::a2a_service_client::A2aServiceClient;
use a2a_server::proto::{
    GetTaskRequest, StreamResponse, Task, TaskState, send_message_response, stream_response::Payload,
};
use common::bindings::{self, BINDINGS};
use common::fleet::{Fleet, eventually};
use common::process::ServerProcess;
use common::redis::RedisServer;
use common::*;
use serde_json::json;
use upstream::{CutProxy, UpstreamAgent, Version};

/// An event as the tests compare it: kind, state or artifact flags, and its texts (ids,
/// timestamps and generations differ between the upstream and this server by design).
fn describe(item: &StreamResponse) -> String {
    let text = |message: Option<&a2a_server::proto::Message>| {
        message.map(|m| texts(&m.parts).join("|")).unwrap_or_default()
    };
    match item.payload.as_ref() {
        Some(Payload::Task(task)) => format!("task {:?}", state(task)),
        Some(Payload::StatusUpdate(update)) => {
            let status = update.status.as_ref().unwrap();
            format!(
                "status {:?} {}",
                TaskState::try_from(status.state).unwrap(),
                text(status.message.as_ref())
            )
        }
        Some(Payload::ArtifactUpdate(update)) => {
            let artifact = update.artifact.as_ref().unwrap();
            let parts = texts(&artifact.parts).join("|");
            format!(
                "artifact {} append={} last={} {parts}",
                artifact.artifact_id, update.append, update.last_chunk
            )
        }
        Some(Payload::Message(message)) => format!("message {}", text(Some(message))),
        None => "empty".into(),
    }
}

/// The upstream task id this server keeps in a task's metadata.
fn upstream_id(task: &Task) -> String {
    let metadata = task.metadata.as_ref().expect("the task has metadata");
    let Some(pbjson_types::value::Kind::StructValue(remote)) =
        metadata.fields.get("a2aServerUpstream").and_then(|v| v.kind.clone())
    else {
        panic!("no a2aServerUpstream in {metadata:?}")
    };
    match remote.fields.get("taskId").and_then(|v| v.kind.clone()) {
        Some(pbjson_types::value::Kind::StringValue(id)) => id,
        other => panic!("taskId: {other:?}"),
    }
}

fn relay(args: &[&str]) -> ServerProcess {
    let mut all = vec!["--listen", "127.0.0.1:0", "--agent", "a2a"];
    all.extend_from_slice(args);
    ServerProcess::start(&all)
}

async fn json_stream(
    base: &str,
    path: &str,
    body: serde_json::Value,
    rpc_result: bool,
) -> Vec<StreamResponse> {
    let response = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("A2A-Version", "1.0")
        .json(&body)
        .send()
        .await
        .unwrap();
    let events = SseReader::new(response).collect().await;
    events
        .iter()
        .map(|event| {
            let json = event.json();
            let item = if rpc_result { json["result"].clone() } else { json };
            a2a_server::protojson::decode(&item).unwrap_or_else(|e| panic!("{e}: {item}"))
        })
        .collect()
}

/// gRPC, JSON-RPC and HTTP+JSON streams of `text` through `server`, described.
async fn every_binding(server: &ServerProcess, text: &str) -> Vec<(&'static str, Vec<String>)> {
    let mut client = A2aServiceClient::connect(server.url()).await.unwrap();
    let grpc = collect(client.send_streaming_message(send(text)).await.unwrap().into_inner()).await.unwrap();
    let rpc_body = rpc(1, "SendStreamingMessage", json!({"message": json_message(text)}));
    let jsonrpc = json_stream(&server.url(), "/", rpc_body, true).await;
    let rest =
        json_stream(&server.url(), "/message:stream", json!({"message": json_message(text)}), false).await;
    [("gRPC", grpc), ("JSON-RPC", jsonrpc), ("HTTP+JSON", rest)]
        .into_iter()
        .map(|(name, items)| (name, items.iter().map(describe).collect()))
        .collect()
}

async fn streams_equal_the_upstreams(version: Version) {
    let Some(agent) = UpstreamAgent::start(version, &[]) else { return };
    let server = relay(&["--upstream", &agent.card_url()]);
    let text = "stream 4 20";
    let theirs: Vec<String> = agent.stream(text).await.iter().map(describe).collect();
    assert_eq!(theirs.len(), 7, "the upstream's own stream: {theirs:#?}");
    for (binding, ours) in every_binding(&server, text).await {
        assert_eq!(ours, theirs, "{version:?} over {binding}: this server's events against the upstream's");
    }
    // A v0.3 client of this server gets the relayed task in its own form.
    let v03 = json!({"kind": "message", "messageId": "m-v03", "role": "user", "parts": [{"kind": "text", "text": "stream 2 0"}]});
    let answer = json_answer(reqwest::Client::new().post(server.url()).json(&rpc(
        1,
        "message/send",
        json!({"message": v03}),
    )))
    .await;
    assert_eq!(answer["result"]["kind"], "task", "{answer}");
    assert_eq!(answer["result"]["status"]["state"], "completed", "{answer}");
    assert_eq!(answer["result"]["artifacts"][0]["parts"][1]["text"], "chunk 1", "{answer}");
    // The upstream task is kept with ours, and is done there too.
    let mut client = A2aServiceClient::connect(server.url()).await.unwrap();
    let task = send_task(&mut client, send("stream 2 0")).await;
    assert_eq!(state(&task), TaskState::Completed);
    let theirs = agent.get_task(&upstream_id(&task)).await;
    assert_eq!(state(&theirs), TaskState::Completed);
    assert_eq!(artifact_texts(&theirs), artifact_texts(&task));
}

#[tokio::test]
async fn v10_streams_equal_the_upstreams_on_every_binding() {
    streams_equal_the_upstreams(Version::V10).await;
}

#[tokio::test]
async fn v03_streams_equal_the_upstreams_on_every_binding() {
    streams_equal_the_upstreams(Version::V03).await;
}

async fn turns_cancel_reply_and_failure(version: Version, agent_args: &[&str]) {
    let Some(agent) = UpstreamAgent::start(version, agent_args) else { return };
    let server = relay(&["--upstream", &agent.card_url()]);
    let grpc = A2aServiceClient::connect(server.url()).await.unwrap();
    for binding in BINDINGS {
        let client = bindings::Client::to(server.url(), grpc.clone(), binding, "1.0");
        turns_over(&agent, &client).await;
    }
}

/// Multi-turn, a direct reply, a failure and a cancel through `client`'s binding.
async fn turns_over(agent: &UpstreamAgent, client: &bindings::Client) {
    let binding = client.binding();
    let task = |answer: a2a_server::proto::SendMessageResponse| match answer.payload {
        Some(send_message_response::Payload::Task(task)) => task,
        other => panic!("{binding:?}: expected a task, got {other:?}"),
    };
    // Multi-turn: the follow-up goes to the same upstream task.
    let asked = task(client.send(send("ask")).await.unwrap());
    assert_eq!(state(&asked), TaskState::InputRequired, "{binding:?}: {asked:?}");
    let question = asked.status.as_ref().unwrap().message.as_ref().expect("the question");
    assert_eq!(texts(&question.parts), ["Which city?"]);
    let answered = task(client.send(follow_up(&asked, "Paris")).await.unwrap());
    assert_eq!(state(&answered), TaskState::Completed, "{binding:?}: {answered:?}");
    assert!(artifact_texts(&answered).contains(&"city: Paris".to_owned()), "{answered:?}");
    assert_eq!(upstream_id(&answered), upstream_id(&asked));
    let theirs = agent.get_task(&upstream_id(&answered)).await;
    assert_eq!(state(&theirs), TaskState::Completed);

    // A direct reply upstream is a direct reply here: no task.
    match client.send(send("reply")).await.unwrap().payload {
        Some(send_message_response::Payload::Message(message)) => assert_eq!(texts(&message.parts), ["pong"]),
        other => panic!("{binding:?}: expected a direct message, got {other:?}"),
    }

    // An upstream failure is this task's failure, with the upstream's words.
    let failed = task(client.send(send("fail")).await.unwrap());
    assert_eq!(state(&failed), TaskState::Failed);
    let why = failed.status.as_ref().unwrap().message.as_ref().expect("a reason");
    assert_eq!(texts(&why.parts), ["upstream says no"]);

    // CancelTask here cancels there.
    let started = task(client.send(send_returning_immediately("slow")).await.unwrap());
    let get = GetTaskRequest { id: started.id.clone(), ..Default::default() };
    let mut running = started.clone();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !(state(&running) == TaskState::Working && running.metadata.is_some()) {
        assert!(std::time::Instant::now() < deadline, "the task is not WORKING upstream: {running:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        running = client.get(get.clone()).await.unwrap();
    }
    let remote = upstream_id(&running);
    let canceled = client.cancel(&started.id).await.unwrap();
    assert_eq!(state(&canceled), TaskState::Canceled, "{binding:?}");
    eventually("the upstream task is CANCELED", Duration::from_secs(20), || async {
        state(&agent.get_task(&remote).await) == TaskState::Canceled
    })
    .await;
}

#[tokio::test]
async fn v10_turns_cancel_reply_and_failure_reach_the_upstream() {
    turns_cancel_reply_and_failure(Version::V10, &[]).await;
}

#[tokio::test]
async fn v03_turns_cancel_reply_and_failure_reach_the_upstream() {
    turns_cancel_reply_and_failure(Version::V03, &[]).await;
}

#[tokio::test]
async fn a_v10_upstream_over_http_json_is_relayed_and_resumed() {
    let Some(agent) = UpstreamAgent::start(Version::V10, &[]) else { return };
    let endpoint = format!("http://127.0.0.1:{}/rest", agent.port);
    let server = relay(&["--upstream-binding", "http-json", "--upstream", &endpoint]);
    let theirs: Vec<String> = agent.stream("stream 4 20").await.iter().map(describe).collect();
    let mut client = A2aServiceClient::connect(server.url()).await.unwrap();
    let ours = collect(client.send_streaming_message(send("stream 4 20")).await.unwrap().into_inner())
        .await
        .unwrap();
    assert_eq!(ours.iter().map(describe).collect::<Vec<_>>(), theirs);
    let grpc = A2aServiceClient::connect(server.url()).await.unwrap();
    turns_over(&agent, &bindings::Client::to(server.url(), grpc, bindings::Binding::Grpc, "1.0")).await;
}

#[tokio::test]
async fn an_upstream_that_does_not_stream_is_called_and_read_instead() {
    turns_cancel_reply_and_failure(Version::V03, &["--no-streaming"]).await;
}

async fn killing_the_upstream_fails_the_task(version: Version) {
    let Some(mut agent) = UpstreamAgent::start(version, &[]) else { return };
    let server = relay(&["--upstream", &agent.card_url(), "--upstream-retry-secs", "2"]);
    let mut client = A2aServiceClient::connect(server.url()).await.unwrap();
    let mut stream = client.send_streaming_message(send("stream 100 100")).await.unwrap().into_inner();
    let mut chunks = 0;
    while chunks < 2 {
        let item = next(&mut stream).await.expect("an event");
        chunks += usize::from(matches!(item.payload, Some(Payload::ArtifactUpdate(_))));
    }
    agent.kill9();
    let started = std::time::Instant::now();
    let rest = collect(stream).await.unwrap_or_default();
    let last = rest.last().expect("the stream ends with an event");
    assert_eq!(
        item_state(last),
        Some(TaskState::Failed),
        "{:#?}",
        rest.iter().map(describe).collect::<Vec<_>>()
    );
    let Some(Payload::StatusUpdate(update)) = &last.payload else { unreachable!() };
    let said = texts(&update.status.as_ref().unwrap().message.as_ref().unwrap().parts).concat();
    assert!(said.starts_with(&format!("upstream agent http://127.0.0.1:{}/", agent.port)), "{said}");
    assert!(started.elapsed() < Duration::from_secs(15), "failed after {:?}", started.elapsed());
}

#[tokio::test]
async fn v10_killing_the_upstream_mid_task_fails_the_task_naming_it() {
    killing_the_upstream_fails_the_task(Version::V10).await;
}

#[tokio::test]
async fn v03_killing_the_upstream_mid_task_fails_the_task_naming_it() {
    killing_the_upstream_fails_the_task(Version::V03).await;
}

async fn a_cut_stream_is_resumed_without_loss(version: Version, binding: &str, path: &str) {
    let Some(agent) = UpstreamAgent::start(version, &[]) else { return };
    let proxy = CutProxy::start(agent.port).await;
    let endpoint = format!("http://127.0.0.1:{}{path}", proxy.port);
    let server = relay(&[
        "--upstream-binding",
        binding,
        "--upstream-version",
        version.flag(),
        "--upstream",
        &endpoint,
    ]);
    let mut client = A2aServiceClient::connect(server.url()).await.unwrap();
    let mut stream = client.send_streaming_message(send("stream 12 150")).await.unwrap().into_inner();
    let mut seen = Vec::new();
    while seen
        .iter()
        .filter(|i: &&StreamResponse| matches!(i.payload, Some(Payload::ArtifactUpdate(_))))
        .count()
        < 3
    {
        seen.push(next(&mut stream).await.expect("an event"));
    }
    // Down for 5 chunks' time: the relay must catch up what it missed, then follow again.
    assert!(
        proxy.cut_for(Duration::from_millis(750)) >= 1,
        "the relay's upstream stream went through the proxy"
    );
    seen.extend(collect(stream).await.unwrap());
    let described: Vec<String> = seen.iter().map(describe).collect();
    let chunks: Vec<String> = seen.iter().flat_map(chunk_texts).collect();
    let expected: Vec<String> = (0..12).map(|i| format!("chunk {i}")).collect();
    assert_eq!(chunks, expected, "{version:?}: every chunk once, in order: {described:#?}");
    assert_eq!(item_state(seen.last().unwrap()), Some(TaskState::Completed), "{described:#?}");
    let task = client
        .get_task(GetTaskRequest { id: seen_task_id(&seen), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(artifact_texts(&task), expected);
}

fn seen_task_id(seen: &[StreamResponse]) -> String {
    match &seen[0].payload {
        Some(Payload::Task(task)) => task.id.clone(),
        other => panic!("the stream opens with the task: {other:?}"),
    }
}

// Multi-threaded: the proxy must run while the test thread waits for the server to start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v10_a_cut_upstream_stream_is_resumed_without_loss() {
    a_cut_stream_is_resumed_without_loss(Version::V10, "jsonrpc", "/").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v10_a_cut_upstream_stream_over_http_json_is_resumed_without_loss() {
    a_cut_stream_is_resumed_without_loss(Version::V10, "http-json", "/rest").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v03_a_cut_upstream_stream_is_resumed_without_loss() {
    a_cut_stream_is_resumed_without_loss(Version::V03, "jsonrpc", "/").await;
}

#[tokio::test]
async fn a_follow_up_on_another_replica_continues_the_same_upstream_task() {
    let Some(redis) = RedisServer::start() else { return };
    let Some(agent) = UpstreamAgent::start(Version::V10, &[]) else { return };
    let fleet = Fleet::start(2, &redis.url(), &["--agent", "a2a", "--upstream", &agent.card_url()]);
    let mut first = fleet.replicas[0].client().await;
    let mut second = fleet.replicas[1].client().await;
    let asked = send_task(&mut first, send("ask")).await;
    assert_eq!(state(&asked), TaskState::InputRequired);
    let again = send_task(&mut second, follow_up(&asked, "again")).await;
    assert_eq!(state(&again), TaskState::InputRequired, "{again:?}");
    let answered = send_task(&mut first, follow_up(&asked, "Lyon")).await;
    assert_eq!(state(&answered), TaskState::Completed, "{answered:?}");
    assert!(artifact_texts(&answered).contains(&"city: Lyon".to_owned()), "{answered:?}");
    let theirs = agent.get_task(&upstream_id(&asked)).await;
    assert_eq!(state(&theirs), TaskState::Completed, "one upstream task took all three turns");
}

#[tokio::test]
async fn this_servers_demo_agent_is_relayed_over_grpc() {
    let upstream = ServerProcess::start(&["--listen", "127.0.0.1:0"]);
    let card = format!("{}/.well-known/agent-card.json", upstream.url());
    let server = relay(&["--upstream", &card]);
    let mut direct = A2aServiceClient::connect(upstream.url()).await.unwrap();
    let theirs: Vec<String> =
        collect(direct.send_streaming_message(send("stream 3 10")).await.unwrap().into_inner())
            .await
            .unwrap()
            .iter()
            .map(describe)
            .collect();
    for (binding, ours) in every_binding(&server, "stream 3 10").await {
        // The demo's stream opens with its task, then WORKING; the relay's opens with its own
        // task, then relays the demo's task (its SUBMITTED adds no event) and the rest.
        assert_eq!(ours, theirs, "over {binding}");
    }
    // A follow-up is over only once the upstream took it: the demo's turn stream opens with the
    // task still INPUT_REQUIRED, then the echo, then COMPLETED.
    let mut client = A2aServiceClient::connect(server.url()).await.unwrap();
    let asked = send_task(&mut client, send("input")).await;
    assert_eq!(state(&asked), TaskState::InputRequired);
    let answered = send_task(&mut client, follow_up(&asked, "Paris")).await;
    assert_eq!(state(&answered), TaskState::Completed, "{answered:?}");
    assert_eq!(artifact_texts(&answered), ["Paris"]);
    // AUTH_REQUIRED is followed further: the demo goes on by itself once authorized (a client's
    // stream ends at the interruption; the task here still completes).
    let waiting = send_task(&mut client, send("auth")).await;
    assert_eq!(state(&waiting), TaskState::AuthRequired);
    let get = GetTaskRequest { id: waiting.id.clone(), ..Default::default() };
    eventually("the relayed task completes after AUTH_REQUIRED", Duration::from_secs(20), || {
        let (mut client, get) = (client.clone(), get.clone());
        async move { state(&client.get_task(get).await.unwrap().into_inner()) == TaskState::Completed }
    })
    .await;

    let card: serde_json::Value = reqwest::get(format!("{}/.well-known/agent-card.json", server.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(card["name"], "a2a-server demo agent", "the upstream's name and skills: {card}");
    assert!(card["skills"].as_array().is_some_and(|s| s.iter().any(|s| s["id"] == "stream")), "{card}");
    let port = server.addr.rsplit(':').next().unwrap();
    assert!(
        card["supportedInterfaces"][0]["url"].as_str().unwrap().ends_with(&format!(":{port}")),
        "our interfaces: {card}"
    );
}

#[tokio::test]
async fn the_upstreams_credentials_come_from_upstream_header_with_env_values() {
    let dir = std::env::temp_dir().join(format!("relay-auth-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let auth = dir.join("auth.toml");
    let key = "upstream-key-0123456789";
    let file =
        format!("[[api_key]]\nsha256 = \"{}\"\nprincipal = \"relay\"\n", a2a_server::auth::hash_hex(key));
    std::fs::write(&auth, file).unwrap();
    let upstream = ServerProcess::start(&["--listen", "127.0.0.1:0", "--auth", auth.to_str().unwrap()]);
    let card = format!("{}/.well-known/agent-card.json", upstream.url());

    let args = [
        "--listen",
        "127.0.0.1:0",
        "--agent",
        "a2a",
        "--upstream",
        &card,
        "--upstream-header",
        "X-API-Key: ${RELAY_TEST_KEY}",
    ];
    let keyed = ServerProcess::start_with_env(&args, &[("RELAY_TEST_KEY", key)]);
    let mut client = A2aServiceClient::connect(keyed.url()).await.unwrap();
    let task = send_task(&mut client, send("stream 2 0")).await;
    assert_eq!(state(&task), TaskState::Completed, "{task:?}");
    assert_eq!(artifact_texts(&task).concat(), "chunk 0chunk 1");

    // Without the key the upstream refuses, and the task fails saying so.
    let keyless = relay(&["--upstream", &card]);
    let mut client = A2aServiceClient::connect(keyless.url()).await.unwrap();
    let task = send_task(&mut client, send("hello")).await;
    assert_eq!(state(&task), TaskState::Failed, "{task:?}");
    let said = texts(&task.status.as_ref().unwrap().message.as_ref().unwrap().parts).concat();
    assert!(said.contains("Unauthenticated"), "{said}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn an_upstream_behind_mtls_is_reached_with_the_relays_client_certificate() {
    use common::certs::{Files, TestCa, write_server_files};
    let ca = TestCa::new("upstream CA");
    let files = Files::new();
    let (cert, key) = write_server_files(&files, &ca.server(1));
    let ca_file = files.write("ca.pem", &ca.pem());
    let relay_pair = ca.client("relay", &[], &[]);
    let client_cert = files.write("relay.pem", &relay_pair.cert);
    let client_key = files.write("relay-key.pem", &relay_pair.key);
    let auth = files.write("auth.toml", "[mtls]\nallow_any = true\n");
    let path = |p: &std::path::Path| p.to_str().unwrap().to_owned();
    let upstream = ServerProcess::start(&[
        "--listen",
        "127.0.0.1:0",
        "--auth",
        &path(&auth),
        "--tls-cert",
        &path(&cert),
        "--tls-key",
        &path(&key),
        "--tls-client-ca",
        &path(&ca_file),
    ]);
    let port = upstream.addr.rsplit(':').next().unwrap().to_owned();
    let tls = [
        "--upstream-ca",
        &path(&ca_file),
        "--upstream-client-cert",
        &path(&client_cert),
        "--upstream-client-key",
        &path(&client_key),
    ];
    let card = format!("https://localhost:{port}/.well-known/agent-card.json");
    let endpoint = format!("https://localhost:{port}/");
    // The card's choice (gRPC), then JSON-RPC named directly.
    for forced in [
        vec!["--upstream", card.as_str()],
        vec!["--upstream-binding", "jsonrpc", "--upstream", endpoint.as_str()],
    ] {
        let mut args = forced.clone();
        args.extend_from_slice(&tls);
        let server = relay(&args);
        let mut client = A2aServiceClient::connect(server.url()).await.unwrap();
        let task = send_task(&mut client, send("stream 2 0")).await;
        assert_eq!(state(&task), TaskState::Completed, "{forced:?}: {task:?}");
        assert_eq!(artifact_texts(&task).concat(), "chunk 0chunk 1");
    }
    // Without the certificate the upstream's TLS refuses the relay at start.
    let output = std::process::Command::new(common::process::BIN)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--agent",
            "a2a",
            "--upstream",
            &card,
            "--upstream-retry-secs",
            "0",
            "--upstream-ca",
            &path(&ca_file),
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("--agent a2a") && said.contains("agent card"), "{said}");
}

#[tokio::test]
async fn an_upstream_that_never_answers_fails_the_task_instead_of_hanging_it() {
    // Connections complete in the listener's backlog, and nothing ever answers them.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}/", silent.local_addr().unwrap());
    for binding in ["jsonrpc", "grpc"] {
        let server =
            relay(&["--upstream-binding", binding, "--upstream", &endpoint, "--upstream-timeout-ms", "500"]);
        let mut client = A2aServiceClient::connect(server.url()).await.unwrap();
        let started = std::time::Instant::now();
        let task = send_task(&mut client, send("hello")).await;
        assert_eq!(state(&task), TaskState::Failed, "{binding}: {task:?}");
        let said = texts(&task.status.as_ref().unwrap().message.as_ref().unwrap().parts).concat();
        assert!(said.contains("no answer within --upstream-timeout-ms"), "{binding}: {said}");
        assert!(started.elapsed() < Duration::from_secs(10), "{binding}: {:?}", started.elapsed());
    }
}

#[tokio::test]
async fn a_failure_never_shows_the_upstream_urls_query() {
    // A closed port: every call is refused. The URL's query stands for a credential.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let endpoint = format!("http://{closed}/a2a?code=SECRET-KEY");
    let server = relay(&["--upstream-binding", "jsonrpc", "--upstream", &endpoint]);
    let mut client = A2aServiceClient::connect(server.url()).await.unwrap();
    let task = send_task(&mut client, send("hello")).await;
    assert_eq!(state(&task), TaskState::Failed, "{task:?}");
    let said = texts(&task.status.as_ref().unwrap().message.as_ref().unwrap().parts).concat();
    assert!(said.starts_with(&format!("upstream agent http://{closed}/a2a:")), "{said}");
    assert!(!said.contains("SECRET"), "{said}");
}
