//! The generated A2A v1.0 types and gRPC service (`lf.a2a.v1`), compiled from `proto/` by
//! `build.rs`. These types are the server's data model on every binding; [`new_id`] makes the
//! ids the server gives them.
#![allow(clippy::all, missing_docs, rustdoc::all)]

tonic::include_proto!("lf.a2a.v1");
include!(concat!(env!("OUT_DIR"), "/lf.a2a.v1.serde.rs"));

/// The encoded `FileDescriptorSet` of `a2a.proto` and its imports, options included.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/a2a_descriptor.bin"));

/// The fully-qualified gRPC service name, as clients see it on the wire.
pub const SERVICE_NAME: &str = "lf.a2a.v1.A2AService";

/// A new id for a task, context, message, artifact or push config: a random UUID (v4),
/// hyphenated and lowercase, written straight into one exact allocation (`to_string` goes
/// through the formatter, a few hundred instructions more, and several ids are made per task).
pub fn new_id() -> String {
    uuid::Uuid::new_v4().hyphenated().encode_lower(&mut uuid::Uuid::encode_buffer()).to_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn new_ids_are_random_lowercase_hyphenated_uuids() {
        let (a, b) = (super::new_id(), super::new_id());
        assert_ne!(a, b);
        let parsed = uuid::Uuid::parse_str(&a).unwrap();
        assert_eq!(parsed.get_version_num(), 4);
        assert_eq!(a, parsed.to_string(), "what to_string would write");
    }
}
