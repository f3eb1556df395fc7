//! Review: do README.md and docs/*.md say what the code does?
//!
//! Each test asserts one concrete claim of the docs (file:line in its comment). Tests marked
//! "failed before its fix" showed a claim the code did not keep (2026-12-01); the others check
//! claims that hold.

use serde::{Deserialize, Serialize};
use std::time::Duration;
use tessera::collection::Record;
use tessera::{Db, DbOptions, Durability, Error, FeedEvent, WriteOutcome};

fn temp() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("docs.tessera");
    (dir, path)
}

fn open() -> (tempfile::TempDir, Db) {
    let (dir, path) = temp();
    let db = Db::open(&path).unwrap();
    (dir, db)
}

fn feed_db() -> (tempfile::TempDir, Db) {
    let (dir, path) = temp();
    let db = Db::open_with(&path, DbOptions { durable_feed: true, ..DbOptions::default() }).unwrap();
    (dir, db)
}

#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "tasks")]
struct Task {
    #[record(key)]
    id: u32,
    title: String,
    #[record(index)]
    priority: i32,
    #[record(unique)]
    email: Option<String>,
}

fn task(id: u32, priority: i32, email: Option<&str>) -> Task {
    Task { id, title: format!("t{id}"), priority, email: email.map(str::to_owned) }
}

// ---------------------------------------------------------------------------------------------
// Transactions (docs/storage.md "Transactions", docs/design.md §3 and §5)
// ---------------------------------------------------------------------------------------------

/// storage.md:75-76, design.md:334-337: a panic in the write closure is caught, rolled back,
/// and returned as `Error::Panicked` with its message.
#[test]
fn a_panicking_write_closure_is_panicked_and_rolled_back() {
    let (_dir, db) = open();
    let ks = db.keyspace("ks").unwrap();
    let result = db.write(|tx| -> tessera::Result<()> {
        tx.put(&ks, b"k", b"v")?;
        panic!("boom in closure");
    });
    match result {
        Err(Error::Panicked(message)) => assert!(message.contains("boom in closure"), "{message}"),
        other => panic!("expected Panicked, got {other:?}"),
    }
    assert_eq!(db.read(|tx| Ok(tx.get(&ks, b"k")?.map(<[u8]>::to_vec))).unwrap(), None);
}

/// design.md:164-165, storage.md:78-80: a write inside a write on the same thread is
/// `WouldDeadlock`; design.md:791-793: so is a write to another database.
#[test]
fn nested_writes_are_would_deadlock_for_any_database() {
    let (_dir, db) = open();
    let (_dir2, other) = open();
    let inner = db.write(|_| Ok(db.write(|_| Ok(()))));
    assert!(matches!(inner, Ok(Err(Error::WouldDeadlock { .. }))), "{inner:?}");
    let cross = db.write(|_| Ok(other.write(|_| Ok(()))));
    assert!(matches!(cross, Ok(Err(Error::WouldDeadlock { .. }))), "{cross:?}");
    let grouped = db.write(|_| Ok(db.write_grouped(|_| Ok(()))));
    assert!(matches!(grouped, Ok(Err(Error::WouldDeadlock { .. }))), "{grouped:?}");
}

/// design.md:166-168: subscribing inside a write closure is `WouldDeadlock` ("subscribe
/// before writing"), for the change feed and for live subscriptions.
#[test]
fn subscribing_inside_a_write_is_would_deadlock() {
    let (_dir, db) = open();
    let tasks = db.collection::<Task>().unwrap();
    let feed = db.write(|_| Ok(db.subscribe().map(|_| ())));
    assert!(matches!(feed, Ok(Err(Error::WouldDeadlock { .. }))), "{feed:?}");
    let live = db.write(|_| Ok(tasks.subscribe_query(&tasks.all()).map(|_| ())));
    assert!(matches!(live, Ok(Err(Error::WouldDeadlock { .. }))), "{live:?}");
    let object = db.write(|_| Ok(tasks.subscribe_object(&1u32).map(|_| ())));
    assert!(matches!(object, Ok(Err(Error::WouldDeadlock { .. }))), "{object:?}");
}

/// storage.md:109-110: past `map_size_max_bytes` a write fails with `Error::MapFull`, nothing
/// of it is written, and the database stays usable.
#[test]
fn past_the_map_ceiling_a_write_is_map_full_and_writes_nothing() {
    let (_dir, path) = temp();
    let db = Db::open_with(
        &path,
        DbOptions {
            map_size_initial_bytes: 1 << 20,
            map_size_max_bytes: 4 << 20,
            durability: Durability::BUFFERED,
            ..DbOptions::default()
        },
    )
    .unwrap();
    let ks = db.keyspace("ks").unwrap();
    let big = vec![7u8; 64 * 1024];
    let result = db.write(|tx| {
        tx.put(&ks, b"first", b"1")?;
        for i in 0u32..200 {
            tx.put(&ks, &i.to_be_bytes(), &big)?;
        }
        Ok(())
    });
    assert!(matches!(result, Err(Error::MapFull { .. })), "{result:?}");
    assert_eq!(db.read(|tx| tx.len(&ks)).unwrap(), 0, "nothing of the refused write");
    db.write(|tx| tx.put(&ks, b"after", b"ok")).unwrap();
    assert_eq!(db.read(|tx| Ok(tx.get(&ks, b"after")?.map(<[u8]>::to_vec))).unwrap(), Some(b"ok".to_vec()));
}

/// storage.md:111-113, 130: a raw key is 1 to 511 bytes; the empty key and a longer one read
/// as `Ok(None)` and a write of one is `Error::KeySize`.
#[test]
fn raw_key_bounds() {
    let (_dir, db) = open();
    let ks = db.keyspace("ks").unwrap();
    let long = vec![1u8; 512];
    for key in [&b""[..], &long[..]] {
        assert!(db.read(|tx| Ok(tx.get(&ks, key)?.is_none())).unwrap());
        assert!(matches!(db.write(|tx| tx.put(&ks, key, b"v")), Err(Error::KeySize { .. })));
        assert!(matches!(db.write(|tx| tx.insert_new(&ks, key, b"v")), Err(Error::KeySize { .. })));
        assert!(matches!(db.write(|tx| tx.delete(&ks, key)), Err(Error::KeySize { .. })));
        assert!(db.write(|tx| Ok(tx.get(&ks, key)?.is_none())).unwrap());
    }
    db.write(|tx| tx.put(&ks, &vec![2u8; 511], b"v")).unwrap();
}

