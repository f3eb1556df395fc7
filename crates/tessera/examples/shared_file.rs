//! The Rust side of the Python package's shared-file test (`python/tests/test_rust_interop.py`):
//! a typed record type that a Python dataclass of the same shape reads and writes.
//!
//! `cargo run --example shared_file -- PATH write FIRST COUNT` inserts notes FIRST..FIRST+COUNT;
//! `cargo run --example shared_file -- PATH read` prints every note as a JSON line.

use serde::{Deserialize, Serialize};
use tessera::collection::{Embed, Record};

/// A note: the Python test declares the same shape as a dataclass.
#[derive(Debug, Serialize, Deserialize, Record)]
#[record(name = "note")]
struct Note {
    #[record(key)]
    id: i64,
    title: String,
    #[record(index)]
    priority: i64,
    tags: Vec<String>,
    level: Level,
    due: Option<String>,
}

/// A unit-variant enum: a Python `enum.Enum` with the same member names.
#[derive(Debug, Serialize, Deserialize, Embed)]
enum Level {
    Low,
    High,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let (path, command) = match arguments.as_slice() {
        [path, command, ..] => (path, command.as_str()),
        _ => return Err("usage: shared_file PATH (write FIRST COUNT | read)".into()),
    };
    let db = tessera::Db::open(path)?;
    let notes = db.collection::<Note>()?;
    match command {
        "write" => {
            let first: i64 = arguments.get(2).ok_or("FIRST")?.parse()?;
            let count: i64 = arguments.get(3).ok_or("COUNT")?.parse()?;
            db.write(|tx| {
                for id in first..first + count {
                    let level = if id % 2 == 0 { Level::High } else { Level::Low };
                    let note = Note { id, title: format!("rust {id}"), priority: id % 7, tags: vec!["rust".into()], level, due: None };
                    notes.upsert(tx, &note)?;
                }
                Ok(())
            })?;
        }
        "read" => {
            for note in notes.all().fetch(&db)? {
                println!("{}", serde_json::to_string(&note)?);
            }
        }
        other => return Err(format!("unknown command {other:?}").into()),
    }
    Ok(())
}
