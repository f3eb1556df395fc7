//! Adversarial review of replication into PostgreSQL: values PostgreSQL cannot hold as tessera
//! stores them, names, schema changes, tables of another shape, and replicators that change
//! their collection set. One PostgreSQL server per test binary (shared while tests run), one
//! database per test. The rule checked everywhere: PostgreSQL equals tessera, or the replicator
//! fails with a typed error naming what was wrong (and moves no cursor).

use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex, Weak};
use tessera::collection::{Describe, DynSchema, KeyKind, Record, TypeDesc};
use tessera::store::{Durability, FeedRetention};
use tessera::{Db, DbOptions};
use tessera_postgres::{ReplicateError, Replicator, ReplicatorOptions, TempPostgres, postgres_digest, tessera_digest};

/// The server the running tests share; started by the first, stopped when the last drops it.
static SERVER: Mutex<Weak<TempPostgres>> = Mutex::new(Weak::new());

/// A database of its own on the shared server.
struct Pg {
    _server: Arc<TempPostgres>,
    url: String,
}

impl Pg {
    fn new(name: &str) -> Pg {
        let server = {
            let mut shared = SERVER.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            match shared.upgrade() {
                Some(server) => server,
                None => {
                    let server = Arc::new(TempPostgres::start().expect("start a PostgreSQL server (initdb and pg_ctl)"));
                    *shared = Arc::downgrade(&server);
                    server
                }
            }
        };
        let mut admin = postgres::Client::connect(&server.url(), postgres::NoTls).expect("connect to the test server");
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name}")).unwrap();
        admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        let url = server.url().replace("dbname=postgres", &format!("dbname={name}"));
        Pg { _server: server, url }
    }

    fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).expect("connect to the test database")
    }

    fn options(&self) -> ReplicatorOptions {
        let mut options = ReplicatorOptions::new(&self.url);
        options.retry.delay_initial_ms = 10;
        options.retry.delay_max_ms = 100;
        options.retry.attempts_max = 5;
        options
    }

    /// The consumer's cursor row, if any.
    fn cursor(&self) -> Option<i64> {
        self.client().query_opt("SELECT cursor FROM tessera_replication WHERE consumer = 'postgres'", &[]).unwrap().map(|row| row.get(0))
    }

    /// Asserts every table equals its collection: count, and each row's jsonb text against
    /// the record's canonical JSON (through the crate's digest), by stored key.
    fn assert_equal(&self, db: &Db, tables: &[&str]) {
        let mut client = self.client();
        for table in tables {
            let source = tessera_digest(db, table).unwrap();
            let replica = postgres_digest(&mut client, table).unwrap();
            assert_eq!(replica, source, "table {table}: PostgreSQL differs from tessera");
        }
    }
}

fn open(dir: &tempfile::TempDir) -> Db {
    let options = DbOptions {
        durable_feed: true,
        feed_retention: FeedRetention { commits_max: 100_000, ..FeedRetention::default() },
        durability: Durability::Immediate,
        ..DbOptions::default()
    };
    Db::open_with(dir.path().join("db"), options).expect("open the database")
}

#[derive(Debug, Clone, Serialize, Deserialize, Record)]
#[record(name = "floats")]
struct Floats {
    #[record(key)]
    id: u32,
    #[record(index)]
    indexed: f64,
    plain: f64,
}

/// The record's jsonb text in PostgreSQL, by key column `id`.
fn record_text(pg: &Pg, table: &str, id: i64) -> Option<String> {
    pg.client().query_opt(&format!("SELECT record::text FROM {table} WHERE id = $1"), &[&id]).unwrap().map(|row| row.get(0))
}

/// NaN and ±infinity cannot be jsonb numbers. Before, tessera's JSON wrote them as `null`, so
/// the replica's `record` said `null` where tessera holds NaN (and the crate's own digest,
/// computed from the same JSON on both sides, called the replica equal).
#[test]
fn nan_and_infinities_are_refused_naming_the_field_not_stored_as_null() {
    let pg = Pg::new("review_nan");
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let floats = db.collection::<Floats>().unwrap();
    db.write(|tx| floats.insert(tx, &Floats { id: 1, indexed: 1.5, plain: 2.5 }).map(drop)).unwrap();
    let mut replicator = Replicator::start(&db, pg.options()).unwrap();
    let mut cursor = pg.cursor().expect("the first run sets the cursor");
    for (id, value) in [(2u32, f64::NAN), (3, f64::INFINITY), (4, f64::NEG_INFINITY)] {
        db.write(|tx| floats.insert(tx, &Floats { id, indexed: 0.5, plain: value }).map(drop)).unwrap();
        match replicator.catch_up() {
            Err(ReplicateError::Value { collection, key, field, .. }) => {
                assert_eq!((collection.as_str(), key.as_str(), field.as_str()), ("floats", id.to_string().as_str(), "plain"));
            }
            other => panic!(
                "{value}: expected a Value error naming field plain, got {other:?}; PostgreSQL has {:?}",
                record_text(&pg, "floats", id.into())
            ),
        }
        assert_eq!(pg.cursor(), Some(cursor), "the cursor stays before the refused commit");
        assert_eq!(record_text(&pg, "floats", id.into()), None);
        // Once the record is gone, the group's net change is a delete: replicated.
        db.write(|tx| floats.delete(tx, &id).map(drop)).unwrap();
        replicator = Replicator::start(&db, pg.options()).unwrap();
        replicator.catch_up().unwrap();
        cursor = pg.cursor().unwrap();
        pg.assert_equal(&db, &["floats"]);
    }
    // In an indexed (double precision) column too.
    db.write(|tx| floats.insert(tx, &Floats { id: 9, indexed: f64::NAN, plain: 0.0 }).map(drop)).unwrap();
    match replicator.catch_up() {
        Err(ReplicateError::Value { field, .. }) => assert_eq!(field, "indexed"),
        other => panic!("expected a Value error naming field indexed, got {other:?}; PostgreSQL has {:?}", record_text(&pg, "floats", 9)),
    }
}

