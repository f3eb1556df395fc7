//! The bytes of one commit's entry in `tessera.feed` (see `docs/storage.md`, "Durable change
//! feed"): new commits write format 2, and both formats are read.
//!
//! - **Format 1** (the first): `count:u32 · change*`, each change `kind:u8 · keyspace_len:u16
//!   · keyspace · key_len:u32 · key · value_len:u32 · value` (little-endian; a delete has
//!   `value_len` `u32::MAX` and no value). Only read now.
//! - **Format 2**: [`V2_MARKER`] · `2` · the entry's keyspace table (each name once) · the
//!   changes, each naming its keyspace by its index in the table, with LEB128 lengths. A
//!   change of 10,000 inserted records takes about 100 bytes instead of 130.
//!
//! Which one an entry is follows from its first four bytes: a format-1 entry begins with its
//! change count, and the format-1 reader refuses a count above the entry's length / 11 (each
//! change takes at least 11 bytes). `FF FF FF FF` as a count would need an entry of 44 GiB, and
//! LMDB's values are below 4 GiB: no readable format-1 entry begins with it.
//!
//! Every length read from the file is checked against the bytes left: damage is
//! [`Error::Corrupted`] naming `tessera.feed`, the commit's sequence and the field, never a
//! panic, an allocation sized by damaged bytes, or fewer changes.

use super::change_log::{ChangeLog, ChangeView, KeyspaceTotals};
use super::durable_feed::FEED_KEYSPACE;
use super::feed::{Change, ChangeBatch, ChangeKind};
use crate::error::{Error, Result};
use std::sync::Arc;

/// What a format-2 entry begins with (see the module docs for why no format-1 entry does).
pub(crate) const V2_MARKER: [u8; 4] = [0xFF; 4];
/// The byte after [`V2_MARKER`]: the entry's format.
pub(crate) const V2_VERSION: u8 = 2;

const KIND_INSERT: u8 = 0;
const KIND_UPDATE: u8 = 1;
const KIND_DELETE: u8 = 2;
/// Format 1: the length of a delete's absent new value.
const V1_NO_VALUE: u32 = u32::MAX;
/// Format 1: the fewest bytes a change takes (kind, and the three lengths).
const V1_CHANGE_BYTES_MIN: usize = 11;
/// Format 2: a change's head holds its kind in these low bits, its keyspace index above them.
const V2_KIND_BITS: u32 = 2;
/// Format 2: the fewest bytes a change takes (head and key length).
const V2_CHANGE_BYTES_MIN: usize = 2;
/// Longest LEB128 number read: ten 7-bit groups hold a u64.
const VARINT_BYTES_MAX: usize = 10;
/// Bytes of an encoded entry [`write()`] gathers before it writes them out: a few large writes
/// into LMDB's reserved space instead of several small ones per change.
const CHUNK_BYTES: usize = 64 * 1024;

fn kind_code(kind: ChangeKind) -> u8 {
    match kind {
        ChangeKind::Insert => KIND_INSERT,
        ChangeKind::Update => KIND_UPDATE,
        ChangeKind::Delete => KIND_DELETE,
    }
}

fn kind_of(code: u8) -> Option<ChangeKind> {
    match code {
        KIND_INSERT => Some(ChangeKind::Insert),
        KIND_UPDATE => Some(ChangeKind::Update),
        KIND_DELETE => Some(ChangeKind::Delete),
        _ => None,
    }
}

// ------------------------------------------------------------------------------ writing

/// Bytes of `value` as LEB128.
pub(crate) fn varint_len(value: u64) -> usize {
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}

fn push_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// The distinct keyspaces of an entry's changes, in the order they first appear; a change
/// refers to its keyspace by its index here.
pub(crate) struct KeyspaceTable<'a> {
    names: Vec<&'a str>,
    /// The index found last: a transaction usually writes one keyspace many times.
    last: usize,
}

impl<'a> KeyspaceTable<'a> {
    fn new() -> Self {
        KeyspaceTable { names: Vec::new(), last: 0 }
    }

