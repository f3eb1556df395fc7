//! Adversarial review of map growth and the write path's retry (store/txn.rs): `run_write`,
//! `grow_map`, `grow_ahead`, `next_map_size`, `reserve_step`, the resize gate, resizes across
//! processes, the snapshot cache, and the map size options. Every test checks the database
//! against a model (or the documented behaviour) after each commit, and again after reopening.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};
use tessera::{Db, DbOptions, Error, Keyspace};

/// Which child a test binary run is (see [`run_child`]).
const CHILD_MODE: &str = "TESSERA_MAP_GROWTH_REVIEW_MODE";
const CHILD_PATH: &str = "TESSERA_MAP_GROWTH_REVIEW_PATH";

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A value that names its key and round and has a length of its own, so that a reader can tell
/// a torn, stale or misplaced value.
fn value_of(key: u32, round: u32, len: usize) -> Vec<u8> {
    let mut value = Vec::with_capacity(len.max(8));
    value.extend_from_slice(&key.to_be_bytes());
    value.extend_from_slice(&round.to_be_bytes());
    value.resize(len.max(8), (key.wrapping_mul(31) ^ round) as u8);
    value
}

/// Every entry of `ks` as the newest snapshot sees it.
fn contents(db: &Db, ks: &Keyspace) -> Model {
    db.read(|tx| tx.range(ks, ..)?.map(|entry| entry.map(|(k, v)| (k.to_vec(), v.to_vec()))).collect()).unwrap()
}

fn file_len(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

/// Runs this test binary's ignored test `name` as a child process with `mode` and `path`, and
/// returns its exit status (a signal shows as `None` from `code()`).
fn run_child(name: &str, mode: &str, path: &std::path::Path) -> std::process::Output {
    Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--ignored", "--test-threads=1", "--nocapture"])
        .env(CHILD_MODE, mode)
        .env(CHILD_PATH, path)
        .output()
        .unwrap()
}

/// Runs this binary's ignored test `body` in a process of its own, so that a crash (SIGSEGV,
/// SIGBUS) fails the calling test only, with the signal named.
fn run_isolated(body: &str) {
    let dir = scratch_dir();
    let output = run_child(body, "isolated", dir.path());
    assert!(output.status.success(), "{body}, in a process of its own, failed: {}", describe(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("1 passed"), "{body} did not run: {}", describe(&output));
}

fn describe(output: &std::process::Output) -> String {
    use std::os::unix::process::ExitStatusExt;
    format!(
        "status {:?} (signal {:?})\nstdout: {}\nstderr: {}",
        output.status.code(),
        output.status.signal(),
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|line| !line.trim_start().starts_with("at "))
            .take(40)
            .collect::<Vec<_>>()
            .join("\n"),
        String::from_utf8_lossy(&output.stderr).lines().take(40).collect::<Vec<_>>().join("\n"),
    )
}

// ---------------------------------------------------------------------------------------------
// The ceiling.

/// `map_size_max_bytes` is "the largest the map (and so the file) may grow". A ceiling that is
/// not a whole number of 64 KiB pages is a reasonable thing to ask for (10 MB, 3,000,000
/// bytes); writes must then stop with `MapFull` at the ceiling, never fail otherwise, and the
/// file must never be longer than the ceiling.
#[test]
fn a_ceiling_that_is_not_whole_pages_ends_in_map_full_and_the_file_stays_below_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let ceiling = 3_000_000u64;
    let options = DbOptions { map_size_initial_bytes: 1 << 20, map_size_max_bytes: ceiling, ..DbOptions::default() };
    let db = Db::open_with(&path, options.clone()).unwrap();
    let ks = db.keyspace("ks").unwrap();
    let mut model = Model::new();
    let mut outcome = None;
    for round in 0u32..200 {
        let puts: Vec<(Vec<u8>, Vec<u8>)> =
            (0..20u32).map(|i| ((round * 20 + i).to_be_bytes().to_vec(), value_of(i, round, 1000))).collect();
        match db.write(|tx| puts.iter().try_for_each(|(k, v)| tx.put(&ks, k, v))) {
            Ok(()) => model.extend(puts),
            Err(error) => {
                outcome = Some(error);
                break;
            }
        }
        assert!(file_len(&path) <= ceiling, "round {round}: the file is {} bytes, over the ceiling {ceiling}", file_len(&path));
    }
    let error = outcome.expect("4 MB of values cannot fit under a 3 MB ceiling");
    assert!(
        matches!(error, Error::MapFull { ceiling_bytes } if ceiling_bytes == ceiling),
        "the write at the ceiling failed with {error:?}"
    );
    assert!(model.len() > 1_000, "the map should fill most of the ceiling first: {} records", model.len());
    assert_eq!(contents(&db, &ks), model);
    assert!(file_len(&path) <= ceiling, "the file is {} bytes, over the ceiling {ceiling}", file_len(&path));
    drop((ks, db));
    let db = Db::open_with(&path, options).unwrap();
    assert_eq!(contents(&db, &db.keyspace("ks").unwrap()), model);
    assert!(file_len(&path) <= ceiling, "after reopening the file is {} bytes, over the ceiling {ceiling}", file_len(&path));
}

/// A ceiling below the initial map size: the map must start at the ceiling, not above it.
#[test]
fn a_ceiling_below_the_initial_map_size_bounds_the_first_map() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    // 250 pages of 4 KiB: a whole number of OS pages, not of 64 KiB.
    let ceiling = 250 * 4096u64;
    let db = Db::open_with(&path, DbOptions { map_size_max_bytes: ceiling, ..DbOptions::default() }).unwrap();
    assert!(db.map_size_bytes() <= ceiling, "the first map is {} bytes, over the ceiling {ceiling}", db.map_size_bytes());
    assert!(file_len(&path) <= ceiling, "the new file is {} bytes, over the ceiling {ceiling}", file_len(&path));
}

/// A ceiling of whole 64 KiB pages is reached exactly: the last write that fits commits, the
/// first that does not is `MapFull` with nothing of it written, the file is the ceiling, and
/// a transaction larger than the ceiling on its own is `MapFull` at once (one run).
#[test]
fn the_ceiling_is_reached_exactly_and_a_transaction_larger_than_it_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let ceiling = 3u64 << 20;
    let options = DbOptions { map_size_initial_bytes: 1 << 16, map_size_max_bytes: ceiling, ..DbOptions::default() };
    let db = Db::open_with(&path, options.clone()).unwrap();
    let ks = db.keyspace("ks").unwrap();
    // Larger than the ceiling alone: MapFull, nothing written, at most as many runs as growths.
    let mut runs = 0;
    let huge = db.write(|tx| {
        runs += 1;
        (0u32..1000).try_for_each(|i| tx.put(&ks, &i.to_be_bytes(), &value_of(i, 0, 4000)))
    });
    assert!(matches!(huge, Err(Error::MapFull { ceiling_bytes }) if ceiling_bytes == ceiling), "{huge:?}");
    assert!(runs <= 4, "the closure ran {runs} times on its way to the ceiling");
    assert_eq!(contents(&db, &ks), Model::new(), "nothing of the refused transaction is visible");
    assert_eq!(db.map_size_bytes(), ceiling, "the map grew to the ceiling trying");
    // Fill to the ceiling with small writes; each either commits whole or is MapFull whole.
    let mut model = Model::new();
    let mut failures = 0;
    for round in 0u32..20_000 {
        let key = round.to_be_bytes().to_vec();
        let value = value_of(round, 1, 700);
        match db.write(|tx| tx.put(&ks, &key, &value)) {
            Ok(()) => {
                model.insert(key, value);
            }
            Err(Error::MapFull { .. }) => {
                failures += 1;
                if failures > 3 {
                    break;
                }
            }
            Err(other) => panic!("round {round}: {other:?}"),
        }
    }
    assert!(failures > 0, "the ceiling was never reached");
    assert!(model.len() > 2_000, "only {} records of 700 bytes fit 3 MiB", model.len());
    assert_eq!(contents(&db, &ks), model);
    assert_eq!(db.map_size_bytes(), ceiling);
    assert!(file_len(&path) <= ceiling, "file {} over the ceiling", file_len(&path));
    // At the ceiling each delete either commits or is MapFull (LMDB copies pages to delete),
    // never half done.
    let doomed: Vec<Vec<u8>> = model.keys().step_by(7).take(60).cloned().collect();
    for key in &doomed {
        match db.write(|tx| tx.delete(&ks, key)) {
            Ok(existed) => {
                assert!(existed);
                model.remove(key);
            }
            Err(Error::MapFull { .. }) => {}
            Err(other) => panic!("{other:?}"),
        }
    }
    assert_eq!(contents(&db, &ks), model);
    drop((ks, db));
    let db = Db::open_with(&path, options).unwrap();
    assert_eq!(contents(&db, &db.keyspace("ks").unwrap()), model);
    assert!(file_len(&path) <= ceiling);
}

