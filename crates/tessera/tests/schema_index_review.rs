//! Adversarial review of schema changes and index builds of typed collections: every answer
//! is compared with a filter over all records in plain Rust, and every schema change must
//! either read the old records exactly or be refused with a typed error.

use std::time::Duration;
use tessera::collection::{Embed, Record};
use tessera::{Db, Error};

fn open() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    (dir, db)
}

fn assert_sound(db: &Db) {
    let report = db.check().unwrap();
    assert!(report.problems.is_empty(), "{report}");
}

mod stale_build {
    use super::*;

    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "pairs")]
    pub struct Plain {
        #[record(key)]
        pub id: u32,
        pub a: i64,
        pub b: i64,
    }

    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "pairs")]
    pub struct ByA {
        #[record(key)]
        pub id: u32,
        #[record(index)]
        pub a: i64,
        pub b: i64,
    }

    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "pairs")]
    pub struct ByB {
        #[record(key)]
        pub id: u32,
        pub a: i64,
        #[record(index)]
        pub b: i64,
    }

    pub fn plain(id: u32) -> Plain {
        Plain { id, a: i64::from(id % 10), b: i64::from(id % 7) }
    }
}

/// Before: a background build kept running for a handle whose schema a later open had changed.
/// Opening the collection as `ByB` dropped index `a` (id 0) and gave id 0 to a new index on
/// `b`; the `ByA` handle's build thread went on writing `a` entries under id 0 and marked id 0
/// ready in the stored schema, so `ByB`'s queries through its index returned records twice
/// (`b >= 0` counted about 5,500 of 3,000 records) and `Db::check` found stray entries.
#[test]
fn a_build_superseded_by_another_schema_writes_nothing_under_a_reused_index_id() {
    use stale_build::*;
    let (_dir, db) = open();
    let records: Vec<Plain> = (0..3000).map(plain).collect();
    let plain_handle = db.collection::<Plain>().unwrap();
    db.write(|tx| records.iter().try_for_each(|record| plain_handle.insert(tx, record).map(drop))).unwrap();
    drop(plain_handle);
    // Its build starts on a thread of its own; the handle is kept, so the thread goes on.
    let by_a = db.collection::<ByA>().unwrap();
    let by_b = db.collection::<ByB>().unwrap();
    assert!(by_b.wait_for_indexes(Duration::from_secs(30)));
    // The superseded build ends too: it stops, saying why (before: it marked its index ready).
    let a_built = by_a.wait_for_indexes(Duration::from_secs(30));
    for b in [0i64, 3, 6] {
        let query = by_b.filter(ByB::b().eq(b));
        assert!(query.explain().unwrap().to_string().contains("index"), "{}", query.explain().unwrap());
        let found: Vec<u32> = query.fetch(&db).unwrap().into_iter().map(|record| record.id).collect();
        let expected: Vec<u32> = records.iter().filter(|record| record.b == b).map(|record| record.id).collect();
        assert_eq!(found, expected, "b == {b}");
    }
    let found = by_b.filter(ByB::b().ge(0)).count(&db).unwrap();
    assert_eq!(found, records.len(), "each record once");
    assert_sound(&db);
    assert!(!a_built, "a superseded handle's index is never ready");
    assert!(by_a.index_failure("a").is_some_and(|why| why.contains("open the collection again")), "{:?}", by_a.index_failure("a"));
}

mod resurrected {
    use super::*;

    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "readings")]
    pub struct V1 {
        #[record(key)]
        pub id: u32,
        pub value: f64,
        pub count: i64,
    }

    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "readings")]
    pub struct V2 {
        #[record(key)]
        pub id: u32,
    }

    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "readings")]
    pub struct V3 {
        #[record(key)]
        pub id: u32,
        pub value: Option<f32>,
        pub count: Option<i64>,
    }
}

