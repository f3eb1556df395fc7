//! The footer at the end of every document (`docs/format.md`, "Tail"): reading it, in a fixed
//! number of bounds-checked reads, for the reader (trusted opens) and the validator.

use crate::error::FormatError;
use crate::layout::*;
use crate::repr::Repr;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Table {
    /// Position of the first entry.
    pub(crate) entries: usize,
    pub(crate) count: usize,
    pub(crate) width: usize,
}

/// Where a document's parts are, as read from its footer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Footer {
    pub(crate) tail_start: usize,
    pub(crate) root_slot_pos: usize,
    pub(crate) root_width: usize,
    /// Local keys: item offsets by local id, followed by the key index.
    pub(crate) keys: Table,
    /// How the key index is searched.
    pub(crate) key_index_kind: KeyIndexKind,
    /// Number of entries of the key index (a power of two for hashed indexes, the key count for
    /// sorted ones).
    pub(crate) key_index_len: usize,
    pub(crate) atoms: Table,
    pub(crate) shared_count: u64,
    /// First byte after the tail's length varint, as computed from the end.
    pub(crate) tables_start: usize,
}

/// Most keys, atoms or shared keys a document may refer to.
pub const TABLE_COUNT_MAX: u64 = u32::MAX as u64;

const fn bad(reason: &'static str) -> FormatError {
    FormatError::BadFooter { reason }
}

/// [`read_footer`] for the document a typed collection stores: current version, shared keys
/// and no local keys or atoms. `None` for any other footer (the caller then reads it with
/// [`read_footer`], which gives the same `Footer` for these bytes, or the error).
#[inline(always)]
pub(crate) fn read_shared_only_footer(bytes: &[u8]) -> Option<Footer> {
    let len = bytes.len();
    let &last = bytes.last()?;
    if last >> 4 != FORMAT_VERSION {
        return None;
    }
    let root_width = width_of(last & 3);
    let offset_width = width_of((last >> 2) & 3);
    let root_slot_pos = len.checked_sub(1 + offset_width + root_width)?;
    // The one tail field: the shared-key count, just before the root slot.
    let count_pos = root_slot_pos.checked_sub(offset_width)?;
    let tail_start = read_uint(bytes, len - 1 - offset_width, offset_width);
    if tail_start >= count_pos as u64 {
        return None;
    }
    let tail_start = tail_start as usize;
    if bytes[tail_start] != TAG_TAIL | TAIL_HAS_SHARED {
        return None;
    }
    let shared_count = read_uint(bytes, count_pos, offset_width);
    if shared_count == 0 || shared_count > TABLE_COUNT_MAX {
        return None;
    }
    let empty = |entries| Table { entries, count: 0, width: 1 };
    Some(Footer {
        tail_start,
        root_slot_pos,
        root_width,
        keys: empty(count_pos),
        key_index_kind: KeyIndexKind::Hashed,
        key_index_len: 0,
        atoms: empty(count_pos),
        shared_count,
        tables_start: count_pos,
    })
}

