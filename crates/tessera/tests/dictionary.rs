//! The dictionary: typed values, the cache, write-behind, flush, transactions, keys and
//! subscriptions.

use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;
use tessera::live::{Event, SubscriptionEnd};
use tessera::{Db, DictionaryOptions, Error, FeedEvent};

#[path = "fixtures/colliding_keys.rs"]
mod colliding_keys;
use colliding_keys::colliding_long_keys;

fn open(dir: &tempfile::TempDir) -> Db {
    Db::open(dir.path().join("dict.tessera")).unwrap()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Settings {
    theme: String,
    font_size: u16,
    recent: Vec<String>,
}

#[test]
fn typed_values_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let dict = db.dictionary().unwrap();
    dict.set("bool", &true).unwrap();
    dict.set("int", &-42i64).unwrap();
    dict.set("float", &1.5f64).unwrap();
    dict.set("string", "hello").unwrap();
    dict.set("bytes", &serde_bytes_like(b"\x00\x01")).unwrap();
    let settings = Settings { theme: "dark".into(), font_size: 14, recent: vec!["a".into()] };
    dict.set("settings", &settings).unwrap();
    assert_eq!(dict.get::<bool>("bool").unwrap(), Some(true));
    assert_eq!(dict.get::<i64>("int").unwrap(), Some(-42));
    assert_eq!(dict.get::<f64>("float").unwrap(), Some(1.5));
    assert_eq!(dict.get::<String>("string").unwrap().as_deref(), Some("hello"));
    assert_eq!(dict.get::<Settings>("settings").unwrap(), Some(settings));
    assert_eq!(dict.get::<u8>("missing").unwrap(), None);
    assert!(dict.contains("int").unwrap() && !dict.contains("missing").unwrap());
    // Raw binary-format values, read in place.
    let theme =
        dict.with_value("settings", |value| value.and_then(|v| v.get("theme")).and_then(|t| t.as_str().map(str::to_owned))).unwrap();
    assert_eq!(theme.as_deref(), Some("dark"));
    assert!(dict.with_value("bytes", |value| value.and_then(|v| v.as_bytes().map(<[u8]>::to_vec))).unwrap() == Some(b"\x00\x01".to_vec()));
    dict.remove("int").unwrap();
    assert_eq!(dict.get::<i64>("int").unwrap(), None);
}

fn serde_bytes_like(bytes: &[u8]) -> impl Serialize + '_ {
    struct Bytes<'a>(&'a [u8]);
    impl Serialize for Bytes<'_> {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.serialize_bytes(self.0)
        }
    }
    Bytes(bytes)
}

