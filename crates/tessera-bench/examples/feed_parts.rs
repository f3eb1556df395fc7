//! Profiling aid for the crud table's durable-feed rows: in a fresh database each round,
//! inserts 10,000 BenchDocs in one transaction, then updates them all in another, as the crud
//! rows do.
//!
//! - `FEED=0` or `FEED=1`: that mode only, `ITER` rounds (for callgrind and perf).
//! - `FEED` unset: both modes alternating in each round, `ITER` rounds, and the medians and
//!   the ratios feed on / feed off printed (the crud rows' figures, without the other rows).
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
use tessera_bench::crud_model::{parts, BenchDoc};

/// Insert and update of every record in one fresh database; (insert, update) elapsed.
fn round(clock: Clock, records: &[BenchDoc], durable_feed: bool) -> (Duration, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let options = DbOptions { durability: Durability::BUFFERED, durable_feed, ..DbOptions::default() };
    let db = Db::open_with(dir.path().join("db"), options).unwrap();
    let docs = db.collection::<BenchDoc>().unwrap();
    let start = clock.now();
    db.write(|tx| records.iter().try_for_each(|doc| docs.insert(tx, doc).map(drop))).unwrap();
    let insert = clock.now() - start;
    let start = clock.now();
    db.write(|tx| records.iter().try_for_each(|doc| docs.update(tx, &doc.title, |d| d.priority += 1).map(drop))).unwrap();
    (insert, clock.now() - start)
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
