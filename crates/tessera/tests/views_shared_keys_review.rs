//! Adversarial review of typed records' zero-copy views (`Collection::get_ref`, the accessors
//! `#[derive(Record)]` generates) and of the per-collection shared-key table: the view and the
//! full decode must agree with each other and with what was inserted, and stored bytes that do
//! not fit the type (a field of another type, a missing field, a variant the type lacks, a key
//! id the table does not have) must be a typed error naming the collection, the key and the
//! field path, never a panic, a default or another value.

use heed::types::Bytes;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;
use tessera::collection::{Embed, Record};
use tessera::value::SharedKeys;
use tessera::{Db, Error};

#[derive(Embed, Debug, Clone, PartialEq)]
struct Pos {
    x: i32,
    y: Option<f64>,
}

#[derive(Embed, Debug, Clone, PartialEq)]
enum Shape {
    Dot,
    Circle(f64),
    Rect { w: u16, h: u16 },
    Pair(i8, i8),
}

#[derive(Embed, Debug, Clone, PartialEq)]
struct Marker;

#[derive(Embed, Debug, Clone, PartialEq)]
struct Wrapper(Pos);

#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "things")]
struct Thing {
    #[record(key)]
    id: u32,
    name: String,
    pos: Pos,
    maybe_pos: Option<Pos>,
    path: Vec<Pos>,
    shape: Shape,
    shapes: Vec<Option<Shape>>,
    labels: BTreeMap<String, u32>,
    nested: Option<Vec<Option<String>>>,
    wrapped: Wrapper,
    boxed: Box<Pos>,
    initial: char,
    small: i8,
    big: u64,
    flag: bool,
    marker: Marker,
}

fn thing(id: u32) -> Thing {
    Thing {
        id,
        name: format!("thing {id}"),
        pos: Pos { x: 1, y: Some(2.5) },
        maybe_pos: None,
        path: vec![Pos { x: 3, y: None }, Pos { x: 4, y: Some(-1.0) }],
        shape: Shape::Rect { w: 2, h: 3 },
        shapes: vec![Some(Shape::Dot), None, Some(Shape::Pair(-1, 1))],
        labels: BTreeMap::from([("x".to_owned(), 1), ("other".to_owned(), 2)]),
        nested: Some(vec![Some("a".into()), None]),
        wrapped: Wrapper(Pos { x: 9, y: None }),
        boxed: Box::new(Pos { x: 7, y: Some(0.5) }),
        initial: 'q',
        small: -3,
        big: u64::MAX,
        flag: true,
        marker: Marker,
    }
}

/// Every accessor of the view of `id` against `expected`, and the view's full decode.
fn assert_view_agrees(db: &Db, things: &tessera::Collection<Thing>, expected: &Thing) {
    let tx = db.read_txn().unwrap();
    let view = things.get_ref(&tx, &expected.id).unwrap().expect("stored");
    assert_eq!(view.decode().unwrap(), *expected);
    assert_eq!(view.id().unwrap(), expected.id);
    assert_eq!(view.name().unwrap(), expected.name);
    assert_eq!(view.pos().unwrap(), expected.pos);
    assert_eq!(view.maybe_pos().unwrap(), expected.maybe_pos);
    assert_eq!(view.path().unwrap(), expected.path);
    assert_eq!(view.shape().unwrap(), expected.shape);
    assert_eq!(view.shapes().unwrap(), expected.shapes);
    let labels: Vec<(String, u32)> = view.labels().unwrap().into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    let mut labels_sorted = labels.clone();
    labels_sorted.sort();
    let expected_labels: Vec<(String, u32)> = expected.labels.iter().map(|(k, v)| (k.clone(), *v)).collect();
    assert_eq!(labels_sorted, expected_labels);
    assert_eq!(labels.len(), expected.labels.len(), "no duplicate map keys in the view");
    assert_eq!(
        view.nested().unwrap().map(|items| items.into_iter().map(|item| item.map(str::to_owned)).collect::<Vec<_>>()),
        expected.nested
    );
    assert_eq!(view.wrapped().unwrap(), expected.wrapped);
    assert_eq!(view.boxed().unwrap(), *expected.boxed);
    assert_eq!(view.initial().unwrap(), expected.initial);
    assert_eq!(view.small().unwrap(), expected.small);
    assert_eq!(view.big().unwrap(), expected.big);
    assert_eq!(view.flag().unwrap(), expected.flag);
    assert_eq!(view.marker().unwrap(), expected.marker);
}

fn open(path: &Path) -> (Db, tessera::Collection<Thing>) {
    let db = Db::open(path).unwrap();
    let things = db.collection::<Thing>().unwrap();
    (db, things)
}

// ---------------------------------------------------------------------------------------------
// View and decode agree with what was inserted.

fn pos_strategy() -> impl Strategy<Value = Pos> {
    (any::<i32>(), proptest::option::of(-1e9f64..1e9)).prop_map(|(x, y)| Pos { x, y })
}

fn shape_strategy() -> impl Strategy<Value = Shape> {
    prop_oneof![
        Just(Shape::Dot),
        (-1e6f64..1e6).prop_map(Shape::Circle),
        (any::<u16>(), any::<u16>()).prop_map(|(w, h)| Shape::Rect { w, h }),
        (any::<i8>(), any::<i8>()).prop_map(|(a, b)| Shape::Pair(a, b)),
    ]
}

/// Map keys that are also field and variant names (stored as shared ids), and others.
fn label_key() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(vec!["x", "y", "id", "name", "Dot", "Rect", "w", "labels", "", "zz", "é"]).prop_map(str::to_owned),
        "[a-z]{0,6}",
    ]
}

