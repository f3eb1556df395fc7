//! The tables in PostgreSQL: the cursor table, and each collection's table created, checked
//! against the shape it needs (refused, naming the column, when it differs), and given the
//! columns of newly indexed fields (filled from the records already there).

use crate::columns::{FieldColumn, KEY_COLUMN, RECORD_COLUMN, TableShape};
use crate::error::{ReplicateError, Result};
use crate::ident;
use postgres::Transaction;

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
/// `Db::feed_digest_through`; NULL when there is none, or in rows written before the column).
pub(crate) fn ensure_cursor_table(tx: &mut Transaction<'_>) -> Result<()> {
    tx.batch_execute(&format!(
        "CREATE TABLE IF NOT EXISTS {CURSOR_TABLE} (consumer text PRIMARY KEY, cursor bigint NOT NULL, digest bigint); \
         ALTER TABLE {CURSOR_TABLE} ADD COLUMN IF NOT EXISTS digest bigint"
    ))?;
    let columns = columns_of(tx, CURSOR_TABLE)?;
    for (name, expected) in [("consumer", "text"), ("cursor", "bigint"), ("digest", "bigint")] {
        if !check_column(CURSOR_TABLE, &columns, name, expected, |found| found == expected)? {
            return Err(missing(CURSOR_TABLE, name, expected));
        }
    }
    Ok(())
}

/// The consumer's cursor, if its replica has one; `lock`: the row stays locked until the
/// transaction ends (a second replicator of the same consumer waits, then sees it moved).
pub(crate) fn read_cursor(tx: &mut Transaction<'_>, consumer: &str, lock: bool) -> Result<Option<u64>> {
    let lock = if lock { " FOR UPDATE" } else { "" };
    let row = tx.query_opt(&format!("SELECT cursor FROM {CURSOR_TABLE} WHERE consumer = $1{lock}"), &[&consumer])?;
    Ok(row.map(|row| row.get::<_, i64>(0) as u64))
}

/// The digest kept with the consumer's cursor (see [`ensure_cursor_table`]), if any.
pub(crate) fn read_digest(tx: &mut Transaction<'_>, consumer: &str) -> Result<Option<u64>> {
    let row = tx.query_opt(&format!("SELECT digest FROM {CURSOR_TABLE} WHERE consumer = $1"), &[&consumer])?;
    Ok(row.and_then(|row| row.get::<_, Option<i64>>(0)).map(|digest| digest as u64))
}

/// Sets the consumer's cursor and its digest (in the transaction that applied the commits up
/// to it).
pub(crate) fn write_cursor(tx: &mut Transaction<'_>, consumer: &str, cursor: u64, digest: Option<u64>) -> Result<()> {
    let cursor =
        i64::try_from(cursor).map_err(|_| ReplicateError::Options { option: "cursor", problem: format!("{cursor} exceeds bigint") })?;
    // Stored bit for bit: PostgreSQL has no unsigned 64-bit type.
    let digest = digest.map(|digest| digest as i64);
    let sql = format!(
        "INSERT INTO {CURSOR_TABLE} (consumer, cursor, digest) VALUES ($1, $2, $3) \
         ON CONFLICT (consumer) DO UPDATE SET cursor = EXCLUDED.cursor, digest = EXCLUDED.digest"
    );
    tx.execute(&sql, &[&consumer, &cursor, &digest])?;
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
/// the columns of indexed fields it lacks. Columns it has beyond the shape are left alone.
pub(crate) fn ensure_table(tx: &mut Transaction<'_>, shape: &TableShape) -> Result<()> {
    let table = ident::quoted("table", &shape.table)?;
    let columns = columns_of(tx, &shape.table)?;
    if columns.is_empty() {
        let mut definitions = vec![format!("{KEY_COLUMN} bytea PRIMARY KEY")];
        for column in &shape.columns {
            let null = if column.key { " NOT NULL" } else { "" };
            definitions.push(format!("{} {}{null}", ident::quoted("column", &column.name)?, column.column_type.sql()));
        }
        definitions.push(format!("{RECORD_COLUMN} jsonb NOT NULL"));
        tx.batch_execute(&format!("CREATE TABLE {table} ({})", definitions.join(", ")))?;
        return Ok(());
    }
    for (name, expected) in [(KEY_COLUMN, "bytea"), (RECORD_COLUMN, "jsonb")] {
        if !check_column(&shape.table, &columns, name, expected, |found| found == expected)? {
            return Err(missing(&shape.table, name, expected));
        }
    }
    for column in &shape.columns {
        let expected = column.column_type.expected();
        if check_column(&shape.table, &columns, &column.name, &expected, |found| column.column_type.accepts(found))? {
            continue;
        }
        if column.key {
            return Err(missing(&shape.table, &column.name, &expected));
        }
        add_column(tx, &table, column)?;
    }
    Ok(())
}

/// Adds a newly indexed field's column and fills it from the records' jsonb.
fn add_column(tx: &mut Transaction<'_>, table: &str, column: &FieldColumn) -> Result<()> {
    let name = ident::quoted("column", &column.name)?;
    tx.batch_execute(&format!("ALTER TABLE {table} ADD COLUMN {name} {}", column.column_type.sql()))?;
    let path: Vec<&str> = column.path.split('.').collect();
    let fill = match column.column_type.sql() {
        "jsonb" => format!("UPDATE {table} SET {name} = {RECORD_COLUMN} #> $1"),
        "bytea" => return Ok(()), // bytes are not JSON text: left NULL until the record changes
        sql => format!("UPDATE {table} SET {name} = ({RECORD_COLUMN} #>> $1)::{sql} WHERE jsonb_typeof({RECORD_COLUMN} #> $1) <> 'null'"),
    };
    tx.execute(&fill, &[&path])?;
    Ok(())
}
