//! Batching of Redis round trips: what callers hand in while a few batches are already on
//! their way goes together in the next one. The group commit (`group_commit.rs`) and the
//! pipelined claims (`pipelined.rs`) are both this loop with their own way to send a batch.
//!
//! Why: most of what Redis and this process spend on a round trip is the round trip (a
//! `sendto` into the socket that wakes Redis, a read, a reply, a wake-up here), not its
//! commands; under load, calls that come within one round trip of each other can share it.
//!
//! No timer holds an item back: one alone goes at once. Only while `in_flight` batches are
//! out do new items wait, and then they go together when one comes back. Each batch answers
//! its own items (the `commit` function), so how a batch fails is the caller's to say.
use std::future::Future;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::mpsc;

use crate::error::A2aError;

/// Items waiting for a batch at the most; more callers wait to join the queue (each is a call
/// in flight, which admission already bounds).
const QUEUE: usize = 1024;

/// The way into one batching loop; the loop stops when this is dropped, once its batches
/// out are answered.
pub(super) struct Batcher<I> {
    queue: mpsc::Sender<I>,
}

impl<I: Send + 'static> Batcher<I> {
    /// Starts the loop: whenever fewer than `in_flight` batches are out, it takes what waits
    /// (at least one item, at most `max_batch`) and sends it with `commit`.
    pub(super) fn start<F, Fut>(in_flight: usize, max_batch: usize, commit: F) -> Self
    where
        F: Fn(Vec<I>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (queue, waiting) = mpsc::channel(QUEUE);
        tokio::spawn(batches(in_flight.max(1), max_batch.max(1), commit, waiting));
        Self { queue }
    }

    /// Hands `item` to the loop; its batch answers it.
    pub(super) async fn push(&self, item: I) -> Result<(), A2aError> {
        self.queue.send(item).await.map_err(|_| stopped())
    }
}

/// The loop died with the store; only a store being dropped meets this.
pub(super) fn stopped() -> A2aError {
    A2aError::Unavailable("the task store is shutting down".to_owned())
}

/// The loop: at most `in_flight` batches out, each of what waited when there was room.
async fn batches<I, F, Fut>(in_flight: usize, max_batch: usize, commit: F, mut waiting: mpsc::Receiver<I>)
where
    F: Fn(Vec<I>) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut flights = FuturesUnordered::new();
    loop {
        let room = flights.len() < in_flight;
        tokio::select! {
            Some(()) = flights.next(), if !flights.is_empty() => {}
            first = waiting.recv(), if room => {
                let Some(first) = first else { break };
                let mut batch = vec![first];
                while batch.len() < max_batch {
                    match waiting.try_recv() {
                        Ok(next) => batch.push(next),
                        Err(_) => break,
                    }
                }
                flights.push(commit(batch));
            }
        }
    }
    while flights.next().await.is_some() {}
}