    /// `name`'s index, added if new. Inlined: it runs twice per change (measuring and
    /// writing), and a call cost 33 instructions of a 40-instruction lookup.
    #[inline]
    fn index_of(&mut self, name: &'a str) -> usize {
        if let Some(&last) = self.names.get(self.last) {
            // Changes of one keyspace share one `Arc<str>`: the pointer settles most lookups.
            if std::ptr::eq(last, name) || last == name {
                return self.last;
            }
        }
        self.last = match self.names.iter().position(|&known| known == name) {
            Some(index) => index,
            None => {
                self.names.push(name);
                self.names.len() - 1
            }
        };
        self.last
    }
}

/// The size of an entry: its change count and its length in bytes, with the keyspace table
/// [`write()`] needs.
pub(crate) struct EntrySize<'a> {
    pub(crate) count: usize,
    pub(crate) len: usize,
    table: KeyspaceTable<'a>,
}

impl EntrySize<'_> {
    /// Whether two sizings agree on everything an entry is written from: the count, the length
    /// and the keyspace table in its order.
    pub(crate) fn agrees_with(&self, other: &EntrySize<'_>) -> bool {
        self.count == other.count && self.len == other.len && self.table.names == other.table.names
    }
}

/// A change's head: its kind in the low bits, its keyspace's index above them.
fn head_of(kind: ChangeKind, keyspace_index: usize) -> u64 {
    ((keyspace_index as u64) << V2_KIND_BITS) | u64::from(kind_code(kind))
}

fn change_len(change: &ChangeView<'_>, keyspace_index: usize) -> usize {
    let value = change.new.map_or(0, |value| varint_len(value.len() as u64) + value.len());
    varint_len(head_of(change.kind, keyspace_index)) + varint_len(change.key.len() as u64) + change.key.len() + value
}

/// The format-2 entry's size for `changes`, by a pass over them ([`size_of_log`] sizes a
/// finished log without one; [`write()`] makes the pass that writes).
pub(crate) fn size<'a>(changes: impl Iterator<Item = ChangeView<'a>>) -> EntrySize<'a> {
    let mut table = KeyspaceTable::new();
    let (mut count, mut changes_len) = (0, 0);
    for change in changes {
        let index = table.index_of(change.keyspace);
        count += 1;
        changes_len += change_len(&change, index);
    }
    let table_len: usize = table.names.iter().map(|name| varint_len(name.len() as u64) + name.len()).sum();
    let len = V2_MARKER.len() + 1 + varint_len(table.names.len() as u64) + table_len + varint_len(count as u64) + changes_len;
    EntrySize { count, len, table }
}

/// [`size`] of `log`'s changes to the keyspaces `kept` keeps, from the totals that
/// [`ChangeLog::finish`] summed: the same count, length and keyspace table, without a pass over
/// the changes (a commit of 10,000 records spent about 160 instructions a change on that pass).
pub(crate) fn size_of_log<'a>(log: &'a ChangeLog, kept: impl Fn(&str) -> bool) -> EntrySize<'a> {
    let mut present: Vec<(&str, KeyspaceTotals)> = log.totals().filter(|(name, totals)| totals.count > 0 && kept(name)).collect();
    // The table names each keyspace in the order its first change comes, as `size` finds them.
    present.sort_unstable_by_key(|(_, totals)| totals.first);
    let mut table = KeyspaceTable::new();
    let (mut count, mut changes_len) = (0, 0);
    for (name, totals) in present {
        let index = table.index_of(name);
        // A head's varint length depends on the keyspace's index alone: the kind takes its low
        // two bits.
        let head_len = varint_len(head_of(ChangeKind::Delete, index));
        count += totals.count;
        changes_len += totals.count * head_len + totals.body_bytes;
    }
    let table_len: usize = table.names.iter().map(|name| varint_len(name.len() as u64) + name.len()).sum();
    let len = V2_MARKER.len() + 1 + varint_len(table.names.len() as u64) + table_len + varint_len(count as u64) + changes_len;
    EntrySize { count, len, table }
}

