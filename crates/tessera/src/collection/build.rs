//! Index entries: computing them for a record, keeping them current on every write, and
//! building a new index over existing records in the background.

use super::{show_key, sort_key, CollectionState, IndexState};
use crate::error::{Error, Result};
use crate::store::{Keyspace, WriteTxn};
use crate::Db;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tessera_value::{Doc, SharedKeys};

/// Records indexed per transaction by a background build: small enough that writers wait at
/// most about a millisecond for the build's transaction.
const BUILD_BATCH_RECORDS: usize = 1024;

/// The index entry's key for a record whose field has sort key `component`. Unique indexes
/// key non-null values by the value alone, so that a second record with it collides.
pub(crate) fn entry_key(index: &IndexState, component: &[u8], primary_key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + component.len() + primary_key.len());
    out.push(index.id);
    out.extend_from_slice(component);
    if !index.unique || component[0] == sort_key::TAG_NULL {
        out.extend_from_slice(primary_key);
    }
    out
}

pub(crate) fn component(record: Option<&[u8]>, keys: &SharedKeys, path: &str, out: &mut Vec<u8>) -> Result<bool> {
    out.clear();
    let Some(bytes) = record else { return Ok(false) };
    let doc = Doc::from_trusted_with_keys(bytes, keys)?;
    sort_key::encode_value(crate::query::lookup(doc.root(), path), out);
    Ok(true)
}

/// Where a collection's index entries go: its name (for errors), its index keyspace, and the
/// shared keys its records are read with.
pub(crate) struct IndexTarget<'a> {
    pub(crate) collection: &'a str,
    pub(crate) keyspace: &'a Keyspace,
    pub(crate) keys: &'a SharedKeys,
    /// Shows primary keys in errors ([`super::Record::display_key`]).
    pub(crate) key_text: fn(&[u8]) -> Option<String>,
}

impl CollectionState {
    pub(crate) fn index_target(&self) -> IndexTarget<'_> {
        IndexTarget { collection: &self.name, keyspace: &self.index_keyspace, keys: &self.keys.shared, key_text: self.key_text }
    }
}

/// One index's change for one record: the entry to remove and the entry to add.
type EntryChange = (Option<Vec<u8>>, Option<Vec<u8>>);

/// Replaces the index entries of the record at `primary_key` (`old` → `new`; `None` is no
/// record). A unique index that already holds the new value for another key refuses the
/// write with [`Error::UniqueViolation`], and an entry too long for a key with
/// [`Error::KeySize`] — both before the first change, so that a refused call leaves the
/// transaction as it was (LMDB offers no nested transactions with `MDB_WRITEMAP`).
pub(crate) fn update_entries<'i>(
    tx: &mut WriteTxn<'_>,
    target: &IndexTarget<'_>,
    indexes: impl IntoIterator<Item = &'i IndexState>,
    primary_key: &[u8],
    old: Option<&[u8]>,
    new: Option<&[u8]>,
) -> Result<()> {
    let IndexTarget { collection, keyspace, keys, key_text } = *target;
    let (mut old_component, mut new_component) = (Vec::new(), Vec::new());
    let mut changes: Vec<EntryChange> = Vec::new();
    for index in indexes {
        let had = component(old, keys, &index.path, &mut old_component)?;
        let has = component(new, keys, &index.path, &mut new_component)?;
        if had && has && old_component == new_component {
            continue;
        }
        let remove = had.then(|| entry_key(index, &old_component, primary_key));
        let add = if has {
            let entry = entry_key(index, &new_component, primary_key);
            if entry.len() > crate::store::KEY_LEN_MAX {
                return Err(Error::KeySize { len: entry.len(), max: crate::store::KEY_LEN_MAX });
            }
            if index.unique {
                if let Some(holder) = tx.get(keyspace, &entry)? {
                    if holder != primary_key {
                        return Err(Error::UniqueViolation {
                            collection: collection.to_owned(),
                            index: index.path.clone(),
                            key: show_key(key_text, primary_key),
                            holder: show_key(key_text, holder),
                        });
                    }
                }
            }
            Some(entry)
        } else {
            None
        };
        changes.push((remove, add));
    }
    for (remove, add) in changes {
        if let Some(entry) = remove {
            tx.delete(keyspace, &entry)?;
        }
        if let Some(entry) = add {
            tx.put(keyspace, &entry, primary_key)?;
        }
    }
    Ok(())
}

