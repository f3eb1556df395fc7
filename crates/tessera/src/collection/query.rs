//! Running a query: candidates from the plan's access path, the predicate evaluated on each
//! record's stored bytes, then order, offset and limit; records are decoded only when returned.

use super::plan::{self, Access, Plan, PlanOrdering};
use super::{decode, sort_key, Collection, Record};
use crate::error::Result;
use crate::query::{Expr, OrderKey, Truth};
use crate::store::{Entries, ReadSource, Snapshot};
use std::borrow::Cow;
use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;

pub use crate::query::{Nulls, Order};

/// A field to order by: a path, or a typed [`crate::query::Field`].
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
}

/// A candidate record: its primary key and stored bytes.
type Candidate<'t> = (Cow<'t, [u8]>, &'t [u8]);
type Candidates<'t> = Box<dyn Iterator<Item = Result<Candidate<'t>>> + 't>;
/// Index entries (entry key, primary key) in the order a walk reads them.
type IndexEntries<'t> = Box<dyn Iterator<Item = Result<(&'t [u8], &'t [u8])>> + 't>;

impl<T: Record> Query<T> {
    pub(crate) fn new(collection: Collection<T>, predicate: Option<Expr>) -> Self {
        Query { collection, predicate: predicate.map(Arc::new), orders: Vec::new(), offset: 0, limit: None }
    }

    /// The query's parts, for a live subscription (which must not hold the database).
    pub(crate) fn parts(&self) -> QueryParts {
        QueryParts { predicate: self.predicate.clone(), orders: self.orders.clone(), offset: self.offset, limit: self.limit }
    }

    pub(crate) fn from_parts(collection: Collection<T>, parts: &QueryParts) -> Self {
        Query { collection, predicate: parts.predicate.clone(), orders: parts.orders.clone(), offset: parts.offset, limit: parts.limit }
    }

    /// Orders by `field` (after any earlier order), with NULLs where SQL puts them: last for
    /// [`Order::Asc`], first for [`Order::Desc`]. Ties are broken by primary key, ascending.
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
    pub fn offset(mut self, offset: usize) -> Self {
        self.offset = offset;
        self
    }

    /// Returns at most `limit` results.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    /// The predicate, if any.
    pub fn predicate(&self) -> Option<&Expr> {
        self.predicate.as_deref()
    }

    /// The order keys, most significant first.
    pub fn orders(&self) -> &[OrderKey] {
        &self.orders
    }

    /// The offset and limit.
    pub fn window(&self) -> (usize, Option<usize>) {
        (self.offset, self.limit)
    }

    /// Type-checks the query against the record type and plans it.
    pub fn explain(&self) -> Result<Plan> {
        let mut plan = self.plan()?;
        plan.filter = self.predicate.as_ref().filter(|_| !plan.exact).map(ToString::to_string);
        Ok(plan)
    }

