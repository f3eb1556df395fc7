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
        Err(Error::FeedAckAhead { cursor, newest: reported, .. }) => assert_eq!((cursor, reported), (newest + 10, newest)),
        other => panic!("expected FeedAckAhead, got {other:?}"),
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
