//! Finding the standing queries a changed record may affect, without evaluating every query.
//!
//! Each query subscription is registered under an *anchor*: a field and the set of that
//! field's sort-key components (see `collection::sort_key`) a matching record must have,
//! taken from a conjunct of its predicate (`priority >= 5 and …` → priority in [5, ∞)). Equality
//! on strings and booleans goes in a hash map; every other range in an interval index that
//! answers "which intervals contain this point" in O(log n + k). A record's old and new
//! versions are each looked up once per anchored field. Queries with no usable conjunct are
//! evaluated against every change.
//!
//! An anchor is *exact* when the whole predicate is its conjuncts on that one field and the
//! component order agrees with the query language's comparison (string fields against
//! strings, booleans, integer fields against integer constants below 2^53): then the lookup
//! itself decides the match.

use crate::collection::TypeDesc;
use crate::collection::sort_key::{self, Interval};
use crate::query::{CompareOp, Expr, Literal, StringOp};
use std::collections::HashMap;

/// Where a subscription is registered.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Anchor {
    pub(crate) path: String,
    /// Exact components (string/boolean equality, `in`, variants) for the hash map.
    pub(crate) points: Vec<Vec<u8>>,
    /// Ranges for the interval index.
    pub(crate) intervals: Vec<Interval>,
}

/// A predicate's anchors (several for a top-level `or`) and whether they decide the match.
pub(crate) struct Anchoring {
    pub(crate) anchors: Vec<Anchor>,
    pub(crate) exact: bool,
}

fn field_type<'s>(shape: &'s TypeDesc, path: &str) -> Option<&'s TypeDesc> {
    shape.resolve(path).map(crate::collection::strip_option)
}

/// Whether the field at `path` holds strings only (or nothing): the only field whose string
/// components are decided as the query language compares strings.
fn is_string_field(shape: &TypeDesc, path: &str) -> bool {
    matches!(field_type(shape, path), Some(TypeDesc::String))
}

/// One conjunct as a constraint on a field: (path, points, intervals, exact).
type Constraint = (String, Vec<Vec<u8>>, Vec<Interval>, bool);

fn compare_constraint(shape: &TypeDesc, path: &str, op: CompareOp, literal: &Literal) -> Option<Constraint> {
    let exact = match literal {
        Literal::Null => return Some((path.to_owned(), Vec::new(), Vec::new(), true)), // never TRUE
        // Only a string field's components are strings alone: an enum's payload variant, and
        // any one-entry map a field of any type holds, has its key as component, but compares
        // as UNKNOWN.
        Literal::Str(_) => is_string_field(shape, path),
        Literal::Bool(_) => true,
        Literal::Int(int) => {
            matches!(field_type(shape, path), Some(TypeDesc::Int | TypeDesc::Integer(_))) && int.unsigned_abs() < (1 << 53)
        }
        Literal::UInt(_) | Literal::Float(_) => false,
    };
    if op == CompareOp::Eq && exact && sort_key::literal_tag(literal) != sort_key::TAG_NUMBER {
        let mut component = Vec::new();
        sort_key::encode_literal(literal, &mut component);
        return Some((path.to_owned(), vec![component], Vec::new(), true));
    }
    let interval = sort_key::literal_range(op, literal, exact)?;
    Some((path.to_owned(), Vec::new(), vec![interval], exact))
}

fn constraint(shape: &TypeDesc, expr: &Expr) -> Option<Constraint> {
    match expr {
        Expr::Compare(a, op, b) => match (&**a, &**b) {
            (Expr::Field(path), Expr::Literal(literal)) => compare_constraint(shape, path, *op, literal),
            (Expr::Literal(literal), Expr::Field(path)) => compare_constraint(shape, path, op.flipped(), literal),
            _ => None,
        },
        Expr::Between(a, low, high) => match (&**a, &**low, &**high) {
            (Expr::Field(path), Expr::Literal(low), Expr::Literal(high)) => {
                let (_, _, lower, exact_low) = compare_constraint(shape, path, CompareOp::Ge, low)?;
                let (_, _, upper, exact_high) = compare_constraint(shape, path, CompareOp::Le, high)?;
                let interval = lower.first()?.intersect(upper.first()?);
                Some((path.to_string(), Vec::new(), vec![interval], exact_low && exact_high))
            }
            _ => None,
        },
        Expr::In(a, list, false) => match &**a {
            Expr::Field(path) => {
                let mut points = Vec::new();
                let mut intervals = Vec::new();
                let mut exact = true;
                for literal in list {
                    let (_, p, i, e) = compare_constraint(shape, path, CompareOp::Eq, literal)?;
                    points.extend(p);
                    intervals.extend(i);
                    exact &= e;
                }
                Some((path.to_string(), points, intervals, exact))
            }
            _ => None,
        },
        Expr::IsNull(a, false) => match &**a {
            Expr::Field(path) => Some((path.to_string(), vec![vec![sort_key::TAG_NULL]], Vec::new(), true)),
            _ => None,
        },
        Expr::Variant(path, variant) => {
            let mut component = Vec::new();
            sort_key::encode_literal(&Literal::Str(variant.clone()), &mut component);
            Some((path.to_string(), vec![component], Vec::new(), true))
        }
        Expr::Str(a, StringOp::StartsWith, prefix) => match &**a {
            Expr::Field(path) => {
                let exact = is_string_field(shape, path);
                Some((path.to_string(), Vec::new(), vec![Interval::prefix(sort_key::string_prefix(prefix))], exact))
            }
            _ => None,
        },
        _ => None,
    }
}

