//! Salvage: every readable record of a damaged file, read from its bytes without LMDB, for
//! `tessera export --salvage`.
//!
//! LMDB trusts its pages, and damage to them can crash it (`docs/storage.md`, "LMDB's own
//! damage"). A salvage never opens the file through LMDB: it walks the pages with
//! [`structure::read_entries`], which skips and lists every page it cannot read, and takes
//! only what proves itself:
//!
//! - an entry counts only if its checksum holds (`docs/storage.md`, "Values") and its key
//!   comes after the previous key of its keyspace (a page reached through a damaged pointer
//!   may hold another tree's or an old commit's entries);
//! - a record counts only if it validates as a document with its collection's shared keys
//!   (`tessera.keys`), which, with the schema (`tessera.schema`), is salvaged the same way;
//! - everything else is listed in the [`SalvageReport`]: pages by number, keyspace and damage,
//!   entries by keyspace, key and reason.
//!
//! The file is read three times: the schemas and shared-key tables first, then the records
//! to count them and learn the key fields' widths (as [`crate::Db::dyn_collection`] does), then
//! the records again to hand them over, each collection's header first. It must not be
//! written to meanwhile. Only collections are salvaged (indexes are rebuilt by an import);
//! entries of other keyspaces are not read, and pages of every keyspace are reported.

use super::{DynRecord, DynSchema, key_kind, plain};
use crate::collection::SCHEMA_KEYSPACE;
use crate::collection::keys::KEYS_KEYSPACE;
use crate::collection::schema::StoredSchema;
use crate::error::{Error, Result};
use crate::store::structure::{self, LeafEntry, StructureReport, Tree};
use crate::store::{META_KEYSPACE, META_VERSION_KEY, STORAGE_FORMAT_VERSION, checksum};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use tessera_value::{Doc, SharedKeys, Value};

/// Most skipped entries a [`SalvageReport`] lists; more are counted in
/// [`SalvageReport::skipped_not_listed`].
///
/// ```
/// assert_eq!(tessera::collection::SALVAGE_SKIPPED_MAX, 1_000);
/// ```
pub const SALVAGE_SKIPPED_MAX: usize = 1_000;
/// The oldest storage format a salvage reads: the first whose values carry checksums. An
/// older file is [`Error::SalvageFormat`].
///
/// ```
/// assert_eq!(tessera::collection::SALVAGE_FORMAT_VERSION_MIN, 4);
/// ```
pub const SALVAGE_FORMAT_VERSION_MIN: u32 = 4;
/// The prefix of a collection's records keyspace.
const RECORDS_PREFIX: &str = "tessera.col.";
/// The key of the file's hash key in `tessera.meta` (`store`).
const META_HASH_KEY: &[u8] = b"hash_key";
/// The first storage format whose files have a hash key (`store::migrate`).
const HASH_KEY_FORMAT: u32 = 5;

/// Why a salvage skipped an entry.
///
/// ```
/// use tessera::collection::SkipReason;
/// assert_eq!(SkipReason::Checksum.to_string(), "the value fails its checksum");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// The value fails its checksum, or is shorter than one.
    Checksum,
    /// The key does not come after the keyspace's previous key: the page holding it was
    /// reached through a damaged pointer.
    OutOfOrder,
    /// A record that does not validate as a document with its collection's shared keys.
    Invalid(String),
    /// A schema or shared-key table that does not parse, or a name that is not UTF-8.
    Unparsable(String),
    /// A collection with records but no readable schema: its records cannot be described,
    /// and are not salvaged.
    NoSchema,
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipReason::Checksum => f.write_str("the value fails its checksum"),
            SkipReason::OutOfOrder => f.write_str("the key is out of order (its page was reached through a damaged pointer)"),
            SkipReason::Invalid(why) => write!(f, "the record does not validate: {why}"),
            SkipReason::Unparsable(why) => write!(f, "does not parse: {why}"),
            SkipReason::NoSchema => f.write_str("the collection has records but no readable schema; its records are not salvaged"),
        }
    }
}

