//! The planner: which keys a query reads, and whether its order comes for free.
//!
//! Every access path yields a *superset* of the matching records; the whole predicate is then
//! evaluated on each candidate's stored bytes. So the planner only has to be conservative, and
//! three-valued logic is decided in one place (`query::eval`).

use super::CollectionState;
use super::key_layout::{KeyLayout, KeyText};
use super::sort_key::{self, prefix_end};
use crate::query::{CompareOp, Expr, Literal, StringOp};
use crate::store::key::part_prefix;
use std::fmt;
use std::ops::Bound;

/// How a query finds its candidate records.
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
/// use tessera::collection::Access;
/// assert!(matches!(tasks.filter(Task::id().eq(1u32)).explain()?.access, Access::Keys(_)));
/// assert!(matches!(tasks.filter(Task::title().eq("x")).explain()?.access, Access::Scan));
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Access {
    /// Nothing can match (e.g. a comparison with the constant NULL).
    Empty,
    /// Primary-key lookups.
    Keys(Vec<Vec<u8>>),
    /// A range of primary keys.
    KeyRange(Bound<Vec<u8>>, Bound<Vec<u8>>),
    /// A range of an index's entries.
    IndexRange {
        /// The indexed field.
        path: String,
        /// Lower bound of the entry keys.
        start: Bound<Vec<u8>>,
        /// Upper bound.
        end: Bound<Vec<u8>>,
    },
    /// Keys every part yields (AND).
    Intersect(Vec<Access>),
    /// Keys any part yields (OR).
    Union(Vec<Access>),
    /// Every record, in primary-key order.
    Scan,
}

/// How a query's results come out in order.
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
/// use tessera::collection::{Order, PlanOrdering};
/// assert_eq!(tasks.all().order_by("id", Order::Desc).explain()?.ordering, PlanOrdering::Reversed);
/// assert_eq!(tasks.all().order_by("title", Order::Asc).explain()?.ordering, PlanOrdering::Sort);
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanOrdering {
    /// The access path yields them in the requested order (primary key, or an index).
    Natural,
    /// The access path walked backwards yields them in the requested (descending) order.
    Reversed,
    /// Matching records are sorted in memory.
    Sort,
}

/// A query's plan, as [`super::Query::explain`] and [`super::DynQuery::explain`] return it.
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
/// let plan = tasks.filter(Task::id().gt(10u32).and(Task::title().starts_with("a"))).explain()?;
/// assert!(plan.filter.is_some(), "the title test runs on every candidate");
/// println!("{plan}"); // the access path, the filter and the ordering, as text
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Plan {
    /// Where candidates come from.
    pub access: Access,
    /// Whether they need sorting.
    pub ordering: PlanOrdering,
    /// The predicate evaluated on every candidate, if any.
    pub filter: Option<String>,
    /// Shows primary keys as the collection's key values.
    pub(crate) key_text: KeyText,
    /// The access path yields exactly the matches (see [`is_exact_key_lookup`]): the
    /// predicate is not evaluated.
    pub(crate) exact: bool,
}

impl PartialEq for Plan {
    fn eq(&self, other: &Plan) -> bool {
        (&self.access, self.ordering, &self.filter) == (&other.access, other.ordering, &other.filter)
    }
}

/// A primary-key range's lower bound as text: `[key`, `(key`, or `-∞`.
fn start_text(bound: &Bound<Vec<u8>>, key_text: &KeyText) -> String {
    match bound {
        Bound::Included(key) => format!("[{}", bound_key_text(key, key_text)),
        Bound::Excluded(key) => format!("({}", bound_key_text(key, key_text)),
        Bound::Unbounded => "-∞".to_owned(),
    }
}

/// A primary-key range's upper bound as text: `key]`, `key)`, or `∞`. A bound just past
/// every key that starts with a readable key (`<=` on the last field a range fixes) shows
/// that key, inclusive.
fn end_text(bound: &Bound<Vec<u8>>, key_text: &KeyText) -> String {
    match bound {
        Bound::Included(key) => format!("{}]", bound_key_text(key, key_text)),
        Bound::Excluded(key) if key_text.read(key).is_none() => {
            let below = key.split_last().filter(|(last, _)| **last > 0).map(|(last, rest)| [rest, &[last - 1]].concat());
            match below.and_then(|below| key_text.read(&below)) {
                Some(text) => format!("{text}…]"),
                None => format!("{})", bound_key_text(key, key_text)),
            }
        }
        Bound::Excluded(key) => format!("{})", key_text.show(key)),
        Bound::Unbounded => "∞".to_owned(),
    }
}

