//! ListTasks, CancelTask, the four push-config RPCs and GetExtendedAgentCard: served by the
//! tonic-generated server, each body a call to the core.
//!
//! SendMessage, SendStreamingMessage, GetTask and SubscribeToTask never reach this server:
//! [`A2aGrpc`](super::A2aGrpc) answers them in `encode_once.rs`. The generated trait still needs
//! their bodies, so each forwards to the same definition there and converts its answer; a change
//! made there is the only change needed.
use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use tonic::{Request, Response, Status};

use super::GrpcBinding;
use super::encode_once::{Events, GET_TASK, SEND_MESSAGE, SEND_STREAMING_MESSAGE, SUBSCRIBE_TO_TASK};
use crate::core::SendOutcome;
use crate::proto::a2a_service_server::A2aService;
use crate::proto::{
    AgentCard, CancelTaskRequest, DeleteTaskPushNotificationConfigRequest, GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse, ListTasksRequest, ListTasksResponse, SendMessageRequest,
    SendMessageResponse, StreamResponse, SubscribeToTaskRequest, Task, TaskPushNotificationConfig,
};

/// A server-streaming response of `StreamResponse`s.
type GrpcStream = Pin<Box<dyn Stream<Item = Result<StreamResponse, Status>> + Send>>;

fn to_grpc(Events(stream): Events) -> GrpcStream {
    stream.map(|item| item.map(|event| event.response.clone()).map_err(Status::from)).boxed()
}

#[tonic::async_trait]
impl A2aService for GrpcBinding {
    async fn send_message(
        &self,
        request: Request<SendMessageRequest>,
    ) -> Result<Response<SendMessageResponse>, Status> {
        // Served by encode_once.rs.
        Ok(SEND_MESSAGE.answer(self, request).await?.map(SendOutcome::into_response))
    }

    type SendStreamingMessageStream = GrpcStream;

    async fn send_streaming_message(
        &self,
        request: Request<SendMessageRequest>,
    ) -> Result<Response<GrpcStream>, Status> {
        // Served by encode_once.rs.
        Ok(SEND_STREAMING_MESSAGE.answer(self, request).await?.map(to_grpc))
    }

    async fn get_task(&self, request: Request<GetTaskRequest>) -> Result<Response<Task>, Status> {
        // Served by encode_once.rs.
        Ok(GET_TASK.answer(self, request).await?.map(Arc::unwrap_or_clone))
    }

    async fn list_tasks(
        &self,
        request: Request<ListTasksRequest>,
    ) -> Result<Response<ListTasksResponse>, Status> {
        self.call("ListTasks", request, |core, call, r| async move { core.list_tasks(&call, r).await }).await
    }

    async fn cancel_task(&self, request: Request<CancelTaskRequest>) -> Result<Response<Task>, Status> {
        self.call("CancelTask", request, |core, call, r| async move { core.cancel_task(&call, r).await })
            .await
    }

    type SubscribeToTaskStream = GrpcStream;

    async fn subscribe_to_task(
        &self,
        request: Request<SubscribeToTaskRequest>,
    ) -> Result<Response<GrpcStream>, Status> {
        // Served by encode_once.rs.
        Ok(SUBSCRIBE_TO_TASK.answer(self, request).await?.map(to_grpc))
    }

    async fn create_task_push_notification_config(
        &self,
        request: Request<TaskPushNotificationConfig>,
    ) -> Result<Response<TaskPushNotificationConfig>, Status> {
        self.call("CreateTaskPushNotificationConfig", request, |core, call, r| async move {
            core.create_task_push_notification_config(&call, r).await
        })
        .await
    }

    async fn get_task_push_notification_config(
        &self,
        request: Request<GetTaskPushNotificationConfigRequest>,
    ) -> Result<Response<TaskPushNotificationConfig>, Status> {
        self.call("GetTaskPushNotificationConfig", request, |core, call, r| async move {
            core.get_task_push_notification_config(&call, r).await
        })
        .await
    }

    async fn list_task_push_notification_configs(
        &self,
        request: Request<ListTaskPushNotificationConfigsRequest>,
    ) -> Result<Response<ListTaskPushNotificationConfigsResponse>, Status> {
        self.call("ListTaskPushNotificationConfigs", request, |core, call, r| async move {
            core.list_task_push_notification_configs(&call, r).await
        })
        .await
    }

    async fn get_extended_agent_card(
        &self,
        request: Request<GetExtendedAgentCardRequest>,
    ) -> Result<Response<AgentCard>, Status> {
        self.call("GetExtendedAgentCard", request, |core, call, r| async move {
            core.get_extended_agent_card(&call, r).await
        })
        .await
    }

    async fn delete_task_push_notification_config(
        &self,
        request: Request<DeleteTaskPushNotificationConfigRequest>,
    ) -> Result<Response<pbjson_types::Empty>, Status> {
        self.call("DeleteTaskPushNotificationConfig", request, |core, call, r| async move {
            core.delete_task_push_notification_config(&call, r).await.map(|()| pbjson_types::Empty {})
        })
        .await
    }
}
