//! tessera in the `store` table: one database per durability, as an application opens them.

use super::backend::{
    READ_ROWS_COUNT, Run, StoreBackend, WCDB_READS_COUNT, WCDB_THREAD_BATCH_COUNT, WCDB_THREAD_KEYS_COUNT, WCDB_THREADS_COUNT,
    WCDB_WRITES_COUNT, key, read_key,
};
use crate::harness::median_ns;
use std::hint::black_box;
use std::path::Path;
use std::time::Duration;
use tessera::{Db, DbOptions, Durability, Keyspace};

/// The Buffered database's initial map, in bytes.
const MAP_SIZE_INITIAL_BYTES: u64 = 1 << 30;

pub struct Tessera {
    /// Buffered durability: the buffered, batch, read and WCDB rows.
    db: Db,
    keyspace: Keyspace,
    /// Immediate durability (the default): the durable row.
    db_immediate: Db,
    keyspace_immediate: Keyspace,
    /// The next key of the WCDB batch-write row.
    wcdb_base: u64,
}

impl Tessera {
    pub fn open(dir: &Path) -> Tessera {
        let buffered = Durability::Buffered { max_delay: Duration::from_millis(100) };
        let db = Db::open_with(
            dir.join("tessera"),
            DbOptions { map_size_initial_bytes: MAP_SIZE_INITIAL_BYTES, durability: buffered, ..DbOptions::default() },
        )
        .unwrap();
        let keyspace = db.keyspace("table").unwrap();
        let db_immediate = Db::open_with(dir.join("tessera-immediate"), DbOptions::default()).unwrap();
        let keyspace_immediate = db_immediate.keyspace("table").unwrap();
        Tessera { db, keyspace, db_immediate, keyspace_immediate, wcdb_base: 1 << 50 }
    }
}

impl StoreBackend for Tessera {
    fn name(&self) -> &'static str {
        "tessera"
    }

    fn write_one_durable(&mut self, run: &mut Run) -> Option<f64> {
        let (db, keyspace) = (&self.db_immediate, &self.keyspace_immediate);
        Some(median_ns(run.samples, 20, || {
            let index = run.next_key();
            db.write(|tx| tx.put(keyspace, &key(index), &run.blob)).unwrap();
        }))
    }

    fn write_one_buffered(&mut self, run: &mut Run) -> Option<f64> {
        let (db, keyspace) = (&self.db, &self.keyspace);
        Some(median_ns(run.samples, 2000, || {
            let index = run.next_key();
            db.write(|tx| tx.put(keyspace, &key(index), &run.blob)).unwrap();
        }))
    }

    fn write_batch(&mut self, run: &mut Run) -> Option<f64> {
        let (db, keyspace) = (&self.db, &self.keyspace);
        Some(median_ns(run.samples, 5, || {
            let keys = run.next_keys(1000);
            db.write(|tx| {
                for index in keys.clone() {
                    tx.put(keyspace, &key(index), &run.blob)?;
                }
                Ok(())
            })
            .unwrap();
        }))
    }

    fn fill(&mut self, run: &Run) {
        self.db
            .write(|tx| {
                for index in 0..READ_ROWS_COUNT {
                    tx.put(&self.keyspace, &read_key(index), &run.blob)?;
                }
                Ok(())
            })
            .unwrap();
    }

    /// `Db::read`: the kept read transaction while no commit intervenes.
    fn point_read(&mut self, run: &mut Run) -> Option<f64> {
        let (db, keyspace) = (&self.db, &self.keyspace);
        Some(median_ns(run.samples, 20_000, || {
            let index = run.next_probe();
            db.read(|tx| Ok(black_box(tx.get(keyspace, &read_key(index))?.map(|v| v.len())))).unwrap();
        }))
    }

    /// `Db::read_txn`, dropped after one read: it reuses the kept LMDB read transaction while
    /// no commit intervenes, as `Db::read` does (heed's `read_txn` begins a new one each time).
    fn point_read_new_transaction(&mut self, run: &mut Run) -> Option<f64> {
        let (db, keyspace) = (&self.db, &self.keyspace);
        Some(median_ns(run.samples, 20_000, || {
            let index = run.next_probe();
            let tx = db.read_txn().unwrap();
            black_box(tx.get(keyspace, &read_key(index)).unwrap().map(|v| v.len()));
        }))
    }

    fn point_read_in_snapshot(&mut self, run: &mut Run) -> Option<f64> {
        let snapshot = self.db.read_txn().unwrap();
        let keyspace = &self.keyspace;
        let figure = median_ns(run.samples, 100_000, || {
            let index = run.next_probe();
            black_box(snapshot.get(keyspace, &read_key(index)).unwrap().map(|v| v.len()));
        });
        drop(snapshot);
        Some(figure)
    }

    fn range_scan(&mut self, run: &mut Run) -> Option<f64> {
        let (db, keyspace) = (&self.db, &self.keyspace);
        let start_key = read_key(50_000);
        Some(median_ns(run.samples, 50, || {
            db.read(|tx| {
                let total: usize = tx.range(keyspace, &start_key[..]..)?.take(1000).map(|e| e.map(|(_, v)| v.len()).unwrap_or(0)).sum();
                Ok(black_box(total))
            })
            .unwrap();
        }))
    }

    fn wcdb_read(&mut self, run: &mut Run) -> Option<f64> {
        let (db, keyspace, probes) = (&self.db, &self.keyspace, run.probes());
        Some(median_ns(run.samples, 1, || {
            db.read(|tx| {
                for j in 0..WCDB_READS_COUNT {
                    black_box(tx.get(keyspace, &read_key(probes[j % probes.len()]))?);
                }
                Ok(())
            })
            .unwrap();
        }))
    }

    fn wcdb_batch_write(&mut self, run: &mut Run) -> Option<f64> {
        let (db, keyspace, base) = (&self.db, &self.keyspace, &mut self.wcdb_base);
        Some(median_ns(run.samples.min(11), 1, || {
            let start = *base;
            *base += WCDB_WRITES_COUNT;
            db.write(|tx| {
                for index in start..start + WCDB_WRITES_COUNT {
                    tx.put(keyspace, &key(index), &run.blob)?;
                }
                Ok(())
            })
            .unwrap();
        }))
    }

    fn wcdb_threads(&mut self, run: &mut Run) -> Option<f64> {
        let (db, keyspace) = (&self.db, &self.keyspace);
        Some(median_ns(run.samples.min(7), 1, || {
            let round = run.next_round();
            let blob = &run.blob;
            std::thread::scope(|scope| {
                for thread in 0..WCDB_THREADS_COUNT {
                    scope.spawn(move || {
                        let origin = (round << 44) | (thread << 40);
                        for chunk in 0..WCDB_THREAD_KEYS_COUNT / WCDB_THREAD_BATCH_COUNT {
                            db.write(|tx| {
                                for i in 0..WCDB_THREAD_BATCH_COUNT {
                                    tx.put(keyspace, &key(origin + chunk * WCDB_THREAD_BATCH_COUNT + i), blob)?;
                                }
                                Ok(())
                            })
                            .unwrap();
                        }
                    });
                }
            });
        }))
    }
}
