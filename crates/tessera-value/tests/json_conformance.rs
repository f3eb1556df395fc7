//! RFC 8259 conformance of the JSON converter: every JSON text is accepted, everything else is
//! rejected with a typed error that points at the right byte, line and column.

use tessera_value::{Doc, JsonErrorKind, JsonOptions, from_json, from_json_with};

/// Valid JSON texts, each compared with serde_json's view after a round trip.
const VALID: &[&str] = &[
    "0",
    "-0",
    "1",
    "-1",
    "123",
    "1.5",
    "-1.5e10",
    "1E+2",
    "1e-2",
    "0.0",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775809",
    "123456789012345678901234567890",
    "0.1",
    "2.5e-308",
    "5e-324",
    "true",
    "false",
    "null",
    "\"\"",
    "\"a\"",
    r#""\u00e9\ud83d\ude00\n\t\"\\\/\b\f\r""#,
    "\"é 😀 ü\"",
    "[]",
    "{}",
    "[[]]",
    "[{}]",
    " [ 1 , 2 ] ",
    "\t\n\r 1 \t\n\r",
    r#"{"a":1,"b":[true,false,null],"c":{"d":"e"}}"#,
    r#"{"a":1,"a":2}"#,
    r#"{"":0}"#,
    r#"[1,"1",1.0,[1],{"1":1}]"#,
    r#""\u0000""#,
    "\"\u{7f}\"",
];

/// Invalid texts with the error kind and the byte offset of the error.
const INVALID: &[(&str, JsonErrorKind, usize)] = &[
    ("", JsonErrorKind::UnexpectedEnd, 0),
    ("   ", JsonErrorKind::UnexpectedEnd, 3),
    ("01", JsonErrorKind::InvalidNumber, 1),
    ("-01", JsonErrorKind::InvalidNumber, 2),
    ("2.", JsonErrorKind::InvalidNumber, 2),
    (".5", JsonErrorKind::UnexpectedByte(b'.'), 0),
    ("1.e3", JsonErrorKind::InvalidNumber, 2),
    ("2.e3", JsonErrorKind::InvalidNumber, 2),
    ("1e", JsonErrorKind::InvalidNumber, 2),
    ("1e+", JsonErrorKind::InvalidNumber, 3),
    ("-", JsonErrorKind::InvalidNumber, 1),
    ("+1", JsonErrorKind::UnexpectedByte(b'+'), 0),
    ("[1],", JsonErrorKind::TrailingCharacters, 3),
    ("[1,]", JsonErrorKind::UnexpectedByte(b']'), 3),
    ("{\"a\":1,}", JsonErrorKind::KeyMustBeString, 7),
    ("{,}", JsonErrorKind::KeyMustBeString, 1),
    ("{1:2}", JsonErrorKind::KeyMustBeString, 1),
    ("{\"a\" 1}", JsonErrorKind::UnexpectedByte(b'1'), 5),
    ("[1 2]", JsonErrorKind::UnexpectedByte(b'2'), 3),
    ("\"a\u{1}\"", JsonErrorKind::ControlCharacter, 2),
    ("\"a\nb\"", JsonErrorKind::ControlCharacter, 2),
    ("\"\\x\"", JsonErrorKind::InvalidEscape, 1),
    ("\"\\u12g4\"", JsonErrorKind::InvalidEscape, 5),
    ("\"\\ud800\"", JsonErrorKind::LoneSurrogate, 1),
    ("\"\\udc00\"", JsonErrorKind::LoneSurrogate, 1),
    ("\"\\ud800\\u0041\"", JsonErrorKind::LoneSurrogate, 1),
    ("tru", JsonErrorKind::UnexpectedEnd, 3),
    ("trux", JsonErrorKind::UnexpectedByte(b'x'), 3),
    ("nul", JsonErrorKind::UnexpectedEnd, 3),
    ("NaN", JsonErrorKind::UnexpectedByte(b'N'), 0),
    ("Infinity", JsonErrorKind::UnexpectedByte(b'I'), 0),
    ("[1] [2]", JsonErrorKind::TrailingCharacters, 4),
    ("\"abc", JsonErrorKind::UnexpectedEnd, 4),
    ("[\"a\", 'b']", JsonErrorKind::UnexpectedByte(b'\''), 6),
    ("\u{feff}1", JsonErrorKind::UnexpectedByte(0xEF), 0),
];

#[test]
fn valid_texts_round_trip_to_serde_json_view() {
    for text in VALID {
        let bytes = from_json(text.as_bytes()).unwrap_or_else(|e| panic!("{text:?} rejected: {e}"));
        let doc = Doc::from_untrusted(&bytes).unwrap_or_else(|e| panic!("{text:?}: encoder output invalid: {e}"));
        let ours: serde_json::Value = serde_json::from_str(&doc.root().to_json()).unwrap();
        let theirs: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(ours, theirs, "{text:?}");
        // The pretty and canonical writers give the same value too.
        let pretty: serde_json::Value = serde_json::from_str(&doc.root().to_json_pretty()).unwrap();
        assert_eq!(pretty, theirs, "{text:?} pretty");
        let canonical: serde_json::Value = serde_json::from_str(&doc.root().to_json_canonical()).unwrap();
        assert_eq!(canonical, theirs, "{text:?} canonical");
    }
}

