//! Adversarial review of in-place edits (`MutableDoc`, `amend`), packed numbers, copies and
//! equality. Tests marked "failed before its fix" showed a defect (2026-12-01); the others guard behaviour
//! checked and found correct.

use tessera_value::layout::PackedNumber;
use tessera_value::*;

fn open(bytes: &[u8]) -> Value<'_> {
    Doc::from_untrusted(bytes).expect("valid document").root()
}

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_str(&open(bytes).to_json()).unwrap()
}

// ------------------------------------------------------------------ amend and rule 9

/// Failed before its fix. An edit that places one original subtree several times (which validate.rs says is
/// legal: "an edit may place one original subtree twice") is amended as pointers to the one
/// original item. `amend` returns Ok, but the bytes break validity rule 9 (at most 4
/// expanded items per byte) and `Doc::from_untrusted` refuses them with `SharedContainer`:
/// the mutator wrote a document the validator refuses. `encode` of the same edit is fine.
/// Correct: `amend` writes bytes that validate (copy a subtree once its pointers would break
/// the bound), or returns a typed error.
#[test]
fn amend_placing_one_original_subtree_many_times_validates() {
    let numbers: Vec<String> = (0..100).map(|i| i.to_string()).collect();
    let text = format!(r#"{{"v": [{}]}}"#, numbers.join(","));
    let bytes = from_json(text.as_bytes()).unwrap();
    let doc = Doc::from_untrusted(&bytes).unwrap();
    let v = doc.root().get("v").unwrap();
    let mut edit = MutableDoc::new(doc);
    edit.root_mut().set("w", Mutable::Array(vec![Mutable::Original(v); 64])).unwrap();
    let fresh = edit.encode().unwrap();
    assert_eq!(open(&fresh).get("w").unwrap().len(), 64);
    let amended = edit.amend().expect("amend returns Ok");
    let checked = Doc::from_untrusted(&amended);
    assert!(checked.is_ok(), "amend wrote {} bytes that validation refuses: {:?}", amended.len(), checked.err());
    assert!(open(&amended) == open(&fresh));
}

/// Failed before its fix (same defect, two placements at a time): each amend of a chain places the previous
/// value twice, which validate.rs calls legal. The expanded tree doubles with each amend while
/// the bytes grow by a constant, so after a few amends `amend` returns Ok with bytes that
/// `Doc::from_untrusted` refuses; every step's `encode` (a copy) stays valid.
#[test]
fn a_chain_of_amends_each_placing_a_subtree_twice_validates() {
    let mut bytes = from_json(br#"{"w": [1, 2, 3, 4, 5, 6, 7, 8]}"#).unwrap();
    for step in 0..16 {
        let doc = Doc::from_untrusted(&bytes).unwrap_or_else(|e| panic!("amend {step} wrote bytes refused: {e:?}"));
        let w = doc.root().get("w").unwrap();
        let mut edit = MutableDoc::new(doc);
        edit.root_mut().set("w", Mutable::Array(vec![Mutable::Original(w), Mutable::Original(w)])).unwrap();
        let next = edit.amend().expect("amend returns Ok");
        bytes = next;
    }
    assert!(Doc::from_untrusted(&bytes).is_ok());
}

// ------------------------------------------------------------------ shared keys

/// Guards: a document encoded when the shared table had 1 key, opened with the table grown
/// to 3, amended and re-encoded with keys that are (now) shared at ids >= S. The amend keeps
/// S and stores such keys as local; the fresh encode takes the longer table. Both validate
/// with the table and read back every key.
#[test]
fn amend_and_encode_with_a_shared_table_grown_since_encoding() {
    let mut keys = SharedKeys::new();
    keys.add("a").unwrap();
    let options = JsonOptions { shared_keys: Some(&keys), ..JsonOptions::default() };
    let bytes = from_json_with(br#"{"a": 1, "b": 2}"#, &options).unwrap();
    let mut grown = keys.clone();
    grown.add("b").unwrap();
    grown.add("c").unwrap();
    let doc = Doc::from_untrusted_with_keys(&bytes, &grown).unwrap();
    let mut edit = MutableDoc::new(doc);
    edit.root_mut().set("c", 3i64).unwrap();
    edit.root_mut().set("d", Mutable::Dict(vec![("b".into(), 4i64.into()), ("c".into(), 5i64.into()), ("a".into(), 6i64.into())])).unwrap();
    let expected = serde_json::json!({"a": 1, "b": 2, "c": 3, "d": {"a": 6, "b": 4, "c": 5}});
    for out in [edit.amend().unwrap(), edit.encode().unwrap()] {
        let doc = Doc::from_untrusted_with_keys(&out, &grown).expect("validates with the grown table");
        let got: serde_json::Value = serde_json::from_str(&doc.root().to_json()).unwrap();
        assert_eq!(got, expected);
        assert_eq!(doc.root().path("d.c").unwrap().unwrap().as_i64(), Some(5));
    }
    // The amended document still opens with the table it was written against.
    let amended = edit.amend().unwrap();
    let doc = Doc::from_untrusted_with_keys(&amended, &keys).expect("amend keeps S");
    assert_eq!(doc.root().get("c").unwrap().as_i64(), Some(3));
}

// ------------------------------------------------------------------ packed vectors

fn edit_vector(text: &str, index: usize, value: Mutable<'static>) -> (Vec<u8>, Vec<u8>) {
    let bytes = from_json(text.as_bytes()).unwrap();
    let doc = Doc::from_untrusted(&bytes).unwrap();
    let mut edit = MutableDoc::new(doc);
    edit.root_mut().path_mut("v").unwrap().set_index(index, value).unwrap();
    (edit.encode().unwrap(), edit.amend().unwrap())
}

/// Guards: setting a float, an out-of-range integer, a u64 above i64::MAX or a string into
/// packed vectors reads back the value set, with every other element unchanged, encoded fresh
/// or amended.
#[test]
fn edits_of_packed_vectors_keep_every_value() {
    let cases: Vec<(&str, usize, Mutable<'static>, serde_json::Value)> = vec![
        (r#"{"v": [1, 2, 3]}"#, 1, Mutable::Float(2.5), serde_json::json!([1, 2.5, 3])),
        (r#"{"v": [1, 2, 3]}"#, 1, Mutable::Float(2.0), serde_json::json!([1, 2.0, 3])),
        (r#"{"v": [1000, 2000]}"#, 0, Mutable::Int(40000), serde_json::json!([40000, 2000])),
        (r#"{"v": [1000, 2000]}"#, 0, Mutable::Int(i64::MIN), serde_json::json!([i64::MIN, 2000])),
        (r#"{"v": [1000, 2000]}"#, 0, Mutable::UInt(u64::MAX), serde_json::json!([u64::MAX, 2000])),
        (r#"{"v": [1000, 2000]}"#, 1, Mutable::UInt(7), serde_json::json!([1000, 7])),
        (r#"{"v": [0.5, 1.5]}"#, 0, Mutable::Float(0.1), serde_json::json!([0.1, 1.5])),
        (r#"{"v": [0.5, 1.5]}"#, 0, Mutable::Int(3), serde_json::json!([3, 1.5])),
        (r#"{"v": [0.1, 0.2]}"#, 1, Mutable::Float(f64::MIN_POSITIVE), serde_json::json!([0.1, f64::MIN_POSITIVE])),
        (
            r#"{"v": [[1, 2], [3, 4]]}"#,
            0,
            Mutable::Array(vec![Mutable::Float(1.5), Mutable::Float(2.5)]),
            serde_json::json!([[1.5, 2.5], [3, 4]]),
        ),
        (
            r#"{"v": [[1, 2], [3, 4]]}"#,
            1,
            Mutable::Array(vec![Mutable::Int(100000), Mutable::Int(-1)]),
            serde_json::json!([[1, 2], [100000, -1]]),
        ),
        (r#"{"v": [[1, 2], [3, 4]]}"#, 1, Mutable::Array(vec![Mutable::Int(5)]), serde_json::json!([[1, 2], [5]])),
    ];
    for (text, index, value, expected) in cases {
        let (fresh, amended) = edit_vector(text, index, value.clone());
        for out in [&fresh, &amended] {
            let got = open(out).get("v").unwrap();
            let got_json: serde_json::Value = serde_json::from_str(&got.to_json()).unwrap();
            assert_eq!(got_json, expected, "{text} set [{index}] = {value:?}");
            let expected_bytes = to_vec(&expected).unwrap();
            assert!(got == open(&expected_bytes), "{text} set [{index}]: {got:?} != {expected}");
        }
    }
}

/// Guards: copying packed vectors and matrices (f32, f64, each integer width, mixed-width
/// rows) into a fresh encode keeps every value bit for bit, and keeps them packed.
#[test]
fn copies_of_packed_arrays_keep_values_and_packing() {
    let mut enc = Encoder::new();
    enc.begin_dict().unwrap();
    enc.key("f32").unwrap();
    enc.push_f64s(&[0.5, 1.0e-40, -0.0, f32::MAX as f64, f32::MIN_POSITIVE as f64]).unwrap();
    enc.key("f64").unwrap();
    enc.push_f64s(&[0.1, -0.0, f64::MAX, 5e-324]).unwrap();
    enc.key("ints").unwrap();
    enc.push_i64s(&[i64::MIN, i64::MAX, 0]).unwrap();
    enc.key("m").unwrap();
    enc.begin_array().unwrap();
    enc.push_i64s(&[1, 2]).unwrap();
    enc.push_i64s(&[70000, -70000]).unwrap();
    enc.end_array().unwrap();
    enc.key("fm").unwrap();
    enc.begin_array().unwrap();
    enc.push_f64s(&[0.5, 0.25]).unwrap();
    enc.push_f64s(&[0.1, 0.3]).unwrap();
    enc.end_array().unwrap();
    enc.end_dict().unwrap();
    let source = enc.finish().unwrap();
    let root = open(&source);
    // Into another document, through push_value, and through a MutableDoc over a third one.
    let mut enc = Encoder::new();
    enc.push_value(root).unwrap();
    let copied = enc.finish().unwrap();
    let base = from_json(br#"{"x": 1}"#).unwrap();
    let mut edit = MutableDoc::new(Doc::from_untrusted(&base).unwrap());
    edit.root_mut().set("all", root).unwrap();
    let (fresh, amended) = (edit.encode().unwrap(), edit.amend().unwrap());
    for (name, out) in [("push_value", copied.as_slice()), ("encode", &fresh), ("amend", &amended)] {
        let doc = Doc::from_untrusted(out).unwrap();
        let got = if name == "push_value" { doc.root() } else { doc.root().get("all").unwrap() };
        assert!(got == root, "{name}: {got:?}");
        for key in ["f32", "f64", "ints"] {
            let a = root.get(key).unwrap().as_array().unwrap().numbers().unwrap();
            let b = got.get(key).unwrap().as_array().unwrap().numbers().expect("still packed");
            let bits = |n: tessera_value::Numbers<'_>| n.iter_f64().map(f64::to_bits).collect::<Vec<_>>();
            assert_eq!(bits(a), bits(b), "{name} {key}");
            assert_eq!(a.to_i64_vec(), b.to_i64_vec(), "{name} {key}");
        }
        let m = got.get("m").unwrap().as_array().unwrap();
        assert_eq!(m.get(1).unwrap().as_array().unwrap().numbers().unwrap().to_i64_vec(), Some(vec![70000, -70000]));
        assert_eq!(m.get(0).unwrap().as_array().unwrap().numbers().unwrap().number_type(), PackedNumber::I32);
        let fm = got.get("fm").unwrap().as_array().unwrap();
        assert_eq!(fm.get(1).unwrap().as_array().unwrap().numbers().unwrap().to_f64_vec(), [0.1, 0.3]);
        assert_eq!(fm.get(0).unwrap().as_array().unwrap().numbers().unwrap().to_f64_vec(), [0.5, 0.25]);
    }
}

// ------------------------------------------------------------------ spec examples

/// Guards the byte-exact examples of docs/format.md, "Packed numeric arrays".
#[test]
fn spec_examples_of_packed_arrays_are_byte_exact() {
    let matrix = from_json(b"[[1.5,2.5],[0.5,3.0]]").unwrap();
    assert_eq!(
        matrix,
        [0x3c, 0x02, 0x02, 0x00, 0, 0, 0xc0, 0x3f, 0, 0, 0x20, 0x40, 0, 0, 0, 0x3f, 0, 0, 0x40, 0x40, 0x70, 0x05, 0x28, 0x14, 0x30]
    );
    let vector = from_json(b"[1,300,-2]").unwrap();
    assert_eq!(vector, [0x31, 0x03, 0x01, 0x00, 0x2c, 0x01, 0xfe, 0xff, 0x70, 0x05, 0x10, 0x08, 0x30]);
}

// ------------------------------------------------------------------ amend of large documents

/// Guards: a document over 64 KiB whose strings repeat far apart (atoms), amended with new
/// far repeats of both original and new strings, in a chain of amends: each result validates
/// and equals a fresh encode of the same edits.
#[test]
fn amends_of_a_large_document_with_atoms_validate() {
    let filler = "x".repeat(20_000);
    let text = format!(
        r#"{{"a": "repeated string value", "f1": "{filler}1", "b": "repeated string value", "f2": "{filler}2", "c": "repeated string value", "f3": "{filler}3", "d": "repeated string value"}}"#
    );
    let mut bytes = from_json(text.as_bytes()).unwrap();
    let mut model: serde_json::Value = serde_json::from_str(&text).unwrap();
    for step in 0..6 {
        let doc = Doc::from_untrusted(&bytes).unwrap_or_else(|e| panic!("step {step}: {e:?}"));
        let mut edit = MutableDoc::new(doc);
        let root = edit.root_mut();
        root.set(&format!("n{step}"), "a brand new string, repeated").unwrap();
        root.set(&format!("g{step}"), Mutable::String(format!("{filler}{step}g"))).unwrap();
        root.set(&format!("m{step}"), "a brand new string, repeated").unwrap();
        root.set(&format!("o{step}"), doc.root().get("a").unwrap()).unwrap();
        root.set(&format!("p{step}"), "repeated string value").unwrap();
        root.set("a", Mutable::Array(vec!["repeated string value".into(), doc.root().get("d").unwrap().into()])).unwrap();
        model[format!("n{step}")] = "a brand new string, repeated".into();
        model[format!("g{step}")] = format!("{filler}{step}g").into();
        model[format!("m{step}")] = "a brand new string, repeated".into();
        model[format!("o{step}")] = model["a"].clone();
        model[format!("p{step}")] = "repeated string value".into();
        model["a"] = serde_json::json!(["repeated string value", "repeated string value"]);
        let fresh = edit.encode().unwrap();
        let amended = edit.amend().unwrap();
        assert_eq!(json(&fresh), model, "step {step} fresh");
        assert_eq!(json(&amended), model, "step {step} amended");
        bytes = amended;
    }
}

/// Guards: 300 amends in a row, each setting one key, each validating and reading back.
#[test]
fn a_long_chain_of_amends_validates_and_reads_back() {
    let mut bytes = from_json(br#"{"count": 0, "list": [1, 2, 3]}"#).unwrap();
    for step in 1..=300i64 {
        let doc = Doc::from_untrusted(&bytes).unwrap_or_else(|e| panic!("step {step}: {e:?}"));
        let mut edit = MutableDoc::new(doc);
        edit.root_mut().set("count", step).unwrap();
        edit.root_mut().path_mut("list").unwrap().push(step).unwrap();
        if step % 7 == 0 {
            edit.root_mut().set(&format!("k{step}"), Mutable::Float(step as f64 + 0.5)).unwrap();
        }
        bytes = edit.amend().unwrap();
    }
    let root = open(&bytes);
    assert_eq!(root.get("count").unwrap().as_i64(), Some(300));
    assert_eq!(root.get("list").unwrap().len(), 303);
    assert_eq!(root.get("k294").unwrap().as_f64(), Some(294.5));
}

// ------------------------------------------------------------------ shared keys, against a model

use proptest::prelude::*;

fn small_json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<i64>().prop_map(serde_json::Value::from),
        (-20i64..20).prop_map(serde_json::Value::from),
        any::<f32>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| serde_json::Value::from(f as f64)),
        "[a-z]{0,5}".prop_map(serde_json::Value::from),
        prop::collection::vec(-300i64..300, 1..5).prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            prop::collection::vec(("[a-e]", inner), 0..4).prop_map(|e| serde_json::Value::Object(e.into_iter().collect())),
        ]
    })
}

fn to_mutable(value: &serde_json::Value) -> Mutable<'static> {
    use serde_json::Value as J;
    match value {
        J::Null => Mutable::Null,
        J::Bool(b) => Mutable::Bool(*b),
        J::Number(n) if n.is_f64() => Mutable::Float(n.as_f64().unwrap()),
        J::Number(n) => n.as_i64().map_or_else(|| Mutable::UInt(n.as_u64().unwrap()), Mutable::Int),
        J::String(s) => Mutable::String(s.clone()),
        J::Array(items) => Mutable::Array(items.iter().map(to_mutable).collect()),
        J::Object(map) => Mutable::Dict(map.iter().map(|(k, v)| (k.clone(), to_mutable(v))).collect()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Guards: edits of a document encoded with shared keys, opened with that table grown,
    /// amended twice in a row and encoded fresh, read back as the same edits on serde_json,
    /// and validate with the grown table (and the amends with the original one).
    #[test]
    fn edits_with_shared_keys_match_serde_json(
        start in prop::collection::vec(("[a-e]", small_json()), 0..5),
        table in prop::collection::vec("[a-g]", 0..4),
        extra in prop::collection::vec("[a-g]", 0..3),
        ops in prop::collection::vec((any::<bool>(), "[a-g]", small_json(), any::<bool>()), 1..8),
    ) {
        let mut keys = SharedKeys::new();
        for k in &table { if keys.id(k).is_none() { keys.add(k).unwrap(); } }
        let mut grown = keys.clone();
        for k in &extra { if grown.id(k).is_none() { grown.add(k).unwrap(); } }
        let mut model = serde_json::Value::Object(start.into_iter().collect());
        let options = JsonOptions { shared_keys: Some(&keys), ..JsonOptions::default() };
        let bytes = from_json_with(serde_json::to_string(&model).unwrap().as_bytes(), &options).unwrap();
        let mut current = bytes.clone();
        for half in ops.chunks(4) {
            let doc = Doc::from_untrusted_with_keys(&current, &grown).unwrap();
            let mut edit = MutableDoc::new(doc);
            for (remove, key, value, nested) in half {
                let (target, model_target) = if *nested && model.get("a").is_some_and(|a| a.is_object()) {
                    (edit.root_mut().get_mut("a").unwrap().unwrap(), model.get_mut("a").unwrap())
                } else {
                    (edit.root_mut(), &mut model)
                };
                if *remove {
                    let got = target.remove(key).unwrap();
                    prop_assert_eq!(got.is_some(), model_target.as_object_mut().unwrap().remove(key).is_some());
                } else {
                    target.set(key, to_mutable(value)).unwrap();
                    model_target[key.as_str()] = value.clone();
                }
            }
            let fresh = edit.encode().unwrap();
            let amended = edit.amend().unwrap();
            let fresh_doc = Doc::from_untrusted_with_keys(&fresh, &grown).unwrap();
            let amended_doc = Doc::from_untrusted_with_keys(&amended, &grown).unwrap();
            prop_assert!(Doc::from_untrusted_with_keys(&amended, &keys).is_ok());
            let model_bytes = to_vec(&model).unwrap();
            let model_doc = Doc::from_untrusted(&model_bytes).unwrap();
            prop_assert_eq!(serde_json::from_str::<serde_json::Value>(&fresh_doc.root().to_json()).unwrap(), model.clone());
            prop_assert_eq!(serde_json::from_str::<serde_json::Value>(&amended_doc.root().to_json()).unwrap(), model.clone());
            prop_assert!(fresh_doc.root() == model_doc.root());
            prop_assert!(amended_doc.root() == model_doc.root());
            current = amended;
        }
    }
}

// ------------------------------------------------------------------ equality

/// Guards: equality across storage forms follows serde_json's (integers never equal floats,
/// -0.0 equals 0.0, dicts compare as maps whether keys are shared or local).
#[test]
fn equality_across_storage_forms() {
    let mut keys = SharedKeys::new();
    keys.add("b").unwrap();
    let options = JsonOptions { shared_keys: Some(&keys), ..JsonOptions::default() };
    let shared = from_json_with(br#"{"b": [1, 2], "a": {"b": 0.5}}"#, &options).unwrap();
    let local = from_json(br#"{"a": {"b": 0.5}, "b": [1, 2]}"#).unwrap();
    let slots = {
        let mut enc = Encoder::new();
        enc.begin_dict().unwrap();
        enc.key("a").unwrap();
        enc.begin_dict().unwrap();
        enc.key("b").unwrap();
        enc.push_f64(0.5).unwrap();
        enc.end_dict().unwrap();
        enc.key("b").unwrap();
        enc.begin_array().unwrap();
        enc.push_u64(1).unwrap();
        enc.push_str("x").unwrap();
        enc.end_array().unwrap();
        enc.end_dict().unwrap();
        enc.finish().unwrap()
    };
    let shared_root = Doc::from_untrusted_with_keys(&shared, &keys).unwrap().root();
    assert!(shared_root == open(&local));
    assert!(open(&local) == shared_root);
    assert!(!(open(&slots) == open(&local)));
    let pairs: [(&[u8], &[u8], bool); 6] = [
        (b"[-0.0]", b"[0.0]", true),
        (b"[1]", b"[1.0]", false),
        (b"[0.5]", b"[0.5, 1]", false),
        (b"[16777217]", b"[16777216.0]", false),
        (b"[9223372036854775807]", b"[9223372036854775807.0]", false),
        (b"[[1,2],[3,4]]", b"[[1,2],[3,4.0]]", false),
    ];
    for (a, b, expected) in pairs {
        let (x, y) = (from_json(a).unwrap(), from_json(b).unwrap());
        let serde = serde_json::from_slice::<serde_json::Value>(a).unwrap() == serde_json::from_slice::<serde_json::Value>(b).unwrap();
        assert_eq!(serde, expected, "serde_json on {}", String::from_utf8_lossy(a));
        assert_eq!(open(&x) == open(&y), expected, "{} vs {}", String::from_utf8_lossy(a), String::from_utf8_lossy(b));
    }
}
