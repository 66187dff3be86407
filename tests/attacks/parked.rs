//! Parked tasks (issue #33 item 4): one principal fills its share of parked tasks (tasks that
//! wait for input and hibernate); another principal is still served, the filler is refused
//! with `Retry-After` (not for ever), and its slots free once the input timeout passes.
//! Before: a hibernated task held its live slot for ever, so the filler and then everyone
//! got 429 with no Retry-After, permanently.
use std::time::{Duration, Instant};

use a2a_server::auth::hash_hex;
use serde_json::json;

use crate::common::json_message;
use crate::harness;

/// The filler's share of parked tasks in this run.
const SHARE: usize = 2_000;
/// Seconds a task may wait for input here.
const INPUT_TIMEOUT_SECS: u64 = 4;

async fn send(http: &reqwest::Client, url: &str, key: &str, text: &str) -> reqwest::Response {
    let body = json!({"message": json_message(text), "configuration": {"returnImmediately": false}});
    http.post(format!("{url}/message:send")).header("X-API-Key", key).json(&body).send().await.expect("POST")
}

#[tokio::test]
async fn one_principal_filling_the_parked_tasks_leaves_others_served_and_frees_after_the_timeout() {
    let dir = std::env::temp_dir().join(format!("a2a-attack-parked-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let auth = dir.join("auth.toml");
    let file = format!(
        "[[api_key]]\nsha256 = \"{}\"\nprincipal = \"mallory\"\n[[api_key]]\nsha256 = \"{}\"\nprincipal = \"alice\"\n",
        hash_hex("mallory-key"),
        hash_hex("alice-key")
    );
    std::fs::write(&auth, file).expect("write the auth file");
    let share = SHARE.to_string();
    let timeout = INPUT_TIMEOUT_SECS.to_string();
    let server = harness::start(&[
        "--auth",
        auth.to_str().expect("a UTF-8 path"),
        "--task-idle-secs",
        "1",
        "--input-timeout-secs",
        &timeout,
        "--max-parked-tasks-per-principal",
        &share,
        // Tasks come faster than they hibernate: room for them all while they are live.
        "--max-live-tasks-per-principal",
        "5000",
    ]);
    let (url, http) = (server.url(), reqwest::Client::new());
    let rss_before = harness::rss_mib(server.pid());

    let started = Instant::now();
    for i in 0..SHARE {
        let answer = send(&http, &url, "mallory-key", "input").await;
        assert_eq!(answer.status(), 200, "task {i}");
    }
    let filled = started.elapsed();
    let rss_live = harness::rss_mib(server.pid());
    // Hibernated after the idle second; the refusals say when to come back.
    let mut retry_after = None;
    for _ in 0..100 {
        let answer = send(&http, &url, "mallory-key", "hello").await;
        if answer.status() == 429 {
            retry_after =
                answer.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_owned);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let retry_after = retry_after.expect("the filler is refused once its share is parked, with Retry-After");
    let rss_parked = harness::rss_mib(server.pid());
    let other = send(&http, &url, "alice-key", "hello").await;
    assert_eq!(other.status(), 200, "another principal is served");

    // The parked tasks expire after the input timeout (and a sweep): the filler is served again.
    let freed_at = Instant::now();
    let mut served = false;
    while freed_at.elapsed() < Duration::from_secs(INPUT_TIMEOUT_SECS * 4) {
        if send(&http, &url, "mallory-key", "hello").await.status() == 200 {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(served, "the filler's slots free after the input timeout");
    let per_task_kib = (rss_parked - rss_before).max(0.0) * 1024.0 / SHARE as f64;
    harness::report(
        "parked-task flood (one principal)",
        &format!("{SHARE} parked per principal; Retry-After; expiry after {INPUT_TIMEOUT_SECS} s"),
        &format!(
            "{SHARE} tasks in {filled:.1?}; filler refused with Retry-After: {retry_after}; other principal 200; served again {:.1?} after the refusal; RSS {rss_before:.0} → {rss_live:.0} (live) → {rss_parked:.0} MiB (parked), ~{per_task_kib:.1} KiB per parked task",
            freed_at.elapsed()
        ),
    );
    let _ = std::fs::remove_dir_all(&dir);
}
