//! A multi-entry index on an array's elements (`#[record(index_elements)]`, or `index =
//! "path[]"`): `tags contains "x"` reads an index range instead of scanning. Checked against a
//! naive filter over random writes (inserts, updates that add, drop and repeat elements,
//! deletes), with numbers that one f64 cannot tell apart, after which `Db::check` finds every
//! entry where it belongs; and an index declared over existing records builds in the
//! background.

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::time::Duration;
use tessera::collection::Record;
use tessera::query::field;

#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "docs", index = "scores[]")]
struct Doc {
    #[record(key)]
    id: u16,
    #[record(index_elements)]
    tags: Vec<String>,
    scores: Option<Vec<i64>>,
    rank: i32,
}

const WORDS: [&str; 5] = ["a", "b", "ab", "", "long"];
/// Two integers one f64 holds as the same number, and small ones.
const NUMBERS: [i64; 5] = [1 << 53, (1 << 53) + 1, -1, 0, 7];

fn long_word(word: &str) -> String {
    // Past 256 bytes a string's entry is truncated: two of them share a prefix.
    if word == "long" { format!("{}{word}", "x".repeat(300)) } else { word.to_owned() }
}

fn doc() -> impl Strategy<Value = Doc> {
    (
        0u16..24,
        prop::collection::vec(prop::sample::select(WORDS.to_vec()), 0..4),
        prop::option::of(prop::collection::vec(prop::sample::select(NUMBERS.to_vec()), 0..4)),
        -3i32..3,
    )
        .prop_map(|(id, tags, scores, rank)| Doc { id, tags: tags.into_iter().map(long_word).collect(), scores, rank })
}

/// The oracle's side of a predicate.
type Keep<'a> = Box<dyn Fn(&Doc) -> bool + 'a>;

#[derive(Debug, Clone)]
enum Write {
    Upsert(Doc),
    Delete(u16),
}

fn open(dir: &tempfile::TempDir) -> (tessera::Db, tessera::collection::Collection<Doc>) {
    let db = tessera::Db::open(dir.path().join("db")).unwrap();
    let docs = db.collection::<Doc>().unwrap();
    assert!(docs.wait_for_indexes(Duration::from_secs(10)));
    (db, docs)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn contains_through_the_element_index_matches_a_naive_filter(
        writes in prop::collection::vec(prop_oneof![4 => doc().prop_map(Write::Upsert), 1 => (0u16..24).prop_map(Write::Delete)], 0..50),
        word in prop::sample::select(WORDS.to_vec()),
        number in prop::sample::select(NUMBERS.to_vec()),
        rank in -3i32..3,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (db, docs) = open(&dir);
        let mut oracle: BTreeMap<u16, Doc> = BTreeMap::new();
        for write in &writes {
            db.write(|tx| match write {
                Write::Upsert(doc) => docs.upsert(tx, doc).map(drop),
                Write::Delete(id) => docs.delete(tx, id).map(drop),
            }).unwrap();
            match write {
                Write::Upsert(doc) => { oracle.insert(doc.id, doc.clone()); }
                Write::Delete(id) => { oracle.remove(id); }
            }
        }
        let word = long_word(word);
        let has_word = |doc: &Doc| doc.tags.contains(&word);
        let has_number = |doc: &Doc| doc.scores.as_ref().is_some_and(|scores| scores.contains(&number));
        let ids = |docs: Vec<Doc>| docs.into_iter().map(|doc| doc.id).collect::<Vec<_>>();
        let expect = |keep: &dyn Fn(&Doc) -> bool| oracle.values().filter(|doc| keep(doc)).map(|doc| doc.id).collect::<Vec<_>>();
        let cases: [(tessera::query::Expr, Keep); 4] = [
            (Doc::tags().contains(word.as_str()), Box::new(has_word)),
            (Doc::scores().contains(number), Box::new(has_number)),
            (Doc::tags().contains(word.as_str()).and(field("rank").ge(rank)), Box::new(|doc: &Doc| has_word(doc) && doc.rank >= rank)),
            (Doc::tags().contains(word.as_str()).or(Doc::scores().contains(number)), Box::new(|doc: &Doc| has_word(doc) || has_number(doc))),
        ];
        for (predicate, keep) in cases {
            let query = docs.filter(predicate.clone());
            let plan = query.explain().unwrap().to_string();
            prop_assert!(plan.contains("index range on tags[]") || plan.contains("index range on scores[]"), "{}", plan);
            prop_assert_eq!(ids(query.fetch(&db).unwrap()), expect(&*keep), "{}: {}", predicate, plan);
            prop_assert_eq!(query.count(&db).unwrap(), expect(&*keep).len());
        }
        let report = db.check().unwrap();
        prop_assert!(report.is_ok(), "{}", report);
    }
}

