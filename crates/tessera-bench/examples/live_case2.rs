//! Profiling helper: the live table's case 2 alone (1,000 object subscriptions over 10,000
//! BenchDocs, one transaction changing every object), beside the refetch of the same objects.

use std::time::{Duration, Instant};
use tessera_bench::crud_model::{parts, BenchDoc};

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let options = tessera::DbOptions { durability: tessera::Durability::BUFFERED, ..Default::default() };
    let db = tessera::Db::open_with(dir.path().join("db"), options).unwrap();
    let docs = db.collection::<BenchDoc>().unwrap();
    db.write(|tx| (0..10_000).try_for_each(|i| docs.insert(tx, &parts(i).into()).map(drop))).unwrap();
    let titles: Vec<String> = (0..1000).map(|i| format!("title{i}")).collect();
    let subs: Vec<_> = titles.iter().map(|title| docs.subscribe_object(title).unwrap()).collect();
    let live = std::env::var("MODE").map_or(true, |mode| mode != "refetch");
    for round in 0..3 {
        let start = Instant::now();
        let mut ended = start;
        db.write(|tx| {
            (0..10_000).try_for_each(|i| docs.update(tx, &format!("title{i}"), |d| d.priority += 1 + round).map(drop))?;
            ended = Instant::now();
            Ok(())
        })
        .unwrap();
        let committed = Instant::now();
        if live {
            for sub in &subs {
                sub.recv_timeout(Duration::from_secs(60)).unwrap();
            }
        } else {
            for title in &titles {
                docs.get(&db, title).unwrap().unwrap();
            }
        }
        println!(
            "closure {:?}, commit {:?}, then {:?}, from closure end {:?}",
            ended - start,
            committed - ended,
            committed.elapsed(),
            ended.elapsed()
        );
    }
}
