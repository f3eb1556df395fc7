//! Durability: group commit for `Immediate` transactions and the background syncer for
//! `Buffered` ones.
//!
//! The environment runs with LMDB's `MDB_NOMETASYNC`: a normal commit flushes the data pages
//! (inside the commit) but not the meta page that makes them current. An `Immediate` commit
//! then waits for [`Syncer::sync_through`] its sequence number, which flushes the meta page
//! outside the write lock. Writers that commit while a flush is under way wait for the next
//! one, which covers all of them: one flush serves every concurrent committer.
//!
//! A `Buffered` commit is made with `MDB_NOSYNC` (nothing flushed at commit). The syncer thread
//! flushes at the earliest deadline among unflushed commits.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How durable a commit is before `write` returns. See `docs/storage.md` for what each level
/// guarantees on a process kill and on power loss.
///
/// ```
/// use std::time::Duration;
/// use tessera::{DbOptions, Durability};
/// # let dir = tempfile::tempdir().unwrap();
/// let buffered = Durability::Buffered { max_delay: Duration::from_millis(20) };
/// let db = tessera::Db::open_with(dir.path().join("db"), DbOptions { durability: buffered, ..DbOptions::default() })?;
/// let ks = db.keyspace("ks")?;
/// db.write(|tx| tx.put(&ks, b"k", b"v"))?; // flushed within 20 ms
/// db.write_with(Durability::Immediate, |tx| tx.put(&ks, b"k", b"w"))?; // flushed now
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Flushed to stable storage before `write` returns. Concurrent committers share flushes.
    Immediate,
    /// Atomic, visible and safe from a process kill at once; flushed to stable storage in the
    /// background within `max_delay`.
    Buffered {
        /// Longest time a commit stays unflushed.
        max_delay: Duration,
    },
}

impl Durability {
    /// `Buffered` with the default delay of 100 ms.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tessera::Durability;
    /// assert_eq!(Durability::BUFFERED, Durability::Buffered { max_delay: Duration::from_millis(100) });
    /// ```
    pub const BUFFERED: Durability = Durability::Buffered { max_delay: Duration::from_millis(100) };
}

struct State {
    /// Highest sequence known to be on stable storage.
    synced: u64,
    /// A flush is running.
    flushing: bool,
    /// Earliest deadline among buffered commits not yet flushed.
    deadline: Option<Instant>,
    stopped: bool,
    /// Last flush error, reported to the next waiter.
    error: Option<String>,
}

