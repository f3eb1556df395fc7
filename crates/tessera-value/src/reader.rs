//! Reading documents in place: [`Doc`], [`Value`], [`Array`], [`Dict`] and [`DictKey`].
//!
//! Nothing here parses or copies: every accessor computes an offset and reads the bytes where
//! they are. Slices may have any alignment; multi-byte fields are read with `from_le_bytes`.
//!
//! A document opened with [`Doc::from_untrusted`] has been checked completely (see
//! `validate.rs`), so every accessor below returns a value and never panics. A document opened
//! with [`Doc::from_trusted`] has only had its footer checked: on corrupt bytes an accessor may
//! return a wrong value or panic, but it is never undefined behaviour (strings are re-checked for
//! UTF-8 on access).

use crate::error::FormatError;
use crate::footer::{Footer, read_footer};
use crate::layout::*;
pub(crate) use crate::repr::Repr;
use crate::shared_keys::SharedKeys;
use std::sync::atomic::{AtomicU64, Ordering};

/// What kind of value a [`Value`] is.
///
/// ```
/// use tessera_value::{from_json, Doc, Kind};
/// let bytes = from_json(br#"[null, true, -1, 18446744073709551615, 0.5, "s", [], {}]"#).unwrap();
/// let root = Doc::from_untrusted(&bytes).unwrap().root();
/// let kinds: Vec<Kind> = root.as_array().unwrap().iter().map(|value| value.kind()).collect();
/// use Kind::*;
/// assert_eq!(kinds, [Null, Bool, Int, UInt, Float, String, Array, Dict]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool,
    /// A signed 64-bit integer.
    Int,
    /// An unsigned integer above `i64::MAX`.
    UInt,
    /// A float (stored as f32 or f64).
    Float,
    /// A UTF-8 string.
    String,
    /// Binary data.
    Binary,
    /// An array.
    Array,
    /// A dict with string keys.
    Dict,
}

impl Kind {
    /// The kind in words, with its article, for messages: "an integer", "a dict".
    ///
    /// ```
    /// use tessera_value::Kind;
    /// assert_eq!(Kind::UInt.described(), "an integer");
    /// assert_eq!(Kind::Dict.described(), "a dict");
    /// ```
    pub fn described(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Bool => "a boolean",
            Kind::Int | Kind::UInt => "an integer",
            Kind::Float => "a float",
            Kind::String => "a string",
            Kind::Binary => "binary data",
            Kind::Array => "an array",
            Kind::Dict => "a dict",
        }
    }
}

/// An opened document: the bytes, where its tables are, and the shared keys it was opened with.
///
/// `Doc` and [`Value`] are small `Copy` handles, passed by value.
///
/// ```
/// use tessera_value::{from_json, Doc};
/// let bytes = from_json(br#"{"a": [1, 2, 3]}"#).unwrap();
/// let doc = Doc::from_untrusted(&bytes).unwrap();
/// assert_eq!(doc.root().get("a").unwrap().index(2).unwrap().as_i64(), Some(3));
/// ```
#[derive(Clone, Copy)]
pub struct Doc<'a> {
    bytes: &'a [u8],
    shared: Option<&'a SharedKeys>,
    keys_entries: usize,
    atoms_entries: usize,
    key_count: u32,
    atom_count: u32,
    shared_count: u32,
    /// The small fields in one word (see [`Small`]), written and copied whole: a `Doc` (and
    /// every `Value`) is then copied in whole words, without the partial overlapping moves
    /// that stall on store-to-load forwarding.
    small: Small,
}

/// A `Doc`'s byte-sized fields packed in a `u32`: the key table's width (bits 0–3), the atom
/// table's width (bits 4–7), the key index kind (bits 8–15), log2 of a hashed index's slot
/// count (bits 16–23; unused for a sorted index) and whether the bytes were validated (bit 24).
#[derive(Clone, Copy)]
struct Small(u32);

impl Small {
    const VALIDATED: u32 = 1 << 24;

    #[inline(always)]
    fn new(key_width: usize, atom_width: usize, kind: KeyIndexKind, index_log2: u32, validated: bool) -> Self {
        debug_assert!(key_width <= 8 && atom_width <= 8 && index_log2 <= 64, "64 for a document without an index");
        let kind = match kind {
            KeyIndexKind::Hashed => 0,
            KeyIndexKind::HashedV1 => 1,
            KeyIndexKind::Sorted => 2,
        };
        Small(key_width as u32 | (atom_width as u32) << 4 | kind << 8 | index_log2 << 16 | if validated { Self::VALIDATED } else { 0 })
    }

    #[inline(always)]
    fn key_width(self) -> usize {
        (self.0 & 0xF) as usize
    }

    #[inline(always)]
    fn atom_width(self) -> usize {
        (self.0 >> 4 & 0xF) as usize
    }

    #[inline(always)]
    fn key_index_kind(self) -> KeyIndexKind {
        match self.0 >> 8 & 0xFF {
            0 => KeyIndexKind::Hashed,
            1 => KeyIndexKind::HashedV1,
            _ => KeyIndexKind::Sorted,
        }
    }

    #[inline(always)]
    fn key_index_log2(self) -> u32 {
        self.0 >> 16 & 0xFF
    }

    #[inline(always)]
    fn validated(self) -> bool {
        self.0 & Self::VALIDATED != 0
    }
}

impl std::fmt::Debug for Doc<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Doc").field("len", &self.bytes.len()).field("validated", &self.small.validated()).finish()
    }
}

impl<'a> Doc<'a> {
    #[inline]
    pub(crate) fn from_footer(bytes: &'a [u8], shared: Option<&'a SharedKeys>, footer: &Footer, validated: bool) -> Self {
        Doc {
            bytes,
            shared,
            keys_entries: footer.keys.entries,
            atoms_entries: footer.atoms.entries,
            key_count: footer.keys.count as u32,
            atom_count: footer.atoms.count as u32,
            shared_count: footer.shared_count as u32,
            small: Small::new(
                footer.keys.width,
                footer.atoms.width,
                footer.key_index_kind,
                footer.key_index_len.trailing_zeros(),
                validated,
            ),
        }
    }
}

