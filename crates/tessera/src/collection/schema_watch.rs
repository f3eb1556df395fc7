//! A collection handle's guard against another process changing the collection's schema
//! under it. A handle writes records and index entries by the shape, primary key and indexes
//! it was opened with; when another process has since opened the collection with others (a
//! new index, a dropped one whose id is reused, a migration), those writes would leave that
//! index without entries, or records in the old shape, and reads through the indexes would
//! take another index's entries as their own. A change made in this process supersedes the
//! handle at once ([`super::CollectionState::current`]); this module finds one made elsewhere.
//!
//! Cost: a view that includes no other process's commit since the schema was last checked
//! ([`crate::store::Snapshot::foreign_commits_after`]: two atomics) and is not older than the
//! handle (one more) reads nothing. Otherwise the stored schema is read (one get) and compared
//! with the bytes seen last; only different bytes (an index that became ready, or a real
//! change) are decoded and compared. A snapshot older than the handle (kept from before this
//! process opened it) is checked the same way, so that it is never read by index ids its
//! schema gave to other indexes.

use super::schema::StoredSchema;
use crate::store::{Keyspace, Snapshot};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// What [`SchemaWatch::difference`] names when the primary key's fields changed.
const PRIMARY_KEY: &str = "primary key";
/// ... when the record shape changed.
const RECORD_SHAPE: &str = "record shape";
/// ... when only the indexes changed (records are still read as before).
pub(crate) const INDEXES: &str = "indexes";

/// See the module docs.
pub(crate) struct SchemaWatch {
    /// `tessera.schema`.
    schemas: Keyspace,
    /// The primary key's fields the handle writes by (a record type's, or the stored ones).
    key_fields: Vec<String>,
    /// The last commit at which the stored schema was found to be the handle's (0: never
    /// checked; the handle was made from it, so the first check passes unless it changed).
    checked_through: AtomicU64,
    /// The stored schema's bytes at that check.
    bytes_seen: Mutex<Vec<u8>>,
    /// The commit the handle's schema is in effect from: a view before it (a snapshot kept
    /// from earlier) may hold an older schema without any change since the handle was made.
    made_at: u64,
    /// Views from this commit on hold the handle's schema unless another process committed
    /// since ([`SchemaWatch::check`]); an older view's stored schema is read and compared.
    /// `made_at`, or the commit before it once a view of that commit was found to agree (an
    /// open that wrote nothing has the next commit as `made_at`, while the views it reads
    /// from are of the one before).
    checked_from: AtomicU64,
}

/// The stored schema differs from the handle's.
pub(crate) struct ChangedElsewhere {
    /// What changed, as the error says it.
    pub(crate) reason: String,
    /// Only the indexes changed: records are still read by key as before.
    pub(crate) indexes_only: bool,
    /// Seen in a view older than the handle: that read is refused, the handle is not
    /// superseded.
    pub(crate) before_handle: bool,
    /// The schema record could not be read (a damaged value, or a view of another database:
    /// `Error::ForeignKeyspace`): that error, not a change, is what the read returns.
    pub(crate) unreadable: Option<Box<crate::Error>>,
}

impl SchemaWatch {
    /// The primary key's field paths, in key order.
    pub(crate) fn key_fields(&self) -> &[String] {
        &self.key_fields
    }

    /// `made_at`: the commit from which the stored schema is the handle's (0: unknown, any).
    pub(crate) fn new(schemas: Keyspace, key_fields: Vec<String>, made_at: u64) -> SchemaWatch {
        SchemaWatch {
            schemas,
            key_fields,
            checked_through: AtomicU64::new(0),
            bytes_seen: Mutex::new(Vec::new()),
            made_at,
            checked_from: AtomicU64::new(made_at),
        }
    }

    /// `Ok` if `view` holds the schema this handle was made with: `shape` and `indexes` (path,
    /// uniqueness, id) of collection `name`, with this watch's key fields.
    #[inline]
    pub(crate) fn check(
        &self,
        view: &dyn Snapshot,
        shape: &super::TypeDesc,
        indexes: &[super::IndexState],
        name: &str,
    ) -> Result<(), ChangedElsewhere> {
        match view.foreign_commits_after(self.checked_through.load(Ordering::Acquire)) {
            None if view.view_sequence() >= self.checked_from.load(Ordering::Acquire) => Ok(()),
            // A snapshot kept from before the handle: its schema may be another (one this
            // process replaced by opening the handle), whose index ids name other indexes.
            None => self.check_older(view, name, shape, indexes),
            Some(seen) => self.check_stored(view, seen, name, shape, indexes),
        }
    }

