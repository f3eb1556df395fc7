//! Adversarial review of `Db::write_grouped` (`store/group.rs`): groups of more than
//! `GROUP_WRITES_MAX` callers, the change feed and the durable feed (one batch per group,
//! nothing of a failed member), who gets which error (a member's own `NotDurable` or `MapFull`,
//! a full map a member swallowed, a member too large for the map or the disk), panics of every
//! kind, nested writes, callers holding read transactions, `Buffered` durability, `Db::write`
//! callers at the same time, and a model of random concurrent plans. Every wait is bounded: a
//! caller left waiting fails its test instead of hanging it.

mod grouped_harness;

use grouped_harness::{CALLERS_RETURN_WITHIN, Write, in_one_group, increment, join_all, open, open_with, put, read_u64};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tessera::store::{ChangeKind, FeedEvent, GROUP_WRITES_MAX, KEY_LEN_MAX};
use tessera::{Db, DbOptions, Durability, Error, Keyspace, WriteTxn};

/// A map of 1 MiB: growth is frequent.
fn small_map() -> DbOptions {
    DbOptions { map_size_initial_bytes: 1 << 20, ..DbOptions::default() }
}

/// Panics the tests plan (messages starting with "planned") are not printed.
fn quiet_planned_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let text = payload.downcast_ref::<&str>().copied().or_else(|| payload.downcast_ref::<String>().map(String::as_str));
            if !(text.is_some_and(|text| text.starts_with("planned")) || payload.is::<u8>()) {
                default(info);
            }
        }));
    });
}

fn count(db: &Db, counter: &Keyspace) -> u64 {
    read_u64(db.read_txn().unwrap().get(counter, b"n").unwrap())
}

/// The batches of `feed` through `last` (a commit known to have changes), then checks that
/// nothing else is queued.
fn batches_through(feed: &tessera::store::ChangeStream, last: u64) -> Vec<Arc<tessera::store::ChangeBatch>> {
    let mut batches = Vec::new();
    while batches.last().is_none_or(|batch: &Arc<tessera::store::ChangeBatch>| batch.sequence < last) {
        match feed.recv_timeout(CALLERS_RETURN_WITHIN) {
            Some(FeedEvent::Batch(batch)) => batches.push(batch),
            other => panic!("expected the batch of commit {last}, got {other:?} after {batches:?}"),
        }
    }
    assert!(feed.recv_timeout(Duration::from_millis(50)).is_none(), "no batch after commit {last}");
    batches
}

/// The keys of `keyspace` a batch changed, with the kind and new value.
fn changes_in(batch: &tessera::store::ChangeBatch, keyspace: &str) -> BTreeMap<Vec<u8>, (ChangeKind, Option<Vec<u8>>)> {
    batch
        .changes
        .iter()
        .filter(|change| &*change.keyspace == keyspace)
        .map(|change| (change.key.to_vec(), (change.kind, change.new.as_deref().map(<[u8]>::to_vec))))
        .collect()
}

/// More callers than a group holds queue at once: the next group takes exactly
/// `GROUP_WRITES_MAX` of them, the one after the rest, each caller gets its own value, and
/// every write lands once.
#[test]
fn more_callers_than_a_group_holds_form_full_groups_and_every_write_lands_once() {
    let (_dir, db, ks) = open();
    let counter = db.keyspace("counter").unwrap();
    let callers = GROUP_WRITES_MAX + 36;
    let rest: Vec<Write<(usize, u64)>> = (0..callers)
        .map(|index| {
            let (ks, counter) = (ks.clone(), counter.clone());
            Box::new(move |tx: &mut WriteTxn<'_>| {
                tx.put(&ks, &(index as u32).to_be_bytes(), b"v")?;
                increment(tx, &counter)?;
                Ok((index, tx.sequence()))
            }) as Write<(usize, u64)>
        })
        .collect();
    let first = {
        let ks = ks.clone();
        Box::new(move |tx: &mut WriteTxn<'_>| {
            tx.put(&ks, b"leader", b"v")?;
            Ok((usize::MAX, tx.sequence()))
        }) as Write<(usize, u64)>
    };
    let (leader, others) = in_one_group(&db, first, rest, Duration::from_micros(500));
    let (_, leader_sequence) = join_all(vec![leader]).pop().unwrap().unwrap();
    let mut groups: BTreeMap<u64, usize> = BTreeMap::new();
    for (index, outcome) in join_all(others).into_iter().enumerate() {
        let (own, sequence) = outcome.unwrap_or_else(|error| panic!("caller {index}: {error}"));
        assert_eq!(own, index, "caller {index} got another closure's value");
        assert!(sequence > leader_sequence);
        *groups.entry(sequence).or_default() += 1;
    }
    let sizes: Vec<usize> = groups.values().copied().collect();
    assert_eq!(sizes, [GROUP_WRITES_MAX, callers - GROUP_WRITES_MAX], "groups by commit: {groups:?}");
    assert_eq!(count(&db, &counter), callers as u64, "each closure's increment committed exactly once");
    assert_eq!(db.read_txn().unwrap().len(&ks).unwrap(), callers as u64 + 1);
}

