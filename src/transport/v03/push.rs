//! Webhook bodies for push configs registered through v0.3: what a2a-sdk 0.3's server POSTs.
//!
//! a2a-sdk 0.3.x (`BasePushNotificationSender._dispatch_notification`) sends, after each
//! event, the whole v0.3 `Task` as it stands (`task.model_dump(mode='json',
//! exclude_none=True)`: `kind: "task"`, lowercase states, `kind` on messages and parts) as
//! `application/json`, with the config's token in `X-A2A-Notification-Token`; its receivers
//! validate the body as `a2a.types.Task`. a2a-java (#857) and a2a-js (#507) deliver v0.3
//! configs the same way. The token header is the one delivery always sends
//! (`push/delivery.rs`), so only the body differs, and it comes from [`convert`], the one place
//! that knows the v0.3 JSON.
use crate::protojson::encode_for;
use crate::push::body::{Subject, WebhookBody, WebhookEncoder};

use super::convert;

/// `Content-Type` of v0.3 webhook bodies (httpx's `json=`, as a2a-sdk 0.3 posts them).
pub const JSON: &str = "application/json";

/// The v0.3 webhook form: the task, as a v0.3 `Task`.
#[derive(Debug, Clone, Copy, Default)]
pub struct V03Webhooks;

impl WebhookEncoder for V03Webhooks {
    fn wants_task(&self) -> bool {
        true
    }

    fn encode(&self, subject: Subject<'_>) -> WebhookBody {
        let value = match subject {
            // Without dev-1.1's `generation`: v0.3 has no such field.
            Subject::Task(task) => convert::task_out(&encode_for(task, false)),
            // Not asked for (`wants_task`); the event in its v0.3 streaming form, should it be.
            Subject::Event(event) => convert::result_out(&encode_for(event, false)),
        };
        WebhookBody { content_type: JSON, text: value.to_string() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{Message, Part, Role, Task, TaskState, TaskStatus, part::Content};

    #[test]
    fn a_task_in_the_v03_form() {
        let text = Part { content: Some(Content::Text("hi".into())), ..Default::default() };
        let task = Task {
            id: "t".into(),
            context_id: "c".into(),
            status: Some(TaskStatus { state: TaskState::Completed as i32, ..Default::default() }),
            history: vec![Message {
                message_id: "m".into(),
                role: Role::User as i32,
                parts: vec![text],
                ..Default::default()
            }],
            generation: 4,
            ..Default::default()
        };
        let body = V03Webhooks.encode(Subject::Task(&task));
        assert_eq!(body.content_type, "application/json");
        let json: serde_json::Value = serde_json::from_str(&body.text).unwrap();
        assert_eq!(json["kind"], "task");
        assert_eq!(json["status"]["state"], "completed");
        assert_eq!(json["history"][0]["kind"], "message");
        assert_eq!(json["history"][0]["role"], "user");
        assert_eq!(json["history"][0]["parts"][0], serde_json::json!({"kind": "text", "text": "hi"}));
        assert!(json.get("generation").is_none(), "{json}");
    }
}
