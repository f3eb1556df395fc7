//! Crash safety: a child process writes numbered commits and reports each acknowledgement; the
//! parent kills it with SIGKILL at random moments, reopens the database and checks that every
//! acknowledged commit is there, that no transaction is partly visible, and that the database
//! opens. 200 kills per durability level; `TESSERA_CRASH_ITERATIONS` sets another count.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use tessera::{Db, DbOptions, Durability};

const CHILD_PATH: &str = "TESSERA_CRASH_CHILD_PATH";
const CHILD_LEVEL: &str = "TESSERA_CRASH_CHILD_LEVEL";

fn payload(n: u64) -> Vec<u8> {
    // Large enough that a commit spans several pages.
    (0..3000u64).map(|i| (n.wrapping_mul(31).wrapping_add(i) % 251) as u8).collect()
}

fn durability(level: &str) -> Durability {
    match level {
        "immediate" => Durability::Immediate,
        _ => Durability::Buffered { max_delay: Duration::from_millis(5) },
    }
}

/// The child: writes commits n = last + 1, last + 2, ... until killed. Each commit sets
/// `counter = n` and writes entry n in two keyspaces; "ack n" is printed once `write` returns.
#[test]
#[ignore = "run by the crash tests as a child process"]
fn crash_child() {
    let path = std::env::var(CHILD_PATH).expect("run by crash tests");
    let level = std::env::var(CHILD_LEVEL).unwrap();
    let db = Db::open_with(&path, DbOptions { durability: durability(&level), map_size_initial_bytes: 1 << 16, ..DbOptions::default() })
        .unwrap();
    let (main, mirror) = (db.keyspace("main").unwrap(), db.keyspace("mirror").unwrap());
    let mut n = db.read(|tx| Ok(tx.get(&main, b"counter")?.map_or(0, |v| u64::from_be_bytes(v.try_into().unwrap())))).unwrap();
    loop {
        n += 1;
        db.write(|tx| {
            tx.put(&main, &n.to_be_bytes(), &payload(n))?;
            tx.put(&mirror, &n.to_be_bytes(), &n.to_be_bytes())?;
            tx.put(&main, b"counter", &n.to_be_bytes())
        })
        .unwrap();
        println!("ack {n}");
    }
}

/// Runs the child test `name` on `path` until a random moment (up to `delay_max_micros`) after
/// its first acknowledged commit, kills it with SIGKILL, and returns the highest commit it
/// acknowledged.
fn kill_child(name: &str, path: &std::path::Path, level: &str, rng: &mut fastrand::Rng, delay_max_micros: u64) -> u64 {
    kill_child_acks(name, path, level, rng, delay_max_micros).into_iter().max().unwrap_or(0)
}

/// [`kill_child`], returning every number the child acknowledged ("ack N" lines), in order.
fn kill_child_acks(name: &str, path: &std::path::Path, level: &str, rng: &mut fastrand::Rng, delay_max_micros: u64) -> Vec<u64> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_PATH, path)
        .env(CHILD_LEVEL, level)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (sender, receiver) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for n in stdout.lines().map_while(Result::ok).filter_map(|line| line.strip_prefix("ack ").and_then(|n| n.parse::<u64>().ok())) {
            let _ = sender.send(n);
        }
    });
    let first = receiver.recv_timeout(Duration::from_secs(30)).expect("the child acknowledges a commit");
    std::thread::sleep(Duration::from_micros(rng.u64(0..delay_max_micros)));
    child.kill().unwrap();
    child.wait().unwrap();
    reader.join().unwrap();
    std::iter::once(first).chain(receiver.try_iter()).collect()
}

