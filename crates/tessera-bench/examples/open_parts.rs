//! Profiling aid for the format table's "open trusted" row: opens the 1000-people document
//! `ITER` times with `Doc::from_trusted` and takes its root, as the row does.
use std::hint::black_box;
use tessera::value::Doc;

fn main() {
    let iterations: usize = std::env::var("ITER").map_or(1_000_000, |v| v.parse().expect("ITER is a number"));
    let binary = tessera::value::from_json(&tessera_bench::people::people_json(1000)).unwrap();
    let start = std::time::Instant::now();
    for _ in 0..iterations {
        black_box(Doc::from_trusted(black_box(&binary)).unwrap().root());
    }
    println!("open trusted: {:.2} ns", start.elapsed().as_secs_f64() * 1e9 / iterations as f64);
}
