//! A `serde::Deserializer` over [`Value`]: strings and bytes are borrowed from the document.
//!
//! Shapes follow serde_json's conventions, so a type reads back what [`crate::to_vec`] wrote
//! and what the same JSON would give: enums are externally tagged (`"Variant"` or
//! `{"Variant": …}`), `Option::None` is null, and structs are dicts.

use crate::error::DecodeError;
use crate::reader::{Array, Dict, Doc, Kind, Value};
use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};
use serde::forward_to_deserialize_any;

/// Decodes a `T` from a value, borrowing strings and bytes from its document.
///
/// ```
/// #[derive(serde::Deserialize, Debug, PartialEq)]
/// struct Person<'a> { name: &'a str, age: u8 }
/// let bytes = tessera_value::from_json(br#"{"name": "Ada", "age": 36}"#).unwrap();
/// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
/// let person: Person = tessera_value::from_value(doc.root()).unwrap();
/// assert_eq!(person, Person { name: "Ada", age: 36 });
/// ```
pub fn from_value<'de, T: de::Deserialize<'de>>(value: Value<'de>) -> Result<T, DecodeError> {
    T::deserialize(value)
}

/// Validates `bytes` and decodes a `T` from the root.
pub fn from_slice<'de, T: de::Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, DecodeError> {
    let doc = Doc::from_untrusted(bytes).map_err(|error| DecodeError { message: error.to_string() })?;
    from_value(doc.root())
}

impl<'de> de::Deserializer<'de> for Value<'de> {
    type Error = DecodeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.kind() {
            Kind::Null => visitor.visit_unit(),
            Kind::Bool => visitor.visit_bool(self.as_bool().unwrap_or(false)),
            Kind::Int => visitor.visit_i64(self.as_i64().unwrap_or(0)),
            Kind::UInt => visitor.visit_u64(self.as_u64().unwrap_or(0)),
            Kind::Float => visitor.visit_f64(self.as_f64().unwrap_or(0.0)),
            Kind::String => visitor.visit_borrowed_str(self.as_str().unwrap_or("")),
            Kind::Binary => visitor.visit_borrowed_bytes(self.as_bytes().unwrap_or(&[])),
            Kind::Array => visitor.visit_seq(SeqAccess { array: self.as_array().expect("array"), next: 0 }),
            Kind::Dict => visitor.visit_map(MapAccess { dict: self.as_dict().expect("dict"), next: 0, value: None }),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        if self.kind() == Kind::Null {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, DecodeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        if let Some(variant) = self.as_str() {
            return visitor.visit_enum(variant.into_deserializer());
        }
        match self.as_dict() {
            Some(dict) if dict.len() == 1 => {
                let (variant, value) = dict.entry(0).expect("one entry");
                visitor.visit_enum(EnumAccess { variant, value })
            }
            _ => Err(de::Error::invalid_type(unexpected(&self), &"a string or a dict with one entry (an enum)")),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct identifier
    }
}

fn unexpected<'a>(value: &Value<'a>) -> de::Unexpected<'a> {
    match value.kind() {
        Kind::Null => de::Unexpected::Unit,
        Kind::Bool => de::Unexpected::Bool(value.as_bool().unwrap_or(false)),
        Kind::Int => de::Unexpected::Signed(value.as_i64().unwrap_or(0)),
        Kind::UInt => de::Unexpected::Unsigned(value.as_u64().unwrap_or(0)),
        Kind::Float => de::Unexpected::Float(value.as_f64().unwrap_or(0.0)),
        Kind::String => de::Unexpected::Str(value.as_str().unwrap_or("")),
        Kind::Binary => de::Unexpected::Bytes(value.as_bytes().unwrap_or(&[])),
        Kind::Array => de::Unexpected::Seq,
        Kind::Dict => de::Unexpected::Map,
    }
}

struct SeqAccess<'de> {
    array: Array<'de>,
    next: usize,
}

impl<'de> de::SeqAccess<'de> for SeqAccess<'de> {
    type Error = DecodeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, DecodeError> {
        match self.array.get(self.next) {
            Some(value) => {
                self.next += 1;
                seed.deserialize(value).map(Some)
            }
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.array.len() - self.next)
    }
}

struct MapAccess<'de> {
    dict: Dict<'de>,
    next: usize,
    value: Option<Value<'de>>,
}

impl<'de> de::MapAccess<'de> for MapAccess<'de> {
    type Error = DecodeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, DecodeError> {
        match self.dict.entry(self.next) {
            Some((key, value)) => {
                self.next += 1;
                self.value = Some(value);
                seed.deserialize(BorrowedStrDeserializer::new(key)).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DecodeError> {
        let value = self.value.take().ok_or_else(|| de::Error::custom("value requested before key"))?;
        seed.deserialize(value)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.dict.len() - self.next)
    }
}

struct EnumAccess<'de> {
    variant: &'de str,
    value: Value<'de>,
}

impl<'de> de::EnumAccess<'de> for EnumAccess<'de> {
    type Error = DecodeError;
    type Variant = Value<'de>;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Value<'de>), DecodeError> {
        let variant = seed.deserialize(BorrowedStrDeserializer::<DecodeError>::new(self.variant))?;
        Ok((variant, self.value))
    }
}

impl<'de> de::VariantAccess<'de> for Value<'de> {
    type Error = DecodeError;

    fn unit_variant(self) -> Result<(), DecodeError> {
        match self.kind() {
            Kind::Null => Ok(()),
            _ => Err(de::Error::invalid_type(unexpected(&self), &"null (a unit variant)")),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, DecodeError> {
        seed.deserialize(self)
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, DecodeError> {
        de::Deserializer::deserialize_seq(self, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(self, _fields: &'static [&'static str], visitor: V) -> Result<V::Value, DecodeError> {
        de::Deserializer::deserialize_map(self, visitor)
    }
}
