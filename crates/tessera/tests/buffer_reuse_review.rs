//! Review of the per-thread buffer reuse on the database's write paths: the collections'
//! per-thread key and record buffers (`with_buffers`, under insert, upsert and update) and
//! `codec::encode_into` beneath them, and the dictionary's `set` (`to_shared`) in and out of
//! transactions.
//!
//! Field types here run user code while a record is half encoded: re-entrant encodes through
//! every reusing entry point, dictionary writes, errors and panics. Every record and value is
//! read back (from the cache, from a transaction, and after reopening) and compared with what
//! was written.

use serde::ser::{Error as _, SerializeStruct};
use serde::{Deserialize, Serialize, Serializer};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;
use tessera::codec::{Decode, Encode, FieldError, FieldIds, View, encode_into};
use tessera::collection::{Describe, Embed, Record, TypeDesc};
use tessera::value::{Doc, EncodeError, Encoder, Value, to_shared, to_vec};
use tessera::{Db, Dictionary, DictionaryOptions, Error};

/// Panics raised on purpose say "[deliberate panic]"; their messages are kept off stderr.
fn quiet_deliberate_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let message = payload.downcast_ref::<&str>().copied().or_else(|| payload.downcast_ref::<String>().map(String::as_str));
            if !message.is_some_and(|m| m.contains("[deliberate panic]")) {
                default(info);
            }
        }));
    });
}

fn json_of(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_str(&Doc::from_untrusted(bytes).expect("a valid document").root().to_json()).expect("JSON")
}

// ------------------------------------------------------------------ a field that runs user code

thread_local! {
    /// The dictionary a `Hook` whose text starts with "dict:" writes into.
    static HOOK_DICT: RefCell<Option<Dictionary>> = const { RefCell::new(None) };
}

/// A string field whose encoding runs user code, chosen by its text's prefix:
/// - every hook first encodes two other values through `to_vec`, `to_shared` and
///   `encode_into` while the record is half written, and checks them;
/// - "dict:KEY" sets KEY in this thread's `HOOK_DICT` to the hook's text (a dictionary write,
///   itself a `to_shared`, from inside a record's encode);
/// - "panic:" opens containers and panics; "fail:" opens one and returns an error.
#[derive(Debug, Clone, PartialEq)]
struct Hook(String);

impl Describe for Hook {
    fn describe() -> TypeDesc {
        TypeDesc::String
    }
}

impl Encode for Hook {
    fn encode(&self, out: &mut Encoder<'_>, ids: &FieldIds) -> Result<(), EncodeError> {
        let text = &self.0;
        let inner = serde_json::json!({"hook": text, "len": text.len(), "pad": "q".repeat(text.len() % 97)});
        let by_vec = to_vec(&inner)?;
        let by_shared = to_shared(&inner)?;
        let mut by_codec = vec![0xEE; 9];
        encode_into(&vec![text.clone(), "second".to_owned(), text.clone()], None, ids, &mut by_codec)?;
        assert_eq!(by_vec.as_slice(), &*by_shared, "re-entrant to_vec and to_shared agree");
        assert_eq!(json_of(&by_vec), inner, "re-entrant to_vec");
        assert_eq!(json_of(&by_codec), serde_json::json!([text, "second", text]), "re-entrant encode_into");
        if let Some(key) = text.strip_prefix("dict:") {
            HOOK_DICT
                .with(|dict| dict.borrow().as_ref().expect("a hook dictionary").set(key, text))
                .map_err(|e| EncodeError::Message(e.to_string()))?;
        }
        if text.starts_with("panic:") {
            out.begin_dict()?;
            out.key("half")?;
            out.begin_array()?;
            out.push_str(text)?;
            panic!("[deliberate panic] a field's Encode panicked half-way");
        }
        if text.starts_with("fail:") {
            out.begin_array()?;
            out.push_str(text)?;
            return Err(EncodeError::Message(format!("deliberate failure of {text}")));
        }
        out.push_str(text)
    }
}

