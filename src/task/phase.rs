//! The phases of a task's life as its actor sees them, and who waits for a new task's first
//! event.
use tokio::sync::oneshot;

use super::handle::Reply;
use super::quota::Reservation;

/// Where a task is in its life, as its actor sees it. One value, so that combinations that
/// cannot happen (hibernated yet finished, a starter waiting on a registered task) cannot be
/// written down either.
pub(super) enum Phase {
    /// A new task's agent has sent nothing yet. It may still answer with a direct message, and
    /// then there is no task at all, so until its first event the task is not registered,
    /// stored or counted; the starter waits to hear which it is.
    Starting(Box<Starter>),
    /// The task exists: registered, stored, counted in the gauges, taking commands.
    Live,
    /// The task reached a terminal state: the loop ends, the final state goes to the store and
    /// the task leaves the registry.
    Finished,
    /// There never was a task: the agent answered with a direct message, or ended or failed
    /// before its first event. Nothing was registered, stored, counted or pushed, so nothing is
    /// undone, and what the execution does afterwards (ending, above all) is ignored.
    NoTask,
    /// Idle and waiting for the client, with nobody following: the store has the task and the
    /// actor has left the registry, so the next call that needs it revives it. The loop ends.
    Hibernated,
    /// In a fleet, another replica took the task over (this one's lease had lapsed): this
    /// actor must not write again. It leaves the registry, and its subscribers end with
    /// UNAVAILABLE and resubscribe, reaching the new owner.
    Lost,
}

/// Who sent a new task's first message, until the agent's first event says whether there is a
/// task at all.
pub(super) struct Starter {
    pub(super) reply: Reply,
    /// Wakes when the first execution ends; there exactly when the sender follows the turn.
    pub(super) done: Option<oneshot::Receiver<()>>,
    /// The task's live slot: kept once the task exists, given back if it never does.
    pub(super) slot: Reservation,
}
