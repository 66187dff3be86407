//! Follows the HTTP/1.1 requests on a connection as their bytes arrive, before hyper parses
//! them, for the two things hyper cannot be asked to do:
//!
//! - **Refuse ambiguous framing.** hyper frames a request that has both `Content-Length` and
//!   `Transfer-Encoding` by the latter and closes the connection after answering (RFC 9112 §6.1
//!   allows that), but it still runs the request. A front end that framed it by
//!   `Content-Length` saw different requests than we run, so such a request is refused outright:
//!   the framing breaks the header line that completes the pair (still unparsed, since hyper
//!   parses whole heads), hyper answers it 400, and the connection's answer rewriter gives that
//!   400 a body naming the reason.
//! - **Time a request head from its first byte.** hyper's header timer runs whenever it waits for
//!   a request, so a kept-alive connection between requests would be closed at the header
//!   timeout, not at the idle timeout. Knowing where each head starts and ends lets the
//!   connection time exactly the head (see `http1_guard.rs`).
//!
//! To know where heads are, the bodies between them are skipped by their own framing
//! (`Content-Length` bytes, or chunks and trailers). A connection that opens with the HTTP/2
//! preface is not followed, nor one whose bytes the framing cannot follow (hyper refuses those
//! itself): from then on nothing is touched or timed.

/// The HTTP/2 connection preface (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The bytes of a header line kept to read its name and the value of the two framing headers.
const KEPT_LINE: usize = 256;
/// Hex digits a chunk size may have (a u64).
const CHUNK_SIZE_DIGITS: u32 = 16;

/// Where the bytes of one connection are, request after request.
pub(super) struct RequestFraming {
    state: State,
    /// Bytes of the HTTP/2 preface matched from the connection's start; `None` once it is not one.
    preface: Option<usize>,
    /// The current line, up to [`KEPT_LINE`] bytes, and its whole length.
    line: Vec<u8>,
    line_length: usize,
    head: Head,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between requests: nothing of the next one has arrived.
    Between,
    /// Inside a request head.
    Head,
    /// Inside a `Content-Length` body: the bytes still to come.
    Body(u64),
    /// A chunk-size line: the size so far, its digits, and whether the digits have ended.
    ChunkSize { size: u64, digits: u32, ended: bool },
    /// The CR of a chunk-size line has arrived; its LF comes next.
    ChunkSizeLf { size: u64 },
    /// Inside a chunk: the bytes still to come.
    ChunkData(u64),
    /// After a chunk's data: its CRLF (`false` before the CR, `true` after).
    ChunkDataEnd(bool),
    /// The trailer lines after the last chunk, up to an empty line.
    Trailers,
    /// HTTP/2, or bytes the framing cannot follow: not followed any further.
    Off,
}

/// What the framing headers of the head so far said.
#[derive(Default)]
struct Head {
    request_line: bool,
    length: Option<u64>,
    /// Whether the last `Transfer-Encoding` ended with `chunked`.
    chunked: Option<bool>,
}

impl Default for RequestFraming {
    fn default() -> Self {
        Self {
            state: State::Between,
            preface: Some(0),
            line: Vec::new(),
            line_length: 0,
            head: Head::default(),
        }
    }
}

impl RequestFraming {
    /// Whether a request head has started and not yet ended.
    pub(super) fn in_head(&self) -> bool {
        self.state == State::Head
    }

