//! `format` rows for maps keyed by ids: encode time, lookup time and size for 10, 1,000 and
//! 100,000 keys, beside MessagePack and serde_json, and lookups in a map whose keys were
//! crafted to collide under the key hash (the sorted key index).

use crate::harness::{Goal, Table, median_ns};
use std::collections::{BTreeMap, HashMap};
use std::hint::black_box;
use tessera_value::layout::{KEY_INDEX_GROWTH_MAX, KeyIndexKind, key_hash, key_index_slots};
use tessera_value::{Doc, to_vec};

/// Keys looked up per timed batch, cycling through existing keys in a shuffled order.
const PROBES: usize = 1024;

/// `count` id-like keys: 9-digit numeric strings, 37 apart.
fn id_keys(count: usize) -> Vec<String> {
    (0..count as u64).map(|i| (100_000_000 + 37 * i).to_string()).collect()
}

/// `count` keys of which nine share one home slot at every index size the encoder tries, so the
/// document takes the sorted index.
fn crafted_keys(count: usize) -> Vec<String> {
    let mask = key_index_slots(count as u64, KEY_INDEX_GROWTH_MAX) - 1;
    let mut keys: Vec<String> = (0u64..).map(|n| format!("k{n}")).filter(|key| key_hash(key.as_bytes()) & mask == 0).take(9).collect();
    let ids = id_keys(count - keys.len());
    keys.extend(ids);
    keys
}

fn probes(keys: &[String]) -> Vec<String> {
    let mut rng = fastrand::Rng::with_seed(7);
    (0..PROBES).map(|_| keys[rng.usize(..keys.len())].clone()).collect()
}

/// Median time of one lookup of an existing key in the document of `map`.
fn tessera_lookup_ns(samples: usize, bytes: &[u8], probes: &[String]) -> f64 {
    let doc = Doc::from_untrusted(bytes).expect("encoder output");
    let root = doc.root();
    median_ns(samples, 10, || {
        for key in probes {
            black_box(black_box(&root).get(black_box(key)).unwrap());
        }
    }) / probes.len() as f64
}

pub fn rows(table: &mut Table, samples: usize) {
    for count in [10usize, 1_000, 100_000] {
        let keys = id_keys(count);
        let map: BTreeMap<String, u32> = keys.iter().enumerate().map(|(i, key)| (key.clone(), i as u32)).collect();
        let name = format!("map of {count} id-like keys");
        let bytes = to_vec(&map).expect("encodes");
        let msgpack = rmp_serde::to_vec(&map).expect("msgpack");
        let json = serde_json::to_vec(&map).expect("json");
        table.row(
            &format!("{name}: size"),
            "bytes",
            bytes.len() as f64,
            &[("rmp-serde", msgpack.len() as f64), ("serde_json", json.len() as f64)],
            Goal::None,
        );
        let batch = (100_000 / count).max(1);
        let encode_ns = median_ns(samples, batch, || {
            black_box(to_vec(black_box(&map)).unwrap());
        });
        let msgpack_ns = median_ns(samples, batch, || {
            black_box(rmp_serde::to_vec(black_box(&map)).unwrap());
        });
        let json_ns = median_ns(samples, batch, || {
            black_box(serde_json::to_vec(black_box(&map)).unwrap());
        });
        table.row(
            &format!("{name}: encode via serde"),
            "µs",
            encode_ns / 1e3,
            &[("rmp-serde", msgpack_ns / 1e3), ("serde_json", json_ns / 1e3)],
            Goal::None,
        );

        let probes = probes(&keys);
        let lookup_ns = tessera_lookup_ns(samples, &bytes, &probes);
        let value: serde_json::Value = serde_json::from_slice(&json).unwrap();
        let serde_ns = median_ns(samples, 10, || {
            for key in &probes {
                black_box(black_box(&value).get(black_box(key.as_str())).unwrap());
            }
        }) / probes.len() as f64;
        let hash_map: HashMap<String, serde_json::Value> = serde_json::from_slice(&json).unwrap();
        let std_ns = median_ns(samples, 10, || {
            for key in &probes {
                black_box(black_box(&hash_map).get(black_box(key.as_str())).unwrap());
            }
        }) / probes.len() as f64;
        let goal = if count == 100_000 { Goal::AtMostTimesPeer { peer: "serde_json", factor: 1.0 } } else { Goal::None };
        table.row(&format!("{name}: look up a key"), "ns", lookup_ns, &[("serde_json", serde_ns), ("std HashMap", std_ns)], goal);
    }

    let count = 100_000;
    let keys = crafted_keys(count);
    let map: BTreeMap<String, u32> = keys.iter().enumerate().map(|(i, key)| (key.clone(), i as u32)).collect();
    let bytes = to_vec(&map).expect("encodes");
    let kind = Doc::from_untrusted(&bytes).unwrap().key_index_kind();
    assert_eq!(kind, Some(KeyIndexKind::Sorted), "crafted keys take the sorted index");
    let lookup_ns = tessera_lookup_ns(samples, &bytes, &probes(&keys));
    table.row(
        &format!("map of {count} keys crafted to collide (sorted index): look up a key"),
        "ns",
        lookup_ns,
        &[],
        Goal::AtMost(30.0 * (count as f64).log2()),
    );
}
