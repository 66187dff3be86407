//! The built-in `demo` agent: deterministic behaviours, chosen by the message, that make every
//! part of the protocol observable (streaming, interrupts, failures, direct replies).
//!
//! Text commands: `stream N MS [WAIT]`, `input`, `auth`, `fail`, `reject`, `message TEXT`;
//! anything else is echoed back as an artifact. A `messageId` prefix from the conformance-kit
//! contract (`tck-…`) takes precedence over the text.
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use pbjson_types::{Value, value::Kind};

use super::{AgentExecutor, EventSink, RequestContext, text_artifact, text_part};
use crate::card::skill;
use crate::error::A2aError;
use crate::proto::{AgentCard, Artifact, Part, TaskState, part};

/// Upper bounds on `stream` arguments, so a message cannot park a task for days.
const MAX_CHUNKS: u64 = 10_000_000;
const MAX_DELAY_MS: u64 = 60_000;

/// The demo agent.
#[derive(Debug, Default, Clone)]
pub struct DemoAgent;

impl DemoAgent {
    /// The card the demo agent publishes unless the operator overrides it.
    pub fn card() -> AgentCard {
        AgentCard {
            name: "a2a-server demo agent".into(),
            description: "Deterministic demo behaviours for watching A2A streaming, interrupts and errors."
                .into(),
            version: env!("CARGO_PKG_VERSION").into(),
            default_input_modes: vec!["text/plain".into()],
            default_output_modes: vec!["text/plain".into(), "application/json".into()],
            skills: vec![
                skill(
                    "stream",
                    "Stream",
                    "Streams N artifact chunks MS ms apart.",
                    &["demo", "streaming"],
                    &["stream 5 500"],
                ),
                skill(
                    "input",
                    "Ask for input",
                    "Asks a question, then echoes the answer.",
                    &["demo", "multi-turn"],
                    &["input"],
                ),
                skill(
                    "auth",
                    "Authorization",
                    "Waits in AUTH_REQUIRED, then resumes by itself.",
                    &["demo"],
                    &["auth"],
                ),
                skill("echo", "Echo", "Echoes any other text as an artifact.", &["demo"], &["hello"]),
            ],
            ..Default::default()
        }
    }
}

/// What a message asks for.
#[derive(Debug, PartialEq)]
enum Behaviour {
    Stream { chunks: u64, delay_ms: u64, wait_ms: u64 },
    Input,
    Auth,
    Fail,
    Reject,
    Reply(String),
    Echo(String),
    Tck(Tck, String),
}

/// The conformance-kit behaviours, by `messageId` prefix.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Tck {
    CompleteTask,
    InputRequired,
    ArtifactText,
    ArtifactFile,
    ArtifactFileUrl,
    ArtifactData,
    MessageResponse,
    Stream(&'static str),
    StreamComplete,
    StreamChunked,
    Reject,
    Resubscribe,
    Unhandled,
}

/// Prefix table; the longest matching prefix wins.
const TCK_PREFIXES: &[(&str, Tck)] = &[
    ("tck-complete-task", Tck::CompleteTask),
    ("tck-input-required", Tck::InputRequired),
    ("tck-artifact-text", Tck::ArtifactText),
    ("tck-artifact-file", Tck::ArtifactFile),
    ("tck-artifact-file-url", Tck::ArtifactFileUrl),
    ("tck-artifact-data", Tck::ArtifactData),
    ("tck-message-response", Tck::MessageResponse),
    ("tck-stream-001", Tck::Stream("Stream hello from TCK")),
    ("tck-stream-002", Tck::StreamComplete),
    ("tck-stream-003", Tck::Stream("Stream task lifecycle")),
    ("tck-stream-ordering-001", Tck::Stream("Ordered output")),
    ("tck-stream-artifact-chunked", Tck::StreamChunked),
    ("tck-reject-task", Tck::Reject),
    ("test-resubscribe-message-id", Tck::Resubscribe),
    ("tck-", Tck::Unhandled),
];

fn tck_behaviour(message_id: &str) -> Option<Tck> {
    TCK_PREFIXES
        .iter()
        .filter(|(prefix, _)| message_id.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, tck)| *tck)
}

