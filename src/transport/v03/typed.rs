//! The v0.3 proto messages (`a2a.v1`, [`crate::proto_v03`]) to and from the v1.0 ones, for the
//! v0.3 bindings that carry them: REST (their ProtoJSON) and gRPC (their binary form). The
//! enums keep their numbers across versions (v0.3's `TASK_STATE_CANCELLED` is v1.0's
//! `TASK_STATE_CANCELED`, both 5), so states and roles are copied as numbers.
use pbjson_types::{Struct, Value, value::Kind};

use crate::error::A2aError;
use crate::proto as v1;
use crate::proto_v03 as v03;
use crate::task::{is_interrupted, is_terminal};

/// The task id of a v0.3 resource name `tasks/{id}`.
pub fn task_name(name: &str) -> Result<String, A2aError> {
    match name.strip_prefix("tasks/") {
        Some(id) if !id.is_empty() && !id.contains('/') => Ok(id.to_owned()),
        _ => Err(A2aError::invalid_field("name", format!("{name:?} is not tasks/{{id}}"))),
    }
}

/// The `(task id, config id)` of `tasks/{id}/pushNotificationConfigs/{config_id}`.
pub fn config_name(name: &str) -> Result<(String, String), A2aError> {
    let bad = || {
        A2aError::invalid_field(
            "name",
            format!("{name:?} is not tasks/{{id}}/pushNotificationConfigs/{{config_id}}"),
        )
    };
    let rest = name.strip_prefix("tasks/").ok_or_else(bad)?;
    let (task, config) = rest.split_once("/pushNotificationConfigs/").ok_or_else(bad)?;
    if task.is_empty() || config.is_empty() || task.contains('/') || config.contains('/') {
        return Err(bad());
    }
    Ok((task.to_owned(), config.to_owned()))
}

fn part_in(part: v03::Part) -> v1::Part {
    let mut out = v1::Part { metadata: part.metadata, ..Default::default() };
    out.content = match part.part {
        Some(v03::part::Part::Text(text)) => Some(v1::part::Content::Text(text)),
        Some(v03::part::Part::Data(data)) => Some(v1::part::Content::Data(Value {
            kind: Some(Kind::StructValue(data.data.unwrap_or_default())),
        })),
        Some(v03::part::Part::File(file)) => {
            out.filename = file.name;
            out.media_type = file.mime_type;
            match file.file {
                Some(v03::file_part::File::FileWithBytes(bytes)) => Some(v1::part::Content::Raw(bytes)),
                Some(v03::file_part::File::FileWithUri(uri)) => Some(v1::part::Content::Url(uri)),
                None => None,
            }
        }
        None => None,
    };
    out
}

fn part_out(part: v1::Part) -> v03::Part {
    let file = |file| {
        Some(v03::part::Part::File(v03::FilePart {
            file: Some(file),
            mime_type: part.media_type.clone(),
            name: part.filename.clone(),
        }))
    };
    let content = match part.content {
        Some(v1::part::Content::Text(text)) => Some(v03::part::Part::Text(text)),
        Some(v1::part::Content::Raw(bytes)) => file(v03::file_part::File::FileWithBytes(bytes)),
        Some(v1::part::Content::Url(url)) => file(v03::file_part::File::FileWithUri(url)),
        Some(v1::part::Content::Data(value)) => {
            let data = match value.kind {
                Some(Kind::StructValue(data)) => data,
                other => {
                    Struct { fields: [("value".to_owned(), Value { kind: other })].into_iter().collect() }
                }
            };
            Some(v03::part::Part::Data(v03::DataPart { data: Some(data) }))
        }
        None => None,
    };
    v03::Part { part: content, metadata: part.metadata }
}

/// A v0.3 Message as a v1.0 one.
pub fn message_in(message: v03::Message) -> v1::Message {
    v1::Message {
        message_id: message.message_id,
        context_id: message.context_id,
        task_id: message.task_id,
        role: message.role,
        parts: message.content.into_iter().map(part_in).collect(),
        metadata: message.metadata,
        extensions: message.extensions,
        reference_task_ids: Vec::new(),
    }
}

