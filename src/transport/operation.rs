//! The A2A operations as the JSON bindings see them: each binding decodes its wire form (a
//! JSON-RPC method and params, or a REST route, body and query) into one [`Operation`], and this
//! module runs it against the core and encodes the result as ProtoJSON. The gRPC binding needs
//! none of this: tonic already hands it typed requests.
use serde_json::{Value, json};

use crate::call::CallContext;
use crate::core::{Core, EventStream};
use crate::error::A2aError;
use crate::proto::{
    CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTasksRequest, SendMessageRequest, SubscribeToTaskRequest, TaskPushNotificationConfig,
};
use crate::protojson::{encode_for, encode_list_tasks_for, encode_string_for};
use crate::telemetry::{RequestIds, observe};

/// Decodes ListTasks params. ProtoJSON decoding is lenient (a newer client's unknown fields are
/// ignored), which would turn an unknown `status` name into "no filter" and answer every task:
/// a filter that cannot be read is INVALID_ARGUMENT instead.
pub fn list_tasks(params: &Value) -> Result<ListTasksRequest, A2aError> {
    let request: ListTasksRequest = crate::protojson::decode(params)?;
    let named_unspecified = |raw: &Value| match raw {
        Value::String(name) => name == "TASK_STATE_UNSPECIFIED" || name == "0",
        Value::Number(number) => number.as_i64() == Some(0),
        Value::Null => true,
        _ => false,
    };
    match params.get("status") {
        Some(raw) if request.status == 0 && !named_unspecified(raw) => {
            Err(A2aError::invalid_field("status", format!("{raw} is not a task state")))
        }
        _ => Ok(request),
    }
}

/// One decoded A2A call.
#[derive(Debug, Clone)]
pub enum Operation {
    /// SendMessage.
    SendMessage(SendMessageRequest),
    /// SendStreamingMessage.
    SendStreamingMessage(SendMessageRequest),
    /// GetTask.
    GetTask(GetTaskRequest),
    /// ListTasks.
    ListTasks(ListTasksRequest),
    /// CancelTask.
    CancelTask(CancelTaskRequest),
    /// SubscribeToTask.
    SubscribeToTask(SubscribeToTaskRequest),
    /// CreateTaskPushNotificationConfig.
    CreatePushConfig(TaskPushNotificationConfig),
    /// GetTaskPushNotificationConfig.
    GetPushConfig(GetTaskPushNotificationConfigRequest),
    /// ListTaskPushNotificationConfigs.
    ListPushConfigs(ListTaskPushNotificationConfigsRequest),
    /// DeleteTaskPushNotificationConfig.
    DeletePushConfig(DeleteTaskPushNotificationConfigRequest),
    /// GetExtendedAgentCard.
    GetExtendedAgentCard(GetExtendedAgentCardRequest),
}

/// What an operation produced: one ProtoJSON result, or a stream of events.
pub enum Outcome {
    /// A unary result, encoded when the binding says how.
    Json(JsonResult),
    /// A streaming result.
    Stream(EventStream),
}

/// A unary result, encoded as ProtoJSON text for a v1.0 binding (straight from the message, no
/// JSON tree in between: building one cost a JSON call about a tenth of its CPU) or as a JSON
/// value for v0.3's conversion.
pub struct JsonResult(Encodable);

enum Encodable {
    Message(Box<dyn EncodeFor + Send>, bool),
    Value(Value),
}

impl JsonResult {
    fn message(message: impl EncodeFor + Send + 'static, generation: bool) -> Self {
        Self(Encodable::Message(Box::new(message), generation))
    }

    /// The result as a JSON value.
    pub fn into_value(self) -> Value {
        match self.0 {
            Encodable::Message(message, generation) => message.encode_for(generation),
            Encodable::Value(value) => value,
        }
    }

    /// The result as JSON text.
    pub fn into_text(self) -> String {
        match self.0 {
            Encodable::Message(message, generation) => message.encode_text_for(generation),
            Encodable::Value(value) => value.to_string(),
        }
    }
}

