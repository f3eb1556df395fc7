//! The check of a record given as a [`Value`] against a collection's stored shape, and its
//! encoding in the layout a record type's generated codec writes (struct fields in declaration
//! order, a missing optional field as null, a float field's integer as a float), so that a
//! typed handle reads what a dynamic one wrote.
//!
//! The walk recurses along the stored shape and the value together; the value's nesting is
//! bounded by the binary format's depth limit, so the recursion is too.

use crate::collection::TypeDesc;
use crate::collection::schema::{FloatType, holds_exactly};
use base64::Engine as _;
use tessera_value::codec::narrow_to_f32;
use tessera_value::{EncodeError, Encoder, Kind, Value};

/// Why a value does not fit the shape, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Misfit {
    /// Dotted path of the field (`tags[2]` for an element).
    pub(crate) path: String,
    pub(crate) problem: String,
}

/// How conforming failed: the value does not fit, or the encoder refused it.
pub(crate) enum ConformError {
    Misfit(Misfit),
    Encode(EncodeError),
}

impl From<EncodeError> for ConformError {
    fn from(error: EncodeError) -> Self {
        ConformError::Encode(error)
    }
}

type Conformed = Result<(), ConformError>;

/// Where the value came from, which decides how a bytes field may be given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// A binary document: a bytes field holds binary data.
    Binary,
    /// JSON text, which has no binary type: a bytes field holds binary data (never, from JSON)
    /// or a base64 string (standard alphabet, padded), which is how tessera writes bytes as
    /// JSON, so that a record's JSON reads back as the record.
    Json,
}

/// Checks `value` against `shape` and writes it into `out`.
pub(crate) fn conform(out: &mut Encoder<'_>, value: Value<'_>, shape: &TypeDesc, source: Source) -> Conformed {
    let mut path = String::new();
    walk(out, value, shape, source, &mut path)
}

fn misfit(path: &str, problem: impl Into<String>) -> ConformError {
    ConformError::Misfit(Misfit { path: if path.is_empty() { "$".to_owned() } else { path.to_owned() }, problem: problem.into() })
}