/// storage.md:126-129: name limits and the `InvalidName` error of each kind.
#[test]
fn name_limits_of_each_kind() {
    let (_dir, db) = open();
    assert!(db.keyspace(&"k".repeat(255)).is_ok());
    assert!(matches!(db.keyspace(&"k".repeat(256)), Err(Error::InvalidName { what: "keyspace", .. })));
    assert!(matches!(db.keyspace("tessera.mine"), Err(Error::InvalidName { what: "keyspace", .. })));
    assert!(db.documents(&"d".repeat(237)).is_ok());
    assert!(matches!(db.documents(&"d".repeat(238)), Err(Error::InvalidName { what: "documents", .. })));
    assert!(matches!(db.documents(""), Err(Error::InvalidName { what: "documents", .. })));
    assert!(db.dictionary_with(&"n".repeat(236), Default::default()).is_ok());
    assert!(matches!(db.dictionary_with(&"n".repeat(237), Default::default()), Err(Error::InvalidName { what: "dictionary", .. })));
    assert!(matches!(db.dictionary_with("a\0b", Default::default()), Err(Error::InvalidName { what: "dictionary", .. })));
    assert!(matches!(db.dyn_collection(&"c".repeat(201)), Err(Error::InvalidName { what: "collection", .. })));
}

/// storage.md:76-78, README "Db::close reports a failed flush or names what still holds the
/// file": `close` with another handle alive is `Error::StillOpen`.
#[test]
fn close_with_another_handle_is_still_open() {
    let (_dir, db) = open();
    let other = db.clone();
    let result = db.close();
    assert!(matches!(result, Err(Error::StillOpen { .. })), "{result:?}");
    drop(other);
}

/// storage.md:383-386: opening a file this process has open already returns the same
/// database, whose options are those of the first open.
#[test]
fn a_second_open_gets_the_first_opens_options() {
    let (_dir, path) = temp();
    let db = Db::open(&path).unwrap();
    let again = Db::open_with(&path, DbOptions { read_only: true, ..DbOptions::default() }).unwrap();
    assert!(!again.is_read_only(), "the first open's options");
    let ks = again.keyspace("ks").unwrap();
    again.write(|tx| tx.put(&ks, b"k", b"v")).unwrap();
    drop(db);
}

/// storage.md:389-391, design.md:693-694, DbOptions::read_only: a read-only handle refuses
/// `write`, `Db::subscribe` and live subscriptions with `Error::ReadOnly`.
#[test]
fn a_read_only_handle_refuses_writes_and_subscriptions() {
    let (_dir, path) = temp();
    {
        let db = Db::open(&path).unwrap();
        let tasks = db.collection::<Task>().unwrap();
        db.write(|tx| tasks.insert(tx, &task(1, 1, None))).unwrap();
        drop(tasks);
        db.close().unwrap();
    }
    let db = Db::open_with(&path, DbOptions { read_only: true, ..DbOptions::default() }).unwrap();
    assert!(matches!(db.write(|_| Ok(())), Err(Error::ReadOnly { .. })));
    assert!(matches!(db.subscribe(), Err(Error::ReadOnly { .. })));
    let dynamic = db.dyn_collection("tasks").unwrap();
    assert_eq!(dynamic.all().fetch(&db).unwrap().len(), 1);
}

// ---------------------------------------------------------------------------------------------
// The change feed (storage.md "The change feed")
// ---------------------------------------------------------------------------------------------

/// storage.md:255-259: a key written several times in one transaction appears once (first old
/// value, last new value); a net no-op does not appear, and a transaction without net changes
/// yields no batch.
#[test]
fn the_feed_keeps_net_changes_and_skips_no_op_transactions() {
    let (_dir, db) = open();
    let ks = db.keyspace("ks").unwrap();
    db.write(|tx| tx.put(&ks, b"old", b"1")).unwrap();
    let feed = db.subscribe().unwrap();
    // A net no-op: a new key put then deleted, an old key rewritten with its own bytes.
    db.write(|tx| {
        tx.put(&ks, b"new", b"x")?;
        tx.delete(&ks, b"new")?;
        tx.put(&ks, b"old", b"1")
    })
    .unwrap();
    // Several writes of one key.
    db.write(|tx| {
        tx.put(&ks, b"old", b"2")?;
        tx.put(&ks, b"old", b"3")
    })
    .unwrap();
    let event = feed.recv_timeout(Duration::from_secs(5)).expect("a batch");
    let FeedEvent::Batch(batch) = event else { panic!("{event:?}") };
    assert_eq!(batch.changes.len(), 1, "{batch:?}");
    let change = &batch.changes[0];
    assert_eq!((&*change.key, change.old.as_deref(), change.new.as_deref()), (&b"old"[..], Some(&b"1"[..]), Some(&b"3"[..])));
    assert!(feed.recv_timeout(Duration::from_millis(50)).is_none());
}

/// storage.md:263-265: a listener whose queue is full misses batches, the writer does not
/// wait, and its next event (after what was queued) is `Lagged { missed }`.
#[test]
fn a_full_listener_queue_gives_lagged() {
    let (_dir, path) = temp();
    let db =
        Db::open_with(&path, DbOptions { listener_queue_batches: 2, durability: Durability::BUFFERED, ..DbOptions::default() }).unwrap();
    let ks = db.keyspace("ks").unwrap();
    let feed = db.subscribe().unwrap();
    for i in 0u8..6 {
        db.write(|tx| tx.put(&ks, &[i + 1], b"v")).unwrap();
    }
    let mut batches = 0;
    let mut missed = 0;
    while let Some(event) = feed.recv_timeout(Duration::from_millis(200)) {
        match event {
            FeedEvent::Batch(_) => batches += 1,
            FeedEvent::Lagged { missed: m } => missed += m,
        }
    }
    assert_eq!(batches + missed as usize, 6, "batches {batches}, missed {missed}");
    assert!(missed > 0);
}

