//! Splitting a value into per-field documents, and assembling it back.

use super::{Document, PATH_SEPARATOR};
use crate::error::{Error, Result};
use serde::de::{self, DeserializeOwned, DeserializeSeed, Visitor};
use serde::ser::{self, Serialize};
use tessera_value::{Doc, EncodeError, Encoder};

/// The key suffix of field `name`: the name itself, or for deep documents the names along the
/// dotted path separated by 0x00.
pub(crate) fn path_of(name: &str, deep: bool) -> Result<std::borrow::Cow<'_, [u8]>> {
    if name.is_empty() || name.as_bytes().contains(&PATH_SEPARATOR) {
        return Err(Error::InvalidName { what: "document field", name: name.to_owned(), rule: "not empty, no NUL byte".into() });
    }
    if !deep {
        return Ok(std::borrow::Cow::Borrowed(name.as_bytes()));
    }
    if name.split('.').any(str::is_empty) {
        // `age.` or `a..b`: a step with no name, which no field has.
        return Err(Error::InvalidName {
            what: "deep document field path",
            name: name.to_owned(),
            rule: "no empty step between dots".into(),
        });
    }
    Ok(std::borrow::Cow::Owned(name.split('.').collect::<Vec<_>>().join("\0").into_bytes()))
}

/// The display name of a stored path (`a.b.c`).
fn display_name(path: &[u8]) -> String {
    String::from_utf8_lossy(path).replace('\0', ".")
}

pub(crate) fn transform_out<T>(document: &Document<T>, name: &str, bytes: Vec<u8>) -> Vec<u8> {
    match &document.collection.options.transform {
        Some(transform) => transform.encode(name, bytes),
        None => bytes,
    }
}

fn field_error<T>(document: &Document<T>, field: &str, message: impl std::fmt::Display) -> Error {
    Error::DocumentField {
        collection: document.collection.name.to_string(),
        id: document.id.to_string(),
        field: field.to_owned(),
        message: message.to_string(),
    }
}

/// A stored field's bytes, with the transform reversed.
fn transform_in<'b, T>(document: &Document<T>, name: &str, bytes: &'b [u8]) -> Result<std::borrow::Cow<'b, [u8]>> {
    match &document.collection.options.transform {
        Some(transform) => {
            transform.decode(name, bytes).map(std::borrow::Cow::Owned).map_err(|message| field_error(document, name, message))
        }
        None => Ok(std::borrow::Cow::Borrowed(bytes)),
    }
}

/// Decodes one stored field into `V`.
pub(crate) fn decode_field<T, V: DeserializeOwned>(document: &Document<T>, name: &str, stored: &[u8]) -> Result<V> {
    let bytes = transform_in(document, name, stored)?;
    let doc = crate::stored_doc::validate(&bytes).map_err(|error| field_error(document, name, error))?;
    tessera_value::from_value(doc.root()).map_err(|error| field_error(document, name, error))
}

// ------------------------------------------------------------------------------- encoding

/// Encodes `value` as (key, bytes) per field.
pub(crate) fn encode<T: Serialize>(document: &Document<T>, value: &T) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut split = Vec::with_capacity(8);
    value.serialize(Splitter { out: &mut split }).map_err(|error| field_error(document, "", error))?;
    if let Some(name) = repeated_name(&split) {
        // Both would be stored under one key (in a deep document, one as a value and one as
        // nested fields): the document would read back as another value, or not at all.
        return Err(field_error(document, name, "the value has this field twice (a flattened map repeating a field?): one would be lost"));
    }
    let deep = document.collection.options.deep;
    let mut encoded = Vec::with_capacity(split.len());
    for (name, bytes) in split {
        if name.is_empty() || name.as_bytes().contains(&PATH_SEPARATOR) || (deep && name.contains('.')) {
            return Err(field_error(document, &name, "field names must be non-empty, without NUL (or '.' in deep documents)"));
        }
        if deep {
            expand_deep(document, name.as_bytes().to_vec(), bytes, &mut encoded)?;
        } else {
            let bytes = transform_out(document, &name, bytes);
            encoded.push((document.field_key(name.as_bytes())?, bytes));
        }
    }
    if encoded.is_empty() {
        // Nothing would be stored, and a document is its stored fields: `get` would then say
        // there is no document (found by review). Refused rather than read back as absent.
        return Err(field_error(
            document,
            "",
            "a document needs at least one stored field: this value has none (an empty map, or every field skipped when serialized)",
        ));
    }
    Ok(encoded)
}

