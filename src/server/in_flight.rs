//! What a connection knows of its requests: how many are in flight — from the request's headers
//! until its response body ends, so a stream (SubscribeToTask, SSE) is in flight for its whole
//! life and never idle — whether they came over HTTP/2, and the deadline by which each request
//! body must have arrived. While the server drains, every HTTP/1.x answer says
//! `Connection: close`, so the client (a load balancer reusing a kept-alive connection) sends
//! nothing more on it and the connection closes after the answer, not under a request.
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::header::{CONNECTION, HeaderValue};
use hyper::{Request, Response, Version};
use tokio::sync::Notify;
use tokio::time::Sleep;
use tower::ServiceExt;

use super::answer::Answers;
use super::connection::{Peer, Routes};
use crate::error::BoxError;

/// Requests in flight on one connection, how many it has had, and over which protocol.
#[derive(Default)]
pub(super) struct Activity {
    in_flight: AtomicUsize,
    requests: AtomicU64,
    /// Notified when the last request in flight ends.
    quiet: Notify,
    /// When it last did, in nanoseconds after [`epoch`] (0: never): the idle timeout counts
    /// from there, not from when the connection's timer next looked.
    quiet_since: AtomicU64,
    /// A request came over HTTP/2 (the connection speaks it).
    http2: AtomicBool,
    /// The server drains: HTTP/1.x answers carry `Connection: close`.
    draining: AtomicBool,
}

impl Activity {
    fn start(self: &Arc<Self>) -> InFlightGuard {
        self.requests.fetch_add(1, Ordering::AcqRel);
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlightGuard(self.clone())
    }

    /// Requests in flight now.
    pub(super) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Requests started so far.
    pub(super) fn requests(&self) -> u64 {
        self.requests.load(Ordering::Acquire)
    }

    /// Whether the connection has carried an HTTP/2 request (so a GOAWAY can close it without
    /// a race: streams the client sent before it are still served).
    pub(super) fn is_http2(&self) -> bool {
        self.http2.load(Ordering::Relaxed)
    }

    /// From now on every HTTP/1.x answer on the connection says `Connection: close`.
    pub(super) fn drain(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    /// When the last request in flight ended, if one ever did.
    pub(super) fn quiet_since(&self) -> Option<tokio::time::Instant> {
        let nanos = self.quiet_since.load(Ordering::Acquire);
        (nanos > 0).then(|| epoch() + Duration::from_nanos(nanos))
    }

    /// Waits until no request is in flight.
    pub(super) async fn quiet(&self) {
        // Several wait at once (the idle timer, and after a stalled stream the close), so the
        // last end wakes them all; registered before the check, none misses an end between.
        loop {
            let notified = self.quiet.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if self.in_flight() == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// The instant [`Activity::quiet_since`] counts from (the first time anything asked).
fn epoch() -> tokio::time::Instant {
    static EPOCH: std::sync::OnceLock<tokio::time::Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(tokio::time::Instant::now)
}

/// One request in flight; dropped with its response body (or with the request, if it never
/// got that far).
struct InFlightGuard(Arc<Activity>);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            let nanos = u64::try_from(epoch().elapsed().as_nanos()).unwrap_or(u64::MAX).max(1);
            self.0.quiet_since.store(nanos, Ordering::Release);
            self.0.quiet.notify_waiters();
        }
    }
}

/// The routes as one connection serves them: each request counted in flight, given the
/// connection's verified client certificate (for the auth layer) and its body a deadline;
/// then the router, or for a plain gRPC call to the A2A service that service directly (see
/// `direct_grpc.rs`).
#[derive(Clone)]
pub(super) struct InFlight {
    routes: Routes,
    activity: Arc<Activity>,
    body_timeout: Option<Duration>,
    peer: Arc<Peer>,
    /// How the connection sends answers (`answer.rs`).
    answers: Arc<Answers>,
}

impl InFlight {
    pub(super) fn new(
        routes: Routes,
        activity: Arc<Activity>,
        body_timeout: Option<Duration>,
        peer: Peer,
        answers: Arc<Answers>,
    ) -> Self {
        Self { routes, activity, body_timeout, peer: Arc::new(peer), answers }
    }
}

impl tower::Service<Request<Incoming>> for InFlight {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Incoming>) -> Self::Future {
        let guard = self.activity.start();
        let http2 = request.version() == Version::HTTP_2;
        if http2 && !self.activity.is_http2() {
            self.activity.http2.store(true, Ordering::Relaxed);
        }
        let (mut head, body) = request.into_parts();
        // Only what a reader needs goes into the extensions: their map and its entry are
        // allocated on the first insert (tonic's `TcpConnectInfo` went in here too; nothing
        // read it, and it cost three allocations a call).
        if let Some(certificate) = &self.peer.certificate {
            head.extensions.insert(certificate.clone());
        }
        let request = Request::from_parts(head, Deadline::new(body, self.body_timeout));
        if let Some(direct) = self.routes.direct.as_ref().filter(|direct| direct.takes(&request)) {
            let response = direct.clone().call(request);
            let answers = self.answers.clone();
            return Box::pin(async move { Ok(answers.send(response.await, guard).await) });
        }
        let response = self.routes.router.clone().oneshot(request);
        let answers = self.answers.clone();
        Box::pin(async move {
            let mut response = response.await?;
            if !http2 && guard.0.draining.load(Ordering::Relaxed) {
                // hyper closes the connection once this answer is written.
                response.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
            }
            Ok(answers.send(response, guard).await)
        })
    }
}

/// A request body that fails if it has not arrived in full by its deadline. The timer is
/// armed only when the body first has to be waited for: most bodies (a unary call's) are
/// there with the headers, and a timer per request was measurable on the unary path.
struct Deadline {
    body: Incoming,
    /// When the body must have ended; `None` once it has, or without a limit.
    due: Option<tokio::time::Instant>,
    /// Armed at the first wait.
    timer: Option<Pin<Box<Sleep>>>,
    timed_out: bool,
}

impl Deadline {
    fn new(body: Incoming, timeout: Option<Duration>) -> Self {
        let due = timeout
            .filter(|_| !http_body::Body::is_end_stream(&body))
            .map(|t| tokio::time::Instant::now() + t);
        Self { body, due, timer: None, timed_out: false }
    }
}

/// The error a request body gives when its deadline passes.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within the body read timeout (--body-read-timeout-secs)")]
pub struct BodyReadTimeout;

impl http_body::Body for Deadline {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if this.timed_out {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(frame) => {
                if frame.is_none() {
                    (this.due, this.timer) = (None, None);
                }
                Poll::Ready(frame.map(|frame| frame.map_err(Into::into)))
            }
            Poll::Pending => {
                let Some(due) = this.due else { return Poll::Pending };
                let timer = this.timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due)));
                if timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                tracing::debug!("request body cut at its deadline");
                this.timed_out = true;
                (this.due, this.timer) = (None, None);
                Poll::Ready(Some(Err(BodyReadTimeout.into())))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.timed_out || self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
