//! Review of order-preserving keys, index entries and the order queries return (sort_key.rs,
//! store/key.rs, key_layout.rs, the element index). Each test compares what a query returns,
//! through an index and through a full scan, with a naive oracle that filters and sorts a Vec
//! by the rules docs/query.md states.
//!
//! Failed on the code as reviewed (2026-12-01), and pass with their fixes:
//! - `element_index_on_an_untyped_field_misses_substring_matches`
//! - `float_key_negative_zero_is_a_second_key_that_get_cannot_find`
//!
//! The others pass (behaviour checked and correct).

use proptest::prelude::*;
use std::cmp::Ordering;
use std::time::Duration;
use tessera::collection::{DynIndex, DynSchema, KeyKind, Nulls, Order, Record, TypeDesc};
use tessera::query::{CompareOp, Expr, Literal, OrderKey, StringOp, field};

// ---------------------------------------------------------------------------------------------
// Defect (failed before its fix): a multi-entry index on a field of no fixed type (`TypeDesc::Any`) answers
// `v contains "b"` from the index of array elements only. But on a record whose `v` is a
// *string*, `contains` is a substring test (docs/query.md, "Strings": `name contains "e"`),
// and such a record has no element entries at all (build.rs components_of: `as_array()?`).
// The planner (plan.rs `contains`) never checks that the field is an array, so the string
// record is silently dropped: Ok with a wrong answer. Correct: the same rows as a full scan
// (the string record "abc" matches `contains "b"`).
// ---------------------------------------------------------------------------------------------
#[test]
fn element_index_on_an_untyped_field_misses_substring_matches() {
    let schema = |indexed: bool| DynSchema {
        version: 1,
        key_fields: vec!["id".into()],
        key_kinds: vec![KeyKind::U32],
        shape: TypeDesc::Struct(vec![("id".into(), TypeDesc::Int), ("v".into(), TypeDesc::Any)]),
        indexes: if indexed { vec![DynIndex { path: "v[]".into(), unique: false, ready: true, failure: None }] } else { vec![] },
    };
    let dir = tempfile::tempdir().unwrap();
    let db = tessera::Db::open(dir.path().join("db")).unwrap();
    let indexed = db.create_dyn_collection("indexed", &schema(true)).unwrap();
    let plain = db.create_dyn_collection("plain", &schema(false)).unwrap();
    db.write(|tx| {
        for json in [r#"{"id": 1, "v": "abc"}"#, r#"{"id": 2, "v": ["b"]}"#, r#"{"id": 3, "v": ["x"]}"#] {
            indexed.insert_json(tx, json.as_bytes())?;
            plain.insert_json(tx, json.as_bytes())?;
        }
        Ok(())
    })
    .unwrap();
    let ids = |rows: Vec<tessera::collection::DynRecord>| rows.iter().map(|row| row.to_json()).collect::<Vec<_>>();
    let scan = ids(plain.filter_text(r#"v contains "b""#).unwrap().fetch(&db).unwrap());
    assert_eq!(scan, [r#"{"id":1,"v":"abc"}"#, r#"{"id":2,"v":["b"]}"#], "the scan: a substring and an element");
    let query = indexed.filter_text(r#"v contains "b""#).unwrap();
    let plan = query.explain().unwrap().to_string();
    assert_eq!(ids(query.fetch(&db).unwrap()), scan, "through the element index ({plan})");
}

// ---------------------------------------------------------------------------------------------
// The typed differential against a naive oracle.
// ---------------------------------------------------------------------------------------------

#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "ix")]
struct Ix {
    #[record(key)]
    id: u32,
    #[record(index)]
    i: i64,
    #[record(index)]
    u: u64,
    #[record(index)]
    f: f64,
    #[record(index)]
    s: String,
    #[record(index)]
    o: Option<String>,
    #[record(index_elements)]
    tags: Vec<String>,
    #[record(index_elements)]
    nums: Vec<u64>,
}

#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "plain")]
struct Plain {
    #[record(key)]
    id: u32,
    i: i64,
    u: u64,
    f: f64,
    s: String,
    o: Option<String>,
    tags: Vec<String>,
    nums: Vec<u64>,
}

impl From<&Ix> for Plain {
    fn from(r: &Ix) -> Plain {
        Plain { id: r.id, i: r.i, u: r.u, f: r.f, s: r.s.clone(), o: r.o.clone(), tags: r.tags.clone(), nums: r.nums.clone() }
    }
}

const TWO53: i64 = 1 << 53;

fn ints() -> Vec<i64> {
    vec![i64::MIN, i64::MIN + 1, -TWO53 - 1, -TWO53, -1, 0, 1, 2, TWO53, TWO53 + 1, i64::MAX - 1, i64::MAX]
}

fn uints() -> Vec<u64> {
    vec![0, 1, 2, (1 << 53) + 1, i64::MAX as u64, 1 << 63, (1 << 63) + 1, u64::MAX - 1025, u64::MAX - 1, u64::MAX]
}

fn floats() -> Vec<f64> {
    vec![
        -0.0,
        0.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1.0,
        1.5,
        -1.5,
        2.0,
        TWO53 as f64,
        (TWO53 + 2) as f64,
        9223372036854775808.0,
        -9223372036854775808.0,
        18446744073709551616.0,
        1e19,
        5e-324,
        -5e-324,
        f64::MIN_POSITIVE,
        1e300,
    ]
}

fn strings() -> Vec<String> {
    let long = "p".repeat(300);
    vec![
        String::new(),
        "a".into(),
        "a\0".into(),
        "a\0b".into(),
        "a\u{1}".into(),
        "ab".into(),
        "b".into(),
        "T".into(),
        "é".into(),
        "\u{ff}".into(),
        "\u{10FFFF}".into(),
        long.clone(),
        format!("{long}a"),
        format!("{long}\0"),
        format!("{}\0a", "p".repeat(255)),
    ]
}

fn record() -> impl Strategy<Value = Ix> {
    let s = prop::sample::select(strings());
    (
        0u32..40,
        prop::sample::select(ints()),
        prop::sample::select(uints()),
        prop::sample::select(floats()),
        s.clone(),
        prop::option::of(s.clone()),
        prop::collection::vec(s, 0..4),
        prop::collection::vec(prop::sample::select(uints()), 0..4),
    )
        .prop_map(|(id, i, u, f, s, o, tags, nums)| Ix { id, i, u, f, s, o, tags, nums })
}

/// A value as the oracle sees it.
#[derive(Debug, Clone)]
enum Val {
    Null,
    I(i128),
    F(f64),
    S(String),
}

fn exact_int_float(int: i128, float: f64) -> Option<Ordering> {
    if float.is_nan() {
        return None;
    }
    if float == f64::INFINITY || float >= 1e30 {
        return Some(Ordering::Less);
    }
    if float == f64::NEG_INFINITY || float <= -1e30 {
        return Some(Ordering::Greater);
    }
    let floor = float.floor();
    Some(match int.cmp(&(floor as i128)) {
        Ordering::Equal if float == floor => Ordering::Equal,
        Ordering::Equal => Ordering::Less,
        other => other,
    })
}

/// The documented comparison: numbers by exact value, strings by bytes; `None` when no order
/// (NaN, NULL, mismatched kinds).
fn cmp(a: &Val, b: &Val) -> Option<Ordering> {
    match (a, b) {
        (Val::I(x), Val::I(y)) => Some(x.cmp(y)),
        (Val::F(x), Val::F(y)) => x.partial_cmp(y),
        (Val::I(x), Val::F(y)) => exact_int_float(*x, *y),
        (Val::F(x), Val::I(y)) => exact_int_float(*y, *x).map(Ordering::reverse),
        (Val::S(x), Val::S(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        _ => None,
    }
}

fn is_nan(v: &Val) -> bool {
    matches!(v, Val::F(x) if x.is_nan())
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum T3 {
    True,
    False,
    Unknown,
}

fn compare3(a: &Val, op: CompareOp, b: &Val) -> T3 {
    if matches!(a, Val::Null) || matches!(b, Val::Null) {
        return T3::Unknown;
    }
    let Some(ordering) = cmp(a, b) else {
        if is_nan(a) || is_nan(b) {
            return if op == CompareOp::Ne { T3::True } else { T3::False };
        }
        return T3::Unknown;
    };
    let holds = match op {
        CompareOp::Eq => ordering == Ordering::Equal,
        CompareOp::Ne => ordering != Ordering::Equal,
        CompareOp::Lt => ordering == Ordering::Less,
        CompareOp::Le => ordering != Ordering::Greater,
        CompareOp::Gt => ordering == Ordering::Greater,
        CompareOp::Ge => ordering != Ordering::Less,
    };
    if holds { T3::True } else { T3::False }
}

fn and3(a: T3, b: T3) -> T3 {
    match (a, b) {
        (T3::False, _) | (_, T3::False) => T3::False,
        (T3::True, T3::True) => T3::True,
        _ => T3::Unknown,
    }
}

fn lit_val(literal: &Literal) -> Val {
    match literal {
        Literal::Null => Val::Null,
        Literal::Int(i) => Val::I(i128::from(*i)),
        Literal::UInt(u) => Val::I(i128::from(*u)),
        Literal::Float(x) => Val::F(*x),
        Literal::Str(s) => Val::S(s.clone()),
        Literal::Bool(_) => unreachable!(),
    }
}

fn value_of(r: &Ix, path: &str) -> Val {
    match path {
        "id" => Val::I(i128::from(r.id)),
        "i" => Val::I(i128::from(r.i)),
        "u" => Val::I(i128::from(r.u)),
        "f" => Val::F(r.f),
        "s" => Val::S(r.s.clone()),
        "o" => r.o.clone().map_or(Val::Null, Val::S),
        _ => unreachable!("{path}"),
    }
}

/// A query predicate and its oracle.
#[derive(Debug, Clone)]
enum Pred {
    Cmp(&'static str, CompareOp, Literal),
    Between(&'static str, Literal, Literal),
    StartsWith(&'static str, String),
    Contains(&'static str, Literal),
    IsNull(&'static str),
}

impl Pred {
    fn expr(&self) -> Expr {
        let lit = |l: &Literal| Box::new(Expr::Literal(l.clone()));
        match self {
            Pred::Cmp(path, op, l) => Expr::Compare(Box::new(field(path)), *op, lit(l)),
            Pred::Between(path, low, high) => Expr::Between(Box::new(field(path)), lit(low), lit(high)),
            Pred::StartsWith(path, prefix) => Expr::Str(Box::new(field(path)), StringOp::StartsWith, prefix.clone()),
            Pred::Contains(path, l) => Expr::Contains(Box::new(field(path)), l.clone()),
            Pred::IsNull(path) => Expr::IsNull(Box::new(field(path)), false),
        }
    }

    fn truth(&self, r: &Ix) -> T3 {
        match self {
            Pred::Cmp(path, op, l) => compare3(&value_of(r, path), *op, &lit_val(l)),
            Pred::Between(path, low, high) => {
                let v = value_of(r, path);
                and3(compare3(&v, CompareOp::Ge, &lit_val(low)), compare3(&v, CompareOp::Le, &lit_val(high)))
            }
            Pred::StartsWith(path, prefix) => match value_of(r, path) {
                Val::S(s) => {
                    if s.starts_with(prefix.as_str()) {
                        T3::True
                    } else {
                        T3::False
                    }
                }
                _ => T3::Unknown,
            },
            Pred::Contains(path, l) => {
                let wanted = lit_val(l);
                let elements: Vec<Val> = match *path {
                    "tags" => r.tags.iter().cloned().map(Val::S).collect(),
                    "nums" => r.nums.iter().map(|n| Val::I(i128::from(*n))).collect(),
                    _ => unreachable!(),
                };
                let mut truth = T3::False;
                for element in &elements {
                    if compare3(element, CompareOp::Eq, &wanted) == T3::True {
                        truth = T3::True;
                    }
                }
                truth
            }
            Pred::IsNull(path) => {
                if matches!(value_of(r, path), Val::Null) {
                    T3::True
                } else {
                    T3::False
                }
            }
        }
    }
}

fn num_literal() -> impl Strategy<Value = Literal> {
    prop_oneof![
        prop::sample::select(ints()).prop_map(Literal::Int),
        prop::sample::select(uints()).prop_map(Literal::from),
        prop::sample::select(floats()).prop_map(Literal::Float),
        prop::sample::select(vec![0.5, -0.5, 2.5, 9007199254740993.0]).prop_map(Literal::Float),
        (-3i64..45).prop_map(Literal::Int),
    ]
}

fn str_literal() -> impl Strategy<Value = Literal> {
    prop::sample::select(strings()).prop_map(Literal::Str)
}

fn op() -> impl Strategy<Value = CompareOp> {
    prop::sample::select(vec![CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ge])
}

fn pred() -> impl Strategy<Value = Pred> {
    let num_path = prop::sample::select(vec!["i", "u", "f", "id"]);
    let str_path = prop::sample::select(vec!["s", "o"]);
    prop_oneof![
        3 => (num_path.clone(), op(), num_literal()).prop_map(|(p, op, l)| Pred::Cmp(p, op, l)),
        3 => (str_path.clone(), op(), str_literal()).prop_map(|(p, op, l)| Pred::Cmp(p, op, l)),
        2 => (num_path, num_literal(), num_literal()).prop_map(|(p, a, b)| Pred::Between(p, a, b)),
        2 => (str_path.clone(), str_literal(), str_literal()).prop_map(|(p, a, b)| Pred::Between(p, a, b)),
        1 => (str_path.clone(), prop::sample::select(strings())).prop_map(|(p, s)| {
            // Prefixes of the strings, too.
            let cut = s.len().min(2);
            Pred::StartsWith(p, if s.is_char_boundary(cut) { s[..cut].to_owned() } else { s })
        }),
        1 => (str_path.clone(), prop::sample::select(strings())).prop_map(|(p, s)| Pred::StartsWith(p, s)),
        2 => str_literal().prop_map(|l| Pred::Contains("tags", l)),
        2 => num_literal().prop_map(|l| Pred::Contains("nums", l)),
        1 => Just(Pred::IsNull("o")),
    ]
}

/// Sort key of the oracle for one order key: NULL as larger than every value (unless asked),
/// NaN above +infinity.
fn order_cmp(a: &Val, b: &Val, order: Order, nulls: Option<Nulls>) -> Ordering {
    let nulls_last = match nulls {
        Some(Nulls::Last) => true,
        Some(Nulls::First) => false,
        None => order == Order::Asc,
    };
    match (matches!(a, Val::Null), matches!(b, Val::Null)) {
        (true, true) => return Ordering::Equal,
        (true, false) => return if nulls_last { Ordering::Greater } else { Ordering::Less },
        (false, true) => return if nulls_last { Ordering::Less } else { Ordering::Greater },
        _ => {}
    }
    let ordering = match (is_nan(a), is_nan(b)) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => cmp(a, b).expect("one kind"),
    };
    if order == Order::Desc { ordering.reverse() } else { ordering }
}

fn order_key() -> impl Strategy<Value = (&'static str, Order, Option<Nulls>)> {
    (
        prop::sample::select(vec!["i", "u", "f", "s", "o", "id"]),
        prop::sample::select(vec![Order::Asc, Order::Desc]),
        prop::option::of(prop::sample::select(vec![Nulls::First, Nulls::Last])),
    )
}

fn key_of((path, order, nulls): &(&'static str, Order, Option<Nulls>)) -> OrderKey {
    let key = OrderKey::new(*path, *order);
    match nulls {
        Some(nulls) => key.nulls(*nulls),
        None => key,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Through indexes and through a scan, each query returns what the oracle says: the rows
    /// whose predicate is TRUE, sorted by the documented order, ties by primary key
    /// ascending, then cut by offset and limit.
    #[test]
    fn typed_queries_match_a_naive_oracle(
        records in prop::collection::vec(record(), 0..30),
        queries in prop::collection::vec(
            (prop::option::of(pred()), prop::collection::vec(order_key(), 0..3), prop::option::of(0usize..5), prop::option::of(0usize..6)),
            1..8,
        ),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let db = tessera::Db::open(dir.path().join("db")).unwrap();
        let ix = db.collection::<Ix>().unwrap();
        let plain = db.collection::<Plain>().unwrap();
        prop_assert!(ix.wait_for_indexes(Duration::from_secs(10)));
        let mut oracle = std::collections::BTreeMap::new();
        db.write(|tx| {
            for r in &records {
                ix.upsert(tx, r)?;
                plain.upsert(tx, &Plain::from(r))?;
            }
            Ok(())
        }).unwrap();
        for r in &records {
            oracle.insert(r.id, r.clone());
        }
        for (predicate, orders, offset, limit) in &queries {
            let mut expected: Vec<&Ix> = oracle.values().filter(|r| predicate.as_ref().is_none_or(|p| p.truth(r) == T3::True)).collect();
            expected.sort_by(|a, b| {
                for (path, order, nulls) in orders {
                    let ordering = order_cmp(&value_of(a, path), &value_of(b, path), *order, *nulls);
                    if ordering != Ordering::Equal {
                        return ordering;
                    }
                }
                a.id.cmp(&b.id)
            });
            let expected: Vec<u32> = expected.iter().skip(offset.unwrap_or(0)).take(limit.unwrap_or(usize::MAX)).map(|r| r.id).collect();
            let (mut q, mut p) = match predicate {
                Some(pred) => (ix.filter(pred.expr()), plain.filter(pred.expr())),
                None => (ix.all(), plain.all()),
            };
            for key in orders {
                q = q.order_by_key(key_of(key));
                p = p.order_by_key(key_of(key));
            }
            if let Some(offset) = offset { q = q.offset(*offset); p = p.offset(*offset); }
            if let Some(limit) = limit { q = q.limit(*limit); p = p.limit(*limit); }
            let plan = q.explain().unwrap().to_string();
            let got: Vec<u32> = q.fetch(&db).unwrap().iter().map(|r| r.id).collect();
            let scanned: Vec<u32> = p.fetch(&db).unwrap().iter().map(|r| r.id).collect();
            prop_assert_eq!(&scanned, &expected, "scan: {:?} {:?} {:?} {:?}", predicate, orders, offset, limit);
            prop_assert_eq!(&got, &expected, "indexed: {:?} {:?} {:?} {:?}\nplan: {}", predicate, orders, offset, limit, plan);
            prop_assert_eq!(q.count(&db).unwrap(), expected.len(), "count: {}", plan);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Exact boundaries (pass): `between`, `>`/`>=` at a value an f64 cannot tell from its neighbour,
// a descending walk with offset and limit, and a unique index on values that encode equal.
// ---------------------------------------------------------------------------------------------

#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "uniq")]
struct Uniq {
    #[record(key)]
    id: u32,
    #[record(unique)]
    f: f64,
}

/// docs/query.md: numbers compare by exact value, `3 = 3.0`, and `-0.0` equals `0.0` to the
/// query language; a unique index orders numbers the same way, so equal values collide.
#[test]
fn unique_index_refuses_values_the_query_language_calls_equal() {
    let dir = tempfile::tempdir().unwrap();
    let db = tessera::Db::open(dir.path().join("db")).unwrap();
    let uniq = db.collection::<Uniq>().unwrap();
    db.write(|tx| uniq.insert(tx, &Uniq { id: 1, f: 0.0 }).map(drop)).unwrap();
    let error = db.write(|tx| uniq.insert(tx, &Uniq { id: 2, f: -0.0 }).map(drop)).unwrap_err();
    assert!(matches!(error, tessera::Error::UniqueViolation { .. }), "{error}");
    // Neighbouring floats are distinct.
    db.write(|tx| uniq.insert(tx, &Uniq { id: 3, f: 5e-324 }).map(drop)).unwrap();
    db.write(|tx| uniq.insert(tx, &Uniq { id: 4, f: -5e-324 }).map(drop)).unwrap();
    let ids: Vec<u32> = uniq.all().order_by("f", Order::Desc).fetch(&db).unwrap().iter().map(|r| r.id).collect();
    assert_eq!(ids, [3, 1, 4]);
}

#[test]
fn descending_walks_with_offset_and_limit_at_exact_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let db = tessera::Db::open(dir.path().join("db")).unwrap();
    let ix = db.collection::<Ix>().unwrap();
    assert!(ix.wait_for_indexes(Duration::from_secs(10)));
    let base = Ix { id: 0, i: 0, u: 0, f: 0.0, s: String::new(), o: None, tags: vec![], nums: vec![] };
    let values = [u64::MAX, u64::MAX - 1, u64::MAX - 1, 1 << 63, (1 << 63) + 1, i64::MAX as u64, 0];
    db.write(|tx| {
        for (id, u) in values.iter().enumerate() {
            ix.insert(tx, &Ix { id: id as u32, u: *u, ..base.clone() })?;
        }
        Ok(())
    })
    .unwrap();
    let ids = |q: tessera::collection::Query<Ix>| q.fetch(&db).unwrap().iter().map(|r| r.id).collect::<Vec<_>>();
    // Order u desc: MAX (0), MAX-1 (1, 2: ties by id ascending), 2^63+1 (4), 2^63 (3), i64::MAX (5), 0 (6).
    assert_eq!(ids(ix.all().order_by("u", Order::Desc)), [0, 1, 2, 4, 3, 5, 6]);
    assert_eq!(ids(ix.all().order_by("u", Order::Desc).offset(2).limit(2)), [2, 4]);
    assert_eq!(ids(ix.filter(field("u").gt(u64::MAX - 1)).order_by("u", Order::Desc)), [0]);
    assert_eq!(ids(ix.filter(field("u").ge(u64::MAX - 1)).order_by("u", Order::Desc)), [0, 1, 2]);
    assert_eq!(ids(ix.filter(field("u").between(1u64 << 63, (1u64 << 63) + 1)).order_by("u", Order::Asc)), [3, 4]);
    // 2^63 as a float equals the integer 2^63 exactly, and is below 2^63 + 1.
    assert_eq!(ids(ix.filter(field("u").eq(9223372036854775808.0))), [3]);
    assert_eq!(ids(ix.filter(field("u").gt(9223372036854775808.0))), [0, 1, 2, 4]);
    // An empty range (low above high), on the key and on an index, forwards and backwards.
    assert_eq!(ids(ix.filter(field("u").between(5u64, 2u64)).order_by("u", Order::Desc)), Vec::<u32>::new());
    assert_eq!(ids(ix.filter(field("id").between(5, 2)).order_by("id", Order::Desc)), Vec::<u32>::new());
    assert_eq!(ids(ix.filter(field("id").gt(4).and(field("id").lt(2))).order_by("id", Order::Desc)), Vec::<u32>::new());
}

// ---------------------------------------------------------------------------------------------
// Defect (failed before its fix): a dynamic collection keyed by one `f64` field stores `-0.0` and `0.0` as two
// keys (store/key.rs encodes f64 parts by `total_cmp`; KeyKind::F64.encode passes `-0.0`
// through), although the query language calls them equal (docs/query.md: numbers compare by
// exact value; sort_key.rs: "-0.0 and 0.0 are equal to the query language; the key must
// agree") and the Python package documents "a `float` key is one key for `-0.0` and `0.0`"
// (README.md:246, done only in python/src/encode.rs:337). So `get(0)` answers Ok(None) for a
// record that `id = 0` finds, and a second insert at `0.0` succeeds beside `-0.0` instead of
// being `DuplicateKey`. Correct: one key (write `-0.0` as `0.0` in KeyKind::encode for float
// kinds, as the Python layer does).
// ---------------------------------------------------------------------------------------------
#[test]
fn float_key_negative_zero_is_a_second_key_that_get_cannot_find() {
    let schema = DynSchema {
        version: 1,
        key_fields: vec!["id".into()],
        key_kinds: vec![KeyKind::F64],
        shape: TypeDesc::Struct(vec![("id".into(), TypeDesc::Float), ("n".into(), TypeDesc::Int)]),
        indexes: vec![],
    };
    let dir = tempfile::tempdir().unwrap();
    let db = tessera::Db::open(dir.path().join("db")).unwrap();
    let readings = db.create_dyn_collection("readings", &schema).unwrap();
    db.write(|tx| readings.insert_json(tx, br#"{"id": -0.0, "n": 1}"#).map(drop)).unwrap();
    let found = readings.filter_text("id = 0").unwrap().fetch(&db).unwrap();
    assert_eq!(found.len(), 1, "the query finds the record keyed -0.0");
    let got = readings.get_json(&db, "0").unwrap();
    let second = db.write(|tx| readings.insert_json(tx, br#"{"id": 0.0, "n": 2}"#).map(drop));
    let count = readings.all().count(&db).unwrap();
    assert!(
        got.is_some() && second.is_err() && count == 1,
        "get(0) found: {}; second insert at 0.0: {:?}; records: {count}",
        got.is_some(),
        second
    );
}
