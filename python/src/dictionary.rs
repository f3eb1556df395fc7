//! The dictionary: a persisted mapping from str keys to JSON-like values.
//!
//! Values are checked and encoded from Python by [`convert::to_document`] (with the path of
//! anything unstorable), then handed to [`tessera::Dictionary::set`] through [`Stored`], a
//! serde view of an encoded value, so the Rust crate needs no untyped entry point.

use crate::convert;
use crate::database::{Database, Shared};
use crate::errors;
use pyo3::prelude::*;
use serde::ser::{SerializeMap, SerializeSeq};
use std::sync::Arc;
use tessera::value::{Doc, Kind, Value};

/// An encoded value as serde sees it: what `Dictionary::set` takes.
pub struct Stored<'a>(pub Value<'a>);

impl serde::Serialize for Stored<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let value = self.0;
        match value.kind() {
            Kind::Null => serializer.serialize_unit(),
            Kind::Bool => serializer.serialize_bool(value.as_bool().unwrap_or(false)),
            Kind::Int => serializer.serialize_i64(value.as_i64().unwrap_or(0)),
            Kind::UInt => serializer.serialize_u64(value.as_u64().unwrap_or(0)),
            Kind::Float => serializer.serialize_f64(value.as_f64().unwrap_or(f64::NAN)),
            Kind::String => serializer.serialize_str(value.as_str().unwrap_or("")),
            Kind::Binary => serializer.serialize_bytes(value.as_bytes().unwrap_or(&[])),
            Kind::Array => {
                let array = value.as_array().expect("an array's kind");
                let mut seq = serializer.serialize_seq(Some(array.len()))?;
                for item in array.iter() {
                    seq.serialize_element(&Stored(item))?;
                }
                seq.end()
            }
            Kind::Dict => {
                let dict = value.as_dict().expect("a dict's kind");
                let mut map = serializer.serialize_map(Some(dict.len()))?;
                for (key, item) in dict.iter() {
                    map.serialize_entry(key, &Stored(item))?;
                }
                map.end()
            }
        }
    }
}

/// A dictionary of a database (the extension's side of `tessera.Dictionary`).
#[pyclass(module = "tessera._native", frozen)]
pub struct NativeDictionary {
    shared: Arc<Shared>,
    name: String,
}

#[pymethods]
impl Database {
    /// The dictionary `name` (created on first use).
    fn dictionary(&self, py: Python<'_>, name: &str) -> PyResult<NativeDictionary> {
        self.shared.dictionary(py, name)?;
        Ok(NativeDictionary { shared: self.shared.clone(), name: name.to_owned() })
    }
}

#[pymethods]
impl NativeDictionary {
    /// The value at `key`, or None if absent (`contains` tells a stored None from absence).
    fn get(&self, py: Python<'_>, key: &str) -> PyResult<Option<PyObject>> {
        let dictionary = self.shared.dictionary(py, &self.name)?;
        let found = dictionary
            .with_value(key, |value| value.map(|value| convert::to_python(py, value).map(Bound::unbind)))
            .map_err(|error| errors::to_py(py, error))?;
        found.transpose()
    }

    /// Whether `key` holds a value.
    fn contains(&self, py: Python<'_>, key: &str) -> PyResult<bool> {
        let dictionary = self.shared.dictionary(py, &self.name)?;
        dictionary.contains(key).map_err(|error| errors::to_py(py, error))
    }

    /// Sets `key` to `value` (persisted in the background; see `flush`).
    fn set(&self, py: Python<'_>, key: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let dictionary = self.shared.dictionary(py, &self.name)?;
        let bytes = convert::to_document(value).map_err(|error| errors::unencodable(py, error))?;
        let doc = Doc::from_trusted(&bytes).map_err(|error| errors::to_py(py, error.into()))?;
        dictionary.set(key, &Stored(doc.root())).map_err(|error| errors::to_py(py, error))
    }

    /// Removes `key` (nothing happens if it is absent).
    fn remove(&self, py: Python<'_>, key: &str) -> PyResult<()> {
        let dictionary = self.shared.dictionary(py, &self.name)?;
        dictionary.remove(key).map_err(|error| errors::to_py(py, error))
    }

    /// Every key, in stored order.
    fn keys(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let dictionary = self.shared.dictionary(py, &self.name)?;
        py.allow_threads(|| dictionary.keys()).map_err(|error| errors::to_py(py, error))
    }

    /// Writes every pending change to the file, with the GIL released.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let dictionary = self.shared.dictionary(py, &self.name)?;
        py.allow_threads(|| dictionary.flush()).map_err(|error| errors::to_py(py, error))
    }

    /// Removes every key.
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        let dictionary = self.shared.dictionary(py, &self.name)?;
        py.allow_threads(|| dictionary.clear()).map_err(|error| errors::to_py(py, error))
    }

    /// The dictionary's name.
    #[getter]
    fn name(&self) -> String {
        self.name.clone()
    }
}