/// An entry a salvage skipped.
///
/// ```
/// use tessera::collection::{SkipReason, SkippedEntry};
/// let skipped = SkippedEntry { keyspace: "tessera.col.notes".into(), key: vec![0, 7], reason: SkipReason::Checksum };
/// assert_eq!(skipped.to_string(), "keyspace \"tessera.col.notes\", key 0007: the value fails its checksum");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedEntry {
    /// The keyspace.
    pub keyspace: String,
    /// The key.
    pub key: Vec<u8>,
    /// Why it was skipped.
    pub reason: SkipReason,
}

impl SkippedEntry {
    /// The key in hex.
    ///
    /// ```
    /// # use tessera::collection::{SkipReason, SkippedEntry};
    /// let skipped = SkippedEntry { keyspace: "k".into(), key: vec![0xAB, 1], reason: SkipReason::OutOfOrder };
    /// assert_eq!(skipped.key_hex(), "ab01");
    /// ```
    pub fn key_hex(&self) -> String {
        self.key.iter().map(|byte| format!("{byte:02x}")).collect()
    }
}

impl std::fmt::Display for SkippedEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "keyspace {:?}, key {}: {}", self.keyspace, self.key_hex(), self.reason)
    }
}

/// What a [`salvage`] read and skipped.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("db");
/// # tessera::Db::open(&path)?.close()?;
/// let report = tessera::collection::salvage(&path, &[], &mut Vec::<String>::new())?;
/// assert!(report.is_complete());
/// assert!(report.collections.is_empty());
/// # Ok::<(), tessera::Error>(())
/// ```
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SalvageReport {
    /// The walk of the file's pages: every page skipped is one of its problems (keyspace, page
    /// and damage).
    pub structure: StructureReport,
    /// Entries skipped, at most [`SALVAGE_SKIPPED_MAX`].
    pub skipped: Vec<SkippedEntry>,
    /// Entries skipped beyond the ones listed.
    pub skipped_not_listed: u64,
    /// Each collection salvaged, with the records handed over, in the order handed over.
    pub collections: Vec<(String, u64)>,
}

impl SalvageReport {
    /// True when nothing was skipped: no damaged page, no skipped entry.
    ///
    /// ```
    /// let report = tessera::collection::SalvageReport::default();
    /// assert!(report.is_complete());
    /// ```
    pub fn is_complete(&self) -> bool {
        self.structure.is_ok() && self.skipped.is_empty() && self.skipped_not_listed == 0
    }

    fn skip(&mut self, keyspace: &str, key: &[u8], reason: SkipReason) {
        if self.skipped.len() < SALVAGE_SKIPPED_MAX {
            self.skipped.push(SkippedEntry { keyspace: keyspace.to_owned(), key: key.to_vec(), reason });
        } else {
            self.skipped_not_listed += 1;
        }
    }
}

/// Where a [`salvage`] hands what it reads: for each collection, its section's header, then
/// its records in key order.
///
/// ```
/// use tessera::collection::{DynRecord, DynSchema, SalvageSink};
/// /// Counts the records of each collection.
/// struct Counter(Vec<(String, u64)>);
/// impl SalvageSink for Counter {
///     fn section(&mut self, collection: &str, _: &DynSchema, _: u64) -> tessera::Result<()> {
///         self.0.push((collection.to_owned(), 0));
///         Ok(())
///     }
///     fn record(&mut self, _: &DynRecord) -> tessera::Result<()> {
///         self.0.last_mut().expect("a section first").1 += 1;
///         Ok(())
///     }
/// }
/// ```
pub trait SalvageSink {
    /// A collection starts: its schema (with the key fields' widths learned, if they were) and
    /// how many records follow.
    fn section(&mut self, collection: &str, schema: &DynSchema, records: u64) -> Result<()>;
    /// One record of the current collection.
    fn record(&mut self, record: &DynRecord) -> Result<()>;
}

/// Collects the records as JSON, one string each, in the order handed over (for tests and
/// small tools).
impl SalvageSink for Vec<String> {
    fn section(&mut self, _: &str, _: &DynSchema, _: u64) -> Result<()> {
        Ok(())
    }

