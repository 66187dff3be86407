//! A new task whose creating SendMessage carries a webhook: the webhook is registered before
//! the message is claimed (so before the agent runs, and it sees the task's first event), and
//! forgotten if no task came to be.
//!
//! Before the claim, because a call can go at any await (its client resets it or hits its
//! deadline), and its claim, once landed, is removed only by the call that holds it: a call
//! dropped while its webhook was stored (three round trips in Redis) after its claim left a
//! claim no call would settle, for the retention age, and a retry of it waited
//! `idempotent::STALE` for that claim to go stale. Now nothing is awaited between a new
//! task's claim and its actor's start. A retry (the claim finds the message sent already)
//! registers a webhook of its own first, which its drop forgets, as any unborn one.
//!
//! "No task came to be" includes a call that went before the actor answered: its client
//! reset it or hit its deadline while the webhook was being stored, or while an agent that
//! answers directly was still running, or the claim found the message sent already. Nothing
//! else would ever remove that config. Its task id was never handed out, and it holds a place
//! in its principal's push quota (`--max-push-configs-per-principal`), so a client that gives
//! up early, again and again, would lock its principal out of webhooks. [`Unborn`] forgets it
//! as the call goes.
use std::sync::Arc;

use tokio::sync::oneshot;

use super::Core;
use super::send::answered;
use crate::call::{Owner, ProtocolVersion};
use crate::error::A2aError;
use crate::proto::TaskPushNotificationConfig;
use crate::task::TaskEnv;
use crate::task::handle::Started;
use crate::task::spawn::StartingTask;

/// A new task whose webhook is to be registered before its message is claimed, then its
/// actor run.
pub(super) struct InlineWebhook {
    owner: Owner,
    /// The config, until it is registered.
    config: Option<TaskPushNotificationConfig>,
    version: ProtocolVersion,
    starting: StartingTask,
    /// Armed once registration begins.
    unborn: Option<Unborn>,
}

impl InlineWebhook {
    pub(super) fn new(
        owner: Owner,
        config: TaskPushNotificationConfig,
        version: ProtocolVersion,
        starting: StartingTask,
    ) -> Self {
        Self { owner, config: Some(config), version, starting, unborn: None }
    }

    /// Registers the webhook; from the moment it is sent, dropping `self` before the task
    /// is known to exist forgets it (an error may come after the config landed: a reply lost).
    pub(super) async fn register(&mut self, core: &Core) -> Result<(), A2aError> {
        let Some(mut config) = self.config.take() else { return Ok(()) };
        if config.id.is_empty() {
            // Named here, so that the guard can name it too.
            config.id = crate::proto::new_id();
        }
        self.unborn = Some(Unborn {
            env: core.env.clone(),
            owner: self.owner.clone(),
            task_id: config.task_id.clone(),
            config_id: config.id.clone(),
            actor: None,
            armed: true,
        });
        core.register_push_config(&self.owner, config, self.version).await.map(drop)
    }

    /// Runs the task (its webhook registered) and hears how it started.
    pub(super) async fn started(self) -> Result<Started, A2aError> {
        let Self { starting, unborn, .. } = self;
        let Some(mut unborn) = unborn else {
            return Err(A2aError::Internal("a new task's webhook was not registered before it ran".into()));
        };
        let Actor::Answering(reply) = unborn.actor.insert(Actor::Answering(starting.run().await)) else {
            unreachable!("the actor was just put in")
        };
        let started = answered(reply.await);
        unborn.actor = Some(Actor::Answered { direct_reply: matches!(started, Ok(Started::Message(_))) });
        unborn.forget_unless_made(Heard::Answer(&started)).await;
        unborn.armed = false;
        started
    }
}

/// Where the actor of a task whose webhook is registered is.
enum Actor {
    /// Running: its answer is to come.
    Answering(oneshot::Receiver<Result<Started, A2aError>>),
    /// It answered, and the answer was heard: a direct reply says no task exists; any other
    /// answer that left the task in doubt (an error), only the task itself can tell now.
    Answered { direct_reply: bool },
}

/// What is known of whether a task came to be.
enum Heard<'a> {
    /// No task can exist: the actor never ran, or answered directly.
    NoTask,
    /// The actor's answer.
    Answer(&'a Result<Started, A2aError>),
    /// Nothing: the task is looked up.
    Nothing,
}

/// The webhook of a task not known to exist yet. Dropped armed (its call went, or was answered
/// before the actor ran: refused, or a retry that found the first call's task), it is forgotten
/// in a task of its own, unless the actor's answer (awaited, if it runs) or else a look-up
/// says a task came to be.
struct Unborn {
    env: Arc<TaskEnv>,
    owner: Owner,
    task_id: String,
    config_id: String,
    /// `None` until the actor runs.
    actor: Option<Actor>,
    armed: bool,
}

impl Unborn {
    /// Forgets the webhook unless a task came to be.
    async fn forget_unless_made(&self, heard: Heard<'_>) {
        if self.task_exists(heard).await {
            return;
        }
        let forgotten = self.env.store.delete_push_config(&self.owner, &self.task_id, &self.config_id).await;
        if let Err(error) = forgotten {
            tracing::warn!(%error, "forgetting the push config of a task that never existed failed");
        }
    }

    /// Whether what was heard, or else the task itself, says a task exists. An error may
    /// answer a task that lives on (its writes refused for a while, or taken over by another
    /// replica), so only a task found nowhere counts as none; one that cannot be looked up now
    /// counts as there (its webhook stays, bounded as the task is).
    async fn task_exists(&self, heard: Heard<'_>) -> bool {
        match heard {
            Heard::NoTask => return false,
            Heard::Answer(Ok(Started::Turn(_) | Started::Settled(_))) => return true,
            // A direct reply: the actor never made a task, nor will.
            Heard::Answer(Ok(Started::Message(_))) => return false,
            Heard::Answer(Err(_)) | Heard::Nothing => {}
        }
        let found = crate::task::registry::current_task(&self.env, &self.owner, &self.task_id).await;
        !matches!(found, Err(A2aError::TaskNotFound(_)))
    }
}

impl Drop for Unborn {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let actor = self.actor.take();
        let unborn = Unborn {
            env: self.env.clone(),
            owner: self.owner.clone(),
            task_id: std::mem::take(&mut self.task_id),
            config_id: std::mem::take(&mut self.config_id),
            actor: None,
            armed: false,
        };
        drop(runtime.spawn(async move {
            match actor {
                None | Some(Actor::Answered { direct_reply: true }) => {
                    unborn.forget_unless_made(Heard::NoTask).await;
                }
                // The actor's answer first: only then does it know.
                Some(Actor::Answering(reply)) => {
                    let started = answered(reply.await);
                    unborn.forget_unless_made(Heard::Answer(&started)).await;
                }
                // Dropped while an error's task was looked up.
                Some(Actor::Answered { direct_reply: false }) => {
                    unborn.forget_unless_made(Heard::Nothing).await;
                }
            }
        }));
    }
}

#[cfg(test)]
mod tests;
