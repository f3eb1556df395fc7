//! Profiling helper: the live table's scaling rows alone. `live_scaling N` subscribes N title
//! queries over 10,000 BenchDocs (or N, if more) and makes 20 commits changing the objects of
//! 100 of them; under callgrind, `--toggle-collect=*measured_commits*` counts only those
//! commits and their deliveries, to compare N = 100 with N = 10,000.

use std::time::Duration;
use tessera::live::{Event, QuerySubscription};
use tessera_bench::crud_model::{parts, BenchDoc};

const AFFECTED: usize = 100;
const ROUNDS: usize = 20;

#[inline(never)]
fn measured_commits(db: &tessera::Db, docs: &tessera::Collection<BenchDoc>, subs: &[QuerySubscription<BenchDoc>]) {
    let stride = subs.len() / AFFECTED;
    for round in 0..ROUNDS {
        let affected: Vec<usize> = (0..AFFECTED).map(|k| k * stride + round % stride).collect();
        db.write(|tx| affected.iter().try_for_each(|i| docs.update(tx, &format!("title{i}"), |doc| doc.priority += 1).map(drop))).unwrap();
        for &i in &affected {
            subs[i].recv_timeout(Duration::from_secs(60)).and_then(Event::changed).expect("a delivery");
        }
    }
}

fn main() {
    let total: usize = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(10_000);
    assert!(total >= AFFECTED, "at least {AFFECTED} subscriptions");
    let dir = tempfile::tempdir().unwrap();
    let options = tessera::DbOptions { durability: tessera::Durability::BUFFERED, ..Default::default() };
    let db = tessera::Db::open_with(dir.path().join("db"), options).unwrap();
    let docs = db.collection::<BenchDoc>().unwrap();
    db.write(|tx| (0..10_000.max(total) as i32).try_for_each(|i| docs.insert(tx, &parts(i).into()).map(drop))).unwrap();
    let subs: Vec<_> =
        (0..total).map(|i| docs.subscribe_query(&docs.filter(BenchDoc::title().eq(format!("title{i}")))).unwrap()).collect();
    for sub in &subs {
        sub.recv_timeout(Duration::from_secs(60)).and_then(Event::initial).expect("the initial result");
    }
    let start = std::time::Instant::now();
    measured_commits(&db, &docs, &subs);
    println!("{total} subscriptions: {:?} per commit", start.elapsed() / ROUNDS as u32);
}
