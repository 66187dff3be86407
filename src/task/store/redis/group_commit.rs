//! Group commit on a single node: the born-finished writes (`born_finished.rs`) that arrive
//! while earlier ones are on their way to Redis go together in one `MULTI`.
//!
//! Why: at full load a call's write was ten commands of its own, and most of what Redis and
//! this process spend on a command is the command, not its data (parsing, dispatch, a reply
//! to write and read). Together, tasks still take one `HSET` each, but their owner's index
//! gains them in one `ZADD`, the meta hash in one `HSET`, and retention in one `ZADD`, one
//! `HINCRBY` and one `ZCARD`.
//!
//! No timer holds a write back: one alone goes at once. Only while [`IN_FLIGHT`] batches are
//! already out do new writes wait, and then they go together when one comes back. An answer
//! still means stored: each caller hears only when its batch's `EXEC` has answered (and, with
//! `--redis-wait-replicas`, been replicated), and a batch that fails fails every write in it,
//! as its own `MULTI` would have; their callers' retries go through the fenced path.
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::{mpsc, oneshot};

use super::born_finished::{BornWrite, atomic, index_commands, note_commands, own_commands, tell_retainer};
use super::conn::Redis;
use super::retention::Retainer;
use crate::error::A2aError;

/// Batches on their way to Redis at once; more writes wait and go together.
const IN_FLIGHT: usize = 2;

/// Writes in one `MULTI` at the most (64 tasks of about a kilobyte: Redis runs it in well
/// under a millisecond, so no other client waits long behind it).
const MAX_BATCH: usize = 64;

/// Writes waiting for a batch at the most; more callers wait to join the queue (each is a
/// call in flight, which admission already bounds).
const QUEUE: usize = 1024;

/// The way into the group commit; the committer stops when the store (this) is dropped.
pub(super) struct GroupCommit {
    queue: mpsc::Sender<Pending>,
}

/// A write waiting for its batch, and where to say how the batch went.
struct Pending {
    write: BornWrite,
    done: oneshot::Sender<Result<(), A2aError>>,
}

impl GroupCommit {
    /// Starts the committer.
    pub(super) fn start(redis: Arc<Redis>, retainer: Arc<Retainer>) -> Self {
        let (queue, waiting) = mpsc::channel(QUEUE);
        tokio::spawn(committer(redis, retainer, waiting));
        Self { queue }
    }

    /// Writes `write` with whatever others come meanwhile; returns once it is stored.
    pub(super) async fn write(&self, write: BornWrite) -> Result<(), A2aError> {
        let (done, answer) = oneshot::channel();
        self.queue.send(Pending { write, done }).await.map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// The committer died with the store; only a store being dropped meets this.
fn stopped() -> A2aError {
    A2aError::Unavailable("the task store is shutting down".to_owned())
}

/// Takes what is waiting (at least one write, at most [`MAX_BATCH`]) whenever fewer than
/// [`IN_FLIGHT`] batches are out, and sends it as one batch.
async fn committer(redis: Arc<Redis>, retainer: Arc<Retainer>, mut waiting: mpsc::Receiver<Pending>) {
    let mut flights = FuturesUnordered::new();
    loop {
        let room = flights.len() < IN_FLIGHT;
        tokio::select! {
            Some(()) = flights.next(), if !flights.is_empty() => {}
            first = waiting.recv(), if room => {
                let Some(first) = first else { break };
                let mut batch = vec![first];
                while batch.len() < MAX_BATCH {
                    match waiting.try_recv() {
                        Ok(next) => batch.push(next),
                        Err(_) => break,
                    }
                }
                flights.push(commit(&redis, &retainer, batch));
            }
        }
    }
    while flights.next().await.is_some() {}
}

/// Writes `batch` in one `MULTI` and tells each writer how it went.
async fn commit(redis: &Redis, retainer: &Retainer, batch: Vec<Pending>) {
    let (writes, dones): (Vec<BornWrite>, Vec<_>) = batch.into_iter().map(|p| (p.write, p.done)).unzip();
    let mut pipe = atomic();
    own_commands(&mut pipe, &writes);
    index_commands(&mut pipe, &writes);
    let notes = note_commands(&mut pipe, &writes);
    let mut conn = redis.conn();
    let written = redis.write("born_finished", pipe.query_async::<Vec<i64>>(&mut conn)).await;
    let result = written.map(|replies| tell_retainer(retainer, &notes, &replies));
    for done in dones {
        // A writer that stopped waiting (its call was cancelled) needs no answer.
        let _ = done.send(result.clone());
    }
}
