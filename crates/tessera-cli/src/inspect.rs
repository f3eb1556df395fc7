//! `info`, `ls` and `schema`: what a database file holds.

use crate::failure::{Failure, Outcome};
use crate::open::{self, Access};
use crate::records::name_cell;
use crate::table::{Table, pairs};
use serde_json::{Value as Json, json};
use std::path::Path;
use tessera::Db;
use tessera::collection::{DynCollection, DynIndex, DynSchema, TypeDesc};

/// A stored shape's type as text: `int`, `option<string>`, `list<struct>`, `tuple<f64, f32>`,
/// `enum(Open|Done)`.
pub fn type_name(desc: &TypeDesc) -> String {
    match desc {
        TypeDesc::Bool => "bool".into(),
        TypeDesc::Int => "int".into(),
        TypeDesc::Integer(int) => int.name().into(),
        TypeDesc::Float => "float".into(),
        TypeDesc::Float32 => "f32".into(),
        TypeDesc::String => "string".into(),
        TypeDesc::Bytes => "bytes".into(),
        TypeDesc::Any => "any".into(),
        TypeDesc::Option(inner) => format!("option<{}>", type_name(inner)),
        TypeDesc::List(inner) => format!("list<{}>", type_name(inner)),
        TypeDesc::Tuple(elements) => format!("tuple<{}>", elements.iter().map(type_name).collect::<Vec<_>>().join(", ")),
        TypeDesc::Map(inner) => format!("map<{}>", type_name(inner)),
        TypeDesc::Struct(_) => "struct".into(),
        TypeDesc::Enum(variants) => {
            let names: Vec<&str> = variants.iter().map(|(name, _)| name.as_str()).collect();
            format!("enum({})", names.join("|"))
        }
    }
}

/// Most fields `schema` lists (a damaged schema could be huge).
const FIELDS_SHOWN_MAX: usize = 10_000;

/// Every field of `shape` with its dotted path and type, depth first, with an explicit stack.
pub fn fields(shape: &TypeDesc) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack: Vec<(String, &TypeDesc)> = vec![(String::new(), shape)];
    while let Some((path, desc)) = stack.pop() {
        if out.len() >= FIELDS_SHOWN_MAX {
            break;
        }
        if !path.is_empty() {
            out.push((path.clone(), type_name(desc)));
        }
        let join = |name: &str| if path.is_empty() { name.to_owned() } else { format!("{path}.{name}") };
        let mut inner = desc;
        while let TypeDesc::Option(next) = inner {
            inner = next;
        }
        match inner {
            TypeDesc::Struct(members) => stack.extend(members.iter().rev().map(|(name, member)| (join(name), member))),
            TypeDesc::Enum(variants) => {
                stack.extend(variants.iter().rev().filter_map(|(name, payload)| payload.as_ref().map(|payload| (join(name), payload))))
            }
            _ => {}
        }
    }
    out
}

/// An index's state as `info` and `schema` show it: ready, building, or failed (the reason is
/// [`index_failure`]).
fn index_state(index: &DynIndex) -> &'static str {
    match (index.ready, &index.failure) {
        (true, _) => "ready",
        (false, None) => "building",
        (false, Some(_)) => "failed",
    }
}

/// An index's state for the human tables: a failed build with its reason.
fn index_state_text(index: &DynIndex) -> String {
    match &index.failure {
        Some(reason) if !index.ready => format!("failed: {reason}"),
        _ => index_state(index).to_owned(),
    }
}

fn collection_json(name: &str, records: usize, schema: &DynSchema) -> Json {
    json!({
        "name": name,
        "records": records,
        "key_fields": schema.key_fields,
        "indexes": schema.indexes.iter().map(|index| json!({
            "path": index.path, "unique": index.unique, "state": index_state(index), "failure": index.failure,
        })).collect::<Vec<_>>(),
    })
}

/// What the file holds, with counts.
struct Contents {
    collections: Vec<(DynCollection, usize)>,
    dictionaries: Vec<(String, usize)>,
    documents: Vec<(String, usize)>,
    /// The application's own keyspaces ([`Db::keyspace`]), with their entry counts.
    keyspaces: Vec<(String, usize)>,
}

