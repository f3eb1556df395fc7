//! Issue 15, "hostile files and input", items 4 and 5: names and keys that tessera cannot
//! store, predicates built deeper than the stack, and a flood of colliding dictionary keys.
//!
//! What broke: a NUL in a name panicked inside heed; an empty or over-long collection name
//! was a schema mismatch while the same names elsewhere were `InvalidName`; a filter built
//! from 100,000 `.and(…)` calls aborted the process with a stack overflow in `count()`; 17
//! long dictionary keys crafted to share a hash made every later save fail, and after a
//! reopen none of them, nor an ordinary key set after them, existed.

use serde::{Deserialize, Serialize};
use tessera::collection::Record;
use tessera::{Db, DictionaryOptions, Error};

fn open() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("hostile.tessera")).unwrap();
    (dir, db)
}

// ---- names -------------------------------------------------------------------------------

#[derive(Serialize, Deserialize, Record, Debug, PartialEq)]
#[record(name = "a\0b")]
struct NulName {
    #[record(key)]
    id: u32,
}

#[derive(Serialize, Deserialize, Record, Debug, PartialEq)]
#[record(name = "")]
struct EmptyName {
    #[record(key)]
    id: u32,
}

#[derive(Serialize, Deserialize, Record, Debug, PartialEq)]
#[record(
    name = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
)]
struct LongName {
    #[record(key)]
    id: u32,
}

fn is_invalid_name(result: Result<impl Sized, Error>, expected_what: &str) -> bool {
    matches!(result, Err(Error::InvalidName { what, .. }) if what == expected_what)
}

#[test]
fn names_with_nul_empty_or_too_long_are_invalid_names_everywhere() {
    let (_dir, db) = open();
    let too_long = "x".repeat(256);
    for bad in ["a\0b", "", too_long.as_str()] {
        assert!(is_invalid_name(db.keyspace(bad), "keyspace"), "keyspace {bad:?}");
        assert!(is_invalid_name(db.documents(bad), "documents"), "documents {bad:?}");
        assert!(is_invalid_name(db.dictionary_with(bad, DictionaryOptions::default()), "dictionary"), "dictionary {bad:?}");
    }
    assert!(is_invalid_name(db.collection::<NulName>(), "collection"));
    assert!(is_invalid_name(db.collection::<EmptyName>(), "collection"));
    assert_eq!(LongName::NAME.len(), tessera::collection::COLLECTION_NAME_LEN_MAX + 1);
    assert!(is_invalid_name(db.collection::<LongName>(), "collection"));
    // The error names what the caller gave, not the keyspace tessera would have made of it.
    match db.documents("a\0b") {
        Err(Error::InvalidName { name, .. }) => assert_eq!(name, "a\0b"),
        other => panic!("{:?}", other.err()),
    }
}

