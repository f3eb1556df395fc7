//! Review of writes to typed collections: every write's outcome against a model, refused
//! writes caught inside their transaction leaving nothing, unique values (NULLs, long strings
//! with truncated entries) moved between records, multi-entry indexes, writers on several
//! threads (`write` and `write_grouped`), a write run again after the map grew, and handles of
//! another record type whose schema an open changes.

use proptest::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use tessera::collection::{Collection, Embed, Record, WriteOutcome};
use tessera::query::{Expr, field};
use tessera::{Db, Error};

fn open() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    (dir, db)
}

#[derive(Embed, Debug, Clone, PartialEq)]
struct Meta {
    zip: i32,
    city: Option<String>,
}

#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "items", index = "meta.city", unique = "meta.zip")]
struct Item {
    #[record(key)]
    id: u32,
    #[record(unique)]
    email: Option<String>,
    #[record(index)]
    count: i32,
    #[record(index_elements)]
    tags: Vec<String>,
    meta: Meta,
    attrs: HashMap<String, i32>,
}

fn item(id: u32) -> Item {
    Item { id, email: None, count: id as i32, tags: vec![], meta: Meta { zip: id as i32, city: None }, attrs: HashMap::new() }
}

/// A record with a `HashMap` field of two or more entries was encoded in the map's iteration
/// order, which differs between two equal maps (each has its own random hasher), so an upsert
/// of the record equal to the stored one, or an update that changes nothing, returned
/// `Updated`, rewrote it and published a change that changed nothing. The map's entries are
/// now written in key order.
#[test]
fn an_upsert_of_an_equal_record_with_a_map_field_is_unchanged() {
    let (_dir, db) = open();
    let items = db.collection::<Item>().unwrap();
    let mut stored = item(1);
    stored.attrs = (0..8).map(|i| (format!("k{i}"), i)).collect();
    db.write(|tx| items.insert(tx, &stored)).unwrap();
    let feed = db.subscribe().unwrap();
    for _ in 0..4 {
        let equal = items.get(&db, &1u32).unwrap().unwrap(); // a new map, with another hasher
        assert_eq!(equal, stored);
        assert_eq!(db.write(|tx| items.upsert(tx, &equal)).unwrap(), WriteOutcome::Unchanged);
        assert_eq!(db.write(|tx| items.update(tx, &1u32, |_| {})).unwrap(), WriteOutcome::Unchanged);
        assert_eq!(db.write(|tx| items.patch(tx, &1u32, "attrs.k3", &3)).unwrap(), WriteOutcome::Unchanged);
    }
    assert!(feed.recv_timeout(Duration::from_millis(50)).is_none(), "a write that changed nothing was published");
}

// ---------------------------------------------------------------------------------------------
// An oracle over random transactions: exact outcomes, refused writes caught inside the
// transaction, unique values (long ones with truncated entries, NULLs) moved between records.

#[derive(Embed, Debug, Clone, PartialEq)]
struct Place {
    zip: Option<i32>,
    city: String,
}

#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "accounts", unique = "place.zip", index = "place.city")]
struct Account {
    #[record(key)]
    id: u8,
    #[record(unique)]
    handle: String,
    #[record(unique)]
    email: Option<String>,
    #[record(index_elements)]
    tags: Vec<String>,
    place: Place,
}

/// Past 510 escaped bytes a unique entry is truncated: these two share their prefix.
fn word(index: u8) -> String {
    match index {
        0 => String::new(),
        1 => "a".into(),
        2 => "b".into(),
        3 => format!("{}1", "x".repeat(600)),
        _ => format!("{}2", "x".repeat(600)),
    }
}
const WORDS: std::ops::Range<u8> = 0..5;
const ACCOUNT_IDS: std::ops::Range<u8> = 0..6;

fn account() -> impl Strategy<Value = Account> {
    (ACCOUNT_IDS, WORDS, prop::option::of(WORDS), prop::collection::vec(WORDS, 0..4), prop::option::of(0..4i32), WORDS).prop_map(
        |(id, handle, email, tags, zip, city)| Account {
            id,
            handle: word(handle),
            email: email.map(word),
            tags: tags.into_iter().map(word).collect(),
            place: Place { zip, city: word(city) },
        },
    )
}

