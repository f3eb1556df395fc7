//! A record's row: each field column's value as the text PostgreSQL casts to the column's
//! type (`NULL` for a missing or null field), and the record as JSON for `jsonb` (pure).

use crate::columns::{ColumnType, TableShape};
use tessera_value::{Kind, Value};

/// One record's row, ready to bind.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    /// The stored key.
    pub(crate) key: Vec<u8>,
    /// One cell per field column of the shape, in its order.
    pub(crate) cells: Vec<Option<String>>,
    /// The record as JSON text.
    pub(crate) record: String,
}

/// Why a value does not fit its column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Misfit {
    pub(crate) field: String,
    pub(crate) problem: String,
}

/// The row of `record` (stored key `key`) for `shape`.
pub(crate) fn row(shape: &TableShape, key: &[u8], record: Value<'_>) -> Result<Row, Misfit> {
    let mut cells = Vec::with_capacity(shape.columns.len());
    for column in &shape.columns {
        let value = lookup(record, &column.path).filter(|value| !value.is_null());
        let cell = match value {
            None if column.key => return Err(Misfit { field: column.path.clone(), problem: "a key field is missing".into() }),
            None => None,
            Some(value) => Some(cell(column.column_type, value).map_err(|problem| Misfit { field: column.path.clone(), problem })?),
        };
        cells.push(cell);
    }
    if let Some(misfit) = unstorable(record) {
        return Err(misfit);
    }
    Ok(Row { key: key.to_vec(), cells, record: plain_exponents(record.to_json()) })
}

/// A step of a path in a record.
#[derive(Clone, Copy)]
enum Step<'a> {
    Field(&'a str),
    Item(usize),
}

/// The first value of `record` that `jsonb` cannot hold as tessera stores it, named by its
/// dotted path (list items by position): a NUL character in a string or a field name (`jsonb`
/// refuses it), NaN or an infinity (JSON has no such number: tessera's JSON writes `null`), or
/// `-0.0` (`jsonb` numbers are `numeric`, which has no negative zero).
fn unstorable(record: Value<'_>) -> Option<Misfit> {
    // Depth-first with an explicit stack (records may be deep); `trail` is the path to the
    // value being looked at.
    let mut stack: Vec<(usize, Option<Step<'_>>, Value<'_>)> = vec![(0, None, record)];
    let mut trail: Vec<Step<'_>> = Vec::new();
    while let Some((depth, step, value)) = stack.pop() {
        trail.truncate(depth.saturating_sub(1));
        trail.extend(step);
        let problem = match value.kind() {
            Kind::String if value.as_str().is_some_and(|text| text.contains('\0')) => "a NUL character, which jsonb cannot store",
            Kind::Float => match value.as_f64() {
                Some(float) if float.is_nan() || float.is_infinite() => "NaN or an infinity, which jsonb cannot store",
                Some(float) if float == 0.0 && float.is_sign_negative() => {
                    "-0.0, which jsonb cannot store (its numbers have no negative zero)"
                }
                _ => continue,
            },
            Kind::Array => {
                let array = value.as_array().expect("kind is array");
                stack.extend(array.iter().enumerate().map(|(position, item)| (depth + 1, Some(Step::Item(position)), item)));
                continue;
            }
            Kind::Dict => {
                let dict = value.as_dict().expect("kind is dict");
                let mut found = None;
                for entry in (0..dict.len()).filter_map(|position| dict.entry(position)) {
                    if entry.0.contains('\0') {
                        found = Some(entry.0);
                        break;
                    }
                    stack.push((depth + 1, Some(Step::Field(entry.0)), entry.1));
                }
                let Some(name) = found else { continue };
                trail.push(Step::Field(name));
                "a field name with a NUL character, which jsonb cannot store"
            }
            _ => continue,
        };
        let field: Vec<String> = trail
            .iter()
            .map(|step| match step {
                Step::Field(name) => (*name).to_owned(),
                Step::Item(position) => position.to_string(),
            })
            .collect();
        return Some(Misfit { field: field.join("."), problem: problem.into() });
    }
    None
}

/// `json` with every number in exponent form with a positive exponent (how tessera writes
/// floats from 1e16 up: `1e18`, `1.5e17`) written out in full with a fractional part
/// (`1000000000000000000.0`): `jsonb` keeps a number's decimal digits as written, so `1e18`
/// would become the integer `1000000000000000000` and read back as one.
fn plain_exponents(json: String) -> String {
    let bytes = json.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let (mut position, mut in_string) = (0, false);
    while position < bytes.len() {
        let byte = bytes[position];
        if in_string {
            match byte {
                b'\\' => position += 1,
                b'"' => in_string = false,
                _ => {}
            }
            position += 1;
            continue;
        }
        if byte == b'"' {
            in_string = true;
            position += 1;
            continue;
        }
        if byte != b'-' && !byte.is_ascii_digit() {
            position += 1;
            continue;
        }
        let start = position;
        while position < bytes.len() && matches!(bytes[position], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
            position += 1;
        }
        if let Some(plain) = plain_number(&json[start..position]) {
            let out = out.get_or_insert_with(|| String::with_capacity(json.len() + 32));
            out.push_str(&json[copied..start]);
            out.push_str(&plain);
            copied = position;
        }
    }
    match out {
        Some(mut out) => {
            out.push_str(&json[copied..]);
            out
        }
        None => json,
    }
}

