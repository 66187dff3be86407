//! The generated A2A v0.3 types and gRPC service (`a2a.v1`), compiled from
//! `proto/a2a/v1/a2a.proto` by `build.rs`. Only the v0.3 shim (`transport/v03/`) uses them: the
//! rest of the server speaks v1.0 ([`crate::proto`]).
#![allow(clippy::all, missing_docs, rustdoc::all)]

tonic::include_proto!("a2a.v1");

/// The encoded `FileDescriptorSet` of the v0.3 `a2a.proto` and its imports, options included.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/a2a_v03_descriptor.bin"));

/// The fully-qualified v0.3 gRPC service name, as clients see it on the wire.
pub const SERVICE_NAME: &str = "a2a.v1.A2AService";