#[derive(Debug, Clone)]
enum Op {
    Insert(Account),
    Upsert(Account),
    /// Update whole: the drawn record's fields onto `id` (the key kept, or changed when `rekey`).
    Update(u8, Account, bool),
    PatchHandle(u8, u8),
    PatchZip(u8, Option<i32>),
    PatchPlace(u8, Option<i32>, u8),
    PatchTags(u8, Vec<u8>),
    Delete(u8),
    /// Swaps two records' handles: directly (refused) then through a temporary value.
    Swap(u8, u8),
    DeleteWhereHandle(u8),
    DeleteWhereTag(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => account().prop_map(Op::Insert),
        3 => account().prop_map(Op::Upsert),
        3 => (ACCOUNT_IDS, account(), prop::bool::weighted(0.1)).prop_map(|(id, a, rekey)| Op::Update(id, a, rekey)),
        2 => (ACCOUNT_IDS, WORDS).prop_map(|(id, w)| Op::PatchHandle(id, w)),
        1 => (ACCOUNT_IDS, prop::option::of(0..4i32)).prop_map(|(id, z)| Op::PatchZip(id, z)),
        1 => (ACCOUNT_IDS, prop::option::of(0..4i32), WORDS).prop_map(|(id, z, c)| Op::PatchPlace(id, z, c)),
        1 => (ACCOUNT_IDS, prop::collection::vec(WORDS, 0..3)).prop_map(|(id, t)| Op::PatchTags(id, t)),
        2 => ACCOUNT_IDS.prop_map(Op::Delete),
        1 => (ACCOUNT_IDS, ACCOUNT_IDS).prop_map(|(a, b)| Op::Swap(a, b)),
        1 => WORDS.prop_map(Op::DeleteWhereHandle),
        1 => WORDS.prop_map(Op::DeleteWhereTag),
    ]
}

#[derive(Debug, PartialEq)]
enum Outcome {
    Done(WriteOutcome),
    Duplicate,
    NotFound,
    Unique,
    KeyChanged,
}

fn outcome(result: tessera::Result<WriteOutcome>) -> Outcome {
    match result {
        Ok(done) => Outcome::Done(done),
        Err(Error::DuplicateKey { .. }) => Outcome::Duplicate,
        Err(Error::NotFound { .. }) => Outcome::NotFound,
        Err(Error::UniqueViolation { .. }) => Outcome::Unique,
        Err(Error::KeyChanged { .. }) => Outcome::KeyChanged,
        Err(other) => panic!("unexpected error {other:?}"),
    }
}

#[derive(Clone, Default)]
struct Model {
    rows: BTreeMap<u8, Account>,
}

impl Model {
    fn taken(&self, new: &Account) -> bool {
        self.rows.values().filter(|other| other.id != new.id).any(|other| {
            other.handle == new.handle
                || (new.email.is_some() && other.email == new.email)
                || (new.place.zip.is_some() && other.place.zip == new.place.zip)
        })
    }

    fn store(&mut self, new: Account) -> Outcome {
        if self.taken(&new) {
            return Outcome::Unique;
        }
        Outcome::Done(match self.rows.insert(new.id, new.clone()) {
            None => WriteOutcome::Inserted,
            Some(old) if old == new => WriteOutcome::Unchanged,
            Some(_) => WriteOutcome::Updated,
        })
    }

    fn change(&mut self, id: u8, change: impl FnOnce(&mut Account)) -> Outcome {
        let Some(mut account) = self.rows.get(&id).cloned() else { return Outcome::NotFound };
        change(&mut account);
        if account.id != id {
            return Outcome::KeyChanged;
        }
        self.store(account)
    }

    fn delete_where(&mut self, keep: impl Fn(&Account) -> bool) -> usize {
        let before = self.rows.len();
        self.rows.retain(|_, account| keep(account));
        before - self.rows.len()
    }
}