#[test]
fn a_value_read_as_another_type_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let dict = db.dictionary().unwrap();
    dict.set("count", &7u32).unwrap();
    match dict.get::<String>("count") {
        Err(Error::DictionaryValue { dictionary, key, message }) => {
            assert_eq!((dictionary.as_str(), key.as_str()), ("default", "count"));
            assert!(message.contains("invalid type"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    dict.set("settings", &vec![1, 2]).unwrap();
    assert!(matches!(dict.get::<Settings>("settings"), Err(Error::DictionaryValue { .. })));
}

#[test]
fn empty_and_very_long_keys_work_and_list_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let dict = db.dictionary().unwrap();
    let long_a = format!("{}a", "k".repeat(2000));
    let long_b = format!("{}b", "k".repeat(2000)); // shares a 2000-byte prefix with long_a
    for (key, value) in [("", 0u32), ("b", 2), ("a", 1), (long_a.as_str(), 3), (long_b.as_str(), 4)] {
        dict.set(key, &value).unwrap();
    }
    dict.flush().unwrap();
    drop(dict);
    drop(db);
    let db = open(&dir);
    let dict = db.dictionary().unwrap();
    assert_eq!(dict.get::<u32>("").unwrap(), Some(0));
    assert_eq!(dict.get::<u32>(&long_a).unwrap(), Some(3));
    assert_eq!(dict.get::<u32>(&long_b).unwrap(), Some(4));
    assert_eq!(dict.keys().unwrap(), vec!["".to_string(), "a".into(), "b".into(), long_a.clone(), long_b.clone()]);
    dict.remove(&long_a).unwrap();
    dict.flush().unwrap();
    drop(dict);
    drop(db);
    let db = open(&dir);
    let dict = db.dictionary().unwrap();
    assert_eq!(dict.get::<u32>(&long_a).unwrap(), None);
    assert_eq!(dict.get::<u32>(&long_b).unwrap(), Some(4));
}

#[test]
fn writes_are_behind_and_unchanged_writes_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let dict = db
        .dictionary_with("behind", DictionaryOptions { flush_interval: Duration::from_millis(200), ..DictionaryOptions::default() })
        .unwrap();
    let feed = db.subscribe().unwrap();
    for i in 0..100u32 {
        dict.set(&format!("k{i}"), &i).unwrap();
    }
    dict.set("k0", &0u32).unwrap(); // unchanged
    assert_eq!(dict.get::<u32>("k99").unwrap(), Some(99), "visible at once from the cache");
    assert!(feed.try_recv().is_none(), "not yet written: set never waits on disk");
    dict.flush().unwrap();
    let batch = match feed.recv_timeout(Duration::from_secs(5)) {
        Some(FeedEvent::Batch(batch)) => batch,
        other => panic!("{other:?}"),
    };
    assert_eq!(batch.changes.len(), 100, "one transaction for all pending writes");
    dict.set("k1", &1u32).unwrap(); // equal to what is stored: nothing to write
    dict.flush().unwrap();
    assert!(feed.recv_timeout(Duration::from_millis(300)).is_none());
}

#[test]
fn dropping_with_pending_writes_flushes_them_and_handles_share_a_cache() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = open(&dir);
        let first = db
            .dictionary_with("shared", DictionaryOptions { flush_interval: Duration::from_millis(60_000), ..DictionaryOptions::default() })
            .unwrap();
        let second = db.dictionary_with("shared", DictionaryOptions::default()).unwrap();
        first.set("k", &"v").unwrap();
        assert_eq!(second.get::<String>("k").unwrap().as_deref(), Some("v"));
    }
    let db = open(&dir);
    assert_eq!(db.dictionary_with("shared", DictionaryOptions::default()).unwrap().get::<String>("k").unwrap().as_deref(), Some("v"));
}

#[test]
fn a_bounded_cache_evicts_and_reloads() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let dict =
        db.dictionary_with("bounded", DictionaryOptions { entries_max: Some(64), shards: 4, ..DictionaryOptions::default() }).unwrap();
    for i in 0..1000u32 {
        dict.set(&i.to_string(), &i).unwrap();
    }
    dict.flush().unwrap();
    for i in (0..1000u32).rev() {
        assert_eq!(dict.get::<u32>(&i.to_string()).unwrap(), Some(i));
    }
    assert_eq!(dict.keys().unwrap().len(), 1000);
}

#[test]
fn clear_removes_stored_and_pending_values() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let dict = db.dictionary().unwrap();
    dict.set("stored", &1).unwrap();
    dict.flush().unwrap();
    dict.set("pending", &2).unwrap();
    dict.clear().unwrap();
    assert_eq!(dict.keys().unwrap(), Vec::<String>::new());
    assert_eq!(dict.get::<i32>("stored").unwrap(), None);
    dict.flush().unwrap();
    assert_eq!(dict.get::<i32>("pending").unwrap(), None);
}

