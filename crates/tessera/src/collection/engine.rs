//! The query engine: plans a query on a collection and runs it. Candidates come from the
//! plan's access path (primary-key lookups or ranges, index ranges, their intersections and
//! unions, or a scan), the predicate is evaluated on each candidate's stored bytes, then the
//! order (free when the path yields it, else an in-memory sort), offset and limit apply.
//!
//! The engine knows a collection by its [`CollectionState`] and its primary key by a
//! [`KeyLayout`]: typed queries ([`super::Query`]) and dynamic queries
//! ([`super::DynQuery`]) run through it alike.

use super::key_layout::KeyLayout;
use super::plan::{self, Access, Plan, PlanOrdering};
use super::{CollectionState, IndexState, sort_key};
use crate::error::Result;
use crate::query::{Expr, Order, OrderKey, Truth};
use crate::store::{Entries, Snapshot};
use std::borrow::Cow;
use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;

/// A candidate record: its primary key and stored bytes.
pub(crate) type Candidate<'t> = (Cow<'t, [u8]>, &'t [u8]);
/// Candidates in the order a query returns them.
pub(crate) type Candidates<'t> = Box<dyn Iterator<Item = Result<Candidate<'t>>> + 't>;
/// Index entries (entry key, primary key) in the order a walk reads them.
type IndexEntries<'t> = Box<dyn Iterator<Item = Result<(&'t [u8], &'t [u8])>> + 't>;

/// A query as the engine sees it: what to read, how to order it, which window to return.
pub(crate) struct QuerySpec<'q> {
    /// The collection.
    pub(crate) state: &'q Arc<CollectionState>,
    /// Its primary key.
    pub(crate) key: &'q dyn KeyLayout,
    /// The predicate, if any.
    pub(crate) predicate: Option<&'q Arc<Expr>>,
    /// Order keys, most significant first (ties by primary key, ascending).
    pub(crate) orders: &'q [OrderKey],
    /// Results skipped first.
    pub(crate) offset: usize,
    /// Most results returned.
    pub(crate) limit: Option<usize>,
}

