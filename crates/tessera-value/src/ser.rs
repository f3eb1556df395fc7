//! A `serde::Serializer` that writes straight into an [`Encoder`].
//!
//! Shapes follow serde_json's conventions (see `de.rs`), so `to_vec(&x)` and
//! `from_json(serde_json::to_vec(&x))` give equal documents, except that bytes stay binary.

use crate::encoder::Encoder;
use crate::error::EncodeError;
use crate::shared_keys::SharedKeys;
use serde::ser::{self, Serialize};

/// Encodes any `Serialize` value as a document.
///
/// ```
/// #[derive(serde::Serialize)]
/// struct Point { x: i32, y: i32 }
/// let bytes = tessera_value::to_vec(&Point { x: 1, y: -2 }).unwrap();
/// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
/// assert_eq!(doc.root().to_json(), r#"{"x":1,"y":-2}"#);
/// ```
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, EncodeError> {
    // The finished buffer itself is handed out (a large document is not copied); the encoder
    // keeps a fresh one of the same capacity.
    encode_on_this_thread(value, Encoder::finish_reuse)
}

/// [`to_vec`] as a shared slice, made with one allocation: the document is encoded in this
/// thread's reused buffers and copied once into the `Arc`, where `Arc::from(to_vec(..)?)`
/// allocates twice and copies too (a cache of small values, such as a dictionary's, keeps
/// many of these).
///
/// ```
/// let shared = tessera_value::to_shared(&[1, 2, 3]).unwrap();
/// assert_eq!(&*shared, tessera_value::to_vec(&[1, 2, 3]).unwrap().as_slice());
/// let doc = tessera_value::Doc::from_untrusted(&shared).unwrap();
/// assert_eq!(doc.root().to_json(), "[1,2,3]");
/// ```
pub fn to_shared<T: Serialize + ?Sized>(value: &T) -> Result<std::sync::Arc<[u8]>, EncodeError> {
    encode_on_this_thread(value, |encoder| encoder.finish_with(|bytes: &[u8]| std::sync::Arc::from(bytes)))
}

