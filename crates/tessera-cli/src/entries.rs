//! `dict get|set|ls` and `doc get`: the dictionary and field-decomposed documents, with
//! values shown as JSON.

use crate::failure::{Failure, Outcome};
use crate::open::{self, Access};
use crate::stored_json::StoredJson;
use crate::table::Table;
use serde_json::{Value as Json, json};
use std::path::Path;
use tessera::Db;

/// Entries `dict ls` lists at most.
pub const LISTED_ENTRIES_MAX: usize = 100_000;

/// What `dict` does.
pub enum DictAction {
    /// Lists the keys and values.
    Ls,
    /// Prints one value.
    Get {
        /// The entry's key.
        key: String,
    },
    /// Sets one value: JSON, or a bare string.
    Set {
        /// The entry's key.
        key: String,
        /// The value as typed.
        value: String,
    },
}

/// The dictionary `name` of `db`, which must exist unless `create`.
fn dictionary(db: &Db, file: &str, name: &str, create: bool) -> Outcome<tessera::Dictionary> {
    let fail = |error| Failure::from_error(file, error);
    if !create && !db.catalog().map_err(fail)?.dictionaries.iter().any(|known| known == name) {
        return Err(Failure::Usage(format!("{file}: no dictionary {name:?}")));
    }
    db.dictionary_with(name, Default::default()).map_err(fail)
}

/// Refuses a value holding NaN or an infinity: read as a serde_json value (which has no NaN),
/// it would be shown as `null`, another value.
fn refuse_non_finite(dictionary: &tessera::Dictionary, file: &str, name: &str, key: &str) -> Outcome {
    let found = dictionary
        .with_value(key, |value| value.and_then(crate::records::non_finite_float))
        .map_err(|error| Failure::from_error(file, error))?;
    let Some((path, number)) = found else { return Ok(()) };
    let what = crate::records::non_finite_name(number);
    let field = if path.is_empty() { String::new() } else { format!(", at `{path}`") };
    Err(Failure::Invalid(format!("dictionary {name:?}, key {key:?}{field}: {what}, which JSON cannot hold (it would be shown as null)")))
}

/// `tessera dict`.
pub fn dict(path: &Path, name: &str, action: DictAction, as_json: bool) -> Outcome {
    let file = path.display().to_string();
    let fail = |error| Failure::from_error(&file, error);
    match action {
        DictAction::Ls => {
            let db = open::database(path, Access::Read)?;
            let dictionary = dictionary(&db, &file, name, false)?;
            let keys = dictionary.keys().map_err(fail)?;
            // Refused before anything is printed: a listing cut short would read as the whole.
            if keys.len() > LISTED_ENTRIES_MAX {
                return Err(Failure::Invalid(format!(
                    "dictionary {name:?} has {} entries, more than `dict ls` lists ({LISTED_ENTRIES_MAX}); read them with `dict get`",
                    keys.len()
                )));
            }
            let mut entries = Vec::with_capacity(keys.len());
            for key in keys {
                refuse_non_finite(&dictionary, &file, name, &key)?;
                let value: Option<Json> = dictionary.get(&key).map_err(fail)?;
                entries.push((key, value.unwrap_or(Json::Null)));
            }
            if as_json {
                let map: serde_json::Map<String, Json> = entries.into_iter().collect();
                outln!("{}", Json::Object(map));
            } else {
                let mut table = Table::new(&["key", "value"]);
                for (key, value) in entries {
                    table.row(vec![crate::records::name_cell(&key), value.to_string()]);
                }
                out!("{}", table.render());
            }
            Ok(())
        }
        DictAction::Get { key } => {
            let db = open::database(path, Access::Read)?;
            let dictionary = dictionary(&db, &file, name, false)?;
            refuse_non_finite(&dictionary, &file, name, &key)?;
            let value: Option<Json> = dictionary.get(&key).map_err(fail)?;
            let Some(value) = value else { return Err(Failure::Invalid(format!("dictionary {name:?}: no key {key:?}"))) };
            if as_json {
                outln!("{}", json!({ "key": key, "value": value }));
            } else {
                outln!("{value}");
            }
            Ok(())
        }
        DictAction::Set { key, value } => {
            let db = open::database(path, Access::Write)?;
            let dictionary = dictionary(&db, &file, name, true)?;
            // JSON, or else a string; but JSON whose numbers cannot be stored as typed is
            // refused, never taken as a string or rounded.
            let is_json = match tessera::value::from_json(value.as_bytes()) {
                Ok(_) => true,
                Err(error) if error.kind == tessera::value::JsonErrorKind::TooLarge => {
                    return Err(Failure::Invalid(format!("dictionary {name:?}, key {key:?}: {error}; quote it to store a string")));
                }
                Err(_) => false,
            };
            if is_json && let Some(number) = integer_out_of_range(&value) {
                return Err(Failure::Invalid(format!(
                    "dictionary {name:?}, key {key:?}: the integer {number} is out of range (-2^63 to 2^64 - 1); quote it to store a string, or write it with a fraction to store a float"
                )));
            }
            let value: Json = if is_json {
                serde_json::from_str(&value).map_err(|error| Failure::Invalid(format!("dictionary {name:?}, key {key:?}: {error}")))?
            } else {
                Json::String(value)
            };
            dictionary.set(&key, &value).map_err(fail)?;
            dictionary.flush().map_err(fail)?;
            if as_json {
                outln!("{}", json!({ "key": key, "value": value }));
            } else {
                outln!("set {key:?} = {value}");
            }
            Ok(())
        }
    }
}