/// A key bound's text: the key's values where they read, else the start of a string key
/// (`"ab"…`, a `starts with` range), else its bytes.
fn bound_key_text(key: &[u8], key_text: &KeyText) -> String {
    if key_text.read(key).is_none()
        && let Some((text, [])) = crate::store::key::decode_bytes(&[key, &[0x00, 0x01]].concat())
    {
        return format!("{:?}…", String::from_utf8_lossy(&text));
    }
    key_text.show(key)
}

/// Key text of a plan with no record type at hand: strings as text, anything else in hex.
fn untyped_key_text(_key: &[u8]) -> Option<String> {
    None
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, &KeyText::Record(untyped_key_text))
    }
}

impl Access {
    /// Writes the access path, showing primary keys with `key_text`.
    fn write(&self, f: &mut fmt::Formatter<'_>, key_text: &KeyText) -> fmt::Result {
        match self {
            Access::Empty => f.write_str("empty"),
            Access::Keys(keys) => {
                let keys: Vec<String> = keys.iter().map(|key| key_text.show(key)).collect();
                write!(f, "primary key lookup {}", keys.join(", "))
            }
            Access::KeyRange(start, end) => write!(f, "primary key range {} .. {}", start_text(start, key_text), end_text(end, key_text)),
            Access::IndexRange { path, start, end } => {
                // Every entry of one value (or of NULL): the entries that start with a prefix.
                if let (Bound::Included(low), Bound::Excluded(high)) = (start, end)
                    && low.len() >= 2
                    && prefix_end(low).as_deref() == Some(high.as_slice())
                {
                    let value = sort_key::describe(&low[1..]);
                    let word = if value.ends_with('…') { "prefix" } else { "=" };
                    return write!(f, "index range on {path} {word} {value}");
                }
                // Entry keys are the index id, the value's sort key, and (mostly) the primary
                // key: show the value part of each bound. A bound of the id alone, or of a
                // value class alone (all numbers, all strings), is open-ended.
                let value = |key: &[u8]| (key.len() > 2).then(|| sort_key::describe(&key[1..]));
                let low = match start {
                    Bound::Included(key) => value(key).map_or("(-∞".to_owned(), |v| format!("[{v}")),
                    Bound::Excluded(key) => value(key).map_or("(-∞".to_owned(), |v| format!("({v}")),
                    Bound::Unbounded => "(-∞".to_owned(),
                };
                let high = match end {
                    // A number bound on its f64 part only ends just past that f64: print the
                    // f64 itself, inclusive.
                    Bound::Excluded(key) if key.len() == 10 && key[1] == sort_key::TAG_NUMBER => {
                        let ordered = u64::from_be_bytes(key[2..].try_into().expect("8 bytes")).wrapping_sub(1);
                        let mut last = key[..2].to_vec();
                        last.extend_from_slice(&ordered.to_be_bytes());
                        format!("{}]", sort_key::describe(&last[1..]))
                    }
                    Bound::Excluded(key) => value(key).map_or("∞)".to_owned(), |v| format!("{v})")),
                    Bound::Included(key) => value(key).map_or("∞)".to_owned(), |v| format!("{v}]")),
                    Bound::Unbounded => "∞)".to_owned(),
                };
                write!(f, "index range on {path} {low} .. {high}")
            }
            Access::Intersect(parts) | Access::Union(parts) => {
                let word = if matches!(self, Access::Intersect(_)) { "intersect" } else { "union" };
                write!(f, "{word}(")?;
                for (index, part) in parts.iter().enumerate() {
                    if index > 0 {
                        f.write_str("; ")?;
                    }
                    part.write(f, key_text)?;
                }
                f.write_str(")")
            }
            Access::Scan => f.write_str("full scan"),
        }
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.access.write(f, &self.key_text)?;
        if let Some(filter) = &self.filter {
            write!(f, ", filter {filter}")?;
        }
        match self.ordering {
            PlanOrdering::Sort => f.write_str(", sort in memory")?,
            PlanOrdering::Reversed => f.write_str(", walked backwards")?,
            PlanOrdering::Natural => {}
        }
        Ok(())
    }
}

