//! `WriteBlock`: the queue, overlay and read set of one `with db.write()` block, kept in the
//! extension.
//!
//! A block's writes are encoded when they are made (an unstorable value raises at the call)
//! and queued as the operations the commit applies, and each queued record is indexed by its
//! stored key, so that a `get` in the block sees the block's own writes (read-your-writes).
//! A `get` that the block has not written is read from the database and recorded in the
//! block's [`ReadSet`], which the commit checks again (`reads.rs`). Keeping all of this here
//! makes an `upsert` in a block one native call, with no Python tuple, dict entry or
//! intermediate `EncodedRecord` per write.
//!
//! The block's lock is never held while Python code runs (encoding reads attributes, building
//! a record may call the class), so a property getter that reads through the same block does
//! not deadlock; and never while the commit runs with the GIL released.

use crate::database::{self, Database, Operation, Record};
use crate::encode::{self, RecordEncoder};
use crate::errors;
use crate::keys;
use crate::plan::{self, Plan};
use crate::reads::ReadSet;
use pyo3::prelude::*;
use pyo3::types::PyString;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tessera::collection::DynCollection;
use tessera::query::FieldPath;
use tessera::value::Doc;

/// A collection the block wrote or read, with its handle and the block's writes to it.
struct Written {
    /// The name as Python passes it (compared by identity first: a collection passes the same
    /// str object every time).
    name: Py<PyString>,
    /// The name's text (shared with the reads the block records).
    text: Arc<str>,
    /// The handle the block's records are encoded for and committed through.
    collection: DynCollection,
    /// The key fields, as paths into an encoded record.
    key_paths: Vec<FieldPath>,
    /// Stored key -> the index in the queue of the block's last write at that key, or `None`
    /// for a delete.
    overlay: HashMap<Vec<u8>, Option<usize>, foldhash::fast::RandomState>,
}

/// What a block holds between its writes.
struct State {
    /// Whether the block still takes writes (until it commits or is discarded).
    active: bool,
    /// The queued writes, in order.
    queued: Vec<Operation>,
    /// The collections the block used, each with its overlay.
    written: Vec<Written>,
}

/// One `with db.write()` block's queued writes, its overlay of them for reads, and what it
/// read (the extension's side of `tessera.Transaction`).
#[pyclass(module = "tessera._native", frozen)]
pub struct WriteBlock {
    database: Py<Database>,
    reads: Py<ReadSet>,
    state: Mutex<State>,
}

/// A write's kind.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Insert,
    Upsert,
}

impl WriteBlock {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `tessera.Error` once the block has ended.
    fn check_active(py: Python<'_>, state: &State) -> PyResult<()> {
        if state.active {
            return Ok(());
        }
        Err(errors::raise(py, "Error", "the transaction has ended".to_owned(), &[]))
    }

    /// The position of collection `name` among the block's collections (opened and added on
    /// first use), its handle and its name.
    fn position(&self, py: Python<'_>, name: &Bound<'_, PyString>) -> PyResult<(usize, DynCollection, Arc<str>)> {
        let found = |state: &State, same: &dyn Fn(&Written) -> bool| {
            state.written.iter().position(same).map(|position| {
                let written = &state.written[position];
                (position, written.collection.clone(), written.text.clone())
            })
        };
        {
            let state = self.lock();
            Self::check_active(py, &state)?;
            if let Some(found) = found(&state, &|written| written.name.bind(py).is(name)) {
                return Ok(found);
            }
        }
        let text: Arc<str> = Arc::from(&*name.to_cow()?);
        let collection = self.database.get().shared.collection(py, &text)?;
        let mut state = self.lock();
        Self::check_active(py, &state)?;
        if let Some(found) = found(&state, &|written| written.text == text) {
            return Ok(found);
        }
        let key_paths = collection.schema().key_fields.iter().map(|field| FieldPath::new(field)).collect();
        let overlay = HashMap::with_hasher(foldhash::fast::RandomState::default());
        state.written.push(Written { name: name.clone().unbind(), text: text.clone(), collection: collection.clone(), key_paths, overlay });
        Ok((state.written.len() - 1, collection, text))
    }

