//! Dynamic queries use indexes (issue 17). They used to scan the whole collection in
//! primary-key order and sort in memory whatever the query; they now go through the planner
//! and candidate runner typed queries use. These tests check that a dynamic query returns
//! exactly what the typed query returns (same records, same order) and what a scan of an
//! unindexed copy returns, over random data and random query texts, and that `explain` shows
//! the same key lookups and index ranges.

use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tessera::Db;
use tessera::collection::Record;

/// A secondary index, a unique index and a plain field.
#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "items")]
struct Item {
    #[record(key)]
    id: u32,
    #[record(index)]
    score: Option<i32>,
    #[record(unique)]
    code: String,
    name: String,
}

/// [`Item`] without indexes, keyed by its rank in `Item`'s key order: a query reads it by a
/// full scan, and its ties come out in `Item`'s key order.
#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "items_scanned")]
struct ItemScanned {
    #[record(key)]
    row: u32,
    id: u32,
    score: Option<i32>,
    code: String,
    name: String,
}

/// A composite key and a secondary index.
#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "events")]
struct Event {
    #[record(key)]
    day: u16,
    #[record(key)]
    name: String,
    #[record(index)]
    size: Option<i64>,
    note: String,
}

/// [`Event`] without indexes (see [`ItemScanned`]).
#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "events_scanned")]
struct EventScanned {
    #[record(key)]
    row: u32,
    day: u16,
    name: String,
    size: Option<i64>,
    note: String,
}

fn open() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    (dir, db)
}

fn items_of(rows: &BTreeMap<u32, (Option<i32>, u8, u8)>) -> Vec<Item> {
    rows.iter()
        .map(|(&id, &(score, letter, name))| Item {
            id,
            score,
            code: format!("{}{id}", char::from(b'a' + letter)),
            name: format!("n{name}"),
        })
        .collect()
}

fn events_of(rows: &BTreeMap<(u16, u8), (Option<i64>, u8)>) -> Vec<Event> {
    rows.iter().map(|(&(day, name), &(size, note))| Event { day, name: format!("e{name}"), size, note: format!("x{note}") }).collect()
}

/// Stores `items` in the indexed collection and in its unindexed copy.
fn store_items(db: &Db, items: &[Item]) {
    let (typed, scanned) = (db.collection::<Item>().unwrap(), db.collection::<ItemScanned>().unwrap());
    db.write(|tx| {
        for (row, item) in items.iter().enumerate() {
            typed.insert(tx, item)?;
            let Item { id, score, code, name } = item.clone();
            scanned.insert(tx, &ItemScanned { row: row as u32, id, score, code, name })?;
        }
        Ok(())
    })
    .unwrap();
}

fn store_events(db: &Db, events: &[Event]) {
    let (typed, scanned) = (db.collection::<Event>().unwrap(), db.collection::<EventScanned>().unwrap());
    db.write(|tx| {
        for (row, event) in events.iter().enumerate() {
            typed.insert(tx, event)?;
            let Event { day, name, size, note } = event.clone();
            scanned.insert(tx, &EventScanned { row: row as u32, day, name, size, note })?;
        }
        Ok(())
    })
    .unwrap();
}

/// The results of `text` on collection `name`, three ways: typed, dynamic, and dynamic on
/// the unindexed copy (`row` dropped); checks they agree and that both plans read alike.
fn check_alike<T: Record + Serialize>(db: &Db, name: &str, text: &str) -> Result<(), TestCaseError> {
    let typed = db.collection::<T>().unwrap().query_text(text).unwrap();
    let from_typed: Vec<serde_json::Value> = typed.fetch(db).unwrap().iter().map(|row| serde_json::to_value(row).unwrap()).collect();
    let dynamic = db.dyn_collection(name).unwrap().filter_text(text).unwrap();
    let json = |rows: Vec<tessera::collection::DynRecord>| -> Vec<serde_json::Value> {
        rows.iter().map(|row| serde_json::from_str(&row.to_json()).unwrap()).collect()
    };
    let from_dynamic = json(dynamic.fetch(db).unwrap());
    let plan = dynamic.explain().unwrap().to_string();
    prop_assert_eq!(&plan, &typed.explain().unwrap().to_string(), "{}", text);
    prop_assert_eq!(&from_dynamic, &from_typed, "{}: {}", text, plan);
    prop_assert_eq!(dynamic.count(db).unwrap(), from_typed.len(), "{}", text);
    let oracle = db.dyn_collection(&format!("{name}_scanned")).unwrap().filter_text(text).unwrap();
    let oracle_plan = oracle.explain().unwrap().to_string();
    prop_assert!(oracle_plan.starts_with("full scan") || oracle_plan.starts_with("empty"), "{}: {}", text, oracle_plan);
    let mut from_oracle = json(oracle.fetch(db).unwrap());
    for row in &mut from_oracle {
        row.as_object_mut().unwrap().remove("row");
    }
    prop_assert_eq!(&from_dynamic, &from_oracle, "{}: {}", text, plan);
    Ok(())
}

