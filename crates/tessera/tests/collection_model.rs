//! Typed collections with unique indexes (top-level, optional, nested), float and u64
//! index fields, enums and nested structs, against a naive oracle: random transactions whose
//! refused writes are tolerated (the transaction goes on), some rolled back, some failing;
//! after each, the stored records, every index (Db::check), index-served queries and the
//! oracle must agree.

use proptest::prelude::*;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use tessera::collection::{Embed, Nulls, Order, Record};
use tessera::query::{CompareOp, Expr, Literal, field};
use tessera::{Db, Error, WriteOutcome};

#[derive(Embed, Debug, Clone, PartialEq)]
enum Level {
    Low,
    Mid { n: i8 },
    High,
}

#[derive(Embed, Debug, Clone, PartialEq)]
struct Meta {
    city: Option<String>,
    zip: i32,
}

#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "users", index = "meta.city", unique = "meta.zip")]
struct User {
    #[record(key)]
    id: u8,
    #[record(unique)]
    email: Option<String>,
    #[record(unique)]
    handle: String,
    #[record(index)]
    score: Option<f64>,
    #[record(index)]
    level: Level,
    #[record(index)]
    big: u64,
    meta: Meta,
}

const IDS: std::ops::Range<u8> = 0..8;
const EMAILS: [&str; 4] = ["a@x", "b@x", "c@x", "d@x"];
const HANDLES: [&str; 6] = ["h0", "h1", "h2", "h3", "h4", "h5"];
const SCORES: [f64; 8] = [-1.5, -0.0, 0.0, 1.0, 2.5, f64::NAN, f64::INFINITY, 1e300];
const BIGS: [u64; 7] = [0, 1, 1 << 53, (1 << 53) + 1, 1 << 63, u64::MAX - 1, u64::MAX];
const CITIES: [&str; 3] = ["", "oslo", "rome"];
const ZIPS: std::ops::Range<i32> = 0..12;

fn level() -> impl Strategy<Value = Level> {
    prop_oneof![Just(Level::Low), (-2i8..2).prop_map(|n| Level::Mid { n }), Just(Level::High)]
}

fn user() -> impl Strategy<Value = User> {
    (
        IDS,
        prop::option::of(prop::sample::select(EMAILS.to_vec())),
        prop::sample::select(HANDLES.to_vec()),
        prop::option::weighted(0.8, prop::sample::select(SCORES.to_vec())),
        level(),
        prop::sample::select(BIGS.to_vec()),
        prop::option::of(prop::sample::select(CITIES.to_vec())),
        ZIPS,
    )
        .prop_map(|(id, email, handle, score, level, big, city, zip)| User {
            id,
            email: email.map(str::to_owned),
            handle: handle.to_owned(),
            score,
            level,
            big,
            meta: Meta { city: city.map(str::to_owned), zip },
        })
}

