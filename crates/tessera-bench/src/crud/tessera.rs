//! tessera in the `crud` table: a typed collection, Buffered durability for the bulk rows.

use super::backend::{CrudBackend, Support};
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::thread::JoinHandle;
use std::time::Duration;
use tessera::collection::Record;
use tessera::{Collection, Db, DbOptions, Durability};
use tessera_bench::crud_model::{BenchDoc, BenchDoc1, BenchDoc2, BenchDoc3, Parts, parts};

/// How long a Buffered commit may wait for its flush, in the crud table's databases.
const BUFFERED_DELAY_MS_MAX: u64 = 100;

pub struct Tessera {
    db: Db,
    docs: Collection<BenchDoc>,
    records: Vec<BenchDoc>,
}

/// Opens `file_name` in `dir` with Buffered durability, and `verify_checksums` as given.
fn open_db(dir: &Path, file_name: &str, verify_checksums: bool) -> Db {
    Db::open_with(dir.join(file_name), DbOptions { verify_checksums, ..buffered_options() }).unwrap()
}

/// The crud table's database options: Buffered durability, the rest as default.
fn buffered_options() -> DbOptions {
    DbOptions { durability: Durability::Buffered { max_delay: Duration::from_millis(BUFFERED_DELAY_MS_MAX) }, ..DbOptions::default() }
}

impl Tessera {
    fn with_db(db: Db, objects: usize) -> Tessera {
        let docs = db.collection::<BenchDoc>().unwrap();
        let records = (0..objects as i32).map(|i| parts(i).into()).collect();
        Tessera { db, docs, records }
    }
}

/// Milliseconds to insert `objects` BenchDocs in one transaction, then to update them all in
/// another, in a fresh database with or without the durable change feed (the feed's cost per
/// commit, issue 19).
pub fn insert_and_update_ms(dir: &Path, objects: usize, durable_feed: bool) -> (f64, f64) {
    let options = DbOptions { durable_feed, ..buffered_options() };
    let db = Db::open_with(dir.join(if durable_feed { "feed.db" } else { "no-feed.db" }), options).unwrap();
    let mut tessera = Tessera::with_db(db, objects);
    let start = std::time::Instant::now();
    tessera.insert_all();
    let insert_ms = crate::harness::elapsed_ms(start);
    let start = std::time::Instant::now();
    tessera.update_all();
    (insert_ms, crate::harness::elapsed_ms(start))
}

/// Opens the crud table's tessera database in `dir` (also used by the scaling rows).
pub fn open_buffered(dir: &Path) -> Db {
    open_db(dir, "tessera.db", true)
}

impl CrudBackend for Tessera {
    const NAME: &'static str = "tessera";
    type Doc = BenchDoc;

    fn open(dir: &Path, objects: usize) -> Tessera {
        Tessera::with_db(open_buffered(dir), objects)
    }

    fn open_unverified(dir: &Path, objects: usize) -> Option<Tessera> {
        Some(Tessera::with_db(open_db(dir, "unverified.db", false), objects))
    }

    fn insert_all(&mut self) {
        let (docs, records) = (&self.docs, &self.records);
        self.db.write(|tx| records.iter().try_for_each(|doc| docs.insert(tx, doc).map(drop))).unwrap();
    }

    fn fetch_priority(&mut self) -> Vec<BenchDoc> {
        self.docs.filter(BenchDoc::priority().gt(2500)).fetch(&self.db).unwrap()
    }

    fn fetch_image(&mut self) -> Vec<BenchDoc> {
        self.docs.filter(BenchDoc::content().is_variant("Image")).fetch(&self.db).unwrap()
    }

    fn update_all(&mut self) {
        let (docs, records) = (&self.docs, &self.records);
        self.db.write(|tx| records.iter().try_for_each(|doc| docs.update(tx, &doc.title, |d| d.priority += 1).map(drop))).unwrap();
    }

    fn update_each_buffered(&mut self) -> Support {
        for doc in &self.records {
            self.db.write(|tx| self.docs.update(tx, &doc.title, |d| d.priority += 1)).unwrap();
        }
        Support::Measured
    }

    fn update_each_immediate(&mut self, count: usize) {
        for doc in &self.records[..count] {
            self.db.write_with(Durability::Immediate, |tx| self.docs.update(tx, &doc.title, |d| d.priority += 1)).unwrap();
        }
    }

    fn fetch_each(&mut self) {
        for doc in &self.records {
            let found = self.docs.filter(BenchDoc::title().eq(doc.title.as_str())).first(&self.db).unwrap();
            assert!(found.is_some());
        }
    }

    fn field_view(&mut self) {
        for doc in &self.records {
            let tx = self.db.read_txn().unwrap();
            let view = self.docs.get_ref(&tx, doc.title.as_str()).unwrap().expect("stored");
            assert_eq!(view.tag().unwrap().len(), doc.tag.len());
        }
    }

    fn field_decode(&mut self) -> Support {
        for doc in &self.records {
            let found = self.docs.get(&self.db, doc.title.as_str()).unwrap().expect("stored");
            assert_eq!(found.tag.len(), doc.tag.len());
        }
        Support::Measured
    }

    fn delete_all(&mut self) {
        let (docs, records) = (&self.docs, &self.records);
        self.db.write(|tx| records.iter().try_for_each(|doc| docs.delete(tx, &doc.title).map(drop))).unwrap();
    }

    fn stored_count(&mut self) -> usize {
        self.docs.all().count(&self.db).unwrap()
    }

    fn spawn_four_writers(&self, objects: usize, barrier: Arc<Barrier>) -> Vec<JoinHandle<()>> {
        let spawn = |writer: fn(Db, usize, Arc<Barrier>)| {
            let (db, barrier) = (self.db.clone(), barrier.clone());
            std::thread::spawn(move || writer(db, objects, barrier))
        };
        vec![spawn(writer::<BenchDoc>), spawn(writer::<BenchDoc1>), spawn(writer::<BenchDoc2>), spawn(writer::<BenchDoc3>)]
    }
}

/// One thread's share of the 4-thread rows: insert everything in one transaction, and later
/// delete it in one transaction.
fn writer<T: Record + From<Parts>>(db: Db, objects: usize, barrier: Arc<Barrier>) {
    let collection = db.collection::<T>().unwrap();
    let records: Vec<T> = (0..objects as i32).map(|i| parts(i).into()).collect();
    barrier.wait();
    db.write(|tx| records.iter().try_for_each(|doc| collection.insert(tx, doc).map(drop))).unwrap();
    barrier.wait();
    barrier.wait();
    db.write(|tx| records.iter().try_for_each(|doc| collection.delete(tx, &doc.key()).map(drop))).unwrap();
    barrier.wait();
}
