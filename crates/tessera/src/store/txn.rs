//! Read and write transactions, the write path (map growth and retry, durability, change
//! recording) and the gate that keeps read transactions out of the way of a map resize.

use super::change_log::{ChangeLog, Staged};
use super::published::Published;
use super::sync::Durability;
use super::{Inner, Keyspace, checksum, durable_feed};
use crate::error::{Error, Result};
use heed::{EnvFlags, WithoutTls};
use std::cell::Cell;
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// LMDB's handle of a keyspace ([`Keyspace::handle`]).
type Handle = heed::Database<heed::types::Bytes, heed::types::Bytes>;
use std::time::Duration;

/// Largest key LMDB accepts with its default build.
///
/// ```
/// use tessera::store::KEY_LEN_MAX;
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let ks = db.keyspace("ks")?;
/// db.write(|tx| tx.put(&ks, &[1; KEY_LEN_MAX], b"fits"))?;
/// let refused = db.write(|tx| tx.put(&ks, &[1; KEY_LEN_MAX + 1], b"too long"));
/// assert!(matches!(refused, Err(tessera::Error::KeySize { max: KEY_LEN_MAX, .. })));
/// # Ok::<(), tessera::Error>(())
/// ```
pub const KEY_LEN_MAX: usize = 511;

/// Maps smaller than this grow by 4x when full, larger ones by 2x.
const MAP_QUADRUPLE_BELOW_BYTES: u64 = 64 << 20;

/// When a transaction fills the map, the map grows to hold at least this many times the bytes
/// (keys and values) the failed attempt had written, beyond what was in use: a B-tree stores a
/// record in more space than its bytes (node headers, partly filled pages, copied branch
/// pages), and the attempt may have failed well before its end.
const MAP_GROWTH_PER_WRITTEN_BYTE: u64 = 8;

/// When a transaction fills a map smaller than [`MAP_QUADRUPLE_BELOW_BYTES`], the map grows to
/// hold at least this many times the space the failed attempt filled (every page beyond those
/// in use), beyond what was in use. Keys that arrive out of order leave pages half full, so the
/// rule above undershoots: a 100,000-record import of the crud table's BenchDocs (23 MB in the
/// B-tree) wrote 2 MB before it filled a new 4 MiB map, was given 16 MiB, and ran a third
/// time. With this rule it is given 32 MiB and runs twice; at most an eighth of the work is
/// done again at each growth. Larger maps keep the 2x policy (their file is the map: a larger
/// factor would reserve gigabytes on disk after one large transaction).
const MAP_GROWTH_PER_FILLED_BYTE_SMALL: u64 = 8;

/// Before a write transaction starts, the map is grown if less than this share of it
/// (1/`MAP_FREE_SHARE_MIN_DENOMINATOR`) lies beyond the last used page, so that a transaction
/// smaller than that share never fills the map and never runs its closure twice.
const MAP_FREE_SHARE_MIN_DENOMINATOR: u64 = 4;

/// Before a write transaction starts, the map is also grown if less than this many times the
/// bytes (keys and values) the previous transaction wrote is free, so that a transaction like
/// the one before it runs its closure once. A rewrite of records copies every page it touches,
/// so it needs about twice its bytes in fresh pages; four times leaves room for that. The room
/// this rule asks for is at most half the map (see [`MAP_FREE_FOR_LAST_WRITE_MAX_DENOMINATOR`]),
/// so that one large import does not make the next small write reserve several times the
/// file's size on disk.
const MAP_FREE_PER_LAST_WRITTEN_BYTE: u64 = 4;

/// The most free room the last-write rule asks for: 1/`MAP_FREE_FOR_LAST_WRITE_MAX_DENOMINATOR`
/// of the map.
const MAP_FREE_FOR_LAST_WRITE_MAX_DENOMINATOR: u64 = 2;

/// How often a writer clears the reader slots of dead processes (see [`clear_stale_readers`]),
/// besides before every growth of the map.
const STALE_READER_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// Whether a key can be stored: 1 to [`KEY_LEN_MAX`] bytes. Reads of other keys find nothing;
/// writes of them are `Error::KeySize`, in every API.
fn key_size_valid(key: &[u8]) -> bool {
    !key.is_empty() && key.len() <= KEY_LEN_MAX
}

/// How long a map resize waits for read transactions of other threads to finish.
const RESIZE_WAIT_MAX: Duration = Duration::from_secs(30);

thread_local! {
    /// Read transactions opened on this thread and not yet dropped, wherever they are now: a
    /// transaction that moves to another thread keeps this counter and decrements it when it is
    /// dropped there (a plain thread-local count was left at 1 forever by such a move).
    static READERS_ON_THIS_THREAD: Arc<AtomicUsize> = Arc::new(AtomicUsize::new(0));
    /// The same, per database (by [`ResizeGate::id`]): what a resize of one database's map
    /// waits for, and what lets this thread read again while a resize waits for its reader.
    static GATE_READERS_ON_THIS_THREAD: std::cell::RefCell<Vec<(u64, Arc<AtomicUsize>)>> = const { std::cell::RefCell::new(Vec::new()) };
    /// This thread is inside a write transaction's closure (of any database).
    static WRITING_ON_THIS_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is inside a write transaction's closure.
pub(crate) fn writing_on_this_thread() -> bool {
    WRITING_ON_THIS_THREAD.with(Cell::get)
}

/// Whether a read transaction opened on this thread is still open (wherever it is now).
pub(crate) fn reading_on_this_thread() -> bool {
    READERS_ON_THIS_THREAD.with(|count| count.load(Ordering::SeqCst)) > 0
}

/// Marks the current thread as writing for its lifetime.
struct WritingGuard;

impl WritingGuard {
    fn enter() -> Result<WritingGuard> {
        if WRITING_ON_THIS_THREAD.with(|writing| writing.replace(true)) {
            return Err(Error::WouldDeadlock {
                operation: "a write transaction",
                advice: "use the `_in` forms with the outer transaction",
            });
        }
        Ok(WritingGuard)
    }
}

impl Drop for WritingGuard {
    fn drop(&mut self) {
        WRITING_ON_THIS_THREAD.with(|writing| writing.set(false));
    }
}

/// Read transactions enter the gate; a map resize closes it and waits until they have left.
///
/// The reader's path is two atomic operations: count in, then check that no resize has closed
/// the gate (both `SeqCst`, so a reader and a resizer cannot both miss each other: either the
/// reader sees the gate closed and backs out, or the resizer sees the reader and waits).
pub(crate) struct ResizeGate {
    /// Unique per gate (per database handle's state), for this thread's count of its readers.
    id: u64,
    readers: AtomicUsize,
    closed: AtomicBool,
    /// Held while closing the gate; waited on by resizers and blocked readers.
    waiters: Mutex<()>,
    changed: Condvar,
}

impl Default for ResizeGate {
    fn default() -> Self {
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        ResizeGate {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            readers: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            waiters: Mutex::new(()),
            changed: Condvar::new(),
        }
    }
}

/// The reader counts a read transaction was counted in when it entered the gate (its opening
/// thread's: all of them, and this gate's), handed back to [`ResizeGate::leave`] wherever it
/// is dropped.
pub(crate) struct Entered {
    thread: Arc<AtomicUsize>,
    gate: Arc<AtomicUsize>,
}

impl ResizeGate {
    /// This thread's count of readers in this gate.
    fn readers_on_this_thread(&self) -> Arc<AtomicUsize> {
        GATE_READERS_ON_THIS_THREAD.with(|counts| {
            let mut counts = counts.borrow_mut();
            if let Some((_, count)) = counts.iter().find(|(id, _)| *id == self.id) {
                return count.clone();
            }
            // Entries of gates whose readers have all left are dropped as new ones come: a
            // thread that opens many databases in turn keeps a short list.
            counts.retain(|(_, count)| count.load(Ordering::SeqCst) > 0 || Arc::strong_count(count) > 1);
            let count = Arc::new(AtomicUsize::new(0));
            counts.push((self.id, count.clone()));
            count
        })
    }

    /// Enters the gate for a read transaction; returns the counts it was counted in, which the
    /// transaction hands back to [`ResizeGate::leave`] wherever it is dropped.
    ///
    /// A thread that holds a reader in this gate already enters even while a resize has closed
    /// it: the resize waits for that reader, which this thread drops only once it has read on
    /// (it waited for the resize, which waited for it, and both gave up after 30 s).
    fn enter(&self) -> Entered {
        let gate = self.readers_on_this_thread();
        loop {
            self.readers.fetch_add(1, Ordering::SeqCst);
            if !self.closed.load(Ordering::SeqCst) || gate.load(Ordering::SeqCst) > 0 {
                let thread = READERS_ON_THIS_THREAD.with(Arc::clone);
                thread.fetch_add(1, Ordering::SeqCst);
                gate.fetch_add(1, Ordering::SeqCst);
                return Entered { thread, gate };
            }
            self.leave_raw();
            let mut guard = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
            while self.closed.load(Ordering::SeqCst) {
                guard = self.changed.wait(guard).unwrap_or_else(|p| p.into_inner());
            }
        }
    }

    /// Runs `flush` inside the gate, as a read transaction is: `mdb_env_sync` reads the meta
    /// pages through the map, which a resize unmaps (a flush outside the gate crashed in
    /// `mdb_env_pick_meta` while another thread grew the map).
    pub(crate) fn while_entered<T>(&self, flush: impl FnOnce() -> T) -> T {
        let opened_on = self.enter();
        let result = flush();
        self.leave(&opened_on);
        result
    }

    fn leave_raw(&self) {
        self.readers.fetch_sub(1, Ordering::SeqCst);
        if self.closed.load(Ordering::SeqCst) {
            let _guard = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
            self.changed.notify_all();
        }
    }

    fn leave(&self, entered: &Entered) {
        entered.thread.fetch_sub(1, Ordering::SeqCst);
        entered.gate.fetch_sub(1, Ordering::SeqCst);
        self.leave_raw();
    }

    /// Whether this thread opened a reader of this gate that is still open.
    fn reading_here_on_this_thread(&self) -> bool {
        GATE_READERS_ON_THIS_THREAD
            .with(|counts| counts.borrow().iter().any(|(id, count)| *id == self.id && count.load(Ordering::SeqCst) > 0))
    }

    /// Runs `resize` if no read transaction of this process is open now, without waiting;
    /// `None` if one is.
    fn try_exclusive<T>(&self, resize: impl FnOnce() -> Result<T>) -> Option<Result<T>> {
        if self.reading_here_on_this_thread() {
            return None;
        }
        let guard = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
        self.closed.store(true, Ordering::SeqCst);
        let result = (self.readers.load(Ordering::SeqCst) == 0).then(resize);
        self.closed.store(false, Ordering::SeqCst);
        self.changed.notify_all();
        drop(guard);
        result
    }

    /// Runs `resize` with no read transaction open in this process.
    fn exclusive<T>(&self, resize: impl FnOnce() -> Result<T>) -> Result<T> {
        // Only this database's readers: a read transaction of another database does not stop
        // this map from moving (it did).
        if self.reading_here_on_this_thread() {
            return Err(Error::GrowthBlocked("this thread holds a read transaction: drop it, then read or write again"));
        }
        let mut guard = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
        self.closed.store(true, Ordering::SeqCst);
        let deadline = std::time::Instant::now() + RESIZE_WAIT_MAX;
        let reopen = |guard| {
            self.closed.store(false, Ordering::SeqCst);
            self.changed.notify_all();
            drop(guard);
        };
        while self.readers.load(Ordering::SeqCst) > 0 {
            let now = std::time::Instant::now();
            if now >= deadline {
                reopen(guard);
                return Err(Error::GrowthBlocked(
                    "read transactions stayed open for 30 s (of other threads, or one this thread holds that another thread opened)",
                ));
            }
            guard = self.changed.wait_timeout(guard, (deadline - now).min(Duration::from_millis(10))).unwrap_or_else(|p| p.into_inner()).0;
        }
        let result = resize();
        reopen(guard);
        result
    }
}

/// A read-only snapshot of the database. It may be sent to another thread.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let ks = db.keyspace("ks")?;
/// db.write(|tx| tx.put(&ks, b"k", b"v"))?;
/// let tx = db.read_txn()?;
/// let value = std::thread::scope(|scope| scope.spawn(move || tx.get(&ks, b"k").map(|v| v.map(<[u8]>::to_vec))).join().unwrap())?;
/// assert_eq!(value.as_deref(), Some(&b"v"[..]), "read on another thread");
/// # Ok::<(), tessera::Error>(())
/// ```
pub struct ReadTxn<'db> {
    /// Always `Some` until [`ReadTxn::keep`] hands it to the database's [`SnapshotCache`], as
    /// the transaction is dropped.
    txn: Option<heed::RoTxn<'static, WithoutTls>>,
    inner: &'db Inner,
    /// The reader counts of the thread that opened it.
    opened_on: Entered,
    /// LMDB's id of the transaction, read once: every read of a collection asks for it
    /// (`Snapshot::foreign_commits_after`), and LMDB answers through a call.
    sequence: u64,
    /// The [`SnapshotCache`]'s epoch when the transaction began: kept at its end only if no
    /// commit came between (see [`ReadTxn::keep`]).
    cache_epoch: u64,
    /// Set when the raw transaction was lent out ([`ReadTxn::raw`]), which may open a
    /// keyspace's handle in it: LMDB closes such a handle when the transaction ends, even if
    /// a writer opened the same keyspace meanwhile, so the transaction must end now, not be
    /// kept and end later under a handle in use.
    lent_raw: AtomicBool,
}

