//! The one request size limit, `--max-request-bytes`, on every binding, refused the same way:
//! `A2aError::limit(LimitKind::TooLarge, "max-request-bytes", …)`, so gRPC RESOURCE_EXHAUSTED,
//! HTTP 413, JSON-RPC -31413, ErrorInfo reason `PAYLOAD_TOO_LARGE`.
//!
//! - The JSON bindings read their bodies with [`read_body`]: a declared `Content-Length` over the
//!   limit is refused before a byte is read, a body that grows past it (chunked, or HTTP/2)
//!   as soon as it does, so no more than the limit is ever buffered.
//! - gRPC and grpc-web: tonic checks each message's length prefix against
//!   `max_decoding_message_size` (set to the limit) before it buffers the message, and answers
//!   `OUT_OF_RANGE`; [`grpc_status`] is the one place that turns that answer into ours.
//! - A handler that answers before reading the whole body (too large, wrong content type,
//!   no credential) would leave the rest unread, and on HTTP/1.1 hyper then closes the
//!   connection under a client still sending, which sees a reset instead of the answer.
//!   [`finish_body`] reads and discards the rest first, up to [`DRAIN_FACTOR`] times the
//!   limit, and beyond that answers with `Connection: close`.
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Version, header};
use axum::middleware::Next;
use axum::response::Response;
use bytes::BytesMut;
use futures::StreamExt;
use http_body::{Frame, SizeHint};

use crate::error::{A2aError, LimitKind};

/// The default limit: 4 MiB, gRPC's usual default (tonic, grpc-go, grpc-java), so a client that
/// works against other gRPC servers works here on every binding. It bounds the bytes buffered
/// for one request before decoding (decoding a JSON body costs several times that, briefly).
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

/// An unread HTTP/1.1 body is drained up to this many times the limit before the answer.
pub const DRAIN_FACTOR: usize = 4;

/// The flag that sets the limit, as ErrorInfo metadata `limit` names it.
const FLAG: &str = "max-request-bytes";

/// The error for a request over `limit` bytes (`size`, when known).
pub fn too_large(limit: usize, size: Option<u64>) -> A2aError {
    let detail = match size {
        Some(size) => format!("the request is {size} bytes; the limit is {limit} bytes"),
        None => format!("the request is larger than the limit of {limit} bytes"),
    };
    A2aError::limit(LimitKind::TooLarge, FLAG, detail)
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers.get(header::CONTENT_LENGTH)?.to_str().ok()?.trim().parse().ok()
}

/// Reads a request body of at most `limit` bytes.
pub async fn read_body(body: Body, headers: &HeaderMap, limit: usize) -> Result<Bytes, A2aError> {
    let declared = content_length(headers);
    if let Some(size) = declared.filter(|&size| size > limit as u64) {
        return Err(too_large(limit, Some(size)));
    }
    // Grown as bytes arrive: a client that declares a large body and sends nothing holds
    // no more than this.
    let mut buffer = BytesMut::with_capacity(declared.map_or(0, |size| size.min(64 * 1024) as usize));
    let mut chunks = body.into_data_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| A2aError::InvalidRequest(format!("unreadable request body: {e}")))?;
        if buffer.len() + chunk.len() > limit {
            return Err(too_large(limit, None));
        }
        buffer.extend_from_slice(&chunk);
    }
    Ok(buffer.freeze())
}

/// How tonic words its refusal of a message over `max_decoding_message_size` (and
/// `grpc/unary.rs`, which frames SendMessage and GetTask itself, words it the same way).
pub(crate) const TONIC_TOO_LARGE: &str = "Error, decoded message length too large: found ";

/// A gRPC answer (also grpc-web's: tonic-web keeps a trailers-only status in the headers)
/// with tonic's `OUT_OF_RANGE` for a request message over the limit replaced by the limit error,
/// with its ErrorInfo.
pub async fn grpc_status(State(limit): State<usize>, mut response: Response) -> Response {
    limit_status(limit, response.headers_mut());
    response
}

/// [`grpc_status`] on a response's headers, for a call that does not go through the router.
pub fn limit_status(limit: usize, headers: &mut HeaderMap) {
    if headers.get(tonic::Status::GRPC_STATUS) != Some(&HeaderValue::from_static("11")) {
        return;
    }
    let Some(status) = tonic::Status::from_header_map(headers) else { return };
    let Some(found) = status.message().strip_prefix(TONIC_TOO_LARGE) else { return };
    let size = found.split(' ').next().and_then(|n| n.parse().ok());
    // `add_header` replaces grpc-status, grpc-message and grpc-status-details-bin; it fails
    // only on a message that cannot be a header value, which ours is not.
    let _ = too_large(limit, size).to_grpc_status().add_header(headers);
}

