//! The change feed: one [`ChangeBatch`] per commit, delivered after the commit, in commit
//! order, never while the write lock is held.
//!
//! Writers queue each batch under the write lock (an O(1) push into an unbounded in-process
//! queue, so batches queue in commit order). Whoever holds the *delivery lock* delivers the
//! queue in order: the committing thread itself, right after it releases the write lock, when
//! its batch is small and no delivery is under way (so a small commit's subscribers have their
//! events before `write` returns, with no thread hop); otherwise the delivery thread, which a
//! large batch wakes (so a large commit returns without waiting for its delivery). A committer
//! that finds the delivery lock held leaves its batch to the holder, which looks at the queue
//! again after releasing the lock. Delivery hands the batch to each hook, then to every
//! listener's **bounded** queue with a non-blocking send.
//!
//! Policy for a listener whose queue is full (a slow consumer): the batch is not queued for it,
//! the writer never waits, and the listener's next event is [`FeedEvent::Lagged`] with the
//! number of batches it missed, so it knows to re-read state. A listener whose receiver is
//! dropped, or whose callback panicked, is removed.

use super::published::Published;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Most changes of a batch its committing thread delivers itself (see the module docs); a
/// larger batch is left to the delivery thread. Delivering 256 changes to a few subscriptions
/// costs about as much as the commit did.
pub(crate) const INLINE_DELIVERY_CHANGES_MAX: usize = 256;

/// What a commit did to one key.
///
/// ```
/// use std::time::Duration;
/// use tessera::store::{ChangeKind, FeedEvent};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let ks = db.keyspace("ks")?;
/// let feed = db.subscribe()?;
/// db.write(|tx| tx.put(&ks, b"k", b"v"))?;
/// let Some(FeedEvent::Batch(batch)) = feed.recv_timeout(Duration::from_secs(5)) else { panic!("no batch") };
/// assert_eq!(batch.changes[0].kind, ChangeKind::Insert);
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    /// The key did not exist before.
    Insert,
    /// The key existed and its value changed.
    Update,
    /// The key was removed.
    Delete,
}

/// One changed key.
///
/// ```
/// use std::time::Duration;
/// use tessera::store::{ChangeKind, FeedEvent};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let ks = db.keyspace("ks")?;
/// db.write(|tx| tx.put(&ks, b"k", b"old"))?;
/// let feed = db.subscribe()?;
/// db.write(|tx| tx.put(&ks, b"k", b"new"))?;
/// let Some(FeedEvent::Batch(batch)) = feed.recv_timeout(Duration::from_secs(5)) else { panic!("no batch") };
/// let change = &batch.changes[0];
/// assert_eq!((&*change.keyspace, &*change.key, change.kind), ("ks", &b"k"[..], ChangeKind::Update));
/// assert_eq!((change.old.as_deref(), change.new.as_deref()), (Some(&b"old"[..]), Some(&b"new"[..])));
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The keyspace's name.
    pub keyspace: Arc<str>,
    /// The key.
    pub key: Box<[u8]>,
    /// Insert, update or delete.
    pub kind: ChangeKind,
    /// The value before the commit (`None` for an insert).
    pub old: Option<Box<[u8]>>,
    /// The value after the commit (`None` for a delete).
    pub new: Option<Box<[u8]>>,
}

/// Everything one commit changed, in the order the transaction made the changes (a key
/// changed twice in one transaction appears once, with its first old and last new value).
///
/// ```
/// use std::time::Duration;
/// use tessera::store::FeedEvent;
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let ks = db.keyspace("ks")?;
/// let feed = db.subscribe()?;
/// db.write(|tx| { tx.put(&ks, b"k", b"1")?; tx.put(&ks, b"k", b"2") })?; // one key, twice
/// let Some(FeedEvent::Batch(batch)) = feed.recv_timeout(Duration::from_secs(5)) else { panic!("no batch") };
/// assert_eq!(batch.changes.len(), 1, "a key changed twice appears once, with its last value");
/// assert_eq!(batch.changes[0].new.as_deref(), Some(&b"2"[..]));
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeBatch {
    /// The commit's sequence number (LMDB's transaction id): increasing, in commit order.
    pub sequence: u64,
    /// The changes.
    pub changes: Vec<Change>,
}

