//! Issue 15, item 3: `tessera export --salvage`, run as a built binary.
//!
//! What was missing: a damaged file could only be copied; reading it through LMDB could crash
//! the reader. `export --salvage` reads the pages from the file's bytes, writes every record
//! that proves itself in the export's JSON Lines (which `import` takes), and names what it
//! skipped.

use assert_cmd::Command;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use tessera::collection::Record;
use tessera::{Db, DbOptions};

const PAGE_BYTES: usize = 4096;

#[derive(serde::Serialize, serde::Deserialize, Record)]
#[record(name = "notes")]
struct Note {
    #[record(key)]
    id: u32,
    #[record(index)]
    title: String,
    body: String,
}

/// Runs `tessera ARGS`; returns (exit status, stdout, stderr).
fn run(args: &[&str]) -> (i32, String, String) {
    let output = Command::cargo_bin("tessera").unwrap().args(args).output().unwrap();
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
    (output.status.code().unwrap_or(-1), text(output.stdout), text(output.stderr))
}

/// A database of 1,500 notes (some larger than a page) and a small dynamic collection, written
/// without the write map so that the file is its used pages; no lock file left.
fn written(dir: &Path) -> PathBuf {
    let path = dir.join("notes.tessera");
    let db = Db::open_with(&path, DbOptions { write_map: false, ..DbOptions::default() }).unwrap();
    let notes = db.collection::<Note>().unwrap();
    db.write(|tx| {
        (0..1_500u32).try_for_each(|id| {
            let body = if id.is_multiple_of(97) { "long ".repeat(1_500) } else { format!("body of {id}") };
            notes.insert(tx, &Note { id, title: format!("note {}", id % 40), body }).map(drop)
        })
    })
    .unwrap();
    let schema = serde_json::from_value(serde_json::json!({
        "version": 1, "key_fields": ["name"], "key_kinds": ["string"],
        "shape": tags_shape(), "indexes": [],
    }))
    .unwrap();
    let tags = db.create_dyn_collection("tags", &schema).unwrap();
    db.write(|tx| {
        ["rust", "lmdb", "salvage"]
            .iter()
            .try_for_each(|name| tags.insert_json(tx, format!(r#"{{"name": "{name}"}}"#).as_bytes()).map(drop))
    })
    .unwrap();
    drop((notes, tags));
    db.close().unwrap();
    let mut lock = path.as_os_str().to_owned();
    lock.push("-lock");
    std::fs::remove_file(lock).unwrap();
    path
}

/// The shape of the `tags` collection, as JSON.
fn tags_shape() -> serde_json::Value {
    serde_json::to_value(tessera::collection::TypeDesc::Struct(vec![("name".into(), tessera::collection::TypeDesc::String)])).unwrap()
}

/// The lines of an export that are records (not headers).
fn records(export: &str) -> Vec<String> {
    let is_header = |line: &str| serde_json::from_str::<serde_json::Value>(line).unwrap().get("tessera_export").is_some();
    export.lines().filter(|line| !is_header(line)).map(str::to_owned).collect()
}

#[test]
fn an_intact_file_salvages_to_the_normal_export() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path());
    let file = path.to_str().unwrap();
    let (status, normal, err) = run(&["export", file]);
    assert_eq!(status, 0, "{err}");
    let (status, salvaged, err) = run(&["export", file, "--salvage"]);
    assert_eq!(status, 0, "{err}");
    assert_eq!(salvaged, normal, "headers and records, line for line");
    assert!(err.contains("salvaged 1503 records of 2 collections; skipped 0 damaged pages and 0 entries"), "{err}");
    // Named collections, to a file, with the --json summary.
    let out = dir.path().join("notes.jsonl");
    let (status, summary, err) = run(&["export", file, "notes", "--salvage", "--json", "-o", out.to_str().unwrap()]);
    assert_eq!(status, 0, "{err}");
    let summary: serde_json::Value = serde_json::from_str(&summary).unwrap();
    assert_eq!(summary["complete"], true);
    assert_eq!(summary["collections"][0]["records"], 1500);
    assert_eq!(records(&std::fs::read_to_string(&out).unwrap()).len(), 1500);
}

#[test]
fn a_damaged_leaf_page_is_skipped_named_and_the_rest_imports() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path());
    let (_, normal, _) = run(&["export", path.to_str().unwrap(), "notes"]);
    // A leaf page of the notes in the middle of their tree, and the keys it holds.
    let mut pages = std::collections::BTreeMap::<u64, Vec<Vec<u8>>>::new();
    tessera::store::structure::read_entries(&path, &|name| name == "tessera.col.notes", &mut |entry| {
        pages.entry(entry.page).or_default().push(entry.key.to_vec());
    })
    .unwrap();
    let (&leaf, keys) = pages.iter().nth(pages.len() / 2).unwrap();
    let lost: BTreeSet<u32> = keys.iter().map(|key| u32::from_be_bytes(key[..4].try_into().unwrap())).collect();
    assert!(lost.len() > 10);
    // Its header names another page: the whole page is unreadable.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[leaf as usize * PAGE_BYTES..leaf as usize * PAGE_BYTES + 8].fill(0xEE);
    std::fs::write(&path, &bytes).unwrap();

    let out = dir.path().join("salvaged.jsonl");
    let (status, stdout, err) = run(&["export", path.to_str().unwrap(), "--salvage", "-o", out.to_str().unwrap()]);
    assert_eq!(status, 1, "{stdout}{err}");
    assert!(err.contains(&format!("skipped: keyspace \"tessera.col.notes\", page {leaf}: the page header names page")), "{err}");
    assert!(err.contains("; skipped 1 damaged page and 0 entries"), "{err}");
    let salvaged = std::fs::read_to_string(&out).unwrap();
    let expected: Vec<String> = records(&normal)
        .into_iter()
        .filter(|line| {
            let id = serde_json::from_str::<serde_json::Value>(line).unwrap()["id"].as_u64().unwrap() as u32;
            !lost.contains(&id)
        })
        .collect();
    let salvaged_notes: Vec<String> = records(&salvaged).into_iter().filter(|line| line.contains("\"id\"")).collect();
    assert_eq!(salvaged_notes, expected);

    // The salvage imports into a new file, which then holds exactly those records.
    let target = dir.path().join("recovered.tessera");
    for collection in ["notes", "tags"] {
        let (status, out, err) = run(&["import", target.to_str().unwrap(), collection, out.to_str().unwrap()]);
        assert_eq!(status, 0, "{out}{err}");
    }
    let (status, again, err) = run(&["export", target.to_str().unwrap(), "notes"]);
    assert_eq!(status, 0, "{err}");
    assert_eq!(records(&again), expected);
    assert_eq!(run(&["check", target.to_str().unwrap()]).0, 0);

    // --json: the skipped page in the summary.
    let (status, _, err) = run(&["export", path.to_str().unwrap(), "--salvage", "--json"]);
    assert_eq!(status, 1);
    let summary: serde_json::Value = serde_json::from_str(err.lines().last().unwrap()).unwrap();
    assert_eq!(summary["complete"], false);
    assert_eq!(summary["skipped_pages"][0]["page"], leaf);
    assert_eq!(summary["skipped_pages"][0]["keyspace"], "tessera.col.notes");
}