impl<'a> Doc<'a> {
    /// Opens a document this program wrote, checking only the footer: O(1).
    ///
    /// Use it for bytes that cannot have been corrupted or forged, such as those read back from
    /// your own database. On corrupt bytes, accessors may return wrong values or panic, but
    /// never cause undefined behaviour.
    ///
    /// A document encoded with shared keys is refused with
    /// [`FormatError::MissingSharedKeys`], as [`Doc::from_untrusted`] refuses it: without its
    /// table its keys have no names. Open it with [`Doc::from_trusted_with_keys`].
    ///
    /// ```
    /// use tessera_value::{from_json, Doc};
    /// let bytes = from_json(b"[10, 20]").unwrap();
    /// let doc = Doc::from_trusted(&bytes).unwrap();
    /// assert_eq!(doc.root().index(1).unwrap().as_i64(), Some(20));
    /// ```
    #[inline(always)]
    pub fn from_trusted(bytes: &'a [u8]) -> Result<Doc<'a>, FormatError> {
        Doc::with_shared_keys(bytes, None, &read_footer(bytes)?, false)
    }

    /// Opens a document in O(1) and, unlike [`Doc::from_trusted`], skips the UTF-8 check that
    /// string accessors otherwise make on trusted documents.
    ///
    /// # Safety
    ///
    /// `bytes` must be a valid document: the unmodified output of an [`crate::Encoder`] (or of
    /// [`crate::from_json`], [`crate::to_vec`], [`crate::MutableDoc`]) of this format version, or
    /// bytes that [`Doc::from_untrusted`] accepted. Accessors on other bytes may produce `&str`
    /// values that are not UTF-8, which is undefined behaviour.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(br#"["x"]"#).unwrap();
    /// // SAFETY: `bytes` is the unmodified output of the encoder.
    /// let doc = unsafe { tessera_value::Doc::from_trusted_unchecked(&bytes, None) }.unwrap();
    /// assert_eq!(doc.root().index(0).unwrap().as_str(), Some("x"));
    /// ```
    #[inline]
    pub unsafe fn from_trusted_unchecked(bytes: &'a [u8], shared: Option<&'a SharedKeys>) -> Result<Doc<'a>, FormatError> {
        // The footer as a trusted open reads it (a fixed number of bounds-checked reads): the
        // caller vouches for the rest, so the tail length and the root slot, which only a
        // validation needs, are not checked again (about 340 instructions of a dictionary get).
        if shared.is_some()
            && let Some(footer) = crate::footer::read_shared_only_footer(bytes)
        {
            return Doc::with_shared_keys(bytes, shared, &footer, true);
        }
        Doc::with_shared_keys(bytes, shared, &read_footer(bytes)?, true)
    }

