//! A2A v0.3 clients over the v0.3 REST binding (`/v1/…`, the v0.3 proto's ProtoJSON) and the
//! v0.3 gRPC service `a2a.v1.A2AService`, beside v1.0 on the same port: every route and RPC,
//! resubscription exactness, a task shared with v1.0 clients, and the v0.3 proto conversion.
mod common;

use a2a_server::proto_v03 as v03;
use a2a_server::proto_v03::a2a_service_client::A2aServiceClient as V03Client;
use a2a_server::push::ssrf::Policy;
use a2a_server::transport::http::HttpSettings;
use a2a_server::transport::v03::typed;
use common::webhook::push_settings;
use common::*;
use futures::StreamExt;
use serde_json::{Value, json};

fn rest_message(text: &str) -> Value {
    json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER", "content": [{"text": text}]})
}

fn grpc_message(text: &str) -> v03::Message {
    v03::Message {
        message_id: uuid::Uuid::new_v4().to_string(),
        role: v03::Role::User as i32,
        content: vec![v03::Part { part: Some(v03::part::Part::Text(text.into())), metadata: None }],
        ..Default::default()
    }
}

fn blocking(text: &str) -> v03::SendMessageRequest {
    v03::SendMessageRequest {
        request: Some(grpc_message(text)),
        configuration: Some(v03::SendMessageConfiguration { blocking: true, ..Default::default() }),
        metadata: None,
    }
}

async fn post(server: &TestServer, path: &str, body: Value) -> reqwest::Response {
    reqwest::Client::new().post(format!("{}{path}", server.url())).json(&body).send().await.unwrap()
}

async fn get(server: &TestServer, path: &str) -> reqwest::Response {
    reqwest::get(format!("{}{path}", server.url())).await.unwrap()
}

fn v03_task(value: &Value) -> v03::Task {
    a2a_server::transport::v03::json::decode(value).unwrap()
}

