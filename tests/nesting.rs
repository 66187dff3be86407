//! Issue 33, item 2: nothing a client sends can make a stored task unreadable. Structured data
//! (metadata, data parts) nested to `MAX_NESTING` is accepted on every binding and the task
//! stays readable everywhere; one level deeper is refused with INVALID_ARGUMENT naming the
//! field, whether the nesting is objects, arrays or both.
mod common;

use a2a_server::core::MAX_NESTING;
use a2a_server::proto::{GetTaskRequest, ListTasksRequest, SendMessageRequest, Task, send_message_response};
use common::bindings::{BINDINGS, Client};
use common::*;
use pbjson_types::{ListValue, Struct, Value, value::Kind};
use serde_json::json;

#[derive(Clone, Copy, Debug)]
enum Shape {
    Objects,
    Arrays,
    Mixed,
}

const SHAPES: [Shape; 3] = [Shape::Objects, Shape::Arrays, Shape::Mixed];

/// A value `depth` objects and arrays deep, in `shape`.
fn nest(depth: usize, shape: Shape) -> Value {
    (0..depth).fold(Value { kind: Some(Kind::StringValue("x".into())) }, |inner, level| {
        let array = match shape {
            Shape::Objects => false,
            Shape::Arrays => true,
            Shape::Mixed => level % 2 == 0,
        };
        let kind = if array {
            Kind::ListValue(ListValue { values: vec![inner] })
        } else {
            Kind::StructValue(Struct { fields: [("k".to_owned(), inner)].into() })
        };
        Value { kind: Some(kind) }
    })
}

/// An object `depth` deep (metadata): `{"m": <depth - 1 deep>}`.
fn object(depth: usize, shape: Shape) -> Struct {
    Struct { fields: [("m".to_owned(), nest(depth - 1, shape))].into() }
}

/// A message with a text part and a data part `data_depth` deep, its metadata and the
/// request's `metadata_depth` deep.
fn request(data_depth: usize, metadata_depth: usize, shape: Shape) -> SendMessageRequest {
    let mut request = send("nested");
    let message = request.message.as_mut().expect("a message");
    message.parts.push(a2a_server::proto::Part {
        content: Some(a2a_server::proto::part::Content::Data(nest(data_depth, shape))),
        ..Default::default()
    });
    message.metadata = Some(object(metadata_depth, shape));
    request.metadata = Some(object(metadata_depth.min(MAX_NESTING), shape));
    request
}

fn task_of(response: a2a_server::proto::SendMessageResponse) -> Task {
    match response.payload {
        Some(send_message_response::Payload::Task(task)) => task,
        other => panic!("expected a task, got {other:?}"),
    }
}

#[tokio::test]
async fn nesting_at_the_limit_stays_readable_and_deeper_is_refused_on_every_binding() {
    let server = TestServer::start().await;
    let mut created = Vec::new();
    for binding in BINDINGS {
        let client = Client::connect(&server, binding, "1.0").await;
        for shape in SHAPES {
            let at_limit = request(MAX_NESTING, MAX_NESTING, shape);
            let task = task_of(
                client
                    .send(at_limit.clone())
                    .await
                    .unwrap_or_else(|f| panic!("{binding:?} {shape:?}: {f:?}")),
            );
            let read = client
                .get(GetTaskRequest { id: task.id.clone(), ..Default::default() })
                .await
                .expect("GetTask");
            let sent = at_limit.message.as_ref().expect("a message");
            assert!(
                read.history.iter().any(|m| m.parts == sent.parts && m.metadata == sent.metadata),
                "{binding:?} {shape:?}: the data kept exactly"
            );
            created.push(task.id);

            let deeper = [
                (request(MAX_NESTING + 1, 2, shape), "message.parts[1].data"),
                (request(1, MAX_NESTING + 1, shape), "message.metadata"),
            ];
            for (request, field) in deeper {
                let failure = client.send(request).await.expect_err("one level deeper is refused");
                assert_eq!(failure.code, "INVALID_ARGUMENT", "{binding:?} {shape:?}: {failure:?}");
                assert_eq!(failure.fields, [field], "{binding:?} {shape:?}");
            }
        }
    }
    // Every binding lists every task, and reads each.
    for binding in BINDINGS {
        let client = Client::connect(&server, binding, "1.0").await;
        let list = client
            .list(ListTasksRequest { page_size: Some(100), ..Default::default() })
            .await
            .expect("ListTasks");
        let listed: Vec<&str> = list.tasks.iter().map(|t| t.id.as_str()).collect();
        for id in &created {
            assert!(listed.contains(&id.as_str()), "{binding:?} lists {id}");
            client.get(GetTaskRequest { id: id.clone(), ..Default::default() }).await.expect("GetTask");
        }
    }
}

/// The v0.3 JSON-RPC shim: data parts are objects there; at the limit kept, deeper refused.
#[tokio::test]
async fn nesting_on_v03_jsonrpc() {
    let server = TestServer::start().await;
    let http = reqwest::Client::new();
    let url = format!("{}/", server.url());
    let deep = |depth: usize| serde_json::to_value(object(depth, Shape::Mixed)).expect("JSON");
    let send = |depth: usize| {
        rpc(
            1,
            "message/send",
            json!({"message": {
                "kind": "message", "messageId": uuid::Uuid::new_v4().to_string(), "role": "user",
                "parts": [{"kind": "text", "text": "hi"}, {"kind": "data", "data": deep(depth)}],
                "metadata": deep(depth)
            }}),
        )
    };
    let body = json_answer(http.post(&url).json(&send(MAX_NESTING))).await;
    let id = body["result"]["id"].as_str().unwrap_or_else(|| panic!("a task: {body}")).to_owned();
    let got = json_answer(http.post(&url).json(&rpc(2, "tasks/get", json!({"id": id})))).await;
    assert_eq!(got["result"]["id"], id.as_str(), "{got}");

    let body = json_answer(http.post(&url).json(&send(MAX_NESTING + 1))).await;
    assert_eq!(body["error"]["code"], -32602, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("message.parts[1].data") || message.contains("message.metadata"), "{body}");

    let client = Client::connect(&server, common::bindings::Binding::JsonRpc, "1.0").await;
    let list = client.list(ListTasksRequest::default()).await.expect("ListTasks");
    assert_eq!(list.tasks.len(), 1);
}
