//! `A2aError`: every failure a client can see, and its mapping to each wire.
//!
//! One enum, one table. Each variant knows its ErrorInfo `reason`, its gRPC code, its
//! JSON-RPC code and its HTTP status (spec v1.0.1 §5.4, A2A-NOTES §6), so the bindings never
//! invent their own mapping and stay functionally equivalent.
use std::collections::HashMap;

use serde_json::{Value, json};
use tonic::Code;
use tonic_types::{ErrorDetails, StatusExt};

/// ErrorInfo domain for errors the A2A specification defines.
pub const A2A_DOMAIN: &str = "a2a-protocol.org";
/// ErrorInfo domain for conditions specific to this server (lag, shutdown).
pub const SERVER_DOMAIN: &str = "a2a-server";

/// Anything that can go wrong while starting or running the server (binding a port, reading a
/// card file, exporting spans): reported to the operator, never to a client.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

mod between_replicas;

/// One violated field of a request, reported as `google.rpc.BadRequest.FieldViolation`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldViolation {
    /// The field's path in the request, in ProtoJSON (lowerCamelCase) form, e.g. `message.parts`.
    pub field: String,
    /// What is wrong with it.
    pub description: String,
}

impl FieldViolation {
    /// A violation of `field`.
    pub fn new(field: impl Into<String>, description: impl Into<String>) -> Self {
        Self { field: field.into(), description: description.into() }
    }
}

/// Every error the server reports to a client.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum A2aError {
    /// The task does not exist, was purged, or belongs to another caller.
    #[error("task not found: {0}")]
    TaskNotFound(String),
    /// A push notification config does not exist (the spec reports it as TaskNotFound).
    #[error("push notification config {config_id} of task {task_id} not found")]
    PushConfigNotFound {
        /// The task.
        task_id: String,
        /// The config.
        config_id: String,
    },
    /// The task is in a state that cannot be canceled (usually terminal).
    #[error("task {task_id} cannot be canceled in state {state}")]
    TaskNotCancelable {
        /// The task.
        task_id: String,
        /// Its state, as the enum name.
        state: String,
    },
    /// Push notifications are not enabled on this server.
    #[error("push notifications are not supported by this agent")]
    PushNotificationNotSupported,
    /// The operation (or this use of it) is not supported.
    #[error("{0}")]
    UnsupportedOperation(String),
    /// A media type in the request is not supported.
    #[error("{0}")]
    ContentTypeNotSupported(String),
    /// The agent produced something that breaks the protocol.
    #[error("invalid agent response: {0}")]
    InvalidAgentResponse(String),
    /// The card declares an extended card, but none is configured.
    #[error("the extended agent card is not configured")]
    ExtendedAgentCardNotConfigured,
    /// The agent requires an extension the client did not request.
    #[error("extension {0} is required by this agent; request it with A2A-Extensions")]
    ExtensionSupportRequired(String),
    /// The requested `A2A-Version` is not served here.
    #[error("A2A version {0:?} is not supported; this server speaks 1.x")]
    VersionNotSupported(String),
    /// A follow-up message named a generation (`ifGenerationMatch`, A2A dev-1.1) the task is
    /// no longer (or not yet) at.
    #[error("task {task_id} is at generation {current}, not {expected}")]
    TaskGenerationMismatch {
        /// The task.
        task_id: String,
        /// The generation the client expected.
        expected: i64,
        /// The task's generation now.
        current: i64,
    },
    /// A request field is missing or malformed.
    #[error("{message}")]
    InvalidParams {
        /// A summary, naming the first bad field.
        message: String,
        /// Every bad field.
        violations: Vec<FieldViolation>,
    },
    /// The request envelope is not a valid request (JSON-RPC -32600).
    #[error("{0}")]
    InvalidRequest(String),
    /// The request body is not valid JSON (JSON-RPC -32700).
    #[error("{0}")]
    JsonParse(String),
    /// No such method (JSON-RPC -32601).
    #[error("{0}")]
    MethodNotFound(String),
    /// The path exists but not for this HTTP method: HTTP 405 with `Allow` (JSON-RPC -32600,
    /// as the binding takes requests by POST only).
    #[error("{method} is not allowed on {path}{}", allow.as_ref().map(|a| format!("; use {a}")).unwrap_or_default())]
    MethodNotAllowed {
        /// The method the client used.
        method: String,
        /// The path it used it on.
        path: String,
        /// The methods the path serves, when the answering code knows them (else the router
        /// adds the `Allow` header).
        allow: Option<String>,
    },
    /// A subscriber fell further behind than the task's event log reaches back.
    #[error(
        "subscriber lagged: {missed} events of task {task_id} are no longer in its event log; call SubscribeToTask again"
    )]
    SubscriberLagged {
        /// The task.
        task_id: String,
        /// How many events it could not be given.
        missed: u64,
    },
    /// No credential, or one that is not valid (spec §3.3.2's authentication category).
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),
    /// The credential is valid but does not allow this (a tenant the principal may not use).
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// The server is shutting down or cannot serve now; try another replica.
    #[error("{0}")]
    Unavailable(String),
    /// A task stream the server ended on purpose (it reached `--max-stream-secs`, or the
    /// server drains): retryable, as UNAVAILABLE, and resumable after `last_generation` (the
    /// generation of the last item sent) with the resume extension, on any replica.
    #[error(
        "{why}; call SubscribeToTask again (after generation {last_generation} with the resume extension)"
    )]
    StreamClosed {
        /// The task.
        task_id: String,
        /// The generation of the last item the stream sent.
        last_generation: u64,
        /// Why the stream ended.
        why: String,
    },
    /// A limit on what a client may grow was reached (request size, parts, task bytes, live
    /// tasks, subscriptions, rate): gRPC RESOURCE_EXHAUSTED, HTTP 413 or 429 (with
    /// `Retry-After` when waiting helps), the same ErrorInfo on every binding.
    #[error("{detail}")]
    LimitExceeded {
        /// Which kind of limit, which decides the HTTP status.
        kind: LimitKind,
        /// The setting that sets it, as its flag is spelled (`max-request-bytes`): ErrorInfo
        /// metadata `limit`, so an operator knows what to raise.
        limit: String,
        /// What was refused and the limit's value, for a person.
        detail: String,
        /// Seconds after which the same call may succeed, when waiting helps.
        retry_after_secs: Option<u64>,
    },
    /// A server-side failure.
    #[error("internal error: {0}")]
    Internal(String),
}