/// What a listener receives.
///
/// ```
/// use std::time::Duration;
/// use tessera::store::FeedEvent;
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let ks = db.keyspace("ks")?;
/// let feed = db.subscribe()?;
/// db.write(|tx| tx.put(&ks, b"k", b"v"))?;
/// match feed.recv_timeout(Duration::from_secs(5)) {
///     Some(FeedEvent::Batch(batch)) => assert_eq!(batch.changes.len(), 1),
///     Some(FeedEvent::Lagged { missed }) => println!("{missed} batches missed: read the state again"),
///     None => panic!("no event"),
/// }
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Clone)]
pub enum FeedEvent {
    /// A commit's changes.
    Batch(Arc<ChangeBatch>),
    /// The listener's queue was full and this many batches were not delivered to it.
    Lagged {
        /// Batches skipped.
        missed: u64,
    },
}

/// Default capacity of each listener's queue, in batches.
///
/// ```
/// use tessera::store::LISTENER_QUEUE_BATCHES_DEFAULT;
/// assert!(LISTENER_QUEUE_BATCHES_DEFAULT >= 1);
/// ```
pub const LISTENER_QUEUE_BATCHES_DEFAULT: usize = 1024;

struct Listener {
    sender: SyncSender<FeedEvent>,
    /// The last commit before the listener's start: batches up to it are not its to receive
    /// (see [`crate::Db::subscribe`]).
    starts_after: u64,
    /// Batches dropped for this listener and not yet reported; shared with its stream, which
    /// reports them itself when its queue runs dry. Whoever swaps the count out reports it.
    missed: Arc<AtomicU64>,
}

/// One hook consumer's need for recorded changes (a live subscription holds one): writers
/// record changes while any is alive. Made by [`Feed::demand_changes`]; dropping it lowers the
/// demand, exactly once. It holds the feed weakly, so a consumer kept by a hook never keeps
/// the feed alive.
pub(crate) struct ChangeDemand {
    feed: std::sync::Weak<Feed>,
}

impl Drop for ChangeDemand {
    fn drop(&mut self) {
        if let Some(feed) = self.feed.upgrade() {
            let before = feed.hook_demand.fetch_sub(1, Ordering::AcqRel);
            debug_assert!(before > 0, "change demand lowered below zero");
        }
    }
}

/// A module's handler of every batch, run on the delivery thread (after the commit, never
/// under the write lock) before the listeners get the batch. Live queries are one.
pub(crate) type Hook = Arc<dyn Fn(&Published) + Send + Sync>;

/// A module's handler of a gap: commits of other processes that could not be delivered (see
/// [`Feed::report_gap`]). Live queries end their subscriptions with the error.
pub(crate) type GapHook = Arc<dyn Fn(&Arc<crate::Error>) + Send + Sync>;

pub(crate) struct Feed {
    listeners: Mutex<Vec<Listener>>,
    hooks: Mutex<Vec<Hook>>,
    gap_hooks: Mutex<Vec<GapHook>>,
    /// The sequence of the last batch delivered (under `delivering`): batches reach hooks and
    /// listeners in commit order, each once, which [`Feed::deliver`] asserts.
    delivered_sequence: AtomicU64,
    listener_count: AtomicUsize,
    hook_demand: AtomicUsize,
    outbox: Arc<Outbox>,
    /// Held while batches are delivered, so that they are delivered one at a time, in order.
    delivering: Mutex<()>,
    queue_batches: usize,
    /// The delivery thread, joined by [`Feed::close`].
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// Committed batches not delivered yet, in commit order.
#[derive(Default)]
struct Outbox {
    state: Mutex<OutboxState>,
    /// Wakes the delivery thread: a large batch, or the feed closing.
    wake: Condvar,
}

#[derive(Default)]
struct OutboxState {
    batches: VecDeque<Published>,
    /// Gaps of lost commits (of other processes), each as the last commit published before
    /// it, in commit order among the batches: the listeners are told of a gap (a
    /// [`FeedEvent::Lagged`]) when the batches before it have reached them and before any
    /// batch after it does.
    lost_after: VecDeque<u64>,
    /// The delivery thread has work a committer will not do (a large batch).
    thread_work: bool,
    /// The feed is closing: the thread delivers what is queued, then ends; nothing more queues.
    closed: bool,
}

impl Outbox {
    fn pop(&self) -> Option<Published> {
        lock(&self.state).batches.pop_front()
    }

