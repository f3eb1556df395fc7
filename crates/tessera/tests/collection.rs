//! Typed collections: writes and their outcomes, indexes (unique, background build, drop),
//! schema evolution and migration, queries with order/limit/offset, and typed errors.

use serde::{Deserialize, Serialize};
use std::time::Duration;
use tessera::collection::{CollectionOptions, DynSchema, Embed, KeyKind, Order, Record, TypeDesc, WriteOutcome};
use tessera::query::field;
use tessera::{Db, Error};

#[derive(Serialize, Deserialize, Embed, Debug, Clone, PartialEq)]
struct Vec3 {
    x: f32,
    y: f32,
    z: f32,
}

#[derive(Serialize, Deserialize, Embed, Debug, Clone, PartialEq)]
enum Color {
    Red,
    Green,
    Blue,
}

#[derive(Serialize, Deserialize, Embed, Debug, Clone, PartialEq)]
enum Content {
    Text { text: String },
    Image { images: Vec<String> },
}

#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "bench_doc", index = "pos.x")]
struct BenchDoc {
    pos: Vec3,
    color: Color,
    #[record(key)]
    title: String,
    content: Option<Content>,
    #[record(unique)]
    tag: String,
    #[record(index)]
    priority: i32,
}

fn bench_doc(i: i32) -> BenchDoc {
    let (color, priority, content) = match i % 3 {
        0 => (Color::Blue, 5000 - i, Some(Content::Image { images: vec![format!("image{i}")] })),
        1 => (Color::Red, i - 5000, None),
        _ => (Color::Green, 0, Some(Content::Text { text: format!("text{i}") })),
    };
    BenchDoc { pos: Vec3 { x: i as f32, y: 0.0, z: 1.0 }, color, title: format!("title{i}"), content, tag: format!("tag{i}"), priority }
}

fn open() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    (dir, db)
}

fn titles(docs: &[BenchDoc]) -> Vec<String> {
    docs.iter().map(|doc| doc.title.clone()).collect()
}

#[test]
fn writes_report_their_outcome() {
    let (_dir, db) = open();
    let docs = db.collection::<BenchDoc>().unwrap();
    let doc = bench_doc(1);
    assert_eq!(db.write(|tx| docs.insert(tx, &doc)).unwrap(), WriteOutcome::Inserted);
    assert!(matches!(db.write(|tx| docs.insert(tx, &doc)), Err(Error::DuplicateKey { .. })));
    assert_eq!(db.write(|tx| docs.upsert(tx, &doc)).unwrap(), WriteOutcome::Unchanged);
    assert_eq!(db.write(|tx| docs.update(tx, "title1", |d| d.priority = 7)).unwrap(), WriteOutcome::Updated);
    assert_eq!(db.write(|tx| docs.update(tx, "title1", |d| d.priority = 7)).unwrap(), WriteOutcome::Unchanged);
    assert!(matches!(db.write(|tx| docs.update(tx, "missing", |_| {})), Err(Error::NotFound { .. })));
    assert!(matches!(db.write(|tx| docs.update(tx, "title1", |d| d.title = "other".into())), Err(Error::KeyChanged { .. })));
    assert_eq!(db.write(|tx| docs.patch(tx, "title1", "pos.y", &2.5f32)).unwrap(), WriteOutcome::Updated);
    assert!(matches!(db.write(|tx| docs.patch(tx, "title1", "priority", &"high")), Err(Error::RecordDecode { .. })));
    // A path the record does not have is an error naming it, not `Unchanged`.
    for path in ["nosuchfield", "pos.w", "pos.x.deeper"] {
        match db.write(|tx| docs.patch(tx, "title1", path, &1)) {
            Err(Error::UnknownField { collection, path: named }) => assert_eq!((collection.as_str(), named.as_str()), ("bench_doc", path)),
            other => panic!("{path}: expected UnknownField, got {other:?}"),
        }
    }
    let stored = docs.get(&db, "title1").unwrap().unwrap();
    assert_eq!((stored.priority, stored.pos.y), (7, 2.5));
    assert_eq!(db.write(|tx| docs.delete(tx, "title1")).unwrap(), WriteOutcome::Deleted);
    assert_eq!(db.write(|tx| docs.delete(tx, "title1")).unwrap(), WriteOutcome::Unchanged);
    assert_eq!(docs.get(&db, "title1").unwrap(), None);
}

#[test]
fn unchanged_writes_publish_nothing() {
    let (_dir, db) = open();
    let docs = db.collection::<BenchDoc>().unwrap();
    db.write(|tx| docs.insert(tx, &bench_doc(1))).unwrap();
    let feed = db.subscribe().unwrap();
    db.write(|tx| docs.upsert(tx, &bench_doc(1))).unwrap();
    assert!(feed.recv_timeout(Duration::from_millis(100)).is_none());
}

#[test]
fn unique_index_violation_names_the_index_and_rolls_back() {
    let (_dir, db) = open();
    let docs = db.collection::<BenchDoc>().unwrap();
    db.write(|tx| docs.insert(tx, &bench_doc(1))).unwrap();
    let mut clash = bench_doc(2);
    clash.tag = "tag1".into();
    let result = db.write(|tx| {
        docs.insert(tx, &bench_doc(3))?;
        docs.insert(tx, &clash)
    });
    match result {
        Err(Error::UniqueViolation { index, holder, .. }) => assert_eq!((index.as_str(), holder.as_str()), ("tag", "title1")),
        other => panic!("expected a unique violation, got {other:?}"),
    }
    assert_eq!(docs.get(&db, "title3").unwrap(), None, "the whole transaction rolled back");
    // Changing the holder's own value, then giving the old value to another, is fine.
    db.write(|tx| {
        docs.update(tx, "title1", |d| d.tag = "renamed".into())?;
        docs.insert(tx, &clash)
    })
    .unwrap();
    assert_eq!(docs.filter(BenchDoc::tag().eq("tag1")).fetch(&db).unwrap(), vec![clash]);
}