/// The anchors of a predicate (`None`: match every record).
pub(crate) fn anchoring(shape: &TypeDesc, predicate: Option<&Expr>) -> Anchoring {
    let Some(predicate) = predicate else {
        return Anchoring { anchors: Vec::new(), exact: false };
    };
    if let Expr::Or(a, b) = predicate {
        let (left, right) = (anchoring(shape, Some(a)), anchoring(shape, Some(b)));
        if !left.anchors.is_empty() && !right.anchors.is_empty() {
            let anchors = left.anchors.into_iter().chain(right.anchors).collect();
            return Anchoring { anchors, exact: false };
        }
        return Anchoring { anchors: Vec::new(), exact: false };
    }
    let parts = predicate.conjuncts();
    let constraints: Vec<Option<Constraint>> = parts.iter().map(|part| constraint(shape, part)).collect();
    // Prefer a field with points (a hash lookup), then any constrained field.
    let chosen = constraints
        .iter()
        .flatten()
        .find(|(_, points, intervals, _)| !points.is_empty() && intervals.is_empty())
        .or_else(|| constraints.iter().flatten().next());
    let Some((path, _, _, _)) = chosen else {
        return Anchoring { anchors: Vec::new(), exact: false };
    };
    let path = path.clone();
    let on_path: Vec<&Constraint> = constraints.iter().flatten().filter(|(p, ..)| *p == path).collect();
    let all_used = constraints.iter().all(|c| c.as_ref().is_some_and(|(p, ..)| *p == path));
    // Intersect single-interval constraints on the chosen field; keep the first otherwise.
    let mut anchor = Anchor { path: path.clone(), points: on_path[0].1.clone(), intervals: on_path[0].2.clone() };
    let mut exact = all_used && on_path[0].3;
    for (_, points, intervals, part_exact) in &on_path[1..] {
        let single = |a: &Anchor| a.points.is_empty() && a.intervals.len() == 1;
        if single(&anchor) && points.is_empty() && intervals.len() == 1 {
            anchor.intervals = vec![anchor.intervals[0].intersect(&intervals[0])];
            exact &= *part_exact;
        } else {
            exact = false;
        }
    }
    Anchoring { anchors: vec![anchor], exact }
}

/// Intervals sorted by their low end, over an implicit perfect binary tree that knows, for
/// each node, the intervals of the largest and of the smallest high end under it: a stabbing
/// query skips a subtree whose largest high end is at or below the point, and reports a whole
/// subtree at once when even its smallest high end is above it (every interval in the sorted
/// prefix starts at or below the point). With many overlapping ranges (the live table's case 3:
/// a changed record lies in hundreds of them) the hits come out as runs of ids, not one tree
/// walk each: 258 instructions per hit before, in callgrind.
#[derive(Default)]
struct IntervalIndex {
    /// Sorted by low end.
    intervals: Vec<(Interval, u64)>,
    /// The intervals' ids, in the same order, for reporting runs.
    ids: Vec<u64>,
    /// Each interval's high end's first eight bytes ([`sort_key::head`]; unused for an unbounded
    /// one): most comparisons with a point are decided on these without reading the bytes.
    high_heads: Vec<u64>,
    /// `max_high[node]` and `min_high[node]`: the position of the interval with the largest and
    /// the smallest high end under the node (unbounded is largest), or [`NO_INTERVAL`] for a
    /// node over padding only; root 1.
    max_high: Vec<u32>,
    min_high: Vec<u32>,
    leaves: usize,
}

