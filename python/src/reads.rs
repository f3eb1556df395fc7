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

use pyo3::prelude::*;
use std::sync::Mutex;
use tessera::collection::DynCollection;
use tessera::store::WriteTxn;
use tessera::value::Doc;

/// Most reads one block may record: past it the block is refused rather than holding an
/// unbounded copy of what it read.
pub const READS_MAX: usize = 1_000_000;

/// One recorded read.
enum Read {
    /// `get`: the key (a document, as the extension encodes keys) and the stored record.
    Get { collection: String, key: Vec<u8>, stored: Option<Vec<u8>> },
    /// A query: its text and window, and every match's key and stored bytes, in order.
    Query { collection: String, text: Option<String>, offset: usize, limit: Option<usize>, matches: Vec<(Vec<u8>, Vec<u8>)> },
    /// A count.
    Count { collection: String, text: Option<String>, count: usize },
}

/// The reads of one write block (`tessera.Transaction`'s side in the extension).
#[pyclass(module = "tessera._native", frozen)]
#[derive(Default)]
pub struct ReadSet {
    reads: Mutex<Vec<Read>>,
}

#[pymethods]
impl ReadSet {
    #[new]
    fn new() -> Self {
        ReadSet::default()
    }

    /// Reads recorded so far.
    fn __len__(&self) -> usize {
        self.lock().len()
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
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Read>> {
        self.reads.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn push(&self, read: Read) -> tessera::Result<()> {
        let mut reads = self.lock();
        if reads.len() >= READS_MAX {
            return Err(tessera::Error::LimitExceeded { what: "reads recorded by one write block", limit: READS_MAX as u64 });
        }
        reads.push(read);
        Ok(())
    }

    /// Records a `get` of `key` in `collection` that found `stored` (the record's bytes).
    pub fn record_get(&self, collection: &str, key: &[u8], stored: Option<&[u8]>) -> tessera::Result<()> {
        self.push(Read::Get { collection: collection.to_owned(), key: key.to_vec(), stored: stored.map(<[u8]>::to_vec) })
    }

    /// Records a query and what it matched.
    pub fn record_query(
        &self,
        collection: &str,
        text: Option<&str>,
        offset: usize,
        limit: Option<usize>,
        matches: &[(Vec<u8>, Vec<u8>)],
    ) -> tessera::Result<()> {
        self.push(Read::Query {
            collection: collection.to_owned(),
            text: text.map(str::to_owned),
            offset,
            limit,
            matches: matches.to_vec(),
        })
    }

    /// Records a count.
    pub fn record_count(&self, collection: &str, text: Option<&str>, count: usize) -> tessera::Result<()> {
        self.push(Read::Count { collection: collection.to_owned(), text: text.map(str::to_owned), count })
    }

    /// Reads everything again in `tx` (before the block's writes) and refuses the commit with
    /// a [`Conflict`] if anything differs. `open` gives a collection's handle, cheaply: it is
    /// called once per read.
    pub fn validate(&self, tx: &WriteTxn<'_>, open: &dyn Fn(&str) -> tessera::Result<DynCollection>) -> tessera::Result<()> {
        let conflict = |collection: &str, read| tessera::Error::other(Conflict { collection: collection.to_owned(), read });
        // `open` takes handles from the database's open ones: every read here went through one.
        for read in self.lock().iter() {
            match read {
                Read::Get { collection, key, stored } => {
                    let handle = open(collection)?;
                    // Compared in place: `Some(true)` when the record is still the bytes read.
                    let same =
                        handle.get_with(tx, Doc::from_trusted(key)?.root(), |record| Some(record.doc().bytes()) == stored.as_deref())?;
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
