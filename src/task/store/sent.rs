//! What a store keeps of a SendMessage so that a retry of it is answered rather than run again
//! (idempotent SendMessage; the protocol is the core's, `core/idempotent.rs`): one record per
//! caller (owner) and `messageId`, claimed atomically by the first call.
//!
//! The record names no outcome "task": a message that went to a task is in that task's
//! history, and the task is where a retry reads the outcome from. The record only says which
//! task the message went (or goes) to, whether the call that claimed it still runs, and, for
//! a direct reply that no task holds, the reply itself.
use bytes::{BufMut, Bytes, BytesMut};

use crate::error::A2aError;

/// The length of a message's fingerprint (SHA-256).
pub const FINGERPRINT_LEN: usize = 32;

/// A message's fingerprint: the SHA-256 of its canonical form (`core/fingerprint.rs`).
pub type Fingerprint = [u8; FINGERPRINT_LEN];

/// What `owner`'s `messageId` stands for: the message it was sent with and what became of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentRecord {
    /// The message's fingerprint: the same `messageId` with another message is no retry of it.
    pub fingerprint: Fingerprint,
    /// Where the call is.
    pub state: SentState,
}

/// Where the call that sent a message is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SentState {
    /// The message was (or is being) handed to a task: a new task with this id, chosen before
    /// the agent runs, or the task a follow-up names. Once that task's history holds the
    /// message, the task is the outcome.
    Claimed {
        /// The task the message goes to.
        task_id: String,
        /// This claim's own id, so that only its holder replaces or removes it.
        claim: String,
        /// When its call last said it still runs (ms since the epoch); a claim whose call went
        /// quiet without handing the message to its task may be taken over.
        alive_ms: u64,
    },
    /// The agent answered with a direct message (encoded `Message`); no task exists.
    Replied(Bytes),
}

impl SentRecord {
    /// The bytes a store keeps: a kind byte, the fingerprint, then for a claim its time (8
    /// bytes, big-endian), its id's length (one byte), its id and the task id; for a reply,
    /// the encoded Message.
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(1 + FINGERPRINT_LEN + 64);
        match &self.state {
            SentState::Claimed { task_id, claim, alive_ms } => {
                out.put_u8(b'c');
                out.put_slice(&self.fingerprint);
                out.put_u64(*alive_ms);
                let claim = &claim.as_bytes()[..claim.len().min(u8::MAX as usize)];
                out.put_u8(claim.len() as u8);
                out.put_slice(claim);
                out.put_slice(task_id.as_bytes());
            }
            SentState::Replied(message) => {
                out.put_u8(b'r');
                out.put_slice(&self.fingerprint);
                out.put_slice(message);
            }
        }
        out.freeze()
    }

    /// Reads [`SentRecord::encode`]'s bytes back.
    pub fn decode(bytes: &[u8]) -> Result<Self, A2aError> {
        let corrupt = || A2aError::Internal("a stored SendMessage record does not decode".into());
        let (&kind, rest) = bytes.split_first().ok_or_else(corrupt)?;
        let (fingerprint, rest) = rest.split_first_chunk::<FINGERPRINT_LEN>().ok_or_else(corrupt)?;
        let state = match kind {
            b'c' => {
                let (alive, rest) = rest.split_first_chunk::<8>().ok_or_else(corrupt)?;
                let (&len, rest) = rest.split_first().ok_or_else(corrupt)?;
                let (claim, task_id) = rest.split_at_checked(len as usize).ok_or_else(corrupt)?;
                let text = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| corrupt());
                SentState::Claimed {
                    task_id: text(task_id)?,
                    claim: text(claim)?,
                    alive_ms: u64::from_be_bytes(*alive),
                }
            }
            b'r' => SentState::Replied(Bytes::copy_from_slice(rest)),
            _ => return Err(corrupt()),
        };
        Ok(Self { fingerprint: *fingerprint, state })
    }

    /// The bytes a reply holds (what the memory store counts against its byte bound).
    pub fn reply_bytes(&self) -> usize {
        match &self.state {
            SentState::Replied(message) => message.len(),
            SentState::Claimed { .. } => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_garbage_is_refused() {
        let claimed = SentRecord {
            fingerprint: [7; FINGERPRINT_LEN],
            state: SentState::Claimed {
                task_id: "a task/with:odd{chars}".into(),
                claim: "c-1".into(),
                alive_ms: 1_700_000_000_123,
            },
        };
        let replied = SentRecord { fingerprint: [9; FINGERPRINT_LEN], state: SentState::Replied("m".into()) };
        for record in [claimed, replied] {
            assert_eq!(SentRecord::decode(&record.encode()).unwrap(), record);
        }
        for bad in [&b""[..], b"x", &[b'c'; 20], &[b'q'; 40]] {
            assert!(SentRecord::decode(bad).is_err(), "{bad:?}");
        }
    }
}
