//! Review of live query subscriptions by key (`key == literal`, kept beside the object
//! subscriptions to the key): each must deliver what the same query gives through the general
//! engine (written in a form the detection does not accept) and what a fresh fetch returns,
//! after every commit.

mod live_events;

use live_events::{changed, initial};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use tessera::collection::{Order, Record};
use tessera::live::{Event, SubscriptionEnd};
use tessera::query::field;
use tessera::{ChangeStream, Db, DbOptions, Durability, Error, FeedEvent, ObjectChange, Policy, Query, QuerySubscription, ResultChange};

const WAIT: Duration = Duration::from_secs(10);

#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "items")]
struct Item {
    #[record(key)]
    id: u32,
    n: i64,
    tag: String,
}

/// `items` with an index: a schema change that ends no subscription.
#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "items")]
struct IndexedItem {
    #[record(key)]
    id: u32,
    n: i64,
    #[record(index)]
    tag: String,
}

/// `items` with another field: a schema change that ends the subscriptions of `Item`.
#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "items")]
struct ItemWithNote {
    #[record(key)]
    id: u32,
    n: i64,
    tag: String,
    note: Option<String>,
}

#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "named")]
struct Named {
    #[record(key)]
    name: String,
    n: i64,
}

#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "signed")]
struct Signed {
    #[record(key)]
    id: i64,
    n: i64,
}

#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "big")]
struct Big {
    #[record(key)]
    id: u64,
    n: i64,
}

#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "pairs")]
struct Pair {
    #[record(key)]
    a: u32,
    #[record(key)]
    b: String,
    n: i64,
}

// ---------------------------------------------------------------------------------------------
// Helpers.

fn open() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let options = DbOptions { durability: Durability::BUFFERED, ..DbOptions::default() };
    let db = Db::open_with(dir.path().join("db"), options).unwrap();
    (dir, db)
}

/// A deterministic xorshift64 stream.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Waits until the feed has handed on commit `sequence` (or a later one): the feed runs its hooks (the live
/// engine among them) before it gives a batch to listeners, so every delivery of that commit is
/// queued by then.
fn passed(feed: &ChangeStream, sequence: u64) {
    loop {
        match feed.recv_timeout(WAIT) {
            Some(FeedEvent::Batch(batch)) if batch.sequence >= sequence => return,
            Some(FeedEvent::Batch(_)) => {}
            // A burst of commits may overflow the listener's queue: the later batches still come.
            Some(FeedEvent::Lagged { .. }) => {}
            None => panic!("commit {sequence} never reached the feed"),
        }
    }
}

/// Commits `write` (plus a tick, so that every commit publishes a batch), waits until the live
/// engine has applied it, and returns its sequence.
fn commit(db: &Db, feed: &ChangeStream, write: impl FnOnce(&mut tessera::WriteTxn<'_>) -> tessera::Result<()>) -> u64 {
    let tick = db.keyspace("review_tick").unwrap();
    let mut write = Some(write);
    let sequence = db
        .write(|tx| {
            let now = tx.sequence();
            tx.put(&tick, b"tick", &now.to_be_bytes())?;
            (write.take().expect("one attempt"))(tx)?;
            Ok(tx.sequence())
        })
        .unwrap();
    passed(feed, sequence);
    sequence
}

/// Applies `change` to `previous` as a list view does, checking its indices; returns the
/// rebuilt result (modified and inserted rows take the delivered values).
fn apply<T: Clone + PartialEq + std::fmt::Debug>(previous: &[T], change: &ResultChange<T>) -> Vec<T> {
    let new_len = change.result.len();
    let mut gone = vec![false; previous.len()];
    for &index in change.deletions.iter().chain(change.moves.iter().map(|(from, _)| from)) {
        assert!(index < previous.len(), "old index {index} out of {}: {change:?}", previous.len());
        assert!(!gone[index], "old index {index} deleted or moved twice");
        gone[index] = true;
    }
    let mut slots: Vec<Option<T>> = vec![None; new_len];
    for &(from, to) in &change.moves {
        assert!(to < new_len && slots[to].is_none(), "move target {to}: {change:?}");
        slots[to] = Some(previous[from].clone());
    }
    for &index in &change.insertions {
        assert!(index < new_len && slots[index].is_none(), "insertion {index}: {change:?}");
        slots[index] = Some((*change.result[index]).clone());
    }
    let mut survivors = previous.iter().zip(&gone).filter(|(_, gone)| !**gone).map(|(value, _)| value.clone());
    let mut rebuilt: Vec<T> =
        slots.into_iter().map(|slot| slot.or_else(|| survivors.next()).expect("as many survivors as free slots")).collect();
    assert!(survivors.next().is_none(), "survivors left over: {change:?}");
    for &index in &change.modifications {
        assert!(index < new_len, "modification {index}: {change:?}");
        rebuilt[index] = (*change.result[index]).clone();
    }
    rebuilt
}

/// A test's write, boxed so that a test can list several.
type Write<'a> = Box<dyn Fn(&mut tessera::WriteTxn<'_>) -> tessera::Result<()> + 'a>;

/// The lists of a changeset, for comparing two subscriptions' deliveries.
type Lists = (Vec<usize>, Vec<usize>, Vec<usize>, Vec<(usize, usize)>, bool);

