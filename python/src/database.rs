//! `Database`: one open file, the handles made from it, and the write path.
//!
//! Every handle given to Python (a collection, a dictionary, a snapshot) holds the
//! [`Shared`] state, not a `Db`: closing the database drops the `Db` and every cached handle
//! at once, and any later call raises `tessera.Closed` instead of reaching a closed file.

use crate::convert;
use crate::encode::{self, EncodedRecord, RecordEncoder};
use crate::errors;
use crate::keys::{self, KeyBytes};
use crate::plan::{self, Plan};
use crate::reads::ReadSet;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tessera::collection::{DynCollection, DynSchema, WriteOutcome};
use tessera::query::FieldPath;
use tessera::store::ReadTxn;
use tessera::value::Doc;
use tessera::{Db, DbOptions, Dictionary, DictionaryOptions, Documents, Durability};

/// Most operations one `db.write()` block may queue before it commits: a bound on the memory
/// a transaction holds before it reaches LMDB.
pub const TRANSACTION_OPERATIONS_MAX: usize = 1_000_000;

/// State shared by a database and every handle made from it.
pub struct Shared {
    /// `None` once closed.
    db: Mutex<Option<Db>>,
    /// Open collections by name.
    collections: Mutex<HashMap<String, DynCollection>>,
    /// Open dictionaries by name.
    dictionaries: Mutex<HashMap<String, Dictionary>>,
    /// Open document collections by name.
    documents: Mutex<HashMap<String, Documents>>,
    /// The file, for messages.
    pub path: String,
    /// Raised by `close()`: see [`crate::query::CloseSignal`].
    pub close_signal: crate::query::CloseSignal,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    /// The database, or `tessera.Closed`.
    pub fn db(&self, py: Python<'_>) -> PyResult<Db> {
        lock(&self.db).clone().ok_or_else(|| errors::closed(py, &self.path))
    }

    /// The collection `name`, opened once and cached.
    pub fn collection(&self, py: Python<'_>, name: &str) -> PyResult<DynCollection> {
        if let Some(collection) = lock(&self.collections).get(name) {
            return Ok(collection.clone());
        }
        let db = self.db(py)?;
        let collection = py.allow_threads(|| db.dyn_collection(name)).map_err(|error| errors::to_py(py, error))?;
        lock(&self.collections).insert(name.to_owned(), collection.clone());
        Ok(collection)
    }

    /// The dictionary `name`, opened once and cached.
    pub fn dictionary(&self, py: Python<'_>, name: &str) -> PyResult<Dictionary> {
        if let Some(dictionary) = lock(&self.dictionaries).get(name) {
            return Ok(dictionary.clone());
        }
        let db = self.db(py)?;
        let dictionary =
            py.allow_threads(|| db.dictionary_with(name, DictionaryOptions::default())).map_err(|error| errors::to_py(py, error))?;
        lock(&self.dictionaries).insert(name.to_owned(), dictionary.clone());
        Ok(dictionary)
    }
}

impl Shared {
    /// The document collection `name`, opened once and cached.
    pub fn documents(&self, py: Python<'_>, name: &str) -> PyResult<Documents> {
        if let Some(documents) = lock(&self.documents).get(name) {
            return Ok(documents.clone());
        }
        let db = self.db(py)?;
        let documents = py.allow_threads(|| db.documents(name)).map_err(|error| errors::to_py(py, error))?;
        lock(&self.documents).insert(name.to_owned(), documents.clone());
        Ok(documents)
    }
}

/// One queued write of a transaction, encoded before the commit starts.
pub(crate) enum Operation {
    Insert { collection: DynCollection, record: Record },
    Upsert { collection: DynCollection, record: Record },
    Delete { collection: DynCollection, key: KeyBytes },
}

/// A queued record.
pub(crate) enum Record {
    /// A document without shared keys (a dict given to `commit`), conformed at the commit.
    Plain(Vec<u8>),
    /// A document a `RecordEncoder` wrote with the collection's shared keys: stored as it is
    /// when it is what conforming would write (`DynCollection::insert_document`).
    Document(Vec<u8>),
}

