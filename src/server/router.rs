//! The routes: the A2A gRPC service (and grpc-web) with reflection and health, and the HTTP
//! side (JSON-RPC, HTTP+JSON, SSE, the Agent Card, probes, metrics, the `/ui` dashboard), with
//! the fallback and CORS around them, for one port or two.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use tonic::service::Routes;
use tonic_health::server::HealthReporter;
use tower::Layer;
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::auth::{self, Authenticator};
use crate::card::signing::CardSigner;
use crate::core::Core;
use crate::error::{A2aError, BoxError};
use crate::proto::{AgentCard, FILE_DESCRIPTOR_SET, SERVICE_NAME};
use crate::push::PushStats;
use crate::server::direct_grpc::DirectGrpc;
use crate::transport::card::{self, CardService};
use crate::transport::extensions::{self, ExtensionEcho};
use crate::transport::grpc::A2aGrpc;
use crate::transport::http::{self, HttpSettings, HttpState};
use crate::transport::v03::admission::PartsAdmission;
use crate::transport::v03::grpc::V03Grpc;
use crate::transport::{jsonrpc, request_size, rest, v03};

/// How the listener is assembled beyond the core.
#[derive(Clone)]
pub struct Options {
    /// The public Agent Card (already built and validated).
    pub card: AgentCard,
    /// SSE and other HTTP settings.
    pub http: HttpSettings,
    /// Origins allowed by CORS (`*` for any); empty turns CORS off.
    pub cors_origins: Vec<String>,
    /// Serve the dashboard at `/ui` (already decided from the mode and the listener).
    pub ui: bool,
    /// Checks every request's credential, when authentication is on.
    pub auth: Option<Arc<Authenticator>>,
    /// The keys that signed the card (`--card-signing-key`): they sign its v0.3 forms too, and
    /// are published in the JWKS.
    pub card_signer: Option<Arc<CardSigner>>,
}

/// The assembled routes, and the switches shutdown flips.
pub struct App {
    /// gRPC: `lf.a2a.v1.A2AService` (also as grpc-web), reflection, health.
    pub grpc: axum::Router,
    /// HTTP: JSON-RPC, the Agent Card, `/healthz`, `/readyz`, `/metrics` (HTTP+JSON is the
    /// fallback [`App::combined`] and [`App::split`] install).
    pub http: axum::Router,
    /// `grpc.health.v1` status, SERVING once built.
    pub health: HealthReporter,
    /// `/readyz` answers 200 while this is true.
    pub ready: Arc<AtomicBool>,
    state: HttpState,
    /// Plain gRPC calls to the A2A service, for the listener that serves gRPC to take around
    /// the router.
    pub direct: DirectGrpc,
    layers: Layers,
}

/// What [`finish`] puts around every route.
#[derive(Clone)]
struct Layers {
    cors: Option<CorsLayer>,
    auth: Option<Arc<Authenticator>>,
    /// `--max-request-bytes`, for draining what a handler left unread.
    limit: usize,
    /// The `A2A-Extensions` response header.
    echo: ExtensionEcho,
}

/// Builds every route around `core`: `lf.a2a.v1.A2AService` (gRPC and grpc-web), server
/// reflection (v1 and v1alpha, so every grpcurl and grpcio version can list it),
/// `grpc.health.v1`, and the HTTP side.
pub async fn app(core: Arc<Core>, options: Options) -> Result<App, BoxError> {
    // Install the metrics recorder before the first call is counted.
    crate::telemetry::prometheus();
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_service_status(SERVICE_NAME, tonic_health::ServingStatus::Serving).await;
    health.set_service_status("", tonic_health::ServingStatus::Serving).await;

    let v03 = options.http.v03;
    let echo = ExtensionEcho::new(&options.card);
    let reflection = || {
        let builder = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET);
        match v03 {
            true => builder.register_encoded_file_descriptor_set(crate::proto_v03::FILE_DESCRIPTOR_SET),
            false => builder,
        }
    };
    // grpc-web wraps the A2A service alone: applied server-wide it would answer every plain
    // HTTP/1.1 request (JSON-RPC, REST) with 400.
    let limit = options.http.max_request_bytes;
    let a2a_grpc = A2aGrpc::new(core.clone(), limit);
    let a2a = tonic_web::GrpcWebLayer::new().layer(a2a_grpc.clone());
    let mut routes = Routes::new(a2a);
    let mut card = CardService::new(options.card, SystemTime::now(), options.card_signer);
    if v03 {
        card = card.with_v03(core.settings().extended_card.as_ref())?;
    }
    if let Some(card) = card.v03_card().cloned() {
        // v0.3 clients: `a2a.v1.A2AService`, a different package, so different method paths.
        let v03_grpc = V03Grpc::server(core.clone(), card).max_decoding_message_size(limit);
        routes = routes.add_service(PartsAdmission::new(v03_grpc, core.settings().max_parts, limit));
        health.set_service_status(crate::proto_v03::SERVICE_NAME, tonic_health::ServingStatus::Serving).await;
    }
    let grpc = routes
        .add_service(reflection().build_v1()?)
        .add_service(reflection().build_v1alpha()?)
        .add_service(health_service)
        .into_axum_router()
        .layer(axum::middleware::map_response_with_state(limit, request_size::grpc_status));

    let ready = Arc::new(AtomicBool::new(true));
    let state = HttpState { core, settings: options.http, card: Arc::new(card) };
    let mut http = http_router(state.clone(), ready.clone());
    if options.ui {
        http = http.merge(ui_router(state.clone()));
    }
    let cors = cors_layer(&options.cors_origins)?;
    let direct = DirectGrpc::new(a2a_grpc, options.auth.clone(), limit, cors.is_some(), echo.clone());
    let layers = Layers { cors, auth: options.auth, limit, echo };
    Ok(App { grpc, http, health, ready, state, direct, layers })
}

