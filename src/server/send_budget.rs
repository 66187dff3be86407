//! Answers encoded and not yet written, counted against a budget per connection and one for
//! the whole server.
//!
//! A client that never reads would otherwise pin every answer it asks for: each is built
//! whole (a 7 MB task is 7 MB of protobuf or more of JSON) and kept until the socket takes it.
//! Here a response body's bytes count from the moment they exist as an answer until they are
//! handed to hyper, which takes them in [`CHUNK`]-sized pieces only as the peer's flow control
//! and the socket let it (so hyper and h2 hold about a chunk per stream, bounded apart from
//! this count by `max_send_buf_size`). An answer whose whole size is known (every unary
//! answer but tonic's) is counted before its head goes out; if it does not fit, the client
//! gets `RESOURCE_EXHAUSTED` in its binding's form instead, with the send timeout as the time
//! to retry after (by then the stalled answers ahead of it have been cut). A frame of a stream
//! (SSE, a gRPC stream, a tonic unary answer) is counted when it arrives; one that does not
//! fit the connection's budget ends its stream (gRPC: with `RESOURCE_EXHAUSTED`), and the
//! server-wide count takes it regardless, so a stream is never cut for what other clients do.
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use hyper::Response;
use hyper::header::{CONTENT_TYPE, HeaderMap};

use crate::error::{A2aError, LimitKind};

/// The most a response body hands hyper at once: what one poll of a stalled answer can add to
/// hyper's and h2's buffers.
pub(super) const CHUNK: usize = 64 * 1024;

/// A count of unsent answer bytes with a limit.
pub(crate) struct Unsent {
    bytes: AtomicUsize,
    limit: usize,
    /// The server's count, exported as `a2a_unsent_answer_bytes` (a connection's is not).
    gauge: Option<metrics::Gauge>,
}

impl std::fmt::Debug for Unsent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unsent").field("bytes", &self.bytes).field("limit", &self.limit).finish()
    }
}

impl Unsent {
    pub(crate) fn new(limit: usize) -> Self {
        Self { bytes: AtomicUsize::new(0), limit, gauge: None }
    }

    /// The server's count, exported as a gauge.
    pub(crate) fn server(limit: usize) -> Self {
        Self { gauge: Some(metrics::gauge!("a2a_unsent_answer_bytes")), ..Self::new(limit) }
    }

    fn exported(&self, delta: f64) {
        if let Some(gauge) = &self.gauge {
            gauge.increment(delta);
        }
    }

    /// Bytes counted now.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    fn try_add(&self, n: usize) -> bool {
        self.bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                now.checked_add(n).filter(|total| *total <= self.limit)
            })
            .inspect(|_| self.exported(n as f64))
            .is_ok()
    }

    fn add(&self, n: usize) {
        self.bytes.fetch_add(n, Ordering::AcqRel);
        self.exported(n as f64);
    }

    fn sub(&self, n: usize) {
        self.bytes.fetch_sub(n, Ordering::AcqRel);
        self.exported(-(n as f64));
    }
}

/// Which budget refused an answer, by the flag that sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Over {
    Connection,
    Server,
}

/// The budgets one connection's answers count against.
#[derive(Clone, Debug)]
pub(super) struct SendBudget {
    connection: Arc<Unsent>,
    server: Arc<Unsent>,
    /// `--send-timeout-secs`: what a refused client is told to wait.
    retry_after: Option<Duration>,
}

impl SendBudget {
    pub(super) fn new(connection_limit: usize, server: Arc<Unsent>, retry_after: Option<Duration>) -> Self {
        Self { connection: Arc::new(Unsent::new(connection_limit)), server, retry_after }
    }

    /// Counts `n` bytes of a whole answer against both budgets, or neither.
    pub(super) fn charge(&self, n: usize) -> Result<(), Over> {
        if !self.connection.try_add(n) {
            return Err(Over::Connection);
        }
        if !self.server.try_add(n) {
            self.connection.sub(n);
            return Err(Over::Server);
        }
        Ok(())
    }

