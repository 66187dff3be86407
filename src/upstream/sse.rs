//! Server-Sent Events framing, as an upstream's JSON-RPC stream sends them: the `data:` lines
//! of one event joined with newlines; comments, `event:`, `id:` and `retry:` lines ignored.
//!
//! Bounded: an event larger than the limit is an error, not a growing buffer (an upstream is
//! trusted more than a client, but not with this server's memory).
use bytes::{Buf, BytesMut};

/// Splits a byte stream into SSE events' data.
#[derive(Debug)]
pub struct SseDecoder {
    buffer: BytesMut,
    data: Vec<u8>,
    /// Whether the current event has a `data` line yet (an empty `data:` still makes an event).
    has_data: bool,
    max_event_bytes: usize,
}

impl SseDecoder {
    /// A decoder refusing events (and unterminated lines) over `max_event_bytes`.
    pub fn new(max_event_bytes: usize) -> Self {
        Self { buffer: BytesMut::new(), data: Vec::new(), has_data: false, max_event_bytes }
    }

    /// Takes the next chunk of the body and returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<Vec<u8>>, String> {
        self.buffer.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(end) = memchr::memchr(b'\n', &self.buffer) {
            let mut line = &self.buffer[..end];
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            if line.is_empty() {
                if self.has_data {
                    events.push(std::mem::take(&mut self.data));
                    self.has_data = false;
                }
            } else if let Some(value) = field(line, b"data") {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            self.buffer.advance(end + 1);
            if self.data.len() > self.max_event_bytes {
                return Err(format!("an event over {} bytes", self.max_event_bytes));
            }
        }
        if self.buffer.len() > self.max_event_bytes {
            return Err(format!("a line over {} bytes", self.max_event_bytes));
        }
        Ok(events)
    }
}

/// The value of `line` if it is field `name` (`name:value`, one optional space after the colon).
fn field<'a>(line: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let rest = line.strip_prefix(name)?;
    let value = rest.strip_prefix(b":")?;
    Some(value.strip_prefix(b" ").unwrap_or(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_over_chunks_are_joined_and_comments_ignored() {
        let mut sse = SseDecoder::new(1024);
        assert!(sse.push(b": keep-alive\n\nda").unwrap().is_empty());
        assert!(sse.push(b"ta: {\"a\":\r\ndata:1}\r\nid: 7\n").unwrap().is_empty());
        assert_eq!(
            sse.push(b"\nevent: x\ndata: two\n\n").unwrap(),
            vec![b"{\"a\":\n1}".to_vec(), b"two".to_vec()]
        );
    }

    #[test]
    fn an_oversized_event_or_line_is_an_error() {
        let mut sse = SseDecoder::new(8);
        assert!(sse.push(b"data: 0123456789\n").is_err());
        let mut sse = SseDecoder::new(8);
        assert!(sse.push(b"data: 0123456789").is_err());
    }
}
