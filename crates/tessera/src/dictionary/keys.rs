//! How dictionary keys map to storage keys.
//!
//! A key is stored under its order-preserving encoding (`store::key`): escaped and terminated,
//! so the empty key works and keys list in order. A key whose encoding would not fit an LMDB
//! key is *long*: it is stored under `0xFF` (a byte no encoded UTF-8 string starts with), its
//! 64-bit hash (big-endian) and a suffix that tells colliding keys apart, and its record starts
//! with the full key (varint length, bytes).
//!
//! The hash is SipHash-1-3 keyed with the file's hash key ([`LongKeyHash`], storage format 5;
//! formats 1 to 4 used the unkeyed `key_hash_v1`, and [`replace_long_keys`] moves their long
//! keys when such a file is migrated). Every long key with one hash lies in one key range,
//! `0xFF hash ..`, and a lookup scans that range comparing full keys, so any number of keys
//! may share a hash: a collision costs a longer scan, never a refused or lost write, and
//! without the file's key nobody can make one on purpose. The suffix is one byte (0..=254)
//! for the first 255 keys of a hash, then `0xFF` and a big-endian u32.

use crate::error::{Error, Result};
use crate::store::{HashKey, Keyspace, ReadTxn, Snapshot, WriteTxn, key};
use siphasher::sip::SipHasher13;
use std::collections::HashMap;
use std::ops::Bound;
use tessera_value::layout::{read_varint, write_varint};

/// Longest encoded key stored as it is.
const DIRECT_KEY_LEN_MAX: usize = 480;
/// Marker of a hashed (long) key.
const LONG_KEY_MARKER: u8 = 0xFF;
/// Length of a long key's storage prefix: the marker and the hash.
const LONG_PREFIX_LEN: usize = 9;
/// One-byte suffixes run from 0 to this value; the next key of a hash takes a wide suffix.
const NARROW_SUFFIX_MAX: u8 = 254;
/// First byte of a wide suffix (followed by a big-endian u32).
const WIDE_SUFFIX_MARKER: u8 = 0xFF;

enum Slot {
    Direct(Vec<u8>),
    Long(String),
}

fn slot(name: &str) -> Slot {
    let encoded = key::encode(name);
    if encoded.len() <= DIRECT_KEY_LEN_MAX { Slot::Direct(encoded) } else { Slot::Long(name.to_owned()) }
}

/// The hash that places long keys: SipHash-1-3 keyed with the file's hash key (the key's
/// first 8 bytes, little-endian, are SipHash's `k0`, the last 8 `k1`), over the key's UTF-8
/// bytes. It only spreads keys over ranges: collisions are resolved by comparing full keys, so
/// it decides speed, never correctness; keyed, it also keeps anyone without the file from
/// choosing keys that collide.
#[derive(Clone)]
pub(crate) enum LongKeyHash {
    /// Storage format 5 and later.
    Keyed(SipHasher13),
    /// Every key has this hash: for tests of collisions, which the keyed hash makes too rare
    /// to meet.
    #[cfg(test)]
    Constant(u64),
}

impl LongKeyHash {
    /// The hash of the file whose hash key is `hash_key`.
    pub(crate) fn keyed(hash_key: &HashKey) -> LongKeyHash {
        LongKeyHash::Keyed(SipHasher13::new_with_key(hash_key))
    }

    fn hash(&self, name: &[u8]) -> u64 {
        match self {
            LongKeyHash::Keyed(hasher) => hasher.hash(name),
            #[cfg(test)]
            LongKeyHash::Constant(hash) => *hash,
        }
    }

    /// `0xFF` and the hash: the start of every storage key of long keys with this hash.
    fn prefix(&self, name: &str) -> [u8; LONG_PREFIX_LEN] {
        let mut prefix = [0u8; LONG_PREFIX_LEN];
        prefix[0] = LONG_KEY_MARKER;
        prefix[1..].copy_from_slice(&self.hash(name.as_bytes()).to_be_bytes());
        prefix
    }
}