    /// Counts `n` bytes of a stream's frame: refused only by the connection's own budget.
    pub(super) fn charge_frame(&self, n: usize) -> Result<(), Over> {
        if !self.connection.try_add(n) {
            return Err(Over::Connection);
        }
        self.server.add(n);
        Ok(())
    }

    /// Bytes handed on (or dropped) that were counted.
    pub(super) fn release(&self, n: usize) {
        if n > 0 {
            self.connection.sub(n);
            self.server.sub(n);
        }
    }

    /// The error for an answer of `n` bytes that did not fit.
    pub(super) fn refusal(&self, over: Over, n: usize) -> A2aError {
        let (flag, unsent, limit) = match over {
            Over::Connection => ("max-unsent-bytes-per-connection", &self.connection, self.connection.limit),
            Over::Server => ("max-unsent-bytes", &self.server, self.server.limit),
        };
        let detail = format!(
            "an answer of {n} bytes does not fit: {} bytes of answers are waiting to be read, of at most \
             {limit} (--{flag}); read the answers already sent, or retry later",
            unsent.bytes()
        );
        metrics::counter!("a2a_answers_refused_total").increment(1);
        let mut error = A2aError::limit(LimitKind::Quota, flag, detail);
        if let A2aError::LimitExceeded { retry_after_secs, .. } = &mut error {
            *retry_after_secs = self.retry_after.map(|t| t.as_secs().max(1));
        }
        error
    }
}

/// Whether a response is a gRPC (or grpc-web) one, which ends in trailers.
pub(super) fn is_grpc(headers: &HeaderMap) -> bool {
    headers.get(CONTENT_TYPE).is_some_and(|ct| ct.as_bytes().starts_with(b"application/grpc"))
}

/// A refused answer in the form of the binding that wrote `answer` (its head and body): a
/// trailers-only gRPC status, a JSON-RPC error with the answer's id, or the HTTP+JSON error.
pub(super) fn refused(
    head: &hyper::http::response::Parts,
    answer: &[u8],
    error: &A2aError,
) -> Response<Body> {
    if is_grpc(&head.headers) {
        let mut response: Response<Body> = error.to_grpc_status().into_http();
        if let Some(content_type) = head.headers.get(CONTENT_TYPE) {
            response.headers_mut().insert(CONTENT_TYPE, content_type.clone());
        }
        return response;
    }
    crate::transport::http::refused_answer(&head.headers, answer, error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_charge_fits_both_budgets_or_neither() {
        let server = Arc::new(Unsent::new(100));
        let (a, b) = (SendBudget::new(60, server.clone(), None), SendBudget::new(60, server.clone(), None));
        assert_eq!(a.charge(50), Ok(()));
        assert_eq!(a.charge(20), Err(Over::Connection));
        assert_eq!(b.charge(60), Err(Over::Server), "the server has 50 left");
        assert_eq!((a.connection.bytes(), b.connection.bytes(), server.bytes()), (50, 0, 50));
        assert_eq!(b.charge(50), Ok(()));
        a.release(50);
        b.release(50);
        assert_eq!(server.bytes(), 0);
    }

    #[test]
    fn a_stream_frame_is_refused_by_its_connection_only() {
        let server = Arc::new(Unsent::new(10));
        let budget = SendBudget::new(100, server.clone(), None);
        assert_eq!(budget.charge_frame(50), Ok(()));
        assert_eq!(server.bytes(), 50, "counted over the server's limit");
        assert_eq!(budget.charge_frame(51), Err(Over::Connection));
        budget.release(50);
        assert_eq!((budget.connection.bytes(), server.bytes()), (0, 0));
    }

    #[test]
    fn the_refusal_names_the_flag_and_when_to_retry() {
        let budget = SendBudget::new(10, Arc::new(Unsent::new(10)), Some(Duration::from_secs(30)));
        let error = budget.refusal(Over::Connection, 20);
        assert_eq!(error.retry_after_secs(), Some(30));
        assert!(error.to_string().contains("--max-unsent-bytes-per-connection"), "{error}");
        assert_eq!(error.grpc_code(), tonic::Code::ResourceExhausted);
    }
}
