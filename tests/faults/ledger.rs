//! What the clients of one fault scenario were told, and the checks against it: every answer
//! and every stream item is recorded here as it arrives; afterwards the store is read back and
//! each record must hold there ([`Ledger::verify`]), and the counts become a row of the table.
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use a2a_server::proto::stream_response::Payload;
use a2a_server::proto::{StreamResponse, Task, TaskState};
use serde_json::Value;

/// Which error answers a fault excuses: the ErrorInfo reasons a client may get and retry
/// without it counting as a failed call. Anything else (an nginx 502, a reset stream, a
/// refusal of a valid cursor, a client-side timeout) is a failed call.
#[derive(Clone, Copy)]
pub struct Policy {
    /// Excused reasons (`UNAVAILABLE` while Redis is down, the resumable `STREAM_CLOSED`).
    pub excused: &'static [&'static str],
    /// The state every task the clients start must end in.
    pub expected_end: TaskState,
}

/// A stream item or answer reduced to what the checks need, from either wire (gRPC or SSE).
#[derive(Debug, Clone)]
pub struct Item {
    pub task_id: String,
    pub generation: i64,
    /// A Task snapshot (not an event).
    pub snapshot: bool,
    pub state: Option<TaskState>,
    /// What the event said, to compare with what others saw at the same generation.
    pub fingerprint: String,
}

impl Item {
    /// Terminal states end a stream.
    pub fn terminal(&self) -> bool {
        self.state.is_some_and(terminal)
    }

    pub fn from_proto(item: &StreamResponse) -> Option<Self> {
        let (task_id, generation, snapshot, status) = match &item.payload {
            Some(Payload::Task(task)) => (task.id.clone(), task.generation, true, task.status.as_ref()),
            Some(Payload::StatusUpdate(u)) => (u.task_id.clone(), u.generation, false, u.status.as_ref()),
            Some(Payload::ArtifactUpdate(u)) => {
                let parts = u.artifact.as_ref().map(|a| a.parts.as_slice()).unwrap_or_default();
                let fingerprint = format!("artifact {}", crate::common::texts(parts).join("|"));
                let id = u.task_id.clone();
                return Some(Self {
                    task_id: id,
                    generation: u.generation,
                    snapshot: false,
                    state: None,
                    fingerprint,
                });
            }
            _ => return None,
        };
        let state = status.and_then(|s| TaskState::try_from(s.state).ok());
        let text = status
            .and_then(|s| s.message.as_ref())
            .map(|m| crate::common::texts(&m.parts).join(" "))
            .unwrap_or_default();
        let fingerprint = format!("status {} {text}", state.map_or("?", |s| s.as_str_name()));
        Some(Self { task_id, generation, snapshot, state, fingerprint })
    }

    /// A ProtoJSON StreamResponse (an SSE event's data), its generation from the event's `id:`.
    pub fn from_json(item: &Value, id: Option<i64>) -> Option<Self> {
        let generation_of = |v: &Value| {
            v.get("generation").and_then(|g| g.as_str().and_then(|s| s.parse().ok()).or(g.as_i64()))
        };
        let state_of = |status: Option<&Value>| {
            status.and_then(|s| s.get("state")).and_then(|s| s.as_str()).and_then(TaskState::from_str_name)
        };
        let text_of = |status: Option<&Value>| {
            status
                .and_then(|s| s.pointer("/message/parts"))
                .and_then(|p| p.as_array())
                .map(|parts| parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join(" "))
                .unwrap_or_default()
        };
        let (body, snapshot, task_id) = if let Some(task) = item.get("task") {
            (task, true, task["id"].as_str()?.to_owned())
        } else if let Some(update) = item.get("statusUpdate") {
            (update, false, update["taskId"].as_str()?.to_owned())
        } else if let Some(update) = item.get("artifactUpdate") {
            let texts = crate::common::json_chunks(item).join("|");
            let generation = generation_of(update).or(id)?;
            let task_id = update["taskId"].as_str()?.to_owned();
            let fingerprint = format!("artifact {texts}");
            return Some(Self { task_id, generation, snapshot: false, state: None, fingerprint });
        } else {
            return None;
        };
        let status = body.get("status");
        let state = state_of(status);
        let fingerprint = format!("status {} {}", state.map_or("?", |s| s.as_str_name()), text_of(status));
        Some(Self { task_id, generation: generation_of(body).or(id)?, snapshot, state, fingerprint })
    }
}