#[derive(Debug, Clone)]
enum Edit {
    Email(Option<&'static str>),
    Handle(&'static str),
    Score(Option<f64>),
    Level(Level),
    Big(u64),
    Zip(i32),
    City(Option<&'static str>),
    /// Changes the key inside an update: must be refused.
    Id(u8),
}

impl Edit {
    fn apply(&self, user: &mut User) {
        match self {
            Edit::Email(e) => user.email = e.map(str::to_owned),
            Edit::Handle(h) => user.handle = (*h).to_owned(),
            Edit::Score(s) => user.score = *s,
            Edit::Level(l) => user.level = l.clone(),
            Edit::Big(b) => user.big = *b,
            Edit::Zip(z) => user.meta.zip = *z,
            Edit::City(c) => user.meta.city = c.map(str::to_owned),
            Edit::Id(id) => user.id = *id,
        }
    }
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        2 => prop::option::of(prop::sample::select(EMAILS.to_vec())).prop_map(Edit::Email),
        2 => prop::sample::select(HANDLES.to_vec()).prop_map(Edit::Handle),
        2 => prop::option::of(prop::sample::select(SCORES.to_vec())).prop_map(Edit::Score),
        1 => level().prop_map(Edit::Level),
        1 => prop::sample::select(BIGS.to_vec()).prop_map(Edit::Big),
        2 => ZIPS.prop_map(Edit::Zip),
        1 => prop::option::of(prop::sample::select(CITIES.to_vec())).prop_map(Edit::City),
        1 => IDS.prop_map(Edit::Id),
    ]
}

#[derive(Debug, Clone)]
enum Op {
    Insert(User),
    Upsert(User),
    Update(u8, Vec<Edit>),
    /// Patch of `handle`, `meta.zip` or `email` through the JSON path.
    PatchHandle(u8, &'static str),
    PatchZip(u8, i32),
    PatchEmail(u8, Option<&'static str>),
    Delete(u8),
    /// Swap two records' handles through a temporary value, in one transaction.
    SwapHandles(u8, u8),
    /// Delete a record and insert another with its unique values, in one transaction.
    DeleteAndTake(u8, u8),
    DeleteWhereBig(CompareOp, u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => user().prop_map(Op::Insert),
        3 => user().prop_map(Op::Upsert),
        4 => (IDS, prop::collection::vec(edit(), 1..3)).prop_map(|(id, edits)| Op::Update(id, edits)),
        1 => (IDS, prop::sample::select(HANDLES.to_vec())).prop_map(|(id, h)| Op::PatchHandle(id, h)),
        1 => (IDS, ZIPS).prop_map(|(id, z)| Op::PatchZip(id, z)),
        1 => (IDS, prop::option::of(prop::sample::select(EMAILS.to_vec()))).prop_map(|(id, e)| Op::PatchEmail(id, e)),
        2 => IDS.prop_map(Op::Delete),
        1 => (IDS, IDS).prop_map(|(a, b)| Op::SwapHandles(a, b)),
        1 => (IDS, IDS).prop_map(|(a, b)| Op::DeleteAndTake(a, b)),
        1 => (cmp_op(), prop::sample::select(BIGS.to_vec())).prop_map(|(o, b)| Op::DeleteWhereBig(o, b)),
    ]
}

fn cmp_op() -> impl Strategy<Value = CompareOp> {
    prop::sample::select(vec![CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ge])
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Ending {
    Commit,
    Abort,
}

#[derive(Debug, Clone)]
struct Txn {
    ops: Vec<Op>,
    ending: Ending,
}

fn txn() -> impl Strategy<Value = Txn> {
    (prop::collection::vec(op(), 1..7), prop::bool::weighted(0.15))
        .prop_map(|(ops, abort)| Txn { ops, ending: if abort { Ending::Abort } else { Ending::Commit } })
}

// ---------------------------------------------------------------------------------------------
// The oracle.

/// Unique values as the index sees them: (index name, value) of a record.
fn unique_values(u: &User) -> Vec<(&'static str, String)> {
    let mut values = vec![("handle", u.handle.clone()), ("meta.zip", u.meta.zip.to_string())];
    if let Some(email) = &u.email {
        values.push(("email", email.clone()));
    }
    values
}

#[derive(Debug, PartialEq)]
enum Expect {
    Ok,
    Duplicate,
    NotFound,
    Unique,
    KeyChanged,
}

fn classify<V>(result: &tessera::Result<V>) -> Expect {
    match result {
        Ok(_) => Expect::Ok,
        Err(Error::DuplicateKey { .. }) => Expect::Duplicate,
        Err(Error::NotFound { .. }) => Expect::NotFound,
        Err(Error::UniqueViolation { .. }) => Expect::Unique,
        Err(Error::KeyChanged { .. }) => Expect::KeyChanged,
        Err(other) => panic!("unexpected error {other:?}"),
    }
}

struct Oracle {
    rows: BTreeMap<u8, User>,
}

impl Oracle {
    /// Stores `new` (replacing `key`'s record) if no other record holds one of its unique values.
    fn store(&mut self, new: User) -> Expect {
        for (index, value) in unique_values(&new) {
            if self.rows.values().any(|other| other.id != new.id && unique_values(other).contains(&(index, value.clone()))) {
                return Expect::Unique;
            }
        }
        self.rows.insert(new.id, new);
        Expect::Ok
    }

    fn insert(&mut self, u: &User) -> Expect {
        if self.rows.contains_key(&u.id) {
            return Expect::Duplicate;
        }
        self.store(u.clone())
    }

    fn update(&mut self, id: u8, change: impl FnOnce(&mut User)) -> Expect {
        let Some(mut u) = self.rows.get(&id).cloned() else { return Expect::NotFound };
        change(&mut u);
        if u.id != id {
            return Expect::KeyChanged;
        }
        self.store(u)
    }
}

fn big_matches(big: u64, op: CompareOp, literal: u64) -> bool {
    holds(big.cmp(&literal), op)
}

fn holds(ordering: Ordering, op: CompareOp) -> bool {
    match op {
        CompareOp::Eq => ordering == Ordering::Equal,
        CompareOp::Ne => ordering != Ordering::Equal,
        CompareOp::Lt => ordering == Ordering::Less,
        CompareOp::Le => ordering != Ordering::Greater,
        CompareOp::Gt => ordering == Ordering::Greater,
        CompareOp::Ge => ordering != Ordering::Less,
    }
}

/// Runs one operation on the database and on the oracle; both must agree on its outcome.
fn run(users: &tessera::Collection<User>, tx: &mut tessera::WriteTxn<'_>, oracle: &mut Oracle, op: &Op) -> Result<(), String> {
    let check = |what: &str, got: Expect, want: Expect| {
        if got == want { Ok(()) } else { Err(format!("{what}: database says {got:?}, oracle {want:?}")) }
    };
    match op {
        Op::Insert(u) => {
            let got = classify(&users.insert(tx, u));
            check(&format!("{op:?}"), got, oracle.insert(u))
        }
        Op::Upsert(u) => {
            let got = classify(&users.upsert(tx, u));
            check(&format!("{op:?}"), got, oracle.store(u.clone()))
        }
        Op::Update(id, edits) => {
            let got = classify(&users.update(tx, id, |u| edits.iter().for_each(|e| e.apply(u))));
            check(&format!("{op:?}"), got, oracle.update(*id, |u| edits.iter().for_each(|e| e.apply(u))))
        }
        Op::PatchHandle(id, h) => {
            let got = classify(&users.patch(tx, id, "handle", h));
            check(&format!("{op:?}"), got, oracle.update(*id, |u| u.handle = (*h).to_owned()))
        }
        Op::PatchZip(id, z) => {
            let got = classify(&users.patch(tx, id, "meta.zip", z));
            check(&format!("{op:?}"), got, oracle.update(*id, |u| u.meta.zip = *z))
        }
        Op::PatchEmail(id, e) => {
            let got = classify(&users.patch(tx, id, "email", e));
            check(&format!("{op:?}"), got, oracle.update(*id, |u| u.email = e.map(str::to_owned)))
        }
        Op::Delete(id) => {
            let got = users.delete(tx, id).map_err(|e| e.to_string())?;
            let want = if oracle.rows.remove(id).is_some() { WriteOutcome::Deleted } else { WriteOutcome::Unchanged };
            if got != want {
                return Err(format!("{op:?}: {got:?} vs {want:?}"));
            }
            Ok(())
        }
        Op::SwapHandles(a, b) => {
            let (Some(ua), Some(ub)) = (oracle.rows.get(a).cloned(), oracle.rows.get(b).cloned()) else { return Ok(()) };
            if a == b {
                return Ok(());
            }
            // Through a temporary handle no record has.
            let got = classify(&users.update(tx, a, |u| u.handle = "tmp".into()));
            check("swap 1", got, oracle.update(*a, |u| u.handle = "tmp".into()))?;
            let got = classify(&users.update(tx, b, |u| u.handle = ua.handle.clone()));
            check("swap 2", got, oracle.update(*b, |u| u.handle = ua.handle.clone()))?;
            let got = classify(&users.update(tx, a, |u| u.handle = ub.handle.clone()));
            check("swap 3", got, oracle.update(*a, |u| u.handle = ub.handle.clone()))
        }
        Op::DeleteAndTake(a, b) => {
            let Some(ua) = oracle.rows.get(a).cloned() else { return Ok(()) };
            users.delete(tx, a).map_err(|e| e.to_string())?;
            oracle.rows.remove(a);
            let mut taker = ua.clone();
            taker.id = *b;
            let got = classify(&users.insert(tx, &taker));
            check(&format!("{op:?}"), got, oracle.insert(&taker))
        }
        Op::DeleteWhereBig(o, b) => {
            let query = users.filter(Expr::Compare(Box::new(field("big")), *o, Box::new(Expr::Literal(Literal::from(*b)))));
            let got = users.delete_where(tx, &query).map_err(|e| e.to_string())?;
            let doomed: Vec<u8> = oracle.rows.values().filter(|u| big_matches(u.big, *o, *b)).map(|u| u.id).collect();
            for id in &doomed {
                oracle.rows.remove(id);
            }
            if got != doomed.len() {
                return Err(format!("{op:?}: deleted {got}, oracle {}", doomed.len()));
            }
            Ok(())
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Queries checked after each transaction.

/// Exact order of an integer against a float (None for NaN), as the query language has it.
fn order_int_float(int: i128, float: f64) -> Option<Ordering> {
    if float.is_nan() {
        return None;
    }
    if float >= 4e19 {
        return Some(Ordering::Less);
    }
    if float <= -4e19 {
        return Some(Ordering::Greater);
    }
    let floor = float.floor();
    Some(match int.cmp(&(floor as i128)) {
        Ordering::Equal if float == floor => Ordering::Equal,
        Ordering::Equal => Ordering::Less,
        other => other,
    })
}

/// A number literal.
#[derive(Debug, Clone, Copy)]
enum Num {
    I(i64),
    U(u64),
    F(f64),
}

impl Num {
    fn literal(self) -> Literal {
        match self {
            Num::I(i) => Literal::Int(i),
            Num::U(u) => Literal::from(u),
            Num::F(f) => Literal::Float(f),
        }
    }
}

/// Three-valued comparison of a number field's value against a number literal.
fn num_truth(value: Option<Num>, op: CompareOp, literal: Num) -> Option<bool> {
    let value = value?;
    let as_int = |n: Num| match n {
        Num::I(i) => Some(i as i128),
        Num::U(u) => Some(u as i128),
        Num::F(_) => None,
    };
    let ordering = match (value, literal) {
        (Num::F(x), Num::F(y)) => x.partial_cmp(&y),
        (x, y) => match (as_int(x), as_int(y), x, y) {
            (Some(a), Some(b), _, _) => Some(a.cmp(&b)),
            (Some(a), None, _, Num::F(f)) => order_int_float(a, f),
            (None, Some(b), Num::F(f), _) => order_int_float(b, f).map(Ordering::reverse),
            _ => unreachable!(),
        },
    };
    Some(match ordering {
        None => op == CompareOp::Ne,
        Some(o) => holds(o, op),
    })
}

fn literals() -> Vec<Num> {
    let mut out = vec![
        Num::I(-1),
        Num::I(0),
        Num::I(1),
        Num::I(2),
        Num::F(0.5),
        Num::F(-0.0),
        Num::F(f64::NAN),
        Num::F(f64::INFINITY),
        Num::F(f64::NEG_INFINITY),
        Num::F(9007199254740992.0),
        Num::F(9223372036854775808.0),
        Num::F(18446744073709551616.0),
    ];
    out.extend(BIGS.iter().map(|b| Num::U(*b)));
    out.extend(SCORES.iter().map(|s| Num::F(*s)));
    out
}

fn check_everything(db: &Db, users: &tessera::Collection<User>, oracle: &Oracle) -> Result<(), TestCaseError> {
    let all = users.all().fetch(db).unwrap();
    let expected: Vec<User> = oracle.rows.values().cloned().collect();
    prop_assert_eq!(format!("{all:?}"), format!("{expected:?}"), "stored records");
    let report = db.check().unwrap();
    prop_assert!(report.is_ok(), "{}", report);
    // Number fields against number literals of every kind, index-served and scanned.
    for literal in literals() {
        for op in [CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ge] {
            for (path, value) in
                [("score", (|u: &User| u.score.map(Num::F)) as fn(&User) -> Option<Num>), ("big", |u: &User| Some(Num::U(u.big)))]
            {
                let predicate = Expr::Compare(Box::new(field(path)), op, Box::new(Expr::Literal(literal.literal())));
                let query = users.filter(predicate.clone());
                let got: Vec<u8> = query.fetch(db).unwrap().iter().map(|u| u.id).collect();
                let want: Vec<u8> = oracle.rows.values().filter(|u| num_truth(value(u), op, literal) == Some(true)).map(|u| u.id).collect();
                prop_assert_eq!(&got, &want, "{} {:?} {:?}: {}", path, op, literal, query.explain().unwrap());
                prop_assert_eq!(query.count(db).unwrap(), want.len(), "count {} {:?} {:?}", path, op, literal);
                // NOT of it: UNKNOWN stays out.
                let negated = users.filter(!predicate);
                let got: Vec<u8> = negated.fetch(db).unwrap().iter().map(|u| u.id).collect();
                let want: Vec<u8> =
                    oracle.rows.values().filter(|u| num_truth(value(u), op, literal) == Some(false)).map(|u| u.id).collect();
                prop_assert_eq!(&got, &want, "not {} {:?} {:?}: {}", path, op, literal, negated.explain().unwrap());
            }
        }
    }
    // Equality on each unique / indexed string.
    for email in EMAILS {
        let got = users.filter(User::email().eq(email)).fetch(db).unwrap();
        let want: Vec<User> = oracle.rows.values().filter(|u| u.email.as_deref() == Some(email)).cloned().collect();
        prop_assert_eq!(format!("{got:?}"), format!("{want:?}"), "email = {}", email);
    }
    for handle in HANDLES.iter().chain(&["tmp"]) {
        let got = users.filter(User::handle().eq(*handle)).fetch(db).unwrap();
        let want: Vec<User> = oracle.rows.values().filter(|u| u.handle == *handle).cloned().collect();
        prop_assert_eq!(format!("{got:?}"), format!("{want:?}"), "handle = {}", handle);
        let got = users.filter(User::handle().ge(*handle)).count(db).unwrap();
        prop_assert_eq!(got, oracle.rows.values().filter(|u| u.handle.as_str() >= *handle).count(), "handle >= {}", handle);
    }
    for zip in ZIPS {
        let got = users.filter(field("meta.zip").eq(zip)).fetch(db).unwrap();
        let want: Vec<User> = oracle.rows.values().filter(|u| u.meta.zip == zip).cloned().collect();
        prop_assert_eq!(format!("{got:?}"), format!("{want:?}"), "zip = {}", zip);
    }
    for city in CITIES {
        let got = users.filter(field("meta.city").eq(city)).count(db).unwrap();
        prop_assert_eq!(got, oracle.rows.values().filter(|u| u.meta.city.as_deref() == Some(city)).count(), "city = {}", city);
    }
    let got = users.filter(field("meta.city").is_null()).count(db).unwrap();
    prop_assert_eq!(got, oracle.rows.values().filter(|u| u.meta.city.is_none()).count(), "city is null");
    for variant in ["Low", "Mid", "High"] {
        let got = users.filter(User::level().is_variant(variant)).count(db).unwrap();
        let want = oracle
            .rows
            .values()
            .filter(|u| matches!((&u.level, variant), (Level::Low, "Low") | (Level::Mid { .. }, "Mid") | (Level::High, "High")))
            .count();
        prop_assert_eq!(got, want, "level is {}", variant);
    }
    // Order by score (NaN above infinity, -0.0 = 0.0), with NULLs where asked, offset, limit.
    for (order, nulls) in [(Order::Asc, None), (Order::Desc, None), (Order::Asc, Some(Nulls::First)), (Order::Desc, Some(Nulls::Last))] {
        for (offset, limit) in [(0, None), (1, Some(2)), (2, Some(3)), (0, Some(1))] {
            let mut query = match nulls {
                None => users.all().order_by("score", order),
                Some(nulls) => users.all().order_by_nulls("score", order, nulls),
            };
            query = query.offset(offset);
            if let Some(limit) = limit {
                query = query.limit(limit);
            }
            let got: Vec<u8> = query.fetch(db).unwrap().iter().map(|u| u.id).collect();
            let nulls_last = nulls.unwrap_or(if order == Order::Asc { Nulls::Last } else { Nulls::First }) == Nulls::Last;
            let key = |s: f64| if s.is_nan() { (2, 0.0) } else { (1, if s == 0.0 { 0.0 } else { s }) };
            let mut rows: Vec<&User> = oracle.rows.values().collect();
            rows.sort_by(|x, y| {
                let ordering = match (x.score, y.score) {
                    (None, None) => Ordering::Equal,
                    (None, Some(_)) => {
                        if nulls_last {
                            Ordering::Greater
                        } else {
                            Ordering::Less
                        }
                    }
                    (Some(_), None) => {
                        if nulls_last {
                            Ordering::Less
                        } else {
                            Ordering::Greater
                        }
                    }
                    (Some(a), Some(b)) => {
                        let o = key(a).partial_cmp(&key(b)).unwrap();
                        if order == Order::Asc { o } else { o.reverse() }
                    }
                };
                ordering.then(x.id.cmp(&y.id))
            });
            let want: Vec<u8> = rows.iter().skip(offset).take(limit.unwrap_or(usize::MAX)).map(|u| u.id).collect();
            prop_assert_eq!(
                &got,
                &want,
                "order by score {:?} {:?} offset {} limit {:?}: {}",
                order,
                nulls,
                offset,
                limit,
                query.explain().unwrap()
            );
        }
    }
    // Order by big descending, limit.
    let got: Vec<u8> = users.all().order_by("big", Order::Desc).limit(3).fetch(db).unwrap().iter().map(|u| u.id).collect();
    let mut rows: Vec<&User> = oracle.rows.values().collect();
    rows.sort_by(|x, y| y.big.cmp(&x.big).then(x.id.cmp(&y.id)));
    let want: Vec<u8> = rows.iter().take(3).map(|u| u.id).collect();
    prop_assert_eq!(got, want, "order by big desc limit 3");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48), ..ProptestConfig::default() })]

    #[test]
    fn unique_indexes_and_number_fields_match_the_oracle(txns in prop::collection::vec(txn(), 1..10)) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path().join("db")).unwrap();
        let users = db.collection::<User>().unwrap();
        let mut oracle = Oracle { rows: BTreeMap::new() };
        for txn in &txns {
            let mut staged = Oracle { rows: oracle.rows.clone() };
            let mut mismatch = None;
            let result = db.write(|tx| {
                for op in &txn.ops {
                    if let Err(problem) = run(&users, tx, &mut staged, op) {
                        mismatch = Some(problem);
                        break;
                    }
                }
                match txn.ending {
                    Ending::Commit => Ok(()),
                    Ending::Abort => Err(Error::Corrupted("abort".into())),
                }
            });
            if let Some(problem) = mismatch {
                prop_assert!(false, "{}", problem);
            }
            match txn.ending {
                Ending::Commit => { result.unwrap(); oracle = staged; }
                Ending::Abort => { prop_assert!(result.is_err()); }
            }
            check_everything(&db, &users, &oracle)?;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Deterministic cases.

fn open() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    (dir, db)
}

fn plain(id: u8, handle: &str, zip: i32) -> User {
    User { id, email: None, handle: handle.into(), score: None, level: Level::Low, big: 0, meta: Meta { city: None, zip } }
}

#[test]
fn a_panic_inside_a_write_closure_leaves_nothing() {
    let (_dir, db) = open();
    let users = db.collection::<User>().unwrap();
    db.write(|tx| users.insert(tx, &plain(1, "h1", 1))).unwrap();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        db.write(|tx| {
            users.insert(tx, &plain(2, "h2", 2))?;
            users.update(tx, &1, |u| u.handle = "h9".into())?;
            if tx as *const _ as usize != 0 {
                panic!("boom");
            }
            Ok(())
        })
    }));
    assert!(matches!(caught, Ok(Err(Error::Panicked(_))) | Err(_)), "{caught:?}");
    assert_eq!(users.all().fetch(&db).unwrap(), vec![plain(1, "h1", 1)]);
    assert!(db.check().unwrap().is_ok());
    // The database still writes.
    db.write(|tx| users.insert(tx, &plain(2, "h2", 2))).unwrap();
    assert_eq!(users.filter(User::handle().eq("h9")).count(&db).unwrap(), 0);
    assert_eq!(users.filter(User::handle().eq("h1")).count(&db).unwrap(), 1);
}

#[test]
fn an_error_after_several_writes_leaves_nothing() {
    let (_dir, db) = open();
    let users = db.collection::<User>().unwrap();
    db.write(|tx| users.insert(tx, &plain(1, "h1", 1))).unwrap();
    let result = db.write(|tx| {
        users.insert(tx, &plain(2, "h2", 2))?;
        users.update(tx, &1, |u| u.handle = "h3".into())?;
        users.delete(tx, &1)?;
        users.insert(tx, &plain(3, "h2", 3)) // unique violation on handle
    });
    assert!(matches!(result, Err(Error::UniqueViolation { .. })), "{result:?}");
    assert_eq!(users.all().fetch(&db).unwrap(), vec![plain(1, "h1", 1)]);
    assert!(db.check().unwrap().is_ok());
}

#[test]
fn concurrent_writers_keep_unique_indexes() {
    let (_dir, db) = open();
    let users = db.collection::<User>().unwrap();
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            let (db, users) = (db.clone(), users.clone());
            std::thread::spawn(move || {
                let mut ok = 0;
                for i in 0..50u8 {
                    let id = (t * 50 + i) % 200;
                    let handle = format!("h{}", i % 10);
                    let zip = i32::from(i % 7);
                    let r = db.write(|tx| users.upsert(tx, &plain(id, &handle, zip)));
                    if r.is_ok() {
                        ok += 1;
                    }
                }
                ok
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let all = users.all().fetch(&db).unwrap();
    let mut handles: Vec<_> = all.iter().map(|u| u.handle.clone()).collect();
    handles.sort();
    handles.dedup();
    assert_eq!(handles.len(), all.len(), "unique handles");
    assert!(db.check().unwrap().is_ok());
}

#[test]
fn record_ref_views_read_the_stored_record() {
    let (_dir, db) = open();
    let users = db.collection::<User>().unwrap();
    let mut u = plain(1, "h1", 1);
    u.email = Some("a@x".into());
    u.score = Some(-0.0);
    u.big = u64::MAX;
    u.level = Level::Mid { n: -1 };
    u.meta.city = Some("oslo".into());
    db.write(|tx| users.insert(tx, &u)).unwrap();
    let tx = db.read_txn().unwrap();
    let view = users.get_ref(&tx, &1).unwrap().unwrap();
    assert_eq!(view.handle().unwrap(), "h1");
    assert_eq!(view.big().unwrap(), u64::MAX);
    assert_eq!(view.email().unwrap(), Some("a@x"));
    assert!(users.get_ref(&tx, &2).unwrap().is_none());
}

// Two record types of one collection name alive at once (say an old and a new version of a
// type in one process): each handle keeps its own index list.
mod two_types {
    use super::*;

    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "shared")]
    pub struct A {
        #[record(key)]
        pub id: u32,
        #[record(index)]
        pub a: i32,
        pub c: i32,
    }

    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "shared")]
    pub struct B {
        #[record(key)]
        pub id: u32,
        pub a: i32,
        #[record(index)]
        pub c: i32,
    }
}

