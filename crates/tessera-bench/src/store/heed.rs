//! Raw heed in the `store` table: the same work by hand, with tessera's LMDB configuration.

use super::backend::{READ_ROWS_COUNT, Run, StoreBackend, key, read_key};
use crate::harness::median_ns;
use heed::types::Bytes;
use heed::{EnvFlags, EnvOpenOptions};
use std::hint::black_box;
use std::path::Path;
use tessera::DbOptions;

/// Each environment's map, in bytes.
const MAP_SIZE_BYTES: usize = 4 << 30;

struct Environment {
    env: heed::Env,
    table: heed::Database<Bytes, Bytes>,
}

impl Environment {
    fn open(dir: &Path, name: &str, no_sync: bool) -> Environment {
        let path = dir.join(name);
        let mut options = EnvOpenOptions::new();
        // The same configuration as tessera's defaults: LMDB clears a per-database table at
        // every transaction, so max_dbs must match for the comparison to be like for like.
        options.map_size(MAP_SIZE_BYTES).max_dbs(DbOptions::default().keyspaces_max);
        // SAFETY: a fresh file used by this process only.
        unsafe {
            let mut flags = if no_sync { EnvFlags::NO_SUB_DIR | EnvFlags::NO_SYNC } else { EnvFlags::NO_SUB_DIR };
            if DbOptions::default().write_map {
                flags |= EnvFlags::WRITE_MAP;
            }
            options.flags(flags);
        }
        // SAFETY: as above.
        let env = unsafe { options.open(&path) }.unwrap();
        let mut txn = env.write_txn().unwrap();
        let table = env.create_database(&mut txn, Some("table")).unwrap();
        txn.commit().unwrap();
        Environment { env, table }
    }
}

pub struct Heed {
    /// Synced commits: the durable row.
    sync: Environment,
    /// NO_SYNC: the buffered, batch and read rows.
    no_sync: Environment,
}

impl Heed {
    pub fn open(dir: &Path) -> Heed {
        Heed { sync: Environment::open(dir, "heed-sync", false), no_sync: Environment::open(dir, "heed-nosync", true) }
    }
}

/// One key in its own write transaction.
fn write_one(environment: &Environment, index: u64, blob: &[u8]) {
    let mut txn = environment.env.write_txn().unwrap();
    environment.table.put(&mut txn, &key(index), blob).unwrap();
    txn.commit().unwrap();
}

impl StoreBackend for Heed {
    fn name(&self) -> &'static str {
        "heed"
    }

    fn write_one_durable(&mut self, run: &mut Run) -> Option<f64> {
        let sync = &self.sync;
        Some(median_ns(run.samples, 20, || {
            let index = run.next_key();
            write_one(sync, index, &run.blob);
        }))
    }

    fn write_one_buffered(&mut self, run: &mut Run) -> Option<f64> {
        let no_sync = &self.no_sync;
        Some(median_ns(run.samples, 2000, || {
            let index = run.next_key();
            write_one(no_sync, index, &run.blob);
        }))
    }

    fn write_batch(&mut self, run: &mut Run) -> Option<f64> {
        let no_sync = &self.no_sync;
        Some(median_ns(run.samples, 5, || {
            let keys = run.next_keys(1000);
            let mut txn = no_sync.env.write_txn().unwrap();
            for index in keys {
                no_sync.table.put(&mut txn, &key(index), &run.blob).unwrap();
            }
            txn.commit().unwrap();
        }))
    }

    fn fill(&mut self, run: &Run) {
        let mut txn = self.no_sync.env.write_txn().unwrap();
        for index in 0..READ_ROWS_COUNT {
            self.no_sync.table.put(&mut txn, &read_key(index), &run.blob).unwrap();
        }
        txn.commit().unwrap();
    }

    /// A new read transaction per read, as a heed user must (also the new-transaction row).
    fn point_read(&mut self, run: &mut Run) -> Option<f64> {
        let no_sync = &self.no_sync;
        Some(median_ns(run.samples, 20_000, || {
            let index = run.next_probe();
            let txn = no_sync.env.read_txn().unwrap();
            black_box(no_sync.table.get(&txn, &read_key(index)).unwrap().map(|v| v.len()));
        }))
    }

    fn point_read_opens_transaction(&self) -> bool {
        true
    }

    fn point_read_in_snapshot(&mut self, run: &mut Run) -> Option<f64> {
        let no_sync = &self.no_sync;
        let txn = no_sync.env.read_txn().unwrap();
        let figure = median_ns(run.samples, 100_000, || {
            let index = run.next_probe();
            black_box(no_sync.table.get(&txn, &read_key(index)).unwrap().map(|v| v.len()));
        });
        drop(txn);
        Some(figure)
    }

    fn range_scan(&mut self, run: &mut Run) -> Option<f64> {
        let no_sync = &self.no_sync;
        let start_key = read_key(50_000);
        Some(median_ns(run.samples, 50, || {
            let txn = no_sync.env.read_txn().unwrap();
            let bounds = (std::ops::Bound::Included(&start_key[..]), std::ops::Bound::Unbounded);
            let total: usize = no_sync.table.range(&txn, &bounds).unwrap().take(1000).map(|e| e.map(|(_, v)| v.len()).unwrap_or(0)).sum();
            black_box(total);
        }))
    }
}
