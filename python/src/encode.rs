//! Records encoded straight from dataclass instances, along the record type's schema.
//!
//! The Python side describes each record type once as nested tuples (see
//! `tessera/_schema.py`, `RecordType.encode_plan`); compiling a [`RecordEncoder`] resolves the
//! field names to interned strings, the enum members and the dataclasses of each node, so
//! encoding a record reads its attributes and writes the binary format in one pass, with no
//! dict per record and no Python code per field.
//!
//! Records for a collection are encoded with its shared keys (field names written by id), and
//! the commit hands them to `DynCollection::insert_document`/`upsert_document`, which stores a
//! record as it is when it is already what the check against the stored shape would write:
//! one encoding pass for a record that fits.
//!
//! The encoder is strict for every field whose declared type it converts: a value that is not
//! of that type is refused here with the field's path, never written as some other value that
//! would read back as another type. An `Enum` field takes a member of its enum (not its name),
//! a `datetime` field a `datetime` (not a str), a nested dataclass or a Union variant an
//! instance of exactly that class (not a dict, nor a subclass whose own fields would be
//! dropped), a `float` field a float or an int that a float holds exactly. Two conversions
//! are documented, as the dictionary API makes them: a tuple for a list field is stored as a
//! list, a bytearray for a bytes field as bytes. Fields stored as they are (`int`, `str`,
//! `bytes`, `bool`) are checked by the collection against the stored shape, which refuses a
//! value of another type with the field's path, writing nothing. A value that no document can
//! hold (an `object()`) fails here, with its path.

use crate::convert::{self, ConvertError};
use pyo3::exceptions::PyAttributeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};
use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tessera_value::codec::{self, Encode, FieldIds};
use tessera_value::{Encoder, SharedKeys};

/// How to write one value.
enum Node {
    /// As the plain value it is (`int`, `str`, `bytes`, `bool`, and anything unexpected).
    Plain,
    /// A float field: an `int` is written as a float when a float holds it exactly (refused
    /// otherwise). For a primary-key field (`key`), `-0.0` is written as `0.0` (Python calls
    /// them equal, so they are one key) and NaN is refused (no key equals it).
    Float { key: bool },
    /// An `enum.Enum` member by its name: the enum's name and (member, name) pairs.
    Members(String, Vec<(PyObject, String)>),
    /// A `datetime` as its ISO 8601 text: the `datetime` class, and the function that writes
    /// the text (`tessera._query.datetime_text`: an aware one in UTC).
    Datetime(Py<PyType>, PyObject),
    /// A nested dataclass.
    Struct(Struct),
    /// A Union of dataclasses: `{ClassName: {fields}}`, each variant's name, key slot and
    /// struct.
    Variants(Vec<(String, usize, Struct)>),
    /// None, or the inner node.
    Optional(Box<Node>),
    /// A list (or tuple) of the inner node.
    List(Box<Node>),
    /// A dict of str to the inner node.
    Map(Box<Node>),
}

/// A dataclass: its class and each field's interned name, text, key slot (see
/// [`RecordEncoder`]) and node.
struct Struct {
    class: Py<PyType>,
    fields: Vec<(Py<PyString>, String, usize, Node)>,
}

/// Why a record could not be encoded: a value no document holds, or an exception raised by
/// the object (a property's getter, `isoformat`), which propagates unchanged.
pub enum EncodeFailure {
    /// The value at the error's path cannot be stored.
    Unstorable(ConvertError),
    /// A Python exception raised while reading the object.
    Python(PyErr),
}

impl EncodeFailure {
    fn in_field(self, name: &str) -> EncodeFailure {
        match self {
            EncodeFailure::Unstorable(error) => EncodeFailure::Unstorable(error.in_field(name)),
            other => other,
        }
    }

    fn in_item(self, index: usize) -> EncodeFailure {
        match self {
            EncodeFailure::Unstorable(error) => EncodeFailure::Unstorable(error.in_item(index)),
            other => other,
        }
    }
}

impl From<ConvertError> for EncodeFailure {
    fn from(error: ConvertError) -> Self {
        EncodeFailure::Unstorable(error)
    }
}

