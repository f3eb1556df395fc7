//! Adversarial review of the durable feed's retention by bytes (`FeedRetention::bytes_max`) and
//! of `Db::feed_extent`: what they must never do while returning `Ok` (a silent gap, the cap
//! not holding, the newest commit removed, old values left without their entry, wrong figures).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tessera::{Db, DbOptions, Error, FeedEvent, FeedRetention};

const CHILD_ROLE: &str = "TESSERA_RETENTION_ROLE";
const CHILD_PATH: &str = "TESSERA_RETENTION_PATH";

fn options(notify: bool, retention: FeedRetention) -> DbOptions {
    DbOptions { durable_feed: true, cross_process_notify: notify, feed_retention: retention, ..DbOptions::default() }
}

/// Runs the ignored test `retention_child` as a child process playing `role` on `path`.
fn run_child(role: &str, path: &Path) {
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["retention_child", "--exact", "--ignored", "--test-threads=1", "--nocapture"])
        .env(CHILD_ROLE, role)
        .env(CHILD_PATH, path)
        .output()
        .unwrap();
    assert!(child.status.success(), "{role}: {}{}", String::from_utf8_lossy(&child.stdout), String::from_utf8_lossy(&child.stderr));
}

/// Where a child reports a number to its parent.
fn report_path(path: &Path, what: &str) -> PathBuf {
    let mut report = path.as_os_str().to_owned();
    report.push(format!(".{what}"));
    report.into()
}

fn read_report(path: &Path, what: &str) -> u64 {
    std::fs::read_to_string(report_path(path, what)).unwrap().trim().parse().unwrap()
}

#[test]
#[ignore = "run by the tests of this file as a child process"]
fn retention_child() {
    let (Ok(role), Ok(path)) = (std::env::var(CHILD_ROLE), std::env::var(CHILD_PATH)) else { return };
    let path = PathBuf::from(path);
    match role.as_str() {
        // Turns cross-process notification on for the file and rewrites one key with large
        // values: each commit keeps the previous value in `tessera.feed.old`.
        "notify_writer" => {
            let db = Db::open_with(&path, options(true, FeedRetention::default())).unwrap();
            let notes = db.keyspace("notes").unwrap();
            for n in 0..8u8 {
                db.write(|tx| tx.put(&notes, b"k", &vec![n; 40 * 1024])).unwrap();
            }
            let extent = db.feed_extent().unwrap();
            std::fs::write(report_path(&path, "notify_writer"), extent.bytes.to_string()).unwrap();
        }
        // A reader of a file that has notification on, opened read-only.
        "read_only" => {
            let db = Db::open_with(&path, DbOptions { read_only: true, ..DbOptions::default() }).unwrap();
            let extent = db.feed_extent().unwrap();
            std::fs::write(report_path(&path, "read_only"), extent.bytes.to_string()).unwrap();
        }
        // Commits with a cap that keeps only the newest commit, as fast as it can.
        "trimming_writer" => {
            let retention = FeedRetention { bytes_max: 0, ..FeedRetention::default() };
            let db = Db::open_with(&path, options(true, retention)).unwrap();
            let notes = db.keyspace("notes").unwrap();
            let mut last = 0;
            for n in 0..40u32 {
                last = db.write(|tx| tx.put(&notes, &n.to_be_bytes(), &[7; 3000]).map(|()| tx.sequence())).unwrap();
            }
            std::fs::write(report_path(&path, "trimming_writer"), last.to_string()).unwrap();
        }
        // Subscribes, then reports what reaches it of the trimming writer's 40 commits.
        "watcher" => {
            let db = Db::open_with(&path, options(true, FeedRetention::default())).unwrap();
            let stream = db.subscribe().unwrap();
            let first = db.read(|tx| Ok(tx.sequence())).unwrap();
            std::fs::write(report_path(&path, "ready"), "1").unwrap();
            let deadline = Instant::now() + Duration::from_secs(60);
            while !report_path(&path, "go").exists() {
                assert!(Instant::now() < deadline, "no go");
                std::thread::sleep(Duration::from_millis(10));
            }
            let last = read_report(&path, "go");
            let (mut delivered, mut lagged, mut quiet_since) = (Vec::new(), 0u64, Instant::now());
            // Until the last commit, or a reported loss and nothing more (a gap ends the
            // catch-up at its snapshot's newest commit).
            while delivered.last() != Some(&last) && !(lagged > 0 && quiet_since.elapsed() > Duration::from_secs(1)) {
                assert!(Instant::now() < deadline, "delivered {delivered:?}, lagged {lagged}");
                match stream.recv_timeout(Duration::from_millis(100)) {
                    Some(FeedEvent::Batch(batch)) => delivered.push(batch.sequence),
                    Some(FeedEvent::Lagged { missed }) => lagged += missed,
                    None => continue,
                }
                quiet_since = Instant::now();
            }
            assert!(delivered.iter().all(|&sequence| sequence > first) && delivered.windows(2).all(|pair| pair[0] < pair[1]));
            std::fs::write(report_path(&path, "delivered"), delivered.len().to_string()).unwrap();
            std::fs::write(report_path(&path, "lagged"), lagged.to_string()).unwrap();
        }
        other => panic!("unknown role {other}"),
    }
}