/// The kinds of [`A2aError::LimitExceeded`]: they differ in HTTP status and ErrorInfo reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitKind {
    /// The request (or what it would add to a task) is too large: HTTP 413, `PAYLOAD_TOO_LARGE`.
    TooLarge,
    /// A count the caller holds open is at its cap (live tasks, subscriptions, push configs):
    /// HTTP 429, `QUOTA_EXCEEDED`.
    Quota,
    /// Too many requests per second: HTTP 429 with `Retry-After`, `RATE_LIMITED`.
    Rate,
}

impl A2aError {
    /// A [`A2aError::LimitExceeded`] of `kind`, set by the flag `limit`.
    pub fn limit(kind: LimitKind, limit: &str, detail: impl Into<String>) -> Self {
        Self::LimitExceeded { kind, limit: limit.to_owned(), detail: detail.into(), retry_after_secs: None }
    }

    /// This error, saying retrying may succeed after `secs` (a limit's refusal only).
    pub fn retry_after(mut self, secs: Option<u64>) -> Self {
        if let Self::LimitExceeded { retry_after_secs, .. } = &mut self {
            *retry_after_secs = secs;
        }
        self
    }

    /// Seconds after which retrying may succeed (the HTTP `Retry-After`), if any.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Self::LimitExceeded { retry_after_secs, .. } => *retry_after_secs,
            _ => None,
        }
    }

    /// A validation error for one field.
    pub fn invalid_field(field: impl Into<String>, description: impl Into<String>) -> Self {
        let violation = FieldViolation::new(field, description);
        Self::InvalidParams {
            message: format!("invalid {}: {}", violation.field, violation.description),
            violations: vec![violation],
        }
    }

    /// The ErrorInfo `reason`, UPPER_SNAKE_CASE as the spec derives it.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::TaskNotFound(_) | Self::PushConfigNotFound { .. } => "TASK_NOT_FOUND",
            Self::TaskNotCancelable { .. } => "TASK_NOT_CANCELABLE",
            Self::PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            Self::UnsupportedOperation(_) => "UNSUPPORTED_OPERATION",
            Self::ContentTypeNotSupported(_) => "CONTENT_TYPE_NOT_SUPPORTED",
            Self::InvalidAgentResponse(_) => "INVALID_AGENT_RESPONSE",
            Self::ExtendedAgentCardNotConfigured => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            Self::ExtensionSupportRequired(_) => "EXTENSION_SUPPORT_REQUIRED",
            Self::VersionNotSupported(_) => "VERSION_NOT_SUPPORTED",
            Self::TaskGenerationMismatch { .. } => "TASK_GENERATION_MISMATCH",
            Self::InvalidParams { .. } => "INVALID_PARAMS",
            Self::InvalidRequest(_) => "INVALID_REQUEST",
            Self::JsonParse(_) => "PARSE_ERROR",
            Self::MethodNotFound(_) => "METHOD_NOT_FOUND",
            Self::MethodNotAllowed { .. } => "METHOD_NOT_ALLOWED",
            Self::SubscriberLagged { .. } => "SUBSCRIBER_LAGGED",
            // The spec names the categories (§3.3.2) but no reasons; these are a2a-go's.
            Self::Unauthenticated(_) => "UNAUTHENTICATED",
            Self::PermissionDenied(_) => "UNAUTHORIZED",
            Self::StreamClosed { .. } => "STREAM_CLOSED",
            Self::LimitExceeded { kind: LimitKind::TooLarge, .. } => "PAYLOAD_TOO_LARGE",
            Self::LimitExceeded { kind: LimitKind::Quota, .. } => "QUOTA_EXCEEDED",
            Self::LimitExceeded { kind: LimitKind::Rate, .. } => "RATE_LIMITED",
            Self::Unavailable(_) => "UNAVAILABLE",
            Self::Internal(_) => "INTERNAL_ERROR",
        }
    }

    /// The ErrorInfo `domain`: the spec's for spec-defined errors, ours for the rest.
    pub fn domain(&self) -> &'static str {
        match self {
            Self::SubscriberLagged { .. }
            | Self::Unavailable(_)
            | Self::StreamClosed { .. }
            | Self::LimitExceeded { .. }
            | Self::MethodNotAllowed { .. } => SERVER_DOMAIN,
            _ => A2A_DOMAIN,
        }
    }

    /// The ErrorInfo `metadata`: identifiers that help a client act on the error.
    pub fn metadata(&self) -> HashMap<String, String> {
        let mut metadata = HashMap::new();
        match self {
            Self::TaskNotFound(id) => {
                metadata.insert("taskId".to_owned(), id.clone());
            }
            Self::PushConfigNotFound { task_id, config_id } => {
                metadata.insert("taskId".to_owned(), task_id.clone());
                metadata.insert("configId".to_owned(), config_id.clone());
            }
            Self::TaskNotCancelable { task_id, state } => {
                metadata.insert("taskId".to_owned(), task_id.clone());
                metadata.insert("state".to_owned(), state.clone());
            }
            Self::SubscriberLagged { task_id, missed } => {
                metadata.insert("taskId".to_owned(), task_id.clone());
                metadata.insert("missedEvents".to_owned(), missed.to_string());
            }
            Self::ExtensionSupportRequired(uri) => {
                metadata.insert("extension".to_owned(), uri.clone());
            }
            Self::VersionNotSupported(version) => {
                metadata.insert("version".to_owned(), version.clone());
            }
            Self::StreamClosed { task_id, last_generation, .. } => {
                metadata.insert("taskId".to_owned(), task_id.clone());
                metadata.insert("lastGeneration".to_owned(), last_generation.to_string());
            }
            Self::TaskGenerationMismatch { task_id, expected, current } => {
                metadata.insert("taskId".to_owned(), task_id.clone());
                metadata.insert("expectedGeneration".to_owned(), expected.to_string());
                metadata.insert("currentGeneration".to_owned(), current.to_string());
            }
            Self::MethodNotAllowed { allow: Some(allow), .. } => {
                metadata.insert("allow".to_owned(), allow.clone());
            }
            Self::LimitExceeded { limit, retry_after_secs, .. } => {
                metadata.insert("limit".to_owned(), limit.clone());
                if let Some(secs) = retry_after_secs {
                    metadata.insert("retryAfterSeconds".to_owned(), secs.to_string());
                }
            }
            _ => {}
        }
        metadata
    }

    /// Field violations, for the `google.rpc.BadRequest` detail.
    pub fn violations(&self) -> &[FieldViolation] {
        match self {
            Self::InvalidParams { violations, .. } => violations,
            _ => &[],
        }
    }

    /// The gRPC status code (spec v1.0.1 §5.4).
    pub fn grpc_code(&self) -> Code {
        match self {
            Self::TaskNotFound(_) | Self::PushConfigNotFound { .. } => Code::NotFound,
            Self::TaskNotCancelable { .. }
            | Self::PushNotificationNotSupported
            | Self::UnsupportedOperation(_)
            | Self::ExtendedAgentCardNotConfigured
            | Self::ExtensionSupportRequired(_)
            | Self::VersionNotSupported(_) => Code::FailedPrecondition,
            Self::ContentTypeNotSupported(_)
            | Self::InvalidParams { .. }
            | Self::InvalidRequest(_)
            | Self::JsonParse(_) => Code::InvalidArgument,
            Self::MethodNotFound(_) | Self::MethodNotAllowed { .. } => Code::Unimplemented,
            Self::TaskGenerationMismatch { .. } => Code::Aborted,
            Self::SubscriberLagged { .. } | Self::LimitExceeded { .. } => Code::ResourceExhausted,
            Self::Unauthenticated(_) => Code::Unauthenticated,
            Self::PermissionDenied(_) => Code::PermissionDenied,
            Self::Unavailable(_) | Self::StreamClosed { .. } => Code::Unavailable,
            Self::InvalidAgentResponse(_) | Self::Internal(_) => Code::Internal,
        }
    }

    /// The JSON-RPC error code (spec v1.0.1 §9.5).
    pub fn jsonrpc_code(&self) -> i32 {
        match self {
            Self::TaskNotFound(_) | Self::PushConfigNotFound { .. } => -32001,
            Self::TaskNotCancelable { .. } => -32002,
            Self::PushNotificationNotSupported => -32003,
            Self::UnsupportedOperation(_) => -32004,
            Self::ContentTypeNotSupported(_) => -32005,
            Self::InvalidAgentResponse(_) => -32006,
            Self::ExtendedAgentCardNotConfigured => -32007,
            Self::ExtensionSupportRequired(_) => -32008,
            Self::VersionNotSupported(_) => -32009,
            Self::TaskGenerationMismatch { .. } => -32010,
            Self::InvalidParams { .. } => -32602,
            Self::InvalidRequest(_) | Self::MethodNotAllowed { .. } => -32600,
            Self::JsonParse(_) => -32700,
            Self::MethodNotFound(_) => -32601,
            // Outside the spec's table; the codes a2a-go uses, so its clients recognise them.
            Self::Unauthenticated(_) => -31401,
            Self::PermissionDenied(_) => -31403,
            // Ours, in the same style: the HTTP status after -31.
            Self::LimitExceeded { kind: LimitKind::TooLarge, .. } => -31413,
            Self::LimitExceeded { .. } => -31429,
            Self::SubscriberLagged { .. }
            | Self::Unavailable(_)
            | Self::StreamClosed { .. }
            | Self::Internal(_) => -32603,
        }
    }

    /// The HTTP status for the HTTP+JSON binding (spec v1.0.1 §5.4).
    pub fn http_status(&self) -> u16 {
        match self {
            Self::TaskNotFound(_) | Self::PushConfigNotFound { .. } => 404,
            Self::MethodNotFound(_) => 404,
            Self::MethodNotAllowed { .. } => 405,
            Self::TaskGenerationMismatch { .. } => 409,
            Self::SubscriberLagged { .. } => 429,
            Self::LimitExceeded { kind: LimitKind::TooLarge, .. } => 413,
            Self::LimitExceeded { .. } => 429,
            Self::Unauthenticated(_) => 401,
            Self::PermissionDenied(_) => 403,
            Self::Unavailable(_) | Self::StreamClosed { .. } => 503,
            Self::InvalidAgentResponse(_) | Self::Internal(_) => 500,
            _ => 400,
        }
    }

    /// The gRPC status, with ErrorInfo (and BadRequest) in `grpc-status-details-bin`.
    pub fn to_grpc_status(&self) -> tonic::Status {
        let mut details = ErrorDetails::with_error_info(self.reason(), self.domain(), self.metadata());
        for violation in self.violations() {
            details.add_bad_request_violation(violation.field.clone(), violation.description.clone());
        }
        tonic::Status::with_error_details(self.grpc_code(), self.to_string(), details)
    }
}