/// Splits a long key's record into (full key, value).
fn split_record(record: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, used) = read_varint(record, 0, record.len())?;
    let end = used.checked_add(usize::try_from(len).ok()?).filter(|&end| end <= record.len())?;
    Some((&record[used..end], &record[end..]))
}

fn corrupt() -> Error {
    Error::Corrupted("dictionary record".into())
}

/// Every long key stored under one hash, from one scan of its range: the full keys and where
/// they are stored, and the suffixes in use.
struct HashRange {
    prefix: [u8; LONG_PREFIX_LEN],
    /// Full key → storage key.
    stored: HashMap<Vec<u8>, Vec<u8>>,
    narrow_used: [bool; NARROW_SUFFIX_MAX as usize + 1],
    wide_max: Option<u32>,
}

/// The bounds of the range of every storage key that starts with `prefix` (`0xFF` and a hash).
fn range_end(prefix: &[u8; LONG_PREFIX_LEN]) -> Option<[u8; LONG_PREFIX_LEN]> {
    // The hash bytes + 1, as a big-endian number; the all-ones hash has no successor, and its
    // range runs to the end of the keyspace (only long keys start with 0xFF).
    let next = u64::from_be_bytes(prefix[1..].try_into().expect("8 bytes")).checked_add(1)?;
    let mut end = *prefix;
    end[1..].copy_from_slice(&next.to_be_bytes());
    Some(end)
}

/// Calls `visit(storage key, full key, value)` for every entry in the range of `prefix`.
fn scan(
    tx: &dyn Snapshot,
    keyspace: &Keyspace,
    prefix: &[u8; LONG_PREFIX_LEN],
    mut visit: impl FnMut(&[u8], &[u8], &[u8]) -> Result<()>,
) -> Result<()> {
    let end = range_end(prefix);
    let end_bound = end.as_ref().map_or(Bound::Unbounded, |end| Bound::Excluded(&end[..]));
    for entry in tx.entries(keyspace, Bound::Included(&prefix[..]), end_bound)? {
        let (stored, record) = entry?;
        let (full, value) = split_record(record).ok_or_else(corrupt)?;
        visit(stored, full, value)?;
    }
    Ok(())
}

impl HashRange {
    /// Scans the range of `prefix` once.
    fn load(tx: &dyn Snapshot, keyspace: &Keyspace, prefix: [u8; LONG_PREFIX_LEN]) -> Result<HashRange> {
        let mut range = HashRange { prefix, stored: HashMap::new(), narrow_used: [false; NARROW_SUFFIX_MAX as usize + 1], wide_max: None };
        scan(tx, keyspace, &prefix, |stored, full, _| {
            range.mark(stored, true)?;
            range.stored.insert(full.to_vec(), stored.to_vec());
            Ok(())
        })?;
        Ok(range)
    }

    /// Notes that the storage key `stored` is used (or free again, for a narrow suffix).
    fn mark(&mut self, stored: &[u8], used: bool) -> Result<()> {
        match &stored[LONG_PREFIX_LEN..] {
            [narrow] if *narrow <= NARROW_SUFFIX_MAX => self.narrow_used[*narrow as usize] = used,
            [WIDE_SUFFIX_MARKER, wide @ ..] if wide.len() == 4 => {
                let wide = u32::from_be_bytes(wide.try_into().expect("4 bytes"));
                self.wide_max = Some(self.wide_max.map_or(wide, |max| max.max(wide)));
            }
            _ => return Err(corrupt()),
        }
        Ok(())
    }

    /// A storage key in the range that no key uses, for a new entry.
    fn free(&self) -> Result<Vec<u8>> {
        let mut free = self.prefix.to_vec();
        match self.narrow_used.iter().position(|&used| !used) {
            Some(narrow) => free.push(narrow as u8),
            None => {
                let wide = self.wide_max.map_or(Some(0), |max| max.checked_add(1)).ok_or(Error::LimitExceeded {
                    what: "long dictionary keys with one hash",
                    limit: u32::MAX as u64 + NARROW_SUFFIX_MAX as u64 + 2,
                })?;
                free.push(WIDE_SUFFIX_MARKER);
                free.extend_from_slice(&wide.to_be_bytes());
            }
        }
        Ok(free)
    }

