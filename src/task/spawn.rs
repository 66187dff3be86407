//! Where task actors come from: a new task's actor, run inline until it first waits, and a
//! hibernated task's actor, revived from the store.
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use tokio::sync::oneshot;

use super::actor::TaskActor;
use super::execution::Executions;
use super::handle::{Answer, Reply, Started, TaskHandle};
use super::mailbox;
use super::metrics::{TaskMetrics, track_state};
use super::phase::{Phase, Starter};
use super::quota::Reservation;
use super::{TaskEnv, state_of};
use crate::agent::RequestContext;
use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::{Task, TaskState};

/// Starts the task of a new message: its actor, running the agent. The receiver answers as
/// `answer` asks. If the agent's first event is a message, that is the answer and no task
/// ever exists; otherwise the actor registers the task and lives until it is terminal.
/// `slot` is the task's place among the live tasks, taken by the caller before the agent runs.
///
/// The actor first runs right here, in the caller's task, until it has to wait; only then is
/// it spawned. An agent that answers without waiting has finished by then, so a quick task
/// costs no spawn and its caller's answer is already there.
pub fn start_task(
    env: Arc<TaskEnv>,
    owner: Owner,
    ctx: RequestContext,
    answer: Answer,
    slot: Reservation,
) -> StartingTask {
    let (tx, rx) = mailbox::channel(env.channel_capacity);
    let (to, reply) = oneshot::channel();
    let task = ctx.task.clone();
    let handle = TaskHandle { id: task.id.as_str().into(), owner: Arc::new(owner), tx };
    let mut executions = Executions::default();
    let done = executions.start(0, env.executor.clone(), ctx, handle.tx.clone(), answer);
    let starter = Starter { reply: Reply { answer, to }, done, slot };
    // The log numbers on from the task's generation (1: its creation).
    let seq = task.generation.max(0) as u64;
    let starting = Phase::Starting(Box::new(starter));
    let actor = TaskActor::new(env, (handle, rx), (task, seq), executions, starting);
    StartingTask { run: Box::pin(actor.run()), reply }
}

/// A new task's actor, not yet run, and where its answer will come. Built synchronously so
/// that the caller's future does not have to hold the request while it waits.
pub struct StartingTask {
    run: Pin<Box<dyn Future<Output = ()> + Send>>,
    reply: oneshot::Receiver<Result<Started, A2aError>>,
}

impl StartingTask {
    /// Runs the actor until it first waits (spawning it then), and hands back the receiver of
    /// its answer.
    pub async fn run(self) -> oneshot::Receiver<Result<Started, A2aError>> {
        let Self { mut run, reply } = self;
        let first = std::future::poll_fn(|cx| {
            Poll::Ready(std::panic::catch_unwind(AssertUnwindSafe(|| run.as_mut().poll(cx))))
        })
        .await;
        match first {
            Ok(Poll::Pending) => drop(tokio::spawn(run)),
            Ok(Poll::Ready(())) => {}
            // The actor's own bug: its drop cleans up, and the caller's receiver says it ended.
            Err(_) => tracing::error!("a task actor panicked"),
        }
        reply
    }
}

/// Gives a hibernated task its actor back, from the task as stored (`seq`: the last event it
/// includes, so numbering goes on from there); or the actor another caller revived meanwhile.
/// Registry and revival go together under the registry's lock, so a task never has two
/// actors in this process (and, in a fleet, the caller holds the task's lease). The task
/// counts as live here again (on a single server it never stopped).
pub fn revive(env: &Arc<TaskEnv>, owner: Owner, task: Arc<Task>, seq: u64) -> TaskHandle {
    env.registry.get_or_insert_with(&task.id.clone(), || {
        env.live.count(&owner.principal, &task.id);
        let (tx, rx) = mailbox::channel(env.channel_capacity);
        let handle = TaskHandle { id: task.id.as_str().into(), owner: Arc::new(owner), tx };
        let state = state_of(task.status.as_ref());
        let actor = TaskActor::new(
            env.clone(),
            (handle.clone(), rx),
            (task, seq),
            Executions::default(),
            Phase::Live,
        );
        TaskMetrics::get().revived.increment(1);
        track_state(TaskState::Unspecified, state);
        drop(tokio::spawn(actor.run()));
        handle
    })
}
