//! Whether a record is already what [`conform`](super::conform::conform) would write for a
//! shape: then, encoded with the collection's shared keys, its bytes are the conformed record,
//! and a write can store them without encoding the record again.
//!
//! The encoder's output is a function of the calls made on it, and each call's encoding a
//! function of the value pushed (an integer's width, a float's, a string's form). Conforming
//! walks the value and makes one call per value; when the value needs no change (every struct
//! lists exactly its fields, in declared order, null where an optional one is unset; every
//! float field holds a float; every integer is in its field's range; every enum is a variant
//! of the right form) the calls are the ones that wrote the value, and so are the bytes. The
//! check is conservative: anything conforming would change or might write differently (an
//! `Any` field, an `f32` field, a packed array of numbers) answers no, and the write conforms
//! the record as before.

use crate::collection::TypeDesc;
use tessera_value::{Kind, Value};

/// Whether conforming `value` to `shape` would write `value` unchanged.
pub(super) fn is_conformed(value: Value<'_>, shape: &TypeDesc) -> bool {
    match shape {
        TypeDesc::Any | TypeDesc::Float32 => false,
        TypeDesc::Option(inner) => value.is_null() || is_conformed(value, inner),
        TypeDesc::Bool => value.kind() == Kind::Bool,
        TypeDesc::Int => matches!(value.kind(), Kind::Int | Kind::UInt),
        TypeDesc::Integer(int) => {
            let integer = match value.kind() {
                Kind::Int => value.as_i64().map(i128::from),
                Kind::UInt => value.as_u64().map(i128::from),
                _ => None,
            };
            integer.is_some_and(|integer| int.contains(integer))
        }
        TypeDesc::Float => value.kind() == Kind::Float,
        TypeDesc::String => value.kind() == Kind::String,
        TypeDesc::Bytes => value.kind() == Kind::Binary,
        TypeDesc::List(element) => match value.as_array() {
            Some(array) => array.numbers().is_none() && array.iter().all(|item| is_conformed(item, element)),
            None => false,
        },
        TypeDesc::Tuple(elements) => match value.as_array() {
            Some(array) => {
                array.numbers().is_none()
                    && array.len() == elements.len()
                    && array.iter().zip(elements).all(|(item, element)| is_conformed(item, element))
            }
            None => false,
        },
        // Conforming writes a map's entries in key order.
        TypeDesc::Map(element) => match value.as_dict() {
            Some(dict) => {
                let mut previous: Option<&str> = None;
                dict.iter().all(|(name, item)| {
                    let in_order = previous.is_none_or(|previous| previous < name);
                    previous = Some(name);
                    in_order && is_conformed(item, element)
                })
            }
            None => false,
        },
        TypeDesc::Struct(fields) => match value.as_dict() {
            Some(dict) => {
                dict.len() == fields.len()
                    && dict.iter().zip(fields).all(|((name, item), (field, shape))| name == field && is_conformed(item, shape))
            }
            None => false,
        },
        TypeDesc::Enum(variants) => {
            if let Some(name) = value.as_str() {
                return variants.iter().any(|(variant, payload)| variant == name && payload.is_none());
            }
            let Some(dict) = value.as_dict().filter(|dict| dict.len() == 1) else { return false };
            let Some((name, payload)) = dict.iter().next() else { return false };
            match variants.iter().find(|(variant, _)| variant == name) {
                Some((_, Some(shape))) => is_conformed(payload, shape),
                _ => false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::conform::Source;
    use super::super::conform_into::conform_into;
    use super::*;
    use crate::collection::IntType;
    use tessera_value::{Doc, Encoder, SharedKeys};

    fn shape() -> TypeDesc {
        TypeDesc::Struct(vec![
            ("id".into(), TypeDesc::Int),
            ("small".into(), TypeDesc::Integer(IntType::U8)),
            ("score".into(), TypeDesc::Float),
            ("note".into(), TypeDesc::Option(Box::new(TypeDesc::String))),
            ("tags".into(), TypeDesc::List(Box::new(TypeDesc::String))),
            ("extra".into(), TypeDesc::Map(Box::new(TypeDesc::Int))),
            ("state".into(), TypeDesc::Enum(vec![("Open".into(), None), ("Done".into(), Some(TypeDesc::String))])),
        ])
    }

    fn shared() -> SharedKeys {
        let mut keys = SharedKeys::new();
        for name in ["id", "small", "score", "note", "tags", "extra", "state", "Open", "Done"] {
            keys.add(name).unwrap();
        }
        keys
    }

    /// `json` encoded with `keys` as an encoder walking it in order writes it.
    fn encoded(json: &str, keys: &SharedKeys) -> Vec<u8> {
        let plain = tessera_value::from_json(json.as_bytes()).unwrap();
        let mut out = Encoder::with_shared_keys(keys);
        out.push_value(Doc::from_untrusted(&plain).unwrap().root()).unwrap();
        out.finish().unwrap()
    }

    #[test]
    fn a_record_said_to_be_conformed_has_the_bytes_conforming_writes() {
        let keys = shared();
        let conformed = [
            r#"{"id": 1, "small": 255, "score": 0.5, "note": null, "tags": ["a", "b"], "extra": {"x": 1}, "state": "Open"}"#,
            r#"{"id": -9223372036854775808, "small": 0, "score": 1e300, "note": "n", "tags": [], "extra": {}, "state": {"Done": "yes"}}"#,
            r#"{"id": 18446744073709551615, "small": 7, "score": -0.0, "note": "", "tags": [""], "extra": {"x": 2, "y": -1}, "state": "Open"}"#,
            // Written in another order: stored in shared-key order all the same.
            r#"{"small": 1, "id": 1, "score": 0.5, "note": null, "tags": [], "extra": {}, "state": "Open"}"#,
        ];
        for json in conformed {
            let bytes = encoded(json, &keys);
            let record = Doc::from_untrusted_with_keys(&bytes, &keys).unwrap().root();
            assert!(is_conformed(record, &shape()), "{json}");
            assert_eq!(conform_into(record, &shape(), &keys, Source::Binary).ok(), Some(bytes), "{json}");
        }
        // A map's entries out of key order are not: conforming writes them in key order, as a
        // record type's codec does.
        let unordered = r#"{"id": 1, "small": 7, "score": 0.5, "note": "", "tags": [], "extra": {"y": -1, "x": 2}, "state": "Open"}"#;
        let ordered = r#"{"id": 1, "small": 7, "score": 0.5, "note": "", "tags": [], "extra": {"x": 2, "y": -1}, "state": "Open"}"#;
        let bytes = encoded(unordered, &keys);
        let record = Doc::from_untrusted_with_keys(&bytes, &keys).unwrap().root();
        assert!(!is_conformed(record, &shape()));
        assert_eq!(conform_into(record, &shape(), &keys, Source::Binary).ok(), Some(encoded(ordered, &keys)));
    }

    /// How many generated records were said to be conformed (the property is not vacuous).
    static CONFORMED_CASES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    #[test]
    fn the_property_meets_conformed_records() {
        whatever_is_said_to_be_conformed_conforms_to_the_same_bytes();
        assert!(CONFORMED_CASES.load(std::sync::atomic::Ordering::Relaxed) > 20);
    }

    /// A JSON value of any kind, for a field of any shape.
    fn any_json() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            Just("null".to_owned()),
            any::<bool>().prop_map(|flag| flag.to_string()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
            (-1e6f64..1e6).prop_map(|x| format!("{x:?}")),
            "[a-z]{0,3}".prop_map(|text| format!("{text:?}")),
            prop::collection::vec("[a-z]{0,2}", 0..3).prop_map(|items| format!("{items:?}")),
            prop::collection::vec(any::<i8>(), 0..3).prop_map(|items| format!("{items:?}")),
            Just(r#"{"x": 1, "y": 2}"#.to_owned()),
            Just(r#"{"Done": "d"}"#.to_owned()),
            Just(r#""Open""#.to_owned()),
            Just(r#""Done""#.to_owned()),
        ]
    }

    /// A value for field `index` of [`shape`]: mostly one of its type, sometimes anything, or
    /// left out (`None`); the eighth, unknown, field is mostly left out.
    fn field_json(index: usize) -> proptest::strategy::BoxedStrategy<Option<String>> {
        use proptest::prelude::*;
        let fitting: BoxedStrategy<String> = match index {
            0 => prop_oneof![any::<i64>().prop_map(|n| n.to_string()), any::<u64>().prop_map(|n| n.to_string())].boxed(),
            1 => (0u16..300).prop_map(|n| n.to_string()).boxed(),
            2 => any::<f64>().prop_filter("finite", |x| x.is_finite()).prop_map(|x| format!("{x:?}")).boxed(),
            3 => prop_oneof![Just("null".to_owned()), "[a-z]{0,3}".prop_map(|text| format!("{text:?}"))].boxed(),
            4 => prop::collection::vec("[a-z]{0,2}", 0..3).prop_map(|items| format!("{items:?}")).boxed(),
            5 => prop::collection::btree_map("[a-c]", any::<i32>(), 0..3)
                .prop_map(|map| format!("{{{}}}", map.iter().map(|(k, v)| format!("{k:?}: {v}")).collect::<Vec<_>>().join(", ")))
                .boxed(),
            6 => prop_oneof![Just(r#""Open""#.to_owned()), "[a-z]{0,3}".prop_map(|text| format!("{{\"Done\": {text:?}}}"))].boxed(),
            _ => return proptest::option::weighted(0.1, any_json()).boxed(),
        };
        prop_oneof![8 => fitting.prop_map(Some), 1 => any_json().prop_map(Some), 1 => Just(None)].boxed()
    }

    fn record_json() -> impl proptest::strategy::Strategy<Value = Vec<Option<String>>> {
        (0..8).map(field_json).collect::<Vec<_>>()
    }

    proptest::proptest! {
        /// Any record, mostly of fitting values, sometimes of any kind in a field, a field
        /// left out or an unknown one: when it is said to be conformed, conforming writes
        /// exactly its bytes.
        #[test]
        fn whatever_is_said_to_be_conformed_conforms_to_the_same_bytes(values in record_json()) {
            let names = ["id", "small", "score", "note", "tags", "extra", "state", "unknown"];
            let entries: Vec<String> =
                names.iter().zip(&values).filter_map(|(name, value)| value.as_ref().map(|value| format!("{name:?}: {value}"))).collect();
            let json = format!("{{{}}}", entries.join(", "));
            let keys = shared();
            let bytes = encoded(&json, &keys);
            let record = Doc::from_untrusted_with_keys(&bytes, &keys).unwrap().root();
            if is_conformed(record, &shape()) {
                CONFORMED_CASES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                proptest::prop_assert_eq!(conform_into(record, &shape(), &keys, Source::Binary).ok(), Some(bytes), "{}", json);
            }
        }
    }

    #[test]
    fn anything_conforming_would_change_or_refuse_is_not_conformed() {
        let keys = shared();
        let base = r#""id": 1, "small": 1, "score": 0.5, "note": null, "tags": [], "extra": {}, "state": "Open""#;
        let changed = [
            r#"{"id": 1, "small": 1, "score": 2, "note": null, "tags": [], "extra": {}, "state": "Open"}"#, // int for a float
            r#"{"id": 1, "small": 1, "score": 0.5, "tags": [], "extra": {}, "state": "Open"}"#,             // optional left out
            r#"{"id": 1, "small": 300, "score": 0.5, "note": null, "tags": [], "extra": {}, "state": "Open"}"#, // range
            r#"{"id": 1, "small": 1, "score": 0.5, "note": null, "tags": [1], "extra": {}, "state": "Open"}"#, // element type
            r#"{"id": 1, "small": 1, "score": 0.5, "note": null, "tags": [], "extra": {}, "state": "Done"}"#, // payload missing
            r#"{"id": 1, "small": 1, "score": 0.5, "note": null, "tags": [], "extra": {}, "state": {"Open": 1}}"#, // payload given
            r#"{"id": 1, "small": 1, "score": 0.5, "note": null, "tags": [], "extra": {}, "state": "Gone"}"#, // no such variant
            r#"{"id": 1.5, "small": 1, "score": 0.5, "note": null, "tags": [], "extra": {}, "state": "Open"}"#, // float for an int
        ];
        for json in changed {
            let bytes = encoded(json, &keys);
            assert!(!is_conformed(Doc::from_untrusted_with_keys(&bytes, &keys).unwrap().root(), &shape()), "{json}");
        }
        let extra = format!("{{{base}, \"unknown\": 1}}");
        let bytes = encoded(&extra, &keys);
        assert!(!is_conformed(Doc::from_untrusted_with_keys(&bytes, &keys).unwrap().root(), &shape()), "an unknown field");
        let any = TypeDesc::Struct(vec![("v".into(), TypeDesc::Any)]);
        let bytes = encoded(r#"{"v": 1}"#, &keys);
        assert!(!is_conformed(Doc::from_untrusted_with_keys(&bytes, &keys).unwrap().root(), &any), "Any is always conformed again");
    }
}