/// A group is one commit on the change feed and in the durable feed: one batch holding what
/// the members that succeeded wrote (a key two members wrote appears once, with the last
/// value), and nothing of the member that failed or the one that panicked. Members run in
/// queue order and see the writes of those before them.
#[test]
fn a_group_is_one_feed_batch_holding_only_what_its_successful_members_wrote() {
    quiet_planned_panics();
    let (_dir, db, ks) = open_with(DbOptions { durable_feed: true, ..DbOptions::default() });
    let order = db.keyspace("order").unwrap();
    let feed = db.subscribe().unwrap();
    /// Appends `name` to the order log, then does `then`.
    fn member(
        ks: &Keyspace,
        order: &Keyspace,
        name: &'static str,
        then: impl Fn(&mut WriteTxn<'_>, &Keyspace) -> tessera::Result<()> + Send + 'static,
    ) -> Write<u64> {
        let (ks, order) = (ks.clone(), order.clone());
        Box::new(move |tx| {
            let mut log = tx.get(&order, b"log")?.map(<[u8]>::to_vec).unwrap_or_default();
            log.extend_from_slice(name.as_bytes());
            tx.put(&order, b"log", &log)?;
            then(tx, &ks)?;
            Ok(tx.sequence())
        })
    }
    let rest = vec![
        member(&ks, &order, "a", |tx, ks| tx.put(ks, b"a", b"a")),
        member(&ks, &order, "b", |tx, ks| {
            tx.put(ks, b"b", b"b")?;
            tx.put(ks, b"a", b"overwritten by b, which fails")?;
            Err(Error::KeySize { len: 0, max: KEY_LEN_MAX })
        }),
        member(&ks, &order, "c", |tx, ks| {
            tx.put(ks, b"c", b"c")?;
            panic!("planned: c panics after its put");
        }),
        member(&ks, &order, "d", |tx, ks| tx.put(ks, b"d", b"d")),
        member(&ks, &order, "e", |tx, ks| {
            let seen = tx.get(ks, b"a")?.map(<[u8]>::to_vec);
            assert_eq!(seen.as_deref(), Some(&b"a"[..]), "e sees a's write, and nothing of b");
            tx.put(ks, b"a", b"a, then e")
        }),
    ];
    let (leader, others) = in_one_group(&db, put(&ks, b"leader"), rest, Duration::from_millis(25));
    let leader_sequence = join_all(vec![leader]).pop().unwrap().unwrap();
    let outcomes = join_all(others);
    let [a, b, c, d, e] = <[tessera::Result<u64>; 5]>::try_from(outcomes).unwrap();
    assert!(matches!(b, Err(Error::KeySize { len: 0, .. })), "{b:?}");
    assert!(matches!(&c, Err(Error::Panicked(message)) if message.contains("c panics")), "{c:?}");
    let group = a.unwrap();
    assert_eq!((d.unwrap(), e.unwrap()), (group, group), "a, d and e committed together");
    assert!(group > leader_sequence);
    assert_eq!(db.read_txn().unwrap().get(&order, b"log").unwrap(), Some(&b"ade"[..]), "queue order, without b and c");

    // The leader delivered the group's small batch before it handed over the outcomes, as
    // `write` does before it returns: both batches are there without waiting.
    let batches: Vec<Arc<tessera::store::ChangeBatch>> = std::iter::from_fn(|| feed.try_recv())
        .map(|event| match event {
            FeedEvent::Batch(batch) => batch,
            other => panic!("{other:?}"),
        })
        .collect();
    let sequences: Vec<u64> = batches.iter().map(|batch| batch.sequence).collect();
    assert_eq!(sequences, [leader_sequence, group], "one batch per commit, delivered before the callers returned");
    let expected: BTreeMap<Vec<u8>, (ChangeKind, Option<Vec<u8>>)> =
        [(b"a".to_vec(), (ChangeKind::Insert, Some(b"a, then e".to_vec()))), (b"d".to_vec(), (ChangeKind::Insert, Some(b"d".to_vec())))]
            .into_iter()
            .collect();
    assert_eq!(changes_in(&batches[1], "ks"), expected, "the group's batch: a (last value e's) and d, nothing of b or c");
    db.write(|tx| tx.put(&ks, b"marker", b"v")).unwrap();
    let marker = db.read_txn().unwrap().sequence();
    assert_eq!(batches_through(&feed, marker).len(), 1, "nothing but the marker's batch came after the group's");

    let durable: Vec<_> =
        db.changes_since(0, 100).unwrap().into_iter().filter(|batch| (leader_sequence..marker).contains(&batch.sequence)).collect();
    assert_eq!(durable.iter().map(|batch| batch.sequence).collect::<Vec<_>>(), [leader_sequence, group], "one durable entry per commit");
    assert_eq!(changes_in(&durable[1], "ks"), expected, "the group's durable entry: nothing of b or c");
    let snapshot = db.read_txn().unwrap();
    for key in [&b"b"[..], b"c"] {
        assert_eq!(snapshot.get(&ks, key).unwrap(), None, "nothing of the closure that wrote {key:?} and failed");
    }
}

#[derive(tessera::collection::Record, Debug, Clone, PartialEq)]
struct Task {
    #[record(key)]
    id: u32,
    #[record(index)]
    priority: i32,
}

/// Collections and the dictionary used inside grouped closures: a member sees the records
/// earlier members inserted (a second insert of the same key is that member's
/// `DuplicateKey`), a member that fails leaves nothing in the collection, its index or the
/// dictionary's cache, and the cache holds the last value the group set.
#[test]
fn collection_and_dictionary_writes_in_a_group_keep_only_the_successful_members() {
    let (_dir, db, ks) = open();
    let tasks = db.collection::<Task>().unwrap();
    let settings = db.dictionary().unwrap();
    type Member = fn(&mut WriteTxn<'_>, &tessera::Collection<Task>, &tessera::Dictionary) -> tessera::Result<()>;
    let member = |body: Member| -> Write<u64> {
        let (tasks, settings) = (tasks.clone(), settings.clone());
        Box::new(move |tx| {
            body(tx, &tasks, &settings)?;
            Ok(tx.sequence())
        })
    };
    let rest = vec![
        member(|tx, tasks, settings| {
            tasks.insert(tx, &Task { id: 1, priority: 5 })?;
            tx.dictionary(settings).set("a", &1)
        }),
        member(|tx, tasks, _| tasks.insert(tx, &Task { id: 1, priority: 6 }).map(drop)),
        member(|tx, tasks, settings| {
            tasks.insert(tx, &Task { id: 2, priority: 5 })?;
            tx.dictionary(settings).set("c", &3)?;
            Err(Error::KeySize { len: 0, max: KEY_LEN_MAX })
        }),
        member(|tx, tasks, settings| {
            assert_eq!(tx.dictionary(settings).get::<i32>("a")?, Some(1), "d sees a's dictionary write");
            tx.dictionary(settings).set("a", &4)?;
            tasks.insert(tx, &Task { id: 3, priority: 5 }).map(drop)
        }),
    ];
    let (leader, others) = in_one_group(&db, put(&ks, b"leader"), rest, Duration::from_millis(25));
    join_all(vec![leader]).pop().unwrap().unwrap();
    let [a, duplicate, failed, d] = <[tessera::Result<u64>; 4]>::try_from(join_all(others)).unwrap();
    assert!(matches!(duplicate, Err(Error::DuplicateKey { .. })), "{duplicate:?}");
    assert!(matches!(failed, Err(Error::KeySize { .. })), "{failed:?}");
    assert_eq!(a.unwrap(), d.unwrap(), "a and d committed together");
    assert_eq!(tasks.get(&db, &1).unwrap(), Some(Task { id: 1, priority: 5 }), "a's record, not the duplicate");
    assert_eq!(tasks.get(&db, &2).unwrap(), None, "nothing of the member that failed");
    assert_eq!(tasks.get(&db, &3).unwrap(), Some(Task { id: 3, priority: 5 }));
    assert_eq!(settings.get::<i32>("a").unwrap(), Some(4), "the cache holds the group's last value");
    assert_eq!(settings.get::<i32>("c").unwrap(), None, "the failed member's value never reached the cache");
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{report}");
}

/// A member whose own closure returns `NotDurable` or `MapFull` (no flush failed, no map
/// filled) gets that error alone: the group's other members commit, and are not told that
/// their commit was not flushed.
#[test]
fn a_member_that_returns_not_durable_or_map_full_itself_is_the_only_one_that_fails() {
    let (_dir, db, ks) = open();
    let failing = |key: &'static [u8], error: fn() -> Error| -> Write<u64> {
        let ks = ks.clone();
        Box::new(move |tx| {
            tx.put(&ks, key, b"v")?;
            Err(error())
        })
    };
    let rest = vec![
        put(&ks, b"a"),
        failing(b"not durable", || Error::NotDurable("planned: the closure's own".to_owned())),
        failing(b"map full", || Error::MapFull { ceiling_bytes: 1 }),
        put(&ks, b"b"),
    ];
    let (leader, others) = in_one_group(&db, put(&ks, b"leader"), rest, Duration::from_millis(10));
    join_all(vec![leader]).pop().unwrap().unwrap();
    let [a, not_durable, map_full, b] = <[tessera::Result<u64>; 4]>::try_from(join_all(others)).unwrap();
    assert!(matches!(&not_durable, Err(Error::NotDurable(reason)) if reason.contains("closure's own")), "{not_durable:?}");
    assert!(matches!(map_full, Err(Error::MapFull { ceiling_bytes: 1 })), "{map_full:?}");
    assert_eq!(a.expect("a committed"), b.expect("b committed"), "a and b share the commit");
    let snapshot = db.read_txn().unwrap();
    assert_eq!(snapshot.get(&ks, b"not durable").unwrap(), None);
    assert_eq!(snapshot.get(&ks, b"map full").unwrap(), None);
}

/// How the group's transaction fails in [`a_member_too_large_fails_alone_and_the_others_commit_once`].
#[derive(Debug, Clone, Copy)]
enum TooLarge {
    /// The member's value is larger than the map's ceiling.
    ForTheCeiling,
    /// The member's value needs a larger map, and the disk has no room for one.
    ForTheDisk,
}

/// A member that cannot fit (the map at its ceiling, or the disk full) makes the group's
/// transaction fail; then each member runs alone: the others commit (once each), and only the
/// large one gets the error. Nothing of it reaches the feed.
fn a_member_too_large_fails_alone_and_the_others_commit_once(too_large: TooLarge) {
    let ceiling = match too_large {
        TooLarge::ForTheCeiling => 8 << 20,
        TooLarge::ForTheDisk => 1 << 40,
    };
    let (_dir, db, ks) = open_with(DbOptions { map_size_initial_bytes: 1 << 20, map_size_max_bytes: ceiling, ..DbOptions::default() });
    let counter = db.keyspace("counter").unwrap();
    let feed = db.subscribe().unwrap();
    if let TooLarge::ForTheDisk = too_large {
        db.inject_free_bytes(Some(0));
    }
    let huge_bytes = match too_large {
        TooLarge::ForTheCeiling => 12 << 20,
        TooLarge::ForTheDisk => 3 << 20,
    };
    let member = |key: &'static [u8], bytes: usize| -> Write<u64> {
        let (ks, counter) = (ks.clone(), counter.clone());
        Box::new(move |tx| {
            tx.put(&ks, key, &vec![1; bytes])?;
            increment(tx, &counter)?;
            Ok(tx.sequence())
        })
    };
    let rest = vec![member(b"a", 100), member(b"huge", huge_bytes), member(b"b", 100)];
    let (leader, others) = in_one_group(&db, put(&ks, b"leader"), rest, Duration::from_millis(10));
    join_all(vec![leader]).pop().unwrap().unwrap();
    let [a, huge, b] = <[tessera::Result<u64>; 3]>::try_from(join_all(others)).unwrap();
    match too_large {
        TooLarge::ForTheCeiling => assert!(matches!(huge, Err(Error::MapFull { .. })), "{huge:?}"),
        TooLarge::ForTheDisk => assert!(matches!(huge, Err(Error::DiskFull)), "{huge:?}"),
    }
    let (a, b) = (a.expect("a fits alone"), b.expect("b fits alone"));
    assert_ne!(a, b, "after the group's transaction failed, each member ran alone");
    assert_eq!(count(&db, &counter), 2, "a's and b's increments, once each");
    let snapshot = db.read_txn().unwrap();
    assert_eq!(snapshot.get(&ks, b"huge").unwrap(), None);
    assert!(snapshot.get(&ks, b"a").unwrap().is_some() && snapshot.get(&ks, b"b").unwrap().is_some());
    drop(snapshot);
    for batch in batches_through(&feed, a.max(b)) {
        assert!(!changes_in(&batch, "ks").contains_key(&b"huge"[..]), "the huge member's put reached the feed: {}", batch.sequence);
    }
    db.inject_free_bytes(None);
}

