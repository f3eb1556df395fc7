//! Profiling aid for the commit table: `THREADS` writers (default 4) make durable (Immediate)
//! commits of one 64-byte record for `MS` milliseconds (default 1000); prints commits per second.
//! Run under `strace -f -T -e trace=fdatasync,fsync` to see the flushes.
use std::time::{Duration, Instant};

fn main() {
    let threads: usize = std::env::var("THREADS").ok().and_then(|t| t.parse().ok()).unwrap_or(4);
    let duration = Duration::from_millis(std::env::var("MS").ok().and_then(|t| t.parse().ok()).unwrap_or(1000));
    let dir = tempfile::tempdir().unwrap();
    let db = tessera::Db::open(dir.path().join("db")).unwrap();
    let records = db.keyspace("records").unwrap();
    let start = Instant::now();
    let commits: u64 = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let (db, records) = (&db, &records);
                scope.spawn(move || {
                    let mut n = 0u64;
                    while start.elapsed() < duration {
                        let key = [(thread as u64).to_be_bytes(), n.to_be_bytes()].concat();
                        db.write(|tx| tx.put(records, &key, &[7u8; 64])).unwrap();
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        handles.into_iter().map(|handle| handle.join().unwrap()).sum()
    });
    println!("{threads} writers: {:.0} commits/s", commits as f64 / start.elapsed().as_secs_f64());
}
