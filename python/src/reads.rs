//! What a `with db.write()` block read, checked again when it commits: optimistic concurrency.
//!
//! A Python write block queues its writes and applies them in one LMDB write transaction at
//! its end (holding LMDB's writer lock across Python code would stall every other writer, and
//! a block cannot be run again when LMDB asks for a retry). Its reads run before that
//! transaction, so another writer may commit between a read and the block's commit. To keep
//! the block serializable, every read it makes is recorded here, with what it saw, and the
//! commit reads each again inside its write transaction, before any of the block's writes: if
//! anything differs, the commit writes nothing and raises `tessera.TransactionConflict`, which
//! the caller answers by running the block again.
//!
//! Recorded: a `get` (the key and the stored bytes, or none), a query (its text, window and
//! every matching key with its stored bytes, in order) and a count. Comparing whole stored
//! bytes, not a hash, so that a conflict is never missed.
//!
//! Each read also records the sequence of the snapshot it read (the last commit it saw). When
//! every read saw the same snapshot and the block's write transaction comes right after it
//! (its sequence is that one's plus one: no commit in between, from this process or another),
//! what the block read is still what is stored, and the reads are not read again.

use crate::keys::KeyBytes;
use pyo3::prelude::*;
use std::sync::{Arc, Mutex};
use tessera::collection::DynCollection;
use tessera::store::WriteTxn;

/// Most reads one block may record: past it the block is refused rather than holding an
/// unbounded copy of what it read.
pub const READS_MAX: usize = 1_000_000;

/// One recorded read.
enum Read {
    /// `get`: the key and the stored record.
    Get { collection: Arc<str>, key: KeyBytes, stored: Option<Vec<u8>> },
    /// A query: its text and window, and every match's key and stored bytes, in order.
    Query { collection: String, text: Option<String>, offset: usize, limit: Option<usize>, matches: Vec<(Vec<u8>, Vec<u8>)> },
    /// A count.
    Count { collection: String, text: Option<String>, count: usize },
}

/// The reads of one write block and the snapshots they saw.
#[derive(Default)]
struct Recorded {
    reads: Vec<Read>,
    /// The lowest and highest sequence of the snapshots read; `None` before the first read.
    sequences: Option<(u64, u64)>,
}

/// The reads of one write block (`tessera.Transaction`'s side in the extension).
#[pyclass(module = "tessera._native", frozen)]
#[derive(Default)]
pub struct ReadSet {
    recorded: Mutex<Recorded>,
}

#[pymethods]
impl ReadSet {
    #[new]
    fn new() -> Self {
        ReadSet::default()
    }

    /// Reads recorded so far.
    fn __len__(&self) -> usize {
        self.lock().reads.len()
    }
}

/// Why a block's commit was refused: something it read changed before it committed.
#[derive(Debug)]
pub struct Conflict {
    /// The collection of the read that changed.
    pub collection: String,
    /// Which read: "get", "query" or "count".
    pub read: &'static str,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "collection {:?}: a {} in this write block saw data that another writer changed before the block committed; \
             nothing was written (run the block again)",
            self.collection, self.read
        )
    }
}

impl std::error::Error for Conflict {}

impl ReadSet {
    fn lock(&self) -> std::sync::MutexGuard<'_, Recorded> {
        self.recorded.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records `read`, made in the snapshot of sequence `sequence`.
    fn push(&self, read: Read, sequence: u64) -> tessera::Result<()> {
        let mut recorded = self.lock();
        if recorded.reads.len() >= READS_MAX {
            return Err(tessera::Error::LimitExceeded { what: "reads recorded by one write block", limit: READS_MAX as u64 });
        }
        recorded.reads.push(read);
        recorded.sequences = Some(match recorded.sequences {
            None => (sequence, sequence),
            Some((low, high)) => (low.min(sequence), high.max(sequence)),
        });
        Ok(())
    }

    /// Records a `get` of `key` in `collection` that found `stored` (the record's bytes), in
    /// the snapshot of sequence `sequence`.
    pub fn record_get(&self, collection: &str, key: &KeyBytes, stored: Option<&[u8]>, sequence: u64) -> tessera::Result<()> {
        self.record_get_owned(Arc::from(collection), key.clone(), stored.map(<[u8]>::to_vec), sequence)
    }

    /// [`ReadSet::record_get`] with the name, key and stored bytes handed over (a write
    /// block's `get` copies nothing more).
    pub fn record_get_owned(&self, collection: Arc<str>, key: KeyBytes, stored: Option<Vec<u8>>, sequence: u64) -> tessera::Result<()> {
        self.push(Read::Get { collection, key, stored }, sequence)
    }

    /// Records a query and what it matched, in the snapshot of sequence `sequence`.
    pub fn record_query(
        &self,
        collection: &str,
        text: Option<&str>,
        offset: usize,
        limit: Option<usize>,
        matches: &[(Vec<u8>, Vec<u8>)],
        sequence: u64,
    ) -> tessera::Result<()> {
        let read =
            Read::Query { collection: collection.to_owned(), text: text.map(str::to_owned), offset, limit, matches: matches.to_vec() };
        self.push(read, sequence)
    }

    /// Records a count, in the snapshot of sequence `sequence`.
    pub fn record_count(&self, collection: &str, text: Option<&str>, count: usize, sequence: u64) -> tessera::Result<()> {
        self.push(Read::Count { collection: collection.to_owned(), text: text.map(str::to_owned), count }, sequence)
    }

    /// Whether every read saw the snapshot `tx` directly follows: then nothing was committed
    /// since, and every read would find what it found.
    fn unchanged_since_read(recorded: &Recorded, tx: &WriteTxn<'_>) -> bool {
        matches!(recorded.sequences, Some((low, high)) if low == high && low.checked_add(1) == Some(tx.sequence()))
    }

    /// Reads everything again in `tx` (before the block's writes) and refuses the commit with
    /// a [`Conflict`] if anything differs; nothing to read again when no commit came after the
    /// snapshot every read saw. `open` gives a collection's handle, cheaply: it is called once
    /// per read.
    pub fn validate(&self, tx: &WriteTxn<'_>, open: &dyn Fn(&str) -> tessera::Result<DynCollection>) -> tessera::Result<()> {
        let conflict = |collection: &str, read| tessera::Error::other(Conflict { collection: collection.to_owned(), read });
        let recorded = self.lock();
        if Self::unchanged_since_read(&recorded, tx) {
            return Ok(());
        }
        // `open` takes handles from the database's open ones: every read here went through one.
        for read in recorded.reads.iter() {
            match read {
                Read::Get { collection, key, stored } => {
                    let handle = open(collection)?;
                    // Compared in place: `Some(true)` when the record is still the bytes read.
                    let same = key.get_with(&handle, tx, |record| Some(record.doc().bytes()) == stored.as_deref())?;
                    if same.unwrap_or(stored.is_none()) {
                        continue;
                    }
                    return Err(conflict(collection, "get"));
                }
                Read::Query { collection, text, offset, limit, matches } => {
                    let handle = open(collection)?;
                    let now = crate::query::build(&handle, text.as_deref(), *offset, *limit)?.fetch_stored(tx)?;
                    if now != *matches {
                        return Err(conflict(collection, "query"));
                    }
                }
                Read::Count { collection, text, count } => {
                    let handle = open(collection)?;
                    if crate::query::build(&handle, text.as_deref(), 0, None)?.count(tx)? != *count {
                        return Err(conflict(collection, "count"));
                    }
                }
            }
        }
        Ok(())
    }
}
