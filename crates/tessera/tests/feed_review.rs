//! Cases of the durable feed found by review, each of which returned `Ok` with a wrong answer.

use tessera::{Db, DbOptions, Error};

fn with_feed() -> DbOptions {
    DbOptions { durable_feed: true, ..DbOptions::default() }
}

/// An acknowledgement past the newest commit was stored: the commits made afterwards up to it
/// were never read by the consumer (its reads returned `Ok` and empty), a silent gap.
#[test]
fn an_ack_past_the_newest_commit_is_refused_and_the_cursor_stays() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path().join("db"), with_feed()).unwrap();
    let notes = db.keyspace("notes").unwrap();
    let consumer = db.consumer("replica").unwrap();
    let newest = db
        .write(|tx| {
            tx.put(&notes, b"a", b"1")?;
            Ok(tx.sequence())
        })
        .unwrap();
    let before = consumer.cursor().unwrap();
    match consumer.ack(newest + 10) {
        Err(Error::FeedCursorAhead { cursor, newest: reported }) => assert_eq!((cursor, reported), (newest + 10, newest)),
        other => panic!("expected FeedCursorAhead, got {other:?}"),
    }
    assert_eq!(consumer.cursor().unwrap(), before, "the cursor did not move");
    for n in 0..12u8 {
        db.write(|tx| tx.put(&notes, &[n], &[n])).unwrap();
    }
    assert_eq!(consumer.changes(100).unwrap().len(), 13, "every commit after the cursor is read");
    // The newest commit itself is a valid acknowledgement.
    let last = db.read_txn().unwrap().sequence();
    consumer.ack(last).unwrap();
    assert_eq!(consumer.cursor().unwrap(), last);
    assert!(consumer.changes(100).unwrap().is_empty());
}

/// LMDB's compacting copy numbers the copy's transactions from 1 again, while its feed entries,
/// retention mark and consumers' cursors keep the source's sequences: the copy's next commits
/// had sequences below them, sorted before the kept entries, and a consumer (or a reader from
/// its last sequence) read `Ok` and empty, never seeing them.
#[test]
fn commits_to_a_compacted_copy_of_a_file_with_the_feed_are_read_after_the_copied_cursors() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path().join("db"), with_feed()).unwrap();
    let notes = db.keyspace("notes").unwrap();
    let replica = db.consumer("replica").unwrap();
    for n in 0..30u8 {
        db.write(|tx| tx.put(&notes, &[n], &[n])).unwrap();
    }
    let read = replica.changes(10).unwrap();
    replica.ack(read.last().unwrap().sequence).unwrap();
    let last_read = db.changes_since(0, 100).unwrap().last().unwrap().sequence;
    let copy_path = dir.path().join("copy");
    db.copy_compacted(&copy_path).unwrap();

    let copy = Db::open(&copy_path).unwrap();
    let notes = copy.keyspace("notes").unwrap();
    let sequence = copy
        .write(|tx| {
            tx.put(&notes, b"after the copy", b"1")?;
            Ok(tx.sequence())
        })
        .unwrap();
    assert!(sequence > last_read, "the copy's commit {sequence} comes after the copied feed's {last_read}");
    let after = copy.changes_since(last_read, 100).unwrap();
    assert_eq!(after.len(), 1, "the copy's commit is read after the last copied one");
    assert_eq!(&*after[0].changes[0].key, b"after the copy");
    let replica = copy.consumer("replica").unwrap();
    let pending = replica.changes(100).unwrap();
    assert_eq!(pending.len(), 21, "the 20 unread copied commits, then the copy's own");
    assert_eq!(pending.last().unwrap().sequence, sequence);
    let late = copy.consumer("late").unwrap();
    copy.write(|tx| tx.put(&notes, b"later", b"2")).unwrap();
    assert_eq!(late.changes(100).unwrap().len(), 1, "a consumer registered on the copy reads its commits");
}

