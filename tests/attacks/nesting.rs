//! The poison request of issue #33 item 2: ~330 bytes of metadata nested 33 objects deep. It
//! used to be accepted and stored, and the stored Task then no longer decoded (prost reads 100
//! nested messages), so GetTask, ListTasks and CancelTask answered INTERNAL on every binding
//! until retention dropped it (1 h); without `--auth` every caller is one principal, so one
//! request broke ListTasks and the `/ui` list for everyone. Now it is refused, naming the field,
//! and the other tasks read as before.
use std::time::Instant;

use serde_json::{Value, json};

use super::common::rpc;
use super::harness;

/// Metadata `depth` objects deep: `{"a":{"a":…1…}}`.
fn nested(depth: usize) -> String {
    format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth))
}

fn poison_params(depth: usize) -> String {
    let id = uuid::Uuid::new_v4();
    format!(
        r#"{{"message":{{"messageId":"{id}","role":"ROLE_USER","parts":[{{"text":"x"}}],"metadata":{}}}}}"#,
        nested(depth)
    )
}

#[tokio::test]
async fn deeply_nested_metadata_is_refused_and_breaks_no_listing() {
    let server = harness::start(&[]);
    let http = reqwest::Client::new();
    let rpc_url = format!("{}/", server.url());
    let post_rpc =
        |body: String| http.post(&rpc_url).header("content-type", "application/json").body(body).send();

    let good = rpc(1, "SendMessage", json!({"message": super::common::json_message("hello")}));
    let good: Value = post_rpc(good.to_string()).await.expect("send").json().await.expect("JSON");
    let good_id =
        good["result"]["task"]["id"].as_str().unwrap_or_else(|| panic!("a task: {good}")).to_owned();

    let poison =
        format!(r#"{{"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{}}}"#, poison_params(33));
    let started = Instant::now();
    let answer: Value = post_rpc(poison.clone()).await.expect("answer").json().await.expect("JSON");
    let rpc_took = started.elapsed();
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap_or_default().contains("message.metadata"), "{answer}");

    let started = Instant::now();
    let response = http
        .post(format!("{}/message:send", server.url()))
        .header("content-type", "application/json")
        .body(poison_params(33))
        .send()
        .await
        .expect("answer");
    let rest_took = started.elapsed();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.expect("JSON");
    assert_eq!(body["error"]["status"], "INVALID_ARGUMENT", "{body}");

    // Arrays cost fewer decoder levels per step, so the issue's 49 arrays deep too.
    let arrays = format!("{}1{}", "[".repeat(49), "]".repeat(49));
    let id = uuid::Uuid::new_v4();
    let data = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"SendMessage","params":{{"message":{{"messageId":"{id}","role":"ROLE_USER","parts":[{{"data":{arrays}}}]}}}}}}"#
    );
    let answer: Value = post_rpc(data).await.expect("answer").json().await.expect("JSON");
    assert_eq!(answer["error"]["code"], -32602, "{answer}");

    let list: Value =
        post_rpc(rpc(4, "ListTasks", json!({})).to_string()).await.expect("list").json().await.expect("JSON");
    let listed: Vec<&str> = list["result"]["tasks"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(listed, [good_id.as_str()], "{list}");
    let get: Value = post_rpc(rpc(5, "GetTask", json!({"id": good_id})).to_string())
        .await
        .expect("get")
        .json()
        .await
        .expect("JSON");
    assert_eq!(get["result"]["id"], good_id.as_str(), "{get}");
    let rest_list = http.get(format!("{}/tasks", server.url())).send().await.expect("list");
    assert_eq!(rest_list.status(), 200);

    harness::report(
        &format!("metadata 33 objects deep ({} bytes) over JSON-RPC and HTTP+JSON", poison.len()),
        "refused INVALID_ARGUMENT naming the field; other tasks read",
        &format!(
            "before: accepted, then ListTasks/GetTask/CancelTask INTERNAL on every binding until retention (1 h); \
             after: refused in {} ms (JSON-RPC -32602) / {} ms (HTTP 400), `message.metadata` named; ListTasks and GetTask OK",
            rpc_took.as_millis(),
            rest_took.as_millis()
        ),
    );
}
