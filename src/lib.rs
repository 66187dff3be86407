//! # a2a-server
//!
//! A gRPC-first server for the A2A (Agent2Agent) protocol v1.0, with the `generation` fields of
//! the v1.1 line (a2aproject/A2A `dev-1.1`) and a resume extension for task streams
//! (`docs/extensions/resume.md`).
//!
//! Data flows one way: wire → decode → [`core`] → task actor → events → encode → wire. A
//! binding never reaches into an actor; the core never sees HTTP, tonic or a store's engine.
//!
//! ## The layout, from the wire in
//! - [`server`]: the one way to start a server ([`server::Server`], a builder): the routes of
//!   every binding on one port (`server/router.rs`), graceful drain (`server/drain.rs`), and
//!   how answers go out (`server/answer.rs`): in pieces, their unsent bytes under a budget per
//!   connection and per server (`send_budget.rs`), cut when a client stops reading
//!   (`send_watch.rs`).
//!   [`config`]: the command line that `main.rs` turns into a builder.
//! - [`transport`]: the wire bindings, thin shims over the core: `transport/grpc/` (named by
//!   the RPCs each file serves; also grpc-web), `jsonrpc.rs`, `rest.rs` (HTTP+JSON), `sse.rs`,
//!   the Agent Card (`card.rs`), `http.rs`, what the JSON bindings share, and
//!   `extensions.rs`, the `A2A-Extensions` echo every binding's responses carry.
//! - [`proto`]: the generated `lf.a2a.v1` types and service; they are the model everywhere.
//!   [`protojson`]: their JSON form (ProtoJSON), for the JSON bindings, push bodies and card files.
//!   [`proto_v03`]: the A2A v0.3 types (`a2a.v1`), used only by the v0.3 shim
//!   (`transport/v03/`), which translates v0.3 calls to v1.0 at the edge.
//! - [`auth`]: who is calling: API keys, JWTs and client certificates (`--auth FILE`) checked
//!   once per request in a layer in front of every binding; the outcome travels in the
//!   request's extensions. Principals are namespaced by credential kind and issuer
//!   (`auth/principal.rs`).
//! - [`call`]: the caller and its service parameters (`A2A-Version`, `A2A-Extensions`, the
//!   resume cursor), and which JSON form it gets (with `generation` or exactly v1.0's).
//! - [`core`]: the A2A operations, transport-neutral, one file per concept (`send.rs`,
//!   `stream.rs`, `tasks.rs`, `push_config.rs`, `validate.rs`); validates and scopes every call.
//!   `idempotent.rs` (with `fingerprint.rs`) answers a retried `messageId` with its first
//!   outcome instead of running it again; `inline_webhook/` registers a webhook a new
//!   task's message carries (before its claim), and forgets it when no task came to be.
//! - [`task`]: the per-task actor (`actor/`, the task's only writer; `actor/turns.rs`
//!   answers its callers; `actor/writes.rs` its writes to the store, and in a fleet the
//!   answers and events that wait for them, kept in `journal.rs`), the pure rules that apply
//!   an agent's event to a Task (`rules/`),
//!   the handle that reaches an actor (`handle.rs`) through its command channel
//!   (`mailbox.rs`), its sequenced event log (`log/`, the fan-out to subscribers), the
//!   registry of live tasks, the task metrics, and the task store (`store/`: memory, Redis).
//! - [`fleet`]: several replicas serving as one on Redis, behind the task layer's
//!   [`task::fleet::Fleet`] trait: leases and the sweep for dead owners (`lease.rs`), one
//!   follower per task per replica (`mirror.rs`), commands forwarded to a task's owner
//!   (`forward.rs`, `mail.rs`), and the reader of the durable push outbox (`outbox.rs`). The
//!   design and its failure behaviour: docs/FLEET.md.
//! - [`agent`]: the [`AgentExecutor`](agent::AgentExecutor) trait agents implement, and the
//!   built-in agents: `demo`; `exec`, which turns any program into an agent; and `relay`
//!   (`--agent a2a`), which makes each task one task of an upstream A2A agent (docs/RELAY.md).
//!   [`upstream`]: the client side of A2A the relay calls that agent with: its card (either
//!   version), JSON-RPC v1.0 and v0.3 with SSE, and gRPC, all answering in the v1.0 types.
//! - [`push`]: webhook delivery of task events, off the event path, SSRF-guarded, bounded in
//!   total (requests in flight, queued bytes) and optionally signed (a JWT per POST, the keys
//!   at `/.well-known/jwks.json`); it hears of events as the task layer's
//!   [`task::EventObserver`] or, in a fleet on one Redis node or Sentinels, from the fleet's
//!   durable outbox (`push/ticket.rs`: an outbox entry is acknowledged once every webhook is done).
//! - [`card`]: building and validating the Agent Card from flags or a file, listing the bindings
//!   `--card-interfaces` names, and signing it (`card/signing.rs`, `--card-signing-key`).
//!   [`jose`]: the JWS keys that sign webhooks and the card (one JWKS), and RFC 8785 canonical
//!   JSON (`jose/jcs.rs`).
//! - [`ui`]: the `/ui` dashboard, HTML, CSS and JavaScript modules compiled in (`ui/assets/`).
//! - [`error`]: [`A2aError`](error::A2aError) and its mapping to every wire, in one place.
//! - [`allocator`]: mimalloc as `main.rs` installs it, without the aligned calls where the
//!   plain ones already align.
//! - [`telemetry`]: Prometheus metrics and a tracing span per request; `otel` (feature
//!   `otel`): those spans exported over OTLP.
//! - `fuzzing` (feature `fuzzing`, hidden): thin wrappers through which the cargo-fuzz
//!   targets in `fuzz/` reach the decoders and checks that client input meets
//!   (docs/FUZZING.md).
//!
//! Modules depend downwards only, with two argued exceptions: `agent` and `task` know each
//! other, because an agent's event sink *is* the sending end of its task actor's command
//! channel (a channel of its own per task would cost memory on every idle task); and
//! `upstream` (under the relay agent) reads v0.3 JSON with the v0.3 shim's `convert`, so one
//! place knows how the versions differ, in both directions.
//!
//! ## Where to change X
//! - **Add an RPC**: the proto (`proto/lf/a2a/v1/a2a.proto`), then its operation in `core/`
//!   (a file per concept), then each binding: `transport/grpc/generated.rs` (or
//!   `encode_once.rs` for a hot path), `transport/operation.rs` (the JSON method and route
//!   table), and a scenario in `tests/equivalence.rs`, which runs it on every binding.
//! - **Add a binding**: a module in `transport/` that decodes into the generated request types
//!   plus a [`call::CallContext`], calls the [`core::Core`], and maps [`error::A2aError`] with
//!   the functions in `error/mod.rs`; mount it in `server/router.rs`.
//! - **Add an agent**: implement [`agent::AgentExecutor`] and start it with
//!   [`server::Server::new`] (see `examples/shout.rs`); for a built-in one, a variant of
//!   `AgentKind` in `config/mod.rs`.
//! - **Add a metric**: beside the code that updates it — `task/metrics.rs` for task
//!   lifecycles, `telemetry.rs` for requests, the push stats in `push/` — registered once, not
//!   looked up per call; gauges read from the core at scrape time go in the `/metrics`
//!   handler (`server/router.rs`).
//! - **Add a credential kind**: a file in `auth/` that turns request headers into an
//!   [`call::Identity`], a table in the auth file ([`auth::AuthFile`]), its scheme in
//!   `Authenticator::declare` (the card); the bindings and the core need no change.
//! - **Change what the card lists or how it is signed**: `card/mod.rs` (`Binding`, the
//!   interfaces of `--card-interfaces`), `transport/v03/card.rs` (the v0.3 forms' order),
//!   `card/signing.rs` (the JWS header; every form is signed once at start-up, in
//!   `server/mod.rs` and `transport/card.rs`); prove it with `tests/card_interfaces.rs`,
//!   `tests/card_signing.rs` and `tests/interop/card_signature_check.py` (Python's JCS and JWS).
//! - **Change what a principal is** (`key:alice`, `jwt:<issuer>#alice`, `mtls:alice`, or a
//!   table's explicit `namespace`): `auth/principal.rs`; every store, quota and rate limit
//!   keys on the whole string, and the Redis keys percent-encode it.
//! - **Change what a fleet promises under faults** (an answer means stored, an event shown
//!   means stored, an outage is not a death; docs/FLEET.md): the actor's side is
//!   `task/journal.rs` and `task/actor/writes.rs`, the leases and the sweep `fleet/lease.rs`,
//!   what may be revived where `task/registry.rs`; prove a change with `tests/fleet_faults.rs`.
//! - **Change what a call costs Redis** (docs/FLEET.md, "Write path cost"): the owner's
//!   scripts in `task/store/redis/scripts.rs` (`WRITE`, fenced), the script-free write of a
//!   task finished by its first write `task/store/redis/born_finished.rs` (chosen in
//!   `fleet/mod.rs` `append`; on a single node batched by `task/store/redis/group_commit.rs`,
//!   its batch and in-flight bounds named there), the SendMessage claim
//!   `task/store/redis/sent.rs` (pipelined with the claims of other calls by
//!   `task/store/redis/pipelined.rs`; both batch through `task/store/redis/batcher.rs`),
//!   retention's note and background evictor `task/store/redis/retention/`, a streaming
//!   Task stored some events behind (how far: `--fleet-task-lag`, `fleet/mod.rs` `TASK_LAG`,
//!   counted by `task/journal.rs`) and the readers that replay the rest
//!   `task/store/redis/snapshot.rs` (with `task/rules/` `replay`); measure with
//!   `a2a-bench --fleet 1` (docs/BENCHMARKS.md) and prove with `tests/store.rs` and
//!   `tests/fleet_faults.rs`.
//! - **Spread the fleet over a Redis Cluster**: which keys are split into pieces and how a
//!   piece's hash tag is chosen, `task/store/redis/keys.rs` ("Shards"); ListTasks' merge of the
//!   pieces `task/store/redis/list.rs`; the fleet-wide evictor `task/store/redis/retention/`;
//!   prove balance with `tests/store/cluster.rs`, measure with `a2a-bench --redis-cluster`.
//! - **Change how the fleet survives losing Redis itself**: the primary's connection, how it
//!   follows the Sentinels and when it is dropped, `task/store/redis/link.rs`; replicated
//!   acknowledgements (`--redis-wait-replicas`, a group-commit `WAIT`) `task/store/redis/acks.rs`,
//!   called from every write an answer or event depends on (`Redis::write`, `replicated`); the
//!   `--store` URL forms `task/store/url.rs`. Prove it with `tests/store/replicated.rs` and
//!   fault (e) of `tests/fleet_faults.rs` (`tests/faults/failover.rs`); docs/FLEET.md, "Durability".
//!   Redis out of memory (a write refused at its `maxmemory`) wakes the evictor to make room:
//!   `task/store/redis/full.rs`, proven by `tests/redis_full.rs`.
//! - **Change how webhooks survive their owner**: the outbox entries the `WRITE` script adds and
//!   their reads `task/store/redis/outbox.rs`, the leader that delivers them `fleet/outbox.rs`,
//!   the acknowledgement of a delivered entry `push/ticket.rs`; prove it with
//!   `tests/push_outbox.rs`.
//! - **Bound what a client that does not read can pin**: `server/send_budget.rs` (the
//!   budgets and the refusal in each binding's form) and `server/send_watch.rs` (the send
//!   timeout); proved by `tests/attacks/memory.rs` against the release build.
//! - **Change how deep a client's structured data may nest**: `core/validate/nesting.rs`
//!   (`MAX_NESTING`, derived from the deepest wrapper a value travels in; its test builds each).
//! - **Change how waiting tasks expire or are counted** (`--input-timeout-secs`,
//!   `--max-parked-tasks`): the actor's timer `task/actor/expiry.rs`, the parked ledger
//!   `task/parked.rs` (in Redis `task/store/redis/parked.rs`), the sweep of hibernated tasks
//!   `task/sweep.rs`; prove it with `tests/parked.rs` and `tests/fleet_parked.rs`.
//! - **Change how a webhook body is written for a protocol version**: a push config records the
//!   version of the call that registered it ([`call::ProtocolVersion`], stored beside the config
//!   as [`task::store::PushRegistration`]); delivery writes bodies with the
//!   [`push::body::WebhookEncoder`] of that version: v1.0's in `push/body.rs`, v0.3's (the whole
//!   v0.3 Task) in `transport/v03/push.rs`, plugged in by the server builder. Prove it with
//!   `tests/push_v03.rs` and `tests/interop/v03/webhook.py` (a2a-sdk 0.3's own model).
//! - **Change how an upstream agent is called or relayed** (`--agent a2a`): choosing its
//!   interface from its card `upstream/card.rs`, the calls per binding `upstream/jsonrpc.rs` and
//!   `upstream/grpc.rs`, v0.3 results read as v1.0 `transport/v03/convert.rs` (`result_in`), the
//!   relay's loop, resume and failure `agent/relay/mod.rs`, what a snapshot adds `agent/relay/mirror.rs`;
//!   the `--upstream…` flags `config/upstream.rs`. Prove it with `tests/relay.rs` (real a2a-sdk
//!   1.x and 0.3 upstreams, `tests/interop/upstream/`).
//! - **Add a limit or a timeout**: a named field with a default in the settings it belongs to
//!   ([`core::CoreSettings`], `HttpSettings`, `PushSettings`), a flag in `config/mod.rs` and
//!   its reading in `config/settings.rs`; or both in its group's own file (`config/card.rs`,
//!   `exec.rs`, `redis.rs`, `upstream.rs`).
//! - **Let a new error cross replicas** (a forwarded call's answer): its fields in
//!   `error/between_replicas.rs`.
pub mod agent;
pub mod allocator;
pub mod auth;
pub mod call;
pub mod card;
pub mod config;
pub mod core;
pub mod error;
pub mod fleet;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod jose;
#[cfg(feature = "otel")]
pub mod otel;
pub mod proto;
pub mod proto_v03;
pub mod protojson;
pub mod push;
pub mod server;
pub mod task;
pub mod telemetry;
pub mod transport;
pub mod ui;
pub mod upstream;
