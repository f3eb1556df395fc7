//! NULLs in an `order by` follow SQL: last for `asc`, first for `desc`, unless the key says
//! `nulls first` or `nulls last`. It used to put NULLs first in both directions, with no way
//! to change it (an ascending order of an optional field started with every record that had
//! none). Checked on every path an order takes: an index walk forwards and backwards (with
//! and without a range on the index), the primary key, an in-memory sort of one or several
//! keys, and a live subscription, all against one naive sort.

use std::cmp::Ordering;
use std::time::Duration;
use tessera::collection::{Nulls, Order, PlanOrdering, Record};
use tessera::live::Event;
use tessera::query::field;

#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "rows")]
struct Row {
    #[record(key)]
    id: u32,
    #[record(index)]
    indexed: Option<i64>,
    plain: Option<i64>,
}

fn rows() -> Vec<Row> {
    let values = [Some(3), None, Some(-1), Some(3), None, Some(7), Some(0), None];
    values.iter().enumerate().map(|(id, value)| Row { id: id as u32, indexed: *value, plain: value.map(|v| v * 10) }).collect()
}

/// The naive order: values by direction, NULLs where `nulls` puts them, ties by key.
fn naive(rows: &[Row], value: fn(&Row) -> Option<i64>, order: Order, nulls: Nulls) -> Vec<u32> {
    let mut sorted = rows.to_vec();
    sorted.sort_by(|x, y| {
        let ordering = match (value(x), value(y)) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => {
                if nulls == Nulls::First {
                    Ordering::Less
                } else {
                    Ordering::Greater
                }
            }
            (Some(_), None) => {
                if nulls == Nulls::First {
                    Ordering::Greater
                } else {
                    Ordering::Less
                }
            }
            (Some(a), Some(b)) => {
                if order == Order::Asc {
                    a.cmp(&b)
                } else {
                    b.cmp(&a)
                }
            }
        };
        ordering.then(x.id.cmp(&y.id))
    });
    sorted.iter().map(|row| row.id).collect()
}

fn ids(rows: Vec<Row>) -> Vec<u32> {
    rows.into_iter().map(|row| row.id).collect()
}

#[test]
fn nulls_go_last_ascending_and_first_descending_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let db = tessera::Db::open(dir.path().join("db")).unwrap();
    let table = db.collection::<Row>().unwrap();
    db.write(|tx| rows().iter().try_for_each(|row| table.insert(tx, row).map(drop))).unwrap();
    assert!(table.wait_for_indexes(Duration::from_secs(10)));
    let all = rows();
    for order in [Order::Asc, Order::Desc] {
        for nulls in [None, Some(Nulls::First), Some(Nulls::Last)] {
            let placed = nulls.unwrap_or(if order == Order::Asc { Nulls::Last } else { Nulls::First });
            for (path, value) in [("indexed", (|row: &Row| row.indexed) as fn(&Row) -> Option<i64>), ("plain", |row: &Row| row.plain)] {
                let expected = naive(&all, value, order, placed);
                let base = table.all();
                let query = match nulls {
                    None => base.order_by(path, order),
                    Some(nulls) => base.order_by_nulls(path, order, nulls),
                };
                let plan = query.explain().unwrap();
                if path == "indexed" {
                    assert_ne!(plan.ordering, PlanOrdering::Sort, "an index walk: {plan}");
                }
                assert_eq!(ids(query.fetch(&db).unwrap()), expected, "{path} {order:?} {nulls:?}: {plan}");
                // Limits stop the walk early: the first rows agree.
                assert_eq!(ids(query.clone().limit(3).fetch(&db).unwrap()), expected[..3], "{path} {order:?} {nulls:?} limit 3");
                // A range on the index that holds NULLs (`is null or >= 0`) and one that does not.
                let ranged = table.filter(field(path).is_null().or(field(path).ge(0)));
                let ranged = match nulls {
                    None => ranged.order_by(path, order),
                    Some(nulls) => ranged.order_by_nulls(path, order, nulls),
                };
                let keep = |row: &&Row| value(row).is_none_or(|v| v >= 0);
                let expected_ranged = naive(&all.iter().filter(keep).cloned().collect::<Vec<_>>(), value, order, placed);
                assert_eq!(
                    ids(ranged.fetch(&db).unwrap()),
                    expected_ranged,
                    "{path} {order:?} {nulls:?} ranged: {}",
                    ranged.explain().unwrap()
                );
                // The same from the text syntax.
                let direction = if order == Order::Asc { "asc" } else { "DESC" };
                let nulls_text = match nulls {
                    None => "",
                    Some(Nulls::First) => " nulls first",
                    Some(Nulls::Last) => " NULLS LAST",
                };
                let text = format!("order by {path} {direction}{nulls_text}");
                assert_eq!(ids(table.query_text(&text).unwrap().fetch(&db).unwrap()), expected, "{text}");
            }
        }
    }
}

