//! The v0.3 ↔ v1.0 conversion (`transport/v03/convert.rs`): every part kind, every state, every
//! event kind, the push config and the errors, each checked against the v1.0 codec and in
//! round trips (v0.3 → v1.0 → v0.3 gives back what the client sent).
use a2a_server::error::A2aError;
use a2a_server::proto::{Message, SendMessageRequest, StreamResponse, Task, TaskPushNotificationConfig};
use a2a_server::protojson::{decode, encode};
use a2a_server::transport::v03::convert::*;
use serde_json::{Value, json};

fn v03_message(parts: Value) -> Value {
    json!({"kind": "message", "messageId": "m1", "role": "user", "contextId": "c1", "taskId": "t1",
           "referenceTaskIds": ["t0"], "extensions": ["urn:x"], "metadata": {"k": 1.5}, "parts": parts})
}

/// v0.3 → v1.0 (decoded by the v1.0 codec, so the result is valid v1.0) → v0.3.
fn round_trip_message(v03: &Value) -> Value {
    let message: Message = decode(&message_in(v03).unwrap()).unwrap();
    message_out(&encode(&message))
}

#[test]
fn every_part_kind_round_trips() {
    let parts = json!([
        {"kind": "text", "text": "hello", "metadata": {"a": "b"}},
        {"kind": "file", "file": {"bytes": "AQID", "mimeType": "application/octet-stream", "name": "x.bin"}},
        {"kind": "file", "file": {"uri": "https://example.com/f.pdf", "mimeType": "application/pdf"}},
        // Struct numbers are doubles in protobuf, so the fixture uses fractions to compare exactly.
        {"kind": "data", "data": {"n": 0.5, "list": [true, null]}},
    ]);
    let v03 = v03_message(parts);
    assert_eq!(round_trip_message(&v03), v03);
}

#[test]
fn parts_become_v1_parts() {
    let v1 = message_in(&v03_message(json!([
        {"kind": "text", "text": "t"},
        {"kind": "file", "file": {"bytes": "AQID", "name": "a"}},
        {"kind": "file", "file": {"uri": "https://e/x", "mimeType": "text/plain"}},
        {"kind": "data", "data": {"k": "v"}},
        {"text": "no kind"},
    ])))
    .unwrap();
    assert_eq!(v1["role"], "ROLE_USER");
    assert_eq!(
        v1["parts"],
        json!([{"text": "t"}, {"raw": "AQID", "filename": "a"}, {"url": "https://e/x", "mediaType": "text/plain"},
               {"data": {"k": "v"}}, {"text": "no kind"}])
    );
    let message: Message = decode(&v1).unwrap();
    assert_eq!(message.reference_task_ids, ["t0"]);
}

#[test]
fn bad_parts_are_invalid_params() {
    for part in [json!({"kind": "image"}), json!({"kind": "file", "file": {}}), json!({}), json!("text")] {
        let error = message_in(&v03_message(json!([part]))).unwrap_err();
        assert_eq!(error.reason(), "INVALID_PARAMS", "{part}");
    }
    let error = message_in(&json!({"messageId": "m", "role": "system", "parts": []})).unwrap_err();
    assert_eq!(error.reason(), "INVALID_PARAMS");
    assert_eq!(message_in(&json!(null)).unwrap_err().reason(), "INVALID_PARAMS");
}

#[test]
fn a_non_object_data_part_is_wrapped_for_v03() {
    assert_eq!(part_out(&json!({"data": [1, 2]})), json!({"kind": "data", "data": {"value": [1, 2]}}));
}

#[test]
fn every_state_has_its_v03_name() {
    let expected = [
        ("TASK_STATE_SUBMITTED", "submitted"),
        ("TASK_STATE_WORKING", "working"),
        ("TASK_STATE_COMPLETED", "completed"),
        ("TASK_STATE_FAILED", "failed"),
        ("TASK_STATE_CANCELED", "canceled"),
        ("TASK_STATE_INPUT_REQUIRED", "input-required"),
        ("TASK_STATE_REJECTED", "rejected"),
        ("TASK_STATE_AUTH_REQUIRED", "auth-required"),
    ];
    for (v1, v03) in expected {
        let task: Task = decode(&json!({"id": "t", "contextId": "c", "status": {"state": v1}})).unwrap();
        let out = task_out(&encode(&task));
        assert_eq!(out["status"]["state"], v03);
        assert_eq!(out["kind"], "task");
    }
    // An unset state (omitted by ProtoJSON) is v0.3's `unknown`.
    assert_eq!(status_out(&json!({}))["state"], "unknown");
    assert_eq!(STATES.len(), 9);
}

#[test]
fn a_task_converts_deeply() {
    let task = json!({
        "id": "t", "contextId": "c",
        "status": {"state": "TASK_STATE_INPUT_REQUIRED", "timestamp": "2026-01-01T00:00:00Z",
                   "message": {"messageId": "s", "role": "ROLE_AGENT", "parts": [{"text": "?"}]}},
        "history": [{"messageId": "h", "role": "ROLE_USER", "parts": [{"text": "hi"}]}],
        "artifacts": [{"artifactId": "a", "name": "n", "parts": [{"url": "https://e/x"}]}],
        "metadata": {"k": "v"}
    });
    let task: Task = decode(&task).unwrap();
    assert_eq!(
        task_out(&encode(&task)),
        json!({
            "kind": "task", "id": "t", "contextId": "c",
            "status": {"state": "input-required", "timestamp": "2026-01-01T00:00:00Z",
                       "message": {"kind": "message", "messageId": "s", "role": "agent",
                                   "parts": [{"kind": "text", "text": "?"}]}},
            "history": [{"kind": "message", "messageId": "h", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}],
            "artifacts": [{"artifactId": "a", "name": "n", "parts": [{"kind": "file", "file": {"uri": "https://e/x"}}]}],
            "metadata": {"k": "v"}
        })
    );
}

