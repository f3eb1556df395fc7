//! Review of copies of a live database (`Db::copy_compacted`), `Db::file_info`, `Db::sync`,
//! and the migration of files written by older storage formats.
//!
//! Tests marked "failed before its fix" showed a defect of the code as reviewed (2026-12-01); the others check
//! behaviour found correct.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};
use tessera::collection::Record;
use tessera::{Db, DbOptions, Durability, Error};

// ---------------------------------------------------------------------------------------------
// Helpers.

#[derive(Debug, Clone, PartialEq, Record)]
#[record(name = "entries", version = 1)]
struct Entry {
    #[record(key)]
    id: u32,
    #[record(index)]
    group: u32,
    title: String,
}

fn entry(id: u32) -> Entry {
    Entry { id, group: id % 7, title: format!("entry {id} {}", "t".repeat((id % 50) as usize)) }
}

fn with_feed() -> DbOptions {
    DbOptions { durable_feed: true, ..DbOptions::default() }
}

fn with_notify() -> DbOptions {
    DbOptions { durable_feed: true, cross_process_notify: true, ..DbOptions::default() }
}

fn read_only() -> DbOptions {
    DbOptions { read_only: true, ..DbOptions::default() }
}

const CHILD_MODE: &str = "COPIES_REVIEW_CHILD_MODE";
const CHILD_PATH: &str = "COPIES_REVIEW_CHILD_PATH";

fn child(mode: &str, path: &Path) -> Command {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command.args(["child_process", "--exact", "--ignored", "--test-threads=1", "--nocapture"]).env(CHILD_MODE, mode).env(CHILD_PATH, path);
    command
}

fn spawn(mode: &str, path: &Path) -> Child {
    child(mode, path).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

fn describe(output: &std::process::Output) -> String {
    use std::os::unix::process::ExitStatusExt;
    format!(
        "status {:?} (signal {:?})\nstdout: {}\nstderr: {}",
        output.status.code(),
        output.status.signal(),
        String::from_utf8_lossy(&output.stdout).lines().take(40).collect::<Vec<_>>().join("\n"),
        String::from_utf8_lossy(&output.stderr).lines().take(40).collect::<Vec<_>>().join("\n"),
    )
}

/// The storage format version recorded in the file at `path`, read through LMDB directly.
fn recorded_version(path: &Path) -> u32 {
    // SAFETY: the file is a regular file and no `Db` of this process has it open.
    let env = unsafe { heed::EnvOpenOptions::new().max_dbs(128).flags(heed::EnvFlags::NO_SUB_DIR).open(path) }.unwrap();
    let txn = env.read_txn().unwrap();
    let meta: heed::Database<heed::types::Bytes, heed::types::Bytes> = env.open_database(&txn, Some("tessera.meta")).unwrap().unwrap();
    let version = u32::from_be_bytes(meta.get(&txn, b"format_version").unwrap().unwrap().try_into().unwrap());
    drop(txn);
    env.prepare_for_closing().wait();
    version
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR")))
}

fn copy_of(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::copy(fixture(name), &path).unwrap();
    (dir, path)
}

/// The long dictionary keys of the v1/v2 fixtures (`tests/fixtures/make_v1.rs`).
fn long_key(n: u32) -> String {
    format!("{n:04}-{}", "x".repeat(600))
}

/// Reads what the v1/v2 fixtures hold, through a migrated (or current) `db`.
fn fixture_reads(db: &Db) {
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{report}");
    let items = db.dyn_collection("items").unwrap();
    assert_eq!(items.all().count(db).unwrap(), 200);
    let dictionary = db.dictionary().unwrap();
    for n in 0..5 {
        assert_eq!(dictionary.get::<String>(&long_key(n)).unwrap(), Some(format!("long value {n}")), "long key {n}");
    }
    for n in 0..100u32 {
        assert_eq!(dictionary.get::<i64>(&format!("int {n}")).unwrap(), Some(n as i64 * 3));
    }
}

/// Runs `work` on a thread of its own; `None` if it has not returned within `limit` (the
/// thread is then left behind).
fn within<T: Send + 'static>(limit: Duration, work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(work());
    });
    receiver.recv_timeout(limit).ok()
}