/// A v1.0 Message as a v0.3 one (v0.3's proto has no `reference_task_ids`).
pub fn message_out(message: v1::Message) -> v03::Message {
    v03::Message {
        message_id: message.message_id,
        context_id: message.context_id,
        task_id: message.task_id,
        role: message.role,
        content: message.parts.into_iter().map(part_out).collect(),
        metadata: message.metadata,
        extensions: message.extensions,
    }
}

fn status_out(status: v1::TaskStatus) -> v03::TaskStatus {
    v03::TaskStatus {
        state: status.state,
        update: status.message.map(message_out),
        timestamp: status.timestamp,
    }
}

fn artifact_out(artifact: v1::Artifact) -> v03::Artifact {
    v03::Artifact {
        artifact_id: artifact.artifact_id,
        name: artifact.name,
        description: artifact.description,
        parts: artifact.parts.into_iter().map(part_out).collect(),
        metadata: artifact.metadata,
        extensions: artifact.extensions,
    }
}

/// A v1.0 Task as a v0.3 one.
pub fn task_out(task: v1::Task) -> v03::Task {
    v03::Task {
        id: task.id,
        context_id: task.context_id,
        status: task.status.map(status_out),
        artifacts: task.artifacts.into_iter().map(artifact_out).collect(),
        history: task.history.into_iter().map(message_out).collect(),
        metadata: task.metadata,
    }
}

/// A v1.0 StreamResponse as a v0.3 one; status updates get `final` (terminal or interrupted:
/// the v0.3 stream ends there).
pub fn stream_out(response: v1::StreamResponse) -> v03::StreamResponse {
    use v1::stream_response::Payload as P1;
    use v03::stream_response::Payload as P03;
    let payload = response.payload.map(|payload| match payload {
        P1::Task(task) => P03::Task(task_out(task)),
        P1::Message(message) => P03::Msg(message_out(message)),
        P1::StatusUpdate(update) => {
            let state = crate::task::state_of(update.status.as_ref());
            P03::StatusUpdate(v03::TaskStatusUpdateEvent {
                task_id: update.task_id,
                context_id: update.context_id,
                status: update.status.map(status_out),
                r#final: is_terminal(state) || is_interrupted(state),
                metadata: update.metadata,
            })
        }
        P1::ArtifactUpdate(update) => P03::ArtifactUpdate(v03::TaskArtifactUpdateEvent {
            task_id: update.task_id,
            context_id: update.context_id,
            artifact: update.artifact.map(artifact_out),
            append: update.append,
            last_chunk: update.last_chunk,
            metadata: update.metadata,
        }),
    });
    v03::StreamResponse { payload }
}

/// A v1.0 SendMessageResponse as a v0.3 one.
pub fn send_out(response: v1::SendMessageResponse) -> v03::SendMessageResponse {
    use v1::send_message_response::Payload as P1;
    use v03::send_message_response::Payload as P03;
    let payload = response.payload.map(|payload| match payload {
        P1::Task(task) => P03::Task(task_out(task)),
        P1::Message(message) => P03::Msg(message_out(message)),
    });
    v03::SendMessageResponse { payload }
}

/// A v0.3 push config as a v1.0 one of `task_id`; without an id it gets `default_id`.
pub fn push_config_in(
    config: v03::PushNotificationConfig,
    task_id: String,
    default_id: &str,
) -> v1::TaskPushNotificationConfig {
    let id = if config.id.is_empty() { default_id.to_owned() } else { config.id };
    let authentication = config.authentication.map(|auth| v1::AuthenticationInfo {
        scheme: auth.schemes.into_iter().next().unwrap_or_default(),
        credentials: auth.credentials,
    });
    v1::TaskPushNotificationConfig {
        tenant: String::new(),
        id,
        task_id,
        url: config.url,
        token: config.token,
        authentication,
    }
}

