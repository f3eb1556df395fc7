//! `json2bin`, `bin2json` and `validate`: single binary documents, not databases.

use crate::failure::{Failure, Outcome};
use std::io::{Read, Write};
use tessera_value::{Doc, FormatError, JsonStyle, SharedKeys, from_json};

/// Reads `path`, or standard input for `-`.
pub fn read_input(path: &str) -> Outcome<Vec<u8>> {
    let mut bytes = Vec::new();
    let result = if path == "-" {
        std::io::stdin().read_to_end(&mut bytes).map(|_| ())
    } else {
        std::fs::File::open(path).and_then(|mut file| file.read_to_end(&mut bytes)).map(|_| ())
    };
    result.map_err(|error| Failure::Io(format!("cannot read {path}: {error}")))?;
    Ok(bytes)
}

/// Whether an output at `path` is written beside it and renamed into place: a new file or a
/// regular one. Anything else — `/dev/null`, a FIFO, a terminal, a symbolic link — is written
/// in place: renaming a file over it would replace the device (run as root, `-o /dev/null`
/// turned `/dev/null` into a regular file) or the link.
pub fn replaced_by_rename(path: &str) -> bool {
    match std::fs::symlink_metadata(path) {
        Ok(metadata) => metadata.file_type().is_file(),
        Err(_) => true,
    }
}

/// Writes `bytes` to `path` (a regular file: beside it, then renamed, never a partial file; a
/// device, FIFO or link: in place), or to standard output for `-`.
pub fn write_output(path: &str, bytes: &[u8]) -> Outcome {
    let result = if path == "-" {
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(bytes).and_then(|_| stdout.flush())
    } else if !replaced_by_rename(path) {
        std::fs::OpenOptions::new().write(true).open(path).and_then(|mut file| file.write_all(bytes))
    } else {
        let temporary = format!("{path}.tmp-{}", std::process::id());
        std::fs::write(&temporary, bytes).and_then(|_| std::fs::rename(&temporary, path)).inspect_err(|_| {
            let _ = std::fs::remove_file(&temporary);
        })
    };
    result.map_err(|error| Failure::Io(format!("cannot write {path}: {error}")))
}

/// The shared-key table at `path`, if one was given.
fn read_keys(path: Option<&str>) -> Outcome<Option<SharedKeys>> {
    let Some(path) = path else { return Ok(None) };
    let bytes = read_input(path)?;
    SharedKeys::from_bytes(&bytes).map(Some).map_err(|error| Failure::Invalid(format!("{path}: not a shared-key table: {error}")))
}

/// Validates `bytes`, with the shared keys if given.
fn open<'a>(bytes: &'a [u8], keys: Option<&'a SharedKeys>) -> Result<Doc<'a>, FormatError> {
    match keys {
        Some(keys) => Doc::from_untrusted_with_keys(bytes, keys),
        None => Doc::from_untrusted(bytes),
    }
}

/// Why `bytes` from `path` are not a document: a database file is said to be one (exit status
/// 3, as other commands refuse a file of the wrong kind). Anything else is invalid (exit 1),
/// whatever its last byte says: a document cut short or with bytes appended ends in any byte,
/// so a version it does not name reads as damage or another format, said with its first bytes.
fn refusal(path: &str, bytes: &[u8], error: FormatError) -> Failure {
    let shown: Vec<String> = bytes.iter().take(crate::open::SHOWN_BYTES).map(|byte| format!("{byte:02x}")).collect();
    let more = if bytes.len() > crate::open::SHOWN_BYTES { " …" } else { "" };
    if looks_like_lmdb(bytes) {
        return Failure::Io(format!("not a tessera document: {path} is a database file (starts with {}{more})", shown.join(" ")));
    }
    if matches!(error, FormatError::UnsupportedVersion { .. }) {
        return Failure::Invalid(format!(
            "not a tessera document: {path} (starts with {}{more}): its last byte names no format this program reads, as a document cut short or with bytes appended may end",
            shown.join(" ")
        ));
    }
    Failure::Invalid(format!("{path}: invalid: {error}"))
}

/// Whether `bytes` start with an LMDB meta page (a database file, not a document).
fn looks_like_lmdb(bytes: &[u8]) -> bool {
    const LMDB_MAGIC: u32 = 0xBEEF_C0DE;
    bytes.get(16..20).and_then(|magic| magic.try_into().ok()).map(u32::from_ne_bytes) == Some(LMDB_MAGIC)
}

/// `tessera json2bin`.
pub fn json2bin(input: &str, output: &str) -> Outcome {
    let json = read_input(input)?;
    let bytes = from_json(&json).map_err(|error| Failure::Invalid(format!("{input}: {error}")))?;
    write_output(output, &bytes)
}

/// `tessera bin2json`.
pub fn bin2json(input: &str, style: JsonStyle, keys: Option<&str>) -> Outcome {
    let keys = read_keys(keys)?;
    let bytes = read_input(input)?;
    let doc = open(&bytes, keys.as_ref()).map_err(|error| refusal(input, &bytes, error))?;
    // JSON cannot carry NaN or an infinity: it would be written as `null`, another value.
    if let Some((path, number)) = crate::records::non_finite_float(doc.root()) {
        let what = crate::records::non_finite_name(number);
        let field = if path.is_empty() { "the document".to_owned() } else { format!("field `{path}`") };
        return Err(Failure::Invalid(format!("{input}: {field} is {what}, which JSON cannot hold")));
    }
    let mut json = Vec::with_capacity(bytes.len() * 2);
    doc.root().write_json(&mut json, style);
    json.push(b'\n');
    write_output("-", &json)
}

/// `tessera validate`.
pub fn validate(file: &str, keys: Option<&str>, json: bool) -> Outcome {
    let keys = read_keys(keys)?;
    let bytes = read_input(file)?;
    open(&bytes, keys.as_ref()).map_err(|error| refusal(file, &bytes, error))?;
    if json {
        outln!("{}", serde_json::json!({ "file": file, "valid": true, "bytes": bytes.len() }));
    } else {
        outln!("{file}: valid ({} bytes)", bytes.len());
    }
    Ok(())
}
