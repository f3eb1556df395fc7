//! Replication into a real PostgreSQL server that each test starts itself (initdb + pg_ctl in
//! a temporary directory; a test that cannot start one fails). The replica must equal tessera:
//! per table, the same row count and the same hash of every stored key and canonical record.

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tessera::collection::Record;
use tessera::store::{Durability, FeedRetention};
use tessera::{Collection, Db, DbOptions};
use tessera_postgres::{ReplicateError, Replicator, ReplicatorOptions, TempPostgres, postgres_digest, tessera_digest};

#[derive(Debug, Clone, Serialize, Deserialize, Record)]
#[record(name = "people")]
struct Person {
    #[record(key)]
    id: u64,
    #[record(index)]
    name: String,
    #[record(index)]
    age: u32,
    score: f64,
    tags: Vec<String>,
    nick: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, Record)]
#[record(name = "notes")]
struct Note {
    #[record(key)]
    title: String,
    #[record(index)]
    stars: Option<i32>,
    body: String,
}

fn person(id: u64, round: u64) -> Person {
    Person {
        id,
        name: format!("person {id}"),
        age: ((id * 7 + round) % 90) as u32,
        score: id as f64 / 8.0 + round as f64,
        tags: (0..id % 3).map(|tag| format!("t{tag}")).collect(),
        nick: id.is_multiple_of(2).then(|| format!("n{round}")),
    }
}

fn open(dir: &tempfile::TempDir, retention: u64) -> Db {
    let options = DbOptions {
        durable_feed: true,
        feed_retention: FeedRetention { commits_max: retention, ..FeedRetention::default() },
        durability: Durability::Immediate,
        ..DbOptions::default()
    };
    Db::open_with(dir.path().join("db"), options).expect("open the database")
}

fn server() -> TempPostgres {
    TempPostgres::start().expect("start a PostgreSQL server for the test (initdb and pg_ctl must be installed)")
}

fn client(server: &TempPostgres) -> postgres::Client {
    postgres::Client::connect(&server.url(), postgres::NoTls).expect("connect to the test server")
}

fn options(server: &TempPostgres) -> ReplicatorOptions {
    let mut options = ReplicatorOptions::new(&server.url());
    options.batches_per_transaction = 7;
    options.retry.delay_initial_ms = 20;
    options.retry.delay_max_ms = 200;
    options
}

fn assert_equal(db: &Db, server: &TempPostgres, tables: &[&str]) {
    let mut client = client(server);
    for table in tables {
        let source = tessera_digest(db, table).unwrap();
        let replica = postgres_digest(&mut client, table).unwrap();
        assert_eq!(replica, source, "table {table}: PostgreSQL differs from tessera");
    }
}

/// Writes a mix of inserts, updates and deletes in `commits` commits.
fn churn(db: &Db, people: &Collection<Person>, notes: &Collection<Note>, round: u64, commits: u64) {
    for commit in 0..commits {
        db.write(|tx| {
            let base = (round * 31 + commit * 13) % 200;
            for id in base..base + 10 {
                people.upsert(tx, &person(id, round + commit))?;
            }
            people.delete(tx, &((base + 97) % 200))?;
            let title = format!("note {}", (round + commit) % 17);
            notes.upsert(
                tx,
                &Note { title, stars: (!commit.is_multiple_of(3)).then_some(commit as i32), body: format!("r{round}c{commit}") },
            )?;
            if commit % 4 == 3 {
                notes.delete(tx, &format!("note {}", (round + commit + 5) % 17))?;
            }
            Ok(())
        })
        .unwrap();
    }
}