    /// [`Query::explain`] without the filter's text.
    fn plan(&self) -> Result<Plan> {
        if let Some(plan) = self.exact_key_plan() {
            return Ok(plan);
        }
        let shape = &self.collection.state.shape;
        if let Some(predicate) = &self.predicate {
            crate::query::check_query_depth(predicate, &self.collection.state.name)?;
            shape.check_predicate(predicate)?;
        }
        if self.orders.len() > crate::query::ORDER_KEYS_MAX {
            return Err(
                crate::query::QueryError::TooManyOrderKeys { count: self.orders.len(), count_max: crate::query::ORDER_KEYS_MAX }.into()
            );
        }
        for key in &self.orders {
            shape.check_order(&key.path)?;
        }
        let state = &self.collection.state;
        let mut access = match &self.predicate {
            Some(predicate) => plan::access::<T>(state, predicate),
            None => Access::Scan,
        };
        let orders: Vec<(&str, Order)> = self.orders.iter().map(|key| (key.path.as_str(), key.order)).collect();
        // An index walk reads NULL entries before or after the others, as the key asks (see
        // `candidates` and `candidates_reversed`).
        let ordering = match (orders.as_slice(), &access) {
            ([], Access::IndexRange { .. }) => PlanOrdering::Sort,
            ([], _) => PlanOrdering::Natural,
            ([(path, Order::Asc)], Access::IndexRange { path: indexed, .. }) if path == indexed => PlanOrdering::Natural,
            // An order by an indexed field alone: the whole index, forwards or backwards.
            ([(path, order)], Access::Scan) if state.index_for(path).is_some() => {
                let id = state.index_for(path).map(|index| index.id).unwrap_or_default();
                access = Access::IndexRange {
                    path: (*path).to_owned(),
                    start: Bound::Included(vec![id]),
                    end: sort_key::prefix_end(&[id]).map_or(Bound::Unbounded, Bound::Excluded),
                };
                if *order == Order::Asc {
                    PlanOrdering::Natural
                } else {
                    PlanOrdering::Reversed
                }
            }
            ([(path, Order::Asc)], Access::Scan | Access::KeyRange(..) | Access::Keys(_) | Access::Intersect(_) | Access::Union(_))
                if T::KEY_FIELDS == [*path] =>
            {
                PlanOrdering::Natural
            }
            // Descending: the same paths walked backwards (with NULLs still first, and ties
            // still by primary key ascending), so `limit` stops early.
            ([(path, Order::Desc)], Access::IndexRange { path: indexed, .. }) if path == indexed => PlanOrdering::Reversed,
            ([(path, Order::Desc)], Access::Scan | Access::KeyRange(..)) if T::KEY_FIELDS == [*path] => PlanOrdering::Reversed,
            _ => PlanOrdering::Sort,
        };
        let exact = matches!(&access, Access::Keys(keys) if keys.len() == 1)
            && self.predicate.as_deref().is_some_and(|predicate| plan::is_exact_key_lookup::<T>(state, predicate));
        Ok(Plan { access, ordering, filter: None, key_text: T::display_key, exact })
    }

    /// The plan of a query that is exactly `key == literal` with no order (a fetch by key
    /// written as a query), found before the type check, the depth check and the planner: a
    /// comparison of the one key field with a literal of its type is well typed and two levels
    /// deep, and its plan is one key lookup with no filter. Any other query returns `None`.
    fn exact_key_plan(&self) -> Option<Plan> {
        if !self.orders.is_empty() {
            return None; // order paths are type-checked by the full path
        }
        let key = plan::exact_key::<T>(&self.collection.state, self.predicate.as_deref()?)?;
        Some(Plan { access: Access::Keys(vec![key]), ordering: PlanOrdering::Natural, filter: None, key_text: T::display_key, exact: true })
    }

