//! `tessera import`: JSON Lines into a collection, in batches of transactions, each line
//! checked against the collection's schema; a line that fails is reported with its number
//! and reason and the others are written, or, with `--atomic`, nothing is.
//!
//! A line that is an export header (`{"tessera_export": 1, "collection": ..., "schema":
//! ...}`) starts a section: records after a header for another collection are skipped, and a
//! header for the named collection gives the schema to create it with when the database has
//! no collection of that name. Records are upserted, so that importing twice changes nothing.
//!
//! Creating a collection commits on its own (the library has no creation inside a write
//! transaction), so with `--atomic` it waits: the lines are first written, in a transaction
//! rolled back, into the collection created in a scratch database beside the file, and the
//! collection is created (then the records written) only if none is refused. A refused
//! `--atomic` import leaves the file as it was.

use crate::failure::{Failure, Outcome};
use crate::open::{self, Access};
use crate::records::EXPORT_HEADER_FIELD;
use serde_json::json;
use std::io::{BufRead, BufReader, IsTerminal, Read};
use std::path::Path;
use tessera::collection::{DynCollection, DynSchema};
use tessera::{Db, Error};

/// Lines per transaction unless `--batch` says otherwise.
pub const BATCH_LINES_DEFAULT: usize = 1000;
/// Most lines `--batch` may ask for in one transaction.
pub const BATCH_LINES_MAX: usize = 1_000_000;
/// Longest line read; a longer one is rejected.
pub const LINE_BYTES_MAX: usize = 64 << 20;
/// Rejections listed one by one; past this only counted.
pub const REJECTIONS_SHOWN_MAX: usize = 1000;

/// One rejected line.
struct Rejection {
    line: u64,
    reason: String,
}

/// What the import did.
#[derive(Default)]
struct Tally {
    imported: u64,
    unchanged: u64,
    skipped: u64,
    rejected: u64,
    rejections: Vec<Rejection>,
}

impl Tally {
    fn reject(&mut self, line: u64, reason: String) {
        self.rejected += 1;
        if self.rejections.len() < REJECTIONS_SHOWN_MAX {
            self.rejections.push(Rejection { line, reason });
        }
    }
}

/// Why an `--atomic` import's transaction is rolled back: a line was rejected.
#[derive(Debug)]
struct AtomicRefusal;

impl std::fmt::Display for AtomicRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("--atomic, and a line was rejected")
    }
}

impl std::error::Error for AtomicRefusal {}

/// A parsed line waiting for its transaction: the line as a binary document.
struct Pending {
    line: u64,
    document: Vec<u8>,
}

/// Deepest nesting a line may have: what a record may hold (the encoder's limit), above the
/// JSON reader's default (128), so that every record an export writes is read back.
pub const LINE_DEPTH_MAX: u8 = 254;

/// A line's JSON as a binary document, read as deep as a record may nest.
fn json_document(text: &str) -> Result<Vec<u8>, tessera_value::JsonError> {
    tessera_value::from_json_with(text.as_bytes(), &tessera_value::JsonOptions { depth_max: LINE_DEPTH_MAX, ..Default::default() })
}

/// The root of a document [`json_document`] made.
fn document_root(document: &[u8]) -> Result<tessera_value::Value<'_>, tessera_value::FormatError> {
    let options = tessera_value::ValidateOptions { depth_max: LINE_DEPTH_MAX + 1 };
    Ok(tessera_value::Doc::validate(document, None, &options)?.root())
}

/// Options of `tessera import`.
pub struct ImportOptions<'a> {
    /// The database file (created if missing).
    pub db: &'a Path,
    /// The collection to import into.
    pub collection: &'a str,
    /// The JSON Lines file.
    pub input: &'a Path,
    /// Lines per transaction.
    pub batch_lines: usize,
    /// All or nothing.
    pub atomic: bool,
    /// Machine-readable output.
    pub as_json: bool,
}

/// Whether a write error concerns the record alone (refused before anything was written, so
/// the transaction goes on) rather than the database.
fn is_record_error(error: &Error) -> bool {
    matches!(
        error,
        Error::SchemaViolation { .. }
            | Error::DuplicateKey { .. }
            | Error::UniqueViolation { .. }
            | Error::KeySize { .. }
            | Error::Encode(_)
    )
}

