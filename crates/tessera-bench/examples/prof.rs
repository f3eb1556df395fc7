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
        "decode" => {
            for _ in 0..2000 {
                let doc = Doc::from_trusted(&binary).unwrap();
                black_box(from_value::<Vec<people::Person>>(doc.root()).unwrap());
            }
        }
        "convert" => {
            for _ in 0..std::env::var("ITER").map_or(2000, |v| v.parse().unwrap()) {
                black_box(from_json(&json).unwrap());
            }
        }
        "validate" => {
            for _ in 0..20000 {
                black_box(Doc::from_untrusted(&binary).unwrap());
            }
        }
        "lookup" => {
            let root = Doc::from_trusted(&binary).unwrap().root();
            for _ in 0..std::env::var("ITER").map_or(50_000_000, |v| v.parse().unwrap()) {
                black_box(black_box(root).index(123).unwrap().get(black_box("name")).unwrap());
            }
        }
        "open" => {
            for _ in 0..std::env::var("ITER").map_or(100_000_000, |v| v.parse().unwrap()) {
                black_box(Doc::from_trusted(black_box(&binary)).unwrap().root());
            }
        }
        "encode" => {
            let p: Vec<people::Person> = serde_json::from_slice(&json).unwrap();
            for _ in 0..2000 {
                black_box(to_vec(&p).unwrap());
            }
        }
        "walk" => {
            for _ in 0..2000 {
                let doc = unsafe { Doc::from_trusted_unchecked(&binary, None) }.unwrap();
                let mut total = 0usize;
                for person in doc.root().as_array().unwrap().iter() {
                    for (key, value) in person.as_dict().unwrap().iter() {
                        total += key.len();
                        if let Some(s) = value.as_str() {
                            total += s.len();
                        }
                        if let Some(a) = value.as_array() {
                            for v in a.iter() {
                                total += v.as_str().map_or(1, |s| s.len());
                            }
                        }
                    }
                }
                black_box(total);
            }
        }
        "decode_unchecked" => {
            for _ in 0..std::env::var("ITER").map_or(2000, |v| v.parse().unwrap()) {
                let doc = unsafe { Doc::from_trusted_unchecked(&binary, None) }.unwrap();
                black_box(from_value::<Vec<people::Person>>(doc.root()).unwrap());
            }
        }
        "serde_value" => {
            let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
            let t = std::time::Instant::now();
            for _ in 0..2000 {
                black_box(<Vec<people::Person> as serde::Deserialize>::deserialize(&v).unwrap());
            }
            eprintln!("from serde_json::Value: {:?}", t.elapsed() / 2000);
        }
        "serde_text" => {
            let t = std::time::Instant::now();
            for _ in 0..2000 {
                black_box(serde_json::from_slice::<Vec<people::Person>>(&json).unwrap());
            }
            eprintln!("from text: {:?}", t.elapsed() / 2000);
        }
        _ => {}
    }
    eprintln!("{:?}", start.elapsed());
}