#[test]
fn a_member_too_large_for_the_map_ceiling_fails_alone() {
    a_member_too_large_fails_alone_and_the_others_commit_once(TooLarge::ForTheCeiling);
}

#[test]
fn a_member_too_large_for_the_disk_fails_alone() {
    a_member_too_large_fails_alone_and_the_others_commit_once(TooLarge::ForTheDisk);
}

/// A member that ignores the `MapFull` of its put leaves the transaction unusable; the next
/// member's write then fails. Neither is to blame: the map grows and both run again, and
/// both commit.
#[test]
fn a_full_map_a_member_swallowed_is_the_groups_and_nobody_is_blamed() {
    let (_dir, db, ks) = open_with(small_map());
    let runs = Arc::new(AtomicUsize::new(0));
    let swallower = {
        let (ks, runs) = (ks.clone(), runs.clone());
        Box::new(move |tx: &mut WriteTxn<'_>| {
            runs.fetch_add(1, Ordering::SeqCst);
            let _ignored = tx.put(&ks, b"big", &vec![7; 3 << 20]);
            Ok(tx.sequence())
        }) as Write<u64>
    };
    let (leader, others) = in_one_group(&db, put(&ks, b"leader"), vec![swallower, put(&ks, b"after")], Duration::from_millis(25));
    join_all(vec![leader]).pop().unwrap().unwrap();
    let [swallowed, after] = <[tessera::Result<u64>; 2]>::try_from(join_all(others)).unwrap();
    let after = after.expect("the member after the swallowed MapFull is not to blame");
    assert_eq!(swallowed.unwrap(), after, "one commit");
    assert!(runs.load(Ordering::SeqCst) >= 2, "the map filled, grew, and the group ran again");
    let snapshot = db.read_txn().unwrap();
    assert_eq!(snapshot.get(&ks, b"big").unwrap().map(<[u8]>::len), Some(3 << 20));
    assert_eq!(snapshot.get(&ks, b"after").unwrap(), Some(&b"after"[..]));
}

