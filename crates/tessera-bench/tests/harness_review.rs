//! Adversarial review of the benchmark harness's figures: `src/harness.rs` (median,
//! percentile, `Goal`, `met`, the JSON it writes) and the `report` module that reads it back.
//!
//! `harness` is a module of the binary, not of the lib, so it is compiled in here from its
//! source. `Table::finish` is never called: it would overwrite the real results files in
//! `target/tessera-bench/`; the tests serialize the table the way `finish` does instead.
//!
//! Tests marked `FIXED:` failed on the code the review read (2026-11-30) and showed a defect,
//! each fixed since; the others checked behaviour that was already correct.

#[path = "../src/harness.rs"]
#[allow(dead_code)]
mod harness;

use harness::{Goal, Table, median, percentile};
use tessera_bench::report::{ReportError, read_table};

/// One row built by the harness, returned as (`met`, the JSON the harness would write).
fn one_row(tessera: f64, peers: &[(&str, f64)], goal: Goal) -> (Option<bool>, serde_json::Value) {
    let mut table = Table::new("store");
    table.row("r", "ms", tessera, peers, goal);
    let met = table.rows[0].met;
    // Exactly what `Table::finish` writes.
    let text = serde_json::to_string_pretty(&table).expect("the harness's table serializes");
    let json: serde_json::Value = serde_json::from_str(&text).expect("the harness writes valid JSON");
    (met, json["rows"][0].clone())
}

/// Writes `table` as `Table::finish` does, into a temporary results directory, and reads it
/// back through the report.
fn round_trip(table: &Table) -> Result<tessera_bench::report::ResultsTable, ReportError> {
    let directory = tempfile::tempdir().unwrap();
    let text = serde_json::to_string_pretty(table).unwrap();
    std::fs::write(directory.path().join(format!("{}.json", table.table)), text).unwrap();
    read_table(directory.path(), &table.table)
}

// ---------------------------------------------------------------------------------------------
// Medians and percentiles
// ---------------------------------------------------------------------------------------------

/// Correct: the median of an odd count is the middle value, whatever the input order.
#[test]
fn median_of_an_odd_count_is_the_middle_value() {
    assert_eq!(median([5.0, 1.0, 3.0].into_iter()), 3.0);
    assert_eq!(median([9.0, 2.0, 7.0, 1.0, 4.0].into_iter()), 4.0);
}

/// Correct: no values, no median (NaN, which the JSON writes as null).
#[test]
fn median_of_no_values_is_nan() {
    assert!(median(std::iter::empty()).is_nan());
}

/// FIXED: the median of an even count is the upper middle value, not the mean of the two
/// middle ones. `--rounds 2` gives the better round for larger-is-better rows (commits/s,
/// changes/s), so a "median" can meet a target that the runs' median does not; the crud
/// scaling run takes the median of 30 runs at 1k and 10k (10 repeats x 3 rounds), and the
/// documents table of 20,000 iterations. Correct: (a + b) / 2 of the two middle values.
#[test]
fn median_of_an_even_count_is_the_mean_of_the_two_middle_values() {
    assert_eq!(median([1.0, 3.0].into_iter()), 2.0, "median of two rounds");
    assert_eq!(median([1.0, 2.0, 4.0, 10.0].into_iter()), 3.0);
}

/// FIXED: a NaN sample (a failed or unmeasured run) is sorted by `total_cmp` after every
/// number, so it silently shifts the median to a larger real figure: [1, NaN, 3] gives 3, a
/// figure no "median" of the valid runs has. Correct: NaN (no figure), or an error.
#[test]
fn median_with_a_nan_sample_is_not_a_finite_figure() {
    let figure = median([1.0, f64::NAN, 3.0].into_iter());
    assert!(figure.is_nan(), "median of [1, NaN, 3] = {figure}");
}

/// FIXED: `percentile` takes index `len * percent / 100`, which for 100 samples at 99 is the
/// last one: the reported "p99" is the maximum (nearest rank gives the 99th value, linear
/// interpolation 99.01). The commit table's p99 latency rows use it. Correct: nearest rank,
/// index `ceil(len * percent / 100) - 1`.
#[test]
fn p99_of_100_samples_is_not_the_maximum() {
    let samples: Vec<f64> = (1..=100).map(f64::from).collect();
    assert_eq!(percentile(samples, 99), 99.0);
}

