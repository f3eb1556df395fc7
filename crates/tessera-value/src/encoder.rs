//! The encoder: a push-style builder that writes a document in one pass.
//!
//! Children are written before their parents (post-order), so every pointer points backwards and
//! a container knows the widths of its slots when it closes. Strings are de-duplicated across the
//! document at every length: a repeat close by becomes a pointer, a repeat far away becomes a
//! reference to an atom (a document-level string table), so containers keep narrow slots. Dict
//! keys are interned in a key table and stored as small integer ids.

use crate::error::EncodeError;
use crate::layout::*;
use crate::reader::Doc;
use crate::shared_keys::SharedKeys;
use hashbrown::HashTable;
use std::hash::Hasher;

/// A repeat of a string closer than this many bytes is stored as a pointer (it fits a 2-byte
/// slot with room for the rest of the container); a farther one becomes an atom reference.
const NEAR_DISTANCE_MAX: usize = 1 << 14;
/// An atom table entry costs about this many bytes; a far repeat of a string item no larger than
/// this is cheaper to write again.
const ATOM_ENTRY_COST: usize = 4;
/// Strings longer than this are hashed by their length and their first and last 32 bytes, so
/// hashing costs the same for a 40-byte and a 40-kilobyte string. Equal strings still hash equal.
const HASH_FULL_LEN_MAX: usize = 64;

#[derive(Clone, Copy, Debug)]
pub(crate) enum SlotKind {
    Pointer,
    Int,
    Special,
    Atom,
}

/// A value waiting in an open container: either inline or a pointer to an item already written.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot {
    kind: SlotKind,
    /// Container height of the target (0 for scalars).
    height: u8,
    /// Absolute item position, integer bits, special code or atom id.
    payload: u64,
}

impl Slot {
    /// What the packing of an array needs to know of an element.
    #[inline]
    fn as_element(&self) -> crate::packing::Element {
        match self.kind {
            SlotKind::Int => crate::packing::Element::Int(self.payload as i64),
            SlotKind::Pointer => crate::packing::Element::Item { pos: self.payload as usize, height: self.height },
            SlotKind::Special | SlotKind::Atom => crate::packing::Element::Other,
        }
    }

    pub(crate) fn pointer(pos: usize, height: u8) -> Slot {
        Slot { kind: SlotKind::Pointer, height, payload: pos as u64 }
    }
    fn special(code: u64) -> Slot {
        Slot { kind: SlotKind::Special, height: 0, payload: code }
    }

    /// Bytes this slot needs in a container starting at `container_pos`.
    #[inline]
    fn width_at(&self, container_pos: usize) -> usize {
        match self.kind {
            SlotKind::Pointer => payload_width(container_pos as u64 - self.payload, 1),
            SlotKind::Int => int_slot_width(self.payload as i64).unwrap_or(8),
            SlotKind::Special => 1,
            SlotKind::Atom => payload_width(self.payload, 3),
        }
    }

    /// The slot's bits (only the low `width` bytes are written).
    #[inline]
    fn bits_at(&self, container_pos: usize) -> u64 {
        match self.kind {
            SlotKind::Pointer => (container_pos as u64 - self.payload) << 1,
            SlotKind::Int => ((self.payload as i64) << 3) as u64 | SLOT_INT,
            SlotKind::Special => (self.payload << 3) | SLOT_SPECIAL,
            SlotKind::Atom => (self.payload << 3) | SLOT_ATOM,
        }
    }
}

#[derive(Clone, Copy)]
struct Frame {
    is_dict: bool,
    /// Length of the output when the container was opened: its elements' items follow.
    out_start: usize,
    slots_start: usize,
    keys_start: usize,
    /// Key id given by `key()` and not yet used by a value.
    pending_key: Option<u64>,
    /// Key-table entry of the previous key in this dict, for predicting the next one.
    previous_key_entry: u32,
}

const NO_ENTRY: u32 = u32::MAX;

/// Dicts up to this many entries are sorted by insertion sort.
const INSERTION_SORT_LEN_MAX: usize = 32;

/// Appends the slots of a container at `container_pos`, each `width` bytes.
#[inline]
fn write_slots(out: &mut Vec<u8>, slots: &[Slot], container_pos: usize, width: usize) {
    match width {
        1 => out.extend(slots.iter().map(|slot| slot.bits_at(container_pos) as u8)),
        2 => write_fixed::<2>(out, slots.iter().map(|slot| slot.bits_at(container_pos))),
        4 => write_fixed::<4>(out, slots.iter().map(|slot| slot.bits_at(container_pos))),
        _ => write_fixed::<8>(out, slots.iter().map(|slot| slot.bits_at(container_pos))),
    }
}

/// A key id that `keys` (a dict's, not in order) holds twice, if any: pairs compared in place
/// for a dict of a struct's size, a sorted copy beyond.
fn first_repeat(keys: &[u64]) -> Option<u64> {
    const PAIRWISE_MAX: usize = 16;
    if keys.len() <= PAIRWISE_MAX {
        return keys.iter().enumerate().find(|(at, key)| keys[..*at].contains(key)).map(|(_, key)| *key);
    }
    let mut sorted = keys.to_vec();
    sorted.sort_unstable();
    sorted.windows(2).find(|pair| pair[0] == pair[1]).map(|pair| pair[0])
}

/// Appends dict key ids, each `width` bytes.
#[inline]
fn write_key_ids(out: &mut Vec<u8>, keys: &[u64], width: usize) {
    match width {
        1 => out.extend(keys.iter().map(|&key| key as u8)),
        2 => write_fixed::<2>(out, keys.iter().copied()),
        4 => write_fixed::<4>(out, keys.iter().copied()),
        _ => write_fixed::<8>(out, keys.iter().copied()),
    }
}

/// Appends the low `W` bytes of each value, little-endian, with fixed-size copies.
#[inline(always)]
fn write_fixed<const W: usize>(out: &mut Vec<u8>, values: impl ExactSizeIterator<Item = u64>) {
    let start = out.len();
    out.resize(start + values.len() * W, 0);
    for (chunk, value) in out[start..].chunks_exact_mut(W).zip(values) {
        chunk.copy_from_slice(&value.to_le_bytes()[..W]);
    }
}

#[derive(Clone, Copy)]
struct KeyEntry {
    hash: u64,
    arena_start: usize,
    len: usize,
    id: u64,
}

#[derive(Clone, Copy)]
struct StringEntry {
    hash: u64,
    item_pos: usize,
    content_pos: usize,
    len: usize,
    atom: u32,
    /// The cache generation that wrote the entry: entries of earlier documents are dead.
    generation: u32,
}

const EMPTY_ENTRY: StringEntry = StringEntry { hash: 0, item_pos: usize::MAX, content_pos: 0, len: 0, atom: NO_ENTRY, generation: 0 };

/// Smallest and largest number of entries of the string cache.
const STRING_CACHE_LEN_MIN: usize = 64;
const STRING_CACHE_LEN_MAX: usize = 1 << 20;
/// Most bytes of string-cache table a reused encoder keeps between documents (a larger one,
/// left by a document of many strings, is freed when the next document starts).
const STRING_CACHE_KEPT_BYTES_MAX: usize = 1 << 20;

/// Most capacity of the output buffer a reused encoder keeps between documents: a larger one
/// is freed (the collection's per-thread record buffers keep the same bound).
const OUT_KEPT_BYTES_MAX: usize = 1 << 20;

