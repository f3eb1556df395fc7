//! Notification across processes (issue 19 item 2): with `DbOptions::cross_process_notify`,
//! a commit made by another process on the file reaches this process's change feed and live
//! subscriptions, with the changes (old values included) a local commit has, in commit order
//! with this process's own commits. Every test here runs a real second process: this test
//! binary again, with the role to play in an environment variable.

use serde::{Deserialize, Serialize};
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use tessera::collection::{Order, Record};
use tessera::live::Event;
use tessera::{ChangeKind, Db, DbOptions, Error, FeedEvent, ObjectChange, QuerySubscription, ResultChange};

const CHILD_ROLE: &str = "TESSERA_CROSS_PROCESS_ROLE";
const CHILD_PATH: &str = "TESSERA_CROSS_PROCESS_PATH";
const WAIT: Duration = Duration::from_secs(20);
/// Records each process inserts in the race.
const RACE_RECORDS: u32 = 150;

#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "accounts")]
struct Account {
    #[record(key)]
    id: u32,
    #[record(unique)]
    email: String,
    #[record(index)]
    balance: i64,
}

fn options() -> DbOptions {
    DbOptions { durable_feed: true, cross_process_notify: true, ..DbOptions::default() }
}

fn spawn(role: &str, path: &std::path::Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["cross_process_child", "--exact", "--ignored", "--test-threads=1", "--nocapture"])
        .env(CHILD_ROLE, role)
        .env(CHILD_PATH, path)
        .spawn()
        .unwrap()
}

fn finish(mut child: Child) {
    let status = child.wait().unwrap();
    assert!(status.success(), "the child process failed: {status}");
}

#[test]
#[ignore = "run by the tests of this file as a child process"]
fn cross_process_child() {
    let role = std::env::var(CHILD_ROLE).expect("run by a parent test");
    let path = std::env::var(CHILD_PATH).expect("run by a parent test");
    match role.as_str() {
        "edit" => edit(&path),
        "race" => race(&path, 1),
        "plain" => plain(&path),
        "late" => late(&path),
        other => panic!("unknown role {other}"),
    }
}

/// An update, a delete and an insert, one commit each.
fn edit(path: &str) {
    let db = Db::open_with(path, options()).unwrap();
    let accounts = db.collection::<Account>().unwrap();
    db.write(|tx| accounts.update(tx, &1u32, |account| account.balance = 11)).unwrap();
    db.write(|tx| accounts.delete(tx, &2u32)).unwrap();
    db.write(|tx| accounts.insert(tx, &Account { id: 3, email: "c@x".into(), balance: 30 })).unwrap();
}

/// A commit by a process that opens the file without asking for cross-process notification.
fn plain(path: &str) {
    let db = Db::open_with(path, DbOptions { durable_feed: true, ..DbOptions::default() }).unwrap();
    let accounts = db.collection::<Account>().unwrap();
    db.write(|tx| accounts.update(tx, &1u32, |account| account.balance = 12)).unwrap();
}

/// A process that opens the file before notification is turned on, and writes after.
fn late(path: &str) {
    let db = Db::open_with(path, DbOptions { durable_feed: true, ..DbOptions::default() }).unwrap();
    let accounts = db.collection::<Account>().unwrap();
    let marks = db.keyspace("marks").unwrap();
    db.write(|tx| tx.put(&marks, b"ready", b"")).unwrap();
    wait_for_mark(&db, "go");
    db.write(|tx| accounts.update(tx, &1u32, |account| account.balance = 12)).unwrap();
}

/// The sequence the last wake-up through the side file `PATH-notify` carried.
fn last_wake(path: &std::path::Path) -> u64 {
    let mut notify = path.as_os_str().to_owned();
    notify.push("-notify");
    let bytes = std::fs::read(notify).unwrap();
    u64::from_le_bytes(bytes[..8].try_into().unwrap())
}

fn next_event<S, C>(event: Option<Event<S, C>>, what: &str) -> Event<S, C> {
    event.unwrap_or_else(|| panic!("{what}: nothing delivered within {WAIT:?}"))
}

fn initial<S, C>(event: Option<Event<S, C>>) -> S {
    match next_event(event, "initial") {
        Event::Initial(state) => state,
        Event::Changed(_) => panic!("expected Initial, got Changed"),
        Event::Closed(reason) => panic!("expected Initial, got Closed({reason:?})"),
    }
}

