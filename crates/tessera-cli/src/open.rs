//! Opening the files the commands work on: databases read-only for reading commands (no
//! lock file left behind), read-write for writing ones, and a clear refusal for a file that
//! is not a tessera database.

use crate::failure::{Failure, Outcome};
use std::io::Read;
use std::path::Path;
use tessera::{Db, DbOptions};

/// Bytes of a foreign file's start shown in the refusal.
pub const SHOWN_BYTES: usize = 4;
/// Keyspaces a command can open: a read-only open opens every keyspace of the file at once,
/// and each collection has two. Above the library's default (128), which applications tune
/// down for speed; a command runs a few transactions.
pub const KEYSPACES_MAX: u32 = 4096;

/// How a command opens a database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read-only: the file must exist; nothing is written to it.
    Read,
    /// Read-write; the file must exist.
    Write,
    /// Read-write, creating the file if missing (`import`).
    Create,
}

/// The first bytes of `path` in hex (`53 51 4c 69 …`), or why they cannot be read.
pub fn first_bytes(path: &Path) -> String {
    let mut bytes = [0u8; SHOWN_BYTES + 1];
    let read = std::fs::File::open(path).and_then(|file| {
        let mut taken = 0;
        let mut handle = file.take((SHOWN_BYTES + 1) as u64);
        loop {
            match handle.read(&mut bytes[taken..])? {
                0 => return Ok(taken),
                n => taken += n,
            }
        }
    });
    match read {
        Ok(0) => "an empty file".to_owned(),
        Ok(count) => {
            let shown: Vec<String> = bytes[..count.min(SHOWN_BYTES)].iter().map(|byte| format!("{byte:02x}")).collect();
            let more = if count > SHOWN_BYTES { " …" } else { "" };
            format!("starts with {}{more}", shown.join(" "))
        }
        Err(error) => format!("unreadable: {error}"),
    }
}

/// The refusal of a file that is not a tessera database.
pub fn not_a_database(path: &Path) -> Failure {
    Failure::Io(format!("not a tessera database: {} ({})", path.display(), first_bytes(path)))
}

/// Opens the database at `path`.
pub fn database(path: &Path, access: Access) -> Outcome<Db> {
    database_with(path, access, true, false)
}

/// Opens the database at `path` for a command that runs beside the file's writers for long
/// (`replicate`): read-write, without the walk of the page structure first (the walk reads
/// the file outside LMDB, and a concurrent writer's pages would look damaged to it).
///
/// With `notified`, the handle is also woken by other processes' commits
/// (`DbOptions::cross_process_notify`, which needs the file's durable feed on).
pub fn database_beside_writers(path: &Path, notified: bool) -> Outcome<Db> {
    database_with(path, Access::Write, false, notified)
}

fn database_with(path: &Path, access: Access, verify_structure: bool, notified: bool) -> Outcome<Db> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => return Err(Failure::Io(format!("{}: a directory, not a database file", path.display()))),
        Ok(meta) if meta.len() == 0 => return Err(not_a_database(path)),
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound && access == Access::Create => {}
        Err(error) => return Err(Failure::Io(format!("cannot open {}: {error}", path.display()))),
    }
    // The page structure is walked before LMDB reads the file, so that damage which would
    // crash LMDB is a refusal instead (one read of the used pages: fine for a command).
    let options = DbOptions {
        read_only: access == Access::Read,
        verify_structure_on_open: verify_structure,
        keyspaces_max: KEYSPACES_MAX,
        cross_process_notify: notified,
        ..DbOptions::default()
    };
    Db::open_with(path, options).map_err(|error| match error {
        tessera::Error::NotADatabase { .. } | tessera::Error::ForeignDatabase { .. } => not_a_database(path),
        // Following needs the durable feed, as replicating does: a usage error (status 2).
        tessera::Error::FeedDisabled { .. } => Failure::Usage(format!("{}: {error}", path.display())),
        // A damaged file is as unreadable as a foreign one: exit status 3.
        tessera::Error::Corrupted(reason) => Failure::Io(format!("damaged tessera database: {}: {reason}", path.display())),
        // These name the file already.
        other @ (tessera::Error::ReadOnly { .. } | tessera::Error::AlreadyOpen(_) | tessera::Error::StillOpen { .. }) => {
            Failure::from_error("", other)
        }
        other => Failure::from_error(&path.display().to_string(), other),
    })
}
