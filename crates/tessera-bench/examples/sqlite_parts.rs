//! The crud table's SQLite side alone, for callgrind: instruction counts to set beside
//! `query_parts`' tessera figures, where wall-clock ratios on this VM are noisy. Every run
//! inserts 10,000 BenchDocs (`MODE` unset: that alone, the baseline); `MODE=priority` and
//! `MODE=image` then run the two fetches 20 times, `MODE=delete` deletes everything and
//! inserts it again. The statements are the crud table's (`crud_model::sql_*`).
use rusqlite::Connection;
use tessera_bench::crud_model::{SqlDoc, parts, sql_create, sql_delete_all, sql_fetch, sql_insert_all};

fn main() {
    let records: Vec<SqlDoc> = (0..10_000).map(|i| parts(i).into()).collect();
    let dir = tempfile::tempdir().unwrap();
    let mut connection = Connection::open(dir.path().join("sqlite.db")).unwrap();
    connection.pragma_update(None, "journal_mode", "WAL").unwrap();
    connection.pragma_update(None, "synchronous", "NORMAL").unwrap();
    connection.execute(&sql_create("bench_doc"), []).unwrap();
    sql_insert_all(&mut connection, "bench_doc", &records);
    let mode = std::env::var("MODE").unwrap_or_default();
    match mode.as_str() {
        "priority" => (0..20).for_each(|_| assert_eq!(sql_fetch(&connection, "priority > 2500").len(), 1667)),
        "image" => (0..20).for_each(|_| assert_eq!(sql_fetch(&connection, "content_kind = 1").len(), 3334)),
        "delete" => {
            sql_delete_all(&mut connection, "bench_doc", &records);
            sql_insert_all(&mut connection, "bench_doc", &records);
        }
        _ => {}
    }
}
