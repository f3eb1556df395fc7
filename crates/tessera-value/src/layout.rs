//! Byte-level constants and primitive codecs of the format (see `docs/format.md`).
//!
//! Everything that knows what a byte means lives here: item tags, slot tags, widths and varints.
//! The encoder, the reader and the validator all go through these helpers, so the format is
//! defined in one place.

/// Format version written in the high nibble of a document's last byte.
///
/// Version 3 adds packed numeric arrays (tags `0x30..=0x3D`, see [`PackedNumber`]).
/// Version 2 places keys by XXH3-64 and may store a sorted key index (see
/// [`KEY_INDEX_SORTED`]); version 1 placed them by [`key_hash_v1`]. Readers accept all three.
///
/// ```
/// use tessera_value::layout::FORMAT_VERSION;
/// let bytes = tessera_value::from_json(br#"{"a": 1}"#).unwrap();
/// assert_eq!(bytes.last().unwrap() >> 4, FORMAT_VERSION);
/// ```
pub const FORMAT_VERSION: u8 = 3;

/// First format version whose documents may hold packed numeric arrays.
///
/// ```
/// use tessera_value::layout::{FORMAT_VERSION, FORMAT_VERSION_PACKED};
/// assert!(FORMAT_VERSION >= FORMAT_VERSION_PACKED);
/// let bytes = tessera_value::to_vec(&vec![1.5f64, 2.5]).unwrap();
/// assert!(bytes.last().unwrap() >> 4 >= FORMAT_VERSION_PACKED);
/// ```
pub const FORMAT_VERSION_PACKED: u8 = 3;

/// Oldest format version readers accept.
///
/// ```
/// use tessera_value::layout::{FORMAT_VERSION_MIN, FORMAT_VERSION};
/// use tessera_value::{Doc, FormatError};
/// let mut bytes = tessera_value::from_json(b"true").unwrap();
/// *bytes.last_mut().unwrap() &= 0x0F; // version 0, older than FORMAT_VERSION_MIN
/// assert_eq!(FORMAT_VERSION_MIN, 1);
/// assert!(matches!(Doc::from_untrusted(&bytes), Err(FormatError::UnsupportedVersion { found: 0, supported: FORMAT_VERSION })));
/// ```
pub const FORMAT_VERSION_MIN: u8 = 1;

/// Hard limit on container nesting: the height of a container is stored in one byte.
///
/// ```
/// use tessera_value::layout::HEIGHT_MAX;
/// use tessera_value::{EncodeError, Encoder};
/// let mut out = Encoder::new();
/// for _ in 0..HEIGHT_MAX {
///     out.begin_array().unwrap();
/// }
/// assert!(matches!(out.begin_array(), Err(EncodeError::TooDeep(HEIGHT_MAX))));
/// ```
pub const HEIGHT_MAX: u8 = 255;

/// Default nesting limit for validation and for JSON input (serde_json uses 128 as well).
///
/// ```
/// use tessera_value::layout::DEPTH_DEFAULT;
/// assert_eq!(tessera_value::JsonOptions::default().depth_max, DEPTH_DEFAULT);
/// let deep = "[".repeat(DEPTH_DEFAULT as usize + 1) + &"]".repeat(DEPTH_DEFAULT as usize + 1);
/// assert!(tessera_value::from_json(deep.as_bytes()).is_err());
/// ```
pub const DEPTH_DEFAULT: u8 = 128;

// ---- item tags (first byte of every item in the value region) ----

