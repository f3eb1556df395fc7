//! Replication of tessera collections into PostgreSQL, exactly once, from tessera's durable
//! change feed (issue 19).
//!
//! **Tables.** One table per collection, named like it: `tessera_key bytea PRIMARY KEY` (the
//! stored key, tessera's order-preserving encoding), one column per key field and per
//! indexed field, typed (integers `bigint`, `u64` and integers of unrecorded width
//! `numeric`; floats `double precision`; strings `text`; bools `boolean`; bytes `bytea`;
//! anything else `jsonb`; NULL when missing), and `record jsonb` with the whole record. A field that is not a column
//! just goes in `record`; a newly indexed field gets its column (filled from `record`). A
//! table that exists with another shape is refused ([`ReplicateError::TableShape`] names the
//! table and the column). A value PostgreSQL cannot hold as tessera stores it (a NUL
//! character, NaN, an infinity, `-0.0`, an integer above a `bigint` column's range) is refused
//! ([`ReplicateError::Value`] names the collection, key and field). Only collections are
//! replicated: documents, dictionaries and application keyspaces are not.
//!
//! **Exactly once.** Each group of commits (bounded by
//! [`ReplicatorOptions::batches_per_transaction`] and
//! [`ReplicatorOptions::changes_per_transaction`]; a commit is never split) is applied in one
//! PostgreSQL transaction that also moves the consumer's row of [`CURSOR_TABLE`]; that row is
//! the source of truth, read at start and locked in every transaction; it also names the
//! collections the replica holds, and a start asking for one it does not hold (its records
//! before the cursor were never copied) is refused unless [`ReplicatorOptions::resync`]
//! copies again. tessera's consumer is
//! acknowledged after PostgreSQL commits, for the feed's retention only. The first run (no
//! cursor row) copies every record from one tessera snapshot and sets the cursor to that
//! snapshot's commit, in one transaction.
//!
//! **Failures.** A connection failure is retried on a new connection with bounded
//! exponential backoff ([`RetryPolicy`]), from PostgreSQL's cursor. A feed that no longer has
//! the commits after the cursor is [`ReplicateError::CursorExpired`], or a new full copy
//! with [`ReplicatorOptions::resync`].
//!
//! ```no_run
//! use std::sync::atomic::AtomicBool;
//! use tessera_postgres::{PollWait, Replicator, ReplicatorOptions};
//! let db = tessera::Db::open("app.tessera")?;
//! let mut options = ReplicatorOptions::new("host=127.0.0.1 user=postgres");
//! options.collections = Some(vec!["people".into()]);
//! let mut replicator = Replicator::start(&db, options)?;
//! replicator.catch_up()?;
//! replicator.follow(&mut PollWait::default(), &AtomicBool::new(false))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod cells;
mod collections;
mod columns;
mod digest;
mod error;
mod ident;
mod options;
mod plan;
mod replicator;
mod rows;
mod server;
mod session;
mod table;
mod wait;

pub use columns::{ColumnType, FieldColumn, KEY_COLUMN, RECORD_COLUMN, TableShape};
pub use digest::{Digest, postgres_digest, tessera_digest};
pub use error::{ReplicateError, Result};
pub use ident::IDENTIFIER_LEN_MAX;
pub use options::{BATCHES_PER_TRANSACTION_MAX, RETRY_ATTEMPTS_MAX, ReplicatorOptions, RetryPolicy};
pub use replicator::{ACK_INTERVAL_MS_MAX, ReplicationStats, Replicator};
pub use rows::ROWS_PER_STATEMENT_MAX;
pub use server::{ServerError, TempPostgres};
pub use table::CURSOR_TABLE;
pub use wait::{FeedWait, PollWait, Wait};
