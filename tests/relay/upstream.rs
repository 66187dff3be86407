//! The upstream agents the relay tests front: `tests/interop/upstream/agent_v10.py` (a2a-sdk
//! 1.x) and `agent_v03.py` (a2a-sdk 0.3), each run by its own venv's Python, and a TCP proxy in
//! front of one that can cut every connection through it.
//!
//! The venvs are made by `tests/interop/upstream/venvs.sh` (`.ci/run` runs it before `cargo
//! test`). Without them the tests skip loudly, except under `CI=true`, where they fail.
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a_server::proto::{StreamResponse, Task};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// An upstream's A2A version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V10,
    V03,
}

impl Version {
    fn venv(self) -> &'static str {
        match self {
            Version::V10 => "target/interop-venv",
            Version::V03 => "target/interop-venv-v03",
        }
    }

    fn script(self) -> &'static str {
        match self {
            Version::V10 => "tests/interop/upstream/agent_v10.py",
            Version::V03 => "tests/interop/upstream/agent_v03.py",
        }
    }

    /// The value of `--upstream-version`.
    pub fn flag(self) -> &'static str {
        match self {
            Version::V10 => "1.0",
            Version::V03 => "0.3",
        }
    }
}

/// A running upstream agent, killed on drop.
pub struct UpstreamAgent {
    child: Child,
    pub port: u16,
    pub version: Version,
    http: reqwest::Client,
}

impl UpstreamAgent {
    /// Starts the agent of `version` on a free port; `None` (said loudly) when its venv is
    /// missing outside CI.
    pub fn start(version: Version, args: &[&str]) -> Option<Self> {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let python = root.join(version.venv()).join("bin/python");
        if !python.exists() {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!(
                    "{} is missing, and CI=true: run tests/interop/upstream/venvs.sh first",
                    python.display()
                );
            }
            eprintln!(
                "SKIPPED: {} is missing (run tests/interop/upstream/venvs.sh to run the relay tests)",
                python.display()
            );
            return None;
        }
        let mut child = Command::new(python)
            .arg(root.join(version.script()))
            .args(["--port", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the upstream agent");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(port) = line.strip_prefix("READY ") {
                    let _ = tx.send(port.trim().parse::<u16>().expect("a port"));
                }
            }
        });
        let port = rx.recv_timeout(Duration::from_secs(60)).expect("the upstream agent is ready");
        Some(Self { child, port, version, http: reqwest::Client::new() })
    }

    /// Its card's URL.
    pub fn card_url(&self) -> String {
        format!("http://127.0.0.1:{}/.well-known/agent-card.json", self.port)
    }

    /// Its JSON-RPC endpoint.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    async fn call(&self, method10: &str, method03: &str, params: Value, stream: bool) -> reqwest::Response {
        let (method, version) = match self.version {
            Version::V10 => (method10, "1.0"),
            Version::V03 => (method03, "0.3"),
        };
        let accept = if stream { "text/event-stream" } else { "application/json" };
        self.http
            .post(self.endpoint())
            .header("A2A-Version", version)
            .header("Accept", accept)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
            .send()
            .await
            .expect("the upstream answers")
    }

    /// The upstream's own events for a streaming message of `text`, as v1.0 types.
    pub async fn stream(&self, text: &str) -> Vec<StreamResponse> {
        let message = json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER", "parts": [{"text": text}]});
        let params = match self.version {
            Version::V10 => json!({"message": message}),
            Version::V03 => json!({"message": a2a_server::transport::v03::convert::message_out(&message)}),
        };
        let response = self.call("SendStreamingMessage", "message/stream", params, true).await;
        // The SDKs' SSE ends lines with CRLF: read it with the relay's own decoder.
        let mut decoder = a2a_server::upstream::sse::SseDecoder::new(1 << 20);
        let mut body = response.bytes_stream();
        let mut items = Vec::new();
        while let Some(chunk) = futures::StreamExt::next(&mut body).await {
            for data in decoder.push(&chunk.expect("the upstream's stream")).expect("SSE") {
                let answer: Value = serde_json::from_slice(&data).expect("JSON");
                items.push(self.decode(&answer["result"]));
            }
        }
        items
    }

    /// The upstream's task `id`, read directly.
    pub async fn get_task(&self, id: &str) -> Task {
        let answer: Value =
            self.call("GetTask", "tasks/get", json!({"id": id}), false).await.json().await.unwrap();
        match self.decode(&answer["result"]).payload {
            Some(a2a_server::proto::stream_response::Payload::Task(task)) => task,
            other => panic!("not a task: {other:?} from {answer}"),
        }
    }

    fn decode(&self, result: &Value) -> StreamResponse {
        let result = match self.version {
            Version::V10 if result.get("id").is_some() => json!({"task": result}),
            Version::V10 => result.clone(),
            Version::V03 => a2a_server::transport::v03::convert::result_in(result).expect("a v0.3 result"),
        };
        a2a_server::protojson::decode(&result).unwrap_or_else(|e| panic!("{e}: {result}"))
    }
}

impl Drop for UpstreamAgent {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A TCP proxy to `target` whose connections can all be cut at once.
pub struct CutProxy {
    pub port: u16,
    links: Arc<Mutex<Vec<JoinHandle<()>>>>,
    /// Until when new connections are closed at once (the upstream looks down).
    down_until: Arc<Mutex<Option<std::time::Instant>>>,
    accept: JoinHandle<()>,
}

impl CutProxy {
    pub async fn start(target: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let links: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let down_until: Arc<Mutex<Option<std::time::Instant>>> = Arc::default();
        let (held, down) = (links.clone(), down_until.clone());
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if down.lock().unwrap().is_some_and(|until| std::time::Instant::now() < until) {
                    continue;
                }
                let link = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(("127.0.0.1", target)).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                held.lock().unwrap().push(link);
            }
        });
        Self { port, links, down_until, accept }
    }

    /// Cuts every connection and refuses new ones for `down` (events the upstream makes
    /// meanwhile reach the relay only through its catch-up).
    pub fn cut_for(&self, down: Duration) -> usize {
        *self.down_until.lock().unwrap() = Some(std::time::Instant::now() + down);
        self.cut()
    }

    /// Drops every connection through the proxy (new ones still get through).
    pub fn cut(&self) -> usize {
        let links = std::mem::take(&mut *self.links.lock().unwrap());
        let live = links.iter().filter(|l| !l.is_finished()).count();
        links.iter().for_each(JoinHandle::abort);
        live
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.cut();
        self.accept.abort();
    }
}