#[test]
fn an_element_index_declared_over_existing_records_builds_and_checks() {
    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "docs")]
    struct Before {
        #[record(key)]
        id: u16,
        tags: Vec<String>,
        scores: Option<Vec<i64>>,
        rank: i32,
    }
    let dir = tempfile::tempdir().unwrap();
    {
        let db = tessera::Db::open(dir.path().join("db")).unwrap();
        let before = db.collection::<Before>().unwrap();
        db.write(|tx| {
            (0..3000u16).try_for_each(|id| {
                let tags = vec![format!("t{}", id % 7), format!("t{}", id % 11), format!("t{}", id % 7)];
                before.insert(tx, &Before { id, tags, scores: None, rank: 0 }).map(drop)
            })
        })
        .unwrap();
    }
    let (db, docs) = open(&dir);
    let query = docs.query_text(r#"tags contains "t3""#).unwrap();
    assert!(query.explain().unwrap().to_string().starts_with("index range on tags[] = \"t3\""), "{}", query.explain().unwrap());
    let expected = (0..3000u16).filter(|id| id % 7 == 3 || id % 11 == 3).count();
    assert_eq!(query.count(&db).unwrap(), expected);
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{report}");
}

#[test]
fn an_element_index_must_be_on_an_array_and_not_unique() {
    #[derive(Record, Debug)]
    #[record(name = "bad_unique", unique = "tags[]")]
    struct BadUnique {
        #[record(key)]
        id: u16,
        tags: Vec<String>,
    }
    #[derive(Record, Debug)]
    #[record(name = "bad_scalar")]
    struct BadScalar {
        #[record(key)]
        id: u16,
        #[record(index_elements)]
        name: String,
    }
    let dir = tempfile::tempdir().unwrap();
    let db = tessera::Db::open(dir.path().join("db")).unwrap();
    let unique = db.collection::<BadUnique>().unwrap_err().to_string();
    assert!(unique.contains("cannot be unique"), "{unique}");
    let scalar = db.collection::<BadScalar>().unwrap_err().to_string();
    assert!(scalar.contains("is not an array"), "{scalar}");
}

#[test]
fn a_record_has_at_most_element_entries_max_entries_in_an_element_index() {
    use tessera::collection::ELEMENT_ENTRIES_MAX;
    let dir = tempfile::tempdir().unwrap();
    let (db, docs) = open(&dir);
    let tags = |count: usize| (0..count).map(|index| format!("t{index}")).collect::<Vec<_>>();
    // Repeated elements are one entry each: the bound counts distinct ones.
    let mut at_bound = tags(ELEMENT_ENTRIES_MAX);
    at_bound.extend(tags(10));
    db.write(|tx| docs.insert(tx, &Doc { id: 1, tags: at_bound.clone(), scores: None, rank: 0 }).map(drop)).unwrap();
    let over = Doc { id: 2, tags: tags(ELEMENT_ENTRIES_MAX + 1), scores: None, rank: 0 };
    match db.write(|tx| docs.insert(tx, &over)) {
        Err(tessera::Error::LimitExceeded { limit, .. }) => assert_eq!(limit, ELEMENT_ENTRIES_MAX as u64),
        other => panic!("expected LimitExceeded, got {other:?}"),
    }
    assert_eq!(docs.get(&db, &2u16).unwrap(), None, "nothing written");
    assert_eq!(docs.filter(Doc::tags().contains("t4095")).count(&db).unwrap(), 1);
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{report}");
}
