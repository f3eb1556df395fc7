//! The planner against a full scan: random records of mixed kinds (integers at the edges of
//! `i64` and `u64`, floats with NaN and signed zeros, strings with NULs, high bytes, shared
//! and long prefixes, enum-like dicts, arrays, NULL and missing fields) in a dynamic
//! collection with indexes on an untyped field and a nested path, and the same records in a
//! copy with no index. Every random query must return the same rows in the same order from
//! both, whatever access path and ordering the planner picks for the indexed one, and its
//! `count` and `first` must agree with `fetch`.

use proptest::prelude::*;
use serde::ser::{SerializeMap, Serializer};
use tessera::collection::{DynCollection, DynIndex, DynSchema, KeyKind, Nulls, Order, TypeDesc};
use tessera::query::OrderKey;
use tessera::query::{CompareOp, Expr, Literal, StringOp, field};

/// A value a record holds.
#[derive(Debug, Clone)]
enum V {
    Missing,
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    Variant(String, i64),
    Array(Vec<V>),
}

impl serde::Serialize for V {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            V::Missing | V::Null => serializer.serialize_unit(),
            V::Bool(b) => serializer.serialize_bool(*b),
            V::Int(i) => serializer.serialize_i64(*i),
            V::UInt(u) => serializer.serialize_u64(*u),
            V::Float(x) => serializer.serialize_f64(*x),
            V::Str(s) => serializer.serialize_str(s),
            V::Variant(name, payload) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry(name, payload)?;
                map.end()
            }
            V::Array(items) => serializer.collect_seq(items),
        }
    }
}

/// A record: its key, the indexed `v`, and `m.c` (indexed) under an optional `m`.
#[derive(Debug, Clone)]
struct Row {
    id: i64,
    v: V,
    c: V,
}

impl serde::Serialize for Row {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("id", &self.id)?;
        // The copy's plain field standing for the key.
        map.serialize_entry("k", &self.id)?;
        if !matches!(self.v, V::Missing) {
            map.serialize_entry("v", &self.v)?;
        }
        if !matches!(self.c, V::Missing) {
            let mut inner = std::collections::BTreeMap::new();
            inner.insert("c", &self.c);
            map.serialize_entry("m", &inner)?;
        }
        map.end()
    }
}

fn strings() -> Vec<String> {
    let long = "p".repeat(300);
    vec![
        String::new(),
        "a".into(),
        "ab".into(),
        "a\0".into(),
        "a\0b".into(),
        "a\u{1}".into(),
        "\u{ff}".into(),
        "ÿa".into(),
        "é".into(),
        "b".into(),
        "A".into(),
        "B".into(),
        long.clone(),
        format!("{long}a"),
        format!("{long}b"),
        format!("{long}\0"),
        format!("{}a", "p".repeat(255)),
        format!("{}\0a", "p".repeat(255)),
    ]
}

fn numbers() -> Vec<V> {
    let two53 = 1i64 << 53;
    vec![
        V::Int(0),
        V::Int(1),
        V::Int(-1),
        V::Int(2),
        V::Int(two53),
        V::Int(two53 + 1),
        V::Int(i64::MAX),
        V::Int(i64::MIN),
        V::Int(i64::MAX - 1),
        V::UInt(1 << 63),
        V::UInt((1 << 63) + 1),
        V::UInt(u64::MAX),
        V::UInt(u64::MAX - 1),
        V::Float(0.0),
        V::Float(-0.0),
        V::Float(1.0),
        V::Float(1.5),
        V::Float(-1.5),
        V::Float(two53 as f64),
        V::Float(9223372036854775808.0),
        V::Float(18446744073709551616.0),
        V::Float(f64::NAN),
        V::Float(f64::INFINITY),
        V::Float(f64::NEG_INFINITY),
        V::Float(1e300),
    ]
}

