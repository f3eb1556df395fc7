//! Typed queries ([`Query`]): built on a [`Collection`], planned and run by the query engine
//! (`engine`), records decoded only when returned.

use super::engine::{Candidates, QuerySpec};
use super::key_layout::{KeyLayout, RecordKey};
use super::plan::Plan;
use super::{Collection, CollectionState, Record, decode, sort_key};
use crate::error::Result;
use crate::query::{Expr, OrderKey};
use crate::store::{ReadSource, Snapshot};
use std::sync::Arc;

pub use crate::query::{Nulls, Order};

/// A field to order by: a path, or a typed [`crate::query::Field`].
///
/// ```
/// # use tessera::collection::Record;
/// # #[derive(Record, Debug, Clone, PartialEq)]
/// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = tessera::Db::open(dir.path().join("db"))?;
/// # let tasks = db.collection::<Task>()?;
/// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
///
/// use tessera::collection::{Order, OrderField};
/// assert_eq!("priority".order_path(), "priority");
/// assert_eq!(tasks.all().order_by("priority", Order::Asc).orders(), tasks.all().order_by(Task::priority(), Order::Asc).orders());
/// # Ok::<(), tessera::Error>(())
/// ```
pub trait OrderField {
    /// The dotted path.
    fn order_path(&self) -> String;
}

impl OrderField for &str {
    fn order_path(&self) -> String {
        (*self).to_owned()
    }
}
impl OrderField for String {
    fn order_path(&self) -> String {
        self.clone()
    }
}
impl<F> OrderField for crate::query::Field<F> {
    fn order_path(&self) -> String {
        self.path().into_owned()
    }
}

/// A query on a collection: a predicate, an order, an offset and a limit. Build it with
/// [`Collection::filter`] or [`Collection::all`]; run it on a [`ReadSource`].
///
/// ```
/// # use serde::{Deserialize, Serialize};
/// # use tessera::collection::{Order, Record};
/// # #[derive(Serialize, Deserialize, Record, Debug)]
/// # struct Item { #[record(key)] id: u32, price: Option<f64> }
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = tessera::Db::open(dir.path().join("db"))?;
/// let items = db.collection::<Item>()?;
/// db.write(|tx| {
///     for (id, price) in [(1, Some(3.0)), (2, None), (3, Some(1.0)), (4, Some(2.0))] {
///         items.insert(tx, &Item { id, price })?;
///     }
///     Ok(())
/// })?;
/// let query = items.all().order_by(Item::price(), Order::Desc).limit(3);
/// let ids: Vec<u32> = query.fetch(&db)?.into_iter().map(|item| item.id).collect();
/// assert_eq!(ids, [2, 1, 4], "NULL first (SQL's rule for descending), then descending");
/// let ascending = items.all().order_by(Item::price(), Order::Asc).fetch(&db)?;
/// assert_eq!(ascending.iter().map(|item| item.id).collect::<Vec<_>>(), [3, 4, 1, 2], "NULL last");
/// assert_eq!(items.filter(Item::price().gt(1.5)).count(&db)?, 2, "NULL is not > 1.5");
/// println!("{}", query.explain()?);
/// # Ok::<(), tessera::Error>(())
/// ```
pub struct Query<T: Record> {
    collection: Collection<T>,
    predicate: Option<Arc<Expr>>,
    orders: Vec<OrderKey>,
    offset: usize,
    limit: Option<usize>,
}

impl<T: Record> Clone for Query<T> {
    fn clone(&self) -> Self {
        Query {
            collection: self.collection.clone(),
            predicate: self.predicate.clone(),
            orders: self.orders.clone(),
            offset: self.offset,
            limit: self.limit,
        }
    }
}

impl<T: Record> std::fmt::Debug for Query<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Query")
            .field("collection", &self.collection.state.name)
            .field("predicate", &self.predicate.as_ref().map(ToString::to_string))
            .field("orders", &self.orders)
            .field("offset", &self.offset)
            .field("limit", &self.limit)
            .finish()
    }
}

/// A query without its collection handle.
#[derive(Clone)]
pub(crate) struct QueryParts {
    pub(crate) predicate: Option<Arc<Expr>>,
    pub(crate) orders: Vec<OrderKey>,
    pub(crate) offset: usize,
    pub(crate) limit: Option<usize>,
}

impl QueryParts {
    /// The order keys, resolved for encoding sort keys (as the in-memory sort and live
    /// results do).
    pub(crate) fn sort_fields(&self) -> Vec<sort_key::SortField> {
        self.orders.iter().map(sort_key::SortField::of).collect()
    }

