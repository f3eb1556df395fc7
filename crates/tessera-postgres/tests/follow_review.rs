//! Adversarial review of the replicator in follow mode and across restarts: commits made while
//! it runs, files put back from older copies, feed retention, schema changes while following,
//! two replicators of one consumer. Each test starts one PostgreSQL server of its own
//! (`TempPostgres`: initdb and pg_ctl on loopback, `runuser -u postgres` as root) and stops it
//! when it ends (drop).
//!
//! The rule checked everywhere: after the replicator has caught up, PostgreSQL equals tessera
//! row by row (stored key, the record's canonical JSON, and each typed column against the
//! record), or the replicator fails with a typed error; never Ok with a different replica.
//!
//! Failing on the code reviewed (2026-12-01), real defects:
//! - `a_replica_copied_while_the_feed_was_empty_detects_a_file_put_back_from_an_older_copy`
//!   (fixed: the cursor row keeps a marker that the feed had no entry);
//! - `a_put_back_file_whose_newest_entry_matches_but_earlier_commits_differ_is_detected`
//!   (known and left, ignored: the digest names one entry; docs/design.md section 8).
//!
//! The other tests pass (behaviour checked and correct).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tessera::collection::Record;
use tessera::store::{Durability, FeedRetention};
use tessera::{Collection, Db, DbOptions};
use tessera_postgres::{PollWait, ReplicateError, Replicator, ReplicatorOptions, TempPostgres};
use tessera_value::Doc;

// ------------------------------------------------------------------------------ helpers

#[derive(Debug, Clone, Serialize, Deserialize, Record)]
#[record(name = "people")]
struct Person {
    #[record(key)]
    id: u32,
    #[record(index)]
    name: String,
    #[record(index)]
    age: u32,
    /// A global write counter: each write of any record gets a greater one.
    v: u64,
    body: String,
}

/// `Person` a version later: a new field, indexed, and `v` indexed too.
#[derive(Debug, Clone, Serialize, Deserialize, Record)]
#[record(name = "people", version = 2)]
struct PersonV2 {
    #[record(key)]
    id: u32,
    #[record(index)]
    name: String,
    #[record(index)]
    age: u32,
    #[record(index)]
    v: u64,
    body: String,
    #[record(index)]
    email: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, Record)]
#[record(name = "notes")]
struct Note {
    #[record(key)]
    title: String,
    #[record(index)]
    stars: Option<i32>,
    v: u64,
    body: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, Record)]
#[record(name = "later")]
struct Later {
    #[record(key)]
    day: u16,
    #[record(key)]
    name: String,
    #[record(index)]
    done: bool,
    v: u64,
}

fn db_options(commits_max: u64) -> DbOptions {
    DbOptions {
        durable_feed: true,
        feed_retention: FeedRetention { commits_max, ..FeedRetention::default() },
        durability: Durability::Immediate,
        ..DbOptions::default()
    }
}

fn open(dir: &tempfile::TempDir, commits_max: u64) -> Db {
    Db::open_with(dir.path().join("db"), db_options(commits_max)).expect("open the database")
}

fn server() -> TempPostgres {
    TempPostgres::start().expect("start a PostgreSQL server for the test (initdb and pg_ctl must be installed)")
}

fn client(server: &TempPostgres) -> postgres::Client {
    postgres::Client::connect(&server.url(), postgres::NoTls).expect("connect to the test server")
}

fn options(server: &TempPostgres) -> ReplicatorOptions {
    let mut options = ReplicatorOptions::new(&server.url());
    options.retry.delay_initial_ms = 10;
    options.retry.delay_max_ms = 100;
    options.retry.attempts_max = 5;
    options
}

fn person(id: u32, v: u64) -> Person {
    Person { id, name: format!("p{}", id % 11), age: (id * 7 + v as u32) % 90, v, body: format!("body {id} v{v}") }
}

