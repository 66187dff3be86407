//! `--max-parts` for the v0.3 gRPC service, checked on the request's bytes before tonic decodes
//! them (as the v1.0 service's own decoder does): SendMessage and SendStreamingMessage requests
//! are read whole (tonic reads unary requests whole anyway, up to `--max-request-bytes`), their
//! parts counted, and either refused or handed on unchanged.
use std::convert::Infallible;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http_body_util::Full;
use tonic::body::Body;
use tonic::codegen::http;
use tonic::server::NamedService;

use crate::transport::grpc::request_parts;
use crate::transport::request_size;

/// The gRPC message prefix: a compression flag and a 4-byte length.
const PREFIX: usize = 5;

/// A v0.3 gRPC service whose SendMessage requests are admitted by their parts first.
#[derive(Clone)]
pub struct PartsAdmission<S> {
    inner: S,
    max_parts: usize,
    max_request_bytes: usize,
}

impl<S> PartsAdmission<S> {
    /// `inner` behind the check (`max_parts` 0: no check).
    pub fn new(inner: S, max_parts: usize, max_request_bytes: usize) -> Self {
        Self { inner, max_parts, max_request_bytes }
    }
}

impl<S: NamedService> NamedService for PartsAdmission<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> tower::Service<http::Request<Body>> for PartsAdmission<S>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let path = request.uri().path();
        let sends = path.ends_with("/SendMessage") || path.ends_with("/SendStreamingMessage");
        // The inner service was made ready; the clone takes its place for the next call.
        let mut inner = self.inner.clone();
        std::mem::swap(&mut inner, &mut self.inner);
        if !sends || self.max_parts == 0 {
            return Box::pin(inner.call(request));
        }
        let (max_parts, limit) = (self.max_parts, self.max_request_bytes);
        Box::pin(async move {
            let (head, body) = request.into_parts();
            let bytes =
                match request_size::read_body(axum::body::Body::new(body), &head.headers, limit + PREFIX)
                    .await
                {
                    Ok(bytes) => bytes,
                    Err(error) => return Ok(tonic::Status::from(error).into_http()),
                };
            // A compressed message is left to tonic (which refuses it: no compression is on).
            if let Some(message) = bytes.get(PREFIX..).filter(|_| bytes[0] == 0)
                && let Some(parts) = request_parts::count(message, 1)
                && let Err(error) = crate::core::validate::admit_parts(parts, max_parts)
            {
                return Ok(tonic::Status::from(error).into_http());
            }
            inner.call(http::Request::from_parts(head, Body::new(Full::new(bytes)))).await
        })
    }
}
