//! Profiling helper: the live table's scaling rows alone. `live_scaling N` subscribes N title
//! queries over 10,000 BenchDocs (or N, if more) and makes 20 commits changing the objects of
//! 100 of them; under callgrind, `--toggle-collect=*measured_commits*` counts only those
//! commits and their deliveries, to compare N = 100 with N = 10,000. `live_scaling N bare`
//! makes the same commits with no subscription (what the commits alone cost). `AFFECTED=10
//! live_scaling 10` is the live table's common case (10 subscriptions, 10 changed objects).

use std::time::Duration;
use tessera::live::{Event, QuerySubscription};
use tessera_bench::crud_model::{BenchDoc, parts};

const AFFECTED_DEFAULT: usize = 100;
const ROUNDS: usize = 20;

/// How many subscriptions each commit affects (`AFFECTED`, default 100).
fn affected_count() -> usize {
    std::env::var("AFFECTED").ok().and_then(|n| n.parse().ok()).unwrap_or(AFFECTED_DEFAULT)
}

/// Commits `ROUNDS` times; returns the median time from the end of the write closure to the
/// last delivery (what the live table's scaling rows report).
#[inline(never)]
fn measured_commits(
    db: &tessera::Db,
    docs: &tessera::Collection<BenchDoc>,
    subs: &[QuerySubscription<BenchDoc>],
    total: usize,
) -> Duration {
    let affected_count = affected_count();
    let stride = total / affected_count;
    let mut times = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        let affected: Vec<usize> = match std::env::var("PATTERN").as_deref() {
            Ok("hot") => (0..affected_count).collect(),
            Ok("spread") => (0..affected_count).map(|k| k * (10_000 / affected_count)).collect(),
            _ => (0..affected_count).map(|k| k * stride + round % stride).collect(),
        };
        let mut ended = std::time::Instant::now();
        db.write(|tx| {
            affected.iter().try_for_each(|i| docs.update(tx, &format!("title{i}"), |doc| doc.priority += 1).map(drop))?;
            ended = std::time::Instant::now();
            Ok(())
        })
        .unwrap();
        let per = if std::env::var("PATTERN").as_deref() == Ok("spread") { 10_000 / total.max(1) } else { 1 };
        for &i in affected.iter().filter(|&&i| i / per < subs.len()) {
            subs[i / per].recv_timeout(Duration::from_secs(60)).and_then(Event::changed).expect("a delivery");
        }
        times.push(ended.elapsed());
    }
    times.sort_unstable();
    times[ROUNDS / 2]
}

fn main() {
    let total: usize = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(10_000);
    assert!(total >= affected_count(), "at least as many subscriptions as affected ones");
    let dir = tempfile::tempdir().unwrap();
    let options = tessera::DbOptions { durability: tessera::Durability::BUFFERED, ..Default::default() };
    let db = tessera::Db::open_with(dir.path().join("db"), options).unwrap();
    let docs = db.collection::<BenchDoc>().unwrap();
    db.write(|tx| (0..10_000.max(total) as i32).try_for_each(|i| docs.insert(tx, &parts(i).into()).map(drop))).unwrap();
    let bare = std::env::args().nth(2).is_some_and(|arg| arg == "bare");
    let subs: Vec<_> = (0..if bare { 0 } else { total })
        .map(|i| if std::env::var("PATTERN").as_deref() == Ok("spread") { i * (10_000 / total) } else { i })
        .map(|i| docs.subscribe_query(&docs.filter(BenchDoc::title().eq(format!("title{i}")))).unwrap())
        .collect();
    for sub in &subs {
        sub.recv_timeout(Duration::from_secs(60)).and_then(Event::initial).expect("the initial result");
    }
    let median = measured_commits(&db, &docs, &subs, total);
    println!("{total} subscriptions{}: {median:?} from the closure's end to the last delivery", if bare { " (bare)" } else { "" });
}
