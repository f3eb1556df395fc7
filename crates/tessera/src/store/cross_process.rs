//! Notification across processes ([`super::DbOptions::cross_process_notify`]): the commits of
//! other processes on the file reach this process's change feed as [`ChangeBatch`]es with the
//! same changes, old values included, as a local commit's, in commit order with this
//! process's own.
//!
//! **Rebuilding a remote commit.** The durable feed has each commit's net changes with their
//! new values; a writer with the option on also records their old values in
//! `tessera.feed.old`. A remote commit is read back from those two entries.
//!
//! **Order.** `delivered` is the last commit this process has handed to its feed (or found
//! nothing to hand for): every commit up to it is done. Commits are contiguous sequences
//! (LMDB's transaction ids), so whoever advances `delivered` publishes every commit after it,
//! in order, under its lock:
//! - a local writer, once it holds the write lock (no commit can then happen anywhere), first
//!   publishes the remote commits after `delivered` from its own write transaction, which sees
//!   them all; it then commits and publishes its own commit with `delivered` locked, so that
//!   nothing is published between;
//! - the watcher thread, woken by the side file (`store/wake.rs`), publishes the remote commits
//!   that its read snapshot sees after `delivered`.
//!
//! Lock order: the writer lock, then `delivered`. The watcher opens its snapshot before it
//! locks `delivered` (opening one may take the writer lock to adopt a map another process
//! grew), and neither holds `delivered` while waiting for anything else.

use super::wake::{self, Signal, Waiter};
use super::{Db, Inner, ReadTxn, Snapshot, WeakDb, durable_feed};
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Most commits read from the feed at a time while catching up.
pub(crate) const CATCH_UP_BATCHES_MAX: usize = 1024;

/// How long the watcher waits for a wake-up before it looks anyway: a commit by a process
/// that does not raise the side file is seen within this.
pub(crate) const WATCH_INTERVAL: Duration = Duration::from_millis(100);