    /// The stored key of `record` (encoded with `collection`'s shared keys): what the commit
    /// will store it under. `None` when it has none (a key field missing or of another type,
    /// or key kinds the collection does not know): the commit then refuses the record with the
    /// collection's own error, and no read in the block can name it meanwhile.
    fn stored_key(collection: &DynCollection, key_paths: &[FieldPath], record: &[u8]) -> Option<Vec<u8>> {
        let schema = collection.schema();
        if schema.key_kinds.len() != key_paths.len() {
            return None;
        }
        let doc = Doc::from_trusted_with_keys(record, collection.shared_keys()).ok()?;
        let mut key = Vec::with_capacity(32);
        for (path, kind) in key_paths.iter().zip(&schema.key_kinds) {
            let part = path.lookup(doc.root()).filter(|value| !value.is_null())?;
            kind.encode(part, &mut key).ok()?;
        }
        Some(key)
    }

    /// Queues an insert or upsert of `object` into collection `name`.
    fn write(
        &self,
        py: Python<'_>,
        kind: Kind,
        name: &Bound<'_, PyString>,
        encoder: &RecordEncoder,
        object: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (position, collection, text) = self.position(py, name)?;
        // Encoded without the lock: reading the object may run Python code.
        let bytes = encoder.encode(object, Some(collection.shared_keys())).map_err(|failure| encode::failure_to_py(py, &text, failure))?;
        let mut state = self.lock();
        Self::check_active(py, &state)?;
        database::check_operations(py, state.queued.len() + 1)?;
        let index = state.queued.len();
        let written = &mut state.written[position];
        if let Some(key) = Self::stored_key(&written.collection, &written.key_paths, &bytes) {
            if kind == Kind::Insert && matches!(written.overlay.get(&key), Some(Some(_))) {
                let shown = written.collection.display_key(&key).unwrap_or_default();
                return Err(errors::to_py(py, tessera::Error::DuplicateKey { collection: text.to_string(), key: shown }));
            }
            written.overlay.insert(key, Some(index));
        }
        let record = Record::Document(bytes);
        state.queued.push(match kind {
            Kind::Insert => Operation::Insert { collection, record },
            Kind::Upsert => Operation::Upsert { collection, record },
        });
        Ok(())
    }
}

#[pymethods]
impl WriteBlock {
    /// A block writing to `database` and recording its reads in `reads`.
    #[new]
    fn new(database: Py<Database>, reads: Py<ReadSet>) -> Self {
        WriteBlock { database, reads, state: Mutex::new(State { active: true, queued: Vec::new(), written: Vec::new() }) }
    }

    /// Whether the block still takes writes.
    #[getter]
    fn active(&self) -> bool {
        self.lock().active
    }

    /// Operations queued so far.
    fn __len__(&self) -> usize {
        self.lock().queued.len()
    }

    /// Queues an insert of `object` (an instance of the record type of `encoder`) into
    /// collection `name`, encoded now: `tessera.SchemaViolation` with the field path for a
    /// value no document holds, `tessera.DuplicateKey` if the block wrote a record at its key
    /// already (a key stored before the block is refused by the commit).
    fn insert(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        encoder: PyRef<'_, RecordEncoder>,
        object: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.write(py, Kind::Insert, name, &encoder, object)
    }

    /// Queues an upsert of `object`, as `insert` does (without the duplicate check).
    fn upsert(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyString>,
        encoder: PyRef<'_, RecordEncoder>,
        object: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.write(py, Kind::Upsert, name, &encoder, object)
    }

