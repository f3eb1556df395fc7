//! `store`: the storage core against raw heed doing the same work by hand, plus the ceiling
//! chart Dflat borrowed from WCDB (a key and a 100-byte blob), with SQLite in the same run.
//! WCDB's and Dflat's own figures are from the seed and quoted in the README, not in `peers`.

use crate::harness::{median_ns, Goal, Table};
use heed::types::Bytes;
use heed::{EnvFlags, EnvOpenOptions};
use std::hint::black_box;
use std::time::Duration;
use tessera::{Db, DbOptions, Durability};

pub struct Options {
    pub samples: usize,
}

const BLOB_LEN: usize = 100;

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

struct Heed {
    env: heed::Env,
    table: heed::Database<Bytes, Bytes>,
}

impl Heed {
    fn open(dir: &std::path::Path, name: &str, no_sync: bool) -> Heed {
        let path = dir.join(name);
        let mut options = EnvOpenOptions::new();
        // The same configuration as tessera's defaults: LMDB clears a per-database table at
        // every transaction, so max_dbs must match for the comparison to be like for like.
        options.map_size(4 << 30).max_dbs(DbOptions::default().keyspaces_max);
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
        Heed { env, table }
    }
}

fn sqlite(dir: &std::path::Path, name: &str) -> rusqlite::Connection {
    let connection = rusqlite::Connection::open(dir.join(name)).unwrap();
    connection.pragma_update(None, "journal_mode", "WAL").unwrap();
    connection.pragma_update(None, "synchronous", "NORMAL").unwrap();
    connection.execute("CREATE TABLE kv (k INTEGER PRIMARY KEY, v BLOB NOT NULL)", []).unwrap();
    connection
}