/// One read transaction kept by a database for its reads (a `get` or a query through a `Db`,
/// `Db::read`, and every `Db::read_txn` as it is dropped): beginning an LMDB read transaction
/// costs more than a point read (a 6 KB allocation, and the reader table's lock, which LMDB
/// takes because tessera's transactions may move between threads), so the last one is reused
/// while its snapshot is still the newest.
///
/// It is dropped at every commit of this process (it would pin pages the writer frees), before
/// a map resize (LMDB wants no transaction open) and when the database closes; a commit of
/// another process is seen at the next read, which then begins a new transaction. Until that
/// read, the kept snapshot holds back the reuse of pages that process frees.
#[derive(Default)]
pub(crate) struct SnapshotCache {
    slot: Mutex<Option<heed::RoTxn<'static, WithoutTls>>>,
    /// Bumped by every [`SnapshotCache::clear`] (every commit of this process), under the
    /// slot's lock.
    epoch: AtomicU64,
}

impl SnapshotCache {
    /// Drops the kept transaction, if any, and starts a new epoch.
    pub(crate) fn clear(&self) {
        let mut slot = lock(&self.slot);
        self.epoch.fetch_add(1, Ordering::AcqRel);
        let kept = slot.take();
        drop(slot);
        drop(kept);
    }
}

impl<'db> ReadTxn<'db> {
    /// A read transaction on the newest commit: the database's kept one if it is still the
    /// newest, else a new one. Dropped, it goes back to the database's [`SnapshotCache`] if
    /// its snapshot is still the newest.
    pub(crate) fn begin(inner: &'db Inner) -> Result<ReadTxn<'db>> {
        loop {
            let opened_on = inner.resize_gate.enter();
            // Taken inside the gate, so a resize (which empties the cache with the gate closed)
            // never races this. The epoch is read before a new transaction begins: a commit
            // in between makes it older than the cache's, and the transaction is not kept.
            let (kept, cache_epoch) = {
                let mut slot = lock(&inner.snapshot_cache.slot);
                (slot.take(), inner.snapshot_cache.epoch.load(Ordering::Acquire))
            };
            let begun = |txn: heed::RoTxn<'static, WithoutTls>, opened_on| ReadTxn {
                sequence: txn.id() as u64,
                txn: Some(txn),
                inner,
                opened_on,
                cache_epoch,
                lent_raw: AtomicBool::new(false),
            };
            if let Some(txn) = kept.filter(|txn| txn.id() == inner.env.info().last_txn_id) {
                return Ok(begun(txn, opened_on));
            }
            match inner.env.clone().static_read_txn() {
                Ok(txn) => return Ok(begun(txn, opened_on)),
                Err(heed::Error::Mdb(heed::MdbError::MapResized)) => {
                    inner.resize_gate.leave(&opened_on);
                    let _writer = lock(&inner.writer);
                    adopt_resized_map(inner)?;
                }
                Err(error) => {
                    inner.resize_gate.leave(&opened_on);
                    return Err(Error::from_heed(error, inner.options.map_size_max_bytes));
                }
            }
        }
    }

    /// Ends the transaction, handing it to the database for reuse if no commit of this
    /// process came since it began, its snapshot is still the newest, and none is kept already
    /// (what dropping it does). The check and the hand-over happen under the cache's lock,
    /// which a writer takes after each commit to empty the cache: a transaction checked before
    /// a commit is therefore emptied by that commit's writer, and one checked after it is seen
    /// to be of an old epoch and dropped.
    ///
    /// The epoch, not only the snapshot's id, decides: a commit that wrote nothing leaves the
    /// id as it was, but may have opened a keyspace, whose handle a transaction that began
    /// before it does not know (LMDB answers EINVAL). A transaction lent out raw is not kept
    /// either (see `lent_raw`).
    fn keep(&mut self) {
        let Some(txn) = self.txn.take() else { return };
        let cache = &self.inner.snapshot_cache;
        let mut slot = lock(&cache.slot);
        if slot.is_none()
            && !self.lent_raw.load(Ordering::Relaxed)
            && cache.epoch.load(Ordering::Acquire) == self.cache_epoch
            && txn.id() == self.inner.env.info().last_txn_id
        {
            *slot = Some(txn);
        }
    }

