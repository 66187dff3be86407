//! The per-task event log: every event the actor publishes, numbered, kept in a bounded ring.
//!
//! The log *is* the fan-out. The actor appends and wakes the waiting readers; each subscriber keeps
//! a cursor (the last sequence number it has seen) and reads forward from it. No subscriber has
//! a queue of its own, so a subscriber that stops reading costs nothing but its cursor and never
//! delays the agent or anyone else. One that falls further behind than the ring reaches is told
//! so explicitly ([`A2aError::SubscriberLagged`]) instead of silently missing events.
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use bytes::Bytes;

use crate::error::A2aError;
use crate::proto::{StreamResponse, TaskState, stream_response::Payload};
use tokio::sync::Notify;

/// One published event of a task, with its per-task sequence number (starting at 1).
#[derive(Debug)]
pub struct TaskEvent {
    /// Position in the task's event stream; the snapshot a subscriber starts from is taken at
    /// some sequence number and the subscriber then receives every event after it.
    pub seq: u64,
    /// The event as it goes on the wire (a status or artifact update).
    pub response: StreamResponse,
    /// The protobuf encoding, made once for every gRPC subscriber.
    proto: OnceLock<Bytes>,
    /// The ProtoJSON encoding, made once for every SSE subscriber: `[v1.0 form, with the
    /// dev-1.1 generation fields]`.
    json: [OnceLock<Arc<str>>; 2],
}

impl TaskEvent {
    /// An event (or a snapshot, at the sequence number it was taken at).
    pub fn new(seq: u64, response: StreamResponse) -> Self {
        Self { seq, response, proto: OnceLock::new(), json: [OnceLock::new(), OnceLock::new()] }
    }

    /// The protobuf encoding of `response`, computed by the first subscriber that asks.
    pub fn proto_bytes(&self) -> Bytes {
        self.proto.get_or_init(|| Bytes::from(prost::Message::encode_to_vec(&self.response))).clone()
    }

    /// The JSON encoding of `response` made by `encode`, computed by the first subscriber that
    /// asks (the bindings own the JSON mapping; the log only keeps the result). `generation`:
    /// the form with A2A dev-1.1's `generation` fields, cached apart from the v1.0 form.
    pub fn json(&self, generation: bool, encode: impl FnOnce(&StreamResponse) -> String) -> Arc<str> {
        self.json[usize::from(generation)].get_or_init(|| encode(&self.response).into()).clone()
    }

    /// The task state this event moves to, if it is a status update.
    pub fn state(&self) -> Option<TaskState> {
        match &self.response.payload {
            Some(Payload::StatusUpdate(update)) => Some(super::state_of(update.status.as_ref())),
            _ => None,
        }
    }
}

/// What the byte bound charges for one event besides its encoding: the event's struct (480
/// bytes: the payload enum is as large as a whole Task), the slot and count that point to it,
/// and the allocator's share of its ids and parts.
const EVENT_OVERHEAD: usize = size_of::<TaskEvent>() + size_of::<Arc<TaskEvent>>() + 64;

/// The memory one event holds, as the byte bound counts it: its overhead, the decoded event's
/// heap (about its encoded size) and one cached encoding (about as long). So
/// `--event-log-bytes` bounds memory rather than wire bytes, and a burst of small events is
/// bounded by it rather than by the event count. Measured (a2a-bench `burst`): 20,000 demo
/// chunks are counted 15 MiB and take about 19 MiB, the allocator's share of the small ids and
/// parts being more than counted; a ProtoJSON encoding cached for SSE readers adds to that.
fn footprint(event: &TaskEvent) -> usize {
    EVENT_OVERHEAD + 2 * prost::Message::encoded_len(&event.response)
}

struct Ring {
    events: VecDeque<Arc<TaskEvent>>,
    /// The [`footprint`] of `events`.
    bytes: usize,
    /// Sequence number of the newest event (0 before the first).
    last_seq: u64,
    /// Set after the final event: readers that reach the end stop.
    closed: bool,
    /// Why the log closed early, if it did: readers that reach the end get this instead of an
    /// ordinary end (a follower that lost its source, an owner that lost its lease). Boxed:
    /// rare, and every live task has a log (80 bytes inline).
    error: Option<Box<A2aError>>,
}

/// A bounded, sequenced, append-only (by the actor) event log shared with subscribers.
pub struct EventLog {
    task_id: Arc<str>,
    capacity: usize,
    max_bytes: usize,
    ring: RwLock<Ring>,
    /// Wakes the feeds waiting for an event (one `Notify`: a watch channel would cost about
    /// 300 bytes more per task).
    appended: Notify,
    /// Feeds reading this log. With none (and none ever, see `followed`), no event is kept:
    /// a new feed starts after the newest event, so a task nobody follows holds no events.
    feeds: AtomicUsize,
    /// Set by the first feed: from then on the log keeps its events (within its bounds) even
    /// while nobody reads, so a subscriber that lost its connection can resume from them.
    followed: AtomicBool,
}

