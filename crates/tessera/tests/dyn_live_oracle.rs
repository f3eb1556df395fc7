//! An oracle for live queries on dynamic collections (issue 18): dynamic subscriptions are
//! kept by the incremental engine typed ones use, so each changeset must, applied to the
//! result before it, give what a fresh dynamic query returns.
//!
//! A property test draws dynamic subscriptions (filters on integers, strings, NULLs, `or`
//! and `not`; `order by` up to three keys, ascending or descending, NULLs first or last;
//! `offset` and `limit`) and a sequence of transactions of inserts, upserts and deletes,
//! each written through the typed API or the dynamic one. After every commit it waits until
//! the commit went through the live engine (the feed runs its hooks before its listeners),
//! reads each subscription's deliveries and applies them (deletions, insertions and moves
//! by index, modifications taking their new values): the rebuilt result must equal the
//! delivered one and a fresh dynamic fetch. A typed subscription beside them must follow
//! the dynamic writes too. Cases: `PROPTEST_CASES` (by default 96).

use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use tessera::collection::{DynCollection, DynQuery, DynRecord, Nulls, Order, Record};
use tessera::live::{Event, ObjectChange};
use tessera::query::{Expr, OrderKey, field};
use tessera::store::Keyspace;
use tessera::value::{Doc, from_json};
use tessera::{ChangeStream, Collection, Db, DbOptions, Durability, FeedEvent, QuerySubscription, ResultChange};

/// How long the feed may take to hand a commit to its listeners before the test gives up.
const FEED_WAIT: Duration = Duration::from_secs(30);
/// Cases when `PROPTEST_CASES` is not set.
const CASES_DEFAULT: u32 = 96;

#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "dyn_live_rows")]
struct Row {
    #[record(key)]
    id: u16,
    #[record(index)]
    rank: Option<i32>,
    name: String,
    score: i64,
    group: Option<String>,
}

const NAMES: [&str; 4] = ["ada", "bob", "cy", "dee"];
const GROUPS: [Option<&str>; 3] = [None, Some("x"), Some("y")];

fn row() -> impl Strategy<Value = Row> {
    (0u16..12, prop::option::of(-3i32..4), 0usize..4, -2i64..3, 0usize..3).prop_map(|(id, rank, name, score, group)| Row {
        id,
        rank,
        name: NAMES[name].to_owned(),
        score,
        group: GROUPS[group].map(str::to_owned),
    })
}

#[derive(Debug, Clone)]
enum Op {
    Upsert(Row),
    Delete(u16),
}

/// One transaction: its operations, written through the dynamic API or the typed one.
#[derive(Debug, Clone)]
struct Txn {
    ops: Vec<Op>,
    dynamic: bool,
}

fn txn() -> impl Strategy<Value = Txn> {
    let op = prop_oneof![3 => row().prop_map(Op::Upsert), 1 => (0u16..12).prop_map(Op::Delete)];
    (prop::collection::vec(op, 1..6), any::<bool>()).prop_map(|(ops, dynamic)| Txn { ops, dynamic })
}

#[derive(Debug, Clone)]
enum Leaf {
    RankAbove(i32),
    RankIsNull,
    NameIs(usize),
    ScoreBelow(i64),
    GroupIs(usize),
}

impl Leaf {
    fn expr(&self) -> Expr {
        match self {
            Leaf::RankAbove(n) => field("rank").gt(*n),
            Leaf::RankIsNull => field("rank").is_null(),
            Leaf::NameIs(i) => field("name").eq(NAMES[*i]),
            Leaf::ScoreBelow(n) => field("score").lt(*n),
            Leaf::GroupIs(i) => match GROUPS[*i] {
                Some(group) => field("group").eq(group),
                None => field("group").is_null(),
            },
        }
    }
}

#[derive(Debug, Clone)]
enum Pred {
    Leaf(Leaf),
    And(Box<Pred>, Box<Pred>),
    Or(Box<Pred>, Box<Pred>),
    Not(Box<Pred>),
}

impl Pred {
    fn expr(&self) -> Expr {
        match self {
            Pred::Leaf(leaf) => leaf.expr(),
            Pred::And(a, b) => a.expr().and(b.expr()),
            Pred::Or(a, b) => a.expr().or(b.expr()),
            Pred::Not(a) => !a.expr(),
        }
    }
}