/// `tessera import`. A database file the import created is removed again when it fails
/// before writing anything into it.
pub fn import(options: &ImportOptions<'_>) -> Outcome {
    let created = !options.db.exists();
    let mut wrote = false;
    let outcome = import_into(options, &mut wrote);
    if created && !wrote && outcome.is_err() {
        let mut lock = options.db.as_os_str().to_owned();
        lock.push("-lock");
        let _ = std::fs::remove_file(options.db);
        let _ = std::fs::remove_file(lock);
    }
    outcome
}

/// The import; sets `wrote` once something is committed (a collection created, a batch).
fn import_into(options: &ImportOptions<'_>, wrote: &mut bool) -> Outcome {
    if options.batch_lines == 0 || options.batch_lines > BATCH_LINES_MAX {
        return Err(Failure::Usage(format!("--batch must be 1 to {BATCH_LINES_MAX}")));
    }
    let input_name = options.input.display().to_string();
    let file = std::fs::File::open(options.input).map_err(|error| Failure::Io(format!("cannot read {input_name}: {error}")))?;
    let input_bytes = file.metadata().map(|meta| meta.len()).unwrap_or(0);
    let db = open::database(options.db, Access::Create)?;
    let progress = progress_bar(input_bytes);
    let mut reader = BufReader::new(file);
    let mut importer = Importer {
        db: &db,
        options,
        collection: None,
        tally: Tally::default(),
        pending: Vec::new(),
        section_is_ours: true,
        wrote: false,
        unknown_key_kinds_at: None,
        to_create: None,
        section: None,
    };
    importer.collection = importer.existing()?;
    let mut line_number = 0u64;
    let mut buffer = Vec::new();
    loop {
        buffer.clear();
        let read = (&mut reader)
            .take(LINE_BYTES_MAX as u64 + 1)
            .read_until(b'\n', &mut buffer)
            .map_err(|error| Failure::Io(format!("cannot read {input_name}: {error}")))?;
        if read == 0 {
            break;
        }
        line_number += 1;
        progress.inc(read as u64);
        let complete = buffer.last() == Some(&b'\n');
        if buffer.len() - usize::from(complete) > LINE_BYTES_MAX {
            importer.count_line();
            importer.tally.reject(line_number, format!("longer than {LINE_BYTES_MAX} bytes"));
            if !complete {
                skip_rest_of_line(&mut reader).map_err(|error| Failure::Io(format!("cannot read {input_name}: {error}")))?;
            }
            continue;
        }
        let read = importer.line(line_number, &buffer);
        let flushed = match read {
            Ok(()) if !options.atomic && importer.pending.len() >= options.batch_lines => importer.flush(),
            other => other,
        };
        *wrote = importer.wrote;
        flushed?;
    }
    importer.end_section();
    let flushed = importer.flush();
    *wrote = importer.wrote;
    flushed?;
    progress.finish_and_clear();
    report(&mut importer.tally, options)
}

/// Reads up to the end of an over-long line.
fn skip_rest_of_line(reader: &mut impl BufRead) -> std::io::Result<()> {
    loop {
        let available = reader.fill_buf()?;
        if available.is_empty() {
            return Ok(());
        }
        match available.iter().position(|&byte| byte == b'\n') {
            Some(at) => {
                reader.consume(at + 1);
                return Ok(());
            }
            None => {
                let length = available.len();
                reader.consume(length);
            }
        }
    }
}

/// A progress bar on standard error when it is a terminal; hidden otherwise.
fn progress_bar(total_bytes: u64) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total_bytes);
    if let Ok(style) = indicatif::ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {msg}") {
        bar.set_style(style);
    }
    bar
}

struct Importer<'a> {
    db: &'a Db,
    options: &'a ImportOptions<'a>,
    collection: Option<DynCollection>,
    tally: Tally,
    pending: Vec<Pending>,
    /// Whether the lines being read belong to the collection imported into.
    section_is_ours: bool,
    /// Whether anything was committed (a collection created, a batch written).
    wrote: bool,
    /// The line of a header for the collection whose schema lacks the key encodings.
    unknown_key_kinds_at: Option<u64>,
    /// With `--atomic`, the schema of the collection to create (from the header on that
    /// line) once every line is known to be accepted: creating it commits, and a refused
    /// import must leave the file as it was.
    to_create: Option<(u64, DynSchema)>,
    /// The section being read when it is the collection's and its header gives a count.
    section: Option<Section>,
}

