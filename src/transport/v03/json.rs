//! ProtoJSON of the v0.3 proto messages (the v0.3 REST binding's bodies), driven by the v0.3
//! descriptors exactly as [`crate::protojson`] is by the v1.0 ones.
use std::sync::LazyLock;

use prost::{Message, Name};
use prost_reflect::{DescriptorPool, DeserializeOptions, DynamicMessage};
use serde_json::Value;

use crate::error::A2aError;
use crate::proto_v03::FILE_DESCRIPTOR_SET;

static POOL: LazyLock<DescriptorPool> = LazyLock::new(|| {
    DescriptorPool::decode(FILE_DESCRIPTOR_SET).expect("the embedded v0.3 descriptor set is valid")
});

fn descriptor<T: Name>() -> prost_reflect::MessageDescriptor {
    POOL.get_message_by_name(&T::full_name()).expect("every generated v0.3 type is in its descriptor set")
}

/// Decodes v0.3 ProtoJSON leniently (unknown fields ignored); a value that does not fit is an
/// `InvalidParams` error naming what is wrong.
pub fn decode<T: Message + Name + Default>(value: &Value) -> Result<T, A2aError> {
    let problem = |e: String| A2aError::invalid_field(T::NAME, e);
    let options = DeserializeOptions::new().deny_unknown_fields(false);
    let message = DynamicMessage::deserialize_with_options(descriptor::<T>(), value, &options)
        .map_err(|e| problem(e.to_string()))?;
    message.transcode_to::<T>().map_err(|e| problem(e.to_string()))
}

/// Encodes a v0.3 message as canonical ProtoJSON.
pub fn encode<T: Message + Name>(message: &T) -> Value {
    let mut dynamic = DynamicMessage::new(descriptor::<T>());
    dynamic.transcode_from(message).expect("a generated message transcodes to its own descriptor");
    serde_json::to_value(dynamic).expect("ProtoJSON of a valid message serializes")
}
