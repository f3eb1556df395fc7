//! Every set of dict keys encodes: real key sets that the version-1 hash piled into one home
//! slot, random and structured sets up to 100,000 keys, and sets crafted to collide under the
//! version-2 hash, which take the sorted key index.

use proptest::prelude::*;
use std::collections::{BTreeSet, HashMap};
use tessera_value::layout::{KEY_INDEX_GROWTH_MAX, KeyIndexKind, key_hash, key_index_slots};
use tessera_value::{Doc, from_json, from_slice, to_vec};

/// A JSON object mapping each key to its position, as text.
fn object_json(keys: &[String]) -> String {
    let entries: serde_json::Map<String, serde_json::Value> =
        keys.iter().enumerate().map(|(i, key)| (key.clone(), serde_json::Value::from(i))).collect();
    serde_json::Value::Object(entries).to_string()
}

/// Encodes `keys` as one object, validates it, looks every key up (and one absent key), and
/// checks that it converts back to the same JSON.
fn check_key_set(keys: &[String]) -> Doc<'static> {
    let json = object_json(keys);
    let bytes: &'static [u8] =
        Box::leak(from_json(json.as_bytes()).unwrap_or_else(|e| panic!("{} keys refused: {e}", keys.len())).into_boxed_slice());
    let doc = Doc::from_untrusted(bytes).expect("the encoder's output validates");
    let root = doc.root();
    assert_eq!(root.len(), keys.len());
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(root.get(key).and_then(|v| v.as_u64()), Some(i as u64), "key {key:?} of {}", keys.len());
    }
    let absent = format!("{}-absent", keys.last().map_or("", |k| k.as_str()));
    if !keys.contains(&absent) {
        assert!(root.get(&absent).is_none());
    }
    let trusted = Doc::from_trusted(bytes).unwrap();
    if let Some(key) = keys.first() {
        assert_eq!(trusted.root().get(key).and_then(|v| v.as_u64()), Some(0));
    }
    let back: serde_json::Value = serde_json::from_str(&root.to_json()).unwrap();
    assert_eq!(back, serde_json::from_str::<serde_json::Value>(&json).unwrap());
    doc
}

/// Keys dedup'd in first-seen order (JSON objects keep the last value of a repeated key).
fn unique(keys: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    keys.into_iter().filter(|key| seen.insert(key.clone())).collect()
}

#[test]
fn the_inputs_version_1_refused_encode() {
    // Ten keys that differ only in byte 5.
    let users: Vec<String> = (0..10).map(|i| format!("user_{i}")).collect();
    check_key_set(&users);
    // 1,000 consecutive 9-digit numeric strings.
    check_key_set(&(100_000_000..100_001_000).map(|n: u64| n.to_string()).collect::<Vec<_>>());
    // An event catalogue's numeric ids: 184 keys of 9 digits, 10 apart.
    check_key_set(&(0..184).map(|i| (341_887_000 + 10 * i).to_string()).collect::<Vec<_>>());
    // Dates and enumerated names.
    check_key_set(&(1..=100).map(|d| format!("2026-{:02}-{:02}", d / 28 + 1, d % 28 + 1)).collect::<Vec<_>>());
    check_key_set(&(0..64).map(|i| format!("STATE_{i:03}")).collect::<Vec<_>>());
}

#[test]
fn hash_maps_of_every_size_round_trip_through_serde() {
    for size in [10, 16, 20, 30, 50, 64, 100, 1_000] {
        let map: HashMap<String, i32> = (0..size).map(|i| (format!("user_{i}"), i)).collect();
        let bytes = to_vec(&map).unwrap_or_else(|e| panic!("{size} entries refused: {e}"));
        let back: HashMap<String, i32> = from_slice(&bytes).unwrap();
        assert_eq!(back, map);
    }
}

#[test]
fn one_hundred_thousand_keys_of_each_kind() {
    let numeric: Vec<String> = (0..100_000u64).map(|n| (n * 7_919 + 123_456_789).to_string()).collect();
    let prefixed: Vec<String> = (0..100_000).map(|n| format!("{}{n}", "a-common-prefix-of-forty-bytes-0123456789")).collect();
    let unicode: Vec<String> = (0..100_000u32).map(|n| format!("ключ-{n}-鍵")).collect();
    for keys in [numeric, prefixed, unicode] {
        let doc = check_key_set(&keys);
        assert_eq!(doc.key_index_kind(), Some(KeyIndexKind::Hashed));
    }
}

