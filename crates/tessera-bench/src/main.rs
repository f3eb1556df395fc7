//! `cargo run --release -p tessera-bench -- <table>`: one subcommand per seed table.

mod alloc_count;
mod commit;
mod crud;

mod dictionary;
mod documents;
mod format;
mod format_codec;
mod format_maps;
mod format_numbers;
mod harness;
mod live;
mod live_cross_process;
mod replicate;
mod store;

/// Counts the bytes Rust code holds while a memory row asks (see `alloc_count`).
#[global_allocator]
static ALLOCATOR: alloc_count::Counting = alloc_count::Counting;

use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use tessera_bench::report::{self, EXTERNAL_TABLE_NAMES, REPORT_TABLE_NAMES, TABLE_NAMES};

#[derive(Parser)]
#[command(about = "tessera's benchmarks, with peers measured side by side in the same run")]
struct Cli {
    #[command(subcommand)]
    table: TableName,
}

#[derive(Subcommand)]
enum TableName {
    /// The binary format against Fleece's table, JSON parsers, MessagePack and CBOR.
    Format {
        /// Use this JSON file instead of the generated 1000 people.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Samples per measurement (the median is reported).
        #[arg(long, default_value_t = 31)]
        samples: usize,
    },
    /// Typed collections: Dflat's CRUD table against SQLite and native_db, and a scaling run.
    Crud {
        /// Rounds of the whole workload (medians are reported).
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        /// Objects per workload.
        #[arg(long, default_value_t = 10_000)]
        objects: usize,
        /// Transactions timed for the Immediate-durability row.
        #[arg(long, default_value_t = 200)]
        immediate_transactions: usize,
        /// Largest size of the scaling run.
        #[arg(long, default_value_t = 100_000)]
        scaling_max: usize,
        /// Measure tessera alone (for profiling).
        #[arg(long)]
        no_peers: bool,
    },
    /// Live subscriptions: Dflat's three cases against refetching on tessera and SQLite.
    Live {
        /// Rounds per case (medians are reported).
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Objects in the collection.
        #[arg(long, default_value_t = 10_000)]
        objects: usize,
        /// Subscriptions per case.
        #[arg(long, default_value_t = 1_000)]
        subscriptions: usize,
    },
    /// The dictionary: Dflat's WorkspaceDictionary table, with peers.
    Dictionary {
        /// Rounds of the whole table (medians are reported).
        #[arg(long, default_value_t = 5)]
        rounds: usize,
    },
    /// Field-decomposed documents against raw heed doing the same work by hand.
    Documents {
        /// Timed iterations per row (the median and 95th percentile are reported).
        #[arg(long, default_value_t = 20_000)]
        iterations: usize,
        /// Untimed iterations before each row.
        #[arg(long, default_value_t = 2_000)]
        warmup: usize,
        /// Other documents in the store for the second half of the table.
        #[arg(long, default_value_t = 100_000)]
        others: usize,
    },
    /// The storage core against raw heed, and the WCDB ceiling chart with SQLite.
    Store {
        /// Samples per measurement (the median is reported).
        #[arg(long, default_value_t = 21)]
        samples: usize,
    },
    /// Durable commits of one small record from 1, 2, 4 and 8 writer threads and 2 processes,
    /// against SQLite (WAL, synchronous=FULL) and native_db (redb).
    Commit {
        /// Rounds per configuration (medians are reported).
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Milliseconds each configuration commits, per round.
        #[arg(long, default_value_t = 1000)]
        duration_ms: u64,
    },
    /// tessera's durable feed replicated into PostgreSQL (a server the run starts): changes
    /// per second applied for BenchDocs, and a follower's lag behind a 10,000-record commit.
    Replicate {
        /// Rounds (medians are reported).
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// BenchDocs inserted, updated and deleted per round.
        #[arg(long, default_value_t = 100_000)]
        records: usize,
        /// Records per tessera commit.
        #[arg(long, default_value_t = 1_000)]
        commit_records: usize,
        /// Records of the commit whose lag is measured.
        #[arg(long, default_value_t = 10_000)]
        lag_records: usize,
    },
    /// One process of the `commit` table's 2-process rows (run by it).
    #[command(hide = true)]
    CommitChild {
        /// `tessera` or `sqlite`.
        system: String,
        /// The directory holding the shared file.
        dir: PathBuf,
        /// This process's number (its keys are its own).
        process: usize,
        /// Milliseconds to commit for.
        duration_ms: u64,
    },
    /// The committing process of the `live` table's cross-process row (run by it).
    #[command(hide = true)]
    LiveCrossProcessChild {
        /// The shared file.
        path: PathBuf,
        /// Commits to make.
        rounds: usize,
    },
    /// Charts and markdown: runs every table with its defaults (long), or with --from-json reads
    /// the results files of earlier runs; then writes DOCS/bench/<table>.svg and
    /// DOCS/benchmarks.md. A missing or malformed results file is an error naming the file.
    Report {
        /// Read target/tessera-bench/<table>.json (or --results-dir) instead of running the tables.
        #[arg(long)]
        from_json: bool,
        /// The directory of the results files to read (with --from-json).
        #[arg(long, requires = "from_json")]
        results_dir: Option<PathBuf>,
        /// The directory that receives benchmarks.md and bench/*.svg.
        #[arg(long, default_value_os_t = default_docs_directory())]
        docs_dir: PathBuf,
        /// The tables to report, comma-separated (default: the eight tessera-bench tables in the
        /// README's order, then `python` if python/bench.py has written its results file; it is
        /// read, never run).
        #[arg(long, value_delimiter = ',')]
        tables: Vec<String>,
    },
}