// ---------------------------------------------------------------------------------------------
// Crashes in this process: LMDB reads through the map outside the resize gate.

/// The child of the crash tests: grows fresh small databases over and over on one thread
/// while another thread does `mode`'s work on the same database, for about two seconds.
#[test]
#[ignore = "run as a child process by the crash tests of map_growth_review.rs"]
fn growth_race_child() {
    let (Ok(mode), Ok(dir)) = (std::env::var(CHILD_MODE), std::env::var(CHILD_PATH)) else { return };
    let dir = std::path::PathBuf::from(dir);
    let started = Instant::now();
    let mut databases = 0u32;
    let mut side_calls = 0u64;
    let mut side_errors = Vec::new();
    // Rounds per database: small files for the map-size calls (more resizes a second), larger
    // ones for the copies (which then take longer than a resize).
    let rounds: u32 = if mode == "info" { 20 } else { 60 };
    // Until a side call has failed (a crash ends the process anyway), or 2.5 s.
    while started.elapsed() < Duration::from_millis(2_500) && side_errors.is_empty() {
        let path = dir.join(format!("db{databases}"));
        let options = DbOptions {
            map_size_initial_bytes: 1 << 16,
            durable_feed: mode == "copy_feed",
            durability: tessera::Durability::BUFFERED,
            ..DbOptions::default()
        };
        let db = Db::open_with(&path, options).unwrap();
        let ks = db.keyspace("ks").unwrap();
        db.write(|tx| (0u32..20).try_for_each(|i| tx.put(&ks, &i.to_be_bytes(), &value_of(i, 0, 1500)))).unwrap();
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let side = scope.spawn(|| {
                let mut calls = 0u64;
                let mut errors = Vec::new();
                let mut copy = 0u32;
                while !done.load(Ordering::SeqCst) {
                    match mode.as_str() {
                        "copy" | "copy_feed" => {
                            let destination = dir.join(format!("copy{databases}-{copy}"));
                            copy += 1;
                            match db.copy_compacted(&destination) {
                                Ok(_) => {}
                                Err(error) => errors.push(format!("{error:?}")),
                            }
                            let _ = std::fs::remove_file(&destination);
                        }
                        "info" => {
                            let bytes = db.map_size_bytes();
                            assert!(bytes >= 1 << 16);
                            if calls.is_multiple_of(1024) {
                                let info = db.file_info().unwrap();
                                assert!(info.used_bytes <= info.map_bytes);
                            }
                        }
                        other => panic!("unknown mode {other}"),
                    }
                    calls += 1;
                }
                (calls, errors)
            });
            for round in 1..rounds {
                db.write(|tx| (0u32..20).try_for_each(|i| tx.put(&ks, &(round * 20 + i).to_be_bytes(), &value_of(i, round, 1500))))
                    .unwrap();
            }
            done.store(true, Ordering::SeqCst);
            let (calls, errors) = side.join().unwrap();
            side_calls += calls;
            side_errors.extend(errors);
        });
        assert_eq!(db.read(|tx| tx.len(&ks)).unwrap(), u64::from(rounds) * 20);
        drop((ks, db));
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(dir.join(format!("db{databases}-lock")));
        databases += 1;
    }
    println!("{databases} databases grown, {side_calls} side calls, {} errors", side_errors.len());
    assert!(side_errors.is_empty(), "copies failed while the map grew: {:?}", &side_errors[..side_errors.len().min(5)]);
}

/// A scratch directory, in memory when the machine has /dev/shm (the crash tests flush often).
fn scratch_dir() -> tempfile::TempDir {
    match std::path::Path::new("/dev/shm").is_dir() {
        true => tempfile::tempdir_in("/dev/shm").unwrap(),
        false => tempfile::tempdir().unwrap(),
    }
}

fn assert_child_survives(mode: &str) {
    let dir = scratch_dir();
    let output = run_child("growth_race_child", mode, dir.path());
    assert!(output.status.success(), "the child ({mode}) failed: {}", describe(&output));
}

/// `Db::copy_compacted` is documented to work "while other threads and processes keep reading
/// and writing". The copy runs an LMDB read transaction of its own, which does not enter the
/// resize gate: a writer of another thread that grows the map meanwhile unmaps the pages the
/// copy is reading.
#[test]
fn a_compacting_copy_survives_the_map_growing_on_another_thread() {
    assert_child_survives("copy");
}

/// The same with the durable feed on (a copy page by page, free pages included).
#[test]
fn a_page_by_page_copy_survives_the_map_growing_on_another_thread() {
    assert_child_survives("copy_feed");
}

/// `Db::map_size_bytes` and `Db::file_info` call `mdb_env_info`, which reads the meta pages
/// through the map (as the flush that crashed in `mdb_env_pick_meta` did, see
/// flush_during_resize.rs), outside the resize gate.
#[test]
fn map_size_and_file_info_survive_the_map_growing_on_another_thread() {
    assert_child_survives("info");
}

// ---------------------------------------------------------------------------------------------
// One transaction that crosses the map's size many times, with every kind of store.

#[derive(tessera::Record, Debug, Clone, PartialEq)]
struct Item {
    #[record(key)]
    id: u32,
    #[record(index)]
    group: u32,
    title: String,
    payload: Vec<u8>,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
struct Profile {
    name: String,
    scores: Vec<u32>,
    note: String,
}

fn item(id: u32, round: u32) -> Item {
    Item { id, group: id % 17, title: format!("item {id} of round {round}"), payload: value_of(id, round, 200 + (id as usize * 37) % 900) }
}

fn profile(id: u32, round: u32) -> Profile {
    Profile { name: format!("p{id}"), scores: (0..(id % 40)).map(|s| s * round).collect(), note: "n".repeat((id as usize * 13) % 700) }
}

/// Every store of the file against its model: raw keyspace, collection (by key and through
/// its index), dictionary and documents.
struct Stores {
    raw: Keyspace,
    items: tessera::Collection<Item>,
    dict: tessera::Dictionary,
    docs: tessera::Documents,
}

#[derive(Default, Clone, PartialEq, Debug)]
struct Models {
    raw: Model,
    items: BTreeMap<u32, Item>,
    dict: BTreeMap<String, u64>,
    docs: BTreeMap<String, Profile>,
}

impl Stores {
    fn open(db: &Db) -> Stores {
        Stores {
            raw: db.keyspace("raw").unwrap(),
            items: db.collection::<Item>().unwrap(),
            dict: db.dictionary().unwrap(),
            docs: db.documents("profiles").unwrap(),
        }
    }

    /// One round of writes inside `tx`, applied to `model` too: puts, overwrites and deletes
    /// of every store. Deterministic in `round`, so a run that is retried writes the same.
    fn round(&self, tx: &mut tessera::WriteTxn<'_>, model: &mut Models, round: u32, records: u32) -> tessera::Result<()> {
        for i in 0..records {
            let id = (round * 7919 + i * 104_729) % (records * 3);
            let key = id.to_be_bytes();
            if i % 11 == 5 && model.raw.contains_key(&key[..]) {
                assert!(tx.delete(&self.raw, &key)?, "the model has key {id}");
                model.raw.remove(&key[..]);
            } else {
                let value = value_of(id, round, 100 + (i as usize * 53) % 2_500);
                tx.put(&self.raw, &key, &value)?;
                model.raw.insert(key.to_vec(), value);
            }
            let record = item(id, round);
            if i % 13 == 3 && model.items.contains_key(&id) {
                self.items.delete(tx, &id)?;
                model.items.remove(&id);
            } else {
                self.items.upsert(tx, &record)?;
                model.items.insert(id, record);
            }
            let dict_key = format!("key-{}-{}", id % 500, "x".repeat((id % 5) as usize * 120));
            let dict_value = u64::from(round) << 32 | u64::from(id);
            tx.dictionary(&self.dict).set(&dict_key, &dict_value)?;
            model.dict.insert(dict_key, dict_value);
            if i % 3 == 0 {
                let doc_id = format!("doc{}", id % 300);
                let value = profile(id, round);
                self.docs.document::<Profile>(&doc_id).set_in(tx, &value)?;
                model.docs.insert(doc_id, value);
            }
        }
        Ok(())
    }

    fn read(&self, db: &Db) -> Models {
        let raw = contents(db, &self.raw);
        let items = self.items.all().fetch(db).unwrap().into_iter().map(|item| (item.id, item)).collect();
        let dict = self.dict.keys().unwrap().into_iter().map(|key| {
            let value = self.dict.get::<u64>(&key).unwrap().expect("a listed key has a value");
            (key, value)
        });
        let docs = self.docs.ids_with_prefix("").unwrap().into_iter().map(|id| {
            let value = self.docs.document::<Profile>(&id).get().unwrap().expect("a listed document exists");
            (id, value)
        });
        Models { raw, items, dict: dict.collect(), docs: docs.collect() }
    }

