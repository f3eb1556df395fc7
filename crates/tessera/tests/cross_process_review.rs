//! Review of what happens when several processes share one database file with
//! `DbOptions::cross_process_notify`: bursts of remote commits growing the map, a writer
//! killed inside its write closure or at random moments, a commit sequence oracle against gaps,
//! remote deletes of records a subscription holds, and the database closing under a blocked
//! subscriber. Every test runs real second processes: this test binary again, with the role
//! in an environment variable. Every wait is bounded.

use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tessera::collection::{Order, Record};
use tessera::live::{Event, SubscriptionEnd};
use tessera::{Db, DbOptions, Error, FeedEvent, FeedRetention, ObjectChange, QuerySubscription};

const ROLE: &str = "TESSERA_XP_REVIEW_ROLE";
const PATH: &str = "TESSERA_XP_REVIEW_PATH";
const ARG: &str = "TESSERA_XP_REVIEW_ARG";
const WAIT: Duration = Duration::from_secs(30);

#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "items")]
struct Item {
    #[record(key)]
    id: u32,
    #[record(unique)]
    email: String,
    #[record(index)]
    rank: i64,
    /// The commit that last wrote the record (`WriteTxn::sequence`).
    seq: u64,
    payload: String,
}

fn options() -> DbOptions {
    DbOptions { durable_feed: true, cross_process_notify: true, ..DbOptions::default() }
}

/// A child process, killed if the test fails before waiting for it.
struct ChildGuard(Option<Child>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl ChildGuard {
    fn child(&mut self) -> &mut Child {
        self.0.as_mut().unwrap()
    }

    /// Waits (bounded) for the child to exit successfully.
    fn finish(mut self) {
        let mut child = self.0.take().unwrap();
        let deadline = Instant::now() + WAIT * 2;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                assert!(status.success(), "the child process failed: {status}");
                return;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the child did not finish within {:?}", WAIT * 2);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn kill(mut self) {
        let mut child = self.0.take().unwrap();
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
    }
}

fn spawn(role: &str, path: &Path, arg: &str, piped: bool) -> ChildGuard {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["xp_review_child", "--exact", "--ignored", "--test-threads=1", "--nocapture"])
        .env(ROLE, role)
        .env(PATH, path)
        .env(ARG, arg);
    if piped {
        command.stdout(Stdio::piped());
    }
    ChildGuard(Some(command.spawn().unwrap()))
}

/// Lines of the child's stdout, on a channel (bounded waits on it).
fn lines_of(child: &mut ChildGuard) -> std::sync::mpsc::Receiver<String> {
    let stdout = BufReader::new(child.child().stdout.take().unwrap());
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                return;
            }
        }
    });
    receiver
}

fn wait_line(lines: &std::sync::mpsc::Receiver<String>, suffix: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) if line.ends_with(suffix) => return,
            Ok(_) => continue,
            Err(_) => panic!("the child printed no {suffix:?} within {WAIT:?}"),
        }
    }
}

fn item(id: u32, seq: u64, payload_len: usize) -> Item {
    Item { id, email: format!("user{id}@x"), rank: i64::from(id % 97), seq, payload: "p".repeat(payload_len) }
}

#[test]
#[ignore = "run by the tests of this file as a child process"]
fn xp_review_child() {
    let role = std::env::var(ROLE).expect("run by a parent test");
    let path = std::env::var(PATH).expect("run by a parent test");
    let arg = std::env::var(ARG).unwrap_or_default();
    match role.as_str() {
        "burst" => burst(&path, &arg),
        "killed_writer" => killed_writer(&path),
        "forever" => forever(&path),
        "gap_burst" => gap_burst(&path, &arg),
        "delete_all" => delete_all(&path),
        "insert_one" => insert_one(&path, &arg),
        "slow_insert" => slow_insert(&path, &arg),
        other => panic!("unknown role {other}"),
    }
}

/// `arg` (`COMMITS` or `COMMITS:FIRST_ID`) commits, one at a time, as fast as it can: inserts with large payloads (the map
/// grows), updates of earlier records and deletes.
fn burst(path: &str, arg: &str) {
    let (commits, base) = arg.split_once(':').unwrap_or((arg, "1000"));
    let (commits, base): (u32, u32) = (commits.parse().unwrap(), base.parse().unwrap());
    let db = Db::open_with(path, DbOptions { map_size_initial_bytes: 1 << 16, ..options() }).unwrap();
    let items = db.collection::<Item>().unwrap();
    for i in 0..commits {
        let id = base + i;
        db.write(|tx| {
            let seq = tx.sequence();
            items.insert(tx, &item(id, seq, 20_000))?;
            if i % 3 == 1 {
                items.update(tx, &(id - 1), |it| {
                    it.rank = -it.rank - 1;
                    it.seq = seq;
                })?;
            }
            if i % 5 == 4 {
                items.delete(tx, &(id - 2))?;
            }
            Ok(())
        })
        .unwrap();
    }
}