    fn record(&mut self, record: &DynRecord) -> Result<()> {
        self.push(record.to_json());
        Ok(())
    }
}

/// Reads every readable record of the collections `names` (every collection if empty) of the
/// file at `path` from its bytes, without LMDB (see the module docs), and hands them to `sink`.
/// A damaged file is no error: what was skipped is in the report. Errors:
/// [`Error::NotADatabase`] (not an LMDB file), [`Error::ForeignDatabase`] (an LMDB file that
/// is not tessera's), [`Error::UnsupportedVersion`] (a newer format),
/// [`Error::SalvageFormat`] (a format without checksums), [`Error::NoSuchCollection`] (a
/// name the file has neither a schema nor records for), I/O and `sink`'s errors.
///
/// ```
/// use tessera::collection::{DynSchema, KeyKind, TypeDesc};
/// let schema = DynSchema {
///     version: 1,
///     key_fields: vec!["id".into()],
///     key_kinds: vec![KeyKind::U32],
///     shape: TypeDesc::Struct(vec![("id".into(), TypeDesc::Int)]),
///     indexes: vec![],
/// };
/// # let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("db");
/// let db = tessera::Db::open(&path)?;
/// let notes = db.create_dyn_collection("notes", &schema)?;
/// db.write(|tx| notes.insert_json(tx, br#"{"id": 1}"#).map(drop))?;
/// drop(notes);
/// db.close()?;
/// let mut records = Vec::new();
/// let report = tessera::collection::salvage(&path, &[], &mut records)?;
/// assert!(report.is_complete());
/// assert_eq!(records, [r#"{"id":1}"#]);
/// assert_eq!(report.collections, [("notes".to_owned(), 1)]);
/// # Ok::<(), tessera::Error>(())
/// ```
pub fn salvage(path: impl AsRef<Path>, names: &[String], sink: &mut dyn SalvageSink) -> Result<SalvageReport> {
    let path = path.as_ref();
    let mut report = SalvageReport::default();
    let catalog = read_catalog(path, &mut report)?;
    let mut collections = select(&catalog, names, &mut report)?;
    let by_keyspace: BTreeMap<String, usize> =
        collections.iter().enumerate().map(|(index, collection)| (format!("{RECORDS_PREFIX}{}", collection.name), index)).collect();
    count_records(path, &by_keyspace, &mut collections, &mut report)?;
    for collection in &mut collections {
        collection.learn_key_kinds();
    }
    hand_over(path, &by_keyspace, &collections, sink, &mut report)?;
    Ok(report)
}

/// What the first read finds: the format version and each collection's schema and table.
#[derive(Default)]
struct Catalog {
    format_version: Option<u32>,
    /// Whether `tessera.meta` holds a hash key (storage format 5 and later).
    has_hash_key: bool,
    schemas: BTreeMap<String, StoredSchema>,
    keys: BTreeMap<String, SharedKeys>,
}