fn newest(db: &Db) -> u64 {
    db.read(|snapshot| Ok(snapshot.sequence())).unwrap()
}

/// The newest commit with a feed entry (what a caught-up replica's cursor reaches at least).
fn newest_entry(db: &Db) -> u64 {
    db.feed_digest_through(u64::MAX).unwrap().map_or(0, |(at, _)| at)
}

/// PostgreSQL's cursor for `consumer`.
fn pg_cursor(server: &TempPostgres, consumer: &str) -> Option<u64> {
    client(server)
        .query_opt("SELECT cursor FROM tessera_replication WHERE consumer = $1", &[&consumer])
        .ok()
        .flatten()
        .map(|row| row.get::<_, i64>(0) as u64)
}

/// Waits until PostgreSQL's cursor has reached the newest feed entry.
fn wait_caught_up(db: &Db, server: &TempPostgres, consumer: &str) {
    let target = newest_entry(db);
    let deadline = Instant::now() + Duration::from_secs(60);
    while pg_cursor(server, consumer).is_none_or(|cursor| cursor < target) {
        assert!(Instant::now() < deadline, "the follower did not catch up: {:?} of {target}", pg_cursor(server, consumer));
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Canonical JSON of a jsonb text, through tessera's JSON reader (key order and spacing aside).
fn canonical(text: &str) -> String {
    let bytes = tessera_value::from_json(text.as_bytes()).expect("jsonb text reads back");
    Doc::from_untrusted(&bytes).unwrap().root().to_json_canonical()
}

/// Asserts PostgreSQL's `table` equals tessera's collection row by row: the same stored keys,
/// and for each the same record. Names the first keys that differ.
fn assert_rows_equal(db: &Db, server: &TempPostgres, table: &str) {
    let mut source: BTreeMap<Vec<u8>, String> = BTreeMap::new();
    let collection = db.dyn_collection(table).unwrap();
    collection
        .all()
        .for_each(db, |record| {
            source.insert(record.key_bytes().to_vec(), record.value().to_json_canonical());
            Ok(true)
        })
        .unwrap();
    let mut replica: BTreeMap<Vec<u8>, String> = BTreeMap::new();
    for row in client(server).query(&format!("SELECT tessera_key, record::text FROM \"{table}\""), &[]).unwrap() {
        replica.insert(row.get(0), canonical(row.get(1)));
    }
    let missing: Vec<&String> = source.iter().filter(|(key, _)| !replica.contains_key(*key)).map(|(_, json)| json).take(5).collect();
    let extra: Vec<&String> = replica.iter().filter(|(key, _)| !source.contains_key(*key)).map(|(_, json)| json).take(5).collect();
    let differing: Vec<(&String, &String)> = source
        .iter()
        .filter_map(|(key, json)| replica.get(key).filter(|other| *other != json).map(|other| (json, other)))
        .take(5)
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty() && differing.is_empty(),
        "table {table}: PostgreSQL differs from tessera ({} records, {} rows)\n  missing in PostgreSQL: {missing:?}\n  \
         only in PostgreSQL: {extra:?}\n  differing (tessera, PostgreSQL): {differing:?}",
        source.len(),
        replica.len()
    );
}

/// Asserts each typed column of `table` holds what the row's `record` holds at its path
/// (`columns`: name and SQL type).
fn assert_columns_follow_records(server: &TempPostgres, table: &str, columns: &[(&str, &str)]) {
    let mut client = client(server);
    for (column, sql) in columns {
        let query = if *sql == "jsonb" {
            format!("SELECT count(*) FROM \"{table}\" WHERE \"{column}\" IS DISTINCT FROM NULLIF(record -> '{column}', 'null'::jsonb)")
        } else {
            format!("SELECT count(*) FROM \"{table}\" WHERE \"{column}\" IS DISTINCT FROM (record ->> '{column}')::{sql}")
        };
        let wrong: i64 = client.query_one(&query, &[]).unwrap().get(0);
        assert_eq!(wrong, 0, "table {table}: column {column} differs from the record in {wrong} rows");
    }
}

/// An audit of every row change PostgreSQL applies to `tables` (by trigger): each row version
/// (its record's `v`) must be applied at most once, and per key in increasing order.
fn install_audit(server: &TempPostgres, tables: &[&str]) {
    let mut client = client(server);
    client
        .batch_execute(
            "CREATE TABLE audit (id bigserial PRIMARY KEY, tbl text NOT NULL, k bytea NOT NULL, v bigint, op text NOT NULL);
             CREATE FUNCTION audit_fn() RETURNS trigger AS $$ BEGIN
               IF TG_OP = 'DELETE' THEN
                 INSERT INTO audit (tbl, k, v, op) VALUES (TG_TABLE_NAME, OLD.tessera_key, NULL, 'D'); RETURN OLD;
               END IF;
               INSERT INTO audit (tbl, k, v, op) VALUES (TG_TABLE_NAME, NEW.tessera_key, (NEW.record ->> 'v')::bigint, TG_OP);
               RETURN NEW;
             END $$ LANGUAGE plpgsql;",
        )
        .unwrap();
    for table in tables {
        client
            .batch_execute(&format!(
                "CREATE TRIGGER audit_{table} AFTER INSERT OR UPDATE OR DELETE ON \"{table}\" FOR EACH ROW EXECUTE FUNCTION audit_fn()"
            ))
            .unwrap();
    }
}

fn assert_audit_exactly_once_in_order(server: &TempPostgres) {
    let mut client = client(server);
    let twice: Vec<(String, i64, i64)> = client
        .query("SELECT tbl, v, count(*) FROM audit WHERE v IS NOT NULL GROUP BY tbl, k, v HAVING count(*) > 1 LIMIT 5", &[])
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect();
    assert!(twice.is_empty(), "row versions applied more than once (table, v, times): {twice:?}");
    let backwards: i64 = client
        .query_one(
            "SELECT count(*) FROM (SELECT v, lag(v) OVER (PARTITION BY tbl, k ORDER BY id) AS before FROM audit WHERE v IS NOT NULL) s \
             WHERE before >= v",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(backwards, 0, "a key got an older version after a newer one");
}

// ------------------------------------------------------------------------------ files put back

/// FIXED. The replica's row kept `digest` NULL when its cursor was set while the feed held no
/// entry at or before it (here: another consumer, caught up, had acknowledged every entry, so
/// the feed was empty at the first full copy; likewise a file that turned the feed on after
/// its data was written). A later start then skips the divergence check altogether
/// (`open`: `if let (Some(kept), Some(found), ..)`), although the file now has an entry at or
/// before the cursor — which a file that kept its history can never gain, since new commits
/// take new sequences. The file put back from an older copy and written since is read on from
/// the cursor: its own commit at the cursor's sequence is never replicated, and `catch_up`
/// returns Ok. Correct: `HistoryDiverged` (or a replica equal to the file).
#[test]
fn a_replica_copied_while_the_feed_was_empty_detects_a_file_put_back_from_an_older_copy() {
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, 100_000);
    let notes = db.collection::<Note>().unwrap();
    let indexer = db.consumer("indexer").unwrap();
    for n in 0..5u64 {
        db.write(|tx| notes.upsert(tx, &Note { title: format!("n{n}"), stars: Some(n as i32), v: n, body: "base".into() }).map(drop))
            .unwrap();
    }
    // Another consumer of the file is caught up: every entry is acknowledged and removed.
    indexer.ack(newest(&db)).unwrap();
    assert_eq!(db.feed_extent().unwrap().commits, 0, "the feed is empty");
    // A backup of the file, taken now.
    let backup_dir = tempfile::tempdir().unwrap();
    db.copy_compacted(&backup_dir.path().join("db")).unwrap();
    // The first replication: a full copy at a commit with no entry at or before it.
    let mut replicator = Replicator::start(&db, options(&server)).unwrap();
    replicator.catch_up().unwrap();
    let cursor = replicator.cursor();
    let digest: Option<i64> =
        client(&server).query_one("SELECT digest FROM tessera_replication WHERE consumer = 'postgres'", &[]).unwrap().get(0);
    assert_eq!(digest, Some(0), "the row keeps the no-entry marker (it kept NULL, as a row before digests did)");
    drop((replicator, notes, indexer, db));

    // The file is put back from the backup and written since: its commit takes the sequence
    // of a commit the replica already counts as applied.
    let restored = open(&backup_dir, 100_000);
    let notes = restored.collection::<Note>().unwrap();
    restored
        .write(|tx| {
            notes.insert(tx, &Note { title: "written after the restore".into(), stars: None, v: 100, body: "lost".into() }).map(drop)
        })
        .unwrap();
    assert!(newest_entry(&restored) <= cursor, "precondition: the restored file's commit is at or before the cursor {cursor}");
    match Replicator::start(&restored, options(&server)) {
        Err(ReplicateError::HistoryDiverged { .. }) => {} // correct
        Err(other) => panic!("expected HistoryDiverged, got {other:?}"),
        Ok(mut replicator) => {
            replicator.catch_up().unwrap();
            assert_rows_equal(&restored, &server, "notes");
        }
    }
}

/// KNOWN (ignored). The divergence check compares only the digest of the newest feed entry at or before
/// the cursor. A file put back from an older copy whose newest commit there happens to be
/// byte-identical to the one the replica applied (same sequence, same change: an idempotent
/// write, a status flag, a heartbeat repeated after the restore), but whose earlier commits
/// differ, passes the check: the start reads on after the cursor and the replica keeps the
/// lost file's values for ever, `catch_up` Ok. Correct: `HistoryDiverged` (the digest should
/// cover the history up to the cursor, e.g. a hash chained through the entries), or a replica
/// equal to the file.
#[test]
#[ignore = "known: the digest names one feed entry, not the history before it (docs/design.md section 8)"]
fn a_put_back_file_whose_newest_entry_matches_but_earlier_commits_differ_is_detected() {
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, 100_000);
    let notes = db.collection::<Note>().unwrap();
    // Every field already used, so that no later commit adds shared keys.
    db.write(|tx| notes.upsert(tx, &Note { title: "k1".into(), stars: Some(1), v: 1, body: "base".into() }).map(drop)).unwrap();
    let backup_dir = tempfile::tempdir().unwrap();
    db.copy_compacted(&backup_dir.path().join("db")).unwrap();
    let at_backup = newest(&db);
    // After the backup: k1 changes, then a status note is written.
    db.write(|tx| notes.upsert(tx, &Note { title: "k1".into(), stars: Some(1), v: 2, body: "ORIGINAL".into() }).map(drop)).unwrap();
    db.write(|tx| notes.insert(tx, &Note { title: "status".into(), stars: None, v: 0, body: "ok".into() }).map(drop)).unwrap();
    let mut replicator = Replicator::start(&db, options(&server)).unwrap();
    replicator.catch_up().unwrap();
    assert_rows_equal(&db, &server, "notes");
    drop((replicator, notes, db));

    // Put back from the backup; k1 is written differently, then the same status note (the
    // same change at the same sequence as before).
    let restored = open(&backup_dir, 100_000);
    assert_eq!(newest(&restored), at_backup);
    let notes = restored.collection::<Note>().unwrap();
    restored.write(|tx| notes.upsert(tx, &Note { title: "k1".into(), stars: Some(1), v: 3, body: "RESTORED".into() }).map(drop)).unwrap();
    restored.write(|tx| notes.insert(tx, &Note { title: "status".into(), stars: None, v: 0, body: "ok".into() }).map(drop)).unwrap();
    match Replicator::start(&restored, options(&server)) {
        Err(ReplicateError::HistoryDiverged { .. }) => {} // correct
        Err(other) => panic!("expected HistoryDiverged, got {other:?}"),
        Ok(mut replicator) => {
            replicator.catch_up().unwrap();
            // Later commits are replicated, but k1 is not.
            restored
                .write(|tx| notes.upsert(tx, &Note { title: "k2".into(), stars: Some(2), v: 4, body: "later".into() }).map(drop))
                .unwrap();
            replicator.catch_up().unwrap();
            assert_rows_equal(&restored, &server, "notes");
        }
    }
}