/// Commits once, then inserts a record (email `dup@x`) inside a write closure and waits there,
/// with the write lock held, until the parent kills it.
fn killed_writer(path: &str) {
    let db = Db::open_with(path, options()).unwrap();
    let items = db.collection::<Item>().unwrap();
    db.write(|tx| {
        let seq = tx.sequence();
        items.insert(tx, &item(500, seq, 10))
    })
    .unwrap();
    let _: tessera::Result<()> = db.write(|tx| {
        let seq = tx.sequence();
        items.insert(tx, &Item { email: "dup@x".into(), ..item(501, seq, 100_000) })?;
        items.update(tx, &1u32, |it| it.rank = 12_345)?;
        println!("writing");
        std::thread::sleep(Duration::from_secs(600));
        Ok(())
    });
}

/// Commits until killed, printing "ack N" after each.
fn forever(path: &str) {
    let db = Db::open_with(path, DbOptions { map_size_initial_bytes: 1 << 16, ..options() }).unwrap();
    let items = db.collection::<Item>().unwrap();
    let mut n = 0u32;
    loop {
        let id = 100_000 + n;
        db.write(|tx| {
            let seq = tx.sequence();
            items.upsert(tx, &item(id, seq, 3_000))?;
            if n % 2 == 1 {
                items.delete(tx, &(id - 1)).map(drop)?;
            }
            Ok(())
        })
        .unwrap();
        println!("ack {n}");
        n += 1;
    }
}

/// `arg` inserts, one commit each, by a writer that keeps only the newest commit in the
/// durable feed: the other process cannot read most of them back.
fn gap_burst(path: &str, arg: &str) {
    let commits: u32 = arg.parse().unwrap();
    let retention = FeedRetention { commits_max: 1, ..FeedRetention::default() };
    let durability = tessera::Durability::Buffered { max_delay: Duration::from_millis(50) };
    let db = Db::open_with(path, DbOptions { feed_retention: retention, durability, ..options() }).unwrap();
    let items = db.collection::<Item>().unwrap();
    for i in 0..commits {
        db.write(|tx| {
            let seq = tx.sequence();
            items.insert(tx, &item(50_000 + i, seq, 10))
        })
        .unwrap();
    }
}

fn delete_all(path: &str) {
    let db = Db::open_with(path, options()).unwrap();
    let items = db.collection::<Item>().unwrap();
    let ids: Vec<u32> = items.all().fetch(&db).unwrap().iter().map(|it| it.id).collect();
    db.write(|tx| ids.iter().try_for_each(|id| items.delete(tx, id).map(drop))).unwrap();
}

/// Inserts record `arg` in a write that holds the write lock for a while before it commits.
fn slow_insert(path: &str, arg: &str) {
    let id: u32 = arg.parse().unwrap();
    let db = Db::open_with(path, options()).unwrap();
    let items = db.collection::<Item>().unwrap();
    db.write(|tx| {
        let seq = tx.sequence();
        items.insert(tx, &item(id, seq, 10))?;
        println!("writing");
        std::thread::sleep(Duration::from_millis(500));
        Ok(())
    })
    .unwrap();
}

fn insert_one(path: &str, arg: &str) {
    let id: u32 = arg.parse().unwrap();
    let db = Db::open_with(path, options()).unwrap();
    let items = db.collection::<Item>().unwrap();
    db.write(|tx| {
        let seq = tx.sequence();
        items.insert(tx, &item(id, seq, 10))
    })
    .unwrap();
}

// ------------------------------------------------------------------------------ helpers

fn ids_of<'a>(items: impl IntoIterator<Item = &'a std::sync::Arc<Item>>) -> Vec<u32> {
    items.into_iter().map(|it| it.id).collect()
}

fn fresh(db: &Db) -> Vec<Item> {
    let items = db.collection::<Item>().unwrap();
    items.all().order_by(Item::rank(), Order::Asc).fetch(db).unwrap().into_iter().collect()
}

/// Follows `live` until its result equals a fresh query's (by value), or it ends. Returns the
/// end, if it ended.
fn settle(db: &Db, live: &QuerySubscription<Item>, mut result: Vec<Item>) -> Option<SubscriptionEnd> {
    let deadline = Instant::now() + WAIT;
    loop {
        match live.recv_timeout(Duration::from_millis(300)) {
            Some(Event::Changed(change)) => {
                result = change.result.iter().map(|it| (**it).clone()).collect();
                continue;
            }
            Some(Event::Closed(end)) => return Some(end),
            Some(Event::Initial(_)) => panic!("a second Initial"),
            None => {}
        }
        // Quiet for 300 ms: the result must be a fresh query's by now, or soon.
        let expected = fresh(db);
        if result == expected {
            return None;
        }
        assert!(
            Instant::now() < deadline,
            "the subscription stopped at {:?} (len {}); a fresh query has {:?} (len {})",
            ids_sorted(&result),
            result.len(),
            ids_sorted(&expected),
            expected.len()
        );
    }
}

