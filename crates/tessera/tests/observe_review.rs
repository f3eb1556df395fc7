//! Review of live observation of documents, fields and dictionary keys (`Document::observe`,
//! `Document::observe_field`, `FieldHandle`, `Dictionary::subscribe`).
//!
//! Tests marked "failed before its fix" showed a defect (2026-12-01); the others check behaviour that was
//! correct and are kept as cheap guards.

use serde::{Deserialize, Serialize};
use std::process::Command;
use std::time::Duration;
use tessera::live::{Event, SubscriptionEnd};
use tessera::{Db, DbOptions, DocumentsOptions, Error};

const WAIT: Duration = Duration::from_secs(10);
const QUIET: Duration = Duration::from_millis(150);

fn open() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("observe.tessera")).unwrap();
    (dir, db)
}

fn deep() -> DocumentsOptions {
    DocumentsOptions { deep: true, ..Default::default() }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Profile {
    name: String,
    age: u32,
}

fn ada() -> Profile {
    Profile { name: "Ada".into(), age: 36 }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Inner {
    b: u32,
    #[serde(default)]
    c: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Outer {
    name: String,
    a: Inner,
}

fn outer() -> Outer {
    Outer { name: "x".into(), a: Inner { b: 1, c: Some(5) } }
}

fn initial<T: std::fmt::Debug>(event: Option<Event<Option<T>, Option<T>>>) -> Option<T> {
    match event {
        Some(Event::Initial(value)) => value,
        other => panic!("expected Initial, got {other:?}"),
    }
}

fn changed<T: std::fmt::Debug>(event: Option<Event<Option<T>, Option<T>>>) -> Option<T> {
    match event {
        Some(Event::Changed(value)) => value,
        other => panic!("expected Changed, got {other:?}"),
    }
}

// ------------------------------------------------------------------------------------------
// Deep handles over what a plain handle stored
// ------------------------------------------------------------------------------------------

/// Failed before its fix. The module doc (documents/mod.rs:27) promises "A deep handle reads what a plain one
/// stored", and a deep `Document::get` does read a nested struct a plain handle stored as one
/// key. But a deep *field* handle (`field("a.b").get()`) and a deep `observe_field("a.b")`
/// look only for the key `a\0b` and its subtree, never at the ancestor key `a` that holds the
/// whole dict: both answer `None` (Ok) for a field that `get` reads as 1. Correct: the value
/// (1), as `Document::get` reads it, or a typed error naming the field; never `Ok(None)`.
#[test]
fn a_deep_field_handle_reads_a_nested_field_that_a_plain_handle_stored() {
    let (_dir, db) = open();
    db.documents("mixed").unwrap().document::<Outer>("d").set(&outer()).unwrap();
    let deep_doc = db.documents_with("mixed", deep()).unwrap().document::<Outer>("d");
    assert_eq!(deep_doc.get().unwrap(), Some(outer()), "the whole document reads through the deep handle");
    let through_handle = deep_doc.field::<u32>("a.b").get();
    let observed = deep_doc.observe_field::<u32>("a.b").map(|live| live.recv_timeout(WAIT));
    let handle_ok = matches!(through_handle, Ok(Some(1)) | Err(_));
    let observed_ok = matches!(observed, Ok(Some(Event::Initial(Some(1)))) | Err(_));
    assert!(
        handle_ok && observed_ok,
        "get reads a.b = 1; the deep field handle read {through_handle:?}, the deep field observer started at {observed:?}"
    );
}

/// Failed before its fix. `update_field("a.b", 2)` through a deep handle on a document whose `a` a plain
/// handle stored as one key deletes that key (documents/mod.rs put_field: "a value stored as a
/// leaf where the path needs a dict"), so the sibling `a.c = Some(5)` is silently lost: the
/// write returns Ok and `get` reads `c: None`, and an observer of the document sees the
/// sibling vanish. Correct: the siblings kept (`a = {b: 2, c: 5}`), or the write refused with
/// a typed error naming the field; never Ok while dropping data.
#[test]
fn a_deep_update_of_one_leaf_keeps_the_siblings_a_plain_handle_stored() {
    let (_dir, db) = open();
    db.documents("mixed").unwrap().document::<Outer>("d").set(&outer()).unwrap();
    let deep_doc = db.documents_with("mixed", deep()).unwrap().document::<Outer>("d");
    let live = deep_doc.observe().unwrap();
    assert_eq!(initial(live.recv_timeout(WAIT)), Some(outer()));
    match deep_doc.update_field("a.b", &2u32) {
        Err(_) => assert_eq!(deep_doc.get().unwrap(), Some(outer()), "refused: nothing written"),
        Ok(()) => {
            let expected = Outer { name: "x".into(), a: Inner { b: 2, c: Some(5) } };
            assert_eq!(deep_doc.get().unwrap(), Some(expected.clone()), "update_field returned Ok but lost the sibling a.c");
            assert_eq!(changed(live.recv_timeout(WAIT)), Some(expected));
        }
    }
}

// ------------------------------------------------------------------------------------------
// Field names the document's type does not have
// ------------------------------------------------------------------------------------------

/// Failed before its fix. `update_field("agee", ..)` is `Error::UnknownField` (the type has no such field), but
/// `observe_field("agee")` on the same `Document<Profile>` subscribes happily and reports
/// `Initial(None)` forever (and `field("agee").get()` reads `Ok(None)`): a misspelt name is
/// indistinguishable from an absent field, a silent wrong answer. Likewise a deep name with an
/// empty segment (`"age."`), which no write can ever store. Correct: `Error::UnknownField`
/// (the probe `update_field` runs, `probe::check_field`, already answers this for a name).
#[test]
fn observing_a_field_the_document_type_does_not_have_is_an_error() {
    let (_dir, db) = open();
    let doc = db.documents("profiles").unwrap().document::<Profile>("ada");
    doc.set(&ada()).unwrap();
    assert!(matches!(doc.update_field("agee", &37u32), Err(Error::UnknownField { .. })), "writes refuse the name");
    let observed = doc.observe_field::<u32>("agee").map(|live| live.recv_timeout(WAIT));
    assert!(matches!(observed, Err(Error::UnknownField { .. })), "observe_field of an unknown name: {observed:?}");
    let read = doc.field::<u32>("agee").get();
    assert!(matches!(read, Err(Error::UnknownField { .. })), "field handle get of an unknown name: {read:?}");
    let deep_doc = db.documents_with("deep_profiles", deep()).unwrap().document::<Profile>("ada");
    deep_doc.set(&ada()).unwrap();
    let observed = deep_doc.observe_field::<u32>("age.").map(|live| live.recv_timeout(WAIT));
    assert!(observed.is_err(), "a deep path with an empty segment: {observed:?}");
}

// ------------------------------------------------------------------------------------------
// Checked and correct (PASS)
// ------------------------------------------------------------------------------------------

/// PASS. A write block that writes the document, a field and a dictionary key and then returns
/// Err is rolled back: no observer sees any of it.
#[test]
fn a_rolled_back_write_block_reaches_no_observer() {
    let (_dir, db) = open();
    let doc = db.documents("profiles").unwrap().document::<Profile>("ada");
    doc.set(&ada()).unwrap();
    let dict = db.dictionary().unwrap();
    let whole = doc.observe().unwrap();
    let ages = doc.observe_field::<u32>("age").unwrap();
    let key = dict.subscribe::<u32>("k").unwrap();
    assert_eq!(initial(whole.recv_timeout(WAIT)), Some(ada()));
    assert_eq!(initial(ages.recv_timeout(WAIT)), Some(36));
    assert_eq!(initial(key.recv_timeout(WAIT)), None);
    let result: tessera::Result<()> = db.write(|tx| {
        doc.update_field_in(tx, "age", &99u32)?;
        tx.dictionary(&dict).set("k", &99u32)?;
        Err(Error::NotFound { collection: "caller".into(), key: "gives up".into() })
    });
    assert!(result.is_err());
    doc.update_field("name", "Ada L.").unwrap(); // a marker commit
    dict.set("k", &1u32).unwrap();
    dict.flush().unwrap();
    assert_eq!(changed(whole.recv_timeout(WAIT)), Some(Profile { name: "Ada L.".into(), age: 36 }));
    assert!(ages.recv_timeout(QUIET).is_none(), "age never changed");
    assert_eq!(changed(key.recv_timeout(WAIT)), Some(1));
    assert_eq!(dict.get::<u32>("k").unwrap(), Some(1));
}

/// PASS. Grouped writes: a closure that writes the document and then fails is rolled back and
/// the rest of its group runs again without it; no observer ever sees its values.
#[test]
fn a_failed_grouped_closure_reaches_no_observer() {
    let (_dir, db) = open();
    let docs = db.documents("grouped").unwrap();
    let doc = docs.document::<Profile>("g");
    doc.set(&ada()).unwrap();
    let live = doc.observe().unwrap();
    assert_eq!(initial(live.recv_timeout(WAIT)), Some(ada()));
    let rounds = 200u32;
    std::thread::scope(|scope| {
        for good in [true, false] {
            let (db, doc) = (db.clone(), doc.clone());
            scope.spawn(move || {
                for n in 0..rounds {
                    let doc = doc.clone();
                    let result = db.write_grouped(move |tx| {
                        let name = if good { format!("good{n}") } else { format!("bad{n}") };
                        doc.set_in(tx, &Profile { name, age: n })?;
                        if good { Ok(()) } else { Err(Error::NotFound { collection: "caller".into(), key: "no".into() }) }
                    });
                    assert_eq!(result.is_ok(), good);
                }
            });
        }
    });
    doc.update_field("name", "end").unwrap();
    loop {
        let value = changed(live.recv_timeout(WAIT)).expect("never deleted");
        assert!(!value.name.starts_with("bad"), "an observer saw a rolled-back write: {value:?}");
        if value.name == "end" {
            break;
        }
    }
}

/// PASS. `delete` then `set` of one document (two commits and one commit with both): the
/// document observer sees `None` then the new value; the field observer too.
#[test]
fn delete_then_set_is_seen_in_order() {
    let (_dir, db) = open();
    let doc = db.documents("profiles").unwrap().document::<Profile>("ada");
    doc.set(&ada()).unwrap();
    let whole = doc.observe().unwrap();
    let ages = doc.observe_field::<u32>("age").unwrap();
    assert_eq!(initial(whole.recv_timeout(WAIT)), Some(ada()));
    assert_eq!(initial(ages.recv_timeout(WAIT)), Some(36));
    doc.delete().unwrap();
    doc.set(&Profile { age: 40, ..ada() }).unwrap();
    db.write(|tx| {
        doc.delete_in(tx)?;
        doc.set_in(tx, &Profile { age: 41, ..ada() })
    })
    .unwrap();
    assert_eq!(changed(whole.recv_timeout(WAIT)), None);
    assert_eq!(changed(whole.recv_timeout(WAIT)).map(|p| p.age), Some(40));
    assert_eq!(changed(whole.recv_timeout(WAIT)).map(|p| p.age), Some(41));
    assert_eq!(changed(ages.recv_timeout(WAIT)), None);
    assert_eq!(changed(ages.recv_timeout(WAIT)), Some(40));
    assert_eq!(changed(ages.recv_timeout(WAIT)), Some(41));
    assert!(ages.recv_timeout(QUIET).is_none());
}

/// PASS. Field names that are prefixes of one another (`a`, `ab`, `a.b` in a plain document)
/// and ids that are prefixes (`doc`, `doc2`): each observer sees only its own field.
#[test]
fn prefix_names_and_ids_feed_only_their_own_observers() {
    let (_dir, db) = open();
    type Map = std::collections::BTreeMap<String, u32>;
    let docs = db.documents("maps").unwrap();
    let (doc, doc2) = (docs.document::<Map>("doc"), docs.document::<Map>("doc2"));
    doc.set(&[("a".to_owned(), 1), ("ab".to_owned(), 2), ("a.b".to_owned(), 3)].into()).unwrap();
    let a = doc.observe_field::<u32>("a").unwrap();
    let ab = doc.observe_field::<u32>("ab").unwrap();
    let dotted = doc.observe_field::<u32>("a.b").unwrap();
    let whole = doc.observe().unwrap();
    assert_eq!(initial(a.recv_timeout(WAIT)), Some(1));
    assert_eq!(initial(ab.recv_timeout(WAIT)), Some(2));
    assert_eq!(initial(dotted.recv_timeout(WAIT)), Some(3));
    assert!(initial(whole.recv_timeout(WAIT)).is_some());
    doc2.set(&[("a".to_owned(), 9)].into()).unwrap();
    doc.update_field("ab", &20u32).unwrap();
    doc.update_field("a.b", &30u32).unwrap();
    assert_eq!(changed(ab.recv_timeout(WAIT)), Some(20));
    assert_eq!(changed(dotted.recv_timeout(WAIT)), Some(30));
    assert!(a.recv_timeout(QUIET).is_none(), "`a` never changed");
    assert_eq!(changed(whole.recv_timeout(WAIT)).unwrap()["ab"], 20, "doc2's commit is not doc's");
}

/// PASS. A stored value of another type than the observer asks for is a typed error, at
/// subscription or as the subscription's end; never a default.
#[test]
fn a_field_of_another_type_is_a_typed_error() {
    let (_dir, db) = open();
    type Loose = std::collections::BTreeMap<String, serde_json::Value>;
    let docs = db.documents("loose").unwrap();
    let loose = docs.document::<Loose>("d");
    loose.set(&[("n".to_owned(), serde_json::json!(300))].into()).unwrap();
    assert!(matches!(loose.observe_field::<u8>("n"), Err(Error::DocumentField { .. })), "300 is no u8");
    let live = loose.observe_field::<u32>("n").unwrap();
    assert_eq!(initial(live.recv_timeout(WAIT)), Some(300));
    loose.update_field("n", "three hundred").unwrap();
    assert!(matches!(live.recv_timeout(WAIT), Some(Event::Closed(SubscriptionEnd::Failed(_)))));
    let dict = db.dictionary().unwrap();
    dict.set("k", &-1i32).unwrap();
    assert!(matches!(dict.subscribe::<u32>("k"), Err(Error::DictionaryValue { .. })));
}

/// PASS. Observers of every kind end with `Closed(DatabaseClosed)` when the last handle goes,
/// with no hang, including a dictionary subscription whose dictionary had pending writes.
#[test]
fn observers_end_when_the_database_closes() {
    let (_dir, db) = open();
    let doc = db.documents("profiles").unwrap().document::<Profile>("ada");
    doc.set(&ada()).unwrap();
    let dict =
        db.dictionary_with("slow", tessera::DictionaryOptions { flush_interval: Duration::from_secs(60), ..Default::default() }).unwrap();
    let whole = doc.observe().unwrap();
    let ages = doc.observe_field::<u32>("age").unwrap();
    let key = dict.subscribe::<u32>("k").unwrap();
    dict.set("k", &7u32).unwrap(); // pending: saved by the drop
    drop((doc, dict));
    db.close().unwrap();
    assert_eq!(initial(key.recv_timeout(WAIT)), None);
    assert_eq!(changed(key.recv_timeout(WAIT)), Some(7), "the drop's save is delivered");
    for closed in [whole.recv_timeout(WAIT).map(|e| e.is_closed()), ages.recv_timeout(WAIT).map(|e| e.is_closed())] {
        assert_eq!(closed, Some(false), "Initial first");
    }
    assert!(matches!(whole.recv_timeout(WAIT), Some(Event::Closed(SubscriptionEnd::DatabaseClosed))));
    assert!(matches!(ages.recv_timeout(WAIT), Some(Event::Closed(SubscriptionEnd::DatabaseClosed))));
    assert!(matches!(key.recv_timeout(WAIT), Some(Event::Closed(SubscriptionEnd::DatabaseClosed))));
}

// ------------------------------------------------------------------------------------------
// Another process
// ------------------------------------------------------------------------------------------

const CHILD_ROLE: &str = "TESSERA_OBSERVE_REVIEW_ROLE";
const CHILD_PATH: &str = "TESSERA_OBSERVE_REVIEW_PATH";

fn notify_options() -> DbOptions {
    DbOptions { durable_feed: true, cross_process_notify: true, ..DbOptions::default() }
}

fn run_child(role: &str, path: &std::path::Path) {
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["observe_review_child", "--exact", "--ignored", "--test-threads=1", "--nocapture"])
        .env(CHILD_ROLE, role)
        .env(CHILD_PATH, path)
        .status()
        .unwrap();
    assert!(status.success(), "the child process failed: {status}");
}

#[test]
#[ignore = "run by the tests of this file as a child process"]
fn observe_review_child() {
    let role = std::env::var(CHILD_ROLE).expect("run by a parent test");
    let path = std::env::var(CHILD_PATH).expect("run by a parent test");
    let db = Db::open_with(&path, notify_options()).unwrap();
    match role.as_str() {
        "dict" => {
            let dict = db.dictionary().unwrap();
            dict.set("k", &2u32).unwrap();
            dict.close().unwrap();
        }
        "doc" => {
            let doc = db.documents("profiles").unwrap().document::<Profile>("ada");
            doc.update_field("age", &50u32).unwrap();
        }
        other => panic!("unknown role {other}"),
    }
    db.close().unwrap();
}

/// Failed before its fix. With cross-process notification, another process's dictionary write reaches this
/// process's key subscription (`Changed(Some(2))`), but this process's dictionary cache is
/// never told: `get` keeps answering the cached 1 (the subscription doc, dictionary/mod.rs
/// `subscribe`, calls its value "what `Dictionary::get` reads"), and a `set` back to 1 is
/// skipped as "equal to the cached one", so storage keeps 2 while `get` says 1. Nothing
/// documents the dictionary as single-process. Correct: the cache drops (or updates) entries
/// that another process's commits change (the engine already receives those batches), or the
/// dictionary refuses to open on a file shared across processes.
#[test]
fn another_processs_dictionary_write_reaches_get_as_well_as_the_subscription() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.tessera");
    let db = Db::open_with(&path, notify_options()).unwrap();
    let dict = db.dictionary().unwrap();
    dict.set("k", &1u32).unwrap();
    dict.flush().unwrap();
    assert_eq!(dict.get::<u32>("k").unwrap(), Some(1));
    let live = dict.subscribe::<u32>("k").unwrap();
    assert_eq!(initial(live.recv_timeout(WAIT)), Some(1));
    run_child("dict", &path);
    assert_eq!(changed(live.recv_timeout(Duration::from_secs(20))), Some(2), "the subscription sees the other process's write");
    let read = dict.get::<u32>("k").unwrap();
    dict.set("k", &1u32).unwrap();
    dict.flush().unwrap();
    let after_set_back = live.recv_timeout(Duration::from_secs(2));
    drop((live, dict));
    db.close().unwrap();
    let reopened = Db::open_with(&path, notify_options()).unwrap();
    let stored = reopened.dictionary().unwrap().get::<u32>("k").unwrap();
    assert!(
        read == Some(2) && matches!(after_set_back, Some(Event::Changed(Some(1)))) && stored == Some(1),
        "after the subscription reported 2: get read {read:?}; set(\"k\", 1) then flush delivered {after_set_back:?} \
         after a reopen get reads {stored:?}, not the 1 set last"
    );
}

/// PASS. With cross-process notification, another process's `update_field` reaches this
/// process's document and field observers.
#[test]
fn another_processs_document_write_reaches_the_observers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.tessera");
    let db = Db::open_with(&path, notify_options()).unwrap();
    let doc = db.documents("profiles").unwrap().document::<Profile>("ada");
    doc.set(&ada()).unwrap();
    let whole = doc.observe().unwrap();
    let ages = doc.observe_field::<u32>("age").unwrap();
    assert_eq!(initial(whole.recv_timeout(WAIT)), Some(ada()));
    assert_eq!(initial(ages.recv_timeout(WAIT)), Some(36));
    run_child("doc", &path);
    assert_eq!(changed(ages.recv_timeout(Duration::from_secs(20))), Some(50));
    assert_eq!(changed(whole.recv_timeout(Duration::from_secs(20))).map(|p| p.age), Some(50));
    assert_eq!(doc.get().unwrap().map(|p| p.age), Some(50));
}
