//! Checking one field against the document's type before `update_field` writes it, without
//! reading the stored document: `T` is deserialized from a document that holds only that field.
//!
//! - Where `T` (or a struct on the field's path) names its fields (`deserialize_struct`), a name
//!   that is not among them is [`Probe::UnknownField`].
//! - The value is handed to the field's own `Deserialize`: a value of the wrong type fails there,
//!   and that failure is [`Probe::WrongType`].
//! - Every other field is absent, so `T` then reports a missing field (or succeeds, if the others
//!   have defaults): both mean the field itself fits.

use serde::de::{self, DeserializeOwned, Visitor};
use serde::forward_to_deserialize_any;
use std::fmt;

/// What the probe found wrong with the field.
#[derive(Debug, PartialEq)]
pub(crate) enum Probe {
    /// The field is not a field of the type (the struct on the path at `at` has no such name).
    UnknownField { at: String },
    /// The value does not deserialize as the field's type.
    WrongType(String),
}

/// Checks that `T` has field `path` (its names, outermost first) and that `value` fits it.
pub(crate) fn check_field<T: DeserializeOwned>(path: &[&str], value: tessera_value::Value<'_>) -> Result<(), Probe> {
    match T::deserialize(Level { path, depth: 0, value }) {
        Ok(_) => Ok(()),
        Err(ProbeError::Missing) => Ok(()),
        Err(ProbeError::Unknown { at }) => Err(Probe::UnknownField { at }),
        Err(ProbeError::Other(message)) => Err(Probe::WrongType(message)),
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
}

impl<'de> de::Deserializer<'de> for Level<'_, 'de> {
    type Error = ProbeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ProbeError> {
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
            return seed.deserialize(Level { path: level.path, depth: level.depth + 1, value: level.value });
        }
        // The field itself: its own type decides, through the format's serde reader.
        seed.deserialize(level.value).map_err(|error| ProbeError::Other(error.to_string()))
    }
}