/// Writes commit `n`: an entry, a counter and a raw key, in one transaction.
fn write_commit(db: &Db, entries: &tessera::collection::Collection<Entry>, n: u32) {
    let counter = db.keyspace("counter").unwrap();
    let raw = db.keyspace("raw").unwrap();
    db.write(|tx| {
        entries.insert(tx, &entry(n))?;
        tx.put(&raw, &n.to_be_bytes(), &vec![n as u8; 200 + (n as usize % 300)])?;
        tx.put(&counter, b"count", &(n + 1).to_be_bytes())
    })
    .unwrap();
}

/// What a copy of a database written by `write_commit` must hold: every commit up to its
/// counter, whole, and nothing else; with the feed, one feed entry per such commit after the
/// first one it holds, and every consumer's cursor no later than the newest commit.
fn verify_copy(path: &Path, feed: bool) -> u32 {
    let db = Db::open_with(path, read_only()).unwrap();
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{}: {report}", path.display());
    let counter = db.keyspace("counter").ok();
    let count = match counter {
        Some(counter) => {
            db.read(|tx| Ok(tx.get(&counter, b"count")?.map(|v| u32::from_be_bytes(v.try_into().unwrap())))).unwrap().unwrap_or(0)
        }
        None => 0,
    };
    if count > 0 {
        let raw = db.keyspace("raw").unwrap();
        assert_eq!(db.read(|tx| tx.len(&raw)).unwrap(), u64::from(count), "raw keys of {count} commits");
        let entries = db.dyn_collection("entries").unwrap();
        assert_eq!(entries.all().count(&db).unwrap(), count as usize, "entries of {count} commits");
        let group3 = entries.filter_text("group == 3").unwrap().count(&db).unwrap();
        assert_eq!(group3, (0..count).filter(|n| n % 7 == 3).count());
    }
    if feed {
        let newest = db.read_txn().unwrap().sequence();
        let batches = db.changes_since(0, 1_000_000).unwrap();
        assert!(batches.windows(2).all(|pair| pair[0].sequence < pair[1].sequence));
        assert!(batches.last().is_none_or(|last| last.sequence <= newest));
        let counted: Vec<u32> = batches
            .iter()
            .flat_map(|batch| batch.changes.iter())
            .filter(|change| &*change.keyspace == "counter")
            .map(|change| u32::from_be_bytes(change.new.as_deref().unwrap().try_into().unwrap()))
            .collect();
        // The feed ends at the copied counter, with no gap and no duplicate.
        if let Some(&last) = counted.last() {
            assert_eq!(last, count, "the feed's last commit is the copy's newest");
            let first = counted[0];
            assert_eq!(counted, (first..=last).collect::<Vec<_>>(), "no gap, no duplicate");
        }
        for consumer in db.consumers().unwrap() {
            assert!(consumer.cursor().unwrap() <= newest, "a consumer's cursor past the copy's newest commit");
        }
    }
    count
}

// ---------------------------------------------------------------------------------------------
// The child process.

