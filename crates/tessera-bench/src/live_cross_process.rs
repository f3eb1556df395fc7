//! The `live` table's cross-process row: a child process commits, and this process measures
//! the time from the end of the child's write closure to the delivery of the change to an
//! object subscription here (`DbOptions::cross_process_notify`). The child puts the wall-clock
//! time (nanoseconds since the Unix epoch, one clock for every process) into the record it
//! writes; the parent reads the clock when the delivery arrives.

use crate::harness::median;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tessera::collection::Record;
use tessera::live::Event;
use tessera::{Db, DbOptions, Durability, ObjectChange};

const WAIT: Duration = Duration::from_secs(30);
/// Pause between the child's commits, so that each delivery is measured alone.
const COMMIT_INTERVAL: Duration = Duration::from_millis(3);

/// The record the child updates: when its write closure ended.
#[derive(Serialize, Deserialize, Record, Debug)]
#[record(name = "cross_process_tick")]
struct Tick {
    #[record(key)]
    id: u32,
    /// Wall-clock nanoseconds since the Unix epoch at the end of the write closure.
    sent_nanos: u64,
    round: u32,
}

fn now_nanos() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("a clock after 1970").as_nanos() as u64
}

fn options() -> DbOptions {
    DbOptions {
        durability: Durability::Buffered { max_delay: Duration::from_millis(100) },
        durable_feed: true,
        cross_process_notify: true,
        ..DbOptions::default()
    }
}

/// The median latency, in microseconds, of `rounds` commits by a child process to their
/// delivery here.
pub fn run(rounds: usize) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tessera.db");
    let db = Db::open_with(&path, options()).unwrap();
    let ticks = db.collection::<Tick>().unwrap();
    let live = ticks.subscribe_object(&0u32).unwrap();
    live.recv_timeout(WAIT).and_then(Event::initial).expect("the initial state");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["live-cross-process-child", &path.display().to_string(), &rounds.to_string()])
        .spawn()
        .unwrap();
    let mut latencies_us = Vec::with_capacity(rounds);
    while latencies_us.len() < rounds {
        let change = live.recv_timeout(WAIT).and_then(Event::changed).expect("the child's commit delivered");
        let ObjectChange::Updated(tick) = change else { panic!("the tick was deleted") };
        let received = now_nanos();
        latencies_us.push(received.saturating_sub(tick.sent_nanos) as f64 / 1e3);
        assert_eq!(tick.round as usize + 1, latencies_us.len(), "every commit delivered, in order");
    }
    assert!(child.wait().unwrap().success(), "the committing child failed");
    median(latencies_us.into_iter())
}

/// The child: commits `rounds` ticks to the file at `path`, each stamped at the end of its
/// write closure.
pub fn child(path: &Path, rounds: usize) -> std::io::Result<()> {
    let db = Db::open_with(path, options()).map_err(std::io::Error::other)?;
    let ticks = db.collection::<Tick>().map_err(std::io::Error::other)?;
    for round in 0..rounds as u32 {
        std::thread::sleep(COMMIT_INTERVAL);
        db.write(|tx| {
            let mut tick = Tick { id: 0, sent_nanos: 0, round };
            tick.sent_nanos = now_nanos();
            ticks.upsert(tx, &tick).map(drop)
        })
        .map_err(std::io::Error::other)?;
    }
    Ok(())
}
