//! The gRPC binding: `lf.a2a.v1.A2AService` (tonic), also reachable as grpc-web. Each RPC has
//! exactly one place where it is served:
//!
//! - `encode_once.rs`: SendMessage, SendStreamingMessage, GetTask and SubscribeToTask, answered
//!   from bytes and tasks shared with every other reader instead of copies made per answer;
//!   the two unary ones framed by `unary.rs`, the streaming ones by tonic.
//! - `generated.rs`: every other RPC, through the tonic-generated server.
//!
//! [`A2aGrpc`] routes a request by its path to one or the other.
mod encode_once;
mod generated;
pub(crate) mod request_parts;
mod unary;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};

use tonic::codegen::http;
use tonic::server::NamedService;
use tonic::{Request, Response, Status};

use crate::call::CallContext;
use crate::core::Core;
use crate::error::A2aError;
use crate::proto::a2a_service_server::A2aServiceServer;
use crate::telemetry::{RequestIds, observe};
use crate::transport::parameters::{A2A_EXTENSIONS, A2A_LAST_GENERATION, A2A_VERSION, TRACEPARENT};

/// `lf.a2a.v1.A2AService`: the encode-once RPCs, and the generated server for the rest.
#[derive(Clone)]
pub struct A2aGrpc {
    generated: A2aServiceServer<GrpcBinding>,
    binding: Arc<GrpcBinding>,
}

impl A2aGrpc {
    /// The service over `core`, refusing request messages over `max_request_bytes` (tonic's
    /// refusal becomes the limit error in
    /// [`request_size::grpc_status`](crate::transport::request_size::grpc_status)).
    pub fn new(core: Arc<Core>, max_request_bytes: usize) -> Self {
        let binding = GrpcBinding { core, max_request_bytes };
        let generated = A2aServiceServer::new(binding.clone()).max_decoding_message_size(max_request_bytes);
        Self { generated, binding: Arc::new(binding) }
    }
}

impl NamedService for A2aGrpc {
    const NAME: &'static str = crate::proto::SERVICE_NAME;
}

impl<B> tower::Service<http::Request<B>> for A2aGrpc
where
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<tonic::codegen::StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = encode_once::Answer;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let generated = &self.generated;
        encode_once::route(&self.binding, request, |request| {
            let mut generated = generated.clone();
            Box::pin(async move { generated.call(request).await })
        })
    }
}

/// What every RPC needs to reach the core; the generated trait is implemented on it.
#[derive(Clone)]
struct GrpcBinding {
    core: Arc<Core>,
    max_request_bytes: usize,
}

/// Service parameters travel as metadata with lowercased names (spec §10.2); the auth layer's
/// outcome travels in the request's extensions.
///
/// One pass over the request's few headers finds all four: a lookup by name hashes the name
/// and probes the map, and four of them cost several times the walk. As a lookup would (and
/// as the HTTP bindings read them), the first value of a name counts, absent when it is not
/// text, and every textual value of `A2A-Extensions`.
fn call_context<T>(request: &Request<T>) -> CallContext {
    let headers: &http::HeaderMap = request.metadata().as_ref();
    let (mut version, mut traceparent, mut last_generation) = (None, None, None);
    let mut extensions = Vec::new();
    for (name, value) in headers {
        let slot = match name {
            name if name == A2A_EXTENSIONS => {
                extensions.extend(value.to_str().ok());
                continue;
            }
            name if name == A2A_VERSION => &mut version,
            name if name == TRACEPARENT => &mut traceparent,
            name if name == A2A_LAST_GENERATION => &mut last_generation,
            _ => continue,
        };
        slot.get_or_insert(value.to_str().ok());
    }
    let text = Option::flatten;
    let mut call =
        CallContext::from_parameters(text(version), extensions).authenticated(request.extensions().get());
    call.traceparent = text(traceparent).map(str::to_owned);
    call.last_generation = text(last_generation).map(str::to_owned);
    call
}

impl GrpcBinding {
    /// Runs one call against the core inside the shared request telemetry. The request is
    /// handed on before the future exists, so the future does not hold it.
    fn call<R, T, Fut, F>(
        &self,
        method: &'static str,
        request: Request<R>,
        run: F,
    ) -> impl Future<Output = Result<Response<T>, Status>> + use<R, T, Fut, F>
    where
        R: RequestIds,
        F: FnOnce(Arc<Core>, CallContext, R) -> Fut,
        Fut: Future<Output = Result<T, A2aError>>,
    {
        let call = call_context(&request);
        let core = self.core.clone();
        let result = observe("grpc", method, call, request.into_inner(), |r, call| run(core, call, r));
        async move { result.await.map(Response::new).map_err(Status::from) }
    }
}

#[cfg(test)]
mod tests {
    use tonic::metadata::{MetadataMap, MetadataValue};

    use super::*;

    /// The one pass finds what lookups by name would: the first value of a parameter, every
    /// value of `A2A-Extensions`, and nothing from a value that is not text.
    #[test]
    fn the_call_context_holds_the_service_parameters() {
        let mut metadata = MetadataMap::new();
        metadata.insert("content-type", MetadataValue::from_static("application/grpc"));
        metadata.append("a2a-version", MetadataValue::from_static("1.0"));
        metadata.append("a2a-version", MetadataValue::from_static("0.3"));
        metadata.append("a2a-extensions", MetadataValue::from_static("https://a, https://b"));
        metadata.append("a2a-extensions", MetadataValue::try_from(&b"\xffbad"[..]).unwrap());
        metadata.append("a2a-extensions", MetadataValue::from_static("https://c"));
        metadata.insert("traceparent", MetadataValue::from_static("00-abc-def-01"));
        metadata.insert("a2a-last-generation", MetadataValue::from_static("7"));
        let call = call_context(&Request::from_parts(metadata, Default::default(), ()));
        assert_eq!(call.version.as_deref(), Some("1.0"));
        assert_eq!(call.extensions, ["https://a", "https://b", "https://c"]);
        assert_eq!(call.traceparent.as_deref(), Some("00-abc-def-01"));
        assert_eq!(call.last_generation.as_deref(), Some("7"));

        let mut not_text_first = MetadataMap::new();
        not_text_first.append("a2a-version", MetadataValue::try_from(&b"\xff"[..]).unwrap());
        not_text_first.append("a2a-version", MetadataValue::from_static("1.0"));
        let call = call_context(&Request::from_parts(not_text_first, Default::default(), ()));
        assert_eq!(call.version, None, "the first value counts, as a lookup by name has it");

        let none = call_context(&Request::new(()));
        assert_eq!((none.version, none.traceparent, none.last_generation), (None, None, None));
        assert!(none.extensions.is_empty());
    }
}
