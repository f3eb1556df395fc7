//! Live query and object subscriptions on records with float fields (NaN, -0.0,
//! infinities), u64 fields past i64, long strings that share a 300-byte prefix (truncated
//! index entries), a unique optional field, enums and an optional nested struct; random
//! predicates with literals of other numeric types; order by any of them with NULL placement,
//! offset and limit; random transactions (same row twice, refused writes, rollbacks). After
//! every commit each delivered changeset applied to the previous result must equal the
//! delivered result and a fresh fetch.

use proptest::prelude::*;
use std::time::Duration;
use tessera::collection::{Embed, Nulls, Order, Record};
use tessera::live::Event;
use tessera::query::{CompareOp, Expr, Literal, field};
use tessera::store::Keyspace;
use tessera::{
    ChangeStream, Collection, Db, DbOptions, Durability, Error, FeedEvent, ObjectChange, ObjectSubscription, Query, QuerySubscription,
    ResultChange,
};

const WAIT: Duration = Duration::from_secs(30);

#[derive(Embed, Debug, Clone, PartialEq)]
enum Level {
    Low,
    Mid { n: i8 },
    High,
}

#[derive(Embed, Debug, Clone, PartialEq)]
struct Meta {
    city: Option<String>,
    n: i32,
}

#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "docs", index = "meta.n")]
struct Doc {
    #[record(key)]
    id: u8,
    #[record(index)]
    score: Option<f64>,
    #[record(index)]
    big: u64,
    #[record(index)]
    title: String,
    #[record(unique)]
    slug: Option<String>,
    level: Level,
    meta: Option<Meta>,
}

const IDS: std::ops::Range<u8> = 0..10;
const SCORES: [f64; 9] = [-1.5, -0.0, 0.0, 1.0, 2.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e300];
const BIGS: [u64; 7] = [0, 1, 1 << 53, (1 << 53) + 1, 1 << 63, u64::MAX - 1, u64::MAX];
const SLUGS: [&str; 4] = ["s0", "s1", "s2", "s3"];

fn long(suffix: &str) -> String {
    format!("{}{suffix}", "p".repeat(300))
}

fn titles() -> Vec<String> {
    vec![
        "".into(),
        "a".into(),
        "p".into(),
        long(""),
        long("a"),
        long("ab"),
        long("b"),
        long("\0"),
        format!("{}x", "p".repeat(600)),
        "q".into(),
    ]
}

fn level() -> impl Strategy<Value = Level> {
    prop_oneof![Just(Level::Low), (-2i8..2).prop_map(|n| Level::Mid { n }), Just(Level::High)]
}

fn meta() -> impl Strategy<Value = Option<Meta>> {
    prop::option::weighted(0.75, (prop::option::of(prop::sample::select(vec!["", "oslo", "rome"])), -2i32..3))
        .prop_map(|m| m.map(|(city, n)| Meta { city: city.map(str::to_owned), n }))
}

fn doc() -> impl Strategy<Value = Doc> {
    (
        IDS,
        prop::option::weighted(0.8, prop::sample::select(SCORES.to_vec())),
        prop::sample::select(BIGS.to_vec()),
        prop::sample::select(titles()),
        prop::option::of(prop::sample::select(SLUGS.to_vec())),
        level(),
        meta(),
    )
        .prop_map(|(id, score, big, title, slug, level, meta)| Doc {
            id,
            score,
            big,
            title,
            slug: slug.map(str::to_owned),
            level,
            meta,
        })
}

#[derive(Debug, Clone)]
enum Edit {
    Score(Option<f64>),
    Big(u64),
    Title(String),
    Slug(Option<&'static str>),
    Level(Level),
    Meta(Option<Meta>),
    N(i32),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => prop::option::weighted(0.8, prop::sample::select(SCORES.to_vec())).prop_map(Edit::Score),
        2 => prop::sample::select(BIGS.to_vec()).prop_map(Edit::Big),
        3 => prop::sample::select(titles()).prop_map(Edit::Title),
        1 => prop::option::of(prop::sample::select(SLUGS.to_vec())).prop_map(Edit::Slug),
        1 => level().prop_map(Edit::Level),
        1 => meta().prop_map(Edit::Meta),
        2 => (-2i32..3).prop_map(Edit::N),
    ]
}