#[test]
fn transactional_writes_commit_with_the_rest_and_supersede_pending_ones() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let dict = db.dictionary().unwrap();
    let audit = db.keyspace("audit").unwrap();
    let _ = db.write(|tx| -> tessera::Result<()> {
        tx.dictionary(&dict).set("balance", &100)?;
        tx.put(&audit, b"deposit", b"100")?;
        Err(Error::other("rolled back"))
    });
    assert_eq!(dict.get::<i32>("balance").unwrap(), None, "a rolled-back write never reaches the cache");
    dict.set("balance", &1).unwrap(); // pending, older than the transaction below
    db.write(|tx| {
        let mut balances = tx.dictionary(&dict);
        assert_eq!(balances.get::<i32>("balance")?, Some(1), "the transaction sees the pending value");
        balances.set("balance", &100)?;
        tx.put(&audit, b"deposit", b"100")
    })
    .unwrap();
    assert_eq!(dict.get::<i32>("balance").unwrap(), Some(100));
    dict.flush().unwrap();
    drop(dict);
    drop(db);
    let db = open(&dir);
    assert_eq!(db.dictionary().unwrap().get::<i32>("balance").unwrap(), Some(100), "the older pending write did not overwrite it");
}

#[test]
fn subscriptions_see_initial_updated_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let dict =
        db.dictionary_with("subs", DictionaryOptions { flush_interval: Duration::from_millis(5), ..DictionaryOptions::default() }).unwrap();
    dict.set("volume", &3u8).unwrap();
    let events = dict.subscribe::<u8>("volume").unwrap();
    let timeout = Duration::from_secs(5);
    assert_eq!(events.recv_timeout(timeout).and_then(Event::initial), Some(Some(3)));
    dict.set("other", &1u8).unwrap();
    dict.set("volume", &7u8).unwrap();
    assert_eq!(events.recv_timeout(timeout).and_then(Event::changed), Some(Some(7)));
    dict.remove("volume").unwrap();
    assert_eq!(events.recv_timeout(timeout).and_then(Event::changed), Some(None));
    // The subscription ends when the database closes: Closed, then nothing.
    drop((dict, db));
    assert!(matches!(events.recv_timeout(timeout), Some(Event::Closed(SubscriptionEnd::DatabaseClosed))));
    assert!(events.recv_timeout(timeout).is_none());
}

#[test]
fn a_subscribed_value_that_does_not_decode_ends_the_subscription_with_the_error() {
    // A stored value of another type used to be reported as an error event, after which the
    // stream went on; now the subscription ends with the error, naming dictionary and key.
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let dict = db.dictionary().unwrap();
    let counts = dict.subscribe::<u8>("count").unwrap();
    assert_eq!(counts.recv_timeout(Duration::from_secs(5)).and_then(Event::initial), Some(None));
    dict.set("count", &"not a number").unwrap();
    dict.flush().unwrap();
    match counts.recv_timeout(Duration::from_secs(5)) {
        Some(Event::Closed(SubscriptionEnd::Failed(error))) => {
            let text = error.to_string();
            assert!(text.contains("count"), "names the key: {text}");
        }
        other => panic!("expected Closed with the failure, got {:?}", other.map(|event| event.is_closed())),
    }
    assert!(counts.try_recv().is_none());
}

/// The child for `flush_makes_every_threads_writes_durable`: writes from four threads, flushes,
/// says so, and waits to be killed (so no drop-time flush can help).
#[test]
#[ignore = "run by flush_makes_every_threads_writes_durable as a child process"]
fn flush_child() {
    let path = std::env::var("TESSERA_DICT_CHILD_PATH").unwrap();
    let db = Db::open(&path).unwrap();
    let dict = db
        .dictionary_with("flush", DictionaryOptions { flush_interval: Duration::from_millis(600_000), ..DictionaryOptions::default() })
        .unwrap();
    std::thread::scope(|scope| {
        for thread in 0..4u32 {
            let dict = dict.clone();
            scope.spawn(move || {
                for i in 0..1000u32 {
                    dict.set(&format!("{thread}-{i}"), &i).unwrap();
                }
            });
        }
    });
    dict.flush().unwrap();
    println!("flushed");
    std::thread::sleep(Duration::from_secs(600));
}

