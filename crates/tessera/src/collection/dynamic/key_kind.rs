//! How each primary-key field of a collection is encoded in its stored key ([`KeyKind`]), for
//! handles that have no record type to ask. An integer's width is in the stored shape when a
//! record type stored it ([`TypeDesc::Integer`]); `TypeDesc::Int` (any integer: schemas stored
//! before widths were recorded, and Python's `int`) and a float's width are not, so they are
//! recorded in the schema when a dynamic handle creates a collection, or learned from stored
//! keys.

use crate::collection::schema::{FloatType, holds_exactly};
use crate::collection::{IntType, TypeDesc};
use serde::{Deserialize, Serialize};
use tessera_value::{Kind, Value};

/// Most stored records [`learn`] reads to tell the key fields' widths apart.
pub(crate) const LEARN_RECORDS_MAX: usize = 16;
/// Most combinations of key encodings [`learn`] tries: 8 integer widths for each of 5 key
/// fields (the most a record type's tuple key has).
const COMBINATIONS_MAX: usize = 8usize.pow(5);

/// The encoding of one primary-key field ([`crate::store::key`]).
///
/// ```
/// use tessera::collection::KeyKind;
/// use tessera::value::{from_json, Doc};
/// let bytes = from_json(b"7").unwrap();
/// let mut key = Vec::new();
/// KeyKind::U32.encode(Doc::from_untrusted(&bytes).unwrap().root(), &mut key).unwrap();
/// assert_eq!(key, tessera::store::key::encode(&7u32));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyKind {
    /// `u8`: one byte.
    U8,
    /// `u16`, big-endian.
    U16,
    /// `u32`, big-endian.
    U32,
    /// `u64`, big-endian.
    U64,
    /// `i8`, sign bit flipped.
    I8,
    /// `i16`, big-endian, sign bit flipped.
    I16,
    /// `i32`, big-endian, sign bit flipped.
    I32,
    /// `i64`, big-endian, sign bit flipped.
    I64,
    /// `f32`, ordered bits.
    F32,
    /// `f64`, ordered bits.
    F64,
    /// `bool`: one byte.
    Bool,
    /// A string, escaped and terminated.
    String,
    /// Bytes, escaped and terminated.
    Bytes,
}

const INTEGERS: &[KeyKind] =
    &[KeyKind::U8, KeyKind::U16, KeyKind::U32, KeyKind::U64, KeyKind::I8, KeyKind::I16, KeyKind::I32, KeyKind::I64];

