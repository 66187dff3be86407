//! A task actor's command channel: bounded, many senders (handles, event sinks), one receiver
//! (the actor).
//!
//! tokio's `mpsc` allocates a block of 32 slots with every channel and pads its state to
//! cache lines: for 32-byte commands, 1.5 KiB held by every live task for its whole life,
//! idle or not, the largest part of an idle task's actor. An idle task has nothing queued, so
//! this channel queues in a `VecDeque` that grows when commands come, which the actor gives
//! back when it goes quiet ([`Receiver::release_spare`]): about 200 bytes while idle.
//!
//! It behaves as tokio's bounded channel where the actor relies on it: a sender waits, in
//! arrival order (a semaphore), while the queue is full; after `close` the queued commands are
//! still received, then `None`; `recv` is cancel-safe and spends the task's coop budget; a
//! closed or dropped receiver fails sends and wakes [`Sender::closed`].
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker, ready};

use tokio::sync::{Notify, Semaphore};

struct Queue<T> {
    items: VecDeque<T>,
    /// The receiver waiting for an item.
    waiting: Option<Waker>,
    closed: bool,
}

struct Shared<T> {
    queue: Mutex<Queue<T>>,
    /// Free places in the queue: a send takes one, a receive gives it back. Closed with the
    /// channel, which fails the sends waiting for one.
    slots: Semaphore,
    senders: AtomicUsize,
    /// Wakes [`Sender::closed`] when the receiver closes.
    closing: Notify,
}

impl<T> Shared<T> {
    fn queue(&self) -> MutexGuard<'_, Queue<T>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn close(&self) {
        self.queue().closed = true;
        self.slots.close();
        self.closing.notify_waiters();
    }
}

/// A bounded channel that holds up to `capacity` items (at least one).
pub(crate) fn channel<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        queue: Mutex::new(Queue { items: VecDeque::new(), waiting: None, closed: false }),
        slots: Semaphore::new(capacity.clamp(1, Semaphore::MAX_PERMITS)),
        senders: AtomicUsize::new(1),
        closing: Notify::new(),
    });
    (Sender(shared.clone()), Receiver(shared))
}

/// The sending end; cloning it adds a sender. The receiver sees the end of the channel once
/// every sender is gone.
pub(crate) struct Sender<T>(Arc<Shared<T>>);

impl<T> Sender<T> {
    /// Queues `item`, waiting while the queue is full; the item back if the receiver closed.
    pub async fn send(&self, item: T) -> Result<(), T> {
        match self.0.slots.acquire().await {
            Ok(slot) => slot.forget(),
            Err(_) => return Err(item),
        }
        self.push(item)
    }

    /// Queues `item` if there is room now; the item back if there is none or the receiver closed.
    pub fn try_send(&self, item: T) -> Result<(), T> {
        match self.0.slots.try_acquire() {
            Ok(slot) => slot.forget(),
            Err(_) => return Err(item),
        }
        self.push(item)
    }

    /// Puts `item` in the queue, whose place this sender holds, and wakes the receiver.
    fn push(&self, item: T) -> Result<(), T> {
        let mut queue = self.0.queue();
        if queue.closed {
            return Err(item);
        }
        queue.items.push_back(item);
        let waiting = queue.waiting.take();
        drop(queue);
        if let Some(waker) = waiting {
            waker.wake();
        }
        Ok(())
    }

    /// Resolves once the receiver has closed or is gone.
    pub async fn closed(&self) {
        loop {
            let closing = self.0.closing.notified();
            let mut closing = std::pin::pin!(closing);
            // Registered before looking, so a close right after the look still wakes us.
            closing.as_mut().enable();
            if self.0.slots.is_closed() {
                return;
            }
            closing.await;
        }
    }

    /// Whether both senders send to the same receiver.
    pub fn same_channel(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.0.senders.fetch_add(1, Ordering::Relaxed);
        Self(self.0.clone())
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if self.0.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The last sender: a waiting receiver sees the end (it reads the count under the
            // lock, so it either saw it zero or left its waker for us).
            let waiting = self.0.queue().waiting.take();
            if let Some(waker) = waiting {
                waker.wake();
            }
        }
    }
}

/// The receiving end. Dropping it closes the channel and drops what is queued.
pub(crate) struct Receiver<T>(Arc<Shared<T>>);