    /// [`Doc::from_trusted`] for a document encoded with shared keys.
    ///
    /// ```
    /// use tessera_value::{to_vec_with_keys, Doc, SharedKeys};
    /// let mut keys = SharedKeys::new();
    /// keys.add("id").unwrap();
    /// let bytes = to_vec_with_keys(&std::collections::BTreeMap::from([("id", 7)]), &keys).unwrap();
    /// let doc = Doc::from_trusted_with_keys(&bytes, &keys).unwrap();
    /// assert_eq!(doc.root().get("id").unwrap().as_i64(), Some(7));
    /// ```
    #[inline]
    pub fn from_trusted_with_keys(bytes: &'a [u8], shared: &'a SharedKeys) -> Result<Doc<'a>, FormatError> {
        // A stored record's footer, in fewer reads; any other footer the general way.
        if let Some(footer) = crate::footer::read_shared_only_footer(bytes) {
            return Doc::with_shared_keys(bytes, Some(shared), &footer, false);
        }
        Doc::with_shared_keys(bytes, Some(shared), &read_footer(bytes)?, false)
    }

    /// [`Doc::from_footer`] for a trusted open, refusing a document that refers to more shared
    /// keys than `shared` has (as validation does): one of its key ids would name no key, and
    /// its entry would read as the key `""` or be passed over, a record that a table which lost
    /// names (or a handle older than the record) reads as another value.
    #[inline(always)]
    fn with_shared_keys(bytes: &'a [u8], shared: Option<&'a SharedKeys>, footer: &Footer, validated: bool) -> Result<Doc<'a>, FormatError> {
        let available = shared.map_or(0, |s| s.len() as u64);
        if footer.shared_count > available {
            return Err(FormatError::MissingSharedKeys { needed: footer.shared_count, available });
        }
        Ok(Doc::from_footer(bytes, shared, footer, validated))
    }

    /// The root value.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(br#""root""#).unwrap();
    /// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
    /// assert_eq!(doc.root().as_str(), Some("root"));
    /// ```
    #[inline(always)]
    pub fn root(&self) -> Value<'a> {
        // The footer was checked when the document was opened: T, tail offset, root slot.
        let len = self.bytes.len();
        let last = self.bytes[len - 1];
        let (root_width, offset_width) = (width_of(last & 3), width_of((last >> 2) & 3));
        let tail_start = read_uint(self.bytes, len - 1 - offset_width, offset_width) as usize;
        let bits = read_uint(self.bytes, len - 1 - offset_width - root_width, root_width);
        Value { doc: *self, repr: self.decode_slot(bits, root_width, tail_start) }
    }

    /// The document's bytes.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(b"[1, 2]").unwrap();
    /// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
    /// assert_eq!(doc.bytes(), &bytes[..]);
    /// ```
    #[inline]
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// True if the document was opened with [`Doc::from_untrusted`].
    ///
    /// ```
    /// use tessera_value::Doc;
    /// let bytes = tessera_value::from_json(b"1").unwrap();
    /// assert!(Doc::from_untrusted(&bytes).unwrap().is_validated());
    /// assert!(!Doc::from_trusted(&bytes).unwrap().is_validated());
    /// ```
    pub fn is_validated(&self) -> bool {
        self.small.validated()
    }

    /// How the document's local keys are indexed, or `None` if it has no local keys.
    ///
    /// ```
    /// use tessera_value::{from_json, layout::KeyIndexKind, Doc};
    /// let bytes = from_json(br#"{"user_0": 0, "user_1": 1}"#).unwrap();
    /// assert_eq!(Doc::from_untrusted(&bytes).unwrap().key_index_kind(), Some(KeyIndexKind::Hashed));
    /// ```
    pub fn key_index_kind(&self) -> Option<KeyIndexKind> {
        (self.key_count > 0).then_some(self.small.key_index_kind())
    }

    /// The format version the document was written in (1 to 3).
    ///
    /// ```
    /// let bytes = tessera_value::from_json(b"[1]").unwrap();
    /// assert_eq!(tessera_value::Doc::from_trusted(&bytes).unwrap().format_version(), tessera_value::layout::FORMAT_VERSION);
    /// ```
    pub fn format_version(&self) -> u8 {
        self.bytes[self.bytes.len() - 1] >> 4
    }

    /// The shared-key table the document was opened with.
    ///
    /// ```
    /// use tessera_value::{Doc, SharedKeys};
    /// let keys = SharedKeys::new();
    /// let bytes = tessera_value::from_json(b"1").unwrap();
    /// assert!(Doc::from_trusted(&bytes).unwrap().shared_keys().is_none());
    /// assert!(Doc::from_trusted_with_keys(&bytes, &keys).unwrap().shared_keys().is_some());
    /// ```
    pub fn shared_keys(&self) -> Option<&'a SharedKeys> {
        self.shared
    }

    #[inline(always)]
    fn key_width(&self) -> usize {
        self.small.key_width()
    }

    #[inline(always)]
    fn atom_width(&self) -> usize {
        self.small.atom_width()
    }

    pub(crate) fn shared_count(&self) -> u64 {
        self.shared_count as u64
    }

    pub(crate) fn local_key_count(&self) -> usize {
        self.key_count as usize
    }

    pub(crate) fn atom_count(&self) -> usize {
        self.atom_count as usize
    }

    #[inline(always)]
    pub(crate) fn atom_item(&self, atom: usize) -> usize {
        let width = self.atom_width();
        read_uint(self.bytes, self.atoms_entries + atom * width, width) as usize
    }

    /// Item position of the string of local key `local`.
    #[inline(always)]
    pub(crate) fn local_key_item(&self, local: usize) -> usize {
        let width = self.key_width();
        read_uint(self.bytes, self.keys_entries + local * width, width) as usize
    }

    /// Position and length of a string or binary item's content.
    #[inline(always)]
    pub(crate) fn blob_at(&self, pos: usize) -> (usize, usize) {
        let tag = self.bytes[pos];
        let (short_max, base) = if tag >= TAG_STRING { (STRING_INLINE_LEN_MAX, TAG_STRING) } else { (BINARY_INLINE_LEN_MAX, TAG_BINARY) };
        let inline = (tag - base) as usize;
        if inline <= short_max {
            (pos + 1, inline)
        } else {
            let (len, used) = read_varint_trusted(self.bytes, pos + 1);
            (pos + 1 + used, len as usize)
        }
    }

    /// The string item at `pos`.
    #[inline(always)]
    pub(crate) fn item_str(&self, pos: usize) -> &'a str {
        let tag = self.bytes[pos];
        let (start, len) = if tag < TAG_STRING + STRING_INLINE_LEN_MAX as u8 + 1 {
            (pos + 1, tag.wrapping_sub(TAG_STRING) as usize)
        } else {
            let (len, used) = read_varint_trusted(self.bytes, pos + 1);
            (pos + 1 + used, len as usize)
        };
        let content = &self.bytes[start..start + len];
        if self.small.validated() {
            // SAFETY: `validated` is set by `Doc::validate`, which checked that every string
            // item of the value region is UTF-8 (validate.rs, `check_blob`), and by
            // `from_trusted_unchecked`, whose caller promises the same. `pos` is such an item:
            // it comes from a slot, atom or key table entry, all of which point at the start of
            // a string item in a valid document.
            unsafe { std::str::from_utf8_unchecked(content) }
        } else if is_utf8(content) {
            // SAFETY: `is_utf8` just checked the bytes.
            unsafe { std::str::from_utf8_unchecked(content) }
        } else {
            ""
        }
    }

    /// Stored height of the container at `pos`, or 0 for a scalar.
    pub(crate) fn item_height(&self, pos: usize) -> u8 {
        match self.bytes[pos] & 0xF0 {
            0x50 | 0x60 => self.bytes[pos + 1],
            TAG_PACKED => packed_height(self.bytes[pos]),
            _ => 0,
        }
    }

    /// Decodes a slot of a container at `container`.
    #[inline(always)]
    pub(crate) fn decode_slot(&self, bits: u64, width: usize, container: usize) -> Repr {
        if bits & SLOT_POINTER_MASK == 0 {
            // Distance 0 only occurs in corrupt trusted bytes; reading it as null keeps every
            // path strictly backwards, so even a corrupt document has no cycles to loop on.
            return match bits >> 1 {
                0 => Repr::Null,
                distance => Repr::Item(container.wrapping_sub(distance as usize)),
            };
        }
        match bits & 7 {
            SLOT_INT => Repr::Int(sign_extend(bits, width) >> 3),
            SLOT_SPECIAL => match bits >> 3 {
                SPECIAL_FALSE => Repr::Bool(false),
                SPECIAL_TRUE => Repr::Bool(true),
                _ => Repr::Null,
            },
            _ => Repr::Item(self.atom_item((bits >> 3) as usize)),
        }
    }

    /// The key id of `name` in this document, if it has one.
    #[inline]
    pub(crate) fn key_id(&self, name: &str) -> Option<u64> {
        let shared_count = self.shared_count as u64;
        if shared_count > 0
            && let Some(id) = self.shared.and_then(|s| s.id_below(name, shared_count))
        {
            return Some(id as u64);
        }
        if self.key_count == 0 {
            return None;
        }
        let local = match self.small.key_index_kind() {
            KeyIndexKind::Sorted => self.sorted_local_id(name.as_bytes()),
            kind => self.hashed_local_id(kind, name.as_bytes()),
        };
        local.map(|local| shared_count + local as u64)
    }

    /// Position of the key index's first entry.
    #[inline(always)]
    fn key_index_start(&self) -> usize {
        self.keys_entries + self.key_count as usize * self.key_width()
    }

    /// The bytes of local key `local`.
    #[inline(always)]
    fn local_key_bytes(&self, local: usize) -> &'a [u8] {
        let (start, len) = self.blob_at(self.local_key_item(local));
        &self.bytes[start..start + len]
    }

    /// Linear probing from the home slot, at most [`KEY_PROBE_MAX`] slots.
    #[inline]
    fn hashed_local_id(&self, kind: KeyIndexKind, name: &[u8]) -> Option<usize> {
        let width = self.key_width();
        let index = self.key_index_start();
        let mask = (1usize << self.small.key_index_log2()) - 1;
        let mut slot = kind.hash(name) as usize & mask;
        for _ in 0..KEY_PROBE_MAX {
            let entry = read_uint(self.bytes, index + slot * width, width) as usize;
            if entry == 0 {
                return None;
            }
            if short_equal(self.local_key_bytes(entry - 1), name) {
                return Some(entry - 1);
            }
            slot = (slot + 1) & mask;
        }
        None
    }

    /// Bisection over a sorted index (entries in ascending byte order of the key strings).
    fn sorted_local_id(&self, name: &[u8]) -> Option<usize> {
        let width = self.key_width();
        let index = self.key_index_start();
        let (mut low, mut high) = (0usize, self.key_count as usize);
        while low < high {
            let middle = low + (high - low) / 2;
            // A zero or out-of-range entry only occurs in corrupt trusted bytes; it ends the search.
            let local = (read_uint(self.bytes, index + middle * width, width) as usize).wrapping_sub(1);
            if local >= self.key_count as usize {
                return None;
            }
            match self.local_key_bytes(local).cmp(name) {
                std::cmp::Ordering::Less => low = middle + 1,
                std::cmp::Ordering::Greater => high = middle,
                std::cmp::Ordering::Equal => return Some(local),
            }
        }
        None
    }

    /// The name of key `id`, or `None` if the document has no such key.
    #[inline(always)]
    pub(crate) fn key_name(&self, id: u64) -> Option<&'a str> {
        let shared_count = self.shared_count as u64;
        if id < shared_count {
            return self.shared.and_then(|s| s.name(id as u32));
        }
        let local = (id - shared_count) as usize;
        if local >= self.key_count as usize {
            return None;
        }
        Some(self.item_str(self.local_key_item(local)))
    }
}

