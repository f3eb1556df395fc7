//! A `serde::Deserializer` over [`Value`]: strings and bytes are borrowed from the document.
//!
//! Shapes follow serde_json's conventions, so a type reads back what [`crate::to_vec`] wrote
//! and what the same JSON would give: enums are externally tagged (`"Variant"` or
//! `{"Variant": …}`), `Option::None` is null, and structs are dicts.
//!
//! Internally each nested value is a [`Reader`]: a reference to the one [`Doc`] of the call plus
//! the value's position, so descending costs no copy of the document handle.

use crate::error::DecodeError;
use crate::layout::*;
use crate::reader::{Doc, Repr, Shape, Value};
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
    let doc = value.doc();
    T::deserialize(Reader { doc: &doc, repr: value.repr() })
}

/// Validates `bytes` and decodes a `T` from the root.
///
/// ```
/// let bytes = tessera_value::from_json(br#"{"x": 1, "y": [true]}"#).unwrap();
/// let (x, y): (u8, Vec<bool>) = {
///     #[derive(serde::Deserialize)]
///     struct Shape { x: u8, y: Vec<bool> }
///     let shape: Shape = tessera_value::from_slice(&bytes).unwrap();
///     (shape.x, shape.y)
/// };
/// assert_eq!((x, y), (1, vec![true]));
/// assert!(tessera_value::from_slice::<u8>(&bytes[1..]).is_err()); // not a document
/// ```
pub fn from_slice<'de, T: de::Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, DecodeError> {
    let doc = Doc::from_untrusted(bytes).map_err(|error| DecodeError { message: error.to_string() })?;
    from_value(doc.root())
}

impl<'de> de::Deserializer<'de> for Value<'de> {
    type Error = DecodeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let doc = self.doc();
        de::Deserializer::deserialize_any(Reader { doc: &doc, repr: self.repr() }, visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let doc = self.doc();
        de::Deserializer::deserialize_option(Reader { doc: &doc, repr: self.repr() }, visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        let doc = self.doc();
        de::Deserializer::deserialize_enum(Reader { doc: &doc, repr: self.repr() }, name, variants, visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, DecodeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let doc = self.doc();
        de::Deserializer::deserialize_f32(Reader { doc: &doc, repr: self.repr() }, visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let doc = self.doc();
        de::Deserializer::deserialize_f64(Reader { doc: &doc, repr: self.repr() }, visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let doc = self.doc();
        de::Deserializer::deserialize_str(Reader { doc: &doc, repr: self.repr() }, visitor)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let doc = self.doc();
        de::Deserializer::deserialize_string(Reader { doc: &doc, repr: self.repr() }, visitor)
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 char
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

/// One value being deserialized: the document of the call and where the value is.
#[derive(Clone, Copy)]
struct Reader<'s, 'de> {
    doc: &'s Doc<'de>,
    repr: Repr,
}

impl<'de> Reader<'_, 'de> {
    fn value(&self) -> Value<'de> {
        Value::new(*self.doc, self.repr)
    }

    fn unexpected(&self) -> de::Unexpected<'de> {
        let value = self.value();
        match value.kind() {
            crate::Kind::Null => de::Unexpected::Unit,
            crate::Kind::Bool => de::Unexpected::Bool(value.as_bool().unwrap_or(false)),
            crate::Kind::Int => de::Unexpected::Signed(value.as_i64().unwrap_or(0)),
            crate::Kind::UInt => de::Unexpected::Unsigned(value.as_u64().unwrap_or(0)),
            crate::Kind::Float => de::Unexpected::Float(value.as_f64().unwrap_or(0.0)),
            crate::Kind::String => de::Unexpected::Str(value.as_str().unwrap_or("")),
            crate::Kind::Binary => de::Unexpected::Bytes(value.as_bytes().unwrap_or(&[])),
            crate::Kind::Array => de::Unexpected::Seq,
            crate::Kind::Dict => de::Unexpected::Map,
        }
    }
}

impl<'de> Reader<'_, 'de> {
    /// A packed vector or matrix (or a row of one), as a sequence.
    fn visit_packed<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let array = self.value().as_array().expect("a packed item or row is an array");
        visitor.visit_seq(PackedSeqAccess { doc: self.doc, array, next: 0 })
    }
}

