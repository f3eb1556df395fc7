//! The storage core: opening, transactions, map growth, errors and the change feed.

use std::sync::{Arc, Barrier};
use std::time::Duration;
use tessera::{ChangeKind, Db, DbOptions, Durability, Error, FeedEvent};

fn temp() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("test.tessera");
    (dir, path)
}

/// A value as storage format 4 stores it: its bytes, then the low 32 bits (little-endian) of
/// XXH3-64 over them, seeded with XXH3-64 of the key (`docs/storage.md`, "Values").
fn sealed(key: &[u8], value: &[u8]) -> Vec<u8> {
    let hash = xxhash_rust::xxh3::xxh3_64_with_seed(value, xxhash_rust::xxh3::xxh3_64(key));
    [value, &(hash as u32).to_le_bytes()[..]].concat()
}

fn get(db: &Db, keyspace: &tessera::Keyspace, key: &[u8]) -> Option<Vec<u8>> {
    db.read(|tx| Ok(tx.get(keyspace, key)?.map(<[u8]>::to_vec))).unwrap()
}

#[test]
fn creates_a_single_file_and_reopens_it() {
    let (_dir, path) = temp();
    {
        let db = Db::open(&path).unwrap();
        let notes = db.keyspace("notes").unwrap();
        db.write(|tx| tx.put(&notes, b"a", b"1")).unwrap();
    }
    assert!(path.is_file(), "the database is one file");
    let db = Db::open(&path).unwrap();
    let notes = db.keyspace("notes").unwrap();
    assert_eq!(get(&db, &notes, b"a").as_deref(), Some(&b"1"[..]));
}

#[test]
fn keyspace_names_are_checked() {
    let (_dir, path) = temp();
    let db = Db::open(&path).unwrap();
    // A NUL byte used to panic inside heed (NulError), for documents and dictionaries too.
    for bad in ["", "tessera.meta", &"x".repeat(256), "a\0b"] {
        assert!(matches!(db.keyspace(bad), Err(Error::InvalidName { what: "keyspace", .. })), "{bad:?}");
    }
    assert!(matches!(db.documents("a\0b"), Err(Error::InvalidName { .. })));
    assert!(matches!(db.dictionary_with("a\0b", Default::default()), Err(Error::InvalidName { .. })));
    assert!(db.keyspace(&"x".repeat(255)).is_ok());
}

#[test]
fn the_empty_key_and_an_overlong_key_get_one_answer() {
    // `get` of an empty key was an LMDB error (MDB_BAD_VALSIZE) while a 512-byte key read as
    // absent: reads of keys that cannot be stored find nothing; writes of them are KeySize.
    let (_dir, path) = temp();
    let db = Db::open(&path).unwrap();
    let ks = db.keyspace("ks").unwrap();
    for key in [&b""[..], &[7u8; 512][..]] {
        assert!(db.read(|tx| Ok(tx.get(&ks, key)?.is_none())).unwrap());
        assert!(matches!(db.write(|tx| tx.put(&ks, key, b"v")), Err(Error::KeySize { .. })));
        assert!(matches!(db.write(|tx| tx.get(&ks, key).map(|v| v.is_none())), Ok(true)));
        assert!(matches!(db.write(|tx| tx.delete(&ks, key)), Err(Error::KeySize { .. })));
    }
}

#[test]
fn err_and_panic_roll_back_and_leave_the_database_usable() {
    let (_dir, path) = temp();
    let db = Db::open(&path).unwrap();
    let ks = db.keyspace("ks").unwrap();
    let result: tessera::Result<()> = db.write(|tx| {
        tx.put(&ks, b"rolled back", b"x")?;
        Err(Error::other("the caller changed its mind"))
    });
    assert!(result.is_err());
    assert_eq!(get(&db, &ks, b"rolled back"), None);

    // A panic is a typed error (it used to unwind through `write`), with nothing written.
    let panicked = db.write(|tx| -> tessera::Result<()> {
        tx.put(&ks, b"panicked", b"x")?;
        panic!("boom {}", 7)
    });
    assert!(matches!(&panicked, Err(Error::Panicked(message)) if message == "boom 7"), "{panicked:?}");
    assert_eq!(get(&db, &ks, b"panicked"), None);
    db.write(|tx| tx.put(&ks, b"after", b"ok")).unwrap();
    assert_eq!(get(&db, &ks, b"after").as_deref(), Some(&b"ok"[..]));
}

#[test]
fn one_transaction_spans_keyspaces_atomically() {
    let (_dir, path) = temp();
    let db = Db::open(&path).unwrap();
    let (a, b) = (db.keyspace("a").unwrap(), db.keyspace("b").unwrap());
    let _ = db.write(|tx| -> tessera::Result<()> {
        tx.put(&a, b"k", b"1")?;
        tx.put(&b, b"k", b"2")?;
        Err(Error::other("abort"))
    });
    assert_eq!((get(&db, &a, b"k"), get(&db, &b, b"k")), (None, None));
    db.write(|tx| {
        tx.put(&a, b"k", b"1")?;
        tx.put(&b, b"k", b"2")
    })
    .unwrap();
    assert_eq!((get(&db, &a, b"k").unwrap(), get(&db, &b, b"k").unwrap()), (b"1".to_vec(), b"2".to_vec()));
}