pub(crate) struct Syncer {
    state: Mutex<State>,
    changed: Condvar,
    /// Highest committed sequence.
    committed: AtomicU64,
    /// A buffered commit is waiting for a flush (so later ones need not take the lock, unless
    /// they ask for an earlier deadline than the shortest delay seen).
    flush_pending: std::sync::atomic::AtomicBool,
    /// Shortest `max_delay` seen, in nanoseconds: a commit with a delay no shorter than this
    /// cannot move a pending deadline earlier.
    shortest_delay_nanos: AtomicU64,
    flush: Box<dyn Fn() -> Result<(), String> + Send + Sync>,
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Syncer {
    /// Starts the background thread; join it after [`Syncer::stop`] so that nothing outlives
    /// the database (the flush closure holds the environment).
    pub(crate) fn start(
        flush: Box<dyn Fn() -> Result<(), String> + Send + Sync>,
    ) -> std::io::Result<(Arc<Syncer>, std::thread::JoinHandle<()>)> {
        let syncer = Arc::new(Syncer {
            state: Mutex::new(State { synced: 0, flushing: false, deadline: None, stopped: false, error: None }),
            changed: Condvar::new(),
            committed: AtomicU64::new(0),
            flush_pending: std::sync::atomic::AtomicBool::new(false),
            shortest_delay_nanos: AtomicU64::new(u64::MAX),
            flush,
        });
        let background = Arc::downgrade(&syncer);
        let thread = std::thread::Builder::new().name("tessera-sync".into()).spawn(move || {
            loop {
                let Some(syncer) = background.upgrade() else { return };
                if !syncer.background_step() {
                    return;
                }
            }
        })?;
        Ok((syncer, thread))
    }

    /// Records a commit. `buffered_delay` is `Some` for a buffered commit.
    pub(crate) fn committed(&self, sequence: u64, buffered_delay: Option<Duration>) {
        // SeqCst here and in `background_step`: a commit that takes the fast path must be seen
        // by the flush that cleared `flush_pending` (store-then-load on both sides).
        self.committed.fetch_max(sequence, Ordering::SeqCst);
        if let Some(delay) = buffered_delay {
            let nanos = delay.as_nanos().min(u64::MAX as u128) as u64;
            let shortest = self.shortest_delay_nanos.fetch_min(nanos, Ordering::AcqRel);
            // Fast path: a flush is already due no later than this commit needs.
            if self.flush_pending.load(Ordering::SeqCst) && nanos >= shortest {
                return;
            }
            self.flush_pending.store(true, Ordering::SeqCst);
            let deadline = Instant::now() + delay;
            let mut state = lock(&self.state);
            if state.deadline.is_none_or(|current| deadline < current) {
                state.deadline = Some(deadline);
                self.changed.notify_all();
            }
        }
    }

    /// Returns once everything up to `sequence` is on stable storage; a flush error not
    /// reported yet is this caller's.
    pub(crate) fn sync_through(&self, sequence: u64) -> Result<(), String> {
        self.flush_through(sequence, true)
    }

    /// [`Syncer::sync_through`]; a caller that does not `report` (the background thread)
    /// leaves a pending flush error for the next waiter and flushes all the same, and keeps
    /// its own failure for that waiter too. (It took the pending error, put it back and
    /// flushed nothing, at every deadline until a caller took it: buffered commits were no
    /// longer flushed in the background after one failure. Found by review.)
    fn flush_through(&self, sequence: u64, report: bool) -> Result<(), String> {
        let mut state = lock(&self.state);
        loop {
            if state.synced >= sequence {
                return Ok(());
            }
            if report && let Some(error) = state.error.take() {
                return Err(error);
            }
            if state.flushing {
                state = self.changed.wait(state).unwrap_or_else(|poisoned| poisoned.into_inner());
                continue;
            }
            state.flushing = true;
            // A flush covers every commit made before it, `sequence` too: a caller may ask for
            // a sequence this syncer never recorded (the commits before an `Immediate` write
            // that changed nothing, made by another process or before this one opened the
            // file), and reading only `committed` would never reach it.
            let target = self.committed.load(Ordering::Acquire).max(sequence);
            drop(state);
            let result = (self.flush)();
            state = lock(&self.state);
            state.flushing = false;
            match result {
                // A pending buffered deadline is left to the background thread, which owns it.
                Ok(()) => state.synced = state.synced.max(target),
                Err(error) if report => state.error = Some(error),
                Err(error) => {
                    state.error = Some(error.clone());
                    self.changed.notify_all();
                    return Err(error);
                }
            }
            self.changed.notify_all();
        }
    }

    /// Flushes everything committed so far.
    pub(crate) fn sync_all(&self) -> Result<(), String> {
        self.sync_through(self.committed.load(Ordering::Acquire))
    }

    /// One round of the background thread: wait for a deadline, flush. False once stopped.
    fn background_step(&self) -> bool {
        let mut state = lock(&self.state);
        loop {
            if state.stopped {
                return false;
            }
            match state.deadline {
                None => {
                    let (next, _) = self.changed.wait_timeout(state, Duration::from_millis(500)).unwrap_or_else(|p| p.into_inner());
                    state = next;
                    // Return to let the thread notice that the database was dropped.
                    if state.deadline.is_none() {
                        return true;
                    }
                }
                Some(deadline) => {
                    let now = Instant::now();
                    if deadline > now {
                        let (next, _) = self.changed.wait_timeout(state, deadline - now).unwrap_or_else(|p| p.into_inner());
                        state = next;
                        continue;
                    }
                    state.deadline = None;
                    // Cleared before reading `committed`: a commit after this point takes the
                    // slow path and sets a new deadline, so it is never left unflushed.
                    self.flush_pending.store(false, Ordering::SeqCst);
                    drop(state);
                    let target = self.committed.load(Ordering::SeqCst);
                    // A failure is kept for the next waiter (`flush_through` keeps it).
                    let _ = self.flush_through(target, false);
                    return true;
                }
            }
        }
    }

    pub(crate) fn stop(&self) {
        lock(&self.state).stopped = true;
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn concurrent_committers_share_flushes() {
        let flushes = Arc::new(AtomicUsize::new(0));
        let counter = flushes.clone();
        let (syncer, _thread) = Syncer::start(Box::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(20)); // a slow disk
            Ok(())
        }))
        .unwrap();
        let committers = 16u64;
        let barrier = Arc::new(std::sync::Barrier::new(committers as usize));
        let handles: Vec<_> = (1..=committers)
            .map(|sequence| {
                let (syncer, barrier) = (syncer.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    syncer.committed(sequence, None);
                    syncer.sync_through(sequence).unwrap();
                })
            })
            .collect();
        handles.into_iter().for_each(|h| h.join().unwrap());
        let count = flushes.load(Ordering::SeqCst);
        assert!(count < committers as usize / 2, "{committers} committers needed {count} flushes");
        syncer.stop();
    }

    #[test]
    fn buffered_commits_are_flushed_within_their_delay_and_errors_are_reported() {
        let flushes = Arc::new(AtomicUsize::new(0));
        let counter = flushes.clone();
        let (syncer, _thread) = Syncer::start(Box::new(move || {
            let count = counter.fetch_add(1, Ordering::SeqCst);
            if count == 1 { Err("disk on fire".into()) } else { Ok(()) }
        }))
        .unwrap();
        syncer.committed(1, Some(Duration::from_millis(20)));
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(flushes.load(Ordering::SeqCst), 1, "flushed once, by the background thread");
        // The next flush fails: the error reaches the caller instead of being swallowed.
        syncer.committed(2, None);
        assert_eq!(syncer.sync_through(2), Err("disk on fire".into()));
        assert_eq!(syncer.sync_through(2), Ok(()));
        syncer.stop();
    }
}
