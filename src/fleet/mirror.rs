//! Following a task that another replica runs: one follower per task per replica reads the
//! task's event stream in Redis (`XREAD BLOCK`: Redis wakes it, nothing polls) into a local
//! event log, and every subscriber on this replica reads that log. So Redis serves each event
//! once per replica, whatever the number of subscribers.
//!
//! # Why a subscriber here joins exactly
//! A subscriber first joins the follower's log at its newest event L (from then on the log
//! keeps every event for it), then reads the stored (Task, seq S) pair. The follower only
//! ever saw events the store already had, so S ≥ L: the feed skips to S and yields S+1, S+2,
//! … — nothing the snapshot holds, nothing missed.
//!
//! A resuming subscriber whose cursor is older than the feed it gets here reads the events in
//! between from the same stream ([`Inner::events_after`], through `task::fleet::CatchUp`).
use std::sync::Arc;
use std::time::Duration;

use prost::Message as _;

use super::Inner;
use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::StreamResponse;
use crate::task::fleet::StoredEvents;
use crate::task::handle::Subscription;
use crate::task::log::{EventLog, Feed, TaskEvent};
use crate::task::store::redis::EventBatch;
use crate::task::{is_terminal, state_of};

/// How long one blocking read waits before the follower looks whether anyone still reads.
const BLOCK: Duration = Duration::from_secs(2);

/// A follower nobody reads stops after this long.
const IDLE: Duration = Duration::from_secs(5);

/// Consecutive failed reads (Redis away) after which the follower gives up and its
/// subscribers end with the resumable close, to resume when the store is back.
const MAX_FAILURES: u32 = 5;

/// Events taken per read.
const READ_COUNT: usize = 512;

impl Inner {
    /// The task's snapshot and a feed of every event after it, from this replica's follower;
    /// for a resuming caller (`after`: its last generation, at most the snapshot's), a feed
    /// right after `after` instead when the follower's log still holds every event since.
    pub(super) async fn follow(
        self: &Arc<Self>,
        owner: &Owner,
        task_id: &str,
        after: Option<u64>,
    ) -> Result<Option<Subscription>, A2aError> {
        let Some(mut feed) = self.join(task_id).await? else {
            return Ok(None);
        };
        let Some((snapshot, seq)) = self.store.snapshot(owner, task_id).await? else {
            return Ok(None);
        };
        if is_terminal(state_of(snapshot.status.as_ref())) {
            return Ok(None);
        }
        if !after.is_some_and(|after| after <= seq && feed.move_to(after)) {
            feed.skip_to(seq);
        }
        Ok(Some(Subscription { snapshot, feed }))
    }

    /// A feed on this replica's follower of the task, at its newest event; the follower starts
    /// (from the stored seq) if there is none. `None` when the task is not stored.
    pub(super) async fn join(self: &Arc<Self>, task_id: &str) -> Result<Option<Feed>, A2aError> {
        if let Some(feed) = self.feed_on_existing(task_id) {
            return Ok(Some(feed));
        }
        let Some(orphan) = self.store.orphan(task_id).await? else {
            return Ok(None);
        };
        let log = Arc::new(EventLog::starting_at(
            task_id.into(),
            self.settings.log_capacity,
            self.settings.log_bytes,
            orphan.seq,
        ));
        let mut followers = self.followers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(existing) = followers.get(task_id) {
            // Another caller started one meanwhile: that one serves both.
            return Ok(Some(Feed::new(existing.clone(), existing.last_seq(), self.subscribers())));
        }
        if followers.len() >= self.settings.max_followers {
            return Err(A2aError::Unavailable(format!(
                "this replica follows {} tasks of other replicas already; try another replica",
                followers.len()
            )));
        }
        followers.insert(task_id.to_owned(), log.clone());
        // Joined under the lock, so the follower never sees this log unread and stops.
        let feed = Feed::new(log.clone(), orphan.seq, self.subscribers());
        drop(followers);
        metrics::gauge!("a2a_fleet_followers").increment(1.0);
        tokio::spawn(self.clone().run_follower(task_id.to_owned(), log, orphan.seq));
        Ok(Some(feed))
    }

    fn feed_on_existing(&self, task_id: &str) -> Option<Feed> {
        let followers = self.followers.lock().unwrap_or_else(|e| e.into_inner());
        let log = followers.get(task_id)?;
        Some(Feed::new(log.clone(), log.last_seq(), self.subscribers()))
    }