impl<'a> View<'a> for Hook {
    type Out = Hook;
    fn view(value: Value<'a>, ids: &FieldIds) -> Result<Hook, FieldError> {
        Hook::decode(value, ids)
    }
}

impl<'a> Decode<'a> for Hook {
    fn decode(value: Value<'a>, ids: &FieldIds) -> Result<Self, FieldError> {
        String::decode(value, ids).map(Hook)
    }
}

#[derive(Embed, Debug, Clone, PartialEq)]
struct Part {
    hook: Hook,
    n: u64,
    label: String,
}

/// A collection with an index (insert reads, then encodes, then stores with index entries).
#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "indexed")]
struct Indexed {
    #[record(key)]
    id: u32,
    #[record(index)]
    rank: i64,
    note: Hook,
    parts: Vec<Part>,
    payload: String,
}

/// A collection without one (insert encodes and writes in one descent).
#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "plain")]
struct Plain {
    #[record(key)]
    id: u32,
    note: Hook,
    payload: String,
}

fn payload(id: u32, len: usize) -> String {
    // Distinct per record from its first bytes: a record's buffer reused with another record's
    // bytes would read back as that record.
    let head = format!("record {id}: ");
    let mut text = head.repeat(len / head.len() + 1);
    text.truncate(len);
    text
}

fn indexed(id: u32, note: &str, len: usize) -> Indexed {
    let parts = (0..(id % 4))
        .map(|n| Part { hook: Hook(format!("part {n} of {id}")), n: n as u64 * 1_000_003, label: "label".repeat(n as usize) })
        .collect();
    Indexed { id, rank: (id % 5) as i64, note: Hook(note.to_owned()), parts, payload: payload(id, len) }
}

fn plain(id: u32, note: &str, len: usize) -> Plain {
    Plain { id, note: Hook(note.to_owned()), payload: payload(id, len) }
}

fn open(dir: &tempfile::TempDir) -> Db {
    Db::open(dir.path().join("db")).unwrap()
}

fn assert_collections(db: &Db, expected_indexed: &BTreeMap<u32, Indexed>, expected_plain: &BTreeMap<u32, Plain>, context: &str) {
    let indexed_coll = db.collection::<Indexed>().unwrap();
    let plain_coll = db.collection::<Plain>().unwrap();
    let all_indexed: BTreeMap<u32, Indexed> = indexed_coll.all().fetch(db).unwrap().into_iter().map(|r| (r.id, r)).collect();
    let all_plain: BTreeMap<u32, Plain> = plain_coll.all().fetch(db).unwrap().into_iter().map(|r| (r.id, r)).collect();
    for (id, record) in expected_indexed {
        let found = all_indexed.get(id).unwrap_or_else(|| panic!("{context}: indexed {id} missing"));
        assert!(
            found == record,
            "{context}: indexed {id} reads back as another record (payload {} bytes, expected {})",
            found.payload.len(),
            record.payload.len()
        );
        assert!(indexed_coll.get(db, id).unwrap().as_ref() == Some(record), "{context}: get indexed {id}");
    }
    for (id, record) in expected_plain {
        let found = all_plain.get(id).unwrap_or_else(|| panic!("{context}: plain {id} missing"));
        assert!(
            found == record,
            "{context}: plain {id} reads back as another record (payload {} bytes, expected {})",
            found.payload.len(),
            record.payload.len()
        );
    }
    assert_eq!(all_indexed.keys().collect::<Vec<_>>(), expected_indexed.keys().collect::<Vec<_>>(), "{context}: indexed ids");
    assert_eq!(all_plain.keys().collect::<Vec<_>>(), expected_plain.keys().collect::<Vec<_>>(), "{context}: plain ids");
    // The index agrees with the records.
    for rank in 0..5i64 {
        let expected = expected_indexed.values().filter(|r| r.rank == rank).count();
        assert_eq!(indexed_coll.filter(Indexed::rank().eq(rank)).count(db).unwrap(), expected, "{context}: rank {rank}");
    }
    let report = db.check().unwrap();
    assert!(report.problems.is_empty(), "{context}: {:?}", report.problems);
}

