//! `crud`: Dflat's CRUD table (BenchDoc, 10,000 objects) on tessera, SQLite (rusqlite, WAL,
//! synchronous=NORMAL) and native_db, in the same run, plus a scaling run at 1k/10k/100k.
//!
//! Every system implements `backend::CrudBackend`; `round` times each row's method the same way
//! for all of them. A new peer is one impl and one entry in `PEERS`.

mod backend;
mod native;
mod scaling;
mod sqlite;
mod tessera;

use crate::harness::{Goal, Table, elapsed_ms, median};
use backend::{CrudBackend, Support};
use std::sync::{Arc, Barrier};
use std::time::Instant;
use tessera_bench::crud_model::parts;

pub struct Options {
    /// Rounds of the whole workload (medians are reported).
    pub rounds: usize,
    /// Objects per workload (Dflat's table uses 10,000).
    pub objects: usize,
    /// Transactions timed for the Immediate-durability row.
    pub immediate_transactions: usize,
    /// Largest size of the scaling run (1k, 10k, 100k by default).
    pub scaling_max: usize,
    /// Skip the peers (for profiling tessera alone).
    pub no_peers: bool,
}

/// One round of the whole workload on one system (`round::<B>`).
type RoundFn = fn(&Options) -> Figures;

/// The peers, in the order each round runs them after tessera.
const PEERS: [(&str, RoundFn); 2] = [(sqlite::Sqlite::NAME, round::<sqlite::Sqlite>), (native::Native::NAME, round::<native::Native>)];

/// One round's figures for one system, in milliseconds (Immediate: µs per transaction). NaN
/// marks a row the system does not have (not shown as a peer).
#[derive(Clone)]
struct Figures {
    insert: f64,
    fetch_priority: f64,
    fetch_image: f64,
    update: f64,
    update_each_buffered: f64,
    update_each_immediate_us: f64,
    fetch_each: f64,
    /// Fetch each record by key and read one string field, reading the field in place.
    field_view: f64,
    /// The same, decoding the whole record (SQLite: a single-column select).
    field_decode: f64,
    /// `fetch_priority` and `field_decode` on a database that does not verify checksums.
    fetch_priority_unverified: f64,
    field_decode_unverified: f64,
    delete: f64,
    threads_insert: f64,
    threads_delete: f64,
}

impl Figures {
    fn not_measured() -> Figures {
        Figures {
            insert: f64::NAN,
            fetch_priority: f64::NAN,
            fetch_image: f64::NAN,
            update: f64::NAN,
            update_each_buffered: f64::NAN,
            update_each_immediate_us: f64::NAN,
            fetch_each: f64::NAN,
            field_view: f64::NAN,
            field_decode: f64::NAN,
            fetch_priority_unverified: f64::NAN,
            field_decode_unverified: f64::NAN,
            delete: f64::NAN,
            threads_insert: f64::NAN,
            threads_delete: f64::NAN,
        }
    }
}

fn expected_priority_count(objects: usize) -> usize {
    (0..objects as i32).filter(|i| parts(*i).priority > 2500).count()
}

fn expected_image_count(objects: usize) -> usize {
    (0..objects as i32).filter(|i| i % 3 == 0).count()
}

/// Runs `operation` and returns its result and its time in ms.
fn timed<T>(operation: impl FnOnce() -> T) -> (T, f64) {
    let start = Instant::now();
    let result = operation();
    (result, elapsed_ms(start))
}

/// The time of a row the system may not have: NaN when `Absent`.
fn if_measured(support: Support, time_ms: f64) -> f64 {
    match support {
        Support::Measured => time_ms,
        Support::Absent => f64::NAN,
    }
}