#[test]
fn inserts_updates_and_deletes_equal_tessera_with_typed_columns() {
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, 100_000);
    let people = db.collection::<Person>().unwrap();
    let notes = db.collection::<Note>().unwrap();
    db.write(|tx| (0..150).try_for_each(|id| people.insert(tx, &person(id, 0)).map(drop))).unwrap();
    let mut replicator = Replicator::start(&db, options(&server)).unwrap();
    assert_eq!(replicator.stats().copied, 150, "the first run copies every record");
    assert_equal(&db, &server, &["people", "notes"]);
    churn(&db, &people, &notes, 1, 40);
    let stats = replicator.catch_up().unwrap();
    assert_eq!(stats.commits, 40);
    assert!(stats.transactions >= 6, "{stats:?}: at most 7 commits a transaction");
    assert!(stats.deletes > 0 && stats.upserts > 0);
    assert_equal(&db, &server, &["people", "notes"]);

    // Typed columns: the u64 key as numeric, the indexed u32 as bigint, strings as text, NULL for None.
    let mut client = client(&server);
    let row = client.query_one("SELECT id::text, age::text, name, record->>'score' FROM people WHERE id = 3", &[]).unwrap();
    let expected = people.get(&db, &3u64).unwrap().unwrap();
    assert_eq!(row.get::<_, String>(0), "3");
    assert_eq!(row.get::<_, String>(1), expected.age.to_string());
    assert_eq!(row.get::<_, String>(2), expected.name);
    let types: Vec<(String, String)> = client
        .query("SELECT column_name::text, data_type::text FROM information_schema.columns WHERE table_name = 'notes' ORDER BY ordinal_position", &[])
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    let types: Vec<(&str, &str)> = types.iter().map(|(name, ty)| (name.as_str(), ty.as_str())).collect();
    assert_eq!(types, [("tessera_key", "bytea"), ("title", "text"), ("stars", "bigint"), ("record", "jsonb")]);
    let people_types: Vec<String> = client
        .query("SELECT data_type::text FROM information_schema.columns WHERE table_name = 'people' AND column_name IN ('id', 'age') ORDER BY column_name", &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(people_types, ["bigint", "numeric"], "age (u32) as bigint, id (u64) as numeric");
    let nulls: i64 = client.query_one("SELECT count(*) FROM notes WHERE stars IS NULL", &[]).unwrap().get(0);
    let expected_nulls = notes.all().fetch(&db).unwrap().iter().filter(|note| note.stars.is_none()).count();
    assert_eq!(nulls as usize, expected_nulls);
    // The consumer in tessera follows PostgreSQL's cursor (for retention), one commit behind
    // it so that the feed keeps the entry whose digest a later start checks.
    assert_eq!(db.consumer("postgres").unwrap().cursor().unwrap(), replicator.cursor() - 1);
}

#[test]
fn a_restarted_replicator_resumes_from_the_postgres_cursor() {
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, 100_000);
    let people = db.collection::<Person>().unwrap();
    let notes = db.collection::<Note>().unwrap();
    churn(&db, &people, &notes, 0, 10);
    let first = Replicator::start(&db, options(&server)).unwrap();
    let cursor = first.cursor();
    drop(first);
    churn(&db, &people, &notes, 1, 15);
    let mut second = Replicator::start(&db, options(&server)).unwrap();
    assert_eq!((second.cursor(), second.stats().copied), (cursor, 0), "resumes, no second copy");
    assert_eq!(second.catch_up().unwrap().commits, 15);
    assert_equal(&db, &server, &["people", "notes"]);
    // A replica that is up to date applies nothing.
    let mut third = Replicator::start(&db, options(&server)).unwrap();
    assert_eq!(third.catch_up().unwrap().commits, 0);
}

#[test]
fn a_table_of_another_shape_is_refused_naming_the_column() {
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, 100_000);
    db.collection::<Person>().unwrap();
    client(&server)
        .batch_execute("CREATE TABLE people (tessera_key bytea PRIMARY KEY, id numeric NOT NULL, name integer, record jsonb NOT NULL)")
        .unwrap();
    match Replicator::start(&db, options(&server)) {
        Err(ReplicateError::TableShape { table, column, found, .. }) => {
            assert_eq!((&*table, &*column, &*found), ("people", "name", "integer"))
        }
        other => panic!("expected a TableShape error, got {other:?}"),
    }
    client(&server).batch_execute("DROP TABLE people; CREATE TABLE people (id numeric, record jsonb)").unwrap();
    match Replicator::start(&db, options(&server)) {
        Err(ReplicateError::TableShape { column, found, .. }) => assert_eq!((&*column, &*found), ("tessera_key", "missing")),
        other => panic!("expected a TableShape error, got {other:?}"),
    }
    // An existing table of the right shape, without the indexed columns: they are added.
    client(&server)
        .batch_execute("DROP TABLE people; CREATE TABLE people (tessera_key bytea PRIMARY KEY, id bigint NOT NULL, record jsonb NOT NULL)")
        .unwrap();
    Replicator::start(&db, options(&server)).unwrap();
    let added: i64 = client(&server)
        .query_one("SELECT count(*) FROM information_schema.columns WHERE table_name = 'people' AND column_name IN ('name', 'age')", &[])
        .unwrap()
        .get(0);
    assert_eq!(added, 2);
}

