//! TLS on the one port, with real clients that trust a CA made for the test: every binding
//! (gRPC through tonic, grpc-web, JSON-RPC and HTTP+JSON with SSE through reqwest, the card),
//! ALPN (`h2` for HTTP/2 clients, `http/1.1` for HTTP/1.1 ones, none at all), certificates
//! replaced while the server runs (file change, SIGHUP; a bad file keeps the old one), and
//! client certificates: required, optional, and as the caller's identity (mTLS principals,
//! isolated from each other).
#[path = "auth/client.rs"]
mod client;
mod common;

use std::sync::Arc;
use std::time::Duration;

use a2a_server::auth::{Authenticator, hash_hex};
use a2a_server::proto::{CancelTaskRequest, GetTaskRequest, ListTasksRequest, SubscribeToTaskRequest};
use a2a_server::server::{ClientAuth, Server, Tls, TlsSettings};
use client::{BINDINGS, Binding, Caller, Fail, Op};
use common::certs::{self, Files, Pair, TestCa};
use common::process::{ServerProcess, run_to_exit};
use common::*;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A server with TLS from `ca`'s certificate 1, its files, and the live configuration.
struct Secure {
    server: TestServer,
    ca: TestCa,
    files: Files,
    tls: Arc<Tls>,
    /// The certificate it started with.
    first: Pair,
}

impl Secure {
    async fn start(configure: impl FnOnce(&mut TlsSettings, &Files, &TestCa)) -> Self {
        Self::start_with(configure, TestServer::builder()).await
    }

    async fn start_with(
        configure: impl FnOnce(&mut TlsSettings, &Files, &TestCa),
        builder: TestServerBuilder,
    ) -> Self {
        let ca = TestCa::new("test CA");
        let files = Files::new();
        let first = ca.server(1);
        let (cert, key) = certs::write_server_files(&files, &first);
        let mut settings = TlsSettings::new(cert, key);
        configure(&mut settings, &files, &ca);
        let tls = Arc::new(Tls::new(settings).expect("the TLS files load"));
        let server = builder.tls(tls.clone()).start().await;
        Self { server, ca, files, tls, first }
    }

    fn port(&self) -> u16 {
        self.server.addr.port()
    }

    /// A caller over `binding` presenting `identity` (a client certificate), if any.
    async fn caller(&self, binding: Binding, identity: Option<&Pair>) -> Caller {
        let channel = certs::tonic_channel(self.port(), &self.ca, identity).await.expect("a TLS channel");
        let http = certs::reqwest_client(&self.ca, identity).build().expect("a TLS client");
        Caller::new(self.server.https_url(), binding, channel).with_http(http)
    }

    /// The certificate the next handshake is served.
    async fn served(&self) -> Vec<u8> {
        let stream = certs::handshake(self.port(), &self.ca, &["h2"], None).await.expect("a handshake");
        certs::served_certificate(&stream).to_vec()
    }