fn pred() -> impl Strategy<Value = Pred> {
    let leaf = prop_oneof![
        (-3i32..4).prop_map(Leaf::RankAbove),
        Just(Leaf::RankIsNull),
        (0usize..4).prop_map(Leaf::NameIs),
        (-2i64..3).prop_map(Leaf::ScoreBelow),
        (0usize..3).prop_map(Leaf::GroupIs),
    ];
    leaf.prop_map(Pred::Leaf).prop_recursive(2, 6, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| Pred::And(Box::new(a), Box::new(b))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| Pred::Or(Box::new(a), Box::new(b))),
            inner.prop_map(|a| Pred::Not(Box::new(a))),
        ]
    })
}

/// A dynamic subscription's query.
#[derive(Debug, Clone)]
struct Spec {
    predicate: Option<Pred>,
    orders: Vec<(usize, bool, Option<bool>)>,
    offset: usize,
    limit: Option<usize>,
}

const ORDER_FIELDS: [&str; 4] = ["rank", "name", "score", "group"];

fn spec() -> impl Strategy<Value = Spec> {
    let order = (0usize..4, any::<bool>(), prop::option::of(any::<bool>()));
    (prop::option::of(pred()), prop::collection::vec(order, 0..4), 0usize..3, prop::option::of(1usize..5))
        .prop_map(|(predicate, orders, offset, limit)| Spec { predicate, orders, offset, limit })
}

fn query_of(rows: &DynCollection, spec: &Spec) -> DynQuery {
    let mut query = match &spec.predicate {
        Some(predicate) => rows.filter(predicate.expr()).unwrap(),
        None => rows.all(),
    };
    for (field, descending, nulls_last) in &spec.orders {
        let mut key = OrderKey::new(ORDER_FIELDS[*field], if *descending { Order::Desc } else { Order::Asc });
        if let Some(last) = nulls_last {
            key = key.nulls(if *last { Nulls::Last } else { Nulls::First });
        }
        query = query.order_by_key(key).unwrap();
    }
    query = query.offset(spec.offset);
    match spec.limit {
        Some(limit) => query.limit(limit),
        None => query,
    }
}

struct Store {
    db: Db,
    typed: Collection<Row>,
    rows: DynCollection,
    /// Written by every transaction, so that each commits a batch to wait for (one that
    /// changes no record would not).
    tick: Keyspace,
    feed: ChangeStream,
}

impl Store {
    fn open(dir: &tempfile::TempDir) -> Store {
        let db = Db::open_with(dir.path().join("db"), DbOptions { durability: Durability::BUFFERED, ..DbOptions::default() }).unwrap();
        let typed = db.collection::<Row>().unwrap();
        let rows = db.dyn_collection("dyn_live_rows").unwrap();
        let tick = db.keyspace("dyn_live_tick").unwrap();
        let feed = db.subscribe().unwrap();
        Store { db, typed, rows, tick, feed }
    }

    /// Commits `txn` and waits until the commit has gone through the live engine.
    fn commit(&self, txn: &Txn) {
        let sequence = self
            .db
            .write(|tx| {
                let ticks = tx.sequence().to_be_bytes();
                tx.put(&self.tick, b"tick", &ticks)?;
                for op in &txn.ops {
                    match (op, txn.dynamic) {
                        (Op::Upsert(row), false) => {
                            self.typed.upsert(tx, row)?;
                        }
                        (Op::Upsert(row), true) => {
                            self.rows.upsert_json(tx, serde_json::to_string(row).unwrap().as_bytes())?;
                        }
                        (Op::Delete(id), false) => {
                            self.typed.delete(tx, id)?;
                        }
                        (Op::Delete(id), true) => {
                            let key = from_json(id.to_string().as_bytes()).unwrap();
                            self.rows.delete(tx, Doc::from_untrusted(&key)?.root())?;
                        }
                    }
                }
                Ok(tx.sequence())
            })
            .unwrap();
        loop {
            match self.feed.recv_timeout(FEED_WAIT) {
                Some(FeedEvent::Batch(batch)) if batch.sequence == sequence => return,
                Some(FeedEvent::Batch(batch)) => assert!(batch.sequence < sequence),
                Some(FeedEvent::Lagged { missed }) => panic!("the feed dropped {missed} batches"),
                None => panic!("commit {sequence} never reached the feed"),
            }
        }
    }
}

