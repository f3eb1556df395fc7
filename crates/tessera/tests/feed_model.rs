//! The durable change feed against a naive model: random transactions (puts, deletes,
//! inserts, keys written several times or back to their old bytes, aborted and failed
//! transactions, short and long keys, large values) over several keyspaces, reopens, and
//! consumers acknowledging at different speeds under a small retention. After every step the
//! feed read from 0, from each commit, and by each consumer is exactly the model's: every
//! commit once, in order, with its net changes, and a cursor behind retention is
//! `FeedCursorExpired`, never a gap.

use proptest::prelude::*;
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use tessera::{ChangeKind, Db, DbOptions, Error, FeedRetention};

const KEYSPACES: [&str; 3] = ["alpha", "beta", "gamma"];
const CONSUMERS: [&str; 2] = ["fast", "slow"];

#[derive(Debug, Clone)]
enum Value {
    Small(u8, u8),
    Empty,
    Large(u8),
}

impl Value {
    fn bytes(&self) -> Vec<u8> {
        match *self {
            Value::Small(byte, len) => vec![byte; len as usize % 40 + 1],
            Value::Empty => Vec::new(),
            Value::Large(byte) => vec![byte; 200_000 + byte as usize],
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Put(usize, usize, Value),
    Delete(usize, usize),
    InsertNew(usize, usize, Value),
    /// Puts the key's current bytes back (a no-op write).
    PutBack(usize, usize),
    /// A put with an oversized key, its error ignored: nothing changes.
    RefusedPut,
}

#[derive(Debug, Clone, Copy)]
enum End {
    Commit,
    Abort,
    /// A write fails and its error is returned from the closure.
    FailMidway,
}

#[derive(Debug, Clone)]
enum Step {
    Txn(Vec<Op>, End),
    Reopen,
    /// Consumer reads up to `n` batches and acknowledges the last.
    Ack(usize, usize),
    Register(usize),
}

fn key_of(index: usize) -> Vec<u8> {
    match index {
        0 => b"a".to_vec(),
        1 => b"b".to_vec(),
        2 => Vec::from(&b"key-2"[..]),
        3 => vec![0x33; 300],
        _ => vec![0x44; 450],
    }
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        8 => (any::<u8>(), any::<u8>()).prop_map(|(b, l)| Value::Small(b % 4, l)),
        1 => Just(Value::Empty),
        1 => any::<u8>().prop_map(|b| Value::Large(b % 3)),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let ks = 0..KEYSPACES.len();
    let key = 0..5usize;
    prop_oneof![
        6 => (ks.clone(), key.clone(), value()).prop_map(|(s, k, v)| Op::Put(s, k, v)),
        3 => (ks.clone(), key.clone()).prop_map(|(s, k)| Op::Delete(s, k)),
        2 => (ks.clone(), key.clone(), value()).prop_map(|(s, k, v)| Op::InsertNew(s, k, v)),
        2 => (ks, key).prop_map(|(s, k)| Op::PutBack(s, k)),
        1 => Just(Op::RefusedPut),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    let end = prop_oneof![8 => Just(End::Commit), 1 => Just(End::Abort), 1 => Just(End::FailMidway)];
    prop_oneof![
        10 => (prop::collection::vec(op(), 0..8), end).prop_map(|(ops, end)| Step::Txn(ops, end)),
        1 => Just(Step::Reopen),
        3 => (0..CONSUMERS.len(), 0..4usize).prop_map(|(c, n)| Step::Ack(c, n)),
        1 => (0..CONSUMERS.len()).prop_map(Step::Register),
    ]
}

type Id = (usize, Vec<u8>);
/// keyspace, key, kind, new value
type Expected = (String, Vec<u8>, ChangeKind, Option<Vec<u8>>);
/// A transaction's outcome in the model: the state after it, its changes, their old values.
type Net = (BTreeMap<Id, Vec<u8>>, Vec<Expected>, Vec<Option<Vec<u8>>>);

#[derive(Default)]
struct Model {
    state: BTreeMap<Id, Vec<u8>>,
    /// Every commit that has a feed entry, with its changes.
    commits: Vec<(u64, Vec<Expected>)>,
    kept: VecDeque<u64>,
    trimmed: u64,
    consumers: BTreeMap<usize, u64>,
}

impl Model {
    /// The net changes of `ops` applied to `state` (see `store/change_log.rs`: without old
    /// values, a key changed more than once that ends as it began stays an update).
    fn net(&self, ops: &[Op], keeps_old_values: bool) -> Net {
        let mut after = self.state.clone();
        let mut order: Vec<Id> = Vec::new();
        let mut writes: BTreeMap<Id, usize> = BTreeMap::new();
        for op in ops {
            let (id, new) = match op {
                Op::Put(s, k, v) => ((*s, key_of(*k)), Some(v.bytes())),
                Op::Delete(s, k) => ((*s, key_of(*k)), None),
                Op::InsertNew(s, k, v) => {
                    let id = (*s, key_of(*k));
                    if after.contains_key(&id) {
                        continue;
                    }
                    (id, Some(v.bytes()))
                }
                Op::PutBack(s, k) => {
                    let id = (*s, key_of(*k));
                    match after.get(&id) {
                        Some(value) => (id.clone(), Some(value.clone())),
                        None => continue,
                    }
                }
                Op::RefusedPut => continue,
            };
            if new.is_none() && !after.contains_key(&id) {
                continue;
            }
            if !order.contains(&id) {
                order.push(id.clone());
            }
            *writes.entry(id.clone()).or_default() += 1;
            match new {
                Some(value) => after.insert(id, value),
                None => after.remove(&id),
            };
        }
        let (mut changes, mut olds) = (Vec::new(), Vec::new());
        for id in order {
            let (old, new) = (self.state.get(&id), after.get(&id));
            let kind = match (old, new) {
                (None, Some(_)) => ChangeKind::Insert,
                (Some(_), None) => ChangeKind::Delete,
                (Some(old), Some(new)) if old != new || (!keeps_old_values && writes[&id] > 1) => ChangeKind::Update,
                _ => continue,
            };
            changes.push((KEYSPACES[id.0].to_string(), id.1.clone(), kind, new.cloned()));
            olds.push(old.cloned());
        }
        (after, changes, olds)
    }

    fn committed(&mut self, sequence: u64, changes: Vec<Expected>, commits_max: u64) {
        if changes.is_empty() {
            return;
        }
        assert!(self.commits.last().is_none_or(|(last, _)| *last < sequence));
        self.commits.push((sequence, changes));
        self.kept.push_back(sequence);
        while self.kept.len() as u64 > commits_max {
            let oldest = self.kept.pop_front().unwrap();
            self.trimmed = self.trimmed.max(oldest);
        }
    }

    fn acked(&mut self, consumer: usize, cursor: u64) {
        let current = self.consumers[&consumer];
        if cursor <= current {
            return;
        }
        self.consumers.insert(consumer, cursor);
        let handled = *self.consumers.values().min().unwrap();
        while self.kept.front().is_some_and(|&oldest| oldest <= handled) {
            let oldest = self.kept.pop_front().unwrap();
            self.trimmed = self.trimmed.max(oldest);
        }
    }

    /// What a read after `cursor` returns: the kept commits after it, or expired.
    fn after(&self, cursor: u64) -> Result<Vec<(u64, Vec<Expected>)>, u64> {
        if cursor != 0 && cursor < self.trimmed {
            return Err(self.trimmed + 1);
        }
        Ok(self.commits.iter().filter(|(sequence, _)| self.kept.contains(sequence) && *sequence > cursor).cloned().collect())
    }
}

fn as_expected(batches: &[tessera::ChangeBatch]) -> Vec<(u64, Vec<Expected>)> {
    batches
        .iter()
        .map(|batch| {
            let changes =
                batch.changes.iter().map(|c| (c.keyspace.to_string(), c.key.to_vec(), c.kind, c.new.as_ref().map(|v| v.to_vec())));
            (batch.sequence, changes.collect())
        })
        .collect()
}

fn short(batches: &[(u64, Vec<Expected>)]) -> String {
    let describe = |(s, c): &(u64, Vec<Expected>)| {
        let changes: Vec<String> =
            c.iter().map(|(ks, k, kind, v)| format!("{ks}/{}:{kind:?}:{:?}", k.len(), v.as_ref().map(Vec::len))).collect();
        format!("{s}{changes:?}")
    };
    batches.iter().map(describe).collect::<Vec<_>>().join(" ")
}

fn check(db: &Db, model: &Model) -> Result<(), TestCaseError> {
    let read = |cursor: u64| match db.changes_since(cursor, 1000) {
        Ok(batches) => Ok(as_expected(&batches)),
        Err(Error::FeedCursorExpired { oldest_kept, .. }) => Err(oldest_kept),
        Err(other) => panic!("changes_since({cursor}): {other:?}"),
    };
    let (all, expected) = (read(0), model.after(0));
    prop_assert_eq!(all.as_ref().map(|b| short(b)), expected.as_ref().map(|b| short(b)), "from 0");
    prop_assert!(all == expected, "from 0: changes differ");
    let mut cursors: Vec<u64> = model.commits.iter().map(|(s, _)| *s).collect();
    cursors.extend(cursors.clone().iter().map(|s| s - 1));
    for cursor in cursors {
        prop_assert!(
            read(cursor) == model.after(cursor),
            "from {}: {:?} vs {:?}",
            cursor,
            read(cursor).map(|b| short(&b)),
            model.after(cursor).map(|b| short(&b))
        );
    }
    for (&index, &cursor) in &model.consumers {
        let consumer = db.consumer(CONSUMERS[index]).unwrap();
        prop_assert_eq!(consumer.cursor().unwrap(), cursor, "consumer {}'s cursor", CONSUMERS[index]);
        let read = match consumer.changes(1000) {
            Ok(batches) => Ok(as_expected(&batches)),
            Err(Error::FeedCursorExpired { oldest_kept, .. }) => Err(oldest_kept),
            Err(other) => panic!("consumer: {other:?}"),
        };
        prop_assert!(read == model.after(cursor), "consumer {}", CONSUMERS[index]);
    }
    // The store holds the model's state.
    for (index, name) in KEYSPACES.iter().enumerate() {
        let ks = db.keyspace(name).unwrap();
        let stored: Vec<(Vec<u8>, Vec<u8>)> =
            db.read(|tx| tx.range(&ks, ..)?.map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec()))).collect()).unwrap();
        let modelled: Vec<(Vec<u8>, Vec<u8>)> =
            model.state.iter().filter(|((s, _), _)| *s == index).map(|((_, k), v)| (k.clone(), v.clone())).collect();
        prop_assert!(stored == modelled, "keyspace {}", name);
    }
    Ok(())
}