impl Edit {
    fn apply(&self, d: &mut Doc) {
        match self {
            Edit::Score(s) => d.score = *s,
            Edit::Big(b) => d.big = *b,
            Edit::Title(t) => d.title = t.clone(),
            Edit::Slug(s) => d.slug = s.map(str::to_owned),
            Edit::Level(l) => d.level = l.clone(),
            Edit::Meta(m) => d.meta = m.clone(),
            Edit::N(n) => {
                if let Some(m) = &mut d.meta {
                    m.n = *n
                }
            }
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Insert(Doc),
    Upsert(Doc),
    Update(u8, Edit),
    PatchScore(u8, Option<f64>),
    PatchTitle(u8, String),
    Delete(u8),
    DeleteWhere(Pred),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => doc().prop_map(Op::Insert),
        3 => doc().prop_map(Op::Upsert),
        5 => (IDS, edit()).prop_map(|(id, e)| Op::Update(id, e)),
        1 => (IDS, prop::option::of(prop::sample::select(vec![-0.0, 0.0, 7.0, f64::NAN]))).prop_map(|(id, s)| Op::PatchScore(id, s)),
        1 => (IDS, prop::sample::select(titles())).prop_map(|(id, t)| Op::PatchTitle(id, t)),
        2 => IDS.prop_map(Op::Delete),
        1 => pred().prop_map(Op::DeleteWhere),
    ]
}

#[derive(Debug, Clone)]
struct Txn {
    ops: Vec<Op>,
    abort: bool,
}

fn txn() -> impl Strategy<Value = Txn> {
    (prop::collection::vec(op(), 1..6), prop::bool::weighted(0.1)).prop_map(|(ops, abort)| Txn { ops, abort })
}

// ---------------------------------------------------------------------------------------------
// Predicates.

#[derive(Debug, Clone)]
enum Leaf {
    Num(&'static str, CompareOp, Literal),
    Between(&'static str, Literal, Literal),
    In(&'static str, Vec<Literal>),
    Title(CompareOp, String),
    TitleStarts(String),
    Null(&'static str, bool),
    Variant(&'static str),
    Slug(CompareOp, &'static str),
    City(CompareOp, &'static str),
}

#[derive(Debug, Clone)]
enum Pred {
    Leaf(Leaf),
    And(Box<Pred>, Box<Pred>),
    Or(Box<Pred>, Box<Pred>),
    Not(Box<Pred>),
}

fn cmp(path: &str, op: CompareOp, literal: Literal) -> Expr {
    Expr::Compare(Box::new(field(path)), op, Box::new(Expr::Literal(literal)))
}

impl Pred {
    fn expr(&self) -> Expr {
        match self {
            Pred::Leaf(leaf) => match leaf {
                Leaf::Num(path, op, literal) => cmp(path, *op, literal.clone()),
                Leaf::Between(path, low, high) => field(path).between(Expr::Literal(low.clone()), Expr::Literal(high.clone())),
                Leaf::In(path, values) => field(path).is_in(values.clone()),
                Leaf::Title(op, text) => cmp("title", *op, Literal::Str(text.clone())),
                Leaf::TitleStarts(text) => field("title").starts_with(text),
                Leaf::Null(path, negated) => {
                    if *negated {
                        field(path).is_not_null()
                    } else {
                        field(path).is_null()
                    }
                }
                Leaf::Variant(variant) => field("level").is_variant(variant),
                Leaf::Slug(op, slug) => cmp("slug", *op, Literal::Str((*slug).to_owned())),
                Leaf::City(op, city) => cmp("meta.city", *op, Literal::Str((*city).to_owned())),
            },
            Pred::And(a, b) => a.expr().and(b.expr()),
            Pred::Or(a, b) => a.expr().or(b.expr()),
            Pred::Not(a) => !a.expr(),
        }
    }
}

fn compare_op() -> impl Strategy<Value = CompareOp> {
    prop::sample::select(vec![CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ge])
}

fn number() -> impl Strategy<Value = Literal> {
    let mut values: Vec<Literal> = vec![
        Literal::Int(-1),
        Literal::Int(0),
        Literal::Int(1),
        Literal::Int(2),
        Literal::Int(i64::MAX),
        Literal::Int(i64::MIN),
        Literal::Float(0.5),
        Literal::Float(-0.0),
        Literal::Float(f64::NAN),
        Literal::Float(f64::INFINITY),
        Literal::Float(f64::NEG_INFINITY),
        Literal::Float(9007199254740992.0),
        Literal::Float(9223372036854775808.0),
        Literal::Float(18446744073709551616.0),
        Literal::Float(1e300),
    ];
    values.extend(BIGS.iter().map(|b| Literal::from(*b)));
    values.extend(SCORES.iter().map(|s| Literal::Float(*s)));
    prop::sample::select(values)
}

fn num_path() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["score", "big", "meta.n", "id"])
}

fn text() -> impl Strategy<Value = String> {
    let mut values = titles();
    values.extend([long("aa"), "p".repeat(299), "p".repeat(256), "p".repeat(257), long("a\0")]);
    prop::sample::select(values)
}

fn leaf() -> impl Strategy<Value = Leaf> {
    prop_oneof![
        6 => (num_path(), compare_op(), number()).prop_map(|(p, o, l)| Leaf::Num(p, o, l)),
        2 => (num_path(), number(), number()).prop_map(|(p, a, b)| Leaf::Between(p, a, b)),
        1 => (num_path(), prop::collection::vec(number(), 1..4)).prop_map(|(p, v)| Leaf::In(p, v)),
        3 => (compare_op(), text()).prop_map(|(o, t)| Leaf::Title(o, t)),
        2 => text().prop_map(Leaf::TitleStarts),
        2 => (prop::sample::select(vec!["score", "slug", "meta", "meta.city", "meta.n"]), any::<bool>()).prop_map(|(p, n)| Leaf::Null(p, n)),
        1 => prop::sample::select(vec!["Low", "Mid", "High"]).prop_map(Leaf::Variant),
        1 => (compare_op(), prop::sample::select(SLUGS.to_vec())).prop_map(|(o, s)| Leaf::Slug(o, s)),
        1 => (compare_op(), prop::sample::select(vec!["", "oslo", "rome"])).prop_map(|(o, s)| Leaf::City(o, s)),
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
struct Spec {
    pred: Option<Pred>,
    orders: Vec<(&'static str, Order, Option<Nulls>)>,
    offset: usize,
    limit: Option<usize>,
}

fn spec() -> impl Strategy<Value = Spec> {
    let order = (
        prop::sample::select(vec!["score", "big", "title", "slug", "level", "meta.n", "meta.city"]),
        prop::sample::select(vec![Order::Asc, Order::Desc]),
        prop::option::of(prop::sample::select(vec![Nulls::First, Nulls::Last])),
    );
    (
        prop::option::weighted(0.8, pred()),
        prop::collection::vec(order, 0..3),
        prop_oneof![3 => Just(0usize), 1 => 1..3usize],
        prop::option::weighted(0.6, 1..5usize),
    )
        .prop_map(|(pred, orders, offset, limit)| Spec { pred, orders, offset, limit })
}

fn query_of(docs: &Collection<Doc>, spec: &Spec) -> Query<Doc> {
    let mut query = match &spec.pred {
        None => docs.all(),
        Some(pred) => docs.filter(pred.expr()),
    };
    for (path, order, nulls) in &spec.orders {
        query = match nulls {
            None => query.order_by(*path, *order),
            Some(nulls) => query.order_by_nulls(*path, *order, *nulls),
        };
    }
    if spec.offset > 0 {
        query = query.offset(spec.offset);
    }
    if let Some(limit) = spec.limit {
        query = query.limit(limit);
    }
    query
}

// ---------------------------------------------------------------------------------------------
// Harness.

/// NaN-aware equality of results (NaN == NaN, -0.0 != 0.0 by bits).
fn same(a: &[Doc], b: &[Doc]) -> bool {
    format!("{a:?}") == format!("{b:?}") && a.iter().zip(b).all(|(x, y)| x.score.map(f64::to_bits) == y.score.map(f64::to_bits))
}

fn apply(previous: &[Doc], change: &ResultChange<Doc>) -> Result<Vec<Doc>, String> {
    let new_len = change.result.len();
    let mut leaving = vec![false; previous.len()];
    for &index in change.deletions.iter().chain(change.moves.iter().map(|(from, _)| from)) {
        if index >= previous.len() {
            return Err(format!("old index {index} out of {}", previous.len()));
        }
        if std::mem::replace(&mut leaving[index], true) {
            return Err(format!("old index {index} deleted or moved twice"));
        }
    }
    let mut slots: Vec<Option<Doc>> = vec![None; new_len];
    for &(from, to) in &change.moves {
        let slot = slots.get_mut(to).ok_or("move target out of range")?;
        if slot.is_some() {
            return Err(format!("new index {to} filled twice"));
        }
        *slot = Some(previous[from].clone());
    }
    for &index in &change.insertions {
        let value = change.result.get(index).ok_or("insertion out of range")?;
        let slot = slots.get_mut(index).ok_or("insertion out of range")?;
        if slot.is_some() {
            return Err(format!("new index {index} filled twice"));
        }
        *slot = Some((**value).clone());
    }
    let mut staying = previous.iter().zip(&leaving).filter(|(_, l)| !**l).map(|(v, _)| v.clone());
    let mut rebuilt = Vec::new();
    for slot in slots {
        match slot.or_else(|| staying.next()) {
            Some(v) => rebuilt.push(v),
            None => return Err("fewer stayed than free places".into()),
        }
    }
    if staying.next().is_some() {
        return Err("more stayed than free places".into());
    }
    for &index in &change.modifications {
        let new = change.result.get(index).ok_or("modification out of range")?;
        if rebuilt[index].id != new.id {
            return Err(format!("modification at {index} names {}, rebuilt has {}", new.id, rebuilt[index].id));
        }
        rebuilt[index] = (**new).clone();
    }
    Ok(rebuilt)
}

struct Store {
    db: Db,
    docs: Collection<Doc>,
    tick: Keyspace,
    ticks: u64,
    feed: ChangeStream,
}

fn tolerate<V>(result: tessera::Result<V>) -> tessera::Result<()> {
    match result {
        Ok(_) => Ok(()),
        Err(Error::DuplicateKey { .. } | Error::NotFound { .. } | Error::UniqueViolation { .. } | Error::KeyChanged { .. }) => Ok(()),
        Err(other) => Err(other),
    }
}

impl Store {
    fn open(path: &std::path::Path) -> Store {
        let db = Db::open_with(path, DbOptions { durability: Durability::BUFFERED, ..DbOptions::default() }).unwrap();
        let docs = db.collection::<Doc>().unwrap();
        let tick = db.keyspace("review_tick").unwrap();
        let feed = db.subscribe().unwrap();
        Store { db, docs, tick, ticks: 0, feed }
    }

    fn run(&self, tx: &mut tessera::WriteTxn<'_>, op: &Op) -> tessera::Result<()> {
        let docs = &self.docs;
        match op {
            Op::Insert(d) => tolerate(docs.insert(tx, d)),
            Op::Upsert(d) => tolerate(docs.upsert(tx, d)),
            Op::Update(id, e) => tolerate(docs.update(tx, id, |d| e.apply(d))),
            Op::PatchScore(id, s) => tolerate(docs.patch(tx, id, "score", s)),
            Op::PatchTitle(id, t) => tolerate(docs.patch(tx, id, "title", t)),
            Op::Delete(id) => tolerate(docs.delete(tx, id)),
            Op::DeleteWhere(p) => tolerate(docs.delete_where(tx, &docs.filter(p.expr()))),
        }
    }

    fn commit(&mut self, txn: &Txn) -> u64 {
        self.ticks += 1;
        let ticks = self.ticks;
        let result = self.db.write(|tx| {
            tx.put(&self.tick, b"tick", &ticks.to_be_bytes())?;
            for op in &txn.ops {
                self.run(tx, op)?;
            }
            if txn.abort {
                return Err(Error::Aborted("rollback".into()));
            }
            Ok(tx.sequence())
        });
        let sequence = match result {
            Ok(sequence) => sequence,
            Err(Error::Aborted(_)) if txn.abort => {
                self.ticks += 1;
                let ticks = self.ticks;
                self.db
                    .write(|tx| {
                        tx.put(&self.tick, b"tick", &ticks.to_be_bytes())?;
                        Ok(tx.sequence())
                    })
                    .unwrap()
            }
            Err(error) => panic!("transaction {txn:?} failed: {error}"),
        };
        loop {
            match self.feed.recv_timeout(WAIT) {
                Some(FeedEvent::Batch(batch)) if batch.sequence == sequence => return sequence,
                Some(FeedEvent::Batch(batch)) => assert!(batch.sequence < sequence),
                Some(FeedEvent::Lagged { missed }) => panic!("lagged {missed}"),
                None => panic!("commit {sequence} never reached the feed"),
            }
        }
    }
}

struct Watch {
    spec: Spec,
    query: Query<Doc>,
    live: QuerySubscription<Doc>,
    seen: Vec<Doc>,
    initial: bool,
}

impl Watch {
    fn read(&mut self, fresh: &[Doc], sequence: u64) -> Result<(), TestCaseError> {
        while let Some(event) = self.live.try_recv() {
            match event {
                Event::Initial(result) => {
                    prop_assert!(self.initial, "second initial");
                    self.seen = result.iter().map(|d| (**d).clone()).collect();
                    self.initial = false;
                }
                Event::Changed(change) => {
                    prop_assert!(!self.initial, "change before initial");
                    let rebuilt = apply(&self.seen, &change).map_err(|p| {
                        TestCaseError::fail(format!("bad changeset {p}: {:?}\nprev {:?}\nchange {:?}", self.spec, self.seen, change))
                    })?;
                    let delivered: Vec<Doc> = change.result.iter().map(|d| (**d).clone()).collect();
                    prop_assert!(
                        same(&rebuilt, &delivered),
                        "rebuilt != delivered\nspec {:?}\nprev {:?}\nchange {:?}",
                        self.spec,
                        self.seen,
                        change
                    );
                    prop_assert_eq!(change.sequence, sequence, "delivery sequence");
                    self.seen = rebuilt;
                }
                Event::Closed(reason) => return Err(TestCaseError::fail(format!("closed {reason:?}"))),
            }
        }
        prop_assert!(!self.initial, "no initial");
        prop_assert!(
            same(&self.seen, fresh),
            "live result != fresh fetch\nspec {:?}\nplan {}\nlive  {:?}\nfresh {:?}",
            self.spec,
            self.query.explain().unwrap(),
            self.seen,
            fresh
        );
        Ok(())
    }
}

struct ObjectWatch {
    id: u8,
    live: ObjectSubscription<Doc>,
    seen: Option<Doc>,
}

impl ObjectWatch {
    fn read(&mut self, docs: &Collection<Doc>, db: &Db) -> Result<(), TestCaseError> {
        while let Some(event) = self.live.try_recv() {
            match event {
                Event::Initial(doc) => self.seen = doc.map(|d| (*d).clone()),
                Event::Changed(ObjectChange::Updated(doc)) => {
                    let doc = (*doc).clone();
                    prop_assert!(
                        self.seen.as_ref().map(|s| !same(std::slice::from_ref(s), std::slice::from_ref(&doc))).unwrap_or(true),
                        "Updated with an unchanged record {:?}",
                        doc
                    );
                    self.seen = Some(doc);
                }
                Event::Changed(ObjectChange::Deleted) => {
                    prop_assert!(self.seen.is_some(), "Deleted for an absent record {}", self.id);
                    self.seen = None;
                }
                Event::Closed(reason) => return Err(TestCaseError::fail(format!("closed {reason:?}"))),
            }
        }
        let fresh = docs.get(db, &self.id).unwrap();
        prop_assert_eq!(format!("{:?}", self.seen), format!("{fresh:?}"), "object {}", self.id);
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(96), ..ProptestConfig::default() })]

    #[test]
    fn live_results_equal_a_fresh_fetch(
        seed in prop::collection::vec(doc(), 3..10),
        specs in prop::collection::vec(spec(), 1..6),
        txns in prop::collection::vec(txn(), 1..12),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("db"));
        let seed_txn = Txn { ops: seed.into_iter().map(Op::Upsert).collect(), abort: false };
        store.commit(&seed_txn);
        let mut watches: Vec<Watch> = specs
            .iter()
            .map(|spec| {
                let query = query_of(&store.docs, spec);
                let live = store.docs.subscribe_query(&query).unwrap();
                Watch { spec: spec.clone(), query, live, seen: Vec::new(), initial: true }
            })
            .collect();
        let mut objects: Vec<ObjectWatch> = [0u8, 3, 7]
            .iter()
            .map(|id| ObjectWatch { id: *id, live: store.docs.subscribe_object(id).unwrap(), seen: None })
            .collect();
        // Wait for the initial results.
        for watch in &mut watches {
            match watch.live.recv_timeout(WAIT) {
                Some(Event::Initial(result)) => {
                    watch.seen = result.iter().map(|d| (**d).clone()).collect();
                    watch.initial = false;
                }
                other => prop_assert!(false, "no initial: {:?}", other.is_some()),
            }
        }
        for object in &mut objects {
            match object.live.recv_timeout(WAIT) {
                Some(Event::Initial(doc)) => object.seen = doc.map(|d| (*d).clone()),
                _ => prop_assert!(false, "no object initial"),
            }
        }
        for watch in &mut watches {
            let fresh = watch.query.fetch(&store.db).unwrap();
            prop_assert!(same(&watch.seen, &fresh), "initial != fresh\nspec {:?}\n{:?}\n{:?}", watch.spec, watch.seen, fresh);
        }
        for txn in &txns {
            let sequence = store.commit(txn);
            for watch in &mut watches {
                let fresh = watch.query.fetch(&store.db).unwrap();
                watch.read(&fresh, sequence).map_err(|e| TestCaseError::fail(format!("{e}\nafter {txn:?}")))?;
            }
            for object in &mut objects {
                object.read(&store.docs, &store.db)?;
            }
        }
        let report = store.db.check().unwrap();
        prop_assert!(report.is_ok(), "{}", report);
    }
}

// ---------------------------------------------------------------------------------------------
// Deterministic cases.

fn plain(id: u8) -> Doc {
    Doc { id, score: None, big: 0, title: String::new(), slug: None, level: Level::Low, meta: None }
}

#[test]
fn a_subscription_made_while_another_thread_commits_follows_every_commit() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path().join("db"), DbOptions { durability: Durability::BUFFERED, ..DbOptions::default() }).unwrap();
    let docs = db.collection::<Doc>().unwrap();
    for round in 0..20 {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (db, docs, stop) = (db.clone(), docs.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let id = (i % 10) as u8;
                    let mut d = plain(id);
                    d.score = Some((i % 7) as f64 - 3.0);
                    d.big = i;
                    d.title = long(&format!("{}", i % 5));
                    db.write(|tx| {
                        docs.upsert(tx, &d)?;
                        if i.is_multiple_of(3) {
                            docs.delete(tx, &(((i % 10) as u8 + 5) % 10))?;
                        }
                        Ok(())
                    })
                    .unwrap();
                    i += 1;
                }
            })
        };
        std::thread::sleep(Duration::from_millis(2 + round % 5));
        let query = docs.filter(field("score").ge(0)).order_by("title", Order::Desc).order_by("big", Order::Asc).limit(4);
        let live = docs.subscribe_query(&query).unwrap();
        std::thread::sleep(Duration::from_millis(10));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().unwrap();
        // A final commit to make sure the engine has caught up: wait for it through a marker.
        let mut seen: Vec<Doc> = Vec::new();
        let deadline = std::time::Instant::now() + WAIT;
        let fresh = query.fetch(&db).unwrap();
        loop {
            match live.recv_timeout(Duration::from_millis(300)) {
                Some(Event::Initial(result)) => seen = result.iter().map(|d| (**d).clone()).collect(),
                Some(Event::Changed(change)) => {
                    let rebuilt = apply(&seen, &change).unwrap_or_else(|p| panic!("round {round}: bad changeset {p}"));
                    let delivered: Vec<Doc> = change.result.iter().map(|d| (**d).clone()).collect();
                    assert!(same(&rebuilt, &delivered), "round {round}: rebuilt != delivered");
                    seen = rebuilt;
                }
                Some(Event::Closed(_)) => panic!("closed"),
                None => break,
            }
            assert!(std::time::Instant::now() < deadline);
        }
        assert!(same(&seen, &fresh), "round {round}: live {seen:?}\nfresh {fresh:?}");
        drop(live);
        db.write(|tx| docs.delete_where(tx, &docs.all()).map(drop)).unwrap();
    }
}

#[test]
fn dropping_the_database_while_subscribed_and_writing_ends_recv() {
    for _ in 0..10 {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path().join("db")).unwrap();
        let docs = db.collection::<Doc>().unwrap();
        let live = docs.subscribe_query(&docs.all().order_by("score", Order::Asc).limit(3)).unwrap();
        let object = docs.subscribe_object(&1u8).unwrap();
        let writer = {
            let (db, docs) = (db.clone(), docs.clone());
            std::thread::spawn(move || {
                for i in 0..50u8 {
                    let mut d = plain(i % 5);
                    d.score = Some(f64::from(i));
                    db.write(|tx| docs.upsert(tx, &d)).unwrap();
                }
            })
        };
        writer.join().unwrap();
        drop((docs, db));
        let waiter = std::thread::spawn(move || {
            let mut closed = (false, false);
            while let Some(event) = live.recv_timeout(WAIT) {
                if matches!(event, Event::Closed(_)) {
                    closed.0 = true;
                }
            }
            while let Some(event) = object.recv_timeout(WAIT) {
                if matches!(event, Event::Closed(_)) {
                    closed.1 = true;
                }
            }
            closed
        });
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !waiter.is_finished() {
            assert!(std::time::Instant::now() < deadline, "recv hangs after the database is gone");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(waiter.join().unwrap(), (true, true));
    }
}

#[test]
fn object_subscription_sees_delete_and_reinsert_in_one_transaction_as_one_update() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    let docs = db.collection::<Doc>().unwrap();
    db.write(|tx| docs.insert(tx, &plain(1))).unwrap();
    let object = docs.subscribe_object(&1u8).unwrap();
    assert!(matches!(object.recv_timeout(WAIT), Some(Event::Initial(Some(_)))));
    // Delete and insert the same bytes again: nothing changed.
    db.write(|tx| {
        docs.delete(tx, &1u8)?;
        docs.insert(tx, &plain(1))
    })
    .unwrap();
    let mut changed = plain(1);
    changed.score = Some(2.0);
    db.write(|tx| {
        docs.delete(tx, &1u8)?;
        docs.insert(tx, &changed)
    })
    .unwrap();
    let mut events = Vec::new();
    while let Some(event) = object.recv_timeout(Duration::from_millis(500)) {
        events.push(event);
    }
    let last = events.iter().rev().find_map(|e| match e {
        Event::Changed(ObjectChange::Updated(d)) => Some((**d).clone()),
        _ => None,
    });
    assert_eq!(last, Some(changed), "events: {}", events.len());
    assert!(!events.iter().any(|e| matches!(e, Event::Changed(ObjectChange::Deleted))), "a transaction that re-inserts is no delete");
}

#[test]
fn an_unorderable_query_fails_alike_at_subscribe_and_fetch() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    let docs = db.collection::<Doc>().unwrap();
    let query = docs.all().order_by("meta", Order::Asc);
    let fetched = query.fetch(&db).map(drop).map_err(|e| e.to_string());
    let subscribed = docs.subscribe_query(&query).map(drop).map_err(|e| e.to_string());
    assert_eq!(fetched.is_err(), subscribed.is_err(), "fetch {fetched:?}, subscribe {subscribed:?}");
}