/// `FeedExtent::bytes` is the figure `bytes_max` caps, so it counts `tessera.feed.old` in every
/// process: one that opened the file before another process turned notification on, and a
/// read-only one. Before the fix, both reported the bytes of `tessera.feed` alone (the old
/// values were counted only when the process had opened them at open), while the writers'
/// cap counted both: a monitor compared the wrong figure with the cap.
#[test]
fn feed_extent_counts_the_old_values_in_every_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, options(false, FeedRetention::default())).unwrap();
    let notes = db.keyspace("notes").unwrap();
    db.write(|tx| tx.put(&notes, b"k", &[0; 40 * 1024])).unwrap();
    run_child("notify_writer", &path);
    run_child("read_only", &path);
    let truth = read_report(&path, "notify_writer");
    let extent = db.feed_extent().unwrap();
    assert!(truth > 2 * 7 * 40 * 1024, "the feed and its old values hold 7 rewrites of 40 KiB each: {truth}");
    let read_only = read_report(&path, "read_only");
    assert_eq!(
        (extent.bytes, read_only),
        (truth, truth),
        "this process, which opened the file before notification was on; a read-only one"
    );
    // This process writes once more: its cap counts the old values (and the figure with it).
    db.write(|tx| tx.put(&notes, b"k", &[9; 40 * 1024])).unwrap();
    assert!(db.feed_extent().unwrap().bytes > truth);
}

/// A small deterministic generator (the tests must replay).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The keys of `tessera.feed` and of `tessera.feed.old`, read through LMDB (the file closed).
fn stored_keys(path: &Path) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut options = heed::EnvOpenOptions::new().read_txn_without_tls();
    options.max_dbs(128).map_size(1 << 34);
    // SAFETY: the path is a regular file (no sub-directory), as tessera opens it, and nothing
    // else has it open in this process.
    unsafe { options.flags(heed::EnvFlags::NO_SUB_DIR) };
    // SAFETY: as above.
    let env = unsafe { options.open(path) }.unwrap();
    let tx = env.read_txn().unwrap();
    let keys = |name: &str| -> Vec<Vec<u8>> {
        match env.open_database::<heed::types::Bytes, heed::types::Bytes>(&tx, Some(name)).unwrap() {
            Some(db) => db.iter(&tx).unwrap().map(|entry| entry.unwrap().0.to_vec()).collect(),
            None => Vec::new(),
        }
    };
    (keys("tessera.feed"), keys("tessera.feed.old"))
}

