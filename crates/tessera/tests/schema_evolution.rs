//! Schema evolution of typed collections (migrations, compatibility, indexes).

use serde::{Deserialize, Serialize};
use std::time::Duration;
use tessera::collection::{CollectionOptions, Record};
use tessera::{Db, Error};

fn open() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    (dir, db)
}

/// The collection's stored schema and every record as JSON, through a dynamic handle that is
/// dropped before returning (so that typed opens are not refused because of it).
fn snapshot(db: &Db, name: &str) -> (String, Vec<String>) {
    let dynamic = db.dyn_collection(name).unwrap();
    let schema = format!("{:?}", dynamic.schema());
    let records = dynamic.all().fetch(db).unwrap().iter().map(|r| r.to_json()).collect();
    (schema, records)
}

fn assert_sound(db: &Db) {
    let report = db.check().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

mod v {
    use super::*;
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "people", version = 1)]
    pub struct V1 {
        #[record(key)]
        pub id: u32,
        #[record(index)]
        pub age: i64,
        pub name: String,
        #[record(unique)]
        pub email: Option<String>,
    }
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "people", version = 2)]
    pub struct V2 {
        #[record(key)]
        pub id: u32,
        #[record(index)]
        pub age: i64,
        pub first: String,
        #[record(unique)]
        pub email: Option<String>,
        pub born: u16,
    }
}
use v::{V1, V2};

fn v1(id: u32) -> V1 {
    V1 { id, age: id as i64 * 3 % 7, name: format!("name {id}"), email: Some(format!("e{id}")) }
}

fn fill(db: &Db, n: u32) {
    let c = db.collection::<V1>().unwrap();
    db.write(|tx| (0..n).try_for_each(|id| c.insert(tx, &v1(id)).map(drop))).unwrap();
}

fn migration(fail_at: Option<u32>, panic_at: Option<u32>) -> CollectionOptions<V2> {
    CollectionOptions {
        migrate: Some(Box::new(move |old: tessera::value::Value<'_>| {
            let id = old.get("id").and_then(|v| v.as_u64()).unwrap() as u32;
            if Some(id) == fail_at {
                return Err(Error::other(std::io::Error::other("refused by the migration")));
            }
            if Some(id) == panic_at {
                panic!("migration panics at {id}");
            }
            Ok(V2 {
                id,
                age: old.get("age").and_then(|v| v.as_i64()).unwrap(),
                first: old.get("name").and_then(|v| v.as_str()).unwrap().to_owned(),
                email: old.get("email").and_then(|v| v.as_str()).map(str::to_owned),
                born: 1900,
            })
        })),
    }
}

#[test]
fn a_migration_that_fails_midway_changes_nothing() {
    let (_dir, db) = open();
    fill(&db, 50);
    let before = snapshot(&db, "people");
    let error = db.collection_with::<V2>(migration(Some(30), None)).unwrap_err();
    assert!(error.to_string().contains("refused by the migration"), "{error}");
    assert_eq!(snapshot(&db, "people"), before);
    assert_sound(&db);
    // The old type still opens, writes and reads.
    let c = db.collection::<V1>().unwrap();
    assert_eq!(c.all().count(&db).unwrap(), 50);
    db.write(|tx| c.insert(tx, &v1(100)).map(drop)).unwrap();
    drop(c);
    // And the migration then runs.
    let c2 = db.collection_with::<V2>(migration(None, None)).unwrap();
    assert_eq!(c2.all().count(&db).unwrap(), 51);
    assert!(c2.wait_for_indexes(Duration::from_secs(10)));
    assert_eq!(c2.filter_text("age = 2").unwrap().count(&db).unwrap(), (0..50).chain([100]).filter(|i| i * 3 % 7 == 2).count());
    assert_sound(&db);
}