    /// Also checks the collection's index: every group's records, through the index.
    fn check(&self, db: &Db, model: &Models, what: &str, whole_file: bool) {
        let found = self.read(db);
        assert_eq!(found.raw.len(), model.raw.len(), "{what}: raw keyspace size");
        assert!(found.raw == model.raw, "{what}: the raw keyspace differs from the model");
        assert!(found.items == model.items, "{what}: the collection differs from the model");
        assert_eq!(found.dict, model.dict, "{what}: the dictionary");
        assert!(found.docs == model.docs, "{what}: the documents differ from the model");
        for group in [0u32, 5, 16] {
            let query = self.items.filter_text(&format!("group == {group}")).unwrap();
            let mut through_index: Vec<u32> = query.fetch(db).unwrap().into_iter().map(|item| item.id).collect();
            through_index.sort_unstable();
            let expected: Vec<u32> = model.items.values().filter(|item| item.group == group).map(|item| item.id).collect();
            assert_eq!(through_index, expected, "{what}: group {group} through the index");
        }
        if whole_file {
            let report = db.check().unwrap();
            assert!(report.is_ok(), "{what}: {report}");
        }
    }
}

/// Each transaction writes several times the map it starts with (64 KiB, then what it grew
/// to), in every store, overwriting and deleting what earlier rounds wrote. A run that fills
/// the map is thrown away whole: the model is cloned at the start of each run. The closure
/// runs at most once per growth of the map it needs (documented: "never more often than the
/// map must grow"), and every store equals its model after each commit and after reopening.
#[test]
fn transactions_that_cross_the_map_many_times_in_every_store_match_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let options = DbOptions { map_size_initial_bytes: 1 << 16, ..DbOptions::default() };
    let db = Db::open_with(&path, options.clone()).unwrap();
    let stores = Stores::open(&db);
    let mut model = Models::default();
    for (round, records) in [(1u32, 300u32), (2, 900), (3, 200), (4, 1_500), (5, 50)] {
        let map_before = db.map_size_bytes();
        let mut runs = 0u32;
        let mut committed = None;
        db.write(|tx| {
            runs += 1;
            let mut attempt = model.clone();
            stores.round(tx, &mut attempt, round, records)?;
            committed = Some(attempt);
            Ok(())
        })
        .unwrap();
        model = committed.take().unwrap();
        let map_after = db.map_size_bytes();
        // Each growth at least doubles the map: the runs are bounded by the doublings.
        let growths = (map_after / map_before).max(1).ilog2() + 1;
        assert!(runs <= growths, "round {round}: {runs} runs for a map grown from {map_before} to {map_after}");
        stores.check(&db, &model, &format!("after round {round}"), round == 5);
    }
    drop(stores);
    db.close().unwrap();
    let db = Db::open_with(&path, options).unwrap();
    Stores::open(&db).check(&db, &model, "after reopening", true);
}

// ---------------------------------------------------------------------------------------------
// Closures whose later runs differ from the first.

/// The first run fills the map, the second fails: the caller gets the second run's error and
/// nothing of either run is written. Also a second run that panics, and a first run that
/// ignores the full map and returns `Ok` (it must not commit the half that fit).
#[test]
fn a_closure_that_fails_only_on_its_second_run_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path().join("db"), DbOptions { map_size_initial_bytes: 1 << 16, ..DbOptions::default() }).unwrap();
    let ks = db.keyspace("ks").unwrap();
    db.write(|tx| tx.put(&ks, b"before", b"1")).unwrap();
    let expected: Model = [(b"before".to_vec(), b"1".to_vec())].into();
    let big = |tx: &mut tessera::WriteTxn<'_>, tag: u32| {
        (0u32..300).try_for_each(|i| tx.put(&ks, &(tag << 16 | i).to_be_bytes(), &value_of(i, tag, 2_000)))
    };

    // 1. Fails with its own error on the first run that met no full map (its second or
    //    later): the caller gets that error, and nothing of any run is written.
    let (mut runs, mut full_runs) = (0, 0);
    let result: tessera::Result<()> = db.write(|tx| {
        runs += 1;
        if let Err(error) = big(tx, 1) {
            full_runs += 1;
            return Err(error);
        }
        Err(Error::other(std::io::Error::other("the run that would commit refuses")))
    });
    assert!(full_runs >= 1, "the first run filled the 64 KiB map");
    assert_eq!(runs, full_runs + 1, "one more run than the map filled");
    assert!(matches!(&result, Err(Error::Aborted(e)) if e.to_string() == "the run that would commit refuses"), "{result:?}");
    assert_eq!(contents(&db, &ks), expected, "nothing of any run");

    // 2. Panics on the first run that met no full map, after the map grew.
    let map = db.map_size_bytes();
    let (mut runs, mut full_runs) = (0, 0);
    let result: tessera::Result<()> = db.write(|tx| {
        runs += 1;
        if let Err(error) = big(tx, 2).and_then(|()| big(tx, 3)).and_then(|()| big(tx, 4)) {
            full_runs += 1;
            return Err(error);
        }
        panic!("the run that would commit panics");
    });
    assert!(full_runs >= 1, "the first run filled the {map}-byte map");
    assert_eq!(runs, full_runs + 1);
    assert!(matches!(&result, Err(Error::Panicked(m)) if m == "the run that would commit panics"), "{result:?}");
    assert_eq!(contents(&db, &ks), expected);

    // 3. Swallows the full map and returns Ok on its first run: still run again, and only the
    //    second run's writes (all of them) commit. (A new file each, so that the map is small.)
    let fresh = || {
        let db = Db::open_with(
            dir.path().join(format!("db{}", fastrand::u32(..))),
            DbOptions { map_size_initial_bytes: 1 << 16, ..DbOptions::default() },
        )
        .unwrap();
        let ks = db.keyspace("ks").unwrap();
        (db, ks)
    };
    let (db, ks) = fresh();
    let mut expected = Model::new();
    let map = db.map_size_bytes();
    let mut runs = 0;
    let mut swallowed = 0;
    let value = db
        .write(|tx| {
            runs += 1;
            for i in 0u32..(map as u32 / 1_000) {
                if let Err(error) = tx.put(&ks, &(5 << 16 | i).to_be_bytes(), &value_of(i, 5, 1_500)) {
                    assert!(matches!(error, Error::MapFull { .. }) || runs == 1, "{error:?}");
                    swallowed += 1;
                    return Ok(runs);
                }
            }
            Ok(runs)
        })
        .unwrap();
    assert!(swallowed >= 1 && runs >= 2, "the first run met the full map ({swallowed} swallowed, {runs} runs)");
    assert_eq!(value, runs, "the value of the last run is returned");
    for i in 0u32..(map as u32 / 1_000) {
        expected.insert((5 << 16 | i).to_be_bytes().to_vec(), value_of(i, 5, 1_500));
    }
    assert_eq!(contents(&db, &ks), expected, "the whole second run and nothing else");

    // 4. Returns Err on its first run after the map filled (the error is the full map's
    //    doing): documented to run again, and the later run commits.
    let (db, ks) = fresh();
    let mut expected = Model::new();
    let records = db.map_size_bytes() as u32 / 1_500 + 100; // more than the map holds
    let mut runs = 0;
    db.write(|tx| {
        runs += 1;
        let filled = (0..records).try_for_each(|i| tx.put(&ks, &(6 << 24 | i).to_be_bytes(), &value_of(i, 6, 1_500)));
        match (runs, filled) {
            (1, Err(_)) => Err(Error::other(std::io::Error::other("gave up after the full map"))),
            (_, filled) => filled,
        }
    })
    .unwrap();
    assert!(runs >= 2, "the first run filled the map");
    for i in 0..records {
        expected.insert((6 << 24 | i).to_be_bytes().to_vec(), value_of(i, 6, 1_500));
    }
    assert_eq!(contents(&db, &ks), expected);
}

// ---------------------------------------------------------------------------------------------
// Readers on other threads while the map grows.

/// Keys written by round `round` of the reader tests: a growing set, so that the map grows.
fn keys_of_round(round: u32) -> u32 {
    100 + round * 40
}

/// The round every value of a snapshot of `ks` was written by, checking each value whole and
/// the snapshot's key set against that round's. `pause` holds the iterator open midway.
fn snapshot_round(tx: &tessera::ReadTxn<'_>, ks: &Keyspace, pause: Duration) -> Option<u32> {
    let mut round = None;
    let mut count = 0u32;
    for (n, entry) in tx.range(ks, ..).unwrap().enumerate() {
        let (key, value) = entry.unwrap();
        let key = u32::from_be_bytes(key.try_into().unwrap());
        let written = u32::from_be_bytes(value[4..8].try_into().unwrap());
        assert_eq!(value, &value_of(key, written, 64 + (key as usize * 7 + written as usize * 131) % 1_500)[..], "key {key}: a torn value");
        assert_eq!(*round.get_or_insert(written), written, "one snapshot holds two rounds");
        count += 1;
        if n == 20 {
            std::thread::sleep(pause); // the iterator stays open while the writer wants to grow
        }
    }
    if let Some(round) = round {
        assert_eq!(count, keys_of_round(round), "round {round}: the snapshot has {count} keys");
    }
    round
}

