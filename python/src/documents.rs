//! Field-decomposed documents from Python.
//!
//! tessera's documents are serde-typed; from Python they are `serde_json::Value`s (a value
//! checked by [`convert::to_document`], then seen through [`Stored`]), so the Rust crate needs
//! no untyped entry point. JSON's model applies: `bytes` inside a document come back as a
//! list of ints, and a dict's keys come back sorted.

use crate::convert;
use crate::database::{Database, Shared};
use crate::dictionary::Stored;
use crate::errors;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyList, PyString, PyTuple};
use serde_json::Value as Json;
use std::sync::Arc;
use tessera::live::{Event, ValueSubscription};
use tessera::value::Doc;

/// A document collection of a database (the extension's side of `tessera.Documents`).
#[pyclass(module = "tessera._native", frozen)]
pub struct NativeDocuments {
    shared: Arc<Shared>,
    name: String,
}

/// `value` (a Python value) as JSON, with the path of anything unstorable.
fn to_json_value(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Json> {
    let bytes = convert::to_document(value).map_err(|error| errors::unencodable(py, error))?;
    let doc = Doc::from_trusted(&bytes).map_err(|error| errors::to_py(py, error.into()))?;
    serde_json::to_value(Stored(doc.root())).map_err(|error| errors::raise(py, "EncodeError", error.to_string(), &[]))
}

/// The Python object for a JSON value (depth bounded by the stored document's validation).
fn to_python<'py>(py: Python<'py>, value: &Json) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Json::Null => py.None().into_bound(py),
        Json::Bool(flag) => PyBool::new(py, *flag).to_owned().into_any(),
        Json::Number(number) => match (number.as_i64(), number.as_u64()) {
            (Some(int), _) => int.into_pyobject(py)?.into_any(),
            (None, Some(unsigned)) => unsigned.into_pyobject(py)?.into_any(),
            _ => PyFloat::new(py, number.as_f64().unwrap_or(f64::NAN)).into_any(),
        },
        Json::String(text) => PyString::new(py, text).into_any(),
        Json::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_python(py, item)?)?;
            }
            list.into_any()
        }
        Json::Object(entries) => {
            let dict = PyDict::new(py);
            for (key, item) in entries {
                dict.set_item(key, to_python(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

#[pymethods]
impl Database {
    /// The document collection `name` (created on first use).
    fn documents(&self, py: Python<'_>, name: &str) -> PyResult<NativeDocuments> {
        self.shared.documents(py, name)?;
        Ok(NativeDocuments { shared: self.shared.clone(), name: name.to_owned() })
    }
}

#[pymethods]
impl NativeDocuments {
    /// The document `id` as a dict, or None.
    fn get(&self, py: Python<'_>, id: &str) -> PyResult<Option<PyObject>> {
        let documents = self.shared.documents(py, &self.name)?;
        let found = py.allow_threads(|| documents.document::<Json>(id).get()).map_err(|error| errors::to_py(py, error))?;
        found.map(|value| Ok(to_python(py, &value)?.unbind())).transpose()
    }

    /// Replaces the document `id` with `value` (a dict), one key per top-level field.
    fn set(&self, py: Python<'_>, id: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let documents = self.shared.documents(py, &self.name)?;
        let value = to_json_value(py, value)?;
        py.allow_threads(|| documents.document::<Json>(id).set(&value)).map_err(|error| errors::to_py(py, error))
    }

    /// Writes one field of the document `id`, leaving the others as they are.
    fn update_field(&self, py: Python<'_>, id: &str, field: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let documents = self.shared.documents(py, &self.name)?;
        let value = to_json_value(py, value)?;
        py.allow_threads(|| documents.document::<Json>(id).update_field(field, &value)).map_err(|error| errors::to_py(py, error))
    }

    /// Deletes the document `id`: whether it existed.
    fn delete(&self, py: Python<'_>, id: &str) -> PyResult<bool> {
        let documents = self.shared.documents(py, &self.name)?;
        py.allow_threads(|| documents.document::<Json>(id).delete()).map_err(|error| errors::to_py(py, error))
    }

    /// Ids starting with `prefix`, in order.
    #[pyo3(signature = (prefix = ""))]
    fn ids(&self, py: Python<'_>, prefix: &str) -> PyResult<Vec<String>> {
        let documents = self.shared.documents(py, &self.name)?;
        py.allow_threads(|| documents.ids_with_prefix(prefix)).map_err(|error| errors::to_py(py, error))
    }

    /// A live subscription to the document `id` (see `DocumentSubscription.next`).
    fn observe(&self, py: Python<'_>, id: &str) -> PyResult<DocumentSubscription> {
        let documents = self.shared.documents(py, &self.name)?;
        let live = py.allow_threads(|| documents.document::<Json>(id).observe()).map_err(|error| errors::to_py(py, error))?;
        Ok(DocumentSubscription { live: Arc::new(live), closed: self.shared.close_signal.clone() })
    }
}

/// A live document: `next` gives its events.
#[pyclass(module = "tessera._native", frozen)]
pub struct DocumentSubscription {
    live: Arc<ValueSubscription<Json>>,
    /// The Python database's `close()`.
    closed: crate::query::CloseSignal,
}

#[pymethods]
impl DocumentSubscription {
    /// The next event, waiting at most `timeout` seconds (None: until one comes), with the
    /// GIL released: ("initial", value or None), ("changed", value or None), ("closed",
    /// reason); None on timeout and after "closed".
    #[pyo3(signature = (timeout = None))]
    fn next(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<PyObject>> {
        let Some(event) = crate::query::next_event(py, &self.live, &self.closed, timeout, || ())? else { return Ok(None) };
        let (kind, value) = match event {
            Event::Initial(value) => ("initial", value.as_ref().map(|v| to_python(py, v)).transpose()?),
            Event::Changed(value) => ("changed", value.as_ref().map(|v| to_python(py, v)).transpose()?),
            Event::Closed(reason) => ("closed", Some(PyString::new(py, &format!("{reason:?}")).into_any())),
        };
        let value = value.map_or_else(|| py.None(), Bound::unbind);
        Ok(Some(PyTuple::new(py, [PyString::new(py, kind).into_any().unbind(), value])?.into_any().unbind()))
    }
}