/// jsonb numbers are `numeric`, which has no negative zero: `-0.0` came back `0.0`.
#[test]
fn negative_zero_is_kept_or_refused() {
    let pg = Pg::new("review_negzero");
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let floats = db.collection::<Floats>().unwrap();
    db.write(|tx| floats.insert(tx, &Floats { id: 1, indexed: -0.0, plain: -0.0 }).map(drop)).unwrap();
    match Replicator::start(&db, pg.options()) {
        Ok(mut replicator) => {
            replicator.catch_up().unwrap();
            let text = record_text(&pg, "floats", 1).unwrap();
            assert!(text.contains("-0"), "tessera holds -0.0, PostgreSQL's record is {text}");
            pg.assert_equal(&db, &["floats"]);
        }
        Err(ReplicateError::Value { field, .. }) => assert!(field == "plain" || field == "indexed", "{field}"),
        Err(other) => panic!("expected Ok or a Value error, got {other:?}"),
    }
}

/// A float written in exponent form (`1e18`) became an integer-valued `numeric` in jsonb
/// (`1000000000000000000`), which reads back as an integer: re-typed.
#[test]
fn large_floats_stay_floats_in_the_record() {
    let pg = Pg::new("review_bigfloat");
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let floats = db.collection::<Floats>().unwrap();
    let values = [1e16, 1e18, 1.5e17, 1e300, -2.5e40, 5e-324, 1.0, 123456789.0, f64::MAX, f64::MIN_POSITIVE];
    db.write(|tx| {
        values
            .iter()
            .enumerate()
            .try_for_each(|(id, &value)| floats.insert(tx, &Floats { id: id as u32, indexed: value, plain: value }).map(drop))
    })
    .unwrap();
    let mut replicator = Replicator::start(&db, pg.options()).unwrap();
    // And through the feed.
    db.write(|tx| floats.insert(tx, &Floats { id: 100, indexed: 2e20, plain: 3e19 }).map(drop)).unwrap();
    replicator.catch_up().unwrap();
    let mut client = pg.client();
    for row in client.query("SELECT id, indexed, jsonb_typeof(record->'plain'), (record->>'plain')::float8 FROM floats", &[]).unwrap() {
        let id: i64 = row.get(0);
        let stored = floats.get(&db, &(id as u32)).unwrap().unwrap();
        assert_eq!(row.get::<_, f64>(1).to_bits(), stored.indexed.to_bits(), "id {id}: the double precision column");
        assert_eq!(row.get::<_, f64>(3).to_bits(), stored.plain.to_bits(), "id {id}: the jsonb number's value");
    }
    pg.assert_equal(&db, &["floats"]);
}

#[derive(Debug, Clone, Serialize, Deserialize, Record)]
#[record(name = "texts")]
struct Texts {
    #[record(key)]
    id: u32,
    #[record(index)]
    label: String,
    body: String,
    nested: Vec<Inner>,
}

#[derive(Debug, Clone, Serialize, Deserialize, tessera::collection::Embed)]
struct Inner {
    text: String,
}

/// A NUL character is refused (text and jsonb cannot hold it), naming the field it is in; a
/// string that merely spells `\u0000` (a backslash, a `u` and four zeros) is data like any
/// other and must replicate.
#[test]
fn nul_is_refused_naming_its_field_and_a_spelled_escape_is_not_a_nul() {
    let pg = Pg::new("review_nul");
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let texts = db.collection::<Texts>().unwrap();
    let spelled = Texts { id: 1, label: "a\\u0000b".into(), body: "\\u0000".into(), nested: vec![Inner { text: "x\\\\u0000".into() }] };
    db.write(|tx| texts.insert(tx, &spelled).map(drop)).unwrap();
    let mut replicator = match Replicator::start(&db, pg.options()) {
        Ok(replicator) => replicator,
        Err(error) => panic!("a record without any NUL character was refused: {error}"),
    };
    pg.assert_equal(&db, &["texts"]);
    let label: String = pg.client().query_one("SELECT label FROM texts WHERE id = 1", &[]).unwrap().get(0);
    assert_eq!(label, spelled.label);
    let mut cursor = pg.cursor();
    for (record, expected_field) in [
        (Texts { id: 2, label: "ok".into(), body: "a\0b".into(), nested: vec![] }, "body"),
        (Texts { id: 3, label: "ok".into(), body: "ok".into(), nested: vec![Inner { text: "\0".into() }] }, "nested.0.text"),
        (Texts { id: 4, label: "a\0".into(), body: "ok".into(), nested: vec![] }, "label"),
    ] {
        let id = record.id;
        db.write(|tx| texts.insert(tx, &record).map(drop)).unwrap();
        match replicator.catch_up() {
            Err(ReplicateError::Value { collection, key, field, .. }) => {
                assert_eq!((collection.as_str(), key.as_str()), ("texts", id.to_string().as_str()));
                // The field is named (a nested one by its path, or at least its top field).
                assert!(
                    field == expected_field || expected_field.starts_with(&format!("{field}.")),
                    "id {id}: the error names field {field:?}, the NUL is in {expected_field}"
                );
            }
            other => panic!("id {id}: expected a Value error, got {other:?}"),
        }
        assert_eq!(pg.cursor(), cursor);
        assert_eq!(pg.client().query_one("SELECT count(*) FROM texts", &[]).unwrap().get::<_, i64>(0), 1);
        // Once the record is gone, the group's net change is a delete: replicated.
        db.write(|tx| texts.delete(tx, &id).map(drop)).unwrap();
        replicator = Replicator::start(&db, pg.options()).unwrap();
        replicator.catch_up().unwrap();
        cursor = pg.cursor();
        pg.assert_equal(&db, &["texts"]);
    }
}