/// The first position of `needle` in a short `haystack`, eight bytes at a time.
#[inline(always)]
fn find_byte(haystack: &[u8], needle: u8) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let pattern = ONES * needle as u64;
    let mut chunks = haystack.chunks_exact(8);
    let mut offset = 0;
    for chunk in &mut chunks {
        let difference = u64::from_le_bytes(chunk.try_into().expect("8 bytes")) ^ pattern;
        // The lowest flagged byte is exact: it is the first byte equal to the needle.
        let zero = difference.wrapping_sub(ONES) & !difference & HIGHS;
        if zero != 0 {
            return Some(offset + (zero.trailing_zeros() / 8) as usize);
        }
        offset += 8;
    }
    chunks.remainder().iter().position(|&byte| byte == needle).map(|index| offset + index)
}

/// Byte-string equality that avoids a `memcmp` call for the short strings keys usually are.
#[inline(always)]
fn short_equal(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && if a.len() <= 16 { a.iter().zip(b).all(|(x, y)| x == y) } else { a == b }
}

/// One value inside a document. Cheap to copy; borrows the document's bytes.
///
/// ```
/// use tessera_value::{from_json, Doc, Kind};
/// let bytes = from_json(br#"{"name": "Ada", "tags": ["x"], "n": 1.5}"#).unwrap();
/// let root = Doc::from_untrusted(&bytes).unwrap().root();
/// assert_eq!(root.kind(), Kind::Dict);
/// assert_eq!(root.get("name").and_then(|v| v.as_str()), Some("Ada"));
/// assert_eq!(root.path("tags[0]").unwrap().unwrap().as_str(), Some("x"));
/// assert_eq!(root.get("n").unwrap().as_f64(), Some(1.5));
/// ```
#[derive(Clone, Copy)]
pub struct Value<'a> {
    doc: Doc<'a>,
    repr: Repr,
}

impl<'a> Value<'a> {
    #[inline(always)]
    pub(crate) fn new(doc: Doc<'a>, repr: Repr) -> Self {
        Value { doc, repr }
    }

    pub(crate) fn repr(&self) -> Repr {
        self.repr
    }

