//! Storage format 4: every stored value carries a checksum, verified on every read, so that a
//! damaged value is `Error::Corrupted` naming its keyspace and key, never different data; and
//! a file of format 3 gets its checksums when opened.

use heed::types::Bytes;
use std::collections::BTreeMap;
use std::path::Path;
use tessera::collection::Record;
use tessera::{Db, DbOptions, Error};

#[derive(Record, Debug, PartialEq)]
#[record(name = "notes")]
struct Note {
    #[record(key)]
    id: u32,
    text: String,
}

type Profile = BTreeMap<String, u32>;

/// Opens the file with raw LMDB and hands every named database to `change`.
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

/// Every named database in the file (LMDB lists them as the keys of its main database).
fn keyspace_names(env: &heed::Env, txn: &heed::RwTxn<'_>) -> Vec<String> {
    let main: heed::Database<Bytes, Bytes> = env.open_database(txn, None).unwrap().unwrap();
    main.iter(txn).unwrap().map(|entry| String::from_utf8_lossy(entry.unwrap().0).into_owned()).collect()
}

/// Flips one bit in the value of `key` in `keyspace`, keeping its length.
fn damage(path: &Path, keyspace: &str, key: &[u8]) {
    with_raw(path, |env, txn| {
        let handle = raw_db(env, txn, keyspace);
        let mut stored = handle.get(txn, key).unwrap().expect("the value to damage").to_vec();
        stored[0] ^= 0x04;
        handle.put(txn, key, &stored).unwrap();
    });
}

fn build(path: &Path) {
    let db = Db::open(path).unwrap();
    let notes = db.collection::<Note>().unwrap();
    db.write(|tx| (0..5).try_for_each(|id| notes.insert(tx, &Note { id, text: format!("note {id}") }).map(drop))).unwrap();
    let dictionary = db.dictionary().unwrap();
    dictionary.set("theme", "dark").unwrap();
    dictionary.flush().unwrap();
    db.documents("profiles").unwrap().document::<Profile>("ada").set(&[("age".to_owned(), 36)].into()).unwrap();
    let raw = db.keyspace("raw").unwrap();
    db.write(|tx| tx.put(&raw, b"k", b"value")).unwrap();
}

fn assert_names(result: tessera::Result<impl std::fmt::Debug>, keyspace: &str, key_hex: &str) {
    match result {
        Err(Error::Corrupted(message)) => {
            assert!(message.contains(keyspace) && message.contains(key_hex) && message.contains("checksum"), "{message}")
        }
        other => panic!("expected Corrupted naming {keyspace} and {key_hex}, got {other:?}"),
    }
}

