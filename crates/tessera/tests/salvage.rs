//! Issue 15, item 3: a salvage export that reads every readable record of a damaged file.
//!
//! What was missing: a file whose LMDB structure is damaged could crash any reader that opens
//! it through LMDB, and the only recovery was a copy. `collection::salvage` reads the pages
//! from the file's bytes (`store::structure::read_entries`), never through LMDB, and returns
//! only records that prove themselves. These tests run it in this process on damage that
//! crashes LMDB, and on randomly damaged copies: it never panics, and every record it returns
//! is byte for byte one that was written.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use tessera::collection::{DynRecord, DynSchema, Record, SalvageSink, salvage};
use tessera::store::structure::{self, StructureDamage, Tree};
use tessera::{Db, DbOptions, Error};

const PAGE_BYTES: usize = 4096;
const NOTES: &str = "tessera.col.notes";

#[derive(serde::Serialize, serde::Deserialize, Record, Debug, PartialEq)]
#[record(name = "notes")]
struct Note {
    #[record(key)]
    id: u32,
    #[record(index)]
    title: String,
    body: String,
}

fn note(id: u32) -> Note {
    // Every 97th note is larger than a page: its value lives in an overflow run.
    let body = if id.is_multiple_of(97) { "long ".repeat(1_500) } else { format!("body of {id}") };
    Note { id, title: format!("note {}", id % 50), body }
}

/// A database of `count` notes, written without the write map so that the file is its used
/// pages; its lock file removed.
fn written(dir: &Path, count: u32) -> PathBuf {
    let path = dir.join("notes.tessera");
    let db = Db::open_with(&path, DbOptions { write_map: false, ..DbOptions::default() }).unwrap();
    let notes = db.collection::<Note>().unwrap();
    db.write(|tx| (0..count).try_for_each(|id| notes.insert(tx, &note(id)).map(drop))).unwrap();
    drop(notes);
    db.close().unwrap();
    let mut lock = path.as_os_str().to_owned();
    lock.push("-lock");
    std::fs::remove_file(lock).unwrap();
    path
}

/// Each record handed over, as (collection, key, document bytes); each header's count.
#[derive(Default)]
struct Collected {
    headers: Vec<(String, DynSchema, u64)>,
    records: Vec<(String, Vec<u8>, Vec<u8>)>,
}

impl SalvageSink for Collected {
    fn section(&mut self, collection: &str, schema: &DynSchema, records: u64) -> tessera::Result<()> {
        self.headers.push((collection.to_owned(), schema.clone(), records));
        Ok(())
    }

    fn record(&mut self, record: &DynRecord) -> tessera::Result<()> {
        let collection = self.headers.last().expect("a header first").0.clone();
        self.records.push((collection, record.key_bytes().to_vec(), record.bytes().to_vec()));
        Ok(())
    }
}

/// Every record of the intact file at `path`, read through LMDB: key to document bytes.
fn through_lmdb(path: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::open_with(path, DbOptions { read_only: true, ..DbOptions::default() }).unwrap();
    let notes = db.dyn_collection("notes").unwrap();
    let mut records = BTreeMap::new();
    notes
        .all()
        .for_each(&db, |record| {
            records.insert(record.key_bytes().to_vec(), record.bytes().to_vec());
            Ok(true)
        })
        .unwrap();
    records
}

/// The pages of `keyspace`'s leaves, with the keys each holds.
fn leaf_pages(path: &Path, keyspace: &str) -> BTreeMap<u64, Vec<Vec<u8>>> {
    let mut pages: BTreeMap<u64, Vec<Vec<u8>>> = BTreeMap::new();
    let report = structure::read_entries(path, &|name| name == keyspace, &mut |entry| {
        pages.entry(entry.page).or_default().push(entry.key.to_vec());
    })
    .unwrap();
    assert!(report.is_ok(), "{report}");
    pages
}

fn damage(path: &Path, name: &str, at: usize, bytes: &[u8]) -> PathBuf {
    let mut copy = std::fs::read(path).unwrap();
    copy[at..at + bytes.len()].copy_from_slice(bytes);
    let damaged = path.with_file_name(name);
    std::fs::write(&damaged, copy).unwrap();
    damaged
}

