//! Queries, snapshots and live subscriptions on dynamic collections.
//!
//! A query runs in one snapshot with the GIL released and keeps its matches as stored bytes;
//! [`QueryResult`] turns each into a Python dict only when the iterator reaches it. A
//! [`Snapshot`] (`with db.read()`) keeps one read transaction open on a thread of its own
//! (LMDB ties a transaction to the code that opened it, and Python may call from any thread)
//! and runs each read there. A [`Subscription`] waits for deliveries with the GIL released.

use crate::convert;
use crate::database::{Database, Shared};
use crate::errors;
use crate::plan::{self, Plan};
use crate::reads::ReadSet;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tessera::QuerySubscription;
use tessera::collection::{DynCollection, DynQuery, DynRecord};
use tessera::live::Event;
use tessera::value::Doc;

/// Longest a single wait of `Subscription.next` lasts, in seconds: a wait without a timeout
/// wakes this often to let Python deliver signals (Ctrl-C), then waits again.
pub const WAIT_SLICE_SECONDS: f64 = 0.1;

/// Raised by the Python database's `close()`, and seen by every subscription made through it
/// at its next wait (within [`WAIT_SLICE_SECONDS`]): the native database stays open while a
/// query iterator or a read block still holds it, and its subscriptions would otherwise get no
/// `Closed` until they let go, though `close()` had returned.
#[derive(Clone, Default)]
pub struct CloseSignal(Arc<std::sync::atomic::AtomicBool>);

