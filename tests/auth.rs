//! Authentication and isolation over real sockets, on gRPC, grpc-web, JSON-RPC and HTTP+JSON:
//! no credential, a wrong one, an expired JWT, an unknown `kid` (the JWKS, served here on
//! loopback, is fetched again, at most once per refresh interval), a tenant the principal may
//! not use, and a second principal trying every one of the 11 operations on another's tasks
//! and push configs, live and stored.
#[path = "auth/client.rs"]
mod client;
mod common;
#[path = "auth/keys.rs"]
mod keys;

use std::sync::atomic::Ordering;

use a2a_server::auth::{AuthFile, Authenticator, hash_hex};
use a2a_server::core::CoreSettings;
use a2a_server::proto::{
    AgentCard, CancelTaskRequest, GetExtendedAgentCardRequest, GetTaskRequest,
    ListTaskPushNotificationConfigsRequest, ListTasksRequest, SubscribeToTaskRequest,
    TaskPushNotificationConfig,
};
use a2a_server::push::PushSettings;
use a2a_server::push::ssrf::Policy;
use client::{BINDINGS, Binding, Caller, Fail, Op};
use common::*;
use keys::{Jwks, SigningKey};
use serde_json::{Value, json};

const ISSUER: &str = "https://issuer.test";
const AUDIENCE: &str = "a2a-test";
const ALICE_KEY: &str = "alice-secret-key";
const MALLORY_KEY: &str = "mallory-secret-key";

/// A server with API keys for alice (tenants "" and "acme") and mallory (the default tenant),
/// and JWTs from one issuer whose JWKS is served by `jwks`.
struct World {
    server: TestServer,
    jwks: Jwks,
    es256: SigningKey,
    channel: tonic::transport::Channel,
}

impl World {
    async fn start() -> Self {
        Self::start_with("").await
    }

    /// With `jwt` appended to the issuer's table.
    async fn start_with(jwt: &str) -> Self {
        let es256 = SigningKey::es256("key-1");
        let jwks = Jwks::serve(vec![es256.jwk()]).await;
        let file = format!(
            r#"
            [[api_key]]
            sha256 = "{alice}"
            principal = "alice"
            tenants = ["", "acme"]

            [[api_key]]
            sha256 = "{mallory}"
            principal = "mallory"

            [[jwt]]
            issuer = "{ISSUER}"
            audiences = ["{AUDIENCE}"]
            algorithms = ["ES256", "EdDSA"]
            jwks_url = "{url}"
            jwks_min_refresh_secs = 1
            tenants_claim = "tenants"
            leeway_secs = 5
            {jwt}
            "#,
            alice = hash_hex(ALICE_KEY),
            mallory = hash_hex(MALLORY_KEY),
            url = jwks.url(),
        );
        let file: AuthFile = toml::from_str(&file).expect("an auth file");
        let settings = CoreSettings {
            push_notifications: true,
            push: PushSettings { policy: Policy::with_allowlist(true, &[]), ..Default::default() },
            extended_card: Some(AgentCard { name: "extended".into(), ..Default::default() }),
            ..Default::default()
        };
        let server = TestServer::builder()
            .auth(Authenticator::new(file).expect("valid"))
            .settings(settings)
            .start()
            .await;
        let channel = server.channel().await;
        Self { server, jwks, es256, channel }
    }

    fn caller(&self, binding: Binding) -> Caller {
        Caller::new(self.server.url(), binding, self.channel.clone())
    }

    fn alice(&self, binding: Binding) -> Caller {
        self.caller(binding).with("X-API-Key", ALICE_KEY)
    }

    fn token(&self, key: &SigningKey, claims: Value) -> String {
        key.sign(&claims)
    }

    /// A JWT for `sub`, valid for a minute.
    fn bearer(&self, binding: Binding, sub: &str) -> Caller {
        let token = self.token(&self.es256, claims(sub, 60));
        self.caller(binding).with("Authorization", &format!("Bearer {token}"))
    }
}

fn claims(sub: &str, expires_in: i64) -> Value {
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs() as i64;
    json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + expires_in})
}

fn send_op(text: &str) -> Op {
    Op::Send(send_returning_immediately(text))
}

fn get_op(id: &str) -> Op {
    Op::Get(GetTaskRequest { id: id.into(), ..Default::default() })
}