/// A closure that panics because its put found the map full (`expect` on the put) is run
/// again after the map grows, and its caller gets `Ok`; `Db::write` returns that panic as
/// `Panicked` instead. The two differ, and `write_grouped`'s documentation ("a closure that
/// returns `Err` or panics ...: its caller gets that error") does not say so.
#[test]
fn a_closure_that_panics_on_a_full_map_runs_again_in_a_group_but_not_in_write() {
    quiet_planned_panics();
    let (_dir, db, ks) = open_with(small_map());
    let ks2 = ks.clone();
    let mut runs = 0;
    let grouped = db.write_grouped(move |tx| {
        runs += 1;
        tx.put(&ks2, b"big", &vec![7; 3 << 20]).expect("planned: the put found the map full");
        Ok(runs)
    });
    assert_eq!(grouped.expect("run again after the map grew"), 2);
    assert_eq!(db.read_txn().unwrap().get(&ks, b"big").unwrap().map(<[u8]>::len), Some(3 << 20));

    let (_dir2, db2, ks) = open_with(small_map());
    let written = db2.write(|tx| {
        tx.put(&ks, b"big", &vec![7; 3 << 20]).expect("planned: the put found the map full");
        Ok(())
    });
    assert!(matches!(&written, Err(Error::Panicked(message)) if message.contains("map full")), "{written:?}");
}

