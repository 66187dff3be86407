//! Principals are namespaced by credential kind and issuer (issue #33, item 3): an API key,
//! a JWT and a client certificate that all name `alice` are three principals, two issuers'
//! `alice`s are two, and only an explicit `namespace` in the auth file merges them. And a
//! credential header sent twice, or holding a comma-joined list, is refused as ambiguous on
//! every binding. Over TLS, so a client certificate can be one of the credentials.
#[path = "auth/client.rs"]
mod client;
mod common;

use std::sync::Arc;

use a2a_server::auth::{Authenticator, hash_hex};
use a2a_server::proto::{GetTaskRequest, ListTasksRequest};
use a2a_server::server::{ClientAuth, Tls, TlsSettings};
use client::{BINDINGS, Binding, Caller, Fail, Op};
use common::certs::{self, Files, Pair, TestCa};
use common::*;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

const KEY: &str = "alice-api-key";
/// Two issuers with their own namespaces, and one whose subjects are the API keys' principals.
const ISSUERS: [(&str, &str, Option<&str>); 3] = [
    ("https://a.test/#tenant:1", "secret-a", None),
    ("https://b.test/", "secret-b", None),
    ("https://merged.test/", "secret-m", Some("key")),
];

struct World {
    server: TestServer,
    ca: TestCa,
    _files: Files,
    /// A client certificate for `alice` (its CN; no SANs).
    alice: Pair,
}

impl World {
    async fn start() -> Self {
        let mut file = format!("[[api_key]]\nsha256 = \"{}\"\nprincipal = \"alice\"\n", hash_hex(KEY));
        for (issuer, secret, namespace) in ISSUERS {
            file.push_str(&format!(
                "[[jwt]]\nissuer = \"{issuer}\"\naudiences = [\"a2a\"]\nalgorithms = [\"HS256\"]\nsecret = \"{secret}\"\n"
            ));
            if let Some(namespace) = namespace {
                file.push_str(&format!("namespace = \"{namespace}\"\n"));
            }
        }
        file.push_str("[mtls]\nallow_any = true\n");
        let auth = Authenticator::new(toml::from_str(&file).expect("an auth file")).expect("valid");
        let ca = TestCa::new("test CA");
        let files = Files::new();
        let (cert, key) = certs::write_server_files(&files, &ca.server(1));
        let mut settings = TlsSettings::new(cert, key);
        settings.client_ca = Some(files.write("clients.pem", &ca.pem()));
        settings.client_auth = ClientAuth::Optional;
        let tls = Arc::new(Tls::new(settings).expect("the TLS files load"));
        let server = TestServer::builder().auth(auth).tls(tls).start().await;
        let alice = ca.client("alice", &[], &[]);
        Self { server, ca, _files: files, alice }
    }

    /// A caller over `binding`, with the client certificate when `certificate`.
    async fn caller(&self, binding: Binding, certificate: bool) -> Caller {
        let identity = certificate.then_some(&self.alice);
        let channel =
            certs::tonic_channel(self.server.addr.port(), &self.ca, identity).await.expect("a TLS channel");
        let http = certs::reqwest_client(&self.ca, identity).build().expect("a TLS client");
        Caller::new(self.server.https_url(), binding, channel).with_http(http)
    }

    /// The callers who all say "alice": by API key, by certificate, and by a JWT of each issuer.
    async fn alices(&self, binding: Binding) -> Vec<(String, Caller)> {
        let anonymous = self.caller(binding, false).await;
        let mut alices = vec![
            ("API key".to_owned(), anonymous.with("X-API-Key", KEY)),
            ("certificate".to_owned(), self.caller(binding, true).await),
        ];
        for (issuer, secret, _) in ISSUERS {
            let bearer = format!("Bearer {}", token(issuer, secret, "alice"));
            alices.push((format!("JWT of {issuer}"), anonymous.with("Authorization", &bearer)));
        }
        alices
    }
}

fn token(issuer: &str, secret: &str, sub: &str) -> String {
    let exp = jsonwebtoken::get_current_timestamp() + 600;
    let claims = json!({"iss": issuer, "aud": "a2a", "sub": sub, "exp": exp});
    let key = EncodingKey::from_secret(secret.as_bytes()).expect("a key");
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &key).expect("a token")
}

