//! Two processes on one database: each sees the other's commits on its next transaction, and
//! a map grown by one is adopted by the other. Without `DbOptions::cross_process_notify` (see
//! cross_process.rs) the change feed carries this process's commits only.

use std::process::Command;
use std::time::Duration;
use tessera::{Db, DbOptions, FeedEvent};

const CHILD_PATH: &str = "TESSERA_MULTIPROCESS_CHILD_PATH";

#[test]
#[ignore = "run by two_processes_share_one_database as a child process"]
fn multiprocess_child() {
    let path = std::env::var(CHILD_PATH).expect("run by the parent test");
    let db = Db::open(&path).unwrap();
    let ks = db.keyspace("shared").unwrap();
    // Enough data to make the map grow past the parent's size.
    let value = vec![9u8; 4096];
    db.write(|tx| {
        for i in 0u32..3000 {
            tx.put(&ks, &i.to_be_bytes(), &value)?;
        }
        tx.put(&ks, b"from child", &std::process::id().to_be_bytes())
    })
    .unwrap();
}

#[test]
fn two_processes_share_one_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.tessera");
    let db = Db::open_with(&path, DbOptions { map_size_initial_bytes: 1 << 16, ..DbOptions::default() }).unwrap();
    let ks = db.keyspace("shared").unwrap();
    db.write(|tx| tx.put(&ks, b"from parent", b"1")).unwrap();
    let stream = db.subscribe().unwrap();
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["multiprocess_child", "--exact", "--ignored", "--test-threads=1"])
        .env(CHILD_PATH, &path)
        .status()
        .unwrap();
    assert!(status.success());
    let (child_pid, count) = db.read(|tx| Ok((tx.get(&ks, b"from child")?.map(<[u8]>::to_vec), tx.len(&ks)?))).unwrap();
    assert!(child_pid.is_some(), "the child's commit is visible");
    assert_eq!(count, 3002);
    // The parent can keep writing after the child grew the map.
    db.write(|tx| tx.put(&ks, b"after", b"ok")).unwrap();
    // Commits of another process are not delivered on this process's feed.
    let events: Vec<FeedEvent> = std::iter::from_fn(|| stream.recv_timeout(Duration::from_millis(200))).collect();
    assert_eq!(events.len(), 1, "only this process's own commit: {events:?}");
}

const READER_CHILD_PATH: &str = "TESSERA_STALE_READER_CHILD_PATH";

#[test]
#[ignore = "run by a_killed_reader_process_does_not_pin_pages_forever as a child process"]
fn stale_reader_child() {
    let path = std::env::var(READER_CHILD_PATH).expect("run by the parent test");
    let db = Db::open(&path).unwrap();
    let _snapshot = db.read_txn().unwrap();
    println!("reading");
    // Held until the parent kills this process.
    std::thread::sleep(Duration::from_secs(600));
}

#[test]
fn a_killed_reader_process_does_not_pin_pages_forever() {
    // A process killed inside a read transaction leaves its slot in LMDB's reader table. Until
    // the slot was cleared, every later commit's freed pages stayed pinned by that snapshot, so
    // the file grew with every commit: `tessera replicate` killed 50 times beside a writer
    // filled a 60 GB disk (the CLI's replicate test, in CI).
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stale.tessera");
    let db = Db::open_with(&path, DbOptions { durability: tessera::Durability::BUFFERED, ..DbOptions::default() }).unwrap();
    let ks = db.keyspace("rewritten").unwrap();
    let value = vec![1u8; 1000];
    db.write(|tx| (0u32..200).try_for_each(|i| tx.put(&ks, &i.to_be_bytes(), &value))).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["stale_reader_child", "--exact", "--ignored", "--test-threads=1", "--nocapture"])
        .env(READER_CHILD_PATH, &path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(lines.any(|line| line.is_ok_and(|line| line.ends_with("reading"))), "the child opened its read transaction");
    child.kill().unwrap(); // SIGKILL: the reader slot is left behind
    child.wait().unwrap();
    let used_before = db.file_info().unwrap().used_bytes;
    // Each commit rewrites the same 200 values: with their pages reused, the file stays near
    // its size; pinned, it grows by about 200 pages (800 KB) per commit.
    for round in 0u8..100 {
        let value = vec![round; 1000];
        db.write(|tx| (0u32..200).try_for_each(|i| tx.put(&ks, &i.to_be_bytes(), &value))).unwrap();
    }
    let used_after = db.file_info().unwrap().used_bytes;
    assert!(used_after < used_before + (8 << 20), "the file grew from {used_before} to {used_after} bytes: the killed reader pins pages");
}

const WRITER_CHILD_PATH: &str = "TESSERA_KILLED_WRITER_CHILD_PATH";

#[test]
#[ignore = "run by a_process_killed_inside_a_write_transaction_leaves_the_writer_lock_behind as a child process"]
fn killed_writer_child() {
    let path = std::env::var(WRITER_CHILD_PATH).expect("run by the parent test");
    let db = Db::open(&path).unwrap();
    let ks = db.keyspace("written").unwrap();
    let _: tessera::Result<()> = db.write(|tx| {
        tx.put(&ks, b"half", &vec![7u8; 20_000])?;
        println!("writing");
        // Held, with the writer lock, until the parent kills this process.
        std::thread::sleep(Duration::from_secs(600));
        Ok(())
    });
}

#[test]
fn a_process_killed_inside_a_write_transaction_leaves_the_writer_lock_behind() {
    // LMDB's writer lock lives in the lock file, shared by every process of the file; a
    // process killed while holding it must not leave every other writer waiting forever, nor
    // any of its uncommitted writes visible.
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed_writer.tessera");
    let db = Db::open(&path).unwrap();
    let ks = db.keyspace("written").unwrap();
    db.write(|tx| tx.put(&ks, b"before", b"1")).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["killed_writer_child", "--exact", "--ignored", "--test-threads=1", "--nocapture"])
        .env(WRITER_CHILD_PATH, &path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(lines.any(|line| line.is_ok_and(|line| line.ends_with("writing"))), "the child opened its write transaction");
    // A writer of this process waits for the child's lock; the kill must release it.
    let (done, finished) = std::sync::mpsc::channel();
    let writer = {
        let (db, ks) = (db.clone(), ks.clone());
        std::thread::spawn(move || done.send(db.write(|tx| tx.put(&ks, b"after", b"2"))).unwrap())
    };
    std::thread::sleep(Duration::from_millis(200));
    assert!(finished.try_recv().is_err(), "the child holds the writer lock, so this process's write waits");
    child.kill().unwrap(); // SIGKILL, with the writer lock held
    child.wait().unwrap();
    let written = finished.recv_timeout(Duration::from_secs(30)).expect("the write goes ahead once the lock's holder is dead");
    written.unwrap();
    writer.join().unwrap();
    db.read(|tx| {
        assert_eq!(tx.get(&ks, b"before")?, Some(&b"1"[..]));
        assert_eq!(tx.get(&ks, b"after")?, Some(&b"2"[..]));
        assert_eq!(tx.get(&ks, b"half")?, None, "the killed transaction left nothing");
        Ok(())
    })
    .unwrap();
    // A later writer, and a process opening the file afresh, still get the lock.
    db.write(|tx| tx.put(&ks, b"later", b"3")).unwrap();
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{report}");
    drop(db);
    let reopened = Db::open(&path).unwrap();
    let ks = reopened.keyspace("written").unwrap();
    reopened.write(|tx| tx.put(&ks, b"reopened", b"4")).unwrap();
}