fn run_crashes(level: &str) {
    let iterations: usize = std::env::var("TESSERA_CRASH_ITERATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.tessera");
    let mut rng = fastrand::Rng::with_seed(0x7e55e7a);
    let mut acknowledged = 0u64;
    for iteration in 0..iterations {
        acknowledged = acknowledged.max(kill_child("crash_child", &path, level, &mut rng, 20_000));
        let db = Db::open(&path).unwrap_or_else(|e| panic!("iteration {iteration}: reopen failed: {e}"));
        let (main, mirror) = (db.keyspace("main").unwrap(), db.keyspace("mirror").unwrap());
        db.read(|tx| {
            let counter = u64::from_be_bytes(tx.get(&main, b"counter")?.expect("counter").try_into().unwrap());
            assert!(counter >= acknowledged, "iteration {iteration}: commit {acknowledged} was acknowledged, the database has {counter}");
            // No partial transaction: the newest commit is whole, and nothing after it exists.
            assert_eq!(tx.get(&main, &counter.to_be_bytes())?, Some(&payload(counter)[..]), "iteration {iteration}");
            assert_eq!(tx.get(&mirror, &counter.to_be_bytes())?, Some(&counter.to_be_bytes()[..]));
            assert_eq!(tx.get(&main, &(counter + 1).to_be_bytes())?, None);
            assert_eq!(tx.get(&mirror, &(counter + 1).to_be_bytes())?, None);
            assert_eq!(tx.len(&mirror)?, counter, "iteration {iteration}: every commit present");
            Ok(())
        })
        .unwrap();
        let report = db.check().unwrap();
        assert!(report.is_ok(), "iteration {iteration}: {report}");
        drop(db);
    }
    assert!(acknowledged > iterations as u64, "the children made progress");
}

#[test]
fn killed_writers_lose_nothing_acknowledged_immediate() {
    run_crashes("immediate");
}

#[test]
fn killed_writers_lose_nothing_acknowledged_buffered() {
    run_crashes("buffered");
}

#[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
struct Counters {
    a: u64,
    b: u64,
    c: u64,
    d: String,
}

fn counters(n: u64) -> Counters {
    Counters { a: n, b: n, c: n, d: format!("{n}").repeat(100) }
}

/// The child for the documents crash test: sets a whole document, over and over.
#[test]
#[ignore = "run by the crash tests as a child process"]
fn crash_child_documents() {
    let path = std::env::var(CHILD_PATH).expect("run by crash tests");
    let db = Db::open(&path).unwrap();
    let doc = db.documents("crash").unwrap().document::<Counters>("doc");
    let mut n = doc.get().unwrap().map_or(0, |c| c.a);
    loop {
        n += 1;
        doc.set(&counters(n)).unwrap();
        println!("ack {n}");
    }
}

/// A whole-document `set` is one transaction: a kill never leaves a mix of old and new fields.
#[test]
fn killed_document_writers_never_leave_a_partial_document() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("documents.tessera");
    let mut rng = fastrand::Rng::with_seed(7);
    let iterations: usize = std::env::var("TESSERA_CRASH_ITERATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(200) / 4;
    let mut acknowledged = 0;
    for iteration in 0..iterations {
        acknowledged = acknowledged.max(kill_child("crash_child_documents", &path, "immediate", &mut rng, 10_000));
        let db = Db::open(&path).unwrap();
        let stored = db.documents("crash").unwrap().document::<Counters>("doc").get().unwrap().expect("a document");
        assert_eq!(stored, counters(stored.a), "iteration {iteration}: a partial document");
        assert!(stored.a >= acknowledged, "iteration {iteration}: acknowledged set {acknowledged} lost");
        let report = db.check().unwrap();
        assert!(report.is_ok(), "iteration {iteration}: {report}");
    }
}

/// A record of the whole-product crash test: a secondary and a unique index.
#[derive(serde::Serialize, serde::Deserialize, tessera::collection::Record, Debug, Clone, PartialEq)]
#[record(name = "orders")]
struct CrashOrder {
    #[record(key)]
    id: u64,
    #[record(index)]
    status: u8,
    #[record(unique)]
    code: String,
    total: u64,
}

/// Orders the whole-product child keeps: commit n deletes order n - WINDOW, so that the file
/// (and the check after each kill) stays small however many kills a run makes.
const WINDOW: u64 = 100;

