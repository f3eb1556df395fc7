//! The tables in PostgreSQL: the cursor table, and each collection's table created, checked
//! against the shape it needs (refused, naming the column, when it differs), and given the
//! columns of newly indexed fields (filled from the records already there).

use crate::columns::{ColumnType, FieldColumn, KEY_COLUMN, RECORD_COLUMN, TableShape};
use crate::error::{ReplicateError, Result};
use crate::ident;
use postgres::Transaction;
use tessera::collection::TypeDesc;

/// The table of consumers' cursors: the last tessera commit each consumer's replica holds.
///
/// ```no_run
/// use tessera_postgres::CURSOR_TABLE;
/// let mut client = postgres::Client::connect("host=127.0.0.1 user=postgres", postgres::NoTls)?;
/// let sql = format!("SELECT cursor FROM {CURSOR_TABLE} WHERE consumer = $1");
/// let cursor: i64 = client.query_one(&sql, &[&"postgres"])?.get(0);
/// assert!(cursor >= 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const CURSOR_TABLE: &str = "tessera_replication";

/// Creates the cursor table if missing, and gives a table of an earlier version its `digest`
/// column (the digest of the newest tessera feed entry at or before the cursor, see
/// `Db::feed_digest_through`; [`NO_ENTRY_DIGEST`] when there is none; NULL in rows written
/// before the column, or before that marker was)
/// and its `collections` column (the collections the replica holds, sorted; NULL for every
/// collection, and in rows written before the column).
pub(crate) fn ensure_cursor_table(tx: &mut Transaction<'_>) -> Result<()> {
    tx.batch_execute(&format!(
        "CREATE TABLE IF NOT EXISTS {CURSOR_TABLE} (consumer text PRIMARY KEY, cursor bigint NOT NULL, digest bigint, collections text[]); \
         ALTER TABLE {CURSOR_TABLE} ADD COLUMN IF NOT EXISTS digest bigint; \
         ALTER TABLE {CURSOR_TABLE} ADD COLUMN IF NOT EXISTS collections text[]"
    ))?;
    let columns = columns_of(tx, CURSOR_TABLE)?;
    for (name, expected) in [("consumer", "text"), ("cursor", "bigint"), ("digest", "bigint"), ("collections", "ARRAY")] {
        if !check_column(CURSOR_TABLE, &columns, name, expected, |found| found == expected)? {
            return Err(missing(CURSOR_TABLE, name, expected));
        }
    }
    Ok(())
}

/// The consumer's row: the last commit its replica holds, and which collections it holds
/// (`None`: every collection).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CursorRow {
    pub(crate) cursor: u64,
    pub(crate) collections: Option<Vec<String>>,
}

/// The consumer's row, if its replica has one; `lock`: the row stays locked until the
/// transaction ends (a second replicator of the same consumer waits, then sees it moved).
pub(crate) fn read_cursor(tx: &mut Transaction<'_>, consumer: &str, lock: bool) -> Result<Option<CursorRow>> {
    let lock = if lock { " FOR UPDATE" } else { "" };
    let row = tx.query_opt(&format!("SELECT cursor, collections FROM {CURSOR_TABLE} WHERE consumer = $1{lock}"), &[&consumer])?;
    Ok(row.map(|row| CursorRow { cursor: row.get::<_, i64>(0) as u64, collections: row.get(1) }))
}

/// The `digest` column's value for a cursor with no feed entry at or before it (the feed was
/// empty there, or trimmed): a file that kept its history never gains such an entry, so one
/// found later means the file was put back from an older copy. No feed digest is stored as
/// this value ([`stored_digest`]).
pub(crate) const NO_ENTRY_DIGEST: i64 = 0;

/// A feed entry's digest as the `digest` column keeps it: bit for bit (PostgreSQL has no
/// unsigned 64-bit type), except that 0, [`NO_ENTRY_DIGEST`], is kept as 1.
pub(crate) fn stored_digest(digest: u64) -> i64 {
    match digest as i64 {
        NO_ENTRY_DIGEST => 1,
        stored => stored,
    }
}