/// A field name the split value has more than once (a struct with a flattened map holding one
/// of its field names, or a hand-written `Serialize`), if any.
fn repeated_name(split: &[(FieldName, Vec<u8>)]) -> Option<&str> {
    /// Up to this many fields, pairs are compared in place (no allocation: a record's fields).
    const PAIRWISE_MAX: usize = 16;
    if split.len() <= PAIRWISE_MAX {
        return split
            .iter()
            .enumerate()
            .find(|(at, (name, _))| split[..*at].iter().any(|(earlier, _)| earlier == name))
            .map(|(_, (name, _))| &**name);
    }
    let mut names: Vec<&str> = split.iter().map(|(name, _)| &**name).collect();
    names.sort_unstable();
    names.windows(2).find(|pair| pair[0] == pair[1]).map(|pair| pair[0])
}

/// Deep decomposition: a non-empty dict becomes one key per entry, recursively.
pub(crate) fn expand_deep<T>(document: &Document<T>, path: Vec<u8>, bytes: Vec<u8>, out: &mut Vec<(Vec<u8>, Vec<u8>)>) -> Result<()> {
    let doc = Doc::from_trusted(&bytes)?;
    match doc.root().as_dict().filter(|dict| !dict.is_empty()) {
        None => {
            let name = display_name(&path);
            let bytes = transform_out(document, &name, bytes);
            out.push((document.field_key(&path)?, bytes));
        }
        Some(dict) => {
            for (child, value) in dict.iter() {
                if child.is_empty() || child.contains('.') || child.as_bytes().contains(&PATH_SEPARATOR) {
                    return Err(field_error(document, &display_name(&path), format!("nested key {child:?} cannot be a deep field name")));
                }
                let mut encoder = Encoder::new();
                encoder.push_value(value)?;
                let mut child_path = path.clone();
                child_path.push(PATH_SEPARATOR);
                child_path.extend_from_slice(child.as_bytes());
                expand_deep(document, child_path, encoder.finish()?, out)?;
            }
        }
    }
    Ok(())
}

/// A serializer that accepts a struct or a map with string keys and encodes each field value
/// as its own document.
/// Field names: borrowed for struct fields (no allocation), owned for map keys.
type FieldName = std::borrow::Cow<'static, str>;

struct Splitter<'o> {
    out: &'o mut Vec<(FieldName, Vec<u8>)>,
}

struct SplitFields<'o> {
    out: &'o mut Vec<(FieldName, Vec<u8>)>,
    key: Option<String>,
}

fn not_a_record() -> EncodeError {
    EncodeError::Message("a document must serialize as a struct or a map with string keys".into())
}

macro_rules! refuse {
    ($($method:ident($($arg:ty),*)),*) => {$(
        fn $method(self, $(_: $arg),*) -> Result<(), EncodeError> {
            Err(not_a_record())
        }
    )*};
}

impl<'o> ser::Serializer for Splitter<'o> {
    type Ok = ();
    type Error = EncodeError;
    type SerializeSeq = ser::Impossible<(), EncodeError>;
    type SerializeTuple = ser::Impossible<(), EncodeError>;
    type SerializeTupleStruct = ser::Impossible<(), EncodeError>;
    type SerializeTupleVariant = ser::Impossible<(), EncodeError>;
    type SerializeMap = SplitFields<'o>;
    type SerializeStruct = SplitFields<'o>;
    type SerializeStructVariant = ser::Impossible<(), EncodeError>;

    refuse!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
        serialize_none(),
        serialize_unit(),
        serialize_unit_struct(&'static str),
        serialize_unit_variant(&'static str, u32, &'static str)
    );