fn contents(db: &Db, file: &str) -> Outcome<Contents> {
    let fail = |error| Failure::from_error(file, error);
    let catalog = db.catalog().map_err(fail)?;
    let mut collections = Vec::with_capacity(catalog.collections.len());
    for name in &catalog.collections {
        let collection = db.dyn_collection(name).map_err(fail)?;
        let count = collection.all().count(db).map_err(fail)?;
        collections.push((collection, count));
    }
    let mut dictionaries = Vec::new();
    for name in &catalog.dictionaries {
        let dictionary = db.dictionary_with(name, Default::default()).map_err(fail)?;
        dictionaries.push((name.clone(), dictionary.keys().map_err(fail)?.len()));
    }
    let mut documents = Vec::new();
    for name in &catalog.documents {
        let namespace = db.documents(name).map_err(fail)?;
        documents.push((name.clone(), namespace.ids_with_prefix("").map_err(fail)?.len()));
    }
    let mut keyspaces = Vec::new();
    for name in &catalog.keyspaces {
        let keyspace = db.keyspace(name).map_err(fail)?;
        let count = db.read(|tx| tx.range(&keyspace, ..)?.try_fold(0usize, |count, entry| entry.map(|_| count + 1))).map_err(fail)?;
        keyspaces.push((name.clone(), count));
    }
    Ok(Contents { collections, dictionaries, documents, keyspaces })
}

/// `tessera info`.
pub fn info(path: &Path, as_json: bool) -> Outcome {
    let file = path.display().to_string();
    let db = match open::database(path, Access::Read) {
        Ok(db) => db,
        Err(refused) => return document_info(path, as_json).unwrap_or(Err(refused)),
    };
    let file_info = db.file_info().map_err(|error| Failure::from_error(&file, error))?;
    let contents = contents(&db, &file)?;
    if as_json {
        let report = json!({
            "file": file,
            "kind": "database",
            "format_version": file_info.format_version,
            "file_bytes": file_info.file_bytes,
            "map_bytes": file_info.map_bytes,
            "used_bytes": file_info.used_bytes,
            "page_bytes": file_info.page_bytes,
            "last_txn_id": file_info.last_txn_id,
            "collections": contents.collections.iter().map(|(c, n)| collection_json(c.name(), *n, c.schema())).collect::<Vec<_>>(),
            "dictionaries": contents.dictionaries.iter().map(|(name, n)| json!({"name": name, "entries": n})).collect::<Vec<_>>(),
            "documents": contents.documents.iter().map(|(name, n)| json!({"name": name, "documents": n})).collect::<Vec<_>>(),
            "keyspaces": contents.keyspaces.iter().map(|(name, n)| json!({"name": name, "entries": n})).collect::<Vec<_>>(),
        });
        outln!("{report}");
        return Ok(());
    }
    let percent = if file_info.map_bytes == 0 { 0.0 } else { 100.0 * file_info.used_bytes as f64 / file_info.map_bytes as f64 };
    out!(
        "{}",
        pairs(&[
            ("file", file.clone()),
            ("kind", format!("tessera database, storage format {}", file_info.format_version)),
            ("size", format!("{} bytes", file_info.file_bytes)),
            ("map", format!("{} bytes, {} used ({percent:.1} %)", file_info.map_bytes, file_info.used_bytes)),
            ("last transaction", file_info.last_txn_id.to_string()),
        ])
    );
    let mut table = Table::new(&["collection", "records", "key", "indexes"]);
    for (collection, count) in &contents.collections {
        let schema = collection.schema();
        let indexes: Vec<String> = schema
            .indexes
            .iter()
            .map(|index| format!("{}{} ({})", name_cell(&index.path), if index.unique { " unique" } else { "" }, index_state_text(index)))
            .collect();
        let key_fields: Vec<String> = schema.key_fields.iter().map(|field| name_cell(field)).collect();
        table.row(vec![name_cell(collection.name()), count.to_string(), key_fields.join(", "), indexes.join(", ")]);
    }
    out!("\n{}", table.render());
    let mut table = Table::new(&["dictionary", "entries"]);
    contents.dictionaries.iter().for_each(|(name, count)| table.row(vec![name_cell(name), count.to_string()]));
    out!("\n{}", table.render());
    let mut table = Table::new(&["documents", "ids"]);
    contents.documents.iter().for_each(|(name, count)| table.row(vec![name_cell(name), count.to_string()]));
    out!("\n{}", table.render());
    if !contents.keyspaces.is_empty() {
        let mut table = Table::new(&["keyspace", "entries"]);
        contents.keyspaces.iter().for_each(|(name, count)| table.row(vec![name_cell(name), count.to_string()]));
        out!("\n{}", table.render());
    }
    Ok(())
}

