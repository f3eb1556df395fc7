//! The dictionary against a model and under concurrency: read-your-writes against a
//! `HashMap`, keys near the long-key boundary, typed errors, transactions, the bounded cache
//! during a save, `keys()` during a save, and subscriptions (each change once, in order).

use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;
use tessera::live::Event;
use tessera::{Db, Dictionary, DictionaryOptions, Error};

fn open(dir: &tempfile::TempDir) -> Db {
    Db::open(dir.path().join("dict.tessera")).unwrap()
}

fn options(shards: usize, entries_max: Option<usize>, flush_ms: u64) -> DictionaryOptions {
    DictionaryOptions { shards, entries_max, flush_interval: Duration::from_millis(flush_ms) }
}

/// Keys around every edge of the key scheme: empty, prefixes of each other, NUL bytes (escaped:
/// two bytes each in the encoding), non-ASCII, and lengths on both sides of the 480-byte
/// encoded limit beyond which a key is hashed.
fn key_pool() -> Vec<String> {
    let k = |n: usize| "k".repeat(n);
    vec![
        String::new(),
        "a".into(),
        "a\0".into(),
        "a\0b".into(),
        "ab".into(),
        "\u{e9}".into(),
        "e\u{301}".into(),
        "\u{65e5}\u{672c}".into(),
        "\u{1F600}".into(),
        k(477),
        k(478), // encoded 480: the longest direct key
        k(479), // encoded 481: the shortest long key
        format!("{}a", k(478)),
        format!("{}b", k(478)),
        k(2000),
        format!("{}a", k(2000)),
        format!("{}\0", k(2000)),
        "\0".repeat(239), // encoded 480: direct
        "\0".repeat(240), // encoded 482: long, though only 240 bytes
        "\u{e9}".repeat(300),
        format!("{}x", "\u{e9}".repeat(300)),
    ]
}

#[derive(Debug, Clone, PartialEq)]
enum Val {
    U(u32),
    S(String),
    B(bool),
    L(Vec<u16>),
}

fn set_val(dict: &Dictionary, key: &str, value: &Val) -> tessera::Result<()> {
    match value {
        Val::U(v) => dict.set(key, v),
        Val::S(v) => dict.set(key, v),
        Val::B(v) => dict.set(key, v),
        Val::L(v) => dict.set(key, v),
    }
}

/// Reads `key` as the type the model holds, and checks that other types are typed errors.
fn check_key(dict: &Dictionary, key: &str, expected: Option<&Val>, context: &str) {
    let short = |k: &str| format!("{:?}", k.chars().take(12).collect::<String>()) + &format!("(len {})", k.len());
    match expected {
        None => {
            assert_eq!(dict.get::<u32>(key).unwrap(), None, "{context}: key {} should be absent", short(key));
            assert!(!dict.contains(key).unwrap(), "{context}: contains {}", short(key));
        }
        Some(Val::U(v)) => {
            assert_eq!(dict.get::<u32>(key).unwrap(), Some(*v), "{context}: key {}", short(key));
            assert!(matches!(dict.get::<String>(key), Err(Error::DictionaryValue { .. })), "{context}: u32 read as String");
            assert!(matches!(dict.get::<bool>(key), Err(Error::DictionaryValue { .. })), "{context}: u32 read as bool");
        }
        Some(Val::S(v)) => {
            assert_eq!(dict.get::<String>(key).unwrap().as_ref(), Some(v), "{context}: key {}", short(key));
            assert!(matches!(dict.get::<u32>(key), Err(Error::DictionaryValue { .. })), "{context}: String read as u32");
            assert!(matches!(dict.get::<Vec<u16>>(key), Err(Error::DictionaryValue { .. })), "{context}: String read as Vec");
        }
        Some(Val::B(v)) => {
            assert_eq!(dict.get::<bool>(key).unwrap(), Some(*v), "{context}: key {}", short(key));
            assert!(matches!(dict.get::<u32>(key), Err(Error::DictionaryValue { .. })), "{context}: bool read as u32");
        }
        Some(Val::L(v)) => {
            assert_eq!(dict.get::<Vec<u16>>(key).unwrap().as_ref(), Some(v), "{context}: key {}", short(key));
            assert!(matches!(dict.get::<String>(key), Err(Error::DictionaryValue { .. })), "{context}: Vec read as String");
            assert!(matches!(dict.get::<u32>(key), Err(Error::DictionaryValue { .. })), "{context}: Vec read as u32");
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Set(usize, Val),
    Remove(usize),
    TxnSet(usize, Val),
    TxnRemove(usize),
    Get(usize),
    Flush,
    Reopen,
    Clear,
    Keys,
}

fn val_strategy() -> impl Strategy<Value = Val> {
    prop_oneof![
        (0u32..4).prop_map(Val::U),
        "[a-c]{0,3}".prop_map(Val::S),
        any::<bool>().prop_map(Val::B),
        proptest::collection::vec(0u16..3, 0..3).prop_map(Val::L),
    ]
}

fn op_strategy(keys: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..keys, val_strategy()).prop_map(|(k, v)| Op::Set(k, v)),
        3 => (0..keys).prop_map(Op::Remove),
        2 => (0..keys, val_strategy()).prop_map(|(k, v)| Op::TxnSet(k, v)),
        1 => (0..keys).prop_map(Op::TxnRemove),
        4 => (0..keys).prop_map(Op::Get),
        2 => Just(Op::Flush),
        1 => Just(Op::Reopen),
        1 => Just(Op::Clear),
        1 => Just(Op::Keys),
    ]
}

