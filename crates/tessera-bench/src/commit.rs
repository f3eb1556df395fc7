//! `commit`: durable commits of one small record each, from 1, 2, 4 and 8 writer threads and
//! from 2 processes, beside SQLite (WAL, `synchronous=FULL`) and native_db (redb, which syncs
//! every commit) doing the same. Commits per second over the whole run, and each commit's p50
//! and p99 latency (issue 19, "durable commits under concurrency").
//!
//! tessera's writers commit through `Db::write_grouped`: the closures of concurrent callers run
//! in one transaction, committed and flushed once for all of them (`store/group.rs`). LMDB
//! needs two flushes per durable commit (the data pages, then the meta page), where SQLite's
//! WAL needs one. Rows with `Db::write`, one LMDB commit per call, show what grouping gives.

use crate::harness::{Goal, Table, median, percentile};
use native_db::{ToKey, native_db};
use native_model::{Model, native_model};
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

pub struct Options {
    /// Rounds per configuration (medians are reported).
    pub rounds: usize,
    /// How long each writer commits, per round.
    pub duration: Duration,
}

/// Writer threads per configuration.
const THREADS: [usize; 4] = [1, 2, 4, 8];
/// Bytes of the record each commit writes.
const VALUE_BYTES: usize = 64;

/// One configuration's run: commits per second over the run, and each commit's latency.
struct Figures {
    commits_per_second: f64,
    latencies_us: Vec<f64>,
}

/// Runs `commit(thread, n)` from `threads` threads for `duration`, each thread starting
/// together; `open(thread)` makes each thread's handle first (untimed).
fn run_threads<H: Send>(
    threads: usize,
    duration: Duration,
    open: impl Fn(usize) -> H + Sync,
    commit: impl Fn(&mut H, usize, u64) + Sync,
) -> Figures {
    let barrier = Barrier::new(threads);
    let results: Vec<Vec<f64>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let (barrier, open, commit) = (&barrier, &open, &commit);
                scope.spawn(move || {
                    let mut handle = open(thread);
                    barrier.wait();
                    let start = Instant::now();
                    let mut latencies = Vec::new();
                    let mut n = 0u64;
                    while start.elapsed() < duration {
                        let began = Instant::now();
                        commit(&mut handle, thread, n);
                        latencies.push(began.elapsed().as_secs_f64() * 1e6);
                        n += 1;
                    }
                    latencies
                })
            })
            .collect();
        handles.into_iter().map(|handle| handle.join().expect("a writer thread")).collect()
    });
    let commits: usize = results.iter().map(Vec::len).sum();
    Figures { commits_per_second: commits as f64 / duration.as_secs_f64(), latencies_us: results.into_iter().flatten().collect() }
}

fn key(thread: usize, n: u64) -> [u8; 16] {
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&(thread as u64).to_be_bytes());
    key[8..].copy_from_slice(&n.to_be_bytes());
    key
}

fn tessera_db(dir: &Path) -> tessera::Db {
    // Immediate durability is the default: every commit is flushed before it returns.
    tessera::Db::open(dir.join("tessera.db")).unwrap()
}

/// How tessera's writers commit.
#[derive(Clone, Copy)]
enum Commits {
    /// `Db::write_grouped`: concurrent writes share transactions.
    Grouped,
    /// `Db::write`: one LMDB commit per call.
    EachAlone,
}

/// One durable write of one record, as `commits` says.
fn tessera_commit(db: &tessera::Db, records: &tessera::Keyspace, commits: Commits, key: [u8; 16]) {
    const VALUE: [u8; VALUE_BYTES] = [7u8; VALUE_BYTES];
    match commits {
        Commits::Grouped => {
            let records = records.clone();
            db.write_grouped(move |tx| tx.put(&records, &key, &VALUE)).unwrap();
        }
        Commits::EachAlone => db.write(|tx| tx.put(records, &key, &VALUE)).unwrap(),
    }
}

