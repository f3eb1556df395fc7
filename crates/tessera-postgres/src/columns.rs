//! A collection's table shape: which columns its PostgreSQL table has and of what type, from
//! the collection's stored schema alone (pure: no database is touched).
//!
//! Every table has `tessera_key bytea PRIMARY KEY` (the record's stored key, tessera's
//! order-preserving encoding: deletes need no decoding, and `ORDER BY tessera_key` is
//! tessera's key order), one column per key field, one per indexed field, and
//! `record jsonb NOT NULL` (the whole record).

use crate::error::{ReplicateError, Result};
use crate::ident;
use tessera::collection::{DynSchema, IntType, KeyKind, TypeDesc};

/// The primary-key column: the stored key's bytes.
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
/// use tessera_postgres::{ReplicateError, TableShape, KEY_COLUMN};
/// assert_eq!(KEY_COLUMN, "tessera_key");
/// // A field may not take the key column's name.
/// assert!(matches!(TableShape::of("t", &schema(KEY_COLUMN)), Err(ReplicateError::Name { problem: "the replicator reserves it", .. })));
/// ```
pub const KEY_COLUMN: &str = "tessera_key";
/// The whole record as `jsonb`.
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
/// use tessera_postgres::{ReplicateError, TableShape, RECORD_COLUMN};
/// assert_eq!(RECORD_COLUMN, "record");
/// assert!(matches!(TableShape::of("t", &schema(RECORD_COLUMN)), Err(ReplicateError::Name { what: "column", .. })));
/// ```
pub const RECORD_COLUMN: &str = "record";

/// A column's PostgreSQL type.
///
/// ```
/// use tessera_postgres::ColumnType;
/// assert_eq!(ColumnType::Double.sql(), "double precision");
/// assert!(ColumnType::BigInt.accepts("numeric"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    /// `bigint`: integers known to fit in 64 signed bits.
    BigInt,
    /// `numeric`: integers that may not fit in `bigint` (`u64`, or an integer whose width the
    /// stored schema does not record).
    Numeric,
    /// `double precision`: floats.
    Double,
    /// `text`: strings.
    Text,
    /// `boolean`.
    Boolean,
    /// `bytea`: raw bytes.
    Bytea,
    /// `jsonb`: lists, maps, structs, enums, anything else.
    Jsonb,
}

impl ColumnType {
    /// The type's name as `information_schema.columns.data_type` shows it.
    ///
    /// ```
    /// use tessera_postgres::ColumnType;
    /// assert_eq!(ColumnType::BigInt.sql(), "bigint");
    /// assert_eq!(ColumnType::Jsonb.sql(), "jsonb");
    /// ```
    pub fn sql(self) -> &'static str {
        match self {
            ColumnType::BigInt => "bigint",
            ColumnType::Numeric => "numeric",
            ColumnType::Double => "double precision",
            ColumnType::Text => "text",
            ColumnType::Boolean => "boolean",
            ColumnType::Bytea => "bytea",
            ColumnType::Jsonb => "jsonb",
        }
    }

    /// Whether an existing column of type `found` serves: an integer column may be either
    /// `bigint` or `numeric` (a key width learned later must not make the replicator refuse
    /// its own table).
    ///
    /// ```
    /// use tessera_postgres::ColumnType;
    /// assert!(ColumnType::Numeric.accepts("bigint")); // either integer type serves
    /// assert!(ColumnType::Text.accepts("text"));
    /// assert!(!ColumnType::Text.accepts("character varying"));
    /// ```
    pub fn accepts(self, found: &str) -> bool {
        match self {
            ColumnType::BigInt | ColumnType::Numeric => found == "bigint" || found == "numeric",
            other => found == other.sql(),
        }
    }

    /// What [`ColumnType::accepts`] takes, for an error.
    pub(crate) fn expected(self) -> String {
        match self {
            ColumnType::BigInt | ColumnType::Numeric => "bigint or numeric".into(),
            other => other.sql().into(),
        }
    }

    fn of(desc: &TypeDesc, key_kind: Option<KeyKind>) -> ColumnType {
        let mut desc = desc;
        while let TypeDesc::Option(inner) = desc {
            desc = inner;
        }
        match desc {
            TypeDesc::Bool => ColumnType::Boolean,
            // The stored width (record types declare it); `u64` may not fit in `bigint`.
            TypeDesc::Integer(IntType::U64) => ColumnType::Numeric,
            TypeDesc::Integer(_) => ColumnType::BigInt,
            // Any width (Python's int, schemas stored before widths were): a key's kind may
            // tell, else `numeric` holds every integer.
            TypeDesc::Int => match key_kind {
                Some(KeyKind::U64) | None => ColumnType::Numeric,
                Some(_) => ColumnType::BigInt,
            },
            TypeDesc::Float | TypeDesc::Float32 => ColumnType::Double,
            TypeDesc::String => ColumnType::Text,
            TypeDesc::Bytes => ColumnType::Bytea,
            _ => ColumnType::Jsonb,
        }
    }
}

