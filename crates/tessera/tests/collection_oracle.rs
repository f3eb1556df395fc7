//! Collection queries against a naive in-memory oracle: random records (with NULLs), random
//! writes, random predicates that the planner serves by key lookups, key ranges, index ranges,
//! intersections, unions and scans, with random order (NULLs first or last, by default or as
//! asked), offset and limit. The oracle filters Rust structs with its own three-valued logic
//! and sorts them itself. Each query also runs from its text (`Collection::query_text`).

use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use tessera::collection::{Embed, Nulls, Order, Record};
use tessera::query::Expr;

#[derive(Serialize, Deserialize, Embed, Debug, Clone, Copy, PartialEq)]
enum Kind {
    Small,
    Large { size: u8 },
}

#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "things")]
struct Thing {
    #[record(key)]
    id: u16,
    #[record(index)]
    a: Option<i64>,
    #[record(index)]
    b: String,
    c: bool,
    #[record(index)]
    kind: Kind,
}

/// A predicate as the query language sees it, and as the oracle evaluates it.
#[derive(Debug, Clone)]
enum Pred {
    A(tessera::query::CompareOp, i64),
    ABetween(i64, i64),
    AIn(Vec<i64>),
    ANull,
    BEq(String),
    BPrefix(String),
    C(bool),
    KindIs(&'static str),
    Id(tessera::query::CompareOp, u16),
    IdIn(Vec<u16>),
    And(Box<Pred>, Box<Pred>),
    Or(Box<Pred>, Box<Pred>),
    Not(Box<Pred>),
}

fn compare<T: PartialOrd>(a: &T, op: tessera::query::CompareOp, b: &T) -> bool {
    use tessera::query::CompareOp::*;
    match op {
        Eq => a == b,
        Ne => a != b,
        Lt => a < b,
        Le => a <= b,
        Gt => a > b,
        Ge => a >= b,
    }
}

impl Pred {
    fn expr(&self) -> Expr {
        use tessera::query::CompareOp::*;
        let cmp = |field: Expr, op, value: Expr| match op {
            Eq => field.eq(value),
            Ne => field.ne(value),
            Lt => field.lt(value),
            Le => field.le(value),
            Gt => field.gt(value),
            Ge => field.ge(value),
        };
        match self {
            Pred::A(op, v) => cmp(Thing::a().into(), *op, (*v).into()),
            Pred::ABetween(lo, hi) => Thing::a().between(*lo, *hi),
            Pred::AIn(values) => Thing::a().is_in(values.clone()),
            Pred::ANull => Thing::a().is_null(),
            Pred::BEq(s) => Thing::b().eq(s.as_str()),
            Pred::BPrefix(s) => Thing::b().starts_with(s),
            Pred::C(v) => Thing::c().eq(*v),
            Pred::KindIs(v) => Thing::kind().is_variant(v),
            Pred::Id(op, v) => cmp(Thing::id().into(), *op, (*v as i64).into()),
            Pred::IdIn(values) => Thing::id().is_in(values.iter().map(|v| *v as i64)),
            Pred::And(a, b) => a.expr().and(b.expr()),
            Pred::Or(a, b) => a.expr().or(b.expr()),
            Pred::Not(a) => !a.expr(),
        }
    }

    /// Three-valued: `None` is UNKNOWN.
    fn truth(&self, t: &Thing) -> Option<bool> {
        match self {
            Pred::A(op, v) => t.a.map(|a| compare(&a, *op, v)),
            Pred::ABetween(lo, hi) => t.a.map(|a| *lo <= a && a <= *hi),
            Pred::AIn(values) => t.a.map(|a| values.contains(&a)),
            Pred::ANull => Some(t.a.is_none()),
            Pred::BEq(s) => Some(t.b == *s),
            Pred::BPrefix(s) => Some(t.b.starts_with(s.as_str())),
            Pred::C(v) => Some(t.c == *v),
            Pred::KindIs(v) => Some(matches!((t.kind, *v), (Kind::Small, "Small") | (Kind::Large { .. }, "Large"))),
            Pred::Id(op, v) => Some(compare(&t.id, *op, v)),
            Pred::IdIn(values) => Some(values.contains(&t.id)),
            Pred::And(a, b) => match (a.truth(t), b.truth(t)) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            },
            Pred::Or(a, b) => match (a.truth(t), b.truth(t)) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            },
            Pred::Not(a) => a.truth(t).map(|v| !v),
        }
    }
}

fn op() -> impl Strategy<Value = tessera::query::CompareOp> {
    use tessera::query::CompareOp::*;
    prop::sample::select(vec![Eq, Ne, Lt, Le, Gt, Ge])
}

fn text() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["", "a", "ab", "abc", "b", "ba"]).prop_map(String::from)
}

fn pred() -> impl Strategy<Value = Pred> {
    let leaf = prop_oneof![
        (op(), -6i64..6).prop_map(|(o, v)| Pred::A(o, v)),
        (-6i64..6, -6i64..6).prop_map(|(lo, hi)| Pred::ABetween(lo, hi)),
        prop::collection::vec(-6i64..6, 1..4).prop_map(Pred::AIn),
        Just(Pred::ANull),
        text().prop_map(Pred::BEq),
        text().prop_map(Pred::BPrefix),
        any::<bool>().prop_map(Pred::C),
        prop::sample::select(vec!["Small", "Large"]).prop_map(Pred::KindIs),
        (op(), 0u16..30).prop_map(|(o, v)| Pred::Id(o, v)),
        prop::collection::vec(0u16..30, 1..4).prop_map(Pred::IdIn),
    ];
    leaf.prop_recursive(3, 12, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| Pred::And(Box::new(a), Box::new(b))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| Pred::Or(Box::new(a), Box::new(b))),
            inner.prop_map(|a| Pred::Not(Box::new(a))),
        ]
    })
}