#[test]
fn a_migration_that_panics_midway_changes_nothing_and_the_database_stays_usable() {
    let (_dir, db) = open();
    fill(&db, 50);
    let before = snapshot(&db, "people");
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| db.collection_with::<V2>(migration(None, Some(20)))));
    match result {
        Err(_) => {}
        Ok(Err(error)) => eprintln!("a panicking migration is an error: {error}"),
        Ok(Ok(_)) => panic!("a panicking migration opened the collection"),
    }
    assert_eq!(snapshot(&db, "people"), before);
    // Same thread: writes still work and the old type opens.
    let c = db.collection::<V1>().unwrap();
    db.write(|tx| c.insert(tx, &v1(100)).map(drop)).unwrap();
    drop(c);
    // Another thread, too.
    let db2 = db.clone();
    std::thread::spawn(move || {
        let c = db2.collection::<V1>().unwrap();
        db2.write(|tx| c.insert(tx, &v1(101)).map(drop)).unwrap();
    })
    .join()
    .unwrap();
    let c2 = db.collection_with::<V2>(migration(None, None)).unwrap();
    assert_eq!(c2.all().count(&db).unwrap(), 52);
    assert_sound(&db);
}

#[test]
fn a_migration_that_makes_duplicate_keys_or_unique_values_changes_nothing() {
    let (_dir, db) = open();
    fill(&db, 20);
    let before = snapshot(&db, "people");
    // Every record mapped to one primary key.
    let same_key =
        CollectionOptions::<V2> { migrate: Some(Box::new(|_old| Ok(V2 { id: 1, age: 0, first: String::new(), email: None, born: 0 }))) };
    assert!(matches!(db.collection_with::<V2>(same_key), Err(Error::DuplicateKey { .. })));
    assert_eq!(snapshot(&db, "people"), before);
    // Every record given one email (unique index).
    let same_email = CollectionOptions::<V2> {
        migrate: Some(Box::new(|old| {
            let id = old.get("id").and_then(|v| v.as_u64()).unwrap() as u32;
            Ok(V2 { id, age: 0, first: String::new(), email: Some("same".into()), born: 0 })
        })),
    };
    let error = db.collection_with::<V2>(same_email).unwrap_err();
    assert!(matches!(error, Error::UniqueViolation { .. }), "{error:?}");
    assert_eq!(snapshot(&db, "people"), before);
    assert_sound(&db);
}

#[test]
fn migrations_rebuild_indexes_consistently_and_reopen_without_running_again() {
    let (dir, db) = open();
    fill(&db, 200);
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = runs.clone();
    let options = CollectionOptions::<V2> {
        migrate: Some(Box::new(move |old| {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let id = old.get("id").and_then(|v| v.as_u64()).unwrap() as u32;
            // Re-key: ids shift by 1000, ages change.
            Ok(V2 { id: id + 1000, age: -(id as i64), first: "x".into(), email: Some(format!("m{id}")), born: id as u16 })
        })),
    };
    let c = db.collection_with::<V2>(options).unwrap();
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 200);
    assert!(c.wait_for_indexes(Duration::from_secs(10)));
    assert_sound(&db);
    assert_eq!(c.filter_text("age = -5").unwrap().fetch(&db).unwrap().len(), 1);
    assert_eq!(c.filter_text("email = \"m7\"").unwrap().fetch(&db).unwrap()[0].id, 1007);
    assert_eq!(c.get(&db, &5).unwrap(), None);
    drop((c, db));
    let db = Db::open(dir.path().join("db")).unwrap();
    let c = db.collection_with::<V2>(migration(Some(0), None)).unwrap();
    assert_eq!(c.all().count(&db).unwrap(), 200);
    assert_sound(&db);
}

