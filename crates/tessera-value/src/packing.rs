//! The encoder's choice of a packed layout for an array it is closing.
//!
//! An array is packed when it is not empty and either
//! - every element is a number of one class: integers (all of them within i64) or floats; the
//!   vector takes the narrowest type that holds them all exactly (`F32` only when every float
//!   was stored as binary32, which the encoder does when that is lossless); or
//! - every element is a packed vector of the same class and length: the array becomes a
//!   matrix, in the widest of the rows' types.
//!
//! Arrays that mix integers and floats stay slot arrays, so a value never changes kind.
//!
//! The elements' items are the last ones the encoder wrote (children before parents, and a
//! number or a vector writes nothing else), so the packed item replaces them in place. The
//! plan checks that: the items of the elements must add up to exactly the bytes written since
//! the array was opened, or the array is not packed.

use crate::layout::{PackedNumber, TAG_F32, TAG_F64, TAG_INT, TAG_UINT, sign_extend};
use crate::packed::{self, MATRIX_ROWS_MAX, PackedValue};

/// An element of the array being closed, as the encoder's slot describes it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Element {
    /// An integer inline in its slot.
    Int(i64),
    /// An item at `pos`, of container height `height` (0 for a scalar).
    Item { pos: usize, height: u8 },
    /// Anything else (null, a boolean, an atom).
    Other,
}

/// The packed item to write.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    number: PackedNumber,
    /// Elements of a vector, rows of a matrix.
    len: usize,
    /// Columns of a matrix, 0 for a vector.
    columns: usize,
}

impl Plan {
    /// Container height of the packed item.
    pub(crate) fn height(&self) -> u8 {
        if self.columns == 0 { 1 } else { 2 }
    }
}

enum Class {
    Ints { min: i64, max: i64 },
    Floats { all_f32: bool },
    Rows { number: PackedNumber, columns: usize },
}

/// Decides whether the array whose elements are `elements` (with items at or after
/// `out_start` in `out`) can be packed; if so, leaves its numbers, row after row, in `values`.
pub(crate) fn plan(out: &[u8], out_start: usize, elements: impl Iterator<Item = Element>, values: &mut Vec<PackedValue>) -> Option<Plan> {
    values.clear();
    let mut class: Option<Class> = None;
    let mut item_bytes = 0usize;
    let mut len = 0usize;
    for element in elements {
        len += 1;
        match element {
            Element::Int(value) => {
                add_number(&mut class, PackedValue::Int(value), true)?;
                values.push(PackedValue::Int(value));
            }
            Element::Item { pos, height: 0 } if pos >= out_start => {
                let (value, is_f32, size) = scalar_item(out, pos)?;
                add_number(&mut class, value, is_f32)?;
                values.push(value);
                item_bytes += size;
            }
            Element::Item { pos, height: 1 } if pos >= out_start && packed::is_packed_tag(out[pos]) => {
                let header = packed::header_trusted(out, pos);
                if header.columns != 0 {
                    return None;
                }
                let row = packed::numbers_at(out, &header);
                match &mut class {
                    None => class = Some(Class::Rows { number: header.number, columns: row.len() }),
                    Some(Class::Rows { number, columns }) => {
                        if *columns != row.len() || number.is_float() != header.number.is_float() {
                            return None;
                        }
                        *number = (*number).max(header.number);
                    }
                    Some(_) => return None,
                }
                values.extend((0..row.len()).map(|index| row.element(index).expect("index below len")));
                item_bytes += header.data + row.as_bytes().len() - pos;
            }
            _ => return None,
        }
    }
    if len == 0 || item_bytes != out.len() - out_start {
        return None;
    }
    let plan = match class? {
        Class::Ints { min, max } => Plan { number: PackedNumber::for_int_range(min, max), len, columns: 0 },
        Class::Floats { all_f32 } => Plan { number: if all_f32 { PackedNumber::F32 } else { PackedNumber::F64 }, len, columns: 0 },
        Class::Rows { number, columns } => {
            if columns == 0 || len as u64 > MATRIX_ROWS_MAX {
                return None;
            }
            Plan { number, len, columns }
        }
    };
    Some(plan)
}