/// The strings written so far, for de-duplication: a direct-mapped cache indexed by hash, so a
/// lookup is one probe and an insert one store. A string whose entry was overwritten by another
/// with the same index is written again when it recurs: de-duplication is best-effort, and the
/// cache doubles whenever it has taken twice as many inserts as it has entries, so in practice
/// only strings that do not recur are ever lost from it.
///
/// Which strings share an entry depends on the table's size, so every document starts at the
/// same size ([`STRING_CACHE_LEN_MIN`], or what [`Encoder::reserve`] asks for) and grows at the
/// same points whatever the encoder wrote before: a value's bytes depend on the value alone
/// (an upsert of an equal record compares bytes to find that nothing changed).
struct StringCache {
    entries: Vec<StringEntry>,
    inserts: usize,
    /// Bumped when the encoder is reused for another document (starts at 1).
    generation: u32,
}

impl StringCache {
    /// Forgets every entry and returns to the starting size, keeping the table's memory up to
    /// [`STRING_CACHE_KEPT_BYTES_MAX`].
    fn reset(&mut self) {
        self.inserts = 0;
        if self.entries.capacity() * std::mem::size_of::<StringEntry>() > STRING_CACHE_KEPT_BYTES_MAX {
            self.entries = Vec::new(); // made again at the first string
            return;
        }
        self.entries.truncate(STRING_CACHE_LEN_MIN);
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.entries.fill(EMPTY_ENTRY);
            self.generation = 1;
        }
    }

    #[inline(always)]
    fn is_live(&self, entry: &StringEntry) -> bool {
        entry.generation == self.generation && entry.item_pos != usize::MAX
    }

    /// No entries yet: small documents (a record, a dictionary value) often have no string to
    /// de-duplicate, and should not pay for the table.
    fn empty() -> Self {
        StringCache { entries: Vec::new(), inserts: 0, generation: 1 }
    }

    #[inline(always)]
    fn slot(&mut self, hash: u64) -> &mut StringEntry {
        if self.entries.is_empty() {
            self.entries.resize(STRING_CACHE_LEN_MIN, EMPTY_ENTRY);
        }
        let mask = self.entries.len() - 1;
        &mut self.entries[hash as usize & mask]
    }

    #[inline]
    fn insert(&mut self, mut entry: StringEntry) {
        entry.generation = self.generation;
        *self.slot(entry.hash) = entry;
        self.inserts += 1;
        if self.inserts > 2 * self.entries.len() && self.entries.len() < STRING_CACHE_LEN_MAX {
            self.grow_to(self.entries.len() * 2);
            self.inserts = 0;
        }
    }

    /// Grows the table to `len` entries (a power of two, at least the current size), in place:
    /// each live entry moves to where a new table of `len` would put it. Its new index keeps
    /// the old one's low bits, so it lies in the added part, and no two entries meet.
    fn grow_to(&mut self, len: usize) {
        let old_len = self.entries.len();
        debug_assert!(len.is_power_of_two() && len >= old_len, "the string cache only grows, by powers of two");
        self.entries.resize(len, EMPTY_ENTRY);
        let mask = len - 1;
        for index in 0..old_len {
            let entry = self.entries[index];
            let home = entry.hash as usize & mask;
            if self.is_live(&entry) && home != index {
                self.entries[home] = entry;
                self.entries[index] = EMPTY_ENTRY;
            }
        }
    }
}

fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut hasher = rustc_hash::FxHasher::default();
    if bytes.len() <= HASH_FULL_LEN_MAX {
        hasher.write(bytes);
    } else {
        hasher.write(&bytes[..32]);
        hasher.write(&bytes[bytes.len() - 32..]);
    }
    hasher.write_usize(bytes.len());
    hasher.finish()
}

/// Builds one document.
///
/// Push scalars, open and close arrays and dicts, give each dict value a [`Encoder::key`] first,
/// then call [`Encoder::finish`].
///
/// ```
/// use tessera_value::{Encoder, Doc};
/// let mut enc = Encoder::new();
/// enc.begin_dict().unwrap();
/// enc.key("name").unwrap();
/// enc.push_str("Ada").unwrap();
/// enc.key("langs").unwrap();
/// enc.begin_array().unwrap();
/// enc.push_str("en").unwrap();
/// enc.push_str("fr").unwrap();
/// enc.end_array().unwrap();
/// enc.end_dict().unwrap();
/// let bytes = enc.finish().unwrap();
/// let doc = Doc::from_untrusted(&bytes).unwrap();
/// assert_eq!(doc.root().to_json(), r#"{"name":"Ada","langs":["en","fr"]}"#);
/// ```
pub struct Encoder<'k> {
    shared: Option<&'k SharedKeys>,
    shared_count: u64,
    /// Everything else, boxed: a per-thread encoder is handed from one document (and one
    /// shared-key table) to the next by moving one pointer, not the whole state.
    pub(crate) b: Box<Buffers>,
}

/// The encoder's state and reusable buffers; none of it borrows anything.
pub(crate) struct Buffers {
    pub(crate) out: Vec<u8>,
    frames: Vec<Frame>,
    slots: Vec<Slot>,
    slot_keys: Vec<u64>,
    root: Option<Slot>,
    // dict keys
    key_index: HashTable<u32>,
    key_entries: Vec<KeyEntry>,
    key_arena: Vec<u8>,
    /// For each key entry (and `len()` for "dict start"), the entry that followed it last time.
    key_next: Vec<u32>,
    /// Item position of each local key, by local id.
    local_keys: Vec<usize>,
    // string values
    strings: StringCache,
    atoms: Vec<usize>,
    scratch: Vec<(u64, Slot)>,
    /// Reused buffers for the tail: tables, key hashes, key index.
    tail_scratch: Vec<u8>,
    hash_scratch: Vec<u64>,
    index_scratch: Vec<u32>,
    /// Numbers of an array being packed.
    pack_scratch: Vec<crate::packed::PackedValue>,
    /// Amend mode: items below this position belong to the original document.
    pub(crate) original_len: usize,
    pub(crate) original_ptr: usize,
    /// Amend mode: the original items referenced, by position; once one is referenced twice
    /// (`counting_references`), the items a reader walks under every reference (rule 9 of
    /// docs/format.md), with each container's count by position (see `Encoder::push_value`).
    pub(crate) referenced: rustc_hash::FxHashSet<usize>,
    pub(crate) counting_references: bool,
    pub(crate) referenced_items: u64,
    pub(crate) expanded_memo: rustc_hash::FxHashMap<usize, u64>,
}

impl Buffers {
    pub(crate) fn new() -> Self {
        Buffers {
            out: Vec::new(),
            frames: Vec::new(),
            slots: Vec::new(),
            slot_keys: Vec::new(),
            root: None,
            key_index: HashTable::new(),
            key_entries: Vec::new(),
            key_arena: Vec::new(),
            key_next: Vec::new(),
            local_keys: Vec::new(),
            strings: StringCache::empty(),
            atoms: Vec::new(),
            scratch: Vec::new(),
            tail_scratch: Vec::new(),
            hash_scratch: Vec::new(),
            index_scratch: Vec::new(),
            pack_scratch: Vec::new(),
            original_len: 0,
            original_ptr: 0,
            referenced: rustc_hash::FxHashSet::default(),
            counting_references: false,
            referenced_items: 0,
            expanded_memo: rustc_hash::FxHashMap::default(),
        }
    }
}

impl Default for Encoder<'static> {
    fn default() -> Self {
        Self::new()
    }
}

impl Encoder<'static> {
    /// An encoder without shared keys.
    ///
    /// ```
    /// let mut out = tessera_value::Encoder::new();
    /// out.push_bool(true)?;
    /// let bytes = out.finish()?;
    /// assert_eq!(tessera_value::Doc::from_untrusted(&bytes).unwrap().root().to_json(), r#"true"#);
    /// # Ok::<(), tessera_value::EncodeError>(())
    /// ```
    pub fn new() -> Self {
        Encoder::build(None)
    }
}