    /// Reads the task's stream into `log` until the task ends, nobody reads, or the stream
    /// cannot be followed any more.
    async fn run_follower(self: Arc<Self>, task_id: String, log: Arc<EventLog>, mut last: u64) {
        let mut idle_since = None;
        let mut failures = 0;
        let end = loop {
            if log.feeds() == 0 {
                let since = *idle_since.get_or_insert_with(tokio::time::Instant::now);
                if since.elapsed() >= IDLE && self.forget_if_unread(&task_id, &log) {
                    break None;
                }
            } else {
                idle_since = None;
            }
            match self.store.read_events(&task_id, last, Some(BLOCK), READ_COUNT).await {
                Ok(EventBatch::Events(events)) => {
                    failures = 0;
                    match self.append_all(&task_id, &log, events, &mut last) {
                        Ok(false) => {}
                        Ok(true) => break Some(None),
                        Err(error) => break Some(Some(error)),
                    }
                }
                Ok(EventBatch::Trimmed { first_seq }) => {
                    let missed = first_seq.saturating_sub(last + 1);
                    break Some(Some(A2aError::SubscriberLagged { task_id: task_id.clone(), missed }));
                }
                Err(error) => {
                    failures += 1;
                    if failures >= MAX_FAILURES {
                        // The resumable close: every event up to `last` was stored and shown,
                        // so a subscriber resumes from it on any replica that reaches Redis.
                        tracing::warn!(%task_id, %error, "a follower cannot read the task's stream");
                        let why = "this replica cannot reach the task store".to_owned();
                        let last_generation = last;
                        break Some(Some(A2aError::StreamClosed {
                            task_id: task_id.clone(),
                            last_generation,
                            why,
                        }));
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        };
        if let Some(outcome) = end {
            self.forget(&task_id, &log);
            match outcome {
                None => log.close(),
                Some(error) => log.close_with(error),
            }
        }
        metrics::gauge!("a2a_fleet_followers").decrement(1.0);
    }

    /// Up to `max` of the task's events right after `after`, read at once from its stream
    /// (on the shared connection: a resuming subscriber's catch-up, not a follower).
    pub(super) async fn events_after(
        &self,
        task_id: &str,
        after: u64,
        max: usize,
    ) -> Result<StoredEvents, A2aError> {
        match self.store.read_events(task_id, after, None, max).await? {
            EventBatch::Trimmed { .. } => Ok(StoredEvents::Trimmed),
            EventBatch::Events(events) => {
                let decoded = events.into_iter().map(|(seq, bytes)| {
                    Ok(Arc::new(TaskEvent::new(seq, decode_event(task_id, seq, &bytes)?)))
                });
                decoded.collect::<Result<_, A2aError>>().map(StoredEvents::Events)
            }
        }
    }

    /// Appends events read from the stream to the follower's log; whether the task ended.
    fn append_all(
        &self,
        task_id: &str,
        log: &EventLog,
        events: Vec<(u64, bytes::Bytes)>,
        last: &mut u64,
    ) -> Result<bool, A2aError> {
        for (seq, bytes) in events {
            let response = decode_event(task_id, seq, &bytes)?;
            let event = log.append_encoded(response, bytes);
            *last = seq;
            if event.state().is_some_and(is_terminal) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Removes the follower if still nobody reads it (checked under the lock that joins).
    fn forget_if_unread(&self, task_id: &str, log: &Arc<EventLog>) -> bool {
        let mut followers = self.followers.lock().unwrap_or_else(|e| e.into_inner());
        if log.feeds() > 0 {
            return false;
        }
        if followers.get(task_id).is_some_and(|l| Arc::ptr_eq(l, log)) {
            followers.remove(task_id);
        }
        true
    }

    fn forget(&self, task_id: &str, log: &Arc<EventLog>) {
        let mut followers = self.followers.lock().unwrap_or_else(|e| e.into_inner());
        if followers.get(task_id).is_some_and(|l| Arc::ptr_eq(l, log)) {
            followers.remove(task_id);
        }
    }
}

/// Event `seq` of a task as its stream holds it.
fn decode_event(task_id: &str, seq: u64, bytes: &[u8]) -> Result<StreamResponse, A2aError> {
    StreamResponse::decode(bytes).map_err(|e| {
        A2aError::Internal(format!("event {seq} of task {task_id} in the store does not decode: {e}"))
    })
}