    /// Follows `bytes`, just read from the connection and not yet seen by hyper. When they
    /// complete a head with ambiguous framing, one byte of that head is overwritten so that
    /// hyper refuses it, and the reason is returned; nothing is followed after that.
    pub(super) fn feed(&mut self, bytes: &mut [u8]) -> Option<&'static str> {
        self.follow_preface(bytes);
        let mut at = 0;
        while at < bytes.len() {
            match self.state {
                State::Off => return None,
                State::Between | State::Head | State::Trailers => {
                    if self.state == State::Between {
                        self.state = State::Head;
                    }
                    let end = bytes[at..].iter().position(|&b| b == b'\n').map(|i| at + i);
                    let until = end.unwrap_or(bytes.len());
                    self.extend_line(&bytes[at..until]);
                    let end = end?;
                    at = end + 1;
                    if let Some(reason) = self.end_line() {
                        bytes[end] = 0;
                        self.state = State::Off;
                        return Some(reason);
                    }
                }
                State::Body(left) | State::ChunkData(left) => {
                    let take = left.min((bytes.len() - at) as u64);
                    at += take as usize;
                    let left = left - take;
                    self.state = match (self.state, left) {
                        (State::Body(_), 0) => State::Between,
                        (State::Body(_), _) => State::Body(left),
                        (_, 0) => State::ChunkDataEnd(false),
                        _ => State::ChunkData(left),
                    };
                }
                State::ChunkDataEnd(cr) => {
                    self.state = match (cr, bytes[at]) {
                        (false, b'\r') => State::ChunkDataEnd(true),
                        (true, b'\n') => State::ChunkSize { size: 0, digits: 0, ended: false },
                        _ => State::Off,
                    };
                    at += 1;
                }
                State::ChunkSize { .. } | State::ChunkSizeLf { .. } => {
                    self.state = self.chunk_size(bytes[at]);
                    at += 1;
                }
            }
        }
        None
    }

    /// Turns the framing off for good once the connection has proven to be HTTP/2.
    fn follow_preface(&mut self, bytes: &[u8]) {
        let Some(matched) = self.preface else { return };
        let expected = &PREFACE[matched..];
        let n = expected.len().min(bytes.len());
        if bytes[..n] != expected[..n] {
            self.preface = None;
        } else if matched + n == PREFACE.len() {
            self.state = State::Off;
            self.preface = None;
        } else {
            self.preface = Some(matched + n);
        }
    }

    fn extend_line(&mut self, bytes: &[u8]) {
        let room = KEPT_LINE.saturating_sub(self.line.len());
        self.line.extend_from_slice(&bytes[..room.min(bytes.len())]);
        self.line_length = self.line_length.saturating_add(bytes.len());
    }

    /// A whole line of a head or of the trailers has arrived (its LF consumed); `Some` refuses
    /// the request.
    fn end_line(&mut self) -> Option<&'static str> {
        let line = self.line.strip_suffix(b"\r").unwrap_or(&self.line);
        let empty = line.is_empty() && self.line_length <= 1;
        let verdict = match self.state {
            State::Trailers if empty => {
                self.state = State::Between;
                None
            }
            State::Trailers => None,
            // Empty lines before a request line are skipped (RFC 9112 §2.2), as hyper does.
            _ if empty && !self.head.request_line => None,
            _ if empty => {
                self.state = self.body();
                self.head = Head::default();
                None
            }
            _ if !self.head.request_line => {
                self.head.request_line = true;
                None
            }
            _ => self.header_line(),
        };
        self.line.clear();
        self.line_length = 0;
        verdict
    }

    fn header_line(&mut self) -> Option<&'static str> {
        let line = self.line.strip_suffix(b"\r").unwrap_or(&self.line);
        let colon = line.iter().position(|&b| b == b':')?;
        let name = &line[..colon];
        let (is_length, is_coding) =
            (name.eq_ignore_ascii_case(b"content-length"), name.eq_ignore_ascii_case(b"transfer-encoding"));
        if !is_length && !is_coding {
            return None;
        }
        if self.line_length > KEPT_LINE {
            return Some("a Content-Length or Transfer-Encoding header longer than this server reads");
        }
        let value = std::str::from_utf8(&line[colon + 1..]).unwrap_or_default();
        if is_length {
            match content_length(value) {
                Some(length) if self.head.length.is_none_or(|seen| seen == length) => {
                    self.head.length = Some(length)
                }
                // hyper refuses it: nothing more to follow.
                _ => self.state = State::Off,
            }
        } else {
            let last = value.rsplit(',').next().unwrap_or_default();
            self.head.chunked = Some(last.trim().eq_ignore_ascii_case("chunked"));
        }
        (self.head.length.is_some() && self.head.chunked.is_some()).then_some(
            "the request has both Content-Length and Transfer-Encoding, so its body length is ambiguous (RFC 9112 §6.3)",
        )
    }

    /// Where a head that has just ended leaves the connection.
    fn body(&self) -> State {
        match (self.head.chunked, self.head.length) {
            (Some(true), _) => State::ChunkSize { size: 0, digits: 0, ended: false },
            // A coding other than chunked: hyper refuses it.
            (Some(false), _) => State::Off,
            (None, Some(0) | None) => State::Between,
            (None, Some(length)) => State::Body(length),
        }
    }

    /// One byte of a chunk-size line (hex digits, then optional whitespace and extensions, then
    /// CRLF), as strictly as hyper reads it.
    fn chunk_size(&self, byte: u8) -> State {
        match self.state {
            State::ChunkSizeLf { size: 0 } if byte == b'\n' => State::Trailers,
            State::ChunkSizeLf { size } if byte == b'\n' => State::ChunkData(size),
            State::ChunkSize { digits, .. } if byte == b'\r' && digits > 0 => {
                let State::ChunkSize { size, .. } = self.state else { return State::Off };
                State::ChunkSizeLf { size }
            }
            State::ChunkSize { size, digits, ended: false } if byte.is_ascii_hexdigit() => {
                if digits == CHUNK_SIZE_DIGITS {
                    return State::Off;
                }
                let digit = u64::from((byte as char).to_digit(16).unwrap_or_default());
                State::ChunkSize { size: size << 4 | digit, digits: digits + 1, ended: false }
            }
            State::ChunkSize { size, digits, .. } if digits > 0 && byte != b'\n' => {
                State::ChunkSize { size, digits, ended: true }
            }
            _ => State::Off,
        }
    }
}

/// A `Content-Length` value as hyper reads it: digits, or a list of the same digits.
fn content_length(value: &str) -> Option<u64> {
    let mut length = None;
    for item in value.split(',') {
        let item = item.trim();
        if item.is_empty() || !item.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n = item.parse::<u64>().ok()?;
        if length.is_some_and(|seen| seen != n) {
            return None;
        }
        length = Some(n);
    }
    length
}

#[cfg(test)]
#[path = "request_framing_tests.rs"]
mod tests;
