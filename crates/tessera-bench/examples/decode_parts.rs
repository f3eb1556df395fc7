//! Profiling aid for the generated codec's decode of one BenchDoc (the crud table's record):
//! three stored records (one of each `content` form) decoded in turn, `ITER` times, with the
//! collection's shared keys, as `Collection::get` decodes them after the store's read. Prints
//! the mean time per decode; run it under callgrind or perf for where the time goes.
use std::hint::black_box;
use tessera_bench::crud_model::{BenchDoc, parts};
use tessera_value::codec::{FieldIds, decode, encode_into};
use tessera_value::{Doc, SharedKeys};

fn main() {
    let iterations: usize = std::env::var("ITER").map_or(100_000, |v| v.parse().expect("ITER is a number"));
    let records: Vec<BenchDoc> = (0..3).map(|i| parts(i).into()).collect();
    let lists = FieldIds::lists_of::<BenchDoc>();
    let mut keys = SharedKeys::new();
    for name in lists.iter().flat_map(|list| list.iter()) {
        if keys.id(name).is_none() {
            keys.add(name).unwrap();
        }
    }
    let ids = FieldIds::resolve(&keys, lists.iter().copied());
    let stored: Vec<Vec<u8>> = records
        .iter()
        .map(|record| {
            let mut bytes = Vec::new();
            encode_into(record, Some(&keys), &ids, &mut bytes).unwrap();
            bytes
        })
        .collect();
    let start = std::time::Instant::now();
    for index in 0..iterations {
        let doc = Doc::from_trusted_with_keys(black_box(&stored[index % stored.len()]), &keys).unwrap();
        black_box(decode::<BenchDoc>(doc.root(), &ids).unwrap());
    }
    eprintln!("{:?} per decode", start.elapsed() / iterations as u32);
}
