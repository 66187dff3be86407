//! Wire bindings: each decodes its protocol into the generated request types plus a
//! [`CallContext`](crate::call::CallContext), calls the [`Core`](crate::core::Core), and encodes
//! the result. No binding touches task internals.
//!
//! - [`grpc`]: `lf.a2a.v1.A2AService` (tonic), also reachable as grpc-web; its streaming RPCs
//!   are served from bytes encoded once per event, SendMessage and GetTask straight from the
//!   shared task.
//! - [`jsonrpc`] and [`rest`]: the JSON bindings, both decoding into an [`operation::Operation`]
//!   and encoding with [`protojson`](crate::protojson); streams go out as [`sse`].
//! - [`card`]: the Agent Card; [`http`]: what the JSON bindings share; [`strict_json`]: request
//!   bodies read as I-JSON (duplicate names refused).
//! - [`request_size`]: `--max-request-bytes`, the one request size limit of every binding;
//!   `parameters.rs`: the service parameters' header names; [`extensions`]: the
//!   `A2A-Extensions` response header, the extensions activated for a call.
//! - [`v03`]: A2A v0.3 clients, translated to and from v1.0 at the edge.
pub mod card;
pub mod extensions;
pub mod grpc;
pub mod http;
pub mod jsonrpc;
pub mod operation;
mod parameters;
pub mod request_budget;
pub mod request_size;
pub mod rest;
pub mod sse;
pub mod strict_json;
pub mod v03;
