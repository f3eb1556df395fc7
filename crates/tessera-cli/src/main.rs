//! `tessera`: look inside tessera database files (info, ls, schema, get, query, export,
//! import, check, backup, compact, dict, doc, replicate) and convert and check single binary documents
//! (json2bin, bin2json, validate).
//!
//! Reading commands open the database read-only: they work while another process writes to
//! it, and leave no lock file behind. Every command takes `--json` for machine-readable
//! output. Exit status: 0 ok, 1 invalid data, 2 usage, 3 I/O (a file that cannot be read or
//! written, is not a tessera database or document, or is damaged).

/// `print!` for a command: standard output that cannot be written (a closed pipe, a full
/// disk) fails the command with exit status 3 instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        write!(stdout, $($arg)*).and_then(|()| stdout.flush()).map_err(|error| crate::failure::write_failed("standard output", error))?
    }};
}

/// `println!` for a command, failing as [`out!`] does.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, $($arg)*).and_then(|()| stdout.flush()).map_err(|error| crate::failure::write_failed("standard output", error))?
    }};
}

mod convert;
mod entries;
mod failure;
mod import;
mod inspect;
mod maintain;
mod open;
mod records;
mod replicate;
mod salvage;
mod stored_json;
mod table;

use clap::{Parser, Subcommand};
use failure::Outcome;
use std::path::PathBuf;
use std::process::ExitCode;
use tessera_value::JsonStyle;

const AFTER_HELP: &str = "\
Examples:
  tessera info app.tessera
  tessera ls app.tessera
  tessera schema app.tessera tasks
  tessera get app.tessera tasks 4
  tessera get app.tessera events '[3, \"launch\"]'
  tessera query app.tessera tasks 'priority >= 5 and due is not null'
  tessera query app.tessera tasks 'priority >= 5' --explain
  tessera export app.tessera -o app.jsonl
  tessera export damaged.tessera --salvage -o salvaged.jsonl
  tessera import copy.tessera tasks app.jsonl --atomic
  tessera backup app.tessera app-backup.tessera
  tessera replicate app.tessera --postgres 'host=127.0.0.1 user=postgres' --follow
  tessera dict get app.tessera default theme
  tessera doc get app.tessera grace rank

Exit status:
  0  ok
  1  invalid data: malformed input, rejected records, nothing found, damage found by `check`
  2  usage: bad arguments, an unknown collection, a query that does not parse
  3  I/O: a file that cannot be read or written, is not a tessera database, or is damaged";