#[test]
fn several_keys_each_place_their_own_nulls() {
    let dir = tempfile::tempdir().unwrap();
    let db = tessera::Db::open(dir.path().join("db")).unwrap();
    let table = db.collection::<Row>().unwrap();
    let rows: Vec<Row> = (0..12u32)
        .map(|id| Row { id, indexed: (id % 3 != 0).then_some(i64::from(id % 2)), plain: (id % 4 != 0).then_some(i64::from(id % 5)) })
        .collect();
    db.write(|tx| rows.iter().try_for_each(|row| table.insert(tx, row).map(drop))).unwrap();
    let query = table.query_text("order by indexed desc nulls last, plain asc nulls first").unwrap();
    let mut expected = rows.clone();
    let rank = |value: Option<i64>, descending: bool, nulls_last: bool| match value {
        None => (u8::from(nulls_last) * 2, 0),
        Some(v) => (1, if descending { -v } else { v }),
    };
    expected.sort_by_key(|row| (rank(row.indexed, true, true), rank(row.plain, false, false), row.id));
    assert_eq!(ids(query.fetch(&db).unwrap()), ids(expected));
}

#[test]
fn a_live_ordered_query_places_nulls_as_a_fresh_query_does() {
    let dir = tempfile::tempdir().unwrap();
    let db = tessera::Db::open(dir.path().join("db")).unwrap();
    let table = db.collection::<Row>().unwrap();
    db.write(|tx| rows().iter().try_for_each(|row| table.insert(tx, row).map(drop))).unwrap();
    for text in ["order by plain", "order by plain desc", "order by indexed asc nulls first", "order by indexed desc nulls last limit 4"] {
        let query = table.query_text(text).unwrap();
        let live = table.subscribe_query(&query).unwrap();
        let first = live.recv_timeout(Duration::from_secs(10)).and_then(Event::initial).expect("the current result");
        assert_eq!(first.iter().map(|row| row.id).collect::<Vec<_>>(), ids(query.fetch(&db).unwrap()), "{text}");
        db.write(|tx| {
            table.upsert(tx, &Row { id: 100, indexed: None, plain: None })?;
            table.upsert(tx, &Row { id: 101, indexed: Some(-5), plain: Some(-50) })?;
            table.update(tx, &0, |row| row.indexed = None)
        })
        .unwrap();
        let fresh = ids(query.fetch(&db).unwrap());
        let change = live.recv_timeout(Duration::from_secs(10)).and_then(Event::changed).expect("a change");
        assert_eq!(change.result.iter().map(|row| row.id).collect::<Vec<_>>(), fresh, "{text}");
        drop(live);
        db.write(|tx| {
            table.delete(tx, &100)?;
            table.delete(tx, &101)?;
            table.update(tx, &0, |row| row.indexed = Some(3))
        })
        .unwrap();
    }
}

#[test]
fn an_order_of_more_than_order_keys_max_keys_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = tessera::Db::open(dir.path().join("db")).unwrap();
    let table = db.collection::<Row>().unwrap();
    let ordered =
        |count: usize| (0..count).fold(table.all(), |query, index| query.order_by(if index % 2 == 0 { "plain" } else { "id" }, Order::Asc));
    assert!(ordered(tessera::query::ORDER_KEYS_MAX).fetch(&db).is_ok());
    match ordered(tessera::query::ORDER_KEYS_MAX + 1).fetch(&db) {
        Err(tessera::Error::Query(tessera::query::QueryError::TooManyOrderKeys { count: 17, count_max: 16 })) => {}
        other => panic!("expected TooManyOrderKeys, got {other:?}"),
    }
}

#[test]
fn an_index_walk_over_a_range_with_or_without_nulls_places_them_as_asked() {
    // The NULL entries and the others are read as two ranges cut from the planned one: either
    // may be empty, or inverted (a range above every NULL).
    let dir = tempfile::tempdir().unwrap();
    let db = tessera::Db::open(dir.path().join("db")).unwrap();
    let table = db.collection::<Row>().unwrap();
    db.write(|tx| rows().iter().try_for_each(|row| table.insert(tx, row).map(drop))).unwrap();
    let all = rows();
    for (text, keep) in [
        ("indexed >= 0", (|row: &Row| row.indexed.is_some_and(|v| v >= 0)) as fn(&Row) -> bool),
        ("indexed is null", |row: &Row| row.indexed.is_none()),
        ("indexed < 100", |row: &Row| row.indexed.is_some_and(|v| v < 100)),
    ] {
        let kept: Vec<Row> = all.iter().filter(|row| keep(row)).cloned().collect();
        for order in [Order::Asc, Order::Desc] {
            for nulls in [Nulls::First, Nulls::Last] {
                let query = table.filter(tessera::query::Expr::parse(text).unwrap()).order_by_nulls("indexed", order, nulls);
                let plan = query.explain().unwrap();
                assert!(plan.to_string().starts_with("index range on indexed"), "{plan}");
                assert_ne!(plan.ordering, PlanOrdering::Sort, "{plan}");
                assert_eq!(ids(query.fetch(&db).unwrap()), naive(&kept, |row| row.indexed, order, nulls), "{text} {order:?} {nulls:?}");
            }
        }
    }
}