// ------------------------------------------------------------------ collections

/// Records around the size where the per-thread record buffer is dropped instead of kept
/// (1 MiB), very large ones and empty ones, in every order, with fields that encode other
/// values re-entrantly, written by insert, upsert and update in one transaction and in many.
#[test]
fn records_with_reentrant_fields_and_every_size_read_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let (indexed_coll, plain_coll) = (db.collection::<Indexed>().unwrap(), db.collection::<Plain>().unwrap());
    let kept_max = 1usize << 20;
    let lens = [
        0,
        1,
        62,
        63,
        255,
        256,
        65_535,
        65_536,
        kept_max - 200,
        kept_max - 60,
        kept_max,
        kept_max + 1,
        3 << 20,
        10,
        0,
        2_000,
        kept_max + 4096,
        5,
    ];
    let (mut expected_indexed, mut expected_plain) = (BTreeMap::new(), BTreeMap::new());
    // One transaction.
    let batch: Vec<(Indexed, Plain)> = lens
        .iter()
        .enumerate()
        .map(|(i, &len)| (indexed(i as u32, &format!("nest {i}"), len), plain(i as u32, &format!("nest {i}"), len)))
        .collect();
    db.write(|tx| {
        for (a, b) in &batch {
            indexed_coll.insert(tx, a)?;
            plain_coll.insert(tx, b)?;
        }
        Ok(())
    })
    .unwrap();
    for (a, b) in batch {
        expected_indexed.insert(a.id, a);
        expected_plain.insert(b.id, b);
    }
    assert_collections(&db, &expected_indexed, &expected_plain, "after the batch");
    // One transaction per write, sizes in reverse, through upsert and update.
    for (i, &len) in lens.iter().rev().enumerate() {
        let id = i as u32;
        let replacement = indexed(id, &format!("upserted {i}"), len / 2 + 3);
        db.write(|tx| indexed_coll.upsert(tx, &replacement)).unwrap();
        expected_indexed.insert(id, replacement);
        let new_payload = payload(id + 1000, len);
        db.write(|tx| plain_coll.update(tx, &id, |record| record.payload = new_payload.clone())).unwrap();
        expected_plain.get_mut(&id).unwrap().payload = new_payload;
        let fresh_id = 100 + id;
        let added = plain(fresh_id, "added", lens[(i + 7) % lens.len()]);
        db.write(|tx| plain_coll.insert(tx, &added)).unwrap();
        expected_plain.insert(fresh_id, added);
    }
    assert_collections(&db, &expected_indexed, &expected_plain, "after upserts and updates");
    drop((indexed_coll, plain_coll));
    drop(db);
    let db = open(&dir);
    assert_collections(&db, &expected_indexed, &expected_plain, "reopened");
}