/// The first read: `tessera.meta`, `tessera.schema` and `tessera.keys`. Keeps the walk's report.
fn read_catalog(path: &Path, report: &mut SalvageReport) -> Result<Catalog> {
    let mut catalog = Catalog::default();
    let mut order = KeyOrder::default();
    let mut skipped = Vec::new();
    let wanted = |name: &str| [META_KEYSPACE, SCHEMA_KEYSPACE, KEYS_KEYSPACE].contains(&name);
    let structure = structure::read_entries(path, &wanted, &mut |entry: LeafEntry<'_>| {
        if !order.follows(&entry) {
            skipped.push((entry.keyspace.to_owned(), entry.key.to_vec(), SkipReason::OutOfOrder));
            return;
        }
        if let Err(reason) = catalog.take(&entry) {
            skipped.push((entry.keyspace.to_owned(), entry.key.to_vec(), reason));
        }
    })?;
    let has_meta = structure.keyspaces.iter().any(|name| name == META_KEYSPACE);
    // A name in the main tree has no checksum: a file with tessera's other keyspaces is read
    // even when damage renamed its `tessera.meta`.
    let has_tessera_keyspace = structure.keyspaces.iter().any(|name| name.starts_with("tessera."));
    let main_tree_sound = !structure.problems.iter().any(|problem| problem.tree == Tree::Main);
    if !has_tessera_keyspace && main_tree_sound && structure.problems_not_listed == 0 {
        return Err(Error::ForeignDatabase { path: path.to_path_buf() });
    }
    if !has_meta {
        skipped.push((META_KEYSPACE.to_owned(), Vec::new(), SkipReason::Unparsable("the keyspace is missing".into())));
    }
    match catalog.format_version {
        Some(found) if found > STORAGE_FORMAT_VERSION => {
            return Err(Error::UnsupportedVersion { found, supported: STORAGE_FORMAT_VERSION });
        }
        // `tessera.meta` has no checksum either: a file with a hash key is of format 5 or
        // later, whatever its version record says, and its values carry checksums.
        Some(found) if found < SALVAGE_FORMAT_VERSION_MIN && catalog.has_hash_key => {
            let why =
                format!("storage format {found} is damaged: the file has a hash key, which only format {HASH_KEY_FORMAT} and later write");
            skipped.push((META_KEYSPACE.to_owned(), META_VERSION_KEY.to_vec(), SkipReason::Unparsable(why)));
        }
        Some(found) if found < SALVAGE_FORMAT_VERSION_MIN => {
            return Err(Error::SalvageFormat { found, min: SALVAGE_FORMAT_VERSION_MIN });
        }
        _ => {}
    }
    report.structure = structure;
    for (keyspace, key, reason) in skipped {
        report.skip(&keyspace, &key, reason);
    }
    Ok(catalog)
}

impl Catalog {
    /// Takes one entry of `tessera.meta`, `tessera.schema` or `tessera.keys`.
    fn take(&mut self, entry: &LeafEntry<'_>) -> std::result::Result<(), SkipReason> {
        if entry.keyspace == META_KEYSPACE {
            // The store's own keyspace has no checksums.
            if entry.key == META_VERSION_KEY {
                let bytes = <[u8; 4]>::try_from(entry.value).map_err(|_| SkipReason::Unparsable("not 4 bytes".into()))?;
                self.format_version = Some(u32::from_be_bytes(bytes));
            }
            self.has_hash_key |= entry.key == META_HASH_KEY;
            return Ok(());
        }
        let value = checksum::open(entry.key, entry.value).ok_or(SkipReason::Checksum)?;
        let name = std::str::from_utf8(entry.key).map_err(|_| SkipReason::Unparsable("the collection's name is not UTF-8".into()))?;
        if entry.keyspace == SCHEMA_KEYSPACE {
            let schema = tessera_value::from_slice::<StoredSchema>(value).map_err(|error| SkipReason::Unparsable(error.to_string()))?;
            self.schemas.insert(name.to_owned(), schema);
        } else {
            let keys = SharedKeys::from_bytes(value).map_err(|error| SkipReason::Unparsable(error.to_string()))?;
            self.keys.insert(name.to_owned(), keys);
        }
        Ok(())
    }
}

/// Whether each keyspace's keys come in ascending order, one keyspace after another.
#[derive(Default)]
struct KeyOrder {
    keyspace: String,
    last_key: Vec<u8>,
}