// ---------------------------------------------------------------------------------------------
// The durable feed (storage.md "Durable change feed", design.md §5)
// ---------------------------------------------------------------------------------------------

/// storage.md:342: a file without the feed gives `Error::FeedDisabled` (changes_since,
/// consumer, feed_extent); design.md:574-576: `cross_process_notify` without the feed is
/// refused at open with `FeedDisabled`.
#[test]
fn a_file_without_the_feed_is_feed_disabled() {
    let (_dir, path) = temp();
    let db = Db::open(&path).unwrap();
    assert!(matches!(db.changes_since(0, 10), Err(Error::FeedDisabled { .. })));
    assert!(matches!(db.consumer("c"), Err(Error::FeedDisabled { .. })));
    assert!(matches!(db.feed_extent(), Err(Error::FeedDisabled { .. })));
    db.close().unwrap();
    let notify = Db::open_with(&path, DbOptions { cross_process_notify: true, ..DbOptions::default() });
    assert!(matches!(notify, Err(Error::FeedDisabled { .. })), "{:?}", notify.map(|_| ()));
}

/// storage.md:329-335: `ack` past the newest commit is `FeedCursorAhead` and the cursor stays;
/// `changes_since` past the newest commit is `FeedCursorAhead`, never an empty read.
#[test]
fn cursors_past_the_newest_commit_are_feed_cursor_ahead() {
    let (_dir, db) = feed_db();
    let ks = db.keyspace("ks").unwrap();
    let consumer = db.consumer("c").unwrap();
    db.write(|tx| tx.put(&ks, b"k", b"v")).unwrap();
    let newest = db.feed_extent().unwrap().newest;
    let before = consumer.cursor().unwrap();
    assert!(matches!(consumer.ack(newest + 5), Err(Error::FeedCursorAhead { .. })));
    assert_eq!(consumer.cursor().unwrap(), before);
    assert!(matches!(db.changes_since(newest + 5, 10), Err(Error::FeedCursorAhead { .. })));
    assert_eq!(consumer.changes(10).unwrap().len(), 1);
}

/// storage.md:335-342, design.md:460-470: retention keeps at most `commits_max` entries; a
/// cursor below the mark (other than 0) is `FeedCursorExpired`; a consumer that fell behind
/// retention gets `FeedCursorExpired`, never a silent gap.
#[test]
fn retention_expires_cursors_with_an_error() {
    let (_dir, path) = temp();
    let retention = tessera::FeedRetention { commits_max: 3, ..tessera::FeedRetention::default() };
    let db = Db::open_with(&path, DbOptions { durable_feed: true, feed_retention: retention, ..DbOptions::default() }).unwrap();
    let ks = db.keyspace("ks").unwrap();
    let consumer = db.consumer("slow").unwrap();
    let start = consumer.cursor().unwrap();
    for i in 0u8..10 {
        db.write(|tx| tx.put(&ks, &[i + 1], b"v")).unwrap();
    }
    let extent = db.feed_extent().unwrap();
    assert_eq!(extent.commits, 3);
    assert!(matches!(consumer.changes(100), Err(Error::FeedCursorExpired { .. })));
    assert!(matches!(db.changes_since(start, 100), Err(Error::FeedCursorExpired { .. })));
    assert_eq!(db.changes_since(0, 100).unwrap().len(), 3, "0 reads from the oldest kept");
}

/// storage.md:298, durable_feed::CONSUMER_NAME_LEN_MAX: a consumer name is 1 to 128 bytes.
#[test]
fn consumer_names_are_1_to_128_bytes() {
    let (_dir, db) = feed_db();
    assert!(db.consumer(&"c".repeat(128)).is_ok());
    assert!(matches!(db.consumer(&"c".repeat(129)), Err(Error::InvalidName { .. })));
    assert!(matches!(db.consumer(""), Err(Error::InvalidName { .. })));
}

// ---------------------------------------------------------------------------------------------
// Collections (docs/collections.md)
// ---------------------------------------------------------------------------------------------

/// collections.md:169-173, design.md:306-307: insert of a taken key is `DuplicateKey`;
/// `update` may not change the key (`KeyChanged`); a unique violation names the index and
/// the holder and the closure's error rolls the whole transaction back; `Unchanged` writes
/// nothing and publishes nothing.
#[test]
fn collection_write_errors_and_outcomes() {
    let (_dir, db) = open();
    let tasks = db.collection::<Task>().unwrap();
    assert_eq!(db.write(|tx| tasks.insert(tx, &task(1, 1, Some("a")))).unwrap(), WriteOutcome::Inserted);
    assert!(matches!(db.write(|tx| tasks.insert(tx, &task(1, 2, None))), Err(Error::DuplicateKey { .. })));
    assert!(matches!(db.write(|tx| tasks.update(tx, &1u32, |t| t.id = 2)), Err(Error::KeyChanged { .. })));
    assert!(matches!(db.write(|tx| tasks.patch(tx, &1u32, "id", &2u32)), Err(Error::KeyChanged { .. })));
    let unique = db.write(|tx| {
        tasks.insert(tx, &task(5, 5, None))?;
        tasks.insert(tx, &task(2, 2, Some("a")))
    });
    match unique {
        Err(Error::UniqueViolation { index, .. }) => assert_eq!(index, "email"),
        other => panic!("{other:?}"),
    }
    assert_eq!(tasks.get(&db, &5u32).unwrap(), None, "the whole transaction rolled back");
    let feed = db.subscribe().unwrap();
    assert_eq!(db.write(|tx| tasks.upsert(tx, &task(1, 1, Some("a")))).unwrap(), WriteOutcome::Unchanged);
    assert!(feed.recv_timeout(Duration::from_millis(100)).is_none(), "Unchanged publishes nothing");
}

/// collections.md:66-67: a unique index lets NULLs (missing or null fields) repeat.
#[test]
fn unique_index_nulls_repeat() {
    let (_dir, db) = open();
    let tasks = db.collection::<Task>().unwrap();
    db.write(|tx| {
        tasks.insert(tx, &task(1, 1, None))?;
        tasks.insert(tx, &task(2, 1, None))?;
        tasks.insert(tx, &task(3, 1, None))
    })
    .unwrap();
    assert_eq!(tasks.filter_text("email is null").unwrap().fetch(&db).unwrap().len(), 3);
}