fn changed<S, C>(event: Option<Event<S, C>>) -> C {
    match next_event(event, "change") {
        Event::Changed(change) => change,
        Event::Initial(_) => panic!("expected Changed, got Initial"),
        Event::Closed(reason) => panic!("expected Changed, got Closed({reason:?})"),
    }
}

#[test]
fn a_commit_of_another_process_reaches_the_feed_and_subscriptions_with_its_old_values() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, options()).unwrap();
    let accounts = db.collection::<Account>().unwrap();
    db.write(|tx| {
        accounts.insert(tx, &Account { id: 1, email: "a@x".into(), balance: 10 })?;
        accounts.insert(tx, &Account { id: 2, email: "b@x".into(), balance: 20 })
    })
    .unwrap();
    let object = accounts.subscribe_object(&1u32).unwrap();
    let deleted = accounts.subscribe_object(&2u32).unwrap();
    let rich = accounts.subscribe_query(&accounts.filter(Account::balance().ge(11)).order_by(Account::balance(), Order::Asc)).unwrap();
    let stream = db.subscribe().unwrap();
    assert_eq!(initial(object.recv_timeout(WAIT)).map(|account| account.balance), Some(10));
    assert!(initial(deleted.recv_timeout(WAIT)).is_some());
    let first: Vec<u32> = initial(rich.recv_timeout(WAIT)).iter().map(|account| account.id).collect();
    assert_eq!(first, [2]);

    let started = Instant::now();
    let child = spawn("edit", &path);
    match changed(object.recv_timeout(WAIT)) {
        ObjectChange::Updated(account) => assert_eq!(account.balance, 11),
        other => panic!("expected the update, got {other:?}"),
    }
    assert!(started.elapsed() < WAIT);
    assert!(matches!(changed(deleted.recv_timeout(WAIT)), ObjectChange::Deleted));
    finish(child);

    // The query followed the update (a record entering the result: its old value did not
    // match), the delete (leaving it: the old value says where it was) and the insert.
    let mut ids = first;
    while ids != [1, 3] {
        let change = changed(rich.recv_timeout(WAIT));
        ids = apply(&ids, &change);
    }
    let fresh: Vec<u32> = accounts
        .filter(Account::balance().ge(11))
        .order_by(Account::balance(), Order::Asc)
        .fetch(&db)
        .unwrap()
        .iter()
        .map(|a| a.id)
        .collect();
    assert_eq!(ids, fresh);

    // The raw feed: three batches, with old values for the update and the delete.
    let mut batches = Vec::new();
    while batches.len() < 3 {
        match stream.recv_timeout(WAIT) {
            Some(FeedEvent::Batch(batch)) => batches.push(batch),
            other => panic!("expected a batch, got {other:?}"),
        }
    }
    assert!(batches.windows(2).all(|pair| pair[0].sequence < pair[1].sequence), "in commit order");
    let records: Vec<_> =
        batches.iter().map(|batch| batch.changes.iter().find(|c| c.keyspace.starts_with("tessera.col")).unwrap().clone()).collect();
    assert_eq!(records.iter().map(|change| change.kind).collect::<Vec<_>>(), [ChangeKind::Update, ChangeKind::Delete, ChangeKind::Insert]);
    assert!(records[0].old.is_some() && records[0].new.is_some() && records[0].old != records[0].new);
    assert!(records[1].old.is_some() && records[1].new.is_none());
    assert!(records[2].old.is_none() && records[2].new.is_some());
}

/// Applies a changeset to the previous result's ids as a list view does; returns the new ids,
/// checked against the delivered result.
fn apply(previous: &[u32], change: &ResultChange<Account>) -> Vec<u32> {
    let mut gone = vec![false; previous.len()];
    for &index in change.deletions.iter().chain(change.moves.iter().map(|(from, _)| from)) {
        assert!(!gone[index], "old index {index} deleted or moved twice");
        gone[index] = true;
    }
    let mut slots: Vec<Option<u32>> = vec![None; change.result.len()];
    for &(from, to) in &change.moves {
        slots[to] = Some(previous[from]);
    }
    for &index in &change.insertions {
        assert!(slots[index].is_none(), "new index {index} filled twice");
        slots[index] = Some(change.result[index].id);
    }
    let mut kept = previous.iter().zip(&gone).filter(|(_, gone)| !**gone).map(|(id, _)| *id);
    let ids: Vec<u32> = slots.into_iter().map(|slot| slot.or_else(|| kept.next()).expect("a slot for every row")).collect();
    assert!(kept.next().is_none(), "rows left over");
    let delivered: Vec<u32> = change.result.iter().map(|account| account.id).collect();
    assert_eq!(ids, delivered, "the changeset turns the previous result into the delivered one");
    ids
}

