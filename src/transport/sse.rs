//! Server-Sent Events framing shared by the JSON-RPC and HTTP+JSON streaming methods.
//!
//! The events that are ready when the body is polled go out together, as one HTTP/2 DATA
//! frame (up to `MAX_BATCH_EVENTS` or `MAX_BATCH_BYTES`), as tonic does for gRPC messages:
//! a frame and a write per event cost a subscriber of a burst several times what its JSON
//! does. A stream with nothing to send gets a comment every keep-alive interval, so proxies
//! and clients do not take it for dead.
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, Bytes, BytesMut};
use futures::{Stream, StreamExt};
use tokio::time::{Instant, Sleep};

use crate::core::EventStream;
use crate::error::A2aError;
use crate::task::log::TaskEvent;

/// Events put in one body chunk at most: the stream yields to the connection between batches.
const MAX_BATCH_EVENTS: usize = 64;

/// Bytes after which a batch is sent even if more events are ready.
const MAX_BATCH_BYTES: usize = 32 * 1024;

/// The keep-alive: an SSE comment line.
const KEEP_ALIVE: &[u8] = b":\n\n";

/// Writes SSE events into the chunk being built.
pub struct Writer<'a>(&'a mut BytesMut);

impl Writer<'_> {
    /// One event: its `id:` and `event:` lines if given, then `data` (the pieces joined) as
    /// data lines, a line per line of the data.
    pub fn event(&mut self, id: Option<u64>, kind: Option<&'static str>, data: &[&str]) {
        let buf = &mut *self.0;
        if let Some(id) = id {
            buf.put_slice(b"id: ");
            buf.put_slice(id.to_string().as_bytes());
            buf.put_u8(b'\n');
        }
        if let Some(kind) = kind {
            buf.put_slice(b"event: ");
            buf.put_slice(kind.as_bytes());
            buf.put_u8(b'\n');
        }
        buf.put_slice(b"data: ");
        for piece in data {
            put_line(buf, piece);
        }
        buf.put_slice(b"\n\n");
    }
}

/// Writes `text`, turning each line break in it (CRLF, LF or CR) into the start of another
/// data line: a raw line break would end the field, or the event.
fn put_line(buf: &mut BytesMut, text: &str) {
    let mut rest = text.as_bytes();
    while let Some(at) = memchr::memchr2(b'\r', b'\n', rest) {
        buf.put_slice(&rest[..at]);
        buf.put_slice(b"\ndata: ");
        let skip = if rest[at..].starts_with(b"\r\n") { 2 } else { 1 };
        rest = &rest[at + skip..];
    }
    buf.put_slice(rest);
}

/// Turns a core event stream into an SSE response, each item written by `frame`. The core's
/// streams end after an error, so an error event is always the last one. When the client goes
/// away the response body, and with it the subscription, is dropped.
pub fn response<F>(stream: EventStream, keep_alive: Duration, frame: F) -> Response
where
    F: FnMut(Result<Arc<TaskEvent>, A2aError>, &mut Writer<'_>) + Send + Unpin + 'static,
{
    let idle = Box::pin(tokio::time::sleep(keep_alive));
    let body = Batches { events: stream, frame, keep_alive, idle, ended: false, last_len: 0 };
    let mut response = Body::from_stream(body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Reverse proxies (nginx) must not buffer a live stream.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// The body: the events ready at each poll as one chunk, or a keep-alive after an idle interval.
struct Batches<F> {
    events: EventStream,
    frame: F,
    keep_alive: Duration,
    idle: Pin<Box<Sleep>>,
    ended: bool,
    /// The previous chunk's length: the next one is allocated that large at once, since
    /// growing a chunk event by event copied it about twice over in a burst.
    last_len: usize,
}

impl<F> Stream for Batches<F>
where
    F: FnMut(Result<Arc<TaskEvent>, A2aError>, &mut Writer<'_>) + Unpin,
{
    type Item = Result<Bytes, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let mut chunk = BytesMut::new();
        let mut count = 0;
        while !this.ended && count < MAX_BATCH_EVENTS && chunk.len() < MAX_BATCH_BYTES {
            match this.events.poll_next_unpin(cx) {
                Poll::Ready(Some(item)) => {
                    if count == 0 {
                        chunk.reserve(this.last_len.min(2 * MAX_BATCH_BYTES));
                    }
                    (this.frame)(item, &mut Writer(&mut chunk));
                    count += 1;
                }
                Poll::Ready(None) => this.ended = true,
                Poll::Pending => break,
            }
        }
        if !chunk.is_empty() {
            this.last_len = chunk.len();
            this.idle.as_mut().reset(Instant::now() + this.keep_alive);
            return Poll::Ready(Some(Ok(chunk.freeze())));
        }
        if this.ended {
            return Poll::Ready(None);
        }
        if this.idle.as_mut().poll(cx).is_ready() {
            this.idle.as_mut().reset(Instant::now() + this.keep_alive);
            return Poll::Ready(Some(Ok(Bytes::from_static(KEEP_ALIVE))));
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(id: Option<u64>, kind: Option<&'static str>, data: &[&str]) -> String {
        let mut buf = BytesMut::new();
        Writer(&mut buf).event(id, kind, data);
        String::from_utf8(buf.to_vec()).unwrap()
    }

    #[test]
    fn events_are_framed_as_the_sse_format_says() {
        assert_eq!(written(Some(7), None, &["{\"a\":", "1}"]), "id: 7\ndata: {\"a\":1}\n\n");
        assert_eq!(written(None, Some("error"), &["{}"]), "event: error\ndata: {}\n\n");
        assert_eq!(
            written(None, None, &["a\nb\r\nc\rd", "\n"]),
            "data: a\ndata: b\ndata: c\ndata: d\ndata: \n\n"
        );
    }
}