/// A section of an export for the collection imported into: its header's line, the records
/// the header says follow, and the lines read since.
struct Section {
    header_line: u64,
    records: u64,
    lines: u64,
}

impl Importer<'_> {
    fn fail(&self, error: Error) -> Failure {
        Failure::from_error(&self.options.db.display().to_string(), error)
    }

    /// The collection if the database has it.
    fn existing(&self) -> Outcome<Option<DynCollection>> {
        match self.db.dyn_collection(self.options.collection) {
            Ok(collection) => Ok(Some(collection)),
            Err(Error::NoSuchCollection { .. }) => Ok(None),
            Err(error) => Err(self.fail(error)),
        }
    }

    /// Counts a line of the section being read, if it is the collection's.
    fn count_line(&mut self) {
        if let Some(section) = self.section.as_mut() {
            section.lines += 1;
        }
    }

    /// Ends the section being read: fewer lines than its header says follow is a file cut
    /// short, whose missing records would otherwise go unnoticed. Refused at the header's line.
    fn end_section(&mut self) {
        if let Some(section) = self.section.take()
            && section.lines < section.records
        {
            self.tally.reject(
                section.header_line,
                format!(
                    "the export header says {} records follow, and its section has {} lines: the file is cut short",
                    section.records, section.lines
                ),
            );
        }
    }

    fn line(&mut self, line: u64, bytes: &[u8]) -> Outcome {
        let text = match std::str::from_utf8(bytes) {
            Ok(text) => text.trim(),
            Err(error) => {
                self.count_line();
                self.tally.reject(line, format!("not UTF-8: {error}"));
                return Ok(());
            }
        };
        if text.is_empty() {
            return Ok(());
        }
        // Read with the library's JSON reader, which reads as deep as a record may nest
        // (serde_json stops at 128 levels); only a header is read as a serde_json value.
        let document = match json_document(text) {
            Ok(document) => document,
            Err(error) => {
                self.count_line();
                self.tally.reject(line, format!("not JSON: {error}"));
                return Ok(());
            }
        };
        let is_header =
            document_root(&document).ok().and_then(|root| root.as_dict()).is_some_and(|dict| dict.get(EXPORT_HEADER_FIELD).is_some());
        if is_header {
            let parsed: serde_json::Value = match serde_json::from_str(text) {
                Ok(parsed) => parsed,
                Err(error) => {
                    self.tally.reject(line, format!("not JSON: {error}"));
                    return Ok(());
                }
            };
            if let Some(header) = parsed.as_object() {
                return self.header(line, header);
            }
        }
        self.count_line();
        if !self.section_is_ours {
            self.tally.skipped += 1;
            return Ok(());
        }
        if let (None, Some(header_line)) = (&self.collection, self.unknown_key_kinds_at) {
            return Err(Failure::Invalid(format!(
                "line {line}: the export header on line {header_line} does not give the key fields' widths (the collection was empty when exported), so {:?} cannot be created",
                self.options.collection
            )));
        }
        if self.collection.is_none() && self.to_create.is_none() {
            return Err(Failure::Usage(format!(
                "{}: no collection {:?}, and {} gives no schema for it before line {line} (an export header line)",
                self.options.db.display(),
                self.options.collection,
                self.options.input.display()
            )));
        }
        self.pending.push(Pending { line, document });
        Ok(())
    }

    /// An export header: starts a section, and gives the schema of a collection to create.
    fn header(&mut self, line: u64, header: &serde_json::Map<String, serde_json::Value>) -> Outcome {
        let version = header.get(EXPORT_HEADER_FIELD).and_then(|version| version.as_u64());
        if version != Some(u64::from(crate::records::EXPORT_FORMAT_VERSION)) {
            return Err(Failure::Invalid(format!(
                "line {line}: export format {} (this tessera reads {})",
                header.get(EXPORT_HEADER_FIELD).map(|version| version.to_string()).unwrap_or_default(),
                crate::records::EXPORT_FORMAT_VERSION
            )));
        }
        let name = header.get("collection").and_then(|name| name.as_str());
        self.end_section();
        self.section_is_ours = name == Some(self.options.collection);
        if let (true, Some(records)) = (self.section_is_ours, header.get("records").and_then(|records| records.as_u64())) {
            self.section = Some(Section { header_line: line, records, lines: 0 });
        }
        if !self.section_is_ours || self.collection.is_some() || self.to_create.is_some() {
            return Ok(());
        }
        let schema =
            header.get("schema").cloned().ok_or_else(|| Failure::Invalid(format!("line {line}: export header without a schema")))?;
        let schema: DynSchema =
            serde_json::from_value(schema).map_err(|error| Failure::Invalid(format!("line {line}: export header's schema: {error}")))?;
        if schema.key_kinds.len() != schema.key_fields.len() {
            // Exported while empty, with integer key widths nobody recorded: there is nothing
            // to import, and nothing to create the collection from.
            self.unknown_key_kinds_at = Some(line);
            return Ok(());
        }
        if self.options.atomic {
            self.to_create = Some((line, schema));
            return Ok(());
        }
        let created = self.db.create_dyn_collection(self.options.collection, &schema).map_err(|error| self.fail(error))?;
        self.wrote = true;
        self.collection = Some(created);
        Ok(())
    }

    /// With `--atomic`, creates the collection from the header's schema if every line is
    /// accepted. The lines are first written into the collection created in a scratch database
    /// beside the file, in a transaction that is rolled back (the checks are the ones the real
    /// write makes: schema, unique values, key sizes); refused lines are recorded and nothing
    /// is created. Returns whether the collection was created.
    fn create_if_accepted(&mut self) -> Outcome<bool> {
        let Some((header_line, schema)) = self.to_create.take() else { return Ok(false) };
        let refused_before = self.tally.rejected > 0;
        if !self.pending.is_empty() {
            let rejections = self.trial(header_line, &schema)?;
            let refused = refused_before || !rejections.is_empty();
            for rejection in rejections {
                self.tally.reject(rejection.line, rejection.reason);
            }
            if refused {
                return Ok(false);
            }
        } else if refused_before {
            return Ok(false);
        }
        let created = self.db.create_dyn_collection(self.options.collection, &schema).map_err(|error| self.fail(error))?;
        self.wrote = true;
        self.collection = Some(created);
        Ok(true)
    }

    /// The pending lines' rejections by a collection created with `schema` in a scratch
    /// database (removed afterwards), written in a transaction that is rolled back.
    fn trial(&self, header_line: u64, schema: &DynSchema) -> Outcome<Vec<Rejection>> {
        let parent = match self.options.db.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        let scratch_failed = |error: &dyn std::fmt::Display| {
            Failure::Io(format!("cannot create a scratch database in {} for --atomic: {error}", parent.display()))
        };
        let directory = tempfile::Builder::new().prefix(".tessera-import-").tempdir_in(parent).map_err(|error| scratch_failed(&error))?;
        let scratch = Db::open(directory.path().join("check.tessera")).map_err(|error| scratch_failed(&error))?;
        let collection = scratch.create_dyn_collection(self.options.collection, schema).map_err(|error| {
            Failure::from_error(&format!("line {header_line}: the export header's schema for {:?}", self.options.collection), error)
        })?;
        let (written, outcome) = upsert_all(&scratch, &collection, &self.pending, Commit::Never);
        match written {
            Err(Error::Aborted(reason)) if reason.is::<AtomicRefusal>() => Ok(outcome.rejections),
            Err(error) => Err(scratch_failed(&error)),
            Ok(()) => unreachable!("Commit::Never rolls back"),
        }
    }

    /// Writes the pending lines in one transaction; with `--atomic`, refuses them all if one
    /// is refused (and creates the collection from the header only if none is).
    fn flush(&mut self) -> Outcome {
        let created = self.create_if_accepted()?;
        let Some(collection) = self.collection.clone() else {
            return Ok(());
        };
        if self.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        // With --atomic, a line refused before (not JSON) refuses the whole import too; the
        // transaction still runs, to report every line the schema refuses.
        let commit = match (self.options.atomic, self.tally.rejected > 0) {
            (false, _) => Commit::Always,
            (true, false) => Commit::IfNoneRefused,
            (true, true) => Commit::Never,
        };
        let (written, outcome) = upsert_all(self.db, &collection, &pending, commit);
        for rejection in outcome.rejections {
            self.tally.reject(rejection.line, rejection.reason);
        }
        match written {
            Ok(()) => {
                self.wrote = true;
                self.tally.imported += outcome.imported;
                self.tally.unchanged += outcome.unchanged;
                Ok(())
            }
            Err(Error::Aborted(reason)) if reason.is::<AtomicRefusal>() => Ok(()),
            Err(error) if created => {
                let failure = self.fail(error);
                let message = failure.message().unwrap_or_default();
                Err(Failure::Io(format!(
                    "{message} (collection {:?} was created from the export header, and is left empty)",
                    self.options.collection
                )))
            }
            Err(error) => Err(self.fail(error)),
        }
    }
}