// ------------------------------------------------------------------------------ follow mode

/// Writes `rounds` commits of every kind a follower must apply: upserts, deletes, a delete and
/// re-insert of one key in one transaction, an insert and delete of one key in one transaction
/// (net nothing), a transaction touching both collections, one touching only a keyspace that is
/// not replicated, and commits larger than a PostgreSQL transaction's bound (never split).
/// `counter` is the global write counter (each record written gets the next `v`).
fn write_mix(db: &Db, people: &Collection<Person>, notes: &Collection<Note>, plain: &tessera::Keyspace, counter: &mut u64, rounds: u32) {
    let mut next = || {
        *counter += 1;
        *counter
    };
    for round in 0..rounds {
        match round % 8 {
            0 => db
                .write(|tx| {
                    for offset in 0..4 {
                        people.upsert(tx, &person((round * 5 + offset) % 97, next()))?;
                    }
                    Ok(())
                })
                .unwrap(),
            1 => db.write(|tx| people.delete(tx, &((round * 3) % 97)).map(drop)).unwrap(),
            2 => {
                let id = (round * 7) % 97;
                db.write(|tx| {
                    people.upsert(tx, &person(id, next()))?;
                    people.delete(tx, &id)?;
                    people.insert(tx, &person(id, next())).map(drop)
                })
                .unwrap()
            }
            3 => db
                .write(|tx| {
                    let id = 1_000 + round;
                    people.insert(tx, &person(id, next()))?;
                    people.delete(tx, &id).map(drop)
                })
                .unwrap(),
            4 => db
                .write(|tx| {
                    people.upsert(tx, &person((round * 11) % 97, next()))?;
                    let title = format!("note {}", round % 13);
                    notes.upsert(
                        tx,
                        &Note { title, stars: (round % 3 != 0).then_some(round as i32), v: next(), body: format!("r{round}") },
                    )?;
                    notes.delete(tx, &format!("note {}", (round + 6) % 13)).map(drop)
                })
                .unwrap(),
            5 => db.write(|tx| tx.put(plain, format!("k{round}").as_bytes(), b"not replicated")).unwrap(),
            6 => db
                .write(|tx| {
                    for id in 0..60 {
                        people.upsert(tx, &person(id, next()))?;
                    }
                    Ok(())
                })
                .unwrap(),
            _ => db
                .write(|tx| {
                    let title = format!("note {}", round % 13);
                    notes.upsert(tx, &Note { title, stars: None, v: next(), body: String::new() }).map(drop)
                })
                .unwrap(),
        }
    }
}

