//! Command-line flags; each also reads an `A2A_*` environment variable.
//!
//! The flags themselves are here; [`settings`] turns them into the library's settings (the one
//! place a flag becomes a `*Settings` field), and `values` lets clap parse the library's own
//! enums without the library knowing about clap.
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, ValueEnum};

use crate::card::Binding;
use crate::push::PushEvents;
use crate::server::ClientAuth;
use crate::ui::UiMode;

mod card;
mod exec;
mod redis;
pub mod settings;
mod upstream;
mod values;

pub use card::CardFlags;
pub use exec::ExecFlags;
pub use redis::RedisFlags;
pub use upstream::{BindingFlag, UpstreamFlags, VersionFlag};

/// a2a-server: hosts an agent behind the A2A v1.0 protocol (gRPC first).
#[derive(Debug, Clone, Parser)]
#[command(name = "a2a-server", version, about)]
pub struct Config {
    /// Address to listen on.
    #[arg(long, env = "A2A_LISTEN", default_value = "0.0.0.0:50051")]
    pub listen: SocketAddr,

    /// The agent to host.
    #[arg(long, env = "A2A_AGENT", value_enum, default_value_t = AgentKind::Demo)]
    pub agent: AgentKind,

    /// Log output format.
    #[arg(long, env = "A2A_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Export request spans to this OTLP/gRPC collector (e.g. `http://collector:4317`), each
    /// parented on the client's `traceparent`. Needs a build with `--features otel`.
    #[arg(long, env = "A2A_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,

    /// Log filter, e.g. `info` or `a2a_server=debug,info`.
    #[arg(long, env = "A2A_LOG_LEVEL", default_value = "info")]
    pub log_level: String,

    /// Finished tasks kept readable (GetTask, ListTasks); the oldest go first.
    #[arg(long, env = "A2A_TASK_RETENTION_COUNT", default_value_t = 10_000)]
    pub task_retention_count: usize,

    /// Seconds a finished task stays readable.
    #[arg(long, env = "A2A_TASK_RETENTION_SECS", default_value_t = 3600)]
    pub task_retention_secs: u64,

    /// Encoded bytes all finished tasks together may hold (with their events, in Redis); the
    /// oldest finished go first, so retention bounds memory however large tasks are.
    #[arg(long, env = "A2A_TASK_RETENTION_BYTES", default_value_t = 256 * 1024 * 1024)]
    pub task_retention_bytes: u64,

    /// Events each live task keeps at most so that subscribers which fall behind can catch up;
    /// a backstop: `--event-log-bytes` is the bound that normally holds.
    #[arg(long, env = "A2A_EVENT_LOG_CAPACITY", default_value_t = crate::core::DEFAULT_EVENT_LOG_CAPACITY as u64,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub event_log_capacity: u64,

    /// Memory each live task's event log may hold for catch-up (each event counted as its
    /// struct and about twice its encoded size: some 550 bytes plus twice the encoding).
    #[arg(long, env = "A2A_EVENT_LOG_BYTES", default_value_t = crate::core::DEFAULT_EVENT_LOG_BYTES as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub event_log_bytes: u64,

    /// Where task state lives: `memory` (this process alone), or a Redis that several
    /// replicas share as one fleet: `redis://HOST:PORT/DB`, `rediss://…` (TLS),
    /// `redis+cluster://H1:P1,H2:P2,…` (Redis Cluster).
    #[arg(long, env = "A2A_STORE", default_value = "memory")]
    pub store: String,

    /// The relay agent's upstream (`--upstream…`, with `--agent a2a`).
    #[command(flatten)]
    pub upstream: UpstreamFlags,

    /// The Redis store's own settings (`--redis-…`).
    #[command(flatten)]
    pub redis: RedisFlags,

    /// Milliseconds a replica's ownership of a running task lasts unless renewed (a third of
    /// it, over and over); a replica that dies is replaced within about this much.
    #[arg(long, env = "A2A_LEASE_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(300..=600_000))]
    pub lease_ms: u64,