#[test]
fn a_damaged_value_is_corrupted_naming_keyspace_and_key_in_every_api() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("damaged.tessera");
    build(&path);
    // One bit of record 3, of the dictionary entry, of the document's field and of the raw
    // value: each would have decoded as something else (a flipped letter), or not at all.
    damage(&path, "tessera.col.notes", &3u32.to_be_bytes());
    damage(&path, "raw", b"k");
    let db = Db::open(&path).unwrap();
    let notes = db.collection::<Note>().unwrap();
    assert_names(notes.get(&db, &3u32), "tessera.col.notes", "00000003");
    assert_names(notes.all().fetch(&db), "tessera.col.notes", "00000003");
    assert_names(notes.filter(Note::text().eq("note 3")).count(&db), "tessera.col.notes", "00000003");
    assert_eq!(notes.get(&db, &2u32).unwrap().unwrap().text, "note 2", "the other records read");
    let raw = db.keyspace("raw").unwrap();
    assert_names(db.read(|tx| Ok(tx.get(&raw, b"k")?.map(<[u8]>::to_vec))), "raw", "6b");
    assert_names(
        db.read(|tx| tx.range(&raw, ..)?.map(|entry| entry.map(|(_, v)| v.to_vec())).collect::<tessera::Result<Vec<_>>>()),
        "raw",
        "6b",
    );
    // Writes over a damaged value still work, and give a sound value.
    db.write(|tx| tx.put(&raw, b"k", b"fresh")).unwrap();
    assert_eq!(db.read(|tx| Ok(tx.get(&raw, b"k")?.map(<[u8]>::to_vec))).unwrap().as_deref(), Some(&b"fresh"[..]));
    drop((notes, raw, db));

    let mut names = Vec::new();
    with_raw(&path, |env, txn| names = keyspace_names(env, txn));
    let dictionary = names.iter().find(|name| name.starts_with("tessera.dictionary")).unwrap().clone();
    let documents = names.iter().find(|name| name.starts_with("tessera.documents")).unwrap().clone();
    for keyspace in [&dictionary, &documents] {
        let mut first = Vec::new();
        with_raw(&path, |env, txn| first = raw_db(env, txn, keyspace).iter(txn).unwrap().next().unwrap().unwrap().0.to_vec());
        damage(&path, keyspace, &first);
    }
    let db = Db::open(&path).unwrap();
    match db.dictionary().unwrap().get::<String>("theme") {
        Err(Error::Corrupted(message)) => assert!(message.contains(&dictionary) && message.contains("checksum"), "{message}"),
        other => panic!("expected Corrupted, got {other:?}"),
    }
    match db.documents("profiles").unwrap().document::<Profile>("ada").get() {
        Err(Error::Corrupted(message)) => assert!(message.contains(&documents) && message.contains("checksum"), "{message}"),
        other => panic!("expected Corrupted, got {other:?}"),
    }
    assert!(!db.check().unwrap().is_ok());
}

#[test]
fn a_large_fetch_returns_every_record_in_order_and_a_damaged_one_is_corrupted_naming_it() {
    // Large enough that `fetch` decodes on a second thread (more than 512 matches) and that
    // the damaged record falls in a chunk the helper decodes, far from the last one.
    const NOTES: u32 = 3_000;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("large.tessera");
    {
        let db = Db::open(&path).unwrap();
        let notes = db.collection::<Note>().unwrap();
        db.write(|tx| (0..NOTES).try_for_each(|id| notes.insert(tx, &Note { id, text: format!("note {id}") }).map(drop))).unwrap();
        let from_one: Vec<u32> = notes.filter(Note::id().ge(1)).fetch(&db).unwrap().into_iter().map(|note| note.id).collect();
        assert_eq!(from_one, (1..NOTES).collect::<Vec<_>>(), "every match, in key order");
        let all = notes.all().fetch(&db).unwrap();
        assert!(all.iter().enumerate().all(|(index, note)| note.id == index as u32 && note.text == format!("note {index}")));
    }
    damage(&path, "tessera.col.notes", &1_500u32.to_be_bytes());
    let db = Db::open(&path).unwrap();
    let notes = db.collection::<Note>().unwrap();
    assert_names(notes.all().fetch(&db), "tessera.col.notes", "000005dc");
    assert_names(notes.filter(Note::id().ge(1_000)).fetch(&db), "tessera.col.notes", "000005dc");
    assert_eq!(notes.filter(Note::id().lt(1_500)).fetch(&db).unwrap().len(), 1_500, "the records before it read");
}

#[test]
fn with_verification_off_a_damaged_value_reads_as_stored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("unverified.tessera");
    build(&path);
    damage(&path, "raw", b"k");
    let db = Db::open_with(&path, DbOptions { verify_checksums: false, ..Default::default() }).unwrap();
    let raw = db.keyspace("raw").unwrap();
    assert_eq!(db.read(|tx| Ok(tx.get(&raw, b"k")?.map(<[u8]>::to_vec))).unwrap().as_deref(), Some(&b"ralue"[..]), "v ^ 0x04 = r");
    // `check` verifies whatever the option says.
    let text = db.check().unwrap().to_string();
    assert!(text.contains("raw [6b]: the stored value fails its checksum"), "{text}");
}