/// A random `[PREDICATE] [order by …] [limit N] [offset M]` from the parts given.
fn query_text(predicates: Vec<String>, orders: &'static [&'static str]) -> impl Strategy<Value = String> {
    (prop::sample::select(predicates), prop::sample::select(orders), prop::option::of(0usize..8), prop::option::of(0usize..5)).prop_map(
        |(predicate, order, limit, offset)| {
            let mut text = predicate;
            for part in [
                order.to_owned(),
                limit.map_or(String::new(), |n| format!("limit {n}")),
                offset.map_or(String::new(), |n| format!("offset {n}")),
            ] {
                if !part.is_empty() {
                    text = if text.is_empty() { part } else { format!("{text} {part}") };
                }
            }
            text
        },
    )
}

fn item_queries() -> impl Strategy<Value = String> {
    (0u32..64, 0u32..64, -6i32..6, -6i32..6, 0u8..4, 0u8..5).prop_flat_map(|(a, b, s, t, letter, n)| {
        let c = char::from(b'a' + letter);
        let predicates = vec![
            String::new(),
            format!("id == {a}"),
            format!("id >= {a}"),
            format!("id < {a}"),
            format!("id between {a} and {b}"),
            format!("id in ({a}, {b})"),
            format!("id > {a} and id <= {b}"),
            "id == -1".to_owned(),
            "id == 4294967296".to_owned(),
            format!("id == {a}.5"),
            format!("score == {s}"),
            format!("score > {s}"),
            format!("score <= {s}"),
            "score is null".to_owned(),
            format!("score between {s} and {t}"),
            format!("score != {s}"),
            format!("score > {s} and id < {a}"),
            format!("score == {s} or id == {a}"),
            format!("score == {s} or score is null"),
            format!(r#"code == "{c}{a}""#),
            format!(r#"code starts with "{c}""#),
            format!(r#"code >= "{c}""#),
            format!(r#"name == "n{n}""#),
            format!(r#"name == "n{n}" and score >= {s}"#),
        ];
        let orders: &'static [&'static str] = &[
            "",
            "order by id",
            "order by id desc",
            "order by score",
            "order by score desc",
            "order by score desc nulls last",
            "order by score nulls first",
            "order by code desc",
            "order by code",
            "order by name, score desc",
        ];
        query_text(predicates, orders)
    })
}

fn event_queries() -> impl Strategy<Value = String> {
    (0u16..7, 0u8..6, -4i64..4).prop_flat_map(|(d, n, s)| {
        let predicates = vec![
            String::new(),
            format!("day == {d}"),
            format!(r#"day == {d} and name == "e{n}""#),
            format!(r#"day == {d} and name >= "e{n}""#),
            format!(r#"day == {d} and name < "e{n}""#),
            format!("day >= {d}"),
            format!("day == {d} and size is null"),
            format!("size > {s}"),
            format!("size <= {s} and day < {d}"),
            format!(r#"name == "e{n}""#),
            "day == 70000".to_owned(),
            format!(r#"day == {d} and name == "e{n}" or size == {s}"#),
        ];
        let orders: &'static [&'static str] =
            &["", "order by day", "order by day desc", "order by size", "order by size desc", "order by name desc, day", "order by note"];
        query_text(predicates, orders)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn dynamic_item_queries_return_what_typed_queries_and_a_scan_return(
        rows in prop::collection::btree_map(0u32..64, (prop::option::of(-5i32..5), 0u8..4, 0u8..5), 0..40),
        texts in prop::collection::vec(item_queries(), 1..12),
    ) {
        let (_dir, db) = open();
        store_items(&db, &items_of(&rows));
        for text in &texts {
            check_alike::<Item>(&db, "items", text)?;
        }
    }

    #[test]
    fn dynamic_composite_key_queries_return_what_typed_queries_and_a_scan_return(
        rows in prop::collection::btree_map((0u16..6, 0u8..5), (prop::option::of(-3i64..3), 0u8..3), 0..30),
        texts in prop::collection::vec(event_queries(), 1..12),
    ) {
        let (_dir, db) = open();
        store_events(&db, &events_of(&rows));
        for text in &texts {
            check_alike::<Event>(&db, "events", text)?;
        }
    }
}

fn explained(db: &Db, name: &str, text: &str) -> String {
    db.dyn_collection(name).unwrap().filter_text(text).unwrap().explain().unwrap().to_string()
}

#[test]
fn explain_shows_key_lookups_and_index_ranges() {
    let (_dir, db) = open();
    let rows = (0..20u32).map(|id| (id, (Some(id as i32 % 5), (id % 4) as u8, (id % 3) as u8))).collect();
    store_items(&db, &items_of(&rows));
    let rows = (0..12u16).map(|day| ((day % 4, day as u8), (Some(i64::from(day)), 0))).collect();
    store_events(&db, &events_of(&rows));
    assert_eq!(explained(&db, "items", "id == 5"), "primary key lookup 5");
    assert_eq!(explained(&db, "items", "id >= 5 order by id desc limit 2"), "primary key range [5 .. ∞, filter id >= 5, walked backwards");
    assert_eq!(explained(&db, "items", "score > 2"), "index range on score [2 .. ∞), filter score > 2, sort in memory");
    assert_eq!(explained(&db, "items", r#"code == "b5""#), r#"index range on code = "b5", filter code == "b5", sort in memory"#);
    assert_eq!(explained(&db, "items", "order by score desc limit 3"), "index range on score (-∞ .. ∞), walked backwards");
    assert_eq!(explained(&db, "items", "order by code"), "index range on code (-∞ .. ∞)");
    assert_eq!(explained(&db, "items", "order by name"), "full scan, sort in memory");
    // Constants that are no u32 are not looked up by key: the filter decides.
    assert_eq!(explained(&db, "items", "id == -1"), "full scan, filter id == -1");
    assert_eq!(explained(&db, "items", "id == 4294967296"), "full scan, filter id == 4294967296");
    assert_eq!(explained(&db, "items", "id == 2.5"), "full scan, filter id == 2.5");
    assert_eq!(
        explained(&db, "events", r#"day == 2 and name == "e6""#),
        r#"primary key lookup (2, "e6"), filter day == 2 and name == "e6""#
    );
    assert!(explained(&db, "events", "day == 2").starts_with("primary key range [(2) .. "), "{}", explained(&db, "events", "day == 2"));
    assert_eq!(explained(&db, "events", "day == 70000"), "full scan, filter day == 70000");
    assert_eq!(explained(&db, "events", "size >= 3 order by size"), "index range on size [3 .. ∞), filter size >= 3");
    let events = db.dyn_collection("events").unwrap();
    let found = events.filter_text(r#"day == 2 and name == "e6""#).unwrap().fetch(&db).unwrap();
    assert_eq!(found.iter().map(|row| row.to_json()).collect::<Vec<_>>(), [r#"{"day":2,"name":"e6","size":6,"note":"x0"}"#]);
}

#[test]
fn an_index_whose_build_failed_is_not_used() {
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
        for id in 0..300u32 {
            // A long note beside a 300-byte key: too long for an index key, so the index on
            // `note` cannot be built.
            let (key, note) = if id == 150 { ("k".repeat(300), "x".repeat(600)) } else { (format!("{id:04}"), format!("n{id}")) };
            plain.insert(tx, &Plain { id: key, note, score: (id % 10) as i32 })?;
        }
        Ok(())
    })
    .unwrap();
    drop(plain);
    let indexed = db.collection::<Indexed>().unwrap();
    let typed_by_score = indexed.filter(Indexed::score().eq(3));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while indexed.index_failure("note").is_none() || !typed_by_score.explain().unwrap().to_string().starts_with("index") {
        assert!(std::time::Instant::now() < deadline, "note: {:?}", indexed.index_failure("note"));
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let notes = db.dyn_collection("notes").unwrap();
    let by_note = notes.filter_text(r#"note == "n7""#).unwrap();
    assert_eq!(by_note.explain().unwrap().to_string(), r#"full scan, filter note == "n7""#, "the failed index is never used");
    assert_eq!(by_note.count(&db).unwrap(), 1);
    let by_score = notes.filter_text("score == 3 order by score desc").unwrap();
    assert!(by_score.explain().unwrap().to_string().starts_with("index range on score"), "{}", by_score.explain().unwrap());
    assert_eq!(by_score.count(&db).unwrap(), 30);
}