/// Writes the format-2 entry of `changes` (the ones [`size`] or [`size_of_log`] measured into
/// `size`) to `out`:
/// a `Vec`, or LMDB's reserved space.
pub(crate) fn write<'a>(
    changes: impl Iterator<Item = ChangeView<'a>>,
    size: EntrySize<'a>,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    let EntrySize { count, mut table, .. } = size;
    let mut chunk = Vec::with_capacity(CHUNK_BYTES);
    chunk.extend_from_slice(&V2_MARKER);
    chunk.push(V2_VERSION);
    push_varint(&mut chunk, table.names.len() as u64);
    for name in &table.names {
        push_varint(&mut chunk, name.len() as u64);
        chunk.extend_from_slice(name.as_bytes());
    }
    push_varint(&mut chunk, count as u64);
    for change in changes {
        let index = table.index_of(change.keyspace);
        push_varint(&mut chunk, head_of(change.kind, index));
        push_varint(&mut chunk, change.key.len() as u64);
        chunk.extend_from_slice(change.key);
        if let Some(value) = change.new {
            push_varint(&mut chunk, value.len() as u64);
            chunk.extend_from_slice(value);
        }
        if chunk.len() >= CHUNK_BYTES {
            out.write_all(&chunk)?;
            chunk.clear();
        }
    }
    out.write_all(&chunk)
}

/// The format-2 entry of `changes`, in memory.
#[cfg(test)]
pub(crate) fn encode(changes: &[ChangeView<'_>]) -> Vec<u8> {
    let size = size(changes.iter().copied());
    let mut out = Vec::with_capacity(size.len);
    write(changes.iter().copied(), size, &mut out).expect("writing to a Vec does not fail");
    out
}

// ------------------------------------------------------------------------------ reading

/// Reads bounds-checked fields off an entry of `keyspace` under the commit `sequence`.
pub(crate) struct Fields<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) keyspace: &'static str,
    pub(crate) sequence: u64,
}

impl<'a> Fields<'a> {
    pub(crate) fn damaged(&self, what: &str) -> Error {
        Error::Corrupted(format!("keyspace {}: the entry of commit {}: {what}", self.keyspace, self.sequence))
    }

    pub(crate) fn take(&mut self, len: usize, what: &str) -> Result<&'a [u8]> {
        if self.bytes.len() < len {
            return Err(self.damaged(what));
        }
        let (taken, rest) = self.bytes.split_at(len);
        self.bytes = rest;
        Ok(taken)
    }

    pub(crate) fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4, what)?.try_into().expect("4 bytes")))
    }

    fn u16(&mut self, what: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.take(2, what)?.try_into().expect("2 bytes")))
    }

    /// A LEB128 number of at most 64 bits.
    fn varint(&mut self, what: &str) -> Result<u64> {
        let mut value = 0u64;
        for index in 0..VARINT_BYTES_MAX {
            let byte = self.take(1, what)?[0];
            let bits = u64::from(byte & 0x7F);
            // The tenth group holds the 64th bit only.
            if index == VARINT_BYTES_MAX - 1 && bits > 1 {
                return Err(self.damaged(what));
            }
            value |= bits << (7 * index);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.damaged(what))
    }

    /// A LEB128 length, then that many bytes.
    fn varint_bytes(&mut self, what: &str) -> Result<&'a [u8]> {
        let len = self.varint(what)?;
        let len = usize::try_from(len).map_err(|_| self.damaged(what))?;
        self.take(len, what)
    }

    fn finish(self, batch: ChangeBatch) -> Result<ChangeBatch> {
        if !self.bytes.is_empty() {
            return Err(self.damaged("bytes after the last change"));
        }
        Ok(batch)
    }
}

/// The changes of the entry `bytes` of commit `sequence`, in either format.
pub(crate) fn decode(sequence: u64, bytes: &[u8]) -> Result<ChangeBatch> {
    match bytes.strip_prefix(&V2_MARKER[..]) {
        Some(rest) => decode_v2(Fields { bytes: rest, keyspace: FEED_KEYSPACE, sequence }),
        None => decode_v1(Fields { bytes, keyspace: FEED_KEYSPACE, sequence }),
    }
}

fn change(fields: &Fields<'_>, keyspace: Arc<str>, key: &[u8], kind: ChangeKind, new: Option<&[u8]>) -> Result<Change> {
    if (kind == ChangeKind::Delete) != new.is_none() {
        return Err(fields.damaged(&format!("keyspace {keyspace}: a delete with a value, or a write without one")));
    }
    Ok(Change { keyspace, key: key.into(), kind, old: None, new: new.map(Box::from) })
}