#[track_caller]
fn assert_fail(result: &Result<Value, Fail>, reason: &str, what: &str) {
    match result {
        Err(fail) => assert_eq!(fail.reason, reason, "{what}: {fail:?}"),
        Ok(value) => panic!("{what}: expected {reason}, got {value}"),
    }
}

/// How each binding renders a refusal: its code, and the HTTP challenge.
fn assert_rendered(binding: Binding, fail: &Fail, reason: &str) {
    let unauthenticated = reason == "UNAUTHENTICATED";
    let expected = match (binding, unauthenticated) {
        (Binding::Grpc | Binding::GrpcWeb, true) => "UNAUTHENTICATED",
        (Binding::Grpc | Binding::GrpcWeb, false) => "PERMISSION_DENIED",
        (Binding::JsonRpc, true) => "-31401",
        (Binding::JsonRpc, false) => "-31403",
        (Binding::HttpJson, true) => "401",
        (Binding::HttpJson, false) => "403",
    };
    assert_eq!(fail.code, expected, "{binding:?}: {fail:?}");
    if unauthenticated && matches!(binding, Binding::JsonRpc | Binding::HttpJson) {
        let challenge =
            fail.challenge.as_deref().unwrap_or_else(|| panic!("{binding:?}: no WWW-Authenticate"));
        assert!(challenge.contains("Bearer") && challenge.contains("X-API-Key"), "{challenge}");
    }
}

#[tokio::test]
async fn missing_wrong_and_expired_credentials_are_refused_on_every_binding() {
    let world = World::start().await;
    let expired = world.token(&world.es256, claims("alice", -120));
    let foreign_audience = {
        let mut c = claims("alice", 60);
        c["aud"] = json!("someone-else");
        world.token(&world.es256, c)
    };
    let unsigned = {
        let token = world.token(&world.es256, claims("alice", 60));
        let (head, _) = token.rsplit_once('.').expect("three parts");
        format!("{head}.AAAA")
    };
    for binding in BINDINGS {
        let anonymous = world.caller(binding);
        let cases = [
            ("no credential", anonymous.clone()),
            ("a wrong API key", anonymous.with("X-API-Key", "guess")),
            ("an expired JWT", anonymous.with("Authorization", &format!("Bearer {expired}"))),
            ("another audience", anonymous.with("Authorization", &format!("Bearer {foreign_audience}"))),
            ("a bad signature", anonymous.with("Authorization", &format!("Bearer {unsigned}"))),
            ("not a JWT", anonymous.with("Authorization", "Bearer not-a-token")),
            ("Basic auth", anonymous.with("Authorization", "Basic YTpi")),
        ];
        for (what, caller) in cases {
            let result = caller.call(&send_op("hello")).await;
            assert_fail(&result, "UNAUTHENTICATED", &format!("{binding:?}, {what}"));
            let fail = result.as_ref().unwrap_err();
            assert_rendered(binding, fail, "UNAUTHENTICATED");
            // The answer says what was wrong, never what was sent.
            assert!(!fail.message.is_empty(), "{binding:?}, {what}: a message");
            for secret in ["guess", &expired, &foreign_audience, &unsigned, "not-a-token", "YTpi"] {
                assert!(!fail.message.contains(secret), "{binding:?}, {what}: {}", fail.message);
            }
        }
        // Every operation needs a credential, GetExtendedAgentCard included.
        for op in Op::every("some-task", "some-config") {
            let result = anonymous.call(&op).await;
            assert_fail(
                &result,
                "UNAUTHENTICATED",
                &format!("{binding:?} {} without a credential", op.method()),
            );
        }
        // A good credential of each kind is accepted.
        assert!(world.alice(binding).call(&send_op("hello")).await.is_ok(), "{binding:?} API key");
        let jwt = world.bearer(binding, "alice").call(&send_op("hello")).await;
        assert!(jwt.is_ok(), "{binding:?} JWT: {jwt:?}");
        let card = world.alice(binding).call(&Op::ExtendedCard(GetExtendedAgentCardRequest::default())).await;
        assert_eq!(card.expect("the extended card")["name"], "extended", "{binding:?}");
    }
}

