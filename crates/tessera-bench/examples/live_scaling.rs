//! Profiling helper: the live table's scaling rows alone. `live_scaling N` subscribes N title
//! queries over 10,000 BenchDocs (or N, if more) and makes 20 commits changing the objects of
//! 100 of them; under callgrind, `--toggle-collect=*measured_commits*` counts only those
//! commits and their deliveries, to compare N = 100 with N = 10,000. `live_scaling N bare`
//! makes the same commits with no subscription (what the commits alone cost). `AFFECTED=10
//! live_scaling 10` is the live table's common case (10 subscriptions, 10 changed objects).
//!
//! `PATTERN` picks the changed objects: `spread` (the table's design: the subscriptions spread
//! over the 10,000 objects as evenly, and every size changing the same objects, one in every
//! 100), `hot` (objects 0 to 99 at every size), or unset, the first design (adjacent objects at
//! N = 100; at larger N, one in every N / 100, another set each round).

use std::time::Duration;
use tessera::live::{Event, QuerySubscription};
use tessera_bench::crud_model::{BenchDoc, parts};

const AFFECTED_DEFAULT: usize = 100;
const ROUNDS: usize = 20;

/// The objects the table's design spreads the subscriptions and changes over.
const OBJECTS: usize = 10_000;

/// Whether `PATTERN=spread`: subscription `j` watches object `j * OBJECTS / N`.
fn spread() -> bool {
    std::env::var("PATTERN").as_deref() == Ok("spread")
}

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
    let pattern = std::env::var("PATTERN").unwrap_or_default();
    let spacing = if spread() { OBJECTS / total } else { 1 };
    let mut times = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        let affected: Vec<usize> = match pattern.as_str() {
            "hot" => (0..affected_count).collect(),
            "spread" => (0..affected_count).map(|k| k * (OBJECTS / affected_count)).collect(),
            _ => (0..affected_count).map(|k| k * stride + round % stride).collect(),
        };
        let mut ended = std::time::Instant::now();
        db.write(|tx| {
            affected.iter().try_for_each(|i| docs.update(tx, &format!("title{i}"), |doc| doc.priority += 1).map(drop))?;
            ended = std::time::Instant::now();
            Ok(())
        })
        .unwrap();
        for &i in affected.iter().filter(|&&i| i / spacing < subs.len()) {
            subs[i / spacing].recv_timeout(Duration::from_secs(60)).and_then(Event::changed).expect("a delivery");
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
    db.write(|tx| (0..OBJECTS.max(total) as i32).try_for_each(|i| docs.insert(tx, &parts(i).into()).map(drop))).unwrap();
    let bare = std::env::args().nth(2).is_some_and(|arg| arg == "bare");
    let subs: Vec<_> = (0..if bare { 0 } else { total })
        .map(|i| if spread() { i * (OBJECTS / total) } else { i })
        .map(|i| docs.subscribe_query(&docs.filter(BenchDoc::title().eq(format!("title{i}")))).unwrap())
        .collect();
    for sub in &subs {
        sub.recv_timeout(Duration::from_secs(60)).and_then(Event::initial).expect("the initial result");
    }
    let median = measured_commits(&db, &docs, &subs, total);
    println!("{total} subscriptions{}: {median:?} from the closure's end to the last delivery", if bare { " (bare)" } else { "" });
}