/// The child for the whole-product crash test. Commit n, in one transaction: inserts order n,
/// marks order n - 1 shipped (status 9, a new unique code), deletes order n - WINDOW, sets the
/// document to `counters(n)` and the dictionary's `last` to n.
#[test]
#[ignore = "run by the crash tests as a child process"]
fn crash_child_product() {
    let path = std::env::var(CHILD_PATH).expect("run by crash tests");
    let level = std::env::var(CHILD_LEVEL).unwrap();
    let db = Db::open_with(&path, DbOptions { durability: durability(&level), map_size_initial_bytes: 1 << 16, ..DbOptions::default() })
        .unwrap();
    let orders = db.collection::<CrashOrder>().unwrap();
    let doc = db.documents("crash").unwrap().document::<Counters>("doc");
    let dict = db.dictionary().unwrap();
    let mut n: u64 = dict.get("last").unwrap().unwrap_or(0);
    loop {
        n += 1;
        db.write(|tx| {
            orders.insert(tx, &CrashOrder { id: n, status: (n % 5) as u8, code: format!("new-{n}"), total: n * 10 })?;
            if n > 1 {
                orders.update(tx, &(n - 1), |order| {
                    order.status = 9;
                    order.code = format!("shipped-{}", order.id);
                })?;
            }
            if n > WINDOW {
                orders.delete(tx, &(n - WINDOW))?;
            }
            doc.set_in(tx, &counters(n))?;
            tx.dictionary(&dict).set("last", &n)
        })
        .unwrap();
        println!("ack {n}");
    }
}