fn decode_v1(mut fields: Fields<'_>) -> Result<ChangeBatch> {
    let count = fields.u32("change count")? as usize;
    // A count beyond what the bytes can hold is damage, not an allocation.
    if count > fields.bytes.len() / V1_CHANGE_BYTES_MIN {
        return Err(fields.damaged("change count"));
    }
    let mut changes = Vec::with_capacity(count);
    for _ in 0..count {
        let kind = kind_of(fields.take(1, "change kind")?[0]).ok_or_else(|| fields.damaged("change kind"))?;
        let keyspace_len = fields.u16("keyspace length")? as usize;
        let keyspace = std::str::from_utf8(fields.take(keyspace_len, "keyspace")?).map_err(|_| fields.damaged("keyspace name"))?;
        let keyspace: Arc<str> = keyspace.into();
        let key_len = fields.u32("key length")? as usize;
        let key = fields.take(key_len, "key")?;
        let new = match fields.u32("value length")? {
            V1_NO_VALUE => None,
            len => Some(fields.take(len as usize, "value")?),
        };
        changes.push(change(&fields, keyspace, key, kind, new)?);
    }
    let sequence = fields.sequence;
    fields.finish(ChangeBatch { sequence, changes })
}

fn decode_v2(mut fields: Fields<'_>) -> Result<ChangeBatch> {
    let version = fields.take(1, "format version")?[0];
    if version != V2_VERSION {
        return Err(fields.damaged(&format!("format {version}, which this tessera does not read")));
    }
    let names = fields.varint("keyspace count")?;
    // Each name takes at least its length's byte.
    if names > fields.bytes.len() as u64 {
        return Err(fields.damaged("keyspace count"));
    }
    let mut table: Vec<Arc<str>> = Vec::with_capacity(names as usize);
    for _ in 0..names {
        let name = fields.varint_bytes("keyspace name")?;
        table.push(std::str::from_utf8(name).map_err(|_| fields.damaged("keyspace name"))?.into());
    }
    let count = fields.varint("change count")?;
    if count == 0 || count > (fields.bytes.len() / V2_CHANGE_BYTES_MIN) as u64 {
        return Err(fields.damaged("change count"));
    }
    let mut changes = Vec::with_capacity(count as usize);
    for index in 0..count {
        // Errors are worded only when they happen: this loop runs once per change read.
        let head = fields.varint("change head").map_err(|_| fields.damaged(&format!("change {index}: kind and keyspace")))?;
        let kind = kind_of((head & ((1 << V2_KIND_BITS) - 1)) as u8).ok_or_else(|| fields.damaged(&format!("change {index}: kind")))?;
        let keyspace = usize::try_from(head >> V2_KIND_BITS).ok().and_then(|at| table.get(at));
        let keyspace = keyspace.ok_or_else(|| fields.damaged(&format!("change {index}: keyspace index {}", head >> V2_KIND_BITS)))?.clone();
        let key = fields.varint_bytes("key").map_err(|_| fields.damaged(&format!("change {index}: keyspace {keyspace}: key")))?;
        let new = match kind {
            ChangeKind::Delete => None,
            _ => Some(
                fields
                    .varint_bytes("value")
                    .map_err(|_| fields.damaged(&format!("change {index}: keyspace {keyspace}, key \"{}\": value", key.escape_ascii())))?,
            ),
        };
        changes.push(change(&fields, keyspace, key, kind, new)?);
    }
    let sequence = fields.sequence;
    fields.finish(ChangeBatch { sequence, changes })
}

/// The format-1 encoder as it was before format 2: for tests that read entries of files
/// written before.
#[cfg(test)]
pub(crate) mod v1_encoder {
    use super::*;

