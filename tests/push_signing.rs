//! Signed webhooks (`--push-signing-key`): every push a real receiver gets verifies against the
//! server's `/.well-known/jwks.json` with an independent JWT implementation (ES256, EdDSA and
//! RS256 keys generated here), a tampered body or a foreign audience does not, the JWKS is
//! public with authentication on, several keys rotate, and a fleet's replicas agree.
mod common;

use std::sync::Arc;

use a2a_server::auth::Authenticator;
use a2a_server::proto::{
    AuthenticationInfo, SendMessageConfiguration, SendMessageRequest, Task, TaskPushNotificationConfig,
};
use a2a_server::push::signing::PushSigner;
use a2a_server::push::ssrf::Policy;
use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair};
use common::fleet::Fleet;
use common::redis::RedisServer;
use common::webhook::{Behaviour, Receiver, Verifier, push_settings};
use common::*;
use serde_json::Value;

/// A fresh private key as the PEM file an operator would give.
fn key_pem(kind: &str) -> String {
    let rng = SystemRandom::new();
    let der = match kind {
        "ES256" => {
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap().as_ref().to_vec()
        }
        "EdDSA" => Ed25519KeyPair::generate_pkcs8(&rng).unwrap().as_ref().to_vec(),
        "RS256" => {
            let key = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
            key.as_der().unwrap().as_ref().to_vec()
        }
        other => panic!("{other}"),
    };
    pem::encode(&pem::Pem::new("PRIVATE KEY", der))
}

