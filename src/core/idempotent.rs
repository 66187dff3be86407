//! Idempotent SendMessage: a message whose `messageId` its caller (owner: tenant + principal)
//! already sent, within task retention, is answered with the first call's outcome, and starts
//! no execution (spec §3.3.1: servers MAY use `messageId` to detect duplicates). Clients and
//! load balancers retry on UNAVAILABLE, GOAWAY and resets; without this, a retry of a call the
//! server had already accepted made a second task and ran the agent again.
//!
//! ## The record
//! The store keeps one record per owner and `messageId` (`task::store::sent`), claimed in one
//! atomic step before the agent runs (a map under a lock, or one Redis script), so of two calls
//! at once, on one replica or two, exactly one runs. It holds the message's fingerprint
//! (`fingerprint.rs`), and either
//! - **a claim**: the task the message goes to (a new task's id, chosen before the agent runs,
//!   or the task a follow-up names), with when the claiming call last said it runs; or
//! - **a reply**: the agent's direct Message, written before the first caller is answered.
//!
//! A message that went to a task is in that task's history: the task *is* the outcome, so the
//! record never needs to say "done", and a quick task's SendMessage costs one claim and no
//! second write. A retry that finds a claim looks for its message in the task's history:
//! - there: the answer is that task, as it is now (a blocking SendMessage waits until it is
//!   terminal or interrupted, as the first call did; a SendStreamingMessage gets the task, then
//!   its updates until then);
//! - not yet, and the claim's call still runs: the retry waits (at most [`IN_FLIGHT_WAIT`],
//!   then UNAVAILABLE) for the task to appear, the reply to be recorded, or the claim to go;
//! - not there, and the claim went quiet ([`STALE`]: its call refreshes it every
//!   [`HEARTBEAT`] while it waits for its outcome): its call is gone (a replica died before the
//!   task's first write, the caller dropped the call before the agent's reply, or retention
//!   dropped the task), so the message is free again: the retry takes the claim and runs.
//!
//! A call refused (an agent that fails before its first event, a follow-up its task refused)
//! removes its claim, so a retry runs anew. One answered UNAVAILABLE keeps it: its message may
//! be in its task (in a fleet, a caller answered so because the store kept refusing the task's
//! write), and its retry then finds the task; if not, the claim goes stale. A refusal before
//! anything ran (a new task's parked caps, or its inline webhook's registration, read and
//! stored before the claim) removes the claim whatever it is, an UNAVAILABLE too. A reply whose
//! record cannot be written is answered anyway (the caller has it; only a retry of it would run
//! again), with a warning.
//!
//! ## What it costs
//! Memory: one map operation per SendMessage. Redis: one round trip (the claim, a native `SET
//! NX PX`: `task/store/redis/sent.rs`) before the agent runs, none after for a new task (its
//! write carries what the record needs), one more for a direct reply or a follow-up (noting
//! the record for retention, which bounds it in Redis). A call whose message is
//! not in a task after [`HEARTBEAT`] (a slow first event; a follow-up's blocking turn, whose
//! task this replica cannot see take the message) refreshes its claim once per heartbeat.
//! Retries pay their polling.
//!
//! ## Limits, argued
//! - A record lasts the retention age from its claim (Redis `PX`, which a task born finished on
//!   one Redis node takes away, as retention then drops the record with the task; the memory
//!   store also drops the oldest beyond retention's count and reply bytes). In Redis,
//!   retention's count and bytes bound the records too: a new task's goes with the task, a
//!   reply's and a follow-up's are kept as finished tasks are, counted apart from them (as in
//!   memory; `TaskStore::keep_sent`),
//!   and so does a follow-up's claim its call left unsettled (the call was dropped, or
//!   answered UNAVAILABLE: `Unsettled`). A new task's unsettled claim (its call answered
//!   UNAVAILABLE, or dropped, once its agent ran) has the retention age alone: its task, made
//!   even so, names the record in its own member. Nothing is awaited between a new task's
//!   claim and its agent's start (its parked caps are read and its inline webhook registered
//!   before the claim: `send.rs` `Begun::admitted`), so no dropped call leaves a claim that no
//!   agent ran, and a refusal there removes the claim (`Claim::refuse`).
//!   A retry after that, or after its task left retention, runs anew.
//! - The configuration is not fingerprinted: a retry with another `historyLength`,
//!   `returnImmediately` or webhook gets the first call's outcome shaped by its own request.
//! - A call dropped by its client while its new task's agent has not sent a first event for
//!   [`STALE`] may be run again by a retry: the claim cannot tell a silent agent from a dead call.
//! - Limits (live tasks, subscriptions) are checked before the claim, as for any call. A new
//!   task's parked caps are read, and its inline webhook registered, before it too (a call
//!   dropped meanwhile leaves no claim), but refuse only a message the claim shows is no
//!   retry: a retry gets the task its first call made, which may be what fills the caps or
//!   the push quota (its own webhook, registered for a task it does not make, is forgotten).
//!   A call dropped while its claim is on its way removes the claim (`Landing`).
//! - `--dedupe-messages off` (`CoreSettings::dedupe_messages`) runs every message unrecorded.
//! - The same id with **another** message is no retry (its fingerprint differs): it runs as a
//!   new message, unrecorded, so a retry of *it* is not recognised. The spec only lets a server
//!   use the id to detect duplicates (§3.3.1), and clients do reuse ids: the conformance kit
//!   sends one id per scenario (`tck-complete-task-<run>`) with many different messages. We
//!   refused such a message once; that failed 15 of the kit's checks and protected nothing a
//!   retry needs.
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prost::Message as _;

