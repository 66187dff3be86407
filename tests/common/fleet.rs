//! A fleet of real `a2a-server` processes on one Redis (or Redis Cluster): each [`Replica`] is
//! the binary started with `--store URL --redis-prefix P --lease-ms N --replica-id ID`, on a free
//! port, killed on drop. Every fleet of a test has its own key prefix, so fleets never see each
//! other's tasks even on a shared Redis.
//!
//! Streams can be read as raw bytes ([`subscribe_raw`]): the encoded `StreamResponse` of each item
//! exactly as it came off the wire, for tests that demand byte-identical sequences from every
//! replica.
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use a2a_server::proto::a2a_service_client::A2aServiceClient;
use a2a_server::proto::{StreamResponse, SubscribeToTaskRequest};
use bytes::{Buf, BufMut, Bytes};
use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use super::PATIENCE;
use super::process::ServerProcess;

/// The lease the fleet tests run with unless they pass `--lease-ms` themselves: short, so a
/// dead owner is noticed within seconds.
pub const LEASE_MS: u64 = 2000;

/// A key prefix no other fleet in this test run uses.
pub fn unique_prefix() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("a2a-test-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// One `a2a-server` process of a fleet.
pub struct Replica {
    /// Its `--replica-id`.
    pub id: String,
    process: ServerProcess,
    /// Every flag it was started with, for [`Replica::restart`].
    args: Vec<String>,
}

impl Replica {
    /// Starts one replica on `store` under `prefix`. `args` come last; without a `--lease-ms`
    /// among them the replica gets [`LEASE_MS`].
    pub fn start(store: &str, prefix: &str, id: &str, args: &[&str]) -> Self {
        Self::start_at("127.0.0.1:0", store, prefix, id, args)
    }

    /// [`Replica::start`] listening on `listen` (`IP:PORT`): a replica a load balancer names by
    /// its port, which a [`Replica::restart`] keeps.
    pub fn start_at(listen: &str, store: &str, prefix: &str, id: &str, args: &[&str]) -> Self {
        let lease = LEASE_MS.to_string();
        let mut all = vec!["--listen", listen, "--store", store, "--redis-prefix", prefix];
        all.extend(["--replica-id", id]);
        if !args.contains(&"--lease-ms") {
            all.extend(["--lease-ms", &lease]);
        }
        all.extend_from_slice(args);
        let process = ServerProcess::start(&all);
        Self { id: id.to_owned(), process, args: all.into_iter().map(str::to_owned).collect() }
    }

    /// Starts the process again with the same flags (after it exited or was killed): on the
    /// same address when it was started with a port of its own ([`Replica::start_at`]).
    pub fn restart(&mut self) {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        self.process = ServerProcess::start(&args);
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.process.alive()
    }

    /// `IP:PORT` (every binding).
    pub fn addr(&self) -> &str {
        &self.process.addr
    }

    /// `http://IP:PORT`.
    pub fn url(&self) -> String {
        self.process.url()
    }

    /// A new HTTP/2 connection.
    pub async fn channel(&self) -> Channel {
        let endpoint = Channel::from_shared(self.url()).expect("url").connect_timeout(PATIENCE);
        within("connect to a replica", endpoint.connect()).await.expect("connect")
    }

    /// An A2A client on its own connection.
    pub async fn client(&self) -> A2aServiceClient<Channel> {
        A2aServiceClient::new(self.channel().await)
    }

    /// `grpc.health.v1` Check for the whole server (service ""); `None` if the call fails.
    pub async fn health(&self) -> Option<ServingStatus> {
        let mut client = HealthClient::new(self.channel().await);
        let request = HealthCheckRequest { service: String::new() };
        let answer = within("health Check", client.check(request)).await.ok()?;
        ServingStatus::try_from(answer.into_inner().status).ok()
    }

    /// The HTTP status of `GET /readyz`.
    pub async fn readyz(&self) -> u16 {
        let response = within("GET /readyz", reqwest::get(format!("{}/readyz", self.url()))).await;
        response.expect("GET /readyz").status().as_u16()
    }

    /// The Prometheus text at `GET /metrics`.
    pub async fn metrics(&self) -> String {
        let get = async { reqwest::get(format!("{}/metrics", self.url())).await?.text().await };
        within("GET /metrics", get).await.expect("GET /metrics")
    }

    /// The sum of every sample of metric `name` (all label sets); 0 when it has none yet.
    pub async fn metric(&self, name: &str) -> f64 {
        metric_sum(&self.metrics().await, name).unwrap_or(0.0)
    }

    /// SIGKILL: the replica dies on the spot, holding its leases.
    pub fn kill9(&mut self) {
        self.process.kill9();
    }

    /// SIGTERM: the replica drains and exits.
    pub fn terminate(&self) {
        self.process.terminate();
    }

    /// Waits (bounded) for the process to exit; its exit code.
    pub async fn exit_code(&mut self) -> i32 {
        self.process.exit_code().await
    }

    /// What the replica logged so far.
    pub fn stderr(&self) -> String {
        self.process.stderr()
    }
}

/// Replicas on one store, named `a`, `b`, `c`, … after their index.
pub struct Fleet {
    pub replicas: Vec<Replica>,
    /// The key prefix of this fleet.
    pub prefix: String,
}

impl Fleet {
    /// `n` replicas on `store` (`redis://…` or `redis+cluster://…`) under a fresh prefix, each
    /// with `args` (see [`Replica::start`] for the lease).
    pub fn start(n: usize, store: &str, args: &[&str]) -> Self {
        let prefix = unique_prefix();
        let replicas = (0..n)
            .map(|i| {
                let id = format!("{prefix}-{}", (b'a' + i as u8) as char);
                Replica::start(store, &prefix, &id, args)
            })
            .collect();
        Self { replicas, prefix }
    }

    /// The sum of metric `name` over the given replicas.
    pub async fn metric_sum(&self, name: &str, which: &[usize]) -> f64 {
        let mut sum = 0.0;
        for &i in which {
            sum += self.replicas[i].metric(name).await;
        }
        sum
    }
}

impl std::ops::Index<usize> for Fleet {
    type Output = Replica;
    fn index(&self, i: usize) -> &Replica {
        &self.replicas[i]
    }
}

impl std::ops::IndexMut<usize> for Fleet {
    fn index_mut(&mut self, i: usize) -> &mut Replica {
        &mut self.replicas[i]
    }
}

/// The sum of every sample of `name` in Prometheus text, or `None` if it has no sample.
/// `name` matches whole metric names only (`a2a_x` does not match `a2a_x_total`).
pub fn metric_sum(text: &str, name: &str) -> Option<f64> {
    let mut found = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some(rest) = line.strip_prefix(name) else { continue };
        if !(rest.starts_with('{') || rest.starts_with(' ')) {
            continue;
        }
        let value: f64 =
            rest.rsplit(' ').next().and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{line}"));
        *found.get_or_insert(0.0) += value;
    }
    found
}