#[derive(Parser)]
#[command(name = "tessera", version, about = "Look inside tessera database files, and convert and check binary documents")]
#[command(after_long_help = AFTER_HELP, after_help = "Run `tessera --help` for examples and exit statuses.")]
struct Cli {
    /// Print machine-readable JSON instead of tables.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The file's kind, format version, size, map use and last transaction; its collections
    /// with record counts and indexes, dictionaries and document namespaces.
    Info {
        /// The database file (or a binary document).
        db: PathBuf,
    },
    /// List the collections, dictionaries and document namespaces, with counts.
    Ls {
        /// The database file.
        db: PathBuf,
    },
    /// A collection's key, fields with their types, and indexes with their state.
    Schema {
        /// The database file.
        db: PathBuf,
        /// The collection.
        collection: String,
    },
    /// One record, by primary key: `42`, `ada` (or `"ada"`), `[3, "launch"]` for a composite
    /// key. Exit 1 if there is none.
    #[command(
        after_help = "Examples:\n  tessera get app.tessera tasks 4\n  tessera get app.tessera people ada\n  tessera get --json app.tessera events '[3, \"launch\"]'"
    )]
    Get {
        /// The database file.
        db: PathBuf,
        /// The collection.
        collection: String,
        /// The key, in its natural syntax (JSON; a string key may be bare). A negative number
        /// is a key, not an option (`tessera get app.tessera readings -5`).
        #[arg(allow_negative_numbers = true)]
        key: String,
    },
    /// The records matching a query (see the query syntax in docs/query.md), as a table.
    #[command(
        after_help = "Examples:\n  tessera query app.tessera tasks 'priority >= 5 and due is not null'\n  tessera query app.tessera tasks 'title starts with \"fix\" order by due desc nulls last limit 10' --json\n  tessera query app.tessera tasks 'priority > 1' --explain"
    )]
    Query {
        /// The database file.
        db: PathBuf,
        /// The collection.
        collection: String,
        /// The query: a predicate, then `order by`, `limit` and `offset`, all optional:
        /// `priority >= 5 and title starts with "f" order by due desc nulls last limit 10`.
        text: String,
        /// Print what running the query does instead of running it.
        #[arg(long)]
        explain: bool,
        /// At most this many records.
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Collections as JSON Lines: for each, a header line with its schema, then one line per
    /// record, all from one snapshot. Every collection unless some are named. A record holding
    /// NaN or an infinity, which JSON cannot carry, is refused: each is named (collection, key,
    /// field) and the export exits 1, writing no file (on standard output, the lines before the
    /// first). With --salvage, every readable record of a damaged file (see --salvage); exit 1
    /// if something was skipped.
    #[command(
        after_help = "Examples:\n  tessera export app.tessera -o app.jsonl\n  tessera export app.tessera tasks people > some.jsonl\n  tessera export damaged.tessera --salvage -o salvaged.jsonl\n  tessera import recovered.tessera tasks salvaged.jsonl"
    )]
    Export {
        /// The database file.
        db: PathBuf,
        /// The collections to export (all if none).
        collections: Vec<String>,
        /// Write to this file (standard output if not given, or `-`).
        #[arg(short, long, value_name = "FILE")]
        output: Option<String>,
        /// Read the file's pages without LMDB (damage cannot crash it) and write every record
        /// that passes its checksum and validates, skipping damaged pages and entries and
        /// listing them on standard error (in the summary with --json). A record holding NaN or
        /// an infinity is skipped and listed as not representable. Exit 0 if nothing was
        /// skipped, 1 if something was. The file must not be written to meanwhile.
        #[arg(long)]
        salvage: bool,
    },
    /// Records from JSON Lines into a collection (created from an export's header line if
    /// missing), upserted in transactions of --batch lines. Prints `imported N, rejected M`
    /// and each rejected line's number and reason; exit 1 if any was rejected.
    #[command(
        after_help = "Examples:\n  tessera import copy.tessera tasks app.jsonl\n  tessera import app.tessera tasks new-tasks.jsonl --batch 10000\n  tessera import app.tessera tasks fixes.jsonl --atomic"
    )]
    Import {
        /// The database file (created if missing).
        db: PathBuf,
        /// The collection.
        collection: String,
        /// The JSON Lines file.
        file: PathBuf,
        /// Lines per transaction.
        #[arg(long, default_value_t = import::BATCH_LINES_DEFAULT)]
        batch: usize,
        /// All or nothing: one transaction, rolled back if any line is rejected. A collection to
        /// create from the header is created only if no line is (the lines are first tried in
        /// a scratch database beside the file, removed afterwards).
        #[arg(long)]
        atomic: bool,
    },
    /// Replicate the collections into PostgreSQL through the durable feed, exactly once: one
    /// table per collection (key and indexed fields as typed columns, the record as jsonb),
    /// each group of commits in one PostgreSQL transaction with the cursor row of
    /// `tessera_replication`. The first run copies every record; later runs resume from
    /// PostgreSQL's cursor. Prints the counts. Documents and dictionaries are not replicated.
    #[command(
        after_help = "Examples:\n  tessera replicate app.tessera --postgres 'host=127.0.0.1 user=postgres'\n  tessera replicate app.tessera --postgres postgresql://app@db/app --collections tasks,people --follow\n  tessera replicate app.tessera --postgres 'host=db user=app' --consumer reporting --resync"
    )]
    Replicate {
        /// The database file (its durable feed must be on).
        db: PathBuf,
        /// The PostgreSQL connection string (`postgresql://…` or `host=… user=…`; no TLS).
        #[arg(long, value_name = "URL")]
        postgres: String,
        /// Only these collections (comma-separated; every collection if not given).
        #[arg(long, value_delimiter = ',')]
        collections: Option<Vec<String>>,
        /// Keep tailing the feed after catching up, until stopped.
        #[arg(long)]
        follow: bool,
        /// The consumer: tessera's feed consumer and the cursor row's name in PostgreSQL.
        #[arg(long, default_value = "postgres")]
        consumer: String,
        /// When the feed no longer has the commits after the cursor, or the file's commit at
        /// the cursor is not the one PostgreSQL holds (a restored file), copy every record again.
        #[arg(long)]
        resync: bool,
        /// Most commits a PostgreSQL transaction applies.
        #[arg(long, default_value_t = 256)]
        batches: usize,
    },
    /// Check a database file (`Db::check`): every value's checksum, the B-trees, and what the
    /// values mean. Exit 0 if it is sound, 1 if damage was found, 3 if the check could not tell (the
    /// file unreadable, or the check stopped from outside). The check runs in a child
    /// process, so that damage which crashes LMDB is reported here instead of killing this one.
    Check {
        /// The database file.
        db: PathBuf,
        /// Run the check in this process (what the child does).
        #[arg(long, hide = true)]
        in_process: bool,
    },
    /// A consistent, compacted copy of the database, taken while other processes use it.
    Backup {
        /// The database file.
        db: PathBuf,
        /// The copy (must not exist).
        dest: PathBuf,
    },
    /// Rewrite the database without its free pages. No other process may have it open: one that
    /// has is named, and the file is left as it was (exit status 3).
    Compact {
        /// The database file.
        db: PathBuf,
    },
    /// The dictionary: `dict ls DB NAME`, `dict get DB NAME KEY`, `dict set DB NAME KEY VALUE`
    /// (VALUE is JSON, or else a string). The default dictionary is named `default`.
    Dict {
        #[command(subcommand)]
        action: DictCommand,
    },
    /// Field-decomposed documents: `doc get DB ID [FIELD]`.
    Doc {
        #[command(subcommand)]
        action: DocCommand,
    },
    /// Convert JSON text to a binary document.
    Json2bin {
        /// JSON input file, or - for standard input.
        input: String,
        /// Binary output file, or - for standard output.
        output: String,
    },
    /// Convert a binary document to JSON text (on standard output).
    Bin2json {
        /// Binary input file, or - for standard input.
        input: String,
        /// Indent the output.
        #[arg(long, conflicts_with = "canonical")]
        pretty: bool,
        /// Sort dict keys, for output that is equal for equal documents.
        #[arg(long)]
        canonical: bool,
        /// A shared-key table (a collection's record keys, serialized) the document uses.
        #[arg(long, value_name = "FILE")]
        keys: Option<String>,
    },
    /// Check that a file is a valid binary document: exit 0 if it is, 1 if not (3 if it
    /// cannot be read, or is a database file).
    Validate {
        /// Binary input file, or - for standard input.
        file: String,
        /// A shared-key table (a collection's record keys, serialized) the document uses.
        #[arg(long, value_name = "FILE")]
        keys: Option<String>,
    },
}

