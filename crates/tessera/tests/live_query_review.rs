//! Adversarial review of live query subscriptions (the general engine's path, not queries by
//! key): each delivered changeset, applied to the result before it, must give the delivered
//! result, and that must equal a fresh query after every commit.

use std::time::Duration;
use tessera::collection::{DynCollection, DynSchema, KeyKind, TypeDesc};
use tessera::live::Event;
use tessera::query::{Expr, field};
use tessera::value::{Doc, from_json};
use tessera::{Db, DbOptions, Durability, QuerySubscription, ResultChange};

const WAIT: Duration = Duration::from_secs(10);

fn open() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = open_in(&dir);
    (dir, db)
}

/// A database in `dir`, its commits flushed in the background (the tests' speed).
fn open_in(dir: &tempfile::TempDir) -> Db {
    Db::open_with(dir.path().join("db"), DbOptions { durability: Durability::BUFFERED, ..DbOptions::default() }).unwrap()
}

/// A dynamic collection `anys` keyed by `id`, with a field `tag` of any type and an integer
/// `n` of any width.
fn anys(db: &Db) -> DynCollection {
    let schema = DynSchema {
        version: 1,
        key_fields: vec!["id".into()],
        key_kinds: vec![KeyKind::U32],
        shape: TypeDesc::Struct(vec![("id".into(), TypeDesc::Int), ("tag".into(), TypeDesc::Any), ("n".into(), TypeDesc::Int)]),
        indexes: Vec::new(),
    };
    db.create_dyn_collection("anys", &schema).unwrap()
}

fn ids_of_json<'a>(records: impl IntoIterator<Item = &'a str>) -> Vec<u64> {
    records
        .into_iter()
        .map(|json| {
            let bytes = from_json(json.as_bytes()).unwrap();
            Doc::from_untrusted(&bytes).unwrap().root().get("id").and_then(|id| id.as_u64()).unwrap()
        })
        .collect()
}

/// The ids of a dynamic subscription's next delivery (its initial result or a change's).
fn next_dyn_ids(live: &QuerySubscription<tessera::collection::DynRecord>) -> Option<Vec<u64>> {
    let result = match live.recv_timeout(WAIT)? {
        Event::Initial(result) => result,
        Event::Changed(ResultChange { result, .. }) => result,
        Event::Closed(end) => panic!("ended: {end:?}"),
    };
    let json: Vec<String> = result.iter().map(|record| record.to_json()).collect();
    Some(ids_of_json(json.iter().map(String::as_str)))
}

