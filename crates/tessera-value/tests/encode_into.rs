//! `codec::encode_into` reuses one set of buffers per thread: documents encoded one after the
//! other, with and without shared keys, and from inside another encode, stay independent.

use tessera_value::codec::{Encode, FieldIds, encode, encode_into};
use tessera_value::{Doc, EncodeError, Encoder, SharedKeys};

/// A value whose encoder encodes another document through `encode_into` while its own is half
/// written (as a hand-written `Encode` that embeds pre-encoded bytes might).
struct Nested(&'static str);

impl Encode for Nested {
    fn encode(&self, out: &mut Encoder<'_>, ids: &FieldIds) -> Result<(), EncodeError> {
        out.begin_array()?;
        out.push_str(self.0)?;
        let mut inner = Vec::new();
        encode_into(&vec!["inner", "document"], None, ids, &mut inner)?;
        let doc = Doc::from_untrusted(&inner).expect("the inner document is valid");
        assert_eq!(doc.root().to_json(), r#"["inner","document"]"#);
        out.push_i64(inner.len() as i64)?;
        out.end_array()
    }
}

#[test]
fn an_encode_inside_an_encode_gets_buffers_of_its_own() {
    let mut out = Vec::new();
    encode_into(&Nested("outer"), None, &FieldIds::default(), &mut out).unwrap();
    let root = Doc::from_untrusted(&out).unwrap().root();
    assert_eq!(root.index(0).unwrap().as_str(), Some("outer"));
    assert!(root.index(1).unwrap().as_i64().unwrap() > 0);
    // The buffers parked after the nested call serve the next document intact.
    encode_into(&vec![1u8, 2, 3], None, &FieldIds::default(), &mut out).unwrap();
    assert_eq!(Doc::from_untrusted(&out).unwrap().root().to_json(), "[1,2,3]");
}

#[test]
fn consecutive_documents_with_and_without_shared_keys_match_a_fresh_encoder() {
    let mut keys = SharedKeys::new();
    keys.add("a").unwrap();
    let values: Vec<std::collections::BTreeMap<String, Vec<String>>> = (0..50)
        .map(|i| {
            let mut map = std::collections::BTreeMap::new();
            map.insert("a".to_owned(), vec![format!("s{i}"), format!("s{i}"), "shared".to_owned()]);
            map.insert(format!("local{}", i % 3), vec!["x".repeat(i)]);
            map
        })
        .collect();
    let mut out = Vec::new();
    for (i, value) in values.iter().enumerate() {
        let shared = (i % 2 == 0).then_some(&keys);
        encode_into(value, shared, &FieldIds::default(), &mut out).unwrap();
        let fresh = match shared {
            Some(keys) => {
                let mut encoder = Encoder::with_shared_keys(keys);
                value.encode(&mut encoder, &FieldIds::default()).unwrap();
                encoder.finish().unwrap()
            }
            None => encode(value, &FieldIds::default()).unwrap(),
        };
        assert_eq!(out, fresh, "document {i}");
    }
}

/// A value that opens a container, then panics half-way through writing itself.
struct PanicsHalfWay;

impl Encode for PanicsHalfWay {
    fn encode(&self, out: &mut Encoder<'_>, _: &FieldIds) -> Result<(), EncodeError> {
        out.begin_dict()?;
        out.key("open")?;
        out.begin_array()?;
        panic!("a hand-written Encode panicked");
    }
}

impl serde::Serialize for PanicsHalfWay {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_key("open")?;
        panic!("a Serialize impl panicked");
    }
}

#[test]
fn a_panic_inside_encode_into_leaves_the_next_document_whole() {
    let mut out = Vec::new();
    let caught = std::panic::catch_unwind(|| encode_into(&PanicsHalfWay, None, &FieldIds::default(), &mut Vec::new()));
    assert!(caught.is_err());
    encode_into(&vec!["after"], None, &FieldIds::default(), &mut out).unwrap();
    assert_eq!(Doc::from_untrusted(&out).unwrap().root().to_json(), r#"["after"]"#);
}

/// Before the fix, the per-thread encoder of `to_vec` kept the panicked value's open
/// containers, and the next valid value was refused with `Incomplete`.
#[test]
fn a_panic_inside_to_vec_leaves_the_next_value_whole() {
    let caught = std::panic::catch_unwind(|| tessera_value::to_vec(&PanicsHalfWay));
    assert!(caught.is_err());
    let bytes = tessera_value::to_vec(&vec![1, 2]).expect("a valid value after a panic");
    assert_eq!(Doc::from_untrusted(&bytes).unwrap().root().to_json(), "[1,2]");
}
