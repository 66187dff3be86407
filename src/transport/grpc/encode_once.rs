//! SendMessage, SendStreamingMessage, GetTask and SubscribeToTask: answered from shared data
//! rather than from copies made for the answer.
//!
//! The generated service would make every subscriber clone and encode every event for itself.
//! Here the two streaming RPCs send the protobuf bytes cached in each
//! [`TaskEvent`](crate::task::log::TaskEvent): encoded by the first subscriber, shared by the
//! rest. Likewise SendMessage and GetTask encode the task straight from the copy its actor and
//! the store share, where the generated service needs a copy of its own. The bytes are
//! exactly what prost would write for the response messages (a test checks it), so clients
//! see no difference.
//!
//! Each RPC is one [`Rpc`] value (its name and its core call) served by one generic service,
//! [`Served`]: unary (framed by `unary.rs`) when the answer encodes itself, server-streaming
//! (framed by tonic) when it is an event stream.
use std::convert::Infallible;
use std::marker::PhantomData;
use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes};
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http;
use tonic::server::{Grpc, ServerStreamingService};
use tonic::{Request, Response, Status};

use super::GrpcBinding;
use crate::call::CallContext;
use crate::core::{Core, EventStream, SendOutcome};
use crate::error::A2aError;
use crate::proto::{GetTaskRequest, SendMessageRequest, SubscribeToTaskRequest, Task};
use crate::telemetry::RequestIds;
use crate::transport::grpc::request_parts;

/// One RPC of this path: its method name (for telemetry) and its call to the core. The
/// generated trait's bodies for these RPCs forward here too, so this is the one definition.
pub(super) struct Rpc<Req, Resp> {
    method: &'static str,
    run: CoreCall<Req, Resp>,
}

type CoreCall<Req, Resp> = fn(Arc<Core>, CallContext, Req) -> BoxFuture<'static, Result<Resp, A2aError>>;

/// SendMessage: the task as its actor and the store share it, or the agent's direct reply.
pub(super) static SEND_MESSAGE: Rpc<SendMessageRequest, SendOutcome> = Rpc {
    method: "SendMessage",
    run: |core, call, r| Box::pin(async move { core.send_message_shared(&call, r).await }),
};

/// GetTask: the shared task.
pub(super) static GET_TASK: Rpc<GetTaskRequest, Arc<Task>> = Rpc {
    method: "GetTask",
    run: |core, call, r| Box::pin(async move { core.get_task_shared(&call, r).await }),
};

/// SendStreamingMessage: the task's events.
pub(super) static SEND_STREAMING_MESSAGE: Rpc<SendMessageRequest, Events> = Rpc {
    method: "SendStreamingMessage",
    run: |core, call, r| Box::pin(async move { core.send_streaming_message(&call, r).await.map(Events) }),
};

/// SubscribeToTask: the task, then its events.
pub(super) static SUBSCRIBE_TO_TASK: Rpc<SubscribeToTaskRequest, Events> = Rpc {
    method: "SubscribeToTask",
    run: |core, call, r| Box::pin(async move { core.subscribe_to_task(&call, r).await.map(Events) }),
};

/// The events a streaming RPC answers with. A type of its own rather than the bare
/// [`EventStream`]: with the `dyn` lifetime of that alias inside [`Served`]'s type, the compiler
/// rejects the boxed serving future as "not general enough" (rust-lang/rust#64552).
pub(super) struct Events(pub(super) EventStream);

impl<Req: RequestIds, Resp> Rpc<Req, Resp> {
    /// Runs the RPC for `request` inside the shared request telemetry.
    pub(super) fn answer(
        &self,
        binding: &GrpcBinding,
        request: Request<Req>,
    ) -> impl Future<Output = Result<Response<Resp>, Status>> + use<Req, Resp> {
        binding.call(self.method, request, self.run)
    }
}

/// A routed request's answer.
pub(super) type Answer = BoxFuture<'static, Result<http::Response<tonic::body::Body>, Infallible>>;

/// Answers `request` here if its path is one of these RPCs, with `otherwise` if not.
pub(super) fn route<B>(
    binding: &Arc<GrpcBinding>,
    request: http::Request<B>,
    otherwise: impl FnOnce(http::Request<B>) -> Answer,
) -> Answer
where
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<tonic::codegen::StdError> + Send + 'static,
{
    let path = request.uri().path();
    let method = path.strip_prefix('/').and_then(|p| p.strip_prefix(crate::proto::SERVICE_NAME));
    let binding = binding.clone();
    let limits =
        Limits { max_request_bytes: binding.max_request_bytes, max_parts: binding.core.settings().max_parts };
    match method.and_then(|m| m.strip_prefix('/')) {
        Some("SendMessage") => unary(Served { binding, rpc: &SEND_MESSAGE }, limits, request),
        Some("GetTask") => unary(Served { binding, rpc: &GET_TASK }, limits, request),
        Some("SendStreamingMessage") => {
            streaming(Served { binding, rpc: &SEND_STREAMING_MESSAGE }, limits, request)
        }
        Some("SubscribeToTask") => streaming(Served { binding, rpc: &SUBSCRIBE_TO_TASK }, limits, request),
        _ => otherwise(request),
    }
}

/// What a request message may hold, checked on its bytes before it is decoded.
#[derive(Clone, Copy)]
pub(super) struct Limits {
    pub(super) max_request_bytes: usize,
    pub(super) max_parts: usize,
}

fn unary<Req, Resp, B>(service: Served<Req, Resp>, limits: Limits, request: http::Request<B>) -> Answer
where
    Req: prost::Message + Default + Admission + RequestIds + Send + 'static,
    Resp: WireEncode,
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<tonic::codegen::StdError> + Send + 'static,
{
    Box::pin(async move { Ok(super::unary::serve(service, limits, request).await) })
}

