//! Decode plans: records built as Python objects (dataclasses, enum members, datetimes) straight
//! from stored values, without an intermediate dict per record.
//!
//! The Python side describes each record type once as nested tuples (see
//! `tessera/_schema.py`, `RecordType.plan`); compiling a [`Plan`] turns that into a tree, and
//! [`Plan::build`] walks a stored value along it. A struct is built by calling its class with
//! keyword arguments, so defaults, `__post_init__` and frozen classes behave as in Python;
//! a plain dataclass (its generated `__init__`, nothing intercepting construction: the Python
//! side decides, `_schema._filled_like_init`) with every field stored is built as that
//! `__init__` would build it, without running Python code: a new object's attributes set one
//! by one through `object.__setattr__`, as the generated `__init__` sets them (for a frozen
//! class, whose own `__setattr__` refuses, by filling its `__dict__`).
//! Plans are as deep as the dataclasses they describe (bounded when the class is decorated).

use crate::convert;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use std::collections::HashMap;
use tessera::value::Value;

/// How a plain dataclass's instance is made without calling it: `object.__new__`, then each
/// field stored as its generated `__init__` would.
struct Fill {
    /// `object.__new__`.
    new: PyObject,
    /// Whether the class's `__setattr__` is `object.__setattr__`: then each field is set
    /// through it, as `__init__` does (the attributes stay in the instance's compact storage,
    /// faster to make and to read than a `__dict__` made for them); else (a frozen class)
    /// written into its `__dict__`.
    set_attributes: bool,
}

/// How to build one value.
enum Node {
    /// As plain Python values (dicts, lists, scalars).
    Plain,
    /// A dataclass from a dict: its class, each field's name and plan, and how an instance
    /// may be made without calling the class.
    Struct { class: PyObject, fields: Vec<(Py<PyString>, String, Node)>, fill: Option<Fill> },
    /// An enum member by its stored name.
    Members(Named<PyObject>),
    /// A Union of dataclasses: the one-entry dict `{variant: payload}`.
    Variants(Named<Node>),
    /// A callable applied to the plain value (`datetime.fromisoformat`).
    Call(PyObject),
    /// None, or the inner plan.
    Optional(Box<Node>),
    /// A list of the inner plan.
    List(Box<Node>),
    /// A dict of str to the inner plan.
    Map(Box<Node>),
}

/// Things found by name: a few by comparing each name (cheaper than hashing the name), many
/// through a map.
enum Named<T> {
    Few(Vec<(String, T)>),
    Many(HashMap<String, T>),
}

/// Most names [`Named`] compares one by one.
const NAMED_SCAN_MAX: usize = 16;

impl<T> Named<T> {
    fn new(entries: Vec<(String, T)>) -> Named<T> {
        if entries.len() <= NAMED_SCAN_MAX { Named::Few(entries) } else { Named::Many(entries.into_iter().collect()) }
    }

    fn get(&self, name: &str) -> Option<&T> {
        match self {
            Named::Few(entries) => entries.iter().find(|(entry, _)| entry == name).map(|(_, value)| value),
            Named::Many(map) => map.get(name),
        }
    }
}

/// A compiled decode plan (the extension's side of `RecordType.plan`).
#[pyclass(module = "tessera._native", frozen)]
pub struct Plan {
    root: Node,
}

fn compile(description: &Bound<'_, PyAny>) -> PyResult<Node> {
    if description.is_none() {
        return Ok(Node::Plain);
    }
    let tuple = description.downcast::<PyTuple>()?;
    let kind: String = tuple.get_item(0)?.extract()?;
    Ok(match kind.as_str() {
        "struct" => {
            let class = tuple.get_item(1)?.unbind();
            let mut fields = Vec::new();
            for field in tuple.get_item(2)?.downcast::<PyList>()?.iter() {
                let field = field.downcast::<PyTuple>()?;
                let name: String = field.get_item(0)?.extract()?;
                let key = PyString::intern(description.py(), &name).unbind();
                fields.push((key, name, compile(&field.get_item(1)?)?));
            }
            // An older description has no fourth element: build by calling the class.
            let fill = match tuple.get_item(3) {
                Ok(flag) if flag.is_truthy()? => {
                    let object = description.py().import("builtins")?.getattr("object")?;
                    let set_attributes = class.bind(description.py()).getattr("__setattr__")?.is(&object.getattr("__setattr__")?);
                    Some(Fill { new: object.getattr("__new__")?.unbind(), set_attributes })
                }
                _ => None,
            };
            Node::Struct { class, fields, fill }
        }
        "members" => {
            let mut members = Vec::new();
            for (name, member) in tuple.get_item(1)?.downcast::<PyDict>()?.iter() {
                members.push((name.extract::<String>()?, member.unbind()));
            }
            Node::Members(Named::new(members))
        }
        "variants" => {
            let mut variants = Vec::new();
            for (name, plan) in tuple.get_item(1)?.downcast::<PyDict>()?.iter() {
                variants.push((name.extract::<String>()?, compile(&plan)?));
            }
            Node::Variants(Named::new(variants))
        }
        "call" => Node::Call(tuple.get_item(1)?.unbind()),
        "optional" => Node::Optional(Box::new(compile(&tuple.get_item(1)?)?)),
        "list" => Node::List(Box::new(compile(&tuple.get_item(1)?)?)),
        "map" => Node::Map(Box::new(compile(&tuple.get_item(1)?)?)),
        other => return Err(pyo3::exceptions::PyValueError::new_err(format!("unknown plan node {other:?}"))),
    })
}