impl KeyKind {
    /// The encodings a key field of shape `desc` may have; empty if it cannot be a key.
    ///
    /// ```
    /// use tessera::collection::{KeyKind, TypeDesc};
    /// assert_eq!(KeyKind::candidates(&TypeDesc::String), &[KeyKind::String]);
    /// assert_eq!(KeyKind::candidates(&TypeDesc::Int).len(), 8);
    /// assert_eq!(KeyKind::candidates(&TypeDesc::Integer(tessera::collection::IntType::U32)), &[KeyKind::U32]);
    /// ```
    pub fn candidates(desc: &TypeDesc) -> &'static [KeyKind] {
        match desc {
            TypeDesc::Int => INTEGERS,
            TypeDesc::Integer(int) => match int {
                IntType::I8 => &[KeyKind::I8],
                IntType::I16 => &[KeyKind::I16],
                IntType::I32 => &[KeyKind::I32],
                IntType::I64 => &[KeyKind::I64],
                IntType::U8 => &[KeyKind::U8],
                IntType::U16 => &[KeyKind::U16],
                IntType::U32 => &[KeyKind::U32],
                IntType::U64 => &[KeyKind::U64],
            },
            TypeDesc::Float => &[KeyKind::F64, KeyKind::F32],
            TypeDesc::Float32 => &[KeyKind::F32],
            TypeDesc::Bool => &[KeyKind::Bool],
            TypeDesc::String => &[KeyKind::String],
            TypeDesc::Bytes => &[KeyKind::Bytes],
            _ => &[],
        }
    }

    /// Appends `value`'s encoding as this kind; the reason if it is not one (a string for an
    /// integer, an integer out of range).
    ///
    /// ```
    /// use tessera::collection::KeyKind;
    /// use tessera::value::{from_json, Doc};
    /// let bytes = from_json(b"300").unwrap();
    /// let value = Doc::from_untrusted(&bytes).unwrap().root();
    /// assert!(KeyKind::U8.encode(value, &mut Vec::new()).unwrap_err().contains("out of range"));
    /// ```
    pub fn encode(self, value: Value<'_>, out: &mut Vec<u8>) -> Result<(), String> {
        use crate::store::key::KeyPart;
        let out_of_range = || format!("{} is out of range for {}", value.to_json(), self.name());
        match self {
            KeyKind::Bool => value.as_bool().ok_or_else(|| self.expected(value))?.encode_key(out),
            KeyKind::String => value.as_str().ok_or_else(|| self.expected(value))?.encode_key(out),
            KeyKind::Bytes => value.as_bytes().ok_or_else(|| self.expected(value))?.encode_key(out),
            KeyKind::F32 | KeyKind::F64 => {
                if !matches!(value.kind(), Kind::Int | Kind::UInt | Kind::Float) {
                    return Err(self.expected(value));
                }
                let number = value.as_f64().ok_or_else(|| self.expected(value))?;
                // Only a value the key holds exactly: a rounded key would name another record
                // (and one out of range would be infinity).
                let float = if self == KeyKind::F32 { FloatType::F32 } else { FloatType::F64 };
                if !holds_exactly(value, float) {
                    return Err(format!("{} cannot be held exactly by a key of {}", value.to_json(), self.name()));
                }
                if number.is_nan() {
                    // Equal to nothing, itself included: no get could name it again.
                    return Err(format!("NaN cannot be a key of {}", self.name()));
                }
                // -0.0 and 0.0 are equal (a query's `id = 0` finds either): one key, as the
                // Python package writes it, so that a get of either finds the record and a
                // second insert is a duplicate.
                let number = if number == 0.0 { 0.0 } else { number };
                if self == KeyKind::F32 { (number as f32).encode_key(out) } else { number.encode_key(out) }
            }
            _ => {
                let integer = match value.kind() {
                    Kind::Int => i128::from(value.as_i64().ok_or_else(|| self.expected(value))?),
                    Kind::UInt => i128::from(value.as_u64().ok_or_else(|| self.expected(value))?),
                    _ => return Err(self.expected(value)),
                };
                self.encode_integer(integer, out).ok_or_else(out_of_range)?;
            }
        }
        Ok(())
    }

    /// Appends a query constant's encoding as this kind, as a record type's key field would
    /// convert it ([`crate::collection::KeyLiteral`]): an integer in range, a float with an
    /// exact integer value, a string, a boolean. `false`, with nothing appended, for anything
    /// else (300 for a `u8`, a string for an integer, any constant for a float or bytes key):
    /// the planner then reads without the key.
    pub(crate) fn encode_literal(self, literal: &crate::query::Literal, out: &mut Vec<u8>) -> bool {
        use crate::query::Literal;
        use crate::store::key::KeyPart;
        match (self, literal) {
            (KeyKind::String, Literal::Str(text)) => text.as_str().encode_key(out),
            (KeyKind::Bool, Literal::Bool(value)) => value.encode_key(out),
            (KeyKind::String | KeyKind::Bool | KeyKind::Bytes | KeyKind::F32 | KeyKind::F64, _) => return false,
            (_, Literal::Int(integer)) => return self.encode_integer(i128::from(*integer), out).is_some(),
            (_, Literal::UInt(integer)) => return self.encode_integer(i128::from(*integer), out).is_some(),
            (_, Literal::Float(float)) if float.fract() == 0.0 && float.abs() < 9.0e15 => {
                return self.encode_integer(*float as i128, out).is_some();
            }
            (_, _) => return false,
        }
        true
    }

    /// Appends `text` as this kind when it is [`KeyKind::String`], as [`KeyKind::encode`]
    /// would a string value, without building one; `false`, with nothing appended, for any
    /// other kind (ask `encode` then, for the error).
    ///
    /// ```
    /// use tessera::collection::KeyKind;
    /// let mut key = Vec::new();
    /// assert!(KeyKind::String.encode_str("ada", &mut key));
    /// assert_eq!(key, tessera::store::key::encode("ada"));
    /// assert!(!KeyKind::U32.encode_str("7", &mut Vec::new()));
    /// ```
    pub fn encode_str(self, text: &str, out: &mut Vec<u8>) -> bool {
        use crate::store::key::KeyPart;
        if self != KeyKind::String {
            return false;
        }
        text.encode_key(out);
        true
    }

    /// Appends `integer` as this kind when it is an integer kind whose range holds it, as
    /// [`KeyKind::encode`] would an integer value, without building one; `false`, with nothing
    /// appended, otherwise (out of range, or a float, string, bytes or bool kind: ask `encode`
    /// then, for the error).
    ///
    /// ```
    /// use tessera::collection::KeyKind;
    /// let mut key = Vec::new();
    /// assert!(KeyKind::I64.encode_i64(-7, &mut key));
    /// assert_eq!(key, tessera::store::key::encode(&-7i64));
    /// assert!(!KeyKind::U8.encode_i64(300, &mut Vec::new()));
    /// assert!(!KeyKind::String.encode_i64(1, &mut Vec::new()));
    /// ```
    pub fn encode_i64(self, integer: i64, out: &mut Vec<u8>) -> bool {
        self.encode_integer(i128::from(integer), out).is_some()
    }

    /// Appends `integer` as this integer kind; `None` if out of its range (or not an integer
    /// kind).
    fn encode_integer(self, integer: i128, out: &mut Vec<u8>) -> Option<()> {
        use crate::store::key::KeyPart;
        match self {
            KeyKind::U8 => u8::try_from(integer).ok()?.encode_key(out),
            KeyKind::U16 => u16::try_from(integer).ok()?.encode_key(out),
            KeyKind::U32 => u32::try_from(integer).ok()?.encode_key(out),
            KeyKind::U64 => u64::try_from(integer).ok()?.encode_key(out),
            KeyKind::I8 => i8::try_from(integer).ok()?.encode_key(out),
            KeyKind::I16 => i16::try_from(integer).ok()?.encode_key(out),
            KeyKind::I32 => i32::try_from(integer).ok()?.encode_key(out),
            KeyKind::I64 => i64::try_from(integer).ok()?.encode_key(out),
            _ => return None,
        }
        Some(())
    }

    /// Reads one part of this kind from the front of `encoded`, as JSON text; returns it and
    /// the rest. `None` if the bytes are not one.
    ///
    /// ```
    /// use tessera::collection::KeyKind;
    /// let key = tessera::store::key::encode(&(-3i16, "a\"b"));
    /// let (day, rest) = KeyKind::I16.display(&key).unwrap();
    /// assert_eq!(day, "-3");
    /// assert_eq!(KeyKind::String.display(rest).unwrap(), (r#""a\"b""#.to_owned(), &[][..]));
    /// ```
    pub fn display(self, encoded: &[u8]) -> Option<(String, &[u8])> {
        let width = match self {
            KeyKind::U8 | KeyKind::I8 | KeyKind::Bool => 1,
            KeyKind::U16 | KeyKind::I16 => 2,
            KeyKind::U32 | KeyKind::I32 | KeyKind::F32 => 4,
            KeyKind::U64 | KeyKind::I64 | KeyKind::F64 => 8,
            KeyKind::String | KeyKind::Bytes => {
                let (bytes, rest) = crate::store::key::decode_bytes(encoded)?;
                let text = match (self, String::from_utf8(bytes)) {
                    (KeyKind::String, Ok(text)) => json_string(&text),
                    (_, text) => {
                        let bytes = text.map(String::into_bytes).unwrap_or_else(|error| error.into_bytes());
                        format!("{bytes:?}")
                    }
                };
                return Some((text, rest));
            }
        };
        let (part, rest) = encoded.split_at_checked(width)?;
        let mut bits = [0u8; 8];
        bits[8 - width..].copy_from_slice(part);
        let raw = u64::from_be_bytes(bits);
        let sign = 1u64 << (width * 8 - 1);
        let text = match self {
            KeyKind::Bool if raw <= 1 => (raw == 1).to_string(),
            KeyKind::Bool => return None,
            KeyKind::U8 | KeyKind::U16 | KeyKind::U32 | KeyKind::U64 => raw.to_string(),
            // The sign bit was flipped: subtract the offset back, in i128 to cover i64.
            KeyKind::I8 | KeyKind::I16 | KeyKind::I32 | KeyKind::I64 => (i128::from(raw) - i128::from(sign)).to_string(),
            KeyKind::F32 => {
                let ordered = raw as u32;
                let bits = if ordered & (1 << 31) != 0 { ordered ^ (1 << 31) } else { !ordered };
                f32::from_bits(bits).to_string()
            }
            _ => {
                let bits = if raw & (1 << 63) != 0 { raw ^ (1 << 63) } else { !raw };
                f64::from_bits(bits).to_string()
            }
        };
        Some((text, rest))
    }

    fn expected(self, found: Value<'_>) -> String {
        format!("expected {} for the key, found {}", self.name(), found.to_json())
    }

    /// The kind's Rust name: `u32`, `string`.
    ///
    /// ```
    /// assert_eq!(tessera::collection::KeyKind::I64.name(), "i64");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            KeyKind::U8 => "u8",
            KeyKind::U16 => "u16",
            KeyKind::U32 => "u32",
            KeyKind::U64 => "u64",
            KeyKind::I8 => "i8",
            KeyKind::I16 => "i16",
            KeyKind::I32 => "i32",
            KeyKind::I64 => "i64",
            KeyKind::F32 => "f32",
            KeyKind::F64 => "f64",
            KeyKind::Bool => "bool",
            KeyKind::String => "string",
            KeyKind::Bytes => "bytes",
        }
    }
}