/// Signed integer, `(tag & 7) + 1` little-endian two's-complement bytes follow.
///
/// ```
/// use tessera_value::layout::TAG_INT;
/// let tag = TAG_INT | 3; // a 4-byte signed integer follows
/// assert_eq!(tag & 0xF8, TAG_INT);
/// assert_eq!((tag & 7) + 1, 4);
/// ```
pub const TAG_INT: u8 = 0x10;
/// Unsigned integer, `(tag & 7) + 1` little-endian bytes follow.
///
/// ```
/// use tessera_value::layout::TAG_UINT;
/// let tag = TAG_UINT | 7; // an 8-byte unsigned integer follows
/// assert_eq!(tag & 0xF8, TAG_UINT);
/// assert_eq!((tag & 7) + 1, 8);
/// ```
pub const TAG_UINT: u8 = 0x18;
/// IEEE-754 binary32, 4 little-endian bytes follow.
///
/// ```
/// use tessera_value::layout::{TAG_F32, TAG_F64};
/// assert_eq!(TAG_F32 + 1, TAG_F64);
/// assert_eq!(TAG_F32 & 0xF0, 0x20);
/// ```
pub const TAG_F32: u8 = 0x20;
/// IEEE-754 binary64, 8 little-endian bytes follow.
///
/// ```
/// use tessera_value::layout::TAG_F64;
/// let bytes = tessera_value::from_json(b"0.1").unwrap();
/// assert_eq!(bytes[0], TAG_F64); // the root item, first in the value region
/// ```
pub const TAG_F64: u8 = 0x21;
/// Binary data: tags `0x40..=0x4E` carry the length `tag - 0x40`; `0x4F` is followed by a varint length.
///
/// ```
/// use tessera_value::layout::{write_blob_header, TAG_BINARY};
/// let mut out = Vec::new();
/// write_blob_header(&mut out, 3, false);
/// assert_eq!(out, [TAG_BINARY + 3]);
/// ```
pub const TAG_BINARY: u8 = 0x40;
/// Largest binary length stored in the tag itself.
///
/// ```
/// use tessera_value::layout::{write_blob_header, BINARY_INLINE_LEN_MAX, TAG_BINARY};
/// let mut out = Vec::new();
/// write_blob_header(&mut out, BINARY_INLINE_LEN_MAX + 1, false);
/// assert_eq!(out, [TAG_BINARY + 15, 15]); // escape tag, then a varint length
/// ```
pub const BINARY_INLINE_LEN_MAX: usize = 14;
/// Array: `0x50 | width_code`.
///
/// ```
/// use tessera_value::layout::{width_of, TAG_ARRAY};
/// let tag = TAG_ARRAY | 1; // an array of 2-byte slots
/// assert_eq!(tag & 0xF0, TAG_ARRAY);
/// assert_eq!(width_of(tag & 3), 2);
/// ```
pub const TAG_ARRAY: u8 = 0x50;
/// Dict: `0x60 | width_code | key_width_code << 2`.
///
/// ```
/// use tessera_value::layout::{width_of, TAG_DICT};
/// let tag = TAG_DICT | 2 | (1 << 2); // 4-byte value slots, 2-byte keys
/// assert_eq!(tag & 0xF0, TAG_DICT);
/// assert_eq!((width_of(tag & 3), width_of(tag >> 2)), (4, 2));
/// ```
pub const TAG_DICT: u8 = 0x60;
/// Tail item (tables and footer): `0x70 | flags`.
///
/// ```
/// use tessera_value::layout::{TAG_TAIL, TAIL_HAS_KEYS};
/// let tag = TAG_TAIL | TAIL_HAS_KEYS;
/// assert_eq!(tag & 0xF0, TAG_TAIL);
/// assert_eq!(tag & TAIL_HAS_KEYS, TAIL_HAS_KEYS);
/// ```
pub const TAG_TAIL: u8 = 0x70;
/// UTF-8 string: tags `0x80..=0xBE` carry the length `tag - 0x80`; `0xBF` is followed by a varint length.
///
/// ```
/// use tessera_value::layout::{write_blob_header, TAG_STRING};
/// let mut out = Vec::new();
/// write_blob_header(&mut out, 5, true);
/// assert_eq!(out, [TAG_STRING + 5]);
/// ```
pub const TAG_STRING: u8 = 0x80;
/// Largest string length stored in the tag itself.
///
/// ```
/// use tessera_value::layout::{write_blob_header, STRING_INLINE_LEN_MAX, TAG_STRING};
/// let mut out = Vec::new();
/// write_blob_header(&mut out, STRING_INLINE_LEN_MAX, true);
/// assert_eq!(out, [0xBE]);
/// out.clear();
/// write_blob_header(&mut out, STRING_INLINE_LEN_MAX + 1, true);
/// assert_eq!(out, [TAG_STRING + 0x3F, 63]);
/// ```
pub const STRING_INLINE_LEN_MAX: usize = 62;

/// Packed numeric array: `0x30 | number code` is a *vector* (`count` varint, padding, the
/// numbers); `0x38 | number code` is a *matrix*, an array of equally long vectors (`rows` and
/// `columns` varints, padding, the numbers row after row). See [`PackedNumber`].
///
/// ```
/// use tessera_value::layout::{PackedNumber, PACKED_MATRIX, TAG_PACKED};
/// let tag = TAG_PACKED | PackedNumber::F64.code();
/// assert_eq!(tag & 0xF0, TAG_PACKED);
/// assert_eq!(tag & PACKED_MATRIX, 0); // a vector
/// assert_eq!(PackedNumber::from_code(tag), Some(PackedNumber::F64));
/// ```
pub const TAG_PACKED: u8 = 0x30;
/// Bit of a packed tag that marks a matrix.
///
/// ```
/// use tessera_value::layout::{PackedNumber, PACKED_MATRIX, TAG_PACKED};
/// let tag = TAG_PACKED | PACKED_MATRIX | PackedNumber::I32.code();
/// assert_ne!(tag & PACKED_MATRIX, 0);
/// assert_eq!(PackedNumber::from_code(tag), Some(PackedNumber::I32));
/// ```
pub const PACKED_MATRIX: u8 = 0x08;

