//! The send timeout: an answer that makes no write progress for `--send-timeout-secs` is cut,
//! and what it held is freed at once.
//!
//! Progress on HTTP/2 is the response body handing hyper its next piece (see `answer.rs`),
//! which h2 asks for only when the peer's flow-control window and the socket have room; on
//! HTTP/1.1, whose hyper takes pieces whenever its own buffer has room, it is a write to the
//! socket ([`Written`]). An answer that still holds bytes and has not moved for a while is
//! stalled by its reader. Its body is not polled then, so it cannot time itself out; what
//! watches it is whatever polls the future that owns it:
//! - HTTP/2: the stream's task (hyper runs each stream in one, spawned by our executor). The
//!   [`Watched`] wrapper drops the stream's future once it stalls: h2 then resets the stream
//!   (`RST_STREAM CANCEL`) and frees what it had buffered, the body and its count go with it,
//!   and the stream is no longer in flight. If nothing else is in flight then, the connection
//!   is closed too (its peer is reading nothing at all).
//! - HTTP/1.1: the connection's task, which writes the one answer in progress; a stalled one
//!   closes the connection (HTTP/1.1 cannot cut one answer and go on).
//!
//! A body that holds nothing (a stream waiting for events, an answer already handed on) is
//! never stalled: waiting for the agent is not the client's fault.
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::{Instant, Sleep};

/// What one answer in progress (an HTTP/2 stream's, or the HTTP/1.1 connection's current one)
/// holds and when it last moved.
#[derive(Debug)]
pub(super) struct SendWatch {
    base: Instant,
    held: AtomicUsize,
    /// When the body last handed bytes on (or began to hold some), ms after `base`.
    moved_ms: AtomicU64,
}

impl Default for SendWatch {
    fn default() -> Self {
        let (held, moved_ms) = (AtomicUsize::new(0), AtomicU64::new(0));
        Self { base: Instant::now(), held, moved_ms }
    }
}

impl SendWatch {
    /// The answer now holds `held` bytes; its clock starts when it begins to hold any.
    pub(super) fn hold(&self, held: usize) {
        if self.held.swap(held, Ordering::AcqRel) == 0 && held > 0 {
            self.stamp();
        }
    }

    /// Bytes of the answer went out: its clock restarts.
    pub(super) fn progress(&self) {
        if self.held.load(Ordering::Acquire) > 0 {
            self.stamp();
        }
    }

    fn stamp(&self) {
        self.moved_ms.store(self.base.elapsed().as_millis() as u64, Ordering::Release);
    }

    /// Bytes the answer holds now.
    #[cfg(test)]
    pub(super) fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// When the answer stalls if it does not move before then; `None` while it holds nothing.
    fn due(&self, timeout: Duration) -> Option<Instant> {
        if self.held.load(Ordering::Acquire) == 0 {
            return None;
        }
        Some(self.base + Duration::from_millis(self.moved_ms.load(Ordering::Acquire)) + timeout)
    }
}

/// A timer on one [`SendWatch`], armed only while the answer holds bytes.
struct Stall {
    timeout: Duration,
    timer: Option<Pin<Box<Sleep>>>,
}

impl Stall {
    fn new(timeout: Duration) -> Self {
        Self { timeout, timer: None }
    }

    /// Ready once `watch` has held bytes without moving for the timeout.
    fn poll(&mut self, watch: &SendWatch, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            // Nobody is woken when an answer begins to hold bytes: its body does that while the
            // task that polls this is running (the stream's, or the connection's just before it
            // polls this; see `connection.rs`), so this is polled again after.
            let Some(due) = watch.due(self.timeout) else {
                self.timer = None;
                return Poll::Pending;
            };
            if Instant::now() >= due {
                return Poll::Ready(());
            }
            match &mut self.timer {
                Some(timer) if timer.deadline() == due => std::task::ready!(timer.as_mut().poll(cx)),
                Some(timer) => timer.as_mut().reset(due),
                None => self.timer = Some(Box::pin(tokio::time::sleep_until(due))),
            }
        }
    }
}

/// What a connection's streams share of the send timeout.
#[derive(Debug, Default)]
pub(super) struct Sends {
    /// `--send-timeout-secs`; `None`: answers may stall forever.
    pub(super) timeout: Option<Duration>,
    /// Set when a stream of the connection was cut for stalling.
    cut: AtomicBool,
    cut_notify: Notify,
}

impl Sends {
    pub(super) fn new(timeout: Option<Duration>) -> Self {
        Self { timeout, ..Self::default() }
    }

    /// Waits until a stream of the connection is cut for stalling.
    pub(super) async fn cut(&self) {
        loop {
            let notified = self.cut_notify.notified();
            if self.cut.swap(false, Ordering::AcqRel) {
                return;
            }
            notified.await;
        }
    }

    fn note_cut(&self) {
        self.cut.store(true, Ordering::Release);
        self.cut_notify.notify_one();
    }
}

tokio::task_local! {
    /// The connection whose task is running, for the executor (see `write_coalescing.rs`).
    static CONNECTION_SENDS: Arc<Sends>;
    /// The HTTP/2 stream whose task is running: its answer's body reports to it.
    static STREAM: Arc<SendWatch>;
}

/// Runs a connection's whole service with `sends` as the one its streams report cuts to.
///
/// Not an `async fn`, which would hold `connection` twice (see `write_coalescing::counting`).
pub(super) fn connection<F: Future>(sends: Arc<Sends>, connection: F) -> impl Future<Output = F::Output> {
    CONNECTION_SENDS.scope(sends, connection)
}