#[test]
fn every_event_kind() {
    let events = [
        (json!({"task": {"id": "t", "status": {"state": "TASK_STATE_SUBMITTED"}}}), "task", None),
        (
            json!({"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}}),
            "message",
            None,
        ),
        (
            json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}}),
            "status-update",
            Some(false),
        ),
        (
            json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}}),
            "status-update",
            Some(true),
        ),
        (
            json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}}),
            "status-update",
            Some(true),
        ),
        (
            json!({"artifactUpdate": {"taskId": "t", "contextId": "c", "append": true, "lastChunk": false,
                                    "artifact": {"artifactId": "a", "parts": [{"text": "chunk"}]}}}),
            "artifact-update",
            None,
        ),
    ];
    for (v1, kind, last) in events {
        let response: StreamResponse = decode(&v1).unwrap();
        let out = result_out(&encode(&response));
        assert_eq!(out["kind"], kind, "{out}");
        assert_eq!(out.get("final").and_then(Value::as_bool), last, "{out}");
    }
    let chunk: StreamResponse = decode(&json!({"artifactUpdate": {"taskId": "t", "append": true,
        "artifact": {"artifactId": "a", "parts": [{"text": "chunk"}]}}}))
    .unwrap();
    let out = result_out(&encode(&chunk));
    assert_eq!(out["artifact"]["parts"], json!([{"kind": "text", "text": "chunk"}]));
    assert_eq!(out["append"], true);
}

#[test]
fn send_params_and_blocking() {
    let params = json!({"message": v03_message(json!([{"kind": "text", "text": "hi"}])),
        "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": 2, "blocking": false,
                          "pushNotificationConfig": {"url": "https://hook", "token": "tok",
                                                     "authentication": {"schemes": ["Bearer"], "credentials": "c"}}},
        "metadata": {"m": 1}});
    let request: SendMessageRequest = decode(&send_params_in(&params).unwrap()).unwrap();
    let config = request.configuration.unwrap();
    assert!(config.return_immediately, "blocking: false is returnImmediately");
    assert_eq!(config.history_length, Some(2));
    let push = config.task_push_notification_config.unwrap();
    assert_eq!((push.url.as_str(), push.token.as_str()), ("https://hook", "tok"));
    assert_eq!(push.authentication.unwrap().scheme, "Bearer");
    for blocking in [json!({"blocking": true}), json!({})] {
        let params = json!({"message": v03_message(json!([])), "configuration": blocking});
        let request: SendMessageRequest = decode(&send_params_in(&params).unwrap()).unwrap();
        assert!(!request.configuration.unwrap().return_immediately, "v0.3 blocks by default");
    }
}

#[test]
fn push_config_round_trips() {
    let v03 = json!({"taskId": "t", "pushNotificationConfig": {"id": "p", "url": "https://hook", "token": "tok",
        "authentication": {"schemes": ["Bearer"], "credentials": "secret"}}});
    let config: TaskPushNotificationConfig = decode(&task_push_config_in(&v03).unwrap()).unwrap();
    assert_eq!((config.task_id.as_str(), config.id.as_str()), ("t", "p"));
    assert_eq!(push_config_out(&encode(&config)), v03);
    // Without an id the config gets the task's, which get/delete without a config id name.
    let anonymous = json!({"taskId": "t", "pushNotificationConfig": {"url": "https://hook"}});
    assert_eq!(task_push_config_in(&anonymous).unwrap()["id"], "t");
    assert_eq!(push_config_ref_in(&json!({"id": "t"})).unwrap(), json!({"taskId": "t", "id": "t"}));
    assert_eq!(
        push_config_ref_in(&json!({"id": "t", "pushNotificationConfigId": "p"})).unwrap(),
        json!({"taskId": "t", "id": "p"})
    );
    assert_eq!(
        task_push_config_in(&json!({"pushNotificationConfig": {}})).unwrap_err().reason(),
        "INVALID_PARAMS"
    );
}

#[test]
fn task_params() {
    assert_eq!(
        task_query_in(&json!({"id": "t", "historyLength": 3})).unwrap(),
        json!({"id": "t", "historyLength": 3})
    );
    assert_eq!(task_id_in(&json!({"id": 5})).unwrap_err().reason(), "INVALID_PARAMS");
    assert_eq!(task_id_in(&json!({})).unwrap_err().reason(), "INVALID_PARAMS");
}

#[test]
fn errors_keep_v03_codes() {
    let cases = [
        (A2aError::TaskNotFound("t".into()), -32001),
        (A2aError::TaskNotCancelable { task_id: "t".into(), state: "x".into() }, -32002),
        (A2aError::PushNotificationNotSupported, -32003),
        (A2aError::UnsupportedOperation("x".into()), -32004),
        (A2aError::ContentTypeNotSupported("x".into()), -32005),
        (A2aError::InvalidAgentResponse("x".into()), -32006),
        (A2aError::ExtendedAgentCardNotConfigured, -32007),
        (A2aError::ExtensionSupportRequired("urn:x".into()), -32600),
        (A2aError::VersionNotSupported("9".into()), -32600),
        (A2aError::invalid_field("id", "bad"), -32602),
        (A2aError::MethodNotFound("x".into()), -32601),
        (A2aError::Internal("x".into()), -32603),
    ];
    for (error, code) in cases {
        let out = error_out(&error);
        assert_eq!(out["code"], code, "{error}");
        assert_eq!(out["data"]["reason"], error.reason());
        assert!(out["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
}
