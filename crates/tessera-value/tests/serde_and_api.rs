//! serde in both directions, editing, shared keys, pre-resolved keys and paths.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use tessera_value::*;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Shape {
    Unit,
    Newtype(i32),
    Tuple(u8, String),
    Struct { x: f32, y: f64 },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Everything {
    unit: (),
    flag: bool,
    small: i8,
    big: i64,
    huge: u64,
    wide: i128,
    float: f32,
    double: f64,
    letter: char,
    text: String,
    #[serde(with = "serde_bytes_compat")]
    blob: Vec<u8>,
    missing: Option<String>,
    present: Option<Vec<u16>>,
    shapes: Vec<Shape>,
    map: BTreeMap<String, i32>,
    int_keys: HashMap<u32, bool>,
    #[serde(rename = "renamed-field")]
    renamed: String,
    nested: Option<Box<Everything>>,
}

/// `Vec<u8>` as bytes (serde's default is a sequence of numbers).
mod serde_bytes_compat {
    pub fn serialize<S: serde::Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(bytes)
    }
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E>(self, v: &[u8]) -> Result<Vec<u8>, E> {
                Ok(v.to_vec())
            }
        }
        deserializer.deserialize_bytes(Visitor)
    }
}

fn sample() -> Everything {
    let inner = Everything {
        unit: (),
        flag: false,
        small: -128,
        big: i64::MIN,
        huge: u64::MAX,
        wide: -5,
        float: 1.5,
        double: -0.1,
        letter: 'ü',
        text: "inner".into(),
        blob: vec![],
        missing: None,
        present: None,
        shapes: vec![],
        map: BTreeMap::new(),
        int_keys: HashMap::new(),
        renamed: String::new(),
        nested: None,
    };
    Everything {
        unit: (),
        flag: true,
        small: 127,
        big: i64::MAX,
        huge: 1 << 63,
        wide: i64::MAX as i128 + 1,
        float: f32::MAX,
        double: std::f64::consts::PI,
        letter: '😀',
        text: "héllo \"world\"\n".into(),
        blob: vec![0, 1, 2, 255],
        missing: None,
        present: Some(vec![1, 2, 65535]),
        shapes: vec![Shape::Unit, Shape::Newtype(-7), Shape::Tuple(3, "t".into()), Shape::Struct { x: 0.25, y: 1e300 }],
        map: [("b".to_string(), 2), ("a".to_string(), 1)].into_iter().collect(),
        int_keys: [(7, true), (8, false)].into_iter().collect(),
        renamed: "r".into(),
        nested: Some(Box::new(inner)),
    }
}

#[test]
fn serde_round_trips_every_shape() {
    let value = sample();
    let bytes = to_vec(&value).unwrap();
    let back: Everything = from_slice(&bytes).unwrap();
    assert_eq!(back, value);
}

#[test]
fn serde_shapes_match_serde_json() {
    let mut value = sample();
    value.blob.clear(); // bytes are binary here, a number array in serde_json
    value.wide = 5;
    // An f32 is stored exactly and written as the shortest f64 that reads back to it;
    // serde_json writes the shortest f32 text instead. Use a value where the two agree.
    value.float = 0.25;
    let ours = Doc::from_untrusted(&to_vec(&value).unwrap()).unwrap().root().to_json();
    let ours: serde_json::Value = serde_json::from_str(&ours).unwrap();
    let mut theirs = serde_json::to_value(&value).unwrap();
    theirs["blob"] = serde_json::Value::String(String::new()); // empty binary is written as ""
    theirs["nested"]["blob"] = serde_json::Value::String(String::new());
    assert_eq!(ours, theirs);
    // And the same JSON decodes through tessera into the same Rust value.
    let json = serde_json::to_vec(&value).unwrap();
    let reparsed = from_json(&json).unwrap();
    let mut from_text: serde_json::Value = from_slice(&reparsed).unwrap();
    from_text["blob"] = theirs["blob"].clone();
    from_text["nested"]["blob"] = theirs["nested"]["blob"].clone();
    assert_eq!(from_text, theirs);
}