/// The packed vector for `values`, numbers the caller has in hand (not yet written): `None`
/// if they are empty or mix integers and floats.
pub(crate) fn plan_numbers(values: &[PackedValue]) -> Option<Plan> {
    let mut class: Option<Class> = None;
    for &value in values {
        let is_f32 = match value {
            PackedValue::Float(v) => (v as f32 as f64).to_bits() == v.to_bits(),
            PackedValue::Int(_) => true,
        };
        add_number(&mut class, value, is_f32)?;
    }
    let number = match class? {
        Class::Ints { min, max } => PackedNumber::for_int_range(min, max),
        Class::Floats { all_f32: true } => PackedNumber::F32,
        Class::Floats { all_f32: false } => PackedNumber::F64,
        Class::Rows { .. } => unreachable!("numbers have no rows"),
    };
    Some(Plan { number, len: values.len(), columns: 0 })
}

/// Folds one number into the array's class; `None` if it does not fit the class.
#[inline(always)]
fn add_number(class: &mut Option<Class>, value: PackedValue, is_f32: bool) -> Option<()> {
    match (class.as_mut(), value) {
        (None, PackedValue::Int(v)) => *class = Some(Class::Ints { min: v, max: v }),
        (None, PackedValue::Float(_)) => *class = Some(Class::Floats { all_f32: is_f32 }),
        (Some(Class::Ints { min, max }), PackedValue::Int(v)) => {
            *min = (*min).min(v);
            *max = (*max).max(v);
        }
        (Some(Class::Floats { all_f32 }), PackedValue::Float(_)) => *all_f32 &= is_f32,
        _ => return None,
    }
    Some(())
}

/// The number held by the scalar item at `pos`: its value, whether it is a binary32, and the
/// item's size. `None` for other items and for unsigned integers above `i64::MAX`.
#[inline(always)]
fn scalar_item(out: &[u8], pos: usize) -> Option<(PackedValue, bool, usize)> {
    let tag = out[pos];
    match tag {
        TAG_F32 => Some((PackedValue::Float(f32::from_le_bytes(out[pos + 1..pos + 5].try_into().ok()?) as f64), true, 5)),
        TAG_F64 => Some((PackedValue::Float(f64::from_le_bytes(out[pos + 1..pos + 9].try_into().ok()?)), false, 9)),
        _ if tag & !7 == TAG_INT || tag & !7 == TAG_UINT => {
            let width = (tag & 7) as usize + 1;
            let mut raw = [0u8; 8];
            raw[..width].copy_from_slice(&out[pos + 1..pos + 1 + width]);
            let raw = u64::from_le_bytes(raw);
            let value = if tag & !7 == TAG_INT { sign_extend(raw, width) } else { i64::try_from(raw).ok()? };
            Some((PackedValue::Int(value), false, 1 + width))
        }
        _ => None,
    }
}

/// Appends the packed item `plan` describes, holding `values`, at the end of `out` (whose
/// length is the item's position in the document).
pub(crate) fn write(out: &mut Vec<u8>, plan: &Plan, values: &[PackedValue]) {
    debug_assert_eq!(values.len(), if plan.columns == 0 { plan.len } else { plan.len * plan.columns });
    packed::write_header(out, out.len(), plan.number, plan.len, plan.columns);
    // One loop per type, so that each is a plain copy the compiler can unroll.
    let int = |value: &PackedValue| match *value {
        PackedValue::Int(v) => v,
        PackedValue::Float(v) => unreachable!("the plan packs {v} with integers"),
    };
    let float = |value: &PackedValue| match *value {
        PackedValue::Float(v) => v,
        PackedValue::Int(v) => unreachable!("the plan packs {v} with floats"),
    };
    match plan.number {
        PackedNumber::I8 => out.extend(values.iter().map(|v| int(v) as i8 as u8)),
        PackedNumber::I16 => extend_le(out, values.iter().map(|v| (int(v) as i16).to_le_bytes())),
        PackedNumber::I32 => extend_le(out, values.iter().map(|v| (int(v) as i32).to_le_bytes())),
        PackedNumber::I64 => extend_le(out, values.iter().map(|v| int(v).to_le_bytes())),
        PackedNumber::F32 => extend_le(out, values.iter().map(|v| (float(v) as f32).to_le_bytes())),
        PackedNumber::F64 => extend_le(out, values.iter().map(|v| float(v).to_le_bytes())),
    }
}

/// Appends fixed-size little-endian encodings.
#[inline(always)]
fn extend_le<const N: usize>(out: &mut Vec<u8>, encodings: impl ExactSizeIterator<Item = [u8; N]>) {
    let start = out.len();
    out.resize(start + encodings.len() * N, 0);
    for (chunk, bytes) in out[start..].chunks_exact_mut(N).zip(encodings) {
        chunk.copy_from_slice(&bytes);
    }
}
