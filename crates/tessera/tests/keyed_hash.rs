//! Storage format 5: a long dictionary key is placed by SipHash-1-3 keyed with a random 128-bit
//! key of its file (`tessera.meta`, `hash_key`). Before, it was placed by the unkeyed
//! `key_hash_v1`, and anyone could craft thousands of keys sharing one range: every save and
//! cold read of them then scanned that range (a denial of service, issue 15 item 4). Files of
//! format 4 (`tests/fixtures/v4.tessera`, written by commit 6b6d929 with
//! `tests/fixtures/make_v4.rs`, whose values are repeated here) are migrated when opened.

#[path = "fixtures/colliding_keys.rs"]
mod colliding_keys;

use colliding_keys::colliding_long_keys;
use heed::types::Bytes;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use tessera::{Db, DictionaryOptions, Error};

/// As in `make_v4.rs`.
const CRAFTED_COUNT: usize = 260;
const REMOVED: usize = 7;
const SECOND_COUNT: usize = 20;

fn long_key(n: u32) -> String {
    format!("{n:04}-{}", "y".repeat(600))
}

/// A copy of the fixture in a temporary directory (opening a database writes to it).
fn copy_of_fixture() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v4.tessera");
    std::fs::copy(format!("{}/tests/fixtures/v4.tessera", env!("CARGO_MANIFEST_DIR")), &path).unwrap();
    (dir, path)
}