pub fn run(options: &Options) -> std::io::Result<()> {
    let samples = options.samples;
    let dir = tempfile::tempdir()?;
    let mut table = Table::new("store");
    let blob = vec![0xABu8; BLOB_LEN];
    let overhead = Goal::AtMostTimesPeer { peer: "heed", factor: 1.10 };

    // One database per default durability, as an application would open it.
    let buffered = Durability::Buffered { max_delay: Duration::from_millis(100) };
    let db = Db::open_with(
        dir.path().join("tessera"),
        DbOptions { map_size_initial_bytes: 1 << 30, durability: buffered, ..DbOptions::default() },
    )
    .unwrap();
    let ks = db.keyspace("table").unwrap();
    let db_immediate = Db::open_with(dir.path().join("tessera-immediate"), DbOptions::default()).unwrap();
    let ks_immediate = db_immediate.keyspace("table").unwrap();
    let heed_sync = Heed::open(dir.path(), "heed-sync", false);
    let heed_nosync = Heed::open(dir.path(), "heed-nosync", true);
    let mut counter = 0u64;

    // ---- single-key write transactions
    let tessera_immediate = median_ns(samples, 20, || {
        counter += 1;
        db_immediate.write(|tx| tx.put(&ks_immediate, &key(counter), &blob)).unwrap();
    });
    let heed_immediate = median_ns(samples, 20, || {
        counter += 1;
        let mut txn = heed_sync.env.write_txn().unwrap();
        heed_sync.table.put(&mut txn, &key(counter), &blob).unwrap();
        txn.commit().unwrap();
    });
    let sqlite_full = sqlite(dir.path(), "sqlite-full");
    sqlite_full.pragma_update(None, "synchronous", "FULL").unwrap();
    let sqlite_immediate = median_ns(samples, 20, || {
        counter += 1;
        sqlite_full.execute("INSERT INTO kv VALUES (?1, ?2)", rusqlite::params![counter as i64, &blob]).unwrap();
    });
    table.row(
        "single-key write transaction, Immediate (fsync)",
        "µs",
        tessera_immediate / 1e3,
        &[("heed", heed_immediate / 1e3), ("sqlite", sqlite_immediate / 1e3)],
        overhead,
    );

    let tessera_buffered = median_ns(samples, 2000, || {
        counter += 1;
        db.write(|tx| tx.put(&ks, &key(counter), &blob)).unwrap();
    });
    let heed_buffered = median_ns(samples, 2000, || {
        counter += 1;
        let mut txn = heed_nosync.env.write_txn().unwrap();
        heed_nosync.table.put(&mut txn, &key(counter), &blob).unwrap();
        txn.commit().unwrap();
    });
    let sqlite_normal = sqlite(dir.path(), "sqlite-normal");
    let sqlite_buffered = median_ns(samples, 2000, || {
        counter += 1;
        sqlite_normal.execute("INSERT INTO kv VALUES (?1, ?2)", rusqlite::params![counter as i64, &blob]).unwrap();
    });
    table.row(
        "single-key write transaction, Buffered (no fsync)",
        "µs",
        tessera_buffered / 1e3,
        &[("heed", heed_buffered / 1e3), ("sqlite", sqlite_buffered / 1e3)],
        overhead,
    );

    // ---- 1,000-key batch write
    let tessera_batch = median_ns(samples, 5, || {
        let base = counter;
        counter += 1000;
        db.write(|tx| {
            for i in base..base + 1000 {
                tx.put(&ks, &key(i), &blob)?;
            }
            Ok(())
        })
        .unwrap();
    });
    let heed_batch = median_ns(samples, 5, || {
        let base = counter;
        counter += 1000;
        let mut txn = heed_nosync.env.write_txn().unwrap();
        for i in base..base + 1000 {
            heed_nosync.table.put(&mut txn, &key(i), &blob).unwrap();
        }
        txn.commit().unwrap();
    });
    let sqlite_batch = median_ns(samples, 5, || {
        let base = counter;
        counter += 1000;
        let txn = sqlite_normal.unchecked_transaction().unwrap();
        {
            let mut insert = txn.prepare_cached("INSERT INTO kv VALUES (?1, ?2)").unwrap();
            for i in base..base + 1000 {
                insert.execute(rusqlite::params![i as i64, &blob]).unwrap();
            }
        }
        txn.commit().unwrap();
    });
    table.row(
        "1,000-key batch write (one transaction)",
        "µs",
        tessera_batch / 1e3,
        &[("heed", heed_batch / 1e3), ("sqlite", sqlite_batch / 1e3)],
        overhead,
    );

    // ---- reads: fill 100,000 rows in each store
    let rows = 100_000u64;
    db.write(|tx| {
        for i in 0..rows {
            tx.put(&ks, &key(1 << 40 | i), &blob)?;
        }
        Ok(())
    })
    .unwrap();
    {
        let mut txn = heed_nosync.env.write_txn().unwrap();
        for i in 0..rows {
            heed_nosync.table.put(&mut txn, &key(1 << 40 | i), &blob).unwrap();
        }
        txn.commit().unwrap();
    }
    let sqlite_reads = sqlite(dir.path(), "sqlite-reads");
    {
        let txn = sqlite_reads.unchecked_transaction().unwrap();
        {
            let mut insert = txn.prepare("INSERT INTO kv VALUES (?1, ?2)").unwrap();
            for i in 0..rows {
                insert.execute(rusqlite::params![i as i64, &blob]).unwrap();
            }
        }
        txn.commit().unwrap();
    }
    let mut rng = fastrand::Rng::with_seed(42);
    let probes: Vec<u64> = (0..4096).map(|_| rng.u64(0..rows)).collect();
    let mut probe = 0usize;
    let mut next_probe = || {
        probe = (probe + 1) % probes.len();
        probes[probe]
    };

    let tessera_fresh = median_ns(samples, 20_000, || {
        let i = next_probe();
        db.read(|tx| Ok(black_box(tx.get(&ks, &key(1 << 40 | i))?.map(|v| v.len())))).unwrap();
    });
    let heed_fresh = median_ns(samples, 20_000, || {
        let i = next_probe();
        let txn = heed_nosync.env.read_txn().unwrap();
        black_box(heed_nosync.table.get(&txn, &key(1 << 40 | i)).unwrap().map(|v| v.len()));
    });
    let mut select = sqlite_reads.prepare("SELECT length(v) FROM kv WHERE k = ?1").unwrap();
    let sqlite_fresh = median_ns(samples, 20_000, || {
        let i = next_probe();
        black_box(select.query_row([i as i64], |row| row.get::<_, i64>(0)).unwrap());
    });
    // `Db::read_txn` always begins a new LMDB read transaction, as heed's `read_txn` does.
    let tessera_new_txn = median_ns(samples, 20_000, || {
        let i = next_probe();
        let tx = db.read_txn().unwrap();
        black_box(tx.get(&ks, &key(1 << 40 | i)).unwrap().map(|v| v.len()));
    });
    table.row(
        "point read, newest snapshot (Db::read: the kept transaction between commits; heed: a new one)",
        "ns",
        tessera_fresh,
        &[("heed", heed_fresh), ("sqlite", sqlite_fresh)],
        overhead,
    );
    table.row("point read, new read transaction (Db::read_txn)", "ns", tessera_new_txn, &[("heed", heed_fresh)], overhead);

    let snapshot = db.read_txn().unwrap();
    let tessera_inside = median_ns(samples, 100_000, || {
        let i = next_probe();
        black_box(snapshot.get(&ks, &key(1 << 40 | i)).unwrap().map(|v| v.len()));
    });
    drop(snapshot);
    let heed_txn = heed_nosync.env.read_txn().unwrap();
    let heed_inside = median_ns(samples, 100_000, || {
        let i = next_probe();
        black_box(heed_nosync.table.get(&heed_txn, &key(1 << 40 | i)).unwrap().map(|v| v.len()));
    });
    drop(heed_txn);
    table.row("point read inside one snapshot", "ns", tessera_inside, &[("heed", heed_inside)], overhead);

    let start_key = key(1 << 40 | 50_000);
    let tessera_scan = median_ns(samples, 50, || {
        db.read(|tx| {
            let total: usize = tx.range(&ks, &start_key[..]..)?.take(1000).map(|e| e.map(|(_, v)| v.len()).unwrap_or(0)).sum();
            Ok(black_box(total))
        })
        .unwrap();
    });
    let heed_scan = median_ns(samples, 50, || {
        let txn = heed_nosync.env.read_txn().unwrap();
        let bounds = (std::ops::Bound::Included(&start_key[..]), std::ops::Bound::Unbounded);
        let total: usize = heed_nosync.table.range(&txn, &bounds).unwrap().take(1000).map(|e| e.map(|(_, v)| v.len()).unwrap_or(0)).sum();
        black_box(total);
    });
    let mut scan = sqlite_reads.prepare("SELECT length(v) FROM kv WHERE k >= ?1 ORDER BY k LIMIT 1000").unwrap();
    let sqlite_scan = median_ns(samples, 50, || {
        let total: i64 = scan.query_map([50_000i64], |row| row.get::<_, i64>(0)).unwrap().map(|v| v.unwrap()).sum();
        black_box(total);
    });
    table.row("range scan of 1,000 keys", "µs", tessera_scan / 1e3, &[("heed", heed_scan / 1e3), ("sqlite", sqlite_scan / 1e3)], overhead);

    // ---- the WCDB ceiling chart, in operations per second
    let reads = 33_334usize;
    let ops = |count: usize, ns: f64| count as f64 / (ns / 1e9);
    let tessera_read = median_ns(samples, 1, || {
        db.read(|tx| {
            for j in 0..reads {
                black_box(tx.get(&ks, &key(1 << 40 | probes[j % probes.len()]))?);
            }
            Ok(())
        })
        .unwrap();
    });
    let sqlite_read = median_ns(samples, 1, || {
        let txn = sqlite_reads.unchecked_transaction().unwrap();
        {
            let mut select = txn.prepare_cached("SELECT v FROM kv WHERE k = ?1").unwrap();
            for j in 0..reads {
                black_box(select.query_row([probes[j % probes.len()] as i64], |row| row.get::<_, Vec<u8>>(0)).unwrap());
            }
        }
        txn.commit().unwrap();
    });
    table.row(
        "WCDB chart: read 33,334 (one snapshot)",
        "ops/s",
        ops(reads, tessera_read),
        &[("sqlite", ops(reads, sqlite_read))],
        Goal::AtLeast(3_000_000.0),
    );

    let writes = 100_000u64;
    let mut base = 1u64 << 50;
    let tessera_write = median_ns(samples.min(11), 1, || {
        let start = base;
        base += writes;
        db.write(|tx| {
            for i in start..start + writes {
                tx.put(&ks, &key(i), &blob)?;
            }
            Ok(())
        })
        .unwrap();
    });
    let mut sqlite_base = 1i64 << 40;
    let sqlite_write = median_ns(samples.min(11), 1, || {
        let txn = sqlite_normal.unchecked_transaction().unwrap();
        {
            let mut insert = txn.prepare_cached("INSERT INTO kv VALUES (?1, ?2)").unwrap();
            for i in 0..writes as i64 {
                insert.execute(rusqlite::params![sqlite_base + i, &blob]).unwrap();
            }
        }
        txn.commit().unwrap();
        sqlite_base += writes as i64;
    });
    table.row(
        "WCDB chart: batch write 100,000 in one transaction",
        "ops/s",
        ops(writes as usize, tessera_write),
        &[("sqlite", ops(writes as usize, sqlite_write))],
        Goal::AtLeast(1_500_000.0),
    );

    let threads = 4u64;
    let per_thread = 100_000u64;
    let batch = 1_000u64;
    let mut round = 0u64;
    let tessera_threads = median_ns(samples.min(7), 1, || {
        round += 1;
        std::thread::scope(|scope| {
            for thread in 0..threads {
                let (db, ks, blob) = (&db, &ks, &blob);
                scope.spawn(move || {
                    let origin = (round << 44) | (thread << 40);
                    for chunk in 0..per_thread / batch {
                        db.write(|tx| {
                            for i in 0..batch {
                                tx.put(ks, &key(origin + chunk * batch + i), blob)?;
                            }
                            Ok(())
                        })
                        .unwrap();
                    }
                });
            }
        });
    });
    let sqlite_path = dir.path().join("sqlite-threads");
    drop(sqlite(dir.path(), "sqlite-threads"));
    let sqlite_threads = median_ns(samples.min(7), 1, || {
        round += 1;
        std::thread::scope(|scope| {
            for thread in 0..threads {
                let (path, blob) = (&sqlite_path, &blob);
                scope.spawn(move || {
                    let connection = rusqlite::Connection::open(path).unwrap();
                    connection.busy_timeout(Duration::from_secs(30)).unwrap();
                    connection.pragma_update(None, "synchronous", "NORMAL").unwrap();
                    let origin = ((round << 44) | (thread << 40)) as i64;
                    for chunk in 0..(per_thread / batch) as i64 {
                        let txn = connection.unchecked_transaction().unwrap();
                        {
                            let mut insert = txn.prepare_cached("INSERT INTO kv VALUES (?1, ?2)").unwrap();
                            for i in 0..batch as i64 {
                                insert.execute(rusqlite::params![origin + chunk * batch as i64 + i, blob]).unwrap();
                            }
                        }
                        txn.commit().unwrap();
                    }
                });
            }
        });
    });
    let total = (threads * per_thread) as usize;
    table.row(
        "WCDB chart: 4 threads writing 400,000 (1,000 per transaction)",
        "ops/s",
        ops(total, tessera_threads),
        &[("sqlite", ops(total, sqlite_threads))],
        Goal::AtLeast(1_000_000.0),
    );
    table.finish()
}
