//! Issue 15, item 4: every entry point bounds nesting. 100,000 nested arrays go through JSON
//! in, serde out (`to_vec`), serde in (`from_slice`, `from_value`) and validation, and each
//! gives a typed "too deep" error without exhausting the stack; the deepest accepted input
//! round-trips.

use serde::de::{Deserialize, Deserializer, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeSeq, Serializer};
use tessera_value::{Doc, EncodeError, Encoder, JsonErrorKind, ValidateOptions, from_json, from_slice, layout, to_vec};

/// An array nested `0` levels deep, serialized and deserialized recursively (as any derived
/// recursive type is).
#[derive(Debug, PartialEq)]
struct Nested(usize);

impl Serialize for Nested {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(usize::from(self.0 > 0)))?;
        if self.0 > 0 {
            seq.serialize_element(&Nested(self.0 - 1))?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for Nested {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Levels;
        impl<'de> Visitor<'de> for Levels {
            type Value = Nested;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("nested arrays")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Nested, A::Error> {
                Ok(match seq.next_element::<Nested>()? {
                    Some(inner) => Nested(inner.0 + 1),
                    None => Nested(0),
                })
            }
        }
        deserializer.deserialize_seq(Levels)
    }
}

const HOSTILE_DEPTH: usize = 100_000;

fn json_arrays(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

fn json_objects(depth: usize) -> String {
    format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth))
}

/// Arrays nested `depth` levels, written by the encoder (which allows up to `HEIGHT_MAX`).
fn encoded_arrays(depth: usize) -> Vec<u8> {
    let mut encoder = Encoder::new();
    for _ in 0..depth {
        encoder.begin_array().unwrap();
    }
    for _ in 0..depth {
        encoder.end_array().unwrap();
    }
    encoder.finish().unwrap()
}

#[test]
fn json_in_refuses_100_000_levels() {
    assert_eq!(from_json(json_arrays(HOSTILE_DEPTH).as_bytes()).unwrap_err().kind, JsonErrorKind::TooDeep);
    assert_eq!(from_json(json_objects(HOSTILE_DEPTH).as_bytes()).unwrap_err().kind, JsonErrorKind::TooDeep);
    let deepest = from_json(json_arrays(layout::DEPTH_DEFAULT as usize).as_bytes()).unwrap();
    assert_eq!(Doc::from_untrusted(&deepest).unwrap().root().to_json(), json_arrays(layout::DEPTH_DEFAULT as usize));
}

#[test]
fn to_vec_stops_a_recursive_serialize_at_the_format_limit() {
    // The encoder refuses the 256th level, so the recursion of `Serialize` stops there.
    assert!(matches!(to_vec(&Nested(HOSTILE_DEPTH)), Err(EncodeError::TooDeep(layout::HEIGHT_MAX))));
    // The format holds 255 levels: `Nested(254)` is 255 arrays.
    let deepest = to_vec(&Nested(layout::HEIGHT_MAX as usize - 1)).unwrap();
    assert!(Doc::validate(&deepest, None, &ValidateOptions { depth_max: layout::HEIGHT_MAX }).is_ok());
    assert!(matches!(to_vec(&Nested(layout::HEIGHT_MAX as usize)), Err(EncodeError::TooDeep(_))));
}

#[test]
fn validation_and_from_slice_refuse_more_than_the_default_depth() {
    let deepest_format = encoded_arrays(layout::HEIGHT_MAX as usize);
    assert!(Doc::from_untrusted(&deepest_format).is_err(), "255 levels: deeper than the default 128");
    assert!(from_slice::<Nested>(&deepest_format).is_err());
    let deepest_default = encoded_arrays(layout::DEPTH_DEFAULT as usize);
    assert_eq!(from_slice::<Nested>(&deepest_default).unwrap(), Nested(layout::DEPTH_DEFAULT as usize - 1));
    let json = from_json(json_arrays(layout::DEPTH_DEFAULT as usize).as_bytes()).unwrap();
    assert_eq!(from_slice::<Nested>(&json).unwrap(), Nested(layout::DEPTH_DEFAULT as usize - 1));
}

#[test]
fn a_path_of_100_000_steps_is_a_path_error() {
    // Paths are walked by an iterator, and at most 256 steps are read.
    let bytes = from_json(json_objects(layout::DEPTH_DEFAULT as usize).as_bytes()).unwrap();
    let root = Doc::from_untrusted(&bytes).unwrap().root();
    let deepest = vec!["a"; layout::DEPTH_DEFAULT as usize].join(".");
    assert_eq!(root.path(&deepest).unwrap().and_then(|value| value.as_i64()), Some(1));
    let hostile = vec!["a"; HOSTILE_DEPTH].join(".");
    assert_eq!(root.path(&hostile).unwrap_err().reason, "too many steps");
    let hostile_indexes = "[0]".repeat(HOSTILE_DEPTH);
    assert_eq!(root.path(&hostile_indexes).unwrap_err().reason, "too many steps");
}

#[test]
fn a_mutable_value_built_100_000_deep_is_refused_when_encoded() {
    use tessera_value::{Mutable, MutableDoc};
    let nested = |depth: usize| {
        let mut value = Mutable::Null;
        for _ in 0..depth {
            value = Mutable::Array(vec![value]);
        }
        value
    };
    let bytes = from_json(b"null").unwrap();
    let mut doc = MutableDoc::new(Doc::from_untrusted(&bytes).unwrap());
    // 300 levels: deeper than the format holds, and still droppable by the derived, recursive
    // drop (a `Mutable` built 100,000 deep overflows the stack when dropped, as a
    // `serde_json::Value` does; an iterative `Drop` would tighten `Mutable<'a>`'s drop check).
    *doc.root_mut() = nested(300);
    assert!(matches!(doc.encode(), Err(EncodeError::TooDeep(_))));
    *doc.root_mut() = nested(layout::HEIGHT_MAX as usize - 1);
    assert!(Doc::validate(&doc.encode().unwrap(), None, &ValidateOptions { depth_max: layout::HEIGHT_MAX }).is_ok());
}