impl Operation {
    /// The operation's v1.0 method name (the gRPC RPC name, also the JSON-RPC method).
    pub fn name(&self) -> &'static str {
        match self {
            Self::SendMessage(_) => "SendMessage",
            Self::SendStreamingMessage(_) => "SendStreamingMessage",
            Self::GetTask(_) => "GetTask",
            Self::ListTasks(_) => "ListTasks",
            Self::CancelTask(_) => "CancelTask",
            Self::SubscribeToTask(_) => "SubscribeToTask",
            Self::CreatePushConfig(_) => "CreateTaskPushNotificationConfig",
            Self::GetPushConfig(_) => "GetTaskPushNotificationConfig",
            Self::ListPushConfigs(_) => "ListTaskPushNotificationConfigs",
            Self::DeletePushConfig(_) => "DeleteTaskPushNotificationConfig",
            Self::GetExtendedAgentCard(_) => "GetExtendedAgentCard",
        }
    }

    /// Sets the tenant (the HTTP+JSON binding takes it from the path).
    pub fn set_tenant(&mut self, tenant: String) {
        match self {
            Self::SendMessage(r) | Self::SendStreamingMessage(r) => r.tenant = tenant,
            Self::GetTask(r) => r.tenant = tenant,
            Self::ListTasks(r) => r.tenant = tenant,
            Self::CancelTask(r) => r.tenant = tenant,
            Self::SubscribeToTask(r) => r.tenant = tenant,
            Self::CreatePushConfig(r) => r.tenant = tenant,
            Self::GetPushConfig(r) => r.tenant = tenant,
            Self::ListPushConfigs(r) => r.tenant = tenant,
            Self::DeletePushConfig(r) => r.tenant = tenant,
            Self::GetExtendedAgentCard(r) => r.tenant = tenant,
        }
    }

    /// Runs the operation inside the shared request telemetry, labelled with `binding`.
    pub async fn execute(
        self,
        core: &Core,
        call: &CallContext,
        binding: &'static str,
    ) -> Result<Outcome, A2aError> {
        observe(binding, self.name(), call, self, |operation, call| operation.run(core, call)).await
    }

    async fn run(self, core: &Core, call: &CallContext) -> Result<Outcome, A2aError> {
        // A2A dev-1.1's `generation` fields only for clients that ask for them.
        let generation = call.wants_generation();
        Ok(match self {
            Self::SendMessage(r) => {
                Outcome::Json(JsonResult::message(core.send_message(call, r).await?, generation))
            }
            Self::SendStreamingMessage(r) => Outcome::Stream(core.send_streaming_message(call, r).await?),
            Self::GetTask(r) => Outcome::Json(JsonResult::message(core.get_task(call, r).await?, generation)),
            Self::ListTasks(r) => {
                let page = encode_list_tasks_for(&core.list_tasks(call, r).await?, generation);
                Outcome::Json(JsonResult(Encodable::Value(page)))
            }
            Self::CancelTask(r) => {
                Outcome::Json(JsonResult::message(core.cancel_task(call, r).await?, generation))
            }
            Self::SubscribeToTask(r) => Outcome::Stream(core.subscribe_to_task(call, r).await?),
            Self::CreatePushConfig(r) => Outcome::Json(JsonResult::message(
                core.create_task_push_notification_config(call, r).await?,
                generation,
            )),
            Self::GetPushConfig(r) => Outcome::Json(JsonResult::message(
                core.get_task_push_notification_config(call, r).await?,
                generation,
            )),
            Self::ListPushConfigs(r) => Outcome::Json(JsonResult::message(
                core.list_task_push_notification_configs(call, r).await?,
                generation,
            )),
            Self::DeletePushConfig(r) => {
                core.delete_task_push_notification_config(call, r).await?;
                Outcome::Json(JsonResult(Encodable::Value(json!({}))))
            }
            Self::GetExtendedAgentCard(r) => {
                Outcome::Json(JsonResult::message(core.get_extended_agent_card(call, r).await?, generation))
            }
        })
    }
}

/// ProtoJSON of a result, with or without the `generation` fields.
trait EncodeFor {
    fn encode_for(&self, generation: bool) -> Value;
    fn encode_text_for(&self, generation: bool) -> String;
}

impl<T: crate::protojson::Encode> EncodeFor for T {
    fn encode_for(&self, generation: bool) -> Value {
        encode_for(self, generation)
    }

    fn encode_text_for(&self, generation: bool) -> String {
        encode_string_for(self, generation)
    }
}

impl RequestIds for Operation {
    fn task_id(&self) -> &str {
        match self {
            Self::SendMessage(r) | Self::SendStreamingMessage(r) => r.task_id(),
            Self::GetTask(r) => r.task_id(),
            Self::ListTasks(r) => r.task_id(),
            Self::CancelTask(r) => r.task_id(),
            Self::SubscribeToTask(r) => r.task_id(),
            Self::CreatePushConfig(r) => r.task_id(),
            Self::GetPushConfig(r) => r.task_id(),
            Self::ListPushConfigs(r) => r.task_id(),
            Self::DeletePushConfig(r) => r.task_id(),
            Self::GetExtendedAgentCard(r) => r.task_id(),
        }
    }

    fn context_id(&self) -> &str {
        match self {
            Self::SendMessage(r) | Self::SendStreamingMessage(r) => r.context_id(),
            Self::ListTasks(r) => r.context_id(),
            _ => "",
        }
    }
}
