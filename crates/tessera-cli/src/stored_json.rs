//! A value read through serde as JSON would be, but keeping what JSON cannot hold (NaN and the
//! infinities) so that a command can refuse it by name, where `serde_json::Value` would have
//! shown it as `null`.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value as Json;

/// A JSON tree, except that floats are kept as read (NaN and the infinities included).
#[derive(Debug)]
pub enum StoredJson {
    /// A value that has a JSON form, other than a float.
    Plain(Json),
    /// A float, finite or not.
    Float(f64),
    /// An array.
    Array(Vec<StoredJson>),
    /// An object, in the order read.
    Object(Vec<(String, StoredJson)>),
}

impl StoredJson {
    /// The path (`a.b[2].c`; empty for the root) and value of the first float that is NaN or
    /// infinite.
    pub fn non_finite_float(&self) -> Option<(String, f64)> {
        let mut stack: Vec<(String, &StoredJson)> = vec![(String::new(), self)];
        while let Some((path, value)) = stack.pop() {
            match value {
                StoredJson::Plain(_) => {}
                StoredJson::Float(number) if !number.is_finite() => return Some((path, *number)),
                StoredJson::Float(_) => {}
                StoredJson::Array(elements) => {
                    stack.extend(elements.iter().enumerate().rev().map(|(index, element)| (format!("{path}[{index}]"), element)));
                }
                StoredJson::Object(entries) => stack.extend(
                    entries
                        .iter()
                        .rev()
                        .map(|(key, element)| (if path.is_empty() { key.clone() } else { format!("{path}.{key}") }, element)),
                ),
            }
        }
        None
    }

    /// The JSON form; a non-finite float becomes `null` (check [`StoredJson::non_finite_float`]
    /// first).
    pub fn into_json(self) -> Json {
        match self {
            StoredJson::Plain(value) => value,
            StoredJson::Float(number) => serde_json::Number::from_f64(number).map_or(Json::Null, Json::Number),
            StoredJson::Array(elements) => Json::Array(elements.into_iter().map(StoredJson::into_json).collect()),
            StoredJson::Object(entries) => Json::Object(entries.into_iter().map(|(key, value)| (key, value.into_json())).collect()),
        }
    }
}

/// Written back as read (the documents API needs both directions; the CLI only reads).
impl Serialize for StoredJson {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            StoredJson::Plain(value) => value.serialize(serializer),
            StoredJson::Float(number) => serializer.serialize_f64(*number),
            StoredJson::Array(elements) => {
                let mut seq = serializer.serialize_seq(Some(elements.len()))?;
                elements.iter().try_for_each(|element| seq.serialize_element(element))?;
                seq.end()
            }
            StoredJson::Object(entries) => {
                let mut map = serializer.serialize_map(Some(entries.len()))?;
                entries.iter().try_for_each(|(key, value)| map.serialize_entry(key, value))?;
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for StoredJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StoredVisitor)
    }
}

struct StoredVisitor;

impl<'de> Visitor<'de> for StoredVisitor {
    type Value = StoredJson;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("any value")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<StoredJson, E> {
        Ok(StoredJson::Plain(Json::Bool(value)))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<StoredJson, E> {
        Ok(StoredJson::Plain(Json::from(value)))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<StoredJson, E> {
        Ok(StoredJson::Plain(Json::from(value)))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<StoredJson, E> {
        Ok(StoredJson::Float(value))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<StoredJson, E> {
        Ok(StoredJson::Plain(Json::String(value.to_owned())))
    }

    fn visit_bytes<E: de::Error>(self, value: &[u8]) -> Result<StoredJson, E> {
        Ok(StoredJson::Array(value.iter().map(|&byte| StoredJson::Plain(Json::from(byte))).collect()))
    }

    fn visit_unit<E: de::Error>(self) -> Result<StoredJson, E> {
        Ok(StoredJson::Plain(Json::Null))
    }

    fn visit_none<E: de::Error>(self) -> Result<StoredJson, E> {
        Ok(StoredJson::Plain(Json::Null))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<StoredJson, D::Error> {
        StoredJson::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<StoredJson, A::Error> {
        let mut elements = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(element) = seq.next_element()? {
            elements.push(element);
        }
        Ok(StoredJson::Array(elements))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StoredJson, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0).min(4096));
        while let Some((key, value)) = map.next_entry::<String, StoredJson>()? {
            entries.push((key, value));
        }
        Ok(StoredJson::Object(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_finite_float_is_found_by_its_path_and_other_values_read_as_json() {
        let bytes = tessera::value::to_vec(&serde_json::json!({"a": [1, {"b": 2.5}], "s": "x"})).unwrap();
        let stored: StoredJson = tessera::value::from_slice(&bytes).unwrap();
        assert!(stored.non_finite_float().is_none());
        assert_eq!(stored.into_json(), serde_json::json!({"a": [1, {"b": 2.5}], "s": "x"}));
        let nested = std::collections::BTreeMap::from([("a", vec![1.0, f64::NEG_INFINITY])]);
        let bytes = tessera::value::to_vec(&nested).unwrap();
        let stored: StoredJson = tessera::value::from_slice(&bytes).unwrap();
        let (path, number) = stored.non_finite_float().unwrap();
        assert_eq!((path.as_str(), number), ("a[1]", f64::NEG_INFINITY));
    }
}