#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "tagged")]
struct Tagged {
    #[record(key)]
    id: u32,
    #[record(index_elements)]
    tags: Vec<String>,
}

/// collections.md:25-29, query.md:331-332: a record has at most 4096 distinct elements in a
/// multi-entry index; past that `Error::LimitExceeded` and nothing written.
#[test]
fn element_index_limit() {
    let (_dir, db) = open();
    let tagged = db.collection::<Tagged>().unwrap();
    let ok = Tagged { id: 1, tags: (0..4096).map(|i| format!("t{i}")).collect() };
    db.write(|tx| tagged.insert(tx, &ok)).unwrap();
    let too_many = Tagged { id: 2, tags: (0..4097).map(|i| format!("t{i}")).collect() };
    assert!(matches!(db.write(|tx| tagged.insert(tx, &too_many)), Err(Error::LimitExceeded { .. })));
    assert_eq!(tagged.get(&db, &2u32).unwrap(), None);
    // Duplicates count once: 5000 elements of 10 distinct values are fine.
    let repeated = Tagged { id: 3, tags: (0..5000).map(|i| format!("t{}", i % 10)).collect() };
    db.write(|tx| tagged.insert(tx, &repeated)).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Dictionary (storage.md "What set refuses")
// ---------------------------------------------------------------------------------------------

/// storage.md:133, 454-459: `Dictionary::set` and `DictTxn::set` refuse an entry whose key and
/// value exceed the map ceiling with `Error::LimitExceeded`, at `set`.
#[test]
fn dictionary_set_over_the_map_ceiling_is_limit_exceeded() {
    let (_dir, path) = temp();
    let db = Db::open_with(&path, DbOptions { map_size_max_bytes: 8 << 20, ..DbOptions::default() }).unwrap();
    let dict = db.dictionary().unwrap();
    let value = vec![0u8; 9 << 20];
    let value = tessera::value::to_vec(&serde_bytes_like(&value)).unwrap_or_default();
    let _ = value;
    let big = "x".repeat(9 << 20);
    assert!(matches!(dict.set("k", &big), Err(Error::LimitExceeded { .. })));
    assert!(matches!(db.write(|tx| tx.dictionary(&dict).set("k", &big)), Err(Error::LimitExceeded { .. })));
    dict.set("small", &1u32).unwrap();
    dict.flush().unwrap();
}

fn serde_bytes_like(bytes: &[u8]) -> Vec<u8> {
    bytes.to_vec()
}

// ---------------------------------------------------------------------------------------------
// Queries (docs/query.md)
// ---------------------------------------------------------------------------------------------

#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "nums")]
struct Num {
    #[record(key)]
    id: u32,
    #[record(index)]
    n: Option<i64>,
    u: u64,
}

fn nums(db: &Db) -> tessera::Collection<Num> {
    let nums = db.collection::<Num>().unwrap();
    db.write(|tx| {
        nums.insert(tx, &Num { id: 1, n: Some(10), u: u64::MAX })?;
        nums.insert(tx, &Num { id: 2, n: None, u: u64::MAX - 1 })?;
        nums.insert(tx, &Num { id: 3, n: Some(i64::MAX), u: 3 })?;
        nums.insert(tx, &Num { id: 4, n: Some(-3), u: 0 })
    })
    .unwrap();
    nums
}

fn ids(query: &tessera::Query<Num>, db: &Db) -> Vec<u32> {
    query.fetch(db).unwrap().into_iter().map(|n| n.id).collect()
}

/// query.md:140-142, 213: arithmetic on integers is exact; beyond both i64 and u64, or `%`
/// by zero, NULL.
#[test]
fn arithmetic_overflow_and_remainder_by_zero_are_null() {
    let (_dir, db) = open();
    let nums = nums(&db);
    assert_eq!(ids(&nums.query_text("n % 0 is null").unwrap(), &db), vec![1, 2, 3, 4]);
    // i64::MAX + i64::MAX fits u64: exact, not NULL.
    assert_eq!(ids(&nums.query_text("n + 9223372036854775807 = 18446744073709551614").unwrap(), &db), vec![3]);
    // u64::MAX + 1 is beyond both: NULL.
    assert_eq!(ids(&nums.query_text("u + 1 is null").unwrap(), &db), vec![1]);
    // u64::MAX - 1 < u64::MAX
    assert_eq!(ids(&nums.query_text("u > 18446744073709551614").unwrap(), &db), vec![1]);
    assert_eq!(ids(&nums.query_text("u = 18446744073709551614").unwrap(), &db), vec![2]);
    // -3 - 9223372036854775807 is below i64::MIN: NULL, never wrapped.
    assert_eq!(ids(&nums.query_text("n - 9223372036854775807 is null").unwrap(), &db), vec![2, 4]);
}

/// query.md:130-136: integer constants beyond the exact range that no float holds exactly,
/// and floats beyond range or rounding to zero, are refused.
#[test]
fn out_of_range_constants_are_refused() {
    let (_dir, db) = open();
    let nums = nums(&db);
    for text in ["u = 18446744073709551617", "n = -9223372036854775809", "n > 1e400", "n > 1e-400"] {
        assert!(nums.query_text(text).is_err(), "{text} accepted");
    }
    assert!(nums.query_text("u < 1180591620717411303424").is_ok(), "2**70 is a float");
}

/// query.md:115: `limit` and `offset` take any count up to the largest `usize`.
#[test]
fn limit_and_offset_up_to_usize_max() {
    let (_dir, db) = open();
    let nums = nums(&db);
    let q = nums.query_text(&format!("limit {} offset 1", usize::MAX)).unwrap();
    assert_eq!(ids(&q, &db), vec![2, 3, 4]);
    let q = nums.query_text(&format!("offset {}", usize::MAX)).unwrap();
    assert_eq!(ids(&q, &db), Vec::<u32>::new());
}

/// query.md:245-248: NULLs sort last ascending and first descending, through an index walk
/// as through the in-memory sort; `nulls first/last` overrides.
#[test]
fn null_order_through_an_index_walk() {
    let (_dir, db) = open();
    let nums = nums(&db);
    assert_eq!(ids(&nums.query_text("order by n").unwrap(), &db), vec![4, 1, 3, 2]);
    assert_eq!(ids(&nums.query_text("order by n desc").unwrap(), &db), vec![2, 3, 1, 4]);
    assert_eq!(ids(&nums.query_text("order by n nulls first").unwrap(), &db), vec![2, 4, 1, 3]);
    assert_eq!(ids(&nums.query_text("order by n desc nulls last").unwrap(), &db), vec![3, 1, 4, 2]);
    assert_eq!(ids(&nums.query_text("order by n desc limit 2").unwrap(), &db), vec![2, 3]);
    assert_eq!(ids(&nums.query_text("n > 0 or n is null order by n desc limit 2").unwrap(), &db), vec![2, 3]);
}

/// query.md:318-319, collections.md:193-194: a comparison with the constant `null` reads
/// nothing (an empty plan, and no match).
#[test]
fn comparison_with_null_reads_nothing() {
    let (_dir, db) = open();
    let nums = nums(&db);
    let q = nums.query_text("n = null").unwrap();
    assert_eq!(ids(&q, &db), Vec::<u32>::new());
    let q = nums.query_text("u = null").unwrap();
    assert_eq!(ids(&q, &db), Vec::<u32>::new());
    let explained = format!("{}", q.explain().unwrap());
    assert!(!explained.contains("full scan"), "{explained}");
}

/// query.md:121-123: order by at most 16 keys, a typed error past it; the builder too ("each
/// is a typed error").
#[test]
fn order_by_more_than_16_keys_is_an_error_from_the_builder_too() {
    let (_dir, db) = open();
    let nums = nums(&db);
    let mut q = nums.all();
    for _ in 0..17 {
        q = q.order_by("n", tessera::Order::Asc);
    }
    assert!(q.fetch(&db).is_err(), "17 order keys through the builder");
}

// ---------------------------------------------------------------------------------------------
// Batch 2
// ---------------------------------------------------------------------------------------------

/// collections.md:169 ("insert (error if the key exists)") against design.md:306-308 ("with
/// indexes, insert looks the key up first, then Collection::store: identical bytes are
/// Unchanged"): an insert of a record identical to the stored one must still be refused.
#[test]
fn insert_of_an_identical_record_is_duplicate_key_with_or_without_indexes() {
    let (_dir, db) = open();
    let tasks = db.collection::<Task>().unwrap();
    db.write(|tx| tasks.insert(tx, &task(1, 1, Some("a")))).unwrap();
    let again = db.write(|tx| tasks.insert(tx, &task(1, 1, Some("a"))));
    assert!(matches!(again, Err(Error::DuplicateKey { .. })), "{again:?}");
}

#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "two_unique")]
struct TwoUnique {
    #[record(key)]
    id: u32,
    #[record(unique)]
    a: u32,
    #[record(unique)]
    b: u32,
    #[record(index_elements)]
    tags: Vec<u32>,
}

/// README ("each write checked whole before its first change"), design.md:306-314: a refused
/// write leaves the transaction as it was, so a closure that goes on after the error and
/// commits leaves no stray index entry.
#[test]
fn a_refused_write_inside_a_committed_transaction_leaves_nothing() {
    let (_dir, db) = open();
    let col = db.collection::<TwoUnique>().unwrap();
    db.write(|tx| col.insert(tx, &TwoUnique { id: 1, a: 1, b: 1, tags: vec![1] })).unwrap();
    db.write(|tx| {
        // `a` is new, `b` collides: refused after `a`'s entry would have been written.
        let refused = col.insert(tx, &TwoUnique { id: 2, a: 2, b: 1, tags: vec![2] });
        assert!(matches!(refused, Err(Error::UniqueViolation { .. })), "{refused:?}");
        // An update refused on `b`.
        let refused = col.upsert(tx, &TwoUnique { id: 1, a: 3, b: 1, tags: vec![3] });
        assert!(refused.is_ok(), "own value: {refused:?}");
        let refused = col.insert(tx, &TwoUnique { id: 4, a: 4, b: 5, tags: (0..5000).collect() });
        assert!(matches!(refused, Err(Error::LimitExceeded { .. })), "{refused:?}");
        Ok(())
    })
    .unwrap();
    let report = db.check().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(col.filter_text("a = 2").unwrap().count(&db).unwrap(), 0);
    assert_eq!(col.filter_text("a = 4").unwrap().count(&db).unwrap(), 0);
    // `a` = 2 and 4 are free.
    db.write(|tx| col.insert(tx, &TwoUnique { id: 5, a: 2, b: 9, tags: vec![] })).unwrap();
    db.write(|tx| col.insert(tx, &TwoUnique { id: 6, a: 4, b: 10, tags: vec![] })).unwrap();
}

/// design.md:362-366, Surprises: an Immediate write whose flush fails returns
/// `Error::NotDurable`; the commit happened and is visible.
#[test]
fn a_failed_flush_is_not_durable_and_the_commit_is_visible() {
    let (_dir, db) = open();
    let ks = db.keyspace("ks").unwrap();
    db.inject_flush_failures(1);
    let result = db.write(|tx| tx.put(&ks, b"k", b"v"));
    assert!(matches!(result, Err(Error::NotDurable(_))), "{result:?}");
    assert_eq!(db.read(|tx| Ok(tx.get(&ks, b"k")?.map(<[u8]>::to_vec))).unwrap(), Some(b"v".to_vec()));
}

/// README ("Db::close reports a failed flush"), storage.md:76-77: close flushes and reports a
/// flush failure.
#[test]
fn close_reports_a_failed_flush() {
    let (_dir, path) = temp();
    let db =
        Db::open_with(&path, DbOptions { durability: Durability::Buffered { max_delay: Duration::from_secs(60) }, ..DbOptions::default() })
            .unwrap();
    let ks = db.keyspace("ks").unwrap();
    db.write(|tx| tx.put(&ks, b"k", b"v")).unwrap();
    db.inject_flush_failures(1);
    let result = db.close();
    assert!(matches!(result, Err(Error::NotDurable(_))), "{result:?}");
}

/// storage.md:327-331: a consumer registers with its cursor at the newest commit (it reads
/// what is committed from then on); `ack` removes what every consumer has acknowledged.
#[test]
fn a_new_consumer_starts_at_the_newest_commit_and_ack_trims() {
    let (_dir, db) = feed_db();
    let ks = db.keyspace("ks").unwrap();
    db.write(|tx| tx.put(&ks, b"before", b"v")).unwrap();
    let consumer = db.consumer("c").unwrap();
    assert!(consumer.changes(10).unwrap().is_empty());
    db.write(|tx| tx.put(&ks, b"after", b"v")).unwrap();
    let batches = consumer.changes(10).unwrap();
    assert_eq!(batches.len(), 1);
    consumer.ack(batches[0].sequence).unwrap();
    assert_eq!(db.feed_extent().unwrap().commits, 0, "{:?}", db.feed_extent());
}

/// storage.md:115-117: the empty string is an ordinary key for a collection, a document id
/// and a dictionary key.
#[test]
fn the_empty_string_is_an_ordinary_typed_key() {
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "by_name")]
    struct ByName {
        #[record(key)]
        name: String,
        v: u32,
    }
    let (_dir, db) = open();
    let col = db.collection::<ByName>().unwrap();
    db.write(|tx| col.insert(tx, &ByName { name: String::new(), v: 1 })).unwrap();
    assert_eq!(col.get(&db, "").unwrap().map(|r| r.v), Some(1));
    let docs = db.documents("docs").unwrap();
    docs.document::<std::collections::BTreeMap<String, u32>>("").set(&[("a".to_owned(), 1u32)].into_iter().collect()).unwrap();
    assert_eq!(docs.ids_with_prefix("").unwrap(), vec![String::new()]);
    let dict = db.dictionary().unwrap();
    dict.set("", &5u32).unwrap();
    assert_eq!(dict.get::<u32>("").unwrap(), Some(5));
    assert_eq!(dict.keys().unwrap(), vec![String::new()]);
}

