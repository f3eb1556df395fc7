//! Databases written by earlier code open and read correctly, and take new writes:
//! `v1.tessera` by commit 0f34021 (document format 1, storage format 1) and `v2.tessera` by
//! commit ef4c539 (storage format 2: records with shared keys); see
//! `tests/fixtures/make_v1.rs`, whose types and values are repeated here.

// The fixture's functions are kept exactly as `make_v1.rs` wrote them.
#![allow(clippy::manual_is_multiple_of)]

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tessera::Db;
use tessera::collection::{Embed, Record};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Record)]
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Embed)]
pub enum Kind {
    Plain,
    Tagged { label: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub name: String,
    pub age: u32,
    pub langs: Vec<String>,
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

pub fn profile(n: u32) -> Profile {
    Profile { name: format!("person {n}"), age: 20 + n, langs: vec!["en".into(), format!("l{n}")] }
}

pub fn long_key(n: u32) -> String {
    format!("{n:04}-{}", "x".repeat(600))
}

/// The fixtures, with the storage format version each was written in.
const FIXTURES: [(&str, u32); 2] = [("v1.tessera", 1), ("v2.tessera", 2)];

/// A copy of a fixture in a temporary directory (opening a database writes to it).
fn copy_of(fixture: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(fixture);
    std::fs::copy(format!("{}/tests/fixtures/{fixture}", env!("CARGO_MANIFEST_DIR")), &path).unwrap();
    (dir, path)
}

fn open_copy(fixture: &str) -> (tempfile::TempDir, Db) {
    let (dir, path) = copy_of(fixture);
    let db = Db::open(&path).unwrap();
    (dir, db)
}

/// The storage format version recorded in the file at `path`, read through LMDB directly.
fn recorded_version(path: &std::path::Path) -> u32 {
    let env = unsafe { heed::EnvOpenOptions::new().max_dbs(128).flags(heed::EnvFlags::NO_SUB_DIR).open(path) }.unwrap();
    let txn = env.read_txn().unwrap();
    let meta: heed::Database<heed::types::Bytes, heed::types::Bytes> = env.open_database(&txn, Some("tessera.meta")).unwrap().unwrap();
    let version = u32::from_be_bytes(meta.get(&txn, b"format_version").unwrap().unwrap().try_into().unwrap());
    drop(txn);
    env.prepare_for_closing().wait();
    version
}

#[test]
fn opening_an_older_database_marks_it_with_the_current_version() {
    for (fixture, version) in FIXTURES {
        let (_dir, path) = copy_of(fixture);
        assert_eq!(recorded_version(&path), version, "{fixture}");
        drop(Db::open(&path).unwrap());
        assert_eq!(recorded_version(&path), tessera::store::STORAGE_FORMAT_VERSION, "{fixture}");
    }
    assert_eq!(tessera::store::STORAGE_FORMAT_VERSION, 8);
}

#[test]
fn older_databases_read_correctly() {
    for (fixture, _) in FIXTURES {
        reads_correctly(fixture);
    }
}

fn reads_correctly(fixture: &str) {
    let (_dir, db) = open_copy(fixture);
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{fixture}: {report}");
    let items = db.collection::<Item>().unwrap();
    let all = items.all().fetch(&db).unwrap();
    assert_eq!(all, (0..200).map(item).collect::<Vec<_>>());
    db.read(|tx| {
        for id in [0u32, 1, 77, 199] {
            assert_eq!(items.get(tx, &id)?, Some(item(id)));
        }
        Ok(())
    })
    .unwrap();
    let high = items.filter(Item::score().ge(40)).fetch(&db).unwrap();
    assert_eq!(high, (0..200).map(item).filter(|i| i.score >= 40).collect::<Vec<_>>());
    let by_email = items.filter(Item::email().eq("user42@example.com")).fetch(&db).unwrap();
    assert_eq!(by_email, vec![item(42)]);
    let tagged = items.filter_text("kind is Tagged").unwrap().count(&db).unwrap();
    assert_eq!(tagged, 100);

    let profiles = db.documents("profiles").unwrap();
    for n in 0..20 {
        assert_eq!(profiles.document::<Profile>(&format!("p{n:02}")).get().unwrap(), Some(profile(n)));
    }
    let dictionary = db.dictionary().unwrap();
    for n in 0..100u32 {
        assert_eq!(dictionary.get::<i64>(&format!("int {n}")).unwrap(), Some(n as i64 * 3));
    }
    for n in 0..5 {
        assert_eq!(dictionary.get::<String>(&long_key(n)).unwrap(), Some(format!("long value {n}")));
    }
    assert_eq!(dictionary.get::<Profile>("profile").unwrap(), Some(profile(99)));
    assert_eq!(dictionary.keys().unwrap().len(), 106);
}

#[test]
fn older_databases_take_new_writes() {
    for (fixture, _) in FIXTURES {
        takes_new_writes(fixture);
    }
}

fn takes_new_writes(fixture: &str) {
    let (_dir, db) = open_copy(fixture);
    let items = db.collection::<Item>().unwrap();
    let mut changed = item(5);
    changed.attrs = (0..12).map(|i| (format!("user_{i}"), i)).collect();
    db.write(|tx| {
        items.upsert(tx, &changed)?;
        items.insert(tx, &item(500))?;
        items.delete(tx, &7u32)
    })
    .unwrap();
    db.read(|tx| {
        assert_eq!(items.get(tx, &5u32)?, Some(changed.clone()));
        assert_eq!(items.get(tx, &500u32)?, Some(item(500)));
        assert_eq!(items.get(tx, &7u32)?, None);
        Ok(())
    })
    .unwrap();
    let dictionary = db.dictionary().unwrap();
    dictionary.set(&long_key(2), "replaced").unwrap();
    dictionary.set(&long_key(9), "new").unwrap();
    dictionary.remove(&long_key(3)).unwrap();
    dictionary.flush().unwrap();
    assert_eq!(dictionary.get::<String>(&long_key(2)).unwrap().as_deref(), Some("replaced"));
    assert_eq!(dictionary.get::<String>(&long_key(9)).unwrap().as_deref(), Some("new"));
    assert_eq!(dictionary.get::<String>(&long_key(3)).unwrap(), None);
    assert_eq!(dictionary.keys().unwrap().len(), 106);
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{fixture} after new writes: {report}");
}
