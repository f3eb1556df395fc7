//! What can go wrong while making the report, each naming the file it concerns.

use std::path::PathBuf;

/// An error of the `report` subcommand. Every variant names the file it concerns, so that a
/// missing or damaged results file is never reported as an empty or partial chart.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A table name that is not one of the benchmark tables.
    #[error("no benchmark table named `{table}` (the tables: {})", super::REPORT_TABLE_NAMES.join(", "))]
    UnknownTable {
        /// The name given.
        table: String,
    },
    /// A results file that the report needs does not exist.
    #[error("no results file {path} (run `{}` first)", super::producer_command(.table))]
    Missing {
        /// The file looked for.
        path: PathBuf,
        /// The table whose results it should hold.
        table: String,
    },
    /// A results file exists but could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
    /// A results file is not the JSON that `harness::Table::finish` writes.
    #[error("malformed results file {path}: {source}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// Where and why its JSON did not parse into a table.
        source: serde_json::Error,
    },
    /// A results file holds another table than its name says, or a row the report cannot show.
    #[error("{path}: {problem}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the row where there is one.
        problem: String,
    },
    /// An output file (a chart or the markdown) could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
    /// plotters could not draw a chart.
    #[error("cannot draw the chart {path}: {message}")]
    Draw {
        /// The chart's file.
        path: PathBuf,
        /// plotters' error, as text (its error type is generic over the backend).
        message: String,
    },
}