/// Wall-clock seconds with milliseconds, as the scenario's timeline and the replicas' logs.
fn stamp() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    format!("{}.{:03}", now.as_secs(), now.subsec_millis())
}

pub fn terminal(state: TaskState) -> bool {
    matches!(state, TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected)
}

/// How far along a state is: an answer's state must be reached by the stored one.
fn rank(state: TaskState) -> u8 {
    match state {
        TaskState::Unspecified => 0,
        TaskState::Submitted => 1,
        TaskState::Working => 2,
        TaskState::InputRequired | TaskState::AuthRequired => 3,
        _ => 4,
    }
}

/// The words a survivor's takeover puts in the FAILED status (src/fleet/lease.rs).
pub const REPLICA_LOST: &str = "was lost";

#[derive(Default)]
struct TaskRecord {
    /// The furthest state and the highest generation a SendMessage answered with.
    answered: Option<(TaskState, i64)>,
    /// Every generation any client saw, with what it said.
    seen: BTreeMap<i64, String>,
    /// How many artifact chunks a `stream N MS` task must end with.
    chunks: Option<u64>,
    /// Whether a client saw a status saying the task's replica was lost.
    replica_lost_seen: bool,
}

#[derive(Default)]
struct Inner {
    tasks: HashMap<String, TaskRecord>,
    acknowledged: u64,
    excused: u64,
    failed_calls: Vec<String>,
    lost: Vec<String>,
    forks: Vec<String>,
    gaps: Vec<String>,
    snapshot_resumes: Vec<String>,
    replica_lost: Vec<String>,
    final_task_resumes: Vec<String>,
    longest_reconnect: Duration,
    slowest_failed: Option<Duration>,
    late: Vec<String>,
    /// Every item and error each client got, in order, for the scenario's log file.
    trace: Vec<String>,
}

/// One scenario's record; shared by every client task.
pub struct Ledger {
    pub policy: Policy,
    inner: Mutex<Inner>,
}

/// One row of the table.
pub struct Row {
    pub fault: String,
    pub acknowledged: u64,
    pub lost: usize,
    pub forks: usize,
    pub snapshot_resumes: usize,
    pub failed_calls: usize,
    pub gaps: usize,
    pub replica_lost: usize,
    pub excused: u64,
    /// Resumes of a task that ended meanwhile, answered with its final Task (not counted as
    /// snapshot resumes).
    pub final_task_resumes: usize,
    pub longest_reconnect: Duration,
    pub slowest_failed: Option<Duration>,
    /// (d): survivors' subscribers that got FAILED late, or not at all.
    pub late: usize,
    /// The first few records behind each nonzero count.
    pub details: Vec<String>,
}

impl Ledger {
    pub fn new(policy: Policy) -> Self {
        Self { policy, inner: Mutex::new(Inner::default()) }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        f(&mut self.inner.lock().unwrap())
    }

    /// A task a `stream N MS` message started: it must end with N chunks.
    pub fn expect_chunks(&self, task_id: &str, chunks: u64) {
        self.with(|i| i.tasks.entry(task_id.to_owned()).or_default().chunks = Some(chunks));
    }

    /// A SendMessage answered with `task`: it is acknowledged.
    pub fn answered(&self, task: &Task) {
        let state = crate::common::state(task);
        self.with(|i| {
            i.acknowledged += 1;
            let record = i.tasks.entry(task.id.clone()).or_default();
            let (s, g) = record.answered.get_or_insert((state, task.generation));
            if rank(state) > rank(*s) {
                *s = state;
            }
            *g = (*g).max(task.generation);
        });
    }