    fn is_empty(&self) -> bool {
        lock(&self.state).batches.is_empty()
    }

    /// The first batch, if it is small enough for a committer to deliver.
    fn pop_small(&self) -> Option<Published> {
        let mut state = lock(&self.state);
        match state.batches.front() {
            Some(batch) if batch.len() <= INLINE_DELIVERY_CHANGES_MAX => state.batches.pop_front(),
            _ => None,
        }
    }

    /// Whether the first batch is small enough for a committer to deliver.
    fn has_small_first(&self) -> bool {
        lock(&self.state).batches.front().is_some_and(|batch| batch.len() <= INLINE_DELIVERY_CHANGES_MAX)
    }
}

impl Feed {
    /// Starts the delivery thread.
    pub(crate) fn start(queue_batches: usize) -> std::io::Result<Arc<Feed>> {
        let outbox = Arc::new(Outbox::default());
        let feed = Arc::new(Feed {
            listeners: Mutex::new(Vec::new()),
            hooks: Mutex::new(Vec::new()),
            gap_hooks: Mutex::new(Vec::new()),
            delivered_sequence: AtomicU64::new(0),
            listener_count: AtomicUsize::new(0),
            hook_demand: AtomicUsize::new(0),
            outbox: outbox.clone(),
            delivering: Mutex::new(()),
            queue_batches: queue_batches.max(1),
            thread: Mutex::new(None),
        });
        let weak = Arc::downgrade(&feed);
        let thread = std::thread::Builder::new().name("tessera-feed".into()).spawn(move || {
            loop {
                {
                    let mut state = lock(&outbox.state);
                    while !state.thread_work && !state.closed {
                        state = outbox.wake.wait(state).unwrap_or_else(|poisoned| poisoned.into_inner());
                    }
                    if state.closed && state.batches.is_empty() {
                        return;
                    }
                    state.thread_work = false;
                }
                let Some(feed) = weak.upgrade() else { return };
                // Waits for a committer that is delivering; then delivers whatever is left.
                let delivering = lock(&feed.delivering);
                while let Some(batch) = feed.outbox.pop() {
                    feed.deliver(&batch);
                    batch.recycle();
                }
                drop(delivering);
                // A batch queued after the last pop, by a committer that found the lock held, is
                // this thread's to deliver (looked at after the lock is released, as committers do).
                if !feed.outbox.is_empty() {
                    lock(&feed.outbox.state).thread_work = true;
                }
            }
        })?;
        *lock(&feed.thread) = Some(thread);
        Ok(feed)
    }

    /// True if someone listens, so that writers record changes.
    #[inline]
    pub(crate) fn has_listeners(&self) -> bool {
        self.listener_count.load(Ordering::Acquire) > 0 || self.hook_demand.load(Ordering::Acquire) > 0
    }

    /// Queues a committed batch for delivery (called in commit order, under the write lock).
    /// A large batch wakes the delivery thread; the committer of a small one delivers it with
    /// [`Feed::deliver_queued`] once it has released the write lock.
    pub(crate) fn publish(&self, batch: Published) {
        let large = batch.len() > INLINE_DELIVERY_CHANGES_MAX;
        let mut state = lock(&self.outbox.state);
        if state.closed {
            return;
        }
        state.batches.push_back(batch);
        if large {
            state.thread_work = true;
            drop(state);
            self.outbox.wake.notify_one();
        }
    }

    /// Delivers the queued small batches on this thread, up to the first large one (the
    /// delivery thread, which that batch woke, delivers it and the rest), unless another thread
    /// is delivering (it looks at the queue again when done). Called by a committer after it
    /// released the write lock, with no other tessera lock held but `DictInner::save` or
    /// `Inner::opening`.
    pub(crate) fn deliver_queued(&self) {
        loop {
            let delivering = match self.delivering.try_lock() {
                Ok(guard) => guard,
                Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return,
            };
            while let Some(batch) = self.outbox.pop_small() {
                self.deliver(&batch);
                batch.recycle();
            }
            drop(delivering);
            // A small batch queued after the last pop, by a committer that found the lock
            // held, is this thread's to deliver.
            if !self.outbox.has_small_first() {
                return;
            }
        }
    }