/// Reads the footer from the end of the document (see `docs/format.md`, "Tail"): a fixed
/// number of reads, each bounds-checked, so any input gives a `Footer` or an error.
#[inline(always)]
pub(crate) fn read_footer(bytes: &[u8]) -> Result<Footer, FormatError> {
    let len = bytes.len();
    let &last = bytes.last().ok_or(bad("empty input"))?;
    let version = last >> 4;
    if !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&version) {
        return Err(FormatError::UnsupportedVersion { found: version, supported: FORMAT_VERSION });
    }
    let root_width = width_of(last & 3);
    let offset_width = width_of((last >> 2) & 3);
    let root_slot_pos = len.checked_sub(1 + offset_width + root_width).ok_or(bad("too short"))?;
    let tail_start = read_uint(bytes, len - 1 - offset_width, offset_width);
    if tail_start >= root_slot_pos as u64 {
        return Err(bad("tail offset"));
    }
    let tail_start = tail_start as usize;
    let tag = bytes[tail_start];
    if tag & !7 != TAG_TAIL {
        return Err(bad("no tail item at the tail offset"));
    }
    // Fields before the root slot, read backwards; none may reach the tail's first byte.
    let mut fields = Backwards { cursor: root_slot_pos, floor: tail_start };
    let (mut key_width, mut atom_width, mut growth) = (1, 1, 0);
    if tag & (TAIL_HAS_KEYS | TAIL_HAS_ATOMS) != 0 {
        let widths = bytes[fields.take(1)?];
        key_width = width_of(widths);
        atom_width = width_of(widths >> 2);
        growth = widths >> 4;
        let sorted_allowed = version >= 2 && growth == KEY_INDEX_SORTED;
        if growth > KEY_INDEX_GROWTH_MAX && !sorted_allowed {
            return Err(bad("key index growth"));
        }
    }
    let key_count = fields.count(bytes, tag & TAIL_HAS_KEYS != 0, offset_width)?;
    let atom_count = fields.count(bytes, tag & TAIL_HAS_ATOMS != 0, offset_width)?;
    let shared_count = fields.count(bytes, tag & TAIL_HAS_SHARED != 0, offset_width)?;
    let cursor = fields.cursor;
    let key_index_kind = match (version, growth) {
        (1, _) => KeyIndexKind::HashedV1,
        (_, KEY_INDEX_SORTED) => KeyIndexKind::Sorted,
        _ => KeyIndexKind::Hashed,
    };
    let key_index_slots = match (key_count, key_index_kind) {
        (0, _) => 0,
        (_, KeyIndexKind::Sorted) => key_count,
        _ => key_index_slots(key_count, growth),
    };
    let keys_size = (key_count + key_index_slots) * key_width as u64;
    let atoms_size = atom_count * atom_width as u64;
    let tables_start = (cursor as u64).checked_sub(keys_size + atoms_size).filter(|&start| start > tail_start as u64);
    let tables_start = tables_start.ok_or(bad("table sizes"))? as usize;
    Ok(Footer {
        tail_start,
        root_slot_pos,
        root_width,
        keys: Table { entries: tables_start, count: key_count as usize, width: key_width },
        key_index_kind,
        key_index_len: key_index_slots as usize,
        atoms: Table { entries: tables_start + keys_size as usize, count: atom_count as usize, width: atom_width },
        shared_count,
        tables_start,
    })
}

/// The tail's fields, read backwards from the root slot: none may reach the tail's first byte.
struct Backwards {
    /// Position of the field read last.
    cursor: usize,
    /// The tail item's first byte.
    floor: usize,
}

impl Backwards {
    /// Steps back over a field of `size` bytes; returns its position.
    #[inline(always)]
    fn take(&mut self, size: usize) -> Result<usize, FormatError> {
        self.cursor = self.cursor.checked_sub(size).filter(|&cursor| cursor > self.floor).ok_or(bad("tail fields"))?;
        Ok(self.cursor)
    }

    /// A table count (`width` bytes, 1 to [`TABLE_COUNT_MAX`]) if the tail has the table, else 0.
    #[inline(always)]
    fn count(&mut self, bytes: &[u8], present: bool, width: usize) -> Result<u64, FormatError> {
        if !present {
            return Ok(0);
        }
        let value = read_uint(bytes, self.take(width)?, width);
        if value == 0 || value > TABLE_COUNT_MAX {
            return Err(bad("table count"));
        }
        Ok(value)
    }
}

