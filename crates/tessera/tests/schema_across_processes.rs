//! A collection handle kept while another process changes the collection's schema: its writes
//! and reads are refused with `SchemaMismatch`, never made by the old schema. Before, a handle
//! opened without an index went on inserting after another process had added one: the new
//! index lacked those records, and queries through it silently missed them.

use std::process::Command;
use tessera::{Db, Error};

const CHILD_PATH: &str = "TESSERA_SCHEMA_CHILD_PATH";
const CHILD_MODE: &str = "TESSERA_SCHEMA_CHILD_MODE";

mod v1 {
    use tessera::collection::Record;
    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "tasks")]
    pub struct Task {
        #[record(key)]
        pub id: u32,
        pub priority: i32,
    }
}

mod v2 {
    use tessera::collection::Record;
    /// The same records, with an index on `priority`.
    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "tasks")]
    pub struct Task {
        #[record(key)]
        pub id: u32,
        #[record(index)]
        pub priority: i32,
    }
}

mod v3 {
    use tessera::collection::Record;
    /// The same records with a field more: another shape.
    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "tasks")]
    pub struct Task {
        #[record(key)]
        pub id: u32,
        pub priority: i32,
        pub note: Option<String>,
    }
}

#[test]
#[ignore = "run by the tests below as a child process"]
fn schema_child() {
    let path = std::env::var(CHILD_PATH).expect("run by a parent test");
    let db = Db::open(&path).unwrap();
    match std::env::var(CHILD_MODE).unwrap().as_str() {
        // Commits that leave the collection's schema as it is.
        "unrelated" => {
            let other = db.keyspace("other").unwrap();
            let tasks = db.collection::<v1::Task>().unwrap();
            db.write(|tx| {
                tx.put(&other, b"k", b"v")?;
                tasks.insert(tx, &v1::Task { id: 100, priority: 1 }).map(drop)
            })
            .unwrap();
        }
        // Opens the collection with an index: a schema change.
        "add_index" => {
            let tasks = db.collection::<v2::Task>().unwrap();
            db.write(|tx| tasks.insert(tx, &v2::Task { id: 200, priority: 7 }).map(drop)).unwrap();
        }
        // Opens the collection with another shape, and writes a record of it.
        "add_field" => {
            let tasks = db.collection::<v3::Task>().unwrap();
            db.write(|tx| tasks.update(tx, &1, |task| task.note = Some("from the child".into())).map(drop)).unwrap();
        }
        mode => panic!("unknown mode {mode}"),
    }
}

fn run_child(path: &std::path::Path, mode: &str) {
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["schema_child", "--exact", "--ignored", "--test-threads=1"])
        .env(CHILD_PATH, path)
        .env(CHILD_MODE, mode)
        .status()
        .unwrap();
    assert!(status.success(), "child {mode}");
}

/// A database in a temporary directory with collection `tasks` (as `v1::Task`) holding task 1.
fn one_task() -> (tempfile::TempDir, std::path::PathBuf, Db, tessera::collection::Collection<v1::Task>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open(&path).unwrap();
    let tasks = db.collection::<v1::Task>().unwrap();
    db.write(|tx| tasks.insert(tx, &v1::Task { id: 1, priority: 5 }).map(drop)).unwrap();
    (dir, path, db, tasks)
}

fn is_changed_elsewhere<T: std::fmt::Debug>(result: &tessera::Result<T>) -> bool {
    matches!(result, Err(Error::SchemaMismatch { collection, reason }) if collection == "tasks" && reason.contains("another process"))
}

#[test]
fn another_processs_commits_that_keep_the_schema_leave_a_handle_working() {
    let (_dir, path, db, tasks) = one_task();
    run_child(&path, "unrelated");
    db.write(|tx| tasks.insert(tx, &v1::Task { id: 2, priority: 6 }).map(drop)).unwrap();
    assert_eq!(tasks.get(&db, &100).unwrap(), Some(v1::Task { id: 100, priority: 1 }));
    assert_eq!(tasks.all().count(&db).unwrap(), 3);
}

