//! Profiling helper: the live table's case 3 alone (1,000 range subscriptions over 10,000
//! BenchDocs, one transaction moving every priority).
//!
//! - `ROUNDS`: commits per database (3).
//! - `RUNS`: databases made one after another in this process (1). The live table runs its
//!   rounds so, each after the others' work: the allocator's state carries over.
//! - `RETAIN=1`: keep a round's deliveries until all have arrived, as the live table does,
//!   instead of dropping each on arrival.
//! - `TRIM=1`: `malloc_trim` before each run (glibc only).
//! - `PAUSE_MS`: a pause before the rounds, to attach a profiler after the setup.

use std::time::{Duration, Instant};
use tessera::collection::Order;
use tessera_bench::crud_model::{BenchDoc, parts};

fn main() {
    let runs: usize = std::env::var("RUNS").ok().and_then(|runs| runs.parse().ok()).unwrap_or(1);
    for _ in 0..runs {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        if std::env::var("TRIM").is_ok_and(|trim| trim == "1") {
            // SAFETY: malloc_trim takes no pointer; it only returns free heap memory to the system.
            unsafe { libc::malloc_trim(0) };
        }
        run();
    }
}

/// One database: the setup, then the rounds.
fn run() {
    let dir = tempfile::tempdir().unwrap();
    let options = tessera::DbOptions { durability: tessera::Durability::BUFFERED, ..Default::default() };
    let db = tessera::Db::open_with(dir.path().join("db"), options).unwrap();
    let docs = db.collection::<BenchDoc>().unwrap();
    db.write(|tx| (0..10_000).try_for_each(|i| docs.insert(tx, &parts(i).into()).map(drop))).unwrap();
    let subs: Vec<_> = (0..1000)
        .map(|i| {
            let query =
                docs.filter(BenchDoc::priority().lt(-i).and(BenchDoc::priority().ge(-i - 1000))).order_by(BenchDoc::priority(), Order::Asc);
            docs.subscribe_query(&query).unwrap()
        })
        .collect();
    for sub in &subs {
        sub.recv_timeout(Duration::from_secs(60)).unwrap();
    }
    let rounds: i32 = std::env::var("ROUNDS").ok().and_then(|rounds| rounds.parse().ok()).unwrap_or(3);
    // PAUSE_MS: a pause before the rounds, to attach a profiler to this process after the setup
    // (`perf record -p`).
    if let Some(pause_ms) = std::env::var("PAUSE_MS").ok().and_then(|ms| ms.parse().ok()) {
        println!("pid {}: pausing {pause_ms} ms", std::process::id());
        std::thread::sleep(Duration::from_millis(pause_ms));
    }
    let retain = std::env::var("RETAIN").is_ok_and(|retain| retain == "1");
    for round in 0..rounds {
        // Made before the commit, as the live table does (see there).
        let mut kept = Vec::with_capacity(if retain { subs.len() } else { 0 });
        let start = Instant::now();
        db.write(|tx| (0..10_000).try_for_each(|i| docs.update(tx, &format!("title{i}"), |d| d.priority = -10000 + i + round).map(drop)))
            .unwrap();
        let committed = Instant::now();
        for sub in &subs {
            let event = sub.recv_timeout(Duration::from_secs(60)).unwrap();
            if retain {
                kept.push(event);
            }
        }
        println!("write {:?}, deliveries {:?}", committed - start, committed.elapsed());
    }
}