/// Opens the file with raw LMDB (while no `Db` has it open) and hands a write transaction to
/// `visit`, committed after it.
fn with_raw<T>(path: &Path, visit: impl FnOnce(&heed::Env, &mut heed::RwTxn<'_>) -> T) -> T {
    // SAFETY: the tests open the file this way only while no `Db` has it open.
    let env = unsafe { heed::EnvOpenOptions::new().max_dbs(128).flags(heed::EnvFlags::NO_SUB_DIR).open(path) }.unwrap();
    let mut txn = env.write_txn().unwrap();
    let result = visit(&env, &mut txn);
    txn.commit().unwrap();
    env.prepare_for_closing().wait();
    result
}

fn raw_db(env: &heed::Env, txn: &heed::RwTxn<'_>, name: &str) -> heed::Database<Bytes, Bytes> {
    env.open_database(txn, Some(name)).unwrap().unwrap()
}

fn meta_value(path: &Path, key: &[u8]) -> Option<Vec<u8>> {
    with_raw(path, |env, txn| raw_db(env, txn, "tessera.meta").get(txn, key).unwrap().map(<[u8]>::to_vec))
}

fn recorded_version(path: &Path) -> u32 {
    u32::from_be_bytes(meta_value(path, b"format_version").unwrap().try_into().unwrap())
}

/// The storage keys of a dictionary's long keys (those starting with `0xFF`).
fn long_storage_keys(path: &Path, dictionary: &str) -> Vec<Vec<u8>> {
    with_raw(path, |env, txn| {
        let handle = raw_db(env, txn, &format!("tessera.dictionary.{dictionary}"));
        let entries = handle.prefix_iter(txn, &[0xFF]).unwrap();
        entries.map(|entry| entry.unwrap().0.to_vec()).collect()
    })
}

/// How many distinct `0xFF hash` prefixes (ranges) a dictionary's long keys lie in.
fn distinct_ranges(path: &Path, dictionary: &str) -> usize {
    long_storage_keys(path, dictionary).iter().map(|stored| stored[..9].to_vec()).collect::<BTreeSet<_>>().len()
}

/// Reads back everything `make_v4.rs` wrote (and checks what it removed is absent).
fn assert_fixture_contents(db: &Db) {
    let crafted = colliding_long_keys(CRAFTED_COUNT);
    let dictionary = db.dictionary().unwrap();
    assert_eq!(dictionary.get::<String>("").unwrap().as_deref(), Some("empty"));
    for n in 0..50u32 {
        assert_eq!(dictionary.get::<u32>(&format!("short {n}")).unwrap(), Some(n));
    }
    for (index, key) in crafted.iter().enumerate() {
        let expected = (index != REMOVED).then_some(index as u64);
        assert_eq!(dictionary.get::<u64>(key).unwrap(), expected, "crafted key {index}");
    }
    let second = db.dictionary_with("second", DictionaryOptions::default()).unwrap();
    assert_eq!(second.get::<u32>("a").unwrap(), Some(1));
    for (index, key) in crafted[..SECOND_COUNT].iter().enumerate() {
        assert_eq!(second.get::<String>(key).unwrap(), Some(format!("second {index}")), "second's crafted key {index}");
    }
    assert_eq!(second.keys().unwrap().len(), 1 + SECOND_COUNT);
    let raw = db.keyspace("raw").unwrap();
    let other = db.read(|tx| Ok(tx.get(&raw, &[0xFF; 10])?.map(<[u8]>::to_vec))).unwrap();
    assert_eq!(other.as_deref(), Some(&b"not a dictionary entry"[..]), "other keyspaces are not re-placed");
}

#[test]
fn a_format_4_file_is_migrated_when_opened_reads_every_key_and_takes_new_writes() {
    let (_dir, path) = copy_of_fixture();
    assert_eq!(recorded_version(&path), 4);
    assert_eq!(meta_value(&path, b"hash_key"), None);
    // Format 4: the 259 crafted keys share one range, each ordinary long key has its own.
    assert_eq!(long_storage_keys(&path, "default").len(), 5 + CRAFTED_COUNT - 1);
    assert_eq!(distinct_ranges(&path, "default"), 5 + 1);
    assert_eq!(distinct_ranges(&path, "second"), 1);

    let crafted = colliding_long_keys(CRAFTED_COUNT + 1);
    {
        let db = Db::open(&path).unwrap();
        let report = db.check().unwrap();
        assert!(report.is_ok(), "{report}");
        for n in 0..5u32 {
            assert_eq!(db.dictionary().unwrap().get::<String>(&long_key(n)).unwrap(), Some(format!("long value {n}")));
        }
        assert_fixture_contents(&db);
        let dictionary = db.dictionary().unwrap();
        assert_eq!(dictionary.keys().unwrap().len(), 1 + 50 + 5 + CRAFTED_COUNT - 1);
        // New writes: the removed key back, a new crafted key, a long key replaced and one removed.
        dictionary.set(&crafted[REMOVED], &(REMOVED as u64)).unwrap();
        dictionary.set(&crafted[CRAFTED_COUNT], &(CRAFTED_COUNT as u64)).unwrap();
        dictionary.set(&long_key(0), "replaced").unwrap();
        dictionary.remove(&long_key(1)).unwrap();
        dictionary.flush().unwrap();
        db.write(|tx| tx.dictionary(&dictionary).set(&long_key(2), "in a transaction")).unwrap();
        let report = db.check().unwrap();
        assert!(report.is_ok(), "after new writes: {report}");
        drop(dictionary);
        db.close().unwrap();
    }
    assert_eq!(recorded_version(&path), tessera::store::STORAGE_FORMAT_VERSION);
    assert_eq!(meta_value(&path, b"hash_key").map(|key| key.len()), Some(16));
    // Format 5: every long key in a range of its own.
    let long_keys = 5 - 1 + CRAFTED_COUNT + 1;
    assert_eq!(long_storage_keys(&path, "default").len(), long_keys);
    assert_eq!(distinct_ranges(&path, "default"), long_keys);
    assert_eq!(distinct_ranges(&path, "second"), SECOND_COUNT);

    let db = Db::open(&path).unwrap();
    let dictionary = db.dictionary().unwrap();
    for (index, key) in crafted.iter().enumerate() {
        assert_eq!(dictionary.get::<u64>(key).unwrap(), Some(index as u64), "crafted key {index} after reopening");
    }
    assert_eq!(dictionary.get::<String>(&long_key(0)).unwrap().as_deref(), Some("replaced"));
    assert_eq!(dictionary.get::<String>(&long_key(1)).unwrap(), None);
    assert_eq!(dictionary.get::<String>(&long_key(2)).unwrap().as_deref(), Some("in a transaction"));
    assert_eq!(dictionary.get::<String>(&long_key(3)).unwrap().as_deref(), Some("long value 3"));
    assert_eq!(dictionary.keys().unwrap().len(), 1 + 50 + 4 + CRAFTED_COUNT + 1);
    assert!(db.check().unwrap().is_ok());
}

#[test]
fn keys_crafted_against_the_old_hash_no_longer_share_a_range() {
    let keys = colliding_long_keys(300);
    let hash = tessera::value::layout::key_hash_v1(keys[0].as_bytes());
    assert!(keys.iter().all(|key| tessera::value::layout::key_hash_v1(key.as_bytes()) == hash), "one format-4 hash");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crafted.tessera");
    {
        let db = Db::open(&path).unwrap();
        let dictionary = db.dictionary().unwrap();
        for (index, key) in keys.iter().enumerate() {
            dictionary.set(key, &(index as u32)).unwrap();
        }
        dictionary.close().unwrap();
        db.close().unwrap();
    }
    // Storage format 4 put all 300 in one range (one prefix, 255 narrow suffixes, then wide).
    assert_eq!(long_storage_keys(&path, "default").len(), 300);
    assert_eq!(distinct_ranges(&path, "default"), 300);
}

#[test]
fn each_file_has_its_own_hash_key_and_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let key = long_key(7);
    let paths = [dir.path().join("a.tessera"), dir.path().join("b.tessera")];
    for path in &paths {
        let db = Db::open(path).unwrap();
        let dictionary = db.dictionary().unwrap();
        dictionary.set(&key, "placed").unwrap();
        dictionary.close().unwrap();
        db.close().unwrap();
    }
    let hash_keys = paths.each_ref().map(|path| meta_value(path, b"hash_key").expect("a hash key"));
    assert_eq!(hash_keys[0].len(), 16);
    assert_ne!(hash_keys[0], hash_keys[1], "drawn from the OS for each file");
    // One key, two files: two places.
    let stored = paths.each_ref().map(|path| long_storage_keys(path, "default"));
    assert_ne!(stored[0][0][..9], stored[1][0][..9]);
    // Reopened and written to, a file keeps its hash key, and its keys where they were.
    {
        let db = Db::open(&paths[0]).unwrap();
        let dictionary = db.dictionary().unwrap();
        assert_eq!(dictionary.get::<String>(&key).unwrap().as_deref(), Some("placed"));
        dictionary.set(&long_key(8), "another").unwrap();
        dictionary.close().unwrap();
        db.close().unwrap();
    }
    assert_eq!(meta_value(&paths[0], b"hash_key").as_ref(), Some(&hash_keys[0]));
    assert!(long_storage_keys(&paths[0], "default").contains(&stored[0][0]));
}

