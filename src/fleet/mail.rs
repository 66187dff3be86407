//! What replicas send one another through their inboxes: a command for a task's owner, and
//! the owner's reply. Protobuf (prost), so the A2A messages inside travel as they are.
use prost::{Message as _, Oneof};

use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::{Message, Task};

/// One inbox entry.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Mail {
    /// A command or a reply.
    #[prost(oneof = "Kind", tags = "1, 2")]
    pub kind: Option<Kind>,
}

/// What a [`Mail`] carries.
#[derive(Clone, PartialEq, Oneof)]
pub enum Kind {
    /// For the owner of a task.
    #[prost(message, tag = "1")]
    Request(Request),
    /// For the replica that forwarded a command.
    #[prost(message, tag = "2")]
    Reply(Reply),
}

/// A command for the actor of a task this replica does not run.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Request {
    /// Matches the reply to the waiting caller.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// The replica to reply to.
    #[prost(string, tag = "2")]
    pub reply_to: String,
    /// The caller's tenant.
    #[prost(string, tag = "3")]
    pub tenant: String,
    /// The caller's principal: the owner's actor checks the task is theirs.
    #[prost(string, tag = "4")]
    pub principal: String,
    /// The task.
    #[prost(string, tag = "5")]
    pub task_id: String,
    /// CancelTask (when no message is given).
    #[prost(message, optional, tag = "6")]
    pub message: Option<Message>,
    /// The extensions the caller activated.
    #[prost(string, repeated, tag = "7")]
    pub extensions: Vec<String>,
    /// The request's metadata.
    #[prost(message, optional, tag = "8")]
    pub metadata: Option<pbjson_types::Struct>,
    /// The output modes the caller accepts.
    #[prost(string, repeated, tag = "9")]
    pub accepted_output_modes: Vec<String>,
    /// Answer once the turn has ended (a blocking SendMessage) rather than at once.
    #[prost(bool, tag = "10")]
    pub settle: bool,
    /// `ifGenerationMatch` (A2A dev-1.1), checked by the owner's actor.
    #[prost(int64, optional, tag = "11")]
    pub if_generation_match: Option<i64>,
}

impl Request {
    /// Whose task the caller says it is.
    pub fn owner(&self) -> Owner {
        Owner { tenant: self.tenant.clone(), principal: self.principal.clone() }
    }
}

/// The owner's answer.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Reply {
    /// The request's id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// What came of it; none: the task is not live at the owner (look it up again).
    #[prost(oneof = "Outcome", tags = "2, 3, 4, 5")]
    pub outcome: Option<Outcome>,
}

/// What came of a forwarded command.
#[derive(Clone, PartialEq, Oneof)]
pub enum Outcome {
    /// The task after a cancel, or as a blocking message's turn ended.
    #[prost(message, tag = "2")]
    Task(Task),
    /// A turn to follow: the task as the message was recorded, and the seq of the last event
    /// that task includes.
    #[prost(message, tag = "3")]
    Turn(TurnStart),
    /// The agent answered with a message.
    #[prost(message, tag = "4")]
    Message(Message),
    /// An error, as [`A2aError::to_parts`] splits it.
    #[prost(message, tag = "5")]
    Error(ErrorParts),
}

/// Where a forwarded turn starts.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TurnStart {
    /// The task right after the message was recorded.
    #[prost(message, optional, tag = "1")]
    pub snapshot: Option<Task>,
    /// The seq of the last event `snapshot` includes.
    #[prost(uint64, tag = "2")]
    pub seq: u64,
}

/// An [`A2aError`] in transit.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ErrorParts {
    /// The reason.
    #[prost(string, tag = "1")]
    pub reason: String,
    /// The first field.
    #[prost(string, tag = "2")]
    pub a: String,
    /// The second field.
    #[prost(string, tag = "3")]
    pub b: String,
}

impl From<&A2aError> for ErrorParts {
    fn from(error: &A2aError) -> Self {
        let (reason, a, b) = error.to_parts();
        Self { reason, a, b }
    }
}

impl From<ErrorParts> for A2aError {
    fn from(parts: ErrorParts) -> Self {
        A2aError::from_parts(&parts.reason, parts.a, parts.b)
    }
}

impl Mail {
    /// The bytes that go in an inbox.
    pub fn to_bytes(kind: Kind) -> Vec<u8> {
        Mail { kind: Some(kind) }.encode_to_vec()
    }