/// What the `digest` column keeps of the commit at a consumer's cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeptDigest {
    /// A row written before the column, or before [`NO_ENTRY_DIGEST`]: nothing to compare.
    Unknown,
    /// The feed had no entry at or before the cursor.
    NoEntry,
    /// The newest entry's digest, as [`stored_digest`] keeps it.
    Entry(i64),
}

impl KeptDigest {
    /// Whether `found` (the newest feed entry at or before the cursor now) shows that the
    /// file's history is not the one the replica followed.
    pub(crate) fn diverged(self, found: Option<u64>) -> bool {
        match (self, found) {
            (KeptDigest::Entry(kept), Some(found)) => kept != stored_digest(found),
            (KeptDigest::NoEntry, Some(_)) => true,
            // Trimmed since (retention), or nothing kept to compare.
            _ => false,
        }
    }
}

/// The digest kept with the consumer's cursor (see [`ensure_cursor_table`]).
pub(crate) fn read_digest(tx: &mut Transaction<'_>, consumer: &str) -> Result<KeptDigest> {
    let row = tx.query_opt(&format!("SELECT digest FROM {CURSOR_TABLE} WHERE consumer = $1"), &[&consumer])?;
    Ok(match row.and_then(|row| row.get::<_, Option<i64>>(0)) {
        None => KeptDigest::Unknown,
        Some(NO_ENTRY_DIGEST) => KeptDigest::NoEntry,
        Some(digest) => KeptDigest::Entry(digest),
    })
}

/// Sets the consumer's cursor, its digest and its collections (in the transaction that applied
/// the commits up to it).
pub(crate) fn write_cursor(
    tx: &mut Transaction<'_>,
    consumer: &str,
    cursor: u64,
    digest: Option<u64>,
    collections: Option<&[String]>,
) -> Result<()> {
    let cursor =
        i64::try_from(cursor).map_err(|_| ReplicateError::Options { option: "cursor", problem: format!("{cursor} exceeds bigint") })?;
    let digest = digest.map_or(NO_ENTRY_DIGEST, stored_digest);
    let sql = format!(
        "INSERT INTO {CURSOR_TABLE} (consumer, cursor, digest, collections) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (consumer) DO UPDATE SET cursor = EXCLUDED.cursor, digest = EXCLUDED.digest, collections = EXCLUDED.collections"
    );
    tx.execute(&sql, &[&consumer, &cursor, &digest, &collections])?;
    Ok(())
}

/// Each column of `table` (in the search path) with its `data_type`; empty if no such table.
fn columns_of(tx: &mut Transaction<'_>, table: &str) -> Result<Vec<(String, String)>> {
    let rows = tx.query(
        "SELECT column_name::text, data_type::text FROM information_schema.columns \
         WHERE table_schema = current_schema() AND table_name = $1",
        &[&table],
    )?;
    Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
}

fn check_column(table: &str, columns: &[(String, String)], name: &str, expected: &str, accepts: impl Fn(&str) -> bool) -> Result<bool> {
    match columns.iter().find(|(column, _)| column == name) {
        Some((_, found)) if accepts(found) => Ok(true),
        Some((_, found)) => Err(ReplicateError::TableShape {
            table: table.to_owned(),
            column: name.to_owned(),
            expected: expected.to_owned(),
            found: found.clone(),
        }),
        None => Ok(false),
    }
}

fn missing(table: &str, column: &str, expected: &str) -> ReplicateError {
    ReplicateError::TableShape {
        table: table.to_owned(),
        column: column.to_owned(),
        expected: expected.to_owned(),
        found: "missing".into(),
    }
}