impl<'s, 'de> de::Deserializer<'de> for Reader<'s, 'de> {
    type Error = DecodeError;

    #[inline]
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let pos = match self.repr {
            Repr::Null => return visitor.visit_unit(),
            Repr::Bool(b) => return visitor.visit_bool(b),
            Repr::Int(v) => return visitor.visit_i64(v),
            Repr::Float(v) => return visitor.visit_f64(v),
            Repr::Row { .. } => return self.visit_packed(visitor),
            Repr::Item(pos) => pos,
        };
        let tag = self.doc.bytes()[pos];
        if tag >= TAG_STRING {
            return visitor.visit_borrowed_str(self.doc.item_str(pos));
        }
        match tag & 0xF0 {
            0x50 => visitor.visit_seq(SeqAccess { doc: self.doc, pos, shape: self.doc.shape(pos, false), next: 0 }),
            0x60 => visitor.visit_map(MapAccess { doc: self.doc, pos, shape: self.doc.shape(pos, true), next: 0 }),
            TAG_PACKED => self.visit_packed(visitor),
            _ => {
                let value = self.value();
                match value.kind() {
                    crate::Kind::Int => visitor.visit_i64(value.as_i64().unwrap_or(0)),
                    crate::Kind::UInt => visitor.visit_u64(value.as_u64().unwrap_or(0)),
                    crate::Kind::Float => visitor.visit_f64(value.as_f64().unwrap_or(0.0)),
                    crate::Kind::Binary => visitor.visit_borrowed_bytes(value.as_bytes().unwrap_or(&[])),
                    _ => visitor.visit_unit(),
                }
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        if self.repr == Repr::Null { visitor.visit_none() } else { visitor.visit_some(self) }
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
        let value = self.value();
        if let Some(variant) = value.as_str() {
            return visitor.visit_enum(variant.into_deserializer());
        }
        match value.as_dict() {
            Some(dict) if dict.len() == 1 => {
                let (variant, value) = dict.entry(0).expect("one entry");
                visitor.visit_enum(EnumAccess { variant, value: Reader { doc: self.doc, repr: value.repr() } })
            }
            _ => Err(de::Error::invalid_type(self.unexpected(), &"a string or a dict with one entry (an enum)")),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        visitor.visit_unit()
    }

    /// A number as the nearest `f32`; a finite double beyond `f32`'s range is refused rather
    /// than narrowed to an infinity (serde's own `f32` would take the infinity), and so is an
    /// integer the `f32` does not hold exactly (serde's would round it).
    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let value = self.value();
        match value.as_f64() {
            Some(float) => match crate::codec::narrow_to_f32(float) {
                Some(narrowed) if value.is_float() || crate::codec::integer_is_exactly(value, narrowed as f64) => {
                    visitor.visit_f32(narrowed)
                }
                Some(_) => Err(de::Error::custom(format_args!("integer {value:?} has no exact f32"))),
                None => Err(de::Error::custom(format_args!("number {float} out of range for f32"))),
            },
            None => self.deserialize_any(visitor),
        }
    }

    /// A number as an `f64`; an integer the `f64` does not hold exactly (beyond 2^53) is
    /// refused (serde's own `f64` would round it).
    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let value = self.value();
        match value.as_f64() {
            Some(float) if !value.is_float() && !crate::codec::integer_is_exactly(value, float) => {
                Err(de::Error::custom(format_args!("integer {value:?} has no exact f64")))
            }
            _ => self.deserialize_any(visitor),
        }
    }

    /// A string; binary data is not one (serde's string visitors would take bytes that are
    /// UTF-8, where the generated codec refuses them).
    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        if self.value().kind() == crate::Kind::Binary {
            return Err(de::Error::invalid_type(self.unexpected(), &visitor));
        }
        self.deserialize_any(visitor)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_str(visitor)
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 char
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct identifier
    }
}

struct SeqAccess<'s, 'de> {
    doc: &'s Doc<'de>,
    pos: usize,
    shape: Shape,
    next: usize,
}

impl<'de> de::SeqAccess<'de> for SeqAccess<'_, 'de> {
    type Error = DecodeError;

    #[inline]
    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, DecodeError> {
        if self.next == self.shape.len {
            return Ok(None);
        }
        let repr = self.doc.slot(self.pos, &self.shape, self.next);
        self.next += 1;
        seed.deserialize(Reader { doc: self.doc, repr }).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.shape.len - self.next)
    }
}

