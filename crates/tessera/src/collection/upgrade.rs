//! The collections' step of the storage migration (`store::migrate`): what an older file's
//! index entries need to be read by this code.
//!
//! - Format 7 changed a number component's tie-breaker (see `sort_key`, "Numbers"): an index
//!   entry of a number written by format 6 or older carries the value as a saturated `i64`
//!   where format 7 has the residual. Every index of every collection gets its entries
//!   rebuilt from the records, by the code that keeps them current on writes
//!   ([`build::update_entries`]): an index that was built (ready) is cleared and indexed
//!   again; one still building is cleared only, and its background build, which starts over
//!   when the collection is next opened, indexes every record.
//!
//! The old entries of a unique index never collide under the new encoding: two values with
//! one format-7 component are equal, so they had one format-6 component too.

use super::{IndexState, SCHEMA_KEYSPACE, StoredSchema, build, keys};
use crate::error::{Error, Result};
use crate::store::{Keyspace, Upgrade, WriteTxn};
use std::ops::Bound;

/// The first storage format whose number components have the residual tie-breaker.
pub(crate) const RESIDUAL_NUMBERS_FORMAT: u32 = 7;

/// Records read into memory at a time while an index is rebuilt.
const REBUILD_BATCH_RECORDS: usize = 1024;

/// Prefix of a collection's index keyspace (`tessera.idx.NAME`).
const INDEX_KEYSPACE_PREFIX: &str = "tessera.idx.";

/// Migrates `keyspace` if it is a collection's index keyspace and the file is older than
/// format 7: every index of the collection's stored schema gets its entries rebuilt (see the
/// module doc). Other keyspaces, and files of format 7, are left as they are.
pub(crate) fn upgrade_keyspace(tx: &mut WriteTxn<'_>, keyspace: &Keyspace, upgrade: &Upgrade<'_>) -> Result<()> {
    if upgrade.from_version >= RESIDUAL_NUMBERS_FORMAT {
        return Ok(());
    }
    let Some(name) = keyspace.name().strip_prefix(INDEX_KEYSPACE_PREFIX) else { return Ok(()) };
    let sibling = |wanted: &str| upgrade.keyspaces.iter().find(|keyspace| keyspace.name() == wanted);
    let Some(schema_keyspace) = sibling(SCHEMA_KEYSPACE) else { return Ok(()) };
    let Some(bytes) = tx.get(schema_keyspace, name.as_bytes())? else { return Ok(()) };
    let schema: StoredSchema =
        tessera_value::from_slice(bytes).map_err(|error| Error::Corrupted(format!("schema of collection {name:?}: {error}")))?;
    let shared = match sibling(keys::KEYS_KEYSPACE) {
        Some(keys_keyspace) => keys::load(&*tx, keys_keyspace, name)?,
        None => tessera_value::SharedKeys::new(),
    };
    for index in &schema.indexes {
        build::clear_index(tx, keyspace, index.id)?;
    }
    let ready: Vec<IndexState> = schema.indexes.iter().filter(|index| index.ready).map(|index| IndexState::new(index, true)).collect();
    let records_name = format!("tessera.col.{name}");
    let (false, Some(records)) = (ready.is_empty(), sibling(&records_name)) else { return Ok(()) };
    let target = build::IndexTarget {
        collection: name,
        keyspace,
        records,
        keys: &shared,
        key_text: |_| None,
        key_kinds: &schema.key_kinds,
        verified: false,
    };
    reindex(tx, &target, &ready)
}

/// Puts the entries of every record of `target` into `indexes`, in batches of
/// [`REBUILD_BATCH_RECORDS`] (reads and writes of one transaction cannot interleave).
fn reindex(tx: &mut WriteTxn<'_>, target: &build::IndexTarget<'_>, indexes: &[IndexState]) -> Result<()> {
    // The last record indexed: the next batch starts after it.
    let mut after: Option<Vec<u8>> = None;
    loop {
        let start = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let batch: Vec<(Vec<u8>, Vec<u8>)> = tx
            .range(target.records, (start, Bound::Unbounded))?
            .take(REBUILD_BATCH_RECORDS)
            .map(|entry| entry.map(|(key, value)| (key.to_vec(), value.to_vec())))
            .collect::<Result<_>>()?;
        for (key, value) in &batch {
            build::update_entries(tx, target, indexes, key, None, Some(value))?;
        }
        match batch.into_iter().last() {
            Some((key, _)) => after = Some(key),
            None => return Ok(()),
        }
    }
}