/// Three reader threads open snapshots (through `read_txn`, through `Db::read`, and one moved
/// to another thread and read there) and keep iterators open while one writer rewrites a
/// growing key set, growing the map from 64 KiB many times. Every snapshot is one whole round,
/// each reader's rounds never go back, and the final state is the last round.
#[test]
fn readers_on_other_threads_see_whole_rounds_while_the_map_grows() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path().join("db"), DbOptions { map_size_initial_bytes: 1 << 16, ..DbOptions::default() }).unwrap();
    let ks = db.keyspace("ks").unwrap();
    let first_map = db.map_size_bytes();
    let rounds = 40u32;
    let done = AtomicBool::new(false);
    let committed = AtomicU32::new(0);
    let value = |key: u32, round: u32| value_of(key, round, 64 + (key as usize * 7 + round as usize * 131) % 1_500);
    std::thread::scope(|scope| {
        let mut readers = Vec::new();
        for reader in 0..3u32 {
            let (db, ks, done, committed) = (&db, &ks, &done, &committed);
            readers.push(scope.spawn(move || {
                let mut last = None;
                let mut snapshots = 0u32;
                while !done.load(Ordering::SeqCst) {
                    let floor = committed.load(Ordering::SeqCst);
                    let round = match reader {
                        0 => snapshot_round(&db.read_txn().unwrap(), ks, Duration::from_millis(2)),
                        1 => db.read(|tx| Ok(snapshot_round(tx, ks, Duration::ZERO))).unwrap(),
                        _ => {
                            let tx = db.read_txn().unwrap();
                            std::thread::scope(|inner| {
                                inner.spawn(move || snapshot_round(&tx, ks, Duration::from_millis(1))).join().unwrap()
                            })
                        }
                    };
                    if let Some(round) = round {
                        assert!(round + 1 >= floor, "reader {reader}: round {round} seen after round {} had committed", floor - 1);
                        assert!(last <= Some(round), "reader {reader}: round {round} after {last:?}");
                        last = Some(round);
                    }
                    snapshots += 1;
                }
                snapshots
            }));
        }
        for round in 0..rounds {
            db.write(|tx| {
                // Keys of earlier rounds beyond this one's set do not exist: the set only grows.
                (0..keys_of_round(round)).try_for_each(|key| tx.put(&ks, &key.to_be_bytes(), &value(key, round)))
            })
            .unwrap();
            committed.store(round + 1, Ordering::SeqCst);
        }
        done.store(true, Ordering::SeqCst);
        for reader in readers {
            assert!(reader.join().unwrap() > 0);
        }
    });
    assert!(db.map_size_bytes() >= first_map * 16, "the map grew several times: {first_map} -> {}", db.map_size_bytes());
    assert_eq!(snapshot_round(&db.read_txn().unwrap(), &ks, Duration::ZERO), Some(rounds - 1));
}

// ---------------------------------------------------------------------------------------------
// Two processes growing one file.

/// Rounds each process writes in the two-process test.
const PROCESS_ROUNDS: u32 = 15;

/// The value `round` writes at `key` in keyspace `who`'s round: the keys of round `round` are
/// `0..keys_in(who, round)`, all rewritten, so that every snapshot holds one round whole.
fn keys_in(who: &str, round: u32) -> u32 {
    match who {
        "child" => 50 + round * 60,
        _ => 80 + round * 45,
    }
}

fn process_value(who: &str, key: u32, round: u32) -> Vec<u8> {
    let len = 100 + (key as usize * 13 + round as usize * 71 + who.len() * 5) % 2_400;
    value_of(key, round, len)
}

/// Writes `who`'s rounds, one transaction each; every third round also writes a large value
/// that alone is several times the map a new file starts with. After each commit, checks what
/// it wrote and that the other process's keyspace holds one whole round.
fn write_rounds(db: &Db, who: &str, other: &str) {
    let ks = db.keyspace(who).unwrap();
    let big = db.keyspace(&format!("{who}.big")).unwrap();
    // Opened before any snapshot that reads it (LMDB: a handle opened after a transaction
    // began is unknown to it). The parent creates both keyspaces before the child starts.
    let other_ks = db.keyspace(other).unwrap();
    for round in 0..PROCESS_ROUNDS {
        db.write(|tx| {
            for key in 0..keys_in(who, round) {
                tx.put(&ks, &key.to_be_bytes(), &process_value(who, key, round))?;
            }
            if round % 3 == 2 {
                tx.put(&big, &round.to_be_bytes(), &value_of(round, round, 300_000))?;
            }
            Ok(())
        })
        .unwrap();
        // Every byte of this process's map has its block, whatever the other process resized.
        assert_map_reserved(db, &format!("{who} after round {round}"));
        db.read(|tx| {
            assert_eq!(tx.len(&ks)?, u64::from(keys_in(who, round)), "{who} round {round}");
            let last = keys_in(who, round) - 1;
            assert_eq!(tx.get(&ks, &last.to_be_bytes())?, Some(&process_value(who, last, round)[..]));
            whole_round_of(tx, &other_ks, other);
            Ok(())
        })
        .unwrap();
    }
}

/// The round that every entry of `who`'s keyspace was written by in this snapshot, checking
/// each value and the key count.
fn whole_round_of(tx: &tessera::ReadTxn<'_>, ks: &Keyspace, who: &str) -> Option<u32> {
    let mut round = None;
    let mut count = 0;
    for entry in tx.range(ks, ..).unwrap() {
        let (key, value) = entry.unwrap();
        let key = u32::from_be_bytes(key.try_into().unwrap());
        let written = u32::from_be_bytes(value[4..8].try_into().unwrap());
        assert_eq!(value, &process_value(who, key, written)[..], "{who} key {key}: a torn value");
        assert_eq!(*round.get_or_insert(written), written, "{who}: one snapshot holds two rounds");
        count += 1;
    }
    if let Some(round) = round {
        assert_eq!(count, keys_in(who, round), "{who} round {round}: {count} keys");
    }
    round
}