#[test]
#[ignore = "run as a child process by the tests of copies_review.rs"]
fn child_process() {
    let (Ok(mode), Ok(path)) = (std::env::var(CHILD_MODE), std::env::var(CHILD_PATH)) else { return };
    let path = PathBuf::from(path);
    match mode.as_str() {
        // Opens the file (migrating it), reads the fixture, prints, closes.
        "migrate" => {
            println!("opening");
            let db = Db::open(&path).unwrap();
            println!("opened");
            fixture_reads(&db);
            db.close().unwrap();
            println!("child done");
        }
        // Opens the file (migrating it) and holds it until killed.
        "migrate_and_wait" => {
            println!("opening");
            let db = Db::open(&path).unwrap();
            println!("opened");
            std::thread::sleep(Duration::from_secs(60));
            drop(db);
        }
        // Writes commits of `write_commit` for 3 seconds, with notification across processes.
        "write_loop" => {
            let db = Db::open_with(&path, with_notify()).unwrap();
            let entries = db.collection::<Entry>().unwrap();
            let counter = db.keyspace("counter").unwrap();
            let start =
                db.read(|tx| Ok(tx.get(&counter, b"count")?.map(|v| u32::from_be_bytes(v.try_into().unwrap())))).unwrap().unwrap_or(0);
            let started = Instant::now();
            let mut n = start;
            while started.elapsed() < Duration::from_secs(3) {
                write_commit(&db, &entries, n);
                n += 1;
            }
            drop(entries);
            db.close().unwrap();
            println!("child done: {} commits", n - start);
        }
        // Grows the file well past the map another process has, in one commit.
        "grow" => {
            let db = Db::open(&path).unwrap();
            let ks = db.keyspace("big").unwrap();
            db.write(|tx| (0u32..400).try_for_each(|i| tx.put(&ks, &i.to_be_bytes(), &vec![i as u8; 100_000]))).unwrap();
            db.close().unwrap();
            println!("child done");
        }
        other => panic!("unknown mode {other}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Copies: where they go.

/// Correct behaviour (passes): a destination that exists — a file, a directory, the source
/// itself, its lock file — is refused with `Error::Io` (already exists) and left as it was;
/// the source stays writable and whole.
#[test]
fn a_copy_to_a_path_that_exists_is_refused_and_leaves_it() {
    for feed in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let db = Db::open_with(&path, if feed { with_feed() } else { DbOptions::default() }).unwrap();
        let entries = db.collection::<Entry>().unwrap();
        for n in 0..20 {
            write_commit(&db, &entries, n);
        }
        let existing = dir.path().join("existing");
        std::fs::write(&existing, b"keep me").unwrap();
        let directory = dir.path().join("a directory");
        std::fs::create_dir(&directory).unwrap();
        let lock = dir.path().join("db-lock");
        let lock_bytes = std::fs::read(&lock).unwrap();
        let source_len = std::fs::metadata(&path).unwrap().len();
        for destination in [&existing, &directory, &path, &lock] {
            match db.copy_compacted(destination) {
                Err(Error::Io(error)) => assert_eq!(error.kind(), std::io::ErrorKind::AlreadyExists, "{}", destination.display()),
                other => panic!("copy to {}: expected Io(AlreadyExists), got {other:?}", destination.display()),
            }
        }
        assert_eq!(std::fs::read(&existing).unwrap(), b"keep me");
        assert!(directory.is_dir() && std::fs::read_dir(&directory).unwrap().next().is_none());
        assert_eq!(std::fs::read(&lock).unwrap().len(), lock_bytes.len());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), source_len);
        write_commit(&db, &entries, 20);
        assert!(db.check().unwrap().is_ok());
        // A destination in a missing directory: NotFound, nothing made.
        let missing = dir.path().join("no such dir").join("copy");
        assert!(matches!(db.copy_compacted(&missing), Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::NotFound));
        assert!(!dir.path().join("no such dir").exists());
    }
}

/// Failed before its fix (it hung): `copy_compacted` called inside a write closure of a file with the durable
/// feed on never returns. The page-by-page copy (`mdb_env_copyfd0`) takes LMDB's writer mutex
/// to read the meta pages, which this thread already holds for its write transaction: a
/// self-deadlock, holding the writer lock of the file for every thread and process. Nested
/// writes are `Error::WouldDeadlock`; a copy inside a write must be refused the same way (or
/// made from a snapshot without the writer mutex), never hang. The compacting copy (no feed)
/// returns.
#[test]
fn a_copy_inside_a_write_closure_returns_instead_of_hanging() {
    for feed in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let db = Db::open_with(&path, if feed { with_feed() } else { DbOptions::default() }).unwrap();
        let ks = db.keyspace("ks").unwrap();
        db.write(|tx| tx.put(&ks, b"before", b"1")).unwrap();
        let destination = dir.path().join("copy");
        let inside = {
            let (db, destination) = (db.clone(), destination.clone());
            within(Duration::from_secs(20), move || {
                let ks = db.keyspace("ks").unwrap();
                let result = db.write(|tx| {
                    tx.put(&ks, b"inside", b"2")?;
                    db.copy_compacted(&destination).map(|_| ())
                });
                format!("{result:?}")
            })
        };
        let Some(outcome) = inside else {
            // Leave the directory behind: the stuck thread still has the file open.
            std::mem::forget(dir);
            panic!("feed {feed}: copy_compacted inside a write closure did not return within 20 s (self-deadlock on LMDB's writer mutex)");
        };
        // Either refused (nothing copied) or a copy of the committed state before the write.
        if outcome.starts_with("Ok") {
            let copy = Db::open_with(&destination, read_only()).unwrap();
            let ks = copy.keyspace("ks").unwrap();
            assert!(copy.read(|tx| Ok(tx.get(&ks, b"before")?.is_some())).unwrap());
            assert!(!copy.read(|tx| Ok(tx.get(&ks, b"inside")?.is_some())).unwrap(), "the copy holds an uncommitted write");
        } else {
            assert!(!destination.exists(), "feed {feed}: refused, but a destination was left: {outcome}");
        }
    }
}

