//! Every accepted connection is wrapped in an [`Http1Guard`], which does at the byte level what
//! hyper's HTTP/1.1 server cannot be configured to do. HTTP/2 bytes pass through untouched.
//!
//! **Reading**, it follows the requests' framing (`request_framing.rs`) to refuse a request
//! with both `Content-Length` and `Transfer-Encoding`, and to time each request head from its
//! first byte: a head not complete within the header timeout fails the connection (slowloris),
//! while a kept-alive connection between requests is left to the connection's idle timeout.
//! (hyper's own header timer, which is off, would also close a connection that is merely idle.)
//!
//! **Writing**, it gives a body to the answers hyper makes by itself, before any route runs,
//! to a request it cannot parse: 414 for a URI over its fixed 65,534 bytes (a 100 KB task id in
//! a REST path), 431 for headers beyond its read buffer, 400 for a malformed request line or
//! header, two different `Content-Length`s, a `Transfer-Encoding` other than chunked, or a
//! request the framing refused. Those answers come with an empty body; the guard replaces
//! exactly those, keeping their status, with a `google.rpc.Status` body (reason
//! `INVALID_REQUEST`). No binding is known at that point (the request was never read), so the
//! body is HTTP+JSON's.
//!
//! An answer of hyper's own is recognised by its shape, which nothing else on the connection
//! has: one write that is a whole response head with a 400, 414 or 431 status,
//! `content-length: 0` and no `content-type` (every answer of the server's routes names its
//! content type). HTTP/2 frames are binary and never match.
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use super::request_framing::RequestFraming;
use crate::error::A2aError;

/// A connection guarded as the module says.
pub struct Http1Guard<IO> {
    io: IO,
    framing: RequestFraming,
    /// Why the framing refused a request, for the body of hyper's 400.
    refused: Option<&'static str>,
    /// The time a request head may take from its first byte; `None`: no limit.
    head_timeout: Option<Duration>,
    /// The deadline of the head in progress, if one is.
    head_deadline: Option<Pin<Box<Sleep>>>,
    head_timed: bool,
    /// The answer being written in place of hyper's, and how much of hyper's it stands for.
    replacing: Option<Replacement>,
}

struct Replacement {
    bytes: Vec<u8>,
    written: usize,
    /// The length of hyper's head, reported written once the replacement is.
    stands_for: usize,
}

impl<IO> Http1Guard<IO> {
    /// Wraps an accepted connection; `head_timeout` bounds each HTTP/1.1 request head.
    pub fn new(io: IO, head_timeout: Option<Duration>) -> Self {
        Self {
            io,
            framing: RequestFraming::default(),
            refused: None,
            head_timeout,
            head_deadline: None,
            head_timed: false,
            replacing: None,
        }
    }

    /// Starts the head's clock when a head has begun, stops it when the head is complete.
    fn time_heads(&mut self) {
        let in_head = self.framing.in_head();
        if in_head
            && !self.head_timed
            && let Some(timeout) = self.head_timeout
        {
            let deadline = Instant::now() + timeout;
            match &mut self.head_deadline {
                Some(sleep) => sleep.as_mut().reset(deadline),
                None => self.head_deadline = Some(Box::pin(tokio::time::sleep_until(deadline))),
            }
        }
        self.head_timed = in_head;
    }

    /// Whether the head in progress has run out of time (registering for the deadline if not).
    fn head_expired(&mut self, cx: &mut Context<'_>) -> bool {
        self.head_timed && self.head_deadline.as_mut().is_some_and(|sleep| sleep.as_mut().poll(cx).is_ready())
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Http1Guard<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if let Some(reason) = this.framing.feed(&mut buf.filled_mut()[before..]) {
                    tracing::debug!(reason, "HTTP/1.1 request refused for its framing");
                    this.refused = Some(reason);
                }
                this.time_heads();
                Poll::Ready(Ok(()))
            }
            Poll::Pending if this.head_expired(cx) => {
                tracing::debug!("HTTP/1.1 request head not received within the header timeout");
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "request head not received within --header-read-timeout-secs",
                )))
            }
            other => other,
        }
    }
}

