//! Adversarial review of JSON in and out (from_json, to_json, packed numbers).
use proptest::prelude::*;
use tessera_value::*;

fn open(bytes: &[u8]) -> Value<'_> {
    Doc::from_untrusted(bytes).unwrap().root()
}

/// Strict comparison with serde_json's value: ints as ints, floats bit for bit.
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

fn number_text() -> impl Strategy<Value = String> {
    (
        any::<bool>(),
        prop_oneof![Just("0".to_string()), "[1-9][0-9]{0,24}"],
        prop::option::of("[0-9]{1,25}"),
        prop::option::of(("[eE]", "[+-]?", "[0-9]{1,3}")),
    )
        .prop_map(|(neg, int, frac, exp)| {
            let mut s = String::new();
            if neg {
                s.push('-');
            }
            s += &int;
            if let Some(f) = frac {
                s.push('.');
                s += &f;
            }
            if let Some((e, sign, digits)) = exp {
                s += &e;
                s += &sign;
                s += &digits;
            }
            s
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]
    /// Guards (pass): random number texts (up to 25-digit integers and fractions, any
    /// exponent form) read as serde_json reads them (integer vs float, bits), alone and as a
    /// packed array; refused exactly when serde_json refuses them.
    #[test]
    fn number_texts_match_serde_json(texts in prop::collection::vec(number_text(), 1..5)) {
        for text in &texts {
            let theirs: Result<serde_json::Value, _> = serde_json::from_str(text);
            match (from_json(text.as_bytes()), theirs) {
                (Ok(bytes), Ok(theirs)) => {
                    same(open(&bytes), &theirs).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
                    let back: serde_json::Value = serde_json::from_str(&open(&bytes).to_json()).unwrap();
                    same(open(&bytes), &back).map_err(|e| TestCaseError::fail(format!("{text} out: {e}")))?;
                }
                (Err(_), Err(_)) => {}
                (ours, theirs) => prop_assert!(false, "{text}: ours {:?} theirs {:?}", ours.map(|b| open(&b).to_json()), theirs),
            }
        }
        let array = format!("[{}]", texts.join(","));
        let theirs: Result<serde_json::Value, _> = serde_json::from_str(&array);
        match (from_json(array.as_bytes()), theirs) {
            (Ok(bytes), Ok(theirs)) => {
                same(open(&bytes), &theirs).map_err(|e| TestCaseError::fail(format!("{array}: {e}")))?;
                let back: serde_json::Value = serde_json::from_str(&open(&bytes).to_json()).unwrap();
                same(open(&bytes), &back).map_err(|e| TestCaseError::fail(format!("{array} out: {e}")))?;
                if let Some(numbers) = open(&bytes).as_array().unwrap().numbers() {
                    let items = theirs.as_array().unwrap();
                    for (i, item) in items.iter().enumerate() {
                        if item.is_f64() {
                            prop_assert_eq!(numbers.get_f64(i).map(f64::to_bits), item.as_f64().map(f64::to_bits));
                        } else {
                            prop_assert_eq!(numbers.get_i64(i), item.as_i64());
                        }
                    }
                }
            }
            (Err(_), Err(_)) => {}
            (ours, theirs) => prop_assert!(false, "{array}: ours {:?} theirs {:?}", ours.map(|b| open(&b).to_json()), theirs),
        }
    }
}

fn string_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<char>().prop_filter("raw", |c| *c >= ' ' && *c != '"' && *c != '\\').prop_map(|c| c.to_string()),
        "[a-z]{0,20}",
        prop::sample::select(vec!["\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t"]).prop_map(String::from),
        (any::<char>(), any::<bool>()).prop_map(|(c, upper)| {
            let mut units = [0u16; 2];
            let text: String = c.encode_utf16(&mut units).iter().map(|u| format!("\\u{u:04x}")).collect();
            if upper { text.to_uppercase().replace("\\U", "\\u") } else { text }
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]
    /// Guards (pass): strings and keys with every escape, \\u in either case, surrogate
    /// pairs, raw non-ASCII; all three writers give serde_json's value back; lookups agree
    /// with iteration.
    #[test]
    fn escaped_strings_and_keys_match_serde_json(pieces in prop::collection::vec(string_piece(), 0..12), key_pieces in prop::collection::vec(string_piece(), 0..6)) {
        let body: String = pieces.concat();
        let key: String = key_pieces.concat();
        let text = format!("{{\"{key}\":[\"{body}\",\"{key}\"],\"k\":\"{body}\"}}");
        let theirs: serde_json::Value = serde_json::from_str(&text).unwrap();
        let bytes = from_json(text.as_bytes()).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        same(open(&bytes), &theirs).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        let back: serde_json::Value = serde_json::from_str(&open(&bytes).to_json()).unwrap();
        prop_assert_eq!(&back, &theirs);
        let back: serde_json::Value = serde_json::from_str(&open(&bytes).to_json_pretty()).unwrap();
        prop_assert_eq!(&back, &theirs);
        let back: serde_json::Value = serde_json::from_str(&open(&bytes).to_json_canonical()).unwrap();
        prop_assert_eq!(&back, &theirs);
        // Iteration agrees with lookup.
        let dict = open(&bytes).as_dict().unwrap();
        for (k, v) in dict.iter() {
            prop_assert!(dict.get(k) == Some(v));
        }
    }
}

fn check_text(text: &str) -> Result<(), String> {
    let theirs: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let bytes = from_json(text.as_bytes()).map_err(|e| e.to_string())?;
    let root = open(&bytes);
    same(root, &theirs)?;
    for (out, canonical) in [(root.to_json(), false), (root.to_json_pretty(), false), (root.to_json_canonical(), true)] {
        let back: serde_json::Value = serde_json::from_str(&out).map_err(|e| e.to_string())?;
        if back != theirs {
            return Err("written back differs".to_owned());
        }
        // Canonical text writes `-0.0` as `0.0` (equal values, equal text): equal, not the
        // same bits.
        if !canonical {
            same(root, &back)?;
        }
    }
    let via_serde: serde_json::Value = from_slice(&bytes).map_err(|e| e.to_string())?;
    if via_serde != theirs {
        return Err("from_slice differs".into());
    }
    Ok(())
}

fn big_leaf() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value as J;
    prop_oneof![
        Just(J::Null),
        any::<i64>().prop_map(J::from),
        (i64::MAX as u64 + 1..=u64::MAX).prop_map(J::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(J::from),
        any::<f32>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| J::from(f as f64)),
        prop::sample::select(vec!["shared string number one, long enough", "s2", "", "k0", "😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀😀"])
            .prop_map(J::from),
        (0usize..40000).prop_map(|n| J::from("y".repeat(n))),
        prop::collection::vec(any::<i32>(), 1..50).prop_map(J::from),
        prop::collection::vec(-1e10f64..1e10, 1..50).prop_map(J::from),
        (1usize..5, prop::collection::vec(any::<i16>(), 1..5)).prop_map(|(rows, row)| J::from(vec![J::from(row); rows])),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    /// Guards (pass): larger documents (long and repeated strings, u64, packed vectors and
    /// matrices) through from_json, the three writers and from_slice.
    #[test]
    fn big_documents_match_serde_json(value in big_leaf().prop_recursive(4, 400, 30, |inner| prop_oneof![
        prop::collection::vec(inner.clone(), 0..30).prop_map(serde_json::Value::Array),
        prop::collection::vec((prop::sample::select(vec!["k0", "k1", "k2", "long key name number three", "", "0"]).prop_map(String::from), inner), 0..30)
            .prop_map(|entries| serde_json::Value::Object(entries.into_iter().collect())),
    ])) {
        let text = serde_json::to_string(&value).unwrap();
        check_text(&text).map_err(TestCaseError::fail)?;
    }
}

// ------------------------------------------------------------------ finding (fixed since)

/// FIXED (failed on the code reviewed). `Value::to_json_canonical` (json_out.rs:27, :69) promises "equal values give
/// equal text", and its doc test shows it used to compare values by text; the digest of
/// tessera-postgres hashes it for that reason. But deep equality (eq.rs:4, :18) holds -0.0 equal
/// to 0.0 (as serde_json does), while the canonical writer keeps the sign: two documents that
/// compare equal give "[-0.0]" and "[0.0]". Correct: either canonical text writes the zero
/// of the equality class (0.0 for -0.0), or the promise names the exception.
#[test]
fn canonical_json_of_equal_values_is_equal_text_even_for_negative_zero() {
    for (a, b) in [("-0.0", "0.0"), ("[-0.0, 1.5]", "[0.0, 1.5]"), (r#"{"x":-0e0}"#, r#"{"x":0.0}"#)] {
        let (a_bytes, b_bytes) = (from_json(a.as_bytes()).unwrap(), from_json(b.as_bytes()).unwrap());
        let (a_root, b_root) = (open(&a_bytes), open(&b_bytes));
        assert!(a_root == b_root, "{a} and {b} compare equal");
        assert_eq!(a_root.to_json_canonical(), b_root.to_json_canonical(), "{a} vs {b}: equal values, different canonical text");
    }
}

// ------------------------------------------------------------------ guards (pass)

/// Guards: the depth limit counts a packed vector as one level and a matrix as two, exactly as
/// nested slot arrays; at the limit the document opens and writes back the same text.
#[test]
fn depth_limit_counts_packed_arrays_like_nested_arrays() {
    let nested = |depth: usize, inner: &str| format!("{}{inner}{}", "[".repeat(depth), "]".repeat(depth));
    for (inner, levels) in [("[1,2]", 1), ("[[1,2],[3,4]]", 2), ("{\"a\":[1]}", 2), ("[]", 1), ("1", 0)] {
        let fits = nested(128 - levels, inner);
        let bytes = from_json(fits.as_bytes()).unwrap_or_else(|e| panic!("{inner}: {e}"));
        assert_eq!(open(&bytes).to_json(), fits);
        let too_deep = nested(129 - levels, inner);
        assert_eq!(from_json(too_deep.as_bytes()).unwrap_err().kind, JsonErrorKind::TooDeep, "{inner}");
    }
}

/// Guards: with a shared-key table (and read with a later, longer table), every key reads back
/// by name, repeats keep the last value, and serde reads the same value serde_json does.
#[test]
fn shared_keys_json_round_trip() {
    let mut keys = SharedKeys::new();
    for k in ["name", "", "a", "0"] {
        keys.add(k).unwrap();
    }
    let text = r#"{"b":1,"name":"x","":2,"a":{"name":3,"0":4,"b":[1,2]},"zz":{"a":1,"a":5},"0":[{"":1}]}"#;
    let theirs: serde_json::Value = serde_json::from_str(text).unwrap();
    let options = JsonOptions { shared_keys: Some(&keys), ..JsonOptions::default() };
    let bytes = from_json_with(text.as_bytes(), &options).unwrap();
    let mut later = keys.clone();
    later.add("b").unwrap();
    later.add("zz").unwrap();
    for table in [&keys, &later] {
        let doc = Doc::from_untrusted_with_keys(&bytes, table).unwrap();
        same(doc.root(), &theirs).unwrap();
        assert_eq!(serde_json::from_str::<serde_json::Value>(&doc.root().to_json()).unwrap(), theirs);
        assert_eq!(from_value::<serde_json::Value>(doc.root()).unwrap(), theirs);
    }
}

/// Guards: matrix rows read as packed vectors in the matrix's (widest) type, by index, path,
/// JSON and serde.
#[test]
fn matrix_rows_read_back_exactly() {
    let bytes = from_json(br#"{"m":[[1,2,3],[400,5,6]],"f":[[0.5,1.5],[0.1,2.0]]}"#).unwrap();
    let root = open(&bytes);
    let m = root.get("m").unwrap().as_array().unwrap();
    assert!(m.numbers().is_none());
    let rows: Vec<_> = m.iter().map(|row| row.as_array().unwrap().numbers().unwrap().to_i64_vec().unwrap()).collect();
    assert_eq!(rows, [vec![1, 2, 3], vec![400, 5, 6]]);
    assert_eq!(root.path("m[1][0]").unwrap().unwrap().as_i64(), Some(400));
    let f: Vec<Vec<f64>> =
        root.get("f").unwrap().as_array().unwrap().iter().map(|row| row.as_array().unwrap().numbers().unwrap().to_f64_vec()).collect();
    assert_eq!(f, [vec![0.5, 1.5], vec![0.1, 2.0]]);
    assert_eq!(root.to_json(), r#"{"m":[[1,2,3],[400,5,6]],"f":[[0.5,1.5],[0.1,2.0]]}"#);
    let back: serde_json::Value = from_slice(&bytes).unwrap();
    assert_eq!(back, serde_json::from_str::<serde_json::Value>(&root.to_json()).unwrap());
}
