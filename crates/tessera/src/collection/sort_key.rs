//! Order-preserving bytes for a field's value, used by index entries and by `order by`: two
//! encodings compare as the values do under the query language's order.
//!
//! A component is a class tag and the value: NULL (missing or null) `0x00` sorts first; then
//! booleans `0x01`; numbers `0x02` (see "Numbers" below); strings `0x03` (escaped and
//! terminated, so components concatenate); everything else `0x04`. An enum's variant is its
//! name, a string, whether the variant is a unit (`"Red"`) or carries a payload
//! (`{"Image": …}`). Descending components
//! invert every byte after the tag: the order within a class reverses, and classes keep theirs.
//!
//! **Numbers** (storage format 7). A number component is 17 bytes:
//!
//! ```text
//! 02 · f64 key of F (8 bytes) · i64 key of R (8 bytes)
//! ```
//!
//! where `F` is the value rounded to the nearest `f64` (as the query language's `as f64`
//! rounds it; `-0.0` is `0.0`) and `R` the *residual*, the exact value minus `F`, computed in
//! `i128`: `0` for a float (it is its own `f64`) and for every integer of magnitude up to
//! 2^53; at most [`RESIDUAL_ABS_MAX`] (1024, half the `f64` spacing just below 2^64) for any
//! `i64` or `u64`. Keys are compared as bytes, so the order is `F` first, then `R`. Rounding to
//! nearest is monotone, so two numbers with different `F` are in the order of their `F`; with
//! one `F`, the exact values are `F + R`, in the order of `R`. The component order is
//! therefore the exact order of the numbers' values, whatever their kinds: `3` and `3.0` are
//! one component, `u64::MAX - 1` sorts below `u64::MAX` (both round to 2^64, with `R` of -2
//! and -1), and the float 2^63 below the integer 2^63 + 1. NaN has `F` above infinity and
//! `R = 0`. An alternative, an exact 16-byte integer after `F`, would need 8 more bytes per
//! entry for the same order; the residual keeps the 17-byte shape of formats up to 6.
//!
//! The query language compares numbers by their exact values too (`crate::query` eval), so a
//! component's order is the evaluator's: equal components are equal values, and the other
//! way round. An index range for a number comparison is still bounded on the first 9 bytes
//! (the tag and `F`), inclusively, with the filter deciding (see [`literal_range`]), so that
//! format-6 entries read by `Db::check` and the range code share one shape.
//!
//! Formats up to 6 stored the exact value as an `i64` key in the place of `R`, saturated for
//! integers above `i64::MAX` and for floats beyond the `i64` range: `u64::MAX` and
//! `u64::MAX - 1` were one component. The `F` part has not changed, so a format-6 entry
//! still answers every range and equality lookup (they read `F` only); the migration to
//! format 7 rebuilds every index's entries (`collection::upgrade_keyspace`).
//!
//! **NULL in an order.** Index entries always encode NULL as `0x00`, first. An `order by` key
//! puts NULLs where its [`crate::query::Nulls`] says: first as `0x00`, last as
//! [`TAG_NULL_LAST`] (`0xFF`, above every class tag) in in-memory sort keys and live results;
//! an index walk reads the NULL entries before or after the others to match.
//!
//! **Truncated strings.** An index entry is a key, and keys hold at most 511 bytes. A string
//! component whose escaped bytes are longer than [`STRING_PREFIX_LEN_MAX`] (256) may be stored
//! in an index entry in its *truncated* form (see [`truncated`]; `build::entry_key` decides
//! when):
//!
//! ```text
//! full      = 03 · escape(s) · 00 01
//! truncated = 03 · escape(P) · 00 02 · XXH3-64(s), 8 bytes big-endian
//! ```
//!
//! where `P` is the longest start of `s` whose escaped bytes fit in 256 (255 when the next
//! byte is a NUL, escaped as two bytes). `00 02` cannot occur inside escaped bytes, and sorts
//! after `00 01` (the string `P` itself) and before `00 FF` (an escaped NUL) and every other
//! byte: a truncated component sorts after `P` and before every other string that starts
//! with `P`, so against every string that does not start with `P` it sorts as `s` does. Only
//! strings that start with `P` can be out of order, and every such entry agrees with it on its
//! first [`STRING_GROUP_LEN`] escaped bytes ([`string_group`]): a walk in index order sorts
//! each run of entries with one group that holds a truncated entry by the records' values.
//! In-memory sort keys, live results and query constants always use the full form.

use crate::query::{CompareOp, FieldPath, Literal};
use crate::store::key::KeyPart;
use tessera_value::{Kind, Value};
use xxhash_rust::xxh3::xxh3_64;