/// A second record type of the collection, with other indexes, replaces the schema; a handle
/// of the first type, still alive, then refuses writes and index reads instead of following
/// its old index list under ids the new schema gave to other fields (before the fix,
/// `B.filter(c == 5)` found nothing and `Db::check` reported missing and wrong entries).
#[test]
fn a_handle_whose_schema_another_type_changed_refuses_writes_and_index_reads() {
    use two_types::{A, B};
    let (_dir, db) = open();
    let a = db.collection::<A>().unwrap();
    db.write(|tx| a.insert(tx, &A { id: 1, a: 1, c: 1 })).unwrap();
    let b = db.collection::<B>().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !b.filter(field("c").eq(1)).explain().unwrap().to_string().contains("index") {
        assert!(std::time::Instant::now() < deadline, "index never ready");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let stale = |result: tessera::Result<()>, what: &str| match result {
        Err(Error::SchemaMismatch { collection, reason }) => {
            assert_eq!(collection, "shared");
            assert!(reason.contains("open the collection again"), "{what}: {reason}");
        }
        other => panic!("{what} through the replaced handle: {other:?}"),
    };
    stale(db.write(|tx| a.insert(tx, &A { id: 2, a: 2, c: 2 }).map(drop)), "insert");
    stale(db.write(|tx| a.update(tx, &1, |r| r.c = 5).map(drop)), "update");
    stale(db.write(|tx| a.delete(tx, &1).map(drop)), "delete");
    stale(a.filter(field("a").eq(1)).fetch(&db).map(drop), "an index read");
    // Reads by key do not use the index lists: still served.
    assert_eq!(a.get(&db, &1).unwrap().map(|r| r.c), Some(1));
    db.write(|tx| b.update(tx, &1, |r| r.c = 5).map(drop)).unwrap();
    let by_c5: Vec<u32> = b.filter(field("c").eq(5)).fetch(&db).unwrap().iter().map(|r| r.id).collect();
    assert_eq!(by_c5, [1]);
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{report}");
    // Opened again, the first type replaces the schema back, and B's handle is the stale one.
    drop(a);
    let a = db.collection::<A>().unwrap();
    db.write(|tx| a.insert(tx, &A { id: 3, a: 3, c: 3 }).map(drop)).unwrap();
    stale(db.write(|tx| b.insert(tx, &B { id: 4, a: 4, c: 4 }).map(drop)), "insert through B");
    assert!(db.check().unwrap().is_ok());
}

#[derive(Embed, Debug, Clone, PartialEq)]
struct Point {
    x: i32,
    y: i32,
}

/// A unique index on a value its entries cannot tell apart from another of its kind (an enum
/// with payloads, a struct, a list) is refused when the collection opens, naming the index.
/// Before, every such value after the first was refused as a duplicate: `Mid { n: 0 }` after
/// `Mid { n: 1 }`, `Point { 3, 3 }` after `Point { 1, 1 }`, `[2, 3]` after `[1]`.
#[test]
fn a_unique_index_on_a_payload_enum_a_struct_or_a_list_is_refused_at_open() {
    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "unique_level")]
    struct UniqueLevel {
        #[record(key)]
        id: u32,
        #[record(unique)]
        level: Level,
    }
    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "unique_point")]
    struct UniquePoint {
        #[record(key)]
        id: u32,
        #[record(unique)]
        point: Option<Point>,
    }
    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "unique_list")]
    struct UniqueList {
        #[record(key)]
        id: u32,
        #[record(unique)]
        list: Vec<u32>,
    }
    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "indexed_shapes")]
    struct IndexedShapes {
        #[record(key)]
        id: u32,
        #[record(index)]
        level: Level,
        #[record(index)]
        point: Point,
    }
    let (_dir, db) = open();
    let refusal = |result: tessera::Result<()>| match result {
        Err(Error::SchemaMismatch { reason, .. }) => reason,
        other => panic!("opened: {other:?}"),
    };
    let level = refusal(db.collection::<UniqueLevel>().map(drop));
    assert!(level.contains("unique index `level` is on an enum with payloads"), "{level}");
    let point = refusal(db.collection::<UniquePoint>().map(drop));
    assert!(point.contains("unique index `point` is on a struct"), "{point}");
    let list = refusal(db.collection::<UniqueList>().map(drop));
    assert!(list.contains("unique index `list` is on a list"), "{list}");
    // Plain indexes on them stay allowed (their entries find candidates; the query checks).
    let shapes = db.collection::<IndexedShapes>().unwrap();
    db.write(|tx| {
        shapes.insert(tx, &IndexedShapes { id: 1, level: Level::Mid { n: 1 }, point: Point { x: 1, y: 1 } })?;
        shapes.insert(tx, &IndexedShapes { id: 2, level: Level::Mid { n: 0 }, point: Point { x: 1, y: 1 } })
    })
    .unwrap();
    assert_eq!(shapes.all().count(&db).unwrap(), 2);
    assert!(db.check().unwrap().is_ok());
}