    /// The query as the engine runs it on the collection `state`, whose primary key is
    /// `key`.
    pub(crate) fn spec<'q>(&'q self, state: &'q Arc<CollectionState>, key: &'q dyn KeyLayout) -> QuerySpec<'q> {
        QuerySpec { state, key, predicate: self.predicate.as_ref(), orders: &self.orders, offset: self.offset, limit: self.limit }
    }
}

impl<T: Record> Query<T> {
    pub(crate) fn new(collection: Collection<T>, predicate: Option<Expr>) -> Self {
        Query { collection, predicate: predicate.map(Arc::new), orders: Vec::new(), offset: 0, limit: None }
    }

    /// The query's parts, for a live subscription (which must not hold the database).
    pub(crate) fn parts(&self) -> QueryParts {
        QueryParts { predicate: self.predicate.clone(), orders: self.orders.clone(), offset: self.offset, limit: self.limit }
    }

    /// Orders by `field` (after any earlier order), with NULLs where SQL puts them: last for
    /// [`Order::Asc`], first for [`Order::Desc`]. Ties are broken by primary key, ascending.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    ///
    /// use tessera::collection::Order;
    /// db.write(|tx| [(1, 5), (2, 9), (3, 5)].into_iter().try_for_each(|(id, p)| tasks.insert(tx, &task(id, p)).map(drop)))?;
    /// let query = tasks.all().order_by(Task::priority(), Order::Desc);
    /// let ids: Vec<u32> = query.fetch(&db)?.into_iter().map(|t| t.id).collect();
    /// assert_eq!(ids, [2, 1, 3], "ties by primary key");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn order_by(mut self, field: impl OrderField, order: Order) -> Self {
        self.orders.push(OrderKey::new(field.order_path(), order));
        self
    }

    /// [`Query::order_by`] with NULLs where `nulls` says.
    ///
    /// ```
    /// # use tessera::collection::{Nulls, Order, Record};
    /// # #[derive(Record)]
    /// # struct Item { #[record(key)] id: u32, price: Option<f64> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// let items = db.collection::<Item>()?;
    /// db.write(|tx| {
    ///     for (id, price) in [(1, Some(3.0)), (2, None), (3, Some(1.0))] {
    ///         items.insert(tx, &Item { id, price })?;
    ///     }
    ///     Ok(())
    /// })?;
    /// let query = items.all().order_by_nulls(Item::price(), Order::Desc, Nulls::Last);
    /// let ids: Vec<u32> = query.fetch(&db)?.into_iter().map(|item| item.id).collect();
    /// assert_eq!(ids, [1, 3, 2]);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn order_by_nulls(mut self, field: impl OrderField, order: Order, nulls: Nulls) -> Self {
        self.orders.push(OrderKey::new(field.order_path(), order).nulls(nulls));
        self
    }

    /// Orders by one more key (see [`OrderKey`]), as a parsed [`crate::query::Statement`]
    /// carries them.
    ///
    /// ```
    /// # use tessera::collection::{Nulls, Order, Record};
    /// # #[derive(Record)]
    /// # struct Item { #[record(key)] id: u32, price: Option<f64> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// use tessera::query::OrderKey;
    /// let items = db.collection::<Item>()?;
    /// let query = items.all().order_by_key(OrderKey::new("price", Order::Asc).nulls(Nulls::First));
    /// assert_eq!(query.orders(), items.query_text("order by price nulls first")?.orders());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn order_by_key(mut self, key: OrderKey) -> Self {
        self.orders.push(key);
        self
    }

    /// Skips the first `offset` results.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    ///
    /// db.write(|tx| (1..=5).try_for_each(|id| tasks.insert(tx, &task(id, 0)).map(drop)))?;
    /// let ids: Vec<u32> = tasks.all().offset(3).fetch(&db)?.into_iter().map(|t| t.id).collect();
    /// assert_eq!(ids, [4, 5]);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn offset(mut self, offset: usize) -> Self {
        self.offset = offset;
        self
    }

    /// Returns at most `limit` results.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    ///
    /// db.write(|tx| (1..=5).try_for_each(|id| tasks.insert(tx, &task(id, 0)).map(drop)))?;
    /// let page: Vec<u32> = tasks.all().offset(1).limit(2).fetch(&db)?.into_iter().map(|t| t.id).collect();
    /// assert_eq!(page, [2, 3]);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    /// The predicate, if any.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    ///
    /// use tessera::query::field;
    /// assert_eq!(tasks.filter(Task::priority().gt(1)).predicate(), Some(&field("priority").gt(1)));
    /// assert_eq!(tasks.all().predicate(), None);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn predicate(&self) -> Option<&Expr> {
        self.predicate.as_deref()
    }

    /// The order keys, most significant first.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    ///
    /// use tessera::collection::Order;
    /// let query = tasks.all().order_by("priority", Order::Desc).order_by("title", Order::Asc);
    /// let paths: Vec<&str> = query.orders().iter().map(|key| key.path.as_str()).collect();
    /// assert_eq!(paths, ["priority", "title"]);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn orders(&self) -> &[OrderKey] {
        &self.orders
    }

    /// The offset and limit.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    ///
    /// assert_eq!(tasks.all().offset(20).limit(10).window(), (20, Some(10)));
    /// assert_eq!(tasks.all().window(), (0, None));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn window(&self) -> (usize, Option<usize>) {
        (self.offset, self.limit)
    }

    /// Type-checks the query against the record type and plans it.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    ///
    /// let plan = tasks.filter(Task::id().eq(7u32)).explain()?;
    /// assert!(plan.to_string().contains("primary key"), "{plan}");
    /// let refused = tasks.filter_text("title > 3");
    /// assert!(refused.is_err(), "a string compared with a number does not type-check");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn explain(&self) -> Result<Plan> {
        self.spec().explain()
    }

    /// The query as the engine runs it.
    fn spec(&self) -> QuerySpec<'_> {
        QuerySpec {
            state: &self.collection.state,
            key: &RecordKey::<T>::LAYOUT,
            predicate: self.predicate.as_ref(),
            orders: &self.orders,
            offset: self.offset,
            limit: self.limit,
        }
    }

    /// The matching candidates, ordered, offset and limited.
    fn run<'t>(&self, snapshot: &'t dyn Snapshot) -> Result<Candidates<'t>> {
        self.spec().run(snapshot)
    }

    /// Runs the query and decodes every result. A result of more than 512 records is decoded
    /// on a second thread while this one goes on finding records (`tessera-decode`, joined
    /// before `fetch` returns); the records, and the error if any, are those of decoding in
    /// order on one thread.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    ///
    /// db.write(|tx| (1..=3).try_for_each(|id| tasks.insert(tx, &task(id, id as i32)).map(drop)))?;
    /// let found = tasks.filter(Task::priority().ge(2)).fetch(&db)?;
    /// assert_eq!(found, [task(2, 2), task(3, 3)]);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn fetch(&self, source: &impl ReadSource) -> Result<Vec<T>> {
        let by_key = super::with_key_buffer(|key| {
            self.spec().single_key_into(key).then(|| source.with_snapshot(|snapshot| self.collection.get_encoded(snapshot, key)))
        });
        if let Some(found) = by_key {
            return Ok(found?.into_iter().collect());
        }
        // Found on this thread, decoded on a helper while it goes on finding (a large result).
        source.with_snapshot(|snapshot| super::decode_pipeline::decode_all(self.run(snapshot)?, &|key, bytes| self.decode(key, bytes)))
    }

    /// The first result, if any.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    ///
    /// use tessera::collection::Order;
    /// db.write(|tx| (1..=3).try_for_each(|id| tasks.insert(tx, &task(id, id as i32)).map(drop)))?;
    /// let top = tasks.all().order_by(Task::priority(), Order::Desc).first(&db)?;
    /// assert_eq!(top.map(|t| t.id), Some(3));
    /// assert_eq!(tasks.filter(Task::priority().gt(9)).first(&db)?, None);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn first(&self, source: &impl ReadSource) -> Result<Option<T>> {
        // `key == literal`: one get, without the engine's plan and candidate iterators.
        let by_key = super::with_key_buffer(|key| {
            self.spec().single_key_into(key).then(|| source.with_snapshot(|snapshot| self.collection.get_encoded(snapshot, key)))
        });
        if let Some(found) = by_key {
            return found;
        }
        source.with_snapshot(|snapshot| self.run(snapshot)?.next().transpose()?.map(|(key, bytes)| self.decode(&key, bytes)).transpose())
    }

    /// How many records the query returns (offset and limit applied), decoding none.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    ///
    /// db.write(|tx| (1..=10).try_for_each(|id| tasks.insert(tx, &task(id, id as i32)).map(drop)))?;
    /// assert_eq!(tasks.filter(Task::priority().gt(7)).count(&db)?, 3);
    /// assert_eq!(tasks.all().limit(4).count(&db)?, 4);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn count(&self, source: &impl ReadSource) -> Result<usize> {
        source.with_snapshot(|snapshot| {
            let mut count = 0;
            for candidate in self.run(snapshot)? {
                candidate?;
                count += 1;
            }
            Ok(count)
        })
    }

    /// Whether the query returns anything.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    ///
    /// db.write(|tx| tasks.insert(tx, &task(1, 5)))?;
    /// assert!(tasks.filter(Task::priority().eq(5)).exists(&db)?);
    /// assert!(!tasks.filter(Task::priority().eq(6)).exists(&db)?);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn exists(&self, source: &impl ReadSource) -> Result<bool> {
        source.with_snapshot(|snapshot| Ok(self.run(snapshot)?.next().transpose()?.is_some()))
    }

    /// Iterates the results lazily on an open transaction: each record is decoded when the
    /// iterator reaches it (a query that must sort in memory first collects its matches' keys).
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
    ///
    /// db.write(|tx| (1..=100).try_for_each(|id| tasks.insert(tx, &task(id, id as i32)).map(drop)))?;
    /// let tx = db.read_txn()?;
    /// let mut total = 0;
    /// for task in tasks.all().iter(&tx)? {
    ///     total += task?.priority; // decoded one at a time
    /// }
    /// assert_eq!(total, 5050);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn iter<'t>(&self, snapshot: &'t impl Snapshot) -> Result<Records<'t, T>> {
        let candidates = self.run(snapshot)?;
        Ok(Records { candidates, state: self.collection.state.clone(), _type: std::marker::PhantomData })
    }

    /// Iterates the results as views read in place on an open transaction (see
    /// [`super::RecordRef`]): nothing is decoded until a field is read.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// #[derive(Record)]
    /// struct Item { #[record(key)] id: u32, name: String, price: f64 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// let items = db.collection::<Item>()?;
    /// db.write(|tx| {
    ///     for (id, name, price) in [(1, "tea", 2.5), (2, "cake", 4.0), (3, "jam", 3.0)] {
    ///         items.insert(tx, &Item { id, name: name.into(), price })?;
    ///     }
    ///     Ok(())
    /// })?;
    /// let tx = db.read_txn()?;
    /// let query = items.filter(Item::price().gt(2.8));
    /// let names: Vec<&str> = query.refs(&tx)?.map(|item| item?.name()).collect::<tessera::Result<_>>()?;
    /// assert_eq!(names, ["cake", "jam"]);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn refs<'t>(&'t self, snapshot: &'t impl Snapshot) -> Result<impl Iterator<Item = Result<super::RecordRef<'t, T>>> + 't> {
        let state: &'t super::CollectionState = &self.collection.state;
        let candidates = self.run(snapshot)?;
        Ok(candidates.map(move |candidate| {
            let (key, bytes) = candidate?;
            let doc = state.open_record(&key, bytes)?;
            super::RecordRef::new(state, &key, doc.root())
        }))
    }

    /// Primary keys and stored bytes of the results, in order (for live queries).
    pub(crate) fn matching_keys(&self, snapshot: &dyn Snapshot) -> Result<Vec<Vec<u8>>> {
        self.run(snapshot)?.map(|c| c.map(|(key, _)| key.into_owned())).collect()
    }

    fn decode(&self, key: &[u8], bytes: &[u8]) -> Result<T> {
        decode(&self.collection.state, key, bytes)
    }
}