/// Applies `change` to `previous` as a list view does (deletions and move sources leave,
/// insertions and move targets take their places, modifications take their new values);
/// the rebuilt result, or what is inconsistent.
fn apply<T: Clone + PartialEq + std::fmt::Debug>(
    previous: &[T],
    change: &ResultChange<T>,
    id: impl Fn(&T) -> Vec<u8>,
) -> Result<Vec<T>, String> {
    let new_len = change.result.len();
    let mut leaving = vec![false; previous.len()];
    for &index in change.deletions.iter().chain(change.moves.iter().map(|(from, _)| from)) {
        let slot = leaving.get_mut(index).ok_or(format!("old index {index} out of {}", previous.len()))?;
        if std::mem::replace(slot, true) {
            return Err(format!("old index {index} deleted or moved twice"));
        }
    }
    let mut slots: Vec<Option<T>> = vec![None; new_len];
    let targets = change.moves.iter().map(|(from, to)| (*to, previous[*from].clone()));
    let inserted = change.insertions.iter().map(|&index| (index, change.result.get(index).map(|value| (**value).clone())));
    for (index, value) in targets.map(|(to, value)| (to, Some(value))).chain(inserted) {
        let value = value.ok_or(format!("insertion at {index} out of {new_len}"))?;
        match slots.get_mut(index) {
            Some(slot @ None) => *slot = Some(value),
            _ => return Err(format!("new index {index} out of {new_len} or filled twice")),
        }
    }
    let mut staying = previous.iter().zip(&leaving).filter(|(_, leaving)| !**leaving).map(|(value, _)| value.clone());
    let mut rebuilt = Vec::with_capacity(new_len);
    for slot in slots {
        rebuilt.push(slot.or_else(|| staying.next()).ok_or("fewer records stayed than places")?);
    }
    if staying.next().is_some() {
        return Err("more records stayed than places".into());
    }
    for &index in &change.modifications {
        let new = change.result.get(index).ok_or(format!("modification at {index} out of {new_len}"))?;
        if id(&rebuilt[index]) != id(new) {
            return Err(format!("modification at {index} names another record"));
        }
        rebuilt[index] = (**new).clone();
    }
    Ok(rebuilt)
}

/// Reads every waiting delivery of `live` into `seen` (the result rebuilt from them); checks
/// each against the result it says it is.
fn follow<T: Clone + PartialEq + std::fmt::Debug>(
    live: &QuerySubscription<T>,
    seen: &mut Option<Vec<T>>,
    id: impl Fn(&T) -> Vec<u8> + Copy,
) -> Result<(), String> {
    while let Some(event) = live.try_recv() {
        match event {
            Event::Initial(result) if seen.is_none() => *seen = Some(result.iter().map(|value| (**value).clone()).collect()),
            Event::Changed(change) => {
                let previous = seen.as_ref().ok_or("a change before the initial result")?;
                let rebuilt = apply(previous, &change, id)?;
                let delivered: Vec<T> = change.result.iter().map(|value| (**value).clone()).collect();
                if rebuilt != delivered {
                    return Err(format!("the changeset applied gives {rebuilt:?}, the delivery holds {delivered:?}"));
                }
                *seen = Some(rebuilt);
            }
            other => return Err(format!("unexpected {other:?}")),
        }
    }
    Ok(())
}

fn run_case(specs: &[Spec], txns: &[Txn]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir);
    let queries: Vec<DynQuery> = specs.iter().map(|spec| query_of(&store.rows, spec)).collect();
    let lives: Vec<QuerySubscription<DynRecord>> = queries.iter().map(|query| query.subscribe().unwrap()).collect();
    let mut seen: Vec<Option<Vec<DynRecord>>> = vec![None; lives.len()];
    let typed_query = store.typed.all().order_by(Row::rank(), Order::Desc).limit(4);
    let typed_live = store.typed.subscribe_query(&typed_query).unwrap();
    let mut typed_seen: Option<Vec<Row>> = None;
    let dyn_id = |record: &DynRecord| record.key_bytes().to_vec();
    for (step, txn) in txns.iter().enumerate() {
        store.commit(txn);
        for (index, live) in lives.iter().enumerate() {
            let context = || format!("subscription {:?} after transaction {step} {txn:?}", specs[index]);
            follow(live, &mut seen[index], dyn_id).map_err(|problem| TestCaseError::fail(format!("{problem}\n{}", context())))?;
            let fresh = queries[index].fetch(&store.db).unwrap();
            prop_assert_eq!(seen[index].as_ref(), Some(&fresh), "the delivered result is not a fresh fetch\n{}", context());
        }
        follow(&typed_live, &mut typed_seen, |row: &Row| row.id.to_be_bytes().to_vec()).map_err(TestCaseError::fail)?;
        prop_assert_eq!(typed_seen.as_ref(), Some(&typed_query.fetch(&store.db).unwrap()), "the typed subscription");
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|cases| cases.parse().ok()).unwrap_or(CASES_DEFAULT)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn dynamic_changesets_applied_to_the_previous_result_equal_a_fresh_dynamic_query(
        specs in prop::collection::vec(spec(), 1..6),
        txns in prop::collection::vec(txn(), 1..12),
    ) {
        run_case(&specs, &txns)?;
    }
}

