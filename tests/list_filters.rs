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

/// A ListTasks page ends at `--max-list-page-bytes` (before the task that would pass it, with
/// at least one task), and `nextPageToken` goes on from there: every task is listed once.
#[tokio::test]
async fn a_page_ends_at_its_byte_budget_and_the_token_goes_on() {
    let settings = a2a_server::core::CoreSettings { max_list_page_bytes: 25_000, ..Default::default() };
    let server = TestServer::builder().settings(settings).start().await;
    let http = reqwest::Client::new();
    for n in 0..5 {
        // Echoed: each task holds the text twice, ~12 KB.
        let text = format!("{n}{}", "x".repeat(6_000));
        let params = json!({"message": json_message(&text)});
        let request = json!({"jsonrpc": "2.0", "id": n, "method": "SendMessage", "params": params});
        let body: Value = http.post(server.url()).json(&request).send().await.unwrap().json().await.unwrap();
        assert!(body["result"]["task"]["id"].is_string(), "{body}");
    }
    let mut grpc = A2aServiceClient::new(server.channel().await);
    let (mut seen, mut pages, mut token) = (Vec::new(), Vec::new(), String::new());
    loop {
        let request = ListTasksRequest {
            page_size: Some(100),
            page_token: token,
            include_artifacts: Some(true),
            ..Default::default()
        };
        let page = grpc.list_tasks(request).await.unwrap().into_inner();
        assert!(!page.tasks.is_empty(), "a page holds at least one task");
        pages.push(page.tasks.len());
        seen.extend(page.tasks.iter().map(|t| t.id.clone()));
        assert_eq!(page.total_size, 5);
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert_eq!(pages, [2, 2, 1], "two ~12 KB tasks fit 25 KB, a third does not");
    let unique: std::collections::HashSet<_> = seen.iter().collect();
    assert_eq!((seen.len(), unique.len()), (5, 5), "every task once: {seen:?}");

    // Without artifacts the same tasks are half the size: four fit.
    let request = ListTasksRequest { page_size: Some(100), ..Default::default() };
    let page = grpc.list_tasks(request).await.unwrap().into_inner();
    assert_eq!(page.tasks.len(), 4, "~6 KB each without artifacts");
}
