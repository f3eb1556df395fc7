//! Profiling aid for the crud table's durable-feed rows: inserts 10,000 BenchDocs in one
//! transaction into a fresh database, `ITER` times, with the durable feed on (`FEED=1`,
//! default) or off (`FEED=0`).
use std::time::Duration;
use tessera::{Db, DbOptions, Durability};
use tessera_bench::crud_model::{parts, BenchDoc};

fn main() {
    let iterations: usize = std::env::var("ITER").map_or(20, |v| v.parse().expect("ITER is a number"));
    let durable_feed = std::env::var("FEED").map_or(true, |v| v != "0");
    let records: Vec<BenchDoc> = (0..10_000).map(|i| parts(i).into()).collect();
    let mut total = Duration::ZERO;
    for _ in 0..iterations {
        let dir = tempfile::tempdir().unwrap();
        let options = DbOptions { durability: Durability::BUFFERED, durable_feed, ..DbOptions::default() };
        let db = Db::open_with(dir.path().join("db"), options).unwrap();
        let docs = db.collection::<BenchDoc>().unwrap();
        let start = std::time::Instant::now();
        db.write(|tx| records.iter().try_for_each(|doc| docs.insert(tx, doc).map(drop))).unwrap();
        total += start.elapsed();
    }
    eprintln!("feed {durable_feed}: {:?} per insert of 10,000", total / iterations as u32);
}