/// Runs the request, then drains what the handler left unread of an HTTP/1.x body (see the
/// module doc). HTTP/2 needs none of this: an unread stream is reset, the connection lives on.
pub async fn finish_body(State(limit): State<usize>, request: Request, next: Next) -> Response {
    if request.version() >= Version::HTTP_2 {
        return next.run(request).await;
    }
    let headers = request.headers();
    let awaits_continue =
        headers.get(header::EXPECT).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let declared = content_length(headers);
    let unread = Arc::new(Mutex::new(None));
    let request =
        request.map(|body| Body::new(Watched { body: Some(body), seen: 0, unread: unread.clone() }));
    let mut response = next.run(request).await;
    let left = unread.lock().ok().and_then(|mut slot| slot.take());
    if let Some(Unread { body, seen }) = left {
        let budget = limit.saturating_mul(DRAIN_FACTOR) as u64;
        // A client waiting for `100 Continue` has sent nothing: closing loses nothing, and
        // reading would ask it for the body.
        let waiting = awaits_continue && seen == 0;
        let too_much = declared.is_some_and(|size| size.saturating_sub(seen) > budget);
        if waiting || too_much || !drain(body, budget).await {
            response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
    }
    response
}

/// Reads `body` to its end, discarding it; false if it is longer than `budget` or breaks.
async fn drain(body: Body, budget: u64) -> bool {
    let mut drained = 0u64;
    let mut chunks = body.into_data_stream();
    while let Some(chunk) = chunks.next().await {
        match chunk {
            Ok(chunk) => drained += chunk.len() as u64,
            Err(_) => return false,
        }
        if drained > budget {
            return false;
        }
    }
    true
}

/// A body a handler dropped before its end, and how much of it was read.
struct Unread {
    body: Body,
    seen: u64,
}

/// A request body that, dropped before its end, leaves the rest for [`finish_body`].
struct Watched {
    /// None once the body ended or broke.
    body: Option<Body>,
    seen: u64,
    unread: Arc<Mutex<Option<Unread>>>,
}

impl HttpBody for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        let Some(body) = this.body.as_mut() else { return Poll::Ready(None) };
        let frame = ready!(Pin::new(body).poll_frame(cx));
        match &frame {
            Some(Ok(frame)) => this.seen += frame.data_ref().map_or(0, |data| data.len() as u64),
            None | Some(Err(_)) => this.body = None,
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(HttpBody::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body.as_ref().map_or_else(|| SizeHint::with_exact(0), HttpBody::size_hint)
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        let Some(body) = self.body.take().filter(|body| !body.is_end_stream()) else { return };
        if let Ok(mut slot) = self.unread.lock() {
            *slot = Some(Unread { body, seen: self.seen });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(content_length: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(length) = content_length {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from_str(length).unwrap());
        }
        headers
    }

    fn chunked(chunks: &[&'static [u8]]) -> Body {
        let chunks: Vec<Result<Bytes, std::io::Error>> =
            chunks.iter().map(|c| Ok(Bytes::from_static(c))).collect();
        Body::from_stream(futures::stream::iter(chunks))
    }

    #[tokio::test]
    async fn reads_up_to_the_limit_and_no_further() {
        let body = read_body(chunked(&[b"abc", b"de"]), &headers(None), 5).await.unwrap();
        assert_eq!(&body[..], b"abcde");
        let error = read_body(chunked(&[b"abc", b"def"]), &headers(None), 5).await.unwrap_err();
        assert_eq!((error.reason(), error.http_status()), ("PAYLOAD_TOO_LARGE", 413));
        assert_eq!(error.metadata()["limit"], "max-request-bytes");
        // A declared length over the limit is refused before the body is touched.
        let error = read_body(chunked(&[]), &headers(Some("6")), 5).await.unwrap_err();
        assert!(error.to_string().contains("is 6 bytes"), "{error}");
    }

    #[tokio::test]
    async fn maps_tonics_out_of_range_and_nothing_else() {
        let tonic_says = tonic::Status::out_of_range(
            "Error, decoded message length too large: found 5000000 bytes, the limit is: 4194304 bytes",
        );
        let response = grpc_status(State(4_194_304), tonic_says.into_http()).await;
        let status = tonic::Status::from_header_map(response.headers()).unwrap();
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        assert!(status.message().contains("5000000 bytes"), "{}", status.message());
        use tonic_types::StatusExt;
        let info = status.get_details_error_info().unwrap();
        assert_eq!((info.reason.as_str(), info.metadata["limit"].as_str()), ("PAYLOAD_TOO_LARGE", FLAG));

        let other = tonic::Status::out_of_range("page 7 of 3");
        let response = grpc_status(State(1), other.into_http()).await;
        assert_eq!(
            tonic::Status::from_header_map(response.headers()).unwrap().code(),
            tonic::Code::OutOfRange
        );
    }
}