/// NaN in a unique float index: the index keeps one NaN (a second is refused), while `=`
/// matches no NaN (three-valued logic). `-0.0` after `0.0` is refused, as `=` calls them equal.
#[test]
fn unique_float_index_on_nan_and_signed_zero() {
    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "ratios")]
    struct Ratio {
        #[record(key)]
        id: u32,
        #[record(unique)]
        ratio: f64,
    }
    let (_dir, db) = open();
    let ratios = db.collection::<Ratio>().unwrap();
    db.write(|tx| ratios.insert(tx, &Ratio { id: 1, ratio: f64::NAN })).unwrap();
    let second_nan = db.write(|tx| ratios.insert(tx, &Ratio { id: 2, ratio: f64::NAN }));
    assert!(matches!(second_nan, Err(Error::UniqueViolation { .. })), "{second_nan:?}");
    db.write(|tx| ratios.insert(tx, &Ratio { id: 3, ratio: 0.0 })).unwrap();
    let negative_zero = db.write(|tx| ratios.insert(tx, &Ratio { id: 4, ratio: -0.0 }));
    assert!(matches!(negative_zero, Err(Error::UniqueViolation { .. })), "{negative_zero:?}");
    assert_eq!(ratios.filter(field("ratio").eq(f64::NAN)).count(&db).unwrap(), 0);
    assert_eq!(ratios.filter(field("ratio").eq(0.0)).count(&db).unwrap(), 1);
    assert!(db.check().unwrap().is_ok());
}

