//! The unary RPCs of the encode-once path (SendMessage, GetTask), framed here instead of by
//! tonic's generic server.
//!
//! tonic's `Grpc::unary` runs a call through a decode stream with a buffer of its own (the
//! request's bytes copied into it), moves the request and the response through several
//! futures, and encodes the answer through an encode stream: about a sixth of a quick
//! SendMessage's server instructions, and the largest share of the memory written per call.
//! A unary call needs far less: the request is one length-prefixed message, usually in the
//! body's first data frame (read without a copy), and the answer is one data frame and the
//! `grpc-status: 0` trailers.
//!
//! What a client sees is what tonic's server does for a codec without compression, with the
//! same status codes and wording: a `grpc-encoding` other than `identity` is UNIMPLEMENTED
//! (with `grpc-accept-encoding: identity`), a compressed or unknown flag byte INTERNAL, a
//! length prefix over `--max-request-bytes` OUT_OF_RANGE (turned into the limit error where
//! every gRPC answer is, `request_size::grpc_status`), a body that ends early or empty
//! INTERNAL, a body error as `Status::from_error` words it. One difference: whatever follows
//! the first message is not read (tonic reads, decodes and drops it before answering), so a
//! client that keeps its request stream open gets its answer without waiting for the end.
use std::pin::pin;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http_body::Frame;
use http_body_util::BodyExt;
use tonic::codegen::http::{self, HeaderMap, HeaderName, HeaderValue, header};
use tonic::metadata::GRPC_CONTENT_TYPE;
use tonic::{Code, Status};

use super::encode_once::{Admission, ENCODE_BUFFER, Limits, Served, WireEncode, decode_request};
use crate::telemetry::RequestIds;
use crate::transport::request_size::TONIC_TOO_LARGE;

/// The length-prefixed message header: a flag byte and a big-endian `u32` length.
const HEADER: usize = 5;

/// Serves one unary call of `service`.
pub(super) async fn serve<Req, Resp, B>(
    service: Served<Req, Resp>,
    limits: Limits,
    request: http::Request<B>,
) -> http::Response<tonic::body::Body>
where
    Req: prost::Message + Default + Admission + RequestIds + Send + 'static,
    Resp: WireEncode,
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<tonic::codegen::StdError> + Send + 'static,
{
    let (parts, body) = request.into_parts();
    let message = match read_message::<Req, B>(&parts.headers, body, limits).await {
        Ok(message) => message,
        Err(status) => return status.into_http(),
    };
    let request = tonic::Request::from_http(http::Request::from_parts(parts, message));
    match service.rpc.answer(&service.binding, request).await {
        Ok(response) => answer(response),
        Err(status) => status.into_http(),
    }
}

/// Reads and decodes the request's first message.
async fn read_message<Req, B>(headers: &HeaderMap, body: B, limits: Limits) -> Result<Req, Status>
where
    Req: prost::Message + Default + Admission,
    B: tonic::codegen::Body,
    B::Error: Into<tonic::codegen::StdError>,
{
    refuse_compression(headers)?;
    let mut body = pin!(body);
    let mut framer = Framer::new(limits.max_request_bytes);
    while let Some(frame) = body.frame().await {
        let frame = match frame {
            Ok(frame) => frame,
            Err(error) => match Status::from_error(error.into()) {
                // A request body that is cancelled has ended, as tonic sees it.
                status if status.code() == Code::Cancelled => break,
                status => return Err(status),
            },
        };
        // `Bytes` hands itself over without a copy.
        if let Ok(mut data) = frame.into_data()
            && let Some(message) = framer.push(data.copy_to_bytes(data.remaining()))?
        {
            return decode_request(message, limits.max_parts);
        }
    }
    Err(framer.ended())
}

/// `grpc-encoding`, as a name made once (a `&str` lookup parses it every call).
const GRPC_ENCODING: HeaderName = HeaderName::from_static("grpc-encoding");

/// `grpc-status`, made once for the same reason: every answer's trailers carry it.
const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");

/// A request compressed any way is refused: this server accepts no compression.
fn refuse_compression(headers: &HeaderMap) -> Result<(), Status> {
    let Some(encoding) = headers.get(GRPC_ENCODING) else { return Ok(()) };
    if encoding.as_bytes() == b"identity" {
        return Ok(());
    }
    let named = String::from_utf8_lossy(encoding.as_bytes());
    let mut status =
        Status::unimplemented(format!("Content is compressed with `{named}` which isn't supported"));
    status
        .metadata_mut()
        .insert("grpc-accept-encoding", tonic::metadata::MetadataValue::from_static("identity"));
    Err(status)
}

/// Finds the first length-prefixed message in the body's data frames.
struct Framer {
    limit: usize,
    /// The bytes of a message split across frames, its header first.
    partial: BytesMut,
}

impl Framer {
    fn new(limit: usize) -> Self {
        Self { limit, partial: BytesMut::new() }
    }

    /// Takes the next data frame; the first message once it is complete.
    fn push(&mut self, data: Bytes) -> Result<Option<Bytes>, Status> {
        if self.partial.is_empty() {
            // The usual case: the whole message in one frame, sliced out without a copy.
            if let Some(len) = self.length(&data)?
                && data.len() >= HEADER + len
            {
                return Ok(Some(data.slice(HEADER..HEADER + len)));
            }
        }
        self.partial.extend_from_slice(&data);
        match self.length(&self.partial)? {
            Some(len) if self.partial.len() >= HEADER + len => {
                self.partial.advance(HEADER);
                Ok(Some(self.partial.split_to(len).freeze()))
            }
            // Grown as bytes come, not by what the prefix announces: a client that announces
            // the limit and sends nothing more makes the server hold nothing more.
            Some(_) | None => Ok(None),
        }
    }