/// Whether `predicate` is exactly `key == literal` on a one-field primary key of strings (with
/// a string literal) or integers (with an integer literal). Its one key lookup then finds
/// precisely the records that match, since a record is stored under the key its own field
/// encodes, and equal strings or integers are equal keys: the predicate need not run.
pub(crate) fn is_exact_key_lookup(state: &CollectionState, key: &dyn KeyLayout, predicate: &Expr) -> bool {
    let Some((path, CompareOp::Eq, literal)) = comparison(predicate) else { return false };
    is_single_key(key, path)
        && matches!(
            (state.single_key_type.as_ref(), literal),
            (Some(super::TypeDesc::String), Literal::Str(_))
                | (Some(super::TypeDesc::Int | super::TypeDesc::Integer(_)), Literal::Int(_) | Literal::UInt(_))
        )
}

/// The encoded primary key of a predicate that [`is_exact_key_lookup`] accepts, else `None`.
pub(crate) fn exact_key(state: &CollectionState, layout: &dyn KeyLayout, predicate: &Expr) -> Option<Vec<u8>> {
    let mut key = Vec::new();
    exact_key_into(state, layout, predicate, &mut key).then_some(key)
}

/// [`exact_key`] appended to `out` (cleared first): true when `predicate` is exactly `key ==
/// literal`, else false with `out` left empty or holding a partial key.
pub(crate) fn exact_key_into(state: &CollectionState, layout: &dyn KeyLayout, predicate: &Expr, out: &mut Vec<u8>) -> bool {
    out.clear();
    if !is_exact_key_lookup(state, layout, predicate) {
        return false;
    }
    let Some((_, _, literal)) = comparison(predicate) else { return false };
    // Room for the encoded key at once (a string's bytes, escapes aside, and its terminator),
    // rather than growing the buffer byte by byte.
    out.reserve(match literal {
        Literal::Str(text) => text.len() + 8,
        _ => 16,
    });
    layout.encode_key_literals(std::slice::from_ref(literal), out)
}

/// Plans a predicate's access path for collection `state`, whose primary key is `key`.
pub(crate) fn access(state: &CollectionState, key: &dyn KeyLayout, predicate: &Expr) -> Access {
    plan_expr(state, key, predicate).unwrap_or(Access::Scan)
}

/// Whether `path` is the whole primary key.
pub(crate) fn is_single_key(key: &dyn KeyLayout, path: &str) -> bool {
    key.key_fields() == [path]
}

/// `field op literal`, either way round, as (field, op, literal).
fn comparison(expr: &Expr) -> Option<(&str, CompareOp, &Literal)> {
    let Expr::Compare(a, op, b) = expr else { return None };
    match (&**a, &**b) {
        (Expr::Field(path), Expr::Literal(literal)) => Some((path, *op, literal)),
        (Expr::Literal(literal), Expr::Field(path)) => Some((path, op.flipped(), literal)),
        _ => None,
    }
}

/// `field op literal` (either way round), with `between` as two comparisons.
fn comparisons<'e>(expr: &'e Expr, out: &mut Vec<(&'e str, CompareOp, &'e Literal)>) {
    match expr {
        Expr::Compare(..) => out.extend(comparison(expr)),
        Expr::Between(a, low, high) => {
            if let (Expr::Field(path), Expr::Literal(low), Expr::Literal(high)) = (&**a, &**low, &**high) {
                out.push((path, CompareOp::Ge, low));
                out.push((path, CompareOp::Le, high));
            }
        }
        _ => {}
    }
}

