//! Group commit on a single node: the born-finished writes (`born_finished.rs`) that arrive
//! while earlier ones are on their way to Redis go together in one `MULTI`.
//!
//! Why: at full load a call's write was ten commands of its own, and most of what Redis and
//! this process spend on a command is the command, not its data (parsing, dispatch, a reply
//! to write and read). Together, tasks still take one `HSET` each, but their owner's index
//! gains them in one `ZADD`, the meta hash in one `HSET`, and retention in one `ZADD`, one
//! `HINCRBY` and one `ZCARD`.
//!
//! It is the batching loop of `batcher.rs`: no timer holds a write back, and only while
//! [`IN_FLIGHT`] batches are already out do new writes wait. An answer still means stored:
//! each caller hears only when its batch's `EXEC` has answered (and, with
//! `--redis-wait-replicas`, been replicated), and a batch that fails fails every write in it,
//! as its own `MULTI` would have; their callers' retries go through the fenced path.
use std::sync::Arc;

use tokio::sync::oneshot;

use super::batcher::{Batcher, stopped};
use super::born_finished::{BornWrite, atomic, index_commands, note_commands, own_commands, tell_retainer};
use super::conn::Redis;
use super::retention::Retainer;
use crate::error::A2aError;

/// Batches on their way to Redis at once; more writes wait and go together.
const IN_FLIGHT: usize = 2;

/// Writes in one `MULTI` at the most (64 tasks of about a kilobyte: Redis runs it in well
/// under a millisecond, so no other client waits long behind it).
const MAX_BATCH: usize = 64;

/// The way into the group commit; its loop stops when the store (this) is dropped.
pub(super) struct GroupCommit {
    batcher: Batcher<Pending>,
}

/// A write waiting for its batch, and where to say how the batch went.
struct Pending {
    write: BornWrite,
    done: oneshot::Sender<Result<(), A2aError>>,
}

impl GroupCommit {
    /// Starts the committer.
    pub(super) fn start(redis: Arc<Redis>, retainer: Arc<Retainer>) -> Self {
        let batcher = Batcher::start(IN_FLIGHT, MAX_BATCH, move |batch| {
            let (redis, retainer) = (redis.clone(), retainer.clone());
            async move { commit(&redis, &retainer, batch).await }
        });
        Self { batcher }
    }

    /// Writes `write` with whatever others come meanwhile; returns once it is stored.
    pub(super) async fn write(&self, write: BornWrite) -> Result<(), A2aError> {
        let (done, answer) = oneshot::channel();
        self.batcher.push(Pending { write, done }).await?;
        answer.await.map_err(|_| stopped())?
    }
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
