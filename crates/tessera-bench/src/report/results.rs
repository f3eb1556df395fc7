//! Reading the results files that the benchmark subcommands write to
//! `target/tessera-bench/<table>.json`, and checking what the report relies on.

use super::error::ReportError;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The benchmark tables, one per seed table, in the report's order.
pub const TABLE_NAMES: [&str; 8] = ["format", "store", "documents", "dictionary", "crud", "live", "commit", "replicate"];

/// Tables another program measures (`python`: `python/bench.py`, the Python package against
/// Python's stores): the report reads their results files and never runs them.
pub const EXTERNAL_TABLE_NAMES: [&str; 1] = ["python"];

/// Every table the report shows, in its order: [`TABLE_NAMES`], then [`EXTERNAL_TABLE_NAMES`].
///
/// # Example
/// ```
/// use tessera_bench::report::{REPORT_TABLE_NAMES, TABLE_NAMES};
///
/// assert_eq!(REPORT_TABLE_NAMES[..TABLE_NAMES.len()], TABLE_NAMES);
/// assert_eq!(REPORT_TABLE_NAMES.last(), Some(&"python"));
/// ```
pub const REPORT_TABLE_NAMES: [&str; 9] = ["format", "store", "documents", "dictionary", "crud", "live", "commit", "replicate", "python"];

/// The command that writes `table`'s results file.
///
/// # Example
/// ```
/// use tessera_bench::report::producer_command;
///
/// assert_eq!(producer_command("crud"), "cargo run --release -p tessera-bench -- crud");
/// assert_eq!(producer_command("python"), "python python/bench.py");
/// ```
pub fn producer_command(table: &str) -> String {
    match table {
        "python" => "python python/bench.py".to_owned(),
        other => format!("cargo run --release -p tessera-bench -- {other}"),
    }
}

/// Rows per table, at most: a larger file is refused rather than drawn as an unreadable chart.
pub const ROWS_COUNT_MAX: usize = 200;

/// Peers per row, at most.
pub const PEERS_COUNT_MAX: usize = 8;

/// One table's results, as the harness writes them.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultsTable {
    /// The table's name (`crud`, `live`, …), also the file's stem.
    pub table: String,
    /// CPU, core count and OS of the machine that measured it.
    pub machine: String,
    /// The rows, in the order the subcommand printed them.
    pub rows: Vec<ResultsRow>,
}

/// One row: tessera's figure, each peer's, and the row's target.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultsRow {
    /// What was measured.
    pub row: String,
    /// The unit of every figure in the row.
    pub unit: String,
    /// tessera's figure; `None` when it was not a number (the harness writes NaN as null).
    pub tessera: Option<f64>,
    /// Each peer's figure by name (in the file's order, which is sorted by name).
    #[serde(deserialize_with = "peers_in_order")]
    pub peers: Vec<(String, Option<f64>)>,
    /// The target as text (`<= 0.6 x sqlite (7.152)`), if the row has one.
    pub target: Option<String>,
    /// Whether tessera met the target, if the row has one.
    pub met: Option<bool>,
}

fn peers_in_order<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<(String, Option<f64>)>, D::Error> {
    let peers = serde_json::Map::<String, serde_json::Value>::deserialize(deserializer)?;
    peers
        .into_iter()
        .map(|(name, value)| match value {
            serde_json::Value::Null => Ok((name, None)),
            serde_json::Value::Number(number) => Ok((name, number.as_f64())),
            other => Err(serde::de::Error::custom(format!("peer `{name}`: expected a number or null, found {other}"))),
        })
        .collect()
}

/// The path of `table`'s results file in `directory`.
///
/// # Example
/// ```
/// use std::path::Path;
/// use tessera_bench::report::results_path;
///
/// assert_eq!(results_path(Path::new("target/tessera-bench"), "crud"), Path::new("target/tessera-bench/crud.json"));
/// ```
pub fn results_path(directory: &Path, table: &str) -> PathBuf {
    directory.join(format!("{table}.json"))
}

/// Reads and checks `table`'s results file in `directory`.
///
/// # Errors
/// [`ReportError::Missing`] when the file does not exist, [`ReportError::Malformed`] when it is
/// not a results table, and [`ReportError::Invalid`] when it holds another table, no rows, more
/// than [`ROWS_COUNT_MAX`] rows or [`PEERS_COUNT_MAX`] peers in a row, a negative or
/// infinite figure, or a verdict (`met`) without the figures it compares: tessera's, and each
/// peer's the target names (the harness writes a figure that is not a number as null).
///
/// # Example
/// ```
/// use tessera_bench::report::{read_table, ReportError};
///
/// let directory = tempfile::tempdir().unwrap();
/// std::fs::write(
///     directory.path().join("live.json"),
///     r#"{"table": "live", "machine": "test", "rows": [{"row": "case 2", "unit": "ms",
///         "tessera": 2.2, "peers": {"sqlite": 3.8}, "target": "<= 2", "met": false}]}"#,
/// )
/// .unwrap();
/// let live = read_table(directory.path(), "live").unwrap();
/// assert_eq!(live.rows[0].peers, vec![("sqlite".to_owned(), Some(3.8))]);
///
/// let missing = read_table(directory.path(), "crud").unwrap_err();
/// assert!(matches!(missing, ReportError::Missing { .. }));
/// assert!(missing.to_string().contains("crud.json"));
/// ```
pub fn read_table(directory: &Path, table: &str) -> Result<ResultsTable, ReportError> {
    let path = results_path(directory, table);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Err(ReportError::Missing { path, table: table.to_owned() }),
        Err(source) => return Err(ReportError::Read { path, source }),
    };
    let results: ResultsTable = serde_json::from_str(&text).map_err(|source| ReportError::Malformed { path: path.clone(), source })?;
    check(&results, table).map_err(|problem| ReportError::Invalid { path, problem })?;
    Ok(results)
}

/// What the report relies on: the right table, within the limits, figures that can be drawn.
fn check(results: &ResultsTable, table: &str) -> Result<(), String> {
    if results.table != table {
        return Err(format!("holds the table `{}`, expected `{table}`", results.table));
    }
    if results.rows.is_empty() {
        return Err("has no rows".to_owned());
    }
    if results.rows.len() > ROWS_COUNT_MAX {
        return Err(format!("has {} rows, more than {ROWS_COUNT_MAX}", results.rows.len()));
    }
    for row in &results.rows {
        if row.peers.len() > PEERS_COUNT_MAX {
            return Err(format!("row `{}` has {} peers, more than {PEERS_COUNT_MAX}", row.row, row.peers.len()));
        }
        let figures = std::iter::once(("tessera", row.tessera)).chain(row.peers.iter().map(|(name, figure)| (name.as_str(), *figure)));
        for (system, figure) in figures {
            if let Some(figure) = figure
                && (!figure.is_finite() || figure < 0.0)
            {
                return Err(format!("row `{}`: {system}'s figure {figure} is not a finite number >= 0", row.row));
            }
        }
        if row.met.is_some() {
            let target = row.target.as_deref().unwrap_or("");
            let unmeasured = std::iter::once(("tessera", row.tessera))
                .chain(row.peers.iter().filter(|(name, _)| target.contains(name.as_str())).map(|(name, figure)| (name.as_str(), *figure)))
                .find(|(_, figure)| figure.is_none());
            if let Some((system, _)) = unmeasured {
                return Err(format!("row `{}` has a verdict but no figure of {system}'s", row.row));
            }
        }
    }
    Ok(())
}
