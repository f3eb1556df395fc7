//! The `tessera` command on database files, run as a built binary (`assert_cmd`): on the
//! database the tour example makes, on one made here with several collections, and on a
//! foreign file.

use assert_cmd::Command;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use tessera::collection::{Embed, Record};

#[path = "../../tessera/examples/tour.rs"]
#[allow(dead_code)]
mod tour;

/// The tour's database, made once per test run (in a directory kept until the process ends).
fn tour_file() -> &'static Path {
    static TOUR: OnceLock<PathBuf> = OnceLock::new();
    TOUR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap().keep();
        let path = dir.join("tour.tessera");
        tour::tour(path.to_str().unwrap()).unwrap();
        path
    })
}

fn tessera() -> Command {
    Command::cargo_bin("tessera").unwrap()
}

/// Runs `tessera ARGS`; returns (exit status, stdout, stderr).
fn run(args: &[&str]) -> (i32, String, String) {
    let output = tessera().args(args).output().unwrap();
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
    (output.status.code().unwrap_or(-1), text(output.stdout), text(output.stderr))
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|error| panic!("{error}: {text}"))
}

/// A copy of the tour's database without its lock file, in a fresh directory.
fn tour_copy(dir: &Path) -> PathBuf {
    let path = dir.join("copy.tessera");
    std::fs::copy(tour_file(), &path).unwrap();
    path
}