/// [`read_footer`], plus the checks that need more than a fixed number of reads: the tail's
/// length varint and the root slot.
pub(crate) fn parse_footer(bytes: &[u8]) -> Result<(Footer, Repr), FormatError> {
    let footer = read_footer(bytes)?;
    let (total, used) = read_varint(bytes, footer.tail_start + 1, footer.tables_start).ok_or(bad("tail length"))?;
    if total != (bytes.len() - footer.tail_start) as u64 || footer.tail_start + 1 + used != footer.tables_start {
        return Err(bad("tail length"));
    }
    let bits = read_uint(bytes, footer.root_slot_pos, footer.root_width);
    let root = decode_slot_checked(bits, footer.root_width, footer.tail_start, &footer.atoms, bytes)
        .ok_or(FormatError::BadSlot { offset: footer.root_slot_pos, reason: "root slot" })?;
    Ok((footer, root))
}

/// Decodes a slot, checking only what can be checked without knowing the item map.
#[inline]
pub(crate) fn decode_slot_checked(bits: u64, width: usize, container: usize, atoms: &Table, bytes: &[u8]) -> Option<Repr> {
    if bits & SLOT_POINTER_MASK == 0 {
        let distance = bits >> 1;
        if distance == 0 || distance > container as u64 {
            return None;
        }
        return Some(Repr::Item(container - distance as usize));
    }
    match bits & 7 {
        SLOT_INT => Some(Repr::Int(sign_extend(bits, width) >> 3)),
        SLOT_SPECIAL => match bits >> 3 {
            SPECIAL_NULL => Some(Repr::Null),
            SPECIAL_FALSE => Some(Repr::Bool(false)),
            SPECIAL_TRUE => Some(Repr::Bool(true)),
            _ => None,
        },
        SLOT_ATOM => {
            let atom = bits >> 3;
            if atom >= atoms.count as u64 {
                return None;
            }
            let pos = read_uint(bytes, atoms.entries + atom as usize * atoms.width, atoms.width);
            usize::try_from(pos).ok().map(Repr::Item)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Encoder, SharedKeys};

    /// Documents of every footer shape: shared keys only (small and large), local keys, atoms,
    /// both, and none.
    fn documents() -> Vec<Vec<u8>> {
        let mut keys = SharedKeys::new();
        for name in ["id", "title", "priority", "tags"] {
            keys.add(name).unwrap();
        }
        let mut documents = Vec::new();
        let string_lens: &[usize] = if cfg!(miri) { &[0, 3] } else { &[0, 3, 300, 70_000] };
        for &string_len in string_lens {
            for local in [false, true] {
                let mut out = Encoder::with_shared_keys(&keys);
                out.begin_dict().unwrap();
                out.key("id").unwrap();
                out.push_i64(7).unwrap();
                out.key("title").unwrap();
                out.push_str(&"t".repeat(string_len)).unwrap();
                if local {
                    out.key("not shared").unwrap();
                    out.push_i64(-1).unwrap();
                }
                out.end_dict().unwrap();
                documents.push(out.finish().unwrap());
            }
        }
        for json in [&br#"{"a": 1}"#[..], b"[1, 2]", b"\"text\"", b"3", br#"{"a": "repeated", "b": "repeated"}"#] {
            documents.push(crate::from_json(json).unwrap());
        }
        documents
    }

    #[test]
    fn the_shared_only_footer_is_the_general_footer_or_none() {
        let mut fast = 0;
        for document in documents() {
            let mut variants = vec![document.clone()];
            let tail = document.len().saturating_sub(24);
            for byte in tail..document.len() {
                for bit in 0..8 {
                    let mut damaged = document.clone();
                    damaged[byte] ^= 1 << bit;
                    variants.push(damaged);
                }
            }
            variants.extend((0..document.len()).rev().take(24).map(|cut| document[..cut].to_vec()));
            for bytes in variants {
                if let Some(footer) = read_shared_only_footer(&bytes) {
                    assert_eq!(Ok(footer), read_footer(&bytes), "{bytes:02x?}");
                    fast += 1;
                }
            }
        }
        // The undamaged shared-only documents, at least, take the short read.
        assert!(fast >= 4, "{fast}");
    }
}