impl From<tessera_value::EncodeError> for EncodeFailure {
    fn from(error: tessera_value::EncodeError) -> Self {
        EncodeFailure::Unstorable(ConvertError::new(error.to_string()))
    }
}

type Encoded = Result<(), EncodeFailure>;

/// A compiled record encoder (the extension's side of `RecordType.encode_plan`).
#[pyclass(module = "tessera._native", frozen)]
pub struct RecordEncoder {
    root: Struct,
    /// The name of each key the encoder writes, by slot.
    keys: Vec<String>,
    /// Each slot's id in the shared-key table last encoded with (its identity and length),
    /// so that a record's keys are written by id, without looking each name up.
    key_ids: Mutex<Option<KeyIds>>,
    /// Room to give the next record's buffer: the last record's size and some.
    size_hint_bytes: AtomicUsize,
}

/// Each key slot's shared-key id, for the shared-key table of this identity and length.
struct KeyIds {
    identity: u64,
    len: usize,
    ids: Arc<[Option<u32>]>,
}

/// Most room [`RecordEncoder`] sets aside for a record before encoding it (a larger one grows).
const SIZE_HINT_MAX_BYTES: usize = 64 * 1024;

/// Compiles a struct node; each key the encoder writes (a field's or a variant's name) is
/// given the next slot of `keys`, which collects their names.
fn compile_struct(description: &Bound<'_, PyTuple>, keys: &mut Vec<String>) -> PyResult<Struct> {
    let py = description.py();
    let class = description.get_item(1)?.downcast_into::<PyType>()?.unbind();
    let mut fields = Vec::new();
    for field in description.get_item(2)?.downcast::<PyList>()?.iter() {
        let field = field.downcast::<PyTuple>()?;
        let name: String = field.get_item(0)?.extract()?;
        let key = PyString::intern(py, &name).unbind();
        let slot = keys.len();
        keys.push(name.clone());
        fields.push((key, name, slot, compile(&field.get_item(1)?, keys)?));
    }
    Ok(Struct { class, fields })
}

fn compile(description: &Bound<'_, PyAny>, keys: &mut Vec<String>) -> PyResult<Node> {
    if description.is_none() {
        return Ok(Node::Plain);
    }
    let tuple = description.downcast::<PyTuple>()?;
    let kind: String = tuple.get_item(0)?.extract()?;
    Ok(match kind.as_str() {
        "float" => Node::Float { key: false },
        "float_key" => Node::Float { key: true },
        "struct" => Node::Struct(compile_struct(tuple, keys)?),
        "members" => {
            let mut members = Vec::new();
            let mut enum_name = String::from("enum");
            for (name, member) in tuple.get_item(1)?.downcast::<PyDict>()?.iter() {
                enum_name = type_name(&member);
                members.push((member.unbind(), name.extract::<String>()?));
            }
            Node::Members(enum_name, members)
        }
        "datetime" => Node::Datetime(tuple.get_item(1)?.downcast_into::<PyType>()?.unbind(), tuple.get_item(2)?.unbind()),
        "variants" => {
            let mut variants = Vec::new();
            for variant in tuple.get_item(1)?.downcast::<PyList>()?.iter() {
                let variant = variant.downcast::<PyTuple>()?;
                let name: String = variant.get_item(0)?.extract()?;
                let slot = keys.len();
                keys.push(name.clone());
                variants.push((name, slot, compile_struct(variant.get_item(1)?.downcast::<PyTuple>()?, keys)?));
            }
            Node::Variants(variants)
        }
        "optional" => Node::Optional(Box::new(compile(&tuple.get_item(1)?, keys)?)),
        "list" => Node::List(Box::new(compile(&tuple.get_item(1)?, keys)?)),
        "map" => Node::Map(Box::new(compile(&tuple.get_item(1)?, keys)?)),
        other => return Err(pyo3::exceptions::PyValueError::new_err(format!("unknown encode node {other:?}"))),
    })
}

#[pymethods]
impl RecordEncoder {
    /// Compiles an encoder described by nested tuples: `("struct", cls, [(name, node), ...])`.
    #[new]
    fn new(description: &Bound<'_, PyTuple>) -> PyResult<RecordEncoder> {
        let mut keys = Vec::new();
        let root = compile_struct(description, &mut keys)?;
        Ok(RecordEncoder { root, keys, key_ids: Mutex::new(None), size_hint_bytes: AtomicUsize::new(256) })
    }
}