fn tessera_run(dir: &Path, threads: usize, duration: Duration, commits: Commits) -> Figures {
    let db = tessera_db(dir);
    let records = db.keyspace("records").unwrap();
    run_threads(threads, duration, |_| (), |(), thread, n| tessera_commit(&db, &records, commits, key(thread, n)))
}

fn sqlite_connection(dir: &Path) -> rusqlite::Connection {
    let connection = rusqlite::Connection::open(dir.join("sqlite.db")).unwrap();
    connection.pragma_update(None, "journal_mode", "WAL").unwrap();
    connection.pragma_update(None, "synchronous", "FULL").unwrap();
    connection.busy_timeout(Duration::from_secs(30)).unwrap();
    connection
}

fn sqlite_run(dir: &Path, threads: usize, duration: Duration) -> Figures {
    sqlite_connection(dir).execute("CREATE TABLE IF NOT EXISTS records (key BLOB PRIMARY KEY, value BLOB)", []).unwrap();
    let value = [7u8; VALUE_BYTES];
    run_threads(
        threads,
        duration,
        |_| sqlite_connection(dir),
        |connection, thread, n| {
            // One transaction per commit, as tessera's: BEGIN IMMEDIATE takes the write lock.
            let tx = connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).unwrap();
            tx.execute("INSERT OR REPLACE INTO records (key, value) VALUES (?1, ?2)", rusqlite::params![&key(thread, n)[..], &value[..]])
                .unwrap();
            tx.commit().unwrap();
        },
    )
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
#[native_model(id = 100, version = 1)]
#[native_db]
struct NativeRecord {
    #[primary_key]
    key: Vec<u8>,
    value: Vec<u8>,
}

fn native_run(dir: &Path, threads: usize, duration: Duration) -> Figures {
    static MODELS: std::sync::OnceLock<native_db::Models> = std::sync::OnceLock::new();
    let models = MODELS.get_or_init(|| {
        let mut models = native_db::Models::new();
        models.define::<NativeRecord>().unwrap();
        models
    });
    let db = Arc::new(native_db::Builder::new().create(models, dir.join("native.db")).unwrap());
    run_threads(
        threads,
        duration,
        |_| db.clone(),
        |db, thread, n| {
            let rw = db.rw_transaction().unwrap();
            rw.insert(NativeRecord { key: key(thread, n).to_vec(), value: vec![7u8; VALUE_BYTES] }).unwrap();
            rw.commit().unwrap();
        },
    )
}

/// The child of the 2-process rows: commits to `path` for `duration_ms` as `system` ("tessera"
/// or "sqlite"), then prints its commit count and latencies (µs, one per line).
pub fn child(system: &str, dir: &Path, process: usize, duration: Duration) -> std::io::Result<()> {
    let figures = match system {
        "tessera" => {
            let db = tessera_db(dir);
            let records = db.keyspace("records").unwrap();
            run_threads(1, duration, |_| (), |(), _, n| tessera_commit(&db, &records, Commits::Grouped, key(process, n)))
        }
        "sqlite" => {
            let value = [7u8; VALUE_BYTES];
            run_threads(
                1,
                duration,
                |_| sqlite_connection(dir),
                |connection, _, n| {
                    let tx = connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).unwrap();
                    tx.execute(
                        "INSERT OR REPLACE INTO records (key, value) VALUES (?1, ?2)",
                        rusqlite::params![&key(process, n)[..], &value[..]],
                    )
                    .unwrap();
                    tx.commit().unwrap();
                },
            )
        }
        other => return Err(std::io::Error::other(format!("no system {other:?} for the commit child"))),
    };
    for latency in figures.latencies_us {
        println!("{latency}");
    }
    Ok(())
}