    /// The message length `bytes` announce, once their header is there, after checking the
    /// flag and the limit.
    fn length(&self, bytes: &[u8]) -> Result<Option<usize>, Status> {
        let Some(mut header) = bytes.get(..HEADER) else { return Ok(None) };
        match header.get_u8() {
            0 => {}
            1 => {
                return Err(Status::internal(
                    "protocol error: received message with compressed-flag but no grpc-encoding was specified",
                ));
            }
            flag => {
                return Err(Status::internal(format!(
                    "protocol error: received message with invalid compression flag: {flag} (valid flags are 0 and 1), while sending request"
                )));
            }
        }
        let len = header.get_u32() as usize;
        if len > self.limit {
            return Err(Status::out_of_range(format!(
                "{TONIC_TOO_LARGE}{len} bytes, the limit is: {} bytes",
                self.limit
            )));
        }
        Ok(Some(len))
    }

    /// Why a body that ended without a whole message has none.
    fn ended(&self) -> Status {
        if self.partial.is_empty() {
            Status::internal("Missing request message.")
        } else {
            Status::internal("Unexpected EOF decoding stream.")
        }
    }
}

/// The answer to a call that succeeded: its metadata as headers, its message, `grpc-status: 0`.
fn answer<Resp: WireEncode>(response: tonic::Response<Resp>) -> http::Response<tonic::body::Body> {
    // The binding sets no response extensions (tonic has no public way to carry them over).
    let (metadata, message, _) = response.into_parts();
    let mut buf = BytesMut::with_capacity(ENCODE_BUFFER);
    buf.put_bytes(0, HEADER);
    message.encode_to(&mut buf);
    // A task is bounded by `--max-task-bytes`, far below the 4 GiB a prefix can announce;
    // should one ever pass it, the caller hears so rather than a corrupt frame.
    let Ok(len) = u32::try_from(buf.len() - HEADER) else {
        return Status::resource_exhausted("the answer is too large for one gRPC message").into_http();
    };
    buf[1..HEADER].copy_from_slice(&len.to_be_bytes());
    let body = Answer { message: Some(buf.freeze()), trailers: true };
    let mut response = http::Response::new(tonic::body::Body::new(body));
    *response.headers_mut() = metadata.into_headers();
    response.headers_mut().insert(header::CONTENT_TYPE, GRPC_CONTENT_TYPE);
    response
}

/// One message, then the OK status as trailers.
struct Answer {
    message: Option<Bytes>,
    trailers: bool,
}

impl http_body::Body for Answer {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Some(message) = self.message.take() {
            return Poll::Ready(Some(Ok(Frame::data(message))));
        }
        if std::mem::take(&mut self.trailers) {
            let mut trailers = HeaderMap::with_capacity(1);
            trailers.insert(GRPC_STATUS, HeaderValue::from_static("0"));
            return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
        }
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        self.message.is_none() && !self.trailers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(flag: u8, message: &[u8]) -> Vec<u8> {
        let mut bytes = vec![flag];
        bytes.extend_from_slice(&(message.len() as u32).to_be_bytes());
        bytes.extend_from_slice(message);
        bytes
    }

    #[test]
    fn a_message_in_one_frame_or_split_anywhere_reads_the_same() {
        let whole = framed(0, b"hello, world");
        let mut framer = Framer::new(64);
        assert_eq!(framer.push(Bytes::from(whole.clone())).unwrap().as_deref(), Some(&b"hello, world"[..]));
        for cut in 1..whole.len() {
            let mut framer = Framer::new(64);
            assert_eq!(framer.push(Bytes::copy_from_slice(&whole[..cut])).unwrap(), None, "cut at {cut}");
            let message = framer.push(Bytes::copy_from_slice(&whole[cut..])).unwrap();
            assert_eq!(message.as_deref(), Some(&b"hello, world"[..]), "cut at {cut}");
        }
        let mut framer = Framer::new(64);
        let with_more = [framed(0, b"first"), framed(0, b"second")].concat();
        assert_eq!(framer.push(Bytes::from(with_more)).unwrap().as_deref(), Some(&b"first"[..]));
        let mut framer = Framer::new(64);
        assert_eq!(framer.push(Bytes::from(framed(0, b""))).unwrap().as_deref(), Some(&b""[..]));
    }

    #[test]
    fn refusals_word_what_tonic_words() {
        let refused = |bytes: Vec<u8>, limit| Framer::new(limit).push(Bytes::from(bytes)).unwrap_err();
        let status = refused(framed(0, &[7; 65]), 64);
        assert_eq!(status.code(), Code::OutOfRange);
        assert!(status.message().starts_with("Error, decoded message length too large: found 65 bytes"));
        assert_eq!(refused(framed(1, b"x"), 64).code(), Code::Internal);
        assert!(refused(framed(2, b"x"), 64).message().contains("invalid compression flag: 2"));

        let mut framer = Framer::new(64);
        assert_eq!(framer.ended().message(), "Missing request message.");
        assert_eq!(framer.push(Bytes::from_static(&[0, 0, 0])).unwrap(), None);
        assert_eq!(framer.ended().message(), "Unexpected EOF decoding stream.");

        let mut headers = HeaderMap::new();
        assert!(refuse_compression(&headers).is_ok());
        headers.insert("grpc-encoding", HeaderValue::from_static("identity"));
        assert!(refuse_compression(&headers).is_ok());
        headers.insert("grpc-encoding", HeaderValue::from_static("gzip"));
        let status = refuse_compression(&headers).unwrap_err();
        assert_eq!(status.code(), Code::Unimplemented);
        assert_eq!(status.metadata().get("grpc-accept-encoding").unwrap(), "identity");
    }
}
