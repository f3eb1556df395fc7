//! The storage core: one database file on LMDB, transactions, durability, the change feed.
//!
//! Everything tessera stores lives in one LMDB environment, in named *keyspaces* (LMDB named
//! databases). A [`Db::write`] transaction can touch any number of keyspaces and commits
//! atomically; every commit is announced once, in order, on the change feed.
//!
//! The map size is managed here: the file starts small, the map is grown before a write
//! transaction when less than a quarter of it is free (or less than four times what the last
//! transaction wrote, up to half of it), and when LMDB still reports the map full
//! the transaction is rolled back, the map grown (up to [`DbOptions::map_size_max_bytes`]) and
//! the transaction run again. That is why `write` takes an `FnMut`.
//!
//! See `docs/storage.md` for the durability guarantees and the multi-process rules.

mod change_log;
pub(crate) mod checksum;
mod cross_process;
pub(crate) mod durable_feed;
mod feed_entry;
mod group;
pub mod key;
mod migrate;
mod origins;

mod feed;
pub(crate) mod names;
mod preflight;
mod published;
pub mod structure;
mod sync;
mod txn;
mod wake;
mod warm;

pub(crate) use change_log::ChangeView;
pub use durable_feed::{CONSUMER_NAME_LEN_MAX, Consumer, FeedExtent, FeedRetention};
pub(crate) use feed::ChangeDemand;
pub use feed::{Change, ChangeBatch, ChangeKind, ChangeStream, FeedEvent, LISTENER_QUEUE_BATCHES_DEFAULT};
pub use group::GROUP_WRITES_MAX;
pub(crate) use migrate::Upgrade;
pub(crate) use published::Published;
pub use sync::Durability;
pub use txn::{Entries, KEY_LEN_MAX, ReadSource, ReadTxn, Snapshot, WriteTxn};
pub(crate) use txn::{panic_message, writing_on_this_thread};

use crate::error::{Error, Result};
use feed::Feed;
use heed::types::Bytes;
use heed::{EnvFlags, EnvOpenOptions, WithoutTls};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use sync::Syncer;

/// Version of tessera's on-disk layout, recorded in the metadata keyspace of every database.
///
/// Version 8 writes the durable feed's entries in format 2 (each keyspace named once per
/// entry, lengths as varints; `docs/storage.md`, "Durable change feed"); a file of version 7
/// is only marked, its entries of format 1 read as they are.
/// Version 7 encodes a number in an index entry with the exact rest after its `f64` part (the
/// *residual*), where versions up to 6 had the value as a saturated `i64`, which could not
/// tell integers above `i64::MAX` apart (see `docs/storage.md`, "Index entries of numbers").
/// Version 6 adds the durable change feed, which a file turns on later.
/// Version 5 places long dictionary keys by a hash keyed with a random key of the file (the
/// file's *hash key*, kept in `tessera.meta`; see `docs/storage.md`, "Long dictionary keys").
/// Version 4 stores a checksum after every value of every keyspace but `tessera.meta` (see
/// `docs/storage.md`, "Values"). Version 3 stores documents of format 3 (packed numeric
/// arrays). Version 2 stores records with their collection's shared keys (keyspace
/// `tessera.keys`) in document format 2, and may give long dictionary keys wide suffixes.
/// Files of versions 1 to 7 are migrated in one transaction when opened (values get their
/// checksums, the file gets its hash key and long dictionary keys move to their keyed hash,
/// every collection index is rebuilt), and are otherwise read as they are (records by key name or by shared key, documents of
/// formats 1 to 3); the new mark makes an older tessera refuse a file this one has written to.
///
/// ```
/// assert_eq!(tessera::store::STORAGE_FORMAT_VERSION, 8);
/// ```
pub const STORAGE_FORMAT_VERSION: u32 = 8;

/// The oldest storage format a read-only handle reads without the migration.
const READ_AS_IS_FORMAT_VERSION_MIN: u32 = 5;

/// Name of the metadata keyspace.
pub(crate) const META_KEYSPACE: &str = "tessera.meta";
/// Metadata key of the format version (u32, big-endian).
pub(crate) const META_VERSION_KEY: &[u8] = b"format_version";
/// Metadata key of the file's hash key (16 bytes, since storage format 5).
const META_HASH_KEY: &[u8] = b"hash_key";

/// A file's secret key for keyed hashes (storage format 5): 16 random bytes drawn from the OS
/// once, when the file is created or migrated, and read once when it is opened. The store
/// keeps it; modules above it key their hashes of untrusted input with it (the dictionary
/// places long keys by SipHash-1-3 keyed with it), so that nobody without the file can craft
/// keys that collide.
pub(crate) type HashKey = [u8; HASH_KEY_LEN];
/// Bytes of a [`HashKey`].
const HASH_KEY_LEN: usize = 16;

/// Prefix of keyspaces tessera keeps for itself.
const INTERNAL_PREFIX: &str = "tessera.";
/// Longest keyspace name.
///
/// ```
/// use tessera::store::KEYSPACE_NAME_LEN_MAX;
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// assert!(db.keyspace(&"k".repeat(KEYSPACE_NAME_LEN_MAX)).is_ok());
/// assert!(matches!(db.keyspace(&"k".repeat(KEYSPACE_NAME_LEN_MAX + 1)), Err(tessera::Error::InvalidName { .. })));
/// # Ok::<(), tessera::Error>(())
/// ```
pub const KEYSPACE_NAME_LEN_MAX: usize = 255;

/// How long [`Db::close`] waits for the database's own threads to let go of it (a delivery
/// under way) before it reports the other handles as [`Error::StillOpen`].
const CLOSE_WAIT_MAX: std::time::Duration = std::time::Duration::from_millis(200);

/// Most attempts [`Db::read_txn_with_keyspaces`] makes to begin a read transaction after
/// opening the keyspaces it needs, each failing only if another writer created one of them in
/// between.
const KEYSPACE_OPEN_ATTEMPTS_MAX: usize = 64;

