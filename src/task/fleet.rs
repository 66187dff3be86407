//! What a task needs from a fleet of replicas sharing one store: ownership, the journal its
//! actor writes, and a way to reach a task that lives on another replica.
//!
//! A trait, so the task layer (and the core above it) never knows which engine carries the
//! fleet (Redis, in `crate::fleet`). On a single server there is no fleet and every task is
//! local.
//!
//! [`CatchUp`] is how a resuming subscriber gets the events its log cannot give it from the
//! fleet's shared stream instead of a snapshot.
use std::sync::{Arc, Weak};

use async_trait::async_trait;
use bytes::Bytes;

use super::TaskEnv;
use super::handle::{Answer, FollowUp, Started, Subscription, TaskHandle};
use super::log::TaskEvent;
use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::Task;

/// A command for the actor of a task that another replica owns.
pub enum Forward {
    /// CancelTask.
    Cancel,
    /// A follow-up message, answered as `answer` asks.
    Message {
        /// The message and what the executor needs to know about its call (boxed: a cancel
        /// should not carry a message's size).
        turn: Box<FollowUp>,
        /// At once with a turn to follow, or once the turn has ended.
        answer: Answer,
    },
}

/// The owner's answer to a [`Forward`].
pub enum Forwarded {
    /// The task after CancelTask.
    Canceled(Arc<Task>),
    /// What the follow-up message led to.
    Started(Result<Started, A2aError>),
}

/// What the actor knows about a write ([`Fleet::append`]) beyond its events.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteHints {
    /// The status changed: the task moves to its new place in ListTasks.
    pub reindex: bool,
    /// No earlier try of these events failed, so none of them can have landed unanswered.
    pub first_try: bool,
    /// Nobody can see these events but through the Task they produced: no subscriber, no
    /// caller following the turn, no webhook. A task finished by such a first write needs no
    /// event stream (a resume from before its end gets the Task first, resume.md §4.4).
    pub unwatched: bool,
    /// Only artifacts changed since the Task was last stored, at most [`Fleet::task_lag`]
    /// events ago, counting these: the store may keep the Task it has, behind these events,
    /// rather than rewrite the whole of it (which grows with every chunk) for each write;
    /// readers replay the rest.
    pub task_may_lag: bool,
}

/// The fleet, as a task sees it. Every method is about one task; `Ok(None)` always means "not
/// where you thought: look the task up again" (it finished, hibernated or moved meanwhile).
#[async_trait]
pub trait Fleet: Send + Sync + 'static {
    /// Starts the fleet's own work (the inbox, lease renewal, watching for dead owners) for
    /// the tasks of `env`; called once, when the core is built.
    fn attach(&self, env: Weak<TaskEnv>);

    /// Takes webhook delivery over from the actors, delivering from a durable outbox the
    /// store writes with the events; `false` when this fleet's store has none (then the
    /// actors hand events to `push` as on one server).
    fn deliver_webhooks(&self, push: Arc<crate::push::PushDispatcher>) -> bool;

    /// Takes the task's lease for this replica, to run its actor here; `false` if another
    /// replica holds it.
    async fn claim(&self, task_id: &str) -> Result<bool, A2aError>;

    /// Gives the task's lease up: its actor here finished or hibernated.
    async fn release(&self, task_id: &str);

    /// The stored task and the seq of the last event it includes (to revive it where its
    /// numbering left off).
    async fn stored(&self, owner: &Owner, task_id: &str) -> Result<Option<(Arc<Task>, u64)>, A2aError>;

    /// Writes `events` (encoded, numbered from `first_seq`) and `task`, the Task after them, in
    /// one atomic step, so that a reader on any replica joins exactly; with `reindex`, also
    /// [`WriteHints`] say what else the write must do and which cheaper paths are sound.
    /// `Ok(false)`: this replica no longer owns the task (its lease went to another); the
    /// actor must stop.
    async fn append(
        &self,
        owner: &Owner,
        task: &Task,
        first_seq: u64,
        events: Vec<Bytes>,
        hints: WriteHints,
    ) -> Result<bool, A2aError>;

    /// Follows a task owned by another replica (or by none): the Task, then every event after
    /// it, from this replica's one follower of that task.
    /// With `after` (a resuming caller's last generation), the feed starts right after it
    /// instead when this replica's log still holds every event since.
    async fn follow(
        &self,
        owner: &Owner,
        task_id: &str,
        after: Option<u64>,
    ) -> Result<Option<Subscription>, A2aError>;

    /// Up to `max` of the task's events right after `after`, as the shared stream holds them
    /// (every event stored is there until the stream is trimmed past it).
    async fn events_after(&self, task_id: &str, after: u64, max: usize) -> Result<StoredEvents, A2aError>;

    /// Hands `command` to the replica that owns the task and waits for its answer; `Ok(None)`
    /// when no replica owns it now.
    async fn forward(
        &self,
        owner: &Owner,
        task_id: &str,
        command: Forward,
    ) -> Result<Option<Forwarded>, A2aError>;

    /// How long an actor keeps its callers waiting for a write the store refuses (it goes on
    /// retrying after that): a lease, the time other replicas give an owner before they could
    /// take its task over.
    fn write_patience(&self) -> std::time::Duration;

    /// Events a stored Task may lag behind its stream while only artifacts come (0: none).
    fn task_lag(&self) -> usize;

    /// Whether the shared store answers now (for health and readiness); remembered for
    /// [`Fleet::unavailable`].
    async fn healthy(&self) -> bool;

    /// The fleet's ledger of parked tasks (hibernated, waiting for input), shared by every
    /// replica so each can expire and count them (`task/parked.rs`).
    fn parked_tasks(&self) -> Arc<dyn super::parked::ParkedTasks>;

    /// Why calls cannot be served now, when the last health check found the store away:
    /// refusing them at once beats answering from this replica's memory alone.
    fn unavailable(&self) -> Option<A2aError>;
}