#[test]
fn snapshots_are_isolated_and_readers_do_not_block_writers() {
    let (_dir, path) = temp();
    let db = Db::open(&path).unwrap();
    let ks = db.keyspace("ks").unwrap();
    db.write(|tx| tx.put(&ks, b"k", b"old")).unwrap();
    let snapshot = db.read_txn().unwrap();
    // A writer on another thread commits while the snapshot is open.
    let writer = {
        let (db, ks) = (db.clone(), ks.clone());
        std::thread::spawn(move || db.write(|tx| tx.put(&ks, b"k", b"new")).unwrap())
    };
    writer.join().unwrap();
    assert_eq!(snapshot.get(&ks, b"k").unwrap(), Some(&b"old"[..]));
    // The read transaction can move to another thread.
    let moved = std::thread::scope(|scope| scope.spawn(move || snapshot.get(&ks, b"k").unwrap().map(<[u8]>::to_vec)).join().unwrap());
    assert_eq!(moved.as_deref(), Some(&b"old"[..]));
    assert_eq!(get(&db, &db.keyspace("ks").unwrap(), b"k").as_deref(), Some(&b"new"[..]));
}

#[test]
fn range_and_prefix_scans_are_ordered() {
    let (_dir, path) = temp();
    let db = Db::open(&path).unwrap();
    let ks = db.keyspace("ks").unwrap();
    db.write(|tx| {
        for i in (0u32..100).rev() {
            tx.put(&ks, &i.to_be_bytes(), &[i as u8])?;
        }
        Ok(())
    })
    .unwrap();
    let keys: Vec<u32> = db
        .read(|tx| {
            tx.range(&ks, &10u32.to_be_bytes()[..]..&20u32.to_be_bytes()[..])?
                .map(|e| e.map(|(k, _)| u32::from_be_bytes(k.try_into().unwrap())))
                .collect()
        })
        .unwrap();
    assert_eq!(keys, (10..20).collect::<Vec<_>>());
    let count = db.read(|tx| Ok(tx.prefix(&ks, &[0, 0, 0])?.count())).unwrap();
    assert_eq!(count, 100);
    assert_eq!(db.read(|tx| tx.len(&ks)).unwrap(), 100);
}

#[test]
fn the_map_grows_by_itself_and_stops_at_the_ceiling() {
    let (_dir, path) = temp();
    let options = DbOptions { map_size_initial_bytes: 1 << 16, map_size_max_bytes: 8 << 20, ..DbOptions::default() };
    let db = Db::open_with(&path, options).unwrap();
    let ks = db.keyspace("ks").unwrap();
    let initial = db.map_size_bytes();
    let value = vec![7u8; 1000];
    db.write(|tx| {
        for i in 0u32..2000 {
            tx.put(&ks, &i.to_be_bytes(), &value)?;
        }
        Ok(())
    })
    .unwrap();
    assert!(db.map_size_bytes() > initial, "grew from {initial} to {}", db.map_size_bytes());
    assert_eq!(db.read(|tx| tx.len(&ks)).unwrap(), 2000);

    // Past the ceiling: a typed error, nothing of the transaction written, the database usable.
    let big = vec![1u8; 1 << 20];
    let result = db.write(|tx| {
        for i in 0u32..16 {
            tx.put(&ks, &(10_000 + i).to_be_bytes(), &big)?;
        }
        Ok(())
    });
    assert!(matches!(result, Err(Error::MapFull { ceiling_bytes }) if ceiling_bytes == 8 << 20), "{result:?}");
    assert_eq!(db.read(|tx| tx.len(&ks)).unwrap(), 2000);
    db.write(|tx| tx.put(&ks, b"small", b"still works")).unwrap();
    assert_eq!(get(&db, &ks, b"small").as_deref(), Some(&b"still works"[..]));
}

#[test]
fn key_size_is_checked() {
    let (_dir, path) = temp();
    let db = Db::open(&path).unwrap();
    let ks = db.keyspace("ks").unwrap();
    assert!(matches!(db.write(|tx| tx.put(&ks, b"", b"x")), Err(Error::KeySize { len: 0, .. })));
    assert!(matches!(db.write(|tx| tx.put(&ks, &[1; 512], b"x")), Err(Error::KeySize { len: 512, .. })));
    assert!(db.write(|tx| tx.put(&ks, &[1; 511], b"x")).is_ok());
}

#[test]
fn foreign_and_damaged_files_give_typed_errors() {
    let (dir, path) = temp();
    std::fs::write(&path, vec![0xA5; 64 * 1024]).unwrap();
    assert!(matches!(Db::open(&path), Err(Error::NotADatabase { .. })));
    let lock_of = |path: &std::path::Path| path.with_file_name(format!("{}-lock", path.file_name().unwrap().to_str().unwrap()));
    assert!(!lock_of(&path).exists(), "no lock file is left beside a refused file");
    let sqlite = dir.path().join("sqlite.db");
    let mut header = b"SQLite format 3\0".to_vec();
    header.resize(8192, 0);
    std::fs::write(&sqlite, header).unwrap();
    assert!(matches!(Db::open(&sqlite), Err(Error::NotADatabase { .. }) | Err(Error::Corrupted(_))));

    // An LMDB file written by someone else.
    let foreign = dir.path().join("foreign.mdb");
    {
        let env = unsafe { heed::EnvOpenOptions::new().max_dbs(4).flags(heed::EnvFlags::NO_SUB_DIR).open(&foreign) }.unwrap();
        let mut txn = env.write_txn().unwrap();
        let table: heed::Database<heed::types::Bytes, heed::types::Bytes> = env.create_database(&mut txn, Some("theirs")).unwrap();
        table.put(&mut txn, b"k", b"v").unwrap();
        txn.commit().unwrap();
        env.prepare_for_closing().wait();
    }
    let size = std::fs::metadata(&foreign).unwrap().len();
    std::fs::remove_file(lock_of(&foreign)).unwrap();
    assert!(matches!(Db::open(&foreign), Err(Error::ForeignDatabase { .. })));
    assert_eq!(std::fs::metadata(&foreign).unwrap().len(), size, "a refused file is not extended");
    assert!(!lock_of(&foreign).exists(), "no lock file is left beside a refused file");
    // A lock file that was there before stays.
    std::fs::write(lock_of(&foreign), b"").unwrap();
    assert!(matches!(Db::open(&foreign), Err(Error::ForeignDatabase { .. })));
    assert!(lock_of(&foreign).exists());
}