#[test]
fn an_intact_file_salvages_every_record_as_lmdb_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 2_000);
    let expected = through_lmdb(&path);
    let mut collected = Collected::default();
    let report = salvage(&path, &[], &mut collected).unwrap();
    assert!(report.is_complete(), "{:?}", report.skipped);
    assert_eq!(report.collections, [("notes".to_owned(), 2_000)]);
    let db = Db::open_with(&path, DbOptions { read_only: true, ..DbOptions::default() }).unwrap();
    let schema = db.dyn_collection("notes").unwrap().schema().clone();
    assert_eq!(collected.headers, [("notes".to_owned(), schema, 2_000)], "the header is the one a normal export writes");
    let salvaged: BTreeMap<Vec<u8>, Vec<u8>> = collected.records.into_iter().map(|(_, key, bytes)| (key, bytes)).collect();
    assert_eq!(salvaged, expected);
}

#[test]
fn damage_that_crashes_lmdb_is_salvaged_around_in_process() {
    // The damage of tests/structure_damage.rs, which kills a process that reads it through
    // LMDB: a leaf page's first node offset past the page's end, and a branch page whose
    // `lower` claims 2,000 nodes.
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 2_000);
    let expected = through_lmdb(&path);
    let pages = leaf_pages(&path, NOTES);
    let (&leaf, keys) = pages.iter().nth(pages.len() / 2).unwrap();
    let node_offset = damage(&path, "node-offset", leaf as usize * PAGE_BYTES + 16, &0xFFF0u16.to_ne_bytes());
    let mut collected = Collected::default();
    let report = salvage(&node_offset, &[], &mut collected).unwrap();
    assert!(!report.is_complete());
    let problem = &report.structure.problems[0];
    assert_eq!((&problem.tree, problem.page), (&Tree::Keyspace(NOTES.into()), leaf), "{}", report.structure);
    assert_eq!(problem.damage, StructureDamage::NodeOffset { node: 0, offset: 0xFFF0 });
    // Only the first node of that page is lost: node 0 is the page's first key.
    let salvaged: BTreeMap<Vec<u8>, Vec<u8>> = collected.records.into_iter().map(|(_, key, bytes)| (key, bytes)).collect();
    let mut missing = expected.clone();
    missing.retain(|key, _| !salvaged.contains_key(key));
    assert_eq!(missing.into_keys().collect::<Vec<_>>(), [keys[0].clone()]);
    assert!(salvaged.iter().all(|(key, bytes)| expected.get(key) == Some(bytes)));

    let bytes = std::fs::read(&path).unwrap();
    let branch = (2..bytes.len() / PAGE_BYTES)
        .find(|&page| u16::from_ne_bytes([bytes[page * PAGE_BYTES + 10], bytes[page * PAGE_BYTES + 11]]) == 0x01)
        .expect("a branch page");
    let branch_header = damage(&path, "branch-header", branch * PAGE_BYTES + 12, &(16u16 + 2 * 2000).to_ne_bytes());
    let mut collected = Collected::default();
    let report = salvage(&branch_header, &[], &mut collected).unwrap();
    assert!(!report.is_complete());
    assert!(report.structure.problems.iter().any(|problem| problem.page == branch as u64), "{}", report.structure);
    assert!(collected.records.iter().all(|(_, key, bytes)| expected.get(key) == Some(bytes)));
}

#[test]
fn a_damaged_meta_page_is_read_around() {
    // LMDB refuses a file with either meta page damaged; the salvage reads the commit the
    // other one names (the one before the newest, when the newest is damaged: LMDB reuses no
    // page of it before the next commit), and reports the damaged one.
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 500);
    // Two commits after the notes', so that both meta pages name a commit that holds them.
    let db = Db::open_with(&path, DbOptions { write_map: false, ..DbOptions::default() }).unwrap();
    let other = db.keyspace("other").unwrap();
    db.write(|tx| tx.put(&other, b"a", b"1")).unwrap();
    db.write(|tx| tx.put(&other, b"b", b"2")).unwrap();
    db.close().unwrap();
    let expected = through_lmdb(&path);
    let mut commits = BTreeSet::new();
    for meta in [0u64, 1] {
        // The page's flags and the meta body's magic.
        let at = meta as usize * PAGE_BYTES;
        let damaged = damage(&path, &format!("meta-{meta}"), at + 8, &[0xFF; 16]);
        assert!(matches!(Db::open(&damaged), Err(Error::NotADatabase { .. })));
        let mut collected = Collected::default();
        let report = salvage(&damaged, &[], &mut collected).unwrap();
        let problems: Vec<(u64, &StructureDamage)> =
            report.structure.problems.iter().map(|problem| (problem.page, &problem.damage)).collect();
        assert_eq!(problems, [(meta, &StructureDamage::MetaPage)]);
        commits.insert(report.structure.txn_id);
        let salvaged: BTreeMap<Vec<u8>, Vec<u8>> = collected.records.into_iter().map(|(_, key, bytes)| (key, bytes)).collect();
        assert!(salvaged == expected, "meta page {meta}: {} records of {}", salvaged.len(), expected.len());
    }
    assert_eq!(commits.len(), 2, "each damaged meta page leaves the other one's commit");
    // Both: not a database.
    let both = damage(&damage(&path, "meta-0", 8, &[0xFF; 16]), "meta-both", PAGE_BYTES + 8, &[0xFF; 16]);
    assert!(matches!(salvage(&both, &[], &mut Collected::default()), Err(Error::NotADatabase { .. })));
}

