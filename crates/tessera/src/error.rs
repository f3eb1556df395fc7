//! `tessera::Error`: every way an operation can fail, with what and where.

use std::path::PathBuf;

/// Any error from tessera.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let ks = db.keyspace("ks")?;
/// match db.write(|tx| tx.put(&ks, &[7u8; 600], b"v")) {
///     Err(tessera::Error::KeySize { len, max }) => assert!(len > max),
///     other => panic!("expected KeySize, got {other:?}"),
/// }
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file exists but is not an LMDB file (or is damaged beyond recognition).
    #[error("{path}: not a tessera database (not an LMDB file, or its header is damaged)")]
    NotADatabase {
        /// The file.
        path: PathBuf,
    },
    /// The handle was opened read-only ([`crate::DbOptions::read_only`]) and the operation
    /// would write.
    #[error("{path}: opened read-only, so refusing {refused}")]
    ReadOnly {
        /// The file.
        path: PathBuf,
        /// What would have been written.
        refused: String,
    },
    /// The durable change feed was asked for, and the file does not have it on
    /// ([`crate::DbOptions::durable_feed`]).
    #[error("{path}: the durable change feed is off for this file (open it once with DbOptions::durable_feed)")]
    FeedDisabled {
        /// The file.
        path: PathBuf,
    },
    /// Retention removed commits after this cursor before they were read: what follows it is no
    /// longer complete. Resynchronise from a snapshot, then read on from its sequence.
    #[error("feed cursor {cursor} expired: commits up to {} were removed; resynchronise from a snapshot", oldest_kept - 1)]
    FeedCursorExpired {
        /// The cursor given.
        cursor: u64,
        /// The oldest sequence the feed can still have.
        oldest_kept: u64,
    },
    /// This process could not rebuild the commits of other processes after `after` for its
    /// subscriptions ([`crate::DbOptions::cross_process_notify`]): retention removed them from
    /// the durable feed before this process read them, or one was written without its old
    /// values (by a tessera older than the file's notification mark, or before the mark: the
    /// commits of a process that opened the file before notification was turned on and wrote
    /// no more since). The process's live
    /// subscriptions end with this error; subscribe again to follow on from a fresh snapshot.
    #[error("commits of other processes after {after} cannot be rebuilt for subscriptions: {reason}")]
    CrossProcessGap {
        /// The last commit delivered in order.
        after: u64,
        /// Why the next ones cannot be rebuilt.
        reason: String,
    },
    /// A feed cursor past the newest commit: given to [`crate::store::Consumer::ack`], or to
    /// [`crate::Db::changes_since`] (a cursor of another file, or of this one before it was put
    /// back from an older copy). Read or acknowledged, it would skip the commits made up to
    /// it; nothing was recorded.
    #[error("feed cursor {cursor} is past the newest commit {newest}")]
    FeedCursorAhead {
        /// The cursor given.
        cursor: u64,
        /// The newest commit.
        newest: u64,
    },
    /// No feed consumer of this name is registered (it was removed).
    #[error("no feed consumer {name:?}")]
    NoSuchConsumer {
        /// The name.
        name: String,
    },
    /// The database has no collection of this name (no stored schema).
    #[error("no collection {collection:?} in this database")]
    NoSuchCollection {
        /// The name asked for.
        collection: String,
    },
    /// A record or key given to a dynamic collection does not fit the stored schema: nothing
    /// was written.
    #[error("collection {collection:?}{}, field `{path}`: {problem}", if key.is_empty() { String::new() } else { format!(", record {key}") })]
    SchemaViolation {
        /// The collection.
        collection: String,
        /// The record's primary key as text, if it could be read (empty otherwise).
        key: String,
        /// The dotted path of the field that disagrees (`$key` for the key given to a read).
        path: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The file is an LMDB database that tessera did not create.
    #[error("{path}: an LMDB database without tessera's metadata; refusing to use it")]
    ForeignDatabase {
        /// The file.
        path: PathBuf,
    },
    /// The database was written by a newer version of tessera.
    #[error("database format version {found} is newer than this library's {supported}")]
    UnsupportedVersion {
        /// Version in the file.
        found: u32,
        /// Newest version this library reads.
        supported: u32,
    },
    /// A salvage ([`crate::collection::salvage`]) was asked to read a file whose storage
    /// format stores no value checksums, so that nothing it read could prove itself.
    #[error("storage format {found} stores no value checksums: a salvage reads format {min} or later")]
    SalvageFormat {
        /// The file's format version.
        found: u32,
        /// The oldest format a salvage reads.
        min: u32,
    },
    /// LMDB found a damaged page or structure.
    #[error("the database file is damaged: {0}")]
    Corrupted(String),
    /// The data no longer fits under the configured map size ceiling.
    #[error("the database is full: it would grow past its ceiling of {ceiling_bytes} bytes")]
    MapFull {
        /// The configured ceiling (`DbOptions::map_size_max_bytes`).
        ceiling_bytes: u64,
    },
    /// The disk (or the file system's quota) is full.
    #[error("no space left on the device")]
    DiskFull,
    /// A key larger than LMDB accepts (511 bytes by default), or empty.
    #[error("key of {len} bytes is out of range (1..={max} bytes)")]
    KeySize {
        /// The key's length.
        len: usize,
        /// The largest key accepted.
        max: usize,
    },
    /// Too many keyspaces (`DbOptions::keyspaces_max`).
    #[error("too many keyspaces (the limit is {0})")]
    TooManyKeyspaces(u32),
    /// The file's last handle in this process was still closing 5 s after an open asked for it
    /// (an open of a file that is open returns the same database).
    #[error("{0}: still closing in this process")]
    AlreadyOpen(PathBuf),
    /// A write transaction's closure panicked; the transaction was rolled back.
    #[error("the write transaction panicked and was rolled back: {0}")]
    Panicked(String),
    /// [`crate::Db::close`] found other handles holding the database; nothing was closed.
    #[error("{path}: still held by {handles} other handle(s){}", if holders.is_empty() { String::new() } else { format!(" (among them: {})", holders.join(", ")) })]
    StillOpen {
        /// The file.
        path: PathBuf,
        /// Handles other than the one being closed: `Db` clones and everything that holds one.
        handles: usize,
        /// The shared states (collections, dictionaries, documents) that have live handles,
        /// such as `collection:accounts`.
        holders: Vec<String>,
    },
    /// A binary document could not be read.
    #[error(transparent)]
    Format(#[from] tessera_value::FormatError),
    /// A value could not be encoded.
    #[error(transparent)]
    Encode(#[from] tessera_value::EncodeError),
    /// A document's field could not be encoded or decoded.
    #[error("document {collection}/{id:?}, field `{field}`: {message}")]
    DocumentField {
        /// The document collection.
        collection: String,
        /// The document's id.
        id: String,
        /// The field (empty when the whole value is at fault).
        field: String,
        /// What went wrong.
        message: String,
    },
    /// A dictionary value is not of the type it was read as.
    #[error("dictionary {dictionary:?}, key {key:?}: {message}")]
    DictionaryValue {
        /// The dictionary.
        dictionary: String,
        /// The key.
        key: String,
        /// What went wrong.
        message: String,
    },
    /// A key path (`friends[0].name`) did not parse.
    #[error(transparent)]
    Path(#[from] tessera_value::PathError),
    /// A value could not be decoded into the requested type.
    #[error(transparent)]
    Decode(#[from] tessera_value::DecodeError),
    /// A query does not parse, names an unknown field, or compares mismatched types.
    #[error(transparent)]
    Query(#[from] crate::query::QueryError),
    /// The record type does not match the schema stored for its collection, and no migration
    /// was registered.
    #[error("collection {collection:?}: the stored schema is incompatible with the record type: {reason}")]
    SchemaMismatch {
        /// The collection.
        collection: String,
        /// What changed.
        reason: String,
    },
    /// `insert` of a key that exists.
    #[error("collection {collection:?}: a record with key {key:?} exists")]
    DuplicateKey {
        /// The collection.
        collection: String,
        /// The key, printed.
        key: String,
    },
    /// `update` or `patch` of a key that does not exist.
    #[error("collection {collection:?}: no record with key {key:?}")]
    NotFound {
        /// The collection.
        collection: String,
        /// The key, printed.
        key: String,
    },
    /// An update tried to change a record's primary key.
    #[error("collection {collection:?}: an update may not change the primary key of {key:?}; delete and insert instead")]
    KeyChanged {
        /// The collection.
        collection: String,
        /// The key, printed.
        key: String,
    },
    /// A write would give two records the same value in a unique index; the transaction is
    /// rolled back.
    #[error("collection {collection:?}: unique index `{index}` already holds this value for key {holder:?} (writing {key:?})")]
    UniqueViolation {
        /// The collection.
        collection: String,
        /// The unique index's field.
        index: String,
        /// The record being written.
        key: String,
        /// The record that holds the value.
        holder: String,
    },
    /// A stored record does not decode as the record type (written under another schema, or
    /// damaged).
    #[error("collection {collection:?}, record {key:?}{}: {message}", if field.is_empty() { String::new() } else { format!(", field `{field}`") })]
    RecordDecode {
        /// The collection.
        collection: String,
        /// The record's key, printed.
        key: String,
        /// The field path where the stored value does not fit the type (dotted names and
        /// `[index]`), or empty when the record as a whole is unreadable.
        field: String,
        /// Why.
        message: String,
    },
    /// A query's expression is deeper than [`crate::query::EXPR_DEPTH_MAX`] levels (a filter
    /// built in code from thousands of `.and(…)` calls): refused before it is checked,
    /// planned or evaluated, each of which walks the tree recursively.
    #[error("collection {collection:?}: the query's expression is deeper than {depth_max} levels")]
    QueryTooDeep {
        /// The collection queried.
        collection: String,
        /// The limit.
        depth_max: usize,
    },
    /// A field path the record type does not have.
    #[error("collection {collection:?}: the record type has no field `{path}`")]
    UnknownField {
        /// The collection.
        collection: String,
        /// The path as given.
        path: String,
    },
    /// A dictionary's background write failed; the call that reports it did nothing.
    #[error("dictionary {dictionary:?}: a background write failed ({message}); nothing was set")]
    WriteBehind {
        /// The dictionary.
        dictionary: String,
        /// Why the write failed.
        message: String,
    },
    /// A name (of a keyspace, a document field, …) that tessera does not accept.
    #[error("invalid {what} name {name:?}: {rule}")]
    InvalidName {
        /// What was being named.
        what: &'static str,
        /// The name as given.
        name: String,
        /// What a valid name is.
        rule: String,
    },
    /// A keyspace (or a collection, dictionary or documents handle, through its keyspaces)
    /// used with a transaction of another database handle: another file, or a handle since
    /// closed. Its LMDB handle would name another keyspace there, or none.
    #[error("keyspace {keyspace:?} belongs to another database handle (another file, or one since closed)")]
    ForeignKeyspace {
        /// The keyspace's name.
        keyspace: String,
    },
    /// A read transaction began before this process opened the keyspace (created it, or first
    /// opened one the file already had): LMDB knows only the keyspaces opened before a
    /// transaction began, and refuses the read. Begin a new read transaction.
    #[error("keyspace {keyspace:?} was opened by this process after this read transaction began, which cannot read it: begin a new one")]
    KeyspaceNewerThanSnapshot {
        /// The keyspace's name.
        keyspace: String,
    },
    /// The call would deadlock: it waits for write transactions, and the calling thread is
    /// inside one (a write inside a write; a subscription inside a write).
    #[error("{operation} inside a write transaction of the same thread would deadlock; {advice}")]
    WouldDeadlock {
        /// What was attempted.
        operation: &'static str,
        /// What to do instead.
        advice: &'static str,
    },
    /// The map must grow, but read transactions of this process stay open (LMDB resizes only
    /// with none).
    #[error("the map must grow, but {0}")]
    GrowthBlocked(&'static str),
    /// The application's own error, returned from a write closure and handed back unchanged
    /// (the transaction rolled back). Make one with [`Error::other`].
    #[error(transparent)]
    Aborted(Box<dyn std::error::Error + Send + Sync>),
    /// A documented limit of tessera's storage layout was reached.
    #[error("limit reached: {what} (at most {limit})")]
    LimitExceeded {
        /// What is limited.
        what: &'static str,
        /// The limit.
        limit: u64,
    },
    /// An I/O error not covered above.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// Committed data could not be flushed to stable storage. The commits happened, are
    /// visible and were delivered on the change feed; they may not survive a power loss.
    #[error("committed, but flushing to stable storage failed: {0}")]
    NotDurable(String),
    /// An LMDB error that no variant above describes.
    #[error("LMDB error: {0}")]
    Lmdb(String),
}

impl Error {
    /// Wraps an application error so that a write closure can return it: the transaction rolls
    /// back and `write` returns it as [`Error::Aborted`], unchanged.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = tessera::Db::open(dir.path().join("db"))?;
    /// let ks = db.keyspace("ks")?;
    /// let result: tessera::Result<()> = db.write(|tx| {
    ///     tx.put(&ks, b"k", b"v")?;
    ///     Err(tessera::Error::other(std::io::Error::other("the caller changed its mind")))
    /// });
    /// match result {
    ///     Err(tessera::Error::Aborted(error)) => assert_eq!(error.to_string(), "the caller changed its mind"),
    ///     other => panic!("{other:?}"),
    /// }
    /// assert_eq!(db.read(|tx| Ok(tx.get(&ks, b"k")?.is_none()))?, true, "rolled back");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn other(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Error {
        Error::Aborted(error.into())
    }
}

/// `Result` with [`Error`].
///
/// ```
/// fn open_counter(path: &std::path::Path) -> tessera::Result<tessera::Dictionary> {
///     tessera::Db::open(path)?.dictionary()
/// }
/// # let dir = tempfile::tempdir().unwrap();
/// assert!(open_counter(&dir.path().join("db")).is_ok());
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// ENOSPC on Linux and macOS.
const NO_SPACE: i32 = 28;
/// EIO: LMDB reports a short write (what a full disk gives it) as an I/O error.
const IO_ERROR: i32 = 5;
/// Below this much free space, an EIO from a write is taken to mean the disk is full.
const FREE_BYTES_FULL_MAX: u64 = 4 << 20;

/// Free bytes on the file system holding `path`, if the platform can tell.
pub(crate) fn free_bytes(path: &std::path::Path) -> Option<u64> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let directory = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
        let c_path = std::ffi::CString::new(directory.as_os_str().as_bytes()).ok()?;
        let mut stats = std::mem::MaybeUninit::<libc::statvfs>::uninit();
        // SAFETY: `c_path` is a valid NUL-terminated string and `stats` points to writable
        // memory of the right type; statvfs initializes it when it returns 0.
        let status = unsafe { libc::statvfs(c_path.as_ptr(), stats.as_mut_ptr()) };
        if status != 0 {
            return None;
        }
        // SAFETY: statvfs returned 0, so `stats` is initialized.
        let stats = unsafe { stats.assume_init() };
        // The field types differ between platforms (u64 on Linux, u32 and c_ulong elsewhere).
        #[allow(clippy::unnecessary_cast)]
        Some(stats.f_bavail as u64 * stats.f_frsize as u64)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

impl Error {
    /// Translates a heed error from a write: an EIO on a nearly full file system is a full
    /// disk (LMDB turns a short write into EIO).
    pub(crate) fn from_heed_write(error: heed::Error, ceiling_bytes: u64, path: &std::path::Path) -> Error {
        let is_eio = match &error {
            heed::Error::Io(io) => io.raw_os_error() == Some(IO_ERROR),
            heed::Error::Mdb(heed::MdbError::Other(code)) => *code == IO_ERROR,
            _ => false,
        };
        if is_eio && free_bytes(path).is_some_and(|free| free < FREE_BYTES_FULL_MAX) {
            return Error::DiskFull;
        }
        Error::from_heed(error, ceiling_bytes)
    }

    /// Translates a heed error. `MapFull` is handled by the write path before it gets here.
    pub(crate) fn from_heed(error: heed::Error, ceiling_bytes: u64) -> Error {
        use heed::MdbError;
        match error {
            heed::Error::Io(io) if io.raw_os_error() == Some(NO_SPACE) => Error::DiskFull,
            heed::Error::Io(io) => Error::Io(io),
            heed::Error::Mdb(MdbError::MapFull) => Error::MapFull { ceiling_bytes },
            heed::Error::Mdb(MdbError::Corrupted | MdbError::PageNotFound) => Error::Corrupted(error.to_string()),
            heed::Error::Mdb(MdbError::Other(NO_SPACE)) => Error::DiskFull,
            other => Error::Lmdb(other.to_string()),
        }
    }
}
