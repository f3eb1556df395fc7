//! Packed numeric arrays (`docs/format.md`, "Packed numeric arrays"): the header that the
//! reader, the validator and the encoder share, and [`Numbers`], the typed view of a vector.
//!
//! A *vector* holds `count` numbers of one [`PackedNumber`] type; a *matrix* holds `rows`
//! vectors of `columns` numbers each, row after row. Either way the numbers start at a multiple
//! of their size from the document's first byte, so a document in an aligned buffer (any `Vec`
//! from the global allocator) can be read as `&[f64]` or `&[i32]` in place.

use crate::error::FormatError;
use crate::layout::{PACKED_MATRIX, PackedNumber, TAG_PACKED, packed_data_start, read_varint, read_varint_trusted, write_varint};

/// Most rows a matrix may have (a row is addressed with a `u32`).
///
/// ```
/// use tessera_value::MATRIX_ROWS_MAX;
/// assert_eq!(MATRIX_ROWS_MAX, u32::MAX as u64);
/// let bytes = tessera_value::from_json(b"[[1, 2], [3, 4], [5, 6]]").unwrap();
/// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
/// assert!(root.len() as u64 <= MATRIX_ROWS_MAX);
/// assert_eq!(root.index(2).unwrap().as_array().unwrap().numbers().unwrap().to_i64_vec(), Some(vec![5, 6]));
/// ```
pub const MATRIX_ROWS_MAX: u64 = u32::MAX as u64;

/// A packed item's header, read from its tag onwards.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Header {
    pub(crate) number: PackedNumber,
    /// Columns of a matrix, 0 for a vector.
    pub(crate) columns: usize,
    /// Elements of a vector, or rows of a matrix.
    pub(crate) len: usize,
    /// Position of the first number.
    pub(crate) data: usize,
}

impl Header {
    /// Number of stored numbers.
    #[inline(always)]
    pub(crate) fn numbers(&self) -> usize {
        if self.columns == 0 { self.len } else { self.len * self.columns }
    }

    /// Items a reader walks: the item, each row of a matrix, and each number.
    pub(crate) fn expanded_items(&self) -> u64 {
        let rows = if self.columns == 0 { 0 } else { self.len as u64 };
        1 + rows + self.numbers() as u64
    }
}

/// True for a tag byte of a packed item (defined number code, vector or matrix).
#[inline(always)]
pub(crate) fn is_packed_tag(tag: u8) -> bool {
    tag & 0xF0 == TAG_PACKED && PackedNumber::from_code(tag).is_some()
}

/// Reads the header of a packed item that validation (or the encoder) has vouched for. On
/// corrupt trusted bytes it returns a header whose data may lie past the end; [`numbers_at`]
/// then yields an empty view.
#[inline(always)]
pub(crate) fn header_trusted(bytes: &[u8], pos: usize) -> Header {
    let tag = bytes[pos];
    let number = PackedNumber::from_code(tag).unwrap_or(PackedNumber::I8);
    let (first, used) = read_varint_trusted(bytes, pos + 1);
    // Clamped, so that corrupt trusted bytes never ask for absurd sizes.
    let first = first.min(bytes.len() as u64) as usize;
    if tag & PACKED_MATRIX == 0 {
        return Header { number, columns: 0, len: first, data: packed_data_start(pos + 1 + used, number) };
    }
    let (columns, used_columns) = read_varint_trusted(bytes, pos + 1 + used);
    let columns = columns.clamp(1, bytes.len().max(1) as u64) as usize;
    Header { number, columns, len: first, data: packed_data_start(pos + 1 + used + used_columns, number) }
}