/// Before: a field removed (its values stay in the records, as documented) and declared again
/// as a narrower float was compared only with the last stored shape, which no longer had it:
/// the open passed, and the old `f64` value 0.1 read back as the `f32` 0.1 (rounded). Now the
/// open reads the stored values, as it does for a field changed in place.
#[test]
fn a_removed_field_declared_again_as_f32_does_not_read_stored_f64_values_rounded() {
    use resurrected::*;
    let (_dir, db) = open();
    let v1 = db.collection::<V1>().unwrap();
    db.write(|tx| v1.insert(tx, &V1 { id: 1, value: 0.1, count: 3 })).unwrap();
    drop(v1);
    drop(db.collection::<V2>().unwrap());
    match db.collection::<V3>() {
        Err(Error::SchemaMismatch { collection, reason }) => {
            assert_eq!(collection, "readings");
            assert!(reason.contains("value"), "{reason}");
        }
        Ok(v3) => {
            // Only acceptable if the value reads exactly (it cannot: 0.1 is no f32).
            let record = v3.get(&db, &1u32).unwrap().unwrap();
            panic!("opened, and read {:?} for the stored 0.1", record.value);
        }
        Err(other) => panic!("{other:?}"),
    }
}

/// Guards: a removed field declared again as a float over values it holds exactly (or never
/// held) opens, and reads them.
#[test]
fn a_removed_field_declared_again_over_exact_values_opens() {
    use resurrected::*;
    let (_dir, db) = open();
    let v1 = db.collection::<V1>().unwrap();
    db.write(|tx| v1.insert(tx, &V1 { id: 1, value: 0.5, count: 3 })).unwrap();
    drop(v1);
    let v2 = db.collection::<V2>().unwrap();
    db.write(|tx| v2.insert(tx, &V2 { id: 2 })).unwrap();
    drop(v2);
    let v3 = db.collection::<V3>().unwrap();
    assert_eq!(v3.get(&db, &1u32).unwrap(), Some(V3 { id: 1, value: Some(0.5), count: Some(3) }));
    assert_eq!(v3.get(&db, &2u32).unwrap(), Some(V3 { id: 2, value: None, count: None }));
}

mod widened_key {
    use super::*;

    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "accounts")]
    pub struct Narrow {
        #[record(key)]
        pub id: u32,
        pub owner: String,
    }

    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "accounts")]
    pub struct Wide {
        #[record(key)]
        pub id: u64,
        pub owner: String,
    }
}

/// A primary-key field widened from `u32` to `u64` passed the schema check (a widening keeps
/// every value), but a key's encoding has the type's width: `get(&1u64)` looked for eight bytes
/// where four are stored, and returned `Ok(None)` for a stored record; an insert of the same id
/// then stored it twice. The open is now `SchemaMismatch` naming the field (a migration
/// re-encodes the keys).
#[test]
fn a_widened_key_field_is_refused_or_finds_the_stored_records() {
    use widened_key::*;
    let (_dir, db) = open();
    let narrow = db.collection::<Narrow>().unwrap();
    db.write(|tx| narrow.insert(tx, &Narrow { id: 1, owner: "ann".into() })).unwrap();
    drop(narrow);
    match db.collection::<Wide>() {
        Err(Error::SchemaMismatch { reason, .. }) => assert!(reason.contains("id"), "{reason}"),
        Ok(wide) => {
            assert_eq!(wide.get(&db, &1u64).unwrap(), Some(Wide { id: 1, owner: "ann".into() }), "the stored record");
            assert!(db.write(|tx| wide.insert(tx, &Wide { id: 1, owner: "bob".into() })).is_err(), "key 1 is taken");
            assert_eq!(wide.all().count(&db).unwrap(), 1);
        }
        Err(other) => panic!("{other:?}"),
    }
}

mod tuple_point {
    use super::*;

    pub mod v1 {
        use super::*;
        #[derive(Embed, Debug, Clone, PartialEq)]
        pub struct Point(pub f64, pub f64);
        #[derive(Record, Debug, Clone, PartialEq)]
        #[record(name = "places")]
        pub struct Place {
            #[record(key)]
            pub id: u32,
            pub at: Point,
        }
    }

