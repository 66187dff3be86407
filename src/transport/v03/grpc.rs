//! The v0.3 gRPC service `a2a.v1.A2AService` beside `lf.a2a.v1.A2AService` on the same port:
//! each RPC is decoded into the v1.0 [`Operation`] through [`typed`], run on the same core, and
//! answered with the v0.3 messages. `TaskSubscription` is SubscribeToTask.
use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use serde_json::Value;
use tonic::{Request, Response, Status};

use super::typed;
use crate::core::Core;
use crate::error::A2aError;
use crate::proto as v1;
use crate::proto_v03 as v03;
use crate::proto_v03::a2a_service_server::{A2aService, A2aServiceServer};
use crate::protojson;
use crate::transport::operation::{Operation, Outcome};

/// A server-streaming response of v0.3 `StreamResponse`s.
type V03Stream = Pin<Box<dyn Stream<Item = Result<v03::StreamResponse, Status>> + Send>>;

/// The v0.3 gRPC service over `core`, with the card's facts for `GetAgentCard`.
#[derive(Clone)]
pub struct V03Grpc {
    core: Arc<Core>,
    card: Arc<v03::AgentCard>,
}

impl V03Grpc {
    /// The tonic server of the v0.3 service.
    pub fn server(core: Arc<Core>, card: v03::AgentCard) -> A2aServiceServer<Self> {
        A2aServiceServer::new(Self { core, card: Arc::new(card) })
    }

    async fn run<T>(
        &self,
        request_metadata: &Parts,
        operation: Operation,
        answer: impl FnOnce(Value) -> Result<T, A2aError>,
    ) -> Result<Response<T>, Status> {
        let call = call_context(request_metadata);
        match operation.execute(&self.core, &call, "grpc-v0.3").await.map_err(Status::from)? {
            Outcome::Json(result) => answer(result.into_value()).map(Response::new).map_err(Status::from),
            Outcome::Stream(_) => Err(Status::internal("a unary v0.3 RPC produced a stream")),
        }
    }

    async fn stream(
        &self,
        request_metadata: &Parts,
        operation: Operation,
    ) -> Result<Response<V03Stream>, Status> {
        let call = call_context(request_metadata);
        match operation.execute(&self.core, &call, "grpc-v0.3").await.map_err(Status::from)? {
            Outcome::Stream(stream) => Ok(Response::new(
                stream
                    .map(|item| {
                        item.map(|event| typed::stream_out(event.response.clone())).map_err(Status::from)
                    })
                    .boxed(),
            )),
            Outcome::Json(_) => Err(Status::internal("a streaming v0.3 RPC produced a unary answer")),
        }
    }
}

/// Extensions from `x-a2a-extensions` and `a2a-extensions`; no version, and marked as v0.3
/// (see the JSON-RPC shim).
/// A call's metadata and extensions (where the auth layer leaves its outcome).
type Parts = (tonic::metadata::MetadataMap, tonic::Extensions);

fn call_context((metadata, request_extensions): &Parts) -> crate::call::CallContext {
    let extensions = ["x-a2a-extensions", "a2a-extensions"]
        .into_iter()
        .flat_map(|name| metadata.get_all(name).into_iter().filter_map(|v| v.to_str().ok()));
    let mut call = crate::call::CallContext::from_parameters(None, extensions);
    call.protocol = crate::call::ProtocolVersion::V0_3;
    call.traceparent = metadata.get("traceparent").and_then(|v| v.to_str().ok()).map(str::to_owned);
    call.authenticated(request_extensions.get())
}

fn task(value: Value) -> Result<v03::Task, A2aError> {
    Ok(typed::task_out(protojson::decode(&value)?))
}

fn config(value: Value) -> Result<v03::TaskPushNotificationConfig, A2aError> {
    Ok(typed::push_config_out(protojson::decode(&value)?))
}

#[tonic::async_trait]
impl A2aService for V03Grpc {
    async fn send_message(
        &self,
        request: Request<v03::SendMessageRequest>,
    ) -> Result<Response<v03::SendMessageResponse>, Status> {
        let (metadata, extensions, request) = request.into_parts();
        let metadata = (metadata, extensions);
        let operation = Operation::SendMessage(typed::send_in(request));
        self.run(&metadata, operation, |v| {
            Ok(typed::send_out(protojson::decode::<v1::SendMessageResponse>(&v)?))
        })
        .await
    }

    type SendStreamingMessageStream = V03Stream;