/// Reads and checks the header of the packed item at `pos` of the value region `[0, end)`:
/// defined number type, at least one element (one row and one column for a matrix), zero
/// padding, numbers inside the region. Returns the header and the position after the item.
pub(crate) fn header_checked(bytes: &[u8], pos: usize, end: usize) -> Result<(Header, usize), FormatError> {
    let tag = bytes[pos];
    let number = PackedNumber::from_code(tag).ok_or(FormatError::BadTag { offset: pos, tag })?;
    let bad = FormatError::BadLength { offset: pos };
    let (len, used) = read_varint(bytes, pos + 1, end).ok_or(bad.clone())?;
    let mut header_end = pos + 1 + used;
    let mut columns = 0u64;
    if tag & PACKED_MATRIX != 0 {
        let (value, used) = read_varint(bytes, header_end, end).ok_or(bad.clone())?;
        columns = value;
        header_end += used;
        if columns == 0 || len > MATRIX_ROWS_MAX {
            return Err(bad);
        }
    }
    if len == 0 {
        return Err(bad);
    }
    let data = packed_data_start(header_end, number);
    if data > end || bytes[header_end..data].iter().any(|&byte| byte != 0) {
        return Err(bad);
    }
    let numbers = (len as u128) * (columns.max(1) as u128);
    if numbers * number.size() as u128 > (end - data) as u128 {
        return Err(bad);
    }
    let header = Header { number, columns: columns as usize, len: len as usize, data };
    Ok((header, data + header.numbers() * number.size()))
}

/// The numbers of the packed item at `pos` (all rows of a matrix).
#[inline(always)]
pub(crate) fn numbers_at<'a>(bytes: &'a [u8], header: &Header) -> Numbers<'a> {
    let size = header.number.size();
    let data = header.data.checked_add(header.numbers().saturating_mul(size)).and_then(|end| bytes.get(header.data..end));
    Numbers { data: data.unwrap_or(&[]), number: header.number }
}

/// Appends a packed item's header and the zero padding after it; `pos` is the item's position
/// in the document (`out.len()` when no earlier bytes are missing).
pub(crate) fn write_header(out: &mut Vec<u8>, doc_pos: usize, number: PackedNumber, len: usize, columns: usize) {
    let start = out.len();
    if columns == 0 {
        out.push(TAG_PACKED | number.code());
        write_varint(out, len as u64);
    } else {
        out.push(TAG_PACKED | PACKED_MATRIX | number.code());
        write_varint(out, len as u64);
        write_varint(out, columns as u64);
    }
    let header_end = doc_pos + (out.len() - start);
    out.resize(out.len() + (packed_data_start(header_end, number) - header_end), 0);
}

/// One number on its way into a packed array.
#[derive(Clone, Copy, Debug)]
pub(crate) enum PackedValue {
    Int(i64),
    Float(f64),
}

/// The numbers of a packed vector (or of one row of a matrix), in place.
///
/// Read any element as `f64` or `i64`, copy them out, or, when the document's buffer puts them
/// at an aligned address on a little-endian machine, borrow them as a slice of their own type
/// with no copy at all.
///
/// ```
/// use tessera_value::{from_json, layout::PackedNumber, Doc};
/// let bytes = from_json(b"[0.5, 1.25, 2.75]").unwrap();
/// let doc = Doc::from_untrusted(&bytes).unwrap();
/// let numbers = doc.root().as_array().unwrap().numbers().unwrap();
/// assert_eq!(numbers.number_type(), PackedNumber::F32);
/// assert_eq!(numbers.to_f64_vec(), [0.5, 1.25, 2.75]);
/// assert_eq!(numbers.get_f64(1), Some(1.25));
/// ```
#[derive(Clone, Copy)]
pub struct Numbers<'a> {
    data: &'a [u8],
    number: PackedNumber,
}

impl std::fmt::Debug for Numbers<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Numbers").field("number", &self.number).field("len", &self.len()).finish()
    }
}