    fn serialize_some<V: Serialize + ?Sized>(self, value: &V) -> Result<(), EncodeError> {
        value.serialize(self)
    }
    fn serialize_newtype_struct<V: Serialize + ?Sized>(self, _name: &'static str, value: &V) -> Result<(), EncodeError> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<V: Serialize + ?Sized>(self, _: &'static str, _: u32, _: &'static str, _: &V) -> Result<(), EncodeError> {
        Err(not_a_record())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, EncodeError> {
        Err(not_a_record())
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, EncodeError> {
        Err(not_a_record())
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeTupleStruct, EncodeError> {
        Err(not_a_record())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, EncodeError> {
        Err(not_a_record())
    }
    fn serialize_map(self, _: Option<usize>) -> Result<SplitFields<'o>, EncodeError> {
        Ok(SplitFields { out: self.out, key: None })
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<SplitFields<'o>, EncodeError> {
        Ok(SplitFields { out: self.out, key: None })
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, EncodeError> {
        Err(not_a_record())
    }
}

impl ser::SerializeStruct for SplitFields<'_> {
    type Ok = ();
    type Error = EncodeError;
    fn serialize_field<V: Serialize + ?Sized>(&mut self, name: &'static str, value: &V) -> Result<(), EncodeError> {
        self.out.push((FieldName::Borrowed(name), tessera_value::to_vec(value)?));
        Ok(())
    }
    fn end(self) -> Result<(), EncodeError> {
        Ok(())
    }
}

impl ser::SerializeMap for SplitFields<'_> {
    type Ok = ();
    type Error = EncodeError;
    fn serialize_key<K: Serialize + ?Sized>(&mut self, key: &K) -> Result<(), EncodeError> {
        let bytes = tessera_value::to_vec(key)?;
        let doc = Doc::from_trusted(&bytes).map_err(|e| EncodeError::Message(e.to_string()))?;
        let name = doc.root().as_str().ok_or_else(not_a_record)?.to_owned();
        self.key = Some(name);
        Ok(())
    }
    fn serialize_value<V: Serialize + ?Sized>(&mut self, value: &V) -> Result<(), EncodeError> {
        let name = self.key.take().ok_or_else(not_a_record)?;
        self.out.push((FieldName::Owned(name), tessera_value::to_vec(value)?));
        Ok(())
    }
    fn end(self) -> Result<(), EncodeError> {
        Ok(())
    }
}

// ------------------------------------------------------------------------------- decoding

/// Decodes a document from the entries of its prefix scan (full keys and stored bytes);
/// `None` if there are none.
pub(crate) fn decode<'e, T: DeserializeOwned>(
    document: &Document<T>,
    entries: impl Iterator<Item = Result<(&'e [u8], &'e [u8])>>,
) -> Result<Option<T>> {
    let options = &document.collection.options;
    let prefix_len = document.prefix.len();
    if options.transform.is_none() && !options.deep {
        // The common case: each value is validated and read in place as serde asks for it,
        // straight from the snapshot's pages, with nothing gathered first.
        let fields = entries.map(|entry| match entry {
            Ok((stored_key, bytes)) => Ok((&stored_key[prefix_len..], bytes)),
            Err(error) => Err(Box::new(error)),
        });
        return deserialize_fields(document, fields);
    }
    // Bytes kept alive for the values: borrowed from the snapshot, or owned after a transform.
    let mut stored: Vec<(&[u8], std::borrow::Cow<'_, [u8]>)> = Vec::with_capacity(8);
    for entry in entries {
        let (stored_key, bytes) = entry?;
        let path = &stored_key[prefix_len..];
        let bytes = match &options.transform {
            Some(_) => transform_in(document, &display_name(path), bytes)?,
            None => std::borrow::Cow::Borrowed(bytes),
        };
        stored.push((path, bytes));
    }
    if stored.is_empty() {
        return Ok(None);
    }
    if options.deep {
        return decode_deep(document, &stored).map(Some);
    }
    let fields = stored.iter().map(|(path, bytes)| Ok((*path, &bytes[..])));
    deserialize_fields(document, fields)
}

/// Why a plain handle refuses a nested field's own key, which only a deep handle stores.
pub(crate) const STORED_DEEP: &str = "stored as nested fields by a handle with `deep: true`: read it through one";

/// A field's stored name and value (the value validated when serde asks for it: see
/// [`FieldsMap::next_value_seed`]; the name checked as UTF-8 when serde reads it), or why it
/// could not be read (boxed: the error is rare, and a small item is cheaper to pass along the
/// iterator for every field).
type FieldResult<'v> = std::result::Result<(&'v [u8], &'v [u8]), Box<Error>>;

/// Runs `T`'s deserializer over the fields as they come, naming the field that failed; an
/// error of the fields themselves (storage, validation) is returned as it is. `None` if there
/// were no fields: the document does not exist (whatever serde made of an empty map).
fn deserialize_fields<'v, T: DeserializeOwned>(
    document: &Document<T>,
    mut fields: impl Iterator<Item = FieldResult<'v>>,
) -> Result<Option<T>> {
    let mut failure = Failure::default();
    let result = T::deserialize(FieldsDeserializer { fields: &mut fields, failure: &mut failure });
    if let Some((name, error)) = failure.invalid {
        return Err(field_error(document, &display_name(name), error));
    }
    // A type that read no field (refused the map before its first key, or ignored it) has not
    // shown whether the document exists: whether it has a field does (found by review: a
    // stored document that `T` refused whole read as absent).
    let absent = failure.fields_seen == 0
        && failure.source.is_none()
        && match fields.next() {
            None => true,
            Some(Err(error)) => return Err(*error),
            Some(Ok(_)) => false,
        };
    match (result, failure.source) {
        (_, Some(error)) => Err(*error),
        _ if absent => Ok(None),
        (Ok(value), None) => Ok(Some(value)),
        (Err(error), None) => Err(field_error(document, &display_name(failure.field.unwrap_or(b"")), error)),
    }
}

/// Deep documents: the leaves are assembled into one nested document, then decoded.
fn decode_deep<T: DeserializeOwned>(document: &Document<T>, stored: &[(&[u8], std::borrow::Cow<'_, [u8]>)]) -> Result<T> {
    let bytes = assemble_deep(document, stored, 0)?;
    let doc = Doc::from_trusted(&bytes)?;
    tessera_value::from_value(doc.root()).map_err(|error| field_error(document, "", error))
}

/// Assembles deep leaves (their paths after the document's prefix, in key order, with the
/// transform reversed) into one nested dict, each leaf's path read from byte `base` on (0 for
/// the whole document; a field's path and its separator for that field's subtree).
///
/// A value stored both at a path and under it (`a` and `a\0b`) is refused: no key order or
/// rule makes one of them the document's, so neither is chosen.
fn assemble_deep<T>(document: &Document<T>, stored: &[(&[u8], std::borrow::Cow<'_, [u8]>)], base: usize) -> Result<Vec<u8>> {
    let mut encoder = Encoder::new();
    encoder.begin_dict()?;
    let mut open: Vec<&[u8]> = Vec::new(); // names of the dicts open below the root
    let mut previous: Option<&[u8]> = None;
    for (path, bytes) in stored {
        if let Some(previous) = previous
            && path.len() > previous.len()
            && path.starts_with(previous)
            && path[previous.len()] == PATH_SEPARATOR
        {
            return Err(field_error(
                document,
                &display_name(previous),
                format!(
                    "the document is damaged: `{}` is stored both as a value and as nested fields (`{}`)",
                    display_name(previous),
                    display_name(path)
                ),
            ));
        }
        previous = Some(path);
        let segments: Vec<&[u8]> = path[base..].split(|&b| b == PATH_SEPARATOR).collect();
        let (leaf, parents) = segments.split_last().expect("split yields at least one segment");
        let common = open.iter().zip(parents).take_while(|(a, b)| a == b).count();
        while open.len() > common {
            encoder.end_dict()?;
            open.pop();
        }
        for name in &parents[common..] {
            encoder.key(std::str::from_utf8(name).map_err(|_| field_error(document, &display_name(path), "not UTF-8"))?)?;
            encoder.begin_dict()?;
            open.push(name);
        }
        let leaf_name = std::str::from_utf8(leaf).map_err(|_| field_error(document, &display_name(path), "not UTF-8"))?;
        let doc = crate::stored_doc::validate(bytes).map_err(|error| field_error(document, &display_name(path), error))?;
        encoder.key(leaf_name)?;
        encoder.push_value(doc.root())?;
    }
    while open.pop().is_some() {
        encoder.end_dict()?;
    }
    encoder.end_dict()?;
    Ok(encoder.finish()?)
}

/// Decodes field `name` of a deep document from the entries of its subtree: its own key
/// (`path`) and the keys under it (`path\0…`), full keys in key order. A nested struct stored
/// as leaves is assembled as [`decode`] assembles the whole document. `None` if there are none.
pub(crate) fn decode_subtree<'e, T, V: DeserializeOwned>(
    document: &Document<T>,
    name: &str,
    path: &[u8],
    entries: impl Iterator<Item = Result<(&'e [u8], &'e [u8])>>,
) -> Result<Option<V>> {
    let Some(bytes) = subtree_value(document, name, path, entries)? else { return Ok(None) };
    let doc = crate::stored_doc::validate(&bytes).map_err(|error| field_error(document, name, error))?;
    tessera_value::from_value(doc.root()).map(Some).map_err(|error| field_error(document, name, error))
}

/// The value of field `name` from the entries of its subtree (as [`decode_subtree`] takes
/// them), as a document of its own: its own key's bytes (the transform reversed), or its
/// leaves assembled. `None` if there are none.
fn subtree_value<'e, T>(
    document: &Document<T>,
    name: &str,
    path: &[u8],
    entries: impl Iterator<Item = Result<(&'e [u8], &'e [u8])>>,
) -> Result<Option<Vec<u8>>> {
    let prefix_len = document.prefix.len();
    let mut stored: Vec<(&[u8], std::borrow::Cow<'_, [u8]>)> = Vec::new();
    for entry in entries {
        let (stored_key, bytes) = entry?;
        let leaf = &stored_key[prefix_len..];
        let bytes = match &document.collection.options.transform {
            Some(_) => transform_in(document, &display_name(leaf), bytes)?,
            None => std::borrow::Cow::Borrowed(bytes),
        };
        stored.push((leaf, bytes));
    }
    if !document.collection.options.deep && stored.iter().any(|(leaf, _)| *leaf != path) {
        return Err(field_error(document, name, STORED_DEEP));
    }
    match stored.as_slice() {
        [] => Ok(None),
        [(leaf, bytes)] if *leaf == path => Ok(Some(bytes.to_vec())),
        _ => {
            if stored[0].0 == path {
                // The field's own key and keys under it: refused by the assembly as damaged.
                assemble_deep(document, &stored, 0)?;
            }
            assemble_deep(document, &stored, path.len() + 1).map(Some)
        }
    }
}

/// Whether the full key `key` is `path`'s or a key under it (`a`, `a\0b` for `a`; not `ab`).
pub(crate) fn at_or_under(key: &[u8], path: &[u8]) -> bool {
    key.starts_with(path) && (key.len() == path.len() || key[path.len()] == PATH_SEPARATOR)
}

/// The full keys of the ancestors of a deep field whose full key is `field_key` (`a`, `a\0b`
/// for `a\0b\0c`), nearest last: where a nested value stored whole (by a plain handle, or as
/// a leaf too small to spread) holds the field.
pub(crate) fn ancestor_keys(field_key: &[u8], prefix_len: usize) -> impl Iterator<Item = &[u8]> {
    field_key.iter().enumerate().skip(prefix_len).filter(|(_, byte)| **byte == PATH_SEPARATOR).map(move |(at, _)| &field_key[..at])
}

/// Field `name` (deep path `path`, full key `field_key`) of a deep document, from its stored
/// entries in key order (see [`deep_field_value`]).
pub(crate) fn decode_deep_field<'e, T, V: DeserializeOwned>(
    document: &Document<T>,
    name: &str,
    path: &[u8],
    field_key: &[u8],
    entries: impl Iterator<Item = Result<(&'e [u8], &'e [u8])>>,
) -> Result<Option<V>> {
    let Some(bytes) = deep_field_value(document, name, path, field_key, entries)? else { return Ok(None) };
    let doc = crate::stored_doc::validate(&bytes).map_err(|error| field_error(document, name, error))?;
    tessera_value::from_value(doc.root()).map(Some).map_err(|error| field_error(document, name, error))
}

/// The value of field `name` (deep path `path`, full key `field_key`) of a deep document, as a
/// document of its own, from its stored entries in key order: its own key and the keys under
/// it (assembled as [`decode_subtree`] assembles them), or else what an ancestor's key holds
/// whole, read down the path (`None` where the path leaves it). Both at once is damage,
/// refused naming the ancestor, as [`decode`] refuses a value stored both at a path and under
/// it. What a reader decodes, and what an observer compares (by value: the same field stored
/// as leaves or inside its ancestor is the same value).
pub(crate) fn deep_field_value<'e, T>(
    document: &Document<T>,
    name: &str,
    path: &[u8],
    field_key: &[u8],
    entries: impl Iterator<Item = Result<(&'e [u8], &'e [u8])>>,
) -> Result<Option<Vec<u8>>> {
    let prefix_len = document.prefix.len();
    let mut ancestor: Option<(&[u8], &[u8])> = None;
    let mut subtree: Vec<(&[u8], &[u8])> = Vec::new();
    for entry in entries {
        let (stored_key, bytes) = entry?;
        if stored_key.len() < field_key.len() && at_or_under(field_key, stored_key) {
            ancestor = Some((stored_key, bytes)); // key order: the nearest comes last
        } else {
            subtree.push((stored_key, bytes));
        }
    }
    let Some((ancestor_key, stored)) = ancestor else {
        return subtree_value(document, name, path, subtree.into_iter().map(Ok));
    };
    let ancestor_name = display_name(&ancestor_key[prefix_len..]);
    if !subtree.is_empty() {
        return Err(field_error(
            document,
            &ancestor_name,
            format!("the document is damaged: `{ancestor_name}` is stored both as a value and as nested fields (`{name}`)"),
        ));
    }
    value_in_ancestor(document, field_key, ancestor_key, stored)
}

/// The value at the deep field whose full key is `field_key`, inside the value `stored` at
/// its ancestor's key `ancestor_key`, as a document of its own (`None` where the path leaves
/// the stored value): what a reader of the field gets, and what an observer compares.
pub(crate) fn value_in_ancestor<T>(
    document: &Document<T>,
    field_key: &[u8],
    ancestor_key: &[u8],
    stored: &[u8],
) -> Result<Option<Vec<u8>>> {
    let ancestor_name = display_name(&ancestor_key[document.prefix.len()..]);
    let bytes = transform_in(document, &ancestor_name, stored)?;
    let doc = crate::stored_doc::validate(&bytes).map_err(|error| field_error(document, &ancestor_name, error))?;
    let mut value = doc.root();
    for step in field_key[ancestor_key.len() + 1..].split(|&byte| byte == PATH_SEPARATOR) {
        let step = std::str::from_utf8(step)
            .map_err(|_| field_error(document, &display_name(&field_key[document.prefix.len()..]), "not UTF-8"))?;
        match value.as_dict().and_then(|dict| dict.get(step)) {
            Some(inner) => value = inner,
            None => return Ok(None),
        }
    }
    let mut encoder = Encoder::new();
    encoder.push_value(value)?;
    Ok(Some(encoder.finish()?))
}

/// In a deep document, what an ancestor's stored key holds when it is a non-empty dict (a
/// nested value a plain handle stored whole), spread into leaves as a deep `set` stores them,
/// less those at or under `written` (the full key a write replaces): what a write under the
/// ancestor keeps of it. Empty for any other value (a null or an empty map in the way).
pub(crate) fn spread_ancestor<T>(
    document: &Document<T>,
    ancestor_key: &[u8],
    stored: &[u8],
    written: &[u8],
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let ancestor_path = &ancestor_key[document.prefix.len()..];
    let bytes = transform_in(document, &display_name(ancestor_path), stored)?.into_owned();
    let doc = crate::stored_doc::validate(&bytes).map_err(|error| field_error(document, &display_name(ancestor_path), error))?;
    if doc.root().as_dict().is_none_or(|dict| dict.is_empty()) {
        return Ok(Vec::new());
    }
    let mut leaves = Vec::new();
    expand_deep(document, ancestor_path.to_vec(), bytes, &mut leaves)?;
    // At or under the written key (the write replaces them), or on its path (a leaf where the
    // write needs a dict, which the write replaces as well).
    leaves.retain(|(key, _)| !at_or_under(key, written) && !at_or_under(written, key));
    Ok(leaves)
}

/// What went wrong while serde read the fields: the field whose value failed to decode, or an
/// error of the fields themselves (kept whole, with its type, rather than turned into text).
#[derive(Default)]
struct Failure<'v> {
    /// Fields handed to serde so far.
    fields_seen: usize,
    field: Option<&'v [u8]>,
    source: Option<Box<Error>>,
    /// The field whose stored value did not validate, and why.
    invalid: Option<(&'v [u8], tessera_value::FormatError)>,
}

/// The stored fields as a map, for serde: missing fields take their defaults, unknown ones are
/// ignored by the derived code, and the field being read when an error occurs is recorded.
/// `T: DeserializeOwned` deserializes from any lifetime, so the values are handed over as the
/// format's own zero-copy deserializers, borrowing from the read transaction.
struct FieldsDeserializer<'f, 'v, I> {
    fields: I,
    failure: &'f mut Failure<'v>,
}

impl<'f, 'v, I: Iterator<Item = FieldResult<'v>>> de::Deserializer<'v> for FieldsDeserializer<'f, 'v, I> {
    type Error = tessera_value::DecodeError;

    fn deserialize_any<V: Visitor<'v>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_map(FieldsMap { fields: self.fields, value: None, failure: self.failure })
    }

    /// A stored document is never null: `Some` of its fields, as the splitter stored `Some`.
    fn deserialize_option<V: Visitor<'v>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_some(self)
    }