impl KeyOrder {
    /// True if `entry` comes after the previous entry of its keyspace (and remembers it).
    fn follows(&mut self, entry: &LeafEntry<'_>) -> bool {
        if self.keyspace != entry.keyspace {
            self.keyspace.clear();
            self.keyspace.push_str(entry.keyspace);
        } else if entry.key <= self.last_key.as_slice() {
            return false;
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(entry.key);
        true
    }
}

/// Whether the collections' records keyspaces come in the order of their names, as LMDB's main
/// tree keeps them: once a collection's section is open, the records of a collection before it
/// (met later only through damage to the main tree) would be handed over in the wrong section.
#[derive(Default)]
struct SectionOrder {
    current: Option<usize>,
}

impl SectionOrder {
    /// True if an entry of the collection at `index` may follow the entries met so far (and
    /// remembers its collection).
    fn follows(&mut self, index: usize) -> bool {
        if self.current.is_some_and(|current| index < current) {
            return false;
        }
        self.current = Some(index);
        true
    }
}

/// A collection being salvaged.
struct Salvaged {
    name: String,
    stored: StoredSchema,
    keys: SharedKeys,
    /// Records that proved themselves in the count.
    records: u64,
    /// The first records (key and plain document), to learn the key fields' widths from.
    samples: Vec<(Vec<u8>, Vec<u8>)>,
    /// The schema handed to the sink.
    schema: Option<DynSchema>,
}

impl Salvaged {
    /// The record stored under `key` as a plain document, or why it is skipped.
    fn decode(&self, key: &[u8], stored: &[u8]) -> std::result::Result<Vec<u8>, SkipReason> {
        let value = checksum::open(key, stored).ok_or(SkipReason::Checksum)?;
        let doc = crate::stored_doc::validate_with_keys(value, &self.keys).map_err(|error| SkipReason::Invalid(error.to_string()))?;
        plain(doc.root()).map_err(|error| SkipReason::Invalid(error.to_string()))
    }

    /// The schema handed over: the stored one, with the key fields' widths learned from the
    /// first records when it does not record them (as [`crate::Db::dyn_collection`] does).
    fn learn_key_kinds(&mut self) {
        let mut schema = DynSchema::from_stored(&self.stored);
        if schema.key_kinds.len() != schema.key_fields.len() {
            schema.key_kinds = self.learned_kinds().unwrap_or_default();
        }
        self.schema = Some(schema);
    }

    fn learned_kinds(&self) -> Option<Vec<super::KeyKind>> {
        let mut candidates = Vec::with_capacity(self.stored.key_fields.len());
        for path in &self.stored.key_fields {
            candidates.push(super::KeyKind::candidates(self.stored.shape.resolve(path)?));
        }
        let mut samples = Vec::with_capacity(self.samples.len());
        for (key, bytes) in &self.samples {
            let root = Doc::from_trusted(bytes).ok()?.root();
            let values: Option<Vec<Value<'_>>> = self.stored.key_fields.iter().map(|path| crate::query::lookup(root, path)).collect();
            samples.push((key.clone(), values?));
        }
        key_kind::learn(&candidates, &samples)
    }
}

/// The collections to salvage: `names`, or every one with a schema or records. A collection
/// with records but no readable schema is reported and left out.
fn select(catalog: &Catalog, names: &[String], report: &mut SalvageReport) -> Result<Vec<Salvaged>> {
    let with_records: BTreeSet<String> =
        report.structure.keyspaces.iter().filter_map(|name| name.strip_prefix(RECORDS_PREFIX)).map(str::to_owned).collect();
    let chosen: BTreeSet<String> =
        if names.is_empty() { catalog.schemas.keys().chain(&with_records).cloned().collect() } else { names.iter().cloned().collect() };
    let mut collections = Vec::with_capacity(chosen.len());
    for name in chosen {
        let Some(stored) = catalog.schemas.get(&name) else {
            if !with_records.contains(&name) {
                return Err(Error::NoSuchCollection { collection: name });
            }
            report.skip(SCHEMA_KEYSPACE, name.as_bytes(), SkipReason::NoSchema);
            continue;
        };
        let keys = catalog.keys.get(&name).cloned().unwrap_or_default();
        collections.push(Salvaged { name, stored: stored.clone(), keys, records: 0, samples: Vec::new(), schema: None });
    }
    Ok(collections)
}

/// The second read: counts each collection's records that prove themselves, keeps the first
/// as samples, and reports the others.
fn count_records(
    path: &Path,
    by_keyspace: &BTreeMap<String, usize>,
    collections: &mut [Salvaged],
    report: &mut SalvageReport,
) -> Result<()> {
    let mut order = KeyOrder::default();
    let mut sections = SectionOrder::default();
    let mut skipped = Vec::new();
    structure::read_entries(path, &|name| by_keyspace.contains_key(name), &mut |entry: LeafEntry<'_>| {
        let Some(&index) = by_keyspace.get(entry.keyspace) else { return };
        let collection = &mut collections[index];
        let in_order = sections.follows(index) && order.follows(&entry);
        let decoded = if in_order { collection.decode(entry.key, entry.value) } else { Err(SkipReason::OutOfOrder) };
        match decoded {
            Ok(bytes) => {
                collection.records += 1;
                if collection.samples.len() < key_kind::LEARN_RECORDS_MAX {
                    collection.samples.push((entry.key.to_vec(), bytes));
                }
            }
            Err(reason) => skipped.push((entry.keyspace.to_owned(), entry.key.to_vec(), reason)),
        }
    })?;
    for (keyspace, key, reason) in skipped {
        report.skip(&keyspace, &key, reason);
    }
    Ok(())
}

