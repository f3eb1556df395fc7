//! `cargo run --release -p tessera-bench -- <table>`: one subcommand per seed table.

mod format;
mod harness;
mod people;
mod store;

use clap::{Parser, Subcommand};

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
        json: Option<std::path::PathBuf>,
        /// Samples per measurement (the median is reported).
        #[arg(long, default_value_t = 31)]
        samples: usize,
    },
    /// The storage core against raw heed, and the WCDB ceiling chart with SQLite.
    Store {
        /// Samples per measurement (the median is reported).
        #[arg(long, default_value_t = 21)]
        samples: usize,
    },
}

fn main() -> std::io::Result<()> {
    match Cli::parse().table {
        TableName::Format { json, samples } => format::run(&format::Options { json, samples }),
        TableName::Store { samples } => store::run(&store::Options { samples }),
    }
}