/// Options for [`Db::open_with`]. Every field has a default; build with struct update syntax.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// use tessera::{Db, DbOptions, Durability};
/// let db = Db::open_with(dir.path().join("db"), DbOptions {
///     durability: Durability::BUFFERED,
///     map_size_max_bytes: 1 << 30,
///     ..DbOptions::default()
/// })?;
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct DbOptions {
    /// Durability of `write` unless a transaction asks for another.
    pub durability: Durability,
    /// Initial map size of a new file (an existing file's map starts at its length); the map
    /// grows as needed (see [`Db::write`]).
    pub map_size_initial_bytes: u64,
    /// Largest the map (and so the file) may grow; past it writes fail with `Error::MapFull`.
    pub map_size_max_bytes: u64,
    /// Most keyspaces (LMDB named databases) the file can hold. LMDB clears a table of this
    /// size at the start of every transaction, so each allowed keyspace costs about 1 ns per
    /// transaction: keep it near what the application needs.
    pub keyspaces_max: u32,
    /// Most concurrent read transactions, across all processes.
    pub readers_max: u32,
    /// Capacity of each change-feed listener's queue, in commits.
    pub listener_queue_batches: usize,
    /// Write through LMDB's memory map (`MDB_WRITEMAP`): a commit costs about 0.5 µs instead of
    /// 4 µs here, because pages are not copied with `write()`. The file is then as large as the
    /// map, and tessera reserves its blocks (`posix_fallocate`) whenever the map grows, so that a
    /// full disk is an error at growth time, never a `SIGBUS` while writing through the map.
    pub write_map: bool,
    /// Fault in the map's next pages on a background thread before the writer needs them (on
    /// by default; Linux with `write_map` only, elsewhere it does nothing). A commit that
    /// grows the file otherwise takes a page fault for each new page it writes: about a quarter
    /// of the time of 10,000 inserts into a new file. The thread keeps between 4 and 32 MiB
    /// past the used end faulted in (a quarter of the used size, or twice what the last commit
    /// that grew the file added), so up to that much of the
    /// page cache holds zeroed pages the file does not use yet, which the kernel writes back in
    /// its own time into blocks the file already has. It never changes what the file holds,
    /// and a durable commit does not wait for those pages. See `docs/design.md`, "Threads".
    pub warm_pages_ahead: bool,
    /// Create the file's missing parent directories. Off by default: a mistyped directory is
    /// `Error::Io` (not found) instead of a new, empty database somewhere unexpected.
    pub create_parent_dirs: bool,
    /// Check every value's checksum when it is read (on by default). Off, a damaged value may
    /// be read as different data or fail to decode; writes still store checksums, and
    /// [`Db::check`] always verifies them. Off does not make reading collection records
    /// faster: a record whose checksum was checked opens trusted in O(1), while one read
    /// unchecked is validated structurally on every read, which costs more than the checksum
    /// (see `docs/design.md`, "Trust policy").
    pub verify_checksums: bool,
    /// Walk the structure of an existing file before LMDB reads it (off by default): every
    /// page reachable from its newest commit — each B-tree's branch and leaf pages and the
    /// first page of each large value's overflow run — is read with `std::fs` and checked for
    /// what LMDB trusts (page numbers, kinds, bounds, node offsets, sizes, depths, counts; see
    /// [`structure`]). A file with such damage, which could crash the process inside LMDB, is
    /// refused with [`Error::Corrupted`] naming the keyspace and the page, and nothing is
    /// written to it.
    ///
    /// It costs one read of every used page at each open: 22 ms for a 110 MB file (500,000
    /// entries of 150 bytes and 1,000 values of 20 KB: 22,826 pages read) whose pages are in
    /// the OS cache, where the open takes 0.1 to 0.3 ms without it (release build, 2026-11-24);
    /// a read of the whole file from disk when they are not cached. It cannot
    /// cover damage that happens after the open (by another writer or the disk), nor the pages
    /// the free-page tree lists, which LMDB reuses when it writes; [`Db::check`] walks the
    /// structure of an open file at any time.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("db");
    /// # tessera::Db::open(&path)?.close()?;
    /// use tessera::{Db, DbOptions};
    /// let db = Db::open_with(&path, DbOptions { verify_structure_on_open: true, ..DbOptions::default() })?;
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub verify_structure_on_open: bool,
    /// Open an existing file for reading only (off by default): nothing is written to it,
    /// neither a migration nor the blocks a write map reserves, and [`Db::write`] fails with
    /// [`Error::ReadOnly`]. A missing file is [`Error::Io`] (not found), and a file of an older
    /// storage format, which a read-write open would migrate, is [`Error::ReadOnly`]. So are
    /// live subscriptions and [`Db::subscribe`]: such a handle sees no commit, neither its own
    /// nor another process's ([`DbOptions::cross_process_notify`] is ignored), so they would
    /// never change.
    ///
    /// **Lock file.** When the file's lock file (`PATH-lock`) exists, the read-only handle
    /// registers its readers in it, as any process does, and so reads safely while another
    /// process writes. When it does not exist (no process has opened the file read-write
    /// since it was copied or made), none is created: LMDB runs without a lock
    /// (`MDB_NOLOCK`), and a writer that opens the file meanwhile cannot see this handle's
    /// readers, so a long read may then meet pages that writer reused.
    ///
    /// A file this process has open already gives that handle, whatever this option says
    /// (see [`Db::open`]): check [`Db::is_read_only`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("db");
    /// # tessera::Db::open(&path)?.close()?;
    /// use tessera::{Db, DbOptions};
    /// let db = Db::open_with(&path, DbOptions { read_only: true, ..DbOptions::default() })?;
    /// assert!(matches!(db.write(|_| Ok(())), Err(tessera::Error::ReadOnly { .. })));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub read_only: bool,
    /// Turn the durable change feed on for this file (see [`Db::changes_since`] and
    /// [`Db::consumer`]): every commit from then on appends its changes to the keyspace
    /// `tessera.feed` in the same transaction, whichever process makes it. The mark is kept
    /// in the file, so the feed stays on for every later open; `false` leaves a file as it is.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use tessera::{Db, DbOptions};
    /// let db = Db::open_with(dir.path().join("db"), DbOptions { durable_feed: true, ..DbOptions::default() })?;
    /// assert!(db.changes_since(0, 10)?.is_empty());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub durable_feed: bool,
    /// How much of the durable feed is kept (see [`FeedRetention`]).
    pub feed_retention: FeedRetention,
    /// Deliver the commits of other processes on this file to this process's change feed and
    /// live subscriptions, in commit order with this process's own, with the same changes
    /// (old values included) as a local commit (see `docs/design.md`, "Notification across
    /// processes"). It needs the durable feed: [`Error::FeedDisabled`] at open if the file
    /// does not have it on (set [`DbOptions::durable_feed`] too). Turning it on is kept in the
    /// file, like the durable feed: from then on every process that opens the file to write
    /// behaves as if it had set the option, whatever its options say (its commits record their
    /// old values in `tessera.feed.old` and wake the other processes through the file
    /// `PATH-notify`), and a process that had the file open before finds the mark at its next
    /// write and does the same from then on. So no writer can leave the others'
    /// subscriptions with a gap ([`Error::CrossProcessGap`]) by forgetting the option; `false`
    /// leaves a file as it is. Off by default; ignored by a read-only handle.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use tessera::{Db, DbOptions};
    /// let path = dir.path().join("db");
    /// let options = DbOptions { durable_feed: true, cross_process_notify: true, ..DbOptions::default() };
    /// drop(Db::open_with(&path, options)?);
    /// // A later opener without the option: the file keeps notification on.
    /// std::fs::remove_file(dir.path().join("db-notify")).unwrap();
    /// let db = Db::open_with(&path, DbOptions::default())?;
    /// assert!(dir.path().join("db-notify").exists());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use tessera::{Db, DbOptions};
    /// let options = DbOptions { durable_feed: true, cross_process_notify: true, ..DbOptions::default() };
    /// let db = Db::open_with(dir.path().join("db"), options)?;
    /// assert!(dir.path().join("db-notify").exists());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub cross_process_notify: bool,
}

impl Default for DbOptions {
    fn default() -> Self {
        DbOptions {
            durability: Durability::Immediate,
            map_size_initial_bytes: 4 << 20,
            map_size_max_bytes: 1 << 40,
            keyspaces_max: 128,
            readers_max: 126,
            listener_queue_batches: LISTENER_QUEUE_BATCHES_DEFAULT,
            write_map: true,
            warm_pages_ahead: true,
            create_parent_dirs: false,
            verify_checksums: true,
            verify_structure_on_open: false,
            read_only: false,
            durable_feed: false,
            feed_retention: FeedRetention::default(),
            cross_process_notify: false,
        }
    }
}

impl DbOptions {
    /// Whether LMDB writes pages through the map: `write_map` on a writable handle (a read-only
    /// one maps the file read-only, reserves no disk blocks and resizes no file).
    pub(crate) fn writes_through_map(&self) -> bool {
        self.write_map && !self.read_only
    }
}

/// A database file's format, size and use ([`Db::file_info`]).
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let info = tessera::Db::open(dir.path().join("db"))?.file_info()?;
/// assert!(info.page_bytes >= 512 && info.file_bytes > 0);
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileInfo {
    /// The storage format version ([`STORAGE_FORMAT_VERSION`] once open).
    pub format_version: u32,
    /// The file's length.
    pub file_bytes: u64,
    /// Bytes the memory map spans.
    pub map_bytes: u64,
    /// Bytes of the pages in use up to the last one written (free pages inside included).
    pub used_bytes: u64,
    /// LMDB's page size.
    pub page_bytes: u64,
    /// The id of the last committed transaction.
    pub last_txn_id: u64,
    /// The file has the durable feed on ([`DbOptions::durable_feed`]): [`Db::copy_compacted`]
    /// then copies it without compaction, to keep its commits' sequences.
    pub durable_feed: bool,
}

/// A named keyspace: an ordered map from byte keys to byte values inside the database.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let sessions = db.keyspace("sessions")?;
/// db.write(|tx| tx.put(&sessions, b"s1", b"alice"))?;
/// let user = db.read(|tx| Ok(tx.get(&sessions, b"s1")?.map(<[u8]>::to_vec)))?;
/// assert_eq!(user.as_deref(), Some(&b"alice"[..]));
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Clone)]
pub struct Keyspace {
    pub(crate) name: Arc<str>,
    /// LMDB's handle: a slot number in the environment of the database `db_id` names.
    dbi: heed::Database<Bytes, Bytes>,
    /// The [`Inner::id`] of the database it was opened in.
    db_id: u64,
    /// Values carry a checksum (every keyspace but the store's own `tessera.meta`).
    pub(crate) checksummed: bool,
}

impl Keyspace {
    pub(in crate::store) fn new(inner: &Inner, name: Arc<str>, dbi: heed::Database<Bytes, Bytes>) -> Keyspace {
        let checksummed = &*name != META_KEYSPACE;
        Keyspace { name, dbi, db_id: inner.id, checksummed }
    }

    /// LMDB's handle, for a transaction of `inner`: [`Error::ForeignKeyspace`] for another
    /// database's (heed panics on another environment's transaction, and a handle of a
    /// closed one could name another keyspace in a new environment at the same address).
    #[inline]
    pub(crate) fn handle(&self, inner: &Inner) -> Result<&heed::Database<Bytes, Bytes>> {
        if self.db_id == inner.id { Ok(&self.dbi) } else { Err(self.foreign()) }
    }

    #[cold]
    fn foreign(&self) -> Error {
        Error::ForeignKeyspace { keyspace: self.name.to_string() }
    }
}

/// The next [`Inner::id`]: each database opened in this process gets its own.
static NEXT_DB_ID: AtomicU64 = AtomicU64::new(1);

impl Keyspace {
    /// The keyspace's name.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// assert_eq!(db.keyspace("sessions")?.name(), "sessions");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Keyspace({:?})", self.name)
    }
}