/// Awaits `future`, failing the test if it takes longer than [`PATIENCE`]: no call may hang.
pub async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("{what} took longer than {PATIENCE:?}"))
}

/// Polls `check` every 20 ms until it holds; fails after `limit`. Returns how long it took.
pub async fn eventually<F, Fut>(what: &str, limit: Duration, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = tokio::time::Instant::now();
    while !check().await {
        assert!(start.elapsed() < limit, "timed out after {limit:?} waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    start.elapsed()
}

/// A codec that sends a prost request and hands back each response message's bytes untouched.
struct RawCodec<T>(std::marker::PhantomData<T>);

struct RawEncoder<T>(std::marker::PhantomData<T>);

struct RawDecoder;

impl<T: Message + Send + 'static> Codec for RawCodec<T> {
    type Encode = T;
    type Decode = Bytes;
    type Encoder = RawEncoder<T>;
    type Decoder = RawDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        RawEncoder(std::marker::PhantomData)
    }

    fn decoder(&mut self) -> Self::Decoder {
        RawDecoder
    }
}

impl<T: Message> Encoder for RawEncoder<T> {
    type Item = T;
    type Error = tonic::Status;

    fn encode(&mut self, item: T, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put_slice(&item.encode_to_vec());
        Ok(())
    }
}

impl Decoder for RawDecoder {
    type Item = Bytes;
    type Error = tonic::Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, tonic::Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// `SubscribeToTask` whose items are the encoded `StreamResponse` bytes as received.
pub async fn subscribe_raw(
    channel: Channel,
    task_id: &str,
) -> Result<tonic::Streaming<Bytes>, tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(channel);
    within("the channel to be ready", grpc.ready())
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let path = "/lf.a2a.v1.A2AService/SubscribeToTask".parse().unwrap();
    let request =
        tonic::Request::new(SubscribeToTaskRequest { id: task_id.to_owned(), ..Default::default() });
    let codec = RawCodec::<SubscribeToTaskRequest>(std::marker::PhantomData);
    let answer = within("SubscribeToTask", grpc.server_streaming(request, path, codec)).await?;
    Ok(answer.into_inner())
}

/// The next raw item of a stream: `Ok(None)` at its end, `Err` when it ends with an error.
pub async fn next_raw(stream: &mut tonic::Streaming<Bytes>) -> Result<Option<Bytes>, tonic::Status> {
    within("the next stream item", stream.message()).await
}

/// Every remaining raw item until the stream ends; the items and how it ended.
pub async fn collect_raw(stream: &mut tonic::Streaming<Bytes>) -> (Vec<Bytes>, Result<(), tonic::Status>) {
    let mut items = Vec::new();
    loop {
        match next_raw(stream).await {
            Ok(Some(item)) => items.push(item),
            Ok(None) => return (items, Ok(())),
            Err(status) => return (items, Err(status)),
        }
    }
}

/// A raw item decoded.
pub fn decode(item: &Bytes) -> StreamResponse {
    StreamResponse::decode(item.clone()).expect("a StreamResponse")
}