/// Panics with a `&str`, a `String` and a payload that is not text, and an error of the
/// closure's own, each reach their own caller only; the members that succeed share the
/// commit. A group whose members all fail commits nothing, and the queue works afterwards.
#[test]
fn panics_of_every_kind_and_errors_reach_only_their_own_callers() {
    quiet_planned_panics();
    let (_dir, db, ks) = open();
    let failing = |key: &'static [u8], fail: fn() -> tessera::Result<u64>| -> Write<u64> {
        let ks = ks.clone();
        Box::new(move |tx| {
            tx.put(&ks, key, b"v")?;
            fail()
        })
    };
    let rest = vec![
        put(&ks, b"a"),
        failing(b"str", || panic!("planned: a &str")),
        failing(b"string", || panic!("planned: a String, {}", 42)),
        failing(b"not text", || std::panic::panic_any(7u8)),
        failing(b"own error", || Err(Error::other(std::io::Error::other("planned: the closure's own error")))),
        put(&ks, b"b"),
    ];
    let (leader, others) = in_one_group(&db, put(&ks, b"leader"), rest, Duration::from_millis(10));
    let leader_sequence = join_all(vec![leader]).pop().unwrap().unwrap();
    let [a, str_panic, string_panic, other_panic, own_error, b] = <[tessera::Result<u64>; 6]>::try_from(join_all(others)).unwrap();
    let message = |outcome: tessera::Result<u64>| match outcome {
        Err(Error::Panicked(message)) => message,
        other => panic!("expected Panicked, got {other:?}"),
    };
    assert_eq!(message(str_panic), "planned: a &str");
    assert_eq!(message(string_panic), "planned: a String, 42");
    assert_eq!(message(other_panic), "a panic with a payload that is not text");
    assert!(own_error.as_ref().is_err_and(|error| error.to_string().contains("the closure's own error")), "{own_error:?}");
    let group = a.unwrap();
    assert_eq!(b.unwrap(), group);
    assert!(group > leader_sequence);
    let snapshot = db.read_txn().unwrap();
    for key in [&b"str"[..], b"string", b"not text", b"own error"] {
        assert_eq!(snapshot.get(&ks, key).unwrap(), None, "{key:?}");
    }
    drop(snapshot);

    // Every member fails: no commit is made.
    let before = db.read_txn().unwrap().sequence();
    let rest = vec![failing(b"x", || panic!("planned: x")), failing(b"y", || Err(Error::DiskFull))];
    let noop = Box::new(|_: &mut WriteTxn<'_>| Ok(0u64)) as Write<u64>;
    let (leader, others) = in_one_group(&db, noop, rest, Duration::from_millis(10));
    join_all(vec![leader]).pop().unwrap().unwrap();
    let outcomes = join_all(others);
    assert!(matches!(outcomes[0], Err(Error::Panicked(_))) && matches!(outcomes[1], Err(Error::DiskFull)), "{outcomes:?}");
    assert_eq!(db.read_txn().unwrap().sequence(), before, "a group of failures changed nothing");
    assert_eq!(db.write_grouped(put(&ks, b"later")).map(|_| ()).ok(), Some(()), "the queue works afterwards");
}

/// Inside a closure that runs in a group (on the leader's thread), a grouped write, a write
/// and a subscription would wait for the writer that thread holds: each is `WouldDeadlock`,
/// and the group still commits.
#[test]
fn writes_nested_in_a_grouped_closure_would_deadlock_and_say_so() {
    let (_dir, db, ks) = open();
    let nesting = |key: &'static [u8]| -> Write<u64> {
        let (db, ks) = (db.clone(), ks.clone());
        Box::new(move |tx| {
            let ks2 = ks.clone();
            let grouped = db.write_grouped(move |tx| tx.put(&ks2, b"nested grouped", b"v"));
            assert!(matches!(grouped, Err(Error::WouldDeadlock { .. })), "{grouped:?}");
            let written = db.write(|tx| tx.put(&ks, b"nested write", b"v"));
            assert!(matches!(written, Err(Error::WouldDeadlock { .. })), "{written:?}");
            assert!(matches!(db.subscribe(), Err(Error::WouldDeadlock { .. })));
            tx.put(&ks, key, b"v")?;
            Ok(tx.sequence())
        })
    };
    let (leader, others) = in_one_group(&db, put(&ks, b"leader"), vec![nesting(b"a"), nesting(b"b")], Duration::from_millis(10));
    join_all(vec![leader]).pop().unwrap().unwrap();
    let outcomes: Vec<u64> = join_all(others).into_iter().map(Result::unwrap).collect();
    assert_eq!(outcomes[0], outcomes[1], "one group");
    let snapshot = db.read_txn().unwrap();
    assert!(snapshot.get(&ks, b"a").unwrap().is_some() && snapshot.get(&ks, b"b").unwrap().is_some());
    assert_eq!(snapshot.get(&ks, b"nested grouped").unwrap(), None);
    assert_eq!(snapshot.get(&ks, b"nested write").unwrap(), None);
}