#[test]
fn info_ls_and_schema_describe_the_tour_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = tour_copy(dir.path());
    let db = db.to_str().unwrap();
    let (status, out, err) = run(&["info", db]);
    assert_eq!(status, 0, "{err}");
    assert!(out.contains("tessera database, storage format 8"), "{out}");
    assert!(out.lines().any(|line| line.starts_with("tasks") && line.contains(" 4 ") && line.contains("priority (ready)")), "{out}");
    assert!(out.lines().any(|line| line.starts_with("default") && line.ends_with('3')), "{out}");
    assert!(out.lines().any(|line| line.starts_with("profiles") && line.ends_with('1')), "{out}");
    let info = json(&run(&["info", "--json", db]).1);
    assert_eq!(info["collections"][0]["records"], 4);
    assert_eq!(info["collections"][0]["indexes"][0]["state"], "ready");
    assert_eq!(info["format_version"], 8);
    assert!(info["last_txn_id"].as_u64().unwrap() > 0);

    let (status, out, _) = run(&["ls", db]);
    assert_eq!(status, 0);
    assert_eq!(out.lines().next().unwrap().split_whitespace().collect::<Vec<_>>(), ["kind", "name", "count"]);
    // The tour's raw keyspaces too ("people", "counters").
    let listed = json(&run(&["ls", "--json", db]).1);
    let kinds: Vec<&str> = listed.as_array().unwrap().iter().map(|entry| entry["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds[..3], ["collection", "dictionary", "documents"]);
    assert!(kinds[3..].iter().all(|kind| *kind == "keyspace") && kinds.len() > 3, "{listed}");

    let (status, out, _) = run(&["schema", db, "tasks"]);
    assert_eq!(status, 0);
    assert!(out.contains("id (u32)"), "{out}");
    assert!(out.lines().any(|line| line.split_whitespace().collect::<Vec<_>>() == ["due", "option<u32>"]), "{out}");
    assert!(out.lines().any(|line| line.split_whitespace().collect::<Vec<_>>() == ["priority", "i32"]), "{out}");
    assert!(out.lines().any(|line| line.split_whitespace().collect::<Vec<_>>() == ["priority", "false", "ready"]), "{out}");
    assert_eq!(json(&run(&["schema", "--json", db, "tasks"]).1)["key_kinds"][0], "u32");
    let (status, _, err) = run(&["schema", db, "nope"]);
    assert_eq!(status, 2, "{err}");
    assert!(err.contains("no collection \"nope\""), "{err}");
    // Read commands leave no lock file behind.
    assert!(!dir.path().join("copy.tessera-lock").exists());
}

#[test]
fn get_and_query_show_records_with_keys_as_values() {
    let db = tour_file().to_str().unwrap();
    let (status, out, _) = run(&["get", db, "tasks", "2"]);
    assert_eq!(status, 0);
    assert_eq!(json(&out)["title"], "fix bug");
    assert_eq!(
        run(&["get", "--json", db, "tasks", "4"]).1.trim(),
        r#"{"id":4,"title":"ship","priority":7,"due":9,"state":{"Done":{"note":"shipped"}}}"#
    );
    let (status, _, err) = run(&["get", db, "tasks", "99"]);
    assert_eq!(status, 1);
    assert!(err.contains("no record with key 99"), "{err}");
    let (status, _, err) = run(&["get", db, "tasks", "\"x\""]);
    assert_eq!(status, 1);
    assert!(err.contains("expected u32"), "{err}");

    let (status, out, _) = run(&["query", db, "tasks", "priority >= 7 and due is not null"]);
    assert_eq!(status, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>(), ["id", "title", "priority", "due", "state"]);
    assert!(lines[1].starts_with("1   write docs  10"), "{out}");
    assert_eq!(lines.last().unwrap(), &"(2 records)");
    let (status, out, _) = run(&["query", "--json", db, "tasks", "priority < 6"]);
    assert_eq!(status, 0);
    assert_eq!(json(out.lines().next().unwrap())["id"], 3);
    let (status, out, _) = run(&["query", db, "tasks", "priority > 1", "--explain"]);
    assert_eq!(status, 0);
    assert_eq!(out.trim_end(), "index range on priority [1 .. ∞), filter priority > 1, sort in memory", "{out}");
    // The whole query text: order (NULLs per SQL), limit and offset, keywords in any case.
    let (status, out, _) = run(&["query", "--json", db, "tasks", "priority >= 1 ORDER BY priority DESC, id LIMIT 2"]);
    assert_eq!(status, 0);
    let ids: Vec<i64> = out.lines().map(|line| json(line)["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, [1, 2], "{out}");
    let (status, _, err) = run(&["query", db, "tasks", "priority >= 1 order by"]);
    assert_eq!(status, 2);
    assert!(err.contains("expected a field to order by after `by` at column 23"), "{err}");
    let (status, _, err) = run(&["query", db, "tasks", "priority >"]);
    assert_eq!(status, 2);
    assert!(err.contains("column"), "{err}");
    let (status, _, err) = run(&["query", db, "tasks", "priority > \"x\""]);
    assert_eq!(status, 2, "{err}");
}

#[test]
fn dict_and_doc_read_and_write_entries() {
    let db = tour_file().to_str().unwrap();
    let (status, out, _) = run(&["dict", "ls", db, "default"]);
    assert_eq!(status, 0);
    assert!(out.lines().any(|line| line.split_whitespace().collect::<Vec<_>>() == ["theme", "\"dark\""]), "{out}");
    assert_eq!(run(&["dict", "get", db, "default", "font size"]).1.trim(), "14");
    assert_eq!(json(&run(&["dict", "ls", "--json", db, "default"]).1)["last visit"], 101);
    assert_eq!(run(&["dict", "get", db, "default", "missing"]).0, 1);
    assert_eq!(run(&["dict", "ls", db, "nope"]).0, 2);

    let dir = tempfile::tempdir().unwrap();
    let copy = tour_copy(dir.path());
    let copy = copy.to_str().unwrap();
    assert_eq!(run(&["dict", "set", copy, "default", "theme", "light"]).0, 0);
    assert_eq!(run(&["dict", "set", copy, "default", "sizes", "[1, 2]"]).0, 0);
    assert_eq!(run(&["dict", "get", copy, "default", "theme"]).1.trim(), "\"light\"");
    assert_eq!(json(&run(&["dict", "get", "--json", copy, "default", "sizes"]).1)["value"], json("[1, 2]"));

    let (status, out, _) = run(&["doc", "get", db, "grace"]);
    assert_eq!(status, 0);
    assert_eq!(json(&out)["rank"], "Rear Admiral");
    assert_eq!(run(&["doc", "get", "--json", db, "grace", "age"]).1.trim(), "85");
    assert_eq!(run(&["doc", "get", db, "nobody"]).0, 1);
    assert_eq!(run(&["doc", "get", db, "grace", "--namespace", "nope"]).0, 2);
}

#[test]
fn check_backup_and_compact_keep_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let db = tour_copy(dir.path());
    let db = db.to_str().unwrap();
    let (status, out, err) = run(&["check", db]);
    assert_eq!(status, 0, "{out}{err}");
    assert!(out.contains("0 problems"), "{out}");
    assert_eq!(json(&run(&["check", "--json", db]).1)["ok"], true);
    let backup = dir.path().join("backup.tessera");
    let backup = backup.to_str().unwrap();
    let (status, out, _) = run(&["backup", db, backup]);
    assert_eq!(status, 0);
    assert!(out.starts_with("backed up"), "{out}");
    assert_eq!(run(&["backup", db, backup]).0, 2, "the destination exists");
    assert_eq!(run(&["check", backup]).0, 0);
    let before = std::fs::metadata(db).unwrap().len();
    let compacted = json(&run(&["compact", "--json", db]).1);
    // The tour's file has the durable feed: copied page by page, still smaller than the map.
    assert_eq!(compacted["compacted"], false);
    assert_eq!(compacted["bytes_before"], before);
    assert!(compacted["bytes_after"].as_u64().unwrap() < before);
    assert_eq!(run(&["check", db]).0, 0);
    assert_eq!(run(&["export", db]).1, run(&["export", backup]).1);
    assert_eq!(json(&run(&["get", "--json", db, "tasks", "1"]).1)["priority"], 10);
}

/// A file with the durable feed is copied without compaction (compaction would restart its
/// commit numbers below its feed's): `compact` says so, instead of reporting it compacted.
#[test]
fn compact_of_a_file_with_the_durable_feed_says_it_did_not_compact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("feed.tessera");
    {
        let options = tessera::DbOptions { durable_feed: true, ..tessera::DbOptions::default() };
        let db = tessera::Db::open_with(&path, options).unwrap();
        let notes = db.keyspace("notes").unwrap();
        db.write(|tx| (0u32..500).try_for_each(|i| tx.put(&notes, &i.to_be_bytes(), &[7u8; 300]))).unwrap();
        assert!(db.file_info().unwrap().durable_feed);
    }
    let db = path.to_str().unwrap();
    let (status, out, err) = run(&["compact", db]);
    assert_eq!(status, 0, "{out}{err}");
    assert!(out.starts_with("copied") && out.contains("without compaction"), "{out}");
    let report = json(&run(&["compact", "--json", db]).1);
    assert_eq!(report["compacted"], false);
    assert_eq!(run(&["check", db]).0, 0);
}

/// `compact` replaces the file with a compacted copy: a process that had the file open would
/// go on writing to the old one and lose its commits. It refuses instead (exit status 3),
/// naming the process, and leaves the file as it was.
#[test]
fn compact_refuses_a_file_another_process_has_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = tour_copy(dir.path());
    let db = path.to_str().unwrap();
    let contents = std::fs::read(&path).unwrap();
    let holder = tessera::Db::open(&path).unwrap(); // this test's process has it open
    let (status, out, err) = run(&["compact", db]);
    assert_eq!(status, 3, "{out}{err}");
    assert!(err.contains("another process") && err.contains(&format!("pid {}", std::process::id())), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), contents, "the file is left as it was");
    drop(holder);
    let (status, out, err) = run(&["compact", db]);
    assert_eq!(status, 0, "{out}{err}");
    assert_eq!(run(&["check", db]).0, 0);
}