/// Correct: 0 and 100 are the extremes, and an empty input gives NaN.
#[test]
fn percentile_extremes_and_empty_input() {
    let samples = vec![3.0, 1.0, 2.0];
    assert_eq!(percentile(samples.clone(), 0), 1.0);
    assert_eq!(percentile(samples, 100), 3.0);
    assert!(percentile(Vec::new(), 95).is_nan());
}

// ---------------------------------------------------------------------------------------------
// Goals: direction, and what each one compares
// ---------------------------------------------------------------------------------------------

/// Correct: smaller-is-better and larger-is-better goals are evaluated the right way round,
/// against the peer of the same row.
#[test]
fn goals_are_evaluated_the_right_way_round() {
    assert_eq!(one_row(2.0, &[], Goal::AtMost(3.0)).0, Some(true));
    assert_eq!(one_row(4.0, &[], Goal::AtMost(3.0)).0, Some(false));
    assert_eq!(one_row(4.0, &[], Goal::AtLeast(3.0)).0, Some(true));
    assert_eq!(one_row(2.0, &[], Goal::AtLeast(3.0)).0, Some(false));
    let peers = [("sqlite", 10.0), ("native_db", 1.0)];
    assert_eq!(one_row(5.0, &peers, Goal::AtMostTimesPeer { peer: "sqlite", factor: 0.6 }).0, Some(true));
    assert_eq!(one_row(7.0, &peers, Goal::AtMostTimesPeer { peer: "sqlite", factor: 0.6 }).0, Some(false));
    assert_eq!(one_row(21.0, &peers, Goal::AtLeastTimesPeer { peer: "sqlite", factor: 2.0 }).0, Some(true));
    assert_eq!(one_row(19.0, &peers, Goal::AtLeastTimesPeer { peer: "sqlite", factor: 2.0 }).0, Some(false));
    // The fastest peer is the smallest figure (native_db, 1.0).
    assert_eq!(one_row(0.4, &peers, Goal::AtMostTimesFastestPeer { factor: 0.5 }).0, Some(true));
    assert_eq!(one_row(0.6, &peers, Goal::AtMostTimesFastestPeer { factor: 0.5 }).0, Some(false));
    let both = Goal::AtMostAndTimesPeer { limit: 100.0, peer: "sqlite", factor: 0.25 };
    assert_eq!(one_row(2.0, &peers, both).0, Some(true));
    assert_eq!(one_row(3.0, &peers, both).0, Some(false), "misses the ratio");
    assert_eq!(one_row(150.0, &[("sqlite", 1000.0)], both).0, Some(false), "misses the limit");
    assert_eq!(one_row(1.0, &peers, Goal::None).0, None);
}

/// Correct (loud, not silent): a goal naming a peer the row does not have panics rather
/// than writing a verdict.
#[test]
#[should_panic(expected = "the goal's peer is in the row")]
fn a_goal_whose_peer_is_missing_is_refused() {
    one_row(1.0, &[("heed", 1.0)], Goal::AtMostTimesPeer { peer: "sqlite", factor: 1.0 });
}

/// FIXED: an infinite figure (a count divided by a zero time, as `store`'s ops/s and
/// `format`'s MB/s and speed-up rows compute) meets every larger-is-better target, and the
/// JSON then writes the figure as `null` beside `"met": true`. Correct: no verdict
/// (`met: None`) for a figure that is not a finite number.
#[test]
fn an_infinite_figure_does_not_meet_a_larger_is_better_target() {
    let (met, row) = one_row(f64::INFINITY, &[], Goal::AtLeast(3_000_000.0));
    assert_ne!(met, Some(true), "JSON row: {row}");
}

/// FIXED: an infinite peer figure meets every smaller-is-better ratio target (tessera <= inf),
/// and the JSON shows the peer as null. Correct: no verdict.
#[test]
fn an_infinite_peer_does_not_meet_a_ratio_target() {
    let (met, row) = one_row(1e9, &[("serde_json", f64::INFINITY)], Goal::AtMostTimesPeer { peer: "serde_json", factor: 1.0 });
    assert_ne!(met, Some(true), "JSON row: {row}");
}