fn ids_sorted(items: &[Item]) -> Vec<u32> {
    let mut ids: Vec<u32> = items.iter().map(|it| it.id).collect();
    ids.sort_unstable();
    ids
}

fn initial_query(live: &QuerySubscription<Item>) -> Vec<Item> {
    match live.recv_timeout(WAIT) {
        Some(Event::Initial(result)) => result.iter().map(|it| (**it).clone()).collect(),
        other => panic!("expected Initial, got {:?}", other.map(|e| e.is_closed())),
    }
}

fn seed(db: &Db, ids: std::ops::Range<u32>) {
    let items = db.collection::<Item>().unwrap();
    db.write(|tx| {
        let seq = tx.sequence();
        ids.clone().try_for_each(|id| items.insert(tx, &item(id, seq, 10)).map(drop))
    })
    .unwrap();
}

// ------------------------------------------------------------------------------ tests

/// A burst of remote commits that grows the map many times over: every batch reaches the raw
/// feed once, in order, with old values, and query and object subscriptions end equal to a
/// fresh read.
#[test]
fn a_burst_of_remote_commits_that_grows_the_map_reaches_every_subscription() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, DbOptions { map_size_initial_bytes: 1 << 16, ..options() }).unwrap();
    seed(&db, 1..10);
    let items = db.collection::<Item>().unwrap();
    let live = items.subscribe_query(&items.all().order_by(Item::rank(), Order::Asc)).unwrap();
    let first = initial_query(&live);
    let object = items.subscribe_object(&1_012u32).unwrap();
    assert!(matches!(object.recv_timeout(WAIT), Some(Event::Initial(None))));
    let stream = db.subscribe().unwrap();
    let start = db.read(|tx| Ok(tx.sequence())).unwrap();
    let map_before = db.map_size_bytes();
    const COMMITS: u32 = 400;
    spawn("burst", &path, &COMMITS.to_string(), false).finish();
    assert_eq!(settle(&db, &live, first).map(|end| format!("{end:?}")), None, "the subscription ended");
    assert!(db.map_size_bytes() > map_before * 4, "the child grew the map: {} -> {}", map_before, db.map_size_bytes());
    // Record 1012: inserted (i = 12), updated (i = 13), then deleted (i = 14).
    let mut seen = Vec::new();
    let deadline = Instant::now() + WAIT;
    while seen.last() != Some(&"deleted") {
        let left = deadline.saturating_duration_since(Instant::now());
        match object.recv_timeout(left) {
            Some(Event::Changed(ObjectChange::Updated(_))) => seen.push("updated"),
            Some(Event::Changed(ObjectChange::Deleted)) => seen.push("deleted"),
            other => panic!("object subscription: {:?} after {seen:?}", other.map(|e| e.is_closed())),
        }
    }
    assert_eq!(seen, ["updated", "updated", "deleted"]);
    // The raw feed: every commit the durable feed has since `start`, each once, in order.
    let expected: Vec<u64> = db.changes_since(start, 100_000).unwrap().iter().map(|b| b.sequence).collect();
    assert_eq!(expected.len(), COMMITS as usize);
    let mut received = Vec::new();
    while received.len() < expected.len() {
        match stream.recv_timeout(WAIT) {
            Some(FeedEvent::Batch(batch)) => {
                let record = batch.changes.iter().find(|c| &*c.keyspace == "tessera.col.items").expect("a record change");
                assert!(record.new.is_some() && record.old.is_none(), "commit {}: the insert first", batch.sequence);
                for change in batch.changes.iter().filter(|c| &*c.keyspace == "tessera.col.items") {
                    match change.kind {
                        tessera::ChangeKind::Insert => assert!(change.old.is_none()),
                        _ => assert!(change.old.is_some(), "commit {}: an update or delete without its old value", batch.sequence),
                    }
                }
                received.push(batch.sequence);
            }
            other => panic!("expected a batch, got {other:?} after {} of {}", received.len(), expected.len()),
        }
    }
    assert_eq!(received, expected);
    assert!(stream.recv_timeout(Duration::from_millis(200)).is_none(), "each commit once");
}

