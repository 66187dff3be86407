//! `/metrics` in Prometheus text, and the per-request span in JSON logs with `traceparent`.
mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use a2a_server::proto::{GetTaskRequest, SubscribeToTaskRequest};
use common::*;
use serde_json::json;

/// The value of the first sample line starting with `prefix` (name and labels).
fn sample(text: &str, prefix: &str) -> Option<f64> {
    text.lines().find(|l| l.starts_with(prefix)).and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

#[tokio::test]
async fn metrics_count_requests_by_binding_method_and_outcome() {
    let server = TestServer::start().await;
    let mut client = server.client().await;
    let idle = client.send_message(send("input")).await.unwrap().into_inner();
    let Some(a2a_server::proto::send_message_response::Payload::Task(task)) = idle.payload else { panic!() };
    let _ = client.get_task(GetTaskRequest { id: "missing".into(), ..Default::default() }).await;
    let stream = client
        .subscribe_to_task(SubscribeToTaskRequest { id: task.id.clone(), ..Default::default() })
        .await
        .unwrap();
    let http = reqwest::Client::new();
    http.post(format!("{}/", server.url()))
        .json(&rpc(1, "GetTask", json!({"id": task.id})))
        .send()
        .await
        .unwrap();

    let response = http.get(format!("{}/metrics", server.url())).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/plain"));
    let text = response.text().await.unwrap();
    let ok = r#"a2a_requests_total{binding="grpc",method="SendMessage",outcome="ok"}"#;
    assert!(sample(&text, ok).unwrap() >= 1.0, "{text}");
    let missing = r#"a2a_requests_total{binding="grpc",method="GetTask",outcome="TASK_NOT_FOUND"}"#;
    assert!(sample(&text, missing).unwrap() >= 1.0, "{text}");
    assert!(
        sample(&text, r#"a2a_requests_total{binding="jsonrpc",method="GetTask",outcome="ok"}"#).is_some()
    );
    let series = r#"binding="grpc",method="SendMessage""#;
    let count = sample(&text, &format!("a2a_request_duration_seconds_count{{{series}}}")).unwrap();
    assert!(count >= 1.0, "{text}");
    let every = sample(&text, &format!(r#"a2a_request_duration_seconds_bucket{{{series},le="+Inf"}}"#));
    assert_eq!(every, Some(count), "{text}");
    assert!(text.contains("# TYPE a2a_request_duration_seconds histogram\n"), "{text}");
    assert!(sample(&text, "a2a_live_tasks").unwrap() >= 1.0);
    assert!(sample(&text, "a2a_open_subscriptions").unwrap() >= 1.0);
    assert!(sample(&text, "a2a_events_total").unwrap() >= 1.0);
    assert!(sample(&text, r#"a2a_tasks{state="TASK_STATE_INPUT_REQUIRED"}"#).unwrap() >= 1.0, "{text}");
    drop(stream);
}

#[test]
fn json_logs_carry_a_span_per_request_with_the_traceparent() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_a2a-server"))
        .args(["--listen", "127.0.0.1:0", "--log-format", "json", "--log-level", "a2a_server=debug"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let line = BufReader::new(child.stdout.take().unwrap()).lines().next().unwrap().unwrap();
    let address = line.split("listening on ").nth(1).unwrap().split_whitespace().next().unwrap().to_owned();
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let response = reqwest::Client::new()
            .get(format!("http://{address}/tasks/t-123"))
            .header("traceparent", traceparent)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 404);
    });
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let mut found = None;
    for line in stderr.lines() {
        let line = line.unwrap();
        let Ok(entry) = serde_json::from_str::<serde_json::Value>(&line) else {
            panic!("not one JSON object per line: {line}")
        };
        if entry["fields"]["message"] == "request" {
            found = Some(entry);
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let entry = found.expect("a request log line");
    let span = &entry["span"];
    assert_eq!(span["method"], "GetTask");
    assert_eq!(span["binding"], "rest");
    assert_eq!(span["task_id"], "t-123");
    assert_eq!(span["traceparent"], traceparent);
    assert_eq!(entry["fields"]["outcome"], "TASK_NOT_FOUND");
}
