//! The one trait every system in the `crud` table implements: each method does one row's work
//! on Dflat's BenchDocs, and the caller (`crud::round`) times it, so that every system is timed
//! the same way and a new peer is one impl.

use std::path::Path;
use std::sync::{Arc, Barrier};
use std::thread::JoinHandle;

/// Whether a system has a row's operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// The operation ran; its time is the row's figure.
    Measured,
    /// The system has no such operation (see the row's method for what is reported instead).
    Absent,
}

/// One system under the `crud` table, holding its open database and its records.
///
/// `open` and the `open_*` constructors are not timed; every other method is one row's timed
/// work. What a method returns is dropped only after its timer stops, so freeing fetched records
/// is never timed.
pub trait CrudBackend: Sized {
    /// The system's name as it appears among a row's peers.
    const NAME: &'static str;
    /// The record type a fetch returns.
    type Doc;

    /// Opens a new database in `dir` and builds `objects` records with `crud_model::parts`
    /// (nothing inserted yet).
    fn open(dir: &Path, objects: usize) -> Self;

    /// A second database in `dir` that reads without verifying checksums, for the rows only
    /// tessera has; `None` for a system without that option.
    fn open_unverified(_dir: &Path, _objects: usize) -> Option<Self> {
        None
    }

    /// Inserts every record in one transaction.
    fn insert_all(&mut self);

    /// Fetches and decodes the records with `priority > 2500` (not indexed).
    fn fetch_priority(&mut self) -> Vec<Self::Doc>;

    /// Fetches and decodes the records whose content is an image.
    fn fetch_image(&mut self) -> Vec<Self::Doc>;

    /// Adds 1 to every record's priority by read-modify-write, in one transaction.
    fn update_all(&mut self);

    /// The same, one transaction per record, with the system's buffered (no fsync) commit;
    /// `Absent` for a system whose commits always sync.
    fn update_each_buffered(&mut self) -> Support;

    /// Untimed: switch to durable (fsync) commits before `update_each_immediate`.
    fn before_immediate(&mut self) {}

    /// Updates the first `count` records, one durable transaction each.
    fn update_each_immediate(&mut self, count: usize);

    /// Untimed: back to buffered commits after `update_each_immediate`.
    fn after_immediate(&mut self) {}

    /// Fetches every record by title, one lookup each (tessera: a query each).
    fn fetch_each(&mut self);

    /// Fetches every record by key and reads its string field `tag`, as cheaply as the system
    /// allows.
    fn field_view(&mut self);

    /// The same, decoding the whole record; `Absent` when `field_view` already decodes the
    /// whole record (or all the system offers), and the view's figure is reported.
    fn field_decode(&mut self) -> Support;

    /// Deletes every record in one transaction.
    fn delete_all(&mut self);

    /// Untimed: the number of records stored in the table the single-thread rows use.
    fn stored_count(&mut self) -> usize;

    /// Spawns the four threads of the multi-thread rows, each on its own collection: each
    /// inserts `objects` records in one transaction between the first two waits on `barrier`,
    /// and deletes them in one transaction between the last two (see `crud::four_threads`).
    fn spawn_four_writers(&self, objects: usize, barrier: Arc<Barrier>) -> Vec<JoinHandle<()>>;
}
