//! `get`, `query` and `export`: records read through dynamic collections.

use crate::failure::{Failure, Outcome, write_failed};
use crate::open::{self, Access};
use crate::table::Table;
use serde_json::json;
use std::io::Write;
use std::path::Path;
use tessera::Db;
use tessera::collection::{DynCollection, DynRecord, KeyKind, TypeDesc};
use tessera::value::{Kind, Value};

/// The first line of each collection's section in an export: `{"tessera_export": 1, ...}`.
pub const EXPORT_HEADER_FIELD: &str = "tessera_export";
/// The export format's version, in each header line.
pub const EXPORT_FORMAT_VERSION: u32 = 1;

/// A key typed on the command line as JSON: a string key may be given bare (`ada` for
/// `"ada"`); numbers, and composite keys as arrays, are JSON.
pub fn key_json(collection: &DynCollection, text: &str) -> String {
    let schema = collection.schema();
    let textual = match (schema.key_kinds.as_slice(), schema.key_fields.as_slice()) {
        ([kind], _) => *kind == KeyKind::String,
        ([], [field]) => schema.shape.resolve(field) == Some(&TypeDesc::String),
        _ => false,
    };
    let is_json_string = serde_json::from_str::<serde_json::Value>(text).is_ok_and(|value| value.is_string());
    if textual && !is_json_string {
        return serde_json::Value::String(text.to_owned()).to_string();
    }
    text.to_owned()
}

/// Opens `path` read-only and its collection `name`.
fn collection(path: &Path, name: &str) -> Outcome<(Db, DynCollection)> {
    let db = open::database(path, Access::Read)?;
    let collection = db.dyn_collection(name).map_err(|error| Failure::from_error(&path.display().to_string(), error))?;
    Ok((db, collection))
}

/// `tessera get`.
pub fn get(path: &Path, name: &str, key: &str, as_json: bool) -> Outcome {
    let (db, collection) = collection(path, name)?;
    let key_text = key_json(&collection, key);
    let found = collection.get_json(&db, &key_text).map_err(|error| Failure::from_error(&path.display().to_string(), error))?;
    let Some(record) = found else {
        return Err(Failure::Invalid(format!("collection {name:?}: no record with key {key_text}")));
    };
    if let Some(problem) = unwritable_float(name, collection.schema(), record.value()) {
        return Err(unprintable(&problem));
    }
    if as_json {
        outln!("{}", record.to_json());
    } else {
        outln!("{}", record.value().to_json_pretty());
    }
    Ok(())
}

/// The refusal of a record holding NaN or an infinity (`problem`, from [`unwritable_float`]),
/// which JSON would show as `null`, another value.
fn unprintable(problem: &str) -> Failure {
    Failure::Invalid(format!("{problem}, which JSON cannot hold (it would be shown as null)"))
}

/// A record's field as a table cell: a missing field empty, strings as they are unless
/// [`string_reads_otherwise`], other values as JSON.
fn cell(value: Option<Value<'_>>) -> String {
    match value {
        None => String::new(),
        Some(value) if value.kind() == Kind::String => {
            let text = value.as_str().unwrap_or_default();
            if string_reads_otherwise(text) { value.to_json() } else { text.to_owned() }
        }
        Some(value) => value.to_json(),
    }
}

/// A name (of a collection, keyspace, dictionary key, field) as a table cell: as it is, unless
/// it has edges or lines the table hides (surrounding spaces, control characters: `a b` and
/// `a\nb` would be one row's text, and escape sequences would reach the terminal), when it
/// is shown as JSON, quoted and escaped.
pub fn name_cell(name: &str) -> String {
    if name.is_empty() || name.trim() != name || name.chars().any(char::is_control) {
        serde_json::Value::String(name.to_owned()).to_string()
    } else {
        name.to_owned()
    }
}

/// Whether a string shown bare in a cell would read as something else: as JSON (`null`, `42`,
/// `true`, `"x"`, `[1]`: the cell of that value), as a missing field (empty), or with edges or
/// lines the table hides (surrounding spaces, control characters). Such a string is shown as
/// JSON, quoted and escaped.
fn string_reads_otherwise(text: &str) -> bool {
    text.is_empty() || text.trim() != text || text.chars().any(char::is_control) || serde_json::from_str::<serde_json::Value>(text).is_ok()
}