    #[inline]
    fn txn(&self) -> &heed::RoTxn<'static, WithoutTls> {
        self.txn.as_ref().expect("a ReadTxn holds its transaction until it is kept")
    }

    fn ro(&self) -> &heed::RoTxn<'_> {
        self.txn()
    }

    fn error(&self, error: heed::Error) -> Error {
        Error::from_heed(error, self.inner.options.map_size_max_bytes)
    }

    /// The LMDB transaction, for opening keyspaces in it; the transaction is then not kept
    /// for reuse when it ends (see `lent_raw`).
    pub(crate) fn raw(&self) -> &heed::RoTxn<'db, WithoutTls> {
        self.lent_raw.store(true, Ordering::Relaxed);
        self.txn()
    }

    /// The value of `key`, borrowed from the database's pages (valid for this transaction).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ks = db.keyspace("ks")?;
    /// db.write(|tx| tx.put(&ks, b"k", b"v"))?;
    /// let tx = db.read_txn()?;
    /// assert_eq!(tx.get(&ks, b"k")?, Some(&b"v"[..]));
    /// assert_eq!(tx.get(&ks, b"missing")?, None);
    /// assert_eq!(tx.get(&ks, b"")?, None, "no empty key can be stored");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn get(&self, keyspace: &Keyspace, key: &[u8]) -> Result<Option<&[u8]>> {
        if !key_size_valid(key) {
            return Ok(None); // no such key can be stored (writes refuse it with `KeySize`)
        }
        get_checked(self.ro(), self.inner, keyspace, key)
    }

    /// The entries with keys in `range`, in key order, read lazily.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ks = db.keyspace("ks")?;
    /// db.write(|tx| [b"a", b"b", b"c"].iter().try_for_each(|k| tx.put(&ks, *k, b"")))?;
    /// let tx = db.read_txn()?;
    /// let keys: Vec<Vec<u8>> = tx.range(&ks, &b"b"[..]..)?.map(|e| e.map(|(k, _)| k.to_vec())).collect::<tessera::Result<_>>()?;
    /// assert_eq!(keys, [b"b".to_vec(), b"c".to_vec()]);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn range<'t, R: RangeBounds<&'t [u8]>>(&'t self, keyspace: &Keyspace, range: R) -> Result<Entries<'t>> {
        let bounds = lmdb_bounds((range.start_bound().cloned(), range.end_bound().cloned()));
        let iter = keyspace.handle(self.inner)?.range(self.txn(), &bounds).map_err(|e| self.error(e))?;
        Ok(Entries::new(RawEntries::Range(iter), self.inner, keyspace))
    }

    /// The entries whose keys start with `prefix`, in key order (all of them for an empty
    /// prefix).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ks = db.keyspace("ks")?;
    /// db.write(|tx| [&b"user:1"[..], b"user:2", b"group:1"].iter().try_for_each(|k| tx.put(&ks, k, b"")))?;
    /// let tx = db.read_txn()?;
    /// assert_eq!(tx.prefix(&ks, b"user:")?.count(), 2);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn prefix<'t>(&'t self, keyspace: &Keyspace, prefix: &'t [u8]) -> Result<Entries<'t>> {
        if prefix.is_empty() {
            return self.range(keyspace, ..);
        }
        let iter = keyspace.handle(self.inner)?.prefix_iter(self.txn(), prefix).map_err(|e| self.error(e))?;
        Ok(Entries::new(RawEntries::Prefix(iter), self.inner, keyspace))
    }

    /// Number of entries in the keyspace.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ks = db.keyspace("ks")?;
    /// db.write(|tx| (0u8..3).try_for_each(|i| tx.put(&ks, &[i], b"")))?;
    /// assert_eq!(db.read_txn()?.len(&ks)?, 3);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn len(&self, keyspace: &Keyspace) -> Result<u64> {
        keyspace.handle(self.inner)?.len(self.txn()).map_err(|e| self.error(e))
    }

    /// The value of `key` as stored, checksum included, found by a lookup from the root (for
    /// `Db::check`, which compares it with what a walk of the leaves found).
    pub(crate) fn stored_get(&self, keyspace: &Keyspace, key: &[u8]) -> Result<Option<&[u8]>> {
        if !key_size_valid(key) {
            return Ok(None);
        }
        keyspace.handle(self.inner)?.get(self.txn(), key).map_err(|e| self.error(e))
    }

    /// Every entry of `keyspace` with its value as stored, checksum included (`Db::check`
    /// verifies them itself, to report each damaged value instead of stopping at the first).
    pub(crate) fn stored_entries(&self, keyspace: &Keyspace) -> Result<Entries<'_>> {
        let iter = keyspace.handle(self.inner)?.range(self.txn(), &(Bound::Unbounded, Bound::Unbounded)).map_err(|e| self.error(e))?;
        Ok(Entries::with_values(RawEntries::Range(iter), self.inner, keyspace, Values::Raw))
    }

    /// The snapshot's sequence: the sequence of the last commit it sees.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ks = db.keyspace("ks")?;
    /// let before = db.read_txn()?.sequence();
    /// db.write(|tx| tx.put(&ks, b"k", b"v"))?;
    /// assert!(db.read_txn()?.sequence() > before, "each commit has a larger sequence");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn sequence(&self) -> u64 {
        self.sequence
    }
}

impl Drop for ReadTxn<'_> {
    fn drop(&mut self) {
        // Handed over before the gate is left: a resize empties the cache with the gate closed.
        self.keep();
        self.inner.resize_gate.leave(&self.opened_on);
    }
}

enum RawEntries<'t> {
    Range(heed::RoRange<'t, heed::types::Bytes, heed::types::Bytes>),
    RevRange(heed::RoRevRange<'t, heed::types::Bytes, heed::types::Bytes>),
    Prefix(heed::RoPrefix<'t, heed::types::Bytes, heed::types::Bytes>),
}

/// Entries of a keyspace, in key order, read lazily from the snapshot's pages.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let ks = db.keyspace("ks")?;
/// db.write(|tx| { tx.put(&ks, b"a", b"1")?; tx.put(&ks, b"b", b"2") })?;
/// let tx = db.read_txn()?;
/// for entry in tx.range(&ks, ..)? {
///     let (key, value) = entry?; // a damaged value is an error, not a wrong answer
///     assert_eq!(key.len(), value.len());
/// }
/// # Ok::<(), tessera::Error>(())
/// ```
pub struct Entries<'t> {
    iter: RawEntries<'t>,
    ceiling: u64,
    keyspace: Arc<str>,
    values: Values,
}

/// How stored values become the values a caller sees.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Values {
    /// As stored (the store's own `tessera.meta`, and `Db::check`'s own verification).
    Raw,
    /// Checksum verified, then removed.
    Verified,
    /// Checksum removed unverified (`DbOptions::verify_checksums` off).
    Stripped,
}

impl Values {
    fn of(inner: &Inner, keyspace: &Keyspace) -> Values {
        match (keyspace.checksummed, inner.options.verify_checksums) {
            (false, _) => Values::Raw,
            (true, true) => Values::Verified,
            (true, false) => Values::Stripped,
        }
    }

    /// The value inside `stored`, the bytes of `key` in `keyspace`.
    #[inline]
    fn open<'v>(self, keyspace: &str, key: &[u8], stored: &'v [u8]) -> Result<&'v [u8]> {
        let value = match self {
            Values::Raw => Some(stored),
            Values::Verified => checksum::open(key, stored),
            Values::Stripped => checksum::strip(stored),
        };
        value.ok_or_else(|| damaged_value(keyspace, key))
    }
}

/// The error for a stored value that fails its checksum.
fn damaged_value(keyspace: &str, key: &[u8]) -> Error {
    Error::Corrupted(format!("keyspace {keyspace:?}, key {} (hex): the stored value fails its checksum", super::key::hex(key)))
}

/// Largest buffer `SEALED` keeps between puts.
const SEALED_KEPT_BYTES_MAX: usize = 1 << 20;

