//! Where deliveries wait for a subscriber: a queue with a delivery policy, read by a blocking
//! iterator, a callback thread, or a `futures::Stream`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::task::Waker;
use std::time::{Duration, Instant};

/// How deliveries reach a subscriber that has not read the previous ones yet.
///
/// ```
/// # use std::time::Duration;
/// # use tessera::collection::Record;
/// # #[derive(Record, Debug, Clone, PartialEq)]
/// # struct Task { #[record(key)] id: u32, priority: i32 }
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = tessera::Db::open(dir.path().join("db"))?;
/// # let tasks = db.collection::<Task>()?;
/// # let wait = Duration::from_secs(5);
/// use tessera::live::{Event, Policy};
/// let live = tasks.subscribe_query_with(&tasks.all(), Policy::LatestOnly)?;
/// live.recv_timeout(wait); // the initial result
/// for id in 0..10 {
///     db.write(|tx| tasks.insert(tx, &Task { id, priority: 0 }))?;
/// }
/// db.sync()?;
/// std::thread::sleep(Duration::from_millis(50));
/// // Unread changes merged: the latest result, with indices against the last one read.
/// let mut latest = live.recv_timeout(wait).and_then(Event::changed).expect("a change");
/// while let Some(Event::Changed(newer)) = live.try_recv() {
///     latest = newer;
/// }
/// assert_eq!(latest.result.len(), 10);
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// Every change is queued (up to [`QUEUE_LEN_MAX`]; past it, changes coalesce as with
    /// `LatestOnly`, so memory stays bounded).
    #[default]
    EveryChange,
    /// Unread changes are merged into one: a slow consumer gets the latest state, with
    /// indices computed against the last state it read.
    LatestOnly,
}

/// Most deliveries queued for one subscriber before they coalesce.
///
/// ```
/// use tessera::live::QUEUE_LEN_MAX;
/// assert!(QUEUE_LEN_MAX >= 1_000, "a burst of commits queues before it coalesces");
/// ```
pub const QUEUE_LEN_MAX: usize = 4096;

/// Merging an unread delivery with a newer one.
pub(crate) trait Coalesce {
    fn coalesce(&mut self, newer: Self);
}

struct State<E> {
    queue: VecDeque<E>,
    waker: Option<Waker>,
    /// Why the subscription ended, once it has (the first reason given).
    end: Option<SubscriptionEnd>,
    /// Threads blocked in [`Mailbox::recv_until`]: a push wakes the condition variable only
    /// when one is (std's `notify_all` makes a system call even with no waiter, and a commit
    /// may push to a thousand mailboxes that nobody waits on yet).
    waiting: u32,
}

/// Why a subscription delivers nothing more: what its last event, [`super::Event::Closed`],
/// carries, and what its handle's `ended` reports.
///
/// ```
/// use tessera::collection::Record;
/// use tessera::live::{Event, SubscriptionEnd};
/// #[derive(Record)]
/// struct Item { #[record(key)] id: u32 }
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let items = db.collection::<Item>()?;
/// let live = items.subscribe_object(&1u32)?;
/// assert!(live.ended().is_none(), "still following");
/// drop(items);
/// drop(db); // the last handle: the database closes
/// assert!(matches!(live.recv(), Some(Event::Initial(None))));
/// assert!(matches!(live.recv(), Some(Event::Closed(SubscriptionEnd::DatabaseClosed))));
/// assert!(live.recv().is_none());
/// assert!(matches!(live.ended(), Some(SubscriptionEnd::DatabaseClosed)));
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum SubscriptionEnd {
    /// The database closed: its last handle was dropped.
    DatabaseClosed,
    /// The subscription could not follow a commit (a changed record that does not decode as
    /// the record type: the error names the collection, the key and the field path). It
    /// delivers nothing after the last consistent state.
    Failed(std::sync::Arc<crate::Error>),
    /// The callback given to `for_each` panicked, with this message; it was removed.
    CallbackPanicked(String),
}