fn open(path: &Path, notify: bool, commits_max: u64) -> Db {
    let options = DbOptions {
        durable_feed: true,
        cross_process_notify: notify,
        feed_retention: FeedRetention { commits_max, ..FeedRetention::default() },
        ..DbOptions::default()
    };
    Db::open_with(path, options).unwrap()
}

fn run_txn(db: &Db, ops: &[Op], end: End) -> tessera::Result<u64> {
    let keyspaces: Vec<_> = KEYSPACES.iter().map(|name| db.keyspace(name).unwrap()).collect();
    db.write(|tx| {
        for op in ops {
            match op {
                Op::Put(s, k, v) => tx.put(&keyspaces[*s], &key_of(*k), &v.bytes())?,
                Op::Delete(s, k) => drop(tx.delete(&keyspaces[*s], &key_of(*k))?),
                Op::InsertNew(s, k, v) => drop(tx.insert_new(&keyspaces[*s], &key_of(*k), &v.bytes())?),
                Op::PutBack(s, k) => {
                    if let Some(value) = tx.get(&keyspaces[*s], &key_of(*k))?.map(<[u8]>::to_vec) {
                        tx.put(&keyspaces[*s], &key_of(*k), &value)?;
                    }
                }
                Op::RefusedPut => assert!(tx.put(&keyspaces[0], &[1; 4000], b"v").is_err()),
            }
        }
        match end {
            End::Commit => Ok(tx.sequence()),
            End::Abort => Err(Error::other(std::io::Error::other("abort"))),
            End::FailMidway => {
                tx.put(&keyspaces[1], b"midway", b"x")?;
                tx.put(&keyspaces[1], &[2; 4000], b"v")?;
                Ok(tx.sequence())
            }
        }
    })
}

