//! A persisted, typed, sharded key-value container with an in-memory cache and write-behind
//! persistence (Dflat's WorkspaceDictionary, made transactional).
//!
//! - **Reads** come from a sharded cache; a cold key is read from storage on first access, and
//!   its absence is cached too. The cache can be bounded (`entries_max`), evicting clean entries.
//! - **Bulk load.** An unbounded cache that has read [`BULK_LOAD_MISSES_MIN`] keys from storage,
//!   and at least one for every [`BULK_LOAD_ENTRIES_PER_MISS`] stored entries, loads the rest of
//!   the dictionary in one range scan of its keyspace, filling every shard; from then on a miss
//!   is known absent without a read. Reading a few keys costs a few lookups; reading many costs
//!   one scan, and never more than about twice the cheaper of the two. Values loaded in bulk
//!   are validated when first read.
//! - **Writes** (`set`, `remove`) update the cache and return at once: they never wait on disk.
//!   A write of the bytes already cached is skipped. A background flusher writes everything
//!   pending in one storage transaction per `flush_interval`. [`Dictionary::flush`] waits
//!   until everything set so far, by every thread, is durable.
//! - **Transactions**: [`WriteTxn::dictionary`] writes go into the caller's transaction and
//!   reach the cache when it commits (under the writer lock, so no flush can interleave).
//! - **Values** are stored in tessera's binary format: any serde type, read back as the same
//!   type; reading a value as a different type is [`Error::DictionaryValue`], never a silent
//!   `None`. Reads follow serde's rules for the type asked for: a struct ignores stored
//!   fields it does not name and reads a missing `Option` field as `None`, and `Some(None)`
//!   is stored as null, which reads back as `None`.
//! - **The cache and storage agree** for every reader: an entry a save has taken stays cached,
//!   and is not evicted, until that save commits; a value loaded from a snapshot older than a
//!   save that committed meanwhile is answered but not cached.
//! - **Keys** are any UTF-8 string, including the empty one, of any length (keys longer than
//!   fits an LMDB key are stored under a hash, with the full key kept in the record).
//! - **Other processes** on the same file: their writes always reach storage, and a write of
//!   this process is never skipped against a cached value another process may have changed
//!   (before a write of the bytes already cached is skipped, the dictionary checks for other
//!   processes' commits since the cache last agreed with storage, and forgets its clean
//!   entries if there were any). Reads: with [`crate::DbOptions::cross_process_notify`], this
//!   process learns of another's commit within moments and the cache forgets its clean entries
//!   at the next access; without it, a value this process has cached is read from the cache
//!   until one of its own writes finds the other process's commit, or the dictionary is opened
//!   again (a dictionary's reads are then as fresh as a cache without notification can be).
//! - **Lifetime**: the last handle of a dictionary saves its pending values before its drop
//!   returns (dropped inside a write transaction, as soon as that transaction ends, and the
//!   same dictionary opened meanwhile gets the same cache).
//!
//! Lock order: the database's writer lock, then `forgetting` (a forget of the clean entries, or a
//! bulk load deciding the cache is complete), then shard locks; never the other way.

mod keys;
mod stream;

use crate::error::{Error, Result};
use crate::live::ValueSubscription;
use crate::store::{Db, Durability, Keyspace, WriteTxn};
use rustc_hash::FxHasher;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;
use tessera_value::{Doc, Value};

/// Default number of cache shards, chosen by the `dictionary` benchmark (100 tasks on 2 cores
/// inserting and reading 40,000 keys): against Dflat's 12, 32 shards read hot keys 10-15 %
/// faster in every run, while inserts moved ±20 % either way from run to run; both beat a
/// single lock by up to 3× on hot reads.
///
/// ```
/// assert_eq!(tessera::DictionaryOptions::default().shards, tessera::dictionary::SHARDS_DEFAULT);
/// ```
pub const SHARDS_DEFAULT: usize = 32;
/// Default write-behind interval.
///
/// ```
/// use tessera::dictionary::FLUSH_INTERVAL_DEFAULT;
/// assert_eq!(tessera::DictionaryOptions::default().flush_interval, FLUSH_INTERVAL_DEFAULT);
/// assert!(FLUSH_INTERVAL_DEFAULT >= std::time::Duration::from_millis(1));
/// ```
pub const FLUSH_INTERVAL_DEFAULT: Duration = Duration::from_millis(20);
/// Keys read from storage one at a time before an unbounded cache may load the whole
/// dictionary in one scan.
///
/// ```
/// use tessera::dictionary::{BULK_LOAD_ENTRIES_PER_MISS, BULK_LOAD_MISSES_MIN};
/// // A dictionary of 1,000 stored entries is loaded in one scan after this many single reads:
/// assert_eq!((1_000 / BULK_LOAD_ENTRIES_PER_MISS).max(BULK_LOAD_MISSES_MIN), 500);
/// ```
pub const BULK_LOAD_MISSES_MIN: u64 = 64;
/// An unbounded cache loads the whole dictionary once it has read one key from storage for
/// every this many stored entries (and at least [`BULK_LOAD_MISSES_MIN`]). Measured on the
/// `dictionary` benchmark's 120,000 entries (2 cores): loading an entry in the scan costs about
/// a quarter of a lookup, but the scan runs on one thread while lookups run on every core, so
/// the scan only pays once about half the dictionary has been read key by key.
///
/// ```
/// use tessera::dictionary::{BULK_LOAD_ENTRIES_PER_MISS, BULK_LOAD_MISSES_MIN};
/// // A small dictionary waits for at least BULK_LOAD_MISSES_MIN single reads:
/// assert_eq!((40 / BULK_LOAD_ENTRIES_PER_MISS).max(BULK_LOAD_MISSES_MIN), 64);
/// ```
pub const BULK_LOAD_ENTRIES_PER_MISS: u64 = 2;

/// Prefix of a dictionary's keyspace.
pub(crate) const DICTIONARY_KEYSPACE_PREFIX: &str = "tessera.dictionary.";
/// Longest dictionary name: what fits a keyspace name after `tessera.dictionary.`.
///
/// ```
/// use tessera::dictionary::DICTIONARY_NAME_LEN_MAX;
/// use tessera::DictionaryOptions;
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// assert!(db.dictionary_with(&"d".repeat(DICTIONARY_NAME_LEN_MAX), DictionaryOptions::default()).is_ok());
/// let long = db.dictionary_with(&"d".repeat(DICTIONARY_NAME_LEN_MAX + 1), DictionaryOptions::default());
/// assert!(matches!(long, Err(tessera::Error::InvalidName { .. })));
/// # Ok::<(), tessera::Error>(())
/// ```
pub const DICTIONARY_NAME_LEN_MAX: usize = crate::store::names::len_max_after(DICTIONARY_KEYSPACE_PREFIX);

/// Most bytes one stored entry can have: LMDB's largest value (`MDB_MAXDATASIZE`, a 32-bit
/// length). [`Dictionary::set`] also refuses an entry larger than the map ceiling.
///
/// ```
/// use tessera::dictionary::ENTRY_LEN_MAX;
/// assert_eq!(ENTRY_LEN_MAX, 4_294_967_295);
/// ```
pub const ENTRY_LEN_MAX: u64 = u32::MAX as u64;