/// A tree node over padding leaves only.
const NO_INTERVAL: u32 = u32::MAX;

/// Orders two high ends, unbounded above every bound.
fn high_order(a: &Option<Vec<u8>>, b: &Option<Vec<u8>>) -> std::cmp::Ordering {
    match (a, b) {
        (None, None) => std::cmp::Ordering::Equal,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (Some(_), None) => std::cmp::Ordering::Less,
        (Some(a), Some(b)) => sort_key::compare(a, b),
    }
}

impl IntervalIndex {
    fn build(mut intervals: Vec<(Interval, u64)>) -> IntervalIndex {
        assert!(intervals.len() < NO_INTERVAL as usize, "interval positions fit in u32");
        intervals.sort_by(|a, b| sort_key::compare(&a.0.low, &b.0.low));
        let leaves = intervals.len().next_power_of_two().max(1);
        let mut max_high = vec![NO_INTERVAL; 2 * leaves];
        let mut min_high = vec![NO_INTERVAL; 2 * leaves];
        for position in 0..intervals.len() {
            max_high[leaves + position] = position as u32;
            min_high[leaves + position] = position as u32;
        }
        let high = |position: u32| &intervals[position as usize].0.high;
        let pick = |a: u32, b: u32, want: std::cmp::Ordering| match (a, b) {
            (NO_INTERVAL, other) | (other, NO_INTERVAL) => other,
            (a, b) if high_order(high(b), high(a)) == want => b,
            (a, _) => a,
        };
        for node in (1..leaves).rev() {
            max_high[node] = pick(max_high[2 * node], max_high[2 * node + 1], std::cmp::Ordering::Greater);
            min_high[node] = pick(min_high[2 * node], min_high[2 * node + 1], std::cmp::Ordering::Less);
        }
        let ids = intervals.iter().map(|(_, id)| *id).collect();
        let high_heads = intervals.iter().map(|(interval, _)| interval.high.as_deref().map_or(u64::MAX, sort_key::head)).collect();
        IntervalIndex { intervals, ids, high_heads, max_high, min_high, leaves }
    }

    /// Calls `found` with the ids of every interval containing `point`, in runs.
    fn stab<'s>(&'s self, point: &[u8], found: &mut impl FnMut(&'s [u64])) {
        let candidates = self.intervals.partition_point(|(interval, _)| sort_key::compare(&interval.low, point).is_le());
        if candidates > 0 {
            self.visit(1, 0, self.leaves, candidates, point, sort_key::head(point), found);
        }
    }

    /// Whether the high end of the interval at `position` lies above `point`, whose head is
    /// `point_head`.
    #[inline]
    fn high_above(&self, position: u32, point: &[u8], point_head: u64) -> bool {
        let position = position as usize;
        let Some(high) = &self.intervals[position].0.high else { return true };
        let high_head = self.high_heads[position];
        if high_head != point_head {
            return high_head > point_head;
        }
        sort_key::compare(high, point).is_gt()
    }

    /// Reports the intervals under `node` (positions `start..end`) that contain `point`, among
    /// the first `limit`, whose low ends are at or below it.
    #[allow(clippy::too_many_arguments)]
    fn visit<'s>(
        &'s self,
        node: usize,
        start: usize,
        end: usize,
        limit: usize,
        point: &[u8],
        point_head: u64,
        found: &mut impl FnMut(&'s [u64]),
    ) {
        if start >= limit {
            return;
        }
        let largest = self.max_high[node];
        if largest == NO_INTERVAL || !self.high_above(largest, point, point_head) {
            return;
        }
        if end <= limit && self.high_above(self.min_high[node], point, point_head) {
            // Every interval under the node starts at or below the point and ends above it (a
            // leaf that got here is one such).
            found(&self.ids[start..end]);
            return;
        }
        let middle = (start + end) / 2;
        self.visit(2 * node, start, middle, limit, point, point_head, found);
        self.visit(2 * node + 1, middle, end, limit, point, point_head, found);
    }
}

/// The anchored subscriptions of one field.
#[derive(Default)]
pub(crate) struct FieldIndex {
    /// By exact component. Looked up for every changed record, so hashed with Fx: the table
    /// holds subscribers' constants only, so a component crafted to collide costs its lookup
    /// one more comparison, never a degraded table. A short component and a lone subscriber
    /// are held inline: with thousands of subscriptions, a lookup reads one entry, not three
    /// scattered blocks.
    points: rustc_hash::FxHashMap<smallvec::SmallVec<[u8; 16]>, smallvec::SmallVec<[u64; 1]>>,
    intervals: Vec<(Interval, u64)>,
    tree: Option<IntervalIndex>,
}