/// Serializes `value` with this thread's encoder, whose buffers are reused from call to call,
/// then `finish`es the document.
fn encode_on_this_thread<T: Serialize + ?Sized, R>(
    value: &T,
    finish: impl FnOnce(&mut Encoder<'static>) -> Result<R, EncodeError>,
) -> Result<R, EncodeError> {
    thread_local! {
        /// A per-thread encoder whose buffers are reused: encoding a small value then costs
        /// one allocation, for the result.
        static ENCODER: std::cell::RefCell<Encoder<'static>> = std::cell::RefCell::new(Encoder::new());
    }
    // The thread's encoder, unless it is in use (this is called from inside a `Serialize`
    // impl being encoded) or already destroyed (this is called from a thread-local destructor,
    // where `with` would panic, and a panic there aborts the process): then a fresh one.
    let mut finish = Some(finish);
    let reused = ENCODER.try_with(|cell| {
        let mut encoder = cell.try_borrow_mut().ok()?;
        // A `Serialize` impl that panicked half-way (inside a `Db::write` closure, which
        // catches panics) left its containers open: start from an empty document.
        encoder.reset();
        Some(match value.serialize(&mut *encoder) {
            Ok(()) => (finish.take().expect("a document is finished once"))(&mut encoder),
            Err(error) => {
                encoder.reset();
                Err(error)
            }
        })
    });
    if let Ok(Some(result)) = reused {
        return result;
    }
    let mut encoder = Encoder::new();
    value.serialize(&mut encoder)?;
    (finish.take().expect("a document is finished once"))(&mut encoder)
}

/// [`to_vec`] with dict keys taken from a shared-key table where possible.
///
/// ```
/// use std::collections::BTreeMap;
/// use tessera_value::{to_vec, to_vec_with_keys, Doc, SharedKeys};
/// let mut keys = SharedKeys::new();
/// keys.add("a_rather_long_field_name").unwrap();
/// let value = BTreeMap::from([("a_rather_long_field_name", 1)]);
/// let bytes = to_vec_with_keys(&value, &keys).unwrap();
/// assert!(bytes.len() < to_vec(&value).unwrap().len()); // the key is stored as an id
/// assert_eq!(Doc::from_untrusted_with_keys(&bytes, &keys).unwrap().root().to_json(), r#"{"a_rather_long_field_name":1}"#);
/// ```
pub fn to_vec_with_keys<T: Serialize + ?Sized>(value: &T, shared: &SharedKeys) -> Result<Vec<u8>, EncodeError> {
    let mut encoder = Encoder::with_shared_keys(shared);
    value.serialize(&mut encoder)?;
    encoder.finish()
}

/// The state of an open sequence, map or struct.
///
/// ```
/// use serde::ser::{SerializeSeq, Serializer};
/// let mut out = tessera_value::Encoder::new();
/// let mut seq = (&mut out).serialize_seq(Some(2))?; // a `Compound`
/// seq.serialize_element(&1)?;
/// seq.serialize_element("two")?;
/// seq.end()?;
/// let bytes = out.finish()?;
/// assert_eq!(tessera_value::Doc::from_untrusted(&bytes).unwrap().root().to_json(), r#"[1,"two"]"#);
/// # Ok::<(), tessera_value::EncodeError>(())
/// ```
pub struct Compound<'e, 'k> {
    encoder: &'e mut Encoder<'k>,
    /// The container sits inside a one-entry variant dict that must be closed too.
    in_variant: bool,
}

impl Compound<'_, '_> {
    fn end_array(self) -> Result<(), EncodeError> {
        self.encoder.end_array()?;
        if self.in_variant {
            self.encoder.end_dict()?;
        }
        Ok(())
    }
    fn end_dict(self) -> Result<(), EncodeError> {
        self.encoder.end_dict_refusing_repeats()?;
        if self.in_variant {
            self.encoder.end_dict()?;
        }
        Ok(())
    }
}

impl<'e, 'k> ser::Serializer for &'e mut Encoder<'k> {
    type Ok = ();
    type Error = EncodeError;
    type SerializeSeq = Compound<'e, 'k>;
    type SerializeTuple = Compound<'e, 'k>;
    type SerializeTupleStruct = Compound<'e, 'k>;
    type SerializeTupleVariant = Compound<'e, 'k>;
    type SerializeMap = Compound<'e, 'k>;
    type SerializeStruct = Compound<'e, 'k>;
    type SerializeStructVariant = Compound<'e, 'k>;

    fn serialize_bool(self, v: bool) -> Result<(), EncodeError> {
        self.push_bool(v)
    }
    fn serialize_i8(self, v: i8) -> Result<(), EncodeError> {
        self.push_i64(v as i64)
    }
    fn serialize_i16(self, v: i16) -> Result<(), EncodeError> {
        self.push_i64(v as i64)
    }
    fn serialize_i32(self, v: i32) -> Result<(), EncodeError> {
        self.push_i64(v as i64)
    }
    fn serialize_i64(self, v: i64) -> Result<(), EncodeError> {
        self.push_i64(v)
    }
    fn serialize_i128(self, v: i128) -> Result<(), EncodeError> {
        if let Ok(v) = i64::try_from(v) {
            self.push_i64(v)
        } else if let Ok(v) = u64::try_from(v) {
            self.push_u64(v)
        } else {
            Err(EncodeError::Message(format!("integer {v} does not fit in 64 bits")))
        }
    }
    fn serialize_u8(self, v: u8) -> Result<(), EncodeError> {
        self.push_i64(v as i64)
    }
    fn serialize_u16(self, v: u16) -> Result<(), EncodeError> {
        self.push_i64(v as i64)
    }
    fn serialize_u32(self, v: u32) -> Result<(), EncodeError> {
        self.push_i64(v as i64)
    }
    fn serialize_u64(self, v: u64) -> Result<(), EncodeError> {
        self.push_u64(v)
    }
    fn serialize_u128(self, v: u128) -> Result<(), EncodeError> {
        match u64::try_from(v) {
            Ok(v) => self.push_u64(v),
            Err(_) => Err(EncodeError::Message(format!("integer {v} does not fit in 64 bits"))),
        }
    }
    fn serialize_f32(self, v: f32) -> Result<(), EncodeError> {
        self.push_f32(v)
    }
    fn serialize_f64(self, v: f64) -> Result<(), EncodeError> {
        self.push_f64(v)
    }
    fn serialize_char(self, v: char) -> Result<(), EncodeError> {
        self.push_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), EncodeError> {
        self.push_str(v)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), EncodeError> {
        self.push_bytes(v)
    }
    fn serialize_none(self) -> Result<(), EncodeError> {
        self.push_null()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), EncodeError> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), EncodeError> {
        self.push_null()
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), EncodeError> {
        self.push_null()
    }
    fn serialize_unit_variant(self, _name: &'static str, _index: u32, variant: &'static str) -> Result<(), EncodeError> {
        self.push_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _name: &'static str, value: &T) -> Result<(), EncodeError> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), EncodeError> {
        self.begin_dict()?;
        self.key(variant)?;
        value.serialize(&mut *self)?;
        self.end_dict()
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'e, 'k>, EncodeError> {
        self.begin_array()?;
        Ok(Compound { encoder: self, in_variant: false })
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'e, 'k>, EncodeError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Compound<'e, 'k>, EncodeError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'e, 'k>, EncodeError> {
        self.begin_dict()?;
        self.key(variant)?;
        self.begin_array()?;
        Ok(Compound { encoder: self, in_variant: true })
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'e, 'k>, EncodeError> {
        self.begin_dict()?;
        Ok(Compound { encoder: self, in_variant: false })
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Compound<'e, 'k>, EncodeError> {
        self.serialize_map(None)
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'e, 'k>, EncodeError> {
        self.begin_dict()?;
        self.key(variant)?;
        self.begin_dict()?;
        Ok(Compound { encoder: self, in_variant: true })
    }
}

impl ser::SerializeSeq for Compound<'_, '_> {
    type Ok = ();
    type Error = EncodeError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), EncodeError> {
        value.serialize(&mut *self.encoder)
    }
    fn end(self) -> Result<(), EncodeError> {
        self.end_array()
    }
}

impl ser::SerializeTuple for Compound<'_, '_> {
    type Ok = ();
    type Error = EncodeError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), EncodeError> {
        value.serialize(&mut *self.encoder)
    }
    fn end(self) -> Result<(), EncodeError> {
        self.end_array()
    }
}

impl ser::SerializeTupleStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = EncodeError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), EncodeError> {
        value.serialize(&mut *self.encoder)
    }
    fn end(self) -> Result<(), EncodeError> {
        self.end_array()
    }
}

impl ser::SerializeTupleVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = EncodeError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), EncodeError> {
        value.serialize(&mut *self.encoder)
    }
    fn end(self) -> Result<(), EncodeError> {
        self.end_array()
    }
}