#[test]
fn a_newer_format_version_is_refused() {
    let (_dir, path) = temp();
    drop(Db::open(&path).unwrap());
    set_format_version(&path, 99);
    assert!(matches!(Db::open(&path), Err(Error::UnsupportedVersion { found: 99, supported: tessera::store::STORAGE_FORMAT_VERSION })));
}

/// Writes `version` as the file's storage format version, behind tessera's back.
fn set_format_version(path: &std::path::Path, version: u32) {
    let env = unsafe { heed::EnvOpenOptions::new().max_dbs(8).flags(heed::EnvFlags::NO_SUB_DIR).open(path) }.unwrap();
    let mut txn = env.write_txn().unwrap();
    let meta: heed::Database<heed::types::Bytes, heed::types::Bytes> = env.create_database(&mut txn, Some("tessera.meta")).unwrap();
    meta.put(&mut txn, b"format_version", &version.to_be_bytes()).unwrap();
    txn.commit().unwrap();
    env.prepare_for_closing().wait();
}

#[test]
fn a_format_7_file_is_only_marked_and_keeps_its_data_and_feed() {
    let (_dir, path) = temp();
    let options = DbOptions { durable_feed: true, ..DbOptions::default() };
    {
        let db = Db::open_with(&path, options.clone()).unwrap();
        let ks = db.keyspace("ks").unwrap();
        db.write(|tx| tx.put(&ks, b"k", b"v")).unwrap();
        db.close().unwrap();
    }
    set_format_version(&path, 7);
    let db = Db::open_with(&path, options).unwrap();
    assert_eq!(db.file_info().unwrap().format_version, tessera::store::STORAGE_FORMAT_VERSION);
    assert_eq!(tessera::store::STORAGE_FORMAT_VERSION, 8);
    let ks = db.keyspace("ks").unwrap();
    assert_eq!(db.read(|tx| Ok(tx.get(&ks, b"k")?.map(<[u8]>::to_vec))).unwrap(), Some(b"v".to_vec()));
    let feed = db.changes_since(0, 10).unwrap();
    assert_eq!(feed.iter().flat_map(|batch| &batch.changes).filter(|change| &*change.keyspace == "ks").count(), 1);
    assert!(db.check().unwrap().is_ok());
}

#[test]
fn opening_twice_in_one_process_shares_one_database() {
    let (_dir, path) = temp();
    let first = Db::open(&path).unwrap();
    let second = Db::open(&path).unwrap();
    let ks = first.keyspace("ks").unwrap();
    first.write(|tx| tx.put(&ks, b"k", b"v")).unwrap();
    let seen = second.read(|tx| Ok(tx.get(&second.keyspace("ks")?, b"k")?.map(<[u8]>::to_vec))).unwrap();
    assert_eq!(seen.as_deref(), Some(&b"v"[..]));
    // Dropping every handle closes the file, and it opens again at once.
    drop((first, second));
    Db::open(&path).unwrap();
}
/// A subscription made while another thread's write transaction is open: "every commit from
/// now on" includes that transaction's commit whenever its data was not yet visible when
/// `subscribe` returned. Before `subscribe` waited for the writer, it returned at once, the
/// transaction (begun without listeners, so recording nothing, or with the durable feed alone,
/// so recording no old values) committed after it, and the stream never saw that commit.
#[test]
fn a_subscription_made_during_another_threads_transaction_misses_none_of_its_commit() {
    for durable_feed in [false, true] {
        let (_dir, path) = temp();
        let db = Db::open_with(&path, DbOptions { durable_feed, ..DbOptions::default() }).unwrap();
        let ks = db.keyspace("ks").unwrap();
        db.write(|tx| tx.put(&ks, b"k", b"before")).unwrap();
        let inside = Arc::new(Barrier::new(2));
        let writer = {
            let (db, ks, inside) = (db.clone(), ks.clone(), inside.clone());
            std::thread::spawn(move || {
                db.write(|tx| {
                    tx.put(&ks, b"k", b"during")?;
                    inside.wait();
                    std::thread::sleep(Duration::from_millis(200));
                    Ok(())
                })
                .unwrap()
            })
        };
        inside.wait();
        let stream = db.subscribe().unwrap();
        let visible_at_return = get(&db, &ks, b"k").as_deref() == Some(&b"during"[..]);
        writer.join().unwrap();
        db.write(|tx| tx.put(&ks, b"after", b"x")).unwrap();
        let mut keys = Vec::new();
        while let Some(event) = stream.recv_timeout(Duration::from_millis(500)) {
            match event {
                FeedEvent::Batch(batch) => keys.extend(batch.changes.iter().map(|change| change.key.to_vec())),
                other => panic!("unexpected {other:?}"),
            }
        }
        let expected: Vec<Vec<u8>> = if visible_at_return { vec![b"after".to_vec()] } else { vec![b"k".to_vec(), b"after".to_vec()] };
        assert_eq!(keys, expected, "durable feed {durable_feed}: visible when subscribe returned: {visible_at_return}");
        assert!(visible_at_return, "durable feed {durable_feed}: subscribe returns after the open transaction commits");
    }
}