#[test]
fn delete_where_honours_order_offset_and_limit_and_sees_the_transactions_writes() {
    let (_dir, db) = open();
    let users = db.collection::<User>().unwrap();
    db.write(|tx| {
        for id in 0..8u8 {
            let mut u = plain(id, &format!("h{id}"), i32::from(id));
            u.score = Some(f64::from(id % 4));
            users.insert(tx, &u)?;
        }
        Ok(())
    })
    .unwrap();
    let deleted = db
        .write(|tx| {
            // Raise record 0 inside the transaction: the query must see it.
            users.update(tx, &0, |u| u.score = Some(9.0))?;
            let query = users.all().order_by("score", Order::Desc).offset(1).limit(3);
            let inside: Vec<u8> = query.iter(tx)?.map(|u| u.map(|u| u.id)).collect::<tessera::Result<_>>()?;
            assert_eq!(inside, [3, 7, 2], "scores 9(0) 3(3) 3(7) 2(2) 2(6) ...");
            users.delete_where(tx, &query)
        })
        .unwrap();
    assert_eq!(deleted, 3);
    let left: Vec<u8> = users.all().fetch(&db).unwrap().iter().map(|u| u.id).collect();
    assert_eq!(left, [0, 1, 4, 5, 6]);
    assert!(db.check().unwrap().is_ok());
}