impl App {
    /// Everything on one port.
    pub fn combined(self) -> axum::Router {
        let router = self.grpc.merge(self.http);
        finish(router, Some(self.state), self.layers)
    }

    /// gRPC and HTTP on separate ports: `(grpc, http)`.
    pub fn split(self) -> (axum::Router, axum::Router) {
        let grpc = finish(self.grpc, None, self.layers.clone());
        (grpc, finish(self.http, Some(self.state), self.layers))
    }
}

/// The HTTP routes: JSON-RPC at `/` (and at the base path), the Agent Card, `/healthz`,
/// `/readyz`, `/metrics`. Everything else goes to the HTTP+JSON binding through the fallback
/// [`finish`] installs: its paths carry `:verbs` and optional tenant prefixes that a router
/// pattern cannot express.
fn http_router(state: HttpState, ready: Arc<AtomicBool>) -> axum::Router {
    let mut router = axum::Router::new();
    let base = state.settings.base_path.clone();
    let rpc = post(jsonrpc::handle).fallback(jsonrpc::method_not_allowed);
    if !base.is_empty() {
        router = router.route(&base, rpc.clone()).route(&format!("{base}/"), rpc.clone());
    }
    if state.settings.v03 {
        // The v0.3 HTTP+JSON binding lives under `/v1/`, which no v1.0 route uses; the bare
        // prefix too (a `{*rest}` wildcard matches no empty rest), so its 404 is v0.3's.
        let v03 = any(|State(state): State<HttpState>, request: Request| v03::rest::handle(state, request));
        let prefixes = if base.is_empty() { vec![""] } else { vec!["", base.as_str()] };
        for prefix in prefixes {
            router = router.route(&format!("{prefix}/v1/"), v03.clone());
            router = router.route(&format!("{prefix}/v1/{{*rest}}"), v03.clone());
        }
    }
    let core = state.core.clone();
    router
        .route("/", rpc)
        .route("/.well-known/agent-card.json", get(card::handle))
        .route("/.well-known/jwks.json", get(jwks))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(move || async move { readyz(&ready) }))
        .route("/metrics", get(move || async move { metrics(&core) }))
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
}

/// A method a route does not serve (the JSON-RPC URLs answer their own): HTTP 405 with a
/// `google.rpc.Status` body; the router adds the `Allow` header.
async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    let error =
        A2aError::MethodNotAllowed { method: method.to_string(), path: uri.path().to_owned(), allow: None };
    http::error_response(&error, &error.to_http_body(), false)
}

/// The dashboard: the page at `/ui`, `/ui/` and `/ui/tasks/{id}`, its assets at
/// `/ui/assets/{name}`, each also under the base path (like the bindings).
fn ui_router(state: HttpState) -> axum::Router {
    let base = state.settings.base_path.clone();
    let mut router = axum::Router::new();
    for prefix in if base.is_empty() { vec![String::new()] } else { vec![String::new(), base] } {
        router = router
            .route(&format!("{prefix}/ui"), get(|| async { crate::ui::page(-1) }))
            .route(&format!("{prefix}/ui/"), get(|| async { crate::ui::page(0) }))
            .route(
                &format!("{prefix}/ui/assets/{{name}}"),
                get(|Path(name): Path<String>| async move { crate::ui::asset(&name) }),
            )
            .route(&format!("{prefix}/ui/tasks/{{id}}"), any(ui_task_page));
    }
    router.method_not_allowed_fallback(method_not_allowed).with_state(state)
}

/// A task's page for a browser; anything else is HTTP+JSON for a tenant named `ui`
/// (`GET /ui/tasks/{id}` is its GetTask, `…:subscribe` its SubscribeToTask).
async fn ui_task_page(State(state): State<HttpState>, Path(id): Path<String>, request: Request) -> Response {
    let html = request
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/html"));
    if html && request.method() == axum::http::Method::GET && !id.contains(':') {
        crate::ui::page(1)
    } else {
        rest::handle(state, request).await
    }
}