    pub mod v2 {
        use super::*;
        #[derive(Embed, Debug, Clone, PartialEq)]
        pub struct Point(pub f32, pub f32);
        #[derive(Record, Debug, Clone, PartialEq)]
        #[record(name = "places")]
        pub struct Place {
            #[record(key)]
            pub id: u32,
            pub at: Point,
        }
    }
}

/// A tuple struct was described as a list of anything, so its elements changing from `f64` to
/// `f32` passed the schema check, and the stored 0.1 read as the `f32` 0.1 (rounded), where
/// the same change of a named field is refused. It is described with its element types now.
#[test]
fn a_tuple_struct_narrowed_from_f64_to_f32_does_not_read_rounded() {
    use tuple_point::*;
    let (_dir, db) = open();
    let places = db.collection::<v1::Place>().unwrap();
    db.write(|tx| places.insert(tx, &v1::Place { id: 1, at: v1::Point(0.1, 2.0) })).unwrap();
    drop(places);
    match db.collection::<v2::Place>() {
        Err(Error::SchemaMismatch { reason, .. }) => assert!(reason.contains("at"), "{reason}"),
        Ok(places) => {
            let read = places.get(&db, &1u32);
            assert!(read.is_err(), "read {read:?} for the stored (0.1, 2.0)");
        }
        Err(other) => panic!("{other:?}"),
    }
}

/// A collection stored before tuple element types were recorded (its schema says `List(Any)`
/// of the tuple struct) opens with today's description: with `f64` elements it reads as
/// before, and its schema then records the element types; with `f32` elements, a stored
/// element that `f32` cannot hold is refused at open, as for a named field.
#[test]
fn a_tuple_struct_stored_as_a_list_of_anything_learns_its_element_types_at_open() {
    use tessera::collection::{DynSchema, IntType, KeyKind, TypeDesc};
    use tuple_point::*;
    let (_dir, db) = open();
    let old_shape =
        TypeDesc::Struct(vec![("id".into(), TypeDesc::Integer(IntType::U32)), ("at".into(), TypeDesc::List(Box::new(TypeDesc::Any)))]);
    let schema = DynSchema { version: 0, key_fields: vec!["id".into()], key_kinds: vec![KeyKind::U32], shape: old_shape, indexes: vec![] };
    let old = db.create_dyn_collection("places", &schema).unwrap();
    db.write(|tx| old.insert_json(tx, br#"{"id": 1, "at": [0.1, 2.0]}"#)).unwrap();
    drop(old);
    match db.collection::<v2::Place>() {
        Err(Error::SchemaMismatch { reason, .. }) => assert!(reason.contains("at.[0]") && reason.contains("0.1"), "{reason}"),
        other => panic!("an f32 element over a stored 0.1 opened: {other:?}"),
    }
    let places = db.collection::<v1::Place>().unwrap();
    assert_eq!(places.get(&db, &1u32).unwrap(), Some(v1::Place { id: 1, at: v1::Point(0.1, 2.0) }));
    let stored = db.dyn_collection("places").unwrap().schema().shape.resolve("at").cloned();
    assert_eq!(stored, Some(TypeDesc::Tuple(vec![TypeDesc::Float, TypeDesc::Float])));
    drop(places);
    assert!(matches!(db.collection::<v2::Place>(), Err(Error::SchemaMismatch { .. })), "the learned f64 elements are checked");
    assert_sound(&db);
}

mod gauges {
    use super::*;

    pub mod wide {
        use super::*;
        #[derive(Record, Debug, Clone, PartialEq)]
        #[record(name = "gauges")]
        pub struct Gauge {
            #[record(key)]
            pub id: u32,
            pub value: f64,
        }
    }

    pub mod narrow {
        use super::*;
        #[derive(Record, Debug, Clone, PartialEq)]
        #[record(name = "gauges")]
        pub struct Gauge {
            #[record(key)]
            pub id: u32,
            pub value: f32,
        }
    }
}

const CHILD_PATH: &str = "TESSERA_SCHEMA_INDEX_REVIEW_CHILD_PATH";
const CHILD_MODE: &str = "TESSERA_SCHEMA_INDEX_REVIEW_CHILD_MODE";

#[test]
#[ignore = "run by the cross-process tests below as a child process"]
fn schema_index_review_child() {
    let path = std::env::var(CHILD_PATH).expect("run by a parent test");
    let db = Db::open(&path).unwrap();
    match std::env::var(CHILD_MODE).unwrap().as_str() {
        // Opens the collection with `f32` values (the stored ones fit exactly).
        "narrow" => drop(db.collection::<gauges::narrow::Gauge>().unwrap()),
        // Opens it with `f64` values, and writes one no `f32` holds.
        "widen" => {
            let wide = db.collection::<gauges::wide::Gauge>().unwrap();
            db.write(|tx| wide.insert(tx, &gauges::wide::Gauge { id: 3, value: 0.1 })).unwrap();
        }
        mode => panic!("unknown mode {mode}"),
    }
}

fn run_child(path: &std::path::Path, mode: &str) {
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["schema_index_review_child", "--exact", "--ignored", "--test-threads=1"])
        .env(CHILD_PATH, path)
        .env(CHILD_MODE, mode)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "child {mode}");
}

