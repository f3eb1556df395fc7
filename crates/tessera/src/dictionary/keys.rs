//! How dictionary keys map to storage keys.
//!
//! A key is stored under its order-preserving encoding (`store::key`): escaped and terminated,
//! so the empty key works and keys list in order. A key whose encoding would not fit an LMDB
//! key is stored under `0xFF` (a byte no encoded UTF-8 string starts with), its 64-bit hash and
//! a probe number, and its record starts with the full key (varint length, bytes) so that
//! lookups can tell colliding keys apart.

use crate::error::{Error, Result};
use crate::store::{key, Keyspace, ReadTxn, WriteTxn};
use tessera_value::layout::{key_hash, read_varint, write_varint};

/// Longest encoded key stored as it is.
const DIRECT_KEY_LEN_MAX: usize = 480;
/// Marker of a hashed (long) key.
const LONG_KEY_MARKER: u8 = 0xFF;
/// Most colliding long keys per hash.
const PROBES_MAX: u8 = 16;

enum Slot {
    Direct(Vec<u8>),
    Long(String),
}

fn slot(name: &str) -> Slot {
    let encoded = key::encode(name);
    if encoded.len() <= DIRECT_KEY_LEN_MAX {
        Slot::Direct(encoded)
    } else {
        Slot::Long(name.to_owned())
    }
}

fn long_key(name: &str, probe: u8) -> [u8; 10] {
    let mut stored = [0u8; 10];
    stored[0] = LONG_KEY_MARKER;
    stored[1..9].copy_from_slice(&key_hash(name.as_bytes()).to_be_bytes());
    stored[9] = probe;
    stored
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

/// Finds a long key's storage slot: `(storage key, found)`, the first free probe if absent.
fn find_long(get: impl Fn(&[u8]) -> Result<Option<Vec<u8>>>, name: &str) -> Result<([u8; 10], Option<Vec<u8>>)> {
    for probe in 0..PROBES_MAX {
        let stored = long_key(name, probe);
        match get(&stored)? {
            None => return Ok((stored, None)),
            Some(record) => {
                let (full, value) = split_record(&record).ok_or_else(corrupt)?;
                if full == name.as_bytes() {
                    return Ok((stored, Some(value.to_vec())));
                }
            }
        }
    }
    Err(Error::Storage(format!("more than {PROBES_MAX} long dictionary keys share a hash")))
}

/// The value of `name`, read through `get` (a read or a write transaction's lookup).
fn load_by(get: impl Fn(&[u8]) -> Result<Option<Vec<u8>>>, name: &str) -> Result<Option<Vec<u8>>> {
    match slot(name) {
        Slot::Direct(stored) => get(&stored),
        Slot::Long(name) => Ok(find_long(get, &name)?.1),
    }
}

pub(super) fn load(tx: &ReadTxn<'_>, keyspace: &Keyspace, name: &str) -> Result<Option<Vec<u8>>> {
    load_by(|k| Ok(tx.get(keyspace, k)?.map(<[u8]>::to_vec)), name)
}

pub(super) fn load_in_write(tx: &WriteTxn<'_>, keyspace: &Keyspace, name: &str) -> Result<Option<Vec<u8>>> {
    load_by(|k| Ok(tx.get(keyspace, k)?.map(<[u8]>::to_vec)), name)
}

pub(super) fn store(tx: &mut WriteTxn<'_>, keyspace: &Keyspace, name: &str, value: &[u8]) -> Result<()> {
    match slot(name) {
        Slot::Direct(stored) => tx.put(keyspace, &stored, value),
        Slot::Long(name) => {
            let (stored, _) = find_long(|k| Ok(tx.get(keyspace, k)?.map(<[u8]>::to_vec)), &name)?;
            let mut record = Vec::with_capacity(name.len() + value.len() + 10);
            write_varint(&mut record, name.len() as u64);
            record.extend_from_slice(name.as_bytes());
            record.extend_from_slice(value);
            tx.put(keyspace, &stored, &record)
        }
    }
}

pub(super) fn remove(tx: &mut WriteTxn<'_>, keyspace: &Keyspace, name: &str) -> Result<()> {
    match slot(name) {
        Slot::Direct(stored) => tx.delete(keyspace, &stored).map(|_| ()),
        Slot::Long(name) => {
            // Later probes of the same hash stay reachable: a removed probe leaves a tombstone-
            // free gap only at the end of a chain, so move the chain's last record into it.
            let get = |k: &[u8]| -> Result<Option<Vec<u8>>> { Ok(tx.get(keyspace, k)?.map(<[u8]>::to_vec)) };
            let (stored, found) = find_long(get, &name)?;
            if found.is_none() {
                return Ok(());
            }
            let mut last = stored;
            for probe in stored[9] + 1..PROBES_MAX {
                let next = long_key(&name, probe);
                if tx.get(keyspace, &next)?.is_none() {
                    break;
                }
                last = next;
            }
            if last != stored {
                let moved = tx.get(keyspace, &last)?.map(<[u8]>::to_vec).ok_or_else(corrupt)?;
                tx.put(keyspace, &stored, &moved)?;
            }
            tx.delete(keyspace, &last).map(|_| ())
        }
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
pub(super) fn may_hold(name: &str, stored: &[u8]) -> bool {
    match direct_key(name) {
        Some(direct) => direct == stored,
        None => stored.len() == 10 && stored[..9] == long_key(name, 0)[..9],
    }
}