/// What the shared stream holds after a position ([`Fleet::events_after`]).
pub enum StoredEvents {
    /// The events right after it, consecutive; none when nothing after it is stored yet.
    Events(Vec<Arc<TaskEvent>>),
    /// The event right after it is gone: the stream was trimmed past it.
    Trimmed,
}

/// Events read from the shared stream per round trip: what one catching-up subscriber holds.
const PAGE: usize = 64;

/// The events a resuming subscriber missed that its feed does not hold, read from the fleet's
/// shared stream: `(after, upto]`, where `after` is the generation the subscriber saw last and
/// its feed yields `upto + 1` onwards. One place for both ways a feed starts late: this replica
/// follows another replica's task with a log that starts after the cursor, or owns the task
/// but its log dropped (or never held) the events since.
///
/// Read a page at a time as the subscriber takes them, so a long gap costs memory for one
/// page, not for the gap; the feed's log keeps what arrives meanwhile within its own bounds,
/// as it does for any slow subscriber.
pub struct CatchUp {
    fleet: Arc<dyn Fleet>,
    task_id: String,
    /// The last event yielded (at first the subscriber's cursor).
    cursor: u64,
    /// The last event to read here; the feed yields the ones after.
    upto: u64,
    page: std::vec::IntoIter<Arc<TaskEvent>>,
}

impl CatchUp {
    /// The catch-up of `(after, upto]` for `task_id`, its first page read; `None` when the
    /// stream does not hold event `after + 1` (trimmed past it, or not stored): the subscriber
    /// needs the Task instead.
    pub async fn start(
        fleet: Arc<dyn Fleet>,
        task_id: &str,
        after: u64,
        upto: u64,
    ) -> Result<Option<Self>, A2aError> {
        let empty = Vec::new().into_iter();
        let mut catch_up = Self { fleet, task_id: task_id.to_owned(), cursor: after, upto, page: empty };
        match catch_up.read_page().await? {
            StoredEvents::Events(page) if !page.is_empty() => {
                catch_up.page = page.into_iter();
                Ok(Some(catch_up))
            }
            _ => Ok(None),
        }
    }

