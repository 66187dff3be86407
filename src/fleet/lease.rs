//! Ownership: the leases this replica holds (renewed well inside their time), and the watch
//! every replica keeps for owners that stopped renewing.
//!
//! A task owned by a replica that died (crash, `kill -9`, lost network) is found through the
//! set of owned tasks scored by lease expiry. The first survivor to win its lease ends it:
//! a task that was running is FAILED, with a status message saying its replica was lost,
//! written to its event stream like any event, so every subscriber on every replica sees it.
//! A task that was waiting for the client (INPUT_REQUIRED, AUTH_REQUIRED) lost nothing: it is
//! left hibernated, for the next call to revive anywhere, and parked as its owner would have
//! parked it on hibernating (`task/parked.rs`), so its input timeout still ends it and the
//! parked caps count it. (A task dies unparked when its owner dies before it hibernated: a
//! subscriber kept it live, or it waited less than the idle time.)
use std::sync::Arc;
use std::time::Duration;

use prost::Message as _;

use super::Inner;
use crate::proto::{StreamResponse, TaskState};
use crate::task::parked::input_deadline_ms;
use crate::task::rules::{failure, set_status, stamp_generation};
use crate::task::{is_interrupted, is_terminal, state_of};

/// Overdue tasks looked at per sweep.
const SWEEP_BATCH: usize = 100;

/// How soon the keeper tries again after Redis failed it: an owner that reconnects renews its
/// leases before anything else, well before any survivor may take its tasks.
const RENEW_RETRY: Duration = Duration::from_millis(250);

impl Inner {
    /// Renews every lease this replica holds, three times per lease period, and refreshes their
    /// expiry in the watched set. A lease that lapsed with nobody taking it (Redis was away
    /// longer than the lease, or restarted and lost it) is taken again: its owner is alive.
    pub(super) async fn run_lease_keeper(self: Arc<Self>) {
        let period = self.settings.lease / 3;
        let mut wait = period;
        loop {
            tokio::time::sleep(wait).await;
            let held: Vec<String> =
                self.held.lock().unwrap_or_else(|e| e.into_inner()).iter().cloned().collect();
            metrics::gauge!("a2a_fleet_leases_held").set(held.len() as f64);
            let mut kept = Vec::with_capacity(held.len());
            let mut failed = false;
            for task_id in held {
                match self.store.acquire_lease(&task_id, &self.replica, self.settings.lease).await {
                    Ok(true) => kept.push(task_id),
                    Ok(false) => {
                        // Taken over: the actor learns it at its next write and stops.
                        tracing::warn!(%task_id, "this replica lost the task's lease");
                        self.held.lock().unwrap_or_else(|e| e.into_inner()).remove(&task_id);
                    }
                    Err(_) => {
                        failed = true;
                        kept.push(task_id);
                    }
                }
            }
            failed |= self.store.mark_owned(&kept, self.settings.lease).await.is_err();
            wait = if failed { RENEW_RETRY.min(period) } else { period };
        }
    }

    /// Looks for tasks whose owner stopped renewing, twice per lease period, and ends them;
    /// but only once this replica has seen Redis without a break for a whole lease. Leases
    /// that expired while Redis was away (for everyone) are no evidence of a dead owner: the
    /// owners renew them as soon as they reconnect, and the wait gives them that time.
    pub(super) async fn run_sweeper(self: Arc<Self>) {
        let period = (self.settings.lease / 2).max(Duration::from_millis(200));
        loop {
            tokio::time::sleep(period).await;
            if self.store.check_restart().await.is_err() || self.store.seen_for() < self.settings.lease {
                continue;
            }
            let Ok(overdue) = self.store.overdue(SWEEP_BATCH).await else {
                continue;
            };
            for task_id in overdue {
                if let Err(error) = self.take_over(&task_id).await {
                    tracing::warn!(%task_id, %error, "taking over a task whose replica stopped failed");
                }
            }
        }
    }

    /// Ends one orphan, if its lease is really gone and this replica wins it.
    async fn take_over(&self, task_id: &str) -> Result<(), crate::error::A2aError> {
        if self.store.lease_owner(task_id).await?.is_some() {
            // Its owner lives (it renews): the watched score is just being refreshed.
            return Ok(());
        }
        if !self.store.acquire_lease(task_id, &self.replica, self.settings.lease).await? {
            return Ok(());
        }
        let outcome = self.end_orphan(task_id).await;
        let _ = self.store.disown(task_id, &self.replica).await;
        outcome
    }

    async fn end_orphan(&self, task_id: &str) -> Result<(), crate::error::A2aError> {
        let Some(orphan) = self.store.orphan(task_id).await? else {
            return Ok(());
        };
        let state = state_of(orphan.task.status.as_ref());
        if is_interrupted(state) {
            self.park_orphan(task_id, &orphan).await;
            return Ok(());
        }
        if is_terminal(state) || state == TaskState::Unspecified {
            return Ok(());
        }
        let mut task = orphan.task.clone();
        let text = "the replica running this task was lost (it stopped renewing its lease); the task failed";
        let change = set_status(&mut task, true, failure(text), None);
        let mut payload = change.into_payload().ok_or_else(|| {
            crate::error::A2aError::Internal("an announced status change without its update".into())
        })?;
        stamp_generation(&mut task, Some(&mut payload), orphan.seq + 1);
        let event = StreamResponse { payload: Some(payload) }.encode_to_vec();
        match self.store.end_orphan(&orphan, &task, event.into(), self.bounds(), &self.replica).await? {
            Ok(()) => {
                metrics::counter!("a2a_fleet_takeovers_total").increment(1);
                tracing::warn!(%task_id, "failed a task whose replica stopped");
            }
            Err(fenced) => tracing::info!(%task_id, ?fenced, "another replica ended the task first"),
        }
        Ok(())
    }

    /// Parks a waiting orphan until its input deadline, before its lease goes (as its owner
    /// would have on hibernating; a task already parked only has its deadline set again). If
    /// that fails, the task is still there for a call to revive, only not timed.
    async fn park_orphan(&self, task_id: &str, orphan: &crate::task::store::redis::Orphan) {
        let Some(env) = self.env.get().and_then(std::sync::Weak::upgrade) else { return };
        let Some(owner) = orphan.owner() else {
            tracing::warn!(%task_id, "a waiting task whose replica stopped has an unreadable owner; not parked");
            return;
        };
        let deadline = input_deadline_ms(orphan.task.status.as_ref(), env.input_timeout);
        match env.parked.park(&owner, task_id, deadline).await {
            Ok(()) => tracing::info!(%task_id, "parked a waiting task whose replica stopped"),
            Err(error) => {
                tracing::warn!(%task_id, %error, "could not park a waiting task whose replica stopped")
            }
        }
    }
}
