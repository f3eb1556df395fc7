//! Review: `tessera export` / `import` round trips, rejected lines, exit statuses.

use assert_cmd::Command;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tessera::collection::{Embed, Record};

fn run(args: &[&str]) -> (i32, String, String) {
    let output = Command::cargo_bin("tessera").unwrap().args(args).output().unwrap();
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
    (output.status.code().unwrap_or(-1), text(output.stdout), text(output.stderr))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Embed)]
enum Kind {
    A,
    B { x: i32 },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Record)]
#[record(name = "items")]
struct Item {
    #[record(key)]
    id: u32,
    #[record(unique)]
    code: String,
    #[record(index)]
    level: u8,
    score: f64,
    maybe: Option<f64>,
    single: f32,
    big: u64,
    tags: Vec<String>,
    kind: Kind,
}

fn item(id: u32) -> Item {
    Item {
        id,
        code: format!("c{id}\u{0}\"\\\n😀"),
        level: (id % 256) as u8,
        score: id as f64 / 3.0,
        maybe: if id.is_multiple_of(2) { Some(-0.0) } else { None },
        single: id as f32 / 7.0,
        big: u64::MAX - id as u64,
        tags: vec![format!("t{id}")],
        kind: if id.is_multiple_of(3) { Kind::A } else { Kind::B { x: -(id as i32) } },
    }
}

fn make(dir: &Path, items: &[Item]) -> PathBuf {
    let path = dir.join("src.tessera");
    let db = tessera::Db::open(&path).unwrap();
    let c = db.collection::<Item>().unwrap();
    db.write(|tx| items.iter().try_for_each(|i| c.insert(tx, i).map(drop))).unwrap();
    drop(c);
    drop(db);
    path
}

fn export(db: &Path) -> String {
    let (status, out, err) = run(&["export", db.to_str().unwrap()]);
    assert_eq!(status, 0, "{err}");
    out
}

#[test]
fn export_import_export_is_identical() {
    let dir = tempfile::tempdir().unwrap();
    let items: Vec<Item> = (0..300).map(item).collect();
    let src = make(dir.path(), &items);
    let first = export(&src);
    let file = dir.path().join("a.jsonl");
    std::fs::write(&file, &first).unwrap();
    let copy = dir.path().join("copy.tessera");
    let (status, out, err) = run(&["import", copy.to_str().unwrap(), "items", file.to_str().unwrap(), "--batch", "7"]);
    assert_eq!(status, 0, "{out}{err}");
    assert!(out.contains("imported 300, rejected 0"), "{out}");
    assert_eq!(export(&copy), first);
    let (status, out, _) = run(&["check", copy.to_str().unwrap()]);
    assert_eq!(status, 0, "{out}");
    // Imported again: unchanged.
    let (status, out, err) = run(&["import", copy.to_str().unwrap(), "items", file.to_str().unwrap()]);
    assert_eq!(status, 0, "{err}");
    assert!(out.contains("imported 0") && out.contains("unchanged 300"), "{out}");
}