/// A field that panics or fails half-way through a record's encode, inside a transaction that
/// catches the panic and goes on, or that the panic ends: every record written before and
/// after reads back exactly, and the failed ones are absent or unchanged.
#[test]
fn a_field_that_panics_or_fails_half_way_leaves_the_next_records_exact() {
    quiet_deliberate_panics();
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let (indexed_coll, plain_coll) = (db.collection::<Indexed>().unwrap(), db.collection::<Plain>().unwrap());
    let (mut expected_indexed, mut expected_plain) = (BTreeMap::new(), BTreeMap::new());
    let big = 2 << 20;
    db.write(|tx| {
        plain_coll.insert(tx, &plain(1, "first", 300))?;
        let caught = catch_unwind(AssertUnwindSafe(|| plain_coll.insert(tx, &plain(2, "panic: two", big))));
        assert!(caught.is_err(), "the panic reaches the closure");
        let failed = plain_coll.insert(tx, &plain(3, "fail: three", 70));
        assert!(failed.is_err(), "an Encode that fails fails the insert");
        let caught = catch_unwind(AssertUnwindSafe(|| indexed_coll.insert(tx, &indexed(4, "panic: four", 500))));
        assert!(caught.is_err());
        // A big record then a small one, right after the failures.
        plain_coll.insert(tx, &plain(5, "five", big))?;
        plain_coll.insert(tx, &plain(6, "six", 3))?;
        indexed_coll.insert(tx, &indexed(7, "seven", 40))?;
        // An update whose new value panics, then one that succeeds.
        let caught = catch_unwind(AssertUnwindSafe(|| indexed_coll.update(tx, &7, |r| r.note = Hook("panic: update".into()))));
        assert!(caught.is_err());
        let failed = indexed_coll.upsert(tx, &indexed(7, "fail: upsert", 99));
        assert!(failed.is_err());
        indexed_coll.update(tx, &7, |r| r.payload = "after the failures".into())?;
        indexed_coll.insert(tx, &indexed(8, "eight", 0))?;
        Ok(())
    })
    .unwrap();
    expected_plain.insert(1, plain(1, "first", 300));
    expected_plain.insert(5, plain(5, "five", big));
    expected_plain.insert(6, plain(6, "six", 3));
    let mut seven = indexed(7, "seven", 40);
    seven.payload = "after the failures".into();
    expected_indexed.insert(7, seven);
    expected_indexed.insert(8, indexed(8, "eight", 0));
    assert_collections(&db, &expected_indexed, &expected_plain, "after the caught failures");
    // A panic that ends its transaction (Db::write catches it): nothing of it stays.
    let ended = db.write(|tx| {
        plain_coll.insert(tx, &plain(9, "nine", 1000))?;
        indexed_coll.insert(tx, &indexed(10, "panic: ten", big))
    });
    assert!(matches!(ended, Err(Error::Panicked(_))), "{:?}", ended.map(drop));
    let ended = db.write(|tx| {
        plain_coll.insert(tx, &plain(11, "eleven", 10))?;
        plain_coll.insert(tx, &plain(12, "fail: twelve", 10))
    });
    assert!(ended.is_err());
    // The next writes, on the same thread.
    db.write(|tx| {
        plain_coll.insert(tx, &plain(13, "thirteen", 5))?;
        indexed_coll.insert(tx, &indexed(14, "fourteen", big + 1))?;
        indexed_coll.insert(tx, &indexed(15, "fifteen", 1))
    })
    .unwrap();
    expected_plain.insert(13, plain(13, "thirteen", 5));
    expected_indexed.insert(14, indexed(14, "fourteen", big + 1));
    expected_indexed.insert(15, indexed(15, "fifteen", 1));
    assert_collections(&db, &expected_indexed, &expected_plain, "after the failed transactions");
    drop((indexed_coll, plain_coll));
    drop(db);
    let db = open(&dir);
    assert_collections(&db, &expected_indexed, &expected_plain, "reopened");
}