fn apply(accounts: &Collection<Account>, tx: &mut tessera::WriteTxn<'_>, model: &mut Model, op: &Op) -> Result<(), String> {
    let agree = |what: &str, got: Outcome, want: Outcome| {
        if got == want { Ok(()) } else { Err(format!("{what}: database {got:?}, model {want:?}")) }
    };
    let what = format!("{op:?}");
    match op {
        Op::Insert(a) => {
            let want = if model.rows.contains_key(&a.id) { Outcome::Duplicate } else { model.store(a.clone()) };
            agree(&what, outcome(accounts.insert(tx, a)), want)
        }
        Op::Upsert(a) => agree(&what, outcome(accounts.upsert(tx, a)), model.store(a.clone())),
        Op::Update(id, a, rekey) => {
            let set = |account: &mut Account| {
                let id = if *rekey { a.id } else { account.id };
                *account = Account { id, ..a.clone() };
            };
            agree(&what, outcome(accounts.update(tx, id, set)), model.change(*id, set))
        }
        Op::PatchHandle(id, w) => {
            agree(&what, outcome(accounts.patch(tx, id, "handle", &word(*w))), model.change(*id, |a| a.handle = word(*w)))
        }
        Op::PatchZip(id, z) => agree(&what, outcome(accounts.patch(tx, id, "place.zip", z)), model.change(*id, |a| a.place.zip = *z)),
        Op::PatchPlace(id, z, c) => {
            let place = Place { zip: *z, city: word(*c) };
            let json = serde_json::json!({ "zip": z, "city": word(*c) });
            agree(&what, outcome(accounts.patch(tx, id, "place", &json)), model.change(*id, |a| a.place = place))
        }
        Op::PatchTags(id, tags) => {
            let tags: Vec<String> = tags.iter().map(|w| word(*w)).collect();
            agree(&what, outcome(accounts.patch(tx, id, "tags", &tags)), model.change(*id, |a| a.tags = tags.clone()))
        }
        Op::Delete(id) => {
            let want = Outcome::Done(if model.rows.remove(id).is_some() { WriteOutcome::Deleted } else { WriteOutcome::Unchanged });
            agree(&what, outcome(accounts.delete(tx, id)), want)
        }
        Op::Swap(a, b) => {
            let (Some(first), Some(second)) = (model.rows.get(a).cloned(), model.rows.get(b).cloned()) else { return Ok(()) };
            let direct = outcome(accounts.update(tx, a, |x| x.handle = second.handle.clone()));
            agree(&format!("{what} direct"), direct, model.change(*a, |x| x.handle = second.handle.clone()))?;
            let temporary = "tmp".to_owned();
            agree(&what, outcome(accounts.patch(tx, a, "handle", &temporary)), model.change(*a, |x| x.handle = temporary.clone()))?;
            agree(&what, outcome(accounts.patch(tx, b, "handle", &first.handle)), model.change(*b, |x| x.handle = first.handle.clone()))?;
            agree(&what, outcome(accounts.patch(tx, a, "handle", &second.handle)), model.change(*a, |x| x.handle = second.handle.clone()))
        }
        Op::DeleteWhereHandle(w) => {
            let query = accounts.filter(Account::handle().eq(word(*w)));
            let got = accounts.delete_where(tx, &query).map_err(|e| e.to_string())?;
            let want = model.delete_where(|a| a.handle != word(*w));
            if got == want { Ok(()) } else { Err(format!("{what}: deleted {got}, model {want}")) }
        }
        Op::DeleteWhereTag(w) => {
            let query = accounts.filter(Account::tags().contains(word(*w).as_str()));
            let got = accounts.delete_where(tx, &query).map_err(|e| e.to_string())?;
            let want = model.delete_where(|a| !a.tags.contains(&word(*w)));
            if got == want { Ok(()) } else { Err(format!("{what}: deleted {got}, model {want}")) }
        }
    }
}

/// The model's side of a predicate.
type Keep<'a> = Box<dyn Fn(&Account) -> bool + 'a>;