/// Tail flag: a key table follows.
///
/// ```
/// use tessera_value::layout::{TAIL_HAS_ATOMS, TAIL_HAS_KEYS, TAIL_HAS_SHARED};
/// let flags = TAIL_HAS_KEYS | TAIL_HAS_SHARED;
/// assert_ne!(flags & TAIL_HAS_KEYS, 0);
/// assert_eq!(flags & TAIL_HAS_ATOMS, 0);
/// ```
pub const TAIL_HAS_KEYS: u8 = 1;
/// Tail flag: an atom table follows.
///
/// ```
/// use tessera_value::layout::{TAIL_HAS_ATOMS, TAIL_HAS_KEYS, TAIL_HAS_SHARED};
/// assert_eq!(TAIL_HAS_KEYS | TAIL_HAS_ATOMS | TAIL_HAS_SHARED, 0b111);
/// assert_ne!(TAIL_HAS_ATOMS & 0b010, 0);
/// ```
pub const TAIL_HAS_ATOMS: u8 = 2;
/// Tail flag: a shared-key count follows.
///
/// ```
/// use tessera_value::layout::{TAG_TAIL, TAIL_HAS_SHARED};
/// let tag = TAG_TAIL | TAIL_HAS_SHARED;
/// assert_eq!(tag, 0x74);
/// ```
pub const TAIL_HAS_SHARED: u8 = 4;

// ---- slot tags (low bits of a slot) ----

/// `slot & 1 == 0`: a pointer; the distance back from the container's first byte is `slot >> 1`.
///
/// ```
/// use tessera_value::layout::SLOT_POINTER_MASK;
/// let slot: u64 = 40 << 1; // a pointer 40 bytes back
/// assert_eq!(slot & SLOT_POINTER_MASK, 0);
/// assert_eq!(slot >> 1, 40);
/// ```
pub const SLOT_POINTER_MASK: u64 = 1;
/// `slot & 7 == 1`: a small signed integer in `slot >> 3` (arithmetic shift).
///
/// ```
/// use tessera_value::layout::SLOT_INT;
/// let slot: u64 = ((-5i64 << 3) as u64) | SLOT_INT;
/// assert_eq!(slot & 7, SLOT_INT);
/// assert_eq!((slot as i64) >> 3, -5);
/// ```
pub const SLOT_INT: u64 = 0b001;
/// `slot & 7 == 3`: a special value in `slot >> 3`.
///
/// ```
/// use tessera_value::layout::{SLOT_SPECIAL, SPECIAL_TRUE};
/// let slot = (SPECIAL_TRUE << 3) | SLOT_SPECIAL;
/// assert_eq!(slot & 7, SLOT_SPECIAL);
/// assert_eq!(slot >> 3, SPECIAL_TRUE);
/// ```
pub const SLOT_SPECIAL: u64 = 0b011;
/// `slot & 7 == 5`: a reference to atom number `slot >> 3`.
///
/// ```
/// use tessera_value::layout::SLOT_ATOM;
/// let slot = (7 << 3) | SLOT_ATOM; // atom number 7
/// assert_eq!(slot & 7, SLOT_ATOM);
/// assert_eq!(slot >> 3, 7);
/// ```
pub const SLOT_ATOM: u64 = 0b101;

/// Special payloads.
///
/// ```
/// use tessera_value::layout::{SLOT_SPECIAL, SPECIAL_NULL};
/// let slot = (SPECIAL_NULL << 3) | SLOT_SPECIAL;
/// assert_eq!(slot, 0b011);
/// ```
pub const SPECIAL_NULL: u64 = 0;
/// Special payload for `false`.
///
/// ```
/// use tessera_value::layout::{SLOT_SPECIAL, SPECIAL_FALSE};
/// assert_eq!((SPECIAL_FALSE << 3) | SLOT_SPECIAL, 0b1011);
/// ```
pub const SPECIAL_FALSE: u64 = 1;
/// Special payload for `true`.
///
/// ```
/// use tessera_value::layout::{SLOT_SPECIAL, SPECIAL_TRUE};
/// assert_eq!((SPECIAL_TRUE << 3) | SLOT_SPECIAL, 0b10011);
/// ```
pub const SPECIAL_TRUE: u64 = 2;