    /// Stops the delivery thread after it has delivered what was published, and waits for it
    /// (unless called on that thread: a hook or listener that drops the last handle).
    pub(crate) fn close(&self) {
        lock(&self.outbox.state).closed = true;
        self.outbox.wake.notify_one();
        let thread = lock(&self.thread).take();
        if let Some(thread) = thread.filter(|thread| thread.thread().id() != std::thread::current().id()) {
            let _ = thread.join();
        }
    }

    /// Installs a hook. Writers record changes for it only while its module has raised the
    /// demand (see [`Feed::demand`]).
    pub(crate) fn add_hook(&self, hook: Hook) {
        lock(&self.hooks).push(hook);
    }

    /// Asks writers to record changes for a hook's consumer until the returned guard drops.
    pub(crate) fn demand_changes(self: &Arc<Self>) -> ChangeDemand {
        self.hook_demand.fetch_add(1, Ordering::AcqRel);
        ChangeDemand { feed: Arc::downgrade(self) }
    }

    /// Installs a gap hook (see [`GapHook`]).
    pub(crate) fn add_gap_hook(&self, hook: GapHook) {
        lock(&self.gap_hooks).push(hook);
    }

    /// Queues a gap of lost commits after commit `after` (the last one published before them),
    /// in commit order with the batches: listeners learn of it ([`FeedEvent::Lagged`]) after
    /// the batches published before it and before any published after it. Called where the
    /// loss is found, before anything after it is published.
    pub(crate) fn note_lost_commits(&self, after: u64) {
        lock(&self.outbox.state).lost_after.push_back(after);
    }

    /// Takes the queued gaps that come before commit `before` (every one, for `u64::MAX`),
    /// unless a batch published before a gap is still queued: the count to tell listeners of.
    fn take_gaps_before(&self, before: u64) -> u64 {
        let mut state = lock(&self.outbox.state);
        let queued_first = state.batches.front().map_or(u64::MAX, Published::sequence);
        let mut taken = 0;
        while let Some(&after) = state.lost_after.front()
            && after < before
            && after < queued_first
        {
            state.lost_after.pop_front();
            taken += 1;
        }
        taken
    }

