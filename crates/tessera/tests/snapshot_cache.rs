//! Reads through a `Db` reuse one kept read transaction while its snapshot is the newest:
//! they must still see every commit, of this process and of others, and the kept snapshot
//! must never hold back the reuse of freed pages or a map resize.

use std::process::Command;
use tessera::{Db, DbOptions, Durability};

const CHILD_PATH: &str = "TESSERA_SNAPSHOT_CHILD_PATH";
const CHILD_VALUE: &str = "TESSERA_SNAPSHOT_CHILD_VALUE";

fn get(db: &Db, key: &[u8]) -> Option<Vec<u8>> {
    let notes = db.keyspace("notes").unwrap();
    db.read(|tx| Ok(tx.get(&notes, key)?.map(<[u8]>::to_vec))).unwrap()
}

/// Run as a child process by the test below: writes one value and exits.
#[test]
#[ignore = "run as a child process by reads_through_the_db_see_commits_of_another_process"]
fn snapshot_child_writer() {
    let path = std::env::var(CHILD_PATH).expect("run by the parent test");
    let value = std::env::var(CHILD_VALUE).unwrap();
    let db = Db::open(path).unwrap();
    let notes = db.keyspace("notes").unwrap();
    db.write_with(Durability::Immediate, |tx| tx.put(&notes, b"from", value.as_bytes())).unwrap();
}

#[test]
fn reads_through_the_db_see_commits_of_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.tessera");
    let db = Db::open(&path).unwrap();
    let notes = db.keyspace("notes").unwrap();
    db.write(|tx| tx.put(&notes, b"from", b"parent")).unwrap();
    for round in 0..3 {
        // Read first, so that the database keeps this snapshot.
        let before = get(&db, b"from");
        let value = format!("child {round}");
        let status = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "snapshot_child_writer", "--ignored", "--nocapture"])
            .env(CHILD_PATH, &path)
            .env(CHILD_VALUE, &value)
            .status()
            .unwrap();
        assert!(status.success());
        assert_ne!(before.as_deref(), Some(value.as_bytes()));
        assert_eq!(get(&db, b"from").as_deref(), Some(value.as_bytes()), "round {round}: the other process's commit is seen");
    }
}

#[test]
fn reads_through_the_db_see_commits_of_other_threads_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("threads.tessera")).unwrap();
    let notes = db.keyspace("notes").unwrap();
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            for i in 0u32..2_000 {
                db.write(|tx| tx.put(&notes, b"counter", &i.to_be_bytes())).unwrap();
                // Once `write` returns, every reader must see `i` or later.
                let seen = get(&db, b"counter").unwrap();
                assert!(u32::from_be_bytes(seen.try_into().unwrap()) >= i);
            }
        })
    };
    let mut last = 0;
    while !writer.is_finished() {
        if let Some(seen) = get(&db, b"counter") {
            let seen = u32::from_be_bytes(seen.try_into().unwrap());
            assert!(seen >= last, "a read went back in time: {seen} after {last}");
            last = seen;
        }
    }
    writer.join().unwrap();
    assert_eq!(get(&db, b"counter").unwrap(), 1_999u32.to_be_bytes());
}

#[test]
fn a_kept_snapshot_never_pins_the_pages_later_commits_free() {
    // A read keeps its snapshot; 300 rewrites of a 64 KiB value then free 19 MB of pages in
    // all. If the kept snapshot outlived the first of those commits, none of those pages
    // could be reused and the 4 MiB map would have to grow.
    let dir = tempfile::tempdir().unwrap();
    let options = DbOptions { durability: Durability::BUFFERED, map_size_initial_bytes: 4 << 20, ..Default::default() };
    let db = Db::open_with(dir.path().join("pins.tessera"), options).unwrap();
    let notes = db.keyspace("notes").unwrap();
    let initial = db.map_size_bytes();
    db.write(|tx| tx.put(&notes, b"big", &vec![0u8; 64 << 10])).unwrap();
    assert_eq!(get(&db, b"big").unwrap().len(), 64 << 10);
    for i in 0..300u32 {
        db.write(|tx| tx.put(&notes, b"big", &vec![i as u8; 64 << 10])).unwrap();
    }
    assert_eq!(db.map_size_bytes(), initial, "freed pages were reused");
    assert_eq!(get(&db, b"big").unwrap(), vec![43u8; 64 << 10]);
}

#[test]
fn a_kept_snapshot_does_not_hold_up_a_map_resize() {
    let dir = tempfile::tempdir().unwrap();
    let options = DbOptions { durability: Durability::BUFFERED, map_size_initial_bytes: 1 << 20, ..Default::default() };
    let db = Db::open_with(dir.path().join("resize.tessera"), options).unwrap();
    let notes = db.keyspace("notes").unwrap();
    db.write(|tx| tx.put(&notes, b"small", b"1")).unwrap();
    assert_eq!(get(&db, b"small").as_deref(), Some(&b"1"[..]));
    // The next write needs a larger map while the database keeps the snapshot just read.
    let started = std::time::Instant::now();
    db.write(|tx| (0..400u32).try_for_each(|i| tx.put(&notes, &i.to_be_bytes(), &vec![7u8; 8 << 10]))).unwrap();
    assert!(db.map_size_bytes() > 1 << 20);
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "the resize did not wait for the kept snapshot");
    assert_eq!(get(&db, &399u32.to_be_bytes()).unwrap(), vec![7u8; 8 << 10]);
    assert_eq!(get(&db, b"small").as_deref(), Some(&b"1"[..]));
}

/// `Db::read_txn` reuses the kept transaction too, and hands its own back when dropped: a
/// transaction that began before a commit is never kept, even when the commit wrote nothing
/// (opening a keyspace the file already had leaves LMDB's transaction id as it was, and a
/// transaction that began before does not know the keyspace's handle: EINVAL).
#[test]
fn a_read_transaction_that_began_before_a_keyspace_was_opened_is_not_reused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let db = Db::open(&path).unwrap();
        let late = db.keyspace("late").unwrap();
        db.write(|tx| tx.put(&late, b"k", b"v")).unwrap();
    }
    let db = Db::open(&path).unwrap();
    let notes = db.keyspace("notes").unwrap();
    db.write(|tx| tx.put(&notes, b"n", b"1")).unwrap();
    let early = db.read_txn().unwrap();
    // Opened in this process only now: a commit that writes nothing.
    let late = db.keyspace("late").unwrap();
    assert_eq!(early.get(&notes, b"n").unwrap(), Some(&b"1"[..]));
    drop(early);
    for _ in 0..3 {
        let txn = db.read_txn().unwrap();
        assert_eq!(txn.get(&late, b"k").unwrap(), Some(&b"v"[..]));
        assert_eq!(db.read(|tx| Ok(tx.get(&late, b"k")?.map(<[u8]>::to_vec))).unwrap(), Some(b"v".to_vec()));
    }
}

/// A dropped `Db::read_txn` on the newest snapshot is reused by the next read, which still
/// sees every later commit.
#[test]
fn read_transactions_reused_still_see_each_commit() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    let notes = db.keyspace("notes").unwrap();
    for round in 0..50u32 {
        let value = round.to_be_bytes();
        db.write(|tx| tx.put(&notes, b"k", &value)).unwrap();
        for _ in 0..3 {
            let txn = db.read_txn().unwrap();
            assert_eq!(txn.get(&notes, b"k").unwrap(), Some(&value[..]));
        }
    }
}