/// Longest probe sequence in a key table's hash index. The encoder grows the index until every
/// key is found within this many slots, so a lookup and validation are bounded.
///
/// ```
/// use tessera_value::layout::{key_hash, key_index_slots, KEY_PROBE_MAX};
/// let slots = key_index_slots(3, 0);
/// let home = key_hash(b"name") & (slots - 1);
/// // A lookup of "name" looks at most at these slots.
/// let probed: Vec<u64> = (0..KEY_PROBE_MAX as u64).map(|step| (home + step) & (slots - 1)).collect();
/// assert_eq!(probed.len(), 8);
/// ```
pub const KEY_PROBE_MAX: usize = 8;

/// Largest growth exponent of a key hash index: the index has at most 16 slots per key.
/// Key sets that still do not fit within [`KEY_PROBE_MAX`] probes (only crafted ones) are
/// stored with a sorted index instead.
///
/// ```
/// use tessera_value::layout::{key_index_slots, KEY_INDEX_GROWTH_MAX};
/// assert_eq!(key_index_slots(4, KEY_INDEX_GROWTH_MAX), 64); // 16 slots per key
/// ```
pub const KEY_INDEX_GROWTH_MAX: u8 = 3;

/// Value of the growth nibble (bits 4-7 of the footer's widths byte) that marks a *sorted* key
/// index: one entry per local key, in ascending byte order of the key strings, searched by
/// bisection. Version 2 only.
///
/// ```
/// use tessera_value::layout::{KEY_INDEX_GROWTH_MAX, KEY_INDEX_SORTED};
/// // The nibble is never a growth exponent.
/// assert!(KEY_INDEX_SORTED > KEY_INDEX_GROWTH_MAX);
/// assert_eq!(KEY_INDEX_SORTED, 0b1111);
/// ```
pub const KEY_INDEX_SORTED: u8 = 0xF;

/// Number of slots of a key hash index for `key_count` keys and growth exponent `growth`:
/// the next power of two at or above twice the key count, shifted left by `growth`.
///
/// ```
/// use tessera_value::layout::key_index_slots;
/// assert_eq!(key_index_slots(3, 0), 8);
/// assert_eq!(key_index_slots(3, 1), 16);
/// assert_eq!(key_index_slots(4, 0), 8);
/// ```
#[inline]
pub const fn key_index_slots(key_count: u64, growth: u8) -> u64 {
    (2 * key_count).next_power_of_two() << growth
}

/// The hash that places dict keys in a version-2 key index: XXH3-64 with seed 0 over the key's
/// UTF-8 bytes (the published XXH3 specification, xxHash 0.8). The home slot is the low bits.
///
/// Every output bit depends on every input bit, so keys that differ only in a high byte of an
/// 8-byte group (`user_0` … `user_9`) still spread over the index.
///
/// ```
/// use tessera_value::layout::key_hash;
/// let homes: std::collections::HashSet<u64> = (0..10).map(|i| key_hash(format!("user_{i}").as_bytes()) & 31).collect();
/// assert!(homes.len() > 5);
/// ```
#[inline]
pub fn key_hash(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// The key hash of format version 1, kept to read version-1 documents: start from the length;
/// for each 8-byte little-endian word (the last one zero-padded), rotate left by 5, xor the
/// word, multiply by `0x517cc1b727220a95`; finally fold the high half into the low half.
///
/// It does not carry high input bits down to the low bits that pick the home slot, which is
/// why version 2 replaced it.
///
/// ```
/// use tessera_value::layout::{key_hash, key_hash_v1};
/// assert_eq!(key_hash_v1(b"name"), key_hash_v1(b"name"));
/// assert_ne!(key_hash_v1(b"name"), key_hash(b"name"));
/// ```
#[inline]
pub fn key_hash_v1(bytes: &[u8]) -> u64 {
    const MULTIPLIER: u64 = 0x517c_c1b7_2722_0a95;
    let mut hash = bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        hash = (hash.rotate_left(5) ^ word).wrapping_mul(MULTIPLIER);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        // The zero-padded last group, assembled without a variable-length copy.
        let word = rest.iter().rev().fold(0u64, |word, &byte| (word << 8) | byte as u64);
        hash = (hash.rotate_left(5) ^ word).wrapping_mul(MULTIPLIER);
    }
    hash ^ (hash >> 32)
}

/// How a document's key index is searched, from its format version and growth nibble.
///
/// ```
/// use tessera_value::layout::{key_hash, key_hash_v1, KeyIndexKind};
/// assert_eq!(KeyIndexKind::Hashed.hash(b"id"), key_hash(b"id"));
/// assert_eq!(KeyIndexKind::HashedV1.hash(b"id"), key_hash_v1(b"id"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyIndexKind {
    /// Linear probing from `key_hash(name) & (H - 1)`, at most [`KEY_PROBE_MAX`] slots (v2).
    Hashed,
    /// Linear probing from `key_hash_v1(name) & (H - 1)` (v1).
    HashedV1,
    /// Bisection over entries sorted by key bytes (v2).
    Sorted,
}

