//! Profiling aid for the `format` table's generated-codec row: decodes the seed's 1000 people
//! from records stored with shared keys, `ITER` times. `MODE=codec` (default) uses the
//! generated codec, `MODE=serde` tessera-value's serde path, `MODE=json` serde_json from text.
#[path = "../src/people.rs"]
#[allow(dead_code)] // the borrowed structs are for other tables
mod people;
use std::hint::black_box;
use tessera::collection::Embed;
use tessera_value::codec::{FieldIds, decode, encode_into};
use tessera_value::{Doc, SharedKeys};

#[allow(non_snake_case, dead_code)]
#[derive(Debug, PartialEq, serde::Deserialize, Embed)]
struct OwnedPerson {
    _id: String,
    index: u32,
    guid: String,
    isActive: bool,
    balance: String,
    picture: String,
    age: u8,
    eyeColor: String,
    name: String,
    gender: String,
    company: String,
    email: String,
    phone: String,
    address: String,
    about: String,
    registered: String,
    latitude: f64,
    longitude: f64,
    tags: Vec<String>,
    friends: Vec<OwnedFriend>,
    greeting: String,
    favoriteFruit: String,
}

#[allow(dead_code)]
#[derive(Debug, PartialEq, serde::Deserialize, Embed)]
struct OwnedFriend {
    id: u32,
    name: String,
}

fn main() {
    let iterations: usize = std::env::var("ITER").map_or(200, |v| v.parse().expect("ITER is a number"));
    let mode = std::env::var("MODE").unwrap_or_else(|_| "codec".into());
    let json = people::people_json(1000);
    let people: Vec<OwnedPerson> = serde_json::from_slice(&json).unwrap();
    let lists = FieldIds::lists_of::<Vec<OwnedPerson>>();
    let mut keys = SharedKeys::new();
    for name in lists.iter().flat_map(|list| list.iter()) {
        if keys.id(name).is_none() {
            keys.add(name).unwrap();
        }
    }
    let ids = FieldIds::resolve(&keys, lists.iter().copied());
    let mut bytes = Vec::new();
    encode_into(&people, Some(&keys), &ids, &mut bytes).unwrap();
    let start = std::time::Instant::now();
    for _ in 0..iterations {
        match mode.as_str() {
            "codec" => {
                // SAFETY: `bytes` is the unmodified output of the encoder, with these keys.
                let doc = unsafe { Doc::from_trusted_unchecked(black_box(&bytes), Some(&keys)) }.unwrap();
                black_box(decode::<Vec<OwnedPerson>>(doc.root(), &ids).unwrap());
            }
            "serde" => {
                // SAFETY: as above.
                let doc = unsafe { Doc::from_trusted_unchecked(black_box(&bytes), Some(&keys)) }.unwrap();
                black_box(tessera_value::from_value::<Vec<OwnedPerson>>(doc.root()).unwrap());
            }
            "json" => {
                black_box(serde_json::from_slice::<Vec<OwnedPerson>>(black_box(&json)).unwrap());
            }
            other => panic!("unknown MODE {other}"),
        }
    }
    eprintln!("{mode}: {:?} per decode of 1000 people", start.elapsed() / iterations as u32);
}
