//! The generated codec (`#[derive(Record)]`, `#[derive(Embed)]`) against serde, on random
//! nested structs, enums, options, vectors and maps: each reads what the other writes, with
//! shared keys and without, and both give the same JSON.

use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use tessera::codec::{FieldIds, FieldProblem, decode, encode, encode_into};
use tessera::collection::{Embed, Record};
use tessera_value::{Doc, SharedKeys};

#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "everything")]
struct Everything {
    #[record(key)]
    id: u64,
    small: i8,
    wide: i64,
    unsigned: u32,
    huge: u64,
    ratio: f64,
    single: f32,
    flag: bool,
    letter: char,
    text: String,
    maybe: Option<String>,
    nested: Option<Box<Node>>,
    list: Vec<Shape>,
    grid: Vec<Vec<i16>>,
    by_name: BTreeMap<String, Shape>,
    counts: HashMap<String, u8>,
    point: Point,
    pair: Pair,
    unit: Marker,
}

#[derive(Serialize, Deserialize, Embed, Debug, Clone, PartialEq)]
struct Node {
    label: String,
    children: Vec<Node>,
}

#[derive(Serialize, Deserialize, Embed, Debug, Clone, PartialEq)]
enum Shape {
    Empty,
    Circle(f64),
    Rect { w: u16, h: u16 },
    Pair(i32, String),
    Tagged { note: Option<String>, inner: Point },
}

#[derive(Serialize, Deserialize, Embed, Debug, Clone, PartialEq)]
struct Point {
    x: i32,
    y: i32,
}

#[derive(Serialize, Deserialize, Embed, Debug, Clone, PartialEq)]
struct Pair(u8, bool);

#[derive(Serialize, Deserialize, Embed, Debug, Clone, PartialEq)]
struct Marker;

fn text() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z]{0,8}", "\\PC{0,12}", Just(String::new())]
}

fn point() -> impl Strategy<Value = Point> {
    (any::<i32>(), any::<i32>()).prop_map(|(x, y)| Point { x, y })
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        Just(Shape::Empty),
        any::<f64>().prop_filter("NaN never equals itself", |f| !f.is_nan()).prop_map(Shape::Circle),
        (any::<u16>(), any::<u16>()).prop_map(|(w, h)| Shape::Rect { w, h }),
        (any::<i32>(), text()).prop_map(|(n, s)| Shape::Pair(n, s)),
        (prop::option::of(text()), point()).prop_map(|(note, inner)| Shape::Tagged { note, inner }),
    ]
}

fn node() -> impl Strategy<Value = Node> {
    let leaf = text().prop_map(|label| Node { label, children: Vec::new() });
    leaf.prop_recursive(3, 12, 3, |inner| {
        (text(), prop::collection::vec(inner, 0..3)).prop_map(|(label, children)| Node { label, children })
    })
}

fn everything() -> impl Strategy<Value = Everything> {
    let scalars =
        (any::<u64>(), any::<i8>(), any::<i64>(), any::<u32>(), any::<u64>(), any::<f64>(), any::<f32>(), any::<bool>(), any::<char>());
    let texts = (text(), prop::option::of(text()), prop::option::of(node().prop_map(Box::new)));
    let containers = (
        prop::collection::vec(shape(), 0..4),
        prop::collection::vec(prop::collection::vec(any::<i16>(), 0..3), 0..3),
        prop::collection::btree_map(text(), shape(), 0..4),
        prop::collection::hash_map(text(), any::<u8>(), 0..4),
        point(),
        (any::<u8>(), any::<bool>()).prop_map(|(a, b)| Pair(a, b)),
    );
    (scalars, texts, containers)
        .prop_filter("NaN never equals itself", |((_, _, _, _, _, ratio, single, _, _), _, _)| !ratio.is_nan() && !single.is_nan())
        .prop_map(
            |(
                (id, small, wide, unsigned, huge, ratio, single, flag, letter),
                (text, maybe, nested),
                (list, grid, by_name, counts, point, pair),
            )| {
                Everything {
                    id,
                    small,
                    wide,
                    unsigned,
                    huge,
                    ratio,
                    single,
                    flag,
                    letter,
                    text,
                    maybe,
                    nested,
                    list,
                    grid,
                    by_name,
                    counts,
                    point,
                    pair,
                    unit: Marker,
                }
            },
        )
}

/// The shared-key table a collection of `Everything` would have, and its field ids.
fn collection_keys() -> (SharedKeys, FieldIds) {
    let lists = FieldIds::lists_of::<Everything>();
    let mut keys = SharedKeys::new();
    for name in lists.iter().flat_map(|list| list.iter()) {
        keys.add(name).unwrap();
    }
    let ids = FieldIds::resolve(&keys, lists);
    (keys, ids)
}

