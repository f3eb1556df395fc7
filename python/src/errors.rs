//! tessera's errors as Python exceptions.
//!
//! The classes live in Python (`tessera/errors.py`), so that they are ordinary, picklable
//! exception classes with attributes; this module only picks the class for each
//! [`tessera::Error`] and passes the fields a caller needs (collection, key, field path,
//! column) as keyword arguments.

use crate::convert::ConvertError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The Python module that defines the exception classes.
const ERRORS_MODULE: &str = "tessera.errors";

/// A Python exception of class `class` (a name in `tessera.errors`) with `message` and the
/// keyword fields `fields`.
pub fn raise(py: Python<'_>, class: &str, message: String, fields: &[(&str, PyObject)]) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let class = py.import(ERRORS_MODULE)?.getattr(class)?;
        let kwargs = PyDict::new(py);
        for (name, value) in fields {
            kwargs.set_item(name, value)?;
        }
        let instance = class.call((message.clone(),), Some(&kwargs))?;
        Ok(PyErr::from_value(instance))
    };
    build().unwrap_or_else(|error| error)
}

/// `value` as a Python str, for a field of an exception.
pub fn text(py: Python<'_>, value: &str) -> PyObject {
    value.into_pyobject(py).expect("str conversion cannot fail").into_any().unbind()
}

fn number(py: Python<'_>, value: u64) -> PyObject {
    value.into_pyobject(py).expect("int conversion cannot fail").into_any().unbind()
}

/// The Python exception for a tessera error.
pub fn to_py(py: Python<'_>, error: tessera::Error) -> PyErr {
    use tessera::Error as E;
    let message = error.to_string();
    match error {
        E::NotADatabase { path } | E::ForeignDatabase { path } => {
            raise(py, "NotADatabase", message, &[("path", text(py, &path.to_string_lossy()))])
        }
        E::UnsupportedVersion { found, .. } => raise(py, "NotADatabase", message, &[("version", number(py, found.into()))]),
        E::Corrupted(_) | E::Format(_) => raise(py, "Corrupted", message, &[]),
        E::MapFull { ceiling_bytes } => raise(py, "Full", message, &[("ceiling_bytes", number(py, ceiling_bytes))]),
        E::DiskFull => raise(py, "Full", message, &[]),
        E::ReadOnly { path, .. } => raise(py, "ReadOnly", message, &[("path", text(py, &path.to_string_lossy()))]),
        E::NoSuchCollection { collection } => raise(py, "NoSuchCollection", message, &[("collection", text(py, &collection))]),
        E::SchemaViolation { collection, key, path, problem } => raise(
            py,
            "SchemaViolation",
            message,
            &[("collection", text(py, &collection)), ("key", text(py, &key)), ("path", text(py, &path)), ("problem", text(py, &problem))],
        ),
        E::SchemaMismatch { collection, reason } => {
            raise(py, "SchemaMismatch", message, &[("collection", text(py, &collection)), ("reason", text(py, &reason))])
        }
        E::RecordDecode { collection, key, field, .. } => raise(
            py,
            "SchemaMismatch",
            message,
            &[("collection", text(py, &collection)), ("key", text(py, &key)), ("path", text(py, &field))],
        ),
        E::DuplicateKey { collection, key } => {
            raise(py, "DuplicateKey", message, &[("collection", text(py, &collection)), ("key", text(py, &key))])
        }
        E::NotFound { collection, key } => {
            raise(py, "NotFound", message, &[("collection", text(py, &collection)), ("key", text(py, &key))])
        }
        E::UniqueViolation { collection, index, key, holder } => raise(
            py,
            "UniqueViolation",
            message,
            &[("collection", text(py, &collection)), ("index", text(py, &index)), ("key", text(py, &key)), ("holder", text(py, &holder))],
        ),
        E::Query(tessera::query::QueryError::Parse(parse)) => {
            raise(py, "QuerySyntaxError", message, &[("column", number(py, parse.column as u64)), ("problem", text(py, &parse.message))])
        }
        E::Query(_) | E::QueryTooDeep { .. } | E::UnknownField { .. } => raise(py, "QueryError", message, &[]),
        E::InvalidName { name, .. } => raise(py, "InvalidName", message, &[("name", text(py, &name))]),
        E::LimitExceeded { limit, .. } => raise(py, "LimitExceeded", message, &[("limit", number(py, limit))]),
        E::DictionaryValue { dictionary, key, .. } => {
            raise(py, "Error", message, &[("dictionary", text(py, &dictionary)), ("key", text(py, &key))])
        }
        E::WriteBehind { dictionary, .. } => raise(py, "Error", message, &[("dictionary", text(py, &dictionary))]),
        E::Aborted(inner) if inner.is::<crate::reads::Conflict>() => {
            let conflict = inner.downcast::<crate::reads::Conflict>().expect("checked by is");
            raise(py, "TransactionConflict", message, &[("collection", text(py, &conflict.collection)), ("read", text(py, conflict.read))])
        }
        _ => raise(py, "Error", message, &[]),
    }
}

/// A Python value that cannot be stored, as [`tessera::Error::SchemaViolation`]'s Python class.
pub fn unstorable(py: Python<'_>, collection: &str, error: ConvertError) -> PyErr {
    let message = format!("collection {collection:?}, field `{}`: {}", error.path, error.problem);
    raise(
        py,
        "SchemaViolation",
        message,
        &[
            ("collection", text(py, collection)),
            ("key", text(py, "")),
            ("path", text(py, &error.path)),
            ("problem", text(py, &error.problem)),
        ],
    )
}

/// A Python value that `dumps` cannot encode.
pub fn unencodable(py: Python<'_>, error: ConvertError) -> PyErr {
    let where_ = if error.path.is_empty() { String::from("the value") } else { format!("`{}`", error.path) };
    let message = format!("{where_}: {}", error.problem);
    raise(py, "EncodeError", message, &[("path", text(py, &error.path)), ("problem", text(py, &error.problem))])
}

/// Using a database (or a handle of one) after `close()`.
pub fn closed(py: Python<'_>, what: &str) -> PyErr {
    raise(py, "Closed", format!("{what}: the database is closed"), &[])
}
