//! Python objects to tessera's binary format and back.
//!
//! Encoding takes `None`, `bool`, `int` (signed or unsigned 64-bit), `float`, `str`,
//! `bytes`/`bytearray`, `list`/`tuple` and `dict` with `str` keys; anything else is refused
//! with the path of the value that is not one of these. Nesting is bounded by
//! [`NESTING_DEPTH_MAX`], so a cyclic or very deep structure is an error, never a stack
//! overflow. Decoding gives the same types back (`bytes` for binary, `list` for arrays).

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use std::cell::RefCell;
use tessera_value::codec::{self, Encode, FieldIds};
use tessera_value::{Encoder, Kind, Value};

/// Deepest nesting of lists and dicts a Python value may have (the binary format's own
/// default depth limit is 128: a document within it always reads back).
pub const NESTING_DEPTH_MAX: usize = 100;

/// Why a Python value could not be encoded, and where in it.
#[derive(Debug)]
pub struct ConvertError {
    /// Dotted path with `[index]` for list items; empty for the value itself.
    pub path: String,
    /// What is wrong.
    pub problem: String,
}

impl ConvertError {
    /// An error at the value itself (empty path).
    pub fn new(problem: impl Into<String>) -> ConvertError {
        ConvertError { path: String::new(), problem: problem.into() }
    }

    /// Prepends a dict key to the path, on the way out of the recursion.
    pub fn in_field(mut self, name: &str) -> ConvertError {
        self.path = if self.path.is_empty() || self.path.starts_with('[') {
            format!("{name}{}", self.path)
        } else {
            format!("{name}.{}", self.path)
        };
        self
    }

    /// Prepends a list index to the path.
    pub fn in_item(mut self, index: usize) -> ConvertError {
        self.path = if self.path.is_empty() || self.path.starts_with('[') {
            format!("[{index}]{}", self.path)
        } else {
            format!("[{index}].{}", self.path)
        };
        self
    }
}

/// Encodes `object` as one complete document.
pub fn to_document(object: &Bound<'_, PyAny>) -> Result<Vec<u8>, ConvertError> {
    let source = Source { object, failure: RefCell::new(None) };
    let mut bytes = Vec::new();
    // A per-thread encoder whose buffers are reused (a key or a small value is encoded per
    // call: a fresh encoder's allocations were most of the work).
    let written = codec::encode_into(&source, None, &FieldIds::default(), &mut bytes);
    match (source.failure.into_inner(), written) {
        (Some(failure), _) => Err(failure),
        (None, Err(error)) => Err(encode_error(error)),
        (None, Ok(())) => Ok(bytes),
    }
}

/// A value being encoded through [`codec::encode_into`], with the failure the [`Encode`]
/// trait cannot carry kept aside.
struct Source<'a, 'py> {
    object: &'a Bound<'py, PyAny>,
    failure: RefCell<Option<ConvertError>>,
}

impl Encode for Source<'_, '_> {
    fn encode(&self, out: &mut Encoder<'_>, _ids: &FieldIds) -> Result<(), tessera_value::EncodeError> {
        push(self.object, out, 0).map_err(|failure| {
            *self.failure.borrow_mut() = Some(failure);
            tessera_value::EncodeError::Message("the value could not be encoded".into())
        })
    }
}

fn encode_error(error: tessera_value::EncodeError) -> ConvertError {
    ConvertError::new(error.to_string())
}