/// Before: the schema watch took `f64` and `f32` as the same declaration (as it does a Python
/// `int` and a Rust `i64`). A handle kept with `f64` after another process opened the
/// collection as `f32` went on writing doubles (0.1), which the `f32` type then read rounded;
/// a handle kept with `f32` after another process opened it as `f64` read that process's 0.1
/// as the `f32` 0.1. Both are now `SchemaMismatch` naming another process.
#[test]
fn a_float_width_changed_by_another_process_supersedes_a_kept_handle() {
    use gauges::{narrow, wide};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open(&path).unwrap();
    let wide_handle = db.collection::<wide::Gauge>().unwrap();
    db.write(|tx| wide_handle.insert(tx, &wide::Gauge { id: 1, value: 0.5 })).unwrap();
    run_child(&path, "narrow");
    let written = db.write(|tx| wide_handle.insert(tx, &wide::Gauge { id: 2, value: 0.1 }));
    let read_back = written
        .as_ref()
        .ok()
        .map(|_| db.collection::<narrow::Gauge>().unwrap().get(&db, &2u32).map(|found| found.map(|gauge| f64::from(gauge.value))));
    assert!(
        matches!(&written, Err(Error::SchemaMismatch { reason, .. }) if reason.contains("another process")),
        "{written:?}, then the f32 type read {read_back:?}"
    );
    drop(wide_handle);

    // The other way round: this process keeps `f32`, the other writes a double.
    let narrow_handle = db.collection::<narrow::Gauge>().unwrap();
    run_child(&path, "widen");
    let read = narrow_handle.get(&db, &3u32);
    assert!(matches!(&read, Err(Error::SchemaMismatch { reason, .. }) if reason.contains("another process")), "{read:?}");
    let found = narrow_handle.all().fetch(&db);
    assert!(found.is_err(), "{found:?}");
    assert_eq!(db.collection::<wide::Gauge>().unwrap().get(&db, &3u32).unwrap().map(|gauge| gauge.value), Some(0.1));
}

mod building {
    use super::*;