/// One round of the whole workload on system `B`, in a new directory.
fn round<B: CrudBackend>(options: &Options) -> Figures {
    let dir = tempfile::tempdir().unwrap();
    let mut backend = B::open(dir.path(), options.objects);
    let mut figures = Figures::not_measured();

    figures.insert = timed(|| backend.insert_all()).1;

    let (high, time) = timed(|| backend.fetch_priority());
    figures.fetch_priority = time;
    assert_eq!(high.len(), expected_priority_count(options.objects));

    let (images, time) = timed(|| backend.fetch_image());
    figures.fetch_image = time;
    assert_eq!(images.len(), expected_image_count(options.objects));

    figures.update = timed(|| backend.update_all()).1;
    let (support, time) = timed(|| backend.update_each_buffered());
    figures.update_each_buffered = if_measured(support, time);

    let immediate = options.immediate_transactions.min(options.objects).max(1);
    backend.before_immediate();
    let time = timed(|| backend.update_each_immediate(immediate)).1;
    figures.update_each_immediate_us = time * 1e3 / immediate as f64;
    backend.after_immediate();

    figures.fetch_each = timed(|| backend.fetch_each()).1;
    figures.field_view = timed(|| backend.field_view()).1;
    let (support, time) = timed(|| backend.field_decode());
    // Absent: the view row already decodes the whole record.
    figures.field_decode = if support == Support::Measured { time } else { figures.field_view };
    if let Some(unverified) = B::open_unverified(dir.path(), options.objects) {
        (figures.fetch_priority_unverified, figures.field_decode_unverified) = unverified_rows(unverified, options.objects);
    }

    figures.delete = timed(|| backend.delete_all()).1;
    assert_eq!(backend.stored_count(), 0);

    (figures.threads_insert, figures.threads_delete) = four_threads(|barrier| backend.spawn_four_writers(options.objects, barrier));
    drop((high, images));
    figures
}

/// The cost of checking checksums on reads: the unindexed fetch and the fetch by key with a
/// full decode, on a database that does not verify them; their times in ms.
fn unverified_rows<B: CrudBackend>(mut backend: B, objects: usize) -> (f64, f64) {
    backend.insert_all();
    let (high, fetch) = timed(|| backend.fetch_priority());
    assert_eq!(high.len(), expected_priority_count(objects));
    let (support, decode) = timed(|| backend.field_decode());
    assert_eq!(support, Support::Measured, "a system without checksums has no unverified rows");
    (fetch, decode)
}

/// Runs the 4-thread insert and delete rows; returns their times in ms.
fn four_threads(spawn: impl FnOnce(Arc<Barrier>) -> Vec<std::thread::JoinHandle<()>>) -> (f64, f64) {
    let barrier = Arc::new(Barrier::new(5));
    let threads = spawn(barrier.clone());
    barrier.wait();
    let start = Instant::now();
    barrier.wait();
    let insert = elapsed_ms(start);
    barrier.wait();
    let start = Instant::now();
    barrier.wait();
    let delete = elapsed_ms(start);
    for thread in threads {
        thread.join().unwrap();
    }
    (insert, delete)
}

/// A crud row's target, as a ratio to peers of the same run.
#[derive(Clone, Copy)]
enum Target {
    /// At most this factor times the named peer.
    TimesPeer(&'static str, f64),
    /// At most this factor times the faster of [`BEST_OF`].
    TimesBestPeer(f64),
    /// Shown without a target.
    Shown,
}

/// The peers a [`Target::TimesBestPeer`] row compares with (every one of them does the row's
/// operation).
const BEST_OF: [&str; 2] = ["sqlite", "native_db"];

/// Each system's figures over the rounds: tessera's, and each peer's by name.
struct Runs {
    tessera: Vec<Figures>,
    peers: Vec<(&'static str, Vec<Figures>)>,
}

impl Runs {
    fn measure(options: &Options) -> Runs {
        let rounds = options.rounds.max(1);
        let mut runs = Runs { tessera: Vec::new(), peers: PEERS.iter().map(|(name, _)| (*name, Vec::new())).collect() };
        for round_index in 0..rounds {
            eprintln!("round {}/{rounds}", round_index + 1);
            runs.tessera.push(round::<tessera::Tessera>(options));
            if !options.no_peers {
                for ((_, run_round), (_, figures)) in PEERS.iter().zip(&mut runs.peers) {
                    figures.push(run_round(options));
                }
            }
        }
        runs
    }