impl RecordEncoder {
    /// The record `object` (an instance of exactly the record type) as one document, its
    /// field names from `shared` where it has them (a collection's shared keys: see
    /// `DynCollection::insert_document`).
    pub fn encode(&self, object: &Bound<'_, PyAny>, shared: Option<&SharedKeys>) -> Result<Vec<u8>, EncodeFailure> {
        let py = object.py();
        if !object.get_type().is(self.root.class.bind(py)) {
            let expected = self.root.class.bind(py).name().map(|name| name.to_string()).unwrap_or_default();
            let found = object.get_type().name().map(|name| name.to_string()).unwrap_or_default();
            return Err(EncodeFailure::Unstorable(ConvertError::new(format!("expected a {expected}, got {found}"))));
        }
        let ids = shared.map(|shared| self.key_ids(shared)).unwrap_or_else(|| Arc::from(Vec::new()));
        let source = Source { root: &self.root, object, ids: &ids, failure: RefCell::new(None) };
        // A per-thread encoder whose buffers are reused: encoding allocates little per record.
        // It takes this buffer for the next record (its own becomes the result): with room for
        // a record as large as the last, that one is written without regrowing.
        let mut bytes = Vec::with_capacity(self.size_hint_bytes.load(Ordering::Relaxed));
        let written = codec::encode_into(&source, shared, &FieldIds::default(), &mut bytes);
        self.size_hint_bytes.store(bytes.len().saturating_add(64).min(SIZE_HINT_MAX_BYTES), Ordering::Relaxed);
        match (source.failure.into_inner(), written) {
            (Some(failure), _) => Err(failure),
            (None, Err(error)) => Err(error.into()),
            (None, Ok(())) => Ok(bytes),
        }
    }
}

impl RecordEncoder {
    /// Each key slot's id in `shared` (`None` for a name it does not have), resolved once per
    /// table (a table keeps its identity and its ids as it grows: its length tells whether it
    /// grew).
    fn key_ids(&self, shared: &SharedKeys) -> Arc<[Option<u32>]> {
        let mut cached = self.key_ids.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match &*cached {
            Some(known) if known.identity == shared.identity() && known.len == shared.len() => known.ids.clone(),
            _ => {
                let ids: Arc<[Option<u32>]> = self.keys.iter().map(|name| shared.id(name)).collect();
                *cached = Some(KeyIds { identity: shared.identity(), len: shared.len(), ids: ids.clone() });
                ids
            }
        }
    }
}

/// A record being encoded through [`codec::encode_into`]: the failure the [`Encode`] trait
/// cannot carry is kept aside.
struct Source<'a, 'py> {
    root: &'a Struct,
    object: &'a Bound<'py, PyAny>,
    /// Each key slot's shared-key id (empty without a shared-key table).
    ids: &'a [Option<u32>],
    failure: RefCell<Option<EncodeFailure>>,
}

/// Writes the key of slot `slot`, `name`: by its shared-key id when it has one (what
/// `Encoder::key` would find for it, without the lookup).
fn write_key(out: &mut Encoder<'_>, ids: &[Option<u32>], slot: usize, name: &str) -> Result<(), tessera_value::EncodeError> {
    match ids.get(slot).copied().flatten() {
        Some(id) => out.shared_key(id),
        None => out.key(name),
    }
}

impl Encode for Source<'_, '_> {
    fn encode(&self, out: &mut Encoder<'_>, _ids: &FieldIds) -> Result<(), tessera_value::EncodeError> {
        write_struct(self.root, self.object, out, self.ids).map_err(|failure| {
            *self.failure.borrow_mut() = Some(failure);
            tessera_value::EncodeError::Message("the record could not be encoded".into())
        })
    }
}

