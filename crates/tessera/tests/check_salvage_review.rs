//! Review of checking, salvaging and migrating database files (2026-11-30): `Db::check`
//! reports every kind of damage it claims to find, naming keyspace and key, and never a sound
//! file; a salvage recovers every intact record and reports the rest; a migration gives the
//! same records or a typed error.

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tessera::collection::{DynRecord, DynSchema, Record, SalvageSink, salvage};
use tessera::{CheckReport, Db, DbOptions, Error};

#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "people")]
struct Person {
    #[record(key)]
    id: u32,
    #[record(index)]
    age: u32,
    #[record(unique)]
    email: String,
}

fn person(id: u32) -> Person {
    Person { id, age: 20 + id % 7, email: format!("p{id}@example.com") }
}

const PEOPLE: &str = "tessera.col.people";
const PEOPLE_INDEX: &str = "tessera.idx.people";

/// A file of `count` people and a raw keyspace, closed, without its lock file.
fn written(dir: &Path, count: u32) -> PathBuf {
    let path = dir.join("people.tessera");
    let db = Db::open_with(&path, DbOptions { write_map: false, ..DbOptions::default() }).unwrap();
    let people = db.collection::<Person>().unwrap();
    db.write(|tx| (0..count).try_for_each(|id| people.insert(tx, &person(id)).map(drop))).unwrap();
    let raw = db.keyspace("raw").unwrap();
    db.write(|tx| tx.put(&raw, b"k", b"value")).unwrap();
    drop((people, raw));
    db.close().unwrap();
    let _ = std::fs::remove_file(lock_file(&path));
    path
}

fn lock_file(path: &Path) -> PathBuf {
    let mut lock = path.as_os_str().to_owned();
    lock.push("-lock");
    PathBuf::from(lock)
}

/// A copy of `path` named `name` beside it.
fn copy_of(path: &Path, name: &str) -> PathBuf {
    let copy = path.with_file_name(name);
    std::fs::copy(path, &copy).unwrap();
    copy
}

/// `value` with its checksum, as tessera stores it under `key` (docs/storage.md, "Values").
fn sealed(key: &[u8], value: &[u8]) -> Vec<u8> {
    use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};
    let checksum = (xxh3_64_with_seed(value, xxh3_64(key)) as u32).to_le_bytes();
    [value, &checksum].concat()
}

/// Every entry of keyspace `name`, as stored, read from the file's pages.
fn entries(path: &Path, name: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    let report = tessera::store::structure::read_entries(path, &|keyspace| keyspace == name, &mut |entry| {
        out.push((entry.key.to_vec(), entry.value.to_vec()));
    })
    .unwrap();
    assert!(report.is_ok(), "{report}");
    out
}