impl<'k> Encoder<'k> {
    /// An encoder that stores the keys found in `shared` as their ids.
    ///
    /// ```
    /// use tessera_value::{Doc, Encoder, SharedKeys};
    /// let mut keys = SharedKeys::new();
    /// keys.add("id").unwrap();
    /// let mut out = Encoder::with_shared_keys(&keys);
    /// out.begin_dict()?;
    /// out.key("id")?; // found in `keys`: stored as its id
    /// out.push_i64(1)?;
    /// out.end_dict()?;
    /// let bytes = out.finish()?;
    /// assert_eq!(Doc::from_untrusted_with_keys(&bytes, &keys).unwrap().root().to_json(), r#"{"id":1}"#);
    /// # Ok::<(), tessera_value::EncodeError>(())
    /// ```
    pub fn with_shared_keys(shared: &'k SharedKeys) -> Self {
        Encoder::build(Some(shared))
    }

    fn build(shared: Option<&'k SharedKeys>) -> Self {
        Encoder::with_buffers(shared, Box::new(Buffers::new()))
    }

    /// An encoder over `buffers` (emptied by [`Encoder::reset`] or new) and `shared`.
    pub(crate) fn with_buffers(shared: Option<&'k SharedKeys>, buffers: Box<Buffers>) -> Self {
        Encoder { shared, shared_count: shared.map_or(0, |s| s.len() as u64), b: buffers }
    }

    /// Reserves output capacity, e.g. for the size of the JSON being converted.
    ///
    /// ```
    /// let mut out = tessera_value::Encoder::new();
    /// out.reserve(64);
    /// out.push_str("reserved")?;
    /// let bytes = out.finish()?;
    /// assert_eq!(tessera_value::Doc::from_untrusted(&bytes).unwrap().root().to_json(), r#""reserved""#);
    /// # Ok::<(), tessera_value::EncodeError>(())
    /// ```
    pub fn reserve(&mut self, bytes: usize) {
        self.b.out.reserve(bytes);
        // About one distinct string per 32 bytes of output, in JSON-like data.
        let len = (bytes / 32).clamp(STRING_CACHE_LEN_MIN, STRING_CACHE_LEN_MAX).next_power_of_two();
        if len > self.b.strings.entries.len() {
            self.b.strings.grow_to(len);
        }
    }

    /// Starts an encoder whose output is `doc`'s bytes followed by an appended part: values of
    /// `doc` pushed with [`Encoder::push_value`] are referenced in place instead of copied.
    pub(crate) fn amend(doc: Doc<'k>) -> Self {
        let mut enc = Encoder::build(doc.shared_keys());
        enc.shared_count = doc.shared_count();
        enc.b.out = doc.bytes().to_vec();
        enc.b.original_len = doc.bytes().len();
        enc.b.original_ptr = doc.bytes().as_ptr() as usize;
        for local in 0..doc.local_key_count() {
            let item_pos = doc.local_key_item(local);
            let name = doc.item_str(item_pos);
            enc.b.local_keys.push(item_pos);
            enc.register_key(name, hash_bytes(name.as_bytes()), enc.shared_count + local as u64);
        }
        for atom in 0..doc.atom_count() {
            enc.b.atoms.push(doc.atom_item(atom));
        }
        enc
    }

    // ---------------------------------------------------------------- containers

    /// Opens an array.
    ///
    /// ```
    /// let mut out = tessera_value::Encoder::new();
    /// out.begin_array()?;
    /// out.push_null()?;
    /// out.push_str("x")?;
    /// out.end_array()?;
    /// let bytes = out.finish()?;
    /// assert_eq!(tessera_value::Doc::from_untrusted(&bytes).unwrap().root().to_json(), r#"[null,"x"]"#);
    /// # Ok::<(), tessera_value::EncodeError>(())
    /// ```
    pub fn begin_array(&mut self) -> Result<(), EncodeError> {
        self.open(false)
    }

    /// Opens a dict.
    ///
    /// ```
    /// let mut out = tessera_value::Encoder::new();
    /// out.begin_dict()?;
    /// out.key("a")?;
    /// out.push_i64(1)?;
    /// out.end_dict()?;
    /// let bytes = out.finish()?;
    /// assert_eq!(tessera_value::Doc::from_untrusted(&bytes).unwrap().root().to_json(), r#"{"a":1}"#);
    /// # Ok::<(), tessera_value::EncodeError>(())
    /// ```
    pub fn begin_dict(&mut self) -> Result<(), EncodeError> {
        self.open(true)
    }

    fn open(&mut self, is_dict: bool) -> Result<(), EncodeError> {
        if self.b.frames.len() >= HEIGHT_MAX as usize {
            return Err(EncodeError::TooDeep(HEIGHT_MAX));
        }
        self.check_value_allowed()?;
        self.b.frames.push(Frame {
            is_dict,
            out_start: self.b.out.len(),
            slots_start: self.b.slots.len(),
            keys_start: self.b.slot_keys.len(),
            pending_key: None,
            previous_key_entry: NO_ENTRY,
        });
        Ok(())
    }

    /// Closes the innermost array.
    ///
    /// ```
    /// let mut out = tessera_value::Encoder::new();
    /// out.begin_array()?;
    /// out.begin_array()?;
    /// out.end_array()?;
    /// out.end_array()?;
    /// let bytes = out.finish()?;
    /// assert_eq!(tessera_value::Doc::from_untrusted(&bytes).unwrap().root().to_json(), r#"[[]]"#);
    /// # Ok::<(), tessera_value::EncodeError>(())
    /// ```
    pub fn end_array(&mut self) -> Result<(), EncodeError> {
        match self.b.frames.last() {
            Some(frame) if !frame.is_dict => {}
            Some(_) => return Err(EncodeError::Unbalanced("end_array inside a dict")),
            None => return Err(EncodeError::Unbalanced("end_array without begin_array")),
        }
        let frame = self.b.frames.pop().expect("checked above");
        let slot = self.write_array(frame)?;
        self.place(slot);
        Ok(())
    }

    /// Closes the innermost dict. If a key was given twice, the last value wins.
    ///
    /// ```
    /// let mut out = tessera_value::Encoder::new();
    /// out.begin_dict()?;
    /// out.key("a")?;
    /// out.push_i64(1)?;
    /// out.key("a")?;
    /// out.push_i64(2)?; // the last value wins
    /// out.end_dict()?;
    /// let bytes = out.finish()?;
    /// assert_eq!(tessera_value::Doc::from_untrusted(&bytes).unwrap().root().to_json(), r#"{"a":2}"#);
    /// # Ok::<(), tessera_value::EncodeError>(())
    /// ```
    pub fn end_dict(&mut self) -> Result<(), EncodeError> {
        match self.b.frames.last() {
            Some(frame) if frame.is_dict && frame.pending_key.is_none() => {}
            Some(frame) if frame.is_dict => return Err(EncodeError::KeyOrder("key without a value")),
            Some(_) => return Err(EncodeError::Unbalanced("end_dict inside an array")),
            None => return Err(EncodeError::Unbalanced("end_dict without begin_dict")),
        }
        let frame = self.b.frames.pop().expect("checked above");
        let slot = self.write_dict(frame)?;
        self.place(slot);
        Ok(())
    }

    /// [`Encoder::end_dict`] for a dict whose keys must differ (serde's maps and structs: a
    /// flattened map repeating a field, or a hand-written `Serialize`): a key given twice is
    /// [`EncodeError::RepeatedKey`] naming it, where `end_dict` keeps the last value. A dict
    /// written in key order, as most are, costs one pass over its key ids.
    pub(crate) fn end_dict_refusing_repeats(&mut self) -> Result<(), EncodeError> {
        if let Some(frame) = self.b.frames.last().filter(|frame| frame.is_dict) {
            let keys = &self.b.slot_keys[frame.keys_start..];
            if !keys.windows(2).all(|pair| pair[0] < pair[1])
                && let Some(id) = first_repeat(keys)
            {
                return Err(EncodeError::RepeatedKey(self.key_name(id)));
            }
        }
        self.end_dict()
    }