#[test]
fn a_foreign_file_is_named_with_its_first_bytes_and_exit_status_3() {
    let dir = tempfile::tempdir().unwrap();
    let foreign = dir.path().join("app.sqlite");
    let original = b"SQLite format 3\0\x10\x00\x01\x01 and so on, for a while";
    std::fs::write(&foreign, original).unwrap();
    let file = foreign.to_str().unwrap();
    let other = dir.path().join("other.tessera");
    let other = other.to_str().unwrap();
    let jsonl = dir.path().join("in.jsonl");
    std::fs::write(&jsonl, "{}\n").unwrap();
    let commands: Vec<Vec<&str>> = vec![
        vec!["info", file],
        vec!["ls", file],
        vec!["schema", file, "tasks"],
        vec!["get", file, "tasks", "1"],
        vec!["query", file, "tasks", "id > 1"],
        vec!["export", file],
        vec!["import", file, "tasks", jsonl.to_str().unwrap()],
        vec!["check", file],
        vec!["backup", file, other],
        vec!["compact", file],
        vec!["dict", "ls", file, "default"],
        vec!["dict", "get", file, "default", "k"],
        vec!["dict", "set", file, "default", "k", "1"],
        vec!["doc", "get", file, "grace"],
        vec!["bin2json", file],
        vec!["validate", file],
    ];
    for args in commands {
        let (status, out, err) = run(&args);
        // A file given as a document is invalid (exit 1), as a damaged document is; given as a
        // database, it is a file of another kind (exit 3).
        let (expected, expected_status) =
            if matches!(args[0], "bin2json" | "validate") { ("not a tessera document", 1) } else { ("not a tessera database", 3) };
        assert_eq!(status, expected_status, "{args:?}: {out}{err}");
        assert!(err.contains(&format!("{expected}: {file} (starts with 53 51 4c 69 …)")), "{args:?}: {err}");
        assert!(expected_status == 1 || !err.contains("version"), "{args:?}: {err}");
        let (status, _, err) = run(&[&args[..1], &["--json"], &args[1..]].concat());
        assert_eq!(status, expected_status, "{args:?} --json");
        assert_eq!(json(&err)["exit_status"], expected_status, "{args:?}");
    }
    assert_eq!(std::fs::read(&foreign).unwrap(), original, "left as it was");
    assert!(!dir.path().join("app.sqlite-lock").exists());
    assert!(!Path::new(other).exists());
    let (status, _, err) = run(&["info", dir.path().join("missing").to_str().unwrap()]);
    assert_eq!(status, 3);
    assert!(err.contains("cannot open"), "{err}");
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Record)]
#[record(name = "events", version = 2)]
struct Event {
    #[record(key)]
    day: i16,
    #[record(key)]
    name: String,
    #[record(unique)]
    code: u64,
    place: Option<Place>,
    tags: Vec<String>,
    score: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Embed)]