/// A caller holding a read transaction whose write needs a larger map gets `GrowthBlocked`
/// at once (not after the 30 s a resize waits for readers), while other threads' small
/// grouped writes go on; once it drops the transaction, the write succeeds.
#[test]
fn a_caller_holding_a_read_transaction_is_refused_growth_at_once_and_blocks_no_group() {
    let (_dir, db, ks) = open_with(small_map());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0u8..3)
        .map(|thread| {
            let (db, ks, stop) = (db.clone(), ks.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0u32;
                while !stop.load(Ordering::SeqCst) || n < 20 {
                    let ks = ks.clone();
                    let key = [&[thread][..], &n.to_be_bytes()].concat();
                    db.write_grouped(move |tx| tx.put(&ks, &key, b"small")).unwrap();
                    n += 1;
                }
                n
            })
        })
        .collect();
    let snapshot = db.read_txn().unwrap();
    let started = Instant::now();
    let ks2 = ks.clone();
    let refused = db.write_grouped(move |tx| tx.put(&ks2, b"big", &vec![7; 3 << 20]));
    assert!(matches!(refused, Err(Error::GrowthBlocked(_))), "{refused:?}");
    assert!(started.elapsed() < Duration::from_secs(5), "refused after {:?}", started.elapsed());
    assert_eq!(snapshot.get(&ks, b"big").unwrap(), None);
    drop(snapshot);
    stop.store(true, Ordering::SeqCst);
    let written: Vec<u32> = join_all(writers);
    assert!(written.iter().all(|&n| n >= 20), "{written:?}");
    let ks2 = ks.clone();
    db.write_grouped(move |tx| tx.put(&ks2, b"big", &vec![7; 3 << 20])).expect("grows once no read transaction is held");
    assert_eq!(db.read_txn().unwrap().get(&ks, b"big").unwrap().map(<[u8]>::len), Some(3 << 20));
}

/// With `Buffered` durability a group's callers return at its commit, without a flush: a
/// failing flush is not theirs (with `Immediate`, it would be `NotDurable` for each).
#[test]
fn buffered_groups_return_at_their_commit_without_a_flush() {
    let (_dir, db, ks) = open_with(DbOptions { durability: Durability::BUFFERED, ..DbOptions::default() });
    db.inject_flush_failures(1_000);
    let rest = vec![put(&ks, b"a"), put(&ks, b"b"), put(&ks, b"c")];
    let (leader, others) = in_one_group(&db, put(&ks, b"leader"), rest, Duration::from_millis(5));
    let leader = join_all(vec![leader]).pop().unwrap();
    let outcomes: Vec<u64> = join_all(others).into_iter().map(|outcome| outcome.expect("no flush in a buffered write")).collect();
    db.inject_flush_failures(0);
    assert!(leader.expect("no flush in a buffered write") < outcomes[0]);
    assert!(outcomes.iter().all(|&sequence| sequence == outcomes[0]), "one group: {outcomes:?}");
    let snapshot = db.read_txn().unwrap();
    for key in [&b"leader"[..], b"a", b"b", b"c"] {
        assert_eq!(snapshot.get(&ks, key).unwrap(), Some(key));
    }
}

/// A value that panics when dropped unless defused.
struct DropBomb {
    armed: bool,
}

impl Drop for DropBomb {
    fn drop(&mut self) {
        if self.armed && !std::thread::panicking() {
            panic!("planned: a DropBomb was dropped armed");
        }
    }
}