/// A record's field writes into the dictionary while the record is being encoded (a
/// `to_shared` inside `encode_into`), in the same transaction's closure.
#[test]
fn a_dictionary_write_from_inside_a_record_encode_keeps_both_exact() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let dict = db
        .dictionary_with("hooks", DictionaryOptions { flush_interval: Duration::from_millis(2), ..DictionaryOptions::default() })
        .unwrap();
    HOOK_DICT.with(|slot| *slot.borrow_mut() = Some(dict.clone()));
    let plain_coll = db.collection::<Plain>().unwrap();
    let mut expected = BTreeMap::new();
    for round in 0..4u32 {
        let records: Vec<Plain> = (0..20u32)
            .map(|i| round * 100 + i)
            .map(|id| plain(id, &format!("dict:key-{id}"), [0, 70, 5_000, 1 << 20][id as usize % 4]))
            .collect();
        db.write(|tx| records.iter().try_for_each(|record| plain_coll.insert(tx, record).map(drop))).unwrap();
        for record in records {
            expected.insert(record.id, record);
        }
    }
    let check = |dict: &Dictionary, plain_coll: &tessera::Collection<Plain>, context: &str| {
        for (id, record) in &expected {
            assert!(plain_coll.get(&db, id).unwrap().as_ref() == Some(record), "{context}: record {id}");
            assert_eq!(dict.get::<String>(&format!("key-{id}")).unwrap(), Some(format!("dict:key-{id}")), "{context}: dictionary key-{id}");
        }
    };
    check(&dict, &plain_coll, "cached");
    dict.flush().unwrap();
    HOOK_DICT.with(|slot| slot.borrow_mut().take());
    drop(dict);
    drop(plain_coll);
    drop(db);
    let db = open(&dir);
    let dict = db.dictionary_with("hooks", DictionaryOptions::default()).unwrap();
    let plain_coll = db.collection::<Plain>().unwrap();
    for (id, record) in &expected {
        assert!(plain_coll.get(&db, id).unwrap().as_ref() == Some(record), "reopened: record {id}");
        assert_eq!(dict.get::<String>(&format!("key-{id}")).unwrap(), Some(format!("dict:key-{id}")), "reopened: dictionary key-{id}");
    }
}

// ------------------------------------------------------------------ dictionary

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Profile {
    name: String,
    langs: Vec<String>,
    score: f64,
    big: Option<String>,
}

fn profile(n: u32, big: usize) -> Profile {
    Profile {
        name: format!("profile {n} with a name long enough to be a string item"),
        langs: vec![format!("lang {n}"), "shared".into(), format!("lang {n}")],
        score: n as f64 / 3.0,
        big: (big > 0).then(|| format!("{n}").repeat(big)),
    }
}

/// Writes the fields of a `Profile` then panics (or fails) before the last one.
struct Breaks {
    profile: Profile,
    panics: bool,
}

impl Serialize for Breaks {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_struct("Profile", 4)?;
        out.serialize_field("name", &self.profile.name)?;
        out.serialize_field("langs", &self.profile.langs)?;
        if self.panics {
            panic!("[deliberate panic] a dictionary value's Serialize panicked half-way");
        }
        Err(S::Error::custom("a dictionary value's Serialize failed half-way"))
    }
}

/// Serializes a `Profile`, after setting `side_key` in `dict` (a re-entrant `to_shared` and a
/// cache write while this value's document is half written) and checking a re-entrant `to_vec`.
struct SetsAnother {
    dict: Dictionary,
    side_key: String,
    side: Profile,
    profile: Profile,
}

impl Serialize for SetsAnother {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_struct("Profile", 4)?;
        out.serialize_field("name", &self.profile.name)?;
        self.dict.set(&self.side_key, &self.side).map_err(S::Error::custom)?;
        let side = to_vec(&self.side).map_err(S::Error::custom)?;
        assert_eq!(json_of(&side), serde_json::to_value(&self.side).unwrap());
        out.serialize_field("langs", &self.profile.langs)?;
        out.serialize_field("score", &self.profile.score)?;
        out.serialize_field("big", &self.profile.big)?;
        out.end()
    }
}

fn assert_dictionary(dict: &Dictionary, expected: &BTreeMap<String, Option<Profile>>, context: &str) {
    for (key, value) in expected {
        assert_eq!(dict.get::<Profile>(key).unwrap().as_ref(), value.as_ref(), "{context}: {key}");
        // The stored document itself: what a fresh encoder makes of the value.
        let stored = dict.with_value(key, |stored| stored.map(|v| v.to_json())).unwrap();
        let stored: Option<serde_json::Value> = stored.map(|json| serde_json::from_str(&json).unwrap());
        assert_eq!(stored, value.as_ref().map(|v| serde_json::to_value(v).unwrap()), "{context}: {key} as JSON");
    }
}