pub(crate) struct Inner {
    /// This database's own number in the process, which its keyspaces carry.
    pub(crate) id: u64,
    pub(crate) env: heed::Env<WithoutTls>,
    /// LMDB's page size for this file.
    pub(crate) page_bytes: u64,
    pub(crate) path: PathBuf,
    pub(crate) options: DbOptions,
    /// Serializes writers (LMDB allows one), so that environment flags can be switched per
    /// transaction and the map resized between transactions.
    pub(crate) writer: Mutex<()>,
    /// Grouped writes waiting for a transaction ([`Db::write_grouped`]).
    groups: group::GroupQueue,
    /// Entered by every read transaction and closed while the map is resized: LMDB requires
    /// that no transaction of this process is open during a resize.
    /// Shared with the flush, which enters it (see `ResizeGate::while_entered`).
    pub(crate) resize_gate: Arc<txn::ResizeGate>,
    /// The read transaction kept for reuse by reads through the `Db`.
    pub(crate) snapshot_cache: txn::SnapshotCache,
    keyspaces: Mutex<HashMap<Arc<str>, Keyspace>>,
    pub(crate) feed: Arc<Feed>,
    pub(crate) syncer: Arc<Syncer>,
    sync_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// When a writer next clears dead processes' reader slots (`txn::clear_stale_readers`).
    pub(crate) stale_reader_check_due: Mutex<std::time::Instant>,
    /// Bytes (keys and values) the last committed transaction wrote: the map grows ahead when
    /// less than four times that (at most half the map) is free (`txn::grow_ahead`).
    pub(crate) last_written_bytes: AtomicU64,
    /// The thread that faults in the map's next pages ([`DbOptions::warm_pages_ahead`]).
    pub(crate) warmer: std::sync::OnceLock<Arc<warm::Warmer>>,
    /// State that modules above the store share per database (one dictionary cache per name),
    /// held weakly so that it goes when its last handle does.
    shared_state: Mutex<HashMap<String, std::sync::Weak<dyn std::any::Any + Send + Sync>>>,
    /// Held while a shared state is created (see `Db::shared_state_or`).
    opening: Mutex<()>,
    /// Flushes still to fail on purpose ([`Db::inject_flush_failures`]).
    injected_flush_failures: Arc<AtomicU32>,
    /// A simulated disk ([`Db::inject_free_bytes`]): the most bytes the file may have, or
    /// `u64::MAX` for the real disk.
    pub(crate) simulated_disk_bytes: std::sync::atomic::AtomicU64,
    /// The file's hash key, read (or drawn, for a new or migrated file) once at open.
    hash_key: std::sync::OnceLock<HashKey>,
    /// The durable change feed's state in this process.
    pub(crate) feed_state: durable_feed::FeedState,
    /// Which commits this process made (see [`origins`]).
    pub(crate) origins: origins::CommitOrigins,
    /// Notification across processes, when [`DbOptions::cross_process_notify`] is on.
    pub(crate) cross_process: std::sync::OnceLock<Arc<cross_process::CrossProcess>>,
    /// This process's claim on the file; the last field, so released after the environment
    /// is closed.
    claim: FileClaim,
}

impl Inner {
    /// LMDB's figures for the environment (map size, last page, last transaction), read inside
    /// the resize gate: `mdb_env_info` reads the meta pages through the map, which a resize on
    /// another thread unmaps (`file_info`, `map_size_bytes` and the cross-process thread crashed
    /// with SIGSEGV while a writer grew the map). Not for a thread inside a resize, or one
    /// holding the writer lock (no resize of this process runs then, and the gate may be shut).
    pub(crate) fn env_info_gated(&self) -> heed::EnvInfo {
        self.resize_gate.while_entered(|| self.env.info())
    }
}

/// An open database: cheap to clone, `Send` and `Sync`.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("app.tessera"))?;
/// let notes = db.keyspace("notes")?;
/// db.write(|tx| tx.put(&notes, b"greeting", b"hello"))?;
/// let value = db.read(|tx| Ok(tx.get(&notes, b"greeting")?.map(<[u8]>::to_vec)))?;
/// assert_eq!(value.as_deref(), Some(&b"hello"[..]));
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Clone)]
pub struct Db {
    pub(in crate::store) inner: Arc<Inner>,
}

/// A [`Db`] that does not keep the database open (see [`Db::downgrade`]).
#[derive(Clone)]
pub(crate) struct WeakDb(std::sync::Weak<Inner>);

impl WeakDb {
    /// The database, if it is still open.
    pub(crate) fn upgrade(&self) -> Option<Db> {
        self.0.upgrade().map(|inner| Db { inner })
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Db {
    /// Opens the database at `path` (one file, plus `path-lock`), creating it if missing. A
    /// file this process has open already (by any name) gives the same database.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("app.tessera");
    /// let db = tessera::Db::open(&path)?;
    /// let again = tessera::Db::open(&path)?; // the same database
    /// let ks = db.keyspace("ks")?;
    /// db.write(|tx| tx.put(&ks, b"k", b"v"))?;
    /// assert!(again.read(|tx| Ok(tx.get(&again.keyspace("ks")?, b"k")?.is_some()))?);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Db> {
        Db::open_with(path, DbOptions::default())
    }

    /// Opens the database with options.
    ///
    /// ```
    /// use tessera::{Db, DbOptions, Durability};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let options = DbOptions { durability: Durability::Immediate, ..DbOptions::default() };
    /// let db = Db::open_with(dir.path().join("db"), options)?;
    /// assert!(!db.is_read_only());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn open_with(path: impl AsRef<Path>, options: DbOptions) -> Result<Db> {
        // heed resolves the file's directory, which a bare relative file name does not have.
        let path = std::path::absolute(path.as_ref())?;
        let deadline = std::time::Instant::now() + CLOSING_WAIT_MAX;
        loop {
            // Held across the whole open, so that two threads opening one file (by one name or
            // two) cannot both open it.
            let mut open_files = lock(&OPEN_FILES);
            if let Some(identity) = FileIdentity::of(&path) {
                match open_files.get(&identity).map(std::sync::Weak::upgrade) {
                    // Open in this process already: the same database, shared.
                    Some(Some(inner)) => return Ok(Db { inner }),
                    // Its last handle is being dropped: wait until it is closed.
                    Some(None) => {
                        drop(open_files);
                        if std::time::Instant::now() >= deadline {
                            return Err(Error::AlreadyOpen(path));
                        }
                        std::thread::sleep(Duration::from_millis(1));
                        continue;
                    }
                    None => {}
                }
            }
            let lock_file = lock_file_of(&path);
            let lock_existed = lock_file.exists();
            let opened = Db::open_file(path.clone(), options.clone());
            let db = match opened {
                Ok(db) => db,
                Err(error) => {
                    drop(open_files);
                    // Leave nothing beside a file that is not ours: the environment is closed
                    // (open_file dropped it), and the lock file is LMDB's, made by this open.
                    let refused = matches!(error, Error::NotADatabase { .. } | Error::ForeignDatabase { .. } | Error::Corrupted(_));
                    if !lock_existed && refused {
                        let _ = std::fs::remove_file(&lock_file);
                    }
                    return Err(error);
                }
            };
            if let Some(identity) = FileIdentity::of(&path) {
                open_files.insert(identity, Arc::downgrade(&db.inner));
                // Only a registered database removes itself when it closes.
                let _ = db.inner.claim.set(identity);
            }
            return Ok(db);
        }
    }

