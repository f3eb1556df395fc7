//! Properties of field-decomposed documents: round trips of random nested values (flat and
//! deep), replacement by a value with fewer fields, ids that are prefixes of other ids against
//! a model, and observation (each commit once, in order, beside prefix-neighbour ids).

use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;
use tessera::live::Event;
use tessera::{Db, DocumentsOptions, Error};

fn open() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("docs.tessera")).unwrap();
    (dir, db)
}

fn deep() -> DocumentsOptions {
    DocumentsOptions { deep: true, ..DocumentsOptions::default() }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Inner {
    x: i32,
    label: Option<String>,
    tags: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Kind {
    Unit,
    New(u16),
    Pair(i8, bool),
    Rec { a: String, b: Option<i64> },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Record {
    name: String,
    inner: Inner,
    opt_inner: Option<Inner>,
    kinds: Vec<Kind>,
    map: BTreeMap<String, Inner>,
    kind: Kind,
    ratio: f64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    note: Option<String>,
    #[serde(rename = "e-mail")]
    email: String,
}

fn inner_strategy() -> impl Strategy<Value = Inner> {
    (any::<i32>(), proptest::option::of("[a-z\u{e9}]{0,4}"), proptest::collection::vec(any::<u8>(), 0..3))
        .prop_map(|(x, label, tags)| Inner { x, label, tags })
}

fn kind_strategy() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::Unit),
        any::<u16>().prop_map(Kind::New),
        (any::<i8>(), any::<bool>()).prop_map(|(a, b)| Kind::Pair(a, b)),
        ("[a-z]{0,3}", proptest::option::of(any::<i64>())).prop_map(|(a, b)| Kind::Rec { a, b }),
    ]
}