/// Correct behaviour (passes): a copy onto a full disk (a 1 MiB tmpfs, full or nearly) fails
/// with `Error::DiskFull`, leaves no destination behind, and leaves the source whole and
/// writable (the page-by-page copy holds LMDB's writer mutex while it writes the meta pages).
/// Skipped where tmpfs cannot be mounted.
#[test]
fn a_copy_onto_a_full_disk_is_disk_full_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("small");
    std::fs::create_dir(&mount).unwrap();
    let mounted = Command::new("mount").args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"]).arg(&mount).status().is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: cannot mount a tmpfs");
        return;
    }
    let result = std::panic::catch_unwind(|| {
        for feed in [false, true] {
            for leave_free in [0usize, 64 << 10] {
                let path = dir.path().join(format!("db-{feed}-{leave_free}"));
                let db = Db::open_with(&path, if feed { with_feed() } else { DbOptions::default() }).unwrap();
                let entries = db.collection::<Entry>().unwrap();
                let raw = db.keyspace("raw").unwrap();
                db.write(|tx| (0u32..40).try_for_each(|i| tx.put(&raw, &i.to_be_bytes(), &vec![i as u8; 60_000]))).unwrap();
                for n in 0..10 {
                    write_commit(&db, &entries, n);
                }
                // Fill the small disk, leaving `leave_free` bytes.
                let filler = mount.join("filler");
                let total = 1usize << 20;
                let _ = std::fs::write(&filler, vec![0u8; total - leave_free.min(total)]);
                let destination = mount.join("copy");
                let outcome = db.copy_compacted(&destination);
                assert!(matches!(outcome, Err(Error::DiskFull)), "feed {feed}, {leave_free} free: {outcome:?}");
                assert!(!destination.exists(), "feed {feed}: a partial copy was left on the full disk");
                let _ = std::fs::remove_file(&filler);
                let wrote = {
                    let db = db.clone();
                    within(Duration::from_secs(20), move || {
                        let entries = db.collection::<Entry>().unwrap();
                        write_commit(&db, &entries, 10);
                    })
                };
                assert!(wrote.is_some(), "feed {feed}: a write after the failed copy hung (writer mutex left locked)");
                assert!(db.check().unwrap().is_ok());
                drop(entries);
            }
        }
    });
    let _ = Command::new("umount").arg(&mount).status();
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

// ---------------------------------------------------------------------------------------------
// Copies: consistency while others write.

/// Correct behaviour (passes): copies made while other threads write (with and without the
/// durable feed) are each one commit: every entry with its index entries and its raw key up
/// to the copied counter, the feed ending at that counter with no gap or duplicate, and a
/// consumer's cursor no later than the copy's newest commit.
#[test]
fn copies_made_while_threads_write_are_each_one_commit() {
    for feed in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let db = Db::open_with(&path, if feed { with_feed() } else { DbOptions::default() }).unwrap();
        let entries = db.collection::<Entry>().unwrap();
        if feed {
            db.consumer("replica").unwrap();
        }
        let done = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..2)
            .map(|w| {
                let (db, done) = (db.clone(), done.clone());
                std::thread::spawn(move || {
                    let entries = db.collection::<Entry>().unwrap();
                    let counter = db.keyspace("counter").unwrap();
                    let replica = if feed { Some(db.consumer("replica").unwrap()) } else { None };
                    let mut acks = 0u32;
                    while !done.load(Ordering::SeqCst) {
                        // One writer at a time picks the next number inside its transaction.
                        let raw = db.keyspace("raw").unwrap();
                        db.write(|tx| {
                            let n = tx.get(&counter, b"count")?.map_or(0, |v| u32::from_be_bytes(v.try_into().unwrap()));
                            entries.insert(tx, &entry(n))?;
                            tx.put(&raw, &n.to_be_bytes(), &vec![n as u8; 200 + (n as usize % 300)])?;
                            tx.put(&counter, b"count", &(n + 1).to_be_bytes())
                        })
                        .unwrap();
                        if let Some(replica) = &replica
                            && w == 0
                        {
                            acks += 1;
                            if acks.is_multiple_of(10)
                                && let Some(last) = replica.changes(5).unwrap().last()
                            {
                                replica.ack(last.sequence).unwrap();
                            }
                        }
                    }
                })
            })
            .collect();
        let mut counts = Vec::new();
        for copy in 0..12 {
            std::thread::sleep(Duration::from_millis(30));
            let destination = dir.path().join(format!("copy{copy}"));
            db.copy_compacted(&destination).unwrap();
            counts.push(verify_copy(&destination, feed));
        }
        done.store(true, Ordering::SeqCst);
        writers.into_iter().for_each(|w| w.join().unwrap());
        assert!(counts.windows(2).all(|pair| pair[0] <= pair[1]), "{counts:?}");
        assert!(*counts.last().unwrap() > 0);
        drop(entries);
    }
}

