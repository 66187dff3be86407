use super::*;

/// Feeds `bytes` in pieces of `piece` bytes; the bytes as hyper would see them, and the
/// refusal if any.
fn feed_in_pieces(bytes: &[u8], piece: usize) -> (Vec<u8>, Option<&'static str>, RequestFraming) {
    let mut framing = RequestFraming::default();
    let mut seen = bytes.to_vec();
    let mut refused = None;
    for chunk in seen.chunks_mut(piece) {
        if let Some(reason) = framing.feed(chunk) {
            assert!(refused.is_none(), "refused twice");
            refused = Some(reason);
        }
    }
    (seen, refused, framing)
}

/// Every way of splitting `bytes` in equal pieces, and one byte at a time.
fn every_split(bytes: &[u8], check: impl Fn(usize, Vec<u8>, Option<&'static str>, RequestFraming)) {
    for piece in 1..=bytes.len() {
        let (seen, refused, framing) = feed_in_pieces(bytes, piece);
        check(piece, seen, refused, framing);
    }
}

/// Headers that look like framing, inside bodies: they must be skipped, not read.
const DECOY: &str = "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n";

fn keep_alive_stream() -> Vec<u8> {
    let mut stream = String::new();
    stream.push_str("\r\nGET /healthz HTTP/1.1\r\nHost: a\r\n\r\n");
    stream.push_str(&format!("POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n{DECOY}", DECOY.len()));
    stream.push_str("POST /x HTTP/1.1\r\ncontent-length: 0, 0\r\n\r\n");
    stream.push_str("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n");
    stream.push_str(&format!("{:x};name=value\r\n{DECOY}\r\n", DECOY.len()));
    stream.push_str("3\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\n");
    stream.push_str("POST / HTTP/1.1\nTransfer-Encoding: chunked\n\n000\r\n\r\n");
    stream.push_str("GET / HTTP/1.0\r\n\r\n");
    stream.into_bytes()
}

#[test]
fn a_keep_alive_stream_of_requests_is_followed_and_never_touched() {
    let stream = keep_alive_stream();
    every_split(&stream, |piece, seen, refused, framing| {
        assert_eq!(refused, None, "pieces of {piece}");
        assert_eq!(seen, stream, "pieces of {piece}");
        assert_eq!(framing.state, State::Between, "pieces of {piece}");
    });
}

#[test]
fn a_head_is_open_from_its_first_byte_to_its_empty_line() {
    let mut framing = RequestFraming::default();
    assert!(!framing.in_head());
    for (bytes, in_head) in [
        (&b"G"[..], true),
        (b"ET / HTTP/1.1\r\nContent-Length: 3\r\n", true),
        (b"\r", true),
        (b"\n", false),
        (b"ab", false),
        (b"cP", true),
        (b"OST / HTTP/1.1\r\n\r\n", false),
    ] {
        assert_eq!(framing.feed(&mut bytes.to_vec()), None);
        assert_eq!(framing.in_head(), in_head, "after {:?}", String::from_utf8_lossy(bytes));
    }
}

#[test]
fn both_lengths_are_refused_by_breaking_the_line_that_completes_the_pair() {
    for (first, second) in [
        ("Content-Length: 4", "Transfer-Encoding: chunked"),
        ("Transfer-Encoding: chunked", "content-length: 4"),
        ("Content-Length: 4", "Transfer-Encoding: gzip"),
    ] {
        let head = format!(
            "GET / HTTP/1.1\r\nHost: a\r\n\r\nPOST / HTTP/1.1\r\n{first}\r\n{second}\r\nHost: a\r\n\r\n"
        );
        let broken = head.find(second).map(|at| at + second.len() + 1);
        every_split(head.as_bytes(), |piece, seen, refused, framing| {
            assert!(refused.is_some_and(|r| r.contains("Content-Length")), "pieces of {piece}");
            let mut expected = head.clone().into_bytes();
            expected[broken.unwrap()] = 0;
            assert_eq!(seen, expected, "pieces of {piece}");
            assert_eq!(framing.state, State::Off);
        });
    }
}

#[test]
fn an_overlong_framing_header_is_refused_and_other_long_lines_are_not() {
    let long_coding =
        format!("POST / HTTP/1.1\r\nTransfer-Encoding: {}chunked\r\n\r\n", "gzip, ".repeat(100));
    let (_, refused, _) = feed_in_pieces(long_coding.as_bytes(), 7);
    assert!(refused.is_some_and(|r| r.contains("longer")), "{refused:?}");

    let long_other = format!(
        "POST /{} HTTP/1.1\r\nX-Long: {}\r\nContent-Length: 1\r\n\r\nx",
        "a".repeat(70_000),
        "b".repeat(9000)
    );
    let (_, refused, framing) = feed_in_pieces(long_other.as_bytes(), 4096);
    assert_eq!(refused, None);
    assert_eq!(framing.state, State::Between);
}

#[test]
fn http2_is_not_followed_even_when_its_frames_look_like_framing_headers() {
    let mut bytes = PREFACE.to_vec();
    bytes.extend_from_slice(b"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n");
    every_split(&bytes, |piece, seen, refused, framing| {
        assert_eq!((refused, &seen), (None, &bytes), "pieces of {piece}");
        assert!(!framing.in_head());
    });
    // Almost the preface is HTTP/1 (hyper refuses it, but it is followed like any other).
    let (_, _, framing) = feed_in_pieces(b"PRI * HTTP/2.0\r\n\r\nSX\r\n", 5);
    assert!(framing.in_head());
}

#[test]
fn framing_the_server_cannot_follow_turns_following_off() {
    for stream in [
        &b"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n"[..],
        b"POST / HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nz\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n11111111111111111\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\nx",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxy",
    ] {
        let (seen, refused, framing) = feed_in_pieces(stream, 3);
        assert_eq!((refused, &seen[..]), (None, stream), "{}", String::from_utf8_lossy(stream));
        assert_eq!(framing.state, State::Off, "{}", String::from_utf8_lossy(stream));
    }
}

#[test]
fn content_lengths_are_read_as_hyper_reads_them() {
    assert_eq!(content_length(" 12 "), Some(12));
    assert_eq!(content_length("7, 7,7"), Some(7));
    for bad in ["", "+1", "-1", "1 2", "7, 8", "0x10", "99999999999999999999", "1,"] {
        assert_eq!(content_length(bad), None, "{bad}");
    }
}

/// Whatever the bytes, and however the reads split them, the framing reaches the same verdict
/// and touches the same byte: random mutations of a valid stream, fed whole and in random pieces.
#[test]
fn the_verdict_does_not_depend_on_how_reads_split_the_bytes() {
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move |bound: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % bound as u64) as usize
    };
    let valid = keep_alive_stream();
    let alphabet = b"\r\n:,;0123456789abcdefxContent-LengthTransfer-Encodingchunked ";
    for _ in 0..3000 {
        let mut bytes = valid.clone();
        for _ in 0..1 + next(4) {
            let at = next(bytes.len());
            let byte = alphabet[next(alphabet.len())];
            match next(3) {
                0 => bytes[at] = byte,
                1 => bytes.insert(at, byte),
                _ => drop(bytes.remove(at)),
            }
        }
        let (whole, whole_refused, whole_framing) = feed_in_pieces(&bytes, bytes.len());
        let mut framing = RequestFraming::default();
        let mut pieces = bytes.clone();
        let mut refused = None;
        let mut at = 0;
        while at < pieces.len() {
            let end = (at + 1 + next(40)).min(pieces.len());
            refused = refused.or(framing.feed(&mut pieces[at..end]));
            at = end;
        }
        let input = String::from_utf8_lossy(&bytes);
        assert_eq!((pieces, refused), (whole, whole_refused), "{input:?}");
        assert_eq!(framing.state, whole_framing.state, "{input:?}");
    }
}
