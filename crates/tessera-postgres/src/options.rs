//! The replicator's options and their bounds.

use crate::error::{ReplicateError, Result};

/// Most commits one PostgreSQL transaction applies (`batches_per_transaction`).
///
/// ```
/// use tessera_postgres::{ReplicateError, Replicator, ReplicatorOptions, BATCHES_PER_TRANSACTION_MAX};
/// # let dir = tempfile::tempdir()?;
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let mut options = ReplicatorOptions::new("host=127.0.0.1 user=postgres");
/// options.batches_per_transaction = BATCHES_PER_TRANSACTION_MAX + 1;
/// let error = Replicator::start(&db, options).unwrap_err();
/// assert!(matches!(error, ReplicateError::Options { option: "batches_per_transaction", .. }));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const BATCHES_PER_TRANSACTION_MAX: usize = 10_000;
/// Most retries of a connection failure ([`RetryPolicy::attempts_max`]).
///
/// ```
/// use tessera_postgres::{ReplicateError, Replicator, ReplicatorOptions, RETRY_ATTEMPTS_MAX};
/// # let dir = tempfile::tempdir()?;
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let mut options = ReplicatorOptions::new("host=127.0.0.1 user=postgres");
/// options.retry.attempts_max = RETRY_ATTEMPTS_MAX + 1;
/// let error = Replicator::start(&db, options).unwrap_err();
/// assert_eq!(error.to_string(), "option retry.attempts_max: 1001 is not in 1..=1000");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const RETRY_ATTEMPTS_MAX: u32 = 1_000;

/// How a connection failure is retried: waits doubling from `delay_initial_ms` up to
/// `delay_max_ms`, at most `attempts_max` times in a row (a success starts the count again);
/// then [`crate::ReplicateError::Unreachable`].
///
/// ```
/// let retry = tessera_postgres::RetryPolicy::default();
/// assert_eq!(retry.delay_ms(0), 50);
/// assert_eq!(retry.delay_ms(30), 2_000);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The first wait, in milliseconds.
    pub delay_initial_ms: u64,
    /// The longest wait, in milliseconds.
    pub delay_max_ms: u64,
    /// Most attempts in a row before giving up (1 to [`RETRY_ATTEMPTS_MAX`]).
    pub attempts_max: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { delay_initial_ms: 50, delay_max_ms: 2_000, attempts_max: 40 }
    }
}

impl RetryPolicy {
    /// The wait before retry number `attempt` (0 for the first).
    ///
    /// ```
    /// let retry = tessera_postgres::RetryPolicy { delay_initial_ms: 10, delay_max_ms: 100, attempts_max: 5 };
    /// assert_eq!([0, 1, 2, 3, 4].map(|attempt| retry.delay_ms(attempt)), [10, 20, 40, 80, 100]);
    /// assert_eq!(retry.delay_ms(u32::MAX), 100); // no overflow
    /// ```
    pub fn delay_ms(&self, attempt: u32) -> u64 {
        self.delay_initial_ms.saturating_mul(1u64 << attempt.min(32)).min(self.delay_max_ms)
    }
}

/// What to replicate, where, and in what steps.
///
/// ```
/// let options = tessera_postgres::ReplicatorOptions::new("host=127.0.0.1 user=postgres");
/// assert_eq!(options.consumer, "postgres");
/// assert!(options.collections.is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicatorOptions {
    /// The PostgreSQL connection string (`postgresql://…` or `host=… user=…`).
    pub postgres_url: String,
    /// The consumer's name: the feed consumer in tessera and the cursor row in PostgreSQL.
    pub consumer: String,
    /// Only these collections (`None`: every collection, including ones created later).
    pub collections: Option<Vec<String>>,
    /// When tessera's feed no longer has the commits after the replica's cursor, or the
    /// replica's cursor is past the file's newest commit, copy every record from a snapshot
    /// again instead of failing with [`crate::ReplicateError::CursorExpired`] or
    /// [`crate::ReplicateError::CursorAhead`].
    pub resync: bool,
    /// Most commits one PostgreSQL transaction applies (1 to [`BATCHES_PER_TRANSACTION_MAX`]).
    pub batches_per_transaction: usize,
    /// Commits are grouped into one transaction until they hold this many changes (a larger
    /// commit is still applied whole, in a transaction of its own).
    pub changes_per_transaction: usize,
    /// Retrying connection failures.
    pub retry: RetryPolicy,
}

impl ReplicatorOptions {
    /// Defaults for `postgres_url`: consumer `postgres`, every collection, no resync, up to
    /// 256 commits and 20,000 changes a transaction.
    ///
    /// ```
    /// let options = tessera_postgres::ReplicatorOptions::new("postgresql://postgres@127.0.0.1/app");
    /// assert_eq!(options.postgres_url, "postgresql://postgres@127.0.0.1/app");
    /// assert_eq!((options.batches_per_transaction, options.changes_per_transaction), (256, 20_000));
    /// assert!(!options.resync);
    /// ```
    pub fn new(postgres_url: &str) -> ReplicatorOptions {
        ReplicatorOptions {
            postgres_url: postgres_url.to_owned(),
            consumer: "postgres".into(),
            collections: None,
            resync: false,
            batches_per_transaction: 256,
            changes_per_transaction: 20_000,
            retry: RetryPolicy::default(),
        }
    }

    pub(crate) fn check(&self) -> Result<()> {
        let problem = |option, problem: String| Err(ReplicateError::Options { option, problem });
        if !(1..=BATCHES_PER_TRANSACTION_MAX).contains(&self.batches_per_transaction) {
            return problem(
                "batches_per_transaction",
                format!("{} is not in 1..={BATCHES_PER_TRANSACTION_MAX}", self.batches_per_transaction),
            );
        }
        if self.changes_per_transaction == 0 {
            return problem("changes_per_transaction", "0".into());
        }
        if !(1..=RETRY_ATTEMPTS_MAX).contains(&self.retry.attempts_max) {
            return problem("retry.attempts_max", format!("{} is not in 1..={RETRY_ATTEMPTS_MAX}", self.retry.attempts_max));
        }
        if self.retry.delay_initial_ms == 0 || self.retry.delay_initial_ms > self.retry.delay_max_ms {
            return problem("retry", "0 < delay_initial_ms <= delay_max_ms".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_checked_at_their_edges() {
        let mut options = ReplicatorOptions::new("");
        options.batches_per_transaction = BATCHES_PER_TRANSACTION_MAX;
        assert!(options.check().is_ok());
        options.batches_per_transaction = BATCHES_PER_TRANSACTION_MAX + 1;
        assert!(options.check().is_err());
        options.batches_per_transaction = 0;
        assert!(options.check().is_err());
        let mut options = ReplicatorOptions::new("");
        options.retry.attempts_max = RETRY_ATTEMPTS_MAX + 1;
        assert!(options.check().is_err());
    }

    #[test]
    fn backoff_doubles_up_to_its_ceiling() {
        let retry = RetryPolicy { delay_initial_ms: 10, delay_max_ms: 100, attempts_max: 5 };
        let delays: Vec<u64> = (0..6).map(|attempt| retry.delay_ms(attempt)).collect();
        assert_eq!(delays, [10, 20, 40, 80, 100, 100]);
        assert_eq!(retry.delay_ms(u32::MAX), 100);
    }
}
