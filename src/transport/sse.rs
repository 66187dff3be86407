//! Server-Sent Events framing shared by the JSON-RPC and HTTP+JSON streaming methods.
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderValue;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

use crate::core::EventStream;
use crate::error::A2aError;
use crate::task::log::TaskEvent;

/// Turns a core event stream into an SSE response, framing each item with `frame`. The core's
/// streams end after an error, so an error frame is always the last one. When the client goes
/// away the response body, and with it the subscription, is dropped.
pub fn response<F>(stream: EventStream, keep_alive: Duration, frame: F) -> Response
where
    F: Fn(Result<Arc<TaskEvent>, A2aError>) -> Event + Send + 'static,
{
    let events = stream.map(move |item| Ok::<_, Infallible>(frame(item)));
    let mut response = Sse::new(events).keep_alive(KeepAlive::new().interval(keep_alive)).into_response();
    let headers = response.headers_mut();
    headers.insert("cache-control", HeaderValue::from_static("no-cache"));
    // Reverse proxies (nginx) must not buffer a live stream.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}
