//! Checksums of stored values (storage format 4, `docs/storage.md`, "Values").
//!
//! Every value in every keyspace but the store's own `tessera.meta` is stored as its bytes
//! followed by a 4-byte checksum: the low 32 bits, little-endian, of XXH3-64 over the value
//! with the XXH3-64 of the key as seed. The key is in the seed so that a value that damage
//! moved under another key (LMDB keeps small values inside the B-tree's leaf pages, next to
//! their keys) fails its check as surely as a changed byte.
//!
//! Values are checked on every read, so that damage is `Error::Corrupted` naming the keyspace
//! and key, never different data.

use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

/// Bytes a checksum adds to every value.
pub(crate) const CHECKSUM_LEN: usize = 4;

/// The checksum of `value` stored under `key`.
#[inline]
pub(crate) fn of(key: &[u8], value: &[u8]) -> [u8; CHECKSUM_LEN] {
    let hash = xxh3_64_with_seed(value, xxh3_64(key));
    (hash as u32).to_le_bytes()
}

/// Writes `value` and its checksum into `out` (cleared first): the bytes to store.
#[inline]
pub(crate) fn seal(key: &[u8], value: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.reserve(value.len() + CHECKSUM_LEN);
    out.extend_from_slice(value);
    out.extend_from_slice(&of(key, value));
}

/// The value inside stored bytes, if their checksum holds.
#[inline]
pub(crate) fn open<'v>(key: &[u8], stored: &'v [u8]) -> Option<&'v [u8]> {
    let (value, checksum) = stored.split_at_checked(stored.len().checked_sub(CHECKSUM_LEN)?)?;
    (of(key, value) == checksum).then_some(value)
}

/// The value inside stored bytes, unchecked (reads with verification switched off).
#[inline]
pub(crate) fn strip(stored: &[u8]) -> Option<&[u8]> {
    stored.get(..stored.len().checked_sub(CHECKSUM_LEN)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_and_any_change_is_caught() {
        let mut stored = Vec::new();
        seal(b"key", b"value", &mut stored);
        assert_eq!(stored.len(), 5 + CHECKSUM_LEN);
        assert_eq!(open(b"key", &stored), Some(&b"value"[..]));
        assert_eq!(strip(&stored), Some(&b"value"[..]));
        for byte in 0..stored.len() {
            for bit in 0..8 {
                let mut damaged = stored.clone();
                damaged[byte] ^= 1 << bit;
                assert_eq!(open(b"key", &damaged), None, "bit {bit} of byte {byte}");
            }
        }
        assert_eq!(open(b"kez", &stored), None, "the same bytes under another key");
        assert_eq!(open(b"key", &stored[..stored.len() - 1]), None, "cut short");
        assert_eq!(open(b"key", &[1, 2, 3]), None, "shorter than a checksum");
        seal(b"key", b"", &mut stored);
        assert_eq!(open(b"key", &stored), Some(&b""[..]), "the empty value");
    }
}