#[test]
fn a_file_of_format_3_gets_its_checksums_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v3.tessera");
    build(&path);
    // Make it a format-3 file: every value without its checksum, and the version mark 3.
    with_raw(&path, |env, txn| {
        for name in keyspace_names(env, txn).iter().filter(|name| *name != "tessera.meta") {
            let handle = raw_db(env, txn, name);
            let entries: Vec<(Vec<u8>, Vec<u8>)> =
                handle.iter(txn).unwrap().map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap()).collect();
            for (key, stored) in entries {
                handle.put(txn, &key, &stored[..stored.len() - 4]).unwrap();
            }
        }
        raw_db(env, txn, "tessera.meta").put(txn, b"format_version", &3u32.to_be_bytes()).unwrap();
    });
    let db = Db::open(&path).unwrap();
    let notes = db.collection::<Note>().unwrap();
    assert_eq!(notes.all().fetch(&db).unwrap().len(), 5);
    assert_eq!(notes.get(&db, &4u32).unwrap().unwrap().text, "note 4");
    assert_eq!(db.dictionary().unwrap().get::<String>("theme").unwrap().as_deref(), Some("dark"));
    assert_eq!(db.documents("profiles").unwrap().document::<Profile>("ada").get().unwrap().unwrap()["age"], 36);
    let raw = db.keyspace("raw").unwrap();
    assert_eq!(db.read(|tx| Ok(tx.get(&raw, b"k")?.map(<[u8]>::to_vec))).unwrap().as_deref(), Some(&b"value"[..]));
    assert!(db.check().unwrap().is_ok());
    drop((notes, raw, db));
    with_raw(&path, |env, txn| {
        let version = raw_db(env, txn, "tessera.meta").get(txn, b"format_version").unwrap().unwrap().to_vec();
        assert_eq!(version, tessera::store::STORAGE_FORMAT_VERSION.to_be_bytes());
        let stored = raw_db(env, txn, "raw").get(txn, b"k").unwrap().unwrap().to_vec();
        assert_eq!(stored.len(), b"value".len() + 4, "the checksum follows the value");
    });
}

#[test]
fn check_finds_a_damaged_branch_page_key_that_checksums_cannot_see() {
    // A branch page's separator keys steer lookups; the leaves (and so every checksum) stay
    // intact when one is damaged, yet a lookup of the keys below it finds nothing.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("branch.tessera");
    {
        let db = Db::open(&path).unwrap();
        let raw = db.keyspace("raw").unwrap();
        db.write(|tx| (0..3000u32).try_for_each(|i| tx.put(&raw, format!("key-{i:06}-{}", "k".repeat(40)).as_bytes(), b"v"))).unwrap();
        assert!(db.check().unwrap().is_ok());
        db.close().unwrap();
    }
    let mut bytes = std::fs::read(&path).unwrap();
    let page_bytes = 4096;
    let u16_at = |bytes: &[u8], at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]) as usize;
    // LMDB's page header: page number (8 bytes), pad (2), flags (2; 1 = branch), lower (2),
    // upper (2); then one 2-byte node offset per key. A branch node: child page (6 bytes),
    // key size (2), key. Node 0's key is not used by LMDB: damage node 1's.
    let branch = (2..bytes.len() / page_bytes)
        .map(|page| page * page_bytes)
        .find(|&page| u16_at(&bytes, page + 10) == 1 && (u16_at(&bytes, page + 12) - 16) / 2 >= 2)
        .expect("a branch page");
    let node = branch + u16_at(&bytes, branch + 16 + 2);
    assert_eq!(&bytes[node + 8..node + 12], b"key-", "node 1 of the branch page");
    // Its first digit: the separator now sorts after every key of its child, whose lookups
    // then descend into the sibling before it.
    bytes[node + 8 + 4] = b'9';
    std::fs::write(&path, &bytes).unwrap();
    let db = Db::open(&path).unwrap();
    let report = db.check().unwrap();
    assert!(!report.is_ok(), "{report}");
    assert!(report.to_string().contains("a lookup does not find this entry"), "{report}");
}