const PEOPLE_COLUMNS: [(&str, &str); 3] = [("id", "bigint"), ("name", "text"), ("age", "bigint")];
const NOTES_COLUMNS: [(&str, &str); 2] = [("title", "text"), ("stars", "bigint")];

/// Passes. Commits of every kind made while one follower runs reach PostgreSQL once each, in
/// order (audited by trigger), and the replica equals tessera row by row after it catches up.
#[test]
fn commits_made_while_following_are_applied_once_in_order_and_end_equal() {
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, 100_000);
    let people = db.collection::<Person>().unwrap();
    let notes = db.collection::<Note>().unwrap();
    let plain = db.keyspace("plain").unwrap();
    let mut counter = 0;
    write_mix(&db, &people, &notes, &plain, &mut counter, 16);
    let mut options = options(&server);
    options.batches_per_transaction = 4;
    options.changes_per_transaction = 25;
    // A consumer that never acknowledges: the feed keeps every entry, to count them at the end.
    let _keeper = db.consumer("keeper").unwrap();
    let mut replicator = Replicator::start(&db, options).unwrap();
    let start = replicator.cursor();
    install_audit(&server, &["people", "notes"]);
    let stop = AtomicBool::new(false);
    let stats = std::thread::scope(|scope| {
        let follower = scope.spawn(|| replicator.follow(&mut tessera_postgres::FeedWait::new(&db, 20).unwrap(), &stop));
        write_mix(&db, &people, &notes, &plain, &mut counter, 200);
        wait_caught_up(&db, &server, "postgres");
        stop.store(true, Ordering::Release);
        follower.join().unwrap()
    })
    .expect("the follower ends Ok");
    // Every commit with a feed entry since the start, once (a write that changed nothing has none).
    assert_eq!(stats.commits, db.changes_since(start, 100_000).unwrap().len() as u64, "{stats:?}");
    assert_rows_equal(&db, &server, "people");
    assert_rows_equal(&db, &server, "notes");
    assert_columns_follow_records(&server, "people", &PEOPLE_COLUMNS);
    assert_columns_follow_records(&server, "notes", &NOTES_COLUMNS);
    assert_audit_exactly_once_in_order(&server);
}