/// Two child processes committing to one file together.
fn processes_run(system: &str, dir: &Path, duration: Duration) -> Figures {
    // The file and its table exist before the children start.
    match system {
        "tessera" => drop(tessera_db(dir).keyspace("records").unwrap()),
        _ => drop(sqlite_connection(dir).execute("CREATE TABLE IF NOT EXISTS records (key BLOB PRIMARY KEY, value BLOB)", []).unwrap()),
    }
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..2)
        .map(|process| {
            std::process::Command::new(&exe)
                .args(["commit-child", system, &dir.display().to_string(), &process.to_string(), &duration.as_millis().to_string()])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut latencies_us = Vec::new();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "a commit child failed");
        latencies_us.extend(String::from_utf8_lossy(&output.stdout).lines().map(|line| line.parse::<f64>().expect("a latency per line")));
    }
    Figures { commits_per_second: latencies_us.len() as f64 / duration.as_secs_f64(), latencies_us }
}

/// Medians over rounds of commits per second, p50 and p99 latency.
fn summarize(rounds: Vec<Figures>) -> (f64, f64, f64) {
    let per_second = median(rounds.iter().map(|figures| figures.commits_per_second));
    let p50 = median(rounds.iter().map(|figures| percentile(figures.latencies_us.clone(), 50)));
    let p99 = median(rounds.iter().map(|figures| percentile(figures.latencies_us.clone(), 99)));
    (per_second, p50, p99)
}

pub fn run(options: &Options) -> std::io::Result<()> {
    let mut table = Table::new("commit");
    let rounds = options.rounds.max(1);
    let measure = |run: &dyn Fn(&Path) -> Figures| summarize((0..rounds).map(|_| run(tempfile::tempdir().unwrap().path())).collect());
    for threads in THREADS {
        let duration = options.duration;
        let tessera = measure(&|dir| tessera_run(dir, threads, duration, Commits::Grouped));
        let alone = measure(&|dir| tessera_run(dir, threads, duration, Commits::EachAlone));
        let sqlite = measure(&|dir| sqlite_run(dir, threads, duration));
        let native = measure(&|dir| native_run(dir, threads, duration));
        // Issue 19: with 4 writers, at least twice SQLite FULL's durable commits per second.
        let goal = if threads == 4 { Goal::AtLeastTimesPeer { peer: "sqlite", factor: 2.0 } } else { Goal::None };
        let label = if threads == 1 { "1 writer thread".to_owned() } else { format!("{threads} writer threads") };
        table.row(
            &format!("durable commits per second, {label}"),
            "commits/s",
            tessera.0,
            &[("sqlite", sqlite.0), ("native_db", native.0)],
            goal,
        );
        table.row(
            &format!("durable commits per second, {label}, `write` (one LMDB commit each)"),
            "commits/s",
            alone.0,
            &[("sqlite", sqlite.0), ("native_db", native.0)],
            Goal::None,
        );
        table.row(&format!("commit latency p50, {label}"), "µs", tessera.1, &[("sqlite", sqlite.1), ("native_db", native.1)], Goal::None);
        table.row(&format!("commit latency p99, {label}"), "µs", tessera.2, &[("sqlite", sqlite.2), ("native_db", native.2)], Goal::None);
    }
    // No native_db peer here: redb takes an exclusive `flock` on its file when it opens it,
    // so a second process's open fails with `DatabaseAlreadyOpen`; it has no multi-process mode.
    let tessera = measure(&|dir| processes_run("tessera", dir, options.duration));
    let sqlite = measure(&|dir| processes_run("sqlite", dir, options.duration));
    table.row("durable commits per second, 2 processes", "commits/s", tessera.0, &[("sqlite", sqlite.0)], Goal::None);
    table.row("commit latency p50, 2 processes", "µs", tessera.1, &[("sqlite", sqlite.1)], Goal::None);
    table.row("commit latency p99, 2 processes", "µs", tessera.2, &[("sqlite", sqlite.2)], Goal::None);
    table.finish()
}