    /// Adds one row: tessera's median, the peers' medians (those the row applies to) and the goal.
    fn row(&self, table: &mut Table, name: &str, unit: &str, pick: fn(&Figures) -> f64, target: Target) {
        let value = median(self.tessera.iter().map(pick));
        // A peer that does not do the row's operation has no figure (NaN), and is left out.
        let mut peers: Vec<(&str, f64)> = self
            .peers
            .iter()
            .map(|(peer, figures)| (*peer, median(figures.iter().map(pick))))
            .filter(|(_, figure)| figure.is_finite())
            .collect();
        // A peer the target compares with has a figure unless its run failed: then the row
        // keeps its target, with that peer's figure missing and no verdict (the harness gives
        // none without the figures it compares), never a row that looks as if it had no target.
        let mut require = |peer: &'static str| {
            if !peers.iter().any(|(name, _)| *name == peer) {
                peers.push((peer, f64::NAN));
            }
        };
        let goal = match target {
            Target::Shown => Goal::None,
            Target::TimesPeer(peer, factor) => {
                require(peer);
                Goal::AtMostTimesPeer { peer, factor }
            }
            Target::TimesBestPeer(factor) => {
                BEST_OF.iter().for_each(|peer| require(peer));
                Goal::AtMostTimesFastestPeer { factor }
            }
        };
        table.row(name, unit, value, &peers, goal);
    }
}

pub fn run(options: &Options) -> std::io::Result<()> {
    let runs = Runs::measure(options);
    let n = options.objects;
    let mut table = Table::new("crud");
    // Targets are ratios to the peers of this run (the typed-records issue): at most 0.6x
    // SQLite, and for fetching by key 0.5x the better of SQLite and native_db.
    use Target::*;
    let sqlite = |factor| TimesPeer("sqlite", factor);
    let mut row = |name: String, unit: &str, pick: fn(&Figures) -> f64, target: Target| runs.row(&mut table, &name, unit, pick, target);
    row(format!("insert {n} (one transaction); Dflat 92.7 ms"), "ms", |f| f.insert, sqlite(0.6));
    row(
        format!("fetch priority > 2500 ({} objects, not indexed); Dflat 4.0 ms", expected_priority_count(n)),
        "ms",
        |f| f.fetch_priority,
        sqlite(0.6),
    );
    row(format!("fetch content is Image ({})", expected_image_count(n)), "ms", |f| f.fetch_image, sqlite(0.6));
    row(format!("update {n} (one transaction); Dflat 112.5 ms"), "ms", |f| f.update, sqlite(0.6));
    row(format!("update {n} individually (Buffered); Dflat 713 ms"), "ms", |f| f.update_each_buffered, sqlite(0.6));
    row("update individually (Immediate: fsync per commit)".to_owned(), "µs/txn", |f| f.update_each_immediate_us, Shown);
    row(format!("fetch {n} individually by title (a query each); Dflat 91 ms"), "ms", |f| f.fetch_each, TimesBestPeer(0.5));
    row(format!("fetch {n} by key, read one string field: view (sqlite: SELECT tag; native_db: get)"), "ms", |f| f.field_view, sqlite(0.5));
    row(format!("fetch {n} by key, read one string field: full decode"), "ms", |f| f.field_decode, Shown);
    row(
        "fetch priority > 2500, checksums not verified (DbOptions::verify_checksums off)".to_owned(),
        "ms",
        |f| f.fetch_priority_unverified,
        Shown,
    );
    row(format!("fetch {n} by key, full decode, checksums not verified"), "ms", |f| f.field_decode_unverified, Shown);
    row(format!("delete {n} (one transaction); Dflat 102 ms"), "ms", |f| f.delete, sqlite(0.6));
    row(format!("4 threads x {n} inserts, 4 collections; Dflat 484 ms"), "ms", |f| f.threads_insert, sqlite(0.6));
    row(format!("4 threads x {n} deletes; Dflat 502 ms"), "ms", |f| f.threads_delete, sqlite(0.6));

    feed_rows(&mut table, options);
    scaling::rows(&mut table, options.rounds.max(1), options.scaling_max);
    table.finish()
}

/// The durable change feed's cost: insert and update of every object, with and without the
/// feed, alternating in each round (medians). Issue 19: at most 1.15x without it.
fn feed_rows(table: &mut Table, options: &Options) {
    let n = options.objects;
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for _ in 0..options.rounds.max(1) {
        for durable_feed in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let figures = tessera::insert_and_update_ms(dir.path(), n, durable_feed);
            if durable_feed { with.push(figures) } else { without.push(figures) }
        }
    }
    let pick = |figures: &[(f64, f64)], which: fn(&(f64, f64)) -> f64| median(figures.iter().map(which));
    let goal = Goal::AtMostTimesPeer { peer: "tessera-without-feed", factor: 1.15 };
    for (what, which) in [("insert", (|f: &(f64, f64)| f.0) as fn(&(f64, f64)) -> f64), ("update", |f: &(f64, f64)| f.1)] {
        table.row(
            &format!("{what} {n} (one transaction) with the durable change feed on"),
            "ms",
            pick(&with, which),
            &[("tessera-without-feed", pick(&without, which))],
            goal,
        );
    }
}
