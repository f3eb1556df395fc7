//! `tessera replicate` as a real child process against a real PostgreSQL server that the
//! test starts (a test that cannot start one fails): killed with SIGKILL 50 times in the
//! middle of its batches while a writer keeps writing, then run once to the end; PostgreSQL
//! must then equal tessera, table by table (row count and a hash of every key and record).

use serde::{Deserialize, Serialize};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tessera::collection::Record;
use tessera::store::Durability;
use tessera::{Db, DbOptions};
use tessera_postgres::{TempPostgres, postgres_digest, tessera_digest};

#[derive(Debug, Clone, Serialize, Deserialize, Record)]
#[record(name = "orders")]
struct Order {
    #[record(key)]
    id: u32,
    #[record(index)]
    customer: String,
    #[record(index)]
    total: f64,
    lines: Vec<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize, Record)]
#[record(name = "events")]
struct Event {
    #[record(key)]
    day: u16,
    #[record(key)]
    name: String,
    #[record(index)]
    done: bool,
}

/// Kills of the replicator.
const KILLS: u64 = 50;

fn replicate(db: &std::path::Path, url: &str, follow: bool) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tessera"));
    command.arg("replicate").arg(db).args(["--postgres", url, "--consumer", "killed", "--batches", "3"]);
    if follow {
        command.arg("--follow");
    }
    command
}

/// One writer commit: a few upserts and a delete, keys cycling so that all three happen.
fn write_round(db: &Db, orders: &tessera::Collection<Order>, events: &tessera::Collection<Event>, round: u32) {
    db.write(|tx| {
        for offset in 0..4 {
            let id = (round * 7 + offset) % 300;
            orders.upsert(
                tx,
                &Order { id, customer: format!("c{}", id % 13), total: f64::from(round) / 4.0, lines: vec![round; (id % 4) as usize] },
            )?;
        }
        orders.delete(tx, &((round * 11) % 300))?;
        let day = (round % 40) as u16;
        events.upsert(tx, &Event { day, name: format!("e{}", round % 3), done: round.is_multiple_of(2) })?;
        if round.is_multiple_of(5) {
            events.delete(tx, &((day + 7) % 40, format!("e{}", (round + 1) % 3)))?;
        }
        Ok(())
    })
    .unwrap();
}

#[test]
fn killed_fifty_times_mid_batch_then_run_once_postgres_equals_tessera() {
    let server = TempPostgres::start().expect("start a PostgreSQL server for the test (initdb and pg_ctl must be installed)");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.tessera");
    // Buffered: its syncer thread flushes while the writer grows the map (this test found
    // flushes racing resizes; tessera/tests/flush_during_resize.rs).
    let options =
        DbOptions { durable_feed: true, durability: Durability::Buffered { max_delay: Duration::from_millis(5) }, ..DbOptions::default() };
    let db = Db::open_with(&path, options).unwrap();
    let orders = db.collection::<Order>().unwrap();
    let events = db.collection::<Event>().unwrap();
    for round in 0..200 {
        write_round(&db, &orders, &events, round);
    }
    let writing = AtomicBool::new(true);
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut round = 200;
            while writing.load(Ordering::Acquire) {
                write_round(&db, &orders, &events, round);
                round += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            round
        });
        // A failed assertion below stops the writer as it unwinds: the scope joins it, and would
        // otherwise wait for it forever instead of failing.
        let _stop_writing = StopOnDrop(&writing);
        let mut exited_early = 0;
        let mut client = postgres::Client::connect(&server.url(), postgres::NoTls).unwrap();
        let mut cursors = Vec::with_capacity(KILLS as usize);
        for kill in 0..KILLS {
            let mut child = replicate(&path, &server.url(), true).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
            // 30 to 150 ms: before, during and after the first copy, in the middle of batches.
            std::thread::sleep(Duration::from_millis(30 + (kill * 37) % 120));
            if child.try_wait().unwrap().is_some() {
                exited_early += 1;
            }
            child.kill().unwrap(); // SIGKILL
            let output = child.wait_with_output().unwrap();
            assert!(exited_early == 0, "the follower exited on its own: {}", String::from_utf8_lossy(&output.stderr));
            let cursor = client.query_opt("SELECT cursor FROM tessera_replication WHERE consumer = 'killed'", &[]).ok().flatten();
            cursors.push(cursor.map_or(0, |row| row.get::<_, i64>(0)));
        }
        // The killed runs made progress between kills (so kills fell amid their work).
        let advances = cursors.windows(2).filter(|pair| pair[1] > pair[0]).count();
        assert!(advances >= 10, "the cursor advanced across only {advances} of {KILLS} kills: {cursors:?}");
        writing.store(false, Ordering::Release);
        let rounds = writer.join().unwrap();
        assert!(rounds > 300, "the writer kept writing during the kills ({rounds} rounds)");
    });
    let output = replicate(&path, &server.url(), false).output().unwrap();
    assert!(output.status.success(), "the last run failed: {}", String::from_utf8_lossy(&output.stderr));
    let mut client = postgres::Client::connect(&server.url(), postgres::NoTls).unwrap();
    for table in ["orders", "events"] {
        let source = tessera_digest(&db, table).unwrap();
        let replica = postgres_digest(&mut client, table).unwrap();
        assert!(source.count > 0);
        assert_eq!(replica, source, "table {table}: PostgreSQL differs from tessera after the kills");
    }
    let cursor: i64 = client.query_one("SELECT cursor FROM tessera_replication WHERE consumer = 'killed'", &[]).unwrap().get(0);
    assert!(db.changes_since(cursor as u64, 1).unwrap().is_empty(), "the cursor row is the newest commit");
    assert_eq!(db.consumer("killed").unwrap().cursor().unwrap(), cursor as u64 - 1, "tessera's consumer was acknowledged, one behind");
}

#[test]
fn a_file_without_the_durable_feed_is_a_usage_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plain.tessera");
    let db = Db::open(&path).unwrap();
    db.collection::<Order>().unwrap();
    drop(db);
    // No server is needed: the feed is looked at before PostgreSQL is.
    let output = replicate(&path, "host=127.0.0.1 port=1 user=postgres", false).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stderr).contains("durable feed is off"));
}

/// Clears its flag when dropped, on a panic too.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}
