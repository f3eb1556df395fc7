//! A query subscription's result as delivered: its records in order, in a persistent vector
//! (`imbl`'s RRB tree), so that a delivery that appends or replaces a few rows of a large
//! result shares the rest with the previous delivery instead of copying it.

use std::sync::{Arc, Weak};

/// The rows of a delivered result.
pub(super) type Vector<T> = imbl::Vector<Arc<T>>;

/// A query's result as its subscription delivers it: the records in the query's order.
///
/// Cloning a result costs one reference count, and successive deliveries share what did not
/// change: when a commit appends `k` rows to an `n`-row result, or rewrites `k` of its rows in
/// place, the new result is the previous one with O(k log n) nodes replaced, not a copy of the
/// `n` rows, and the subscriber's drop of the previous result frees only those nodes. (A
/// commit that removes rows, inserts them before the end or moves them builds a new result.)
/// Reading a row by index costs O(log n) (a few steps: the tree's nodes hold 64 rows).
///
/// ```
/// # use std::time::Duration;
/// # use tessera::collection::Record;
/// # #[derive(Record, Debug, Clone, PartialEq)]
/// # struct Task { #[record(key)] id: u32, priority: i32 }
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = tessera::Db::open(dir.path().join("db"))?;
/// # let tasks = db.collection::<Task>()?;
/// # let wait = Duration::from_secs(5);
/// use tessera::live::Event;
/// db.write(|tx| (1..=3).try_for_each(|id| tasks.insert(tx, &Task { id, priority: 10 * id as i32 }).map(drop)))?;
/// let live = tasks.subscribe_query(&tasks.all())?;
/// let result = live.recv_timeout(wait).and_then(Event::initial).expect("the initial result");
/// assert_eq!(result.len(), 3);
/// assert_eq!(result[1].priority, 20);
/// assert_eq!(result.iter().map(|task| task.id).collect::<Vec<_>>(), [1, 2, 3]);
/// assert!(result.get(3).is_none());
/// # Ok::<(), tessera::Error>(())
/// ```
pub struct Results<T> {
    rows: Arc<Vector<T>>,
}

impl<T> Results<T> {
    /// How many records the result holds.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # use tessera::collection::Record;
    /// # #[derive(Record)]
    /// # struct Task { #[record(key)] id: u32 }
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// let live = tasks.subscribe_query(&tasks.all())?;
    /// let result = live.recv().and_then(tessera::live::Event::initial).expect("the initial result");
    /// assert_eq!(result.len(), 0);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether the result holds no record.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # use tessera::collection::Record;
    /// # #[derive(Record)]
    /// # struct Task { #[record(key)] id: u32 }
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// let live = tasks.subscribe_query(&tasks.all())?;
    /// assert!(live.recv().and_then(tessera::live::Event::initial).expect("the initial result").is_empty());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The record at `index`, if the result has that many (O(log n)).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # use tessera::collection::Record;
    /// # #[derive(Record)]
    /// # struct Task { #[record(key)] id: u32 }
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// db.write(|tx| tasks.insert(tx, &Task { id: 7 }))?;
    /// let live = tasks.subscribe_query(&tasks.all())?;
    /// let result = live.recv().and_then(tessera::live::Event::initial).expect("the initial result");
    /// assert_eq!(result.get(0).map(|task| task.id), Some(7));
    /// assert!(result.get(1).is_none());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn get(&self, index: usize) -> Option<&Arc<T>> {
        self.rows.get(index)
    }

    /// The records in order.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # use tessera::collection::Record;
    /// # #[derive(Record)]
    /// # struct Task { #[record(key)] id: u32 }
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// db.write(|tx| (0..3).try_for_each(|id| tasks.insert(tx, &Task { id }).map(drop)))?;
    /// let live = tasks.subscribe_query(&tasks.all())?;
    /// let result = live.recv().and_then(tessera::live::Event::initial).expect("the initial result");
    /// assert_eq!(result.iter().rev().map(|task| task.id).collect::<Vec<_>>(), [2, 1, 0]);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Arc<T>> + ExactSizeIterator + '_ {
        self.rows.iter()
    }

    /// The records in order, in a `Vec` of their own (one reference count per row).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # use tessera::collection::Record;
    /// # #[derive(Record)]
    /// # struct Task { #[record(key)] id: u32 }
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// db.write(|tx| tasks.insert(tx, &Task { id: 1 }))?;
    /// let live = tasks.subscribe_query(&tasks.all())?;
    /// let rows = live.recv().and_then(tessera::live::Event::initial).expect("the initial result").to_vec();
    /// assert_eq!(rows.len(), 1);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn to_vec(&self) -> Vec<Arc<T>> {
        self.rows.iter().cloned().collect()
    }
}

/// An empty result.
///
/// ```
/// let empty = tessera::live::Results::<u32>::default();
/// assert!(empty.is_empty());
/// ```
impl<T> Default for Results<T> {
    fn default() -> Self {
        Results { rows: Arc::new(Vector::new()) }
    }
}

impl<T> Clone for Results<T> {
    fn clone(&self) -> Self {
        Results { rows: self.rows.clone() }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Results<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.rows.iter()).finish()
    }
}

impl<T> std::ops::Index<usize> for Results<T> {
    type Output = Arc<T>;

    /// The record at `index`; panics past the end, as a slice does.
    fn index(&self, index: usize) -> &Arc<T> {
        &self.rows[index]
    }
}

impl<'a, T> IntoIterator for &'a Results<T> {
    type Item = &'a Arc<T>;
    type IntoIter = imbl::vector::Iter<'a, Arc<T>, imbl::shared_ptr::DefaultSharedPtr>;

    fn into_iter(self) -> Self::IntoIter {
        self.rows.iter()
    }
}

/// Builds the engine's deliveries, and keeps a weak hold on the last one: while the subscriber
/// holds it, the next delivery starts from it; once the subscriber dropped it, the engine holds
/// no record (a subscription's memory is its sort keys).
pub(super) struct LastDelivery<T> {
    rows: Weak<Vector<T>>,
}

impl<T> LastDelivery<T> {
    pub(super) fn none() -> Self {
        LastDelivery { rows: Weak::new() }
    }

    /// Delivers `rows`, remembering them.
    pub(super) fn deliver(&mut self, rows: Vector<T>) -> Results<T> {
        let rows = Arc::new(rows);
        self.rows = Arc::downgrade(&rows);
        Results { rows }
    }

    /// The last delivery's rows, if the subscriber still holds them: a copy in O(1), sharing
    /// every node until it is changed.
    pub(super) fn rows(&self) -> Option<Vector<T>> {
        self.rows.upgrade().map(|rows| (*rows).clone())
    }
}

impl<T> Results<T> {
    /// A result of `rows`, remembered by no subscription.
    pub(super) fn of(rows: Vector<T>) -> Results<T> {
        Results { rows: Arc::new(rows) }
    }
}

/// The rows `values` as a result's vector.
pub(super) fn vector_of<T>(values: impl IntoIterator<Item = Arc<T>>) -> Vector<T> {
    values.into_iter().collect()
}
