//! `store`: the storage core against raw heed doing the same work by hand, plus the ceiling
//! chart Dflat borrowed from WCDB (a key and a 100-byte blob), with SQLite in the same run.
//! WCDB's and Dflat's own figures are from the seed and quoted in the README, not in `peers`.
//!
//! Every system implements `backend::StoreBackend`; each row is measured on every system in
//! turn, tessera first, sharing one `Run` (fresh keys, read probes) as the systems always
//! have. A new peer is one impl and one entry in `systems`.

mod backend;
mod heed;
mod sqlite;
mod tessera;

use crate::harness::{Goal, Table};
use backend::{Run, StoreBackend, WCDB_READS_COUNT, WCDB_THREAD_KEYS_COUNT, WCDB_THREADS_COUNT, WCDB_WRITES_COUNT};

pub struct Options {
    pub samples: usize,
}

/// One row's figure per system, in the order of the systems (tessera first); `None` where the
/// row does not apply.
type Figures = Vec<Option<f64>>;

/// Measures one row on every system, in turn.
fn measure(systems: &mut [Box<dyn StoreBackend>], run: &mut Run, row: impl Fn(&mut dyn StoreBackend, &mut Run) -> Option<f64>) -> Figures {
    systems.iter_mut().map(|system| row(system.as_mut(), run)).collect()
}

/// Adds a row: tessera's figure and each peer's that applies, each converted by `scale`.
fn add_row(
    table: &mut Table,
    systems: &[Box<dyn StoreBackend>],
    row: (&str, &str),
    figures: &Figures,
    scale: impl Fn(f64) -> f64,
    goal: Goal,
) {
    let (name, unit) = row;
    let tessera = figures[0].unwrap_or_else(|| panic!("tessera has the row `{name}`"));
    let peers: Vec<(&str, f64)> =
        systems.iter().zip(figures).skip(1).filter_map(|(system, figure)| figure.map(|figure| (system.name(), scale(figure)))).collect();
    table.row(name, unit, scale(tessera), &peers, goal);
}

pub fn run(options: &Options) -> std::io::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut table = Table::new("store");
    let mut run = Run::new(options.samples);
    let mut systems: Vec<Box<dyn StoreBackend>> = vec![
        Box::new(tessera::Tessera::open(dir.path())),
        Box::new(heed::Heed::open(dir.path())),
        Box::new(sqlite::Sqlite::open(dir.path())),
    ];
    let overhead = Goal::AtMostTimesPeer { peer: "heed", factor: 1.10 };
    let micros = |ns: f64| ns / 1e3;
    let nanos = |ns: f64| ns;

    // ---- single-key write transactions, and a 1,000-key batch
    let durable = measure(&mut systems, &mut run, |system, run| system.write_one_durable(run));
    add_row(&mut table, &systems, ("single-key write transaction, Immediate (fsync)", "µs"), &durable, micros, overhead);
    let buffered = measure(&mut systems, &mut run, |system, run| system.write_one_buffered(run));
    add_row(&mut table, &systems, ("single-key write transaction, Buffered (no fsync)", "µs"), &buffered, micros, overhead);
    let batch = measure(&mut systems, &mut run, |system, run| system.write_batch(run));
    add_row(&mut table, &systems, ("1,000-key batch write (one transaction)", "µs"), &batch, micros, overhead);

    // ---- reads
    for system in &mut systems {
        system.fill(&run);
    }
    let fresh = measure(&mut systems, &mut run, |system, run| system.point_read(run));
    let new_transaction = measure(&mut systems, &mut run, |system, run| system.point_read_new_transaction(run));
    add_row(
        &mut table,
        &systems,
        ("point read, newest snapshot (Db::read: the kept transaction between commits; heed: a new one)", "ns"),
        &fresh,
        nanos,
        overhead,
    );
    // A system whose every point read opens a transaction has its point read as this row's figure.
    let new_transaction: Figures = systems
        .iter()
        .zip(new_transaction.iter().zip(&fresh))
        .map(|(system, (own, fresh))| own.or(if system.point_read_opens_transaction() { *fresh } else { None }))
        .collect();
    add_row(
        &mut table,
        &systems,
        ("point read through Db::read_txn (kept snapshot; heed: a new read transaction)", "ns"),
        &new_transaction,
        nanos,
        overhead,
    );
    let inside = measure(&mut systems, &mut run, |system, run| system.point_read_in_snapshot(run));
    add_row(&mut table, &systems, ("point read inside one snapshot", "ns"), &inside, nanos, overhead);
    let scan = measure(&mut systems, &mut run, |system, run| system.range_scan(run));
    add_row(&mut table, &systems, ("range scan of 1,000 keys", "µs"), &scan, micros, overhead);

    // ---- the WCDB ceiling chart, in operations per second
    let ops = |count: u64| move |ns: f64| count as f64 / (ns / 1e9);
    let reads = measure(&mut systems, &mut run, |system, run| system.wcdb_read(run));
    add_row(
        &mut table,
        &systems,
        ("WCDB chart: read 33,334 (one snapshot)", "ops/s"),
        &reads,
        ops(WCDB_READS_COUNT as u64),
        Goal::AtLeast(3_000_000.0),
    );
    let writes = measure(&mut systems, &mut run, |system, run| system.wcdb_batch_write(run));
    add_row(
        &mut table,
        &systems,
        ("WCDB chart: batch write 100,000 in one transaction", "ops/s"),
        &writes,
        ops(WCDB_WRITES_COUNT),
        Goal::AtLeast(1_500_000.0),
    );
    let threads = measure(&mut systems, &mut run, |system, run| system.wcdb_threads(run));
    add_row(
        &mut table,
        &systems,
        ("WCDB chart: 4 threads writing 400,000 (1,000 per transaction)", "ops/s"),
        &threads,
        ops(WCDB_THREADS_COUNT * WCDB_THREAD_KEYS_COUNT),
        Goal::AtLeast(1_000_000.0),
    );
    table.finish()
}