#[test]
fn queries_filter_order_and_page() {
    let (_dir, db) = open();
    let docs = db.collection::<BenchDoc>().unwrap();
    db.write(|tx| (0..300).try_for_each(|i| docs.insert(tx, &bench_doc(i)).map(drop))).unwrap();
    let high = docs.filter(BenchDoc::priority().gt(4800)).fetch(&db).unwrap();
    assert_eq!(high.len(), (0..300).filter(|i| i % 3 == 0 && 5000 - i > 4800).count());
    let images = docs.filter(BenchDoc::content().is_variant("Image")).count(&db).unwrap();
    assert_eq!(images, 100);
    let no_content = docs.filter(BenchDoc::content().is_null()).count(&db).unwrap();
    assert_eq!(no_content, 100);
    // Order by several fields, with offset and limit.
    let page = docs.all().order_by(BenchDoc::priority(), Order::Desc).order_by("title", Order::Asc).offset(1).limit(3).fetch(&db).unwrap();
    assert_eq!(titles(&page), ["title3", "title6", "title9"]);
    // Ties are broken by primary key: all the Green ones have priority 0.
    let greens = docs.filter(BenchDoc::color().is_variant("Green")).order_by(BenchDoc::priority(), Order::Asc).limit(2).fetch(&db).unwrap();
    assert_eq!(titles(&greens), ["title101", "title104"]);
    // Nested field, string functions, arithmetic, in.
    assert_eq!(docs.filter(field("pos.x").between(10, 12)).count(&db).unwrap(), 3);
    assert_eq!(docs.filter(BenchDoc::title().starts_with("title29")).count(&db).unwrap(), 11);
    assert_eq!(
        docs.filter((field("priority") % 2).eq(1)).count(&db).unwrap(),
        (0..300).filter(|i| bench_doc(*i).priority % 2 == 1).count()
    );
    assert_eq!(docs.filter(BenchDoc::title().is_in(["title1", "title2", "nope"])).count(&db).unwrap(), 2);
    assert!(docs.filter(BenchDoc::tag().ends_with("99")).exists(&db).unwrap());
    assert_eq!(docs.filter(BenchDoc::tag().contains("ag29")).first(&db).unwrap().unwrap().title, "title29");
    // Iteration on a transaction, without materializing.
    db.read(|tx| {
        let mut seen = 0;
        for doc in docs.filter_text("priority < -4990")?.iter(tx)? {
            assert!(doc?.priority < -4990);
            seen += 1;
        }
        assert_eq!(seen, 3);
        Ok(())
    })
    .unwrap();
    // Batch get.
    let got = docs.get_many(&db, ["title5", "nope", "title7"]).unwrap();
    assert_eq!(got.iter().map(Option::is_some).collect::<Vec<_>>(), [true, false, true]);
    // Delete by query.
    let deleted = db.write(|tx| docs.delete_where(tx, &docs.filter(BenchDoc::color().is_variant("Red")))).unwrap();
    assert_eq!(deleted, 100);
    assert_eq!(docs.all().count(&db).unwrap(), 200);
}

#[test]
fn the_planner_uses_keys_and_indexes() {
    let (_dir, db) = open();
    let docs = db.collection::<BenchDoc>().unwrap();
    db.write(|tx| (0..100).try_for_each(|i| docs.insert(tx, &bench_doc(i)).map(drop))).unwrap();
    let plan = |query: tessera::Query<BenchDoc>| query.explain().unwrap().to_string();
    assert!(plan(docs.filter(BenchDoc::title().eq("title5"))).starts_with("primary key lookup title5"));
    assert!(plan(docs.filter(BenchDoc::priority().gt(10))).starts_with("index range on priority [10 .. ∞)"));
    let both = plan(docs.filter(BenchDoc::priority().gt(10).and(field("pos.x").lt(50))));
    // Numbers are bounded on their f64 part, inclusively; the filter decides the boundary.
    assert!(both.starts_with("intersect(index range on priority [10 .. ∞); index range on pos.x (-∞ .. 50])"), "{both}");
    let named = plan(docs.filter(BenchDoc::tag().ge("tag3").and(BenchDoc::tag().lt("tag5"))));
    assert!(named.starts_with("index range on tag [\"tag3\" .. \"tag5\")"), "{named}");
    let either = plan(docs.filter(BenchDoc::priority().gt(10).or(BenchDoc::tag().eq("tag3"))));
    assert!(either.starts_with("union("), "{either}");
    assert!(plan(docs.filter(BenchDoc::color().is_variant("Red"))).starts_with("full scan"));
    let ordered = docs.all().order_by(BenchDoc::priority(), Order::Asc).explain().unwrap();
    assert_eq!(ordered.ordering, tessera::collection::PlanOrdering::Natural);
    assert!(plan(docs.all().order_by(BenchDoc::priority(), Order::Desc)).ends_with("walked backwards"));
    assert!(plan(docs.all().order_by(BenchDoc::content(), Order::Desc)).ends_with("sort in memory"), "no index on content");
    // Index and scan answers agree.
    let by_index = docs.filter(BenchDoc::priority().ge(4950)).fetch(&db).unwrap();
    let by_scan = docs.filter(BenchDoc::priority().ge(4950).and(field("title").ne("nothing"))).fetch(&db).unwrap();
    assert_eq!(by_index, by_scan);
    assert_eq!(by_index.len(), 17);
}

