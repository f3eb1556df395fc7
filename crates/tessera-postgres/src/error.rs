//! What can go wrong while replicating, one variant per cause, each naming what was wrong.

use std::path::PathBuf;

/// An error of the replicator.
///
/// ```
/// let error = tessera_postgres::ReplicateError::TableShape {
///     table: "people".into(),
///     column: "age".into(),
///     expected: "bigint or numeric".into(),
///     found: "text".into(),
/// };
/// assert_eq!(error.to_string(), "PostgreSQL table people: column age is text, the replica needs bigint or numeric");
/// ```
#[derive(Debug, thiserror::Error)]
pub enum ReplicateError {
    /// tessera failed (I/O, damage, a schema that cannot be read).
    #[error("tessera: {0}")]
    Tessera(tessera::Error),
    /// PostgreSQL refused a statement (not a connection failure: those are retried).
    #[error("PostgreSQL: {0}")]
    Postgres(#[from] postgres::Error),
    /// PostgreSQL stayed unreachable through every retry.
    #[error("PostgreSQL unreachable after {attempts} attempts over {waited_ms} ms: {last}")]
    Unreachable {
        /// Connection attempts made.
        attempts: u32,
        /// Time spent waiting between them, in milliseconds.
        waited_ms: u64,
        /// The last attempt's error.
        last: postgres::Error,
    },
    /// A table exists in PostgreSQL with another shape than the replica needs.
    #[error("PostgreSQL table {table}: column {column} is {found}, the replica needs {expected}")]
    TableShape {
        /// The table.
        table: String,
        /// The column that differs (or is missing).
        column: String,
        /// What the replica needs.
        expected: String,
        /// What the table has (`missing` for an absent column).
        found: String,
    },
    /// A collection, table or column name PostgreSQL cannot hold as it is.
    #[error("{what} {name:?} cannot be a PostgreSQL name: {problem}")]
    Name {
        /// `table` or `column`.
        what: &'static str,
        /// The name.
        name: String,
        /// Why.
        problem: &'static str,
    },
    /// The database file does not have the durable feed on.
    #[error("{path}: the durable feed is off (open the file once with DbOptions::durable_feed)")]
    FeedDisabled {
        /// The file.
        path: PathBuf,
    },
    /// tessera's feed no longer holds the commits after the replica's cursor: resynchronise
    /// (`resync`, a full copy from a snapshot).
    #[error(
        "consumer {consumer}: the feed no longer has the commits after cursor {cursor} (oldest kept {oldest_kept}); resynchronise with --resync"
    )]
    CursorExpired {
        /// The consumer.
        consumer: String,
        /// Its cursor in PostgreSQL.
        cursor: u64,
        /// The oldest sequence the feed still has.
        oldest_kept: u64,
    },
    /// The replica's cursor is past the newest commit of the database file: the file is older
    /// than what the replica holds (put back from a copy, or another file). The replica cannot
    /// follow it commit by commit: resynchronise (`resync`, a full copy from a snapshot).
    #[error(
        "consumer {consumer}: PostgreSQL holds commits up to {cursor}, past the database's newest commit {newest} (a file older than the replica?); resynchronise with --resync"
    )]
    CursorAhead {
        /// The consumer.
        consumer: String,
        /// Its cursor in PostgreSQL.
        cursor: u64,
        /// The newest commit of the database file.
        newest: u64,
    },
    /// The database file's commit at the replica's cursor is not the one the replica applied
    /// (its feed entry has another digest): the file was put back from an older copy, or lost
    /// its last commits in a crash, and has been written since. Reading on from the cursor
    /// would skip the file's own commits up to it: resynchronise (`resync`).
    #[error(
        "consumer {consumer}: the database's commit {cursor} is not the one PostgreSQL holds (the file was restored or lost commits, then written); resynchronise with --resync"
    )]
    HistoryDiverged {
        /// The consumer.
        consumer: String,
        /// Its cursor in PostgreSQL.
        cursor: u64,
    },
    /// A collection asked for (`--collections`) that the database does not have.
    #[error("no collection {collection} in the database")]
    NoSuchCollection {
        /// The collection.
        collection: String,
    },
    /// A record's field value that its column cannot hold.
    #[error("collection {collection}, key {key}: field {field}: {problem}")]
    Value {
        /// The collection.
        collection: String,
        /// The record's key, as tessera shows it.
        key: String,
        /// The field path.
        field: String,
        /// Why.
        problem: String,
    },
    /// An option out of its range.
    #[error("option {option}: {problem}")]
    Options {
        /// The option.
        option: &'static str,
        /// Why.
        problem: String,
    },
}

impl From<tessera::Error> for ReplicateError {
    fn from(error: tessera::Error) -> Self {
        match error {
            tessera::Error::FeedDisabled { path } => ReplicateError::FeedDisabled { path },
            other => ReplicateError::Tessera(other),
        }
    }
}

/// The replicator's result.
///
/// ```
/// use tessera_postgres::{ReplicateError, Result, TableShape};
/// fn table_of(collection: &str, schema: &tessera::collection::DynSchema) -> Result<String> {
///     Ok(TableShape::of(collection, schema)?.table)
/// }
/// # use tessera::collection::{DynSchema, KeyKind, TypeDesc};
/// # // A schema of one string key field named `key`.
/// # let schema = |key: &str| DynSchema {
/// #     version: 1,
/// #     key_fields: vec![key.into()],
/// #     key_kinds: vec![KeyKind::String],
/// #     shape: TypeDesc::Struct(vec![(key.into(), TypeDesc::String)]),
/// #     indexes: vec![],
/// # };
/// assert_eq!(table_of("people", &schema("id")).unwrap(), "people");
/// assert!(matches!(table_of("", &schema("id")), Err(ReplicateError::Name { problem: "empty", .. })));
/// ```
pub type Result<T, E = ReplicateError> = std::result::Result<T, E>;