    /// Sets `name` to `value`: where it is stored, or in a free slot.
    fn store(&mut self, tx: &mut WriteTxn<'_>, keyspace: &Keyspace, name: &str, value: &[u8]) -> Result<()> {
        let stored = match self.stored.get(name.as_bytes()) {
            Some(stored) => stored.clone(),
            None => self.free()?,
        };
        let mut record = Vec::with_capacity(name.len() + value.len() + 10);
        write_varint(&mut record, name.len() as u64);
        record.extend_from_slice(name.as_bytes());
        record.extend_from_slice(value);
        tx.put(keyspace, &stored, &record)?;
        self.mark(&stored, true)?;
        self.stored.insert(name.as_bytes().to_vec(), stored);
        Ok(())
    }

    /// Removes `name` if it is stored.
    fn remove(&mut self, tx: &mut WriteTxn<'_>, keyspace: &Keyspace, name: &str) -> Result<()> {
        // Lookups scan the whole range, so a removed entry leaves no gap to repair.
        if let Some(stored) = self.stored.remove(name.as_bytes()) {
            tx.delete(keyspace, &stored)?;
            self.mark(&stored, false)?;
        }
        Ok(())
    }
}

/// Moves every long key of `keyspace` under `hash`, with fresh suffixes: the migration of a
/// file of storage format 1 to 4, whose long keys lie under the unkeyed `key_hash_v1`. Only
/// the storage keys of the long keys are held in memory (at most 14 bytes each) while the
/// records move one at a time. A record that fails its checksum, or does not start with a
/// UTF-8 key, stops the migration with `Error::Corrupted` naming keyspace and key: moved, it
/// would get a new checksum that hid the damage.
pub(super) fn replace_long_keys(tx: &mut WriteTxn<'_>, keyspace: &Keyspace, hash: &LongKeyHash) -> Result<()> {
    let old_places: Vec<Vec<u8>> = tx
        .range(keyspace, (Bound::Included(&[LONG_KEY_MARKER][..]), Bound::Unbounded))?
        .map(|entry| entry.map(|(stored, _)| stored.to_vec()))
        .collect::<Result<_>>()?;
    for stored in old_places {
        // A key placed earlier in this loop never takes a storage key still in the list: each
        // new place is a free slot of its range, and the list's keys are all in use.
        let record = tx.get(keyspace, &stored)?.expect("listed above, and not taken since");
        let (name, value) = match split_record(record).map(|(full, value)| (std::str::from_utf8(full), value)) {
            Some((Ok(name), value)) => (name.to_owned(), value.to_vec()),
            _ => return Err(corrupt_record(keyspace, &stored)),
        };
        tx.delete(keyspace, &stored)?;
        HashRange::load(tx, keyspace, hash.prefix(&name))?.store(tx, keyspace, &name, &value)?;
    }
    Ok(())
}

fn corrupt_record(keyspace: &Keyspace, stored: &[u8]) -> Error {
    Error::Corrupted(format!(
        "keyspace {:?}, key {} (hex): a long-key record that does not start with its UTF-8 key",
        keyspace.name(),
        key::hex(stored)
    ))
}

/// Another key stored under the same hash, and its value.
pub(super) type Neighbour = (String, Vec<u8>);

/// The value of `name`, read from a read or a write transaction.
pub(super) fn load(tx: &dyn Snapshot, keyspace: &Keyspace, hash: &LongKeyHash, name: &str) -> Result<Option<Vec<u8>>> {
    Ok(load_with_neighbours(tx, keyspace, hash, name)?.0)
}