    /// The document this value belongs to.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(br#"{"a": [1]}"#).unwrap();
    /// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
    /// let inner = doc.root().get("a").unwrap();
    /// assert_eq!(inner.doc().bytes(), &bytes[..]);
    /// ```
    pub fn doc(&self) -> Doc<'a> {
        self.doc
    }

    /// The kind of value.
    ///
    /// ```
    /// use tessera_value::Kind;
    /// let bytes = tessera_value::from_json(br#"{"a": "x"}"#).unwrap();
    /// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert_eq!(root.kind(), Kind::Dict);
    /// assert_eq!(root.get("a").unwrap().kind(), Kind::String);
    /// ```
    #[inline]
    pub fn kind(&self) -> Kind {
        match self.repr {
            Repr::Null => Kind::Null,
            Repr::Bool(_) => Kind::Bool,
            Repr::Int(_) => Kind::Int,
            Repr::Float(_) => Kind::Float,
            Repr::Row { .. } => Kind::Array,
            Repr::Item(pos) => match self.doc.bytes[pos] {
                0x10..=0x17 => Kind::Int,
                0x18..=0x1F => {
                    if self.raw_uint(pos) > i64::MAX as u64 {
                        Kind::UInt
                    } else {
                        Kind::Int
                    }
                }
                TAG_F32 | TAG_F64 => Kind::Float,
                0x30..=0x3F => Kind::Array,
                0x40..=0x4F => Kind::Binary,
                0x50..=0x5F => Kind::Array,
                0x60..=0x6F => Kind::Dict,
                0x80..=0xBF => Kind::String,
                _ => Kind::Null,
            },
        }
    }

    fn raw_uint(&self, pos: usize) -> u64 {
        let width = (self.doc.bytes[pos] & 7) as usize + 1;
        let mut buf = [0u8; 8];
        buf[..width].copy_from_slice(&self.doc.bytes[pos + 1..pos + 1 + width]);
        u64::from_le_bytes(buf)
    }

    fn raw_int(&self, pos: usize) -> i64 {
        let width = (self.doc.bytes[pos] & 7) as usize + 1;
        sign_extend(self.raw_uint(pos), width)
    }

    /// True for `null`.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(b"[null, 0]").unwrap();
    /// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert!(root.index(0).unwrap().is_null());
    /// assert!(!root.index(1).unwrap().is_null());
    /// ```
    #[inline(always)]
    pub fn is_null(&self) -> bool {
        self.kind() == Kind::Null
    }

    /// The boolean, if this is one.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(b"[false, 0]").unwrap();
    /// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert_eq!(root.index(0).unwrap().as_bool(), Some(false));
    /// assert_eq!(root.index(1).unwrap().as_bool(), None);
    /// ```
    #[inline(always)]
    pub fn as_bool(&self) -> Option<bool> {
        match self.repr {
            Repr::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The integer, if this is an integer that fits in i64.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(b"[-3, 18446744073709551615, 2.0]").unwrap();
    /// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert_eq!(root.index(0).unwrap().as_i64(), Some(-3));
    /// assert_eq!(root.index(1).unwrap().as_i64(), None); // above i64::MAX
    /// assert_eq!(root.index(2).unwrap().as_i64(), None); // a float
    /// ```
    #[inline(always)]
    pub fn as_i64(&self) -> Option<i64> {
        match self.repr {
            Repr::Int(v) => Some(v),
            Repr::Item(pos) => match self.doc.bytes[pos] {
                0x10..=0x17 => Some(self.raw_int(pos)),
                0x18..=0x1F => i64::try_from(self.raw_uint(pos)).ok(),
                _ => None,
            },
            _ => None,
        }
    }

    /// The integer, if this is a non-negative integer.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(b"[18446744073709551615, -1]").unwrap();
    /// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert_eq!(root.index(0).unwrap().as_u64(), Some(u64::MAX));
    /// assert_eq!(root.index(1).unwrap().as_u64(), None);
    /// ```
    #[inline(always)]
    pub fn as_u64(&self) -> Option<u64> {
        match self.repr {
            Repr::Int(v) => u64::try_from(v).ok(),
            Repr::Item(pos) => match self.doc.bytes[pos] {
                0x10..=0x17 => u64::try_from(self.raw_int(pos)).ok(),
                0x18..=0x1F => Some(self.raw_uint(pos)),
                _ => None,
            },
            _ => None,
        }
    }

    /// The number as f64, for floats and (possibly rounded) integers.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(br#"[1.25, 3, "4"]"#).unwrap();
    /// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert_eq!(root.index(0).unwrap().as_f64(), Some(1.25));
    /// assert_eq!(root.index(1).unwrap().as_f64(), Some(3.0));
    /// assert_eq!(root.index(2).unwrap().as_f64(), None);
    /// ```
    #[inline(always)]
    pub fn as_f64(&self) -> Option<f64> {
        match self.repr {
            Repr::Int(v) => Some(v as f64),
            Repr::Float(v) => Some(v),
            Repr::Item(pos) => match self.doc.bytes[pos] {
                TAG_F32 => Some(f32::from_le_bytes(self.doc.bytes[pos + 1..pos + 5].try_into().unwrap()) as f64),
                TAG_F64 => Some(f64::from_le_bytes(self.doc.bytes[pos + 1..pos + 9].try_into().unwrap())),
                0x10..=0x17 => Some(self.raw_int(pos) as f64),
                0x18..=0x1F => Some(self.raw_uint(pos) as f64),
                _ => None,
            },
            _ => None,
        }
    }

    /// The number if it is stored as a float, `None` for an integer or anything else: one look
    /// at the tag, for a decoder that reads floats and treats integers apart.
    #[inline(always)]
    pub(crate) fn as_stored_float(&self) -> Option<f64> {
        match self.repr {
            Repr::Float(v) => Some(v),
            Repr::Item(pos) => match self.doc.bytes[pos] {
                TAG_F32 => Some(f32::from_le_bytes(self.doc.bytes[pos + 1..pos + 5].try_into().unwrap()) as f64),
                TAG_F64 => Some(f64::from_le_bytes(self.doc.bytes[pos + 1..pos + 9].try_into().unwrap())),
                _ => None,
            },
            _ => None,
        }
    }

    /// True if the value is stored as a float (as opposed to an integer).
    ///
    /// ```
    /// let bytes = tessera_value::from_json(br#"[1.0, 1, "x"]"#).unwrap();
    /// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert!(root.index(0).unwrap().is_float());
    /// assert!(!root.index(1).unwrap().is_float());
    /// ```
    #[inline]
    pub fn is_float(&self) -> bool {
        match self.repr {
            Repr::Float(_) => true,
            Repr::Item(pos) => matches!(self.doc.bytes[pos], TAG_F32 | TAG_F64),
            _ => false,
        }
    }

    /// The string, borrowed from the document.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(r#"["héllo", 1]"#.as_bytes()).unwrap();
    /// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert_eq!(root.index(0).unwrap().as_str(), Some("héllo"));
    /// assert_eq!(root.index(1).unwrap().as_str(), None);
    /// ```
    #[inline(always)]
    pub fn as_str(&self) -> Option<&'a str> {
        match self.repr {
            Repr::Item(pos) if self.doc.bytes[pos] >= TAG_STRING && self.doc.bytes[pos] <= 0xBF => Some(self.doc.item_str(pos)),
            _ => None,
        }
    }

    /// The binary data, borrowed from the document.
    ///
    /// ```
    /// let mut out = tessera_value::Encoder::new();
    /// out.push_bytes(&[0, 159, 146])?;
    /// let bytes = out.finish()?;
    /// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert_eq!(root.as_bytes(), Some(&[0, 159, 146][..]));
    /// assert_eq!(root.as_str(), None);
    /// # Ok::<(), tessera_value::EncodeError>(())
    /// ```
    #[inline]
    pub fn as_bytes(&self) -> Option<&'a [u8]> {
        match self.repr {
            Repr::Item(pos) if (0x40..=0x4F).contains(&self.doc.bytes[pos]) => {
                let (start, len) = self.doc.blob_at(pos);
                Some(&self.doc.bytes[start..start + len])
            }
            _ => None,
        }
    }

    /// The array, if this is one.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(br#"[["a", "b"], {}]"#).unwrap();
    /// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert_eq!(root.index(0).unwrap().as_array().map(|array| array.len()), Some(2));
    /// assert!(root.index(1).unwrap().as_array().is_none());
    /// ```
    #[inline]
    pub fn as_array(&self) -> Option<Array<'a>> {
        match self.repr {
            Repr::Item(pos) => match self.doc.bytes[pos] & 0xF0 {
                TAG_ARRAY => Some(Array::at(self.doc, pos)),
                TAG_PACKED => Some(Array::packed_at(self.doc, pos)),
                _ => None,
            },
            Repr::Row { matrix, row } => Some(Array::row_of(self.doc, matrix, row)),
            _ => None,
        }
    }

    /// The dict, if this is one.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(br#"[{"a": 1}, []]"#).unwrap();
    /// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert_eq!(root.index(0).unwrap().as_dict().map(|dict| dict.len()), Some(1));
    /// assert!(root.index(1).unwrap().as_dict().is_none());
    /// ```
    #[inline(always)]
    pub fn as_dict(&self) -> Option<Dict<'a>> {
        match self.repr {
            Repr::Item(pos) if self.doc.bytes[pos] & 0xF0 == TAG_DICT => Some(Dict::at(self.doc, pos)),
            _ => None,
        }
    }

    /// The dict entry `key`, if this is a dict that has it.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(br#"{"a": 1}"#).unwrap();
    /// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert_eq!(root.get("a").and_then(|v| v.as_i64()), Some(1));
    /// assert!(root.get("b").is_none());
    /// ```
    #[inline]
    pub fn get(&self, key: &str) -> Option<Value<'a>> {
        self.as_dict()?.get(key)
    }

    /// The array element `index`, if this is an array that long.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(br#"["a", "b"]"#).unwrap();
    /// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert_eq!(root.index(1).unwrap().as_str(), Some("b"));
    /// assert!(root.index(2).is_none());
    /// ```
    #[inline(always)]
    pub fn index(&self, index: usize) -> Option<Value<'a>> {
        self.as_array()?.get(index)
    }

    /// Follows a key path such as `friends[0].name` or `[123].name`.
    ///
    /// Segments are dict keys separated by `.` and array indexes in brackets. Returns
    /// `Ok(None)` when a step does not exist.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(br#"{"friends": [{"name": "Ada"}]}"#).unwrap();
    /// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert_eq!(root.path("friends[0].name")?.and_then(|v| v.as_str()), Some("Ada"));
    /// assert!(root.path("friends[1].name")?.is_none());
    /// assert!(root.path("friends[").is_err());
    /// # Ok::<(), tessera_value::PathError>(())
    /// ```
    pub fn path(&self, path: &str) -> Result<Option<Value<'a>>, crate::PathError> {
        let mut current = Some(*self);
        for step in crate::path::Steps::new(path) {
            // After a missing step, keep parsing so that a malformed path is always an error.
            current = match (step?, current) {
                (crate::path::Step::Key(key), Some(value)) => value.get(key),
                (crate::path::Step::Index(index), Some(value)) => value.index(index),
                (_, None) => None,
            };
        }
        Ok(current)
    }

    /// Number of elements or entries of a container, 0 for a scalar.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(br#"[[1, 2, 3], {"a": 1}, "text"]"#).unwrap();
    /// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert_eq!(root.len(), 3);
    /// assert_eq!(root.index(1).unwrap().len(), 1);
    /// assert_eq!(root.index(2).unwrap().len(), 0); // a scalar
    /// ```
    pub fn len(&self) -> usize {
        if let Some(array) = self.as_array() {
            array.len()
        } else if let Some(dict) = self.as_dict() {
            dict.len()
        } else {
            0
        }
    }

    /// True for an empty container or a scalar.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(br#"[[], {}, 5]"#).unwrap();
    /// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert!(!root.is_empty());
    /// assert!(root.as_array().unwrap().iter().all(|value| value.is_empty()));
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Debug for Value<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_json())
    }
}

