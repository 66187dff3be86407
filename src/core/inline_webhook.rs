//! A new task whose creating SendMessage carries a webhook: the webhook is registered before
//! the agent runs, so it sees the task's first event, and forgotten if no task came to be.
//!
//! "No task came to be" includes a call that went before the actor answered: its client
//! reset it or hit its deadline while the webhook was being stored, or while an agent that
//! answers directly was still running. Nothing else would ever remove that config. Its task
//! id was never handed out, and it holds a place in its principal's push quota
//! (`--max-push-configs-per-principal`), so a client that gives up early, again and again,
//! would lock its principal out of webhooks. [`Unborn`] forgets it as the call goes.
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

/// Registers `config` for the task `starting` makes, then runs it and hears how it started.
pub(super) async fn with_webhook(
    core: &Core,
    owner: Owner,
    mut config: TaskPushNotificationConfig,
    version: ProtocolVersion,
    starting: StartingTask,
) -> Result<Started, A2aError> {
    if config.id.is_empty() {
        // Named here, so that the guard can name it too.
        config.id = crate::proto::new_id();
    }
    let mut unborn = Unborn {
        env: core.env.clone(),
        owner: owner.clone(),
        task_id: config.task_id.clone(),
        config_id: config.id.clone(),
        reply: None,
        armed: true,
    };
    // An error may come after the config landed (a reply lost); the guard forgets it then too.
    core.register_push_config(&owner, config, version).await?;
    let started = answered(unborn.reply.insert(starting.run().await).await);
    unborn.reply = None;
    unborn.forget_unless_made(Some(&started)).await;
    unborn.armed = false;
    started
}

/// Whether the actor's answer, or else the task itself, says a task exists. An error may
/// answer a task that lives on (its writes refused for a while, or taken over by another
/// replica), so only a task found nowhere counts as none; one that cannot be looked up now
/// counts as there (its webhook stays, bounded as the task is).
async fn task_exists(unborn: &Unborn, started: &Result<Started, A2aError>) -> bool {
    match started {
        Ok(Started::Turn(_) | Started::Settled(_)) => return true,
        // A direct reply: the actor never made a task, nor will.
        Ok(Started::Message(_)) => return false,
        Err(_) => {}
    }
    let found = crate::task::registry::current_task(&unborn.env, &unborn.owner, &unborn.task_id).await;
    !matches!(found, Err(A2aError::TaskNotFound(_)))
}

/// The webhook of a task not known to exist yet; dropped armed (its call went first), it is
/// forgotten in a task of its own, once the actor (if it runs) says no task came to be.
struct Unborn {
    env: Arc<TaskEnv>,
    owner: Owner,
    task_id: String,
    config_id: String,
    /// The actor's answer to come, once it runs.
    reply: Option<oneshot::Receiver<Result<Started, A2aError>>>,
    armed: bool,
}

impl Unborn {
    /// Forgets the webhook unless a task came to be, as the actor's answer (`None`: the agent
    /// never ran) or else the task itself says.
    async fn forget_unless_made(&self, started: Option<&Result<Started, A2aError>>) {
        let made = match started {
            Some(started) => task_exists(self, started).await,
            None => false,
        };
        if made {
            return;
        }
        let forgotten = self.env.store.delete_push_config(&self.owner, &self.task_id, &self.config_id).await;
        if let Err(error) = forgotten {
            tracing::warn!(%error, "forgetting the push config of a task that never existed failed");
        }
    }
}

impl Drop for Unborn {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let reply = self.reply.take();
        let unborn = Unborn {
            env: self.env.clone(),
            owner: self.owner.clone(),
            task_id: std::mem::take(&mut self.task_id),
            config_id: std::mem::take(&mut self.config_id),
            reply: None,
            armed: false,
        };
        drop(runtime.spawn(async move {
            // The actor's answer first, if it runs: only then does it know.
            let started = match reply {
                Some(reply) => Some(answered(reply.await)),
                None => None,
            };
            unborn.forget_unless_made(started.as_ref()).await;
        }));
    }
}