#[test]
#[ignore = "run as a child process by the two-process tests of map_growth_review.rs"]
fn process_child() {
    let (Ok(mode), Ok(path)) = (std::env::var(CHILD_MODE), std::env::var(CHILD_PATH)) else { return };
    match mode.as_str() {
        "rounds" => {
            let options = DbOptions { durable_feed: true, ..DbOptions::default() };
            let db = Db::open_with(&path, options).unwrap();
            write_rounds(&db, "child", "parent");
            println!("child wrote {PROCESS_ROUNDS} rounds");
        }
        "grow_rounds" | "grow_rounds_notify" => {
            // Grows the file again and again, one commit at a time.
            let notify = mode == "grow_rounds_notify";
            let options = DbOptions { durable_feed: notify, cross_process_notify: notify, ..DbOptions::default() };
            let db = Db::open_with(&path, options).unwrap();
            let ks = db.keyspace("grown").unwrap();
            for round in 0..GROWN_ROUNDS {
                let count = 1u32 << (round / 2);
                db.write(|tx| (0..count).try_for_each(|i| tx.put(&ks, &(round << 16 | i).to_be_bytes(), &value_of(i, round, 20_000))))
                    .unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
            println!("child grew the map to {}", db.map_size_bytes());
        }
        mode if mode.starts_with("create_race:") => {
            // Waits for the go file, opens the (new) file with its own initial map size, and
            // writes and checks its own keyspace, growing the map.
            let mut parts = mode.split(':').skip(1);
            let (initial, who) = (parts.next().unwrap().parse::<u64>().unwrap(), parts.next().unwrap().to_owned());
            let delay = Duration::from_micros(parts.next().unwrap().parse().unwrap());
            let go = std::path::PathBuf::from(format!("{path}.go"));
            while !go.exists() {
                std::hint::spin_loop();
            }
            std::thread::sleep(delay);
            let options = DbOptions { map_size_initial_bytes: initial, ..DbOptions::default() };
            // A refusal as foreign is reported, then the open tried again, so that what comes
            // after (the sizes of the two maps) is seen too.
            let mut tries = 0;
            let db = loop {
                match Db::open_with(&path, options.clone()) {
                    Ok(db) => break db,
                    Err(Error::ForeignDatabase { .. }) if tries < 100 => {
                        println!("refused as foreign while the other process created it");
                        tries += 1;
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Err(other) => panic!("{other:?}"),
                }
            };
            use std::os::unix::fs::MetadataExt;
            let lock = std::path::PathBuf::from(format!("{path}-lock"));
            let lock_inode = std::fs::metadata(&lock).unwrap().ino();
            let ks = db.keyspace(&who).unwrap();
            for round in 0u32..12 {
                db.write(|tx| (0u32..40).try_for_each(|i| tx.put(&ks, &(round * 40 + i).to_be_bytes(), &value_of(i, round, 6_000))))
                    .unwrap();
            }
            assert_eq!(db.read(|tx| tx.len(&ks)).unwrap(), 480);
            let lock_now = std::fs::metadata(&lock).map(|meta| meta.ino());
            assert!(
                matches!(lock_now, Ok(inode) if inode == lock_inode),
                "the lock file this process uses was removed or replaced: {lock_now:?}"
            );
        }
        "read_only_reader" => {
            let db = Db::open_with(&path, DbOptions { read_only: true, ..DbOptions::default() }).unwrap();
            let (ks, grown) = (db.keyspace("ks").unwrap(), db.keyspace("grown").unwrap());
            assert_eq!(db.read(|tx| tx.get(&ks, b"before").map(|v| v.map(<[u8]>::to_vec))).unwrap(), Some(b"1".to_vec()));
            println!("ready");
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).unwrap(); // the parent has grown the map
            let count = db.read(|tx| tx.len(&grown));
            assert!(matches!(count, Ok(40)), "a read-only handle reading after another process grew the map: {count:?}");
            println!("read {count:?}");
        }
        "grow" => {
            // One transaction far larger than the map the parent has.
            let db = Db::open(&path).unwrap();
            let ks = db.keyspace("grown").unwrap();
            db.write(|tx| (0u32..40).try_for_each(|i| tx.put(&ks, &i.to_be_bytes(), &value_of(i, 9, 200_000)))).unwrap();
            println!("child grew the map to {}", db.map_size_bytes());
        }
        other => panic!("unknown mode {other}"),
    }
}

/// Disk blocks allocated to the file, in bytes: with the write map every byte of the map must
/// have its block, or a write through the map on a full disk is SIGBUS.
fn allocated_bytes(path: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().blocks() * 512
}

/// Two processes write rounds to their own keyspaces at once, each growing the file (some
/// transactions are several times the map the other has), while this one also reads on
/// another thread. Neither process crashes, every snapshot holds whole rounds, both keyspaces
/// end as the models say (also after reopening), every block of the file is reserved, this
/// process's live feed has each of its commits once with the right old and new values, and
/// the durable feed each commit of either process once, in order. (Without cross-process
/// notification, whose crash the test below shows.)
///
/// Run in a process of its own: this process crashing (see the notification test below) must
/// fail this test only.
#[test]
fn two_processes_growing_one_file_end_as_the_model_and_the_feed_has_each_commit_once() {
    run_isolated("two_processes_body");
}

#[test]
#[ignore = "run in a process of its own by two_processes_growing_one_file_end_as_the_model_and_the_feed_has_each_commit_once"]
fn two_processes_body() {
    if std::env::var(CHILD_MODE).as_deref() != Ok("isolated") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let options =
        DbOptions { map_size_initial_bytes: 1 << 16, durable_feed: true, listener_queue_batches: 100_000, ..DbOptions::default() };
    let db = Db::open_with(&path, options.clone()).unwrap();
    db.keyspace("parent").unwrap();
    db.keyspace("child").unwrap();
    let stream = db.subscribe().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["process_child", "--exact", "--ignored", "--test-threads=1", "--nocapture"])
        .env(CHILD_MODE, "rounds")
        .env(CHILD_PATH, &path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            let (parent, child) = (db.keyspace("parent").unwrap(), db.keyspace("child").unwrap());
            let mut snapshots = 0;
            while !done.load(Ordering::SeqCst) {
                let tx = db.read_txn().unwrap();
                whole_round_of(&tx, &parent, "parent");
                whole_round_of(&tx, &child, "child");
                drop(tx);
                snapshots += 1;
            }
            snapshots
        });
        write_rounds(&db, "parent", "child");
        let status = child.wait().unwrap();
        done.store(true, Ordering::SeqCst);
        assert!(reader.join().unwrap() > 0);
        let output = child.wait_with_output().unwrap();
        assert!(status.success(), "the child failed: {}", describe(&std::process::Output { status, ..output }));
    });
    let check = |db: &Db, what: &str| {
        let keyspaces: Vec<_> =
            ["parent", "child"].map(|who| (who, db.keyspace(who).unwrap(), db.keyspace(&format!("{who}.big")).unwrap())).into();
        db.read(|tx| {
            for (who, ks, big) in &keyspaces {
                let (who, ks, big) = (*who, ks, big);
                assert_eq!(whole_round_of(tx, ks, who), Some(PROCESS_ROUNDS - 1), "{what}: {who}");
                assert_eq!(tx.len(big)?, u64::from(PROCESS_ROUNDS / 3), "{what}: {who}.big");
                for round in (2..PROCESS_ROUNDS).step_by(3) {
                    assert_eq!(tx.get(big, &round.to_be_bytes())?, Some(&value_of(round, round, 300_000)[..]), "{what}: {who}.big");
                }
            }
            Ok(())
        })
        .unwrap();
        let report = db.check().unwrap();
        assert!(report.is_ok(), "{what}: {report}");
    };
    // One more local write adopts whatever the child grew last.
    let after = db.keyspace("after").unwrap();
    db.write(|tx| tx.put(&after, b"z", b"after")).unwrap();
    drop(after);
    check(&db, "after both processes wrote");
    assert!(
        allocated_bytes(&path) >= file_len(&path),
        "the file is {} bytes but only {} have blocks: a write there on a full disk is SIGBUS",
        file_len(&path),
        allocated_bytes(&path)
    );
    // This process's commits on its live feed, and both processes' in the durable feed: each
    // round once, in order, whole, whoever grew the map around it.
    let round_of_batch = |changes: &[tessera::Change], who: &str, round: u32, with_old: bool| {
        let changes: Vec<_> = changes.iter().filter(|change| &*change.keyspace == who).collect();
        assert_eq!(changes.len() as u32, keys_in(who, round), "{who}'s round {round} in the feed");
        for change in changes {
            let key = u32::from_be_bytes((*change.key).try_into().unwrap());
            assert_eq!(change.new.as_deref(), Some(&process_value(who, key, round)[..]), "{who} round {round} key {key}: new");
            if with_old {
                let old = (round > 0 && key < keys_in(who, round - 1)).then(|| process_value(who, key, round - 1));
                assert_eq!(change.old.as_deref(), old.as_deref(), "{who} round {round} key {key}: old");
            }
        }
    };
    let mut live_rounds = 0;
    while let Some(event) = stream.recv_timeout(Duration::from_millis(200)) {
        let tessera::FeedEvent::Batch(batch) = event else { panic!("the listener lagged: {event:?}") };
        if batch.changes.iter().any(|change| &*change.keyspace == "parent") {
            round_of_batch(&batch.changes, "parent", live_rounds, true);
            live_rounds += 1;
        }
    }
    assert_eq!(live_rounds, PROCESS_ROUNDS, "this process's commits on its live feed");
    let mut rounds = [0u32; 2];
    for batch in db.changes_since(0, 100_000).unwrap() {
        for (index, who) in ["parent", "child"].into_iter().enumerate() {
            if batch.changes.iter().any(|change| &*change.keyspace == who) {
                round_of_batch(&batch.changes, who, rounds[index], false);
                rounds[index] += 1;
            }
        }
    }
    assert_eq!(rounds, [PROCESS_ROUNDS; 2], "rounds of each process in the durable feed");
    drop(stream);
    db.close().unwrap();
    let db = Db::open_with(&path, options).unwrap();
    check(&db, "after reopening");
}

/// Another process grows the map past this one's, commit after commit, while two threads of
/// this process read (each read that meets `MDB_MAP_RESIZED` adopts the new size: a resize).
/// Both processes must survive, and the reads see whole commits. `notify`: both processes
/// have cross-process notification on. Repeated with new files for `duration` (at least
/// three times).
fn reading_while_another_process_grows_the_map(notify: bool, duration: Duration) {
    let started = Instant::now();
    let mut attempt = 0;
    while attempt < 3 || started.elapsed() < duration {
        attempt += 1;
        let dir = scratch_dir();
        let path = dir.path().join("db");
        let options =
            DbOptions { map_size_initial_bytes: 1 << 16, durable_feed: notify, cross_process_notify: notify, ..DbOptions::default() };
        let db = Db::open_with(&path, options).unwrap();
        db.keyspace("grown").unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["process_child", "--exact", "--ignored", "--test-threads=1", "--nocapture"])
            .env(CHILD_MODE, if notify { "grow_rounds_notify" } else { "grow_rounds" })
            .env(CHILD_PATH, &path)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| {
                    let grown = db.keyspace("grown").unwrap();
                    while !done.load(Ordering::SeqCst) {
                        let count = db.read(|tx| tx.len(&grown)).unwrap();
                        assert!(GROWN_COUNTS.contains(&count), "{count} records: not a whole commit");
                    }
                });
            }
            let status = child.wait().unwrap();
            done.store(true, Ordering::SeqCst);
            let output = child.wait_with_output().unwrap();
            assert!(status.success(), "attempt {attempt}: the child failed: {}", describe(&std::process::Output { status, ..output }));
        });
        let grown = db.keyspace("grown").unwrap();
        assert_eq!(db.read(|tx| tx.len(&grown)).unwrap(), GROWN_COUNTS[GROWN_COUNTS.len() - 1]);
    }
}