fn task_id(reply: &Value) -> String {
    reply["task"]["id"].as_str().unwrap_or_else(|| panic!("a task: {reply}")).to_owned()
}

#[track_caller]
fn assert_fail(result: &Result<Value, Fail>, reason: &str, what: &str) -> Fail {
    match result {
        Err(fail) => {
            assert_eq!(fail.reason, reason, "{what}: {fail:?}");
            fail.clone()
        }
        Ok(value) => panic!("{what}: expected {reason}, got {value}"),
    }
}

/// Which of the "alice" callers are one principal: the API key and the merged issuer's JWT.
fn same_principal(a: usize, b: usize) -> bool {
    a == b || matches!((a, b), (0, 4) | (4, 0))
}

#[tokio::test]
async fn one_name_from_each_kind_and_issuer_is_its_own_principal_unless_merged() {
    let world = World::start().await;
    for binding in BINDINGS {
        let alices = world.alices(binding).await;
        let mut tasks = Vec::new();
        for (who, caller) in &alices {
            let reply = caller.call(&Op::Send(send_returning_immediately("hello"))).await;
            tasks.push(task_id(&reply.unwrap_or_else(|e| panic!("{binding:?} {who}: {e:?}"))));
        }
        for (i, (who, caller)) in alices.iter().enumerate() {
            for (j, (owner, _)) in alices.iter().enumerate() {
                let get = Op::Get(GetTaskRequest { id: tasks[j].clone(), ..Default::default() });
                let result = caller.call(&get).await;
                let what = format!("{binding:?}: {who} reading the task of {owner}");
                if same_principal(i, j) {
                    assert_eq!(result.expect(&what)["id"], tasks[j].as_str(), "{what}");
                } else {
                    assert_fail(&result, "TASK_NOT_FOUND", &what);
                }
            }
            let list = caller.call(&Op::List(ListTasksRequest::default())).await.expect("a list");
            let mut listed: Vec<&str> =
                list["tasks"].as_array().into_iter().flatten().filter_map(|t| t["id"].as_str()).collect();
            listed.retain(|id| tasks.iter().any(|t| t == id));
            let mut own: Vec<&str> =
                (0..alices.len()).filter(|&j| same_principal(i, j)).map(|j| tasks[j].as_str()).collect();
            listed.sort_unstable();
            own.sort_unstable();
            assert_eq!(listed, own, "{binding:?}: {who} lists only its principal's tasks");
        }
    }
}

#[tokio::test]
async fn a_credential_header_sent_twice_or_as_a_list_is_refused_on_every_binding() {
    let world = World::start().await;
    let bearer = format!("Bearer {}", token(ISSUERS[1].0, ISSUERS[1].1, "alice"));
    for binding in BINDINGS {
        let anonymous = world.caller(binding, false).await;
        let cases = [
            ("two X-API-Key headers", anonymous.with("X-API-Key", KEY).and("X-API-Key", KEY), "repeated"),
            (
                "a valid key, then a wrong one",
                anonymous.with("X-API-Key", KEY).and("x-api-key", "x"),
                "repeated",
            ),
            (
                "two Authorization headers",
                anonymous.with("Authorization", &bearer).and("Authorization", &bearer),
                "repeated",
            ),
            ("keys joined by a comma", anonymous.with("X-API-Key", &format!("{KEY}, {KEY}")), "comma"),
            (
                "tokens joined by a comma",
                anonymous.with("Authorization", &format!("{bearer}, {bearer}")),
                "more than one",
            ),
        ];
        for (what, caller, says) in cases {
            let what = format!("{binding:?}: {what}");
            let fail = assert_fail(
                &caller.call(&Op::List(ListTasksRequest::default())).await,
                "UNAUTHENTICATED",
                &what,
            );
            assert!(fail.message.contains(says), "{what}: {fail:?}");
            let code = match binding {
                Binding::Grpc | Binding::GrpcWeb => "UNAUTHENTICATED",
                Binding::JsonRpc => "-31401",
                Binding::HttpJson => "401",
            };
            assert_eq!(fail.code, code, "{what}");
        }
        // One of each is still fine.
        assert!(anonymous.with("X-API-Key", KEY).call(&Op::List(ListTasksRequest::default())).await.is_ok());
    }
}
