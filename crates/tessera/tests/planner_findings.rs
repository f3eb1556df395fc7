//! Queries the planner answered with Ok and wrong rows or a wrong order, each found by
//! `planner_differential.rs` and kept here as the smallest case.

use tessera::collection::{DynCollection, DynIndex, DynSchema, KeyKind, TypeDesc};

fn open() -> (tempfile::TempDir, tessera::Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = tessera::Db::open(dir.path().join("db")).unwrap();
    (dir, db)
}

/// A collection keyed by `id` (an `i64`) with a field `v` of any type, indexed or not.
fn untyped(db: &tessera::Db, name: &str, indexed: bool) -> DynCollection {
    let schema = DynSchema {
        version: 1,
        key_fields: vec!["id".into()],
        key_kinds: vec![KeyKind::I64],
        shape: TypeDesc::Struct(vec![("id".into(), TypeDesc::Int), ("v".into(), TypeDesc::Any)]),
        indexes: if indexed { vec![DynIndex { path: "v".into(), unique: false, ready: true, failure: None }] } else { Vec::new() },
    };
    db.create_dyn_collection(name, &schema).unwrap()
}

fn ids(collection: &DynCollection, db: &tessera::Db, text: &str) -> Vec<String> {
    let rows = collection.filter_text(text).unwrap().fetch(db).unwrap();
    rows.iter().map(|row| collection.display_key(row.key_bytes()).unwrap()).collect()
}

/// `order by v desc` on an indexed field that holds values of several kinds walked the whole
/// index backwards: strings came before numbers and numbers before booleans, where
/// docs/query.md (and the in-memory sort of an unindexed field) keep the kinds in their order
/// (booleans, numbers, strings, everything else) and reverse only the order within each.
#[test]
fn a_descending_index_walk_keeps_kinds_in_their_order() {
    let (_dir, db) = open();
    let (indexed, scanned) = (untyped(&db, "indexed", true), untyped(&db, "scanned", false));
    for collection in [&indexed, &scanned] {
        db.write(|tx| {
            for json in [r#"{"id": 1, "v": "b"}"#, r#"{"id": 2, "v": false}"#, r#"{"id": 3, "v": 7}"#, r#"{"id": 4, "v": "a"}"#] {
                collection.insert_json(tx, json.as_bytes())?;
            }
            collection.insert_json(tx, br#"{"id": 5, "v": true}"#)?;
            collection.insert_json(tx, br#"{"id": 6, "v": [1]}"#)?;
            collection.insert_json(tx, br#"{"id": 7}"#)
        })
        .unwrap();
    }
    let plan = indexed.filter_text("order by v desc").unwrap().explain().unwrap().to_string();
    assert!(plan.ends_with("walked backwards"), "{plan}");
    for text in
        ["order by v desc", "order by v desc nulls last", "order by v desc limit 3", "v is not null order by v desc limit 2 offset 1"]
    {
        assert_eq!(ids(&indexed, &db, text), ids(&scanned, &db, text), "{text}");
    }
    assert_eq!(ids(&indexed, &db, "order by v desc"), ["7", "5", "2", "3", "1", "4", "6"]);
}

#[derive(tessera::collection::Record, Debug, Clone, PartialEq)]
#[record(name = "named")]
struct Named {
    #[record(key)]
    name: String,
    n: u32,
}

#[derive(tessera::collection::Record, Debug, Clone, PartialEq)]
#[record(name = "events")]
struct Event {
    #[record(key)]
    day: u16,
    #[record(key)]
    name: String,
}

/// `explain` of a primary-key range printed an open lower end as `∞`, an upper bound with
/// the lower bound's bracket before it (`id <= 5` as `∞ .. [5`), and the bounds of a
/// `starts with` range, and of `<=` on a composite key's last ranged field, as hex bytes.
#[test]
fn explain_shows_primary_key_ranges_with_their_brackets_and_values() {
    let (_dir, db) = open();
    let untyped = untyped(&db, "untyped", false);
    let (named, events) = (db.collection::<Named>().unwrap(), db.collection::<Event>().unwrap());
    let explained = |text: &str| match text.split_once(": ") {
        Some(("untyped", text)) => untyped.filter_text(text).unwrap().explain().unwrap().to_string(),
        Some(("named", text)) => named.query_text(text).unwrap().explain().unwrap().to_string(),
        Some(("events", text)) => events.query_text(text).unwrap().explain().unwrap().to_string(),
        _ => unreachable!(),
    };
    for (text, plan) in [
        ("untyped: id < 5", "primary key range -∞ .. 5), filter id < 5"),
        ("untyped: id <= 5", "primary key range -∞ .. 5], filter id <= 5"),
        ("untyped: id between 2 and 4", "primary key range [2 .. 4], filter id between 2 and 4"),
        ("untyped: id > 5 order by id desc", "primary key range (5 .. ∞, filter id > 5, walked backwards"),
        ("untyped: id >= -1", "primary key range [-1 .. ∞, filter id >= -1"),
        ("named: name < \"b\"", "primary key range -∞ .. b), filter name < \"b\""),
        ("named: name starts with \"ab\"", "primary key range [\"ab\"… .. \"ac\"…), filter name starts with \"ab\""),
        ("events: day < 3", "primary key range -∞ .. (3)), filter day < 3"),
        ("events: day = 2 and name <= \"a\"", "primary key range [(2) .. (2, \"a\")…], filter day == 2 and name <= \"a\""),
    ] {
        assert_eq!(explained(text), plan, "{text}");
    }
}