mod versions {
    use super::*;
    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "built")]
    pub struct V1 {
        #[record(key)]
        pub id: u32,
        pub b: i32,
        pub s: String,
    }
    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "built", version = 2)]
    pub struct V2 {
        #[record(key)]
        pub id: u32,
        #[record(index)]
        pub b: i32,
        #[record(index)]
        pub s: String,
    }
}

#[test]
fn a_background_index_build_with_concurrent_writers_matches_a_scan() {
    use versions::{V1, V2};
    for round in 0..3u32 {
        let dir = tempfile::tempdir().unwrap();
        let db =
            Db::open_with(dir.path().join("db"), tessera::DbOptions { durability: tessera::Durability::BUFFERED, ..Default::default() })
                .unwrap();
        {
            let v1 = db.collection::<V1>().unwrap();
            db.write(|tx| {
                (0..6000u32).try_for_each(|id| {
                    v1.insert(
                        tx,
                        &V1 { id, b: (id % 17) as i32, s: format!("{}{}", "x".repeat(if id % 3 == 0 { 400 } else { 1 }), id % 11) },
                    )
                    .map(drop)
                })
            })
            .unwrap();
        }
        let v2 = db.collection::<V2>().unwrap();
        let writer = {
            let (db, v2) = (db.clone(), v2.clone());
            std::thread::spawn(move || {
                let mut rng = fastrand::Rng::with_seed(u64::from(round) + 1);
                for _ in 0..400 {
                    let id = rng.u32(0..7000);
                    db.write(|tx| match rng.u8(0..4) {
                        0 => v2.delete(tx, &id).map(drop),
                        1 => v2.upsert(tx, &V2 { id, b: rng.i32(0..20), s: format!("{}{}", "x".repeat(400), rng.u8(0..11)) }).map(drop),
                        _ => match v2.update(tx, &id, |r| r.b = rng.i32(0..20)) {
                            Err(Error::NotFound { .. }) => Ok(()),
                            other => other.map(drop),
                        },
                    })
                    .unwrap();
                }
            })
        };
        writer.join().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !(v2.filter(field("b").eq(1)).explain().unwrap().to_string().starts_with("index")
            && v2.filter(field("s").eq("x")).explain().unwrap().to_string().starts_with("index"))
        {
            assert!(std::time::Instant::now() < deadline, "never ready");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let all = v2.all().fetch(&db).unwrap();
        for b in 0..20 {
            let got: Vec<u32> = v2.filter(field("b").eq(b)).fetch(&db).unwrap().iter().map(|r| r.id).collect();
            let want: Vec<u32> = all.iter().filter(|r| r.b == b).map(|r| r.id).collect();
            assert_eq!(got, want, "b = {b}");
        }
        let got: Vec<u32> = v2.all().order_by("s", Order::Desc).limit(50).fetch(&db).unwrap().iter().map(|r| r.id).collect();
        let mut sorted = all.clone();
        sorted.sort_by(|x, y| y.s.cmp(&x.s).then(x.id.cmp(&y.id)));
        let want: Vec<u32> = sorted.iter().take(50).map(|r| r.id).collect();
        assert_eq!(got, want, "order by s desc");
        let report = db.check().unwrap();
        assert!(report.is_ok(), "{report}");
    }
}

#[test]
fn primary_key_comparisons_with_literals_outside_the_key_type() {
    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "small_keys")]
    struct Small {
        #[record(key)]
        id: u16,
        #[record(key)]
        sub: i8,
    }
    let (_dir, db) = open();
    let smalls = db.collection::<Small>().unwrap();
    let ids: [u16; 5] = [0, 1, 2, 3, u16::MAX];
    let subs: [i8; 4] = [i8::MIN, -1, 0, i8::MAX];
    db.write(|tx| ids.iter().try_for_each(|id| subs.iter().try_for_each(|sub| smalls.insert(tx, &Small { id: *id, sub: *sub }).map(drop))))
        .unwrap();
    let literals = [
        Num::I(-1),
        Num::I(70_000),
        Num::I(65_535),
        Num::I(-129),
        Num::I(128),
        Num::F(2.5),
        Num::F(-0.5),
        Num::F(f64::NAN),
        Num::F(f64::INFINITY),
        Num::F(f64::NEG_INFINITY),
        Num::F(-0.0),
        Num::F(65535.5),
        Num::U(u64::MAX),
        Num::I(i64::MIN),
    ];
    let mut failures = Vec::new();
    for (path, value) in [("id", (|s: &Small| Num::I(i64::from(s.id))) as fn(&Small) -> Num), ("sub", |s: &Small| Num::I(i64::from(s.sub)))]
    {
        for literal in literals {
            for op in [CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ge] {
                for extra in [None, Some(1u16)] {
                    // Alone, and after an equality on the first key field (a key prefix).
                    let mut predicate = Expr::Compare(Box::new(field(path)), op, Box::new(Expr::Literal(literal.literal())));
                    if let Some(id) = extra {
                        predicate = field("id").eq(i64::from(id)).and(predicate);
                    }
                    let query = smalls.filter(predicate);
                    let got: Vec<(u16, i8)> = query.fetch(&db).unwrap().iter().map(|s| (s.id, s.sub)).collect();
                    let mut want = Vec::new();
                    for id in ids {
                        for sub in subs {
                            let s = Small { id, sub };
                            if extra.is_some_and(|e| e != id) {
                                continue;
                            }
                            if num_truth(Some(value(&s)), op, literal) == Some(true) {
                                want.push((id, sub));
                            }
                        }
                    }
                    if got != want {
                        failures.push(format!(
                            "{path} {op:?} {literal:?} (id = {extra:?}): got {got:?}, want {want:?}; {}",
                            query.explain().unwrap()
                        ));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
