//! The command's output: bounded lines from its pipes, the stdout artifact streamed in bounded
//! chunks (of which the task keeps only a bounded window), and the tail of stderr.
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use pbjson_types::{Struct, Value, value::Kind};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

use crate::agent::{EventSink, SinkClosed, text_part};
use crate::proto::Artifact;

/// The longest line read whole. A longer output line is passed on in pieces; a longer control
/// line is an error. Bounds the memory one task's reader holds.
pub(super) const MAX_LINE: usize = 1 << 20;

/// The most text one stdout chunk carries. Bounds every event the output puts into the task's
/// event log (which `--event-log-bytes` bounds as a whole) and into a fleet's Redis stream
/// (bounded in events only: 4 KiB × 4096 entries = 16 MiB at most).
pub(super) const CHUNK_BYTES: usize = 4 << 10;

/// The id (and name) of the artifact that collects stdout.
pub const STDOUT_ARTIFACT: &str = "stdout";

/// Stderr lines kept for the failure message, and the bytes kept of each.
const STDERR_LINES: usize = 20;
const STDERR_LINE_BYTES: usize = 500;

/// How a piece of a line ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// At a newline (not included in the text).
    Newline,
    /// At the end of input, without a newline.
    Eof,
    /// The line was longer than the reader's limit; the rest follows in further pieces.
    Split,
}

/// A line, or a piece of a line that was too long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Piece {
    /// The text; invalid UTF-8 is replaced.
    pub text: String,
    /// Whether this piece starts a line (false for the continuation of a split line).
    pub line_start: bool,
    /// How it ended.
    pub end: End,
}

/// Reads lines of at most `max` bytes, never buffering more. Cancel-safe: [`LineReader::next`]
/// keeps its partial line in `self`, so it can sit in a `select!` and be polled with
/// `now_or_never`.
pub(crate) struct LineReader<R> {
    inner: BufReader<R>,
    line: Vec<u8>,
    max: usize,
    line_start: bool,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub fn new(reader: R, max: usize) -> Self {
        Self {
            inner: BufReader::with_capacity(64 << 10, reader),
            line: Vec::new(),
            max: max.max(4),
            line_start: true,
        }
    }

    /// The next line without its newline, or the next piece of a longer one; `None` at the end.
    pub async fn next(&mut self) -> std::io::Result<Option<Piece>> {
        loop {
            let buffered = self.inner.fill_buf().await?;
            if buffered.is_empty() {
                if self.line.is_empty() {
                    return Ok(None);
                }
                let text = into_text(std::mem::take(&mut self.line));
                return Ok(Some(self.piece(text, End::Eof)));
            }
            let window = &buffered[..buffered.len().min(self.max - self.line.len())];
            if let Some(newline) = window.iter().position(|&b| b == b'\n') {
                self.line.extend_from_slice(&window[..newline]);
                self.inner.consume(newline + 1);
                let text = into_text(std::mem::take(&mut self.line));
                return Ok(Some(self.piece(text, End::Newline)));
            }
            let taken = window.len();
            self.line.extend_from_slice(window);
            self.inner.consume(taken);
            if self.line.len() >= self.max {
                let rest = self.line.split_off(utf8_cut(&self.line));
                let text = into_text(std::mem::replace(&mut self.line, rest));
                return Ok(Some(self.piece(text, End::Split)));
            }
        }
    }

    fn piece(&mut self, text: String, end: End) -> Piece {
        let piece = Piece { text, line_start: self.line_start, end };
        self.line_start = end != End::Split;
        piece
    }
}

/// Where to split `bytes` so that a multi-byte character at the end is not cut in two.
fn utf8_cut(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=3.min(len) {
        let byte = bytes[len - back];
        if byte & 0b1100_0000 != 0b1000_0000 {
            // The lead byte of the last character: how long that character is.
            let width = match byte {
                b if b >= 0b1111_0000 => 4,
                b if b >= 0b1110_0000 => 3,
                b if b >= 0b1100_0000 => 2,
                _ => 1,
            };
            return if width > back { len - back } else { len };
        }
    }
    len
}

