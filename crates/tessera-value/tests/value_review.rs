//! Adversarial review of tessera-value (2026-11-30): JSON in and out, serde, the reader,
//! paths and mutation, held to "no silent wrong answers". Each test says what was wrong
//! before its fix, or what it guards.

use proptest::prelude::*;
use std::collections::BTreeMap;
use tessera_value::*;

// ------------------------------------------------------------------ helpers

/// Strict comparison of a stored value with a serde_json value: integers stay integers (of
/// the same value), floats stay floats (of the same bits, so -0.0 is not 0.0), dicts have
/// the same keys.
fn same(ours: Value<'_>, theirs: &serde_json::Value) -> Result<(), String> {
    use serde_json::Value as J;
    let ok = match theirs {
        J::Null => ours.is_null(),
        J::Bool(b) => ours.as_bool() == Some(*b),
        J::Number(n) if n.is_f64() => ours.is_float() && ours.as_f64().map(f64::to_bits) == n.as_f64().map(f64::to_bits),
        J::Number(n) => {
            !ours.is_float() && (n.as_i64().is_some() && ours.as_i64() == n.as_i64() || n.as_u64().is_some() && ours.as_u64() == n.as_u64())
        }
        J::String(s) => ours.as_str() == Some(s.as_str()),
        J::Array(items) => {
            let Some(array) = ours.as_array() else { return Err(format!("{ours:?} is not an array")) };
            if array.len() != items.len() {
                return Err(format!("{ours:?} has {} elements, expected {}", array.len(), items.len()));
            }
            for (value, item) in array.iter().zip(items) {
                same(value, item)?;
            }
            true
        }
        J::Object(map) => {
            let Some(dict) = ours.as_dict() else { return Err(format!("{ours:?} is not a dict")) };
            if dict.len() != map.len() {
                return Err(format!("{ours:?} has {} entries, expected {}", dict.len(), map.len()));
            }
            for (key, item) in map {
                let Some(value) = dict.get(key) else { return Err(format!("{ours:?} lacks {key:?}")) };
                same(value, item)?;
            }
            true
        }
    };
    if ok { Ok(()) } else { Err(format!("{ours:?} differs from {theirs}")) }
}

fn number_strategy() -> impl Strategy<Value = serde_json::Value> {
    prop_oneof![
        prop::sample::select(vec![
            i64::MIN,
            i64::MAX,
            -1,
            0,
            15,
            16,
            -17,
            4095,
            4096,
            (1 << 53) + 1,
            -(1 << 53) - 1,
            1 << 60,
            -(1 << 60) - 1
        ])
        .prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        (i64::MAX as u64 + 1..=u64::MAX).prop_map(serde_json::Value::from),
        prop::sample::select(vec![-0.0, 0.0, 1e308, -1e308, 5e-324, f64::MAX, f64::MIN_POSITIVE, 1.0, 1e3, 0.1, 3.4028235e38, 1e-45])
            .prop_map(serde_json::Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(serde_json::Value::from),
        any::<f32>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| serde_json::Value::from(f as f64)),
    ]
}

fn json_key_strategy() -> impl Strategy<Value = String> {
    prop_oneof![prop::sample::select(vec!["", "a", "b", "name", "\u{0}", "é", "a.b", "[0]", "😀"]).prop_map(String::from), any::<String>()]
}

fn json_strategy() -> impl Strategy<Value = serde_json::Value> {
    let leaf =
        prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::Bool),
            number_strategy(),
            prop::sample::select(vec!["", "\u{0}", "\"\\/\u{8}\u{c}\n\r\t\u{1f}\u{7f}", "😀", "\u{2028}", "a long string repeated"])
                .prop_map(serde_json::Value::from),
            any::<String>().prop_map(serde_json::Value::from),
            // Arrays of numbers of one class, and of such arrays, which the encoder packs.
            prop::collection::vec(any::<i64>(), 1..6).prop_map(serde_json::Value::from),
            prop::collection::vec(any::<f32>().prop_filter("finite", |f| f.is_finite()).prop_map(f64::from), 1..6)
                .prop_map(serde_json::Value::from),
            (1usize..4, prop::collection::vec(-200i64..200, 1..4))
                .prop_map(|(rows, row)| serde_json::Value::from(vec![serde_json::Value::from(row); rows])),
        ];
    leaf.prop_recursive(5, 120, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(serde_json::Value::Array),
            prop::collection::vec((json_key_strategy(), inner), 0..8)
                .prop_map(|entries| serde_json::Value::Object(entries.into_iter().collect())),
        ]
    })
}