impl ser::SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = EncodeError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), EncodeError> {
        key.serialize(MapKey { encoder: &mut *self.encoder })
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), EncodeError> {
        value.serialize(&mut *self.encoder)
    }
    fn end(self) -> Result<(), EncodeError> {
        self.end_dict()
    }
}

impl ser::SerializeStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = EncodeError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), EncodeError> {
        self.encoder.key(key)?;
        value.serialize(&mut *self.encoder)
    }
    fn end(self) -> Result<(), EncodeError> {
        self.end_dict()
    }
}

impl ser::SerializeStructVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = EncodeError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), EncodeError> {
        self.encoder.key(key)?;
        value.serialize(&mut *self.encoder)
    }
    fn end(self) -> Result<(), EncodeError> {
        self.end_dict()
    }
}

/// Serializes a map key: strings as they are, integers, booleans and chars as their text
/// (as serde_json does); anything else is an error.
struct MapKey<'e, 'k> {
    encoder: &'e mut Encoder<'k>,
}

fn key_must_be_string() -> EncodeError {
    EncodeError::Message("map key must be a string, an integer, a bool or a char".into())
}

macro_rules! key_via_display {
    ($($method:ident: $type:ty),*) => {$(
        fn $method(self, v: $type) -> Result<(), EncodeError> {
            self.encoder.key(&v.to_string())
        }
    )*};
}

impl ser::Serializer for MapKey<'_, '_> {
    type Ok = ();
    type Error = EncodeError;
    type SerializeSeq = ser::Impossible<(), EncodeError>;
    type SerializeTuple = ser::Impossible<(), EncodeError>;
    type SerializeTupleStruct = ser::Impossible<(), EncodeError>;
    type SerializeTupleVariant = ser::Impossible<(), EncodeError>;
    type SerializeMap = ser::Impossible<(), EncodeError>;
    type SerializeStruct = ser::Impossible<(), EncodeError>;
    type SerializeStructVariant = ser::Impossible<(), EncodeError>;

    key_via_display!(serialize_bool: bool, serialize_i8: i8, serialize_i16: i16, serialize_i32: i32,
        serialize_i64: i64, serialize_i128: i128, serialize_u8: u8, serialize_u16: u16, serialize_u32: u32,
        serialize_u64: u64, serialize_u128: u128, serialize_char: char);

    fn serialize_str(self, v: &str) -> Result<(), EncodeError> {
        self.encoder.key(v)
    }
    fn serialize_unit_variant(self, _name: &'static str, _index: u32, variant: &'static str) -> Result<(), EncodeError> {
        self.encoder.key(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _name: &'static str, value: &T) -> Result<(), EncodeError> {
        value.serialize(self)
    }
    fn serialize_f32(self, _v: f32) -> Result<(), EncodeError> {
        Err(key_must_be_string())
    }
    fn serialize_f64(self, _v: f64) -> Result<(), EncodeError> {
        Err(key_must_be_string())
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<(), EncodeError> {
        Err(key_must_be_string())
    }
    fn serialize_none(self) -> Result<(), EncodeError> {
        Err(key_must_be_string())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<(), EncodeError> {
        Err(key_must_be_string())
    }
    fn serialize_unit(self) -> Result<(), EncodeError> {
        Err(key_must_be_string())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), EncodeError> {
        Err(key_must_be_string())
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(self, _: &'static str, _: u32, _: &'static str, _: &T) -> Result<(), EncodeError> {
        Err(key_must_be_string())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, EncodeError> {
        Err(key_must_be_string())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, EncodeError> {
        Err(key_must_be_string())
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeTupleStruct, EncodeError> {
        Err(key_must_be_string())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, EncodeError> {
        Err(key_must_be_string())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, EncodeError> {
        Err(key_must_be_string())
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, EncodeError> {
        Err(key_must_be_string())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, EncodeError> {
        Err(key_must_be_string())
    }
}
