//! Checking one field against the document's type before `update_field` writes it, without
//! reading the stored document: `T` is deserialized from a document that holds only that field.
//!
//! - Where `T` (or a struct on the field's path) names its fields (`deserialize_struct`), a name
//!   that is not among them is [`Probe::UnknownField`].
//! - The value is handed to the field's own `Deserialize`: a value of the wrong type fails there,
//!   and that failure is [`Probe::WrongType`].
//! - Every other field is absent, so `T` then reports a missing field (or succeeds, if the others
//!   have defaults).
//!
//! That last step decides only for plain structs: each level of the path a derived struct
//! (`deserialize_struct` with serde's `struct Name` visitor), whose fields decode each on its
//! own, so that a field that fits fits beside any stored siblings. A flattened struct, a tagged
//! or untagged enum (whose visitor buffers the value, or reads the tag apart from the content),
//! a map or a hand-written `Deserialize` can make a missing sibling hide a value that does not
//! fit, or a value that fits alone clash with the stored ones: for those the probe answers
//! [`Checked::Inconclusive`], and the caller decodes the whole document as it would be after
//! the write before writing anything.

use serde::de::{self, DeserializeOwned, Visitor};
use serde::forward_to_deserialize_any;
use std::cell::Cell;
use std::fmt;

/// What the probe found wrong with the field.
#[derive(Debug, PartialEq)]
pub(crate) enum Probe {
    /// The field is not a field of the type (the struct on the path at `at` has no such name).
    UnknownField { at: String },
    /// The value does not deserialize as the field's type.
    WrongType(String),
}

/// What the probe could decide about a field that it did not find wrong.
#[derive(Debug, PartialEq, Clone, Copy)]
pub(crate) enum Checked {
    /// Every level of the path is a plain struct and the value fitted the field's own type: the
    /// field fits whatever its stored siblings are (given that it is stored under this name
    /// already, which rules out an alias: the caller checks that).
    Conclusive,
    /// The probe cannot tell: the caller must decode the document as the write would leave it.
    Inconclusive,
}

/// What the probe saw on its way to the field.
struct Seen {
    /// Every level so far was a plain struct (or an `Option` or newtype around one).
    plain: Cell<bool>,
    /// The field's own `Deserialize` took the value: `Some(true)` if it accepted it.
    value_fitted: Cell<Option<bool>>,
}

/// Checks that `T` has field `path` (its names, outermost first) and that `value` fits it.
pub(crate) fn check_field<T: DeserializeOwned>(path: &[&str], value: tessera_value::Value<'_>) -> Result<Checked, Probe> {
    let seen = Seen { plain: Cell::new(true), value_fitted: Cell::new(None) };
    let outcome = T::deserialize(Level { path, depth: 0, value, seen: &seen });
    let plain = seen.plain.get();
    match (outcome, seen.value_fitted.get()) {
        // A name a struct on the path does not declare: that struct ignores it, or refuses it.
        (Err(ProbeError::Unknown { at }), _) => Err(Probe::UnknownField { at }),
        (Err(ProbeError::Other(message)), Some(false)) if plain => Err(Probe::WrongType(message)),
        (Ok(_) | Err(ProbeError::Missing), Some(true)) if plain => Ok(Checked::Conclusive),
        _ => Ok(Checked::Inconclusive),
    }
}

#[derive(Debug)]
enum ProbeError {
    /// A field other than the probed one is absent: the probed one fitted.
    Missing,
    Unknown {
        at: String,
    },
    Other(String),
}

impl fmt::Display for ProbeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeError::Missing => f.write_str("a field is missing"),
            ProbeError::Unknown { at } => write!(f, "no such field at `{at}`"),
            ProbeError::Other(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for ProbeError {}

impl de::Error for ProbeError {
    fn custom<M: fmt::Display>(message: M) -> Self {
        ProbeError::Other(message.to_string())
    }

    fn missing_field(_field: &'static str) -> Self {
        ProbeError::Missing
    }
}

/// One level of the probed path: a map with the single entry `path[depth]`.
struct Level<'p, 'v> {
    path: &'p [&'p str],
    depth: usize,
    value: tessera_value::Value<'v>,
    seen: &'p Seen,
}

/// Whether a visitor is serde's derived visitor of a plain struct (whose `expecting` reads
/// `struct Name`), read without allocating: the text stops being written at the prefix.
fn is_derived_struct<'de, V: Visitor<'de>>(visitor: &V) -> bool {
    struct Prefix {
        matched: usize,
    }
    const WANTED: &[u8] = b"struct ";
    impl fmt::Write for Prefix {
        fn write_str(&mut self, text: &str) -> fmt::Result {
            for &byte in text.as_bytes() {
                if self.matched == WANTED.len() || byte != WANTED[self.matched] {
                    return Err(fmt::Error); // decided: stop writing
                }
                self.matched += 1;
            }
            Ok(())
        }
    }
    let mut prefix = Prefix { matched: 0 };
    let _ = fmt::write(&mut prefix, format_args!("{}", visitor as &dyn de::Expected));
    prefix.matched == WANTED.len()
}

impl<'de> de::Deserializer<'de> for Level<'_, 'de> {
    type Error = ProbeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
        // A map, a flattened struct, a tagged or untagged enum...: not a plain struct.
        self.seen.plain.set(false);
        visitor.visit_map(Entry { level: Some(self) })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ProbeError> {
        let name = self.path[self.depth];
        if !fields.contains(&name) {
            return Err(ProbeError::Unknown { at: self.path[..=self.depth].join(".") });
        }
        if !is_derived_struct(&visitor) {
            self.seen.plain.set(false); // an adjacently tagged enum, a hand-written visitor...
        }
        visitor.visit_map(Entry { level: Some(self) })
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, ProbeError> {
        visitor.visit_newtype_struct(self)
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit
        unit_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

/// The single entry of a [`Level`].
struct Entry<'p, 'v> {
    level: Option<Level<'p, 'v>>,
}

impl<'v> de::MapAccess<'v> for Entry<'_, 'v> {
    type Error = ProbeError;

    fn next_key_seed<K: de::DeserializeSeed<'v>>(&mut self, seed: K) -> Result<Option<K::Value>, ProbeError> {
        let Some(level) = &self.level else { return Ok(None) };
        let name = level.path[level.depth].to_owned();
        seed.deserialize(de::value::StringDeserializer::<ProbeError>::new(name)).map(Some)
    }

    fn next_value_seed<V: de::DeserializeSeed<'v>>(&mut self, seed: V) -> Result<V::Value, ProbeError> {
        let level = self.level.take().ok_or_else(|| ProbeError::Other("a value asked for twice".into()))?;
        if level.depth + 1 < level.path.len() {
            return seed.deserialize(Level { path: level.path, depth: level.depth + 1, value: level.value, seen: level.seen });
        }
        // The field itself: its own type decides, through the format's serde reader.
        let result = seed.deserialize(level.value).map_err(|error| ProbeError::Other(error.to_string()));
        level.seen.value_fitted.set(Some(result.is_ok()));
        result
    }
}
