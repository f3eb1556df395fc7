//! How a following replicator waits for new commits when it has caught up. Today it polls
//! ([`PollWait`]); a cross-process commit notification can implement [`Wait`] and be plugged
//! in without changing the replicator.

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
    fn idle(&mut self, cursor: u64);
    /// The last look found commits.
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
