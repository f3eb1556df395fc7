//! Numbers that do not fit where they are read are errors, never infinities: a stored double
//! beyond `f32`'s range read as an `f32` (through the generated codec and through serde), and
//! a JSON number beyond `f64`'s range.

use tessera_value::codec::{FieldIds, FieldProblem, decode};
use tessera_value::{Doc, JsonErrorKind, from_json, from_slice, to_vec};

#[test]
fn a_double_beyond_f32_range_is_not_read_as_an_infinity() {
    let stored = to_vec(&1e300f64).unwrap();
    let root = Doc::from_untrusted(&stored).unwrap().root();
    let error = decode::<f32>(root, &FieldIds::default()).unwrap_err();
    assert_eq!(error.problem, FieldProblem::OutOfRange { expected: "f32" });
    let error = from_slice::<f32>(&stored).unwrap_err();
    assert!(error.to_string().contains("out of range for f32"), "{error}");
    // Inside a struct, serde's path names the problem too.
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Point {
        x: f32,
    }
    let stored = to_vec(&serde_json::json!({"x": -1e39})).unwrap();
    assert!(from_slice::<Point>(&stored).is_err());
}

#[test]
fn doubles_within_range_and_stored_infinities_still_narrow() {
    for (double, expected) in [(0.1f64, 0.1f32), (-3.4e38, -3.4e38), (f64::INFINITY, f32::INFINITY), (16_777_217.0, 16_777_216.0)] {
        let stored = to_vec(&double).unwrap();
        let root = Doc::from_untrusted(&stored).unwrap().root();
        assert_eq!(decode::<f32>(root, &FieldIds::default()).unwrap(), expected, "{double}");
        assert_eq!(from_slice::<f32>(&stored).unwrap(), expected, "{double}");
    }
    let stored = to_vec(&f64::NAN).unwrap();
    assert!(from_slice::<f32>(&stored).unwrap().is_nan());
}

#[test]
fn json_numbers_beyond_f64_range_are_refused() {
    for text in [&b"1e400"[..], b"[1, -1e309]", b"{\"a\": 123456789e999}"] {
        let error = from_json(text).unwrap_err();
        assert_eq!(error.kind, JsonErrorKind::TooLarge, "{}", String::from_utf8_lossy(text));
    }
    assert!(from_json(b"[1e308, 5e-324, 1e-400]").is_ok(), "large, subnormal and underflowing numbers are numbers");
}