struct PackedSeqAccess<'s, 'de> {
    doc: &'s Doc<'de>,
    array: crate::Array<'de>,
    next: usize,
}

impl<'de> de::SeqAccess<'de> for PackedSeqAccess<'_, 'de> {
    type Error = DecodeError;

    #[inline]
    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, DecodeError> {
        let Some(value) = self.array.get(self.next) else { return Ok(None) };
        self.next += 1;
        seed.deserialize(Reader { doc: self.doc, repr: value.repr() }).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.array.len() - self.next)
    }
}

struct MapAccess<'s, 'de> {
    doc: &'s Doc<'de>,
    pos: usize,
    shape: Shape,
    next: usize,
}

impl<'de> de::MapAccess<'de> for MapAccess<'_, 'de> {
    type Error = DecodeError;

    #[inline]
    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, DecodeError> {
        if self.next == self.shape.len {
            return Ok(None);
        }
        let name = self.doc.key_name(self.doc.key_at(&self.shape, self.next)).unwrap_or("");
        seed.deserialize(KeyDeserializer(name)).map(Some)
    }

    #[inline]
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DecodeError> {
        if self.next == self.shape.len {
            return Err(de::Error::custom("value requested after the last entry"));
        }
        let repr = self.doc.slot(self.pos, &self.shape, self.next);
        self.next += 1;
        seed.deserialize(Reader { doc: self.doc, repr })
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.shape.len - self.next)
    }
}

/// A dict key. Keys are strings; integer and boolean map keys (which [`crate::to_vec`] writes
/// as their text, as serde_json does) are parsed back from it. Only the text `to_vec` writes
/// is an integer key: `"05"` or `"+5"` would read as 5 and replace the entry of `"5"`.
struct KeyDeserializer<'de>(&'de str);

/// True if `text`, which parsed as an integer, is written as `to_vec` writes one: no `+`, no
/// leading zero, no `-0`.
fn is_canonical_integer(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    match digits.as_bytes() {
        [b'0'] => digits.len() == text.len(),
        [first, ..] => (b'1'..=b'9').contains(first),
        [] => false,
    }
}

macro_rules! parse_key {
    ($($method:ident => $visit:ident: $type:ty),*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
            match self.0.parse::<$type>() {
                Ok(value) if is_canonical_integer(self.0) => visitor.$visit(value),
                _ => visitor.visit_borrowed_str(self.0),
            }
        }
    )*};
}

impl<'de> de::Deserializer<'de> for KeyDeserializer<'de> {
    type Error = DecodeError;

    #[inline]
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        visitor.visit_borrowed_str(self.0)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.0.parse::<bool>() {
            Ok(value) => visitor.visit_bool(value),
            Err(_) => visitor.visit_borrowed_str(self.0),
        }
    }

    parse_key!(deserialize_i8 => visit_i8: i8, deserialize_i16 => visit_i16: i16,
        deserialize_i32 => visit_i32: i32, deserialize_i64 => visit_i64: i64, deserialize_i128 => visit_i128: i128,
        deserialize_u8 => visit_u8: u8, deserialize_u16 => visit_u16: u16, deserialize_u32 => visit_u32: u32,
        deserialize_u64 => visit_u64: u64, deserialize_u128 => visit_u128: u128);

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        visitor.visit_enum(self.0.into_deserializer())
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, DecodeError> {
        visitor.visit_newtype_struct(self)
    }

    forward_to_deserialize_any! {
        f32 f64 char str string bytes byte_buf option unit unit_struct seq tuple tuple_struct map struct
        identifier ignored_any
    }
}

struct EnumAccess<'s, 'de> {
    variant: &'de str,
    value: Reader<'s, 'de>,
}

impl<'s, 'de> de::EnumAccess<'de> for EnumAccess<'s, 'de> {
    type Error = DecodeError;
    type Variant = Reader<'s, 'de>;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Reader<'s, 'de>), DecodeError> {
        let variant = seed.deserialize(BorrowedStrDeserializer::<DecodeError>::new(self.variant))?;
        Ok((variant, self.value))
    }
}

impl<'de> de::VariantAccess<'de> for Reader<'_, 'de> {
    type Error = DecodeError;

    fn unit_variant(self) -> Result<(), DecodeError> {
        match self.repr {
            Repr::Null => Ok(()),
            _ => Err(de::Error::invalid_type(self.unexpected(), &"null (a unit variant)")),
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