/// The shape of a container item: entry count, slot width, key width (0 for arrays), and the
/// positions of its key ids and slots.
#[derive(Clone, Copy)]
pub(crate) struct Shape {
    pub(crate) len: usize,
    pub(crate) width: usize,
    pub(crate) key_width: usize,
    pub(crate) keys: usize,
    pub(crate) slots: usize,
}

impl Doc<'_> {
    /// The shape of the container at `pos` (an array if `is_dict` is false).
    #[inline(always)]
    pub(crate) fn shape(&self, pos: usize, is_dict: bool) -> Shape {
        let tag = self.bytes[pos];
        let (len, used) = read_varint_trusted(self.bytes, pos + 2);
        // A valid container never has more entries than the document has bytes; clamping keeps
        // corrupt trusted bytes from asking for absurd allocations.
        let len = len.min(self.bytes.len() as u64) as usize;
        let keys = pos + 2 + used;
        let key_width = if is_dict { width_of(tag >> 2) } else { 0 };
        Shape { len, width: width_of(tag), key_width, keys, slots: keys + len * key_width }
    }

    /// Slot `index` of the container at `pos` with this shape.
    #[inline(always)]
    pub(crate) fn slot(&self, pos: usize, shape: &Shape, index: usize) -> Repr {
        let bits = read_uint(self.bytes, shape.slots + index * shape.width, shape.width);
        self.decode_slot(bits, shape.width, pos)
    }

    /// Key id `index` of the dict with this shape.
    #[inline(always)]
    pub(crate) fn key_at(&self, shape: &Shape, index: usize) -> u64 {
        read_uint(self.bytes, shape.keys + index * shape.key_width, shape.key_width)
    }
}

/// An array inside a document: a container of slots, or a packed numeric array.
///
/// ```
/// let bytes = tessera_value::from_json(br#"["a", true, null]"#).unwrap();
/// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
/// let array = root.as_array().unwrap();
/// assert_eq!(array.len(), 3);
/// assert_eq!(array.get(0).unwrap().as_str(), Some("a"));
/// ```
#[derive(Clone, Copy)]
pub struct Array<'a> {
    doc: Doc<'a>,
    /// The array as a value (an item, or a row of a packed matrix).
    origin: Repr,
    body: ArrayBody<'a>,
}

#[derive(Clone, Copy)]
enum ArrayBody<'a> {
    /// A container at `pos`: one slot per element.
    Slots { pos: usize, shape: Shape },
    /// A packed vector (`columns == 0`) or matrix (`columns` numbers per row).
    Packed { numbers: crate::packed::Numbers<'a>, columns: usize },
}

/// Height of a packed item: 1 for a vector, 2 for a matrix.
#[inline(always)]
pub(crate) const fn packed_height(tag: u8) -> u8 {
    if tag & PACKED_MATRIX == 0 { 1 } else { 2 }
}

impl<'a> Array<'a> {
    #[inline(always)]
    fn at(doc: Doc<'a>, pos: usize) -> Self {
        Array { doc, origin: Repr::Item(pos), body: ArrayBody::Slots { pos, shape: doc.shape(pos, false) } }
    }

    #[inline]
    fn packed_at(doc: Doc<'a>, pos: usize) -> Self {
        let header = crate::packed::header_trusted(doc.bytes, pos);
        let numbers = crate::packed::numbers_at(doc.bytes, &header);
        Array { doc, origin: Repr::Item(pos), body: ArrayBody::Packed { numbers, columns: header.columns } }
    }

    #[inline]
    fn row_of(doc: Doc<'a>, matrix: usize, row: u32) -> Self {
        let header = crate::packed::header_trusted(doc.bytes, matrix);
        let numbers = crate::packed::numbers_at(doc.bytes, &header).slice(row as usize * header.columns, header.columns);
        Array { doc, origin: Repr::Row { matrix, row }, body: ArrayBody::Packed { numbers, columns: 0 } }
    }

    /// Number of elements.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(b"[[1.5, 2.5], []]").unwrap();
    /// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert_eq!(root.index(0).unwrap().as_array().unwrap().len(), 2);
    /// assert_eq!(root.index(1).unwrap().as_array().unwrap().len(), 0);
    /// ```
    #[inline]
    pub fn len(&self) -> usize {
        match self.body {
            ArrayBody::Slots { shape, .. } => shape.len,
            ArrayBody::Packed { numbers, columns: 0 } => numbers.len(),
            ArrayBody::Packed { numbers, columns } => numbers.len() / columns,
        }
    }

    /// True if the array has no elements.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(b"[[], [0]]").unwrap();
    /// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert!(root.index(0).unwrap().as_array().unwrap().is_empty());
    /// assert!(!root.index(1).unwrap().as_array().unwrap().is_empty());
    /// ```
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `index`, in O(1).
    ///
    /// ```
    /// let bytes = tessera_value::from_json(br#"[10, "x"]"#).unwrap();
    /// let array = tessera_value::Doc::from_untrusted(&bytes).unwrap().root().as_array().unwrap();
    /// assert_eq!(array.get(0).unwrap().as_i64(), Some(10));
    /// assert!(array.get(2).is_none());
    /// ```
    #[inline(always)]
    pub fn get(&self, index: usize) -> Option<Value<'a>> {
        let repr = match self.body {
            ArrayBody::Slots { pos, shape } => {
                if index >= shape.len {
                    return None;
                }
                self.doc.slot(pos, &shape, index)
            }
            ArrayBody::Packed { numbers, columns: 0 } => match numbers.element(index)? {
                crate::packed::PackedValue::Int(value) => Repr::Int(value),
                crate::packed::PackedValue::Float(value) => Repr::Float(value),
            },
            ArrayBody::Packed { .. } => {
                let Repr::Item(matrix) = self.origin else { return None };
                if index >= self.len() {
                    return None;
                }
                Repr::Row { matrix, row: index as u32 }
            }
        };
        Some(Value::new(self.doc, repr))
    }

    /// The elements in order.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(b"[1, 2, 3]").unwrap();
    /// let array = tessera_value::Doc::from_untrusted(&bytes).unwrap().root().as_array().unwrap();
    /// let doubled: Vec<i64> = array.iter().map(|value| 2 * value.as_i64().unwrap()).collect();
    /// assert_eq!(doubled, [2, 4, 6]);
    /// ```
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Value<'a>> + 'a + use<'a> {
        let array = *self;
        (0..array.len()).map(move |index| array.get(index).expect("index below len"))
    }

    /// The numbers of a packed vector (or of one row of a packed matrix), read in place.
    /// `None` for an array stored with slots, and for a matrix (whose rows have numbers).
    ///
    /// The encoder packs every non-empty array whose elements are all integers (of one signed
    /// 64-bit range) or all floats, so JSON arrays of numbers come back packed:
    ///
    /// ```
    /// use tessera_value::{from_json, layout::PackedNumber, Doc};
    /// let bytes = from_json(b"[[1, 2, 3], [400, 500, 600], [1, 2.5]]").unwrap();
    /// let root = Doc::from_untrusted(&bytes).unwrap().root();
    /// let row = root.index(1).unwrap().as_array().unwrap().numbers().unwrap();
    /// assert_eq!(row.number_type(), PackedNumber::I16);
    /// assert_eq!(row.to_i64_vec(), Some(vec![400, 500, 600]));
    /// assert!(root.index(2).unwrap().as_array().unwrap().numbers().is_none()); // mixed
    /// ```
    #[inline]
    pub fn numbers(&self) -> Option<crate::packed::Numbers<'a>> {
        match self.body {
            ArrayBody::Packed { numbers, columns: 0 } => Some(numbers),
            _ => None,
        }
    }

    /// The array as a [`Value`].
    ///
    /// ```
    /// let bytes = tessera_value::from_json(b"[1, 2]").unwrap();
    /// let array = tessera_value::Doc::from_untrusted(&bytes).unwrap().root().as_array().unwrap();
    /// assert_eq!(array.as_value().to_json(), "[1,2]");
    /// ```
    pub fn as_value(&self) -> Value<'a> {
        Value::new(self.doc, self.origin)
    }
}