fn into_text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The largest index ≤ `at` that is a character boundary of `s`.
fn floor_char_boundary(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The stdout artifact: streams every byte to subscribers, in chunks of at most
/// [`CHUNK_BYTES`], while the task keeps at most `max_stored` bytes of it.
///
/// The first chunk creates the artifact and later ones append to it, until appending would
/// take the stored artifact past `max_stored`: that chunk is sent with `append: false`, which
/// replaces the stored artifact (a window on the latest output) and says in the artifact's
/// metadata (`omittedBytes`) how much output came before it. A live subscriber sees every
/// chunk; a late reader sees the latest window. The end of output is an empty chunk with
/// `lastChunk: true`.
pub(super) struct StdoutArtifact {
    pending: String,
    chunks: u64,
    stored: usize,
    total: u64,
    max_stored: usize,
}

impl StdoutArtifact {
    pub fn new(max_stored: usize) -> Self {
        Self { pending: String::new(), chunks: 0, stored: 0, total: 0, max_stored }
    }

    /// Whether text is waiting to be sent.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Adds output; sends whole chunks as soon as there are any.
    pub async fn write(&mut self, events: &EventSink, text: &str) -> Result<(), SinkClosed> {
        self.pending.push_str(text);
        while self.pending.len() >= CHUNK_BYTES {
            let rest = self.pending.split_off(floor_char_boundary(&self.pending, CHUNK_BYTES));
            let chunk = std::mem::replace(&mut self.pending, rest);
            self.send(events, chunk, false).await?;
        }
        Ok(())
    }

    /// Sends the pending text as one chunk.
    pub async fn flush(&mut self, events: &EventSink) -> Result<(), SinkClosed> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::take(&mut self.pending);
        self.send(events, chunk, false).await
    }

    /// Sends what is pending and, if there was any output, the closing chunk.
    pub async fn finish(&mut self, events: &EventSink) -> Result<(), SinkClosed> {
        self.flush(events).await?;
        if self.chunks > 0 {
            self.send(events, String::new(), true).await?;
        }
        Ok(())
    }

    async fn send(&mut self, events: &EventSink, text: String, last_chunk: bool) -> Result<(), SinkClosed> {
        let append = self.chunks > 0 && self.stored + text.len() <= self.max_stored;
        let mut metadata = None;
        if !append {
            if self.chunks > 0 {
                metadata = Some(omitted_bytes(self.total));
            }
            self.stored = 0;
        }
        self.stored += text.len();
        self.total += text.len() as u64;
        self.chunks += 1;
        let artifact = Artifact {
            artifact_id: STDOUT_ARTIFACT.into(),
            name: STDOUT_ARTIFACT.into(),
            parts: vec![text_part(&text)],
            metadata,
            ..Default::default()
        };
        events.artifact_chunk(artifact, append, last_chunk).await
    }
}

fn omitted_bytes(bytes: u64) -> Struct {
    let value = Value { kind: Some(Kind::NumberValue(bytes as f64)) };
    Struct { fields: [("omittedBytes".to_owned(), value)].into() }
}

/// The last lines the command wrote to stderr, each cut to a bounded length.
#[derive(Debug, Default)]
pub(super) struct StderrTail {
    lines: VecDeque<String>,
}

impl StderrTail {
    fn push(&mut self, mut line: String) {
        if self.lines.len() == STDERR_LINES {
            self.lines.pop_front();
        }
        line.truncate(floor_char_boundary(&line, STDERR_LINE_BYTES));
        self.lines.push_back(line);
    }

    /// The lines, for a status message: empty when there were none.
    pub fn describe(&self) -> String {
        if self.lines.is_empty() {
            return String::new();
        }
        let mut text = format!("\nstderr (last {} lines):", self.lines.len());
        for line in &self.lines {
            text.push('\n');
            text.push_str(line);
        }
        text
    }
}