    /// A stream's first item told the client about a task it started: acknowledged too.
    pub fn acknowledged(&self, item: &Item) {
        self.with(|i| {
            i.acknowledged += 1;
            let record = i.tasks.entry(item.task_id.clone()).or_default();
            record.answered.get_or_insert((item.state.unwrap_or(TaskState::Submitted), item.generation));
        });
    }

    /// A client saw `item`: two clients that saw different things at one generation are a fork.
    pub fn saw(&self, who: &str, item: &Item) {
        self.with(|i| {
            let kind = if item.snapshot { "Task" } else { "event" };
            i.trace.push(format!(
                "{} {who} {} g{} {kind} {}",
                stamp(),
                item.task_id,
                item.generation,
                item.fingerprint
            ));
            let record = i.tasks.entry(item.task_id.clone()).or_default();
            if item.fingerprint.contains(REPLICA_LOST) && !record.replica_lost_seen {
                record.replica_lost_seen = true;
                i.replica_lost
                    .push(format!("{who}: task {} g{}: {}", item.task_id, item.generation, item.fingerprint));
            }
            if item.snapshot {
                return;
            }
            match record.seen.get(&item.generation) {
                None => {
                    record.seen.insert(item.generation, item.fingerprint.clone());
                }
                Some(before) if *before != item.fingerprint => i.forks.push(format!(
                    "{who}: task {} generation {} was {:?} to one client and {:?} to {who}",
                    item.task_id, item.generation, before, item.fingerprint
                )),
                Some(_) => {}
            }
        });
    }

    /// An error answer: excused by the policy, or a failed call. Returns whether excused.
    pub fn error(&self, who: &str, what: &str, reason: Option<&str>, text: &str) -> bool {
        let excused = reason.is_some_and(|r| self.policy.excused.contains(&r));
        self.with(|i| {
            i.trace.push(format!("{} {who} {what}: {} {text}", stamp(), reason.unwrap_or("(no ErrorInfo)")));
            if excused {
                i.excused += 1;
            } else {
                i.failed_calls.push(format!("{who}: {what}: {} {text}", reason.unwrap_or("(no ErrorInfo)")));
            }
        });
        excused
    }

    /// A failure that no policy excuses (a stream that ended without its terminal event, a
    /// call that got no answer in time).
    pub fn failed(&self, who: &str, text: String) {
        self.with(|i| {
            i.trace.push(format!("{} {who} {text}", stamp()));
            i.failed_calls.push(format!("{who}: {text}"));
        });
    }

    /// A line in the trace only.
    pub fn note(&self, who: &str, text: &str) {
        self.with(|i| i.trace.push(format!("{} {who} {text}", stamp())));
    }

    /// Every item and error, one a line, with the time each was recorded.
    pub fn trace(&self) -> String {
        self.with(|i| i.trace.join("\n"))
    }

    /// A resume was refused because its cursor is "ahead" of the store: the store lost a
    /// generation a client saw, which is a fork.
    pub fn refused_cursor(&self, who: &str, task_id: &str, cursor: i64, text: &str) {
        self.with(|i| i.forks.push(format!("{who}: task {task_id}: resume after {cursor} refused: {text}")));
    }

    pub fn gap(&self, who: &str, text: String) {
        self.with(|i| i.gaps.push(format!("{who}: {text}")));
    }

    pub fn snapshot_resume(&self, who: &str, task_id: &str, cursor: i64, generation: i64) {
        self.with(|i| {
            i.snapshot_resumes.push(format!(
                "{who}: task {task_id}: resume after {cursor} began with a Task at {generation}"
            ))
        });
    }

    pub fn final_task_resume(&self, who: &str, task_id: &str, cursor: i64, generation: i64) {
        self.with(|i| {
            let text =
                format!("{who}: task {task_id}: resume after {cursor} got the final Task at {generation}");
            i.trace.push(format!("{} {text}", stamp()));
            i.final_task_resumes.push(text);
        });
    }

    pub fn reconnected(&self, took: Duration) {
        self.with(|i| i.longest_reconnect = i.longest_reconnect.max(took));
    }

