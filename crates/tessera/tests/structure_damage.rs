//! Issue 15, item 3: LMDB's own damage.
//!
//! What broke: LMDB trusts its pages. A damaged page header or node offset made it read outside
//! the page and the process died inside LMDB (`SIGSEGV` in `mdb_node_search`, …): through the
//! read API on 98 of the damage sweep's 540 copies, and inside `Db::check` itself on 2. Now
//! `store::structure` walks the pages from the file's bytes first: `Db::check` reports such
//! damage by keyspace and page without handing that keyspace to LMDB, and
//! `DbOptions::verify_structure_on_open` refuses the file at open, writing nothing.
//!
//! `Db::check` on a damaged file runs in a child process (this test binary, one ignored test),
//! so that a crash inside LMDB fails the test instead of killing the harness.

use std::path::{Path, PathBuf};
use std::process::Command;
use tessera::store::structure::{self, StructureDamage, Tree};
use tessera::{Db, DbOptions, Error};

const PAGE_BYTES: usize = 4096;
/// The page flags LMDB writes (`P_BRANCH`, `P_LEAF`).
const BRANCH: u16 = 0x01;
const LEAF: u16 = 0x02;
/// The environment variable naming the file the child checks.
const CHILD_PATH: &str = "TESSERA_STRUCTURE_CHILD_PATH";

fn lock_file(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-lock");
    PathBuf::from(name)
}

/// A database whose keyspace `data` holds 5,000 entries (a tree of two levels or more), written
/// without the write map so that the file is exactly its used pages. It is the only tree with
/// branch pages.
fn written_database(path: &Path) {
    let db = Db::open_with(path, DbOptions { write_map: false, ..DbOptions::default() }).unwrap();
    let ks = db.keyspace("data").unwrap();
    db.write(|tx| (0..5_000u32).try_for_each(|i| tx.put(&ks, &i.to_be_bytes(), &[i as u8; 60]))).unwrap();
    db.close().unwrap();
    std::fs::remove_file(lock_file(path)).unwrap();
}

fn flags(bytes: &[u8], page: usize) -> u16 {
    u16::from_ne_bytes([bytes[page * PAGE_BYTES + 10], bytes[page * PAGE_BYTES + 11]])
}

/// The first page (after the metas) whose flags are `kind` and that holds more than `nodes`
/// nodes.
fn page_of_kind(bytes: &[u8], kind: u16, nodes: u16) -> usize {
    let node_count = |page: usize| (u16::from_ne_bytes([bytes[page * PAGE_BYTES + 12], bytes[page * PAGE_BYTES + 13]]) - 16) / 2;
    (2..bytes.len() / PAGE_BYTES).find(|&page| flags(bytes, page) == kind && node_count(page) > nodes).expect("such a page")
}

/// The two kinds of damage: a branch page whose `lower` claims 2,000 node offsets (LMDB's
/// binary search then reads node offsets from the free space and nodes from anywhere), and a
/// leaf page whose first node offset points past the page's end.
fn damaged_copies(dir: &Path) -> Vec<(&'static str, PathBuf, usize)> {
    let original = dir.join("original");
    written_database(&original);
    let bytes = std::fs::read(&original).unwrap();
    let branch = page_of_kind(&bytes, BRANCH, 1);
    let leaf = page_of_kind(&bytes, LEAF, 10);
    let cases: [(&str, usize, usize, [u8; 2]); 2] =
        [("branch header", branch, 12, (16u16 + 2 * 2000).to_ne_bytes()), ("leaf node offset", leaf, 16, 0xFFF0u16.to_ne_bytes())];
    cases
        .into_iter()
        .map(|(name, page, at, damage)| {
            let mut copy = bytes.clone();
            copy[page * PAGE_BYTES + at..page * PAGE_BYTES + at + 2].copy_from_slice(&damage);
            let path = dir.join(name.replace(' ', "-"));
            std::fs::write(&path, copy).unwrap();
            (name, path, page)
        })
        .collect()
}

/// The child: opens the file with the default options, runs `Db::check` and prints the report.
#[test]
#[ignore = "run by check_reports_lmdb_damage_in_process_without_crashing as a child process"]
fn check_child() {
    let path = std::env::var(CHILD_PATH).expect("run by the structure damage tests");
    let db = Db::open(&path).unwrap();
    let report = db.check().unwrap();
    println!("report: {}", report.to_string().replace('\n', " | "));
}

#[test]
fn check_reports_lmdb_damage_in_process_without_crashing() {
    let dir = tempfile::tempdir().unwrap();
    for (name, path, page) in damaged_copies(dir.path()) {
        let output = Command::new(std::env::current_exe().unwrap())
            .args(["check_child", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
            .env(CHILD_PATH, &path)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{name}: the check failed or crashed ({:?}): {stdout}", output.status);
        let report = stdout
            .lines()
            .find_map(|line| line.split_once("report: ").map(|(_, report)| report))
            .unwrap_or_else(|| panic!("{name}: no report: {stdout}"));
        assert!(report.contains(&format!("data []: page {page}:")), "{name}: the report does not name page {page} of data: {report}");
    }
}

#[test]
fn a_verified_open_refuses_lmdb_damage_and_leaves_the_file_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    for (name, path, page) in damaged_copies(dir.path()) {
        let before = std::fs::read(&path).unwrap();
        for write_map in [true, false] {
            let options = DbOptions { verify_structure_on_open: true, write_map, ..DbOptions::default() };
            match Db::open_with(&path, options) {
                Err(Error::Corrupted(message)) => {
                    assert!(message.contains(&format!("keyspace \"data\", page {page}:")), "{name}: {message}")
                }
                Err(other) => panic!("{name}: {other:?}"),
                Ok(_) => panic!("{name}: opened"),
            }
            let after = std::fs::read(&path).unwrap();
            assert!(after == before, "{name}: the file changed (write_map {write_map})");
            assert!(!lock_file(&path).exists(), "{name}: a lock file was left");
        }
    }
    // The undamaged file opens verified, and holds its data.
    let original = dir.path().join("original");
    let db = Db::open_with(&original, DbOptions { verify_structure_on_open: true, ..DbOptions::default() }).unwrap();
    let ks = db.keyspace("data").unwrap();
    assert_eq!(db.read(|tx| tx.len(&ks)).unwrap(), 5_000);
}

#[test]
fn the_walk_names_the_damaged_page_and_its_keyspace() {
    let dir = tempfile::tempdir().unwrap();
    let copies = damaged_copies(dir.path());
    assert!(structure::verify(dir.path().join("original")).unwrap().is_ok());
    for (name, path, page) in copies {
        let report = structure::verify(&path).unwrap();
        let problem = report.problems.first().unwrap_or_else(|| panic!("{name}: nothing found"));
        assert_eq!((&problem.tree, problem.page), (&Tree::Keyspace("data".into()), page as u64), "{name}: {report}");
        let expected = match name {
            "branch header" => StructureDamage::Bounds { lower: 16 + 2 * 2000, upper: problem_upper(&path, page) },
            _ => StructureDamage::NodeOffset { node: 0, offset: 0xFFF0 },
        };
        assert_eq!(problem.damage, expected, "{name}");
    }
}

/// The `upper` bound of `page` in the file at `path`.
fn problem_upper(path: &Path, page: usize) -> u16 {
    let bytes = std::fs::read(path).unwrap();
    u16::from_ne_bytes([bytes[page * PAGE_BYTES + 14], bytes[page * PAGE_BYTES + 15]])
}