/// Options for [`Db::dictionary_with`].
///
/// ```
/// use std::time::Duration;
/// use tessera::DictionaryOptions;
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let options = DictionaryOptions { shards: 4, flush_interval: Duration::from_millis(5), entries_max: Some(1_000) };
/// let cache = db.dictionary_with("cache", options)?;
/// cache.set("answer", &42)?;
/// assert_eq!(cache.get::<i32>("answer")?, Some(42));
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct DictionaryOptions {
    /// Cache shards (each with its own lock); at least 1.
    pub shards: usize,
    /// Longest time a write waits in memory before the flusher writes it (at least 1 ms).
    pub flush_interval: Duration,
    /// Most cached entries (clean ones are evicted beyond it); `None` for no bound.
    pub entries_max: Option<usize>,
}

impl Default for DictionaryOptions {
    fn default() -> Self {
        DictionaryOptions { shards: SHARDS_DEFAULT, flush_interval: FLUSH_INTERVAL_DEFAULT, entries_max: None }
    }
}

/// A cached entry: the stored bytes (`None`: known absent) and, while a write of it is pending,
/// the sequence of that write.
struct Entry {
    value: Option<Arc<[u8]>>,
    pending: u64,
    /// The bytes are known valid: written by the encoder, or validated when loaded or first
    /// read (a bulk load leaves them to the first read).
    validated: bool,
    /// A save has taken this value and not finished: storage may not hold it yet, so the
    /// entry is neither evicted nor left out of [`Dictionary::keys`] until the save ends.
    saving: bool,
}

impl Entry {
    /// An entry as storage holds it.
    fn clean(value: Option<Arc<[u8]>>, validated: bool) -> Self {
        Entry { value, pending: 0, validated, saving: false }
    }

    /// What this entry says that storage may not (yet) say.
    fn ahead_of_storage(&self) -> bool {
        self.pending > 0 || self.saving
    }
}

/// An entry read by a bulk load, waiting for its shard's lock: key and value.
type StagedEntry = (Arc<str>, Arc<[u8]>);

/// A pending write taken for a flush: key, value (`None`: remove) and its write sequence.
type PendingWrite = (Arc<str>, Option<Arc<[u8]>>, u64);

#[derive(Default)]
struct Shard {
    entries: rustc_hash::FxHashMap<Arc<str>, Entry>,
    /// Keys with a pending write (entries whose `pending` is non-zero, possibly stale).
    dirty: Vec<Arc<str>>,
    /// Keys taken by the save in flight (entries whose `saving` is set).
    saving: Vec<Arc<str>>,
}

#[derive(Default)]
struct Flusher {
    /// When the oldest write not yet taken by a flush was made: the flush is due one interval
    /// later.
    pending_since: Option<std::time::Instant>,
    stopped: bool,
    /// Highest write sequence known committed to storage.
    flushed: u64,
    /// Error of the last failed background flush not yet reported (by the next `set` or
    /// `remove`; `flush` and `close` report their own flush's outcome).
    error: Option<String>,
}

/// The flusher's state, shared with its thread, which holds the dictionary itself only while
/// flushing (so that dropping the last handle closes it promptly).
#[derive(Default)]
struct FlusherShared {
    state: Mutex<Flusher>,
    changed: Condvar,
}

pub(crate) struct DictInner {
    db: Db,
    keyspace: Keyspace,
    /// Places long keys: keyed with the file's hash key.
    long_key_hash: keys::LongKeyHash,
    name: Arc<str>,
    shards: Box<[Mutex<Shard>]>,
    options: DictionaryOptions,
    /// Sequence of the last accepted write (set or remove).
    sequence: AtomicU64,
    has_pending: AtomicBool,
    /// A background write failed and no call has reported it yet (`Flusher::error` holds it):
    /// lets `set` skip the flusher's lock in the common case.
    write_behind_failed: AtomicBool,
    /// Keys read from storage one at a time (misses), towards a bulk load.
    misses: AtomicU64,
    /// A bulk load is running or has run.
    bulk_load_started: AtomicBool,
    /// Every stored key is cached (a bulk load finished, and the cache evicts nothing): a miss
    /// is known absent.
    complete: AtomicBool,
    /// Bumped by `clear` when it empties the cache, so that a load from an older snapshot
    /// cannot put cleared values back.
    clears: AtomicU64,
    /// Saves committed (and transactions that wrote the dictionary), bumped after each commit
    /// and before its entries may be evicted: a load whose snapshot may predate a save does
    /// not cache what it read (see
    /// [`DictInner::with_bytes`]), and [`Dictionary::keys`] reads again.
    saves: AtomicU64,
    flusher: Arc<FlusherShared>,
    /// Held by a save for the whole of taking the pending values, writing them and, on
    /// failure, marking them pending again: a `flush` that ran while the background save held
    /// the values found nothing to write and returned Ok, and that save then failed.
    save: Mutex<()>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The commit through which the cache is known to hold what storage holds, as far as
    /// other processes' commits go: a commit of another process after it may have changed
    /// any stored entry, and the cache then forgets what it holds clean
    /// ([`DictInner::follow_other_processes`]).
    coherent_through: AtomicU64,
    /// Held by a forget of the clean entries for the whole of it, and by a bulk load's final
    /// decision that the cache is complete (see `forget_clean_entries_before`).
    forgetting: Mutex<()>,
    /// [`Dictionary`] handles alive. The state is also held for moments by the database's own
    /// threads (the flusher, a commit's after-commit step), so that `Arc`'s count cannot say
    /// which handle is the last: this one does, and the last handle's drop saves.
    handles: AtomicUsize,
}

/// A persisted dictionary: cheap to clone, `Send` and `Sync`. Handles for one name share one
/// cache.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let settings = db.dictionary()?;
/// settings.set("volume", &7u8)?;                 // returns at once; written behind
/// assert_eq!(settings.get::<u8>("volume")?, Some(7));
/// assert!(settings.get::<String>("volume").is_err()); // wrong type: an error, not None
/// settings.flush()?;                               // durable now
/// # Ok::<(), tessera::Error>(())
/// ```
pub struct Dictionary {
    inner: Arc<DictInner>,
}

impl Clone for Dictionary {
    fn clone(&self) -> Self {
        self.inner.handles.fetch_add(1, Ordering::SeqCst);
        Dictionary { inner: self.inner.clone() }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Db {
    /// The default dictionary.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let settings = db.dictionary()?;
    /// assert_eq!(settings.name(), "default");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn dictionary(&self) -> Result<Dictionary> {
        self.dictionary_with("default", DictionaryOptions::default())
    }

    /// The dictionary `name`. Options apply when the first handle for the name is made. A
    /// name is 1 to [`DICTIONARY_NAME_LEN_MAX`] bytes without NUL ([`Error::InvalidName`]
    /// otherwise).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use tessera::DictionaryOptions;
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// assert!(db.dictionary_with("settings", DictionaryOptions::default()).is_ok());
    /// let nul = db.dictionary_with("a\0b", DictionaryOptions::default());
    /// assert!(matches!(nul, Err(tessera::Error::InvalidName { what: "dictionary", .. })));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn dictionary_with(&self, name: &str, options: DictionaryOptions) -> Result<Dictionary> {
        crate::store::names::check("dictionary", name, DICTIONARY_NAME_LEN_MAX)?;
        let registry_key = format!("dictionary:{name}");
        let inner = self.shared_state_or(
            &registry_key,
            |_: &DictInner| true,
            || {
                let keyspace = self.internal_keyspace(&format!("{DICTIONARY_KEYSPACE_PREFIX}{name}"))?;
                // The cache starts empty: whatever came before this commit is read from storage.
                let coherent_through = self.read(|tx| Ok(tx.sequence()))?;
                let shards = options.shards.max(1);
                let inner = Arc::new(DictInner {
                    db: self.clone(),
                    keyspace,
                    long_key_hash: keys::LongKeyHash::keyed(self.hash_key()),
                    name: name.into(),
                    shards: (0..shards).map(|_| Mutex::new(Shard::default())).collect(),
                    options,
                    sequence: AtomicU64::new(0),
                    has_pending: AtomicBool::new(false),
                    write_behind_failed: AtomicBool::new(false),
                    misses: AtomicU64::new(0),
                    bulk_load_started: AtomicBool::new(false),
                    complete: AtomicBool::new(false),
                    clears: AtomicU64::new(0),
                    saves: AtomicU64::new(0),
                    flusher: Arc::new(FlusherShared::default()),
                    save: Mutex::new(()),
                    thread: Mutex::new(None),
                    handles: AtomicUsize::new(0),
                    coherent_through: AtomicU64::new(coherent_through),
                    forgetting: Mutex::new(()),
                });
                let (weak, shared, interval) = (Arc::downgrade(&inner), inner.flusher.clone(), inner.options.flush_interval);
                let thread = std::thread::Builder::new()
                    .name(format!("tessera-dict-{name}"))
                    .spawn(move || flusher_loop(weak, shared, interval.max(Duration::from_millis(1))))
                    .map_err(Error::Io)?;
                *lock(&inner.thread) = Some(thread);
                Ok(inner)
            },
        )?;
        inner.handles.fetch_add(1, Ordering::SeqCst);
        Ok(Dictionary { inner })
    }
}