#[test]
fn subscribing_inside_a_write_transaction_is_refused_not_left_to_deadlock() {
    let (_dir, path) = temp();
    let db = Db::open(&path).unwrap();
    let ks = db.keyspace("ks").unwrap();
    let refused = db.write(|tx| {
        tx.put(&ks, b"k", b"v")?;
        Ok(db.subscribe().err())
    });
    assert!(matches!(refused, Ok(Some(Error::WouldDeadlock { .. }))), "{refused:?}");
    assert!(db.subscribe().is_ok(), "outside a transaction");
}

#[test]
fn the_feed_reports_each_commit_once_in_order_with_old_and_new_values() {
    let (_dir, path) = temp();
    let db = Db::open(&path).unwrap();
    let ks = db.keyspace("ks").unwrap();
    let other = db.keyspace("other").unwrap();
    db.write(|tx| tx.put(&ks, b"existing", b"1")).unwrap();
    let stream = db.subscribe().unwrap();
    db.write(|tx| {
        tx.put(&ks, b"new", b"a")?;
        tx.put(&ks, b"existing", b"2")?;
        tx.put(&other, b"existing", b"o")?; // the same key in another keyspace: its own change
        tx.put(&ks, b"existing", b"3")?; // twice in one transaction: one change
        tx.put(&ks, b"gone", b"x")?;
        tx.delete(&ks, b"gone")?; // inserted then deleted: no change
        Ok(())
    })
    .unwrap();
    db.write(|tx| tx.delete(&ks, b"new").map(|_| ())).unwrap();
    db.write(|tx| tx.put(&ks, b"existing", b"3")).unwrap(); // unchanged: no batch
    let _ = db.write(|tx| -> tessera::Result<()> {
        tx.put(&ks, b"rolled", b"back")?;
        Err(Error::other("abort"))
    });
    db.write(|tx| tx.put(&ks, b"last", b"z")).unwrap();

    let batch = |event: Option<FeedEvent>| match event {
        Some(FeedEvent::Batch(batch)) => batch,
        other => panic!("expected a batch, got {other:?}"),
    };
    let first = batch(stream.recv_timeout(Duration::from_secs(5)));
    let kinds: Vec<_> = first.changes.iter().map(|c| (&*c.key, c.kind, c.old.as_deref(), c.new.as_deref())).collect();
    assert_eq!(
        kinds,
        vec![
            (&b"new"[..], ChangeKind::Insert, None, Some(&b"a"[..])),
            (&b"existing"[..], ChangeKind::Update, Some(&b"1"[..]), Some(&b"3"[..])),
            (&b"existing"[..], ChangeKind::Insert, None, Some(&b"o"[..]))
        ]
    );
    let keyspaces: Vec<&str> = first.changes.iter().map(|c| &*c.keyspace).collect();
    assert_eq!(keyspaces, ["ks", "ks", "other"]);
    let second = batch(stream.recv_timeout(Duration::from_secs(5)));
    assert_eq!((second.changes[0].kind, second.changes[0].old.as_deref()), (ChangeKind::Delete, Some(&b"a"[..])));
    let third = batch(stream.recv_timeout(Duration::from_secs(5)));
    assert_eq!(&*third.changes[0].key, b"last");
    assert!(first.sequence < second.sequence && second.sequence < third.sequence);
    assert!(stream.recv_timeout(Duration::from_millis(100)).is_none());
}

