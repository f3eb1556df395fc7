//! The `tessera-warm` thread (store/warm.rs) under load: it must never change what is read,
//! never deadlock with the writer's map resizes, never outlive its database, and follow a map
//! another process grew. Its own unit tests (in warm.rs) check that it actually faults pages in.
//! `WARM_OFF=1` switches the thread off in the two-process test (to tell its failures apart).

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tessera::{Db, DbOptions};

/// These tests count this process's threads by name: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// This process's threads named `tessera-warm` (`/proc/self/task/*/comm`).
fn warm_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim_end() == "tessera-warm")
        .count()
}

/// Waits (up to 5 s: a joined thread leaves `/proc` a moment after) until there are `count`.
fn assert_warm_threads(count: usize, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while warm_threads() != count {
        assert!(Instant::now() < deadline, "{what}: {} tessera-warm threads, expected {count}", warm_threads());
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A value that names its key and round, so that a reader can tell a torn or stale value.
fn value_of(key: u32, round: u32) -> Vec<u8> {
    let len = 64 + (key as usize * 7 + round as usize * 131) % 1500;
    let mut value = Vec::with_capacity(len);
    value.extend_from_slice(&key.to_be_bytes());
    value.extend_from_slice(&round.to_be_bytes());
    value.resize(len, (key ^ round) as u8);
    value
}

/// The round a value was written in, checking every byte of it against its key.
fn round_of(key: u32, value: &[u8]) -> u32 {
    let round = u32::from_be_bytes(value[4..8].try_into().unwrap());
    assert_eq!(value, &value_of(key, round)[..], "key {key}: the value read is not one that was written");
    round
}

#[test]
fn one_thread_per_open_file_and_none_left_after_the_last_handle_goes() {
    let _serial = serial();
    let before = warm_threads();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    for round in 0..20u32 {
        let db = Db::open(&path).unwrap();
        let again = Db::open(&path).unwrap(); // the same database: still one thread
        let ks = db.keyspace("ks").unwrap();
        db.write(|tx| tx.put(&ks, &round.to_be_bytes(), &[1; 100])).unwrap();
        assert_warm_threads(before + 1, "two handles of one file");
        drop(db);
        assert_warm_threads(before + 1, "one handle left");
        drop(again);
        assert_warm_threads(before, "after the last handle");
    }
    // Dropped on another thread.
    let db = Db::open(&path).unwrap();
    std::thread::spawn(move || drop(db)).join().unwrap();
    assert_warm_threads(before, "after the last handle went on another thread");
    // Without write_map, read-only, or switched off: no thread.
    for options in [
        DbOptions { write_map: false, ..DbOptions::default() },
        DbOptions { read_only: true, ..DbOptions::default() },
        DbOptions { warm_pages_ahead: false, ..DbOptions::default() },
    ] {
        let db = Db::open_with(&path, options.clone()).unwrap();
        assert_eq!(warm_threads(), before, "no thread with {options:?}");
        drop(db);
    }
}

#[test]
fn the_last_handle_dropped_on_a_listener_thread_stops_the_thread() {
    let _serial = serial();
    let before = warm_threads();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open(&path).unwrap();
    let ks = db.keyspace("ks").unwrap();
    let (drop_now, dropping) = std::sync::mpsc::channel::<()>();
    let (dropped, was_dropped) = std::sync::mpsc::channel::<()>();
    let mut kept = Some(db.clone());
    db.on_commit(move |_| {
        if let Some(last) = kept.take() {
            dropping.recv().unwrap();
            drop(last); // `Inner::drop` on the tessera-listener thread
            dropped.send(()).unwrap();
        }
    })
    .unwrap();
    db.write(|tx| tx.put(&ks, b"k", b"v")).unwrap();
    drop(ks);
    drop(db);
    assert_warm_threads(before + 1, "the listener still holds a handle");
    drop_now.send(()).unwrap();
    was_dropped.recv_timeout(Duration::from_secs(30)).expect("the listener dropped the last handle");
    assert_warm_threads(before, "after the last handle went on the listener thread");
    let db = Db::open(&path).unwrap(); // closed, so it opens again
    let ks = db.keyspace("ks").unwrap();
    assert_eq!(db.read(|tx| Ok(tx.get(&ks, b"k")?.map(<[u8]>::to_vec))).unwrap(), Some(b"v".to_vec()));
}

#[test]
fn readers_see_whole_snapshots_while_the_map_grows_many_times_and_is_warmed() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let options = DbOptions { map_size_initial_bytes: 1 << 16, ..DbOptions::default() };
    let db = Db::open_with(dir.path().join("db"), options).unwrap();
    let ks = db.keyspace("values").unwrap();
    let first_map = db.map_size_bytes();
    let done = Arc::new(AtomicBool::new(false));
    let (finished, finishing) = std::sync::mpsc::channel::<&'static str>();
    let readers: Vec<_> = (0..3)
        .map(|reader| {
            let (db, ks, done, finished) = (db.clone(), ks.clone(), done.clone(), finished.clone());
            std::thread::spawn(move || {
                let mut snapshots = 0u32;
                while !done.load(Ordering::SeqCst) {
                    let tx = db.read_txn().unwrap();
                    // Every key of one snapshot was written by the same round.
                    let mut rounds = std::collections::BTreeSet::new();
                    for entry in tx.range(&ks, ..).unwrap() {
                        let (key, value) = entry.unwrap();
                        rounds.insert(round_of(u32::from_be_bytes(key.try_into().unwrap()), value));
                    }
                    assert!(rounds.len() <= 1, "reader {reader}: one snapshot holds rounds {rounds:?}");
                    if reader == 0 {
                        // Holds its snapshot a while: grow-ahead is skipped, a full map waits.
                        std::thread::sleep(Duration::from_millis(3));
                    }
                    drop(tx);
                    snapshots += 1;
                }
                assert!(snapshots > 0);
                finished.send("reader").unwrap();
            })
        })
        .collect();
    let writer = {
        let (db, ks, done) = (db.clone(), ks.clone(), done.clone());
        std::thread::spawn(move || {
            for round in 0..40u32 {
                let keys = 200 + round * 60;
                db.write(|tx| (0..keys).try_for_each(|key| tx.put(&ks, &key.to_be_bytes(), &value_of(key, round)))).unwrap();
            }
            done.store(true, Ordering::SeqCst);
            finished.send("writer").unwrap();
        })
    };
    for _ in 0..4 {
        // A deadlock between the writer, the resize gate and the warming thread stops here.
        finishing.recv_timeout(Duration::from_secs(300)).expect("every thread finished within 300 s");
    }
    writer.join().unwrap();
    readers.into_iter().for_each(|reader| reader.join().unwrap());
    assert!(db.map_size_bytes() >= first_map << 8, "the map grew several times: {} -> {}", first_map, db.map_size_bytes());
    let tx = db.read_txn().unwrap();
    for key in 0..200 + 39 * 60 {
        assert_eq!(round_of(key, tx.get(&ks, &key.to_be_bytes()).unwrap().expect("written")), 39);
    }
}

const CHILD_PATH: &str = "TESSERA_WARM_CHILD_PATH";

#[test]
#[ignore = "run by a_map_grown_by_another_process_is_adopted_and_warmed_without_harm as a child"]
fn warm_child_grows_the_file() {
    let path = std::env::var(CHILD_PATH).expect("run by the parent test");
    let db = Db::open_with(&path, DbOptions { warm_pages_ahead: std::env::var("WARM_OFF").is_err(), ..DbOptions::default() }).unwrap();
    let ks = db.keyspace("child").unwrap();
    for round in 0..12u32 {
        db.write(|tx| (0..2000u32).try_for_each(|key| tx.put(&ks, &(round * 2000 + key).to_be_bytes(), &value_of(key, round)))).unwrap();
    }
}

/// Before resizes took a lock across processes and never asked for less than the file's
/// length, this failed about half the time with SIGBUS in either process, with the warming
/// thread on or off (`WARM_OFF=1`): LMDB with the write map sets the file's length to its own
/// map size (`ftruncate` in `mdb_env_map`, at open and at every resize; an adoption,
/// `env.resize(0)`, takes the size in the newest meta page), which cut the file below a map the
/// other process had already grown, and that process's next write into the cut pages was SIGBUS.
#[test]
fn a_map_grown_by_another_process_is_adopted_and_warmed_without_harm() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let options =
        DbOptions { map_size_initial_bytes: 1 << 16, warm_pages_ahead: std::env::var("WARM_OFF").is_err(), ..DbOptions::default() };
    let db = Db::open_with(&path, options).unwrap();
    let ks = db.keyspace("parent").unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["warm_child_grows_the_file", "--exact", "--ignored", "--test-threads=1"])
        .env(CHILD_PATH, &path)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // This process writes and reads (adopting each map the child grew) while the child grows
    // the file and both warming threads run.
    let mut round = 0u32;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        db.write(|tx| (0..50u32).try_for_each(|key| tx.put(&ks, &(round * 50 + key).to_be_bytes(), &value_of(key, round)))).unwrap();
        let tx = db.read_txn().unwrap();
        assert_eq!(round_of(7, tx.get(&ks, &(round * 50 + 7).to_be_bytes()).unwrap().unwrap()), round);
        drop(tx);
        round += 1;
    };
    assert!(status.success(), "the child failed: {status}");
    db.write(|tx| tx.put(&ks, b"after", b"ok")).unwrap();
    assert_eq!(warm_threads(), usize::from(std::env::var("WARM_OFF").is_err()), "this database's thread");
    let child_ks = db.keyspace("child").unwrap();
    let tx = db.read_txn().unwrap();
    assert_eq!(tx.len(&child_ks).unwrap(), 24_000);
    for key in (0..24_000u32).step_by(97) {
        assert_eq!(round_of(key % 2000, tx.get(&child_ks, &key.to_be_bytes()).unwrap().unwrap()), key / 2000);
    }
    for key in 0..round * 50 {
        assert_eq!(round_of(key % 50, tx.get(&ks, &key.to_be_bytes()).unwrap().unwrap()), key / 50);
    }
}