fn parse(message_id: &str, text: String) -> Behaviour {
    if let Some(tck) = tck_behaviour(message_id) {
        return Behaviour::Tck(tck, message_id.to_owned());
    }
    let trimmed = text.trim();
    let mut words = trimmed.split_whitespace();
    match words.next() {
        Some("stream") => {
            let mut number = |default: u64| words.next().and_then(|w| w.parse().ok()).unwrap_or(default);
            let chunks = number(5).min(MAX_CHUNKS);
            let delay_ms = number(500).min(MAX_DELAY_MS);
            let wait_ms = number(0).min(MAX_DELAY_MS);
            Behaviour::Stream { chunks, delay_ms, wait_ms }
        }
        Some("input") if words.next().is_none() => Behaviour::Input,
        Some("auth") if words.next().is_none() => Behaviour::Auth,
        Some("fail") if words.next().is_none() => Behaviour::Fail,
        Some("reject") if words.next().is_none() => Behaviour::Reject,
        Some("message") => Behaviour::Reply(trimmed["message".len()..].trim().to_owned()),
        _ => Behaviour::Echo(text),
    }
}

impl AgentExecutor for DemoAgent {
    /// Written out rather than as an `async fn`: what the message asks is decided before the
    /// future exists, so the future holds the behaviour, not the whole RequestContext (about
    /// 400 bytes less per running task; an `async fn` keeps its arguments for its whole life).
    fn execute<'life0, 'async_trait>(
        &'life0 self,
        ctx: RequestContext,
        events: EventSink,
    ) -> Pin<Box<dyn Future<Output = Result<(), A2aError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let behaviour = parse(&ctx.message.message_id, ctx.text());
        let behaviour = if ctx.new_task { Some(behaviour) } else { follow_up(&ctx, behaviour) };
        Box::pin(async move {
            match behaviour {
                Some(behaviour) => run(behaviour, &events).await,
                None => Ok(()),
            }
        })
    }
}

/// What a message on an existing task does. Only an INPUT_REQUIRED task waits for one: it
/// completes by echoing the answer, except that an answer which is itself a `stream` command
/// (or, under the conformance contract, carries a `tck-` prefix) is run, so that tests can
/// attach subscribers to an idle task and then start a burst. On any other live task the
/// running execution carries on and this message adds nothing (`None`).
fn follow_up(ctx: &RequestContext, behaviour: Behaviour) -> Option<Behaviour> {
    if ctx.state() != TaskState::InputRequired {
        return None;
    }
    Some(match behaviour {
        Behaviour::Tck(..) | Behaviour::Stream { .. } => behaviour,
        _ => Behaviour::Echo(ctx.text()),
    })
}

async fn run(behaviour: Behaviour, events: &EventSink) -> Result<(), A2aError> {
    match behaviour {
        Behaviour::Stream { chunks, delay_ms, wait_ms } => stream(events, chunks, delay_ms, wait_ms).await?,
        Behaviour::Input => events.input_required(Some("What should I echo back?")).await?,
        Behaviour::Auth => {
            events
                .auth_required(Some("Authorization required: waiting for a credential out of band."))
                .await?;
            tokio::time::sleep(Duration::from_secs(1)).await;
            events.working(Some("Credential received; resuming.")).await?;
            events.complete(Some("Authorized work done.")).await?;
        }
        Behaviour::Fail => events.fail(Some("The demo agent failed, as asked.")).await?,
        Behaviour::Reject => events.reject(Some("The demo agent rejected the task, as asked.")).await?,
        Behaviour::Reply(text) => events.reply(&text).await?,
        Behaviour::Echo(text) => {
            events.artifact(text_artifact("echo", "echo", text)).await?;
            events.complete(None).await?;
        }
        Behaviour::Tck(tck, message_id) => run_tck(tck, &message_id, events).await?,
    }
    Ok(())
}

async fn stream(events: &EventSink, chunks: u64, delay_ms: u64, wait_ms: u64) -> Result<(), A2aError> {
    events.working(None).await?;
    if wait_ms > 0 {
        tokio::time::sleep(Duration::from_millis(wait_ms)).await;
    }
    for i in 0..chunks {
        if i > 0 && delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        }
        let chunk = text_artifact("stream", "stream", format!("chunk {i}"));
        events.artifact_chunk(chunk, i > 0, i + 1 == chunks).await?;
    }
    events.complete(None).await?;
    Ok(())
}