fn write_struct(node: &Struct, object: &Bound<'_, PyAny>, out: &mut Encoder<'_>, ids: &[Option<u32>]) -> Encoded {
    let py = object.py();
    out.begin_dict()?;
    for (key, name, slot, field) in &node.fields {
        let value = match object.getattr(key.bind(py)) {
            Ok(value) => value,
            // A missing attribute is a missing field: the shape check says whether it may be.
            Err(error) if error.is_instance_of::<PyAttributeError>(py) => continue,
            Err(error) => return Err(EncodeFailure::Python(error)),
        };
        write_key(out, ids, *slot, name).map_err(|error| EncodeFailure::from(error).in_field(name))?;
        write(field, &value, out, ids).map_err(|error| error.in_field(name))?;
    }
    Ok(out.end_dict()?)
}

fn plain(value: &Bound<'_, PyAny>, out: &mut Encoder<'_>) -> Encoded {
    Ok(convert::push(value, out, 0)?)
}

/// The name of `value`'s class.
fn type_name(value: &Bound<'_, PyAny>) -> String {
    value.get_type().name().map(|name| name.to_string()).unwrap_or_else(|_| "?".into())
}

/// A value that is not of its field's type: `expected` says what the field takes.
fn wrong_type(expected: &str, value: &Bound<'_, PyAny>) -> EncodeFailure {
    let found = type_name(value);
    let shown = value.repr().map(|repr| repr.to_string()).unwrap_or_default();
    let shown = if shown.chars().count() > 60 { format!("{}…", shown.chars().take(60).collect::<String>()) } else { shown };
    EncodeFailure::Unstorable(ConvertError::new(format!("expected {expected}, got a {found} ({shown})")))
}

/// The float for `value` in a float field: a float, or an int that a float holds exactly.
fn float_of(value: &Bound<'_, PyAny>) -> Result<f64, EncodeFailure> {
    if let Ok(float) = value.downcast::<PyFloat>() {
        return Ok(float.value());
    }
    if !value.is_instance_of::<PyInt>() || value.is_instance_of::<PyBool>() {
        return Err(wrong_type("a float", value));
    }
    let inexact = || {
        EncodeFailure::Unstorable(ConvertError::new(format!(
            "the int {} has no exact float value (a float field takes an int only when a float holds it exactly: \
             |n| <= 2**53, or a multiple of a large enough power of two)",
            value.str().map(|text| text.to_string()).unwrap_or_default()
        )))
    };
    if let Ok(integer) = value.extract::<i64>() {
        let float = integer as f64;
        // Exact when converting back gives the int (f64 of an i64 is within i128).
        return if float as i128 == i128::from(integer) { Ok(float) } else { Err(inexact()) };
    }
    // Beyond i64: Python compares an int and a float by their exact values.
    let float = value.extract::<f64>().map_err(|_| inexact())?;
    if value.eq(PyFloat::new(value.py(), float)).map_err(EncodeFailure::Python)? { Ok(float) } else { Err(inexact()) }
}