/// Commits of the `grow_rounds` child: round `r` adds `2^(r / 2)` values of 20 KB, from 64 KiB
/// to a few MB (three growths of the map, each adopted by the parent).
const GROWN_ROUNDS: u32 = 10;

/// The record counts after each commit of the `grow_rounds` child.
const GROWN_COUNTS: [u64; GROWN_ROUNDS as usize + 1] = [0, 1, 2, 4, 6, 10, 14, 22, 30, 46, 62];

/// With notification on, the watcher thread, woken by the other process's commits, calls
/// `Env::info` (`CrossProcess::catch_up`, cross_process.rs:98) outside the resize gate while
/// a reader of this process adopts the size the same commit grew to: `mdb_env_info` reads the
/// meta pages through the map the resize is replacing (SIGSEGV in `mdb_env_pick_meta`, as the
/// flush had, see flush_during_resize.rs). Timing-dependent: most runs crash.
///
/// Run in a process of its own, which the crash fails.
#[test]
fn reading_while_another_process_grows_the_map_with_notification_on_does_not_crash() {
    run_isolated("notification_body");
}

#[test]
#[ignore = "run in a process of its own by reading_while_another_process_grows_the_map_with_notification_on_does_not_crash"]
fn notification_body() {
    if std::env::var(CHILD_MODE).as_deref() == Ok("isolated") {
        reading_while_another_process_grows_the_map(true, Duration::from_secs(5));
    }
}

/// Two processes open one new path at the same moment (the second a little later in each
/// pair), with different initial map sizes, and each writes about 3 MB. Before the file
/// exists neither takes the resize lock, and each sizes its map from what it saw before LMDB
/// created the file: the one that opens second must not cut the file (LMDB's `ftruncate` to
/// its map size) below the map of the first. Both must finish without SIGBUS with all their
/// records and the lock file they opened with; and neither open may be refused as
/// `ForeignDatabase` (`check_or_write_version` sees the other's `tessera.meta` keyspace,
/// created in a commit of its own, before the version record, committed in the next).
#[test]
fn two_processes_creating_one_file_at_once_with_different_initial_maps() {
    let dir = scratch_dir();
    let started = Instant::now();
    let mut pairs = 0;
    let mut refused_as_foreign = 0;
    while pairs < 4 || (started.elapsed() < Duration::from_secs(3) && pairs < 40) {
        let path = dir.path().join(format!("db{pairs}"));
        let spawn = |initial: u64, who: &str, delay_micros: u32| {
            Command::new(std::env::current_exe().unwrap())
                .args(["process_child", "--exact", "--ignored", "--test-threads=1", "--nocapture"])
                .env(CHILD_MODE, format!("create_race:{initial}:{who}:{delay_micros}"))
                .env(CHILD_PATH, &path)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        // The second opener starts a little later in each pair, to sweep the race's timing.
        let delay = (pairs as u32 % 10) * 300;
        let children = if pairs % 2 == 0 {
            [spawn(1 << 16, "small", delay), spawn(8 << 20, "large", 0)]
        } else {
            [spawn(1 << 16, "small", 0), spawn(8 << 20, "large", delay)]
        };
        std::thread::sleep(Duration::from_millis(30)); // both are waiting for the go file
        std::fs::write(dir.path().join(format!("db{pairs}.go")), b"go").unwrap();
        for child in children {
            let output = child.wait_with_output().unwrap();
            assert!(output.status.success(), "pair {pairs}: a process creating the file failed: {}", describe(&output));
            refused_as_foreign += usize::from(String::from_utf8_lossy(&output.stdout).contains("refused as foreign"));
        }
        let db = Db::open(&path).unwrap();
        for who in ["small", "large"] {
            let ks = db.keyspace(who).unwrap();
            assert_eq!(db.read(|tx| tx.len(&ks)).unwrap(), 480, "pair {pairs}: {who}");
        }
        drop(db);
        pairs += 1;
    }
    assert_eq!(
        refused_as_foreign, 0,
        "of {pairs} pairs, {refused_as_foreign} times an open of a file another process was creating was refused as foreign"
    );
}

/// A read-only handle (`DbOptions::read_only`: "nothing is written to it, neither a migration
/// nor the blocks a write map reserves") in a process that may not write the data file reads
/// again after another process grew the map past its own. Adopting the new size must not need
/// to write the file. (As root, the reader runs as `nobody`, with the data file not writable
/// to it and the lock file writable, as LMDB needs.)
#[test]
fn a_read_only_handle_follows_a_map_another_process_grew_without_writing_the_file() {
    use std::io::{BufRead, Write};
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, DbOptions { map_size_initial_bytes: 1 << 20, ..DbOptions::default() }).unwrap();
    let (ks, grown) = (db.keyspace("ks").unwrap(), db.keyspace("grown").unwrap());
    db.write(|tx| tx.put(&ks, b"before", b"1")).unwrap();
    let set_mode = |path: &std::path::Path, mode: u32| std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    set_mode(dir.path(), 0o755);
    set_mode(&path, 0o644);
    set_mode(&dir.path().join("db-lock"), 0o666);
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["process_child", "--exact", "--ignored", "--test-threads=1", "--nocapture"])
        .env(CHILD_MODE, "read_only_reader")
        .env(CHILD_PATH, &path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } == 0 {
        command.uid(65534).gid(65534); // nobody: may read the data file, not write it
    }
    let mut child = command.spawn().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("ready") {
        line.clear();
        if stdout.read_line(&mut line).unwrap() == 0 {
            let output = child.wait_with_output().unwrap();
            panic!("the reader ended before it was ready: {}", describe(&output));
        }
    }
    let map_before = db.map_size_bytes();
    db.write(|tx| (0u32..40).try_for_each(|i| tx.put(&grown, &i.to_be_bytes(), &value_of(i, 9, 200_000)))).unwrap();
    assert!(db.map_size_bytes() > 4 * map_before, "the map grew past the reader's");
    child.stdin.take().unwrap().write_all(b"grown\n").unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "the read-only reader failed: {}\n{rest}", describe(&output));
}

/// Another process grows the map past this one's while a thread of this process holds a read
/// transaction; that thread then reads again (a second snapshot, as `Collection::get(&db, ..)`
/// or `Db::read` take while a `ReadTxn` is open). Nothing in `Db::read_txn`'s documentation
/// says a read can fail here, and the error it gets speaks of writing.
#[test]
fn a_second_read_on_a_thread_holding_a_snapshot_after_another_process_grew_the_map() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, DbOptions { map_size_initial_bytes: 1 << 20, ..DbOptions::default() }).unwrap();
    let ks = db.keyspace("ks").unwrap();
    db.write(|tx| tx.put(&ks, b"before", b"1")).unwrap();
    let outer = db.read_txn().unwrap();
    let output = run_child("process_child", "grow", &path);
    assert!(output.status.success(), "{}", describe(&output));
    assert_eq!(outer.get(&ks, b"before").unwrap(), Some(&b"1"[..]), "the held snapshot still reads");
    // LMDB moves a map only with no transaction of the process open, so this read cannot
    // begin: `Db::read_txn` documents the typed error, which must say what to do.
    let second = db.read(|tx| tx.len(&db.keyspace("grown")?));
    match &second {
        Err(error @ Error::GrowthBlocked(_)) => assert!(error.to_string().contains("drop it, then read"), "{error}"),
        other => panic!("a read on this thread while it holds a snapshot: {other:?}"),
    }
    drop(outer);
    let grown = db.keyspace("grown").unwrap();
    assert_eq!(db.read(|tx| tx.len(&grown)).unwrap(), 40);
}

// ---------------------------------------------------------------------------------------------
// A disk that fills up while the map grows.