    /// Waits until handshakes are served `pair`'s certificate.
    async fn wait_for_certificate(&self, pair: &Pair) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while self.served().await != pair.der().to_vec() {
            assert!(tokio::time::Instant::now() < deadline, "the new certificate was never served");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn task_id(reply: &Value) -> String {
    reply["task"]["id"].as_str().unwrap_or_else(|| panic!("a task: {reply}")).to_owned()
}

#[track_caller]
fn assert_fail(result: &Result<Value, Fail>, reason: &str, what: &str) {
    match result {
        Err(fail) => assert_eq!(fail.reason, reason, "{what}: {fail:?}"),
        Ok(value) => panic!("{what}: expected {reason}, got {value}"),
    }
}

#[tokio::test]
async fn every_binding_works_over_tls_with_real_clients() {
    let secure = Secure::start(|_, _, _| {}).await;
    for binding in BINDINGS {
        let caller = secure.caller(binding, None).await;
        let sent = caller.call(&Op::Send(send_returning_immediately("input"))).await.expect("SendMessage");
        let id = task_id(&sent);
        let streamed = caller.call(&Op::SendStreaming(send("hello"))).await.expect("SendStreamingMessage");
        assert!(!streamed.is_null(), "{binding:?}: a first streamed item");
        let got = caller.call(&Op::Get(GetTaskRequest { id: id.clone(), ..Default::default() })).await;
        assert_eq!(got.expect("GetTask")["id"], id.as_str(), "{binding:?}");
        let listed = caller.call(&Op::List(ListTasksRequest::default())).await.expect("ListTasks");
        assert!(listed["tasks"].as_array().is_some_and(|tasks| !tasks.is_empty()), "{binding:?}: {listed}");
        // The first item of SubscribeToTask (SSE for the JSON bindings) is the task.
        let subscribe = Op::Subscribe(SubscribeToTaskRequest { id: id.clone(), ..Default::default() });
        let subscribed = caller.call(&subscribe).await.expect("SubscribeToTask");
        assert_eq!(subscribed["task"]["id"], id.as_str(), "{binding:?}");
        let canceled =
            caller.call(&Op::Cancel(CancelTaskRequest { id: id.clone(), ..Default::default() })).await;
        assert_eq!(canceled.expect("CancelTask")["status"]["state"], "TASK_STATE_CANCELED", "{binding:?}");
    }
    // The card, over TLS, says where clients reach the server: https.
    let http = certs::reqwest_client(&secure.ca, None).build().unwrap();
    let card: Value = http
        .get(format!("{}/.well-known/agent-card.json", secure.server.https_url()))
        .send()
        .await
        .expect("the card")
        .json()
        .await
        .expect("JSON");
    let urls: Vec<&str> =
        card["supportedInterfaces"].as_array().unwrap().iter().filter_map(|i| i["url"].as_str()).collect();
    assert!(urls.iter().any(|url| url.starts_with("https://")), "{urls:?}");
}

#[tokio::test]
async fn alpn_negotiates_h2_for_http2_clients_and_http11_for_http1_clients() {
    let secure = Secure::start(|_, _, _| {}).await;
    let port = secure.port();
    let h2 = certs::handshake(port, &secure.ca, &["h2", "http/1.1"], None).await.unwrap();
    assert_eq!(certs::alpn(&h2).as_deref(), Some("h2"));
    let h1 = certs::handshake(port, &secure.ca, &["http/1.1"], None).await.unwrap();
    assert_eq!(certs::alpn(&h1).as_deref(), Some("http/1.1"));
    // A client offering no ALPN at all is served HTTP/1.1.
    let mut plain = certs::handshake(port, &secure.ca, &[], None).await.unwrap();
    assert_eq!(certs::alpn(&plain), None);
    plain.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(PATIENCE, plain.read_to_string(&mut answer)).await.unwrap().unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    let url = format!("{}/healthz", secure.server.https_url());
    let http2 = certs::reqwest_client(&secure.ca, None).build().unwrap().get(&url).send().await.unwrap();
    assert_eq!(http2.version(), reqwest::Version::HTTP_2);
    let http1 =
        certs::reqwest_client(&secure.ca, None).http1_only().build().unwrap().get(&url).send().await.unwrap();
    assert_eq!(http1.version(), reqwest::Version::HTTP_11);
    assert_eq!(http1.status(), 200);
}

#[tokio::test]
async fn certificates_reload_when_the_files_change_and_a_bad_file_keeps_the_one_in_use() {
    let secure =
        Secure::start(|settings, _, _| settings.reload_interval = Some(Duration::from_millis(50))).await;
    assert_eq!(secure.served().await, secure.first.der().to_vec());
    let second = secure.ca.server(2);
    certs::write_server_files(&secure.files, &second);
    secure.wait_for_certificate(&second).await;

    // A file that is not a certificate, and a key of another certificate: refused, logged,
    // and the certificate in use stays.
    secure
        .files
        .write("cert.pem", "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n");
    assert!(secure.tls.reload().is_err(), "a broken certificate");
    assert_eq!(secure.served().await, second.der().to_vec());
    let third = secure.ca.server(3);
    secure.files.write("cert.pem", &third.cert);
    assert!(secure.tls.reload().is_err(), "a key that does not match");
    assert_eq!(secure.served().await, second.der().to_vec());

    // Once both files are right again the poll picks them up.
    certs::write_server_files(&secure.files, &third);
    secure.wait_for_certificate(&third).await;
}

#[tokio::test]
async fn sighup_reloads_the_certificate_of_the_binary() {
    let ca = TestCa::new("test CA");
    let files = Files::new();
    let first = ca.server(1);
    let (cert, key) = certs::write_server_files(&files, &first);
    let (cert, key) = (cert.to_str().unwrap().to_owned(), key.to_str().unwrap().to_owned());
    let process = ServerProcess::start(&[
        "--listen",
        "127.0.0.1:0",
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--tls-reload-secs",
        "0",
    ]);
    let port: u16 = process.addr.rsplit(':').next().unwrap().parse().unwrap();
    let served = || async {
        let stream = certs::handshake(port, &ca, &["h2"], None).await.expect("a handshake");
        certs::served_certificate(&stream).to_vec()
    };
    assert_eq!(served().await, first.der().to_vec());
    let second = ca.server(2);
    certs::write_server_files(&files, &second);
    // Without polling, only the signal reloads.
    assert_eq!(served().await, first.der().to_vec());
    process.hangup();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while served().await != second.der().to_vec() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "SIGHUP did not reload; stderr:\n{}",
            process.stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // gRPC over TLS to the binary.
    let mut client = a2a_server::proto::a2a_service_client::A2aServiceClient::new(
        certs::tonic_channel(port, &ca, None).await.expect("a TLS channel"),
    );
    let missing = client.get_task(GetTaskRequest { id: "nope".into(), ..Default::default() }).await;
    assert_eq!(missing.unwrap_err().code(), tonic::Code::NotFound);
}

#[tokio::test]
async fn a_required_client_certificate_refuses_clients_without_one() {
    let secure = Secure::start(|settings, files, ca| {
        settings.client_ca = Some(files.write("clients.pem", &ca.pem()));
        settings.client_auth = ClientAuth::Required;
    })
    .await;
    let url = format!("{}/healthz", secure.server.https_url());
    let anonymous = certs::reqwest_client(&secure.ca, None).build().unwrap();
    assert!(anonymous.get(&url).send().await.is_err(), "no client certificate: the handshake fails");
    let stranger = TestCa::new("another CA").client("stranger", &["stranger.test"], &[]);
    let foreign = certs::reqwest_client(&secure.ca, Some(&stranger)).build().unwrap();
    assert!(foreign.get(&url).send().await.is_err(), "a certificate from another CA");
    let grpc = certs::tonic_channel(secure.port(), &secure.ca, None).await;
    let refused = match grpc {
        Err(_) => true,
        Ok(channel) => a2a_server::proto::a2a_service_client::A2aServiceClient::new(channel)
            .get_task(GetTaskRequest { id: "x".into(), ..Default::default() })
            .await
            .is_err_and(|status| {
                status.code() == tonic::Code::Unavailable || status.code() == tonic::Code::Unknown
            }),
    };
    assert!(refused, "gRPC without a client certificate");

    let alice = secure.ca.client("alice", &["alice.clients.test"], &[]);
    let known = certs::reqwest_client(&secure.ca, Some(&alice)).build().unwrap();
    assert_eq!(known.get(&url).send().await.expect("with a certificate").status(), 200);
    let caller = secure.caller(Binding::Grpc, Some(&alice)).await;
    assert!(caller.call(&Op::Send(send_returning_immediately("hello"))).await.is_ok());
}

/// A server whose auth file accepts an API key, the client certificate of `alice.clients.test`
/// (as the API key's principal, `key:alice`: merged on purpose by `namespace = "key"`) and any
/// other verified certificate as its own subject (`mtls:<subject>`).
async fn mtls_server(client_auth: ClientAuth) -> Secure {
    let file = format!(
        r#"
        [[api_key]]
        sha256 = "{}"
        principal = "alice"

        [mtls]
        allow_any = true

        [[mtls.client]]
        subject = "alice.clients.test"
        principal = "alice"
        namespace = "key"
        "#,
        hash_hex("alice-key")
    );
    let auth = Authenticator::new(toml::from_str(&file).expect("an auth file")).expect("valid");
    Secure::start_with(
        |settings, files, ca| {
            settings.client_ca = Some(files.write("clients.pem", &ca.pem()));
            settings.client_auth = client_auth;
        },
        TestServer::builder().auth(auth),
    )
    .await
}

#[tokio::test]
async fn an_optional_client_certificate_names_the_principal_and_principals_stay_apart() {
    let secure = mtls_server(ClientAuth::Optional).await;
    let alice = secure.ca.client("Alice", &["alice.clients.test"], &[]);
    let bob = secure.ca.client("bob", &["bob.clients.test"], &[]);
    let carol = secure.ca.client("ignored", &[], &["spiffe://test/carol"]);

    let creator = secure.caller(Binding::Grpc, Some(&alice)).await;
    let id =
        task_id(&creator.call(&Op::Send(send_returning_immediately("input"))).await.expect("alice's task"));
    for binding in BINDINGS {
        // No certificate and no other credential: the binding's UNAUTHENTICATED.
        let anonymous = secure.caller(binding, None).await;
        assert_fail(
            &anonymous.call(&Op::Send(send_returning_immediately("hello"))).await,
            "UNAUTHENTICATED",
            &format!("{binding:?} without a certificate"),
        );
        // Alice by certificate, and by API key (one principal, as the file merges them), sees
        // her task …
        let by_certificate = secure.caller(binding, Some(&alice)).await;
        let get = Op::Get(GetTaskRequest { id: id.clone(), ..Default::default() });
        assert_eq!(by_certificate.call(&get).await.expect("alice's task")["id"], id.as_str(), "{binding:?}");
        let by_key = anonymous.with("X-API-Key", "alice-key");
        assert_eq!(by_key.call(&get).await.expect("alice's task by key")["id"], id.as_str(), "{binding:?}");
        // … and a header credential wins over the certificate: a wrong key is refused.
        let wrong = by_certificate.with("X-API-Key", "wrong");
        assert_fail(&wrong.call(&get).await, "UNAUTHENTICATED", &format!("{binding:?} wrong key"));
        // Bob (a known CA, another subject) sees nothing of it.
        let other = secure.caller(binding, Some(&bob)).await;
        for op in [
            get.clone(),
            Op::Subscribe(SubscribeToTaskRequest { id: id.clone(), ..Default::default() }),
            Op::Cancel(CancelTaskRequest { id: id.clone(), ..Default::default() }),
        ] {
            assert_fail(
                &other.call(&op).await,
                "TASK_NOT_FOUND",
                &format!("{binding:?} bob {}", op.method()),
            );
        }
        let listed = other.call(&Op::List(ListTasksRequest::default())).await.expect("bob's list");
        assert_eq!(listed["tasks"].as_array().map_or(0, Vec::len), 0, "{binding:?}: {listed}");
        // A certificate with only a URI name is that principal (allow_any).
        let spiffe = secure.caller(binding, Some(&carol)).await;
        let own = spiffe.call(&Op::Send(send_returning_immediately("hello"))).await.expect("carol's task");
        let own = Op::Get(GetTaskRequest { id: task_id(&own), ..Default::default() });
        assert!(spiffe.call(&own).await.is_ok(), "{binding:?}: carol sees her task");
        assert_fail(&other.call(&own).await, "TASK_NOT_FOUND", &format!("{binding:?} bob on carol's"));
    }

    // The card declares mutual TLS beside the API key.
    let http = certs::reqwest_client(&secure.ca, None).build().unwrap();
    let card: Value =
        json_answer(http.get(format!("{}/.well-known/agent-card.json", secure.server.https_url()))).await;
    assert!(card["securitySchemes"]["mtls"]["mtlsSecurityScheme"].is_object(), "{card}");
    let required: Vec<&Value> = card["securityRequirements"].as_array().unwrap().iter().collect();
    assert!(required.iter().any(|r| r["schemes"].get("mtls").is_some()), "{required:?}");
}

#[tokio::test]
async fn mtls_credentials_need_a_client_ca() {
    let file = "[mtls]\nallow_any = true\n";
    let auth = Authenticator::new(toml::from_str(file).expect("an auth file")).expect("valid");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let refused = Server::default().auth(Arc::new(auth)).start(listener).await;
    assert!(refused.err().is_some_and(|e| e.to_string().contains("--tls-client-ca")));

    let files = Files::new();
    let auth = files.write("auth.toml", file);
    let (code, stderr) = run_to_exit(&["--listen", "127.0.0.1:0", "--auth", auth.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--tls-client-ca"), "{stderr}");
    let (code, stderr) = run_to_exit(&[
        "--listen",
        "127.0.0.1:0",
        "--tls-cert",
        "/nonexistent.pem",
        "--tls-key",
        "/nonexistent.pem",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--tls-cert"), "{stderr}");
}