impl KeyIndexKind {
    /// The home-slot hash of `name` for a hashed index.
    ///
    /// ```
    /// use tessera_value::layout::{key_hash_v1, KeyIndexKind};
    /// assert_eq!(KeyIndexKind::HashedV1.hash(b"name"), key_hash_v1(b"name"));
    /// ```
    #[inline(always)]
    pub fn hash(self, name: &[u8]) -> u64 {
        match self {
            KeyIndexKind::HashedV1 => key_hash_v1(name),
            _ => key_hash(name),
        }
    }
}

/// The number type of a packed numeric array (the low three bits of its tag).
///
/// Every element of a packed array has this type; the numbers are stored little-endian, back
/// to back, starting at a position (counted from the document's first byte) that is a multiple
/// of their size, so that a document in an aligned buffer can be read as `&[f64]` in place.
///
/// ```
/// use tessera_value::layout::PackedNumber;
/// assert_eq!(PackedNumber::from_code(5), Some(PackedNumber::F64));
/// assert_eq!(PackedNumber::F64.size(), 8);
/// assert_eq!(PackedNumber::from_code(6), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PackedNumber {
    /// Signed 8-bit integers (code 0).
    I8,
    /// Signed 16-bit integers (code 1).
    I16,
    /// Signed 32-bit integers (code 2).
    I32,
    /// Signed 64-bit integers (code 3).
    I64,
    /// IEEE-754 binary32 (code 4).
    F32,
    /// IEEE-754 binary64 (code 5).
    F64,
}

impl PackedNumber {
    /// The type with this code (the low three bits of a packed tag), if it is defined.
    ///
    /// ```
    /// use tessera_value::layout::PackedNumber;
    /// assert_eq!(PackedNumber::from_code(2), Some(PackedNumber::I32));
    /// assert_eq!(PackedNumber::from_code(0x3D), Some(PackedNumber::F64)); // low three bits of a tag
    /// assert_eq!(PackedNumber::from_code(7), None);
    /// ```
    #[inline(always)]
    pub const fn from_code(code: u8) -> Option<PackedNumber> {
        match code & 7 {
            0 => Some(PackedNumber::I8),
            1 => Some(PackedNumber::I16),
            2 => Some(PackedNumber::I32),
            3 => Some(PackedNumber::I64),
            4 => Some(PackedNumber::F32),
            5 => Some(PackedNumber::F64),
            _ => None,
        }
    }

    /// The code stored in the tag.
    ///
    /// ```
    /// use tessera_value::layout::PackedNumber;
    /// assert_eq!(PackedNumber::I16.code(), 1);
    /// assert_eq!(PackedNumber::from_code(PackedNumber::F32.code()), Some(PackedNumber::F32));
    /// ```
    #[inline(always)]
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// Bytes per element: 1, 2, 4 or 8.
    ///
    /// ```
    /// use tessera_value::layout::PackedNumber;
    /// assert_eq!(PackedNumber::I8.size(), 1);
    /// assert_eq!(PackedNumber::F32.size(), 4);
    /// ```
    #[inline(always)]
    pub const fn size(self) -> usize {
        match self {
            PackedNumber::I8 => 1,
            PackedNumber::I16 => 2,
            PackedNumber::I32 | PackedNumber::F32 => 4,
            PackedNumber::I64 | PackedNumber::F64 => 8,
        }
    }

    /// True for `F32` and `F64`.
    ///
    /// ```
    /// use tessera_value::layout::PackedNumber;
    /// assert!(PackedNumber::F32.is_float());
    /// assert!(!PackedNumber::I64.is_float());
    /// ```
    #[inline(always)]
    pub const fn is_float(self) -> bool {
        matches!(self, PackedNumber::F32 | PackedNumber::F64)
    }

    /// The narrowest integer type that holds every integer in `min..=max`.
    ///
    /// ```
    /// use tessera_value::layout::PackedNumber;
    /// assert_eq!(PackedNumber::for_int_range(-128, 127), PackedNumber::I8);
    /// assert_eq!(PackedNumber::for_int_range(0, 128), PackedNumber::I16);
    /// assert_eq!(PackedNumber::for_int_range(i64::MIN, 0), PackedNumber::I64);
    /// ```
    #[inline]
    pub const fn for_int_range(min: i64, max: i64) -> PackedNumber {
        if min >= i8::MIN as i64 && max <= i8::MAX as i64 {
            PackedNumber::I8
        } else if min >= i16::MIN as i64 && max <= i16::MAX as i64 {
            PackedNumber::I16
        } else if min >= i32::MIN as i64 && max <= i32::MAX as i64 {
            PackedNumber::I32
        } else {
            PackedNumber::I64
        }
    }
}

