//! `Db::write_grouped`: concurrent callers' closures share one transaction and one flush, each
//! caller gets its own closure's outcome, and a closure that fails takes nothing of the others
//! with it. A property test checks random concurrent plans against a plain model.

mod grouped_harness;

use grouped_harness::{increment, open, outcomes_in_one_group as in_one_group, put, read_u64};
use proptest::prelude::*;
use tessera::{Db, DbOptions, Error};

/// A grouped write's closure that returns its transaction's sequence.
type Write = grouped_harness::Write<u64>;

#[test]
fn callers_that_queue_together_share_one_commit() {
    let (_dir, db, ks) = open();
    let (first, rest) = in_one_group(&db, put(&ks, b"leader"), vec![put(&ks, b"a"), put(&ks, b"b"), put(&ks, b"c")]);
    let first = first.unwrap();
    let rest: Vec<u64> = rest.into_iter().map(Result::unwrap).collect();
    assert!(rest.iter().all(|sequence| *sequence == rest[0]), "the three queued while a group committed: one group, {rest:?}");
    assert!(rest[0] > first, "the next group commits after the leader's");
    let snapshot = db.read_txn().unwrap();
    for key in [&b"leader"[..], b"a", b"b", b"c"] {
        assert_eq!(snapshot.get(&ks, key).unwrap(), Some(key), "{key:?} was written");
    }
}

#[test]
fn a_closure_that_fails_or_panics_takes_nothing_of_its_group_with_it() {
    let (_dir, db, ks) = open();
    let failing = {
        let ks = ks.clone();
        Box::new(move |tx: &mut tessera::WriteTxn<'_>| -> tessera::Result<u64> {
            tx.put(&ks, b"failed", b"v")?;
            tx.put(&ks, b"", b"an empty key is refused")?;
            Ok(0)
        }) as Write
    };
    let panicking = {
        let ks = ks.clone();
        Box::new(move |tx: &mut tessera::WriteTxn<'_>| -> tessera::Result<u64> {
            tx.put(&ks, b"panicked", b"v")?;
            panic!("a bug in the caller's closure");
        }) as Write
    };
    let (first, rest) = in_one_group(&db, put(&ks, b"leader"), vec![put(&ks, b"a"), failing, panicking, put(&ks, b"b")]);
    first.unwrap();
    let mut rest = rest.into_iter();
    let a = rest.next().unwrap().unwrap();
    assert!(matches!(rest.next().unwrap(), Err(Error::KeySize { len: 0, .. })), "the failing closure gets its own error");
    match rest.next().unwrap() {
        Err(Error::Panicked(message)) => assert!(message.contains("a bug in the caller's closure"), "{message}"),
        other => panic!("expected Panicked, got {other:?}"),
    }
    let b = rest.next().unwrap().unwrap();
    assert_eq!(a, b, "the two that succeeded committed together");
    let snapshot = db.read_txn().unwrap();
    for key in [&b"leader"[..], b"a", b"b"] {
        assert_eq!(snapshot.get(&ks, key).unwrap(), Some(key), "{key:?} was written");
    }
    for key in [&b"failed"[..], b"panicked"] {
        assert_eq!(snapshot.get(&ks, key).unwrap(), None, "nothing of the closure that wrote {key:?} and then failed");
    }
}

#[test]
fn a_commit_that_is_not_flushed_is_not_durable_for_every_member() {
    let (_dir, db, ks) = open();
    let injecting = {
        let (ks, db) = (ks.clone(), db.clone());
        Box::new(move |tx: &mut tessera::WriteTxn<'_>| -> tessera::Result<u64> {
            // This group's flush and the next one's fail.
            db.inject_flush_failures(2);
            tx.put(&ks, b"leader", b"leader")?;
            Ok(tx.sequence())
        }) as Write
    };
    let (first, rest) = in_one_group(&db, injecting, vec![put(&ks, b"a"), put(&ks, b"b")]);
    assert!(matches!(first, Err(Error::NotDurable(_))), "{first:?}");
    for outcome in rest {
        assert!(matches!(outcome, Err(Error::NotDurable(_))), "every member of the group is told: {outcome:?}");
    }
    // NotDurable means committed but not flushed: the writes are there, once.
    let snapshot = db.read_txn().unwrap();
    for key in [&b"leader"[..], b"a", b"b"] {
        assert_eq!(snapshot.get(&ks, key).unwrap(), Some(key), "{key:?} was committed");
    }
    drop(snapshot);
    let ks2 = ks.clone();
    db.write_grouped(move |tx| tx.put(&ks2, b"later", b"v")).expect("flushes work again");
}

#[test]
fn inside_a_write_it_would_deadlock_and_says_so() {
    let (_dir, db, ks) = open();
    let inner_db = db.clone();
    let outcome = db.write(|_| {
        let ks = ks.clone();
        Ok(inner_db.write_grouped(move |tx| tx.put(&ks, b"k", b"v")))
    });
    assert!(matches!(outcome, Ok(Err(Error::WouldDeadlock { .. }))), "{outcome:?}");
}