impl DictInner {
    fn shard(&self, key: &str) -> &Mutex<Shard> {
        &self.shards[self.shard_index(key)]
    }

    fn shard_index(&self, key: &str) -> usize {
        let mut hasher = FxHasher::default();
        key.hash(&mut hasher);
        (hasher.finish() % self.shards.len() as u64) as usize
    }

    fn value_error(&self, key: &str, message: impl std::fmt::Display) -> Error {
        Error::DictionaryValue { dictionary: self.name.to_string(), key: key.to_owned(), message: message.to_string() }
    }

    /// Forgets what the cache holds clean when another process has committed since the cache
    /// was last known to agree with storage through `seen` (a commit another process made):
    /// that commit may have changed any entry. Entries written here and not saved yet stay
    /// (they are newer than anything stored). Cleared as `clear` clears, so that a load from
    /// an older snapshot cannot put a forgotten value back.
    ///
    /// One forget at a time (`forgetting`), and `coherent_through` is raised only once every
    /// shard has forgotten: a writer that finds a stale clean entry equal to its value while a
    /// forget is under way asks [`DictInner::storage_may_differ`], which still sees the older
    /// `coherent_through`, waits for the forget here, and writes (with the mark raised first,
    /// it was told nothing had changed and skipped the write: a lost write, found by review).
    fn forget_clean_entries_before(&self, seen: u64) {
        let _forgetting = lock(&self.forgetting);
        if self.coherent_through.load(Ordering::Acquire) >= seen {
            return; // another thread forgot them for this commit, or a later one
        }
        // Cleared first: a load or a bulk load from an older snapshot then caches nothing, and
        // a bulk load ending now cannot mark the cache complete (it decides under this lock).
        self.clears.fetch_add(1, Ordering::AcqRel);
        // Incomplete next: a reader that finds a key missing then reads storage.
        self.complete.store(false, Ordering::Release);
        self.bulk_load_started.store(false, Ordering::Release);
        self.misses.store(0, Ordering::Relaxed);
        for shard in self.shards.iter() {
            lock(shard).entries.retain(|_, entry| entry.ahead_of_storage());
        }
        self.coherent_through.store(seen, Ordering::Release);
    }

    /// What every cache hit checks first: with cross-process notification on, this process
    /// learns of another process's commits within moments, and the cache forgets its clean
    /// entries at the first access after one. Without it, a value another process changed is
    /// read from the cache until this handle reads storage again (see [`Dictionary`]).
    #[inline]
    fn follow_other_processes(&self) {
        let seen = self.db.foreign_commits_through();
        if seen > self.coherent_through.load(Ordering::Acquire) {
            self.forget_clean_entries_before(seen);
        }
    }

    /// Runs `read` on the cached bytes of `key` (loading them on a miss).
    fn with_bytes<R>(&self, key: &str, read: impl FnOnce(Option<&[u8]>) -> Result<R>) -> Result<R> {
        self.follow_other_processes();
        // The caller's `read` runs after the shard's lock is released, on a reference to the
        // cached bytes: it may call back into the dictionary (or start a transaction) freely.
        let cached = {
            let mut shard = lock(self.shard(key));
            shard.entries.get_mut(key).map(|entry| self.checked_value(key, entry))
        };
        if let Some(value) = cached {
            return read(value?.as_deref());
        }
        if self.complete.load(Ordering::Acquire) {
            return read(None);
        }
        // A failed bulk load (a damaged entry anywhere, say) leaves the cache incomplete and is
        // not retried: each key is then read alone, and reports its own errors.
        if self.bulk_load_due()? && self.bulk_load().is_ok() {
            return self.with_bytes(key, read);
        }
        let clears = self.clears.load(Ordering::Acquire);
        // Read before the snapshot is taken: if a save commits after it, the snapshot may
        // predate that save, whose entries the cache may have evicted since.
        let saves = self.saves.load(Ordering::Acquire);
        let (loaded, neighbours) = self.db.read(|tx| keys::load_with_neighbours(tx, &self.keyspace, &self.long_key_hash, key))?;
        if let Some(bytes) = &loaded {
            // Validated once here; cached bytes are then opened without checks.
            crate::stored_doc::validate(bytes).map_err(|error| self.value_error(key, error))?;
        }
        self.cache_neighbours(clears, saves, neighbours);
        let mut shard = lock(self.shard(key));
        if self.clears.load(Ordering::Acquire) != clears {
            // Cleared since the snapshot: what it held is gone.
            drop(shard);
            return self.with_bytes(key, read);
        }
        if let Some(entry) = shard.entries.get_mut(key) {
            // A write that raced with the load wins: keep what is cached.
            let value = self.checked_value(key, entry);
            drop(shard);
            return read(value?.as_deref());
        }
        if self.saves.load(Ordering::Acquire) != saves {
            // A save committed since: the key was absent from the cache when this call began,
            // so a write of it in that save raced with this read, which may answer from
            // before it; but caching that answer could outlive the write.
            drop(shard);
            return read(loaded.as_deref());
        }
        let entry = shard.entries.entry(key.into()).or_insert(Entry::clean(loaded.map(Arc::from), true));
        let value = self.checked_value(key, entry);
        self.evict(&mut shard);
        drop(shard);
        read(value?.as_deref())
    }

    /// Caches the other long keys a lookup found under the same hash (as a bulk load does:
    /// validated when first read, never replacing a cached entry), so that each of them is
    /// not another scan of the same range.
    fn cache_neighbours(&self, clears: u64, saves: u64, neighbours: Vec<keys::Neighbour>) {
        for (key, value) in neighbours {
            let mut shard = lock(self.shard(&key));
            if self.clears.load(Ordering::Acquire) != clears || self.saves.load(Ordering::Acquire) != saves {
                return; // cleared or saved since the snapshot: what it held may be stale
            }
            shard.entries.entry(Arc::from(key)).or_insert(Entry::clean(Some(Arc::from(value)), false));
            self.evict(&mut shard);
        }
    }

    /// A cached entry's value, validating bytes a bulk load left unchecked.
    fn checked_value(&self, key: &str, entry: &mut Entry) -> Result<Option<Arc<[u8]>>> {
        if !entry.validated {
            if let Some(bytes) = &entry.value {
                crate::stored_doc::validate(bytes).map_err(|error| self.value_error(key, error))?;
            }
            entry.validated = true;
        }
        Ok(entry.value.clone())
    }