fn write(node: &Node, value: &Bound<'_, PyAny>, out: &mut Encoder<'_>, ids: &[Option<u32>]) -> Encoded {
    let py = value.py();
    match node {
        Node::Plain => plain(value, out),
        Node::Float { key } => {
            let float = float_of(value)?;
            if *key && float.is_nan() {
                return Err(EncodeFailure::Unstorable(ConvertError::new("NaN cannot be a key (it equals no value, itself included)")));
            }
            // -0.0 == 0.0: one key, stored as 0.0.
            let float = if *key && float == 0.0 { 0.0 } else { float };
            Ok(out.push_f64(float)?)
        }
        Node::Members(enum_name, members) => match members.iter().find(|(member, _)| member.bind(py).is(value)) {
            Some((_, name)) => Ok(out.push_str(name)?),
            None => Err(wrong_type(&format!("a {enum_name} member"), value)),
        },
        Node::Datetime(class, text_of) => {
            if value.is_instance(class.bind(py)).map_err(EncodeFailure::Python)? {
                let text = text_of.bind(py).call1((value,)).map_err(EncodeFailure::Python)?;
                return plain(&text, out);
            }
            Err(wrong_type("a datetime", value))
        }
        Node::Struct(node) => {
            // Exactly the class, as the record itself: a subclass's own fields would be lost.
            if value.get_type().is(node.class.bind(py)) {
                return write_struct(node, value, out, ids);
            }
            let expected = node.class.bind(py).name().map(|name| name.to_string()).unwrap_or_default();
            Err(wrong_type(&format!("a {expected}"), value))
        }
        Node::Variants(variants) => {
            let class = value.get_type();
            match variants.iter().find(|(_, _, node)| class.is(node.class.bind(py))) {
                Some((name, slot, node)) => {
                    out.begin_dict()?;
                    write_key(out, ids, *slot, name)?;
                    write_struct(node, value, out, ids).map_err(|error| error.in_field(name))?;
                    Ok(out.end_dict()?)
                }
                None => {
                    let names: Vec<&str> = variants.iter().map(|(name, _, _)| name.as_str()).collect();
                    Err(wrong_type(&format!("one of {}", names.join(", ")), value))
                }
            }
        }
        Node::Optional(_) if value.is_none() => Ok(out.push_null()?),
        Node::Optional(inner) => write(inner, value, out, ids),
        Node::List(inner) => {
            // A tuple is stored as a list (documented, as the dictionary API does).
            if !(value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>()) {
                return Err(wrong_type("a list", value));
            }
            out.begin_array()?;
            let items = value.try_iter().map_err(EncodeFailure::Python)?;
            for (index, item) in items.enumerate() {
                let item = item.map_err(EncodeFailure::Python)?;
                write(inner, &item, out, ids).map_err(|error| error.in_item(index))?;
            }
            Ok(out.end_array()?)
        }
        Node::Map(inner) => {
            let Ok(dict) = value.downcast::<PyDict>() else { return Err(wrong_type("a dict", value)) };
            out.begin_dict()?;
            for (key, item) in dict.iter() {
                let key = key.downcast::<PyString>().map_err(|_| ConvertError::new("a dict key that is not a str"))?;
                let key = key.to_cow().map_err(|_| ConvertError::new("a dict key that is not valid UTF-8"))?;
                out.key(&key).map_err(|error| EncodeFailure::from(error).in_field(&key))?;
                write(inner, &item, out, ids).map_err(|error| error.in_field(&key))?;
            }
            Ok(out.end_dict()?)
        }
    }
}

/// A record encoded by a [`RecordEncoder`], queued for a commit (opaque to Python; `build`
/// reads it back, for a transaction's own reads).
#[pyclass(module = "tessera._native", frozen)]
pub struct EncodedRecord {
    /// The document.
    pub bytes: Vec<u8>,
    /// The collection whose shared keys encoded it; `None` for a document without shared keys.
    pub collection: Option<tessera::collection::DynCollection>,
}

#[pymethods]
impl EncodedRecord {
    /// The record built along `plan` (a `Plan`), or as plain Python values without one.
    #[pyo3(signature = (plan = None))]
    fn build(&self, py: Python<'_>, plan: Option<Py<crate::plan::Plan>>) -> PyResult<PyObject> {
        let doc = match &self.collection {
            Some(collection) => tessera::value::Doc::from_trusted_with_keys(&self.bytes, collection.shared_keys()),
            None => tessera::value::Doc::from_trusted(&self.bytes),
        };
        let doc = doc.map_err(|error| crate::errors::to_py(py, error.into()))?;
        let name = self.collection.as_ref().map(|collection| collection.name().to_owned()).unwrap_or_default();
        let origin = crate::plan::Origin { collection: &name, key: &String::new };
        crate::plan::object(py, doc.root(), plan.as_ref(), &origin)
    }
}

#[pymethods]
impl RecordEncoder {
    /// `object` encoded for collection `collection` (named in errors): a SchemaViolation with
    /// the field path for a value no document holds.
    fn encode_record(&self, py: Python<'_>, collection: &str, object: &Bound<'_, PyAny>) -> PyResult<EncodedRecord> {
        match self.encode(object, None) {
            Ok(bytes) => Ok(EncodedRecord { bytes, collection: None }),
            Err(failure) => Err(failure_to_py(py, collection, failure)),
        }
    }
}

/// The Python exception for an encode failure in `collection`.
pub fn failure_to_py(py: Python<'_>, collection: &str, failure: EncodeFailure) -> PyErr {
    match failure {
        EncodeFailure::Unstorable(error) => crate::errors::unstorable(py, collection, error),
        EncodeFailure::Python(error) => error,
    }
}