#[derive(Subcommand)]
enum DictCommand {
    /// Every key and value.
    Ls {
        /// The database file.
        db: PathBuf,
        /// The dictionary.
        name: String,
    },
    /// One value, as JSON. Exit 1 if the key is missing.
    Get {
        /// The database file.
        db: PathBuf,
        /// The dictionary.
        name: String,
        /// The key.
        key: String,
    },
    /// Set one value (JSON, or else a string), durably.
    Set {
        /// The database file.
        db: PathBuf,
        /// The dictionary.
        name: String,
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
}

#[derive(Subcommand)]
enum DocCommand {
    /// A document as JSON, or one of its fields.
    Get {
        /// The database file.
        db: PathBuf,
        /// The document's id.
        id: String,
        /// One field.
        field: Option<String>,
        /// The document namespace (needed when the file has several).
        #[arg(long)]
        namespace: Option<String>,
    },
}

fn run(command: Command, json: bool) -> Outcome {
    match command {
        Command::Info { db } => inspect::info(&db, json),
        Command::Ls { db } => inspect::ls(&db, json),
        Command::Schema { db, collection } => inspect::schema(&db, &collection, json),
        Command::Get { db, collection, key } => records::get(&db, &collection, &key, json),
        Command::Query { db, collection, text, explain, limit } => records::query(&db, &collection, &text, explain, limit, json),
        Command::Export { db, collections, output, salvage: false } => records::export(&db, &collections, output.as_deref(), json),
        Command::Export { db, collections, output, salvage: true } => salvage::export_salvage(&db, &collections, output.as_deref(), json),
        Command::Import { db, collection, file, batch, atomic } => import::import(&import::ImportOptions {
            db: &db,
            collection: &collection,
            input: &file,
            batch_lines: batch,
            atomic,
            as_json: json,
        }),
        Command::Replicate { db, postgres, collections, follow, consumer, resync, batches } => {
            replicate::replicate(&replicate::ReplicateArgs {
                db: &db,
                postgres_url: &postgres,
                collections,
                consumer: &consumer,
                follow,
                resync,
                batches_per_transaction: batches,
                as_json: json,
            })
        }
        Command::Check { db, in_process: true } => maintain::check_in_process(&db, json),
        Command::Check { db, in_process: false } => maintain::check_in_child(&db, json),
        Command::Backup { db, dest } => maintain::backup(&db, &dest, json),
        Command::Compact { db } => maintain::compact(&db, json),
        Command::Dict { action } => match action {
            DictCommand::Ls { db, name } => entries::dict(&db, &name, entries::DictAction::Ls, json),
            DictCommand::Get { db, name, key } => entries::dict(&db, &name, entries::DictAction::Get { key }, json),
            DictCommand::Set { db, name, key, value } => entries::dict(&db, &name, entries::DictAction::Set { key, value }, json),
        },
        Command::Doc { action: DocCommand::Get { db, id, field, namespace } } => {
            entries::doc_get(&db, namespace.as_deref(), &id, field.as_deref(), json)
        }
        Command::Json2bin { input, output } => convert::json2bin(&input, &output),
        Command::Bin2json { input, pretty, canonical, keys } => {
            let style = match (pretty, canonical) {
                (true, _) => JsonStyle::Pretty,
                (_, true) => JsonStyle::Canonical,
                _ => JsonStyle::Compact,
            };
            convert::bin2json(&input, style, keys.as_deref())
        }
        Command::Validate { file, keys } => convert::validate(&file, keys.as_deref(), json),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command, cli.json) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            if let Some(message) = failure.message() {
                if cli.json {
                    eprintln!("{}", serde_json::json!({ "error": message, "exit_status": failure.exit_status() }));
                } else {
                    eprintln!("tessera: {message}");
                }
            }
            ExitCode::from(failure.exit_status())
        }
    }
}
