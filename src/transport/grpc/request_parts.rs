//! The parts of an encoded SendMessageRequest, counted without decoding it: `--max-parts` is
//! checked on the bytes, so refusing a message of half a million one-byte parts costs its bytes
//! and not the ~200 bytes per part that decoding builds (a 4 MiB request would take ~200 MiB).
//!
//! An embedded message field that occurs more than once is merged by protobuf decoders, its
//! repeated fields concatenated, so every occurrence of the message field counts.

use bytes::Buf;
use prost::encoding::decode_varint;

/// `parts` in `Message`, v1.0 and v0.3 alike (v0.3 calls it `content`).
const PARTS: u32 = 5;

/// The parts in an encoded request whose message is field `message_field` (v1.0
/// SendMessageRequest: 2; v0.3: 1); `None` if the bytes are not protobuf, which the decoder
/// will then say.
pub(crate) fn count(request: &[u8], message_field: u32) -> Option<usize> {
    let mut parts = 0usize;
    let mut well_formed = true;
    each_field(request, |number, payload| {
        if let Some(message) = payload.filter(|_| number == message_field) {
            well_formed &= each_field(message, |number, _| parts += usize::from(number == PARTS)).is_some();
        }
    })?;
    well_formed.then_some(parts)
}

/// Calls `each` with the number of every field in `buf`, and the payload of length-delimited
/// ones; `None` if `buf` is not a sequence of well-formed fields.
fn each_field(mut buf: &[u8], mut each: impl FnMut(u32, Option<&[u8]>)) -> Option<()> {
    while buf.has_remaining() {
        let key = decode_varint(&mut buf).ok()?;
        let number = u32::try_from(key >> 3).ok()?;
        match key & 7 {
            0 => drop(decode_varint(&mut buf).ok()?),
            1 => buf = buf.get(8..)?,
            2 => {
                let length = usize::try_from(decode_varint(&mut buf).ok()?).ok()?;
                each(number, Some(buf.get(..length)?));
                buf = &buf[length..];
                continue;
            }
            5 => buf = buf.get(4..)?,
            // Groups: no A2A message has one.
            _ => return None,
        }
        each(number, None);
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use prost::Message as _;

    use super::*;
    use crate::proto::{Message, Part, SendMessageRequest, part};

    fn text(t: &str) -> Part {
        Part { content: Some(part::Content::Text(t.into())), ..Default::default() }
    }

    #[test]
    fn counts_the_parts_prost_would_decode() {
        let message = Message {
            message_id: "m".into(),
            role: 1,
            parts: vec![text("a"), text(""), Part::default()],
            extensions: vec!["x".into()],
            ..Default::default()
        };
        let request =
            SendMessageRequest { tenant: "t".into(), message: Some(message.clone()), ..Default::default() };
        let mut bytes = request.encode_to_vec();
        assert_eq!(count(&bytes, 2), Some(3));
        // The message field twice: merged, so the parts add up.
        bytes.extend(SendMessageRequest { message: Some(message), ..Default::default() }.encode_to_vec());
        assert_eq!(count(&bytes, 2), Some(6));
        let decoded = SendMessageRequest::decode(&bytes[..]).map(|r| r.message.map(|m| m.parts.len()));
        assert_eq!(decoded.ok().flatten(), Some(6));
        assert_eq!(count(&[], 2), Some(0));
    }

    #[test]
    fn malformed_bytes_are_left_to_the_decoder() {
        let request = SendMessageRequest {
            message: Some(Message { parts: vec![text("abc")], ..Default::default() }),
            ..Default::default()
        };
        let bytes = request.encode_to_vec();
        for cut in 1..bytes.len() {
            let truncated = &bytes[..cut];
            if count(truncated, 2).is_some() {
                // Whatever counts must also decode.
                assert!(SendMessageRequest::decode(truncated).is_ok(), "cut at {cut}");
            }
        }
        assert_eq!(count(&[0x13], 2), None, "a group");
        assert_eq!(count(&[0x12, 0x05, 0x2a], 2), None, "a length past the end");
    }
}