/// Rewrites, in the file's bytes, the value stored under `key` in `keyspace` as `edit` changes
/// it (keeping its length), with a sound checksum: damage no checksum can see.
fn rewrite_value(path: &Path, keyspace: &str, key: &[u8], edit: impl FnOnce(&mut Vec<u8>)) {
    let (_, stored) = entries(path, keyspace).into_iter().find(|(found, _)| found == key).expect("the value to rewrite");
    let mut value = stored[..stored.len() - 4].to_vec();
    edit(&mut value);
    replace_bytes(path, &stored, &sealed(key, &value));
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn report_of(path: &Path) -> CheckReport {
    let db = Db::open(path).unwrap();
    let report = db.check().unwrap();
    db.close().unwrap();
    report
}

/// Whether `report` has a problem in `keyspace` whose key (hex) is `key` and whose text holds
/// `what`.
fn has_problem(report: &CheckReport, keyspace: &str, key: &str, what: &str) -> bool {
    report.problems.iter().any(|problem| problem.keyspace == keyspace && problem.key == key && problem.what.contains(what))
}

/// Replaces every occurrence of `from` in the file's bytes by `to` (as long), as damage to one
/// byte of a name in LMDB's main tree would.
fn replace_bytes(path: &Path, from: &[u8], to: &[u8]) {
    assert_eq!(from.len(), to.len());
    let mut bytes = std::fs::read(path).unwrap();
    let mut found = 0;
    for at in 0..bytes.len() - from.len() {
        if &bytes[at..at + from.len()] == from {
            bytes[at..at + to.len()].copy_from_slice(to);
            found += 1;
        }
    }
    assert!(found > 0, "{}", String::from_utf8_lossy(from));
    std::fs::write(path, bytes).unwrap();
}

/// Changes the format version record of `tessera.meta` (which has no checksum) from `from`
/// to `to`, in the file's bytes (a leaf node's data follows its key).
fn set_version(path: &Path, from: u32, to: u32) {
    let record = |version: u32| [&b"format_version"[..], &version.to_be_bytes()].concat();
    replace_bytes(path, &record(from), &record(to));
}

// ---- Db::check ----

#[test]
fn check_names_a_record_missing_its_index_entry_and_a_unique_duplicate() {
    // Guards what `Db::check` claims (only "an entry with no record" was tested before):
    // records whose bytes changed under a sound checksum, one to another record's unique
    // email (two holders of one unique value), one to an email no entry has.
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 20);
    assert!(report_of(&path).is_ok());
    let index = entries(&path, PEOPLE_INDEX);
    assert_eq!(index.len(), 40, "an `age` and an `email` entry per record");
    let email_entry = |email: &[u8]| {
        let (entry, _) = index.iter().find(|(entry, _)| entry.windows(email.len()).any(|bytes| bytes == email)).expect("an email's entry");
        hex(entry)
    };
    let replace = |from: &'static [u8], to: &'static [u8]| {
        move |value: &mut Vec<u8>| {
            let at = value.windows(from.len()).position(|bytes| bytes == from).expect("the field's bytes");
            value[at..at + to.len()].copy_from_slice(to);
        }
    };
    rewrite_value(&path, PEOPLE, &4u32.to_be_bytes(), replace(b"p4@example.com", b"p3@example.com"));
    rewrite_value(&path, PEOPLE, &5u32.to_be_bytes(), replace(b"p5@example.com", b"p5@example.org"));
    let report = report_of(&path);
    // Record 4's entry is record 3's.
    assert!(has_problem(&report, PEOPLE_INDEX, &email_entry(b"p3@example.com"), "names another key"), "{report}");
    // Record 5 has no entry for its email; its old entry matches no record's value.
    let missing = report.problems.iter().any(|problem| {
        problem.keyspace == PEOPLE_INDEX
            && problem.what.contains("has no entry for record 00000005")
            && problem.key.contains(&hex(b"p5@example.org"))
    });
    assert!(missing, "{report}");
    assert!(has_problem(&report, PEOPLE_INDEX, &email_entry(b"p5@example.com"), "does not match its record's value"), "{report}");
    assert!(has_problem(&report, PEOPLE_INDEX, &email_entry(b"p4@example.com"), "does not match its record's value"), "{report}");
}

#[test]
fn check_reports_a_damaged_keyspace_name_in_lmdb_main_tree() {
    // Before: one byte of the index keyspace's name in LMDB's main tree (which has no
    // checksum) changed, `tessera.idx.people` to `tessera.idx.peoplz`: the structure walk and
    // every checksum held, `check` reported nothing, and a query through the index (the
    // collection opened a new, empty index keyspace) returned no record.
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 20);
    let damaged = copy_of(&path, "renamed");
    replace_bytes(&damaged, b"tessera.idx.people", b"tessera.idx.peoplz");
    assert!(tessera::store::structure::verify(&damaged).unwrap().is_ok());
    let report = report_of(&damaged);
    assert!(has_problem(&report, PEOPLE, "", "has no index keyspace"), "{report}");
    assert!(has_problem(&report, "tessera.idx.peoplz", "", "of no collection"), "{report}");

    // A name that is not UTF-8 or holds a NUL (read lossily, it named no keyspace that could
    // be opened): the keyspace was passed over, its values never checked, and `check` said
    // the file was sound, read-write and read-only.
    for (case, to) in [("not UTF-8", &b"ra\xFF"[..]), ("a NUL", &b"r\x00w"[..])] {
        let damaged = copy_of(&path, "renamed_raw");
        replace_bytes(&damaged, b"raw", to);
        let shown = String::from_utf8_lossy(to);
        assert!(has_problem(&report_of(&damaged), &shown, "", "name in LMDB's main tree is damaged"), "{case}");
        let db = Db::open_with(&damaged, DbOptions { read_only: true, ..DbOptions::default() }).unwrap();
        assert!(has_problem(&db.check().unwrap(), &shown, "", "name in LMDB's main tree is damaged"), "{case}, read-only");
    }

    // Any other name tessera never makes is damage too.
    let damaged = copy_of(&path, "renamed_keys");
    replace_bytes(&damaged, b"tessera.keys", b"tessera.kezs");
    let report = report_of(&damaged);
    assert!(has_problem(&report, "tessera.kezs", "", "never makes"), "{report}");
}