/// Correct behaviour (passes): copies of a file with the durable feed and notification across
/// processes, made while another process writes, are each one commit; a copy opened to
/// write takes commits after the copied ones, its consumer reads them, and `changes_since`
/// from the copied newest sees exactly them.
#[test]
fn copies_made_while_another_process_writes_are_each_one_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, with_notify()).unwrap();
    let entries = db.collection::<Entry>().unwrap();
    db.consumer("replica").unwrap();
    for n in 0..5 {
        write_commit(&db, &entries, n);
    }
    let writer = spawn("write_loop", &path);
    let mut counts = Vec::new();
    let started = Instant::now();
    let mut copy = 0;
    while started.elapsed() < Duration::from_millis(2_500) {
        std::thread::sleep(Duration::from_millis(100));
        let destination = dir.path().join(format!("copy{copy}"));
        copy += 1;
        db.copy_compacted(&destination).unwrap();
        counts.push(verify_copy(&destination, true));
    }
    let output = writer.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", describe(&output));
    assert!(counts.windows(2).all(|pair| pair[0] <= pair[1]), "{counts:?}");
    assert!(counts.last().unwrap() > &5, "the child wrote while copies were made: {counts:?}");
    // The last copy, opened to write: its commits come after the copied ones.
    let last = dir.path().join(format!("copy{}", copy - 1));
    let copied = Db::open(&last).unwrap();
    let newest = copied.read_txn().unwrap().sequence();
    let replica = copied.consumer("replica").unwrap();
    let pending_before = replica.changes(1_000_000).unwrap().len();
    let copied_entries = copied.collection::<Entry>().unwrap();
    let count = counts.last().copied().unwrap();
    write_commit(&copied, &copied_entries, count);
    let after = copied.changes_since(newest, 100).unwrap();
    assert_eq!(after.len(), 1, "exactly the copy's own commit after the copied newest");
    assert_eq!(replica.changes(1_000_000).unwrap().len(), pending_before + 1);
    drop((copied_entries, entries));
}

// ---------------------------------------------------------------------------------------------
// file_info.

/// Correct behaviour (passes): `file_info` after writes, deletes and growth: the file's
/// length, pages in use within the map and the file, the last transaction id the newest
/// commit's sequence, the format and the feed as the file has them.
#[test]
fn file_info_figures_follow_writes_deletes_and_growth() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open(&path).unwrap();
    let ks = db.keyspace("ks").unwrap();
    let check = |db: &Db| {
        let info = db.file_info().unwrap();
        assert_eq!(info.file_bytes, std::fs::metadata(&path).unwrap().len());
        assert!(info.used_bytes <= info.map_bytes, "{info:?}");
        assert!(info.used_bytes <= info.file_bytes, "{info:?}");
        assert_eq!(info.used_bytes % info.page_bytes, 0);
        assert_eq!(info.last_txn_id, db.read_txn().unwrap().sequence(), "{info:?}");
        assert_eq!(info.format_version, tessera::store::STORAGE_FORMAT_VERSION);
        info
    };
    let empty = check(&db);
    assert!(!empty.durable_feed);
    db.write(|tx| (0u32..2000).try_for_each(|i| tx.put(&ks, &i.to_be_bytes(), &[7u8; 3000]))).unwrap();
    let grown = check(&db);
    assert!(grown.used_bytes >= 2000 * 3000, "{grown:?}");
    assert!(grown.map_bytes > empty.map_bytes);
    db.write(|tx| (0u32..2000).try_for_each(|i| tx.delete(&ks, &i.to_be_bytes()).map(|_| ()))).unwrap();
    // Deleting frees pages inside the used range (LMDB does not shrink it): the figures stay
    // consistent.
    check(&db);
    drop((ks, db));
    let db = Db::open_with(&path, with_feed()).unwrap();
    assert!(check(&db).durable_feed);
    drop(db);
    let db = Db::open_with(&path, read_only()).unwrap();
    let info = check(&db);
    assert!(info.durable_feed);
}

