//! Validation of untrusted bytes, in one linear pass.
//!
//! "Valid bytes" means, and [`crate::Doc::from_untrusted`] checks, all of the following:
//!
//! 1. The footer and tail parse (`footer::parse_footer`), and the version is supported.
//! 2. The value region `[0, tail_start)` is a gap-free sequence of items, each with a known tag
//!    and a length that stays inside the region. Old tails left by amends are skipped whole.
//! 3. Every string item is UTF-8.
//! 4. Every pointer slot points strictly backwards, at the first byte of a value item (never
//!    into the middle of one, never at a tail). Because targets lie before their container,
//!    pointers cannot form cycles.
//! 5. Every container's stored height is at least 1, at most the depth limit, and greater than
//!    the height of each container it points at, so nesting is bounded by the root's height.
//! 6. Inline slots use a defined tag and special code; atom references are below the atom count.
//! 7. Dict key ids are strictly ascending and name an existing shared or local key.
//! 8. Key and atom table entries point at string items. The key index holds each local key
//!    exactly once. In a hashed index, looking up each key's own name from its hash slot reaches
//!    it within `KEY_PROBE_MAX` probes without meeting an equal name first; in a sorted index,
//!    names are strictly ascending. Either way local keys are unique and every lookup is
//!    bounded. No local key is also a shared key below the document's shared count.
//!
//! 9. The tree a reader walks from the root, with every shared container expanded, has at most
//!    `EXPANDED_ITEMS_PER_BYTE_MAX` items per byte of the document. Sharing is legal (an amend
//!    points at unchanged subtrees, and an edit may place one original subtree twice), but a
//!    small document can never stand for an exponentially large tree.
//!
//! Each item is visited once and each slot once, and a pointer check is one bit lookup, so the
//! time is linear in the input size whatever the sharing between subtrees. Rule 9 costs one bit
//! per container reference during the scan; only when some container is referenced twice does
//! a second pass sum expanded sizes bottom-up (children precede parents, so one pass in
//! position order suffices). Memory is two bits per input byte, plus one map entry per
//! container in that second pass.

use crate::error::FormatError;
use crate::footer::{Footer, Table, decode_slot_checked, parse_footer};
use crate::layout::*;
use crate::reader::Doc;
use crate::repr::Repr;
use crate::shared_keys::SharedKeys;

/// Options for [`crate::Doc::validate`].
///
/// ```
/// use tessera_value::{Doc, FormatError, ValidateOptions};
/// let bytes = tessera_value::from_json(br#"[[["deep"]]]"#).unwrap();
/// let shallow = ValidateOptions { depth_max: 2 };
/// assert!(matches!(Doc::validate(&bytes, None, &shallow), Err(FormatError::TooDeep { limit: 2, .. })));
/// assert!(Doc::validate(&bytes, None, &ValidateOptions::default()).is_ok());
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ValidateOptions {
    /// Deepest nesting accepted (containers inside containers), at most 255.
    pub depth_max: u8,
}

impl Default for ValidateOptions {
    fn default() -> Self {
        ValidateOptions { depth_max: DEPTH_DEFAULT }
    }
}

/// One bit per byte of the value region: set where a value item starts.
struct ItemStarts<'w> {
    words: &'w mut [u64],
}

/// Words of one [`ItemStarts`] kept on the stack: value regions up to 512 bytes (a document
/// field, a dictionary value, most records) validate with no allocation.
const INLINE_WORDS: usize = 8;

/// The words of a validator's two bitmaps, each `len.div_ceil(64)` long, zeroed: from `inline`
/// when they fit, else from `heap` (one allocation for both).
fn bitmap_words<'w>(len: usize, inline: &'w mut [u64; 2 * INLINE_WORDS], heap: &'w mut Vec<u64>) -> (ItemStarts<'w>, ItemStarts<'w>) {
    let words = len.div_ceil(64);
    let (first, second) = if words <= INLINE_WORDS {
        let (first, second) = inline.split_at_mut(INLINE_WORDS);
        (&mut first[..words], &mut second[..words])
    } else {
        *heap = vec![0; 2 * words];
        heap.split_at_mut(words)
    };
    (ItemStarts { words: first }, ItemStarts { words: second })
}