/// Follows `live` until its result equals a fresh query's, checking each changeset.
fn settle(db: &Db, live: &QuerySubscription<Account>, mut ids: Vec<u32>) {
    let accounts = db.collection::<Account>().unwrap();
    let query = accounts.all().order_by(Account::balance(), Order::Desc);
    let fresh: Vec<u32> = query.fetch(db).unwrap().iter().map(|account| account.id).collect();
    let deadline = Instant::now() + WAIT;
    while ids != fresh {
        let left = deadline.saturating_duration_since(Instant::now());
        let change = changed(live.recv_timeout(left));
        ids = apply(&ids, &change);
    }
    // Nothing more is committed: nothing more arrives.
    assert!(live.recv_timeout(Duration::from_millis(300)).is_none());
}

/// One side of the race: inserts records whose emails the other side inserts too (one of each
/// pair is refused by the unique index), and updates balances, reordering the result.
fn race(path: &str, side: u32) {
    let db = Db::open_with(path, options()).unwrap();
    let accounts = db.collection::<Account>().unwrap();
    let marks = db.keyspace("marks").unwrap();
    let live = accounts.subscribe_query(&accounts.all().order_by(Account::balance(), Order::Desc)).unwrap();
    let ids: Vec<u32> = initial(live.recv_timeout(WAIT)).iter().map(|account| account.id).collect();
    let stream = db.subscribe().unwrap();
    let start = db.read(|tx| Ok(tx.sequence())).unwrap();
    db.write(|tx| tx.put(&marks, format!("ready{side}").as_bytes(), b"")).unwrap();
    let other = if side == 0 { 1 } else { 0 };
    wait_for_mark(&db, &format!("ready{other}"));
    let mut refused = 0;
    for i in 0..RACE_RECORDS {
        let account = Account { id: side * 10_000 + i, email: format!("user{i}"), balance: i64::from(i) };
        match db.write(|tx| accounts.insert(tx, &account)) {
            Ok(_) => {}
            Err(Error::UniqueViolation { .. }) => refused += 1,
            Err(error) => panic!("{error}"),
        }
        if i % 3 == 0 {
            // Move someone else's record: an update whose old value decides the changeset.
            let target = other * 10_000 + i / 2;
            db.write(|tx| match accounts.get(tx, &target)? {
                Some(_) => accounts.update(tx, &target, |a| a.balance = 1_000 - a.balance).map(drop),
                None => Ok(()),
            })
            .unwrap();
        }
        if i % 7 == 0 {
            let target = side * 10_000 + i / 2;
            db.write(|tx| accounts.delete(tx, &target).map(drop)).unwrap();
        }
    }
    eprintln!("side {side}: {refused} of {RACE_RECORDS} inserts refused by the unique index");
    db.write(|tx| tx.put(&marks, format!("done{side}").as_bytes(), b"")).unwrap();
    wait_for_mark(&db, &format!("done{other}"));
    settle(&db, &live, ids);
    db.write(|tx| tx.put(&marks, format!("settled{side}").as_bytes(), b"")).unwrap();
    wait_for_mark(&db, &format!("settled{other}"));
    // The raw feed had every commit of both processes, each once, in commit order: the ones
    // the durable feed has since `start`.
    let expected: Vec<u64> = db.changes_since(start, 100_000).unwrap().iter().map(|batch| batch.sequence).collect();
    let deadline = Instant::now() + WAIT;
    let mut received = Vec::new();
    while received.last() != expected.last() {
        let left = deadline.saturating_duration_since(Instant::now());
        match stream.recv_timeout(left) {
            Some(FeedEvent::Batch(batch)) => received.push(batch.sequence),
            other => panic!("side {side}: expected a batch, got {other:?} after {} of {}", received.len(), expected.len()),
        }
    }
    assert_eq!(received, expected, "side {side}");
}