/// Every anchored subscription of one collection, by field.
#[derive(Default)]
pub(crate) struct Matcher {
    fields: HashMap<String, FieldIndex>,
    /// Subscriptions evaluated against every change.
    pub(crate) unanchored: Vec<u64>,
}

impl Matcher {
    pub(crate) fn add(&mut self, id: u64, anchors: &[Anchor]) {
        if anchors.is_empty() {
            self.unanchored.push(id);
        }
        for anchor in anchors {
            let field = self.fields.entry(anchor.path.clone()).or_default();
            for point in &anchor.points {
                field.points.entry(smallvec::SmallVec::from_slice(point)).or_default().push(id);
            }
            for interval in &anchor.intervals {
                field.intervals.push((interval.clone(), id));
                field.tree = None;
            }
        }
    }

    pub(crate) fn remove(&mut self, id: u64, anchors: &[Anchor]) {
        self.unanchored.retain(|other| *other != id);
        for anchor in anchors {
            let Some(field) = self.fields.get_mut(&anchor.path) else { continue };
            for point in &anchor.points {
                if let Some(ids) = field.points.get_mut(point.as_slice()) {
                    ids.retain(|other| *other != id);
                    if ids.is_empty() {
                        field.points.remove(point.as_slice());
                    }
                }
            }
            if !anchor.intervals.is_empty() {
                field.intervals.retain(|(_, other)| *other != id);
                field.tree = None;
            }
            if field.points.is_empty() && field.intervals.is_empty() {
                self.fields.remove(&anchor.path);
            }
        }
    }

    /// Builds the interval indexes changed since the last batch.
    pub(crate) fn prepare(&mut self) {
        for field in self.fields.values_mut() {
            if field.tree.is_none() {
                field.tree = Some(IntervalIndex::build(field.intervals.clone()));
            }
        }
    }

    /// Each anchored field's path and index: a commit's changes are looked up field by field,
    /// so a path is hashed once per commit, not once per change.
    pub(crate) fn fields(&self) -> impl Iterator<Item = (&str, &FieldIndex)> {
        self.fields.iter().map(|(path, field)| (path.as_str(), field))
    }
}

impl FieldIndex {
    /// Calls `found` with the ids of every subscription whose anchor on this field holds
    /// `component` (after [`Matcher::prepare`]), in runs.
    pub(crate) fn lookup<'s>(&'s self, component: &[u8], found: &mut impl FnMut(&'s [u64])) {
        if let Some(ids) = self.points.get(component) {
            found(ids);
        }
        if let Some(tree) = &self.tree {
            tree.stab(component, found);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stabbing_finds_exactly_the_containing_intervals() {
        let mut next = crate::live::test_rng(0x2545_f491_4f6c_dd1du64);
        // Points of one byte, and points of nine or ten whose first eight bytes are shared (as
        // number components' are for close values), so that comparisons past the heads count.
        let head = [2u8, 0x40, 0x8f, 0, 0, 0, 0, 0];
        let component = |byte: u8, long: bool| if long { [&head[..], &[byte]].concat() } else { vec![byte] };
        for long in [false, true] {
            for size in [0usize, 1, 2, 3, 7, 64, 300, 1000] {
                let intervals: Vec<(Interval, u64)> = (0..size as u64)
                    .map(|id| {
                        let low = (next() % 100) as u8;
                        let high = (!next().is_multiple_of(5)).then(|| component(low.saturating_add((next() % 30) as u8), long));
                        (Interval { low: component(low, long), high }, id)
                    })
                    .collect();
                let index = IntervalIndex::build(intervals.clone());
                let mut points: Vec<Vec<u8>> = (0..=130u8).map(|byte| component(byte, long)).collect();
                points.extend([vec![], head[..3].to_vec(), [&head[..], &[7, 0]].concat(), vec![0xFF; 12]]);
                for point in &points {
                    let mut found = Vec::new();
                    index.stab(point, &mut |ids| found.extend_from_slice(ids));
                    found.sort_unstable();
                    let mut expected: Vec<u64> = intervals.iter().filter(|(i, _)| i.contains(point)).map(|(_, id)| *id).collect();
                    expected.sort_unstable();
                    assert_eq!(found, expected, "size {size}, point {point:?}");
                }
            }
        }
    }
}
