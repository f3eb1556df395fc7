//! Deep equality between values of any two documents.
//!
//! Two values are equal when they have the same structure and equal leaves. Integers compare
//! by numeric value whatever their width or signedness; floats compare by value, except that
//! NaN equals NaN so that equality is reflexive; an integer never equals a float (as in
//! serde_json). Dicts compare as maps: entry order does not matter.

use crate::reader::{Kind, Value};

impl<'b> PartialEq<Value<'b>> for Value<'_> {
    fn eq(&self, other: &Value<'b>) -> bool {
        let mut pending = vec![(*self, *other)];
        while let Some((a, b)) = pending.pop() {
            let same = match (a.kind(), b.kind()) {
                (Kind::Int | Kind::UInt, Kind::Int | Kind::UInt) => integer(&a) == integer(&b),
                (Kind::Float, Kind::Float) => {
                    let (x, y) = (a.as_f64().unwrap_or(0.0), b.as_f64().unwrap_or(0.0));
                    x == y || (x.is_nan() && y.is_nan())
                }
                (Kind::Null, Kind::Null) => true,
                (Kind::Bool, Kind::Bool) => a.as_bool() == b.as_bool(),
                (Kind::String, Kind::String) => a.as_str() == b.as_str(),
                (Kind::Binary, Kind::Binary) => a.as_bytes() == b.as_bytes(),
                (Kind::Array, Kind::Array) => {
                    let (x, y) = (a.as_array().expect("array"), b.as_array().expect("array"));
                    x.len() == y.len() && {
                        pending.extend(x.iter().zip(y.iter()));
                        true
                    }
                }
                (Kind::Dict, Kind::Dict) => {
                    let (x, y) = (a.as_dict().expect("dict"), b.as_dict().expect("dict"));
                    x.len() == y.len()
                        && x.iter().all(|(key, value)| match y.get(key) {
                            Some(other) => {
                                pending.push((value, other));
                                true
                            }
                            None => false,
                        })
                }
                _ => false,
            };
            if !same {
                return false;
            }
        }
        true
    }
}

fn integer(value: &Value<'_>) -> i128 {
    match value.as_i64() {
        Some(v) => v as i128,
        None => value.as_u64().unwrap_or(0) as i128,
    }
}