/// Runs `ops` against the dictionary and a `HashMap` model, comparing every read and, at
/// `Op::Keys`, `keys()`.
fn run_model(ops: &[Op], shards: usize, entries_max: Option<usize>, flush_ms: u64) {
    let pool = key_pool();
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(&dir);
    let mut dict = db.dictionary_with("model", options(shards, entries_max, flush_ms)).unwrap();
    let mut model: HashMap<String, Val> = HashMap::new();
    for (step, op) in ops.iter().enumerate() {
        let context = format!("step {step} ({op:?})");
        match op {
            Op::Set(k, v) => {
                set_val(&dict, &pool[*k], v).unwrap();
                model.insert(pool[*k].clone(), v.clone());
            }
            Op::Remove(k) => {
                dict.remove(&pool[*k]).unwrap();
                model.remove(&pool[*k]);
            }
            Op::TxnSet(k, v) => {
                let key = &pool[*k];
                db.write(|tx| {
                    let mut d = tx.dictionary(&dict);
                    match v {
                        Val::U(x) => d.set(key, x),
                        Val::S(x) => d.set(key, x),
                        Val::B(x) => d.set(key, x),
                        Val::L(x) => d.set(key, x),
                    }
                })
                .unwrap();
                model.insert(key.clone(), v.clone());
            }
            Op::TxnRemove(k) => {
                db.write(|tx| tx.dictionary(&dict).remove(&pool[*k])).unwrap();
                model.remove(&pool[*k]);
            }
            Op::Get(k) => check_key(&dict, &pool[*k], model.get(&pool[*k]), &context),
            Op::Flush => dict.flush().unwrap(),
            Op::Reopen => {
                drop(dict);
                drop(db);
                db = open(&dir);
                dict = db.dictionary_with("model", options(shards, entries_max, flush_ms)).unwrap();
            }
            Op::Clear => {
                dict.clear().unwrap();
                model.clear();
            }
            Op::Keys => {
                let expected: BTreeSet<String> = model.keys().cloned().collect();
                let listed: BTreeSet<String> = dict.keys().unwrap().into_iter().collect();
                let short = |k: &String| format!("{:?}(len {})", k.chars().take(8).collect::<String>(), k.len());
                let missing: Vec<String> = expected.difference(&listed).map(short).collect();
                let extra: Vec<String> = listed.difference(&expected).map(short).collect();
                assert!(missing.is_empty() && extra.is_empty(), "{context}: keys() missing {missing:?}, extra {extra:?}");
            }
        }
    }
    // Everything, then again after a reopen.
    for key in &pool {
        check_key(&dict, key, model.get(key), "end");
    }
    drop(dict);
    drop(db);
    let db = open(&dir);
    let dict = db.dictionary_with("model", options(shards, entries_max, flush_ms)).unwrap();
    for key in &pool {
        check_key(&dict, key, model.get(key), "after reopen");
    }
    let expected: BTreeSet<String> = model.keys().cloned().collect();
    let listed: BTreeSet<String> = dict.keys().unwrap().into_iter().collect();
    assert!(listed == expected, "keys after reopen: {} listed, {} expected", listed.len(), expected.len());
    assert!(db.check().unwrap().is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    /// No background flush: only `flush`, drop and reopen write.
    #[test]
    fn dictionary_matches_a_hashmap_model(
        ops in proptest::collection::vec(op_strategy(21), 1..60),
        shards in 1usize..4,
        bounded in proptest::option::of(1usize..6),
    ) {
        run_model(&ops, shards, bounded, 3_600_000);
    }

    /// The flusher runs every millisecond beside the operations; an unbounded cache.
    #[test]
    fn dictionary_matches_a_hashmap_model_with_a_running_flusher(
        ops in proptest::collection::vec(op_strategy(21), 1..60),
        shards in 1usize..4,
    ) {
        run_model(&ops, shards, None, 1);
    }

    /// The flusher runs every millisecond beside the operations; a bounded cache.
    #[test]
    fn dictionary_matches_a_hashmap_model_with_a_running_flusher_and_a_bounded_cache(
        ops in proptest::collection::vec(op_strategy(21), 1..60),
        shards in 1usize..4,
        bounded in 1usize..6,
    ) {
        run_model(&ops, shards, Some(bounded), 1);
    }
}

/// A transaction reads its own uncommitted write of a key, even when the cache holds an older
/// pending (not yet flushed) write of that key.
#[test]
fn a_transaction_reads_its_own_write_over_an_older_pending_value() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let dict = db.dictionary_with("txn", options(4, None, 3_600_000)).unwrap();
    dict.set("k", &1u32).unwrap(); // pending in the cache
    let seen = db
        .write(|tx| {
            let mut d = tx.dictionary(&dict);
            d.set("k", &2u32)?;
            d.get::<u32>("k")
        })
        .unwrap();
    assert_eq!(seen, Some(2), "DictTxn::get after DictTxn::set in the same transaction");
    assert_eq!(dict.get::<u32>("k").unwrap(), Some(2));

    dict.set("r", &1u32).unwrap();
    let seen = db
        .write(|tx| {
            let mut d = tx.dictionary(&dict);
            d.remove("r")?;
            d.get::<u32>("r")
        })
        .unwrap();
    assert_eq!(seen, None, "DictTxn::get after DictTxn::remove in the same transaction");
}