mod idx {
    use super::*;
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "acc")]
    pub struct Plain {
        #[record(key)]
        pub id: u32,
        pub email: String,
        pub n: i32,
    }
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "acc")]
    pub struct Unique {
        #[record(key)]
        pub id: u32,
        #[record(unique)]
        pub email: String,
        pub n: i32,
    }
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "acc")]
    pub struct Indexed {
        #[record(key)]
        pub id: u32,
        #[record(index)]
        pub email: String,
        #[record(index)]
        pub n: i32,
    }
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "acc")]
    pub struct FloatN {
        #[record(key)]
        pub id: u32,
        #[record(index)]
        pub email: String,
        #[record(index)]
        pub n: f64,
    }
}

#[test]
fn a_unique_index_over_duplicates_is_refused_and_changes_nothing() {
    let (_dir, db) = open();
    let plain = db.collection::<idx::Plain>().unwrap();
    db.write(|tx| {
        (0..100u32).try_for_each(|id| plain.insert(tx, &idx::Plain { id, email: format!("e{}", id % 90), n: id as i32 }).map(drop))
    })
    .unwrap();
    drop(plain);
    let before = snapshot(&db, "acc");
    assert!(matches!(db.collection::<idx::Unique>(), Err(Error::UniqueViolation { .. })));
    assert_eq!(snapshot(&db, "acc"), before);
    assert_sound(&db);
    // Non-unique then unique then non-unique again, each reopened.
    let indexed = db.collection::<idx::Indexed>().unwrap();
    assert!(indexed.wait_for_indexes(Duration::from_secs(10)));
    assert_sound(&db);
    let plain_n = indexed.filter_text("email = \"e5\"").unwrap().count(&db).unwrap();
    assert_eq!(plain_n, 2);
    db.write(|tx| (90..100u32).try_for_each(|id| indexed.delete(tx, &id).map(drop))).unwrap();
    drop(indexed);
    let unique = db.collection::<idx::Unique>().unwrap();
    assert_sound(&db);
    assert_eq!(unique.filter_text("email = \"e5\"").unwrap().count(&db).unwrap(), 1);
    assert!(matches!(
        db.write(|tx| unique.insert(tx, &idx::Unique { id: 500, email: "e5".into(), n: 0 })),
        Err(Error::UniqueViolation { .. })
    ));
    drop(unique);
    let indexed = db.collection::<idx::Indexed>().unwrap();
    assert!(indexed.wait_for_indexes(Duration::from_secs(10)));
    db.write(|tx| indexed.insert(tx, &idx::Indexed { id: 500, email: "e5".into(), n: 0 })).unwrap();
    assert_eq!(indexed.filter_text("email = \"e5\"").unwrap().count(&db).unwrap(), 2);
    assert_sound(&db);
}

#[test]
fn an_indexed_integer_field_widened_to_float_keeps_its_index_consistent() {
    let (_dir, db) = open();
    let indexed = db.collection::<idx::Indexed>().unwrap();
    db.write(|tx| {
        (0..50u32).try_for_each(|id| indexed.insert(tx, &idx::Indexed { id, email: format!("e{id}"), n: id as i32 % 5 }).map(drop))
    })
    .unwrap();
    assert!(indexed.wait_for_indexes(Duration::from_secs(10)));
    drop(indexed);
    let float = db.collection::<idx::FloatN>().unwrap();
    assert!(float.wait_for_indexes(Duration::from_secs(10)));
    assert_sound(&db);
    let query = float.filter_text("n = 3").unwrap();
    assert!(query.explain().unwrap().to_string().contains("index"), "{}", query.explain().unwrap());
    assert_eq!(query.count(&db).unwrap(), 10);
    assert_eq!(float.filter_text("n >= 2.5 and n < 3.5").unwrap().count(&db).unwrap(), 10);
    // Rewritten through the float type: the old entry goes, the new one comes.
    db.write(|tx| float.update(tx, &3u32, |r| r.n = 3.5).map(drop)).unwrap();
    assert_eq!(float.filter_text("n = 3").unwrap().count(&db).unwrap(), 9);
    assert_eq!(float.filter_text("n = 3.5").unwrap().count(&db).unwrap(), 1);
    assert_sound(&db);
}