/// When [`upsert_all`] commits its transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Commit {
    /// Whatever was refused (the other lines are written).
    Always,
    /// Only if no line is refused (`--atomic`).
    IfNoneRefused,
    /// Never: the lines are written only to find those refused.
    Never,
}

/// What [`upsert_all`] wrote, or would have.
#[derive(Default)]
struct Upserted {
    imported: u64,
    unchanged: u64,
    rejections: Vec<Rejection>,
}

/// Upserts the `pending` lines into `collection` in one transaction of `db`; a rolled-back
/// transaction is `Error::Aborted` with [`AtomicRefusal`].
fn upsert_all(db: &Db, collection: &DynCollection, pending: &[Pending], commit: Commit) -> (tessera::Result<()>, Upserted) {
    // The closure may run again (the map grows and the transaction is retried): it starts
    // from nothing each time.
    let mut outcome = Upserted::default();
    let written = db.write(|tx| {
        outcome = Upserted::default();
        for entry in pending {
            let root = document_root(&entry.document).map_err(|error| Error::Corrupted(format!("line {}: {error}", entry.line)))?;
            match collection.upsert_json_document(tx, root) {
                Ok(tessera::WriteOutcome::Unchanged) => outcome.unchanged += 1,
                Ok(_) => outcome.imported += 1,
                Err(error) if is_record_error(&error) => outcome.rejections.push(Rejection { line: entry.line, reason: error.to_string() }),
                Err(error) => return Err(error),
            }
        }
        match commit {
            Commit::Never => Err(Error::other(AtomicRefusal)),
            Commit::IfNoneRefused if !outcome.rejections.is_empty() => Err(Error::other(AtomicRefusal)),
            _ => Ok(()),
        }
    });
    (written, outcome)
}