/// Passes. Two followers of the same consumer at once while commits come: each row version
/// applied once between them, in order, and the replica equal at the end.
#[test]
fn two_followers_of_one_consumer_apply_each_version_once() {
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, 100_000);
    let people = db.collection::<Person>().unwrap();
    let notes = db.collection::<Note>().unwrap();
    let plain = db.keyspace("plain").unwrap();
    let mut counter = 0;
    let mut options = options(&server);
    options.batches_per_transaction = 3;
    options.changes_per_transaction = 25;
    let _keeper = db.consumer("keeper").unwrap();
    let mut first = Replicator::start(&db, options.clone()).unwrap();
    let mut second = Replicator::start(&db, options).unwrap();
    let start = first.cursor().max(second.cursor());
    install_audit(&server, &["people", "notes"]);
    let stop = AtomicBool::new(false);
    let (a, b) = std::thread::scope(|scope| {
        let a = scope.spawn(|| first.follow(&mut PollWait::new(1, 3), &stop));
        let b = scope.spawn(|| second.follow(&mut PollWait::new(1, 3), &stop));
        write_mix(&db, &people, &notes, &plain, &mut counter, 160);
        wait_caught_up(&db, &server, "postgres");
        stop.store(true, Ordering::Release);
        (a.join().unwrap(), b.join().unwrap())
    });
    let (a, b) = (a.expect("first follower Ok"), b.expect("second follower Ok"));
    let entries = db.changes_since(start, 100_000).unwrap().len() as u64;
    assert_eq!(a.commits + b.commits, entries, "each commit applied once between them: {a:?} {b:?}");
    assert_rows_equal(&db, &server, "people");
    assert_rows_equal(&db, &server, "notes");
    assert_audit_exactly_once_in_order(&server);
}