    /// The name of the dict key whose id is `id` (for an error).
    #[cold]
    fn key_name(&self, id: u64) -> String {
        if let Some(entry) = self.b.key_entries.iter().find(|entry| entry.id == id) {
            return String::from_utf8_lossy(&self.b.key_arena[entry.arena_start..entry.arena_start + entry.len]).into_owned();
        }
        let shared = self.shared.and_then(|shared| shared.name(u32::try_from(id).ok()?));
        shared.map_or_else(|| format!("#{id}"), str::to_owned)
    }

    fn children_shape(&self, from: usize, pos: usize) -> Result<(usize, u8), EncodeError> {
        let mut width = 1;
        let mut height = 0u8;
        for slot in &self.b.slots[from..] {
            width = width.max(slot.width_at(pos));
            height = height.max(slot.height);
        }
        if height == HEIGHT_MAX {
            return Err(EncodeError::TooDeep(HEIGHT_MAX));
        }
        Ok((width, height + 1))
    }

    fn write_array(&mut self, frame: Frame) -> Result<Slot, EncodeError> {
        if let Some(slot) = self.pack_array(&frame) {
            self.b.slots.truncate(frame.slots_start);
            return Ok(slot);
        }
        let pos = self.b.out.len();
        let (width, height) = self.children_shape(frame.slots_start, pos)?;
        let count = self.b.slots.len() - frame.slots_start;
        self.b.out.push(TAG_ARRAY | code_of_width(width));
        self.b.out.push(height);
        write_varint(&mut self.b.out, count as u64);
        write_slots(&mut self.b.out, &self.b.slots[frame.slots_start..], pos, width);
        self.b.slots.truncate(frame.slots_start);
        Ok(Slot::pointer(pos, height))
    }

    /// Writes the array as a packed vector or matrix if it can be one (see `packing.rs`):
    /// its elements' items, the last ones written, are replaced by the packed item.
    fn pack_array(&mut self, frame: &Frame) -> Option<Slot> {
        let slots = &self.b.slots[frame.slots_start..];
        if slots.is_empty() || frame.out_start < self.b.original_len {
            return None;
        }
        let mut values = std::mem::take(&mut self.b.pack_scratch);
        let plan = crate::packing::plan(&self.b.out, frame.out_start, slots.iter().map(Slot::as_element), &mut values);
        let slot = plan.map(|plan| {
            self.b.out.truncate(frame.out_start);
            let pos = self.b.out.len();
            crate::packing::write(&mut self.b.out, &plan, &values);
            Slot::pointer(pos, plan.height())
        });
        values.clear();
        self.b.pack_scratch = values;
        slot
    }

    fn write_dict(&mut self, frame: Frame) -> Result<Slot, EncodeError> {
        let keys = &self.b.slot_keys[frame.keys_start..];
        debug_assert_eq!(keys.len(), self.b.slots.len() - frame.slots_start);
        let sorted_unique = keys.windows(2).all(|pair| pair[0] < pair[1]);
        if !sorted_unique {
            self.sort_dict_entries(frame);
        }
        let pos = self.b.out.len();
        let (width, height) = self.children_shape(frame.slots_start, pos)?;
        let keys = &self.b.slot_keys[frame.keys_start..];
        let count = keys.len();
        let key_width = width_of(width_code_for_unsigned(keys.last().copied().unwrap_or(0)));
        self.b.out.push(TAG_DICT | code_of_width(width) | (code_of_width(key_width) << 2));
        self.b.out.push(height);
        write_varint(&mut self.b.out, count as u64);
        write_key_ids(&mut self.b.out, keys, key_width);
        write_slots(&mut self.b.out, &self.b.slots[frame.slots_start..], pos, width);
        self.b.slots.truncate(frame.slots_start);
        self.b.slot_keys.truncate(frame.keys_start);
        Ok(Slot::pointer(pos, height))
    }

    /// Sorts a dict's entries by key id; of repeated keys the last one stays.
    fn sort_dict_entries(&mut self, frame: Frame) {
        let count = self.b.slot_keys.len() - frame.keys_start;
        if count <= INSERTION_SORT_LEN_MAX && self.sort_small_dict(frame) {
            return;
        }
        self.b.scratch.clear();
        for (index, &key) in self.b.slot_keys[frame.keys_start..].iter().enumerate() {
            self.b.scratch.push((key, self.b.slots[frame.slots_start + index]));
        }
        self.b.scratch.sort_by_key(|entry| entry.0); // stable: repeats keep their order
        let mut write = 0;
        for read in 0..self.b.scratch.len() {
            if write > 0 && self.b.scratch[write - 1].0 == self.b.scratch[read].0 {
                self.b.scratch[write - 1] = self.b.scratch[read];
            } else {
                self.b.scratch[write] = self.b.scratch[read];
                write += 1;
            }
        }
        self.b.scratch.truncate(write);
        self.b.slot_keys.truncate(frame.keys_start);
        self.b.slots.truncate(frame.slots_start);
        for &(key, slot) in &self.b.scratch {
            self.b.slot_keys.push(key);
            self.b.slots.push(slot);
        }
    }

    /// Insertion sort in place, for small dicts, which are usually nearly sorted (one key
    /// first seen in a nested dict is out of place). Returns false, leaving the entries
    /// sorted, if a key repeats; the general path then drops the repeats.
    fn sort_small_dict(&mut self, frame: Frame) -> bool {
        let keys = &mut self.b.slot_keys[frame.keys_start..];
        let slots = &mut self.b.slots[frame.slots_start..];
        for next in 1..keys.len() {
            let (key, slot) = (keys[next], slots[next]);
            let mut at = next;
            while at > 0 && keys[at - 1] > key {
                keys[at] = keys[at - 1];
                slots[at] = slots[at - 1];
                at -= 1;
            }
            keys[at] = key;
            slots[at] = slot;
        }
        keys.windows(2).all(|pair| pair[0] < pair[1])
    }

    // ---------------------------------------------------------------- keys

    /// Gives the key of the next value in the innermost dict.
    ///
    /// ```
    /// let mut out = tessera_value::Encoder::new();
    /// out.begin_dict()?;
    /// out.key("name")?;
    /// out.push_str("Ada")?;
    /// out.end_dict()?;
    /// let bytes = out.finish()?;
    /// assert_eq!(tessera_value::Doc::from_untrusted(&bytes).unwrap().root().to_json(), r#"{"name":"Ada"}"#);
    /// # Ok::<(), tessera_value::EncodeError>(())
    /// ```
    pub fn key(&mut self, name: &str) -> Result<(), EncodeError> {
        match self.b.frames.last() {
            Some(frame) if frame.is_dict && frame.pending_key.is_none() => {}
            Some(frame) if frame.is_dict => return Err(EncodeError::KeyOrder("two keys in a row")),
            _ => return Err(EncodeError::KeyOrder("key outside a dict")),
        }
        self.key_unchecked(name);
        Ok(())
    }

    /// Gives the key of the next value in the innermost dict as a shared-key id, with no lookup:
    /// the id must be below the length the shared-key table had when the encoder was made.
    ///
    /// ```
    /// use tessera_value::{Doc, Encoder, SharedKeys};
    /// let mut keys = SharedKeys::new();
    /// let id = keys.add("name").unwrap();
    /// let mut enc = Encoder::with_shared_keys(&keys);
    /// enc.begin_dict().unwrap();
    /// enc.shared_key(id).unwrap();
    /// enc.push_str("Ada").unwrap();
    /// enc.end_dict().unwrap();
    /// let bytes = enc.finish().unwrap();
    /// let doc = Doc::from_untrusted_with_keys(&bytes, &keys).unwrap();
    /// assert_eq!(doc.root().get("name").unwrap().as_str(), Some("Ada"));
    /// ```
    #[inline]
    pub fn shared_key(&mut self, id: u32) -> Result<(), EncodeError> {
        if id as u64 >= self.shared_count {
            return Err(EncodeError::KeyOrder("shared key id beyond the encoder's shared-key table"));
        }
        match self.b.frames.last_mut() {
            Some(frame) if frame.is_dict && frame.pending_key.is_none() => {
                frame.pending_key = Some(id as u64);
                Ok(())
            }
            Some(frame) if frame.is_dict => Err(EncodeError::KeyOrder("two keys in a row")),
            _ => Err(EncodeError::KeyOrder("key outside a dict")),
        }
    }

