//! ProtoJSON decoding of every request type (v1.0, and the v0.3 shim's bodies), the first
//! byte picking the type: what decodes round-trips (ProtoJSON and protobuf), what decodes
//! strictly decodes leniently to the same message, the generated reader and the descriptors
//! read the same message, and a refusal is an InvalidParams error.
#![no_main]
use std::fmt::Debug;

use a2a_fuzz::check;
use a2a_server::core::CoreSettings;
use a2a_server::error::A2aError;
use a2a_server::proto::{self as v1, AgentCard, AgentSkill, Message};
use a2a_server::proto_v03 as v03;
use a2a_server::protojson;
use a2a_server::transport::http;
use a2a_server::transport::operation::list_tasks;
use a2a_server::transport::v03::{json as v03json, typed};
use libfuzzer_sys::fuzz_target;
use prost::Name;
use serde_json::Value;

fuzz_target!(|input: &[u8]| {
    let Some((&kind, json)) = input.split_first() else { return };
    // Read as the JSON bindings read a body: what they refuse (too deep to store, over the
    // parts or values budget, duplicate names) never reaches the ProtoJSON decoders.
    let Ok(value) = http::parse_json(json, &CoreSettings::default()) else { return };
    match kind % 16 {
        0 => drop(v1_request::<v1::SendMessageRequest>(&value)),
        1 => drop(v1_request::<v1::GetTaskRequest>(&value)),
        2 => {
            let decoded = v1_request::<v1::ListTasksRequest>(&value);
            match list_tasks(&value) {
                Ok(request) => {
                    assert_eq!(Some(protojson::encode(&request)), decoded.map(|r| protojson::encode(&r)))
                }
                Err(error) => check::client_error(&error),
            }
        }
        3 => drop(v1_request::<v1::CancelTaskRequest>(&value)),
        4 => drop(v1_request::<v1::SubscribeToTaskRequest>(&value)),
        5 => drop(v1_request::<v1::TaskPushNotificationConfig>(&value)),
        6 => drop(v1_request::<v1::GetTaskPushNotificationConfigRequest>(&value)),
        7 => drop(v1_request::<v1::ListTaskPushNotificationConfigsRequest>(&value)),
        8 => drop(v1_request::<v1::DeleteTaskPushNotificationConfigRequest>(&value)),
        9 => drop(v1_request::<v1::GetExtendedAgentCardRequest>(&value)),
        10 => {
            if let Some(request) = v03_request::<v03::SendMessageRequest>(&value) {
                check::roundtrip(&typed::send_in(request));
            }
        }
        11 => {
            if let Some(config) = v03_request::<v03::TaskPushNotificationConfig>(&value) {
                let request = v03::CreateTaskPushNotificationConfigRequest {
                    parent: "tasks/t".into(),
                    config: Some(config),
                    ..Default::default()
                };
                outcome(typed::create_push_config_in(request));
            }
        }
        12 => {
            if let Some(request) = v03_request::<v03::CreateTaskPushNotificationConfigRequest>(&value) {
                outcome(typed::create_push_config_in(request));
            }
        }
        13 => drop(v1_request::<AgentSkill>(&value)),
        14 => drop(v1_request::<Message>(&value)),
        _ => drop(v1_request::<AgentCard>(&value)),
    }
});

/// Decodes `value` as `T` leniently and strictly, checking what each gives; what the generated
/// serde code reads, the descriptors read as the same message.
fn v1_request<T: protojson::Encode + Default + Debug + PartialEq>(value: &Value) -> Option<T> {
    if let Some(generated) = protojson::decode_generated::<T>(value) {
        let described = protojson::decode_described::<T>(value);
        assert_eq!(described.as_ref().ok(), Some(&generated), "the two ProtoJSON readers agree");
    }
    let strict = protojson::decode_strict::<T>(value);
    match protojson::decode::<T>(value) {
        Ok(request) => {
            let canonical = check::roundtrip(&request);
            if let Ok(strict) = strict {
                assert_eq!(protojson::encode(&strict), canonical, "strict and lenient decoding agree");
            }
            Some(request)
        }
        Err(error) => {
            assert!(strict.is_err(), "what lenient decoding refuses, strict decoding refuses too");
            invalid_params(&error);
            None
        }
    }
}

fn v03_request<T: prost::Message + Name + Default + Debug>(value: &Value) -> Option<T> {
    match v03json::decode::<T>(value) {
        Ok(request) => {
            let json = v03json::encode(&request);
            let back: T = v03json::decode(&json).expect("canonical v0.3 ProtoJSON decodes");
            assert_eq!(v03json::encode(&back), json, "v0.3 ProtoJSON decode → encode is stable");
            Some(request)
        }
        Err(error) => {
            invalid_params(&error);
            None
        }
    }
}

fn outcome(converted: Result<v1::TaskPushNotificationConfig, A2aError>) {
    match converted {
        Ok(config) => drop(check::roundtrip(&config)),
        Err(error) => check::client_error(&error),
    }
}

fn invalid_params(error: &A2aError) {
    assert!(
        matches!(error, A2aError::InvalidParams { .. }),
        "a body that does not fit is InvalidParams: {error:?}"
    );
    assert!(!error.violations().is_empty(), "naming the field: {error:?}");
    check::client_error(error);
}
