//! Dynamic collections: records read and written without the Rust type, through the typed
//! write path, with writes checked against the stored schema.

use serde::{Deserialize, Serialize};
use tessera::collection::{DynSchema, Embed, KeyKind, Record, TypeDesc, WriteOutcome};
use tessera::value::{Doc, from_json};
use tessera::{Db, DbOptions, Error};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Record)]
#[record(name = "tasks", version = 1)]
struct Task {
    #[record(key)]
    id: u32,
    #[record(unique)]
    title: String,
    #[record(index)]
    priority: i32,
    due: Option<u32>,
    state: State,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Embed)]
enum State {
    Open,
    Done { note: String },
}

fn task(id: u32, title: &str) -> Task {
    Task { id, title: title.into(), priority: id as i32, due: None, state: State::Open }
}

fn open() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    (dir, db)
}

#[test]
fn typed_and_dynamic_handles_read_each_others_records() {
    let (_dir, db) = open();
    let typed = db.collection::<Task>().unwrap();
    db.write(|tx| typed.insert(tx, &task(1, "one"))).unwrap();
    let tasks = db.dyn_collection("tasks").unwrap();
    assert_eq!(tasks.schema().key_kinds, [KeyKind::U32], "learned from the stored key");
    let json = br#"{"id": 2, "title": "two", "priority": -4, "state": {"Done": {"note": "ok"}}}"#;
    assert_eq!(db.write(|tx| tasks.insert_json(tx, json)).unwrap(), WriteOutcome::Inserted);
    let two = typed.get(&db, &2u32).unwrap().unwrap();
    assert_eq!(two, Task { id: 2, title: "two".into(), priority: -4, due: None, state: State::Done { note: "ok".into() } });
    // The index was maintained: a typed query through it finds the record.
    assert_eq!(typed.filter(Task::priority().lt(0)).fetch(&db).unwrap(), vec![two.clone()]);
    // Written back through the typed handle, the bytes are the same: Unchanged.
    assert_eq!(db.write(|tx| typed.upsert(tx, &two)).unwrap(), WriteOutcome::Unchanged);
    let one = tasks.get_json(&db, "1").unwrap().unwrap();
    assert_eq!(one.to_json(), r#"{"id":1,"title":"one","priority":1,"due":null,"state":"Open"}"#);
    assert_eq!(tasks.filter_text("priority < 0").unwrap().count(&db).unwrap(), 1);
    assert!(db.check().unwrap().is_ok());
}

#[test]
fn a_record_that_disagrees_with_the_schema_is_refused_whole() {
    let (_dir, db) = open();
    let typed = db.collection::<Task>().unwrap();
    db.write(|tx| typed.insert(tx, &task(1, "one"))).unwrap();
    let tasks = db.dyn_collection("tasks").unwrap();
    let cases: [(&[u8], &str, &str); 7] = [
        (br#"{"id": 5, "title": "t", "priority": 3000000000, "state": "Open"}"#, "priority", "3000000000 is out of range for i32"),
        (br#"{"id": 5, "title": "t", "priority": 1, "due": -1, "state": "Open"}"#, "due", "-1 is out of range for u32"),
        (br#"{"id": 5, "title": "t", "priority": "high", "state": "Open"}"#, "priority", "expected an integer"),
        (br#"{"id": 5, "title": "t", "priority": 1}"#, "state", "missing"),
        (br#"{"title": "t", "priority": 1, "state": "Open"}"#, "id", "missing"),
        (br#"{"id": 5, "title": "t", "priority": 1, "state": {"Done": {"note": 3}}}"#, "state.Done.note", "expected a string"),
        (br#"{"id": -5, "title": "t", "priority": 1, "state": "Open"}"#, "id", "out of range for u32"),
    ];
    for (json, path, problem) in cases {
        let error = db.write(|tx| tasks.insert_json(tx, json)).unwrap_err();
        match &error {
            Error::SchemaViolation { collection, path: found, problem: message, .. } => {
                assert_eq!(collection, "tasks");
                assert_eq!(found, path, "{error}");
                assert!(message.contains(problem), "{error}");
            }
            other => panic!("{other}"),
        }
        assert!(error.to_string().contains("tasks"), "{error}");
    }
    let error = db.write(|tx| tasks.insert_json(tx, br#"{"id": 5, "title": 1, "priority": 1, "state": "Open"}"#)).unwrap_err();
    assert!(error.to_string().contains("record 5"), "names the key: {error}");
    // A unique index refuses a taken title: nothing is written, and the transaction's
    // earlier write stays.
    let outcome = db.write(|tx| {
        tasks.insert_json(tx, br#"{"id": 6, "title": "six", "priority": 1, "state": "Open"}"#)?;
        let refused = tasks.insert_json(tx, br#"{"id": 7, "title": "one", "priority": 1, "state": "Open"}"#);
        match refused {
            Err(Error::UniqueViolation { key, holder, .. }) => assert_eq!((key.as_str(), holder.as_str()), ("7", "1"), "keys as values"),
            other => panic!("{other:?}"),
        }
        Ok(())
    });
    outcome.unwrap();
    assert_eq!(tasks.all().count(&db).unwrap(), 2);
    assert!(typed.get(&db, &7u32).unwrap().is_none());
    assert!(db.check().unwrap().is_ok(), "no stray index entry");
}

#[test]
fn composite_keys_are_arrays_and_a_created_collection_opens_typed() {
    let (_dir, db) = open();
    let schema = DynSchema {
        version: 1,
        key_fields: vec!["id".into()],
        key_kinds: vec![KeyKind::U32],
        shape: <Task as tessera::collection::Describe>::describe(),
        indexes: vec![tessera::collection::DynIndex { path: "priority".into(), unique: false, ready: true, failure: None }],
    };
    let tasks = db.create_dyn_collection("tasks", &schema).unwrap();
    db.write(|tx| tasks.insert_json(tx, br#"{"id": 9, "title": "nine", "priority": 3, "state": "Open"}"#)).unwrap();
    let typed = db.collection::<Task>().unwrap();
    assert_eq!(typed.get(&db, &9u32).unwrap().unwrap().title, "nine");
    assert_eq!(typed.filter(Task::priority().eq(3)).count(&db).unwrap(), 1);
    // The key kinds survive the typed open.
    drop((tasks, typed));
    assert_eq!(db.dyn_collection("tasks").unwrap().schema().key_kinds, [KeyKind::U32]);
    let bad = DynSchema { key_kinds: vec![KeyKind::String], ..schema };
    assert!(matches!(db.create_dyn_collection("other", &bad), Err(Error::SchemaMismatch { .. })));
    let key = from_json(b"[1, 2]").unwrap();
    let refused = tessera::Db::dyn_collection(&db, "tasks").unwrap().get(&db, Doc::from_untrusted(&key).unwrap().root());
    assert!(matches!(refused, Err(Error::SchemaViolation { .. })), "an array for a one-field key");
}

#[test]
fn an_empty_collection_knows_its_key_width_from_the_record_type_that_stored_it() {
    let (_dir, db) = open();
    let typed = db.collection::<Task>().unwrap();
    let tasks = db.dyn_collection("tasks").unwrap();
    assert_eq!(tasks.schema().key_kinds, [KeyKind::U32], "from the stored shape, with no record to learn from");
    let json = br#"{"id": 1, "title": "t", "priority": 1, "state": "Open"}"#;
    assert_eq!(db.write(|tx| tasks.insert_json(tx, json)).unwrap(), WriteOutcome::Inserted);
    assert_eq!(typed.get(&db, &1u32).unwrap().unwrap(), Task { id: 1, title: "t".into(), priority: 1, due: None, state: State::Open });
}

#[test]
fn a_field_that_says_only_integer_takes_any_64_bit_integer() {
    let (_dir, db) = open();
    // A shape that says only "an integer", as Python's `int` and schemas stored before widths
    // were recorded do.
    let schema = DynSchema {
        version: 1,
        key_fields: vec!["id".into()],
        key_kinds: vec![KeyKind::U32],
        shape: TypeDesc::Struct(vec![("id".into(), TypeDesc::Int), ("n".into(), TypeDesc::Int)]),
        indexes: Vec::new(),
    };
    let numbers = db.create_dyn_collection("numbers", &schema).unwrap();
    for (id, n) in [(1, "-9223372036854775808"), (2, "18446744073709551615"), (3, "300")] {
        let json = format!(r#"{{"id": {id}, "n": {n}}}"#);
        assert_eq!(db.write(|tx| numbers.insert_json(tx, json.as_bytes())).unwrap(), WriteOutcome::Inserted);
        assert_eq!(numbers.get_json(&db, &id.to_string()).unwrap().unwrap().to_json(), format!(r#"{{"id":{id},"n":{n}}}"#));
    }
}

#[test]
fn read_only_handles_read_and_refuse_writes_and_leave_no_lock_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let db = Db::open(&path).unwrap();
        let typed = db.collection::<Task>().unwrap();
        db.write(|tx| typed.insert(tx, &task(1, "one"))).unwrap();
        drop(typed);
        db.close().unwrap();
    }
    let lock = dir.path().join("db-lock");
    std::fs::remove_file(&lock).unwrap();
    let db = Db::open_with(&path, DbOptions { read_only: true, ..DbOptions::default() }).unwrap();
    let tasks = db.dyn_collection("tasks").unwrap();
    assert_eq!(tasks.all().count(&db).unwrap(), 1);
    assert_eq!(db.catalog().unwrap().collections, ["tasks"]);
    let error = db.write(|tx| tasks.insert_json(tx, br#"{"id": 2, "title": "t", "priority": 1, "state": "Open"}"#)).unwrap_err();
    assert!(matches!(error, Error::ReadOnly { .. }), "{error}");
    assert!(db.check().unwrap().is_ok());
    drop(tasks);
    db.sync().unwrap();
    db.close().unwrap();
    assert!(!lock.exists(), "no lock file made");
    let missing = Db::open_with(dir.path().join("missing"), DbOptions { read_only: true, ..DbOptions::default() });
    assert!(matches!(missing, Err(Error::Io(_))));
    assert!(!dir.path().join("missing").exists());
}

#[test]
fn subscribers_see_dynamic_writes() {
    let (_dir, db) = open();
    let typed = db.collection::<Task>().unwrap();
    db.write(|tx| typed.insert(tx, &task(1, "one"))).unwrap();
    let tasks = db.dyn_collection("tasks").unwrap();
    let live = tasks.all().subscribe().unwrap();
    let wait = std::time::Duration::from_secs(5);
    let first = live.recv_timeout(wait).and_then(tessera::live::Event::initial).unwrap();
    assert_eq!(first.len(), 1);
    db.write(|tx| typed.insert(tx, &task(2, "two"))).unwrap();
    let change = live.recv_timeout(wait).and_then(tessera::live::Event::changed).unwrap();
    assert_eq!(change.insertions, [1]);
    assert_eq!(change.result[1].value().get("title").unwrap().as_str(), Some("two"));
    // A changed value is a modification; a commit elsewhere delivers nothing.
    db.write(|tx| typed.upsert(tx, &task(1, "uno"))).unwrap();
    let change = live.recv_timeout(wait).and_then(tessera::live::Event::changed).unwrap();
    assert_eq!((change.modifications.as_slice(), change.insertions.as_slice()), (&[0][..], &[][..]));
    let elsewhere = db.keyspace("elsewhere").unwrap();
    db.write(|tx| tx.put(&elsewhere, b"k", b"v")).unwrap();
    assert!(live.recv_timeout(std::time::Duration::from_millis(100)).is_none());
    drop((tasks, typed, db));
    assert!(live.recv_timeout(wait).is_some_and(|event| event.is_closed()), "Closed when the database closes");
    let _ = TypeDesc::Any;
}

#[test]
fn read_only_handles_use_an_existing_lock_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let writer = Db::open(&path).unwrap();
    let typed = writer.collection::<Task>().unwrap();
    writer.write(|tx| typed.insert(tx, &task(1, "one"))).unwrap();
    // Another process's view: a second environment in a child would be truer; the lock file
    // is what matters here.
    let reader = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "read_only_child", "--nocapture", "--ignored"])
        .env("TESSERA_READ_ONLY_PATH", &path)
        .output()
        .unwrap();
    assert!(reader.status.success(), "{}", String::from_utf8_lossy(&reader.stdout));
    writer.write(|tx| typed.insert(tx, &task(2, "two"))).unwrap();
}

#[test]
#[ignore = "run by read_only_handles_use_an_existing_lock_file in a child process"]
fn read_only_child() {
    let Some(path) = std::env::var_os("TESSERA_READ_ONLY_PATH") else { return };
    let db = Db::open_with(&path, DbOptions { read_only: true, ..DbOptions::default() }).unwrap();
    assert_eq!(db.dyn_collection("tasks").unwrap().all().count(&db).unwrap(), 1);
}

#[test]
fn two_created_collections_in_one_file() {
    let (_dir, db) = open();
    for (name, field) in [("first", "a"), ("second", "b")] {
        let schema = DynSchema {
            version: 1,
            key_fields: vec![field.into()],
            key_kinds: vec![KeyKind::String],
            shape: TypeDesc::Struct(vec![(field.into(), TypeDesc::String), ("n".into(), TypeDesc::Int)]),
            indexes: vec![],
        };
        let created = db.create_dyn_collection(name, &schema).unwrap();
        db.write(|tx| created.insert_json(tx, format!(r#"{{"{field}": "x", "n": 1}}"#).as_bytes())).unwrap();
    }
    assert_eq!(db.catalog().unwrap().collections, ["first", "second"]);
}

#[test]
fn dynamic_updates_and_deletes_keep_indexes_and_reach_typed_live_queries() {
    let (_dir, db) = open();
    let typed = db.collection::<Task>().unwrap();
    db.write(|tx| (1..=3).try_for_each(|id| typed.insert(tx, &task(id, &format!("t{id}"))).map(drop))).unwrap();
    let tasks = db.dyn_collection("tasks").unwrap();
    let live = typed.subscribe_query(&typed.filter(Task::priority().ge(10))).unwrap();
    let first = live.recv_timeout(std::time::Duration::from_secs(5)).and_then(tessera::live::Event::initial).unwrap();
    assert!(first.is_empty());
    let json = br#"{"id": 2, "title": "t2", "priority": 20, "state": "Open"}"#;
    assert_eq!(db.write(|tx| tasks.upsert_json(tx, json)).unwrap(), WriteOutcome::Updated);
    let change = live.recv_timeout(std::time::Duration::from_secs(5)).and_then(tessera::live::Event::changed).unwrap();
    assert_eq!(change.result.iter().map(|task| task.id).collect::<Vec<_>>(), [2]);
    let key = from_json(b"2").unwrap();
    let key = Doc::from_untrusted(&key).unwrap().root();
    assert_eq!(db.write(|tx| tasks.delete(tx, key)).unwrap(), WriteOutcome::Deleted);
    let change = live.recv_timeout(std::time::Duration::from_secs(5)).and_then(tessera::live::Event::changed).unwrap();
    assert!(change.result.is_empty());
    assert_eq!(typed.filter(Task::priority().ge(0)).count(&db).unwrap(), 2, "through the index");
    assert!(typed.get(&db, &2u32).unwrap().is_none());
    assert!(db.check().unwrap().is_ok(), "no index entry left behind");
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Record)]
#[record(name = "readings", version = 1)]
struct Reading {
    #[record(key)]
    id: u32,
    celsius: f32,
}

#[test]
fn a_float_beyond_f32s_range_is_refused_by_an_f32_field() {
    let (_dir, db) = open();
    let typed = db.collection::<Reading>().unwrap();
    db.write(|tx| typed.insert(tx, &Reading { id: 1, celsius: 20.5 })).unwrap();
    let readings = db.dyn_collection("readings").unwrap();
    assert_eq!(readings.schema().shape.resolve("celsius"), Some(&TypeDesc::Float32));
    for json in [&br#"{"id": 2, "celsius": 1e300}"#[..], br#"{"id": 2, "celsius": -3.5e38}"#] {
        match db.write(|tx| readings.insert_json(tx, json)) {
            Err(Error::SchemaViolation { collection, key, path, problem }) => {
                assert_eq!((collection.as_str(), key.as_str(), path.as_str()), ("readings", "2", "celsius"));
                assert!(problem.ends_with("is out of range for f32"), "{problem}");
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(typed.get(&db, &2u32).unwrap(), None, "nothing was written");
    // In range, a double is stored rounded to the nearest f32, as a typed write stores it.
    db.write(|tx| readings.insert_json(tx, br#"{"id": 2, "celsius": 0.1}"#)).unwrap();
    assert_eq!(typed.get(&db, &2u32).unwrap(), Some(Reading { id: 2, celsius: 0.1 }));
    db.write(|tx| readings.insert_json(tx, br#"{"id": 3, "celsius": 3.4e38}"#)).unwrap();
    assert_eq!(typed.get(&db, &3u32).unwrap(), Some(Reading { id: 3, celsius: 3.4e38 }));
    assert_eq!(db.write(|tx| typed.upsert(tx, &Reading { id: 2, celsius: 0.1 })).unwrap(), WriteOutcome::Unchanged);
}

#[test]
fn a_schema_stored_before_float_widths_opens_as_f32_when_its_values_fit() {
    let (_dir, db) = open();
    let schema = DynSchema {
        version: 1,
        key_fields: vec!["id".into()],
        key_kinds: vec![KeyKind::U32],
        shape: TypeDesc::Struct(vec![("id".into(), TypeDesc::Int), ("celsius".into(), TypeDesc::Float)]),
        indexes: vec![],
    };
    let readings = db.create_dyn_collection("readings", &schema).unwrap();
    db.write(|tx| readings.insert_json(tx, br#"{"id": 1, "celsius": 1.5}"#)).unwrap();
    db.write(|tx| readings.insert_json(tx, br#"{"id": 2, "celsius": 1e300}"#)).unwrap();
    // A stored value that f32 cannot hold exactly: `Float` may be a real f64 field, so the
    // open is refused naming the field and the record, rather than reading it rounded.
    match db.collection::<Reading>() {
        Err(Error::SchemaMismatch { collection, reason }) => {
            assert_eq!(collection, "readings");
            assert!(reason.contains("field `celsius`") && reason.contains("key 2 holds 1e300, which f32 cannot hold exactly"), "{reason}");
        }
        other => panic!("opened over a value f32 cannot hold: {:?}", other.map(drop)),
    }
    // Values that are f32 values (what a schema stored before widths holds for f32 fields)
    // open as f32.
    let key = from_json(b"2").unwrap();
    db.write(|tx| readings.delete(tx, Doc::from_untrusted(&key).unwrap().root()).map(drop)).unwrap();
    drop(readings);
    let typed = db.collection::<Reading>().unwrap();
    assert_eq!(typed.get(&db, &1u32).unwrap(), Some(Reading { id: 1, celsius: 1.5 }));
}

/// A record read from storage is kept with the collection's shared keys: its fields read
/// through them, while `bytes` is still a standalone document that opens without them, and
/// records compare by key and content whichever way they were read.
#[test]
fn a_stored_record_reads_through_its_shared_keys_and_copies_out_standalone() {
    let (_dir, db) = open();
    let typed = db.collection::<Task>().unwrap();
    let done = Task { id: 7, title: "seven".into(), priority: 3, due: Some(9), state: State::Done { note: "shipped".into() } };
    db.write(|tx| typed.insert(tx, &done)).unwrap();
    let tasks = db.dyn_collection("tasks").unwrap();
    let read = tasks.get_json(&db, "7").unwrap().unwrap();
    let fetched = tasks.filter_text("id == 7").unwrap().fetch(&db).unwrap().remove(0);
    let expected = r#"{"id":7,"title":"seven","priority":3,"due":9,"state":{"Done":{"note":"shipped"}}}"#;
    for record in [&read, &fetched] {
        assert_eq!(record.to_json(), expected);
        assert_eq!(
            record
                .value()
                .get("state")
                .and_then(|state| state.get("Done"))
                .and_then(|done| done.get("note"))
                .and_then(|note| note.as_str()),
            Some("shipped")
        );
        let standalone = Doc::from_untrusted(record.bytes()).expect("opens without the collection's keys");
        assert_eq!(standalone.root().to_json(), expected);
        assert_eq!(record.key_bytes(), tessera::store::key::encode(&7u32));
    }
    assert_eq!(read, fetched);
    let cloned = read.clone();
    assert_eq!(cloned.bytes(), read.bytes());
    let json = br#"{"id": 8, "title": "eight", "priority": 1, "state": "Open"}"#;
    db.write(|tx| tasks.insert_json(tx, json)).unwrap();
    assert_ne!(tasks.get_json(&db, "8").unwrap().unwrap(), read, "another record");
    assert_eq!(read.to_json(), expected);
}

/// A unique index on a field of any type (as a dynamic schema declares one) refuses a record
/// whose value there is a dict, a list or bytes, naming the field: its entries could not tell
/// two such values apart, and would refuse distinct ones as duplicates.
#[test]
fn a_unique_index_refuses_a_dict_list_or_bytes_value() {
    let (_dir, db) = open();
    let schema = DynSchema {
        version: 1,
        key_fields: vec!["id".into()],
        key_kinds: vec![KeyKind::U32],
        shape: TypeDesc::Struct(vec![("id".into(), TypeDesc::Int), ("tag".into(), TypeDesc::Any)]),
        indexes: vec![tessera::collection::DynIndex { path: "tag".into(), unique: true, ready: true, failure: None }],
    };
    let tags = db.create_dyn_collection("tags", &schema).unwrap();
    db.write(|tx| tags.insert_json(tx, br#"{"id": 1, "tag": "a"}"#)).unwrap();
    for (id, tag) in [(2, r#"{"a": 1}"#), (3, "[1, 2]"), (4, r#"{"Mid": {"n": 0}}"#)] {
        let json = format!(r#"{{"id": {id}, "tag": {tag}}}"#);
        match db.write(|tx| tags.insert_json(tx, json.as_bytes())) {
            Err(Error::SchemaViolation { collection, key, path, problem }) => {
                assert_eq!((collection.as_str(), path.as_str()), ("tags", "tag"));
                assert_eq!(key, id.to_string());
                assert!(problem.contains("unique index `tag` is on a"), "{problem}");
            }
            other => panic!("{tag} stored in a unique index: {other:?}"),
        }
    }
    db.write(|tx| tags.insert_json(tx, br#"{"id": 5, "tag": "b"}"#)).unwrap();
    assert_eq!(tags.all().count(&db).unwrap(), 2);
    assert!(db.check().unwrap().is_ok());
}