fn wait_for_mark(db: &Db, mark: &str) {
    let marks = db.keyspace("marks").unwrap();
    let deadline = Instant::now() + WAIT;
    while db.read(|tx| Ok(tx.get(&marks, mark.as_bytes())?.is_none())).unwrap() {
        assert!(Instant::now() < deadline, "no {mark} within {WAIT:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn writers_in_two_processes_share_a_unique_index_and_their_subscriptions_end_equal_to_a_query() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, options()).unwrap();
    db.collection::<Account>().unwrap();
    db.keyspace("marks").unwrap();
    let child = spawn("race", &path);
    race(path.to_str().unwrap(), 0);
    finish(child);
    // Each email once, whichever process inserted it first.
    let accounts = db.collection::<Account>().unwrap();
    let all = accounts.all().fetch(&db).unwrap();
    let mut emails: Vec<&str> = all.iter().map(|account| account.email.as_str()).collect();
    emails.sort_unstable();
    let count = emails.len();
    emails.dedup();
    assert_eq!(emails.len(), count, "a duplicate email across the processes");
}

/// Once one opener has turned notification on, the file keeps it: a writer that opens the file
/// without the option records old values and wakes the others all the same (before, its
/// commit ended every subscription of the other processes with `CrossProcessGap`).
#[test]
fn a_writer_without_the_option_on_a_file_that_has_it_still_notifies_with_old_values() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, options()).unwrap();
    let accounts = db.collection::<Account>().unwrap();
    db.write(|tx| accounts.insert(tx, &Account { id: 1, email: "a@x".into(), balance: 10 })).unwrap();
    let live = accounts.subscribe_query(&accounts.all()).unwrap();
    initial(live.recv_timeout(WAIT));
    let stream = db.subscribe().unwrap();
    finish(spawn("plain", &path));
    assert_eq!(changed(live.recv_timeout(WAIT)).result[0].balance, 12);
    match stream.recv_timeout(WAIT) {
        Some(FeedEvent::Batch(batch)) => {
            let change = &batch.changes[0];
            assert_eq!(change.kind, ChangeKind::Update);
            assert!(change.old.is_some(), "the other writer recorded the old value");
            assert_eq!(last_wake(&path), batch.sequence, "the other writer woke this process");
        }
        other => panic!("expected the other process's commit, got {other:?}"),
    }
    db.write(|tx| accounts.update(tx, &1u32, |account| account.balance = 13)).unwrap();
    assert_eq!(changed(live.recv_timeout(WAIT)).result[0].balance, 13);
}

/// A process that had the file open before another turned notification on finds the file's
/// mark at its next write, and from then on records old values and wakes the others.
#[test]
fn a_process_open_before_notification_was_turned_on_notifies_from_its_next_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let db = Db::open_with(&path, DbOptions { durable_feed: true, ..DbOptions::default() }).unwrap();
        let accounts = db.collection::<Account>().unwrap();
        db.write(|tx| accounts.insert(tx, &Account { id: 1, email: "a@x".into(), balance: 10 })).unwrap();
        db.keyspace("marks").unwrap();
    }
    let child = spawn("late", &path);
    let db = Db::open_with(&path, options()).unwrap();
    wait_for_mark(&db, "ready");
    let accounts = db.collection::<Account>().unwrap();
    let live = accounts.subscribe_query(&accounts.all()).unwrap();
    assert_eq!(initial(live.recv_timeout(WAIT))[0].balance, 10);
    let marks = db.keyspace("marks").unwrap();
    db.write(|tx| tx.put(&marks, b"go", b"")).unwrap();
    finish(child);
    assert_eq!(changed(live.recv_timeout(WAIT)).result[0].balance, 12);
    let newest = db.changes_since(0, 100_000).unwrap().last().unwrap().sequence;
    assert_eq!(last_wake(&path), newest, "the child's commit woke this process");
}

#[test]
fn cross_process_notify_needs_the_durable_feed() {
    let dir = tempfile::tempdir().unwrap();
    let options = DbOptions { cross_process_notify: true, ..DbOptions::default() };
    match Db::open_with(dir.path().join("db"), options) {
        Err(Error::FeedDisabled { .. }) => {}
        other => panic!("expected FeedDisabled, got {:?}", other.map(|_| ())),
    }
}
