//! How the rest of the server talks to a task's actor: the commands it takes, the cloneable
//! handle that sends them, and what subscribing or sending a message gives back.
use std::sync::Arc;

use tokio::sync::oneshot;

use super::encoded::EncodedTask;
use super::log::Feed;
use super::mailbox;
use crate::agent::AgentEvent;
use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::{Message, Task};

/// A message to an actor. Large payloads are boxed so that the queue's slots stay small (a
/// burst of agent events queues many).
pub(crate) enum Command {
    Agent(Box<AgentEvent>),
    Subscribe {
        /// A resuming subscriber's last generation: its feed starts right after it when the
        /// log still holds every event since.
        after: Option<u64>,
        reply: oneshot::Sender<Result<Subscription, A2aError>>,
    },
    Snapshot {
        reply: oneshot::Sender<Result<Arc<Task>, A2aError>>,
    },
    Cancel {
        reply: oneshot::Sender<Result<Arc<Task>, A2aError>>,
    },
    Message {
        turn: Box<FollowUp>,
        reply: Reply,
    },
    /// Hibernate now if the task only waits for its client (a fleet replica draining: the
    /// task stays available on the other replicas).
    Park,
}

/// How a message's sender wants to hear back: the one spelling of Follow / Settle, from the
/// core's request down to the actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// At once, with a [`Turn`] to follow (streaming, or a non-blocking SendMessage).
    Follow,
    /// Once the turn has ended, with the task then (a blocking SendMessage): when the task is
    /// terminal or interrupted, or when this message's execution has returned while the task
    /// waits.
    Settle,
}

/// Where and how a message's sender hears back.
pub(crate) struct Reply {
    pub answer: Answer,
    pub to: oneshot::Sender<Result<Started, A2aError>>,
}

impl Reply {
    pub(crate) fn send(self, started: Result<Started, A2aError>) {
        let _ = self.to.send(started);
    }
}

/// A follow-up user message and what the executor needs to know about its call.
#[derive(Clone)]
pub struct FollowUp {
    /// The message, its task and context ids filled in.
    pub message: Message,
    /// The extensions the caller activated (`A2A-Extensions`).
    pub extensions: Vec<String>,
    /// The request's metadata.
    pub metadata: Option<pbjson_types::Struct>,
    /// The output modes the caller accepts.
    pub accepted_output_modes: Vec<String>,
    /// `ifGenerationMatch` (A2A dev-1.1): the message is refused unless the task is at this
    /// generation when its actor takes it.
    pub if_generation_match: Option<i64>,
}

/// A subscriber's start: the task as of some sequence number, and every event after it.
///
/// The feed normally starts at the snapshot's generation. A resuming subscriber (see
/// [`TaskHandle::subscribe_after`]) whose events are all still in the log gets a feed that
/// starts at its own cursor instead, and needs no snapshot: the core tells the two apart by
/// the feed's cursor.
pub struct Subscription {
    /// The task at the moment of subscribing.
    pub snapshot: Arc<Task>,
    /// The events after the snapshot, ending after the terminal event.
    pub feed: Feed,
}

/// What a caller gets when its message starts an execution on a task.
pub struct Turn {
    /// The task right after the message was recorded, and every event after that.
    pub subscription: Subscription,
    /// Resolves (with an error: the sender is dropped) once the execution has finished and
    /// all its events are applied. `None` for a turn run by another replica of a fleet: its
    /// stream ends at the next terminal or interrupted state.
    pub done: Option<oneshot::Receiver<()>>,
}

/// What a message led to.
pub enum Started {
    /// The agent answered a new message with a direct message; no task exists.
    Message(Message),
    /// The task is live; follow it from here ([`Answer::Follow`]).
    Turn(Box<Turn>),
    /// The task as the message's turn ended ([`Answer::Settle`]), with its encoding when the
    /// actor made one (a finished task's, shared with the store).
    Settled(EncodedTask),
}

/// A cheap, cloneable reference to a live task's actor. Every method returns `None` when the
/// actor has finished meanwhile; the caller then reads the store, which by then holds the
/// task's final state.
#[derive(Clone)]
pub struct TaskHandle {
    pub(super) id: Arc<str>,
    pub(super) owner: Arc<Owner>,
    pub(super) tx: mailbox::Sender<Command>,
}

impl TaskHandle {
    /// The task id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Who the task belongs to.
    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    /// Sends a command and waits for its reply, or for the actor to be gone.
    ///
    /// The wait also ends when the receiver is closed, so a caller never depends on the actor
    /// answering or dropping a command it took: an actor that stops (hibernates, panics) closes
    /// its channel, and the command is refused or dropped with its reply sender.
    async fn ask<T>(&self, command: impl FnOnce(oneshot::Sender<T>) -> Command) -> Option<T> {
        let (reply, response) = oneshot::channel();
        self.tx.send(command(reply)).await.ok()?;
        tokio::select! {
            biased;
            answer = response => answer.ok(),
            () = self.tx.closed() => None,
        }
    }

    /// The task now, with the feed of everything after (in a fleet: as stored; UNAVAILABLE
    /// when the store does not take the task's writes).
    pub async fn subscribe(&self) -> Option<Result<Subscription, A2aError>> {
        self.subscribe_after(None).await
    }

    /// Like [`TaskHandle::subscribe`], but with `after` (a generation the caller has seen) the
    /// feed starts right after it when the log still holds every event since.
    pub async fn subscribe_after(&self, after: Option<u64>) -> Option<Result<Subscription, A2aError>> {
        self.ask(|reply| Command::Subscribe { after, reply }).await
    }

    /// Asks the actor to hibernate if its task only waits for the client (see
    /// `Command::Park`); does not wait for it.
    pub fn park(&self) {
        let _ = self.tx.try_send(Command::Park);
    }

    /// The task now (in a fleet: once stored).
    pub async fn snapshot(&self) -> Option<Result<Arc<Task>, A2aError>> {
        self.ask(|reply| Command::Snapshot { reply }).await
    }

    /// Cancels the task; the CANCELED task (in a fleet: once stored).
    pub async fn cancel(&self) -> Option<Result<Arc<Task>, A2aError>> {
        self.ask(|reply| Command::Cancel { reply }).await
    }

    /// Hands a follow-up message to the task; answered as `answer` asks.
    pub(crate) async fn send_message(
        &self,
        turn: FollowUp,
        answer: Answer,
    ) -> Option<Result<Started, A2aError>> {
        let turn = Box::new(turn);
        self.ask(|to| Command::Message { turn, reply: Reply { answer, to } }).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn asking_an_actor_that_is_gone_ends_even_if_its_reply_sender_lives_on() {
        let (tx, mut rx) = mailbox::channel(4);
        let handle = TaskHandle { id: "t".into(), owner: Arc::new(Owner::default()), tx };
        // An "actor" that takes the command, keeps the reply sender alive elsewhere (as a
        // message stranded in a closed channel would), and exits.
        let actor = tokio::spawn(async move {
            let command = rx.recv().await;
            drop(rx);
            command
        });
        let asked = tokio::time::timeout(std::time::Duration::from_secs(10), handle.snapshot()).await;
        let stranded = actor.await.unwrap();
        assert!(matches!(asked, Ok(None)), "the wait ended because the actor is gone");
        drop(stranded);
    }
}