/// Rewrites one byte of the value of every entry of `keyspace` in the closed database at
/// `path`, through LMDB alone.
fn flip_a_byte_of_each_entry(path: &std::path::Path, keyspace: &str, at: usize) {
    let mut options = heed::EnvOpenOptions::new().read_txn_without_tls();
    options.max_dbs(128).map_size(1 << 30);
    // SAFETY: the path is a regular file (no sub-directory), as tessera opens it; this
    // process has closed its tessera handle, and nothing else maps it here.
    unsafe { options.flags(heed::EnvFlags::NO_SUB_DIR) };
    // SAFETY: as above.
    let env = unsafe { options.open(path) }.unwrap();
    let mut tx = env.write_txn().unwrap();
    let db: heed::Database<heed::types::Bytes, heed::types::Bytes> = env.open_database(&tx, Some(keyspace)).unwrap().unwrap();
    let entries: Vec<(Vec<u8>, Vec<u8>)> = db.iter(&tx).unwrap().map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap()).collect();
    for (key, mut value) in entries {
        let at = at.min(value.len() - 1);
        value[at] ^= 0x01;
        db.put(&mut tx, &key, &value).unwrap();
    }
    tx.commit().unwrap();
}

/// A damaged feed entry is `Corrupted` naming `tessera.feed`, for a reader from 0 and for a
/// consumer, never a wrong change; wherever the byte is (the format's head, a length, a value).
#[test]
fn a_damaged_feed_entry_is_corrupted_naming_the_feed_never_a_wrong_change() {
    for at in [0, 4, 5, 9, 14, 30, 200] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let db = Db::open_with(&path, with_feed()).unwrap();
        let notes = db.keyspace("notes").unwrap();
        let consumer = db.consumer("replica").unwrap();
        db.write(|tx| {
            tx.put(&notes, b"key", &[7; 300])?;
            tx.put(&notes, b"other", b"v")
        })
        .unwrap();
        drop((consumer, notes));
        db.close().unwrap();
        flip_a_byte_of_each_entry(&path, "tessera.feed", at);
        let db = Db::open(&path).unwrap();
        for result in [db.changes_since(0, 10), db.consumer("replica").unwrap().changes(10)] {
            match result {
                Err(Error::Corrupted(message)) => assert!(message.contains("tessera.feed"), "byte {at}: {message}"),
                other => panic!("byte {at}: expected Corrupted, got {other:?}"),
            }
        }
    }
}

/// A reader's cursor past the newest commit (one kept by a replica while the file was put back
/// from an older copy) read `Ok` and empty, and once commits reached it, went on after it:
/// the commits up to it were never returned.
#[test]
fn a_cursor_past_the_newest_commit_is_refused_not_read_as_nothing_new() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, with_feed()).unwrap();
    let notes = db.keyspace("notes").unwrap();
    db.write(|tx| tx.put(&notes, b"a", b"1")).unwrap();
    let backup = dir.path().join("backup");
    db.copy_compacted(&backup).unwrap();
    let mut cursor = 0;
    for n in 0..5u8 {
        db.write(|tx| tx.put(&notes, &[n], &[n])).unwrap();
    }
    for batch in db.changes_since(cursor, 100).unwrap() {
        cursor = batch.sequence;
    }
    drop(notes);
    db.close().unwrap();
    // The file is put back from the backup: its newest commit is older than the reader's cursor.
    std::fs::copy(&backup, &path).unwrap();
    let db = Db::open(&path).unwrap();
    let newest = db.read_txn().unwrap().sequence();
    assert!(newest < cursor);
    match db.changes_since(cursor, 100) {
        Err(Error::FeedCursorAhead { cursor: given, newest: reported }) => assert_eq!((given, reported), (cursor, newest)),
        other => panic!("expected FeedCursorAhead, got {other:?}"),
    }
    assert_eq!(db.changes_since(newest, 100).unwrap().len(), 0, "the newest commit is a cursor");
}