fn lists<T>(change: &ResultChange<T>) -> Lists {
    (change.deletions.clone(), change.insertions.clone(), change.modifications.clone(), change.moves.clone(), change.resynced)
}

/// A typed query subscription followed commit by commit.
struct Follower<T: Record> {
    label: String,
    query: Query<T>,
    live: QuerySubscription<T>,
    result: Vec<T>,
    policy: Policy,
}

impl<T: Record + Clone + PartialEq + std::fmt::Debug> Follower<T> {
    fn new(label: impl Into<String>, collection: &tessera::Collection<T>, query: Query<T>, policy: Policy) -> Self {
        let live = collection.subscribe_query_with(&query, policy).unwrap();
        let result = initial(live.recv_timeout(WAIT)).iter().map(|value| (**value).clone()).collect();
        Follower { label: label.into(), query, live, result, policy }
    }

    /// Reads what has been queued (the engine has applied every commit up to `sequence`):
    /// under `EveryChange` at most one change per commit, carrying `sequence`; the result then
    /// equals a fresh fetch. Returns the changeset's lists, if one was delivered.
    fn follow(&mut self, db: &Db, sequence: u64) -> Option<Lists> {
        let mut delivered = None;
        while let Some(event) = self.live.try_recv() {
            let change = changed(Some(event));
            if self.policy == Policy::EveryChange {
                assert!(delivered.is_none(), "{}: two deliveries for commit {sequence}", self.label);
                assert_eq!(change.sequence, sequence, "{}: the delivery's sequence", self.label);
                assert!(!change.is_empty(), "{}: an empty changeset for commit {sequence}", self.label);
            }
            let rebuilt = apply(&self.result, &change);
            let delivered_rows: Vec<T> = change.result.iter().map(|value| (**value).clone()).collect();
            assert_eq!(rebuilt, delivered_rows, "{}: the changeset does not rebuild the delivered result", self.label);
            self.result = rebuilt;
            delivered = Some(lists(&change));
        }
        let fetched = self.query.fetch(db).unwrap();
        assert_eq!(self.result, fetched, "{}: after commit {sequence}, the followed result is not the fetched one", self.label);
        delivered
    }
}

// ---------------------------------------------------------------------------------------------
// The oracle: by key against the general engine and a fetch, under random writes.

fn item(id: u32, n: i64) -> Item {
    Item { id, n, tag: format!("t{}", n.rem_euclid(3)) }
}

/// One random transaction on ids `0..8`: upserts, deletes, a write back of the same value, an
/// insert then delete of one key, a delete then insert.
fn random_write(rng: &mut Rng, items: &tessera::Collection<Item>, tx: &mut tessera::WriteTxn<'_>) -> tessera::Result<()> {
    for _ in 0..1 + rng.below(4) {
        let id = rng.below(8) as u32;
        match rng.below(7) {
            0..=2 => drop(items.upsert(tx, &item(id, rng.below(5) as i64))?),
            3 => drop(items.delete(tx, &id)?),
            4 => {
                // Writes the record back as it is: no change.
                if let Some(now) = items.get(tx, &id)? {
                    items.upsert(tx, &now)?;
                }
            }
            5 => {
                items.upsert(tx, &item(id, 9))?;
                items.delete(tx, &id)?;
            }
            _ => {
                items.delete(tx, &id)?;
                items.upsert(tx, &item(id, rng.below(5) as i64))?;
            }
        }
    }
    Ok(())
}

/// The queries on `key` the oracle compares: the first is by key, the others mean the same
/// and take the general engine.
fn same_queries(items: &tessera::Collection<Item>, key: u32) -> Vec<(String, Query<Item>)> {
    vec![
        (format!("id == {key}"), items.filter(Item::id().eq(key))),
        (format!("id == {key} (text)"), items.filter_text(&format!("{key} == id")).unwrap()),
        (format!("id == {key} ordered, limit 1"), items.filter(Item::id().eq(key)).order_by(Item::n(), Order::Desc).limit(1)),
        (format!("id == {key} limit 5"), items.filter(Item::id().eq(key)).limit(5)),
        (format!("id == {key} and id == {key}"), items.filter(Item::id().eq(key).and(Item::id().eq(key)))),
        (format!("{key} <= id <= {key}"), items.filter(Item::id().ge(key).and(Item::id().le(key)))),
        (format!("id between {key}, {key}"), items.filter(Item::id().between(key, key))),
    ]
}

