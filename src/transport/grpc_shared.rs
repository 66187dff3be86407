//! The RPCs answered from shared data rather than from copies made for the answer.
//!
//! The generated service would make every subscriber clone and encode every event for itself.
//! Here the two streaming RPCs send the protobuf bytes cached in each
//! [`TaskEvent`](crate::task::log::TaskEvent): encoded by the first subscriber, shared by the
//! rest. Likewise SendMessage and GetTask encode the task straight from the copy its actor and
//! the store share, where the generated service needs a copy of its own. The bytes are
//! exactly what prost would write for the response messages (a test checks it), so clients
//! see no difference. [`A2aGrpc`] routes these four paths here and every other one to the
//! generated server.
use std::convert::Infallible;
use std::marker::PhantomData;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes};
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http;
use tonic::server::{Grpc, NamedService, ServerStreamingService, UnaryService};
use tonic::{Request, Response, Status};

use super::grpc::GrpcBinding;
use crate::core::{EventStream, SendOutcome};
use crate::proto::a2a_service_server::A2aServiceServer;
use crate::proto::{GetTaskRequest, SendMessageRequest, SubscribeToTaskRequest, Task};

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
            "/lf.a2a.v1.A2AService/SendMessage" => Box::pin(async move {
                let mut grpc = Grpc::new(SharedCodec::<SendMessageRequest, SendOutcome>::default());
                Ok(grpc.unary(SendUnary(binding), request).await)
            }),
            "/lf.a2a.v1.A2AService/GetTask" => Box::pin(async move {
                let mut grpc = Grpc::new(SharedCodec::<GetTaskRequest, Arc<Task>>::default());
                Ok(grpc.unary(Get(binding), request).await)
            }),
            "/lf.a2a.v1.A2AService/SendStreamingMessage" => Box::pin(async move {
                let mut grpc = Grpc::new(SharedCodec::<SendMessageRequest, Bytes>::default());
                Ok(grpc.server_streaming(SendStreaming(binding), request).await)
            }),
            "/lf.a2a.v1.A2AService/SubscribeToTask" => Box::pin(async move {
                let mut grpc = Grpc::new(SharedCodec::<SubscribeToTaskRequest, Bytes>::default());
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

struct SendUnary(Arc<GrpcBinding>);

impl UnaryService<SendMessageRequest> for SendUnary {
    type Response = SendOutcome;
    type Future = BoxFuture<'static, Result<Response<SendOutcome>, Status>>;

    fn call(&mut self, request: Request<SendMessageRequest>) -> Self::Future {
        let binding = self.0.clone();
        Box::pin(async move {
            binding
                .call("SendMessage", request, |core, call, r| async move {
                    core.send_message_shared(&call, r).await
                })
                .await
        })
    }
}

struct Get(Arc<GrpcBinding>);

impl UnaryService<GetTaskRequest> for Get {
    type Response = Arc<Task>;
    type Future = BoxFuture<'static, Result<Response<Arc<Task>>, Status>>;

    fn call(&mut self, request: Request<GetTaskRequest>) -> Self::Future {
        let binding = self.0.clone();
        Box::pin(async move {
            binding
                .call("GetTask", request, |core, call, r| async move { core.get_task_shared(&call, r).await })
                .await
        })
    }
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

/// A response that writes its own protobuf encoding.
trait WireEncode: Send + 'static {
    fn encode_to(&self, dst: &mut impl BufMut);
}

/// Already the encoding of a `StreamResponse`.
impl WireEncode for Bytes {
    fn encode_to(&self, dst: &mut impl BufMut) {
        dst.put_slice(self);
    }
}

/// A `Task`.
impl WireEncode for Arc<Task> {
    fn encode_to(&self, dst: &mut impl BufMut) {
        prost::Message::encode_raw(&**self, dst);
    }
}

/// A `SendMessageResponse`: its `payload` oneof holds `task` (field 1) or `message` (2).
impl WireEncode for SendOutcome {
    fn encode_to(&self, dst: &mut impl BufMut) {
        match self {
            SendOutcome::Task(task) => prost::encoding::message::encode(1, &**task, dst),
            SendOutcome::Message(message) => prost::encoding::message::encode(2, message, dst),
        }
    }
}

/// Decodes requests with prost; encodes responses that encode themselves.
struct SharedCodec<Req, Resp>(PhantomData<(Req, Resp)>);

impl<Req, Resp> Default for SharedCodec<Req, Resp> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

impl<Req: prost::Message + Default + Send + 'static, Resp: WireEncode> Codec for SharedCodec<Req, Resp> {
    type Encode = Resp;
    type Decode = Req;
    type Encoder = SharedEncoder<Resp>;
    type Decoder = RequestDecoder<Req>;

    fn encoder(&mut self) -> Self::Encoder {
        SharedEncoder(PhantomData)
    }

    fn decoder(&mut self) -> Self::Decoder {
        RequestDecoder(PhantomData)
    }
}

struct SharedEncoder<Resp>(PhantomData<Resp>);

impl<Resp: WireEncode> Encoder for SharedEncoder<Resp> {
    type Item = Resp;
    type Error = Status;

    fn encode(&mut self, item: Resp, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode_to(dst);
        Ok(())
    }

    /// A stream keeps its encode buffer for life, so an idle subscriber holds all of it: 1 KiB
    /// (which grows when a larger message comes) rather than tonic's default 8 KiB saves about
    /// 3 KiB of resident memory per open stream.
    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new(ENCODE_BUFFER, 32 * 1024)
    }
}

/// Initial size of a response's encode buffer.
const ENCODE_BUFFER: usize = 1024;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{Message, SendMessageResponse, TaskStatus, send_message_response::Payload};

    fn encoded(item: impl WireEncode) -> Vec<u8> {
        let mut buf = Vec::new();
        item.encode_to(&mut buf);
        buf
    }

    #[test]
    fn shared_answers_encode_exactly_like_prost() {
        let task = Task {
            id: "t-1".into(),
            context_id: "c-1".into(),
            status: Some(TaskStatus { state: 3, message: None, timestamp: None }),
            history: vec![Message { message_id: "m".into(), ..Default::default() }],
            ..Default::default()
        };
        let message = Message { message_id: "reply".into(), role: 2, ..Default::default() };
        let as_response =
            |payload| prost::Message::encode_to_vec(&SendMessageResponse { payload: Some(payload) });

        let shared = Arc::new(task.clone());
        assert_eq!(encoded(SendOutcome::Task(shared.clone())), as_response(Payload::Task(task.clone())));
        assert_eq!(encoded(SendOutcome::Message(message.clone())), as_response(Payload::Message(message)));
        assert_eq!(encoded(shared), prost::Message::encode_to_vec(&task));
    }
}