fn record_strategy() -> impl Strategy<Value = Record> {
    (
        "[a-z]{0,5}",
        inner_strategy(),
        proptest::option::of(inner_strategy()),
        proptest::collection::vec(kind_strategy(), 0..3),
        proptest::collection::btree_map("[a-z]{1,3}", inner_strategy(), 0..3),
        kind_strategy(),
        -1e6f64..1e6,
        proptest::option::of("[a-z]{0,3}"),
        "[a-z@.]{0,6}",
    )
        .prop_map(|(name, inner, opt_inner, kinds, map, kind, ratio, note, email)| Record {
            name,
            inner,
            opt_inner,
            kinds,
            map,
            kind,
            ratio,
            note,
            email,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// set → get, then set of another value (possibly with fewer fields, fewer map entries,
    /// an `Option` gone to `None`) → get: exactly the value set, with no stale field, flat and
    /// deep; and again after a reopen.
    #[test]
    fn records_round_trip_and_replacements_leave_no_stale_field(
        values in proptest::collection::vec(record_strategy(), 1..4),
        is_deep in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("docs.tessera");
        let options = if is_deep { deep() } else { DocumentsOptions::default() };
        {
            let db = Db::open(&path).unwrap();
            let docs = db.documents_with("records", options.clone()).unwrap();
            let doc = docs.document::<Record>("r");
            for value in &values {
                doc.set(value).unwrap();
                prop_assert_eq!(doc.get().unwrap(), Some(value.clone()));
                prop_assert_eq!(doc.field::<String>("name").get().unwrap(), Some(value.name.clone()));
                prop_assert_eq!(doc.field::<String>("e-mail").get().unwrap(), Some(value.email.clone()));
                prop_assert_eq!(doc.field::<String>("note").get().unwrap(), value.note.clone());
                // A whole nested struct written as one field (deep: its leaves replaced) reads
                // back through the document and through a field handle.
                let mut updated = value.clone();
                updated.inner = values[0].inner.clone();
                updated.opt_inner = values[values.len() - 1].opt_inner.clone();
                doc.update_field("inner", &updated.inner).unwrap();
                doc.update_field("opt_inner", &updated.opt_inner).unwrap();
                prop_assert_eq!(doc.get().unwrap(), Some(updated.clone()));
                prop_assert_eq!(doc.field::<Inner>("inner").get().unwrap(), Some(updated.inner.clone()));
                prop_assert_eq!(doc.field::<Option<Inner>>("opt_inner").get().unwrap(), Some(updated.opt_inner.clone()));
                doc.set(value).unwrap();
            }
            db.sync().unwrap();
        }
        let db = Db::open(&path).unwrap();
        let doc = db.documents_with("records", options).unwrap().document::<Record>("r");
        prop_assert_eq!(doc.get().unwrap(), values.last().cloned());
        prop_assert!(doc.delete().unwrap());
        prop_assert_eq!(doc.get().unwrap(), None);
        prop_assert!(!doc.exists().unwrap());
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Small {
    n: u32,
    s: String,
}

#[derive(Debug, Clone)]
enum IdOp {
    Set(usize, u32),
    Delete(usize),
    UpdateField(usize, u32),
    Prefix(usize),
    Range(usize, usize),
}

fn id_pool() -> Vec<String> {
    ["", "a", "a\0", "a\0\u{1}", "a\u{1}", "a:", "ab", "a\0b", "\0", "\u{1}", "b", "\u{e9}", "a\u{e9}", "\u{ff}"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    /// Ids that are prefixes of each other (with NUL and 0x01 bytes, which the key encoding
    /// escapes and terminates with) against a `BTreeMap` model: get, delete, update_field,
    /// ids_with_prefix and ids_in_range.
    #[test]
    fn ids_that_prefix_each_other_match_a_model(ops in proptest::collection::vec(prop_oneof![
        (0usize..14, any::<u32>()).prop_map(|(i, n)| IdOp::Set(i, n)),
        (0usize..14).prop_map(IdOp::Delete),
        (0usize..14, any::<u32>()).prop_map(|(i, n)| IdOp::UpdateField(i, n)),
        (0usize..14).prop_map(IdOp::Prefix),
        (0usize..14, 0usize..14).prop_map(|(a, b)| IdOp::Range(a, b)),
    ], 1..40)) {
        let pool = id_pool();
        let (_dir, db) = open();
        let docs = db.documents("ids").unwrap();
        let mut model: BTreeMap<String, Small> = BTreeMap::new();
        for op in &ops {
            match op {
                IdOp::Set(i, n) => {
                    let value = Small { n: *n, s: format!("{:?}", pool[*i]) };
                    docs.document::<Small>(&pool[*i]).set(&value).unwrap();
                    model.insert(pool[*i].clone(), value);
                }
                IdOp::Delete(i) => {
                    let existed = docs.document::<Small>(&pool[*i]).delete().unwrap();
                    prop_assert_eq!(existed, model.remove(&pool[*i]).is_some(), "delete {:?}", pool[*i]);
                }
                IdOp::UpdateField(i, n) => {
                    let result = docs.document::<Small>(&pool[*i]).update_field("n", n);
                    match model.get_mut(&pool[*i]) {
                        Some(value) => {
                            result.unwrap();
                            value.n = *n;
                        }
                        None => prop_assert!(matches!(result, Err(Error::NotFound { .. })), "{:?}: {:?}", pool[*i], result),
                    }
                }
                IdOp::Prefix(i) => {
                    let expected: Vec<String> = model.keys().filter(|id| id.starts_with(pool[*i].as_str())).cloned().collect();
                    prop_assert_eq!(docs.ids_with_prefix(&pool[*i]).unwrap(), expected, "prefix {:?}", pool[*i]);
                }
                IdOp::Range(a, b) => {
                    let (start, end) = (&pool[*a], &pool[*b]);
                    let expected: Vec<String> =
                        model.keys().filter(|id| id.as_str() >= start.as_str() && id.as_str() < end.as_str()).cloned().collect();
                    prop_assert_eq!(docs.ids_in_range(start, end).unwrap(), expected, "range {:?}..{:?}", start, end);
                }
            }
            for id in &pool {
                prop_assert_eq!(docs.document::<Small>(id).get().unwrap(), model.get(id).cloned(), "get {:?}", id);
            }
        }
        prop_assert_eq!(docs.ids_with_prefix("").unwrap(), model.keys().cloned().collect::<Vec<_>>());
    }
}

/// An inverted range (end before start) is empty, not a panic.
#[test]
fn an_inverted_id_range_is_empty() {
    let (_dir, db) = open();
    let docs = db.documents("ids").unwrap();
    for id in ["a", "b", "c"] {
        docs.document::<Small>(id).set(&Small { n: 1, s: id.into() }).unwrap();
    }
    assert_eq!(docs.ids_in_range("c", "a").unwrap(), Vec::<String>::new());
    assert_eq!(docs.ids_in_range("b", "b").unwrap(), Vec::<String>::new());
}

// ---------------------------------------------------------------- observation

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Address {
    city: String,
    zip: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Person {
    name: String,
    address: Address,
    #[serde(default)]
    previous: Option<Address>,
}

fn ada() -> Person {
    Person { name: "Ada".into(), address: Address { city: "London".into(), zip: "N1".into() }, previous: None }
}

/// A document observed while it and its prefix-neighbours ("a\0", "ab", "", "a\u{1}") are
/// written: the initial value, then exactly one event per commit that touched it, in order,
/// each the value that commit left.
#[test]
fn observe_delivers_each_commit_of_the_document_once_in_order() {
    for options in [DocumentsOptions::default(), deep()] {
        let (_dir, db) = open();
        let docs = db.documents_with("obs", options.clone()).unwrap();
        let doc = docs.document::<Person>("a");
        let neighbours: Vec<_> = ["a\0", "ab", "", "a\u{1}"].iter().map(|id| docs.document::<Person>(id)).collect();
        let events = doc.observe().unwrap();
        assert_eq!(events.recv_timeout(Duration::from_secs(5)).and_then(Event::initial), Some(None));
        let mut rng = fastrand::Rng::with_seed(11);
        let mut current: Option<Person> = None;
        let mut expected: Vec<Option<Person>> = Vec::new();
        for step in 0..150u32 {
            match rng.u8(0..6) {
                0 => {
                    if doc.delete().unwrap() {
                        expected.push(None);
                    }
                    current = None;
                }
                1 => {
                    let neighbour = &neighbours[rng.usize(0..neighbours.len())];
                    neighbour.set(&Person { name: format!("n{step}"), ..ada() }).unwrap();
                }
                2 => {
                    let result = doc.update_field("name", &format!("u{step}"));
                    match &mut current {
                        Some(person) => {
                            result.unwrap();
                            person.name = format!("u{step}");
                            expected.push(Some(person.clone()));
                        }
                        None => assert!(result.is_err()),
                    }
                }
                3 => {
                    // Two writes in one transaction: one event.
                    let value =
                        Person { name: format!("t{step}"), previous: Some(Address { city: "Bath".into(), zip: "B".into() }), ..ada() };
                    db.write(|tx| {
                        doc.set_in(tx, &ada())?;
                        neighbours[0].set_in(tx, &ada())?;
                        doc.set_in(tx, &value)
                    })
                    .unwrap();
                    current = Some(value.clone());
                    expected.push(Some(value));
                }
                _ => {
                    let value = Person { name: format!("s{step}"), ..ada() };
                    doc.set(&value).unwrap();
                    current = Some(value.clone());
                    expected.push(Some(value));
                }
            }
        }
        let mut received = Vec::new();
        while let Some(event) = events.recv_timeout(Duration::from_millis(300)) {
            match event {
                Event::Changed(value) => received.push(value),
                other => panic!("unexpected event (closed: {})", other.is_closed()),
            }
        }
        assert_eq!(received.len(), expected.len(), "deep {}: event count", options.deep);
        assert_eq!(received, expected, "deep {}", options.deep);
        assert_eq!(doc.get().unwrap(), current);
    }
}
