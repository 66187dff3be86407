//! The task metrics, kept beside the actor that updates them: tasks by state, started,
//! finished, hibernated and revived tasks, and events.
//!
//! The handles bind to the metrics recorder installed when they are first used, so the
//! recorder must come first: the server installs it (`telemetry::prometheus`) before it
//! serves a call. This module reads nothing above `task`, so the actor depends on no part of
//! the server that depends on it.
use std::sync::OnceLock;

use metrics::{Counter, Gauge};

use super::is_terminal;
use crate::proto::TaskState;

/// The handles the task actors update on every task and event. Looking a metric up by name
/// and labels costs more than the update itself, so each is looked up once.
pub(crate) struct TaskMetrics {
    /// `a2a_tasks_started_total`.
    pub started: Counter,
    /// `a2a_events_total`.
    pub events: Counter,
    /// `a2a_tasks_hibernated_total`: idle waiting tasks whose actor went to the store.
    pub hibernated: Counter,
    /// `a2a_tasks_revived_total`: hibernated tasks given an actor again.
    pub revived: Counter,
    /// `a2a_tasks_expired_total`: tasks canceled for waiting past `--input-timeout-secs`.
    pub expired: Counter,
    /// `a2a_tasks{state}` by state number, for the states a live task can be in.
    live: Vec<Option<Gauge>>,
    /// `a2a_tasks_finished_total{state}` by state number, for the terminal states.
    finished: Vec<Option<Counter>>,
}

impl TaskMetrics {
    /// The process-wide handles.
    pub fn get() -> &'static TaskMetrics {
        static TASKS: OnceLock<TaskMetrics> = OnceLock::new();
        TASKS.get_or_init(|| {
            let states = (0..=TaskState::AuthRequired as i32).map(|n| TaskState::try_from(n).ok());
            let (mut live, mut finished) = (Vec::new(), Vec::new());
            for state in states {
                let state = state.filter(|s| *s != TaskState::Unspecified);
                let terminal = state.filter(|s| is_terminal(*s));
                let waiting = state.filter(|s| !is_terminal(*s));
                live.push(waiting.map(|s| metrics::gauge!("a2a_tasks", "state" => s.as_str_name())));
                finished.push(
                    terminal
                        .map(|s| metrics::counter!("a2a_tasks_finished_total", "state" => s.as_str_name())),
                );
            }
            TaskMetrics {
                started: metrics::counter!("a2a_tasks_started_total"),
                events: metrics::counter!("a2a_events_total"),
                hibernated: metrics::counter!("a2a_tasks_hibernated_total"),
                revived: metrics::counter!("a2a_tasks_revived_total"),
                expired: metrics::counter!("a2a_tasks_expired_total"),
                live,
                finished,
            }
        })
    }

    /// The live-tasks gauge of `state` (none for UNSPECIFIED and terminal states).
    fn live(&self, state: TaskState) -> Option<&Gauge> {
        self.live.get(state as usize).and_then(Option::as_ref)
    }

    /// The finished-tasks counter of a terminal `state`.
    pub fn finished(&self, state: TaskState) -> Option<&Counter> {
        self.finished.get(state as usize).and_then(Option::as_ref)
    }
}

/// Moves a task between the live-tasks-by-state gauges (UNSPECIFIED: not counted).
pub(crate) fn track_state(from: TaskState, to: TaskState) {
    if from == to {
        return;
    }
    let metrics = TaskMetrics::get();
    if let Some(gauge) = metrics.live(from) {
        gauge.decrement(1.0);
    }
    if let Some(gauge) = metrics.live(to) {
        gauge.increment(1.0);
    }
}
