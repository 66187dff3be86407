//! The fleet's webhook deliverer: one replica at a time leads the durable push outbox
//! (`task/store/redis/outbox.rs`) and hands its entries, in order, to the push dispatcher;
//! an entry is acknowledged once every webhook is done with its event (`push/ticket.rs`).
//!
//! A new leader first takes over every entry handed out and not acknowledged (the last leader
//! died, or lost the lead), then reads new ones. Deliveries stay at least once: an event whose delivery stopped unfinished is handed
//! out again, and every POST names its event (`A2A-Delivery-Id`) for the receiver to drop
//! repeats.
use std::sync::Arc;
use std::time::Duration;

use prost::Message;
use tokio::sync::{Semaphore, mpsc};

use super::Inner;
use crate::proto::StreamResponse;
use crate::proto::stream_response::Payload;
use crate::push::PushDispatcher;
use crate::push::ticket::{Completion, Settled};
use crate::task::is_terminal;
use crate::task::log::TaskEvent;
use crate::task::store::redis::OutboxEntry;

/// Entries read at once.
const BATCH: usize = 64;

/// Entries handed to the dispatcher and not yet settled, at most (and no more than one
/// webhook's queue holds): the outbox is read no faster than it is delivered, so a slow
/// webhook holds back the reading, never memory.
const OUTSTANDING: usize = 4096;

/// How long one read waits for new entries (and so how soon a lost lead is noticed).
const READ_BLOCK: Duration = Duration::from_millis(1000);

/// How long an event whose delivery stopped unfinished waits before it is handed out again.
const AGAIN_AFTER: Duration = Duration::from_secs(1);

impl Inner {
    /// Leads the outbox whenever no other replica does, delivering its entries; forever.
    pub(super) async fn run_outbox(self: Arc<Self>, push: Arc<PushDispatcher>) {
        let (report, reports) = mpsc::channel(OUTSTANDING);
        let slots = Arc::new(Semaphore::new(push.durable_window(OUTSTANDING)));
        tokio::spawn(self.clone().settle(reports, report.clone(), push.clone(), slots.clone()));
        let lease = self.settings.lease;
        loop {
            if self.store.outbox_prepare().await.is_err()
                || !self.store.outbox_lead(&self.replica, lease).await.unwrap_or(false)
            {
                tokio::time::sleep(lease / 3).await;
                continue;
            }
            tracing::info!(replica = %self.replica, "leading the push outbox");
            self.lead(&push, &report, &slots).await;
            tracing::info!(replica = %self.replica, "no longer leading the push outbox");
        }
    }

    /// One term as the outbox's leader: until the lead is lost. It starts by taking over every
    /// entry handed out and not acknowledged: only a leader reads, so those were left by a
    /// dead one (or one that lost the lead and may still deliver them: at least once).
    async fn lead(&self, push: &Arc<PushDispatcher>, report: &mpsc::Sender<Settled>, slots: &Arc<Semaphore>) {
        let lease = self.settings.lease;
        let mut renewed = tokio::time::Instant::now();
        let mut claiming = Some("0-0".to_owned());
        loop {
            if renewed.elapsed() >= lease / 3 {
                match self.store.outbox_lead(&self.replica, lease).await {
                    Ok(true) => renewed = tokio::time::Instant::now(),
                    _ => return,
                }
            }
            let read = match &claiming {
                Some(start) => self.store.outbox_claim(&self.replica, start, BATCH).await,
                None => {
                    self.store.outbox_read(&self.replica, BATCH, READ_BLOCK).await.map(|e| (e, String::new()))
                }
            };
            let entries = match read {
                Ok((entries, next)) => {
                    if claiming.is_some() {
                        claiming = Some(next).filter(|next| next != "0-0");
                        if claiming.is_none() {
                            self.forget_readers().await;
                        }
                    }
                    entries
                }
                Err(error) => {
                    tracing::warn!(%error, "reading the push outbox failed");
                    tokio::time::sleep(READ_BLOCK).await;
                    // A Redis that restarted empty has no group any more (NOGROUP).
                    let _ = self.store.outbox_prepare().await;
                    continue;
                }
            };
            for entry in entries {
                self.hand_over(push, report, slots, entry).await;
            }
        }
    }

    /// Once this leader holds every entry left unacknowledged, the readers it took them from
    /// (dead replicas, each restart a new one) go from the group.
    async fn forget_readers(&self) {
        match self.store.outbox_forget_readers(&self.replica).await {
            Ok(0) => {}
            Ok(removed) => tracing::info!(removed, "forgot the push outbox's readers that hold nothing"),
            Err(error) => tracing::debug!(%error, "forgetting the push outbox's idle readers failed"),
        }
    }

    /// Hands one entry's event to the dispatcher (waiting for a free slot).
    async fn hand_over(
        &self,
        push: &Arc<PushDispatcher>,
        report: &mpsc::Sender<Settled>,
        slots: &Arc<Semaphore>,
        entry: OutboxEntry,
    ) {
        let Ok(slot) = slots.clone().acquire_owned().await else { return };
        let completion = Completion::new(entry.id.clone(), report.clone(), Some(slot));
        let Ok(response) = StreamResponse::decode(entry.event.clone()) else {
            // Not ours to deliver (the completion, dropped, settles it): say so once per entry.
            tracing::warn!(task_id = %entry.task_id, seq = entry.seq, "an outbox entry's event does not decode; skipped");
            return;
        };
        let terminal = match &response.payload {
            Some(Payload::StatusUpdate(update)) => is_terminal(crate::task::state_of(update.status.as_ref())),
            _ => false,
        };
        let event = Arc::new(TaskEvent::new(entry.seq, response));
        push.deliver_durable(entry.owner, entry.task_id, event, terminal, completion).await;
    }

    /// Acknowledges settled entries (in batches), and hands out again, after a pause, those
    /// whose delivery stopped unfinished.
    async fn settle(
        self: Arc<Self>,
        mut reports: mpsc::Receiver<Settled>,
        report: mpsc::Sender<Settled>,
        push: Arc<PushDispatcher>,
        slots: Arc<Semaphore>,
    ) {
        while let Some(first) = reports.recv().await {
            let mut done = Vec::new();
            let mut again = Vec::new();
            let mut next = Some(first);
            while let Some(settled) = next {
                match settled {
                    Settled::Done(id) => done.push(id),
                    Settled::Again(id) => again.push(id),
                }
                next = if done.len() + again.len() < BATCH { reports.try_recv().ok() } else { None };
            }
            if let Err(error) = self.store.outbox_done(&done).await {
                // Left pending: handed out again by the next leader (at least once).
                tracing::warn!(%error, entries = done.len(), "acknowledging push outbox entries failed");
            }
            if !again.is_empty() {
                tokio::time::sleep(AGAIN_AFTER).await;
                match self.store.outbox_reclaim(&self.replica, &again).await {
                    Ok(entries) => {
                        for entry in entries {
                            self.hand_over(&push, &report, &slots, entry).await;
                        }
                    }
                    Err(error) => tracing::warn!(%error, "taking back unfinished push outbox entries failed"),
                }
            }
        }
    }
}