#[test]
fn a_handle_whose_collection_another_process_gave_an_index_refuses_to_write_or_read_by_its_old_schema() {
    let (_dir, path, db, tasks) = one_task();
    run_child(&path, "add_index");

    let insert = db.write(|tx| tasks.insert(tx, &v1::Task { id: 2, priority: 7 }));
    assert!(is_changed_elsewhere(&insert), "{insert:?}");
    let update = db.write(|tx| tasks.update(tx, &1, |task| task.priority = 9));
    assert!(is_changed_elsewhere(&update), "{update:?}");
    let delete = db.write(|tx| tasks.delete(tx, &1));
    assert!(is_changed_elsewhere(&delete), "{delete:?}");
    let fetched = tasks.filter(v1::Task::priority().eq(7)).fetch(&db);
    assert!(is_changed_elsewhere(&fetched), "{fetched:?}");
    // Reads by key use no index: still served.
    assert_eq!(tasks.get(&db, &1).unwrap(), Some(v1::Task { id: 1, priority: 5 }));

    // Nothing was written by the old schema: opened again, the index finds every record.
    let tasks = db.collection::<v2::Task>().unwrap();
    let mut ids: Vec<u32> = tasks.filter(v2::Task::priority().eq(7)).fetch(&db).unwrap().iter().map(|task| task.id).collect();
    ids.sort_unstable();
    assert_eq!(ids, [200]);
    db.write(|tx| tasks.insert(tx, &v2::Task { id: 2, priority: 7 }).map(drop)).unwrap();
    assert_eq!(tasks.filter(v2::Task::priority().eq(7)).count(&db).unwrap(), 2);
}

#[test]
fn a_handle_whose_collection_another_process_gave_another_shape_refuses_reads_by_key_too() {
    let (_dir, path, db, tasks) = one_task();
    run_child(&path, "add_field");
    // The old type would read record 1 without the field the new shape gave it.
    assert!(is_changed_elsewhere(&tasks.get(&db, &1)));
    let update = db.write(|tx| tasks.update(tx, &1, |task| task.priority = 6));
    assert!(is_changed_elsewhere(&update), "{update:?}");
    let tasks = db.collection::<v3::Task>().unwrap();
    assert_eq!(tasks.get(&db, &1).unwrap().and_then(|task| task.note).as_deref(), Some("from the child"));
}

/// Every read by key refuses a shape another process changed, as `get` does: `get_ref` read the
/// record in place by the old shape, and a dynamic handle read it by its old stored shape, both
/// returning Ok.
#[test]
fn every_read_by_key_refuses_a_shape_another_process_changed() {
    let (_dir, path, db, tasks) = one_task();
    let dynamic = db.dyn_collection("tasks").unwrap();
    let key = tessera::value::from_json(b"1").unwrap();
    let key = tessera::value::Doc::from_untrusted(&key).unwrap();
    assert!(dynamic.get(&db, key.root()).unwrap().is_some());
    run_child(&path, "add_field");
    assert!(is_changed_elsewhere(&tasks.get(&db, &1)));
    let tx = db.read_txn().unwrap();
    let by_ref = tasks.get_ref(&tx, &1).map(|found| found.is_some());
    assert!(is_changed_elsewhere(&by_ref), "get_ref: {by_ref:?}");
    drop(tx);
    let dyn_get = dynamic.get(&db, key.root()).map(|record| format!("{record:?}"));
    assert!(is_changed_elsewhere(&dyn_get), "dynamic get: {dyn_get:?}");
}