/// The value's kind in words, as JSON calls it (a dict is "an object").
fn kind_name(value: Value<'_>) -> &'static str {
    match value.kind() {
        Kind::Dict => "an object",
        kind => kind.described(),
    }
}

fn wrong(path: &str, expected: &str, found: Value<'_>) -> ConformError {
    misfit(path, format!("expected {expected}, found {}", kind_name(found)))
}

/// Runs `inside` with `step` appended to `path`, then restores it.
fn at<R>(path: &mut String, step: &str, inside: impl FnOnce(&mut String) -> R) -> R {
    let before = path.len();
    if !path.is_empty() && !step.starts_with('[') {
        path.push('.');
    }
    path.push_str(step);
    let result = inside(path);
    path.truncate(before);
    result
}

/// A number as a float: a float as it is, an integer only if `float` holds it exactly (a
/// rounded one would be stored as another number than the one given).
fn exact_float(value: Value<'_>, path: &str, float: FloatType) -> Result<f64, ConformError> {
    let number = value.as_f64().ok_or_else(|| wrong(path, "a number", value))?;
    if matches!(value.kind(), Kind::Int | Kind::UInt) && !holds_exactly(value, float) {
        return Err(misfit(path, format!("{} cannot be held exactly by {}", value.to_json(), float.name())));
    }
    Ok(number)
}

fn walk(out: &mut Encoder<'_>, value: Value<'_>, shape: &TypeDesc, source: Source, path: &mut String) -> Conformed {
    match shape {
        TypeDesc::Any => Ok(out.push_value(value)?),
        TypeDesc::Option(_) if value.is_null() => Ok(out.push_null()?),
        TypeDesc::Option(inner) => walk(out, value, inner, source, path),
        TypeDesc::Bool => Ok(out.push_bool(value.as_bool().ok_or_else(|| wrong(path, "a boolean", value))?)?),
        TypeDesc::Int => match value.kind() {
            Kind::Int => Ok(out.push_i64(value.as_i64().ok_or_else(|| wrong(path, "an integer", value))?)?),
            Kind::UInt => Ok(out.push_u64(value.as_u64().ok_or_else(|| wrong(path, "an integer", value))?)?),
            _ => Err(wrong(path, "an integer", value)),
        },
        TypeDesc::Integer(int) => {
            let integer = match value.kind() {
                Kind::Int => value.as_i64().map(i128::from),
                Kind::UInt => value.as_u64().map(i128::from),
                _ => None,
            };
            let integer = integer.ok_or_else(|| wrong(path, &format!("an integer ({})", int.name()), value))?;
            if !int.contains(integer) {
                let (min, max) = int.range();
                return Err(misfit(path, format!("{integer} is out of range for {} ({min} to {max})", int.name())));
            }
            match i64::try_from(integer) {
                Ok(signed) => Ok(out.push_i64(signed)?),
                Err(_) => Ok(out.push_u64(u64::try_from(integer).expect("in u64's range"))?),
            }
        }
        TypeDesc::Float => match value.kind() {
            Kind::Int | Kind::UInt | Kind::Float => Ok(out.push_f64(exact_float(value, path, FloatType::F64)?)?),
            _ => Err(wrong(path, "a number", value)),
        },
        TypeDesc::Float32 => {
            if !matches!(value.kind(), Kind::Int | Kind::UInt | Kind::Float) {
                return Err(wrong(path, "a number (f32)", value));
            }
            let float = exact_float(value, path, FloatType::F32)?;
            let narrowed = narrow_to_f32(float).ok_or_else(|| misfit(path, format!("{float:e} is out of range for f32")))?;
            Ok(out.push_f32(narrowed)?)
        }
        TypeDesc::String => Ok(out.push_str(value.as_str().ok_or_else(|| wrong(path, "a string", value))?)?),
        TypeDesc::Bytes => match (value.as_bytes(), value.as_str()) {
            (Some(bytes), _) => Ok(out.push_bytes(bytes)?),
            (None, Some(text)) if source == Source::Json => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .map_err(|error| misfit(path, format!("expected binary data as base64, found a string that is not: {error}")))?;
                Ok(out.push_bytes(&bytes)?)
            }
            _ => Err(wrong(path, if source == Source::Json { "binary data (a base64 string)" } else { "binary data" }, value)),
        },
        TypeDesc::List(element) => {
            let array = value.as_array().ok_or_else(|| wrong(path, "an array", value))?;
            out.begin_array()?;
            for (index, item) in array.iter().enumerate() {
                at(path, &format!("[{index}]"), |path| walk(out, item, element, source, path))?;
            }
            Ok(out.end_array()?)
        }
        TypeDesc::Tuple(elements) => {
            let expected = format!("an array of {} elements", elements.len());
            let array = value.as_array().ok_or_else(|| wrong(path, &expected, value))?;
            if array.len() != elements.len() {
                return Err(misfit(path, format!("expected {expected}, found an array of {}", array.len())));
            }
            out.begin_array()?;
            for (index, (item, element)) in array.iter().zip(elements).enumerate() {
                at(path, &format!("[{index}]"), |path| walk(out, item, element, source, path))?;
            }
            Ok(out.end_array()?)
        }
        TypeDesc::Map(element) => {
            let dict = value.as_dict().ok_or_else(|| wrong(path, "an object", value))?;
            // In key order, as a record type's codec writes a map (`BTreeMap`'s order; a
            // `HashMap` is sorted): one record has one encoding whoever wrote it, so an upsert
            // of the same value is `Unchanged`.
            let mut entries: Vec<(&str, Value<'_>)> = dict.iter().collect();
            entries.sort_unstable_by_key(|(name, _)| *name);
            out.begin_dict()?;
            for (name, item) in entries {
                out.key(name)?;
                at(path, name, |path| walk(out, item, element, source, path))?;
            }
            Ok(out.end_dict()?)
        }
        TypeDesc::Struct(fields) => walk_struct(out, value, fields, source, path),
        TypeDesc::Enum(variants) => walk_enum(out, value, variants, source, path),
    }
}

fn walk_struct(out: &mut Encoder<'_>, value: Value<'_>, fields: &[(String, TypeDesc)], source: Source, path: &mut String) -> Conformed {
    let dict = value.as_dict().ok_or_else(|| wrong(path, "an object", value))?;
    if let Some((unknown, _)) = dict.iter().find(|(name, _)| !fields.iter().any(|(field, _)| field == name)) {
        return Err(at(path, unknown, |path| misfit(path, "not a field of the collection's records")));
    }
    out.begin_dict()?;
    for (name, shape) in fields {
        match dict.get(name) {
            Some(item) => {
                out.key(name)?;
                at(path, name, |path| walk(out, item, shape, source, path))?;
            }
            // A record type writes `None` as null: so does this.
            None if matches!(shape, TypeDesc::Option(_)) => {
                out.key(name)?;
                out.push_null()?;
            }
            None if matches!(shape, TypeDesc::Any) => {}
            None => return Err(at(path, name, |path| misfit(path, "missing: the field is required"))),
        }
    }
    Ok(out.end_dict()?)
}

fn walk_enum(
    out: &mut Encoder<'_>,
    value: Value<'_>,
    variants: &[(String, Option<TypeDesc>)],
    source: Source,
    path: &mut String,
) -> Conformed {
    let names = || variants.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>().join(", ");
    if let Some(name) = value.as_str() {
        return match variants.iter().find(|(variant, _)| variant == name) {
            Some((_, None)) => Ok(out.push_str(name)?),
            Some((_, Some(_))) => Err(misfit(path, format!("variant {name:?} has a payload: write {{\"{name}\": ...}}"))),
            None => Err(misfit(path, format!("{name:?} is not a variant (one of {})", names()))),
        };
    }
    let dict = value.as_dict().filter(|dict| dict.len() == 1).ok_or_else(|| wrong(path, "a variant name or a one-entry object", value))?;
    let (name, payload) = dict.iter().next().ok_or_else(|| wrong(path, "a one-entry object", value))?;
    let Some((_, shape)) = variants.iter().find(|(variant, _)| variant == name) else {
        return Err(misfit(path, format!("{name:?} is not a variant (one of {})", names())));
    };
    let Some(shape) = shape else {
        return Err(misfit(path, format!("variant {name:?} has no payload: write it as the string {name:?}")));
    };
    out.begin_dict()?;
    out.key(name)?;
    at(path, name, |path| walk(out, payload, shape, source, path))?;
    Ok(out.end_dict()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collection::IntType;
    use tessera_value::{Doc, from_json};

    fn shape() -> TypeDesc {
        TypeDesc::Struct(vec![
            ("id".into(), TypeDesc::Int),
            ("score".into(), TypeDesc::Float),
            ("note".into(), TypeDesc::Option(Box::new(TypeDesc::String))),
            ("tags".into(), TypeDesc::List(Box::new(TypeDesc::String))),
            ("state".into(), TypeDesc::Enum(vec![("Open".into(), None), ("Done".into(), Some(TypeDesc::String))])),
        ])
    }

    fn check(json: &str) -> Result<String, Misfit> {
        let bytes = from_json(json.as_bytes()).unwrap();
        let value = Doc::from_untrusted(&bytes).unwrap().root();
        let mut out = Encoder::new();
        match conform(&mut out, value, &shape(), Source::Binary) {
            Ok(()) => Ok(Doc::from_untrusted(&out.finish().unwrap()).unwrap().root().to_json()),
            Err(ConformError::Misfit(misfit)) => Err(misfit),
            Err(ConformError::Encode(error)) => panic!("{error}"),
        }
    }

    #[test]
    fn records_are_written_in_the_codec_layout() {
        let written = check(r#"{"tags": ["a"], "state": "Open", "score": 2, "id": 1}"#).unwrap();
        assert_eq!(written, r#"{"id":1,"score":2.0,"note":null,"tags":["a"],"state":"Open"}"#);
        let written = check(r#"{"id": 1, "score": 0.5, "tags": [], "state": {"Done": "yes"}}"#).unwrap();
        assert!(written.ends_with(r#""state":{"Done":"yes"}}"#), "{written}");
    }

    #[test]
    fn each_misfit_names_its_path() {
        let cases = [
            (r#"{"id": "x", "score": 1, "tags": [], "state": "Open"}"#, "id", "expected an integer, found a string"),
            (r#"{"score": 1, "tags": [], "state": "Open"}"#, "id", "missing"),
            (r#"{"id": 1, "score": 1, "tags": ["a", 2], "state": "Open"}"#, "tags[1]", "expected a string"),
            (r#"{"id": 1, "score": 1, "tags": [], "state": "Gone"}"#, "state", "not a variant"),
            (r#"{"id": 1, "score": 1, "tags": [], "state": "Done"}"#, "state", "has a payload"),
            (r#"{"id": 1, "score": 1, "tags": [], "state": "Open", "extra": 1}"#, "extra", "not a field"),
            (r#"{"id": 1.5, "score": 1, "tags": [], "state": "Open"}"#, "id", "found a float"),
            ("[1]", "$", "expected an object"),
        ];
        for (json, path, problem) in cases {
            let misfit = check(json).unwrap_err();
            assert_eq!(misfit.path, path, "{json}");
            assert!(misfit.problem.contains(problem), "{json}: {}", misfit.problem);
        }
    }

    #[test]
    fn an_integer_of_a_known_width_must_be_in_its_range() {
        let fit = |json: &str, int: IntType| {
            let bytes = from_json(json.as_bytes()).unwrap();
            let value = Doc::from_untrusted(&bytes).unwrap().root();
            let shape = TypeDesc::Struct(vec![("n".into(), TypeDesc::Integer(int))]);
            match conform(&mut Encoder::new(), value, &shape, Source::Binary) {
                Ok(()) => Ok(()),
                Err(ConformError::Misfit(misfit)) => Err(misfit),
                Err(ConformError::Encode(error)) => panic!("{error}"),
            }
        };
        assert_eq!(fit(r#"{"n": 255}"#, IntType::U8), Ok(()));
        assert_eq!(fit(r#"{"n": -128}"#, IntType::I8), Ok(()));
        assert_eq!(fit(r#"{"n": 18446744073709551615}"#, IntType::U64), Ok(()));
        for (json, int, problem) in [
            (r#"{"n": 300}"#, IntType::U8, "300 is out of range for u8 (0 to 255)"),
            (r#"{"n": -1}"#, IntType::U64, "-1 is out of range for u64"),
            (r#"{"n": 18446744073709551615}"#, IntType::I64, "out of range for i64"),
            (r#"{"n": 2147483648}"#, IntType::I32, "out of range for i32"),
            (r#"{"n": 1.5}"#, IntType::I32, "expected an integer (i32), found a float"),
        ] {
            let misfit = fit(json, int).unwrap_err();
            assert_eq!(misfit.path, "n", "{json}");
            assert!(misfit.problem.contains(problem), "{json}: {}", misfit.problem);
        }
    }

    /// JSON has no binary type: from JSON, a bytes field takes a base64 string (as tessera
    /// writes bytes as JSON); from a binary document, a string there is a misfit.
    #[test]
    fn a_bytes_field_takes_base64_from_json_only() {
        let shape = TypeDesc::Struct(vec![("data".into(), TypeDesc::Option(Box::new(TypeDesc::Bytes)))]);
        let fit = |json: &str, source: Source| {
            let bytes = from_json(json.as_bytes()).unwrap();
            let mut out = Encoder::new();
            match conform(&mut out, Doc::from_untrusted(&bytes).unwrap().root(), &shape, source) {
                Ok(()) => Ok(out.finish().unwrap()),
                Err(ConformError::Misfit(misfit)) => Err(misfit),
                Err(ConformError::Encode(error)) => panic!("{error}"),
            }
        };
        let written = fit(r#"{"data": "AAH/"}"#, Source::Json).unwrap();
        let data = Doc::from_untrusted(&written).unwrap().root().get("data").unwrap();
        assert_eq!(data.as_bytes(), Some(&[0u8, 1, 255][..]));
        assert_eq!(fit(r#"{"data": ""}"#, Source::Json).map(|bytes| !bytes.is_empty()), Ok(true));
        for (json, source, problem) in [
            (r#"{"data": "AAH/"}"#, Source::Binary, "expected binary data, found a string"),
            (r#"{"data": "not base64!"}"#, Source::Json, "expected binary data as base64"),
            (r#"{"data": "AAH"}"#, Source::Json, "expected binary data as base64"),
            (r#"{"data": 7}"#, Source::Json, "expected binary data (a base64 string), found an integer"),
        ] {
            let misfit = fit(json, source).unwrap_err();
            assert_eq!(misfit.path, "data", "{json}");
            assert!(misfit.problem.contains(problem), "{json}: {}", misfit.problem);
        }
    }
}