thread_local! {
    /// A value and its checksum, assembled for LMDB to copy.
    static SEALED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl<'t> Entries<'t> {
    fn new(iter: RawEntries<'t>, inner: &Inner, keyspace: &Keyspace) -> Entries<'t> {
        Entries::with_values(iter, inner, keyspace, Values::of(inner, keyspace))
    }

    fn with_values(iter: RawEntries<'t>, inner: &Inner, keyspace: &Keyspace, values: Values) -> Entries<'t> {
        Entries { iter, ceiling: inner.options.map_size_max_bytes, keyspace: keyspace.name.clone(), values }
    }
}

impl<'t> Iterator for Entries<'t> {
    type Item = Result<(&'t [u8], &'t [u8])>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let entry = match &mut self.iter {
            RawEntries::Range(range) => range.next(),
            RawEntries::RevRange(range) => range.next(),
            RawEntries::Prefix(prefix) => prefix.next(),
        }?;
        Some(match entry {
            Ok((key, stored)) => self.values.open(&self.keyspace, key, stored).map(|value| (key, value)),
            Err(error) => Err(Error::from_heed(error, self.ceiling)),
        })
    }
}

/// Work to do once a transaction has committed, still under the writer lock.
pub(crate) type AfterCommit = Box<dyn FnOnce() + Send>;

/// A write transaction: see [`crate::Db::write`].
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let ks = db.keyspace("ks")?;
/// let result: tessera::Result<()> = db.write(|tx| {
///     tx.put(&ks, b"a", b"1")?;
///     Err(tessera::Error::other(std::io::Error::other("changed my mind")))
/// });
/// assert!(result.is_err());
/// assert_eq!(db.read(|tx| Ok(tx.get(&ks, b"a")?.is_none()))?, true, "rolled back");
/// # Ok::<(), tessera::Error>(())
/// ```
pub struct WriteTxn<'db> {
    txn: heed::RwTxn<'db>,
    inner: &'db Inner,
    log: Option<ChangeLog>,
    /// LMDB reported the map full: the transaction will be rolled back and run again.
    map_full: bool,
    /// Bytes of keys and values written so far, to size the map if it fills up.
    written_bytes: u64,
    /// The durable feed's mark in `tessera.meta` was written (see
    /// [`durable_feed::FeedState::committed_without_mark`]).
    wrote_feed_mark: bool,
    /// A put, or a delete that found its key, succeeded: the commit takes a sequence of its
    /// own (LMDB gives none to a commit that changed nothing, and the next one, perhaps
    /// another process's, takes it). Not set by writes through [`WriteTxn::raw`], which only
    /// costs [`durable_feed::FeedState::committed_without_mark`] its fast path.
    changed: bool,
    after_commit: Vec<AfterCommit>,
    /// State a higher layer keeps for this transaction only, one value per type (see
    /// [`WriteTxn::local_mut`]).
    locals: Vec<(std::any::TypeId, Box<dyn std::any::Any + Send>)>,
}

impl<'db> WriteTxn<'db> {
    fn ro(&self) -> &heed::RoTxn<'_> {
        &self.txn
    }

    pub(crate) fn raw(&mut self) -> &mut heed::RwTxn<'db> {
        &mut self.txn
    }

    /// Runs `work` after this transaction commits, before the writer lock is released (so no
    /// other transaction can come between the commit and `work`). Dropped on rollback.
    pub(crate) fn after_commit(&mut self, work: AfterCommit) {
        self.after_commit.push(work);
    }

    /// This transaction's value of type `T`, made on first use: state a higher layer keeps for
    /// the transaction only (a run that is retried starts from a fresh transaction, and so
    /// from fresh state).
    pub(crate) fn local_mut<T: Default + Send + 'static>(&mut self) -> &mut T {
        let id = std::any::TypeId::of::<T>();
        let index = match self.locals.iter().position(|(stored, _)| *stored == id) {
            Some(index) => index,
            None => {
                self.locals.push((id, Box::new(T::default())));
                self.locals.len() - 1
            }
        };
        self.locals[index].1.downcast_mut().expect("stored under its own type id")
    }

    /// This transaction's value of type `T`, if one was made ([`WriteTxn::local_mut`]).
    pub(crate) fn local<T: 'static>(&self) -> Option<&T> {
        let id = std::any::TypeId::of::<T>();
        self.locals.iter().find(|(stored, _)| *stored == id).and_then(|(_, value)| value.downcast_ref())
    }

    /// The map filled up: whatever the closure returns, the transaction is rolled back, the
    /// map grown, and the closure run again.
    pub(crate) fn will_run_again(&self) -> bool {
        self.map_full
    }

    /// Translates a heed error, remembering a full map for the retry loop.
    pub(crate) fn note_error(&mut self, error: heed::Error) -> Error {
        if matches!(error, heed::Error::Mdb(heed::MdbError::MapFull)) {
            self.map_full = true;
        }
        Error::from_heed(error, self.inner.options.map_size_max_bytes)
    }

    fn check_key(key: &[u8]) -> Result<()> {
        if !key_size_valid(key) {
            return Err(Error::KeySize { len: key.len(), max: KEY_LEN_MAX });
        }
        Ok(())
    }

    /// While changes are recorded: copies `key`'s value as it is before a write of `new`
    /// (`None`: a delete; the write may overwrite the old value in place), unless the log has
    /// the key's first old value already.
    fn stage_old(&mut self, keyspace: &Keyspace, key: &[u8], new: Option<&[u8]>) -> Result<Option<Staged>> {
        let Some(log) = &mut self.log else { return Ok(None) };
        if new.is_none() && !log.keeps_old_values() {
            // A delete is recorded only if the key existed (`WriteTxn::delete`), and a log
            // without old values needs nothing more: no read.
            return Ok(Some(log.stage(&keyspace.name, key, Some(&[]), None)));
        }
        let old = get_checked(&self.txn, self.inner, keyspace, key)?;
        Ok(Some(log.stage(&keyspace.name, key, old, new)))
    }

    /// Stores `value` under `key` with `flags`: with its checksum, in a checksummed keyspace.
    fn store(&mut self, keyspace: &Keyspace, key: &[u8], value: &[u8], flags: heed::PutFlags) -> Result<heed::Result<()>> {
        let handle = *keyspace.handle(self.inner)?;
        let stored = self.store_unmarked(handle, keyspace.checksummed, key, value, flags);
        self.changed |= stored.is_ok();
        Ok(stored)
    }

    fn store_unmarked(&mut self, handle: Handle, checksummed: bool, key: &[u8], value: &[u8], flags: heed::PutFlags) -> heed::Result<()> {
        if !checksummed {
            return handle.put_with_flags(&mut self.txn, flags, key, value);
        }
        if flags.is_empty() {
            // Value and checksum written straight into the space LMDB reserves in its page:
            // one copy, where sealing first would take two. (heed reserves only without flags.)
            let sum = checksum::of(key, value);
            return handle.put_reserved(&mut self.txn, key, value.len() + checksum::CHECKSUM_LEN, |space| {
                std::io::Write::write_all(space, value)?;
                std::io::Write::write_all(space, &sum)
            });
        }
        SEALED.with(|sealed| {
            let mut sealed = sealed.borrow_mut();
            checksum::seal(key, value, &mut sealed);
            let result = handle.put_with_flags(&mut self.txn, flags, key, &sealed);
            if sealed.capacity() > SEALED_KEPT_BYTES_MAX {
                *sealed = Vec::new(); // a rare large value: do not keep its buffer per thread
            }
            result
        })
    }

    /// Sets `key` to `value`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ks = db.keyspace("ks")?;
    /// db.write(|tx| { tx.put(&ks, b"k", b"1")?; tx.put(&ks, b"k", b"2") })?;
    /// assert_eq!(db.read(|tx| Ok(tx.get(&ks, b"k")?.map(<[u8]>::to_vec)))?, Some(b"2".to_vec()));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn put(&mut self, keyspace: &Keyspace, key: &[u8], value: &[u8]) -> Result<()> {
        Self::check_key(key)?;
        let staged = self.stage_old(keyspace, key, Some(value))?;
        self.put_logged(keyspace, key, staged, value)
    }

    /// [`WriteTxn::put`] for a caller that has just read `key`'s value in this transaction
    /// (`old`, `None` for no value): the change log takes `old` instead of a second B-tree
    /// descent to read it again.
    pub(crate) fn put_after_read(&mut self, keyspace: &Keyspace, key: &[u8], old: Option<&[u8]>, value: &[u8]) -> Result<()> {
        Self::check_key(key)?;
        debug_assert_eq!(self.get(keyspace, key).ok().flatten(), old, "put_after_read given another value than the stored one");
        let staged = self.log.as_mut().map(|log| log.stage(&keyspace.name, key, old, Some(value)));
        self.put_logged(keyspace, key, staged, value)
    }

    /// Stores `value` and records the change (its old value `staged`) while changes are
    /// recorded.
    fn put_logged(&mut self, keyspace: &Keyspace, key: &[u8], staged: Option<Staged>, value: &[u8]) -> Result<()> {
        self.written_bytes += (key.len() + value.len() + checksum::CHECKSUM_LEN) as u64;
        if let Err(error) = self.store(keyspace, key, value, heed::PutFlags::empty())? {
            return Err(self.note_error(error));
        }
        if let (Some(log), Some(staged)) = (&mut self.log, staged) {
            log.record_staged(staged, key, Some(value));
        }
        Ok(())
    }

    /// Sets `key` to `value` only if `key` has no value; returns false, writing nothing, if it
    /// has one. One B-tree descent, where `get` then `put` take two.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ks = db.keyspace("ks")?;
    /// assert!(db.write(|tx| tx.insert_new(&ks, b"k", b"first"))?);
    /// assert!(!db.write(|tx| tx.insert_new(&ks, b"k", b"second"))?);
    /// assert_eq!(db.read(|tx| Ok(tx.get(&ks, b"k")?.map(<[u8]>::to_vec)))?, Some(b"first".to_vec()));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn insert_new(&mut self, keyspace: &Keyspace, key: &[u8], value: &[u8]) -> Result<bool> {
        Self::check_key(key)?;
        self.written_bytes += (key.len() + value.len() + checksum::CHECKSUM_LEN) as u64;
        let put = self.store(keyspace, key, value, heed::PutFlags::NO_OVERWRITE)?;
        self.inserted_new(keyspace, key, value, put)
    }

    /// [`WriteTxn::insert_new`] for a value in a buffer the caller owns and does not need
    /// intact during the call: in a checksummed keyspace the checksum is appended to `value`
    /// for the put and removed after it, where `insert_new` copies the value to seal it. On
    /// return `value` holds what it held before, whatever the outcome.
    pub(crate) fn insert_new_in(&mut self, keyspace: &Keyspace, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        Self::check_key(key)?;
        let handle = *keyspace.handle(self.inner)?;
        let len = value.len();
        self.written_bytes += (key.len() + len + checksum::CHECKSUM_LEN) as u64;
        let result = if keyspace.checksummed {
            let sum = checksum::of(key, value);
            value.extend_from_slice(&sum);
            let result = handle.put_with_flags(&mut self.txn, heed::PutFlags::NO_OVERWRITE, key, value);
            value.truncate(len);
            result
        } else {
            handle.put_with_flags(&mut self.txn, heed::PutFlags::NO_OVERWRITE, key, value)
        };
        self.inserted_new(keyspace, key, value, result)
    }

    /// The outcome of a `NO_OVERWRITE` put of `value` at `key`: true, recorded for the feed,
    /// when it was stored; false when the key was taken; the error otherwise.
    fn inserted_new(&mut self, keyspace: &Keyspace, key: &[u8], value: &[u8], put: heed::Result<()>) -> Result<bool> {
        match put {
            Ok(()) => {
                self.changed = true;
                if let Some(log) = &mut self.log {
                    log.record_new(&keyspace.name, key, value);
                }
                Ok(true)
            }
            Err(heed::Error::Mdb(heed::MdbError::KeyExist)) => Ok(false),
            Err(error) => Err(self.note_error(error)),
        }
    }

    /// The greatest key of `keyspace` as this transaction sees it (`None` when it is empty).
    pub(crate) fn last_key(&self, keyspace: &Keyspace) -> Result<Option<Vec<u8>>> {
        match keyspace.handle(self.inner)?.last(&self.txn) {
            Ok(entry) => Ok(entry.map(|(key, _)| key.to_vec())),
            Err(error) => Err(Error::from_heed(error, self.inner.options.map_size_max_bytes)),
        }
    }

    /// Stores a new `key` that the caller knows is greater than every key of `keyspace` (see
    /// [`WriteTxn::last_key`]), with LMDB's `MDB_APPEND`: no search, and pages filled whole
    /// instead of split in half. A key that is not greater is refused by LMDB (an error, never
    /// a misplaced key).
    pub(crate) fn append(&mut self, keyspace: &Keyspace, key: &[u8], value: &[u8]) -> Result<()> {
        Self::check_key(key)?;
        self.written_bytes += (key.len() + value.len() + checksum::CHECKSUM_LEN) as u64;
        if let Err(error) = self.store(keyspace, key, value, heed::PutFlags::APPEND)? {
            return Err(self.note_error(error));
        }
        if let Some(log) = &mut self.log {
            log.record_new(&keyspace.name, key, value);
        }
        Ok(())
    }

    /// [`WriteTxn::put`] without recording the change for the feed: the durable feed's own
    /// entries and bookkeeping.
    pub(crate) fn put_unlogged(&mut self, keyspace: &Keyspace, key: &[u8], value: &[u8]) -> Result<()> {
        Self::check_key(key)?;
        self.wrote_feed_mark |= key == durable_feed::META_FEED_KEY;
        self.written_bytes += (key.len() + value.len() + checksum::CHECKSUM_LEN) as u64;
        self.store(keyspace, key, value, heed::PutFlags::empty())?.map_err(|error| self.note_error(error))
    }

    /// [`WriteTxn::put_unlogged`] for a value of exactly `len` bytes that `write` writes
    /// straight into LMDB's page (`MDB_RESERVE`), with its checksum after it: a large value is
    /// not assembled in memory first. A `write` that writes another length is an error, and
    /// the transaction then commits nothing.
    pub(crate) fn put_unlogged_reserved<W>(&mut self, keyspace: &Keyspace, key: &[u8], len: usize, write: W) -> Result<()>
    where
        W: FnOnce(&mut heed::ReservedSpace<'_>) -> std::io::Result<()>,
    {
        Self::check_key(key)?;
        let checksum_len = if keyspace.checksummed { checksum::CHECKSUM_LEN } else { 0 };
        self.written_bytes += (key.len() + len + checksum_len) as u64;
        let result = keyspace.handle(self.inner)?.put_reserved(&mut self.txn, key, len + checksum_len, |space| {
            write(space)?;
            if space.written_mut().len() != len {
                let message = format!("a reserved value of {len} bytes was written as {}", space.written_mut().len());
                return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, message));
            }
            if keyspace.checksummed {
                let sum = checksum::of(key, space.written_mut());
                std::io::Write::write_all(space, &sum)?;
            }
            Ok(())
        });
        self.changed |= result.is_ok();
        result.map_err(|error| self.note_error(error))
    }

    /// [`WriteTxn::delete`] without recording the change (see [`WriteTxn::put_unlogged`]).
    pub(crate) fn delete_unlogged(&mut self, keyspace: &Keyspace, key: &[u8]) -> Result<bool> {
        Self::check_key(key)?;
        let existed = keyspace.handle(self.inner)?.delete(&mut self.txn, key).map_err(|error| self.note_error(error))?;
        self.changed |= existed;
        Ok(existed)
    }

    /// The database this transaction writes.
    pub(crate) fn inner(&self) -> &'db Inner {
        self.inner
    }

    /// Removes `key`; returns whether it existed.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ks = db.keyspace("ks")?;
    /// db.write(|tx| tx.put(&ks, b"k", b"v"))?;
    /// assert!(db.write(|tx| tx.delete(&ks, b"k"))?);
    /// assert!(!db.write(|tx| tx.delete(&ks, b"k"))?, "already gone");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn delete(&mut self, keyspace: &Keyspace, key: &[u8]) -> Result<bool> {
        Self::check_key(key)?;
        let staged = self.stage_old(keyspace, key, None)?;
        let existed = match keyspace.handle(self.inner)?.delete(&mut self.txn, key) {
            Ok(existed) => existed,
            Err(error) => return Err(self.note_error(error)),
        };
        self.changed |= existed;
        if let (Some(log), Some(staged), true) = (&mut self.log, staged, existed) {
            log.record_staged(staged, key, None);
        }
        Ok(existed)
    }

    /// The value of `key` as this transaction sees it.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ks = db.keyspace("ks")?;
    /// let seen = db.write(|tx| {
    ///     tx.put(&ks, b"k", b"uncommitted")?;
    ///     Ok(tx.get(&ks, b"k")?.map(<[u8]>::to_vec))
    /// })?;
    /// assert_eq!(seen.as_deref(), Some(&b"uncommitted"[..]));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn get(&self, keyspace: &Keyspace, key: &[u8]) -> Result<Option<&[u8]>> {
        if !key_size_valid(key) {
            return Ok(None); // no such key can be stored (writes refuse it with `KeySize`)
        }
        get_checked(self.ro(), self.inner, keyspace, key)
    }

    /// The entries with keys in `range` as this transaction sees them, in key order.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ks = db.keyspace("ks")?;
    /// let count = db.write(|tx| {
    ///     tx.put(&ks, b"a", b"")?;
    ///     tx.put(&ks, b"b", b"")?;
    ///     Ok(tx.range(&ks, &b"a"[..]..&b"b"[..])?.count())
    /// })?;
    /// assert_eq!(count, 1, "the end bound is exclusive");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn range<'t, R: RangeBounds<&'t [u8]>>(&'t self, keyspace: &Keyspace, range: R) -> Result<Entries<'t>> {
        let ceiling = self.inner.options.map_size_max_bytes;
        let bounds = lmdb_bounds((range.start_bound().cloned(), range.end_bound().cloned()));
        let iter = keyspace.handle(self.inner)?.range(&self.txn, &bounds).map_err(|e| Error::from_heed(e, ceiling))?;
        Ok(Entries::new(RawEntries::Range(iter), self.inner, keyspace))
    }

    /// The entries whose keys start with `prefix` as this transaction sees them, in key order
    /// (all of them for an empty prefix).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ks = db.keyspace("ks")?;
    /// let count = db.write(|tx| {
    ///     tx.put(&ks, b"job:1", b"")?;
    ///     tx.put(&ks, b"jobs", b"")?;
    ///     Ok(tx.prefix(&ks, b"job:")?.count())
    /// })?;
    /// assert_eq!(count, 1);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn prefix<'t>(&'t self, keyspace: &Keyspace, prefix: &'t [u8]) -> Result<Entries<'t>> {
        if prefix.is_empty() {
            return self.range(keyspace, ..);
        }
        let ceiling = self.inner.options.map_size_max_bytes;
        let iter = keyspace.handle(self.inner)?.prefix_iter(&self.txn, prefix).map_err(|e| Error::from_heed(e, ceiling))?;
        Ok(Entries::new(RawEntries::Prefix(iter), self.inner, keyspace))
    }

    /// The keys of `keyspace` that start with `prefix`, in order, without their values (whose
    /// checksums are checked when the values are read).
    pub(crate) fn prefix_keys<'t>(&'t self, keyspace: &Keyspace, prefix: &'t [u8]) -> Result<impl Iterator<Item = Result<&'t [u8]>> + 't> {
        let ceiling = self.inner.options.map_size_max_bytes;
        let iter = keyspace.handle(self.inner)?.prefix_iter(&self.txn, prefix).map_err(|e| Error::from_heed(e, ceiling))?;
        Ok(iter.map(move |entry| entry.map(|(key, _)| key).map_err(|e| Error::from_heed(e, ceiling))))
    }

    /// Whether `key` has a value: one B-tree descent, no value read (a value's checksum is
    /// checked when the value is read).
    pub(crate) fn has_key(&self, keyspace: &Keyspace, key: &[u8]) -> Result<bool> {
        if !key_size_valid(key) {
            return Ok(false); // no such key can be stored
        }
        let ceiling = self.inner.options.map_size_max_bytes;
        Ok(keyspace.handle(self.inner)?.get(&self.txn, key).map_err(|e| Error::from_heed(e, ceiling))?.is_some())
    }

    /// Whether any key of `keyspace` starts with `prefix`: one seek, no value read (a value's
    /// checksum is checked when the value is read).
    pub(crate) fn has_prefix(&self, keyspace: &Keyspace, prefix: &[u8]) -> Result<bool> {
        let ceiling = self.inner.options.map_size_max_bytes;
        let first =
            keyspace.handle(self.inner)?.get_greater_than_or_equal_to(&self.txn, prefix).map_err(|e| Error::from_heed(e, ceiling))?;
        Ok(first.is_some_and(|(key, _)| key.starts_with(prefix)))
    }

    /// The sequence this transaction will have when it commits, if it changes something: LMDB
    /// gives a transaction that writes nothing no sequence of its own, and the next commit (of
    /// this process or another) takes this one, so it is then no cursor for
    /// [`crate::Db::changes_since`] (commit `sequence` would be skipped).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ks = db.keyspace("ks")?;
    /// let will_be = db.write(|tx| { tx.put(&ks, b"k", b"v")?; Ok(tx.sequence()) })?;
    /// assert_eq!(db.read_txn()?.sequence(), will_be);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn sequence(&self) -> u64 {
        self.txn.id() as u64
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The write path: see [`crate::Db::write`].
pub(crate) fn run_write<T>(inner: &Inner, durability: Durability, mut write: impl FnMut(&mut WriteTxn<'_>) -> Result<T>) -> Result<T> {
    let ceiling = inner.options.map_size_max_bytes;
    let _writing = WritingGuard::enter()?;
    let writer = lock(&inner.writer);
    clear_stale_readers_when_due(inner);
    grow_ahead(inner);
    let mut published = false;
    let (value, sequence, took_sequence) = loop {
        let txn = match inner.env.write_txn() {
            Ok(txn) => txn,
            Err(heed::Error::Mdb(heed::MdbError::MapResized)) => {
                adopt_resized_map(inner)?;
                continue;
            }
            Err(error) => return Err(Error::from_heed(error, ceiling)),
        };
        inner.origins.write_begins(txn.id() as u64);
        // The durable feed needs the changes; another process may have turned it on.
        let durable_feed = durable_feed::enabled_for_write(inner, &txn)?;
        let mut txn = WriteTxn {
            txn,
            inner,
            log: change_log_for(inner, durable_feed.as_ref()),
            map_full: false,
            written_bytes: 0,
            wrote_feed_mark: false,
            changed: false,
            after_commit: Vec::new(),
            locals: Vec::new(),
        };
        if let Some(cross_process) = inner.cross_process.get() {
            // Other processes' commits first, so that batches reach the feed in commit order.
            cross_process.catch_up_before_write(inner, &txn);
        }
        // A panic in the closure is a typed error like any other: the transaction rolls back
        // and the caller gets `Panicked` (tessera's own state is the transaction, which is
        // dropped; what the closure captured is the caller's to judge).
        let result = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| write(&mut txn))) {
            Ok(result) => result,
            Err(payload) => {
                drop(txn); // rolls back
                return Err(Error::Panicked(panic_message(payload.as_ref())));
            }
        };
        if txn.map_full {
            let written = txn.written_bytes;
            drop(txn); // rolls back
            grow_map(inner, written)?;
            continue;
        }
        let value = result?; // on Err, dropping `txn` rolls back
        let sequence = txn.txn.id() as u64;
        let changes = txn.log.take().map(ChangeLog::finish);
        if let (Some(target), Some(changes)) = (&durable_feed, &changes) {
            // In this transaction: the commit and its feed entry are one.
            if let Err(error) = durable_feed::append(&mut txn, target, sequence, changes) {
                if txn.map_full {
                    let written = txn.written_bytes;
                    drop(txn); // rolls back
                    grow_map(inner, written)?;
                    continue;
                }
                return Err(error);
            }
        }
        let written = txn.written_bytes;
        let advances_off_through = txn.changed && !txn.wrote_feed_mark;
        let wrote = txn.changed;
        inner.last_written_bytes.store(written, Ordering::Relaxed);
        let after_commit = std::mem::take(&mut txn.after_commit);
        let buffered = matches!(durability, Durability::Buffered { .. });
        // Held from the commit until its batch is published: nothing comes between.
        let committing = inner.cross_process.get().map(|cross_process| cross_process.committing(sequence));
        match commit(inner, txn.txn, buffered) {
            Ok(()) => {}
            Err(heed::Error::Mdb(heed::MdbError::MapFull)) => {
                drop(committing);
                grow_map(inner, written)?;
                continue;
            }
            Err(error) => return Err(Error::from_heed_write(error, ceiling, &inner.path)),
        }
        // LMDB gives a commit that changed nothing no sequence of its own: the next commit
        // takes it. Recording such a commit with the syncer would mark that next commit
        // flushed before it exists, and it would then return from an `Immediate` write, or pass
        // `Db::sync`, unflushed. `wrote` misses writes through `WriteTxn::raw`: LMDB's newest
        // commit decides then.
        let took_sequence = wrote || inner.env.info().last_txn_id as u64 >= sequence;
        if wrote {
            inner.origins.committed(sequence);
        }
        if durable_feed.is_none() && advances_off_through {
            inner.feed_state.committed_without_mark(sequence);
        }
        // The kept read snapshot is now old: drop it before it pins pages this commit freed.
        inner.snapshot_cache.clear();
        report_to_warmer(inner);
        let delay = match durability {
            Durability::Buffered { max_delay } => Some(max_delay),
            Durability::Immediate => None,
        };
        if took_sequence {
            inner.syncer.committed(sequence, delay);
        }
        for work in after_commit {
            work();
        }
        if let Some(changes) = changes {
            // A log without old values (the durable feed alone when the transaction began) is
            // not published: a listener that came since waits for this writer before it starts
            // (`Db::wait_for_writers`), as it does for a transaction that logged nothing.
            if !changes.is_empty() && changes.keeps_old_values() && inner.feed.has_listeners() {
                // Published while the writer lock is held, so batches queue in commit order;
                // they are delivered after the lock is released (below, or by the feed thread).
                inner.feed.publish(Published::from_log(sequence, changes));
                published = true;
            } else {
                changes.keep();
            }
        }
        if let Some(committing) = committing {
            committing.committed(sequence);
        }
        if durable_feed.as_ref().is_some_and(|target| target.late_notify) {
            durable_feed::wake_others_late(inner, sequence);
        }
        break (value, sequence, took_sequence);
    };
    drop(writer);
    if let Some(cross_process) = inner.cross_process.get() {
        cross_process.raise(sequence);
        cross_process.report_gap(inner);
    }
    // A small batch's subscribers get their events before `write` returns (see store/feed.rs).
    // Only what this write queued is its to deliver: its own batch, and other processes'
    // commits caught up before it (a batch another writer queued is delivered by that writer,
    // or by whoever holds the delivery lock).
    if published || inner.cross_process.get().is_some() {
        inner.feed.deliver_queued();
    }
    if durability == Durability::Immediate {
        // A commit that changed nothing still flushes the commits before it, as every
        // `Immediate` commit does (`docs/storage.md`), but not its own sequence, which is not
        // made yet.
        let flushed_through = if took_sequence { sequence } else { sequence.saturating_sub(1) };
        inner.syncer.sync_through(flushed_through).map_err(Error::NotDurable)?;
    }
    Ok(value)
}