#[test]
fn check_finds_the_older_formats_sound_after_their_migration_and_salvage_agrees() {
    // Guards the check of keyspace names against false reports on files of every older
    // format (and a read-only format-6 file, read as it is), and a salvage of each migrated
    // file returns every record its collection reads.
    for fixture in ["v1.tessera", "v2.tessera", "v4.tessera", "v6.tessera"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(fixture);
        std::fs::copy(format!("{}/tests/fixtures/{fixture}", env!("CARGO_MANIFEST_DIR")), &path).unwrap();
        if fixture == "v6.tessera" {
            let db = Db::open_with(&path, DbOptions { read_only: true, ..DbOptions::default() }).unwrap();
            let report = db.check().unwrap();
            assert!(report.is_ok(), "{fixture}, read-only: {report}");
            db.close().unwrap();
        }
        let db = Db::open(&path).unwrap();
        let report = db.check().unwrap();
        assert!(report.is_ok(), "{fixture}: {report}");
        let mut through_db = BTreeMap::new();
        for name in db.catalog().unwrap().collections {
            let collection = db.dyn_collection(&name).unwrap();
            let records: &mut Records = through_db.entry(name).or_default();
            collection
                .all()
                .for_each(&db, |record| {
                    records.push((record.key_bytes().to_vec(), record.bytes().to_vec()));
                    Ok(true)
                })
                .unwrap();
        }
        db.close().unwrap();
        let mut salvaged = Collected::default();
        let report = salvage(&path, &[], &mut salvaged).unwrap();
        assert!(report.is_complete(), "{fixture}: {report:?}");
        assert_eq!(salvaged.records, through_db, "{fixture}");
    }
}

/// Records as (key, document bytes).
type Records = Vec<(Vec<u8>, Vec<u8>)>;

/// Each salvaged collection's records.
#[derive(Default)]
struct Collected {
    current: String,
    records: BTreeMap<String, Records>,
}

impl SalvageSink for Collected {
    fn section(&mut self, collection: &str, _: &DynSchema, _: u64) -> tessera::Result<()> {
        self.current = collection.to_owned();
        self.records.entry(collection.to_owned()).or_default();
        Ok(())
    }

    fn record(&mut self, record: &DynRecord) -> tessera::Result<()> {
        let records = self.records.get_mut(&self.current).expect("a section first");
        records.push((record.key_bytes().to_vec(), record.bytes().to_vec()));
        Ok(())
    }
}

#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "posts")]
struct Post {
    #[record(key)]
    id: u32,
    #[record(index_elements)]
    tags: Vec<String>,
    #[record(unique)]
    slug: Option<String>,
    #[record(index)]
    title: String,
    #[record(index)]
    score: f64,
}

/// A post of some variety: repeated and long tags, a missing or long unique slug, long titles
/// sharing a prefix, signed zeros, NaN and infinities.
fn post(id: u32, seed: u32) -> Post {
    let long = |n: u32| "x".repeat(500 + n as usize % 3);
    let tags = (0..seed % 4).map(|t| if t == 2 { long(seed) } else { format!("t{}", (seed + t) % 3) }).collect();
    let slug = match seed % 3 {
        0 => None,
        1 => Some(format!("{}{id}", "s".repeat(600))),
        _ => Some(format!("s{id}")),
    };
    let title = format!("{}{}", "long".repeat(150), seed % 2);
    let score = [0.0, -0.0, f64::NAN, f64::INFINITY, -1.5, 1e300][seed as usize % 6];
    Post { id, tags, slug, title, score }
}

