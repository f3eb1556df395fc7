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
    let record = record.to_json();
    if record.contains("\\u0000") {
        return Err(Misfit { field: String::new(), problem: "a string holds a NUL character, which jsonb cannot store".into() });
    }
    Ok(Row { key: key.to_vec(), cells, record })
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
    fn a_missing_key_field_and_a_wrong_kind_are_misfits_naming_the_field() {
        let bytes = tessera_value::from_json(br#"{"s": 1}"#).unwrap();
        let root = Doc::from_untrusted(&bytes).unwrap().root();
        assert_eq!(row(&shape(&[("id", ColumnType::BigInt, true)]), b"k", root).unwrap_err().field, "id");
        assert_eq!(row(&shape(&[("s", ColumnType::Text, false)]), b"k", root).unwrap_err().field, "s");
    }
}
