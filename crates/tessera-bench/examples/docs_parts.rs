//! Profiling aid for the documents table: `MODE=get|set|field|raw_get|raw_set|raw_field`
//! runs `ITER` of that operation (`field`: a field handle's write of `age`) on the table's
//! five-field profile, tessera's or raw heed's (`documents_model::Raw`), so that callgrind can
//! count each side alone.
use std::hint::black_box;
use tessera::{Db, DbOptions, Durability};
use tessera_bench::documents_model::{Profile, Raw, profile};

fn main() {
    let iterations: u64 = std::env::var("ITER").map_or(20_000, |v| v.parse().expect("ITER is a number"));
    let mode = std::env::var("MODE").unwrap_or_default();
    let dir = tempfile::tempdir().unwrap();
    let options = DbOptions { durability: Durability::BUFFERED, map_size_initial_bytes: 1 << 28, ..DbOptions::default() };
    let db = Db::open_with(dir.path().join("tessera"), options).unwrap();
    let documents = db.documents("profiles").unwrap();
    let doc = documents.document::<Profile>("bench");
    doc.set(&profile(0)).unwrap();
    let raw = Raw::open(&dir.path().join("heed"));
    raw.set("bench", &profile(0));
    let age = doc.field::<i32>("age");
    let start = std::time::Instant::now();
    for i in 0..iterations {
        match mode.as_str() {
            "get" => drop(black_box(doc.get().unwrap())),
            "set" => doc.set(&profile(i)).unwrap(),
            "raw_get" => drop(black_box(raw.get("bench"))),
            "raw_set" => raw.set("bench", &profile(i)),
            "field" => age.set(&(i as i32)).unwrap(),
            "raw_field" => raw.update_field("bench", "age", &(i as i32)),
            _ => {}
        }
    }
    println!("{mode}: {:.2} µs each", start.elapsed().as_secs_f64() * 1e6 / iterations.max(1) as f64);
}