    /// Queues the deletion of the record of collection `name` at `key` (the key field's value,
    /// or a list for a composite key): `tessera.SchemaViolation` naming the key field for a
    /// part of the wrong type.
    fn delete(&self, py: Python<'_>, name: &Bound<'_, PyString>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let (position, collection, text) = self.position(py, name)?;
        let key = keys::key_bytes(py, &collection, &text, key)?;
        let mut state = self.lock();
        Self::check_active(py, &state)?;
        database::check_operations(py, state.queued.len() + 1)?;
        if let Some(stored) = key.stored() {
            state.written[position].overlay.insert(stored.to_vec(), None);
        }
        state.queued.push(Operation::Delete { collection, key });
        Ok(())
    }

    /// The record of collection `name` at `key`, built along `plan` (or a dict), or None: the
    /// block's own last write at that key if it made one, else what the database holds,
    /// recorded for the commit to check.
    #[pyo3(signature = (name, key, plan = None))]
    fn get(&self, py: Python<'_>, name: &Bound<'_, PyString>, key: &Bound<'_, PyAny>, plan: Option<Py<Plan>>) -> PyResult<PyObject> {
        let (position, collection, text) = self.position(py, name)?;
        let key = keys::key_bytes(py, &collection, &text, key)?;
        if let Some(stored) = key.stored() {
            // The pending record's bytes, copied out: building it may run Python code.
            let pending = {
                let state = self.lock();
                match state.written[position].overlay.get(stored) {
                    None => None,
                    Some(None) => Some(None),
                    Some(Some(index)) => match &state.queued[*index] {
                        Operation::Insert { record: Record::Document(bytes), .. }
                        | Operation::Upsert { record: Record::Document(bytes), .. } => Some(Some(bytes.clone())),
                        _ => None,
                    },
                }
            };
            match pending {
                Some(None) => return Ok(py.None()),
                Some(Some(bytes)) => {
                    let doc =
                        Doc::from_trusted_with_keys(&bytes, collection.shared_keys()).map_err(|error| errors::to_py(py, error.into()))?;
                    let origin = plan::Origin { collection: &text, key: &String::new };
                    return plan::object(py, doc.root(), plan.as_ref(), &origin);
                }
                None => {}
            }
        }
        let db = self.database.get().shared.db(py)?;
        let reads = self.reads.get();
        let found = db.read(move |txn| {
            let found = {
                let shown_key = || key.stored().and_then(|stored| collection.display_key(stored)).unwrap_or_default();
                let origin = plan::Origin { collection: &text, key: &shown_key };
                key.get_with(&collection, txn, |record| (plan::object(py, record, plan.as_ref(), &origin), record.doc().bytes().to_vec()))?
            };
            let (built, stored) = match found {
                Some((built, stored)) => (Some(built), Some(stored)),
                None => (None, None),
            };
            // Recorded, for the commit to check that it still holds (the key handed over).
            reads.record_get_owned(text, key, stored, txn.sequence())?;
            Ok(built)
        });
        match found.map_err(|error| errors::to_py(py, error))? {
            Some(record) => record,
            None => Ok(py.None()),
        }
    }

    /// Ends the block and commits its writes in one transaction (with the GIL released), after
    /// checking that what it read still holds (`tessera.TransactionConflict` otherwise): each
    /// write's outcome, or the first failure and nothing written. Nothing to commit: `[]`.
    fn commit(&self, py: Python<'_>) -> PyResult<Vec<&'static str>> {
        let queued = {
            let mut state = self.lock();
            Self::check_active(py, &state)?;
            state.active = false;
            state.written.clear();
            std::mem::take(&mut state.queued)
        };
        if queued.is_empty() {
            return Ok(Vec::new());
        }
        self.database.get().apply(py, &queued, Some(self.reads.get()))
    }

    /// Ends the block without writing anything.
    fn discard(&self) {
        let mut state = self.lock();
        state.active = false;
        state.written.clear();
        state.queued = Vec::new();
    }
}