impl<'a> Numbers<'a> {
    /// The view of `len` numbers of type `number` starting at `data` (a row of a matrix).
    #[inline(always)]
    pub(crate) fn slice(&self, first: usize, len: usize) -> Numbers<'a> {
        let size = self.number.size();
        let data = self.data.get(first * size..(first + len) * size).unwrap_or(&[]);
        Numbers { data, number: self.number }
    }

    /// The type every element has.
    ///
    /// ```
    /// use tessera_value::layout::PackedNumber;
    /// let bytes = tessera_value::from_json(b"[1, 70000]").unwrap();
    /// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
    /// let numbers = doc.root().as_array().unwrap().numbers().unwrap();
    /// assert_eq!(numbers.number_type(), PackedNumber::I32);
    /// ```
    #[inline]
    pub fn number_type(&self) -> PackedNumber {
        self.number
    }

    /// Number of elements.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(b"[1, 2, 3]").unwrap();
    /// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
    /// let numbers = doc.root().as_array().unwrap().numbers().unwrap();
    /// assert_eq!(numbers.len(), 3);
    /// ```
    #[inline]
    pub fn len(&self) -> usize {
        self.data.len() / self.number.size()
    }

    /// True if there are no elements.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(b"[0.5]").unwrap();
    /// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
    /// let numbers = doc.root().as_array().unwrap().numbers().unwrap();
    /// assert!(!numbers.is_empty());
    /// ```
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Element `index` as an integer (`None` past the end, or for a float type).
    ///
    /// ```
    /// let bytes = tessera_value::from_json(b"[-5, 300]").unwrap();
    /// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
    /// let numbers = doc.root().as_array().unwrap().numbers().unwrap();
    /// assert_eq!(numbers.get_i64(1), Some(300));
    /// assert_eq!(numbers.get_i64(2), None);
    /// ```
    #[inline]
    pub fn get_i64(&self, index: usize) -> Option<i64> {
        match self.element(index)? {
            PackedValue::Int(value) => Some(value),
            PackedValue::Float(_) => None,
        }
    }

    /// Element `index` as a double (integers converted, possibly rounded beyond 2^53).
    ///
    /// ```
    /// let bytes = tessera_value::from_json(b"[7, 8]").unwrap();
    /// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
    /// let numbers = doc.root().as_array().unwrap().numbers().unwrap();
    /// assert_eq!(numbers.get_f64(0), Some(7.0)); // integers are converted
    /// assert_eq!(numbers.get_f64(2), None);
    /// ```
    #[inline]
    pub fn get_f64(&self, index: usize) -> Option<f64> {
        Some(match self.element(index)? {
            PackedValue::Int(value) => value as f64,
            PackedValue::Float(value) => value,
        })
    }

    #[inline(always)]
    pub(crate) fn element(&self, index: usize) -> Option<PackedValue> {
        let size = self.number.size();
        let at = index.checked_mul(size)?;
        let bytes = self.data.get(at..at + size)?;
        Some(match self.number {
            PackedNumber::I8 => PackedValue::Int(bytes[0] as i8 as i64),
            PackedNumber::I16 => PackedValue::Int(i16::from_le_bytes([bytes[0], bytes[1]]) as i64),
            PackedNumber::I32 => PackedValue::Int(i32::from_le_bytes(bytes.try_into().expect("4 bytes")) as i64),
            PackedNumber::I64 => PackedValue::Int(i64::from_le_bytes(bytes.try_into().expect("8 bytes"))),
            PackedNumber::F32 => PackedValue::Float(f32::from_le_bytes(bytes.try_into().expect("4 bytes")) as f64),
            PackedNumber::F64 => PackedValue::Float(f64::from_le_bytes(bytes.try_into().expect("8 bytes"))),
        })
    }

    /// Every element as a double.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(b"[1.5, 2.5]").unwrap();
    /// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
    /// let numbers = doc.root().as_array().unwrap().numbers().unwrap();
    /// assert_eq!(numbers.iter_f64().sum::<f64>(), 4.0);
    /// ```
    pub fn iter_f64(&self) -> impl ExactSizeIterator<Item = f64> + 'a + use<'a> {
        let numbers = *self;
        (0..numbers.len()).map(move |index| numbers.get_f64(index).expect("index below len"))
    }

    /// Every element as a double, copied into a new vector.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(b"[0.25, 4.5]").unwrap();
    /// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
    /// let numbers = doc.root().as_array().unwrap().numbers().unwrap();
    /// assert_eq!(numbers.to_f64_vec(), [0.25, 4.5]);
    /// ```
    pub fn to_f64_vec(&self) -> Vec<f64> {
        if let Some(slice) = self.as_f64s() {
            return slice.to_vec();
        }
        self.iter_f64().collect()
    }

    /// Every element as an integer, or `None` for a float type.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(b"[-1, 1]").unwrap();
    /// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
    /// let numbers = doc.root().as_array().unwrap().numbers().unwrap();
    /// assert_eq!(numbers.to_i64_vec(), Some(vec![-1, 1]));
    /// ```
    pub fn to_i64_vec(&self) -> Option<Vec<i64>> {
        if self.number.is_float() {
            return None;
        }
        Some((0..self.len()).map(|index| self.get_i64(index).expect("index below len")).collect())
    }

    /// The raw little-endian bytes of the elements.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(b"[1, 258]").unwrap();
    /// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
    /// let numbers = doc.root().as_array().unwrap().numbers().unwrap();
    /// assert_eq!(numbers.as_bytes(), [1, 0, 2, 1]); // two little-endian i16s
    /// ```
    #[inline]
    pub fn as_bytes(&self) -> &'a [u8] {
        self.data
    }

    /// The elements as `&[f64]`, with no copy, if they are `F64` and their address is aligned
    /// (and the machine is little-endian).
    ///
    /// ```
    /// let bytes = tessera_value::from_json(b"[0.1, 0.2]").unwrap();
    /// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
    /// let numbers = doc.root().as_array().unwrap().numbers().unwrap();
    /// assert_eq!(numbers.as_f64s(), Some(&[0.1, 0.2][..]));
    /// assert_eq!(numbers.as_f32s(), None);
    /// ```
    #[inline]
    pub fn as_f64s(&self) -> Option<&'a [f64]> {
        self.cast(PackedNumber::F64)
    }

    /// The elements as `&[f32]` in place; see [`Numbers::as_f64s`].
    ///
    /// ```
    /// let bytes = tessera_value::from_json(b"[0.5, 1.5]").unwrap();
    /// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
    /// let numbers = doc.root().as_array().unwrap().numbers().unwrap();
    /// assert_eq!(numbers.as_f32s(), Some(&[0.5f32, 1.5][..]));
    /// ```
    #[inline]
    pub fn as_f32s(&self) -> Option<&'a [f32]> {
        self.cast(PackedNumber::F32)
    }

    /// The elements as `&[i32]` in place; see [`Numbers::as_f64s`].
    ///
    /// ```
    /// let bytes = tessera_value::from_json(b"[70000, -70000]").unwrap();
    /// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
    /// let numbers = doc.root().as_array().unwrap().numbers().unwrap();
    /// assert_eq!(numbers.as_i32s(), Some(&[70000, -70000][..]));
    /// ```
    #[inline]
    pub fn as_i32s(&self) -> Option<&'a [i32]> {
        self.cast(PackedNumber::I32)
    }

    /// The elements as `&[i64]` in place; see [`Numbers::as_f64s`].
    ///
    /// ```
    /// let bytes = tessera_value::from_json(b"[1099511627776, 1]").unwrap();
    /// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
    /// let numbers = doc.root().as_array().unwrap().numbers().unwrap();
    /// assert_eq!(numbers.as_i64s(), Some(&[1 << 40, 1][..]));
    /// ```
    #[inline]
    pub fn as_i64s(&self) -> Option<&'a [i64]> {
        self.cast(PackedNumber::I64)
    }

    /// The elements as `&[i16]` in place; see [`Numbers::as_f64s`].
    ///
    /// ```
    /// let bytes = tessera_value::from_json(b"[1000, 2000]").unwrap();
    /// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
    /// let numbers = doc.root().as_array().unwrap().numbers().unwrap();
    /// assert_eq!(numbers.as_i16s(), Some(&[1000i16, 2000][..]));
    /// ```
    #[inline]
    pub fn as_i16s(&self) -> Option<&'a [i16]> {
        self.cast(PackedNumber::I16)
    }

    /// The elements as `&[i8]` (always possible for `I8`).
    ///
    /// ```
    /// let bytes = tessera_value::from_json(b"[1, -2]").unwrap();
    /// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
    /// let numbers = doc.root().as_array().unwrap().numbers().unwrap();
    /// assert_eq!(numbers.as_i8s(), Some(&[1i8, -2][..]));
    /// assert_eq!(numbers.as_i16s(), None);
    /// ```
    #[inline]
    pub fn as_i8s(&self) -> Option<&'a [i8]> {
        self.cast(PackedNumber::I8)
    }

    #[inline(always)]
    fn cast<T: bytemuck::Pod>(&self, number: PackedNumber) -> Option<&'a [T]> {
        if self.number != number || cfg!(target_endian = "big") {
            return None;
        }
        // `try_cast_slice` checks the address's alignment and that the length is a multiple of
        // the element size; every bit pattern is a valid number of these types.
        bytemuck::try_cast_slice(self.data).ok()
    }
}