#[test]
fn keys_of_equal_length_differing_in_one_byte_at_every_position() {
    let base = "abcdefghijklmnopqrstuvwx"; // 24 bytes
    let mut keys = vec![base.to_owned()];
    for position in 0..16 {
        for byte in (b'0'..=b'9').chain(b'A'..=b'Z') {
            let mut key = base.as_bytes().to_vec();
            key[position] = byte;
            keys.push(String::from_utf8(key).unwrap());
        }
    }
    check_key_set(&unique(keys));
}

/// Finds `count` keys whose version-2 hashes share their low `bits` bits.
fn colliding_keys(count: usize, bits: u32) -> Vec<String> {
    let mask = (1u64 << bits) - 1;
    (0u64..).map(|n| format!("k{n}")).filter(|key| key_hash(key.as_bytes()) & mask == 0).take(count).collect()
}

#[test]
fn crafted_collisions_take_the_sorted_index_and_every_lookup_still_works() {
    for count in [9usize, 16, 100, 1_000] {
        // Nine keys that share one home slot in the largest hashed index the encoder would try
        // (and so in every smaller one) exceed the probe limit; the rest are ordinary.
        let slots = key_index_slots(count as u64, KEY_INDEX_GROWTH_MAX);
        let mut keys = colliding_keys(9, slots.trailing_zeros());
        keys.extend((keys.len()..count).map(|i| format!("plain-{i}")));
        let doc = check_key_set(&keys);
        assert_eq!(doc.key_index_kind(), Some(KeyIndexKind::Sorted), "{count} colliding keys");
        // Sorted lookups of names that fall between, before and after the stored ones.
        for probe in ["", "k", "k0x", "zzzz", "a"] {
            assert_eq!(doc.root().get(probe).is_some(), keys.iter().any(|k| k == probe), "{probe:?}");
        }
    }
}

#[test]
fn a_few_colliding_keys_among_many_still_use_the_hashed_index() {
    // Six keys sharing a home slot fit within the probe limit.
    let mut keys = colliding_keys(6, 12);
    keys.extend((0..200).map(|i| format!("plain-{i}")));
    let doc = check_key_set(&keys);
    assert_eq!(doc.key_index_kind(), Some(KeyIndexKind::Hashed));
}

fn key_strategy() -> impl Strategy<Value = Vec<String>> {
    let random = prop::collection::vec("[a-zA-Z0-9_]{0,20}", 1..400).boxed();
    let numeric =
        (any::<u32>(), 1usize..3_000).prop_map(|(start, n)| (0..n as u64).map(|i| (start as u64 + i).to_string()).collect()).boxed();
    let prefixed = ("[a-z]{0,80}", prop::collection::vec("[a-z0-9]{0,6}", 1..400))
        .prop_map(|(prefix, suffixes)| suffixes.into_iter().map(|s| format!("{prefix}{s}")).collect())
        .boxed();
    let unicode = prop::collection::vec("\\PC{0,12}", 1..300).boxed();
    prop_oneof![random, numeric, prefixed, unicode]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn random_key_sets_encode_look_up_and_round_trip(keys in key_strategy()) {
        check_key_set(&unique(keys));
    }
}

#[test]
fn dicts_with_sparse_wide_key_ids_find_every_key() {
    // 400 keys at the top make ids wider than a byte; nested dicts use every third one, in
    // reverse order of first appearance, so their ids are neither consecutive nor start at 0.
    let keys: Vec<String> = (0..400).map(|i| format!("key{i}")).collect();
    let mut object = serde_json::Map::new();
    for (i, key) in keys.iter().enumerate() {
        object.insert(key.clone(), i.into());
    }
    let nested: serde_json::Map<String, serde_json::Value> =
        keys.iter().enumerate().rev().step_by(3).map(|(i, k)| (k.clone(), i.into())).collect();
    object.insert("nested".into(), serde_json::Value::Object(nested.clone()));
    let bytes = from_json(serde_json::Value::Object(object).to_string().as_bytes()).unwrap();
    let doc = Doc::from_untrusted(&bytes).unwrap();
    let inner = doc.root().get("nested").unwrap();
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(doc.root().get(key).and_then(|v| v.as_u64()), Some(i as u64));
        assert_eq!(inner.get(key).and_then(|v| v.as_u64()), nested.get(key).and_then(|v| v.as_u64()), "{key}");
    }
}