/// A composite primary key's range from the conjuncts: equality on a leading run of key
/// fields, then (optionally) a range on the next one, becomes one primary-key range (or one
/// key lookup when every field is fixed). A superset: the filter still decides.
fn composite_key_access(layout: &dyn KeyLayout, conjuncts: &[&Expr]) -> Option<Access> {
    let key_fields = layout.key_fields();
    if key_fields.len() < 2 {
        return None;
    }
    let mut found = Vec::new();
    for conjunct in conjuncts {
        comparisons(conjunct, &mut found);
    }
    let mut fixed: Vec<Literal> = Vec::new();
    for field in key_fields {
        match found.iter().find(|(path, op, literal)| path == field && *op == CompareOp::Eq && **literal != Literal::Null) {
            Some((_, _, literal)) => fixed.push((*literal).clone()),
            None => break,
        }
    }
    if found.iter().any(|(path, op, literal)| key_fields.contains(path) && *op != CompareOp::Ne && **literal == Literal::Null) {
        return Some(Access::Empty); // a comparison with NULL is never TRUE
    }
    let mut prefix = Vec::new();
    if !layout.encode_key_prefix(&fixed, &mut prefix) {
        return None;
    }
    if fixed.len() == key_fields.len() {
        return Some(Access::Keys(vec![prefix]));
    }
    // Bounds on the next field, each a superset of its comparison's keys.
    let next = key_fields[fixed.len()];
    let whole = |prefix: &[u8]| prefix_end(prefix).map_or(Bound::Unbounded, Bound::Excluded);
    let mut start = if prefix.is_empty() { Bound::Unbounded } else { Bound::Included(prefix.clone()) };
    let mut end = if prefix.is_empty() { Bound::Unbounded } else { whole(&prefix) };
    let mut constrained = !fixed.is_empty();
    for (_, op, literal) in found.iter().filter(|(path, _, _)| *path == next) {
        let mut with = fixed.clone();
        with.push((*literal).clone());
        let mut key = Vec::new();
        if !layout.encode_key_prefix(&with, &mut key) {
            continue;
        }
        constrained = true;
        match op {
            // Keys whose field equals the literal, and every longer key after them.
            CompareOp::Ge | CompareOp::Gt => start = Bound::Included(key),
            // Keys that start with the literal's part are kept by `Le`, dropped by `Lt`.
            CompareOp::Le => end = whole(&key),
            CompareOp::Lt => end = Bound::Excluded(key),
            CompareOp::Eq | CompareOp::Ne => {}
        }
    }
    constrained.then_some(Access::KeyRange(start, end))
}

fn plan_expr(state: &CollectionState, key: &dyn KeyLayout, expr: &Expr) -> Option<Access> {
    if matches!(expr, Expr::And(..) | Expr::Compare(..) | Expr::Between(..))
        && key.key_fields().len() > 1
        && let Some(access) = composite_key_access(key, &expr.conjuncts())
    {
        return Some(access);
    }
    match expr {
        Expr::And(a, b) => {
            let parts: Vec<Access> = [plan_expr(state, key, a), plan_expr(state, key, b)].into_iter().flatten().collect();
            if let Some(empty) = parts.iter().find(|p| **p == Access::Empty) {
                return Some(empty.clone());
            }
            // A key lookup beats intersecting it with anything.
            if let Some(keys) = parts.iter().find(|p| matches!(p, Access::Keys(_))) {
                return Some(keys.clone());
            }
            let mut flat: Vec<Access> = Vec::new();
            for part in parts.into_iter().flat_map(|part| match part {
                Access::Intersect(inner) => inner,
                other => vec![other],
            }) {
                // Two ranges on one index (or on the key) are one range: their intersection. Not
                // on a multi-entry index: a record has an entry in each range (`tags contains
                // "x" and tags contains "y"`), and the intersection of the ranges is empty.
                let same = flat.iter_mut().find(|seen| match (&**seen, &part) {
                    (Access::IndexRange { path: a, .. }, Access::IndexRange { path: b, .. }) => {
                        a == b && super::build::elements_of(a).is_none()
                    }
                    (Access::KeyRange(..), Access::KeyRange(..)) => true,
                    _ => false,
                });
                match (same, part) {
                    (Some(Access::IndexRange { start, end, .. }), Access::IndexRange { start: s, end: e, .. })
                    | (Some(Access::KeyRange(start, end)), Access::KeyRange(s, e)) => {
                        *start = tighter_start(std::mem::replace(start, Bound::Unbounded), s);
                        *end = tighter_end(std::mem::replace(end, Bound::Unbounded), e);
                    }
                    (_, part) => flat.push(part),
                }
            }
            match flat.len() {
                0 => None,
                1 => flat.pop(),
                _ => Some(Access::Intersect(flat)),
            }
        }
        Expr::Or(a, b) => {
            let (a, b) = (plan_expr(state, key, a)?, plan_expr(state, key, b)?);
            let mut flat = Vec::new();
            for part in [a, b] {
                match part {
                    Access::Union(inner) => flat.extend(inner),
                    Access::Empty => {}
                    other => flat.push(other),
                }
            }
            Some(if flat.is_empty() { Access::Empty } else { Access::Union(flat) })
        }
        Expr::Compare(..) => {
            let (path, op, literal) = comparison(expr)?;
            compare(state, key, path, op, literal)
        }
        Expr::Between(a, low, high) => match (&**a, &**low, &**high) {
            (Expr::Field(path), Expr::Literal(low), Expr::Literal(high)) => {
                let lower = compare(state, key, path, CompareOp::Ge, low)?;
                let upper = compare(state, key, path, CompareOp::Le, high)?;
                plan_expr_parts(lower, upper)
            }
            _ => None,
        },
        Expr::In(a, list, false) => match &**a {
            Expr::Field(path) => {
                let parts: Option<Vec<Access>> = list.iter().map(|literal| compare(state, key, path, CompareOp::Eq, literal)).collect();
                let parts = parts?;
                if parts.iter().all(|p| matches!(p, Access::Keys(_) | Access::Empty)) {
                    let keys = parts.into_iter().flat_map(|p| if let Access::Keys(keys) = p { keys } else { Vec::new() }).collect();
                    return Some(Access::Keys(keys));
                }
                Some(Access::Union(parts))
            }
            _ => None,
        },
        Expr::IsNull(a, false) => match &**a {
            Expr::Field(path) => index_prefix(state, path, &[sort_key::TAG_NULL]),
            _ => None,
        },
        Expr::Variant(path, variant) => {
            let mut component = Vec::new();
            sort_key::encode_literal(&Literal::Str(variant.clone()), &mut component);
            index_value(state, path, component)
        }
        Expr::Contains(a, literal) => match &**a {
            Expr::Field(path) => contains(state, path, literal),
            _ => None,
        },
        Expr::Str(a, StringOp::StartsWith, prefix) => match &**a {
            Expr::Field(path) if is_single_key(key, path) && matches!(state.shape.resolve(path), Some(super::TypeDesc::String)) => {
                let start = part_prefix(prefix.as_bytes());
                let end = prefix_end(&start).map_or(Bound::Unbounded, Bound::Excluded);
                Some(Access::KeyRange(Bound::Included(start), end))
            }
            // A prefix longer than a truncated entry keeps: every string that starts with it
            // still starts with its first group's bytes.
            Expr::Field(path) => index_prefix(state, path, &sort_key::covering_low(sort_key::string_prefix(prefix))),
            _ => None,
        },
        _ => None,
    }
}

