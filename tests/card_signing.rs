//! `--card-signing-key` on the real binary: every card variant served — the v1.0 card, the
//! merged v0.3 card, the pure v0.3 card, the extended card on each binding (v1.0 gRPC,
//! JSON-RPC and HTTP+JSON; v0.3 JSON-RPC) — carries one signature per key, and each verifies
//! with the key `/.well-known/jwks.json` publishes, over the RFC 8785 form of that card without
//! `signatures`; a card changed after signing does not verify. (tests/interop runs the same
//! check with an independent JCS and JWS implementation in Python.)
mod common;

use a2a_server::jose::{B64, jcs};
use a2a_server::proto::GetExtendedAgentCardRequest;
use a2a_server::proto::a2a_service_client::A2aServiceClient;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{self as sig, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair};
use base64::Engine;
use common::process::{ServerProcess, run_to_exit};
use serde_json::{Value, json};

/// Writes a fresh ES256 and a fresh EdDSA key, and an extended card, into a new directory.
fn files() -> (std::path::PathBuf, [String; 3]) {
    let dir = std::env::temp_dir().join(format!("a2a-card-signing-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let rng = SystemRandom::new();
    let ec = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let ed = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let pem = |der: &[u8]| pem::encode(&pem::Pem::new("PRIVATE KEY", der.to_vec()));
    let extended = json!({
        "name": "Extended", "description": "for callers who signed in", "version": "2",
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "s", "name": "S", "description": "ünïcode — and \"quotes\"", "tags": ["t"]}],
        "capabilities": {"extensions": [{"uri": "urn:x", "params": {"n": 1.5, "big": 1e21, "k": [1, 0.000001]}}]}
    });
    let paths = [
        write("ec.pem", pem(ec.as_ref())),
        write("ed.pem", pem(ed.as_ref())),
        write("extended.json", extended.to_string()),
    ];
    (dir, paths)
}

/// Checks that `card` carries one good signature per JWKS key, and that a changed copy of it
/// verifies with none.
fn assert_signed(what: &str, card: &Value, jwks: &Value) {
    let keys = jwks["keys"].as_array().unwrap();
    let signatures = card["signatures"].as_array().unwrap_or_else(|| panic!("{what}: no signatures: {card}"));
    assert_eq!(signatures.len(), keys.len(), "{what}: one signature per key");
    for signature in signatures {
        assert!(verifies(card, signature, jwks), "{what}: {signature} does not verify");
        let mut tampered = card.clone();
        tampered["description"] = format!("{} (changed)", card["description"].as_str().unwrap()).into();
        assert!(!verifies(&tampered, signature, jwks), "{what}: a changed card verifies");
    }
}

fn verifies(card: &Value, signature: &Value, jwks: &Value) -> bool {
    let mut unsigned = card.clone();
    unsigned.as_object_mut().unwrap().shift_remove("signatures");
    let protected = signature["protected"].as_str().unwrap();
    let header: Value = serde_json::from_slice(&B64.decode(protected).unwrap()).unwrap();
    assert_eq!(header["typ"], "JOSE");
    assert!(header["jku"].as_str().unwrap().ends_with("/.well-known/jwks.json"));
    let jwk =
        jwks["keys"].as_array().unwrap().iter().find(|k| k["kid"] == header["kid"]).expect("kid in JWKS");
    assert_eq!(jwk["alg"], header["alg"]);
    let raw = |name: &str| B64.decode(jwk[name].as_str().unwrap()).unwrap();
    let (algorithm, public): (&'static dyn sig::VerificationAlgorithm, Vec<u8>) = match jwk["kty"].as_str() {
        Some("EC") => (&sig::ECDSA_P256_SHA256_FIXED, [vec![4], raw("x"), raw("y")].concat()),
        Some("OKP") => (&sig::ED25519, raw("x")),
        other => panic!("{other:?}"),
    };
    let input = format!("{protected}.{}", B64.encode(jcs::canonical(&unsigned)));
    let bytes = B64.decode(signature["signature"].as_str().unwrap()).unwrap();
    sig::UnparsedPublicKey::new(algorithm, public).verify(input.as_bytes(), &bytes).is_ok()
}

async fn get(url: &str, v1: bool) -> Value {
    let mut request = reqwest::Client::new().get(url);
    if v1 {
        request = request.header("A2A-Version", "1.0");
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200, "{url}");
    response.json().await.unwrap()
}

async fn rpc(url: &str, method: &str, v1: bool) -> Value {
    let mut request =
        reqwest::Client::new().post(url).json(&json!({"jsonrpc": "2.0", "id": 1, "method": method}));
    if v1 {
        request = request.header("A2A-Version", "1.0");
    }
    let answer: Value = request.send().await.unwrap().json().await.unwrap();
    answer.get("result").cloned().unwrap_or_else(|| panic!("{method}: {answer}"))
}

#[tokio::test]
async fn every_card_served_verifies_with_the_published_keys_and_a_changed_one_does_not() {
    let (dir, [ec, ed, extended]) = files();
    let args = ["--listen", "127.0.0.1:0", "--card-signing-key", &ec, "--card-signing-key", &ed];
    let server = ServerProcess::start(&[&args[..], &["--extended-card", &extended]].concat());
    let url = server.url();
    let jwks = get(&format!("{url}/.well-known/jwks.json"), false).await;
    assert_eq!(jwks["keys"].as_array().unwrap().len(), 2, "both keys, without push signing: {jwks}");

    let v1 = get(&format!("{url}/.well-known/agent-card.json"), true).await;
    assert!(v1.get("preferredTransport").is_none());
    assert_signed("v1.0 card", &v1, &jwks);
    let merged = get(&format!("{url}/.well-known/agent-card.json"), false).await;
    assert_eq!(merged["preferredTransport"], "JSONRPC");
    assert_signed("merged v0.3 card", &merged, &jwks);
    assert_ne!(merged["signatures"], v1["signatures"], "each form is signed over itself");
    assert_signed("pure v0.3 card", &get(&format!("{url}/v1/card"), false).await, &jwks);

    let extended = rpc(&url, "GetExtendedAgentCard", true).await;
    assert_eq!(extended["name"], "Extended");
    assert_signed("extended card, JSON-RPC", &extended, &jwks);
    assert_eq!(get(&format!("{url}/extendedAgentCard"), true).await, extended, "HTTP+JSON serves the same");
    let extended_v03 = rpc(&url, "agent/getAuthenticatedExtendedCard", false).await;
    assert_eq!(extended_v03["preferredTransport"], "JSONRPC");
    assert_signed("extended card, v0.3 JSON-RPC", &extended_v03, &jwks);

    let channel = tonic::transport::Endpoint::from_shared(url.clone()).unwrap().connect().await.unwrap();
    let mut request = tonic::Request::new(GetExtendedAgentCardRequest::default());
    request.metadata_mut().insert("a2a-version", "1.0".parse().unwrap());
    let card = A2aServiceClient::new(channel).get_extended_agent_card(request).await.unwrap().into_inner();
    assert_signed("extended card, gRPC", &a2a_server::protojson::encode(&card), &jwks);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_bad_key_file_stops_the_server_naming_the_flag() {
    let (dir, [_, _, extended]) = files();
    let (code, stderr) = run_to_exit(&["--listen", "127.0.0.1:0", "--card-signing-key", &extended]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--card-signing-key"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}
