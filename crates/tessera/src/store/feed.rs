//! The change feed: one [`ChangeBatch`] per commit, delivered after the commit, in commit
//! order, by a delivery thread, never while the write lock is held.
//!
//! Writers hand each batch to the delivery thread through an unbounded in-process queue (an
//! O(1) push). The delivery thread fans it out to every listener's **bounded** queue with a
//! non-blocking send. Policy for a listener whose queue is full (a slow consumer): the batch is
//! not queued for it, the writer never waits, and the listener's next event is
//! [`FeedEvent::Lagged`] with the number of batches it missed, so it knows to re-read state. A
//! listener whose receiver is dropped, or whose callback panicked, is removed.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a commit did to one key.
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeBatch {
    /// The commit's sequence number (LMDB's transaction id): increasing, in commit order.
    pub sequence: u64,
    /// The changes.
    pub changes: Vec<Change>,
}

/// What a listener receives.
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
pub const LISTENER_QUEUE_BATCHES_DEFAULT: usize = 1024;

struct Listener {
    sender: SyncSender<FeedEvent>,
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
pub(crate) type Hook = Arc<dyn Fn(&Arc<ChangeBatch>) + Send + Sync>;

pub(crate) struct Feed {
    listeners: Mutex<Vec<Listener>>,
    hooks: Mutex<Vec<Hook>>,
    listener_count: AtomicUsize,
    hook_demand: AtomicUsize,
    outbox: Mutex<Option<mpsc::Sender<Arc<ChangeBatch>>>>,
    queue_batches: usize,
    /// The delivery thread, joined by [`Feed::close`].
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Feed {
    /// Starts the delivery thread.
    pub(crate) fn start(queue_batches: usize) -> std::io::Result<Arc<Feed>> {
        let (sender, receiver) = mpsc::channel::<Arc<ChangeBatch>>();
        let feed = Arc::new(Feed {
            listeners: Mutex::new(Vec::new()),
            hooks: Mutex::new(Vec::new()),
            listener_count: AtomicUsize::new(0),
            hook_demand: AtomicUsize::new(0),
            outbox: Mutex::new(Some(sender)),
            queue_batches: queue_batches.max(1),
            thread: Mutex::new(None),
        });
        let weak = Arc::downgrade(&feed);
        let thread = std::thread::Builder::new().name("tessera-feed".into()).spawn(move || {
            for batch in receiver {
                let Some(feed) = weak.upgrade() else { return };
                feed.deliver(&batch);
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

    /// Queues a committed batch for delivery (called in commit order).
    pub(crate) fn publish(&self, batch: ChangeBatch) {
        if let Some(outbox) = lock(&self.outbox).as_ref() {
            let _ = outbox.send(Arc::new(batch));
        }
    }

    /// Stops the delivery thread after it has delivered what was published, and waits for it
    /// (unless called on that thread: a hook or listener that drops the last handle).
    pub(crate) fn close(&self) {
        lock(&self.outbox).take();
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

    fn deliver(&self, batch: &Arc<ChangeBatch>) {
        let hooks: Vec<Hook> = lock(&self.hooks).clone();
        for hook in hooks {
            // A hook handles its own consumers' panics; one that escapes must not stop delivery.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(batch)));
        }
        let mut listeners = lock(&self.listeners);
        listeners.retain_mut(|listener| {
            let pending = listener.missed.swap(0, Ordering::AcqRel);
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
            match listener.sender.try_send(FeedEvent::Batch(batch.clone())) {
                Ok(()) => true,
                Err(TrySendError::Full(_)) => {
                    listener.missed.fetch_add(1, Ordering::AcqRel);
                    true
                }
                Err(TrySendError::Disconnected(_)) => false,
            }
        });
        self.listener_count.store(listeners.len(), Ordering::Release);
    }

    pub(crate) fn subscribe(&self) -> ChangeStream {
        let (sender, receiver) = mpsc::sync_channel(self.queue_batches);
        let missed = Arc::new(AtomicU64::new(0));
        let mut listeners = lock(&self.listeners);
        listeners.push(Listener { sender, missed: missed.clone() });
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
/// let stream = db.subscribe();
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
    pub fn recv_timeout(&self, timeout: Duration) -> Option<FeedEvent> {
        if let Some(event) = self.queued() {
            return Some(event);
        }
        // A timeout and a closed database both end the wait with `None`.
        self.receiver.recv_timeout(timeout).ok()
    }

    /// The next event if one is ready.
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