/// `tessera.LimitExceeded` when a transaction would hold more than
/// [`TRANSACTION_OPERATIONS_MAX`] operations.
pub(crate) fn check_operations(py: Python<'_>, count: usize) -> PyResult<()> {
    if count > TRANSACTION_OPERATIONS_MAX {
        return Err(errors::raise(
            py,
            "LimitExceeded",
            format!("a transaction of {count} operations (at most {TRANSACTION_OPERATIONS_MAX})"),
            &[],
        ));
    }
    Ok(())
}

/// An operation's kind, "insert", "upsert" or "delete": the interned str compared by identity
/// (Python's literals are interned), any other str by its text.
fn operation_kind(kind: &Bound<'_, PyAny>) -> PyResult<&'static str> {
    let py = kind.py();
    if kind.is(intern!(py, "upsert")) {
        return Ok("upsert");
    }
    if kind.is(intern!(py, "insert")) {
        return Ok("insert");
    }
    if kind.is(intern!(py, "delete")) {
        return Ok("delete");
    }
    match &*kind.downcast::<PyString>()?.to_cow()? {
        "insert" => Ok("insert"),
        "upsert" => Ok("upsert"),
        "delete" => Ok("delete"),
        other => Err(pyo3::exceptions::PyValueError::new_err(format!("unknown operation {other:?}"))),
    }
}

impl Database {
    /// Applies `queued` in one write transaction with the GIL released: each operation's
    /// outcome, or the first failure (and nothing written).
    pub(crate) fn apply(&self, py: Python<'_>, queued: &[Operation], reads: Option<&ReadSet>) -> PyResult<Vec<&'static str>> {
        let db = self.shared.db(py)?;
        // The handles this database has open already (no GIL needed for the cache's lock).
        let open = |name: &str| match lock(&self.shared.collections).get(name) {
            Some(collection) => Ok(collection.clone()),
            None => db.dyn_collection(name),
        };
        py.allow_threads(|| {
            db.write(|tx| {
                // What the block read must still hold, before any of its writes (reads.rs).
                if let Some(reads) = reads {
                    reads.validate(tx, &open)?;
                }
                let mut outcomes = Vec::with_capacity(queued.len());
                for operation in queued {
                    let outcome = Self::apply_one(tx, operation).map_err(|error| name_key_size(operation, error))?;
                    outcomes.push(outcome_name(outcome));
                }
                Ok(outcomes)
            })
        })
        .map_err(|error| errors::to_py(py, error))
    }

    /// Applies one queued operation in `tx`.
    fn apply_one(tx: &mut tessera::store::WriteTxn<'_>, operation: &Operation) -> tessera::Result<WriteOutcome> {
        Ok(match operation {
            Operation::Insert { collection, record: Record::Plain(record) } => collection.insert(tx, Doc::from_trusted(record)?.root())?,
            Operation::Upsert { collection, record: Record::Plain(record) } => collection.upsert(tx, Doc::from_trusted(record)?.root())?,
            // The extension's own encoder output, with this collection's table.
            Operation::Insert { collection, record: Record::Document(document) } => {
                collection.insert_document(tx, Doc::from_trusted_with_keys(document, collection.shared_keys())?)?
            }
            Operation::Upsert { collection, record: Record::Document(document) } => {
                collection.upsert_document(tx, Doc::from_trusted_with_keys(document, collection.shared_keys())?)?
            }
            Operation::Delete { collection, key } => key.delete(collection, tx)?,
        })
    }
}

/// `Error::KeySize` from a record write (it names no collection) as `SchemaViolation` naming
/// the collection, and the key fields when the record's key is what is too long (else an
/// index entry is: the indexed value beside the key); any other error unchanged.
fn name_key_size(operation: &Operation, error: tessera::Error) -> tessera::Error {
    let (len, max) = match error {
        tessera::Error::KeySize { len, max } => (len, max),
        other => return other,
    };
    let (Operation::Insert { collection, record } | Operation::Upsert { collection, record }) = operation else {
        return tessera::Error::KeySize { len, max };
    };
    let schema = collection.schema();
    let doc = match record {
        Record::Plain(bytes) => Doc::from_trusted(bytes),
        Record::Document(bytes) => Doc::from_trusted_with_keys(bytes, collection.shared_keys()),
    };
    let mut key = Vec::new();
    let primary = doc.is_ok_and(|doc| {
        schema
            .key_fields
            .iter()
            .zip(&schema.key_kinds)
            .all(|(field, kind)| FieldPath::new(field).lookup(doc.root()).is_some_and(|part| kind.encode(part, &mut key).is_ok()))
            && key.len() == len
    });
    let (path, problem) = match primary {
        true => (schema.key_fields.join(", "), format!("a key of {len} bytes, over the {max} bytes a stored key can have")),
        false => (
            String::new(),
            format!("an index entry of {len} bytes (the indexed value beside the key), over the {max} bytes an entry can have"),
        ),
    };
    tessera::Error::SchemaViolation { collection: collection.name().to_owned(), key: String::new(), path, problem }
}

/// The record of `collection` (named `name`) at `key` (an encoded key document) in `txn`,
/// built along `plan`; inside a write block, `reads` records the stored bytes it saw (and the
/// snapshot's sequence) for the block's commit to check (`reads.rs`). `None` when there is no
/// such record.
pub(crate) fn read_record(
    py: Python<'_>,
    collection: &DynCollection,
    name: &str,
    txn: &ReadTxn<'_>,
    key: &KeyBytes,
    plan: Option<&Py<Plan>>,
    reads: Option<&ReadSet>,
) -> tessera::Result<Option<PyResult<PyObject>>> {
    let shown_key = || key.stored().and_then(|stored| collection.display_key(stored)).unwrap_or_default();
    let origin = plan::Origin { collection: name, key: &shown_key };
    let found =
        key.get_with(collection, txn, |record| (plan::object(py, record, plan, &origin), reads.map(|_| record.doc().bytes().to_vec())))?;
    if let Some(reads) = reads {
        reads.record_get(name, key, found.as_ref().and_then(|(_, stored)| stored.as_deref()), txn.sequence())?;
    }
    Ok(found.map(|(record, _)| record))
}

fn outcome_name(outcome: WriteOutcome) -> &'static str {
    match outcome {
        WriteOutcome::Inserted => "inserted",
        WriteOutcome::Updated => "updated",
        WriteOutcome::Unchanged => "unchanged",
        WriteOutcome::Deleted => "deleted",
    }
}

/// An open tessera database file (the extension's side of `tessera.Database`).
#[pyclass(module = "tessera._native", frozen)]
pub struct Database {
    /// The file and its handles.
    pub shared: Arc<Shared>,
}

#[pymethods]
impl Database {
    /// Opens (or creates) the database at `path`. `durability` is "immediate" (each commit
    /// flushed before it returns) or "buffered" (flushed within `buffered_delay_ms`).
    #[new]
    #[pyo3(signature = (path, durability = "immediate", buffered_delay_ms = 100, read_only = false, map_size_max_bytes = None))]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        durability: &str,
        buffered_delay_ms: u64,
        read_only: bool,
        map_size_max_bytes: Option<u64>,
    ) -> PyResult<Database> {
        let durability = match durability {
            "immediate" => Durability::Immediate,
            "buffered" => Durability::Buffered { max_delay: Duration::from_millis(buffered_delay_ms.max(1)) },
            other => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "durability must be \"immediate\" or \"buffered\", not {other:?}"
                )));
            }
        };
        let mut options = DbOptions { durability, read_only, ..DbOptions::default() };
        if let Some(ceiling) = map_size_max_bytes {
            options.map_size_max_bytes = ceiling;
        }
        let shown = path.to_string_lossy().into_owned();
        let db = py.allow_threads(|| Db::open_with(&path, options)).map_err(|error| errors::to_py(py, error))?;
        let shared = Shared {
            db: Mutex::new(Some(db)),
            collections: Mutex::new(HashMap::new()),
            dictionaries: Mutex::new(HashMap::new()),
            documents: Mutex::new(HashMap::new()),
            path: shown,
            close_signal: crate::query::CloseSignal::default(),
        };
        Ok(Database { shared: Arc::new(shared) })
    }

    /// The file's path.
    #[getter]
    fn path(&self) -> String {
        self.shared.path.clone()
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        lock(&self.shared.db).is_none()
    }

    /// Flushes dictionaries and commits to stable storage and closes the file; later calls on
    /// this database or its handles raise `tessera.Closed`. Closing twice does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let dictionaries: Vec<Dictionary> = lock(&self.shared.dictionaries).drain().map(|(_, d)| d).collect();
        lock(&self.shared.collections).clear();
        lock(&self.shared.documents).clear();
        let Some(db) = lock(&self.shared.db).take() else { return Ok(()) };
        // Every subscription made through this database ends now, even while a query
        // iterator or a read block still holds the file open for a moment.
        self.shared.close_signal.raise();
        py.allow_threads(|| {
            for dictionary in dictionaries {
                dictionary.flush()?;
            }
            // Other holders (a subscription's thread) may still hold the file for a moment:
            // then it closes when they let go, and only the flush is reported.
            match db.close() {
                Err(tessera::Error::StillOpen { .. }) => Ok(()),
                other => other,
            }
        })
        .map_err(|error| errors::to_py(py, error))
    }

    /// Names of the collections stored in the file.
    fn collection_names(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let db = self.shared.db(py)?;
        let catalog = py.allow_threads(|| db.catalog()).map_err(|error| errors::to_py(py, error))?;
        Ok(catalog.collections)
    }

    /// Creates the collection `name` from a schema given as JSON (a `DynSchema`), or opens it
    /// if it exists with the same key and shape (`tessera.SchemaMismatch` otherwise). Returns
    /// the stored schema as JSON.
    fn create_collection(&self, py: Python<'_>, name: &str, schema_json: &str) -> PyResult<String> {
        let schema: DynSchema = serde_json::from_str(schema_json).map_err(|error| {
            let reason = format!("the schema does not read: {error}");
            let fields = [("collection", errors::text(py, name)), ("reason", errors::text(py, &reason))];
            errors::raise(py, "SchemaMismatch", format!("collection {name:?}: {reason}"), &fields)
        })?;
        let db = self.shared.db(py)?;
        // An existing collection is opened without a write (a read-only handle can open it),
        // and must agree with the dataclass on its key and shape.
        let opened = py.allow_threads(|| match db.dyn_collection(name) {
            Ok(existing) => {
                let stored = existing.schema();
                if stored.key_fields != schema.key_fields || !stored.shape.agrees_with(&schema.shape) {
                    return Err(tessera::Error::SchemaMismatch {
                        collection: name.to_owned(),
                        reason: format!(
                            "the stored schema (key {:?}, shape {:?}) differs from the dataclass's (key {:?}, shape {:?})",
                            stored.key_fields, stored.shape, schema.key_fields, schema.shape
                        ),
                    });
                }
                Ok(existing)
            }
            Err(tessera::Error::NoSuchCollection { .. }) => db.create_dyn_collection(name, &schema),
            Err(error) => Err(error),
        });
        let collection = opened.map_err(|error| errors::to_py(py, error))?;
        let stored = serde_json::to_string(collection.schema()).expect("a schema serializes");
        lock(&self.shared.collections).insert(name.to_owned(), collection);
        Ok(stored)
    }

    /// The stored schema of collection `name` as JSON; `tessera.NoSuchCollection` if none.
    fn schema(&self, py: Python<'_>, name: &str) -> PyResult<String> {
        let collection = self.shared.collection(py, name)?;
        Ok(serde_json::to_string(collection.schema()).expect("a schema serializes"))
    }

    /// Commits `operations` in one transaction: each a tuple (kind, collection, value) with
    /// kind "insert", "upsert" (value: the record, a dict or an `EncodedRecord`) or "delete" (value: the key). All or
    /// nothing: the first failure rolls everything back and is raised. Returns each
    /// operation's outcome ("inserted", "updated", "unchanged", "deleted").
    #[pyo3(signature = (operations, reads = None))]
    fn commit(&self, py: Python<'_>, operations: &Bound<'_, PyList>, reads: Option<Py<ReadSet>>) -> PyResult<Vec<&'static str>> {
        check_operations(py, operations.len())?;
        let mut queued = Vec::with_capacity(operations.len());
        // The collection of the previous operation: a batch names one collection again and
        // again, as the same str object (compared by identity first, then by text).
        let mut last: Option<(Bound<'_, PyAny>, String, DynCollection)> = None;
        for operation in operations.iter() {
            let operation = operation.downcast::<PyTuple>()?;
            let kind = operation_kind(&operation.get_item(0)?)?;
            let name_object = operation.get_item(1)?;
            let known = match &last {
                Some((object, cached, _)) => object.is(&name_object) || *cached == *name_object.downcast::<PyString>()?.to_cow()?,
                None => false,
            };
            if !known {
                let name = name_object.downcast::<PyString>()?.to_cow()?.into_owned();
                let collection = self.shared.collection(py, &name)?;
                last = Some((name_object, name, collection));
            }
            let (name, collection) = match &last {
                Some((_, name, collection)) => (name.as_str(), collection.clone()),
                None => unreachable!("set above"),
            };
            let value = operation.get_item(2)?;
            if kind == "delete" {
                let key = keys::key_bytes(py, &collection, name, &value)?;
                queued.push(Operation::Delete { collection, key });
                continue;
            }
            let mut collection = collection;
            let record = match value.downcast::<EncodedRecord>() {
                // Encoded by a RecordEncoder, with this collection's shared keys or none.
                Ok(encoded) => match &encoded.get().collection {
                    Some(encoder) if encoder.records_keyspace() == collection.records_keyspace() => {
                        // Written through the handle whose shared-key table encoded it.
                        collection = encoder.clone();
                        Record::Document(encoded.get().bytes.clone())
                    }
                    Some(encoder) => {
                        return Err(pyo3::exceptions::PyValueError::new_err(format!(
                            "a record encoded for collection {:?} queued for collection {name:?}",
                            encoder.records_keyspace()
                        )));
                    }
                    None => Record::Plain(encoded.get().bytes.clone()),
                },
                _ => Record::Plain(convert::to_document(&value).map_err(|error| errors::unstorable(py, name, error))?),
            };
            queued.push(match kind {
                "insert" => Operation::Insert { collection, record },
                _ => Operation::Upsert { collection, record },
            });
        }
        self.apply(py, &queued, reads.as_ref().map(Py::get))
    }

    /// Encodes each of `objects` (instances of the record type of `encoder`) and commits them
    /// to collection `name` in one transaction, as `commit` would with `kind` ("insert" or
    /// "upsert") for each: all or nothing. Returns each record's outcome.
    fn write_records(
        &self,
        py: Python<'_>,
        kind: &str,
        name: &str,
        encoder: PyRef<'_, RecordEncoder>,
        objects: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<&'static str>> {
        let collection = self.shared.collection(py, name)?;
        let objects = objects.try_iter()?;
        let mut queued = Vec::new();
        for object in objects {
            check_operations(py, queued.len() + 1)?;
            let record =
                encoder.encode(&object?, Some(collection.shared_keys())).map_err(|failure| encode::failure_to_py(py, name, failure))?;
            let record = Record::Document(record);
            let collection = collection.clone();
            queued.push(match kind {
                "insert" => Operation::Insert { collection, record },
                "upsert" => Operation::Upsert { collection, record },
                other => return Err(pyo3::exceptions::PyValueError::new_err(format!("unknown record write {other:?}"))),
            });
        }
        self.apply(py, &queued, None)
    }

    /// `object` (an instance of the record type of `encoder`) encoded for collection `name`
    /// with its shared keys, for a write block's queue: `tessera.SchemaViolation` with the
    /// field path for a value no document holds.
    fn encode_record(
        &self,
        py: Python<'_>,
        name: &str,
        encoder: PyRef<'_, RecordEncoder>,
        object: &Bound<'_, PyAny>,
    ) -> PyResult<EncodedRecord> {
        let collection = self.shared.collection(py, name)?;
        let bytes = encoder.encode(object, Some(collection.shared_keys())).map_err(|failure| encode::failure_to_py(py, name, failure))?;
        Ok(EncodedRecord { bytes, collection: Some(collection) })
    }

    /// Deletes the records of collection `name` at each of `keys` in one transaction, as
    /// `commit` would with a "delete" for each (all or nothing). Returns each outcome
    /// ("deleted", or "unchanged" where there was none).
    ///
    /// The deletes run in stored-key order (LMDB then walks its pages in order, each changed
    /// once, instead of jumping between them); the outcomes are in the order of `keys`, and a
    /// key given twice is deleted by its first appearance.
    fn delete_keys(&self, py: Python<'_>, name: &str, keys: &Bound<'_, PyList>) -> PyResult<Vec<&'static str>> {
        check_operations(py, keys.len())?;
        let collection = self.shared.collection(py, name)?;
        let mut encoded = Vec::with_capacity(keys.len());
        for (position, key) in keys.iter().enumerate() {
            encoded.push((position, keys::key_bytes(py, &collection, name, &key)?));
        }
        // Stable: equal keys keep their order. Keys the collection cannot encode yet (their
        // delete is refused) come last.
        encoded.sort_by(|(_, a), (_, b)| (a.stored().is_none(), a.stored()).cmp(&(b.stored().is_none(), b.stored())));
        // One transaction, one handle for every key (no operation queue).
        let db = self.shared.db(py)?;
        let deleted = py.allow_threads(|| {
            db.write(|tx| {
                let mut in_order = vec![""; encoded.len()];
                for (position, key) in &encoded {
                    in_order[*position] = outcome_name(key.delete(&collection, tx)?);
                }
                Ok(in_order)
            })
        });
        deleted.map_err(|error| errors::to_py(py, error))
    }

    /// The record of collection `name` at `key` (built along `plan`, or a dict), or None.
    /// Built straight from the stored bytes, with the GIL held for the read (a key lookup).
    /// Inside a write block, `reads` records what was read, for the block's commit to check.
    #[pyo3(signature = (name, key, plan = None, reads = None))]
    fn get(
        &self,
        py: Python<'_>,
        name: &str,
        key: &Bound<'_, PyAny>,
        plan: Option<Py<Plan>>,
        reads: Option<Py<ReadSet>>,
    ) -> PyResult<PyObject> {
        let collection = self.shared.collection(py, name)?;
        let key = keys::key_bytes(py, &collection, name, key)?;
        let db = self.shared.db(py)?;
        let found = db.read(|txn| read_record(py, &collection, name, txn, &key, plan.as_ref(), reads.as_ref().map(Py::get)));
        match found.map_err(|error| errors::to_py(py, error))? {
            Some(record) => record,
            None => Ok(py.None()),
        }
    }

    /// The records of collection `name` at each of `keys` (built along `plan`, or dicts;
    /// None where absent), read in one snapshot.
    #[pyo3(signature = (name, keys, plan = None, reads = None))]
    fn get_many(
        &self,
        py: Python<'_>,
        name: &str,
        keys: &Bound<'_, PyList>,
        plan: Option<Py<Plan>>,
        reads: Option<Py<ReadSet>>,
    ) -> PyResult<Vec<PyObject>> {
        let collection = self.shared.collection(py, name)?;
        let mut encoded = Vec::with_capacity(keys.len());
        for key in keys.iter() {
            encoded.push(keys::key_bytes(py, &collection, name, &key)?);
        }
        let db = self.shared.db(py)?;
        let found = db.read(|txn| {
            let mut records = Vec::with_capacity(encoded.len());
            for key in &encoded {
                let built = read_record(py, &collection, name, txn, key, plan.as_ref(), reads.as_ref().map(Py::get))?;
                records.push(built.unwrap_or_else(|| Ok(py.None())));
            }
            Ok(records)
        });
        found.map_err(|error| errors::to_py(py, error))?.into_iter().collect()
    }

    /// `key` (the key field's value, or a list for a composite key) as collection `name`'s
    /// errors show a record's key (`DuplicateKey.key`, `UniqueViolation.key`): the value as
    /// JSON, or a JSON array of the parts; empty when the collection cannot encode it.
    /// `tessera.SchemaViolation` naming the key field for a part of the wrong type.
    fn display_key(&self, py: Python<'_>, name: &str, key: &Bound<'_, PyAny>) -> PyResult<String> {
        let collection = self.shared.collection(py, name)?;
        let key = keys::key_bytes(py, &collection, name, key)?;
        Ok(key.stored().and_then(|stored| collection.display_key(stored)).unwrap_or_default())
    }

    /// Flushes every commit so far to stable storage.
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        let db = self.shared.db(py)?;
        py.allow_threads(|| db.sync()).map_err(|error| errors::to_py(py, error))
    }
}