/// The table columns of a collection: its top-level fields.
fn columns(collection: &DynCollection) -> Vec<String> {
    match &collection.schema().shape {
        TypeDesc::Struct(fields) => fields.iter().map(|(name, _)| name.clone()).collect(),
        _ => vec!["record".into()],
    }
}

fn row(columns: &[String], record: &DynRecord) -> Vec<String> {
    let value = record.value();
    match value.as_dict() {
        Some(dict) => columns.iter().map(|column| cell(dict.get(column))).collect(),
        None => vec![value.to_json()],
    }
}

/// `tessera query`.
pub fn query(path: &Path, name: &str, text: &str, explain: bool, limit: Option<usize>, as_json: bool) -> Outcome {
    let (db, collection) = collection(path, name)?;
    let file = path.display().to_string();
    let mut query = collection.filter_text(text).map_err(|error| Failure::from_error(&format!("query {text:?}"), error))?;
    if let Some(limit) = limit {
        // At most the text's own `limit` too: the option narrows the query, never widens it.
        let stated = collection.parse_text(text).map_err(|error| Failure::from_error(&format!("query {text:?}"), error))?.limit;
        query = query.limit(stated.map_or(limit, |stated| stated.min(limit)));
    }
    if explain {
        let plan = query.explain().map_err(|error| Failure::from_error(&format!("query {text:?}"), error))?.to_string();
        if as_json {
            outln!("{}", json!({ "plan": plan }));
        } else {
            outln!("{plan}");
        }
        return Ok(());
    }
    let mut stdout = std::io::stdout().lock();
    // The first record holding NaN or an infinity stops the output (the records before it
    // are printed with --json) and fails the command.
    let mut refused = None;
    let mut printable = |record: &DynRecord| match unwritable_float(name, collection.schema(), record.value()) {
        Some(problem) => {
            refused = Some(problem);
            false
        }
        None => true,
    };
    if as_json {
        query
            .for_each(&db, |record| {
                if !printable(&record) {
                    return Ok(false);
                }
                writeln!(stdout, "{}", record.to_json()).map_err(tessera::Error::Io)?;
                Ok(true)
            })
            .map_err(|error| Failure::from_error(&file, error))?;
        stdout.flush().map_err(|error| write_failed("the records", error))?;
        return refused.map_or(Ok(()), |problem| Err(unprintable(&problem)));
    }
    let columns = columns(&collection);
    let titles: Vec<&str> = columns.iter().map(String::as_str).collect();
    let mut table = Table::new(&titles);
    let mut count = 0usize;
    query
        .for_each(&db, |record| {
            if !printable(&record) {
                return Ok(false);
            }
            table.row(row(&columns, &record));
            count += 1;
            Ok(true)
        })
        .map_err(|error| Failure::from_error(&file, error))?;
    if let Some(problem) = refused {
        return Err(unprintable(&problem));
    }
    writeln!(stdout, "{}({count} record{})", table.render(), if count == 1 { "" } else { "s" })
        .map_err(|error| write_failed("the records", error))
}

/// `tessera export`: one JSON Lines section per collection, each a header line (name,
/// schema, record count) and one line per record, all from one snapshot. Refuses records
/// holding NaN or an infinity (see `write_sections`).
pub fn export(path: &Path, names: &[String], output: Option<&str>, as_json: bool) -> Outcome {
    let file = path.display().to_string();
    let db = open::database(path, Access::Read)?;
    let fail = |error| Failure::from_error(&file, error);
    let names = if names.is_empty() { db.catalog().map_err(fail)?.collections } else { names.to_vec() };
    let mut collections = Vec::with_capacity(names.len());
    for name in &names {
        collections.push(db.dyn_collection(name).map_err(fail)?);
    }
    let target = output.filter(|path| *path != "-");
    refuse_output_over(path, target)?;
    let counts = write_output(target, |sink| write_sections(&db, &collections, sink, &file))?;
    if let Some(target) = target {
        let counts: Vec<(String, u64)> = names.into_iter().zip(counts.into_iter().map(|count| count as u64)).collect();
        let summary = export_summary(target, &counts);
        if as_json {
            outln!("{summary}");
        } else {
            outln!("{}", export_summary_text(target, &counts));
        }
    }
    Ok(())
}

