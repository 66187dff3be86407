//! The four push-config RPCs: webhooks registered for a task, scoped to the task's owner.
use super::Core;
use super::validate::{self, Violations};
use crate::call::{CallContext, Owner, ProtocolVersion};
use crate::error::A2aError;
use crate::proto::{
    DeleteTaskPushNotificationConfigRequest, GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    TaskPushNotificationConfig,
};
use crate::task::store::PushRegistration;

impl Core {
    /// CreateTaskPushNotificationConfig: registers a webhook for an existing task.
    pub async fn create_task_push_notification_config(
        &self,
        call: &CallContext,
        config: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, A2aError> {
        let owner = self.push_scope(call, &config.tenant, &config.task_id, None).await?;
        self.register_push_config(&owner, config, call.protocol).await
    }

    /// Validates a config, gives it an id if it has none, and stores it with the protocol
    /// version of the call that registered it, the version its webhook bodies are written in.
    pub(super) async fn register_push_config(
        &self,
        owner: &Owner,
        mut config: TaskPushNotificationConfig,
        version: ProtocolVersion,
    ) -> Result<TaskPushNotificationConfig, A2aError> {
        validate::push_config(&config)?;
        if config.id.is_empty() {
            config.id = crate::proto::new_id();
        }
        let registration = PushRegistration::new(config, version);
        self.env.store.put_push_config(owner, &registration, self.settings.push.config_limits()).await?;
        Ok(registration.config)
    }

    /// GetTaskPushNotificationConfig.
    pub async fn get_task_push_notification_config(
        &self,
        call: &CallContext,
        request: GetTaskPushNotificationConfigRequest,
    ) -> Result<TaskPushNotificationConfig, A2aError> {
        let owner = self.push_scope(call, &request.tenant, &request.task_id, Some(&request.id)).await?;
        let configs = self.env.store.push_configs(&owner, &request.task_id).await?;
        configs
            .into_iter()
            .map(|r| r.config)
            .find(|c| c.id == request.id)
            .ok_or(A2aError::PushConfigNotFound { task_id: request.task_id, config_id: request.id })
    }

    /// ListTaskPushNotificationConfigs, paginated (default 50, at most 100 per page).
    pub async fn list_task_push_notification_configs(
        &self,
        call: &CallContext,
        request: ListTaskPushNotificationConfigsRequest,
    ) -> Result<ListTaskPushNotificationConfigsResponse, A2aError> {
        let owner = self.push_scope(call, &request.tenant, &request.task_id, None).await?;
        if !(0..=100).contains(&request.page_size) {
            return Err(A2aError::invalid_field("pageSize", "must be between 1 and 100"));
        }
        let start = match request.page_token.as_str() {
            "" => 0,
            token => token.parse::<usize>().map_err(|_| {
                A2aError::invalid_field("pageToken", "not a page token issued by this server")
            })?,
        };
        let configs = self.env.store.push_configs(&owner, &request.task_id).await?;
        let page_size = if request.page_size == 0 { 50 } else { request.page_size as usize };
        let end = (start + page_size).min(configs.len());
        let page = configs.get(start..end).unwrap_or_default().iter().map(|r| r.config.clone()).collect();
        let next_page_token = if end < configs.len() { end.to_string() } else { String::new() };
        Ok(ListTaskPushNotificationConfigsResponse { configs: page, next_page_token })
    }

    /// DeleteTaskPushNotificationConfig: idempotent.
    pub async fn delete_task_push_notification_config(
        &self,
        call: &CallContext,
        request: DeleteTaskPushNotificationConfigRequest,
    ) -> Result<(), A2aError> {
        let owner = self.push_scope(call, &request.tenant, &request.task_id, Some(&request.id)).await?;
        self.env.store.delete_push_config(&owner, &request.task_id, &request.id).await
    }

    /// The checks every push-config call starts with: admitted, push on, ids present, and the
    /// task visible to the caller. The caller's owner.
    async fn push_scope(
        &self,
        call: &CallContext,
        tenant: &str,
        task_id: &str,
        config_id: Option<&str>,
    ) -> Result<Owner, A2aError> {
        self.admit(call)?;
        if !self.settings.push_notifications {
            return Err(A2aError::PushNotificationNotSupported);
        }
        let mut v = Violations::default();
        v.require_id("taskId", task_id);
        if let Some(id) = config_id {
            v.require_id("id", id);
        }
        v.into_result()?;
        let owner = call.owner(tenant)?;
        self.require_task(&owner, task_id).await?;
        Ok(owner)
    }
}
