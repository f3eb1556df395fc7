//! Profiling aid for the generated encoder: encodes 10,000 BenchDocs with the shared keys a
//! collection of them would have, `ITER` times, and prints the time per record.
//! `DUMP=path` writes every record's bytes once (length-prefixed) to `path`, so that two builds'
//! outputs can be compared byte for byte. `MODE=decode`: decodes the encoded records instead.
use std::hint::black_box;
use std::time::Instant;
use tessera::codec::{FieldIds, encode_into};
use tessera::value::SharedKeys;
use tessera_bench::crud_model::{BenchDoc, parts};

fn main() {
    let iterations: usize = std::env::var("ITER").map_or(20, |v| v.parse().expect("ITER is a number"));
    let records: Vec<BenchDoc> = (0..10_000).map(|i| parts(i).into()).collect();
    let lists = FieldIds::lists_of::<BenchDoc>();
    let mut shared = SharedKeys::new();
    for name in lists.iter().flat_map(|list| list.iter()) {
        if shared.id(name).is_none() {
            shared.add(name).unwrap();
        }
    }
    let ids = FieldIds::resolve(&shared, lists);
    let mut buffer = Vec::new();
    if let Ok(path) = std::env::var("DUMP") {
        let mut all = Vec::new();
        for record in &records {
            encode_into(record, Some(&shared), &ids, &mut buffer).unwrap();
            all.extend_from_slice(&(buffer.len() as u32).to_le_bytes());
            all.extend_from_slice(&buffer);
        }
        let json: Vec<u8> = serde_json::to_vec(&records).unwrap();
        let converted = tessera::value::from_json(&json).unwrap();
        all.extend_from_slice(&converted);
        let serde = tessera::value::to_vec(&records).unwrap();
        all.extend_from_slice(&serde);
        std::fs::write(path, all).unwrap();
    }
    if std::env::var("MODE").is_ok_and(|mode| mode == "decode") {
        let stored: Vec<Vec<u8>> = records
            .iter()
            .map(|record| {
                encode_into(record, Some(&shared), &ids, &mut buffer).unwrap();
                buffer.clone()
            })
            .collect();
        let start = Instant::now();
        for _ in 0..iterations {
            for bytes in &stored {
                let doc = tessera::value::Doc::from_trusted_with_keys(bytes, &shared).unwrap();
                black_box(tessera::codec::decode::<BenchDoc>(doc.root(), &ids).unwrap());
            }
        }
        let per_record = start.elapsed().as_secs_f64() * 1e9 / (iterations * records.len()) as f64;
        println!("codec decode: {per_record:.1} ns per BenchDoc");
        return;
    }
    let start = Instant::now();
    for _ in 0..iterations {
        for record in &records {
            encode_into(black_box(record), Some(&shared), &ids, &mut buffer).unwrap();
            black_box(&buffer);
        }
    }
    let per_record = start.elapsed().as_secs_f64() * 1e9 / (iterations * records.len()) as f64;
    println!("codec encode: {per_record:.1} ns per BenchDoc ({} bytes)", buffer.len());
}