pub(crate) const TAG_NULL: u8 = 0x00;
pub(crate) const TAG_BOOL: u8 = 0x01;
pub(crate) const TAG_NUMBER: u8 = 0x02;
pub(crate) const TAG_STRING: u8 = 0x03;
pub(crate) const TAG_OTHER: u8 = 0x04;
/// NULL in an order key whose NULLs go last: above every class tag. Never in an index entry.
pub(crate) const TAG_NULL_LAST: u8 = 0xFF;

/// One key of an order, ready to encode: a resolved path, a direction, and where NULLs go.
#[derive(Debug, Clone)]
pub(crate) struct SortField {
    pub(crate) path: FieldPath,
    pub(crate) descending: bool,
    pub(crate) nulls_last: bool,
}

impl SortField {
    pub(crate) fn of(key: &crate::query::OrderKey) -> SortField {
        SortField { path: FieldPath::new(&key.path), descending: key.is_descending(), nulls_last: key.is_nulls_last() }
    }
}

/// The most escaped string bytes a truncated component keeps (see the module doc).
pub(crate) const STRING_PREFIX_LEN_MAX: usize = 256;
/// The escaped string bytes every truncated component keeps at least (one less than
/// [`STRING_PREFIX_LEN_MAX`] when the prefix stops before an escaped NUL): the width of a
/// [`string_group`].
pub(crate) const STRING_GROUP_LEN: usize = STRING_PREFIX_LEN_MAX - 1;
/// What follows a truncated component's escaped prefix, where a full one has its terminator
/// `00 01`.
const TRUNCATED_MARKER: [u8; 2] = [0x00, 0x02];
/// Bytes of the whole string's hash at the end of a truncated component.
const STRING_HASH_LEN: usize = 8;

/// The most a number component's residual can be from zero: half the spacing of `f64`s just
/// below 2^64, the widest gap an `i64` or `u64` falls in.
pub(crate) const RESIDUAL_ABS_MAX: u64 = 1 << 10;

/// Bytes of a number component: the tag, the `f64` part and the residual.
pub(crate) const NUMBER_LEN: usize = 1 + 8 + 8;

/// 2^64, the `f64` every integer near the top of `u64` rounds to.
const TWO_POW_64: f64 = 18446744073709551616.0;

/// Appends a number component: its `f64` part (`rounded`) and the exact value minus it.
fn number(rounded: f64, residual: i64, out: &mut Vec<u8>) {
    assert!(residual.unsigned_abs() <= RESIDUAL_ABS_MAX, "an integer is within half an f64 step of its rounding");
    assert!(residual == 0 || rounded.is_finite(), "only a finite f64 rounds an integer");
    out.push(TAG_NUMBER);
    // -0.0 and 0.0 are equal to the query language; the key must agree.
    let rounded = if rounded == 0.0 { 0.0 } else { rounded };
    rounded.encode_key(out);
    residual.encode_key(out);
}

/// Appends the component of an integer: its rounding to `f64` (`rounded`, as `as f64` gives
/// it for the integer's own type) and the exact rest.
fn integer(exact: i128, rounded: f64, out: &mut Vec<u8>) {
    // Every f64 at or beyond 2^53 is an integer, and below it the rounding is exact: `rounded`
    // converts to i128 without loss.
    let residual = exact - rounded as i128;
    let residual = i64::try_from(residual).expect("a residual is within RESIDUAL_ABS_MAX");
    number(rounded, residual, out);
}

/// Appends the component of a float: it is its own `f64` part.
fn float(value: f64, out: &mut Vec<u8>) {
    number(value, 0, out);
}

fn string(text: &str, out: &mut Vec<u8>) {
    out.push(TAG_STRING);
    text.encode_key(out);
}

/// How a number component ends, after its `f64` part: what storage formats wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NumberLayout {
    /// Storage format 7: the residual (see the module doc, "Numbers").
    Residual,
    /// Storage formats up to 6: the value as an `i64`, saturated (and a float truncated).
    /// Only read, by `Db::check` on a read-only handle of such a file, never written.
    SaturatedI64,
}

/// Appends a number component as storage formats up to 6 wrote it ([`NumberLayout::SaturatedI64`]).
fn number_saturated(rounded: f64, saturated: i64, out: &mut Vec<u8>) {
    out.push(TAG_NUMBER);
    let rounded = if rounded == 0.0 { 0.0 } else { rounded };
    rounded.encode_key(out);
    saturated.encode_key(out);
}

/// Appends the component for a field's value (`None` when the field is missing).
pub(crate) fn encode_value(value: Option<Value<'_>>, out: &mut Vec<u8>) {
    encode_value_in(value, NumberLayout::Residual, out);
}