/// The workspace's `docs/`.
fn default_docs_directory() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs")
}

fn main() -> ExitCode {
    let result = match Cli::parse().table {
        TableName::Report { from_json, results_dir, docs_dir, tables } => report(from_json, results_dir, docs_dir, tables),
        table => run_table(table).map_err(|error| error.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run_table(table: TableName) -> std::io::Result<()> {
    match table {
        TableName::Format { json, samples } => format::run(&format::Options { json, samples }),
        TableName::Crud { rounds, objects, immediate_transactions, scaling_max, no_peers } => {
            crud::run(&crud::Options { rounds, objects, immediate_transactions, scaling_max, no_peers })
        }
        TableName::Live { rounds, objects, subscriptions } => live::run(&live::Options { rounds, objects, subscriptions }),
        TableName::Store { samples } => store::run(&store::Options { samples }),
        TableName::Dictionary { rounds } => dictionary::run(&dictionary::Options { rounds }),
        TableName::Documents { iterations, warmup, others } => documents::run(&documents::Options { iterations, warmup, others }),
        TableName::Commit { rounds, duration_ms } => commit::run(&commit::Options { rounds, duration: Duration::from_millis(duration_ms) }),
        TableName::Replicate { rounds, records, commit_records, lag_records } => {
            replicate::run(&replicate::Options { rounds, records, commit_records, lag_records })
        }
        TableName::CommitChild { system, dir, process, duration_ms } => {
            commit::child(&system, &dir, process, Duration::from_millis(duration_ms))
        }
        TableName::LiveCrossProcessChild { path, rounds } => live_cross_process::child(&path, rounds),
        TableName::Report { .. } => unreachable!("the report is not a table"),
    }
}

/// Runs the tables unless `from_json`, then writes the charts and the markdown.
fn report(from_json: bool, results_dir: Option<PathBuf>, docs_dir: PathBuf, tables: Vec<String>) -> Result<(), String> {
    let results_directory = results_dir.unwrap_or_else(harness::results_directory);
    let tables = if tables.is_empty() { default_tables(&results_directory) } else { tables };
    if let Some(unknown) = tables.iter().find(|name| !REPORT_TABLE_NAMES.contains(&name.as_str())) {
        return Err(format!("no benchmark table named `{unknown}` (the tables: {})", REPORT_TABLE_NAMES.join(", ")));
    }
    if !from_json {
        for name in &tables {
            if EXTERNAL_TABLE_NAMES.contains(&name.as_str()) {
                eprintln!("== {name}: read from its results file (written by `{}`)", report::producer_command(name));
                continue;
            }
            // Each table with its defaults: the same arguments as `tessera-bench <table>`, so the
            // defaults stay in one place (the clap attributes above).
            let table =
                Cli::try_parse_from(["tessera-bench", name.as_str()]).map_err(|_| format!("no benchmark table named `{name}`"))?.table;
            if matches!(table, TableName::Report { .. }) {
                return Err("`report` is not a table".to_owned());
            }
            eprintln!("== {name}");
            run_table(table).map_err(|error| format!("{name}: {error}"))?;
        }
    }
    let options = report::ReportOptions { results_directory, docs_directory: docs_dir, tables };
    let files = report::write_report(&options).map_err(|error| error.to_string())?;
    for path in files.charts.iter().chain([&files.markdown]) {
        println!("written {}", path.canonicalize().unwrap_or_else(|_| path.clone()).display());
    }
    Ok(())
}

/// Every tessera-bench table, then each table another program writes whose results file is in
/// `results_directory` (one that is not is left out, with a notice: it is not this program's
/// to run). Named with --tables, a missing file is an error.
fn default_tables(results_directory: &Path) -> Vec<String> {
    let mut tables: Vec<String> = TABLE_NAMES.map(String::from).to_vec();
    for name in EXTERNAL_TABLE_NAMES {
        let path = report::results_path(results_directory, name);
        if path.exists() {
            tables.push(name.to_owned());
        } else {
            eprintln!("notice: no {} (written by `{}`): the `{name}` table is left out", path.display(), report::producer_command(name));
        }
    }
    tables
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(arguments: &[&str]) -> Result<TableName, clap::Error> {
        Cli::try_parse_from(std::iter::once("tessera-bench").chain(arguments.iter().copied())).map(|cli| cli.table)
    }

    #[test]
    fn every_report_table_is_a_subcommand_with_defaults() {
        for name in TABLE_NAMES {
            let table = parse(&[name]).unwrap_or_else(|error| panic!("{name}: {error}"));
            assert!(!matches!(table, TableName::Report { .. }), "{name}");
        }
    }

    #[test]
    fn report_defaults_to_running_every_table_into_docs() {
        let Ok(TableName::Report { from_json, results_dir, docs_dir, tables }) = parse(&["report"]) else {
            panic!("report parses");
        };
        assert!(!from_json);
        assert_eq!(results_dir, None);
        assert!(docs_dir.ends_with("../../docs"), "{}", docs_dir.display());
        assert!(tables.is_empty(), "the default list is made when the results directory is known");
        assert!(TABLE_NAMES.iter().chain(&EXTERNAL_TABLE_NAMES).eq(REPORT_TABLE_NAMES.iter()));
    }

    #[test]
    fn the_python_table_is_a_default_once_its_results_file_exists() {
        let results = tempfile::tempdir().unwrap();
        assert_eq!(default_tables(results.path()), TABLE_NAMES);
        std::fs::write(report::results_path(results.path(), "python"), "{}").unwrap();
        assert_eq!(default_tables(results.path()), REPORT_TABLE_NAMES);
    }

    #[test]
    fn report_takes_a_list_of_tables_and_a_results_directory_only_with_from_json() {
        let Ok(TableName::Report { from_json, results_dir, tables, .. }) =
            parse(&["report", "--from-json", "--results-dir", "runs", "--tables", "crud,live"])
        else {
            panic!("report parses");
        };
        assert!(from_json);
        assert_eq!(results_dir, Some(PathBuf::from("runs")));
        assert_eq!(tables, ["crud", "live"]);
        assert!(parse(&["report", "--results-dir", "runs"]).is_err(), "--results-dir without --from-json");
    }

    #[test]
    fn an_unknown_table_is_refused_before_anything_runs() {
        let error = report(false, None, PathBuf::from("unused"), vec!["crud".to_owned(), "speed".to_owned()]).unwrap_err();
        assert!(error.contains("no benchmark table named `speed`"), "{error}");
    }
}