/// The `--json` summary of an export written to `target`: the file and each collection's
/// record count.
pub fn export_summary(target: &str, counts: &[(String, u64)]) -> serde_json::Value {
    let list: Vec<_> = counts.iter().map(|(name, count)| json!({"collection": name, "records": count})).collect();
    json!({"file": target, "collections": list})
}

/// The summary of an export written to `target`: `exported tasks (3), people (2) to FILE`.
pub fn export_summary_text(target: &str, counts: &[(String, u64)]) -> String {
    let summary: Vec<String> = counts.iter().map(|(name, count)| format!("{name} ({count})")).collect();
    format!("exported {} to {target}", summary.join(", "))
}

/// The header line of a collection's section in an export.
pub fn export_header(collection: &str, records: u64, schema: &tessera::collection::DynSchema) -> serde_json::Value {
    json!({
        EXPORT_HEADER_FIELD: EXPORT_FORMAT_VERSION,
        "collection": collection,
        "records": records,
        "schema": schema,
    })
}

/// Refuses an export's output `target` that is the database file `db` itself (by another name,
/// a link, or the same path): the export would replace the database with its JSON Lines.
pub fn refuse_output_over(db: &Path, target: Option<&str>) -> Outcome {
    use std::os::unix::fs::MetadataExt;
    let (Some(target), Ok(source)) = (target, std::fs::metadata(db)) else { return Ok(()) };
    match std::fs::metadata(target) {
        Ok(output) if (output.dev(), output.ino()) == (source.dev(), source.ino()) => {
            Err(Failure::Usage(format!("-o {target}: that is the database {}, which the export would replace", db.display())))
        }
        _ => Ok(()),
    }
}

/// Runs `write` on `target` or on standard output (`None`). A regular or new file is written
/// as a temporary file beside it and renamed into place only when `write` and the flush
/// succeed; a device or FIFO (`-o /dev/null`) is written in place, since renaming over it would
/// replace it (see `convert::replaced_by_rename`).
pub fn write_output<T>(target: Option<&str>, write: impl FnOnce(&mut dyn Write) -> Outcome<T>) -> Outcome<T> {
    let in_place = target.filter(|path| !crate::convert::replaced_by_rename(path));
    let temporary = target.filter(|_| in_place.is_none()).map(|path| format!("{path}.tmp-{}", std::process::id()));
    let sink: Box<dyn Write> = match (&temporary, in_place) {
        (Some(temporary), _) => Box::new(std::fs::File::create(temporary).map_err(|error| write_failed(temporary, error))?),
        (None, Some(path)) => Box::new(std::fs::OpenOptions::new().write(true).open(path).map_err(|error| write_failed(path, error))?),
        (None, None) => Box::new(std::io::stdout().lock()),
    };
    let mut sink = std::io::BufWriter::new(sink);
    let written = write(&mut sink).and_then(|value| {
        sink.flush().map_err(|error| write_failed("the export", error))?;
        Ok(value)
    });
    drop(sink);
    match (written, &temporary, target) {
        (Ok(value), Some(temporary), Some(target)) => {
            std::fs::rename(temporary, target).map_err(|error| write_failed(target, error))?;
            Ok(value)
        }
        (Ok(value), _, _) => Ok(value),
        (Err(failure), temporary, _) => {
            if let Some(temporary) = temporary {
                let _ = std::fs::remove_file(temporary);
            }
            Err(failure)
        }
    }
}

/// Records listed one by one when an export refuses records it cannot write; past this only
/// counted.
pub const UNWRITABLE_SHOWN_MAX: usize = 100;

/// A record holding a float JSON cannot carry (NaN, ±infinity), as a message: the collection,
/// the record's key and the field's path.
pub fn unwritable_float(collection: &str, schema: &tessera::collection::DynSchema, record: Value<'_>) -> Option<String> {
    let (path, number) = non_finite_float(record)?;
    let field = if path.is_empty() { "the record".to_owned() } else { format!("field `{path}`") };
    Some(format!("collection {collection:?}, record {}: {field} is {}", record_key(schema, record), non_finite_name(number)))
}

/// A float JSON cannot carry, named: `NaN`, `infinity` or `-infinity`.
pub fn non_finite_name(number: f64) -> &'static str {
    match number {
        number if number.is_nan() => "NaN",
        number if number > 0.0 => "infinity",
        _ => "-infinity",
    }
}

