//! Where a fetch by key through a query spends its time, beside a plain get; and other
//! single operations of the crud table (`MODE`; `view` is the view row: a read transaction, a
//! `get_ref` and one field per key), for callgrind. `delete` deletes all 10,000 and
//! inserts them again (each repetition starts from the full collection).
use tessera_bench::crud_model::{BenchDoc, parts};

fn main() {
    let n = 10_000;
    let records: Vec<BenchDoc> = (0..n).map(|i| parts(i).into()).collect();
    let dir = tempfile::tempdir().unwrap();
    // VERIFY=0 opens the database without checksum verification on reads.
    let verify_checksums = std::env::var("VERIFY").map_or(true, |v| v != "0");
    let options = tessera::DbOptions { verify_checksums, ..Default::default() };
    let db = tessera::Db::open_with(dir.path().join("db"), options).unwrap();
    let docs = db.collection::<BenchDoc>().unwrap();
    db.write(|tx| records.iter().try_for_each(|doc| docs.insert(tx, doc).map(drop))).unwrap();
    let mode = std::env::var("MODE").unwrap_or_default();
    let reps: usize = std::env::var("REPS").ok().and_then(|r| r.parse().ok()).unwrap_or(5);
    for _ in 0..reps {
        let start = cpu_ms();
        let wall = std::time::Instant::now();
        match mode.as_str() {
            "get" => records.iter().for_each(|r| drop(docs.get(&db, &r.title).unwrap().unwrap())),
            "scan" => (0..20).for_each(|_| assert_eq!(docs.filter(BenchDoc::priority().gt(2500)).count(&db).unwrap(), 1667)),
            "fetch" => (0..20).for_each(|_| drop(docs.filter(BenchDoc::priority().gt(2500)).fetch(&db).unwrap())),
            "none" => {}
            "build" => records.iter().for_each(|r| drop(std::hint::black_box(docs.filter(BenchDoc::title().eq(r.title.as_str()))))),
            "to_vec" => records.iter().for_each(|r| drop(std::hint::black_box(tessera::value::to_vec(r).unwrap()))),
            "serde_json" => records.iter().for_each(|r| drop(std::hint::black_box(serde_json::to_vec(r).unwrap()))),
            "view" => records.iter().for_each(|r| {
                let tx = db.read_txn().unwrap();
                assert_eq!(docs.get_ref(&tx, r.title.as_str()).unwrap().unwrap().tag().unwrap().len(), r.tag.len());
            }),
            "get_txn" => {
                let tx = db.read_txn().unwrap();
                records.iter().for_each(|r| drop(docs.get(&tx, &r.title).unwrap().unwrap()))
            }
            "query_txn" => {
                let tx = db.read_txn().unwrap();
                records.iter().for_each(|r| drop(docs.filter(BenchDoc::title().eq(r.title.as_str())).first(&tx).unwrap().unwrap()))
            }
            "delete" => {
                db.write(|tx| records.iter().try_for_each(|r| docs.delete(tx, &r.title).map(drop))).unwrap();
                db.write(|tx| records.iter().try_for_each(|doc| docs.insert(tx, doc).map(drop))).unwrap();
            }
            "update" => db.write(|tx| records.iter().try_for_each(|r| docs.update(tx, &r.title, |d| d.priority += 1).map(drop))).unwrap(),
            "image" => (0..20).for_each(|_| drop(docs.filter(BenchDoc::content().is_variant("Image")).fetch(&db).unwrap())),
            _ => records.iter().for_each(|r| drop(docs.filter(BenchDoc::title().eq(r.title.as_str())).first(&db).unwrap().unwrap())),
        }
        // CPU time of this thread; `fetch` of a large result also decodes on a helper thread,
        // which only the elapsed time counts.
        println!("{mode}: {:.2} ms of CPU, {:.2} ms elapsed", cpu_ms() - start, wall.elapsed().as_secs_f64() * 1e3);
    }
}

/// This thread's CPU time: the figure to compare while other work shares the machine.
fn cpu_ms() -> f64 {
    let mut time = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `time` is a valid timespec for the call to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut time) };
    time.tv_sec as f64 * 1e3 + time.tv_nsec as f64 / 1e6
}
