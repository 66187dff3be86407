//! HTTP/1.1 by hand over a TCP socket, for what a client library would never send (both
//! `Content-Length` and `Transfer-Encoding`, a malformed header, a request too long to parse)
//! and for watching what a library hides: when the server answers, and whether it keeps the
//! connection.
use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::PATIENCE;

/// One HTTP/1.1 connection.
pub struct RawHttp {
    stream: TcpStream,
    /// Bytes read past the last response.
    buffer: Vec<u8>,
}

/// A response as read off the socket.
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    /// Names lowercased, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The body as JSON, after checking that it is declared JSON.
    pub fn json(&self) -> serde_json::Value {
        let content_type = self.header("content-type").unwrap_or_default();
        assert!(content_type.contains("json"), "content-type {content_type:?} of {self:?}");
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }
}

impl RawHttp {
    pub async fn connect(addr: SocketAddr) -> Self {
        Self { stream: TcpStream::connect(addr).await.expect("connect"), buffer: Vec::new() }
    }

    /// Writes all of `bytes` (failing the test if the server closed the connection).
    pub async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("the server must read the whole request");
    }

    /// Writes `body` in pieces of `piece` bytes, as a slow network would deliver it.
    pub async fn send_in_pieces(&mut self, body: &[u8], piece: usize) {
        for chunk in body.chunks(piece) {
            self.send(chunk).await;
        }
    }

    async fn fill(&mut self) -> usize {
        let mut chunk = [0u8; 16 * 1024];
        let n = tokio::time::timeout(PATIENCE, self.stream.read(&mut chunk))
            .await
            .expect("the server must answer")
            .expect("read");
        self.buffer.extend_from_slice(&chunk[..n]);
        n
    }

    /// Reads one response (a body framed by Content-Length, chunked, or ended by the close).
    pub async fn response(&mut self) -> RawResponse {
        let head_end = loop {
            if let Some(end) = self.buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                break end;
            }
            assert!(
                self.fill().await > 0,
                "closed before a response: {:?}",
                String::from_utf8_lossy(&self.buffer)
            );
        };
        let head = String::from_utf8(self.buffer.drain(..head_end + 4).collect()).expect("text head");
        let mut lines = head.split("\r\n");
        let status_line = lines.next().expect("status line");
        let status = status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status");
        let headers: Vec<(String, String)> = lines
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (name, value) = l.split_once(':').expect("header line");
                (name.trim().to_ascii_lowercase(), value.trim().to_owned())
            })
            .collect();
        let mut response = RawResponse { status, headers, body: Vec::new() };
        if let Some(length) = response.header("content-length") {
            let length: usize = length.parse().expect("length");
            while self.buffer.len() < length {
                assert!(self.fill().await > 0, "closed inside a body");
            }
            response.body = self.buffer.drain(..length).collect();
        } else if response.header("transfer-encoding").is_some_and(|te| te.contains("chunked")) {
            response.body = self.chunked_body().await;
        } else {
            while self.fill().await > 0 {}
            response.body = std::mem::take(&mut self.buffer);
        }
        response
    }

    async fn chunked_body(&mut self) -> Vec<u8> {
        let mut body = Vec::new();
        loop {
            let line_end = loop {
                if let Some(end) = self.buffer.windows(2).position(|w| w == b"\r\n") {
                    break end;
                }
                assert!(self.fill().await > 0, "closed inside a chunk");
            };
            let line = String::from_utf8(self.buffer.drain(..line_end + 2).collect()).expect("size line");
            let size =
                usize::from_str_radix(line.trim().split(';').next().unwrap_or_default(), 16).expect("size");
            while self.buffer.len() < size + 2 {
                assert!(self.fill().await > 0, "closed inside a chunk");
            }
            body.extend(self.buffer.drain(..size));
            self.buffer.drain(..2);
            if size == 0 {
                return body;
            }
        }
    }

    /// Whether the server closes the connection with nothing more to say.
    pub async fn closes(&mut self) -> bool {
        let more = self.fill().await;
        more == 0 && self.buffer.is_empty()
    }
}

/// A request head, with `headers` given as `Name: value` lines.
pub fn head(method: &str, path: &str, headers: &[&str]) -> String {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n");
    for header in headers {
        head.push_str(header);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    head
}

/// `body` in the chunked transfer coding, in chunks of `size` bytes, with the last chunk.
pub fn chunked(body: &[u8], size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + body.len() / size * 8 + 5);
    for chunk in body.chunks(size) {
        out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        out.extend_from_slice(chunk);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}