/// The same without any pending value: the transaction's own writes are visible (passes; the
/// baseline for the test above).
#[test]
fn a_transaction_reads_its_own_writes_of_flushed_keys() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let dict = db.dictionary().unwrap();
    dict.set("k", &1u32).unwrap();
    dict.flush().unwrap();
    let seen = db
        .write(|tx| {
            let mut d = tx.dictionary(&dict);
            d.set("k", &2u32)?;
            let after_set = d.get::<u32>("k")?;
            d.remove("k")?;
            Ok((after_set, d.get::<u32>("k")?))
        })
        .unwrap();
    assert_eq!(seen, (Some(2), None));
}

fn key_of(i: u32) -> String {
    format!("k{i:05}")
}

/// With a bounded cache, a key this thread set must read back while another thread flushes
/// (read-your-writes), and after the flush it must read the stored value.
#[test]
fn a_bounded_cache_serves_this_threads_write_while_a_flush_runs() {
    const N: u32 = 20_000;
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let dict = db.dictionary_with("bounded", options(1, Some(16), 3_600_000)).unwrap();
    for i in 0..N {
        dict.set(&key_of(i), &0u32).unwrap();
    }
    dict.flush().unwrap();
    let mut stale_during: Vec<(u32, Option<u32>)> = Vec::new();
    let mut stale_after: Vec<(u32, Option<u32>)> = Vec::new();
    for round in 1..=5u32 {
        for i in 0..N {
            dict.set(&key_of(i), &round).unwrap();
        }
        let other = dict.clone();
        let flusher = std::thread::spawn(move || other.flush());
        let mut seen_stale = Vec::new();
        let mut i = 0u32;
        while !flusher.is_finished() {
            let k = i % N;
            let read = dict.get::<u32>(&key_of(k)).unwrap();
            if read != Some(round) {
                seen_stale.push((k, read));
            }
            i = i.wrapping_add(7919);
        }
        flusher.join().unwrap().unwrap();
        // Right after the flush, before other reads evict them: the keys read stale above.
        for &(k, _) in seen_stale.iter().rev().take(8) {
            let read = dict.get::<u32>(&key_of(k)).unwrap();
            if read != Some(round) {
                stale_after.push((k, read));
            }
        }
        stale_during.extend(seen_stale);
    }
    assert!(
        stale_during.is_empty() && stale_after.is_empty(),
        "{} reads during flushes returned an older value than this thread set (first: {:?}); {} still stale after the flush returned (first: {:?})",
        stale_during.len(),
        stale_during.first(),
        stale_after.len(),
        stale_after.first()
    );
}