/// Values JSON cannot write (NaN, infinities) were exported as `null`, silently: the import
/// then stored `None` for `Some(NaN)` and refused `inf` in a required field. The export now
/// refuses such records, naming the collection, the key and the field, with exit status 1, and
/// writes no output file.
#[test]
fn an_export_refuses_records_holding_nan_or_an_infinity_and_names_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut odd = item(1);
    odd.maybe = Some(f64::NAN);
    let mut inf = item(2);
    inf.score = f64::INFINITY;
    let mut negative = item(4);
    negative.single = f32::NEG_INFINITY;
    let src = make(dir.path(), &[odd, inf, item(3), negative, item(5)]);
    let (status, _, err) = run(&["export", src.to_str().unwrap()]);
    assert_eq!(status, 1, "{err}");
    assert!(err.contains(r#"collection "items", record 1: field `maybe` is NaN"#), "{err}");
    assert!(err.contains(r#"collection "items", record 2: field `score` is infinity"#), "{err}");
    assert!(err.contains(r#"collection "items", record 4: field `single` is -infinity"#), "{err}");
    assert!(err.contains("3 records hold NaN or an infinity"), "{err}");
    let file = dir.path().join("a.jsonl");
    let (status, out, err) = run(&["export", src.to_str().unwrap(), "-o", file.to_str().unwrap()]);
    assert_eq!(status, 1, "{out}{err}");
    assert!(!file.exists(), "a refused export leaves no file");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2, "nor a temporary one");
    // --json: the same refusal, as the error object.
    let (status, _, err) = run(&["--json", "export", src.to_str().unwrap(), "-o", file.to_str().unwrap()]);
    assert_eq!(status, 1);
    let error: serde_json::Value = serde_json::from_str(err.trim()).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert_eq!(error["exit_status"], 1);
    assert!(error["error"].as_str().unwrap().contains("record 2: field `score` is infinity"), "{error}");
    // A file of finite records exports as before.
    let sub = dir.path().join("finite");
    std::fs::create_dir(&sub).unwrap();
    assert_eq!(export(&make(&sub, &[item(3), item(5)])).lines().count(), 3);
}

/// A float deep in a record is named by its path.
#[test]
fn a_refused_export_names_a_nested_float_by_its_path() {
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Embed)]
    struct Point {
        at: Vec<f64>,
    }
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Record)]
    #[record(name = "tracks")]
    struct Track {
        #[record(key)]
        name: String,
        points: Vec<Point>,
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.tessera");
    {
        let db = tessera::Db::open(&path).unwrap();
        let tracks = db.collection::<Track>().unwrap();
        let track = Track { name: "north".into(), points: vec![Point { at: vec![1.0, 2.0] }, Point { at: vec![0.5, f64::NAN] }] };
        db.write(|tx| tracks.insert(tx, &track).map(drop)).unwrap();
    }
    let (status, _, err) = run(&["export", path.to_str().unwrap()]);
    assert_eq!(status, 1, "{err}");
    assert!(err.contains(r#"collection "tracks", record "north": field `points[1].at[1]` is NaN"#), "{err}");
}

/// `export --salvage` writes what JSON can carry and lists the records holding NaN or an
/// infinity as skipped, not representable (exit 1), instead of writing them with `null`.
#[test]
fn a_salvage_skips_records_holding_nan_or_an_infinity_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let mut odd = item(1);
    odd.maybe = Some(f64::NAN);
    let src = make(dir.path(), &[odd, item(2), item(3)]);
    let mut lock = src.as_os_str().to_owned();
    lock.push("-lock");
    let _ = std::fs::remove_file(lock);
    let file = dir.path().join("s.jsonl");
    let (status, out, err) = run(&["export", src.to_str().unwrap(), "--salvage", "-o", file.to_str().unwrap()]);
    assert_eq!(status, 1, "{out}{err}");
    assert!(err.contains(r#"skipped: collection "items", record 1: field `maybe` is NaN"#) && err.contains("not representable"), "{err}");
    assert!(out.contains("items (2)"), "the records written: {out}");
    let written = std::fs::read_to_string(&file).unwrap();
    let ids: Vec<u64> =
        written.lines().skip(1).map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap()["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, [2, 3], "{written}");
    let (status, out, _) = run(&["--json", "export", src.to_str().unwrap(), "--salvage", "-o", file.to_str().unwrap()]);
    assert_eq!(status, 1);
    let summary: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(summary["complete"], false, "{summary}");
    assert_eq!(summary["collections"][0]["records"], 2, "{summary}");
    assert!(summary["skipped_not_representable"][0].as_str().unwrap().contains("record 1: field `maybe` is NaN"), "{summary}");
}

#[test]
fn rejected_lines_are_reported_each_and_store_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let src = make(dir.path(), &[item(1), item(2)]);
    let header = export(&src).lines().next().unwrap().to_owned();
    let good = |id: u32| serde_json::to_string(&item(id)).unwrap();
    let lines = [
        header.clone(),
        good(10),
        r#"{"id": 11, "code": "x", "level": 300, "score": 1, "maybe": null, "single": 1, "big": 1, "tags": [], "kind": "A"}"#.to_owned(),
        "not json".to_owned(),
        good(12),
        // Unique code already taken by record 10.
        serde_json::to_string(&Item { id: 13, ..item(10) }).unwrap(),
        r#"{"id": 14}"#.to_owned(),
        "[1, 2]".to_owned(),
        good(15),
    ];
    let file = dir.path().join("bad.jsonl");
    std::fs::write(&file, lines.join("\n")).unwrap();
    for atomic in [false, true] {
        let target = dir.path().join(format!("t{atomic}.tessera"));
        let mut args = vec!["--json", "import", target.to_str().unwrap(), "items", file.to_str().unwrap(), "--batch", "2"];
        if atomic {
            args.push("--atomic");
        }
        let (status, out, err) = run(&args);
        assert_eq!(status, 1, "{out}{err}");
        let report: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
        let rejected: Vec<u64> = report["rejections"].as_array().unwrap().iter().map(|r| r["line"].as_u64().unwrap()).collect();
        assert_eq!(rejected, [3, 4, 6, 7, 8], "{report}");
        let db = tessera::Db::open(&target).unwrap();
        let keys: Vec<u32> = match db.dyn_collection("items") {
            Ok(c) => c.all().fetch(&db).unwrap().iter().map(|r| r.value().get("id").unwrap().as_u64().unwrap() as u32).collect(),
            Err(_) => vec![],
        };
        if atomic {
            assert_eq!(report["imported"], 0, "{report}");
            assert!(keys.is_empty(), "{keys:?}");
            let (_, ls, _) = run(&["ls", target.to_str().unwrap()]);
            assert!(!ls.contains("items"), "--atomic, nothing written, yet the collection exists: {ls}");
        } else {
            assert_eq!(keys, [10, 12, 15]);
            assert_eq!(report["imported"], 3, "{report}");
            let (status, out, _) = run(&["check", target.to_str().unwrap()]);
            assert_eq!(status, 0, "{out}");
        }
    }
}

/// `--atomic` created the collection from the export header in a transaction of its own, so a
/// refused import left an empty collection behind while saying "nothing was written". The
/// collection is now created only once every line is known to be accepted.
#[test]
fn a_refused_atomic_import_into_an_existing_file_leaves_it_as_it_was_and_an_accepted_one_creates_the_collection() {
    let dir = tempfile::tempdir().unwrap();
    let src = make(dir.path(), &[item(1), item(2), item(3)]);
    let good = export(&src);
    let mut lines: Vec<String> = good.lines().map(str::to_owned).collect();
    lines.insert(
        2,
        r#"{"id": 9, "code": "x", "level": 300, "score": 1, "maybe": null, "single": 1, "big": 1, "tags": [], "kind": "A"}"#.into(),
    );
    let (good_file, bad_file) = (dir.path().join("good.jsonl"), dir.path().join("bad.jsonl"));
    std::fs::write(&good_file, &good).unwrap();
    std::fs::write(&bad_file, lines.join("\n")).unwrap();

    // A database with another collection and no collection "items".
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Record)]
    #[record(name = "notes")]
    struct Note {
        #[record(key)]
        id: u32,
    }
    let target = dir.path().join("target.tessera");
    let target_str = target.to_str().unwrap();
    {
        let db = tessera::Db::open(&target).unwrap();
        let notes = db.collection::<Note>().unwrap();
        db.write(|tx| notes.insert(tx, &Note { id: 7 }).map(drop)).unwrap();
    }
    let before = run(&["--json", "info", target_str]).1;
    let (status, out, err) = run(&["import", target_str, "items", bad_file.to_str().unwrap(), "--atomic"]);
    assert_eq!(status, 1, "{out}{err}");
    assert_eq!(out.trim(), "imported 0, rejected 1 (--atomic: nothing was written)", "{err}");
    assert!(err.starts_with("line 3: ") && err.contains("level"), "{err}");
    let after = run(&["--json", "info", target_str]).1;
    let strip = |info: &str| {
        let mut info: serde_json::Value = serde_json::from_str(info).unwrap();
        info.as_object_mut().unwrap().retain(|key, _| ["collections", "dictionaries", "documents"].contains(&key.as_str()));
        info
    };
    assert_eq!(strip(&after), strip(&before), "the file's contents are as they were");
    assert!(!run(&["ls", target_str]).1.contains("items"));
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|entry| entry.unwrap().file_name()).collect();
    assert!(!leftovers.iter().any(|name| name.to_string_lossy().starts_with(".tessera-import")), "no scratch left: {leftovers:?}");

    // Accepted: the collection is created and every record written.
    let (status, out, err) = run(&["import", target_str, "items", good_file.to_str().unwrap(), "--atomic"]);
    assert_eq!(status, 0, "{out}{err}");
    assert_eq!(out.trim(), "imported 3, rejected 0");
    assert!(export(&target).starts_with(&good), "the items section, then notes");
    assert_eq!(run(&["get", "--json", target_str, "notes", "7"]).1.trim(), r#"{"id":7}"#);

    // A new file refused with --atomic is not left behind.
    let fresh = dir.path().join("fresh.tessera");
    assert_eq!(run(&["import", fresh.to_str().unwrap(), "items", bad_file.to_str().unwrap(), "--atomic"]).0, 1);
    assert!(!fresh.exists());
    // Without --atomic, the other lines are written and the refused one reported.
    let (status, out, err) = run(&["import", fresh.to_str().unwrap(), "items", bad_file.to_str().unwrap()]);
    assert_eq!(status, 1, "{out}{err}");
    assert_eq!(out.trim(), "imported 3, rejected 1", "{err}");
    assert_eq!(export(&fresh), good);
}

#[test]
fn exit_statuses_are_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let src = make(dir.path(), &[item(1)]);
    let db = src.to_str().unwrap();
    assert_eq!(run(&["get", db, "items", "1"]).0, 0);
    assert_eq!(run(&["get", db, "items", "2"]).0, 1, "nothing found");
    assert_eq!(run(&["get", db, "items", "x"]).0, 1, "a key that is not a u32: invalid data");
    assert_eq!(run(&["get", db, "nope", "1"]).0, 2, "unknown collection");
    assert_eq!(run(&["query", db, "items", "level >="]).0, 2, "query does not parse");
    assert_eq!(run(&["query", db, "items", "nosuch = 1"]).0, 2, "unknown field");
    assert_eq!(run(&["query", db, "items", "level = 1"]).0, 0);
    let not_db = dir.path().join("plain.txt");
    std::fs::write(&not_db, b"hello").unwrap();
    assert_eq!(run(&["ls", not_db.to_str().unwrap()]).0, 3);
    assert_eq!(run(&["export", db, "nope"]).0, 2);
    let missing = dir.path().join("missing.jsonl");
    assert_eq!(run(&["import", db, "items", missing.to_str().unwrap()]).0, 3);
    assert_eq!(run(&["import", db, "items", missing.to_str().unwrap(), "--batch", "0"]).0, 2);
    let backup = dir.path().join("b.tessera");
    assert_eq!(run(&["backup", db, backup.to_str().unwrap()]).0, 0);
    assert_eq!(export(&backup), export(&src));
    assert_ne!(run(&["backup", db, backup.to_str().unwrap()]).0, 0, "the copy exists");
    assert_eq!(run(&["compact", db]).0, 0);
    assert_eq!(export(&backup), export(&src));
    assert!([1, 2].contains(&run(&["dict", "get", db, "default", "nokey"]).0), "no such dictionary");
}

/// An export's header carries the schema: importing into an existing collection of another
/// schema must not store records of the other shape.
#[test]
fn an_import_into_a_collection_of_another_schema_rejects_what_does_not_fit() {
    let dir = tempfile::tempdir().unwrap();
    let src = make(dir.path(), &[item(1), item(2)]);
    let text = export(&src).replace("\"collection\":\"items\"", "\"collection\":\"other\"");
    let file = dir.path().join("a.jsonl");
    std::fs::write(&file, &text).unwrap();
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Record)]
    #[record(name = "other")]
    struct Other {
        #[record(key)]
        id: u32,
        code: String,
    }
    let target = dir.path().join("t.tessera");
    {
        let db = tessera::Db::open(&target).unwrap();
        drop(db.collection::<Other>().unwrap());
    }
    let (status, out, err) = run(&["import", target.to_str().unwrap(), "other", file.to_str().unwrap()]);
    assert_eq!(status, 1, "{out}{err}");
    assert!(out.contains("imported 0, rejected 2"), "{out}{err}");
}