impl CloseSignal {
    /// `close()` was called.
    pub fn raise(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether `close()` was called.
    pub fn raised(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// How long the next wait lasts: until `deadline`, and at most [`WAIT_SLICE_SECONDS`].
pub fn wait_slice(deadline: Option<std::time::Instant>) -> Duration {
    let slice = Duration::from_secs_f64(WAIT_SLICE_SECONDS);
    match deadline {
        Some(deadline) => deadline.saturating_duration_since(std::time::Instant::now()).min(slice),
        None => slice,
    }
}

/// The deadline `timeout` seconds from now (None: no deadline). A timeout too large for an
/// `Instant` (`float("inf")`) is none, as None is; NaN is a `ValueError`.
pub fn deadline(timeout: Option<f64>) -> PyResult<Option<std::time::Instant>> {
    let Some(seconds) = timeout else { return Ok(None) };
    if seconds.is_nan() {
        return Err(pyo3::exceptions::PyValueError::new_err("a timeout is a number of seconds, not NaN"));
    }
    Ok(Duration::try_from_secs_f64(seconds.max(0.0)).ok().and_then(|wait| std::time::Instant::now().checked_add(wait)))
}

/// The query `text` (None: every record) with the window `offset` and `limit` applied to the
/// text's own results: the text's `offset` and `limit` (if it has them) pick its results, and
/// `offset` and `limit` then pick from those, as slicing twice would (`rows[text_offset:]
/// [:text_limit][offset:][:limit]`). So a window given twice narrows, and never widens, the
/// text's; with no window in the text, the arguments are the window.
pub(crate) fn build(collection: &DynCollection, text: Option<&str>, offset: usize, limit: Option<usize>) -> tessera::Result<DynQuery> {
    let (mut query, text_offset, text_limit) = match text {
        Some(text) if !text.trim().is_empty() => {
            let statement = collection.parse_text(text)?;
            let mut query = match statement.predicate {
                Some(predicate) => collection.filter(predicate)?,
                None => collection.all(),
            };
            for key in statement.order_by {
                query = query.order_by_key(key)?;
            }
            (query, statement.offset, statement.limit)
        }
        _ => (collection.all(), 0, None),
    };
    let (offset, limit) = window_within(text_offset, text_limit, offset, limit);
    query = query.offset(offset);
    if let Some(limit) = limit {
        query = query.limit(limit);
    }
    Ok(query)
}

/// The window `offset`, `limit` taken within the window `outer_offset`, `outer_limit`, as one
/// window (see [`build`]).
fn window_within(outer_offset: usize, outer_limit: Option<usize>, offset: usize, limit: Option<usize>) -> (usize, Option<usize>) {
    let limit = match (outer_limit, limit) {
        (Some(outer), Some(inner)) => Some(outer.saturating_sub(offset).min(inner)),
        (Some(outer), None) => Some(outer.saturating_sub(offset)),
        (None, inner) => inner,
    };
    (outer_offset.saturating_add(offset), limit)
}

/// The matches of a query, copied as stored from one snapshot, built one by one.
#[pyclass(module = "tessera._native")]
pub struct QueryResult {
    collection: DynCollection,
    records: std::vec::IntoIter<(Vec<u8>, Vec<u8>)>,
    plan: Option<Py<Plan>>,
}

#[pymethods]
impl QueryResult {
    fn __iter__(this: PyRef<'_, Self>) -> PyRef<'_, Self> {
        this
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        let Some((key, stored)) = self.records.next() else { return Ok(None) };
        let shown_key = || self.collection.display_key(&key).unwrap_or_default();
        let origin = plan::Origin { collection: self.collection.name(), key: &shown_key };
        let built = self.collection.read_stored(&key, &stored, |record| plan::object(py, record, self.plan.as_ref(), &origin));
        Ok(Some(built.map_err(|error| errors::to_py(py, error))??))
    }

    /// Matches not yet iterated.
    fn __len__(&self) -> usize {
        self.records.len()
    }
}

#[pymethods]
impl Database {
    /// Runs a query on collection `name`: `text` in tessera's query syntax (None: every
    /// record), then `offset` and `limit`, in primary-key order unless the text has an
    /// `order by`.
    ///
    /// Inside a write block, `reads` records what the query matched, for the block's commit
    /// to check again (see `reads.rs`).
    #[pyo3(signature = (name, text = None, offset = 0, limit = None, plan = None, reads = None))]
    #[allow(clippy::too_many_arguments)]
    fn query(
        &self,
        py: Python<'_>,
        name: &str,
        text: Option<&str>,
        offset: usize,
        limit: Option<usize>,
        plan: Option<Py<Plan>>,
        reads: Option<Py<ReadSet>>,
    ) -> PyResult<QueryResult> {
        let collection = self.shared.collection(py, name)?;
        let db = self.shared.db(py)?;
        let records = py
            .allow_threads(|| {
                db.read(|txn| {
                    let records = build(&collection, text, offset, limit)?.fetch_stored(txn)?;
                    if let Some(reads) = &reads {
                        reads.get().record_query(name, text, offset, limit, &records, txn.sequence())?;
                    }
                    Ok(records)
                })
            })
            .map_err(|error| errors::to_py(py, error))?;
        Ok(QueryResult { collection, records: records.into_iter(), plan })
    }

    /// How many records of collection `name` match `text` (recorded in `reads` inside a
    /// write block).
    #[pyo3(signature = (name, text = None, reads = None))]
    fn count(&self, py: Python<'_>, name: &str, text: Option<&str>, reads: Option<Py<ReadSet>>) -> PyResult<usize> {
        let collection = self.shared.collection(py, name)?;
        let db = self.shared.db(py)?;
        py.allow_threads(|| {
            db.read(|txn| {
                let count = build(&collection, text, 0, None)?.count(txn)?;
                if let Some(reads) = &reads {
                    reads.get().record_count(name, text, count, txn.sequence())?;
                }
                Ok(count)
            })
        })
        .map_err(|error| errors::to_py(py, error))
    }

    /// What running the query does (the plan, in words).
    #[pyo3(signature = (name, text = None, offset = 0, limit = None))]
    fn explain(&self, py: Python<'_>, name: &str, text: Option<&str>, offset: usize, limit: Option<usize>) -> PyResult<String> {
        let collection = self.shared.collection(py, name)?;
        build(&collection, text, offset, limit)
            .and_then(|query| query.explain())
            .map(|plan| plan.to_string())
            .map_err(|error| errors::to_py(py, error))
    }

    /// A live subscription to the query (see `Subscription.next`).
    #[pyo3(signature = (name, text = None, offset = 0, limit = None, plan = None))]
    fn subscribe(
        &self,
        py: Python<'_>,
        name: &str,
        text: Option<&str>,
        offset: usize,
        limit: Option<usize>,
        plan: Option<Py<Plan>>,
    ) -> PyResult<Subscription> {
        let collection = self.shared.collection(py, name)?;
        let live = py.allow_threads(|| build(&collection, text, offset, limit)?.subscribe()).map_err(|error| errors::to_py(py, error))?;
        let closed = self.shared.close_signal.clone();
        Ok(Subscription { live: Arc::new(live), plan, origin: Named::of(&collection), released: Arc::default(), closed })
    }

    /// A live record of collection `name` at `key` (see `ObjectSubscription.next`).
    #[pyo3(signature = (name, key, plan = None))]
    fn subscribe_object(&self, py: Python<'_>, name: &str, key: &Bound<'_, PyAny>, plan: Option<Py<Plan>>) -> PyResult<ObjectSubscription> {
        let collection = self.shared.collection(py, name)?;
        let key = convert::to_document(key).map_err(|error| errors::unstorable(py, name, error))?;
        let live =
            py.allow_threads(|| collection.subscribe_object(Doc::from_trusted(&key)?.root())).map_err(|error| errors::to_py(py, error))?;
        Ok(ObjectSubscription { live: Arc::new(live), plan, origin: Named::of(&collection), closed: self.shared.close_signal.clone() })
    }

    /// Opens a snapshot: every read through it sees the database as of now.
    fn snapshot(&self, py: Python<'_>) -> PyResult<Snapshot> {
        Snapshot::open(py, self.shared.clone())
    }
}

/// A collection's name and key fields, to name a record in an error without holding the
/// collection's handle.
pub struct Named {
    name: String,
    key_fields: Vec<String>,
}

impl Named {
    fn of(collection: &DynCollection) -> Arc<Named> {
        Arc::new(Named { name: collection.name().to_owned(), key_fields: collection.schema().key_fields.clone() })
    }

    /// The key of `record` as JSON text (an array for a composite key).
    fn key_of(&self, record: tessera::value::Value<'_>) -> String {
        let part = |field: &String| record.as_dict().and_then(|dict| dict.get(field)).map(|value| value.to_json()).unwrap_or_default();
        match self.key_fields.as_slice() {
            [field] => part(field),
            fields => format!("[{}]", fields.iter().map(part).collect::<Vec<_>>().join(", ")),
        }
    }
}

/// A live query: `next` gives its events.
#[pyclass(module = "tessera._native", frozen)]
pub struct Subscription {
    live: Arc<QuerySubscription<DynRecord>>,
    plan: Option<Py<Plan>>,
    /// The collection, named in an error (not its handle: a subscription does not keep the
    /// database open).
    origin: Arc<Named>,
    /// Results of events Python has let go of, freed by the next wait (see [`Released`]).
    released: Arc<Released>,
    /// The Python database's `close()`.
    closed: CloseSignal,
}

/// Most results a subscription keeps for its next wait to free; past it, a result is freed
/// where it is let go of.
pub const RELEASED_RESULTS_MAX: usize = 4;

/// A result's rows.
type ResultRows = tessera::live::Results<DynRecord>;

/// Results an event's [`Rows`] let go of, freed by the subscription's next wait with the GIL
/// released instead of where the event was dropped.
///
/// A `for event in subscription` loop drops the previous event when it binds the next one,
/// after `next` returned and before the loop's body runs: freeing that event's result there
/// (a reference count per row, thousands for a large result) delayed every event's arrival
/// by that much, with the GIL held. At most [`RELEASED_RESULTS_MAX`] are kept.
#[derive(Default)]
pub struct Released {
    results: Mutex<Vec<ResultRows>>,
}

impl Released {
    /// Keeps `rows` for the next wait to free, if there is room; else lets it go here. (A
    /// result shares the rows a commit did not change with the results before and after it,
    /// so what freeing one costs depends on what the other holders keep: it is kept whether
    /// or not it is the last reference, and freeing one that is not costs one count.)
    fn keep(&self, rows: ResultRows) {
        let mut results = self.results.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if results.len() < RELEASED_RESULTS_MAX {
            results.push(rows);
        }
    }

    /// Frees every kept result.
    fn free(&self) {
        let results = std::mem::take(&mut *self.results.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
        drop(results);
    }
}

/// A live query's result rows, turned into dicts only when asked for (an event's cost then
/// follows what the caller reads, not the size of the result).
#[pyclass(module = "tessera._native", frozen)]
pub struct Rows {
    rows: ResultRows,
    plan: Option<Py<Plan>>,
    /// The collection, named in an error (not its handle: a subscription does not keep the
    /// database open).
    origin: Arc<Named>,
    /// Where the rows go when Python lets go of them: the subscription's next wait frees them.
    released: Arc<Released>,
}

impl Drop for Rows {
    fn drop(&mut self) {
        self.released.keep(std::mem::take(&mut self.rows));
    }
}

#[pymethods]
impl Rows {
    fn __len__(&self) -> usize {
        self.rows.len()
    }

    /// The row at `index` as a dict (negative counts from the end).
    fn __getitem__(&self, py: Python<'_>, index: isize) -> PyResult<PyObject> {
        let len = self.rows.len() as isize;
        let position = if index < 0 { index + len } else { index };
        if position < 0 || position >= len {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!("row {index} of {len}")));
        }
        let row = &self.rows[position as usize];
        let shown_key = || self.origin.key_of(row.value());
        plan::object(py, row.value(), self.plan.as_ref(), &plan::Origin { collection: &self.origin.name, key: &shown_key })
    }
}

fn rows<'py>(
    py: Python<'py>,
    result: &ResultRows,
    plan: &Option<Py<Plan>>,
    origin: &Arc<Named>,
    released: &Arc<Released>,
) -> PyResult<Bound<'py, Rows>> {
    let plan = plan.as_ref().map(|plan| plan.clone_ref(py));
    Bound::new(py, Rows { rows: result.clone(), plan, origin: origin.clone(), released: released.clone() })
}

#[pymethods]
impl Subscription {
    /// The next event, waiting at most `timeout` seconds (None: until one comes), with the
    /// GIL released: ("initial", rows), ("changed", rows, deletions, insertions,
    /// modifications, moves, sequence, resynced), ("closed", reason); None on timeout and
    /// after "closed".
    #[pyo3(signature = (timeout = None))]
    fn next(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<PyObject>> {
        let released = self.released.clone();
        match next_event(py, &self.live, &self.closed, timeout, move || released.free())? {
            Some(event) => self.event(py, event).map(Some),
            None => Ok(None),
        }
    }
}

impl Subscription {
    fn event(&self, py: Python<'_>, event: Event<ResultRows, tessera::ResultChange<DynRecord>>) -> PyResult<PyObject> {
        let tuple = match event {
            Event::Initial(result) => PyTuple::new(
                py,
                [("initial").into_pyobject(py)?.into_any(), rows(py, &result, &self.plan, &self.origin, &self.released)?.into_any()],
            )?,
            Event::Changed(change) => PyTuple::new(
                py,
                [
                    "changed".into_pyobject(py)?.into_any(),
                    rows(py, &change.result, &self.plan, &self.origin, &self.released)?.into_any(),
                    change.deletions.into_pyobject(py)?.into_any(),
                    change.insertions.into_pyobject(py)?.into_any(),
                    change.modifications.into_pyobject(py)?.into_any(),
                    change.moves.into_pyobject(py)?.into_any(),
                    change.sequence.into_pyobject(py)?.into_any(),
                    change.resynced.into_pyobject(py)?.to_owned().into_any(),
                ],
            )?,
            Event::Closed(reason) => {
                PyTuple::new(py, ["closed".into_pyobject(py)?.into_any(), format!("{reason:?}").into_pyobject(py)?.into_any()])?
            }
        };
        Ok(tuple.into_any().unbind())
    }
}

/// Waits for `live`'s next event with the GIL released, at most until `timeout` seconds
/// from now (None: until one comes), waking every [`WAIT_SLICE_SECONDS`] for signals; None
/// on timeout and once the subscription has ended and its events are read. `before_wait`
/// runs once, with the GIL released, before the first wait (freeing what the previous event
/// left).
pub(crate) fn next_event<S: Send + 'static, C: Send + 'static>(
    py: Python<'_>,
    live: &Arc<tessera::live::Subscription<S, C>>,
    closed: &CloseSignal,
    timeout: Option<f64>,
    before_wait: impl FnOnce() + Send,
) -> PyResult<Option<Event<S, C>>> {
    let deadline = deadline(timeout)?;
    let mut before_wait = Some(before_wait);
    loop {
        if closed.raised() {
            // What was delivered before `close()`, then `Closed`.
            return Ok(Some(live.try_recv().unwrap_or(Event::Closed(tessera::live::SubscriptionEnd::DatabaseClosed))));
        }
        let slice = wait_slice(deadline);
        let waiting = live.clone();
        let before = before_wait.take();
        let received = py.allow_threads(move || {
            if let Some(before) = before {
                before();
            }
            waiting.recv_timeout(slice)
        });
        if let Some(event) = received {
            return Ok(Some(event));
        }
        if live.ended().is_some() {
            return Ok(live.try_recv());
        }
        if deadline.is_some_and(|deadline| std::time::Instant::now() >= deadline) {
            return Ok(None);
        }
        py.check_signals()?;
    }
}

/// A live record: `next` gives its events.
#[pyclass(module = "tessera._native", frozen)]
pub struct ObjectSubscription {
    live: Arc<tessera::ObjectSubscription<DynRecord>>,
    plan: Option<Py<Plan>>,
    /// The collection, named in an error (not its handle: a subscription does not keep the
    /// database open).
    origin: Arc<Named>,
    /// The Python database's `close()`.
    closed: CloseSignal,
}

#[pymethods]
impl ObjectSubscription {
    /// The next event, waiting at most `timeout` seconds (None: until one comes), with the
    /// GIL released: ("initial", record or None), ("updated", record), ("deleted", None),
    /// ("closed", reason); None on timeout and after "closed".
    #[pyo3(signature = (timeout = None))]
    fn next(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<PyObject>> {
        let Some(event) = next_event(py, &self.live, &self.closed, timeout, || ())? else { return Ok(None) };
        let record = |record: Option<&Arc<DynRecord>>| match record {
            Some(record) => {
                let shown_key = || self.origin.key_of(record.value());
                plan::object(py, record.value(), self.plan.as_ref(), &plan::Origin { collection: &self.origin.name, key: &shown_key })
            }
            None => Ok(py.None()),
        };
        let (kind, value) = match event {
            Event::Initial(found) => ("initial", record(found.as_ref())?),
            Event::Changed(tessera::live::ObjectChange::Updated(found)) => ("updated", record(Some(&found))?),
            Event::Changed(tessera::live::ObjectChange::Deleted) => ("deleted", py.None()),
            Event::Closed(reason) => ("closed", format!("{reason:?}").into_pyobject(py)?.into_any().unbind()),
        };
        Ok(Some(PyTuple::new(py, [kind.into_pyobject(py)?.into_any().unbind(), value])?.into_any().unbind()))
    }
}

/// A read to run on a snapshot's thread.
type Job = Box<dyn FnOnce(&tessera::ReadTxn<'_>) + Send>;

/// One read transaction, held open by a thread of its own until `close` (see the module
/// docs).
#[pyclass(module = "tessera._native", frozen)]
pub struct Snapshot {
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    shared: Arc<Shared>,
}

impl Snapshot {
    fn open(py: Python<'_>, shared: Arc<Shared>) -> PyResult<Snapshot> {
        let db = shared.db(py)?;
        let (jobs, queue) = mpsc::channel::<Job>();
        let (opened, opened_wait) = mpsc::channel::<tessera::Result<()>>();
        std::thread::Builder::new()
            .name("tessera-snapshot".into())
            .spawn(move || {
                let reported = opened.clone();
                let outcome = db.read(|txn| {
                    let _ = reported.send(Ok(()));
                    for job in queue {
                        job(txn);
                    }
                    Ok(())
                });
                if let Err(error) = outcome {
                    let _ = opened.send(Err(error));
                }
            })
            .map_err(|error| pyo3::exceptions::PyOSError::new_err(error.to_string()))?;
        match py.allow_threads(move || opened_wait.recv()) {
            Ok(Ok(())) => Ok(Snapshot { jobs: Mutex::new(Some(jobs)), shared }),
            Ok(Err(error)) => Err(errors::to_py(py, error)),
            Err(_) => Err(errors::raise(py, "Error", "the snapshot's thread ended before it opened".into(), &[])),
        }
    }

    /// Runs `read` on the snapshot's thread with the GIL released.
    fn run<T: Send + 'static>(
        &self,
        py: Python<'_>,
        read: impl FnOnce(&tessera::ReadTxn<'_>) -> tessera::Result<T> + Send + 'static,
    ) -> PyResult<T> {
        let (reply, reply_wait) = mpsc::channel();
        let job: Job = Box::new(move |txn| {
            let _ = reply.send(read(txn));
        });
        {
            let jobs = self.jobs.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let jobs = jobs.as_ref().ok_or_else(|| errors::raise(py, "Closed", "the snapshot is closed".into(), &[]))?;
            jobs.send(job).map_err(|_| errors::raise(py, "Closed", "the snapshot's thread has ended".into(), &[]))?;
        }
        match py.allow_threads(move || reply_wait.recv()) {
            Ok(result) => result.map_err(|error| errors::to_py(py, error)),
            Err(_) => Err(errors::raise(py, "Error", "the snapshot's thread ended during a read".into(), &[])),
        }
    }
}

#[pymethods]
impl Snapshot {
    /// The record of collection `name` at `key` (built along `plan`, or a dict), or None.
    #[pyo3(signature = (name, key, plan = None))]
    fn get(&self, py: Python<'_>, name: &str, key: &Bound<'_, PyAny>, plan: Option<Py<Plan>>) -> PyResult<PyObject> {
        let collection = self.shared.collection(py, name)?;
        let key = convert::to_document(key).map_err(|error| errors::unstorable(py, name, error))?;
        let handle = collection.clone();
        let found = self.run(py, move |txn| handle.get(txn, Doc::from_trusted(&key)?.root()))?;
        match found {
            Some(record) => {
                let shown_key = || collection.display_key(record.key_bytes()).unwrap_or_default();
                plan::object(py, record.value(), plan.as_ref(), &plan::Origin { collection: collection.name(), key: &shown_key })
            }
            None => Ok(py.None()),
        }
    }

    /// As `Database.query`, in this snapshot.
    #[pyo3(signature = (name, text = None, offset = 0, limit = None, plan = None))]
    fn query(
        &self,
        py: Python<'_>,
        name: &str,
        text: Option<String>,
        offset: usize,
        limit: Option<usize>,
        plan: Option<Py<Plan>>,
    ) -> PyResult<QueryResult> {
        let collection = self.shared.collection(py, name)?;
        let query = build(&collection, text.as_deref(), offset, limit).map_err(|error| errors::to_py(py, error))?;
        let records = self.run(py, move |txn| query.fetch_stored(txn))?;
        Ok(QueryResult { collection, records: records.into_iter(), plan })
    }

    /// As `Database.count`, in this snapshot.
    #[pyo3(signature = (name, text = None))]
    fn count(&self, py: Python<'_>, name: &str, text: Option<String>) -> PyResult<usize> {
        let collection = self.shared.collection(py, name)?;
        self.run(py, move |txn| build(&collection, text.as_deref(), 0, None)?.count(txn))
    }

    /// Ends the snapshot (its read transaction closes); closing twice does nothing.
    fn close(&self) {
        self.jobs.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
    }
}
