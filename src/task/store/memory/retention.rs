//! How long finished tasks stay: by count, by age and by their total encoded size, oldest
//! finished first. Live tasks are never evicted (their bounds are the live-task limits).
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long finished tasks stay readable. Live tasks are never evicted.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// Keep at most this many finished tasks (the oldest finished go first).
    pub max_finished: usize,
    /// Drop finished tasks this long after they finished.
    pub max_age: Duration,
    /// Keep finished tasks only while their encoded (protobuf) sizes add up to at most this,
    /// the oldest finished going first; a single task larger than this is not kept at all.
    /// The memory store enforces it on each write; Redis fleet-wide, in the background.
    pub max_bytes: usize,
}

/// The default of [`Retention::max_bytes`]: 256 MiB. With the default count (10,000) it lets
/// an average finished task hold about 26 KiB before the bytes bind first, so ordinary
/// workloads keep their full count, while 10,000 tasks of several megabytes each can no longer
/// pin tens of gigabytes.
pub const DEFAULT_MAX_BYTES: usize = 256 << 20;

impl Default for Retention {
    fn default() -> Self {
        Self { max_finished: 10_000, max_age: Duration::from_secs(3600), max_bytes: DEFAULT_MAX_BYTES }
    }
}

/// How long past its age a finished task may stay until a save evicts it (a read evicts it
/// at once).
pub const SAVE_AGE_SLACK: Duration = Duration::from_secs(1);

/// How retention counts one finished task: which entry of the order is its own (a task can
/// be forgotten and leave its entry behind) and its encoded size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    seq: u64,
    bytes: usize,
}

/// The finished tasks in the order they finished, how many there are and their encoded bytes.
#[derive(Default)]
pub struct Finished {
    order: VecDeque<(Arc<str>, Instant, u64)>,
    next_seq: u64,
    count: usize,
    bytes: usize,
}

/// The oldest entry of the order, when retention no longer keeps it.
pub struct Due {
    /// The task's id.
    pub id: Arc<str>,
    seq: u64,
}

impl Due {
    /// Whether the task stored under the id is the one this entry counts.
    pub fn counts(&self, counted: Option<Counted>) -> bool {
        counted.is_some_and(|c| c.seq == self.seq)
    }
}

impl Finished {
    /// Notes a task that has just finished, with its encoded size.
    pub fn push(&mut self, id: Arc<str>, now: Instant, bytes: usize) -> Counted {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.order.push_back((id, now, seq));
        self.count += 1;
        self.bytes += bytes;
        Counted { seq, bytes }
    }

    /// A finished task was saved again, now `bytes` long.
    pub fn resize(&mut self, counted: Counted, bytes: usize) -> Counted {
        self.bytes = self.bytes - counted.bytes + bytes;
        Counted { bytes, ..counted }
    }

    /// Stops counting a task; its entry in the order stays until it reaches the front.
    pub fn forget(&mut self, counted: Counted) {
        self.count -= 1;
        self.bytes -= counted.bytes;
    }

    /// The oldest entry if retention no longer keeps it (or it may be stale: see
    /// [`Due::counts`]).
    pub fn due(&self, retention: &Retention, now: Instant) -> Option<Due> {
        let (id, finished_at, seq) = self.order.front()?;
        let too_many = self.count > retention.max_finished;
        let too_old = now.saturating_duration_since(*finished_at) > retention.max_age;
        let too_big = self.bytes > retention.max_bytes;
        (too_many || too_old || too_big).then(|| Due { id: id.clone(), seq: *seq })
    }

    /// Whether a save should evict now. Saves evict in batches, and only once retention is
    /// exceeded by a whole `batch` of tasks (or the oldest is [`SAVE_AGE_SLACK`] overdue, or
    /// the bytes are over at all): removing a run of the oldest together walks the indexes
    /// while they are warm, where one per save walked them cold every time. Reads still evict
    /// everything due first, so what any caller sees is exact.
    pub fn save_due(&self, retention: &Retention, now: Instant, batch: usize) -> bool {
        let Some((_, finished_at, _)) = self.order.front() else { return false };
        self.count >= retention.max_finished.saturating_add(batch)
            || self.bytes > retention.max_bytes
            || now.saturating_duration_since(*finished_at) > retention.max_age.saturating_add(SAVE_AGE_SLACK)
    }

    /// Takes the oldest entry out, and the task it counted if `counted` (see [`Due::counts`]).
    pub fn pop(&mut self, counted: Option<Counted>) {
        self.order.pop_front();
        if let Some(counted) = counted {
            self.forget(counted);
        }
    }
}