/// Tells the answer's watch what it holds: the watch of the HTTP/2 stream being polled now,
/// else (HTTP/1.1, whose answers the connection's task writes) `http1`.
pub(super) fn holding(http1: &SendWatch, held: usize) {
    if STREAM.try_with(|stream| stream.hold(held)).is_err() {
        http1.hold(held);
    }
}

/// [`holding`] after the answer handed hyper a piece. For an HTTP/2 stream that is progress:
/// h2 asks for more only as the peer's window and the socket take what it has. HTTP/1.1
/// asks whenever its buffer has room, even with the socket full, so there progress is a
/// write to the socket instead ([`Written`]).
pub(super) fn handed_on(http1: &SendWatch, held: usize) {
    let stream = STREAM.try_with(|stream| {
        stream.hold(held);
        stream.progress();
    });
    if stream.is_err() {
        http1.hold(held);
    }
}

/// A connection's socket, telling its HTTP/1.1 watch whenever bytes go out.
pub(super) struct Written<S> {
    io: S,
    watch: Arc<SendWatch>,
}

impl<S> Written<S> {
    pub(super) fn new(io: S, watch: Arc<SendWatch>) -> Self {
        Self { io, watch }
    }

    fn wrote(&self, written: Poll<std::io::Result<usize>>) -> Poll<std::io::Result<usize>> {
        if let Poll::Ready(Ok(1..)) = written {
            self.watch.progress();
        }
        written
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Written<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Written<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let written = Pin::new(&mut self.io).poll_write(cx, buf);
        self.wrote(written)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let written = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.wrote(written)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Wraps an HTTP/2 stream's future (from the executor, in the connection's task) so that it
/// is dropped once its answer stalls; as it is when the connection has no send timeout.
pub(super) fn watched<F: Future<Output = ()>>(future: F) -> Watched<F> {
    let watch = CONNECTION_SENDS
        .try_with(|sends| sends.timeout.map(|timeout| (sends.clone(), Arc::default(), Stall::new(timeout))))
        .ok()
        .flatten();
    Watched { future: Some(future), watch }
}

pin_project_lite::pin_project! {
    /// An HTTP/2 stream's future, dropped (so reset) once its answer stalls.
    pub(super) struct Watched<F> {
        #[pin]
        future: Option<F>,
        watch: Option<(Arc<Sends>, Arc<SendWatch>, Stall)>,
    }
}

impl<F: Future<Output = ()>> Future for Watched<F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut this = self.project();
        let Some(future) = this.future.as_mut().as_pin_mut() else { return Poll::Ready(()) };
        let Some((sends, watch, stall)) = this.watch else { return future.poll(cx) };
        if STREAM.sync_scope(watch.clone(), || future.poll(cx)).is_ready() {
            return Poll::Ready(());
        }
        if stall.poll(watch, cx).is_pending() {
            return Poll::Pending;
        }
        tracing::debug!(
            held = watch.held.load(Ordering::Relaxed),
            "HTTP/2 answer stalled; resetting its stream"
        );
        // Dropped here, before the connection hears of it: the stream (reset by h2), its body,
        // its count and its place in flight all go now.
        STREAM.sync_scope(watch.clone(), || this.future.set(None));
        metrics::counter!("a2a_answers_cut_total").increment(1);
        sends.note_cut();
        Poll::Ready(())
    }
}

/// Resolves once the HTTP/1.1 answer in progress on a connection stalls (never without a
/// timeout).
pub(super) async fn stalled(watch: Arc<SendWatch>, timeout: Option<Duration>) {
    let Some(timeout) = timeout else { return std::future::pending().await };
    let mut stall = Stall::new(timeout);
    std::future::poll_fn(|cx| stall.poll(&watch, cx)).await;
    metrics::counter!("a2a_answers_cut_total").increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_answer_stalls_only_while_it_holds_bytes_and_does_not_move() {
        let watch = Arc::new(SendWatch::default());
        let stalled = stalled(watch.clone(), Some(Duration::from_millis(300)));
        tokio::pin!(stalled);
        let wait = |ms| tokio::time::sleep(Duration::from_millis(ms));
        tokio::select! { () = &mut stalled => panic!("holding nothing, it never stalls"), () = wait(600) => {} }
        watch.hold(1000);
        tokio::select! { () = &mut stalled => panic!("it moved 200 ms ago"), () = wait(200) => {} }
        watch.hold(500);
        watch.progress();
        let moved = tokio::time::Instant::now();
        tokio::select! { () = &mut stalled => panic!("it moved 200 ms ago"), () = wait(200) => {} }
        tokio::time::timeout(Duration::from_secs(5), &mut stalled).await.expect("stalled");
        assert!(moved.elapsed() >= Duration::from_millis(300));
    }

    #[tokio::test]
    async fn a_stalled_stream_is_dropped_and_its_connection_told() {
        let sends = Arc::new(Sends::new(Some(Duration::from_millis(200))));
        let (dropped_tx, dropped) = tokio::sync::oneshot::channel::<()>();
        let stream = async move {
            let _dropped = dropped_tx;
            let never = SendWatch::default();
            holding(&never, 100);
            assert_eq!(never.held(), 0, "the stream's watch, not HTTP/1.1's");
            std::future::pending::<()>().await
        };
        let watched = CONNECTION_SENDS.sync_scope(sends.clone(), || watched(stream));
        tokio::spawn(watched);
        tokio::time::timeout(Duration::from_secs(6), sends.cut()).await.expect("cut within the timeout");
        assert!(dropped.await.is_err(), "the stream's future was dropped");
    }
}
