//! The scaling rows of the `crud` table, tessera alone: the per-object cost of each operation
//! at 1k, 10k and 100k records; linear means the cost stays flat.

use super::{expected_priority_count, tessera::open_buffered};
use crate::harness::{Goal, Table, median};
use std::time::Instant;
use tessera_bench::crud_model::{BenchDoc, parts};

/// The operations, in the order of `scaling_round`'s result.
const OPERATIONS: [&str; 5] = ["insert", "filtered scan", "get", "update", "delete"];

/// Rounds per size, at most (medians are reported).
const ROUNDS_MAX: usize = 3;

/// Runs of one size per round, at most: a size `k` times smaller than the largest runs `k`
/// times, up to this.
const REPEATS_PER_ROUND_MAX: usize = 10;

/// Per-object cost of each of `OPERATIONS` at one size, in µs.
fn scaling_round(objects: usize) -> [f64; 5] {
    let dir = tempfile::tempdir().unwrap();
    let db = open_buffered(dir.path());
    let docs = db.collection::<BenchDoc>().unwrap();
    let records: Vec<BenchDoc> = (0..objects as i32).map(|i| parts(i).into()).collect();
    let per_object = |start: Instant| start.elapsed().as_secs_f64() * 1e6 / objects as f64;
    let start = Instant::now();
    db.write(|tx| records.iter().try_for_each(|doc| docs.insert(tx, doc).map(drop))).unwrap();
    let insert = per_object(start);
    let start = Instant::now();
    let found = docs.filter(BenchDoc::priority().gt(2500)).count(&db).unwrap();
    let scan = per_object(start);
    assert_eq!(found, expected_priority_count(objects));
    let start = Instant::now();
    for doc in &records {
        assert!(docs.get(&db, doc.title.as_str()).unwrap().is_some());
    }
    let get = per_object(start);
    let start = Instant::now();
    db.write(|tx| records.iter().try_for_each(|doc| docs.update(tx, &doc.title, |d| d.priority += 1).map(drop))).unwrap();
    let update = per_object(start);
    let start = Instant::now();
    db.write(|tx| records.iter().try_for_each(|doc| docs.delete(tx, &doc.title).map(drop))).unwrap();
    let delete = per_object(start);
    [insert, scan, get, update, delete]
}

/// Adds the scaling rows to `table`: sizes 1k, 10k, … up to `scaling_max`, `rounds` (at most
/// `ROUNDS_MAX`) rounds, each running every size in turn.
pub fn rows(table: &mut Table, rounds: usize, scaling_max: usize) {
    let mut sizes = vec![1_000];
    while sizes.last().copied().unwrap_or(usize::MAX) * 10 <= scaling_max {
        sizes.push(sizes.last().copied().unwrap_or(1) * 10);
    }
    // The sizes take turns within each round, so that a change in the machine's speed during
    // the run falls on every size alike; a small size runs several times a round, as one run
    // of it lasts a millisecond.
    let mut runs: Vec<Vec<[f64; 5]>> = vec![Vec::new(); sizes.len()];
    for _ in 0..rounds.min(ROUNDS_MAX) {
        for (size, size_runs) in sizes.iter().zip(&mut runs) {
            let repeats = (scaling_max / size).clamp(1, REPEATS_PER_ROUND_MAX);
            size_runs.extend((0..repeats).map(|_| scaling_round(*size)));
        }
    }
    let figures: Vec<[f64; 5]> =
        runs.iter().map(|size_runs| std::array::from_fn(|op| median(size_runs.iter().map(|run| run[op])))).collect();
    // The issue holds insert, get and scan to 1.3x from 1k to 100k; update and delete are shown.
    for (op, name) in OPERATIONS.iter().enumerate() {
        for (size, values) in sizes.iter().zip(&figures) {
            table.row(&format!("scaling: {name}, {size} objects"), "µs/object", values[op], &[], Goal::None);
        }
        if sizes.len() > 1 {
            let growth = figures[figures.len() - 1][op] / figures[0][op];
            table.row(
                &format!("scaling: {name}, per-object cost {}k / 1k", sizes[sizes.len() - 1] / 1000),
                "ratio",
                growth,
                &[],
                if matches!(*name, "insert" | "filtered scan" | "get") { Goal::AtMost(1.3) } else { Goal::None },
            );
        }
    }
}