    #[derive(Embed, Debug, Clone, PartialEq)]
    pub struct Place {
        pub x: f64,
    }

    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "items")]
    pub struct Plain {
        #[record(key)]
        pub id: u32,
        pub size: i64,
        pub tags: Vec<String>,
        pub place: Option<Place>,
        pub note: Option<String>,
    }

    /// `Place` with a field more, which stored records lack.
    #[derive(Embed, Debug, Clone, PartialEq)]
    pub struct Place2 {
        pub x: f64,
        pub y: Option<i32>,
    }

    /// The same records with five indexes: plain, multi-entry, nested under an option (one of
    /// them on the new nested field), and on an optional field.
    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "items", index = "place.x", index = "place.y")]
    pub struct Indexed {
        #[record(key)]
        pub id: u32,
        #[record(index)]
        pub size: i64,
        #[record(index_elements)]
        pub tags: Vec<String>,
        pub place: Option<Place2>,
        #[record(index)]
        pub note: Option<String>,
    }

    /// A small deterministic generator (no sleeps, no clock).
    pub struct Rng(pub u64);

    impl Rng {
        pub fn below(&mut self, n: u64) -> u64 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }
    }

    /// A record as `Plain` could have written it (`place.y` missing) when `old`.
    pub fn item(rng: &mut Rng, id: u32, old: bool) -> Indexed {
        let tags = (0..rng.below(4)).map(|_| format!("t{}", rng.below(6))).collect();
        let y = (!old && rng.below(2) == 0).then(|| rng.below(4) as i32);
        let place = (rng.below(3) > 0).then(|| Place2 { x: rng.below(10) as f64 / 2.0, y });
        let note = match rng.below(4) {
            0 => None,
            n => Some(format!("n{n}")),
        };
        Indexed { id, size: rng.below(20) as i64 - 5, tags, place, note }
    }

    pub fn plain(item: &Indexed) -> Plain {
        let Indexed { id, size, tags, place, note } = item.clone();
        Plain { id, size, tags, place: place.map(|place| Place { x: place.x }), note }
    }
}

/// Every query of `checks` through `items`, against the same filter over `model` in Rust.
fn compare_with_model(
    db: &Db,
    items: &tessera::collection::Collection<building::Indexed>,
    model: &std::collections::BTreeMap<u32, building::Indexed>,
) {
    use building::Indexed;
    use tessera::query::{Expr, field};
    type Keep = Box<dyn Fn(&Indexed) -> bool>;
    let checks: Vec<(Expr, Keep)> = vec![
        (field("size").eq(3), Box::new(|item| item.size == 3)),
        (field("size").between(-2, 4), Box::new(|item| (-2..=4).contains(&item.size))),
        (field("size").gt(10), Box::new(|item| item.size > 10)),
        (field("tags").contains("t2"), Box::new(|item| item.tags.iter().any(|tag| tag == "t2"))),
        (field("place.x").ge(2.5), Box::new(|item| item.place.as_ref().is_some_and(|place| place.x >= 2.5))),
        (field("place.x").is_null(), Box::new(|item| item.place.is_none())),
        (field("place.y").is_null(), Box::new(|item| item.place.as_ref().is_none_or(|place| place.y.is_none()))),
        (field("place.y").ge(2), Box::new(|item| item.place.as_ref().is_some_and(|place| place.y.is_some_and(|y| y >= 2)))),
        (field("note").eq("n2"), Box::new(|item| item.note.as_deref() == Some("n2"))),
        (field("note").is_null(), Box::new(|item| item.note.is_none())),
        (field("size").lt(0).and(field("tags").contains("t1")), Box::new(|item| item.size < 0 && item.tags.iter().any(|tag| tag == "t1"))),
    ];
    for (expr, keep) in checks {
        let text = expr.to_string();
        let found = items.filter(expr).fetch(db).unwrap();
        let expected: Vec<Indexed> = model.values().filter(|item| keep(item)).cloned().collect();
        let mut sorted = found.clone();
        sorted.sort_by_key(|item| item.id);
        assert_eq!(sorted, expected, "{text}");
        assert_eq!(found.len(), expected.len(), "{text}: each record once");
    }
    let top = items.all().order_by("size", tessera::collection::Order::Desc).limit(15).fetch(db).unwrap();
    let mut expected: Vec<Indexed> = model.values().cloned().collect();
    expected.sort_by(|a, b| b.size.cmp(&a.size).then(a.id.cmp(&b.id)));
    expected.truncate(15);
    assert_eq!(top, expected, "order by size desc limit 15");
}