    /// Counts a miss; true when this caller should load the whole dictionary now.
    fn bulk_load_due(&self) -> Result<bool> {
        if self.options.entries_max.is_some() || self.bulk_load_started.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let misses = self.misses.fetch_add(1, Ordering::Relaxed) + 1;
        if misses < BULK_LOAD_MISSES_MIN {
            return Ok(false);
        }
        // Checked at the threshold and then every few misses: `len` is cheap, not free.
        if misses != BULK_LOAD_MISSES_MIN && !misses.is_multiple_of(BULK_LOAD_MISSES_MIN) {
            return Ok(false);
        }
        let stored = self.db.read(|tx| tx.len(&self.keyspace))?;
        if misses.saturating_mul(BULK_LOAD_ENTRIES_PER_MISS) < stored {
            return Ok(false);
        }
        // One caller loads; the others go on reading one key at a time meanwhile.
        Ok(!self.bulk_load_started.swap(true, Ordering::AcqRel))
    }

    /// Loads every stored entry not cached yet, in one range scan of the keyspace, and marks
    /// the cache complete. Entries already cached (written, or loaded since) are kept.
    fn bulk_load(&self) -> Result<()> {
        assert!(self.options.entries_max.is_none(), "a bounded cache is never loaded whole");
        let clears = self.clears.load(Ordering::Acquire);
        self.db.read(|tx| {
            let stored = usize::try_from(tx.len(&self.keyspace)?).unwrap_or(usize::MAX);
            // Staged per shard, so that each shard's lock is taken once, not once per entry.
            let per_shard = stored / self.shards.len() + 1;
            let mut staged: Vec<Vec<StagedEntry>> = (0..self.shards.len()).map(|_| Vec::with_capacity(per_shard)).collect();
            for entry in tx.range(&self.keyspace, ..)? {
                let (stored_key, record) = entry?;
                let (key, value) = keys::entry_of(stored_key, record)?;
                staged[self.shard_index(&key)].push((Arc::from(key), Arc::from(value)));
            }
            for (shard, staged) in self.shards.iter().zip(staged) {
                let mut shard = lock(shard);
                if self.clears.load(Ordering::Acquire) != clears {
                    return Ok(()); // cleared meanwhile: the snapshot is stale
                }
                shard.entries.reserve(staged.len());
                for (key, value) in staged {
                    // A cached entry (written, or loaded since the snapshot) is newer: it stays.
                    shard.entries.entry(key).or_insert(Entry::clean(Some(value), false));
                }
            }
            let _forgetting = lock(&self.forgetting);
            self.complete.store(self.clears.load(Ordering::Acquire) == clears, Ordering::Release);
            Ok(())
        })
    }

    fn evict(&self, shard: &mut Shard) {
        let Some(total_max) = self.options.entries_max else { return };
        let shard_max = (total_max / self.shards.len()).max(1);
        if shard.entries.len() <= shard_max {
            return;
        }
        // Down to 90 %, so that eviction is amortized; entries storage may not hold yet
        // (pending, or taken by a save that has not committed) are never evicted.
        let mut excess = shard.entries.len() - shard_max * 9 / 10;
        shard.entries.retain(|_, entry| {
            if excess > 0 && !entry.ahead_of_storage() {
                excess -= 1;
                false
            } else {
                true
            }
        });
    }

    /// Whether another process has committed since the cache was last known to agree with
    /// storage; if so, the cache forgets its clean entries (a look at LMDB's meta page: asked
    /// only before a write is skipped as unchanged).
    fn storage_may_differ(&self) -> Result<bool> {
        let since = self.coherent_through.load(Ordering::Acquire);
        let Some(seen) = self.db.foreign_commits_after(since) else { return Ok(false) };
        self.forget_clean_entries_before(seen);
        Ok(true)
    }

    /// Records a write of `value` (`None`: remove) in the cache. False if nothing changed.
    fn write(&self, key: &str, value: Option<Arc<[u8]>>) -> Result<bool> {
        self.follow_other_processes();
        match self.write_cached(key, value, false) {
            Ok(written) => Ok(written),
            // The bytes equal a clean entry's: skipped only if no other process may have
            // changed the stored value since it was cached (else a write that returned Ok
            // would never be made); if one may have, the entry is forgotten, and written.
            Err(value) if self.storage_may_differ()? => Ok(self.write_cached(key, value, true).unwrap_or(false)),
            Err(_) => Ok(false),
        }
    }

    /// [`DictInner::write`] in the cache: `Ok(written)`, or the value back when it equals a
    /// clean entry's bytes and `skip_equal_clean` is false (the caller decides).
    fn write_cached(&self, key: &str, value: Option<Arc<[u8]>>, skip_equal_clean: bool) -> std::result::Result<bool, Option<Arc<[u8]>>> {
        // Allocated before the shard's lock, and the replaced value freed after it: writers of
        // one key (the dictionary table's "update 1 key" row) wait for each other only for
        // the entry's update itself.
        let mut shard = lock(self.shard(key));
        let (newly_dirty, replaced) = match shard.entries.get_mut(key) {
            Some(entry) => {
                if entry.value.as_deref() == value.as_deref() {
                    let pending = entry.ahead_of_storage();
                    drop(shard);
                    return if pending || skip_equal_clean { Ok(false) } else { Err(value) };
                }
                let was_clean = entry.pending == 0;
                let replaced = std::mem::replace(&mut entry.value, value);
                entry.pending = self.sequence.fetch_add(1, Ordering::SeqCst) + 1;
                entry.validated = true;
                (was_clean.then(|| shard.entries.get_key_value(key).expect("just updated").0.clone()), replaced)
            }
            None => {
                let key: Arc<str> = key.into();
                let sequence = self.sequence.fetch_add(1, Ordering::SeqCst) + 1;
                shard.entries.insert(key.clone(), Entry { value, pending: sequence, validated: true, saving: false });
                (Some(key), None)
            }
        };
        if let Some(key) = newly_dirty {
            shard.dirty.push(key);
        }
        drop(shard);
        drop(replaced);
        // Read before the swap: while writes are pending (most of the time under load) every
        // thread then only reads the shared flag, instead of taking its cache line in turn.
        if !self.has_pending.load(Ordering::Acquire) && !self.has_pending.swap(true, Ordering::AcqRel) {
            self.wake();
        }
        Ok(true)
    }

    /// Tells the flusher a write is pending (starting the interval if none was).
    fn wake(&self) {
        let mut flusher = lock(&self.flusher.state);
        flusher.pending_since.get_or_insert_with(std::time::Instant::now);
        self.flusher.changed.notify_all();
    }

    /// Refuses an entry that no save could ever store, so that it never reaches the flusher
    /// (whose every later save would fail with it): one larger than LMDB's largest value or
    /// than the map ceiling.
    fn check_entry_len(&self, key: &str, value: &[u8]) -> Result<()> {
        let limit = ENTRY_LEN_MAX.min(self.db.map_size_max_bytes());
        // A long key's record holds the key too, after its varint length (at most 10 bytes).
        let stored_bytes = (key.len() + value.len()) as u64 + 10;
        if stored_bytes > limit {
            return Err(Error::LimitExceeded { what: "bytes of one dictionary entry (key and value; the map ceiling)", limit });
        }
        Ok(())
    }