/// FIXED: a zero peer figure (a peer that made no commit in the run) meets any "at least N x
/// the peer" target: 1 commit/s >= 2 x 0. Correct: no verdict against a zero peer.
#[test]
fn a_zero_peer_does_not_meet_an_at_least_times_peer_target() {
    let (met, row) = one_row(1.0, &[("sqlite", 0.0)], Goal::AtLeastTimesPeer { peer: "sqlite", factor: 2.0 });
    assert_ne!(met, Some(true), "JSON row: {row}");
}

/// FIXED: a zero time (a timer that did not tick, an operation that did not run) meets every
/// smaller-is-better target. Correct: no verdict for a zero measured time.
#[test]
fn a_zero_time_does_not_meet_an_at_most_target() {
    let (met, row) = one_row(0.0, &[], Goal::AtMost(3.0));
    assert_ne!(met, Some(true), "JSON row: {row}");
}

/// FIXED: a NaN figure (no measurement: an empty sample set, a failed round) gives
/// `met: Some(false)`, printed as "NO" / "**no**" exactly like a measured miss. The harness
/// says `met` is "computed from the measured value"; there is none. Correct: `met: None`.
#[test]
fn a_nan_figure_gives_no_verdict_rather_than_a_miss() {
    assert_eq!(one_row(f64::NAN, &[], Goal::AtMost(75.0)).0, None);
    assert_eq!(one_row(1.0, &[("heed", f64::NAN)], Goal::AtMostTimesPeer { peer: "heed", factor: 1.1 }).0, None);
}

/// FIXED: `AtMostTimesFastestPeer` sorts with `total_cmp`, where NaN is the largest value, so
/// a peer whose figure is NaN is silently skipped and the goal is judged against a slower
/// peer: here tessera meets "0.5 x the fastest peer" without the fastest peer's figure.
/// Correct: no verdict when a peer of the row has no figure.
#[test]
fn the_fastest_peer_goal_does_not_skip_a_peer_without_a_figure() {
    let peers = [("tessera-refetch", f64::NAN), ("sqlite", 10.0)];
    let (met, row) = one_row(4.0, &peers, Goal::AtMostTimesFastestPeer { factor: 0.5 });
    assert_ne!(met, Some(true), "JSON row: {row}");
}

/// FIXED: with a peer named twice, `met` is computed against the first figure while the JSON
/// (a map: the last insert wins) shows the second, so the file shows sqlite 1.0, tessera 5.0
/// and `met: true` for "<= 1 x sqlite". Correct: refuse duplicate peer names.
#[test]
#[should_panic(expected = "names peer \"sqlite\" twice")]
fn met_and_the_written_peer_figure_agree_when_a_peer_is_named_twice() {
    // The JSON keeps one figure per name: a row naming a peer twice is refused, so that the
    // verdict and the written figure cannot disagree.
    one_row(5.0, &[("sqlite", 10.0), ("sqlite", 1.0)], Goal::AtMostTimesPeer { peer: "sqlite", factor: 1.0 });
}

/// FIXED: `met` is computed from the unrounded figure, the JSON holds the rounded one: the
/// crud scaling row "per-object cost 100k / 1k" (AtMost(1.3)) at 1.3004 is written as
/// `"tessera": 1.3, "target": "<= 1.3", "met": false`, a verdict that does not follow from
/// the file (the README's "get 1.30 (met, at the edge)" is this boundary). Correct: compute
/// `met` from the figure as written (or write enough digits to decide it).
#[test]
fn met_follows_from_the_figures_as_written() {
    let (met, row) = one_row(1.3004, &[], Goal::AtMost(1.3));
    let written = row["tessera"].as_f64().unwrap();
    let limit: f64 = row["target"].as_str().unwrap().trim_start_matches("<= ").parse().unwrap();
    assert_eq!(met, Some(written <= limit), "JSON row: {row}");
}

// ---------------------------------------------------------------------------------------------
// The JSON, and the report reading it back
// ---------------------------------------------------------------------------------------------

/// Correct: NaN and infinite figures are written as `null` (valid JSON), not as `NaN`.
#[test]
fn nan_and_infinite_figures_are_written_as_valid_json() {
    let mut table = Table::new("store");
    table.row("nan", "ms", f64::NAN, &[("heed", f64::INFINITY)], Goal::None);
    let text = serde_json::to_string_pretty(&table).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert!(json["rows"][0]["tessera"].is_null());
    assert!(json["rows"][0]["peers"]["heed"].is_null());
}

