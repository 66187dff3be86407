//! What a webhook POST carries, per protocol version: the seam between delivery and the wire
//! forms of the A2A versions.
//!
//! A push config records the protocol version of the call that registered it
//! ([`PushRegistration`](crate::task::store::PushRegistration)); its worker writes every body
//! with the [`WebhookEncoder`] of that version. The v1.0 one is here, since it is the spec's
//! own: the event as a ProtoJSON `StreamResponse` (spec §4.3.3). Others are plugged in by
//! whoever knows their wire form (the server builder adds the v0.3 shim's,
//! `transport/v03/push.rs`): push must not know other versions' types, as the core does not,
//! and a trait object chosen by a [`ProtocolVersion`] keeps it so while the choice stays per
//! config, at delivery time.
use std::collections::HashMap;
use std::sync::Arc;

use crate::call::ProtocolVersion;
use crate::proto::{StreamResponse, Task, stream_response::Payload};
use crate::protojson::encode_string_for;

/// `Content-Type` of v1.0 webhook bodies.
pub const A2A_JSON: &str = "application/a2a+json";

/// One webhook body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookBody {
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub text: String,
}

/// What a body is written from.
#[derive(Debug, Clone, Copy)]
pub enum Subject<'a> {
    /// The event being delivered.
    Event(&'a StreamResponse),
    /// The task as it is after the event (and maybe later ones).
    Task(&'a Task),
}

/// Writes webhook bodies in one protocol version's form.
pub trait WebhookEncoder: Send + Sync + 'static {
    /// Whether a body is written from the task as it is (v0.3 posts the whole Task) rather
    /// than from the event; the worker then reads the task at delivery time.
    fn wants_task(&self) -> bool;
    /// The body for `subject`.
    fn encode(&self, subject: Subject<'_>) -> WebhookBody;
}

/// The v1.0 form: the event as a ProtoJSON `StreamResponse`, without A2A dev-1.1's
/// `generation` fields (nothing says a receiver reads them).
#[derive(Debug, Clone, Copy, Default)]
pub struct V1Encoder;

impl WebhookEncoder for V1Encoder {
    fn wants_task(&self) -> bool {
        false
    }

    fn encode(&self, subject: Subject<'_>) -> WebhookBody {
        let text = match subject {
            Subject::Event(event) => encode_string_for(event, false),
            Subject::Task(task) => {
                encode_string_for(&StreamResponse { payload: Some(Payload::Task(task.clone())) }, false)
            }
        };
        WebhookBody { content_type: A2A_JSON, text }
    }
}

/// The encoders by version. A version without one of its own gets the v1.0 form (what every
/// config got before versions were recorded).
#[derive(Clone)]
pub struct Encoders {
    by_version: HashMap<ProtocolVersion, Arc<dyn WebhookEncoder>>,
    v1: Arc<dyn WebhookEncoder>,
}

impl Default for Encoders {
    fn default() -> Self {
        Self { by_version: HashMap::new(), v1: Arc::new(V1Encoder) }
    }
}

impl std::fmt::Debug for Encoders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let versions: Vec<_> = self.by_version.keys().map(|v| v.as_str()).collect();
        f.debug_struct("Encoders").field("versions", &versions).finish()
    }
}

impl Encoders {
    /// These encoders, with `encoder` for `version`.
    pub fn with(mut self, version: ProtocolVersion, encoder: Arc<dyn WebhookEncoder>) -> Self {
        self.by_version.insert(version, encoder);
        self
    }

    /// The encoder of `version`.
    pub fn get(&self, version: ProtocolVersion) -> &dyn WebhookEncoder {
        self.by_version.get(&version).unwrap_or(&self.v1).as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{TaskState, TaskStatus, TaskStatusUpdateEvent};

    #[test]
    fn v1_writes_the_event_and_is_the_fallback() {
        let event = StreamResponse {
            payload: Some(Payload::StatusUpdate(TaskStatusUpdateEvent {
                task_id: "t".into(),
                status: Some(TaskStatus { state: TaskState::Completed as i32, ..Default::default() }),
                generation: 3,
                ..Default::default()
            })),
        };
        let encoders = Encoders::default();
        let encoder = encoders.get(ProtocolVersion::V0_3);
        assert!(!encoder.wants_task());
        let body = encoder.encode(Subject::Event(&event));
        assert_eq!(body.content_type, A2A_JSON);
        let json: serde_json::Value = serde_json::from_str(&body.text).unwrap();
        assert_eq!(json["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED");
        assert!(json["statusUpdate"].get("generation").is_none(), "{json}");
    }
}