impl EventLog {
    /// An empty log keeping at most `capacity` events and about `max_bytes` of memory for them
    /// (by `footprint`; the newest event is always kept). The byte bound is the one that
    /// normally holds: it keeps a long burst of small events for a lagging subscriber, and a
    /// task emitting large artifacts fewer of them.
    pub fn new(task_id: Arc<str>, capacity: usize, max_bytes: usize) -> Self {
        Self::starting_at(task_id, capacity, max_bytes, 0)
    }

    /// An empty log whose next event is `last_seq + 1`: a revived task's numbering goes on
    /// where it left off, and a fleet follower's numbers are the owner's.
    pub fn starting_at(task_id: Arc<str>, capacity: usize, max_bytes: usize, last_seq: u64) -> Self {
        let ring = Ring { events: VecDeque::new(), bytes: 0, last_seq, closed: false, error: None };
        Self {
            task_id,
            capacity: capacity.max(1),
            max_bytes,
            ring: RwLock::new(ring),
            appended: Notify::new(),
            feeds: AtomicUsize::new(0),
            followed: AtomicBool::new(false),
        }
    }

    /// Whether a feed reads this log, or ever did (resuming readers may still come): if not,
    /// an event needs no building, only a number ([`Self::skip`]).
    pub fn followed(&self) -> bool {
        self.followed.load(Ordering::Relaxed)
    }

    /// Numbers an event nobody reads (the log is not [`Self::followed`], so it keeps none).
    pub fn skip(&self) {
        let mut ring = self.ring.write().unwrap_or_else(|e| e.into_inner());
        ring.last_seq += 1;
    }

    /// Appends an event, numbering it, and wakes the readers.
    pub fn append(&self, response: StreamResponse) -> Arc<TaskEvent> {
        self.append_with(response, None)
    }

    /// Appends an event that arrived already encoded (from a fleet's shared stream), so its
    /// subscribers reuse those bytes instead of encoding it again.
    pub fn append_encoded(&self, response: StreamResponse, proto: Bytes) -> Arc<TaskEvent> {
        self.append_with(response, Some(proto))
    }

    fn append_with(&self, response: StreamResponse, proto: Option<Bytes>) -> Arc<TaskEvent> {
        let event = {
            let mut ring = self.ring.write().unwrap_or_else(|e| e.into_inner());
            let event = TaskEvent::new(ring.last_seq + 1, response);
            if let Some(proto) = proto {
                let _ = event.proto.set(proto);
            }
            let event = Arc::new(event);
            self.push(&mut ring, event.clone());
            event
        };
        self.appended.notify_waiters();
        event
    }

    /// Appends an event the actor numbered itself: in a fleet an event is numbered when the
    /// agent sends it but shown only once the store holds it, so it reaches the log later,
    /// with the number it already has (the next one: the actor appends in order).
    pub fn append_numbered(&self, event: Arc<TaskEvent>) {
        {
            let mut ring = self.ring.write().unwrap_or_else(|e| e.into_inner());
            debug_assert_eq!(event.seq, ring.last_seq + 1, "events reach the log in order");
            self.push(&mut ring, event);
        }
        self.appended.notify_waiters();
    }

    /// Puts `event` (numbered `last_seq + 1`) at the end of the ring, within its bounds.
    fn push(&self, ring: &mut Ring, event: Arc<TaskEvent>) {
        ring.last_seq = event.seq;
        // Feeds are made by the actor, which is also the only appender: no feed can appear
        // between this check and the push.
        if self.feeds.load(Ordering::Relaxed) == 0 && !self.followed.load(Ordering::Relaxed) {
            ring.events.clear();
            ring.bytes = 0;
            return;
        }
        ring.bytes += footprint(&event);
        ring.events.push_back(event);
        while ring.events.len() > self.capacity || (ring.bytes > self.max_bytes && ring.events.len() > 1) {
            if let Some(oldest) = ring.events.pop_front() {
                ring.bytes -= footprint(&oldest);
            }
        }
    }

    /// Marks the end of the stream: readers stop after the last event.
    pub fn close(&self) {
        self.ring.write().unwrap_or_else(|e| e.into_inner()).closed = true;
        self.appended.notify_waiters();
    }

    /// Ends the stream early: readers get `error` after the last event (unless it is closed
    /// already, when the ordinary end stands).
    pub fn close_with(&self, error: A2aError) {
        {
            let mut ring = self.ring.write().unwrap_or_else(|e| e.into_inner());
            if ring.closed {
                return;
            }
            ring.closed = true;
            ring.error = Some(Box::new(error));
        }
        self.appended.notify_waiters();
    }

    /// How many feeds read this log now.
    pub fn feeds(&self) -> usize {
        self.feeds.load(Ordering::Relaxed)
    }

    /// Sequence number of the newest event.
    pub fn last_seq(&self) -> u64 {
        self.ring.read().unwrap_or_else(|e| e.into_inner()).last_seq
    }