#[test]
fn dictionary_sets_survive_panics_errors_reentrant_sets_and_huge_values() {
    quiet_deliberate_panics();
    let dir = tempfile::tempdir().unwrap();
    let mut expected: BTreeMap<String, Option<Profile>> = BTreeMap::new();
    {
        let db = open(&dir);
        let dict = db
            .dictionary_with("review", DictionaryOptions { flush_interval: Duration::from_millis(3), ..DictionaryOptions::default() })
            .unwrap();
        dict.set("a", &profile(1, 0)).unwrap();
        expected.insert("a".into(), Some(profile(1, 0)));
        let caught = catch_unwind(AssertUnwindSafe(|| dict.set("b", &Breaks { profile: profile(2, 0), panics: true })));
        assert!(caught.is_err());
        expected.insert("b".into(), None);
        assert!(dict.set("c", &Breaks { profile: profile(3, 0), panics: false }).is_err());
        expected.insert("c".into(), None);
        let reentrant = SetsAnother { dict: dict.clone(), side_key: "d-side".into(), side: profile(40, 3), profile: profile(4, 0) };
        dict.set("d", &reentrant).unwrap();
        expected.insert("d".into(), Some(profile(4, 0)));
        expected.insert("d-side".into(), Some(profile(40, 3)));
        // Huge, then small, then huge again, then empty strings.
        dict.set("huge", &profile(5, 6 << 20)).unwrap();
        dict.set("small", &profile(6, 1)).unwrap();
        dict.set("huge2", &profile(7, 3 << 20)).unwrap();
        dict.set("empty", &profile(8, 0)).unwrap();
        for (key, n, big) in [("huge", 5, 6 << 20), ("small", 6, 1), ("huge2", 7, 3 << 20), ("empty", 8, 0)] {
            expected.insert(key.into(), Some(profile(n, big)));
        }
        // A panic half-way, then the same key set right after.
        let caught = catch_unwind(AssertUnwindSafe(|| dict.set("small", &Breaks { profile: profile(9, 0), panics: true })));
        assert!(caught.is_err());
        assert_dictionary(&dict, &expected, "before the transactions");
        // In a transaction: a set, a caught panic, a re-entrant set that writes the cache (and
        // another key of the same transaction), an overwrite.
        db.write(|tx| {
            let mut txn = tx.dictionary(&dict);
            txn.set("t1", &profile(10, 0))?;
            let caught = catch_unwind(AssertUnwindSafe(|| txn.set("t2", &Breaks { profile: profile(11, 0), panics: true })));
            assert!(caught.is_err());
            assert!(txn.set("t2", &Breaks { profile: profile(11, 0), panics: false }).is_err());
            let reentrant = SetsAnother { dict: dict.clone(), side_key: "t3-side".into(), side: profile(120, 2), profile: profile(12, 0) };
            txn.set("t3", &reentrant)?;
            // The side key is the transaction's own key: the transaction's value wins at commit.
            let same_key = SetsAnother { dict: dict.clone(), side_key: "t4".into(), side: profile(130, 0), profile: profile(13, 0) };
            txn.set("t4", &same_key)?;
            txn.set("a", &profile(14, 1 << 20))?;
            assert_eq!(txn.get::<Profile>("t3")?, Some(profile(12, 0)));
            assert_eq!(txn.get::<Profile>("t4")?, Some(profile(13, 0)));
            assert_eq!(txn.get::<Profile>("a")?, Some(profile(14, 1 << 20)));
            Ok(())
        })
        .unwrap();
        for (key, value) in [
            ("t1", Some(profile(10, 0))),
            ("t2", None),
            ("t3", Some(profile(12, 0))),
            ("t3-side", Some(profile(120, 2))),
            ("t4", Some(profile(13, 0))),
            ("a", Some(profile(14, 1 << 20))),
        ] {
            expected.insert(key.into(), value);
        }
        // A transaction that a panic in a value ends: none of its sets stay.
        let ended = db.write(|tx| {
            let mut txn = tx.dictionary(&dict);
            txn.set("r1", &profile(15, 0))?;
            txn.set("r2", &Breaks { profile: profile(16, 0), panics: true })
        });
        assert!(matches!(ended, Err(Error::Panicked(_))));
        expected.insert("r1".into(), None);
        expected.insert("r2".into(), None);
        dict.set("last", &profile(17, 2)).unwrap();
        expected.insert("last".into(), Some(profile(17, 2)));
        assert_dictionary(&dict, &expected, "cached");
        // The stored bytes match a fresh thread's encoding of the value.
        let fresh = std::thread::spawn(|| to_vec(&profile(17, 2)).unwrap()).join().unwrap();
        assert_eq!(
            dict.with_value("last", |v| v.map(|v| v.to_json())).unwrap(),
            Some(Doc::from_untrusted(&fresh).unwrap().root().to_json())
        );
        dict.close().unwrap();
    }
    let db = open(&dir);
    let dict = db.dictionary_with("review", DictionaryOptions::default()).unwrap();
    assert_dictionary(&dict, &expected, "reopened");
    let stored: Vec<String> = dict.keys().unwrap();
    let present: Vec<&String> = expected.iter().filter(|(_, v)| v.is_some()).map(|(k, _)| k).collect();
    assert_eq!(stored.iter().collect::<std::collections::BTreeSet<_>>(), present.into_iter().collect(), "stored keys");
}

