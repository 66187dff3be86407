//! hyper answers an HTTP/1.1 request it cannot parse by itself, before any route runs, with an
//! empty body: 414 for a URI over its fixed 65,534 bytes (a 100 KB task id in a REST path),
//! 431 for headers beyond its read buffer, 400 for a malformed request line or header, two
//! different `Content-Length`s, or a `Transfer-Encoding` other than chunked. Those answers are
//! the only ones that never reach a route, so the place to give them a body is the connection:
//! [`Http1Errors`] wraps each accepted connection and replaces exactly those answers, keeping
//! their status, with a `google.rpc.Status` body (reason `INVALID_REQUEST`). No binding is
//! known yet at that point (the request was never read), so the body is HTTP+JSON's.
//!
//! An answer of hyper's own is recognised by its shape, which nothing else on the connection
//! has: one write that is a whole response head with a 400, 414 or 431 status,
//! `content-length: 0` and no `content-type` (every answer of the server's routes names its
//! content type). HTTP/2 frames are binary and never match.
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::error::A2aError;

/// A connection whose HTTP/1.1 parse-error answers get a body.
pub struct Http1Errors<IO> {
    io: IO,
    /// The answer being written in place of hyper's, and how much of hyper's it stands for.
    replacing: Option<Replacement>,
}

struct Replacement {
    bytes: Vec<u8>,
    written: usize,
    /// The length of hyper's head, reported written once the replacement is.
    stands_for: usize,
}

impl<IO> Http1Errors<IO> {
    /// Wraps an accepted connection.
    pub fn new(io: IO) -> Self {
        Self { io, replacing: None }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Http1Errors<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> Http1Errors<IO> {
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
            && let Some(bytes) = replacement(head)
        {
            self.replacing = Some(Replacement { bytes, written: 0, stands_for: head.len() });
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Http1Errors<IO> {
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
fn replacement(head: &[u8]) -> Option<Vec<u8>> {
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
        400 => {
            "the request is not valid HTTP/1.1: a malformed request line or header, or a body length given twice or in an unsupported way"
        }
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
        let text = String::from_utf8(replacement(hyper).unwrap()).unwrap();
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
            assert!(replacement(other).is_none(), "{}", String::from_utf8_lossy(other));
        }
    }
}