use super::Core;
use crate::call::Owner;
use crate::error::A2aError;
use crate::proto::{Message, Role, Task};
use crate::task::handle::{Started, Subscription};
use crate::task::registry::{Found, with_live};
use crate::task::rules::settles;
use crate::task::state_of;
use crate::task::store::{Fingerprint, SentRecord, SentState};

/// How often a call waiting for its outcome says its claim is still held.
const HEARTBEAT: Duration = Duration::from_secs(2);

/// A claim not refreshed for this long whose message no task holds belongs to a call that is
/// gone (three missed heartbeats: slack for a busy replica, and for clocks that differ a
/// little between replicas).
const STALE: Duration = Duration::from_secs(6);

/// How long a retry waits for a first call that still runs to hand its message to a task or
/// record its reply; then UNAVAILABLE (the client retries again). Longer than [`STALE`], so a
/// retry that finds a dead call's claim outlasts it, and well within a client's deadline.
const IN_FLIGHT_WAIT: Duration = Duration::from_secs(10);

/// A waiting retry looks again after this, doubling up to [`MAX_POLL`].
const FIRST_POLL: Duration = Duration::from_millis(10);
const MAX_POLL: Duration = Duration::from_millis(500);

/// A message as deduplication knows it: whose, its id, its fingerprint, where it goes.
#[derive(Clone)]
pub(super) struct Sent {
    pub owner: Owner,
    pub message_id: String,
    pub fingerprint: Fingerprint,
    /// The task the message goes to: new (its id chosen already), or the one it follows up.
    pub task_id: String,
    /// Whether the message starts that task.
    pub new_task: bool,
}

/// What claiming a message found.
pub(super) enum Claimed {
    /// The message is this call's to run.
    Run(Claim),
    /// An earlier call sent it: answer with its outcome.
    Earlier(Earlier),
}

/// The outcome of an earlier call with the same message.
pub(super) enum Earlier {
    /// The agent's direct reply.
    Message(Message),
    /// The task that holds the message.
    Task(String),
}

/// This call's claim on its message, held while it runs; `None`: the id is another message's,
/// and this one runs unrecorded.
pub(super) struct Claim {
    sent: Sent,
    record: Option<SentRecord>,
}