/// Guards: indexes added over existing records (plain, multi-entry, nested under an option, on
/// an optional field, on a nested field the records lack) answer as a filter over every record
/// in Rust does: while they build (queries scan), with records inserted, updated and deleted
/// during the build, after the build says ready, after the database is closed mid-build and
/// opened again (the build starts over), and after they are dropped and declared again;
/// `Db::check` then finds every entry where it belongs.
#[test]
fn indexes_built_beside_writes_and_a_reopen_agree_with_a_filter_in_rust() {
    use building::*;
    for (seed, reopen_mid_build) in [(1u64, false), (2, true)] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let mut rng = Rng(seed);
        let mut model = std::collections::BTreeMap::new();
        {
            let db = Db::open(&path).unwrap();
            let plain_handle = db.collection::<Plain>().unwrap();
            let items: Vec<Indexed> = (0..1100).map(|id| item(&mut rng, id * 2, true)).collect();
            db.write(|tx| items.iter().try_for_each(|item| plain_handle.insert(tx, &plain(item)).map(drop))).unwrap();
            model.extend(items.into_iter().map(|item| (item.id, item)));
            drop(plain_handle);
            let indexed = db.collection::<Indexed>().unwrap();
            // A few writes only before a reopen, so that it comes while the indexes build.
            for round in 0..if reopen_mid_build { 3 } else { 20 } {
                db.write(|tx| {
                    for _ in 0..5 {
                        let id = rng.below(2300) as u32;
                        if rng.below(3) == 0 {
                            indexed.delete(tx, &id)?;
                            model.remove(&id);
                        } else {
                            let record = item(&mut rng, id, false);
                            indexed.upsert(tx, &record)?;
                            model.insert(id, record);
                        }
                    }
                    Ok(())
                })
                .unwrap();
                if round % 10 == 1 && !reopen_mid_build {
                    compare_with_model(&db, &indexed, &model);
                }
            }
            if !reopen_mid_build {
                assert!(indexed.wait_for_indexes(Duration::from_secs(30)));
                compare_with_model(&db, &indexed, &model);
            }
        }
        let db = Db::open(&path).unwrap();
        let indexed = db.collection::<Indexed>().unwrap();
        compare_with_model(&db, &indexed, &model);
        assert!(indexed.wait_for_indexes(Duration::from_secs(30)));
        assert!(indexed.filter(tessera::query::field("tags").contains("t2")).explain().unwrap().to_string().contains("index"));
        compare_with_model(&db, &indexed, &model);
        assert_sound(&db);
        drop(indexed);
        // The indexes dropped (entries removed), records changed meanwhile, and declared again.
        let plain_handle = db.collection::<Plain>().unwrap();
        db.write(|tx| {
            for _ in 0..40 {
                let id = rng.below(2300) as u32;
                plain_handle.delete(tx, &id)?;
                model.remove(&id);
                let record = item(&mut rng, id + 1, true);
                plain_handle.upsert(tx, &plain(&record))?;
                model.insert(record.id, record);
            }
            Ok(())
        })
        .unwrap();
        drop(plain_handle);
        let indexed = db.collection::<Indexed>().unwrap();
        assert!(indexed.wait_for_indexes(Duration::from_secs(30)));
        compare_with_model(&db, &indexed, &model);
        assert_sound(&db);
    }
}

mod slugs {
    use super::*;

    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "slugs")]
    pub struct Plain {
        #[record(key)]
        pub id: u32,
        pub slug: Option<String>,
    }

    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "slugs")]
    pub struct Unique {
        #[record(key)]
        pub id: u32,
        #[record(unique)]
        pub slug: Option<String>,
    }
}

