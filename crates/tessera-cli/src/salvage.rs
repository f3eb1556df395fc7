//! `tessera export --salvage`: every readable record of a damaged file, in the export's JSON
//! Lines (so that `tessera import` takes it), and a report of what was skipped.
//!
//! The file is never opened through LMDB (`tessera::collection::salvage` reads its bytes), so
//! damage to LMDB's structure cannot crash the command. Skipped pages and entries are listed
//! on standard error, or in the `--json` summary, and so are records holding NaN or an
//! infinity, which JSON cannot carry (they are not written). Exit status: 0 when nothing was skipped, 1
//! when something was (the file is damaged), 3 for I/O errors and files that are not tessera
//! databases.

use crate::failure::{EXIT_INVALID, Failure, Outcome, write_failed};
use crate::open;
use crate::records::{
    UNWRITABLE_SHOWN_MAX, export_header, export_summary, export_summary_text, refuse_output_over, unwritable_float, write_output,
};
use serde_json::json;
use std::io::Write;
use std::path::Path;
use tessera::collection::{DynRecord, DynSchema, SalvageReport, SalvageSink};
use tessera::store::structure::Tree;

/// Writes the salvaged sections as an export does. A record holding NaN or an infinity, which
/// JSON cannot carry (an export would write `null`), is not written but listed as skipped.
struct JsonLines<'w> {
    out: &'w mut dyn Write,
    /// The current section's collection and schema.
    section: Option<(String, DynSchema)>,
    /// The records not written, as messages (collection, key, field), up to
    /// `UNWRITABLE_SHOWN_MAX`.
    unwritable: Vec<String>,
    /// Records not written, per collection.
    unwritable_counts: Vec<(String, u64)>,
}

impl JsonLines<'_> {
    fn unwritable_total(&self) -> u64 {
        self.unwritable_counts.iter().map(|(_, count)| count).sum()
    }
}

impl SalvageSink for JsonLines<'_> {
    fn section(&mut self, collection: &str, schema: &DynSchema, records: u64) -> tessera::Result<()> {
        writeln!(self.out, "{}", export_header(collection, records, schema))?;
        self.section = Some((collection.to_owned(), schema.clone()));
        Ok(())
    }

    fn record(&mut self, record: &DynRecord) -> tessera::Result<()> {
        if let Some((collection, schema)) = &self.section
            && let Some(problem) = unwritable_float(collection, schema, record.value())
        {
            if self.unwritable.len() < UNWRITABLE_SHOWN_MAX {
                self.unwritable.push(problem);
            }
            match self.unwritable_counts.last_mut() {
                Some((name, count)) if name == collection => *count += 1,
                _ => self.unwritable_counts.push((collection.clone(), 1)),
            }
            return Ok(());
        }
        writeln!(self.out, "{}", record.to_json())?;
        Ok(())
    }
}

/// `tessera export --salvage`.
pub fn export_salvage(path: &Path, names: &[String], output: Option<&str>, as_json: bool) -> Outcome {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => return Err(Failure::Io(format!("{}: a directory, not a database file", path.display()))),
        Ok(_) => {}
        Err(error) => return Err(Failure::Io(format!("cannot open {}: {error}", path.display()))),
    }
    let target = output.filter(|path| *path != "-");
    refuse_output_over(path, target)?;
    let (report, unwritable) = write_output(target, |out| {
        let mut sink = JsonLines { out, section: None, unwritable: Vec::new(), unwritable_counts: Vec::new() };
        let report = tessera::collection::salvage(path, names, &mut sink).map_err(|error| refusal(path, error))?;
        let unwritable = Unwritable { total: sink.unwritable_total(), listed: sink.unwritable, counts: sink.unwritable_counts };
        Ok((report, unwritable))
    })?;
    // The records written: those salvaged less those JSON cannot carry.
    let counts: Vec<(String, u64)> = report
        .collections
        .iter()
        .map(|(name, count)| {
            let skipped = unwritable.counts.iter().filter(|(other, _)| other == name).map(|(_, skipped)| skipped).sum::<u64>();
            (name.clone(), count.saturating_sub(skipped))
        })
        .collect();
    let counts = &counts;
    let complete = report.is_complete() && unwritable.total == 0;
    let summary = json!({
        "complete": complete,
        "skipped_pages": skipped_pages(&report),
        "skipped_entries": skipped_entries(&report),
        "skipped_entries_not_listed": report.skipped_not_listed,
        "skipped_pages_not_listed": report.structure.problems_not_listed,
        "skipped_not_representable": unwritable.listed,
        "skipped_not_representable_not_listed": unwritable.total - unwritable.listed.len() as u64,
    });
    match (as_json, target) {
        (true, Some(target)) => {
            let mut line = export_summary(target, counts);
            merge(&mut line, summary);
            outln!("{line}");
        }
        (true, None) => {
            let list: Vec<_> = counts.iter().map(|(name, count)| json!({"collection": name, "records": count})).collect();
            let mut line = json!({ "collections": list });
            merge(&mut line, summary);
            eprintln!("{line}");
        }
        (false, target) => {
            if let Some(target) = target {
                outln!("{}", export_summary_text(target, counts));
            }
            print_report(&report, counts, &unwritable).map_err(|error| write_failed("the report", error))?;
        }
    }
    if complete { Ok(()) } else { Err(Failure::Reported(EXIT_INVALID)) }
}