pub(crate) struct Mailbox<E> {
    state: Mutex<State<E>>,
    ready: Condvar,
    policy: Policy,
    /// The database or subscription is gone: no more deliveries.
    ended: AtomicBool,
    /// Counted up when the mailbox goes (its handle dropped), so that the registry holding it
    /// knows to prune.
    dropped: std::sync::OnceLock<std::sync::Arc<std::sync::atomic::AtomicUsize>>,
}

impl<E> Mailbox<E> {
    pub(crate) fn new(policy: Policy) -> Self {
        Mailbox {
            state: Mutex::new(State { queue: VecDeque::new(), waker: None, end: None, waiting: 0 }),
            ready: Condvar::new(),
            policy,
            ended: AtomicBool::new(false),
            dropped: std::sync::OnceLock::new(),
        }
    }

    /// Counts this mailbox's end in `counter` when it is dropped (set once, at registration).
    pub(crate) fn count_drop_in(&self, counter: std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        let _ = self.dropped.set(counter);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<E>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the subscription ended (for a reason or because its handle is gone).
    pub(crate) fn is_ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    /// Ends the subscription for `reason` (the first reason given is kept), waking a waiting
    /// reader; deliveries already queued are still read.
    pub(crate) fn end_with(&self, reason: SubscriptionEnd) {
        self.lock().end.get_or_insert(reason);
        self.end();
    }

    /// Why the subscription ended, if it has for a reason (see [`Mailbox::end_with`]).
    pub(crate) fn end_reason(&self) -> Option<SubscriptionEnd> {
        self.lock().end.clone()
    }

    /// Ends the subscription with no reason to report (its handle is gone).
    pub(crate) fn end(&self) {
        self.ended.store(true, Ordering::Release);
        let waker = self.lock().waker.take();
        self.ready.notify_all();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    pub(crate) fn try_recv(&self) -> Option<E> {
        self.lock().queue.pop_front()
    }

    /// Waits for a delivery until `deadline` (forever with `None`); `None` on timeout or end.
    pub(crate) fn recv_until(&self, deadline: Option<Instant>) -> Option<E> {
        let mut state = self.lock();
        loop {
            if let Some(event) = state.queue.pop_front() {
                return Some(event);
            }
            if self.ended.load(Ordering::Acquire) {
                return None;
            }
            let left = match deadline {
                None => None,
                Some(deadline) => Some(deadline.checked_duration_since(Instant::now())?),
            };
            state.waiting += 1;
            state = match left {
                None => self.ready.wait(state).unwrap_or_else(|p| p.into_inner()),
                Some(left) => self.ready.wait_timeout(state, left.min(Duration::from_secs(3600))).unwrap_or_else(|p| p.into_inner()).0,
            };
            state.waiting -= 1;
        }
    }

    /// For `Stream::poll_next`: a delivery, or registers the waker.
    #[cfg_attr(not(feature = "futures"), allow(dead_code))]
    pub(crate) fn poll(&self, waker: &Waker) -> std::task::Poll<Option<E>> {
        let mut state = self.lock();
        if let Some(event) = state.queue.pop_front() {
            return std::task::Poll::Ready(Some(event));
        }
        if self.ended.load(Ordering::Acquire) {
            return std::task::Poll::Ready(None);
        }
        state.waker = Some(waker.clone());
        std::task::Poll::Pending
    }
}

impl<E: Coalesce> Mailbox<E> {
    /// Queues a delivery; an ended mailbox takes none (a subscription that could not follow
    /// one commit must not deliver a later one computed without it).
    pub(crate) fn push(&self, event: E) {
        let mut state = self.lock();
        if state.end.is_some() || self.ended.load(Ordering::Acquire) {
            return;
        }
        let coalesce = self.policy == Policy::LatestOnly || state.queue.len() >= QUEUE_LEN_MAX;
        match state.queue.back_mut() {
            Some(last) if coalesce => last.coalesce(event),
            _ => state.queue.push_back(event),
        }
        let (waker, waiting) = (state.waker.take(), state.waiting > 0);
        drop(state);
        if waiting {
            self.ready.notify_all();
        }
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<E> Drop for Mailbox<E> {
    fn drop(&mut self) {
        if let Some(counter) = self.dropped.get() {
            counter.fetch_add(1, Ordering::AcqRel);
        }
    }
}
