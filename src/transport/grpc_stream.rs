//! The two server-streaming RPCs with encode-once fan-out.
//!
//! The generated service would make every subscriber clone and encode every event for itself.
//! Here the same events go out as the protobuf bytes cached in each
//! [`TaskEvent`](crate::task::log::TaskEvent): encoded by the first subscriber, shared by the
//! rest. The bytes are exactly what prost would write for the `StreamResponse`, so clients see
//! no difference. [`A2aGrpc`] routes these two paths here and every other one to the
//! generated server.
use std::convert::Infallible;
use std::marker::PhantomData;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes};
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http;
use tonic::server::{Grpc, NamedService, ServerStreamingService};
use tonic::{Request, Response, Status};

use super::grpc::GrpcBinding;
use crate::core::EventStream;
use crate::proto::a2a_service_server::A2aServiceServer;
use crate::proto::{SendMessageRequest, SubscribeToTaskRequest};

/// `lf.a2a.v1.A2AService`, with its streaming RPCs served from shared bytes.
#[derive(Clone)]
pub struct A2aGrpc {
    generated: A2aServiceServer<GrpcBinding>,
    binding: Arc<GrpcBinding>,
}

impl A2aGrpc {
    /// The service around `binding`.
    pub fn new(binding: GrpcBinding) -> Self {
        Self { generated: A2aServiceServer::new(binding.clone()), binding: Arc::new(binding) }
    }
}

impl NamedService for A2aGrpc {
    const NAME: &'static str = crate::proto::SERVICE_NAME;
}

type Body = tonic::body::Body;

impl<B> tower::Service<http::Request<B>> for A2aGrpc
where
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<tonic::codegen::StdError> + Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let binding = self.binding.clone();
        match request.uri().path() {
            "/lf.a2a.v1.A2AService/SendStreamingMessage" => Box::pin(async move {
                let mut grpc = Grpc::new(SharedBytesCodec::<SendMessageRequest>::default());
                Ok(grpc.server_streaming(SendStreaming(binding), request).await)
            }),
            "/lf.a2a.v1.A2AService/SubscribeToTask" => Box::pin(async move {
                let mut grpc = Grpc::new(SharedBytesCodec::<SubscribeToTaskRequest>::default());
                Ok(grpc.server_streaming(Subscribe(binding), request).await)
            }),
            _ => {
                let mut generated = self.generated.clone();
                Box::pin(async move { generated.call(request).await })
            }
        }
    }
}

/// Each item as the cached protobuf bytes of its event.
fn shared_bytes(stream: EventStream) -> BoxStream<'static, Result<Bytes, Status>> {
    stream.map(|item| item.map(|event| event.proto_bytes()).map_err(Status::from)).boxed()
}

struct SendStreaming(Arc<GrpcBinding>);

impl ServerStreamingService<SendMessageRequest> for SendStreaming {
    type Response = Bytes;
    type ResponseStream = BoxStream<'static, Result<Bytes, Status>>;
    type Future = BoxFuture<'static, Result<Response<Self::ResponseStream>, Status>>;

    fn call(&mut self, request: Request<SendMessageRequest>) -> Self::Future {
        let binding = self.0.clone();
        Box::pin(async move {
            binding
                .call("SendStreamingMessage", request, |core, call, r| async move {
                    core.send_streaming_message(&call, r).await.map(shared_bytes)
                })
                .await
        })
    }
}

struct Subscribe(Arc<GrpcBinding>);

impl ServerStreamingService<SubscribeToTaskRequest> for Subscribe {
    type Response = Bytes;
    type ResponseStream = BoxStream<'static, Result<Bytes, Status>>;
    type Future = BoxFuture<'static, Result<Response<Self::ResponseStream>, Status>>;

    fn call(&mut self, request: Request<SubscribeToTaskRequest>) -> Self::Future {
        let binding = self.0.clone();
        Box::pin(async move {
            binding
                .call("SubscribeToTask", request, |core, call, r| async move {
                    core.subscribe_to_task(&call, r).await.map(shared_bytes)
                })
                .await
        })
    }
}

/// Decodes requests with prost; encodes responses that are already protobuf bytes.
struct SharedBytesCodec<Req>(PhantomData<Req>);

impl<Req> Default for SharedBytesCodec<Req> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

impl<Req: prost::Message + Default + Send + 'static> Codec for SharedBytesCodec<Req> {
    type Encode = Bytes;
    type Decode = Req;
    type Encoder = BytesEncoder;
    type Decoder = RequestDecoder<Req>;

    fn encoder(&mut self) -> Self::Encoder {
        BytesEncoder
    }

    fn decoder(&mut self) -> Self::Decoder {
        RequestDecoder(PhantomData)
    }
}

struct BytesEncoder;

impl Encoder for BytesEncoder {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

struct RequestDecoder<Req>(PhantomData<Req>);

impl<Req: prost::Message + Default> Decoder for RequestDecoder<Req> {
    type Item = Req;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Req>, Status> {
        let request = Req::decode(src.copy_to_bytes(src.remaining()))
            .map_err(|e| Status::invalid_argument(format!("malformed request: {e}")))?;
        Ok(Some(request))
    }
}