#[test]
fn concurrent_writers_are_delivered_in_commit_order() {
    let (_dir, path) = temp();
    let db = Db::open_with(&path, DbOptions { durability: Durability::BUFFERED, ..DbOptions::default() }).unwrap();
    let ks = db.keyspace("ks").unwrap();
    let stream = db.subscribe().unwrap();
    let barrier = Arc::new(Barrier::new(4));
    let handles: Vec<_> = (0..4u8)
        .map(|thread| {
            let (db, ks, barrier) = (db.clone(), ks.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                for i in 0..50u8 {
                    db.write(|tx| tx.put(&ks, &[thread, i], &[i])).unwrap();
                }
            })
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
    let mut sequences = Vec::new();
    while sequences.len() < 200 {
        match stream.recv_timeout(Duration::from_secs(5)) {
            Some(FeedEvent::Batch(batch)) => sequences.push(batch.sequence),
            other => panic!("{other:?}"),
        }
    }
    assert!(sequences.windows(2).all(|w| w[0] < w[1]), "delivered in commit order");
}

#[test]
fn a_slow_listener_lags_instead_of_stalling_writers() {
    let (_dir, path) = temp();
    let options = DbOptions { listener_queue_batches: 4, durability: Durability::BUFFERED, ..DbOptions::default() };
    let db = Db::open_with(&path, options).unwrap();
    let ks = db.keyspace("ks").unwrap();
    let slow = db.subscribe().unwrap(); // never read during the writes
    for i in 0u32..50 {
        db.write(|tx| tx.put(&ks, &i.to_be_bytes(), b"v")).unwrap();
    }
    db.write(|tx| tx.put(&ks, b"marker", b"v")).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut batches = 0;
    let mut missed = 0;
    while let Some(event) = slow.recv_timeout(Duration::from_millis(200)) {
        match event {
            FeedEvent::Batch(_) => batches += 1,
            FeedEvent::Lagged { missed: count } => missed += count,
        }
    }
    assert_eq!(batches, 4, "the queue held its capacity");
    assert!(missed > 0, "the listener was told it lagged");
}

#[test]
fn a_panicking_listener_is_removed_without_affecting_others() {
    let (_dir, path) = temp();
    let db = Db::open(&path).unwrap();
    let ks = db.keyspace("ks").unwrap();
    db.on_commit(|_| panic!("listener bug")).unwrap();
    let healthy = db.subscribe().unwrap();
    for i in 0u8..3 {
        db.write(|tx| tx.put(&ks, &[i], b"v")).unwrap();
    }
    for _ in 0..3 {
        assert!(matches!(healthy.recv_timeout(Duration::from_secs(5)), Some(FeedEvent::Batch(_))));
    }
}

#[test]
fn durability_levels_commit_and_sync() {
    let (_dir, path) = temp();
    let db = Db::open(&path).unwrap();
    let ks = db.keyspace("ks").unwrap();
    db.write_with(Durability::Immediate, |tx| tx.put(&ks, b"i", b"1")).unwrap();
    db.write_with(Durability::Buffered { max_delay: Duration::from_millis(10) }, |tx| tx.put(&ks, b"b", b"2")).unwrap();
    db.sync().unwrap();
    // Concurrent immediate writers all return, each after its commit is flushed.
    let handles: Vec<_> = (0..8u8)
        .map(|i| {
            let (db, ks) = (db.clone(), ks.clone());
            std::thread::spawn(move || db.write(|tx| tx.put(&ks, &[b'c', i], b"v")).unwrap())
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
    assert_eq!(db.read(|tx| tx.len(&ks)).unwrap(), 10);
}

#[test]
fn a_relative_file_name_opens_in_the_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::env::set_current_dir(dir.path()).unwrap();
    let db = Db::open("relative.tessera").unwrap();
    assert_eq!(db.path(), dir.path().canonicalize().unwrap().join("relative.tessera"));
    assert!(dir.path().join("relative.tessera").is_file());
}

#[test]
fn a_write_inside_a_write_is_an_error_not_a_deadlock() {
    let (_dir, path) = temp();
    let db = Db::open(&path).unwrap();
    let ks = db.keyspace("ks").unwrap();
    let result = db.write(|tx| {
        tx.put(&ks, b"outer", b"1")?;
        db.write(|inner| inner.put(&ks, b"inner", b"2"))
    });
    assert!(matches!(result, Err(Error::WouldDeadlock { operation: "a write transaction", .. })), "{result:?}");
    assert_eq!(get(&db, &ks, b"outer"), None, "the outer transaction rolled back with the error");
    db.write(|tx| tx.put(&ks, b"after", b"ok")).unwrap();
}

#[test]
fn a_large_import_runs_its_closure_at_most_twice() {
    // Before the map grew to fit what the failed attempt had written, a 50,000-record import
    // on a new file ran its closure once per 4x growth.
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    let ks = db.keyspace("import").unwrap();
    let value = vec![7u8; 150];
    for (records, runs_max) in [(1_000u32, 1), (50_000, 2), (200_000, 2)] {
        let mut runs = 0;
        db.write(|tx| {
            runs += 1;
            for i in 0..records {
                tx.put(&ks, format!("{records}-{i:08}").as_bytes(), &value)?;
            }
            Ok(())
        })
        .unwrap();
        assert!(runs <= runs_max, "{records} records: the closure ran {runs} times");
    }
}

#[test]
fn a_large_import_in_scattered_key_order_runs_its_closure_at_most_twice() {
    // Keys that arrive out of order leave pages half full, so a B-tree holds them in about
    // twice their bytes: the map grown to eight times what the failed attempt had written was
    // too small again, and a 100,000-record import on a new file ran its closure three times
    // (as the crud table's scaling run did, whose titles sort apart from their insert order).
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    let ks = db.keyspace("import").unwrap();
    let value = vec![9u8; 110];
    let records = 100_000u32;
    let mut runs = 0;
    db.write(|tx| {
        runs += 1;
        // A multiplicative step modulo a prime scatters the keys over the whole range.
        (0..records).try_for_each(|i| tx.put(&ks, &(u64::from(i) * 7_919 % 1_000_003).to_be_bytes(), &value))
    })
    .unwrap();
    assert!(runs <= 2, "the closure ran {runs} times");
    assert_eq!(db.read(|tx| tx.len(&ks)).unwrap(), u64::from(records));
}

#[test]
fn a_thousand_small_transactions_never_run_their_closure_twice() {
    // The map is grown before a transaction starts when less than a quarter of it is free, so
    // a transaction smaller than that quarter never meets a full map (before, the transaction
    // that filled the 4 MiB map ran twice, and so on at each growth).
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    let ks = db.keyspace("small").unwrap();
    let value = vec![3u8; 500];
    let initial = db.map_size_bytes();
    let mut runs = 0u32;
    for transaction in 0u32..1_000 {
        db.write(|tx| {
            runs += 1;
            (0..20u32).try_for_each(|i| tx.put(&ks, &(transaction * 20 + i).to_be_bytes(), &value))
        })
        .unwrap();
    }
    assert!(db.map_size_bytes() > initial, "the map grew");
    assert_eq!(runs, 1_000, "a closure ran twice");
    assert_eq!(db.read(|tx| tx.len(&ks)).unwrap(), 20_000);
}

#[test]
fn a_transaction_as_large_as_the_one_before_runs_its_closure_once() {
    // An import followed by a rewrite of every record, as the crud table's insert and update
    // rows do: the import left more than a quarter of the 4 MiB map free, but less than the
    // rewrite needed (it copies every leaf page), so the rewrite met a full map and ran twice.
    // The map now also grows ahead when less than four times what the last transaction wrote
    // is free.
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    let ks = db.keyspace("records").unwrap();
    let records = 10_000u32;
    let write_all = |fill: u8| {
        let mut runs = 0;
        db.write(|tx| {
            runs += 1;
            (0..records).try_for_each(|i| tx.put(&ks, format!("record{i}").as_bytes(), &[fill; 110]))
        })
        .unwrap();
        runs
    };
    assert_eq!(write_all(1), 1, "the import fits the first map");
    assert_eq!(write_all(2), 1, "the rewrite ran its closure again");
    assert_eq!(db.read(|tx| tx.get(&ks, b"record9999").map(|v| v.map(<[u8]>::to_vec))).unwrap(), Some(vec![2; 110]));
}

#[test]
fn one_large_write_does_not_make_the_next_small_one_grow_a_map_with_half_of_it_free() {
    // The last-write rule asks for at most half the map: without that bound, a write of a
    // quarter of the map's size made the next write of a few bytes double it (and reserve the
    // disk blocks for it).
    let dir = tempfile::tempdir().unwrap();
    let map_bytes = 32 << 20;
    let db = Db::open_with(dir.path().join("db"), DbOptions { map_size_initial_bytes: map_bytes, ..DbOptions::default() }).unwrap();
    let ks = db.keyspace("bulk").unwrap();
    let value = vec![5u8; 4000];
    // About 10 MB of keys and values (one overflow page each): more than half the map stays
    // free, less than four times the bytes written.
    db.write(|tx| (0..2_500u32).try_for_each(|i| tx.put(&ks, &i.to_be_bytes(), &value))).unwrap();
    assert_eq!(db.map_size_bytes(), map_bytes, "the bulk write fit");
    db.write(|tx| tx.put(&ks, b"small", b"value")).unwrap();
    assert_eq!(db.map_size_bytes(), map_bytes, "a small write after a large one grew the map");
}

#[test]
fn too_many_keyspaces_is_a_typed_error() {
    // LMDB's MDB_DBS_FULL used to surface as the catch-all `Storage`.
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path().join("db"), DbOptions { keyspaces_max: 4, ..DbOptions::default() }).unwrap();
    let results: Vec<_> = (0..8).map(|i| db.keyspace(&format!("ks{i}"))).collect();
    assert!(results.iter().any(Result::is_ok));
    let error = results.into_iter().find_map(Result::err).expect("the limit is reached");
    assert!(matches!(error, tessera::Error::TooManyKeyspaces(4)), "{error:?}");
}

#[test]
fn a_read_transaction_dropped_on_another_thread_releases_its_opening_thread() {
    // The reader count was per thread: a transaction opened here and dropped elsewhere left
    // this thread's count at 1, and every later map growth on it failed.
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path().join("db"), DbOptions { map_size_initial_bytes: 1 << 16, ..DbOptions::default() }).unwrap();
    let ks = db.keyspace("ks").unwrap();
    let txn = db.read_txn().unwrap();
    std::thread::scope(|scope| {
        scope.spawn(move || drop(txn));
    });
    // Needs the map to grow several times, from this thread.
    let value = vec![1u8; 4096];
    db.write(|tx| (0..2_000u32).try_for_each(|i| tx.put(&ks, &i.to_be_bytes(), &value))).unwrap();
    assert_eq!(db.read(|tx| tx.len(&ks)).unwrap(), 2_000);
}