    /// `key` for callers that know the innermost frame is a dict waiting for a key.
    pub(crate) fn key_unchecked(&mut self, name: &str) {
        let frame_index = self.b.frames.len() - 1;
        let previous = self.b.frames[frame_index].previous_key_entry;
        let entry = self.key_entry(name, previous);
        let frame = &mut self.b.frames[frame_index];
        frame.previous_key_entry = entry;
        frame.pending_key = Some(self.b.key_entries[entry as usize].id);
    }

    /// Finds or creates the key-table entry for `name`, trying first the key that followed
    /// `previous` last time (dicts of one shape repeat their key sequence).
    fn key_entry(&mut self, name: &str, previous: u32) -> u32 {
        let bytes = name.as_bytes();
        let hint_slot = if previous == NO_ENTRY { 0 } else { previous as usize + 1 };
        if self.b.key_next.is_empty() {
            self.b.key_next.push(NO_ENTRY); // the "dict start" hint
        }
        let predicted = self.b.key_next[hint_slot];
        if predicted != NO_ENTRY {
            let entry = self.b.key_entries[predicted as usize];
            if &self.b.key_arena[entry.arena_start..entry.arena_start + entry.len] == bytes {
                return predicted;
            }
        }
        let hash = hash_bytes(bytes);
        let (entries, arena) = (&self.b.key_entries, &self.b.key_arena);
        let found = self.b.key_index.find(hash, |&i| {
            let entry = entries[i as usize];
            &arena[entry.arena_start..entry.arena_start + entry.len] == bytes
        });
        let entry_index = match found {
            Some(&index) => index,
            None => self.new_key_entry(name, hash),
        };
        self.b.key_next[hint_slot] = entry_index;
        entry_index
    }

    fn new_key_entry(&mut self, name: &str, hash: u64) -> u32 {
        let id = match self.shared.and_then(|shared| shared.id_below(name, self.shared_count)) {
            Some(shared_id) => shared_id as u64,
            None => {
                let item_pos = self.b.out.len();
                write_blob_header(&mut self.b.out, name.len(), true);
                self.b.out.extend_from_slice(name.as_bytes());
                self.b.local_keys.push(item_pos);
                self.shared_count + (self.b.local_keys.len() - 1) as u64
            }
        };
        self.register_key(name, hash, id)
    }

    /// Adds a key-table entry for `name` with key id `id`; returns the entry's index.
    fn register_key(&mut self, name: &str, hash: u64, id: u64) -> u32 {
        if self.b.key_next.is_empty() {
            self.b.key_next.push(NO_ENTRY); // the "dict start" hint, before one slot per entry
        }
        let entry_index = self.b.key_entries.len() as u32;
        let arena_start = self.b.key_arena.len();
        self.b.key_arena.extend_from_slice(name.as_bytes());
        self.b.key_entries.push(KeyEntry { hash, arena_start, len: name.len(), id });
        self.b.key_next.push(NO_ENTRY);
        let entries = &self.b.key_entries;
        self.b.key_index.insert_unique(hash, entry_index, |&i| entries[i as usize].hash);
        entry_index
    }

    // ---------------------------------------------------------------- scalars

    pub(crate) fn check_value_allowed(&self) -> Result<(), EncodeError> {
        match self.b.frames.last() {
            Some(frame) if frame.is_dict && frame.pending_key.is_none() => Err(EncodeError::KeyOrder("dict value without a key")),
            None if self.b.root.is_some() => Err(EncodeError::Incomplete("a document has one root value")),
            _ => Ok(()),
        }
    }

    /// Places a finished value in the innermost container, or as the root.
    #[inline]
    pub(crate) fn place(&mut self, slot: Slot) {
        match self.b.frames.last_mut() {
            Some(frame) => {
                if let Some(key) = frame.pending_key.take() {
                    self.b.slot_keys.push(key);
                }
                self.b.slots.push(slot);
            }
            None => self.b.root = Some(slot),
        }
    }

    /// Places a slot; for callers that track the key/value order themselves (the JSON parser).
    #[inline(always)]
    pub(crate) fn push_slot_unchecked(&mut self, slot: Slot) {
        self.place(slot);
    }

    #[inline]
    fn push_slot(&mut self, slot: Slot) -> Result<(), EncodeError> {
        self.check_value_allowed()?;
        self.place(slot);
        Ok(())
    }

    /// Pushes null.
    ///
    /// ```
    /// let mut out = tessera_value::Encoder::new();
    /// out.push_null()?;
    /// let bytes = out.finish()?;
    /// assert_eq!(tessera_value::Doc::from_untrusted(&bytes).unwrap().root().to_json(), r#"null"#);
    /// # Ok::<(), tessera_value::EncodeError>(())
    /// ```
    pub fn push_null(&mut self) -> Result<(), EncodeError> {
        self.push_slot(Slot::special(SPECIAL_NULL))
    }

    /// Pushes a boolean.
    ///
    /// ```
    /// let mut out = tessera_value::Encoder::new();
    /// out.begin_array()?;
    /// out.push_bool(true)?;
    /// out.push_bool(false)?;
    /// out.end_array()?;
    /// let bytes = out.finish()?;
    /// assert_eq!(tessera_value::Doc::from_untrusted(&bytes).unwrap().root().to_json(), r#"[true,false]"#);
    /// # Ok::<(), tessera_value::EncodeError>(())
    /// ```
    pub fn push_bool(&mut self, value: bool) -> Result<(), EncodeError> {
        self.push_slot(Slot::special(if value { SPECIAL_TRUE } else { SPECIAL_FALSE }))
    }

    /// Pushes a signed integer.
    ///
    /// ```
    /// let mut out = tessera_value::Encoder::new();
    /// out.push_i64(i64::MIN)?;
    /// let bytes = out.finish()?;
    /// assert_eq!(tessera_value::Doc::from_untrusted(&bytes).unwrap().root().to_json(), r#"-9223372036854775808"#);
    /// # Ok::<(), tessera_value::EncodeError>(())
    /// ```
    pub fn push_i64(&mut self, value: i64) -> Result<(), EncodeError> {
        self.check_value_allowed()?;
        let slot = self.int_slot(value);
        self.place(slot);
        Ok(())
    }

    pub(crate) fn int_slot(&mut self, value: i64) -> Slot {
        if int_slot_width(value).is_some() {
            return Slot { kind: SlotKind::Int, height: 0, payload: value as u64 };
        }
        let pos = self.b.out.len();
        self.b.out.push(TAG_INT | 7);
        self.b.out.extend_from_slice(&value.to_le_bytes());
        Slot::pointer(pos, 0)
    }

    /// Pushes an unsigned integer (stored as a signed one when it fits).
    ///
    /// ```
    /// let mut out = tessera_value::Encoder::new();
    /// out.push_u64(u64::MAX)?;
    /// let bytes = out.finish()?;
    /// assert_eq!(tessera_value::Doc::from_untrusted(&bytes).unwrap().root().to_json(), r#"18446744073709551615"#);
    /// # Ok::<(), tessera_value::EncodeError>(())
    /// ```
    pub fn push_u64(&mut self, value: u64) -> Result<(), EncodeError> {
        self.check_value_allowed()?;
        let slot = self.uint_slot(value);
        self.place(slot);
        Ok(())
    }