/// The state of cross-process notification in one process.
pub(crate) struct CrossProcess {
    /// The last commit handed to this process's feed, or found to have nothing for it.
    delivered: Mutex<u64>,
    /// Commits of other processes that could not be rebuilt, not reported yet: the last commit
    /// delivered before them, and the error.
    gap: Mutex<Option<(u64, Arc<Error>)>>,
    signal: Signal,
    stopping: AtomicBool,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The newest commit of another process that this process has caught up with (0: none):
    /// what a cache of stored values (the dictionary's) compares with the commit it is known
    /// to agree with storage through (see [`crate::Db::foreign_commits_through`]).
    foreign_through: std::sync::atomic::AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl CrossProcess {
    /// Opens the side file and starts the watcher, for a read-write handle with the option
    /// on (the durable feed is open: see `durable_feed::open`).
    pub(crate) fn start(db: &Db) -> Result<Arc<CrossProcess>> {
        assert!(!db.inner.options.read_only);
        assert!(db.inner.feed_state.olds.get().is_some(), "the durable feed's keyspaces are open first");
        let path = wake::notify_path_of(&db.inner.path);
        let signal = Signal::open(&path)?;
        let waiter = Waiter::open(&path)?;
        let newest = db.read(|tx| Ok(tx.sequence()))?;
        let state = Arc::new(CrossProcess {
            delivered: Mutex::new(newest),
            gap: Mutex::new(None),
            signal,
            stopping: AtomicBool::new(false),
            thread: Mutex::new(None),
            foreign_through: std::sync::atomic::AtomicU64::new(0),
        });
        let weak = db.downgrade();
        let watcher = state.clone();
        let thread = std::thread::Builder::new().name("tessera-watch".into()).spawn(move || watcher.watch(waiter, weak))?;
        *lock(&state.thread) = Some(thread);
        Ok(state)
    }

    /// The watcher thread: catches up at each wake-up, and every [`WATCH_INTERVAL`].
    fn watch(&self, mut waiter: Waiter, db: WeakDb) {
        while !self.stopping.load(Ordering::Acquire) {
            // An error waiting (none is expected) leaves the periodic look.
            if waiter.wait(WATCH_INTERVAL).is_err() {
                std::thread::sleep(wake::POLL_FALLBACK_INTERVAL);
            }
            if self.stopping.load(Ordering::Acquire) {
                return;
            }
            let Some(db) = db.upgrade() else { return };
            // A failed read is tried again at the next wake-up.
            let _ = self.catch_up(&db.inner);
        }
    }

    /// Publishes the commits after `delivered` that a new snapshot sees (all of them remote:
    /// a local commit advances `delivered` itself), then delivers them.
    fn catch_up(&self, inner: &Inner) -> Result<()> {
        self.report_gap(inner); // one left by a delivery under way
        let newest = inner.env_info_gated().last_txn_id as u64;
        if newest <= *lock(&self.delivered) {
            // Woken by this process's own commit, or by another's that a write of this process
            // published as it began (`catch_up_before_write`): a write that then failed
            // returned without delivering what it queued, which is delivered here.
            inner.feed.deliver_queued();
            return Ok(());
        }
        let txn = ReadTxn::begin(inner)?;
        let mut delivered = lock(&self.delivered);
        // A local commit may have come between the snapshot and the lock: it published
        // everything up to itself, and this snapshot has nothing newer.
        if *delivered < txn.sequence() {
            self.publish_through(inner, &txn, &mut delivered, txn.sequence());
        }
        drop(delivered);
        drop(txn);
        self.report_gap(inner);
        inner.feed.deliver_queued();
        Ok(())
    }

    /// For a write transaction that has just begun: publishes the commits of other processes
    /// made since the last one delivered, which it sees (the write lock is held: no commit can
    /// come between).
    pub(crate) fn catch_up_before_write(&self, inner: &Inner, txn: &impl Snapshot) {
        let through = txn.view_sequence() - 1;
        let mut delivered = lock(&self.delivered);
        self.publish_through(inner, txn, &mut delivered, through);
    }

    /// Publishes the commits after `delivered` up to `through` (all of them committed and seen
    /// by `txn`), in order, and advances `delivered` to `through`. Commits that cannot be
    /// rebuilt are skipped and left as a gap for [`CrossProcess::report_gap`].
    fn publish_through(&self, inner: &Inner, txn: &impl Snapshot, delivered: &mut u64, through: u64) {
        assert!(*delivered <= through, "delivered {} past the snapshot's newest commit {through}", *delivered);
        if *delivered < through {
            // Every commit after `delivered` up to `through` is another process's: this
            // process's own are delivered as they commit (`committing`).
            self.foreign_through.fetch_max(through, Ordering::AcqRel);
        }
        while *delivered < through {
            let batches = match durable_feed::read_with_olds(txn, &inner.feed_state, *delivered, through, CATCH_UP_BATCHES_MAX) {
                Ok(batches) => batches,
                Err(error) => {
                    self.record_gap(*delivered, Arc::new(error), true);
                    inner.feed.note_lost_commits(*delivered);
                    *delivered = through;
                    return;
                }
            };
            let complete = batches.len() < CATCH_UP_BATCHES_MAX;
            for batch in batches {
                assert!(batch.sequence > *delivered && batch.sequence <= through, "feed entry {} out of range", batch.sequence);
                *delivered = batch.sequence;
                if inner.feed.has_listeners() && !batch.changes.is_empty() {
                    inner.feed.publish(super::published::Published::from_batch(batch));
                }
            }
            if complete {
                // The commits in between changed nothing the feed records.
                *delivered = through;
            }
        }
    }

    /// The newest commit of another process this process has caught up with (0: none yet).
    pub(crate) fn foreign_through(&self) -> u64 {
        self.foreign_through.load(Ordering::Acquire)
    }

    /// Locks `delivered` for a local commit, which must follow it directly: publish the commit
    /// and advance it with [`Committing::committed`] before the guard drops.
    pub(crate) fn committing(&self, sequence: u64) -> Committing<'_> {
        let delivered = lock(&self.delivered);
        assert_eq!(*delivered + 1, sequence, "a local commit after commits not yet delivered");
        Committing { delivered }
    }

    /// Wakes the other processes' watchers after a local commit. A failure only delays them
    /// until their next periodic look.
    pub(crate) fn raise(&self, sequence: u64) {
        let _ = self.signal.raise(sequence);
    }

