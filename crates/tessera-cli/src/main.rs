//! `tessera`: convert between JSON and tessera's binary documents, and check documents.
//!
//! Every path may be `-` for standard input or output. Exit status: 0 on success, 1 when the
//! input is malformed (the error is printed), 2 on a usage or I/O error.

use clap::{Parser, Subcommand};
use std::io::{Read, Write};
use std::process::ExitCode;
use tessera_value::{from_json, Doc, JsonStyle, SharedKeys};

#[derive(Parser)]
#[command(name = "tessera", version, about = "tessera's command-line tool")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
    /// Check a database file (`Db::check`): every value's checksum, the B-trees, and what the
    /// values mean. Exit 0 if it is sound, 1 if damage was found. The check runs in a child
    /// process, so that damage which crashes LMDB is reported here instead of killing this one.
    Check {
        /// The database file.
        db: String,
        /// Run the check in this process (what the child does).
        #[arg(long, hide = true)]
        in_process: bool,
    },
    /// Check that a file is a valid binary document: exit 0 if it is, 1 if not.
    Validate {
        /// Binary input file, or - for standard input.
        file: String,
        /// A shared-key table (a collection's record keys, serialized) the document uses.
        #[arg(long, value_name = "FILE")]
        keys: Option<String>,
    },
}

/// How a command failed.
enum Failure {
    /// The input is malformed: exit status 1.
    Invalid(String),
    /// Reading or writing failed: exit status 2.
    Io(String),
    /// Exit status 1, the reason already printed (by the child of `check`).
    Reported,
}

fn read_input(path: &str) -> Result<Vec<u8>, Failure> {
    let mut bytes = Vec::new();
    let result = if path == "-" {
        std::io::stdin().read_to_end(&mut bytes).map(|_| ())
    } else {
        std::fs::File::open(path).and_then(|mut file| file.read_to_end(&mut bytes)).map(|_| ())
    };
    result.map_err(|error| Failure::Io(format!("cannot read {path}: {error}")))?;
    Ok(bytes)
}

fn write_output(path: &str, bytes: &[u8]) -> Result<(), Failure> {
    let result = if path == "-" {
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(bytes).and_then(|_| stdout.flush())
    } else {
        // Write beside the target, then rename: a failed write never leaves a partial file.
        let temporary = format!("{path}.tmp-{}", std::process::id());
        std::fs::write(&temporary, bytes).and_then(|_| std::fs::rename(&temporary, path)).inspect_err(|_| {
            let _ = std::fs::remove_file(&temporary);
        })
    };
    result.map_err(|error| Failure::Io(format!("cannot write {path}: {error}")))
}

/// The shared-key table at `path`, if one was given.
fn read_keys(path: Option<&str>) -> Result<Option<SharedKeys>, Failure> {
    let Some(path) = path else { return Ok(None) };
    let bytes = read_input(path)?;
    SharedKeys::from_bytes(&bytes).map(Some).map_err(|error| Failure::Invalid(format!("{path}: not a shared-key table: {error}")))
}

/// Validates `bytes`, with the shared keys if given.
fn open<'a>(bytes: &'a [u8], keys: Option<&'a SharedKeys>) -> Result<Doc<'a>, tessera_value::FormatError> {
    match keys {
        Some(keys) => Doc::from_untrusted_with_keys(bytes, keys),
        None => Doc::from_untrusted(bytes),
    }
}

fn run(command: Command) -> Result<(), Failure> {
    match command {
        Command::Json2bin { input, output } => {
            let json = read_input(&input)?;
            let bytes = from_json(&json).map_err(|error| Failure::Invalid(format!("{input}: {error}")))?;
            write_output(&output, &bytes)
        }
        Command::Bin2json { input, pretty, canonical, keys } => {
            let keys = read_keys(keys.as_deref())?;
            let bytes = read_input(&input)?;
            let doc = open(&bytes, keys.as_ref()).map_err(|error| Failure::Invalid(format!("{input}: {error}")))?;
            let style = match (pretty, canonical) {
                (true, _) => JsonStyle::Pretty,
                (_, true) => JsonStyle::Canonical,
                _ => JsonStyle::Compact,
            };
            let mut json = Vec::with_capacity(bytes.len() * 2);
            doc.root().write_json(&mut json, style);
            json.push(b'\n');
            write_output("-", &json)
        }
        Command::Check { db, in_process: true } => check_in_process(&db),
        Command::Check { db, in_process: false } => check_in_child(&db),
        Command::Validate { file, keys } => {
            let keys = read_keys(keys.as_deref())?;
            let bytes = read_input(&file)?;
            open(&bytes, keys.as_ref()).map_err(|error| Failure::Invalid(format!("{file}: invalid: {error}")))?;
            println!("{file}: valid ({} bytes)", bytes.len());
            Ok(())
        }
    }
}

/// Walks `db`'s LMDB structure first (so that opening it cannot crash inside LMDB: opening
/// reads the main tree), then opens it and prints its check report; `Invalid` when damage was
/// found.
fn check_in_process(db: &str) -> Result<(), Failure> {
    let structure = tessera::store::structure::verify(db).map_err(|error| Failure::Invalid(format!("{db}: {error}")))?;
    if !structure.is_ok() {
        print!("{db}: LMDB structure damaged, not opened: {structure}");
        std::io::stdout().flush().map_err(|error| Failure::Io(format!("cannot write the report: {error}")))?;
        return Err(Failure::Invalid(format!("{db}: damaged")));
    }
    let report = tessera::Db::open(db).and_then(|db| db.check()).map_err(|error| Failure::Invalid(format!("{db}: {error}")))?;
    print!("{db}: {report}");
    std::io::stdout().flush().map_err(|error| Failure::Io(format!("cannot write the report: {error}")))?;
    if report.is_ok() {
        Ok(())
    } else {
        Err(Failure::Invalid(format!("{db}: damaged")))
    }
}

/// Runs the check in a child process (this program, `check --in-process`) and passes its
/// report and verdict on; a child killed by a signal means LMDB itself crashed on the file.
fn check_in_child(db: &str) -> Result<(), Failure> {
    let program = std::env::current_exe().map_err(|error| Failure::Io(format!("cannot find this program: {error}")))?;
    let output = std::process::Command::new(program)
        .args(["check", "--in-process", db])
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|error| Failure::Io(format!("cannot run the check: {error}")))?;
    std::io::stdout().write_all(&output.stdout).map_err(|error| Failure::Io(format!("cannot write the report: {error}")))?;
    match output.status.code() {
        Some(0) => Ok(()),
        // The child printed its reason already.
        Some(1) => Err(Failure::Reported),
        Some(2) => Err(Failure::Io(format!("{db}: the check could not read the file"))),
        other => {
            use std::os::unix::process::ExitStatusExt;
            let how = match (other, output.status.signal()) {
                (_, Some(signal)) => format!("was killed by signal {signal}"),
                (Some(code), None) => format!("exited with status {code}"),
                (None, None) => "ended without a status".to_owned(),
            };
            Err(Failure::Invalid(format!(
                "{db}: damaged: the check {how} inside LMDB, whose B-tree pages are damaged; copy the file before anything writes to it"
            )))
        }
    }
}

fn main() -> ExitCode {
    match run(Cli::parse().command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Invalid(message)) => {
            eprintln!("tessera: {message}");
            ExitCode::from(1)
        }
        Err(Failure::Io(message)) => {
            eprintln!("tessera: {message}");
            ExitCode::from(2)
        }
        Err(Failure::Reported) => ExitCode::from(1),
    }
}
