//! Write coalescing on one connection: responses that are about to be ready go out in one
//! write rather than one each.
//!
//! hyper runs each HTTP/2 stream in a task of its own, which wakes the connection's task as
//! soon as its response is queued; the connection task, woken first, writes that response
//! alone, and the streams that came in the same read answer a write (a system call, and on
//! loopback the peer's receive path too) apiece. Here a connection counts the streams it has
//! handed to the runtime that have not yet had their first poll; while any wait, a write is
//! put off once: the connection task goes to the back of the run queue, behind those streams,
//! and writes what they answered together when it comes round. A stream that has to wait
//! (for an agent, for events) stops counting at its first poll, so nothing waits on it. A
//! write is put off once per batch of spawned streams, and never again before some bytes have
//! gone out, so a stream another worker is slow to run delays the others by one turn of the
//! run queue at most, and a client that keeps sending cannot hold the answers back. What one
//! flush writes then goes out in one system call (see [`Coalescing`] for how hyper's codec is
//! brought to that).
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The streams of one connection that have been spawned and not yet polled, and how many it
/// has spawned in all (which tells one batch from the next).
#[derive(Debug, Default)]
pub(super) struct Unstarted {
    waiting: AtomicUsize,
    spawned: AtomicUsize,
}

impl Unstarted {
    fn waiting(&self) -> bool {
        self.waiting.load(Ordering::Acquire) > 0
    }

    fn spawned(&self) -> usize {
        self.spawned.load(Ordering::Acquire)
    }

    fn spawn(&self) {
        self.spawned.fetch_add(1, Ordering::AcqRel);
        self.waiting.fetch_add(1, Ordering::AcqRel);
    }
}

tokio::task_local! {
    /// The connection whose task is running: hyper spawns its streams from that task.
    static CONNECTION: Arc<Unstarted>;
}

/// Runs `connection` (a connection's whole service) as the connection that counts the streams
/// spawned from it.
///
/// Not an `async fn`: one would hold `connection` twice, as its argument and inside the scope
/// it awaits, and every connection's task would be that much larger.
pub(super) fn counting<F: Future>(
    unstarted: Arc<Unstarted>,
    connection: F,
) -> impl Future<Output = F::Output> {
    CONNECTION.scope(unstarted, connection)
}

/// The executor hyper spawns a connection's streams with: tokio's, counting each stream until
/// its first poll.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct StreamExecutor;

impl<F> hyper::rt::Executor<F> for StreamExecutor
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, future: F) {
        let unstarted = CONNECTION.try_with(Arc::clone).ok();
        if let Some(unstarted) = &unstarted {
            unstarted.spawn();
        }
        drop(tokio::spawn(FirstPoll { future: super::send_watch::watched(future), unstarted }));
    }
}

pin_project_lite::pin_project! {
    /// A stream's future, counted among its connection's unstarted streams until its first
    /// poll ends (or it is dropped unpolled).
    struct FirstPoll<F> {
        #[pin]
        future: F,
        unstarted: Option<Arc<Unstarted>>,
    }

    impl<F> PinnedDrop for FirstPoll<F> {
        fn drop(this: Pin<&mut Self>) {
            started(this.project().unstarted);
        }
    }
}

/// Counts a stream as started (once).
fn started(unstarted: &mut Option<Arc<Unstarted>>) {
    if let Some(unstarted) = unstarted.take() {
        unstarted.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<F: Future> Future for FirstPoll<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let polled = this.future.poll(cx);
        started(this.unstarted);
        polled
    }
}

/// Writes smaller than this are gathered (copied) until the flush or the next write; a larger
/// one goes out as it is. Bounds the copying, and what a connection holds between flushes.
const GATHER_BYTES: usize = 4096;

/// A connection's byte stream, putting a write off once while streams of the connection wait
/// for their first poll, and sending what one flush writes in one system call.
///
/// It tells hyper's HTTP/2 codec that it takes no vectored writes. With vectored writes the
/// codec keeps any DATA payload of 256 bytes or more apart (to send it by reference), and
/// buffers nothing more until it has written it and flushed: every answer that size (a JSON
/// one, say) costs a write of its own, however many are ready. Without them the threshold is
/// 1 KiB: smaller payloads are copied into the codec's buffer, and a larger one still ends a
/// flush of its own, the codec writing its buffer and the payload with two calls, which this
/// layer joins into one vectored write. (Answers over 1 KiB therefore still go out one write
/// each.)
///
/// HTTP/1.1 goes through here too: hyper then copies each response into its own buffer
/// ("flatten") instead of queueing body chunks for vectored writes. Nothing is ever put off
/// there (hyper spawns no task per HTTP/1.1 request).
pub(super) struct Coalescing<IO> {
    io: IO,
    unstarted: Arc<Unstarted>,
    /// A write was put off and nothing has been written since: the next one goes out.
    deferred: bool,
    /// `Unstarted::spawned` at the last write put off: a batch of streams puts off one write.
    deferred_at: usize,
    /// Bytes taken from the codec and not yet written, fewer than `GATHER_BYTES`; freed once
    /// written, so an idle connection holds none.
    gathered: Vec<u8>,
}

impl<IO> Coalescing<IO> {
    pub(super) fn new(io: IO, unstarted: Arc<Unstarted>) -> Self {
        Self { io, unstarted, deferred: false, deferred_at: 0, gathered: Vec::new() }
    }

    /// Whether to put this write off (and arrange to be polled again behind the streams).
    fn defer(&mut self, cx: &mut Context<'_>) -> bool {
        let spawned = self.unstarted.spawned();
        if self.deferred || spawned == self.deferred_at || !self.unstarted.waiting() {
            return false;
        }
        (self.deferred, self.deferred_at) = (true, spawned);
        // Woken while running, the task is queued behind what is already runnable.
        cx.waker().wake_by_ref();
        true
    }
}

impl<IO: AsyncWrite + Unpin> Coalescing<IO> {
    /// Writes out everything gathered.
    fn poll_write_gathered(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.gathered.is_empty() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.gathered))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.deferred = false;
            self.gathered.drain(..n);
        }
        self.gathered = Vec::new();
        Poll::Ready(Ok(()))
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Coalescing<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Coalescing<IO> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.gathered.is_empty() && this.defer(cx) {
            return Poll::Pending;
        }
        if this.gathered.len() + buf.len() < GATHER_BYTES {
            this.gathered.extend_from_slice(buf);
            return Poll::Ready(Ok(buf.len()));
        }
        loop {
            if this.gathered.is_empty() {
                let n = ready!(Pin::new(&mut this.io).poll_write(cx, buf))?;
                this.deferred &= n == 0;
                return Poll::Ready(Ok(n));
            }
            let both = [io::IoSlice::new(&this.gathered), io::IoSlice::new(buf)];
            let n = ready!(Pin::new(&mut this.io).poll_write_vectored(cx, &both))?;
            if n == 0 {
                return Poll::Ready(Ok(0));
            }
            this.deferred = false;
            let of_buf = n.saturating_sub(this.gathered.len());
            this.gathered.drain(..n - of_buf);
            if of_buf > 0 {
                this.gathered = Vec::new();
                return Poll::Ready(Ok(of_buf));
            }
        }
    }

    /// No: see the type's doc.
    fn is_write_vectored(&self) -> bool {
        false
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_write_gathered(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_write_gathered(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
#[path = "write_coalescing_tests.rs"]
mod tests;