#[test]
fn by_key_deliveries_equal_the_general_engines_and_a_fetch_under_random_writes() {
    for seed in 1..=6u64 {
        let (_dir, db) = open();
        let feed = db.subscribe().unwrap();
        let items = db.collection::<Item>().unwrap();
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        // Some records before the subscriptions start.
        commit(&db, &feed, |tx| (0..4).try_for_each(|id| items.upsert(tx, &item(id * 2, id as i64)).map(drop)));
        let keys = [0u32, 3, 6, 11];
        // By key, then alone on its collection for a while (the engine's path for collections
        // with subscriptions by key only), then with general queries beside it.
        let mut groups: Vec<Vec<Follower<Item>>> = Vec::new();
        let mut objects = Vec::new();
        for round in 0..70 {
            if round == 0 || round == 20 {
                for key in keys {
                    let group: Vec<Follower<Item>> = same_queries(&items, key)
                        .into_iter()
                        .enumerate()
                        .filter(|(index, _)| round > 0 || *index < 4)
                        .map(|(_, (label, query))| Follower::new(format!("seed {seed}: {label}"), &items, query, Policy::EveryChange))
                        .collect();
                    groups.push(group);
                    let object = items.subscribe_object(&key).unwrap();
                    let now = initial(object.recv_timeout(WAIT)).map(|value| (*value).clone());
                    objects.push((key, object, now));
                }
            }
            if round == 40 {
                // Some subscriptions go: the others to the same keys go on.
                for group in groups.iter_mut() {
                    group.remove(0);
                }
                objects.retain(|(key, _, _)| key % 2 == 0);
            }
            let sequence = commit(&db, &feed, |tx| random_write(&mut rng, &items, tx));
            for group in groups.iter_mut() {
                let mut delivered: Vec<(String, Option<Lists>)> = Vec::new();
                for follower in group.iter_mut() {
                    let lists = follower.follow(&db, sequence);
                    delivered.push((follower.label.clone(), lists));
                }
                let (first_label, first) = &delivered[0];
                for (label, lists) in &delivered[1..] {
                    assert_eq!(lists, first, "round {round}: {label} and {first_label} delivered different changesets");
                }
            }
            for (key, object, now) in objects.iter_mut() {
                while let Some(event) = object.try_recv() {
                    *now = match changed(Some(event)) {
                        ObjectChange::Updated(value) => Some((*value).clone()),
                        ObjectChange::Deleted => None,
                    };
                }
                assert_eq!(*now, items.get(&db, key).unwrap(), "seed {seed}, round {round}: object {key}");
            }
        }
    }
}

#[test]
fn a_commit_that_leaves_the_record_as_it_was_delivers_nothing_to_a_query_by_key() {
    let (_dir, db) = open();
    let feed = db.subscribe().unwrap();
    let items = db.collection::<Item>().unwrap();
    commit(&db, &feed, |tx| items.upsert(tx, &item(1, 1)).map(drop));
    let mut by_key = Follower::new("by key", &items, items.filter(Item::id().eq(1u32)), Policy::EveryChange);
    let mut general = Follower::new("general", &items, items.filter(Item::id().ge(1u32).and(Item::id().le(1u32))), Policy::EveryChange);
    let cases: Vec<(&str, Write<'_>)> = vec![
        ("the same value written back", Box::new(|tx| items.upsert(tx, &item(1, 1)).map(drop))),
        (
            "changed and changed back",
            Box::new(|tx| {
                items.upsert(tx, &item(1, 2))?;
                items.upsert(tx, &item(1, 1)).map(drop)
            }),
        ),
        (
            "deleted and inserted again as it was",
            Box::new(|tx| {
                items.delete(tx, &1u32)?;
                items.upsert(tx, &item(1, 1)).map(drop)
            }),
        ),
        ("another record", Box::new(|tx| items.upsert(tx, &item(2, 5)).map(drop))),
        ("a key sharing a prefix of bytes", Box::new(|tx| items.upsert(tx, &item(256, 5)).map(drop))),
        ("a delete of an absent record", Box::new(|tx| items.delete(tx, &3u32).map(drop))),
        ("nothing to the collection", Box::new(|_| Ok(()))),
    ];
    for (what, write) in cases {
        let sequence = commit(&db, &feed, write);
        assert_eq!(by_key.follow(&db, sequence), None, "{what}: a delivery by key");
        assert_eq!(general.follow(&db, sequence), None, "{what}: a delivery by the general engine");
    }
    let sequence = commit(&db, &feed, |tx| items.upsert(tx, &item(1, 7)).map(drop));
    let expected = Some((vec![], vec![], vec![0], vec![], false));
    assert_eq!(by_key.follow(&db, sequence), expected);
    assert_eq!(general.follow(&db, sequence), expected);
}

// ---------------------------------------------------------------------------------------------
// Keys of every kind.

#[test]
fn string_keys_with_unusual_bytes_follow_their_own_record_only() {
    let (_dir, db) = open();
    let feed = db.subscribe().unwrap();
    let named = db.collection::<Named>().unwrap();
    let keys: Vec<String> = vec![
        String::new(),
        "\0".into(),
        "\0\0".into(),
        "a".into(),
        "a\0".into(),
        "a\0b".into(),
        "a\u{1}".into(),
        "a\u{ff}".into(),
        "\u{7f}".into(),
        "é".into(),
        "\u{10FFFF}".into(),
        "a\\b\"c'".into(),
        " a ".into(),
        "x".repeat(300),
    ];
    let mut groups: Vec<Vec<Follower<Named>>> = keys
        .iter()
        .map(|key| {
            vec![
                Follower::new(format!("name == {key:?}"), &named, named.filter(Named::name().eq(key.as_str())), Policy::EveryChange),
                Follower::new(
                    format!("{key:?} <= name <= {key:?}"),
                    &named,
                    named.filter(Named::name().ge(key.as_str()).and(Named::name().le(key.as_str()))),
                    Policy::EveryChange,
                ),
            ]
        })
        .collect();
    let mut step = |write: &dyn Fn(&mut tessera::WriteTxn<'_>) -> tessera::Result<()>| {
        let sequence = commit(&db, &feed, write);
        for group in &mut groups {
            let by_key = group[0].follow(&db, sequence);
            let general = group[1].follow(&db, sequence);
            assert_eq!(by_key, general, "{} and {}", group[0].label, group[1].label);
        }
    };
    for (index, key) in keys.iter().enumerate() {
        step(&|tx| named.upsert(tx, &Named { name: key.clone(), n: index as i64 }).map(drop));
    }
    for (index, key) in keys.iter().enumerate() {
        step(&|tx| named.upsert(tx, &Named { name: key.clone(), n: -(index as i64) - 1 }).map(drop));
    }
    for key in keys.iter().step_by(2) {
        step(&|tx| named.delete(tx, key.as_str()).map(drop));
    }
    // All in one commit: each key's subscriptions see their own record only.
    step(&|tx| keys.iter().try_for_each(|key| named.upsert(tx, &Named { name: key.clone(), n: 100 }).map(drop)));
    step(&|tx| keys.iter().skip(1).step_by(3).try_for_each(|key| named.delete(tx, key.as_str()).map(drop)));
}