/// Failed before its fix: `file_info` reads LMDB's figures before anything adopts a map another process grew:
/// `used_bytes` (from the newest meta page, read through the shared map) is then larger than
/// `map_bytes` (this process's old map), which the struct's own documentation example holds
/// as an invariant (`info.used_bytes <= info.map_bytes`); a caller computing free space as
/// `map_bytes - used_bytes` underflows. `file_info` should adopt a resized map first (begin its
/// read before `env.info()`), so that its figures are of one moment.
#[test]
fn file_info_after_another_process_grew_the_map_is_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open(&path).unwrap();
    let before = db.file_info().unwrap();
    let output = child("grow", &path).output().unwrap();
    assert!(output.status.success(), "{}", describe(&output));
    let info = db.file_info().unwrap();
    assert!(info.used_bytes > before.map_bytes, "the child grew the file past this process's map: {before:?} {info:?}");
    assert!(info.used_bytes <= info.map_bytes, "used bytes beyond the map: {info:?}");
    assert!(info.used_bytes <= info.file_bytes, "{info:?}");
}

// ---------------------------------------------------------------------------------------------
// Db::sync.

/// Failed before its fix: after one failed background flush, the background flusher never flushes again.
/// `Syncer::background_step` calls `sync_through`, which hands back (and so re-stores) the
/// error of the earlier flush without flushing: every later `Buffered` commit stays unflushed
/// — the promise "flushed to stable storage in the background within `max_delay`" broken —
/// until a foreground `Db::sync` or `Immediate` write takes the error. Shown with two injected
/// failures: a background flush at the second commit's deadline would use the second one, so
/// the second `Db::sync` (after the first reported the failure) would flush and succeed; it
/// fails instead, because it is the first flush since the first failure.
#[test]
fn buffered_commits_are_flushed_in_the_background_after_a_failed_flush() {
    let dir = tempfile::tempdir().unwrap();
    let options = DbOptions { durability: Durability::Buffered { max_delay: Duration::from_millis(10) }, ..DbOptions::default() };
    let db = Db::open_with(dir.path().join("db"), options).unwrap();
    let ks = db.keyspace("ks").unwrap();
    db.sync().unwrap();
    db.inject_flush_failures(2);
    db.write(|tx| tx.put(&ks, b"a", b"1")).unwrap();
    std::thread::sleep(Duration::from_millis(400)); // the background flush fails
    db.write(|tx| tx.put(&ks, b"b", b"2")).unwrap();
    std::thread::sleep(Duration::from_millis(400)); // the background flush should run (and fail) again
    assert!(matches!(db.sync(), Err(Error::NotDurable(_))), "a failed flush is reported once");
    let second = db.sync();
    assert!(second.is_ok(), "the background flusher made no flush after the first failure: {second:?}");
}

// ---------------------------------------------------------------------------------------------
// Migration of older files.

/// Correct behaviour (passes): an older file (formats 1, 2, 4) opened read-only is refused
/// with `Error::ReadOnly` (it needs the migration), byte for byte as it was, with no lock
/// file left beside it.
#[test]
fn an_older_file_opened_read_only_is_refused_and_untouched() {
    for name in ["v1.tessera", "v2.tessera", "v4.tessera"] {
        let (dir, path) = copy_of(name);
        let before = std::fs::read(&path).unwrap();
        match Db::open_with(&path, read_only()) {
            Err(Error::ReadOnly { refused, .. }) => assert!(refused.contains("migrating"), "{name}: {refused}"),
            Err(other) => panic!("{name}: expected ReadOnly, got {other:?}"),
            Ok(_) => panic!("{name}: expected ReadOnly, got a handle"),
        }
        assert_eq!(std::fs::read(&path).unwrap(), before, "{name}: written by a read-only open");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left.len(), 1, "{name}: files left beside it: {left:?}");
    }
}

/// Correct behaviour (passes): two processes opening one older file at once both succeed,
/// one migrating it and the other reading the migrated file (the same hash key: both read
/// the long dictionary keys), and the file is then of the current format and checks out.
#[test]
fn two_processes_opening_an_older_file_at_once_both_read_it() {
    for name in ["v1.tessera", "v2.tessera"] {
        for _ in 0..3 {
            let (_dir, path) = copy_of(name);
            let children: Vec<Child> = (0..2).map(|_| spawn("migrate", &path)).collect();
            for child in children {
                let output = child.wait_with_output().unwrap();
                assert!(output.status.success(), "{name}: {}", describe(&output));
                assert!(String::from_utf8_lossy(&output.stdout).contains("child done"), "{name}: {}", describe(&output));
            }
            assert_eq!(recorded_version(&path), tessera::store::STORAGE_FORMAT_VERSION);
            let db = Db::open(&path).unwrap();
            fixture_reads(&db);
        }
    }
}

