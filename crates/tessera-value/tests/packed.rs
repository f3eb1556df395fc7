//! Packed numeric arrays: which arrays are packed and in which type, zero-copy views, the
//! validator's checks, and edits through `MutableDoc`.

use tessera_value::layout::PackedNumber;
use tessera_value::{Doc, Encoder, FormatError, Kind, MutableDoc, Value, from_json};

fn doc(bytes: &[u8]) -> Doc<'_> {
    Doc::from_untrusted(bytes).expect("valid")
}

fn number_type(value: Value<'_>) -> Option<PackedNumber> {
    value.as_array()?.numbers().map(|numbers| numbers.number_type())
}

#[test]
fn arrays_of_one_number_class_are_packed_in_the_narrowest_exact_type() {
    let cases: &[(&str, Option<PackedNumber>)] = &[
        ("[1, 2, -3]", Some(PackedNumber::I8)),
        ("[127, -128]", Some(PackedNumber::I8)),
        ("[128]", Some(PackedNumber::I16)),
        ("[400, -32768]", Some(PackedNumber::I16)),
        ("[70000, 1]", Some(PackedNumber::I32)),
        ("[9007199254740993, 1]", Some(PackedNumber::I64)),
        ("[0.5, 1.25, -2.0]", Some(PackedNumber::F32)),
        ("[0.1, 0.5]", Some(PackedNumber::F64)),
        ("[123456.789]", Some(PackedNumber::F64)),
        // mixed classes, other kinds, unsigned beyond i64, and the empty array stay slot arrays
        ("[1, 2.5]", None),
        ("[1, null]", None),
        ("[1, \"x\"]", None),
        ("[18446744073709551615, 1]", None),
        ("[]", None),
    ];
    for &(json, expected) in cases {
        let bytes = from_json(json.as_bytes()).unwrap();
        let root = doc(&bytes).root();
        assert_eq!(number_type(root), expected, "{json}");
        let reparsed: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(root.to_json(), serde_json::to_string(&reparsed).unwrap(), "{json} round trip");
        for (index, element) in root.as_array().unwrap().iter().enumerate() {
            let original = &reparsed[index];
            let kind = element.kind();
            if original.is_i64() {
                assert_eq!((kind, element.as_i64()), (Kind::Int, original.as_i64()), "{json}[{index}]");
            } else if original.is_f64() {
                assert_eq!((kind, element.as_f64()), (Kind::Float, original.as_f64()), "{json}[{index}]");
            }
        }
    }
}

#[test]
fn packed_arrays_are_smaller_than_slot_arrays() {
    // 100 doubles: one header and 800 bytes of numbers, against 100 nine-byte items and slots.
    let json = format!("[{}]", (0..100).map(|i| format!("{}.1", i)).collect::<Vec<_>>().join(","));
    let bytes = from_json(json.as_bytes()).unwrap();
    assert!(bytes.len() < 800 + 16, "{} bytes", bytes.len());
}