/// Guards: a unique index declared over records whose duplicates are long strings (past the
/// 256 bytes an entry holds whole: truncated entries, compared by the records' values) is
/// refused naming both keys, and nothing is written; strings that share the long prefix but
/// differ, and NULLs, are not duplicates.
#[test]
fn a_unique_index_over_long_duplicate_strings_is_refused_naming_both_keys() {
    use slugs::{Plain, Unique};
    let (_dir, db) = open();
    let prefix = "p".repeat(400);
    let plain = db.collection::<Plain>().unwrap();
    let slug = |id: u32, text: Option<String>| Plain { id, slug: text };
    db.write(|tx| {
        plain.insert(tx, &slug(1, Some(format!("{prefix}a"))))?;
        plain.insert(tx, &slug(2, Some(format!("{prefix}b"))))?;
        plain.insert(tx, &slug(3, None))?;
        plain.insert(tx, &slug(4, None))?;
        plain.insert(tx, &slug(5, Some(format!("{prefix}a"))))
    })
    .unwrap();
    drop(plain);
    match db.collection::<Unique>() {
        Err(Error::UniqueViolation { collection, index, key, holder }) => {
            assert_eq!((collection.as_str(), index.as_str()), ("slugs", "slug"));
            let mut keys = [key, holder];
            keys.sort();
            assert_eq!(keys, ["1".to_owned(), "5".to_owned()]);
        }
        other => panic!("{other:?}"),
    }
    // Nothing written: the old type opens, and once the duplicate goes the index builds.
    let plain = db.collection::<Plain>().unwrap();
    db.write(|tx| plain.delete(tx, &5u32)).unwrap();
    drop(plain);
    let unique = db.collection::<Unique>().unwrap();
    assert!(unique.indexes_ready(), "a unique index is built when the collection opens");
    let long_a = format!("{prefix}a");
    let found: Vec<u32> = unique.filter(Unique::slug().eq(long_a.as_str())).fetch(&db).unwrap().iter().map(|r| r.id).collect();
    assert_eq!(found, [1]);
    assert!(matches!(db.write(|tx| unique.insert(tx, &Unique { id: 6, slug: Some(long_a.clone()) })), Err(Error::UniqueViolation { .. })));
    assert_eq!(unique.filter(Unique::slug().is_null()).count(&db).unwrap(), 2);
    assert_sound(&db);
}

mod nested_widths {
    use super::*;

    pub mod wide {
        use super::*;
        #[derive(Embed, Debug, Clone, PartialEq)]
        pub struct Inner {
            pub v: f64,
        }
        #[derive(Embed, Debug, Clone, PartialEq)]
        pub enum Shape {
            Dot,
            Circle { r: f64 },
            Radius(f64),
        }
        #[derive(Record, Debug, Clone, PartialEq)]
        #[record(name = "nested_widths")]
        pub struct Record1 {
            #[record(key)]
            pub id: u32,
            pub inner: std::collections::BTreeMap<String, Vec<Inner>>,
            pub shape: Option<Shape>,
        }
    }

    pub mod narrow {
        use super::*;
        #[derive(Embed, Debug, Clone, PartialEq)]
        pub struct Inner {
            pub v: f32,
        }
        #[derive(Embed, Debug, Clone, PartialEq)]
        pub enum Shape {
            Dot,
            Circle { r: f32 },
            Radius(f32),
        }
        #[derive(Record, Debug, Clone, PartialEq)]
        #[record(name = "nested_widths")]
        pub struct Record1 {
            #[record(key)]
            pub id: u32,
            pub inner: std::collections::BTreeMap<String, Vec<Inner>>,
            pub shape: Option<Shape>,
        }
    }
}

/// Guards: an `f64` narrowed to `f32` deep inside a record (a map of lists of structs, a struct
/// variant, a newtype variant) is refused naming the path when a stored value would round, and
/// opens when every stored value is an exact `f32`.
#[test]
fn nested_floats_narrowed_to_f32_are_refused_where_a_stored_value_would_round() {
    use nested_widths::{narrow, wide};
    let cases: [(wide::Record1, &str); 3] = [
        (
            wide::Record1 { id: 1, inner: [("k".to_owned(), vec![wide::Inner { v: 0.5 }, wide::Inner { v: 0.1 }])].into(), shape: None },
            "inner.*.[].v",
        ),
        (wide::Record1 { id: 2, inner: Default::default(), shape: Some(wide::Shape::Circle { r: 0.1 }) }, "shape.Circle.r"),
        (wide::Record1 { id: 3, inner: Default::default(), shape: Some(wide::Shape::Radius(0.1)) }, "shape.Radius"),
    ];
    for (record, path) in cases {
        let (_dir, db) = open();
        let wide_handle = db.collection::<wide::Record1>().unwrap();
        let exact = wide::Record1 { id: 9, inner: Default::default(), shape: Some(wide::Shape::Radius(0.5)) };
        db.write(|tx| {
            wide_handle.insert(tx, &record)?;
            wide_handle.insert(tx, &exact)
        })
        .unwrap();
        drop(wide_handle);
        match db.collection::<narrow::Record1>() {
            Err(Error::SchemaMismatch { reason, .. }) => assert!(reason.contains(&format!("`{path}`")), "{path}: {reason}"),
            other => panic!("{path}: {other:?}"),
        }
        let wide_handle = db.collection::<wide::Record1>().unwrap();
        db.write(|tx| wide_handle.delete(tx, &record.id)).unwrap();
        drop(wide_handle);
        let narrow_handle = db.collection::<narrow::Record1>().unwrap();
        let read = narrow_handle.get(&db, &9u32).unwrap().unwrap();
        assert_eq!(read.shape, Some(narrow::Shape::Radius(0.5)));
    }
}