/// Consequence of the stale entry above: a write of the value the stale cache holds is skipped
/// as "unchanged" and never stored. A one-entry cache and a running flusher: a new key is set,
/// and read until a read returns the stale "absent"; the key is then removed (Ok), flushed, and
/// must be absent after a reopen.
#[test]
fn a_bounded_cache_with_a_running_flusher_reads_its_writes_and_stores_the_last_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut expected: BTreeMap<String, Option<u32>> = BTreeMap::new();
    {
        let db = open(&dir);
        let dict = db.dictionary_with("one", options(1, Some(1), 1)).unwrap();
        for n in 0..1_000u32 {
            let key = format!("k{n}");
            dict.set(&key, &1u32).unwrap();
            // Other pending keys: over the bound (so a save evicts), and a save long enough
            // for reads to land inside it. Before the fix, a read inside a save missed the
            // evicted entry and cached storage's older answer.
            for i in 0..200u32 {
                dict.set(&format!("noise{i}"), &n).unwrap();
            }
            for _ in 0..1_000 {
                assert_eq!(dict.get::<u32>(&key).unwrap(), Some(1), "{key} read back right after it was set");
            }
            // A remove of the value read back must be stored too (a stale cache skipped it as
            // "unchanged").
            if n % 2 == 0 {
                dict.remove(&key).unwrap();
                assert_eq!(dict.get::<u32>(&key).unwrap(), None);
                expected.insert(key, None);
            } else {
                expected.insert(key, Some(1));
            }
        }
        dict.flush().unwrap();
    }
    let db = open(&dir);
    let dict = db.dictionary_with("one", options(1, Some(1), 1)).unwrap();
    let wrong: Vec<(&String, Option<u32>)> = expected
        .iter()
        .map(|(key, want)| (key, want, dict.get::<u32>(key).unwrap()))
        .filter(|(_, want, stored)| stored != *want)
        .map(|(key, _, stored)| (key, stored))
        .collect();
    assert!(wrong.is_empty(), "after a reopen, {} of {} keys hold another value: {:?}", wrong.len(), expected.len(), wrong);
}

/// `keys()` while the background flusher runs: every key set (and not removed) before the call
/// is listed, and no key removed before the call is.
#[test]
fn keys_is_exact_while_the_flusher_runs() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let dict = db.dictionary_with("keys", options(8, None, 1)).unwrap();
    let mut model: BTreeSet<String> = BTreeSet::new();
    let mut failures = Vec::new();
    for round in 0..40u32 {
        // New keys, and the previous round's removed.
        let previous: Vec<String> = model.iter().cloned().collect();
        for key in previous {
            dict.remove(&key).unwrap();
            model.remove(&key);
        }
        for i in 0..3_000u32 {
            let key = format!("r{round:03}-{i:05}");
            dict.set(&key, &i).unwrap();
            model.insert(key);
        }
        for _ in 0..3 {
            let listed: BTreeSet<String> = dict.keys().unwrap().into_iter().collect();
            if listed != model {
                let missing = model.difference(&listed).count();
                let extra = listed.difference(&model).count();
                failures.push(format!("round {round}: {missing} set keys missing, {extra} removed keys listed"));
            }
        }
    }
    assert!(failures.is_empty(), "{} of 120 keys() calls were wrong: {:?}", failures.len(), &failures[..failures.len().min(5)]);
}

