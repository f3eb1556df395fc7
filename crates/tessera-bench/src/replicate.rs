//! `replicate`: tessera's durable feed applied into PostgreSQL by `tessera-postgres`, on a
//! PostgreSQL server the run starts itself (fsync on). Changes per second applied for
//! BenchDocs written in commits of `--commit-records` (inserts, updates, deletes, each timed
//! from the first commit read to the last one in PostgreSQL), and the lag of a follower from
//! a 10,000-record commit's return to its visibility in PostgreSQL (issue 19 item 3).

use crate::harness::{Goal, Table, elapsed_ms, median};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tessera::store::Durability;
use tessera::{Db, DbOptions};
use tessera_bench::crud_model::{BenchDoc, parts};
use tessera_postgres::{FeedWait, Replicator, ReplicatorOptions, TempPostgres};

pub struct Options {
    /// Rounds (medians are reported).
    pub rounds: usize,
    /// BenchDocs per round.
    pub records: usize,
    /// Records per tessera commit.
    pub commit_records: usize,
    /// Records of the commit whose lag is measured.
    pub lag_records: usize,
}

/// The database's initial map: never grown during a run.
const MAP_BYTES: u64 = 1 << 30;
/// Changes per second the replicator must apply.
const CHANGES_PER_SECOND_MIN: f64 = 20_000.0;
/// Longest lag, in milliseconds, from a commit to its visibility in PostgreSQL.
const LAG_MS_MAX: f64 = 1_000.0;

fn io_error(error: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(error.to_string())
}

fn doc(i: usize, round: usize) -> BenchDoc {
    let mut doc: BenchDoc = parts(i as i32).into();
    doc.priority += round as i32;
    doc
}

/// One round's rates: inserts, updates and deletes per second.
fn rates(server: &TempPostgres, options: &Options) -> std::io::Result<[f64; 3]> {
    let dir = tempfile::tempdir()?;
    // A map large enough that it never grows during the run; Immediate commits of 1,000
    // records each.
    let db_options =
        DbOptions { durable_feed: true, durability: Durability::Immediate, map_size_initial_bytes: MAP_BYTES, ..DbOptions::default() };
    let db = Db::open_with(dir.path().join("db"), db_options).map_err(io_error)?;
    let docs = db.collection::<BenchDoc>().map_err(io_error)?;
    let mut replicator_options = ReplicatorOptions::new(&server.url());
    replicator_options.consumer = format!("bench-{}", dir.path().display());
    let mut client = postgres::Client::connect(&server.url(), postgres::NoTls).map_err(io_error)?;
    client.batch_execute("DROP TABLE IF EXISTS bench_doc").map_err(io_error)?;
    let mut replicator = Replicator::start(&db, replicator_options).map_err(io_error)?;
    let mut rates = [0.0; 3];
    for (phase, rate) in rates.iter_mut().enumerate() {
        for start in (0..options.records).step_by(options.commit_records) {
            let end = (start + options.commit_records).min(options.records);
            db.write(|tx| {
                for i in start..end {
                    match phase {
                        0 => docs.insert(tx, &doc(i, 0)).map(drop)?,
                        1 => docs.upsert(tx, &doc(i, 1)).map(drop)?,
                        _ => docs.delete(tx, &format!("title{i}")).map(drop)?,
                    }
                }
                Ok(())
            })
            .map_err(io_error)?;
        }
        let before = replicator.stats();
        let started = Instant::now();
        let after = replicator.catch_up().map_err(io_error)?;
        let seconds = started.elapsed().as_secs_f64();
        let changes = (after.upserts + after.deletes) - (before.upserts + before.deletes);
        assert_eq!(changes as usize, options.records, "phase {phase}: every change applied");
        *rate = changes as f64 / seconds;
    }
    Ok(rates)
}

/// One round's lag, in milliseconds: a follower is running; one commit of `lag_records`
/// BenchDocs; the time from its return until PostgreSQL's cursor row holds it.
fn lag_ms(server: &TempPostgres, options: &Options) -> std::io::Result<f64> {
    let dir = tempfile::tempdir()?;
    let db_options = DbOptions { durable_feed: true, map_size_initial_bytes: MAP_BYTES, ..DbOptions::default() };
    let db = Db::open_with(dir.path().join("db"), db_options).map_err(io_error)?;
    let docs = db.collection::<BenchDoc>().map_err(io_error)?;
    let consumer = format!("lag-{}", dir.path().display());
    let mut replicator_options = ReplicatorOptions::new(&server.url());
    replicator_options.consumer = consumer.clone();
    let mut client = postgres::Client::connect(&server.url(), postgres::NoTls).map_err(io_error)?;
    client.batch_execute("DROP TABLE IF EXISTS bench_doc").map_err(io_error)?;
    let mut replicator = Replicator::start(&db, replicator_options).map_err(io_error)?;
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let (mut wait, follower_stop, follower) = (FeedWait::new(&db, 20).unwrap(), &stop, &mut replicator);
        let follower = scope.spawn(move || follower.follow(&mut wait, follower_stop));
        std::thread::sleep(Duration::from_millis(100)); // the follower is idle, waiting on the feed
        let sequence = db
            .write(|tx| {
                for i in 0..options.lag_records {
                    docs.insert(tx, &doc(i, 0))?;
                }
                Ok(tx.sequence())
            })
            .map_err(io_error)?;
        let committed = Instant::now();
        let query = "SELECT cursor FROM tessera_replication WHERE consumer = $1";
        loop {
            let cursor: i64 = client.query_one(query, &[&consumer]).map_err(io_error)?.get(0);
            if cursor as u64 >= sequence {
                break;
            }
            if committed.elapsed() > Duration::from_secs(60) {
                return Err(io_error("the follower did not apply the commit within 60 s"));
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        let lag = elapsed_ms(committed);
        stop.store(true, Ordering::Release);
        follower.join().expect("the follower does not panic").map_err(io_error)?;
        Ok(lag)
    })
}

pub fn run(options: &Options) -> std::io::Result<()> {
    assert!(options.rounds > 0 && options.records > 0 && options.commit_records > 0 && options.lag_records > 0);
    let server = TempPostgres::start_with(true).map_err(io_error)?;
    let mut all_rates = Vec::with_capacity(options.rounds);
    let mut lags = Vec::with_capacity(options.rounds);
    for _ in 0..options.rounds {
        all_rates.push(rates(&server, options)?);
        lags.push(lag_ms(&server, options)?);
    }
    let mut table = Table::new("replicate");
    let batch = options.commit_records;
    for (phase, name) in ["inserts", "updates", "deletes"].iter().enumerate() {
        let rate = median(all_rates.iter().map(|rates| rates[phase]));
        let row = format!("BenchDoc {name} applied into PostgreSQL (commits of {batch})");
        table.row(&row, "changes/s", rate, &[], Goal::AtLeast(CHANGES_PER_SECOND_MIN));
    }
    let row = format!("lag, {}-record commit to PostgreSQL (follow)", options.lag_records);
    table.row(&row, "ms", median(lags.into_iter()), &[], Goal::AtMost(LAG_MS_MAX));
    table.finish()
}