fn open(bytes: &[u8]) -> Value<'_> {
    Doc::from_untrusted(bytes).unwrap().root()
}

// ------------------------------------------------------------------ findings

/// Before: `Doc::from_trusted` opened a document encoded with shared keys, without its table,
/// and returned Ok: every key read as `""`, `get` by name found nothing, and `to_json` wrote
/// `{"":"Ada"}`. `from_untrusted` refuses such a document; the trusted open now does too.
#[test]
fn a_trusted_open_without_the_shared_keys_is_refused() {
    let mut keys = SharedKeys::new();
    keys.add("name").unwrap();
    let options = JsonOptions { shared_keys: Some(&keys), ..JsonOptions::default() };
    let bytes = from_json_with(br#"{"name": "Ada", "local": 1}"#, &options).unwrap();
    match Doc::from_trusted(&bytes) {
        Err(error) => assert_eq!(error, FormatError::MissingSharedKeys { needed: 1, available: 0 }),
        Ok(doc) => panic!("opened without its shared keys, reads as {}", doc.root().to_json()),
    }
    // With the table it reads by name, and a document without shared keys still opens.
    let doc = Doc::from_trusted_with_keys(&bytes, &keys).unwrap();
    assert_eq!(doc.root().to_json(), r#"{"name":"Ada","local":1}"#);
    assert_eq!(Doc::from_trusted(&from_json(br#"{"name": "Ada"}"#).unwrap()).unwrap().root().get("name").unwrap().as_str(), Some("Ada"));
}

/// Before: integer map keys were read with `str::parse`, which takes `"+5"` and `"05"`: a dict
/// `{"5": 1, "05": 2}` read as a `BTreeMap<u8, _>` returned Ok with one entry, `{5: 2}`, the
/// other silently lost (serde_json refuses such keys). Only the text `to_vec` writes for an
/// integer key is one now; anything else is an error naming the key.
#[test]
fn integer_map_keys_must_be_written_as_to_vec_writes_them() {
    for text in [&br#"{"5": 1, "05": 2}"#[..], br#"{"+6": 1}"#, br#"{"-0": 1}"#, br#"{"00": 1}"#] {
        let bytes = from_json(text).unwrap();
        let read = from_slice::<BTreeMap<u8, i32>>(&bytes);
        assert!(read.is_err(), "{} read as {read:?}", String::from_utf8_lossy(text));
        let signed = from_slice::<BTreeMap<i64, i32>>(&bytes);
        assert!(signed.is_err(), "{} read as {signed:?}", String::from_utf8_lossy(text));
        assert!(serde_json::from_slice::<BTreeMap<i64, i32>>(text).is_err(), "serde_json agrees");
    }
    // What `to_vec` writes still reads back, at the limits of each type.
    let keys = BTreeMap::from([(i64::MIN, 1), (-1, 2), (0, 3), (7, 4), (i64::MAX, 5)]);
    assert_eq!(from_slice::<BTreeMap<i64, i32>>(&to_vec(&keys).unwrap()).unwrap(), keys);
    let keys = BTreeMap::from([(0u128, true), (u128::from(u64::MAX), false)]);
    assert_eq!(from_slice::<BTreeMap<u128, bool>>(&to_vec(&keys).unwrap()).unwrap(), keys);
    let keys = BTreeMap::from([(false, 0u8), (true, 1)]);
    assert_eq!(from_slice::<BTreeMap<bool, u8>>(&to_vec(&keys).unwrap()).unwrap(), keys);
}

// ------------------------------------------------------------------ oracles

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Guards: JSON text (as serde_json writes it, compact or pretty) reads into a document
    /// holding the same values as serde_json reads (integers as integers, floats bit for bit,
    /// -0.0 included), and the document's JSON reads back the same again.
    #[test]
    fn json_in_and_out_keeps_serde_json_meaning(value in json_strategy(), pretty in any::<bool>()) {
        let text = if pretty { serde_json::to_string_pretty(&value) } else { serde_json::to_string(&value) }.unwrap();
        let bytes = from_json(text.as_bytes()).unwrap();
        let root = open(&bytes);
        same(root, &value).map_err(TestCaseError::fail)?;
        let written: serde_json::Value = serde_json::from_str(&root.to_json()).unwrap();
        same(root, &written).map_err(TestCaseError::fail)?;
        let again = from_json(root.to_json_pretty().as_bytes()).unwrap();
        prop_assert!(open(&again) == root);
        same(open(&again), &value).map_err(TestCaseError::fail)?;
    }

    /// Guards: serde in both directions keeps serde_json's meaning (`to_vec` of a value, read
    /// back through the deserializer, is that value).
    #[test]
    fn serde_round_trip_keeps_serde_json_meaning(value in json_strategy()) {
        let bytes = to_vec(&value).unwrap();
        same(open(&bytes), &value).map_err(TestCaseError::fail)?;
        let back: serde_json::Value = from_slice(&bytes).unwrap();
        same(open(&bytes), &back).map_err(TestCaseError::fail)?;
        prop_assert_eq!(back, value);
    }

    /// Guards: deep equality between documents means serde_json's equality (an integer never
    /// equals a float, dicts compare as maps), whatever the storage (packed or slots, f32 or
    /// f64, JSON or serde, edited and amended).
    #[test]
    fn equality_matches_serde_json(a in json_strategy(), b in json_strategy(), same_value in any::<bool>(), key in "[a-c]") {
        let b = if same_value { a.clone() } else { b };
        let from_text = from_json(serde_json::to_string(&a).unwrap().as_bytes()).unwrap();
        let from_serde = to_vec(&b).unwrap();
        prop_assert_eq!(open(&from_text) == open(&from_serde), a == b, "{} vs {}", a, b);
        // Equal to itself through an amend that changes nothing under the root.
        let wrapped = to_vec(&serde_json::json!({ key.clone(): a.clone() })).unwrap();
        let mut edit = MutableDoc::new(Doc::from_untrusted(&wrapped).unwrap());
        edit.root_mut().set("other", Mutable::Null).unwrap();
        let amended = edit.amend().unwrap();
        prop_assert!(open(&amended).get(&key).unwrap() == open(&from_text));
        prop_assert_eq!(open(&amended).get(&key).unwrap() == open(&from_serde), a == b);
    }
}

// ------------------------------------------------------------------ mutation against a model

#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

#[derive(Debug, Clone)]
enum Op {
    Set {
        at: prop::sample::Index,
        key: String,
        value: serde_json::Value,
    },
    Remove {
        at: prop::sample::Index,
        pick: prop::sample::Index,
        other: String,
    },
    Push {
        at: prop::sample::Index,
        value: serde_json::Value,
    },
    SetIndex {
        at: prop::sample::Index,
        pick: prop::sample::Index,
        value: serde_json::Value,
    },
    RemoveIndex {
        at: prop::sample::Index,
        pick: prop::sample::Index,
    },
    /// Sets a key to a value of the document being edited, kept as `Mutable::Original`.
    SetOriginal {
        at: prop::sample::Index,
        key: String,
        from: prop::sample::Index,
    },
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let small = json_strategy;
    let key = || prop_oneof![prop::sample::select(vec!["a", "b", "", "é", "name"]).prop_map(String::from), "[a-z]{1,3}"];
    prop_oneof![
        (any::<prop::sample::Index>(), key(), small()).prop_map(|(at, key, value)| Op::Set { at, key, value }),
        (any::<prop::sample::Index>(), any::<prop::sample::Index>(), key()).prop_map(|(at, pick, other)| Op::Remove { at, pick, other }),
        (any::<prop::sample::Index>(), small()).prop_map(|(at, value)| Op::Push { at, value }),
        (any::<prop::sample::Index>(), any::<prop::sample::Index>(), small()).prop_map(|(at, pick, value)| Op::SetIndex {
            at,
            pick,
            value
        }),
        (any::<prop::sample::Index>(), any::<prop::sample::Index>()).prop_map(|(at, pick)| Op::RemoveIndex { at, pick }),
        (any::<prop::sample::Index>(), key(), any::<prop::sample::Index>()).prop_map(|(at, key, from)| Op::SetOriginal { at, key, from }),
    ]
}

/// Every path to a value of `value`, the root first.
fn paths(value: &serde_json::Value) -> Vec<Vec<Step>> {
    let mut out = vec![Vec::new()];
    let mut next = 0;
    while next < out.len() {
        let path = out[next].clone();
        next += 1;
        match model_at(value, &path) {
            serde_json::Value::Array(items) => out.extend((0..items.len()).map(|i| [path.clone(), vec![Step::Index(i)]].concat())),
            serde_json::Value::Object(map) => out.extend(map.keys().map(|k| [path.clone(), vec![Step::Key(k.clone())]].concat())),
            _ => {}
        }
    }
    out
}

fn model_at<'v>(mut value: &'v serde_json::Value, path: &[Step]) -> &'v serde_json::Value {
    for step in path {
        value = match step {
            Step::Key(key) => &value[key.as_str()],
            Step::Index(index) => &value[*index],
        };
    }
    value
}

fn model_at_mut<'v>(mut value: &'v mut serde_json::Value, path: &[Step]) -> &'v mut serde_json::Value {
    for step in path {
        value = match step {
            Step::Key(key) => value.get_mut(key.as_str()).unwrap(),
            Step::Index(index) => value.get_mut(*index).unwrap(),
        };
    }
    value
}

