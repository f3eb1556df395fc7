//! SQLite in the `crud` table: rusqlite (bundled), WAL, `synchronous=NORMAL` (`FULL` for the
//! Immediate row), scalars as columns and nested parts as JSON blobs (`crud_model::SqlDoc`).

use super::backend::{CrudBackend, Support};
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::thread::JoinHandle;
use std::time::Duration;
use tessera_bench::crud_model::{SQL_COLUMNS, SqlDoc, parts, sql_create, sql_delete_all, sql_fetch, sql_insert_all};

/// The table of the single-thread rows, then one table per writer thread.
const TABLES: [&str; 4] = ["bench_doc", "bench_doc_1", "bench_doc_2", "bench_doc_3"];

/// How long a connection waits for another's write lock.
const BUSY_TIMEOUT_S: u64 = 60;

pub struct Sqlite {
    path: PathBuf,
    connection: Connection,
    records: Vec<SqlDoc>,
}

fn open_connection(path: &Path) -> Connection {
    let connection = Connection::open(path).unwrap();
    connection.pragma_update(None, "journal_mode", "WAL").unwrap();
    connection.pragma_update(None, "synchronous", "NORMAL").unwrap();
    connection.busy_timeout(Duration::from_secs(BUSY_TIMEOUT_S)).unwrap();
    connection
}

/// Read, change and write one record, as a SQLite user updates an object.
fn update(connection: &Connection, title: &str) {
    let mut select = connection.prepare_cached(&format!("SELECT {SQL_COLUMNS} FROM bench_doc WHERE title = ?1")).unwrap();
    let mut doc = select.query_row([title], SqlDoc::from_row).unwrap();
    doc.priority += 1;
    let mut update = connection.prepare_cached("UPDATE bench_doc SET priority = ?2 WHERE title = ?1").unwrap();
    update.execute(rusqlite::params![doc.title, doc.priority]).unwrap();
}

impl Sqlite {
    /// Updates `records`, one transaction each.
    fn update_each(&mut self, count: usize) {
        for doc in &self.records[..count] {
            let tx = self.connection.transaction().unwrap();
            update(&tx, &doc.title);
            tx.commit().unwrap();
        }
    }
}

impl CrudBackend for Sqlite {
    const NAME: &'static str = "sqlite";
    type Doc = SqlDoc;

    fn open(dir: &Path, objects: usize) -> Sqlite {
        let path = dir.join("sqlite.db");
        let connection = open_connection(&path);
        for table in TABLES {
            connection.execute(&sql_create(table), []).unwrap();
        }
        let records = (0..objects as i32).map(|i| parts(i).into()).collect();
        Sqlite { path, connection, records }
    }

    fn insert_all(&mut self) {
        sql_insert_all(&mut self.connection, TABLES[0], &self.records);
    }

    fn fetch_priority(&mut self) -> Vec<SqlDoc> {
        sql_fetch(&self.connection, "priority > 2500")
    }

    fn fetch_image(&mut self) -> Vec<SqlDoc> {
        sql_fetch(&self.connection, "content_kind = 1")
    }

    fn update_all(&mut self) {
        let tx = self.connection.transaction().unwrap();
        for doc in &self.records {
            update(&tx, &doc.title);
        }
        tx.commit().unwrap();
    }

    fn update_each_buffered(&mut self) -> Support {
        self.update_each(self.records.len());
        Support::Measured
    }

    /// synchronous=FULL makes each commit durable, like tessera's Immediate.
    fn before_immediate(&mut self) {
        self.connection.pragma_update(None, "synchronous", "FULL").unwrap();
    }

    fn update_each_immediate(&mut self, count: usize) {
        self.update_each(count);
    }

    fn after_immediate(&mut self) {
        self.connection.pragma_update(None, "synchronous", "NORMAL").unwrap();
    }

    fn fetch_each(&mut self) {
        let mut select = self.connection.prepare_cached(&format!("SELECT {SQL_COLUMNS} FROM bench_doc WHERE title = ?1")).unwrap();
        for doc in &self.records {
            let found = select.query_row([&doc.title], SqlDoc::from_row).unwrap();
            assert_eq!(found.title, doc.title);
        }
    }

    /// `SELECT tag`: the one column, nothing else decoded.
    fn field_view(&mut self) {
        let mut select = self.connection.prepare_cached("SELECT tag FROM bench_doc WHERE title = ?1").unwrap();
        for doc in &self.records {
            let tag: String = select.query_row([&doc.title], |row| row.get(0)).unwrap();
            assert_eq!(tag.len(), doc.tag.len());
        }
    }

    fn field_decode(&mut self) -> Support {
        Support::Absent
    }

    fn delete_all(&mut self) {
        sql_delete_all(&mut self.connection, TABLES[0], &self.records);
    }

    fn stored_count(&mut self) -> usize {
        let count: i64 = self.connection.query_row("SELECT COUNT(*) FROM bench_doc", [], |row| row.get(0)).unwrap();
        count as usize
    }

    /// Each thread opens its own connection to the same file.
    fn spawn_four_writers(&self, _objects: usize, barrier: Arc<Barrier>) -> Vec<JoinHandle<()>> {
        TABLES
            .into_iter()
            .map(|table| {
                let (barrier, path, records) = (barrier.clone(), self.path.clone(), self.records.clone());
                std::thread::spawn(move || {
                    let mut connection = open_connection(&path);
                    barrier.wait();
                    sql_insert_all(&mut connection, table, &records);
                    barrier.wait();
                    barrier.wait();
                    sql_delete_all(&mut connection, table, &records);
                    barrier.wait();
                })
            })
            .collect()
    }
}