    pub(crate) fn uint_slot(&mut self, value: u64) -> Slot {
        if let Ok(signed) = i64::try_from(value) {
            return self.int_slot(signed);
        }
        let pos = self.b.out.len();
        self.b.out.push(TAG_UINT | 7);
        self.b.out.extend_from_slice(&value.to_le_bytes());
        Slot::pointer(pos, 0)
    }

    /// Pushes a double; stored as a float when that is lossless.
    ///
    /// ```
    /// let mut out = tessera_value::Encoder::new();
    /// out.push_f64(0.1)?;
    /// let bytes = out.finish()?;
    /// assert_eq!(tessera_value::Doc::from_untrusted(&bytes).unwrap().root().to_json(), r#"0.1"#);
    /// # Ok::<(), tessera_value::EncodeError>(())
    /// ```
    pub fn push_f64(&mut self, value: f64) -> Result<(), EncodeError> {
        self.check_value_allowed()?;
        let slot = self.float_slot(value);
        self.place(slot);
        Ok(())
    }

    pub(crate) fn float_slot(&mut self, value: f64) -> Slot {
        let pos = self.b.out.len();
        let narrow = value as f32;
        if (narrow as f64).to_bits() == value.to_bits() {
            self.b.out.push(TAG_F32);
            self.b.out.extend_from_slice(&narrow.to_le_bytes());
        } else {
            self.b.out.push(TAG_F64);
            self.b.out.extend_from_slice(&value.to_le_bytes());
        }
        Slot::pointer(pos, 0)
    }

    /// Pushes a float.
    ///
    /// ```
    /// let mut out = tessera_value::Encoder::new();
    /// out.push_f32(1.5)?;
    /// let bytes = out.finish()?;
    /// assert_eq!(tessera_value::Doc::from_untrusted(&bytes).unwrap().root().to_json(), r#"1.5"#);
    /// # Ok::<(), tessera_value::EncodeError>(())
    /// ```
    pub fn push_f32(&mut self, value: f32) -> Result<(), EncodeError> {
        self.push_f64(value as f64)
    }

    /// Pushes an array of doubles, packed (as binary32 when every one is exact in it).
    ///
    /// ```
    /// use tessera_value::{Doc, Encoder};
    /// let mut enc = Encoder::new();
    /// enc.push_f64s(&[0.1, 0.2]).unwrap();
    /// let bytes = enc.finish().unwrap();
    /// let numbers = Doc::from_untrusted(&bytes).unwrap().root().as_array().unwrap().numbers().unwrap();
    /// assert_eq!(numbers.to_f64_vec(), [0.1, 0.2]);
    /// ```
    pub fn push_f64s(&mut self, values: &[f64]) -> Result<(), EncodeError> {
        self.push_numbers(values.iter().map(|&v| crate::packed::PackedValue::Float(v)))
    }

    /// Pushes an array of integers, packed in the narrowest type that holds them.
    ///
    /// ```
    /// use tessera_value::{layout::PackedNumber, Doc, Encoder};
    /// let mut enc = Encoder::new();
    /// enc.push_i64s(&[1, -300]).unwrap();
    /// let bytes = enc.finish().unwrap();
    /// let numbers = Doc::from_untrusted(&bytes).unwrap().root().as_array().unwrap().numbers().unwrap();
    /// assert_eq!((numbers.number_type(), numbers.to_i64_vec()), (PackedNumber::I16, Some(vec![1, -300])));
    /// ```
    pub fn push_i64s(&mut self, values: &[i64]) -> Result<(), EncodeError> {
        self.push_numbers(values.iter().map(|&v| crate::packed::PackedValue::Int(v)))
    }

    fn push_numbers(&mut self, values: impl Iterator<Item = crate::packed::PackedValue>) -> Result<(), EncodeError> {
        self.check_value_allowed()?;
        let mut scratch = std::mem::take(&mut self.b.pack_scratch);
        scratch.clear();
        scratch.extend(values);
        let slot = self.numbers_slot(&scratch);
        scratch.clear();
        self.b.pack_scratch = scratch;
        match slot {
            Some(slot) => {
                self.place(slot);
                Ok(())
            }
            None => {
                self.begin_array()?;
                self.end_array()
            }
        }
    }

    /// Writes `values` as a packed vector and returns its slot; `None` (nothing written) if
    /// they cannot be one (empty, or integers mixed with floats).
    pub(crate) fn numbers_slot(&mut self, values: &[crate::packed::PackedValue]) -> Option<Slot> {
        let plan = crate::packing::plan_numbers(values)?;
        let pos = self.b.out.len();
        crate::packing::write(&mut self.b.out, &plan, values);
        Some(Slot::pointer(pos, plan.height()))
    }

    /// Pushes a UTF-8 string (de-duplicated against earlier strings of the document).
    ///
    /// ```
    /// let encode = |strings: &[&str]| {
    ///     let mut out = tessera_value::Encoder::new();
    ///     out.begin_array()?;
    ///     for text in strings {
    ///         out.push_str(text)?;
    ///     }
    ///     out.end_array()?;
    ///     out.finish()
    /// };
    /// let long = "a string long enough to be worth sharing";
    /// let repeated = encode(&[long, long])?;
    /// assert!(repeated.len() < encode(&[long, "another string of the very same length!!"])?.len()); // stored once
    /// assert_eq!(tessera_value::Doc::from_untrusted(&repeated).unwrap().root().index(1).unwrap().as_str(), Some(long));
    /// # Ok::<(), tessera_value::EncodeError>(())
    /// ```
    pub fn push_str(&mut self, value: &str) -> Result<(), EncodeError> {
        self.check_value_allowed()?;
        let slot = self.string_slot(value.as_bytes());
        self.place(slot);
        Ok(())
    }

    /// Pushes binary data.
    ///
    /// ```
    /// let mut out = tessera_value::Encoder::new();
    /// out.push_bytes(b"hi")?;
    /// let bytes = out.finish()?;
    /// assert_eq!(tessera_value::Doc::from_untrusted(&bytes).unwrap().root().to_json(), r#""aGk=""#);
    /// # Ok::<(), tessera_value::EncodeError>(())
    /// ```
    pub fn push_bytes(&mut self, value: &[u8]) -> Result<(), EncodeError> {
        self.check_value_allowed()?;
        let pos = self.b.out.len();
        write_blob_header(&mut self.b.out, value.len(), false);
        self.b.out.extend_from_slice(value);
        self.place(Slot::pointer(pos, 0));
        Ok(())
    }

    /// The slot for a string whose bytes are UTF-8 (checked by the caller).
    pub(crate) fn string_slot(&mut self, bytes: &[u8]) -> Slot {
        let hash = hash_bytes(bytes);
        let out_len = self.b.out.len();
        let live = {
            let entry = *self.b.strings.slot(hash);
            self.b.strings.is_live(&entry).then_some(entry)
        };
        let entry = self.b.strings.slot(hash);
        let hit = live.is_some_and(|live| live.hash == hash && &self.b.out[live.content_pos..live.content_pos + live.len] == bytes);
        if !hit {
            let (item_pos, content_pos) = self.write_string_item(bytes);
            self.b.strings.insert(StringEntry { hash, item_pos, content_pos, len: bytes.len(), atom: NO_ENTRY, generation: 0 });
            return Slot::pointer(item_pos, 0);
        }
        if out_len - entry.item_pos < NEAR_DISTANCE_MAX {
            return Slot::pointer(entry.item_pos, 0);
        }
        if entry.atom != NO_ENTRY {
            return Slot { kind: SlotKind::Atom, height: 0, payload: entry.atom as u64 };
        }
        if entry.content_pos - entry.item_pos + entry.len <= ATOM_ENTRY_COST {
            // Cheaper to write again; later repeats will point at the new copy.
            let (item_pos, content_pos) = self.write_string_item(bytes);
            let entry = self.b.strings.slot(hash);
            entry.item_pos = item_pos;
            entry.content_pos = content_pos;
            return Slot::pointer(item_pos, 0);
        }
        entry.atom = self.b.atoms.len() as u32;
        self.b.atoms.push(entry.item_pos);
        Slot { kind: SlotKind::Atom, height: 0, payload: entry.atom as u64 }
    }