/// Records by a full scan, and every index by the queries it serves, against the model.
fn agrees(db: &Db, accounts: &Collection<Account>, model: &Model) -> Result<(), TestCaseError> {
    let all = accounts.all().fetch(db).unwrap();
    prop_assert_eq!(&all, &model.rows.values().cloned().collect::<Vec<_>>());
    let ids = |found: Vec<Account>| found.into_iter().map(|a| a.id).collect::<Vec<_>>();
    let expect = |keep: &dyn Fn(&Account) -> bool| model.rows.values().filter(|a| keep(a)).map(|a| a.id).collect::<Vec<_>>();
    for w in WORDS {
        let w = word(w);
        let cases: Vec<(Expr, Keep<'_>)> = vec![
            (Account::handle().eq(w.clone()), Box::new(|a: &Account| a.handle == w)),
            (Account::email().eq(w.clone()), Box::new(|a: &Account| a.email.as_deref() == Some(w.as_str()))),
            (Account::tags().contains(w.as_str()), Box::new(|a: &Account| a.tags.contains(&w))),
            (field("place.city").eq(w.clone()), Box::new(|a: &Account| a.place.city == w)),
        ];
        for (predicate, keep) in cases {
            let query = accounts.filter(predicate.clone());
            let plan = query.explain().unwrap().to_string();
            prop_assert!(plan.starts_with("index range") || plan.starts_with("union"), "{}: {}", predicate, plan);
            let mut found = ids(query.fetch(db).unwrap());
            found.sort_unstable();
            prop_assert_eq!(found, expect(&*keep), "{}: {}", predicate, plan);
        }
    }
    for zip in 0..4 {
        let query = accounts.filter(field("place.zip").eq(zip));
        prop_assert_eq!(ids(query.fetch(db).unwrap()), expect(&|a: &Account| a.place.zip == Some(zip)));
    }
    let nulls = accounts.filter(Account::email().is_null());
    prop_assert!(nulls.explain().unwrap().to_string().starts_with("index range"));
    prop_assert_eq!(ids(nulls.fetch(db).unwrap()), expect(&|a: &Account| a.email.is_none()));
    let report = db.check().unwrap();
    prop_assert!(report.is_ok(), "{}", report);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// Guards every write's outcome and the all-or-nothing rule: each refused write is caught
    /// inside its transaction, which then commits (or is rolled back by an error at its end).
    #[test]
    fn writes_match_a_model_with_exact_outcomes(txns in prop::collection::vec((prop::collection::vec(op(), 1..6), prop::bool::weighted(0.2)), 1..6)) {
        let (_dir, db) = open();
        let accounts = db.collection::<Account>().unwrap();
        let mut model = Model::default();
        for (ops, abort) in &txns {
            let mut staged = model.clone();
            let mut mismatch = None;
            let result = db.write(|tx| {
                staged = model.clone();
                for op in ops {
                    if let Err(problem) = apply(&accounts, tx, &mut staged, op) {
                        mismatch = Some(problem);
                        break;
                    }
                }
                if *abort { Err(Error::Corrupted("abort".into())) } else { Ok(()) }
            });
            if let Some(problem) = mismatch {
                prop_assert!(false, "{}", problem);
            }
            prop_assert_eq!(result.is_err(), *abort);
            if !*abort {
                model = staged;
            }
            agrees(&db, &accounts, &model)?;
        }
    }
}

fn named(id: u8, handle: &str) -> Account {
    Account { id, handle: handle.into(), email: None, tags: vec![handle.into()], place: Place { zip: None, city: String::new() } }
}

/// Guards atomic moves of unique values between records under several writer threads, with
/// `write` and `write_grouped`: the handles stay a permutation, and every index agrees.
#[test]
fn threads_swapping_unique_values_keep_them_a_permutation() {
    let (_dir, db) = open();
    let accounts = db.collection::<Account>().unwrap();
    db.write(|tx| (0..6).try_for_each(|id| accounts.insert(tx, &named(id, &format!("h{id}"))).map(drop))).unwrap();
    std::thread::scope(|scope| {
        for thread in 0..4u8 {
            let (db, accounts) = (db.clone(), accounts.clone());
            scope.spawn(move || {
                let mut rng = fastrand::Rng::with_seed(u64::from(thread));
                for _ in 0..25 {
                    let (a, b) = (rng.u8(0..6), rng.u8(0..6));
                    let tmp = format!("tmp{thread}");
                    let accounts = accounts.clone();
                    let swap = move |tx: &mut tessera::WriteTxn<'_>| {
                        let first = accounts.get(&*tx, &a)?.expect("stored").handle;
                        let second = accounts.get(&*tx, &b)?.expect("stored").handle;
                        accounts.update(tx, &a, |x| x.handle = tmp.clone())?;
                        accounts.update(tx, &b, |x| x.handle = first.clone())?;
                        let last = accounts.update(tx, &a, |x| x.handle = second.clone())?;
                        // Refused (b holds `first` now), caught: changes nothing.
                        let refused = accounts.patch(tx, &a, "handle", &first);
                        assert!(a == b || matches!(refused, Err(Error::UniqueViolation { .. })), "{refused:?}");
                        Ok(last)
                    };
                    let outcome = if rng.bool() { db.write(swap.clone()) } else { db.write_grouped(swap) };
                    let expected = if a == b { WriteOutcome::Unchanged } else { WriteOutcome::Updated };
                    assert_eq!(outcome.unwrap(), expected);
                }
            });
        }
    });
    let mut handles: Vec<String> = accounts.all().fetch(&db).unwrap().into_iter().map(|a| a.handle).collect();
    handles.sort();
    assert_eq!(handles, (0..6).map(|id| format!("h{id}")).collect::<Vec<_>>());
    for id in 0..6 {
        let handle = format!("h{id}");
        let holders = accounts.filter(Account::handle().eq(handle.clone())).fetch(&db).unwrap();
        assert_eq!(holders.len(), 1, "{handle}");
        assert_eq!(holders[0].handle, handle);
        assert_eq!(accounts.filter(field("handle").eq("tmp0")).count(&db).unwrap(), 0);
    }
    assert!(db.check().unwrap().is_ok());
}

