//! Composite primary keys: equality on a leading run of key fields, and a range on the next,
//! is read as one primary-key range (or one lookup), never a full scan; results equal a naive
//! filter on random records and random conjunctions.

use proptest::prelude::*;
use tessera::collection::{Access, Record};
use tessera::query::{CompareOp, Expr};

#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "events")]
struct Event {
    #[record(key)]
    group: u8,
    #[record(key)]
    seq: i32,
    #[record(key)]
    name: String,
    payload: u32,
}

/// One comparison on a key field: (field index, operator, value as i64 or string).
#[derive(Debug, Clone)]
enum Condition {
    Group(CompareOp, u8),
    Seq(CompareOp, i32),
    Name(CompareOp, String),
    SeqBetween(i32, i32),
}

fn op() -> impl Strategy<Value = CompareOp> {
    prop_oneof![
        Just(CompareOp::Eq),
        Just(CompareOp::Eq),
        Just(CompareOp::Lt),
        Just(CompareOp::Le),
        Just(CompareOp::Gt),
        Just(CompareOp::Ge),
        Just(CompareOp::Ne)
    ]
}

fn condition() -> impl Strategy<Value = Condition> {
    prop_oneof![
        (op(), 0u8..4).prop_map(|(op, v)| Condition::Group(op, v)),
        (op(), -3i32..4).prop_map(|(op, v)| Condition::Seq(op, v)),
        (op(), "[a-c]{0,2}").prop_map(|(op, v)| Condition::Name(op, v)),
        (-3i32..4, -3i32..4).prop_map(|(a, b)| Condition::SeqBetween(a, b)),
    ]
}

fn holds<T: PartialOrd>(a: &T, op: CompareOp, b: &T) -> bool {
    match op {
        CompareOp::Eq => a == b,
        CompareOp::Ne => a != b,
        CompareOp::Lt => a < b,
        CompareOp::Le => a <= b,
        CompareOp::Gt => a > b,
        CompareOp::Ge => a >= b,
    }
}

impl Condition {
    fn expr(&self) -> Expr {
        use tessera::query::field;
        let compare = |path: &str, op: CompareOp, value: Expr| Expr::Compare(Box::new(field(path)), op, Box::new(value));
        match self {
            Condition::Group(op, v) => compare("group", *op, Expr::from(*v as i64)),
            Condition::Seq(op, v) => compare("seq", *op, Expr::from(*v as i64)),
            Condition::Name(op, v) => compare("name", *op, Expr::from(v.as_str())),
            Condition::SeqBetween(a, b) => field("seq").between(*a as i64, *b as i64),
        }
    }

    fn matches(&self, event: &Event) -> bool {
        match self {
            Condition::Group(op, v) => holds(&event.group, *op, v),
            Condition::Seq(op, v) => holds(&event.seq, *op, v),
            Condition::Name(op, v) => holds(&event.name, *op, v),
            Condition::SeqBetween(a, b) => event.seq >= *a && event.seq <= *b,
        }
    }
}

fn events() -> Vec<Event> {
    let mut events = Vec::new();
    for group in 0..4u8 {
        for seq in -3..4 {
            for name in ["", "a", "ab", "b", "c"] {
                events.push(Event { group, seq, name: name.into(), payload: events.len() as u32 });
            }
        }
    }
    events
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn composite_key_queries_match_a_naive_filter(conditions in prop::collection::vec(condition(), 1..4)) {
        let dir = tempfile::tempdir().unwrap();
        let db = tessera::Db::open(dir.path().join("db")).unwrap();
        let collection = db.collection::<Event>().unwrap();
        let all = events();
        db.write(|tx| all.iter().try_for_each(|event| collection.insert(tx, event).map(drop))).unwrap();
        let predicate = conditions.iter().map(Condition::expr).reduce(Expr::and).unwrap();
        let query = collection.filter(predicate);
        let expected: Vec<Event> = all.iter().filter(|event| conditions.iter().all(|c| c.matches(event))).cloned().collect();
        prop_assert_eq!(query.fetch(&db).unwrap(), expected);
        // Equality on the first key field is never a full scan.
        if conditions.iter().any(|c| matches!(c, Condition::Group(CompareOp::Eq, _))) {
            let plan = query.explain().unwrap();
            prop_assert!(!matches!(plan.access, Access::Scan), "{}", plan);
        }
    }
}

#[test]
fn leading_equalities_and_a_range_are_one_key_range() {
    let dir = tempfile::tempdir().unwrap();
    let db = tessera::Db::open(dir.path().join("db")).unwrap();
    let collection = db.collection::<Event>().unwrap();
    db.write(|tx| events().iter().try_for_each(|event| collection.insert(tx, event).map(drop))).unwrap();
    let query = collection.filter(Event::group().eq(2).and(Event::seq().ge(0)).and(Event::seq().lt(2)));
    assert!(matches!(query.explain().unwrap().access, Access::KeyRange(..)), "{}", query.explain().unwrap());
    let seqs: Vec<i32> = query.fetch(&db).unwrap().iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]);
    let exact = collection.filter(Event::name().eq("ab").and(Event::seq().eq(-1)).and(Event::group().eq(3)));
    assert!(matches!(exact.explain().unwrap().access, Access::Keys(ref keys) if keys.len() == 1));
    assert_eq!(exact.fetch(&db).unwrap().len(), 1);
}

/// `KeyLiteral::encode_literal` for strings encodes in place what `from_literal` then
/// `encode_key` encode, zero bytes and all, and refuses what `from_literal` refuses.
#[test]
fn a_string_literal_encodes_in_place_as_its_converted_value_does() {
    use tessera::collection::KeyLiteral;
    use tessera::query::Literal;
    use tessera::store::key::KeyPart;
    for text in ["", "a", "\0", "a\0b\0", "\0\u{1}\u{ff}", "naïve ✓", &"x\0".repeat(300)] {
        let literal = Literal::Str(text.to_owned());
        let (mut in_place, mut converted) = (vec![9u8], vec![9u8]);
        assert!(String::encode_literal(&literal, &mut in_place));
        String::from_literal(&literal).expect("a string").encode_key(&mut converted);
        assert_eq!(in_place, converted, "{text:?}");
    }
    let mut untouched = vec![1u8];
    assert!(!String::encode_literal(&Literal::Int(1), &mut untouched));
    assert_eq!(untouched, [1]);
}