fn value() -> impl Strategy<Value = V> {
    prop_oneof![
        2 => Just(V::Missing),
        2 => Just(V::Null),
        1 => any::<bool>().prop_map(V::Bool),
        6 => prop::sample::select(numbers()),
        3 => (-3i64..4).prop_map(V::Int),
        6 => prop::sample::select(strings()).prop_map(V::Str),
        2 => (prop::sample::select(vec!["A", "B", "a"]), 0i64..2).prop_map(|(name, payload)| V::Variant(name.into(), payload)),
        1 => prop::collection::vec(prop_oneof![(-2i64..3).prop_map(V::Int), Just(V::Null), prop::sample::select(strings()).prop_map(V::Str)], 0..3)
            .prop_map(V::Array),
    ]
}

fn literal() -> impl Strategy<Value = Literal> {
    let of = |v: V| match v {
        V::Int(i) => Literal::Int(i),
        V::UInt(u) => Literal::UInt(u),
        V::Float(x) => Literal::Float(x),
        _ => unreachable!(),
    };
    prop_oneof![
        1 => Just(Literal::Null),
        1 => any::<bool>().prop_map(Literal::Bool),
        6 => prop::sample::select(numbers()).prop_map(of),
        3 => (-3i64..4).prop_map(Literal::Int),
        1 => prop::sample::select(vec![0.5, 1.0000001, -0.5, 2.5]).prop_map(Literal::Float),
        6 => prop::sample::select(strings()).prop_map(Literal::Str),
    ]
}

fn op() -> impl Strategy<Value = CompareOp> {
    prop::sample::select(vec![CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ge])
}

/// A predicate on the indexed collection (`id` is its key) and on the copy (`id` read as `k`).
fn predicate() -> impl Strategy<Value = (Expr, Expr)> {
    let path = prop::sample::select(vec!["v", "m.c", "id"]);
    let on = |path: &str, copy: bool| field(if copy && path == "id" { "k" } else { path });
    let id_literal = prop_oneof![(-3i64..8).prop_map(Literal::Int), literal()];
    let leaf = prop_oneof![
        4 => (path.clone(), op(), literal(), any::<bool>()).prop_map(move |(path, op, literal, flipped)| {
            let make = |copy: bool| {
                let (a, b) = (Box::new(on(path, copy)), Box::new(Expr::Literal(literal.clone())));
                if flipped { Expr::Compare(b, op.flipped(), a) } else { Expr::Compare(a, op, b) }
            };
            (make(false), make(true))
        }),
        2 => (op(), id_literal).prop_map(move |(op, literal)| {
            let make = |copy: bool| Expr::Compare(Box::new(on("id", copy)), op, Box::new(Expr::Literal(literal.clone())));
            (make(false), make(true))
        }),
        1 => (path.clone(), literal(), literal()).prop_map(move |(path, low, high)| {
            let make = |copy: bool| Expr::Between(Box::new(on(path, copy)), Box::new(Expr::Literal(low.clone())), Box::new(Expr::Literal(high.clone())));
            (make(false), make(true))
        }),
        2 => (path.clone(), prop::collection::vec(literal(), 1..4), any::<bool>()).prop_map(move |(path, list, negated)| {
            let make = |copy: bool| Expr::In(Box::new(on(path, copy)), list.clone(), negated);
            (make(false), make(true))
        }),
        1 => (path.clone(), any::<bool>()).prop_map(move |(path, negated)| {
            let make = |copy: bool| Expr::IsNull(Box::new(on(path, copy)), negated);
            (make(false), make(true))
        }),
        1 => (prop::sample::select(vec!["v", "m.c"]), prop::sample::select(strings())).prop_map(|(path, prefix)| {
            let make = || Expr::Str(Box::new(field(path)), StringOp::StartsWith, prefix.clone());
            (make(), make())
        }),
        1 => (prop::sample::select(vec!["v", "m.c"]), prop::sample::select(vec!["A", "B", "a"])).prop_map(|(path, variant)| {
            let make = || Expr::Variant(tessera::query::FieldPath::new(path), variant.to_owned());
            (make(), make())
        }),
    ];
    leaf.prop_recursive(3, 10, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|((a, ca), (b, cb))| (a.and(b), ca.and(cb))),
            (inner.clone(), inner.clone()).prop_map(|((a, ca), (b, cb))| (a.or(b), ca.or(cb))),
            inner.prop_map(|(a, ca)| (!a, !ca)),
        ]
    })
}