#[test]
fn integer_keys_at_their_extremes_follow_their_record() {
    let (_dir, db) = open();
    let feed = db.subscribe().unwrap();
    let signed = db.collection::<Signed>().unwrap();
    let big = db.collection::<Big>().unwrap();
    let signed_keys = [i64::MIN, i64::MIN + 1, -256, -1, 0, 1, 255, 256, i64::MAX];
    let big_keys = [0u64, 1, i64::MAX as u64, i64::MAX as u64 + 1, u64::MAX - 1, u64::MAX];
    let mut signed_groups: Vec<Vec<Follower<Signed>>> = signed_keys
        .iter()
        .map(|&key| {
            vec![
                Follower::new(format!("id == {key}"), &signed, signed.filter(Signed::id().eq(key)), Policy::EveryChange),
                Follower::new(
                    format!("id == {key} (text)"),
                    &signed,
                    signed.filter_text(&format!("id == {key}")).unwrap(),
                    Policy::EveryChange,
                ),
                Follower::new(
                    format!("{key} <= id <= {key}"),
                    &signed,
                    signed.filter(Signed::id().ge(key).and(Signed::id().le(key))),
                    Policy::EveryChange,
                ),
            ]
        })
        .collect();
    let mut big_groups: Vec<Vec<Follower<Big>>> = big_keys
        .iter()
        .map(|&key| {
            vec![
                Follower::new(format!("id == {key}"), &big, big.filter(field("id").eq(key)), Policy::EveryChange),
                Follower::new(format!("id == {key} (text)"), &big, big.filter_text(&format!("id == {key}")).unwrap(), Policy::EveryChange),
                Follower::new(
                    format!("{key} <= id <= {key}"),
                    &big,
                    big.filter(field("id").ge(key).and(field("id").le(key))),
                    Policy::EveryChange,
                ),
            ]
        })
        .collect();
    let mut check = |sequence: u64| {
        for group in signed_groups.iter_mut() {
            let delivered: Vec<Option<Lists>> = group.iter_mut().map(|follower| follower.follow(&db, sequence)).collect();
            assert!(delivered.iter().all(|lists| *lists == delivered[0]), "{}: {delivered:?}", group[0].label);
        }
        for group in big_groups.iter_mut() {
            let delivered: Vec<Option<Lists>> = group.iter_mut().map(|follower| follower.follow(&db, sequence)).collect();
            assert!(delivered.iter().all(|lists| *lists == delivered[0]), "{}: {delivered:?}", group[0].label);
        }
    };
    for round in 0..3i64 {
        for key in signed_keys {
            let sequence = commit(&db, &feed, |tx| {
                if round == 2 && key % 2 == 0 {
                    signed.delete(tx, &key).map(drop)
                } else {
                    signed.upsert(tx, &Signed { id: key, n: round }).map(drop)
                }
            });
            check(sequence);
        }
        for key in big_keys {
            let sequence = commit(&db, &feed, |tx| {
                if round == 2 && key % 2 == 1 {
                    big.delete(tx, &key).map(drop)
                } else {
                    big.upsert(tx, &Big { id: key, n: round }).map(drop)
                }
            });
            check(sequence);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Dynamic and typed handles.

/// A dynamic query subscription followed as JSON rows.
struct DynFollower {
    label: String,
    query: tessera::collection::DynQuery,
    live: QuerySubscription<tessera::collection::DynRecord>,
    result: Vec<String>,
}

impl DynFollower {
    fn new(dynamic: &tessera::collection::DynCollection, text: &str, policy: Policy) -> DynFollower {
        let query = dynamic.filter_text(text).unwrap();
        let live = query.subscribe_with(policy).unwrap();
        let result = initial(live.recv_timeout(WAIT)).iter().map(|record| record.to_json()).collect();
        DynFollower { label: text.to_owned(), query, live, result }
    }

    fn follow(&mut self, db: &Db, sequence: u64) -> Option<Lists> {
        let mut delivered = None;
        while let Some(event) = self.live.try_recv() {
            let change = changed(Some(event));
            assert!(delivered.is_none(), "{}: two deliveries for commit {sequence}", self.label);
            assert_eq!(change.sequence, sequence, "{}", self.label);
            let json: Vec<String> = change.result.iter().map(|record| record.to_json()).collect();
            // The rows are one or none here: the changeset is checked by its length arithmetic.
            assert_eq!(self.result.len() - change.deletions.len() + change.insertions.len(), json.len(), "{}: {change:?}", self.label);
            self.result = json;
            delivered = Some(lists(&change));
        }
        let fetched: Vec<String> = self.query.fetch(db).unwrap().iter().map(|record| record.to_json()).collect();
        assert_eq!(self.result, fetched, "{}: after commit {sequence}", self.label);
        delivered
    }
}

#[test]
fn dynamic_and_typed_queries_by_key_of_one_collection_deliver_alike() {
    let (_dir, db) = open();
    let feed = db.subscribe().unwrap();
    let items = db.collection::<Item>().unwrap();
    commit(&db, &feed, |tx| items.upsert(tx, &item(7, 1)).map(drop));
    let dynamic = db.dyn_collection("items").unwrap();
    let mut typed = Follower::new("typed id == 7", &items, items.filter(Item::id().eq(7u32)), Policy::EveryChange);
    let mut typed_general =
        Follower::new("typed 7 <= id <= 7", &items, items.filter(Item::id().ge(7u32).and(Item::id().le(7u32))), Policy::EveryChange);
    let mut dyns = [
        DynFollower::new(&dynamic, "id == 7", Policy::EveryChange),
        DynFollower::new(&dynamic, "7 == id", Policy::EveryChange),
        DynFollower::new(&dynamic, "id >= 7 and id <= 7", Policy::EveryChange),
        DynFollower::new(&dynamic, "id == 7 and id == 7", Policy::EveryChange),
    ];
    let mut other_key = DynFollower::new(&dynamic, "id == 8", Policy::EveryChange);
    let key7 = tessera::value::from_json(b"7").unwrap();
    let writes: Vec<Write<'_>> = vec![
        Box::new(|tx| items.upsert(tx, &item(7, 2)).map(drop)),
        Box::new(|tx| dynamic.upsert_json(tx, br#"{"id": 7, "n": 3, "tag": "d"}"#).map(drop)),
        Box::new(|tx| dynamic.delete(tx, tessera::value::Doc::from_untrusted(&key7)?.root()).map(drop)),
        Box::new(|tx| dynamic.insert_json(tx, br#"{"id": 7, "n": 4, "tag": "e"}"#).map(drop)),
        Box::new(|tx| dynamic.insert_json(tx, br#"{"id": 8, "n": 4, "tag": "e"}"#).map(drop)),
        Box::new(|tx| items.delete(tx, &7u32).map(drop)),
        Box::new(|tx| items.upsert(tx, &item(7, 5)).map(drop)),
    ];
    for write in writes {
        let sequence = commit(&db, &feed, write);
        let expected = typed.follow(&db, sequence);
        assert_eq!(typed_general.follow(&db, sequence), expected);
        for follower in dyns.iter_mut() {
            assert_eq!(follower.follow(&db, sequence), expected, "{}", follower.label);
        }
        other_key.follow(&db, sequence);
    }
}

// ---------------------------------------------------------------------------------------------
// Queries that must not take the path by key still follow a fetch.

#[test]
fn near_misses_of_a_query_by_key_follow_their_fetch() {
    let (_dir, db) = open();
    let feed = db.subscribe().unwrap();
    let items = db.collection::<Item>().unwrap();
    let pairs = db.collection::<Pair>().unwrap();
    let mut item_followers = vec![
        Follower::new("offset 1", &items, items.filter(Item::id().eq(3u32)).offset(1), Policy::EveryChange),
        Follower::new("limit 0", &items, items.filter(Item::id().eq(3u32)).limit(0), Policy::EveryChange),
        Follower::new("id != 3", &items, items.filter(Item::id().ne(3u32)), Policy::EveryChange),
        Follower::new("id == 3 and n > 1", &items, items.filter(Item::id().eq(3u32).and(Item::n().gt(1))), Policy::EveryChange),
        Follower::new("id == 3 or id == 4", &items, items.filter(Item::id().eq(3u32).or(Item::id().eq(4u32))), Policy::EveryChange),
        Follower::new("n == 3", &items, items.filter(Item::n().eq(3)), Policy::EveryChange),
        Follower::new("id == -1", &items, items.filter(field("id").eq(-1)), Policy::EveryChange),
        Follower::new("id == 2^32 + 3", &items, items.filter(field("id").eq(4_294_967_299i64)), Policy::EveryChange),
        Follower::new("id == 3.0", &items, items.filter_text("id == 3.0").unwrap(), Policy::EveryChange),
        Follower::new(
            "offset 1 ordered",
            &items,
            items.filter(Item::id().eq(3u32)).order_by(Item::n(), Order::Asc).offset(1),
            Policy::EveryChange,
        ),
    ];
    let mut pair_followers = [
        Follower::new("a == 1 and b == x", &pairs, pairs.filter(Pair::a().eq(1u32).and(Pair::b().eq("x"))), Policy::EveryChange),
        Follower::new("a == 1", &pairs, pairs.filter(Pair::a().eq(1u32)), Policy::EveryChange),
        Follower::new("b == x", &pairs, pairs.filter(Pair::b().eq("x")), Policy::EveryChange),
    ];
    let mut rng = Rng(77);
    for _ in 0..60 {
        let sequence = commit(&db, &feed, |tx| {
            let id = 1 + rng.below(5) as u32;
            match rng.below(4) {
                0 => drop(items.delete(tx, &id)?),
                _ => drop(items.upsert(tx, &item(id, rng.below(5) as i64))?),
            }
            let (a, b) = (rng.below(3) as u32, ["x", "y", "x\0"][rng.below(3) as usize]);
            match rng.below(3) {
                0 => drop(pairs.delete(tx, &(a, b.to_owned()))?),
                _ => drop(pairs.upsert(tx, &Pair { a, b: b.into(), n: rng.below(9) as i64 })?),
            }
            Ok(())
        });
        for follower in item_followers.iter_mut() {
            follower.follow(&db, sequence);
        }
        for follower in pair_followers.iter_mut() {
            follower.follow(&db, sequence);
        }
    }
    assert!(item_followers[0].result.is_empty() && item_followers[1].result.is_empty(), "an offset or limit 0 leaves no row");
}

// ---------------------------------------------------------------------------------------------
// Policies and queue bounds.

#[test]
fn latest_only_merges_by_key_as_the_general_engine_does() {
    for seed in 1..=8u64 {
        let (_dir, db) = open();
        let feed = db.subscribe().unwrap();
        let items = db.collection::<Item>().unwrap();
        let mut rng = Rng(seed * 7919);
        let mut by_key = Follower::new("by key", &items, items.filter(Item::id().eq(2u32)), Policy::LatestOnly);
        let mut general = Follower::new("general", &items, items.filter(Item::id().eq(2u32).and(Item::id().eq(2u32))), Policy::LatestOnly);
        for round in 0..40 {
            // A few commits unread, then one read of both.
            let mut sequence = 0;
            for _ in 0..1 + rng.below(4) {
                sequence = commit(&db, &feed, |tx| match rng.below(3) {
                    0 => items.delete(tx, &2u32).map(drop),
                    1 => items.upsert(tx, &item(2, rng.below(3) as i64)).map(drop),
                    _ => items.upsert(tx, &item(1 + rng.below(3) as u32 * 2, 0)).map(drop),
                });
            }
            let mine = by_key.follow(&db, sequence);
            let theirs = general.follow(&db, sequence);
            assert_eq!(mine, theirs, "seed {seed}, round {round}: merged changesets differ");
        }
    }
}

#[test]
fn a_subscriber_by_key_far_behind_resynchronises_as_the_general_engine_does() {
    let (_dir, db) = open();

    let items = db.collection::<Item>().unwrap();
    let by_key = items.subscribe_query(&items.filter(Item::id().eq(1u32))).unwrap();
    let general = items.subscribe_query(&items.filter(Item::id().ge(1u32).and(Item::id().le(1u32)))).unwrap();
    let object = items.subscribe_object(&1u32).unwrap();
    assert!(initial(by_key.recv_timeout(WAIT)).is_empty());
    assert!(initial(general.recv_timeout(WAIT)).is_empty());
    assert!(initial(object.recv_timeout(WAIT)).is_none());
    let commits = tessera::live::QUEUE_LEN_MAX + 30;
    let mut last = 0;
    for round in 0..commits {
        last = db
            .write(|tx| {
                match round % 5 {
                    4 => drop(items.delete(tx, &1u32)?),
                    _ => drop(items.upsert(tx, &item(1, round as i64))?),
                }
                Ok(tx.sequence())
            })
            .unwrap();
    }
    // The engine applies commits in order: once a later commit (subscribed to now, so that
    // the feed's queue did not overflow) has passed it, every one has been applied.
    let feed = db.subscribe().unwrap();
    commit(&db, &feed, |_| Ok(()));
    let drain = |live: &QuerySubscription<Item>| {
        let mut changes = Vec::new();
        while let Some(event) = live.try_recv() {
            changes.push(changed(Some(event)));
        }
        changes
    };
    let (mine, theirs) = (drain(&by_key), drain(&general));
    assert_eq!(mine.len(), tessera::live::QUEUE_LEN_MAX, "the queue held its bound");
    assert_eq!(mine.iter().map(lists).collect::<Vec<_>>(), theirs.iter().map(lists).collect::<Vec<_>>());
    assert_eq!(
        mine.iter().map(|change| change.sequence).collect::<Vec<_>>(),
        theirs.iter().map(|change| change.sequence).collect::<Vec<_>>()
    );
    assert!(mine.last().unwrap().resynced && mine.iter().rev().skip(1).all(|change| !change.resynced));
    assert_eq!(mine.last().unwrap().sequence, last);
    let mut result: Vec<Item> = Vec::new();
    for change in &mine {
        result = apply(&result, change);
    }
    assert_eq!(result, items.filter(Item::id().eq(1u32)).fetch(&db).unwrap());
}

// ---------------------------------------------------------------------------------------------
// Ends.

#[test]
fn a_query_by_key_ends_when_the_database_closes() {
    let (_dir, db) = open();
    let items = db.collection::<Item>().unwrap();
    db.write(|tx| items.upsert(tx, &item(1, 1)).map(drop)).unwrap();
    let by_key = items.subscribe_query(&items.filter(Item::id().eq(1u32))).unwrap();
    let absent = items.subscribe_query_with(&items.filter(Item::id().eq(2u32)), Policy::LatestOnly).unwrap();
    assert_eq!(initial(by_key.recv_timeout(WAIT)).len(), 1);
    drop((items, db));
    for live in [&by_key, &absent] {
        let mut events = Vec::new();
        while let Some(event) = live.recv_timeout(WAIT) {
            events.push(event);
        }
        assert!(
            matches!(events.last(), Some(Event::Closed(SubscriptionEnd::DatabaseClosed))),
            "expected Closed(DatabaseClosed) last, got {} events",
            events.len()
        );
        assert!(matches!(live.ended(), Some(SubscriptionEnd::DatabaseClosed)));
    }
}

#[test]
fn a_query_by_key_ends_when_another_handle_changes_the_shape_and_not_for_an_index() {
    let (_dir, db) = open();
    let feed = db.subscribe().unwrap();
    let items = db.collection::<Item>().unwrap();
    commit(&db, &feed, |tx| items.upsert(tx, &item(1, 1)).map(drop));
    let mut by_key = Follower::new("by key", &items, items.filter(Item::id().eq(1u32)), Policy::EveryChange);
    let other = items.subscribe_query(&items.filter(Item::id().eq(2u32))).unwrap();
    assert!(initial(other.recv_timeout(WAIT)).is_empty());
    // An index only: the subscription goes on.
    let indexed = db.collection::<IndexedItem>().unwrap();
    let sequence = commit(&db, &feed, |tx| indexed.upsert(tx, &IndexedItem { id: 1, n: 2, tag: "b".into() }).map(drop));
    assert_eq!(by_key.follow(&db, sequence), Some((vec![], vec![], vec![0], vec![], false)));
    // Another shape: it ends, with nothing after.
    let noted = db.collection::<ItemWithNote>().unwrap();
    commit(&db, &feed, |tx| noted.upsert(tx, &ItemWithNote { id: 1, n: 3, tag: "c".into(), note: None }).map(drop));
    for live in [&by_key.live, &other] {
        match live.recv_timeout(WAIT) {
            Some(Event::Closed(SubscriptionEnd::Failed(error))) => {
                assert!(matches!(&*error, Error::SchemaMismatch { collection, .. } if collection == "items"), "{error}")
            }
            other => panic!("expected Closed(Failed(SchemaMismatch)), got {other:?}"),
        }
        assert!(live.recv_timeout(Duration::from_millis(50)).is_none());
    }
    // Through the old handle a new subscription by key is refused, as a query would be.
    assert!(items.subscribe_query(&items.filter(Item::id().eq(1u32))).is_err());
    // Through the new one it follows the new shape.
    let again = noted.subscribe_query(&noted.filter(ItemWithNote::id().eq(1u32))).unwrap();
    assert_eq!(initial(again.recv_timeout(WAIT)).len(), 1);
    commit(&db, &feed, |tx| noted.delete(tx, &1u32).map(drop));
    assert_eq!(changed(again.recv_timeout(WAIT)).deletions, [0]);
}

// ---------------------------------------------------------------------------------------------
// Concurrency and several subscriptions to one key.

#[test]
fn queries_by_key_made_while_another_thread_writes_see_every_commit_after_their_initial_result() {
    let (_dir, db) = open();
    let items = db.collection::<Item>().unwrap();
    const WRITES: i64 = 400;
    let writer = {
        let (db, items) = (db.clone(), items.clone());
        std::thread::spawn(move || {
            for n in 1..=WRITES {
                db.write(|tx| {
                    items.upsert(tx, &item(5, n))?;
                    items.upsert(tx, &item(6, n)).map(drop)
                })
                .unwrap();
                if n % 97 == 0 {
                    db.write(|tx| items.delete(tx, &5u32).map(drop)).unwrap();
                }
            }
        })
    };
    let mut subscriptions = Vec::new();
    while !writer.is_finished() && subscriptions.len() < 40 {
        let policy = if subscriptions.len() % 4 == 3 { Policy::LatestOnly } else { Policy::EveryChange };
        let general = subscriptions.len() % 2 == 1;
        let query = if general { items.filter(Item::id().ge(5u32).and(Item::id().le(5u32))) } else { items.filter(Item::id().eq(5u32)) };
        subscriptions.push((general, policy, items.subscribe_query_with(&query, policy).unwrap()));
        std::thread::sleep(Duration::from_millis(1));
    }
    writer.join().unwrap();
    let final_result = items.filter(Item::id().eq(5u32)).fetch(&db).unwrap();
    assert_eq!(final_result, [item(5, WRITES)]);
    for (index, (general, policy, live)) in subscriptions.iter().enumerate() {
        let label = format!("subscription {index} (general: {general}, {policy:?})");
        let mut result: Vec<Item> = initial(live.recv_timeout(WAIT)).iter().map(|value| (**value).clone()).collect();
        let mut last_sequence = 0;
        // (unknown while the subscription has seen no row: it may start after a delete)
        let mut last_n = result.first().map(|item| item.n);
        while result != final_result {
            let change = match live.recv_timeout(WAIT) {
                Some(Event::Changed(change)) => change,
                other => panic!("{label}: expected a change towards {final_result:?} from {result:?}, got {other:?}"),
            };
            assert!(change.sequence > last_sequence, "{label}: sequences increase");
            last_sequence = change.sequence;
            result = apply(&result, &change);
            if let (Some(now), Policy::EveryChange) = (result.first(), policy) {
                // Every commit is seen: n grows by one from one write of key 5 to the next
                // (a delete in between leaves no row).
                assert!(last_n.is_none_or(|last| now.n == last + 1), "{label}: from n = {last_n:?} to {}", now.n);
                last_n = Some(now.n);
            }
        }
        assert!(live.recv_timeout(Duration::from_millis(20)).is_none(), "{label}: a delivery after the last commit");
    }
}

#[test]
fn several_subscriptions_to_one_key_go_on_as_others_are_dropped() {
    let (_dir, db) = open();
    let feed = db.subscribe().unwrap();
    let items = db.collection::<Item>().unwrap();
    let mut queries: Vec<Option<Follower<Item>>> = (0..6)
        .map(|index| {
            let policy = if index % 3 == 2 { Policy::LatestOnly } else { Policy::EveryChange };
            Some(Follower::new(format!("query {index}"), &items, items.filter(Item::id().eq(4u32)), policy))
        })
        .collect();
    let mut objects: Vec<Option<tessera::ObjectSubscription<Item>>> = (0..4)
        .map(|_| {
            let object = items.subscribe_object(&4u32).unwrap();
            assert!(initial(object.recv_timeout(WAIT)).is_none());
            Some(object)
        })
        .collect();
    let drops = [(0, true), (1, false), (3, true), (2, false), (5, true), (0, false), (1, true)];
    for (round, &(index, query)) in drops.iter().enumerate() {
        let sequence = commit(&db, &feed, |tx| match round % 3 {
            2 => items.delete(tx, &4u32).map(drop),
            _ => items.upsert(tx, &item(4, round as i64)).map(drop),
        });
        let now = items.get(&db, &4u32).unwrap();
        for follower in queries.iter_mut().flatten() {
            follower.follow(&db, sequence);
        }
        for object in objects.iter().flatten() {
            let expected = match &now {
                Some(value) => matches!(changed(object.recv_timeout(WAIT)), ObjectChange::Updated(got) if *got == *value),
                None => matches!(changed(object.recv_timeout(WAIT)), ObjectChange::Deleted),
            };
            assert!(expected, "round {round}: an object subscription missed the change");
        }
        if query {
            queries[index] = None;
        } else {
            objects[index] = None;
        }
        // A new one to the same key, made after others were dropped.
        if round == 3 {
            queries.push(Some(Follower::new("late", &items, items.filter(Item::id().eq(4u32)), Policy::EveryChange)));
        }
    }
    assert!(queries.iter().flatten().count() >= 3 && objects.iter().flatten().count() >= 1);
    for round in 0..4 {
        let sequence = commit(&db, &feed, |tx| items.upsert(tx, &item(4, 100 + round)).map(drop));
        for follower in queries.iter_mut().flatten() {
            follower.follow(&db, sequence);
        }
    }
    // All gone, then one again: it starts from the record as it is.
    queries.clear();
    objects.clear();
    commit(&db, &feed, |tx| items.upsert(tx, &item(4, 200)).map(drop));
    let mut again = Follower::new("again", &items, items.filter(Item::id().eq(4u32)), Policy::EveryChange);
    assert_eq!(again.result, [item(4, 200)]);
    let sequence = commit(&db, &feed, |tx| items.delete(tx, &4u32).map(drop));
    assert_eq!(again.follow(&db, sequence), Some((vec![0], vec![], vec![], vec![], false)));
}

#[test]
fn a_query_by_key_and_a_query_in_the_matcher_share_a_commit_of_many_changes() {
    // A collection with a general query too takes the engine's other path: a commit of many
    // changes reaches the subscription by key with its one change, in order.
    let (_dir, db) = open();
    let feed = db.subscribe().unwrap();
    let items = db.collection::<Item>().unwrap();
    let mut by_key = Follower::new("by key", &items, items.filter(Item::id().eq(500u32)), Policy::EveryChange);
    let mut all = Follower::new("all", &items, items.all().order_by(Item::n(), Order::Desc), Policy::EveryChange);
    let sequence = commit(&db, &feed, |tx| (0..1500).try_for_each(|id| items.upsert(tx, &item(id, id as i64 % 7)).map(drop)));
    assert_eq!(by_key.follow(&db, sequence), Some((vec![], vec![0], vec![], vec![], false)));
    all.follow(&db, sequence);
    let sequence = commit(&db, &feed, |tx| (0..1500).step_by(2).try_for_each(|id| items.delete(tx, &id).map(drop)));
    assert_eq!(by_key.follow(&db, sequence), Some((vec![0], vec![], vec![], vec![], false)));
    all.follow(&db, sequence);
    // The general query dropped: the path by key alone again.
    drop(all);
    let sequence = commit(&db, &feed, |tx| (0..1500).try_for_each(|id| items.upsert(tx, &item(id, 1)).map(drop)));
    assert_eq!(by_key.follow(&db, sequence), Some((vec![], vec![0], vec![], vec![], false)));
    let sequence = commit(&db, &feed, |tx| items.upsert(tx, &item(499, 3)).map(drop));
    assert_eq!(by_key.follow(&db, sequence), None);
}