    /// Candidates in the access path's order (or reversed), with the predicate applied.
    fn matches<'t>(&self, snapshot: &'t dyn Snapshot, plan: &Plan) -> Result<Candidates<'t>> {
        let (access, reversed) = (&plan.access, plan.ordering == PlanOrdering::Reversed);
        // A walk in an index's order is for an order by that one field: its NULLs go where
        // the key says.
        let walk = IndexWalk {
            in_order: plan.ordering != PlanOrdering::Sort,
            nulls_last: self.orders.first().is_some_and(OrderKey::is_nulls_last),
        };
        let candidates =
            if reversed { candidates_reversed(self, snapshot, access, walk)? } else { candidates(self, snapshot, access, walk)? };
        let Some(predicate) = self.predicate.clone().filter(|_| !plan.exact) else { return Ok(candidates) };
        let state = self.collection.state.clone();
        // A record that does not open is an error wherever it is met, never a match or a
        // miss: `count`, `exists` and `delete_where` would otherwise act on a guess.
        Ok(Box::new(candidates.filter_map(move |candidate| match candidate {
            Ok((key, bytes)) => match state.open_stored(bytes) {
                Ok(doc) => (predicate.eval(doc.root()) == Truth::True).then_some(Ok((key, bytes))),
                Err(error) => Some(Err(state.decode_error(&key, error))),
            },
            Err(error) => Some(Err(error)),
        })))
    }

    /// The matching candidates, ordered, offset and limited.
    fn run<'t>(&self, snapshot: &'t dyn Snapshot) -> Result<Candidates<'t>> {
        let plan = self.plan()?;
        let matches = self.matches(snapshot, &plan)?;
        let limit = self.limit.unwrap_or(usize::MAX);
        if matches!(plan.ordering, PlanOrdering::Natural | PlanOrdering::Reversed) {
            return Ok(Box::new(matches.skip(self.offset).take(limit)));
        }
        let orders: Vec<sort_key::SortField> = self.orders.iter().map(sort_key::SortField::of).collect();
        let mut keyed = Vec::new();
        for candidate in matches {
            let (key, bytes) = candidate?;
            keyed.push((record_sort_key(&self.collection.state, &orders, &key, bytes)?, key, bytes));
        }
        keyed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Ok(Box::new(keyed.into_iter().skip(self.offset).take(limit).map(|(_, key, bytes)| Ok((key, bytes)))))
    }

    /// Runs the query and decodes every result.
    pub fn fetch(&self, source: &impl ReadSource) -> Result<Vec<T>> {
        source.with_snapshot(|snapshot| self.run(snapshot)?.map(|c| c.and_then(|(key, bytes)| self.decode(&key, bytes))).collect())
    }

    /// The first result, if any.
    pub fn first(&self, source: &impl ReadSource) -> Result<Option<T>> {
        source.with_snapshot(|snapshot| self.run(snapshot)?.next().transpose()?.map(|(key, bytes)| self.decode(&key, bytes)).transpose())
    }

    /// How many records the query returns (offset and limit applied), decoding none.
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
    pub fn exists(&self, source: &impl ReadSource) -> Result<bool> {
        source.with_snapshot(|snapshot| Ok(self.run(snapshot)?.next().transpose()?.is_some()))
    }

    /// Iterates the results lazily on an open transaction: each record is decoded when the
    /// iterator reaches it (a query that must sort in memory first collects its matches' keys).
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
    pub(crate) fn entries(&self, snapshot: &dyn Snapshot) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.run(snapshot)?.map(|c| c.map(|(key, bytes)| (key.into_owned(), bytes.to_vec()))).collect()
    }

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
        let statement = crate::query::Statement::parse(text).map_err(crate::query::QueryError::from)?;
        self.query(statement)
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

fn owned(bound: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(key) => Bound::Included(key),
        Bound::Excluded(key) => Bound::Excluded(key),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn records_of<'t>(entries: Entries<'t>) -> Candidates<'t> {
    Box::new(entries.map(|entry| entry.map(|(key, bytes)| (Cow::Borrowed(key), bytes))))
}

/// The primary keys an access path yields, as a sorted set.
fn key_set<T: Record>(query: &Query<T>, snapshot: &dyn Snapshot, access: &Access) -> Result<BTreeSet<Vec<u8>>> {
    let state = &query.collection.state;
    match access {
        Access::Empty => Ok(BTreeSet::new()),
        Access::Keys(keys) => Ok(keys.iter().cloned().collect()),
        Access::KeyRange(start, end) => {
            snapshot.entries(&state.records, owned(start), owned(end))?.map(|entry| entry.map(|(key, _)| key.to_vec())).collect()
        }
        Access::IndexRange { start, end, .. } => {
            snapshot.entries(&state.index_keyspace, owned(start), owned(end))?.map(|entry| entry.map(|(_, key)| key.to_vec())).collect()
        }
        Access::Intersect(parts) => {
            let mut sets = parts.iter().map(|part| key_set(query, snapshot, part)).collect::<Result<Vec<_>>>()?;
            sets.sort_by_key(BTreeSet::len);
            let mut sets = sets.into_iter();
            let mut result = sets.next().unwrap_or_default();
            for set in sets {
                result.retain(|key| set.contains(key));
            }
            Ok(result)
        }
        Access::Union(parts) => {
            let mut result = BTreeSet::new();
            for part in parts {
                result.append(&mut key_set(query, snapshot, part)?);
            }
            Ok(result)
        }
        Access::Scan => {
            snapshot.entries(&state.records, Bound::Unbounded, Bound::Unbounded)?.map(|entry| entry.map(|(key, _)| key.to_vec())).collect()
        }
    }
}