struct Place {
    city: String,
    floor: Option<i8>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Record)]
#[record(name = "people")]
struct Person {
    #[record(key)]
    name: String,
    #[record(index)]
    age: u8,
}

/// A database with two collections of every field kind, closed.
fn library_database(dir: &Path) -> PathBuf {
    let path = dir.join("made.tessera");
    let db = tessera::Db::open(&path).unwrap();
    let events = db.collection::<Event>().unwrap();
    let people = db.collection::<Person>().unwrap();
    db.write(|tx| {
        for index in 0..50i16 {
            let place = (index % 3 != 0).then(|| Place { city: format!("city {index}"), floor: (index % 2 == 0).then_some(-1) });
            let event = Event {
                day: index - 25,
                name: format!("event \"{index}\"\n"),
                // Above i64::MAX, but apart by more than a float's precision there: unique
                // index entries of u64s that close are equal (see the report on sort_key).
                code: u64::MAX - (index as u64) * 4096,
                place,
                tags: (0..index % 4).map(|tag| format!("t{tag}")).collect(),
                score: f64::from(index) / 3.0,
            };
            events.insert(tx, &event)?;
            people.insert(tx, &Person { name: format!("person {index}"), age: (index % 90) as u8 })?;
        }
        Ok(())
    })
    .unwrap();
    drop((events, people));
    db.close().unwrap();
    path
}

/// The records of each collection in an export, by collection.
fn sections(export: &str) -> std::collections::BTreeMap<String, (serde_json::Value, Vec<String>)> {
    let mut sections = std::collections::BTreeMap::new();
    let mut current = String::new();
    for line in export.lines() {
        let value = json(line);
        if let Some(name) = value.get("tessera_export").and(value.get("collection")).and_then(|name| name.as_str()) {
            current = name.to_owned();
            sections.insert(current.clone(), (value["records"].clone(), Vec::new()));
        } else {
            sections.get_mut(&current).unwrap().1.push(line.to_owned());
        }
    }
    sections
}

