//! The `tessera` binary, run as a user would.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn tessera(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tessera runs");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn json_to_binary_and_back_through_files_and_pipes() {
    let dir = std::env::temp_dir().join(format!("tessera-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json_path = dir.join("in.json");
    let bin_path = dir.join("out.bin");
    std::fs::write(&json_path, br#"{"b": [1, 2.5, "x"], "a": null}"#).unwrap();

    let out = tessera(&["json2bin", json_path.to_str().unwrap(), bin_path.to_str().unwrap()], b"");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = tessera(&["bin2json", bin_path.to_str().unwrap()], b"");
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "{\"b\":[1,2.5,\"x\"],\"a\":null}\n");
    let out = tessera(&["bin2json", "--canonical", bin_path.to_str().unwrap()], b"");
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "{\"a\":null,\"b\":[1,2.5,\"x\"]}\n");

    // stdin to stdout, then pretty from stdin
    let binary = tessera(&["json2bin", "-", "-"], b"[true, {\"k\": \"v\"}]");
    assert!(binary.status.success());
    let out = tessera(&["bin2json", "--pretty", "-"], &binary.stdout);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "[\n  true,\n  {\n    \"k\": \"v\"\n  }\n]\n");

    let out = tessera(&["validate", bin_path.to_str().unwrap()], b"");
    assert_eq!(out.status.code(), Some(0));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn malformed_input_exits_1_with_the_error() {
    let out = tessera(&["json2bin", "-", "-"], b"[1,\n 01]");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid number at line 2 column 3"));
    assert!(out.stdout.is_empty());

    // A document whose bytes are damaged is invalid data.
    let mut document = tessera_value::from_json(br#"{"name": "Ada", "tags": ["a", "b"]}"#).unwrap();
    let last = document.len() - 1;
    document.truncate(last);
    let out = tessera(&["validate", "-"], &document);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid"));
}

#[test]
fn a_file_that_is_not_a_document_exits_1_with_its_first_bytes() {
    // Invalid, as a damaged document is: a document cut short ends in any byte.
    let out = tessera(&["validate", "-"], b"definitely not a document");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a tessera document: - (starts with 64 65 66 69 \u{2026})"));
    let out = tessera(&["bin2json", "-"], b"\x00");
    assert!(matches!(out.status.code(), Some(1 | 3)), "{out:?}");
}

#[test]
fn missing_file_exits_3() {
    let out = tessera(&["validate", "/nonexistent/file.bin"], b"");
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"));
}

#[test]
fn documents_with_shared_keys_need_their_table() {
    let dir = std::env::temp_dir().join(format!("tessera-cli-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut keys = tessera_value::SharedKeys::new();
    keys.add("name").unwrap();
    let record = tessera_value::to_vec_with_keys(&std::collections::BTreeMap::from([("name", "Ada")]), &keys).unwrap();
    let (record_path, keys_path) = (dir.join("record.bin"), dir.join("keys.bin"));
    std::fs::write(&record_path, &record).unwrap();
    std::fs::write(&keys_path, keys.to_bytes()).unwrap();
    let (record_path, keys_path) = (record_path.to_str().unwrap(), keys_path.to_str().unwrap());

    let out = tessera(&["bin2json", "--keys", keys_path, record_path], b"");
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "{\"name\":\"Ada\"}\n");
    let out = tessera(&["validate", "--keys", keys_path, record_path], b"");
    assert_eq!(out.status.code(), Some(0));
    // Without the table, the document is refused with a reason, not printed wrong.
    let out = tessera(&["validate", record_path], b"");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("shared keys"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = tessera(&["bin2json", "--keys", record_path, record_path], b"");
    assert_eq!(out.status.code(), Some(1));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A database with a collection-like spread of raw values, closed.
fn database(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("checked.tessera");
    let db = tessera::Db::open(&path).unwrap();
    let notes = db.keyspace("notes").unwrap();
    db.write(|tx| (0..2000u32).try_for_each(|i| tx.put(&notes, &i.to_be_bytes(), format!("note {i}").as_bytes()))).unwrap();
    db.close().unwrap();
    path
}

#[test]
fn check_reports_a_sound_file_and_a_damaged_value() {
    let dir = tempfile_dir("check");
    let path = database(&dir);
    let file = path.to_str().unwrap();
    let out = tessera(&["check", file], b"");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("0 problems"));

    // Flip one byte of a stored value ("note 1234" is in the file as it is).
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.windows(9).position(|window| window == b"note 1234").unwrap();
    bytes[at] ^= 0x20;
    std::fs::write(&path, &bytes).unwrap();
    let out = tessera(&["check", file], b"");
    assert_eq!(out.status.code(), Some(1));
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("notes [000004d2]: the stored value fails its checksum"), "{report}");
}

#[test]
fn check_reports_damage_that_would_crash_lmdb_without_running_lmdb_on_it() {
    // Damaged page headers make LMDB read past its pages (SIGSEGV in the damage sweep). The
    // command walks the file's structure before LMDB opens it, so such damage is a report and
    // exit status 1; the child process that runs the check is never killed by it (it was,
    // and the command only contained the crash).
    let dir = tempfile_dir("crash");
    let original = std::fs::read(database(&dir)).unwrap();
    let path = dir.join("damaged.tessera");
    let mut found_by_the_walk = 0;
    for page in 2..original.len() / 4096 {
        let mut bytes = original.clone();
        let at = page * 4096 + 40;
        if bytes[page * 4096..(page + 1) * 4096].iter().all(|&b| b == 0) {
            break; // past the last used page
        }
        bytes[at..at + 8].iter_mut().for_each(|b| *b ^= 0xFF);
        std::fs::write(&path, &bytes).unwrap();
        let _ = std::fs::remove_file(dir.join("damaged.tessera-lock"));
        let out = tessera(&["check", path.to_str().unwrap()], b"");
        // (A page LMDB no longer uses, a free or an old copy, may be damaged harmlessly.)
        assert!(matches!(out.status.code(), Some(0 | 1)), "page {page}: {out:?}");
        assert!(!String::from_utf8_lossy(&out.stderr).contains("killed by signal"), "page {page}: LMDB crashed in the check");
        if String::from_utf8_lossy(&out.stdout).contains("LMDB structure damaged") {
            found_by_the_walk += 1;
        }
    }
    assert!(found_by_the_walk > 0, "no damaged page was found by the structure walk");
}

fn tempfile_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tessera-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A FIFO at `path` (made with `mkfifo`), and a thread that reads everything written to it.
fn fifo_with_reader(path: &std::path::Path) -> std::thread::JoinHandle<Vec<u8>> {
    let made = Command::new("mkfifo").arg(path).status().expect("mkfifo runs");
    assert!(made.success(), "mkfifo {}", path.display());
    let path = path.to_owned();
    std::thread::spawn(move || std::fs::read(&path).unwrap())
}

#[test]
fn output_to_a_device_or_fifo_is_written_in_place_not_replaced() {
    // Output went to a temporary file renamed over the target, so `json2bin in.json /dev/null`
    // as root replaced /dev/null with a regular file (every later `> /dev/null` on the machine
    // then wrote into it, and every read of it returned that text). A FIFO stands in for the
    // device here: it must still be a FIFO, and its reader must get the bytes.
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("in.json");
    std::fs::write(&json_path, b"[1, 2]").unwrap();
    let fifo = dir.path().join("fifo");
    let reader = fifo_with_reader(&fifo);
    let out = tessera(&["json2bin", json_path.to_str().unwrap(), fifo.to_str().unwrap()], b"");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Checked before the reader is joined: a replaced FIFO never gets a writer.
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "the FIFO is still a FIFO");
    let read = reader.join().unwrap();
    assert!(!read.is_empty(), "the FIFO's reader got the document");
}