impl QuerySpec<'_> {
    /// Type-checks the query against the stored shape and plans it, with the filter's text.
    pub(crate) fn explain(&self) -> Result<Plan> {
        let mut plan = self.plan()?;
        plan.filter = self.predicate.filter(|_| !plan.exact).map(ToString::to_string);
        Ok(plan)
    }

    /// [`QuerySpec::explain`] without the filter's text.
    pub(crate) fn plan(&self) -> Result<Plan> {
        // A state another handle's schema change replaced would read its old index ids.
        self.state.current()?;
        if let Some(plan) = self.exact_key_plan() {
            return Ok(plan);
        }
        let state = self.state;
        let shape = &state.shape;
        if let Some(predicate) = self.predicate {
            crate::query::check_query_depth(predicate, &state.name)?;
            shape.check_predicate(predicate)?;
        }
        if self.orders.len() > crate::query::ORDER_KEYS_MAX {
            return Err(
                crate::query::QueryError::TooManyOrderKeys { count: self.orders.len(), count_max: crate::query::ORDER_KEYS_MAX }.into()
            );
        }
        for key in self.orders {
            shape.check_order(&key.path)?;
        }
        let mut access = match self.predicate {
            Some(predicate) => plan::access(state, self.key, predicate),
            None => Access::Scan,
        };
        let orders: Vec<(&str, Order)> = self.orders.iter().map(|key| (key.path.as_str(), key.order)).collect();
        let is_key = |path: &str| plan::is_single_key(self.key, path);
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
                if *order == Order::Asc { PlanOrdering::Natural } else { PlanOrdering::Reversed }
            }
            ([(path, Order::Asc)], Access::Scan | Access::KeyRange(..) | Access::Keys(_) | Access::Intersect(_) | Access::Union(_))
                if is_key(path) =>
            {
                PlanOrdering::Natural
            }
            // Descending: the same paths walked backwards (with NULLs still first, and ties
            // still by primary key ascending), so `limit` stops early.
            ([(path, Order::Desc)], Access::IndexRange { path: indexed, .. }) if path == indexed => PlanOrdering::Reversed,
            ([(path, Order::Desc)], Access::Scan | Access::KeyRange(..)) if is_key(path) => PlanOrdering::Reversed,
            _ => PlanOrdering::Sort,
        };
        let exact = matches!(&access, Access::Keys(keys) if keys.len() == 1)
            && self.predicate.is_some_and(|predicate| plan::is_exact_key_lookup(state, self.key, predicate));
        Ok(Plan { access, ordering, filter: None, key_text: self.key.key_text(), exact })
    }

    /// The plan of a query that is exactly `key == literal` with no order (a fetch by key
    /// written as a query), found before the type check, the depth check and the planner: a
    /// comparison of the one key field with a literal of its type is well typed and two levels
    /// deep, and its plan is one key lookup with no filter. Any other query returns `None`.
    /// The one key a query reads when it is exactly `key == literal` with no offset and room
    /// for a result (see [`QuerySpec::exact_key_plan`]): its whole result is that key's
    /// record, if any, so a caller may read it with one get instead of running the engine.
    pub(crate) fn single_key(&self) -> Option<Vec<u8>> {
        let mut key = Vec::new();
        self.single_key_into(&mut key).then_some(key)
    }

    /// [`QuerySpec::single_key`] into `out` (cleared first): true when there is one.
    pub(crate) fn single_key_into(&self, out: &mut Vec<u8>) -> bool {
        out.clear();
        if !self.orders.is_empty() || self.offset > 0 || self.limit == Some(0) {
            return false;
        }
        self.predicate.is_some_and(|predicate| plan::exact_key_into(self.state, self.key, predicate, out))
    }

    fn exact_key_plan(&self) -> Option<Plan> {
        if !self.orders.is_empty() {
            return None; // order paths are type-checked by the full path
        }
        let key = plan::exact_key(self.state, self.key, self.predicate?)?;
        Some(Plan {
            access: Access::Keys(vec![key]),
            ordering: PlanOrdering::Natural,
            filter: None,
            key_text: self.key.key_text(),
            exact: true,
        })
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
        let predicate = self.predicate.filter(|_| !plan.exact).cloned();
        // A forward walk of the records with a filter: the filter runs inside the walk, with no
        // boxed iterator between them (two dynamic calls and two moves of each candidate).
        if let (Some(predicate), false, Access::Scan | Access::KeyRange(..)) = (&predicate, reversed, access) {
            let (start, end) = match access {
                Access::KeyRange(start, end) => (owned(start), owned(end)),
                _ => (Bound::Unbounded, Bound::Unbounded),
            };
            let entries = snapshot.entries(&self.state.records, start, end)?;
            let candidates = entries.map(|entry| entry.map(|(key, bytes)| (Cow::Borrowed(key), bytes)));
            return Ok(Box::new(Filtered { candidates, state: self.state.clone(), predicate: predicate.clone() }));
        }
        let candidates = if reversed {
            candidates_reversed(self.state, snapshot, access, walk)?
        } else {
            candidates(self.state, snapshot, access, walk)?
        };
        let Some(predicate) = predicate else { return Ok(candidates) };
        Ok(Box::new(Filtered { candidates, state: self.state.clone(), predicate }))
    }

    /// Plans the query and returns the matching candidates, ordered, offset and limited.
    pub(crate) fn run<'t>(&self, snapshot: &'t dyn Snapshot) -> Result<Candidates<'t>> {
        // Another process's schema change would make the plan read another index's entries.
        self.state.current_in(snapshot)?;
        let plan = self.plan()?;
        self.run_plan(snapshot, &plan)
    }

    /// [`QuerySpec::run`] through a state whose indexes another open changed while its records
    /// still read as before (a live subscription's reload, which outlives the handle it was
    /// made through): planned with no index, since the state's index ids may now name another
    /// index's entries. Refused as `run` is when the shape or the primary key changed.
    pub(crate) fn run_by_records<'t>(&self, snapshot: &'t dyn Snapshot) -> Result<Candidates<'t>> {
        self.state.readable_in(snapshot)?;
        let ordering = if self.orders.is_empty() { PlanOrdering::Natural } else { PlanOrdering::Sort };
        let plan = Plan { access: Access::Scan, ordering, filter: None, key_text: self.key.key_text(), exact: false };
        self.run_plan(snapshot, &plan)
    }

    /// The candidates `plan` reads, filtered, ordered, offset and limited.
    fn run_plan<'t>(&self, snapshot: &'t dyn Snapshot, plan: &Plan) -> Result<Candidates<'t>> {
        let matches = self.matches(snapshot, plan)?;
        let limit = self.limit.unwrap_or(usize::MAX);
        if matches!(plan.ordering, PlanOrdering::Natural | PlanOrdering::Reversed) {
            if self.offset == 0 && limit == usize::MAX {
                return Ok(matches);
            }
            return Ok(Box::new(matches.skip(self.offset).take(limit)));
        }
        let orders: Vec<sort_key::SortField> = self.orders.iter().map(sort_key::SortField::of).collect();
        let mut keyed = Vec::new();
        for candidate in matches {
            let (key, bytes) = candidate?;
            keyed.push((record_sort_key(self.state, &orders, &key, bytes)?, key, bytes));
        }
        keyed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Ok(Box::new(keyed.into_iter().skip(self.offset).take(limit).map(|(_, key, bytes)| Ok((key, bytes)))))
    }
}

