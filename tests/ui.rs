//! The `/ui` dashboard's routes over a real socket: on by default on loopback, off with
//! `--ui off`, a strict CSP on every response, small assets, and the page at a task's URL
//! (what the page does in a browser is `tests/ui/browser_test.py`).
mod common;

use std::sync::Arc;

use a2a_server::agent::demo::DemoAgent;
use a2a_server::config::Config;
use a2a_server::server::Server;
use a2a_server::transport::http::HttpSettings;
use a2a_server::ui::{self, UiMode};
use clap::Parser;
use common::*;
use serde_json::{Value, json};

async fn get(url: &str, accept: &str) -> reqwest::Response {
    reqwest::Client::new().get(url).header("accept", accept).send().await.expect("GET")
}

fn csp(response: &reqwest::Response) -> &str {
    response.headers().get("content-security-policy").and_then(|v| v.to_str().ok()).unwrap_or("")
}

#[tokio::test]
async fn served_on_loopback_by_default_with_a_strict_csp() {
    let server = TestServer::start().await;
    for path in ["/ui", "/ui/", "/ui/tasks/x"] {
        let response = get(&format!("{}{path}", server.url()), "text/html").await;
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(csp(&response), ui::CSP, "{path}");
        assert!(ui::CSP.starts_with("default-src 'self';"));
        assert!(!ui::CSP.contains("unsafe") && !ui::CSP.contains("http"), "own origin only: {}", ui::CSP);
        let html = response.text().await.unwrap();
        assert!(html.contains("assets/app.js") && html.contains("<main"), "{path}: {html}");
    }
    let page = get(&format!("{}/ui/tasks/x", server.url()), "text/html").await.text().await.unwrap();
    assert!(page.contains("src=\"../assets/app.js\""), "relative to /ui/tasks/: {page}");

    for (name, content_type, bytes) in ui::ASSETS {
        let response = get(&format!("{}/ui/assets/{name}", server.url()), "*/*").await;
        assert_eq!(response.status(), 200, "{name}");
        assert_eq!(response.headers()["content-type"], *content_type, "{name}");
        assert_eq!(csp(&response), ui::CSP, "{name}");
        assert_eq!(response.bytes().await.unwrap().len(), bytes.len(), "{name}");
    }
    let missing = get(&format!("{}/ui/assets/nope.js", server.url()), "*/*").await;
    assert_eq!(missing.status(), 404);
    assert_eq!(csp(&missing), ui::CSP);
}

#[tokio::test]
async fn served_under_the_base_path_too() {
    let http = HttpSettings { base_path: "/a2a".into(), ..HttpSettings::default() };
    let server = TestServer::builder().http(http).start().await;
    for path in ["/a2a/ui", "/a2a/ui/tasks/x", "/a2a/ui/assets/app.js", "/ui/"] {
        let response = get(&format!("{}{path}", server.url()), "text/html").await;
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(csp(&response), ui::CSP, "{path}");
    }
}

#[test]
fn assets_stay_under_100_kb() {
    assert!(ui::total_size() < 100 * 1024, "the /ui assets are {} bytes", ui::total_size());
}

#[tokio::test]
async fn off_means_no_ui_and_the_rest_routes_as_before() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let running =
        Server::new(Arc::new(DemoAgent), DemoAgent::card()).ui(UiMode::Off).start(listener).await.unwrap();
    let url = format!("http://{}", running.local_addr());
    for path in ["/ui", "/ui/", "/ui/assets/app.js", "/ui/tasks/x"] {
        let response = get(&format!("{url}{path}"), "text/html").await;
        assert_eq!(response.status(), 404, "{path}");
        assert!(csp(&response).is_empty(), "{path}");
    }
    // The binding still answers: the 404 above is HTTP+JSON's own (GetTask of tenant `ui`).
    let body: Value = get(&format!("{url}/ui/tasks/x"), "application/json").await.json().await.unwrap();
    assert_eq!(body["error"]["status"], "NOT_FOUND", "{body}");
}

#[tokio::test]
async fn a_task_url_is_still_http_json_for_api_clients() {
    let server = TestServer::start().await;
    let request = json!({"message": json_message("hello")});
    let response = reqwest::Client::new().post(format!("{}/ui/message:send", server.url())).json(&request);
    let sent: Value = response.send().await.unwrap().json().await.unwrap();
    let id = sent["task"]["id"].as_str().expect("a task").to_owned();
    // Tenant `ui`: a browser gets the page, a client the task.
    let task: Value =
        get(&format!("{}/ui/tasks/{id}", server.url()), "application/json").await.json().await.unwrap();
    assert_eq!(task["id"], id.as_str(), "{task}");
    let page = get(&format!("{}/ui/tasks/{id}", server.url()), "text/html").await;
    assert_eq!(csp(&page), ui::CSP);
    // The route takes every method: the other calls on the task still reach the binding.
    let cancel =
        reqwest::Client::new().post(format!("{}/ui/tasks/{id}:cancel", server.url())).send().await.unwrap();
    let refusal: Value = cancel.json().await.unwrap();
    assert_eq!(refusal["error"]["details"][0]["reason"], "TASK_NOT_CANCELABLE", "{refusal}");
}

#[test]
fn the_flag() {
    let parse = |args: &[&str]| Config::try_parse_from([&["a2a-server"], args].concat()).map(|c| c.ui);
    assert_eq!(parse(&[]).unwrap(), UiMode::Auto);
    assert_eq!(parse(&["--ui", "off"]).unwrap(), UiMode::Off);
    assert_eq!(parse(&["--ui", "on"]).unwrap(), UiMode::On);
    assert!(parse(&["--ui", "maybe"]).is_err());
}