/// Guards the outcome of grouped writers racing for one unique value: exactly one is
/// `Inserted`, every other caller gets `UniqueViolation` naming that one, and a member run
/// again after another's failure reports its final run.
#[test]
fn grouped_writers_racing_for_a_unique_value_one_wins() {
    let (_dir, db) = open();
    let accounts = db.collection::<Account>().unwrap();
    for round in 0..5u8 {
        let outcomes: Vec<(u8, tessera::Result<WriteOutcome>)> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..6u8)
                .map(|thread| {
                    let (db, accounts) = (db.clone(), accounts.clone());
                    scope.spawn(move || {
                        let id = round * 6 + thread;
                        let account = named(id, &format!("round{round}"));
                        (id, db.write_grouped(move |tx| accounts.insert(tx, &account)))
                    })
                })
                .collect();
            workers.into_iter().map(|worker| worker.join().unwrap()).collect()
        });
        let winners: Vec<u8> = outcomes.iter().filter(|(_, r)| matches!(r, Ok(WriteOutcome::Inserted))).map(|(id, _)| *id).collect();
        assert_eq!(winners.len(), 1, "{outcomes:?}");
        for (_, outcome) in &outcomes {
            match outcome {
                Ok(WriteOutcome::Inserted) => {}
                Err(Error::UniqueViolation { holder, .. }) => assert_eq!(holder, &winners[0].to_string()),
                other => panic!("{other:?}"),
            }
        }
        let stored = accounts.filter(Account::handle().eq(format!("round{round}"))).fetch(&db).unwrap();
        assert_eq!(stored.iter().map(|a| a.id).collect::<Vec<_>>(), winners);
    }
    assert_eq!(accounts.all().count(&db).unwrap(), 5);
    assert!(db.check().unwrap().is_ok());
}

/// Guards a write closure run again because the map grew: the outcome returned is the final
/// run's, and what the first run wrote is not there twice.
#[test]
fn a_write_run_again_after_the_map_grew_reports_its_final_run() {
    let dir = tempfile::tempdir().unwrap();
    let options = tessera::DbOptions { map_size_initial_bytes: 256 << 10, ..tessera::DbOptions::default() };
    let db = Db::open_with(dir.path().join("db"), options).unwrap();
    let accounts = db.collection::<Account>().unwrap();
    db.write(|tx| accounts.insert(tx, &named(0, "first"))).unwrap();
    let mut runs = 0;
    let outcomes = db
        .write(|tx| {
            runs += 1;
            let mut outcomes = vec![accounts.update(tx, &0u8, |a| a.tags.push("again".into()))?];
            for id in 1..=200u8 {
                let mut account = named(id, &format!("{id}-{}", "y".repeat(2000)));
                account.tags = (0..20).map(|t| format!("{id}-{t}")).collect();
                outcomes.push(accounts.upsert(tx, &account)?);
            }
            outcomes.push(accounts.upsert(tx, &named(0, "first"))?);
            Ok(outcomes)
        })
        .unwrap();
    assert!(runs > 1, "the map did not grow: the test needs a smaller map");
    assert_eq!(outcomes[0], WriteOutcome::Updated);
    assert!(outcomes[1..=200].iter().all(|o| *o == WriteOutcome::Inserted), "{outcomes:?}");
    assert_eq!(outcomes[201], WriteOutcome::Updated);
    assert_eq!(accounts.get(&db, &0u8).unwrap(), Some(named(0, "first")));
    assert_eq!(accounts.filter(Account::tags().contains("again")).count(&db).unwrap(), 0);
    assert_eq!(accounts.all().count(&db).unwrap(), 201);
    assert!(db.check().unwrap().is_ok());
}

