//! Migration of a file of an older storage format when it is opened: one write transaction
//! that rewrites what changed and marks the file with the current version, so that a crash
//! leaves either the old file or the new one, never a mix.
//!
//! - Format 4 stores a checksum after every value (`checksum`): a file of format 1 to 3 gets
//!   one for every value of every keyspace but `tessera.meta`.
//! - Format 5 gives the file a hash key ([`HashKey`]), drawn here from the OS, and lets each
//!   module above the store re-place what it had placed by an unkeyed hash, through the hooks
//!   of [`KEYSPACE_UPGRADES`] (today the dictionary's, for its long keys). The store knows a
//!   hook by its name only: what it changes, and in which keyspaces, is its module's business.
//!
//! - Format 6 adds the durable change feed (`durable_feed`), which a file turns on later; a
//!   file of format 5 gets nothing for it but the new mark, so that a tessera that would write
//!   to it without appending to its feed refuses it.
//! - Format 7 changes how a number is encoded in an index entry (`collection::sort_key`,
//!   "Numbers"): the collections' hook rebuilds every index's entries from the records. A
//!   file of format 5 or 6 keeps its hash key (and a format-6 file its durable feed, which
//!   index entries are not part of).
//!
//! Everything else of older formats (record layouts, documents of formats 1 to 3) is read as
//! it is by the modules above the store.

use super::{
    Db, Durability, HashKey, Keyspace, META_HASH_KEY, META_KEYSPACE, META_VERSION_KEY, WriteTxn, checksum, hash_key_of, version_of,
};
use super::{HASH_KEY_LEN, STORAGE_FORMAT_VERSION};
use crate::error::{Error, Result};
use heed::types::Bytes;
use std::ops::Bound;

/// Entries read into memory at a time while a keyspace is rewritten.
const BATCH_ENTRIES: usize = 4096;

/// What a module's step of the migration is told.
pub(crate) struct Upgrade<'a> {
    /// The storage format the file had.
    pub(crate) from_version: u32,
    /// The hash key the file has from now on.
    pub(crate) hash_key: &'a HashKey,
    /// Every keyspace of the file but `tessera.meta`, for a step that reads one keyspace
    /// while it rewrites another (a collection's records for its indexes).
    pub(crate) keyspaces: &'a [Keyspace],
}

/// A module's step of the migration: called inside its transaction, after every value has its
/// checksum, once for each keyspace of the file but `tessera.meta`. It may read and write
/// that keyspace through `WriteTxn` as any transaction does.
type KeyspaceUpgrade = fn(&mut WriteTxn<'_>, &Keyspace, &Upgrade<'_>) -> Result<()>;

/// The steps of the modules above the store.
const KEYSPACE_UPGRADES: [KeyspaceUpgrade; 2] = [crate::dictionary::upgrade_keyspace, crate::collection::upgrade_keyspace];

/// The first storage format with a hash key: a file of this format or newer keeps its own.
const HASH_KEY_FORMAT: u32 = 5;

/// A new hash key, from the operating system's random source.
pub(crate) fn new_hash_key() -> Result<HashKey> {
    let mut key = [0u8; HASH_KEY_LEN];
    getrandom::fill(&mut key).map_err(|error| Error::Io(error.into()))?;
    Ok(key)
}

