//! A flush raced a map resize: the `Buffered` syncer thread (and an `Immediate` committer,
//! which flushes after releasing the writer lock) called `mdb_env_sync` outside the resize
//! gate, which reads the meta pages through the map, while another thread's `grow_ahead`
//! unmapped it: SIGSEGV in `mdb_env_pick_meta` (seen in tessera-cli's replicate kill test).
//! Flushes now enter the gate as read transactions do.

use std::time::{Duration, Instant};
use tessera::store::Durability;
use tessera::{Db, DbOptions};

/// How long the test opens small databases and grows their maps while flushes run.
const RUN_MS: u64 = 2_000;
/// Commits per database: enough to grow a 64 KiB map several times.
const COMMITS_PER_DATABASE: u64 = 150;

#[test]
fn flushes_and_map_growth_do_not_race() {
    let buffered = Durability::Buffered { max_delay: Duration::from_micros(50) };
    let value = vec![7u8; 2_000];
    let started = Instant::now();
    let mut databases = 0;
    while started.elapsed() < Duration::from_millis(RUN_MS) {
        let dir = tempfile::tempdir().unwrap();
        let options = DbOptions { durability: buffered, map_size_initial_bytes: 1 << 16, ..DbOptions::default() };
        let db = Db::open_with(dir.path().join("db"), options).unwrap();
        let values = db.keyspace("values").unwrap();
        std::thread::scope(|scope| {
            for thread in 0..2u64 {
                let (db, values, value) = (&db, &values, &value);
                scope.spawn(move || {
                    for n in 0..COMMITS_PER_DATABASE {
                        // Immediate commits too: their flush runs after the writer lock is released.
                        let durability = if n.is_multiple_of(4) { Durability::Immediate } else { buffered };
                        db.write_with(durability, |tx| {
                            for i in 0..4 {
                                tx.put(values, format!("{thread}-{n}-{i}").as_bytes(), value)?;
                            }
                            Ok(())
                        })
                        .unwrap();
                    }
                });
            }
        });
        assert_eq!(db.read(|tx| tx.len(&values)).unwrap(), 2 * COMMITS_PER_DATABASE * 4);
        databases += 1;
    }
    assert!(databases > 0);
}
