//! # a2a-server
//!
//! A gRPC-first server for the A2A (Agent2Agent) protocol v1.0.
//!
//! Data flows one way: wire → decode → [`core`] → task actor → events → encode → wire.
//!
//! - [`proto`]: the generated `lf.a2a.v1` types and service; they are the model everywhere.
//!   [`protojson`]: their JSON form (ProtoJSON), for the JSON bindings, push bodies and card files.
//! - [`transport`]: the wire bindings (gRPC and grpc-web, JSON-RPC 2.0, HTTP+JSON with SSE) and
//!   the Agent Card, thin shims over the core; `transport/grpc/` is named by the RPCs each file
//!   serves.
//! - [`card`]: building and validating the Agent Card from flags or a file.
//! - [`core`]: the A2A operations, transport-neutral; validates and scopes every call.
//! - [`task`]: the per-task actor (the task's only writer) and the handle that reaches it, its
//!   sequenced event log (the fan-out to subscribers), the registry of live tasks and the task
//!   store.
//! - [`agent`]: the [`AgentExecutor`](agent::AgentExecutor) trait agents implement, and the
//!   built-in agents: `demo`, and `exec`, which turns any program into an agent.
//! - [`push`]: webhook delivery of task events, off the event path, SSRF-guarded.
//! - [`call`]: the caller and its service parameters (`A2A-Version`, `A2A-Extensions`).
//! - [`error`]: [`A2aError`](error::A2aError) and its mapping to every wire.
//! - [`telemetry`]: Prometheus metrics and a tracing span per request; `otel` (feature
//!   `otel`): those spans exported over OTLP.
//! - [`server`]: the one way to start a server (the builder, the routes, graceful drain);
//!   [`config`]: the command line that `main.rs` turns into a builder.
pub mod agent;
pub mod call;
pub mod card;
pub mod config;
pub mod core;
pub mod error;
#[cfg(feature = "otel")]
pub mod otel;
pub mod proto;
pub mod protojson;
pub mod push;
pub mod server;
pub mod task;
pub mod telemetry;
pub mod transport;
