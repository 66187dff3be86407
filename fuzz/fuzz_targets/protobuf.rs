//! Protobuf decoding of every request type the gRPC bindings take (v1.0, and the v0.3 shim's
//! through its conversion to v1.0), then the core's validation, the first byte picking the
//! type: what decodes round-trips (protobuf and ProtoJSON, as JSON clients will later read it),
//! what validation accepts has every REQUIRED field, and what it refuses is InvalidParams
//! naming the fields.
#![no_main]
use std::fmt::Debug;

use a2a_fuzz::check;
use a2a_server::error::A2aError;
use a2a_server::fuzzing::{validate_push_config, validate_send_message, validate_task_id};
use a2a_server::proto::{self as v1, Role};
use a2a_server::proto_v03 as v03;
use a2a_server::transport::v03::typed;
use libfuzzer_sys::fuzz_target;
use prost::{Message, Name};

fuzz_target!(|input: &[u8]| {
    let Some((&kind, bytes)) = input.split_first() else { return };
    match kind % 14 {
        0 => send(decode::<v1::SendMessageRequest>(bytes)),
        1 => task_id(decode::<v1::GetTaskRequest>(bytes).map(|r| r.id)),
        2 => drop(decode::<v1::ListTasksRequest>(bytes)),
        3 => task_id(decode::<v1::CancelTaskRequest>(bytes).map(|r| r.id)),
        4 => task_id(decode::<v1::SubscribeToTaskRequest>(bytes).map(|r| r.id)),
        5 => push_config(decode::<v1::TaskPushNotificationConfig>(bytes)),
        6 => task_id(decode::<v1::GetTaskPushNotificationConfigRequest>(bytes).map(|r| r.task_id)),
        7 => task_id(decode::<v1::ListTaskPushNotificationConfigsRequest>(bytes).map(|r| r.task_id)),
        8 => task_id(decode::<v1::DeleteTaskPushNotificationConfigRequest>(bytes).map(|r| r.task_id)),
        9 => drop(decode::<v1::GetExtendedAgentCardRequest>(bytes)),
        10 => send(decode::<v03::SendMessageRequest>(bytes).map(typed::send_in)),
        11 => {
            if let Some(request) = decode::<v03::CreateTaskPushNotificationConfigRequest>(bytes) {
                match typed::create_push_config_in(request) {
                    Ok(config) => push_config(Some(config)),
                    Err(error) => check::client_error(&error),
                }
            }
        }
        12 => {
            if let Some(request) = decode::<v03::GetTaskRequest>(bytes) {
                match typed::task_name(&request.name) {
                    Ok(id) => task_id(Some(id)),
                    Err(error) => check::client_error(&error),
                }
            }
        }
        _ => {
            if let Some(request) = decode::<v03::GetTaskPushNotificationConfigRequest>(bytes) {
                match typed::config_name(&request.name) {
                    Ok((task, id)) => {
                        assert!(!task.is_empty() && !id.is_empty(), "{:?} names both", request.name);
                    }
                    Err(error) => check::client_error(&error),
                }
            }
        }
    }
});

/// Decodes a protobuf message as tonic's codec does; what decodes re-encodes to the same
/// message: equal as values or, where a NaN makes a message unequal to itself, in the
/// characters of its Debug text (as a multiset: a `Struct`'s fields are a HashMap, printed in
/// a random order; and ProtoJSON cannot write a NaN).
fn decode<T: Message + Name + Default + Debug + PartialEq>(bytes: &[u8]) -> Option<T> {
    let message = T::decode(bytes).ok()?;
    let again = T::decode(message.encode_to_vec().as_slice()).expect("our own protobuf decodes");
    let chars = |message: &T| {
        let mut chars: Vec<char> = format!("{message:?}").chars().collect();
        chars.sort_unstable();
        chars
    };
    assert!(
        again == message || chars(&again) == chars(&message),
        "protobuf decode → encode is stable: {message:?} came back as {again:?}"
    );
    Some(message)
}

fn send(request: Option<v1::SendMessageRequest>) {
    let Some(request) = request else { return };
    match validate_send_message(&request) {
        Ok(()) => {
            // Only now: what validation refuses (a NaN, say) never reaches a JSON encoder.
            check::roundtrip(&request);
            let message = request.message.as_ref().expect("a valid request has a message");
            assert!(!message.message_id.is_empty());
            assert!(matches!(Role::try_from(message.role), Ok(Role::User | Role::Agent)));
            assert!(!message.parts.is_empty() && message.parts.iter().all(|p| p.content.is_some()));
            let configuration = request.configuration.unwrap_or_default();
            assert!(configuration.history_length.unwrap_or(0) >= 0);
        }
        Err(error) => invalid_params(&error),
    }
}

fn push_config(config: Option<v1::TaskPushNotificationConfig>) {
    let Some(config) = config else { return };
    check::roundtrip(&config);
    match validate_push_config(&config) {
        Ok(()) => {
            // Read as delivery will read it: an absolute http(s) URL with a host.
            let url = url::Url::parse(&config.url).expect("an accepted URL parses");
            assert!(matches!(url.scheme(), "http" | "https") && url.host().is_some(), "{:?}", config.url);
        }
        Err(error) => invalid_params(&error),
    }
}

fn task_id(id: Option<String>) {
    let Some(id) = id else { return };
    match validate_task_id("id", &id) {
        Ok(()) => assert!(!id.is_empty()),
        Err(error) => {
            assert!(id.is_empty());
            invalid_params(&error);
        }
    }
}

fn invalid_params(error: &A2aError) {
    assert!(
        matches!(error, A2aError::InvalidParams { .. }),
        "validation refuses with InvalidParams: {error:?}"
    );
    assert!(!error.violations().is_empty(), "naming the fields: {error:?}");
    check::client_error(error);
}