/// Claims `sent`'s messageId for this call, or finds the earlier call's outcome (waiting for
/// one that still runs). A message under an id another message holds runs unclaimed.
pub(super) async fn claim(core: &Core, sent: Sent) -> Result<Claimed, A2aError> {
    if !core.settings.dedupe_messages {
        return Ok(Claimed::Run(Claim { sent, record: None }));
    }
    let store = &core.env.store;
    let deadline = tokio::time::Instant::now() + IN_FLIGHT_WAIT;
    let claim_id = crate::proto::new_id();
    let mut pause = FIRST_POLL;
    loop {
        let state =
            SentState::Claimed { task_id: sent.task_id.clone(), claim: claim_id.clone(), alive_ms: now_ms() };
        let mine = SentRecord { fingerprint: sent.fingerprint, state };
        let mut landing = Landing { env: &core.env, sent: &sent, mine: &mine, armed: true };
        let found = store.claim_sent(&sent.owner, &sent.message_id, &mine).await;
        // Answered: the claim is this call's to run and settle, or another's.
        landing.armed = found.is_err();
        drop(landing);
        let Some(theirs) = found? else {
            return Ok(Claimed::Run(Claim { sent, record: Some(mine) }));
        };
        if theirs.fingerprint != sent.fingerprint {
            tracing::debug!(message_id = %sent.message_id, "a messageId reused for another message runs unrecorded");
            return Ok(Claimed::Run(Claim { sent, record: None }));
        }
        match &theirs.state {
            SentState::Replied(bytes) => {
                let message = Message::decode(&bytes[..])
                    .map_err(|e| A2aError::Internal(format!("a recorded reply does not decode: {e}")))?;
                return Ok(Claimed::Earlier(Earlier::Message(message)));
            }
            SentState::Claimed { task_id, alive_ms, .. } => {
                if accepted(core, &sent.owner, task_id, &sent.message_id).await? {
                    return Ok(Claimed::Earlier(Earlier::Task(task_id.clone())));
                }
                if now_ms().saturating_sub(*alive_ms) > millis(STALE) {
                    // Its call is gone without handing the message on: free it, and claim again.
                    store.swap_sent(&sent.owner, &sent.message_id, &theirs, None).await?;
                    continue;
                }
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(A2aError::Unavailable(format!(
                "an earlier call with messageId {:?} is still running; retry later",
                sent.message_id
            )));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_POLL);
    }
}

impl Claim {
    /// Runs `work`, this call's execution of its message, refreshing the claim meanwhile; then
    /// settles the claim by the outcome (a direct reply is recorded before it is answered; a
    /// failure that left the message with no task frees the messageId).
    ///
    /// `work` is pinned by the caller: held here by value, it would sit in this future twice
    /// (as the argument and as the pinned local), and the whole of it is copied with every
    /// SendMessage's boxed future.
    pub(super) async fn run(
        self,
        core: &Core,
        mut work: Pin<&mut impl Future<Output = Result<Started, A2aError>>>,
    ) -> Result<Started, A2aError> {
        let Self { sent, record } = self;
        let Some(mut record) = record else { return work.await };
        // A new task's claim is never noted (see `Unsettled`): no guard, nothing cloned, on the
        // path of every new task.
        let mut unsettled = (!sent.new_task).then(|| Unsettled {
            core: Arc::clone(&core.env),
            sent: sent.clone(),
            record: Some(record.clone()),
        });
        let (store, owner, message_id) = (&core.env.store, &sent.owner, sent.message_id.as_str());
        // Whether the record is still this call's (a refresh that found it gone says not).
        let mut held = true;
        let outcome = loop {
            tokio::select! {
                biased;
                outcome = work.as_mut() => break outcome,
                () = tokio::time::sleep(HEARTBEAT) => {
                    if sent.new_task && core.env.registry.get(owner, &sent.task_id).is_some() {
                        // The task exists here, its first message in its history: the claim
                        // needs no refreshing (a long blocking call writes nothing more).
                        continue;
                    }
                    let fresh = alive_now(&record);
                    match store.swap_sent(owner, message_id, &record, Some(&fresh)).await {
                        Ok(true) => {
                            if let Some(unsettled) = &mut unsettled {
                                unsettled.record = Some(fresh.clone());
                            }
                            record = fresh;
                        }
                        // Gone (retention made room): nothing is left to keep alive.
                        Ok(false) => {
                            held = false;
                            Unsettled::disarm(&mut unsettled);
                        }
                        Err(error) => tracing::warn!(%error, "refreshing a SendMessage claim failed"),
                    }
                }
            }
        };
        // From here the call settles its record itself, except an UNAVAILABLE answer's, which
        // stays as a dropped call's does (and is noted as it returns).
        if !matches!(outcome, Err(A2aError::Unavailable(_))) {
            Unsettled::disarm(&mut unsettled);
        }
        let settled = match &outcome {
            Ok(Started::Message(message)) => {
                let state = SentState::Replied(message.encode_to_vec().into());
                let replied = SentRecord { fingerprint: sent.fingerprint, state };
                store.swap_sent(owner, message_id, &record, Some(&replied)).await.map(drop)
            }
            // The task's history holds the message: the task is the outcome. A new task's
            // record goes with it; a follow-up's is kept on its own (`TaskStore::keep_sent`),
            // if it is still this call's (else its retention would drop another call's).
            Ok(Started::Turn(_) | Started::Settled(_)) if sent.new_task || !held => Ok(()),
            Ok(Started::Turn(_) | Started::Settled(_)) => {
                if let Err(error) = store.keep_sent(owner, message_id, &record).await {
                    // The record stands as it is; only the retention age bounds it now.
                    tracing::warn!(%error, message_id, "noting a follow-up's SendMessage record for retention failed");
                }
                Ok(())
            }
            // The task may hold the message even so (a caller held for a write the store kept
            // refusing; a forwarded follow-up that timed out): the claim stays, and goes stale
            // unless a task holds the message. Looking now would hold this answer up.
            Err(A2aError::Unavailable(_)) => Ok(()),
            // Refused, by the task or the agent before its first event: nothing holds it.
            Err(_) => store.swap_sent(owner, message_id, &record, None).await.map(drop),
        };
        if let Err(error) = settled {
            tracing::warn!(%error, message_id, "recording a SendMessage outcome failed; a retry of it may run again");
        }
        outcome
    }

    /// Removes the claim of a message refused before anything ran (`send.rs` `run_claimed`),
    /// whatever the refusal, an UNAVAILABLE too: no task can hold the message, so a kept claim
    /// would only hold a retry up for [`STALE`] and stay the retention age. Removed before the
    /// answer, so that a retry finds the message free; a removal that fails, or a call dropped
    /// meanwhile, leaves it to [`Landing`]'s tries. Returns `error`.
    pub(super) async fn refuse(self, core: &Core, error: A2aError) -> A2aError {
        let Some(record) = &self.record else { return error };
        let mut landing = Landing { env: &core.env, sent: &self.sent, mine: record, armed: true };
        match core.env.store.swap_sent(&self.sent.owner, &self.sent.message_id, record, None).await {
            // Removed, or no longer this call's to remove.
            Ok(_) => landing.armed = false,
            Err(e) => tracing::debug!(error = %e, "removing a refused call's SendMessage claim failed"),
        }
        error
    }
}

/// A follow-up's claim whose call was dropped before it settled the claim (its client reset
/// the call or hit its deadline while the turn ran): the claim stays, as for an UNAVAILABLE
/// answer, for a retry to find, but nothing would note it for retention, so in Redis only the
/// retention age bounded it, one per dropped call. Dropped with its record set, it notes the
/// record (`TaskStore::keep_sent`), in a task of its own since a drop cannot wait. Not a new
/// task's claim: that task (made even so, once the actor started) names the record in its own
/// retention member, and a second, older member would drop the record while the task is kept,
/// and a retry would then run the message again; so a new task's unsettled claim is bounded
/// by the retention age alone, as before.
struct Unsettled {
    core: Arc<crate::task::TaskEnv>,
    sent: Sent,
    record: Option<SentRecord>,
}

impl Unsettled {
    /// Leaves `guard` (if any) nothing to note.
    fn disarm(guard: &mut Option<Self>) {
        if let Some(guard) = guard {
            guard.record = None;
        }
    }
}

impl Drop for Unsettled {
    fn drop(&mut self) {
        let Some(record) = self.record.take() else { return };
        let sent = &self.sent;
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let (store, owner, message_id) =
            (self.core.store.clone(), sent.owner.clone(), sent.message_id.clone());
        drop(runtime.spawn(async move {
            if let Err(error) = store.keep_sent(&owner, &message_id, &record).await {
                tracing::debug!(%error, message_id, "noting a dropped call's SendMessage claim for retention failed");
            }
        }));
    }
}

/// A claim sent and not answered yet. Its call may go meanwhile (the client reset it, or its
/// deadline passed while the store was slow) or hear an error (a reply lost), and the claim
/// may have landed even so, or land later (a pipeline sends it all the same). Nothing ran, so
/// such a claim is removed if it is still this call's: at once, and once more after [`STALE`]
/// for one still on its way (by then it has gone out or failed; and a retry takes a stale claim
/// over anyway). Otherwise it stayed the retention age, and a retry of the call waited
/// [`STALE`] for it. Borrowed, so an answered claim copies nothing. A claim refused before
/// its agent ran goes the same way ([`Claim::refuse`]).
struct Landing<'a> {
    env: &'a Arc<crate::task::TaskEnv>,
    sent: &'a Sent,
    mine: &'a SentRecord,
    armed: bool,
}

