//! What the fuzz targets share: the invariants they assert ([`check`]), the in-process server
//! they drive ([`server`], around the quick agent in [`agent`]), and its response checks
//! ([`response`]).
//!
//! Every target asserts more than "does not crash": a decoded request survives a re-encode
//! (ProtoJSON and protobuf) unchanged, an error is one of our `A2aError`s and maps to every
//! wire, and every response the server sends is well-formed in its binding's terms.
pub mod agent;
pub mod check;
pub mod response;
pub mod server;