impl<T: Record> Collection<T> {
    /// A whole query from the text syntax: `[PREDICATE] [order by FIELD [asc|desc] [nulls
    /// first|last], …] [limit N] [offset M]` (see `docs/query.md`). A typed error with the
    /// column if it does not parse; a typed error if it does not type-check against `T`.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// #[derive(Record)]
    /// struct Item { #[record(key)] id: u32, price: Option<f64>, tags: Vec<String> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// let items = db.collection::<Item>()?;
    /// db.write(|tx| {
    ///     for (id, price, tag) in [(1, Some(3.0), "red"), (2, None, "red"), (3, Some(1.0), "blue"), (4, Some(2.0), "red")] {
    ///         items.insert(tx, &Item { id, price, tags: vec![tag.into()] })?;
    ///     }
    ///     Ok(())
    /// })?;
    /// let query = items.query_text(r#"tags contains "red" ORDER BY price DESC NULLS LAST LIMIT 2"#)?;
    /// let ids: Vec<u32> = query.fetch(&db)?.into_iter().map(|item| item.id).collect();
    /// assert_eq!(ids, [1, 4]);
    /// assert!(items.query_text("price >").is_err());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn query_text(&self, text: &str) -> Result<Query<T>> {
        self.query(self.state.parse_statement(text)?)
    }

    /// The query a parsed [`crate::query::Statement`] describes, type-checked against `T`.
    ///
    /// ```
    /// # use tessera::collection::Record;
    /// # #[derive(Record)]
    /// # struct Item { #[record(key)] id: u32, price: f64 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// use tessera::query::Statement;
    /// let items = db.collection::<Item>()?;
    /// let statement = Statement::parse("order by price desc limit 10").unwrap();
    /// assert_eq!(items.query(statement)?.window(), (0, Some(10)));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn query(&self, statement: crate::query::Statement) -> Result<Query<T>> {
        let shape = &self.state.shape;
        if let Some(predicate) = &statement.predicate {
            // Measured before the recursive type check: a statement may be built in code.
            crate::query::check_query_depth(predicate, &self.state.name)?;
            shape.check_predicate(predicate)?;
        }
        for key in &statement.order_by {
            shape.check_order(&key.path)?;
        }
        let mut query = Query::new(self.clone(), statement.predicate);
        query.orders = statement.order_by;
        query.offset = statement.offset;
        query.limit = statement.limit;
        Ok(query)
    }
}

