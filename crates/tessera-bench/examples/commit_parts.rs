//! Profiling aid for the commit table: `THREADS` writers (default 4) make durable (Immediate)
//! commits of one 64-byte record for `MS` milliseconds (default 1000); prints commits per second.
//! `GROUPED=1` commits through `Db::write_grouped` (the table's rows), otherwise `Db::write`.
//! Run under `strace -f -T -e trace=fdatasync,fsync` to see the flushes.
use std::time::{Duration, Instant};

fn main() {
    let threads: usize = std::env::var("THREADS").ok().and_then(|t| t.parse().ok()).unwrap_or(4);
    let duration = Duration::from_millis(std::env::var("MS").ok().and_then(|t| t.parse().ok()).unwrap_or(1000));
    let dir = tempfile::tempdir().unwrap();
    let write_map = std::env::var("WRITE_MAP").map_or(true, |w| w != "0");
    let db = tessera::Db::open_with(dir.path().join("db"), tessera::DbOptions { write_map, ..tessera::DbOptions::default() }).unwrap();
    let records = db.keyspace("records").unwrap();
    let grouped = std::env::var("GROUPED").is_ok_and(|g| g == "1");
    let start = Instant::now();
    let sequences = std::sync::Mutex::new(std::collections::HashSet::new());
    let commits: u64 = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let (db, records, sequences) = (&db, &records, &sequences);
                scope.spawn(move || {
                    let mut n = 0u64;
                    while start.elapsed() < duration {
                        let key = [(thread as u64).to_be_bytes(), n.to_be_bytes()].concat();
                        if grouped {
                            let records = records.clone();
                            let sequence = db
                                .write_grouped(move |tx| {
                                    tx.put(&records, &key, &[7u8; 64])?;
                                    Ok(tx.sequence())
                                })
                                .unwrap();
                            sequences.lock().unwrap().insert(sequence);
                        } else {
                            db.write(|tx| tx.put(records, &key, &[7u8; 64])).unwrap();
                        }
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        handles.into_iter().map(|handle| handle.join().unwrap()).sum()
    });
    let per_second = commits as f64 / start.elapsed().as_secs_f64();
    if grouped {
        let groups = sequences.lock().unwrap().len();
        println!(
            "{threads} writers, grouped: {per_second:.0} commits/s, {groups} LMDB commits ({:.2} writes each)",
            commits as f64 / groups as f64
        );
    } else {
        println!("{threads} writers: {per_second:.0} commits/s");
    }
}