/// `text` as a JSON string.
pub(super) fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for character in text.chars() {
        match character {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            control if u32::from(control) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(control))),
            other => out.push(other),
        }
    }
    out.push('"');
    out
}

/// The key encodings consistent with stored records: each sample is a stored key and the
/// key fields' values in its record. `None` when the samples leave more than one choice
/// possible, or none (an empty collection with a numeric key field, or keys that fit no
/// encoding).
pub(crate) fn learn(candidates: &[&'static [KeyKind]], samples: &[(Vec<u8>, Vec<Value<'_>>)]) -> Option<Vec<KeyKind>> {
    assert!(samples.len() <= LEARN_RECORDS_MAX, "learn reads a bounded sample");
    let fixed: Option<Vec<KeyKind>> = candidates.iter().map(|kinds| if kinds.len() == 1 { Some(kinds[0]) } else { None }).collect();
    if let Some(fixed) = fixed {
        return Some(fixed);
    }
    if samples.is_empty() {
        return None;
    }
    // Every combination, in an odometer; a schema with more combinations than a record
    // type's key can have (8 integer widths for each of at most 5 fields) is not tried.
    let combinations = candidates.iter().try_fold(1usize, |product, kinds| product.checked_mul(kinds.len()));
    let combinations = combinations.filter(|&count| count <= COMBINATIONS_MAX)?;
    let mut found: Option<Vec<KeyKind>> = None;
    let mut choice = vec![0usize; candidates.len()];
    let mut key = Vec::new();
    for _ in 0..combinations {
        let kinds: Vec<KeyKind> = choice.iter().zip(candidates).map(|(&at, kinds)| kinds[at]).collect();
        let fits = samples.iter().all(|(stored, values)| {
            key.clear();
            values.len() == kinds.len()
                && kinds.iter().zip(values).all(|(kind, value)| kind.encode(*value, &mut key).is_ok())
                && key == *stored
        });
        if fits {
            if found.is_some() {
                return None; // ambiguous
            }
            found = Some(kinds);
        }
        for (at, kinds) in choice.iter_mut().zip(candidates) {
            *at += 1;
            if *at < kinds.len() {
                break;
            }
            *at = 0;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_value::{Doc, from_json};

    #[test]
    fn every_kind_displays_what_it_encodes() {
        let cases: [(&[u8], KeyKind); 9] = [
            (b"-128", KeyKind::I8),
            (b"65535", KeyKind::U16),
            (b"-2147483648", KeyKind::I32),
            (b"18446744073709551615", KeyKind::U64),
            (b"-9223372036854775808", KeyKind::I64),
            (b"-1.5", KeyKind::F64),
            (b"0.25", KeyKind::F32),
            (b"true", KeyKind::Bool),
            (br#""a\"b\n\u0001""#, KeyKind::String),
        ];
        for (json, kind) in cases {
            let bytes = from_json(json).unwrap();
            let value = Doc::from_untrusted(&bytes).unwrap().root();
            let mut key = Vec::new();
            kind.encode(value, &mut key).unwrap();
            let (text, rest) = kind.display(&key).unwrap();
            assert!(rest.is_empty());
            let back = from_json(text.as_bytes()).unwrap();
            let back = Doc::from_untrusted(&back).unwrap().root();
            let mut again = Vec::new();
            kind.encode(back, &mut again).unwrap();
            assert_eq!(again, key, "{kind:?}: {text}");
        }
        assert_eq!(KeyKind::U32.display(&[1, 2]), None);
        assert_eq!(KeyKind::Bool.display(&[2]), None);
    }

    #[test]
    fn widths_are_learned_from_stored_keys_and_ambiguity_is_refused() {
        let five = from_json(b"5").unwrap();
        let five = Doc::from_untrusted(&five).unwrap().root();
        let learned = learn(&[INTEGERS], &[(crate::store::key::encode(&5u32), vec![five])]);
        assert_eq!(learned, Some(vec![KeyKind::U32]));
        let learned = learn(&[INTEGERS], &[(crate::store::key::encode(&5i16), vec![five])]);
        assert_eq!(learned, Some(vec![KeyKind::I16]));
        assert_eq!(learn(&[INTEGERS], &[]), None, "no record to learn from");
        // (u8, u16) and (u16, u8) both write (0, 0) as three zero bytes.
        let zero = from_json(b"0").unwrap();
        let zero = Doc::from_untrusted(&zero).unwrap().root();
        assert_eq!(learn(&[INTEGERS, INTEGERS], &[(vec![0, 0, 0], vec![zero, zero])]), None);
        assert_eq!(learn(&[&[KeyKind::String]], &[]), Some(vec![KeyKind::String]));
        // At the bound, tried; past it (a damaged schema), refused rather than overflowed.
        let key = crate::store::key::encode(&(5u8, 5u8, 5u8, 5u8, 5u32));
        assert_eq!(
            learn(&[INTEGERS; 5], &[(key, vec![five; 5])]),
            Some(vec![KeyKind::U8, KeyKind::U8, KeyKind::U8, KeyKind::U8, KeyKind::U32])
        );
        assert_eq!(learn(&[INTEGERS; 6], &[(vec![5; 6], vec![five; 6])]), None);
        assert_eq!(learn(&[INTEGERS; 40], &[(vec![5; 40], vec![five; 40])]), None);
    }
}
