//! Storage format 4 stores a checksum after every value (`checksum`). A file of an older
//! format is rewritten when it is opened: every value of every keyspace but `tessera.meta`
//! gets its checksum, in one write transaction that also marks the file version 4, so that a
//! crash leaves either the old file or the new one, never a mix.
//!
//! Everything else of formats 1 to 3 (record layouts, key hashes) is read as it is by the
//! modules above the store.

use super::{checksum, Db, Durability, META_KEYSPACE, META_VERSION_KEY, STORAGE_FORMAT_VERSION};
use crate::error::{Error, Result};
use heed::types::Bytes;
use std::ops::Bound;

/// Entries read into memory at a time while a keyspace is rewritten.
const BATCH_ENTRIES: usize = 4096;

/// Adds a checksum to every value of the keyspaces `names` and marks the file with the current
/// format version, in one transaction.
pub(crate) fn add_checksums(db: &Db, names: &[String]) -> Result<()> {
    let meta = db.internal_keyspace(META_KEYSPACE)?;
    let ceiling = db.inner.options.map_size_max_bytes;
    db.write_with(Durability::Immediate, |tx| {
        let mut sealed = Vec::new();
        for name in names.iter().filter(|name| *name != META_KEYSPACE) {
            let Some(handle) =
                db.inner.env.open_database::<Bytes, Bytes>(tx.raw(), Some(name)).map_err(|e| Error::from_heed(e, ceiling))?
            else {
                continue;
            };
            // The last key rewritten: the next batch starts after it.
            let mut after: Option<Vec<u8>> = None;
            loop {
                let start = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
                let batch: Vec<(Vec<u8>, Vec<u8>)> = handle
                    .range(tx.raw(), &(start, Bound::Unbounded))
                    .map_err(|e| Error::from_heed(e, ceiling))?
                    .take(BATCH_ENTRIES)
                    .map(|entry| entry.map(|(key, value)| (key.to_vec(), value.to_vec())))
                    .collect::<heed::Result<_>>()
                    .map_err(|e| Error::from_heed(e, ceiling))?;
                for (key, value) in &batch {
                    checksum::seal(key, value, &mut sealed);
                    if let Err(error) = handle.put(tx.raw(), key, &sealed) {
                        return Err(tx.note_error(error));
                    }
                }
                match batch.into_iter().last() {
                    Some((key, _)) => after = Some(key),
                    None => break,
                }
            }
        }
        tx.put(&meta, META_VERSION_KEY, &STORAGE_FORMAT_VERSION.to_be_bytes())
    })
}
