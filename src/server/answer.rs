//! An answer's body as its connection sends it: in flight until it ends, handed to hyper in
//! [`CHUNK`]-sized pieces, its unsent bytes counted against the send budgets
//! (`send_budget.rs`) and watched for stalls (`send_watch.rs`) while it holds any.
//!
//! A small answer (one chunk or less, nearly all of them) passes through untouched and
//! uncounted: hyper takes it whole at its first poll.
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use axum::body::Body;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use hyper::Response;
use hyper::header::HeaderMap;

use super::send_budget::{self, CHUNK, Over, SendBudget};
use super::send_watch::{self, SendWatch};
use crate::error::BoxError;

/// What a connection's answers share: the budgets, and the watch of its HTTP/1.1 answer.
#[derive(Debug)]
pub(super) struct Answers {
    pub(super) budget: SendBudget,
    /// HTTP/1.1 writes one answer at a time, from the connection's task, which watches this.
    pub(super) http1: Arc<SendWatch>,
}

impl Answers {
    /// `response` as the connection sends it, `guard` kept until its body ends. Its first
    /// frame is taken now if it is ready (a unary answer's always is): one over a chunk is
    /// counted before the head goes out, and if it does not fit, the caller gets the refusal
    /// in its binding's form instead.
    pub(super) async fn send<B, G>(self: Arc<Self>, response: Response<B>, guard: G) -> Response<Body>
    where
        B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: Into<BoxError>,
        G: Send + Unpin + 'static,
    {
        let (head, body) = response.into_parts();
        let mut tracked = Tracked::new(body, self, send_budget::is_grpc(&head.headers), Some(guard));
        let Err((over, answer)) = std::future::poll_fn(|cx| Poll::Ready(tracked.take_first(cx))).await else {
            return Response::from_parts(head, Body::new(tracked));
        };
        let answers = tracked.answers.clone();
        let error = answers.budget.refusal(over, answer.len());
        tracing::debug!(%error, "answer refused");
        let (head, body) = send_budget::refused(&head, &answer, &error).into_parts();
        // Taken like any answer's, so a refusal the client does not read stalls too.
        let mut refusal = Tracked::new(body, answers, false, tracked.guard.take());
        let _small = std::future::poll_fn(|cx| Poll::Ready(refusal.take_first(cx))).await;
        Response::from_parts(head, Body::new(refusal))
    }
}

/// A response body that keeps its request in flight until it ends (`guard`), and its unsent
/// bytes counted while it holds them.
struct Tracked<B, G> {
    body: B,
    answers: Arc<Answers>,
    /// A frame taken at [`Answers::send`] and not yet handed on (a small one, trailers, or
    /// the body's error).
    early: Option<Result<Frame<Bytes>, BoxError>>,
    /// Bytes taken from `body` and not yet handed on: what this answer counts.
    pending: Bytes,
    /// A gRPC answer: over its budget, it ends with a status in trailers.
    grpc: bool,
    /// A data frame has been taken: later ones are a stream's, counted against the
    /// connection's budget only.
    started: bool,
    /// `body` has ended (or was cut).
    ended: bool,
    guard: Option<G>,
    /// The body's exact size, if it has one (else unknown).
    size: SizeHint,
}

impl<B, G> Tracked<B, G> {
    fn new(body: B, answers: Arc<Answers>, grpc: bool, guard: Option<G>) -> Self
    where
        B: http_body::Body,
    {
        // The bytes handed on are the body's, so an exact size stays true after frames are
        // taken early (hyper reads it for `content-length` after `send` took the first).
        let size = body.size_hint().exact().map(SizeHint::with_exact).unwrap_or_default();
        let (early, pending) = (None, Bytes::new());
        Self { body, answers, early, pending, grpc, started: false, ended: false, guard, size }
    }

    /// Tells the answer's watch what it holds now (bytes not yet handed to hyper).
    fn holding(&self, held: usize) {
        send_watch::holding(&self.answers.http1, held);
    }

    /// Takes `data` (over a chunk) to hand on piece by piece, if it fits the budget: the
    /// first data frame of an answer counts against both budgets, a stream's later ones
    /// against the connection's.
    fn take(&mut self, data: Bytes) -> Result<(), (Over, Bytes)> {
        let budget = &self.answers.budget;
        let counted = if self.started { budget.charge_frame(data.len()) } else { budget.charge(data.len()) };
        self.started = true;
        counted.map_err(|over| (over, data.clone()))?;
        self.pending = data;
        self.holding(self.pending.len());
        Ok(())
    }

