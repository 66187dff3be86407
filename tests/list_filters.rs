//! A ListTasks filter the server cannot read is INVALID_ARGUMENT on every binding, never
//! "no filter" (which would answer every task): an unknown `status` name in JSON is silently
//! dropped by lenient ProtoJSON decoding unless the binding checks it.
mod common;

use a2a_server::proto::ListTasksRequest;
use a2a_server::proto::a2a_service_client::A2aServiceClient;
use common::*;
use serde_json::{Value, json};

#[tokio::test]
async fn an_unknown_status_filter_is_invalid_argument_on_every_binding() {
    let server = TestServer::start().await;
    let http = reqwest::Client::new();

    for status in ["TASK_STATE_BOGUS", "completed", "99"] {
        let response = http.get(format!("{}/tasks?status={status}", server.url())).send().await.unwrap();
        assert_eq!(response.status(), 400, "HTTP+JSON status={status}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["status"], "INVALID_ARGUMENT", "{body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("status"), "{body}");
    }
    let valid = http.get(format!("{}/tasks?status=TASK_STATE_COMPLETED", server.url())).send().await.unwrap();
    assert_eq!(valid.status(), 200, "a known state still filters");

    for status in [json!("NOPE"), json!(42)] {
        let request = json!({"jsonrpc": "2.0", "id": 7, "method": "ListTasks", "params": {"status": status}});
        let body: Value = http.post(server.url()).json(&request).send().await.unwrap().json().await.unwrap();
        assert_eq!(body["error"]["code"], -32602, "JSON-RPC status={status}: {body}");
        assert_eq!(body["id"], 7);
    }
    let request = json!({"jsonrpc": "2.0", "id": 8, "method": "ListTasks", "params": {"status": "TASK_STATE_UNSPECIFIED"}});
    let body: Value = http.post(server.url()).json(&request).send().await.unwrap().json().await.unwrap();
    assert!(body.get("result").is_some(), "UNSPECIFIED means no filter: {body}");

    let mut grpc = A2aServiceClient::new(server.channel().await);
    let error = grpc.list_tasks(ListTasksRequest { status: 99, ..Default::default() }).await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::InvalidArgument, "{error:?}");
}