#[test]
fn a_second_name_for_an_open_file_is_the_same_database() {
    // heed compares paths, so a hard link passed its check and two environments wrote one
    // file; the file's device and inode identify it now, and the open shares the database.
    let dir = tempfile::tempdir().unwrap();
    let (path, link) = (dir.path().join("db"), dir.path().join("link"));
    let db = Db::open(&path).unwrap();
    std::fs::hard_link(&path, &link).unwrap();
    let through_link = Db::open(&link).unwrap();
    assert_eq!(through_link.path(), db.path(), "the database opened first");
    let ks = db.keyspace("ks").unwrap();
    let barrier = std::sync::Barrier::new(2);
    std::thread::scope(|scope| {
        for (handle, start) in [(&db, 0u32), (&through_link, 2_000)] {
            let (barrier, ks) = (&barrier, &ks);
            scope.spawn(move || {
                barrier.wait();
                for i in start..start + 2_000 {
                    handle.write(|tx| tx.put(ks, &i.to_be_bytes(), b"v")).unwrap();
                }
            });
        }
    });
    assert_eq!(db.read(|tx| tx.len(&ks)).unwrap(), 4_000, "no write lost");
}
#[test]
fn missing_parent_directories_are_an_error_unless_asked_for() {
    let (dir, _) = temp();
    let nested = dir.path().join("no/such/dir/db");
    assert!(matches!(Db::open(&nested), Err(Error::Io(ref error)) if error.kind() == std::io::ErrorKind::NotFound));
    assert!(!dir.path().join("no").exists(), "nothing was created");
    let db = Db::open_with(&nested, DbOptions { create_parent_dirs: true, ..DbOptions::default() }).unwrap();
    drop(db);
    assert!(nested.exists());
}