#[tokio::test]
async fn public_endpoints_need_no_credential_and_the_card_declares_the_schemes() {
    let world = World::start().await;
    let http = reqwest::Client::new();
    for path in ["/healthz", "/readyz", "/metrics", "/.well-known/agent-card.json"] {
        let response = http.get(format!("{}{path}", world.server.url())).send().await.expect("GET");
        assert_eq!(response.status(), 200, "{path}");
    }
    let card: Value =
        json_answer(http.get(format!("{}/.well-known/agent-card.json", world.server.url()))).await;
    assert_eq!(
        card["securitySchemes"]["apiKey"]["apiKeySecurityScheme"],
        json!({
            "description": "An API key issued by the operator", "location": "header", "name": "X-API-Key"
        })
    );
    assert_eq!(card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["bearerFormat"], "JWT");
    assert_eq!(
        card["securityRequirements"],
        json!([{"schemes": {"apiKey": {}}}, {"schemes": {"bearer": {}}}])
    );
    assert_eq!(card["capabilities"]["extendedAgentCard"], true);

    let mut health = tonic_health::pb::health_client::HealthClient::new(world.channel.clone());
    let serving = health.check(tonic_health::pb::HealthCheckRequest { service: String::new() }).await;
    assert!(serving.is_ok(), "grpc.health.v1 is public: {serving:?}");
}

#[tokio::test]
async fn metrics_can_be_moved_behind_authentication() {
    let file = format!(
        "protect_metrics = true\n[[api_key]]\nsha256 = \"{}\"\nprincipal = \"alice\"\n",
        hash_hex(ALICE_KEY)
    );
    let auth = Authenticator::new(toml::from_str(&file).expect("a file")).expect("valid");
    let server = TestServer::builder().auth(auth).start().await;
    let http = reqwest::Client::new();
    let metrics = format!("{}/metrics", server.url());
    let refused = http.get(&metrics).send().await.expect("GET");
    assert_eq!(refused.status(), 401);
    assert!(refused.headers().contains_key("www-authenticate"));
    let allowed = http.get(&metrics).header("X-API-Key", ALICE_KEY).send().await.expect("GET");
    assert_eq!(allowed.status(), 200);
    let probe = http.get(format!("{}/healthz", server.url())).send().await.expect("GET");
    assert_eq!(probe.status(), 200, "probes stay public");
}

#[tokio::test]
async fn an_unknown_kid_fetches_the_jwks_again_at_most_once_per_interval() {
    let world = World::start().await;
    world.jwks.wait_for_fetches(1).await;
    assert!(
        world
            .bearer(Binding::Grpc, "alice")
            .call(&get_op("nothing"))
            .await
            .is_err_and(|f| f.reason == "TASK_NOT_FOUND")
    );
    let fetched = world.jwks.fetches.load(Ordering::SeqCst);

    // The issuer rotates in a new key; the first token signed with it finds it by refreshing.
    let ed = SigningKey::ed25519("key-2");
    world.jwks.set(vec![world.es256.jwk(), ed.jwk()]);
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let token = world.token(&ed, claims("alice", 60));
    for binding in BINDINGS {
        let caller = world.caller(binding).with("Authorization", &format!("Bearer {token}"));
        assert_fail(
            &caller.call(&get_op("nothing")).await,
            "TASK_NOT_FOUND",
            &format!("{binding:?} rotated key"),
        );
    }
    assert_eq!(world.jwks.fetches.load(Ordering::SeqCst), fetched + 1, "one fetch for the new kid");

    // Made-up kids: refused, and they cannot make the server fetch more than once per interval.
    let forged = SigningKey::ed25519("key-forged");
    let token = world.token(&forged, claims("alice", 60));
    let started = std::time::Instant::now();
    let rotated = world.jwks.fetches.load(Ordering::SeqCst);
    for _ in 0..50 {
        let caller = world.caller(Binding::HttpJson).with("Authorization", &format!("Bearer {token}"));
        assert_fail(&caller.call(&get_op("nothing")).await, "UNAUTHENTICATED", "an unknown kid");
    }
    // One fetch per started second (the interval) at most, however many tokens came.
    let allowed = started.elapsed().as_secs() as usize + 1;
    let fetched = world.jwks.fetches.load(Ordering::SeqCst) - rotated;
    assert!(fetched <= allowed, "rate-limited: {fetched} fetches in {:?}", started.elapsed());
}