fn value_at<'a>(mut value: Value<'a>, path: &[Step]) -> Value<'a> {
    for step in path {
        value = match step {
            Step::Key(key) => value.get(key).unwrap(),
            Step::Index(index) => value.index(*index).unwrap(),
        };
    }
    value
}

fn edit_at<'e, 'a>(mut edit: &'e mut Mutable<'a>, path: &[Step]) -> &'e mut Mutable<'a> {
    for step in path {
        edit = match step {
            Step::Key(key) => edit.get_mut(key).unwrap().unwrap(),
            Step::Index(index) => edit.index_mut(*index).unwrap().unwrap(),
        };
    }
    edit
}

fn mutable(value: &serde_json::Value) -> Mutable<'static> {
    use serde_json::Value as J;
    match value {
        J::Null => Mutable::Null,
        J::Bool(b) => Mutable::Bool(*b),
        J::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) if !n.is_f64() => Mutable::Int(i),
            (_, Some(u), _) if !n.is_f64() => Mutable::UInt(u),
            (_, _, f) => Mutable::Float(f.unwrap()),
        },
        J::String(s) => Mutable::String(s.clone()),
        J::Array(items) => Mutable::Array(items.iter().map(mutable).collect()),
        J::Object(map) => Mutable::Dict(map.iter().map(|(k, v)| (k.clone(), mutable(v))).collect()),
    }
}