#[test]
fn check_passes_on_a_sound_database_and_names_damage() {
    #[derive(tessera::collection::Record, Debug)]
    #[record(name = "checked")]
    struct Checked {
        #[record(key)]
        id: u32,
        #[record(index)]
        score: i32,
        #[record(unique)]
        tag: String,
    }
    let (_dir, path) = temp();
    let db = Db::open(&path).unwrap();
    let checked = db.collection::<Checked>().unwrap();
    db.write(|tx| (0..50).try_for_each(|id| checked.insert(tx, &Checked { id, score: id as i32 % 7, tag: format!("t{id}") }).map(drop)))
        .unwrap();
    let dict = db.dictionary().unwrap();
    dict.set("a", &1u8).unwrap();
    dict.set(&"x".repeat(600), "long").unwrap();
    dict.flush().unwrap();
    let profiles = db.documents("profiles").unwrap();
    profiles
        .document::<std::collections::BTreeMap<String, u32>>("ada")
        .set(&[("age".to_owned(), 36), ("visits".to_owned(), 2)].into())
        .unwrap();
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{report}");
    assert!(report.entries >= 50 + 100 + 2 + 2, "{report}");

    // Damage the file: overwrite one record's bytes (through LMDB, so only the value is wrong).
    drop((checked, dict, profiles, db));
    {
        let env = unsafe { heed::EnvOpenOptions::new().max_dbs(128).flags(heed::EnvFlags::NO_SUB_DIR).open(&path) }.unwrap();
        let mut txn = env.write_txn().unwrap();
        let records: heed::Database<heed::types::Bytes, heed::types::Bytes> =
            env.open_database(&txn, Some("tessera.col.checked")).unwrap().unwrap();
        let key = 7u32.to_be_bytes();
        records.put(&mut txn, &key, &sealed(&key, b"not a document")).unwrap();
        records.delete(&mut txn, &9u32.to_be_bytes()).unwrap();
        let fields: heed::Database<heed::types::Bytes, heed::types::Bytes> =
            env.open_database(&txn, Some("tessera.documents.profiles")).unwrap().unwrap();
        fields.put(&mut txn, b"no terminator", &sealed(b"no terminator", b"x")).unwrap();
        fields.put(&mut txn, b"bob\x00\x01", &sealed(b"bob\x00\x01", b"x")).unwrap(); // an id and no field name
        txn.commit().unwrap();
        env.prepare_for_closing().wait();
    }
    let db = Db::open(&path).unwrap();
    let report = db.check().unwrap();
    assert!(!report.is_ok());
    let text = report.to_string();
    assert!(text.contains("tessera.col.checked [00000007]: record does not validate"), "{text}");
    assert!(text.contains("points at key 00000009, which has no record"), "{text}");
    assert!(text.contains("field key does not start with a document id"), "{text}");
    assert!(text.contains("field key has an empty field name"), "{text}");

    // Damage that leaves no valid checksum: every such value is listed, and the checks that
    // read values stop there.
    drop(db);
    {
        let env = unsafe { heed::EnvOpenOptions::new().max_dbs(128).flags(heed::EnvFlags::NO_SUB_DIR).open(&path) }.unwrap();
        let mut txn = env.write_txn().unwrap();
        for (keyspace, key) in [("tessera.col.checked", &11u32.to_be_bytes()[..]), ("tessera.documents.profiles", b"no terminator")] {
            let handle: heed::Database<heed::types::Bytes, heed::types::Bytes> = env.open_database(&txn, Some(keyspace)).unwrap().unwrap();
            let mut stored = handle.get(&txn, key).unwrap().unwrap().to_vec();
            stored[0] ^= 0x40;
            handle.put(&mut txn, key, &stored).unwrap();
        }
        txn.commit().unwrap();
        env.prepare_for_closing().wait();
    }
    let db = Db::open(&path).unwrap();
    let text = db.check().unwrap().to_string();
    assert!(text.contains("tessera.col.checked [0000000b]: the stored value fails its checksum"), "{text}");
    assert!(text.contains("tessera.documents.profiles [6e6f207465726d696e61746f72]: the stored value fails its checksum"), "{text}");
    assert!(text.contains("2 values or B-trees are damaged"), "{text}");
}

#[test]
fn a_record_that_does_not_open_is_an_error_for_filters_never_a_match() {
    #[derive(tessera::collection::Record, Debug)]
    #[record(name = "damaged")]
    struct Damaged {
        #[record(key)]
        id: u32,
        score: i32,
    }
    let (_dir, path) = temp();
    {
        let db = Db::open(&path).unwrap();
        let damaged = db.collection::<Damaged>().unwrap();
        db.write(|tx| (0..10).try_for_each(|id| damaged.insert(tx, &Damaged { id, score: id as i32 }).map(drop))).unwrap();
    }
    {
        let env = unsafe { heed::EnvOpenOptions::new().max_dbs(128).flags(heed::EnvFlags::NO_SUB_DIR).open(&path) }.unwrap();
        let mut txn = env.write_txn().unwrap();
        let records: heed::Database<heed::types::Bytes, heed::types::Bytes> =
            env.open_database(&txn, Some("tessera.col.damaged")).unwrap().unwrap();
        let key = 3u32.to_be_bytes();
        records.put(&mut txn, &key, &sealed(&key, b"not a document")).unwrap();
        txn.commit().unwrap();
        env.prepare_for_closing().wait();
    }
    let db = Db::open(&path).unwrap();
    let damaged = db.collection::<Damaged>().unwrap();
    let high = damaged.filter(Damaged::score().ge(5));
    // Before, the damaged record counted as a match: 6 instead of an error.
    for result in [high.count(&db).map(drop), high.fetch(&db).map(drop), db.write(|tx| damaged.delete_where(tx, &high)).map(drop)] {
        match result {
            Err(Error::RecordDecode { collection, key, .. }) => assert_eq!((collection.as_str(), key.as_str()), ("damaged", "3")),
            other => panic!("expected a decode error, got {other:?}"),
        }
    }
    assert_eq!(damaged.get(&db, &7u32).unwrap().unwrap().score, 7, "nothing was deleted");
}