/// A process killed with SIGKILL inside its write closure, holding the write lock: its half
/// transaction is invisible (a record with the email it inserted can be inserted), this
/// process's writer gets the lock, and the subscriptions here follow on, through later
/// commits of this process and of a new process.
#[test]
fn a_writer_killed_inside_its_closure_leaves_no_trace_and_notification_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, options()).unwrap();
    seed(&db, 1..5);
    let items = db.collection::<Item>().unwrap();
    let live = items.subscribe_query(&items.all().order_by(Item::rank(), Order::Asc)).unwrap();
    let first = initial_query(&live);
    let stream = db.subscribe().unwrap();
    let mut child = spawn("killed_writer", &path, "", true);
    let lines = lines_of(&mut child);
    wait_line(&lines, "writing");
    // This process's writer waits for the child's lock.
    let (done, finished) = std::sync::mpsc::channel();
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            let items = db.collection::<Item>().unwrap();
            done.send(db.write(|tx| {
                let seq = tx.sequence();
                items.insert(tx, &Item { email: "dup@x".into(), ..item(7, seq, 10) })
            }))
            .unwrap()
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    assert!(finished.try_recv().is_err(), "the child holds the write lock");
    child.kill();
    let written = finished.recv_timeout(WAIT).expect("the write goes ahead once the lock's holder is dead");
    written.expect("the killed transaction's unique entry is not there");
    writer.join().unwrap();
    assert!(items.get(&db, &501u32).unwrap().is_none(), "the killed transaction's record");
    assert_ne!(items.get(&db, &1u32).unwrap().unwrap().rank, 12_345, "the killed transaction's update");
    assert!(items.get(&db, &500u32).unwrap().is_some(), "the child's committed record");
    // A new process commits: this process's watcher still delivers.
    spawn("insert_one", &path, "600", false).finish();
    assert_eq!(settle(&db, &live, first).map(|end| format!("{end:?}")), None, "the subscription ended");
    // The raw feed: the child's first commit, this process's, the new child's; nothing else.
    let mut sequences = Vec::new();
    while let Some(event) = stream.recv_timeout(Duration::from_millis(500)) {
        match event {
            FeedEvent::Batch(batch) => sequences.push(batch.sequence),
            FeedEvent::Lagged { missed } => panic!("lagged {missed}"),
        }
    }
    assert_eq!(sequences.len(), 3, "{sequences:?}");
    assert!(sequences.windows(2).all(|pair| pair[0] < pair[1]));
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{report}");
}

/// A writer process killed with SIGKILL at random moments of a burst (maybe between its
/// commit and its wake-up, maybe mid-transaction, maybe mid-growth of the map), again and
/// again: each time this process's subscription ends equal to a fresh query, and its raw feed
/// has exactly the commits the durable feed has.
#[test]
fn writers_killed_at_random_moments_leave_subscriptions_equal_to_a_fresh_query() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, options()).unwrap();
    seed(&db, 1..5);
    let items = db.collection::<Item>().unwrap();
    let live = items.subscribe_query(&items.all().order_by(Item::rank(), Order::Asc)).unwrap();
    let mut result = initial_query(&live);
    let stream = db.subscribe().unwrap();
    let start = db.read(|tx| Ok(tx.sequence())).unwrap();
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    let mut received = Vec::new();
    for round in 0..12 {
        let mut child = spawn("forever", &path, "", true);
        let lines = lines_of(&mut child);
        wait_line(&lines, "ack 0");
        std::thread::sleep(Duration::from_micros(rng.u64(0..30_000)));
        child.kill();
        // This process writes after each kill too: its commit follows the child's.
        seed(&db, 10 + round..11 + round);
        if let Some(end) = settle(&db, &live, result.clone()) {
            panic!("round {round}: the subscription ended: {end:?}");
        }
        result = fresh(&db);
        while let Some(FeedEvent::Batch(batch)) = stream.recv_timeout(Duration::from_millis(50)) {
            received.push(batch.sequence);
        }
    }
    while let Some(event) = stream.recv_timeout(Duration::from_millis(300)) {
        match event {
            FeedEvent::Batch(batch) => received.push(batch.sequence),
            FeedEvent::Lagged { missed } => panic!("lagged {missed}"),
        }
    }
    let expected: Vec<u64> = db.changes_since(start, 1_000_000).unwrap().iter().map(|b| b.sequence).collect();
    assert_eq!(received, expected, "every commit once, in order");
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{report}");
}