impl<IO: AsyncWrite + Unpin> Http1Guard<IO> {
    /// Writes the replacement if one is under way; `Some(n)` once it is all written, `n` being
    /// the bytes of hyper's answer it stands for.
    fn poll_replacement(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Option<usize>>> {
        let Some(replacement) = self.replacing.as_mut() else { return Poll::Ready(Ok(None)) };
        while replacement.written < replacement.bytes.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &replacement.bytes[replacement.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            replacement.written += n;
        }
        let stands_for = replacement.stands_for;
        self.replacing = None;
        Poll::Ready(Ok(Some(stands_for)))
    }

    fn start_replacing(&mut self, head: &[u8]) {
        if self.replacing.is_none()
            && let Some(bytes) = replacement(head, self.refused)
        {
            self.replacing = Some(Replacement { bytes, written: 0, stands_for: head.len() });
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Http1Guard<IO> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.start_replacing(buf);
        match ready!(this.poll_replacement(cx))? {
            Some(stands_for) => Poll::Ready(Ok(stands_for)),
            None => Pin::new(&mut this.io).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Some(first) = bufs.iter().find(|buf| !buf.is_empty()) {
            this.start_replacing(first);
        }
        match ready!(this.poll_replacement(cx))? {
            Some(stands_for) => Poll::Ready(Ok(stands_for)),
            None => Pin::new(&mut this.io).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_replacement(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_replacement(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

/// hyper's answer to a request it could not parse, with a body: `None` for any other write.
fn replacement(head: &[u8], refused: Option<&str>) -> Option<Vec<u8>> {
    const LONGEST_HEAD: usize = 256;
    if head.len() > LONGEST_HEAD || !head.ends_with(b"\r\n\r\n") {
        return None;
    }
    let head = std::str::from_utf8(head).ok()?;
    let (status_line, headers) = head.split_once("\r\n")?;
    let status = status_line.strip_prefix("HTTP/1.1 ").or_else(|| status_line.strip_prefix("HTTP/1.0 "))?;
    let code: u16 = status.get(..3)?.parse().ok()?;
    let lower = headers.to_ascii_lowercase();
    if !lower.contains("content-length: 0\r\n") || lower.contains("content-type") {
        return None;
    }
    let why = match code {
        400 => refused.unwrap_or(
            "the request is not valid HTTP/1.1: a malformed request line or header, or a body length given twice or in an unsupported way",
        ),
        414 => "the request URI is longer than the 65534 bytes this server reads",
        431 => "the request headers are larger than this server reads",
        _ => return None,
    };
    let mut body = A2aError::InvalidRequest(why.to_owned()).to_http_body();
    // The body's code is the status the client gets.
    body["error"]["code"] = code.into();
    let body = body.to_string();
    let kept: String = headers
        .split("\r\n")
        .filter(|line| {
            let name = line.split(':').next().unwrap_or_default().trim().to_ascii_lowercase();
            !line.is_empty() && name != "content-length" && name != "connection"
        })
        .map(|line| format!("{line}\r\n"))
        .collect();
    Some(
        format!(
            "{status_line}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n{kept}\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_only_hypers_empty_parse_error_answers() {
        let hyper =
            b"HTTP/1.1 414 URI Too Long\r\nconnection: close\r\ncontent-length: 0\r\ndate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n";
        let text = String::from_utf8(replacement(hyper, None).unwrap()).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 414 URI Too Long\r\n"), "{head}");
        assert!(head.contains("\r\ndate: Sun, 06 Nov 1994 08:49:37 GMT"), "{head}");
        assert!(head.contains(&format!("content-length: {}", body.len())), "{head}");
        assert!(!head.contains("content-length: 0"), "{head}");
        assert_eq!(head.matches("connection: close").count(), 1, "{head}");
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error"]["code"], 414);
        assert_eq!(body["error"]["status"], "INVALID_ARGUMENT");
        assert_eq!(body["error"]["details"][0]["reason"], "INVALID_REQUEST");

        for other in [
            &b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"[..],
            b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 12\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n{}",
            b"{\"error\":{}}",
            b"\x00\x00\x04\x08\x00\x00\x00\x00\x00",
        ] {
            assert!(replacement(other, None).is_none(), "{}", String::from_utf8_lossy(other));
        }
    }
}