/// Creates the table of `shape` if missing; checks an existing one column by column, and adds
/// the columns of indexed fields it lacks. Columns it has beyond the shape are left alone,
/// unless named like a field of the records (`fields`, the collection's stored shape): such a
/// column (an index dropped since) would keep values the records no longer have, and is
/// refused. Returns the columns that are `bigint` where the shape has `numeric` (accepted:
/// each value must then fit, see `cells::fits_bigint`).
pub(crate) fn ensure_table(tx: &mut Transaction<'_>, shape: &TableShape, fields: &TypeDesc) -> Result<Vec<String>> {
    let table = ident::quoted("table", &shape.table)?;
    // The statements name the table unqualified: it must not resolve to a relation of a schema
    // searched before the current one (`pg_catalog`'s, such as `pg_class`, or a temporary one).
    let elsewhere = tx.query_opt(
        "SELECT n.nspname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE c.oid = to_regclass($1) AND n.nspname <> current_schema()",
        &[&table],
    )?;
    if elsewhere.is_some() {
        return Err(ReplicateError::Name {
            what: "table",
            name: shape.table.clone(),
            problem: "PostgreSQL resolves it to a relation of another schema (a system catalog or a temporary table)",
        });
    }
    let columns = columns_of(tx, &shape.table)?;
    if columns.is_empty() {
        let mut definitions = vec![format!("{KEY_COLUMN} bytea PRIMARY KEY")];
        for column in &shape.columns {
            let null = if column.key { " NOT NULL" } else { "" };
            definitions.push(format!("{} {}{null}", ident::quoted("column", &column.name)?, column.column_type.sql()));
        }
        definitions.push(format!("{RECORD_COLUMN} jsonb NOT NULL"));
        tx.batch_execute(&format!("CREATE TABLE {table} ({})", definitions.join(", ")))?;
        return Ok(Vec::new());
    }
    for (name, expected) in [(KEY_COLUMN, "bytea"), (RECORD_COLUMN, "jsonb")] {
        if !check_column(&shape.table, &columns, name, expected, |found| found == expected)? {
            return Err(missing(&shape.table, name, expected));
        }
    }
    for (name, found) in &columns {
        let replicated = name == KEY_COLUMN || name == RECORD_COLUMN || shape.columns.iter().any(|column| &column.name == name);
        if !replicated && fields.resolve(name).is_some() {
            return Err(ReplicateError::TableShape {
                table: shape.table.clone(),
                column: name.clone(),
                expected: "no column (the field is not indexed, so the column would not follow its records: drop it)".into(),
                found: found.clone(),
            });
        }
    }
    let mut bigint = Vec::new();
    for column in &shape.columns {
        let expected = column.column_type.expected();
        if check_column(&shape.table, &columns, &column.name, &expected, |found| column.column_type.accepts(found))? {
            if column.column_type == ColumnType::Numeric && columns.iter().any(|(name, found)| name == &column.name && found == "bigint") {
                bigint.push(column.name.clone());
            }
            continue;
        }
        if column.key {
            return Err(missing(&shape.table, &column.name, &expected));
        }
        add_column(tx, &table, column)?;
    }
    Ok(bigint)
}

/// Adds a newly indexed field's column and fills it from the records' jsonb.
fn add_column(tx: &mut Transaction<'_>, table: &str, column: &FieldColumn) -> Result<()> {
    let name = ident::quoted("column", &column.name)?;
    tx.batch_execute(&format!("ALTER TABLE {table} ADD COLUMN {name} {}", column.column_type.sql()))?;
    let path: Vec<&str> = column.path.split('.').collect();
    let fill = match column.column_type.sql() {
        "jsonb" => format!("UPDATE {table} SET {name} = {RECORD_COLUMN} #> $1"),
        // Bytes are a base64 string in the record's JSON.
        "bytea" => format!(
            "UPDATE {table} SET {name} = decode({RECORD_COLUMN} #>> $1, 'base64') WHERE jsonb_typeof({RECORD_COLUMN} #> $1) = 'string'"
        ),
        sql => format!("UPDATE {table} SET {name} = ({RECORD_COLUMN} #>> $1)::{sql} WHERE jsonb_typeof({RECORD_COLUMN} #> $1) <> 'null'"),
    };
    tx.execute(&fill, &[&path])?;
    Ok(())
}
