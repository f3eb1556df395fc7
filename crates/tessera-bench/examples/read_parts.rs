//! Where a point read inside one snapshot spends its time, with and without checksum checks.
fn main() {
    let verify = std::env::var("VERIFY").map_or(true, |v| v != "0");
    let reads: u64 = std::env::var("READS").ok().and_then(|r| r.parse().ok()).unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let options = tessera::DbOptions { verify_checksums: verify, ..Default::default() };
    let db = tessera::Db::open_with(dir.path().join("db"), options).unwrap();
    let ks = db.keyspace("kv").unwrap();
    let blob = vec![0xABu8; 100];
    db.write(|tx| (0..100_000u64).try_for_each(|i| tx.put(&ks, &i.to_be_bytes(), &blob))).unwrap();
    let tx = db.read_txn().unwrap();
    let start = std::time::Instant::now();
    let mut total = 0usize;
    for i in 0..reads {
        total += tx.get(&ks, &((i * 7919) % 100_000).to_be_bytes()).unwrap().map_or(0, |v| v.len());
    }
    println!("verify {verify}: {:.1} ns per read ({total})", start.elapsed().as_nanos() as f64 / reads as f64);
}