#[pymethods]
impl Plan {
    /// Compiles a plan described by nested tuples.
    #[new]
    fn new(description: &Bound<'_, PyAny>) -> PyResult<Plan> {
        Ok(Plan { root: compile(description)? })
    }
}

/// A stored value that does not decode as its field's declared type (a str that is no ISO
/// 8601 date in a `datetime` field, a name that is no member of the field's enum): the field
/// path and what is wrong.
pub struct Mismatch {
    path: String,
    problem: String,
}

/// Why a value could not be built.
enum Failure {
    /// A Python exception raised while building (a class's `__init__`), unchanged.
    Python(PyErr),
    /// The stored value does not fit the field.
    Mismatch(Mismatch),
}

impl From<PyErr> for Failure {
    fn from(error: PyErr) -> Self {
        Failure::Python(error)
    }
}

impl Failure {
    fn mismatch(problem: String) -> Failure {
        Failure::Mismatch(Mismatch { path: String::new(), problem })
    }

    /// Prepends a field name (or, with `item`, a list index) to a mismatch's path.
    fn within(self, part: &str, item: bool) -> Failure {
        match self {
            Failure::Mismatch(Mismatch { path, problem }) => {
                let path = match (item, path.is_empty() || path.starts_with('[')) {
                    (true, _) => format!("[{part}]{}{path}", if path.is_empty() || path.starts_with('[') { "" } else { "." }),
                    (false, true) => format!("{part}{path}"),
                    (false, false) => format!("{part}.{path}"),
                };
                Failure::Mismatch(Mismatch { path, problem })
            }
            other => other,
        }
    }
}

/// A stored value shown in an error (its JSON text, shortened).
fn shown(value: Value<'_>) -> String {
    let json = value.to_json();
    if json.chars().count() > 60 { format!("{}…", json.chars().take(60).collect::<String>()) } else { json }
}

/// Where a record being built was read: its collection and a way to print its key, for the
/// error that names a stored value not of its field's type.
pub struct Origin<'a> {
    /// The collection's name.
    pub collection: &'a str,
    /// The record's key, printed (called only for an error).
    pub key: &'a dyn Fn() -> String,
}

impl Plan {
    /// The Python object for `value` built along this plan; `tessera.SchemaMismatch` naming
    /// the collection, key and field for a stored value that does not decode as its field's
    /// type.
    pub fn build<'py>(&self, py: Python<'py>, value: Value<'_>, origin: &Origin<'_>) -> PyResult<Bound<'py, PyAny>> {
        build(py, &self.root, value).map_err(|failure| match failure {
            Failure::Python(error) => error,
            Failure::Mismatch(Mismatch { path, problem }) => mismatch_error(py, origin, &path, &problem),
        })
    }
}

/// The `tessera.SchemaMismatch` for a stored value at `path` that does not fit its field.
fn mismatch_error(py: Python<'_>, origin: &Origin<'_>, path: &str, problem: &str) -> PyErr {
    let key = (origin.key)();
    let field = if path.is_empty() { String::new() } else { format!(", field `{path}`") };
    let message = format!("collection {:?}, record {key}{field}: {problem}", origin.collection);
    let text = |value: &str| -> PyObject { PyString::new(py, value).into_any().unbind() };
    crate::errors::raise(
        py,
        "SchemaMismatch",
        message,
        &[("collection", text(origin.collection)), ("key", text(&key)), ("path", text(path)), ("reason", text(problem))],
    )
}

/// The field `name` of a stored record, at its own `position` (a record stores its fields in
/// declared order: found without looking its name up) or elsewhere.
fn field_at<'a>(dict: &tessera::value::Dict<'a>, position: usize, name: &str) -> Option<Value<'a>> {
    match dict.entry(position) {
        Some((stored, item)) if stored == name => Some(item),
        _ => dict.get(name),
    }
}

