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
