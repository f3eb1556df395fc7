//! A tour of tessera, run with `cargo run --release --example tour`.
//!
//! It opens (or creates) the database `tour.tessera`, or the path given as the first argument,
//! and shows each capability that has landed so far: the zero-copy binary format, the storage
//! core (transactions, durability, the change feed and its durable form, order-preserving
//! keys), field-decomposed documents, the dictionary, typed collections, live queries, and the
//! same collections read and written without their Rust type.

use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};
use tessera::collection::{Embed, Order, Record};
use tessera::live::Event;
use tessera::store::key;
use tessera::value::{DictKey, Doc, MutableDoc, SharedKeys, from_json, from_value, to_vec, to_vec_with_keys};
use tessera::{Db, DbOptions, Durability, FeedEvent};

#[derive(Debug, Serialize, Deserialize)]
struct Person<'a> {
    name: &'a str,
    age: u8,
    #[serde(borrow)]
    tags: Vec<&'a str>,
    friends: Vec<Friend<'a>>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Profile {
    name: String,
    rank: String,
    age: u32,
}

#[derive(Debug, Serialize, Deserialize)]
struct Friend<'a> {
    id: u32,
    name: &'a str,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "tour.tessera".into());
    tour(&path)
}

/// The tour, on the database at `path` (the `tessera` command's tests run it to make their
/// database).
pub fn tour(path: &str) -> Result<(), Box<dyn std::error::Error>> {
    println!("tessera tour — database file: {path}\n");
    // The durable change feed is on for this file (section 18): every commit also appends its
    // changes to the file, for consumers in other processes and after restarts.
    let db = Db::open_with(path, DbOptions { durable_feed: true, ..DbOptions::default() })?;
    let people_space = db.keyspace("people")?;
    let feed = db.subscribe()?;

    // 1. JSON in: one pass, no intermediate tree; strings and keys are de-duplicated.
    let json = br#"[
        {"name": "Ada Lovelace", "age": 36, "tags": ["math", "poetry"], "friends": [{"id": 1, "name": "Charles Babbage"}]},
        {"name": "Charles Babbage", "age": 79, "tags": ["math", "engines"], "friends": [{"id": 0, "name": "Ada Lovelace"}]},
        {"name": "Grace Hopper", "age": 85, "tags": ["compilers", "math"], "friends": []}
    ]"#;
    let bytes = from_json(json)?;
    let minified = minified_len(json);
    println!(
        "1. JSON -> binary: {minified} bytes of minified JSON became {} bytes ({:.0} %)",
        bytes.len(),
        100.0 * bytes.len() as f64 / minified as f64
    );
    // Stored in the database in one transaction, under an order-preserving key.
    db.write(|tx| tx.put(&people_space, &key::encode(&("all", 1u32)), &bytes))?;

    // 2. Read it back. Untrusted bytes are validated once, in linear time; after that every
    //    accessor is infallible. Bytes you wrote yourself open in O(1).
    let stored = db.read(|tx| Ok(tx.get(&people_space, &key::encode(&("all", 1u32)))?.map(<[u8]>::to_vec)))?.expect("just written");
    let in_place = db.read(|tx| {
        // Zero-copy straight from LMDB's pages: no copy out of the snapshot.
        let page_bytes = tx.get(&people_space, &key::encode(&("all", 1u32)))?.expect("just written");
        Ok(Doc::from_trusted(page_bytes)?.root().path("[0].name").ok().flatten().and_then(|v| v.as_str()).map(str::to_owned))
    })?;
    println!("   read in place from the database page: [0].name = {in_place:?}");
    let start = Instant::now();
    let doc = Doc::from_untrusted(&stored)?;
    println!("2. validated {} bytes in {:?}", stored.len(), start.elapsed());
    let root = doc.root();

    // 3. Zero-copy reads: O(1) array index, hashed key lookup, key paths, pre-resolved keys.
    println!("3. [1].name = {}", root.index(1).and_then(|p| p.get("name")).and_then(|v| v.as_str()).unwrap_or("?"));
    println!("   path friends: [0].friends[0].name = {:?}", root.path("[0].friends[0].name")?.and_then(|v| v.as_str()));
    let age = DictKey::new("age");
    let ages: Vec<i64> = root.as_array().unwrap().iter().filter_map(|p| p.as_dict()?.get_key(&age)?.as_i64()).collect();
    println!("   ages with a pre-resolved key: {ages:?}");

    // 4. serde: decode into structs that borrow their strings from the file's bytes.
    let people: Vec<Person> = from_value(root)?;
    println!(
        "4. decoded {} people; {:?} borrows from the document: {}",
        people.len(),
        people[2].name,
        stored.as_ptr_range().contains(&people[2].name.as_ptr())
    );
    let encoded = to_vec(&people)?;
    println!("   and encoded them again with serde: {} bytes", encoded.len());

    // 5. Shared keys: a collection keeps one table, and records store 1-byte key ids.
    let mut keys = SharedKeys::new();
    for key in ["name", "age", "tags", "friends", "id"] {
        keys.add(key)?;
    }
    let compact = to_vec_with_keys(&people[0], &keys)?;
    println!("5. one record: {} bytes with shared keys, {} without", compact.len(), to_vec(&people[0])?.len());

    // 6. Edit: copy-on-write, then re-encode or amend (append only what changed).
    let mut edit = MutableDoc::new(doc);
    edit.root_mut().path_mut("[2]")?.set("age", 86i64)?;
    let fresh = edit.encode()?;
    let amended = edit.amend()?;
    println!("6. edited [2].age: re-encoded {} bytes; amend appended {} bytes to the original", fresh.len(), amended.len() - stored.len());
    let reread = Doc::from_untrusted(&amended)?;
    println!("   amended document says [2].age = {:?}", reread.root().path("[2].age")?.and_then(|v| v.as_i64()));

    // 7. JSON out: compact, pretty, canonical.
    println!("7. canonical [2]: {}", reread.root().index(2).unwrap().to_json_canonical());

    // 8. Bad input gets a typed error and never a panic.
    let error = from_json(b"{\"a\": [1, 2,]}").unwrap_err();
    println!("8. malformed JSON: {error}");
    let mut corrupt = stored.clone();
    corrupt[stored.len() / 2] ^= 0xFF;
    match Doc::from_untrusted(&corrupt) {
        Err(error) => println!("   corrupt document: {error}"),
        Ok(_) => println!("   corrupt document: this flip happened to leave a valid document"),
    }

    // 9. Transactions span keyspaces and roll back on error; durability is per transaction.
    let counters = db.keyspace("counters")?;
    let visits = |db: &Db| db.read(|tx| Ok(tx.get(&counters, b"visits")?.map(|v| u64::from_be_bytes(v.try_into().unwrap_or([0; 8])))));
    let before = visits(&db)?;
    let failed: tessera::Result<()> = db.write(|tx| {
        tx.put(&counters, b"visits", &999u64.to_be_bytes())?;
        tx.put(&people_space, b"half-written", b"x")?;
        Err(tessera::Error::other("changed my mind"))
    });
    println!("9. a failed two-keyspace transaction rolls back: error = {}, visits {before:?} -> {:?}", failed.is_err(), visits(&db)?);
    let start = Instant::now();
    for visit in 1..=100u64 {
        db.write_with(Durability::BUFFERED, |tx| tx.put(&counters, b"visits", &visit.to_be_bytes()))?;
    }
    let buffered = start.elapsed() / 100;
    let start = Instant::now();
    db.write_with(Durability::Immediate, |tx| tx.put(&counters, b"visits", &101u64.to_be_bytes()))?;
    println!("   buffered commit {buffered:?} each; immediate (fsync) commit {:?}", start.elapsed());
    // Many threads committing durably: `write_grouped` runs their closures in one transaction
    // with one flush, and gives each caller its own outcome.
    let start = Instant::now();
    let sequences = std::thread::scope(|scope| {
        let writers: Vec<_> = (0..4u8)
            .map(|thread| {
                let (db, counters) = (db.clone(), counters.clone());
                scope.spawn(move || {
                    (0..25u8)
                        .map(|n| {
                            let counters = counters.clone();
                            db.write_grouped(move |tx| {
                                tx.put(&counters, &[b'w', thread, n], b"paid")?;
                                Ok(tx.sequence())
                            })
                        })
                        .collect::<tessera::Result<Vec<u64>>>()
                })
            })
            .collect();
        writers.into_iter().map(|writer| writer.join().expect("a writer thread")).collect::<tessera::Result<Vec<_>>>()
    })?;
    let commits: std::collections::HashSet<u64> = sequences.into_iter().flatten().collect();
    println!("   4 threads x 25 durable grouped writes: {} LMDB commits in {:?}", commits.len(), start.elapsed());

    // 10. The change feed: one batch per commit, in order, after the commit.
    let mut batches = 0;
    while let Some(event) = feed.recv_timeout(Duration::from_millis(200)) {
        if let FeedEvent::Batch(batch) = event {
            batches += 1;
            if batches == 1 {
                let change = &batch.changes[0];
                println!(
                    "10. change feed: commit {} {:?} in {:?} ({} bytes)",
                    batch.sequence,
                    change.kind,
                    change.keyspace,
                    change.new.as_ref().map_or(0, |v| v.len())
                );
            }
        }
    }
    println!("    {batches} batches in all: one per commit that changed something (a rewrite with equal bytes changes nothing)");

    // 11. Keys that sort like values, for composite keys and ranges.
    let mut scores = vec![key::encode(&(-3i64, "c")), key::encode(&(10i64, "a")), key::encode(&(-3i64, "b"))];
    scores.sort();
    println!(
        "11. order-preserving keys: (-3, b) < (-3, c) < (10, a): {}",
        scores == vec![key::encode(&(-3i64, "b")), key::encode(&(-3i64, "c")), key::encode(&(10i64, "a"))]
    );

    // 12. Field-decomposed documents: one key per field, atomic set, single-field writes,
    //     and observation through the same change bus, with the one subscription shape:
    //     Initial, then Changed per commit, then Closed.
    let profiles = db.documents("profiles")?;
    let grace = profiles.document::<Profile>("grace");
    let changes = grace.observe()?;
    println!("12. observed at first: {:?}", changes.recv_timeout(Duration::from_secs(1)).and_then(Event::initial));
    grace.set(&Profile { name: "Grace Hopper".into(), rank: "Commodore".into(), age: 79 })?;
    grace.update_field("rank", "Rear Admiral")?; // one key, no read
    let age = grace.field::<u32>("age");
    age.set(&85)?;
    println!("    document: {:?}", grace.get()?);
    for _ in 0..3 {
        if let Some(Event::Changed(Some(seen))) = changes.recv_timeout(Duration::from_secs(1)) {
            println!("    observed: {} / {} / {}", seen.name, seen.rank, seen.age);
        }
    }
    println!("    ids starting with \"gr\": {:?}", profiles.ids_with_prefix("gr")?);

    // 13. The dictionary: typed values from a sharded cache, written behind, transactional.
    let settings = db.dictionary()?;
    settings.set("theme", "dark")?; // returns at once
    settings.set("font size", &14u16)?;
    println!("13. dictionary: theme = {:?}, font size = {:?}", settings.get::<String>("theme")?, settings.get::<u16>("font size")?);
    println!("    reading \"theme\" as a number is an error, not None: {}", settings.get::<u16>("theme").is_err());
    db.write(|tx| {
        tx.dictionary(&settings).set("last visit", &101u64)?; // commits with the rest
        tx.put(&counters, b"visits", &102u64.to_be_bytes())
    })?;
    settings.flush()?; // durable, from every thread
    println!("    keys: {:?}", settings.keys()?);

    // 14. Typed collections: a derive, a primary key, indexes, typed queries with SQL's
    //     three-valued logic, a planner that says what it does, and write outcomes.
    let tasks = db.collection::<Task>()?;
    db.write(|tx| {
        for (id, title, priority, due) in
            [(1, "write docs", 3, Some(5)), (2, "fix bug", 9, None), (3, "review", 5, Some(2)), (4, "ship", 7, Some(9))]
        {
            tasks.upsert(tx, &Task { id, title: title.into(), priority, due, state: State::Open })?;
        }
        Ok(())
    })?;
    let urgent = tasks.filter(Task::priority().ge(5).and(Task::due().lt(9))).order_by(Task::priority(), Order::Desc);
    let titles: Vec<String> = urgent.fetch(&db)?.into_iter().map(|t| t.title).collect();
    println!("14. collection: priority >= 5 and due < 9 -> {titles:?} (the task with no due date is UNKNOWN, not TRUE)");
    println!("    plan: {}", urgent.explain()?);
    let outcome = db.write(|tx| tasks.update(tx, &4u32, |t| t.state = State::Done { note: "shipped".into() }))?;
    println!(
        "    update -> {outcome:?}; again with the same value -> {:?}",
        db.write(|tx| tasks.upsert(tx, &tasks.get(tx, &4u32)?.expect("stored")))?
    );
    let done = tasks.filter_text("state is Done")?.count(&db)?;
    println!(
        "    text query \"state is Done\" -> {done}; \"priority > \\\"x\\\"\" -> {}",
        tasks.filter_text("priority > \"x\"").unwrap_err()
    );
    {
        // Zero-copy: a view of a stored record borrows from the file for as long as its
        // transaction lives; the generated accessor reads one field and decodes nothing else.
        let tx = db.read_txn()?;
        let task = tasks.get_ref(&tx, &2u32)?.expect("stored");
        let top = tasks.all().order_by(Task::priority(), Order::Desc).limit(2);
        let top_titles: Vec<&str> = top.refs(&tx)?.map(|t| t?.title()).collect::<tessera::Result<_>>()?;
        println!(
            "    view of task 2: title {:?} (a &str into the map); top 2 by priority: {top_titles:?} ({})",
            task.title()?,
            top.explain()?
        );
    }

    // 15. Live queries: the current result, then one changeset per commit that changes it,
    //     computed from the commit's changes without re-running the query.
    let live = tasks.subscribe_query(&tasks.all().order_by(Task::priority(), Order::Desc).limit(3))?;
    let first = live.recv_timeout(Duration::from_secs(5)).and_then(Event::initial).expect("the initial result");
    println!("15. live top 3 by priority: {:?}", first.iter().map(|t| t.id).collect::<Vec<_>>());
    let committed = Instant::now();
    db.write(|tx| tasks.patch(tx, &1u32, "priority", &10))?;
    let change = live.recv_timeout(Duration::from_secs(5)).and_then(Event::changed).expect("a changeset");
    println!(
        "    task 1 -> priority 10: {:?}, deletions {:?}, insertions {:?}, moves {:?}, {} µs after the write began (fsync included)",
        change.result.iter().map(|t| t.id).collect::<Vec<_>>(),
        change.deletions,
        change.insertions,
        change.moves,
        committed.elapsed().as_micros()
    );
    // 16. Dynamic collections: the same records without their Rust type, from the schema and
    //     shared-key table stored in the file, as JSON; every write is checked against the
    //     stored schema (with each integer field's width) before anything is written.
    let dynamic = db.dyn_collection("tasks")?;
    let top: Vec<String> =
        dynamic.filter_text("priority >= 5 order by priority desc limit 2")?.fetch(&db)?.iter().map(|task| task.to_json()).collect();
    println!("16. dynamic \"priority >= 5 order by priority desc limit 2\": {top:?}");
    let refused = db.write(|tx| dynamic.insert_json(tx, br#"{"id": 5, "title": "t", "priority": 3000000000, "state": "Open"}"#));
    println!("    a priority out of i32's range: {}", refused.unwrap_err());

    // 17. The durable change feed: each commit's changes kept in the file, read by named
    //     consumers from their own cursor, after restarts and from other processes.
    let mailer = db.consumer("tour-mailer")?;
    // (A rerun of the tour on the same file changes the value again, so that it commits.)
    let priority = if tasks.get(&db, &2u32)?.is_some_and(|task| task.priority == 8) { 9 } else { 8 };
    db.write(|tx| tasks.patch(tx, &2u32, "priority", &priority))?;
    // Read everything since the consumer's cursor, a bounded number of commits at a time.
    let (mut cursor, mut commits, mut last_keyspaces) = (mailer.cursor()?, 0, Vec::new());
    loop {
        let batches = db.changes_since(cursor, 256)?;
        let Some(last) = batches.last() else { break };
        commits += batches.len();
        cursor = last.sequence;
        last_keyspaces = last.changes.iter().map(|change| change.keyspace.to_string()).collect();
    }
    println!("17. durable feed: {commits} commit(s) since the consumer's cursor; the last (commit {cursor}) changed {last_keyspaces:?}");
    mailer.ack(cursor)?;
    println!("    consumer {:?} acknowledged through {}", mailer.name(), mailer.cursor()?);

    // 18. An integrity check: every value's checksum (every read checks it too), key order and
    //     lookups through each B-tree, then every record, index entry, shared-key table and
    //     dictionary entry verified; damage is reported, never a panic.
    print!("18. check: {}", db.check()?);
    Ok(())
}

#[derive(Debug, Serialize, Deserialize, Record)]
#[record(name = "tasks", version = 1)]
struct Task {
    #[record(key)]
    id: u32,
    title: String,
    #[record(index)]
    priority: i32,
    due: Option<u32>,
    state: State,
}

#[derive(Debug, Serialize, Deserialize, Embed)]
enum State {
    Open,
    Done { note: String },
}

/// Length of `json` without insignificant whitespace.
fn minified_len(json: &[u8]) -> usize {
    let doc_bytes = from_json(json).expect("valid JSON");
    Doc::from_trusted(&doc_bytes).expect("encoder output").root().to_json().len()
}