/// The tighter of two lower bounds.
pub(crate) fn tighter_start<K: Ord>(a: Bound<K>, b: Bound<K>) -> Bound<K> {
    match (a, b) {
        (Bound::Unbounded, other) | (other, Bound::Unbounded) => other,
        (Bound::Included(x), Bound::Included(y)) => Bound::Included(x.max(y)),
        (Bound::Excluded(x), Bound::Excluded(y)) => Bound::Excluded(x.max(y)),
        (Bound::Included(i), Bound::Excluded(e)) | (Bound::Excluded(e), Bound::Included(i)) => {
            if i > e {
                Bound::Included(i)
            } else {
                Bound::Excluded(e)
            }
        }
    }
}

/// The tighter of two upper bounds.
pub(crate) fn tighter_end<K: Ord>(a: Bound<K>, b: Bound<K>) -> Bound<K> {
    match (a, b) {
        (Bound::Unbounded, other) | (other, Bound::Unbounded) => other,
        (Bound::Included(x), Bound::Included(y)) => Bound::Included(x.min(y)),
        (Bound::Excluded(x), Bound::Excluded(y)) => Bound::Excluded(x.min(y)),
        (Bound::Included(i), Bound::Excluded(e)) | (Bound::Excluded(e), Bound::Included(i)) => {
            if i < e {
                Bound::Included(i)
            } else {
                Bound::Excluded(e)
            }
        }
    }
}

fn plan_expr_parts(lower: Access, upper: Access) -> Option<Access> {
    match (lower, upper) {
        (Access::KeyRange(start, _), Access::KeyRange(_, end)) => Some(Access::KeyRange(start, end)),
        (Access::IndexRange { path, start, .. }, Access::IndexRange { end, .. }) => Some(Access::IndexRange { path, start, end }),
        (Access::Empty, _) | (_, Access::Empty) => Some(Access::Empty),
        (lower, upper) => Some(Access::Intersect(vec![lower, upper])),
    }
}

fn index_prefix(state: &CollectionState, path: &str, component: &[u8]) -> Option<Access> {
    let index = state.index_for(path)?;
    let mut start = vec![index.id];
    start.extend_from_slice(component);
    let end = prefix_end(&start).map_or(Bound::Unbounded, Bound::Excluded);
    Some(Access::IndexRange { path: path.to_owned(), start: Bound::Included(start), end })
}