impl ItemStarts<'_> {
    #[inline(always)]
    fn set(&mut self, pos: usize) {
        self.words[pos / 64] |= 1 << (pos % 64);
    }
    #[inline(always)]
    fn contains(&self, pos: usize) -> bool {
        self.words.get(pos / 64).is_some_and(|word| word & (1 << (pos % 64)) != 0)
    }
}

struct Validator<'a> {
    bytes: &'a [u8],
    end: usize,
    starts: ItemStarts<'a>,
    /// Containers referenced by a pointer slot so far.
    referenced: ItemStarts<'a>,
    /// Some container is referenced by more than one slot.
    shared_container: bool,
    atoms: Table,
    key_id_limit: u64,
    depth_max: u8,
    /// The document's version has packed numeric arrays.
    packed_allowed: bool,
}

pub(crate) fn validate(bytes: &[u8], shared: Option<&SharedKeys>, options: &ValidateOptions) -> Result<Footer, FormatError> {
    let (footer, root) = parse_footer(bytes)?;
    if footer.shared_count > 0 {
        let available = shared.map_or(0, |s| s.len() as u64);
        if available < footer.shared_count {
            return Err(FormatError::MissingSharedKeys { needed: footer.shared_count, available });
        }
    }
    let end = footer.tail_start;
    let (mut inline, mut heap) = ([0; 2 * INLINE_WORDS], Vec::new());
    let (starts, referenced) = bitmap_words(end, &mut inline, &mut heap);
    let mut validator = Validator {
        bytes,
        end,
        starts,
        referenced,
        shared_container: false,
        atoms: footer.atoms,
        key_id_limit: footer.shared_count + footer.keys.count as u64,
        depth_max: options.depth_max,
        packed_allowed: bytes[bytes.len() - 1] >> 4 >= FORMAT_VERSION_PACKED,
    };
    validator.scan()?;
    validator.check_key_table(&footer, shared)?;
    validator.check_atom_table()?;
    if let Repr::Item(pos) = root {
        validator.check_target(pos, u16::MAX, footer.root_slot_pos)?;
        if is_container(bytes[pos]) {
            let height = height_of(bytes, pos);
            if height > options.depth_max {
                return Err(FormatError::TooDeep { offset: pos, height, limit: options.depth_max });
            }
            if validator.shared_container {
                validator.check_expanded_size(pos)?;
            }
        }
    }
    Ok(footer)
}

