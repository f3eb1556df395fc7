//! The primary key as the planner sees it ([`KeyLayout`]): its fields, how query constants
//! encode as key parts, and how a planned key shows in `explain`. A record type knows this
//! from its derive ([`RecordKey`]); a dynamic collection from its stored key kinds
//! ([`KindsKey`]). The planner and the candidate runner (`engine`) depend on nothing else
//! about the record, so typed and dynamic queries share them.

use super::{KeyKind, Record, key_display};
use crate::query::Literal;
use std::marker::PhantomData;

/// What the planner needs to know about a collection's primary key.
pub(crate) trait KeyLayout {
    /// The key fields, in key order; empty when the key's encoding is unknown (a dynamic
    /// handle on an empty collection of an old schema), which plans no key access.
    fn key_fields(&self) -> &[&str];
    /// Encodes a whole key given as one query constant per key field; `false` when a constant
    /// does not convert exactly to its field's key part (the planner then scans).
    fn encode_key_literals(&self, literals: &[Literal], out: &mut Vec<u8>) -> bool;
    /// Encodes the leading key fields given as query constants (at most one per field, in key
    /// order); `false` when a constant does not convert exactly or there are too many.
    fn encode_key_prefix(&self, literals: &[Literal], out: &mut Vec<u8>) -> bool;
    /// How a plan shows this collection's keys.
    fn key_text(&self) -> KeyText;
}

/// How a plan shows a primary key (or a prefix of one, for a range bound).
#[derive(Debug, Clone)]
pub(crate) enum KeyText {
    /// A record type's [`Record::display_key`].
    Record(fn(&[u8]) -> Option<String>),
    /// A dynamic collection's key kinds, shown as a record type with those fields would.
    Kinds(Vec<KeyKind>),
}

impl KeyText {
    /// The key as text: its values where they read, else its bytes.
    pub(crate) fn show(&self, key: &[u8]) -> String {
        self.read(key).unwrap_or_else(|| key_display(key))
    }

    /// The key (or a prefix of whole parts) as its values, if the bytes read as one.
    pub(crate) fn read(&self, key: &[u8]) -> Option<String> {
        match self {
            KeyText::Record(display) => display(key),
            KeyText::Kinds(kinds) => show_kinds(kinds, key),
        }
    }
}

/// `key` (or a prefix of whole parts) read with `kinds`, in a record type's `display_key`
/// format: one part bare, several as `(2, "k1")`. `None` for parts a record type's key does
/// not show (floats, bytes) or bytes that are not such a key.
fn show_kinds(kinds: &[KeyKind], key: &[u8]) -> Option<String> {
    let quote = kinds.len() > 1;
    let mut parts = Vec::with_capacity(kinds.len());
    let mut rest = key;
    for kind in kinds {
        if !parts.is_empty() && rest.is_empty() {
            break;
        }
        let (part, next) = match kind {
            KeyKind::String => {
                let (bytes, next) = crate::store::key::decode_bytes(rest)?;
                let text = String::from_utf8_lossy(&bytes).into_owned();
                (if quote { format!("{text:?}") } else { text }, next)
            }
            KeyKind::F32 | KeyKind::F64 | KeyKind::Bytes => return None,
            _ => kind.display(rest)?,
        };
        parts.push(part);
        rest = next;
    }
    if !rest.is_empty() {
        return None;
    }
    Some(if quote { format!("({})", parts.join(", ")) } else { parts.concat() })
}

/// The key layout of record type `T` (zero-sized).
pub(crate) struct RecordKey<T>(PhantomData<fn() -> T>);

impl<T: Record> RecordKey<T> {
    pub(crate) const LAYOUT: RecordKey<T> = RecordKey(PhantomData);
}

impl<T: Record> KeyLayout for RecordKey<T> {
    fn key_fields(&self) -> &[&str] {
        T::KEY_FIELDS
    }

    fn encode_key_literals(&self, literals: &[Literal], out: &mut Vec<u8>) -> bool {
        T::encode_key_literals(literals, out)
    }

    fn encode_key_prefix(&self, literals: &[Literal], out: &mut Vec<u8>) -> bool {
        T::encode_key_prefix(literals, out)
    }

    fn key_text(&self) -> KeyText {
        KeyText::Record(T::display_key)
    }
}

/// The key layout of a dynamic collection: its key fields and their stored [`KeyKind`]s.
pub(crate) struct KindsKey<'a> {
    fields: Vec<&'a str>,
    kinds: &'a [KeyKind],
}

impl<'a> KindsKey<'a> {
    /// The layout of key `fields` encoded as `kinds`; with no fields (nothing planned on the
    /// key) when the kinds are unknown.
    pub(crate) fn new(fields: &'a [String], kinds: &'a [KeyKind]) -> KindsKey<'a> {
        if fields.len() != kinds.len() {
            return KindsKey { fields: Vec::new(), kinds: &[] };
        }
        KindsKey { fields: fields.iter().map(String::as_str).collect(), kinds }
    }
}

impl KeyLayout for KindsKey<'_> {
    fn key_fields(&self) -> &[&str] {
        &self.fields
    }

    fn encode_key_literals(&self, literals: &[Literal], out: &mut Vec<u8>) -> bool {
        literals.len() == self.kinds.len() && self.encode_key_prefix(literals, out)
    }

    fn encode_key_prefix(&self, literals: &[Literal], out: &mut Vec<u8>) -> bool {
        assert_eq!(self.fields.len(), self.kinds.len(), "a layout has a kind per key field");
        literals.len() <= self.kinds.len() && self.kinds.iter().zip(literals).all(|(kind, literal)| kind.encode_literal(literal, out))
    }

    fn key_text(&self) -> KeyText {
        KeyText::Kinds(self.kinds.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::key::encode;

    #[test]
    fn kinds_encode_literals_as_the_record_type_would() {
        let fields = ["day".to_owned(), "name".to_owned()];
        let kinds = [KeyKind::U16, KeyKind::String];
        let layout = KindsKey::new(&fields, &kinds);
        let mut key = Vec::new();
        assert!(layout.encode_key_literals(&[Literal::Int(3), Literal::Str("a".into())], &mut key));
        assert_eq!(key, encode(&(3u16, "a")));
        let mut prefix = Vec::new();
        assert!(layout.encode_key_prefix(&[Literal::UInt(3)], &mut prefix));
        assert_eq!(prefix, encode(&3u16));
        assert!(!layout.encode_key_literals(&[Literal::Int(3)], &mut Vec::new()), "a whole key needs every field");
        assert!(!layout.encode_key_prefix(&[Literal::Int(70_000)], &mut Vec::new()), "out of range for u16");
        assert!(!layout.encode_key_prefix(&[Literal::Str("3".into())], &mut Vec::new()), "a string is no integer");
        assert!(!layout.encode_key_prefix(&[Literal::Int(3), Literal::Int(4)], &mut Vec::new()), "an integer is no string");
        assert_eq!(layout.key_text().show(&encode(&(3u16, "a"))), r#"(3, "a")"#);
        assert_eq!(layout.key_text().show(&encode(&3u16)), "(3)");
    }

    #[test]
    fn unknown_kinds_plan_no_key_access() {
        let fields = ["id".to_owned()];
        let layout = KindsKey::new(&fields, &[]);
        assert!(layout.key_fields().is_empty());
        assert!(!layout.encode_key_literals(&[Literal::Int(1)], &mut Vec::new()));
    }
}