    /// A newtype around a struct or map is stored as what it wraps, and read back so.
    fn deserialize_newtype_struct<V: Visitor<'v>>(self, _name: &'static str, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    serde::forward_to_deserialize_any! {
        <W: Visitor<'v>>
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

struct FieldsMap<'f, 'v, I> {
    fields: I,
    /// The stored value of the key just handed out. Its bytes, not a `Value`: a `Value` is 80
    /// bytes, and moving one just built through the iterator and this field stalled on
    /// store-to-load forwarding (a third of a documents `get`'s time in this function).
    value: Option<(&'v [u8], &'v [u8])>,
    failure: &'f mut Failure<'v>,
}

impl<'v, I: Iterator<Item = FieldResult<'v>>> de::MapAccess<'v> for FieldsMap<'_, 'v, I> {
    type Error = tessera_value::DecodeError;

    fn next_key_seed<K: DeserializeSeed<'v>>(&mut self, seed: K) -> Result<Option<K::Value>, Self::Error> {
        match self.fields.next() {
            None => Ok(None),
            Some(Ok(field)) => {
                self.failure.fields_seen += 1;
                self.value = Some(field);
                // Names go to serde as text, as serde's own string deserializer hands them
                // (an identifier as a string, an enum key through `visit_enum`): bytes broke
                // hand-written identifier visitors and enum keys (found by review).
                let key = match std::str::from_utf8(field.0) {
                    // A plain field's name holds no NUL: this is a deep document's leaf, which
                    // serde would skip as an unknown field and read the rest without it.
                    Ok(_) if field.0.contains(&PATH_SEPARATOR) => Err(<tessera_value::DecodeError as de::Error>::custom(STORED_DEEP)),
                    Ok(name) => seed.deserialize(de::value::BorrowedStrDeserializer::new(name)),
                    Err(_) => Err(<tessera_value::DecodeError as de::Error>::custom("field name is not UTF-8")),
                };
                if key.is_err() {
                    self.failure.field = Some(field.0);
                }
                key.map(Some)
            }
            Some(Err(error)) => {
                // Stops the deserializer; `deserialize_fields` returns this error instead.
                self.failure.source = Some(error);
                Err(<tessera_value::DecodeError as de::Error>::custom("the stored fields could not be read"))
            }
        }
    }