    /// The error of a background flush that no call has reported yet, as an error (once).
    fn report_write_behind(&self) -> Result<()> {
        if !self.write_behind_failed.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut flusher = lock(&self.flusher.state);
        self.write_behind_failed.store(false, Ordering::Release);
        match flusher.error.take() {
            Some(message) => Err(Error::WriteBehind { dictionary: self.name.to_string(), message }),
            None => Ok(()),
        }
    }

    /// Writes every pending entry in one transaction. Called by the flusher thread, `flush`
    /// and drop.
    fn flush_pending(&self) -> Result<()> {
        if crate::store::writing_on_this_thread() {
            // Refused before the save lock: the flusher may hold it while it waits for the
            // writer lock this thread holds.
            return Err(Error::WouldDeadlock { operation: "a dictionary save", advice: "flush outside the write transaction" });
        }
        let _saving = lock(&self.save);
        lock(&self.flusher.state).pending_since = None;
        let target = self.sequence.load(Ordering::SeqCst);
        self.has_pending.store(false, Ordering::SeqCst);
        let mut batch: Option<Vec<PendingWrite>> = None;
        let result = self.db.write_with(Durability::BUFFERED, |tx| {
            // Collected under the writer lock, once even if the transaction is retried, and
            // written in key order, which LMDB's B-tree takes fastest.
            let batch = batch.get_or_insert_with(|| in_key_order(self.take_pending()));
            write_batch(tx, &self.keyspace, &self.long_key_hash, batch)
        });
        if let Err(error) = result {
            let batch = batch.unwrap_or_default();
            // Nothing was written: mark the batch pending again (unless rewritten since).
            for (key, _, sequence) in batch {
                let mut shard = lock(self.shard(&key));
                if let Some(entry) = shard.entries.get_mut(&key)
                    && entry.pending == 0
                    && sequence > 0
                {
                    entry.pending = sequence;
                    shard.dirty.push(key);
                }
            }
            self.end_save(false);
            self.has_pending.store(true, Ordering::SeqCst);
            return Err(error);
        }
        // Committed: bumped before the saved entries become evictable (see `saves`).
        self.saves.fetch_add(1, Ordering::AcqRel);
        self.end_save(true);
        let mut flusher = lock(&self.flusher.state);
        flusher.flushed = flusher.flushed.max(target);
        self.flusher.changed.notify_all();
        Ok(())
    }

    /// Ends the save in flight (the caller holds `save`): its entries are no longer being
    /// saved, and after a commit the cache evicts beyond its bound (which the save's entries
    /// were spared until now).
    fn end_save(&self, committed: bool) {
        for shard in self.shards.iter() {
            let mut shard = lock(shard);
            let saving = std::mem::take(&mut shard.saving);
            // As in `take_pending`: one pass over the map when most entries were saved.
            if saving.len() * 2 >= shard.entries.len() {
                shard.entries.values_mut().for_each(|entry| entry.saving = false);
            } else {
                for key in saving {
                    if let Some(entry) = shard.entries.get_mut(&key) {
                        entry.saving = false;
                    }
                }
            }
            if committed {
                self.evict(&mut shard);
            }
        }
    }

    /// Takes every pending entry, marking it clean and being saved.
    fn take_pending(&self) -> Vec<PendingWrite> {
        let mut batch = Vec::new();
        for shard in self.shards.iter() {
            let mut guard = lock(shard);
            let shard = &mut *guard;
            let dirty = std::mem::take(&mut shard.dirty);
            // Every pending entry is in `dirty`. When most entries are, one pass over the map
            // beats a lookup per key (which lands on a random cache line each).
            if dirty.len() * 2 >= shard.entries.len() {
                for (key, entry) in shard.entries.iter_mut().filter(|(_, entry)| entry.pending > 0) {
                    batch.push((key.clone(), entry.value.clone(), entry.pending));
                    shard.saving.push(key.clone());
                    entry.pending = 0;
                    entry.saving = true;
                }
            } else {
                for key in dirty {
                    if let Some(entry) = shard.entries.get_mut(&key)
                        && entry.pending > 0
                    {
                        batch.push((key.clone(), entry.value.clone(), entry.pending));
                        entry.pending = 0;
                        entry.saving = true;
                        shard.saving.push(key);
                    }
                }
            }
        }
        batch
    }
}

/// The batch in key order, which LMDB's B-tree takes fastest. Sorted on the keys' first eight
/// bytes, kept beside each index, and on the full keys only to break ties: comparing the
/// keys themselves would follow two pointers per comparison.
fn in_key_order(batch: Vec<PendingWrite>) -> Vec<PendingWrite> {
    let head = |key: &str| {
        let mut bytes = [0u8; 8];
        let len = key.len().min(8);
        bytes[..len].copy_from_slice(&key.as_bytes()[..len]);
        u64::from_be_bytes(bytes) // zero padding keeps the order: a key's prefix sorts first
    };
    let mut order: Vec<(u64, usize)> = batch.iter().enumerate().map(|(index, (key, _, _))| (head(key), index)).collect();
    order.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| batch[a.1].0.cmp(&batch[b.1].0)));
    let mut slots: Vec<Option<PendingWrite>> = batch.into_iter().map(Some).collect();
    order.into_iter().map(|(_, index)| slots[index].take().expect("each index once")).collect()
}

/// Writes a batch of pending values (`None`: removed) into the dictionary's keyspace.
fn write_batch(tx: &mut WriteTxn<'_>, keyspace: &Keyspace, hash: &keys::LongKeyHash, batch: &[PendingWrite]) -> Result<()> {
    keys::store_batch(tx, keyspace, hash, batch.iter().map(|(key, value, _)| (&**key, value.as_deref())))
}

fn flusher_loop(dictionary: Weak<DictInner>, shared: Arc<FlusherShared>, interval: Duration) {
    loop {
        {
            // Sleep until asked, or until one interval after the oldest pending write.
            let mut flusher = lock(&shared.state);
            loop {
                if flusher.stopped {
                    return;
                }
                let wait = match flusher.pending_since {
                    Some(since) => match (since + interval).checked_duration_since(std::time::Instant::now()) {
                        Some(left) if !left.is_zero() => left,
                        _ => break,
                    },
                    None => interval, // idle: wake now and then to notice a dropped dictionary
                };
                flusher = shared.changed.wait_timeout(flusher, wait).unwrap_or_else(|p| p.into_inner()).0;
                if flusher.pending_since.is_none() && !flusher.stopped {
                    break; // idle timeout: check that the dictionary still exists
                }
            }
        }
        let Some(inner) = dictionary.upgrade() else { return };
        if inner.has_pending.load(Ordering::SeqCst)
            && let Err(error) = inner.flush_pending()
        {
            // Kept for the next `set` or `remove`; the values stay pending for a retry.
            lock(&inner.flusher.state).error = Some(error.to_string());
            inner.write_behind_failed.store(true, Ordering::Release);
        }
    }
}

