//! The binary format from Python: `dumps`, `loads`, `from_json`, `to_json` and the `Value`
//! view, which reads a document in place.
//!
//! A [`ValueView`] holds the document's bytes (validated once, when made) and the steps
//! from the root to the value it shows; indexing gives a view of a list or dict, or the
//! Python object for a scalar. Nothing is decoded until asked for.

use crate::convert;
use crate::errors;
use pyo3::exceptions::{PyIndexError, PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use std::sync::Arc;
use tessera::value::{Doc, Kind, Value};

/// Encodes a Python value (None, bool, int, float, str, bytes, list, tuple, dict with str
/// keys) in tessera's binary format.
#[pyfunction]
pub fn dumps<'py>(py: Python<'py>, value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = convert::to_document(value).map_err(|error| errors::unencodable(py, error))?;
    Ok(PyBytes::new(py, &bytes))
}

fn open<'a>(py: Python<'_>, data: &'a [u8]) -> PyResult<Doc<'a>> {
    Doc::from_untrusted(data).map_err(|error| errors::raise(py, "Corrupted", format!("not a tessera document: {error}"), &[]))
}

/// Decodes a document made by `dumps` (checked completely first: damaged bytes raise
/// `tessera.Corrupted`).
#[pyfunction]
pub fn loads<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    let doc = open(py, data)?;
    convert::to_python(py, doc.root())
}

/// Encodes JSON text (str or bytes) in the binary format.
#[pyfunction]
pub fn from_json<'py>(py: Python<'py>, text: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let input: Vec<u8> = match text.downcast::<PyString>() {
        Ok(text) => text.to_cow()?.as_bytes().to_vec(),
        Err(_) => text.extract::<Vec<u8>>()?,
    };
    let bytes = tessera::value::from_json(&input).map_err(|error| {
        let problem = PyString::new(py, &error.to_string()).into_any().unbind();
        errors::raise(py, "JsonError", format!("not JSON: {error}"), &[("problem", problem)])
    })?;
    Ok(PyBytes::new(py, &bytes))
}

/// A document in the binary format as compact JSON text.
#[pyfunction]
pub fn to_json(py: Python<'_>, data: &[u8]) -> PyResult<String> {
    Ok(open(py, data)?.root().to_json())
}

/// One step from a value to a child.
#[derive(Clone)]
enum Step {
    Key(String),
    Index(usize),
}

/// A view of a value inside a document, read in place (`tessera.Value`).
#[pyclass(name = "Value", module = "tessera._native", frozen)]
pub struct ValueView {
    bytes: Arc<Vec<u8>>,
    steps: Vec<Step>,
}

impl ValueView {
    fn with_value<R>(&self, read: impl FnOnce(Value<'_>) -> R) -> R {
        let doc = Doc::from_trusted(&self.bytes).expect("validated when the view was made");
        let mut value = doc.root();
        for step in &self.steps {
            value = match step {
                Step::Key(key) => value.get(key),
                Step::Index(index) => value.index(*index),
            }
            .expect("a view's steps lead to a value");
        }
        read(value)
    }

    /// A view of the child at `step`, or its Python value if it is a scalar.
    fn child(&self, py: Python<'_>, value: Value<'_>, step: Step) -> PyResult<PyObject> {
        if matches!(value.kind(), Kind::Array | Kind::Dict) {
            let mut steps = self.steps.clone();
            steps.push(step);
            return Ok(Bound::new(py, ValueView { bytes: self.bytes.clone(), steps })?.into_any().unbind());
        }
        Ok(convert::to_python(py, value)?.unbind())
    }
}

#[pymethods]
impl ValueView {
    /// A view of `data` (bytes made by `dumps` or `from_json`), checked completely once.
    #[new]
    fn new(py: Python<'_>, data: &[u8]) -> PyResult<ValueView> {
        open(py, data)?;
        Ok(ValueView { bytes: Arc::new(data.to_vec()), steps: Vec::new() })
    }

    /// `view[key]` of a dict, `view[index]` of a list (negative counts from the end): a view
    /// for a list or dict, the Python value for anything else.
    fn __getitem__(&self, py: Python<'_>, item: &Bound<'_, PyAny>) -> PyResult<PyObject> {
        self.with_value(|value| match value.kind() {
            Kind::Dict => {
                let key: String = item.extract().map_err(|_| PyTypeError::new_err("a dict view is indexed by str"))?;
                let child = value.get(&key).ok_or_else(|| PyKeyError::new_err(key.clone()))?;
                self.child(py, child, Step::Key(key))
            }
            Kind::Array => {
                let index: isize = item.extract().map_err(|_| PyTypeError::new_err("a list view is indexed by int"))?;
                let len = value.len() as isize;
                let position = if index < 0 { index + len } else { index };
                if position < 0 || position >= len {
                    return Err(PyIndexError::new_err(format!("index {index} out of range for a list of {len}")));
                }
                let child = value.index(position as usize).expect("in range");
                self.child(py, child, Step::Index(position as usize))
            }
            _ => Err(PyTypeError::new_err("only a list or dict view can be indexed")),
        })
    }

    /// `view.get(key, default)` of a dict.
    #[pyo3(signature = (key, default = None))]
    fn get(&self, py: Python<'_>, key: &str, default: Option<PyObject>) -> PyResult<PyObject> {
        self.with_value(|value| match value.get(key) {
            Some(child) => self.child(py, child, Step::Key(key.to_owned())),
            None => Ok(default.unwrap_or_else(|| py.None())),
        })
    }

    /// Entries of a dict, items of a list, bytes of bytes, characters of a str; `TypeError`
    /// for a number, a bool or None, which have no length.
    fn __len__(&self) -> PyResult<usize> {
        self.with_value(|value| match value.kind() {
            Kind::Array | Kind::Dict => Ok(value.len()),
            Kind::Binary => Ok(value.as_bytes().map_or(0, <[u8]>::len)),
            Kind::String => Ok(value.as_str().map_or(0, |text| text.chars().count())),
            _ => Err(PyTypeError::new_err("only a list, dict, str or bytes view has a length")),
        })
    }

    /// A dict's keys or a list's items (views for lists and dicts).
    fn __iter__(&self, py: Python<'_>) -> PyResult<PyObject> {
        let items: Vec<PyObject> = self.with_value(|value| -> PyResult<Vec<PyObject>> {
            match value.kind() {
                Kind::Dict => {
                    Ok(value.as_dict().expect("a dict").iter().map(|(key, _)| PyString::new(py, key).into_any().unbind()).collect())
                }
                Kind::Array => {
                    let array = value.as_array().expect("an array");
                    array.iter().enumerate().map(|(index, item)| self.child(py, item, Step::Index(index))).collect()
                }
                _ => Err(PyTypeError::new_err("only a list or dict view can be iterated")),
            }
        })?;
        Ok(pyo3::types::PyList::new(py, items)?.try_iter()?.into_any().unbind())
    }

    /// The value as plain Python objects (dicts and lists).
    fn to_python(&self, py: Python<'_>) -> PyResult<PyObject> {
        self.with_value(|value| Ok(convert::to_python(py, value)?.unbind()))
    }

    /// The value as compact JSON.
    fn to_json(&self) -> String {
        self.with_value(|value| value.to_json())
    }

    fn __repr__(&self) -> String {
        self.with_value(|value| format!("tessera.Value({})", value.to_json()))
    }
}