    async fn send_streaming_message(
        &self,
        request: Request<v03::SendMessageRequest>,
    ) -> Result<Response<V03Stream>, Status> {
        let (metadata, extensions, request) = request.into_parts();
        let metadata = (metadata, extensions);
        self.stream(&metadata, Operation::SendStreamingMessage(typed::send_in(request))).await
    }

    async fn get_task(&self, request: Request<v03::GetTaskRequest>) -> Result<Response<v03::Task>, Status> {
        let (metadata, extensions, request) = request.into_parts();
        let metadata = (metadata, extensions);
        let id = typed::task_name(&request.name).map_err(Status::from)?;
        let history_length = (request.history_length > 0).then_some(request.history_length);
        let operation = Operation::GetTask(v1::GetTaskRequest { id, history_length, ..Default::default() });
        self.run(&metadata, operation, task).await
    }

    async fn cancel_task(
        &self,
        request: Request<v03::CancelTaskRequest>,
    ) -> Result<Response<v03::Task>, Status> {
        let (metadata, extensions, request) = request.into_parts();
        let metadata = (metadata, extensions);
        let id = typed::task_name(&request.name).map_err(Status::from)?;
        self.run(&metadata, Operation::CancelTask(v1::CancelTaskRequest { id, ..Default::default() }), task)
            .await
    }

    type TaskSubscriptionStream = V03Stream;

    async fn task_subscription(
        &self,
        request: Request<v03::TaskSubscriptionRequest>,
    ) -> Result<Response<V03Stream>, Status> {
        let (metadata, extensions, request) = request.into_parts();
        let metadata = (metadata, extensions);
        let id = typed::task_name(&request.name).map_err(Status::from)?;
        self.stream(
            &metadata,
            Operation::SubscribeToTask(v1::SubscribeToTaskRequest { id, ..Default::default() }),
        )
        .await
    }

    async fn create_task_push_notification_config(
        &self,
        request: Request<v03::CreateTaskPushNotificationConfigRequest>,
    ) -> Result<Response<v03::TaskPushNotificationConfig>, Status> {
        let (metadata, extensions, request) = request.into_parts();
        let metadata = (metadata, extensions);
        let v1_config = typed::create_push_config_in(request).map_err(Status::from)?;
        self.run(&metadata, Operation::CreatePushConfig(v1_config), config).await
    }

    async fn get_task_push_notification_config(
        &self,
        request: Request<v03::GetTaskPushNotificationConfigRequest>,
    ) -> Result<Response<v03::TaskPushNotificationConfig>, Status> {
        let (metadata, extensions, request) = request.into_parts();
        let metadata = (metadata, extensions);
        let (task_id, id) = typed::config_name(&request.name).map_err(Status::from)?;
        let operation = Operation::GetPushConfig(v1::GetTaskPushNotificationConfigRequest {
            task_id,
            id,
            ..Default::default()
        });
        self.run(&metadata, operation, config).await
    }

    async fn list_task_push_notification_config(
        &self,
        request: Request<v03::ListTaskPushNotificationConfigRequest>,
    ) -> Result<Response<v03::ListTaskPushNotificationConfigResponse>, Status> {
        let (metadata, extensions, request) = request.into_parts();
        let metadata = (metadata, extensions);
        let task_id = typed::task_name(&request.parent).map_err(Status::from)?;
        let operation = Operation::ListPushConfigs(v1::ListTaskPushNotificationConfigsRequest {
            task_id,
            page_size: request.page_size,
            page_token: request.page_token,
            ..Default::default()
        });
        self.run(&metadata, operation, |value| {
            let list: v1::ListTaskPushNotificationConfigsResponse = protojson::decode(&value)?;
            let configs = list.configs.into_iter().map(typed::push_config_out).collect();
            Ok(v03::ListTaskPushNotificationConfigResponse { configs, next_page_token: list.next_page_token })
        })
        .await
    }

    async fn get_agent_card(
        &self,
        _request: Request<v03::GetAgentCardRequest>,
    ) -> Result<Response<v03::AgentCard>, Status> {
        Ok(Response::new(self.card.as_ref().clone()))
    }

    async fn delete_task_push_notification_config(
        &self,
        request: Request<v03::DeleteTaskPushNotificationConfigRequest>,
    ) -> Result<Response<pbjson_types::Empty>, Status> {
        let (metadata, extensions, request) = request.into_parts();
        let metadata = (metadata, extensions);
        let (task_id, id) = typed::config_name(&request.name).map_err(Status::from)?;
        let operation = Operation::DeletePushConfig(v1::DeleteTaskPushNotificationConfigRequest {
            task_id,
            id,
            ..Default::default()
        });
        self.run(&metadata, operation, |_| Ok(pbjson_types::Empty {})).await
    }
}