mod raced_v1 {
    use super::*;
    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "raced")]
    pub struct Row {
        #[record(key)]
        pub id: u32,
        pub a: i32,
    }
}
mod raced_v2 {
    use super::*;
    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "raced")]
    pub struct Row {
        #[record(key)]
        pub id: u32,
        #[record(unique)]
        pub a: i32,
    }
}

/// Was wrong: an open of the collection as another record type (here declaring `a` unique,
/// built in the open's transaction) marked this process's older handle superseded only after
/// its commit had released the writer lock. A write through the old handle waiting for that
/// lock ran first: `Ok(Inserted)` with no entry in the new index, so `a == x` through the new
/// handle missed the record and the unique constraint was not enforced for it.
#[test]
fn an_open_that_changes_the_indexes_stops_the_old_handles_writes_at_its_commit() {
    for _round in 0..8 {
        let (_dir, db) = open();
        let old = db.collection::<raced_v1::Row>().unwrap();
        db.write(|tx| old.insert(tx, &raced_v1::Row { id: 0, a: 0 })).unwrap();
        let new = std::thread::scope(|scope| {
            let writer = scope.spawn(|| {
                for id in 1..10_000u32 {
                    match db.write(|tx| old.insert(tx, &raced_v1::Row { id, a: id as i32 })) {
                        Ok(outcome) => assert_eq!(outcome, WriteOutcome::Inserted),
                        Err(Error::SchemaMismatch { .. }) => return,
                        Err(other) => panic!("{other:?}"),
                    }
                }
                panic!("the old handle was never refused");
            });
            std::thread::sleep(Duration::from_millis(1));
            let new = db.collection::<raced_v2::Row>().unwrap();
            writer.join().unwrap();
            new
        });
        for row in new.all().fetch(&db).unwrap() {
            let query = new.filter(raced_v2::Row::a().eq(row.a));
            assert!(query.explain().unwrap().to_string().starts_with("index range on a"));
            assert_eq!(query.fetch(&db).unwrap(), vec![row.clone()], "record {} through the unique index", row.id);
        }
        let report = db.check().unwrap();
        assert!(report.is_ok(), "{report}");
    }
}

mod raced_v1b {
    use super::*;
    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "raced", version = 2)]
    pub struct Row {
        #[record(key)]
        pub id: u32,
        pub a: i32,
    }
}

/// An open that changes the schema superseded only the state it found registered, the newest
/// of this process. A handle of an older record type with the same schema (replaced in the
/// registry by the second type's open) went on writing by the old indexes: `Ok(Inserted)` for
/// a record holding a value that the new unique index has for another key, with no entry in
/// that index. A state now keeps the same-schema states it replaced, superseded with it.
#[test]
fn an_open_that_changes_the_indexes_stops_every_older_handle_of_the_same_schema() {
    let (_dir, db) = open();
    let first = db.collection::<raced_v1::Row>().unwrap();
    let second = db.collection::<raced_v1b::Row>().unwrap(); // same schema, a new version
    db.write(|tx| second.insert(tx, &raced_v1b::Row { id: 0, a: 0 })).unwrap();
    db.write(|tx| first.insert(tx, &raced_v1::Row { id: 5, a: 5 })).unwrap();
    let third = db.collection::<raced_v2::Row>().unwrap(); // `a` unique
    let refused = db.write(|tx| second.insert(tx, &raced_v1b::Row { id: 2, a: 0 }));
    assert!(matches!(refused, Err(Error::SchemaMismatch { .. })), "{refused:?}");
    let refused = db.write(|tx| first.insert(tx, &raced_v1::Row { id: 1, a: 0 }));
    assert!(matches!(refused, Err(Error::SchemaMismatch { .. })), "{refused:?}");
    assert_eq!(third.filter(raced_v2::Row::a().eq(0)).count(&db).unwrap(), 1);
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{report}");
}