mod widths {
    use super::*;
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "w")]
    pub struct Wide {
        #[record(key)]
        pub id: u32,
        pub n: u64,
    }
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "w")]
    pub struct Narrow {
        #[record(key)]
        pub id: u32,
        pub n: u8,
    }
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "f")]
    pub struct F64 {
        #[record(key)]
        pub id: u32,
        pub x: f64,
    }
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "f")]
    pub struct F32 {
        #[record(key)]
        pub id: u32,
        pub x: f32,
    }
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "i")]
    pub struct I64 {
        #[record(key)]
        pub id: u32,
        pub x: i64,
    }
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "i")]
    pub struct IF64 {
        #[record(key)]
        pub id: u32,
        pub x: f64,
    }
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "o")]
    pub struct Opt {
        #[record(key)]
        pub id: u32,
        pub x: Option<String>,
    }
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "o")]
    pub struct Req {
        #[record(key)]
        pub id: u32,
        pub x: String,
    }
}

/// A narrowing f64 -> f32 is accepted with no migration, as i64 -> i32 is not: stored values
/// that f32 cannot hold exactly come back changed.
#[test]
fn a_float_field_narrowed_from_f64_to_f32_is_refused_without_a_migration() {
    let (_dir, db) = open();
    let wide = db.collection::<widths::F64>().unwrap();
    db.write(|tx| wide.insert(tx, &widths::F64 { id: 1, x: 0.1 })).unwrap();
    drop(wide);
    match db.collection::<widths::F32>() {
        Err(Error::SchemaMismatch { .. }) => {}
        Ok(narrow) => {
            let read = narrow.get(&db, &1).unwrap().unwrap().x;
            assert_eq!(f64::from(read), 0.1, "f64 -> f32 accepted without a migration: the stored 0.1f64 reads as {}", f64::from(read));
        }
        Err(other) => panic!("{other:?}"),
    }
}

/// An integer field changed to f64 is accepted: integers beyond 2^53 come back rounded.
#[test]
fn an_integer_field_changed_to_f64_keeps_every_value_or_is_refused() {
    let (_dir, db) = open();
    let ints = db.collection::<widths::I64>().unwrap();
    let big = (1i64 << 53) + 1;
    db.write(|tx| ints.insert(tx, &widths::I64 { id: 1, x: big })).unwrap();
    drop(ints);
    match db.collection::<widths::IF64>() {
        Err(Error::SchemaMismatch { .. }) => {}
        Ok(floats) => {
            let read = floats.get(&db, &1).unwrap().unwrap().x;
            assert_eq!(read as i128, big as i128, "stored {big}, read {read}");
        }
        Err(other) => panic!("{other:?}"),
    }
}

#[test]
fn optional_to_required_is_refused_with_records_and_allowed_when_empty() {
    let (_dir, db) = open();
    let opt = db.collection::<widths::Opt>().unwrap();
    db.write(|tx| opt.insert(tx, &widths::Opt { id: 1, x: None })).unwrap();
    drop(opt);
    assert!(matches!(db.collection::<widths::Req>(), Err(Error::SchemaMismatch { .. })));
    let opt = db.collection::<widths::Opt>().unwrap();
    assert_eq!(opt.get(&db, &1).unwrap().unwrap().x, None);
    db.write(|tx| opt.delete(tx, &1).map(drop)).unwrap();
    drop(opt);
    let req = db.collection::<widths::Req>().unwrap();
    db.write(|tx| req.insert(tx, &widths::Req { id: 2, x: "x".into() })).unwrap();
    drop(req);
    // Back to optional: compatible.
    let opt = db.collection::<widths::Opt>().unwrap();
    assert_eq!(opt.get(&db, &2).unwrap().unwrap().x.as_deref(), Some("x"));
}