/// Raw bytes as a serde bytes value, described as `TypeDesc::Bytes`.
#[derive(Debug, Clone, PartialEq)]
struct Blob(Vec<u8>);

impl Serialize for Blob {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Blob {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Blob;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Blob, E> {
                Ok(Blob(v.to_vec()))
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Blob, E> {
                Ok(Blob(v))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Blob, A::Error> {
                let mut out = Vec::new();
                while let Some(byte) = seq.next_element::<u8>()? {
                    out.push(byte);
                }
                Ok(Blob(out))
            }
        }
        deserializer.deserialize_byte_buf(Visitor)
    }
}

impl tessera::codec::Encode for Blob {
    fn encode(&self, out: &mut tessera_value::Encoder<'_>, _ids: &tessera::codec::FieldIds) -> Result<(), tessera_value::EncodeError> {
        out.push_bytes(&self.0)
    }
}

impl<'a> tessera::codec::Decode<'a> for Blob {
    fn decode(value: tessera_value::Value<'a>, _ids: &tessera::codec::FieldIds) -> Result<Self, tessera::codec::FieldError> {
        value.as_bytes().map(|bytes| Blob(bytes.to_vec())).ok_or_else(|| tessera::codec::FieldError::wrong_type("bytes", value))
    }
}

impl<'a> tessera::codec::View<'a> for Blob {
    type Out = &'a [u8];
    fn view(value: tessera_value::Value<'a>, _ids: &tessera::codec::FieldIds) -> Result<&'a [u8], tessera::codec::FieldError> {
        value.as_bytes().ok_or_else(|| tessera::codec::FieldError::wrong_type("bytes", value))
    }
}

impl Describe for Blob {
    fn describe() -> TypeDesc {
        TypeDesc::Bytes
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, Record)]
#[record(name = "blobs")]
struct BlobV1 {
    #[record(key)]
    id: u32,
    data: Blob,
}

#[derive(Debug, Clone, Serialize, Deserialize, Record)]
#[record(name = "blobs", version = 2)]
struct BlobV2 {
    #[record(key)]
    id: u32,
    #[record(index)]
    data: Blob,
}

/// A bytes field indexed later gets a `bytea` column; before, the rows already there were
/// left NULL ("until the record changes") while tessera holds their bytes.
#[test]
fn a_bytes_field_indexed_later_has_its_column_filled() {
    let pg = Pg::new("review_bytes");
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let blobs = db.collection::<BlobV1>().unwrap();
    let data = |id: u32| Blob(vec![0, 0xff, id as u8, b'"', b'\\', 0x80]);
    db.write(|tx| (0..5).try_for_each(|id| blobs.insert(tx, &BlobV1 { id, data: data(id) }).map(drop))).unwrap();
    let mut replicator = Replicator::start(&db, pg.options()).unwrap();
    pg.assert_equal(&db, &["blobs"]);
    drop(blobs);
    let blobs = match db.collection::<BlobV2>() {
        Ok(blobs) => blobs,
        Err(error) => {
            eprintln!("tessera does not index bytes fields ({error}): nothing to check");
            return;
        }
    };
    assert!(blobs.wait_for_indexes(std::time::Duration::from_secs(10)));
    db.write(|tx| blobs.upsert(tx, &BlobV2 { id: 7, data: data(7) }).map(drop)).unwrap();
    replicator.catch_up().unwrap();
    let mut client = pg.client();
    let rows = client.query("SELECT id, data FROM blobs ORDER BY id", &[]).unwrap();
    assert_eq!(rows.len(), 6);
    for row in rows {
        let id: i64 = row.get(0);
        let column: Option<Vec<u8>> = row.get(1);
        assert_eq!(column, Some(data(id as u32).0), "id {id}: the bytea column of a newly indexed bytes field");
    }
    pg.assert_equal(&db, &["blobs"]);
}

#[derive(Debug, Clone, Serialize, Deserialize, Record)]
#[record(name = "big")]
struct Big {
    #[record(key)]
    id: u64,
    #[record(index)]
    count: u64,
}

/// A `bigint` column accepted for a `u64` field: a value above `i64::MAX` must be a typed
/// error naming the collection, key and field, and nothing of the group may apply.
#[test]
fn a_u64_above_bigint_in_an_accepted_bigint_column_is_a_typed_error_and_applies_nothing() {
    let pg = Pg::new("review_u64");
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let big = db.collection::<Big>().unwrap();
    let floats = db.collection::<Floats>().unwrap();
    pg.client()
        .batch_execute("CREATE TABLE big (tessera_key bytea PRIMARY KEY, id bigint NOT NULL, count bigint, record jsonb NOT NULL)")
        .unwrap();
    db.write(|tx| big.insert(tx, &Big { id: 1, count: 5 }).map(drop)).unwrap();
    let mut replicator = Replicator::start(&db, pg.options()).unwrap();
    let cursor = pg.cursor();
    // One commit touching both tables: `big` sorts before `floats`, so the other's rows would
    // be written in the same transaction.
    db.write(|tx| {
        floats.insert(tx, &Floats { id: 1, indexed: 1.0, plain: 2.0 })?;
        big.insert(tx, &Big { id: 2, count: u64::MAX }).map(drop)
    })
    .unwrap();
    let error = replicator.catch_up().unwrap_err();
    assert_eq!(pg.cursor(), cursor, "the cursor did not move");
    let floats_rows: i64 = pg.client().query_one("SELECT count(*) FROM floats", &[]).unwrap().get(0);
    assert_eq!(floats_rows, 0, "nothing of the refused commit applied");
    match error {
        ReplicateError::Value { collection, key, field, .. } => assert_eq!((&*collection, &*key, &*field), ("big", "2", "count")),
        ReplicateError::TableShape { table, column, .. } => assert_eq!((&*table, &*column), ("big", "count")),
        other => panic!("expected an error naming collection big, key 2, field count; got {other:?} ({other})"),
    }
    // Repaired by hand, the replicator resumes exactly from its cursor.
    pg.client().batch_execute("ALTER TABLE big ALTER COLUMN count TYPE numeric, ALTER COLUMN id TYPE numeric").unwrap();
    let mut replicator = Replicator::start(&db, pg.options()).unwrap();
    replicator.catch_up().unwrap();
    pg.assert_equal(&db, &["big", "floats"]);
}

#[derive(Debug, Clone, Serialize, Deserialize, Record)]
#[record(name = "people")]
struct Person {
    #[record(key)]
    id: u32,
    #[record(index)]
    name: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, Record)]
#[record(name = "notes")]
struct Note {
    #[record(key)]
    title: String,
    body: String,
}

/// A consumer that replicated `--collections notes` started again for every collection:
/// `people`'s records written before the cursor were never copied (its table was created
/// empty and only got later changes), and `catch_up` returned Ok.
#[test]
fn widening_the_collection_set_does_not_silently_miss_earlier_records() {
    let pg = Pg::new("review_widen");
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let people = db.collection::<Person>().unwrap();
    let notes = db.collection::<Note>().unwrap();
    db.write(|tx| {
        (0..20).try_for_each(|id| people.insert(tx, &Person { id, name: format!("p{id}") }).map(drop))?;
        notes.insert(tx, &Note { title: "a".into(), body: "x".into() }).map(drop)
    })
    .unwrap();
    let mut only_notes = pg.options();
    only_notes.collections = Some(vec!["notes".into()]);
    Replicator::start(&db, only_notes.clone()).unwrap().catch_up().unwrap();
    db.write(|tx| people.upsert(tx, &Person { id: 100, name: "later".into() }).map(drop)).unwrap();
    match Replicator::start(&db, pg.options()).and_then(|mut replicator| replicator.catch_up()) {
        Ok(_) => pg.assert_equal(&db, &["people", "notes"]),
        // Refusing is fine too, if it says which collection.
        Err(error) => {
            assert!(matches!(error, ReplicateError::Options { option: "collections", .. }), "{error:?}");
            assert!(error.to_string().contains("people"), "{error}");
            let mut resync = pg.options();
            resync.resync = true;
            Replicator::start(&db, resync).unwrap().catch_up().unwrap();
            pg.assert_equal(&db, &["people", "notes"]);
        }
    }
    // Narrowing is not refused: the replica holds what it is asked for.
    db.write(|tx| notes.upsert(tx, &Note { title: "b".into(), body: "y".into() }).map(drop)).unwrap();
    Replicator::start(&db, only_notes.clone()).unwrap().catch_up().unwrap();
    pg.assert_equal(&db, &["notes"]);
}

/// Two replicators of one consumer at once, one for every collection and one narrowed to
/// `notes`: the narrowed one moves the shared cursor past `people`'s commits, and the other,
/// adopting that cursor, would skip them.
#[test]
fn a_narrower_replicator_of_the_same_consumer_stops_the_wider_one() {
    let pg = Pg::new("review_narrow_live");
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let people = db.collection::<Person>().unwrap();
    let notes = db.collection::<Note>().unwrap();
    let mut wide = Replicator::start(&db, pg.options()).unwrap();
    let mut only_notes = pg.options();
    only_notes.collections = Some(vec!["notes".into()]);
    let mut narrow = Replicator::start(&db, only_notes).unwrap();
    db.write(|tx| {
        people.upsert(tx, &Person { id: 1, name: "one".into() })?;
        notes.upsert(tx, &Note { title: "t".into(), body: "b".into() }).map(drop)
    })
    .unwrap();
    narrow.catch_up().unwrap();
    db.write(|tx| people.upsert(tx, &Person { id: 2, name: "two".into() }).map(drop)).unwrap();
    match wide.catch_up() {
        Ok(_) => pg.assert_equal(&db, &["people", "notes"]),
        Err(error) => assert!(matches!(error, ReplicateError::Options { option: "collections", .. }), "{error:?}"),
    }
}

/// Two runs with the same consumer and different `--collections`, one after the other: each
/// adopted the cursor the other moved, skipping the other's collection's commits.
#[test]
fn runs_with_different_collection_sets_on_one_consumer_do_not_skip_commits() {
    let pg = Pg::new("review_alternate");
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let people = db.collection::<Person>().unwrap();
    let notes = db.collection::<Note>().unwrap();
    let mut only_people = pg.options();
    only_people.collections = Some(vec!["people".into()]);
    let mut only_notes = pg.options();
    only_notes.collections = Some(vec!["notes".into()]);
    Replicator::start(&db, only_people.clone()).unwrap().catch_up().unwrap();
    let outcome = (|| -> Result<(), ReplicateError> {
        for round in 0..3u32 {
            db.write(|tx| {
                people.upsert(tx, &Person { id: round, name: format!("r{round}") })?;
                notes.upsert(tx, &Note { title: format!("t{round}"), body: "b".into() }).map(drop)
            })
            .unwrap();
            Replicator::start(&db, only_notes.clone())?.catch_up()?;
            Replicator::start(&db, only_people.clone())?.catch_up()?;
        }
        Ok(())
    })();
    match outcome {
        Ok(()) => pg.assert_equal(&db, &["people", "notes"]),
        Err(error) => {
            assert!(matches!(error, ReplicateError::Options { option: "collections", .. }), "{error:?}");
            assert!(error.to_string().contains("notes"), "{error}");
        }
    }
}

/// Composite keys, keys that differ only in case or trailing spaces, names that need quoting:
/// every row kept, distinct.
#[test]
fn keys_differing_in_case_or_trailing_space_and_names_needing_quotes_stay_distinct() {
    let pg = Pg::new("review_keys");
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let schema = DynSchema {
        version: 1,
        key_fields: vec!["K\"ey".into(), "b".into()],
        key_kinds: vec![KeyKind::String, KeyKind::I64],
        shape: TypeDesc::Struct(vec![
            ("K\"ey".into(), TypeDesc::String),
            ("b".into(), TypeDesc::Int),
            ("Select".into(), TypeDesc::Option(Box::new(TypeDesc::String))),
        ]),
        indexes: vec![tessera::collection::DynIndex { path: "Select".into(), unique: false, ready: true, failure: None }],
    };
    let name = "Odd \"Name\"; DROP TABLE x; --";
    let odd = db.create_dyn_collection(name, &schema).unwrap();
    let lower = db.create_dyn_collection("odd \"name\"; drop table x; --", &schema).unwrap();
    let mut replicator = Replicator::start(&db, pg.options()).unwrap();
    db.write(|tx| {
        for key in ["a", "A", "a ", "a  ", " a"] {
            for b in [-1i64, 0, 1] {
                let json = serde_json::json!({"K\"ey": key, "b": b, "Select": format!("{key}|{b}")}).to_string();
                odd.insert_json(tx, json.as_bytes())?;
                lower.insert_json(tx, json.as_bytes())?;
            }
        }
        Ok(())
    })
    .unwrap();
    replicator.catch_up().unwrap();
    pg.assert_equal(&db, &[name, "odd \"name\"; drop table x; --"]);
    let count: i64 =
        pg.client().query_one("SELECT count(DISTINCT \"Select\") FROM \"Odd \"\"Name\"\"; DROP TABLE x; --\"", &[]).unwrap().get(0);
    assert_eq!(count, 15);
    // Deleting keys never replicated (and then some that were) keeps them equal.
    db.write(|tx| {
        odd.delete(tx, tessera_value::Doc::from_untrusted(&tessera_value::from_json(br#"["zz", 5]"#).unwrap()).unwrap().root())?;
        odd.delete(tx, tessera_value::Doc::from_untrusted(&tessera_value::from_json(br#"["a ", 0]"#).unwrap()).unwrap().root()).map(drop)
    })
    .unwrap();
    replicator.catch_up().unwrap();
    pg.assert_equal(&db, &[name]);
}

/// A dynamic collection whose indexed field holds values of mixed types, a deeply nested
/// record, a long string, unsigned values above `i64::MAX`.
#[test]
fn a_dynamic_collection_of_mixed_values_replicates_equal() {
    let pg = Pg::new("review_mixed");
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let schema = DynSchema {
        version: 1,
        key_fields: vec!["id".into()],
        key_kinds: vec![KeyKind::U64],
        shape: TypeDesc::Struct(vec![
            ("id".into(), TypeDesc::Int),
            ("v".into(), TypeDesc::Any),
            ("n".into(), TypeDesc::Option(Box::new(TypeDesc::Int))),
            ("f".into(), TypeDesc::Option(Box::new(TypeDesc::Float))),
        ]),
        indexes: vec![
            tessera::collection::DynIndex { path: "v".into(), unique: false, ready: true, failure: None },
            tessera::collection::DynIndex { path: "n".into(), unique: false, ready: true, failure: None },
            tessera::collection::DynIndex { path: "f".into(), unique: false, ready: true, failure: None },
        ],
    };
    let mixed = db.create_dyn_collection("mixed", &schema).unwrap();
    let mut replicator = Replicator::start(&db, pg.options()).unwrap();
    let mut deep = String::new();
    for _ in 0..60 {
        deep.push_str("{\"a\":[");
    }
    deep.push('1');
    for _ in 0..60 {
        deep.push_str("]}");
    }
    let long = "é".repeat(300_000);
    let records = [
        r#"{"id": 18446744073709551615, "v": 1, "n": 18446744073709551615}"#.to_string(),
        r#"{"id": 1, "v": "text", "n": -9223372036854775808}"#.to_string(),
        r#"{"id": 2, "v": [1, "x", null], "n": 0}"#.to_string(),
        r#"{"id": 3, "v": {"k": true}}"#.to_string(),
        r#"{"id": 4, "v": 2.5, "n": null}"#.to_string(),
        format!(r#"{{"id": 5, "v": {deep}}}"#),
        format!(r#"{{"id": 6, "v": "{long}"}}"#),
        r#"{"id": 7, "v": null}"#.to_string(),
    ];
    db.write(|tx| records.iter().try_for_each(|json| mixed.insert_json(tx, json.as_bytes()).map(drop))).unwrap();
    replicator.catch_up().unwrap();
    pg.assert_equal(&db, &["mixed"]);
    let n: String = pg.client().query_one("SELECT n::text FROM mixed WHERE id = 18446744073709551615", &[]).unwrap().get(0);
    assert_eq!(n, "18446744073709551615");
    let v: Option<String> = pg.client().query_one("SELECT v::text FROM mixed WHERE id = 7", &[]).unwrap().get(0);
    assert_eq!(v, None, "a null field is NULL");
    // An integer in a float field: stored as the integer, a double column would round it.
    if db.write(|tx| mixed.insert_json(tx, br#"{"id": 8, "v": 0, "f": 9007199254740993}"#).map(drop)).is_err() {
        return; // tessera refuses it (it cannot be held exactly by f64): nothing to replicate
    }
    let json = mixed.get_json(&db, "8").unwrap().unwrap().to_json();
    let outcome = replicator.catch_up();
    if json.contains(r#""f":9007199254740993"#) {
        match outcome {
            Err(ReplicateError::Value { field, .. }) => assert_eq!(field, "f"),
            other => {
                let f: Option<f64> = pg.client().query_one("SELECT f FROM mixed WHERE id = 8", &[]).unwrap().get(0);
                panic!("tessera holds {json}, the double precision column {f:?} (2^53 + 1 rounded): {other:?}")
            }
        }
    } else {
        outcome.unwrap();
        pg.assert_equal(&db, &["mixed"]);
    }
}

/// A table created beforehand with another shape is refused naming the column, for each kind
/// of difference; a collection named like the cursor table too.
#[test]
fn tables_of_another_shape_are_refused_naming_the_column() {
    let pg = Pg::new("review_shape");
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    db.collection::<Person>().unwrap();
    for (ddl, column) in [
        ("CREATE TABLE people (tessera_key text PRIMARY KEY, id bigint NOT NULL, record jsonb NOT NULL)", "tessera_key"),
        ("CREATE TABLE people (tessera_key bytea PRIMARY KEY, id bigint NOT NULL, record json NOT NULL)", "record"),
        ("CREATE TABLE people (tessera_key bytea PRIMARY KEY, id text NOT NULL, record jsonb NOT NULL)", "id"),
        ("CREATE TABLE people (tessera_key bytea PRIMARY KEY, record jsonb NOT NULL)", "id"),
        ("CREATE TABLE people (tessera_key bytea PRIMARY KEY, id bigint, name varchar(3), record jsonb NOT NULL)", "name"),
    ] {
        pg.client().batch_execute(&format!("DROP TABLE IF EXISTS people; {ddl}")).unwrap();
        match Replicator::start(&db, pg.options()) {
            Err(ReplicateError::TableShape { table, column: found, .. }) => assert_eq!((&*table, &*found), ("people", column), "{ddl}"),
            other => panic!("{ddl}: expected TableShape naming {column}, got {other:?}"),
        }
        assert_eq!(pg.cursor(), None);
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, Record)]
#[record(name = "people", version = 2)]
struct PersonNameless {
    #[record(key)]
    id: u32,
    name: String,
}

/// An index dropped in a later version: "a dropped index leaves its column" — and the column
/// then keeps the old values while the records change.
#[test]
fn a_dropped_index_does_not_leave_stale_values_in_its_column() {
    let pg = Pg::new("review_dropped_index");
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let people = db.collection::<Person>().unwrap();
    db.write(|tx| people.insert(tx, &Person { id: 1, name: "old".into() }).map(drop)).unwrap();
    let mut replicator = Replicator::start(&db, pg.options()).unwrap();
    drop(people);
    let people = db.collection::<PersonNameless>().unwrap();
    if db.dyn_collection("people").unwrap().schema().indexes.iter().any(|index| index.path == "name") {
        eprintln!("tessera keeps the index: nothing to check");
        return;
    }
    db.write(|tx| people.upsert(tx, &PersonNameless { id: 1, name: "new".into() }).map(drop)).unwrap();
    let cursor = pg.cursor();
    if let Err(error) = replicator.catch_up() {
        // Refusing the column, naming it, is fine: nothing applied; dropped, it replicates.
        match &error {
            ReplicateError::TableShape { table, column, .. } => assert_eq!((&**table, &**column), ("people", "name"), "{error}"),
            other => panic!("expected a TableShape error naming column name, got {other:?}"),
        }
        assert_eq!(pg.cursor(), cursor);
        pg.client().batch_execute("ALTER TABLE people DROP COLUMN name").unwrap();
        replicator.catch_up().unwrap();
    }
    pg.assert_equal(&db, &["people"]);
    let column: Option<Option<String>> =
        pg.client().query_opt("SELECT name FROM people WHERE id = 1", &[]).ok().and_then(|row| row.map(|row| row.get(0)));
    assert!(
        !matches!(column.as_ref(), Some(Some(name)) if name != "new"),
        "the column of the dropped index says {column:?}, the record says \"new\""
    );
}

#[derive(Debug, Clone, Serialize, Deserialize, Record)]
#[record(name = "counters")]
struct Counter {
    #[record(key)]
    id: u32,
    #[record(index)]
    hits: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, Record)]
#[record(name = "counters", version = 2)]
struct CounterWide {
    #[record(key)]
    id: u32,
    #[record(index)]
    hits: u64,
}

/// An indexed field widened from `u32` (its column `bigint`) to `u64`: the `bigint` column is
/// accepted, so a value above `i64::MAX` must be a typed error naming the collection, key and
/// field (before: PostgreSQL's "bigint out of range", naming nothing), and nothing applied.
#[test]
fn an_indexed_field_widened_to_u64_in_its_bigint_column_is_a_typed_error() {
    let pg = Pg::new("review_retyped");
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let counters = db.collection::<Counter>().unwrap();
    db.write(|tx| counters.insert(tx, &Counter { id: 1, hits: 5 }).map(drop)).unwrap();
    let mut replicator = Replicator::start(&db, pg.options()).unwrap();
    let cursor = pg.cursor();
    drop(counters);
    let counters = db.collection::<CounterWide>().unwrap();
    db.write(|tx| counters.upsert(tx, &CounterWide { id: 2, hits: u64::MAX }).map(drop)).unwrap();
    match replicator.catch_up() {
        Err(ReplicateError::TableShape { table, column, .. }) => assert_eq!((&*table, &*column), ("counters", "hits")),
        Err(ReplicateError::Value { collection, key, field, .. }) => assert_eq!((&*collection, &*key, &*field), ("counters", "2", "hits")),
        other => panic!("expected an error naming column hits, got {other:?}"),
    }
    assert_eq!(pg.cursor(), cursor);
    // A full copy refuses it the same way.
    pg.client().batch_execute("DELETE FROM tessera_replication").unwrap();
    match Replicator::start(&db, pg.options()) {
        Err(ReplicateError::Value { collection, key, field, .. }) => assert_eq!((&*collection, &*key, &*field), ("counters", "2", "hits")),
        other => panic!("expected an error naming column hits, got {other:?}"),
    }
}

/// Collections named like the cursor table or a system catalog: refused, never written
/// elsewhere.
#[test]
fn collections_named_like_postgres_own_tables_are_refused() {
    for (database, name) in
        [("review_name_cursor", "tessera_replication"), ("review_name_catalog", "pg_class"), ("review_name_view", "pg_tables")]
    {
        let pg = Pg::new(database);
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir);
        let schema = DynSchema {
            version: 1,
            key_fields: vec!["id".into()],
            key_kinds: vec![KeyKind::I64],
            shape: TypeDesc::Struct(vec![("id".into(), TypeDesc::Int)]),
            indexes: vec![],
        };
        let collection = db.create_dyn_collection(name, &schema).unwrap();
        db.write(|tx| collection.insert_json(tx, br#"{"id": 1}"#).map(drop)).unwrap();
        match Replicator::start(&db, pg.options()).and_then(|mut replicator| replicator.catch_up()) {
            Ok(stats) => {
                // Then it must be there, equal.
                let mut client = pg.client();
                let rows: i64 =
                    client.query_one(&format!("SELECT count(*) FROM public.\"{name}\""), &[]).map(|row| row.get(0)).unwrap_or(-1);
                panic!(
                    "{name}: replicated ({stats:?}), public.{name} has {rows} rows, digest {:?}",
                    postgres_digest(&mut client, name).map_err(|error| error.to_string())
                );
            }
            Err(error) => {
                eprintln!("{name}: {error}");
                assert!(error.to_string().contains(name), "{name}: the error does not name the table: {error}");
            }
        }
    }
}

/// Two replicators of the same consumer and collections following at once while commits
/// come: each commit applied once, the replica equal at the end.
#[test]
fn two_replicators_of_one_consumer_at_once_end_equal() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let pg = Pg::new("review_two");
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let people = db.collection::<Person>().unwrap();
    let notes = db.collection::<Note>().unwrap();
    let mut options = pg.options();
    options.batches_per_transaction = 3;
    let mut first = Replicator::start(&db, options.clone()).unwrap();
    let mut second = Replicator::start(&db, options).unwrap();
    let stop = AtomicBool::new(false);
    let (a, b) = std::thread::scope(|scope| {
        let a = scope.spawn(|| first.follow(&mut tessera_postgres::PollWait::new(1, 5), &stop));
        let b = scope.spawn(|| second.follow(&mut tessera_postgres::PollWait::new(1, 5), &stop));
        for round in 0..60u32 {
            db.write(|tx| {
                people.upsert(tx, &Person { id: round % 17, name: format!("r{round}") })?;
                if round % 5 == 0 {
                    people.delete(tx, &((round + 3) % 17))?;
                }
                notes.upsert(tx, &Note { title: format!("t{}", round % 7), body: format!("{round}") }).map(drop)
            })
            .unwrap();
        }
        let newest = db.read(|snapshot| Ok(snapshot.sequence())).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while pg.cursor() != Some(newest as i64) {
            assert!(std::time::Instant::now() < deadline, "the replicators did not catch up: {:?} of {newest}", pg.cursor());
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        stop.store(true, Ordering::Release);
        (a.join().unwrap().unwrap(), b.join().unwrap().unwrap())
    });
    assert_eq!(a.commits + b.commits, 60, "each commit applied once between them: {a:?} {b:?}");
    pg.assert_equal(&db, &["people", "notes"]);
}

/// A collection created while a replicator follows gets its table and every record; a
/// record with a repeated field name (jsonb keeps one) is refused by tessera or kept equal.
#[test]
fn a_collection_created_while_replicating_is_replicated_whole() {
    let pg = Pg::new("review_new_collection");
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let people = db.collection::<Person>().unwrap();
    db.write(|tx| people.insert(tx, &Person { id: 1, name: "one".into() }).map(drop)).unwrap();
    let mut replicator = Replicator::start(&db, pg.options()).unwrap();
    let schema = DynSchema {
        version: 1,
        key_fields: vec!["id".into()],
        key_kinds: vec![KeyKind::I64],
        shape: TypeDesc::Struct(vec![("id".into(), TypeDesc::Int), ("m".into(), TypeDesc::Any)]),
        indexes: vec![],
    };
    let later = db.create_dyn_collection("later", &schema).unwrap();
    db.write(|tx| (0..50).try_for_each(|id| later.insert_json(tx, format!(r#"{{"id": {id}, "m": {{"k": {id}}}}}"#).as_bytes()).map(drop)))
        .unwrap();
    if db.write(|tx| later.insert_json(tx, br#"{"id": 99, "m": {"a": 1, "a": 2}}"#).map(drop)).is_ok() {
        let stored = later.get_json(&db, "99").unwrap().unwrap().to_json();
        eprintln!("tessera keeps {stored}");
    }
    replicator.catch_up().unwrap();
    pg.assert_equal(&db, &["people", "later"]);
    // A field name holding a NUL character (jsonb refuses it), deep in a list.
    db.write(|tx| later.insert_json(tx, br#"{"id": 100, "m": [0, {"a\u0000b": 1}]}"#).map(drop)).unwrap();
    match replicator.catch_up() {
        Err(ReplicateError::Value { collection, key, field, .. }) => {
            assert_eq!((&*collection, &*key, &*field), ("later", "100", "m.1.a\0b"))
        }
        other => panic!("expected a Value error naming the field, got {other:?}"),
    }
}

/// PostgreSQL unreachable: bounded retries, then `Unreachable`; no hang.
#[test]
fn an_unreachable_server_is_its_error_after_bounded_retries() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    db.collection::<Person>().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut options = ReplicatorOptions::new(&format!("host=127.0.0.1 port={port} user=postgres connect_timeout=2"));
    options.retry.delay_initial_ms = 10;
    options.retry.delay_max_ms = 40;
    options.retry.attempts_max = 4;
    let started = std::time::Instant::now();
    match Replicator::start(&db, options) {
        Err(ReplicateError::Unreachable { attempts, .. }) => assert_eq!(attempts, 4),
        other => panic!("expected Unreachable, got {other:?}"),
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

/// Two collections whose names PostgreSQL would truncate to the same 63 bytes: refused, naming
/// the collection; a name of exactly 63 bytes (multibyte characters too) is kept whole.
#[test]
fn names_postgres_would_truncate_are_refused_and_63_bytes_are_kept() {
    let pg = Pg::new("review_long_names");
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let schema = DynSchema {
        version: 1,
        key_fields: vec!["id".into()],
        key_kinds: vec![KeyKind::I64],
        shape: TypeDesc::Struct(vec![("id".into(), TypeDesc::Int)]),
        indexes: vec![],
    };
    let whole = format!("{}é", "x".repeat(61)); // 63 bytes
    assert_eq!(whole.len(), 63);
    let kept = db.create_dyn_collection(&whole, &schema).unwrap();
    db.write(|tx| kept.insert_json(tx, br#"{"id": 1}"#).map(drop)).unwrap();
    let mut only = pg.options();
    only.collections = Some(vec![whole.clone()]);
    Replicator::start(&db, only).unwrap().catch_up().unwrap();
    pg.assert_equal(&db, &[&whole]);
    let (one, two) = (format!("{}1", "y".repeat(63)), format!("{}2", "y".repeat(63)));
    for name in [&one, &two] {
        let collection = db.create_dyn_collection(name, &schema).unwrap();
        db.write(|tx| collection.insert_json(tx, br#"{"id": 1}"#).map(drop)).unwrap();
    }
    let mut options = pg.options();
    options.consumer = "all".into();
    match Replicator::start(&db, options) {
        Err(ReplicateError::Name { what: "table", name, .. }) => assert!(name == one || name == two, "{name}"),
        other => panic!("expected a Name error, got {other:?}"),
    }
}

/// A start that fails (PostgreSQL unreachable, a collection the file does not have) leaves no
/// consumer in the file: one left would keep every later commit in the feed for a replica that
/// never reads them. A consumer that existed before the failed start stays, with its cursor.
/// (Found on 2026-12-01 by the second review of the command.)
#[test]
fn a_failed_start_leaves_no_consumer_it_registered() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let floats = db.collection::<Floats>().unwrap();
    db.write(|tx| floats.insert(tx, &Floats { id: 1, indexed: 1.0, plain: 2.0 }).map(drop)).unwrap();
    let unreachable = || {
        let mut options = ReplicatorOptions::new("host=127.0.0.1 port=1 user=nobody connect_timeout=1");
        options.retry = tessera_postgres::RetryPolicy { delay_initial_ms: 1, delay_max_ms: 1, attempts_max: 1 };
        options
    };
    assert!(Replicator::start(&db, unreachable()).is_err());
    let mut unknown = unreachable();
    unknown.collections = Some(vec!["floatz".into()]);
    assert!(Replicator::start(&db, unknown).is_err());
    assert!(db.consumers().unwrap().is_empty(), "a failed start left a consumer");
    // A consumer registered before keeps its place and cursor.
    let kept = db.consumer("postgres").unwrap();
    let cursor = kept.cursor().unwrap();
    assert!(Replicator::start(&db, unreachable()).is_err());
    let names: Vec<String> = db.consumers().unwrap().iter().map(|c| c.name().to_owned()).collect();
    assert_eq!(names, ["postgres"]);
    assert_eq!(kept.cursor().unwrap(), cursor);
}