    fn write_string_item(&mut self, bytes: &[u8]) -> (usize, usize) {
        let item_pos = self.b.out.len();
        write_blob_header(&mut self.b.out, bytes.len(), true);
        let content_pos = self.b.out.len();
        self.b.out.extend_from_slice(bytes);
        (item_pos, content_pos)
    }

    // ---------------------------------------------------------------- finish

    /// Writes the tail (tables and footer) and returns the document's bytes.
    ///
    /// ```
    /// use tessera_value::{EncodeError, Encoder};
    /// let mut out = Encoder::new();
    /// out.push_i64(42)?;
    /// let bytes = out.finish()?;
    /// assert_eq!(tessera_value::Doc::from_untrusted(&bytes).unwrap().root().as_i64(), Some(42));
    /// let mut open = Encoder::new();
    /// open.begin_array()?;
    /// assert!(matches!(open.finish(), Err(EncodeError::Incomplete(_))));
    /// # Ok::<(), EncodeError>(())
    /// ```
    pub fn finish(mut self) -> Result<Vec<u8>, EncodeError> {
        self.write_tail()?;
        Ok(std::mem::take(&mut self.b.out))
    }

    /// Forgets the document under construction, keeping every buffer's capacity (the output
    /// buffer's up to [`OUT_KEPT_BYTES_MAX`]).
    pub(crate) fn reset(&mut self) {
        self.b.out.clear();
        if self.b.out.capacity() > OUT_KEPT_BYTES_MAX {
            self.b.out = Vec::new();
        }
        self.b.frames.clear();
        self.b.slots.clear();
        self.b.slot_keys.clear();
        self.b.root = None;
        self.b.key_index.clear();
        self.b.key_entries.clear();
        self.b.key_arena.clear();
        self.b.key_next.clear();
        self.b.local_keys.clear();
        self.b.strings.reset();
        self.b.atoms.clear();
        self.b.scratch.clear();
        self.b.original_len = 0;
        self.b.original_ptr = 0;
        self.b.referenced.clear();
        self.b.counting_references = false;
        self.b.referenced_items = 0;
        self.b.expanded_memo.clear();
    }

    /// The encoder's buffers, emptied, for [`Encoder::with_buffers`].
    pub(crate) fn into_buffers(mut self) -> Box<Buffers> {
        self.reset();
        self.b
    }

    /// Writes the tail and leaves the document in `out` (cleared first), keeping `out`'s old
    /// buffer for the next document: no allocation once both buffers have grown.
    pub(crate) fn finish_into(&mut self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let result = self.write_tail();
        if result.is_ok() {
            out.clear();
            std::mem::swap(&mut self.b.out, out);
        }
        self.reset();
        result
    }

    /// [`Encoder::finish`] that leaves the encoder ready for another document, its buffers
    /// kept (used by [`crate::to_vec`] through a per-thread encoder). The output buffer itself
    /// is handed out when the document fills at least half of it, as a `Vec` grown by pushes
    /// would; otherwise (a small document after a large one) the caller gets an exact copy and
    /// the buffer stays.
    pub(crate) fn finish_reuse(&mut self) -> Result<Vec<u8>, EncodeError> {
        let result = self.write_tail();
        let bytes = match result {
            Ok(()) if self.b.out.capacity() <= 2 * self.b.out.len() => {
                let len = self.b.out.len();
                std::mem::replace(&mut self.b.out, Vec::with_capacity(len.min(OUT_KEPT_BYTES_MAX)))
            }
            Ok(()) => self.b.out.as_slice().to_vec(),
            Err(error) => {
                self.reset();
                return Err(error);
            }
        };
        self.reset();
        Ok(bytes)
    }

    /// Finishes the document and hands its bytes to `take`, keeping the buffer for the next
    /// document (see [`crate::to_shared`]); the encoder is reset either way.
    pub(crate) fn finish_with<R>(&mut self, take: impl FnOnce(&[u8]) -> R) -> Result<R, EncodeError> {
        let result = self.write_tail().map(|()| take(&self.b.out));
        self.reset();
        result
    }

    fn write_tail(&mut self) -> Result<(), EncodeError> {
        if !self.b.frames.is_empty() {
            return Err(EncodeError::Incomplete("containers left open"));
        }
        let root = self.b.root.ok_or(EncodeError::Incomplete("no value was pushed"))?;
        let tail_start = self.b.out.len();
        let key_count = self.b.local_keys.len() as u64;
        let atom_count = self.b.atoms.len() as u64;
        if key_count > u32::MAX as u64 || atom_count > u32::MAX as u64 {
            return Err(EncodeError::Incomplete("more than 2^32 keys or atoms"));
        }
        if key_count == 0 && atom_count == 0 {
            self.write_small_tail(root, tail_start);
        } else {
            self.write_tail_with_tables(root, tail_start);
        }
        Ok(())
    }

    /// The tail in general: key table, atom table, their counts and widths, then the footer.
    fn write_tail_with_tables(&mut self, root: Slot, tail_start: usize) {
        let key_count = self.b.local_keys.len() as u64;
        let atom_count = self.b.atoms.len() as u64;
        let mut tables = std::mem::take(&mut self.b.tail_scratch);
        tables.clear();
        let key_width =
            width_of(width_code_for_unsigned(self.b.local_keys.iter().copied().max().unwrap_or(0).max(self.b.local_keys.len()) as u64));
        let atom_width = width_of(width_code_for_unsigned(self.b.atoms.iter().copied().max().unwrap_or(0) as u64));
        let key_index_growth = self.write_key_table(&mut tables, key_width);
        for &pos in &self.b.atoms {
            write_uint(&mut tables, pos as u64, atom_width);
        }
        let offset_width = width_of(width_code_for_unsigned((tail_start as u64).max(self.shared_count)));
        let mut flags = 0u8;
        if self.shared_count > 0 {
            flags |= TAIL_HAS_SHARED;
            write_uint(&mut tables, self.shared_count, offset_width);
        }
        if atom_count > 0 {
            flags |= TAIL_HAS_ATOMS;
            write_uint(&mut tables, atom_count, offset_width);
        }
        if key_count > 0 {
            flags |= TAIL_HAS_KEYS;
            write_uint(&mut tables, key_count, offset_width);
        }
        if key_count > 0 || atom_count > 0 {
            tables.push(code_of_width(key_width) | (code_of_width(atom_width) << 2) | (key_index_growth << 4));
        }
        let root_width = root.width_at(tail_start);
        let fixed = 1 + tables.len() + root_width + offset_width + 1;
        let mut total = fixed + 1;
        while fixed + varint_len(total as u64) != total {
            total = fixed + varint_len(total as u64);
        }
        self.b.out.reserve(total);
        self.b.out.push(TAG_TAIL | flags);
        write_varint(&mut self.b.out, total as u64);
        self.b.out.extend_from_slice(&tables);
        write_uint(&mut self.b.out, root.bits_at(tail_start), root_width);
        write_uint(&mut self.b.out, tail_start as u64, offset_width);
        self.b.out.push((FORMAT_VERSION << 4) | (code_of_width(offset_width) << 2) | code_of_width(root_width));
        debug_assert_eq!(self.b.out.len(), tail_start + total);
        self.b.tail_scratch = tables;
    }

