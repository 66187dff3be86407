//! A task waiting for input or auth expires (`--input-timeout-secs`): its actor cancels it,
//! saying why, once it has waited longer than the timeout with nothing running. The wait is
//! timed from the status that asked for input, so it survives hibernation and revival, and
//! a hibernated task is timed through the parked ledger (`task/parked.rs`, `task/sweep.rs`).
use std::time::Duration;

use super::TaskActor;
use crate::proto::{TaskState, TaskStatus};
use crate::task::metrics::TaskMetrics;
use crate::task::parked::{NEVER, input_deadline_ms, now_ms};
use crate::task::phase::Phase;
use crate::task::{is_interrupted, rules, state_of};

impl TaskActor {
    /// When the task's wait for input ends (ms since the epoch), if it waits with nothing
    /// running and there is an input timeout.
    fn input_deadline_ms(&self) -> Option<u64> {
        let timeout = self.env.input_timeout?;
        let status = self.task.status.as_ref();
        let waiting = matches!(self.phase, Phase::Live)
            && is_interrupted(state_of(status))
            && self.executions.is_empty();
        waiting.then(|| input_deadline_ms(status, Some(timeout)))
    }

    /// The input deadline on the actor's clock, to wake at.
    pub(super) fn input_deadline(&self) -> Option<tokio::time::Instant> {
        let deadline = self.input_deadline_ms()?;
        let left = Duration::from_millis(deadline.saturating_sub(now_ms()));
        Some(tokio::time::Instant::now() + left)
    }

    /// Whether the task has waited for input past the timeout.
    pub(super) fn input_expired(&self) -> bool {
        self.input_deadline_ms().is_some_and(|deadline| deadline <= now_ms())
    }

    /// Cancels the task that waited too long, with a status message saying why; subscribers,
    /// webhooks and the store see it as any cancel.
    pub(super) async fn expire(&mut self) {
        let timeout = self.env.input_timeout.unwrap_or_default();
        let what = match state_of(self.task.status.as_ref()) {
            TaskState::AuthRequired => "authorization",
            _ => "input",
        };
        let text = format!("canceled: no {what} arrived within {} (--input-timeout-secs)", span(timeout));
        tracing::info!(task_id = %self.task.id, reason = %text, "task expired");
        self.env.executor.cancel_task(&self.task).await;
        self.executions.abort_all();
        let status = TaskStatus { state: TaskState::Canceled as i32, ..rules::failure(&text) };
        self.set_status(status);
        TaskMetrics::get().expired.increment(1);
    }

    /// Notes the task in the parked ledger before it hibernates (in a fleet, before its lease
    /// goes, so no moment has it neither live nor parked); whether the ledger took it. The
    /// future holds only owned values: the actor itself is not `Sync`.
    pub(super) fn park(&self) -> impl Future<Output = bool> + Send + 'static {
        let deadline = match self.env.input_timeout {
            Some(_) => self.input_deadline_ms().unwrap_or_else(now_ms),
            None => NEVER,
        };
        let (parked, owner, task_id) =
            (self.env.parked.clone(), self.handle.owner.clone(), self.handle.id.clone());
        async move {
            let outcome = parked.park(&owner, &task_id, deadline).await;
            if let Err(error) = &outcome {
                tracing::warn!(%task_id, %error, "could not park the task; it stays live");
            }
            outcome.is_ok()
        }
    }

    /// Takes the task out of the parked ledger (it is live again); a failure leaves an entry
    /// that the sweep drops or moves when it comes due.
    pub(super) fn unpark(&self) -> impl Future<Output = ()> + Send + 'static {
        let (parked, owner, task_id) =
            (self.env.parked.clone(), self.handle.owner.clone(), self.handle.id.clone());
        async move {
            if let Err(error) = parked.unpark(&owner, &task_id).await {
                tracing::warn!(%task_id, %error, "could not unpark the task");
            }
        }
    }
}

/// A timeout as a person writes it: `24h`, `90m`, `45s`, `250ms`.
fn span(timeout: Duration) -> String {
    let secs = timeout.as_secs();
    match secs {
        0 => format!("{}ms", timeout.as_millis()),
        _ if timeout.subsec_millis() != 0 => format!("{}ms", timeout.as_millis()),
        _ if secs.is_multiple_of(3600) => format!("{}h", secs / 3600),
        _ if secs.is_multiple_of(60) => format!("{}m", secs / 60),
        _ => format!("{secs}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_as_written() {
        let spans = [86_400_000, 5_400_000, 45_000, 250, 1_500].map(|ms| span(Duration::from_millis(ms)));
        assert_eq!(spans, ["24h", "90m", "45s", "250ms", "1500ms"]);
    }
}