fn json(doc: Doc<'_>) -> serde_json::Value {
    serde_json::from_str(&doc.root().to_json()).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn codec_and_serde_read_each_other(value in everything()) {
        let (keys, ids) = collection_keys();
        let plain = FieldIds::default();

        // The codec without shared keys writes what serde writes: the same JSON, read both ways.
        let by_codec = encode(&value, &plain).unwrap();
        let by_serde = tessera_value::to_vec(&value).unwrap();
        let codec_doc = Doc::from_untrusted(&by_codec).unwrap();
        let serde_doc = Doc::from_untrusted(&by_serde).unwrap();
        prop_assert_eq!(json(codec_doc), json(serde_doc));
        prop_assert_eq!(&decode::<Everything>(serde_doc.root(), &plain).unwrap(), &value);
        prop_assert_eq!(&tessera_value::from_value::<Everything>(codec_doc.root()).unwrap(), &value);

        // With shared keys: the codec's own round trip, serde reading it, and the codec
        // reading serde's layout (a record written before keys were shared) with ids resolved.
        let mut shared_bytes = Vec::new();
        encode_into(&value, Some(&keys), &ids, &mut shared_bytes).unwrap();
        let shared_doc = Doc::from_untrusted_with_keys(&shared_bytes, &keys).unwrap();
        prop_assert_eq!(&decode::<Everything>(shared_doc.root(), &ids).unwrap(), &value);
        prop_assert_eq!(&tessera_value::from_value::<Everything>(shared_doc.root()).unwrap(), &value);
        prop_assert_eq!(&decode::<Everything>(serde_doc.root(), &ids).unwrap(), &value);
        // (Dicts list entries in key-id order, so compare as JSON values, not text.)
        prop_assert_eq!(json(shared_doc), json(serde_doc));
        prop_assert!(shared_bytes.len() <= by_serde.len(), "shared keys never make a record larger");
    }
}

#[test]
fn struct_fields_are_stored_as_one_byte_shared_ids() {
    let (keys, ids) = collection_keys();
    let value = Point { x: 1, y: 2 };
    let mut bytes = Vec::new();
    encode_into(&value, Some(&keys), &ids, &mut bytes).unwrap();
    let doc = Doc::from_untrusted_with_keys(&bytes, &keys).unwrap();
    assert_eq!(doc.key_index_kind(), None, "no local key strings");
    assert_eq!(doc.root().get("y").unwrap().as_i64(), Some(2));
    assert!(bytes.len() < tessera_value::to_vec(&value).unwrap().len());
}

#[test]
fn decode_errors_name_the_field_path() {
    let plain = FieldIds::default();
    let check = |json: &str, path: &str, problem: FieldProblem| {
        let bytes = tessera_value::from_json(json.as_bytes()).unwrap();
        let doc = Doc::from_untrusted(&bytes).unwrap();
        let error = decode::<Node>(doc.root(), &plain).unwrap_err();
        assert_eq!((error.path.as_str(), &error.problem), (path, &problem), "{json}");
    };
    check(r#"{"children": []}"#, "label", FieldProblem::Missing);
    check(r#"{"label": 3, "children": []}"#, "label", FieldProblem::WrongType { expected: "a string", found: tessera_value::Kind::Int });
    check(
        r#"{"label": "a", "children": [{"label": "b", "children": [{"label": "c", "children": {}}]}]}"#,
        "children[0].children[0].children",
        FieldProblem::WrongType { expected: "an array", found: tessera_value::Kind::Dict },
    );
    let bytes = tessera_value::from_json(br#"{"Hexagon": 6}"#).unwrap();
    let error = decode::<Shape>(Doc::from_untrusted(&bytes).unwrap().root(), &plain).unwrap_err();
    assert_eq!(error.problem, FieldProblem::UnknownVariant("Hexagon".into()));
    let bytes = tessera_value::from_json(br#"{"Rect": {"w": 1, "h": 70000}}"#).unwrap();
    let error = decode::<Shape>(Doc::from_untrusted(&bytes).unwrap().root(), &plain).unwrap_err();
    assert_eq!((error.path.as_str(), error.problem), ("Rect.h", FieldProblem::OutOfRange { expected: "u16" }));
}

#[derive(Serialize, Deserialize, Embed, Debug, Clone, PartialEq)]
struct Ordered {
    a: u8,
    b: Option<String>,
    c: Vec<f64>,
}

#[derive(Serialize, Deserialize, Embed, Debug, Clone, PartialEq)]
struct Fewer {
    a: u8,
    c: Vec<f64>,
}

/// Fields are found by their expected position first; when ids do not ascend in declaration
/// order, or a field is absent, the search still finds every one.
#[test]
fn fields_are_found_whatever_the_order_of_their_ids() {
    let value = Ordered { a: 7, b: Some("x".into()), c: vec![0.5, 0.25] };
    let lists = FieldIds::lists_of::<Ordered>();
    for order in [["a", "b", "c"], ["c", "a", "b"], ["b", "c", "a"]] {
        let mut keys = SharedKeys::new();
        for name in order {
            keys.add(name).unwrap();
        }
        let ids = FieldIds::resolve(&keys, lists.iter().copied());
        let mut bytes = Vec::new();
        encode_into(&value, Some(&keys), &ids, &mut bytes).unwrap();
        let doc = Doc::from_untrusted_with_keys(&bytes, &keys).unwrap();
        assert_eq!(decode::<Ordered>(doc.root(), &ids).unwrap(), value, "{order:?}");
        // A record written without `b` (an older layout) reads with `b` missing: `None`.
        let fewer_ids = FieldIds::resolve(&keys, FieldIds::lists_of::<Fewer>());
        encode_into(&Fewer { a: 7, c: vec![1.0] }, Some(&keys), &fewer_ids, &mut bytes).unwrap();
        let doc = Doc::from_untrusted_with_keys(&bytes, &keys).unwrap();
        assert_eq!(decode::<Ordered>(doc.root(), &ids).unwrap(), Ordered { a: 7, b: None, c: vec![1.0] }, "{order:?}");
    }
}