#[test]
fn close_names_what_still_holds_the_database_and_then_closes_it() {
    #[derive(tessera::collection::Record, Debug)]
    #[record(name = "held")]
    struct Held {
        #[record(key)]
        id: u32,
    }
    let (_dir, path) = temp();
    let db = Db::open(&path).unwrap();
    let held = db.collection::<Held>().unwrap();
    db.write(|tx| held.insert(tx, &Held { id: 1 }).map(drop)).unwrap();
    match db.clone().close() {
        Err(Error::StillOpen { handles, holders, .. }) => {
            assert!(handles >= 2, "this Db and the collection: {handles}");
            assert_eq!(holders, ["collection:held"]);
        }
        other => panic!("expected StillOpen, got {other:?}"),
    }
    drop(held);
    db.close().unwrap();
    // Closed: the path opens again at once, with the data.
    let db = Db::open(&path).unwrap();
    assert_eq!(db.collection::<Held>().unwrap().all().count(&db).unwrap(), 1);
}

#[test]
fn a_failed_flush_after_a_commit_is_not_durable_but_committed_and_published() {
    let (_dir, path) = temp();
    let db = Db::open_with(&path, DbOptions { durability: Durability::Immediate, ..DbOptions::default() }).unwrap();
    let ks = db.keyspace("ks").unwrap();
    let stream = db.subscribe().unwrap();
    db.inject_flush_failures(1);
    let result = db.write(|tx| tx.put(&ks, b"k", b"v"));
    assert!(matches!(&result, Err(Error::NotDurable(message)) if message.contains("injected")), "{result:?}");
    // The commit happened: readers see it and subscribers got its batch.
    assert_eq!(get(&db, &ks, b"k").as_deref(), Some(&b"v"[..]));
    match stream.recv_timeout(Duration::from_secs(10)) {
        Some(FeedEvent::Batch(batch)) => assert_eq!(batch.changes.len(), 1),
        other => panic!("expected the commit's batch, got {other:?}"),
    }
    // The next flush works again, and covers the earlier commit.
    db.write(|tx| tx.put(&ks, b"k2", b"v2")).unwrap();
    db.sync().unwrap();
}

#[test]
fn closing_delivers_every_published_batch_first() {
    for round in 0..20 {
        let (_dir, path) = temp();
        let db = Db::open(&path).unwrap();
        let ks = db.keyspace("ks").unwrap();
        let stream = db.subscribe().unwrap();
        for n in 0..200u32 {
            db.write(|tx| tx.put(&ks, &n.to_be_bytes(), b"v")).unwrap();
        }
        drop((ks, db));
        // Every commit's batch arrives, then the end of the stream (batches still queued when
        // the last handle went used to be dropped).
        let mut batches = 0;
        while let Some(event) = stream.recv_timeout(Duration::from_secs(10)) {
            assert!(matches!(event, FeedEvent::Batch(_)), "round {round}: {event:?}");
            batches += 1;
        }
        assert_eq!(batches, 200, "round {round}");
    }
}

/// LMDB gives a commit that changed nothing no sequence of its own: the next commit takes it.
/// Such a commit must not be recorded as flushed, or the next one, under the same sequence,
/// returns from an `Immediate` write without its flush (found by review, 2026-11-30: `Ok`
/// here, with no flush attempted).
#[test]
fn an_immediate_write_after_one_that_changed_nothing_is_flushed() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    let ks = db.keyspace("ks").unwrap();
    db.write(|tx| tx.put(&ks, b"before", b"v")).unwrap();
    let nothing = db.write(|tx| Ok(tx.sequence())).unwrap();
    db.inject_flush_failures(1);
    let outcome = db.write(|tx| tx.put(&ks, b"after", b"v"));
    db.inject_flush_failures(0);
    assert_eq!(db.read_txn().unwrap().sequence(), nothing, "the write took the sequence the empty one did not");
    assert!(matches!(outcome, Err(Error::NotDurable(_))), "its flush was attempted, and failed: {outcome:?}");
}

/// An `Immediate` write that changes nothing still flushes the `Buffered` commits before it,
/// as every `Immediate` commit does.
#[test]
fn an_immediate_write_that_changed_nothing_flushes_the_buffered_commits_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    let ks = db.keyspace("ks").unwrap();
    db.write_with(Durability::BUFFERED, |tx| tx.put(&ks, b"buffered", b"v")).unwrap();
    db.inject_flush_failures(1);
    let outcome = db.write(|_| Ok(()));
    db.inject_flush_failures(0);
    assert!(matches!(outcome, Err(Error::NotDurable(_))), "the buffered commit's flush was attempted: {outcome:?}");
    db.write(|_| Ok(())).expect("flushed now");
}

/// An `Immediate` write that changes nothing, first thing after the file is opened again,
/// returns: it flushes the commits before it, which this process never recorded (before the
/// fix, `Syncer::sync_through` flushed forever, waiting for its own count of commits to reach
/// the file's).
#[test]
fn an_immediate_write_that_changed_nothing_returns_in_a_file_opened_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let db = Db::open(&path).unwrap();
        let ks = db.keyspace("ks").unwrap();
        for n in 0u8..5 {
            db.write(|tx| tx.put(&ks, &[n], b"v")).unwrap();
        }
    }
    let db = Db::open(&path).unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || sender.send(db.write(|_| Ok(()))).unwrap())
    };
    let outcome = receiver.recv_timeout(Duration::from_secs(10)).expect("an empty write returns");
    outcome.unwrap();
    writer.join().unwrap();
}
