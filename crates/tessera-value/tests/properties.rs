//! Property tests against a naive model of values.

use proptest::prelude::*;
use std::collections::BTreeMap;
use tessera_value::*;

/// The model: what a document should contain.
#[derive(Debug, Clone)]
enum Model {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    Bin(Vec<u8>),
    Array(Vec<Model>),
    /// Unique keys, in insertion order.
    Dict(Vec<(String, Model)>),
}

fn key_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec!["a", "b", "name", "age", "x", "", "é", "a.b", "long key with spaces"]).prop_map(String::from),
        "[a-z]{1,12}",
        any::<String>(),
    ]
}

fn model_strategy() -> impl Strategy<Value = Model> {
    let leaf = prop_oneof![
        Just(Model::Null),
        any::<bool>().prop_map(Model::Bool),
        any::<i64>().prop_map(Model::Int),
        (-5000i64..5000).prop_map(Model::Int),
        (i64::MAX as u64 + 1..=u64::MAX).prop_map(Model::UInt),
        any::<f64>().prop_map(Model::Float),
        any::<f32>().prop_map(|f| Model::Float(f as f64)),
        prop::sample::select(vec!["", "x", "repeat me", "repeat me please, I am long enough to matter"]).prop_map(|s| Model::Str(s.into())),
        any::<String>().prop_map(Model::Str),
        prop::collection::vec(any::<u8>(), 0..40).prop_map(Model::Bin),
    ];
    let leaf = prop_oneof![4 => leaf, 1 => numbers_strategy(), 1 => rows_strategy()];
    leaf.prop_recursive(6, 200, 12, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..12).prop_map(Model::Array),
            prop::collection::vec((key_strategy(), inner), 0..12).prop_map(|entries| {
                let mut seen = std::collections::HashSet::new();
                Model::Dict(entries.into_iter().filter(|(k, _)| seen.insert(k.clone())).collect())
            }),
        ]
    })
}

/// Arrays of numbers of one class, which the encoder packs.
fn numbers_strategy() -> impl Strategy<Value = Model> {
    prop_oneof![
        prop::collection::vec(any::<i64>().prop_map(Model::Int), 1..20),
        prop::collection::vec((-130i64..130).prop_map(Model::Int), 1..20),
        prop::collection::vec((-40000i64..40000).prop_map(Model::Int), 1..20),
        prop::collection::vec(any::<f64>().prop_map(Model::Float), 1..20),
        prop::collection::vec(any::<f32>().prop_map(|f| Model::Float(f as f64)), 1..20),
        // one class, several widths: the widest decides
        prop::collection::vec(prop_oneof![any::<f32>().prop_map(|f| Model::Float(f as f64)), any::<f64>().prop_map(Model::Float)], 1..20),
        // mixed classes, which stay slot arrays
        prop::collection::vec(prop_oneof![(-5i64..5).prop_map(Model::Int), any::<f32>().prop_map(|f| Model::Float(f as f64))], 1..8),
    ]
    .prop_map(Model::Array)
}

/// Arrays of equally long number arrays (matrices), sometimes with one row of another length.
fn rows_strategy() -> impl Strategy<Value = Model> {
    (1usize..5, 1usize..8, any::<bool>(), any::<bool>(), any::<u64>()).prop_map(|(columns, rows, floats, ragged, seed)| {
        let mut state = seed | 1;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut number = |row: usize| {
            let raw = next();
            match (floats, row % 2) {
                (true, 0) => Model::Float((raw % 1000) as f64 / 8.0),
                (true, _) => Model::Float(f64::from_bits(raw)),
                (false, 0) => Model::Int((raw % 200) as i64 - 100),
                (false, _) => Model::Int(raw as i64),
            }
        };
        let mut matrix: Vec<Model> = (0..rows).map(|row| Model::Array((0..columns).map(|_| number(row)).collect())).collect();
        if ragged {
            matrix.push(Model::Array((0..columns + 1).map(|_| number(0)).collect()));
        }
        Model::Array(matrix)
    })
}

fn encode(model: &Model, encoder: &mut Encoder<'_>) {
    match model {
        Model::Null => encoder.push_null().unwrap(),
        Model::Bool(b) => encoder.push_bool(*b).unwrap(),
        Model::Int(v) => encoder.push_i64(*v).unwrap(),
        Model::UInt(v) => encoder.push_u64(*v).unwrap(),
        Model::Float(v) => encoder.push_f64(*v).unwrap(),
        Model::Str(s) => encoder.push_str(s).unwrap(),
        Model::Bin(b) => encoder.push_bytes(b).unwrap(),
        Model::Array(items) => {
            encoder.begin_array().unwrap();
            items.iter().for_each(|item| encode(item, encoder));
            encoder.end_array().unwrap();
        }
        Model::Dict(entries) => {
            encoder.begin_dict().unwrap();
            for (key, value) in entries {
                encoder.key(key).unwrap();
                encode(value, encoder);
            }
            encoder.end_dict().unwrap();
        }
    }
}