#[test]
fn invalid_texts_give_the_right_error_at_the_right_byte() {
    for &(text, kind, offset) in INVALID {
        let error = from_json(text.as_bytes()).expect_err(text);
        assert_eq!((error.kind, error.offset), (kind, offset), "{text:?}: {error}");
        assert!(serde_json::from_str::<serde_json::Value>(text).is_err(), "serde_json accepts {text:?}");
    }
}

#[test]
fn invalid_utf8_is_rejected_inside_and_outside_strings() {
    for (input, offset) in [(&b"\"a\xff\""[..], 2), (b"\"\xc3\x28\"", 1), (b"\"\xed\xa0\x80\"", 1), (b"[\xff]", 1), (b"\"\\n\xff\"", 3)] {
        let error = from_json(input).expect_err("invalid UTF-8");
        let expected = if input[0] == b'[' { JsonErrorKind::UnexpectedByte(0xFF) } else { JsonErrorKind::InvalidUtf8 };
        assert_eq!((error.kind, error.offset), (expected, offset), "{input:?}");
    }
}

#[test]
fn every_strict_prefix_of_a_valid_text_fails() {
    let text = r#"{"name": "Ada \u00e9", "list": [1, -2.5e3, true, null, {"x": []}], "s": "\ud83d\ude00"}"#;
    assert!(from_json(text.as_bytes()).is_ok());
    for cut in 0..text.len() {
        let prefix = &text.as_bytes()[..cut];
        let error = from_json(prefix).expect_err("a strict prefix is not JSON");
        assert!(error.offset <= cut, "{cut}: {error}");
    }
}

#[test]
fn line_and_column_count_from_one() {
    let error = from_json(b"[\n  1,\n  01\n]").unwrap_err();
    assert_eq!((error.line, error.column, error.offset), (3, 4, 10));
    assert_eq!(error.to_string(), "invalid number at line 3 column 4 (byte 10)");
}

#[test]
fn depth_limit_is_configurable_and_exact() {
    let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let options = JsonOptions { depth_max: 10, ..JsonOptions::default() };
    assert!(from_json_with(nested(10).as_bytes(), &options).is_ok());
    let error = from_json_with(nested(11).as_bytes(), &options).unwrap_err();
    assert_eq!((error.kind, error.offset), (JsonErrorKind::TooDeep, 10));
    // The default limit is 128, and very deep input fails without exhausting the stack.
    assert!(from_json(nested(128).as_bytes()).is_ok());
    assert_eq!(from_json(nested(129).as_bytes()).unwrap_err().kind, JsonErrorKind::TooDeep);
    assert_eq!(from_json(nested(1_000_000).as_bytes()).unwrap_err().kind, JsonErrorKind::TooDeep);
    // The hard ceiling is 254 whatever is asked for.
    let options = JsonOptions { depth_max: 255, ..JsonOptions::default() };
    assert_eq!(from_json_with(nested(255).as_bytes(), &options).unwrap_err().kind, JsonErrorKind::TooDeep);
}

#[test]
fn numbers_beyond_f64_range_are_refused() {
    // RFC 8259 lets a parser limit the range of numbers. Stored as ±infinity, they would come
    // back out of JSON as null: refused where they stand, as serde_json refuses them.
    for (text, offset) in [("1e400", 0), ("[1, -1e400]", 4)] {
        let error = from_json(text.as_bytes()).unwrap_err();
        assert_eq!((error.kind, error.offset), (JsonErrorKind::TooLarge, offset), "{text}");
    }
}

#[test]
fn duplicate_keys_keep_the_last_value() {
    let bytes = from_json(br#"{"a":1,"b":2,"a":3}"#).unwrap();
    let root = Doc::from_untrusted(&bytes).unwrap().root();
    assert_eq!(root.get("a").unwrap().as_i64(), Some(3));
    assert_eq!(root.len(), 2);
}

#[test]
fn numbers_keep_their_kind() {
    let bytes = from_json(b"[1, 1.0, -0, 18446744073709551615, 1e308, 0.1, 16777217.0]").unwrap();
    let root = Doc::from_untrusted(&bytes).unwrap().root();
    let item = |i| root.index(i).unwrap();
    assert_eq!(item(0).as_i64(), Some(1));
    assert!(item(1).is_float());
    assert!(item(2).is_float() && item(2).as_f64().unwrap().is_sign_negative());
    assert_eq!(item(3).as_u64(), Some(u64::MAX));
    assert_eq!(item(3).as_i64(), None);
    assert_eq!(item(4).as_f64(), Some(1e308));
    assert_eq!(item(5).as_f64(), Some(0.1));
    assert_eq!(item(6).as_f64(), Some(16777217.0));
    // JSON cannot carry infinity: a stored one is written as null.
    let infinity = tessera_value::to_vec(&f64::INFINITY).unwrap();
    assert_eq!(Doc::from_untrusted(&infinity).unwrap().root().to_json(), "null");
}