#[test]
fn damage_that_crashes_lmdb_is_salvaged() {
    // A leaf node offset past the page's end (tests/structure_damage.rs in tessera): LMDB
    // reads outside the page. The salvage skips that one node.
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path());
    let (_, normal, _) = run(&["export", path.to_str().unwrap()]);
    let mut pages = std::collections::BTreeMap::<u64, usize>::new();
    tessera::store::structure::read_entries(&path, &|name| name == "tessera.col.notes", &mut |entry| {
        *pages.entry(entry.page).or_default() += 1;
    })
    .unwrap();
    let leaf = *pages.keys().nth(pages.len() / 3).unwrap() as usize;
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[leaf * PAGE_BYTES + 16..leaf * PAGE_BYTES + 18].copy_from_slice(&0xFFF0u16.to_ne_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let (status, salvaged, err) = run(&["export", path.to_str().unwrap(), "--salvage"]);
    assert_eq!(status, 1, "{err}");
    assert!(err.contains(&format!("page {leaf}: node 0's offset 65520 lies outside the page's nodes")), "{err}");
    assert_eq!(records(&salvaged).len(), records(&normal).len() - 1);
    let normal: BTreeSet<String> = records(&normal).into_iter().collect();
    assert!(records(&salvaged).iter().all(|line| normal.contains(line)));
}

#[test]
fn empty_foreign_and_truncated_files_get_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    let (status, _, err) = run(&["export", empty.to_str().unwrap(), "--salvage"]);
    assert_eq!(status, 3, "{err}");
    assert!(err.contains("not a tessera database") && err.contains("an empty file"), "{err}");

    let foreign = dir.path().join("foreign.db");
    std::fs::write(&foreign, "SQLite format 3\0".repeat(600)).unwrap();
    let (status, _, err) = run(&["export", foreign.to_str().unwrap(), "--salvage"]);
    assert_eq!(status, 3, "{err}");
    assert!(err.contains("not a tessera database") && err.contains("53 51 4c 69"), "{err}");

    let missing = dir.path().join("missing");
    let (status, _, err) = run(&["export", missing.to_str().unwrap(), "--salvage"]);
    assert_eq!(status, 3, "{err}");
    assert!(err.contains("cannot open"), "{err}");

    // Cut in half: what lies before the cut is salvaged, the pages past it are named.
    let path = written(dir.path());
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / PAGE_BYTES / 2 * PAGE_BYTES]).unwrap();
    let (status, _, err) = run(&["export", path.to_str().unwrap(), "--salvage"]);
    assert_eq!(status, 1, "{err}");
    assert!(err.contains("the page lies past the end of the file"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // Cut inside the meta pages: not a database.
    std::fs::write(&path, &bytes[..100]).unwrap();
    let (status, _, err) = run(&["export", path.to_str().unwrap(), "--salvage"]);
    assert_eq!(status, 3, "{err}");
    assert!(err.contains("not a tessera database"), "{err}");

    // A collection the file does not have: a usage error, as for a normal export.
    let again = dir.path().join("again");
    std::fs::create_dir(&again).unwrap();
    let path = written(&again);
    let (status, _, err) = run(&["export", path.to_str().unwrap(), "missing", "--salvage"]);
    assert_eq!(status, 2, "{err}");
}