/// `number` (JSON number text) written out in full if it has a positive exponent.
fn plain_number(number: &str) -> Option<String> {
    let (mantissa, exponent) = number.split_once(['e', 'E'])?;
    let exponent: usize = exponent.strip_prefix('+').unwrap_or(exponent).parse().ok()?;
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{whole}{fraction}");
    let point = whole.len() + exponent;
    Some(if point >= digits.len() {
        format!("{sign}{digits}{}.0", "0".repeat(point - digits.len()))
    } else {
        format!("{sign}{}.{}", &digits[..point], &digits[point..])
    })
}

/// Whether `row`'s cells of the `bigint` columns among `shape`'s `numeric` ones (`bigint`,
/// see `table::ensure_table`) are in `bigint`'s range: the first that is not, as a misfit.
pub(crate) fn fits_bigint(shape: &TableShape, row: &Row, bigint: &[String]) -> Result<(), Misfit> {
    for (column, cell) in shape.columns.iter().zip(&row.cells) {
        if let Some(text) = cell
            && bigint.contains(&column.name)
            && text.parse::<i64>().is_err()
        {
            return Err(Misfit {
                field: column.path.clone(),
                problem: format!("{text} is out of the range of the table's bigint column (the field needs numeric)"),
            });
        }
    }
    Ok(())
}

/// The value at dotted `path`.
fn lookup<'a>(record: Value<'a>, path: &str) -> Option<Value<'a>> {
    let mut current = record;
    for step in path.split('.') {
        current = current.get(step)?;
    }
    Some(current)
}

fn cell(column_type: ColumnType, value: Value<'_>) -> Result<String, String> {
    let wrong = || format!("a {:?} value for a {} column", value.kind(), column_type.sql());
    match column_type {
        ColumnType::BigInt | ColumnType::Numeric => match value.kind() {
            Kind::Int | Kind::UInt => {
                let text = match value.as_i64() {
                    Some(signed) => signed.to_string(),
                    None => value.as_u64().ok_or_else(wrong)?.to_string(),
                };
                Ok(text)
            }
            _ => Err(wrong()),
        },
        ColumnType::Double => {
            let float = value.as_f64().ok_or_else(wrong)?;
            Ok(match float {
                f if f.is_nan() => "NaN".into(),
                f if f == f64::INFINITY => "Infinity".into(),
                f if f == f64::NEG_INFINITY => "-Infinity".into(),
                f => format!("{f:?}"),
            })
        }
        ColumnType::Text => {
            let text = value.as_str().ok_or_else(wrong)?;
            if text.contains('\0') {
                return Err("a NUL character, which text cannot store".into());
            }
            Ok(text.to_owned())
        }
        ColumnType::Boolean => Ok(value.as_bool().ok_or_else(wrong)?.to_string()),
        ColumnType::Bytea => {
            let bytes = value.as_bytes().ok_or_else(wrong)?;
            let mut text = String::with_capacity(2 + bytes.len() * 2);
            text.push_str("\\x");
            for byte in bytes {
                text.push_str(&format!("{byte:02x}"));
            }
            Ok(text)
        }
        ColumnType::Jsonb => Ok(value.to_json()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::columns::FieldColumn;
    use tessera_value::Doc;

    fn shape(columns: &[(&str, ColumnType, bool)]) -> TableShape {
        TableShape {
            table: "t".into(),
            columns: columns
                .iter()
                .map(|(path, column_type, key)| FieldColumn {
                    name: (*path).into(),
                    path: (*path).into(),
                    column_type: *column_type,
                    key: *key,
                })
                .collect(),
        }
    }

    #[test]
    fn cells_are_the_text_postgres_casts_and_missing_fields_are_null() {
        let bytes =
            tessera_value::from_json(br#"{"id": 18446744073709551615, "a": {"b": -3}, "f": 0.5, "s": "x", "ok": true, "l": [1]}"#).unwrap();
        let root = Doc::from_untrusted(&bytes).unwrap().root();
        let shape = shape(&[
            ("id", ColumnType::Numeric, true),
            ("a.b", ColumnType::BigInt, false),
            ("f", ColumnType::Double, false),
            ("s", ColumnType::Text, false),
            ("ok", ColumnType::Boolean, false),
            ("l", ColumnType::Jsonb, false),
            ("gone", ColumnType::Text, false),
        ]);
        let row = row(&shape, b"k", root).unwrap();
        let cells: Vec<Option<&str>> = row.cells.iter().map(|cell| cell.as_deref()).collect();
        assert_eq!(cells, [Some("18446744073709551615"), Some("-3"), Some("0.5"), Some("x"), Some("true"), Some("[1]"), None]);
        assert_eq!(row.key, b"k");
    }

    #[test]
    fn positive_exponents_are_written_out_and_strings_are_left_alone() {
        assert_eq!(
            plain_exponents(r#"{"a":1e18,"b":"1e18","c":[-1.5e17,2.5e-7,3],"d":"\\\"1e2"}"#.into()),
            r#"{"a":1000000000000000000.0,"b":"1e18","c":[-150000000000000000.0,2.5e-7,3],"d":"\\\"1e2"}"#
        );
        assert_eq!(plain_number("1.2345e2").as_deref(), Some("123.45"));
        assert_eq!(plain_number("12"), None);
    }

    #[test]
    fn a_missing_key_field_and_a_wrong_kind_are_misfits_naming_the_field() {
        let bytes = tessera_value::from_json(br#"{"s": 1}"#).unwrap();
        let root = Doc::from_untrusted(&bytes).unwrap().root();
        assert_eq!(row(&shape(&[("id", ColumnType::BigInt, true)]), b"k", root).unwrap_err().field, "id");
        assert_eq!(row(&shape(&[("s", ColumnType::Text, false)]), b"k", root).unwrap_err().field, "s");
    }
}