fn any_collection(db: &Db) -> tessera::collection::DynCollection {
    use tessera::collection::{DynSchema, KeyKind, TypeDesc};
    let schema = DynSchema {
        version: 1,
        key_fields: vec!["id".into()],
        key_kinds: vec![KeyKind::U32],
        shape: TypeDesc::Struct(vec![("id".into(), TypeDesc::Int), ("v".into(), TypeDesc::Any)]),
        indexes: vec![],
    };
    let col = db.create_dyn_collection("anys", &schema).unwrap();
    db.write(|tx| {
        for json in [
            r#"{"id": 1, "v": "b"}"#,
            r#"{"id": 2, "v": 5}"#,
            r#"{"id": 3, "v": true}"#,
            r#"{"id": 4, "v": {"b": 1}}"#,
            r#"{"id": 5, "v": "c"}"#,
            r#"{"id": 6, "v": [1]}"#,
            r#"{"id": 7, "v": 2.5}"#,
            r#"{"id": 8, "v": null}"#,
            r#"{"id": 9, "v": false}"#,
        ] {
            col.insert_json(tx, json.as_bytes())?;
        }
        Ok(())
    })
    .unwrap();
    col
}

fn dyn_ids(col: &tessera::collection::DynCollection, db: &Db, text: &str) -> Vec<u64> {
    col.filter_text(text).unwrap().fetch(db).unwrap().iter().map(|r| r.value().get("id").and_then(|v| v.as_u64()).unwrap()).collect()
}