/// The change log a write transaction keeps, if anyone needs its changes: in-process
/// listeners and cross-process notification need old values, the durable feed alone does not.
fn change_log_for(inner: &Inner, durable_feed: Option<&durable_feed::FeedWrite>) -> Option<ChangeLog> {
    let listened = inner.feed.has_listeners();
    match durable_feed {
        None if !listened => None,
        None => Some(ChangeLog::start(true)),
        Some(target) => Some(ChangeLog::start(listened || target.olds.is_some())),
    }
}

/// The text of a panic's payload (`panic!` with a message gives a `&str` or a `String`).
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(text), _) => (*text).to_owned(),
        (_, Some(text)) => text.clone(),
        _ => "a panic with a payload that is not text".to_owned(),
    }
}

/// Commits with LMDB's flush switched off for a buffered transaction. The environment's
/// standing flags match the database's default durability, so only a transaction that asks
/// for the other level switches them (and back).
fn commit(inner: &Inner, txn: heed::RwTxn<'_>, buffered: bool) -> heed::Result<()> {
    let default_buffered = matches!(inner.options.durability, Durability::Buffered { .. });
    if buffered == default_buffered {
        return txn.commit();
    }
    let mode = |on: bool| if on { heed::FlagSetMode::Enable } else { heed::FlagSetMode::Disable };
    // SAFETY: environment flags may not be changed concurrently from several threads; every
    // change happens here or at open, under `inner.writer`, which the caller holds.
    unsafe { inner.env.set_flags(EnvFlags::NO_SYNC, mode(buffered))? };
    let result = txn.commit();
    // SAFETY: as above.
    let restored = unsafe { inner.env.set_flags(EnvFlags::NO_SYNC, mode(default_buffered)) };
    result.and(restored)
}

