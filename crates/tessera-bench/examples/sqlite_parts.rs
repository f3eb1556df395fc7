//! The crud table's SQLite side alone, one operation per `MODE` (`priority`, `image`, `delete`,
//! `insert`, `none`), for callgrind: instruction counts to set beside `query_parts`' tessera
//! figures, where wall-clock ratios on this VM are noisy.
use rusqlite::Connection;
use tessera_bench::crud_model::{SQL_COLUMNS, SqlDoc, parts, sql_create};

fn insert_all(connection: &mut Connection, records: &[SqlDoc]) {
    let tx = connection.transaction().unwrap();
    {
        let mut insert = tx.prepare_cached(&format!("INSERT INTO bench_doc ({SQL_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")).unwrap();
        for doc in records {
            doc.insert(&mut insert).unwrap();
        }
    }
    tx.commit().unwrap();
}

fn fetch(connection: &Connection, condition: &str) -> Vec<SqlDoc> {
    let mut query = connection.prepare_cached(&format!("SELECT {SQL_COLUMNS} FROM bench_doc WHERE {condition}")).unwrap();
    let rows = query.query_map([], SqlDoc::from_row).unwrap();
    rows.collect::<rusqlite::Result<_>>().unwrap()
}

fn main() {
    let records: Vec<SqlDoc> = (0..10_000).map(|i| parts(i).into()).collect();
    let dir = tempfile::tempdir().unwrap();
    let mut connection = Connection::open(dir.path().join("sqlite.db")).unwrap();
    connection.pragma_update(None, "journal_mode", "WAL").unwrap();
    connection.pragma_update(None, "synchronous", "NORMAL").unwrap();
    connection.execute(&sql_create("bench_doc"), []).unwrap();
    insert_all(&mut connection, &records);
    let mode = std::env::var("MODE").unwrap_or_default();
    match mode.as_str() {
        "priority" => (0..20).for_each(|_| assert_eq!(fetch(&connection, "priority > 2500").len(), 1667)),
        "image" => (0..20).for_each(|_| assert_eq!(fetch(&connection, "content_kind = 1").len(), 3334)),
        "delete" => {
            let tx = connection.transaction().unwrap();
            {
                let mut delete = tx.prepare_cached("DELETE FROM bench_doc WHERE title = ?1").unwrap();
                for doc in &records {
                    delete.execute([&doc.title]).unwrap();
                }
            }
            tx.commit().unwrap();
            insert_all(&mut connection, &records);
        }
        _ => {}
    }
}