fn is_corrupted_naming_meta<T>(result: Result<T, Error>) -> bool {
    matches!(result, Err(Error::Corrupted(message)) if message.contains("tessera.meta"))
}

#[test]
fn a_missing_or_malformed_hash_key_is_corrupted_naming_tessera_meta() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.tessera");
    Db::open(&path).unwrap().close().unwrap();
    let hash_key = meta_value(&path, b"hash_key").expect("written when the file was created");
    with_raw(&path, |env, txn| raw_db(env, txn, "tessera.meta").delete(txn, b"hash_key").unwrap());
    assert!(is_corrupted_naming_meta(Db::open(&path)), "missing");
    with_raw(&path, |env, txn| raw_db(env, txn, "tessera.meta").put(txn, b"hash_key", &hash_key[..15]).unwrap());
    assert!(is_corrupted_naming_meta(Db::open(&path)), "15 bytes");
    // The refused file was left as it was: with its key back, it opens.
    with_raw(&path, |env, txn| raw_db(env, txn, "tessera.meta").put(txn, b"hash_key", &hash_key).unwrap());
    assert!(Db::open(&path).unwrap().check().unwrap().is_ok());
}

/// The checksum of storage format 4 and later (see `docs/storage.md`, "Values").
fn sealed(key: &[u8], value: &[u8]) -> Vec<u8> {
    let seed = xxhash_rust::xxh3::xxh3_64(key);
    let checksum = xxhash_rust::xxh3::xxh3_64_with_seed(value, seed) as u32;
    [value, &checksum.to_le_bytes()].concat()
}