/// Writes each of `pems` to a file of its own in a fresh directory.
fn key_files(pems: &[String]) -> (std::path::PathBuf, Vec<std::path::PathBuf>) {
    let dir = std::env::temp_dir().join(format!("a2a-push-keys-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let paths = pems
        .iter()
        .enumerate()
        .map(|(i, pem)| {
            let path = dir.join(format!("key{i}.pem"));
            std::fs::write(&path, pem).unwrap();
            path
        })
        .collect();
    (dir, paths)
}

/// Loads `pems` (one file each, in order) the way `--push-signing-key` does.
fn signer(pems: &[String]) -> Arc<PushSigner> {
    let (dir, paths) = key_files(pems);
    let signer = PushSigner::from_files(&paths).expect("the keys load");
    std::fs::remove_dir_all(&dir).unwrap();
    Arc::new(signer)
}

async fn signing_server(signer: Arc<PushSigner>) -> TestServer {
    let mut settings = push_settings(Policy::with_allowlist(true, &[]));
    settings.push.signing = Some(signer);
    TestServer::builder().settings(settings).start().await
}

fn config(task: &Task, url: &str) -> TaskPushNotificationConfig {
    TaskPushNotificationConfig { task_id: task.id.clone(), url: url.to_owned(), ..Default::default() }
}

#[tokio::test]
async fn every_push_verifies_with_the_published_key_and_a_tampered_one_does_not() {
    for alg in ["ES256", "EdDSA", "RS256"] {
        let signer = signer(&[key_pem(alg)]);
        let server = signing_server(signer.clone()).await;
        let receiver = Receiver::start(Behaviour::Accept).await;
        let mut client = server.client().await;
        let task = send_task(&mut client, send("input")).await;
        client.create_task_push_notification_config(config(&task, &receiver.url)).await.unwrap();
        send_task(&mut client, follow_up(&task, "stream 3 0")).await;
        receiver.wait_for(5).await;

        let verifier = Verifier::fetch(&server.url()).await;
        assert_eq!(verifier.jwks.keys.len(), 1, "{alg}");
        let calls = receiver.calls.lock().unwrap();
        let mut generations = Vec::new();
        let mut jtis = Vec::new();
        for call in calls.iter() {
            let claims = verifier
                .verify(&call.headers, &call.raw, &receiver.url)
                .unwrap_or_else(|e| panic!("{alg}: a genuine push verifies: {e}"));
            let token = call.headers["x-a2a-notification-signature"].to_str().unwrap();
            assert_eq!(
                call.headers["authorization"].to_str().unwrap(),
                format!("Bearer {token}"),
                "{alg}: a config without credentials gets the token as its bearer credential"
            );
            let header = jsonwebtoken::decode_header(token).unwrap();
            assert_eq!(header.kid.as_deref(), Some(signer.kid()));
            assert_eq!(format!("{:?}", header.alg), alg);
            assert_eq!(claims["taskId"], task.id.as_str());
            assert_eq!(claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap(), 300);
            generations.push(claims["generation"].as_u64().unwrap());
            jtis.push(claims["jti"].as_str().unwrap().to_owned());
        }
        assert!(generations.windows(2).all(|w| w[0] < w[1]), "{alg}: generations rise: {generations:?}");
        jtis.sort();
        jtis.dedup();
        assert_eq!(jtis.len(), calls.len(), "{alg}: one jti per event");

        let last = calls.last().unwrap();
        let tampered = String::from_utf8(last.raw.to_vec()).unwrap().replace("COMPLETED", "FAILED");
        assert_ne!(tampered.as_bytes(), &last.raw[..]);
        let error = verifier.verify(&last.headers, tampered.as_bytes(), &receiver.url).unwrap_err();
        assert!(error.contains("not the one signed"), "{alg}: {error}");
        let error = verifier.verify(&last.headers, &last.raw, "http://127.0.0.1:1/other-hook").unwrap_err();
        assert!(error.contains("token"), "{alg}: another receiver's token is refused: {error}");
        let mut forged = last.headers.clone();
        let token = forged["x-a2a-notification-signature"].to_str().unwrap().to_owned();
        let (signed, signature) = token.rsplit_once('.').unwrap();
        let flipped = if signature.starts_with('A') { "B" } else { "A" };
        forged.insert(
            "x-a2a-notification-signature",
            format!("{signed}.{flipped}{}", &signature[1..]).parse().unwrap(),
        );
        assert!(verifier.verify(&forged, &last.raw, &receiver.url).is_err(), "{alg}: a forged signature");
    }
}

#[tokio::test]
async fn several_keys_are_published_and_the_first_signs() {
    let (current, previous) = (key_pem("EdDSA"), key_pem("ES256"));
    let signer = signer(&[current.clone(), previous.clone()]);
    let server = signing_server(signer.clone()).await;
    let verifier = Verifier::fetch(&server.url()).await;
    let kids: Vec<_> = verifier.jwks.keys.iter().map(|k| k.common.key_id.clone().unwrap()).collect();
    assert_eq!(kids.len(), 2, "both keys are published");
    assert_eq!(kids[0], signer.kid(), "the signing key first");
    assert_eq!(signer.alg(), "EdDSA");
    // The previous key alone (before the rotation) has the other kid, still published.
    assert_eq!(kids[1], self::signer(&[previous]).kid());

    let response = reqwest::get(format!("{}/.well-known/jwks.json", server.url())).await.unwrap();
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("application/json"));
    assert!(response.headers()["cache-control"].to_str().unwrap().contains("max-age"));
    let jwks: Value = response.json().await.unwrap();
    for key in jwks["keys"].as_array().unwrap() {
        assert!(key.get("d").is_none(), "no private part is ever published: {key}");
        assert_eq!(key["use"], "sig");
    }
}

#[tokio::test]
async fn a_config_with_credentials_keeps_them_and_the_token_rides_beside() {
    let server = signing_server(signer(&[key_pem("ES256")])).await;
    let receiver = Receiver::start(Behaviour::Accept).await;
    let mut client = server.client().await;
    let task = send_task(&mut client, send("input")).await;
    let with_credentials = TaskPushNotificationConfig {
        authentication: Some(AuthenticationInfo {
            scheme: "Bearer".into(),
            credentials: "client-secret".into(),
        }),
        token: "tok".into(),
        ..config(&task, &receiver.url)
    };
    client.create_task_push_notification_config(with_credentials).await.unwrap();
    send_task(&mut client, follow_up(&task, "done")).await;
    receiver.wait_for(2).await;
    let verifier = Verifier::fetch(&server.url()).await;
    for call in receiver.calls.lock().unwrap().iter() {
        assert_eq!(call.headers["authorization"], "Bearer client-secret", "the spec's MUST comes first");
        assert_eq!(call.headers["x-a2a-notification-token"], "tok");
        verifier.verify(&call.headers, &call.raw, &receiver.url).expect("the signature header verifies");
    }
}

#[tokio::test]
async fn without_a_key_nothing_is_signed_and_there_is_no_jwks() {
    let server =
        TestServer::builder().settings(push_settings(Policy::with_allowlist(true, &[]))).start().await;
    let receiver = Receiver::start(Behaviour::Accept).await;
    let mut client = server.client().await;
    let task = send_task(&mut client, send("input")).await;
    client.create_task_push_notification_config(config(&task, &receiver.url)).await.unwrap();
    send_task(&mut client, follow_up(&task, "done")).await;
    receiver.wait_for(2).await;
    for call in receiver.calls.lock().unwrap().iter() {
        assert!(!call.headers.contains_key("x-a2a-notification-signature"));
        assert!(!call.headers.contains_key("authorization"));
    }
    let response = reqwest::get(format!("{}/.well-known/jwks.json", server.url())).await.unwrap();
    assert_eq!(response.status(), 404);
}

#[tokio::test]
async fn the_jwks_is_public_when_authentication_is_on() {
    let hash = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, b"alice-key");
    let hex: String = hash.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    let file = format!("[[api_key]]\nsha256 = \"{hex}\"\nprincipal = \"alice\"\n");
    let auth = Authenticator::new(toml::from_str(&file).expect("a file")).expect("valid");
    let mut settings = push_settings(Policy::with_allowlist(true, &[]));
    settings.push.signing = Some(signer(&[key_pem("ES256")]));
    let server = TestServer::builder().settings(settings).auth(auth).start().await;
    let jwks = reqwest::get(format!("{}/.well-known/jwks.json", server.url())).await.unwrap();
    assert_eq!(jwks.status(), 200, "no credential needed");
    let tasks = reqwest::get(format!("{}/tasks", server.url())).await.unwrap();
    assert_eq!(tasks.status(), 401, "while the A2A routes need one");
}

