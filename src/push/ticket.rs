//! Durable deliveries (a fleet's Redis outbox): each event taken from the outbox carries a
//! [`Completion`], and each webhook queue entry made from it a [`Ticket`]. The entry is
//! acknowledged (removed from the outbox) once every ticket was settled — delivered, given up
//! after its retries, refused, or shed by a full queue, all of them counted — and never when a
//! ticket is dropped unsettled (the process stopping mid-delivery): the outbox then hands the
//! entry out again, so a webhook gets every event at least once.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::mpsc;

/// What the outbox learns of one entry: settled (acknowledge it) or not (hand it out again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// Every delivery of the entry is over.
    Done(String),
    /// Some delivery stopped unfinished (its worker stopped, the store failed).
    Again(String),
}

/// One outbox entry on its way to its webhooks; reports when its last ticket is gone.
pub struct Completion {
    entry: String,
    unfinished: AtomicBool,
    report: mpsc::Sender<Settled>,
    /// What the reader holds while the entry is out (released with the completion).
    _slot: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Completion {
    /// The completion of outbox entry `entry`, reported to `report` (a bounded channel: a
    /// report that does not fit is lost, and the entry is simply handed out again later).
    /// `slot`: what the reader holds while the entry is out, released with the completion.
    pub fn new(
        entry: String,
        report: mpsc::Sender<Settled>,
        slot: Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Arc<Self> {
        Arc::new(Self { entry, unfinished: AtomicBool::new(false), report, _slot: slot })
    }

    /// Marks the entry as not delivered: it is handed out again.
    pub fn unfinished(&self) {
        self.unfinished.store(true, Ordering::Release);
    }

    /// A ticket for one webhook's delivery of the entry.
    pub fn ticket(self: &Arc<Self>) -> Ticket {
        Ticket { completion: self.clone(), settled: false }
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        let entry = std::mem::take(&mut self.entry);
        let settled = if self.unfinished.load(Ordering::Acquire) {
            Settled::Again(entry)
        } else {
            Settled::Done(entry)
        };
        let _ = self.report.try_send(settled);
    }
}

/// One webhook's share of an outbox entry.
pub struct Ticket {
    completion: Arc<Completion>,
    settled: bool,
}

impl Ticket {
    /// This webhook is done with the event (delivered, given up, refused or shed).
    pub fn settle(mut self) {
        self.settled = true;
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.settled {
            self.completion.unfinished.store(true, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_done_only_when_every_ticket_settled() {
        let (report, mut reports) = mpsc::channel(4);
        let completion = Completion::new("1-0".into(), report.clone(), None);
        let (a, b) = (completion.ticket(), completion.ticket());
        drop(completion);
        a.settle();
        assert!(reports.try_recv().is_err(), "b is still out");
        b.settle();
        assert_eq!(reports.try_recv(), Ok(Settled::Done("1-0".into())));

        let completion = Completion::new("2-0".into(), report.clone(), None);
        let (a, b) = (completion.ticket(), completion.ticket());
        drop(completion);
        a.settle();
        drop(b);
        assert_eq!(reports.try_recv(), Ok(Settled::Again("2-0".into())), "b stopped unfinished");

        drop(Completion::new("3-0".into(), report, None));
        assert_eq!(reports.try_recv(), Ok(Settled::Done("3-0".into())), "no webhook: nothing to do");
    }
}
