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
        Command::Validate { file, keys } => {
            let keys = read_keys(keys.as_deref())?;
            let bytes = read_input(&file)?;
            open(&bytes, keys.as_ref()).map_err(|error| Failure::Invalid(format!("{file}: invalid: {error}")))?;
            println!("{file}: valid ({} bytes)", bytes.len());
            Ok(())
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
    }
}