#[test]
fn random_damage_never_panics_and_every_salvaged_record_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 400);
    let expected = through_lmdb(&path);
    let bytes = std::fs::read(&path).unwrap();
    let copy = dir.path().join("random");
    let mut random = fastrand::Rng::with_seed(315);
    let (mut incomplete, mut records) = (0, 0);
    let rounds = 150;
    for round in 0..rounds {
        let mut damaged = bytes.clone();
        for _ in 0..random.usize(1..4) {
            let page = random.usize(0..bytes.len() / PAGE_BYTES);
            // Mostly where LMDB's structure lives: headers, node offsets, node headers.
            let at = page * PAGE_BYTES + if random.bool() { random.usize(0..64) } else { random.usize(0..PAGE_BYTES - 8) };
            for byte in &mut damaged[at..at + random.usize(1..9)] {
                *byte = if random.bool() { random.u8(..) } else { *byte ^ 0xFF };
            }
        }
        std::fs::write(&copy, &damaged).unwrap();
        let mut collected = Collected::default();
        match salvage(&copy, &[], &mut collected) {
            Ok(report) => {
                incomplete += usize::from(!report.is_complete());
                for (collection, key, bytes) in &collected.records {
                    assert_eq!(collection, "notes", "round {round}");
                    assert_eq!(expected.get(key), Some(bytes), "round {round}: a record that was never written");
                }
                records += collected.records.len();
            }
            Err(Error::NotADatabase { .. } | Error::ForeignDatabase { .. } | Error::UnsupportedVersion { .. }) => incomplete += 1,
            Err(Error::SalvageFormat { .. }) => incomplete += 1,
            Err(other) => panic!("round {round}: {other:?}"),
        }
    }
    assert!(incomplete > rounds / 4, "only {incomplete} of {rounds} damaged copies reported damage");
    assert!(records > rounds * 200, "only {records} records salvaged over {rounds} copies");
}

#[test]
fn named_collections_and_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 10);
    let mut collected = Collected::default();
    let error = salvage(&path, &["missing".to_owned()], &mut collected).unwrap_err();
    assert!(matches!(error, Error::NoSuchCollection { ref collection } if collection == "missing"), "{error:?}");
    let report = salvage(&path, &["notes".to_owned()], &mut collected).unwrap();
    assert_eq!(report.collections, [("notes".to_owned(), 10)]);

    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    assert!(matches!(salvage(&empty, &[], &mut Collected::default()), Err(Error::NotADatabase { .. })));
    let foreign = dir.path().join("foreign");
    std::fs::write(&foreign, "not a database\n".repeat(1_000)).unwrap();
    assert!(matches!(salvage(&foreign, &[], &mut Collected::default()), Err(Error::NotADatabase { .. })));

    // Cut in half: the pages past the end are reported, the ones before it salvaged.
    let bytes = std::fs::read(&path).unwrap();
    let truncated = dir.path().join("truncated");
    std::fs::write(&truncated, &bytes[..bytes.len() / PAGE_BYTES / 2 * PAGE_BYTES]).unwrap();
    let report = salvage(&truncated, &[], &mut Collected::default()).unwrap();
    let past_end = report.structure.problems.iter().any(|problem| matches!(problem.damage, StructureDamage::PastEndOfFile { .. }));
    assert!(past_end, "{}", report.structure);
    let names: BTreeSet<&str> = report.collections.iter().map(|(name, _)| name.as_str()).collect();
    assert!(names.len() <= 1);
}