/// A copy of `v2.tessera` with a keyspace of `entries` raw values (format 2 has no checksums)
/// added through LMDB alone, so that its migration takes a while.
fn large_v2(dir: &Path, entries: u32) -> PathBuf {
    let path = dir.join("large-v2.tessera");
    std::fs::copy(fixture("v2.tessera"), &path).unwrap();
    // SAFETY: a regular file no `Db` has open.
    let env = unsafe { heed::EnvOpenOptions::new().max_dbs(128).map_size(1 << 30).flags(heed::EnvFlags::NO_SUB_DIR).open(&path) }.unwrap();
    let mut txn = env.write_txn().unwrap();
    let bulk: heed::Database<heed::types::Bytes, heed::types::Bytes> = env.create_database(&mut txn, Some("bulk")).unwrap();
    for i in 0..entries {
        bulk.put(&mut txn, &i.to_be_bytes(), &bulk_value(i)).unwrap();
    }
    txn.commit().unwrap();
    env.prepare_for_closing().wait();
    let _ = std::fs::remove_file(dir.join("large-v2.tessera-lock"));
    path
}

fn bulk_value(i: u32) -> Vec<u8> {
    format!("value {i} {}", "v".repeat((i % 90) as usize)).into_bytes()
}

/// Keys and values as LMDB has them.
type RawEntries = Vec<(Vec<u8>, Vec<u8>)>;

/// The raw values of `bulk` as LMDB has them, with the recorded version.
fn raw_bulk(path: &Path) -> (u32, RawEntries) {
    let version = recorded_version(path);
    // SAFETY: a regular file no `Db` has open.
    let env = unsafe { heed::EnvOpenOptions::new().max_dbs(128).flags(heed::EnvFlags::NO_SUB_DIR).open(path) }.unwrap();
    let txn = env.read_txn().unwrap();
    let bulk: heed::Database<heed::types::Bytes, heed::types::Bytes> = env.open_database(&txn, Some("bulk")).unwrap().unwrap();
    let entries = bulk.iter(&txn).unwrap().map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap()).collect();
    drop(txn);
    env.prepare_for_closing().wait();
    (version, entries)
}

