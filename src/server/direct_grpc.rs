//! Plain gRPC calls to `lf.a2a.v1.A2AService` go from the connection straight to the service,
//! around the router: matching a path, boxing the request and response bodies twice more,
//! cloning the route's service and three layers of middleware futures cost about a tenth of a
//! unary call's CPU, for a decision the content type and path prefix already make.
//!
//! What the router's layers do to such a call is done here too: authentication (when it is
//! on), tonic's size refusal turned into the limit error, and the `A2A-Extensions` echo. What they do to other calls does
//! not apply: grpc-web and CORS serve browsers (whose requests carry `Origin`, and go through
//! the router), and draining unread bodies concerns HTTP/1.1 only.
use std::sync::Arc;

use axum::http::{HeaderMap, Request, Response, Version, header};
use tower::Service;

use crate::auth::Authenticator;
use crate::proto::SERVICE_NAME;
use crate::transport::extensions::ExtensionEcho;
use crate::transport::grpc::A2aGrpc;
use crate::transport::request_size;

/// The A2A gRPC service as a listener reaches it without the router.
#[derive(Clone)]
pub struct DirectGrpc {
    service: A2aGrpc,
    auth: Option<Arc<Authenticator>>,
    /// `--max-request-bytes`, for the size refusal.
    limit: usize,
    /// CORS is on: a request with `Origin` takes the router, whose CORS layer answers it.
    cors: bool,
    /// The `A2A-Extensions` response metadata.
    echo: ExtensionEcho,
}

impl DirectGrpc {
    /// The service, behind `auth` when authentication is on.
    pub(crate) fn new(
        service: A2aGrpc,
        auth: Option<Arc<Authenticator>>,
        limit: usize,
        cors: bool,
        echo: ExtensionEcho,
    ) -> Self {
        Self { service, auth, limit, cors, echo }
    }

    /// Whether `request` is a plain gRPC call to the A2A service (HTTP/2, `application/grpc`
    /// or `application/grpc+proto`), with nothing for a browser-facing layer to do.
    pub(super) fn takes<B>(&self, request: &Request<B>) -> bool {
        is_plain_call(request, self.cors)
    }

    /// Serves one call [`Self::takes`] accepted.
    pub(super) async fn call<B>(mut self, mut request: Request<B>) -> Response<tonic::body::Body>
    where
        B: tonic::codegen::Body + Send + 'static,
        B::Error: Into<tonic::codegen::StdError> + Send + 'static,
    {
        if let Some(auth) = &self.auth {
            // Boxed: its state would otherwise enlarge every call's future, with auth or not.
            let outcome = Box::pin(auth.outcome(request.headers(), request.extensions())).await;
            request.extensions_mut().insert(outcome);
        }
        let activated = self.echo.activated(request.headers());
        let mut response = match self.service.call(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        request_size::limit_status(self.limit, response.headers_mut());
        self.echo.apply(activated, response.headers_mut());
        response
    }
}

fn is_plain_call<B>(request: &Request<B>, cors: bool) -> bool {
    let path = request.uri().path();
    let ours = path.strip_prefix('/').and_then(|p| p.strip_prefix(SERVICE_NAME));
    request.version() == Version::HTTP_2
        && ours.is_some_and(|method| method.starts_with('/'))
        && is_plain_grpc(request.headers())
        && !(cors && request.headers().contains_key(header::ORIGIN))
}

fn is_plain_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|ct| matches!(ct.as_bytes(), b"application/grpc" | b"application/grpc+proto"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(version: Version, path: &str, content_type: &str, origin: bool) -> Request<()> {
        let mut builder =
            Request::builder().version(version).uri(path).header(header::CONTENT_TYPE, content_type);
        if origin {
            builder = builder.header(header::ORIGIN, "https://app.example");
        }
        builder.body(()).unwrap()
    }

    #[test]
    fn only_plain_grpc_calls_to_the_a2a_service_skip_the_router() {
        let send = "/lf.a2a.v1.A2AService/SendMessage";
        let h2 = Version::HTTP_2;
        assert!(is_plain_call(&request(h2, send, "application/grpc", false), false));
        assert!(is_plain_call(&request(h2, send, "application/grpc+proto", false), true));
        // No browser-facing layer is skipped: with CORS on, a request with Origin takes the router.
        assert!(is_plain_call(&request(h2, send, "application/grpc", true), false));
        assert!(!is_plain_call(&request(h2, send, "application/grpc", true), true));
        for (version, path, content_type) in [
            (h2, send, "application/grpc-web"),
            (h2, send, "application/grpc-web+proto"),
            (h2, send, "application/grpc+json"),
            (h2, send, "application/json"),
            (Version::HTTP_11, send, "application/grpc"),
            (h2, "/lf.a2a.v1.A2AServiceX/SendMessage", "application/grpc"),
            (h2, "/lf.a2a.v1.A2AService", "application/grpc"),
            (h2, "/a2a.v1.A2AService/SendMessage", "application/grpc"),
            (h2, "/grpc.health.v1.Health/Check", "application/grpc"),
        ] {
            let request = request(version, path, content_type, false);
            assert!(!is_plain_call(&request, false), "{version:?} {path} {content_type}");
        }
    }
}
