//! `tessera::Error`: every way an operation can fail, with what and where.

use std::path::PathBuf;

/// Any error from tessera.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file exists but is not an LMDB file (or is damaged beyond recognition).
    #[error("{path}: not a tessera database (not an LMDB file, or its header is damaged)")]
    NotADatabase {
        /// The file.
        path: PathBuf,
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
    /// The database is already open in this process with a different handle.
    #[error("{0}: already open in this process; share the Db handle instead")]
    AlreadyOpen(PathBuf),
    /// A write transaction's closure panicked; the transaction was rolled back.
    #[error("the write transaction panicked and was rolled back: {0}")]
    Panicked(String),
    /// A binary document could not be read.
    #[error(transparent)]
    Format(#[from] tessera_value::FormatError),
    /// A value could not be encoded.
    #[error(transparent)]
    Encode(#[from] tessera_value::EncodeError),
    /// A value could not be decoded into the requested type.
    #[error(transparent)]
    Decode(#[from] tessera_value::DecodeError),
    /// An I/O error not covered above.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// An LMDB error not covered above.
    #[error("storage engine error: {0}")]
    Storage(String),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// ENOSPC on Linux and macOS.
const NO_SPACE: i32 = 28;

impl Error {
    /// Translates a heed error. `MapFull` is handled by the write path before it gets here.
    pub(crate) fn from_heed(error: heed::Error, ceiling_bytes: u64) -> Error {
        use heed::MdbError;
        match error {
            heed::Error::Io(io) if io.raw_os_error() == Some(NO_SPACE) => Error::DiskFull,
            heed::Error::Io(io) => Error::Io(io),
            heed::Error::Mdb(MdbError::MapFull) => Error::MapFull { ceiling_bytes },
            heed::Error::Mdb(MdbError::Corrupted | MdbError::PageNotFound) => {
                Error::Corrupted(error.to_string())
            }
            heed::Error::Mdb(MdbError::Other(NO_SPACE)) => Error::DiskFull,
            other => Error::Storage(other.to_string()),
        }
    }
}