impl Dictionary {
    /// The value of `key` as a `T`; `None` if absent; an error if stored as another type.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let settings = db.dictionary()?;
    /// settings.set("theme", "dark")?;
    /// assert_eq!(settings.get::<String>("theme")?, Some("dark".to_owned()));
    /// assert_eq!(settings.get::<String>("missing")?, None);
    /// assert!(settings.get::<u32>("theme").is_err(), "a string is not a u32");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        let inner = &self.inner;
        inner.with_bytes(key, |bytes| match bytes {
            None => Ok(None),
            Some(bytes) => {
                // SAFETY: `with_bytes` hands out only validated bytes: written by the encoder
                // (`set`), or validated when loaded from storage or, after a bulk load, when
                // first read (`read_entry`); cached bytes are never modified.
                let doc = unsafe { Doc::from_trusted_unchecked(bytes, None) }.map_err(|error| inner.value_error(key, error))?;
                tessera_value::from_value(doc.root()).map(Some).map_err(|error| inner.value_error(key, error))
            }
        })
    }

    /// Reads the stored value in place, as a binary-format [`Value`], without copying it.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let settings = db.dictionary()?;
    /// settings.set("sizes", &[1, 2, 3])?;
    /// let count = settings.with_value("sizes", |value| value.and_then(|v| v.as_array()).map(|a| a.len()))?;
    /// assert_eq!(count, Some(3));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn with_value<R>(&self, key: &str, read: impl FnOnce(Option<Value<'_>>) -> R) -> Result<R> {
        self.inner.with_bytes(key, |bytes| match bytes {
            None => Ok(read(None)),
            Some(bytes) => {
                // SAFETY: as in `get`.
                let doc = unsafe { Doc::from_trusted_unchecked(bytes, None) }?;
                Ok(read(Some(doc.root())))
            }
        })
    }

    /// True if `key` has a value.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let settings = db.dictionary()?;
    /// settings.set("volume", &7)?;
    /// assert!(settings.contains("volume")?);
    /// assert!(!settings.contains("brightness")?);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn contains(&self, key: &str) -> Result<bool> {
        self.inner.with_bytes(key, |bytes| Ok(bytes.is_some()))
    }

    /// Sets `key`. Returns at once; the write reaches storage within the flush interval. A
    /// value equal to the cached one is not written again.
    ///
    /// If a background write failed since the last call was told, this call reports it as
    /// [`Error::WriteBehind`] and sets nothing (the failed values stay pending and are retried;
    /// `flush` says whether they reach storage).
    ///
    /// An entry that no save could store, because its key and value are larger than the map
    /// ceiling ([`crate::DbOptions::map_size_max_bytes`]) or than [`ENTRY_LEN_MAX`], is
    /// refused here with [`Error::LimitExceeded`] and nothing is set. On a read-only database
    /// every write is [`Error::ReadOnly`], here and in [`Dictionary::remove`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let options = tessera::DbOptions { map_size_max_bytes: 1 << 20, ..Default::default() };
    /// let db = tessera::Db::open_with(dir.path().join("db"), options)?;
    /// let settings = db.dictionary()?;
    /// let too_big = "x".repeat(1 << 20);
    /// assert!(matches!(settings.set("k", &too_big), Err(tessera::Error::LimitExceeded { .. })));
    /// settings.set("k", &"fits")?;
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn set<T: Serialize + ?Sized>(&self, key: &str, value: &T) -> Result<()> {
        self.refuse_if_read_only("a set")?;
        // Encoded straight into the shared slice the cache keeps (one allocation).
        let bytes = tessera_value::to_shared(value)?;
        self.inner.check_entry_len(key, &bytes)?;
        self.inner.report_write_behind()?;
        self.inner.write(key, Some(bytes)).map(drop)
    }

    /// Removes `key`. Returns at once, like `set`, and reports a failed background write as
    /// `set` does.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let settings = db.dictionary()?;
    /// settings.set("volume", &7)?;
    /// settings.remove("volume")?;
    /// assert_eq!(settings.get::<i32>("volume")?, None);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn remove(&self, key: &str) -> Result<()> {
        self.refuse_if_read_only("a remove")?;
        self.inner.report_write_behind()?;
        self.inner.write(key, None).map(drop)
    }

    /// [`Error::ReadOnly`] naming `refused` on a read-only database: a write would be taken in
    /// memory, read back by `get`, and fail only at the save (found by the review of the
    /// Python package).
    fn refuse_if_read_only(&self, refused: &str) -> Result<()> {
        let db = &self.inner.db;
        if !db.is_read_only() {
            return Ok(());
        }
        Err(Error::ReadOnly { path: db.path().to_path_buf(), refused: format!("{refused} in dictionary {:?}", &*self.inner.name) })
    }

    /// Every key with a value, from storage and pending writes, in order.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let settings = db.dictionary()?;
    /// settings.set("b", &2)?;
    /// settings.set("a", &1)?;
    /// settings.flush()?;
    /// settings.set("c", &3)?; // pending writes count too
    /// settings.remove("b")?;
    /// assert_eq!(settings.keys()?, ["a", "c"]);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn keys(&self) -> Result<Vec<String>> {
        let inner = &self.inner;
        let (mut keys, overrides) = loop {
            // Storage, then what the cache holds that storage may not: pending writes and the
            // save in flight. A save that commits in between can make an entry evictable
            // before the scan sees it, while the snapshot predates it: then read again (a
            // save commits at most once per flush, so this ends).
            let saves = inner.saves.load(Ordering::Acquire);
            let keys = inner.db.read(|tx| keys::all(tx, &inner.keyspace))?;
            let mut overrides: HashMap<String, bool> = HashMap::new();
            for shard in inner.shards.iter() {
                let shard = lock(shard);
                for (key, entry) in shard.entries.iter().filter(|(_, e)| e.ahead_of_storage()) {
                    overrides.insert(key.to_string(), entry.value.is_some());
                }
            }
            if inner.saves.load(Ordering::Acquire) == saves {
                break (keys, overrides);
            }
        };
        keys.retain(|key| overrides.get(key).copied().unwrap_or(true));
        keys.extend(overrides.into_iter().filter(|(_, present)| *present).map(|(key, _)| key));
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    /// Removes every key, pending writes included, in one transaction.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let settings = db.dictionary()?;
    /// settings.set("a", &1)?;
    /// settings.clear()?;
    /// assert!(settings.keys()?.is_empty());
    /// assert_eq!(settings.get::<i32>("a")?, None);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn clear(&self) -> Result<()> {
        let inner = &self.inner;
        inner.db.write_with(Durability::Immediate, |tx| {
            keys::remove_all(tx, &inner.keyspace)?;
            let inner = inner.clone();
            tx.after_commit(Box::new(move || {
                // Storage is empty: so is the cache, and it is complete if it was.
                inner.clears.fetch_add(1, Ordering::AcqRel);
                for shard in inner.shards.iter() {
                    let mut shard = lock(shard);
                    shard.entries.clear();
                    shard.dirty.clear();
                }
            }));
            Ok(())
        })
    }

    /// Returns once everything set so far, by every thread, is written and durable.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("db");
    /// {
    ///     let db = tessera::Db::open(&path)?;
    ///     let settings = db.dictionary()?;
    ///     settings.set("volume", &7)?;
    ///     settings.flush()?; // durable now
    /// }
    /// let db = tessera::Db::open(&path)?;
    /// assert_eq!(db.dictionary()?.get::<i32>("volume")?, Some(7));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn flush(&self) -> Result<()> {
        let inner = &self.inner;
        let target = inner.sequence.load(Ordering::SeqCst);
        // A flush collects every write with a sequence up to the one read at its start, so one
        // flush started after `target` was read covers everything set so far.
        if target > lock(&inner.flusher.state).flushed {
            inner.flush_pending()?;
        }
        inner.db.sync()
    }

    /// Flushes and reports the outcome; dropping the last handle flushes too, but can only
    /// report a failure on standard error.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let settings = db.dictionary()?;
    /// settings.set("volume", &7)?;
    /// settings.close()?; // flushed, and any failure reported here
    /// assert_eq!(db.dictionary()?.get::<i32>("volume")?, Some(7));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn close(self) -> Result<()> {
        self.flush()
    }

    /// Subscribes to `key`: [`crate::live::Event::Initial`] with its value now (pending writes
    /// are saved first, so it is what [`Dictionary::get`] reads unless another thread writes
    /// meanwhile, and a failed save is returned here), then `Changed` with its value each time
    /// a write that changes it is committed (`None`: removed; a write of the same bytes is not
    /// a change), then `Closed` when the database closes. Every value reported is one storage
    /// held. Background saves commit with [`Durability::BUFFERED`]: a value reported may be
    /// lost to a power failure until it is flushed ([`Dictionary::flush`] makes it durable).
    /// A stored value that does not decode as `T` ends the subscription with the error.
    ///
    /// ```
    /// use tessera::live::Event;
    /// use std::time::Duration;
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let settings = db.dictionary()?;
    /// let volume = settings.subscribe::<u32>("volume")?;
    /// assert!(matches!(volume.recv_timeout(Duration::from_secs(5)), Some(Event::Initial(None))));
    /// settings.set("volume", &7u32)?;
    /// settings.flush()?; // reaches storage now, not after the flush interval
    /// assert!(matches!(volume.recv_timeout(Duration::from_secs(5)), Some(Event::Changed(Some(7)))));
    /// settings.remove("volume")?;
    /// settings.flush()?;
    /// assert!(matches!(volume.recv_timeout(Duration::from_secs(5)), Some(Event::Changed(None))));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn subscribe<T: DeserializeOwned + Send + 'static>(&self, key: &str) -> Result<ValueSubscription<T>> {
        stream::subscribe(self, key)
    }

    /// The dictionary's name.
    ///
    /// ```
    /// use tessera::DictionaryOptions;
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// assert_eq!(db.dictionary_with("settings", DictionaryOptions::default())?.name(), "settings");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn name(&self) -> &str {
        &self.inner.name
    }
}