    /// Events a streaming task's stored Task may lag behind its event stream in a fleet while
    /// only artifacts come (0: the whole Task with every write); readers replay the rest. Set 0
    /// while a rolling upgrade still runs replicas older than this setting: they read the Task
    /// as it is stored.
    #[arg(long, env = "A2A_FLEET_TASK_LAG", default_value_t = crate::fleet::TASK_LAG as u64,
          value_parser = clap::value_parser!(u64).range(0..=1024))]
    pub fleet_task_lag: u64,

    /// This replica's id in the fleet (default: a new random one at every start).
    #[arg(long, env = "A2A_REPLICA_ID")]
    pub replica_id: Option<String>,

    /// Seconds a task waiting for input (nothing running, nobody subscribed) keeps its actor
    /// before hibernating to the store (revived by the next call that needs it); 0: never.
    #[arg(long, env = "A2A_TASK_IDLE_SECS", default_value_t = 60)]
    pub task_idle_secs: u64,

    /// The longest a long-polling GetTask (`currentGeneration`) is held before it answers
    /// with the task as it is; 0: answer at once.
    #[arg(long, env = "A2A_MAX_LONG_POLL_SECS", default_value_t = 30)]
    pub max_long_poll_secs: u64,

    /// Seconds a SubscribeToTask or SendStreamingMessage stream may last before the server
    /// ends it with a resumable close (gRPC UNAVAILABLE / an SSE error event naming the last
    /// generation sent), so that clients resume on any replica; 0: no limit.
    #[arg(long, env = "A2A_MAX_STREAM_SECS", default_value_t = 0)]
    pub max_stream_secs: u64,

    /// Seconds after which the server sends an HTTP/2 GOAWAY on a connection (streams in
    /// flight finish; new calls go to a new connection, which a load balancer may place on
    /// another replica); 0: never.
    #[arg(long, env = "A2A_MAX_CONNECTION_AGE", default_value_t = 0)]
    pub max_connection_age: u64,

    /// TLS: the server's certificate chain (PEM, its own certificate first). With --tls-key,
    /// every listener speaks TLS, offering ALPN h2 and http/1.1; the files are reloaded when
    /// they change and on SIGHUP.
    #[arg(long, env = "A2A_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// TLS: the private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "A2A_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// TLS: CA certificates (PEM) that client certificates must chain to (mutual TLS); an
    /// auth file's `[mtls]` table makes them credentials.
    #[arg(long, env = "A2A_TLS_CLIENT_CA", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,

    /// TLS: whether clients must present a certificate (with --tls-client-ca).
    #[arg(long, env = "A2A_TLS_CLIENT_AUTH", value_enum, default_value_t = ClientAuth::Required)]
    pub tls_client_auth: ClientAuth,

    /// TLS: seconds between checks of the certificate, key and CA files for changes; 0: reload
    /// only on SIGHUP.
    #[arg(long, env = "A2A_TLS_RELOAD_SECS", default_value_t = 5)]
    pub tls_reload_secs: u64,

    /// TLS: seconds a client has to complete the handshake.
    #[arg(long, env = "A2A_TLS_HANDSHAKE_TIMEOUT_SECS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=300))]
    pub tls_handshake_timeout_secs: u64,

    /// Connections open at once on each listener; more wait in the listen backlog until one
    /// closes. Default: the open-file limit (RLIMIT_NOFILE) less a quarter of it (at least 32,
    /// at most 1024 descriptors kept for webhooks, the store, exec agents, files).
    #[arg(long, env = "A2A_MAX_CONNECTIONS", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: Option<u64>,

    /// Seconds a connection may stay open with no request in flight (including one that never
    /// sends a byte); HTTP/2 gets a GOAWAY. Keep it above a load balancer's own idle timeout.
    /// Open streams are requests in flight. 0: never closed for idleness.
    #[arg(long, env = "A2A_IDLE_CONNECTION_SECS", default_value_t = 120)]
    pub idle_connection_secs: u64,

    /// Seconds an answer may hold unsent bytes without the client reading any: then its
    /// HTTP/2 stream is reset (HTTP/1.1: its connection closed) and what it held is freed. A
    /// connection left with nothing in flight is closed too. 0: never.
    #[arg(long, env = "A2A_SEND_TIMEOUT_SECS", default_value_t = 30)]
    pub send_timeout_secs: u64,

    /// Bytes of answers encoded but not yet read that one connection may hold (a client that
    /// asks and never reads); an answer that does not fit is refused with RESOURCE_EXHAUSTED
    /// and a retry after the send timeout. Keep it well above --max-task-bytes: a task larger
    /// than it can never be answered whole.
    #[arg(long, env = "A2A_MAX_UNSENT_BYTES_PER_CONNECTION", default_value_t = 32 << 20,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1 << 20..))]
    pub max_unsent_bytes_per_connection: usize,

    /// The same for the whole server, every connection together.
    #[arg(long, env = "A2A_MAX_UNSENT_BYTES", default_value_t = 64 << 20,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1 << 20..))]
    pub max_unsent_bytes: usize,

    /// Seconds an HTTP/1.1 client has to send a request's headers, from their first byte (a
    /// slowloris is cut then). A kept-alive connection waiting for its next request is under
    /// --idle-connection-secs instead.
    #[arg(long, env = "A2A_HEADER_READ_TIMEOUT_SECS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub header_read_timeout_secs: u64,

    /// Seconds a client has to send a request's body, from its headers on; a body still
    /// incomplete then fails the request. 0: no limit.
    #[arg(long, env = "A2A_BODY_READ_TIMEOUT_SECS", default_value_t = 60)]
    pub body_read_timeout_secs: u64,

    /// HTTP/2 streams (calls) a client may have open at once on one connection; a load
    /// balancer opens another connection beyond it.
    #[arg(long, env = "A2A_HTTP2_MAX_CONCURRENT_STREAMS", default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub http2_max_concurrent_streams: u32,

    /// Seconds between HTTP/2 PINGs on a quiet connection, to find dead peers; 0: none.
    #[arg(long, env = "A2A_HTTP2_KEEPALIVE_SECS", default_value_t = 30)]
    pub http2_keepalive_secs: u64,

    /// Seconds an HTTP/2 PING may go unanswered before the connection is closed.
    #[arg(long, env = "A2A_HTTP2_KEEPALIVE_TIMEOUT_SECS", default_value_t = 20,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub http2_keepalive_timeout_secs: u64,

    /// Milliseconds the accept loop pauses after an error such as EMFILE (out of file
    /// descriptors) instead of retrying at once.
    #[arg(long, env = "A2A_ACCEPT_BACKOFF_MS", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub accept_backoff_ms: u64,

    /// Serve the HTTP side (JSON-RPC, HTTP+JSON, SSE, the Agent Card, probes) on this address
    /// instead of sharing --listen.
    #[arg(long, env = "A2A_HTTP_LISTEN")]
    pub http_listen: Option<SocketAddr>,

    /// Base URL of the HTTP bindings as clients reach them, for the Agent Card (behind a load
    /// balancer the bind address is not the public one). Default: http://localhost:PORT.
    #[arg(long, env = "A2A_PUBLIC_URL")]
    pub public_url: Option<String>,

    /// `host:port` of the gRPC binding as clients reach it, for the Agent Card.
    /// Default: the host of --public-url (or localhost) and the --listen port.
    #[arg(long, env = "A2A_PUBLIC_GRPC")]
    pub public_grpc: Option<String>,

    /// Which bindings the Agent Card lists in `supportedInterfaces`, in order (the first is the
    /// preferred one), comma-separated; the v0.3 card's `url`/`preferredTransport`/
    /// `additionalInterfaces` follow it. Every binding is served either way. `jsonrpc,http-json`
    /// for clients that refuse a card with a non-HTTP URL (Google ADK's `RemoteA2aAgent`).
    #[arg(long, env = "A2A_CARD_INTERFACES", value_enum, value_delimiter = ',',
          default_values_t = Binding::DEFAULT)]
    pub card_interfaces: Vec<Binding>,

    /// Sign the Agent Card with this PEM private key (EC P-256/P-384, Ed25519 or RSA): a JWS
    /// per key in `signatures` (spec §8.4) on every card served, the public keys at
    /// `/.well-known/jwks.json`. Repeatable: every key signs (for rotation).
    #[arg(long = "card-signing-key", env = "A2A_CARD_SIGNING_KEY", value_delimiter = ',')]
    pub card_signing_key: Vec<PathBuf>,

    /// An Agent Card file (ProtoJSON `AgentCard`) to start from; the flags below override it,
    /// and the server always declares its own interfaces (its `supportedInterfaces` are
    /// replaced: see --card-interfaces) and capabilities.
    #[arg(long, env = "A2A_CARD")]
    pub card: Option<PathBuf>,

    /// An extended Agent Card file (ProtoJSON `AgentCard`), served by GetExtendedAgentCard to
    /// authenticated callers and declared by `capabilities.extendedAgentCard`; completed with
    /// the server's interfaces, capabilities and security schemes like the public card.
    #[arg(long, env = "A2A_EXTENDED_CARD")]
    pub extended_card: Option<PathBuf>,

    /// Turn authentication on with this auth file (TOML: API keys, JWT issuers; see the
    /// README): every call needs a credential, and each caller sees only its own tasks.
    #[arg(long, env = "A2A_AUTH")]
    pub auth: Option<PathBuf>,

    /// The card's own fields (`--card-name`, `--card-skill`, …).
    #[command(flatten)]
    pub card_fields: CardFlags,

    /// Allow browsers from this origin (repeatable; `*` for any). CORS is off without it.
    #[arg(long = "cors-origin", env = "A2A_CORS_ORIGINS", value_delimiter = ',')]
    pub cors_origins: Vec<String>,

    /// Serve the dashboard at `/ui`: `auto` only when the HTTP listener is on loopback.
    #[arg(long, env = "A2A_UI", value_enum, default_value_t = UiMode::Auto)]
    pub ui: UiMode,

    /// Enable push notifications (webhooks); the card then declares them.
    #[arg(long, env = "A2A_PUSH")]
    pub push: bool,

    /// Serve A2A v0.3 clients beside v1.0 (their JSON-RPC method names, and the v0.3 fields of
    /// the Agent Card); `off` for a v1.0-only deployment.
    #[arg(long, env = "A2A_V03", value_enum, default_value_t = Switch::On)]
    pub v03: Switch,

    /// Which task events are pushed.
    #[arg(long, env = "A2A_PUSH_EVENTS", value_enum, default_value_t = PushEvents::All)]
    pub push_events: PushEvents,

    /// Let webhooks reach private, loopback and link-local addresses (local setups, tests).
    #[arg(long, env = "A2A_PUSH_ALLOW_PRIVATE")]
    pub push_allow_private: bool,

    /// Allow webhooks to this CIDR, address or host name although it is not public (repeatable).
    #[arg(long = "push-allow", env = "A2A_PUSH_ALLOW", value_delimiter = ',')]
    pub push_allow: Vec<String>,

    /// Seconds one webhook POST may take.
    #[arg(long, env = "A2A_PUSH_TIMEOUT_SECS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=300))]
    pub push_timeout_secs: u64,

    /// Attempts per event before a delivery is given up.
    #[arg(long, env = "A2A_PUSH_MAX_ATTEMPTS", default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub push_max_attempts: u32,

    /// Seconds after the first attempt after which a delivery is given up.
    #[arg(long, env = "A2A_PUSH_MAX_AGE_SECS", default_value_t = 600)]
    pub push_max_age_secs: u64,

    /// Events queued per webhook before older artifact chunks are shed.
    #[arg(long, env = "A2A_PUSH_QUEUE_CAPACITY", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub push_queue_capacity: u64,

    /// Bytes of events queued for (or in delivery to) webhooks over every task before new ones
    /// are dropped
    /// (counted in `a2a_push_dropped_total`).
    #[arg(long, env = "A2A_PUSH_MAX_QUEUED_BYTES", default_value_t = 64 * 1024 * 1024,
          value_parser = clap::value_parser!(u64).range(1024..))]
    pub push_max_queued_bytes: u64,

    /// Webhook requests in flight at once over every task; also the most outbound webhook
    /// sockets open (no idle connections are kept).
    #[arg(long, env = "A2A_PUSH_MAX_CONCURRENCY", default_value_t = 64,
          value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub push_max_concurrency: u64,

    /// Push notification configs per task.
    #[arg(long, env = "A2A_MAX_PUSH_CONFIGS_PER_TASK", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub max_push_configs_per_task: u64,

    /// Push notification configs per principal, over all its tasks and tenants.
    #[arg(long, env = "A2A_MAX_PUSH_CONFIGS_PER_PRINCIPAL", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub max_push_configs_per_principal: u64,

    /// Sign every webhook POST with this PEM private key (EC P-256/P-384, Ed25519 or RSA) and
    /// publish its public key at `/.well-known/jwks.json`. Repeatable: the first key signs,
    /// all are published (for rotation).
    #[arg(long = "push-signing-key", env = "A2A_PUSH_SIGNING_KEY", value_delimiter = ',')]
    pub push_signing_key: Vec<PathBuf>,

    /// Parts one message may have; more is refused (PAYLOAD_TOO_LARGE) before it is stored.
    /// 0: no limit.
    #[arg(long, env = "A2A_MAX_PARTS", default_value_t = 1_000)]
    pub max_parts: usize,

    /// JSON values the structured data of one request may hold (data parts and metadata,
    /// every value at every depth): more is refused (PAYLOAD_TOO_LARGE), by the JSON bindings
    /// while parsing, before each value costs the ~1 KB that decoding ProtoJSON takes. 0: no
    /// limit.
    #[arg(long, env = "A2A_MAX_STRUCT_VALUES", default_value_t = 20_000)]
    pub max_struct_values: usize,

    /// Bytes one task may hold in history and artifacts (encoded size, plus what each message,
    /// artifact and part costs in memory): a message past it is refused, an agent's output
    /// past it fails the task. 0: no limit.
    #[arg(long, env = "A2A_MAX_TASK_BYTES", default_value_t = 8 * 1024 * 1024)]
    pub max_task_bytes: usize,

    /// Messages one task's history may hold: a message past it is refused, an agent's status
    /// message past it fails the task. 0: no limit.
    #[arg(long, env = "A2A_MAX_HISTORY", default_value_t = 1_000)]
    pub max_history: usize,

    /// Bytes of tasks (encoded) in one ListTasks page: the page ends before the task that
    /// would pass it, and `nextPageToken` goes on from there (a page holds at least one task).
    /// 4 MiB keeps a page under gRPC clients' default message limit.
    #[arg(long, env = "A2A_MAX_LIST_PAGE_BYTES", default_value_t = 4 << 20,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1024..))]
    pub max_list_page_bytes: usize,

    /// Answer a SendMessage whose message (same `messageId`, same content) its caller sent
    /// already with the first call's outcome, so retries run nothing; `off` runs every message
    /// (and saves a store round trip per call). The conformance kit resends identical messages
    /// to make new tasks: run it with `off`.
    #[arg(long, env = "A2A_DEDUPE_MESSAGES", value_enum, default_value_t = Switch::On)]
    pub dedupe_messages: Switch,

    /// Tasks not yet terminal with an actor (waiting for input included; hibernated ones
    /// count against --max-parked-tasks) this server holds; a new task past it is refused
    /// (QUOTA_EXCEEDED, Retry-After 1). In a fleet, per replica. 0: no limit.
    #[arg(long, env = "A2A_MAX_LIVE_TASKS", default_value_t = 10_000)]
    pub max_live_tasks: usize,

    /// The same, per principal. 0: no limit.
    #[arg(long, env = "A2A_MAX_LIVE_TASKS_PER_PRINCIPAL", default_value_t = 1_000)]
    pub max_live_tasks_per_principal: usize,

    /// Seconds a task may wait for input or auth (INPUT_REQUIRED, AUTH_REQUIRED), live or
    /// hibernated, before it is canceled with a status message saying why. 0: for ever.
    #[arg(long, env = "A2A_INPUT_TIMEOUT_SECS", default_value_t = crate::core::DEFAULT_INPUT_TIMEOUT_SECS)]
    pub input_timeout_secs: u64,

    /// Hibernated tasks waiting for input (in a fleet, of the whole fleet); while they are at
    /// it, new tasks are refused (QUOTA_EXCEEDED, Retry-After: until the first expires). 0: no limit.
    #[arg(long, env = "A2A_MAX_PARKED_TASKS", default_value_t = crate::core::DEFAULT_MAX_PARKED_TASKS)]
    pub max_parked_tasks: usize,

    /// The same, per principal. 0: no limit.
    #[arg(long, env = "A2A_MAX_PARKED_TASKS_PER_PRINCIPAL",
          default_value_t = crate::core::DEFAULT_MAX_PARKED_TASKS_PER_PRINCIPAL)]
    pub max_parked_tasks_per_principal: usize,

    /// Open streams (SubscribeToTask, SendStreamingMessage) following one task. 0: no limit.
    #[arg(long, env = "A2A_MAX_SUBSCRIPTIONS_PER_TASK", default_value_t = 1_000)]
    pub max_subscriptions_per_task: usize,

    /// Open streams of one principal. 0: no limit.
    #[arg(long, env = "A2A_MAX_SUBSCRIPTIONS_PER_PRINCIPAL", default_value_t = 10_000)]
    pub max_subscriptions_per_principal: usize,

    /// Calls per second per principal; past it a call is refused (RATE_LIMITED, HTTP 429 with
    /// Retry-After). Without --auth every caller is one principal: this is the server's rate.
    /// 0: no limit.
    #[arg(long, env = "A2A_MAX_REQUESTS_PER_SEC", default_value_t = 0)]
    pub max_requests_per_sec: u32,

    /// Calls a principal may make at once before --max-requests-per-sec applies; 0: one
    /// second's worth.
    #[arg(long, env = "A2A_MAX_REQUESTS_BURST", default_value_t = 0)]
    pub max_requests_burst: u32,

    /// Seconds in-flight calls get to finish after SIGTERM before running tasks are cancelled.
    #[arg(long, env = "A2A_DRAIN_TIMEOUT_SECS", default_value_t = 30)]
    pub drain_timeout_secs: u64,

    /// Milliseconds the server keeps accepting connections after SIGTERM turned health and
    /// readiness NOT_SERVING, for load balancers that probe them (calls meanwhile are served).
    #[arg(long, env = "A2A_DRAIN_DELAY_MS", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub drain_delay_ms: u64,

    /// Milliseconds a connection with nothing in flight stays open once the server drains;
    /// HTTP/1.1 answers meanwhile say `Connection: close` (HTTP/2 gets a GOAWAY at once), so a
    /// load balancer about to reuse a kept-alive connection still gets its answer.
    #[arg(long, env = "A2A_DRAIN_KEEPALIVE_GRACE_MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub drain_keepalive_grace_ms: u64,

    /// The largest request a client may send, in bytes, on every binding: a gRPC (or grpc-web)
    /// message, a JSON-RPC or HTTP+JSON body. Larger ones are refused with PAYLOAD_TOO_LARGE.
    #[arg(long, env = "A2A_MAX_REQUEST_BYTES", default_value_t = crate::transport::request_size::DEFAULT_MAX_REQUEST_BYTES,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1024..=1 << 30))]
    pub max_request_bytes: usize,

    /// Seconds between keep-alive comments on idle SSE streams.
    #[arg(long, env = "A2A_SSE_KEEP_ALIVE_SECS", default_value_t = 15,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub sse_keep_alive_secs: u64,

    /// The exec agent's own settings (`--exec-…`).
    #[command(flatten)]
    pub exec: ExecFlags,

    /// exec agent: the command run for each task, after `--`.
    #[arg(last = true, value_name = "CMD [ARGS]")]
    pub command: Vec<String>,
}

/// Built-in agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AgentKind {
    /// Deterministic demo behaviours (see the README).
    Demo,
    /// Runs the command after `--` for each task (see the README).
    Exec,
    /// Relays each task to an upstream A2A agent, v1.0 or v0.3 (`--upstream URL`).
    A2a,
}

/// A feature switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Switch {
    /// Turned on.
    On,
    /// Turned off.
    Off,
}

/// Log formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

#[cfg(test)]
mod tests;