/// Removes every entry of index `id`.
pub(crate) fn clear_index(tx: &mut WriteTxn<'_>, keyspace: &Keyspace, id: u8) -> Result<()> {
    let keys: Vec<Vec<u8>> = tx.prefix(keyspace, &[id])?.map(|entry| entry.map(|(key, _)| key.to_vec())).collect::<Result<_>>()?;
    for key in keys {
        tx.delete(keyspace, &key)?;
    }
    Ok(())
}

/// Builds the collection's unready indexes on a thread of its own, one index after another, in
/// batches. Writers keep every index current meanwhile, so records written during the build
/// are indexed by their writers and records not yet reached by the build are indexed when it
/// gets there; putting an entry twice is harmless. Queries do not use an index until it is
/// marked ready. An index whose build fails records its own failure; the others still build.
pub(crate) fn start(db: &Db, state: &Arc<CollectionState>) -> Result<()> {
    let building: Vec<u8> = state.indexes.iter().filter(|index| !index.ready.load(Ordering::Acquire)).map(|index| index.id).collect();
    let db = Arc::downgrade(&db.inner);
    let state = Arc::downgrade(state);
    std::thread::Builder::new().name("tessera-index-build".into()).spawn(move || {
        for id in building {
            let mut after: Option<Vec<u8>> = None;
            loop {
                let (Some(inner), Some(state)) = (db.upgrade(), state.upgrade()) else { return };
                let db = Db { inner };
                match build_batch(&db, &state, id, after.as_deref()) {
                    Ok(Some(last)) => after = Some(last),
                    Ok(None) => {
                        if let Err(error) = mark_ready(&db, &state, id) {
                            fail(&state, id, error);
                        }
                        break;
                    }
                    Err(error) => {
                        fail(&state, id, error);
                        break;
                    }
                }
            }
        }
    })?;
    Ok(())
}

fn fail(state: &CollectionState, id: u8, error: Error) {
    for index in state.indexes.iter().filter(|index| index.id == id) {
        *index.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(error.to_string());
    }
}

/// Indexes the next batch of records after `after` into index `id`; returns the last key
/// done, or `None` when there were none left.
fn build_batch(db: &Db, state: &CollectionState, id: u8, after: Option<&[u8]>) -> Result<Option<Vec<u8>>> {
    let building = || state.indexes.iter().filter(|index| index.id == id);
    db.write(|tx| {
        let start = after.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        let batch: Vec<(Vec<u8>, Vec<u8>)> = tx
            .range(&state.records, (start, std::ops::Bound::Unbounded))?
            .take(BUILD_BATCH_RECORDS)
            .map(|entry| entry.map(|(key, value)| (key.to_vec(), value.to_vec())))
            .collect::<Result<_>>()?;
        for (key, value) in &batch {
            update_entries(tx, &state.index_target(), building(), key, None, Some(value))?;
        }
        Ok(batch.last().map(|(key, _)| key.clone()))
    })
}

/// Records in the schema that index `id` is complete, then lets queries use it.
fn mark_ready(db: &Db, state: &CollectionState, id: u8) -> Result<()> {
    let schema_keyspace = db.internal_keyspace(super::SCHEMA_KEYSPACE)?;
    db.write(|tx| {
        let Some(bytes) = tx.get(&schema_keyspace, state.name.as_bytes())? else { return Ok(()) };
        let mut schema: super::StoredSchema = tessera_value::from_slice(bytes)
            .map_err(|error| Error::Corrupted(format!("schema of collection {:?}: {error}", state.name)))?;
        for index in schema.indexes.iter_mut().filter(|index| index.id == id) {
            index.ready = true;
        }
        let bytes = tessera_value::to_vec(&schema)?;
        tx.put(&schema_keyspace, state.name.as_bytes(), &bytes)
    })?;
    for index in state.indexes.iter().filter(|index| index.id == id) {
        index.ready.store(true, Ordering::Release);
    }
    Ok(())
}
