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
//! component order agrees with the query language's comparison (strings, booleans, integer
//! fields against integer constants below 2^53): then the lookup itself decides the match.

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
    let mut desc = shape.resolve(path);
    while let Some(TypeDesc::Option(inner)) = desc {
        desc = Some(inner);
    }
    desc
}

/// One conjunct as a constraint on a field: (path, points, intervals, exact).
type Constraint = (String, Vec<Vec<u8>>, Vec<Interval>, bool);

fn compare_constraint(shape: &TypeDesc, path: &str, op: CompareOp, literal: &Literal) -> Option<Constraint> {
    let exact = match literal {
        Literal::Null => return Some((path.to_owned(), Vec::new(), Vec::new(), true)), // never TRUE
        // An enum's payload variant has its name as component, but compares as UNKNOWN.
        Literal::Str(_) => !matches!(field_type(shape, path), Some(TypeDesc::Enum(_))),
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
            Expr::Field(path) => Some((path.to_string(), Vec::new(), vec![Interval::prefix(sort_key::string_prefix(prefix))], true)),
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

/// Intervals sorted by their low end, with the maximum high end of each subtree of an implicit
/// segment tree, so that a stabbing query visits only subtrees that can contain the point.
#[derive(Default)]
struct IntervalIndex {
    intervals: Vec<(Interval, u64)>,
    /// `max_high[node]`: the largest high end under the node (`None`: unbounded); nodes of a
    /// perfect binary tree over `intervals`, root 1.
    max_high: Vec<Option<Option<Vec<u8>>>>,
    leaves: usize,
}

fn max_high(a: &Option<Option<Vec<u8>>>, b: &Option<Option<Vec<u8>>>) -> Option<Option<Vec<u8>>> {
    match (a, b) {
        (None, other) | (other, None) => other.clone(),
        (Some(None), _) | (_, Some(None)) => Some(None),
        (Some(Some(x)), Some(Some(y))) => Some(Some(x.clone().max(y.clone()))),
    }
}

impl IntervalIndex {
    fn build(mut intervals: Vec<(Interval, u64)>) -> IntervalIndex {
        intervals.sort_by(|a, b| a.0.low.cmp(&b.0.low));
        let leaves = intervals.len().next_power_of_two().max(1);
        let mut max_high_tree = vec![None; 2 * leaves];
        for (position, (interval, _)) in intervals.iter().enumerate() {
            max_high_tree[leaves + position] = Some(interval.high.clone());
        }
        for node in (1..leaves).rev() {
            max_high_tree[node] = max_high(&max_high_tree[2 * node], &max_high_tree[2 * node + 1]);
        }
        IntervalIndex { intervals, max_high: max_high_tree, leaves }
    }

    /// Calls `found` with the id of every interval containing `point`.
    fn stab(&self, point: &[u8], found: &mut impl FnMut(u64)) {
        let candidates = self.intervals.partition_point(|(interval, _)| sort_key::compare(&interval.low, point).is_le());
        if candidates > 0 {
            self.visit(1, 0, self.leaves, candidates, point, found);
        }
    }

    fn visit(&self, node: usize, start: usize, end: usize, limit: usize, point: &[u8], found: &mut impl FnMut(u64)) {
        if start >= limit {
            return;
        }
        match &self.max_high[node] {
            None => return,
            Some(Some(high)) if sort_key::compare(high, point).is_le() => return,
            _ => {}
        }
        if end - start == 1 {
            let (interval, id) = &self.intervals[start];
            if interval.contains(point) {
                found(*id);
            }
            return;
        }
        let middle = (start + end) / 2;
        self.visit(2 * node, start, middle, limit, point, found);
        self.visit(2 * node + 1, middle, end, limit, point, found);
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
    /// Calls `found` for every subscription whose anchor on this field holds `component`
    /// (after [`Matcher::prepare`]).
    pub(crate) fn lookup(&self, component: &[u8], found: &mut impl FnMut(u64)) {
        if let Some(ids) = self.points.get(component) {
            ids.iter().for_each(|id| found(*id));
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
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for size in [0usize, 1, 2, 3, 7, 64, 300] {
            let intervals: Vec<(Interval, u64)> = (0..size as u64)
                .map(|id| {
                    let low = (next() % 100) as u8;
                    let high = if next() % 5 == 0 { None } else { Some(vec![low.saturating_add((next() % 30) as u8)]) };
                    (Interval { low: vec![low], high }, id)
                })
                .collect();
            let index = IntervalIndex::build(intervals.clone());
            for point in 0..=130u8 {
                let mut found = Vec::new();
                index.stab(&[point], &mut |id| found.push(id));
                found.sort_unstable();
                let mut expected: Vec<u64> = intervals.iter().filter(|(i, _)| i.contains(&[point])).map(|(_, id)| *id).collect();
                expected.sort_unstable();
                assert_eq!(found, expected, "size {size}, point {point}");
            }
        }
    }
}