fn build<'py>(py: Python<'py>, node: &Node, value: Value<'_>) -> Result<Bound<'py, PyAny>, Failure> {
    match node {
        Node::Plain => Ok(convert::to_python(py, value)?),
        Node::Optional(_) if value.is_null() => Ok(py.None().into_bound(py)),
        Node::Optional(inner) => build(py, inner, value),
        Node::Struct { class, fields, fill } => {
            let Some(dict) = value.as_dict() else {
                return Err(Failure::mismatch(format!("stored {} is not a record of its dataclass", shown(value))));
            };
            // With `fill`, the fields go straight into a new instance (its attributes, or its
            // `__dict__` for a frozen class): with every field stored, that is what the
            // generated `__init__` would leave, without it. A missing field: the class is
            // called with the fields given, so that its `__init__` applies the default (or
            // raises).
            let Some(fill) = fill else {
                let kwargs = PyDict::new(py);
                for (position, (key, name, plan)) in fields.iter().enumerate() {
                    if let Some(item) = field_at(&dict, position, name) {
                        kwargs.set_item(key.bind(py), build(py, plan, item).map_err(|failure| failure.within(name, false))?)?;
                    }
                }
                return Ok(class.bind(py).call((), Some(&kwargs))?);
            };
            let object = fill.new.bind(py).call1((class.bind(py),))?;
            let attributes = match fill.set_attributes {
                true => None,
                false => Some(object.getattr(intern!(py, "__dict__"))?.downcast_into::<PyDict>().map_err(PyErr::from)?),
            };
            for (position, (key, name, plan)) in fields.iter().enumerate() {
                let Some(item) = field_at(&dict, position, name) else {
                    // The fields set so far and the rest, as keyword arguments.
                    let kwargs = PyDict::new(py);
                    for (key, name, plan) in fields {
                        if let Some(item) = dict.get(name) {
                            kwargs.set_item(key.bind(py), build(py, plan, item).map_err(|failure| failure.within(name, false))?)?;
                        }
                    }
                    return Ok(class.bind(py).call((), Some(&kwargs))?);
                };
                let value = build(py, plan, item).map_err(|failure| failure.within(name, false))?;
                match &attributes {
                    Some(attributes) => attributes.set_item(key.bind(py), value)?,
                    None => object.setattr(key.bind(py), value)?,
                }
            }
            Ok(object)
        }
        Node::Members(members) => match value.as_str().and_then(|name| members.get(name)) {
            Some(member) => Ok(member.bind(py).clone()),
            None => Err(Failure::mismatch(format!("stored {} is not a member of the field's enum", shown(value)))),
        },
        Node::Variants(variants) => {
            let entry = value.as_dict().filter(|dict| dict.len() == 1).and_then(|dict| dict.iter().next());
            match entry.and_then(|(name, payload)| variants.get(name).map(|plan| (name, plan, payload))) {
                Some((name, plan, payload)) => build(py, plan, payload).map_err(|failure| failure.within(name, false)),
                None => Err(Failure::mismatch(format!("stored {} is not a variant of the field's Union", shown(value)))),
            }
        }
        Node::Call(function) => match function.bind(py).call1((convert::to_python(py, value)?,)) {
            Ok(built) => Ok(built),
            // `datetime.fromisoformat` of a str that is no date, or of another type.
            Err(error)
                if error.is_instance_of::<pyo3::exceptions::PyValueError>(py)
                    || error.is_instance_of::<pyo3::exceptions::PyTypeError>(py) =>
            {
                Err(Failure::mismatch(format!("stored {} does not decode as the field's type ({error})", shown(value))))
            }
            Err(error) => Err(Failure::Python(error)),
        },
        Node::List(inner) => {
            let Some(array) = value.as_array() else {
                return Err(Failure::mismatch(format!("stored {} is not a list", shown(value))));
            };
            let list = PyList::empty(py);
            for (index, item) in array.iter().enumerate() {
                list.append(build(py, inner, item).map_err(|failure| failure.within(&index.to_string(), true))?)?;
            }
            Ok(list.into_any())
        }
        Node::Map(inner) => {
            let Some(entries) = value.as_dict() else {
                return Err(Failure::mismatch(format!("stored {} is not a dict", shown(value))));
            };
            let dict = PyDict::new(py);
            for (key, item) in entries.iter() {
                dict.set_item(key, build(py, inner, item).map_err(|failure| failure.within(key, false))?)?;
            }
            Ok(dict.into_any())
        }
    }
}

/// `value` built along `plan`, or as plain Python values without one; `origin` names the
/// record in the error for a stored value that does not fit its field.
pub fn object(py: Python<'_>, value: Value<'_>, plan: Option<&Py<Plan>>, origin: &Origin<'_>) -> PyResult<PyObject> {
    Ok(match plan {
        Some(plan) => plan.get().build(py, value, origin)?.unbind(),
        None => convert::to_python(py, value)?.unbind(),
    })
}