#[test]
fn a_postgres_restart_mid_run_is_retried_and_ends_equal() {
    let mut server = server();
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, 100_000);
    let people = db.collection::<Person>().unwrap();
    let notes = db.collection::<Note>().unwrap();
    churn(&db, &people, &notes, 0, 5);
    let mut replicator = Replicator::start(&db, options(&server)).unwrap();
    churn(&db, &people, &notes, 1, 30);
    server.stop().unwrap();
    let stop = AtomicBool::new(false);
    let stats = std::thread::scope(|scope| {
        let follower = scope.spawn(|| replicator.follow(&mut tessera_postgres::PollWait::default(), &stop));
        std::thread::sleep(Duration::from_millis(400));
        churn(&db, &people, &notes, 2, 10);
        server.start_again().unwrap();
        // Until the follower has caught up with every commit.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        // tessera's consumer is acknowledged one commit behind the replica's cursor.
        let replica_cursor = || db.consumer("postgres").unwrap().cursor().unwrap() + 1;
        while !db.changes_since(replica_cursor(), 1).unwrap().is_empty() {
            assert!(std::time::Instant::now() < deadline, "the replicator did not catch up after the restart");
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, Ordering::Release);
        follower.join().unwrap().unwrap()
    });
    assert!(stats.retries > 0, "{stats:?}: the stopped server was retried");
    assert_eq!(stats.commits, 40);
    assert_equal(&db, &server, &["people", "notes"]);
}

#[test]
fn a_database_older_than_the_replica_is_its_error_and_resync_copies_again() {
    // The file is put back from an older copy (here: another file with fewer commits): the
    // replica's cursor is past its newest commit. Before, reading from there returned nothing
    // new until the file's commits passed the cursor, and those up to it were never applied.
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, 100_000);
    let (people, notes) = (db.collection::<Person>().unwrap(), db.collection::<Note>().unwrap());
    churn(&db, &people, &notes, 0, 10);
    Replicator::start(&db, options(&server)).unwrap().catch_up().unwrap();
    let older_dir = tempfile::tempdir().unwrap();
    let older = open(&older_dir, 100_000);
    let (people, notes) = (older.collection::<Person>().unwrap(), older.collection::<Note>().unwrap());
    churn(&older, &people, &notes, 3, 1);
    match Replicator::start(&older, options(&server)).unwrap().catch_up() {
        Err(ReplicateError::CursorAhead { consumer, cursor, newest }) => {
            assert_eq!(consumer, "postgres");
            assert!(cursor > newest, "cursor {cursor}, newest {newest}");
        }
        other => panic!("expected CursorAhead, got {other:?}"),
    }
    let mut options = options(&server);
    options.resync = true;
    let mut replicator = Replicator::start(&older, options).unwrap();
    replicator.catch_up().unwrap();
    assert!(replicator.stats().copied > 0);
    assert_equal(&older, &server, &["people", "notes"]);
}

#[test]
fn a_file_put_back_from_an_older_copy_and_written_since_is_its_error_and_resync_copies_again() {
    // The file is replaced by a copy from before the replica's cursor, then written past it:
    // its new commits take the numbers of the lost ones. Before, the replicator resumed after
    // its cursor and silently skipped the file's own commits up to it.
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, 100_000);
    let (people, notes) = (db.collection::<Person>().unwrap(), db.collection::<Note>().unwrap());
    churn(&db, &people, &notes, 0, 3);
    let copy_dir = tempfile::tempdir().unwrap();
    db.copy_compacted(&copy_dir.path().join("db")).unwrap();
    churn(&db, &people, &notes, 1, 10);
    let mut replicator = Replicator::start(&db, options(&server)).unwrap();
    replicator.catch_up().unwrap();
    let cursor = replicator.cursor();
    drop((replicator, people, notes, db));
    let restored = open(&copy_dir, 100_000);
    let (people, notes) = (restored.collection::<Person>().unwrap(), restored.collection::<Note>().unwrap());
    let mut round = 100;
    while restored.read_txn().unwrap().sequence() < cursor + 2 {
        churn(&restored, &people, &notes, round, 1);
        round += 1;
    }
    match Replicator::start(&restored, options(&server)).map(drop) {
        Err(ReplicateError::HistoryDiverged { consumer, cursor: at }) => assert_eq!((consumer.as_str(), at), ("postgres", cursor)),
        other => panic!("expected HistoryDiverged, got {other:?}"),
    }
    let mut resync = options(&server);
    resync.resync = true;
    let mut replicator = Replicator::start(&restored, resync).unwrap();
    replicator.catch_up().unwrap();
    assert!(replicator.stats().copied > 0);
    assert_equal(&restored, &server, &["people", "notes"]);
    // Resumed on the same file, the digest matches: no second copy.
    drop(replicator);
    churn(&restored, &people, &notes, round, 2);
    let mut replicator = Replicator::start(&restored, options(&server)).unwrap();
    replicator.catch_up().unwrap();
    assert_eq!(replicator.stats().copied, 0);
    assert_equal(&restored, &server, &["people", "notes"]);
}