#[test]
fn flush_makes_every_threads_writes_durable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flush.tessera");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["flush_child", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env("TESSERA_DICT_CHILD_PATH", &path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    // The test harness may print "test flush_child ... " on the same line.
    assert!(stdout.lines().map_while(Result::ok).any(|line| line.ends_with("flushed")));
    child.kill().unwrap();
    child.wait().unwrap();
    let db = Db::open(&path).unwrap();
    let dict = db.dictionary_with("flush", DictionaryOptions::default()).unwrap();
    assert_eq!(dict.keys().unwrap().len(), 4000);
    assert_eq!(dict.get::<u32>("3-999").unwrap(), Some(999));
}

/// Keys crafted to share the unkeyed hash that placed long keys up to storage format 4 all
/// work, through removals, overwrites and reuse. Since format 5 the file's keyed hash spreads
/// them over ranges of their own (`tests/keyed_hash.rs`); many keys in one range, which it
/// makes too rare to meet, are tested with a constant hash in `dictionary::keys`.
#[test]
fn long_keys_crafted_to_share_the_format_4_hash_all_work() {
    let keys = colliding_long_keys(300);
    assert_eq!(keys[0].len(), 520);
    assert!(keys[0].ends_with("collide!"));
    let hash = tessera_value::layout::key_hash_v1(keys[0].as_bytes());
    assert!(keys.iter().all(|key| tessera_value::layout::key_hash_v1(key.as_bytes()) == hash), "one format-4 hash");
    let dir = tempfile::tempdir().unwrap();
    {
        let db = open(&dir);
        let dict = db.dictionary().unwrap();
        for (i, key) in keys.iter().enumerate() {
            dict.set(key, &(i as u64)).unwrap();
        }
        dict.set("short", &1u8).unwrap();
        dict.close().unwrap();
    }
    let db = open(&dir);
    let dict = db.dictionary().unwrap();
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(dict.get::<u64>(key).unwrap(), Some(i as u64), "key {i}");
    }
    // Remove every third key, overwrite the rest, and add new ones.
    for (i, key) in keys.iter().enumerate() {
        if i % 3 == 0 {
            dict.remove(key).unwrap();
        } else {
            dict.set(key, &(i as u64 + 1000)).unwrap();
        }
    }
    let more = colliding_long_keys(320);
    for key in &more[300..] {
        dict.set(key, &7u64).unwrap();
    }
    dict.flush().unwrap();
    drop(dict);
    drop(db);
    let db = open(&dir);
    let dict = db.dictionary().unwrap();
    for (i, key) in keys.iter().enumerate() {
        let expected = (i % 3 != 0).then_some(i as u64 + 1000);
        assert_eq!(dict.get::<u64>(key).unwrap(), expected, "key {i}");
    }
    for key in &more[300..] {
        assert_eq!(dict.get::<u64>(key).unwrap(), Some(7));
    }
    assert_eq!(dict.keys().unwrap().len(), 200 + 20 + 1);
}

#[test]
fn threads_opening_one_dictionary_at_once_share_one_cache() {
    // The registry was read, then written, without a lock: two threads could each make a cache,
    // and a value set through one was invisible through the other until flushed.
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let threads = 8;
    let barrier = std::sync::Barrier::new(threads);
    std::thread::scope(|scope| {
        for i in 0..threads {
            let (db, barrier) = (&db, &barrier);
            scope.spawn(move || {
                barrier.wait();
                let options = DictionaryOptions { flush_interval: Duration::from_millis(60_000), ..DictionaryOptions::default() };
                let dict = db.dictionary_with("race", options).unwrap();
                dict.set(&format!("k{i}"), &(i as u64)).unwrap();
                barrier.wait();
                for other in 0..threads {
                    assert_eq!(dict.get::<u64>(&format!("k{other}")).unwrap(), Some(other as u64), "thread {i} sees k{other}");
                }
                barrier.wait();
            });
        }
    });
}