    fn next_value_seed<V: DeserializeSeed<'v>>(&mut self, seed: V) -> Result<V::Value, Self::Error> {
        let (name, bytes) = self.value.take().expect("serde asks for a value after its key");
        let doc = match crate::stored_doc::validate(bytes) {
            Ok(doc) => doc,
            Err(error) => {
                // Stops the deserializer; `deserialize_fields` names the field.
                let stop = <tessera_value::DecodeError as de::Error>::custom(&error);
                self.failure.invalid = Some((name, error));
                return Err(stop);
            }
        };
        let result = seed.deserialize(doc.root());
        if result.is_err() {
            self.failure.field = Some(name);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    //! Stored bytes that do not validate: the streaming decode must return the field's own
    //! typed error, not serde's stand-in message.
    use crate::{Db, Error};

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Pair {
        left: u32,
        right: String,
    }

    #[test]
    fn a_damaged_field_is_an_error_naming_that_field() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path().join("db")).unwrap();
        let documents = db.documents("pairs").unwrap();
        let pair = documents.document::<Pair>("p");
        pair.set(&Pair { left: 1, right: "r".into() }).unwrap();
        let keyspace = documents.collection.keyspace.clone();
        let right = pair.field_key(b"right").unwrap();
        db.write(|tx| tx.put(&keyspace, &right, &[0xFF, 0x00, 0x13])).unwrap();
        match pair.get() {
            Err(Error::DocumentField { collection, id, field, message }) => {
                assert_eq!((collection.as_str(), id.as_str(), field.as_str()), ("pairs", "p", "right"));
                assert!(!message.contains("could not be read"), "the real error, not the stand-in: {message}");
            }
            other => panic!("{other:?}"),
        }
        // A field the type does not know is validated all the same (serde reads its value to
        // skip it): never a damaged document read as whole.
        db.write(|tx| tx.put(&keyspace, &right, &tessera_value::to_vec(&"r").unwrap())).unwrap();
        let extra = pair.field_key(b"extra").unwrap();
        db.write(|tx| tx.put(&keyspace, &extra, &[0xFF, 0x00, 0x13])).unwrap();
        assert!(matches!(pair.get(), Err(Error::DocumentField { field, .. }) if field == "extra"));
    }

    #[test]
    fn a_missing_document_is_none_even_for_a_type_that_an_empty_map_decodes_to() {
        #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
        struct AllDefault {
            #[serde(default)]
            count: u32,
        }
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path().join("db")).unwrap();
        let documents = db.documents("defaults").unwrap();
        let document = documents.document::<AllDefault>("d");
        assert_eq!(document.get().unwrap(), None);
        document.set(&AllDefault { count: 3 }).unwrap();
        assert_eq!(document.get().unwrap(), Some(AllDefault { count: 3 }));
        document.delete().unwrap();
        assert_eq!(document.get().unwrap(), None);
    }

    /// A deep value stored both at a path and under it (`address` and `address\0city`, as
    /// `update_field` of a whole nested struct once left it): no rule makes one of them the
    /// document's, so reading either way is an error naming the field, never one chosen
    /// silently (found by review: the leaves won, and the write seemed lost).
    #[test]
    fn a_deep_value_stored_both_at_a_path_and_under_it_is_refused() {
        #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
        struct Place {
            city: String,
        }
        #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
        struct Person {
            name: String,
            address: Place,
        }
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path().join("db")).unwrap();
        let options = crate::documents::DocumentsOptions { deep: true, ..Default::default() };
        let documents = db.documents_with("people", options).unwrap();
        let person = documents.document::<Person>("p");
        person.set(&Person { name: "Ada".into(), address: Place { city: "London".into() } }).unwrap();
        let keyspace = documents.collection.keyspace.clone();
        let whole = person.field_key(b"address").unwrap();
        let value = tessera_value::to_vec(&Place { city: "Paris".into() }).unwrap();
        db.write(|tx| tx.put(&keyspace, &whole, &value)).unwrap();
        let damaged = |result: crate::Result<()>| match result {
            Err(Error::DocumentField { id, field, message, .. }) => {
                assert_eq!((id.as_str(), field.as_str()), ("p", "address"));
                assert!(message.contains("both"), "{message}");
            }
            other => panic!("{other:?}"),
        };
        damaged(person.get().map(drop));
        damaged(person.field::<Place>("address").get().map(drop));
    }

    #[test]
    fn a_field_name_that_is_not_utf8_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path().join("db")).unwrap();
        let documents = db.documents("pairs").unwrap();
        let pair = documents.document::<Pair>("p");
        pair.set(&Pair { left: 1, right: "r".into() }).unwrap();
        let keyspace = documents.collection.keyspace.clone();
        let odd = pair.field_key(&[0xC3]).unwrap();
        let value = tessera_value::to_vec(&5u32).unwrap();
        db.write(|tx| tx.put(&keyspace, &odd, &value)).unwrap();
        match pair.get() {
            Err(Error::DocumentField { message, .. }) => assert!(message.contains("not UTF-8"), "{message}"),
            other => panic!("{other:?}"),
        }
    }
}