/// Query results decoded one at a time: see [`Query::iter`].
///
/// ```
/// # use tessera::collection::Record;
/// # #[derive(Record, Debug, Clone, PartialEq)]
/// # struct Task { #[record(key)] id: u32, title: String, #[record(index)] priority: i32, note: Option<String> }
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = tessera::Db::open(dir.path().join("db"))?;
/// # let tasks = db.collection::<Task>()?;
/// # let task = |id: u32, priority: i32| Task { id, title: format!("task {id}"), priority, note: None };
///
/// db.write(|tx| (1..=3).try_for_each(|id| tasks.insert(tx, &task(id, 0)).map(drop)))?;
/// let tx = db.read_txn()?;
/// let first_two: Vec<u32> = tasks.all().iter(&tx)?.take(2).map(|t| t.map(|t| t.id)).collect::<tessera::Result<_>>()?;
/// assert_eq!(first_two, [1, 2]);
/// # Ok::<(), tessera::Error>(())
/// ```
pub struct Records<'t, T> {
    candidates: Candidates<'t>,
    state: std::sync::Arc<super::CollectionState>,
    _type: std::marker::PhantomData<fn() -> T>,
}

impl<T: Record> Iterator for Records<'_, T> {
    type Item = Result<T>;

    fn next(&mut self) -> Option<Result<T>> {
        let candidate = self.candidates.next()?;
        Some(candidate.and_then(|(key, bytes)| decode(&self.state, &key, bytes)))
    }
}