/// The value of `name`, and for a long key every other key stored under its hash with its
/// value (the scan that finds `name` reads them all, so that a cache can keep them: crafted
/// keys that share a hash then cost one scan, not one per key).
pub(super) fn load_with_neighbours(
    tx: &dyn Snapshot,
    keyspace: &Keyspace,
    hash: &LongKeyHash,
    name: &str,
) -> Result<(Option<Vec<u8>>, Vec<Neighbour>)> {
    match slot(name) {
        Slot::Direct(stored) => Ok((tx.get_value(keyspace, &stored)?.map(<[u8]>::to_vec), Vec::new())),
        Slot::Long(name) => {
            let (mut found, mut neighbours) = (None, Vec::new());
            scan(tx, keyspace, &hash.prefix(&name), |_, full, value| {
                if full == name.as_bytes() {
                    found = Some(value.to_vec());
                } else {
                    let full = std::str::from_utf8(full).map_err(|_| corrupt())?;
                    neighbours.push((full.to_owned(), value.to_vec()));
                }
                Ok(())
            })?;
            Ok((found, neighbours))
        }
    }
}

pub(super) fn store(tx: &mut WriteTxn<'_>, keyspace: &Keyspace, hash: &LongKeyHash, name: &str, value: &[u8]) -> Result<()> {
    match slot(name) {
        Slot::Direct(stored) => tx.put(keyspace, &stored, value),
        Slot::Long(name) => HashRange::load(tx, keyspace, hash.prefix(&name))?.store(tx, keyspace, &name, value),
    }
}

/// Writes a batch of values (`None`: remove). Long keys that share a hash cost one scan of
/// their range for the whole batch, not one per key.
/// Where a batch's new direct keys may be appended: past the keyspace's greatest key. A batch
/// comes in key order (see `in_key_order`), so a first save of many keys appends nearly all of
/// them (no B-tree search, pages filled whole instead of split in half).
struct AppendTail {
    /// The greatest key stored so far (`None`: the keyspace is empty).
    last: Option<Vec<u8>>,
    /// False once the batch has stored a long key (`0xFF …`, greater than every direct key).
    open: bool,
}

impl AppendTail {
    fn admits(&self, stored: &[u8]) -> bool {
        self.open && self.last.as_deref().is_none_or(|last| stored > last)
    }
}

pub(super) fn store_batch<'b>(
    tx: &mut WriteTxn<'_>,
    keyspace: &Keyspace,
    hash: &LongKeyHash,
    batch: impl Iterator<Item = (&'b str, Option<&'b [u8]>)>,
) -> Result<()> {
    let mut ranges: HashMap<[u8; LONG_PREFIX_LEN], HashRange> = HashMap::new();
    let mut tail = AppendTail { last: tx.last_key(keyspace)?, open: true };
    for (name, value) in batch {
        match (slot(name), value) {
            (Slot::Direct(stored), Some(value)) if tail.admits(&stored) => {
                tx.append(keyspace, &stored, value)?;
                tail.last = Some(stored);
            }
            (Slot::Direct(stored), Some(value)) => tx.put(keyspace, &stored, value)?,
            (Slot::Direct(stored), None) => tx.delete(keyspace, &stored).map(drop)?,
            (Slot::Long(name), value) => {
                tail.open = false; // a long key is stored after every direct key
                let prefix = hash.prefix(&name);
                let range = match ranges.entry(prefix) {
                    std::collections::hash_map::Entry::Occupied(range) => range.into_mut(),
                    std::collections::hash_map::Entry::Vacant(slot) => slot.insert(HashRange::load(tx, keyspace, prefix)?),
                };
                match value {
                    Some(value) => range.store(tx, keyspace, &name, value)?,
                    None => range.remove(tx, keyspace, &name)?,
                }
            }
        }
    }
    Ok(())
}

pub(super) fn remove(tx: &mut WriteTxn<'_>, keyspace: &Keyspace, hash: &LongKeyHash, name: &str) -> Result<()> {
    match slot(name) {
        Slot::Direct(stored) => tx.delete(keyspace, &stored).map(|_| ()),
        Slot::Long(name) => HashRange::load(tx, keyspace, hash.prefix(&name))?.remove(tx, keyspace, &name),
    }
}

