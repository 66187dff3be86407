//! Assembles the listener: the A2A gRPC service with reflection and health on one port, and
//! runs it until shutdown.
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::response::IntoResponse;
use tokio::net::TcpListener;
use tonic::service::Routes;
use tonic::transport::server::TcpIncoming;
use tonic_health::server::HealthReporter;

use crate::core::Core;
use crate::proto::{FILE_DESCRIPTOR_SET, SERVICE_NAME};
use crate::transport::grpc::GrpcBinding;

/// Anything that can go wrong while starting or running the server.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The assembled HTTP/2 + HTTP/1.1 application, and the health reporter that shutdown flips.
pub struct App {
    /// Every route of the server.
    pub router: axum::Router,
    /// `grpc.health.v1` status, SERVING once built.
    pub health: HealthReporter,
}

/// Builds the application around `core`: `lf.a2a.v1.A2AService`, server reflection (v1 and
/// v1alpha, so every grpcurl and grpcio version can list it) and `grpc.health.v1`.
pub async fn app(core: Arc<Core>) -> Result<App, BoxError> {
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_service_status(SERVICE_NAME, tonic_health::ServingStatus::Serving).await;
    health.set_service_status("", tonic_health::ServingStatus::Serving).await;

    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let grpc = Routes::new(GrpcBinding::server(core))
        .add_service(reflection().build_v1()?)
        .add_service(reflection().build_v1alpha()?)
        .add_service(health_service);
    let router = grpc.into_axum_router().fallback(fallback);
    Ok(App { router, health })
}

/// Unknown paths: gRPC clients get UNIMPLEMENTED, everyone else a 404.
async fn fallback(request: axum::extract::Request) -> axum::response::Response {
    let grpc = request
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/grpc"));
    if grpc {
        tonic::Status::unimplemented(format!("unknown method {}", request.uri().path())).into_http()
    } else {
        (axum::http::StatusCode::NOT_FOUND, "not found\n").into_response()
    }
}

/// Serves `app` on `listener` (h2c and HTTP/1.1 on the same port) until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    app: App,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), BoxError> {
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    tonic::transport::Server::builder()
        .accept_http1(true)
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
        .max_concurrent_streams(Some(10_000))
        .add_routes(Routes::from(app.router))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await?;
    Ok(())
}