#[tokio::test]
async fn rest_routes() {
    let server =
        TestServer::builder().settings(push_settings(Policy::with_allowlist(true, &[]))).start().await;
    let sent = post(
        &server,
        "/v1/message:send",
        json!({"message": rest_message("hello"), "configuration": {"blocking": true}}),
    )
    .await;
    assert_eq!(sent.status(), 200);
    let sent: Value = sent.json().await.unwrap();
    assert_eq!(sent["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{sent}");
    assert!(sent["task"]["history"][0]["content"].is_array(), "v0.3 proto names: {sent}");
    let id = sent["task"]["id"].as_str().unwrap().to_owned();

    let got: Value = get(&server, &format!("/v1/tasks/{id}?historyLength=1")).await.json().await.unwrap();
    assert_eq!(v03_task(&got).id, id);
    // Errors: the HTTP status, and the A2A code the v0.3 SDKs map to their error types.
    let missing = get(&server, "/v1/tasks/nope").await;
    assert_eq!(missing.status(), 404);
    assert_eq!(missing.json::<Value>().await.unwrap()["code"], -32001);
    let terminal = post(&server, &format!("/v1/tasks/{id}:cancel"), json!({})).await;
    assert_eq!(terminal.status(), 400);
    assert_eq!(terminal.json::<Value>().await.unwrap()["code"], -32002);

    // Non-blocking is the v0.3 proto's default.
    let early: Value = post(&server, "/v1/message:send", json!({"message": rest_message("input")}))
        .await
        .json()
        .await
        .unwrap();
    let waiting = early["task"]["id"].as_str().unwrap().to_owned();
    let config = json!({"name": format!("tasks/{waiting}/pushNotificationConfigs/p1"),
        "pushNotificationConfig": {"id": "p1", "url": "http://127.0.0.1:9/hook", "authentication": {"schemes": ["Bearer"]}}});
    let created: Value =
        post(&server, &format!("/v1/tasks/{waiting}/pushNotificationConfigs"), config.clone())
            .await
            .json()
            .await
            .unwrap();
    assert_eq!(created, config);
    // The v0.3 SDKs send the whole CreateTaskPushNotificationConfigRequest instead: accepted too.
    let wrapped = json!({"parent": format!("tasks/{waiting}"), "configId": "p2",
        "config": {"pushNotificationConfig": {"url": "http://127.0.0.1:9/other"}}});
    let path = format!("/v1/tasks/{waiting}/pushNotificationConfigs");
    let created: Value = post(&server, &path, wrapped).await.json().await.unwrap();
    assert_eq!(created["name"], format!("tasks/{waiting}/pushNotificationConfigs/p2"));
    let path = format!("/v1/tasks/{waiting}/pushNotificationConfigs");
    let listed: Value = get(&server, &path).await.json().await.unwrap();
    assert_eq!(listed["configs"][0], config);
    assert_eq!(listed["configs"].as_array().map(Vec::len), Some(2));
    let one: Value = get(&server, &format!("{path}/p1")).await.json().await.unwrap();
    assert_eq!(one, config);
    let deleted = reqwest::Client::new().delete(format!("{}{path}/p1", server.url())).send().await.unwrap();
    assert_eq!(deleted.status(), 200);
    assert_eq!(get(&server, &format!("{path}/p1")).await.status(), 404);

    let canceled: Value =
        post(&server, &format!("/v1/tasks/{waiting}:cancel"), json!({})).await.json().await.unwrap();
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELLED", "v0.3 spelling: {canceled}");

    let card: v03::AgentCard =
        a2a_server::transport::v03::json::decode(&get(&server, "/v1/card").await.json().await.unwrap())
            .unwrap();
    assert_eq!((card.protocol_version.as_str(), card.preferred_transport.as_str()), ("0.3.0", "JSONRPC"));
    assert_eq!(post(&server, "/v1/nothing", json!({})).await.status(), 404);
    // Every unknown path under `/v1/`, the bare prefix too (found by fuzzing), answers in the
    // v0.3 error form: the code and reason at the top level.
    for path in ["/v1/nothing", "/v1/"] {
        let missing = get(&server, path).await;
        assert_eq!(missing.status(), 404, "{path}");
        let body: Value = missing.json().await.unwrap();
        assert_eq!(body["code"], -32601, "{path}: {body}");
        assert_eq!(body["data"]["reason"], "METHOD_NOT_FOUND", "{path}: {body}");
    }
    let bad = post(&server, "/v1/message:send", json!({"message": {"content": "not a list"}})).await;
    assert_eq!(bad.status(), 400);
}

#[tokio::test]
async fn rest_stream_and_subscribe_get_and_post() {
    let server = TestServer::start().await;
    let response = post(&server, "/v1/message:stream", json!({"message": rest_message("stream 2 0")})).await;
    let events: Vec<Value> = SseReader::new(response).collect().await.iter().map(|e| e.json()).collect();
    assert!(events[0].get("task").is_some(), "{events:?}");
    let last = events.last().unwrap();
    assert_eq!(last["statusUpdate"]["final"], true, "{last}");

    let early: Value = post(&server, "/v1/message:send", json!({"message": rest_message("stream 4 100")}))
        .await
        .json()
        .await
        .unwrap();
    let id = early["task"]["id"].as_str().unwrap().to_owned();
    let by_get = SseReader::new(get(&server, &format!("/v1/tasks/{id}:subscribe")).await);
    let by_post = SseReader::new(post(&server, &format!("/v1/tasks/{id}:subscribe"), json!({})).await);
    for events in [by_get.collect().await, by_post.collect().await] {
        let first = events[0].json();
        assert!(first.get("task").is_some(), "snapshot first: {first}");
        let in_snapshot = first["task"]["artifacts"][0]["parts"].as_array().map_or(0, Vec::len);
        let streamed = events.iter().filter(|e| e.json().get("artifactUpdate").is_some()).count();
        assert_eq!(in_snapshot + streamed, 4);
    }
}

#[tokio::test]
async fn grpc_service_beside_v1() {
    let server =
        TestServer::builder().settings(push_settings(Policy::with_allowlist(true, &[]))).start().await;
    let mut client = V03Client::new(server.channel().await);
    let sent = client.send_message(blocking("hello")).await.unwrap().into_inner();
    let Some(v03::send_message_response::Payload::Task(task)) = sent.payload else { panic!("a task") };
    assert_eq!(task.status.as_ref().unwrap().state, v03::TaskState::Completed as i32);
    // The same task through the v1.0 service.
    let mut v1 = server.client().await;
    let read = v1
        .get_task(a2a_server::proto::GetTaskRequest { id: task.id.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(read.context_id, task.context_id);

    let name = format!("tasks/{}", task.id);
    let got = client
        .get_task(v03::GetTaskRequest { name: name.clone(), history_length: 0 })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.id, task.id);
    let error = client
        .get_task(v03::GetTaskRequest { name: "tasks/nope".into(), history_length: 0 })
        .await
        .unwrap_err();
    assert_eq!(error.code(), tonic::Code::NotFound);
    let error =
        client.get_task(v03::GetTaskRequest { name: "nope".into(), history_length: 0 }).await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::InvalidArgument);
    let error = client.cancel_task(v03::CancelTaskRequest { name: name.clone() }).await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::FailedPrecondition);
    let error = client.task_subscription(v03::TaskSubscriptionRequest { name }).await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::FailedPrecondition);

    // A v1.0 task, subscribed mid-stream by v0.3 (TaskSubscription) and by v1.0 at once.
    let running = send_task(&mut v1, send_returning_immediately("stream 5 100")).await;
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    let subscription = v03::TaskSubscriptionRequest { name: format!("tasks/{}", running.id) };
    let v03_events: Vec<_> =
        client.task_subscription(subscription).await.unwrap().into_inner().collect().await;
    let v03_events: Vec<_> = v03_events.into_iter().map(Result::unwrap).collect();
    let Some(v03::stream_response::Payload::Task(snapshot)) = &v03_events[0].payload else {
        panic!("snapshot first")
    };
    let in_snapshot = snapshot.artifacts.first().map_or(0, |a| a.parts.len());
    let streamed = v03_events
        .iter()
        .filter(|e| matches!(e.payload, Some(v03::stream_response::Payload::ArtifactUpdate(_))))
        .count();
    assert_eq!(in_snapshot + streamed, 5);
    let Some(v03::stream_response::Payload::StatusUpdate(last)) = &v03_events.last().unwrap().payload else {
        panic!()
    };
    assert!(last.r#final);

    // Push configs: parent/config_id/name resource names.
    let waiting = send_task(&mut v1, send("input")).await;
    let parent = format!("tasks/{}", waiting.id);
    let config = v03::TaskPushNotificationConfig {
        name: String::new(),
        push_notification_config: Some(v03::PushNotificationConfig {
            url: "http://127.0.0.1:9/h".into(),
            ..Default::default()
        }),
    };
    let create = v03::CreateTaskPushNotificationConfigRequest {
        parent: parent.clone(),
        config_id: "c1".into(),
        config: Some(config),
    };
    let created = client.create_task_push_notification_config(create).await.unwrap().into_inner();
    assert_eq!(created.name, format!("{parent}/pushNotificationConfigs/c1"));
    let listed = client
        .list_task_push_notification_config(v03::ListTaskPushNotificationConfigRequest {
            parent,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.configs, std::slice::from_ref(&created));
    let got = client
        .get_task_push_notification_config(v03::GetTaskPushNotificationConfigRequest {
            name: created.name.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got, created);
    client
        .delete_task_push_notification_config(v03::DeleteTaskPushNotificationConfigRequest {
            name: created.name.clone(),
        })
        .await
        .unwrap();
    let card = client.get_agent_card(v03::GetAgentCardRequest {}).await.unwrap().into_inner();
    assert_eq!(card.additional_interfaces.len(), 3);
}

#[tokio::test]
async fn off_means_v1_only() {
    let server = TestServer::builder().http(HttpSettings { v03: false, ..Default::default() }).start().await;
    assert_eq!(get(&server, "/v1/card").await.status(), 404);
    let mut client = V03Client::new(server.channel().await);
    let error = client.get_agent_card(v03::GetAgentCardRequest {}).await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::Unimplemented);
}

#[test]
fn typed_conversion_round_trips() {
    use a2a_server::proto as v1;
    let parts = vec![
        v03::Part { part: Some(v03::part::Part::Text("t".into())), metadata: None },
        v03::Part {
            part: Some(v03::part::Part::File(v03::FilePart {
                file: Some(v03::file_part::File::FileWithBytes(vec![1, 2])),
                mime_type: "application/x".into(),
                name: "f".into(),
            })),
            metadata: None,
        },
        v03::Part {
            part: Some(v03::part::Part::File(v03::FilePart {
                file: Some(v03::file_part::File::FileWithUri("https://e/x".into())),
                mime_type: String::new(),
                name: String::new(),
            })),
            metadata: None,
        },
        v03::Part {
            part: Some(v03::part::Part::Data(v03::DataPart {
                data: Some(pbjson_types::Struct {
                    fields: [("k".to_owned(), "v".to_owned().into())].into_iter().collect(),
                }),
            })),
            metadata: None,
        },
    ];
    let message = v03::Message { message_id: "m".into(), role: 1, content: parts, ..Default::default() };
    let v1_message = typed::message_in(message.clone());
    assert!(matches!(v1_message.parts[1].content, Some(v1::part::Content::Raw(_))));
    assert_eq!(v1_message.parts[1].media_type, "application/x");
    assert_eq!(typed::message_out(v1_message), message);

    // Every state keeps its number; CANCELED (v1.0) is CANCELLED (v0.3).
    assert_eq!(v1::TaskState::Canceled as i32, v03::TaskState::Cancelled as i32);
    for state in 0..=8 {
        let task = v1::Task {
            id: "t".into(),
            status: Some(v1::TaskStatus { state, ..Default::default() }),
            ..Default::default()
        };
        assert_eq!(typed::task_out(task).status.unwrap().state, state);
    }
    assert_eq!(typed::task_name("tasks/a").unwrap(), "a");
    assert!(typed::task_name("tasks/a/b").is_err() && typed::task_name("a").is_err());
    assert_eq!(typed::config_name("tasks/a/pushNotificationConfigs/b").unwrap(), ("a".into(), "b".into()));
    assert!(typed::config_name("tasks/a/pushNotificationConfigs/").is_err());
    // Non-blocking unless asked: the v0.3 proto's default.
    let request =
        typed::send_in(v03::SendMessageRequest { request: Some(grpc_message("x")), ..Default::default() });
    assert!(request.configuration.unwrap().return_immediately);
    assert!(!typed::send_in(blocking("x")).configuration.unwrap().return_immediately);
}

#[test]
fn v03_json_is_lenient_like_v1() {
    let value = json!({"messageId": "m", "role": "ROLE_USER", "content": [{"text": "x"}], "somethingNew": 1});
    let message: v03::Message = a2a_server::transport::v03::json::decode(&value).unwrap();
    assert_eq!(message.content.len(), 1);
    let error = a2a_server::transport::v03::json::decode::<v03::Message>(&json!({"content": 5})).unwrap_err();
    assert_eq!(error.reason(), "INVALID_PARAMS");
}

#[tokio::test]
async fn reflection_lists_both_services_and_health_knows_the_v03_one() {
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

    let server = TestServer::start().await;
    let mut client = ServerReflectionClient::new(server.channel().await);
    let requests = [
        MessageRequest::ListServices(String::new()),
        MessageRequest::FileContainingSymbol("a2a.v1.A2AService".into()),
    ]
    .map(|m| ServerReflectionRequest { host: String::new(), message_request: Some(m) });
    let mut responses =
        client.server_reflection_info(futures::stream::iter(requests)).await.unwrap().into_inner();
    let Some(MessageResponse::ListServicesResponse(list)) =
        responses.next().await.unwrap().unwrap().message_response
    else {
        panic!("expected a service list")
    };
    let names: Vec<_> = list.service.iter().map(|s| s.name.as_str()).collect();
    assert!(names.contains(&"lf.a2a.v1.A2AService") && names.contains(&"a2a.v1.A2AService"), "{names:?}");
    let Some(MessageResponse::FileDescriptorResponse(files)) =
        responses.next().await.unwrap().unwrap().message_response
    else {
        panic!("expected the v0.3 descriptors")
    };
    assert!(!files.file_descriptor_proto.is_empty());

    let mut health = tonic_health::pb::health_client::HealthClient::new(server.channel().await);
    let request = tonic_health::pb::HealthCheckRequest { service: "a2a.v1.A2AService".into() };
    assert_eq!(health.check(request).await.unwrap().into_inner().status, 1, "SERVING");
}