#[test]
fn a_failed_background_write_is_reported_by_the_next_set() {
    // The flusher stored its error where nothing read it: every `set` returned Ok while the
    // background writes failed.
    let dir = tempfile::tempdir().unwrap();
    let options = tessera::DbOptions { map_size_initial_bytes: 1 << 20, map_size_max_bytes: 1 << 20, ..tessera::DbOptions::default() };
    let db = Db::open_with(dir.path().join("small.tessera"), options).unwrap();
    let dict =
        db.dictionary_with("d", DictionaryOptions { flush_interval: Duration::from_millis(5), ..DictionaryOptions::default() }).unwrap();
    // Under the 1 MiB ceiling, so `set` takes it (a larger one is refused at `set`), but more
    // than the map has free beside what it holds.
    dict.set("too big", &vec![7u8; (1 << 20) - (16 << 10)]).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let reported = loop {
        match dict.set("small", &1u8) {
            Err(error) => break error,
            Ok(()) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(()) => panic!("the failed background write was never reported"),
        }
    };
    assert!(matches!(&reported, Error::WriteBehind { dictionary, .. } if dictionary == "d"), "{reported:?}");
    assert!(matches!(dict.flush(), Err(Error::MapFull { .. })), "flush reports its own failure");
    dict.remove("too big").unwrap_or_else(|error| assert!(matches!(error, Error::WriteBehind { .. })));
    dict.remove("too big").unwrap();
    dict.flush().unwrap();
    assert_eq!(dict.get::<u8>("small").unwrap(), Some(1));
    assert_eq!(dict.get::<Vec<u8>>("too big").unwrap(), None);
}

/// Stores `count` values of three types (and a long key, an escaped key and the empty key),
/// flushed, and reopens the database: every read then starts cold.
fn stored_mixed_values(dir: &tempfile::TempDir, count: u32) -> Db {
    {
        let db = open(dir);
        let dict = db.dictionary_with("bulk", DictionaryOptions::default()).unwrap();
        for i in 0..count {
            match i % 3 {
                0 => dict.set(&format!("int-{i}"), &i64::from(i)).unwrap(),
                1 => dict.set(&format!("text-{i}"), &format!("value {i}")).unwrap(),
                _ => dict.set(&format!("settings-{i}"), &Settings { theme: format!("t{i}"), font_size: i as u16, recent: vec![] }).unwrap(),
            }
        }
        dict.set(&"L".repeat(600), "long").unwrap();
        dict.set("nul\0inside", "escaped").unwrap();
        dict.set("", "empty").unwrap();
        dict.close().unwrap();
    }
    open(dir)
}

#[test]
fn a_cold_dictionary_read_in_bulk_loads_every_value_with_its_type() {
    let dir = tempfile::tempdir().unwrap();
    let db = stored_mixed_values(&dir, 3000);
    let dict = db.dictionary_with("bulk", DictionaryOptions::default()).unwrap();
    // Enough cold reads to load the rest in one scan, then every value, through both paths.
    for i in 0..3000u32 {
        match i % 3 {
            0 => assert_eq!(dict.get::<i64>(&format!("int-{i}")).unwrap(), Some(i64::from(i))),
            1 => assert_eq!(dict.get::<String>(&format!("text-{i}")).unwrap(), Some(format!("value {i}"))),
            _ => assert_eq!(dict.get::<Settings>(&format!("settings-{i}")).unwrap().unwrap().font_size, i as u16),
        }
    }
    assert_eq!(dict.get::<String>(&"L".repeat(600)).unwrap().as_deref(), Some("long"));
    assert_eq!(dict.get::<String>("nul\0inside").unwrap().as_deref(), Some("escaped"));
    assert_eq!(dict.get::<String>("").unwrap().as_deref(), Some("empty"));
    assert_eq!(dict.get::<i64>("never-stored").unwrap(), None);
    // Loaded in bulk or not, a value read as another type is a typed error.
    assert!(matches!(dict.get::<String>("int-2997"), Err(Error::DictionaryValue { .. })));
    assert!(matches!(dict.get::<i64>("text-2998"), Err(Error::DictionaryValue { .. })));
    assert_eq!(dict.keys().unwrap().len(), 3003);
}