fn run(steps: Vec<Step>, notify: bool, listen: bool, commits_max: u64) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let mut db = open(&path, notify, commits_max);
    let mut stream = listen.then(|| db.subscribe().unwrap());
    let mut model = Model::default();
    for step in steps {
        match step {
            Step::Txn(ops, end) => {
                let result = run_txn(&db, &ops, end);
                match end {
                    End::Commit => {
                        let sequence = result.unwrap();
                        let (after, changes, olds) = model.net(&ops, notify || listen);
                        if let (Some(stream), false) = (&stream, changes.is_empty()) {
                            // The in-process feed has the same changes, with their old values
                            // (and no index entries here: keyspaces only).
                            let Some(tessera::FeedEvent::Batch(batch)) = stream.recv_timeout(std::time::Duration::from_secs(10)) else {
                                panic!("no batch for commit {sequence}")
                            };
                            prop_assert_eq!(batch.sequence, sequence);
                            prop_assert!(as_expected(std::slice::from_ref(&batch))[0].1 == changes, "in-process changes");
                            let old: Vec<Option<Vec<u8>>> = batch.changes.iter().map(|c| c.old.as_ref().map(|v| v.to_vec())).collect();
                            prop_assert!(old == olds, "in-process old values");
                        }
                        if let Some(stream) = &stream {
                            prop_assert!(stream.try_recv().is_none(), "one batch per commit");
                        }
                        model.state = after;
                        model.committed(sequence, changes, commits_max);
                    }
                    _ => prop_assert!(result.is_err()),
                }
            }
            Step::Reopen => {
                drop(stream.take());
                db.close().unwrap();
                db = open(&path, notify, commits_max);
                stream = listen.then(|| db.subscribe().unwrap());
            }
            Step::Register(index) => {
                let consumer = db.consumer(CONSUMERS[index]).unwrap();
                let cursor = consumer.cursor().unwrap();
                if let Some(&known) = model.consumers.get(&index) {
                    prop_assert_eq!(cursor, known, "registering again keeps the cursor");
                } else {
                    prop_assert!(cursor >= model.commits.last().map_or(0, |c| c.0) && cursor >= model.trimmed);
                    prop_assert!(consumer.changes(100).unwrap().is_empty());
                    model.consumers.insert(index, cursor);
                }
            }
            Step::Ack(index, n) => {
                let Some(&cursor) = model.consumers.get(&index) else { continue };
                let consumer = db.consumer(CONSUMERS[index]).unwrap();
                match consumer.changes(n) {
                    Ok(batches) => {
                        if let Some(last) = batches.last() {
                            consumer.ack(last.sequence).unwrap();
                            model.acked(index, last.sequence);
                        }
                    }
                    Err(Error::FeedCursorExpired { oldest_kept, .. }) => {
                        prop_assert_eq!(Err(oldest_kept), model.after(cursor).map(drop));
                        // Resynchronised: acknowledges what was removed.
                        consumer.ack(oldest_kept - 1).unwrap();
                        model.acked(index, oldest_kept - 1);
                    }
                    Err(other) => panic!("{other:?}"),
                }
            }
        }
        check(&db, &model)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_feed_replays_every_commit_once_in_order_with_its_net_changes(
        steps in prop::collection::vec(step(), 1..30),
        notify in any::<bool>(),
        listen in any::<bool>(),
        commits_max in prop_oneof![Just(3u64), Just(6), Just(1000)],
    ) {
        run(steps, notify, listen, commits_max)?;
    }
}

