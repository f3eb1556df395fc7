#[path = "../src/people.rs"]
mod people;
use std::hint::black_box;
use tessera_value::*;
fn main() {
    let which = std::env::args().nth(1).unwrap();
    let json = people::people_json(1000);
    let binary = from_json(&json).unwrap();
    let start = std::time::Instant::now();
    match which.as_str() {
        "decode" => for _ in 0..2000 { let doc = Doc::from_trusted(&binary).unwrap(); black_box(from_value::<Vec<people::Person>>(doc.root()).unwrap()); },
        "convert" => for _ in 0..2000 { black_box(from_json(&json).unwrap()); },
        "validate" => for _ in 0..20000 { black_box(Doc::from_untrusted(&binary).unwrap()); },
        "lookup" => { let root = Doc::from_trusted(&binary).unwrap().root(); for _ in 0..50_000_000 { black_box(black_box(root).index(123).unwrap().get(black_box("name")).unwrap()); } },
        "open" => for _ in 0..100_000_000 { black_box(Doc::from_trusted(black_box(&binary)).unwrap().root()); },
        "encode" => { let p: Vec<people::Person> = serde_json::from_slice(&json).unwrap(); for _ in 0..2000 { black_box(to_vec(&p).unwrap()); } },
        _ => {}
    }
    eprintln!("{:?}", start.elapsed());
}