#[tokio::test]
async fn in_a_fleet_every_replica_publishes_the_same_keys_and_the_owner_signs() {
    let Some(redis) = RedisServer::start() else { return };
    let (dir, paths) = key_files(&[key_pem("ES256")]);
    const PUBLIC: &str = "https://agents.example.com";
    let key = paths[0].to_str().unwrap();
    let args = ["--push", "--push-allow-private", "--push-signing-key", key, "--public-url", PUBLIC];
    let fleet = Fleet::start(2, &redis.url(), &args);
    let (a, b) = (&fleet.replicas[0], &fleet.replicas[1]);
    let on_a = Verifier::fetch(&a.url()).await;
    let on_b = Verifier::fetch(&b.url()).await.issued_by(PUBLIC);
    assert_eq!(
        serde_json::to_value(&on_a.jwks).unwrap(),
        serde_json::to_value(&on_b.jwks).unwrap(),
        "the same key file, the same JWKS (kid = thumbprint) on every replica"
    );

    let receiver = Receiver::start(Behaviour::Accept).await;
    let request = SendMessageRequest {
        configuration: Some(SendMessageConfiguration {
            task_push_notification_config: Some(TaskPushNotificationConfig {
                url: receiver.url.clone(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..send("input")
    };
    let task = send_task(&mut a.client().await, request).await;
    // The follow-up arrives at B and travels to A, the owner, which delivers and signs.
    send_task(&mut b.client().await, follow_up(&task, "done")).await;
    receiver.wait_for(3).await;
    std::fs::remove_dir_all(&dir).unwrap();
    let calls = receiver.calls.lock().unwrap();
    for call in calls.iter() {
        let claims = on_b.verify(&call.headers, &call.raw, &receiver.url).expect("verifies with B's JWKS");
        assert_eq!(claims["iss"], PUBLIC);
        assert_eq!(claims["taskId"], task.id.as_str());
    }
    assert_eq!(json_state(&calls.last().unwrap().body).as_deref(), Some("TASK_STATE_COMPLETED"));
}