    /// Reports a gap found while catching up to the feed's gap hooks, unless a delivery is
    /// under way: the gap then waits for the next commit or watcher look. Called with no
    /// tessera lock held but, at most, the delivery lock.
    pub(crate) fn report_gap(&self, inner: &Inner) {
        let gap = lock(&self.gap).take();
        if let Some((after, error)) = gap
            && !inner.feed.try_report_gap(&error)
        {
            self.record_gap(after, error, false);
        }
    }

    /// Records a gap after commit `after`, merged with one not reported yet: the earlier start,
    /// and the newer error (`error` is the newer one if `newer`), so that a gap found after
    /// the live engine ended its subscriptions for an unreported one is a new error to it,
    /// which ends the subscriptions made since.
    fn record_gap(&self, after: u64, error: Arc<Error>, newer: bool) {
        let mut gap = lock(&self.gap);
        *gap = Some(match gap.take() {
            None => (after, error),
            Some((recorded, recorded_error)) => (after.min(recorded), if newer { error } else { recorded_error }),
        });
    }

    /// The gap found and not reported yet ([`CrossProcess::report_gap`] waits for a delivery
    /// under way), as the last commit delivered before the lost ones and the error: a batch
    /// delivered meanwhile that comes after it must not reach what the gap ends. The gap is
    /// recorded before any batch after it is published, so a delivery of such a batch sees it.
    pub(crate) fn unreported_gap(&self) -> Option<(u64, Arc<Error>)> {
        lock(&self.gap).clone()
    }

    /// Stops the watcher and waits for it (unless called on it: its catch-up held the last
    /// handle).
    pub(crate) fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        // Wakes the watcher at once instead of at its next periodic look.
        let _ = self.signal.raise(*lock(&self.delivered));
        let thread = lock(&self.thread).take();
        if let Some(thread) = thread.filter(|thread| thread.thread().id() != std::thread::current().id()) {
            let _ = thread.join();
        }
    }
}

/// `delivered`, held across a local commit (see [`CrossProcess::committing`]).
pub(crate) struct Committing<'a> {
    delivered: MutexGuard<'a, u64>,
}

impl Committing<'_> {
    /// The commit `sequence` succeeded: it is this process's to publish, and done.
    pub(crate) fn committed(mut self, sequence: u64) {
        assert_eq!(*self.delivered + 1, sequence);
        *self.delivered = sequence;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{DbOptions, FeedEvent};

    /// Catching up over more commits than one read takes: every commit, once, in order, with
    /// the old values its writer had. (The commits are this process's own, made while nobody
    /// listened, and `delivered` and the listener's start are then put back, so that they look
    /// like another process's.)
    #[test]
    fn catching_up_reads_the_feed_in_bounded_chunks_and_publishes_every_commit_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let options = DbOptions { durable_feed: true, cross_process_notify: true, listener_queue_batches: 4096, ..DbOptions::default() };
        let db = Db::open_with(dir.path().join("db"), options).unwrap();
        let notes = db.keyspace("notes").unwrap();
        let start = db.read(|tx| Ok(tx.sequence())).unwrap();
        let commits = CATCH_UP_BATCHES_MAX as u64 * 2 + 1;
        for i in 0..commits {
            // The same key every time: each commit's old value is the one before.
            db.write(|tx| tx.put(&notes, b"k", &i.to_be_bytes())).unwrap();
        }
        // A listener that starts before them, as one of this process would for another's.
        let stream = db.inner.feed.subscribe(start);
        let state = db.inner.cross_process.get().unwrap();
        *lock(&state.delivered) = start;
        state.catch_up(&db.inner).unwrap();
        let mut previous: Option<u64> = None;
        for i in 0..commits {
            let Some(FeedEvent::Batch(batch)) = stream.recv_timeout(Duration::from_secs(10)) else { panic!("commit {i} missing") };
            assert!(previous.is_none_or(|previous| batch.sequence > previous));
            previous = Some(batch.sequence);
            let change = &batch.changes[0];
            assert_eq!(change.new.as_deref(), Some(&i.to_be_bytes()[..]));
            assert_eq!(change.old.as_deref(), i.checked_sub(1).map(u64::to_be_bytes).as_ref().map(|old| &old[..]));
        }
        assert!(stream.try_recv().is_none(), "each commit once");
    }
}