#[cfg(test)]
mod tests {
    use crate::collection::{Order, Record};

    #[derive(Record, Debug, PartialEq)]
    #[record(name = "scored")]
    struct Scored {
        #[record(key)]
        id: u32,
        #[record(index)]
        score: i32,
    }

    #[test]
    fn an_index_entry_without_its_record_is_corruption_not_a_missing_row() {
        // It used to be skipped ("an entry whose record is gone cannot match").
        let dir = tempfile::tempdir().unwrap();
        let db = crate::Db::open(dir.path().join("db")).unwrap();
        let scored = db.collection::<Scored>().unwrap();
        db.write(|tx| (0..5).try_for_each(|id| scored.insert(tx, &Scored { id, score: id as i32 * 10 }).map(drop))).unwrap();
        // Damage: the record of key 3 disappears behind the index's back.
        let records = scored.state.records.clone();
        db.write(|tx| tx.delete(&records, &crate::store::key::encode(&3u32)).map(drop)).unwrap();
        let union = scored.filter(Scored::score().eq(30).or(Scored::score().eq(10)));
        assert!(union.explain().unwrap().to_string().starts_with("union("), "{}", union.explain().unwrap());
        for query in [scored.filter(Scored::score().ge(0)), scored.all().order_by(Scored::score(), Order::Desc), union] {
            match query.fetch(&db) {
                Err(crate::Error::Corrupted(message)) => {
                    assert!(message.contains("\"scored\"") && message.contains("no record"), "{message}")
                }
                other => panic!("expected corruption, got {other:?}"),
            }
        }
    }
}