/// A dict inside a document. Entries are sorted by key id, which gives O(log n) lookup.
///
/// ```
/// let bytes = tessera_value::from_json(br#"{"name": "Ada", "age": 36}"#).unwrap();
/// let dict = tessera_value::Doc::from_untrusted(&bytes).unwrap().root().as_dict().unwrap();
/// assert_eq!(dict.len(), 2);
/// assert_eq!(dict.get("age").unwrap().as_i64(), Some(36));
/// ```
#[derive(Clone, Copy)]
pub struct Dict<'a> {
    doc: Doc<'a>,
    pos: usize,
    shape: Shape,
}

impl<'a> Dict<'a> {
    #[inline(always)]
    fn at(doc: Doc<'a>, pos: usize) -> Self {
        Dict { doc, pos, shape: doc.shape(pos, true) }
    }

    /// Number of entries.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(br#"{"a": 1, "b": 2}"#).unwrap();
    /// let dict = tessera_value::Doc::from_untrusted(&bytes).unwrap().root().as_dict().unwrap();
    /// assert_eq!(dict.len(), 2);
    /// ```
    #[inline]
    pub fn len(&self) -> usize {
        self.shape.len
    }

    /// True if the dict has no entries.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(br#"[{}, {"a": 1}]"#).unwrap();
    /// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert!(root.index(0).unwrap().as_dict().unwrap().is_empty());
    /// assert!(!root.index(1).unwrap().as_dict().unwrap().is_empty());
    /// ```
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.shape.len == 0
    }

    /// The value of `key`, in O(log n).
    ///
    /// ```
    /// let bytes = tessera_value::from_json(br#"{"a": true}"#).unwrap();
    /// let dict = tessera_value::Doc::from_untrusted(&bytes).unwrap().root().as_dict().unwrap();
    /// assert_eq!(dict.get("a").unwrap().as_bool(), Some(true));
    /// assert!(dict.get("b").is_none());
    /// ```
    #[inline]
    pub fn get(&self, key: &str) -> Option<Value<'a>> {
        self.get_id(self.doc.key_id(key)?)
    }

    /// The value of a pre-resolved key: after the first lookup, no string comparison is needed.
    ///
    /// ```
    /// use tessera_value::{from_json, Doc, DictKey};
    /// let bytes = from_json(br#"[{"name":"a"},{"name":"b"}]"#).unwrap();
    /// let root = Doc::from_untrusted(&bytes).unwrap().root();
    /// let name = DictKey::new("name");
    /// let names: Vec<_> = root.as_array().unwrap().iter()
    ///     .map(|person| person.as_dict().unwrap().get_key(&name).unwrap().as_str().unwrap())
    ///     .collect();
    /// assert_eq!(names, ["a", "b"]);
    /// ```
    #[inline]
    pub fn get_key(&self, key: &DictKey) -> Option<Value<'a>> {
        let cached = key.cached_id.load(Ordering::Relaxed);
        if cached != DictKey::UNRESOLVED && self.doc.key_name(cached) == Some(&*key.name) {
            return self.get_id(cached);
        }
        let id = self.doc.key_id(&key.name)?;
        key.cached_id.store(id, Ordering::Relaxed);
        self.get_id(id)
    }

    /// The value of a field known by both its shared-key id and its name: by id when the
    /// document was encoded with that shared key (one integer search), else by name (a
    /// document written before the key was shared, or without shared keys).
    ///
    /// ```
    /// use tessera_value::{Doc, Encoder, SharedKeys};
    /// let mut keys = SharedKeys::new();
    /// let id = keys.add("n").unwrap();
    /// let by_name = tessera_value::from_json(br#"{"n": 1}"#).unwrap();
    /// let doc = Doc::from_untrusted_with_keys(&by_name, &keys).unwrap();
    /// assert_eq!(doc.root().as_dict().unwrap().get_field(id, "n").unwrap().as_i64(), Some(1));
    /// ```
    #[inline]
    pub fn get_field(&self, id: u32, name: &str) -> Option<Value<'a>> {
        if (id as u64) < self.doc.shared_count() { self.get_id(id as u64) } else { self.get(name) }
    }

    /// [`Dict::get_field`] for a field usually found at entry `*hint` (its rank in records of
    /// one layout): one comparison when it is there, else a search, after which `*hint` is
    /// where the field was found. A hint past the end or wrong is only slower.
    ///
    /// ```
    /// use tessera_value::{Doc, Encoder, SharedKeys};
    /// let mut keys = SharedKeys::new();
    /// let (a, b) = (keys.add("a").unwrap(), keys.add("b").unwrap());
    /// let mut out = Encoder::with_shared_keys(&keys);
    /// out.begin_dict()?;
    /// out.key("a")?;
    /// out.push_i64(1)?;
    /// out.key("b")?;
    /// out.push_i64(2)?;
    /// out.end_dict()?;
    /// let bytes = out.finish()?;
    /// let dict = Doc::from_untrusted_with_keys(&bytes, &keys).unwrap().root().as_dict().unwrap();
    /// let mut hint = 0;
    /// assert_eq!(dict.get_field_hinted(b, "b", &mut hint).unwrap().as_i64(), Some(2));
    /// assert_eq!(hint, 1, "found at entry 1");
    /// assert_eq!(dict.get_field_hinted(a, "a", &mut hint).unwrap().as_i64(), Some(1));
    /// assert_eq!(hint, 0);
    /// # Ok::<(), tessera_value::EncodeError>(())
    /// ```
    #[inline(always)]
    pub fn get_field_hinted(&self, id: u32, name: &str, hint: &mut usize) -> Option<Value<'a>> {
        let index = self.field_index(id, name, *hint)?;
        *hint = index;
        Some(self.value_at(index))
    }

    /// The entry of the field with shared-key id `id` (named `name`, for a dict whose keys are
    /// not shared), looked for first at entry `rank`. An index, not a [`Value`], so that the
    /// caller builds the value once, after both paths meet: a `Value` returned from the
    /// out-of-line search lives in memory, and copying it whole then stalls on store-to-load
    /// forwarding (a 16-byte load over two 8-byte stores), a third of a small struct's decode.
    #[inline(always)]
    pub(crate) fn field_index(&self, id: u32, name: &str, rank: usize) -> Option<usize> {
        if rank < self.shape.len && (id as u64) < self.doc.shared_count() && self.key_at(rank) == id as u64 {
            return Some(rank);
        }
        self.field_index_searched(id, name)
    }

    /// [`Dict::field_index`] when the field is not at its rank: kept out of line.
    #[inline(never)]
    fn field_index_searched(&self, id: u32, name: &str) -> Option<usize> {
        let id = if (id as u64) < self.doc.shared_count() { id as u64 } else { self.doc.key_id(name)? };
        self.index_of_id(id)
    }

    /// The entry whose key is `name`, if any.
    #[inline(never)]
    pub(crate) fn index_of_name(&self, name: &str) -> Option<usize> {
        self.index_of_id(self.doc.key_id(name)?)
    }

    #[inline]
    fn key_at(&self, index: usize) -> u64 {
        self.doc.key_at(&self.shape, index)
    }

    #[inline(always)]
    pub(crate) fn value_at(&self, index: usize) -> Value<'a> {
        Value::new(self.doc, self.doc.slot(self.pos, &self.shape, index))
    }

    #[inline]
    fn get_id(&self, id: u64) -> Option<Value<'a>> {
        self.index_of_id(id).map(|index| self.value_at(index))
    }

    /// The entry whose key is the id `id`, if any.
    #[inline]
    fn index_of_id(&self, id: u64) -> Option<usize> {
        if self.shape.key_width == 1 {
            // Ids are unique, so the first byte equal to the id is its entry.
            let keys = &self.doc.bytes[self.shape.keys..self.shape.keys + self.shape.len];
            let id = u8::try_from(id).ok()?;
            return if keys.len() <= 64 { find_byte(keys, id) } else { memchr::memchr(id, keys) };
        }
        if self.shape.len == 0 {
            return None;
        }
        // Ids ascend strictly, so the entry of `id` sits at index `id - first` or before; in a
        // dict whose ids are consecutive (every object of a JSON document with fresh keys), it
        // sits exactly there.
        let below_first = id.checked_sub(self.key_at(0))?;
        let last = self.shape.len - 1;
        let bound = usize::try_from(below_first).map_or(last, |bound| bound.min(last));
        if bound as u64 == below_first && self.key_at(bound) == id {
            return Some(bound);
        }
        let (mut low, mut high) = (0, bound + 1);
        while low < high {
            let middle = (low + high) / 2;
            let probe = self.key_at(middle);
            if probe < id {
                low = middle + 1;
            } else if probe > id {
                high = middle;
            } else {
                return Some(middle);
            }
        }
        None
    }

    /// Entry `index` as (key, value), in storage order.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(br#"{"b": 1, "a": 2}"#).unwrap();
    /// let dict = tessera_value::Doc::from_untrusted(&bytes).unwrap().root().as_dict().unwrap();
    /// let (key, value) = dict.entry(0).unwrap();
    /// assert_eq!((key, value.as_i64()), ("b", Some(1))); // first seen first
    /// assert!(dict.entry(2).is_none());
    /// ```
    #[inline]
    pub fn entry(&self, index: usize) -> Option<(&'a str, Value<'a>)> {
        if index >= self.shape.len {
            return None;
        }
        Some((self.doc.key_name(self.key_at(index)).unwrap_or(""), self.value_at(index)))
    }

    /// The entries in storage order (key-id order, which for JSON input is the order in which
    /// each key was first seen in the document).
    ///
    /// ```
    /// let bytes = tessera_value::from_json(br#"{"x": 1, "y": 2}"#).unwrap();
    /// let dict = tessera_value::Doc::from_untrusted(&bytes).unwrap().root().as_dict().unwrap();
    /// let entries: Vec<(&str, i64)> = dict.iter().map(|(key, value)| (key, value.as_i64().unwrap())).collect();
    /// assert_eq!(entries, [("x", 1), ("y", 2)]);
    /// ```
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&'a str, Value<'a>)> + 'a + use<'a> {
        let dict = *self;
        (0..dict.shape.len).map(move |index| dict.entry(index).expect("index below len"))
    }

    /// The dict as a [`Value`].
    ///
    /// ```
    /// let bytes = tessera_value::from_json(br#"{"x": 1}"#).unwrap();
    /// let dict = tessera_value::Doc::from_untrusted(&bytes).unwrap().root().as_dict().unwrap();
    /// assert_eq!(dict.as_value().to_json(), r#"{"x":1}"#);
    /// ```
    pub fn as_value(&self) -> Value<'a> {
        Value::new(self.doc, Repr::Item(self.pos))
    }
}