/// Whether an index range of `access` has an entry that names primary key `key` (read only
/// when a key of the access path has no record, which only damage or a key lookup makes).
fn index_names(snapshot: &dyn Snapshot, state: &super::CollectionState, access: &Access, key: &[u8]) -> Result<bool> {
    match access {
        Access::IndexRange { start, end, .. } => {
            for entry in snapshot.entries(&state.index_keyspace, owned(start), owned(end))? {
                if entry?.1 == key {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        Access::Intersect(parts) | Access::Union(parts) => {
            for part in parts {
                if index_names(snapshot, state, part, key)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        Access::Empty | Access::Keys(_) | Access::KeyRange(..) | Access::Scan => Ok(false),
    }
}

/// The record an index entry points at. Writers change a record and its entries in one
/// transaction, so an entry without its record is damage, reported as such (never skipped: a
/// query would then quietly miss a record).
fn record_of_entry<'t>(
    snapshot: &'t dyn Snapshot,
    state: &super::CollectionState,
    entry: Result<(&'t [u8], &'t [u8])>,
) -> Result<Candidate<'t>> {
    let (entry_key, key) = entry?;
    match snapshot.get_value(&state.records, key)? {
        Some(bytes) => Ok((Cow::Borrowed(key), bytes)),
        None => Err(crate::Error::Corrupted(format!(
            "collection {:?}: index entry {} in keyspace {} points at key {}, which has no record",
            state.name,
            crate::store::key::hex(entry_key),
            state.index_keyspace.name(),
            state.display_key(key)
        ))),
    }
}

/// How an access path's candidates come out: in the access path's exact order (for an
/// `order by` that the path yields), and, for an index walk, whether NULL entries (stored
/// first) come last.
#[derive(Debug, Clone, Copy)]
struct IndexWalk {
    in_order: bool,
    nulls_last: bool,
}

/// The index that `path` names, for a planned index range.
fn planned_index<'s>(state: &'s super::CollectionState, path: &str) -> Result<&'s super::IndexState> {
    state
        .indexes
        .iter()
        .find(|index| index.path == path)
        .ok_or_else(|| crate::Error::Corrupted(format!("collection {:?}: planned index `{path}` is missing", state.name)))
}

/// An index range cut in two: its NULL entries (component tag 00) and the rest.
struct NullSplit<'b> {
    nulls: (Bound<&'b [u8]>, Bound<&'b [u8]>),
    values: (Bound<&'b [u8]>, Bound<&'b [u8]>),
}

fn split_nulls<'b>(start: &'b Bound<Vec<u8>>, end: &'b Bound<Vec<u8>>, null_start: &'b [u8], null_end: &'b [u8]) -> NullSplit<'b> {
    NullSplit {
        nulls: (
            super::plan::tighter_start(owned(start), Bound::Included(null_start)),
            super::plan::tighter_end(owned(end), Bound::Excluded(null_end)),
        ),
        values: (super::plan::tighter_start(owned(start), Bound::Included(null_end)), owned(end)),
    }
}

/// The candidates of a primary-key or index access path in descending order of the walked
/// order: for an index, NULL entries first or last as `walk` says (forwards: they are ties)
/// and equal values in ascending primary-key order, as in every tessera order.
fn candidates_reversed<'t, T: Record>(
    query: &Query<T>,
    snapshot: &'t dyn Snapshot,
    access: &Access,
    walk: IndexWalk,
) -> Result<Candidates<'t>> {
    let state = query.collection.state.clone();
    match access {
        Access::Scan => Ok(records_of(snapshot.entries_rev(&state.records, Bound::Unbounded, Bound::Unbounded)?)),
        Access::KeyRange(start, end) => Ok(records_of(snapshot.entries_rev(&state.records, owned(start), owned(end))?)),
        Access::IndexRange { path, start, end } => {
            let id = planned_index(&state, path)?.id;
            let (null_start, null_end) = ([id, sort_key::TAG_NULL], [id, sort_key::TAG_NULL + 1]);
            let split = split_nulls(start, end, &null_start, &null_end);
            let nulls = snapshot.entries(&state.index_keyspace, split.nulls.0, split.nulls.1)?;
            let values = ties_ascending(snapshot.entries_rev(&state.index_keyspace, split.values.0, split.values.1)?);
            let entries: IndexEntries<'t> = if walk.nulls_last { Box::new(values.chain(nulls)) } else { Box::new(nulls.chain(values)) };
            Ok(Box::new(in_full_order(entries, snapshot, state, path, true, walk.nulls_last)))
        }
        _ => candidates(query, snapshot, access, walk),
    }
}