/// A record's primary key as JSON (an array for a composite key), read from its key fields.
pub fn record_key(schema: &tessera::collection::DynSchema, record: Value<'_>) -> String {
    let part = |field: &String| match record.path(field) {
        Ok(Some(value)) => value.to_json(),
        _ => "?".to_owned(),
    };
    match schema.key_fields.as_slice() {
        [field] => part(field),
        fields => format!("[{}]", fields.iter().map(part).collect::<Vec<_>>().join(", ")),
    }
}

/// The path (`a.b[2].c`; empty for the root) and value of the first float in `value` that is
/// NaN or infinite. Walks with an explicit stack (documents may be deep), and builds paths
/// only once one is found.
pub fn non_finite_float(value: Value<'_>) -> Option<(String, f64)> {
    if !has_non_finite_float(value) {
        return None;
    }
    let mut stack: Vec<(String, Value<'_>)> = vec![(String::new(), value)];
    while let Some((path, value)) = stack.pop() {
        match value.kind() {
            Kind::Float => match value.as_f64() {
                Some(number) if !number.is_finite() => return Some((path, number)),
                _ => {}
            },
            Kind::Array => {
                let array = value.as_array()?;
                let elements: Vec<_> = array.iter().enumerate().collect();
                stack.extend(elements.into_iter().rev().map(|(index, element)| (format!("{path}[{index}]"), element)));
            }
            Kind::Dict => {
                let dict = value.as_dict()?;
                let entries: Vec<_> = dict.iter().collect();
                stack.extend(
                    entries
                        .into_iter()
                        .rev()
                        .map(|(key, element)| (if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") }, element)),
                );
            }
            _ => {}
        }
    }
    None
}

/// Whether `value` holds a float that is NaN or infinite.
fn has_non_finite_float(value: Value<'_>) -> bool {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value.kind() {
            Kind::Float if value.as_f64().is_some_and(|number| !number.is_finite()) => return true,
            Kind::Array => stack.extend(value.as_array().into_iter().flat_map(|array| array.iter())),
            Kind::Dict => stack.extend(value.as_dict().into_iter().flat_map(|dict| dict.iter().map(|(_, element)| element))),
            _ => {}
        }
    }
    false
}

/// Writes every collection's section from one read transaction; returns the record counts.
/// A record holding NaN or an infinity (which JSON cannot carry: it would be written as
/// `null`, and imported as another value or refused) stops the writing; the remaining records
/// are still read, to name every such record, and the export fails with exit status 1.
fn write_sections(db: &Db, collections: &[DynCollection], sink: &mut dyn Write, file: &str) -> Outcome<Vec<usize>> {
    let fail = |error| Failure::from_error(file, error);
    let txn = db.read_txn().map_err(fail)?;
    let mut counts = Vec::with_capacity(collections.len());
    let mut unwritable = 0usize;
    let mut listed = Vec::new();
    for collection in collections {
        let records = collection.all().count(&txn).map_err(fail)?;
        if unwritable == 0 {
            writeln!(sink, "{}", export_header(collection.name(), records as u64, collection.schema()))
                .map_err(|error| write_failed("the export", error))?;
        }
        collection
            .all()
            .for_each(&txn, |record| {
                if let Some(problem) = unwritable_float(collection.name(), collection.schema(), record.value()) {
                    unwritable += 1;
                    if listed.len() < UNWRITABLE_SHOWN_MAX {
                        listed.push(problem);
                    }
                } else if unwritable == 0 {
                    writeln!(sink, "{}", record.to_json())?;
                }
                Ok(true)
            })
            .map_err(fail)?;
        counts.push(records);
    }
    if unwritable == 0 {
        return Ok(counts);
    }
    let not_listed = unwritable - listed.len();
    let more = if not_listed > 0 { format!("\n  … and {not_listed} more") } else { String::new() };
    Err(Failure::Invalid(format!(
        "{file}: export refused: {unwritable} record{} {} NaN or an infinity, which JSON cannot hold (it would be written as \
         null, and imported as another value or refused); the output stops before the first (with -o, no file is written):\n  {}{more}",
        if unwritable == 1 { "" } else { "s" },
        if unwritable == 1 { "holds" } else { "hold" },
        listed.join("\n  "),
    )))
}