#[test]
fn export_then_import_into_a_new_file_round_trips_every_collection() {
    let dir = tempfile::tempdir().unwrap();
    for source in [library_database(dir.path()), tour_copy(dir.path())] {
        let source = source.to_str().unwrap();
        let export = dir.path().join("all.jsonl");
        let (status, out, err) = run(&["export", source, "-o", export.to_str().unwrap()]);
        assert_eq!(status, 0, "{err}");
        assert!(out.starts_with("exported"), "{out}");
        let exported = std::fs::read_to_string(&export).unwrap();
        let target = dir.path().join(format!("imported-{}.tessera", sections(&exported).len()));
        let target = target.to_str().unwrap();
        for (name, (count, records)) in sections(&exported) {
            assert_eq!(count, records.len(), "{name}");
            let (status, out, err) = run(&["import", target, &name, export.to_str().unwrap(), "--batch", "7"]);
            assert_eq!(status, 0, "{name}: {err}");
            assert!(out.starts_with(&format!("imported {count}, rejected 0")), "{out}");
        }
        let again = run(&["export", target]).1;
        assert_eq!(sections(&again), sections(&exported));
        assert_eq!(run(&["check", target]).0, 0);
        // Importing again changes nothing.
        let name = sections(&exported).into_keys().next().unwrap();
        let (status, out, _) = run(&["import", target, &name, export.to_str().unwrap()]);
        assert_eq!(status, 0);
        assert!(out.starts_with("imported 0, rejected 0, unchanged"), "{out}");
    }
    // The typed handles read what was imported.
    let db = tessera::Db::open(dir.path().join("imported-2.tessera")).unwrap();
    let events = db.collection::<Event>().unwrap();
    let event = events.get(&db, &(-24i16, "event \"1\"\n".to_owned())).unwrap().unwrap();
    assert_eq!(event.place, Some(Place { city: "city 1".into(), floor: None }));
    assert_eq!(event.code, u64::MAX - 4096);
    assert_eq!(event.score, 1.0 / 3.0);
    assert_eq!(db.collection::<Person>().unwrap().filter(Person::age().eq(7)).count(&db).unwrap(), 1);
}

#[test]
fn a_salvage_of_a_sound_file_is_its_export_line_for_line() {
    // Composite keys of a signed and a string field, whose widths the salvage learns from
    // the records as a dynamic handle does; the tour's enums, options and lists.
    let dir = tempfile::tempdir().unwrap();
    for source in [library_database(dir.path()), tour_copy(dir.path())] {
        let source = source.to_str().unwrap();
        let (status, exported, err) = run(&["export", source]);
        assert_eq!(status, 0, "{err}");
        let (status, salvaged, err) = run(&["export", source, "--salvage"]);
        assert_eq!(status, 0, "{err}");
        assert_eq!(salvaged, exported, "{source}");
        assert!(err.contains("skipped 0 damaged pages and 0 entries"), "{err}");
    }
}