/// One field column.
///
/// ```
/// use tessera::collection::{DynSchema, KeyKind, TypeDesc};
/// let schema = |key: &str| DynSchema {
///     version: 1,
///     key_fields: vec![key.into()],
///     key_kinds: vec![KeyKind::String],
///     shape: TypeDesc::Struct(vec![(key.into(), TypeDesc::String)]),
///     indexes: vec![],
/// };
/// use tessera_postgres::{ColumnType, FieldColumn, TableShape};
/// let shape = TableShape::of("people", &schema("email"))?;
/// assert_eq!(shape.columns, [FieldColumn { name: "email".into(), path: "email".into(), column_type: ColumnType::Text, key: true }]);
/// # Ok::<(), tessera_postgres::ReplicateError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldColumn {
    /// Column name: the field's dotted path.
    pub name: String,
    /// The field's dotted path in the record.
    pub path: String,
    /// Its type.
    pub column_type: ColumnType,
    /// A key field (NOT NULL) rather than an indexed one (NULL when missing).
    pub key: bool,
}

/// A collection's table: its name and field columns (key fields first, then indexed fields,
/// each once).
///
/// ```
/// use tessera::collection::{DynSchema, KeyKind, TypeDesc};
/// use tessera_postgres::{ColumnType, TableShape};
/// let schema = DynSchema {
///     version: 1,
///     key_fields: vec!["id".into()],
///     key_kinds: vec![KeyKind::U32],
///     shape: TypeDesc::Struct(vec![("id".into(), TypeDesc::Int), ("score".into(), TypeDesc::Float)]),
///     indexes: vec![tessera::collection::DynIndex { path: "score".into(), unique: false, ready: true, failure: None }],
/// };
/// let shape = TableShape::of("players", &schema).unwrap();
/// assert_eq!(shape.columns[0].column_type, ColumnType::BigInt);
/// assert_eq!(shape.columns[1].column_type, ColumnType::Double);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableShape {
    /// The table (the collection's name).
    pub table: String,
    /// The field columns.
    pub columns: Vec<FieldColumn>,
}