/// Writers on several threads and a reader replaying the feed meanwhile: every commit is read
/// once, in sequence order, with its own change, and the replay ends as the store does.
#[test]
fn concurrent_writers_and_a_concurrent_reader_see_every_commit_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir.path().join("db"), false, 1_000_000);
    let notes = db.keyspace("notes").unwrap();
    const THREADS: u32 = 4;
    const COMMITS: u32 = 150;
    let done = std::sync::atomic::AtomicBool::new(false);
    let (committed, replayed) = std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            let (mut cursor, mut seen) = (0u64, Vec::new());
            loop {
                let finished = done.load(std::sync::atomic::Ordering::Acquire);
                let batches = db.changes_since(cursor, 7).unwrap();
                for batch in &batches {
                    assert!(batch.sequence > cursor, "commit order");
                    cursor = batch.sequence;
                    assert_eq!(batch.changes.len(), 1);
                    let change = &batch.changes[0];
                    seen.push((batch.sequence, change.key.to_vec(), change.new.as_ref().map(|v| v.to_vec())));
                }
                if finished && batches.is_empty() {
                    return seen;
                }
            }
        });
        let writers: Vec<_> = (0..THREADS)
            .map(|thread| {
                let (db, notes) = (&db, &notes);
                scope.spawn(move || {
                    (0..COMMITS)
                        .map(|n| {
                            let key = thread.to_be_bytes();
                            let value = n.to_be_bytes();
                            let sequence = db
                                .write(|tx| {
                                    tx.put(notes, &key, &value)?;
                                    Ok(tx.sequence())
                                })
                                .unwrap();
                            (sequence, key.to_vec(), Some(value.to_vec()))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut committed: Vec<_> = writers.into_iter().flat_map(|writer| writer.join().unwrap()).collect();
        done.store(true, std::sync::atomic::Ordering::Release);
        committed.sort();
        (committed, reader.join().unwrap())
    });
    assert_eq!(replayed.len(), (THREADS * COMMITS) as usize);
    assert!(replayed == committed, "the feed holds each commit once, in order, with its value");
}

/// A transaction that outgrows the map runs again (`Db::write`): the feed has its commit once,
/// with what the run that committed wrote (here a different key on each run), and the commit
/// before it intact.
#[test]
fn a_transaction_run_again_for_a_larger_map_is_in_the_feed_once_as_its_last_run_wrote_it() {
    let dir = tempfile::tempdir().unwrap();
    let options = DbOptions { durable_feed: true, map_size_initial_bytes: 1 << 20, ..DbOptions::default() };
    let db = Db::open_with(dir.path().join("db"), options).unwrap();
    let notes = db.keyspace("notes").unwrap();
    db.write(|tx| tx.put(&notes, b"first", b"1")).unwrap();
    let mut runs = 0u8;
    let sequence = db
        .write(|tx| {
            runs += 1;
            tx.put(&notes, &[b'r', runs], b"run")?;
            for i in 0..400u32 {
                tx.put(&notes, &i.to_be_bytes(), &[runs; 10_000])?;
            }
            Ok(tx.sequence())
        })
        .unwrap();
    assert!(runs >= 2, "the map grew during the transaction");
    let batches = db.changes_since(0, 100).unwrap();
    assert_eq!(batches.len(), 2);
    assert_eq!(&*batches[0].changes[0].key, b"first");
    assert_eq!(batches[1].sequence, sequence);
    let changes = &batches[1].changes;
    assert_eq!(changes.len(), 401);
    assert_eq!(&*changes[0].key, &[b'r', runs][..], "only the last run's key");
    assert!(changes[1..].iter().all(|c| c.kind == ChangeKind::Insert && c.new.as_deref() == Some(&[runs; 10_000][..])));
}

/// Random transactions over `KEYSPACES` from the seed `seed`: `count` commits, each of a few
/// puts (some writing a key back or twice), deletes and inserts, a tenth rolled back.
fn random_writes(db: &Db, seed: u64, count: usize) {
    let mut rng = fastrand::Rng::with_seed(seed);
    for _ in 0..count {
        let ops: Vec<Op> = (0..rng.usize(1..6))
            .map(|_| {
                let (s, k) = (rng.usize(..KEYSPACES.len()), rng.usize(..5));
                match rng.u8(..4) {
                    0 => Op::Delete(s, k),
                    1 => Op::InsertNew(s, k, Value::Small(rng.u8(..4), rng.u8(..))),
                    2 => Op::PutBack(s, k),
                    _ => Op::Put(s, k, Value::Small(rng.u8(..4), rng.u8(..))),
                }
            })
            .collect();
        let end = if rng.u8(..10) == 0 { End::Abort } else { End::Commit };
        let _ = run_txn(db, &ops, end);
    }
}

/// The child of `two_processes_writing_at_once_leave_a_feed_that_replays_to_the_store`.
#[test]
#[ignore = "run by two_processes_writing_at_once_leave_a_feed_that_replays_to_the_store"]
fn feed_model_child() {
    let Ok(path) = std::env::var("TESSERA_FEED_MODEL_PATH") else { return };
    let notify = std::env::var("TESSERA_FEED_MODEL_NOTIFY").is_ok();
    random_writes(&open(Path::new(&path), notify, 1_000_000), 2, 300);
}

/// Two processes writing the same keys at once, with and without cross-process notification:
/// the feed, read from its start and applied to an empty store, gives the store's contents,
/// and every commit of both processes is in it once, in order.
#[test]
fn two_processes_writing_at_once_leave_a_feed_that_replays_to_the_store() {
    for notify in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let db = open(&path, notify, 1_000_000);
        let mut command = std::process::Command::new(std::env::current_exe().unwrap());
        command.args(["--exact", "feed_model_child", "--ignored", "--nocapture"]).env("TESSERA_FEED_MODEL_PATH", &path);
        if notify {
            command.env("TESSERA_FEED_MODEL_NOTIFY", "1");
        }
        let child = command.spawn().unwrap();
        random_writes(&db, 1, 300);
        assert!(child.wait_with_output().unwrap().status.success());
        let batches = db.changes_since(0, 1_000_000).unwrap();
        assert!(batches.windows(2).all(|pair| pair[0].sequence < pair[1].sequence), "commit order");
        let mut replayed: BTreeMap<(String, Vec<u8>), Vec<u8>> = BTreeMap::new();
        for change in batches.iter().flat_map(|batch| &batch.changes) {
            let id = (change.keyspace.to_string(), change.key.to_vec());
            let had = replayed.contains_key(&id);
            match (&change.new, change.kind) {
                (Some(new), ChangeKind::Insert) if !had => replayed.insert(id, new.to_vec()),
                (Some(new), ChangeKind::Update) if had => replayed.insert(id, new.to_vec()),
                (None, ChangeKind::Delete) if had => replayed.remove(&id),
                _ => panic!("{:?} of {id:?}, which the replay {}", change.kind, if had { "has" } else { "has not" }),
            };
        }
        let mut stored = BTreeMap::new();
        for name in KEYSPACES {
            let ks = db.keyspace(name).unwrap();
            db.read(|tx| {
                for entry in tx.range(&ks, ..)? {
                    let (key, value) = entry?;
                    stored.insert((name.to_string(), key.to_vec()), value.to_vec());
                }
                Ok(())
            })
            .unwrap();
        }
        assert!(replayed == stored, "notify {notify}: the replay ends as the store");
        assert!(batches.len() > 300, "both processes' commits: {}", batches.len());
    }
}
