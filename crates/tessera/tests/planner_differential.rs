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
    id: V,
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
        1 => (prop::sample::select(vec!["v", "m.c"]), literal()).prop_map(|(path, literal)| {
            let make = || Expr::Contains(Box::new(field(path)), literal.clone());
            (make(), make())
        }),
        1 => (prop::sample::select(vec!["v", "m.c"]), prop::sample::select(strings())).prop_map(|(path, suffix)| {
            let make = || Expr::Str(Box::new(field(path)), StringOp::EndsWith, suffix.clone());
            (make(), make())
        }),
        1 => (prop::sample::select(vec!["v", "m.c"]), literal(), op(), literal()).prop_map(|(path, by, op, to)| {
            let arith = || Box::new(Expr::Arith(Box::new(field(path)), tessera::query::ArithOp::Rem, Box::new(Expr::Literal(by.clone()))));
            let make = || Expr::Compare(arith(), op, Box::new(Expr::Literal(to.clone())));
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

fn query_orders(orders: &[(&'static str, Order, Option<Nulls>)]) -> Vec<OrderKey> {
    orders
        .iter()
        .map(|(path, order, nulls)| {
            let key = OrderKey::new(*path, *order);
            match nulls {
                Some(nulls) => key.nulls(*nulls),
                None => key,
            }
        })
        .collect()
}

fn schema(indexed: bool, string_key: bool) -> DynSchema {
    let index = |path: &str| DynIndex { path: path.into(), unique: false, ready: true, failure: None };
    DynSchema {
        version: 1,
        key_fields: vec!["id".into()],
        key_kinds: vec![if string_key { KeyKind::String } else { KeyKind::I64 }],
        shape: TypeDesc::Struct(vec![
            ("id".into(), if string_key { TypeDesc::String } else { TypeDesc::Int }),
            ("k".into(), if string_key { TypeDesc::String } else { TypeDesc::Int }),
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

fn row(string_key: bool) -> impl Strategy<Value = Row> {
    let id = if string_key {
        prop::sample::select(strings().into_iter().filter(|s| s.len() < 200).collect::<Vec<_>>()).prop_map(V::Str).boxed()
    } else {
        (-3i64..8).prop_map(V::Int).boxed()
    };
    (id, value(), value()).prop_map(|(id, v, c)| Row { id, v, c })
}

/// Whether the text syntax can write `literal` (it has no NaN or infinity).
fn writable(literal: &Literal) -> bool {
    !matches!(literal, Literal::Float(x) if !x.is_finite())
}

/// Whether every constant of `expr` can be written as text.
fn all_writable(expr: &Expr) -> bool {
    match expr {
        Expr::Literal(literal) | Expr::Contains(_, literal) => writable(literal),
        Expr::In(a, list, _) => all_writable(a) && list.iter().all(writable),
        Expr::Compare(a, _, b) | Expr::Arith(a, _, b) | Expr::And(a, b) | Expr::Or(a, b) => all_writable(a) && all_writable(b),
        Expr::Between(a, b, c) => all_writable(a) && all_writable(b) && all_writable(c),
        Expr::IsNull(a, _) | Expr::Str(a, _, _) | Expr::Not(a) => all_writable(a),
        Expr::Field(_) | Expr::Variant(..) => true,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn indexed_queries_return_what_a_scan_returns(
        (string_key, rows, later, deleted) in any::<bool>().prop_flat_map(|string_key| (
            Just(string_key),
            prop::collection::vec(row(string_key), 0..24),
            prop::collection::vec(row(string_key), 0..8),
            prop::collection::vec(row(string_key).prop_map(|row| row.id), 0..4),
        )),
        queries in prop::collection::vec((predicate(), prop::collection::vec(order_key(), 0..3), prop::option::of(0usize..4), prop::option::of(0usize..6)), 1..6),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let db = tessera::Db::open(dir.path().join("db")).unwrap();
        let indexed = db.create_dyn_collection("indexed", &schema(true, string_key)).unwrap();
        let copy = db.create_dyn_collection("copy", &schema(false, string_key)).unwrap();
        store(&db, &indexed, &rows);
        store(&db, &copy, &rows);
        let mut built = Vec::new();
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
            built.push((query.clone(), scan.clone()));
            // The same query as text: it prints back and parses to an equal statement.
            if all_writable(expr) {
                let statement = tessera::query::Statement {
                    predicate: Some(expr.clone()),
                    order_by: query_orders(orders),
                    limit: *limit,
                    offset: offset.unwrap_or(0),
                };
                let text = statement.to_string();
                let parsed = tessera::query::Statement::parse(&text);
                prop_assert!(parsed.as_ref().is_ok_and(|parsed| *parsed == statement), "{} -> {:?}", text, parsed);
                prop_assert_eq!(json(indexed.filter_text(&text).unwrap().fetch(&db).unwrap()), expected, "{}", text);
            }
        }
        // In a write transaction, after more writes: its own index entries answer its queries.
        db.write(|tx| {
            store_in(tx, &indexed, &later, &deleted);
            store_in(tx, &copy, &later, &deleted);
            for (query, scan) in &built {
                let json = |rows: Vec<tessera::collection::DynRecord>| rows.iter().map(|row| row.to_json()).collect::<Vec<_>>();
                let expected = json(scan.fetch(&*tx)?);
                assert_eq!(json(query.fetch(&*tx)?), expected, "in the transaction: {}", query.explain()?);
                assert_eq!(query.count(&*tx)?, expected.len());
            }
            Ok(())
        })
        .unwrap();
    }
}

/// Upserts `rows` and deletes the records keyed `deleted`, in `tx`.
fn store_in(tx: &mut tessera::WriteTxn<'_>, collection: &DynCollection, rows: &[Row], deleted: &[V]) {
    for row in rows {
        let bytes = tessera::value::to_vec(row).unwrap();
        collection.upsert(tx, tessera::value::Doc::from_untrusted(&bytes).unwrap().root()).unwrap();
    }
    for key in deleted {
        let bytes = tessera::value::to_vec(key).unwrap();
        collection.delete(tx, tessera::value::Doc::from_untrusted(&bytes).unwrap().root()).unwrap();
    }
}

/// A composite key `(a, b)` (an `i32` and a string) and its copy as plain fields `x`, `y`.
fn composite_schema(keyed: bool) -> DynSchema {
    let (a, b) = if keyed { ("a", "b") } else { ("x", "y") };
    DynSchema {
        version: 1,
        key_fields: if keyed { vec!["a".into(), "b".into()] } else { vec!["row".into()] },
        key_kinds: if keyed { vec![KeyKind::I32, KeyKind::String] } else { vec![KeyKind::U32] },
        shape: TypeDesc::Struct(vec![
            ("row".into(), TypeDesc::Int),
            (a.into(), TypeDesc::Integer(tessera::collection::IntType::I32)),
            (b.into(), TypeDesc::String),
        ]),
        indexes: Vec::new(),
    }
}

fn composite_predicate() -> impl Strategy<Value = (Expr, Expr)> {
    let number = prop_oneof![
        (-3i64..4).prop_map(Literal::Int),
        prop::sample::select(vec![
            Literal::Float(1.0),
            Literal::Float(-0.0),
            Literal::Float(1.5),
            Literal::Float(-2.5),
            Literal::UInt(u64::MAX),
            Literal::Int(i64::MIN),
            Literal::Int(1 << 40),
            Literal::Null
        ]),
    ];
    let text = prop_oneof![
        prop::sample::select(vec!["", "a", "a\0", "ab", "b", "\u{ff}"]).prop_map(|s| Literal::Str(s.into())),
        Just(Literal::Null)
    ];
    let leaf = prop_oneof![
        (op(), number.clone()).prop_map(|(op, n)| (field("a").compare_with(op, &n), field("x").compare_with(op, &n))),
        (op(), text.clone()).prop_map(|(op, s)| (field("b").compare_with(op, &s), field("y").compare_with(op, &s))),
        (number.clone(), number.clone()).prop_map(|(low, high)| {
            let make =
                |path| Expr::Between(Box::new(field(path)), Box::new(Expr::Literal(low.clone())), Box::new(Expr::Literal(high.clone())));
            (make("a"), make("x"))
        }),
        prop::collection::vec(number, 1..3)
            .prop_map(|list| (Expr::In(Box::new(field("a")), list.clone(), false), Expr::In(Box::new(field("x")), list, false))),
        prop::sample::select(vec!["", "a", "a\0"]).prop_map(|prefix| {
            let make = |path| Expr::Str(Box::new(field(path)), StringOp::StartsWith, prefix.to_owned());
            (make("b"), make("y"))
        }),
    ];
    leaf.prop_recursive(2, 8, 2, |inner| {
        prop_oneof![
            3 => (inner.clone(), inner.clone()).prop_map(|((a, ca), (b, cb))| (a.and(b), ca.and(cb))),
            1 => (inner.clone(), inner.clone()).prop_map(|((a, ca), (b, cb))| (a.or(b), ca.or(cb))),
            1 => inner.prop_map(|(a, ca)| (!a, !ca)),
        ]
    })
}

/// `field op literal`, for the tests.
trait CompareWith {
    fn compare_with(self, op: CompareOp, literal: &Literal) -> Expr;
}

impl CompareWith for Expr {
    fn compare_with(self, op: CompareOp, literal: &Literal) -> Expr {
        Expr::Compare(Box::new(self), op, Box::new(Expr::Literal(literal.clone())))
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn composite_key_queries_return_what_a_scan_returns(
        keys in prop::collection::btree_set((-3i32..4, prop::sample::select(vec!["", "a", "a\0", "a\0b", "ab", "b", "\u{ff}"])), 0..30),
        queries in prop::collection::vec((composite_predicate(), any::<bool>(), prop::option::of(0usize..5)), 1..6),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let db = tessera::Db::open(dir.path().join("db")).unwrap();
        let keyed = db.create_dyn_collection("keyed", &composite_schema(true)).unwrap();
        let copy = db.create_dyn_collection("copy", &composite_schema(false)).unwrap();
        db.write(|tx| {
            for (row, (a, b)) in keys.iter().enumerate() {
                let json = serde_json::json!({"row": row, "a": a, "b": b}).to_string();
                keyed.insert_json(tx, json.as_bytes())?;
                let json = serde_json::json!({"row": row, "x": a, "y": b}).to_string();
                copy.insert_json(tx, json.as_bytes())?;
            }
            Ok(())
        }).unwrap();
        for ((expr, copy_expr), descending, limit) in &queries {
            let (mut query, mut scan) = match (keyed.filter(expr.clone()), copy.filter(copy_expr.clone())) {
                (Ok(query), Ok(scan)) => (query, scan),
                (Err(_), Err(_)) => continue,
                (query, scan) => return Err(TestCaseError::fail(format!("{expr:?}: {:?} but {:?}", query.err(), scan.err()))),
            };
            // The copy's rows are in key order: `row` orders it as the keys do.
            let order = if *descending { Order::Desc } else { Order::Asc };
            query = query.order_by_key(OrderKey::new("a", order)).unwrap().order_by_key(OrderKey::new("b", order)).unwrap();
            scan = scan.order_by_key(OrderKey::new("row", order)).unwrap();
            if let Some(limit) = limit { query = query.limit(*limit); scan = scan.limit(*limit); }
            let pairs = |rows: Vec<tessera::collection::DynRecord>, a: &str, b: &str| -> Vec<(i64, String)> {
                rows.iter().map(|row| {
                    let value: serde_json::Value = serde_json::from_str(&row.to_json()).unwrap();
                    (value[a].as_i64().unwrap(), value[b].as_str().unwrap().to_owned())
                }).collect()
            };
            let expected = pairs(scan.fetch(&db).unwrap(), "x", "y");
            let plan = query.explain().unwrap();
            prop_assert_eq!(pairs(query.fetch(&db).unwrap(), "a", "b"), expected, "{:?}\nplan: {}", expr, plan);
        }
    }
}