    /// The tail of a document without local keys or atoms (every record whose field names are
    /// all shared keys, and whose strings do not repeat far apart): the same bytes as
    /// [`Encoder::write_tail_with_tables`] writes for it, built in one small array and appended
    /// at once.
    fn write_small_tail(&mut self, root: Slot, tail_start: usize) {
        let shared_count = self.shared_count;
        let offset_width = width_of(width_code_for_unsigned((tail_start as u64).max(shared_count)));
        let root_width = root.width_at(tail_start);
        let (flags, tables_len) = if shared_count > 0 { (TAIL_HAS_SHARED, offset_width) } else { (0, 0) };
        // tag, total, the shared count, root slot, tail start, footer byte: at most 27 bytes,
        // so `total` is a one-byte varint.
        let total = 1 + 1 + tables_len + root_width + offset_width + 1;
        debug_assert!(total < 0x80);
        // Each field is copied as 8 bytes and the next one starts `width` bytes on, overwriting
        // the excess: the array has room for the last 8-byte copy.
        let mut tail = [0u8; 40];
        tail[0] = TAG_TAIL | flags;
        tail[1] = total as u8;
        let mut at = 2;
        if shared_count > 0 {
            tail[at..at + 8].copy_from_slice(&shared_count.to_le_bytes());
            at += offset_width;
        }
        tail[at..at + 8].copy_from_slice(&root.bits_at(tail_start).to_le_bytes());
        at += root_width;
        tail[at..at + 8].copy_from_slice(&(tail_start as u64).to_le_bytes());
        at += offset_width;
        tail[at] = (FORMAT_VERSION << 4) | (code_of_width(offset_width) << 2) | code_of_width(root_width);
        at += 1;
        debug_assert_eq!(at, total);
        self.b.out.extend_from_slice(&tail[..at]);
    }

    /// Key table: item offsets by local id, then the key index, each `width` bytes. Returns the
    /// growth nibble: the hashed index's growth exponent, or [`KEY_INDEX_SORTED`].
    ///
    /// The hashed index is tried at every growth up to [`KEY_INDEX_GROWTH_MAX`]; a key set that
    /// fits none (only sets crafted against XXH3 can) gets a sorted index, so no valid document
    /// is refused.
    fn write_key_table(&mut self, tables: &mut Vec<u8>, width: usize) -> u8 {
        let count = self.b.local_keys.len();
        if count == 0 {
            return 0;
        }
        for &pos in &self.b.local_keys {
            write_uint(tables, pos as u64, width);
        }
        // Local ids are handed out in entry order, so the local entries in order are by id.
        self.b.hash_scratch.clear();
        for entry in &self.b.key_entries {
            if entry.id >= self.shared_count {
                self.b.hash_scratch.push(key_hash(&self.b.key_arena[entry.arena_start..entry.arena_start + entry.len]));
            }
        }
        debug_assert_eq!(self.b.hash_scratch.len(), count);
        for growth in 0..=KEY_INDEX_GROWTH_MAX {
            let slots = key_index_slots(count as u64, growth) as usize;
            if build_key_index(&self.b.hash_scratch, slots, &mut self.b.index_scratch) {
                for &entry in &self.b.index_scratch {
                    write_uint(tables, entry as u64, width);
                }
                return growth;
            }
        }
        let mut sorted: Vec<u32> = (0..count as u32).collect();
        let local_name = |local: u32| {
            let item = self.b.local_keys[local as usize];
            let (start, len) = blob_extent(&self.b.out, item);
            &self.b.out[start..start + len]
        };
        sorted.sort_unstable_by(|&a, &b| local_name(a).cmp(local_name(b)));
        for local in sorted {
            write_uint(tables, local as u64 + 1, width);
        }
        KEY_INDEX_SORTED
    }
}

/// Position and length of the content of the string item at `item` in `out`.
fn blob_extent(out: &[u8], item: usize) -> (usize, usize) {
    let inline = out[item].wrapping_sub(TAG_STRING) as usize;
    if inline <= STRING_INLINE_LEN_MAX {
        (item + 1, inline)
    } else {
        let (len, used) = read_varint_trusted(out, item + 1);
        (item + 1 + used, len as usize)
    }
}

/// Robin Hood linear-probing index of `hashes.len()` keys in `slots` slots, written into
/// `index` (slot → local id + 1, 0 for empty); false if some key would sit more than
/// [`KEY_PROBE_MAX`] - 1 slots past its home.
///
/// Robin Hood placement (a key moving along its probe sequence takes the slot of a key closer
/// to its own home) gives the same lookups as plain linear probing, but a far shorter longest
/// probe sequence, so the index rarely needs to grow.
fn build_key_index(hashes: &[u64], slots: usize, index: &mut Vec<u32>) -> bool {
    let mask = slots - 1;
    index.clear();
    index.resize(slots, 0);
    for local in 0..hashes.len() {
        let mut carried = local as u32 + 1;
        let mut slot = hashes[local] as usize & mask;
        let mut distance = 0usize;
        loop {
            let resident = index[slot];
            if resident == 0 {
                index[slot] = carried;
                break;
            }
            let resident_distance = slot.wrapping_sub(hashes[resident as usize - 1] as usize) & mask;
            if resident_distance < distance {
                index[slot] = carried;
                carried = resident;
                distance = resident_distance;
            }
            slot = (slot + 1) & mask;
            distance += 1;
            if distance >= KEY_PROBE_MAX {
                return false;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The document `build` pushes, finished by [`Encoder::write_tail`] and by the general
    /// [`Encoder::write_tail_with_tables`].
    fn both_tails(shared: Option<&SharedKeys>, build: impl Fn(&mut Encoder<'_>)) -> (Vec<u8>, Vec<u8>) {
        let finish = |general: bool| {
            let mut encoder = Encoder::with_buffers(shared, Box::new(Buffers::new()));
            build(&mut encoder);
            let root = encoder.b.root.expect("a root value");
            let tail_start = encoder.b.out.len();
            if general {
                encoder.write_tail_with_tables(root, tail_start);
            } else {
                encoder.write_tail().unwrap();
            }
            std::mem::take(&mut encoder.b.out)
        };
        (finish(false), finish(true))
    }

    #[test]
    fn the_small_tail_is_the_general_tail_byte_for_byte() {
        let mut keys = SharedKeys::new();
        for id in 0..300 {
            keys.add(&format!("k{id}")).unwrap();
        }
        let mut few = SharedKeys::new();
        few.add("k0").unwrap();
        // Under Miri (CI runs these unit tests there) the long documents take too long; the
        // 300-byte string still gives two-byte offsets.
        let string_lens: &[usize] = if cfg!(miri) { &[0, 1, 300] } else { &[0, 1, 40, 300, 70_000] };
        let mut checked = 0;
        for shared in [None, Some(&few), Some(&keys)] {
            // Roots inline (integers of every slot width) and pointers (an array just before
            // the tail: a one-byte slot), with tail starts of one to four offset bytes.
            for &string_len in string_lens {
                for int in [0i64, -16, 15, 4095, -4097, 1 << 27, 1 << 40, i64::MIN] {
                    let (small, general) = both_tails(shared, |out| {
                        if string_len == 0 {
                            out.push_i64(int).unwrap();
                            return;
                        }
                        out.begin_array().unwrap();
                        out.push_str(&"x".repeat(string_len)).unwrap();
                        out.push_i64(int).unwrap();
                        if let Some(keys) = shared {
                            out.begin_dict().unwrap();
                            out.shared_key(keys.len() as u32 - 1).unwrap();
                            out.push_null().unwrap();
                            out.end_dict().unwrap();
                        }
                        out.end_array().unwrap();
                    });
                    assert_eq!(small, general, "shared {:?}, string of {string_len}, int {int}", shared.map(SharedKeys::len));
                    let doc = match shared {
                        Some(keys) => Doc::from_untrusted_with_keys(&small, keys),
                        None => Doc::from_untrusted(&small),
                    };
                    assert!(doc.is_ok(), "a valid document");
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 3 * string_lens.len() * 8);
    }
}