/// With the write map every byte of the map must have its disk block (else a write through
/// the map on a full disk is SIGBUS), and the file must not be shorter than the map.
fn assert_map_reserved(db: &Db, what: &str) {
    let (map, len, allocated) = (db.map_size_bytes(), file_len(db.path()), allocated_bytes(db.path()));
    assert!(len >= map, "{what}: the file ({len} bytes) is shorter than the map ({map})");
    assert!(allocated >= map, "{what}: {allocated} bytes of the {map}-byte map have disk blocks");
}

/// The simulated disk fills while transactions need the map to grow: a write that cannot get
/// its room is `DiskFull` with nothing of it visible or published; the map grows only as far
/// as the disk allows, writes that fit go on meanwhile, every map byte keeps its block, and
/// once space is freed the same large write commits (once it has room, its closure runs at most
/// once per growth). Every commit is on the feed once, none of the failed ones.
#[test]
fn the_disk_filling_mid_growth_fails_whole_writes_and_writes_resume_when_space_returns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let options = DbOptions { map_size_initial_bytes: 1 << 16, durable_feed: true, ..DbOptions::default() };
    let db = Db::open_with(&path, options.clone()).unwrap();
    let ks = db.keyspace("ks").unwrap();
    let stream = db.subscribe().unwrap();
    let mut model = Model::new();
    let mut committed: Vec<(u64, Model)> = Vec::new(); // each commit's puts
    let write = |db: &Db, puts: &[(u32, usize)], tag: u32, model: &mut Model, committed: &mut Vec<(u64, Model)>| -> tessera::Result<u32> {
        let mut runs = 0;
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = puts.iter().map(|&(key, len)| (key.to_be_bytes().to_vec(), value_of(key, tag, len))).collect();
        let sequence = db.write(|tx| {
            runs += 1;
            pairs.iter().try_for_each(|(k, v)| tx.put(&ks, k, v))?;
            Ok(tx.sequence())
        })?;
        committed.push((sequence, pairs.iter().cloned().collect()));
        model.extend(pairs);
        Ok(runs)
    };
    write(&db, &(0..20).map(|k| (k, 1_000)).collect::<Vec<_>>(), 0, &mut model, &mut committed).unwrap();
    assert_map_reserved(&db, "after the first write");

    // 300 KB left on the disk: 2 MB of values cannot fit, and nothing of them is written.
    db.inject_free_bytes(Some(300 << 10));
    let disk = file_len(&path) + (300 << 10);
    let big: Vec<(u32, usize)> = (1_000..1_200).map(|k| (k, 10_000)).collect();
    let map_before = db.map_size_bytes();
    let result = write(&db, &big, 1, &mut model, &mut committed);
    let map_after = db.map_size_bytes();
    assert!(
        map_after > map_before && disk - map_after < 1 << 16,
        "the map grew from {map_before} to {map_after}: not as far as the {disk}-byte disk allows"
    );
    assert!(matches!(result, Err(Error::DiskFull)), "{result:?}");
    assert!(file_len(&path) <= disk, "the file ({}) grew past the simulated disk ({disk})", file_len(&path));
    assert_eq!(contents(&db, &ks), model, "nothing of the refused write");
    assert_map_reserved(&db, "after DiskFull");

    // Writes that fit the room left still commit, and can grow the map up to the disk's end.
    for n in 0..12u32 {
        let puts: Vec<(u32, usize)> = (0..6).map(|k| (2_000 + n * 6 + k, 3_000)).collect();
        match write(&db, &puts, 2, &mut model, &mut committed) {
            Ok(_) => {}
            Err(Error::DiskFull) => break,
            Err(other) => panic!("write {n} on a nearly full disk: {other:?}"),
        }
        assert!(file_len(&path) <= disk, "the file ({}) grew past the simulated disk ({disk})", file_len(&path));
        assert_map_reserved(&db, &format!("small write {n}"));
    }
    assert_eq!(contents(&db, &ks), model);
    assert!(model.len() > 20 + 6, "small writes went on with the disk nearly full: {} records", model.len());

    // Space again: the large write commits whole.
    db.inject_free_bytes(None);
    let runs = write(&db, &big, 3, &mut model, &mut committed).unwrap();
    assert!(runs <= 3, "the large write ran {runs} times");
    assert_eq!(contents(&db, &ks), model);
    assert_map_reserved(&db, "after space returned");

    // The feed: every commit once, in order, with exactly its puts; nothing of a refused write.
    let mut seen = Vec::new();
    while seen.len() < committed.len() {
        let Some(tessera::FeedEvent::Batch(batch)) = stream.recv_timeout(Duration::from_secs(5)) else { panic!("a commit is missing") };
        let changes: Model =
            batch.changes.iter().filter(|c| &*c.keyspace == "ks").map(|c| (c.key.to_vec(), c.new.as_deref().unwrap().to_vec())).collect();
        seen.push((batch.sequence, changes));
    }
    assert!(stream.recv_timeout(Duration::from_millis(100)).is_none(), "a batch beyond the commits");
    assert!(seen == committed, "the live feed differs from the commits");
    let durable: Vec<(u64, Model)> = db
        .changes_since(0, 1_000)
        .unwrap()
        .into_iter()
        .map(|batch| {
            (
                batch.sequence,
                batch
                    .changes
                    .iter()
                    .filter(|c| &*c.keyspace == "ks")
                    .map(|c| (c.key.to_vec(), c.new.as_deref().unwrap().to_vec()))
                    .collect::<Model>(),
            )
        })
        .filter(|(_, changes)| !changes.is_empty())
        .collect();
    assert!(durable == committed, "the durable feed differs from the commits");
    drop((stream, ks));
    db.close().unwrap();
    let db = Db::open_with(&path, options).unwrap();
    assert_eq!(contents(&db, &db.keyspace("ks").unwrap()), model);
    assert_map_reserved(&db, "after reopening");
}

// ---------------------------------------------------------------------------------------------
// Grouped writes whose groups cross the map's size.

/// Four threads queue grouped writes, some of them large, on a 64 KiB map: groups fill the map
/// and run again. Some closures fail on their second run. Each caller gets the value of its
/// closure's last run (its run count) or its own error; exactly the successful closures'
/// writes are stored; the feed holds each of them once and nothing of a failed one.
#[test]
fn grouped_writes_whose_groups_cross_the_map_keep_exactly_the_successful_members() {
    /// What the test records of each grouped write.
    type Outcome = (u32, u32, tessera::Result<u32>, u32);
    let dir = tempfile::tempdir().unwrap();
    let options =
        DbOptions { map_size_initial_bytes: 1 << 16, durable_feed: true, listener_queue_batches: 100_000, ..DbOptions::default() };
    let db = Db::open_with(dir.path().join("db"), options).unwrap();
    let ks = db.keyspace("ks").unwrap();
    let stream = db.subscribe().unwrap();
    let writes_per_thread = 30u32;
    let outcomes: Vec<Vec<Outcome>> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..4u32)
            .map(|thread| {
                let (db, ks) = (db.clone(), ks.clone());
                scope.spawn(move || {
                    (0..writes_per_thread)
                        .map(|n| {
                            let ks = ks.clone();
                            let runs = Arc::new(AtomicU32::new(0));
                            let counted = runs.clone();
                            let (records, len) = if n % 5 == 4 { (12, 20_000) } else { (3, 700) };
                            let fails_second = n % 7 == 3;
                            // Fails every run, before writing: the rest of its group runs again.
                            let fails_always = n % 4 == 1;
                            let outcome = db.write_grouped(move |tx| {
                                let run = counted.fetch_add(1, Ordering::SeqCst) + 1;
                                if fails_always {
                                    return Err(Error::other(std::io::Error::other(format!("{thread}/{n} always refuses"))));
                                }
                                for i in 0..records {
                                    tx.put(&ks, &[thread as u8, n as u8, i], &value_of(thread << 16 | n, i.into(), len))?;
                                }
                                if fails_second && run == 2 {
                                    return Err(Error::other(std::io::Error::other(format!("{thread}/{n} refuses its second run"))));
                                }
                                Ok(run)
                            });
                            (n, records.into(), outcome, runs.load(Ordering::SeqCst))
                        })
                        .collect()
                })
            })
            .collect();
        threads.into_iter().map(|thread| thread.join().unwrap()).collect()
    });
    let mut model = Model::new();
    let mut failed = 0;
    for (thread, writes) in outcomes.into_iter().enumerate() {
        for (n, records, outcome, runs) in writes {
            let len = if n % 5 == 4 { 20_000 } else { 700 };
            match outcome {
                Ok(value) => {
                    assert!(n % 4 != 1, "{thread}/{n} always fails but got Ok");
                    assert_eq!(value, runs, "{thread}/{n}: the value of its last run");
                    for i in 0..records as u8 {
                        model.insert(vec![thread as u8, n as u8, i], value_of((thread as u32) << 16 | n, i.into(), len));
                    }
                }
                Err(error) if n % 4 == 1 => assert!(error.to_string().contains("always refuses"), "{thread}/{n}: {error:?}"),
                Err(error) => {
                    assert!(n % 7 == 3, "{thread}/{n} failed but never fails: {error:?}");
                    assert_eq!(runs, 2, "{thread}/{n}: failed after {runs} runs");
                    assert!(error.to_string().contains("refuses its second run"), "{error:?}");
                    failed += 1;
                }
            }
        }
    }
    assert!(db.map_size_bytes() >= 1 << 20, "the groups grew the map");
    assert_eq!(contents(&db, &ks), model);
    let mut from_feed = Model::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while from_feed.len() < model.len() && Instant::now() < deadline {
        let Some(event) = stream.recv_timeout(Duration::from_millis(100)) else { continue };
        let tessera::FeedEvent::Batch(batch) = event else { panic!("lagged: {event:?}") };
        for change in batch.changes.iter().filter(|c| &*c.keyspace == "ks") {
            let previous = from_feed.insert(change.key.to_vec(), change.new.as_deref().unwrap().to_vec());
            assert!(previous.is_none(), "key {:?} delivered twice", change.key);
        }
    }
    assert!(stream.recv_timeout(Duration::from_millis(100)).is_none(), "more batches than commits");
    assert!(from_feed == model, "the live feed differs from what was stored ({} vs {} keys)", from_feed.len(), model.len());
    let durable: Model = db
        .changes_since(0, 10_000)
        .unwrap()
        .iter()
        .flat_map(|batch| {
            batch.changes.iter().filter(|c| &*c.keyspace == "ks").map(|c| (c.key.to_vec(), c.new.as_deref().unwrap().to_vec()))
        })
        .collect();
    assert!(durable == model, "the durable feed differs from what was stored");
    let _ = failed; // how many met a second run varies with the threads' timing
}

