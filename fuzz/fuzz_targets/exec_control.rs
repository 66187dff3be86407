//! The exec agent's reading of its command's stdout: the bounded line reader, then the
//! control-line parser on every piece that starts a line. Pieces never exceed the reader's
//! limit and put the output back together exactly; a control line is output, an instruction
//! (an artifact that round-trips strictly, with a usable id), or refused with a reason.
//!
//! Input: the first byte sets the reader's limit (4 to 259 bytes), the rest is the output.
#![no_main]
use a2a_fuzz::check;
use a2a_server::agent::exec::STDOUT_ARTIFACT;
use a2a_server::fuzzing::{exec_control_line, exec_output_pieces};
use libfuzzer_sys::fuzz_target;

const PREFIX: &str = "@a2a";

fuzz_target!(|input: &[u8]| {
    let Some((&limit, output)) = input.split_first() else { return };
    let max = 4 + limit as usize;
    let pieces = exec_output_pieces(output, max);
    let newlines = output.iter().filter(|&&b| b == b'\n').count();
    assert_eq!(pieces.iter().filter(|p| p.newline).count(), newlines, "one piece ends at each newline");
    let mut line_start = true;
    for piece in &pieces {
        assert_eq!(piece.line_start, line_start, "only a piece after a split continues a line");
        line_start = !piece.split;
        assert!(!(piece.newline && piece.split));
    }
    if let Ok(text) = std::str::from_utf8(output) {
        let mut rebuilt = String::new();
        for piece in &pieces {
            assert!(piece.text.len() <= max, "a piece of {} bytes, limit {max}", piece.text.len());
            rebuilt.push_str(&piece.text);
            if piece.newline {
                rebuilt.push('\n');
            }
        }
        assert_eq!(rebuilt, text, "the pieces are the output");
    }
    for piece in pieces.iter().filter(|p| p.line_start) {
        match exec_control_line(&piece.text, PREFIX) {
            None => assert!(
                !piece.text.strip_prefix(PREFIX).is_some_and(|json| json.trim_start().starts_with('{')),
                "a line with the prefix and an object is a control line: {:?}",
                piece.text
            ),
            Some(Ok(Some(artifact))) => {
                assert!(!artifact.artifact_id.is_empty(), "an artifact always gets an id");
                assert_ne!(artifact.artifact_id, STDOUT_ARTIFACT, "the output's artifact id is reserved");
                check::roundtrip(&artifact);
            }
            Some(Ok(None)) => {}
            Some(Err(reason)) => assert!(!reason.is_empty()),
        }
        assert_eq!(exec_control_line(&piece.text, ""), None, "an empty prefix turns the protocol off");
    }
});