/// Another process deletes every record that subscriptions here hold: object subscriptions
/// get `Deleted`, the query an empty result, and a later insert is seen.
#[test]
fn records_deleted_by_another_process_leave_subscriptions_empty_not_stale() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, options()).unwrap();
    seed(&db, 1..40);
    let items = db.collection::<Item>().unwrap();
    let live = items.subscribe_query(&items.all().order_by(Item::rank(), Order::Asc)).unwrap();
    let first = initial_query(&live);
    let by_key = items.subscribe_query(&items.filter(Item::id().eq(3u32))).unwrap();
    assert_eq!(by_key.recv_timeout(WAIT).and_then(Event::initial).unwrap().len(), 1);
    let object = items.subscribe_object(&5u32).unwrap();
    assert!(matches!(object.recv_timeout(WAIT), Some(Event::Initial(Some(_)))));
    spawn("delete_all", &path, "", false).finish();
    assert!(matches!(object.recv_timeout(WAIT), Some(Event::Changed(ObjectChange::Deleted))));
    assert!(by_key.recv_timeout(WAIT).and_then(Event::changed).unwrap().result.is_empty());
    assert_eq!(settle(&db, &live, first).map(|end| format!("{end:?}")), None);
    assert!(fresh(&db).is_empty());
    spawn("insert_one", &path, "5", false).finish();
    match object.recv_timeout(WAIT) {
        Some(Event::Changed(ObjectChange::Updated(it))) => assert_eq!(it.id, 5),
        other => panic!("expected the insert, got {:?}", other.map(|e| e.is_closed())),
    }
    assert_eq!(ids_of(&live.recv_timeout(WAIT).and_then(Event::changed).unwrap().result), [5]);
}

/// The database closes (its last handle dropped) while other threads block in `recv` and in
/// the iterator of its subscriptions, with the cross-process watcher running and another
/// process committing: every one ends with `Closed(DatabaseClosed)`, none hangs.
#[test]
fn closing_the_database_ends_subscriptions_blocked_in_other_threads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, options()).unwrap();
    seed(&db, 1..5);
    let items = db.collection::<Item>().unwrap();
    let live = items.subscribe_query(&items.all()).unwrap();
    let object = items.subscribe_object(&1u32).unwrap();
    let (done, ended) = std::sync::mpsc::channel();
    let blocked_query = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut last = None;
            for event in live {
                last = Some(event.is_closed());
            }
            done.send(("query", last)).unwrap();
        })
    };
    let blocked_object = std::thread::spawn(move || {
        let mut last = None;
        while let Some(event) = object.recv() {
            last = Some(matches!(event, Event::Closed(SubscriptionEnd::DatabaseClosed)));
        }
        done.send(("object", last)).unwrap();
    });
    let mut child = spawn("forever", &path, "", true);
    let lines = lines_of(&mut child);
    wait_line(&lines, "ack 20");
    drop(items);
    drop(db);
    for _ in 0..2 {
        let (which, last) = ended.recv_timeout(WAIT).expect("a subscription blocked in another thread never ended");
        assert_eq!(last, Some(true), "{which}: the last event is Closed");
    }
    blocked_query.join().unwrap();
    blocked_object.join().unwrap();
    child.kill();
    // The file opens again in this process, with the watcher.
    let db = Db::open_with(&path, options()).unwrap();
    assert!(db.collection::<Item>().unwrap().get(&db, &1u32).unwrap().is_some());
}