/// Where the numbers of a packed array whose header ends at `header_end` start: the first
/// position at or after it that is a multiple of the element size. The bytes skipped are zero.
///
/// ```
/// use tessera_value::layout::{packed_data_start, PackedNumber};
/// assert_eq!(packed_data_start(3, PackedNumber::F64), 8);
/// assert_eq!(packed_data_start(8, PackedNumber::F64), 8);
/// assert_eq!(packed_data_start(3, PackedNumber::I8), 3);
/// ```
#[inline(always)]
pub const fn packed_data_start(header_end: usize, number: PackedNumber) -> usize {
    let size = number.size();
    (header_end + size - 1) & !(size - 1)
}

/// Width in bytes of a width code (0..=3 → 1, 2, 4, 8).
///
/// ```
/// use tessera_value::layout::width_of;
/// assert_eq!([0, 1, 2, 3].map(width_of), [1, 2, 4, 8]);
/// ```
#[inline(always)]
pub const fn width_of(code: u8) -> usize {
    1 << (code & 3)
}

/// The smallest width code whose width holds `value` as an unsigned integer.
///
/// ```
/// use tessera_value::layout::{width_code_for_unsigned, width_of};
/// assert_eq!(width_code_for_unsigned(255), 0);
/// assert_eq!(width_code_for_unsigned(256), 1);
/// assert_eq!(width_of(width_code_for_unsigned(1 << 40)), 8);
/// ```
#[inline]
pub const fn width_code_for_unsigned(value: u64) -> u8 {
    if value <= 0xFF {
        0
    } else if value <= 0xFFFF {
        1
    } else if value <= 0xFFFF_FFFF {
        2
    } else {
        3
    }
}

/// Reads `width` (1, 2, 4 or 8) little-endian bytes at `pos`. Panics if out of bounds.
///
/// ```
/// use tessera_value::layout::read_uint;
/// let bytes = [0xFF, 0x34, 0x12, 0x00];
/// assert_eq!(read_uint(&bytes, 1, 2), 0x1234);
/// assert_eq!(read_uint(&bytes, 0, 4), 0x0012_34FF);
/// ```
#[inline(always)]
pub fn read_uint(bytes: &[u8], pos: usize, width: usize) -> u64 {
    match width {
        1 => bytes[pos] as u64,
        2 => u16::from_le_bytes([bytes[pos], bytes[pos + 1]]) as u64,
        4 => u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap()) as u64,
        _ => u64::from_le_bytes(bytes[pos..pos + 8].try_into().unwrap()),
    }
}

/// Writes the low `width` bytes of `value`, little-endian.
///
/// ```
/// use tessera_value::layout::{read_uint, write_uint};
/// let mut out = Vec::new();
/// write_uint(&mut out, 0x0102_0304, 2);
/// assert_eq!(out, [0x04, 0x03]);
/// assert_eq!(read_uint(&out, 0, 2), 0x0304);
/// ```
#[inline(always)]
pub fn write_uint(out: &mut Vec<u8>, value: u64, width: usize) {
    out.extend_from_slice(&value.to_le_bytes()[..width]);
}

/// Sign-extends the low `width` bytes of `raw`.
///
/// ```
/// use tessera_value::layout::sign_extend;
/// assert_eq!(sign_extend(0xFF, 1), -1);
/// assert_eq!(sign_extend(0x7F, 1), 127);
/// assert_eq!(sign_extend(0xFFFE, 2), -2);
/// ```
#[inline(always)]
pub fn sign_extend(raw: u64, width: usize) -> i64 {
    let shift = 64 - 8 * width as u32;
    ((raw << shift) as i64) >> shift
}

/// Largest number of bytes an LEB128 varint for a u64 may take.
///
/// ```
/// use tessera_value::layout::{varint_len, write_varint, VARINT_LEN_MAX};
/// let mut out = Vec::new();
/// write_varint(&mut out, u64::MAX);
/// assert_eq!(out.len(), VARINT_LEN_MAX);
/// assert_eq!(varint_len(u64::MAX), VARINT_LEN_MAX);
/// ```
pub const VARINT_LEN_MAX: usize = 10;

