//! The queue of one webhook's pending events, bounded twice: by count per webhook
//! (`--push-queue-capacity`) and by bytes over every webhook (`--push-max-queued-bytes`), so
//! no number of tasks, webhooks or slow receivers grows the memory push holds beyond a flag.
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prost::Message;
use tokio::sync::Notify;

use super::PushStats;
use super::ticket::Ticket;
use crate::task::log::TaskEvent;

/// A worker with nothing to deliver for this long stops (the dispatcher starts a new one when
/// the next event comes), so webhooks of tasks that wait for their client for days hold no
/// task and no queue meanwhile.
pub const WORKER_IDLE: Duration = Duration::from_secs(60);

/// The bytes every webhook queue together may hold.
pub struct QueueBudget {
    max: u64,
    /// Counts the bytes queued or in delivery now (`queued_bytes`, a gauge at `/metrics`).
    stats: Arc<PushStats>,
}

impl QueueBudget {
    /// A budget of `max` bytes, counted in `stats`.
    pub fn new(max: u64, stats: Arc<PushStats>) -> Self {
        Self { max, stats }
    }

    fn take(&self, bytes: u64) -> bool {
        self.stats
            .queued_bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|total| *total <= self.max)
            })
            .is_ok()
    }

    fn give(&self, bytes: u64) {
        self.stats.queued_bytes.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// An event taken from a queue for delivery: its bytes stay counted in the budget until it
/// is dropped (delivered or given up), so events waiting for a permit count too.
pub struct Taken {
    /// The event.
    pub event: Arc<TaskEvent>,
    bytes: u64,
    budget: Arc<QueueBudget>,
    /// Its share of a durable outbox entry (fleet mode), settled once delivery is over.
    ticket: Option<Ticket>,
}

impl Taken {
    /// Delivery of this event is over (delivered, given up or refused): a durable entry may
    /// be acknowledged. Dropped without this, the entry is handed out again.
    pub fn settle(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            ticket.settle();
        }
    }
}

/// One queued event.
struct Queued {
    event: Arc<TaskEvent>,
    bytes: u64,
    ticket: Option<Ticket>,
}

impl Queued {
    /// Gives the event up (shed or dropped with its queue): counted, and over for the outbox.
    fn give_up(self, budget: &QueueBudget) {
        budget.give(self.bytes);
        if let Some(ticket) = self.ticket {
            ticket.settle();
        }
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        self.budget.give(self.bytes);
    }
}

/// What became of a queued event.
#[derive(Debug, PartialEq, Eq)]
pub enum Pushed {
    /// Queued.
    Queued {
        /// Events (older chunks, or the oldest) given up to make room.
        shed: usize,
    },
    /// Not queued: the budget is spent and this queue holds nothing it could give up.
    Dropped {
        /// Events given up before that was clear.
        shed: usize,
    },
    /// The worker stopped; the event must go to a new one.
    Closed,
}

struct Inner {
    events: VecDeque<Queued>,
    /// The worker stopped (idle, config deleted, task ended): nothing is queued any more.
    closed: bool,
}

/// A webhook's bounded queue of events.
pub struct WorkerQueue {
    capacity: usize,
    budget: Arc<QueueBudget>,
    inner: Mutex<Inner>,
    wake: Notify,
    /// No more events will come (the task ended): drain and stop.
    finished: AtomicBool,
}

