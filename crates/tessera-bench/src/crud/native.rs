//! native_db 0.8 (on redb) in the `crud` table: the closest Rust embedded database with typed
//! models. Its commits always sync (redb's default), so it has no Buffered row.

use super::backend::{CrudBackend, Support};
use native_db::transaction::RwTransaction;
use native_db::{Builder, Database, Models, ToInput};
use std::path::Path;
use std::sync::{Arc, Barrier, OnceLock};
use std::thread::JoinHandle;
use tessera_bench::crud_model::{Content, NativeDoc, NativeDoc1, NativeDoc2, NativeDoc3, Parts, parts};

pub struct Native {
    db: Arc<Database<'static>>,
    records: Vec<NativeDoc>,
}

fn models() -> &'static Models {
    static MODELS: OnceLock<Models> = OnceLock::new();
    MODELS.get_or_init(|| {
        let mut models = Models::new();
        models.define::<NativeDoc>().unwrap();
        models.define::<NativeDoc1>().unwrap();
        models.define::<NativeDoc2>().unwrap();
        models.define::<NativeDoc3>().unwrap();
        models
    })
}

/// Read, change and write one record (native_db updates by old and new value).
fn update(rw: &RwTransaction<'_>, title: &str) {
    let old: NativeDoc = rw.get().primary(title.to_owned()).unwrap().unwrap();
    let mut new = old.clone();
    new.priority += 1;
    rw.update(old, new).unwrap();
}

impl Native {
    /// Every stored BenchDoc that `keep` accepts, by a full scan.
    fn scan(&self, keep: &dyn Fn(&NativeDoc) -> bool) -> Vec<NativeDoc> {
        let r = self.db.r_transaction().unwrap();
        let all = r.scan().primary::<NativeDoc>().unwrap();
        let found: Vec<NativeDoc> = all.all().unwrap().filter_map(|doc| doc.ok()).filter(|doc| keep(doc)).collect();
        found
    }
}

impl CrudBackend for Native {
    const NAME: &'static str = "native_db";
    type Doc = NativeDoc;

    fn open(dir: &Path, objects: usize) -> Native {
        let db = Arc::new(Builder::new().create(models(), dir.join("native.db")).unwrap());
        let records = (0..objects as i32).map(|i| parts(i).into()).collect();
        Native { db, records }
    }

    fn insert_all(&mut self) {
        let rw = self.db.rw_transaction().unwrap();
        for doc in &self.records {
            rw.insert(doc.clone()).unwrap();
        }
        rw.commit().unwrap();
    }

    fn fetch_priority(&mut self) -> Vec<NativeDoc> {
        self.scan(&|doc| doc.priority > 2500)
    }

    fn fetch_image(&mut self) -> Vec<NativeDoc> {
        self.scan(&|doc| matches!(doc.content, Some(Content::Image { .. })))
    }

    fn update_all(&mut self) {
        let rw = self.db.rw_transaction().unwrap();
        for doc in &self.records {
            update(&rw, &doc.title);
        }
        rw.commit().unwrap();
    }

    fn update_each_buffered(&mut self) -> Support {
        Support::Absent
    }

    fn update_each_immediate(&mut self, count: usize) {
        for doc in &self.records[..count] {
            let rw = self.db.rw_transaction().unwrap();
            update(&rw, &doc.title);
            rw.commit().unwrap();
        }
    }

    fn fetch_each(&mut self) {
        for doc in &self.records {
            let r = self.db.r_transaction().unwrap();
            let found: Option<NativeDoc> = r.get().primary(doc.title.clone()).unwrap();
            assert!(found.is_some());
        }
    }

    /// native_db has no single-field read: a get decodes the whole record.
    fn field_view(&mut self) {
        for doc in &self.records {
            let r = self.db.r_transaction().unwrap();
            let found: NativeDoc = r.get().primary(doc.title.clone()).unwrap().unwrap();
            assert_eq!(found.tag.len(), doc.tag.len());
        }
    }

    fn field_decode(&mut self) -> Support {
        Support::Absent
    }

    fn delete_all(&mut self) {
        let rw = self.db.rw_transaction().unwrap();
        for doc in &self.records {
            // native_db removes by value: the stored item (updated above) must be read first.
            let current: NativeDoc = rw.get().primary(doc.title.clone()).unwrap().unwrap();
            rw.remove(current).unwrap();
        }
        rw.commit().unwrap();
    }

    fn stored_count(&mut self) -> usize {
        self.scan(&|_| true).len()
    }

    fn spawn_four_writers(&self, objects: usize, barrier: Arc<Barrier>) -> Vec<JoinHandle<()>> {
        let spawn = |writer: fn(Arc<Database<'static>>, usize, Arc<Barrier>)| {
            let (db, barrier) = (self.db.clone(), barrier.clone());
            std::thread::spawn(move || writer(db, objects, barrier))
        };
        vec![spawn(writer::<NativeDoc>), spawn(writer::<NativeDoc1>), spawn(writer::<NativeDoc2>), spawn(writer::<NativeDoc3>)]
    }
}

/// One thread's share of the 4-thread rows: insert everything in one transaction, and later
/// delete it in one transaction.
fn writer<T: ToInput + From<Parts> + Clone>(db: Arc<Database<'static>>, objects: usize, barrier: Arc<Barrier>) {
    let records: Vec<T> = (0..objects as i32).map(|i| parts(i).into()).collect();
    barrier.wait();
    let rw = db.rw_transaction().unwrap();
    for doc in &records {
        rw.insert(doc.clone()).unwrap();
    }
    rw.commit().unwrap();
    barrier.wait();
    barrier.wait();
    let rw = db.rw_transaction().unwrap();
    for doc in records {
        rw.remove(doc).unwrap();
    }
    rw.commit().unwrap();
    barrier.wait();
}