#[test]
fn a_bulk_load_keeps_writes_made_before_it_and_sees_other_handles_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = stored_mixed_values(&dir, 3000);
    let dict = db
        .dictionary_with("bulk", DictionaryOptions { flush_interval: Duration::from_millis(60_000), ..DictionaryOptions::default() })
        .unwrap();
    let other = db.dictionary_with("bulk", DictionaryOptions::default()).unwrap();
    // Before any bulk load: a pending write, a pending removal, a transactional write and a
    // write through another handle, none of them flushed.
    dict.set("int-2997", &-1i64).unwrap();
    dict.remove("int-2994").unwrap();
    db.write(|tx| tx.dictionary(&other).set("text-2998", "from a transaction")).unwrap();
    other.set("new-key", &7u8).unwrap();
    // Enough cold reads (half the entries) to load the rest in one scan.
    for i in (0..3000u32).step_by(3) {
        if i != 2997 && i != 2994 {
            assert_eq!(dict.get::<i64>(&format!("int-{i}")).unwrap(), Some(i64::from(i)));
        }
    }
    for i in (1..2998u32).step_by(3) {
        assert_eq!(dict.get::<String>(&format!("text-{i}")).unwrap(), Some(format!("value {i}")));
    }
    assert_eq!(dict.get::<i64>("int-2997").unwrap(), Some(-1));
    assert_eq!(dict.get::<i64>("int-2994").unwrap(), None);
    assert_eq!(other.get::<String>("text-2998").unwrap().as_deref(), Some("from a transaction"));
    assert_eq!(dict.get::<u8>("new-key").unwrap(), Some(7));
    // Writes after the load, and clear, behave as before.
    other.set("later", &1u8).unwrap();
    assert_eq!(dict.get::<u8>("later").unwrap(), Some(1));
    dict.clear().unwrap();
    assert_eq!(dict.get::<i64>("int-0").unwrap(), None);
    dict.set("after-clear", &2u8).unwrap();
    dict.flush().unwrap();
    assert_eq!(dict.keys().unwrap(), vec!["after-clear".to_owned()]);
}

#[test]
fn a_bounded_cache_reads_a_cold_dictionary_key_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = stored_mixed_values(&dir, 3000);
    let dict = db.dictionary_with("bulk", DictionaryOptions { entries_max: Some(100), ..DictionaryOptions::default() }).unwrap();
    for i in (0..3000u32).step_by(3) {
        assert_eq!(dict.get::<i64>(&format!("int-{i}")).unwrap(), Some(i64::from(i)));
    }
    assert_eq!(dict.get::<i64>("never-stored").unwrap(), None);
}

