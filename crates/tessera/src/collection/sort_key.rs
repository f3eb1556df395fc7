//! Order-preserving bytes for a field's value, used by index entries and by `order by`: two
//! encodings compare as the values do under the query language's order.
//!
//! A component is a class tag and the value: NULL (missing or null) `0x00` sorts first; then
//! booleans `0x01`; numbers `0x02` (the value as an `f64` key, then the exact `i64` to order
//! integers an `f64` cannot tell apart); strings `0x03` (escaped and terminated, so components
//! concatenate); everything else `0x04`. An enum's variant is its name, a string, whether the
//! variant is a unit (`"Red"`) or carries a payload (`{"Image": …}`). Descending components
//! invert every byte after the tag: the order within a class reverses, classes keep theirs, and
//! NULL stays first in both directions.

use crate::query::{CompareOp, FieldPath, Literal};
use crate::store::key::KeyPart;
use tessera_value::{Kind, Value};

pub(crate) const TAG_NULL: u8 = 0x00;
pub(crate) const TAG_BOOL: u8 = 0x01;
pub(crate) const TAG_NUMBER: u8 = 0x02;
pub(crate) const TAG_STRING: u8 = 0x03;
pub(crate) const TAG_OTHER: u8 = 0x04;

fn number(as_f64: f64, as_i64: i64, out: &mut Vec<u8>) {
    out.push(TAG_NUMBER);
    // -0.0 and 0.0 are equal to the query language; the key must agree.
    let as_f64 = if as_f64 == 0.0 { 0.0 } else { as_f64 };
    as_f64.encode_key(out);
    as_i64.encode_key(out);
}

fn string(text: &str, out: &mut Vec<u8>) {
    out.push(TAG_STRING);
    text.encode_key(out);
}

/// Appends the component for a field's value (`None` when the field is missing).
pub(crate) fn encode_value(value: Option<Value<'_>>, out: &mut Vec<u8>) {
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
            number(int as f64, int, out);
        }
        Kind::UInt => {
            let uint = value.as_u64().unwrap_or(0);
            number(uint as f64, i64::try_from(uint).unwrap_or(i64::MAX), out);
        }
        Kind::Float => {
            let float = value.as_f64().unwrap_or(f64::NAN);
            // `as` saturates, and NaN becomes 0; the f64 part already orders NaN last.
            number(float, float as i64, out);
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
        Literal::Int(int) => number(*int as f64, *int, out),
        Literal::Float(float) => number(*float, *float as i64, out),
        Literal::Str(text) => string(text, out),
    }
}

/// The class tag a literal's component starts with.
pub(crate) fn literal_tag(literal: &Literal) -> u8 {
    match literal {
        Literal::Null => TAG_NULL,
        Literal::Bool(_) => TAG_BOOL,
        Literal::Int(_) | Literal::Float(_) => TAG_NUMBER,
        Literal::Str(_) => TAG_STRING,
    }
}

/// Appends the component for `value` in the given direction.
pub(crate) fn encode_ordered(value: Option<Value<'_>>, descending: bool, out: &mut Vec<u8>) {
    let start = out.len();
    encode_value(value, out);
    if descending && out[start] != TAG_NULL {
        // Inverting a prefix-free encoding reverses its order and keeps it prefix-free.
        for byte in &mut out[start + 1..] {
            *byte = !*byte;
        }
    }
}

/// A record's sort key for an order (each field's component in its direction, `true` for
/// descending), followed by its primary key; without the record, the key alone.
pub(crate) fn encode_record(orders: &[(FieldPath, bool)], record: Option<Value<'_>>, key: &[u8], out: &mut Vec<u8>) {
    if let Some(record) = record {
        for (path, descending) in orders {
            encode_ordered(path.lookup(record), *descending, out);
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

/// A half-open range `[low, high)` of components; `high == None` is unbounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Interval {
    pub(crate) low: Vec<u8>,
    pub(crate) high: Option<Vec<u8>>,
}

impl Interval {
    pub(crate) fn contains(&self, point: &[u8]) -> bool {
        self.low.as_slice() <= point && self.high.as_deref().is_none_or(|high| point < high)
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
            let float = f64::from_bits(bits);
            match rest.get(8..16) {
                Some(int) => {
                    let int = (u64::from_be_bytes(int.try_into().expect("8 bytes")) ^ (1 << 63)) as i64;
                    if int as f64 == float {
                        int.to_string()
                    } else {
                        float.to_string()
                    }
                }
                None => float.to_string(),
            }
        }
        Some((&TAG_STRING, rest)) => match crate::store::key::decode_bytes(rest) {
            Some((text, [])) => format!("{:?}", String::from_utf8_lossy(&text)),
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
    use super::*;

    fn key_of(json: &str, descending: bool) -> Vec<u8> {
        let bytes = tessera_value::from_json(format!(r#"{{"v": {json}}}"#).as_bytes()).unwrap();
        let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
        let mut out = Vec::new();
        encode_ordered(doc.root().get("v"), descending, &mut out);
        out
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
        assert!(key_of("null", true) < key_of("1", true), "nulls first when descending too");
        assert_eq!(key_of("2", false), key_of("2.0", false));
        assert_eq!(key_of("0", false), key_of("-0.0", false));
        assert_eq!(key_of(r#"{"Image": [1]}"#, false), key_of(r#""Image""#, false));
    }

    #[test]
    fn literal_matches_value() {
        let mut from_literal = Vec::new();
        encode_literal(&Literal::Int(-7), &mut from_literal);
        assert_eq!(from_literal, key_of("-7", false));
        assert_eq!(prefix_end(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xFF]), None);
    }
}