/// Kills a child that writes collections (with a secondary and a unique index), a document and
/// the dictionary in each transaction; after each kill every acknowledged commit is there, no
/// transaction is partly visible in any of them, and `Db::check` passes.
fn run_product_crashes(level: &str) {
    let iterations: usize = std::env::var("TESSERA_CRASH_ITERATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("product.tessera");
    let mut rng = fastrand::Rng::with_seed(0x9d0c);
    let mut acknowledged = 0u64;
    for iteration in 0..iterations {
        acknowledged = acknowledged.max(kill_child("crash_child_product", &path, level, &mut rng, 20_000));

        let db = Db::open(&path).unwrap_or_else(|e| panic!("iteration {iteration}: reopen failed: {e}"));
        let last: u64 = db.dictionary().unwrap().get("last").unwrap().expect("a commit happened");
        assert!(last >= acknowledged, "iteration {iteration}: commit {acknowledged} was acknowledged, the dictionary has {last}");
        let orders = db.collection::<CrashOrder>().unwrap();
        assert_eq!(orders.all().count(&db).unwrap() as u64, last.min(WINDOW), "iteration {iteration}: one order per commit in the window");
        assert_eq!(orders.all().fetch(&db).unwrap().first().map(|order| order.id), Some(last.saturating_sub(WINDOW - 1).max(1)));
        assert!(orders.get(&db, &(last + 1)).unwrap().is_none(), "iteration {iteration}: nothing after the last commit");
        let newest = orders.get(&db, &last).unwrap().expect("the last commit's order");
        assert_eq!(newest, CrashOrder { id: last, status: (last % 5) as u8, code: format!("new-{last}"), total: last * 10 });
        // The indexes agree with the records: every order but the newest is shipped.
        assert_eq!(orders.filter(CrashOrder::status().eq(9)).count(&db).unwrap() as u64, last.min(WINDOW) - 1, "iteration {iteration}");
        assert_eq!(orders.filter(CrashOrder::code().eq(format!("new-{last}"))).count(&db).unwrap(), 1);
        if last > 1 {
            let code = format!("shipped-{}", last - 1);
            assert_eq!(orders.filter(CrashOrder::code().eq(code)).fetch(&db).unwrap().len(), 1, "iteration {iteration}");
        }
        let stored = db.documents("crash").unwrap().document::<Counters>("doc").get().unwrap().expect("a document");
        assert_eq!(stored, counters(last), "iteration {iteration}: the document is from the same commit");
        let report = db.check().unwrap();
        assert!(report.is_ok(), "iteration {iteration}: {report}");
    }
    assert!(acknowledged > iterations as u64 / 2, "the children made progress");
}

#[test]
fn killed_product_writers_lose_nothing_and_leave_a_sound_database_immediate() {
    run_product_crashes("immediate");
}

#[test]
fn killed_product_writers_lose_nothing_and_leave_a_sound_database_buffered() {
    run_product_crashes("buffered");
}

/// Writer threads of the grouped-writes child.
const GROUPED_THREADS: u8 = 4;

fn grouped_key(thread: u8, n: u64) -> [u8; 9] {
    let mut key = [thread; 9];
    key[1..].copy_from_slice(&n.to_be_bytes());
    key
}

/// The child of the grouped-writes test: `GROUPED_THREADS` threads commit through
/// `Db::write_grouped`, each writing its entry n in two keyspaces and its own counter in one
/// closure; "ack THREAD n" is printed once `write_grouped` returns.
#[test]
#[ignore = "run by the crash tests as a child process"]
fn crash_child_grouped() {
    let path = std::env::var(CHILD_PATH).expect("run by crash tests");
    let db = Db::open_with(&path, DbOptions { map_size_initial_bytes: 1 << 16, ..DbOptions::default() }).unwrap();
    let (main, mirror) = (db.keyspace("main").unwrap(), db.keyspace("mirror").unwrap());
    std::thread::scope(|scope| {
        for thread in 0..GROUPED_THREADS {
            let (db, main, mirror) = (db.clone(), main.clone(), mirror.clone());
            scope.spawn(move || {
                let counter_key = [b'c', thread];
                let mut n =
                    db.read(|tx| Ok(tx.get(&main, &counter_key)?.map_or(0, |v| u64::from_be_bytes(v.try_into().unwrap())))).unwrap();
                loop {
                    n += 1;
                    let (main, mirror) = (main.clone(), mirror.clone());
                    db.write_grouped(move |tx| {
                        tx.put(&main, &grouped_key(thread, n), &payload(n))?;
                        tx.put(&mirror, &grouped_key(thread, n), &n.to_be_bytes())?;
                        tx.put(&main, &counter_key, &n.to_be_bytes())
                    })
                    .unwrap();
                    println!("ack {}", u64::from(thread) << 56 | n);
                }
            });
        }
    });
}

/// Kills the grouped-writes child at random moments: every write it acknowledged is there,
/// each closure's three puts are all there or none, and the database checks clean.
#[test]
fn killed_grouped_writers_lose_nothing_acknowledged() {
    let iterations: usize = std::env::var("TESSERA_CRASH_ITERATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(200) / 4;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.tessera");
    let mut rng = fastrand::Rng::with_seed(0x9e0_0b5);
    let mut acknowledged = [0u64; GROUPED_THREADS as usize];
    for iteration in 0..iterations {
        for ack in kill_child_acks("crash_child_grouped", &path, "immediate", &mut rng, 20_000) {
            let thread = (ack >> 56) as usize;
            acknowledged[thread] = acknowledged[thread].max(ack & ((1 << 56) - 1));
        }
        let db = Db::open(&path).unwrap_or_else(|e| panic!("iteration {iteration}: reopen failed: {e}"));
        let (main, mirror) = (db.keyspace("main").unwrap(), db.keyspace("mirror").unwrap());
        db.read(|tx| {
            for thread in 0..GROUPED_THREADS {
                let stored = tx.get(&main, &[b'c', thread])?.map_or(0, |v| u64::from_be_bytes(v.try_into().unwrap()));
                let acked = acknowledged[thread as usize];
                assert!(
                    stored >= acked,
                    "iteration {iteration}: thread {thread}'s write {acked} was acknowledged, its counter is {stored}"
                );
                for n in 1..=stored {
                    assert_eq!(
                        tx.get(&main, &grouped_key(thread, n))?,
                        Some(&payload(n)[..]),
                        "iteration {iteration}, thread {thread}, write {n}"
                    );
                    assert_eq!(tx.get(&mirror, &grouped_key(thread, n))?, Some(&n.to_be_bytes()[..]));
                }
                assert_eq!(tx.get(&main, &grouped_key(thread, stored + 1))?, None, "iteration {iteration}: nothing past the counter");
                assert_eq!(tx.get(&mirror, &grouped_key(thread, stored + 1))?, None);
            }
            Ok(())
        })
        .unwrap();
        let report = db.check().unwrap();
        assert!(report.is_ok(), "iteration {iteration}: {report}");
        drop(db);
    }
    assert!(acknowledged.iter().all(|&n| n > 0), "every thread made progress: {acknowledged:?}");
}