/// The third read: hands each collection's header and records to `sink`, in the collections'
/// order (which is their records keyspaces' order).
fn hand_over(
    path: &Path,
    by_keyspace: &BTreeMap<String, usize>,
    collections: &[Salvaged],
    sink: &mut dyn SalvageSink,
    report: &mut SalvageReport,
) -> Result<()> {
    let mut handed = Handed { sections: 0, records: vec![0; collections.len()], failure: None };
    let mut order = KeyOrder::default();
    let mut sections = SectionOrder::default();
    structure::read_entries(path, &|name| by_keyspace.contains_key(name), &mut |entry: LeafEntry<'_>| {
        let Some(&index) = by_keyspace.get(entry.keyspace) else { return };
        // The second read skipped (and reported) the same entries.
        if handed.failure.is_some() || !sections.follows(index) || !order.follows(&entry) {
            return;
        }
        let collection = &collections[index];
        let Ok(bytes) = collection.decode(entry.key, entry.value) else { return };
        let record = DynRecord::standalone(entry.key.to_vec(), bytes);
        let result = handed.open_sections(collections, index + 1, sink).and_then(|()| sink.record(&record));
        match result {
            Ok(()) => handed.records[index] += 1,
            Err(error) => handed.failure = Some(error),
        }
    })?;
    if let Some(error) = handed.failure {
        return Err(error);
    }
    handed.open_sections(collections, collections.len(), sink)?;
    report.collections = collections.iter().map(|collection| collection.name.clone()).zip(handed.records).collect();
    Ok(())
}

/// What the third read has handed over so far.
struct Handed {
    /// Collections whose header went out.
    sections: usize,
    /// Records handed over, per collection.
    records: Vec<u64>,
    /// The sink's first error: nothing more is handed over.
    failure: Option<Error>,
}

impl Handed {
    /// Hands over the headers of the collections before `end` not handed over yet.
    fn open_sections(&mut self, collections: &[Salvaged], end: usize, sink: &mut dyn SalvageSink) -> Result<()> {
        while self.sections < end {
            let collection = &collections[self.sections];
            let schema = collection.schema.as_ref().expect("learned before the third read");
            sink.section(&collection.name, schema, collection.records)?;
            self.sections += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipped_entries_are_listed_up_to_the_limit_then_counted() {
        let mut report = SalvageReport::default();
        for index in 0..SALVAGE_SKIPPED_MAX {
            report.skip("k", &(index as u32).to_be_bytes(), SkipReason::Checksum);
        }
        assert_eq!((report.skipped.len(), report.skipped_not_listed), (SALVAGE_SKIPPED_MAX, 0));
        report.skip("k", b"one more", SkipReason::OutOfOrder);
        assert_eq!((report.skipped.len(), report.skipped_not_listed), (SALVAGE_SKIPPED_MAX, 1));
        assert!(!report.is_complete());
    }

    #[test]
    fn keys_must_ascend_within_a_keyspace() {
        let entry = |keyspace, key| LeafEntry { keyspace, page: 2, key, value: b"" };
        let mut order = KeyOrder::default();
        assert!(order.follows(&entry("a", b"1")));
        assert!(order.follows(&entry("a", b"2")));
        assert!(!order.follows(&entry("a", b"2")), "the same key twice");
        assert!(!order.follows(&entry("a", b"10")), "a key before the previous one");
        assert!(order.follows(&entry("b", b"0")), "another keyspace starts over");
    }
}