/// The next map size by the growth policy: 4x below [`MAP_QUADRUPLE_BELOW_BYTES`], 2x above,
/// and at least `needed_bytes`, up to the ceiling.
fn next_map_size(inner: &Inner, current: u64, needed_bytes: u64) -> u64 {
    let factor = if current < MAP_QUADRUPLE_BELOW_BYTES { 4 } else { 2 };
    super::round_to_page(current.saturating_mul(factor).max(needed_bytes)).min(super::map_ceiling_bytes(&inner.options))
}

/// Bytes of the map that lie in or below the last used page.
fn used_bytes(inner: &Inner, info: &heed::EnvInfo) -> u64 {
    (info.last_page_number as u64 + 1).saturating_mul(inner.page_bytes)
}

/// Tells the warming thread, if any, where the used pages end now and how large the map is
/// (after a commit or a resize).
fn report_to_warmer(inner: &Inner) {
    if let Some(warmer) = inner.warmer.get() {
        let info = inner.env.info();
        warmer.committed(used_bytes(inner, &info), info.map_size as u64);
    }
}

/// Clears the slots that processes which died inside a read transaction left in LMDB's reader
/// table (`mdb_reader_check`: a slot whose process no longer holds its lock on the lock file).
/// Such a slot pins the snapshot it was reading: no page freed after it can be reused, so
/// every later commit grows the file (a follower killed 50 times beside a writer filled a
/// 60 GB disk). LMDB clears them only when its reader table is full. Best effort: an error
/// leaves the slots for the next check.
fn clear_stale_readers(inner: &Inner) {
    let _ = inner.env.clear_stale_readers();
}

/// [`clear_stale_readers`] at most once per [`STALE_READER_CHECK_INTERVAL`]; called by each
/// writer before its transaction (one lock of LMDB's reader table and a `fcntl` per process
/// with a slot, a few microseconds).
fn clear_stale_readers_when_due(inner: &Inner) {
    let mut due = lock(&inner.stale_reader_check_due);
    let now = std::time::Instant::now();
    if now >= *due {
        *due = now + STALE_READER_CHECK_INTERVAL;
        clear_stale_readers(inner);
    }
}

/// Grows the map after a transaction that had written `written_bytes` found it full, up to
/// the ceiling. Called with the writer lock held and no write transaction open.
fn grow_map(inner: &Inner, written_bytes: u64) -> Result<()> {
    // A dead reader may be why the map is full: free its pages for the retry (and the growth
    // below makes room in any case).
    clear_stale_readers(inner);
    let info = inner.env.info();
    let current = info.map_size as u64;
    if current >= super::map_ceiling_bytes(&inner.options) {
        return Err(Error::MapFull { ceiling_bytes: inner.options.map_size_max_bytes });
    }
    // A full map means the transaction runs again from the start: grow small maps by 4x, so
    // that a large first transaction on a new file is not repeated at every doubling, and
    // always to enough room for several times what the failed attempt wrote.
    let used = used_bytes(inner, &info);
    let for_written = written_bytes.saturating_mul(MAP_GROWTH_PER_WRITTEN_BYTE);
    // The attempt filled every page beyond `used`: that space, times the factor, is a second
    // floor, which holds even when the B-tree stores the bytes written in twice their size.
    let for_filled =
        if current < MAP_QUADRUPLE_BELOW_BYTES { current.saturating_sub(used).saturating_mul(MAP_GROWTH_PER_FILLED_BYTE_SMALL) } else { 0 };
    let needed = used.saturating_add(for_written.max(for_filled));
    let grown = reserve_step(inner, current, next_map_size(inner, current, needed))?;
    inner.resize_gate.exclusive(|| resize_inside_gate(inner, grown))
}

/// Resizes the map to `bytes` (0 adopts the size in the file). Called only inside
/// `ResizeGate::exclusive` or `try_exclusive`, with the writer lock held and no write
/// transaction open.
fn resize_inside_gate(inner: &Inner, bytes: u64) -> Result<()> {
    // The kept read transaction is outside the gate: end it too.
    inner.snapshot_cache.clear();
    // With the write map LMDB sets the file's length to the new map size (`ftruncate`): never
    // below the file's length, which another process's larger map may need (cut under it, its
    // next write there is SIGBUS), and under a lock that every process takes to resize, so no
    // other process grows the file between the length read here and the resize.
    let _across_processes = ResizeAcrossProcesses::lock(inner)?;
    let bytes = never_below_file(inner, bytes);
    // The warming thread stays out of the map until it has moved, then finds it anew.
    let warming_paused = inner.warmer.get().map(|warmer| warmer.resizing());
    // SAFETY: LMDB requires that no transaction of this process is open: the caller holds the
    // writer lock with no write transaction, the gate has no reader, and the kept read
    // transaction is gone.
    let resized = unsafe { inner.env.resize(bytes as usize) }.map_err(|e| Error::from_heed(e, inner.options.map_size_max_bytes));
    drop(warming_paused);
    // The new map's pages are cold: warm them before the next transaction writes them.
    report_to_warmer(inner);
    resized
}

/// An exclusive `flock` on the data file, held by a resize (see [`resize_inside_gate`]); LMDB
/// itself takes no `flock` on it. Released when dropped (the descriptor is closed).
pub(crate) struct ResizeAcrossProcesses {
    _file: Option<std::fs::File>,
}

impl ResizeAcrossProcesses {
    fn lock(inner: &Inner) -> Result<ResizeAcrossProcesses> {
        Self::lock_path(&inner.path, &inner.options)
    }