/// A member's value that is not handed over (here: the group's flush failed, so each member
/// gets `NotDurable`) is dropped on that member's own thread, as `Db::write` drops it: a
/// `Drop` that panics unwinds through its own caller, never through the leader (another
/// caller), and strands no one. Before the fix the leader dropped it: the panic escaped the
/// leader's `write_grouped`, and the members not yet finished were left out of the group, so
/// their callers led empty groups in a busy loop forever.
#[test]
fn a_value_that_panics_when_dropped_panics_on_its_own_callers_thread_and_strands_no_one() {
    quiet_planned_panics();
    let (_dir, db, ks) = open();
    let first = {
        let (db, ks) = (db.clone(), ks.clone());
        Box::new(move |tx: &mut WriteTxn<'_>| {
            db.inject_flush_failures(2); // this group's flush, and the next one's
            tx.put(&ks, b"leader", b"v")?;
            Ok(DropBomb { armed: false })
        }) as Write<DropBomb>
    };
    let member = |key: &'static [u8]| -> Write<DropBomb> {
        let ks = ks.clone();
        Box::new(move |tx| {
            tx.put(&ks, key, b"v")?;
            Ok(DropBomb { armed: true })
        })
    };
    let (leader, others) = in_one_group(&db, first, vec![member(b"a"), member(b"b"), member(b"c")], Duration::from_millis(10));
    assert!(matches!(join_all(vec![leader]).pop().unwrap(), Err(Error::NotDurable(_))), "the leader is not hit by another's drop");
    let deadline = Instant::now() + CALLERS_RETURN_WITHIN;
    while !others.iter().all(JoinHandle::is_finished) {
        assert!(Instant::now() < deadline, "a caller still waits after {CALLERS_RETURN_WITHIN:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
    for (index, caller) in others.into_iter().enumerate() {
        let Err(payload) = caller.join() else {
            panic!("caller {index}: its own armed value is dropped on its own thread, and panics there")
        };
        let message = payload.downcast_ref::<&str>().copied().unwrap_or_default();
        assert!(message.starts_with("planned: a DropBomb"), "caller {index}: {message:?}");
    }
    db.inject_flush_failures(0);
    let snapshot = db.read_txn().unwrap();
    for key in [&b"leader"[..], b"a", b"b", b"c"] {
        assert_eq!(snapshot.get(&ks, key).unwrap(), Some(&b"v"[..]), "NotDurable: {key:?} was committed");
    }
}

/// A grouped write that changes nothing (its members only read, or found nothing to do)
/// commits without taking a sequence: LMDB gives the next commit the same one. Before the fix
/// the write path recorded and flushed that sequence all the same (`txn::run_write` called
/// `Syncer::committed` and, for `Immediate`, `Syncer::sync_through` for every commit), so the
/// syncer believed the next commit flushed already: its `sync_through` returned at once, and
/// its caller got `Ok` before the meta page that makes it current was flushed (the
/// environment runs with `MDB_NOMETASYNC`). With an injected flush failure, no flush was
/// attempted for it at all: `Ok` instead of `NotDurable`.
#[test]
fn a_grouped_write_after_a_group_that_changed_nothing_is_still_flushed() {
    let (_dir, db, ks) = open();
    db.write_grouped(put(&ks, b"before")).unwrap();
    let nothing = db.write_grouped(|tx| Ok(tx.sequence())).unwrap();
    db.inject_flush_failures(1);
    let outcome = db.write_grouped(put(&ks, b"after"));
    db.inject_flush_failures(0);
    assert_eq!(db.read_txn().unwrap().sequence(), nothing, "the commit took the sequence the empty group did not");
    assert!(matches!(outcome, Err(Error::NotDurable(_))), "its flush failed, yet: {outcome:?} (no flush was attempted)");
}

/// The same with `Buffered` durability: before the fix, once the background flush had run
/// after a grouped write that changed nothing, the next commit (which reuses its sequence) was
/// flushed neither by the background thread nor by `Db::sync` (nor so by `Db::close`, or the
/// drop of the last handle): they returned without flushing until a later commit came.
#[test]
fn a_buffered_grouped_write_after_a_group_that_changed_nothing_is_flushed_by_sync() {
    let (_dir, db, ks) = open_with(DbOptions { durability: Durability::BUFFERED, ..DbOptions::default() });
    db.write_grouped(put(&ks, b"before")).unwrap();
    db.sync().unwrap();
    let nothing = db.write_grouped(|tx| Ok(tx.sequence())).unwrap();
    std::thread::sleep(Duration::from_millis(300)); // the background flush, due 100 ms after it
    let after = db.write_grouped(put(&ks, b"after")).unwrap();
    assert_eq!(after, nothing, "the commit took the sequence the empty group did not");
    db.inject_flush_failures(1);
    let synced = db.sync();
    db.inject_flush_failures(0);
    assert!(matches!(synced, Err(Error::NotDurable(_))), "the flush failed, yet: {synced:?} (no flush was attempted)");
}

/// What one write of a plan in [`concurrent_writers_of_every_kind_match_the_model`] does.
#[derive(Debug, Clone)]
enum Step {
    /// A grouped write: puts `keys` keys of its own (the first `big`: 150 KB, which makes a
    /// 1 MiB map grow) and increments the shared counter.
    Grouped { keys: u8, big: bool },
    /// A grouped write that puts a key of its own, increments the counter, then fails.
    Fail,
    /// A grouped write that puts a key of its own, then panics.
    Panic,
    /// The same as `Grouped`, through `Db::write`.
    Plain { keys: u8 },
    /// A grouped write of one small key and the increment while this thread holds a read
    /// transaction: it runs alone, and gets `GrowthBlocked` if the map must grow.
    UnderRead,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (1u8..4, prop::bool::weighted(0.2)).prop_map(|(keys, big)| Step::Grouped { keys, big }),
        1 => Just(Step::Fail),
        1 => Just(Step::Panic),
        2 => (1u8..3).prop_map(|keys| Step::Plain { keys }),
        1 => Just(Step::UnderRead),
    ]
}

fn value_for(step: &Step, key: u8) -> Vec<u8> {
    match step {
        Step::Grouped { big: true, .. } if key == 0 => vec![9; 150_000],
        _ => vec![key; 8],
    }
}