/// Appends `value` as an unsigned LEB128 varint.
///
/// ```
/// use tessera_value::layout::write_varint;
/// let mut out = Vec::new();
/// write_varint(&mut out, 300);
/// assert_eq!(out, [0xAC, 0x02]);
/// ```
#[inline]
pub fn write_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Number of bytes `write_varint` uses for `value`.
///
/// ```
/// use tessera_value::layout::varint_len;
/// assert_eq!(varint_len(0), 1);
/// assert_eq!(varint_len(127), 1);
/// assert_eq!(varint_len(128), 2);
/// ```
#[inline]
pub const fn varint_len(value: u64) -> usize {
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Reads a varint at `pos`; returns `(value, length)`, or `None` if it runs past `end` or
/// overflows 64 bits.
///
/// ```
/// use tessera_value::layout::read_varint;
/// let bytes = [0xAC, 0x02, 0x05];
/// assert_eq!(read_varint(&bytes, 0, bytes.len()), Some((300, 2)));
/// assert_eq!(read_varint(&bytes, 0, 1), None); // runs past `end`
/// ```
#[inline]
pub fn read_varint(bytes: &[u8], pos: usize, end: usize) -> Option<(u64, usize)> {
    let first = *bytes.get(pos)?;
    if first < 0x80 && pos < end {
        return Some((first as u64, 1));
    }
    let mut value = 0u64;
    let mut shift = 0u32;
    let mut index = pos;
    loop {
        if index >= end {
            return None;
        }
        let byte = bytes[index];
        if shift == 63 && byte > 1 {
            return None;
        }
        value |= ((byte & 0x7F) as u64) << shift;
        index += 1;
        if byte < 0x80 {
            return Some((value, index - pos));
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

/// Reads a varint that the document's validation has already checked.
///
/// ```
/// use tessera_value::layout::read_varint_trusted;
/// assert_eq!(read_varint_trusted(&[0x05], 0), (5, 1));
/// assert_eq!(read_varint_trusted(&[0x00, 0xAC, 0x02], 1), (300, 2));
/// ```
#[inline(always)]
pub fn read_varint_trusted(bytes: &[u8], pos: usize) -> (u64, usize) {
    let first = bytes[pos];
    if first < 0x80 {
        return (first as u64, 1);
    }
    if let Some(&second) = bytes.get(pos + 1).filter(|&&b| b < 0x80) {
        return ((first & 0x7F) as u64 | (second as u64) << 7, 2);
    }
    read_varint(bytes, pos, bytes.len()).unwrap_or((0, 1))
}

/// Writes the header of a string (`is_string`) or binary item of `len` bytes.
///
/// ```
/// use tessera_value::layout::{write_blob_header, TAG_STRING};
/// let mut out = Vec::new();
/// write_blob_header(&mut out, 100, true);
/// assert_eq!(out, [TAG_STRING + 0x3F, 100]); // escape tag, then a varint length
/// ```
#[inline]
pub fn write_blob_header(out: &mut Vec<u8>, len: usize, is_string: bool) {
    let (base, inline_max) = if is_string { (TAG_STRING, STRING_INLINE_LEN_MAX) } else { (TAG_BINARY, BINARY_INLINE_LEN_MAX) };
    if len <= inline_max {
        out.push(base + len as u8);
    } else {
        out.push(base + inline_max as u8 + 1);
        write_varint(out, len as u64);
    }
}

/// Bytes needed by a slot for an inline signed integer of this value, or `None` if no slot
/// width can hold it (it must then be written as an item).
///
/// ```
/// use tessera_value::layout::int_slot_width;
/// assert_eq!(int_slot_width(15), Some(1));
/// assert_eq!(int_slot_width(16), Some(2));
/// assert_eq!(int_slot_width(-(1 << 28)), Some(4));
/// assert_eq!(int_slot_width(i64::MAX), None);
/// ```
#[inline]
pub const fn int_slot_width(value: i64) -> Option<usize> {
    // payload bits = 8 * width - 3, signed.
    if value >= -16 && value < 16 {
        Some(1)
    } else if value >= -(1 << 12) && value < (1 << 12) {
        Some(2)
    } else if value >= -(1 << 28) && value < (1 << 28) {
        Some(4)
    } else if value >= -(1 << 60) && value < (1 << 60) {
        Some(8)
    } else {
        None
    }
}

/// Bytes needed by a slot for an unsigned payload shifted left by `shift` bits.
///
/// ```
/// use tessera_value::layout::payload_width;
/// assert_eq!(payload_width(31, 3), 1); // 5 bits + 3 tag bits
/// assert_eq!(payload_width(32, 3), 2);
/// assert_eq!(payload_width(1 << 40, 1), 8);
/// ```
#[inline]
pub const fn payload_width(payload: u64, shift: u32) -> usize {
    let bits = 64 - payload.leading_zeros() + shift;
    if bits <= 8 {
        1
    } else if bits <= 16 {
        2
    } else if bits <= 32 {
        4
    } else {
        8
    }
}

/// Code (0..=3) for a width of 1, 2, 4 or 8 bytes.
///
/// ```
/// use tessera_value::layout::{code_of_width, width_of};
/// assert_eq!(code_of_width(4), 2);
/// assert_eq!(width_of(code_of_width(8)), 8);
/// ```
#[inline(always)]
pub const fn code_of_width(width: usize) -> u8 {
    match width {
        1 => 0,
        2 => 1,
        4 => 2,
        _ => 3,
    }
}

/// UTF-8 check with an inline fast path for ASCII, which most strings are.
///
/// ```
/// assert!(tessera_value::layout::is_utf8("héllo".as_bytes()));
/// assert!(!tessera_value::layout::is_utf8(&[0xC3]));
/// ```
#[inline]
pub fn is_utf8(bytes: &[u8]) -> bool {
    let mut chunks = bytes.chunks_exact(8);
    let mut high = 0u64;
    for chunk in &mut chunks {
        high |= u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
    }
    for &byte in chunks.remainder() {
        high |= byte as u64;
    }
    if high & 0x8080_8080_8080_8080 == 0 {
        return true;
    }
    simdutf8::basic::from_utf8(bytes).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trips_at_every_length_boundary() {
        for shift in 0..64 {
            for value in [(1u64 << shift) - 1, 1u64 << shift, (1u64 << shift) + 1, u64::MAX] {
                let mut out = Vec::new();
                write_varint(&mut out, value);
                assert_eq!(out.len(), varint_len(value));
                assert_eq!(read_varint(&out, 0, out.len()), Some((value, out.len())));
                // every strict prefix is rejected
                for cut in 0..out.len() {
                    assert_eq!(read_varint(&out, 0, cut), None);
                }
            }
        }
    }

    #[test]
    fn varint_rejects_overflow() {
        let eleven = [0xFFu8; 10];
        assert_eq!(read_varint(&eleven, 0, 10), None);
        let mut too_big = vec![0xFF; 9];
        too_big.push(0x02);
        assert_eq!(read_varint(&too_big, 0, 10), None);
    }

    #[test]
    fn int_slot_width_boundaries() {
        assert_eq!(int_slot_width(15), Some(1));
        assert_eq!(int_slot_width(16), Some(2));
        assert_eq!(int_slot_width(-16), Some(1));
        assert_eq!(int_slot_width(-17), Some(2));
        assert_eq!(int_slot_width(4095), Some(2));
        assert_eq!(int_slot_width(4096), Some(4));
        assert_eq!(int_slot_width((1 << 60) - 1), Some(8));
        assert_eq!(int_slot_width(1 << 60), None);
        assert_eq!(int_slot_width(i64::MIN), None);
    }

    #[test]
    fn key_hash_is_xxh3_64_with_seed_0() {
        // Values from the C reference implementation (python-xxhash 3, xxh3_64_intdigest),
        // for lengths on several of XXH3's code paths: 0, 1-3, 4-8, 17-128, 129-240, over 240.
        assert_eq!(key_hash(b""), 0x2d06_8005_38d3_94c2);
        assert_eq!(key_hash(b"a"), 0xe6c6_32b6_1e96_4e1f);
        assert_eq!(key_hash(b"abc"), 0x78af_5f94_892f_3950);
        assert_eq!(key_hash(b"user_0"), 0x9f72_f3c4_2906_06de);
        assert_eq!(key_hash(&[b'x'; 20]), 0xb506_3209_8796_72bf);
        assert_eq!(key_hash(&[b'y'; 200]), 0x78c5_ae5c_f7b1_237e);
        assert_eq!(key_hash(&[b'z'; 300]), 0x4d3f_2645_4e4c_3335);
    }

    #[test]
    fn v1_key_hash_pads_the_last_group_with_zeros() {
        // The specification in docs/format.md, computed the long way.
        fn reference(bytes: &[u8]) -> u64 {
            let mut hash = bytes.len() as u64;
            for group in bytes.chunks(8) {
                let mut padded = [0u8; 8];
                padded[..group.len()].copy_from_slice(group);
                hash = (hash.rotate_left(5) ^ u64::from_le_bytes(padded)).wrapping_mul(0x517c_c1b7_2722_0a95);
            }
            hash ^ (hash >> 32)
        }
        for text in ["", "a", "name", "12345678", "123456789", "a longer key than sixteen bytes"] {
            assert_eq!(key_hash_v1(text.as_bytes()), reference(text.as_bytes()), "{text}");
        }
    }

    #[test]
    fn sign_extension() {
        assert_eq!(sign_extend(0xF9, 1), -7);
        assert_eq!(sign_extend(0x7F, 1), 127);
        assert_eq!(sign_extend(0xFFFF, 2), -1);
        assert_eq!(sign_extend(u64::MAX, 8), -1);
    }
}