pub(super) fn remove_all(tx: &mut WriteTxn<'_>, keyspace: &Keyspace) -> Result<()> {
    let stored: Vec<Vec<u8>> = tx.range(keyspace, ..)?.map(|entry| entry.map(|(k, _)| k.to_vec())).collect::<Result<_>>()?;
    for stored in stored {
        tx.delete(keyspace, &stored)?;
    }
    Ok(())
}

/// Every stored key, in storage order.
pub(super) fn all(tx: &ReadTxn<'_>, keyspace: &Keyspace) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in tx.range(keyspace, ..)? {
        let (stored, record) = entry?;
        let bytes = if stored.first() == Some(&LONG_KEY_MARKER) {
            split_record(record).ok_or_else(corrupt)?.0.to_vec()
        } else {
            key::decode_bytes(stored).ok_or_else(corrupt)?.0
        };
        names.push(String::from_utf8(bytes).map_err(|_| corrupt())?);
    }
    Ok(names)
}

/// The storage key under which `name` would be found first (for matching change-feed events
/// of short keys; long keys are matched by record).
pub(super) fn direct_key(name: &str) -> Option<Vec<u8>> {
    match slot(name) {
        Slot::Direct(stored) => Some(stored),
        Slot::Long(_) => None,
    }
}

/// If `stored`/`record` (from the change feed) hold `name`, its value bytes.
pub(super) fn matches<'r>(name: &str, stored: &[u8], record: &'r [u8]) -> Option<&'r [u8]> {
    match direct_key(name) {
        Some(direct) => (direct == stored).then_some(record),
        None => {
            if stored.first() != Some(&LONG_KEY_MARKER) {
                return None;
            }
            split_record(record).filter(|(full, _)| *full == name.as_bytes()).map(|(_, value)| value)
        }
    }
}

/// True if the deleted storage key `stored` may have held `name`.
pub(super) fn may_hold(hash: &LongKeyHash, name: &str, stored: &[u8]) -> bool {
    match direct_key(name) {
        Some(direct) => direct == stored,
        None => stored.len() > LONG_PREFIX_LEN && stored[..LONG_PREFIX_LEN] == hash.prefix(name),
    }
}

/// The value bytes of a stored entry, after checking that its key decodes and, for a long
/// key, that it lies under its hash in this file (for `check`).
pub(super) fn value_of<'r>(hash: &LongKeyHash, stored: &[u8], record: &'r [u8]) -> std::result::Result<&'r [u8], String> {
    if stored.first() == Some(&LONG_KEY_MARKER) {
        let (full, value) = split_record(record).ok_or("long-key record does not start with its key")?;
        let Ok(full) = std::str::from_utf8(full) else {
            return Err("long key is not UTF-8".into());
        };
        if stored.len() <= LONG_PREFIX_LEN || stored[..LONG_PREFIX_LEN] != hash.prefix(full) {
            return Err("long key stored under another hash than this file's keyed hash of it".into());
        }
        return Ok(value);
    }
    match key::decode_bytes(stored) {
        Some((name, [])) if std::str::from_utf8(&name).is_ok() => Ok(record),
        _ => Err("key does not decode".into()),
    }
}