/// A read in a snapshot older than the handle (taken before another process changed the
/// schema, the handle opened after) does not mark the handle superseded: before, one such read
/// made every later write through the handle fail with "another process changed its indexes",
/// although the schema was the handle's all along.
#[test]
fn a_read_in_a_snapshot_older_than_the_handle_does_not_supersede_it() {
    let (_dir, path, db, _v1) = one_task();
    let old = db.read_txn().unwrap();
    run_child(&path, "add_index");
    let tasks = db.collection::<v2::Task>().unwrap();
    let _ = tasks.get(&old, &1); // the snapshot has the schema before the index
    let _ = tasks.filter(v2::Task::priority().eq(7)).fetch(&old);
    drop(old);
    db.write(|tx| tasks.insert(tx, &v2::Task { id: 2, priority: 7 }).map(drop)).unwrap();
    assert_eq!(tasks.filter(v2::Task::priority().eq(7)).count(&db).unwrap(), 2);
}

#[test]
fn another_processs_new_shape_ends_live_subscriptions_and_a_new_index_does_not() {
    // Before, a live subscription of this process went on after another process had changed
    // the collection's shape: it decoded the child's records by the old type and delivered
    // them as changes, while every read and write through the same handle was refused.
    use std::time::Duration;
    use tessera::live::{Event, SubscriptionEnd};
    let wait = Duration::from_secs(10);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let options = tessera::DbOptions { durable_feed: true, cross_process_notify: true, ..tessera::DbOptions::default() };
    let db = Db::open_with(&path, options).unwrap();
    let tasks = db.collection::<v1::Task>().unwrap();
    db.write(|tx| tasks.insert(tx, &v1::Task { id: 1, priority: 5 }).map(drop)).unwrap();
    let query = tasks.subscribe_query(&tasks.filter(v1::Task::priority().gt(0))).unwrap();
    assert!(matches!(query.recv_timeout(wait), Some(Event::Initial(result)) if result.len() == 1));
    let object = tasks.subscribe_object(&1u32).unwrap();
    assert!(matches!(object.recv_timeout(wait), Some(Event::Initial(Some(_)))));
    run_child(&path, "add_index");
    match query.recv_timeout(wait) {
        Some(Event::Changed(change)) => assert_eq!(change.result.len(), 2, "the child's task 200"),
        other => panic!("a new index elsewhere leaves the subscription following: {other:?}"),
    }
    run_child(&path, "add_field");
    let ended = |end: SubscriptionEnd, what: &str| match end {
        SubscriptionEnd::Failed(error) => {
            assert!(matches!(&*error, Error::SchemaMismatch { collection, .. } if collection == "tasks"), "{what}: {error}")
        }
        other => panic!("{what}: expected Failed(SchemaMismatch), got {other:?}"),
    };
    match query.recv_timeout(wait) {
        Some(Event::Closed(end)) => ended(end, "query"),
        other => panic!("query: expected Closed, got {other:?}"),
    }
    match object.recv_timeout(wait) {
        Some(Event::Closed(end)) => ended(end, "object"),
        other => panic!("object: expected Closed, got {other:?}"),
    }
}

#[test]
fn a_dynamic_handle_read_in_a_snapshot_older_than_it_is_not_superseded() {
    // A dynamic handle did not know the commit its schema was read at: a read through a
    // snapshot kept from before another process's new index superseded it for good, and
    // every later read and write through it was refused although its schema was current.
    let (_dir, path, db, v1) = one_task();
    drop((v1, db));
    let db = Db::open(&path).unwrap(); // no typed state for the dynamic handle to share
    let old = db.read_txn().unwrap();
    run_child(&path, "add_index");
    let tasks = db.dyn_collection("tasks").unwrap();
    let in_old = tasks.filter_text("priority == 7").unwrap().count(&old);
    assert!(matches!(in_old, Err(Error::SchemaMismatch { .. })), "the old snapshot has another index list: {in_old:?}");
    drop(old);
    assert_eq!(tasks.filter_text("priority == 7").unwrap().count(&db).unwrap(), 1, "the child's task 200");
    db.write(|tx| tasks.insert_json(tx, br#"{"id": 2, "priority": 7}"#).map(drop)).unwrap();
    assert_eq!(tasks.filter_text("priority == 7").unwrap().count(&db).unwrap(), 2);
}