    /// The generation of the last event yielded (before the first: the subscriber's cursor).
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// The next missed event; `None` once the feed's start is reached. An error ends it: the
    /// stream was trimmed past the next event meanwhile (`SUBSCRIBER_LAGGED`, as a feed the
    /// log left behind), or the store does not answer or lacks the event (a feed only shows
    /// stored events, so it cannot; the resumable close, should it ever).
    pub async fn next(&mut self) -> Option<Result<Arc<TaskEvent>, A2aError>> {
        loop {
            if let Some(event) = self.page.next() {
                self.cursor = event.seq;
                return Some(Ok(event));
            }
            if self.cursor >= self.upto {
                return None;
            }
            let failure = match self.read_page().await {
                Ok(StoredEvents::Events(page)) if !page.is_empty() => {
                    self.page = page.into_iter();
                    continue;
                }
                Ok(StoredEvents::Events(_)) => A2aError::StreamClosed {
                    task_id: self.task_id.clone(),
                    last_generation: self.cursor,
                    why: "the task's next event is not in its stream".into(),
                },
                Ok(StoredEvents::Trimmed) => A2aError::SubscriberLagged {
                    task_id: self.task_id.clone(),
                    missed: self.upto - self.cursor,
                },
                Err(error) => error,
            };
            self.upto = self.cursor;
            return Some(Err(failure));
        }
    }

    /// The next page after the cursor, never past `upto`, checked to be consecutive.
    async fn read_page(&self) -> Result<StoredEvents, A2aError> {
        let max = (self.upto - self.cursor).min(PAGE as u64) as usize;
        let read = self.fleet.events_after(&self.task_id, self.cursor, max).await?;
        if let StoredEvents::Events(page) = &read
            && (page.len() > max || page.iter().zip(self.cursor + 1..).any(|(event, seq)| event.seq != seq))
        {
            return Err(A2aError::Internal(format!(
                "the stored events of task {} after {} are not the next ones",
                self.task_id, self.cursor
            )));
        }
        Ok(read)
    }
}

/// Where a live task's actor is: here, or on another replica of the fleet. The core asks
/// either the same way.
pub enum TaskRef {
    /// The actor runs in this process.
    Local(TaskHandle),
    /// Another replica runs it (or none does yet: following still works).
    Remote {
        /// The fleet that reaches it.
        fleet: Arc<dyn Fleet>,
        /// Whose task it is.
        owner: Owner,
        /// The task.
        task_id: String,
    },
}

impl TaskRef {
    /// The task now, with the feed of everything after; with `after` (a resuming caller's
    /// last generation), a feed right after it instead when the local log still holds every
    /// event since (for another replica's task: this replica's follower's log).
    pub async fn subscribe(&self, after: Option<u64>) -> Result<Option<Subscription>, A2aError> {
        match self {
            Self::Local(handle) => handle.subscribe_after(after).await.transpose(),
            Self::Remote { fleet, owner, task_id } => fleet.follow(owner, task_id, after).await,
        }
    }

    /// Cancels the task; the CANCELED task.
    pub async fn cancel(&self) -> Result<Option<Arc<Task>>, A2aError> {
        match self {
            Self::Local(handle) => handle.cancel().await.transpose(),
            Self::Remote { fleet, owner, task_id } => {
                match fleet.forward(owner, task_id, Forward::Cancel).await? {
                    Some(Forwarded::Canceled(task)) => Ok(Some(task)),
                    Some(Forwarded::Started(_)) => {
                        Err(A2aError::Internal("a cancel was answered as a message".into()))
                    }
                    None => Ok(None),
                }
            }
        }
    }

    /// Hands a follow-up message to the task; answered as `answer` asks.
    pub(crate) async fn send_message(
        &self,
        turn: FollowUp,
        answer: Answer,
    ) -> Result<Option<Result<Started, A2aError>>, A2aError> {
        match self {
            Self::Local(handle) => Ok(handle.send_message(turn, answer).await),
            Self::Remote { fleet, owner, task_id } => {
                match fleet.forward(owner, task_id, Forward::Message { turn: Box::new(turn), answer }).await?
                {
                    Some(Forwarded::Started(started)) => Ok(Some(started)),
                    Some(Forwarded::Canceled(_)) => {
                        Err(A2aError::Internal("a message was answered as a cancel".into()))
                    }
                    None => Ok(None),
                }
            }
        }
    }
}