fn streaming<Req, B>(service: Served<Req, Events>, limits: Limits, request: http::Request<B>) -> Answer
where
    Req: prost::Message + Default + Admission + RequestIds + Send + 'static,
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<tonic::codegen::StdError> + Send + 'static,
{
    let mut grpc = Grpc::new(SharedCodec::<Req, Bytes>::new(limits.max_parts))
        .max_decoding_message_size(limits.max_request_bytes);
    Box::pin(async move { Ok(grpc.server_streaming(service, request).await) })
}

/// One [`Rpc`] as a service: unary ones are served by `unary.rs`, streaming ones by tonic.
pub(super) struct Served<Req: 'static, Resp: 'static> {
    pub(super) binding: Arc<GrpcBinding>,
    pub(super) rpc: &'static Rpc<Req, Resp>,
}

impl<Req: RequestIds + Send + 'static> ServerStreamingService<Req> for Served<Req, Events> {
    type Response = Bytes;
    type ResponseStream = BoxStream<'static, Result<Bytes, Status>>;
    type Future = BoxFuture<'static, Result<Response<Self::ResponseStream>, Status>>;

    fn call(&mut self, request: Request<Req>) -> Self::Future {
        let answer = self.rpc.answer(&self.binding, request);
        Box::pin(async move { Ok(answer.await?.map(|Events(stream)| shared_bytes(stream))) })
    }
}

/// Each item as the cached protobuf bytes of its event.
fn shared_bytes(stream: EventStream) -> BoxStream<'static, Result<Bytes, Status>> {
    stream.map(|item| item.map(|event| event.proto_bytes()).map_err(Status::from)).boxed()
}

/// A response that writes its own protobuf encoding.
pub(super) trait WireEncode: Send + 'static {
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

/// A `SendMessageResponse`: its `payload` oneof holds `task` (field 1) or `message` (2). A
/// task whose encoding the actor made (a finished one) is copied, not encoded again.
impl WireEncode for SendOutcome {
    fn encode_to(&self, dst: &mut impl BufMut) {
        use prost::encoding::{WireType, encode_key, encode_varint};
        match self {
            SendOutcome::Task(task) => match task.proto() {
                Some(bytes) => {
                    encode_key(1, WireType::LengthDelimited, dst);
                    encode_varint(bytes.len() as u64, dst);
                    dst.put_slice(bytes);
                }
                None => prost::encoding::message::encode(1, &**task.task(), dst),
            },
            SendOutcome::Message(message) => prost::encoding::message::encode(2, message, dst),
        }
    }
}

/// Decodes requests with prost once their bytes are admitted (`max_parts`); encodes responses
/// that encode themselves.
struct SharedCodec<Req, Resp> {
    max_parts: usize,
    _types: PhantomData<(Req, Resp)>,
}

impl<Req, Resp> SharedCodec<Req, Resp> {
    fn new(max_parts: usize) -> Self {
        Self { max_parts, _types: PhantomData }
    }
}

impl<Req: prost::Message + Default + Admission + Send + 'static, Resp: WireEncode> Codec
    for SharedCodec<Req, Resp>
{
    type Encode = Resp;
    type Decode = Req;
    type Encoder = SharedEncoder<Resp>;
    type Decoder = RequestDecoder<Req>;

    fn encoder(&mut self) -> Self::Encoder {
        SharedEncoder(PhantomData)
    }

    fn decoder(&mut self) -> Self::Decoder {
        RequestDecoder { max_parts: self.max_parts, _request: PhantomData }
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
pub(super) const ENCODE_BUFFER: usize = 1024;

struct RequestDecoder<Req> {
    max_parts: usize,
    _request: PhantomData<Req>,
}

impl<Req: prost::Message + Default + Admission> Decoder for RequestDecoder<Req> {
    type Item = Req;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Req>, Status> {
        decode_request(src.copy_to_bytes(src.remaining()), self.max_parts).map(Some)
    }
}

/// A request message's bytes admitted (see [`Admission`]), then decoded.
pub(super) fn decode_request<Req: prost::Message + Default + Admission>(
    bytes: Bytes,
    max_parts: usize,
) -> Result<Req, Status> {
    Req::admit(&bytes, max_parts)?;
    Req::decode(bytes).map_err(|e| Status::invalid_argument(format!("malformed request: {e}")))
}

/// What a request's bytes must pass before they are decoded.
pub(super) trait Admission {
    fn admit(_bytes: &[u8], _max_parts: usize) -> Result<(), A2aError> {
        Ok(())
    }
}

/// At most `--max-parts` parts in the message (field 2).
impl Admission for SendMessageRequest {
    fn admit(bytes: &[u8], max_parts: usize) -> Result<(), A2aError> {
        match request_parts::count(bytes, 2) {
            Some(parts) => crate::core::validate::admit_parts(parts, max_parts),
            None => Ok(()),
        }
    }
}

impl Admission for GetTaskRequest {}
impl Admission for SubscribeToTaskRequest {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{Message, SendMessageResponse, TaskStatus, send_message_response::Payload};
    use crate::task::encoded::EncodedTask;

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
        let plain = EncodedTask::plain(shared.clone());
        assert_eq!(encoded(SendOutcome::Task(plain)), as_response(Payload::Task(task.clone())));
        let with_bytes = EncodedTask::encoded(shared.clone());
        assert_eq!(encoded(SendOutcome::Task(with_bytes)), as_response(Payload::Task(task.clone())));
        assert_eq!(encoded(SendOutcome::Message(message.clone())), as_response(Payload::Message(message)));
        assert_eq!(encoded(shared), prost::Message::encode_to_vec(&task));
    }
}