/// Checks everything retention promises after each commit: `committed` lists, in order, the
/// sequences of the commits that have a feed entry.
fn check_invariants(db: &Db, committed: &[u64], retention: FeedRetention, slow_cursor: u64, case: &str) {
    let extent = db.feed_extent().unwrap();
    let kept: Vec<u64> = db.changes_since(0, usize::MAX).unwrap().iter().map(|batch| batch.sequence).collect();
    if committed.is_empty() {
        assert!(kept.is_empty(), "{case}");
        return;
    }
    // The newest commit is always kept, and what is kept is a suffix, none skipped.
    assert!(!kept.is_empty(), "{case}: the newest commit was removed");
    assert!(kept.len() <= committed.len(), "{case}");
    assert_eq!(kept, committed[committed.len() - kept.len()..], "{case}: the kept commits are not the newest ones");
    assert!(kept.len() as u64 <= retention.commits_max, "{case}: {} commits kept", kept.len());
    assert!(extent.bytes <= retention.bytes_max || kept.len() == 1, "{case}: {} bytes in {} commits", extent.bytes, kept.len());
    // The figures agree with the reads.
    assert_eq!(extent.commits, kept.len() as u64, "{case}");
    assert_eq!(extent.oldest_kept, Some(kept[0]), "{case}");
    assert_eq!(extent.newest, db.read(|tx| Ok(tx.sequence())).unwrap(), "{case}");
    assert!(extent.removed_through < kept[0], "{case}: removed through {} but {} kept", extent.removed_through, kept[0]);
    let removed = &committed[..committed.len() - kept.len()];
    if let Some(&last_removed) = removed.last() {
        assert!(extent.removed_through >= last_removed, "{case}: commit {last_removed} removed, the mark says {}", extent.removed_through);
        // Every cursor before a removed commit is expired, never a read past it.
        for &sequence in removed {
            match db.changes_since(sequence - 1, usize::MAX) {
                Err(Error::FeedCursorExpired { .. }) => {}
                Ok(batches) if sequence == 1 => assert!(batches.is_empty() || batches[0].sequence == kept[0], "{case}"),
                other => panic!("{case}: cursor {} before removed commit {sequence}: {:?}", sequence - 1, other.map(|b| b.len())),
            }
        }
    }
    // A cursor at the mark reads every kept commit.
    let from_mark: Vec<u64> = db.changes_since(extent.removed_through, usize::MAX).unwrap().iter().map(|batch| batch.sequence).collect();
    assert_eq!(from_mark, kept, "{case}");
    // The consumer that never acknowledges: expired once a commit after its cursor is gone.
    let slow = db.consumer("slow").unwrap();
    let lost = removed.iter().any(|&sequence| sequence > slow_cursor);
    match slow.changes(usize::MAX) {
        Err(Error::FeedCursorExpired { cursor, oldest_kept }) => {
            assert!(lost, "{case}: expired with nothing lost");
            assert_eq!(cursor, slow_cursor, "{case}");
            assert!(oldest_kept <= kept[0], "{case}");
        }
        Ok(batches) => {
            assert!(!lost, "{case}: the slow consumer read Ok past removed commits");
            let read: Vec<u64> = batches.iter().map(|batch| batch.sequence).collect();
            let expected: Vec<u64> = committed.iter().copied().filter(|&sequence| sequence > slow_cursor).collect();
            assert_eq!(read, expected, "{case}");
        }
        Err(other) => panic!("{case}: {other}"),
    }
}

