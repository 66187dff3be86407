//! Commands for a task another replica runs (CancelTask, a follow-up message) travel to that
//! replica's inbox, a Redis stream it reads with `XREAD BLOCK`; its reply comes back the same
//! way to the caller's inbox. The owner runs the command on its actor exactly as a local
//! call, so the caller gets the owner's answer with the same semantics.
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::oneshot;

use super::Inner;
use super::mail::{Kind, Mail, Outcome, Reply, Request, TurnStart, Unreadable};
use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::Task;
use crate::task::encoded::EncodedTask;
use crate::task::fleet::{Forward, Forwarded};
use crate::task::handle::{Answer, FollowUp, Started, Subscription, Turn};

/// How long one blocking read of the inbox waits before it is issued again.
const BLOCK: Duration = Duration::from_secs(5);

/// How long a forwarded cancel or non-blocking message may take to be answered.
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// How often a caller waiting for a long answer (a blocking message) checks that the owner
/// still holds the task.
const OWNER_CHECK: Duration = Duration::from_secs(1);

/// Forwarded calls waiting for their reply at once, per replica; more answer UNAVAILABLE.
const MAX_WAITING: usize = 10_000;

/// Takes a waiting caller out of the table however its wait ends.
struct Waiting<'a> {
    inner: &'a Inner,
    id: u64,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.inner.waiting.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.id);
    }
}

impl Inner {
    /// Hands `command` to the task's owner and waits for its answer; `Ok(None)` when no
    /// replica holds the task (the caller looks it up again and may revive it).
    pub(super) async fn forward(
        self: &Arc<Self>,
        owner: &Owner,
        task_id: &str,
        command: Forward,
    ) -> Result<Option<Forwarded>, A2aError> {
        let Some(holder) = self.store.lease_owner(task_id).await? else {
            return Ok(None);
        };
        if holder == self.replica {
            // Ours, yet not live here: it is just finishing or hibernating; look again.
            return Ok(None);
        }
        let id = self.next_request.fetch_add(1, Ordering::Relaxed);
        let mut request = Request {
            id,
            reply_to: self.replica.clone(),
            tenant: owner.tenant.clone(),
            principal: owner.principal.clone(),
            task_id: task_id.to_owned(),
            ..Request::default()
        };
        let (name, cancel) = match command {
            Forward::Cancel => ("cancel", true),
            Forward::Message { turn, answer } => {
                let turn = *turn;
                request.message = Some(turn.message);
                request.extensions = turn.extensions;
                request.metadata = turn.metadata;
                request.accepted_output_modes = turn.accepted_output_modes;
                request.settle = answer == Answer::Settle;
                request.if_generation_match = turn.if_generation_match;
                ("message", false)
            }
        };
        // A turn to follow joins this replica's follower before the owner records the
        // message, so the turn's start is never behind the follower (see `mirror`).
        let feed = match (cancel, request.settle) {
            (false, false) => match self.join(task_id).await? {
                Some(feed) => Some(feed),
                None => return Ok(None),
            },
            _ => None,
        };
        let (tx, rx) = oneshot::channel();
        {
            let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
            if waiting.len() >= MAX_WAITING {
                return Err(A2aError::Unavailable(
                    "too many calls wait for other replicas; try again".into(),
                ));
            }
            waiting.insert(id, tx);
        }
        let _waiting = Waiting { inner: self, id };
        self.store.send_to_replica(&holder, &Mail::to_bytes(Kind::Request(request.clone()))).await?;
        metrics::counter!("a2a_fleet_forwarded_total", "command" => name).increment(1);
        let reply = self.await_reply(rx, task_id, &holder, request.settle).await?;
        let Some(outcome) = reply.outcome else {
            return Ok(None);
        };
        Ok(Some(match (cancel, outcome) {
            (true, Outcome::Task(task)) => Forwarded::Canceled(Arc::new(task)),
            (true, Outcome::Error(error)) => return Err(error.into()),
            (true, _) => return Err(A2aError::Internal("a cancel was answered as a message".into())),
            (false, Outcome::Task(task)) => {
                Forwarded::Started(Ok(Started::Settled(EncodedTask::plain(Arc::new(task)))))
            }
            (false, Outcome::Message(message)) => Forwarded::Started(Ok(Started::Message(message))),
            (false, Outcome::Error(error)) => Forwarded::Started(Err(error.into())),
            (false, Outcome::Turn(TurnStart { snapshot, seq })) => {
                let Some(mut feed) = feed else {
                    return Err(A2aError::Internal("a blocking message was answered with a turn".into()));
                };
                feed.skip_to(seq);
                let snapshot = Arc::new(snapshot.unwrap_or_default());
                let turn = Turn { subscription: Subscription { snapshot, feed }, done: None };
                Forwarded::Started(Ok(Started::Turn(Box::new(turn))))
            }
        }))
    }