/// The key and the value bytes of a stored entry (for a bulk load of the whole keyspace).
/// The key is borrowed from the storage key when it has no escaped byte (the common case).
pub(super) fn entry_of<'r>(stored: &'r [u8], record: &'r [u8]) -> Result<(std::borrow::Cow<'r, str>, &'r [u8])> {
    if stored.first() == Some(&LONG_KEY_MARKER) {
        let (full, value) = split_record(record).ok_or_else(corrupt)?;
        let name = std::str::from_utf8(full).map_err(|_| corrupt())?;
        return Ok((std::borrow::Cow::Borrowed(name), value));
    }
    // An encoded key ends with the terminator 0x00 0x01; a key with no other 0x00 byte is its
    // own bytes before it.
    if let Some(plain) = stored.strip_suffix(&[0x00, 0x01])
        && !plain.contains(&0x00)
    {
        let name = std::str::from_utf8(plain).map_err(|_| corrupt())?;
        return Ok((std::borrow::Cow::Borrowed(name), record));
    }
    match key::decode_bytes(stored) {
        Some((name, [])) => Ok((std::borrow::Cow::Owned(String::from_utf8(name).map_err(|_| corrupt())?), record)),
        _ => Err(corrupt()),
    }
}

#[cfg(test)]
mod tests {
    //! Collisions: the keyed hash makes them too rare to meet, so a constant hash puts every
    //! long key in one range here.
    use super::*;
    use crate::store::Db;

    fn long(n: usize) -> String {
        format!("{n:06}{}", "z".repeat(DIRECT_KEY_LEN_MAX))
    }

    fn value_of_key(db: &Db, keyspace: &Keyspace, hash: &LongKeyHash, n: usize) -> Option<Vec<u8>> {
        db.read(|tx| load(tx, keyspace, hash, &long(n))).unwrap()
    }