/// Largest file `info` reads whole to see whether it is a binary document.
const DOCUMENT_BYTES_MAX: u64 = 256 << 20;

/// `info` on a file that is not a database: a report if it is a binary document, `None` if
/// it is not one either.
fn document_info(path: &Path, as_json: bool) -> Option<Outcome> {
    let length = std::fs::metadata(path).ok()?.len();
    if length == 0 || length > DOCUMENT_BYTES_MAX {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    let doc = tessera::value::Doc::from_untrusted(&bytes).ok()?;
    let root = format!("{:?}", doc.root().kind()).to_lowercase();
    let report = || -> Outcome {
        if as_json {
            outln!(
                "{}",
                json!({"file": path.display().to_string(), "kind": "document", "format_version": doc.format_version(), "file_bytes": length, "root": root})
            );
        } else {
            out!(
                "{}",
                pairs(&[
                    ("file", path.display().to_string()),
                    ("kind", format!("tessera document, format {}", doc.format_version())),
                    ("size", format!("{length} bytes")),
                    ("root", root),
                ])
            );
        }
        Ok(())
    };
    Some(report())
}

/// `tessera ls`.
pub fn ls(path: &Path, as_json: bool) -> Outcome {
    let file = path.display().to_string();
    let db = open::database(path, Access::Read)?;
    let contents = contents(&db, &file)?;
    let mut rows: Vec<(&str, String, usize)> = Vec::new();
    rows.extend(contents.collections.iter().map(|(c, n)| ("collection", c.name().to_owned(), *n)));
    rows.extend(contents.dictionaries.iter().map(|(name, n)| ("dictionary", name.clone(), *n)));
    rows.extend(contents.documents.iter().map(|(name, n)| ("documents", name.clone(), *n)));
    rows.extend(contents.keyspaces.iter().map(|(name, n)| ("keyspace", name.clone(), *n)));
    if as_json {
        let list: Vec<Json> = rows.iter().map(|(kind, name, count)| json!({"kind": kind, "name": name, "count": count})).collect();
        outln!("{}", Json::Array(list));
        return Ok(());
    }
    let mut table = Table::new(&["kind", "name", "count"]);
    rows.into_iter().for_each(|(kind, name, count)| table.row(vec![kind.to_owned(), name_cell(&name), count.to_string()]));
    out!("{}", table.render());
    Ok(())
}

/// `tessera schema`.
pub fn schema(path: &Path, name: &str, as_json: bool) -> Outcome {
    let file = path.display().to_string();
    let db = open::database(path, Access::Read)?;
    let collection = db.dyn_collection(name).map_err(|error| Failure::from_error(&file, error))?;
    let schema = collection.schema();
    if as_json {
        let text = serde_json::to_string(schema).map_err(|error| Failure::Invalid(format!("{file}: {error}")))?;
        outln!("{text}");
        return Ok(());
    }
    let kinds: Vec<String> = schema
        .key_fields
        .iter()
        .enumerate()
        .map(|(at, field)| match schema.key_kinds.get(at) {
            Some(kind) => format!("{field} ({})", kind.name()),
            None => field.clone(),
        })
        .collect();
    out!("{}", pairs(&[("collection", name.to_owned()), ("version", schema.version.to_string()), ("key", kinds.join(", "))]));
    let mut table = Table::new(&["field", "type"]);
    for (field, kind) in fields(&schema.shape) {
        table.row(vec![field, kind]);
    }
    out!("\n{}", table.render());
    let mut table = Table::new(&["index", "unique", "state"]);
    for index in &schema.indexes {
        table.row(vec![index.path.clone(), index.unique.to_string(), index_state_text(index)]);
    }
    out!("\n{}", table.render());
    Ok(())
}