// ---------------------------------------------------------------------------------------------
// When a closure runs more than once.

/// `Db::write` said a transaction "runs once if it writes less than that quarter" of the map.
/// A transaction that changes one small value in each leaf of a large tree writes few bytes
/// but copies every leaf (LMDB is copy-on-write), so it can need far more room than its bytes:
/// it ran twice. The rustdoc now counts pages, and says such a transaction may run twice; this
/// holds the runs to that (at most twice, and twice only with the map grown) and the result
/// to a model.
#[test]
fn a_transaction_changing_a_value_in_each_of_many_pages_runs_at_most_twice_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let map = 16u64 << 20;
    let db = Db::open_with(dir.path().join("db"), DbOptions { map_size_initial_bytes: map, ..DbOptions::default() }).unwrap();
    let ks = db.keyspace("ks").unwrap();
    // Long keys, tiny values: few records per leaf. Imported in transactions of about 800 KB,
    // until two thirds of the map are used (the map does not grow: more than a quarter, and
    // more than four times the last transaction, stays free).
    let key = |i: u32| {
        let mut key = format!("{i:010}").into_bytes();
        key.resize(400, b'k');
        key
    };
    let mut records = 0u32;
    while db.file_info().unwrap().used_bytes < map * 2 / 3 {
        db.write(|tx| (records..records + 2_000).try_for_each(|i| tx.put(&ks, &key(i), b"a"))).unwrap();
        records += 2_000;
    }
    assert_eq!(db.map_size_bytes(), map, "the import fit the first map");
    db.write(|tx| tx.put(&ks, b"small", b"write")).unwrap(); // the previous transaction is small
    let used = db.file_info().unwrap().used_bytes;
    // One record in every five changes its one-byte value.
    let changed: Vec<u32> = (0..records).step_by(5).collect();
    let written_bytes: u64 = changed.iter().map(|&i| key(i).len() as u64 + 1).sum();
    let mut runs = 0;
    db.write(|tx| {
        runs += 1;
        changed.iter().try_for_each(|&i| tx.put(&ks, &key(i), b"b"))
    })
    .unwrap();
    let quarter = map / 4;
    assert!(written_bytes < quarter, "the transaction wrote {written_bytes} bytes, not less than a quarter of the map ({quarter})");
    assert!(
        runs == 1 || (runs == 2 && db.map_size_bytes() > map),
        "a transaction of {written_bytes} bytes ({used} bytes used) ran its closure {runs} times; the map is now {}",
        db.map_size_bytes()
    );
    db.read(|tx| {
        for i in (0..records).step_by(5) {
            assert_eq!(tx.get(&ks, &key(i))?, Some(&b"b"[..]), "record {i} changed");
        }
        for i in (1..records).step_by(5) {
            assert_eq!(tx.get(&ks, &key(i))?, Some(&b"a"[..]), "record {i} kept");
        }
        Ok(())
    })
    .unwrap();
}

// ---------------------------------------------------------------------------------------------
// Live queries across growth.

/// Two live queries over a collection while each transaction crosses the map (its closure runs
/// again after the map grows), and one transaction that fails on the run that would commit:
/// every commit is delivered once, with the commit's sequence and a result equal to a fresh
/// fetch; the failed transaction, and the runs thrown away, deliver nothing.
#[test]
fn live_queries_see_each_commit_once_across_growth_and_nothing_of_thrown_away_runs() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path().join("db"), DbOptions { map_size_initial_bytes: 1 << 16, ..DbOptions::default() }).unwrap();
    let items = db.collection::<Item>().unwrap();
    let queries = [items.filter_text("group == 3").unwrap(), items.filter_text("group < 5").unwrap()];
    let subscriptions: Vec<_> = queries.iter().map(|query| items.subscribe_query(query).unwrap()).collect();
    for subscription in &subscriptions {
        match subscription.recv_timeout(Duration::from_secs(10)) {
            Some(tessera::live::Event::Initial(result)) => assert_eq!(result.len(), 0),
            other => panic!("expected the initial result, got {}", if other.is_some() { "another event" } else { "nothing" }),
        }
    }
    let check_delivered = |sequence: u64, what: &str| {
        for (query, subscription) in queries.iter().zip(&subscriptions) {
            let fetched = query.fetch(&db).unwrap();
            match subscription.recv_timeout(Duration::from_secs(10)) {
                Some(tessera::live::Event::Changed(change)) => {
                    assert_eq!(change.sequence, sequence, "{what}: the delivered commit");
                    let delivered: Vec<Item> = change.result.iter().map(|item| (**item).clone()).collect();
                    assert!(delivered == fetched, "{what}: the delivered result differs from a fetch");
                }
                Some(_) => panic!("{what}: an event other than Changed"),
                None => panic!("{what}: no delivery"),
            }
            assert!(subscription.recv_timeout(Duration::from_millis(50)).is_none(), "{what}: a second delivery for one commit");
        }
    };
    let mut model: BTreeMap<u32, Item> = BTreeMap::new();
    for round in 0u32..5 {
        let records = 100 + round * 80;
        let mut runs = 0;
        let mut attempt_model = model.clone();
        let sequence = db
            .write(|tx| {
                runs += 1;
                attempt_model = model.clone();
                for i in 0..records {
                    let id = (i * 7 + round * 13) % (records + 50);
                    if i % 9 == 4 && attempt_model.contains_key(&id) {
                        items.delete(tx, &id)?;
                        attempt_model.remove(&id);
                    } else {
                        let mut record = item(id, round);
                        record.payload = value_of(id, round, 1_500 + (i as usize % 3) * 500);
                        items.upsert(tx, &record)?;
                        attempt_model.insert(id, record);
                    }
                }
                Ok(tx.sequence())
            })
            .unwrap();
        model = attempt_model.clone();
        assert!(runs >= 1);
        check_delivered(sequence, &format!("round {round} ({runs} runs)"));
        // Once: a transaction that fills the map and then fails on the run that would commit
        // (it leaves the map grown, so it is not repeated every round).
        if round != 0 {
            continue;
        }
        let (mut runs, mut full_runs) = (0, 0);
        let doomed = (db.map_size_bytes() / 1_000) as u32; // more than the map holds now
        let failed: tessera::Result<()> = db.write(|tx| {
            runs += 1;
            for id in 0..doomed {
                if let Err(error) =
                    items.upsert(tx, &Item { id: 1_000_000 + id, group: 3, title: "doomed".into(), payload: vec![1; 1_500] })
                {
                    full_runs += 1;
                    return Err(error);
                }
            }
            Err(Error::other(std::io::Error::other("refused")))
        });
        assert!(failed.is_err() && full_runs >= 1 && runs == full_runs + 1, "{failed:?}, {runs} runs, {full_runs} full");
        for subscription in &subscriptions {
            assert!(subscription.recv_timeout(Duration::from_millis(100)).is_none(), "round {round}: a delivery for a failed transaction");
        }
    }
    let stored: BTreeMap<u32, Item> = items.all().fetch(&db).unwrap().into_iter().map(|item| (item.id, item)).collect();
    assert!(stored == model, "the collection differs from the model");
}