fn to_bytes(model: &Model) -> Vec<u8> {
    let mut encoder = Encoder::new();
    encode(model, &mut encoder);
    encoder.finish().unwrap()
}

/// Asserts that `value` holds exactly what `model` says.
fn check(value: Value<'_>, model: &Model) {
    match model {
        Model::Null => assert_eq!(value.kind(), Kind::Null),
        Model::Bool(b) => assert_eq!(value.as_bool(), Some(*b)),
        Model::Int(v) => {
            assert_eq!(value.kind(), Kind::Int);
            assert_eq!(value.as_i64(), Some(*v));
        }
        Model::UInt(v) => {
            assert_eq!(value.kind(), Kind::UInt);
            assert_eq!(value.as_u64(), Some(*v));
        }
        Model::Float(v) => {
            assert_eq!(value.kind(), Kind::Float);
            assert_eq!(value.as_f64().unwrap().to_bits(), v.to_bits(), "float stored exactly");
        }
        Model::Str(s) => assert_eq!(value.as_str(), Some(s.as_str())),
        Model::Bin(b) => assert_eq!(value.as_bytes(), Some(b.as_slice())),
        Model::Array(items) => {
            let array = value.as_array().expect("array");
            assert_eq!(array.len(), items.len());
            assert!(array.get(items.len()).is_none());
            for (index, item) in items.iter().enumerate() {
                check(array.get(index).unwrap(), item);
            }
        }
        Model::Dict(entries) => {
            let dict = value.as_dict().expect("dict");
            assert_eq!(dict.len(), entries.len());
            for (key, item) in entries {
                check(dict.get(key).unwrap_or_else(|| panic!("key {key:?} missing")), item);
                check(dict.get_key(&DictKey::new(key)).unwrap(), item);
            }
            assert!(dict.get("\u{0}no such key\u{0}").is_none());
            let stored: BTreeMap<&str, ()> = dict.iter().map(|(k, _)| (k, ())).collect();
            let expected: BTreeMap<&str, ()> = entries.iter().map(|(k, _)| (k.as_str(), ())).collect();
            assert_eq!(stored, expected);
        }
    }
}

fn json_value_strategy() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value as J;
    let leaf = prop_oneof![
        Just(J::Null),
        any::<bool>().prop_map(J::Bool),
        any::<i64>().prop_map(J::from),
        any::<u64>().prop_map(J::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(J::from),
        any::<String>().prop_map(J::String),
    ];
    leaf.prop_recursive(5, 100, 10, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..10).prop_map(J::Array),
            prop::collection::btree_map(key_strategy(), inner, 0..10).prop_map(|m| J::Object(m.into_iter().collect())),
        ]
    })
}

fn has_float(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::Number(n) => n.is_f64(),
        serde_json::Value::Array(items) => items.iter().any(has_float),
        serde_json::Value::Object(map) => map.values().any(has_float),
        _ => false,
    }
}

/// Decimal number texts of every shape JSON allows: signs, leading-zero fractions, long
/// significands, exponents near and far from the fast path's range.
fn number_text_strategy() -> impl Strategy<Value = String> {
    (any::<bool>(), "(0|[1-9][0-9]{0,20})", prop::option::of("[0-9]{1,25}"), prop::option::of((any::<bool>(), 0u32..330))).prop_map(
        |(negative, integer, fraction, exponent)| {
            let mut text = String::new();
            if negative {
                text.push('-');
            }
            text.push_str(&integer);
            if let Some(fraction) = fraction {
                text.push('.');
                text.push_str(&fraction);
            }
            if let Some((negative, exponent)) = exponent {
                text.push_str(if negative { "e-" } else { "E+" });
                text.push_str(&exponent.to_string());
            }
            text
        },
    )
}