#[test]
fn a_string_test_on_a_field_of_any_type_does_not_match_a_one_entry_map() {
    // Before: the matcher took `tag == "a"` (and `tag > "a"`, `starts_with`, `in`) on a field
    // of any type as exact, and a one-entry map `{"a": 1}` has the sort-key component of the
    // string "a": the live result held records a query does not return.
    let (_dir, db) = open();
    let anys = anys(&db);
    let predicates: Vec<(&str, Expr)> = vec![
        ("eq", field("tag").eq("a")),
        ("in", field("tag").is_in(["a", "zz"])),
        ("gt", field("tag").gt("0")),
        ("starts_with", field("tag").starts_with("a")),
    ];
    let subscriptions: Vec<_> = predicates
        .iter()
        .map(|(name, predicate)| {
            let live = anys.filter(predicate.clone()).unwrap().subscribe().unwrap();
            assert_eq!(next_dyn_ids(&live), Some(vec![]), "{name}: initial");
            (name, predicate, live)
        })
        .collect();
    db.write(|tx| {
        anys.insert_json(tx, br#"{"id": 1, "tag": {"a": 1}, "n": 0}"#)?;
        anys.insert_json(tx, br#"{"id": 2, "tag": "a", "n": 0}"#)?;
        anys.insert_json(tx, br#"{"id": 3, "tag": {"ab": [1]}, "n": 0}"#)
    })
    .unwrap();
    let mut wrong = Vec::new();
    for (name, predicate, live) in &subscriptions {
        let fetched: Vec<String> = anys.filter((*predicate).clone()).unwrap().fetch(&db).unwrap().iter().map(|r| r.to_json()).collect();
        let fetched = ids_of_json(fetched.iter().map(String::as_str));
        assert_eq!(fetched, [2], "{name}: a query matches only the string");
        let delivered = next_dyn_ids(live);
        if delivered.as_ref() != Some(&fetched) {
            wrong.push(format!("{name}: delivered {delivered:?}, a query returns {fetched:?}"));
        }
    }
    assert!(wrong.is_empty(), "the live result differs from the query's: {wrong:#?}");
}

// ---------------------------------------------------------------------------------------------
// A property test on a dynamic collection whose field `tag` is of any type (strings, numbers,
// booleans, null, missing, lists and maps of one entry or more) and whose field `n` is an
// integer of any width: random predicates (every comparison, `in`, `between`, string tests,
// NULL tests, `is`, `contains`, `and`/`or`/`not`), orders, offsets and limits, against random
// transactions. The matcher's exact anchors and the sort keys meet values of every kind here,
// where the other oracles have typed fields only.

mod any_field {
    use super::*;
    use proptest::prelude::*;
    use tessera::collection::{DynQuery, DynRecord, Nulls, Order};
    use tessera::query::{CompareOp, Literal, OrderKey};
    use tessera::store::Keyspace;
    use tessera::{ChangeStream, FeedEvent};

    const TAGS: [&str; 20] = [
        r#""a""#,
        r#""ab""#,
        r#""b""#,
        r#""""#,
        r#"{"a": 1}"#,
        r#"{"ab": 2}"#,
        r#"{"b": null}"#,
        r#"{"a": 1, "b": 2}"#,
        "{}",
        "[1]",
        r#"["a"]"#,
        "[]",
        "1",
        "-1",
        "2.5",
        "9007199254740993",
        "18446744073709551615",
        "true",
        "false",
        "null",
    ];
    const NS: [&str; 6] = ["-1", "0", "1", "9007199254740993", "18446744073709551615", "-9223372036854775808"];

    fn literals() -> Vec<Literal> {
        vec![
            Literal::Str("a".into()),
            Literal::Str("ab".into()),
            Literal::Str("".into()),
            Literal::Int(1),
            Literal::Int(-1),
            Literal::Int(9_007_199_254_740_993),
            Literal::UInt(u64::MAX),
            Literal::Float(2.5),
            Literal::Float(f64::NAN),
            Literal::Bool(true),
            Literal::Null,
        ]
    }

    #[derive(Debug, Clone)]
    enum Leaf {
        Compare(&'static str, CompareOp, Literal),
        In(&'static str, Vec<Literal>),
        Between(&'static str, Literal, Literal),
        StartsWith(&'static str),
        EndsWith(&'static str),
        Null(&'static str, bool),
        Variant(&'static str),
        Contains(Literal),
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
                Pred::Leaf(leaf) => match leaf {
                    Leaf::Compare(path, op, literal) => Expr::Compare(Box::new(field(path)), *op, Box::new(Expr::Literal(literal.clone()))),
                    Leaf::In(path, list) => field(path).is_in(list.clone()),
                    Leaf::Between(path, low, high) => field(path).between(Expr::Literal(low.clone()), Expr::Literal(high.clone())),
                    Leaf::StartsWith(prefix) => field("tag").starts_with(prefix),
                    Leaf::EndsWith(suffix) => field("tag").ends_with(suffix),
                    Leaf::Null(path, negated) => {
                        if *negated {
                            field(path).is_not_null()
                        } else {
                            field(path).is_null()
                        }
                    }
                    Leaf::Variant(variant) => field("tag").is_variant(variant),
                    Leaf::Contains(literal) => field("tag").contains(literal.clone()),
                },
                Pred::And(a, b) => a.expr().and(b.expr()),
                Pred::Or(a, b) => a.expr().or(b.expr()),
                Pred::Not(a) => !a.expr(),
            }
        }
    }

    fn path() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec!["tag", "n"])
    }

    fn literal() -> impl Strategy<Value = Literal> {
        prop::sample::select(literals())
    }

    fn leaf() -> impl Strategy<Value = Leaf> {
        let op = prop::sample::select(vec![CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ge]);
        prop_oneof![
            6 => (path(), op, literal()).prop_map(|(p, o, l)| Leaf::Compare(p, o, l)),
            2 => (path(), prop::collection::vec(literal(), 1..4)).prop_map(|(p, l)| Leaf::In(p, l)),
            2 => (path(), literal(), literal()).prop_map(|(p, a, b)| Leaf::Between(p, a, b)),
            2 => prop::sample::select(vec!["", "a", "ab"]).prop_map(Leaf::StartsWith),
            1 => prop::sample::select(vec!["", "b"]).prop_map(Leaf::EndsWith),
            2 => (path(), any::<bool>()).prop_map(|(p, n)| Leaf::Null(p, n)),
            2 => prop::sample::select(vec!["a", "ab", "b"]).prop_map(Leaf::Variant),
            1 => literal().prop_map(Leaf::Contains),
        ]
    }

    fn pred() -> impl Strategy<Value = Pred> {
        leaf().prop_map(Pred::Leaf).prop_recursive(2, 6, 2, |inner| {
            prop_oneof![
                3 => (inner.clone(), inner.clone()).prop_map(|(a, b)| Pred::And(Box::new(a), Box::new(b))),
                2 => (inner.clone(), inner.clone()).prop_map(|(a, b)| Pred::Or(Box::new(a), Box::new(b))),
                1 => inner.prop_map(|a| Pred::Not(Box::new(a))),
            ]
        })
    }

    #[derive(Debug, Clone)]
    pub(super) struct Spec {
        pred: Option<Pred>,
        orders: Vec<(&'static str, bool, Option<bool>)>,
        offset: usize,
        limit: Option<usize>,
    }

    fn spec() -> impl Strategy<Value = Spec> {
        let order = (path(), any::<bool>(), prop::option::of(any::<bool>()));
        (
            prop::option::weighted(0.9, pred()),
            prop::collection::vec(order, 0..3),
            prop_oneof![3 => Just(0usize), 1 => 1..3usize],
            prop::option::weighted(0.5, 1..5usize),
        )
            .prop_map(|(pred, orders, offset, limit)| Spec { pred, orders, offset, limit })
    }

    fn query_of(anys: &DynCollection, spec: &Spec) -> DynQuery {
        let mut query = match &spec.pred {
            // `n` compared with a string or a boolean is refused when typed: no predicate then.
            Some(pred) => match anys.filter(pred.expr()) {
                Err(tessera::Error::Query(_)) => anys.all(),
                other => other.unwrap(),
            },
            None => anys.all(),
        };
        for (path, descending, nulls_last) in &spec.orders {
            let mut key = OrderKey::new(*path, if *descending { Order::Desc } else { Order::Asc });
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

    #[derive(Debug, Clone)]
    enum Op {
        /// id, tag (an index into `TAGS`, or missing), n.
        Upsert(u8, Option<usize>, usize),
        Delete(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..8, prop::option::weighted(0.9, 0..TAGS.len()), 0..NS.len()).prop_map(|(id, tag, n)| Op::Upsert(id, tag, n)),
            1 => (0u8..8).prop_map(Op::Delete),
        ]
    }

    /// Applies `change` to `previous` as a list view does; the rebuilt result, or what is
    /// inconsistent.
    pub(super) fn apply<T: Clone>(previous: &[T], change: &ResultChange<T>, id: impl Fn(&T) -> Vec<u8>) -> Result<Vec<T>, String> {
        let new_len = change.result.len();
        let mut leaving = vec![false; previous.len()];
        for &index in change.deletions.iter().chain(change.moves.iter().map(|(from, _)| from)) {
            let slot = leaving.get_mut(index).ok_or(format!("old index {index} out of {}", previous.len()))?;
            if std::mem::replace(slot, true) {
                return Err(format!("old index {index} deleted or moved twice"));
            }
        }
        let mut slots: Vec<Option<T>> = vec![None; new_len];
        let targets = change.moves.iter().map(|(from, to)| (*to, Some(previous[*from].clone())));
        let inserted = change.insertions.iter().map(|&index| (index, change.result.get(index).map(|value| (**value).clone())));
        for (index, value) in targets.chain(inserted) {
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

    struct Store {
        db: Db,
        anys: DynCollection,
        tick: Keyspace,
        feed: ChangeStream,
    }

    impl Store {
        fn open(dir: &tempfile::TempDir) -> Store {
            let db = open_in(dir);
            let anys = anys(&db);
            let tick = db.keyspace("review_tick").unwrap();
            let feed = db.subscribe().unwrap();
            Store { db, anys, tick, feed }
        }

        /// Commits `ops` and waits until the commit went through the live engine (the feed
        /// runs its hooks before its listeners).
        fn commit(&self, ops: &[Op]) {
            let sequence = self
                .db
                .write(|tx| {
                    tx.put(&self.tick, b"tick", &tx.sequence().to_be_bytes())?;
                    for op in ops {
                        match op {
                            Op::Upsert(id, tag, n) => {
                                let json = match tag {
                                    Some(tag) => format!(r#"{{"id": {id}, "tag": {}, "n": {}}}"#, TAGS[*tag], NS[*n]),
                                    None => format!(r#"{{"id": {id}, "n": {}}}"#, NS[*n]),
                                };
                                self.anys.upsert_json(tx, json.as_bytes())?;
                            }
                            Op::Delete(id) => {
                                let key = from_json(id.to_string().as_bytes()).unwrap();
                                self.anys.delete(tx, Doc::from_untrusted(&key)?.root())?;
                            }
                        }
                    }
                    Ok(tx.sequence())
                })
                .unwrap();
            loop {
                match self.feed.recv_timeout(WAIT) {
                    Some(FeedEvent::Batch(batch)) if batch.sequence == sequence => return,
                    Some(FeedEvent::Batch(batch)) => assert!(batch.sequence < sequence),
                    other => panic!("commit {sequence} never reached the feed: {other:?}"),
                }
            }
        }
    }

    fn run(specs: &[Spec], txns: &[Vec<Op>]) -> Result<(), TestCaseError> {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir);
        let queries: Vec<DynQuery> = specs.iter().map(|spec| query_of(&store.anys, spec)).collect();
        let lives: Vec<_> = queries.iter().map(|query| query.subscribe().unwrap()).collect();
        let mut seen: Vec<Vec<DynRecord>> = lives
            .iter()
            .map(|live| live.recv_timeout(WAIT).and_then(Event::initial).unwrap().to_vec().into_iter().map(|r| (*r).clone()).collect())
            .collect();
        for (step, ops) in txns.iter().enumerate() {
            store.commit(ops);
            for (index, live) in lives.iter().enumerate() {
                let context =
                    || format!("{:?} after transaction {step} {ops:?}\nplan: {}", specs[index], queries[index].explain().unwrap());
                while let Some(event) = live.try_recv() {
                    let change = event.changed().ok_or_else(|| TestCaseError::fail(format!("not a change\n{}", context())))?;
                    let rebuilt = apply(&seen[index], &change, |record: &DynRecord| record.key_bytes().to_vec())
                        .map_err(|problem| TestCaseError::fail(format!("{problem}\n{}", context())))?;
                    let delivered: Vec<DynRecord> = change.result.iter().map(|r| (**r).clone()).collect();
                    prop_assert_eq!(&rebuilt, &delivered, "the changeset applied is not the delivery\n{}", context());
                    seen[index] = rebuilt;
                }
                let fresh = queries[index].fetch(&store.db).unwrap();
                let json = |records: &[DynRecord]| records.iter().map(DynRecord::to_json).collect::<Vec<_>>();
                prop_assert_eq!(json(&seen[index]), json(&fresh), "the live result is not a fresh query\n{}", context());
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        #[test]
        fn live_results_on_a_field_of_any_type_equal_a_fresh_query(
            specs in prop::collection::vec(spec(), 1..6),
            txns in prop::collection::vec(prop::collection::vec(op(), 1..5), 1..8),
        ) {
            run(&specs, &txns)?;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A record type whose field decoder is written by hand (`tessera::codec::Decode` is public):
// a negative stored value fails to decode, `i64::MIN` panics. What one subscription meets
// must end that subscription alone; the others must go on receiving every commit.

mod probe {
    use tessera::codec::{Decode, Encode, FieldError, FieldIds, FieldProblem, View};
    use tessera::collection::{Describe, IntType, Record, TypeDesc};
    use tessera::value::{EncodeError, Encoder, Value};

    /// Decodes a value >= 0; refuses a negative one; panics on `i64::MIN`.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct Probe(pub i64);

    pub const PANICS: i64 = i64::MIN;

    impl Encode for Probe {
        fn encode(&self, out: &mut Encoder<'_>, _: &FieldIds) -> Result<(), EncodeError> {
            out.push_i64(self.0)
        }
    }

    impl<'a> Decode<'a> for Probe {
        fn decode(value: Value<'a>, ids: &FieldIds) -> Result<Self, FieldError> {
            match i64::decode(value, ids)? {
                PANICS => panic!("probe decoder panicked"),
                stored if stored < 0 => {
                    Err(FieldError { path: String::new(), problem: FieldProblem::Invalid(format!("refused {stored}")) })
                }
                stored => Ok(Probe(stored)),
            }
        }
    }

    impl<'a> View<'a> for Probe {
        type Out = Probe;
        fn view(value: Value<'a>, ids: &FieldIds) -> Result<Probe, FieldError> {
            Probe::decode(value, ids)
        }
    }

    impl Describe for Probe {
        fn describe() -> TypeDesc {
            TypeDesc::Integer(IntType::I64)
        }
    }

    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "probes")]
    pub struct Probed {
        #[record(key)]
        pub id: u32,
        pub n: i64,
        pub probe: Probe,
    }

    pub fn probed(id: u32, probe: i64) -> Probed {
        Probed { id, n: i64::from(id), probe: Probe(probe) }
    }
}

fn probed_ids(result: &tessera::live::Results<probe::Probed>) -> Vec<u32> {
    result.iter().map(|record| record.id).collect()
}

/// The next event's result ids, and the event's sequence for a change (0 for the initial one).
fn next_probed(live: &QuerySubscription<probe::Probed>) -> Option<(u64, Vec<u32>)> {
    match live.recv_timeout(WAIT)? {
        Event::Initial(result) => Some((0, probed_ids(&result))),
        Event::Changed(change) => Some((change.sequence, probed_ids(&change.result))),
        Event::Closed(end) => panic!("ended: {end:?}"),
    }
}

fn assert_failed<S: std::fmt::Debug, C: std::fmt::Debug>(live: &tessera::live::Subscription<S, C>, what: &str) {
    let deadline = std::time::Instant::now() + WAIT;
    while live.ended().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    match live.ended() {
        Some(tessera::live::SubscriptionEnd::Failed(error)) => {
            assert!(error.to_string().contains("probes"), "{what}: the error names the collection: {error}")
        }
        other => panic!("{what}: expected Failed, got {other:?}"),
    }
}

#[test]
fn a_subscription_that_failed_is_not_updated_again_and_the_others_get_every_commit() {
    // Before: a subscription whose update failed (a record that does not decode, after its rows
    // were already merged) stayed in the engine, and the next commit updated it again from that
    // half-applied state: an assertion panicked on the delivery thread, and every subscription
    // after it (here `later`) silently missed the commit, then followed on from a stale result.
    use probe::probed;
    let (_dir, db) = open();
    let probes = db.collection::<probe::Probed>().unwrap();
    db.write(|tx| probes.insert(tx, &probed(1, 1))).unwrap();
    let failing = probes.subscribe_query(&probes.all()).unwrap();
    let later = probes.subscribe_query(&probes.filter(probe::Probed::n().ge(5))).unwrap();
    // The subscriber keeps the result it was shown (as a view does).
    let shown = failing.recv_timeout(WAIT).and_then(Event::initial).unwrap();
    assert_eq!(probed_ids(&shown), [1]);
    assert_eq!(next_probed(&later), Some((0, vec![])));
    // Record 0 sorts before record 1 and does not decode: `failing` ends with the error.
    db.write(|tx| probes.insert(tx, &probed(0, -1))).unwrap();
    assert_failed(&failing, "the subscription that met the record");
    // Commits after it reach the other subscription, each of them.
    let mut sequences = Vec::new();
    for id in [7, 8] {
        sequences.push(db.write(|tx| probes.insert(tx, &probed(id, id.into())).map(|_| tx.sequence())).unwrap());
    }
    assert_eq!(next_probed(&later), Some((sequences[0], vec![7])), "the first commit after the failure");
    assert_eq!(next_probed(&later), Some((sequences[1], vec![7, 8])));
    drop(shown);
}

#[test]
fn a_panicking_record_decoder_ends_the_subscriptions_that_decode_the_record_and_no_other() {
    // Before: a panic in a record's decoder unwound out of the live engine (the feed catches a
    // hook's panic and drops it): that commit reached no subscription after it, here `other`,
    // nor did the subscriptions that decode the record end; none of them was told.
    use probe::probed;
    let (_dir, db) = open();
    let probes = db.collection::<probe::Probed>().unwrap();
    db.write(|tx| probes.insert(tx, &probed(1, 1))).unwrap();
    let decoding = probes.subscribe_query(&probes.all()).unwrap();
    let other = probes.subscribe_query(&probes.filter(probe::Probed::n().ge(5))).unwrap();
    let object = probes.subscribe_object(&9u32).unwrap();
    let panicking_object = probes.subscribe_object(&2u32).unwrap();
    assert!(matches!(panicking_object.recv_timeout(WAIT), Some(Event::Initial(None))));
    assert_eq!(next_probed(&decoding), Some((0, vec![1])));
    assert_eq!(next_probed(&other), Some((0, vec![])));
    assert!(matches!(object.recv_timeout(WAIT), Some(Event::Initial(None))));
    let sequence = db
        .write(|tx| {
            probes.insert(tx, &probed(2, probe::PANICS))?;
            probes.insert(tx, &probed(9, 9)).map(|_| tx.sequence())
        })
        .unwrap();
    assert_eq!(next_probed(&other), Some((sequence, vec![9])), "the commit reaches the other query");
    assert!(
        matches!(object.recv_timeout(WAIT), Some(Event::Changed(tessera::ObjectChange::Updated(record))) if record.id == 9),
        "and the object subscription"
    );
    match decoding.recv_timeout(WAIT) {
        Some(Event::Closed(tessera::live::SubscriptionEnd::Failed(error))) => {
            let text = error.to_string();
            assert!(text.contains("probe decoder panicked") && text.contains("probes"), "the panic's message: {text}")
        }
        other => panic!("expected the decoding subscription to end with the panic, got {other:?}"),
    }
    assert!(
        matches!(panicking_object.recv_timeout(WAIT), Some(Event::Closed(tessera::live::SubscriptionEnd::Failed(_)))),
        "the object subscription to the record ends too"
    );
}