impl A2aError {
    /// The details as ProtoJSON `Any` objects: the ErrorInfo first, then any BadRequest.
    pub fn details_json(&self) -> Vec<Value> {
        let mut details = vec![json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": self.reason(),
            "domain": self.domain(),
            "metadata": self.metadata(),
        })];
        if !self.violations().is_empty() {
            let violations: Vec<Value> = self
                .violations()
                .iter()
                .map(|v| json!({"field": v.field, "description": v.description}))
                .collect();
            details.push(json!({
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": violations,
            }));
        }
        details
    }

    /// The JSON-RPC `error` object: `code`, `message` and `data` (the details array).
    pub fn to_jsonrpc_error(&self) -> Value {
        json!({"code": self.jsonrpc_code(), "message": self.to_string(), "data": self.details_json()})
    }

    /// The HTTP+JSON error body: `google.rpc.Status` in its HTTP/JSON form (spec §11.6).
    pub fn to_http_body(&self) -> Value {
        json!({"error": {
            "code": self.http_status(),
            "status": code_name(self.grpc_code()),
            "message": self.to_string(),
            "details": self.details_json(),
        }})
    }
}

/// The canonical name of a gRPC code, as `google.rpc.Status` JSON spells it.
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

impl From<A2aError> for tonic::Status {
    fn from(error: A2aError) -> Self {
        error.to_grpc_status()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_maps_to_resource_exhausted_on_every_wire_and_crosses_replicas_whole() {
        let mut rate = A2aError::limit(LimitKind::Rate, "max-requests-per-sec", "slow down");
        if let A2aError::LimitExceeded { retry_after_secs, .. } = &mut rate {
            *retry_after_secs = Some(2);
        }
        assert_eq!(rate.grpc_code(), Code::ResourceExhausted);
        assert_eq!((rate.http_status(), rate.jsonrpc_code(), rate.reason()), (429, -31429, "RATE_LIMITED"));
        assert_eq!(rate.retry_after_secs(), Some(2));
        assert_eq!(rate.metadata()["retryAfterSeconds"], "2");

        let large =
            A2aError::limit(LimitKind::TooLarge, "max-request-bytes", "request is 5 MiB; the limit is 4 MiB");
        assert_eq!(
            (large.http_status(), large.jsonrpc_code(), large.reason()),
            (413, -31413, "PAYLOAD_TOO_LARGE")
        );
        assert_eq!(large.metadata()["limit"], "max-request-bytes");
        assert_eq!(large.to_http_body()["error"]["status"], "RESOURCE_EXHAUSTED");

        let quota = A2aError::limit(LimitKind::Quota, "max-live-tasks", "too many");
        let (reason, a, b) = quota.to_parts();
        assert_eq!(A2aError::from_parts(&reason, a, b), quota);
        assert_eq!(quota.http_status(), 429);
    }
}
