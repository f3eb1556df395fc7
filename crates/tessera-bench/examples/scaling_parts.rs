//! Where the insert row of the crud scaling run spends its time: per-object insert cost at
//! 1k and 100k (or `OBJECTS`), with the default initial map and with a map large enough from
//! the start, in turn; how many times the write closure ran; with `INFO`, the file's sizes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tessera::{Db, DbOptions, Durability};
use tessera_bench::crud_model::{BenchDoc, parts};

fn insert_per_object_us(objects: usize, map_initial: Option<u64>) -> (f64, usize) {
    let dir = tempfile::tempdir().unwrap();
    let mut options = DbOptions { durability: Durability::Buffered { max_delay: Duration::from_millis(100) }, ..DbOptions::default() };
    if let Some(bytes) = map_initial {
        options.map_size_initial_bytes = bytes;
    }
    let db = Db::open_with(dir.path().join("db"), options).unwrap();
    let docs = db.collection::<BenchDoc>().unwrap();
    let records: Vec<BenchDoc> = (0..objects as i32).map(|i| parts(i).into()).collect();
    let runs = AtomicUsize::new(0);
    let start = Instant::now();
    db.write(|tx| {
        runs.fetch_add(1, Ordering::Relaxed);
        records.iter().try_for_each(|doc| docs.insert(tx, doc).map(drop))
    })
    .unwrap();
    let elapsed = start.elapsed().as_secs_f64() * 1e6 / objects as f64;
    if std::env::var("INFO").is_ok() {
        let info = db.file_info().unwrap();
        eprintln!("{objects}: used {} map {} file {}", info.used_bytes, info.map_bytes, info.file_bytes);
    }
    (elapsed, runs.into_inner())
}

/// Per-object cost of the scaling run's filtered scan at `objects`, run right after the insert
/// (`scans` times: the first is what the table measures).
fn scan_per_object_us(objects: usize, scans: usize) -> Vec<f64> {
    let dir = tempfile::tempdir().unwrap();
    let options = DbOptions { durability: Durability::Buffered { max_delay: Duration::from_millis(100) }, ..DbOptions::default() };
    let db = Db::open_with(dir.path().join("db"), options).unwrap();
    let docs = db.collection::<BenchDoc>().unwrap();
    let records: Vec<BenchDoc> = (0..objects as i32).map(|i| parts(i).into()).collect();
    db.write(|tx| records.iter().try_for_each(|doc| docs.insert(tx, doc).map(drop))).unwrap();
    (0..scans)
        .map(|_| {
            let start = Instant::now();
            let found = docs.filter(BenchDoc::priority().gt(2500)).count(&db).unwrap();
            assert!(found > 0);
            start.elapsed().as_secs_f64() * 1e6 / objects as f64
        })
        .collect()
}

fn main() {
    if std::env::var("MODE").as_deref() == Ok("scan") {
        let objects = std::env::var("OBJECTS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
        for _ in 0..3 {
            let scans: Vec<String> = scan_per_object_us(objects, 3).iter().map(|us| format!("{us:.3}")).collect();
            println!("{objects}: scans {} µs/object", scans.join(", "));
        }
        return;
    }
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    for _ in 0..rounds {
        for map in [None, Some(256 << 20)] {
            let (small, _) = insert_per_object_us(1_000, map);
            let objects = std::env::var("OBJECTS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
            let (large, runs) = insert_per_object_us(objects, map);
            println!("map {map:?}: 1k {small:.3} µs, {objects} {large:.3} µs ({runs} runs), ratio {:.2}", large / small);
        }
    }
}