#[test]
fn strings_and_bytes_are_borrowed_from_the_document() {
    #[derive(Deserialize)]
    struct Borrowed<'a> {
        name: &'a str,
        #[serde(borrow)]
        data: &'a [u8],
    }
    let mut encoder = Encoder::new();
    encoder.begin_dict().unwrap();
    encoder.key("name").unwrap();
    encoder.push_str("zero-copy").unwrap();
    encoder.key("data").unwrap();
    encoder.push_bytes(b"\x00\x01").unwrap();
    encoder.end_dict().unwrap();
    let bytes = encoder.finish().unwrap();
    let value: Borrowed = from_slice(&bytes).unwrap();
    let range = bytes.as_ptr_range();
    assert!(range.contains(&value.name.as_ptr()) && range.contains(&value.data.as_ptr()));
    assert_eq!((value.name, value.data), ("zero-copy", &b"\x00\x01"[..]));
}

#[test]
fn type_mismatch_is_a_typed_error() {
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Age {
        age: u8,
    }
    let bytes = from_json(br#"{"age": "old"}"#).unwrap();
    let error = from_slice::<Age>(&bytes).unwrap_err();
    assert!(error.message.contains("invalid type"), "{error}");
    let bytes = from_json(br#"{"age": 300}"#).unwrap();
    assert!(from_slice::<Age>(&bytes).is_err());
    assert!(from_slice::<Age>(b"not a document").is_err());
}

#[test]
fn map_keys_must_be_strings_or_scalars() {
    let mut map = HashMap::new();
    map.insert(vec![1u8], 1);
    assert!(matches!(to_vec(&map), Err(EncodeError::Message(_))));
}

#[test]
fn builder_misuse_is_a_typed_error() {
    let mut encoder = Encoder::new();
    assert!(matches!(encoder.end_array(), Err(EncodeError::Unbalanced(_))));
    assert!(matches!(encoder.key("k"), Err(EncodeError::KeyOrder(_))));
    encoder.begin_dict().unwrap();
    assert!(matches!(encoder.push_null(), Err(EncodeError::KeyOrder(_))));
    encoder.key("k").unwrap();
    assert!(matches!(encoder.key("k2"), Err(EncodeError::KeyOrder(_))));
    assert!(matches!(encoder.end_dict(), Err(EncodeError::KeyOrder(_))));
    encoder.push_null().unwrap();
    assert!(matches!(encoder.end_array(), Err(EncodeError::Unbalanced(_))));
    encoder.end_dict().unwrap();
    assert!(matches!(encoder.push_null(), Err(EncodeError::Incomplete(_))));
    assert!(matches!(Encoder::new().finish(), Err(EncodeError::Incomplete(_))));
    let mut open = Encoder::new();
    open.begin_array().unwrap();
    assert!(matches!(open.finish(), Err(EncodeError::Incomplete(_))));
}

#[test]
fn nesting_limit_of_the_format_is_enforced_by_the_encoder() {
    let mut encoder = Encoder::new();
    for _ in 0..layout::HEIGHT_MAX {
        encoder.begin_array().unwrap();
    }
    assert_eq!(encoder.begin_array(), Err(EncodeError::TooDeep(255)));
    for _ in 0..layout::HEIGHT_MAX {
        encoder.end_array().unwrap();
    }
    let bytes = encoder.finish().unwrap();
    assert!(Doc::validate(&bytes, None, &ValidateOptions { depth_max: 255 }).is_ok());
    assert!(Doc::from_untrusted(&bytes).is_err(), "deeper than the default limit of 128");
}

#[test]
fn repeated_strings_are_stored_once() {
    let long = "a string long enough that a second copy would be noticed".repeat(4);
    let json = format!(r#"["{long}","{long}","{long}"]"#);
    let once = from_json(format!(r#"["{long}"]"#).as_bytes()).unwrap();
    let thrice = from_json(json.as_bytes()).unwrap();
    assert!(thrice.len() < once.len() + 8, "{} vs {}", thrice.len(), once.len());
    // Far repeats (beyond a 2-byte pointer's reach) become atoms and still read back.
    let filler = "x".repeat(40_000);
    let json = format!(r#"["{long}","{filler}","{long}","{long}"]"#);
    let bytes = from_json(json.as_bytes()).unwrap();
    assert!(bytes.len() < long.len() + filler.len() + 100, "{} bytes", bytes.len());
    let root = Doc::from_untrusted(&bytes).unwrap().root();
    assert_eq!(root.index(3).unwrap().as_str(), Some(long.as_str()));
}

#[test]
fn documents_wider_than_two_byte_offsets_read_back() {
    let items: Vec<String> = (0..20_000).map(|i| format!("item number {i}")).collect();
    let bytes = to_vec(&items).unwrap();
    assert!(bytes.len() > 1 << 16);
    let back: Vec<String> = from_slice(&bytes).unwrap();
    assert_eq!(back, items);
}

#[test]
fn mutation_edits_nested_values_and_amend_appends() {
    let original = from_json(br#"{"name":"Ada","langs":["en","fr"],"address":{"city":"London","zip":"N1"}}"#).unwrap();
    let doc = Doc::from_untrusted(&original).unwrap();
    let mut edit = MutableDoc::new(doc);
    let root = edit.root_mut();
    root.set("age", 36i64).unwrap();
    root.remove("name").unwrap();
    root.path_mut("address").unwrap().set("city", "Cambridge").unwrap();
    let langs = root.get_mut("langs").unwrap().unwrap();
    langs.push("de").unwrap();
    langs.set_index(0, "EN").unwrap();
    assert_eq!(langs.remove_index(1).unwrap().clone_json(), "\"fr\"");
    assert_eq!(langs.set_index(9, 1i64), Err(MutateError::IndexOutOfRange { index: 9, len: 2 }));
    assert_eq!(root.push(1i64), Err(MutateError::NotAnArray));
    assert!(matches!(root.path_mut("nope.x"), Err(MutateError::MissingStep { step: 0 })));
    let expected = r#"{"langs":["EN","de"],"address":{"city":"Cambridge","zip":"N1"},"age":36}"#;
    for bytes in [edit.encode().unwrap(), edit.amend().unwrap()] {
        assert_eq!(Doc::from_untrusted(&bytes).unwrap().root().to_json(), expected);
    }
    let amended = edit.amend().unwrap();
    assert!(amended.starts_with(&original));
    // Amending an amended document works too.
    let doc2 = Doc::from_untrusted(&amended).unwrap();
    let mut edit2 = MutableDoc::new(doc2);
    edit2.root_mut().set("age", 37i64).unwrap();
    let twice = edit2.amend().unwrap();
    assert!(twice.starts_with(&amended));
    assert_eq!(Doc::from_untrusted(&twice).unwrap().root().get("age").unwrap().as_i64(), Some(37));
}

trait CloneJson {
    fn clone_json(&self) -> String;
}

impl CloneJson for Mutable<'_> {
    fn clone_json(&self) -> String {
        match self {
            Mutable::Original(value) => value.to_json(),
            Mutable::String(s) => format!("{s:?}"),
            other => format!("{other:?}"),
        }
    }
}

#[test]
fn dict_key_is_correct_across_documents_with_different_layouts() {
    let first = from_json(br#"{"a":1,"name":"first"}"#).unwrap();
    let second = from_json(br#"{"zzz":0,"yyy":0,"xxx":0,"name":"second","a":2}"#).unwrap();
    let third = from_json(br#"{"a":3}"#).unwrap();
    let name = DictKey::new("name");
    for _ in 0..2 {
        for (bytes, expected) in [(&first, Some("first")), (&second, Some("second")), (&third, None)] {
            let root = Doc::from_untrusted(bytes).unwrap().root();
            let found = root.as_dict().unwrap().get_key(&name).map(|v| v.as_str().unwrap());
            assert_eq!(found, expected);
        }
    }
    let empty = DictKey::new("");
    let with_empty = from_json(br#"{"x":1,"":2}"#).unwrap();
    for bytes in [&first, &with_empty] {
        let root = Doc::from_untrusted(bytes).unwrap().root();
        let found = root.as_dict().unwrap().get_key(&empty).map(|v| v.as_i64().unwrap());
        assert_eq!(found, root.get("").and_then(|v| v.as_i64()));
    }
}

#[test]
fn shared_keys_shrink_records_and_survive_table_growth() {
    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Record {
        title: String,
        priority: i32,
    }
    let record = Record { title: "t".into(), priority: 5 };
    let mut keys = SharedKeys::new();
    keys.add("title").unwrap();
    keys.add("priority").unwrap();
    let with = to_vec_with_keys(&record, &keys).unwrap();
    let without = to_vec(&record).unwrap();
    assert!(with.len() < without.len(), "{} vs {}", with.len(), without.len());
    keys.add("later").unwrap(); // tables only grow; old documents still read
    let doc = Doc::from_untrusted_with_keys(&with, &keys).unwrap();
    assert_eq!(from_value::<Record>(doc.root()).unwrap(), record);
    assert_eq!(doc.root().to_json(), r#"{"title":"t","priority":5}"#);
    let restored = SharedKeys::from_bytes(&keys.to_bytes()).unwrap();
    assert!(Doc::from_untrusted_with_keys(&with, &restored).is_ok());
}

#[test]
fn paths_reach_nested_values() {
    let bytes = from_json(br#"{"friends":[{"name":"a"},{"name":"b","tags":[[1,2]]}]}"#).unwrap();
    let root = Doc::from_untrusted(&bytes).unwrap().root();
    assert_eq!(root.path("friends[1].name").unwrap().unwrap().as_str(), Some("b"));
    assert_eq!(root.path("friends[1].tags[0][1]").unwrap().unwrap().as_i64(), Some(2));
    assert!(root.path("friends[2].name").unwrap().is_none());
    assert!(root.path("friends.name").unwrap().is_none());
    assert_eq!(root.path("").unwrap().unwrap().kind(), Kind::Dict);
    assert_eq!(root.path("friends[").unwrap_err().column, 9);
    // A malformed path is an error even when an earlier step is missing.
    assert_eq!(root.path("missing..x").unwrap_err().column, 9);
}

#[test]
fn deep_equality_ignores_layout_but_not_types() {
    let a = from_json(br#"{"x":[1,2,{"y":null}],"z":"s"}"#).unwrap();
    let b = to_vec(&serde_json::json!({"z": "s", "x": [1, 2, {"y": null}]})).unwrap();
    let c = from_json(br#"{"x":[1,2,{"y":null}],"z":"t"}"#).unwrap();
    let d = from_json(br#"{"x":[1.0,2,{"y":null}],"z":"s"}"#).unwrap();
    let root = |bytes: &[u8]| Doc::from_untrusted(bytes).unwrap().root().to_json();
    let (va, vb) = (Doc::from_untrusted(&a).unwrap().root(), Doc::from_untrusted(&b).unwrap().root());
    assert!(va == vb, "{} vs {}", root(&a), root(&b));
    assert!(va != Doc::from_untrusted(&c).unwrap().root());
    assert!(va != Doc::from_untrusted(&d).unwrap().root(), "an integer never equals a float");
    let nan = to_vec(&f64::NAN).unwrap();
    let nan = Doc::from_untrusted(&nan).unwrap().root();
    assert!(nan == nan, "NaN equals NaN: equality is reflexive");
    assert_eq!(nan.to_json(), "null");
}

#[test]
fn pretty_output_matches_serde_json_layout() {
    let text = r#"{"a":[1,{"b":[]},{}],"c":"d"}"#;
    let bytes = from_json(text.as_bytes()).unwrap();
    let ours = Doc::from_untrusted(&bytes).unwrap().root().to_json_pretty();
    let theirs = serde_json::to_string_pretty(&serde_json::from_str::<serde_json::Value>(text).unwrap()).unwrap();
    assert_eq!(ours, theirs);
}

/// `Dict::get_field_hinted` against `Dict::get_field`, whatever the hint: right, wrong, past the
/// end; over dicts of shared keys (1-byte and 2-byte ids), local keys, and keys not in the dict.
#[test]
fn a_hinted_field_lookup_finds_what_get_field_finds() {
    let mut keys = SharedKeys::new();
    let ids: Vec<u32> = (0..300).map(|i| keys.add(&format!("k{i}")).unwrap()).collect();
    for (present, local) in [(vec![0, 1, 2, 3], false), (vec![1, 5, 9], true), (vec![3, 250, 299], false), (vec![], true)] {
        let mut out = Encoder::with_shared_keys(&keys);
        out.begin_dict().unwrap();
        for &i in &present {
            out.key(&format!("k{i}")).unwrap();
            out.push_i64(i as i64).unwrap();
        }
        if local {
            out.key("local").unwrap();
            out.push_i64(-1).unwrap();
        }
        out.end_dict().unwrap();
        let bytes = out.finish().unwrap();
        let dict = Doc::from_untrusted_with_keys(&bytes, &keys).unwrap().root().as_dict().unwrap();
        let mut probes: Vec<(u32, String)> = [0, 1, 3, 5, 250, 299, 7].iter().map(|&i| (ids[i], format!("k{i}"))).collect();
        probes.push((u32::MAX, "local".to_owned()));
        for (id, name) in &probes {
            let expected = dict.get_field(*id, name).map(|value| value.as_i64());
            for start in [0, 1, 2, 3, 4, 1000] {
                let mut hint = start;
                let found = dict.get_field_hinted(*id, name, &mut hint).map(|value| value.as_i64());
                assert_eq!(found, expected, "{name} from hint {start} in {present:?}");
                if found.is_some() && *id != u32::MAX {
                    // The hint now names the entry: the next lookup takes it at once.
                    assert_eq!(dict.entry(hint).unwrap().0, name.as_str());
                }
            }
        }
    }
}

/// A value whose serialization encodes another value with `to_shared` first: the inner call
/// finds this thread's encoder busy and uses a fresh one, and neither document is disturbed.
struct EncodesInside(u32);

impl serde::Serialize for EncodesInside {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let inner = tessera_value::to_shared(&[self.0, self.0 + 1]).map_err(serde::ser::Error::custom)?;
        serializer.serialize_bytes(&inner)
    }
}

#[test]
fn to_shared_is_to_vec_in_one_allocation_and_survives_reentry_and_errors() {
    for value in [serde_json::json!(7), serde_json::json!({"a": [1, 2.5, "x"], "b": null}), serde_json::json!("text")] {
        assert_eq!(&*tessera_value::to_shared(&value).unwrap(), tessera_value::to_vec(&value).unwrap().as_slice());
    }
    let outer = tessera_value::to_shared(&EncodesInside(3)).unwrap();
    let blob = tessera_value::Doc::from_untrusted(&outer).unwrap().root().as_bytes().expect("a blob").to_vec();
    assert_eq!(tessera_value::Doc::from_untrusted(&blob).unwrap().root().to_json(), "[3,4]");
    // A failed encode (a map key that is not a string) leaves the encoder ready for the next.
    let bad = std::collections::BTreeMap::from([(vec![1u8], 1)]);
    assert!(tessera_value::to_shared(&bad).is_err());
    assert_eq!(tessera_value::Doc::from_untrusted(&tessera_value::to_shared(&5u8).unwrap()).unwrap().root().to_json(), "5");
}
