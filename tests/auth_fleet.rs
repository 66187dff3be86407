//! Isolation in a fleet of real `a2a-server` processes started with `--auth FILE` on one Redis:
//! another principal calling the replica that does not own alice's live task gets
//! TASK_NOT_FOUND on all 11 operations and every binding (the store and the forwarded commands
//! are scoped by owner, not only the local registry), while alice herself reaches the task
//! through either replica. Skipped without `redis-server`.
#[path = "auth/client.rs"]
mod client;
mod common;

use a2a_server::auth::hash_hex;
use a2a_server::proto::{CancelTaskRequest, GetTaskRequest, TaskPushNotificationConfig};
use client::{BINDINGS, Caller, Op};
use common::fleet::Fleet;
use common::redis::RedisServer;
use common::*;
use serde_json::Value;

const ALICE_KEY: &str = "alice-fleet-key";
const MALLORY_KEY: &str = "mallory-fleet-key";

/// An auth file in the temporary directory, removed on drop.
struct AuthFile(std::path::PathBuf);

impl AuthFile {
    fn write() -> Self {
        let path = std::env::temp_dir().join(format!("a2a-auth-{}.toml", std::process::id()));
        let text = format!(
            "[[api_key]]\nsha256 = \"{}\"\nprincipal = \"alice\"\n\n[[api_key]]\nsha256 = \"{}\"\nprincipal = \"mallory\"\n",
            hash_hex(ALICE_KEY),
            hash_hex(MALLORY_KEY)
        );
        std::fs::write(&path, text).expect("write the auth file");
        Self(path)
    }
}

impl Drop for AuthFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

async fn caller(fleet: &Fleet, replica: usize, binding: client::Binding, key: &str) -> Caller {
    Caller::new(fleet[replica].url(), binding, fleet[replica].channel().await).with("X-API-Key", key)
}

#[tokio::test]
async fn another_principal_on_another_replica_sees_nothing_of_a_live_task() {
    let Some(redis) = RedisServer::start() else { return };
    let file = AuthFile::write();
    let path = file.0.to_str().expect("a UTF-8 path");
    let fleet = Fleet::start(2, &redis.url(), &["--auth", path, "--push", "--push-allow-private"]);
    let alice_a = caller(&fleet, 0, client::Binding::Grpc, ALICE_KEY).await;
    let live = alice_a.call(&Op::Send(send_returning_immediately("input"))).await.expect("a task");
    let id = live["task"]["id"].as_str().expect("an id").to_owned();
    let config = TaskPushNotificationConfig {
        task_id: id.clone(),
        url: "http://127.0.0.1:9/hook".into(),
        ..Default::default()
    };
    let config = alice_a.call(&Op::CreatePush(config)).await.expect("a config");
    let config_id = config["id"].as_str().expect("a config id").to_owned();

    for binding in BINDINGS {
        let mallory = caller(&fleet, 1, binding, MALLORY_KEY).await;
        for op in Op::every(&id, &config_id) {
            let result = mallory.call(&op).await;
            let what = format!("{binding:?} {} on replica B", op.method());
            match op {
                Op::List(_) => {
                    let list = result.unwrap_or_else(|e| panic!("{what}: {e:?}"));
                    assert_eq!(list["tasks"].as_array().map_or(0, Vec::len), 0, "{what}: {list}");
                }
                Op::ExtendedCard(_) => {} // not configured here; not about tasks
                _ => match result {
                    Err(fail) => assert_eq!(fail.reason, "TASK_NOT_FOUND", "{what}: {fail:?}"),
                    Ok(value) => panic!("{what}: {value}"),
                },
            }
        }
    }

    // Alice reaches her task through replica B too, and her cancel is forwarded to A.
    let alice_b = caller(&fleet, 1, client::Binding::HttpJson, ALICE_KEY).await;
    let task: Value = alice_b
        .call(&Op::Get(GetTaskRequest { id: id.clone(), ..Default::default() }))
        .await
        .expect("alice's task via B");
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let canceled =
        alice_b.call(&Op::Cancel(CancelTaskRequest { id, ..Default::default() })).await.expect("canceled");
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELED");

    // The real binary's card declares the scheme.
    let card: Value = reqwest::get(format!("{}/.well-known/agent-card.json", fleet[0].url()))
        .await
        .expect("the card")
        .json()
        .await
        .expect("JSON");
    assert_eq!(card["securitySchemes"]["apiKey"]["apiKeySecurityScheme"]["name"], "X-API-Key");
}