impl Drop for Dictionary {
    /// The last handle saves the pending values before its drop returns, waiting for a save
    /// the flusher has under way: the state's own drop, and a final save there, could run on
    /// the flusher thread after this drop returned, and a dictionary of the same name opened
    /// at once read the file before that save (seen once in CI's `dictionary_model` with a
    /// 1 ms flusher; two handles dropped at once each saw the other and neither saved).
    ///
    /// Dropped inside a write transaction of this thread, whose writer lock a save would wait
    /// for forever, it hands the state to a thread that saves as soon as that transaction
    /// ends. The state stays alive until then: the same dictionary opened meanwhile gets it,
    /// with the pending values, rather than a new cache that reads the file before the save.
    fn drop(&mut self) {
        if self.inner.handles.fetch_sub(1, Ordering::SeqCst) != 1 {
            return;
        }
        if crate::store::writing_on_this_thread() {
            if !self.inner.has_unsaved() {
                return;
            }
            let inner = self.inner.clone();
            let spawned = std::thread::Builder::new().name(format!("tessera-dict-{}-last", inner.name)).spawn(move || {
                if let Err(error) = inner.flush_pending() {
                    // The state's own drop tries again, and says why it could not.
                    eprintln!("tessera: dictionary {:?} could not write its pending values when dropped: {error}", inner.name);
                }
            });
            if let Err(error) = spawned {
                eprintln!("tessera: dictionary {:?} could not start the save of its pending values: {error}", self.inner.name);
            }
            return;
        }
        // A save under way (the flusher's) lands before this drop returns.
        drop(lock(&self.inner.save));
        if self.inner.has_unsaved() {
            // A failure leaves the values pending: the state's own drop writes them or says
            // why it could not (on standard error: a drop cannot return it).
            let _ = self.inner.flush_pending();
        }
    }
}

impl DictInner {
    /// Whether a write is not saved yet: pending for the flusher, or dirty in a shard.
    fn has_unsaved(&self) -> bool {
        self.has_pending.load(Ordering::SeqCst) || !self.shards.iter().all(|s| lock(s).dirty.is_empty())
    }
}

impl Drop for DictInner {
    fn drop(&mut self) {
        {
            let mut flusher = lock(&self.flusher.state);
            flusher.stopped = true;
            self.flusher.changed.notify_all();
        }
        if let Some(thread) = lock(&self.thread).take()
            && thread.thread().id() != std::thread::current().id()
        {
            let _ = thread.join();
        }
        let pending = self.has_unsaved();
        if pending && crate::store::writing_on_this_thread() {
            // Dropped inside a write transaction of this thread, whose writer lock a flush here
            // would wait for forever: hand the pending values to a thread that writes them as
            // soon as that transaction ends.
            let batch = in_key_order(self.take_pending());
            let (db, keyspace, name) = (self.db.clone(), self.keyspace.clone(), self.name.clone());
            let hash = self.long_key_hash.clone();
            let spawned = std::thread::Builder::new().name(format!("tessera-dict-{name}-last")).spawn(move || {
                let written = db.write_with(Durability::BUFFERED, |tx| write_batch(tx, &keyspace, &hash, &batch));
                if let Err(error) = written.and_then(|()| db.sync()) {
                    eprintln!("tessera: dictionary {name:?} could not write its pending values when dropped: {error}");
                }
            });
            if let Err(error) = spawned {
                eprintln!("tessera: dictionary {:?} could not write its pending values when dropped: {error}", self.name);
            }
            return;
        }
        if pending && let Err(error) = self.flush_pending().and_then(|()| self.db.sync()) {
            // Drop cannot return it: say so rather than swallow it (`close` returns it).
            eprintln!("tessera: dictionary {:?} could not write its pending values when dropped: {error}", self.name);
        }
    }
}

/// Dictionary writes inside a database transaction.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let settings = db.dictionary()?;
/// let tasks = db.keyspace("tasks")?;
/// db.write(|tx| {
///     tx.put(&tasks, b"t1", b"write the docs")?;
///     tx.dictionary(&settings).set("last_task", "t1") // commits with the put, or not at all
/// })?;
/// assert_eq!(settings.get::<String>("last_task")?, Some("t1".to_owned()));
/// # Ok::<(), tessera::Error>(())
/// ```
pub struct DictTxn<'t, 'db> {
    tx: &'t mut WriteTxn<'db>,
    dictionary: &'t Dictionary,
}

impl<'db> WriteTxn<'db> {
    /// `dictionary`'s writes inside this transaction: they commit with the rest of it.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let settings = db.dictionary()?;
    /// db.write(|tx| tx.dictionary(&settings).set("volume", &7))?;
    /// assert_eq!(settings.get::<i32>("volume")?, Some(7));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn dictionary<'t>(&'t mut self, dictionary: &'t Dictionary) -> DictTxn<'t, 'db> {
        DictTxn { tx: self, dictionary }
    }
}