    /// Opens the environment, starts the database's threads and checks the version.
    fn open_file(path: PathBuf, options: DbOptions) -> Result<Db> {
        // Held until LMDB has set the file's length: no other process resizes in between.
        let resizes = txn::ResizeAcrossProcesses::lock_path(&path, &options)?;
        // Before LMDB touches the file: it would extend a truncated one (see `preflight`).
        let file = preflight::check(&path, options.verify_structure_on_open)?;
        let new_file = file == preflight::FileState::New;
        if new_file && options.read_only {
            // Nothing to read, and nothing may be created.
            return Err(Error::Io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{}: no database file to open read-only", path.display()),
            )));
        }
        let env = open_env(&path, &options, file)?;
        drop(resizes);
        let flush_env = env.clone();
        let injected_flush_failures = Arc::new(AtomicU32::new(0));
        let failures = injected_flush_failures.clone();
        let resize_gate = Arc::new(txn::ResizeGate::default());
        let flush_gate = resize_gate.clone();
        let flush = move || {
            let injected = failures.fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| left.checked_sub(1)).is_ok();
            if injected {
                return Err("injected flush failure (a test asked for it)".to_owned());
            }
            flush_gate.while_entered(|| flush_env.force_sync()).map_err(|e| e.to_string())
        };
        let (syncer, sync_thread) = Syncer::start(Box::new(flush))?;
        let options_feed_retention = options.feed_retention;
        let inner = Arc::new(Inner {
            id: NEXT_DB_ID.fetch_add(1, Ordering::Relaxed),
            page_bytes: u64::from(env.stat().page_size),
            env,
            path,
            feed: Feed::start(options.listener_queue_batches)?,
            options,
            writer: Mutex::new(()),
            groups: group::GroupQueue::default(),
            resize_gate,
            snapshot_cache: txn::SnapshotCache::default(),
            keyspaces: Mutex::new(HashMap::new()),
            syncer,
            sync_thread: Mutex::new(Some(sync_thread)),
            stale_reader_check_due: Mutex::new(std::time::Instant::now()),
            last_written_bytes: AtomicU64::new(0),
            warmer: std::sync::OnceLock::new(),
            shared_state: Mutex::new(HashMap::new()),
            opening: Mutex::new(()),
            injected_flush_failures,
            simulated_disk_bytes: std::sync::atomic::AtomicU64::new(u64::MAX),
            hash_key: std::sync::OnceLock::new(),
            feed_state: durable_feed::FeedState::new(options_feed_retention),
            origins: origins::CommitOrigins::default(),
            cross_process: std::sync::OnceLock::new(),
            claim: FileClaim::default(),
        });
        let db = Db { inner };
        if db.inner.options.read_only {
            db.check_version_read_only()?;
        } else if new_file {
            // Blocks first: the version record is then written into reserved space.
            txn::reserve_file(&db.inner)?;
            db.check_or_write_version()?;
        } else {
            // The version first: a foreign file is refused before any block is reserved for it.
            db.check_or_write_version()?;
            txn::reserve_file(&db.inner)?;
        }
        durable_feed::open(&db)?;
        txn::start_warmer(&db.inner)?;
        // On when this opener asks, or when the file has it on (see `durable_feed`).
        if durable_feed::notify_at_open(&db) && !db.inner.options.read_only {
            let started = cross_process::CrossProcess::start(&db)?;
            assert!(db.inner.cross_process.set(started).is_ok(), "started once, at open");
        }
        Ok(db)
    }

    /// The file's path.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// assert_eq!(db.path(), dir.path().join("db"));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Whether this handle was opened with [`DbOptions::read_only`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// assert!(!db.is_read_only());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn is_read_only(&self) -> bool {
        self.inner.options.read_only
    }

    /// [`Db::check_or_write_version`] for a read-only handle: the file must be of the current
    /// storage format (an older one needs the migration a read-write open runs).
    fn check_version_read_only(&self) -> Result<()> {
        self.open_keyspaces_read_only()?;
        let meta = self.existing_keyspace_committed(META_KEYSPACE)?;
        let (version, hash_key) = match &meta {
            Some(meta) => self.read(|tx| {
                let version = tx.get(meta, META_VERSION_KEY)?.map(<[u8]>::to_vec);
                Ok((version, tx.get(meta, META_HASH_KEY)?.map(<[u8]>::to_vec)))
            })?,
            None => (None, None),
        };
        let Some(version) = version else {
            return Err(Error::ForeignDatabase { path: self.inner.path.clone() });
        };
        let found = version_of(Some(&version))?;
        if found > STORAGE_FORMAT_VERSION {
            return Err(Error::UnsupportedVersion { found, supported: STORAGE_FORMAT_VERSION });
        }
        // Format 6 only adds the durable feed, which a file of format 5 does not have on, and
        // format 7 only changes number components of index entries, which a read-only handle
        // never reads for a query (a typed collection, the one kind that uses indexes, opens
        // in a write transaction; a dynamic one scans) and `Db::check` reads as the file's
        // format wrote them: files of format 5 and 6 read as they are. Older ones need the
        // migration a read-write open runs.
        if found < READ_AS_IS_FORMAT_VERSION_MIN {
            return Err(Error::ReadOnly {
                path: self.inner.path.clone(),
                refused: format!("migrating storage format {found} to {STORAGE_FORMAT_VERSION}, which a read-write open does"),
            });
        }
        let hash_key = hash_key_of(hash_key.as_deref())?;
        assert!(self.inner.hash_key.set(hash_key).is_ok(), "a file's hash key is read once, when it is opened");
        Ok(())
    }

    /// Opens every keyspace of a read-only file, in one read transaction that is committed
    /// so that the handles stay valid (LMDB closes the handles a read transaction opened when
    /// it is aborted), before any other read begins: a transaction knows only the handles
    /// opened before it began (a later one is EINVAL, or reads another tree). A read-only
    /// handle therefore sees the keyspaces the file had when it was opened.
    fn open_keyspaces_read_only(&self) -> Result<()> {
        assert!(self.inner.options.read_only, "only a read-only handle opens every keyspace at once");
        let ceiling = self.inner.options.map_size_max_bytes;
        let error = |e| Error::from_heed(e, ceiling);
        let txn = self.inner.env.read_txn().map_err(error)?;
        let mut names = Vec::new();
        let main: Option<heed::Database<Bytes, Bytes>> = self.inner.env.open_database(&txn, None).map_err(error)?;
        if let Some(main) = main {
            for entry in main.iter(&txn).map_err(error)? {
                let (name, _) = entry.map_err(error)?;
                names.push(String::from_utf8_lossy(name).into_owned());
            }
        }
        let mut opened = Vec::with_capacity(names.len());
        for name in names {
            if names::check("keyspace", &name, KEYSPACE_NAME_LEN_MAX).is_err() {
                continue;
            }
            if let Some(handle) = self.existing_handle(self.inner.env.open_database(&txn, Some(&name)), error)? {
                opened.push((name, handle));
            }
        }
        txn.commit().map_err(error)?;
        let mut keyspaces = lock(&self.inner.keyspaces);
        for (name, handle) in opened {
            let name: Arc<str> = name.into();
            keyspaces.insert(name.clone(), Keyspace::new(&self.inner, name, handle));
        }
        Ok(())
    }

    /// The keyspace `name` of a read-only handle, if the file had it when it was opened.
    fn existing_keyspace_committed(&self, name: &str) -> Result<Option<Keyspace>> {
        Ok(lock(&self.inner.keyspaces).get(name).cloned())
    }

    /// What [`Db::file_info`] reports: the file's format, size and use.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let info = db.file_info()?;
    /// assert_eq!(info.format_version, tessera::store::STORAGE_FORMAT_VERSION);
    /// assert!(info.used_bytes <= info.map_bytes);
    /// assert!(!info.durable_feed, "off unless a DbOptions turned it on");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn file_info(&self) -> Result<FileInfo> {
        // Read first: a read adopts a map another process has grown, so that LMDB's figures
        // below are of that map (read before it, the map's size was the old one's and the pages
        // used the new one's: `used_bytes` above `map_bytes`).
        let format_version = self.stored_format_version()?;
        let info = self.inner.env_info_gated();
        let file_bytes = std::fs::metadata(&self.inner.path)?.len();
        let used_pages = info.last_page_number as u64 + 1;
        Ok(FileInfo {
            format_version,
            file_bytes,
            map_bytes: info.map_size as u64,
            used_bytes: used_pages * self.inner.page_bytes,
            page_bytes: self.inner.page_bytes,
            last_txn_id: info.last_txn_id as u64,
            durable_feed: durable_feed::marked(self)?,
        })
    }

    /// The storage format the file is marked with: [`STORAGE_FORMAT_VERSION`] once a
    /// read-write handle has opened it; as recorded for a read-only one, which reads a file of
    /// format 5 or 6 without migrating it.
    pub(crate) fn stored_format_version(&self) -> Result<u32> {
        self.read(|tx| self.format_version_in(tx))
    }

    /// [`Db::stored_format_version`] as `snapshot` sees it.
    pub(crate) fn format_version_in(&self, snapshot: &dyn Snapshot) -> Result<u32> {
        let meta = self.internal_keyspace(META_KEYSPACE)?;
        version_of(snapshot.get_value(&meta, META_VERSION_KEY)?)
    }

    /// Writes a consistent, compacted copy of the database to `destination`, which must not
    /// exist: LMDB copies one snapshot, leaving out free pages, while other threads and
    /// processes keep reading and writing. Works on a read-only handle. Returns the copy's
    /// size in bytes. [`Error::WouldDeadlock`] inside a write transaction of this thread.
    ///
    /// A file with the durable feed on ([`DbOptions::durable_feed`]) is copied page by page,
    /// free pages included: LMDB's compacting copy numbers the copy's transactions from 1
    /// again, and the copy's commits would have sequences below those its feed entries and
    /// consumers' cursors keep, so that readers would never see them.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let notes = db.keyspace("notes")?;
    /// db.write(|tx| tx.put(&notes, b"k", b"v"))?;
    /// let copy = dir.path().join("copy");
    /// assert!(db.copy_compacted(&copy)? > 0);
    /// let copied = tessera::Db::open(&copy)?;
    /// let notes = copied.keyspace("notes")?;
    /// assert_eq!(copied.read(|tx| Ok(tx.get(&notes, b"k")?.map(<[u8]>::to_vec)))?, Some(b"v".to_vec()));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn copy_compacted(&self, destination: &Path) -> Result<u64> {
        if txn::writing_on_this_thread() {
            // LMDB's copy takes the writer lock to read the meta pages (a page-by-page copy), and
            // this thread holds it: it waited for itself forever, and so did every writer.
            return Err(Error::WouldDeadlock { operation: "copying the database", advice: "copy outside the write transaction" });
        }
        let feed_on = durable_feed::marked(self)?;
        let compaction = if feed_on { heed::CompactionOption::Disabled } else { heed::CompactionOption::Enabled };
        let copied = self.copy_to(destination, compaction)?;
        // Another process may have turned the feed on while the copy was made: its mark, once
        // written, stays, so a file without it now had none in the copied snapshot.
        if !feed_on && durable_feed::marked(self)? {
            std::fs::remove_file(destination)?;
            return self.copy_to(destination, heed::CompactionOption::Disabled);
        }
        Ok(copied)
    }

    /// [`Db::copy_compacted`] with LMDB's `compaction`: the copy's size in bytes.
    fn copy_to(&self, destination: &Path, compaction: heed::CompactionOption) -> Result<u64> {
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(destination)?;
        // Inside the resize gate, as a read transaction: the copy reads every page through the
        // map, which a resize on another thread unmaps (a copy beside a growing writer crashed
        // with SIGSEGV, or failed with EFAULT where `write` was handed an unmapped page).
        let copied = self.inner.resize_gate.while_entered(|| self.inner.env.copy_to_file(&mut file, compaction));
        if let Err(error) = copied {
            drop(file);
            let _ = std::fs::remove_file(destination);
            return Err(Error::from_heed(error, self.inner.options.map_size_max_bytes));
        }
        file.sync_all()?;
        Ok(file.metadata()?.len())
    }

    /// Checks the format version of an existing database, migrating a file of an older format
    /// (`migrate`), or records it in a new one; then keeps the file's hash key.
    fn check_or_write_version(&self) -> Result<()> {
        let ceiling = self.inner.options.map_size_max_bytes;
        let env = &self.inner.env;
        let (has_entries, version, hash_key) = {
            // A read transaction of its own, committed below so that the handle of
            // `tessera.meta` stays valid: LMDB closes a handle a read transaction opened when
            // that transaction is aborted, and meanwhile may give its slot to a writer's new
            // keyspace (see `open_existing_keyspaces`). Nothing else uses this environment
            // before the open returns, and a write transaction would grow a foreign file.
            let read = env.read_txn().map_err(|e| Error::from_heed(e, ceiling))?;
            let txn = &read;
            let main: Option<heed::Database<Bytes, Bytes>> = env.open_database(txn, None).map_err(|e| Error::from_heed(e, ceiling))?;
            // Entries other than `tessera.meta`: another process opening a new file at once
            // creates that keyspace in one commit and writes the version in the next, and a
            // file with only that keyspace, empty, is such a file, not a foreign one (it was
            // refused as foreign, 2 to 4 times in 28 paired opens).
            let has_entries = match main {
                Some(main) => {
                    let mut other = false;
                    for entry in main.iter(txn).map_err(|e| Error::from_heed(e, ceiling))? {
                        let (name, _) = entry.map_err(|e| Error::from_heed(e, ceiling))?;
                        if name != META_KEYSPACE.as_bytes() {
                            other = true;
                            break;
                        }
                    }
                    other
                }
                None => false,
            };
            let meta: Option<heed::Database<Bytes, Bytes>> =
                env.open_database(txn, Some(META_KEYSPACE)).map_err(|e| Error::from_heed(e, ceiling))?;
            let read_meta = |key: &[u8]| match meta {
                Some(meta) => meta.get(txn, key).map(|value| value.map(<[u8]>::to_vec)).map_err(|e| Error::from_heed(e, ceiling)),
                None => Ok(None),
            };
            let found = (has_entries, read_meta(META_VERSION_KEY)?, read_meta(META_HASH_KEY)?);
            read.commit().map_err(|e| Error::from_heed(e, ceiling))?;
            if let Some(meta) = meta {
                let name: Arc<str> = META_KEYSPACE.into();
                lock(&self.inner.keyspaces).entry(name.clone()).or_insert_with(|| Keyspace::new(&self.inner, name, meta));
            }
            found
        };
        let hash_key = match (has_entries, version) {
            (_, Some(version)) => {
                let found = version_of(Some(&version))?;
                if found > STORAGE_FORMAT_VERSION {
                    return Err(Error::UnsupportedVersion { found, supported: STORAGE_FORMAT_VERSION });
                }
                if found < STORAGE_FORMAT_VERSION {
                    // Values gain their checksums and long dictionary keys their keyed hash;
                    // older record layouts are read as they are, and the new mark keeps older
                    // tessera out.
                    migrate::upgrade(self, &self.keyspace_names()?)?
                } else {
                    hash_key_of(hash_key.as_deref())?
                }
            }
            (true, None) => return Err(Error::ForeignDatabase { path: self.inner.path.clone() }),
            (false, None) => {
                let meta = self.internal_keyspace(META_KEYSPACE)?;
                let hash_key = migrate::new_hash_key()?;
                let created = self.write_with(Durability::Immediate, |tx| {
                    if tx.get(&meta, META_VERSION_KEY)?.is_some() {
                        return Ok(false); // another process created it meanwhile
                    }
                    tx.put(&meta, META_VERSION_KEY, &STORAGE_FORMAT_VERSION.to_be_bytes())?;
                    tx.put(&meta, META_HASH_KEY, &hash_key)?;
                    Ok(true)
                })?;
                if !created {
                    // Its hash key is the file's: read it as any existing file's.
                    return self.check_or_write_version();
                }
                hash_key
            }
        };
        assert!(self.inner.hash_key.set(hash_key).is_ok(), "a file's hash key is read once, when it is opened");
        Ok(())
    }

    /// The file's hash key ([`HashKey`]): modules above the store key their hashes of untrusted
    /// input with it.
    pub(crate) fn hash_key(&self) -> &HashKey {
        self.inner.hash_key.get().expect("read when the file was opened")
    }

    /// The keyspace `name`, created if missing. A name is 1 to [`KEYSPACE_NAME_LEN_MAX`] bytes
    /// without NUL, and names starting with `tessera.` are reserved: anything else is
    /// [`Error::InvalidName`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// assert!(db.keyspace("notes").is_ok());
    /// for bad in ["", "a\0b", "tessera.meta"] {
    ///     assert!(matches!(db.keyspace(bad), Err(tessera::Error::InvalidName { what: "keyspace", .. })));
    /// }
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn keyspace(&self, name: &str) -> Result<Keyspace> {
        names::check("keyspace", name, KEYSPACE_NAME_LEN_MAX)?;
        if name.starts_with(INTERNAL_PREFIX) {
            return Err(Error::InvalidName {
                what: "keyspace",
                name: name.to_owned(),
                rule: format!("not starting with {INTERNAL_PREFIX:?}"),
            });
        }
        self.internal_keyspace(name)
    }

    /// The names of every keyspace in the file, tessera's own included (LMDB lists named
    /// databases as the keys of its main database).
    pub(crate) fn keyspace_names(&self) -> Result<Vec<String>> {
        let ceiling = self.inner.options.map_size_max_bytes;
        let txn = self.read_txn()?;
        let main: Option<heed::Database<Bytes, Bytes>> =
            self.inner.env.open_database(txn.raw(), None).map_err(|e| Error::from_heed(e, ceiling))?;
        let Some(main) = main else { return Ok(Vec::new()) };
        let mut names = Vec::new();
        for entry in main.iter(txn.raw()).map_err(|e| Error::from_heed(e, ceiling))? {
            let (name, _) = entry.map_err(|e| Error::from_heed(e, ceiling))?;
            names.push(String::from_utf8_lossy(name).into_owned());
        }
        Ok(names)
    }

    /// Opens the handles of the keyspaces among `names` that the file holds and this handle
    /// has not opened yet, in one write transaction that creates nothing, and keeps them.
    ///
    /// A handle is only ever opened in a write transaction, where the writer lock orders every
    /// open of this process: LMDB keeps a handle opened in a read transaction only until that
    /// transaction ends, and meanwhile gives its slot to a writer that creates a keyspace, so
    /// the reader's end would close the new keyspace's handle, and the next keyspace created
    /// would take its slot: the first keyspace's handle then read and wrote the other's tree
    /// (found by the review of the store core, with `Db::check` running beside a
    /// `Db::keyspace`). A read-only handle opened every keyspace with the file.
    pub(crate) fn open_existing_keyspaces<'n>(&self, names: impl IntoIterator<Item = &'n str>) -> Result<()> {
        if self.inner.options.read_only {
            return Ok(());
        }
        let unopened: Vec<Arc<str>> = {
            let keyspaces = lock(&self.inner.keyspaces);
            let valid = |name: &str| names::check("keyspace", name, KEYSPACE_NAME_LEN_MAX).is_ok();
            names.into_iter().filter(|name| valid(name) && !keyspaces.contains_key(*name)).map(Arc::from).collect()
        };
        if unopened.is_empty() {
            return Ok(());
        }
        let mut opened = Vec::with_capacity(unopened.len());
        // Nothing is written: no flush is waited for.
        self.write_with(Durability::BUFFERED, |tx| {
            opened.clear(); // a closure run again opens again (an aborted attempt closed them)
            for name in &unopened {
                let opened_now = self.inner.env.open_database(tx.raw(), Some(name));
                if let Some(handle) = self.existing_handle(opened_now, |other| tx.note_error(other))? {
                    opened.push((name.clone(), handle));
                }
            }
            Ok(())
        })?;
        let mut keyspaces = lock(&self.inner.keyspaces);
        for (name, handle) in opened {
            keyspaces.entry(name.clone()).or_insert_with(|| Keyspace::new(&self.inner, name, handle));
        }
        Ok(())
    }

    /// `open_database`'s answer for a keyspace the file may hold: `None` when it is missing, or
    /// when its main-tree entry is not a keyspace (damage); [`Error::TooManyKeyspaces`] when
    /// LMDB has no handle slot left; any other failure through `other`.
    fn existing_handle(
        &self,
        opened: heed::Result<Option<heed::Database<Bytes, Bytes>>>,
        other: impl FnOnce(heed::Error) -> Error,
    ) -> Result<Option<heed::Database<Bytes, Bytes>>> {
        match opened {
            Ok(handle) => Ok(handle),
            Err(heed::Error::Mdb(heed::MdbError::Incompatible)) => Ok(None),
            Err(heed::Error::Mdb(heed::MdbError::DbsFull)) => Err(Error::TooManyKeyspaces(self.inner.options.keyspaces_max)),
            Err(error) => Err(other(error)),
        }
    }

    /// A read transaction in which each keyspace among `names` that it sees is open: read
    /// them with [`Db::opened_keyspace`]. A keyspace created between the open and the
    /// transaction's start (by another thread or process) is opened in another attempt.
    pub(crate) fn read_txn_with_keyspaces(&self, names: &[&str]) -> Result<ReadTxn<'_>> {
        for _ in 0..KEYSPACE_OPEN_ATTEMPTS_MAX {
            self.open_existing_keyspaces(names.iter().copied())?;
            let txn = self.read_txn()?;
            if self.unopened_keyspace(&txn, names.iter().copied())?.is_none() {
                return Ok(txn);
            }
        }
        Err(Error::LimitExceeded { what: "attempts to open keyspaces that others keep creating", limit: KEYSPACE_OPEN_ATTEMPTS_MAX as u64 })
    }

    /// The first of `names` that `txn` sees in the file but this handle has not opened, if
    /// any (a name that cannot be a keyspace's is passed over, as it cannot be opened).
    pub(crate) fn unopened_keyspace<'n>(&self, txn: &ReadTxn<'_>, names: impl IntoIterator<Item = &'n str>) -> Result<Option<&'n str>> {
        if self.inner.options.read_only {
            return Ok(None); // what it did not open with the file, it never sees
        }
        let ceiling = self.inner.options.map_size_max_bytes;
        let mut main = None;
        for name in names {
            if names::check("keyspace", name, KEYSPACE_NAME_LEN_MAX).is_err() || lock(&self.inner.keyspaces).contains_key(name) {
                continue;
            }
            // The main tree needs no handle of its own: LMDB gives it without a slot.
            if main.is_none() {
                let opened: Option<heed::Database<Bytes, Bytes>> =
                    self.inner.env.open_database(txn.raw(), None).map_err(|e| Error::from_heed(e, ceiling))?;
                let Some(opened) = opened else { return Ok(None) };
                main = Some(opened);
            }
            let main = main.as_ref().expect("opened above");
            if main.get(txn.raw(), name.as_bytes()).map_err(|e| Error::from_heed(e, ceiling))?.is_some() {
                return Ok(Some(name));
            }
        }
        Ok(None)
    }

    /// The keyspace `name` if this handle has opened it ([`Db::open_existing_keyspaces`]):
    /// in a transaction that [`Db::read_txn_with_keyspaces`] began with the name, `None`
    /// means the file has no such keyspace.
    pub(crate) fn opened_keyspace(&self, name: &str) -> Option<Keyspace> {
        lock(&self.inner.keyspaces).get(name).cloned()
    }

    /// A keyspace for tessera's own modules (no name restriction).
    pub(crate) fn internal_keyspace(&self, name: &str) -> Result<Keyspace> {
        // LMDB takes names as C strings: a NUL byte would panic inside heed.
        names::check("keyspace", name, KEYSPACE_NAME_LEN_MAX)?;
        if self.inner.options.read_only {
            return self
                .existing_keyspace_committed(name)?
                .ok_or_else(|| Error::ReadOnly { path: self.inner.path.clone(), refused: format!("creating keyspace {name:?}") });
        }
        if let Some(keyspace) = lock(&self.inner.keyspaces).get(name) {
            return Ok(keyspace.clone());
        }
        let name: Arc<str> = name.into();
        let mut created = None;
        self.write_with(Durability::Immediate, |tx| {
            let handle = self.inner.env.create_database(tx.raw(), Some(&name)).map_err(|error| match error {
                heed::Error::Mdb(heed::MdbError::DbsFull) => Error::TooManyKeyspaces(self.inner.options.keyspaces_max),
                other => tx.note_error(other),
            })?;
            created = Some(handle);
            Ok(())
        })?;
        let handle = created.expect("the write closure ran and committed");
        let keyspace = Keyspace::new(&self.inner, name.clone(), handle);
        lock(&self.inner.keyspaces).insert(name, keyspace.clone());
        Ok(keyspace)
    }

    /// Runs `read` on a consistent snapshot (MVCC: writers are never blocked).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ks = db.keyspace("ks")?;
    /// db.write(|tx| { tx.put(&ks, b"a", b"1")?; tx.put(&ks, b"b", b"2") })?;
    /// let count = db.read(|tx| Ok(tx.range(&ks, &b"a"[..]..&b"z"[..])?.count()))?;
    /// assert_eq!(count, 2);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn read<T>(&self, read: impl FnOnce(&ReadTxn<'_>) -> Result<T>) -> Result<T> {
        let txn = txn::ReadTxn::begin(&self.inner)?;
        read(&txn)
    }

    /// Opens a read transaction on the newest commit; it may be moved to another thread.
    /// Long-lived read transactions keep old pages alive (the file grows) and delay map
    /// resizes: keep them short. While no commit intervenes, the database reuses one LMDB
    /// transaction for its reads: a dropped `ReadTxn` is handed back, and the next one takes it
    /// instead of beginning another (which costs a 6 KB allocation and LMDB's reader-table
    /// lock), with the same snapshot a new one would have.
    ///
    /// While a thread holds a read transaction, another read or a write on that thread that
    /// needs a larger map than this process has (another process grew the file since, or the
    /// write must grow it) is [`Error::GrowthBlocked`]: LMDB moves a map only when no
    /// transaction of the process is open, and this thread's own would then wait forever.
    /// Drop it and read again.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ks = db.keyspace("ks")?;
    /// db.write(|tx| tx.put(&ks, b"k", b"old"))?;
    /// let snapshot = db.read_txn()?;
    /// db.write(|tx| tx.put(&ks, b"k", b"new"))?;
    /// assert_eq!(snapshot.get(&ks, b"k")?, Some(&b"old"[..]), "a snapshot does not move");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn read_txn(&self) -> Result<ReadTxn<'_>> {
        ReadTxn::begin(&self.inner)
    }

    /// Runs `write` in a transaction with the database's default durability: commits when it
    /// returns `Ok`, rolls back when it returns `Err` or panics. A panic is caught and
    /// returned as [`Error::Panicked`] with its message.
    ///
    /// `write` may run more than once, and only for one reason: the transaction needed more
    /// room than the map had free. It is then rolled back, the map grown (by 4x below 64 MiB,
    /// 2x above, and always to at least 8 times the bytes the failed attempt had written
    /// beyond what is in use) and `write` called again.
    ///
    /// Exactly when: before the transaction starts, the map is grown if less than a quarter of
    /// it is free, or less than four times the bytes (keys and values) the previous
    /// transaction wrote (but at most half the map). A transaction runs again only if the
    /// pages it changes need more room than the map had free when it started, or if growing
    /// ahead was skipped (a read transaction of this process was open, the map was at its
    /// ceiling, or the disk was short), or if its commit found the map full. The room a
    /// transaction needs is its pages, not its bytes: LMDB copies each page a write touches,
    /// so one that writes less than that quarter runs once when its writes share pages (an
    /// import; a rewrite of every record after an import of them, which the four-times rule
    /// covers), but one that changes a small value in each of many pages needs a page for each
    /// change and may run twice. A large import almost always runs twice, never more often than
    /// the map must grow. The map starts at [`DbOptions::map_size_initial_bytes`] (4 MiB by
    /// default).
    ///
    /// Inside the closure, read through `tx` to see its own writes: a read through the `Db`
    /// ([`Db::read`], or a collection's `get(&db, …)`) sees the last commit, without them.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ks = db.keyspace("ks")?;
    /// let mut runs = 0;
    /// for batch in 0u32..100 {
    ///     db.write(|tx| {
    ///         runs += 1; // side effects outside `tx` may happen once per run
    ///         (0..50u32).try_for_each(|i| tx.put(&ks, &(batch * 50 + i).to_be_bytes(), &[0; 100]))
    ///     })?;
    /// }
    /// assert_eq!(runs, 100, "small transactions run once");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn write<T>(&self, write: impl FnMut(&mut WriteTxn<'_>) -> Result<T>) -> Result<T> {
        self.write_with(self.inner.options.durability, write)
    }

    /// [`Db::write`] with the given durability for this transaction.
    ///
    /// ```
    /// use tessera::Durability;
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ks = db.keyspace("payments")?;
    /// db.write_with(Durability::Immediate, |tx| tx.put(&ks, b"p1", b"paid"))?; // on disk before it returns
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn write_with<T>(&self, durability: Durability, write: impl FnMut(&mut WriteTxn<'_>) -> Result<T>) -> Result<T> {
        if self.inner.options.read_only {
            return Err(Error::ReadOnly { path: self.inner.path.clone(), refused: "a write transaction".to_owned() });
        }
        txn::run_write(&self.inner, durability, write)
    }

    /// [`Db::write`] for many threads that each commit a little: closures that callers of
    /// `write_grouped` queue together run one after another in one transaction, which is
    /// committed and flushed once for all of them, with the database's default durability.
    /// Each caller gets its own closure's outcome once the group has committed (and, for
    /// `Immediate` durability, been flushed). With `Immediate` durability every commit pays
    /// flushes to stable storage; grouping shares them, so several writer threads make many
    /// more durable commits per second than with `write` (the `commit` table in the README).
    ///
    /// What differs from [`Db::write`]:
    /// - The closure may run on another caller's thread, so it is `Send + 'static` (move what
    ///   it needs into it; handles such as [`Keyspace`] and collections are cheap to clone),
    ///   and so is its value.
    /// - It sees the writes of the closures queued before it in its group, and the group
    ///   commits as one: [`WriteTxn::sequence`] is the same for all of them, and subscribers
    ///   get one change batch.
    /// - A closure that returns `Err` or panics rolls the transaction back; its caller gets
    ///   that error, and the rest of the group runs again in a new transaction without it. So
    ///   besides the reasons given for [`Db::write`], a closure can run again because another
    ///   closure of its group failed. If the transaction itself fails, each closure runs again
    ///   alone, for its own outcome. If the commit was made but could not be flushed, every
    ///   caller of the group gets [`Error::NotDurable`].
    /// - The map filling up is the group's, not a closure's: whatever a closure returns once
    ///   the map is full, a panic included, the map grows and the whole group runs again
    ///   (where `write` returns [`Error::Panicked`] for a closure that panics then).
    /// - The closure and the values of runs that did not commit are dropped on the caller's
    ///   thread, when it takes its outcome.
    /// - A lone caller does not wait for others; a group waits for more members only after a
    ///   group of several (at most 200 µs, and at most half that group's commit time).
    ///
    /// Called inside a write closure it is [`Error::WouldDeadlock`]. A caller that holds a read
    /// transaction opened on its own thread runs its closure alone, as `write` would (a map
    /// that must grow waits for every read transaction of the process). A read transaction
    /// moved in from another thread is not seen: a leader that must grow the map then waits
    /// for it, at most 30 s, as `write` on another thread would.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let orders = db.keyspace("orders")?;
    /// std::thread::scope(|scope| {
    ///     for thread in 0u8..4 {
    ///         let (db, orders) = (db.clone(), orders.clone());
    ///         scope.spawn(move || {
    ///             for n in 0u8..25 {
    ///                 let orders = orders.clone();
    ///                 db.write_grouped(move |tx| tx.put(&orders, &[thread, n], b"paid")).unwrap();
    ///             }
    ///         });
    ///     }
    /// });
    /// let snapshot = db.read_txn()?;
    /// for (thread, n) in (0u8..4).flat_map(|thread| (0u8..25).map(move |n| (thread, n))) {
    ///     assert_eq!(snapshot.get(&orders, &[thread, n])?, Some(&b"paid"[..]));
    /// }
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn write_grouped<T, F>(&self, write: F) -> Result<T>
    where
        F: FnMut(&mut WriteTxn<'_>) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        if self.inner.options.read_only {
            return Err(Error::ReadOnly { path: self.inner.path.clone(), refused: "a write transaction".to_owned() });
        }
        group::write_grouped(&self.inner, write)
    }

    /// Makes the next `count` flushes to stable storage fail, as a full or failing disk would
    /// after LMDB's commit succeeded: for tests of what callers see then
    /// ([`Error::NotDurable`], with the commit made and published).
    #[doc(hidden)]
    pub fn inject_flush_failures(&self, count: u32) {
        self.inner.injected_flush_failures.store(count, Ordering::Release);
    }

    /// Makes the disk look as if it had `free_bytes` free beyond the file's current length
    /// (`None`: the real disk again), for tests of map growth on a nearly full disk where a
    /// small file system cannot be mounted. Growth then reserves at most that much more, and
    /// reads that much as the disk's free space.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// db.inject_free_bytes(Some(0));
    /// let ks = db.keyspace("ks")?; // fits the map the file has
    /// let big = vec![0u8; 8 << 20];
    /// assert!(matches!(db.write(|tx| tx.put(&ks, b"k", &big)), Err(tessera::Error::DiskFull)));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    #[doc(hidden)]
    pub fn inject_free_bytes(&self, free_bytes: Option<u64>) {
        let file_bytes = std::fs::metadata(&self.inner.path).map_or(0, |meta| meta.len());
        let disk_bytes = free_bytes.map_or(u64::MAX, |free| file_bytes.saturating_add(free));
        self.inner.simulated_disk_bytes.store(disk_bytes, Ordering::Release);
    }

    /// Flushes every commit so far to stable storage.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use tessera::{Db, DbOptions, Durability};
    /// let options = DbOptions { durability: Durability::BUFFERED, ..DbOptions::default() };
    /// let db = Db::open_with(dir.path().join("db"), options)?;
    /// let ks = db.keyspace("ks")?;
    /// db.write(|tx| tx.put(&ks, b"k", b"v"))?; // committed; flushed within 100 ms
    /// db.sync()?; // now on stable storage
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn sync(&self) -> Result<()> {
        self.inner.syncer.sync_all().map_err(Error::NotDurable)
    }

    /// Closes the database: flushes every commit to stable storage (reporting a failure, which
    /// dropping the last handle cannot), stops its threads and closes the file, so that the
    /// path can be opened again at once. If other handles still hold the database (clones of
    /// this `Db`, collections, dictionaries, documents, subscriptions), nothing is closed and
    /// [`Error::StillOpen`] says how many and which.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("close.tessera")).unwrap();
    /// let other = db.clone();
    /// assert!(matches!(other.close(), Err(tessera::Error::StillOpen { handles: 1, .. })));
    /// db.close().unwrap();
    /// ```
    pub fn close(self) -> Result<()> {
        // The database's own threads (the watcher of other processes' commits, woken by every
        // commit; a live engine's dispatch; a dictionary's flusher, which holds the dictionary
        // for the moment of a save) hold it for the moment of a delivery: waited out, up to
        // `CLOSE_WAIT_MAX`, so that such a moment is not taken for another handle (right
        // after a commit with notification on, 134 of 300 closes failed so). A handle the
        // caller still holds is reported when the wait ends.
        let deadline = std::time::Instant::now() + CLOSE_WAIT_MAX;
        loop {
            let handles = Arc::strong_count(&self.inner) - 1;
            if handles == 0 {
                return self.sync();
            }
            if std::time::Instant::now() >= deadline {
                let mut holders: Vec<String> = lock(&self.inner.shared_state)
                    .iter()
                    .filter(|(_, state)| state.strong_count() > 0)
                    .map(|(name, _)| name.clone())
                    .collect();
                holders.sort();
                return Err(Error::StillOpen { path: self.inner.path.clone(), handles, holders });
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Subscribes to the change feed: one event per commit after the state this call returns
    /// in. A write transaction another thread has open when it is called is waited for: its
    /// commit is part of that state, never missed and never delivered.
    ///
    /// # Errors
    /// [`Error::WouldDeadlock`] inside a write transaction of this thread, which could not
    /// be waited for; [`Error::ReadOnly`] on a read-only handle, which sees no commit.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tessera::store::FeedEvent;
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ks = db.keyspace("ks")?;
    /// let feed = db.subscribe()?;
    /// db.write(|tx| tx.put(&ks, b"k", b"v"))?;
    /// assert!(matches!(feed.recv_timeout(Duration::from_secs(5)), Some(FeedEvent::Batch(_))));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn subscribe(&self) -> Result<ChangeStream> {
        self.refuse_following_if_read_only("subscribing to the change feed")?;
        if txn::writing_on_this_thread() {
            return Err(Error::WouldDeadlock { operation: "subscribing to the change feed", advice: "subscribe before writing" });
        }
        // Under the writer lock no transaction of this process is open: one begun before the
        // registration, which may have recorded no changes (nobody listened), has committed,
        // inside the start; one begun after it records changes for the listener.
        let _writer = lock(&self.inner.writer);
        Ok(self.inner.feed.subscribe(self.inner.env.info().last_txn_id as u64))
    }

    /// Calls `listener` on a thread of its own for each commit from now on. A panicking
    /// listener is removed; writers and other listeners are not affected.
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use std::time::Duration;
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ks = db.keyspace("ks")?;
    /// let (sender, commits) = mpsc::channel();
    /// db.on_commit(move |_event| drop(sender.send(())))?;
    /// db.write(|tx| tx.put(&ks, b"k", b"v"))?;
    /// assert!(commits.recv_timeout(Duration::from_secs(5)).is_ok());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn on_commit(&self, mut listener: impl FnMut(&FeedEvent) + Send + 'static) -> Result<()> {
        let stream = self.subscribe()?;
        std::thread::Builder::new().name("tessera-listener".into()).spawn(move || {
            for event in stream {
                let call = std::panic::AssertUnwindSafe(|| listener(&event));
                if std::panic::catch_unwind(call).is_err() {
                    return; // dropping the stream unsubscribes
                }
            }
        })?;
        Ok(())
    }

    /// A handle that does not keep the database open: background work (index builds, the live
    /// engine's hook) holds one and upgrades it for each unit of work.
    pub(crate) fn downgrade(&self) -> WeakDb {
        WeakDb(Arc::downgrade(&self.inner))
    }

    /// Runs `hook` on the feed's delivery thread for every committed batch, from now on, for
    /// as long as the database is open (see [`feed::Hook`]).
    pub(crate) fn add_feed_hook(&self, hook: feed::Hook) {
        self.inner.feed.add_hook(hook);
    }

    /// Runs `hook` when commits of other processes could not be delivered (see
    /// [`feed::GapHook`]).
    pub(crate) fn add_gap_hook(&self, hook: feed::GapHook) {
        self.inner.feed.add_gap_hook(hook);
    }

    /// [`Error::ReadOnly`] for a read-only handle: it makes no commit and follows no other
    /// process's (it runs no watcher, see [`DbOptions::cross_process_notify`]), so a
    /// subscription on it would stay at its first state whatever the file holds later.
    pub(crate) fn refuse_following_if_read_only(&self, what: &str) -> Result<()> {
        if self.inner.options.read_only {
            return Err(Error::ReadOnly {
                path: self.inner.path.clone(),
                refused: format!("{what}: a read-only handle sees no commit, of this process or another"),
            });
        }
        Ok(())
    }

    /// A gap in the commits of other processes found and not reported to the gap hooks yet (a
    /// delivery was under way): the last commit delivered before it, and the error (see
    /// `CrossProcess::unreported_gap`).
    pub(crate) fn unreported_cross_process_gap(&self) -> Option<(u64, Arc<Error>)> {
        self.inner.cross_process.get().and_then(|cross_process| cross_process.unreported_gap())
    }

    /// Makes writers record changes for a hook until the returned guard drops (see
    /// [`feed::ChangeDemand`]). A transaction that began before may still commit unrecorded:
    /// follow with [`Db::wait_for_writers`].
    pub(crate) fn demand_changes(&self) -> feed::ChangeDemand {
        self.inner.feed.demand_changes()
    }

    /// Whether writers record changes now (someone listens, or a hook's consumer demands them).
    #[cfg(test)]
    pub(crate) fn records_changes(&self) -> bool {
        self.inner.feed.has_listeners()
    }

    /// Whether reads check each value against its checksum ([`DbOptions::verify_checksums`]).
    pub(crate) fn verifies_checksums(&self) -> bool {
        self.inner.options.verify_checksums
    }

    /// The ceiling the map may grow to, in bytes ([`DbOptions::map_size_max_bytes`]): no value
    /// larger can ever be stored.
    pub(crate) fn map_size_max_bytes(&self) -> u64 {
        self.inner.options.map_size_max_bytes
    }

    /// Waits until no write transaction is running (one that began earlier has committed or
    /// rolled back). An error inside a write transaction of this thread, which would deadlock.
    pub(crate) fn wait_for_writers(&self) -> Result<()> {
        if txn::writing_on_this_thread() {
            return Err(Error::WouldDeadlock { operation: "subscribing", advice: "subscribe before writing" });
        }
        drop(lock(&self.inner.writer));
        Ok(())
    }

    /// The live per-database state `name`, if there is one of type `S` (see
    /// [`Db::shared_state_or`]).
    pub(crate) fn shared_state<S: std::any::Any + Send + Sync>(&self, name: &str) -> Option<Arc<S>> {
        let any = lock(&self.inner.shared_state).get(name).and_then(std::sync::Weak::upgrade)?;
        any.downcast::<S>().ok()
    }

    /// The live per-database state `name` of type `S` that `accept` takes, or a new one from
    /// `create`. Creations are serialized per database, so two threads opening one collection
    /// or dictionary at once get one state (one cache, one hook), never two.
    pub(crate) fn shared_state_or<S: std::any::Any + Send + Sync>(
        &self,
        name: &str,
        accept: impl Fn(&S) -> bool,
        create: impl FnOnce() -> Result<Arc<S>>,
    ) -> Result<Arc<S>> {
        let existing = || self.shared_state::<S>(name).filter(|state| accept(state));
        if let Some(state) = existing() {
            return Ok(state);
        }
        // Inside a write transaction, waiting for another thread's creation (which may wait
        // for this thread's write lock) could deadlock: create directly (a creation that
        // writes then fails with `WouldDeadlock`).
        let _opening = (!txn::writing_on_this_thread()).then(|| lock(&self.inner.opening));
        if let Some(state) = existing() {
            return Ok(state);
        }
        let state = create()?;
        let weak: std::sync::Weak<dyn std::any::Any + Send + Sync> = Arc::downgrade(&state) as _;
        lock(&self.inner.shared_state).insert(name.to_owned(), weak);
        Ok(state)
    }

    /// The newest commit of another process that this handle has caught up with, when it has
    /// cross-process notification on ([`DbOptions::cross_process_notify`]); 0 without it (it
    /// then learns of other processes' commits only from the snapshots it reads). One atomic
    /// load: what a cache of stored values checks on every hit.
    pub(crate) fn foreign_commits_through(&self) -> u64 {
        self.inner.cross_process.get().map_or(0, |cross_process| cross_process.foreign_through())
    }

    /// The newest commit of the file if another process may have made a commit after
    /// `sequence` (conservative: a commit of this process not recorded yet counts as
    /// another's), without a snapshot: LMDB's meta page and two atomics.
    pub(crate) fn foreign_commits_after(&self, sequence: u64) -> Option<u64> {
        let newest = self.inner.env_info_gated().last_txn_id as u64;
        self.inner.origins.foreign_between(sequence, newest).then_some(newest)
    }

    /// Bytes the map currently spans (the file grows up to this).
    pub fn map_size_bytes(&self) -> u64 {
        self.inner.env_info_gated().map_size as u64
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(cross_process) = self.cross_process.get() {
            cross_process.stop();
        }
        // The warming thread touches the map: stopped before the environment closes.
        if let Some(warmer) = self.warmer.get() {
            warmer.stop();
        }
        // The kept read transaction holds the environment open: drop it first. No other can be
        // handed back after it: a `ReadTxn` borrows the `Inner`, so none is open now.
        self.snapshot_cache.clear();
        // Buffered commits are flushed when the last handle goes; a failure here cannot be
        // returned, which is why `Db::sync` exists.
        let _ = self.syncer.sync_all();
        self.syncer.stop();
        // The sync thread holds the environment while it runs: wait for it, so that the file is
        // closed (and can be opened again) when the last handle is gone.
        if let Some(thread) = lock(&self.sync_thread).take() {
            let _ = thread.join();
        }
        self.feed.close();
    }
}