    /// Whether the log holds every event after `cursor` (so a feed may start there). A cursor
    /// past the newest event does not qualify.
    pub fn holds_after(&self, cursor: u64) -> bool {
        let ring = self.ring.read().unwrap_or_else(|e| e.into_inner());
        let first_seq = ring.last_seq + 1 - ring.events.len() as u64;
        cursor <= ring.last_seq && cursor + 1 >= first_seq
    }

    /// Up to `max` events after `cursor`, and whether the log is closed with nothing after them.
    fn read_after(&self, cursor: u64, max: usize) -> Result<(Vec<Arc<TaskEvent>>, bool), A2aError> {
        let ring = self.ring.read().unwrap_or_else(|e| e.into_inner());
        let first_seq = ring.last_seq + 1 - ring.events.len() as u64;
        if cursor + 1 < first_seq {
            return Err(A2aError::SubscriberLagged {
                task_id: self.task_id.to_string(),
                missed: first_seq - cursor - 1,
            });
        }
        let skip = (cursor + 1 - first_seq) as usize;
        // `range` seeks; a subscriber deep in a long log must not walk it per batch.
        let batch: Vec<_> = ring.events.range(skip.min(ring.events.len())..).take(max).cloned().collect();
        let at_end = skip + batch.len() >= ring.events.len();
        if ring.closed
            && at_end
            && batch.is_empty()
            && let Some(error) = &ring.error
        {
            return Err(A2aError::clone(error));
        }
        Ok((batch, ring.closed && at_end && ring.error.is_none()))
    }
}

/// Counts open subscriptions; each [`Feed`] holds one unit for its lifetime.
#[derive(Debug, Default)]
pub struct SubscriberCount(AtomicUsize);

impl SubscriberCount {
    /// Open subscriptions right now.
    pub fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

struct CountGuard(Arc<SubscriberCount>);

impl CountGuard {
    fn new(count: Arc<SubscriberCount>) -> Self {
        count.0.fetch_add(1, Ordering::Relaxed);
        Self(count)
    }
}

impl Drop for CountGuard {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How many events a feed takes from the log per lock.
const BATCH: usize = 64;

/// A subscriber's position in a task's log. Dropping it ends the subscription at once.
pub struct Feed {
    log: Arc<EventLog>,
    cursor: u64,
    pending: std::vec::IntoIter<Arc<TaskEvent>>,
    done: bool,
    _count: CountGuard,
}

impl Feed {
    /// A feed that yields every event after `cursor`.
    pub fn new(log: Arc<EventLog>, cursor: u64, count: Arc<SubscriberCount>) -> Self {
        log.feeds.fetch_add(1, Ordering::Relaxed);
        log.followed.store(true, Ordering::Relaxed);
        Self { log, cursor, pending: Vec::new().into_iter(), done: false, _count: CountGuard::new(count) }
    }

    /// The sequence number of the last event this feed has yielded (or started after).
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// Skips the events up to `seq` (a snapshot taken at `seq` already holds them); the log
    /// keeps them for this feed from its creation on, so skipping ahead never loses one.
    pub fn skip_to(&mut self, seq: u64) {
        self.cursor = self.cursor.max(seq);
    }

    /// Moves the feed so that it yields the events after `seq` (a resuming subscriber's last
    /// generation): forward always (those events are on their way), backward only while the
    /// log still holds every event after `seq`. Whether it moved there.
    pub fn move_to(&mut self, seq: u64) -> bool {
        if seq < self.cursor && !self.log.holds_after(seq) {
            return false;
        }
        self.cursor = seq;
        true
    }

    /// The next event, `None` once the task's stream has ended, or an error if this feed fell
    /// behind the log's reach (after which it yields `None`).
    pub async fn next(&mut self) -> Option<Result<Arc<TaskEvent>, A2aError>> {
        loop {
            if let Some(event) = self.pending.next() {
                self.cursor = event.seq;
                return Some(Ok(event));
            }
            if self.done {
                return None;
            }
            // Register for the next append *before* reading, so an append that lands after the
            // read still wakes us below.
            let appended = self.log.appended.notified();
            let mut appended = std::pin::pin!(appended);
            appended.as_mut().enable();
            match self.log.read_after(self.cursor, BATCH) {
                Err(error) => {
                    if matches!(error, A2aError::SubscriberLagged { .. }) {
                        metrics::counter!("a2a_subscriber_lag_disconnects_total").increment(1);
                    }
                    self.done = true;
                    return Some(Err(error));
                }
                Ok((batch, ended)) => {
                    if batch.len() == BATCH {
                        // A full batch: this subscriber was behind and is catching up from the log.
                        metrics::counter!("a2a_subscriber_catchups_total").increment(1);
                    }
                    self.done = ended;
                    if batch.is_empty() && !ended {
                        appended.await;
                        continue;
                    }
                    self.pending = batch.into_iter();
                }
            }
        }
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.log.feeds.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests;