/// Passes. Schema changes while following: a collection created (records in the commit that
/// creates it and after), a new field and new indexes on an existing collection (their columns
/// added and filled from the records already there), all picked up without a restart.
#[test]
fn schema_changes_while_following_are_picked_up() {
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, 100_000);
    let people = db.collection::<Person>().unwrap();
    db.write(|tx| (0..40).try_for_each(|id| people.insert(tx, &person(id, u64::from(id))).map(drop))).unwrap();
    let mut replicator = Replicator::start(&db, options(&server)).unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let follower = scope.spawn(|| replicator.follow(&mut PollWait::new(1, 5), &stop));
        db.write(|tx| (40..60).try_for_each(|id| people.upsert(tx, &person(id, 100 + u64::from(id))).map(drop))).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        // A new collection.
        let later = db.collection::<Later>().unwrap();
        db.write(|tx| {
            (0..30u16).try_for_each(|day| later.insert(tx, &Later { day, name: format!("d{day}"), done: day % 2 == 0, v: 1 }).map(drop))
        })
        .unwrap();
        // A new indexed field and a newly indexed field, written at once.
        drop(people);
        let people = db.collection::<PersonV2>().unwrap();
        db.write(|tx| {
            for id in 0..20 {
                let mut record = people.get(&*tx, &id)?.unwrap();
                record.email = Some(format!("{id}@example.com"));
                record.v += 1_000;
                people.upsert(tx, &record)?;
            }
            people.delete(tx, &55u32).map(drop)
        })
        .unwrap();
        db.write(|tx| later.upsert(tx, &Later { day: 3, name: "d3".into(), done: true, v: 2 }).map(drop)).unwrap();
        wait_caught_up(&db, &server, "postgres");
        stop.store(true, Ordering::Release);
        follower.join().unwrap().expect("the follower ends Ok");
    });
    assert_rows_equal(&db, &server, "people");
    assert_rows_equal(&db, &server, "later");
    assert_columns_follow_records(
        &server,
        "people",
        &[("id", "bigint"), ("name", "text"), ("age", "bigint"), ("v", "numeric"), ("email", "text")],
    );
    assert_columns_follow_records(&server, "later", &[("day", "bigint"), ("name", "text"), ("done", "boolean")]);
}

