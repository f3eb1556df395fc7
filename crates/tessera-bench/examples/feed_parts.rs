//! Profiling aid for the crud table's durable-feed rows: in a fresh database each round,
//! inserts 10,000 BenchDocs in one transaction, then updates them all in another, as the crud
//! rows do.
//!
//! - `FEED=0` or `FEED=1`: that mode only, `ITER` rounds (for callgrind and perf).
//! - `FEED` unset: both modes alternating in each round, `ITER` rounds, and the medians and
//!   the ratios feed on / feed off printed (the crud rows' figures, without the other rows),
//!   after the size of the insert's feed entry in both entry formats.
//! - `ONLY=insert`: the insert alone (for profiles of its transaction).
//! - `WARM=0`: without the thread that warms the map's next pages (`DbOptions::warm_pages_ahead`).
//! - `CLOCK=cpu`: the writing thread's CPU time instead of the elapsed time (steadier on a
//!   loaded machine: time spent waiting for a core is not counted; page faults are).
use std::time::Duration;

/// Elapsed or thread CPU time (see `CLOCK`).
#[derive(Clone, Copy)]
struct Clock {
    cpu: bool,
}

impl Clock {
    fn now(self) -> Duration {
        if !self.cpu {
            static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
            return START.get_or_init(std::time::Instant::now).elapsed();
        }
        let mut time = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `time` is a valid timespec for the call to fill.
        let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut time) };
        assert_eq!(status, 0, "clock_gettime");
        Duration::new(time.tv_sec as u64, time.tv_nsec as u32)
    }
}
use tessera::{Db, DbOptions, Durability};
use tessera_bench::crud_model::{BenchDoc, parts};

/// Insert and update of every record in one fresh database; (insert, update) elapsed.
fn round(clock: Clock, records: &[BenchDoc], durable_feed: bool) -> (Duration, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let warm_pages_ahead = std::env::var("WARM").map_or(true, |warm| warm != "0");
    let options = DbOptions { durability: Durability::BUFFERED, durable_feed, warm_pages_ahead, ..DbOptions::default() };
    let db = Db::open_with(dir.path().join("db"), options).unwrap();
    let docs = db.collection::<BenchDoc>().unwrap();
    let start = clock.now();
    db.write(|tx| records.iter().try_for_each(|doc| docs.insert(tx, doc).map(drop))).unwrap();
    let insert = clock.now() - start;
    if std::env::var("ONLY").is_ok_and(|only| only == "insert") {
        return (insert, Duration::ZERO);
    }
    let start = clock.now();
    db.write(|tx| records.iter().try_for_each(|doc| docs.update(tx, &doc.title, |d| d.priority += 1).map(drop))).unwrap();
    (insert, clock.now() - start)
}

/// LEB128 bytes of `value`.
fn varint_len(value: usize) -> usize {
    (usize::BITS as usize - (value | 1).leading_zeros() as usize).div_ceil(7)
}

/// The insert's feed entry in both formats of `docs/storage.md` ("Durable change feed"),
/// computed from its changes as `changes_since` returns them: (changes, format 1, format 2).
fn entry_bytes(records: &[BenchDoc]) -> (usize, usize, usize) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path().join("db"), DbOptions { durable_feed: true, ..DbOptions::default() }).unwrap();
    let docs = db.collection::<BenchDoc>().unwrap();
    db.write(|tx| records.iter().try_for_each(|doc| docs.insert(tx, doc).map(drop))).unwrap();
    let batch = db.changes_since(0, usize::MAX).unwrap().pop().expect("the insert's entry");
    let payload = |c: &tessera::store::Change| c.key.len() + c.new.as_ref().map_or(0, |v| v.len());
    let v1 = 4 + batch.changes.iter().map(|c| 1 + 2 + c.keyspace.len() + 4 + 4 + payload(c)).sum::<usize>();
    let mut names: Vec<&str> = batch.changes.iter().map(|c| &*c.keyspace).collect();
    names.sort_unstable();
    names.dedup();
    let table: usize = names.iter().map(|name| varint_len(name.len()) + name.len()).sum();
    let changes: usize = batch
        .changes
        .iter()
        .map(|c| {
            let head = (names.binary_search(&&*c.keyspace).unwrap() << 2) | 3;
            varint_len(head) + varint_len(c.key.len()) + c.new.as_ref().map_or(0, |v| varint_len(v.len())) + payload(c)
        })
        .sum();
    let v2 = 5 + varint_len(names.len()) + table + varint_len(batch.changes.len()) + changes;
    (batch.changes.len(), v1, v2)
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn main() {
    let iterations: usize = std::env::var("ITER").map_or(20, |v| v.parse().expect("ITER is a number"));
    let clock = Clock { cpu: std::env::var("CLOCK").is_ok_and(|v| v == "cpu") };
    let records: Vec<BenchDoc> = (0..10_000).map(|i| parts(i).into()).collect();
    let modes: Vec<bool> = match std::env::var("FEED") {
        Ok(value) => vec![value != "0"],
        Err(_) => vec![false, true],
    };
    if modes.len() == 2 {
        let (changes, v1, v2) = entry_bytes(&records);
        eprintln!("the insert's feed entry: {changes} changes, {v1} bytes in format 1, {v2} in format 2 (the one written)");
    }
    let mut figures = vec![(Vec::new(), Vec::new()); modes.len()];
    for _ in 0..iterations {
        for (index, &durable_feed) in modes.iter().enumerate() {
            let (insert, update) = round(clock, &records, durable_feed);
            figures[index].0.push(insert);
            figures[index].1.push(update);
        }
    }
    let medians: Vec<(Duration, Duration)> = figures.into_iter().map(|(insert, update)| (median(insert), median(update))).collect();
    for (durable_feed, (insert, update)) in modes.iter().zip(&medians) {
        eprintln!("feed {durable_feed}: insert {insert:?}, update {update:?} (medians of {iterations}, 10,000 records)");
    }
    if let [(insert_off, update_off), (insert_on, update_on)] = medians[..] {
        let ratio = |on: Duration, off: Duration| on.as_secs_f64() / off.as_secs_f64();
        eprintln!("ratio feed on / off: insert {:.2}x, update {:.2}x", ratio(insert_on, insert_off), ratio(update_on, update_off));
    }
}