/// A file as the file system knows it (device and inode), whatever name it was opened by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct FileIdentity {
    pub(crate) device: u64,
    pub(crate) inode: u64,
}

impl FileIdentity {
    pub(crate) fn of(path: &Path) -> Option<FileIdentity> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(path).ok().map(|meta| FileIdentity { device: meta.dev(), inode: meta.ino() })
        }
        #[cfg(not(unix))]
        {
            let _ = path;
            None
        }
    }
}

/// Files this process has open as databases. LMDB forbids two environments on one file in a
/// process (heed only compares paths, so two hard links passed its check: two writers then
/// corrupted the file); a second open by any name returns the same database.
static OPEN_FILES: Mutex<std::collections::BTreeMap<FileIdentity, std::sync::Weak<Inner>>> = Mutex::new(std::collections::BTreeMap::new());

/// How long an open waits for the same file's last handle to finish closing.
const CLOSING_WAIT_MAX: Duration = Duration::from_secs(5);

/// A database's entry in [`OPEN_FILES`], removed when the database is closed (set once the
/// open succeeded).
#[derive(Default)]
struct FileClaim(std::sync::OnceLock<FileIdentity>);

impl FileClaim {
    fn set(&self, identity: FileIdentity) -> std::result::Result<(), FileIdentity> {
        self.0.set(identity)
    }
}