prop_compose! {
    fn thing_strategy()(
        id in 0u32..50,
        name in "\\PC{0,12}",
        pos in pos_strategy(),
        maybe_pos in proptest::option::of(pos_strategy()),
        path in proptest::collection::vec(pos_strategy(), 0..4),
        shape in shape_strategy(),
        shapes in proptest::collection::vec(proptest::option::of(shape_strategy()), 0..4),
        labels in proptest::collection::btree_map(label_key(), any::<u32>(), 0..5),
        nested in proptest::option::of(proptest::collection::vec(proptest::option::of("\\PC{0,4}"), 0..3)),
        wrapped in pos_strategy(),
        boxed in pos_strategy(),
        initial in any::<char>(),
        small in any::<i8>(),
        big in any::<u64>(),
        flag in any::<bool>(),
    ) -> Thing {
        Thing { id, name, pos, maybe_pos, path, shape, shapes, labels, nested, wrapped: Wrapper(wrapped), boxed: Box::new(boxed), initial, small, big, flag, marker: Marker }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn get_and_every_view_accessor_agree_with_what_was_inserted(records in proptest::collection::vec(thing_strategy(), 1..6)) {
        let dir = tempfile::tempdir().unwrap();
        let (db, things) = open(&dir.path().join("db"));
        let mut model = BTreeMap::new();
        db.write(|tx| {
            for record in &records {
                things.upsert(tx, record)?;
                model.insert(record.id, record.clone());
            }
            Ok(())
        }).unwrap();
        for expected in model.values() {
            let got = things.get(&db, &expected.id).unwrap();
            prop_assert_eq!(got.as_ref(), Some(expected));
            assert_view_agrees(&db, &things, expected);
        }
        // A query's views read what `get` does.
        let tx = db.read_txn().unwrap();
        let all = things.all();
        let by_refs: Vec<Thing> = all.refs(&tx).unwrap().map(|view| view.and_then(|view| view.decode())).collect::<tessera::Result<_>>().unwrap();
        prop_assert_eq!(by_refs, model.values().cloned().collect::<Vec<_>>());
        for view in all.refs(&tx).unwrap() {
            let view = view.unwrap();
            let expected = &model[&view.id().unwrap()];
            prop_assert_eq!(view.labels().unwrap().len(), expected.labels.len());
            prop_assert_eq!(&view.shapes().unwrap(), &expected.shapes);
            prop_assert_eq!(view.name().unwrap(), expected.name.as_str());
        }
        drop(tx);
        // And through the same view inside a write transaction.
        db.write(|tx| {
            for expected in model.values() {
                let view = things.get_ref(&*tx, &expected.id)?.unwrap();
                assert_eq!(view.decode()?, *expected);
                assert_eq!(view.labels()?.len(), expected.labels.len());
            }
            Ok(())
        }).unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Stored bytes written under a record by hand (raw LMDB, with a valid checksum).

/// Opens the file with raw LMDB and hands it to `change`.
fn with_raw(path: &Path, change: impl FnOnce(&heed::Env, &mut heed::RwTxn<'_>)) {
    // SAFETY: the test opens the file only while no `Db` has it open.
    let env = unsafe { heed::EnvOpenOptions::new().max_dbs(128).flags(heed::EnvFlags::NO_SUB_DIR).open(path) }.unwrap();
    let mut txn = env.write_txn().unwrap();
    change(&env, &mut txn);
    txn.commit().unwrap();
    env.prepare_for_closing().wait();
}

fn raw_db(env: &heed::Env, txn: &heed::RwTxn<'_>, name: &str) -> heed::Database<Bytes, Bytes> {
    env.open_database(txn, Some(name)).unwrap().unwrap()
}

/// `value` followed by its checksum under `key` (storage format 4).
fn sealed(key: &[u8], value: &[u8]) -> Vec<u8> {
    let hash = xxhash_rust::xxh3::xxh3_64_with_seed(value, xxhash_rust::xxh3::xxh3_64(key));
    let mut out = value.to_vec();
    out.extend_from_slice(&(hash as u32).to_le_bytes());
    out
}

fn unsealed(stored: &[u8]) -> &[u8] {
    &stored[..stored.len() - 4]
}

/// The stored shared-key table of `things`.
fn stored_keys(env: &heed::Env, txn: &heed::RwTxn<'_>) -> SharedKeys {
    let keys = raw_db(env, txn, "tessera.keys");
    SharedKeys::from_bytes(unsealed(keys.get(txn, b"things").unwrap().unwrap())).unwrap()
}

/// The record of `thing(id)` as JSON, for tests to spoil one field of.
fn thing_json(id: u32) -> serde_json::Value {
    serde_json::json!({
        "id": id, "name": format!("thing {id}"), "pos": {"x": 1, "y": 2.5}, "maybe_pos": null,
        "path": [{"x": 3, "y": null}, {"x": 4, "y": -1.0}], "shape": {"Rect": {"w": 2, "h": 3}},
        "shapes": ["Dot", null, {"Pair": [-1, 1]}], "labels": {"x": 1, "other": 2},
        "nested": ["a", null], "wrapped": {"x": 9, "y": null}, "boxed": {"x": 7, "y": 0.5},
        "initial": "q", "small": -3, "big": u64::MAX, "flag": true, "marker": null,
    })
}

/// A database with `thing(1)` inserted, then `record` written by hand under key `id`, encoded
/// with the stored shared-key table.
fn database_with(path: &Path, id: u32, record: &serde_json::Value) {
    {
        let (db, things) = open(path);
        db.write(|tx| things.insert(tx, &thing(1)).map(drop)).unwrap();
    }
    with_raw(path, |env, txn| {
        let bytes = tessera::value::to_vec_with_keys(record, &stored_keys(env, txn)).unwrap();
        let key = id.to_be_bytes();
        raw_db(env, txn, "tessera.col.things").put(txn, &key, &sealed(&key, &bytes)).unwrap();
    });
}

/// `result` is a `RecordDecode` of `things` at key `key` and field `field`.
fn assert_decode_error<T: std::fmt::Debug>(result: tessera::Result<T>, key: &str, field: &str, what: &str) {
    match result {
        Err(Error::RecordDecode { collection, key: error_key, field: error_field, message }) => {
            assert_eq!(
                (collection.as_str(), error_key.as_str(), error_field.as_str()),
                ("things", key, field),
                "{what}: wrong place in the error ({message})"
            );
        }
        other => panic!("{what}: expected a RecordDecode error at {field:?}, got {other:?}"),
    }
}

/// The value read at `field` through every typed read path: `get`, the view's decode, the
/// view's accessor of the top-level field and a query's fetch.
fn assert_every_read_fails(path: &Path, field: &str, accessor: impl Fn(&ThingView<'_>) -> Result<String, Error>, what: &str) {
    let (db, things) = open(path);
    assert_decode_error(things.get(&db, &3u32), "3", field, &format!("{what}: get"));
    let tx = db.read_txn().unwrap();
    let view = things.get_ref(&tx, &3u32).unwrap().expect("stored");
    assert_decode_error(view.decode(), "3", field, &format!("{what}: view decode"));
    let read = accessor(&view);
    assert_decode_error(read, "3", field, &format!("{what}: view accessor"));
    // The query's views: the same error from the same accessor.
    let all = things.all();
    let mut seen = 0;
    for view in all.refs(&tx).unwrap() {
        let view = view.unwrap();
        if view.id().unwrap() == 3 {
            seen += 1;
            assert_decode_error(accessor(&view), "3", field, &format!("{what}: query view accessor"));
        }
    }
    assert_eq!(seen, 1, "{what}: the query's views");
    drop(tx);
    assert_decode_error(things.all().fetch(&db), "3", field, &format!("{what}: fetch"));
    // The good record still reads.
    assert_eq!(things.get(&db, &1u32).unwrap(), Some(thing(1)));
}

fn spoiled(change: impl FnOnce(&mut serde_json::Value)) -> serde_json::Value {
    let mut record = thing_json(3);
    change(&mut record);
    record
}

#[test]
fn a_hand_written_record_of_the_right_layout_reads_as_the_typed_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    database_with(&path, 3, &thing_json(3));
    let (db, things) = open(&path);
    assert_eq!(things.get(&db, &3u32).unwrap(), Some(thing(3)));
    assert_view_agrees(&db, &things, &thing(3));
}

/// Each case: a spoiled field, the path the error must name, and the accessor that reads it.
type Case = (&'static str, fn(&mut serde_json::Value), &'static str, fn(&ThingView<'_>) -> Result<String, Error>);

fn wrong_type_cases() -> Vec<Case> {
    vec![
        ("nested field of another type", |r| r["pos"]["x"] = "one".into(), "pos.x", |v| v.pos().map(|p| format!("{p:?}"))),
        ("missing required field", |r| drop(r.as_object_mut().unwrap().remove("name")), "name", |v| v.name().map(str::to_owned)),
        ("missing nested field", |r| drop(r["pos"].as_object_mut().unwrap().remove("x")), "pos.x", |v| v.pos().map(|p| format!("{p:?}"))),
        ("optional struct of another type", |r| r["maybe_pos"] = 5.into(), "maybe_pos", |v| v.maybe_pos().map(|p| format!("{p:?}"))),
        (
            "optional struct missing a field",
            |r| r["maybe_pos"] = serde_json::json!({"y": 1.0}),
            "maybe_pos.x",
            |v| v.maybe_pos().map(|p| format!("{p:?}")),
        ),
        ("element of a vec of structs", |r| r["path"][1]["x"] = true.into(), "path[1].x", |v| v.path().map(|p| format!("{p:?}"))),
        ("unknown variant", |r| r["shape"] = "Hexagon".into(), "shape", |v| v.shape().map(|s| format!("{s:?}"))),
        (
            "variant payload of another type",
            |r| r["shape"] = serde_json::json!({"Rect": {"w": "2", "h": 3}}),
            "shape.Rect.w",
            |v| v.shape().map(|s| format!("{s:?}")),
        ),
        ("struct variant without its payload", |r| r["shape"] = "Rect".into(), "shape.Rect", |v| v.shape().map(|s| format!("{s:?}"))),
        (
            "unit variant with a payload",
            |r| r["shapes"][0] = serde_json::json!({"Dot": 5}),
            "shapes[0].Dot",
            |v| v.shapes().map(|s| format!("{s:?}")),
        ),
        (
            "tuple variant of another length",
            |r| r["shapes"][2] = serde_json::json!({"Pair": [1]}),
            "shapes[2].Pair",
            |v| v.shapes().map(|s| format!("{s:?}")),
        ),
        (
            "tuple variant element out of range",
            |r| r["shapes"][2] = serde_json::json!({"Pair": [1, 300]}),
            "shapes[2].Pair[1]",
            |v| v.shapes().map(|s| format!("{s:?}")),
        ),
        ("map value of another type", |r| r["labels"]["other"] = "two".into(), "labels.other", |v| v.labels().map(|l| format!("{l:?}"))),
        (
            "map value under a shared key of another type",
            |r| r["labels"]["x"] = (-1).into(),
            "labels.x",
            |v| v.labels().map(|l| format!("{l:?}")),
        ),
        ("map of another type", |r| r["labels"] = serde_json::json!([1, 2]), "labels", |v| v.labels().map(|l| format!("{l:?}"))),
        ("nested option element", |r| r["nested"][0] = 1.into(), "nested[0]", |v| v.nested().map(|n| format!("{n:?}"))),
        (
            "newtype struct inner field",
            |r| r["wrapped"]["x"] = serde_json::json!([]),
            "wrapped.x",
            |v| v.wrapped().map(|w| format!("{w:?}")),
        ),
        ("boxed struct inner field", |r| r["boxed"]["y"] = "half".into(), "boxed.y", |v| v.boxed().map(|b| format!("{b:?}"))),
        ("char of two characters", |r| r["initial"] = "qq".into(), "initial", |v| v.initial().map(|c| c.to_string())),
        ("i8 out of range", |r| r["small"] = 200.into(), "small", |v| v.small().map(|s| s.to_string())),
        ("u64 negative", |r| r["big"] = (-1).into(), "big", |v| v.big().map(|b| b.to_string())),
        ("u64 as a float", |r| r["big"] = 1.5.into(), "big", |v| v.big().map(|b| b.to_string())),
        ("bool as an integer", |r| r["flag"] = 1.into(), "flag", |v| v.flag().map(|b| b.to_string())),
        ("string as null", |r| r["name"] = serde_json::Value::Null, "name", |v| v.name().map(str::to_owned)),
        ("unit struct of another type", |r| r["marker"] = 42.into(), "marker", |v| v.marker().map(|m| format!("{m:?}"))),
    ]
}

#[test]
fn a_field_that_does_not_fit_the_type_is_an_error_naming_collection_key_and_path_in_every_read() {
    let mut failures = Vec::new();
    for (what, change, field, accessor) in wrong_type_cases() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        database_with(&path, 3, &spoiled(change));
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| assert_every_read_fails(&path, field, accessor, what)));
        if let Err(panic) = outcome {
            let message = panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
            failures.push(message.unwrap_or_else(|| what.to_owned()));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases:\n{}", failures.len(), wrong_type_cases().len(), failures.join("\n"));
}

#[test]
fn a_record_that_is_not_a_dict_is_an_error_in_get_and_get_ref() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    database_with(&path, 3, &serde_json::json!([1, 2, 3]));
    let (db, things) = open(&path);
    assert_decode_error(things.get(&db, &3u32), "3", "", "get");
    let tx = db.read_txn().unwrap();
    assert_decode_error(things.get_ref(&tx, &3u32).map(|view| view.is_some()), "3", "", "get_ref");
}

// ---------------------------------------------------------------------------------------------
// Shared-key ids the table does not have.

/// The stored table of a database with `thing(1)`, plus `extra` names.
fn extended_keys(path: &Path, extra: &[&str]) -> SharedKeys {
    {
        let (db, things) = open(path);
        db.write(|tx| things.insert(tx, &thing(1)).map(drop)).unwrap();
    }
    let mut keys = None;
    with_raw(path, |env, txn| keys = Some(stored_keys(env, txn)));
    let mut keys = keys.unwrap();
    for name in extra {
        keys.add(name).unwrap();
    }
    keys
}

/// A record using ids past the stored table's end (a table that lost names, or a record
/// written by something that knew more names) is an error, never a read that drops the field
/// or names it `""`.
fn assert_unknown_id_is_an_error(
    record: serde_json::Value,
    field: &str,
    accessor: impl Fn(&ThingView<'_>) -> Result<String, Error>,
    what: &str,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let keys = extended_keys(&path, &["ghost", "phantom"]);
    with_raw(&path, |env, txn| {
        let bytes = tessera::value::to_vec_with_keys(&record, &keys).unwrap();
        let key = 3u32.to_be_bytes();
        raw_db(env, txn, "tessera.col.things").put(txn, &key, &sealed(&key, &bytes)).unwrap();
    });
    for verify_checksums in [true, false] {
        let db = Db::open_with(&path, tessera::DbOptions { verify_checksums, ..Default::default() }).unwrap();
        let things = db.collection::<Thing>().unwrap();
        let what = format!("{what} (checksums verified: {verify_checksums})");
        match things.get(&db, &3u32) {
            Err(Error::RecordDecode { collection, key, field: error_field, message }) => {
                assert_eq!((collection.as_str(), key.as_str()), ("things", "3"), "{what}: {message}");
                assert!(error_field.is_empty() || error_field == field, "{what}: names {error_field:?} ({message})");
            }
            other => panic!("{what}: get gave {other:?}"),
        }
        let tx = db.read_txn().unwrap();
        match things.get_ref(&tx, &3u32) {
            Err(Error::RecordDecode { .. }) => {}
            Err(other) => panic!("{what}: get_ref gave {other}"),
            Ok(view) => {
                let view = view.expect("stored");
                let decoded = view.decode();
                assert!(matches!(decoded, Err(Error::RecordDecode { .. })), "{what}: view decode gave {decoded:?}");
                let read = accessor(&view);
                assert!(matches!(read, Err(Error::RecordDecode { .. })), "{what}: view accessor gave {read:?}");
            }
        }
        drop(tx);
        assert!(things.all().fetch(&db).is_err(), "{what}: fetch read it");
    }
}

#[test]
fn a_map_key_whose_shared_id_the_table_lacks_is_an_error_not_an_empty_key() {
    let record = spoiled(|r| r["labels"] = serde_json::json!({"ghost": 7, "other": 2}));
    assert_unknown_id_is_an_error(record, "labels", |v| v.labels().map(|l| format!("{l:?}")), "map key");
}

#[test]
fn a_variant_whose_shared_id_the_table_lacks_is_an_error() {
    let record = spoiled(|r| r["shape"] = serde_json::json!({"phantom": 1}));
    assert_unknown_id_is_an_error(record, "shape", |v| v.shape().map(|l| format!("{l:?}")), "variant");
}

#[test]
fn an_extra_field_whose_shared_id_the_table_lacks_is_an_error() {
    let record = spoiled(|r| r["ghost"] = 1.into());
    // No accessor reads the extra field: the record as a whole is refused.
    assert_unknown_id_is_an_error(record, "", |v| v.name().map(str::to_owned), "extra field");
}

// ---------------------------------------------------------------------------------------------
// A damaged shared-key table.

fn assert_corrupted_naming_keys(result: tessera::Result<tessera::Collection<Thing>>, what: &str) {
    match result {
        Err(Error::Corrupted(message)) => assert!(message.contains("tessera.keys"), "{what}: {message}"),
        Err(other) => panic!("{what}: expected Corrupted naming tessera.keys, got {other:?}"),
        Ok(_) => panic!("{what}: opened"),
    }
}

#[test]
fn a_damaged_shared_key_table_is_corrupted_naming_its_keyspace() {
    // A flipped bit: the checksum fails.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    extended_keys(&path, &[]);
    with_raw(&path, |env, txn| {
        let keys = raw_db(env, txn, "tessera.keys");
        let mut stored = keys.get(txn, b"things").unwrap().unwrap().to_vec();
        stored[1] ^= 0x20;
        keys.put(txn, b"things", &stored).unwrap();
    });
    assert_corrupted_naming_keys(Db::open(&path).and_then(|db| db.collection::<Thing>()), "bit flip");

    // Bytes that do not parse as a table, with a valid checksum.
    for (what, bytes) in [
        ("a count with no names", vec![5u8]),
        ("a name past the end", vec![1, 9, b'a']),
        ("not UTF-8", vec![1, 1, 0xff]),
        ("a name twice", vec![2, 1, b'a', 1, b'a']),
        ("bytes after the names", vec![0, 0]),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        extended_keys(&path, &[]);
        with_raw(&path, |env, txn| raw_db(env, txn, "tessera.keys").put(txn, b"things", &sealed(b"things", &bytes)).unwrap());
        assert_corrupted_naming_keys(Db::open(&path).and_then(|db| db.collection::<Thing>()), what);
        // With checksums off too.
        let db = Db::open_with(&path, tessera::DbOptions { verify_checksums: false, ..Default::default() }).unwrap();
        assert_corrupted_naming_keys(db.collection::<Thing>(), what);
        match db.dyn_collection("things") {
            Err(Error::Corrupted(message)) => assert!(message.contains("tessera.keys"), "{what}: dynamic: {message}"),
            Err(other) => panic!("{what}: dynamic: expected Corrupted naming tessera.keys, got {other:?}"),
            Ok(_) => panic!("{what}: the dynamic handle opened"),
        }
    }
}

#[test]
fn a_shared_key_table_that_lost_its_last_names_reads_no_record_wrong() {
    // The table is cut to its first name (a valid table, a valid checksum): opening adds the
    // type's names back, so each record must read as written or be an error, never another value.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    extended_keys(&path, &[]);
    with_raw(&path, |env, txn| {
        let mut cut = SharedKeys::new();
        cut.add(stored_keys(env, txn).name(0).unwrap()).unwrap();
        raw_db(env, txn, "tessera.keys").put(txn, b"things", &sealed(b"things", &cut.to_bytes())).unwrap();
    });
    for verify_checksums in [true, false] {
        let db = Db::open_with(&path, tessera::DbOptions { verify_checksums, ..Default::default() }).unwrap();
        let things = db.collection::<Thing>().unwrap();
        match things.get(&db, &1u32) {
            Ok(Some(read)) => assert_eq!(read, thing(1)),
            Ok(None) => panic!("lost the record"),
            Err(_) => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Records written through the dynamic handle, read through the typed one and its view.

#[test]
fn records_the_dynamic_handle_accepts_read_the_same_through_get_and_the_view() {
    let dir = tempfile::tempdir().unwrap();
    let (db, things) = open(&dir.path().join("db"));
    let dynamic = db.dyn_collection("things").unwrap();
    let mut accepted = Vec::new();
    let cases: Vec<(&str, serde_json::Value)> = vec![
        ("as typed", thing_json(10)),
        ("extra field", spoiled(|r| r["extra"] = 1.into())),
        ("extra nested field", spoiled(|r| r["pos"]["z"] = 1.into())),
        ("string for an int", spoiled(|r| r["pos"]["x"] = "1".into())),
        ("int out of i32", spoiled(|r| r["pos"]["x"] = 5_000_000_000i64.into())),
        ("negative u64", spoiled(|r| r["big"] = (-1).into())),
        ("float for an int", spoiled(|r| r["small"] = 1.5.into())),
        ("i8 out of range", spoiled(|r| r["small"] = 128.into())),
        ("unknown variant", spoiled(|r| r["shape"] = "Hexagon".into())),
        ("missing field", spoiled(|r| drop(r.as_object_mut().unwrap().remove("name")))),
        ("null for a required struct", spoiled(|r| r["pos"] = serde_json::Value::Null)),
        ("marker of another type", spoiled(|r| r["marker"] = "x".into())),
        ("u16 out of range in a variant", spoiled(|r| r["shape"] = serde_json::json!({"Rect": {"w": 70000, "h": 1}}))),
        ("map value negative", spoiled(|r| r["labels"]["x"] = (-5).into())),
    ];
    for (index, (what, mut record)) in cases.into_iter().enumerate() {
        let id = 100 + index as u32;
        record["id"] = id.into();
        let json = serde_json::to_vec(&record).unwrap();
        if db.write(|tx| dynamic.insert_json(tx, &json)).is_ok() {
            accepted.push((id, what, record));
        }
    }
    eprintln!("accepted by the dynamic handle: {:?}", accepted.iter().map(|(_, what, _)| *what).collect::<Vec<_>>());
    let mut wrong = Vec::new();
    for (id, what, record) in &accepted {
        let got = things.get(&db, id);
        let tx = db.read_txn().unwrap();
        let view = things.get_ref(&tx, id).unwrap().expect("stored");
        let by_view = view.decode().map(Some);
        // The view and get agree, error or not.
        if format!("{got:?}") != format!("{by_view:?}") {
            wrong.push(format!("{what}: get {got:?} but view {by_view:?}"));
        }
        match got {
            Ok(Some(read)) => {
                // What was read is what was written, field for field (as JSON).
                let mut expected = record.clone();
                if let Some(map) = expected.as_object_mut() {
                    map.remove("extra");
                }
                if let Some(pos) = expected.get_mut("pos").and_then(|p| p.as_object_mut()) {
                    pos.remove("z");
                }
                let read_json = serde_json::to_value(stored_json_of(&db, *id)).unwrap();
                if *what != "extra field" && *what != "extra nested field" && read_json != expected {
                    wrong.push(format!("{what}: stored {read_json} for {expected}"));
                }
                let accessor_pos = view.pos().map(|p| p == read.pos);
                if accessor_pos.ok() != Some(true) {
                    wrong.push(format!("{what}: view pos disagrees"));
                }
                if record["marker"] != serde_json::Value::Null {
                    wrong.push(format!("{what}: marker stored as {} read Ok", record["marker"]));
                }
            }
            Ok(None) => wrong.push(format!("{what}: accepted, then not found")),
            Err(Error::RecordDecode { field, .. }) if !field.is_empty() || *what == "missing field" => {}
            Err(other) => wrong.push(format!("{what}: {other}")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

fn stored_json_of(db: &Db, id: u32) -> serde_json::Value {
    let dynamic = db.dyn_collection("things").unwrap();
    let record = dynamic.get_json(db, &id.to_string()).unwrap().expect("stored");
    serde_json::from_str(&record.to_json()).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Nested options.

#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "maybes")]
struct Maybe {
    #[record(key)]
    id: u32,
    twice: Option<Option<u32>>,
    marker: Option<Marker>,
}

#[test]
fn a_nested_option_reads_back_what_was_written_or_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    let maybes = db.collection::<Maybe>().unwrap();
    let records = [
        Maybe { id: 1, twice: Some(None), marker: None },
        Maybe { id: 3, twice: None, marker: Some(Marker) },
        Maybe { id: 4, twice: Some(Some(4)), marker: None },
    ];
    let mut wrong = Vec::new();
    for record in &records {
        if let Err(error) = db.write(|tx| maybes.insert(tx, record)) {
            // Refused: nothing written, and never a record that reads back otherwise.
            assert!(matches!(error, Error::Encode(_)), "{record:?}: {error:?}");
            assert_eq!(maybes.get(&db, &record.id).unwrap(), None);
            assert_ne!(record.id, 4, "Some(Some(4)) is representable and must be written");
            continue;
        }
        let read = maybes.get(&db, &record.id).unwrap().unwrap();
        if read != *record {
            wrong.push(format!("inserted {record:?}, read Ok({read:?})"));
        }
        let tx = db.read_txn().unwrap();
        let view = maybes.get_ref(&tx, &record.id).unwrap().unwrap();
        assert_eq!(view.twice().unwrap(), read.twice, "view and get disagree");
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Records of older layouts: field keys by name, or shared for a prefix of the table only.

#[test]
fn records_whose_keys_are_names_or_a_prefix_of_the_table_read_the_same_through_get_and_the_view() {
    for shared_prefix in [0usize, 1, 3, 6] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let full = extended_keys(&path, &[]);
        let mut prefix = SharedKeys::new();
        for id in 0..shared_prefix as u32 {
            prefix.add(full.name(id).unwrap()).unwrap();
        }
        // Missing optional fields too: an older type without them.
        let mut record = thing_json(3);
        record["maybe_pos"] = serde_json::json!({"x": -1});
        record["pos"].as_object_mut().unwrap().remove("y");
        with_raw(&path, |env, txn| {
            let bytes = if shared_prefix == 0 {
                tessera::value::to_vec(&record).unwrap()
            } else {
                tessera::value::to_vec_with_keys(&record, &prefix).unwrap()
            };
            let key = 3u32.to_be_bytes();
            raw_db(env, txn, "tessera.col.things").put(txn, &key, &sealed(&key, &bytes)).unwrap();
        });
        let mut expected = thing(3);
        expected.pos.y = None;
        expected.maybe_pos = Some(Pos { x: -1, y: None });
        for verify_checksums in [true, false] {
            let db = Db::open_with(&path, tessera::DbOptions { verify_checksums, ..Default::default() }).unwrap();
            let things = db.collection::<Thing>().unwrap();
            assert_eq!(things.get(&db, &3u32).unwrap().as_ref(), Some(&expected), "prefix {shared_prefix}");
            assert_view_agrees(&db, &things, &expected);
            let found = things.filter(Thing::maybe_pos().x().eq(-1)).fetch(&db).unwrap();
            assert_eq!(found, [expected.clone()], "prefix {shared_prefix}: a query on a field stored by name");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A record whose key field disagrees with the key it is stored under.

/// A record whose key fields are not the key it is stored under (written with a valid checksum:
/// a foreign or buggy writer) read as `Ok` with another key. Each typed read path is now a
/// `RecordDecode` naming the key field; the record stored under its own key still reads.
#[test]
fn a_record_whose_key_field_is_not_its_key_is_an_error_not_another_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    database_with(&path, 3, &thing_json(99));
    let (db, things) = open(&path);
    assert_decode_error(things.get(&db, &3u32), "3", "id", "get");
    let tx = db.read_txn().unwrap();
    assert_decode_error(things.get_ref(&tx, &3u32).map(|view| view.map(drop)), "3", "id", "get_ref");
    assert_decode_error(things.all().fetch(&db), "3", "id", "fetch");
    assert_eq!(things.get(&db, &1u32).unwrap().map(|thing| thing.id), Some(1), "the record under its own key");
}

/// The same record read through the dynamic handle (what `tessera get`, `tessera query` and the
/// Python package read with) and through the view of a record type with type parameters
/// (`PlainView`, which has no accessors to compare the key fields in place): each read it as
/// `Ok`, the record of id 99 at key 3. Each is now the same `RecordDecode`.
#[test]
fn a_record_whose_key_field_is_not_its_key_is_an_error_through_the_dynamic_handle_and_a_plain_view() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    database_with(&path, 3, &thing_json(99));
    {
        let (db, _things) = open(&path);
        let dynamic = db.dyn_collection("things").unwrap();
        assert_decode_error(dynamic.get_json(&db, "3"), "3", "id", "dynamic get");
        assert_decode_error(dynamic.all().fetch(&db), "3", "id", "dynamic fetch");
        // The reads that hand the stored record to a binding (the Python package's).
        assert_decode_error(dynamic.get_stored_with(&db, &3u32.to_be_bytes(), |_| ()), "3", "id", "get_stored_with");
        let stored = dynamic.all().fetch_stored(&db).unwrap();
        let (key, bytes) = stored.iter().find(|(key, _)| key[..] == 3u32.to_be_bytes()).unwrap();
        assert_decode_error(dynamic.read_stored(key, bytes, |_| ()), "3", "id", "read_stored");
        assert_eq!(dynamic.get_json(&db, "1").unwrap().map(|record| record.to_json().contains("\"id\":1")), Some(true));
    }

    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "boxes")]
    struct Boxed<T>
    where
        T: tessera::codec::Encode + for<'a> tessera::codec::Decode<'a> + tessera::collection::Describe + Send + Sync + 'static,
    {
        #[record(key)]
        id: u32,
        content: T,
    }
    {
        let db = Db::open(&path).unwrap();
        let boxes = db.collection::<Boxed<String>>().unwrap();
        db.write(|tx| boxes.insert(tx, &Boxed { id: 1, content: "one".to_owned() }).map(drop)).unwrap();
    }
    with_raw(&path, |env, txn| {
        let keys = tessera::value::SharedKeys::new();
        let bytes = tessera::value::to_vec_with_keys(&serde_json::json!({"id": 7, "content": "seven"}), &keys).unwrap();
        let key = 4u32.to_be_bytes();
        raw_db(env, txn, "tessera.col.boxes").put(txn, &key, &sealed(&key, &bytes)).unwrap();
    });
    let db = Db::open(&path).unwrap();
    let boxes = db.collection::<Boxed<String>>().unwrap();
    let tx = db.read_txn().unwrap();
    match boxes.get_ref(&tx, &4u32) {
        Err(Error::RecordDecode { collection, key, field, .. }) => {
            assert_eq!((collection.as_str(), key.as_str(), field.as_str()), ("boxes", "4", "id"))
        }
        other => panic!("a plain view of the record of id 7 at key 4: {:?}", other.map(|view| view.map(|view| view.decode()))),
    }
    assert_eq!(boxes.get_ref(&tx, &1u32).unwrap().unwrap().decode().unwrap().content, "one");
}

// ---------------------------------------------------------------------------------------------
// The fixtures of earlier storage formats (`tests/fixtures/make_v1.rs`): records keyed by name
// (v1) and by shared key (v2), read through every accessor of the view.

#[allow(clippy::manual_is_multiple_of)] // `item` is kept exactly as `make_v1.rs` wrote it.
mod fixture {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Record)]
    #[record(name = "items", version = 1)]
    pub struct Item {
        #[record(key)]
        pub id: u32,
        pub name: String,
        #[record(index)]
        pub score: i64,
        #[record(unique)]
        pub email: String,
        pub tags: Vec<String>,
        pub attrs: BTreeMap<String, i32>,
        pub kind: Kind,
        pub ratio: Option<f64>,
    }

    #[derive(Debug, Clone, PartialEq, Embed)]
    pub enum Kind {
        Plain,
        Tagged { label: String },
    }

    pub fn item(id: u32) -> Item {
        Item {
            id,
            name: format!("item {id}"),
            score: (id as i64 * 37) % 101 - 50,
            email: format!("user{id}@example.com"),
            tags: (0..id % 4).map(|t| format!("t{t}")).collect(),
            attrs: (0..id % 3).map(|a| (format!("a{a}"), a as i32 * id as i32)).collect(),
            kind: if id % 2 == 0 { Kind::Plain } else { Kind::Tagged { label: format!("L{}", id % 5) } },
            ratio: (id % 3 != 0).then(|| id as f64 / 8.0),
        }
    }
}

#[test]
fn records_of_earlier_storage_formats_read_the_same_through_every_view_accessor() {
    use fixture::{Item, item};
    for name in ["v1.tessera", "v2.tessera"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::copy(format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR")), &path).unwrap();
        for verify_checksums in [true, false] {
            let db = Db::open_with(&path, tessera::DbOptions { verify_checksums, ..Default::default() }).unwrap();
            let items = db.collection::<Item>().unwrap();
            let tx = db.read_txn().unwrap();
            for id in 0..200u32 {
                let expected = item(id);
                let view = items.get_ref(&tx, &id).unwrap().unwrap_or_else(|| panic!("{name}: {id} missing"));
                assert_eq!(view.decode().unwrap(), expected, "{name}");
                assert_eq!(view.id().unwrap(), id);
                assert_eq!(view.name().unwrap(), expected.name);
                assert_eq!(view.score().unwrap(), expected.score);
                assert_eq!(view.email().unwrap(), expected.email);
                assert_eq!(view.tags().unwrap(), expected.tags);
                let attrs: BTreeMap<String, i32> = view.attrs().unwrap().into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
                assert_eq!(attrs, expected.attrs, "{name}: {id}");
                assert_eq!(view.kind().unwrap(), expected.kind);
                assert_eq!(view.ratio().unwrap(), expected.ratio);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Numbers in vectors and matrices (which the encoder may pack), bit for bit.

#[derive(Record, Debug, Clone)]
#[record(name = "numbers")]
struct Numbers {
    #[record(key)]
    id: u32,
    doubles: Vec<f64>,
    singles: Vec<f32>,
    ints: Vec<i64>,
    bytes: Vec<u8>,
    maybe: Vec<Option<i16>>,
    matrix: Vec<Vec<f32>>,
    scalar: f64,
}

fn bits64(values: &[f64]) -> Vec<u64> {
    values.iter().map(|v| v.to_bits()).collect()
}

fn bits32(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

fn double() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        proptest::sample::select(vec![0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::MIN_POSITIVE, 5e-324, 1.5, f64::MAX, 16777217.0]),
        any::<f32>().prop_map(f64::from),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn numbers_read_back_bit_for_bit_through_get_and_the_view(
        doubles in proptest::collection::vec(double(), 0..6),
        singles in proptest::collection::vec(any::<f32>(), 0..6),
        ints in proptest::collection::vec(any::<i64>(), 0..6),
        bytes in proptest::collection::vec(any::<u8>(), 0..6),
        maybe in proptest::collection::vec(proptest::option::of(any::<i16>()), 0..6),
        columns in 1usize..4,
        rows in proptest::collection::vec(proptest::collection::vec(any::<f32>(), 3), 0..4),
        scalar in double(),
    ) {
        let matrix: Vec<Vec<f32>> = rows.into_iter().map(|row| row[..columns].to_vec()).collect();
        let record = Numbers { id: 1, doubles, singles, ints, bytes, maybe, matrix, scalar };
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path().join("db")).unwrap();
        let numbers = db.collection::<Numbers>().unwrap();
        db.write(|tx| numbers.insert(tx, &record).map(drop)).unwrap();
        let read = numbers.get(&db, &1u32).unwrap().unwrap();
        let tx = db.read_txn().unwrap();
        let view = numbers.get_ref(&tx, &1u32).unwrap().unwrap();
        for (what, doubles) in [("get", read.doubles.clone()), ("view", view.doubles().unwrap())] {
            prop_assert_eq!(bits64(&doubles), bits64(&record.doubles), "{}", what);
        }
        for (what, singles) in [("get", read.singles.clone()), ("view", view.singles().unwrap())] {
            prop_assert_eq!(bits32(&singles), bits32(&record.singles), "{}", what);
        }
        prop_assert_eq!(&read.ints, &record.ints);
        prop_assert_eq!(&view.ints().unwrap(), &record.ints);
        prop_assert_eq!(&read.bytes, &record.bytes);
        prop_assert_eq!(&view.bytes().unwrap(), &record.bytes);
        prop_assert_eq!(&read.maybe, &record.maybe);
        prop_assert_eq!(&view.maybe().unwrap(), &record.maybe);
        let expected: Vec<Vec<u32>> = record.matrix.iter().map(|row| bits32(row)).collect();
        prop_assert_eq!(read.matrix.iter().map(|row| bits32(row)).collect::<Vec<_>>(), expected.clone());
        prop_assert_eq!(view.matrix().unwrap().iter().map(|row| bits32(row)).collect::<Vec<_>>(), expected);
        prop_assert_eq!(read.scalar.to_bits(), record.scalar.to_bits());
        prop_assert_eq!(view.scalar().unwrap().to_bits(), record.scalar.to_bits());
    }
}

/// A variant the type has, stored without the payload it needs or with one it does not take,
/// is not "an unknown variant": the error says what is wrong, at the variant's path.
#[test]
fn a_known_variant_with_the_wrong_payload_is_not_called_unknown() {
    let cases = [
        ("shape", serde_json::json!("Rect"), "shape.Rect"),
        ("shape", serde_json::json!("Circle"), "shape.Circle"),
        ("shape", serde_json::json!({"Dot": 5}), "shape.Dot"),
        ("shape", serde_json::json!({"Dot": {}}), "shape.Dot"),
    ];
    for (field, stored, path) in cases {
        let dir = tempfile::tempdir().unwrap();
        let db_path = dir.path().join("db");
        database_with(&db_path, 3, &spoiled(|r| r[field] = stored.clone()));
        let (db, things) = open(&db_path);
        match things.get(&db, &3u32) {
            Err(Error::RecordDecode { field: error_field, message, .. }) => {
                assert_eq!(error_field, path, "{stored}: {message}");
                assert!(!message.contains("unknown variant"), "{stored}: {message}");
            }
            other => panic!("{stored}: {other:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Errors of a record with a composite key name the whole key.

#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "pairs")]
struct Paired {
    #[record(key)]
    group: String,
    #[record(key)]
    n: u32,
    pos: Pos,
}

#[test]
fn a_field_error_of_a_record_with_a_composite_key_names_every_part_of_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let key = ("g.x".to_owned(), 7u32);
    {
        let db = Db::open(&path).unwrap();
        let pairs = db.collection::<Paired>().unwrap();
        db.write(|tx| pairs.insert(tx, &Paired { group: key.0.clone(), n: key.1, pos: Pos { x: 1, y: None } }).map(drop)).unwrap();
    }
    with_raw(&path, |env, txn| {
        let table = raw_db(env, txn, "tessera.keys");
        let keys = SharedKeys::from_bytes(unsealed(table.get(txn, b"pairs").unwrap().unwrap())).unwrap();
        let records = raw_db(env, txn, "tessera.col.pairs");
        let stored_key = records.iter(txn).unwrap().next().unwrap().unwrap().0.to_vec();
        let record = serde_json::json!({"group": "g.x", "n": 7, "pos": {"x": "one", "y": null}});
        let bytes = tessera::value::to_vec_with_keys(&record, &keys).unwrap();
        records.put(txn, &stored_key, &sealed(&stored_key, &bytes)).unwrap();
    });
    let db = Db::open(&path).unwrap();
    let pairs = db.collection::<Paired>().unwrap();
    let check = |result: tessera::Result<String>, what: &str| match result {
        Err(Error::RecordDecode { collection, key: shown, field, message }) => {
            assert_eq!((collection.as_str(), field.as_str()), ("pairs", "pos.x"), "{what}: {message}");
            assert!(shown.contains("g.x") && shown.contains('7'), "{what}: the key is shown as {shown:?}");
        }
        other => panic!("{what}: {other:?}"),
    };
    check(pairs.get(&db, &key).map(|p| format!("{p:?}")), "get");
    let tx = db.read_txn().unwrap();
    let view = pairs.get_ref(&tx, &key).unwrap().unwrap();
    check(view.pos().map(|p| format!("{p:?}")), "view");
    assert_eq!(view.group().unwrap(), "g.x");
    assert_eq!(view.n().unwrap(), 7);
}