impl<T> Receiver<T> {
    /// The next item; `None` once the channel is closed (or every sender gone) and empty.
    /// Cancel-safe: an item is taken only when it is returned.
    pub async fn recv(&mut self) -> Option<T> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        // Like tokio's channels: a receiver that always finds an item still yields now and
        // then, so one busy actor cannot hold a worker thread.
        let coop = ready!(tokio::task::coop::poll_proceed(cx));
        let mut queue = self.0.queue();
        if let Some(item) = queue.items.pop_front() {
            drop(queue);
            self.0.slots.add_permits(1);
            coop.made_progress();
            return Poll::Ready(Some(item));
        }
        if queue.closed || self.0.senders.load(Ordering::Acquire) == 0 {
            coop.made_progress();
            return Poll::Ready(None);
        }
        match &mut queue.waiting {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            waiting => *waiting = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// The next item if one is queued.
    pub fn try_recv(&mut self) -> Option<T> {
        let item = self.0.queue().items.pop_front()?;
        self.0.slots.add_permits(1);
        Some(item)
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.0.queue().items.is_empty()
    }

    /// Refuses new items (waiting senders fail); what is queued is still received.
    pub fn close(&mut self) {
        self.0.close();
    }

    /// Gives the queue's memory back if nothing is queued: an actor calls this when it goes
    /// quiet, so a task waiting for its client holds no buffer sized for its busiest moment.
    pub fn release_spare(&mut self) {
        let mut queue = self.0.queue();
        if queue.items.is_empty() && queue.items.capacity() > 0 {
            queue.items = VecDeque::new();
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.0.close();
        // Dropped outside the lock: an item's drop may do anything (answer a caller).
        let items = std::mem::take(&mut self.0.queue().items);
        drop(items);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn items_arrive_in_order_and_the_end_when_every_sender_is_gone() {
        let (tx, mut rx) = channel(4);
        let other = tx.clone();
        tx.send(1).await.unwrap();
        other.send(2).await.unwrap();
        drop(tx);
        assert_eq!(rx.recv().await, Some(1));
        let waiting = tokio::spawn(async move { (rx.recv().await, rx.recv().await) });
        tokio::task::yield_now().await;
        drop(other);
        assert_eq!(waiting.await.unwrap(), (Some(2), None));
    }

    #[tokio::test]
    async fn a_full_queue_makes_senders_wait_until_an_item_is_taken() {
        let (tx, mut rx) = channel(2);
        tx.send(1).await.unwrap();
        tx.try_send(2).unwrap();
        assert_eq!(tx.try_send(3), Err(3), "full");
        let blocked = tokio::spawn({
            let tx = tx.clone();
            async move { tx.send(3).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!blocked.is_finished(), "waits while full");
        assert_eq!(rx.try_recv(), Some(1));
        blocked.await.unwrap().unwrap();
        assert_eq!((rx.recv().await, rx.recv().await), (Some(2), Some(3)));
        assert!(rx.is_empty());
    }

    #[tokio::test]
    async fn closing_keeps_what_is_queued_fails_sends_and_wakes_closed() {
        let (tx, mut rx) = channel(1);
        tx.send(1).await.unwrap();
        let blocked = tokio::spawn({
            let tx = tx.clone();
            async move { tx.send(2).await }
        });
        let watcher = tokio::spawn({
            let tx = tx.clone();
            async move { tx.closed().await }
        });
        tokio::task::yield_now().await;
        rx.close();
        assert_eq!(blocked.await.unwrap(), Err(2), "a waiting sender fails");
        watcher.await.unwrap();
        assert_eq!(tx.try_send(3), Err(3));
        assert_eq!((rx.recv().await, rx.recv().await), (Some(1), None));
        tx.closed().await;
    }

    #[tokio::test]
    async fn dropping_the_receiver_drops_the_queued_items() {
        let (tx, rx) = channel(4);
        let item = Arc::new(());
        tx.send(item.clone()).await.unwrap();
        drop(rx);
        assert_eq!(Arc::strong_count(&item), 1, "the queued item is gone");
        assert!(tx.send(item).await.is_err());
        tx.closed().await;
    }

    #[tokio::test]
    async fn a_quiet_receiver_gives_its_buffer_back() {
        let (tx, mut rx) = channel(64);
        for i in 0..40 {
            tx.send(i).await.unwrap();
        }
        rx.release_spare();
        assert!(rx.0.queue().items.capacity() >= 40, "kept while items wait");
        while rx.try_recv().is_some() {}
        rx.release_spare();
        assert_eq!(rx.0.queue().items.capacity(), 0);
        tx.send(1).await.unwrap();
        assert_eq!(rx.recv().await, Some(1));
    }

    #[test]
    fn same_channel_tells_channels_apart() {
        let (a, _ra) = channel::<()>(1);
        let (b, _rb) = channel::<()>(1);
        assert!(a.same_channel(&a.clone()) && !a.same_channel(&b));
    }
}
