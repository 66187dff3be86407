//! Replicated acknowledgements (`--redis-wait-replicas N`): a write that an answer or an event
//! depends on returns only once N replicas of the primary hold it.
//!
//! # Why one waiter, and why it is exact
//! `WAIT` blocks the connection it runs on, so it cannot run on the shared multiplexed one, and
//! one `WAIT` per write would cost a connection each. Instead one task per process commits in
//! groups (`docs/REDIS-FAILOVER-NOTES.md` §2): writers count their writes once their replies
//! arrived; the waiter notes the count, then sends `SET <its key> <round>` and `WAIT N T` on its
//! own connection to the same node. Replication offsets are global and monotonic, and every
//! counted write ran before that `SET`, so replicas that acknowledge the `SET` hold them all.
//! Writes that arrive meanwhile go in the next round: a writer waits at most two rounds.
//!
//! A round only counts for writes sent over the same connection (the link's generation,
//! `link.rs`): after a reconnect or a failover, the new node's offsets say nothing about writes
//! the old one took, so those writers get a failure, and their callers retry (the fenced writes
//! make a retry exact: it finds what landed, or writes it again).
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio::sync::{Notify, watch};

use super::link::{Link, ends_connection, open};
use crate::error::A2aError;

/// How replicated acknowledgements are asked for.
#[derive(Debug, Clone, Copy, Default)]
pub struct WaitFor {
    /// Replicas that must hold a write before it counts as done (0: do not wait).
    pub replicas: u32,
    /// How long a round may wait for them; a round that times out fails its writes.
    pub timeout: Duration,
}

/// What the last round decided: every write counted up to `upto` on generation
/// `generation` is replicated (`ok`) or must be treated as failed.
#[derive(Debug, Clone, Copy, Default)]
struct Verdict {
    generation: u64,
    upto: u64,
    ok: bool,
}

/// The group-commit waiter and its writers' side.
pub struct Acks {
    wait: WaitFor,
    link: Arc<Link>,
    /// Writes counted so far (each writer's ticket is the count after its own).
    written: AtomicU64,
    wake: Notify,
    verdicts: watch::Sender<Verdict>,
    /// The waiter's own key (one per process, so rounds never contend).
    key: String,
}

impl Acks {
    /// Starts the waiter for `link`; `key` is this process's own key for its rounds' `SET`.
    pub fn start(wait: WaitFor, link: Arc<Link>, key: String) -> Arc<Self> {
        let acks = Arc::new(Self {
            wait,
            link,
            written: AtomicU64::new(0),
            wake: Notify::new(),
            verdicts: watch::Sender::new(Verdict::default()),
            key,
        });
        tokio::spawn(waiter(acks.clone()));
        acks
    }

    /// Waits until the write on `generation` whose reply just arrived is held by the replicas
    /// asked for; an error (UNAVAILABLE) when they did not acknowledge it in time, or the
    /// connection changed meanwhile. Call it after every write an answer or event depends on.
    pub async fn replicated(&self, generation: u64) -> Result<(), A2aError> {
        let ticket = self.written.fetch_add(1, Ordering::AcqRel) + 1;
        let mut verdicts = self.verdicts.subscribe();
        self.wake.notify_one();
        // Two rounds at most, each bounded by the WAIT timeout and a command's time.
        let limit = 2 * (self.wait.timeout + self.link.timeouts().command);
        let verdict = tokio::time::timeout(limit, verdicts.wait_for(|v| v.upto >= ticket)).await;
        match verdict {
            Ok(Ok(verdict)) if verdict.ok && verdict.generation == generation && generation != 0 => Ok(()),
            Ok(Ok(verdict)) if verdict.ok => {
                Err(unreplicated("the connection to Redis changed before it was replicated"))
            }
            Ok(Ok(_)) => Err(unreplicated(&format!(
                "fewer than {} replica(s) acknowledged it within {:?}",
                self.wait.replicas, self.wait.timeout
            ))),
            Ok(Err(_)) => Err(unreplicated("the store is closing")),
            Err(_) => Err(unreplicated(&format!("no acknowledgement round ended within {limit:?}"))),
        }
    }
}

fn unreplicated(why: &str) -> A2aError {
    metrics::counter!("a2a_redis_unreplicated_writes_total").increment(1);
    A2aError::Unavailable(format!("the task store did not confirm a write: {why}"))
}

/// The waiter: one round at a time while writes are waiting, until the store is dropped
/// (the waiter then holds the last reference).
async fn waiter(acks: Arc<Acks>) {
    let mut conn: Option<(u64, MultiplexedConnection)> = None;
    let mut round = 0u64;
    let mut settled = 0u64;
    loop {
        let notified = acks.wake.notified();
        let written = acks.written.load(Ordering::Acquire);
        if written == settled {
            if Arc::strong_count(&acks) == 1 {
                return;
            }
            // Woken by a writer, or now and then to notice the store was dropped.
            let _ = tokio::time::timeout(Duration::from_secs(1), notified).await;
            continue;
        }
        round += 1;
        let (generation, ok) = acks.round(&mut conn, round).await;
        settled = written;
        acks.verdicts.send_replace(Verdict { generation, upto: written, ok });
    }
}

impl Acks {
    /// One round: `SET` this process's key, then `WAIT`, on a connection of the link's current
    /// generation. Returns that generation and whether enough replicas acknowledged.
    async fn round(&self, conn: &mut Option<(u64, MultiplexedConnection)>, round: u64) -> (u64, bool) {
        metrics::counter!("a2a_redis_wait_rounds_total").increment(1);
        let Ok(live) = self.link.live().await else {
            return (0, false);
        };
        if conn.as_ref().is_none_or(|(generation, _)| *generation != live.generation) {
            // A dedicated connection to the same node: its own `WAIT` blocks only itself.
            let timeouts = self.link.timeouts();
            let opened = tokio::time::timeout(timeouts.connect, open(&live.client, timeouts, None)).await;
            match opened {
                Ok(Ok(opened)) => *conn = Some((live.generation, opened)),
                _ => return (live.generation, false),
            }
        }
        let Some((generation, waiting)) = conn.as_mut() else {
            return (live.generation, false);
        };
        let wait_ms = u64::try_from(self.wait.timeout.as_millis()).unwrap_or(u64::MAX).max(1);
        let mut pipe = redis::pipe();
        pipe.cmd("SET").arg(&self.key).arg(round).arg("PX").arg(60_000).ignore();
        pipe.cmd("WAIT").arg(self.wait.replicas).arg(wait_ms);
        let limit = self.wait.timeout + self.link.timeouts().command;
        let acked = match tokio::time::timeout(limit, pipe.query_async::<(u64,)>(waiting)).await {
            Ok(Ok((acked,))) => acked,
            Ok(Err(error)) => {
                tracing::warn!(%error, "Redis WAIT failed");
                if ends_connection(&error) {
                    self.link.drop_generation(*generation);
                }
                *conn = None;
                return (live.generation, false);
            }
            Err(_) => {
                *conn = None;
                return (live.generation, false);
            }
        };
        let ok = acked >= u64::from(self.wait.replicas);
        if !ok {
            metrics::counter!("a2a_redis_wait_shortfalls_total").increment(1);
            tracing::warn!(acked, wanted = self.wait.replicas, "Redis replicas did not acknowledge in time");
        }
        (*generation, ok)
    }
}
