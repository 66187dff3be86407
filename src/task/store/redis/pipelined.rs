//! Single commands of concurrent calls, sent as one pipeline on a single node: the SendMessage
//! claim (`sent.rs`), one per call, is the one that pays.
//!
//! The multiplexed connection already pipelines whatever is queued when its driver runs, but
//! under load the claims came one by one: 0.75 `sendto` per call, each waking Redis for a few
//! commands. Here claims that come while [`IN_FLIGHT`] pipelines are out wait for one of them
//! and go together (the loop of `batcher.rs`; no timer holds one back).
//!
//! A pipeline is no transaction, and needs none: each command stands alone and gets its own
//! reply, as it would have alone. If the round trip fails, every command in it fails with the
//! same error, as each would have on that connection (a command whose reply was lost may have
//! run, as before: a claim's caller answers UNAVAILABLE and removes the record if it landed,
//! `core/idempotent.rs` `Landing`).
//! On a cluster, whose pipelines cannot cross slots, commands go alone.
use std::sync::Arc;

use redis::{Cmd, FromRedisValue, Value};
use tokio::sync::oneshot;

use super::batcher::{Batcher, stopped};
use super::conn::Redis;
use crate::error::A2aError;

/// Pipelines on their way to Redis at once; more commands wait and go together.
const IN_FLIGHT: usize = 2;

/// Commands in one pipeline at the most.
const MAX_BATCH: usize = 128;

/// Commands that go together when they come together; see the module doc.
pub(super) struct Pipelined {
    redis: Arc<Redis>,
    op: &'static str,
    /// `None` on a cluster.
    batcher: Option<Batcher<Queued>>,
}

/// A command waiting for its pipeline, and where its reply goes.
struct Queued {
    cmd: Cmd,
    done: oneshot::Sender<Result<Value, A2aError>>,
}

impl Pipelined {
    /// Starts the loop (on a single node); `op` names the round trips in metrics and logs.
    pub(super) fn start(redis: Arc<Redis>, op: &'static str) -> Self {
        let batcher = (!redis.is_cluster()).then(|| {
            let redis = redis.clone();
            Batcher::start(IN_FLIGHT, MAX_BATCH, move |batch| {
                let redis = redis.clone();
                async move { send(&redis, op, batch).await }
            })
        });
        Self { redis, op, batcher }
    }

    /// Runs `cmd` with whatever others come meanwhile and returns its reply.
    pub(super) async fn query<T: FromRedisValue>(&self, cmd: Cmd) -> Result<T, A2aError> {
        let op = self.op;
        let Some(batcher) = &self.batcher else { return self.redis.query(op, &cmd).await };
        let (done, answer) = oneshot::channel();
        batcher.push(Queued { cmd, done }).await?;
        let value = answer.await.map_err(|_| stopped())??;
        T::from_redis_value(value).map_err(|e| A2aError::Internal(format!("{op}: unexpected reply: {e}")))
    }
}

/// Sends `batch` as one pipeline and hands each command its reply.
async fn send(redis: &Redis, op: &'static str, batch: Vec<Queued>) {
    let mut pipe = redis::pipe();
    let mut dones = Vec::with_capacity(batch.len());
    for Queued { cmd, done } in batch {
        pipe.add_command(cmd);
        dones.push(done);
    }
    let mut conn = redis.conn();
    let limit = redis.timeouts().command;
    let replies = redis.run(op, limit, pipe.query_async::<Vec<Value>>(&mut conn)).await;
    match replies {
        Ok(values) if values.len() == dones.len() => {
            for (done, value) in dones.into_iter().zip(values) {
                // A caller that stopped waiting (its call was cancelled) needs no answer.
                let _ = done.send(Ok(value));
            }
        }
        outcome => {
            let error = outcome.err().unwrap_or_else(|| {
                A2aError::Internal(format!(
                    "{op}: a pipeline of {} got another number of replies",
                    dones.len()
                ))
            });
            for done in dones {
                let _ = done.send(Err(error.clone()));
            }
        }
    }
}