/// A writer that keeps one commit in the durable feed bursts: this process cannot read most
/// of its commits back (gaps). Each delivered result must be the file's state at the commit
/// it names (records carry the sequence of the commit that wrote them, and nothing is
/// deleted), or the subscription ends with `CrossProcessGap`: never a result that lacks a
/// commit before it. This process writes from two threads all along (some commits large
/// enough for the delivery thread), so that gaps are found while deliveries are under way;
/// after each gap the subscriptions are made again.
#[test]
fn a_gap_in_remote_commits_ends_subscriptions_before_any_later_result_is_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, options()).unwrap();
    seed(&db, 1..3);
    let items = db.collection::<Item>().unwrap();
    let subscribe = || {
        // Others too, so that each delivery takes a while.
        let others: Vec<_> = (0..5).map(|_| items.subscribe_query(&items.all()).unwrap()).collect();
        let live = items.subscribe_query(&items.all()).unwrap();
        assert!(matches!(live.recv_timeout(WAIT), Some(Event::Initial(_))));
        (live, others)
    };
    // Per delivered result: the commit it names and its length (each of its records is
    // checked at once to have been written at or before that commit).
    let mut results: Vec<(u64, usize)> = Vec::new();
    let check = |sequence: u64, result: &tessera::live::Results<Item>| {
        for it in result.iter() {
            assert!(it.seq <= sequence, "the result for commit {sequence} has record {} of commit {}", it.id, it.seq);
        }
        (sequence, result.len())
    };
    let (mut live, mut others) = subscribe();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..2u32)
        .map(|thread| {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let items = db.collection::<Item>().unwrap();
                let mut n = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    // Every eighth commit is large: delivered by the delivery thread.
                    let count = if n.is_multiple_of(8) { 300 } else { 1 };
                    let first = 1_000_000 + thread * 10_000_000 + n * 1_000;
                    db.write(|tx| {
                        let seq = tx.sequence();
                        (first..first + count).try_for_each(|id| items.insert(tx, &item(id, seq, 10)).map(drop))
                    })
                    .unwrap();
                    n += 1;
                    std::thread::sleep(Duration::from_millis(2));
                }
            })
        })
        .collect();
    let mut child = spawn("gap_burst", &path, "4000", false);
    let mut gaps = 0;
    let deadline = Instant::now() + WAIT * 3;
    while child.child().try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the child did not finish");
        match live.recv_timeout(Duration::from_millis(20)) {
            Some(Event::Changed(change)) => results.push(check(change.sequence, &change.result)),
            Some(Event::Closed(SubscriptionEnd::Failed(error))) if matches!(*error, Error::CrossProcessGap { .. }) => {
                gaps += 1;
                drop(others);
                (live, others) = subscribe();
            }
            Some(Event::Closed(other)) => panic!("ended with {other:?}"),
            Some(Event::Initial(_)) => panic!("a second Initial"),
            None => {}
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap();
    }
    child.finish();
    drop(others);
    // Every record, with the commit that wrote it (insert-only: the state at commit `s` is the
    // records with `seq <= s`).
    let mut seqs: Vec<u64> = items.all().fetch(&db).unwrap().iter().map(|it| it.seq).collect();
    seqs.sort_unstable();
    let total = seqs.len();
    let mut end = None;
    let deadline = Instant::now() + WAIT;
    while end.is_none() && results.last().map(|r| r.1) != Some(total) {
        assert!(Instant::now() < deadline, "the subscription stopped at {:?} of {total} records, without an end", results.last());
        match live.recv_timeout(Duration::from_millis(500)) {
            Some(Event::Changed(change)) => results.push(check(change.sequence, &change.result)),
            Some(Event::Closed(reason)) => end = Some(reason),
            Some(Event::Initial(_)) => panic!("a second Initial"),
            None => {}
        }
    }
    let mut wrong = Vec::new();
    for &(sequence, len) in &results {
        let expected = seqs.partition_point(|seq| *seq <= sequence);
        if len != expected {
            wrong.push((sequence, len, expected));
        }
    }
    eprintln!("{} results delivered, {gaps} gaps, ended with {end:?}", results.len());
    assert!(gaps > 0, "no gap happened: the test tested nothing");
    assert!(
        wrong.is_empty(),
        "{} of {} results delivered were not the file's state at their commit, e.g. (commit, delivered len, expected len) {:?}",
        wrong.len(),
        results.len(),
        &wrong[..wrong.len().min(5)]
    );
    match end {
        Some(SubscriptionEnd::Failed(error)) => assert!(matches!(*error, Error::CrossProcessGap { .. }), "{error}"),
        None => {}
        Some(other) => panic!("ended with {other:?}"),
    }
}

/// What [`gap_during_delivery`] leaves.
struct GapDuringDelivery {
    _dir: tempfile::TempDir,
    db: Db,
    live: QuerySubscription<Item>,
    stream: tessera::ChangeStream,
    others: Vec<QuerySubscription<Item>>,
}

/// A large commit of this process keeps the delivery thread busy; meanwhile this process's
/// watcher is held out (a map growth waits for a read transaction, and the watcher waits at
/// the resize gate) while another process makes commits that retention removes from the feed
/// as it goes: a gap. The writer that grew the map then commits (finding the gap) while the
/// delivery is still under way.
fn gap_during_delivery() -> GapDuringDelivery {
    // One at a time, and with more subscriptions (a longer delivery) if a busy machine let the
    // delivery end before the gap was found.
    static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _heavy = HEAVY.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    for others in [30, 90, 200] {
        if let Some(case) = try_gap_during_delivery(others) {
            return case;
        }
    }
    panic!("test setup: the large commit's delivery always ended before the gap was found");
}

