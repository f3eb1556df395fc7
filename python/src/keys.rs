//! Python keys as stored keys: a record's key is encoded once, straight to the bytes it is
//! stored under, for reads, deletes and a write block's recorded reads.
//!
//! A `str` key of a string-keyed collection and an `int` key of an integer-keyed one (the
//! common cases) are encoded without an intermediate document; any other key goes through one
//! and the collection's own conversion, which names the key field when a part is not of its
//! type.

use crate::convert;
use crate::errors;
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyString};
use tessera::collection::DynCollection;
use tessera::value::Doc;

/// A key as the extension hands it to a collection.
#[derive(Clone)]
pub enum KeyBytes {
    /// The stored key's encoding.
    Stored(Vec<u8>),
    /// The key as a document, when the collection does not know its key fields' widths (a
    /// read finds nothing; a write is refused with the collection's error).
    Document(Vec<u8>),
}

/// `key` (the key field's value, or a list of them for a composite key) for collection
/// `collection` (named `name` in errors): `tessera.SchemaViolation` naming the key field for a
/// part of the wrong type, and the conversion's error for a value no document holds.
pub fn key_bytes(py: Python<'_>, collection: &DynCollection, name: &str, key: &Bound<'_, PyAny>) -> PyResult<KeyBytes> {
    let schema = collection.schema();
    if let ([kind], [_]) = (schema.key_kinds.as_slice(), schema.key_fields.as_slice()) {
        let mut stored = Vec::with_capacity(32);
        if let Ok(text) = key.downcast_exact::<PyString>() {
            // A str with lone surrogates takes the general path, for its error.
            if let Ok(text) = text.to_cow()
                && kind.encode_str(&text, &mut stored)
            {
                return Ok(KeyBytes::Stored(stored));
            }
        } else if let Ok(integer) = key.downcast_exact::<PyInt>()
            && let Ok(integer) = integer.extract::<i64>()
            && kind.encode_i64(integer, &mut stored)
        {
            return Ok(KeyBytes::Stored(stored));
        }
    }
    let document = convert::to_document(key).map_err(|error| errors::unstorable(py, name, error))?;
    let stored = Doc::from_trusted(&document).map_err(tessera::Error::from).and_then(|doc| collection.stored_key(doc.root()));
    match stored.map_err(|error| errors::to_py(py, error))? {
        Some(stored) => Ok(KeyBytes::Stored(stored)),
        None => Ok(KeyBytes::Document(document)),
    }
}

impl KeyBytes {
    /// The stored key's encoding; `None` for a key kept as a document.
    pub fn stored(&self) -> Option<&[u8]> {
        match self {
            KeyBytes::Stored(key) => Some(key),
            KeyBytes::Document(_) => None,
        }
    }

    /// The record at this key in `source`, handed to `read` as stored (see
    /// `DynCollection::get_with`).
    pub fn get_with<R>(
        &self,
        collection: &DynCollection,
        source: &impl tessera::store::ReadSource,
        read: impl FnOnce(tessera::value::Value<'_>) -> R,
    ) -> tessera::Result<Option<R>> {
        match self {
            KeyBytes::Stored(key) => collection.get_stored_with(source, key, read),
            KeyBytes::Document(document) => collection.get_with(source, Doc::from_trusted(document)?.root(), read),
        }
    }

    /// Deletes the record at this key in `tx`.
    pub fn delete(
        &self,
        collection: &DynCollection,
        tx: &mut tessera::store::WriteTxn<'_>,
    ) -> tessera::Result<tessera::collection::WriteOutcome> {
        match self {
            KeyBytes::Stored(key) => collection.delete_stored(tx, key),
            KeyBytes::Document(document) => collection.delete(tx, Doc::from_trusted(document)?.root()),
        }
    }
}