#[tokio::test]
async fn a_key_the_issuer_withdrew_stops_working_once_the_keys_are_old() {
    let world = World::start_with("jwks_max_age_secs = 1").await;
    world.jwks.wait_for_fetches(1).await;
    let alice = world.bearer(Binding::HttpJson, "alice");
    assert_fail(&alice.call(&get_op("nothing")).await, "TASK_NOT_FOUND", "a current key");
    world.jwks.set(Vec::new());
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    // The first call after the keys grew old is still served (the refresh runs beside it) …
    let _ = alice.call(&get_op("nothing")).await;
    // … and soon the withdrawn key no longer is.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match alice.call(&get_op("nothing")).await {
            Err(fail) if fail.reason == "UNAUTHENTICATED" => break,
            other => assert!(std::time::Instant::now() < deadline, "still accepted: {other:?}"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_tenant_the_principal_may_not_use_is_permission_denied() {
    let world = World::start().await;
    for binding in BINDINGS {
        let alice = world.alice(binding);
        let mut acme = send_returning_immediately("hello");
        acme.tenant = "acme".into();
        assert!(alice.call(&Op::Send(acme.clone())).await.is_ok(), "{binding:?}: alice may use acme");
        let mallory = world.caller(binding).with("X-API-Key", MALLORY_KEY);
        let result = mallory.call(&Op::Send(acme)).await;
        assert_fail(&result, "UNAUTHORIZED", &format!("{binding:?} mallory in acme"));
        assert_rendered(binding, result.as_ref().unwrap_err(), "UNAUTHORIZED");
        let list = Op::List(ListTasksRequest { tenant: "acme".into(), ..Default::default() });
        assert_fail(&mallory.call(&list).await, "UNAUTHORIZED", &format!("{binding:?} list in acme"));
        // Tenants from a JWT claim.
        let mut c = claims("carol", 60);
        c["tenants"] = json!("acme beta");
        let token = world.token(&world.es256, c);
        let carol = world.caller(binding).with("Authorization", &format!("Bearer {token}"));
        assert!(
            carol
                .call(&Op::List(ListTasksRequest { tenant: "beta".into(), ..Default::default() }))
                .await
                .is_ok()
        );
        let default_tenant = carol.call(&Op::List(ListTasksRequest::default())).await;
        assert_fail(&default_tenant, "UNAUTHORIZED", &format!("{binding:?} carol in the default tenant"));
    }
}

/// Alice's tasks — one live (waiting for input, with a push config), one finished — and what
/// another principal gets trying every operation on them.
#[tokio::test]
async fn another_principal_sees_nothing_of_alices_tasks_on_any_binding() {
    let world = World::start().await;
    let alice = world.alice(Binding::Grpc);
    let live = alice.call(&send_op("input")).await.expect("a task");
    let live_id = live["task"]["id"].as_str().expect("an id").to_owned();
    world.server.wait_until("the task waits for input", |core| core.live_tasks() == 1).await;
    let config = TaskPushNotificationConfig {
        task_id: live_id.clone(),
        url: "http://127.0.0.1:9/hook".into(),
        ..Default::default()
    };
    let config = alice.call(&Op::CreatePush(config)).await.expect("a push config");
    let config_id = config["id"].as_str().expect("a config id").to_owned();
    let mut finished = send_op("hello");
    if let Op::Send(request) = &mut finished {
        request.configuration = None;
    }
    let finished = alice.call(&finished).await.expect("a finished task");
    let finished_id = finished["task"]["id"].as_str().expect("an id").to_owned();

    let mut outcomes = Vec::new();
    for binding in BINDINGS {
        // Mallory by API key, bob by JWT: two other principals, two credential kinds.
        for other in [world.caller(binding).with("X-API-Key", MALLORY_KEY), world.bearer(binding, "bob")] {
            for task_id in [&live_id, &finished_id] {
                for op in Op::every(task_id, &config_id) {
                    let result = other.call(&op).await;
                    let what = format!("{binding:?} {} on {task_id}", op.method());
                    match &op {
                        Op::List(_) => {
                            let list = result.unwrap_or_else(|e| panic!("{what}: {e:?}"));
                            // (gRPC answers go through ProtoJSON, which leaves out empty fields.)
                            assert_eq!(list["tasks"].as_array().map_or(0, Vec::len), 0, "{what}: {list}");
                            assert_eq!(list["totalSize"].as_i64().unwrap_or(0), 0, "{what}: {list}");
                        }
                        Op::ExtendedCard(_) => assert!(result.is_ok(), "{what}: {result:?}"),
                        _ => assert_fail(&result, "TASK_NOT_FOUND", &what),
                    }
                    outcomes.push(what);
                }
            }
        }
    }
    assert_eq!(outcomes.len(), 4 * 2 * 2 * 11);

    // Alice's context: invisible to mallory, and a message naming it starts mallory's own task.
    let context = live["task"]["contextId"].as_str().expect("a context").to_owned();
    let by_context = Op::List(ListTasksRequest { context_id: context.clone(), ..Default::default() });
    for binding in BINDINGS {
        let mallory = world.caller(binding).with("X-API-Key", MALLORY_KEY);
        let list = mallory.call(&by_context).await.expect("a list");
        assert_eq!(list["tasks"].as_array().map_or(0, Vec::len), 0, "{binding:?}: {list}");
    }
    for binding in BINDINGS {
        let mallory = world.caller(binding).with("X-API-Key", MALLORY_KEY);
        let mut joining = send_returning_immediately("hello");
        joining.message.as_mut().expect("a message").context_id = context.clone();
        let own = mallory.call(&Op::Send(joining)).await.expect("mallory's own task");
        assert_ne!(own["task"]["id"].as_str(), Some(live_id.as_str()), "{binding:?}");
    }
    let alices = world.alice(Binding::Grpc).call(&by_context).await.expect("alice's list");
    assert_eq!(alices["totalSize"].as_i64(), Some(1), "only alice's own task: {alices}");

    // Nothing of alice's moved: the live task still waits, its config is still there, and she
    // sees both tasks.
    for binding in BINDINGS {
        let alice = world.alice(binding);
        let task = alice.call(&get_op(&live_id)).await.expect("alice's task");
        assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{binding:?}");
        let configs = alice
            .call(&Op::ListPush(ListTaskPushNotificationConfigsRequest {
                task_id: live_id.clone(),
                ..Default::default()
            }))
            .await
            .expect("alice's configs");
        assert_eq!(configs["configs"].as_array().map(Vec::len), Some(1), "{binding:?}: {configs}");
        let list = alice.call(&Op::List(ListTasksRequest::default())).await.expect("alice's list");
        assert_eq!(list["totalSize"].as_i64(), Some(2), "{binding:?}: {list}");
    }
    // And alice may still do everything to her own task.
    let subscribe = Op::Subscribe(SubscribeToTaskRequest { id: live_id.clone(), ..Default::default() });
    assert!(world.alice(Binding::GrpcWeb).call(&subscribe).await.is_ok());
    let cancel = Op::Cancel(CancelTaskRequest { id: live_id, ..Default::default() });
    let canceled = world.alice(Binding::JsonRpc).call(&cancel).await.expect("canceled");
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELED");
}

/// CPU time of one credential check, per kind (`cargo test --test auth -- --ignored --nocapture`;
/// meaningful in an optimised build: the dev profile makes it several times slower).
#[tokio::test]
#[ignore]
async fn cost_of_one_check() {
    let es256 = SigningKey::es256("k-es");
    let ed = SigningKey::ed25519("k-ed");
    let path = std::env::temp_dir().join(format!("a2a-jwks-{}.json", std::process::id()));
    std::fs::write(&path, json!({"keys": [es256.jwk(), ed.jwk()]}).to_string()).expect("write");
    let file = format!(
        "[[api_key]]\nsha256 = \"{}\"\nprincipal = \"alice\"\n[[jwt]]\nissuer = \"{ISSUER}\"\naudiences = [\"{AUDIENCE}\"]\n\
         algorithms = [\"ES256\", \"EdDSA\"]\njwks_file = \"{}\"\n",
        hash_hex(ALICE_KEY),
        path.display()
    );
    let auth = Authenticator::new(toml::from_str(&file).expect("a file")).expect("valid");
    let _ = std::fs::remove_file(&path);
    let header = |name: &str, value: String| {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
        headers
    };
    let cases = [
        ("API key", header("x-api-key", ALICE_KEY.into())),
        ("JWT ES256", header("authorization", format!("Bearer {}", es256.sign(&claims("alice", 600))))),
        ("JWT EdDSA", header("authorization", format!("Bearer {}", ed.sign(&claims("alice", 600))))),
    ];
    for (what, headers) in cases {
        let rounds = 2000;
        let started = std::time::Instant::now();
        for _ in 0..rounds {
            let outcome = auth.authenticate(&headers).await;
            assert!(matches!(outcome, a2a_server::call::Authentication::Authenticated(_)), "{what}");
        }
        println!("{what}: {:.1} µs per check", started.elapsed().as_secs_f64() * 1e6 / rounds as f64);
    }
}