/// [`encode_value`] with numbers in `layout`.
pub(crate) fn encode_value_in(value: Option<Value<'_>>, layout: NumberLayout, out: &mut Vec<u8>) {
    let Some(value) = value else {
        out.push(TAG_NULL);
        return;
    };
    match value.kind() {
        Kind::Null => out.push(TAG_NULL),
        Kind::Bool => {
            out.push(TAG_BOOL);
            out.push(value.as_bool().unwrap_or(false) as u8);
        }
        Kind::Int => {
            let int = value.as_i64().unwrap_or(0);
            match layout {
                NumberLayout::Residual => integer(i128::from(int), int as f64, out),
                NumberLayout::SaturatedI64 => number_saturated(int as f64, int, out),
            }
        }
        Kind::UInt => {
            let uint = value.as_u64().unwrap_or(0);
            match layout {
                NumberLayout::Residual => integer(i128::from(uint), uint as f64, out),
                NumberLayout::SaturatedI64 => number_saturated(uint as f64, i64::try_from(uint).unwrap_or(i64::MAX), out),
            }
        }
        Kind::Float => {
            let value = value.as_f64().unwrap_or(f64::NAN);
            match layout {
                NumberLayout::Residual => float(value, out),
                // `as` saturates, and NaN becomes 0.
                NumberLayout::SaturatedI64 => number_saturated(value, value as i64, out),
            }
        }
        Kind::String => string(value.as_str().unwrap_or(""), out),
        Kind::Dict => match value.as_dict().filter(|dict| dict.len() == 1).and_then(|dict| dict.entry(0)) {
            Some((variant, _)) => string(variant, out),
            None => out.push(TAG_OTHER),
        },
        Kind::Binary | Kind::Array => out.push(TAG_OTHER),
    }
}

/// Appends the component for a query constant.
pub(crate) fn encode_literal(literal: &Literal, out: &mut Vec<u8>) {
    match literal {
        Literal::Null => out.push(TAG_NULL),
        Literal::Bool(b) => {
            out.push(TAG_BOOL);
            out.push(*b as u8);
        }
        Literal::Int(int) => integer(i128::from(*int), *int as f64, out),
        Literal::UInt(uint) => integer(i128::from(*uint), *uint as f64, out),
        Literal::Float(value) => float(*value, out),
        Literal::Str(text) => string(text, out),
    }
}

/// The class tag a literal's component starts with.
pub(crate) fn literal_tag(literal: &Literal) -> u8 {
    match literal {
        Literal::Null => TAG_NULL,
        Literal::Bool(_) => TAG_BOOL,
        Literal::Int(_) | Literal::UInt(_) | Literal::Float(_) => TAG_NUMBER,
        Literal::Str(_) => TAG_STRING,
    }
}

/// Appends the component for `value` in the given direction, with NULL first (`0x00`) or
/// last ([`TAG_NULL_LAST`]).
pub(crate) fn encode_ordered(value: Option<Value<'_>>, descending: bool, nulls_last: bool, out: &mut Vec<u8>) {
    let start = out.len();
    encode_value(value, out);
    if out[start] == TAG_NULL {
        debug_assert_eq!(out.len(), start + 1, "NULL is its tag alone");
        if nulls_last {
            out[start] = TAG_NULL_LAST;
        }
        return;
    }
    if descending {
        // Inverting a prefix-free encoding reverses its order and keeps it prefix-free.
        for byte in &mut out[start + 1..] {
            *byte = !*byte;
        }
    }
}

/// A record's sort key for an order (each field's component in its direction, NULL where
/// the key puts it), followed by its primary key; without the record, the key alone.
pub(crate) fn encode_record(orders: &[SortField], record: Option<Value<'_>>, key: &[u8], out: &mut Vec<u8>) {
    if let Some(record) = record {
        for order in orders {
            encode_ordered(order.path.lookup(record), order.descending, order.nulls_last, out);
        }
    }
    out.extend_from_slice(key);
}

/// The component prefix of every string that starts with `prefix`.
pub(crate) fn string_prefix(prefix: &str) -> Vec<u8> {
    let mut out = vec![TAG_STRING];
    out.extend_from_slice(&crate::store::key::part_prefix(prefix.as_bytes()));
    out
}