/// Reads stderr to its end, keeping the tail and logging each line at debug level.
pub(super) async fn collect_stderr(
    stderr: impl AsyncRead + Unpin,
    tail: Arc<Mutex<StderrTail>>,
    task_id: String,
) {
    let mut reader = LineReader::new(stderr, STDERR_LINE_BYTES);
    while let Ok(Some(piece)) = reader.next().await {
        if !piece.line_start {
            continue;
        }
        tracing::debug!(%task_id, line = %piece.text, "stderr");
        let mut line = piece.text;
        if piece.end == End::Split {
            line.push('…');
        }
        tail.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::AgentEvent;
    use crate::proto::{TaskArtifactUpdateEvent, part};
    use crate::task::handle::Command;
    use crate::task::mailbox;

    async fn pieces(input: &[u8], max: usize) -> Vec<Piece> {
        let mut reader = LineReader::new(input, max);
        let mut pieces = Vec::new();
        while let Some(piece) = reader.next().await.unwrap() {
            pieces.push(piece);
        }
        pieces
    }

    fn piece(text: &str, line_start: bool, end: End) -> Piece {
        Piece { text: text.into(), line_start, end }
    }

    #[tokio::test]
    async fn reads_lines_and_splits_long_ones() {
        assert_eq!(
            pieces(b"one\n\ntwo", 16).await,
            [piece("one", true, End::Newline), piece("", true, End::Newline), piece("two", true, End::Eof)]
        );
        assert_eq!(
            pieces(b"abcdefghij\nxy\n", 4).await,
            [
                piece("abcd", true, End::Split),
                piece("efgh", false, End::Split),
                piece("ij", false, End::Newline),
                piece("xy", true, End::Newline)
            ]
        );
    }

    #[tokio::test]
    async fn never_cuts_a_character_in_two() {
        // "aéé": 'é' is two bytes; a 4-byte limit would cut the second one.
        let got = pieces("aéé\n".as_bytes(), 4).await;
        assert_eq!(got, [piece("aé", true, End::Split), piece("é", false, End::Newline)]);
        assert_eq!(pieces(b"\xff\n", 8).await, [piece("\u{fffd}", true, End::Newline)]);
    }

    fn artifact_events(rx: &mut mailbox::Receiver<Command>) -> Vec<TaskArtifactUpdateEvent> {
        let mut events = Vec::new();
        while let Some(command) = rx.try_recv() {
            if let Command::Agent(event) = command
                && let AgentEvent::Artifact(update) = *event
            {
                events.push(update);
            }
        }
        events
    }

    fn text(update: &TaskArtifactUpdateEvent) -> &str {
        match &update.artifact.as_ref().unwrap().parts[0].content {
            Some(part::Content::Text(text)) => text,
            _ => panic!("not text"),
        }
    }

    #[tokio::test]
    async fn streams_everything_but_stores_a_bounded_window() {
        let (tx, mut rx) = mailbox::channel(1024);
        let sink = EventSink::new("t".into(), "c".into(), tx);
        let mut artifact = StdoutArtifact::new(2 * CHUNK_BYTES);
        let line = "x".repeat(CHUNK_BYTES - 1) + "\n";
        for _ in 0..5 {
            artifact.write(&sink, &line).await.unwrap();
        }
        artifact.write(&sink, "tail\n").await.unwrap();
        artifact.finish(&sink).await.unwrap();
        let events = artifact_events(&mut rx);
        let shape: Vec<(usize, bool, bool)> =
            events.iter().map(|e| (text(e).len(), e.append, e.last_chunk)).collect();
        let k = CHUNK_BYTES;
        assert_eq!(
            shape,
            [
                (k, false, false),
                (k, true, false),
                (k, false, false),
                (k, true, false),
                (k, false, false),
                (5, true, false),
                (0, true, true)
            ]
        );
        let omitted = |e: &TaskArtifactUpdateEvent| {
            e.artifact.as_ref().unwrap().metadata.as_ref().map(|m| m.fields["omittedBytes"].clone())
        };
        assert_eq!(omitted(&events[0]), None);
        assert_eq!(omitted(&events[2]), Some(Value { kind: Some(Kind::NumberValue((2 * k) as f64)) }));
        let all: String = events.iter().map(text).collect();
        assert_eq!(all, line.repeat(5) + "tail\n");
    }

    #[tokio::test]
    async fn no_output_means_no_artifact() {
        let (tx, mut rx) = mailbox::channel(8);
        let sink = EventSink::new("t".into(), "c".into(), tx);
        StdoutArtifact::new(100).finish(&sink).await.unwrap();
        assert!(artifact_events(&mut rx).is_empty());
    }

    #[test]
    fn the_stderr_tail_is_bounded() {
        let mut tail = StderrTail::default();
        for i in 0..100 {
            tail.push(format!("line {i} {}", "y".repeat(1000)));
        }
        let text = tail.describe();
        assert!(text.starts_with("\nstderr (last 20 lines):\nline 80 "), "{text}");
        assert!(!text.contains("line 79 "));
        assert!(text.len() < STDERR_LINES * (STDERR_LINE_BYTES + 1) + 40);
    }
}