fn thing() -> impl Strategy<Value = Thing> {
    (0u16..30, proptest::option::weighted(0.8, -6i64..6), text(), any::<bool>(), prop::option::of(0u8..3))
        .prop_map(|(id, a, b, c, size)| Thing { id, a, b, c, kind: size.map_or(Kind::Small, |size| Kind::Large { size }) })
}

#[derive(Debug, Clone, Copy)]
enum SortField {
    A,
    B,
}

/// An order key as the test draws it: `None` for SQL's default NULL placement.
type OrderDraw = (SortField, Order, Option<Nulls>);

fn oracle_order(x: &Thing, y: &Thing, orders: &[OrderDraw]) -> Ordering {
    for (field, order, nulls) in orders {
        // NULL where asked, else SQL's rule (as if larger than every value); otherwise the
        // direction applies.
        let nulls_last = nulls.unwrap_or(if *order == Order::Asc { Nulls::Last } else { Nulls::First }) == Nulls::Last;
        let ordering = match field {
            SortField::A => match (x.a, y.a) {
                (None, None) => Ordering::Equal,
                (None, Some(_)) if nulls_last => Ordering::Greater,
                (None, Some(_)) => Ordering::Less,
                (Some(_), None) if nulls_last => Ordering::Less,
                (Some(_), None) => Ordering::Greater,
                (Some(p), Some(q)) => {
                    if *order == Order::Asc {
                        p.cmp(&q)
                    } else {
                        q.cmp(&p)
                    }
                }
            },
            SortField::B => {
                if *order == Order::Asc {
                    x.b.cmp(&y.b)
                } else {
                    y.b.cmp(&x.b)
                }
            }
        };
        if ordering != Ordering::Equal {
            return ordering;
        }
    }
    x.id.cmp(&y.id)
}

#[derive(Debug, Clone)]
enum Write {
    Upsert(Thing),
    Delete(u16),
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn queries_match_the_oracle(
        writes in prop::collection::vec(prop_oneof![4 => thing().prop_map(Write::Upsert), 1 => (0u16..30).prop_map(Write::Delete)], 0..60),
        queries in prop::collection::vec((
            pred(),
            prop::collection::vec((
                prop::sample::select(vec![SortField::A, SortField::B]),
                prop::sample::select(vec![Order::Asc, Order::Desc]),
                prop::option::of(prop::sample::select(vec![Nulls::First, Nulls::Last])),
            ), 0..3),
            prop::option::of(0usize..5),
            prop::option::of(0usize..8),
        ), 1..8),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let db = tessera::Db::open(dir.path().join("db")).unwrap();
        let things = db.collection::<Thing>().unwrap();
        let mut oracle: BTreeMap<u16, Thing> = BTreeMap::new();
        db.write(|tx| {
            for write in &writes {
                match write {
                    Write::Upsert(thing) => { things.upsert(tx, thing)?; }
                    Write::Delete(id) => { things.delete(tx, id)?; }
                }
            }
            Ok(())
        }).unwrap();
        for write in &writes {
            match write {
                Write::Upsert(thing) => { oracle.insert(thing.id, thing.clone()); }
                Write::Delete(id) => { oracle.remove(id); }
            }
        }
        for (pred, orders, offset, limit) in &queries {
            let mut query = things.filter(pred.expr());
            let mut text = vec![pred.expr().to_string()];
            let mut keys = Vec::new();
            for (field, order, nulls) in orders {
                let path = match field { SortField::A => "a", SortField::B => "b" };
                query = match nulls {
                    None => query.order_by(path, *order),
                    Some(nulls) => query.order_by_nulls(path, *order, *nulls),
                };
                let direction = if *order == Order::Asc { "ASC" } else { "desc" };
                let nulls = match nulls { None => "", Some(Nulls::First) => " NULLS FIRST", Some(Nulls::Last) => " nulls last" };
                keys.push(format!("{path} {direction}{nulls}"));
            }
            if !keys.is_empty() { text.push(format!("ORDER BY {}", keys.join(", "))); }
            if let Some(limit) = limit { text.push(format!("limit {limit}")); }
            if let Some(offset) = offset { text.push(format!("offset {offset}")); }
            if let Some(offset) = offset { query = query.offset(*offset); }
            if let Some(limit) = limit { query = query.limit(*limit); }
            let from_text = things.query_text(&text.join(" ")).unwrap();
            prop_assert_eq!(from_text.fetch(&db).unwrap(), query.fetch(&db).unwrap(), "{}", text.join(" "));
            let mut expected: Vec<Thing> = oracle.values().filter(|t| pred.truth(t) == Some(true)).cloned().collect();
            expected.sort_by(|x, y| oracle_order(x, y, orders));
            let expected: Vec<Thing> = expected.into_iter().skip(offset.unwrap_or(0)).take(limit.unwrap_or(usize::MAX)).collect();
            let plan = query.explain().unwrap();
            prop_assert_eq!(&query.fetch(&db).unwrap(), &expected, "{}", plan);
            prop_assert_eq!(query.count(&db).unwrap(), expected.len());
            prop_assert_eq!(query.exists(&db).unwrap(), !expected.is_empty());
            prop_assert_eq!(query.first(&db).unwrap(), expected.first().cloned());
            let iterated: Vec<Thing> = db.read(|tx| query.iter(tx)?.collect()).unwrap();
            prop_assert_eq!(iterated, expected);
        }
    }
}
