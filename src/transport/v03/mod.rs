//! A2A v0.3 clients, served beside v1.0 on the same port by a shim at the edge: v0.3 requests
//! are decoded into the v1.0 operations and v1.0 results encoded back into v0.3 shapes. The
//! core, the task actors and the store never see v0.3.
//!
//! - [`convert`]: every difference between v0.3 and v1.0 JSON, in both directions, and the
//!   v0.3 error codes.
//! - [`jsonrpc`]: the v0.3 JSON-RPC methods (`message/send`, `tasks/resubscribe`, …) at `/`.
//! - [`rest`]: the v0.3 HTTP+JSON routes under `/v1/`, and [`grpc`]: the v0.3 gRPC service
//!   `a2a.v1.A2AService`. Both carry the v0.3 proto's messages ([`crate::proto_v03`]), turned
//!   into v1.0 ones and back by [`typed`]; [`json`] is their ProtoJSON.
//! - [`card`]: the Agent Card for both generations from one URL.
//! - [`push`]: webhook bodies for push configs registered through v0.3 (the whole v0.3 Task),
//!   plugged into push delivery by the server builder.
//!
//! `--v03 off` turns all of it off (v0.3 method names are then unknown methods, `/v1/` routes and
//! `a2a.v1.A2AService` are not there, and the card is the plain v1.0 one).
pub mod admission;
pub mod card;
pub mod convert;
pub mod grpc;
pub mod json;
pub mod jsonrpc;
pub mod push;
pub mod rest;
pub mod typed;