/// The first integer token of the JSON text `text` (outside its strings) that neither an `i64`
/// nor a `u64` holds: JSON parsers read one as the nearest float, another number than typed.
fn integer_out_of_range(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    let (mut at, mut in_string, mut escaped) = (0, false, false);
    while at < bytes.len() {
        let byte = bytes[at];
        if in_string {
            (in_string, escaped) = match (escaped, byte) {
                (true, _) => (true, false),
                (false, b'\\') => (true, true),
                (false, b'"') => (false, false),
                _ => (true, false),
            };
            at += 1;
            continue;
        }
        if byte == b'"' {
            in_string = true;
            at += 1;
            continue;
        }
        if byte == b'-' || byte.is_ascii_digit() {
            let start = at;
            while at < bytes.len() && matches!(bytes[at], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
                at += 1;
            }
            let token = &text[start..at];
            let is_integer = token.bytes().skip(1).all(|byte| byte.is_ascii_digit()) && token.len() > usize::from(byte == b'-');
            if is_integer && token.parse::<i64>().is_err() && token.parse::<u64>().is_err() {
                return Some(token);
            }
            continue;
        }
        at += 1;
    }
    None
}

/// `tessera doc get`: a document (every field), or one field, of `namespace` (needed when
/// the file has more than one).
pub fn doc_get(path: &Path, namespace: Option<&str>, id: &str, field: Option<&str>, as_json: bool) -> Outcome {
    let file = path.display().to_string();
    let fail = |error| Failure::from_error(&file, error);
    let db = open::database(path, Access::Read)?;
    let known = db.catalog().map_err(fail)?.documents;
    let namespace = match (namespace, known.as_slice()) {
        (Some(name), _) if known.iter().any(|known| known == name) => name.to_owned(),
        (Some(name), _) => return Err(Failure::Usage(format!("{file}: no document namespace {name:?}"))),
        (None, [only]) => only.clone(),
        (None, []) => return Err(Failure::Usage(format!("{file}: no documents"))),
        (None, many) => {
            return Err(Failure::Usage(format!("{file}: several document namespaces ({}): pick one with --namespace", many.join(", "))));
        }
    };
    // A deep handle reads documents written either way (a plain handle refuses one written
    // as nested fields); a field name is then a dotted path.
    let options = tessera::documents::DocumentsOptions { deep: true, ..Default::default() };
    let documents = db.documents_with(&namespace, options).map_err(fail)?;
    // Read keeping NaN and the infinities, which a `serde_json::Value` would show as null.
    let document = documents.document::<StoredJson>(id);
    let value = match field {
        Some(field) => document.field::<StoredJson>(field).get().map_err(fail)?,
        None => document.get().map_err(fail)?,
    };
    let Some(value) = value else {
        let what = field.map(|field| format!(", field {field:?}")).unwrap_or_default();
        return Err(Failure::Invalid(format!("documents {namespace:?}: nothing at id {id:?}{what}")));
    };
    if let Some((path, number)) = value.non_finite_float() {
        let what = crate::records::non_finite_name(number);
        let path = match (field, path.is_empty()) {
            (Some(field), true) => field.to_owned(),
            (Some(field), false) => format!("{field}.{path}"),
            (None, _) => path,
        };
        let at = if path.is_empty() { String::new() } else { format!(", at `{path}`") };
        return Err(Failure::Invalid(format!(
            "documents {namespace:?}, id {id:?}{at}: {what}, which JSON cannot hold (it would be shown as null)"
        )));
    }
    let value = value.into_json();
    if as_json {
        outln!("{value}");
    } else {
        outln!("{}", serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::integer_out_of_range;

    #[test]
    fn integers_beyond_i64_and_u64_are_found_outside_strings_only() {
        assert_eq!(integer_out_of_range("18446744073709551617"), Some("18446744073709551617"));
        assert_eq!(integer_out_of_range(r#"{"a": [1, -9223372036854775809]}"#), Some("-9223372036854775809"));
        for fine in [
            "18446744073709551615",
            "-9223372036854775808",
            "1e30",
            "1.5",
            "-",
            "\"18446744073709551617\"",
            r#"{"\"": 99999999999999999999.0}"#,
            r#"["a\\", 1]"#,
        ] {
            assert_eq!(integer_out_of_range(fine), None, "{fine}");
        }
        assert_eq!(integer_out_of_range(r#"["a\\", 99999999999999999999]"#), Some("99999999999999999999"));
    }
}