    #[test]
    fn long_keys_that_share_a_hash_take_narrow_then_wide_suffixes_and_free_slots_are_reused() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path().join("db")).unwrap();
        let keyspace = db.internal_keyspace("tessera.dictionary.collisions").unwrap();
        let hash = LongKeyHash::Constant(0x0123_4567_89ab_cdef);
        let values: Vec<Vec<u8>> = (0..300).map(|n| format!("value {n}").into_bytes()).collect();
        // Half in one batch (the flusher's path), half one by one (a transaction's).
        let names: Vec<String> = (0..150).map(long).collect();
        db.write(|tx| store_batch(tx, &keyspace, &hash, names.iter().zip(&values).map(|(name, value)| (name.as_str(), Some(&value[..])))))
            .unwrap();
        db.write(|tx| (150..300).try_for_each(|n| store(tx, &keyspace, &hash, &long(n), &values[n]))).unwrap();
        let stored: Vec<Vec<u8>> =
            db.read(|tx| tx.range(&keyspace, ..)?.map(|entry| entry.map(|(key, _)| key.to_vec())).collect()).unwrap();
        assert_eq!(stored.len(), 300);
        assert!(stored.iter().all(|key| key[..LONG_PREFIX_LEN] == hash.prefix("any")), "one range");
        assert_eq!(stored.iter().filter(|key| key.len() == LONG_PREFIX_LEN + 1).count(), 255, "narrow suffixes first");
        assert_eq!(stored.iter().filter(|key| key.len() == LONG_PREFIX_LEN + 5).count(), 45, "then wide ones");
        for (n, value) in values.iter().enumerate() {
            assert_eq!(value_of_key(&db, &keyspace, &hash, n).as_ref(), Some(value), "key {n}");
        }
        // Remove every third key; new keys take the freed narrow suffixes.
        db.write(|tx| (0..300).step_by(3).try_for_each(|n| remove(tx, &keyspace, &hash, &long(n)))).unwrap();
        db.write(|tx| (300..350).try_for_each(|n| store(tx, &keyspace, &hash, &long(n), b"new"))).unwrap();
        let stored = db.read(|tx| tx.len(&keyspace)).unwrap();
        assert_eq!(stored, 300 - 100 + 50);
        for n in 0..350 {
            let expected = match values.get(n) {
                None => Some(&b"new"[..]),
                Some(_) if n % 3 == 0 => None,
                Some(value) => Some(&value[..]),
            };
            assert_eq!(value_of_key(&db, &keyspace, &hash, n).as_deref(), expected, "key {n}");
        }
        // Every entry is where this hash puts it, and elsewhere for another hash.
        let keyed = LongKeyHash::keyed(&[7; 16]);
        db.read(|tx| {
            for entry in tx.range(&keyspace, ..)? {
                let (stored, record) = entry?;
                assert!(value_of(&hash, stored, record).is_ok());
                assert!(value_of(&keyed, stored, record).unwrap_err().contains("another hash"));
            }
            Ok(())
        })
        .unwrap();
    }

    #[test]
    fn replacing_long_keys_moves_each_under_the_new_hash_and_keeps_short_ones() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path().join("db")).unwrap();
        let keyspace = db.internal_keyspace("tessera.dictionary.moved").unwrap();
        let old = LongKeyHash::Constant(u64::MAX); // the last range, which has no end bound
        let new = LongKeyHash::keyed(&[1; 16]);
        db.write(|tx| {
            (0..300).try_for_each(|n| store(tx, &keyspace, &old, &long(n), &n.to_le_bytes()))?;
            store(tx, &keyspace, &old, "short", b"s")
        })
        .unwrap();
        db.write(|tx| replace_long_keys(tx, &keyspace, &new)).unwrap();
        assert_eq!(db.read(|tx| tx.len(&keyspace)).unwrap(), 301);
        for n in 0..300usize {
            assert_eq!(value_of_key(&db, &keyspace, &new, n), Some(n.to_le_bytes().to_vec()), "key {n}");
            assert_eq!(value_of_key(&db, &keyspace, &old, n), None, "key {n} moved");
        }
        assert_eq!(db.read(|tx| load(tx, &keyspace, &new, "short")).unwrap().as_deref(), Some(&b"s"[..]));
    }

    #[test]
    fn batches_append_past_the_last_key_and_put_the_rest_and_read_as_a_map_does() {
        // Batches in key order, as the flusher writes them: the first into an empty keyspace
        // (every key appended), then batches of keys before, between and past the stored ones,
        // with removals, a long key (after which nothing may be appended) and a key with a NUL.
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path().join("db")).unwrap();
        let keyspace = db.internal_keyspace("tessera.dictionary.appended").unwrap();
        let hash = LongKeyHash::keyed(db.hash_key()); // the file's, which check uses
        let value = |text: &str| tessera_value::to_vec(text).unwrap(); // check validates values
        let mut model = std::collections::BTreeMap::<String, Vec<u8>>::new();
        let batches: Vec<Vec<(String, Option<Vec<u8>>)>> = vec![
            (0..500).map(|n| (format!("key-{n:04}"), Some(value(&n.to_string())))).collect(),
            vec![("a".into(), Some(value("first"))), ("key-0100".into(), None), ("key-0250\0x".into(), Some(value("nul")))],
            vec![("key-0499".into(), Some(value("last, again"))), ("key-0500".into(), Some(value("appended"))), ("z".into(), None)],
            vec![(long(1), Some(value("long"))), ("zz".into(), Some(value("after a long key"))), ("zzz".into(), Some(value("z")))],
            vec![("key-0499".into(), None), ("zzzz".into(), Some(value("past zzz")))],
        ];
        for batch in &batches {
            let mut sorted = batch.clone();
            sorted.sort();
            db.write(|tx| store_batch(tx, &keyspace, &hash, sorted.iter().map(|(name, value)| (name.as_str(), value.as_deref())))).unwrap();
            for (name, value) in sorted {
                match value {
                    Some(value) => model.insert(name, value),
                    None => model.remove(&name),
                };
            }
            for (name, value) in &model {
                assert_eq!(db.read(|tx| load(tx, &keyspace, &hash, name)).unwrap().as_ref(), Some(value), "{name:.20}");
            }
            assert_eq!(db.read(|tx| tx.len(&keyspace)).unwrap(), model.len() as u64);
            let removed = db.read(|tx| load(tx, &keyspace, &hash, "key-0100")).unwrap();
            assert_eq!(removed.is_some(), model.contains_key("key-0100"), "a removed key stays removed");
        }
        let report = db.check().unwrap();
        assert!(report.is_ok(), "{report}");
    }
}