    /// The lock for an open, held until LMDB has opened the file: with the write map, LMDB sets
    /// the file's length to the map size `preflight` read, which must not be older than another
    /// process's resize, nor smaller than the map of a process that created the file a moment
    /// before (two processes opening a new path at once: the second, having seen no file, cut
    /// the first's map with its smaller one, and the first died of SIGBUS). A missing file is
    /// created empty under the lock, which `preflight` takes for a new one. Nothing to lock
    /// without the write map, or for a read-only handle.
    pub(crate) fn lock_path(path: &std::path::Path, options: &crate::DbOptions) -> Result<ResizeAcrossProcesses> {
        if !options.writes_through_map() || std::fs::metadata(path).is_ok_and(|meta| !meta.is_file()) {
            return Ok(ResizeAcrossProcesses { _file: None });
        }
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            let file = match std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path) {
                Ok(file) => file,
                // No directory for it (yet): the open reports that, or creates the directories
                // (`DbOptions::create_parent_dirs`) and the file unlocked.
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(ResizeAcrossProcesses { _file: None }),
                Err(error) => return Err(error.into()),
            };
            loop {
                // SAFETY: `file` is an open descriptor for the duration of the call.
                if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
                    return Ok(ResizeAcrossProcesses { _file: Some(file) });
                }
                let error = std::io::Error::last_os_error();
                if error.kind() != std::io::ErrorKind::Interrupted {
                    return Err(Error::Io(error));
                }
            }
        }
        #[cfg(not(unix))]
        Ok(ResizeAcrossProcesses { _file: None })
    }
}

/// The map size to resize to: `bytes` (0: the size in the newest meta page), but with the write
/// map never less than the file's length (in whole 64 KiB) nor the current map, so that LMDB's
/// `ftruncate` never cuts the file. Called under [`ResizeAcrossProcesses`].
fn never_below_file(inner: &Inner, bytes: u64) -> u64 {
    if !inner.options.writes_through_map() {
        return bytes;
    }
    let file_bytes = std::fs::metadata(&inner.path).map_or(0, |meta| meta.len());
    let floor = super::round_to_page(file_bytes).max(inner.env.info().map_size as u64);
    if bytes == 0 { floor } else { bytes.max(floor) }
}

/// Grows the map before a write transaction starts if less than a quarter of it is free
/// (see [`MAP_FREE_SHARE_MIN_DENOMINATOR`]) or less than four times what the previous
/// transaction wrote, up to half the map (see [`MAP_FREE_PER_LAST_WRITTEN_BYTE`]). Best effort: it does nothing
/// when read transactions of this process are open (a resize would wait for them), when the
/// map is at its ceiling, or when the disk has no room; the transaction then runs on the map it
/// has. Called with the writer lock held and no write transaction open.
fn grow_ahead(inner: &Inner) {
    let info = inner.env.info();
    let current = info.map_size as u64;
    let used = used_bytes(inner, &info);
    let free = current.saturating_sub(used);
    let last_written = inner.last_written_bytes.load(Ordering::Relaxed);
    let for_last_write = last_written.saturating_mul(MAP_FREE_PER_LAST_WRITTEN_BYTE).min(current / MAP_FREE_FOR_LAST_WRITE_MAX_DENOMINATOR);
    let wanted_free = (current / MAP_FREE_SHARE_MIN_DENOMINATOR).max(for_last_write);
    if free >= wanted_free || current >= super::map_ceiling_bytes(&inner.options) {
        return;
    }
    // A dead reader may be why the file grows: its pages become reusable from this
    // transaction on (the map grows all the same: what is free now is what is free).
    clear_stale_readers(inner);
    let needed = used.saturating_add(wanted_free);
    let Ok(grown) = reserve_step(inner, current, next_map_size(inner, current, needed)) else { return };
    let _ = inner.resize_gate.try_exclusive(|| resize_inside_gate(inner, grown));
}

/// Reserves disk blocks for a map of `preferred` bytes, or for the largest map between
/// `current` and `preferred` that the disk has room for; the size reserved. `DiskFull` when
/// the disk cannot hold even one more 64 KiB step.
fn reserve_step(inner: &Inner, current: u64, preferred: u64) -> Result<u64> {
    match reserve_bytes(inner, preferred) {
        Err(Error::DiskFull) => {}
        other => return other.map(|()| preferred),
    }
    // The largest step the free space allows, then smaller ones (a file system needs some of
    // its free blocks for its own bookkeeping), halving the increase down to one 64 KiB step.
    let file_bytes = std::fs::metadata(&inner.path).map_or(current, |meta| meta.len());
    let free = disk_free_bytes(inner).unwrap_or(0);
    let mut step = round_down_to_page(file_bytes.saturating_add(free)).min(preferred);
    while step > current {
        match reserve_bytes(inner, step) {
            Ok(()) => return Ok(step),
            Err(Error::DiskFull) => step = current + round_down_to_page((step - current) / 2),
            Err(other) => return Err(other),
        }
    }
    Err(Error::DiskFull)
}

/// Free bytes on the file's disk: the simulated disk's ([`crate::Db::inject_free_bytes`]), or
/// what `statvfs` reports.
fn disk_free_bytes(inner: &Inner) -> Option<u64> {
    let simulated = inner.simulated_disk_bytes.load(Ordering::Acquire);
    if simulated != u64::MAX {
        let file_bytes = std::fs::metadata(&inner.path).map_or(0, |meta| meta.len());
        return Some(simulated.saturating_sub(file_bytes));
    }
    crate::error::free_bytes(&inner.path)
}

/// `bytes` rounded down to whole 64 KiB pages (see [`super::round_to_page`]).
fn round_down_to_page(bytes: u64) -> u64 {
    bytes >> 16 << 16
}

/// Starts the thread that warms the map's next pages ([`crate::DbOptions::warm_pages_ahead`]),
/// for a writable database with `write_map` on Linux.
pub(crate) fn start_warmer(inner: &Inner) -> Result<()> {
    let options = &inner.options;
    if !(options.warm_pages_ahead && options.writes_through_map()) {
        return Ok(());
    }
    #[cfg(target_os = "linux")]
    {
        let file = super::FileIdentity::of(&inner.path).ok_or_else(|| {
            Error::Io(std::io::Error::new(std::io::ErrorKind::NotFound, format!("{}: the file's device and inode", inner.path.display())))
        })?;
        let info = inner.env.info();
        let warmer = super::warm::Warmer::start(file, used_bytes(inner, &info), info.map_size as u64)?;
        assert!(inner.warmer.set(warmer).is_ok(), "started once, at open");
    }
    Ok(())
}

/// With `write_map`, reserves disk blocks for the whole current map.
pub(crate) fn reserve_file(inner: &Inner) -> Result<()> {
    reserve_bytes(inner, inner.env.info().map_size as u64)
}

/// With `write_map`, makes sure the file has blocks allocated for its first `bytes` bytes, so
/// that writing through the memory map can never meet a full disk (which would be SIGBUS).
fn reserve_bytes(inner: &Inner, bytes: u64) -> Result<()> {
    // A read-only handle may not even be allowed to open the file for writing (adopting a map
    // another process grew failed with EACCES there when this checked `write_map` alone).
    if !inner.options.writes_through_map() {
        return Ok(());
    }
    if bytes > inner.simulated_disk_bytes.load(Ordering::Acquire) {
        return Err(Error::DiskFull);
    }
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&inner.path)?;
        // SAFETY: `file` is an open descriptor for the duration of the call; posix_fallocate
        // only allocates blocks and never changes the file's existing contents.
        let status = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, bytes as libc::off_t) };
        match status {
            0 => Ok(()),
            libc::ENOSPC | libc::EFBIG | libc::EDQUOT => Err(Error::DiskFull),
            // File systems without fallocate: nothing to reserve through, carry on.
            libc::EOPNOTSUPP | libc::EINVAL => Ok(()),
            other => Err(Error::Io(std::io::Error::from_raw_os_error(other))),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = bytes;
        Ok(())
    }
}

/// Adopts a map size another process set (after `MDB_MAP_RESIZED`). The caller holds the
/// writer lock.
fn adopt_resized_map(inner: &Inner) -> Result<()> {
    inner.resize_gate.exclusive(|| resize_inside_gate(inner, 0))?;
    reserve_file(inner)
}

/// What both transaction kinds can read: a consistent view of the database. Collections take
/// `&impl Snapshot` (or a [`crate::Db`], through [`ReadSource`]) for their reads.
///
/// ```
/// use tessera::store::Snapshot;
/// /// Counts a keyspace's entries in any view: a read or a write transaction.
/// fn count(view: &impl Snapshot, ks: &tessera::store::Keyspace) -> tessera::Result<usize> {
///     Ok(view.entries(ks, std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)?.count())
/// }
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let ks = db.keyspace("ks")?;
/// let inside = db.write(|tx| { tx.put(&ks, b"k", b"v")?; count(&*tx, &ks) })?;
/// assert_eq!((inside, count(&db.read_txn()?, &ks)?), (1, 1));
/// # Ok::<(), tessera::Error>(())
/// ```
pub trait Snapshot {
    /// The value of `key`.
    fn get_value(&self, keyspace: &Keyspace, key: &[u8]) -> Result<Option<&[u8]>>;
    /// The entries between two bounds, in key order.
    fn entries<'t>(&'t self, keyspace: &Keyspace, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Result<Entries<'t>>;
    /// The entries between two bounds, in descending key order.
    fn entries_rev<'t>(&'t self, keyspace: &Keyspace, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Result<Entries<'t>>;
    /// The sequence of the last commit this view includes (for a write transaction, the one it
    /// will have).
    fn view_sequence(&self) -> u64;
    /// Whether a commit this view includes after commit `sequence` may be another process's
    /// (this process knows its own; LMDB numbers every process's commits in one sequence):
    /// then `Some` of the last commit the view includes besides its own writes. Something
    /// read at `sequence` is still as it was in this view when this is `None`.
    ///
    /// ```
    /// use tessera::store::Snapshot;
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ks = db.keyspace("ks")?;
    /// db.write(|tx| tx.put(&ks, b"k", b"v"))?;
    /// let seen = db.read_txn()?.sequence();
    /// db.write(|tx| tx.put(&ks, b"k", b"w"))?; // this process's own commit
    /// assert_eq!(db.read_txn()?.foreign_commits_after(seen), None);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    fn foreign_commits_after(&self, sequence: u64) -> Option<u64>;
}