impl Drop for Landing<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let (store, owner) = (self.env.store.clone(), self.sent.owner.clone());
        let (message_id, mine) = (self.sent.message_id.clone(), self.mine.clone());
        drop(runtime.spawn(async move {
            for pause in [Duration::ZERO, STALE] {
                tokio::time::sleep(pause).await;
                match store.swap_sent(&owner, &message_id, &mine, None).await {
                    Ok(true) => return,
                    Ok(false) => {}
                    // The store is away (and the claim likely never reached it): no second try
                    // adds to an outage's load; the claim, if it landed, goes stale.
                    Err(error) => {
                        tracing::debug!(%error, message_id, "removing an abandoned SendMessage claim failed");
                        return;
                    }
                }
            }
        }));
    }
}

/// Whether `owner`'s task `task_id` holds the user message `message_id` (the message reached
/// it); false when there is no such task.
async fn accepted(core: &Core, owner: &Owner, task_id: &str, message_id: &str) -> Result<bool, A2aError> {
    match core.current_task(owner, task_id).await {
        Ok(task) => Ok(holds(&task, message_id)),
        Err(A2aError::TaskNotFound(_)) => Ok(false),
        Err(error) => Err(error),
    }
}

fn holds(task: &Task, message_id: &str) -> bool {
    task.history.iter().any(|m| m.message_id == message_id && m.role == Role::User as i32)
}