impl Drop for FileClaim {
    fn drop(&mut self) {
        if let Some(identity) = self.0.get() {
            let mut open_files = lock(&OPEN_FILES);
            // The entry is this database's (dead) one unless a later open replaced it.
            if open_files.get(identity).is_some_and(|weak| weak.upgrade().is_none()) {
                open_files.remove(identity);
            }
        }
    }
}

fn open_env(path: &Path, options: &DbOptions, file: preflight::FileState) -> Result<heed::Env<WithoutTls>> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        if options.create_parent_dirs {
            std::fs::create_dir_all(parent)?;
        } else if !parent.is_dir() {
            return Err(Error::Io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{}: no such directory (set DbOptions::create_parent_dirs to create it)", parent.display()),
            )));
        }
    }
    let mut open_options = EnvOpenOptions::new().read_txn_without_tls();
    // A new file starts at the initial map size; an existing one is opened at its own size in
    // whole pages (which hold every committed page: `preflight` checked), so that opening
    // never needs more disk than the file has and never extends it (a file that turns out not
    // to be a tessera database is left as it was). With the write map, LMDB sets the file's
    // length to the map's: a partial page at the end, which holds nothing committed, is cut.
    // The map grows on the first write that needs it.
    let map_size = match file {
        preflight::FileState::Lmdb { map_bytes } => map_bytes,
        preflight::FileState::New => round_to_page(options.map_size_initial_bytes.max(1 << 16)).min(map_ceiling_bytes(options)),
    };
    open_options.map_size(map_size as usize).max_dbs(options.keyspaces_max).max_readers(options.readers_max);
    // SAFETY: NO_SUB_DIR makes `path` the data file. NO_META_SYNC keeps LMDB's ordering of
    // data before meta page while leaving the meta flush to the group-commit syncer; this is
    // safe for integrity (LMDB documents that only the last transactions may be lost).
    // WRITE_MAP writes pages through the map; see `DbOptions::write_map` for how a full disk is
    // kept from turning into SIGBUS.
    let write_map = if options.writes_through_map() { EnvFlags::WRITE_MAP } else { EnvFlags::empty() };
    // Read-only: MDB_RDONLY, and no lock file made where none exists (see
    // `DbOptions::read_only` for what that costs).
    let read_only = match (options.read_only, lock_file_of(path).exists()) {
        (false, _) => EnvFlags::empty(),
        (true, true) => EnvFlags::READ_ONLY,
        (true, false) => EnvFlags::READ_ONLY | EnvFlags::NO_LOCK,
    };
    // The standing NO_SYNC flag follows the default durability (see `txn::commit`).
    let no_sync = if matches!(options.durability, Durability::Buffered { .. }) { EnvFlags::NO_SYNC } else { EnvFlags::empty() };
    unsafe {
        open_options.flags(EnvFlags::NO_SUB_DIR | EnvFlags::NO_META_SYNC | write_map | no_sync | read_only);
    }
    // SAFETY: heed requires that the same file is not opened twice in one process through
    // different `Env`s (it checks and returns `EnvAlreadyOpened`) and that the file is not
    // modified other than through LMDB; tessera only touches it through this environment.
    let env = unsafe { open_options.open(path) };
    env.map_err(|error| match error {
        heed::Error::Mdb(heed::MdbError::Invalid | heed::MdbError::VersionMismatch) => Error::NotADatabase { path: path.to_path_buf() },
        heed::Error::EnvAlreadyOpened => Error::AlreadyOpen(path.to_path_buf()),
        other => Error::from_heed(other, options.map_size_max_bytes),
    })
}