/// query.md:250-256: in a record of no fixed type, values order by kind (booleans, numbers,
/// strings, everything else; NULL last ascending), the direction reverses the order within a
/// kind and not the order of kinds; a one-entry map orders as the string of its key, tied with
/// it (ties by primary key), and `x == "b"` matches only the string.
#[test]
fn mixed_kinds_order_by_kind() {
    let (_dir, db) = open();
    let col = any_collection(&db);
    assert_eq!(dyn_ids(&col, &db, "order by v"), vec![9, 3, 7, 2, 1, 4, 5, 6, 8]);
    assert_eq!(dyn_ids(&col, &db, "order by v desc"), vec![8, 3, 9, 2, 7, 5, 1, 4, 6]);
    assert_eq!(dyn_ids(&col, &db, r#"v == "b""#), vec![1]);
}

/// query.md:209-212: a comparison of values of different kinds in a record of no fixed type
/// is UNKNOWN, so neither it nor its negation matches.
#[test]
fn mixed_kind_comparisons_are_unknown() {
    let (_dir, db) = open();
    let col = any_collection(&db);
    let matched = dyn_ids(&col, &db, "v > 1");
    let negated = dyn_ids(&col, &db, "not v > 1");
    assert_eq!(matched, vec![2, 7]);
    assert_eq!(negated, Vec::<u64>::new(), "only numbers compare with 1; 5 and 2.5 are > 1");
}

/// query.md:218-221: `x not in (1, null)` is never TRUE; `contains` on an array with a NULL
/// element and no match is UNKNOWN.
#[test]
fn in_and_contains_with_null() {
    let (_dir, db) = open();
    let col = any_collection(&db);
    assert_eq!(dyn_ids(&col, &db, "v not in (1, null)"), Vec::<u64>::new());
    db.write(|tx| col.insert_json(tx, br#"{"id": 10, "v": [null, 2]}"#)).unwrap();
    assert_eq!(dyn_ids(&col, &db, "v contains 2"), vec![10]);
    assert!(!dyn_ids(&col, &db, "not v contains 3").contains(&10), "UNKNOWN, not TRUE");
    assert!(dyn_ids(&col, &db, "not v contains 3").contains(&6), "[1] has no NULL: FALSE, so not is TRUE");
}

/// README ("a value out of an integer field's width is refused, naming the field"): a
/// dynamic write into a typed collection's `u8` field of 300 is `SchemaViolation`.
#[test]
fn dynamic_write_out_of_an_integer_width_is_refused() {
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "small")]
    struct Small {
        #[record(key)]
        id: u32,
        level: u8,
    }
    let (_dir, db) = open();
    drop(db.collection::<Small>().unwrap());
    let col = db.dyn_collection("small").unwrap();
    let refused = db.write(|tx| col.insert_json(tx, br#"{"id": 1, "level": 300}"#));
    match refused {
        Err(Error::SchemaViolation { path, .. }) => assert_eq!(path, "level"),
        other => panic!("{other:?}"),
    }
}

/// collections.md:301-303: an object subscription delivers `Updated` per change, `Deleted` on
/// delete, survives the delete, and a re-insert is `Updated`.
#[test]
fn object_subscription_survives_delete() {
    let (_dir, db) = open();
    let tasks = db.collection::<Task>().unwrap();
    let sub = tasks.subscribe_object(&1u32).unwrap();
    assert!(matches!(sub.recv_timeout(Duration::from_secs(5)), Some(tessera::live::Event::Initial(None))));
    db.write(|tx| tasks.insert(tx, &task(1, 1, None))).unwrap();
    db.write(|tx| tasks.delete(tx, &1u32)).unwrap();
    db.write(|tx| tasks.insert(tx, &task(1, 2, None))).unwrap();
    let mut kinds = Vec::new();
    for _ in 0..3 {
        match sub.recv_timeout(Duration::from_secs(5)) {
            Some(tessera::live::Event::Changed(change)) => kinds.push(format!("{change:?}").split('(').next().unwrap().to_owned()),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(kinds, ["Updated", "Deleted", "Updated"]);
}

/// collections.md:287-291: a subscription ends with `DatabaseClosed` when the database closes;
/// `recv` returns the deliveries already queued, then the end.
#[test]
fn subscriptions_end_when_the_database_closes() {
    let (_dir, db) = open();
    let tasks = db.collection::<Task>().unwrap();
    let sub = tasks.subscribe_query(&tasks.all()).unwrap();
    db.write(|tx| tasks.insert(tx, &task(1, 1, None))).unwrap();
    drop(tasks);
    db.close().unwrap();
    let mut events = Vec::new();
    while let Some(event) = sub.recv_timeout(Duration::from_secs(5)) {
        let closed = event.is_closed();
        events.push(event);
        if closed {
            break;
        }
    }
    assert_eq!(events.len(), 3, "Initial, Changed, Closed");
    assert!(matches!(sub.ended(), Some(tessera::live::SubscriptionEnd::DatabaseClosed)), "{:?}", sub.ended());
}

/// query.md:101-106: keywords are case-insensitive; `order`, `first`, `limit` may name fields.
#[test]
fn non_reserved_keywords_may_name_fields() {
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "words")]
    struct Words {
        #[record(key)]
        id: u32,
        order: i32,
        first: i32,
        limit: i32,
    }
    let (_dir, db) = open();
    let col = db.collection::<Words>().unwrap();
    db.write(|tx| {
        col.insert(tx, &Words { id: 1, order: 2, first: 1, limit: 3 })?;
        col.insert(tx, &Words { id: 2, order: 1, first: 2, limit: 1 })
    })
    .unwrap();
    let ids = |text: &str| col.query_text(text).unwrap().fetch(&db).unwrap().into_iter().map(|w| w.id).collect::<Vec<_>>();
    assert_eq!(ids("order > 0 ORDER BY order"), vec![2, 1]);
    assert_eq!(ids("first = 1"), vec![1]);
    assert_eq!(ids("limit > 2 Order By first Desc LIMIT 1"), vec![1]);
    assert_eq!(ids("order by limit"), vec![2, 1]);
}

/// query.md:127-129: 2^53 + 1 is greater than the float 2^53 it would round to, through an
/// index as through a scan; `3 = 3.0` through an index lookup.
#[test]
fn exact_number_comparison_through_an_index() {
    let (_dir, db) = open();
    let nums = db.collection::<Num>().unwrap();
    db.write(|tx| {
        nums.insert(tx, &Num { id: 1, n: Some(9007199254740993), u: 9007199254740993 })?;
        nums.insert(tx, &Num { id: 2, n: Some(9007199254740992), u: 9007199254740992 })?;
        nums.insert(tx, &Num { id: 3, n: Some(3), u: 3 })
    })
    .unwrap();
    assert_eq!(ids(&nums.query_text("n > 9007199254740992.0").unwrap(), &db), vec![1]);
    assert_eq!(ids(&nums.query_text("u > 9007199254740992.0").unwrap(), &db), vec![1]);
    assert_eq!(ids(&nums.query_text("n = 9007199254740992.0").unwrap(), &db), vec![2]);
    assert_eq!(ids(&nums.query_text("n = 3.0").unwrap(), &db), vec![3]);
    assert_eq!(ids(&nums.query_text("n between 9007199254740993 and 9007199254740993").unwrap(), &db), vec![1]);
    assert_eq!(ids(&nums.query_text("n in (9007199254740993, 3.0)").unwrap(), &db), vec![1, 3]);
    assert_eq!(ids(&nums.query_text("order by n desc limit 2").unwrap(), &db), vec![1, 2]);
}

// ---------------------------------------------------------------------------------------------
// Nesting: 255 levels written, 128 read from untrusted bytes (storage.md:137)
// ---------------------------------------------------------------------------------------------

fn deep_json(levels: usize) -> serde_json::Value {
    let mut value = serde_json::json!(1);
    for _ in 0..levels {
        value = serde_json::Value::Array(vec![value]);
    }
    value
}

/// Failed before its fix. storage.md:137 says values are written up to 255 levels and read from untrusted
/// bytes up to 128; design.md:212 says a dictionary value read from storage is validated with
/// `from_untrusted`. So `Dictionary::set` of a value 150 levels deep returns Ok, is saved, and
/// after a reopen every `get` of it is `Error::DictionaryValue` ("too deep"), and `Db::check`
/// reports the sound entry as damage. The write was acknowledged and the value is lost to every
/// reader. Correct: what `set` accepts reads back (refuse past 128 at `set`, or validate stored
/// values with the writer's 255 limit).
#[test]
fn a_dictionary_value_set_ok_reads_back_after_reopen() {
    let (_dir, path) = temp();
    let deep = deep_json(150);
    {
        let db = Db::open(&path).unwrap();
        let dict = db.dictionary().unwrap();
        let set = dict.set("deep", &deep);
        if set.is_err() {
            // Refused at the write: the docs' "no silent wrong answers" is kept.
            return;
        }
        dict.flush().unwrap();
        drop(dict);
        db.close().unwrap();
    }
    let db = Db::open(&path).unwrap();
    let report = db.check().unwrap();
    let dict = db.dictionary().unwrap();
    let read = dict.get::<serde_json::Value>("deep");
    assert!(matches!(&read, Ok(Some(v)) if *v == deep), "set returned Ok, then: {read:?}");
    assert!(report.problems.is_empty(), "check calls the sound entry damaged: {:?}", report.problems);
}

/// Failed before its fix. The same for a document field (design.md:213: every read of a field validates with
/// `from_untrusted`): `Document::set` of a field 150 levels deep returns Ok and `get` is then
/// `Error::DocumentField`, in the same process.
#[test]
fn a_document_set_ok_reads_back() {
    let (_dir, db) = open();
    let docs = db.documents("docs").unwrap();
    let doc = docs.document::<std::collections::BTreeMap<String, serde_json::Value>>("d");
    let value: std::collections::BTreeMap<String, serde_json::Value> = [("f".to_owned(), deep_json(150))].into_iter().collect();
    if doc.set(&value).is_err() {
        return;
    }
    let read = doc.get();
    assert!(matches!(&read, Ok(Some(v)) if *v == value), "set returned Ok, then: {read:?}");
}

fn deep_record_file(path: &std::path::Path) -> Option<serde_json::Value> {
    use tessera::collection::{DynSchema, KeyKind, TypeDesc};
    let deep = deep_json(150);
    let db = Db::open(path).unwrap();
    let schema = DynSchema {
        version: 1,
        key_fields: vec!["id".into()],
        key_kinds: vec![KeyKind::U32],
        shape: TypeDesc::Struct(vec![("id".into(), TypeDesc::Int), ("v".into(), TypeDesc::Any)]),
        indexes: vec![],
    };
    let col = db.create_dyn_collection("deep", &schema).unwrap();
    let bytes = tessera::value::to_vec(&serde_json::json!({"id": 1, "v": deep})).unwrap();
    let doc = tessera::value::Doc::from_trusted(&bytes).unwrap();
    if db.write(|tx| col.insert(tx, doc.root())).is_err() {
        return None; // refused at the write: fine
    }
    assert!(col.get_json(&db, "1").unwrap().is_some(), "reads back through the default path");
    drop(col);
    db.close().unwrap();
    Some(deep)
}

/// Failed before its fix. A record of a dynamic collection with a field of any type, 150 levels deep: the
/// write is Ok and reads back through the default (checksum-verified, trusted) path, but
/// `Db::check` (design.md:255-256: "every record validates with from_untrusted_with_keys")
/// reports the sound record as damage ("nesting depth 129 … exceeds the limit 128").
#[test]
fn a_deep_record_written_ok_is_not_reported_as_damage_by_check() {
    let (_dir, path) = temp();
    if deep_record_file(&path).is_none() {
        return;
    }
    let db = Db::open(&path).unwrap();
    let report = db.check().unwrap();
    assert!(report.problems.is_empty(), "check calls the sound record damaged: {:?}", report.problems);
}

/// Failed before its fix. The same record read with `verify_checksums: false` (records are then validated,
/// design.md:207, storage.md:63) is an error, where the default open reads it.
#[test]
fn a_deep_record_written_ok_reads_with_checksums_off() {
    let (_dir, path) = temp();
    let Some(deep) = deep_record_file(&path) else { return };
    let db = Db::open_with(&path, DbOptions { verify_checksums: false, ..DbOptions::default() }).unwrap();
    let col = db.dyn_collection("deep").unwrap();
    let read = col.get_json(&db, "1").map(|r| r.map(|r| r.to_json()));
    let expected = serde_json::json!({"id": 1, "v": deep}).to_string();
    assert!(matches!(&read, Ok(Some(json)) if *json == expected), "{:?}", read.map(|r| r.map(|j| j.len())));
}

/// query.md:121-123: the parsed expression is at most 128 levels, "a chain of 126 `and`s";
/// parentheses nest at most 128 deep. Each past its bound is a typed error.
#[test]
fn expression_depth_bounds() {
    use tessera::query::Expr;
    let chain = |ands: usize| (0..=ands).map(|i| format!("a{i} = 1")).collect::<Vec<_>>().join(" and ");
    assert!(Expr::parse(&chain(126)).is_ok(), "126 ands");
    assert!(Expr::parse(&chain(127)).is_err(), "127 ands");
    let parens = |n: usize| format!("{}a = 1{}", "(".repeat(n), ")".repeat(n));
    assert!(Expr::parse(&parens(100)).is_ok());
    assert!(Expr::parse(&parens(129)).is_err());
}

/// collections.md:128-136 and README ("a narrowing change is refused without a migration"):
/// a new optional field, an integer becoming a float, a required field becoming optional are
/// compatible; a new required field and a narrowed integer are `SchemaMismatch`.
#[test]
fn schema_evolution_rules() {
    mod a {
        use super::*;
        #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
        #[record(name = "evolve")]
        pub struct V1 {
            #[record(key)]
            pub id: u32,
            pub count: u32,
            pub name: String,
        }
        #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
        #[record(name = "evolve")]
        pub struct Compatible {
            #[record(key)]
            pub id: u32,
            pub count: f64,
            pub name: Option<String>,
            pub extra: Option<u8>,
        }
        #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
        #[record(name = "evolve")]
        pub struct NewRequired {
            #[record(key)]
            pub id: u32,
            pub count: u32,
            pub name: String,
            pub required: u8,
        }
        #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
        #[record(name = "evolve")]
        pub struct Narrowed {
            #[record(key)]
            pub id: u32,
            pub count: u16,
            pub name: String,
        }
    }
    let (_dir, db) = open();
    {
        let v1 = db.collection::<a::V1>().unwrap();
        db.write(|tx| v1.insert(tx, &a::V1 { id: 1, count: 70_000, name: "n".into() })).unwrap();
    }
    assert!(matches!(db.collection::<a::NewRequired>().map(|_| ()), Err(Error::SchemaMismatch { .. })));
    assert!(matches!(db.collection::<a::Narrowed>().map(|_| ()), Err(Error::SchemaMismatch { .. })));
    let compatible = db.collection::<a::Compatible>().unwrap();
    let record = compatible.get(&db, &1u32).unwrap().unwrap();
    assert_eq!((record.count, record.name.as_deref(), record.extra), (70_000.0, Some("n"), None));
}