    /// `count:u32 · (kind:u8 · keyspace_len:u16 · keyspace · key_len:u32 · key · value_len:u32
    /// · value)*`, little-endian; a delete's `value_len` is `u32::MAX`, with no value.
    pub(crate) fn encode(changes: &[ChangeView<'_>]) -> Vec<u8> {
        let mut out = (changes.len() as u32).to_le_bytes().to_vec();
        for change in changes {
            out.push(kind_code(change.kind));
            out.extend_from_slice(&(change.keyspace.len() as u16).to_le_bytes());
            out.extend_from_slice(change.keyspace.as_bytes());
            out.extend_from_slice(&(change.key.len() as u32).to_le_bytes());
            out.extend_from_slice(change.key);
            match change.new {
                Some(value) => {
                    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
                    out.extend_from_slice(value);
                }
                None => out.extend_from_slice(&V1_NO_VALUE.to_le_bytes()),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A random transaction's log over `keyspaces` keyspaces: inserts, updates, writes back to
    /// the old value, deletes, keys written twice; values up to 300 bytes (two-byte lengths).
    fn random_log(rng: &mut fastrand::Rng, names: &[Arc<str>], writes: usize) -> ChangeLog {
        let mut store: std::collections::BTreeMap<(usize, Vec<u8>), Vec<u8>> = std::collections::BTreeMap::new();
        for _ in 0..rng.usize(0..20) {
            store.insert((rng.usize(..names.len()), vec![rng.u8(0..4); rng.usize(1..3)]), vec![7; rng.usize(0..3)]);
        }
        let mut log = ChangeLog::start(rng.bool());
        for _ in 0..writes {
            let id = (rng.usize(..names.len()), vec![rng.u8(0..4); rng.usize(1..3)]);
            let new = match rng.u8(0..5) {
                0 => None,
                1 => store.get(&id).cloned(), // written back as it is
                _ => Some(vec![rng.u8(..); rng.usize(0..300)]),
            };
            let name = &names[id.0];
            match (store.get(&id), &new) {
                (None, Some(value)) if rng.bool() => log.record_new(name, &id.1, value),
                (old, new) => {
                    let staged = log.stage(name, &id.1, old.map(Vec::as_slice), new.as_deref());
                    log.record_staged(staged, &id.1, new.as_deref());
                }
            }
            match new {
                Some(value) => store.insert(id, value),
                None => store.remove(&id),
            };
        }
        log.finish()
    }

    #[test]
    fn the_logs_totals_size_an_entry_as_a_pass_over_its_changes_does() {
        let mut rng = fastrand::Rng::with_seed(28);
        for round in 0..3_000 {
            // Up to 40 keyspaces: past 31, a change's head takes two bytes. Every tenth round
            // has 40, and enough writes to reach index 32.
            let wide = round % 10 == 0;
            let keyspaces = if wide { 40 } else { rng.usize(1..5) };
            let names: Vec<Arc<str>> = (0..keyspaces).map(|i| format!("ks{i}").into()).collect();
            let writes = if wide { 400 } else { rng.usize(0..60) };
            let log = random_log(&mut rng, &names, writes);
            // Wide rounds drop up to two keyspaces, so that indices past 31 still come.
            let kept_mask = if wide { !((1u64 << rng.u32(0..40)) | (1u64 << rng.u32(0..40))) } else { rng.u64(..) };
            let kept = |name: &str| (kept_mask >> (name[2..].parse::<u32>().unwrap() % 64)) & 1 == 1;
            let by_totals = size_of_log(&log, kept);
            let by_pass = size(log.changes_of(kept));
            assert_eq!((by_totals.count, by_totals.len), (by_pass.count, by_pass.len), "round {round}");
            assert_eq!(by_totals.table.names, by_pass.table.names, "round {round}: the table's order");
            assert!(by_totals.agrees_with(&by_pass), "round {round}");
            let mut written = Vec::new();
            write(log.changes_of(kept), by_totals, &mut written).unwrap();
            assert_eq!(written.len(), by_pass.len, "round {round}");
            // The next round's log reuses this one's memory, as a thread's next transaction does.
            log.keep();
        }
    }

    fn change(keyspace: &str, key: &[u8], kind: ChangeKind, new: Option<&[u8]>) -> Change {
        Change { keyspace: keyspace.into(), key: key.into(), kind, old: None, new: new.map(Box::from) }
    }

    /// Changes of three keyspaces, interleaved, with a delete, an empty key and value, and
    /// lengths of one, two and three LEB128 bytes.
    fn sample() -> Vec<Change> {
        vec![
            change("tessera.col.a", b"k1", ChangeKind::Insert, Some(b"v1")),
            change("notes", b"", ChangeKind::Delete, None),
            change("tessera.col.a", &[0xFF; 300], ChangeKind::Update, Some(b"")),
            change("x", b"k", ChangeKind::Insert, Some(&[9; 20_000])),
            change("notes", b"n", ChangeKind::Update, Some(b"w")),
        ]
    }

    fn views(changes: &[Change]) -> Vec<ChangeView<'_>> {
        changes.iter().map(Change::view).collect()
    }

    fn is_corrupted(result: Result<ChangeBatch>) -> bool {
        matches!(result, Err(Error::Corrupted(_)))
    }

    #[test]
    fn varints_have_the_length_they_are_written_with() {
        for value in [0, 1, 127, 128, 16_383, 16_384, u32::MAX as u64, u64::MAX] {
            let mut out = Vec::new();
            push_varint(&mut out, value);
            assert_eq!(out.len(), varint_len(value), "{value}");
            let mut fields = Fields { bytes: &out, keyspace: FEED_KEYSPACE, sequence: 1 };
            assert_eq!(fields.varint("n").unwrap(), value);
            assert!(fields.bytes.is_empty());
        }
        // An eleventh byte, or a tenth beyond the 64th bit, is damage.
        let mut fields = Fields { bytes: &[0x80; 11], keyspace: FEED_KEYSPACE, sequence: 1 };
        assert!(matches!(fields.varint("n"), Err(Error::Corrupted(_))));
        let over = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02];
        let mut fields = Fields { bytes: &over, keyspace: FEED_KEYSPACE, sequence: 1 };
        assert!(matches!(fields.varint("n"), Err(Error::Corrupted(_))));
    }

    #[test]
    fn format_2_entries_decode_to_what_was_encoded() {
        let changes = sample();
        let bytes = encode(&views(&changes));
        assert_eq!(&bytes[..5], &[0xFF, 0xFF, 0xFF, 0xFF, V2_VERSION]);
        assert_eq!(bytes.len(), size(views(&changes).into_iter()).len);
        let batch = decode(7, &bytes).unwrap();
        assert_eq!(batch.sequence, 7);
        assert_eq!(batch.changes, changes);
        // One name per keyspace, shared by its changes.
        assert!(Arc::ptr_eq(&batch.changes[0].keyspace, &batch.changes[2].keyspace));
        // Keyspace indexes past 31 take a second head byte.
        let names: Vec<String> = (0..40).map(|i| format!("ks{i}")).collect();
        let many: Vec<Change> = names.iter().map(|name| change(name, b"k", ChangeKind::Insert, Some(b"v"))).collect();
        assert_eq!(decode(8, &encode(&views(&many))).unwrap().changes, many);
    }

    #[test]
    fn format_2_is_smaller_than_format_1_by_the_repeated_names_and_fixed_lengths() {
        let values: Vec<Vec<u8>> = (0..1000).map(|i| vec![i as u8; 90]).collect();
        let changes: Vec<Change> = values
            .iter()
            .enumerate()
            .map(|(i, value)| change("tessera.col.BenchDoc", format!("title{i}").as_bytes(), ChangeKind::Insert, Some(value)))
            .collect();
        let (v1, v2) = (v1_encoder::encode(&views(&changes)).len(), encode(&views(&changes)).len());
        // Per change, 1 + 2 + 20 + 4 + 4 bytes around key and value before, 3 now; per entry,
        // a count of 4 bytes before, 5 + 1 + 21 (the table) + 2 (the count) now.
        assert_eq!(v1 - v2, 1000 * (31 - 3) + 4 - 29);
    }

    /// A fixture of format 1, written byte by byte (not by an encoder of this crate).
    #[test]
    fn a_format_1_entry_reads_as_before() {
        #[rustfmt::skip]
        let fixture: &[u8] = &[
            2, 0, 0, 0,                        // count 2
            0, 5, 0, b'n', b'o', b't', b'e', b's', // insert, keyspace "notes"
            1, 0, 0, 0, b'k',                  // key "k"
            2, 0, 0, 0, b'v', b'1',            // value "v1"
            2, 1, 0, b'x',                     // delete, keyspace "x"
            0, 0, 0, 0,                        // empty key
            0xFF, 0xFF, 0xFF, 0xFF,            // no value
        ];
        let expected = vec![change("notes", b"k", ChangeKind::Insert, Some(b"v1")), change("x", b"", ChangeKind::Delete, None)];
        assert_eq!(decode(3, fixture).unwrap().changes, expected);
        assert_eq!(v1_encoder::encode(&views(&expected)), fixture);
        let changes = sample();
        let bytes = v1_encoder::encode(&views(&changes));
        assert_eq!(decode(4, &bytes).unwrap().changes, changes);
        for len in 0..bytes.len() {
            assert!(is_corrupted(decode(4, &bytes[..len])), "truncated to {len}");
        }
        let mut huge_count = bytes.clone();
        huge_count[..4].copy_from_slice(&0x7FFF_FFFFu32.to_le_bytes());
        assert!(is_corrupted(decode(4, &huge_count)));
    }

    #[test]
    fn truncated_or_damaged_format_2_entries_are_corrupted_never_a_panic() {
        let bytes = encode(&views(&sample()));
        for len in 0..bytes.len() {
            assert!(is_corrupted(decode(7, &bytes[..len])), "truncated to {len}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(is_corrupted(decode(7, &longer)));
        // The header, by hand: marker, version, table of one name "a", then the changes.
        let entry = |version: u8, table: &[u8], changes: &[u8]| [&V2_MARKER[..], &[version], table, changes].concat();
        let table = [1, 1, b'a'];
        assert_eq!(
            decode(1, &entry(2, &table, &[1, 0, 1, b'k', 1, b'v'])).unwrap().changes,
            [change("a", b"k", ChangeKind::Insert, Some(b"v"))]
        );
        let damaged: [(&str, Vec<u8>); 10] = [
            ("a later format", entry(3, &table, &[1, 0, 1, b'k', 1, b'v'])),
            ("no changes", entry(2, &table, &[0])),
            ("a count beyond the bytes", entry(2, &table, &[0xFF, 0xFF, 0x03, 0, 1, b'k', 1, b'v'])),
            ("a keyspace count beyond the bytes", entry(2, &[0xFF, 0x7F, 1, b'a'], &[1, 0, 1, b'k', 1, b'v'])),
            ("a name that is not UTF-8", entry(2, &[1, 1, 0xFF], &[1, 0, 1, b'k', 1, b'v'])),
            ("kind 3", entry(2, &table, &[1, 3, 1, b'k', 1, b'v'])),
            ("keyspace index 1 of a table of 1", entry(2, &table, &[1, 4, 1, b'k', 1, b'v'])),
            ("a key length beyond the bytes", entry(2, &table, &[1, 0, 0x7F, b'k', 1, b'v'])),
            ("a value length of 2^64 - 1", entry(2, &table, &[1, 0, 1, b'k', 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01])),
            ("a delete followed by a value", entry(2, &table, &[1, 2, 1, b'k', 1, b'v'])),
        ];
        for (what, bytes) in damaged {
            assert!(is_corrupted(decode(1, &bytes)), "{what}");
        }
        // Random damage: an error or other changes, never a panic.
        let mut rng = fastrand::Rng::with_seed(19);
        for _ in 0..20_000 {
            let mut damaged = bytes.clone();
            for _ in 0..rng.usize(1..4) {
                let at = rng.usize(..damaged.len());
                damaged[at] = rng.u8(..);
            }
            let _ = decode(7, &damaged[..rng.usize(..=damaged.len())]);
        }
    }

    #[test]
    fn a_damaged_value_names_the_commit_keyspace_and_key() {
        let bytes = encode(&views(&[change("tessera.col.tasks", b"task-7", ChangeKind::Insert, Some(b"value"))]));
        let Err(Error::Corrupted(message)) = decode(42, &bytes[..bytes.len() - 2]) else { panic!("not corrupted") };
        assert!(message.contains("keyspace tessera.feed") && message.contains("commit 42"), "{message}");
        assert!(message.contains("tessera.col.tasks") && message.contains("task-7"), "{message}");
    }
}