    /// Tells every gap hook that commits were lost (each gets `error`), and every listener of
    /// the gaps whose earlier batches it has received (see [`Feed::note_lost_commits`]). Runs
    /// between deliveries, under the delivery lock; false (nothing done) if a delivery holds
    /// it, for the caller to try again later (waiting could deadlock a write made inside a
    /// delivery).
    pub(crate) fn try_report_gap(&self, error: &Arc<crate::Error>) -> bool {
        let _delivering = match self.delivering.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return false,
        };
        let hooks: Vec<GapHook> = lock(&self.gap_hooks).clone();
        for hook in hooks {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(error)));
        }
        let gaps = self.take_gaps_before(u64::MAX);
        if gaps > 0 {
            for listener in lock(&self.listeners).iter() {
                listener.missed.fetch_add(gaps, Ordering::AcqRel);
            }
        }
        true
    }

    fn deliver(&self, batch: &Published) {
        // Under `delivering`: the only writer of the mark.
        let previous = self.delivered_sequence.swap(batch.sequence(), Ordering::AcqRel);
        assert!(batch.sequence() > previous, "batch {} delivered after batch {previous}: out of commit order", batch.sequence());
        let hooks: Vec<Hook> = lock(&self.hooks).clone();
        for hook in hooks {
            // A hook handles its own consumers' panics; one that escapes must not stop delivery.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(batch)));
        }
        // Gaps of lost commits before this batch reach the listeners ahead of it.
        let gaps = self.take_gaps_before(batch.sequence());
        let mut listeners = lock(&self.listeners);
        if listeners.is_empty() {
            self.listener_count.store(0, Ordering::Release);
            return; // no owned copy of the batch is made for nobody
        }
        let owned = batch.owned();
        let sequence = batch.sequence();
        listeners.retain_mut(|listener| {
            if sequence <= listener.starts_after {
                return true; // committed before the listener started
            }
            let pending = listener.missed.swap(0, Ordering::AcqRel) + gaps;
            if pending > 0 {
                match listener.sender.try_send(FeedEvent::Lagged { missed: pending }) {
                    Ok(()) => {}
                    Err(TrySendError::Full(_)) => {
                        listener.missed.fetch_add(pending + 1, Ordering::AcqRel);
                        return true;
                    }
                    Err(TrySendError::Disconnected(_)) => return false,
                }
            }
            match listener.sender.try_send(FeedEvent::Batch(owned.clone())) {
                Ok(()) => true,
                Err(TrySendError::Full(_)) => {
                    listener.missed.fetch_add(1, Ordering::AcqRel);
                    true
                }
                Err(TrySendError::Disconnected(_)) => false,
            }
        });
        self.listener_count.store(listeners.len(), Ordering::Release);
        drop(listeners);
        // A gap right after this batch (nothing queued before it now): counted at once, so
        // that each stream reports it once its queue runs dry, even if no batch follows.
        let trailing = self.take_gaps_before(u64::MAX);
        if trailing > 0 {
            for listener in lock(&self.listeners).iter() {
                listener.missed.fetch_add(trailing, Ordering::AcqRel);
            }
        }
    }

    /// Adds a listener, which writers record changes for from now on and which receives the
    /// batches of the commits after `starts_after`: the last commit before the start, read
    /// where no commit can come between (see [`crate::Db::subscribe`]).
    pub(crate) fn subscribe(&self, starts_after: u64) -> ChangeStream {
        let (sender, receiver) = mpsc::sync_channel(self.queue_batches);
        let missed = Arc::new(AtomicU64::new(0));
        let mut listeners = lock(&self.listeners);
        listeners.push(Listener { sender, starts_after, missed: missed.clone() });
        self.listener_count.store(listeners.len(), Ordering::Release);
        ChangeStream { receiver, missed }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A subscription to the change feed. Iterating blocks for the next event; dropping it
/// unsubscribes.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let notes = db.keyspace("notes")?;
/// let stream = db.subscribe()?;
/// db.write(|tx| tx.put(&notes, b"k", b"v"))?;
/// match stream.recv_timeout(std::time::Duration::from_secs(5)) {
///     Some(tessera::FeedEvent::Batch(batch)) => assert_eq!(batch.changes[0].kind, tessera::ChangeKind::Insert),
///     other => panic!("{other:?}"),
/// }
/// # Ok::<(), tessera::Error>(())
/// ```
pub struct ChangeStream {
    receiver: Receiver<FeedEvent>,
    missed: Arc<AtomicU64>,
}

impl ChangeStream {
    /// A queued event, or the report of batches dropped while the queue was full.
    fn queued(&self) -> Option<FeedEvent> {
        if let Ok(event) = self.receiver.try_recv() {
            return Some(event);
        }
        match self.missed.swap(0, Ordering::AcqRel) {
            0 => None,
            missed => Some(FeedEvent::Lagged { missed }),
        }
    }

    /// The next event, waiting at most `timeout`; `None` on timeout or if the database closed.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let feed = db.subscribe()?;
    /// assert!(feed.recv_timeout(Duration::from_millis(10)).is_none(), "no commit, no event");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn recv_timeout(&self, timeout: Duration) -> Option<FeedEvent> {
        if let Some(event) = self.queued() {
            return Some(event);
        }
        // A timeout and a closed database both end the wait with `None`.
        self.receiver.recv_timeout(timeout).ok()
    }

    /// The next event if one is ready.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ks = db.keyspace("ks")?;
    /// let feed = db.subscribe()?;
    /// assert!(feed.try_recv().is_none());
    /// db.write(|tx| tx.put(&ks, b"k", b"v"))?;
    /// let deadline = Instant::now() + Duration::from_secs(5);
    /// while feed.try_recv().is_none() {
    ///     assert!(Instant::now() < deadline, "the commit's batch arrives");
    ///     std::thread::sleep(Duration::from_millis(1));
    /// }
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn try_recv(&self) -> Option<FeedEvent> {
        self.queued()
    }
}

impl Iterator for ChangeStream {
    type Item = FeedEvent;

    /// Blocks for the next event; `None` once the database is closed.
    fn next(&mut self) -> Option<FeedEvent> {
        self.queued().or_else(|| self.receiver.recv().ok())
    }
}
