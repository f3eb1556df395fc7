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
    /// Queues a delivery, waking a waiting reader; an ended mailbox takes none (a subscription
    /// that could not follow one commit must not deliver a later one computed without it).
    pub(crate) fn push(&self, event: E) {
        if self.push_quiet(event) {
            self.wake();
        }
    }

    /// Queues a delivery as [`Mailbox::push`] does, without waking the reader; `true` when a
    /// reader waits (a blocked thread or a registered waker), which the caller must then wake
    /// with [`Mailbox::wake`]. A reader that starts waiting after the push finds the delivery.
    pub(crate) fn push_quiet(&self, event: E) -> bool {
        let mut state = self.lock();
        if state.end.is_some() || self.ended.load(Ordering::Acquire) {
            return false;
        }
        let coalesce = self.policy == Policy::LatestOnly || state.queue.len() >= QUEUE_LEN_MAX;
        match state.queue.back_mut() {
            Some(last) if coalesce => last.coalesce(event),
            _ => state.queue.push_back(event),
        }
        state.waiting > 0 || state.waker.is_some()
    }
}

impl<E> Mailbox<E> {
    /// Wakes the reader waiting for a delivery pushed with [`Mailbox::push_quiet`], if any.
    pub(crate) fn wake(&self) {
        let mut state = self.lock();
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

/// Most time a delivery waits for its reader to be woken while the thread that pushed it
/// updates further subscriptions of the same commit (see [`Wakes`]).
pub(crate) const WAKE_DELAY_MAX: Duration = Duration::from_millis(1);

/// Readers to wake for deliveries pushed with [`Mailbox::push_quiet`] during one commit: woken
/// together once the oldest has waited [`WAKE_DELAY_MAX`], and at the end (or when dropped).
/// A subscriber reading its subscriptions in turn while a large commit updates them waits on
/// each that is not updated yet: waking it for each delivery cost a system call and two
/// context switches per subscription (a thousand for the live table's case 3, on the two cores
/// the commit's updates run on).
pub(crate) struct Wakes<E> {
    pending: Vec<std::sync::Arc<Mailbox<E>>>,
    oldest: Option<Instant>,
    /// Calls of [`Wakes::wake_if_due`] since the clock was last read.
    unchecked_calls: u32,
}

/// [`Wakes::wake_if_due`] reads the clock once per this many calls: a commit's updates ask
/// after each subscription (about a microsecond each), and reading the clock for each was 6 %
/// of the feed thread's time in the live table's case 1. A wake is then late by at most this
/// many subscriptions' updates beyond [`WAKE_DELAY_MAX`].
const WAKE_CHECK_EVERY_CALLS: u32 = 16;

impl<E> Wakes<E> {
    pub(crate) fn new() -> Self {
        Wakes { pending: Vec::new(), oldest: None, unchecked_calls: 0 }
    }

    /// Remembers `mailbox`, whose push asked for a wake; wakes every pending reader when the
    /// oldest has waited long enough.
    fn add(&mut self, mailbox: std::sync::Arc<Mailbox<E>>) {
        self.oldest.get_or_insert_with(Instant::now);
        self.pending.push(mailbox);
        self.wake_if_due();
    }

    /// Queues `event` in `mailbox` without waking its reader ([`Mailbox::push_quiet`]), and
    /// keeps the mailbox for a later wake if its reader waits.
    pub(crate) fn push(&mut self, mailbox: std::sync::Arc<Mailbox<E>>, event: E)
    where
        E: Coalesce,
    {
        if mailbox.push_quiet(event) {
            self.add(mailbox);
        }
    }

    /// Wakes every pending reader once the oldest has waited [`WAKE_DELAY_MAX`] (looked at
    /// every [`WAKE_CHECK_EVERY_CALLS`] calls).
    pub(crate) fn wake_if_due(&mut self) {
        if self.oldest.is_none() {
            return;
        }
        self.unchecked_calls += 1;
        if self.unchecked_calls >= WAKE_CHECK_EVERY_CALLS {
            self.unchecked_calls = 0;
            self.wake_if_due_at(Instant::now());
        }
    }

    fn wake_if_due_at(&mut self, now: Instant) {
        if self.oldest.is_some_and(|oldest| now.saturating_duration_since(oldest) >= WAKE_DELAY_MAX) {
            self.wake_all();
        }
    }

    /// Wakes every pending reader.
    pub(crate) fn wake_all(&mut self) {
        for mailbox in self.pending.drain(..) {
            mailbox.wake();
        }
        self.oldest = None;
    }
}

impl<E> Drop for Wakes<E> {
    fn drop(&mut self) {
        self.wake_all();
    }
}

impl<E> Drop for Mailbox<E> {
    fn drop(&mut self) {
        if let Some(counter) = self.dropped.get() {
            counter.fetch_add(1, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[derive(Debug, PartialEq)]
    struct Note(u32);

    impl Coalesce for Note {
        fn coalesce(&mut self, newer: Self) {
            *self = newer;
        }
    }

    /// A thread blocked in `recv_until` on `mailbox`, once it is blocked.
    fn blocked_reader(mailbox: &Arc<Mailbox<Note>>) -> std::thread::JoinHandle<Option<Note>> {
        let reader = {
            let mailbox = mailbox.clone();
            std::thread::spawn(move || mailbox.recv_until(Some(Instant::now() + Duration::from_secs(30))))
        };
        while mailbox.lock().waiting == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        reader
    }

    #[test]
    fn a_quiet_push_asks_for_a_wake_only_when_a_reader_waits() {
        let mailbox = Arc::new(Mailbox::new(Policy::EveryChange));
        assert!(!mailbox.push_quiet(Note(1)), "nobody waits");
        assert_eq!(mailbox.try_recv(), Some(Note(1)));
        let reader = blocked_reader(&mailbox);
        assert!(mailbox.push_quiet(Note(2)), "a reader waits");
        mailbox.wake();
        assert_eq!(reader.join().unwrap(), Some(Note(2)));
        mailbox.end();
        assert!(!mailbox.push_quiet(Note(3)), "an ended mailbox takes nothing");
        assert_eq!(mailbox.try_recv(), None);
    }

    #[test]
    fn pending_wakes_come_when_the_oldest_is_due_or_when_dropped() {
        let (first, second) = (Arc::new(Mailbox::new(Policy::EveryChange)), Arc::new(Mailbox::new(Policy::EveryChange)));
        let mut wakes = Wakes::new();
        let reader = blocked_reader(&first);
        assert!(first.push_quiet(Note(1)));
        wakes.add(first.clone());
        let oldest = Instant::now();
        wakes.oldest = Some(oldest);
        wakes.wake_if_due_at(oldest + WAKE_DELAY_MAX / 2);
        assert_eq!(wakes.pending.len(), 1, "not due yet");
        wakes.wake_if_due_at(oldest + WAKE_DELAY_MAX);
        assert!(wakes.pending.is_empty() && wakes.oldest.is_none(), "due: woken");
        assert_eq!(reader.join().unwrap(), Some(Note(1)));
        // Whatever is pending when the batch goes is woken.
        let reader = blocked_reader(&second);
        assert!(second.push_quiet(Note(2)));
        wakes.add(second.clone());
        drop(wakes);
        assert_eq!(reader.join().unwrap(), Some(Note(2)));
    }

    #[test]
    fn a_due_wake_is_seen_within_the_calls_between_clock_reads() {
        let mailbox = Arc::new(Mailbox::new(Policy::EveryChange));
        let mut wakes = Wakes::new();
        let reader = blocked_reader(&mailbox);
        assert!(mailbox.push_quiet(Note(1)));
        wakes.pending.push(mailbox.clone());
        wakes.oldest = Some(Instant::now() - WAKE_DELAY_MAX); // due already
        for _ in 1..WAKE_CHECK_EVERY_CALLS {
            wakes.wake_if_due();
        }
        assert_eq!(wakes.pending.len(), 1, "the clock is not read on every call");
        wakes.wake_if_due();
        assert!(wakes.pending.is_empty(), "read on the last call of a round: due, woken");
        assert_eq!(reader.join().unwrap(), Some(Note(1)));
    }
}