/// One write of a plan, on its thread: its outcome, the sequence it committed in.
fn run_step(db: &Db, ks: &Keyspace, counter: &Keyspace, id: [u8; 2], step: &Step) -> tessera::Result<u64> {
    let (ks, counter, kind) = (ks.clone(), counter.clone(), step.clone());
    let keys = match *step {
        Step::Grouped { keys, .. } | Step::Plain { keys } => keys,
        Step::Fail | Step::Panic | Step::UnderRead => 1,
    };
    let write = move |tx: &mut WriteTxn<'_>| -> tessera::Result<([u8; 2], u64)> {
        for key in 0..keys {
            tx.put(&ks, &[id[0], id[1], key], &value_for(&kind, key))?;
        }
        match kind {
            Step::Panic => panic!("planned"),
            Step::Fail => {
                increment(tx, &counter)?;
                Err(Error::KeySize { len: 0, max: KEY_LEN_MAX })
            }
            _ => {
                increment(tx, &counter)?;
                Ok((id, tx.sequence()))
            }
        }
    };
    let outcome = match step {
        Step::Plain { .. } => db.write(write),
        Step::UnderRead => {
            let snapshot = db.read_txn()?;
            let outcome = db.write_grouped(write);
            drop(snapshot);
            outcome
        }
        _ => db.write_grouped(write),
    };
    outcome.map(|(own, sequence)| {
        assert_eq!(own, id, "a caller got another closure's value");
        sequence
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Threads run random plans of grouped writes (some failing, panicking, or large enough
    /// to grow a 1 MiB map), plain writes, and grouped writes under a read transaction, at
    /// once, with a subscriber. The model: a write whose caller got `Ok(sequence)` has all
    /// its keys, one increment of the counter, and its keys in the feed's batch of that
    /// sequence; a failed one has nothing, in the database or in the feed; each caller gets
    /// its own closure's error; each commit is one batch.
    #[test]
    fn concurrent_writers_of_every_kind_match_the_model(
        plans in prop::collection::vec(prop::collection::vec(step(), 1..10), 2..6),
        buffered in any::<bool>(),
    ) {
        quiet_planned_panics();
        let durability = if buffered { Durability::BUFFERED } else { Durability::Immediate };
        let (_dir, db, ks) = open_with(DbOptions { durability, ..small_map() });
        let counter = db.keyspace("counter").unwrap();
        let feed = db.subscribe().unwrap();
        let handles: Vec<_> = plans.iter().enumerate().map(|(thread, plan)| {
            let (db, ks, counter, plan) = (db.clone(), ks.clone(), counter.clone(), plan.clone());
            std::thread::spawn(move || -> Vec<tessera::Result<u64>> {
                plan.iter().enumerate().map(|(index, step)| run_step(&db, &ks, &counter, [thread as u8, index as u8], step)).collect()
            })
        }).collect();
        let outcomes = join_all(handles);

        let snapshot = db.read_txn().unwrap();
        let mut committed = 0;
        let mut expected_batches: BTreeMap<u64, BTreeSet<Vec<u8>>> = BTreeMap::new();
        for (thread, (plan, outcomes)) in plans.iter().zip(&outcomes).enumerate() {
            for (index, (step, outcome)) in plan.iter().zip(outcomes).enumerate() {
                let keys = match (step, outcome) {
                    (Step::Grouped { keys, .. } | Step::Plain { keys }, Ok(_)) => *keys,
                    (Step::UnderRead, Ok(_)) => 1,
                    (Step::UnderRead, Err(Error::GrowthBlocked(_)))
                    | (Step::Fail, Err(Error::KeySize { len: 0, .. }))
                    | (Step::Panic, Err(Error::Panicked(_))) => 0,
                    (step, outcome) => panic!("thread {thread} write {index}: {step:?} gave {outcome:?}"),
                };
                if let Ok(sequence) = outcome {
                    committed += 1;
                    let batch = expected_batches.entry(*sequence).or_default();
                    batch.extend((0..keys).map(|key| vec![thread as u8, index as u8, key]));
                }
                for key in 0..3u8 {
                    let stored = snapshot.get(&ks, &[thread as u8, index as u8, key]).unwrap();
                    prop_assert_eq!(stored.map(<[u8]>::to_vec), (key < keys).then(|| value_for(step, key)), "thread {} write {} key {}", thread, index, key);
                }
            }
        }
        prop_assert_eq!(read_u64(snapshot.get(&counter, b"n").unwrap()), committed, "one increment per write that succeeded");
        drop(snapshot);
        if let Some((&last, _)) = expected_batches.last_key_value() {
            let batches = batches_through(&feed, last);
            let seen: BTreeMap<u64, BTreeSet<Vec<u8>>> =
                batches.iter().map(|batch| (batch.sequence, changes_in(batch, "ks").into_keys().collect())).collect();
            prop_assert_eq!(seen.len(), batches.len(), "one batch per commit");
            prop_assert_eq!(&seen, &expected_batches, "each commit's batch holds the keys of the writes that succeeded in it");
            for batch in &batches {
                prop_assert_eq!(changes_in(batch, "counter").len(), 1, "commit {} changed the counter once", batch.sequence);
            }
        }
    }
}

/// Many threads, grouped and plain writers at once, with failures and panics, on a map that
/// grows: no caller waits forever, and the counter counts each success once.
#[test]
fn no_caller_is_left_waiting_under_churn() {
    quiet_planned_panics();
    let (_dir, db, ks) = open_with(DbOptions { durability: Durability::BUFFERED, ..small_map() });
    let counter = db.keyspace("counter").unwrap();
    let successes = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0u8..12)
        .map(|thread| {
            let (db, ks, counter, successes) = (db.clone(), ks.clone(), counter.clone(), successes.clone());
            std::thread::spawn(move || {
                let mut rng = fastrand::Rng::with_seed(u64::from(thread));
                for n in 0u16..150 {
                    let (ks, counter) = (ks.clone(), counter.clone());
                    let (fail, panic, size) = (rng.u8(..20) == 0, rng.u8(..20) == 0, if rng.u8(..10) == 0 { 20_000 } else { 50 });
                    let write = move |tx: &mut WriteTxn<'_>| {
                        tx.put(&ks, &[&[thread][..], &n.to_be_bytes()].concat(), &vec![thread; size])?;
                        increment(tx, &counter)?;
                        if panic {
                            panic!("planned");
                        }
                        if fail { Err(Error::KeySize { len: 0, max: KEY_LEN_MAX }) } else { Ok(()) }
                    };
                    let outcome = if thread < 2 { db.write(write) } else { db.write_grouped(write) };
                    match (outcome, fail || panic) {
                        (Ok(()), false) => drop(successes.fetch_add(1, Ordering::SeqCst)),
                        (Err(Error::Panicked(_)), true) if panic => {}
                        (Err(Error::KeySize { .. }), true) if fail && !panic => {}
                        (outcome, _) => panic!("thread {thread} write {n} (fail {fail}, panic {panic}): {outcome:?}"),
                    }
                }
            })
        })
        .collect();
    join_all(handles);
    assert_eq!(count(&db, &counter), successes.load(Ordering::SeqCst) as u64);
}