    /// The owner's reply. A short command gets [`REPLY_TIMEOUT`]; a blocking message waits as
    /// long as its turn takes, while `holder` still holds the task.
    async fn await_reply(
        &self,
        mut reply: oneshot::Receiver<Reply>,
        task_id: &str,
        holder: &str,
        long: bool,
    ) -> Result<Reply, A2aError> {
        let deadline = tokio::time::Instant::now() + REPLY_TIMEOUT;
        let gone = || {
            A2aError::Unavailable(format!(
                "replica {holder}, which runs task {task_id}, did not answer; try again"
            ))
        };
        loop {
            tokio::select! {
                answer = &mut reply => return answer.map_err(|_| gone()),
                () = tokio::time::sleep(OWNER_CHECK) => {
                    if !long && tokio::time::Instant::now() >= deadline {
                        return Err(gone());
                    }
                    if self.store.lease_owner(task_id).await?.as_deref() != Some(holder) {
                        return Err(gone());
                    }
                }
            }
        }
    }

    /// Reads this replica's inbox for as long as the process runs: commands for the tasks it
    /// owns, and replies to the commands it forwarded.
    pub(super) async fn run_inbox(self: Arc<Self>) {
        let mut after = loop {
            match self.store.inbox_start(&self.replica).await {
                Ok(id) => break id,
                Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
            }
        };
        loop {
            let entries = match self.store.read_inbox(&self.replica, &after, BLOCK).await {
                Ok(entries) => entries,
                Err(_) => {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            for (id, payload) in entries {
                after = id;
                match Mail::parse(&payload) {
                    Ok(Kind::Request(request)) => drop(tokio::spawn(self.clone().serve(request))),
                    Ok(Kind::Reply(reply)) => self.deliver(reply),
                    Err(unreadable) => self.refuse(*unreadable),
                }
            }
        }
    }

    /// Answers mail that did not decode at once with its error, so no caller waits for it.
    fn refuse(self: &Arc<Self>, unreadable: Unreadable) {
        match unreadable {
            Unreadable::Request { id, reply_to, task_id, error } => {
                tracing::warn!(%error, %task_id, replica = %reply_to, "unreadable forwarded command; refused");
                let reply = Reply { id, outcome: Some(Outcome::Error((&error).into())) };
                let inner = self.clone();
                drop(tokio::spawn(async move { inner.reply(&reply_to, reply).await }));
            }
            Unreadable::Reply { id, error } => {
                tracing::warn!(%error, "unreadable answer to a forwarded call");
                self.deliver(Reply { id, outcome: Some(Outcome::Error((&error).into())) });
            }
            Unreadable::Garbage(error) => {
                tracing::warn!(%error, "unreadable mail in this replica's inbox; dropped")
            }
        }
    }

    /// Sends `reply` to the inbox of replica `to`.
    async fn reply(&self, to: &str, reply: Reply) {
        let mail = Mail::to_bytes(Kind::Reply(reply));
        if let Err(error) = self.store.send_to_replica(to, &mail).await {
            tracing::warn!(%error, replica = %to, "a forwarded call's reply was lost");
        }
    }

    /// Hands a reply to the caller waiting for it (gone callers timed out already).
    fn deliver(&self, reply: Reply) {
        let waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner()).remove(&reply.id);
        if let Some(waiting) = waiting {
            let _ = waiting.send(reply);
        }
    }

    /// Runs a forwarded command on the local actor and replies.
    async fn serve(self: Arc<Self>, request: Request) {
        let reply = Reply { id: request.id, outcome: self.execute(&request).await };
        self.reply(&request.reply_to, reply).await;
    }

    /// `None` when the task is not live here (any more).
    async fn execute(&self, request: &Request) -> Option<Outcome> {
        let env = self.env.get()?.upgrade()?;
        let handle = env.registry.get(&request.owner(), &request.task_id)?;
        let Some(message) = request.message.clone() else {
            return handle.cancel().await.map(|canceled| match canceled {
                Ok(task) => Outcome::Task(Arc::unwrap_or_clone(task)),
                Err(error) => Outcome::Error((&error).into()),
            });
        };
        let turn = FollowUp {
            message,
            extensions: request.extensions.clone(),
            metadata: request.metadata.clone(),
            accepted_output_modes: request.accepted_output_modes.clone(),
            if_generation_match: request.if_generation_match,
        };
        let answer = if request.settle { Answer::Settle } else { Answer::Follow };
        Some(match handle.send_message(turn, answer).await? {
            Ok(Started::Turn(turn)) => Outcome::Turn(TurnStart {
                seq: turn.subscription.feed.cursor(),
                snapshot: Some(Task::clone(&turn.subscription.snapshot)),
            }),
            Ok(Started::Settled(settled)) => Outcome::Task(Arc::unwrap_or_clone(settled.into_parts().0)),
            Ok(Started::Message(message)) => Outcome::Message(message),
            Err(error) => Outcome::Error((&error).into()),
        })
    }
}