#[test]
fn malformed_and_disagreeing_lines_are_rejected_with_their_line_and_path() {
    let dir = tempfile::tempdir().unwrap();
    let db = library_database(dir.path());
    let db = db.to_str().unwrap();
    let input = dir.path().join("people.jsonl");
    let lines = [
        r#"{"name": "new 1", "age": 30}"#,
        r#"{"name": "new 2", "age": "old"}"#,
        r#"{"name": "new 3", "age": 31"#,
        "",
        r#"{"name": "new 4", "age": 1.5}"#,
        r#"{"name": "new 5", "age": 32, "height": 2}"#,
        r#"{"age": 33}"#,
        r#"{"name": "new 6", "age": 34}"#,
    ];
    std::fs::write(&input, lines.join("\n")).unwrap();
    let input = input.to_str().unwrap();
    let (status, out, err) = run(&["import", db, "people", input, "--atomic"]);
    assert_eq!(status, 1, "{out}{err}");
    assert_eq!(out.trim(), "imported 0, rejected 5 (--atomic: nothing was written)");
    assert_eq!(json(&run(&["info", "--json", db]).1)["collections"][1]["records"], 50, "nothing written");

    let (status, out, err) = run(&["import", db, "people", input, "--batch", "2"]);
    assert_eq!(status, 1);
    assert_eq!(out.trim(), "imported 2, rejected 5");
    let reasons: Vec<&str> = err.lines().collect();
    assert!(reasons[0].starts_with("line 2: ") && reasons[0].contains("field `age`: expected an integer (u8), found a string"), "{err}");
    assert!(reasons[1].starts_with("line 3: not JSON"), "{err}");
    assert!(reasons[2].starts_with("line 5: ") && reasons[2].contains("field `age`: expected an integer (u8), found a float"), "{err}");
    assert!(reasons[3].starts_with("line 6: ") && reasons[3].contains("field `height`: not a field"), "{err}");
    assert!(reasons[4].starts_with("line 7: ") && reasons[4].contains("field `name`: missing"), "{err}");
    assert_eq!(run(&["get", db, "people", "new 6"]).0, 0);
    assert_eq!(run(&["get", db, "people", "new 2"]).0, 1);
    let report = json(&run(&["import", "--json", db, "people", input]).1);
    assert_eq!(report["rejected"], 5);
    assert_eq!(report["rejections"][0]["line"], 2);
    assert_eq!(report["unchanged"], 2);

    // A unique index refuses a taken value; the line is named.
    let events = dir.path().join("events.jsonl");
    std::fs::write(&events, r#"{"day": 1, "name": "n", "code": 18446744073709551615, "tags": [], "score": 1}"#).unwrap();
    let (status, out, err) = run(&["import", db, "events", events.to_str().unwrap()]);
    assert_eq!(status, 1, "{out}");
    assert!(err.starts_with("line 1: ") && err.contains("unique index `code`"), "{err}");
    assert!(err.contains(r#"for key "[-25, \"event \\\"0\\\"\\n\"]""#), "the holder's key as values: {err}");
    let (status, _, err) = run(&["import", db, "nothing", events.to_str().unwrap()]);
    assert_eq!(status, 2, "no schema for a new collection");
    assert!(err.contains("no collection \"nothing\""), "{err}");
}

#[test]
fn reading_commands_work_while_another_process_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = library_database(dir.path());
    let writer = tessera::Db::open(&path).unwrap();
    let people = writer.collection::<Person>().unwrap();
    let file = path.to_str().unwrap();
    for round in 0..3u8 {
        writer.write(|tx| people.upsert(tx, &Person { name: format!("writer {round}"), age: round })).unwrap();
        let info = json(&run(&["info", "--json", file]).1);
        assert_eq!(info["collections"][1]["records"], 51 + u64::from(round));
        assert_eq!(run(&["get", file, "people", &format!("writer {round}")]).0, 0);
    }
    let backup = dir.path().join("backup.tessera");
    assert_eq!(run(&["backup", file, backup.to_str().unwrap()]).0, 0);
    assert_eq!(json(&run(&["info", "--json", backup.to_str().unwrap()]).1)["collections"][1]["records"], 53);
}

#[test]
fn a_damaged_database_is_refused_with_exit_status_3() {
    let dir = tempfile::tempdir().unwrap();
    let path = library_database(dir.path());
    let mut bytes = std::fs::read(&path).unwrap();
    // Every tree page's header past the two meta pages: the main tree's root among them.
    let page = 4096;
    for start in (2 * page..bytes.len()).step_by(page) {
        bytes[start..start + 16].iter_mut().for_each(|byte| *byte ^= 0xFF);
    }
    std::fs::write(&path, &bytes).unwrap();
    for args in [vec!["info"], vec!["ls"], vec!["schema", "people"], vec!["export"], vec!["check"]] {
        let mut args = args;
        args.insert(1, path.to_str().unwrap());
        let (status, out, err) = run(&args);
        assert!(matches!(status, 1 | 3), "{args:?}: {out}{err}");
        assert!(err.contains("damaged") || out.contains("damaged"), "{args:?}: {out}{err}");
    }
}

#[test]
fn help_has_examples_and_the_exit_statuses() {
    let (status, out, _) = run(&["--help"]);
    assert_eq!(status, 0);
    assert!(out.contains("Examples:") && out.contains("tessera query app.tessera tasks"), "{out}");
    assert!(out.contains("3  I/O"), "{out}");
    let (status, out, _) = run(&["import", "--help"]);
    assert_eq!(status, 0);
    assert!(out.contains("--atomic") && out.contains("Examples:"), "{out}");
    assert_eq!(run(&["info"]).0, 2, "a usage error");
}

#[test]
fn import_batches_are_bounded_and_headers_are_versioned() {
    let dir = tempfile::tempdir().unwrap();
    let db = library_database(dir.path());
    let db = db.to_str().unwrap();
    let input = dir.path().join("people.jsonl");
    std::fs::write(&input, r#"{"name": "one", "age": 1}"#).unwrap();
    let input = input.to_str().unwrap();
    assert_eq!(run(&["import", db, "people", input, "--batch", "0"]).0, 2);
    assert_eq!(run(&["import", db, "people", input, "--batch", "1000001"]).0, 2);
    assert_eq!(run(&["import", db, "people", input, "--batch", "1000000"]).0, 0);
    assert_eq!(run(&["import", db, "people", input, "--batch", "1"]).0, 0);
    let future = dir.path().join("future.jsonl");
    std::fs::write(&future, "{\"tessera_export\": 2, \"collection\": \"people\"}\n").unwrap();
    let (status, _, err) = run(&["import", db, "people", future.to_str().unwrap()]);
    assert_eq!(status, 1);
    assert!(err.contains("line 1: export format 2"), "{err}");
}

#[test]
fn info_on_a_binary_document_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let document = dir.path().join("doc.bin");
    std::fs::write(&document, tessera::value::from_json(br#"{"a": [1, 2]}"#).unwrap()).unwrap();
    let (status, out, err) = run(&["info", document.to_str().unwrap()]);
    assert_eq!(status, 0, "{err}");
    assert!(out.contains("tessera document, format"), "{out}");
    assert_eq!(json(&run(&["info", "--json", document.to_str().unwrap()]).1)["root"], "dict");
    assert!(!dir.path().join("doc.bin-lock").exists());
}

#[test]
fn a_damaged_record_is_refused_with_exit_status_3() {
    let dir = tempfile::tempdir().unwrap();
    let path = tour_copy(dir.path());
    let mut bytes = std::fs::read(&path).unwrap();
    // Every copy (LMDB's free pages keep older versions of the record's page).
    let found: Vec<usize> = bytes.windows(10).enumerate().filter(|(_, window)| *window == b"write docs").map(|(at, _)| at).collect();
    assert!(!found.is_empty(), "the record's title is stored as it is");
    found.into_iter().for_each(|at| bytes[at] ^= 0x20);
    std::fs::write(&path, &bytes).unwrap();
    let file = path.to_str().unwrap();
    for args in [vec!["query", file, "tasks", "priority > 0"], vec!["export", file], vec!["get", file, "tasks", "1"]] {
        let (status, out, err) = run(&args);
        assert_eq!(status, 3, "{args:?}: {out}{err}");
        assert!(err.contains("damaged tessera database") && err.contains("checksum"), "{args:?}: {err}");
    }
    assert_eq!(run(&["check", file]).0, 1, "check reports damage as invalid data");
    assert_eq!(run(&["get", file, "tasks", "2"]).0, 0, "the other records read");
}

#[test]
fn a_file_of_an_older_format_is_not_migrated_by_a_reading_command() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("v4.tessera");
    std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/../tessera/tests/fixtures/v4.tessera"), &old).unwrap();
    let before = std::fs::read(&old).unwrap();
    let (status, _, err) = run(&["info", old.to_str().unwrap()]);
    assert_eq!(status, 3);
    assert!(err.contains("storage format 4 to 8, which a read-write open does"), "{err}");
    assert_eq!(err.matches("v4.tessera").count(), 1, "{err}");
    assert_eq!(std::fs::read(&old).unwrap(), before, "nothing written");
}

#[test]
fn import_lines_up_to_the_limit_are_read_and_longer_ones_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = library_database(dir.path());
    let db = db.to_str().unwrap();
    let limit = 64 << 20; // import::LINE_BYTES_MAX
    let record = r#"{"name": "padded", "age": 9}"#;
    let mut text = String::with_capacity(2 * limit + 100);
    text.push_str(record);
    text.push_str(&" ".repeat(limit - record.len()));
    text.push('\n');
    text.push_str(r#"{"name": "too long", "age": 9}"#);
    text.push_str(&" ".repeat(limit));
    text.push('\n');
    text.push_str(r#"{"name": "after", "age": 9}"#);
    let input = dir.path().join("long.jsonl");
    std::fs::write(&input, text).unwrap();
    let (status, out, err) = run(&["import", db, "people", input.to_str().unwrap()]);
    assert_eq!(status, 1, "{out}{err}");
    assert_eq!(out.trim(), "imported 2, rejected 1");
    assert!(err.starts_with(&format!("line 2: longer than {limit} bytes")), "{err}");
    assert_eq!(run(&["get", db, "people", "padded"]).0, 0);
    assert_eq!(run(&["get", db, "people", "after"]).0, 0);
}

#[test]
fn a_failed_import_into_a_new_file_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("records.jsonl");
    std::fs::write(&input, r#"{"name": "a"}"#).unwrap();
    let target = dir.path().join("new.tessera");
    let (status, _, err) = run(&["import", target.to_str().unwrap(), "people", input.to_str().unwrap()]);
    assert_eq!(status, 2, "{err}");
    assert!(!target.exists());
    assert!(!dir.path().join("new.tessera-lock").exists());
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Record)]
#[record(name = "counters")]
struct Counter {
    #[record(key)]
    id: u64,
    count: i64,
}

#[test]
fn an_empty_collection_with_an_integer_key_exports_its_width_and_imports() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.tessera");
    let db = tessera::Db::open(&path).unwrap();
    drop(db.collection::<Counter>().unwrap());
    db.close().unwrap();
    let export = dir.path().join("empty.jsonl");
    assert_eq!(run(&["export", path.to_str().unwrap(), "-o", export.to_str().unwrap()]).0, 0);
    let target = dir.path().join("target.tessera");
    let (status, out, err) = run(&["import", target.to_str().unwrap(), "counters", export.to_str().unwrap()]);
    assert_eq!(status, 0, "{err}");
    assert_eq!(out.trim(), "imported 0, rejected 0");
    // The header gives the key's width (the stored shape says `u64`, with no record to learn
    // it from), so a record after it is stored, and reads back typed.
    let mut text = std::fs::read_to_string(&export).unwrap();
    text.push_str("{\"id\": 1, \"count\": 2}\n");
    std::fs::write(&export, text).unwrap();
    let (status, out, err) = run(&["import", target.to_str().unwrap(), "counters", export.to_str().unwrap()]);
    assert_eq!(status, 0, "{err}");
    assert_eq!(out.trim(), "imported 1, rejected 0");
    let db = tessera::Db::open(&target).unwrap();
    assert_eq!(db.collection::<Counter>().unwrap().get(&db, &1u64).unwrap(), Some(Counter { id: 1, count: 2 }));
}

#[test]
fn an_export_to_a_fifo_is_written_in_place() {
    // `export -o /dev/null` renamed its temporary file over the device; a FIFO stands in for it.
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let db = tour_copy(dir.path());
    let fifo = dir.path().join("export.fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let reading = fifo.clone();
    let reader = std::thread::spawn(move || std::fs::read_to_string(reading).unwrap());
    let (status, _, err) = run(&["export", db.to_str().unwrap(), "-o", fifo.to_str().unwrap()]);
    assert_eq!(status, 0, "{err}");
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "the FIFO is still a FIFO");
    assert!(reader.join().unwrap().lines().count() > 1, "the reader got the export");
}

/// A background index build that fails (here: a multi-entry index added over a record with
/// more array elements than one record may index) shows in `info` and `schema` from another
/// process, with its reason: the reason is kept in the stored schema.
#[test]
fn info_and_schema_show_why_an_index_build_failed() {
    #[derive(Record)]
    #[record(name = "posts")]
    struct PostBefore {
        #[record(key)]
        id: u32,
        tags: Vec<u32>,
    }
    #[derive(Record)]
    #[record(name = "posts")]
    struct Post {
        #[record(key)]
        id: u32,
        #[record(index_elements)]
        tags: Vec<u32>,
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("failed-index.tessera");
    {
        let db = tessera::Db::open(&path).unwrap();
        let posts = db.collection::<PostBefore>().unwrap();
        let too_many = PostBefore { id: 1, tags: (0..=tessera::collection::ELEMENT_ENTRIES_MAX as u32).collect() };
        db.write(|tx| posts.insert(tx, &too_many)).unwrap();
    }
    {
        let db = tessera::Db::open(&path).unwrap();
        let posts = db.collection::<Post>().unwrap();
        assert!(!posts.wait_for_indexes(std::time::Duration::from_secs(30)), "the build cannot succeed");
        assert!(posts.index_failure("tags[]").is_some(), "reported once the stored schema has it");
        // Dropped, not closed: the build's thread may still hold the database for a moment.
    }
    let (status, out, err) = run(&["info", path.to_str().unwrap()]);
    assert_eq!(status, 0, "{err}");
    assert!(out.contains("tags[] (failed: "), "{out}");
    let (status, out, err) = run(&["info", "--json", path.to_str().unwrap()]);
    assert_eq!(status, 0, "{err}");
    let index = &json(&out)["collections"][0]["indexes"][0];
    assert_eq!(index["state"], "failed", "{out}");
    assert!(
        index["failure"].as_str().is_some_and(|reason| reason.contains(&tessera::collection::ELEMENT_ENTRIES_MAX.to_string())),
        "{out}"
    );
    let (status, out, err) = run(&["schema", path.to_str().unwrap(), "posts"]);
    assert_eq!(status, 0, "{err}");
    assert!(out.contains("failed: "), "{out}");
}