fn try_gap_during_delivery(others: usize) -> Option<GapDuringDelivery> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, options()).unwrap();
    seed(&db, 1..3);
    let items = db.collection::<Item>().unwrap();
    let blobs = db.keyspace("blobs").unwrap();
    // The subscription checked first (its slot is applied first), then others that keep the
    // delivery busy.
    let live = items.subscribe_query(&items.all()).unwrap();
    assert!(matches!(live.recv_timeout(WAIT), Some(Event::Initial(_))));
    let others: Vec<_> = (0..others).map(|_| items.subscribe_query(&items.all().order_by(Item::rank(), Order::Desc)).unwrap()).collect();
    let stream = db.subscribe().unwrap();
    // D: a large commit, delivered by the delivery thread for a while.
    let started = Instant::now();
    db.write(|tx| {
        let seq = tx.sequence();
        (10_000..40_000u32).try_for_each(|id| items.insert(tx, &item(id, seq, 10)).map(drop))
    })
    .unwrap();
    // A read transaction held on another thread: the growth below waits for it.
    let (release, released) = std::sync::mpsc::channel::<()>();
    let (opened, is_open) = std::sync::mpsc::channel::<()>();
    let reader = {
        let db = db.clone();
        std::thread::spawn(move || {
            let txn = db.read_txn().unwrap();
            opened.send(()).unwrap();
            let _ = released.recv_timeout(WAIT);
            drop(txn);
        })
    };
    is_open.recv_timeout(WAIT).unwrap();
    // E: a write that must grow the map, so it waits (with the resize gate closed) for the reader.
    let grower = {
        let (db, blobs) = (db.clone(), blobs.clone());
        std::thread::spawn(move || {
            let items = db.collection::<Item>().unwrap();
            let free = db.map_size_bytes() as usize;
            db.write(|tx| {
                let seq = tx.sequence();
                tx.put(&blobs, b"big", &vec![7u8; free + (8 << 20)])?;
                items.insert(tx, &item(9_000_000, seq, 10)).map(|_| seq)
            })
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    // Another process's commits, which retention removes from the feed as it goes.
    spawn("gap_burst", &path, "50", false).finish();
    let child_done = started.elapsed();
    release.send(()).unwrap();
    reader.join().unwrap();
    let e_sequence = grower.join().unwrap().unwrap();
    let e_done = started.elapsed();
    let d_delivered = matches!(stream.try_recv(), Some(FeedEvent::Batch(_)));
    eprintln!("child done at {child_done:?}, E ({e_sequence}) committed at {e_done:?}; D delivered to listeners by then: {d_delivered}");
    (!d_delivered).then_some(GapDuringDelivery { _dir: dir, db, live, stream, others })
}

/// The rule above made deterministic (see [`gap_during_delivery`]): the commit made after
/// the gap must not reach the subscriptions, whose last state lacks the lost commits; they
/// end with `CrossProcessGap`. (Before the fix, the result of that commit, without the other
/// process's 50 records, was delivered, and only then did the subscription end.)
#[test]
fn a_gap_found_during_a_delivery_ends_subscriptions_before_the_next_commit_reaches_them() {
    let GapDuringDelivery { _dir, db, live, stream: _stream, others } = gap_during_delivery();
    let items = db.collection::<Item>().unwrap();
    let mut seqs: Vec<u64> = items.all().fetch(&db).unwrap().iter().map(|it| it.seq).collect();
    seqs.sort_unstable();
    let mut events = Vec::new();
    let end = loop {
        match live.recv_timeout(WAIT) {
            Some(Event::Changed(change)) => {
                let expected = seqs.partition_point(|seq| *seq <= change.sequence);
                events.push((change.sequence, change.result.len(), expected));
            }
            Some(Event::Closed(end)) => break end,
            Some(Event::Initial(_)) => panic!("a second Initial"),
            None => panic!("neither a change nor an end within {WAIT:?} after {events:?}"),
        }
    };
    drop(others);
    eprintln!("delivered (commit, len, expected len): {events:?}; ended with {end:?}");
    assert!(matches!(&end, SubscriptionEnd::Failed(error) if matches!(**error, Error::CrossProcessGap { .. })), "{end:?}");
    for (sequence, len, expected) in &events {
        assert_eq!(
            len, expected,
            "the result delivered for commit {sequence} is not the file's state then (it lacks the lost commits): {events:?}"
        );
    }
    // A subscription made now follows on (the gap's late report does not end it).
    let again = items.subscribe_query(&items.all()).unwrap();
    assert_eq!(again.recv_timeout(WAIT).and_then(Event::initial).unwrap().len(), seqs.len());
    std::thread::sleep(Duration::from_millis(300)); // the watcher's next look reports the gap
    seed(&db, 5..6);
    assert_eq!(again.recv_timeout(WAIT).and_then(Event::changed).map(|change| change.result.len()), Some(seqs.len() + 1));
}

/// The raw change feed in the same case: a listener must learn of the lost commits
/// (`Lagged`) before it receives a batch committed after them, not after it (the gap is queued
/// in the feed's outbox in commit order: `Feed::note_lost_commits`).
#[test]
fn a_gap_found_during_a_delivery_reaches_the_raw_feed_before_the_next_commit() {
    let GapDuringDelivery { _dir, db: _db, live: _live, stream, others } = gap_during_delivery();
    drop(others);
    let mut feed = Vec::new();
    while let Some(event) = stream.recv_timeout(Duration::from_secs(2)) {
        feed.push(match event {
            FeedEvent::Batch(batch) => format!("batch {}", batch.sequence),
            FeedEvent::Lagged { missed } => format!("lagged {missed}"),
        });
    }
    assert!(
        feed.len() >= 2 && feed[0].starts_with("batch ") && feed[1].starts_with("lagged "),
        "the large commit, then the loss: {feed:?}"
    );
}

/// A write of this process that fails (its closure returns an error) after it caught up with
/// another process's commit: that commit still reaches the subscriptions and the raw feed, at
/// once, not whenever some later commit happens to deliver what was queued.
#[test]
fn a_remote_commit_caught_up_by_a_write_that_fails_still_reaches_subscriptions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, options()).unwrap();
    seed(&db, 1..5);
    let items = db.collection::<Item>().unwrap();
    let live = items.subscribe_query(&items.all().order_by(Item::rank(), Order::Asc)).unwrap();
    let first = initial_query(&live);
    let object = items.subscribe_object(&77u32).unwrap();
    assert!(matches!(object.recv_timeout(WAIT), Some(Event::Initial(None))));
    let stream = db.subscribe().unwrap();
    let mut child = spawn("slow_insert", &path, "77", true);
    let lines = lines_of(&mut child);
    wait_line(&lines, "writing");
    // Waits for the child's write lock, catches up with its commit, then fails.
    let failed = db.write(|tx| {
        let seq = tx.sequence();
        items.insert(tx, &item(1, seq, 10)) // record 1 exists
    });
    assert!(failed.is_err(), "{failed:?}");
    child.finish();
    // Nothing else is committed from now on: the commit must arrive all the same.
    match object.recv_timeout(Duration::from_secs(3)) {
        Some(Event::Changed(ObjectChange::Updated(it))) => assert_eq!(it.id, 77),
        other => panic!("the other process's commit never reached the object subscription: {:?}", other.map(|e| e.is_closed())),
    }
    assert!(matches!(stream.recv_timeout(Duration::from_secs(3)), Some(FeedEvent::Batch(_))), "nor the raw feed");
    assert_eq!(settle(&db, &live, first).map(|end| format!("{end:?}")), None);
}