fn json_key(text: &str) -> Vec<u8> {
    from_json(text.as_bytes()).unwrap()
}

#[test]
fn a_dynamic_subscription_sees_typed_writes_and_a_typed_one_sees_dynamic_writes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir);
    let wait = Duration::from_secs(10);
    let dynamic = store.rows.filter(field("score").gt(0)).unwrap().subscribe().unwrap();
    let typed = store.typed.subscribe_query(&store.typed.filter(Row::score().gt(0))).unwrap();
    let key = json_key("7");
    let object = store.rows.subscribe_object(Doc::from_untrusted(&key).unwrap().root()).unwrap();
    assert!(dynamic.recv_timeout(wait).and_then(Event::initial).unwrap().is_empty());
    assert!(typed.recv_timeout(wait).and_then(Event::initial).unwrap().is_empty());
    assert!(matches!(object.recv_timeout(wait), Some(Event::Initial(None))));

    let row = Row { id: 7, rank: None, name: "ada".into(), score: 2, group: None };
    store.commit(&Txn { ops: vec![Op::Upsert(row.clone())], dynamic: false });
    let change = dynamic.recv_timeout(wait).and_then(Event::changed).expect("the dynamic subscription sees the typed write");
    assert_eq!(change.insertions, [0]);
    assert_eq!(change.result[0].to_json(), r#"{"id":7,"rank":null,"name":"ada","score":2,"group":null}"#);
    assert_eq!(typed.recv_timeout(wait).and_then(Event::changed).unwrap().result[0].as_ref(), &row);
    match object.recv_timeout(wait).and_then(Event::changed) {
        Some(ObjectChange::Updated(record)) => assert_eq!(record.to_json(), change.result[0].to_json()),
        other => panic!("expected the object's new value, got {other:?}"),
    }

    let changed = Row { score: 5, group: Some("x".into()), ..row };
    store.commit(&Txn { ops: vec![Op::Upsert(changed.clone())], dynamic: true });
    let typed_change = typed.recv_timeout(wait).and_then(Event::changed).expect("the typed subscription sees the dynamic write");
    assert_eq!((typed_change.modifications.as_slice(), typed_change.result[0].as_ref()), (&[0][..], &changed));
    let dynamic_change = dynamic.recv_timeout(wait).and_then(Event::changed).unwrap();
    assert_eq!(dynamic_change.modifications, [0]);
    assert!(
        matches!(object.recv_timeout(wait).and_then(Event::changed), Some(ObjectChange::Updated(record)) if record.to_json().contains(r#""score":5"#))
    );

    store.commit(&Txn { ops: vec![Op::Delete(7)], dynamic: true });
    assert_eq!(typed.recv_timeout(wait).and_then(Event::changed).unwrap().deletions, [0]);
    assert_eq!(dynamic.recv_timeout(wait).and_then(Event::changed).unwrap().deletions, [0]);
    assert!(matches!(object.recv_timeout(wait).and_then(Event::changed), Some(ObjectChange::Deleted)));
    assert!(dynamic.try_recv().is_none() && typed.try_recv().is_none() && object.try_recv().is_none(), "one delivery per commit");
}

#[test]
fn a_dynamic_object_subscription_refuses_a_key_of_the_wrong_type() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir);
    let key = json_key(r#""seven""#);
    let error = store.rows.subscribe_object(Doc::from_untrusted(&key).unwrap().root()).unwrap_err();
    assert!(matches!(&error, tessera::Error::SchemaViolation { collection, .. } if collection == "dyn_live_rows"), "{error}");
}