/// Correct: the report reads back what the harness wrote: every row, its figures, its peers,
/// its target and its verdict.
#[test]
fn the_report_reads_back_what_the_harness_wrote() {
    let mut table = Table::new("crud");
    table.row("insert", "ms", 12.5, &[("sqlite", 30.0), ("native_db", 40.0)], Goal::AtMostTimesPeer { peer: "sqlite", factor: 0.6 });
    table.row("scaling", "ratio", 1.2, &[], Goal::AtMost(1.3));
    table.row("shown", "µs", 7.25, &[], Goal::None);
    let read = round_trip(&table).expect("reads back");
    assert_eq!(read.table, "crud");
    assert_eq!(read.rows.len(), 3);
    assert_eq!(read.rows[0].tessera, Some(12.5));
    assert_eq!(read.rows[0].peers, vec![("native_db".to_owned(), Some(40.0)), ("sqlite".to_owned(), Some(30.0))]);
    assert_eq!(read.rows[0].target.as_deref(), Some("<= 0.6 x sqlite (18.0)"));
    assert_eq!(read.rows[0].met, Some(true));
    assert_eq!(read.rows[1].met, Some(true));
    assert_eq!(read.rows[2].target, None);
    assert_eq!(read.rows[2].met, None);
}

/// Correct: a missing or malformed results file is an error naming the file.
#[test]
fn a_missing_or_malformed_results_file_is_an_error_naming_it() {
    let directory = tempfile::tempdir().unwrap();
    let missing = read_table(directory.path(), "commit").unwrap_err();
    assert!(matches!(missing, ReportError::Missing { .. }), "{missing:?}");
    assert!(missing.to_string().contains("commit.json"), "{missing}");
    std::fs::write(directory.path().join("commit.json"), r#"{"table": "commit", "machine": "m", "rows": [{"row": "r", "tessera": NaN}]}"#)
        .unwrap();
    let malformed = read_table(directory.path(), "commit").unwrap_err();
    assert!(matches!(malformed, ReportError::Malformed { .. }), "{malformed:?}");
    assert!(malformed.to_string().contains("commit.json"), "{malformed}");
}

/// FIXED: the harness writes an infinite figure as `null` next to `"met": true` (see
/// `an_infinite_figure_does_not_meet_a_larger_is_better_target`), and the report accepts it:
/// `docs/benchmarks.md` shows "—" for tessera and "yes" for the target. `read_table` promises
/// to refuse an infinite figure, but the only way one reaches it is this `null`. Correct:
/// `ReportError::Invalid` naming the file, for a verdict without the figure it judges.
#[test]
fn the_report_refuses_a_verdict_without_a_figure() {
    // The harness gives no verdict without its figures (above); a file that has one anyway
    // (written by hand, or by an older harness) is refused by the report.
    let mut table = Table::new("store");
    table.row("WCDB chart: read 33,334 (one snapshot)", "ops/s", f64::INFINITY, &[("heed", 5e6)], Goal::AtLeast(3_000_000.0));
    let read = round_trip(&table).expect("a row without a verdict is reported as it is");
    assert_eq!((read.rows[0].tessera, read.rows[0].met), (None, None));
    let directory = tempfile::tempdir().unwrap();
    for (row, missing) in [
        (r#"{"row": "r", "unit": "ops/s", "tessera": null, "peers": {}, "target": ">= 3", "met": true}"#, "tessera"),
        (
            r#"{"row": "r", "unit": "ms", "tessera": 1.0, "peers": {"sqlite": null}, "target": "<= 0.6 x sqlite (1)", "met": true}"#,
            "sqlite",
        ),
    ] {
        let text = format!(r#"{{"table": "store", "machine": "test", "rows": [{row}]}}"#);
        std::fs::write(directory.path().join("store.json"), text).unwrap();
        match read_table(directory.path(), "store") {
            Err(ReportError::Invalid { path, problem }) => assert!(path.ends_with("store.json") && problem.contains(missing), "{problem}"),
            other => panic!("a met verdict with a null figure of {missing} was accepted: {other:?}"),
        }
    }
}