/// A dict key resolved once and reused: lookups with it compare integers, not strings.
///
/// It remembers the key id it found last and checks, with one comparison, that the id still
/// names this key in the document at hand, so one `DictKey` works across documents. It is
/// `Send` and `Sync`.
///
/// ```
/// use tessera_value::{from_json, Doc, DictKey};
/// let id = DictKey::new("id");
/// for json in [&br#"{"id": 1}"#[..], br#"{"other": 0, "id": 2}"#] {
///     let bytes = from_json(json).unwrap();
///     let dict = Doc::from_untrusted(&bytes).unwrap().root().as_dict().unwrap();
///     assert!(dict.get_key(&id).unwrap().as_i64().unwrap() > 0); // one key, many documents
/// }
/// ```
#[derive(Debug)]
pub struct DictKey {
    name: Box<str>,
    cached_id: AtomicU64,
}

impl DictKey {
    const UNRESOLVED: u64 = u64::MAX;

    /// A key for `name`.
    ///
    /// ```
    /// let key = tessera_value::DictKey::new("name");
    /// assert_eq!(key.name(), "name");
    /// ```
    pub fn new(name: &str) -> Self {
        DictKey { name: name.into(), cached_id: AtomicU64::new(Self::UNRESOLVED) }
    }

    /// The key's name.
    ///
    /// ```
    /// assert_eq!(tessera_value::DictKey::new("age").name(), "age");
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Clone for DictKey {
    fn clone(&self) -> Self {
        DictKey { name: self.name.clone(), cached_id: AtomicU64::new(self.cached_id.load(Ordering::Relaxed)) }
    }
}

#[cfg(test)]
mod tests {
    use super::find_byte;

    #[test]
    fn find_byte_matches_position_at_every_offset() {
        for len in 0usize..40 {
            for at in 0..=len {
                for other in [0u8, 1, 0x7F, 0x80, 0xFF] {
                    let mut haystack = vec![other; len];
                    let needle = other.wrapping_add(1);
                    if at < len {
                        haystack[at] = needle;
                    }
                    assert_eq!(find_byte(&haystack, needle), haystack.iter().position(|&b| b == needle));
                }
            }
        }
    }
}