// ------------------------------------------------------------------ threads

/// Several threads at once, each with its own per-thread buffers: records with re-entrant and
/// dictionary-writing fields, caught panics, large and small records, dictionary sets that
/// panic; everything reads back exactly.
#[test]
fn threads_writing_records_and_dictionary_values_at_once_read_back_exactly() {
    quiet_deliberate_panics();
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let dict = db
        .dictionary_with("threads", DictionaryOptions { flush_interval: Duration::from_millis(2), ..DictionaryOptions::default() })
        .unwrap();
    let threads = 4u32;
    let rounds = 12u32;
    std::thread::scope(|scope| {
        for thread in 0..threads {
            let (db, dict) = (db.clone(), dict.clone());
            scope.spawn(move || {
                HOOK_DICT.with(|slot| *slot.borrow_mut() = Some(dict.clone()));
                let plain_coll = db.collection::<Plain>().unwrap();
                for round in 0..rounds {
                    let id = thread * 1000 + round;
                    let len = if round % 5 == 4 { (1 << 20) + round as usize } else { (round as usize * 977) % 9000 };
                    db.write(|tx| {
                        let caught = catch_unwind(AssertUnwindSafe(|| plain_coll.insert(tx, &plain(id + 500, "panic: never stored", len))));
                        assert!(caught.is_err());
                        plain_coll.insert(tx, &plain(id, &format!("dict:{id}"), len)).map(drop)
                    })
                    .unwrap();
                    let caught =
                        catch_unwind(AssertUnwindSafe(|| dict.set(&format!("p{id}"), &Breaks { profile: profile(id, 0), panics: true })));
                    assert!(caught.is_err());
                    dict.set(&format!("v{id}"), &profile(id, len % 3000)).unwrap();
                }
                HOOK_DICT.with(|slot| slot.borrow_mut().take());
            });
        }
    });
    let plain_coll = db.collection::<Plain>().unwrap();
    let records = plain_coll.all().fetch(&db).unwrap();
    assert_eq!(records.len(), (threads * rounds) as usize, "no record of a panicked insert is stored");
    for record in records {
        let (thread, round) = (record.id / 1000, record.id % 1000);
        let len = if round % 5 == 4 { (1 << 20) + round as usize } else { (round as usize * 977) % 9000 };
        assert!(thread < threads && round < rounds, "id {}", record.id);
        assert!(record == plain(record.id, &format!("dict:{}", record.id), len), "record {} reads back as another", record.id);
        assert_eq!(dict.get::<String>(&record.id.to_string()).unwrap(), Some(format!("dict:{}", record.id)));
        assert_eq!(dict.get::<Profile>(&format!("v{}", record.id)).unwrap(), Some(profile(record.id, len % 3000)));
        assert_eq!(dict.get::<Profile>(&format!("p{}", record.id)).unwrap(), None);
    }
}