#[test]
fn names_at_their_limits_are_accepted() {
    let (_dir, db) = open();
    assert!(db.keyspace(&"k".repeat(tessera::store::KEYSPACE_NAME_LEN_MAX)).is_ok());
    let documents = "d".repeat(tessera::documents::DOCUMENTS_NAME_LEN_MAX);
    db.documents(&documents).unwrap().document::<Note>("x").set(&Note { n: 1 }).unwrap();
    assert!(is_invalid_name(db.documents(&format!("{documents}d")), "documents"));
    let dictionary = "y".repeat(tessera::dictionary::DICTIONARY_NAME_LEN_MAX);
    db.dictionary_with(&dictionary, DictionaryOptions::default()).unwrap().set("k", &1u8).unwrap();
    assert!(is_invalid_name(db.dictionary_with(&format!("{dictionary}y"), DictionaryOptions::default()), "dictionary"));
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Note {
    n: u32,
}

// ---- the empty key -----------------------------------------------------------------------

#[derive(Serialize, Deserialize, Record, Debug, PartialEq, Clone)]
#[record(name = "labels")]
struct Label {
    #[record(key)]
    name: String,
    colour: u32,
}

#[test]
fn the_empty_key_is_an_ordinary_key_in_typed_apis_and_absent_in_raw_keyspaces() {
    let (_dir, db) = open();
    // Collections: "" is a key like any other (its order-preserving encoding is not empty).
    let labels = db.collection::<Label>().unwrap();
    assert_eq!(labels.get(&db, &"".to_owned()).unwrap(), None);
    db.write(|tx| labels.insert(tx, &Label { name: String::new(), colour: 7 }).map(|_| ())).unwrap();
    assert_eq!(labels.get(&db, &"".to_owned()).unwrap(), Some(Label { name: String::new(), colour: 7 }));
    // Documents: the empty id likewise.
    let documents = db.documents("docs").unwrap();
    let empty = documents.document::<Note>("");
    assert_eq!(empty.get().unwrap(), None);
    empty.set(&Note { n: 5 }).unwrap();
    assert_eq!(empty.get().unwrap(), Some(Note { n: 5 }));
    assert_eq!(documents.ids_with_prefix("").unwrap(), vec![String::new()]);
    // The dictionary: the empty key likewise.
    let dictionary = db.dictionary().unwrap();
    assert_eq!(dictionary.get::<u32>("").unwrap(), None);
    dictionary.set("", &9u32).unwrap();
    dictionary.flush().unwrap();
    assert_eq!(dictionary.get::<u32>("").unwrap(), Some(9));
    // Raw keyspaces store keys of 1 to 511 bytes: the empty key reads as absent (as a 512-byte
    // key does), and writing or deleting it is `KeySize`.
    let raw = db.keyspace("raw").unwrap();
    for key in [&b""[..], &[1u8; 512][..]] {
        assert!(db.read(|tx| Ok(tx.get(&raw, key)?.is_none())).unwrap());
        assert!(matches!(db.write(|tx| tx.put(&raw, key, b"v")), Err(Error::KeySize { .. })));
        assert!(matches!(db.write(|tx| tx.delete(&raw, key)), Err(Error::KeySize { .. })));
        assert!(matches!(db.write(|tx| tx.insert_new(&raw, key, b"v")), Err(Error::KeySize { .. })));
    }
    drop((labels, documents, dictionary));
    // And after a reopen, everything written under an empty key is still there.
    let path = db.path().to_owned();
    drop(db); // (a background thread may hold a handle for a moment: open waits for it)
    let db = Db::open(&path).unwrap();
    assert_eq!(db.collection::<Label>().unwrap().get(&db, &"".to_owned()).unwrap().map(|l| l.colour), Some(7));
    assert_eq!(db.documents("docs").unwrap().document::<Note>("").get().unwrap(), Some(Note { n: 5 }));
    assert_eq!(db.dictionary().unwrap().get::<u32>("").unwrap(), Some(9));
}

// ---- depth -------------------------------------------------------------------------------

#[derive(Serialize, Deserialize, Record, Debug, PartialEq)]
#[record(name = "tasks")]
struct Task {
    #[record(key)]
    id: u32,
    #[record(index)]
    priority: i32,
}

/// `priority >= 0` and-ed with itself: `links` `.and` calls, `links + 2` levels deep.
fn chain(links: usize) -> tessera::query::Expr {
    let mut expr = Task::priority().ge(0);
    for _ in 0..links {
        expr = expr.and(Task::priority().ge(0));
    }
    expr
}

#[test]
fn a_predicate_built_from_100_000_ands_is_a_typed_error_not_a_stack_overflow() {
    let (_dir, db) = open();
    let tasks = db.collection::<Task>().unwrap();
    db.write(|tx| tasks.insert(tx, &Task { id: 1, priority: 3 }).map(|_| ())).unwrap();
    let query = tasks.filter(chain(100_000));
    for result in [query.count(&db).map(|_| ()), query.fetch(&db).map(|_| ()), query.explain().map(|_| ()), query.exists(&db).map(|_| ())] {
        match result {
            Err(Error::QueryTooDeep { collection, depth_max }) => {
                assert_eq!((collection.as_str(), depth_max), ("tasks", tessera::query::EXPR_DEPTH_MAX));
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(matches!(tasks.subscribe_query(&query), Err(Error::QueryTooDeep { .. })));
    assert!(matches!(db.write(|tx| tasks.delete_where(tx, &query)), Err(Error::QueryTooDeep { .. })));
    drop(query); // dropping the tree is iterative too
    drop(chain(1_000_000));
}

#[test]
fn a_predicate_at_the_depth_limit_runs() {
    let (_dir, db) = open();
    let tasks = db.collection::<Task>().unwrap();
    db.write(|tx| tasks.insert(tx, &Task { id: 1, priority: 3 }).map(|_| ())).unwrap();
    // Each `ge` is two levels (the comparison and its operands): 126 links give 128 levels.
    let deepest = tessera::query::EXPR_DEPTH_MAX - 2;
    let query = tasks.filter(chain(deepest));
    assert_eq!(query.count(&db).unwrap(), 1);
    assert_eq!(query.fetch(&db).unwrap().len(), 1);
    let mut live = tasks.subscribe_query(&query).unwrap();
    assert_eq!(live.next().and_then(tessera::live::Event::initial).expect("the current result").len(), 1);
    assert!(query.explain().unwrap().filter.is_some());
    let too_deep = tasks.filter(chain(deepest + 1));
    assert!(matches!(too_deep.count(&db), Err(Error::QueryTooDeep { .. })));
    // The text syntax has the same limit: a long chain of `and`s needs no parentheses.
    let text = vec!["priority >= 0"; deepest + 1].join(" and ");
    assert_eq!(tasks.filter_text(&text).unwrap().count(&db).unwrap(), 1);
    let text = vec!["priority >= 0"; deepest + 2].join(" and ");
    assert!(matches!(tasks.filter_text(&text), Err(Error::Query(_))));
}

#[test]
fn a_field_path_of_100_000_steps_is_an_unknown_field() {
    let (_dir, db) = open();
    let tasks = db.collection::<Task>().unwrap();
    let path = vec!["priority"; 100_000].join(".");
    let query = tasks.filter(tessera::query::field(&path).eq(1));
    assert!(matches!(query.count(&db), Err(Error::Query(tessera::query::QueryError::UnknownField { .. }))));
}

// ---- hash flooding -----------------------------------------------------------------------

/// `count` distinct 520-byte ASCII keys that all share one `key_hash_v1` (the unkeyed hash
/// that placed long dictionary keys up to storage format 4; format 5's keyed hash spreads
/// them), crafted in their first two 8-byte words: the state after them is the
/// same for every key, and the 504 bytes after them are too. Each key takes about 3,000
/// tries of a multiply.
fn colliding_keys(count: usize) -> Vec<String> {
    const MULTIPLIER: u64 = 0x517c_c1b7_2722_0a95;
    const KEY_LEN: usize = 520;
    let suffix = "f".repeat(KEY_LEN - 16);
    let start = (KEY_LEN as u64).rotate_left(5);
    // The value both words must bring the state to, before the multiply.
    let target = 0x2b2b_2b2b_2b2b_2b2b_u64;
    let printable = |word: u64| word.to_le_bytes().iter().all(|byte| (0x21..0x7f).contains(byte));
    let mut keys = Vec::with_capacity(count);
    let mut counter = 0u64;
    while keys.len() < count {
        // The first word: `counter` in base 94, as printable ASCII.
        let mut first = [0u8; 8];
        let mut rest = counter;
        for byte in &mut first {
            *byte = 0x21 + (rest % 94) as u8;
            rest /= 94;
        }
        counter += 1;
        let first = u64::from_le_bytes(first);
        let state = (start ^ first).wrapping_mul(MULTIPLIER);
        let second = state.rotate_left(5) ^ target;
        if printable(second) {
            let mut key = Vec::with_capacity(KEY_LEN);
            key.extend_from_slice(&first.to_le_bytes());
            key.extend_from_slice(&second.to_le_bytes());
            key.extend_from_slice(suffix.as_bytes());
            keys.push(String::from_utf8(key).expect("ASCII"));
        }
    }
    keys
}

#[test]
fn ten_thousand_colliding_long_keys_keep_every_acknowledged_write() {
    let keys = colliding_keys(10_000);
    let hash = tessera::value::layout::key_hash_v1(keys[0].as_bytes());
    assert!(keys.iter().all(|key| tessera::value::layout::key_hash_v1(key.as_bytes()) == hash), "one hash");
    assert_eq!(keys.iter().collect::<std::collections::BTreeSet<_>>().len(), keys.len(), "distinct");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flood.tessera");
    {
        let db = Db::open(&path).unwrap();
        let dictionary = db.dictionary().unwrap();
        for (index, key) in keys.iter().enumerate() {
            dictionary.set(key, &(index as u32)).unwrap();
            if index % 2_500 == 2_499 {
                dictionary.flush().unwrap(); // some floods arrive in several saves
            }
        }
        // A transaction's writes take the same path as the flusher's.
        db.write(|tx| tx.dictionary(&dictionary).set(&keys[0], &u32::MAX)).unwrap();
        dictionary.close().unwrap();
        db.close().unwrap();
    }
    {
        let db = Db::open(&path).unwrap();
        let dictionary = db.dictionary().unwrap();
        assert_eq!(dictionary.get::<u32>(&keys[0]).unwrap(), Some(u32::MAX));
        for (index, key) in keys.iter().enumerate().skip(1) {
            assert_eq!(dictionary.get::<u32>(key).unwrap(), Some(index as u32), "key {index}");
        }
        // An ordinary key set after the flood saves.
        dictionary.set("ordinary", &7u32).unwrap();
        dictionary.close().unwrap();
        assert!(db.check().unwrap().problems.is_empty());
    }
    let db = Db::open(&path).unwrap();
    let dictionary = db.dictionary().unwrap();
    assert_eq!(dictionary.get::<u32>("ordinary").unwrap(), Some(7));
    assert_eq!(dictionary.keys().unwrap().len(), keys.len() + 1);
}

#[test]
fn a_dictionary_value_that_can_never_be_saved_is_refused_at_set() {
    // Before, `set` took it, every background save then failed (MapFull), and the values set
    // after it were never saved either.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ceiling.tessera");
    let ceiling_bytes = 8u64 << 20;
    let options = tessera::DbOptions { map_size_initial_bytes: 1 << 20, map_size_max_bytes: ceiling_bytes, ..Default::default() };
    {
        let db = Db::open_with(&path, options.clone()).unwrap();
        let dictionary = db.dictionary().unwrap();
        let huge = "x".repeat(ceiling_bytes as usize + 1);
        match dictionary.set("huge", &huge) {
            Err(Error::LimitExceeded { limit, .. }) => assert_eq!(limit, ceiling_bytes),
            other => panic!("{other:?}"),
        }
        assert_eq!(dictionary.get::<u8>("huge").unwrap(), None, "nothing was set");
        assert!(matches!(db.write(|tx| tx.dictionary(&dictionary).set("huge", &huge)), Err(Error::LimitExceeded { .. })));
        dictionary.set("ordinary", &7u32).unwrap();
        dictionary.close().unwrap();
    }
    let db = Db::open_with(&path, options).unwrap();
    assert_eq!(db.dictionary().unwrap().get::<u32>("ordinary").unwrap(), Some(7));
}