/// `record` said to be alive now.
fn alive_now(record: &SentRecord) -> SentRecord {
    let mut fresh = record.clone();
    if let SentState::Claimed { alive_ms, .. } = &mut fresh.state {
        *alive_ms = now_ms();
    }
    fresh
}

/// An earlier call's task for a blocking SendMessage: once it is terminal or interrupted, as
/// the first call was answered.
pub(super) async fn settled_task(core: &Core, owner: &Owner, task_id: &str) -> Result<Arc<Task>, A2aError> {
    loop {
        let subscription = match subscribe(core, owner, task_id).await? {
            Found::Live(subscription) => subscription,
            Found::Finished(task) => return Ok(task),
        };
        if settles(state_of(subscription.snapshot.status.as_ref())) {
            return Ok(subscription.snapshot);
        }
        let mut feed = subscription.feed;
        while let Some(Ok(event)) = feed.next().await {
            if event.state().is_some_and(settles) {
                break;
            }
        }
        drop(feed);
        // The task now: settled, unless it moved on already (then it is followed again).
        let task = core.current_task(owner, task_id).await?;
        if settles(state_of(task.status.as_ref())) {
            return Ok(task);
        }
    }
}

/// The live task and a feed of its updates, or the finished task.
pub(super) async fn subscribe(
    core: &Core,
    owner: &Owner,
    task_id: &str,
) -> Result<Found<Subscription>, A2aError> {
    with_live(&core.env, owner, task_id, |handle| async move { handle.subscribe(None).await }).await
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(millis).unwrap_or(0)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
