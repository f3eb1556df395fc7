//! Adversarial review of the store core: transactions, snapshots, keyspaces, bounds,
//! durability (crates/tessera/src/store/).
//!
//! Tests marked `FIXED` failed on the code the review read (2026-11-30) and showed a defect,
//! each fixed since; the others check behaviour that held already.

use std::ops::Bound;
use std::time::{Duration, Instant};
use tessera::store::{KEY_LEN_MAX, Snapshot};
use tessera::{Db, DbOptions, Durability, Error};

fn temp() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("review.tessera");
    (dir, path)
}

fn get(db: &Db, keyspace: &tessera::Keyspace, key: &[u8]) -> tessera::Result<Option<Vec<u8>>> {
    db.read(|tx| Ok(tx.get(keyspace, key)?.map(<[u8]>::to_vec)))
}

fn keys(entries: tessera::store::Entries<'_>) -> tessera::Result<Vec<Vec<u8>>> {
    entries.map(|entry| entry.map(|(key, _)| key.to_vec())).collect()
}

// ---------------------------------------------------------------------------------------------
// Keyspace handles and read transactions that open keyspaces (`Db::check`)
// ---------------------------------------------------------------------------------------------

/// FIXED.
///
/// Defect: `Db::check` opens the file's keyspaces that this process has not opened yet inside
/// its read transaction (`Db::existing_keyspace`, store/mod.rs), and LMDB closes every handle a
/// read transaction opened when that transaction is aborted (`mdb_dbis_update(txn, 0)`). A
/// write that creates a keyspace meanwhile (`Db::keyspace`, store/mod.rs `internal_keyspace`)
/// is given the same handle slot (the writer's `mt_numdbs` does not count the reader's slot),
/// and the check's end then closes the new keyspace's handle: the `Keyspace` cached in
/// `Inner::keyspaces` reads as `Error::Lmdb("Invalid argument")`, and once a later keyspace
/// reuses the freed slot, the old handle silently reads and writes the other keyspace's tree.
///
/// Correct: a keyspace handle stays valid and names its own keyspace whatever other threads
/// read or check meanwhile.
#[test]
fn a_keyspace_created_while_check_runs_keeps_its_own_handle() {
    let (_dir, path) = temp();
    {
        let db = Db::open_with(&path, DbOptions { durability: Durability::BUFFERED, ..DbOptions::default() }).unwrap();
        let big = db.keyspace("big").unwrap();
        for batch in 0u32..20 {
            db.write(|tx| (0u32..5_000).try_for_each(|i| tx.put(&big, &(batch * 5_000 + i).to_be_bytes(), &[7u8; 16]))).unwrap();
        }
        db.close().unwrap();
    }
    // Opened again: "big" is in the file, but this process has no handle for it yet.
    let db = Db::open(&path).unwrap();
    let started = Instant::now();
    assert!(db.check().unwrap().problems.is_empty());
    let check_time = started.elapsed();
    let mut wrong = Vec::new();
    for (attempt, share) in [0.05f64, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.85].into_iter().enumerate() {
        let created_name = format!("created{attempt}");
        let later_name = format!("later{attempt}");
        let created = std::thread::scope(|scope| {
            let checking = scope.spawn(|| db.check().unwrap());
            std::thread::sleep(check_time.mul_f64(share));
            let created = db.keyspace(&created_name).unwrap();
            db.write(|tx| tx.put(&created, b"k", b"created's value")).unwrap();
            checking.join().unwrap();
            created
        });
        let later = db.keyspace(&later_name).unwrap();
        db.write(|tx| tx.put(&later, b"k", b"later's value")).unwrap();
        let read = get(&db, &created, b"k");
        if !matches!(&read, Ok(Some(value)) if value == b"created's value") {
            wrong.push(format!("attempt {attempt}: keyspace {created_name:?} reads {read:?}"));
        }
        // A write through the old handle must land in its own keyspace, not in `later`.
        let _ = db.write(|tx| tx.put(&created, b"k2", b"through created"));
        let leaked = get(&db, &later, b"k2");
        if !matches!(leaked, Ok(None)) {
            wrong.push(format!("attempt {attempt}: a write to {created_name:?} landed in {later_name:?}: {leaked:?}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

// ---------------------------------------------------------------------------------------------
// Bounds: ranges, prefixes, reverse ranges, keys at the size limit
// ---------------------------------------------------------------------------------------------

fn abc_db() -> (tempfile::TempDir, Db, tessera::Keyspace) {
    let (dir, path) = temp();
    let db = Db::open(&path).unwrap();
    let ks = db.keyspace("ks").unwrap();
    db.write(|tx| {
        for key in [&b"a"[..], b"b", b"c", b"d", &[0xFF], &[0xFF, 0xFF], &[0xFF, 0xFF, 0x00], &[b'm'; KEY_LEN_MAX]] {
            tx.put(&ks, key, b"v")?;
        }
        Ok(())
    })
    .unwrap();
    (dir, db, ks)
}

/// A range bound longer than any key (over 511 bytes) is a valid question: the keys after
/// "mmm…m" (600 bytes) are the 0xFF keys. Correct: `Ok` with those keys, never an LMDB error
/// nor a wrong set.
#[test]
fn a_range_bound_longer_than_any_key_answers_correctly() {
    let (_dir, db, ks) = abc_db();
    let long = vec![b'm'; 600];
    let after = db.read(|tx| keys(tx.range(&ks, &long[..]..)?));
    assert_eq!(after.unwrap(), vec![vec![0xFF], vec![0xFF, 0xFF], vec![0xFF, 0xFF, 0x00]]);
    let before = db.read(|tx| keys(tx.range(&ks, ..&long[..])?)).unwrap();
    assert_eq!(before.len(), 5, "a, b, c, d and the 511-byte key: {before:?}");
    let prefixed = db.read(|tx| Ok(tx.prefix(&ks, &long)?.count()));
    assert_eq!(prefixed.unwrap(), 0, "no key is 600 bytes long");
    let inside = db.write(|tx| Ok(tx.prefix(&ks, &long)?.count()));
    assert_eq!(inside.unwrap(), 0);
    let rev = db.read(|tx| keys(tx.entries_rev(&ks, Bound::Unbounded, Bound::Excluded(&long[..]))?)).unwrap();
    assert_eq!(rev.len(), 5, "{rev:?}");
}

/// Range and prefix edges: 0xFF prefixes, a reverse (empty) range, inclusive and exclusive
/// ends, descending walks with each kind of bound, keys at the limit.
#[test]
fn range_prefix_and_reverse_bounds_are_exact() {
    let (_dir, db, ks) = abc_db();
    db.read(|tx| {
        assert_eq!(keys(tx.prefix(&ks, &[0xFF])?)?, vec![vec![0xFF], vec![0xFF, 0xFF], vec![0xFF, 0xFF, 0x00]]);
        assert_eq!(keys(tx.prefix(&ks, &[0xFF, 0xFF])?)?, vec![vec![0xFF, 0xFF], vec![0xFF, 0xFF, 0x00]]);
        assert_eq!(keys(tx.prefix(&ks, &[0xFF, 0xFF, 0xFF])?)?, Vec::<Vec<u8>>::new());
        assert_eq!(keys(tx.prefix(&ks, &[b'm'; KEY_LEN_MAX])?)?.len(), 1);
        assert_eq!(tx.prefix(&ks, b"")?.count(), 8);
        assert_eq!(keys(tx.range(&ks, &b"c"[..]..&b"b"[..])?)?, Vec::<Vec<u8>>::new(), "reversed bounds: nothing");
        assert_eq!(keys(tx.range(&ks, &b"b"[..]..=&b"d"[..])?)?, vec![b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]);
        assert_eq!(keys(tx.range(&ks, (Bound::Excluded(&b"b"[..]), Bound::Excluded(&b"d"[..])))?)?, vec![b"c".to_vec()]);
        assert_eq!(keys(tx.range(&ks, &b""[..]..&b"b"[..])?)?, vec![b"a".to_vec()]);
        assert_eq!(keys(tx.range(&ks, ..=&b""[..])?)?, Vec::<Vec<u8>>::new());
        // Descending walks.
        let rev = |start, end| keys(tx.entries_rev(&ks, start, end)?);
        assert_eq!(rev(Bound::Included(&b"b"[..]), Bound::Excluded(&b"d"[..]))?, vec![b"c".to_vec(), b"b".to_vec()]);
        assert_eq!(rev(Bound::Excluded(&b"b"[..]), Bound::Included(&b"d"[..]))?, vec![b"d".to_vec(), b"c".to_vec()]);
        assert_eq!(rev(Bound::Included(&b"b"[..]), Bound::Included(&b"bb"[..]))?, vec![b"b".to_vec()]);
        assert_eq!(rev(Bound::Included(&b"a"[..]), Bound::Excluded(&b"a"[..]))?, Vec::<Vec<u8>>::new());
        assert_eq!(rev(Bound::Included(&b"d"[..]), Bound::Included(&b"b"[..]))?, Vec::<Vec<u8>>::new());
        assert_eq!(rev(Bound::Excluded(&[0xFF, 0xFF][..]), Bound::Unbounded)?, vec![vec![0xFF, 0xFF, 0x00]]);
        assert_eq!(rev(Bound::Unbounded, Bound::Excluded(&b"b"[..]))?, vec![b"a".to_vec()]);
        assert_eq!(rev(Bound::Unbounded, Bound::Included(&b""[..]))?, Vec::<Vec<u8>>::new());
        assert_eq!(rev(Bound::Included(&b""[..]), Bound::Excluded(&b"b"[..]))?, vec![b"a".to_vec()]);
        Ok(())
    })
    .unwrap();
}

/// Empty values are values; a delete says whether the key was there; `insert_new` keeps the
/// first value.
#[test]
fn empty_values_deletes_and_insert_new_say_what_happened() {
    let (_dir, path) = temp();
    let db = Db::open(&path).unwrap();
    let ks = db.keyspace("ks").unwrap();
    db.write(|tx| tx.put(&ks, b"empty", b"")).unwrap();
    assert_eq!(get(&db, &ks, b"empty").unwrap(), Some(Vec::new()));
    assert_eq!(db.read(|tx| tx.len(&ks)).unwrap(), 1);
    assert!(!db.write(|tx| tx.delete(&ks, b"missing")).unwrap());
    assert!(db.write(|tx| tx.delete(&ks, b"empty")).unwrap());
    assert!(!db.write(|tx| tx.delete(&ks, b"empty")).unwrap());
    assert!(db.write(|tx| tx.insert_new(&ks, b"n", b"")).unwrap());
    assert!(!db.write(|tx| tx.insert_new(&ks, b"n", b"x")).unwrap());
    assert_eq!(get(&db, &ks, b"n").unwrap(), Some(Vec::new()));
    // Key exactly at the limit: stored and read; one over: typed error, nothing written.
    let at = [3u8; KEY_LEN_MAX];
    db.write(|tx| tx.put(&ks, &at, b"at")).unwrap();
    assert_eq!(get(&db, &ks, &at).unwrap().as_deref(), Some(&b"at"[..]));
    let over = [3u8; KEY_LEN_MAX + 1];
    let refused = db.write(|tx| {
        tx.put(&ks, b"before", b"1")?;
        tx.put(&ks, &over, b"over")
    });
    assert!(matches!(refused, Err(Error::KeySize { len, max: KEY_LEN_MAX }) if len == KEY_LEN_MAX + 1), "{refused:?}");
    assert_eq!(get(&db, &ks, b"before").unwrap(), None, "the failed transaction wrote nothing");
}

// ---------------------------------------------------------------------------------------------
// Keyspace handles used with another database, or after their database was closed
// ---------------------------------------------------------------------------------------------

/// FIXED.
///
/// Defect: a `Keyspace` is an LMDB handle number plus the address of the environment it came
/// from (heed's `env_ident`), with no tie to its `Db` (store/mod.rs `struct Keyspace`). Kept
/// past `Db::close` and used with the same file opened again, a read panics inside heed
/// ("The database environment doesn't match the transaction's environment"): `Db::read` has
/// no `catch_unwind` and `get_checked` (store/txn.rs) does not check the handle's origin. Were
/// the new environment allocated at the old address, heed's check would pass and the handle
/// number would name whichever keyspace the new `Db` opened first (here "b").
///
/// Correct: a typed error (or a's own value); never a panic, never another keyspace's data.
#[test]
fn a_keyspace_kept_past_close_never_reads_another_keyspace() {
    let (_dir, path) = temp();
    let a = {
        let db = Db::open(&path).unwrap();
        let a = db.keyspace("a").unwrap();
        let b = db.keyspace("b").unwrap();
        db.write(|tx| {
            tx.put(&a, b"k", b"a's value")?;
            tx.put(&b, b"k", b"b's value")
        })
        .unwrap();
        drop(b);
        db.close().unwrap();
        a
    };
    // Opened again, several times: "b" is opened first, so it takes the handle number "a" had.
    let mut outcomes = Vec::new();
    for _ in 0..30 {
        let db = Db::open(&path).unwrap();
        let b_again = db.keyspace("b").unwrap();
        assert_eq!(get(&db, &b_again, b"k").unwrap().as_deref(), Some(&b"b's value"[..]));
        let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| get(&db, &a, b"k")));
        let outcome = match read {
            Ok(Ok(Some(value))) => format!("Ok({:?})", String::from_utf8_lossy(&value)),
            Ok(Ok(None)) => "Ok(None)".to_owned(),
            Ok(Err(error)) => format!("Err({error})"),
            Err(_) => "panic".to_owned(),
        };
        outcomes.push(outcome);
        drop(b_again);
        db.close().unwrap();
    }
    // Correct: a typed error every time (or a's own value); never b's value, None or a panic.
    let wrong: Vec<_> = outcomes.iter().filter(|o| o.starts_with("Ok(\"b") || *o == "Ok(None)" || *o == "panic").collect();
    assert!(wrong.is_empty(), "the old handle of \"a\" read: {outcomes:?}");
}

/// FIXED.
///
/// Defect: a keyspace of one open database used in a read of another panics inside heed
/// ("The database environment doesn't match the transaction's environment"): `ReadTxn::get`
/// (store/txn.rs, `get_checked`) hands the handle to heed unchecked, and a read has no
/// `catch_unwind`. (A write reports it as `Error::Panicked`.)
///
/// Correct: a typed error naming the mistake, as the rest of the API does; no panic.
#[test]
fn a_keyspace_of_another_database_is_a_typed_error_not_a_panic() {
    let (_dir, path) = temp();
    let other_path = path.with_file_name("other.tessera");
    let db = Db::open(&path).unwrap();
    let other = Db::open(&other_path).unwrap();
    let mine = db.keyspace("ks").unwrap();
    let _theirs = other.keyspace("ks").unwrap();
    db.write(|tx| tx.put(&mine, b"k", b"v")).unwrap();
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| get(&other, &mine, b"k")));
    assert!(
        matches!(&read, Ok(Err(Error::ForeignKeyspace { keyspace })) if keyspace == "ks"),
        "a read of another database's keyspace: {:?}",
        read.as_ref().map(|r| r.is_ok())
    );
    let write = other.write(|tx| tx.put(&mine, b"k", b"w"));
    assert!(matches!(write, Err(Error::ForeignKeyspace { .. })), "{write:?}");
    let inserted = other.write(|tx| tx.insert_new(&mine, b"new", b"w"));
    assert!(matches!(inserted, Err(Error::ForeignKeyspace { .. })), "{inserted:?}");
    assert_eq!(get(&db, &mine, b"k").unwrap().as_deref(), Some(&b"v"[..]), "nothing written through the other handle");
}

// ---------------------------------------------------------------------------------------------
// Write closures: errors, panics, re-entrance, snapshots taken inside
// ---------------------------------------------------------------------------------------------

/// A panic or an `Err` after writes leaves nothing behind, the database stays usable, a write
/// inside a write is `WouldDeadlock`, and a read through the `Db` inside a write closure sees
/// the last commit (not the open transaction's writes), then every read after the commit sees
/// it, on this thread and others.
#[test]
fn write_closures_roll_back_whole_and_reads_around_them_are_consistent() {
    let (_dir, path) = temp();
    let db = Db::open(&path).unwrap();
    let ks = db.keyspace("ks").unwrap();
    db.write(|tx| tx.put(&ks, b"k", b"0")).unwrap();
    // Read first, so that the Db keeps this snapshot.
    assert_eq!(get(&db, &ks, b"k").unwrap().as_deref(), Some(&b"0"[..]));
    let outside = db
        .write(|tx| {
            tx.put(&ks, b"k", b"1")?;
            let nested = db.write(|tx| tx.put(&ks, b"nested", b"x"));
            assert!(matches!(nested, Err(Error::WouldDeadlock { .. })), "{nested:?}");
            get(&db, &ks, b"k")
        })
        .unwrap();
    assert_eq!(outside.as_deref(), Some(&b"0"[..]), "a read through the Db inside the closure sees the last commit");
    assert_eq!(get(&db, &ks, b"k").unwrap().as_deref(), Some(&b"1"[..]), "the kept snapshot was dropped at the commit");
    let seen = std::thread::scope(|s| s.spawn(|| get(&db, &ks, b"k").unwrap()).join().unwrap());
    assert_eq!(seen.as_deref(), Some(&b"1"[..]));
    assert_eq!(get(&db, &ks, b"nested").unwrap(), None);

    for round in 0..3 {
        let panicked = db.write(|tx| -> tessera::Result<()> {
            tx.put(&ks, b"k", b"panic")?;
            tx.delete(&ks, b"k")?;
            tx.put(&ks, format!("p{round}").as_bytes(), b"x")?;
            panic!("round {round}")
        });
        assert!(matches!(&panicked, Err(Error::Panicked(m)) if *m == format!("round {round}")), "{panicked:?}");
        let failed: tessera::Result<()> = db.write(|tx| {
            tx.put(&ks, format!("e{round}").as_bytes(), b"x")?;
            Err(Error::other("no"))
        });
        assert!(failed.is_err());
    }
    assert_eq!(db.read(|tx| tx.len(&ks)).unwrap(), 1);
    assert_eq!(get(&db, &ks, b"k").unwrap().as_deref(), Some(&b"1"[..]));
    db.write(|tx| tx.put(&ks, b"k", b"2")).unwrap();
    assert_eq!(get(&db, &ks, b"k").unwrap().as_deref(), Some(&b"2"[..]));
}

/// A read transaction taken before a commit and dropped after it is never reused: the next
/// reads on any thread see the commit.
#[test]
fn read_txn_dropped_after_a_commit_is_not_reused() {
    let (_dir, path) = temp();
    let db = Db::open(&path).unwrap();
    let ks = db.keyspace("ks").unwrap();
    for round in 0u32..200 {
        let old = db.read_txn().unwrap();
        let writer = {
            let (db, ks) = (db.clone(), ks.clone());
            std::thread::spawn(move || db.write(|tx| tx.put(&ks, b"k", &round.to_be_bytes())).unwrap())
        };
        writer.join().unwrap();
        let moved = std::thread::scope(|s| s.spawn(move || drop(old)).join());
        moved.unwrap();
        assert_eq!(get(&db, &ks, b"k").unwrap().as_deref(), Some(&round.to_be_bytes()[..]), "round {round}");
        let txn = db.read_txn().unwrap();
        assert_eq!(txn.get(&ks, b"k").unwrap(), Some(&round.to_be_bytes()[..]));
    }
}

// ---------------------------------------------------------------------------------------------
// Durability
// ---------------------------------------------------------------------------------------------

/// A failed flush is reported to the writer whose `Immediate` write it was, and later writes
/// are flushed again (not marked durable by a flush that failed).
#[test]
fn a_failed_flush_is_reported_and_the_next_immediate_write_flushes_again() {
    let (_dir, path) = temp();
    let db = Db::open(&path).unwrap();
    let ks = db.keyspace("ks").unwrap();
    db.inject_flush_failures(1);
    let first = db.write_with(Durability::Immediate, |tx| tx.put(&ks, b"k", b"1"));
    assert!(matches!(first, Err(Error::NotDurable(_))), "{first:?}");
    assert_eq!(get(&db, &ks, b"k").unwrap().as_deref(), Some(&b"1"[..]), "committed, not flushed");
    db.write_with(Durability::Immediate, |tx| tx.put(&ks, b"k", b"2")).unwrap();
    // A buffered commit whose background flush fails: `sync` reports it.
    let buffered = Durability::Buffered { max_delay: Duration::from_millis(5) };
    db.inject_flush_failures(1);
    db.write_with(buffered, |tx| tx.put(&ks, b"k", b"3")).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(matches!(db.sync(), Err(Error::NotDurable(_))), "the background flush failed and nobody was told");
    db.sync().unwrap();
}

/// The file's own keyspaces are read through LMDB when a file is opened (its format version,
/// in a read transaction): a handle opened there must not be closed under a keyspace created
/// after the open, nor that keyspace's slot be given to another one.
#[test]
fn keyspaces_created_after_reopening_a_file_keep_their_own_handles() {
    let (_dir, path) = temp();
    {
        let db = Db::open(&path).unwrap();
        let first = db.keyspace("first").unwrap();
        db.write(|tx| tx.put(&first, b"k", b"first")).unwrap();
        db.close().unwrap();
    }
    let db = Db::open(&path).unwrap();
    let names = ["a", "b", "c", "d", "first"];
    for name in names {
        let keyspace = db.keyspace(name).unwrap();
        db.write(|tx| tx.put(&keyspace, b"own", name.as_bytes())).unwrap();
        assert_eq!(db.file_info().unwrap().format_version, tessera::store::STORAGE_FORMAT_VERSION);
    }
    for name in names {
        let keyspace = db.keyspace(name).unwrap();
        assert_eq!(get(&db, &keyspace, b"own").unwrap().as_deref(), Some(name.as_bytes()), "keyspace {name}");
    }
    assert!(db.check().unwrap().problems.is_empty());
}

/// `Db::close` right after a commit, with notification across processes on: the watcher
/// thread, woken by the commit, holds the database for the moment it looks for other
/// processes' commits, and a close in that moment failed with `StillOpen { handles: 1,
/// holders: [] }` though the caller held the only handle (seen in `tests/feed_model.rs` on a
/// loaded machine). Correct: the close waits out the database's own threads.
#[test]
fn close_right_after_a_commit_with_notification_on_closes() {
    let (_dir, path) = temp();
    let options = || DbOptions { durable_feed: true, cross_process_notify: true, durability: Durability::BUFFERED, ..DbOptions::default() };
    let mut failures = Vec::new();
    for round in 0u32..300 {
        let db = Db::open_with(&path, options()).unwrap();
        let ks = db.keyspace("ks").unwrap();
        db.write(|tx| tx.put(&ks, &round.to_be_bytes(), b"v")).unwrap();
        drop(ks);
        if let Err(error) = db.close() {
            failures.push(format!("round {round}: {error}"));
        }
    }
    assert!(failures.is_empty(), "{} of 300 closes failed: {:?}", failures.len(), &failures[..failures.len().min(3)]);
}