#[test]
fn bad_queries_are_typed_errors() {
    let (_dir, db) = open();
    let docs = db.collection::<BenchDoc>().unwrap();
    let error = |result: Result<_, Error>| match result {
        Err(Error::Query(error)) => error,
        other => panic!("expected a query error, got {:?}", other.map(drop)),
    };
    use tessera::query::QueryError;
    assert!(matches!(error(docs.filter_text("age > 3").map(drop)), QueryError::UnknownField { path } if path == "age"));
    assert!(matches!(error(docs.filter_text(r#"priority > "x""#).map(drop)), QueryError::TypeMismatch { .. }));
    assert!(matches!(error(docs.filter_text("priority >").map(drop)), QueryError::Parse(e) if e.column == 11));
    assert!(matches!(error(docs.filter_text("content is Video").map(drop)), QueryError::UnknownVariant { .. }));
    assert!(matches!(error(docs.filter_text("color > 1").map(drop)), QueryError::TypeMismatch { .. }));
    assert!(matches!(error(docs.all().order_by("pos", Order::Asc).fetch(&db).map(drop)), QueryError::Unorderable { .. }));
    assert!(matches!(error(docs.filter(field("pos.w").eq(1)).count(&db).map(drop)), QueryError::UnknownField { .. }));
}

#[test]
fn new_indexes_build_in_the_background_and_dropped_ones_go() {
    #[derive(Serialize, Deserialize, Record, Debug, PartialEq)]
    #[record(name = "items")]
    struct Plain {
        #[record(key)]
        id: u32,
        size: i64,
    }
    #[derive(Serialize, Deserialize, Record, Debug, PartialEq)]
    #[record(name = "items")]
    struct Indexed {
        #[record(key)]
        id: u32,
        #[record(index)]
        size: i64,
    }
    let (_dir, db) = open();
    let plain = db.collection::<Plain>().unwrap();
    db.write(|tx| (0..5000u32).try_for_each(|id| plain.insert(tx, &Plain { id, size: (id % 100) as i64 }).map(drop))).unwrap();
    drop(plain);
    let indexed = db.collection::<Indexed>().unwrap();
    // Writes during the build are indexed by their writers.
    db.write(|tx| indexed.upsert(tx, &Indexed { id: 9999, size: 42 }).map(drop)).unwrap();
    let query = indexed.filter(Indexed::size().eq(42));
    assert_eq!(query.count(&db).unwrap(), 51, "a scan answers while the index builds");
    assert!(indexed.wait_for_indexes(Duration::from_secs(30)));
    assert!(query.explain().unwrap().to_string().starts_with("index range on size"));
    assert_eq!(query.count(&db).unwrap(), 51);
    drop(indexed);
    // Reopening with the index dropped removes its entries; reading still works.
    let plain = db.collection::<Plain>().unwrap();
    assert!(plain.filter(Plain::size().eq(42)).explain().unwrap().to_string().starts_with("full scan"));
    assert_eq!(plain.filter(Plain::size().eq(42)).count(&db).unwrap(), 51);
}

#[test]
fn an_integer_field_may_widen_but_not_narrow_without_a_migration() {
    #[derive(Serialize, Deserialize, Record, Debug, PartialEq)]
    #[record(name = "counters", version = 1)]
    struct Narrow {
        #[record(key)]
        id: u32,
        count: i16,
    }
    #[derive(Serialize, Deserialize, Record, Debug, PartialEq)]
    #[record(name = "counters", version = 1)]
    struct Wide {
        #[record(key)]
        id: u32,
        count: i64,
    }
    #[derive(Serialize, Deserialize, Record, Debug, PartialEq)]
    #[record(name = "counters", version = 1)]
    struct Unsigned {
        #[record(key)]
        id: u32,
        count: u64,
    }
    let (_dir, db) = open();
    let narrow = db.collection::<Narrow>().unwrap();
    db.write(|tx| narrow.insert(tx, &Narrow { id: 1, count: -7 })).unwrap();
    drop(narrow);
    // i16 to i64: every stored value still fits.
    let wide = db.collection::<Wide>().unwrap();
    db.write(|tx| wide.insert(tx, &Wide { id: 2, count: 1 << 40 })).unwrap();
    drop(wide);
    // Back to i16, or to u64 (which has no -7): refused, naming the field and both types.
    for error in [db.collection::<Narrow>().err(), db.collection::<Unsigned>().err()] {
        match error {
            Some(Error::SchemaMismatch { collection, reason }) => {
                assert_eq!(collection, "counters");
                assert!(reason.contains("field `count` narrowed from i64"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(db.collection::<Wide>().unwrap().get(&db, &2).unwrap().unwrap().count, 1 << 40);
}

#[test]
fn schema_changes_are_checked_and_migrated() {
    #[derive(Serialize, Deserialize, Record, Debug, PartialEq)]
    #[record(name = "users", version = 1)]
    struct V1 {
        #[record(key)]
        id: u32,
        name: String,
    }
    #[derive(Serialize, Deserialize, Record, Debug, PartialEq)]
    #[record(name = "users", version = 1)]
    struct WithOptional {
        #[record(key)]
        id: u32,
        name: String,
        email: Option<String>,
    }
    #[derive(Serialize, Deserialize, Record, Debug, PartialEq)]
    #[record(name = "users", version = 2)]
    struct V2 {
        #[record(key)]
        id: u32,
        first: String,
        age: u32,
    }
    let (dir, db) = open();
    let v1 = db.collection::<V1>().unwrap();
    db.write(|tx| {
        v1.insert(tx, &V1 { id: 1, name: "Ada Lovelace".into() })?;
        v1.insert(tx, &V1 { id: 2, name: "Alan Turing".into() })
    })
    .unwrap();
    drop(v1);
    // A new optional field just works.
    let optional = db.collection::<WithOptional>().unwrap();
    assert_eq!(optional.get(&db, &1).unwrap().unwrap().email, None);
    drop(optional);
    // A new required field without a migration is refused, and nothing changes.
    assert!(matches!(db.collection::<V2>(), Err(Error::SchemaMismatch { .. })));
    // With a migration, every record is rewritten once.
    let migrate = |old: tessera::value::Value<'_>| -> tessera::Result<V2> {
        let id = old.get("id").and_then(|v| v.as_u64()).unwrap_or(0) as u32;
        let first = old.get("name").and_then(|v| v.as_str()).unwrap_or("").split(' ').next().unwrap_or("").to_owned();
        Ok(V2 { id, first, age: 0 })
    };
    let v2 = db.collection_with::<V2>(CollectionOptions { migrate: Some(Box::new(migrate)) }).unwrap();
    assert_eq!(v2.get(&db, &2).unwrap().unwrap(), V2 { id: 2, first: "Alan".into(), age: 0 });
    drop((v2, db));
    // The migrated schema is stored: reopening needs no migration.
    let db = Db::open(dir.path().join("db")).unwrap();
    let v2 = db.collection::<V2>().unwrap();
    assert_eq!(v2.all().count(&db).unwrap(), 2);
}

#[test]
fn a_record_that_does_not_decode_is_a_typed_error_naming_the_field() {
    // Records written under a shape that says only "an integer" (as Python's `int` and schemas
    // stored before widths were recorded do), read by a record type whose field is a `u8`.
    #[derive(Record, Debug, PartialEq)]
    #[record(name = "narrowing")]
    struct Narrow {
        #[record(key)]
        id: String,
        inner: Inner<u8>,
    }
    #[derive(Embed, Debug, PartialEq)]
    struct Inner<N> {
        values: Vec<N>,
    }
    let (_dir, db) = open();
    let inner = TypeDesc::Struct(vec![("values".into(), TypeDesc::List(Box::new(TypeDesc::Int)))]);
    let schema = DynSchema {
        version: 1,
        key_fields: vec!["id".into()],
        key_kinds: vec![KeyKind::String],
        shape: TypeDesc::Struct(vec![("id".into(), TypeDesc::String), ("inner".into(), inner)]),
        indexes: Vec::new(),
    };
    let any_integer = db.create_dyn_collection("narrowing", &schema).unwrap();
    db.write(|tx| any_integer.insert_json(tx, br#"{"id": "k1", "inner": {"values": [1, 2, 300]}}"#)).unwrap();
    drop(any_integer);
    let narrow = db.collection::<Narrow>().unwrap();
    match narrow.get(&db, "k1") {
        Err(Error::RecordDecode { collection, key, field, message }) => {
            assert_eq!((collection.as_str(), key.as_str(), field.as_str()), ("narrowing", "k1", "inner.values[2]"));
            assert!(message.contains("out of range for u8"), "{message}");
        }
        other => panic!("expected a decode error, got {other:?}"),
    }
    assert!(matches!(narrow.all().fetch(&db), Err(Error::RecordDecode { .. })));
    assert_eq!(narrow.all().count(&db).unwrap(), 1, "counting decodes nothing");
}

#[test]
fn composite_keys_and_enum_indexes() {
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "events")]
    struct Event {
        #[record(key)]
        day: u16,
        #[record(key)]
        seq: u32,
        #[record(index)]
        kind: Color,
    }
    let (_dir, db) = open();
    let events = db.collection::<Event>().unwrap();
    db.write(|tx| {
        for day in 0..3u16 {
            for seq in 0..4u32 {
                let kind = if seq % 2 == 0 { Color::Red } else { Color::Blue };
                events.insert(tx, &Event { day, seq, kind })?;
            }
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(events.get(&db, &(1u16, 3u32)).unwrap().unwrap().kind, Color::Blue);
    let reds = events.filter(Event::kind().is_variant("Red"));
    assert!(reds.explain().unwrap().to_string().starts_with("index range on kind"));
    assert_eq!(reds.count(&db).unwrap(), 6);
    let keys: Vec<(u16, u32)> = events.filter(Event::day().eq(2)).fetch(&db).unwrap().iter().map(|e| (e.day, e.seq)).collect();
    assert_eq!(keys, [(2, 0), (2, 1), (2, 2), (2, 3)]);
}

#[test]
fn a_unique_index_over_duplicate_records_is_refused_like_create_unique_index() {
    #[derive(Serialize, Deserialize, Record, Debug, PartialEq)]
    #[record(name = "accounts")]
    struct Plain {
        #[record(key)]
        id: u32,
        email: String,
        age: u8,
    }
    #[derive(Serialize, Deserialize, Record, Debug, PartialEq)]
    #[record(name = "accounts")]
    struct UniqueEmail {
        #[record(key)]
        id: u32,
        #[record(unique)]
        email: String,
        #[record(index)]
        age: u8,
    }
    let (_dir, db) = open();
    let plain = db.collection::<Plain>().unwrap();
    db.write(|tx| {
        (0..3000u32).try_for_each(|id| plain.insert(tx, &Plain { id, email: format!("user{}", id % 2900), age: (id % 90) as u8 }).map(drop))
    })
    .unwrap();
    // Records 2900..3000 repeat the emails of 0..100: the schema change fails, naming the
    // index and the first two records that share a value.
    match db.collection::<UniqueEmail>() {
        Err(Error::UniqueViolation { collection, index, key, holder }) => {
            assert_eq!((collection.as_str(), index.as_str()), ("accounts", "email"));
            assert_ne!(key, holder);
            // Keys read as the record type's values: decimal ids.
            assert_eq!((key.as_str(), holder.as_str()), ("2900", "0"), "the first record with a repeated email, and its holder");
        }
        other => panic!("expected a unique violation, got {other:?}"),
    }
    // Nothing changed: the old type still opens, and writes with duplicates still succeed.
    db.write(|tx| plain.insert(tx, &Plain { id: 5000, email: "user1".into(), age: 3 }).map(drop)).unwrap();
    // Remove the duplicates: the unique index is then built at once, and enforced.
    db.write(|tx| (2900..3000u32).chain([5000]).try_for_each(|id| plain.delete(tx, &id).map(drop))).unwrap();
    drop(plain);
    let unique = db.collection::<UniqueEmail>().unwrap();
    let query = unique.filter(UniqueEmail::email().eq("user5"));
    assert!(query.explain().unwrap().to_string().starts_with("index"), "{}", query.explain().unwrap());
    assert_eq!(query.count(&db).unwrap(), 1);
    let duplicate = db.write(|tx| unique.insert(tx, &UniqueEmail { id: 9000, email: "user7".into(), age: 1 }).map(drop));
    assert!(matches!(duplicate, Err(Error::UniqueViolation { .. })), "{duplicate:?}");
    assert!(unique.wait_for_indexes(Duration::from_secs(30)), "the plain index builds in the background");
    assert_eq!(unique.index_failure("age"), None);
}

#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "scores")]
struct Scores {
    #[record(key)]
    id: u32,
    by_user: std::collections::HashMap<String, i32>,
}

#[test]
fn records_with_maps_of_id_like_keys_insert_read_and_query() {
    let (_dir, db) = open();
    let scores = db.collection::<Scores>().unwrap();
    for (id, size) in [(1u32, 10), (2, 1_000), (3, 100_000)] {
        let record = Scores { id, by_user: (0..size).map(|i| (format!("user_{i}"), i)).collect() };
        db.write(|tx| scores.insert(tx, &record).map(drop)).unwrap();
        assert_eq!(db.read(|tx| scores.get(tx, &id)).unwrap(), Some(record));
    }
    // A nested path into the map, by text and by a typed field path.
    let found = scores.filter_text("by_user.user_9 == 9").unwrap().fetch(&db).unwrap();
    assert_eq!(found.iter().map(|s| s.id).collect::<Vec<_>>(), vec![1, 2, 3]);
    let found = scores.filter_text("by_user.user_999 == 999").unwrap().fetch(&db).unwrap();
    assert_eq!(found.iter().map(|s| s.id).collect::<Vec<_>>(), vec![2, 3]);
    let found = scores.filter(field("by_user.user_99999").eq(99_999)).fetch(&db).unwrap();
    assert_eq!(found.iter().map(|s| s.id).collect::<Vec<_>>(), vec![3]);
}

#[test]
fn views_read_fields_in_place_and_name_the_field_on_error() {
    let (_dir, db) = open();
    let docs = db.collection::<BenchDoc>().unwrap();
    db.write(|tx| (0..30).try_for_each(|i| docs.insert(tx, &bench_doc(i)).map(drop))).unwrap();
    let tx = db.read_txn().unwrap();
    let view = docs.get_ref(&tx, "title3").unwrap().expect("stored");
    let title: &str = view.title().unwrap();
    assert_eq!((title, view.tag().unwrap(), view.priority().unwrap()), ("title3", "tag3", 4997));
    assert_eq!(view.pos().unwrap(), Vec3 { x: 3.0, y: 0.0, z: 1.0 }, "nested types are decoded");
    assert_eq!(view.color().unwrap(), Color::Blue);
    assert_eq!(view.content().unwrap(), Some(Content::Image { images: vec!["image3".into()] }));
    assert_eq!(view.decode().unwrap(), bench_doc(3));
    assert_eq!(view.as_value().get("tag").unwrap().as_str(), Some("tag3"));
    assert!(docs.get_ref(&tx, "missing").unwrap().is_none());
    // Views from a query, in the query's order, inside a write transaction too.
    let query = docs.filter(BenchDoc::priority().lt(-4990)).order_by(BenchDoc::priority(), Order::Asc);
    let titles: Vec<&str> = query.refs(&tx).unwrap().map(|doc| doc.unwrap().title().unwrap()).collect();
    assert_eq!(titles, ["title1", "title4", "title7"]);
    drop(tx);
    db.write(|tx| {
        let view = docs.get_ref(&*tx, "title4")?.expect("stored");
        assert_eq!(view.priority()?, -4996);
        Ok(())
    })
    .unwrap();
}

#[test]
fn a_view_of_a_field_that_does_not_fit_is_a_typed_error() {
    #[derive(Record, Debug)]
    #[record(name = "viewed")]
    struct Narrow {
        #[record(key)]
        id: u32,
        count: u8,
        label: Option<String>,
    }
    let (_dir, db) = open();
    // Written under a shape that says only "an integer" (see the test above).
    let schema = DynSchema {
        version: 1,
        key_fields: vec!["id".into()],
        key_kinds: vec![KeyKind::U32],
        shape: TypeDesc::Struct(vec![
            ("id".into(), TypeDesc::Int),
            ("count".into(), TypeDesc::Int),
            ("label".into(), TypeDesc::Option(Box::new(TypeDesc::String))),
        ]),
        indexes: Vec::new(),
    };
    let any_integer = db.create_dyn_collection("viewed", &schema).unwrap();
    db.write(|tx| any_integer.insert_json(tx, br#"{"id": 1, "count": 1000, "label": null}"#)).unwrap();
    drop(any_integer);
    let narrow = db.collection::<Narrow>().unwrap();
    let tx = db.read_txn().unwrap();
    let view = narrow.get_ref(&tx, &1u32).unwrap().unwrap();
    assert_eq!(view.label().unwrap(), None);
    match view.count() {
        Err(Error::RecordDecode { collection, key, field, message }) => {
            // The key reads as the record type's value (it printed as the stored bytes,
            // `00000001`, before).
            assert_eq!((collection.as_str(), key.as_str(), field.as_str()), ("viewed", "1", "count"));
            assert!(message.contains("out of range"), "{message}");
        }
        other => panic!("expected a decode error, got {other:?}"),
    }
}

#[test]
fn descending_order_walks_the_key_or_an_index_backwards_and_stops_at_the_limit() {
    use tessera::collection::PlanOrdering;
    let (_dir, db) = open();
    let docs = db.collection::<BenchDoc>().unwrap();
    db.write(|tx| (0..60).try_for_each(|i| docs.insert(tx, &bench_doc(i)).map(drop))).unwrap();
    assert!(docs.wait_for_indexes(Duration::from_secs(10)));
    let all: Vec<BenchDoc> = (0..60).map(bench_doc).collect();
    let cases = [
        (docs.all().order_by(BenchDoc::priority(), Order::Desc).limit(7), "priority"),
        (docs.all().order_by(BenchDoc::tag(), Order::Desc).limit(7), "tag"),
        (docs.all().order_by(BenchDoc::title(), Order::Desc).offset(2).limit(7), "title"),
        (docs.filter(BenchDoc::priority().lt(100)).order_by(BenchDoc::priority(), Order::Desc).limit(7), "priority < 100"),
    ];
    for (query, what) in cases {
        let plan = query.explain().unwrap();
        assert_eq!(plan.ordering, PlanOrdering::Reversed, "{what}: {plan}");
        let mut expected: Vec<BenchDoc> = all.iter().filter(|d| what != "priority < 100" || d.priority < 100).cloned().collect();
        // Descending by the field, ties by primary key ascending.
        expected.sort_by(|a, b| match what {
            "tag" => b.tag.cmp(&a.tag),
            "title" => b.title.cmp(&a.title),
            _ => b.priority.cmp(&a.priority).then(a.title.cmp(&b.title)),
        });
        let (offset, limit) = query.window();
        let expected: Vec<String> = expected.into_iter().skip(offset).take(limit.unwrap()).map(|d| d.title).collect();
        assert_eq!(titles(&query.fetch(&db).unwrap()), expected, "{what}");
    }
}

#[test]
fn a_refused_write_caught_inside_a_transaction_leaves_nothing_behind() {
    // The issue's reproduction: a write refused by a unique index, whose error the closure
    // catches before committing, used to leave the index changes made before the check.
    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "accounts")]
    struct Account {
        #[record(key)]
        id: u32,
        #[record(index)]
        score: i32,
        #[record(unique)]
        email: String,
    }
    let (_dir, db) = open();
    let accounts = db.collection::<Account>().unwrap();
    let account = |id: u32| Account { id, score: id as i32, email: format!("e{id}") };
    db.write(|tx| {
        for id in 0..11 {
            accounts.insert(tx, &account(id))?;
        }
        // Changes `score` (indexed first) and takes e3's email: refused, and caught.
        let refused = accounts.upsert(tx, &Account { id: 2, score: 99, email: "e3".into() });
        assert!(matches!(refused, Err(Error::UniqueViolation { .. })), "{refused:?}");
        let refused = accounts.update(tx, &5u32, |a| {
            a.score = 77;
            a.email = "e6".into();
        });
        assert!(matches!(refused, Err(Error::UniqueViolation { .. })), "{refused:?}");
        let refused = accounts.patch(tx, &7u32, "email", &"e8");
        assert!(matches!(refused, Err(Error::UniqueViolation { .. })), "{refused:?}");
        Ok(())
    })
    .unwrap();
    assert!(accounts.wait_for_indexes(Duration::from_secs(5)));
    let all = accounts.all().fetch(&db).unwrap();
    assert_eq!(all, (0..11).map(account).collect::<Vec<_>>());
    for id in 0..11u32 {
        let by_score = accounts.filter(Account::score().eq(id as i32)).fetch(&db).unwrap();
        assert_eq!(by_score, vec![account(id)], "score == {id}");
        let by_email = accounts.filter(Account::email().eq(format!("e{id}"))).fetch(&db).unwrap();
        assert_eq!(by_email, vec![account(id)], "email == e{id}");
    }
    assert_eq!(accounts.filter(Account::score().ge(0)).count(&db).unwrap(), 11, "no entry twice");
    assert!(accounts.filter(Account::score().eq(99)).fetch(&db).unwrap().is_empty());
}

#[test]
fn a_field_named_value_keeps_its_view_accessor() {
    #[derive(Record, Debug)]
    #[record(name = "measures")]
    struct Measure {
        #[record(key)]
        id: u32,
        value: f64,
        decode_hint: String,
    }
    let (_dir, db) = open();
    let measures = db.collection::<Measure>().unwrap();
    db.write(|tx| measures.insert(tx, &Measure { id: 1, value: 2.5, decode_hint: "x".into() })).unwrap();
    let tx = db.read_txn().unwrap();
    let view = measures.get_ref(&tx, &1u32).unwrap().unwrap();
    assert_eq!(view.value().unwrap(), 2.5);
    assert_eq!(view.decode_hint().unwrap(), "x");
    assert_eq!(view.as_value().get("value").unwrap().as_f64(), Some(2.5));
}

#[test]
fn a_failed_index_build_leaves_its_siblings_to_finish() {
    #[derive(Serialize, Deserialize, Record, Debug, PartialEq)]
    #[record(name = "notes")]
    struct Plain {
        #[record(key)]
        id: String,
        note: String,
        score: i32,
    }
    #[derive(Serialize, Deserialize, Record, Debug, PartialEq)]
    #[record(name = "notes")]
    struct Indexed {
        #[record(key)]
        id: String,
        #[record(index)]
        note: String,
        #[record(index)]
        score: i32,
    }
    let (_dir, db) = open();
    let plain = db.collection::<Plain>().unwrap();
    db.write(|tx| {
        for id in 0..2000u32 {
            // One long note beside a 300-byte primary key: even the note's truncated entry
            // (a 256-byte prefix and a hash) is too long for an index key, so that index
            // cannot be built.
            let (key, note) = if id == 1500 { ("k".repeat(300), "x".repeat(600)) } else { (format!("{id:04}"), format!("n{id}")) };
            plain.insert(tx, &Plain { id: key, note, score: (id % 10) as i32 })?;
        }
        Ok(())
    })
    .unwrap();
    drop(plain);
    let indexed = db.collection::<Indexed>().unwrap();
    let by_score = indexed.filter(Indexed::score().eq(3));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while indexed.index_failure("note").is_none() || !by_score.explain().unwrap().to_string().starts_with("index") {
        assert!(std::time::Instant::now() < deadline, "note: {:?}; score: {}", indexed.index_failure("note"), by_score.explain().unwrap());
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(indexed.index_failure("note").unwrap().contains("key"), "{:?}", indexed.index_failure("note"));
    assert_eq!(indexed.index_failure("score"), None);
    assert_eq!(by_score.count(&db).unwrap(), 200);
    let by_note = indexed.filter(Indexed::note().eq("n7"));
    assert!(by_note.explain().unwrap().to_string().starts_with("full scan"), "the failed index is never used");
    assert_eq!(by_note.count(&db).unwrap(), 1);
}

#[test]
fn errors_and_explain_show_keys_as_the_record_types_values() {
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "ledger")]
    struct Entry {
        #[record(key)]
        account: i64,
        #[record(key)]
        label: String,
        #[record(key)]
        open: bool,
        amount: u32,
    }
    let (_dir, db) = open();
    let ledger = db.collection::<Entry>().unwrap();
    let entry = Entry { account: -42, label: "rent \"may\"".into(), open: true, amount: 5 };
    db.write(|tx| ledger.insert(tx, &entry).map(drop)).unwrap();
    match db.write(|tx| ledger.insert(tx, &entry).map(drop)) {
        Err(Error::DuplicateKey { key, .. }) => assert_eq!(key, r#"(-42, "rent \"may\"", true)"#),
        other => panic!("expected a duplicate key, got {other:?}"),
    }
    let plan = ledger.filter(Entry::account().eq(-42)).explain().unwrap().to_string();
    assert!(plan.contains("(-42)"), "a key prefix shows its parts: {plan}");
    let plan =
        ledger.filter(Entry::account().eq(7).and(Entry::label().eq("x")).and(Entry::open().eq(false))).explain().unwrap().to_string();
    assert!(plan.contains(r#"(7, "x", false)"#), "{plan}");
}

#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "numbered")]
struct Numbered {
    #[record(key)]
    id: u32,
    label: String,
}

#[test]
fn an_exact_key_lookup_skips_the_filter_and_every_other_lookup_keeps_it() {
    let (_dir, db) = open();
    let docs = db.collection::<BenchDoc>().unwrap();
    let numbered = db.collection::<Numbered>().unwrap();
    db.write(|tx| {
        (0..20).try_for_each(|i| docs.insert(tx, &bench_doc(i)).map(drop))?;
        (0..20).try_for_each(|id| numbered.insert(tx, &Numbered { id, label: format!("n{id}") }).map(drop))
    })
    .unwrap();
    // `key == string` and `key == integer` find exactly their record: no filter runs.
    let title = docs.filter(BenchDoc::title().eq("title5"));
    assert_eq!(title.explain().unwrap().to_string(), "primary key lookup title5");
    assert_eq!(title.fetch(&db).unwrap(), vec![bench_doc(5)]);
    assert!(docs.filter(BenchDoc::title().eq("title99")).fetch(&db).unwrap().is_empty());
    let id = numbered.filter(Numbered::id().eq(7));
    assert_eq!(id.explain().unwrap().to_string(), "primary key lookup 7");
    assert_eq!(id.fetch(&db).unwrap().iter().map(|n| n.id).collect::<Vec<_>>(), [7]);
    // A float compared with an integer key, or a key equality beside other conditions, keeps
    // its filter: 7.5 matches nothing, and the label decides the rest.
    let fractional = numbered.filter(field("id").eq(7.5));
    assert!(fractional.fetch(&db).unwrap().is_empty(), "{}", fractional.explain().unwrap());
    assert_eq!(numbered.filter(field("id").eq(7.0)).count(&db).unwrap(), 1);
    let both = numbered.filter(Numbered::id().eq(7).and(Numbered::label().eq("other")));
    assert!(both.explain().unwrap().to_string().contains("filter"), "{}", both.explain().unwrap());
    assert_eq!(both.count(&db).unwrap(), 0);
    // The exact lookup is planned before the checks: offset and limit still apply, an order
    // by an unknown field is still refused, and a literal no key can hold finds nothing.
    assert!(numbered.filter(Numbered::id().eq(7)).offset(1).fetch(&db).unwrap().is_empty());
    assert!(numbered.filter(Numbered::id().eq(7)).limit(0).fetch(&db).unwrap().is_empty());
    assert!(numbered.filter(Numbered::id().eq(7)).order_by("nope", Order::Asc).fetch(&db).is_err());
    assert!(numbered.filter(field("id").eq(-1)).fetch(&db).unwrap().is_empty());
}

#[test]
fn a_string_key_that_starts_with_the_empty_string_is_every_record() {
    // The plan was a key range from the empty key, which LMDB refuses to seek to: the query
    // failed with a storage error (found by the live oracle).
    let (_dir, db) = open();
    let docs = db.collection::<BenchDoc>().unwrap();
    db.write(|tx| (0..5).try_for_each(|i| docs.insert(tx, &bench_doc(i)).map(drop))).unwrap();
    let every = docs.filter(BenchDoc::title().starts_with(""));
    assert_eq!(every.count(&db).unwrap(), 5, "{}", every.explain().unwrap());
    assert_eq!(every.clone().order_by(BenchDoc::title(), Order::Desc).fetch(&db).unwrap()[0], bench_doc(4));
    let keyspace = db.keyspace("raw").unwrap();
    db.write(|tx| tx.put(&keyspace, b"k", b"v")).unwrap();
    let read = |start: std::ops::Bound<&[u8]>, end: std::ops::Bound<&[u8]>| {
        db.read(|tx| {
            tx.range(&keyspace, (start, end))?.map(|entry| entry.map(|(key, _)| key.to_vec())).collect::<tessera::Result<Vec<_>>>()
        })
    };
    use std::ops::Bound::{Excluded, Included, Unbounded};
    assert_eq!(read(Included(b""), Unbounded).unwrap(), [b"k".to_vec()], "every key is at least the empty key");
    assert_eq!(read(Excluded(b""), Unbounded).unwrap(), [b"k".to_vec()]);
    assert!(read(Unbounded, Excluded(b"")).unwrap().is_empty(), "no key is below the empty key");
    assert!(read(Unbounded, Included(b"")).unwrap().is_empty());
}

/// `key == literal` is read with one get (`Query::first` and `fetch` skip the engine), which
/// must still honour what else the query says: an offset past the one match, a limit of 0, and
/// a key that is absent.
#[test]
fn a_key_equality_query_keeps_its_offset_and_limit() {
    let (_dir, db) = open();
    let docs = db.collection::<BenchDoc>().unwrap();
    db.write(|tx| (0..3).try_for_each(|i| docs.insert(tx, &bench_doc(i)).map(drop))).unwrap();
    let by_key = docs.filter(BenchDoc::title().eq("title1"));
    assert_eq!(by_key.first(&db).unwrap(), Some(bench_doc(1)));
    assert_eq!(by_key.fetch(&db).unwrap(), vec![bench_doc(1)]);
    assert_eq!(by_key.clone().limit(1).fetch(&db).unwrap(), vec![bench_doc(1)]);
    assert_eq!(by_key.clone().limit(0).first(&db).unwrap(), None);
    assert_eq!(by_key.clone().limit(0).fetch(&db).unwrap(), vec![]);
    assert_eq!(by_key.clone().offset(1).first(&db).unwrap(), None);
    assert_eq!(by_key.clone().offset(1).fetch(&db).unwrap(), vec![]);
    assert_eq!(docs.filter(BenchDoc::title().eq("absent")).first(&db).unwrap(), None);
    assert_eq!(docs.filter(BenchDoc::title().eq("absent")).fetch(&db).unwrap(), vec![]);
    // Inside a write transaction, the query sees that transaction's own writes.
    db.write(|tx| {
        docs.insert(tx, &bench_doc(7))?;
        assert_eq!(docs.filter(BenchDoc::title().eq("title7")).first(&*tx)?, Some(bench_doc(7)));
        Ok(())
    })
    .unwrap();
}

#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "boxed_text")]
struct BoxedText {
    #[record(key)]
    code: Box<str>,
    initial: char,
    alias: Option<Box<str>>,
}

/// `Box<str>` and `char` fields, which the schema describes as strings, could not be compared
/// in the typed API (no `QueryArg`), and a `Box<str>` could not be a primary key: such a
/// record did not compile, and such a field could be queried only by `field(..)`.
#[test]
fn box_str_and_char_fields_are_compared_as_strings_and_box_str_is_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    let texts = db.collection::<BoxedText>().unwrap();
    let rows = [("ab", 'x', Some("first")), ("b\0c", 'y', None), ("c", 'x', Some("third"))];
    db.write(|tx| {
        rows.iter().try_for_each(|&(code, initial, alias)| {
            texts.insert(tx, &BoxedText { code: code.into(), initial, alias: alias.map(Box::from) }).map(drop)
        })
    })
    .unwrap();
    // Keys are stored as a String key would be.
    assert_eq!(tessera::store::key::encode(&Box::<str>::from("b\0c")), tessera::store::key::encode("b\0c"));
    assert_eq!(texts.get(&db, "b\0c").unwrap().map(|text| text.initial), Some('y'));
    let codes =
        |query: tessera::Query<BoxedText>| -> Vec<String> { query.fetch(&db).unwrap().iter().map(|text| text.code.to_string()).collect() };
    assert_eq!(codes(texts.filter(BoxedText::code().eq("c"))), ["c"]);
    assert_eq!(codes(texts.filter(BoxedText::code().eq(Box::<str>::from("ab")))), ["ab"]);
    assert_eq!(codes(texts.filter(BoxedText::code().starts_with("b"))), ["b\0c"]);
    assert_eq!(codes(texts.filter(BoxedText::initial().eq('x'))), ["ab", "c"]);
    assert_eq!(codes(texts.filter(BoxedText::alias().eq(String::from("third")))), ["c"]);
    assert_eq!(codes(texts.filter(BoxedText::alias().is_null())), ["b\0c"]);
    assert_eq!(
        texts.filter(BoxedText::code().eq("c")).explain().unwrap().to_string(),
        "primary key lookup c",
        "one key lookup, shown as a String key is"
    );
}

mod patched {
    use super::*;

    #[derive(Serialize, Deserialize, Embed, Debug, Clone, PartialEq)]
    pub struct Meta {
        pub label: String,
        pub weight: Option<u32>,
    }

    #[derive(Serialize, Deserialize, Embed, Debug, Clone, PartialEq)]
    pub enum Mark {
        Plain,
        Tagged { meta: Meta },
    }

    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "patched")]
    pub struct Patched {
        #[record(key)]
        pub id: u32,
        pub meta: Meta,
        pub marks: Vec<Mark>,
    }
}

/// A patch value with a key the field's type does not have (a misspelled field in a
/// `serde_json::Value`) was dropped by the decode of the patched record, and the write returned
/// Ok without it: a typed error naming the key's path now, nothing written.
#[test]
fn a_patch_with_a_key_the_field_does_not_have_is_refused_naming_it() {
    use patched::{Mark, Meta, Patched};
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    let records = db.collection::<Patched>().unwrap();
    let stored = Patched { id: 1, meta: Meta { label: "a".into(), weight: Some(2) }, marks: vec![Mark::Plain] };
    db.write(|tx| records.insert(tx, &stored)).unwrap();
    let refused = |path: &str, value: serde_json::Value| match db.write(|tx| records.patch(tx, &1u32, path, &value)) {
        Err(Error::UnknownField { path, .. }) => path,
        other => panic!("{value} at {path:?}: {other:?}"),
    };
    assert_eq!(refused("meta", serde_json::json!({"label": "b", "wieght": 3})), "meta.wieght");
    assert_eq!(refused("marks", serde_json::json!([{"Tagged": {"meta": {"label": "c", "extra": 1}}}])), "marks[0].Tagged.meta.extra");
    assert_eq!(records.get(&db, &1u32).unwrap().unwrap(), stored, "nothing written");
    let good = serde_json::json!({"label": "b", "weight": null});
    assert_eq!(db.write(|tx| records.patch(tx, &1u32, "meta", &good)).unwrap(), WriteOutcome::Updated);
    let tagged = vec![Mark::Tagged { meta: Meta { label: "c".into(), weight: None } }];
    assert_eq!(db.write(|tx| records.patch(tx, &1u32, "marks", &tagged)).unwrap(), WriteOutcome::Updated);
    let read = records.get(&db, &1u32).unwrap().unwrap();
    assert_eq!((read.meta, read.marks), (Meta { label: "b".into(), weight: None }, tagged));
}