/// Threads set disjoint keys (and read each back at once), then the dictionary is reopened and
/// compared with the union of their models.
#[test]
fn concurrent_sets_survive_a_reopen() {
    // The bounded cache last: it fails with the stale reads of the tests above.
    for (label, opts) in [("unbounded", options(4, None, 1)), ("one shard", options(1, None, 50)), ("bounded", options(2, Some(8), 1))] {
        let dir = tempfile::tempdir().unwrap();
        let models: Vec<HashMap<String, u64>> = {
            let db = open(&dir);
            let dict = db.dictionary_with("threads", opts.clone()).unwrap();
            let models = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..4u64)
                    .map(|t| {
                        let dict = dict.clone();
                        scope.spawn(move || {
                            let mut rng = fastrand::Rng::with_seed(t);
                            let mut model = HashMap::new();
                            let mut errors = Vec::new();
                            for n in 0..5_000u64 {
                                let key = match rng.u8(0..4) {
                                    0 => format!("t{t}-{}", "L".repeat(500 + rng.usize(0..3))),
                                    _ => format!("t{t}-{}", rng.u32(0..300)),
                                };
                                if rng.u8(0..5) == 0 {
                                    dict.remove(&key).unwrap();
                                    model.remove(&key);
                                    if dict.get::<u64>(&key).unwrap().is_some() {
                                        errors.push(format!("{key:.12}: removed, still read"));
                                    }
                                } else {
                                    dict.set(&key, &n).unwrap();
                                    model.insert(key.clone(), n);
                                    let read = dict.get::<u64>(&key).unwrap();
                                    if read != Some(n) {
                                        errors.push(format!("{key:.12}: set {n}, read {read:?}"));
                                    }
                                }
                            }
                            (model, errors)
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
            });
            let errors: Vec<&String> = models.iter().flat_map(|(_, e)| e).collect();
            assert!(errors.is_empty(), "{label}: {} read-your-writes failures: {:?}", errors.len(), &errors[..errors.len().min(5)]);
            models.into_iter().map(|(m, _)| m).collect()
        };
        let db = open(&dir);
        let dict = db.dictionary_with("threads", opts).unwrap();
        let mut expected: BTreeMap<String, u64> = BTreeMap::new();
        for model in models {
            expected.extend(model);
        }
        for (key, value) in &expected {
            assert_eq!(dict.get::<u64>(key).unwrap(), Some(*value), "{label}: {key:.12}");
        }
        assert_eq!(dict.keys().unwrap(), expected.keys().cloned().collect::<Vec<_>>(), "{label}: keys after reopen");
    }
}

/// A subscription sees the initial value, then each stored change of its key exactly once, in
/// order: nothing for other keys (prefixes, NUL-extended, long keys sharing a prefix) and
/// nothing for a write that changes nothing.
#[test]
fn a_subscription_sees_each_change_of_its_key_once_in_order() {
    let long = "s".repeat(600);
    let keys = ["k".to_string(), long.clone()];
    for key in &keys {
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir);
        let dict = db.dictionary_with("subs", options(4, None, 3_600_000)).unwrap();
        let noise = [format!("{key}\0"), format!("{key}x"), key[..key.len() - 1].to_string(), format!("{key}{}", "y".repeat(600))];
        let events = dict.subscribe::<u32>(key).unwrap();
        let timeout = Duration::from_secs(5);
        assert_eq!(events.recv_timeout(timeout).and_then(Event::initial), Some(None));
        let mut rng = fastrand::Rng::with_seed(7);
        let mut stored: Option<u32> = None;
        let mut expected: Vec<Option<u32>> = Vec::new();
        for _ in 0..200 {
            match rng.u8(0..6) {
                0 => {
                    dict.remove(key).unwrap();
                    if stored.is_some() {
                        expected.push(None);
                    }
                    stored = None;
                }
                1 => {
                    let n = &noise[rng.usize(0..noise.len())];
                    dict.set(n, &rng.u32(0..3)).unwrap();
                }
                2 => {
                    let n = &noise[rng.usize(0..noise.len())];
                    dict.remove(n).unwrap();
                }
                _ => {
                    let v = rng.u32(0..3);
                    dict.set(key, &v).unwrap();
                    if stored != Some(v) {
                        expected.push(Some(v));
                    }
                    stored = Some(v);
                }
            }
            dict.flush().unwrap();
        }
        let mut received = Vec::new();
        while let Some(event) = events.recv_timeout(Duration::from_millis(300)) {
            match event {
                Event::Changed(value) => received.push(value),
                other => panic!("unexpected event {:?}", other.is_closed()),
            }
        }
        assert_eq!(received.len(), expected.len(), "key len {}: event count", key.len());
        assert_eq!(received, expected, "key len {}", key.len());
    }
}