/// The candidates whose records satisfy a predicate. A record that does not open is an error
/// wherever it is met, never a match or a miss: `count`, `exists` and `delete_where` would
/// otherwise act on a guess.
struct Filtered<I> {
    candidates: I,
    state: Arc<CollectionState>,
    predicate: Arc<Expr>,
}

impl<'t, I: Iterator<Item = Result<Candidate<'t>>>> Iterator for Filtered<I> {
    type Item = Result<Candidate<'t>>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let (key, bytes) = match self.candidates.next()? {
                Ok(candidate) => candidate,
                Err(error) => return Some(Err(error)),
            };
            match self.state.open_stored(bytes) {
                Ok(doc) if self.predicate.eval(doc.root()) == Truth::True => return Some(Ok((key, bytes))),
                Ok(_) => {}
                Err(error) => return Some(Err(self.state.decode_error(&key, error))),
            }
        }
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
fn key_set(state: &CollectionState, snapshot: &dyn Snapshot, access: &Access) -> Result<BTreeSet<Vec<u8>>> {
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
            let mut sets = parts.iter().map(|part| key_set(state, snapshot, part)).collect::<Result<Vec<_>>>()?;
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
                result.append(&mut key_set(state, snapshot, part)?);
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
fn index_names(snapshot: &dyn Snapshot, state: &CollectionState, access: &Access, key: &[u8]) -> Result<bool> {
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
fn record_of_entry<'t>(snapshot: &'t dyn Snapshot, state: &CollectionState, entry: Result<(&'t [u8], &'t [u8])>) -> Result<Candidate<'t>> {
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
fn planned_index<'s>(state: &'s CollectionState, path: &str) -> Result<&'s IndexState> {
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
        nulls: (plan::tighter_start(owned(start), Bound::Included(null_start)), plan::tighter_end(owned(end), Bound::Excluded(null_end))),
        values: (plan::tighter_start(owned(start), Bound::Included(null_end)), owned(end)),
    }
}

