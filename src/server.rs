//! Assembles the listener: the A2A gRPC service (and grpc-web) with reflection and health, and
//! the HTTP side (JSON-RPC, HTTP+JSON, SSE, the card, probes), on one port or two, and runs it
//! until shutdown.
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime};

use axum::response::IntoResponse;
use tokio::net::TcpListener;
use tonic::service::Routes;
use tonic::transport::server::TcpIncoming;
use tonic_health::server::HealthReporter;

use tower::Layer;
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::core::Core;
use crate::error::BoxError;
use crate::proto::{AgentCard, FILE_DESCRIPTOR_SET, SERVICE_NAME};
use crate::transport::card::CardService;
use crate::transport::grpc::A2aGrpc;
use crate::transport::http::{self, HttpSettings, HttpState};
use crate::transport::rest;

/// How the listener is assembled beyond the core.
#[derive(Clone)]
pub struct Options {
    /// The public Agent Card (already built and validated).
    pub card: AgentCard,
    /// SSE and other HTTP settings.
    pub http: HttpSettings,
    /// Origins allowed by CORS (`*` for any); empty turns CORS off.
    pub cors_origins: Vec<String>,
}

/// The assembled routes, and the switches shutdown flips.
pub struct App {
    /// gRPC: `lf.a2a.v1.A2AService` (also as grpc-web), reflection, health.
    pub grpc: axum::Router,
    /// HTTP: JSON-RPC, HTTP+JSON, SSE, the Agent Card, `/healthz`, `/readyz`.
    pub http: axum::Router,
    /// `grpc.health.v1` status, SERVING once built.
    pub health: HealthReporter,
    /// `/readyz` answers 200 while this is true.
    pub ready: Arc<AtomicBool>,
    state: HttpState,
    cors: Option<CorsLayer>,
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

    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    // grpc-web wraps the A2A service alone: applied server-wide it would answer every plain
    // HTTP/1.1 request (JSON-RPC, REST) with 400.
    let a2a = tonic_web::GrpcWebLayer::new().layer(A2aGrpc::new(core.clone()));
    let grpc = Routes::new(a2a)
        .add_service(reflection().build_v1()?)
        .add_service(reflection().build_v1alpha()?)
        .add_service(health_service)
        .into_axum_router();

    let ready = Arc::new(AtomicBool::new(true));
    let state = HttpState {
        core,
        settings: options.http,
        card: Arc::new(CardService::new(options.card, SystemTime::now())),
        ready: ready.clone(),
    };
    let http = http::router(state.clone());
    let cors = cors_layer(&options.cors_origins)?;
    Ok(App { grpc, http, health, ready, state, cors })
}

impl App {
    /// Everything on one port.
    pub fn combined(self) -> axum::Router {
        let router = self.grpc.merge(self.http);
        finish(router, Some(self.state), self.cors)
    }

    /// gRPC and HTTP on separate ports: `(grpc, http)`.
    pub fn split(self) -> (axum::Router, axum::Router) {
        (finish(self.grpc, None, self.cors.clone()), finish(self.http, Some(self.state), self.cors))
    }
}

/// Installs the fallback (HTTP+JSON routes when `http` is given; gRPC UNIMPLEMENTED for gRPC
/// requests; 404 otherwise) and CORS.
fn finish(router: axum::Router, http: Option<HttpState>, cors: Option<CorsLayer>) -> axum::Router {
    let router = router.fallback(move |request: axum::extract::Request| {
        let http = http.clone();
        async move {
            if is_grpc(&request) {
                return tonic::Status::unimplemented(format!("unknown method {}", request.uri().path()))
                    .into_http();
            }
            match http {
                Some(state) => rest::handle(state, request).await,
                None => (axum::http::StatusCode::NOT_FOUND, "not found\n").into_response(),
            }
        }
    });
    match cors {
        Some(cors) => router.layer(cors),
        None => router,
    }
}

fn is_grpc(request: &axum::extract::Request) -> bool {
    request
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/grpc"))
}

/// CORS for browsers calling grpc-web, JSON-RPC or REST from another origin.
fn cors_layer(origins: &[String]) -> Result<Option<CorsLayer>, BoxError> {
    use axum::http::{HeaderName, HeaderValue, Method};
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
        "x-grpc-web",
        "x-user-agent",
        "grpc-timeout",
        "if-none-match",
        "cache-control",
    ];
    let exposed = ["grpc-status", "grpc-message", "grpc-status-details-bin", "etag", "a2a-extensions"];
    Ok(Some(
        CorsLayer::new()
            .allow_origin(allow_origin)
            .allow_methods([Method::GET, Method::POST, Method::DELETE, Method::OPTIONS])
            .allow_headers(headers.map(HeaderName::from_static))
            .expose_headers(exposed.map(HeaderName::from_static))
            .max_age(std::time::Duration::from_secs(600)),
    ))
}

/// Graceful shutdown, in the order a load balancer needs it.
pub struct Drain {
    /// The core, to stop new calls, end streams and, at the deadline, cancel tasks.
    pub core: Arc<Core>,
    /// `grpc.health.v1`, set to NOT_SERVING first.
    pub health: HealthReporter,
    /// `/readyz`, set to 503 first.
    pub ready: Arc<AtomicBool>,
    /// How long in-flight unary calls may take before running tasks are cancelled.
    pub timeout: Duration,
}

impl Drain {
    /// Health goes NOT_SERVING and `/readyz` 503; new calls are refused and open streams end
    /// with UNAVAILABLE (clients resubscribe elsewhere); the listeners stop accepting
    /// (`stop`) and wait for in-flight calls; if that takes longer than the timeout, running
    /// tasks are cancelled, which answers every blocked call, and the process exits soon after.
    pub async fn run(self, stop: tokio::sync::watch::Sender<bool>) {
        tracing::info!(timeout = ?self.timeout, "draining");
        self.health.set_service_status("", tonic_health::ServingStatus::NotServing).await;
        self.health.set_service_status(SERVICE_NAME, tonic_health::ServingStatus::NotServing).await;
        self.ready.store(false, std::sync::atomic::Ordering::Relaxed);
        self.core.begin_shutdown();
        let _ = stop.send(true);
        tokio::time::sleep(self.timeout).await;
        tracing::warn!("drain timeout passed; cancelling running tasks");
        self.core.cancel_all().await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        tracing::error!("calls still open 5 s after cancelling every task; exiting");
        std::process::exit(1);
    }
}

/// Serves `router` on `listener` (h2c and HTTP/1.1 on the same port) until `shutdown`
/// resolves.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), BoxError> {
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    tonic::transport::Server::builder()
        .accept_http1(true)
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
        .max_concurrent_streams(Some(10_000))
        .add_routes(Routes::from(router))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await?;
    Ok(())
}