/// Passes. Feed retention that removes commits a follower has not read yet (the writer
/// outruns it: 3 commits kept): without `resync` the follower stops with `CursorExpired`, never
/// Ok with a gap; with `resync` it copies again and ends equal.
#[test]
fn retention_past_a_follower_is_cursor_expired_or_a_full_copy() {
    for resync in [false, true] {
        let server = server();
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir, 3);
        let people = db.collection::<Person>().unwrap();
        let notes = db.collection::<Note>().unwrap();
        let plain = db.keyspace("plain").unwrap();
        let mut counter = 0;
        write_mix(&db, &people, &notes, &plain, &mut counter, 8);
        let mut options = options(&server);
        options.resync = resync;
        options.batches_per_transaction = 2;
        let mut replicator = Replicator::start(&db, options).unwrap();
        let stop = AtomicBool::new(false);
        let result = std::thread::scope(|scope| {
            // Slow polling: the writer's burst passes the retention between two looks.
            let follower = scope.spawn(|| replicator.follow(&mut PollWait::new(300, 300), &stop));
            std::thread::sleep(Duration::from_millis(400));
            write_mix(&db, &people, &notes, &plain, &mut counter, 40);
            if resync {
                wait_caught_up(&db, &server, "postgres");
                stop.store(true, Ordering::Release);
            } else {
                let deadline = Instant::now() + Duration::from_secs(30);
                while !follower.is_finished() && pg_cursor(&server, "postgres").is_none_or(|cursor| cursor < newest_entry(&db)) {
                    assert!(Instant::now() < deadline, "the follower neither failed nor caught up");
                    std::thread::sleep(Duration::from_millis(20));
                }
                stop.store(true, Ordering::Release);
            }
            follower.join().unwrap()
        });
        eprintln!("resync {resync}: {result:?}");
        match result {
            Err(ReplicateError::CursorExpired { consumer, .. }) if !resync => assert_eq!(consumer, "postgres"),
            Ok(stats) => {
                if resync {
                    assert!(stats.copied > 0, "{stats:?}: the expired cursor was resynchronised");
                }
                assert_rows_equal(&db, &server, "people");
                assert_rows_equal(&db, &server, "notes");
            }
            Err(other) => panic!("resync {resync}: unexpected {other:?}"),
        }
    }
}