/// The public keys that verify what the server signs: webhooks (`--push-signing-key`, while
/// pushes are on) and the Agent Card (`--card-signing-key`), a key used for both once; 404 when
/// nothing is signed. Public, like the card.
async fn jwks(State(state): State<HttpState>) -> Response {
    let push = state.core.settings().push.signing.as_ref().filter(|_| state.core.push_stats().is_some());
    let mut keys: Vec<serde_json::Value> = Vec::new();
    if let Some(push_keys) = push.map(|signer| signer.jwks()) {
        keys.extend(push_keys["keys"].as_array().into_iter().flatten().cloned());
    }
    for key in state.card.signer().map(|signer| signer.public_keys()).unwrap_or_default() {
        if !keys.iter().any(|k| k["kid"] == key["kid"]) {
            keys.push(key);
        }
    }
    if keys.is_empty() {
        return (StatusCode::NOT_FOUND, "nothing is signed (see --push-signing-key, --card-signing-key)\n")
            .into_response();
    }
    let mut response = axum::Json(serde_json::json!({ "keys": keys })).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=300"));
    response
}

/// 200 until shutdown begins, then 503, so a load balancer stops sending new calls.
fn readyz(ready: &AtomicBool) -> Response {
    if ready.load(Ordering::Relaxed) {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response()
    }
}

/// The Prometheus text exposition, with the gauges read from `core` now (the server reads
/// them here so that telemetry stays below the core).
fn metrics(core: &Core) -> Response {
    metrics::gauge!("a2a_live_tasks").set(core.live_tasks() as f64);
    metrics::gauge!("a2a_open_subscriptions").set(core.open_subscriptions() as f64);
    if let Some(push) = core.push_stats() {
        let counters = [
            ("a2a_push_delivered_total", &push.delivered),
            ("a2a_push_retries_total", &push.retries),
            ("a2a_push_failures_total", &push.failed),
            ("a2a_push_refused_total", &push.refused),
            ("a2a_push_dropped_total", &push.dropped),
        ];
        for (name, counter) in counters {
            metrics::counter!(name).absolute(PushStats::get(counter));
        }
        metrics::gauge!("a2a_push_in_flight").set(PushStats::get(&push.in_flight) as f64);
        metrics::gauge!("a2a_push_queued_bytes").set(PushStats::get(&push.queued_bytes) as f64);
    }
    let body = crate::telemetry::render();
    let mut response = (StatusCode::OK, body).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    response
}

/// Installs the fallback (HTTP+JSON routes when `http` is given; gRPC UNIMPLEMENTED for gRPC
/// requests; a JSON 404 otherwise), the authentication layer in front of every route, the
/// draining of unread request bodies around it (a refusal for want of a credential leaves the
/// body unread too), the `A2A-Extensions` echo, and CORS around all (a preflight carries no
/// credential).
fn finish(router: axum::Router, rest_state: Option<HttpState>, layers: Layers) -> axum::Router {
    let router = router.fallback(move |request: axum::extract::Request| {
        let rest_state = rest_state.clone();
        async move {
            if is_grpc(&request) {
                return tonic::Status::unimplemented(format!("unknown method {}", request.uri().path()))
                    .into_http();
            }
            match rest_state {
                Some(state) => rest::handle(state, request).await,
                None => {
                    let error = A2aError::MethodNotFound(format!("no route for {}", request.uri().path()));
                    http::error_response(&error, &error.to_http_body(), false)
                }
            }
        }
    });
    let router = match layers.auth {
        Some(auth) => router.layer(axum::middleware::from_fn_with_state(auth, auth::layer)),
        None => router,
    };
    let router = router.layer(axum::middleware::from_fn_with_state(layers.limit, request_size::finish_body));
    // Outside authentication, so a refusal echoes too; inside CORS, which exposes the header.
    let router = router.layer(axum::middleware::from_fn_with_state(layers.echo, extensions::echo));
    match layers.cors {
        Some(cors) => router.layer(cors),
        None => router,
    }
}

fn is_grpc(request: &axum::extract::Request) -> bool {
    request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/grpc"))
}

/// CORS for browsers calling grpc-web, JSON-RPC or REST from another origin.
fn cors_layer(origins: &[String]) -> Result<Option<CorsLayer>, BoxError> {
    use axum::http::{HeaderName, Method};
    if origins.is_empty() {
        return Ok(None);
    }
    let allow_origin = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        let values: Result<Vec<HeaderValue>, _> = origins.iter().map(|o| HeaderValue::from_str(o)).collect();
        AllowOrigin::list(values.map_err(|e| format!("invalid CORS origin: {e}"))?)
    };
    let headers = [
        "content-type",
        "authorization",
        "a2a-version",
        "a2a-extensions",
        "x-api-key",
        // v0.3 clients' name for A2A-Extensions.
        "x-a2a-extensions",
        "x-grpc-web",
        "x-user-agent",
        "grpc-timeout",
        "if-none-match",
        "cache-control",
    ];
    let exposed = [
        "grpc-status",
        "grpc-message",
        "grpc-status-details-bin",
        "etag",
        "a2a-extensions",
        "www-authenticate",
    ];
    Ok(Some(
        CorsLayer::new()
            .allow_origin(allow_origin)
            .allow_methods([Method::GET, Method::POST, Method::DELETE, Method::OPTIONS])
            .allow_headers(headers.map(HeaderName::from_static))
            .expose_headers(exposed.map(HeaderName::from_static))
            .max_age(std::time::Duration::from_secs(600)),
    ))
}
