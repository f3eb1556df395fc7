//! SQLite in the `store` table: rusqlite (bundled), WAL, `synchronous=NORMAL` (`FULL` for the
//! durable row), a table of an integer key and a blob.

use super::backend::{
    READ_ROWS_COUNT, Run, StoreBackend, WCDB_READS_COUNT, WCDB_THREAD_BATCH_COUNT, WCDB_THREAD_KEYS_COUNT, WCDB_THREADS_COUNT,
    WCDB_WRITES_COUNT,
};
use crate::harness::median_ns;
use rusqlite::Connection;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a writer thread waits for another's lock.
const BUSY_TIMEOUT_S: u64 = 30;

fn open_table(dir: &Path, name: &str) -> Connection {
    let connection = Connection::open(dir.join(name)).unwrap();
    connection.pragma_update(None, "journal_mode", "WAL").unwrap();
    connection.pragma_update(None, "synchronous", "NORMAL").unwrap();
    connection.execute("CREATE TABLE kv (k INTEGER PRIMARY KEY, v BLOB NOT NULL)", []).unwrap();
    connection
}

pub struct Sqlite {
    dir: PathBuf,
    /// synchronous=FULL: the durable row.
    full: Connection,
    /// synchronous=NORMAL: the buffered, batch and WCDB batch-write rows.
    normal: Connection,
    /// Filled for the read rows by `fill`.
    reads: Option<Connection>,
    /// The next key of the WCDB batch-write row.
    wcdb_base: i64,
}

impl Sqlite {
    pub fn open(dir: &Path) -> Sqlite {
        let full = open_table(dir, "sqlite-full");
        full.pragma_update(None, "synchronous", "FULL").unwrap();
        let normal = open_table(dir, "sqlite-normal");
        Sqlite { dir: dir.to_owned(), full, normal, reads: None, wcdb_base: 1 << 40 }
    }

    fn reads(&self) -> &Connection {
        self.reads.as_ref().expect("the read rows run after fill")
    }
}

impl StoreBackend for Sqlite {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn write_one_durable(&mut self, run: &mut Run) -> Option<f64> {
        let full = &self.full;
        Some(median_ns(run.samples, 20, || {
            let index = run.next_key();
            full.execute("INSERT INTO kv VALUES (?1, ?2)", rusqlite::params![index as i64, &run.blob]).unwrap();
        }))
    }

    fn write_one_buffered(&mut self, run: &mut Run) -> Option<f64> {
        let normal = &self.normal;
        Some(median_ns(run.samples, 2000, || {
            let index = run.next_key();
            normal.execute("INSERT INTO kv VALUES (?1, ?2)", rusqlite::params![index as i64, &run.blob]).unwrap();
        }))
    }

    fn write_batch(&mut self, run: &mut Run) -> Option<f64> {
        let normal = &self.normal;
        Some(median_ns(run.samples, 5, || {
            let keys = run.next_keys(1000);
            let txn = normal.unchecked_transaction().unwrap();
            {
                let mut insert = txn.prepare_cached("INSERT INTO kv VALUES (?1, ?2)").unwrap();
                for index in keys {
                    insert.execute(rusqlite::params![index as i64, &run.blob]).unwrap();
                }
            }
            txn.commit().unwrap();
        }))
    }

    /// A database of its own, with integer keys `0..READ_ROWS_COUNT`.
    fn fill(&mut self, run: &Run) {
        let reads = open_table(&self.dir, "sqlite-reads");
        {
            let txn = reads.unchecked_transaction().unwrap();
            {
                let mut insert = txn.prepare("INSERT INTO kv VALUES (?1, ?2)").unwrap();
                for index in 0..READ_ROWS_COUNT {
                    insert.execute(rusqlite::params![index as i64, &run.blob]).unwrap();
                }
            }
            txn.commit().unwrap();
        }
        self.reads = Some(reads);
    }

    fn point_read(&mut self, run: &mut Run) -> Option<f64> {
        let mut select = self.reads().prepare("SELECT length(v) FROM kv WHERE k = ?1").unwrap();
        Some(median_ns(run.samples, 20_000, || {
            let index = run.next_probe();
            black_box(select.query_row([index as i64], |row| row.get::<_, i64>(0)).unwrap());
        }))
    }

    fn range_scan(&mut self, run: &mut Run) -> Option<f64> {
        let mut scan = self.reads().prepare("SELECT length(v) FROM kv WHERE k >= ?1 ORDER BY k LIMIT 1000").unwrap();
        Some(median_ns(run.samples, 50, || {
            let total: i64 = scan.query_map([50_000i64], |row| row.get::<_, i64>(0)).unwrap().map(|v| v.unwrap()).sum();
            black_box(total);
        }))
    }

    fn wcdb_read(&mut self, run: &mut Run) -> Option<f64> {
        let (reads, probes) = (self.reads(), run.probes());
        Some(median_ns(run.samples, 1, || {
            let txn = reads.unchecked_transaction().unwrap();
            {
                let mut select = txn.prepare_cached("SELECT v FROM kv WHERE k = ?1").unwrap();
                for j in 0..WCDB_READS_COUNT {
                    black_box(select.query_row([probes[j % probes.len()] as i64], |row| row.get::<_, Vec<u8>>(0)).unwrap());
                }
            }
            txn.commit().unwrap();
        }))
    }

    fn wcdb_batch_write(&mut self, run: &mut Run) -> Option<f64> {
        let (normal, base) = (&self.normal, &mut self.wcdb_base);
        let writes = WCDB_WRITES_COUNT as i64;
        Some(median_ns(run.samples.min(11), 1, || {
            let txn = normal.unchecked_transaction().unwrap();
            {
                let mut insert = txn.prepare_cached("INSERT INTO kv VALUES (?1, ?2)").unwrap();
                for i in 0..writes {
                    insert.execute(rusqlite::params![*base + i, &run.blob]).unwrap();
                }
            }
            txn.commit().unwrap();
            *base += writes;
        }))
    }

    /// Each thread opens its own connection to a database of their own.
    fn wcdb_threads(&mut self, run: &mut Run) -> Option<f64> {
        let path = self.dir.join("sqlite-threads");
        drop(open_table(&self.dir, "sqlite-threads"));
        let batch = WCDB_THREAD_BATCH_COUNT as i64;
        Some(median_ns(run.samples.min(7), 1, || {
            let round = run.next_round();
            let (path, blob) = (&path, &run.blob);
            std::thread::scope(|scope| {
                for thread in 0..WCDB_THREADS_COUNT {
                    scope.spawn(move || {
                        let connection = Connection::open(path).unwrap();
                        connection.busy_timeout(Duration::from_secs(BUSY_TIMEOUT_S)).unwrap();
                        connection.pragma_update(None, "synchronous", "NORMAL").unwrap();
                        let origin = ((round << 44) | (thread << 40)) as i64;
                        for chunk in 0..(WCDB_THREAD_KEYS_COUNT / WCDB_THREAD_BATCH_COUNT) as i64 {
                            let txn = connection.unchecked_transaction().unwrap();
                            {
                                let mut insert = txn.prepare_cached("INSERT INTO kv VALUES (?1, ?2)").unwrap();
                                for i in 0..batch {
                                    insert.execute(rusqlite::params![origin + chunk * batch + i, blob]).unwrap();
                                }
                            }
                            txn.commit().unwrap();
                        }
                    });
                }
            });
        }))
    }
}