#[test]
fn a_caller_holding_a_read_transaction_still_writes() {
    let (_dir, db, ks) = open();
    let snapshot = db.read_txn().unwrap();
    let ks2 = ks.clone();
    db.write_grouped(move |tx| tx.put(&ks2, b"k", b"v")).unwrap();
    assert_eq!(snapshot.get(&ks, b"k").unwrap(), None, "the snapshot does not move");
    drop(snapshot);
    assert_eq!(db.read_txn().unwrap().get(&ks, b"k").unwrap(), Some(&b"v"[..]));
}

#[test]
fn a_read_only_handle_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    drop(Db::open(&path).unwrap().keyspace("ks").unwrap());
    let db = Db::open_with(&path, DbOptions { read_only: true, ..DbOptions::default() }).unwrap();
    let ks = db.keyspace("ks").unwrap();
    let outcome = db.write_grouped(move |tx| tx.put(&ks, b"k", b"v"));
    assert!(matches!(outcome, Err(Error::ReadOnly { .. })), "{outcome:?}");
}

#[test]
fn groups_that_fill_the_map_grow_it_and_every_write_lands_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path().join("db"), DbOptions { map_size_initial_bytes: 1 << 20, ..DbOptions::default() }).unwrap();
    let ks = db.keyspace("ks").unwrap();
    let counter = db.keyspace("counter").unwrap();
    std::thread::scope(|scope| {
        for thread in 0u8..4 {
            let (db, ks, counter) = (db.clone(), ks.clone(), counter.clone());
            scope.spawn(move || {
                for n in 0u8..20 {
                    let (ks, counter) = (ks.clone(), counter.clone());
                    db.write_grouped(move |tx| {
                        for part in 0u8..16 {
                            tx.put(&ks, &[thread, n, part], &[thread; 4000])?;
                        }
                        increment(tx, &counter)
                    })
                    .unwrap();
                }
            });
        }
    });
    let snapshot = db.read_txn().unwrap();
    assert_eq!(snapshot.len(&ks).unwrap(), 4 * 20 * 16);
    assert_eq!(read_u64(snapshot.get(&counter, b"n").unwrap()), 80, "each closure's increment committed exactly once");
}

/// What one closure of a plan does.
#[derive(Debug, Clone)]
enum Step {
    /// Puts `keys` keys of its own and increments the shared counter.
    Put { keys: u8 },
    /// Puts a key of its own, increments the counter, then fails.
    Fail,
    /// Puts a key of its own, then panics.
    Panic,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![6 => (1u8..4).prop_map(|keys| Step::Put { keys }), 1 => Just(Step::Fail), 1 => Just(Step::Panic)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Threads run random closures through `write_grouped` at once. The model: a closure whose
    /// caller got `Ok` has all its keys and one increment of the counter; one that failed has
    /// none; each gets the error its own closure made.
    #[test]
    fn concurrent_grouped_writes_match_the_model(plans in prop::collection::vec(prop::collection::vec(step(), 1..12), 2..5)) {
        let (_dir, db, ks) = open();
        let counter = db.keyspace("counter").unwrap();
        let outcomes: Vec<Vec<tessera::Result<()>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = plans.iter().enumerate().map(|(thread, plan)| {
                let (db, ks, counter) = (db.clone(), ks.clone(), counter.clone());
                scope.spawn(move || {
                    plan.iter().enumerate().map(|(index, step)| {
                        let (ks, counter, step) = (ks.clone(), counter.clone(), step.clone());
                        let id = [thread as u8, index as u8];
                        db.write_grouped(move |tx| match step {
                            Step::Put { keys } => {
                                for key in 0..keys {
                                    tx.put(&ks, &[id[0], id[1], key], b"v")?;
                                }
                                increment(tx, &counter)
                            }
                            Step::Fail => {
                                tx.put(&ks, &[id[0], id[1], 0], b"v")?;
                                increment(tx, &counter)?;
                                Err(Error::KeySize { len: 0, max: tessera::store::KEY_LEN_MAX })
                            }
                            Step::Panic => {
                                tx.put(&ks, &[id[0], id[1], 0], b"v")?;
                                panic!("planned");
                            }
                        })
                    }).collect()
                })
            }).collect();
            handles.into_iter().map(|handle| handle.join().unwrap()).collect()
        });
        let snapshot = db.read_txn().unwrap();
        let mut succeeded = 0;
        for (thread, (plan, outcomes)) in plans.iter().zip(&outcomes).enumerate() {
            for (index, (step, outcome)) in plan.iter().zip(outcomes).enumerate() {
                let keys = match (step, outcome) {
                    (Step::Put { keys }, Ok(())) => { succeeded += 1; *keys }
                    (Step::Fail, Err(Error::KeySize { len: 0, .. })) | (Step::Panic, Err(Error::Panicked(_))) => 0,
                    (step, outcome) => panic!("{step:?} gave {outcome:?}"),
                };
                for key in 0..3u8 {
                    let stored = snapshot.get(&ks, &[thread as u8, index as u8, key]).unwrap();
                    prop_assert_eq!(stored.is_some(), key < keys, "thread {} closure {} key {}", thread, index, key);
                }
            }
        }
        prop_assert_eq!(read_u64(snapshot.get(&counter, b"n").unwrap()), succeeded, "one increment per closure that succeeded");
    }
}
