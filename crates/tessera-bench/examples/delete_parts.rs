//! Where a delete of 10,000 records spends its time: keys in insertion or sorted order, on a
//! raw keyspace (LMDB and the store alone), beside the puts of the same keys.
//!
//! Environment: `DELAY` (seconds of the Buffered flush delay; 0, the default, flushes right
//! after each commit, so the next transaction meets pages the flush just cleaned), `PAUSE`
//! (milliseconds to wait between the puts and the deletes), `ROUNDS` (default 5).
use std::time::Instant;
use tessera_bench::crud_model::{BenchDoc, parts};

fn main() {
    let n = 10_000;
    let records: Vec<BenchDoc> = (0..n).map(|i| parts(i).into()).collect();
    let keys = tessera_bench::crud_model::stored_keys(&records);
    let mut sorted = keys.clone();
    sorted.sort();
    let value = vec![7u8; 110];
    let dir = tempfile::tempdir().unwrap();
    let db = tessera::Db::open_with(
        dir.path().join("db"),
        tessera::DbOptions {
            durability: tessera::Durability::Buffered {
                max_delay: std::time::Duration::from_secs(std::env::var("DELAY").ok().and_then(|d| d.parse().ok()).unwrap_or(0)),
            },
            ..Default::default()
        },
    )
    .unwrap();
    let ks = db.keyspace("x").unwrap();
    let rounds = std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(5);
    for _ in 0..rounds {
        for (name, order) in [("insertion order", &keys), ("sorted", &sorted)] {
            let start = Instant::now();
            db.write(|tx| {
                for k in order {
                    tx.put(&ks, k, &value)?;
                }
                Ok(())
            })
            .unwrap();
            let put = start.elapsed().as_secs_f64() * 1e3;
            if let Ok(ms) = std::env::var("PAUSE") {
                std::thread::sleep(std::time::Duration::from_millis(ms.parse().unwrap()));
            }
            let start = Instant::now();
            db.write(|tx| {
                for k in order {
                    tx.delete(&ks, k)?;
                }
                Ok(())
            })
            .unwrap();
            println!("{name}: puts {put:.2} ms, deletes {:.2} ms", start.elapsed().as_secs_f64() * 1e3);
        }
    }
}