#[test]
fn an_expired_cursor_is_its_error_and_resync_copies_again() {
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, 5);
    let people = db.collection::<Person>().unwrap();
    let notes = db.collection::<Note>().unwrap();
    churn(&db, &people, &notes, 0, 3);
    drop(Replicator::start(&db, options(&server)).unwrap());
    // Another consumer's acknowledgement trims what ours has not read, and retention keeps 5.
    db.consumer("postgres").unwrap().remove().unwrap();
    churn(&db, &people, &notes, 1, 20);
    let mut replicator = Replicator::start(&db, options(&server)).unwrap();
    match replicator.catch_up() {
        Err(ReplicateError::CursorExpired { consumer, .. }) => assert_eq!(consumer, "postgres"),
        other => panic!("expected CursorExpired, got {other:?}"),
    }
    let mut options = options(&server);
    options.resync = true;
    let mut replicator = Replicator::start(&db, options).unwrap();
    replicator.catch_up().unwrap();
    assert!(replicator.stats().copied > 0);
    assert_equal(&db, &server, &["people", "notes"]);
}

#[test]
fn only_the_collections_asked_for_are_replicated() {
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, 100_000);
    let people = db.collection::<Person>().unwrap();
    let notes = db.collection::<Note>().unwrap();
    churn(&db, &people, &notes, 0, 4);
    let mut options = options(&server);
    options.collections = Some(vec!["notes".into()]);
    let mut replicator = Replicator::start(&db, options.clone()).unwrap();
    churn(&db, &people, &notes, 1, 4);
    replicator.catch_up().unwrap();
    assert_equal(&db, &server, &["notes"]);
    let tables: i64 =
        client(&server).query_one("SELECT count(*) FROM information_schema.tables WHERE table_name = 'people'", &[]).unwrap().get(0);
    assert_eq!(tables, 0);
    options.collections = Some(vec!["missing".into()]);
    assert!(matches!(Replicator::start(&db, options), Err(ReplicateError::NoSuchCollection { .. })));
}

/// `Person` a version later: a new optional field, indexed, and `score` indexed too.
#[derive(Debug, Clone, Serialize, Deserialize, Record)]
#[record(name = "people", version = 2)]
struct PersonV2 {
    #[record(key)]
    id: u64,
    #[record(index)]
    name: String,
    #[record(index)]
    age: u32,
    #[record(index)]
    score: f64,
    tags: Vec<String>,
    nick: Option<String>,
    #[record(index)]
    email: Option<String>,
}

#[test]
fn a_newly_indexed_field_gets_its_column_and_new_fields_go_in_the_record() {
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, 100_000);
    let people = db.collection::<Person>().unwrap();
    // One more than a statement's rows: the first copy takes two statements.
    let count = tessera_postgres::ROWS_PER_STATEMENT_MAX as u64 + 1;
    db.write(|tx| (0..count).try_for_each(|id| people.insert(tx, &person(id, 0)).map(drop))).unwrap();
    let mut replicator = Replicator::start(&db, options(&server)).unwrap();
    assert_eq!(replicator.stats().copied, count);
    drop(people);
    let people = db.collection::<PersonV2>().unwrap();
    db.write(|tx| {
        let mut first = people.get(&*tx, &1u64)?.unwrap();
        first.email = Some("ada@example.com".into());
        people.upsert(tx, &first).map(drop)
    })
    .unwrap();
    replicator.catch_up().unwrap();
    let mut client = client(&server);
    let row = client.query_one("SELECT score, email, record->>'email' FROM people WHERE id = 1", &[]).unwrap();
    assert_eq!(row.get::<_, f64>(0), person(1, 0).score, "the new column is filled from the records already there");
    assert_eq!(row.get::<_, Option<String>>(1).as_deref(), Some("ada@example.com"));
    assert_eq!(row.get::<_, Option<String>>(2).as_deref(), Some("ada@example.com"));
    let scores: i64 = client.query_one("SELECT count(score) FROM people", &[]).unwrap().get(0);
    assert_eq!(scores as u64, count);
    assert_equal(&db, &server, &["people"]);
}
