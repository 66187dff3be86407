//! Wire bindings: each decodes its protocol into the generated request types plus a
//! [`CallContext`](crate::call::CallContext), calls the [`Core`](crate::core::Core), and encodes
//! the result. No binding touches task internals.
pub mod grpc;