/// Migrates the file to the current format in one transaction, and returns its hash key.
/// `names` are the file's keyspaces. The version is read again inside the transaction: a file
/// another process migrated meanwhile is only read.
pub(crate) fn upgrade(db: &Db, names: &[String]) -> Result<HashKey> {
    let meta = db.internal_keyspace(META_KEYSPACE)?;
    let ceiling = db.inner.options.map_size_max_bytes;
    let hash_key = new_hash_key()?;
    db.write_with(Durability::Immediate, |tx| {
        let from_version = version_of(tx.get(&meta, META_VERSION_KEY)?)?;
        if from_version > STORAGE_FORMAT_VERSION {
            return Err(Error::UnsupportedVersion { found: from_version, supported: STORAGE_FORMAT_VERSION });
        }
        if from_version == STORAGE_FORMAT_VERSION {
            return hash_key_of(tx.get(&meta, META_HASH_KEY)?);
        }
        // A file that has a hash key keeps it: its long dictionary keys are placed by it.
        let kept_hash_key = if from_version >= HASH_KEY_FORMAT { Some(hash_key_of(tx.get(&meta, META_HASH_KEY)?)?) } else { None };
        let hash_key = kept_hash_key.unwrap_or(hash_key);
        let mut keyspaces = Vec::with_capacity(names.len());
        for name in names.iter().filter(|name| *name != META_KEYSPACE) {
            // A name no keyspace can have (a NUL byte, which heed would panic on), or a
            // main-tree entry that is not a keyspace, is damage: passed over here as every open
            // passes it over, and reported by `Db::check`.
            if super::names::check("keyspace", name, super::KEYSPACE_NAME_LEN_MAX).is_err() {
                continue;
            }
            let opened = db.inner.env.open_database::<Bytes, Bytes>(tx.raw(), Some(name));
            let handle = db.existing_handle(opened, |e| Error::from_heed(e, ceiling))?;
            if let Some(handle) = handle {
                keyspaces.push(Keyspace::new(&db.inner, name.as_str().into(), handle));
            }
        }
        if from_version < 4 {
            refuse_sealed_values(tx, from_version, &keyspaces)?;
            for keyspace in &keyspaces {
                add_checksums(tx, keyspace)?;
            }
        }
        let upgrade = Upgrade { from_version, hash_key: &hash_key, keyspaces: &keyspaces };
        for keyspace in &keyspaces {
            for step in KEYSPACE_UPGRADES {
                step(tx, keyspace, &upgrade)?;
            }
        }
        if kept_hash_key.is_none() {
            tx.put(&meta, META_HASH_KEY, &hash_key)?;
        }
        tx.put(&meta, META_VERSION_KEY, &STORAGE_FORMAT_VERSION.to_be_bytes())?;
        Ok(hash_key)
    })
}

/// Refuses a file whose version record, which `tessera.meta` keeps without a checksum, is
/// damaged: 0 (no such format), or a format without checksums (1 to 3) while the first value
/// of every keyspace that has one already passes its checksum (a chance of 2^-32 per keyspace
/// for a file of format 1 to 3). Migrating a newer file would seal every value a second time,
/// and reads would return the old checksum as part of the value.
fn refuse_sealed_values(tx: &mut WriteTxn<'_>, from_version: u32, keyspaces: &[Keyspace]) -> Result<()> {
    let why = if from_version == 0 {
        "there is no storage format 0"
    } else if first_values_sealed(tx, keyspaces)? {
        "the file's values already carry checksums (format 4 and later)"
    } else {
        return Ok(());
    };
    Err(Error::Corrupted(format!("keyspace {META_KEYSPACE:?}, key \"format_version\": storage format {from_version} is damaged: {why}")))
}

/// Whether some keyspace has a value, and the first value of each that has one passes its
/// checksum.
fn first_values_sealed(tx: &mut WriteTxn<'_>, keyspaces: &[Keyspace]) -> Result<bool> {
    let mut sealed = false;
    for keyspace in keyspaces {
        let first = match keyspace.handle(tx.inner())?.first(tx.raw()) {
            Ok(first) => first.map(|(key, value)| checksum::open(key, value).is_some()),
            Err(error) => return Err(tx.note_error(error)),
        };
        match first {
            Some(true) => sealed = true,
            Some(false) => return Ok(false),
            None => {}
        }
    }
    Ok(sealed)
}

/// Adds a checksum to every value of `keyspace` (storage format 4).
fn add_checksums(tx: &mut WriteTxn<'_>, keyspace: &Keyspace) -> Result<()> {
    let handle = *keyspace.handle(tx.inner())?;
    let mut sealed = Vec::new();
    // The last key rewritten: the next batch starts after it.
    let mut after: Option<Vec<u8>> = None;
    loop {
        let start = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let batch: heed::Result<Vec<(Vec<u8>, Vec<u8>)>> = match handle.range(tx.raw(), &(start, Bound::Unbounded)) {
            Ok(entries) => entries.take(BATCH_ENTRIES).map(|entry| entry.map(|(key, value)| (key.to_vec(), value.to_vec()))).collect(),
            Err(error) => Err(error),
        };
        let batch = batch.map_err(|error| tx.note_error(error))?;
        for (key, value) in &batch {
            checksum::seal(key, value, &mut sealed);
            if let Err(error) = handle.put(tx.raw(), key, &sealed) {
                return Err(tx.note_error(error));
            }
        }
        match batch.into_iter().last() {
            Some((key, _)) => after = Some(key),
            None => return Ok(()),
        }
    }
}