#[test]
fn check_flags_a_long_key_stored_under_another_hash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.tessera");
    let key = long_key(3);
    {
        let db = Db::open(&path).unwrap();
        let dictionary = db.dictionary().unwrap();
        dictionary.set(&key, "misplaced").unwrap();
        dictionary.close().unwrap();
        db.close().unwrap();
    }
    // Move the entry to where storage format 4 put it: under its unkeyed hash, suffix 0.
    let mut old_place = vec![0xFF];
    old_place.extend_from_slice(&tessera::value::layout::key_hash_v1(key.as_bytes()).to_be_bytes());
    old_place.push(0);
    with_raw(&path, |env, txn| {
        let handle = raw_db(env, txn, "tessera.dictionary.default");
        let (stored, record) = handle.prefix_iter(txn, &[0xFF]).unwrap().next().unwrap().map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap();
        let record = &record[..record.len() - 4];
        handle.delete(txn, &stored).unwrap();
        handle.put(txn, &old_place, &sealed(&old_place, record)).unwrap();
    });
    let db = Db::open(&path).unwrap();
    let report = db.check().unwrap();
    assert_eq!(report.problems.len(), 1, "{report}");
    let problem = &report.problems[0];
    assert_eq!(problem.keyspace, "tessera.dictionary.default");
    assert!(problem.what.contains("stored under another hash"), "{report}");
}

#[test]
fn a_damaged_long_key_stops_the_migration_and_nothing_of_it_is_written() {
    // Moved, the damaged record would get a new checksum that hid the damage.
    let (_dir, path) = copy_of_fixture();
    let damaged = with_raw(&path, |env, txn| {
        let handle = raw_db(env, txn, "tessera.dictionary.default");
        let (stored, mut record) =
            handle.prefix_iter(txn, &[0xFF]).unwrap().next().unwrap().map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap();
        record[3] ^= 0x04;
        handle.put(txn, &stored, &record).unwrap();
        stored
    });
    match Db::open(&path) {
        Err(Error::Corrupted(message)) => {
            assert!(message.contains("tessera.dictionary.default"), "{message}");
            assert!(message.contains(&damaged.iter().map(|byte| format!("{byte:02x}")).collect::<String>()), "{message}");
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("opened a file whose migration met a damaged record"),
    }
    assert_eq!(recorded_version(&path), 4);
    assert_eq!(meta_value(&path, b"hash_key"), None);
    assert_eq!(distinct_ranges(&path, "default"), 5 + 1, "nothing moved");
}

#[test]
fn a_format_5_file_becomes_format_6_keeping_its_hash_key_and_long_keys() {
    // Format 6 (the durable feed) changes nothing stored: the migration only marks the file.
    // Drawing a new hash key, as the migration from format 4 does, would lose every long key.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v5.tessera");
    {
        let db = Db::open(&path).unwrap();
        let dictionary = db.dictionary().unwrap();
        for n in 0..20 {
            dictionary.set(&long_key(n), &n).unwrap();
        }
        dictionary.flush().unwrap();
        drop(dictionary);
        db.close().unwrap();
    }
    let hash_key = meta_value(&path, b"hash_key").unwrap();
    with_raw(&path, |env, txn| raw_db(env, txn, "tessera.meta").put(txn, b"format_version", &5u32.to_be_bytes()).unwrap());
    assert_eq!(recorded_version(&path), 5);
    {
        // A read-only handle reads a format-5 file as it is, and says which format it has.
        let reader = Db::open_with(&path, tessera::DbOptions { read_only: true, ..tessera::DbOptions::default() }).unwrap();
        assert_eq!(reader.file_info().unwrap().format_version, 5);
        assert!(matches!(reader.changes_since(0, 1), Err(tessera::Error::FeedDisabled { .. })));
    }
    assert_eq!(recorded_version(&path), 5, "a read-only open does not mark the file");
    let db = Db::open(&path).unwrap();
    let dictionary = db.dictionary().unwrap();
    for n in 0..20 {
        assert_eq!(dictionary.get::<u32>(&long_key(n)).unwrap(), Some(n), "long key {n} after the migration");
    }
    assert!(db.check().unwrap().is_ok());
    drop(dictionary);
    db.close().unwrap();
    assert_eq!(recorded_version(&path), tessera::store::STORAGE_FORMAT_VERSION);
    assert_eq!(meta_value(&path, b"hash_key").unwrap(), hash_key, "the hash key is kept");
}