/// The truncated form of a full string component (`03 · escape(s) · 00 01`, as
/// [`encode_value`] writes it): the tag, the longest start of `s` whose escaped bytes fit in
/// [`STRING_PREFIX_LEN_MAX`], `00 02`, and XXH3-64 of all of `s` (big-endian). `None` when
/// `component` is not a string, or not longer than what a truncated form would keep.
pub(crate) fn truncated(component: &[u8]) -> Option<Vec<u8>> {
    let (&TAG_STRING, escaped) = component.split_first()? else { return None };
    if escaped.len() <= STRING_PREFIX_LEN_MAX + 2 {
        return None;
    }
    let (text, []) = crate::store::key::decode_bytes(escaped)? else { return None };
    let mut out = Vec::with_capacity(1 + STRING_PREFIX_LEN_MAX + TRUNCATED_MARKER.len() + STRING_HASH_LEN);
    out.push(TAG_STRING);
    for &byte in &text {
        let width = if byte == 0 { 2 } else { 1 };
        if out.len() - 1 + width > STRING_PREFIX_LEN_MAX {
            break;
        }
        out.push(byte);
        if byte == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&TRUNCATED_MARKER);
    out.extend_from_slice(&xxh3_64(&text).to_be_bytes());
    Some(out)
}

/// Where the string component at the start of `bytes` (its tag included) ends, and whether it
/// is truncated; `None` if `bytes` does not start with a whole string component.
fn string_end(bytes: &[u8]) -> Option<(usize, bool)> {
    if bytes.first() != Some(&TAG_STRING) {
        return None;
    }
    let mut index = 1;
    loop {
        if *bytes.get(index)? != 0 {
            index += 1;
            continue;
        }
        match *bytes.get(index + 1)? {
            0xFF => index += 2,
            0x01 => return Some((index + 2, false)),
            0x02 => {
                let end = index + 2 + STRING_HASH_LEN;
                return (bytes.len() >= end).then_some((end, true));
            }
            _ => return None,
        }
    }
}

/// The length of the (ascending) component at the start of `bytes`, full or truncated; `None`
/// when `bytes` does not start with one. An index entry's component ends there and its primary
/// key, if it has one, begins.
pub(crate) fn component_len(bytes: &[u8]) -> Option<usize> {
    match *bytes.first()? {
        TAG_NULL | TAG_OTHER => Some(1),
        TAG_BOOL => (bytes.len() >= 2).then_some(2),
        TAG_NUMBER => (bytes.len() >= NUMBER_LEN).then_some(NUMBER_LEN),
        TAG_STRING => string_end(bytes).map(|(end, _)| end),
        _ => None,
    }
}

/// Whether `bytes` starts with a truncated string component.
pub(crate) fn is_truncated(bytes: &[u8]) -> bool {
    string_end(bytes).is_some_and(|(_, truncated)| truncated)
}

/// The first `1 + STRING_GROUP_LEN` bytes of the string component at the start of `bytes`,
/// when its escaped string has that many bytes before its end; `None` otherwise (not a
/// string, or a shorter one). Every component, full or truncated, of a string that starts with
/// a truncated component's prefix has the truncated component's group, and the entries of one
/// group are adjacent in index order.
pub(crate) fn string_group(bytes: &[u8]) -> Option<&[u8]> {
    if bytes.first() != Some(&TAG_STRING) {
        return None;
    }
    let mut index = 1;
    while index < 1 + STRING_GROUP_LEN {
        if *bytes.get(index)? == 0 && *bytes.get(index + 1)? != 0xFF {
            return None; // the terminator or the truncation marker: a shorter string
        }
        index += if bytes[index] == 0 { 2 } else { 1 };
    }
    bytes.get(..1 + STRING_GROUP_LEN)
}

/// A lower bound of index components, lowered so that it is also at or below the truncated
/// component of every string it was at or below: a string bound longer than a group is cut to
/// its group's length. A truncated component starts with its string's first
/// `1 + STRING_GROUP_LEN` bytes, which are at or above the bound's when the string is.
pub(crate) fn covering_low(mut low: Vec<u8>) -> Vec<u8> {
    if low.first() == Some(&TAG_STRING) {
        low.truncate(1 + STRING_GROUP_LEN);
    }
    low
}

/// A half-open range `[low, high)` of components; `high == None` is unbounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Interval {
    pub(crate) low: Vec<u8>,
    pub(crate) high: Option<Vec<u8>>,
}

/// Orders two components (or whole sort keys) as their bytes do, deciding most pairs on their
/// first eight bytes as one integer comparison; a slice comparison calls `memcmp`, which was
/// 12 % of a large commit's live dispatch in perf (keys of about 27 bytes).
#[inline]
pub(crate) fn compare(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    if let (Some(a_head), Some(b_head)) = (a.first_chunk::<8>(), b.first_chunk::<8>()) {
        let (a_head, b_head) = (u64::from_be_bytes(*a_head), u64::from_be_bytes(*b_head));
        if a_head != b_head {
            return a_head.cmp(&b_head);
        }
    }
    a.cmp(b)
}