/// Reverses each run of equal index values in a descending walk, so that ties come in
/// ascending primary-key order. An entry's value is its component (full or truncated), which
/// ends where its primary key, if it has one, begins (see `build::entry_key`).
fn ties_ascending<'t>(
    mut descending: impl Iterator<Item = Result<(&'t [u8], &'t [u8])>> + 't,
) -> impl Iterator<Item = Result<(&'t [u8], &'t [u8])>> + 't {
    let value_of = move |(entry, _): (&'t [u8], &'t [u8])| -> &'t [u8] {
        let component = entry.get(1..).unwrap_or_default();
        sort_key::component_len(component).map_or(component, |len| &component[..len])
    };
    let mut group: Vec<(&'t [u8], &'t [u8])> = Vec::new();
    let mut next: Option<Result<(&'t [u8], &'t [u8])>> = None;
    std::iter::from_fn(move || loop {
        if let Some(entry) = group.pop() {
            return Some(Ok(entry));
        }
        let first = match next.take().or_else(|| descending.next())? {
            Ok(entry) => entry,
            Err(error) => return Some(Err(error)),
        };
        group.push(first);
        loop {
            match descending.next() {
                Some(Ok(entry)) if value_of(entry) == value_of(first) => group.push(entry),
                other => {
                    next = other;
                    break;
                }
            }
        }
        // `group` is in descending primary-key order: popping yields ascending.
    })
}

/// The candidates of an index entry walk (ascending, or descending as `candidates_reversed`
/// orders it) in the exact order of the indexed field's values: each run of entries of one
/// [`sort_key::string_group`] that holds a truncated entry is sorted by its records' full
/// values (then primary key, ascending), as an in-memory sort would; every other entry is
/// already where its value belongs (see `sort_key`'s module doc), and passes through.
fn in_full_order<'t>(
    mut entries: impl Iterator<Item = Result<(&'t [u8], &'t [u8])>> + 't,
    snapshot: &'t dyn Snapshot,
    state: Arc<super::CollectionState>,
    path: &str,
    descending: bool,
    nulls_last: bool,
) -> impl Iterator<Item = Result<Candidate<'t>>> + 't {
    let order = [sort_key::SortField { path: crate::query::FieldPath::new(path), descending, nulls_last }];
    let group_of = |entry: &'t [u8]| sort_key::string_group(entry.get(1..).unwrap_or_default());
    let mut ready: std::collections::VecDeque<Result<Candidate<'t>>> = std::collections::VecDeque::new();
    let mut next: Option<Result<(&'t [u8], &'t [u8])>> = None;
    std::iter::from_fn(move || loop {
        if let Some(candidate) = ready.pop_front() {
            return Some(candidate);
        }
        let first = match next.take().or_else(|| entries.next())? {
            Ok(entry) => entry,
            Err(error) => return Some(Err(error)),
        };
        let Some(group) = group_of(first.0) else { return Some(record_of_entry(snapshot, &state, Ok(first))) };
        let mut run = vec![first];
        loop {
            match entries.next() {
                Some(Ok(entry)) if group_of(entry.0) == Some(group) => run.push(entry),
                other => {
                    next = other;
                    break;
                }
            }
        }
        if !run.iter().any(|(entry, _)| sort_key::is_truncated(entry.get(1..).unwrap_or_default())) {
            ready.extend(run.into_iter().map(|entry| record_of_entry(snapshot, &state, Ok(entry))));
            continue;
        }
        let mut keyed = Vec::with_capacity(run.len());
        for entry in run {
            let sorted = record_of_entry(snapshot, &state, Ok(entry))
                .and_then(|(key, bytes)| Ok((record_sort_key(&state, &order, &key, bytes)?, key, bytes)));
            match sorted {
                Ok(sorted) => keyed.push(sorted),
                Err(error) => return Some(Err(error)),
            }
        }
        keyed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        ready.extend(keyed.into_iter().map(|(_, key, bytes)| Ok((key, bytes))));
    })
}