fn report(tally: &mut Tally, options: &ImportOptions<'_>) -> Outcome {
    // Lines refused when read and lines refused when written, in file order.
    tally.rejections.sort_by_key(|rejection| rejection.line);
    let imported = if options.atomic && tally.rejected > 0 { 0 } else { tally.imported };
    if options.as_json {
        let rejections: Vec<_> = tally.rejections.iter().map(|r| json!({"line": r.line, "reason": r.reason})).collect();
        let report = json!({
            "collection": options.collection,
            "imported": imported,
            "unchanged": tally.unchanged,
            "skipped": tally.skipped,
            "rejected": tally.rejected,
            "rejections": rejections,
            "atomic": options.atomic,
        });
        outln!("{report}");
    } else {
        for rejection in &tally.rejections {
            eprintln!("line {}: {}", rejection.line, rejection.reason);
        }
        if tally.rejected > tally.rejections.len() as u64 {
            eprintln!("… and {} more rejected lines", tally.rejected - tally.rejections.len() as u64);
        }
        let mut summary = format!("imported {imported}, rejected {}", tally.rejected);
        if tally.unchanged > 0 {
            summary.push_str(&format!(", unchanged {}", tally.unchanged));
        }
        if tally.skipped > 0 {
            summary.push_str(&format!(", skipped {} of other collections", tally.skipped));
        }
        if options.atomic && tally.rejected > 0 {
            summary.push_str(" (--atomic: nothing was written)");
        }
        outln!("{summary}");
    }
    if tally.rejected > 0 { Err(Failure::Reported(crate::failure::EXIT_INVALID)) } else { Ok(()) }
}