/// Pushes `object` onto `encoder`; `depth` is the number of lists and dicts around it.
pub fn push(object: &Bound<'_, PyAny>, encoder: &mut Encoder, depth: usize) -> Result<(), ConvertError> {
    if object.is_none() {
        return encoder.push_null().map_err(encode_error);
    }
    // `bool` is a subclass of `int`: test it first.
    if let Ok(flag) = object.downcast_exact::<PyBool>() {
        return encoder.push_bool(flag.is_true()).map_err(encode_error);
    }
    if object.is_instance_of::<PyInt>() {
        if let Ok(value) = object.extract::<i64>() {
            return encoder.push_i64(value).map_err(encode_error);
        }
        if let Ok(value) = object.extract::<u64>() {
            return encoder.push_u64(value).map_err(encode_error);
        }
        return Err(ConvertError::new("an integer outside the 64-bit range (-2**63 to 2**64-1)"));
    }
    if let Ok(value) = object.downcast::<PyFloat>() {
        return encoder.push_f64(value.value()).map_err(encode_error);
    }
    if let Ok(text) = object.downcast::<PyString>() {
        let text = text.to_cow().map_err(|_| ConvertError::new("a str that is not valid UTF-8 (lone surrogates)"))?;
        return encoder.push_str(&text).map_err(encode_error);
    }
    if let Ok(bytes) = object.downcast::<PyBytes>() {
        return encoder.push_bytes(bytes.as_bytes()).map_err(encode_error);
    }
    if let Ok(bytes) = object.downcast::<PyByteArray>() {
        return encoder.push_bytes(&bytes.to_vec()).map_err(encode_error);
    }
    if depth >= NESTING_DEPTH_MAX {
        return Err(ConvertError::new(format!("nested deeper than {NESTING_DEPTH_MAX} lists and dicts (or cyclic)")));
    }
    if let Ok(dict) = object.downcast::<PyDict>() {
        encoder.begin_dict().map_err(encode_error)?;
        for (key, value) in dict.iter() {
            let key = key.downcast::<PyString>().map_err(|_| ConvertError::new("a dict key that is not a str"))?;
            let key = key.to_cow().map_err(|_| ConvertError::new("a dict key that is not valid UTF-8"))?;
            encoder.key(&key).map_err(|error| encode_error(error).in_field(&key))?;
            push(&value, encoder, depth + 1).map_err(|error| error.in_field(&key))?;
        }
        return encoder.end_dict().map_err(encode_error);
    }
    if object.is_instance_of::<PyList>() || object.is_instance_of::<PyTuple>() {
        encoder.begin_array().map_err(encode_error)?;
        let items = object.try_iter().map_err(|error| ConvertError::new(error.to_string()))?;
        for (index, item) in items.enumerate() {
            let item = item.map_err(|error| ConvertError::new(error.to_string()).in_item(index))?;
            push(&item, encoder, depth + 1).map_err(|error| error.in_item(index))?;
        }
        return encoder.end_array().map_err(encode_error);
    }
    let type_name = object.get_type().name().map(|name| name.to_string()).unwrap_or_else(|_| "?".into());
    Err(ConvertError::new(format!(
        "a {type_name}, which tessera cannot store (None, bool, int, float, str, bytes, list, tuple and dict with str keys can be stored)"
    )))
}

/// The Python object for `value` (a new `dict`, `list`, … each call).
pub fn to_python<'py>(py: Python<'py>, value: Value<'_>) -> PyResult<Bound<'py, PyAny>> {
    // Depth is bounded by the document's own validation (tessera_value's depth limit).
    Ok(match value.kind() {
        Kind::Null => py.None().into_bound(py),
        Kind::Bool => PyBool::new(py, value.as_bool().unwrap_or(false)).to_owned().into_any(),
        Kind::Int => value.as_i64().unwrap_or(0).into_pyobject(py)?.into_any(),
        Kind::UInt => value.as_u64().unwrap_or(0).into_pyobject(py)?.into_any(),
        Kind::Float => PyFloat::new(py, value.as_f64().unwrap_or(f64::NAN)).into_any(),
        Kind::String => PyString::new(py, value.as_str().unwrap_or("")).into_any(),
        Kind::Binary => PyBytes::new(py, value.as_bytes().unwrap_or(&[])).into_any(),
        Kind::Array => {
            let list = PyList::empty(py);
            if let Some(array) = value.as_array() {
                for item in array.iter() {
                    list.append(to_python(py, item)?)?;
                }
            }
            list.into_any()
        }
        Kind::Dict => {
            let dict = PyDict::new(py);
            if let Some(entries) = value.as_dict() {
                for (key, item) in entries.iter() {
                    dict.set_item(key, to_python(py, item)?)?;
                }
            }
            dict.into_any()
        }
    })
}
