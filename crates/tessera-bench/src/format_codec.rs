//! `format` rows for the generated codecs: the seed's 1000 people decoded by
//! `#[derive(Embed)]` code from records stored with shared keys (as a collection stores them),
//! beside serde_json decoding the same struct from text (issue 13, item 7: ≥ 10×).

use crate::harness::{Goal, Table, median_ns};
use std::hint::black_box;
use tessera::collection::Embed;
use tessera_value::codec::{FieldIds, decode, encode_into};
use tessera_value::{Doc, SharedKeys};

/// One person of the seed's data set, owning its strings, with the JSON's own field names (the
/// derive keeps field names as they are, so they are spelled as in the JSON).
#[allow(non_snake_case)]
#[derive(Debug, PartialEq, serde::Deserialize, Embed)]
pub struct OwnedPerson {
    pub _id: String,
    pub index: u32,
    pub guid: String,
    pub isActive: bool,
    pub balance: String,
    pub picture: String,
    pub age: u8,
    pub eyeColor: String,
    pub name: String,
    pub gender: String,
    pub company: String,
    pub email: String,
    pub phone: String,
    pub address: String,
    pub about: String,
    pub registered: String,
    pub latitude: f64,
    pub longitude: f64,
    pub tags: Vec<String>,
    pub friends: Vec<OwnedFriend>,
    pub greeting: String,
    pub favoriteFruit: String,
}

/// A friend of an [`OwnedPerson`].
#[derive(Debug, PartialEq, serde::Deserialize, Embed)]
pub struct OwnedFriend {
    pub id: u32,
    pub name: String,
}

pub fn rows(table: &mut Table, samples: usize, json: &[u8]) {
    let people: Vec<OwnedPerson> = serde_json::from_slice(json).expect("the seed's people");
    // The shared-key table a collection of these records would have.
    let lists = FieldIds::lists_of::<Vec<OwnedPerson>>();
    let mut keys = SharedKeys::new();
    for name in lists.iter().flat_map(|list| list.iter()) {
        if keys.id(name).is_none() {
            keys.add(name).expect("few short names");
        }
    }
    let ids = FieldIds::resolve(&keys, lists.iter().copied());
    let mut bytes = Vec::new();
    encode_into(&people, Some(&keys), &ids, &mut bytes).expect("encodes");
    let doc = Doc::from_untrusted_with_keys(&bytes, &keys).expect("encoder output");
    let back: Vec<OwnedPerson> = decode(doc.root(), &ids).expect("decodes");
    assert_eq!(back, people, "the codec reads back what it wrote");

    let codec_ns = median_ns(samples, 1, || {
        // SAFETY: `bytes` is the unmodified output of the encoder, with these shared keys.
        let doc = unsafe { Doc::from_trusted_unchecked(black_box(&bytes), Some(&keys)) }.unwrap();
        black_box(decode::<Vec<OwnedPerson>>(doc.root(), &ids).unwrap());
    });
    let serde_json_ns = median_ns(samples, 1, || {
        black_box(serde_json::from_slice::<Vec<OwnedPerson>>(black_box(json)).unwrap());
    });
    let serde_ns = median_ns(samples, 1, || {
        // SAFETY: as above.
        let doc = unsafe { Doc::from_trusted_unchecked(black_box(&bytes), Some(&keys)) }.unwrap();
        black_box(tessera_value::from_value::<Vec<OwnedPerson>>(doc.root()).unwrap());
    });
    table.row(
        "decode 1000 people (owned strings) via the generated codec, shared keys",
        "µs",
        codec_ns / 1e3,
        &[("serde_json", serde_json_ns / 1e3), ("tessera-value serde", serde_ns / 1e3)],
        Goal::AtMostTimesPeer { peer: "serde_json", factor: 0.1 },
    );
    let encode_ns = median_ns(samples, 1, || {
        encode_into(black_box(&people), Some(&keys), &ids, &mut bytes).unwrap();
    });
    table.row("encode 1000 people via the generated codec, shared keys", "µs", encode_ns / 1e3, &[], Goal::None);
}