/// The format version as `tessera.meta` stores it (u32, big-endian).
fn version_of(stored: Option<&[u8]>) -> Result<u32> {
    let stored = stored.ok_or_else(|| Error::Corrupted(format!("keyspace {META_KEYSPACE:?}: the format version record is missing")))?;
    <[u8; 4]>::try_from(stored)
        .map(u32::from_be_bytes)
        .map_err(|_| Error::Corrupted(format!("keyspace {META_KEYSPACE:?}: the format version record is not 4 bytes")))
}

/// The hash key as `tessera.meta` stores it. In a file of storage format 5 or later one is
/// always there: a missing one, or one of another length, is damage.
fn hash_key_of(stored: Option<&[u8]>) -> Result<HashKey> {
    let what = match stored.map(HashKey::try_from) {
        Some(Ok(key)) => return Ok(key),
        Some(Err(_)) => format!("is not {HASH_KEY_LEN} bytes"),
        None => "is missing".to_owned(),
    };
    Err(Error::Corrupted(format!("keyspace {META_KEYSPACE:?}, key \"hash_key\": the file's hash key {what}")))
}
/// LMDB's lock file for the data file `path` (`NO_SUB_DIR`): `path-lock`.
fn lock_file_of(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-lock");
    PathBuf::from(name)
}

/// Map sizes are whole pages (LMDB rounds them anyway; 64 KiB covers every page size).
/// The largest map [`DbOptions::map_size_max_bytes`] allows: the ceiling rounded down to whole
/// 64 KiB pages (at least one), so that a map, and with the write map the file, never passes a
/// ceiling such as 3,000,000 bytes (errors still name the ceiling as given).
pub(crate) fn map_ceiling_bytes(options: &DbOptions) -> u64 {
    (options.map_size_max_bytes >> 16 << 16).max(1 << 16)
}

fn round_to_page(bytes: u64) -> u64 {
    bytes.div_ceil(1 << 16) << 16
}