    /// (d): how long after the kill a survivor's subscriber got FAILED.
    pub fn failed_after(&self, took: Duration) {
        self.with(|i| i.slowest_failed = Some(i.slowest_failed.unwrap_or_default().max(took)));
    }

    /// (d): a survivor's subscriber that did not get FAILED in time.
    pub fn late(&self, text: String) {
        self.with(|i| i.late.push(text));
    }

    /// Every task a client was told about or saw, with the highest generation seen.
    pub fn tasks(&self) -> Vec<String> {
        self.with(|i| {
            let mut ids: Vec<String> = i.tasks.keys().cloned().collect();
            ids.sort();
            ids
        })
    }

    /// Holds `stored` (GetTask, read back after the fault) against what clients were told.
    pub fn verify(&self, stored: Result<&Task, String>, id: &str) {
        let policy = self.policy;
        self.with(|i| {
            let record = i.tasks.entry(id.to_owned()).or_default();
            let told = record.answered.is_some() || !record.seen.is_empty();
            let task = match stored {
                Ok(task) => task,
                Err(error) if told => return i.lost.push(format!("task {id}: {error}")),
                Err(_) => return,
            };
            let state = crate::common::state(task);
            let mut lost = Vec::new();
            if let Some((answered, generation)) = record.answered {
                if rank(state) < rank(answered) || (terminal(answered) && state != answered) {
                    lost.push(format!("answered {answered:?}, stored {state:?}"));
                }
                if task.generation < generation {
                    i.forks.push(format!(
                        "task {id}: answered at generation {generation}, the store holds {}",
                        task.generation
                    ));
                }
            }
            if state != policy.expected_end {
                lost.push(format!("ended {state:?}, not {:?}", policy.expected_end));
            }
            if let Some(n) = record.chunks.filter(|_| state == TaskState::Completed) {
                let want: Vec<String> = (0..n).map(|k| format!("chunk {k}")).collect();
                let got = crate::common::artifact_texts(task);
                if got != want {
                    lost.push(format!("{} of {n} chunks stored", got.len()));
                }
            }
            if !lost.is_empty() {
                i.lost.push(format!("task {id}: {}", lost.join("; ")));
            }
            if let Some((&seen, said)) = record.seen.last_key_value()
                && task.generation < seen
            {
                i.forks.push(format!(
                    "task {id}: a client saw generation {seen} ({said:?}), the store holds {}",
                    task.generation
                ));
            }
            let message = task.status.as_ref().and_then(|s| s.message.as_ref());
            let text = message.map(|m| crate::common::texts(&m.parts).join(" ")).unwrap_or_default();
            if text.contains(REPLICA_LOST) && !record.replica_lost_seen {
                record.replica_lost_seen = true;
                i.replica_lost.push(format!("task {id}: stored status {state:?}: {text}"));
            }
        });
    }

    pub fn row(&self, fault: &str) -> Row {
        self.with(|i| {
            let mut details = Vec::new();
            for (name, list) in [
                ("lost", &i.lost),
                ("forked", &i.forks),
                ("snapshot resume", &i.snapshot_resumes),
                ("failed call", &i.failed_calls),
                ("gap/duplicate", &i.gaps),
                ("replica lost", &i.replica_lost),
                ("late FAILED", &i.late),
            ] {
                for line in list.iter() {
                    details.push(format!("  {fault} {name}: {line}"));
                }
            }
            Row {
                fault: fault.to_owned(),
                acknowledged: i.acknowledged,
                lost: i.lost.len(),
                forks: i.forks.len(),
                snapshot_resumes: i.snapshot_resumes.len(),
                failed_calls: i.failed_calls.len(),
                gaps: i.gaps.len(),
                replica_lost: i.replica_lost.len(),
                excused: i.excused,
                final_task_resumes: i.final_task_resumes.len(),
                longest_reconnect: i.longest_reconnect,
                slowest_failed: i.slowest_failed,
                late: i.late.len(),
                details,
            }
        })
    }
}
