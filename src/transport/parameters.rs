//! The service parameters' names (spec §10.2) as header names, made once for every binding
//! that reads them (gRPC metadata are HTTP/2 headers too): a lookup by `&str` parses and checks
//! the name on every call, a few hundred instructions a name.
use axum::http::HeaderName;

/// `A2A-Version`.
pub(crate) const A2A_VERSION: HeaderName = HeaderName::from_static("a2a-version");
/// `A2A-Extensions`.
pub(crate) const A2A_EXTENSIONS: HeaderName = HeaderName::from_static("a2a-extensions");
/// `A2A-Last-Generation` (A2A dev-1.1).
pub(crate) const A2A_LAST_GENERATION: HeaderName = HeaderName::from_static("a2a-last-generation");
/// W3C trace context.
pub(crate) const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
/// An SSE client's resume point.
pub(crate) const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