impl TableShape {
    /// The shape of collection `collection`'s table; an error if a name cannot be a
    /// PostgreSQL name or a field would take a reserved column's name.
    ///
    /// ```
    /// use tessera::collection::{DynSchema, KeyKind, TypeDesc};
    /// let schema = |key: &str| DynSchema {
    ///     version: 1,
    ///     key_fields: vec![key.into()],
    ///     key_kinds: vec![KeyKind::String],
    ///     shape: TypeDesc::Struct(vec![(key.into(), TypeDesc::String)]),
    ///     indexes: vec![],
    /// };
    /// use tessera_postgres::TableShape;
    /// let shape = TableShape::of("people", &schema("id"))?;
    /// assert_eq!(shape.table, "people");
    /// assert_eq!(shape.columns.len(), 1);
    /// assert!(TableShape::of("with\0nul", &schema("id")).is_err());
    /// # Ok::<(), tessera_postgres::ReplicateError>(())
    /// ```
    pub fn of(collection: &str, schema: &DynSchema) -> Result<TableShape> {
        ident::quoted("table", collection)?;
        let mut columns: Vec<FieldColumn> = Vec::with_capacity(schema.key_fields.len() + schema.indexes.len());
        for (position, path) in schema.key_fields.iter().enumerate() {
            let kind = schema.key_kinds.get(position).copied();
            let desc = schema.shape.resolve(path).unwrap_or(&TypeDesc::Any);
            columns.push(FieldColumn { name: path.clone(), path: path.clone(), column_type: ColumnType::of(desc, kind), key: true });
        }
        for index in &schema.indexes {
            if columns.iter().any(|column| column.path == index.path) {
                continue;
            }
            let desc = schema.shape.resolve(&index.path).unwrap_or(&TypeDesc::Any);
            columns.push(FieldColumn {
                name: index.path.clone(),
                path: index.path.clone(),
                column_type: ColumnType::of(desc, None),
                key: false,
            });
        }
        for column in &columns {
            ident::quoted("column", &column.name)?;
            if column.name == KEY_COLUMN || column.name == RECORD_COLUMN {
                return Err(ReplicateError::Name { what: "column", name: column.name.clone(), problem: "the replicator reserves it" });
            }
        }
        Ok(TableShape { table: collection.to_owned(), columns })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera::collection::DynIndex;

    fn schema(key_kinds: Vec<KeyKind>, indexes: &[&str]) -> DynSchema {
        DynSchema {
            version: 1,
            key_fields: vec!["id".into()],
            key_kinds,
            shape: TypeDesc::Struct(vec![
                ("id".into(), TypeDesc::Int),
                ("name".into(), TypeDesc::Option(Box::new(TypeDesc::String))),
                ("ok".into(), TypeDesc::Bool),
                ("tags".into(), TypeDesc::List(Box::new(TypeDesc::String))),
                ("record".into(), TypeDesc::String),
            ]),
            indexes: indexes.iter().map(|path| DynIndex { path: (*path).into(), unique: false, ready: true, failure: None }).collect(),
        }
    }

    #[test]
    fn types_follow_the_stored_shape_and_key_width() {
        let shape = TableShape::of("t", &schema(vec![KeyKind::U64], &["name", "ok", "tags", "id"])).unwrap();
        let types: Vec<ColumnType> = shape.columns.iter().map(|column| column.column_type).collect();
        assert_eq!(types, [ColumnType::Numeric, ColumnType::Text, ColumnType::Boolean, ColumnType::Jsonb]);
        assert!(shape.columns[0].key && !shape.columns[1].key);
        let shape = TableShape::of("t", &schema(vec![KeyKind::I32], &[])).unwrap();
        assert_eq!(shape.columns[0].column_type, ColumnType::BigInt);
        // Unknown key widths take the type that holds every integer.
        let shape = TableShape::of("t", &schema(vec![], &[])).unwrap();
        assert_eq!(shape.columns[0].column_type, ColumnType::Numeric);
    }

    #[test]
    fn recorded_integer_widths_choose_bigint_except_u64() {
        let shape = TypeDesc::Struct(vec![
            ("id".into(), TypeDesc::Integer(IntType::U64)),
            ("small".into(), TypeDesc::Option(Box::new(TypeDesc::Integer(IntType::U32)))),
            ("signed".into(), TypeDesc::Integer(IntType::I64)),
        ]);
        let indexes =
            ["small", "signed"].iter().map(|path| DynIndex { path: (*path).into(), unique: false, ready: true, failure: None }).collect();
        let schema = DynSchema { version: 1, key_fields: vec!["id".into()], key_kinds: vec![KeyKind::U64], shape, indexes };
        let types: Vec<ColumnType> = TableShape::of("t", &schema).unwrap().columns.iter().map(|column| column.column_type).collect();
        assert_eq!(types, [ColumnType::Numeric, ColumnType::BigInt, ColumnType::BigInt]);
    }

    #[test]
    fn a_field_named_like_a_reserved_column_is_refused() {
        assert!(matches!(TableShape::of("t", &schema(vec![], &["record"])), Err(ReplicateError::Name { .. })));
    }

    #[test]
    fn integer_columns_accept_either_integer_type() {
        assert!(ColumnType::Numeric.accepts("bigint") && ColumnType::BigInt.accepts("numeric"));
        assert!(!ColumnType::Text.accepts("character varying"));
    }
}
