//! The one trait every system in the `store` table implements, and the state its rows share.
//!
//! Each method measures one row with `harness::median_ns` around the system's own operation
//! (statically dispatched inside the timed loop), and returns the median in nanoseconds per
//! operation, or `None` when the row does not apply to the system.

use std::ops::Range;

/// Values in every write.
pub const BLOB_LEN: usize = 100;

/// Keys of the rows' reads, filled by `StoreBackend::fill`.
pub const READ_ROWS_COUNT: u64 = 100_000;

/// Keys read per operation of the WCDB read row.
pub const WCDB_READS_COUNT: usize = 33_334;

/// Keys written by the WCDB batch-write row, in one transaction.
pub const WCDB_WRITES_COUNT: u64 = 100_000;

/// The WCDB threads row: threads, keys per thread, keys per transaction.
pub const WCDB_THREADS_COUNT: u64 = 4;
pub const WCDB_THREAD_KEYS_COUNT: u64 = 100_000;
pub const WCDB_THREAD_BATCH_COUNT: u64 = 1_000;

/// The big-endian key of `index`.
pub fn key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

/// The key of read row `index` in tessera and heed (SQLite's integer key is `index` itself).
pub fn read_key(index: u64) -> [u8; 8] {
    key(1 << 40 | index)
}

/// What the rows of one run share across systems, in the order the systems use it: the next
/// fresh key, the position in the random read probes, and the WCDB threads row's round.
pub struct Run {
    /// Samples per measurement (the median is reported).
    pub samples: usize,
    /// The value of every write.
    pub blob: Vec<u8>,
    counter: u64,
    probes: Vec<u64>,
    probe_index: usize,
    round: u64,
}

/// Random read probes per run, cycled.
const PROBES_COUNT: usize = 4096;

impl Run {
    pub fn new(samples: usize) -> Run {
        let mut rng = fastrand::Rng::with_seed(42);
        let probes = (0..PROBES_COUNT).map(|_| rng.u64(0..READ_ROWS_COUNT)).collect();
        Run { samples, blob: vec![0xAB; BLOB_LEN], counter: 0, probes, probe_index: 0, round: 0 }
    }

    /// A key not written before in this run.
    pub fn next_key(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }

    /// `count` keys not written before in this run.
    pub fn next_keys(&mut self, count: u64) -> Range<u64> {
        let base = self.counter;
        self.counter += count;
        base..base + count
    }

    /// The next random read row, in `0..READ_ROWS_COUNT`.
    pub fn next_probe(&mut self) -> u64 {
        self.probe_index = (self.probe_index + 1) % self.probes.len();
        self.probes[self.probe_index]
    }

    /// The read rows of the WCDB read row, the same for every system.
    pub fn probes(&self) -> &[u64] {
        &self.probes
    }

    /// The next round of the WCDB threads row (its keys are fresh in every round).
    pub fn next_round(&mut self) -> u64 {
        self.round += 1;
        self.round
    }
}

/// One system under the `store` table; each method is one row, in nanoseconds per operation.
pub trait StoreBackend {
    /// The system's name among a row's peers.
    fn name(&self) -> &'static str;

    /// A single-key write transaction that is durable when it returns (fsync).
    fn write_one_durable(&mut self, run: &mut Run) -> Option<f64>;

    /// A single-key write transaction without fsync.
    fn write_one_buffered(&mut self, run: &mut Run) -> Option<f64>;

    /// 1,000 keys written in one transaction, without fsync.
    fn write_batch(&mut self, run: &mut Run) -> Option<f64>;

    /// Untimed: writes `READ_ROWS_COUNT` keys for the read rows.
    fn fill(&mut self, run: &Run);

    /// A point read of a random key from the newest snapshot, as the system offers it.
    fn point_read(&mut self, run: &mut Run) -> Option<f64>;

    /// Whether `point_read` begins a new read transaction every time; its figure is then also
    /// the system's figure in the new-transaction row.
    fn point_read_opens_transaction(&self) -> bool {
        false
    }

    /// A point read in a new read transaction, where that differs from `point_read`.
    fn point_read_new_transaction(&mut self, _run: &mut Run) -> Option<f64> {
        None
    }

    /// Point reads inside one read transaction kept open for the whole measurement.
    fn point_read_in_snapshot(&mut self, _run: &mut Run) -> Option<f64> {
        None
    }

    /// 1,000 keys read in order from the middle of the read rows.
    fn range_scan(&mut self, run: &mut Run) -> Option<f64>;

    /// WCDB's read: `WCDB_READS_COUNT` random keys in one read transaction.
    fn wcdb_read(&mut self, _run: &mut Run) -> Option<f64> {
        None
    }

    /// WCDB's batch write: `WCDB_WRITES_COUNT` fresh keys in one transaction.
    fn wcdb_batch_write(&mut self, _run: &mut Run) -> Option<f64> {
        None
    }

    /// WCDB's threads: `WCDB_THREADS_COUNT` threads each writing `WCDB_THREAD_KEYS_COUNT`
    /// fresh keys, `WCDB_THREAD_BATCH_COUNT` per transaction.
    fn wcdb_threads(&mut self, _run: &mut Run) -> Option<f64> {
        None
    }
}