/// Before: a query through a handle read a snapshot taken before the handle's own open had
/// changed the collection's indexes: the handle's index id 0 (`b`) held index `a`'s entries in
/// that snapshot, and `b == 3` returned the records whose `a` and `b` were both 3 (the fast
/// check skips views when no other process has committed, and did not look at the view's age).
#[test]
fn a_snapshot_older_than_a_handle_is_not_read_through_the_handles_index_ids() {
    use stale_build::*;
    let (_dir, db) = open();
    let by_a = db.collection::<ByA>().unwrap();
    let records: Vec<ByA> = (0..40).map(|id| ByA { id, a: i64::from(id % 5), b: i64::from(id % 7) }).collect();
    db.write(|tx| records.iter().try_for_each(|record| by_a.insert(tx, record).map(drop))).unwrap();
    drop(by_a);
    let old = db.read_txn().unwrap();
    let by_b = db.collection::<ByB>().unwrap();
    assert!(by_b.wait_for_indexes(Duration::from_secs(30)));
    let query = by_b.filter(ByB::b().eq(3));
    assert!(query.explain().unwrap().to_string().contains("index range on b"), "{}", query.explain().unwrap());
    let expected: Vec<u32> = records.iter().filter(|record| record.b == 3).map(|record| record.id).collect();
    assert_eq!(query.fetch(&db).unwrap().iter().map(|record| record.id).collect::<Vec<_>>(), expected);
    match query.fetch(&old) {
        Err(Error::SchemaMismatch { .. }) => {}
        Ok(found) => assert_eq!(found.iter().map(|record| record.id).collect::<Vec<_>>(), expected, "through the old snapshot"),
        Err(other) => panic!("{other:?}"),
    }
}

/// Before: a query through a snapshot taken before the collection existed failed with
/// `Error::Io` ("Invalid argument", from LMDB: the keyspace is not in that snapshot), naming
/// nothing. Now the snapshot's missing schema is found first: `SchemaMismatch` naming the
/// collection and saying the snapshot is older than the handle.
#[test]
fn a_snapshot_from_before_a_collection_existed_is_a_typed_error_naming_it() {
    use stale_build::*;
    let (_dir, db) = open();
    let other = db.keyspace("other").unwrap();
    db.write(|tx| tx.put(&other, b"k", b"v")).unwrap();
    let old = db.read_txn().unwrap();
    let by_a = db.collection::<ByA>().unwrap();
    db.write(|tx| by_a.insert(tx, &ByA { id: 1, a: 3, b: 4 })).unwrap();
    let older = |result: tessera::Result<Vec<ByA>>| match result {
        Ok(found) => assert_eq!(found, []),
        Err(Error::SchemaMismatch { collection, reason }) => {
            assert_eq!(collection, "pairs");
            assert!(reason.contains("older than this handle"), "{reason}");
        }
        Err(other) => panic!("{other:?}"),
    };
    older(by_a.all().fetch(&old));
    older(by_a.filter(ByA::a().eq(3)).fetch(&old));
    older(by_a.get(&old, &1u32).map(|found| found.into_iter().collect()));
    assert_eq!(by_a.filter(ByA::a().eq(3)).count(&db).unwrap(), 1);
}
