//! Writing rows: multi-row upserts and deletes through `unnest` of array parameters, one
//! prepared statement per table and kind, at most [`ROWS_PER_STATEMENT_MAX`] rows each.

use crate::cells::Row;
use crate::columns::{KEY_COLUMN, RECORD_COLUMN, TableShape};
use crate::error::Result;
use crate::ident;
use crate::session::Statements;
use postgres::Transaction;
use postgres::types::ToSql;

/// Most rows one statement carries.
///
/// ```
/// use tessera_postgres::ROWS_PER_STATEMENT_MAX;
/// // A group of 4,500 upserts to one table goes out as three statements.
/// assert_eq!(4_500usize.div_ceil(ROWS_PER_STATEMENT_MAX), 3);
/// ```
pub const ROWS_PER_STATEMENT_MAX: usize = 2_000;

/// `INSERT … SELECT … FROM unnest(…) ON CONFLICT (tessera_key) DO UPDATE` for `shape`.
fn upsert_sql(shape: &TableShape) -> Result<String> {
    let table = ident::quoted("table", &shape.table)?;
    let mut names = vec![KEY_COLUMN.to_owned()];
    let mut selects = vec!["k".to_owned()];
    let mut arrays = vec!["$1::bytea[]".to_owned()];
    let mut aliases = vec!["k".to_owned()];
    for (position, column) in shape.columns.iter().enumerate() {
        names.push(ident::quoted("column", &column.name)?);
        selects.push(format!("c{position}::{}", column.column_type.sql()));
        arrays.push(format!("${}::text[]", position + 2));
        aliases.push(format!("c{position}"));
    }
    names.push(RECORD_COLUMN.to_owned());
    selects.push("r::jsonb".into());
    arrays.push(format!("${}::text[]", shape.columns.len() + 2));
    aliases.push("r".into());
    let updates: Vec<String> = names[1..].iter().map(|name| format!("{name} = EXCLUDED.{name}")).collect();
    Ok(format!(
        "INSERT INTO {table} ({}) SELECT {} FROM unnest({}) AS u({}) ON CONFLICT ({KEY_COLUMN}) DO UPDATE SET {}",
        names.join(", "),
        selects.join(", "),
        arrays.join(", "),
        aliases.join(", "),
        updates.join(", ")
    ))
}

/// Inserts or replaces `rows` (distinct keys).
pub(crate) fn upsert(tx: &mut Transaction<'_>, statements: &mut Statements, shape: &TableShape, rows: &[Row]) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let statement = statements.get(tx, &upsert_sql(shape)?)?;
    for chunk in rows.chunks(ROWS_PER_STATEMENT_MAX) {
        let keys: Vec<&[u8]> = chunk.iter().map(|row| row.key.as_slice()).collect();
        let mut columns: Vec<Vec<Option<&str>>> = vec![Vec::with_capacity(chunk.len()); shape.columns.len()];
        for row in chunk {
            debug_assert_eq!(row.cells.len(), shape.columns.len());
            for (column, cell) in columns.iter_mut().zip(&row.cells) {
                column.push(cell.as_deref());
            }
        }
        let records: Vec<&str> = chunk.iter().map(|row| row.record.as_str()).collect();
        let mut params: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(shape.columns.len() + 2);
        params.push(&keys);
        for column in &columns {
            params.push(column);
        }
        params.push(&records);
        tx.execute(&statement, &params)?;
    }
    Ok(())
}

/// Deletes the rows of `keys`.
pub(crate) fn delete(tx: &mut Transaction<'_>, statements: &mut Statements, shape: &TableShape, keys: &[&[u8]]) -> Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    let table = ident::quoted("table", &shape.table)?;
    let statement = statements.get(tx, &format!("DELETE FROM {table} WHERE {KEY_COLUMN} = ANY($1::bytea[])"))?;
    for chunk in keys.chunks(ROWS_PER_STATEMENT_MAX) {
        tx.execute(&statement, &[&chunk])?;
    }
    Ok(())
}

/// Empties the table (a full copy replaces it).
pub(crate) fn truncate(tx: &mut Transaction<'_>, shape: &TableShape) -> Result<()> {
    tx.batch_execute(&format!("TRUNCATE {}", ident::quoted("table", &shape.table)?))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::columns::{ColumnType, FieldColumn};

    #[test]
    fn the_upsert_binds_one_array_per_column() {
        let shape = TableShape {
            table: "people".into(),
            columns: vec![FieldColumn { name: "id".into(), path: "id".into(), column_type: ColumnType::BigInt, key: true }],
        };
        assert_eq!(
            upsert_sql(&shape).unwrap(),
            "INSERT INTO \"people\" (tessera_key, \"id\", record) SELECT k, c0::bigint, r::jsonb \
             FROM unnest($1::bytea[], $2::text[], $3::text[]) AS u(k, c0, r) \
             ON CONFLICT (tessera_key) DO UPDATE SET \"id\" = EXCLUDED.\"id\", record = EXCLUDED.record"
        );
    }
}