/// A read-only handle on a file with cross-process notification: it never commits, so a live
/// subscription on it can only ever change through other processes' commits. It must deliver
/// them, or be refused with a typed error; an `Initial` followed by silence while the file
/// changes is a stale answer.
#[test]
fn a_subscription_on_a_read_only_handle_follows_other_processes_or_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let db = Db::open_with(&path, options()).unwrap();
        seed(&db, 1..3);
    }
    let db = Db::open_with(&path, DbOptions { read_only: true, ..options() }).unwrap();
    // A read-only handle reads collections through dynamic handles.
    let items = db.dyn_collection("items").unwrap();
    let live = match items.all().subscribe() {
        Ok(live) => live,
        Err(Error::ReadOnly { .. }) => {
            // Refused with an error: nothing silent. So is the raw feed.
            assert!(matches!(db.subscribe(), Err(Error::ReadOnly { .. })), "the raw feed of a read-only handle");
            return;
        }
        Err(other) => panic!("{other}"),
    };
    assert_eq!(live.recv_timeout(WAIT).and_then(Event::initial).map(|result| result.len()), Some(2));
    spawn("insert_one", &path, "90", false).finish();
    assert_eq!(items.all().fetch(&db).unwrap().len(), 3, "a fresh read sees the other process's record");
    match live.recv_timeout(Duration::from_secs(3)) {
        Some(Event::Changed(change)) => assert_eq!(change.result.len(), 3),
        Some(Event::Closed(_)) => {}
        other => panic!("the subscription stays at 2 records while a fresh read has 3: {:?}", other.map(|e| e.is_closed())),
    }
}

/// Two processes burst at once, each growing the map many times over, while this process
/// writes too: this process's subscription ends equal to a fresh query, and its raw feed has
/// every commit of the three processes once, in order.
#[test]
fn two_processes_growing_the_map_at_once_reach_every_subscription() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, DbOptions { map_size_initial_bytes: 1 << 16, ..options() }).unwrap();
    seed(&db, 1..10);
    let items = db.collection::<Item>().unwrap();
    let live = items.subscribe_query(&items.all().order_by(Item::rank(), Order::Asc)).unwrap();
    let first = initial_query(&live);
    let stream = db.subscribe().unwrap();
    let start = db.read(|tx| Ok(tx.sequence())).unwrap();
    let a = spawn("burst", &path, "150:100000", false);
    let b = spawn("burst", &path, "150:200000", false);
    for i in 0..100u32 {
        db.write(|tx| {
            let seq = tx.sequence();
            items.insert(tx, &item(300_000 + i, seq, 5_000)).map(drop)
        })
        .unwrap();
    }
    a.finish();
    b.finish();
    assert_eq!(settle(&db, &live, first).map(|end| format!("{end:?}")), None, "the subscription ended");
    let expected: Vec<u64> = db.changes_since(start, 100_000).unwrap().iter().map(|b| b.sequence).collect();
    assert_eq!(expected.len(), 400);
    let mut received = Vec::new();
    while received.len() < expected.len() {
        match stream.recv_timeout(WAIT) {
            Some(FeedEvent::Batch(batch)) => received.push(batch.sequence),
            other => panic!("expected a batch, got {other:?} after {} of {}", received.len(), expected.len()),
        }
    }
    assert_eq!(received, expected);
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{report}");
}