impl DictTxn<'_, '_> {
    /// Sets `key` in the transaction.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let settings = db.dictionary()?;
    /// let failed: tessera::Result<()> = db.write(|tx| {
    ///     tx.dictionary(&settings).set("volume", &7)?;
    ///     Err(tessera::Error::Corrupted("a later step fails".into()))
    /// });
    /// assert!(failed.is_err());
    /// assert_eq!(settings.get::<i32>("volume")?, None, "rolled back with the transaction");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn set<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<()> {
        let bytes = tessera_value::to_shared(value)?;
        self.dictionary.inner.check_entry_len(key, &bytes)?;
        let inner = &self.dictionary.inner;
        keys::store(self.tx, &inner.keyspace, &inner.long_key_hash, key, &bytes)?;
        self.cache_after_commit(key, Some(bytes));
        Ok(())
    }

    /// Removes `key` in the transaction.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let settings = db.dictionary()?;
    /// db.write(|tx| tx.dictionary(&settings).set("volume", &7))?;
    /// db.write(|tx| tx.dictionary(&settings).remove("volume"))?;
    /// assert_eq!(settings.get::<i32>("volume")?, None);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn remove(&mut self, key: &str) -> Result<()> {
        let inner = &self.dictionary.inner;
        keys::remove(self.tx, &inner.keyspace, &inner.long_key_hash, key)?;
        self.cache_after_commit(key, None);
        Ok(())
    }

    /// The value of `key` as this transaction sees it (pending writes of the cache included).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let settings = db.dictionary()?;
    /// settings.set("volume", &7)?; // pending in the cache: the transaction sees it
    /// let seen = db.write(|tx| {
    ///     let mut dict = tx.dictionary(&settings);
    ///     dict.set("brightness", &3)?;
    ///     Ok((dict.get::<i32>("volume")?, dict.get::<i32>("brightness")?))
    /// })?;
    /// assert_eq!(seen, (Some(7), Some(3)));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        let inner = &self.dictionary.inner;
        // This transaction's own write of the key is newer than any pending one.
        let written_here = self.tx.local::<WrittenInTxn>().is_some_and(|written| written.contains(&inner.name, key));
        let pending = if written_here {
            None
        } else {
            let shard = lock(inner.shard(key));
            shard.entries.get(key).filter(|e| e.pending > 0).map(|e| e.value.clone())
        };
        let bytes = match pending {
            Some(value) => value.map(|v| v.to_vec()),
            None => keys::load(&*self.tx, &inner.keyspace, &inner.long_key_hash, key)?,
        };
        match bytes {
            None => Ok(None),
            Some(bytes) => {
                let doc = crate::stored_doc::validate(&bytes).map_err(|error| inner.value_error(key, error))?;
                tessera_value::from_value(doc.root()).map(Some).map_err(|error| inner.value_error(key, error))
            }
        }
    }

    fn cache_after_commit(&mut self, key: &str, value: Option<Arc<[u8]>>) {
        let inner = self.dictionary.inner.clone();
        self.tx.local_mut::<WrittenInTxn>().insert(&inner.name, key);
        let key: Arc<str> = key.into();
        self.tx.after_commit(Box::new(move || {
            // Committed: the cache takes the value, and any pending write of the key (older
            // than this transaction) is superseded. Counted as a save first: the entry is
            // evictable at once, and a load from a snapshot before this commit must not cache
            // the older value after it is evicted (found by review).
            inner.saves.fetch_add(1, Ordering::AcqRel);
            let mut shard = lock(inner.shard(&key));
            shard.entries.insert(key, Entry::clean(value, true));
        }));
    }
}

/// The dictionary keys a write transaction has set or removed (by dictionary name): its reads
/// of them come from the transaction, not from the cache's older pending writes.
#[derive(Default)]
struct WrittenInTxn(HashMap<Arc<str>, std::collections::HashSet<Box<str>>>);

impl WrittenInTxn {
    fn insert(&mut self, dictionary: &Arc<str>, key: &str) {
        self.0.entry(dictionary.clone()).or_default().insert(key.into());
    }

    fn contains(&self, dictionary: &str, key: &str) -> bool {
        self.0.get(dictionary).is_some_and(|keys| keys.contains(key))
    }
}

/// Checks a dictionary's keyspace for [`crate::Db::check`]: every key decodes, every long key
/// lies under this file's keyed hash of it, and every value validates.
pub(crate) fn check(db: &Db, txn: &crate::store::ReadTxn<'_>, keyspace: &Keyspace, report: &mut crate::CheckReport) -> Result<()> {
    let hash = keys::LongKeyHash::keyed(db.hash_key());
    for entry in txn.range(keyspace, ..)? {
        let (stored, record) = entry?;
        report.entries += 1;
        match keys::value_of(&hash, stored, record) {
            Ok(value) => {
                if let Err(error) = crate::stored_doc::validate(value) {
                    report.problem(keyspace.name(), stored, format!("value does not validate: {error}"));
                }
            }
            Err(what) => report.problem(keyspace.name(), stored, what),
        }
    }
    Ok(())
}

/// The dictionary's step of the migration of a file of an older storage format (the store
/// calls it for every keyspace, in the migration's one transaction): in a dictionary's
/// keyspace of a file of format 1 to 4, every long key moves from the unkeyed `key_hash_v1`
/// to the file's keyed hash. Other keyspaces, and files of format 5, are left alone.
pub(crate) fn upgrade_keyspace(tx: &mut WriteTxn<'_>, keyspace: &Keyspace, upgrade: &crate::store::Upgrade<'_>) -> Result<()> {
    if upgrade.from_version >= 5 || !keyspace.name().starts_with(DICTIONARY_KEYSPACE_PREFIX) {
        return Ok(());
    }
    keys::replace_long_keys(tx, keyspace, &keys::LongKeyHash::keyed(upgrade.hash_key))
}

#[cfg(test)]
mod tests {
    //! The bulk load's internals: when it runs, and values it leaves unvalidated.
    use super::*;

    fn stored(dir: &tempfile::TempDir, count: u32) -> Db {
        {
            let db = Db::open(dir.path().join("db")).unwrap();
            let dict = db.dictionary().unwrap();
            for i in 0..count {
                dict.set(&format!("k{i}"), &i).unwrap();
            }
            dict.close().unwrap();
        }
        Db::open(dir.path().join("db")).unwrap()
    }

    #[test]
    fn a_few_cold_reads_stay_key_by_key_and_many_load_the_rest_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let db = stored(&dir, 10_000);
        let dict = db.dictionary().unwrap();
        // 10,000 entries: 64 misses are too few (64 x 2 < 10,000), 5,000 are enough.
        for i in 0..BULK_LOAD_MISSES_MIN as u32 {
            assert_eq!(dict.get::<u32>(&format!("k{i}")).unwrap(), Some(i));
        }
        assert!(!dict.inner.complete.load(Ordering::Acquire));
        for i in 0..10_000u32 {
            assert_eq!(dict.get::<u32>(&format!("k{i}")).unwrap(), Some(i));
        }
        assert!(dict.inner.complete.load(Ordering::Acquire));
        let misses = dict.inner.misses.load(Ordering::Relaxed);
        assert!(misses <= 10_000 / BULK_LOAD_ENTRIES_PER_MISS + BULK_LOAD_MISSES_MIN, "{misses} misses");
        // Complete: an absent key is known absent, and is not cached.
        assert_eq!(dict.get::<u32>("absent").unwrap(), None);
        assert!(!lock(dict.inner.shard("absent")).entries.contains_key("absent"));
    }

    #[test]
    fn a_damaged_value_loaded_in_bulk_is_an_error_when_read() {
        let dir = tempfile::tempdir().unwrap();
        let db = stored(&dir, 200);
        let keyspace = db.internal_keyspace("tessera.dictionary.default").unwrap();
        db.write(|tx| tx.put(&keyspace, &crate::store::key::encode("k150"), &[0xFF, 0x00, 0x13])).unwrap();
        let dict = db.dictionary().unwrap();
        for i in 0..150u32 {
            assert_eq!(dict.get::<u32>(&format!("k{i}")).unwrap(), Some(i));
        }
        assert!(dict.inner.complete.load(Ordering::Acquire), "200 entries: 128 misses load them all");
        assert!(matches!(dict.get::<u32>("k150"), Err(Error::DictionaryValue { .. })));
        assert!(matches!(dict.with_value("k150", |_| ()), Err(Error::DictionaryValue { .. })));
        assert_eq!(dict.get::<u32>("k151").unwrap(), Some(151));
    }
}