/// The first eight bytes of a sort key (zeros after a shorter one) as a big-endian integer:
/// two keys whose heads differ are ordered as their heads are; equal heads leave it to
/// [`compare`].
#[inline]
pub(crate) fn head(key: &[u8]) -> u64 {
    if let Some(first) = key.first_chunk::<8>() {
        return u64::from_be_bytes(*first);
    }
    let mut bytes = [0u8; 8];
    let len = key.len().min(8);
    bytes[..len].copy_from_slice(&key[..len]);
    u64::from_be_bytes(bytes)
}

impl Interval {
    #[cfg(test)]
    pub(crate) fn contains(&self, point: &[u8]) -> bool {
        compare(&self.low, point).is_le() && self.high.as_deref().is_none_or(|high| compare(point, high).is_lt())
    }

    pub(crate) fn intersect(&self, other: &Interval) -> Interval {
        let low = self.low.clone().max(other.low.clone());
        let high = match (&self.high, &other.high) {
            (None, high) | (high, None) => high.clone(),
            (Some(a), Some(b)) => Some(a.clone().min(b.clone())),
        };
        Interval { low, high }
    }

    /// Every component that starts with `prefix`.
    pub(crate) fn prefix(prefix: Vec<u8>) -> Interval {
        let high = prefix_end(&prefix);
        Interval { low: prefix, high }
    }
}

/// The components of the values for which `value op literal` can be TRUE; `None` for `!=`
/// and for the constant NULL (never TRUE), which callers decide themselves.
///
/// `exact` says that component order agrees with the comparison for this literal and field
/// (strings, booleans, integer fields against integers below 2^53): the range then holds
/// exactly the matches. Otherwise numbers are bounded on their `f64` part, inclusively, and
/// the range is a superset for evaluation to decide.
pub(crate) fn literal_range(op: CompareOp, literal: &Literal, exact: bool) -> Option<Interval> {
    if *literal == Literal::Null || op == CompareOp::Ne {
        return None;
    }
    let tag = literal_tag(literal);
    let mut component = Vec::new();
    encode_literal(literal, &mut component);
    if !exact && tag == TAG_NUMBER {
        component.truncate(1 + 8);
    }
    let class_low = vec![tag];
    let class_high = Some(vec![tag + 1]);
    Some(match op {
        CompareOp::Eq => Interval::prefix(component),
        CompareOp::Gt if exact => Interval { low: prefix_end(&component)?, high: class_high },
        CompareOp::Gt | CompareOp::Ge => Interval { low: component, high: class_high },
        CompareOp::Lt if exact => Interval { low: class_low, high: Some(component) },
        CompareOp::Lt | CompareOp::Le => Interval { high: prefix_end(&component).or(class_high), low: class_low },
        CompareOp::Ne => return None,
    })
}

/// The smallest byte string greater than every string that starts with `prefix`, or `None`
/// when there is none (the prefix is all 0xFF).
/// A sort-key component as a readable value, for `explain`: `null`, `true`, `2500`, `1.5`,
/// `"text"`; a string cut short (a prefix bound) ends in `…`. Bytes that are not a component
/// print as hex.
pub(crate) fn describe(component: &[u8]) -> String {
    let hex = || crate::store::key::hex(component);
    match component.split_first() {
        None => "(start)".to_owned(),
        Some((&TAG_NULL, [])) => "null".to_owned(),
        Some((&TAG_BOOL, [flag])) => (*flag != 0).to_string(),
        Some((&TAG_NUMBER, rest)) if rest.len() >= 8 => {
            let ordered = u64::from_be_bytes(rest[..8].try_into().expect("8 bytes"));
            let bits = if ordered >> 63 == 1 { ordered ^ (1 << 63) } else { !ordered };
            let rounded = f64::from_bits(bits);
            let residual = rest.get(8..16).map(|residual| (u64::from_be_bytes(residual.try_into().expect("8 bytes")) ^ (1 << 63)) as i64);
            let residual = residual.unwrap_or(0);
            if residual.unsigned_abs() > RESIDUAL_ABS_MAX || (residual != 0 && !rounded.is_finite()) {
                return hex();
            }
            // An integral value in the integers' range as the exact integer (with its residual).
            if rounded.is_finite() && rounded.fract() == 0.0 && rounded.abs() <= TWO_POW_64 {
                (rounded as i128 + i128::from(residual)).to_string()
            } else {
                rounded.to_string()
            }
        }
        Some((&TAG_STRING, rest)) => match crate::store::key::decode_bytes(rest) {
            Some((text, [])) => format!("{:?}", String::from_utf8_lossy(&text)),
            // A truncated component: its prefix, then the whole string's hash.
            _ if string_end(component) == Some((component.len(), true)) => {
                let (prefix, hash) = rest.split_at(rest.len() - TRUNCATED_MARKER.len() - STRING_HASH_LEN);
                let prefix = crate::store::key::decode_bytes(&[prefix, &[0x00, 0x01]].concat()).map(|(text, _)| text).unwrap_or_default();
                format!("{:?}… (hash {})", String::from_utf8_lossy(&prefix), crate::store::key::hex(&hash[TRUNCATED_MARKER.len()..]))
            }
            // A prefix bound: the escaped bytes without their terminator.
            _ => format!("{:?}…", String::from_utf8_lossy(&rest.iter().copied().filter(|&b| b != 0xFF).collect::<Vec<u8>>())),
        },
        Some((&TAG_OTHER, [])) => "(other)".to_owned(),
        _ => hex(),
    }
}

pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn heads_order_keys_as_their_bytes_do_where_they_differ() {
        let keys: [&[u8]; 7] = [&[], &[0, 255], &[1], &[1, 0], &[1, 0, 0, 5], &[1, 2, 3, 4, 5, 6, 7, 8, 9], &[1, 2, 3, 4, 5, 6, 7, 9]];
        for a in keys {
            for b in keys {
                if head(a) != head(b) {
                    assert_eq!(head(a).cmp(&head(b)), compare(a, b), "{a:?} {b:?}");
                }
            }
        }
        assert_eq!(head(&[1]), head(&[1, 0]), "equal heads leave the order to the bytes");
    }

    use super::*;

    fn key_of(json: &str, descending: bool) -> Vec<u8> {
        key_with_nulls(json, descending, false)
    }

    fn key_with_nulls(json: &str, descending: bool, nulls_last: bool) -> Vec<u8> {
        let bytes = tessera_value::from_json(format!(r#"{{"v": {json}}}"#).as_bytes()).unwrap();
        let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
        let mut out = Vec::new();
        encode_ordered(doc.root().get("v"), descending, nulls_last, &mut out);
        out
    }

    #[test]
    fn nulls_go_first_or_last_in_either_direction() {
        for value in ["false", "-1e300", "0", r#""""#, r#""zz""#, "[1]"] {
            for descending in [false, true] {
                assert!(key_with_nulls("null", descending, false) < key_with_nulls(value, descending, false), "{value}");
                assert!(key_with_nulls("null", descending, true) > key_with_nulls(value, descending, true), "{value}");
            }
        }
    }

    #[test]
    fn components_sort_like_values() {
        let ascending = [
            "null",
            "false",
            "true",
            "-1e300",
            "-3",
            "-2.5",
            "0",
            "1",
            "1.5",
            "9007199254740993",
            "1e300",
            r#""""#,
            r#""a""#,
            r#""ab""#,
            r#""b""#,
        ];
        for pair in ascending.windows(2) {
            assert!(key_of(pair[0], false) < key_of(pair[1], false), "{} < {}", pair[0], pair[1]);
            // Descending reverses the order within a class; classes keep their order.
            if key_of(pair[0], false)[0] == key_of(pair[1], false)[0] {
                assert!(key_of(pair[0], true) > key_of(pair[1], true), "desc {} > {}", pair[0], pair[1]);
            }
        }
        assert!(key_of("null", true) < key_of("1", true), "nulls first when asked, descending too");
        assert_eq!(key_of("2", false), key_of("2.0", false));
        assert_eq!(key_of("0", false), key_of("-0.0", false));
        assert_eq!(key_of(r#"{"Image": [1]}"#, false), key_of(r#""Image""#, false));
    }

    /// Strings that share long prefixes, with NULs and multi-byte characters, around the
    /// lengths where a truncated form starts (256 escaped bytes).
    fn long_string() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let tail = prop::collection::vec(prop_oneof![Just('\0'), Just('a'), Just('b'), Just('é')], 0..8).prop_map(String::from_iter);
        (prop_oneof![Just(0usize), 250usize..262, Just(600)], tail).prop_map(|(len, tail)| format!("{}{tail}", "p".repeat(len)))
    }

    fn full(text: &str) -> Vec<u8> {
        let mut out = Vec::new();
        encode_literal(&Literal::Str(text.to_owned()), &mut out);
        out
    }

    proptest::proptest! {
        #[test]
        fn truncated_components_sort_at_their_prefix(a in long_string(), b in long_string()) {
            use proptest::prop_assert;
            let (full_a, full_b) = (full(&a), full(&b));
            let Some(short_a) = truncated(&full_a) else {
                prop_assert!(full_a.len() - 3 <= STRING_PREFIX_LEN_MAX);
                return Ok(());
            };
            // The truncated form parses, and has the full form's group.
            prop_assert!(is_truncated(&short_a) && !is_truncated(&full_a));
            prop_assert!(component_len(&[&short_a[..], b"pk"].concat()) == Some(short_a.len()));
            prop_assert!(component_len(&[&full_a[..], b"pk"].concat()) == Some(full_a.len()));
            prop_assert!(string_group(&short_a).is_some() && string_group(&short_a) == string_group(&full_a));
            let prefix = crate::store::key::decode_bytes(&[&short_a[1..short_a.len() - 10], &[0, 1]].concat()).unwrap().0;
            prop_assert!(a.as_bytes().starts_with(&prefix) && prefix.len() < a.len());
            // Against a string that does not start with the prefix, it sorts as the string does.
            if !b.as_bytes().starts_with(&prefix) || b.len() == prefix.len() {
                prop_assert!(short_a.cmp(&full_b) == a.cmp(&b));
            } else {
                prop_assert!(string_group(&full_b) == string_group(&short_a), "one group holds every string with the prefix");
            }
            // Bounds: below every string above b, above every string below b.
            if a >= b {
                prop_assert!(covering_low(full_b.clone()) <= short_a);
            }
            if a < b {
                prop_assert!(short_a < full_b);
            }
            prop_assert!(short_a < full_a);
        }
    }

    #[test]
    fn literal_matches_value() {
        let mut from_literal = Vec::new();
        encode_literal(&Literal::Int(-7), &mut from_literal);
        assert_eq!(from_literal, key_of("-7", false));
        assert_eq!(prefix_end(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xFF]), None);
    }

    /// A number of one of the three kinds a record holds.
    #[derive(Debug, Clone, Copy)]
    enum Number {
        Int(i64),
        UInt(u64),
        Float(f64),
    }

    impl serde::Serialize for Number {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            match *self {
                Number::Int(int) => serializer.serialize_i64(int),
                Number::UInt(uint) => serializer.serialize_u64(uint),
                Number::Float(float) => serializer.serialize_f64(float),
            }
        }
    }

    #[derive(serde::Serialize)]
    struct Pair {
        a: Number,
        b: Number,
    }

    /// Numbers biased toward where `f64` and the integers part: the ends of `i64` and `u64`,
    /// 2^53 and 2^63 and their neighbours, signed zeros, NaN and the infinities.
    fn number() -> impl proptest::strategy::Strategy<Value = Number> {
        use proptest::prelude::*;
        let two53 = 1i64 << 53;
        let int_edges =
            prop::sample::select(vec![i64::MIN, i64::MIN + 1, -two53 - 1, -two53, -1, 0, 1, two53, two53 + 1, i64::MAX - 1, i64::MAX]);
        let uint_edges = prop::sample::select(vec![
            0,
            1,
            1 << 53,
            (1 << 53) + 1,
            i64::MAX as u64,
            1 << 63,
            (1 << 63) + 1,
            u64::MAX - 2048,
            u64::MAX - 1025,
            u64::MAX - 1024,
            u64::MAX - 1,
            u64::MAX,
        ]);
        let float_edges = prop::sample::select(vec![
            -0.0,
            0.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1.5,
            -2.5,
            9007199254740992.0,
            9007199254740994.0,
            (1u64 << 63) as f64,
            -((1u64 << 63) as f64),
            u64::MAX as f64,
            (u64::MAX - 2048) as f64,
            f64::MAX,
            f64::MIN_POSITIVE,
        ]);
        prop_oneof![
            (int_edges, -3i64..=3).prop_map(|(edge, step)| Number::Int(edge.saturating_add(step))),
            (uint_edges, -3i64..=3).prop_map(|(edge, step)| Number::UInt(edge.saturating_add_signed(step))),
            float_edges.clone().prop_map(Number::Float),
            // A float next to an edge: one ulp either way.
            (float_edges, prop::bool::ANY).prop_map(|(edge, up)| Number::Float(if up { edge.next_up() } else { edge.next_down() })),
            any::<i64>().prop_map(Number::Int),
            any::<u64>().prop_map(Number::UInt),
            any::<f64>().prop_map(Number::Float),
            (-2000i64..2000).prop_map(|n| Number::Float(n as f64 / 4.0)),
        ]
    }

    /// The exact order of two numbers' values (NaN above everything, equal to itself).
    fn exact_order(a: Number, b: Number) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        fn exact(number: Number) -> Result<i128, f64> {
            match number {
                Number::Int(int) => Ok(i128::from(int)),
                Number::UInt(uint) => Ok(i128::from(uint)),
                Number::Float(float) => Err(float),
            }
        }
        fn float_against(x: f64, n: i128) -> Ordering {
            if x.is_nan() || x == f64::INFINITY || x >= 2f64.powi(100) {
                return Ordering::Greater;
            }
            if x == f64::NEG_INFINITY || x <= -(2f64.powi(100)) {
                return Ordering::Less;
            }
            let floor = x.floor();
            match (floor as i128).cmp(&n) {
                Ordering::Equal if x == floor => Ordering::Equal,
                Ordering::Equal => Ordering::Greater,
                other => other,
            }
        }
        match (exact(a), exact(b)) {
            (Ok(x), Ok(y)) => x.cmp(&y),
            (Err(x), Ok(y)) => float_against(x, y),
            (Ok(x), Err(y)) => float_against(y, x).reverse(),
            (Err(x), Err(y)) => match (x.is_nan(), y.is_nan()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => x.partial_cmp(&y).expect("not NaN"),
            },
        }
    }

    /// The query language's order of two numbers (`crate::query` eval on `a OP b`), `None`
    /// when no comparison holds (NaN).
    fn eval_order(root: Value<'_>) -> Option<std::cmp::Ordering> {
        use crate::query::{Expr, Truth};
        let holds = |op| {
            let field = |name: &str| Box::new(Expr::Field(FieldPath::new(name)));
            Expr::Compare(field("a"), op, field("b")).eval(root) == Truth::True
        };
        match (holds(CompareOp::Lt), holds(CompareOp::Eq), holds(CompareOp::Gt)) {
            (true, false, false) => Some(std::cmp::Ordering::Less),
            (false, true, false) => Some(std::cmp::Ordering::Equal),
            (false, false, true) => Some(std::cmp::Ordering::Greater),
            (false, false, false) => None,
            other => panic!("eval gives more than one order: {other:?}"),
        }
    }

    fn literal_of(number: Number) -> Option<Literal> {
        match number {
            Number::Int(int) => Some(Literal::Int(int)),
            Number::UInt(uint) => Some(Literal::from(uint)),
            Number::Float(float) => Some(Literal::Float(float)),
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]
        /// Components order numbers exactly, and agree with the query language wherever it
        /// tells two numbers apart; where it calls them equal they share the `f64` part an
        /// index range is bounded on. Constants encode as the values they equal.
        #[test]
        fn number_components_order_as_values(a in number(), b in number()) {
            use proptest::prop_assert_eq;
            let bytes = tessera_value::to_vec(&Pair { a, b }).unwrap();
            let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
            let (mut key_a, mut key_b) = (Vec::new(), Vec::new());
            encode_value(doc.root().get("a"), &mut key_a);
            encode_value(doc.root().get("b"), &mut key_b);
            prop_assert_eq!(key_a.len(), NUMBER_LEN);
            prop_assert_eq!(component_len(&key_a), Some(NUMBER_LEN));
            prop_assert_eq!(compare(&key_a, &key_b), exact_order(a, b), "{:?} against {:?}", a, b);
            match eval_order(doc.root()) {
                Some(order) => prop_assert_eq!(key_a.cmp(&key_b), order),
                None => proptest::prop_assert!(matches!(a, Number::Float(x) if x.is_nan()) || matches!(b, Number::Float(x) if x.is_nan())),
            }
            if let Some(literal) = literal_of(a) {
                let mut from_literal = Vec::new();
                encode_literal(&literal, &mut from_literal);
                prop_assert_eq!(&from_literal, &key_a);
            }
            // `explain` shows the exact value of an integer.
            match a {
                Number::Int(int) => prop_assert_eq!(describe(&key_a), int.to_string()),
                Number::UInt(uint) => prop_assert_eq!(describe(&key_a), uint.to_string()),
                Number::Float(_) => {}
            }
        }
    }

    #[test]
    fn big_integers_have_their_own_components() {
        let component = |json: &str| key_of(json, false);
        // Formats up to 6 saturated these to one component.
        assert!(component("18446744073709551614") < component("18446744073709551615"));
        assert!(component("9223372036854775807") < component("9223372036854775808"));
        assert!(component("9223372036854775808.0") < component("9223372036854775809"));
        assert!(component("18446744073709551615") < component("18446744073709551616.0"));
        assert!(component("-9223372036854775808") == component("-9223372036854775808.0"));
        assert_eq!(component("3"), component("3.0"));
        assert_eq!(describe(&component("18446744073709551615")), "18446744073709551615");
        assert_eq!(describe(&component("-9223372036854775807")), "-9223372036854775807");
        assert_eq!(describe(&component("2500")), "2500");
        assert_eq!(describe(&component("1.5")), "1.5");
    }
}
