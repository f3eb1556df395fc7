//! How a following replicator waits for new commits when it has caught up: woken by the
//! database's change feed ([`FeedWait`], which with `DbOptions::cross_process_notify` sees
//! other processes' commits too), or by polling ([`PollWait`]).

use std::time::Duration;

/// Waits until new commits may be in the feed.
///
/// ```
/// use tessera_postgres::{PollWait, Wait};
/// let mut wait = PollWait::default();
/// wait.idle(7); // sleeps a few milliseconds
/// wait.busy();
/// ```
pub trait Wait {
    /// The feed had nothing after `cursor`: return when it may have (or after a while; the
    /// replicator simply looks again).
    ///
    /// ```
    /// use tessera_postgres::{PollWait, Wait};
    /// let mut wait = PollWait::new(1, 2);
    /// let start = std::time::Instant::now();
    /// wait.idle(0); // sleeps 1 ms, then 2 ms at most each time
    /// assert!(start.elapsed() >= std::time::Duration::from_millis(1));
    /// ```
    fn idle(&mut self, cursor: u64);
    /// The last look found commits.
    ///
    /// ```
    /// use tessera_postgres::{PollWait, Wait};
    /// let mut wait = PollWait::new(1, 1_000);
    /// wait.idle(0);
    /// wait.idle(0); // the next sleep has doubled to 4 ms
    /// wait.busy(); // and is back to 1 ms
    /// let start = std::time::Instant::now();
    /// wait.idle(0);
    /// assert!(start.elapsed() < std::time::Duration::from_millis(500));
    /// ```
    fn busy(&mut self) {}
}

/// Polls: sleeps `interval_min_ms`, doubling while the feed stays empty, up to
/// `interval_max_ms`, and back to the minimum once commits come.
///
/// ```
/// let wait = tessera_postgres::PollWait::default();
/// assert_eq!((wait.interval_min_ms, wait.interval_max_ms), (5, 20));
/// ```
#[derive(Debug, Clone)]
pub struct PollWait {
    /// The first sleep, in milliseconds.
    pub interval_min_ms: u64,
    /// The longest sleep, in milliseconds.
    pub interval_max_ms: u64,
    next_ms: u64,
}

impl PollWait {
    /// Polling between `interval_min_ms` and `interval_max_ms` (the minimum at least 1).
    ///
    /// ```
    /// use tessera_postgres::PollWait;
    /// let wait = PollWait::new(10, 100);
    /// assert_eq!((wait.interval_min_ms, wait.interval_max_ms), (10, 100));
    /// let clamped = PollWait::new(0, 0);
    /// assert_eq!((clamped.interval_min_ms, clamped.interval_max_ms), (1, 1));
    /// ```
    pub fn new(interval_min_ms: u64, interval_max_ms: u64) -> PollWait {
        let interval_min_ms = interval_min_ms.max(1);
        let interval_max_ms = interval_max_ms.max(interval_min_ms);
        PollWait { interval_min_ms, interval_max_ms, next_ms: interval_min_ms }
    }
}

impl Default for PollWait {
    fn default() -> Self {
        PollWait::new(5, 20)
    }
}

impl Wait for PollWait {
    fn idle(&mut self, _cursor: u64) {
        std::thread::sleep(Duration::from_millis(self.next_ms));
        self.next_ms = (self.next_ms * 2).min(self.interval_max_ms);
    }

    fn busy(&mut self) {
        self.next_ms = self.interval_min_ms;
    }
}

/// Waits on the database's change feed: returns as soon as this process sees a commit (its
/// own, or, on a `Db` opened with `DbOptions::cross_process_notify`, another process's), and
/// at the latest after `interval_max_ms`, for writers that do not notify. It subscribes when
/// made, so a commit between the replicator's last look and its wait still wakes it.
///
/// ```
/// use tessera_postgres::{FeedWait, Wait};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let mut wait = FeedWait::new(&db, 1_000)?;
/// let space = db.keyspace("k")?;
/// db.write(|tx| tx.put(&space, b"a", b"1"))?;
/// let start = std::time::Instant::now();
/// wait.idle(0); // returns at once: a commit is waiting
/// assert!(start.elapsed() < std::time::Duration::from_millis(500));
/// # Ok::<(), tessera::Error>(())
/// ```
pub struct FeedWait {
    stream: tessera::ChangeStream,
    /// The longest wait, in milliseconds.
    pub interval_max_ms: u64,
}

impl FeedWait {
    /// Subscribes to `db`'s change feed; waits last at most `interval_max_ms` (at least 1).
    ///
    /// # Errors
    /// [`tessera::Error::WouldDeadlock`] inside a write transaction of this thread (see
    /// [`tessera::Db::subscribe`]).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let wait = tessera_postgres::FeedWait::new(&db, 0)?;
    /// assert_eq!(wait.interval_max_ms, 1); // at least 1
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(db: &tessera::Db, interval_max_ms: u64) -> tessera::Result<FeedWait> {
        Ok(FeedWait { stream: db.subscribe()?, interval_max_ms: interval_max_ms.max(1) })
    }
}

impl Wait for FeedWait {
    fn idle(&mut self, _cursor: u64) {
        // Any event (a batch, or word of missed ones) means the feed may have grown: take
        // every queued one, so that one look serves them all.
        if self.stream.recv_timeout(Duration::from_millis(self.interval_max_ms)).is_some() {
            while self.stream.try_recv().is_some() {}
        }
    }
}