/// Removing a key that was never stored changes nothing: a subscriber gets no event.
#[test]
fn removing_an_absent_key_sends_no_event() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let dict = db.dictionary().unwrap();
    for key in ["absent".to_string(), "z".repeat(700)] {
        let events = dict.subscribe::<u32>(&key).unwrap();
        assert_eq!(events.recv_timeout(Duration::from_secs(5)).and_then(Event::initial), Some(None));
        dict.remove(&key).unwrap();
        dict.flush().unwrap();
        let extra = events.recv_timeout(Duration::from_millis(300));
        assert!(extra.is_none(), "len {}: an event for a removal that changed nothing: {:?}", key.len(), extra.map(|e| e.changed()));
    }
}

/// A subscription made while a write of its key is pending: Initial shows the pending value;
/// the flush of that same value must not be reported again as a change.
#[test]
fn a_subscription_made_over_a_pending_write_reports_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let dict = db.dictionary_with("pending", options(4, None, 3_600_000)).unwrap();
    dict.set("k", &1u32).unwrap(); // pending
    let events = dict.subscribe::<u32>("k").unwrap();
    assert_eq!(events.recv_timeout(Duration::from_secs(5)).and_then(Event::initial), Some(Some(1)));
    dict.flush().unwrap();
    let next = events.recv_timeout(Duration::from_millis(300)).map(|e| e.changed());
    assert_eq!(next, None, "the flush of the value Initial already showed was reported again");
}

/// Values of the wrong width or sign are typed errors, never truncated (passes).
#[test]
fn numbers_out_of_range_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let dict = db.dictionary().unwrap();
    dict.set("neg", &-1i64).unwrap();
    dict.set("big", &(u64::MAX)).unwrap();
    dict.set("wide", &300u32).unwrap();
    dict.set("float", &1.5f64).unwrap();
    dict.set("huge", &1e300f64).unwrap();
    assert!(matches!(dict.get::<u64>("neg"), Err(Error::DictionaryValue { .. })));
    assert!(matches!(dict.get::<i64>("big"), Err(Error::DictionaryValue { .. })));
    assert!(matches!(dict.get::<u8>("wide"), Err(Error::DictionaryValue { .. })));
    assert!(matches!(dict.get::<i64>("float"), Err(Error::DictionaryValue { .. })));
    assert!(matches!(dict.get::<f32>("huge"), Err(Error::DictionaryValue { .. })));
    assert_eq!(dict.get::<u64>("big").unwrap(), Some(u64::MAX));
    dict.flush().unwrap();
    drop(dict);
    drop(db);
    let db = open(&dir);
    let dict = db.dictionary().unwrap();
    assert!(matches!(dict.get::<u8>("wide"), Err(Error::DictionaryValue { .. })));
    assert_eq!(dict.get::<i64>("neg").unwrap(), Some(-1));
}

/// Many keys in one shard, a cold reopen, and a bulk load over a mix of direct and long keys;
/// then every key read as its type (passes).
#[test]
fn many_keys_in_one_shard_read_back_cold_and_after_a_bulk_load() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = BTreeMap::new();
    {
        let db = open(&dir);
        let dict = db.dictionary_with("one", options(1, None, 3_600_000)).unwrap();
        for i in 0..3_000u32 {
            let key = if i % 10 == 0 { format!("{}{i}", "L".repeat(490)) } else { format!("{i}\0{i}") };
            dict.set(&key, &i).unwrap();
            model.insert(key, i);
        }
        for i in (0..3_000u32).step_by(7) {
            let key = if i % 10 == 0 { format!("{}{i}", "L".repeat(490)) } else { format!("{i}\0{i}") };
            dict.remove(&key).unwrap();
            model.remove(&key);
        }
        // dropped with everything pending: the drop flushes
    }
    let db = open(&dir);
    let dict = db.dictionary_with("one", options(1, None, 3_600_000)).unwrap();
    for i in 0..3_000u32 {
        let key = if i % 10 == 0 { format!("{}{i}", "L".repeat(490)) } else { format!("{i}\0{i}") };
        assert_eq!(dict.get::<u32>(&key).unwrap(), model.get(&key).copied(), "{key:.12}");
    }
    assert_eq!(dict.keys().unwrap(), model.keys().cloned().collect::<Vec<_>>());
}
