//! `cargo run --release -p tessera-bench -- <table>`: one subcommand per seed table.

mod crud;

mod dictionary;
mod documents;
mod format;
mod format_codec;
mod format_maps;
mod format_numbers;
mod harness;
mod live;
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
}

fn main() -> std::io::Result<()> {
    match Cli::parse().table {
        TableName::Format { json, samples } => format::run(&format::Options { json, samples }),
        TableName::Crud { rounds, objects, immediate_transactions, scaling_max, no_peers } => {
            crud::run(&crud::Options { rounds, objects, immediate_transactions, scaling_max, no_peers })
        }
        TableName::Live { rounds, objects, subscriptions } => live::run(&live::Options { rounds, objects, subscriptions }),
        TableName::Store { samples } => store::run(&store::Options { samples }),
        TableName::Dictionary { rounds } => dictionary::run(&dictionary::Options { rounds }),
        TableName::Documents { iterations, warmup, others } => documents::run(&documents::Options { iterations, warmup, others }),
    }
}
