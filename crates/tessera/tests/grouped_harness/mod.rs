//! What the grouped-write tests share (`grouped_writes.rs` and the review's
//! `grouped_writes_review.rs`): opening a database, callers made to queue in one group, bounded
//! joins and a put that reports its transaction's sequence. Each test binary uses a part.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tessera::{Db, DbOptions, Keyspace, WriteTxn};

/// A grouped write's closure, boxed so that a test can list several.
pub type Write<T> = Box<dyn FnMut(&mut WriteTxn<'_>) -> tessera::Result<T> + Send>;

/// Longest a test waits for callers that should all have returned.
pub const CALLERS_RETURN_WITHIN: Duration = Duration::from_secs(15);

pub fn open_with(options: DbOptions) -> (tempfile::TempDir, Db, Keyspace) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path().join("db"), options).unwrap();
    let ks = db.keyspace("ks").unwrap();
    (dir, db, ks)
}

pub fn open() -> (tempfile::TempDir, Db, Keyspace) {
    open_with(DbOptions::default())
}

/// Joins `handles`, failing if any has not returned within [`CALLERS_RETURN_WITHIN`] (a caller
/// left waiting) or if any panicked (a panic that escaped `write_grouped`).
pub fn join_all<T>(handles: Vec<JoinHandle<T>>) -> Vec<T> {
    let deadline = Instant::now() + CALLERS_RETURN_WITHIN;
    while !handles.iter().all(JoinHandle::is_finished) {
        let waiting = handles.iter().filter(|handle| !handle.is_finished()).count();
        assert!(Instant::now() < deadline, "{waiting} of {} callers still wait after {CALLERS_RETURN_WITHIN:?}", handles.len());
        std::thread::sleep(Duration::from_millis(2));
    }
    handles
        .into_iter()
        .enumerate()
        .map(|(index, handle)| handle.join().unwrap_or_else(|_| panic!("caller {index}: a panic escaped write_grouped")))
        .collect()
}

/// Runs `first` as a grouped write whose closure holds the lead until every closure of `rest`
/// has been handed to `write_grouped`, from threads started `spacing` apart (so that they
/// queue in order), and a margin: `rest` queues while `first`'s group commits, and forms the
/// next groups. Returns the threads of `first` and of each of `rest`.
pub fn in_one_group<T: Send + 'static>(
    db: &Db,
    first: Write<T>,
    rest: Vec<Write<T>>,
    spacing: Duration,
) -> (JoinHandle<tessera::Result<T>>, Vec<JoinHandle<tessera::Result<T>>>) {
    let inside = Arc::new(Barrier::new(2));
    let handed = Arc::new(AtomicUsize::new(0));
    let expected = rest.len();
    let leader = {
        let (db, inside, handed) = (db.clone(), inside.clone(), handed.clone());
        let mut first = first;
        let mut waited = false;
        std::thread::spawn(move || {
            db.write_grouped(move |tx| {
                if !waited {
                    waited = true;
                    inside.wait();
                    let deadline = Instant::now() + CALLERS_RETURN_WITHIN;
                    while handed.load(Ordering::SeqCst) < expected && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    std::thread::sleep(Duration::from_millis(250)); // the last ones queue meanwhile
                }
                first(tx)
            })
        })
    };
    inside.wait();
    let others = rest
        .into_iter()
        .map(|write| {
            let (db, handed) = (db.clone(), handed.clone());
            let handle = std::thread::spawn(move || {
                handed.fetch_add(1, Ordering::SeqCst);
                db.write_grouped(write)
            });
            std::thread::sleep(spacing);
            handle
        })
        .collect();
    (leader, others)
}

/// [`in_one_group`] with the callers started together, joined: `first`'s outcome and each of
/// `rest`'s, in order.
pub fn outcomes_in_one_group<T: Send + 'static>(
    db: &Db,
    first: Write<T>,
    rest: Vec<Write<T>>,
) -> (tessera::Result<T>, Vec<tessera::Result<T>>) {
    let (leader, others) = in_one_group(db, first, rest, Duration::ZERO);
    let first = join_all(vec![leader]).pop().expect("one leader");
    (first, join_all(others))
}

/// A closure that puts `key` (the value `key`) and returns the transaction's sequence.
pub fn put(ks: &Keyspace, key: &'static [u8]) -> Write<u64> {
    let ks = ks.clone();
    Box::new(move |tx| {
        tx.put(&ks, key, key)?;
        Ok(tx.sequence())
    })
}

/// The big-endian `u64` stored as `bytes` (0 when absent).
pub fn read_u64(bytes: Option<&[u8]>) -> u64 {
    bytes.map_or(0, |bytes| u64::from_be_bytes(bytes.try_into().unwrap()))
}

/// Adds one to the counter at key `n` of `counter`.
pub fn increment(tx: &mut WriteTxn<'_>, counter: &Keyspace) -> tessera::Result<()> {
    let now = read_u64(tx.get(counter, b"n")?);
    tx.put(counter, b"n", &(now + 1).to_be_bytes())
}
