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

    /// Mail read from an inbox; anything unreadable is dropped with a warning by the caller.
    pub fn parse(bytes: &[u8]) -> Option<Kind> {
        Mail::decode(bytes).ok().and_then(|mail| mail.kind)
    }
}
