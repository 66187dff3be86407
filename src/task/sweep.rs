//! The sweep that expires hibernated tasks (`--input-timeout-secs`).
//!
//! A live task that waits for input times itself (its actor's deadline). A hibernated one has
//! no actor, so the sweep revives each one whose deadline in the parked ledger has passed, and
//! the revived actor, finding its deadline gone, cancels the task like a live one: the same
//! status message, subscribers, webhooks and store write. In a fleet every replica sweeps, and
//! a replica revives a task only after winning its lease, so exactly one actor, the lease's
//! owner, writes the cancel; the others find the lease taken and move on.
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::parked::{millis, now_ms};
use super::spawn::revive;
use super::{TaskEnv, is_interrupted, is_terminal, state_of};
use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::Task;

/// The longest between two sweeps: a hibernated task is canceled at most this long after its
/// deadline (a quarter of the input timeout when that is shorter).
pub const MAX_SWEEP_PERIOD: Duration = Duration::from_secs(30);

/// Due tasks taken per look at the ledger; more wait for the next sweep.
const SWEEP_BATCH: usize = 256;

/// How often the sweep looks for expired parked tasks, for an input timeout of `timeout`.
pub fn period(timeout: Duration) -> Duration {
    (timeout / 4).clamp(Duration::from_millis(50), MAX_SWEEP_PERIOD)
}

/// Sweeps until the core that owns `env` is gone.
pub(crate) async fn run(env: Weak<TaskEnv>, timeout: Duration) {
    loop {
        tokio::time::sleep(period(timeout)).await;
        let Some(env) = env.upgrade() else { return };
        let due = match env.parked.due(now_ms(), SWEEP_BATCH).await {
            Ok(due) => due,
            Err(error) => {
                tracing::warn!(%error, "could not read the parked tasks");
                continue;
            }
        };
        for (owner, task_id) in due {
            if let Err(error) = expire(&env, owner, &task_id, timeout).await {
                tracing::warn!(%task_id, %error, "could not expire a parked task");
            }
        }
    }
}

/// Revives `owner`'s due task `task_id` so that its actor cancels it; drops the entry of a
/// task that is gone or finished, and moves that of a task that is running again.
async fn expire(env: &Arc<TaskEnv>, owner: Owner, task_id: &str, timeout: Duration) -> Result<(), A2aError> {
    if env.registry.get(&owner, task_id).is_some() {
        // Live here: its actor times it.
        return Ok(());
    }
    let Some((task, seq)) = stored(env, &owner, task_id).await? else {
        return env.parked.unpark(&owner, task_id).await;
    };
    let state = state_of(task.status.as_ref());
    if is_terminal(state) {
        return env.parked.unpark(&owner, task_id).await;
    }
    if !is_interrupted(state) {
        // Running again (its actor's removal of the entry failed): looked at again later; a
        // removal here could undo the entry of its next parking.
        return env.parked.park(&owner, task_id, now_ms() + millis(timeout)).await;
    }
    let Some(fleet) = &env.fleet else {
        revive(env, owner, task, seq);
        return Ok(());
    };
    if !fleet.claim(task_id).await? {
        // Another replica holds it live (or is reviving it): its actor times it.
        return Ok(());
    }
    // Read again under the lease: what is stored now is what the last owner left.
    match fleet.stored(&owner, task_id).await? {
        Some((task, seq)) if is_interrupted(state_of(task.status.as_ref())) => {
            revive(env, owner, task, seq);
        }
        stored => {
            if env.registry.get(&owner, task_id).is_none() {
                fleet.release(task_id).await;
            }
            if stored.is_none_or(|(task, _)| is_terminal(state_of(task.status.as_ref()))) {
                env.parked.unpark(&owner, task_id).await?;
            }
        }
    }
    Ok(())
}

/// The task as stored and the last event it includes.
async fn stored(env: &TaskEnv, owner: &Owner, task_id: &str) -> Result<Option<(Arc<Task>, u64)>, A2aError> {
    match &env.fleet {
        Some(fleet) => fleet.stored(owner, task_id).await,
        None => Ok(env.store.get(owner, task_id).await?.map(|task| {
            let seq = task.generation.max(0) as u64;
            (task, seq)
        })),
    }
}
