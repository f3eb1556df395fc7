//! PostgreSQL names: quoting, and the checks that keep PostgreSQL from changing a name (it
//! truncates identifiers longer than 63 bytes without an error).

use crate::error::{ReplicateError, Result};

/// Longest identifier PostgreSQL keeps whole, in bytes (NAMEDATALEN - 1).
///
/// ```
/// # use tessera::collection::{DynSchema, KeyKind, TypeDesc};
/// # // A schema of one string key field named `key`.
/// # let schema = |key: &str| DynSchema {
/// #     version: 1,
/// #     key_fields: vec![key.into()],
/// #     key_kinds: vec![KeyKind::String],
/// #     shape: TypeDesc::Struct(vec![(key.into(), TypeDesc::String)]),
/// #     indexes: vec![],
/// # };
/// use tessera_postgres::{ReplicateError, TableShape, IDENTIFIER_LEN_MAX};
/// assert!(TableShape::of(&"t".repeat(IDENTIFIER_LEN_MAX), &schema("id")).is_ok());
/// let error = TableShape::of(&"t".repeat(IDENTIFIER_LEN_MAX + 1), &schema("id")).unwrap_err();
/// assert!(matches!(error, ReplicateError::Name { what: "table", problem: "longer than 63 bytes", .. }));
/// ```
pub const IDENTIFIER_LEN_MAX: usize = 63;

/// `name` as a quoted PostgreSQL identifier, if PostgreSQL keeps it as it is.
pub(crate) fn quoted(what: &'static str, name: &str) -> Result<String> {
    let problem = if name.is_empty() {
        Some("empty")
    } else if name.len() > IDENTIFIER_LEN_MAX {
        Some("longer than 63 bytes")
    } else if name.contains('\0') {
        Some("contains a NUL byte")
    } else {
        None
    };
    if let Some(problem) = problem {
        return Err(ReplicateError::Name { what, name: name.to_owned(), problem });
    }
    Ok(format!("\"{}\"", name.replace('"', "\"\"")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_double_quotes_and_refuses_names_postgres_would_change() {
        assert_eq!(quoted("table", "people").unwrap(), "\"people\"");
        assert_eq!(quoted("column", "a\"b").unwrap(), "\"a\"\"b\"");
        assert!(quoted("table", &"x".repeat(IDENTIFIER_LEN_MAX)).is_ok());
        assert!(matches!(quoted("table", &"x".repeat(IDENTIFIER_LEN_MAX + 1)), Err(ReplicateError::Name { .. })));
        assert!(matches!(quoted("column", ""), Err(ReplicateError::Name { .. })));
        assert!(matches!(quoted("column", "a\0"), Err(ReplicateError::Name { .. })));
    }
}