/// One random run: commits of random sizes (some rewriting keys, so that old values are kept,
/// some changing nothing), a fast consumer acknowledging now and then, under random caps.
fn random_run(seed: u64, notify: bool, retention: FeedRetention, map_size_initial_bytes: u64) {
    let case = format!("seed {seed}, notify {notify}, {retention:?}, map {map_size_initial_bytes}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, DbOptions { map_size_initial_bytes, ..options(notify, retention) }).unwrap();
    let notes = db.keyspace("notes").unwrap();
    let slow = db.consumer("slow").unwrap();
    let slow_cursor = slow.cursor().unwrap();
    let fast = db.consumer("fast").unwrap();
    let mut rng = Rng(seed);
    let mut committed = Vec::new();
    // The model of `notes`: key -> value length (a value is its key's byte, repeated).
    let mut values = std::collections::HashMap::new();
    for _ in 0..60 {
        let puts: Vec<(u8, usize)> = (0..1 + rng.below(3))
            .map(|_| {
                let len = match rng.below(4) {
                    0 => rng.below(100) as usize,
                    1 => 1000 + rng.below(3000) as usize,
                    2 => 5000 + rng.below(40_000) as usize,
                    _ => 0,
                };
                (rng.below(6) as u8, len)
            })
            .collect();
        let nothing = rng.below(10) == 0;
        let sequence = db
            .write(|tx| {
                if nothing {
                    tx.delete(&notes, b"missing")?;
                    return Ok(None);
                }
                for &(key, len) in &puts {
                    tx.put(&notes, &[key], &vec![key; len])?;
                }
                Ok(Some(tx.sequence()))
            })
            .unwrap();
        // A commit that changed a value has an entry (the newest, never removed); one that
        // wrote values back as they were may have one too.
        let before = values.clone();
        if !nothing {
            for &(key, len) in &puts {
                values.insert(key, len);
            }
        }
        let has_entry = sequence.is_some_and(|sequence| db.feed_digest_through(sequence).unwrap().map(|(at, _)| at) == Some(sequence));
        assert!(has_entry || values == before, "{case}: commit {sequence:?} changed values and is not in the feed");
        if has_entry {
            committed.push(sequence.unwrap());
        }
        check_invariants(&db, &committed, retention, slow_cursor, &case);
        if rng.below(4) == 0 {
            match fast.changes(usize::MAX) {
                Ok(batches) => {
                    if let Some(last) = batches.last() {
                        fast.ack(last.sequence).unwrap();
                    }
                }
                Err(Error::FeedCursorExpired { .. }) => {
                    // Resynchronised from a snapshot: on from the newest commit.
                    fast.ack(db.read(|tx| Ok(tx.sequence())).unwrap()).unwrap();
                }
                Err(other) => panic!("{case}: {other}"),
            }
        }
    }
    if map_size_initial_bytes < 1 << 20 {
        assert!(db.map_size_bytes() > map_size_initial_bytes, "{case}: the map grew");
    }
    // In the file: the feed's entries are the newest commits, and each has its old values,
    // none left over, when the file has notification on.
    drop((slow, fast));
    db.close().unwrap();
    let (feed, olds) = stored_keys(&path);
    let newest: Vec<Vec<u8>> = committed[committed.len() - feed.len()..].iter().map(|sequence| sequence.to_be_bytes().to_vec()).collect();
    assert_eq!(feed, newest, "{case}");
    let expected_olds = if notify { feed } else { Vec::new() };
    assert_eq!(olds, expected_olds, "{case}: old values without their entry, or an entry without its old values");
}

#[test]
fn random_commits_under_byte_caps_keep_a_suffix_within_the_cap_and_expire_the_rest() {
    let caps = [0, 1, 4096, 20_000, 64 * 1024, 256 * 1024, 1 << 30];
    let mut seed = 1;
    for &bytes_max in &caps {
        for commits_max in [2, 100_000] {
            for notify in [false, true] {
                seed += 1;
                random_run(seed, notify, FeedRetention { commits_max, bytes_max }, 4 << 20);
            }
        }
    }
}

/// A map that starts small: commits run again after `MapFull` (the closure and the feed's
/// append with its trimming), and what they leave must be what a single run leaves.
#[test]
fn byte_caps_hold_across_map_growth_retries() {
    for (seed, bytes_max) in [(100, 64 * 1024), (101, 300 * 1024), (102, 0)] {
        for notify in [false, true] {
            random_run(seed, notify, FeedRetention { commits_max: 100_000, bytes_max }, 64 * 1024);
        }
    }
}

/// Another process whose cap keeps only its newest commit trims commits a watcher (stopped
/// meanwhile) has not read: the watcher's stream reports the loss (`FeedEvent::Lagged`, from
/// `Error::CrossProcessGap`), never skips the commits silently.
#[test]
fn commits_another_process_trimmed_before_a_watcher_read_them_are_reported_as_a_gap() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    drop(Db::open_with(&path, options(true, FeedRetention::default())).unwrap());
    let mut watcher = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["retention_child", "--exact", "--ignored", "--test-threads=1", "--nocapture"])
        .env(CHILD_ROLE, "watcher")
        .env(CHILD_PATH, &path)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !report_path(&path, "ready").exists() {
        assert!(Instant::now() < deadline, "the watcher did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid = watcher.id() as libc::pid_t;
    // SAFETY: signals to the child this test spawned and has not waited for.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let mut writer = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["retention_child", "--exact", "--ignored", "--test-threads=1", "--nocapture"])
        .env(CHILD_ROLE, "trimming_writer")
        .env(CHILD_PATH, &path)
        .spawn()
        .unwrap();
    // A watcher stopped inside LMDB's reader-table lock (a few microseconds of each look)
    // would hold the writer up: then it is let go on, and only the weaker claim is checked.
    let stopped_throughout = loop {
        if let Some(status) = writer.try_wait().unwrap() {
            assert!(status.success(), "the trimming writer failed");
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    if !stopped_throughout {
        assert!(writer.wait().unwrap().success(), "the trimming writer failed");
    }
    std::fs::write(report_path(&path, "go"), read_report(&path, "trimming_writer").to_string()).unwrap();
    assert!(watcher.wait().unwrap().success(), "the watcher failed");
    let (delivered, lagged) = (read_report(&path, "delivered"), read_report(&path, "lagged"));
    assert!(delivered == 40 || lagged > 0, "{delivered} of the other process's 40 commits delivered, and no loss reported");
    if stopped_throughout {
        assert!(delivered < 40 && lagged > 0, "stopped while the other process trimmed: {delivered} delivered, {lagged} lagged");
    }
}

/// Commits whose old values are large and whose feed entries are small (deletes of large
/// values, with cross-process notification on): the cap counts the old values, so each
/// commit costs about a large value, and the cap holds about `bytes_max / value` of them.
#[test]
fn a_cap_counting_large_old_values_removes_only_as_many_commits_as_it_needs() {
    const VALUE_BYTES: usize = 100 * 1024;
    const BYTES_MAX: u64 = 1 << 20;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        // The large values, written before the feed was on: no entries of theirs.
        let db = Db::open(&path).unwrap();
        let notes = db.keyspace("notes").unwrap();
        for n in 0..60u32 {
            db.write(|tx| tx.put(&notes, &n.to_be_bytes(), &vec![1; VALUE_BYTES])).unwrap();
        }
    }
    let db = Db::open_with(&path, options(true, FeedRetention { bytes_max: BYTES_MAX, ..FeedRetention::default() })).unwrap();
    let notes = db.keyspace("notes").unwrap();
    let mut fewest_after_warmup = u64::MAX;
    let mut counts = Vec::new();
    for n in 0..60u32 {
        db.write(|tx| tx.delete(&notes, &n.to_be_bytes()).map(drop)).unwrap();
        let extent = db.feed_extent().unwrap();
        assert!(extent.bytes <= BYTES_MAX, "{extent:?}");
        counts.push(extent.commits);
        if n >= 20 {
            fewest_after_warmup = fewest_after_warmup.min(extent.commits);
        }
    }
    // Each commit holds one old value of 26 pages (104 KiB): 9 fit in 1 MiB with the trees.
    assert!(fewest_after_warmup >= 7, "commits kept after each commit: {counts:?}");
}
