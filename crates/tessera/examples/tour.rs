//! A tour of tessera, run with `cargo run --release --example tour`.
//!
//! It writes a document to `tour.tessera` (or the path given as the first argument), reads it
//! back, and shows each capability that has landed so far: the zero-copy binary format.

use serde::{Deserialize, Serialize};
use std::time::Instant;
use tessera::value::{from_json, from_value, to_vec, to_vec_with_keys, Doc, DictKey, MutableDoc, SharedKeys};

#[derive(Debug, Serialize, Deserialize)]
struct Person<'a> {
    name: &'a str,
    age: u8,
    #[serde(borrow)]
    tags: Vec<&'a str>,
    friends: Vec<Friend<'a>>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Friend<'a> {
    id: u32,
    name: &'a str,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "tour.tessera".into());
    println!("tessera tour — document file: {path}\n");

    // 1. JSON in: one pass, no intermediate tree; strings and keys are de-duplicated.
    let json = br#"[
        {"name": "Ada Lovelace", "age": 36, "tags": ["math", "poetry"], "friends": [{"id": 1, "name": "Charles Babbage"}]},
        {"name": "Charles Babbage", "age": 79, "tags": ["math", "engines"], "friends": [{"id": 0, "name": "Ada Lovelace"}]},
        {"name": "Grace Hopper", "age": 85, "tags": ["compilers", "math"], "friends": []}
    ]"#;
    let bytes = from_json(json)?;
    let minified = minified_len(json);
    println!("1. JSON -> binary: {minified} bytes of minified JSON became {} bytes ({:.0} %)", bytes.len(), 100.0 * bytes.len() as f64 / minified as f64);
    std::fs::write(&path, &bytes)?;

    // 2. Read it back. Untrusted bytes are validated once, in linear time; after that every
    //    accessor is infallible. Bytes you wrote yourself open in O(1).
    let stored = std::fs::read(&path)?;
    let start = Instant::now();
    let doc = Doc::from_untrusted(&stored)?;
    println!("2. validated {} bytes in {:?}", stored.len(), start.elapsed());
    let root = doc.root();

    // 3. Zero-copy reads: O(1) array index, hashed key lookup, key paths, pre-resolved keys.
    println!("3. [1].name = {}", root.index(1).and_then(|p| p.get("name")).and_then(|v| v.as_str()).unwrap_or("?"));
    println!("   path friends: [0].friends[0].name = {:?}", root.path("[0].friends[0].name")?.and_then(|v| v.as_str()));
    let age = DictKey::new("age");
    let ages: Vec<i64> = root.as_array().unwrap().iter().filter_map(|p| p.as_dict()?.get_key(&age)?.as_i64()).collect();
    println!("   ages with a pre-resolved key: {ages:?}");

    // 4. serde: decode into structs that borrow their strings from the file's bytes.
    let people: Vec<Person> = from_value(root)?;
    println!("4. decoded {} people; {:?} borrows from the document: {}", people.len(), people[2].name, stored.as_ptr_range().contains(&people[2].name.as_ptr()));
    let encoded = to_vec(&people)?;
    println!("   and encoded them again with serde: {} bytes", encoded.len());

    // 5. Shared keys: a collection keeps one table, and records store 1-byte key ids.
    let mut keys = SharedKeys::new();
    for key in ["name", "age", "tags", "friends", "id"] {
        keys.add(key)?;
    }
    let compact = to_vec_with_keys(&people[0], &keys)?;
    println!("5. one record: {} bytes with shared keys, {} without", compact.len(), to_vec(&people[0])?.len());

    // 6. Edit: copy-on-write, then re-encode or amend (append only what changed).
    let mut edit = MutableDoc::new(doc);
    edit.root_mut().path_mut("[2]")?.set("age", 86i64)?;
    let fresh = edit.encode()?;
    let amended = edit.amend()?;
    println!("6. edited [2].age: re-encoded {} bytes; amend appended {} bytes to the original", fresh.len(), amended.len() - stored.len());
    let reread = Doc::from_untrusted(&amended)?;
    println!("   amended document says [2].age = {:?}", reread.root().path("[2].age")?.and_then(|v| v.as_i64()));

    // 7. JSON out: compact, pretty, canonical.
    println!("7. canonical [2]: {}", reread.root().index(2).unwrap().to_json_canonical());

    // 8. Bad input gets a typed error and never a panic.
    let error = from_json(b"{\"a\": [1, 2,]}").unwrap_err();
    println!("8. malformed JSON: {error}");
    let mut corrupt = stored.clone();
    corrupt[stored.len() / 2] ^= 0xFF;
    match Doc::from_untrusted(&corrupt) {
        Err(error) => println!("   corrupt document: {error}"),
        Ok(_) => println!("   corrupt document: this flip happened to leave a valid document"),
    }
    println!("\nthe database (collections, live queries, documents, dictionary) builds on this format; see the README.");
    Ok(())
}

/// Length of `json` without insignificant whitespace.
fn minified_len(json: &[u8]) -> usize {
    let doc_bytes = from_json(json).expect("valid JSON");
    Doc::from_trusted(&doc_bytes).expect("encoder output").root().to_json().len()
}