async fn run_tck(tck: Tck, message_id: &str, events: &EventSink) -> Result<(), A2aError> {
    let artifact = |part: Part| Artifact {
        artifact_id: "tck-artifact".into(),
        name: "output".into(),
        parts: vec![part],
        ..Default::default()
    };
    let file_part = |content: part::Content| Part {
        content: Some(content),
        filename: "output.txt".into(),
        media_type: "text/plain".into(),
        ..Default::default()
    };
    match tck {
        Tck::CompleteTask => events.complete(Some("Hello from TCK")).await?,
        Tck::InputRequired => events.input_required(None).await?,
        Tck::ArtifactText => {
            events.artifact(artifact(text_part("Generated text content"))).await?;
            events.complete(None).await?;
        }
        Tck::ArtifactFile => {
            events.artifact(artifact(file_part(part::Content::Raw(b"tck".to_vec())))).await?;
            events.complete(None).await?;
        }
        Tck::ArtifactFileUrl => {
            let url = part::Content::Url("https://example.com/output.txt".into());
            events.artifact(artifact(file_part(url))).await?;
            events.complete(None).await?;
        }
        Tck::ArtifactData => {
            let data = Part { content: Some(part::Content::Data(tck_data())), ..Default::default() };
            events.artifact(artifact(data)).await?;
            events.complete(None).await?;
        }
        Tck::MessageResponse => events.reply("Direct message response").await?,
        Tck::Stream(text) => {
            events.working(None).await?;
            events.artifact(artifact(text_part(text))).await?;
            events.complete(None).await?;
        }
        Tck::StreamComplete => events.complete(None).await?,
        Tck::StreamChunked => {
            events.working(None).await?;
            events.artifact_chunk(artifact(text_part("chunk-1 ")), false, false).await?;
            events.artifact_chunk(artifact(text_part("chunk-2")), true, true).await?;
            events.complete(None).await?;
        }
        Tck::Reject => events.reject(None).await?,
        Tck::Resubscribe => {
            events.working(None).await?;
            tokio::time::sleep(Duration::from_secs(4)).await;
            events.complete(None).await?;
        }
        Tck::Unhandled => events.complete(Some(&format!("Unhandled messageId prefix: {message_id}"))).await?,
    }
    Ok(())
}

/// `{"key":"value","count":42}` as a protobuf Value.
fn tck_data() -> Value {
    let fields = [
        ("key".to_owned(), Value { kind: Some(Kind::StringValue("value".into())) }),
        ("count".to_owned(), Value { kind: Some(Kind::NumberValue(42.0)) }),
    ];
    Value { kind: Some(Kind::StructValue(pbjson_types::Struct { fields: fields.into_iter().collect() })) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_commands() {
        assert_eq!(
            parse("m", "stream 3 10".into()),
            Behaviour::Stream { chunks: 3, delay_ms: 10, wait_ms: 0 }
        );
        assert_eq!(
            parse("m", "stream 3 0 50".into()),
            Behaviour::Stream { chunks: 3, delay_ms: 0, wait_ms: 50 }
        );
        assert_eq!(parse("m", "input".into()), Behaviour::Input);
        assert_eq!(parse("m", "message hi there".into()), Behaviour::Reply("hi there".into()));
        assert_eq!(parse("m", "hello".into()), Behaviour::Echo("hello".into()));
        assert_eq!(parse("m", "input please".into()), Behaviour::Echo("input please".into()));
    }

    #[test]
    fn longest_tck_prefix_wins() {
        assert_eq!(tck_behaviour("tck-artifact-file-url-1"), Some(Tck::ArtifactFileUrl));
        assert_eq!(tck_behaviour("tck-artifact-file-1"), Some(Tck::ArtifactFile));
        assert_eq!(tck_behaviour("tck-whatever"), Some(Tck::Unhandled));
        assert_eq!(tck_behaviour("m-1"), None);
        assert_eq!(
            parse("tck-stream-001", "input".into()),
            Behaviour::Tck(Tck::Stream("Stream hello from TCK"), "tck-stream-001".into())
        );
    }
}
