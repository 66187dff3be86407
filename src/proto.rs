//! The generated A2A v1.0 types and gRPC service (`lf.a2a.v1`), compiled from `proto/` by
//! `build.rs`. These types are the server's data model on every binding.
#![allow(clippy::all, missing_docs, rustdoc::all)]

tonic::include_proto!("lf.a2a.v1");
include!(concat!(env!("OUT_DIR"), "/lf.a2a.v1.serde.rs"));

/// The encoded `FileDescriptorSet` of `a2a.proto` and its imports, options included.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/a2a_descriptor.bin"));

/// The fully-qualified gRPC service name, as clients see it on the wire.
pub const SERVICE_NAME: &str = "lf.a2a.v1.A2AService";