/// Correct behaviour (passes): a migration killed at any moment leaves the file of the old
/// format with every value as it was, or of the new one with every value sealed; opened
/// again it migrates (or not) and reads whole.
#[test]
fn a_migration_killed_midway_leaves_the_old_file_or_the_new_one() {
    const ENTRIES: u32 = 120_000;
    let dir = tempfile::tempdir().unwrap();
    let template = large_v2(dir.path(), ENTRIES);
    let mut outcomes = Vec::new();
    for delay_ms in [0u64, 30, 120, 160, 200, 240, 280, 300, 600, 1000, 2500] {
        let run = tempfile::tempdir().unwrap();
        let path = run.path().join("db");
        std::fs::copy(&template, &path).unwrap();
        let mut child = spawn("migrate_and_wait", &path);
        // Wait until the child is about to open, then kill it after `delay_ms`.
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        loop {
            line.clear();
            let read = std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
            assert!(read > 0, "the child ended before opening");
            if line.contains("opening") {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        let (version, bulk) = raw_bulk(&path);
        assert_eq!(bulk.len(), ENTRIES as usize);
        match version {
            2 => {
                for (i, (key, value)) in bulk.iter().enumerate() {
                    assert_eq!(key, &(i as u32).to_be_bytes());
                    assert_eq!(value, &bulk_value(i as u32), "a format-2 file with entry {i} changed");
                }
            }
            8 => {
                for (i, (_, value)) in bulk.iter().enumerate() {
                    assert_eq!(value.len(), bulk_value(i as u32).len() + 4, "a format-8 file with entry {i} not sealed");
                }
            }
            other => panic!("killed after {delay_ms} ms: version {other}"),
        }
        outcomes.push((delay_ms, version));
        let db = Db::open(&path).unwrap();
        fixture_reads(&db);
        let bulk_ks = db.keyspace("bulk").unwrap();
        db.read(|tx| {
            for i in [0u32, 1, ENTRIES / 2, ENTRIES - 1] {
                assert_eq!(tx.get(&bulk_ks, &i.to_be_bytes())?, Some(&bulk_value(i)[..]));
            }
            Ok(())
        })
        .unwrap();
    }
    eprintln!("kill delay -> version found: {outcomes:?}");
}

/// Correct behaviour (passes): an older file migrated, then copied (compacted): the copy is
/// of the current format, checks out read-only and reads as the fixture.
#[test]
fn a_migrated_file_copied_reads_whole() {
    for name in ["v1.tessera", "v2.tessera", "v4.tessera", "v6.tessera"] {
        let (dir, path) = copy_of(name);
        let db = Db::open(&path).unwrap();
        let destination = dir.path().join("copy");
        db.copy_compacted(&destination).unwrap();
        let copy = Db::open_with(&destination, read_only()).unwrap();
        let info = copy.file_info().unwrap();
        assert_eq!(info.format_version, tessera::store::STORAGE_FORMAT_VERSION, "{name}");
        let report = copy.check().unwrap();
        assert!(report.is_ok(), "{name}: {report}");
        if name != "v6.tessera" && name != "v4.tessera" {
            drop(copy);
            let copy = Db::open(&destination).unwrap();
            fixture_reads(&copy);
        }
    }
}

/// Correct behaviour (passes): a format-6 file copied by a read-only handle (no migration) is
/// still format 6 in the copy, and the copy migrates when opened to write.
#[test]
fn a_format_6_file_copied_read_only_migrates_in_the_copy() {
    let (dir, path) = copy_of("v6.tessera");
    let db = Db::open_with(&path, read_only()).unwrap();
    let destination = dir.path().join("copy");
    db.copy_compacted(&destination).unwrap();
    drop(db);
    assert_eq!(std::fs::read(&path).unwrap(), std::fs::read(fixture("v6.tessera")).unwrap());
    assert_eq!(recorded_version(&destination), 6);
    let copy = Db::open(&destination).unwrap();
    assert_eq!(copy.file_info().unwrap().format_version, 8);
    assert!(copy.check().unwrap().is_ok());
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
    assert_eq!(found, 1, "{}", String::from_utf8_lossy(from));
    std::fs::write(path, bytes).unwrap();
}

/// Failed before its fix (the NUL case): an older file whose keyspace name in LMDB's main tree is damaged to
/// hold a NUL byte, opened to write, is `Error::Panicked` ("called `Result::unwrap()` on an
/// `Err` value: NulError"): `migrate::upgrade` passes every name of `keyspace_names` to heed's
/// `open_database`, which unwraps `CString::new(name)`. A file of the current format with the
/// same damage opens and `Db::check` names the keyspace (`check_salvage_review.rs`), and so
/// does an older file whose damaged name is not UTF-8 (passes here). The migration should pass
/// over a name `names::check` refuses (as `open_existing_keyspaces` does), or refuse the file
/// with `Error::Corrupted` naming the keyspace.
#[test]
fn an_older_file_with_a_damaged_keyspace_name_is_a_typed_error_or_opens() {
    for (case, to) in [("not UTF-8", &b"rawspac\xFFzq"[..]), ("a NUL", &b"rawspac\x00zq"[..])] {
        let (_dir, path) = copy_of("v2.tessera");
        {
            // SAFETY: a regular file no `Db` has open.
            let env = unsafe { heed::EnvOpenOptions::new().max_dbs(128).flags(heed::EnvFlags::NO_SUB_DIR).open(&path) }.unwrap();
            let mut txn = env.write_txn().unwrap();
            let raw: heed::Database<heed::types::Bytes, heed::types::Bytes> = env.create_database(&mut txn, Some("rawspacezq")).unwrap();
            raw.put(&mut txn, b"k", b"v").unwrap();
            txn.commit().unwrap();
            env.prepare_for_closing().wait();
        }
        let before = std::fs::read(&path).unwrap();
        replace_bytes(&path, b"rawspacezq", to);
        let opened = std::panic::catch_unwind(|| Db::open(&path).map(|db| db.check().map(|report| report.to_string())));
        match opened {
            Err(_) => panic!("{case}: opening panicked"),
            Ok(Ok(report)) => {
                let report = report.unwrap();
                assert!(report.contains("damaged"), "{case}: migrated, and check says nothing of the damaged name: {report}");
            }
            Ok(Err(Error::Corrupted(message))) => assert!(message.contains("rawspac"), "{case}: {message}"),
            Ok(Err(other)) => panic!("{case}: expected Corrupted naming the keyspace, or an open whose check names it; got {other:?}"),
        }
        drop(before);
    }
}