#[test]
fn a_compacted_copy_of_empty_keyspaces_checks_sound() {
    // Guards the check of keyspace names against a false report on a compacted copy (which
    // `tessera compact` checks before it replaces the file): a collection without records and
    // one without indexes keep both their keyspaces.
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    let pets = db.collection::<Pet>().unwrap();
    let people = db.collection::<Person>().unwrap();
    db.write(|tx| pets.insert(tx, &Pet { id: 1, name: "rex".into() }).map(drop)).unwrap();
    db.write(|tx| people.insert(tx, &person(1)).map(drop)).unwrap();
    db.write(|tx| people.delete(tx, &1u32).map(drop)).unwrap();
    let copy = dir.path().join("copy");
    db.copy_compacted(&copy).unwrap();
    let copied = Db::open_with(&copy, DbOptions { read_only: true, ..DbOptions::default() }).unwrap();
    let report = copied.check().unwrap();
    assert!(report.is_ok(), "{report}");
    assert_eq!(copied.catalog().unwrap().collections, ["people", "pets"]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Guards "never reports a sound file as damaged": random writes, updates and deletes of
    /// records with multi-entry, unique, long-string and float indexes, beside a dictionary,
    /// documents and the durable feed with a consumer.
    #[test]
    fn check_never_reports_a_sound_file(ops in prop::collection::vec((0u32..12, 0u32..30, 0u8..3), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open_with(dir.path().join("db"), DbOptions { durable_feed: true, ..DbOptions::default() }).unwrap();
        let posts = db.collection::<Post>().unwrap();
        db.write(|tx| {
            for &(id, seed, op) in &ops {
                match op {
                    0 => posts.delete(tx, &id).map(drop)?,
                    _ => posts.upsert(tx, &post(id, seed)).map(drop)?,
                }
            }
            Ok(())
        })
        .unwrap();
        let dictionary = db.dictionary().unwrap();
        dictionary.set(&"L".repeat(700), &ops.len()).unwrap();
        dictionary.flush().unwrap();
        db.documents("notes").unwrap().document::<BTreeMap<String, u32>>("a").set(&[("n".to_owned(), 1)].into()).unwrap();
        db.consumer("reader").unwrap().ack(1).unwrap();
        let report = db.check().unwrap();
        prop_assert!(report.is_ok(), "{}", report);
    }
}

// ---- Migration ----

#[test]
fn a_damaged_format_version_is_refused_not_migrated_again() {
    // Before: `tessera.meta` has no checksum, and a version record of a format-8 file damaged
    // to 0, 1, 2 or 3 made open "migrate" it: every value was sealed a second time and
    // committed, and a raw `get` of "value" returned Ok("value" and the old checksum's 4
    // bytes) from then on. A file whose values already pass their checksums is of format 4 or
    // later, whatever the record says: refused as `Corrupted` naming the record, the file
    // left as it was.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, DbOptions { write_map: false, ..DbOptions::default() }).unwrap();
    let raw = db.keyspace("raw").unwrap();
    db.write(|tx| tx.put(&raw, b"k", b"value")).unwrap();
    let dictionary = db.dictionary().unwrap();
    dictionary.set("short", "s").unwrap();
    dictionary.flush().unwrap();
    drop((raw, dictionary));
    db.close().unwrap();
    for version in 0u32..4 {
        let copy = copy_of(&path, &format!("v{version}"));
        set_version(&copy, 8, version);
        let stored_before = entries(&copy, "raw");
        match Db::open(&copy) {
            Err(Error::Corrupted(message)) => assert!(message.contains("tessera.meta") && message.contains("format_version"), "{message}"),
            Err(other) => panic!("version {version}: {other:?}"),
            Ok(db) => {
                let raw = db.keyspace("raw").unwrap();
                let read = db.read(|tx| Ok(tx.get(&raw, b"k")?.map(<[u8]>::to_vec))).unwrap();
                panic!("version {version} opened; `raw` reads {read:?}");
            }
        }
        assert_eq!(entries(&copy, "raw"), stored_before, "version {version}: nothing rewritten");
        // Mended, the file reads as it was written.
        set_version(&copy, version, 8);
        let db = Db::open(&copy).unwrap();
        let raw = db.keyspace("raw").unwrap();
        assert_eq!(db.read(|tx| Ok(tx.get(&raw, b"k")?.map(<[u8]>::to_vec))).unwrap().as_deref(), Some(&b"value"[..]));
        assert!(db.check().unwrap().is_ok());
    }
}

// ---- Salvage ----

/// Every record of `path` through a salvage that must succeed: the collected records and the
/// report's skipped entries (keyspace, key).
fn salvaged(path: &Path) -> (Collected, Vec<(String, Vec<u8>)>) {
    let mut collected = Collected::default();
    let report = salvage(path, &[], &mut collected).unwrap();
    let skipped = report.skipped.iter().map(|entry| (entry.keyspace.clone(), entry.key.clone())).collect();
    (collected, skipped)
}

#[test]
fn a_salvage_reads_a_file_whose_meta_keyspace_is_damaged() {
    // Before: `tessera.meta` has no checksum and its name in LMDB's main tree none either. One
    // byte of either damaged (the name `tessera.meta` to `tessera.mexa`, or the version record
    // 8 to 0..3) made the salvage refuse the whole file, every record intact, as
    // `ForeignDatabase` or `SalvageFormat`. It now reads every record and reports the damage.
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 20);
    let (intact, skipped) = salvaged(&path);
    assert!(skipped.is_empty(), "{skipped:?}");
    assert_eq!(intact.records["people"].len(), 20);

    let renamed = copy_of(&path, "renamed");
    replace_bytes(&renamed, b"tessera.meta", b"tessera.mexa");
    let (records, skipped) = salvaged(&renamed);
    assert_eq!(records.records, intact.records);
    assert_eq!(skipped, [("tessera.meta".to_owned(), Vec::new())]);

    for version in 0u32..4 {
        let damaged = copy_of(&path, &format!("v{version}"));
        set_version(&damaged, 8, version);
        let (records, skipped) = salvaged(&damaged);
        assert_eq!(records.records, intact.records, "version {version}");
        assert_eq!(skipped, [("tessera.meta".to_owned(), b"format_version".to_vec())], "version {version}");
    }

    // What is not tessera's stays refused: an LMDB file of other keyspaces, and a format
    // without checksums (no hash key either).
    let foreign = dir.path().join("foreign");
    let db = Db::open_with(&foreign, DbOptions { write_map: false, ..DbOptions::default() }).unwrap();
    let other = db.keyspace("other").unwrap();
    db.write(|tx| tx.put(&other, b"k", b"v")).unwrap();
    drop(other);
    db.close().unwrap();
    replace_bytes(&foreign, b"tessera.meta", b"zzzzzzz.meta");
    assert!(matches!(salvage(&foreign, &[], &mut Collected::default()), Err(Error::ForeignDatabase { .. })));
    let old = dir.path().join("v1.tessera");
    std::fs::copy(format!("{}/tests/fixtures/v1.tessera", env!("CARGO_MANIFEST_DIR")), &old).unwrap();
    assert!(matches!(salvage(&old, &[], &mut Collected::default()), Err(Error::SalvageFormat { found: 1, .. })));
}

#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "pets")]
struct Pet {
    #[record(key)]
    id: u32,
    name: String,
}

/// Swaps, in every leaf page of the main tree, the node offsets of the keyspaces `first` and
/// `second`: the walk then meets their trees in the other order.
fn swap_main_tree_nodes(path: &Path, first: &[u8], second: &[u8]) -> usize {
    const PAGE: usize = 4096;
    let mut bytes = std::fs::read(path).unwrap();
    let mut swapped = 0;
    for page in bytes.chunks_mut(PAGE).skip(2) {
        let flags = u16::from_ne_bytes([page[10], page[11]]);
        if flags != 0x02 {
            continue;
        }
        let lower = u16::from_ne_bytes([page[12], page[13]]) as usize;
        if !(16..PAGE).contains(&lower) {
            continue;
        }
        let offset_at = |page: &[u8], index: usize| u16::from_ne_bytes([page[16 + 2 * index], page[17 + 2 * index]]) as usize;
        let key_of = |page: &[u8], index: usize| {
            let node = offset_at(page, index);
            if node + 8 > PAGE {
                return Vec::new();
            }
            let len = u16::from_ne_bytes([page[node + 6], page[node + 7]]) as usize;
            page.get(node + 8..node + 8 + len).map(<[u8]>::to_vec).unwrap_or_default()
        };
        let nodes = (lower - 16) / 2;
        let find = |page: &[u8], key: &[u8]| (0..nodes).find(|&index| key_of(page, index) == key);
        if let (Some(i), Some(j)) = (find(page, first), find(page, second)) {
            let (a, b) = (offset_at(page, i) as u16, offset_at(page, j) as u16);
            page[16 + 2 * i..18 + 2 * i].copy_from_slice(&b.to_ne_bytes());
            page[16 + 2 * j..18 + 2 * j].copy_from_slice(&a.to_ne_bytes());
            swapped += 1;
        }
    }
    std::fs::write(path, bytes).unwrap();
    swapped
}

#[test]
fn keyspaces_out_of_order_in_lmdb_main_tree_are_reported_by_salvage_and_check() {
    // Before: two node offsets of LMDB's main tree swapped (4 bytes; the structure walk sees
    // nothing, as it checks no key order), so that `tessera.col.pets` came before
    // `tessera.col.people`. The salvage opened the `people` section, then the `pets` one,
    // handed the 3 pets, then handed the 5 people under the `pets` section (an import would
    // have put them in `pets`), and called itself complete. `Db::check`, whose lookup of
    // `tessera.col.people` missed, passed over the collection and reported nothing.
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 5);
    let db = Db::open_with(&path, DbOptions { write_map: false, ..DbOptions::default() }).unwrap();
    let pets = db.collection::<Pet>().unwrap();
    db.write(|tx| (0..3).try_for_each(|id| pets.insert(tx, &Pet { id, name: format!("pet {id}") }).map(drop))).unwrap();
    drop(pets);
    db.close().unwrap();
    let (intact, skipped) = salvaged(&path);
    assert!(skipped.is_empty());
    assert_eq!((intact.records["people"].len(), intact.records["pets"].len()), (5, 3));

    let damaged = copy_of(&path, "swapped");
    assert!(swap_main_tree_nodes(&damaged, PEOPLE.as_bytes(), b"tessera.col.pets") > 0);
    assert!(tessera::store::structure::verify(&damaged).unwrap().is_ok());
    let mut collected = Collected::default();
    let report = salvage(&damaged, &[], &mut collected).unwrap();
    assert!(!report.is_complete());
    // Every record handed over is in its own collection's section; those that could not be
    // are reported.
    assert_eq!(collected.records["pets"], intact.records["pets"]);
    let handed_people = collected.records.get("people").map_or(0, Vec::len);
    let skipped_people = report.skipped.iter().filter(|entry| entry.keyspace == PEOPLE).count();
    assert_eq!(handed_people + skipped_people, 5, "{report:?}");
    assert_eq!(report.collections, [("people".to_owned(), handed_people as u64), ("pets".to_owned(), 3)]);

    let check = report_of(&damaged);
    assert!(has_problem(&check, "(main tree)", &hex(PEOPLE.as_bytes()), "out of order"), "{check}");
}

#[test]
fn a_collection_whose_index_keyspace_is_missing_is_refused() {
    // `Db::check` reports this file (above), and opening the collection made a new, empty
    // `tessera.idx.people`: a query through the index returned Ok with no record. The open is
    // now `Error::Corrupted` naming the missing keyspace, for typed and dynamic handles.
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 20);
    replace_bytes(&path, b"tessera.idx.people", b"tessera.idx.peoplz");
    let db = Db::open(&path).unwrap();
    let found = db.collection::<Person>().and_then(|people| people.filter(Person::age().eq(23)).fetch(&db));
    assert!(matches!(&found, Err(tessera::Error::Corrupted(message)) if message.contains("tessera.idx.people")), "{found:?}");
    assert!(matches!(db.dyn_collection("people"), Err(tessera::Error::Corrupted(_))));
}