/// A typed handle kept open while another type of the same name changes the stored schema
/// (here: u64 -> u8 on an empty collection) goes on writing by its old shape: a record the
/// stored schema does not allow is stored, and reads of it fail.
#[test]
fn a_handle_opened_before_a_schema_change_cannot_store_records_the_new_schema_refuses() {
    let (_dir, db) = open();
    let wide = db.collection::<widths::Wide>().unwrap();
    let narrow = db.collection::<widths::Narrow>().unwrap();
    let written = db.write(|tx| wide.insert(tx, &widths::Wide { id: 1, n: 300 }));
    let read = narrow.get(&db, &1);
    assert!(
        written.is_err() || read.is_ok(),
        "the old handle's write returned {written:?}, and the new type then reads {read:?}; stored schema {:?}",
        db.dyn_collection("w").map(|d| d.schema().shape.clone())
    );
}

mod renamed {
    use super::*;
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "r", version = 1)]
    pub struct Old {
        #[record(key)]
        pub id: u32,
        pub name: String,
    }
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "r", version = 2)]
    pub struct New {
        #[record(key)]
        pub id: u32,
        pub full_name: String,
    }
}

/// A dynamic handle opened before a migration keeps the old shape: it stores a record of the old
/// shape under the new schema, which the typed handle then cannot read.
#[test]
fn a_dynamic_handle_opened_before_a_migration_writes_by_the_new_schema() {
    let (_dir, db) = open();
    let old = db.collection::<renamed::Old>().unwrap();
    db.write(|tx| old.insert(tx, &renamed::Old { id: 1, name: "a".into() })).unwrap();
    drop(old);
    let dynamic = db.dyn_collection("r").unwrap();
    let options = CollectionOptions::<renamed::New> {
        migrate: Some(Box::new(|v| {
            Ok(renamed::New {
                id: v.get("id").and_then(|x| x.as_u64()).unwrap() as u32,
                full_name: v.get("name").and_then(|x| x.as_str()).unwrap().into(),
            })
        })),
    };
    let new = db.collection_with::<renamed::New>(options).unwrap();
    let written = db.write(|tx| dynamic.insert_json(tx, br#"{"id": 2, "name": "b"}"#));
    let read = new.get(&db, &2);
    assert!(written.is_err() || read.is_ok(), "the dynamic write returned {written:?}; the typed read then returns {read:?}");
}

#[test]
fn version_bumps_with_and_without_migrations() {
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "vb", version = 1)]
    struct A {
        #[record(key)]
        id: u32,
        x: i32,
    }
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "vb", version = 2)]
    struct B {
        #[record(key)]
        id: u32,
        x: i32,
    }
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "vb", version = 3)]
    struct C {
        #[record(key)]
        id: u32,
        x: i32,
    }
    let (dir, db) = open();
    let a = db.collection::<A>().unwrap();
    db.write(|tx| a.insert(tx, &A { id: 1, x: 1 })).unwrap();
    drop(a);
    // Same shape, version bumped, no migration: opens, records as they are.
    let b = db.collection::<B>().unwrap();
    assert_eq!(b.get(&db, &1).unwrap().unwrap().x, 1);
    drop(b);
    assert_eq!(db.dyn_collection("vb").unwrap().schema().version, 2);
    // Version bumped again with a migration: it runs once.
    let c = db
        .collection_with::<C>(CollectionOptions {
            migrate: Some(Box::new(|v| Ok(C { id: v.get("id").unwrap().as_u64().unwrap() as u32, x: 10 }))),
        })
        .unwrap();
    assert_eq!(c.get(&db, &1).unwrap().unwrap().x, 10);
    drop((c, db));
    let db = Db::open(dir.path().join("db")).unwrap();
    let c = db.collection_with::<C>(CollectionOptions { migrate: Some(Box::new(|_| panic!("the migration must not run again"))) }).unwrap();
    assert_eq!(c.get(&db, &1).unwrap().unwrap().x, 10);
}