#[test]
fn arrays_of_equally_long_number_arrays_are_matrices() {
    let json =
        br#"{"ring": [[-122.4194155, 37.7749295], [-122.41, 37.77], [0.5, 1.5]], "ragged": [[1, 2], [3]], "mixed": [[1, 2], [0.5, 1.5]]}"#;
    let bytes = from_json(json).unwrap();
    let root = doc(&bytes).root();
    let ring = root.get("ring").unwrap().as_array().unwrap();
    assert_eq!(ring.len(), 3);
    assert!(ring.numbers().is_none(), "a matrix has rows, not numbers");
    // The rows widen to the widest type: the last row alone would be F32.
    let last = ring.get(2).unwrap().as_array().unwrap().numbers().unwrap();
    assert_eq!(last.number_type(), PackedNumber::F64);
    assert_eq!(last.to_f64_vec(), [0.5, 1.5]);
    assert_eq!(ring.get(0).unwrap().index(1).unwrap().as_f64(), Some(37.7749295));
    assert!(ring.get(3).is_none());
    assert_eq!(root.path("ring[1][0]").unwrap().unwrap().as_f64(), Some(-122.41));
    // Each row is its own vector in a ragged or mixed array.
    assert_eq!(number_type(root.path("ragged[1]").unwrap().unwrap()), Some(PackedNumber::I8));
    assert_eq!(number_type(root.path("mixed[1]").unwrap().unwrap()), Some(PackedNumber::F32));
    let expected: serde_json::Value = serde_json::from_slice(json).unwrap();
    assert_eq!(serde_json::from_str::<serde_json::Value>(&root.to_json()).unwrap(), expected);
    // A matrix of 3 x 2 doubles: tag, rows, columns, padding, 48 bytes.
    let matrix_bytes = from_json(br#"[[-122.4194155, 37.7749295], [-122.41, 37.77], [0.25, 1.1]]"#).unwrap();
    assert!(matrix_bytes.len() <= 48 + 3 + 7 + 6, "{} bytes", matrix_bytes.len());
}

#[test]
fn numbers_borrow_in_place_when_aligned_and_copy_otherwise() {
    let bytes = from_json(b"[0.1, 0.2, 0.3, 0.4]").unwrap();
    // Place the document at an 8-aligned address, then one byte off it.
    let mut words = vec![0u64; bytes.len() / 8 + 2];
    let aligned: &mut [u8] = bytemuck_bytes(&mut words);
    aligned[..bytes.len()].copy_from_slice(&bytes);
    let numbers = doc(&aligned[..bytes.len()]).root().as_array().unwrap().numbers().unwrap();
    assert_eq!(numbers.as_f64s(), Some(&[0.1, 0.2, 0.3, 0.4][..]));
    assert_eq!(numbers.as_f32s(), None, "another type");

    let mut shifted = vec![0u8; bytes.len() + 1];
    shifted[1..].copy_from_slice(&bytes);
    let numbers = doc(&shifted[1..]).root().as_array().unwrap().numbers().unwrap();
    if !(numbers.as_bytes().as_ptr() as usize).is_multiple_of(8) {
        assert_eq!(numbers.as_f64s(), None);
    }
    assert_eq!(numbers.to_f64_vec(), [0.1, 0.2, 0.3, 0.4]);
    assert_eq!(numbers.iter_f64().sum::<f64>(), 0.1 + 0.2 + 0.3 + 0.4);

    let ints = from_json(b"[100000, -5, 7]").unwrap();
    let mut words = vec![0u64; ints.len() / 8 + 2];
    let aligned: &mut [u8] = bytemuck_bytes(&mut words);
    aligned[..ints.len()].copy_from_slice(&ints);
    let numbers = doc(&aligned[..ints.len()]).root().as_array().unwrap().numbers().unwrap();
    assert_eq!(numbers.as_i32s(), Some(&[100000, -5, 7][..]));
    assert_eq!(numbers.to_i64_vec(), Some(vec![100000, -5, 7]));
}

/// The bytes of a `u64` buffer (8-aligned).
fn bytemuck_bytes(words: &mut [u64]) -> &mut [u8] {
    bytemuck::cast_slice_mut(words)
}

#[test]
fn the_encoder_packs_what_its_callers_push() {
    let mut encoder = Encoder::new();
    encoder.begin_array().unwrap();
    for value in [3i64, 1 << 40, -9] {
        encoder.push_i64(value).unwrap();
    }
    encoder.end_array().unwrap();
    let bytes = encoder.finish().unwrap();
    let root = doc(&bytes).root();
    assert_eq!(number_type(root), Some(PackedNumber::I64));
    assert_eq!(root.to_json(), "[3,1099511627776,-9]");
    // serde sequences too
    let bytes = tessera_value::to_vec(&vec![vec![1.5f64, 2.5], vec![3.5, 4.0]]).unwrap();
    let back: Vec<Vec<f64>> = tessera_value::from_slice(&bytes).unwrap();
    assert_eq!(back, [[1.5, 2.5], [3.5, 4.0]]);
    let bytes = tessera_value::to_vec(&(1u8, 2u16)).unwrap();
    assert_eq!(tessera_value::from_slice::<(u8, u16)>(&bytes).unwrap(), (1, 2));
}

#[test]
fn edits_of_packed_arrays_re_pack() {
    let bytes = from_json(br#"{"v": [1, 2, 3], "m": [[1.5, 2.5], [3.5, 4.5]]}"#).unwrap();
    let mut edit = MutableDoc::new(doc(&bytes));
    edit.root_mut().path_mut("v").unwrap().set_index(1, 1000).unwrap();
    edit.root_mut().path_mut("m[0]").unwrap().set_index(0, "text").unwrap();
    for encoded in [edit.amend().unwrap(), edit.encode().unwrap()] {
        let root = doc(&encoded).root();
        assert_eq!(root.to_json(), r#"{"v":[1,1000,3],"m":[["text",2.5],[3.5,4.5]]}"#);
        assert_eq!(number_type(root.get("v").unwrap()), Some(PackedNumber::I16));
    }
}

/// Bytes of a document whose root is the packed item `item`, at position 0.
fn with_root(item: &[u8]) -> Vec<u8> {
    // Tail: tag 0x70 (no tables), total length 5, root slot (pointer, distance `len`), tail
    // offset, footer byte (version 3, 1-byte offset, 2-byte root slot).
    let mut bytes = item.to_vec();
    let tail_start = bytes.len();
    bytes.extend_from_slice(&[0x70, 6]);
    bytes.extend_from_slice(&((tail_start as u16) << 1).to_le_bytes());
    bytes.push(tail_start as u8);
    bytes.push(0x31);
    bytes
}

#[test]
fn the_validator_checks_packed_items() {
    // A well-formed I16 vector [1, -2] at position 0: tag, count, no padding needed at 2.
    let good = with_root(&[0x31, 2, 1, 0, 0xFE, 0xFF]);
    let root = doc(&good).root();
    assert_eq!(root.to_json(), "[1,-2]");
    // A well-formed 2 x 1 F32 matrix: tag, rows, columns, one byte of padding to 4.
    let matrix = with_root(&[0x3C, 2, 1, 0, 0, 0, 0xC0, 0x3F, 0, 0, 0x20, 0x40]);
    assert_eq!(doc(&matrix).root().to_json(), "[[1.5],[2.5]]");

    let bad_items: &[(&str, &[u8])] = &[
        ("undefined number type", &[0x36, 1, 0]),
        ("no elements", &[0x30, 0]),
        ("no columns", &[0x38, 1, 0]),
        ("no rows", &[0x38, 0, 1]),
        ("padding not zero", &[0x31, 1, 7, 1, 0]),
        ("numbers past the region", &[0x32, 2, 0, 0, 0, 0]),
        ("matrix past the region", &[0x38, 2, 2, 1, 2, 3]),
    ];
    for &(what, item) in bad_items {
        let bytes = with_root(item);
        assert!(matches!(Doc::from_untrusted(&bytes), Err(FormatError::BadTag { .. } | FormatError::BadLength { .. })), "{what}");
        // Trusted reads of the same bytes never panic.
        let _ = Doc::from_trusted(&bytes).map(|doc| doc.root().to_json());
    }
}

#[test]
fn arrays_that_start_with_numbers_parse_like_any_other() {
    // Texts whose first element is a number take the parser's number-run path: errors point
    // at the same byte, and arrays that turn out mixed keep every element exactly.
    let errors: &[(&str, usize)] =
        &[("[1,]", 4), ("[1 2]", 4), ("[1,,2]", 4), ("[1", 3), ("[-]", 3), ("[1.]", 4), ("[1e]", 4), ("[01]", 3)];
    for &(text, column) in errors {
        let error = from_json(text.as_bytes()).unwrap_err();
        assert_eq!((error.line, error.column), (1, column), "{text}: {error:?}");
    }
    for text in ["[18446744073709551615, 1, -1]", "[1, 2.5, [3]]", "[1, \"x\", 2]", "[0.5, null]", "[ 1 , 2 ]", "[-0, 0]"] {
        let bytes = from_json(text.as_bytes()).unwrap();
        let expected: serde_json::Value = serde_json::from_str(text).unwrap();
        let root = doc(&bytes).root();
        assert_eq!(serde_json::from_str::<serde_json::Value>(&root.to_json()).unwrap(), expected, "{text}");
    }
    let big = from_json(b"[18446744073709551615, 1]").unwrap();
    assert_eq!(doc(&big).root().index(0).unwrap().as_u64(), Some(u64::MAX));
    let zeros = from_json(b"[-0, 0]").unwrap();
    let root = doc(&zeros).root();
    assert!(root.index(0).unwrap().is_float() && root.index(0).unwrap().as_f64().unwrap().is_sign_negative());
    assert_eq!(root.index(1).unwrap().as_i64(), Some(0));
}