/// The candidates of a primary-key or index access path in descending order of the walked
/// order: for an index, NULL entries first or last as `walk` says (forwards: they are ties)
/// and equal values in ascending primary-key order, as in every tessera order.
fn candidates_reversed<'t>(
    state: &Arc<CollectionState>,
    snapshot: &'t dyn Snapshot,
    access: &Access,
    walk: IndexWalk,
) -> Result<Candidates<'t>> {
    let state = state.clone();
    match access {
        Access::Scan => Ok(records_of(snapshot.entries_rev(&state.records, Bound::Unbounded, Bound::Unbounded)?)),
        Access::KeyRange(start, end) => Ok(records_of(snapshot.entries_rev(&state.records, owned(start), owned(end))?)),
        Access::IndexRange { path, start, end } => {
            let id = planned_index(&state, path)?.id;
            let (null_start, null_end) = ([id, sort_key::TAG_NULL], [id, sort_key::TAG_NULL + 1]);
            let split = split_nulls(start, end, &null_start, &null_end);
            let nulls = snapshot.entries(&state.index_keyspace, split.nulls.0, split.nulls.1)?;
            let values = values_descending(snapshot, &state, id, split.values)?;
            let entries: IndexEntries<'t> = if walk.nulls_last { Box::new(values.chain(nulls)) } else { Box::new(nulls.chain(values)) };
            Ok(Box::new(in_full_order(entries, snapshot, state, path, true, walk.nulls_last)))
        }
        _ => candidates(&state, snapshot, access, walk),
    }
}

/// The non-NULL entries of an index range in descending order: each class of values
/// (booleans, numbers, strings, everything else) walked backwards, the classes in their
/// ascending order, as every tessera order sorts values of different kinds (a direction
/// reverses the order within a kind, not the order of kinds); equal values in ascending
/// primary-key order.
fn values_descending<'t>(
    snapshot: &'t dyn Snapshot,
    state: &CollectionState,
    id: u8,
    (start, end): (Bound<&[u8]>, Bound<&[u8]>),
) -> Result<IndexEntries<'t>> {
    let mut classes: Vec<IndexEntries<'t>> = Vec::new();
    for tag in [sort_key::TAG_BOOL, sort_key::TAG_NUMBER, sort_key::TAG_STRING, sort_key::TAG_OTHER] {
        let (class_start, class_end) = ([id, tag], [id, tag + 1]);
        let start = plan::tighter_start(start, Bound::Included(&class_start[..]));
        let end = plan::tighter_end(end, Bound::Excluded(&class_end[..]));
        classes.push(Box::new(ties_ascending(snapshot.entries_rev(&state.index_keyspace, start, end)?)));
    }
    Ok(Box::new(classes.into_iter().flatten()))
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
    std::iter::from_fn(move || {
        loop {
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
        }
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
    state: Arc<CollectionState>,
    path: &str,
    descending: bool,
    nulls_last: bool,
) -> impl Iterator<Item = Result<Candidate<'t>>> + 't {
    let order = [sort_key::SortField { path: crate::query::FieldPath::new(path), descending, nulls_last }];
    let group_of = |entry: &'t [u8]| sort_key::string_group(entry.get(1..).unwrap_or_default());
    let mut ready: std::collections::VecDeque<Result<Candidate<'t>>> = std::collections::VecDeque::new();
    let mut next: Option<Result<(&'t [u8], &'t [u8])>> = None;
    std::iter::from_fn(move || {
        loop {
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
        }
    })
}

/// The in-memory sort key of a stored record for `orders` (then its primary key), as an
/// `order by` that no access path yields sorts by.
fn record_sort_key(state: &CollectionState, orders: &[sort_key::SortField], key: &[u8], bytes: &[u8]) -> Result<Vec<u8>> {
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
fn candidates<'t>(state: &Arc<CollectionState>, snapshot: &'t dyn Snapshot, access: &Access, walk: IndexWalk) -> Result<Candidates<'t>> {
    let state = state.clone();
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
            let keys = key_set(&state, snapshot, access)?;
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
            let keys = key_set(&state, snapshot, access)?;
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