impl WorkerQueue {
    /// An empty queue of at most `capacity` events, drawing on `budget`.
    pub fn new(capacity: usize, budget: Arc<QueueBudget>) -> Self {
        Self {
            capacity: capacity.max(1),
            budget,
            inner: Mutex::new(Inner { events: VecDeque::new(), closed: false }),
            wake: Notify::new(),
            finished: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues an event. When the queue is full, or the shared budget is spent, it gives up
    /// its oldest artifact chunk first (then, if full, its oldest event): the newest state of
    /// a task is never dropped for an older one.
    pub fn push(&self, event: Arc<TaskEvent>) -> Pushed {
        self.push_ticketed(event, &mut None)
    }

    /// [`WorkerQueue::push`] of a durable event with its `ticket`, which the queue takes
    /// unless it is closed (settled if the event is shed or dropped).
    pub fn push_ticketed(&self, event: Arc<TaskEvent>, ticket: &mut Option<Ticket>) -> Pushed {
        let size = event.response.encoded_len() as u64;
        let mut inner = self.lock();
        if inner.closed {
            return Pushed::Closed;
        }
        let ticket = ticket.take();
        let mut shed = 0;
        if inner.events.len() >= self.capacity {
            let oldest_chunk = inner.events.iter().position(|q| q.event.state().is_none());
            if let Some(queued) = inner.events.remove(oldest_chunk.unwrap_or(0)) {
                queued.give_up(&self.budget);
                shed += 1;
            }
        }
        while !self.budget.take(size) {
            // Only a state may displace a chunk; a chunk over budget is dropped itself.
            let chunk = match event.state() {
                Some(_) => inner.events.iter().position(|q| q.event.state().is_none()),
                None => None,
            };
            match chunk.and_then(|i| inner.events.remove(i)) {
                Some(queued) => {
                    queued.give_up(&self.budget);
                    shed += 1;
                }
                None => {
                    if let Some(ticket) = ticket {
                        ticket.settle();
                    }
                    return Pushed::Dropped { shed };
                }
            }
        }
        inner.events.push_back(Queued { event, bytes: size, ticket });
        drop(inner);
        self.wake.notify_one();
        Pushed::Queued { shed }
    }

    /// No more events will come: the worker delivers what is queued and stops.
    pub fn finish(&self) {
        self.finished.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    /// Stops the queue: what is still queued is given up (and its bytes returned).
    pub fn close(&self) -> usize {
        let mut inner = self.lock();
        inner.closed = true;
        let dropped = inner.events.len();
        for queued in inner.events.drain(..) {
            queued.give_up(&self.budget);
        }
        dropped
    }

    /// Whether the worker stopped.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Queued events right now.
    pub fn len(&self) -> usize {
        self.lock().events.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The next event; `None` once the task ended and everything was taken, or after `idle`
    /// with nothing queued (the queue is then closed, so the dispatcher starts a new worker).
    pub async fn next(&self, idle: Duration) -> Option<Taken> {
        loop {
            let notified = self.wake.notified();
            {
                let mut inner = self.lock();
                if let Some(Queued { event, bytes, ticket }) = inner.events.pop_front() {
                    return Some(Taken { event, bytes, budget: self.budget.clone(), ticket });
                }
                if self.finished.load(Ordering::Acquire) {
                    inner.closed = true;
                    return None;
                }
            }
            if tokio::time::timeout(idle, notified).await.is_err() {
                let mut inner = self.lock();
                if inner.events.is_empty() {
                    inner.closed = true;
                    return None;
                }
            }
        }
    }

    #[cfg(test)]
    fn seqs(&self) -> Vec<u64> {
        self.lock().events.iter().map(|q| q.event.seq).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{
        StreamResponse, TaskArtifactUpdateEvent, TaskStatus, TaskStatusUpdateEvent, stream_response::Payload,
    };

    fn event(seq: u64, status: bool) -> Arc<TaskEvent> {
        let payload = if status {
            Payload::StatusUpdate(TaskStatusUpdateEvent {
                status: Some(TaskStatus::default()),
                ..Default::default()
            })
        } else {
            // Bigger than a state, so giving up one chunk makes room for one state.
            Payload::ArtifactUpdate(TaskArtifactUpdateEvent { task_id: "t".repeat(40), ..Default::default() })
        };
        Arc::new(TaskEvent::new(seq, StreamResponse { payload: Some(payload) }))
    }

    fn budget(max: u64) -> (Arc<QueueBudget>, Arc<PushStats>) {
        let stats = Arc::new(PushStats::default());
        (Arc::new(QueueBudget::new(max, stats.clone())), stats)
    }

    #[test]
    fn a_full_queue_sheds_chunks_before_states() {
        let queue = WorkerQueue::new(3, budget(u64::MAX).0);
        assert_eq!(queue.push(event(1, true)), Pushed::Queued { shed: 0 });
        assert_eq!(queue.push(event(2, false)), Pushed::Queued { shed: 0 });
        assert_eq!(queue.push(event(3, true)), Pushed::Queued { shed: 0 });
        assert_eq!(queue.push(event(4, true)), Pushed::Queued { shed: 1 }, "full: something is shed");
        assert_eq!(queue.seqs(), [1, 3, 4], "the chunk went first");
        assert_eq!(queue.push(event(5, true)), Pushed::Queued { shed: 1 });
        assert_eq!(queue.seqs(), [3, 4, 5], "then the oldest state; the newest is kept");
    }

    #[test]
    fn the_shared_budget_bounds_every_queue_together() {
        let size = event(0, true).response.encoded_len() as u64;
        let chunk_size = event(0, false).response.encoded_len() as u64;
        let (budget, used) = budget(2 * size + chunk_size);
        let (a, b) = (WorkerQueue::new(100, budget.clone()), WorkerQueue::new(100, budget));
        assert_eq!(a.push(event(1, true)), Pushed::Queued { shed: 0 });
        assert_eq!(a.push(event(2, false)), Pushed::Queued { shed: 0 });
        assert_eq!(b.push(event(1, true)), Pushed::Queued { shed: 0 });
        assert_eq!(PushStats::get(&used.queued_bytes), 2 * size + chunk_size);
        assert_eq!(
            b.push(event(2, false)),
            Pushed::Dropped { shed: 0 },
            "a chunk beyond the budget is dropped"
        );
        assert_eq!(b.push(event(3, true)), Pushed::Dropped { shed: 0 }, "b holds no chunk to give up");
        assert_eq!(a.push(event(3, true)), Pushed::Queued { shed: 1 }, "a gives up its chunk for a state");
        assert_eq!(a.seqs(), [1, 3]);
        assert_eq!(a.close(), 2, "closing gives the rest up");
        assert_eq!(a.push(event(4, true)), Pushed::Closed);
        assert_eq!(PushStats::get(&used.queued_bytes), size, "only b's event is still counted");
    }

    #[tokio::test]
    async fn an_idle_queue_closes_and_a_finished_one_drains_first() {
        let (budget, used) = budget(u64::MAX);
        let queue = WorkerQueue::new(10, budget.clone());
        assert!(queue.next(Duration::from_millis(10)).await.is_none(), "idle: the worker stops");
        assert!(queue.is_closed());
        assert_eq!(queue.push(event(1, true)), Pushed::Closed);

        let queue = WorkerQueue::new(10, budget);
        queue.push(event(1, true));
        queue.push(event(2, true));
        queue.finish();
        let first = queue.next(WORKER_IDLE).await.unwrap();
        assert_eq!(first.event.seq, 1);
        assert!(PushStats::get(&used.queued_bytes) > 0, "both are counted until delivered");
        drop(first);
        assert_eq!(queue.next(WORKER_IDLE).await.map(|t| t.event.seq), Some(2));
        assert!(queue.next(WORKER_IDLE).await.is_none());
        assert_eq!(PushStats::get(&used.queued_bytes), 0);
    }
}