/// Applies `op` to the model and to the edit; they must agree on whether it succeeds.
fn apply<'a>(
    op: &Op,
    model: &mut serde_json::Value,
    original: (&serde_json::Value, Value<'a>),
    edit: &mut Mutable<'a>,
) -> Result<(), TestCaseError> {
    let all = paths(model);
    let pick_path = |at: &prop::sample::Index| all[at.index(all.len())].clone();
    match op {
        Op::Set { at, key, value } => {
            let path = pick_path(at);
            let target = model_at_mut(model, &path);
            let result = edit_at(edit, &path).set(key, mutable(value));
            match target.as_object_mut() {
                Some(map) => {
                    prop_assert_eq!(result, Ok(()));
                    map.insert(key.clone(), value.clone());
                }
                None => prop_assert_eq!(result, Err(MutateError::NotADict)),
            }
        }
        Op::SetOriginal { at, key, from } => {
            let path = pick_path(at);
            let sources = paths(original.0);
            let source = &sources[from.index(sources.len())];
            let target = model_at_mut(model, &path);
            let result = edit_at(edit, &path).set(key, Mutable::Original(value_at(original.1, source)));
            match target.as_object_mut() {
                Some(map) => {
                    prop_assert_eq!(result, Ok(()));
                    map.insert(key.clone(), model_at(original.0, source).clone());
                }
                None => prop_assert_eq!(result, Err(MutateError::NotADict)),
            }
        }
        Op::Remove { at, pick, other } => {
            let path = pick_path(at);
            let target = model_at_mut(model, &path);
            let key = match target.as_object() {
                Some(map) if !map.is_empty() && pick.index(3) > 0 => map.keys().nth(pick.index(map.len())).unwrap().clone(),
                _ => other.clone(),
            };
            let result = edit_at(edit, &path).remove(&key);
            match target.as_object_mut() {
                Some(map) => {
                    let removed = map.remove(&key);
                    let got = result.unwrap();
                    prop_assert_eq!(got.is_some(), removed.is_some(), "remove {:?}", key);
                }
                None => prop_assert_eq!(result.map(|_| ()), Err(MutateError::NotADict)),
            }
        }
        Op::Push { at, value } => {
            let path = pick_path(at);
            let target = model_at_mut(model, &path);
            let result = edit_at(edit, &path).push(mutable(value));
            match target.as_array_mut() {
                Some(items) => {
                    prop_assert_eq!(result, Ok(()));
                    items.push(value.clone());
                }
                None => prop_assert_eq!(result, Err(MutateError::NotAnArray)),
            }
        }
        Op::SetIndex { at, pick, value } => {
            let path = pick_path(at);
            let target = model_at_mut(model, &path);
            let len = target.as_array().map_or(0, Vec::len);
            // One time in four, an index at the end: out of range.
            let index = if pick.index(4) == 0 { len } else { pick.index(len.max(1)) };
            let result = edit_at(edit, &path).set_index(index, mutable(value));
            match target.as_array_mut() {
                Some(items) if index < items.len() => {
                    prop_assert_eq!(result, Ok(()));
                    items[index] = value.clone();
                }
                Some(items) => prop_assert_eq!(result, Err(MutateError::IndexOutOfRange { index, len: items.len() })),
                None => prop_assert_eq!(result, Err(MutateError::NotAnArray)),
            }
        }
        Op::RemoveIndex { at, pick } => {
            let path = pick_path(at);
            let target = model_at_mut(model, &path);
            let len = target.as_array().map_or(0, Vec::len);
            let index = pick.index(len + 1);
            let result = edit_at(edit, &path).remove_index(index);
            match target.as_array_mut() {
                Some(items) if index < items.len() => {
                    prop_assert!(result.is_ok());
                    items.remove(index);
                }
                Some(items) => prop_assert_eq!(result.map(|_| ()), Err(MutateError::IndexOutOfRange { index, len: items.len() })),
                None => prop_assert_eq!(result.map(|_| ()), Err(MutateError::NotAnArray)),
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Guards: a sequence of edits, encoded fresh or amended (twice in a row, the second on
    /// the amended bytes), validates and reads back equal to the same edits on a serde_json
    /// model; an edit that cannot be made is an error and changes nothing.
    #[test]
    fn edits_encode_and_amend_like_a_model(
        start in json_strategy(),
        first in prop::collection::vec(op_strategy(), 1..6),
        second in prop::collection::vec(op_strategy(), 1..6),
    ) {
        let bytes = from_json(serde_json::to_string(&start).unwrap().as_bytes()).unwrap();
        let mut model = start.clone();
        let doc = Doc::from_untrusted(&bytes).unwrap();
        let mut edit = MutableDoc::new(doc);
        for op in &first {
            apply(op, &mut model, (&start, doc.root()), edit.root_mut())?;
        }
        let fresh = edit.encode().unwrap();
        same(open(&fresh), &model).map_err(TestCaseError::fail)?;
        let amended = edit.amend().unwrap();
        prop_assert!(amended.starts_with(&bytes));
        same(open(&amended), &model).map_err(TestCaseError::fail)?;

        let after_first = model.clone();
        let doc = Doc::from_untrusted(&amended).unwrap();
        let mut edit = MutableDoc::new(doc);
        for op in &second {
            apply(op, &mut model, (&after_first, doc.root()), edit.root_mut())?;
        }
        let twice = edit.amend().unwrap();
        prop_assert!(twice.starts_with(&amended));
        same(open(&twice), &model).map_err(TestCaseError::fail)?;
        same(open(&edit.encode().unwrap()), &model).map_err(TestCaseError::fail)?;
    }
}

/// Before: `amend` referenced in place any value whose document started at the same address
/// as the one amended. A value of a document over a longer slice of the same buffer (the
/// amended bytes, whose prefix is the original document) was pointed at by a position past
/// the original: the encoder panicked (attempt to subtract with overflow; in a release build a
/// wrapped width). Such a value is copied now.
#[test]
fn amend_copies_a_value_of_a_longer_document_over_the_same_buffer() {
    let bytes = from_json(br#"{"a": "first string here", "n": 1}"#).unwrap();
    let mut edit = MutableDoc::new(Doc::from_untrusted(&bytes).unwrap());
    edit.root_mut().set("b", Mutable::Dict(vec![("zz".into(), Mutable::String("second string value".into()))])).unwrap();
    let amended = edit.amend().unwrap();
    let full = Doc::from_untrusted(&amended).unwrap();
    let prefix = Doc::from_untrusted(&amended[..bytes.len()]).unwrap(); // the original document
    assert_eq!(prefix.root().to_json(), r#"{"a":"first string here","n":1}"#);

    let mut edit = MutableDoc::new(prefix);
    edit.root_mut().set("c", full.root().get("b").unwrap()).unwrap();
    edit.root_mut().set("d", full.root().get("a").unwrap()).unwrap();
    let expected = r#"{"a":"first string here","n":1,"c":{"zz":"second string value"},"d":"first string here"}"#;
    let result = std::panic::catch_unwind(|| (edit.amend(), edit.encode()));
    let (amended_again, encoded) = result.expect("amend panicked");
    for out in [amended_again.unwrap(), encoded.unwrap()] {
        assert_eq!(open(&out).to_json(), expected);
    }

    // The other way round: a value of the shorter document, amended into the longer one.
    let mut edit = MutableDoc::new(full);
    edit.root_mut().set("e", prefix.root().get("a").unwrap()).unwrap();
    let out = edit.amend().unwrap();
    assert_eq!(open(&out).get("e").unwrap().as_str(), Some("first string here"));
}

/// Before: an integer read as a float was rounded and returned Ok, through the generated
/// codec and through serde alike: 9007199254740993 (2^53 + 1) read as the f64
/// 9007199254740992, `u64::MAX` as 2^64, 16777217 as the f32 16777216. The project refuses
/// such integers for float fields elsewhere (schema changes, dynamic collections, Python);
/// here they read as OutOfRange now. Integers a float holds exactly, and doubles narrowed to
/// the nearest f32 (documented), read as before.
#[test]
fn an_integer_read_as_a_float_is_never_rounded() {
    use tessera_value::codec::{FieldIds, FieldProblem, decode};
    let none = FieldIds::default();
    let bytes = from_json(b"[9007199254740993, -9007199254740993, 18446744073709551615, 9223372036854775807, 16777217]").unwrap();
    let root = open(&bytes);
    for (index, value) in root.as_array().unwrap().iter().enumerate() {
        if index < 4 {
            assert_eq!(
                decode::<f64>(value, &none),
                Err(codec::FieldError { path: String::new(), problem: FieldProblem::OutOfRange { expected: "f64" } }),
                "{value:?}"
            );
            let error = from_value::<f64>(value).unwrap_err();
            assert!(error.to_string().contains("no exact f64"), "{error}");
        }
        assert_eq!(decode::<f32>(value, &none).unwrap_err().problem, FieldProblem::OutOfRange { expected: "f32" }, "{value:?}");
        assert!(from_value::<f32>(value).is_err(), "{value:?}");
    }
    // Inside a struct through serde, the error names the problem.
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Reading {
        x: f64,
    }
    assert!(from_slice::<Reading>(&from_json(br#"{"x": 9007199254740993}"#).unwrap()).is_err());

    // What a float holds exactly still reads, at the edges.
    let bytes = from_json(b"[9007199254740992, -9223372036854775808, 9223372036854775808, 16777216, 3, -1]").unwrap();
    let exact: Vec<f64> = from_slice(&bytes).unwrap();
    assert_eq!(exact, [9007199254740992.0, -9223372036854775808.0, 9223372036854775808.0, 16777216.0, 3.0, -1.0]);
    assert_eq!(decode::<Vec<f64>>(open(&bytes), &none).unwrap(), exact);
    let small = from_json(b"[16777216, -16777216, 0]").unwrap();
    assert_eq!(from_slice::<Vec<f32>>(&small).unwrap(), [16777216.0f32, -16777216.0, 0.0]);
    assert_eq!(decode::<Vec<f32>>(open(&small), &none).unwrap(), [16777216.0f32, -16777216.0, 0.0]);
    assert_eq!(from_slice::<f32>(&to_vec(&16_777_217.0f64).unwrap()).unwrap(), 16_777_216.0, "a double narrows");
}

/// Before: binary data read through serde as a `String` or `&str` returned Ok with the bytes
/// taken as text (`b"hi"` read as `"hi"`), where the generated codec (`Decode for String`)
/// refuses it as the wrong type and `to_vec` never writes a string as binary. Now an error.
/// A string read as bytes stays as serde_json has it (its UTF-8 bytes).
#[test]
fn binary_data_is_not_read_as_a_string() {
    let mut out = Encoder::new();
    out.begin_array().unwrap();
    out.push_bytes(b"hi").unwrap();
    out.push_str("hi").unwrap();
    out.end_array().unwrap();
    let bytes = out.finish().unwrap();
    let (binary, text) = (open(&bytes).index(0).unwrap(), open(&bytes).index(1).unwrap());
    let error = from_value::<String>(binary).unwrap_err();
    assert!(error.to_string().contains("byte array"), "{error}");
    assert!(from_value::<&str>(binary).is_err());
    assert!(from_value::<std::borrow::Cow<'_, str>>(binary).is_err());
    assert!(from_value::<Vec<String>>(open(&bytes)).is_err());
    assert!(codec::decode::<String>(binary, &codec::FieldIds::default()).is_err(), "the codec agrees");
    // Strings read as strings, and as bytes; binary reads as bytes.
    assert_eq!(from_value::<&str>(text).unwrap(), "hi");
    assert_eq!(from_value::<String>(text).unwrap(), "hi");
    assert_eq!(from_value::<&[u8]>(text).unwrap(), b"hi");
    assert_eq!(from_value::<&[u8]>(binary).unwrap(), b"hi");
}

/// A serde map or struct repeating a key (a flattened map naming a field of its struct) was
/// encoded with the last value kept: `{a: 1, extra: {a: 5}}` read back as `{a: 5, extra: {}}`.
/// The serde encoder refuses it, naming the key; the encoder's own `end_dict` and JSON input
/// keep "last wins", as documented.
#[test]
fn a_serde_value_repeating_a_key_is_refused_naming_it() {
    #[derive(serde::Serialize)]
    struct WithExtra {
        a: u32,
        #[serde(flatten)]
        extra: std::collections::BTreeMap<String, u32>,
    }
    let twice = WithExtra { a: 1, extra: [("a".to_owned(), 5)].into() };
    assert_eq!(tessera_value::to_vec(&twice), Err(tessera_value::EncodeError::RepeatedKey("a".into())));
    assert!(tessera_value::to_shared(&[&twice]).is_err());
    let mut keys = tessera_value::SharedKeys::new();
    keys.add("a").unwrap();
    assert_eq!(tessera_value::to_vec_with_keys(&twice, &keys), Err(tessera_value::EncodeError::RepeatedKey("a".into())));
    // Distinct keys in any order, and many of them, are written.
    let fine = WithExtra { a: 1, extra: (0..40).map(|n| (format!("k{n}"), n)).collect() };
    let bytes = tessera_value::to_vec(&fine).unwrap();
    assert_eq!(tessera_value::Doc::from_untrusted(&bytes).unwrap().root().as_dict().unwrap().len(), 41);
    let many_twice = WithExtra { a: 1, extra: (0..40).map(|n| (if n == 39 { "a".to_owned() } else { format!("k{n}") }, n)).collect() };
    assert_eq!(tessera_value::to_vec(&many_twice), Err(tessera_value::EncodeError::RepeatedKey("a".into())));
    // The encoder itself keeps the last value.
    let bytes = tessera_value::from_json(br#"{"a": 1, "a": 2}"#).unwrap();
    assert_eq!(tessera_value::Doc::from_untrusted(&bytes).unwrap().root().to_json(), r#"{"a":2}"#);
}