/// The salvaged records that were not written because they hold NaN or an infinity.
struct Unwritable {
    total: u64,
    /// Messages naming the collection, the key and the field, up to `UNWRITABLE_SHOWN_MAX`.
    listed: Vec<String>,
    /// Per collection.
    counts: Vec<(String, u64)>,
}

/// A library error as the command's failure: a file that is not a tessera database is named
/// with its first bytes, as the other commands name it.
fn refusal(path: &Path, error: tessera::Error) -> Failure {
    match error {
        tessera::Error::NotADatabase { .. } | tessera::Error::ForeignDatabase { .. } => open::not_a_database(path),
        tessera::Error::SalvageFormat { .. } => Failure::Io(format!("{}: {error}", path.display())),
        other => Failure::from_error(&path.display().to_string(), other),
    }
}

/// Adds `extra`'s fields to the object `line`.
fn merge(line: &mut serde_json::Value, extra: serde_json::Value) {
    if let (Some(line), serde_json::Value::Object(extra)) = (line.as_object_mut(), extra) {
        line.extend(extra);
    }
}

fn skipped_pages(report: &SalvageReport) -> Vec<serde_json::Value> {
    let problems = &report.structure.problems;
    problems
        .iter()
        .map(|problem| {
            let keyspace = match &problem.tree {
                Tree::Keyspace(name) => Some(name.as_str()),
                _ => None,
            };
            json!({"page": problem.page, "keyspace": keyspace, "tree": problem.tree.name(), "why": problem.damage.to_string()})
        })
        .collect()
}

fn skipped_entries(report: &SalvageReport) -> Vec<serde_json::Value> {
    let entries = &report.skipped;
    entries.iter().map(|entry| json!({"keyspace": entry.keyspace, "key": entry.key_hex(), "why": entry.reason.to_string()})).collect()
}

/// The skipped pages, entries and records, one a line, and a summary, on standard error.
/// `counts` are the records written per collection.
fn print_report(report: &SalvageReport, counts: &[(String, u64)], unwritable: &Unwritable) -> std::io::Result<()> {
    let mut err = std::io::stderr().lock();
    for problem in &report.structure.problems {
        writeln!(err, "tessera: skipped: {problem}")?;
    }
    for entry in &report.skipped {
        writeln!(err, "tessera: skipped: {entry}")?;
    }
    for problem in &unwritable.listed {
        writeln!(err, "tessera: skipped: {problem}, which JSON cannot hold (not representable)")?;
    }
    let pages = report.structure.problems.len() as u64 + report.structure.problems_not_listed;
    let entries = report.skipped.len() as u64 + report.skipped_not_listed;
    let records: u64 = counts.iter().map(|(_, count)| count).sum();
    let not_listed = report.structure.problems_not_listed + report.skipped_not_listed + unwritable.total - unwritable.listed.len() as u64;
    let more = if not_listed > 0 { format!(" ({not_listed} not listed)") } else { String::new() };
    let not_representable = if unwritable.total > 0 {
        format!(", and {} holding NaN or an infinity (not representable in JSON)", counted(unwritable.total, "record"))
    } else {
        String::new()
    };
    writeln!(
        err,
        "tessera: salvaged {} of {}; skipped {} and {}{not_representable}{more}",
        counted(records, "record"),
        counted(counts.len() as u64, "collection"),
        counted(pages, "damaged page"),
        counted(entries, "entry"),
    )
}

/// `1 record`, `2 records`; `1 entry`, `2 entries`.
fn counted(count: u64, what: &str) -> String {
    match (count, what.strip_suffix('y')) {
        (1, _) => format!("1 {what}"),
        (_, Some(stem)) => format!("{count} {stem}ies"),
        (_, None) => format!("{count} {what}s"),
    }
}