proptest! {
    /// Every number parses to what the standard library's correctly rounded parser gives, or,
    /// beyond f64's range, is refused.
    #[test]
    fn numbers_parse_like_the_standard_library(text in number_text_strategy()) {
        let expected: f64 = text.parse().unwrap();
        if expected.is_infinite() {
            // Beyond f64's range: refused, never stored as an infinity.
            prop_assert_eq!(from_json(text.as_bytes()).unwrap_err().kind, tessera_value::JsonErrorKind::TooLarge, "{}", text);
            return Ok(());
        }
        let bytes = from_json(text.as_bytes()).unwrap();
        let value = Doc::from_untrusted(&bytes).unwrap().root();
        match value.kind() {
            Kind::Int | Kind::UInt => {
                prop_assert!(!text.contains(['.', 'e', 'E']), "{text}");
                let integer = value.as_i64().map(|v| v as i128).or(value.as_u64().map(|v| v as i128)).unwrap();
                prop_assert_eq!(integer, text.parse::<i128>().unwrap());
            }
            Kind::Float => prop_assert_eq!(value.as_f64().unwrap().to_bits(), expected.to_bits(), "{}", text),
            other => prop_assert!(false, "{text} gave {other:?}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn encode_validate_read_round_trips(model in model_strategy()) {
        let bytes = to_bytes(&model);
        let doc = Doc::from_untrusted(&bytes).expect("encoder output validates");
        check(doc.root(), &model);
        check(Doc::from_trusted(&bytes).unwrap().root(), &model);
        // Deep equality is reflexive, and a copy into a new document is equal.
        prop_assert!(doc.root() == doc.root());
        let mut copy = Encoder::new();
        copy.push_value(doc.root()).unwrap();
        let copied = copy.finish().unwrap();
        prop_assert!(Doc::from_untrusted(&copied).unwrap().root() == doc.root());
    }

    #[test]
    fn json_to_binary_to_json_matches_serde_json(value in json_value_strategy(), pretty in any::<bool>()) {
        let text = if pretty { serde_json::to_string_pretty(&value).unwrap() } else { serde_json::to_string(&value).unwrap() };
        let bytes = from_json(text.as_bytes()).unwrap();
        let root = Doc::from_untrusted(&bytes).unwrap().root();
        let back: serde_json::Value = serde_json::from_str(&root.to_json()).unwrap();
        prop_assert_eq!(&back, &value);
        // Decoding through serde gives the same view, and so does encoding through serde.
        let decoded: serde_json::Value = from_value(root).unwrap();
        prop_assert_eq!(&decoded, &value);
        let serialized = to_vec(&value).unwrap();
        prop_assert!(Doc::from_untrusted(&serialized).unwrap().root() == root);
        // The shared form is the same bytes, from the same reused encoder.
        prop_assert_eq!(&*to_shared(&value).unwrap(), serialized.as_slice());
        // Canonical output is serde_json's sorted-key output (whose float exponents are
        // written `e+N` where ryu writes `eN`, so floats are compared as values).
        let canonical = root.to_json_canonical();
        if has_float(&value) {
            prop_assert_eq!(serde_json::from_str::<serde_json::Value>(&canonical).unwrap(), value);
        } else {
            prop_assert_eq!(canonical, serde_json::to_string(&value).unwrap());
        }
    }

    #[test]
    fn corrupt_bytes_never_panic(model in model_strategy(), edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4), cut in any::<prop::sample::Index>()) {
        let bytes = to_bytes(&model);
        let mut corrupt = bytes.clone();
        for (index, byte) in &edits {
            let at = index.index(corrupt.len());
            corrupt[at] = *byte;
        }
        for input in [&corrupt[..], &bytes[..cut.index(bytes.len())]] {
            if let Ok(doc) = Doc::from_untrusted(input) {
                // Whatever validates must be readable in full without a panic.
                let root = doc.root();
                let _ = root.to_json();
                let _ = root.to_json_pretty();
                let _ = from_value::<serde_json::Value>(root);
                prop_assert!(root == root);
            }
        }
    }

    #[test]
    fn amend_equals_a_fresh_encode(model in model_strategy(), key in key_strategy(), new_value in model_strategy()) {
        let bytes = to_bytes(&model);
        let doc = Doc::from_untrusted(&bytes).unwrap();
        let mut edit = MutableDoc::new(doc);
        let root = edit.root_mut();
        let edited = match model {
            Model::Dict(_) => root.set(&key, Mutable::from(doc.root())).is_ok(),
            Model::Array(_) => root.push(Mutable::from(doc.root())).is_ok(),
            _ => false,
        };
        // Also replace the first element or entry, where there is one, with a new value.
        let replacement = to_bytes(&new_value);
        let replacement_doc = Doc::from_untrusted(&replacement).unwrap();
        if let Ok(Some(first)) = edit.root_mut().index_mut(0) {
            *first = Mutable::Original(replacement_doc.root());
        }
        let fresh = edit.encode().unwrap();
        let amended = edit.amend().unwrap();
        prop_assert!(amended.starts_with(&bytes));
        let fresh_doc = Doc::from_untrusted(&fresh).unwrap();
        let amended_doc = Doc::from_untrusted(&amended).expect("amended document validates");
        prop_assert!(fresh_doc.root() == amended_doc.root());
        if !edited {
            prop_assert!(fresh_doc.root() == doc.root());
        }
    }

    #[test]
    fn shared_keys_are_used_and_required(model in model_strategy(), table_keys in prop::collection::vec(key_strategy(), 0..6)) {
        let mut shared = SharedKeys::new();
        for key in &table_keys {
            shared.add(key).unwrap();
        }
        let mut encoder = Encoder::with_shared_keys(&shared);
        encode(&model, &mut encoder);
        let bytes = encoder.finish().unwrap();
        let doc = Doc::from_untrusted_with_keys(&bytes, &shared).unwrap();
        check(doc.root(), &model);
        if !shared.is_empty() {
            let missing = Doc::from_untrusted(&bytes);
            prop_assert!(matches!(missing, Err(FormatError::MissingSharedKeys { .. })), "{:?}", missing);
        }
    }
}