#[test]
fn a_dictionary_dropped_inside_a_write_transaction_still_writes_its_pending_values() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    let ks = db.keyspace("other").unwrap();
    let dict =
        db.dictionary_with("late", DictionaryOptions { flush_interval: Duration::from_secs(600), ..DictionaryOptions::default() }).unwrap();
    dict.set("k", &7u32).unwrap();
    let mut holder = Some(dict);
    // The last handle goes inside a write closure: its final flush cannot take the writer lock
    // there (it used to fail with WouldDeadlock and lose the value, saying so on stderr only).
    db.write(|tx| {
        holder.take();
        tx.put(&ks, b"x", b"y")
    })
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let reopened = db.dictionary_with("late", DictionaryOptions::default()).unwrap();
        if reopened.get::<u32>("k").unwrap() == Some(7) {
            break;
        }
        drop(reopened);
        assert!(std::time::Instant::now() < deadline, "the pending value was never written");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_read_closure_may_use_the_dictionary_and_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    let ks = db.keyspace("other").unwrap();
    let dict = db.dictionary_with("reentrant", DictionaryOptions { shards: 1, ..DictionaryOptions::default() }).unwrap();
    dict.set("a", &1u32).unwrap();
    // With one shard, every key shares the lock `with_value` used to hold while its closure ran:
    // these calls deadlocked.
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = {
        let (dict, db, ks) = (dict.clone(), db.clone(), ks.clone());
        std::thread::spawn(move || {
            let copied = dict
                .with_value("a", |value| {
                    let n = value.and_then(|v| v.as_i64()).unwrap();
                    dict.set("b", &(n + 1)).unwrap();
                    db.write(|tx| tx.put(&ks, b"seen", &n.to_be_bytes())).unwrap();
                    dict.get::<i64>("b").unwrap()
                })
                .unwrap();
            tx.send(copied).unwrap();
        })
    };
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).expect("the closure finished"), Some(2));
    worker.join().unwrap();
}

#[test]
fn a_flush_inside_a_write_transaction_is_refused_while_the_flusher_saves() {
    // A save holds the dictionary's save lock from taking the pending values until it has
    // written them or marked them pending again (a flush that ran beside a failing background
    // save returned Ok with nothing written). A flush inside a write transaction must be
    // refused before it waits for that lock, which the flusher may hold while it waits for
    // this thread's write lock.
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let dict =
        db.dictionary_with("d", DictionaryOptions { flush_interval: Duration::from_millis(1), ..DictionaryOptions::default() }).unwrap();
    let mut refused = 0;
    for round in 0..50u32 {
        dict.set("k", &round).unwrap();
        let inside = db.write(|_| Ok(dict.flush()));
        match inside {
            Ok(Err(Error::WouldDeadlock { .. })) => refused += 1,
            // The flusher saved the value first: nothing to save, only the sync (this test
            // asserted a refusal every time, and failed when the 1 ms flusher won the race).
            Ok(Ok(())) => {}
            other => panic!("{other:?}"),
        }
        dict.flush().unwrap();
    }
    assert!(refused > 0, "no flush inside a write found a value to save");
    assert_eq!(dict.get::<u32>("k").unwrap(), Some(49));
}

/// A dictionary dropped and opened again at once, by name, reads its last write, while its
/// flusher (every millisecond) may hold the state for the moment of a save: the last handle's
/// drop writes the pending values on the dropping thread, where the state's own drop, with its
/// final save, could run on the flusher thread after the handle's drop returned (CI's
/// `dictionary_model` once read a reopened dictionary without its last write; this loop did
/// not reproduce it on demand, and guards the path).
#[test]
fn a_dictionary_reopened_at_once_reads_its_last_write() {
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dict.tessera");
    let options = || tessera::DictionaryOptions { shards: 2, entries_max: Some(3), flush_interval: Duration::from_millis(1) };
    let mut stale = Vec::new();
    for round in 0u32..1500 {
        let db = tessera::Db::open(&path).unwrap();
        let dict = db.dictionary_with("model", options()).unwrap();
        for k in 0..4u32 {
            dict.set(&format!("key{k}"), &round).unwrap();
        }
        std::thread::sleep(Duration::from_micros(u64::from(round % 15) * 100));
        dict.set(&format!("{}\0", "k".repeat(2000)), &round).unwrap();
        drop(dict);
        drop(db);
        let db = tessera::Db::open(&path).unwrap();
        let dict = db.dictionary_with("model", options()).unwrap();
        let got = dict.get::<u32>(&format!("{}\0", "k".repeat(2000))).unwrap();
        if got != Some(round) {
            stale.push(format!("round {round}: {got:?}"));
        }
    }
    assert!(stale.is_empty(), "{} reopened without their last write: {:?}", stale.len(), &stale[..stale.len().min(3)]);
}