/// The index entries of one value, whose full component is `component`: those that start
/// with it, and for a string long enough to have a truncated form those that start with that
/// (an entry takes it when the full one does not fit in a key: see `build::entry_key`).
fn index_value(state: &CollectionState, path: &str, component: Vec<u8>) -> Option<Access> {
    let full = index_prefix(state, path, &component)?;
    match sort_key::truncated(&component) {
        Some(truncated) => Some(Access::Union(vec![full, index_prefix(state, path, &truncated)?])),
        None => Some(full),
    }
}

/// `field op literal` as a key lookup, key range or index range.
fn compare(state: &CollectionState, layout: &dyn KeyLayout, path: &str, op: CompareOp, literal: &Literal) -> Option<Access> {
    if *literal == Literal::Null {
        return Some(Access::Empty); // a comparison with NULL is never TRUE
    }
    if op == CompareOp::Ne {
        return None;
    }
    if is_single_key(layout, path) {
        let mut key = Vec::new();
        if layout.encode_key_literals(std::slice::from_ref(literal), &mut key) {
            return Some(match op {
                CompareOp::Eq => Access::Keys(vec![key]),
                CompareOp::Gt => Access::KeyRange(Bound::Excluded(key), Bound::Unbounded),
                CompareOp::Ge => Access::KeyRange(Bound::Included(key), Bound::Unbounded),
                CompareOp::Lt => Access::KeyRange(Bound::Unbounded, Bound::Excluded(key)),
                CompareOp::Le => Access::KeyRange(Bound::Unbounded, Bound::Included(key)),
                CompareOp::Ne => unreachable!("handled above"),
            });
        }
    }
    index_compare(state, path, op, literal)
}

/// `array contains literal` as a range of the multi-entry index on the array's elements
/// (`path[]`, see `build`), if there is one: the entries of the elements equal to the literal
/// (a superset for numbers, as [`index_compare`] bounds them). A substring test on a string
/// has no such index.
fn contains(state: &CollectionState, path: &str, literal: &Literal) -> Option<Access> {
    // Only a field that is always an array: on a field of any type, `contains` is also a
    // substring test of a string value, which has no entries in the element index (a record
    // `{"v": "abc"}` was missing from `v contains "b"` through it).
    let is_array = matches!(state.shape.resolve(path).map(super::strip_option), Some(super::TypeDesc::List(_) | super::TypeDesc::Tuple(_)));
    if !is_array {
        return None;
    }
    let index_path = format!("{path}{}", super::build::ELEMENTS_SUFFIX);
    state.index_for(&index_path)?;
    if *literal == Literal::Null {
        return Some(Access::Empty); // a comparison with NULL is never TRUE
    }
    index_compare(state, &index_path, CompareOp::Eq, literal)
}

/// `field op literal` as a range of the index on `index_path`, if it is ready.
fn index_compare(state: &CollectionState, index_path: &str, op: CompareOp, literal: &Literal) -> Option<Access> {
    let (path, index) = (index_path, state.index_for(index_path)?);
    // Components order numbers exactly, but the query language compares a float, or an
    // unsigned field's value, as an f64 (two integers exactly): values it calls equal share
    // the f64 part, not always the residual. Numbers are bounded on the f64 part, inclusively,
    // and the filter decides the boundary (see `sort_key`, "Numbers").
    let exact = sort_key::literal_tag(literal) != sort_key::TAG_NUMBER;
    if op == CompareOp::Eq && sort_key::literal_tag(literal) == sort_key::TAG_STRING {
        let mut component = Vec::new();
        sort_key::encode_literal(literal, &mut component);
        return index_value(state, path, component);
    }
    let mut range = sort_key::literal_range(op, literal, exact)?;
    // Truncated entries of strings above a long bound may sort below it (they keep only a
    // prefix): lower the bound to cover them; the filter decides. Upper bounds need nothing:
    // a truncated entry sorts at or below its string's full component.
    range.low = sort_key::covering_low(range.low);
    let with_id = |component: &[u8]| [&[index.id][..], component].concat();
    let start = Bound::Included(with_id(&range.low));
    let end = match &range.high {
        Some(high) => Bound::Excluded(with_id(high)),
        None => prefix_end(&[index.id]).map_or(Bound::Unbounded, Bound::Excluded),
    };
    Some(Access::IndexRange { path: path.to_owned(), start, end })
}