    /// Mail read from an inbox. Mail that does not decode (nested past the decoder's limit,
    /// or from another release) still names where its answer goes, so that no caller waits
    /// on it: see [`Unreadable`].
    pub fn parse(bytes: &[u8]) -> Result<Kind, Box<Unreadable>> {
        let error = match Mail::decode(bytes) {
            Ok(Mail { kind: Some(kind) }) => return Ok(kind),
            Ok(Mail { kind: None }) => "no command or reply".to_owned(),
            Err(error) => error.to_string(),
        };
        let why = |what: &str| A2aError::Internal(format!("a forwarded {what} did not decode: {error}"));
        Err(Box::new(match Envelope::decode(bytes).ok().and_then(|envelope| envelope.kind) {
            Some(Routing::Request(RequestRouting { id, reply_to, task_id })) => {
                Unreadable::Request { id, reply_to, task_id, error: why("command") }
            }
            Some(Routing::Reply(ReplyRouting { id })) => Unreadable::Reply { id, error: why("answer") },
            None => Unreadable::Garbage(error),
        }))
    }
}

/// Mail that did not decode, and what of it did: enough to answer it at once.
#[derive(Debug)]
pub enum Unreadable {
    /// A command: its sender is to be answered with `error`.
    Request {
        /// The command's id.
        id: u64,
        /// Its sender.
        reply_to: String,
        /// Its task.
        task_id: String,
        /// The answer.
        error: A2aError,
    },
    /// A reply: the caller waiting for it gets `error`.
    Reply {
        /// The reply's id.
        id: u64,
        /// What the caller gets.
        error: A2aError,
    },
    /// Not even that: no one can be answered.
    Garbage(String),
}

/// A [`Mail`] read for its routing alone: the fields after these are skipped, not decoded, so
/// nesting cannot make it fail (a length-delimited field is stepped over whole).
#[derive(Clone, PartialEq, prost::Message)]
struct Envelope {
    #[prost(oneof = "Routing", tags = "1, 2")]
    kind: Option<Routing>,
}

#[derive(Clone, PartialEq, Oneof)]
enum Routing {
    #[prost(message, tag = "1")]
    Request(RequestRouting),
    #[prost(message, tag = "2")]
    Reply(ReplyRouting),
}

/// [`Request`]'s id, sender and task.
#[derive(Clone, PartialEq, prost::Message)]
struct RequestRouting {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(string, tag = "2")]
    reply_to: String,
    #[prost(string, tag = "5")]
    task_id: String,
}

/// [`Reply`]'s id.
#[derive(Clone, PartialEq, prost::Message)]
struct ReplyRouting {
    #[prost(uint64, tag = "1")]
    id: u64,
}

#[cfg(test)]
mod tests {
    use pbjson_types::{Struct, Value, value::Kind as ValueKind};

    use super::*;

    fn deep() -> Struct {
        let value = (0..40).fold(Value { kind: Some(ValueKind::BoolValue(true)) }, |inner, _| Value {
            kind: Some(ValueKind::StructValue(Struct { fields: [("k".to_owned(), inner)].into() })),
        });
        match value.kind {
            Some(ValueKind::StructValue(deep)) => deep,
            _ => unreachable!(),
        }
    }

    /// Mail nested past the decoder's limit still says whom to answer, and with what.
    #[test]
    fn unreadable_mail_names_whom_to_answer() {
        let request = Request {
            id: 7,
            reply_to: "r1".into(),
            task_id: "t".into(),
            metadata: Some(deep()),
            ..Default::default()
        };
        let unreadable = Mail::parse(&Mail::to_bytes(Kind::Request(request))).expect_err("too deep");
        let Unreadable::Request { id: 7, reply_to, task_id, error } = *unreadable else {
            panic!("{unreadable:?}");
        };
        assert_eq!((reply_to.as_str(), task_id.as_str()), ("r1", "t"));
        assert_eq!(error.reason(), "INTERNAL_ERROR");
        assert!(error.to_string().contains("recursion limit"), "{error}");
        let task = Task { id: "t".into(), metadata: Some(deep()), ..Default::default() };
        let reply = Reply { id: 9, outcome: Some(Outcome::Task(task)) };
        assert!(matches!(
            Mail::parse(&Mail::to_bytes(Kind::Reply(reply))),
            Err(u) if matches!(*u, Unreadable::Reply { id: 9, .. })
        ));
        assert!(matches!(Mail::parse(b"\xff\xff"), Err(u) if matches!(*u, Unreadable::Garbage(_))));
        let fine = Reply { id: 1, outcome: None };
        assert!(matches!(
            Mail::parse(&Mail::to_bytes(Kind::Reply(fine))),
            Ok(Kind::Reply(Reply { id: 1, .. }))
        ));
    }
}