/// The in-memory sort key of a stored record for `orders` (then its primary key), as an
/// `order by` that no access path yields sorts by.
fn record_sort_key(state: &super::CollectionState, orders: &[sort_key::SortField], key: &[u8], bytes: &[u8]) -> Result<Vec<u8>> {
    let doc = state.open_record(key, bytes)?;
    let mut sort = Vec::with_capacity(32);
    sort_key::encode_record(orders, Some(doc.root()), key, &mut sort);
    Ok(sort)
}

/// The candidates of an access path in its own order; `walk.in_order` asks an index walk for
/// the exact order of the indexed field's values (see [`in_full_order`]), with NULL entries
/// first or last as `walk.nulls_last` says: it buffers only runs of string entries that agree
/// on their first 255 escaped bytes, and reads records early only for a run that holds a
/// truncated entry.
fn candidates<'t, T: Record>(query: &Query<T>, snapshot: &'t dyn Snapshot, access: &Access, walk: IndexWalk) -> Result<Candidates<'t>> {
    let state = query.collection.state.clone();
    match access {
        Access::Scan => Ok(records_of(snapshot.entries(&state.records, Bound::Unbounded, Bound::Unbounded)?)),
        Access::KeyRange(start, end) => Ok(records_of(snapshot.entries(&state.records, owned(start), owned(end))?)),
        Access::IndexRange { path, start, end } if walk.in_order => {
            let id = planned_index(&state, path)?.id;
            let entries: IndexEntries<'t> = if walk.nulls_last {
                let (null_start, null_end) = ([id, sort_key::TAG_NULL], [id, sort_key::TAG_NULL + 1]);
                let split = split_nulls(start, end, &null_start, &null_end);
                let values = snapshot.entries(&state.index_keyspace, split.values.0, split.values.1)?;
                Box::new(values.chain(snapshot.entries(&state.index_keyspace, split.nulls.0, split.nulls.1)?))
            } else {
                Box::new(snapshot.entries(&state.index_keyspace, owned(start), owned(end))?)
            };
            Ok(Box::new(in_full_order(entries, snapshot, state, path, false, walk.nulls_last)))
        }
        // A multi-entry index may hold a record twice in one range (two numbers with one f64):
        // its keys as a set.
        Access::IndexRange { path, .. } if super::build::elements_of(path).is_some() => {
            let path = path.clone();
            let keys = key_set(query, snapshot, access)?;
            Ok(Box::new(keys.into_iter().map(move |key| match snapshot.get_value(&state.records, &key)? {
                Some(bytes) => Ok((Cow::Owned(key), bytes)),
                None => Err(crate::Error::Corrupted(format!(
                    "collection {:?}: index `{path}` has an entry for key {}, which has no record",
                    state.name,
                    state.display_key(&key)
                ))),
            })))
        }
        Access::IndexRange { start, end, .. } => {
            let entries = snapshot.entries(&state.index_keyspace, owned(start), owned(end))?;
            Ok(Box::new(entries.map(move |entry| record_of_entry(snapshot, &state, entry))))
        }
        Access::Keys(keys) if keys.len() == 1 => {
            // One key lookup: no set to build.
            let key = keys[0].clone();
            Ok(Box::new(
                snapshot.get_value(&state.records, &key).transpose().map(|found| found.map(|bytes| (Cow::Owned(key), bytes))).into_iter(),
            ))
        }
        Access::Empty | Access::Keys(_) | Access::Intersect(_) | Access::Union(_) => {
            let keys = key_set(query, snapshot, access)?;
            let access = access.clone();
            Ok(Box::new(keys.into_iter().filter_map(move |key| match snapshot.get_value(&state.records, &key) {
                Ok(Some(bytes)) => Some(Ok((Cow::Owned(key), bytes))),
                // A key looked up that is not stored is no match; a key an index entry names
                // is damage, as in `record_of_entry`.
                Ok(None) => match index_names(snapshot, &state, &access, &key) {
                    Ok(false) => None,
                    Ok(true) => Some(Err(crate::Error::Corrupted(format!(
                        "collection {:?}: an index entry in keyspace {} points at key {}, which has no record",
                        state.name,
                        state.index_keyspace.name(),
                        state.display_key(&key)
                    )))),
                    Err(error) => Some(Err(error)),
                },
                Err(error) => Some(Err(error)),
            })))
        }
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
