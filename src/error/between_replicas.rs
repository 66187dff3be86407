//! An error as it crosses between the replicas of a fleet (a forwarded call's answer, a
//! mailbox reply): its reason and two fields, from which the other replica rebuilds it whole.
use super::{A2aError, LimitKind};

impl A2aError {
    /// The error as it crosses between the replicas of a fleet: its reason and the fields
    /// that rebuild it ([`A2aError::from_parts`]). Errors a forwarded call can meet come back
    /// whole; any other travels as its message, as INTERNAL.
    pub fn to_parts(&self) -> (String, String, String) {
        let (a, b) = match self {
            Self::TaskNotFound(id) => (id.clone(), String::new()),
            Self::TaskNotCancelable { task_id, state } => (task_id.clone(), state.clone()),
            Self::UnsupportedOperation(text)
            | Self::InvalidAgentResponse(text)
            | Self::Unavailable(text)
            | Self::Internal(text) => (text.clone(), String::new()),
            Self::InvalidParams { message, .. } => (message.clone(), String::new()),
            Self::SubscriberLagged { task_id, missed } => (task_id.clone(), missed.to_string()),
            Self::TaskGenerationMismatch { task_id, expected, current } => {
                (task_id.clone(), format!("{expected}/{current}"))
            }
            Self::LimitExceeded { limit, detail, .. } => (limit.clone(), detail.clone()),
            other => return ("INTERNAL_ERROR".to_owned(), other.to_string(), String::new()),
        };
        (self.reason().to_owned(), a, b)
    }

    /// Rebuilds an error another replica answered with, from [`A2aError::to_parts`].
    pub fn from_parts(reason: &str, a: String, b: String) -> Self {
        match reason {
            "TASK_NOT_FOUND" => Self::TaskNotFound(a),
            "TASK_NOT_CANCELABLE" => Self::TaskNotCancelable { task_id: a, state: b },
            "UNSUPPORTED_OPERATION" => Self::UnsupportedOperation(a),
            "INVALID_AGENT_RESPONSE" => Self::InvalidAgentResponse(a),
            "UNAVAILABLE" => Self::Unavailable(a),
            "INVALID_PARAMS" => Self::InvalidParams { message: a, violations: Vec::new() },
            "SUBSCRIBER_LAGGED" => Self::SubscriberLagged { task_id: a, missed: b.parse().unwrap_or(0) },
            "TASK_GENERATION_MISMATCH" => {
                let (expected, current) = b.split_once('/').unwrap_or_default();
                Self::TaskGenerationMismatch {
                    task_id: a,
                    expected: expected.parse().unwrap_or(0),
                    current: current.parse().unwrap_or(0),
                }
            }
            "PAYLOAD_TOO_LARGE" => Self::limit(LimitKind::TooLarge, &a, b),
            "QUOTA_EXCEEDED" => Self::limit(LimitKind::Quota, &a, b),
            _ => Self::Internal(a),
        }
    }
}