    /// [`SchemaWatch::check`] of a view older than the commits already known to hold the
    /// handle's schema, in which no other process's commit is new.
    #[inline(never)]
    fn check_older(
        &self,
        view: &dyn Snapshot,
        name: &str,
        shape: &super::TypeDesc,
        indexes: &[super::IndexState],
    ) -> Result<(), ChangedElsewhere> {
        let sequence = view.view_sequence();
        self.check_stored(view, sequence, name, shape, indexes)?;
        if sequence.checked_add(1) == Some(self.made_at) {
            // No commit lies between this view and the handle's.
            self.checked_from.fetch_min(sequence, Ordering::AcqRel);
        }
        Ok(())
    }

    #[inline(never)]
    fn check_stored(
        &self,
        view: &dyn Snapshot,
        seen_through: u64,
        name: &str,
        shape: &super::TypeDesc,
        indexes: &[super::IndexState],
    ) -> Result<(), ChangedElsewhere> {
        let before_handle = seen_through < self.made_at;
        let changed = |what: &str| match before_handle {
            true => ChangedElsewhere {
                reason: format!("the snapshot read is older than this handle and has another {what}"),
                indexes_only: what == INDEXES,
                before_handle,
                unreadable: None,
            },
            false => ChangedElsewhere {
                reason: format!("another process changed its {what}"),
                indexes_only: what == INDEXES,
                before_handle,
                unreadable: None,
            },
        };
        let bytes = match view.get_value(&self.schemas, name.as_bytes()) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Err(changed("schema record (it was deleted)")),
            // Another database's view, or a damaged record: that error, not a change.
            Err(error @ (crate::Error::ForeignKeyspace { .. } | crate::Error::Corrupted(_))) => {
                return Err(ChangedElsewhere { unreadable: Some(Box::new(error)), ..changed("schema record") });
            }
            // A snapshot begun before this handle opened the keyspace (LMDB's handles are
            // known to the transactions begun after them): read at another schema.
            Err(_) => return Err(changed("schema record (it cannot be read in this snapshot)")),
        };
        let mut seen = self.bytes_seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if *seen != bytes {
            if let Some(what) = self.difference(bytes, shape, indexes) {
                return Err(changed(what));
            }
            seen.clear();
            seen.extend_from_slice(bytes);
        }
        self.checked_through.fetch_max(seen_through, Ordering::AcqRel);
        Ok(())
    }

    /// What of the handle's schema (`shape`, `indexes` and this watch's key fields) the stored
    /// schema record `bytes` changes, as an error says it; `None` when they agree.
    pub(crate) fn difference(&self, bytes: &[u8], shape: &super::TypeDesc, indexes: &[super::IndexState]) -> Option<&'static str> {
        let Ok(stored) = tessera_value::from_slice::<StoredSchema>(bytes) else {
            return Some("schema record (it does not parse)");
        };
        if stored.key_fields != self.key_fields {
            return Some(PRIMARY_KEY);
        }
        // Another program's declaration of the same records (a Python `int` where Rust
        // says `i64`) is no change: what each writes, the other reads. A float's width is: an
        // `f32` handle would read the other's doubles rounded, or write doubles an `f32`
        // reader rounds.
        if !stored.shape.agrees_with(shape) || float_widths_differ(&stored.shape, shape) {
            return Some(RECORD_SHAPE);
        }
        let stored_indexes = super::sorted_identities(stored.indexes.iter().map(|index| (index.path.as_str(), index.unique, index.id)));
        if stored_indexes != super::sorted_identities(indexes.iter().map(super::IndexState::identity)) {
            return Some(INDEXES);
        }
        None
    }
}

/// Whether a field is `f32` in one shape and `f64` in the other (shapes that
/// [`super::TypeDesc::agrees_with`] each other differ in nothing else a reader rounds by).
fn float_widths_differ(stored: &super::TypeDesc, shape: &super::TypeDesc) -> bool {
    let mut narrowed = Vec::new();
    stored.narrowed_numbers(shape, "", &mut narrowed);
    shape.narrowed_numbers(stored, "", &mut narrowed);
    !narrowed.is_empty()
}