/// A read of `keyspace` that LMDB refused: EINVAL there means the transaction began before this
/// process opened the keyspace's handle (the other causes, a key of a size no write accepts or
/// a transaction already ended, cannot reach LMDB from here), which is named; any other error as
/// [`Error::from_heed`] translates it. (It was `Error::Io` "Invalid argument", naming nothing.)
fn read_error(keyspace: &Keyspace, error: heed::Error, ceiling_bytes: u64) -> Error {
    const INVALID_ARGUMENT: i32 = 22;
    match &error {
        heed::Error::Io(io) if io.raw_os_error() == Some(INVALID_ARGUMENT) => {
            Error::KeyspaceNewerThanSnapshot { keyspace: keyspace.name.to_string() }
        }
        _ => Error::from_heed(error, ceiling_bytes),
    }
}

/// The value of `key` in either kind of transaction, its checksum checked (or not, as the
/// database's options say) and removed.
fn get_checked<'t>(txn: &'t heed::RoTxn<'_>, inner: &Inner, keyspace: &Keyspace, key: &[u8]) -> Result<Option<&'t [u8]>> {
    match keyspace.handle(inner)?.get(txn, key).map_err(|e| read_error(keyspace, e, inner.options.map_size_max_bytes))? {
        Some(stored) => Values::of(inner, keyspace).open(&keyspace.name, key, stored).map(Some),
        None => Ok(None),
    }
}

/// `bounds` as LMDB can take them. No stored key is empty, so an empty lower bound (inclusive
/// or not) is no bound, and an empty upper bound leaves nothing; LMDB refuses to position a
/// cursor at an empty key (`MDB_BAD_VALSIZE`), so neither reaches it (a query for keys that
/// start with "" failed instead of returning every record).
fn lmdb_bounds<'b>(bounds: (Bound<&'b [u8]>, Bound<&'b [u8]>)) -> (Bound<&'b [u8]>, Bound<&'b [u8]>) {
    const NOTHING: (Bound<&[u8]>, Bound<&[u8]>) = (Bound::Included(&[0]), Bound::Excluded(&[0]));
    match bounds {
        (_, Bound::Included([]) | Bound::Excluded([])) => NOTHING,
        (Bound::Included([]) | Bound::Excluded([]), end) => (Bound::Unbounded, end),
        other => other,
    }
}

/// A range of entries, ascending or descending, with bounds that need not outlive the
/// iterator (heed copies them into the cursor).
fn entries_between<'t>(
    txn: &'t heed::RoTxn<'_>,
    inner: &Inner,
    keyspace: &Keyspace,
    bounds: (Bound<&[u8]>, Bound<&[u8]>),
    descending: bool,
) -> Result<Entries<'t>> {
    let ceiling = inner.options.map_size_max_bytes;
    let bounds = lmdb_bounds(bounds);
    let iter = if descending {
        RawEntries::RevRange(keyspace.handle(inner)?.rev_range(txn, &bounds).map_err(|e| read_error(keyspace, e, ceiling))?)
    } else {
        RawEntries::Range(keyspace.handle(inner)?.range(txn, &bounds).map_err(|e| read_error(keyspace, e, ceiling))?)
    };
    Ok(Entries::new(iter, inner, keyspace))
}

/// How much a keyspace holds, as one transaction sees it ([`ReadTxn::size`],
/// [`WriteTxn::size`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyspaceSize {
    pub(crate) entries: u64,
    /// The bytes of its pages: branch, leaf and overflow.
    pub(crate) bytes: u64,
}

/// [`KeyspaceSize`] in either kind of transaction: O(1), from LMDB's counts.
fn keyspace_size(txn: &heed::RoTxn<'_>, inner: &Inner, keyspace: &Keyspace) -> Result<KeyspaceSize> {
    let stat = keyspace.handle(inner)?.stat(txn).map_err(|e| read_error(keyspace, e, inner.options.map_size_max_bytes))?;
    let pages = stat.branch_pages as u64 + stat.leaf_pages as u64 + stat.overflow_pages as u64;
    Ok(KeyspaceSize { entries: stat.entries as u64, bytes: pages * u64::from(stat.page_size) })
}

macro_rules! snapshot_for {
    ($($txn:ident),*) => {$(
        impl Snapshot for $txn<'_> {
            fn get_value(&self, keyspace: &Keyspace, key: &[u8]) -> Result<Option<&[u8]>> {
                self.get(keyspace, key)
            }
            fn entries<'t>(&'t self, keyspace: &Keyspace, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Result<Entries<'t>> {
                entries_between(self.ro(), self.inner, keyspace, (start, end), false)
            }
            fn entries_rev<'t>(&'t self, keyspace: &Keyspace, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Result<Entries<'t>> {
                entries_between(self.ro(), self.inner, keyspace, (start, end), true)
            }
            fn view_sequence(&self) -> u64 {
                self.sequence()
            }
            #[inline]
            fn foreign_commits_after(&self, sequence: u64) -> Option<u64> {
                let seen = self.last_commit_seen();
                self.inner.origins.foreign_between(sequence, seen).then_some(seen)
            }
        }
    )*};
}
snapshot_for!(ReadTxn, WriteTxn);

impl ReadTxn<'_> {
    /// The last commit this snapshot includes.
    fn last_commit_seen(&self) -> u64 {
        self.sequence()
    }

    /// How many entries `keyspace` has and the bytes of its pages, in this snapshot: O(1).
    pub(crate) fn size(&self, keyspace: &Keyspace) -> Result<KeyspaceSize> {
        keyspace_size(self.ro(), self.inner, keyspace)
    }
}

impl WriteTxn<'_> {
    /// The last commit before this transaction (it sees that one and its own writes).
    fn last_commit_seen(&self) -> u64 {
        self.sequence().saturating_sub(1)
    }

    /// How many entries `keyspace` has and the bytes of its pages, as this transaction sees
    /// it: O(1).
    pub(crate) fn size(&self, keyspace: &Keyspace) -> Result<KeyspaceSize> {
        keyspace_size(self.ro(), self.inner, keyspace)
    }
}

/// Where a read can run: a [`crate::Db`] (each call opens its own snapshot) or an open
/// transaction (the call reads that transaction's view).
///
/// ```
/// use tessera::collection::Record;
/// #[derive(Record, Debug, PartialEq)]
/// struct Task { #[record(key)] id: u32 }
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let tasks = db.collection::<Task>()?;
/// db.write(|tx| tasks.insert(tx, &Task { id: 1 }))?;
/// assert!(tasks.get(&db, &1)?.is_some()); // a Db: a snapshot of its own
/// let tx = db.read_txn()?;
/// assert!(tasks.get(&tx, &1)?.is_some()); // a transaction: its view
/// # Ok::<(), tessera::Error>(())
/// ```
pub trait ReadSource {
    /// Runs `read` on a snapshot.
    fn with_snapshot<R>(&self, read: impl FnOnce(&dyn Snapshot) -> Result<R>) -> Result<R>;
}

impl ReadSource for crate::Db {
    fn with_snapshot<R>(&self, read: impl FnOnce(&dyn Snapshot) -> Result<R>) -> Result<R> {
        self.read(|txn| read(txn))
    }
}

impl ReadSource for ReadTxn<'_> {
    fn with_snapshot<R>(&self, read: impl FnOnce(&dyn Snapshot) -> Result<R>) -> Result<R> {
        read(self)
    }
}

impl ReadSource for WriteTxn<'_> {
    fn with_snapshot<R>(&self, read: impl FnOnce(&dyn Snapshot) -> Result<R>) -> Result<R> {
        read(self)
    }
}

impl<S: ReadSource + ?Sized> ReadSource for &S {
    fn with_snapshot<R>(&self, read: impl FnOnce(&dyn Snapshot) -> Result<R>) -> Result<R> {
        (**self).with_snapshot(read)
    }
}

impl<S: ReadSource + ?Sized> ReadSource for &mut S {
    fn with_snapshot<R>(&self, read: impl FnOnce(&dyn Snapshot) -> Result<R>) -> Result<R> {
        (**self).with_snapshot(read)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Db, DbOptions};

    /// `insert_new_in` appends the checksum to the caller's buffer for the put: the buffer must
    /// come back as it was whatever the outcome, the stored value must verify, and the change
    /// feed must record the value without the checksum.
    #[test]
    fn insert_new_in_stores_a_checked_value_and_hands_the_buffer_back_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open_with(dir.path().join("db"), DbOptions { durable_feed: true, ..DbOptions::default() }).unwrap();
        let notes = db.keyspace("notes").unwrap();
        let mut value = b"first value".to_vec();
        let inserted = db.write(|tx| tx.insert_new_in(&notes, b"k", &mut value)).unwrap();
        assert!(inserted);
        assert_eq!(value, b"first value", "the checksum was removed again");
        let mut other = b"second".to_vec();
        let inserted = db.write(|tx| tx.insert_new_in(&notes, b"k", &mut other)).unwrap();
        assert!(!inserted, "the key is taken");
        assert_eq!(other, b"second");
        let stored = db.read(|tx| Ok(tx.get(&notes, b"k")?.map(<[u8]>::to_vec))).unwrap();
        assert_eq!(stored.as_deref(), Some(&b"first value"[..]), "read back through the checksum check");
        let batches = db.changes_since(0, 10).unwrap();
        let recorded: Vec<_> = batches.iter().flat_map(|batch| &batch.changes).filter(|change| &*change.keyspace == "notes").collect();
        assert_eq!(recorded.len(), 1);
        assert_eq!(recorded[0].new.as_deref(), Some(&b"first value"[..]));
        let mut too_long = vec![0u8; 4];
        let refused = db.write(|tx| tx.insert_new_in(&notes, &[7u8; crate::store::KEY_LEN_MAX + 1], &mut too_long));
        assert!(matches!(refused, Err(crate::Error::KeySize { .. })));
        assert_eq!(too_long, [0u8; 4]);
    }
}
