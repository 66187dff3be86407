//! The `a2a-server` binary itself: flags, start-up errors, where it says it listens, split ports.
mod common;

use a2a_server::proto::GetTaskRequest;
use a2a_server::proto::a2a_service_client::A2aServiceClient;
use common::json_answer;
use common::process::{ServerProcess, run_to_exit};

/// Starts the binary and returns the addresses it prints (`listening on ADDR`, and
/// `HTTP bindings on ADDR` when split).
fn start(args: &[&str]) -> (ServerProcess, String, Option<String>) {
    let process = ServerProcess::start(args);
    let (grpc, http) = (process.addr.clone(), process.http.clone());
    (process, grpc, http)
}

/// The Agent Card served at `address`.
async fn card_at(address: &str) -> serde_json::Value {
    let response = reqwest::get(format!("http://{address}/.well-known/agent-card.json")).await.unwrap();
    response.json().await.unwrap()
}

#[tokio::test]
async fn serves_every_binding_on_one_port() {
    let (_process, grpc, _) = start(&["--listen", "127.0.0.1:0"]);
    let mut client = A2aServiceClient::connect(format!("http://{grpc}")).await.unwrap();
    let error =
        client.get_task(GetTaskRequest { id: "nope".into(), ..Default::default() }).await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::NotFound);
    let card = card_at(&grpc).await;
    let port = grpc.rsplit(':').next().unwrap();
    assert_eq!(card["supportedInterfaces"][0]["url"], format!("localhost:{port}"));
}

#[tokio::test]
async fn http_listen_moves_the_http_side_and_public_addresses_reach_the_card() {
    let (_process, grpc, http) = start(&[
        "--listen",
        "127.0.0.1:0",
        "--http-listen",
        "127.0.0.1:0",
        "--public-url",
        "https://agents.example.com",
        "--card-name",
        "Split",
    ]);
    let http = http.unwrap();
    assert_ne!(grpc, http);
    let card = card_at(&http).await;
    assert_eq!(card["name"], "Split");
    let port = grpc.rsplit(':').next().unwrap();
    assert_eq!(card["supportedInterfaces"][0]["url"], format!("agents.example.com:{port}"));
    assert_eq!(card["supportedInterfaces"][1]["url"], "https://agents.example.com/");
    assert_eq!(card["supportedInterfaces"][2]["url"], "https://agents.example.com");
    // gRPC is on its own port; the HTTP routes are not.
    let on_grpc = reqwest::get(format!("http://{grpc}/.well-known/agent-card.json")).await.unwrap();
    assert_eq!(on_grpc.status(), 404);
    let mut client = A2aServiceClient::connect(format!("http://{grpc}")).await.unwrap();
    assert!(client.get_task(GetTaskRequest { id: "x".into(), ..Default::default() }).await.is_err());
}

#[test]
fn bad_flags_exit_with_code_2_and_a_clear_message() {
    let (code, stderr) = run_to_exit(&["--listen", "not-an-address"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--listen"), "{stderr}");
    let (code, stderr) = run_to_exit(&["--agent", "nope"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("nope"), "{stderr}");
}

#[test]
fn a_bad_card_file_names_the_field() {
    let dir = std::env::temp_dir().join(format!("a2a-card-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("card.json");
    let card = serde_json::json!({
        "name": "x", "description": "d", "version": "1",
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "s", "name": "S", "description": "does s", "tags": []}]
    });
    std::fs::write(&path, card.to_string()).unwrap();
    let (code, stderr) = run_to_exit(&["--listen", "127.0.0.1:0", "--card", path.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(stderr.contains("skills[0].tags"), "{stderr}");
    std::fs::write(&path, "{").unwrap();
    let (code, stderr) = run_to_exit(&["--listen", "127.0.0.1:0", "--card", path.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(stderr.contains("not JSON"), "{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn a_public_url_path_is_served_with_and_without_the_prefix() {
    let (_process, address, _) =
        start(&["--listen", "127.0.0.1:0", "--public-url", "https://agents.example.com/a2a"]);
    let http = reqwest::Client::new();
    let card = card_at(&address).await;
    assert_eq!(card["supportedInterfaces"][1]["url"], "https://agents.example.com/a2a/");
    assert_eq!(card["supportedInterfaces"][2]["url"], "https://agents.example.com/a2a");
    let rpc = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}});
    for path in ["/", "/a2a", "/a2a/"] {
        let body: serde_json::Value =
            json_answer(http.post(format!("http://{address}{path}")).json(&rpc)).await;
        assert_eq!(body["result"]["totalSize"], 0, "JSON-RPC at {path}");
    }
    for path in ["/tasks", "/a2a/tasks", "/a2a/acme/tasks", "/acme/tasks"] {
        let response = http.get(format!("http://{address}{path}")).send().await.unwrap();
        assert_eq!(response.status(), 200, "REST at {path}");
    }
}

#[cfg(not(feature = "otel"))]
#[test]
fn an_otlp_endpoint_without_the_otel_feature_is_a_start_up_error() {
    let (code, stderr) =
        run_to_exit(&["--listen", "127.0.0.1:0", "--otlp-endpoint", "http://127.0.0.1:4317"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--features otel"), "{stderr}");
}

#[tokio::test]
async fn a_push_signing_key_is_published_and_a_bad_one_stops_the_start() {
    let dir = std::env::temp_dir().join(format!("a2a-push-key-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("key.pem");
    let der =
        aws_lc_rs::signature::Ed25519KeyPair::generate_pkcs8(&aws_lc_rs::rand::SystemRandom::new()).unwrap();
    std::fs::write(&key, pem::encode(&pem::Pem::new("PRIVATE KEY", der.as_ref().to_vec()))).unwrap();
    let process = ServerProcess::start_with_env(
        &["--listen", "127.0.0.1:0", "--push"],
        &[("A2A_PUSH_SIGNING_KEY", key.to_str().unwrap())],
    );
    let jwks: serde_json::Value =
        reqwest::get(format!("{}/.well-known/jwks.json", process.url())).await.unwrap().json().await.unwrap();
    assert_eq!(jwks["keys"][0]["kty"], "OKP", "{jwks}");
    assert_eq!(jwks["keys"][0]["alg"], "EdDSA", "{jwks}");
    drop(process);

    let bad = dir.join("bad.pem");
    std::fs::write(&bad, "not a key").unwrap();
    let (code, stderr) = run_to_exit(&["--push", "--push-signing-key", bad.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(code, 2);
    assert!(stderr.contains("--push-signing-key") && stderr.contains("bad.pem"), "{stderr}");
}