    /// Hands hyper the next chunk of what is pending.
    fn hand_on(&mut self) -> Bytes {
        let chunk = self.pending.split_to(self.pending.len().min(CHUNK));
        self.answers.budget.release(chunk.len());
        chunk
    }

    /// The end of a frame that did not fit: a gRPC status in trailers, or an error that
    /// makes hyper reset the stream (HTTP/1.1: close the connection).
    fn over(&mut self, over: Over, n: usize) -> Result<Frame<Bytes>, BoxError> {
        self.ended = true;
        let error = self.answers.budget.refusal(over, n);
        tracing::debug!(%error, "answer cut");
        if !self.grpc {
            return Err(error.into());
        }
        let mut trailers = HeaderMap::new();
        error.to_grpc_status().add_header(&mut trailers).map_err(BoxError::from)?;
        Ok(Frame::trailers(trailers))
    }
}

impl<B, G> Tracked<B, G>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    /// Takes the body's first frame if it is ready; `Err` with the answer when it does not fit.
    fn take_first(&mut self, cx: &mut Context<'_>) -> Result<(), (Over, Bytes)> {
        match Pin::new(&mut self.body).poll_frame(cx) {
            Poll::Pending => Ok(()),
            Poll::Ready(None) => {
                self.ended = true;
                Ok(())
            }
            Poll::Ready(Some(Err(error))) => {
                self.early = Some(Err(error.into()));
                Ok(())
            }
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) if data.len() > CHUNK => self.take(data),
                Ok(data) => {
                    // Uncounted (it is small), but held until hyper asks for it: a client
                    // that reads nothing stalls it like a large one.
                    self.started = true;
                    self.holding(data.len());
                    self.early = Some(Ok(Frame::data(data)));
                    Ok(())
                }
                Err(frame) => {
                    self.early = Some(Ok(frame));
                    Ok(())
                }
            },
        }
    }
}

impl<B, G> Drop for Tracked<B, G> {
    fn drop(&mut self) {
        self.answers.budget.release(self.pending.len());
        if self.started {
            self.holding(0);
        }
    }
}

impl<B, G> http_body::Body for Tracked<B, G>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
    G: Unpin,
{
    type Data = Bytes;
    type Error = BoxError;

    /// After a data frame the next move is hyper's: the answer is held (owed a poll) until
    /// hyper asks again and the body has nothing ready, or ends. So an answer whose last bytes
    /// wait in h2 for a window that never opens (hyper asks for the end only once it has some)
    /// stalls too, while a stream waiting for its next event does not.
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        let polled = this.next(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) if frame.is_data() => {
                send_watch::handed_on(&this.answers.http1, this.pending.len().max(1));
            }
            _ => this.holding(this.pending.len()),
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.pending.is_empty() && self.early.is_none() && (self.ended || self.body.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        self.size
    }
}

impl<B, G> Tracked<B, G>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    /// The next frame to hand hyper: of what is pending, the early frame, then the body's.
    fn next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self;
        if !this.pending.is_empty() {
            return Poll::Ready(Some(Ok(Frame::data(this.hand_on()))));
        }
        if let Some(early) = this.early.take() {
            return Poll::Ready(Some(early));
        }
        if this.ended {
            return Poll::Ready(None);
        }
        let frame = match ready!(Pin::new(&mut this.body).poll_frame(cx)) {
            Some(Ok(frame)) => frame,
            Some(Err(error)) => return Poll::Ready(Some(Err(error.into()))),
            None => {
                this.ended = true;
                return Poll::Ready(None);
            }
        };
        match frame.into_data() {
            Ok(data) if data.len() > CHUNK => match this.take(data) {
                Ok(()) => Poll::Ready(Some(Ok(Frame::data(this.hand_on())))),
                Err((over, data)) => Poll::Ready(Some(this.over(over, data.len()))),
            },
            Ok(data) => {
                this.started = true;
                Poll::Ready(Some(Ok(Frame::data(data))))
            }
            Err(frame) => Poll::Ready(Some(Ok(frame))),
        }
    }
}

#[cfg(test)]
#[path = "answer_tests.rs"]
mod tests;