fn order_key() -> impl Strategy<Value = (&'static str, Order, Option<Nulls>)> {
    (
        prop::sample::select(vec!["v", "m.c", "id"]),
        prop::sample::select(vec![Order::Asc, Order::Desc]),
        prop::option::of(prop::sample::select(vec![Nulls::First, Nulls::Last])),
    )
}

fn schema(indexed: bool) -> DynSchema {
    let index = |path: &str| DynIndex { path: path.into(), unique: false, ready: true, failure: None };
    DynSchema {
        version: 1,
        key_fields: vec!["id".into()],
        key_kinds: vec![KeyKind::I64],
        shape: TypeDesc::Struct(vec![
            ("id".into(), TypeDesc::Int),
            ("k".into(), TypeDesc::Int),
            ("v".into(), TypeDesc::Any),
            ("m".into(), TypeDesc::Any),
        ]),
        indexes: if indexed { vec![index("v"), index("m.c")] } else { Vec::new() },
    }
}

fn store(db: &tessera::Db, collection: &DynCollection, rows: &[Row]) {
    db.write(|tx| {
        for row in rows {
            let bytes = tessera::value::to_vec(row).unwrap();
            collection.upsert(tx, tessera::value::Doc::from_untrusted(&bytes).unwrap().root())?;
        }
        Ok(())
    })
    .unwrap();
}

fn row() -> impl Strategy<Value = Row> {
    (-3i64..8, value(), value()).prop_map(|(id, v, c)| Row { id, v, c })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn indexed_queries_return_what_a_scan_returns(
        rows in prop::collection::vec(row(), 0..24),
        queries in prop::collection::vec((predicate(), prop::collection::vec(order_key(), 0..3), prop::option::of(0usize..4), prop::option::of(0usize..6)), 1..6),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let db = tessera::Db::open(dir.path().join("db")).unwrap();
        let indexed = db.create_dyn_collection("indexed", &schema(true)).unwrap();
        let copy = db.create_dyn_collection("copy", &schema(false)).unwrap();
        store(&db, &indexed, &rows);
        store(&db, &copy, &rows);
        for ((expr, copy_expr), orders, offset, limit) in &queries {
            let (mut query, mut scan) = match (indexed.filter(expr.clone()), copy.filter(copy_expr.clone())) {
                (Ok(query), Ok(scan)) => (query, scan),
                (Err(_), Err(_)) => continue, // a type error on both
                (query, scan) => return Err(TestCaseError::fail(format!("{expr:?}: {:?} but {:?}", query.err(), scan.err()))),
            };
            for (path, order, nulls) in orders {
                let key = |path: &str| {
                    let key = OrderKey::new(path, *order);
                    match nulls { Some(nulls) => key.nulls(*nulls), None => key }
                };
                query = query.order_by_key(key(path)).unwrap();
                scan = scan.order_by_key(key(if *path == "id" { "k" } else { path })).unwrap();
            }
            if let Some(offset) = offset { query = query.offset(*offset); scan = scan.offset(*offset); }
            if let Some(limit) = limit { query = query.limit(*limit); scan = scan.limit(*limit); }
            let json = |rows: Vec<tessera::collection::DynRecord>| rows.iter().map(|row| row.to_json()).collect::<Vec<_>>();
            let expected = json(scan.fetch(&db).unwrap());
            let plan = query.explain().unwrap();
            let got = json(query.fetch(&db).unwrap());
            prop_assert_eq!(&got, &expected, "{:?} {:?} {:?} {:?}\nplan: {}\nscan plan: {}", expr, orders, offset, limit, plan, scan.explain().unwrap());
            prop_assert_eq!(query.count(&db).unwrap(), expected.len(), "{}", plan);
        }
    }
}