/// A v1.0 push config as a v0.3 `TaskPushNotificationConfig` (named by its resource name).
pub fn push_config_out(config: v1::TaskPushNotificationConfig) -> v03::TaskPushNotificationConfig {
    let authentication = config
        .authentication
        .map(|auth| v03::AuthenticationInfo { schemes: vec![auth.scheme], credentials: auth.credentials });
    v03::TaskPushNotificationConfig {
        name: format!("tasks/{}/pushNotificationConfigs/{}", config.task_id, config.id),
        push_notification_config: Some(v03::PushNotificationConfig {
            id: config.id,
            url: config.url,
            token: config.token,
            authentication,
        }),
    }
}

/// A v0.3 SendMessageRequest as a v1.0 one. In the v0.3 proto `blocking` defaults to false
/// (non-blocking), the opposite of v1.0's default.
pub fn send_in(request: v03::SendMessageRequest) -> v1::SendMessageRequest {
    let configuration = request.configuration.map(|config| v1::SendMessageConfiguration {
        accepted_output_modes: config.accepted_output_modes,
        task_push_notification_config: config
            .push_notification
            .map(|push| push_config_in(push, String::new(), "")),
        history_length: (config.history_length > 0).then_some(config.history_length),
        return_immediately: !config.blocking,
        // v0.3 has no generations.
        if_generation_match: None,
    });
    let configuration = configuration
        .or(Some(v1::SendMessageConfiguration { return_immediately: true, ..Default::default() }));
    v1::SendMessageRequest {
        tenant: String::new(),
        message: request.request.map(message_in),
        configuration,
        metadata: request.metadata,
    }
}

/// The v1.0 create request of a v0.3 one (`parent: tasks/{id}`, `config_id`, `config`).
pub fn create_push_config_in(
    request: v03::CreateTaskPushNotificationConfigRequest,
) -> Result<v1::TaskPushNotificationConfig, A2aError> {
    let task_id = task_name(&request.parent)?;
    let config = request.config.and_then(|c| c.push_notification_config).unwrap_or_default();
    let default_id = if request.config_id.is_empty() { task_id.clone() } else { request.config_id };
    Ok(push_config_in(config, task_id, &default_id))
}

/// The v0.3 card of a v1.0 one: v0.3 clients are pointed at the JSON-RPC interface, and told of
/// the other v0.3 interfaces this server has (`interfaces`: (url, v0.3 transport name)).
pub fn card_out(card: v1::AgentCard, interfaces: &[(String, &str)]) -> v03::AgentCard {
    let capabilities = card.capabilities.unwrap_or_default();
    let (url, preferred) =
        interfaces.first().map(|(url, t)| (url.clone(), t.to_string())).unwrap_or_default();
    v03::AgentCard {
        protocol_version: super::card::PROTOCOL_VERSION.to_owned(),
        name: card.name,
        description: card.description,
        url,
        preferred_transport: preferred,
        additional_interfaces: interfaces
            .iter()
            .map(|(url, t)| v03::AgentInterface { url: url.clone(), transport: t.to_string() })
            .collect(),
        provider: card.provider.map(|p| v03::AgentProvider { url: p.url, organization: p.organization }),
        version: card.version,
        documentation_url: card.documentation_url.unwrap_or_default(),
        capabilities: Some(v03::AgentCapabilities {
            streaming: capabilities.streaming.unwrap_or_default(),
            push_notifications: capabilities.push_notifications.unwrap_or_default(),
            extensions: capabilities
                .extensions
                .into_iter()
                .map(|e| v03::AgentExtension {
                    uri: e.uri,
                    description: e.description,
                    required: e.required,
                    params: e.params,
                })
                .collect(),
        }),
        default_input_modes: card.default_input_modes,
        default_output_modes: card.default_output_modes,
        skills: card
            .skills
            .into_iter()
            .map(|s| v03::AgentSkill {
                id: s.id,
                name: s.name,
                description: s.description,
                tags: s.tags,
                examples: s.examples,
                input_modes: s.input_modes,
                output_modes: s.output_modes,
                security: Vec::new(),
            })
            .collect(),
        supports_authenticated_extended_card: capabilities.extended_agent_card.unwrap_or_default(),
        icon_url: card.icon_url.unwrap_or_default(),
        ..Default::default()
    }
}