// ------------------------------------------------------------------ history

/// A record of 100 distinct strings, each twice.
#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "tagged")]
struct Tagged {
    #[record(key)]
    id: u32,
    tags: Vec<String>,
}

fn repeated_tags(id: u32, distinct: u32) -> Tagged {
    let once: Vec<String> = (0..distinct).map(|i| format!("tag {i} of record {id}, long enough to point at")).collect();
    Tagged { id, tags: once.iter().chain(once.iter()).cloned().collect() }
}

/// The per-thread encoder's string cache keeps the size a large document gave it (see the
/// tessera-value review test `a_documents_bytes_do_not_depend_on_what_the_thread_encoded_before`),
/// so an equal record encodes to other bytes after the thread has written a record of many
/// strings: an upsert of the record just stored is then `Updated`, not `Unchanged`, rewrites it
/// and publishes a change that changed nothing.
#[test]
fn an_upsert_of_an_equal_record_is_unchanged_whatever_the_thread_wrote_before() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    std::thread::spawn(move || {
        let tagged = db.collection::<Tagged>().unwrap();
        let record = repeated_tags(1, 100);
        assert_eq!(db.write(|tx| tagged.insert(tx, &record)).unwrap(), tessera::WriteOutcome::Inserted);
        let right_after = db.write(|tx| tagged.upsert(tx, &record)).unwrap();
        // Another record, of many distinct strings, written by this thread.
        let wide = Tagged { id: 2, tags: (0..50_000).map(|i| format!("w{i}")).collect() };
        db.write(|tx| tagged.insert(tx, &wide)).unwrap();
        let after_wide = db.write(|tx| tagged.upsert(tx, &record)).unwrap();
        assert_eq!(tagged.get(&db, &1u32).unwrap(), Some(record.clone()), "the record reads back equal either way");
        assert_eq!(
            [right_after, after_wide],
            [tessera::WriteOutcome::Unchanged; 2],
            "the same record upserted right after its insert, and after a record of many strings"
        );
    })
    .join()
    .unwrap();
}

/// The same for the dictionary, through `to_shared`: a set of the value already stored is
/// skipped only when the bytes are equal; after the thread has encoded a value of many strings
/// the same value has other bytes, is written again, and a subscriber to the key is told it
/// changed to the value it already had.
#[test]
fn setting_the_stored_dictionary_value_again_is_no_change_whatever_the_thread_encoded_before() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    std::thread::spawn(move || {
        let dict = db
            .dictionary_with("history", DictionaryOptions { flush_interval: Duration::from_millis(2), ..DictionaryOptions::default() })
            .unwrap();
        let value = repeated_tags(1, 100).tags;
        dict.set("k", &value).unwrap();
        dict.flush().unwrap();
        let subscription = dict.subscribe::<Vec<String>>("k").unwrap();
        assert!(
            matches!(subscription.recv_timeout(Duration::from_secs(10)), Some(tessera::live::Event::Initial(Some(ref v))) if *v == value)
        );
        dict.set("k", &value).unwrap(); // the same bytes: skipped
        let wide: Vec<String> = (0..50_000).map(|i| format!("w{i}")).collect();
        dict.set("wide", &wide).unwrap();
        dict.set("k", &value).unwrap(); // the same value
        dict.flush().unwrap();
        assert_eq!(dict.get::<Vec<String>>("k").unwrap(), Some(value.clone()));
        match subscription.recv_timeout(Duration::from_millis(500)) {
            None => {}
            Some(tessera::live::Event::Changed(Some(v))) => {
                assert!(v != value, "a subscriber was told the key changed to the value it already had");
            }
            Some(other) => panic!("unexpected event: changed {}", matches!(other, tessera::live::Event::Changed(_))),
        }
    })
    .join()
    .unwrap();
}