impl Validator<'_> {
    fn scan(&mut self) -> Result<(), FormatError> {
        let mut pos = 0;
        while pos < self.end {
            let tag = self.bytes[pos];
            let next = match tag {
                0x10..=0x1F => self.fixed(pos, 1 + (tag & 7) as usize + 1)?,
                TAG_F32 => self.fixed(pos, 5)?,
                TAG_F64 => self.fixed(pos, 9)?,
                0x40..=0x4F => self.check_blob(pos, false)?,
                0x80..=0xBF => self.check_blob(pos, true)?,
                0x50..=0x53 => self.check_container(pos, false)?,
                0x60..=0x6F => self.check_container(pos, true)?,
                0x30..=0x3F if self.packed_allowed => crate::packed::header_checked(self.bytes, pos, self.end)?.1,
                0x70..=0x77 => {
                    // A tail superseded by an amend: not a value, skipped whole.
                    let (total, _) = read_varint(self.bytes, pos + 1, self.end).ok_or(FormatError::BadLength { offset: pos })?;
                    let next = (pos as u64).checked_add(total).filter(|&n| n <= self.end as u64 && total > 1);
                    pos = next.ok_or(FormatError::BadLength { offset: pos })? as usize;
                    continue;
                }
                _ => return Err(FormatError::BadTag { offset: pos, tag }),
            };
            self.starts.set(pos);
            pos = next;
        }
        Ok(())
    }

    #[inline]
    fn fixed(&self, pos: usize, size: usize) -> Result<usize, FormatError> {
        let next = pos + size;
        if next > self.end {
            return Err(FormatError::Truncated { offset: next });
        }
        Ok(next)
    }

    /// Checks a string or binary item and returns the position after it.
    #[inline]
    fn check_blob(&self, pos: usize, is_string: bool) -> Result<usize, FormatError> {
        let (start, len) = self.blob_extent(pos, is_string)?;
        if is_string && !is_utf8(&self.bytes[start..start + len]) {
            return Err(FormatError::BadUtf8 { offset: pos });
        }
        Ok(start + len)
    }

    #[inline]
    fn blob_extent(&self, pos: usize, is_string: bool) -> Result<(usize, usize), FormatError> {
        let tag = self.bytes[pos];
        let (base, inline_max) = if is_string { (TAG_STRING, STRING_INLINE_LEN_MAX) } else { (TAG_BINARY, BINARY_INLINE_LEN_MAX) };
        let inline = (tag - base) as usize;
        let (start, len) = if inline <= inline_max {
            (pos + 1, inline as u64)
        } else {
            let (len, used) = read_varint(self.bytes, pos + 1, self.end).ok_or(FormatError::BadLength { offset: pos })?;
            (pos + 1 + used, len)
        };
        if len > (self.end - start) as u64 {
            return Err(FormatError::BadLength { offset: pos });
        }
        Ok((start, len as usize))
    }

    fn check_container(&mut self, pos: usize, is_dict: bool) -> Result<usize, FormatError> {
        let tag = self.bytes[pos];
        if pos + 2 >= self.end {
            return Err(FormatError::Truncated { offset: pos + 2 });
        }
        let height = self.bytes[pos + 1];
        if height == 0 || height > self.depth_max {
            return Err(FormatError::TooDeep { offset: pos, height, limit: self.depth_max });
        }
        let (count, used) = read_varint(self.bytes, pos + 2, self.end).ok_or(FormatError::BadLength { offset: pos })?;
        let width = width_of(tag);
        let key_width = if is_dict { width_of(tag >> 2) } else { 0 };
        let body = pos + 2 + used;
        let size = (count as u128) * ((width + key_width) as u128);
        if size > (self.end - body) as u128 {
            return Err(FormatError::BadLength { offset: pos });
        }
        let count = count as usize;
        let slots = body + count * key_width;
        if is_dict {
            let mut previous: Option<u64> = None;
            for index in 0..count {
                let key = read_uint(self.bytes, body + index * key_width, key_width);
                if key >= self.key_id_limit || previous.is_some_and(|p| p >= key) {
                    return Err(FormatError::UnsortedKeys { offset: pos });
                }
                previous = Some(key);
            }
        }
        for index in 0..count {
            let slot_pos = slots + index * width;
            let bits = read_uint(self.bytes, slot_pos, width);
            let repr = decode_slot_checked(bits, width, pos, &self.atoms, self.bytes)
                .ok_or(FormatError::BadSlot { offset: slot_pos, reason: "undefined slot" })?;
            // Atom entries are checked (as string items) in check_atom_table.
            let is_pointer = bits & SLOT_POINTER_MASK == 0;
            if let (Repr::Item(target), true) = (repr, is_pointer) {
                self.check_target(target, height as u16, slot_pos)?;
                if is_container(self.bytes[target]) {
                    self.shared_container |= self.referenced.contains(target);
                    self.referenced.set(target);
                }
            }
        }
        Ok(slots + count * width)
    }

    /// A pointer target must be an earlier value item, and a container lower than its parent.
    #[inline]
    fn check_target(&self, target: usize, parent_height: u16, slot_pos: usize) -> Result<(), FormatError> {
        if !self.starts.contains(target) {
            return Err(FormatError::BadSlot { offset: slot_pos, reason: "pointer not at the start of an earlier item" });
        }
        if is_container(self.bytes[target]) && height_of(self.bytes, target) as u16 >= parent_height {
            let limit = parent_height.min(255) as u8;
            return Err(FormatError::TooDeep { offset: target, height: height_of(self.bytes, target), limit });
        }
        Ok(())
    }

    /// Rule 9: sums the expanded size of every container, in position order, and bounds the
    /// root's.
    fn check_expanded_size(&self, root: usize) -> Result<(), FormatError> {
        let limit = (self.bytes.len() as u64).saturating_mul(EXPANDED_ITEMS_PER_BYTE_MAX);
        let mut sizes: std::collections::HashMap<usize, u64> = std::collections::HashMap::new();
        for (word_index, &word) in self.starts.words.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let pos = word_index * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let tag = self.bytes[pos];
                if !is_container(tag) {
                    continue;
                }
                if crate::packed::is_packed_tag(tag) {
                    // No slots: every row and number is one item a reader walks.
                    sizes.insert(pos, crate::packed::header_trusted(self.bytes, pos).expanded_items());
                    if pos == root {
                        return Ok(());
                    }
                    continue;
                }
                let is_dict = tag & 0xF0 == TAG_DICT;
                // The scan checked this container's extent, so these reads are in bounds.
                let (count, used) = read_varint(self.bytes, pos + 2, self.end).ok_or(FormatError::BadLength { offset: pos })?;
                let width = width_of(tag);
                let slots = pos + 2 + used + if is_dict { count as usize * width_of(tag >> 2) } else { 0 };
                let mut size = 1u64;
                for index in 0..count as usize {
                    let bits = read_uint(self.bytes, slots + index * width, width);
                    let child = if bits & SLOT_POINTER_MASK == 0 { sizes.get(&(pos - (bits >> 1) as usize)).copied() } else { None };
                    size = size.saturating_add(child.unwrap_or(1));
                }
                if size > limit {
                    return Err(FormatError::SharedContainer { offset: pos });
                }
                sizes.insert(pos, size);
                if pos == root {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    fn string_item(&self, pos: u64) -> Option<&[u8]> {
        let pos = usize::try_from(pos).ok()?;
        if !self.starts.contains(pos) || self.bytes[pos] < TAG_STRING {
            return None;
        }
        let (start, len) = self.blob_extent(pos, true).ok()?;
        Some(&self.bytes[start..start + len])
    }

    fn check_key_table(&self, footer: &Footer, shared: Option<&SharedKeys>) -> Result<(), FormatError> {
        let keys = &footer.keys;
        if keys.count == 0 {
            return Ok(());
        }
        let index = keys.entries + keys.count * keys.width;
        let slots = footer.key_index_len;
        let entry_at = |slot: usize| read_uint(self.bytes, index + slot * keys.width, keys.width);
        // Every local id appears exactly once in the index.
        let mut seen = vec![false; keys.count];
        for slot in 0..slots {
            let entry = entry_at(slot);
            if entry == 0 && footer.key_index_kind != KeyIndexKind::Sorted {
                continue;
            }
            let local = entry.wrapping_sub(1) as usize;
            if local >= keys.count || std::mem::replace(&mut seen[local], true) {
                return Err(FormatError::BadKeyTable { index: slot });
            }
        }
        if seen.iter().any(|&present| !present) {
            return Err(FormatError::BadKeyTable { index: slots });
        }
        let name_of = |local: usize| {
            let item = read_uint(self.bytes, keys.entries + local * keys.width, keys.width);
            self.string_item(item).map(|name| (item, name))
        };
        if footer.key_index_kind == KeyIndexKind::Sorted {
            // Strictly ascending names: bisection finds each, and no name is there twice.
            let mut previous: Option<&[u8]> = None;
            for slot in 0..slots {
                let (_, name) = name_of(entry_at(slot) as usize - 1).ok_or(FormatError::BadKeyTable { index: slot })?;
                if previous.is_some_and(|previous| previous >= name) {
                    return Err(FormatError::BadKeyTable { index: slot });
                }
                previous = Some(name);
            }
        }
        for local in 0..keys.count {
            let bad = FormatError::BadKeyTable { index: local };
            let (item, name) = name_of(local).ok_or(bad.clone())?;
            if footer.key_index_kind != KeyIndexKind::Sorted && !self.hashed_lookup_stops_at(footer, local, name, &name_of) {
                return Err(bad);
            }
            if let Some(shared) = shared.filter(|_| footer.shared_count > 0) {
                let name = std::str::from_utf8(name).map_err(|_| bad.clone())?;
                if shared.id_below(name, footer.shared_count).is_some() {
                    return Err(FormatError::AmbiguousKey { offset: item as usize });
                }
            }
        }
        Ok(())
    }

    /// True if the lookup readers do for `name`, from its home slot, reaches local key `local`
    /// within [`KEY_PROBE_MAX`] probes without first meeting another key of the same name.
    fn hashed_lookup_stops_at<'n>(
        &self,
        footer: &Footer,
        local: usize,
        name: &[u8],
        name_of: &impl Fn(usize) -> Option<(u64, &'n [u8])>,
    ) -> bool {
        let keys = &footer.keys;
        let index = keys.entries + keys.count * keys.width;
        let mask = footer.key_index_len - 1;
        let mut slot = footer.key_index_kind.hash(name) as usize & mask;
        for _ in 0..KEY_PROBE_MAX {
            let entry = read_uint(self.bytes, index + slot * keys.width, keys.width);
            if entry == 0 {
                return false;
            }
            if entry as usize - 1 == local {
                return true;
            }
            if name_of(entry as usize - 1).is_some_and(|(_, other)| other == name) {
                return false; // a duplicate name, found first
            }
            slot = (slot + 1) & mask;
        }
        false
    }

    fn check_atom_table(&self) -> Result<(), FormatError> {
        for index in 0..self.atoms.count {
            let item = read_uint(self.bytes, self.atoms.entries + index * self.atoms.width, self.atoms.width);
            if self.string_item(item).is_none() {
                return Err(FormatError::BadSlot {
                    offset: self.atoms.entries + index * self.atoms.width,
                    reason: "atom is not a string item",
                });
            }
        }
        Ok(())
    }
}

/// Rule 9's bound on the expanded tree, in items per byte of the document.
pub const EXPANDED_ITEMS_PER_BYTE_MAX: u64 = 4;

/// Arrays, dicts and packed arrays: the items with a height.
#[inline(always)]
fn is_container(tag: u8) -> bool {
    matches!(tag & 0xF0, TAG_ARRAY | TAG_DICT) || crate::packed::is_packed_tag(tag)
}

/// Height of a container item (see [`is_container`]) whose extent the scan has checked.
#[inline(always)]
fn height_of(bytes: &[u8], pos: usize) -> u8 {
    match bytes[pos] & 0xF0 {
        TAG_PACKED => crate::reader::packed_height(bytes[pos]),
        _ => bytes[pos + 1],
    }
}

impl<'a> Doc<'a> {
    /// Checks every byte of `bytes` once, in linear time, and opens the document.
    ///
    /// After this succeeds, every accessor on the document's values is infallible. Documents
    /// that refer to shared keys need [`Doc::from_untrusted_with_keys`].
    ///
    /// ```
    /// use tessera_value::{Doc, FormatError};
    /// let bytes = tessera_value::from_json(br#"{"a": [1, 2]}"#).unwrap();
    /// assert_eq!(Doc::from_untrusted(&bytes)?.root().path("a[1]").unwrap().unwrap().as_i64(), Some(2));
    /// let mut corrupt = bytes.clone();
    /// corrupt.truncate(bytes.len() - 1);
    /// assert!(Doc::from_untrusted(&corrupt).is_err());
    /// # Ok::<(), FormatError>(())
    /// ```
    pub fn from_untrusted(bytes: &'a [u8]) -> Result<Doc<'a>, FormatError> {
        Self::validate(bytes, None, &crate::ValidateOptions::default())
    }

    /// [`Doc::from_untrusted`] for a document encoded with shared keys.
    ///
    /// ```
    /// use tessera_value::{to_vec_with_keys, Doc, FormatError, SharedKeys};
    /// let mut keys = SharedKeys::new();
    /// keys.add("id").unwrap();
    /// let bytes = to_vec_with_keys(&std::collections::BTreeMap::from([("id", 1)]), &keys).unwrap();
    /// assert_eq!(Doc::from_untrusted_with_keys(&bytes, &keys)?.root().get("id").unwrap().as_i64(), Some(1));
    /// assert!(matches!(Doc::from_untrusted(&bytes), Err(FormatError::MissingSharedKeys { needed: 1, available: 0 })));
    /// # Ok::<(), FormatError>(())
    /// ```
    pub fn from_untrusted_with_keys(bytes: &'a [u8], shared: &'a SharedKeys) -> Result<Doc<'a>, FormatError> {
        Self::validate(bytes, Some(shared), &crate::ValidateOptions::default())
    }

    /// [`Doc::from_untrusted`] with explicit options (depth limit, shared keys).
    ///
    /// ```
    /// use tessera_value::{Doc, ValidateOptions};
    /// let bytes = tessera_value::from_json(b"[[1]]").unwrap();
    /// let doc = Doc::validate(&bytes, None, &ValidateOptions { depth_max: 8 }).unwrap();
    /// assert!(doc.is_validated());
    /// assert_eq!(doc.root().to_json(), "[[1]]");
    /// ```
    pub fn validate(bytes: &'a [u8], shared: Option<&'a SharedKeys>, options: &crate::ValidateOptions) -> Result<Doc<'a>, FormatError> {
        let footer = validate(bytes, shared, options)?;
        Ok(Doc::from_footer(bytes, shared, &footer, true))
    }
}
