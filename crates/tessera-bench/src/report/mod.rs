//! The `report` subcommand's work: read each table's results file, draw one SVG chart per
//! table (`docs/bench/<table>.svg`) and write every table to `docs/benchmarks.md`.
//!
//! One job per module: `results` reads and checks the files, `seed_figures` holds the seeds'
//! published figures, `markdown` writes the tables, `chart` lays out and draws the charts, and
//! `error` names what went wrong and in which file. Nothing here measures anything: the
//! subcommands of the binary do, and write the results files this reads.

#![deny(missing_docs)]

mod chart;
mod error;
mod markdown;
mod results;
mod seed_figures;

pub use chart::{Bar, ChartPlan, ReferenceLine, RowGroup, SYSTEMS_COUNT_MAX, WIDTH_PX, render_svg};
pub use error::ReportError;
pub use markdown::{format_figure, markdown_document, markdown_section, peer_names};
pub use results::{
    EXTERNAL_TABLE_NAMES, PEERS_COUNT_MAX, REPORT_TABLE_NAMES, ROWS_COUNT_MAX, ResultsRow, ResultsTable, TABLE_NAMES, producer_command,
    read_table, results_path,
};
pub use seed_figures::{SEED_FIGURES, SeedFigure, seed_figures_for};

use std::path::{Path, PathBuf};

/// Where the report reads and writes.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// The directory of the results files (`<table>.json`).
    pub results_directory: PathBuf,
    /// The directory that receives `benchmarks.md` and `bench/<table>.svg`.
    pub docs_directory: PathBuf,
    /// The tables to report, each one of [`REPORT_TABLE_NAMES`], in this order.
    pub tables: Vec<String>,
}

/// The files one report wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportFiles {
    /// `benchmarks.md`.
    pub markdown: PathBuf,
    /// One chart per table, in the tables' order.
    pub charts: Vec<PathBuf>,
}

/// Reads every table of `options`, then writes the charts and the markdown. Nothing is written
/// unless every table reads and checks.
///
/// # Errors
/// [`ReportError::UnknownTable`] for a name not in [`REPORT_TABLE_NAMES`]; the errors of
/// [`read_table`]; [`ReportError::Invalid`] when a seed figure's row is missing from its table
/// (a renamed row would silently lose its reference line); [`ReportError::Draw`] and
/// [`ReportError::Write`] while writing.
///
/// # Example
/// ```
/// use tessera_bench::report::{write_report, ReportOptions};
///
/// let results = tempfile::tempdir().unwrap();
/// let docs = tempfile::tempdir().unwrap();
/// std::fs::write(
///     results.path().join("store.json"),
///     r#"{"table": "store", "machine": "test", "rows": [{"row": "range scan", "unit": "µs",
///         "tessera": 24.4, "peers": {"heed": 9.2}, "target": null, "met": null}]}"#,
/// )
/// .unwrap();
/// let options = ReportOptions {
///     results_directory: results.path().to_owned(),
///     docs_directory: docs.path().to_owned(),
///     tables: vec!["store".to_owned()],
/// };
/// let files = write_report(&options).unwrap();
/// assert!(std::fs::read_to_string(&files.markdown).unwrap().contains("| range scan | µs | 24.4 | 9.200 | — | — |"));
/// assert!(std::fs::read_to_string(&files.charts[0]).unwrap().contains("range scan (µs)"));
/// ```
pub fn write_report(options: &ReportOptions) -> Result<ReportFiles, ReportError> {
    if let Some(unknown) = options.tables.iter().find(|name| !REPORT_TABLE_NAMES.contains(&name.as_str())) {
        return Err(ReportError::UnknownTable { table: unknown.clone() });
    }
    let mut tables = Vec::with_capacity(options.tables.len());
    for name in &options.tables {
        let table = read_table(&options.results_directory, name)?;
        check_seed_rows(&table, &results_path(&options.results_directory, name))?;
        tables.push(table);
    }
    let chart_directory = options.docs_directory.join("bench");
    std::fs::create_dir_all(&chart_directory).map_err(|source| ReportError::Write { path: chart_directory.clone(), source })?;
    let mut charts = Vec::with_capacity(tables.len());
    for table in &tables {
        let path = chart_directory.join(format!("{}.svg", table.table));
        let svg = render_svg(&ChartPlan::new(table)).map_err(|message| ReportError::Draw { path: path.clone(), message })?;
        write_file(&path, &svg)?;
        charts.push(path);
    }
    let markdown = options.docs_directory.join("benchmarks.md");
    write_file(&markdown, &markdown_document(&tables, "bench"))?;
    Ok(ReportFiles { markdown, charts })
}

/// Every seed figure for `table` must find its row.
fn check_seed_rows(table: &ResultsTable, path: &Path) -> Result<(), ReportError> {
    for figure in SEED_FIGURES.iter().filter(|figure| figure.table == table.table) {
        if !table.rows.iter().any(|row| row.row == figure.row) {
            return Err(ReportError::Invalid {
                path: path.to_owned(),
                problem: format!(
                    "no row `{}` for {}'s figure from {} (rename it in report/seed_figures.rs too)",
                    figure.row, figure.system, figure.source
                ),
            });
        }
    }
    Ok(())
}

fn write_file(path: &Path, contents: &str) -> Result<(), ReportError> {
    std::fs::write(path, contents).map_err(|source| ReportError::Write { path: path.to_owned(), source })
}

#[cfg(test)]
mod tests;
